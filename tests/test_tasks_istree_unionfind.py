"""The union-find reference of the hybrid IsTree model (checks/tasks/istree_unionfind.py)
against independent facts: its answer equals the networkx label on every graph on up
to 4 vertices in every edge order (a few orders each), its CoT has the documented
shape, and the module imports no construction code besides the vocabulary."""
from __future__ import annotations

import doctest

import numpy as np

import rnngap.checks.tasks.istree_unionfind as UF
from rnngap.checks.tasks import istree
from rnngap.constructions.machine.vocab import DASH, FALSE, QUERY, TILDE, TRUE, number_token


def test_answer_equals_the_networkx_label():
    rng = np.random.default_rng(16)
    checked = 0
    for n in range(1, 5):
        for edges in istree.enumerate_graphs(n):
            for order in istree.edge_orders(edges, 3, rng):
                _, ans = UF.unionfind_cot(n, order)
                assert ans == (TRUE if istree.reference_label(n, order) else FALSE), (n, order)
                checked += 1
    assert checked > 100


def test_cot_shape_on_a_path_and_a_cycle():
    nt = number_token
    cot, ans = UF.unionfind_cot(3, [(0, 1), (1, 2)])
    # edge (0, 1): find 0, find 1, r_u = 0, size 1, 0 goes under 1 (tie: u-side under v-side)
    first = [nt(0), DASH, nt(1), nt(1), DASH, nt(1), nt(0), nt(1), TILDE, nt(0), nt(1), QUERY, nt(1), nt(2)]
    # edge (1, 2): find 1 (root, size 2), find 2 (size 1), r_u = 1, size 2, 2 goes under 1
    second = [nt(1), DASH, nt(2), nt(2), DASH, nt(1), nt(1), nt(2), TILDE, nt(2), nt(1), QUERY, nt(1), nt(3)]
    assert (cot, ans) == (first + second, TRUE)
    cot, ans = UF.unionfind_cot(3, [(0, 1), (1, 0)])
    assert ans == FALSE and cot[len(first):] == [nt(1), DASH, nt(2), nt(0), nt(1), DASH, nt(2), nt(1)]



def test_doctests():
    assert doctest.testmod(UF).failed == 0
