"""The hard instance family: the image of the Index reductions of
:mod:`lowerbounds.reductions` (docs/theory.md §1 "Where the theorem bites").

An Index instance (x in {0,1}^m, i in 1..m) maps to ``alice(x) + bob(i, m)`` of
the target task; the one-way lower bound lives on these instances, so the
positive side (the Transformers of T4.6-up, the hybrids, the RAG models) is
checked on them too, with the reduction's alphabet. ``m`` (``n_bits``) is the
number of Index bits, ``n`` = :func:`data_length` the target task's data length.
:func:`reduction_instances` gives every (x, i), :func:`sampled_reduction_instances`
a seeded sample with adversarial first occurrences, :func:`reduction_rows` given
rows; all return ``(tokens, answers)`` int64 arrays.

Example::

    >>> toks, ans = reduction_instances("ar", 2)     # 4 strings x 2 queries
    >>> toks.shape, toks[0].tolist(), int(ans[0])
    ((8, 7), [0, 34, 32, 35, 32, 9, 34], 32)

Details (the family's table, the sampler): docs/internals/tasks.md#hard
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rnngap.constructions.machine.vocab import FALSE, NUMBER_BASE, TRUE
from rnngap.lowerbounds import reductions as LR

from . import task as _spec_of
from .common import check_int, check_rng

TASKS = ("index", "ar", "cgram", "counting", "istree")
"""The task families with an Index reduction (their specs: :func:`spec`)."""
EXHAUSTIVE_MAX_BITS = 16
"""Largest m :func:`reduction_instances` enumerates (m 2^m instances)."""


def spec(task: str, c: int = 3):
    """The :class:`checks.tasks.spec.TaskSpec` of family ``task`` (c-gram: length c)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    return _spec_of(f"cgram(c={c})" if task == "cgram" else task)


def reduction(task: str, c: int = 3) -> LR.Reduction:
    """The :class:`lowerbounds.reductions.Reduction` of ``task`` (c-gram: length c)."""
    return spec(task, c).reduction


def data_length(task: str, n_bits: int, c: int = 3) -> int:
    """n of the target task for m = ``n_bits`` Index bits (the number of data
    tokens x_1..x_n; IsTree: the number of vertices N = m + 3)."""
    m = check_int(n_bits, "n_bits", minimum=1)
    return spec(task, c).data_length(m)


def index_bits(task: str, n: int, c: int = 3) -> int:
    """The largest m with :func:`data_length` (m) <= n (the Index bits that fit a
    target data length n; 0 if none)."""
    s = spec(task, c)
    if s.reduction_nodes is not None:        # IsTree: N = m + 3 vertices
        return max(0, int(n) - s.reduction_nodes(0))
    return int(n) // s.data_length(1)


def alphabet(task: str, n_bits: int, c: int = 3) -> int:
    """The data alphabet the reduction writes (numbers 0..a-1 occur among the data)."""
    m = check_int(n_bits, "n_bits", minimum=1)
    return spec(task, c).reduction_alphabet(m)


def reduction_rows(task: str, xs: Any, queries: Any, c: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The reduction's instances ``alice(x_b) + bob(i_b, m)`` for bit rows ``xs``
    ``[B, m]`` and queries ``[B]`` (1-based), with their answers."""
    red = reduction(task, c)
    x = np.asarray(xs, dtype=np.int64)
    q = np.asarray(queries, dtype=np.int64)
    if x.ndim != 2 or q.shape != (x.shape[0],):
        raise ValueError(f"reduction_rows: xs [B, m] and queries [B], got {x.shape}, {q.shape}")
    m = x.shape[1]
    if q.size and (q.min() < 1 or q.max() > m):
        raise ValueError(f"reduction_rows: queries must lie in 1..{m}")
    prefixes = red.prefixes(x)
    suffix = {int(i): red.bob(int(i), m) for i in np.unique(q)}
    S = np.array([suffix[int(i)] for i in q], dtype=np.int64).reshape(len(q), -1)
    tokens = np.concatenate([prefixes, S], axis=1)
    bit = x[np.arange(len(q)), q - 1]
    if task == "istree":
        answers = np.where(bit == 0, TRUE, FALSE)
    else:
        answers = bit + NUMBER_BASE
    return tokens.astype(np.int64), answers.astype(np.int64)


def reduction_instances(task: str, n_bits: int, c: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Every instance of the image: all x in {0,1}^m (lexicographic), every
    i = 1..m (fastest). ValueError above :data:`EXHAUSTIVE_MAX_BITS`."""
    m = check_int(n_bits, "n_bits", minimum=1, maximum=EXHAUSTIVE_MAX_BITS)
    codes = np.arange(1 << m, dtype=np.int64)
    xs = (codes[:, None] >> np.arange(m - 1, -1, -1)) & 1
    X = np.repeat(xs, m, axis=0)
    Q = np.tile(np.arange(1, m + 1, dtype=np.int64), 1 << m)
    return reduction_rows(task, X, Q, c)


def sampled_reduction_instances(rng: np.random.Generator, task: str, n_bits: int, count: int, c: int = 3,
                                top: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """``count`` seeded instances of the image with adversarial first occurrences
    (see the module doc): row 0 queries i = m with x = 1^m except x_m = 0, row 1
    queries i = m with x = 1^m; of the rest, every other row queries i uniform
    among the ``top`` largest, the others i uniform in 1..m; x uniform.
    Consumes ``rng`` in a fixed order (x, then the queries)."""
    check_rng(rng)
    m = check_int(n_bits, "n_bits", minimum=1)
    count = check_int(count, "count", minimum=1)
    x = rng.integers(0, 2, size=(count, m), dtype=np.int64)
    hi = rng.integers(max(1, m - top + 1), m + 1, size=count, dtype=np.int64)
    uni = rng.integers(1, m + 1, size=count, dtype=np.int64)
    q = np.where(np.arange(count) % 2 == 0, hi, uni)
    x[0] = 1
    x[0, m - 1] = 0
    q[0] = m
    if count > 1:
        x[1] = 1
        q[1] = m
    return reduction_rows(task, x, q, c)
