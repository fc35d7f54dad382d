"""The simulator's heads certified from the built simulator (checks/certify/simulator.py).

Every head of every simulator the registry builds is proved (unmutated); then
one-term builder mutants (constructions/models/simulate.py's heads, changed through the
``match_head`` it calls or its query) must each fail the certificate at the head
they change, and an equivalent mutant (a key shifted by a constant for every
key, which softmax removes) is recognised as such: it still certifies.
"""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

import pytest

from rnngap.checks.catalog.hierarchy import sim_simulators
from rnngap.checks.certify.simulator import head_facts, plan
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.models import simulate as S


def _failed(facts):
    return sorted({f["fact"] for f in facts if f["answer"] not in ("unsat", "holds")})


def test_every_built_simulator_head_is_proved():
    sims = sim_simulators()
    assert len(sims) >= 8
    for sim in sims:
        facts = head_facts(sim)
        names = {f["fact"].split(".")[0] for f in facts}
        assert names == set(plan(sim)) | {"embedding"}, (sim.model.name, names)
        assert _failed(facts) == [], sim.model.name
        # the score statements are about the built weights, with the query the plan names;
        # every head's copy (W_O W_V) is the plan's
        smt = [f for f in facts if f["method"] == "smt"]
        assert smt and all("built W_Q, W_K" in f["statement"] and f["query"] for f in smt)
        assert {f["fact"] for f in facts if f["fact"].endswith(".copy")} == {f"{h}.copy" for h in plan(sim)}


def _build():
    return S.rnnsim_transformer(CH.iterate_rnn(2), max_prompt=6, max_rnn_cot=4)


def _mutated(monkeypatch, head: str, change):
    """The simulator built with ``change(kwargs)`` applied to match_head's
    arguments for the head named ``head``."""
    real = S.match_head

    def patched(name, **kw):
        if name == head:
            kw = change(dict(kw))
        return real(name, **kw)
    with monkeypatch.context() as mp:
        mp.setattr(S, "match_head", patched)
        return _build()


def _component(kw, **replace):
    kw["components"] = [dataclasses.replace(c, **replace) for c in kw["components"]]
    return kw


MUTANTS = {
    # the key square without its 2 pos term: the scores' vertex moves, the key is off by one
    "counter key_sq drops a term": ("counter", lambda kw: _component(
        kw, key_sq={"pos_sq": 1, "pos": 1, "one": 1}), "counter.one_hot"),
    # the query aimed one position later (shift 1 -> 2)
    "prev_token query one position off": ("prev_token", lambda kw: _component(
        kw, query={**kw["components"][0].query, "one": 1}), "prev_token.one_hot"),
    # the prompt head reads the first K token's position instead of the step count
    "prompt reads the wrong direction": ("prompt", lambda kw: _component(
        kw, query={"prompt_length": 1, "one": 1}), "prompt.one_hot"),
    # a state head's query without the Y token's index term
    "prev0 query misses is_filler": ("prev0", lambda kw: _component(
        kw, query={k: v for k, v in kw["components"][0].query.items() if k != "is_filler"}), "prev0.one_hot"),
    # firstK breaks ties to the last flagged key
    "firstK tie-break last": ("firstK", lambda kw: {**kw, "tie_break": "last"}, "firstK.first_of_flagged"),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_a_one_term_builder_change_fails_at_its_head(monkeypatch, mutant):
    head, change, fact = MUTANTS[mutant]
    sim = _mutated(monkeypatch, head, change)
    failed = _failed(head_facts(sim))
    assert fact in failed, (mutant, failed)
    assert all(f.split(".")[0] == head for f in failed), failed       # named at the head changed


def test_equivalent_mutant_still_certifies(monkeypatch):
    """The key pos + 2 with the key square (pos + 1)^2 adds 2 lambda q to every
    key's score of a query: the same weights after softmax. The certificate
    recognises it (proved), the head it is about still attends the same key."""
    sim = _mutated(monkeypatch, "counter", lambda kw: _component(kw, key={"pos": 1, "one": 2}))
    assert _failed(head_facts(sim)) == []
    base = head_facts(_build())
    assert [f["fact"] for f in base] == [f["fact"] for f in head_facts(sim)]


def test_a_missing_or_unplanned_head_fails():
    import copy
    from types import SimpleNamespace
    sim = _build()
    layers = list(sim.model.spec.attn_layers)
    li = next(i for i, L in enumerate(layers) if any(h.name == "counter" for h in L.heads))
    heads = [dataclasses.replace(h, name="counter2") if h.name == "counter" else h for h in layers[li].heads]
    layers[li] = dataclasses.replace(layers[li], heads=heads)
    spec = dataclasses.replace(sim.model.spec, attn_layers=layers)
    shim = copy.copy(sim)
    shim.model = SimpleNamespace(spec=spec, fmt=sim.model.fmt, max_positions=sim.model.max_positions,
                                 vocab=sim.model.vocab)
    failed = _failed(head_facts(shim))
    assert failed == ["counter.present", "counter2.planned"], failed


def _layout_mutant(monkeypatch, change):
    """The simulator built after ``change(self)`` altered one of the builder's working
    constants (decode's layout untouched)."""
    real = S.RNNSimulator._build

    def build(self):
        change(self)
        return real(self)
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_build", build)
        return _build()


def test_builder_constants_that_leave_the_layout_fail(monkeypatch):
    """The plan reads the layout (the RNN's state count, decode's token ranges), not
    the builder's working constants: a block of S + 3 tokens, or K(0)'s code one
    too high in the token-type MLP, each fails; and a head's copy (W_O W_V) that
    writes pos + 1 as the prompt length fails at that head."""
    from rnngap.checks.certify.simulator import type_facts
    wide = _layout_mutant(monkeypatch, lambda self: setattr(self, "B", self.S + 3))
    failed = _failed(head_facts(wide))
    # the prev heads aim one position early; the longer blocks also carry the CoT past
    # the positions firstK's tie-break weight was built for
    assert "prev0.one_hot" in failed and all(f.split(".")[0] in ("prev0", "prev1", "prev2", "prev3", "firstK")
                                             for f in failed), failed
    late = _layout_mutant(monkeypatch, lambda self: setattr(self, "tau_K", self.Kb + 2))
    failed = _failed(type_facts(late))
    assert "type.counter" in failed, failed
    moved = _mutated(monkeypatch, "firstK", lambda kw: {**kw, "copy": {**kw["copy"], "prompt_length": {"pos": 1,
                                                                                                      "one": 1}}})
    assert _failed(head_facts(moved)) == ["firstK.copy"]


def test_cli_explains_and_certifies_the_heads_row(capsys):
    from argparse import Namespace

    from rnngap.checks.cli import cmd_certify
    from rnngap.checks.certify.simulator import NAME
    rc = cmd_certify.run(Namespace(only=None, json=None, explain=NAME, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and "firstK.first_of_flagged" in out and "counter.one_hot" in out and "proved" in out
    assert "NOT PROVED" not in out
    rc = cmd_certify.run(Namespace(only=[NAME], json=None, explain=None, workers=1, full=False))
    out = capsys.readouterr().out
    assert rc == 0 and NAME in out and "1 certificates, 0 failed" in out


def _first_neuron_moved(monkeypatch, method: str):
    """The simulator built with the MLP of ``RNNSimulator.<method>`` whose first
    neuron's bias is one larger (a breakpoint moved by one)."""
    from rnngap.constructions.build.gadgets import Neuron
    real = getattr(S.RNNSimulator, method)

    def moved(self):
        mlp = real(self)
        n0 = mlp[0]
        return [Neuron(dict(n0.inp), n0.bias + 1, dict(n0.out), n0.group)] + mlp[1:]
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, method, moved)
        return _build()


def test_a_moved_token_type_breakpoint_fails(monkeypatch):
    """The layer-1 MLP with one breakpoint moved by one: the token-type facts
    fail, named at the MLP; the unmutated MLP is proved."""
    from rnngap.checks.certify.simulator import type_facts
    assert _failed(type_facts(_build())) == []
    failed = _failed(type_facts(_first_neuron_moved(monkeypatch, "_token_type_mlp")))
    assert failed and all(f.startswith("type.") for f in failed), failed


def test_a_moved_block_role_breakpoint_fails(monkeypatch):
    """The layer-2 MLP with the [step < prompt_length] step moved by one:
    roles.in_prompt fails, nothing else."""
    from rnngap.checks.certify.simulator import role_facts
    assert _failed(role_facts(_build())) == []
    assert _failed(role_facts(_first_neuron_moved(monkeypatch, "_block_role_mlp"))) == ["roles.in_prompt"]


# ---------------------------------------------------------------------------- the RNN layers' MLPs
def test_every_rnn_layer_of_every_simulator_is_proved():
    """Each simulated RNN layer: its state MLP (A, B, C) and its own MLP, against the
    RNN's own weights, for every real value of every direction."""
    from rnngap.checks.certify.simulator import step_facts
    for sim in sim_simulators():
        facts = step_facts(sim)
        assert _failed(facts) == [], sim.model.name
        for l, R in enumerate(sim.rnn.spec.rnn_layers):
            states = {f["fact"] for f in facts if f["fact"].startswith(f"step{l}.h{l}:")}
            assert len(states) == R.A.shape[0], (sim.model.name, l, states)


def _rnn_mlp_mutant(monkeypatch, which: int, change):
    """The simulator built with ``change(neurons)`` applied to the first RNN
    layer's state MLP (which = 0) or own MLP (which = 1)."""
    from rnngap.constructions.build.gadgets import Neuron
    real = S.RNNSimulator._rnn_layer_mlps

    def mutated(self, l):
        mlps = list(real(self, l))
        if l == 0:
            mlps[which] = change([Neuron(dict(n.inp), n.bias, dict(n.out), n.group) for n in mlps[which]])
        return tuple(mlps)
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_rnn_layer_mlps", mutated)
        return _build()


def _edit(neurons, i, **kw):
    from rnngap.constructions.build.gadgets import Neuron
    n = neurons[i]
    neurons[i] = Neuron(kw.get("inp", n.inp), kw.get("bias", n.bias), kw.get("out", n.out), n.group)
    return neurons


STEP_MUTANTS = {
    # the B terms of h0:q dropped from its positive half (relu(z) - relu(-z) no longer z)
    "B term dropped": (0, lambda ns: _edit(ns, 0, inp={"prev_state0": ns[0].inp["prev_state0"]}), "step0.h0:q"),
    # the A coefficient of h0:q one larger, in both halves
    "A one larger": (0, lambda ns: _edit(_edit(ns, 0, inp={**ns[0].inp, "prev_state0": ns[0].inp["prev_state0"] + 1}),
                                         1, inp={**ns[1].inp, "prev_state0": ns[1].inp["prev_state0"] - 1}),
                     "step0.h0:q"),
    # the own MLP's breakpoint moved by one
    "own bias moved": (1, lambda ns: _edit(ns, 0, bias=ns[0].bias + 1), "own0.rnn:wt"),
}


@pytest.mark.parametrize("mutant", sorted(STEP_MUTANTS))
def test_a_one_term_change_of_an_rnn_layer_mlp_fails_there(monkeypatch, mutant):
    from rnngap.checks.certify.simulator import step_facts
    which, change, fact = STEP_MUTANTS[mutant]
    failed = _failed(step_facts(_rnn_mlp_mutant(monkeypatch, which, change)))
    assert fact in failed and all(f.startswith(("step0.", "own0.")) for f in failed), failed


def test_a_c_term_written_elsewhere_fails(monkeypatch):
    """C h written to a direction the RNN's C does not name: the state MLP writes an
    unplanned direction and the C fact of the named one fails."""
    from rnngap.checks.certify.simulator import step_facts

    def change(ns):
        out = {("rnn:tok" if k == "rnn:cnt" else k): v for k, v in ns[2].out.items()}
        return _edit(ns, 2, out=out)
    sim = _build()
    assert any("rnn:cnt" in n.out for n in sim._rnn_layer_mlps(0)[0][2:3])     # the mutant changes something
    failed = _failed(step_facts(_rnn_mlp_mutant(monkeypatch, 0, change)))
    assert "step0.writes" in failed and "step0.rnn:cnt" in failed, failed


# ---------------------------------------------------------------------------- the last layer: the next code
def test_every_simulator_writes_the_next_code_of_each_case():
    from rnngap.checks.certify.simulator import next_code_facts
    for sim in sim_simulators():
        facts = next_code_facts(sim)
        assert _failed(facts) == [], sim.model.name
        names = {f["fact"] for f in facts}
        S = sum(L.A.shape[0] for L in sim.rnn.spec.rnn_layers)
        assert {"next.K(0)", "next.filler", "next.K(t+1)"} | {f"next.S{i}" for i in range(S)} <= names
        assert "next.Y" in names, sim.model.name        # the clamp of v, or the argmax winner's code


def _next_code_mutant(monkeypatch, change, build=None):
    """The simulator (``build()``, default :func:`_build`) with ``change(sim,
    neurons)`` applied to its next-code MLP."""
    from rnngap.constructions.build.gadgets import Neuron
    real = S.RNNSimulator._next_code_mlp

    def mutated(self, big):
        return change(self, [Neuron(dict(n.inp), n.bias, dict(n.out), n.group) for n in real(self, big)])
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_next_code_mlp", mutated)
        return (build or _build)()


def _where(ns, key):
    return next(i for i, n in enumerate(ns) if key in n.inp)


NEXT_MUTANTS = {
    # the filler's code one too high
    "filler code": (lambda sim, ns: _edit(ns, _where(ns, "emit_filler"), out={"next_code": sim.tau_F + 1}),
                    ["next.filler"]),
    # K(t + 1) one position late
    "counter bias": (lambda sim, ns: _edit(ns, _where(ns, "emit_next_counter"),
                                           bias=ns[_where(ns, "emit_next_counter")].bias + 1), ["next.K(t+1)"]),
    # the clamp's gate constant 1 instead of big (the same value when the gate is open): v leaks into the other cases
    "clamp gate": (lambda sim, ns: _small_gate(ns), None),
}


def _small_gate(ns):
    for i, n in list(enumerate(ns)):
        if len(n.inp) > 1 and "emit_rnn_token" in n.inp:             # the clamp's two neurons
            big = n.inp["emit_rnn_token"]
            _edit(ns, i, inp={**n.inp, "emit_rnn_token": 1}, bias=n.bias + big - 1)
    return ns


@pytest.mark.parametrize("mutant", sorted(NEXT_MUTANTS))
def test_a_one_term_change_of_the_next_code_mlp_fails(monkeypatch, mutant):
    from rnngap.checks.certify.simulator import next_code_facts
    change, want = NEXT_MUTANTS[mutant]
    failed = _failed(next_code_facts(_next_code_mutant(monkeypatch, change)))
    if want is not None:
        assert failed == want, failed
    else:                                        # the gate: some case other than Y now reads v
        assert failed and any(f != "next.Y" for f in failed), failed


# ---------------------------------------------------------------------------- layer 3's MLP: the RNN's input
def test_every_simulator_selects_the_rnn_input():
    from rnngap.checks.certify.simulator import input_facts, layout
    for sim in sim_simulators():
        facts = input_facts(sim)
        assert _failed(facts) == [], sim.model.name
        assert {f["fact"] for f in facts} >= {f"input.rnn:{lab}" for lab in layout(sim)["emb"]} | \
            {"input.emit_rnn_token", "input.emit_filler"}


def _select_mutant(monkeypatch, **change):
    """The simulator built with select_neurons called with ``change`` applied (a
    condition or bound other than the input select's)."""
    real = S.select_neurons

    def patched(cond, x, y, out, bound):
        kw = {"cond": cond, "x": x, "y": y, "out": out, "bound": bound}
        kw.update({k: (v(kw[k]) if callable(v) else v) for k, v in change.items()})
        return real(**kw)
    with monkeypatch.context() as mp:
        mp.setattr(S, "select_neurons", patched)
        return _build()


@pytest.mark.parametrize("change", [{"cond": {"prompt_done": 1}}, {"bound": lambda b: max(1, int(b) // 4)}],
                         ids=["condition reads prompt_done", "gate bound a quarter"])
def test_a_wrong_input_select_fails(monkeypatch, change):
    from rnngap.checks.certify.simulator import input_facts
    failed = _failed(input_facts(_select_mutant(monkeypatch, **change)))
    assert failed and all(f.startswith("input.rnn:") for f in failed), failed


def test_a_moved_filler_decision_fails(monkeypatch):
    """emit_filler's neuron with its bias one larger: it fires without after_last_state."""
    from rnngap.checks.certify.simulator import input_facts
    from rnngap.constructions.build.gadgets import Neuron
    real = S.RNNSimulator._rnn_input

    def mutated(self, fmt, emb_dims, emb_bound):
        heads, mlp = real(self, fmt, emb_dims, emb_bound)
        return heads, [Neuron(dict(n.inp), n.bias + 1, dict(n.out), n.group) if "emit_filler" in n.out else n
                       for n in mlp]
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_rnn_input", mutated)
        sim = _build()
    assert _failed(input_facts(sim)) == ["input.emit_filler"]


# ---------------------------------------------------------------------------- the readout
def test_the_readout_emits_the_code_the_last_mlp_wrote():
    """Proved for every simulator; a readout whose tau term has weight 3 (the built
    spec changed in place: the fact reads it) or that reads another direction fails."""
    from rnngap.checks.certify.simulator import readout_facts
    for sim in sim_simulators():
        assert _failed(readout_facts(sim)) == [], sim.model.name
    sim = _build()
    ro = sim.model.spec.readout
    dim, kind, p, c = ro[0]
    ro[0] = (dim, kind, p, c * 3 / 2)
    assert _failed(readout_facts(sim)) == ["readout.nearest"]
    ro[0] = (sim.model.spec.labels.index("step"), kind, p, c)
    assert _failed(readout_facts(sim)) == ["readout.nearest"]


# ---------------------------------------------------------------------------- the order of the layers
def _two_layers(monkeypatch=None, change=None):
    """A simulator of a two-layer random linear RNN, its RNN layers' MLPs changed by
    ``change(real, self, l)`` (a review's repro: each per-layer fact still held)."""
    build = lambda: S.rnnsim_transformer(S.random_linear_rnn(1, layers=2), max_prompt=4, max_rnn_cot=2)
    if change is None:
        return build()
    real = S.RNNSimulator._rnn_layer_mlps
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_rnn_layer_mlps", lambda self, l: change(real, self, l))
        return build()


def test_the_layers_come_in_the_plans_order():
    from rnngap.checks.certify.simulator import sequence_facts
    for sim in sim_simulators() + [_two_layers()]:
        assert _failed(sequence_facts(sim)) == [], sim.model.name


@pytest.mark.parametrize("name", ["RNN layers reversed", "own MLP twice"])
def test_a_wrong_order_of_the_rnn_layers_fails(monkeypatch, name):
    from rnngap.checks.certify.simulator import sequence_facts, step_facts
    change = {"RNN layers reversed": lambda real, self, l: real(self, len(self.rnn.spec.rnn_layers) - 1 - l),
              "own MLP twice": lambda real, self, l: (lambda m: (m[0], m[1], m[1]))(real(self, l))}[name]
    sim = _two_layers(monkeypatch, change)
    failed = _failed(sequence_facts(sim) + step_facts(sim))
    assert any(f.startswith("order.") for f in failed), failed
    if name == "RNN layers reversed":
        assert "step0.layer" in failed and "step1.layer" in failed, failed


def test_a_direction_that_does_not_start_at_zero_fails():
    """next_code embedded as tau (the built spec changed in place): every fact that adds
    to it would still hold; the embedding fact fails."""
    from rnngap.checks.certify.simulator import sequence_facts
    from rnngap.constructions.machine import kernels as K
    sim = _build()
    d = sim.model.spec.labels.index("next_code")
    sim.model.spec.embedding[d] = (K.F_TOK, 0, 1)
    assert _failed(sequence_facts(sim)) == ["order.embedding"]


def test_a_fact_on_hypotheses_without_a_model_is_vacuous():
    """``smt_fact`` refuses a proof from contradictory hypotheses, and its shared
    satisfiability solver forgets each query: a satisfiable one after a
    contradictory one is still a proof, and the other way round."""
    from rnngap.checks.certify.layer_facts import smt_fact
    from rnngap.checks.certify.sizes import z3
    x = z3.Int("vac.x")
    assert smt_fact("l", "ok", "", [x >= 1], x >= 0)["answer"] == "unsat"
    bad = smt_fact("l", "vac", "", [x >= 1, x <= 0], x == 7)
    assert bad["answer"] == "vacuous" and "no model" in bad["counterexample"]
    assert smt_fact("l", "ok", "", [x >= 1], x >= 0)["answer"] == "unsat"
    assert smt_fact("l", "false", "", [x >= 1], x >= 2)["answer"] == "sat"
    assert smt_fact("l", "vac", "", [x >= 1, x <= 0], x == 7)["answer"] == "vacuous"


# ---------------------------------------------------------------------------- the argmax of an indicator readout
def _indicator_build():
    from rnngap.constructions.models import targets as TG
    return S.rnnsim_transformer(TG.register_index_rnn(3, max_number=5), max_prompt=6, max_rnn_cot=3)


def test_every_indicator_readout_simulator_proves_its_argmax():
    """The argmax's three layers, each on its own and in a row, and the Y case
    (the winner's code), for every simulator the registry builds with an
    indicator readout; none for a nearest-code readout."""
    from rnngap.checks.certify.simulator import argmax_facts, indicator_plan, next_code_facts
    seen = 0
    for sim in sim_simulators():
        facts = argmax_facts(sim)
        if sim.mode == "nearest":
            assert facts == [], sim.model.name
            continue
        seen += 1
        C = len(indicator_plan(sim)[0])
        assert C >= 2 and _failed(facts) == [], sim.model.name
        assert {f["fact"] for f in facts} == {f"argmax.{k}{j}" for k in ("logit", "beats", "winner")
                                             for j in range(C)} | {"argmax.one-hot"}
        assert "next.Y" in {f["fact"] for f in next_code_facts(sim)} and _failed(next_code_facts(sim)) == []
    assert seen >= 3


def _argmax_mutant(monkeypatch, which: int, change):
    """The indicator-readout simulator built with ``change(sim, neurons)`` applied to
    the argmax's layer ``which`` (0 logits, 1 comparisons, 2 winner)."""
    from rnngap.constructions.build.gadgets import Neuron
    real = S.RNNSimulator._argmax_mlps

    def mutated(self):
        mlps = [[Neuron(dict(n.inp), n.bias, dict(n.out), n.group) for n in ns] for ns in real(self)]
        mlps[which] = change(self, mlps[which])
        return tuple(mlps)
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_argmax_mlps", mutated)
        return _indicator_build()


def _flip_strict(sim, ns):
    """The comparison of contenders 1 and 0 made non-strict: a tie goes to the larger id."""
    for i, n in enumerate(ns):
        if n.out == {"beats1": 1} and n.inp.get("logit1", 0) > 0 and n.inp.get("logit0", 0) < 0:
            assert ns[i + 1].out == {"beats1": -1}                 # the step's second half
            return _edit(_edit(ns, i, bias=n.bias + 1), i + 1, bias=ns[i + 1].bias + 1)
    raise AssertionError("no comparison of contenders 1 and 0")


ARGMAX_MUTANTS = {
    # a logit term's coefficient one larger
    "logit coefficient": (0, lambda sim, ns: _edit(ns, 0, inp={k: v + 1 for k, v in ns[0].inp.items()}),
                          "argmax.logit"),
    # [logit1 > logit0] made [logit1 >= logit0]: ties no longer go to the smaller id
    "tie-break": (1, _flip_strict, "argmax.beats1"),
    # the winner's threshold one lower: a contender beating C - 2 others also wins
    "winner threshold": (2, lambda sim, ns: _edit(ns, 0, bias=ns[0].bias + 1), "argmax.winner0"),
    # winner0 also reads logit1 (in the residual at the winner layer): a second winner when logit1 > 0
    # (a review's repro: checked with the logits at 0, every fact held)
    "winner reads a logit": (2, lambda sim, ns: _edit(ns, 0, inp={**ns[0].inp, "logit1": 1 << sim.fR}),
                             "argmax.winner0"),
}


@pytest.mark.parametrize("mutant", sorted(ARGMAX_MUTANTS))
def test_a_one_term_change_of_the_argmax_fails_at_its_layer(monkeypatch, mutant):
    from rnngap.checks.certify.simulator import argmax_facts
    which, change, want = ARGMAX_MUTANTS[mutant]
    failed = _failed(argmax_facts(_argmax_mutant(monkeypatch, which, change)))
    # the composition (comparisons, then winner) fails too for a mutant of those two layers
    assert any(f.startswith(want) for f in failed) and ("argmax.one-hot" in failed) == (which > 0), failed


def test_a_fractional_indicator_coefficient_fails_the_plan():
    """The RNN's readout rounds each product c x_d; with a fractional c that rounding
    is not the exact sum the argmax's MLPs compute, so the plan refuses it."""
    from rnngap.checks.certify.simulator import argmax_facts
    from rnngap.constructions.machine import kernels as K
    sim = _indicator_build()
    ro = sim.rnn.spec.readout
    i = next(i for i, t in enumerate(ro) if t[1] == K.F_IS_TOKEN)
    ro[i] = (*ro[i][:3], Fraction(ro[i][3]) + Fraction(1, 2))
    assert _failed(argmax_facts(sim)) == ["argmax.coefficients"]


def test_a_readout_term_the_plan_does_not_know_fails():
    """A tau term next to the indicator terms: the argmax's plan would leave it out,
    so the plan refuses the readout instead of claiming the RNN's token."""
    from rnngap.checks.certify.simulator import argmax_facts
    from rnngap.constructions.machine import kernels as K
    sim = _indicator_build()
    sim.rnn.spec.readout.append((sim.rnn.spec.readout[0][0], K.F_TOK, 0, Fraction(1)))
    assert _failed(argmax_facts(sim)) == ["argmax.readout"]


def test_a_wrong_winner_code_or_a_dropped_contender_fails(monkeypatch):
    """The Y case's code of a winner one off fails next.Y; a builder that drops the
    last contender no longer matches the RNN's readout (argmax.dims)."""
    from rnngap.checks.certify.simulator import argmax_facts, next_code_facts

    def code(sim, ns):
        i = next(i for i, n in enumerate(ns) if "winner0" in n.inp and n.out == {"next_code": 1})
        return _edit(ns, i, inp={**ns[i].inp, "winner0": ns[i].inp["winner0"] + 1})
    assert _failed(next_code_facts(_next_code_mutant(monkeypatch, code, _indicator_build))) == ["next.Y"]
    real = S.RNNSimulator._parse_indicator_readout

    def dropped(self):
        real(self)
        self.contenders, self.contender_terms = self.contenders[:-1], self.contender_terms[:-1]
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_parse_indicator_readout", dropped)
        sim = _indicator_build()
    assert "argmax.dims" in _failed(argmax_facts(sim)) and "next.Y" in _failed(next_code_facts(sim))


def test_an_argmax_direction_written_by_another_layer_fails():
    """The winner layer also adding to logit0 (the built spec changed in place: the
    builder itself refuses a second writer): the logit layer's facts still hold, the
    order of writers fails."""
    from rnngap.checks.certify.simulator import argmax_facts, sequence_facts
    sim = _indicator_build()
    spec = sim.model.spec
    d = spec.labels.index("logit0")
    winner = next(L for L in spec.attn_layers if np.any(L.W2[spec.labels.index("winner0")] != 0))
    winner.W2[d, 0] = 1
    assert _failed(sequence_facts(sim)) == ["order.logit0"]
    assert "argmax.winner.writes" in _failed(argmax_facts(sim))
