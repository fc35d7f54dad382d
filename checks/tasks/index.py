"""Index (docs/theory.md §3): ``[BOS] x_1..x_n [QUERY] i`` -> ``x_i``.

``x_j`` are symbols ``0..a-1`` (number tokens), ``i`` is the number token of an
index ``1 <= i <= n``; the answer is the token of ``x_i``. Every (x, i) with
``n >= 1`` is a valid instance.

Example (a = 2, n = 3)::

    [BOS] 1 0 1 [QUERY] 2   ->  0
    ids: [0, 33, 32, 33, 9, 34] -> 32

Generator distribution (``generate``): x uniform over ``{0..a-1}^n`` (one
``rng.integers(0, a, (batch, n))`` call), then i uniform over ``1..n`` (one
``rng.integers(1, n + 1, batch)`` call), independent. This is the uniform
distribution over all ``a^n * n`` valid instances.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from rnngap.constructions.machine.vocab import number_token
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as LR

from .common import (
    ENUMERATION_LIMIT,
    TaskBatch,
    as_strategy_bounds,
    assemble,
    check_alphabet,
    check_batch,
    check_enumeration_size,
    check_n,
    check_rng,
    enumeration_sequences,
    split_instance,
)
from .spec import TaskSpec

TASK = "Index"
MIN_N = 1
DEFAULT_ALPHABET = 2
"""Binary data, the alphabet of the one-way communication lower bound (§5)."""


def _params(n: int, alphabet: int, query_index: np.ndarray) -> dict[str, Any]:
    return {
        "task": "index",
        "n": n,
        "alphabet": alphabet,
        "length": n + 3,
        "max_number": max(n, alphabet - 1),
        "query_index": query_index,
    }


def _build(x: np.ndarray, i: np.ndarray, n: int, alphabet: int) -> TaskBatch:
    tokens = assemble(x, (i + number_token(0))[:, None])
    answers = x[np.arange(x.shape[0]), i - 1] + number_token(0)
    return TaskBatch(tokens, answers.astype(np.int64), _params(n, alphabet, i.astype(np.int64)))


def generate(rng: np.random.Generator, n: int, batch: int, alphabet: int = DEFAULT_ALPHABET) -> TaskBatch:
    """``batch`` uniform Index instances of length n (see the module docstring).

    Returns a :class:`TaskBatch` with tokens ``[batch, n + 3]``; ``params`` has
    ``query_index`` (int64 ``[batch]``, i in 1..n).
    """
    check_rng(rng)
    n = check_n(n, MIN_N, TASK)
    batch = check_batch(batch, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    x = rng.integers(0, alphabet, size=(batch, n), dtype=np.int64)
    i = rng.integers(1, n + 1, size=batch, dtype=np.int64)
    return _build(x, i, n, alphabet)


def enumerate_all(n: int, alphabet: int = 3, *, limit: int = ENUMERATION_LIMIT) -> TaskBatch:
    """Every valid Index instance: all ``a^n`` sequences (lexicographic, x_1 most
    significant) times all queries ``i = 1..n`` (inner loop). ``a^n * n``
    instances; ValueError if that exceeds ``limit``."""
    n = check_n(n, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    check_enumeration_size(alphabet ** n * n, limit, f"{TASK}.enumerate_all: {alphabet}^{n} * {n} instances")
    seqs = enumeration_sequences(n, alphabet, limit, f"{TASK}.enumerate_all")
    x = np.repeat(seqs, n, axis=0)
    i = np.tile(np.arange(1, n + 1, dtype=np.int64), seqs.shape[0])
    return _build(x, i, n, alphabet)


def reference(tokens: Any) -> int:
    """The answer token of an Index instance, in plain Python.

    ValueError (naming the position) if there is no ``[BOS]`` / ``[QUERY]``, a data
    or query token is not a number, or i is outside ``1..n``.

    >>> reference([0, 33, 32, 33, 9, 34])
    32
    """
    data, suffix = split_instance(tokens, TASK, suffix_len=1)
    n = len(data)
    i = suffix[0]
    if not 1 <= i <= n:
        raise ValueError(f"{TASK}: position {n + 2}: query index {i} outside 1..{n} (n = {n})")
    return number_token(data[i - 1])


def instances(n_min: int = MIN_N, n_max: int = 8, alphabet: int = DEFAULT_ALPHABET) -> st.SearchStrategy:
    """Hypothesis strategy of valid instances ``(tokens list, answer token)``:
    n in ``[n_min, n_max]``, x over ``0..alphabet-1``, i in ``1..n``."""
    lo, hi = as_strategy_bounds(n_min, n_max, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)

    @st.composite
    def _draw(draw: Any) -> tuple[list[int], int]:
        n = draw(st.integers(lo, hi))
        x = draw(st.lists(st.integers(0, alphabet - 1), min_size=n, max_size=n))
        i = draw(st.integers(1, n))
        tokens = assemble(np.array([x], dtype=np.int64), np.array([[number_token(i)]]))[0]
        return [int(t) for t in tokens], number_token(x[i - 1])

    return _draw()


def _spec():
    return TaskSpec(
        name="index", description="Index: [BOS] x_1..x_n [QUERY] i -> x_i",
        reference=reference, generate=generate, enumerate_all=enumerate_all,
        reduction=LR.INDEX, reduction_alphabet=lambda n: 2, data_length=lambda n: n,
        cc_split=lambda n, a: cc.index_split(n, reference, alphabet=a),
        family="index", min_n=MIN_N, default_alphabet=DEFAULT_ALPHABET)


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`)."""
