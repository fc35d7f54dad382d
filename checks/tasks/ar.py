"""Associative recall (docs/theory.md §3): ``[BOS] x_1..x_n [QUERY] q`` -> the token
right after the first occurrence of q; plus the per-position version (MQAR).

Promise: q occurs in x at a first position ``j <= n - 1``; the answer is
``x_{j+1}`` (valid instances exist for ``n >= 2``). AR is c-gram retrieval with
c = 2 and shares its sampler (:func:`checks.tasks.common.sample_retrieval`):
``generate`` draws x uniformly, then q uniformly among the distinct symbols of
x_1..x_{n-1}, without rejection (``params["first_position"]`` records j). MQAR:
:func:`mqar_reference`; Zoology's npz batches load with :func:`load_zoology_npz`.

Details (the promise, examples, the distribution): docs/internals/tasks.md#ar
"""
from __future__ import annotations

import operator
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st

from rnngap.constructions.machine.vocab import number_token
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as LR

from .cgram import make_batch, retrieval_strategy
from .common import (
    ENUMERATION_LIMIT,
    TaskBatch,
    as_strategy_bounds,
    check_alphabet,
    check_batch,
    check_n,
    check_rng,
    enumerate_retrieval,
    sample_retrieval,
    split_instance,
)
from .spec import TaskSpec

TASK = "AR"
MIN_N = 2
DEFAULT_ALPHABET = 4
MQAR_NO_PREDICTION = -1
"""What :func:`mqar_reference` returns at a position whose token has not occurred before."""
ZOOLOGY_IGNORE = -100
"""Label of unscored positions in Zoology's batches (PyTorch's ignore_index)."""


def generate(rng: np.random.Generator, n: int, batch: int, alphabet: int = DEFAULT_ALPHABET) -> TaskBatch:
    """``batch`` AR instances (distribution in the module docstring).

    Tokens ``[batch, n + 3]``. ``params``: ``first_position`` (int64 ``[batch]``, the
    1-based j of q's first occurrence), ``valid_starts`` (int64 ``[batch]``, the number
    of distinct queries that x admits), ``c`` = 2.
    """
    check_rng(rng)
    n = check_n(n, MIN_N, TASK)
    batch = check_batch(batch, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    x, starts, counts = sample_retrieval(rng, n, batch, alphabet, 1)
    return make_batch(x, starts, n, alphabet, 2, "ar", counts)


def enumerate_all(n: int, alphabet: int = 3, *, limit: int = ENUMERATION_LIMIT) -> TaskBatch:
    """Every valid AR instance: sequences in lexicographic order (x_1 most
    significant), for each its distinct queries q ordered by first occurrence j.
    There are ``a * a * (a^(n-1) - (a-1)^(n-1))`` of them. ValueError if ``a^n`` or
    that count exceeds ``limit``."""
    n = check_n(n, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    x, starts = enumerate_retrieval(n, alphabet, 1, limit, f"{TASK}.enumerate_all")
    return make_batch(x, starts, n, alphabet, 2, "ar")


def reference(tokens: Any) -> int:
    """The answer token of an AR instance, in plain Python.

    ValueError (naming the position) if there is no ``[BOS]`` / ``[QUERY]``, a token
    that must be a number is not, or q does not occur in ``x_1..x_{n-1}``.

    >>> reference([0, 34, 32, 34, 33, 9, 34])
    32
    """
    data, suffix = split_instance(tokens, TASK, suffix_len=1)
    n = len(data)
    q = suffix[0]
    for j in range(n - 1):  # 0-based j: x_{j+1} in 1-based terms, successor exists
        if data[j] == q:
            return number_token(data[j + 1])
    where = "only as x_n (no successor)" if n >= 1 and data[n - 1] == q else "nowhere"
    raise ValueError(
        f"{TASK}: position {n + 2}: query {q} occurs {where} in x_1..x_{n}; "
        f"promise: first occurrence at j <= n - 1 = {n - 1}"
    )


def instances(n_min: int = MIN_N, n_max: int = 8, alphabet: int = DEFAULT_ALPHABET) -> st.SearchStrategy:
    """Hypothesis strategy of valid instances ``(tokens list, answer token)``:
    n in ``[n_min, n_max]``, x over ``0..alphabet-1``, q drawn among the symbols of
    ``x_1..x_{n-1}`` (by first-occurrence position)."""
    lo, hi = as_strategy_bounds(n_min, n_max, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    return retrieval_strategy(lo, hi, alphabet, 1)


# --------------------------------------------------------------------------- MQAR


def mqar_reference(seq: Sequence[int]) -> list[int]:
    """Per-position associative recall on a raw integer sequence (no ``[BOS]``).

    For each position t (0-based)::

        out[t] = seq[j + 1]  for the smallest j < t with seq[j] == seq[t]
        out[t] = -1          if seq[t] does not occur before t

    Since j < t, ``j + 1 <= t`` is always inside the sequence; ``j + 1 == t`` happens
    exactly when the first earlier occurrence is the immediately preceding token
    (``seq[t-1] == seq[t]`` and no earlier one), and then ``out[t] = seq[t]``.
    Positions that are not queries in the task's sense still get a prediction when
    their token repeats (Zoology scores only its designated query positions, see
    :func:`load_zoology_npz`). Values must be integers >= 0, so -1 is unambiguous.

    Example (key-value pairs, then queries)::

        >>> mqar_reference([5, 50, 6, 60, 6, 5, 7])
        [-1, -1, -1, -1, 60, 50, -1]
        >>> mqar_reference([3, 3, 3])
        [-1, 3, 3]
    """
    values = []
    for pos, v in enumerate(seq):
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"mqar_reference: position {pos}: expected an integer, got {v!r}")
        try:
            iv = int(operator.index(v))
        except TypeError:
            raise TypeError(
                f"mqar_reference: position {pos}: expected an integer, got {type(v).__name__} {v!r}"
            ) from None
        if iv < 0:
            raise ValueError(f"mqar_reference: position {pos}: values must be >= 0, got {iv}")
        values.append(iv)
    first: dict[int, int] = {}
    out = []
    for t, v in enumerate(values):
        j = first.get(v)
        if j is None:
            out.append(MQAR_NO_PREDICTION)
            first[v] = t
        else:
            out.append(values[j + 1])
    return out


def load_zoology_npz(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Read Zoology-style MQAR batches: ``{name: (inputs, labels)}``.

    The file holds, per batch ``name``, the arrays ``name_inputs`` and
    ``name_labels`` (equal 2-D integer shapes ``[batch, L]``). ``labels[b, t]`` is the
    token the model must predict *at* position t (i.e. after reading
    ``inputs[b, :t+1]``), or ``-100`` where unscored. In Zoology's generator
    (zoology/data/multiquery_ar.py) the first ``2 * num_kv_pairs`` positions are
    key-value pairs ``k_1 v_1 k_2 v_2 ...`` (keys distinct, drawn from the lower half
    of the vocabulary, values from the upper half); each key is queried once at an
    even position after them, labelled with its value; the other positions are 0
    (``rnq0``) or uniform random tokens (``rnq1``) and unscored.

    FileNotFoundError if the file is missing, ValueError for an unpaired or
    unexpected key, mismatched shapes or non-integer arrays. Names come back sorted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Zoology MQAR file not found: {path}")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with np.load(path, allow_pickle=False) as data:
        keys = set(data.files)
        names = set()
        for key in keys:
            if key.endswith("_inputs"):
                names.add(key[: -len("_inputs")])
            elif key.endswith("_labels"):
                names.add(key[: -len("_labels")])
            else:
                raise ValueError(f"{path}: unexpected key {key!r} (expected NAME_inputs / NAME_labels)")
        for name in sorted(names):
            ki, kl = f"{name}_inputs", f"{name}_labels"
            missing = [k for k in (ki, kl) if k not in keys]
            if missing:
                raise ValueError(f"{path}: batch {name!r} lacks {missing}")
            inputs, labels = np.asarray(data[ki]), np.asarray(data[kl])
            if inputs.ndim != 2 or inputs.shape != labels.shape:
                raise ValueError(
                    f"{path}: {name!r}: inputs {inputs.shape} and labels {labels.shape} must be "
                    "equal 2-D shapes [batch, L]"
                )
            for k, arr in ((ki, inputs), (kl, labels)):
                if not np.issubdtype(arr.dtype, np.integer):
                    raise ValueError(f"{path}: {k} must be an integer array, got {arr.dtype}")
            out[name] = (inputs.astype(np.int64), labels.astype(np.int64))
    return out


def _spec():
    return TaskSpec(
        name="ar", description="associative recall: [BOS] x_1..x_n [QUERY] q -> the token after q's first occurrence",
        reference=reference, generate=generate, enumerate_all=enumerate_all,
        reduction=LR.AR, reduction_alphabet=lambda n: n + 2, data_length=lambda n: 2 * n,
        cc_split=lambda n, a: cc.ar_split(n, reference, alphabet=a),
        family="ar", c=2, min_n=MIN_N, default_alphabet=DEFAULT_ALPHABET)


def _mqar_spec():
    return TaskSpec(
        name="mqar", description="per-position associative recall on a raw integer sequence (Zoology's MQAR)",
        reference=mqar_reference, family="mqar", aliases=("zoology-mqar",), predict="ar",
        predict_help="per-position associative recall over int token sequences (.npy)")


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`)."""
MQAR_SPEC = _mqar_spec()
"""MQAR's spec (the per-position version; ``rnngap predict ar`` runs it)."""
