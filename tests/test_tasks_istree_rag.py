"""The plain IsTree RAG reference (checks/tasks/istree_rag.py): its label (the last
token) equals the networkx label on every graph on up to 4 vertices in a few edge
orders, its CoT ends with [EOS] before the label, and it imports no construction
code besides the vocabulary."""
from __future__ import annotations

import doctest

import numpy as np

import rnngap.checks.tasks.istree_rag as IR
from rnngap.checks.tasks import istree
from rnngap.constructions.machine.vocab import EOS, FALSE, TRUE


def test_label_equals_the_networkx_label():
    rng = np.random.default_rng(17)
    checked = 0
    for n in range(1, 5):
        for edges in istree.enumerate_graphs(n):
            for order in istree.edge_orders(edges, 3, rng):
                out = IR.plain_cot(n, order)
                assert out[-2] == EOS, (n, order)
                assert out[-1] == (TRUE if istree.reference_label(n, order) else FALSE), (n, order)
                checked += 1
    assert checked > 100



def test_doctests():
    assert doctest.testmod(IR).failed == 0
