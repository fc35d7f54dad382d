"""The Turing-machine reference (checks/tasks/turing.py): its own numbering of
symbols and actions equals the construction's documented one (constructions/models/turing.py
``Encoding``), its runs agree with automata-lib, it imports no construction code
besides the vocabulary, and its doctests pass."""
from __future__ import annotations

import doctest
import itertools

import pytest

import rnngap.checks.tasks.turing as TR
from rnngap.constructions.models import turing as T


@pytest.mark.parametrize("name", sorted(T.MACHINES))
def test_numbering_equals_the_construction_encoding(name):
    dtm = T.MACHINES[name].build()
    enc, num = T.Encoding.of(dtm), TR.numbering(dtm)
    assert num.symbols == enc.symbols
    assert num.actions == [(a.state, a.symbol, a.new_state, a.write, a.move) for a in enc.actions]
    assert num.action_of == enc.action_of


@pytest.mark.parametrize("name", sorted(T.MACHINES))
def test_runs_agree_with_automata_lib(name):
    spec = T.MACHINES[name]
    dtm = spec.build()
    words = [""] + ["".join(w) for k in range(1, 7) for w in itertools.product(sorted(dtm.input_symbols), repeat=k)]
    for w in words:
        acc, steps, _ = T.automata_run(dtm, w)
        ref = TR.reference_run(dtm, w, spec.time_bound(len(w)))
        assert (ref.accepted, ref.steps) == (acc, steps), w
        cot, ans = TR.reference_rag_cot(dtm, w, spec.time_bound(len(w)))
        assert ans == ref.answer and len(cot) >= 13 * ref.steps



def test_doctests():
    assert doctest.testmod(TR).failed == 0
