"""Reference for ITER(n) (claim T5-hierarchy, constructions/models/cot_hierarchy.py), in
plain Python: the answer of an instance and the orbit a, g(a), ..., g^t(a) of
g(x) = tent((x + 1) mod 2n). Imports no construction code, only the token ids.

Example::

    >>> orbit(3, 0, 3)                 # m = 6: 0 -> tent(1) = 2 -> tent(3) = 5 -> tent(0) = 0
    [0, 2, 5, 0]
"""
from __future__ import annotations

from rnngap.constructions.machine.vocab import BOS, FALSE, NUMBER_BASE, QUERY, TRUE

from .spec import TaskSpec

__all__ = ["orbit", "reference"]


def reference(tokens) -> int:
    """``[BOS] z_1..z_n [QUERY] (2n + t) a`` -> [TRUE] iff g^t(a) >= n, where
    g(x) = tent((x + 1) mod 2n), tent(y) = 2y if y < n else 4n - 1 - 2y; the
    padding z_j, like a, is a value 0..2n-1 (anything else is refused)."""
    toks = [int(v) for v in tokens]
    if toks[0] != BOS or len(toks) < 4 or toks[-3] != QUERY:
        raise ValueError(f"not an ITER instance: {toks}")
    n = len(toks) - 4
    m = 2 * n
    t = toks[-2] - NUMBER_BASE - m
    x = toks[-1] - NUMBER_BASE
    if not (0 <= t <= n * n and 0 <= x < m):
        raise ValueError(f"ITER(n={n}): step token or value out of range: {toks}")
    if not all(NUMBER_BASE <= z < NUMBER_BASE + m for z in toks[1:n + 1]):
        raise ValueError(f"ITER(n={n}): the padding z_1..z_n must be values 0..{m - 1}: {toks}")
    for _ in range(t):
        y = (x + 1) % m
        x = 2 * y if y < n else 2 * m - 1 - 2 * y
    return TRUE if x >= n else FALSE


def orbit(n: int, a: int, t: int) -> list[int]:
    """a, g(a), ..., g^t(a) (plain Python, as in :func:`reference`)."""
    m, out, x = 2 * n, [a], a
    for _ in range(t):
        y = (x + 1) % m
        x = 2 * y if y < n else 2 * m - 1 - 2 * y
        out.append(x)
    return out


def _spec():
    return TaskSpec(name="iterate", description="ITER(n): [BOS] z_1..z_n [QUERY] (2n + t) a -> whether g^t(a) >= n",
                    reference=reference, family="iterate", aliases=("iter",))


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`)."""
