"""Counting (docs/theory.md §3): ``[BOS] x_1..x_n [QUERY] q t`` -> number 1 if q occurs
more than t times in x, else number 0.

q is any symbol of the alphabet, t a number in ``0..n``; every such instance with
``n >= 1`` is valid. Answers are the number tokens ``number_token(1)`` /
``number_token(0)`` (ids 33 / 32). ``generate`` draws x and q uniformly, then t
by ``threshold``: ``"uniform"`` (the default: uniform over all valid instances,
labels unbalanced) or ``"near"`` (t = count - 1 or count: the hardest
thresholds, labels balanced whenever q occurs).

Details (examples, the distributions): docs/internals/tasks.md#counting
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

TASK = "Counting"
MIN_N = 1
DEFAULT_ALPHABET = 3
THRESHOLD_MODES = ("uniform", "near")


def _build(x: np.ndarray, q: np.ndarray, t: np.ndarray, n: int, alphabet: int, mode: str) -> TaskBatch:
    count = (x == q[:, None]).sum(axis=1).astype(np.int64)
    suffix = np.stack([q + number_token(0), t + number_token(0)], axis=1)
    tokens = assemble(x, suffix)
    answers = np.where(count > t, number_token(1), number_token(0)).astype(np.int64)
    params = {
        "task": "counting",
        "n": n,
        "alphabet": alphabet,
        "length": n + 4,
        "max_number": max(n, alphabet - 1, 1),
        "threshold_mode": mode,
        "query": q.astype(np.int64),
        "threshold": t.astype(np.int64),
        "count": count,
    }
    return TaskBatch(tokens, answers, params)


def generate(rng: np.random.Generator, n: int, batch: int, alphabet: int = DEFAULT_ALPHABET,
             *, threshold: str = "uniform") -> TaskBatch:
    """``batch`` Counting instances (distributions in the module docstring).

    Tokens ``[batch, n + 4]``. ``params``: ``query``, ``threshold`` (t), ``count``
    (occurrences of q in x), each int64 ``[batch]``, and ``threshold_mode``.
    """
    check_rng(rng)
    n = check_n(n, MIN_N, TASK)
    batch = check_batch(batch, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    if threshold not in THRESHOLD_MODES:
        raise ValueError(f"{TASK}: threshold must be one of {THRESHOLD_MODES}, got {threshold!r}")
    x = rng.integers(0, alphabet, size=(batch, n), dtype=np.int64)
    q = rng.integers(0, alphabet, size=batch, dtype=np.int64)
    if threshold == "uniform":
        t = rng.integers(0, n + 1, size=batch, dtype=np.int64)
    else:
        count = (x == q[:, None]).sum(axis=1)
        t = np.maximum(count - rng.integers(0, 2, size=batch, dtype=np.int64), 0)
    return _build(x, q, t, n, alphabet, threshold)


def enumerate_all(n: int, alphabet: int = 3, *, limit: int = ENUMERATION_LIMIT) -> TaskBatch:
    """Every valid Counting instance: sequences in lexicographic order (x_1 most
    significant), then q = 0..a-1, then t = 0..n (innermost). ``a^n * a * (n+1)``
    instances; ValueError if that exceeds ``limit``."""
    n = check_n(n, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    check_enumeration_size(
        alphabet ** n * alphabet * (n + 1), limit,
        f"{TASK}.enumerate_all: {alphabet}^{n} * {alphabet} * {n + 1} instances",
    )
    seqs = enumeration_sequences(n, alphabet, limit, f"{TASK}.enumerate_all")
    per_seq = alphabet * (n + 1)
    x = np.repeat(seqs, per_seq, axis=0)
    q = np.tile(np.repeat(np.arange(alphabet, dtype=np.int64), n + 1), seqs.shape[0])
    t = np.tile(np.arange(n + 1, dtype=np.int64), seqs.shape[0] * alphabet)
    return _build(x, q, t, n, alphabet, "all")


def reference(tokens: Any) -> int:
    """The answer token of a Counting instance, in plain Python.

    ValueError (naming the position) if there is no ``[BOS]`` / ``[QUERY]``, a token
    that must be a number is not, or t is outside ``0..n``.

    >>> reference([0, 34, 32, 34, 33, 9, 34, 33])
    33
    """
    data, suffix = split_instance(tokens, TASK, suffix_len=2)
    n = len(data)
    q, t = suffix
    if not 0 <= t <= n:
        raise ValueError(f"{TASK}: position {n + 3}: threshold t = {t} outside 0..{n} (n = {n})")
    count = 0
    for v in data:
        if v == q:
            count += 1
    return number_token(1) if count > t else number_token(0)


def instances(n_min: int = MIN_N, n_max: int = 8, alphabet: int = DEFAULT_ALPHABET) -> st.SearchStrategy:
    """Hypothesis strategy of valid instances ``(tokens list, answer token)``:
    n in ``[n_min, n_max]``, x over ``0..alphabet-1``, q any symbol, t in ``0..n``."""
    lo, hi = as_strategy_bounds(n_min, n_max, MIN_N, TASK)
    alphabet = check_alphabet(alphabet, TASK)

    @st.composite
    def _draw(draw: Any) -> tuple[list[int], int]:
        n = draw(st.integers(lo, hi))
        x = draw(st.lists(st.integers(0, alphabet - 1), min_size=n, max_size=n))
        q = draw(st.integers(0, alphabet - 1))
        t = draw(st.integers(0, n))
        suffix = np.array([[number_token(q), number_token(t)]], dtype=np.int64)
        tokens = assemble(np.array([x], dtype=np.int64), suffix)[0]
        return [int(t_) for t_ in tokens], number_token(int(x.count(q) > t))

    return _draw()


def _spec():
    return TaskSpec(
        name="counting", description="Counting: [BOS] x_1..x_n [QUERY] q t -> whether q occurs more than t times",
        reference=reference, generate=generate, enumerate_all=enumerate_all,
        reduction=LR.COUNTING, reduction_alphabet=lambda n: n + 1, data_length=lambda n: n,
        cc_split=lambda n, a: cc.counting_split(n, reference, alphabet=a),
        family="counting", min_n=MIN_N, default_alphabet=DEFAULT_ALPHABET)


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`)."""
