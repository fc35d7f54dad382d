"""``rnngap.tasks``: the tasks' generators, references and lower-bound reductions.

    >>> import rnngap
    >>> inst = rnngap.tasks.reduction("index", n=4, seed=0)
    >>> inst.x, inst.i, inst.answer == rnngap.tasks.task("index").reference(inst.tokens)
    ((1, 1, 1, 0), 2, True)

:func:`reduction` draws an instance of the Index reduction's family of a task
(docs/theory.md §5): Alice's prefix of a bit string x, Bob's suffix of a query
i, the alphabet the lower bound needs. It is where the theorems bite.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnngap.checks.tasks import TASKS, TaskSpec, task

__all__ = ["Instance", "TASKS", "TaskSpec", "reduction", "task"]


@dataclass(frozen=True)
class Instance:
    """A reduction instance: its tokens, the expected answer token, and the Index
    instance (x in {0,1}^n, i in 1..n) it encodes."""

    tokens: list[int]
    answer: int
    x: tuple[int, ...]
    i: int


def reduction(name: str, n: int, seed: int) -> Instance:
    """An instance of the Index reduction's family for task ``name`` (index, ar,
    cgram, counting, istree) with n data bits, drawn with ``seed``: x uniform in
    {0,1}^n, i uniform in 1..n."""
    spec = task(name)
    if spec.reduction is None:
        raise ValueError(f"task {spec.name!r} has no reduction from Index")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    rng = np.random.default_rng(seed)
    x = tuple(int(v) for v in rng.integers(0, 2, int(n)))
    i = int(rng.integers(1, int(n) + 1))
    red = spec.reduction
    return Instance([int(t) for t in red.instance(x, i)], int(red.expected(x, i)), x, i)
