"""The IsTree hybrid's layers, each on its own, certified from the built model
(checks/certify/istree_hybrid.py).

The unmutated hybrid certifies at the N run here; then one-term builder
mutants (constructions/models/hybrid.py, changed through the gadgets and phases it
calls) must each fail the certificate at the layer and the fact they change;
mutants that change nothing the plan can see are shown to still certify and
say why.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from rnngap.checks.certify import istree_hybrid as CI
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.models import hybrid as H
from rnngap.constructions.machine.vocab import FALSE, TRUE, token_code
from rnngap.checks.certify import rows

from _mutants import head_kwargs, last_su_copies_r_u_from_prev1


def _failed(facts):
    return sorted({f["fact"] for f in facts if f["answer"] not in ("unsat", "holds")})


@pytest.mark.parametrize("N", [1, 3, 8])
def test_the_built_hybrid_is_proved(N):
    model = H.istree_hybrid(N)
    facts = CI.facts(model, N)
    assert _failed(facts) == []
    assert not [f for f in facts if f["answer"] == "vacuous"]
    names = {f["fact"] for f in facts}
    # every layer: the embedding, the three recurrences and their MLPs
    assert {"embedding.features", "embedding.single_writer", "roles.no_mlp"} <= names
    assert {f"rnn{k}.{w}" for k in (1, 2, 3) for w in ("base", "step", "directions")} <= names
    assert {"records.at_parent_record", "records.parent_key.on", "counters.joins_ok", "counters.child_root"} <= names
    # every head of the plan, its copy, every role of the CoT, the readout
    for head, (kind, _, _) in CI.plan().items():
        assert f"{head}.copy" in names
        assert any(n.startswith(f"{head}.") and n != f"{head}.copy" for n in names)
    assert {f"next.{r}" for r, *_ in CI.role_plan()} <= names
    assert "readout.nearest" in names
    smt = [f for f in facts if f["method"] == "smt"]
    assert smt and all(f["query"] for f in smt)


def _build(monkeypatch, target, name, wrap, N=3):
    real = getattr(target, name)
    with monkeypatch.context() as mp:
        mp.setattr(target, name, wrap(real))
        return H.istree_hybrid(N)


def _component(kw, **replace):
    kw["components"] = [dataclasses.replace(c, **replace) for c in kw["components"]]
    return kw


MUTANTS = {
    # the fetch query reads 2 joins, not 3: one token per edge too few
    "fetch query": ("match_head", head_kwargs("fetch", lambda kw: _component(
        kw, query={"joins": 2, "edge_markers": 2, "one": 2})), "fetch.one_hot"),
    # the fetch query one position off
    "fetch off by one": ("match_head", head_kwargs("fetch", lambda kw: _component(
        kw, query={"joins": 3, "edge_markers": 2, "one": 1})), "fetch.one_hot"),
    # the parent head keyed by the size records (a direction the plan gives the key no value in)
    "parent key": ("match_head", head_kwargs("parent", lambda kw: _component(
        kw, key={"size_key": 1}, key_sq={"size_key_sq": 1})), "parent.read"),
    # the parent head's key square read from the key itself (k, not k^2): a planned direction, wrong term
    "parent key square": ("match_head", head_kwargs("parent", lambda kw: _component(
        kw, key_sq={"parent_key": 1})), "parent.match_beats_non_match"),
    # the parent head's tie-break to the first record, not the latest
    "parent tie-break": ("match_head", head_kwargs("parent", lambda kw: {**kw, "tie_break": "first"}),
                         "parent.latest_match"),
    # a singleton root's size copied as code 1 (size 0), not 2
    "size default": ("match_head", head_kwargs("size", lambda kw: {**kw, "copy": {"root_size": {"tok": 1, "is_bos": 1}}}),
                     "size.copy"),
    # the size head's query the token itself, not the one before
    "size query": ("match_head", head_kwargs("size", lambda kw: _component(
        kw, query={"tok": 1}, query_sq={"tok_sq": 1})), "size.match_beats_non_match"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_head_mutants_fail(monkeypatch, mutant):
    name, wrap, fact = MUTANTS[mutant]
    model = _build(monkeypatch, H, name, wrap)
    failed = _failed(CI.head_facts(model))
    assert fact in failed, failed


def test_latest_flag_mutant_fails(monkeypatch):
    """last_su copies r_u from prev1 (the s_u's own code), not prev2."""
    model = _build(monkeypatch, H, "latest_flag_head", last_su_copies_r_u_from_prev1)
    assert "last_su.copy" in _failed(CI.head_facts(model))


def _rule_mutant(monkeypatch, change):
    """The next-token MLP built with ``change(args)`` applied to each gated value
    neuron's arguments (value, gates, big, out, closed, bias)."""
    def wrap(real):
        def patched(value, gates, big, out, closed=(), bias=0):
            value, gates, big, out, closed, bias = change(value, gates, big, out, closed, bias)
            return real(value, gates, big, out, closed, bias)
        return patched
    return _build(monkeypatch, H, "gated_value_neuron", wrap)


def test_answer_codes_swapped_fail(monkeypatch):
    """[TRUE] written where the plan has [FALSE] (a readout code changed)."""
    t, f = token_code(TRUE), token_code(FALSE)

    def change(value, gates, big, out, closed, bias):
        if out.get("next_code") == f and any("joins_ok" in g for g in closed):
            out = {"next_code": t}
        return value, gates, big, out, closed, bias
    failed = _failed(CI.next_code_facts(_rule_mutant(monkeypatch, change), 3))
    assert failed == ["next.fetch.eos_not_tree"], failed


def test_gate_too_small_fails(monkeypatch):
    """The gated neurons' big below the largest code they gate off (2 < 4, the
    largest code at N = 3): an off rule leaks into next_code. (The builder's big
    is the CoT's position bound plus slack, far above the codes, so halving it is
    an equivalent mutant on the vocabulary's codes: it still certifies.)"""
    def change(big_of):
        def change(value, gates, big, out, closed, bias):
            if "next_code" in out:
                big = big_of(big)
            return value, gates, big, out, closed, bias
        return change
    assert _failed(CI.next_code_facts(_rule_mutant(monkeypatch, change(lambda b: Fraction(b) / 2)), 3)) == []
    failed = _failed(CI.next_code_facts(_rule_mutant(monkeypatch, change(lambda b: 2)), 3))
    assert "next.chain.parent" in failed and "next.after_sv7" in failed, failed


def test_merged_size_off_by_one_fails(monkeypatch):
    """The merged size written with bias + 1 (s_u + s_v + 1 - 1 + 1)."""
    def change(value, gates, big, out, closed, bias):
        if value == {"merged_size@5": 1}:
            bias = bias + 1
        return value, gates, big, out, closed, bias
    failed = _failed(CI.next_code_facts(_rule_mutant(monkeypatch, change), 3))
    assert failed == ["next.after_sv7"], failed


def test_readout_mutant_fails(monkeypatch):
    """The number readout with tau weight 3: logit 3 tau v - tau^2 picks a larger code."""
    def wrap(real):
        def patched(b, direction, one="one"):
            b.readout([(direction, K.F_TOK, 0, 3), (one, K.F_TOK_SQ, 0, -1)])
        return patched
    model = _build(monkeypatch, H, "number_readout", wrap)
    assert _failed(CI.readout_facts(model, 3)) == ["readout.nearest"]


def test_the_row():
    """The certificate row: built-model, every layer named in covers, the sizes shown."""
    from rnngap.checks.certify.run import table
    res = rows.layer_row(CI.NAME, ((2, 2), (3, 2)))
    assert res.certified and res.source == "built-model" and res.claim == "T5.6"
    assert res.covers == ["embedding", "rnn-layers", "rnn-mlps", "heads", "attention-mlp", "readout"]
    assert (res.n_min, res.n_max) == (2, 3) and res.obligations == len(res.facts) == len(res.steps)
    assert "(N, m_max) in (2, 2), (3, 2)" in table([res])


def _phase_mutant(monkeypatch, name, change):
    """The hybrid at N = 3 built with ``change`` applied to what the phase
    function ``name`` of constructions/models/hybrid.py returns."""
    def wrap(real):
        def patched(*a, **kw):
            return change(real(*a, **kw))
        return patched
    return _build(monkeypatch, H, name, wrap)


def _counters_edge(pair):
    rec, mlp = pair
    assert rec.B[("s_edge_markers", "at_size_record")] == -2
    rec.B[("s_edge_markers", "at_size_record")] = -1    # a size record closes an edge: -2 markers, not -1
    return rec, mlp


def _delays_no_fetch(rec):
    for k in [k for k in rec.A if k[0] == "s_in_chain" != k[1]]:
        del rec.A[k]               # in_chain without + the fetch one step back
    return rec


def test_recurrence_mutants_fail(monkeypatch):
    failed = _failed(CI.recurrence_facts(_phase_mutant(monkeypatch, "_istree_counters", _counters_edge)))
    assert failed == ["rnn2.base", "rnn2.step"], failed        # the state's invariant is the plan's edge_markers
    failed = _failed(CI.recurrence_facts(_phase_mutant(monkeypatch, "_istree_delays", _delays_no_fetch)))
    assert failed == ["rnn3.step"], failed


def test_delay_mutant_fails(monkeypatch):
    """parent_root@4 taken from the delay line at 3: the directions' fact fails (the
    states keep their invariants)."""
    def wrap(real):
        def patched(rec, name, combo, depth, outs):
            if name == "p":
                outs = {2: outs[2], 3: outs[4]}
            return real(rec, name, combo, depth, outs)
        return patched
    failed = _failed(CI.recurrence_facts(_build(monkeypatch, H, "delay_chain", wrap)))
    assert failed == ["rnn3.directions"], failed


def test_clock_mutant_fails(monkeypatch):
    """The clock's square with (t + 1)^2 = t^2 + t + 1 (A one term off): every
    match head keyed by cnt_sq would be off."""
    orig_clock = H.clock

    def clock(space, rec, *a, **kw):
        orig_clock(space, rec, *a, **kw)
        rec.A[("s_cnt_sq", "s_cnt")] = 1
    failed = _failed(CI.recurrence_facts(_build(monkeypatch, H, "clock", lambda real: clock)))
    assert failed == ["rnn1.step"], failed


def test_mlp_mutants_fail(monkeypatch):
    """joins_ok tested against N, not N - 1; and the child and parent roots swapped."""
    def eq(real):
        def patched(a, b, out, scale=1):
            if out == "joins_ok":
                b = {"one": b["one"] + 1}
            return real(a, b, out, scale)
        return patched
    assert _failed(CI.counter_facts(_build(monkeypatch, H, "equality_neurons", eq), 3)) == ["counters.joins_ok"]

    def sel(real):
        def patched(cond, x, y, out, bound):
            return real(cond, y, x, out, bound) if out == "child_root" else real(cond, x, y, out, bound)
        return patched
    assert _failed(CI.counter_facts(_build(monkeypatch, H, "select_neurons", sel), 3)) == ["counters.child_root"]


def test_record_mutant_fails(monkeypatch):
    """u_smaller = [tok < prev2] instead of [tok <= prev2]: the step relu(d + 1) -
    relu(d) moved one to the right, both biases one smaller (one breakpoint moved)."""
    def wrap(real):
        def patched(code_max):
            mlp = real(code_max)
            out = []
            for nrn in mlp:
                if "u_smaller" in nrn.out:
                    nrn = dataclasses.replace(nrn, bias=nrn.bias - 1)
                out.append(nrn)
            return out
        return patched
    failed = _failed(CI.record_facts(_build(monkeypatch, H, "_istree_record_flags", wrap), 3))
    assert failed == ["records.u_smaller"], failed


def test_embedding_mutant_fails(monkeypatch):
    """'~' flagged where the token is [QUERY]: the records would be read off the wrong token."""
    from rnngap.constructions.build.gadgets import ResidualSpace
    from rnngap.constructions.machine.vocab import QUERY

    real = ResidualSpace.embedded

    def embedded(self, lab, kind, param=0, *a, **kw):
        return real(self, lab, kind, QUERY if lab == "is_tilde" else param, *a, **kw)
    monkeypatch.setattr(ResidualSpace, "embedded", embedded)
    assert _failed(CI.embedding_facts(H.istree_hybrid(3))) == ["embedding.features"]


def test_chunks_merge_into_one_row():
    """The sizes proved in chunks (the workers' share of ``certify --full``) give the
    row one proof gives, records in the order of N."""

    whole = rows.layer_row(CI.NAME, ((2, 2), (3, 3), (5, 4)))
    merged = rows.merge([rows.layer_row(CI.NAME, ((3, 3),)), rows.layer_row(CI.NAME, ((2, 2), (5, 4)))])
    assert merged.facts == whole.facts and merged.steps == whole.steps     # the SMT-LIB texts too
    assert (merged.n_min, merged.n_max, merged.obligations, merged.certified) == (2, 5, len(whole.facts), True)


def test_cli_explains_and_certifies_the_row(capsys, monkeypatch):
    from argparse import Namespace

    from rnngap.checks.cli import cmd_certify
    monkeypatch.setattr(CI, "NS", ((2, 2),))
    rc = cmd_certify.run(Namespace(only=None, json=None, explain=CI.NAME, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and "rnn3.step" in out and "fetch.one_hot" in out and "next.after_sv7" in out
    assert "NOT PROVED" not in out
    rc = cmd_certify.run(Namespace(only=[CI.NAME], json=None, explain=None, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and CI.NAME in out and "(N, m_max) in (2, 2)" in out and "1 certificates, 0 failed" in out


def test_vocabulary_mutant_fails(monkeypatch):
    """The hybrid built on the vocabulary of N - 1 numbers: no token for the size N
    that closes a spanning tree's last union (code N + 1)."""
    from rnngap.constructions.machine.vocab import Vocab
    real = H.Builder

    def builder(name, kind, vocab, *a, **kw):
        return real(name, kind, Vocab(vocab.max_number - 1), *a, **kw)
    monkeypatch.setattr(H, "Builder", builder)
    assert _failed(CI.readout_facts(H.istree_hybrid(4), 4)) == ["readout.vocabulary"]


def test_every_n_alone_gives_the_row(monkeypatch):
    """``certify --full --only <the row>``: no construction record is chosen, and
    the sweep's chunks still give the one row, the composition (once, first) and
    every size in order (a smaller sweep here; in one process, where the patch is
    seen)."""
    from rnngap.checks.certify.run import certify
    monkeypatch.setattr(CI, "NS_FULL", ((2, 2), (3, 2), (4, 4)))
    rs = certify([CI.NAME], every_n=True, workers=1)
    assert [r.construction for r in rs] == [CI.NAME] and rs[0].certified and "composition" in rs[0].covers
    sized = [f for f in rs[0].facts if not f["fact"].startswith(CI.CHAIN_LABEL)]
    chain = rs[0].facts[:len(rs[0].facts) - len(sized)]
    assert [f["fact"] for f in chain] == [f"{CI.CHAIN_LABEL}: chain.{r}" for r in ("order", "bos", "u", "sep", "v", "eos",
                                          "xu", "rootu", "marku", "su", "xv", "rootv", "markv", "sv", "ru", "su2",
                                          "tilde", "c", "p", "query", "p2", "s")]
    assert [rows._sizes_of(f) for f in sized][::len(sized) // 3] == [(2, 2), (3, 2), (4, 4)]
