"""The IsTree Transformer's layers, each on its own, certified from the built
model (checks/certify/istree_transformer.py).

The unmutated model certifies; then one-term builder mutants
(constructions/models/istree.py, changed through the gadgets it calls) must each fail
the certificate at the layer and the fact they change.
"""
from __future__ import annotations

import dataclasses

import pytest

from rnngap.checks.certify import istree_transformer as CD
from rnngap.constructions.models import istree as I
from rnngap.constructions.machine import kernels as K

from _mutants import head_kwargs


def _failed(facts):
    return sorted({f["fact"] for f in facts if f["answer"] not in ("unsat", "holds")})


def test_the_built_model_is_proved():
    model = I.istree_transformer(7, 6)
    facts = CD.facts(model, 7)
    assert _failed(facts) == [] and not [f for f in facts if f["answer"] == "vacuous"]
    names = {f["fact"] for f in facts}
    for head in CD.plan():
        assert f"{head}.copy" in names and any(n.startswith(f"{head}.") and n != f"{head}.copy" for n in names)
    assert {"embedding.features", "embedding.single_writer", "readout.vocabulary", "readout.nearest",
            "mlp1.at_tour_eos", "mlp2.e_prev", "mlp3.next_is_parent", "mlp4.w", "mlp5.out.true"} <= names


def _build(monkeypatch, name, wrap, N=7, M=6):
    real = getattr(I, name)
    with monkeypatch.context() as mp:
        mp.setattr(I, name, wrap(real))
        return I.istree_transformer(N, M)


def _shift(real):
    def patched(name, pos, pos_sq, one, copy, fmt, n_positions, shift=1):
        return real(name, pos, pos_sq, one, copy, fmt, n_positions=n_positions, shift=2 if name == "shift3" else shift)
    return patched


def _swap_edge(kw):
    comps = kw["components"]
    kw["components"] = [dataclasses.replace(comps[0], key={"tok": 1}, key_sq={"tok_sq": 1}),
                        dataclasses.replace(comps[1], key={"back2": 1}, key_sq={"back2_sq": 1})] + comps[2:]
    return kw


MUTANTS = {
    "shift aimed one off": ("shift_head", _shift, "shift3.one_hot"),
    "parent tie-break": ("match_head", head_kwargs("parent", lambda kw: {**kw, "tie_break": "last"}), "parent.first_match"),
    "pred id off by one": ("match_head", head_kwargs("pred-u-first", lambda kw: {**kw, "copy": {
        **kw["copy"], "pred_u_via_first": {"pos": 1, "one": -2, "is_bos": 3}}}), "pred-u-first.copy"),
    "edge keys swapped": ("match_head", head_kwargs("edge-u-first", _swap_edge), "edge-u-first.match_beats_non_match"),
    "vertex count without [BOS]": ("first_max_head", head_kwargs("vertex-count", lambda kw: {
        **kw, "key": {"tok": 1, "is_count_value": -1}}), "vertex-count.first_of_equal"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_head_mutants_fail(monkeypatch, mutant):
    name, wrap, fact = MUTANTS[mutant]
    failed = _failed(CD.head_facts(_build(monkeypatch, name, wrap), 7))
    assert fact in failed, failed


def test_mlp_mutants_fail(monkeypatch):
    """The tour's [EOS] base code -3 ([FALSE]) changed to -2 (both answers move: the
    [TRUE] case adds + 1 to that base), and e_prev's mask bound below the edge
    ids (T - 2 < T - 1)."""
    real = I._output_neurons

    def swapped(p):
        out = real(p)
        return [dataclasses.replace(n, out={"out": -2}) if n.out == {"out": -3} else n for n in out]
    with monkeypatch.context() as mp:
        mp.setattr(I, "_output_neurons", swapped)
        model = I.istree_transformer(7, 6)
    assert _failed(CD.mlp_facts(model, 7)) == ["mlp5.out.false", "mlp5.out.true"]

    def mask(real):
        def patched(x, a, b, out, bound):
            return real(x, a, b, out, bound - 2 if out == "e_prev" else bound)
        return patched
    assert _failed(CD.mlp_facts(_build(monkeypatch, "mask_unless_equal_neurons", mask), 7)) == ["mlp2.e_prev"]


def test_readout_and_embedding_mutants_fail(monkeypatch):
    def readout(real):
        def patched(b, direction, one="one"):
            b.readout([(direction, K.F_TOK, 0, 3), (one, K.F_TOK_SQ, 0, -1)])
        return patched
    assert _failed(CD.readout_facts(_build(monkeypatch, "number_readout", readout), 7)) == ["readout.nearest"]

    def space(real):
        def patched():
            s = real()
            s.embedded("is_extra", K.F_IS_TOKEN, 3)
            return s
        return patched
    assert _failed(CD.embedding_facts(_build(monkeypatch, "_embedded_space", space))) == ["embedding.features"]


def test_the_row_and_the_cli(capsys, monkeypatch):
    from argparse import Namespace

    from rnngap.checks.cli import cmd_certify
    rc = cmd_certify.run(Namespace(only=[CD.NAME], json=None, explain=None, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and CD.NAME in out and "(N, M) in (7, 6)" in out and "1 certificates, 0 failed" in out
    rc = cmd_certify.run(Namespace(only=None, json=None, explain=CD.NAME, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and "visited.first_match" in out and "mlp5.out.w" in out and "NOT PROVED" not in out


def test_layer4_and_structure_mutants_fail(monkeypatch):
    """w selected the other way round (the next neighbour where the plan has the hop
    past the parent); and the model built for positions without the header's two
    tokens (fewer positions than the task needs)."""
    def sel(real):
        def patched(cond, x, y, out, bound):
            return real(cond, y, x, out, bound) if out == "w" else real(cond, x, y, out, bound)
        return patched
    assert _failed(CD.mlp_facts(_build(monkeypatch, "select_neurons", sel), 7)) == ["mlp4.w"]
    from rnngap.constructions.models import bounds
    monkeypatch.setattr(bounds, "ISTREE_HEADER", 0)
    model = I.istree_transformer(7, 6)
    assert model.max_positions < CD.positions(7, 6)
    assert "structure" in _failed(CD.structure_facts(model, 7, 6))
