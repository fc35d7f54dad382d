"""The ITER(n) reference (checks/tasks/iterate.py): the orbit follows
g(x) = tent((x + 1) mod 2n) computed here from its definition (tent folds
0..2n-1 onto itself, a permutation), the answer reads the orbit's last value, and
the module imports no construction code besides the vocabulary."""
from __future__ import annotations

import doctest

import pytest

import rnngap.checks.tasks.iterate as IT
from rnngap.constructions.machine.vocab import BOS, FALSE, NUMBER_BASE, QUERY, TRUE


def g(x, n):
    y = (x + 1) % (2 * n)
    return 2 * y if 2 * y < 2 * n else 2 * (2 * n - y) - 1


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_orbit_and_answer(n):
    m = 2 * n
    assert sorted(g(x, n) for x in range(m)) == list(range(m))
    for a in range(m):
        for t in range(n * n + 1):
            orb = IT.orbit(n, a, t)
            assert orb[0] == a and all(orb[k + 1] == g(orb[k], n) for k in range(t))
            toks = [BOS] + [NUMBER_BASE] * n + [QUERY, NUMBER_BASE + m + t, NUMBER_BASE + a]
            assert IT.reference(toks) == (TRUE if orb[-1] >= n else FALSE)


def test_malformed_instances_are_refused():
    with pytest.raises(ValueError):
        IT.reference([BOS, NUMBER_BASE, NUMBER_BASE, NUMBER_BASE])
    with pytest.raises(ValueError):
        IT.reference([BOS, NUMBER_BASE, QUERY, NUMBER_BASE + 2 + 5, NUMBER_BASE])   # t = 5 > n^2 = 1
    with pytest.raises(ValueError):
        IT.reference([BOS, QUERY, QUERY, NUMBER_BASE + 2, NUMBER_BASE])             # padding z_1 = [QUERY]
    with pytest.raises(ValueError):
        IT.reference([BOS, NUMBER_BASE + 2, QUERY, NUMBER_BASE + 2, NUMBER_BASE])   # padding z_1 = 2 >= m = 2



def test_doctests():
    assert doctest.testmod(IT).failed == 0
