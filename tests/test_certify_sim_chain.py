"""The simulator's composition (checks/certify/simulator_chain.py): the proved layers
chained over the reference CoT.

Every simulator the registry builds composes. Then each kind of design error
the per-layer facts cannot see (they check each layer against its own plan)
must fail the chain where it bites: a head aimed elsewhere in both the builder
and the plan (every per-layer fact still holds), a block role, a token value or
an emit decision that does not lead to the layout's next token, a simulator
asked for more steps than its positions hold.
"""
from __future__ import annotations

import copy
from fractions import Fraction
import pytest

from rnngap.checks.certify import simulator as CSIM, simulator_chain as CH
from rnngap.checks.catalog.hierarchy import sim_simulators
from rnngap.constructions.models import cot_hierarchy as CHR
from rnngap.constructions.models import simulate as S
from rnngap.checks.certify import rows

from test_certify_sim import _component, _failed, _mutated


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    """Each test proves its own simulators (no records from another test's)."""
    monkeypatch.setattr(CH, "_POSITIONS", {})


def _build():
    return S.rnnsim_transformer(CHR.iterate_rnn(2), max_prompt=6, max_rnn_cot=4)


def test_every_built_simulator_composes():
    for sim in sim_simulators():
        facts = CH.chain_facts(sim)
        assert _failed(facts) == [], sim.model.name
        kinds = {f["fact"] for f in facts if f["fact"].startswith("chain.") and f["method"] == "smt"}
        S_ = CSIM.layout(sim)["S"]
        want = {"chain.prompt", "chain.K", "chain.Y.filler", f"chain.S{S_ - 1}.filler", f"chain.S{S_ - 1}.token"}
        want |= {f"chain.S{i}" for i in range(S_ - 1)}
        want |= {"chain.Y.token"} if sim.max_rnn_cot >= 1 else set()
        assert want <= kinds, (sim.model.name, sorted(want - kinds))
        assert all(f["query"] for f in facts if f["method"] == "smt")


def _shifted_plan(head: str, by: int):
    real = CSIM.plan

    def plan(sim):
        heads = dict(real(sim))
        li, (kind, q), copy_ = heads[head]
        heads[head] = (li, (kind, {**q, "one": q.get("one", 0) + by}), copy_)
        return heads
    return plan


def test_a_head_aimed_elsewhere_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """prev_token aimed one position later in the builder, and the plan saying so: every
    per-layer fact holds (the head does what its plan says), but at every block
    past the prompt it now copies the block's own K(t) as the RNN's input instead
    of y_(t-1): the chain fails on the RNN's input."""
    sim = _mutated(monkeypatch, "prev_token", lambda kw: _component(
        kw, query={**kw["components"][0].query, "one": kw["components"][0].query.get("one", 0) + 1}))
    real = CSIM.plan
    monkeypatch.setattr(CSIM, "plan", _shifted_plan("prev_token", 1))
    monkeypatch.setattr(CH, "plan", CSIM.plan)
    assert _failed(CSIM.head_facts(sim)) == []
    facts = CH.chain_facts(sim)
    failed = _failed(facts)
    assert "chain.K" in failed and "chain.prompt" not in failed, failed
    why = next(f["counterexample"] for f in facts if f["fact"] == "chain.K")
    assert why.startswith("fails: the RNN's input"), why
    # unmutated, the same simulator composes
    monkeypatch.setattr(CH, "plan", real)
    assert _failed(CH.chain_facts(_build())) == []


def _role_emit1_on(flag):
    real = CSIM.role_plan
    b = lambda c: CSIM.z3.If(c, CSIM.z3.RealVal(1), CSIM.z3.RealVal(0))     # noqa: E731

    def role_plan(sim):
        out = dict(real(sim))
        out["emit_state1"] = (lambda v: b(CSIM.z3.And(v["seen_counter"] == 1, v[flag] == 1)), f"[{flag}]")
        return out
    return role_plan


def _type_counter_plus(k):
    real = CSIM.type_plan

    def type_plan(sim):
        rows = []
        for name, what, lo, hi, want in real(sim):
            if name == "counter":
                K0 = lo
                want = {**want, "counter_value": CSIM.Val(lambda tau: tau - K0 + k, f"tau - {K0} + {k}")}
            rows.append((name, what, lo, hi, want))
        return rows
    return type_plan


def _emit_swapped():
    real = CSIM.emit_plan

    def emit_plan():
        out = real()
        return {"emit_rnn_token": out["emit_filler"], "emit_filler": out["emit_rnn_token"]}
    return emit_plan


PLAN_MUTANTS = {
    # S1 emitted after S1 instead of after S0: S0's next token would be nothing, S1's S1 again
    "emit_state1 keyed on is_state1": ("role_plan", _role_emit1_on("is_state1"), {"chain.S0", "chain.S1"}),
    # the counter's value one too high: step = t + 1, K(t + 2) after Y_t
    "counter value one high": ("type_plan", _type_counter_plus(1), {"chain.K", "chain.S0", "chain.Y.filler"}),
    # the filler and the RNN's token swapped
    "emit decision swapped": ("emit_plan", _emit_swapped(), {"chain.S3.filler", "chain.S3.token"}),
}


@pytest.mark.parametrize("mutant", sorted(PLAN_MUTANTS))
def test_a_design_that_does_not_lead_to_the_next_token_fails_the_chain(monkeypatch, mutant):
    """Each a plan the layers could be built to (the per-layer facts check a layer
    against its plan), chained over the reference: it fails where it bites."""
    name, fn, want = PLAN_MUTANTS[mutant]
    monkeypatch.setattr(CH, name, fn)
    failed = set(_failed(CH.chain_facts(_build())))
    assert want <= failed, (mutant, sorted(failed))


def test_more_steps_than_the_positions_hold_fails():
    """A simulator asked for one more RNN CoT token than it was built for: the
    last blocks lie past the positions the heads' lemmas cover (firstK's to
    n_pos), and the chain says so."""
    sim = copy.copy(_build())
    sim.max_rnn_cot += 1
    facts = CH.chain_facts(sim)
    failed = _failed(facts)
    assert "chain.K" in failed, failed
    why = next(f["counterexample"] for f in facts if f["fact"] == "chain.K")
    assert why.startswith("fails: p lies within the positions"), why


def test_a_token_range_short_of_the_state_promise_fails(monkeypatch):
    """The promise |2^f s| < OFF is what puts every state number's code in its
    type lemma's range: with the range the type lemma is proved on one code short
    at the top for S0 (a decode that stops one early), the codes fact fails for
    S0 alone."""
    real = CSIM.type_plan

    def type_plan(sim):
        return [(n, w, lo, hi - 1 if n == "state0" else hi, want) for n, w, lo, hi, want in real(sim)]
    monkeypatch.setattr(CH, "type_plan", type_plan)
    failed = _failed(CH.chain_facts(_build()))
    assert [f for f in failed if f.startswith("chain.codes")] == ["chain.codes.state0"], failed


def test_a_prompt_token_typed_as_a_counter_fails_first_k(monkeypatch):
    """If the RNN's own tokens were typed as counters (the rnn_tokens row writing
    is_counter = 1), firstK would find a prompt token: chain.firstK fails."""
    real = CSIM.type_plan

    def type_plan(sim):
        return [(n, w, lo, hi, {**want, "is_counter": 1} if n == "rnn_tokens" else want)
                for n, w, lo, hi, want in real(sim)]
    monkeypatch.setattr(CH, "type_plan", type_plan)
    failed = _failed(CH.chain_facts(_build()))
    assert "chain.firstK" in failed, failed


def test_the_row_covers_the_composition():
    sim = _build()

    r = rows.simulator_row([sim])
    assert r.certified and "composition" in r.covers
    assert any(f["fact"].endswith(": chain.K") for f in r.facts)


# ----------------------------------------------------------------------------
# the machine's arithmetic: exact.products
def _rescaled(sim, li: int, m: int, alpha):
    """A copy of ``sim`` whose layer ``li`` has neuron ``m``'s W1 row and b1
    times alpha and its W2 column divided by alpha (alpha > 0): the same values
    in exact arithmetic (relu is positively homogeneous), other products for
    the machine to round."""
    import dataclasses
    from types import SimpleNamespace
    alpha = Fraction(alpha)
    layers = list(sim.model.spec.attn_layers)
    L = layers[li]
    W1, b1, W2 = L.W1.copy(), L.b1.copy(), L.W2.copy()
    W1[m] = [Fraction(v) * alpha for v in W1[m]]
    b1[m] = Fraction(b1[m]) * alpha
    W2[:, m] = [Fraction(v) / alpha for v in W2[:, m]]
    layers[li] = dataclasses.replace(L, W1=W1, b1=b1, W2=W2)
    shim = copy.copy(sim)
    shim.model = SimpleNamespace(spec=dataclasses.replace(sim.model.spec, attn_layers=layers), fmt=sim.model.fmt,
                                 max_positions=sim.model.max_positions, vocab=sim.model.vocab, name=sim.model.name)
    return shim


def _f3():
    from rnngap.constructions.models import targets as TG
    return S.rnnsim_transformer(TG.random_linear_rnn(2, 3, 0, max_number=4), max_prompt=5, max_rnn_cot=0)


def test_every_simulator_rounds_only_the_rnns_products():
    for sim in sim_simulators():
        assert _failed(CH.exact_facts(sim)) == [], sim.model.name


def test_a_state_neuron_scaled_by_two_fails_only_the_machine_arithmetic():
    """A state neuron's row doubled and its column halved: every exact-arithmetic
    step fact still holds, but the machine now rounds 2 A[s, s'] h products, not
    the RNN's: exact.products fails."""
    sim = _f3()
    li = CSIM.plan(sim)["prompt"][0] + 1
    shim = _rescaled(sim, li, 0, 2)
    assert _failed(CSIM.step_facts(shim)) == []
    assert _failed(CH.exact_facts(shim)) == ["exact.products"]
    assert "not the RNN step's products" in CH.exact_facts(shim)[0]["counterexample"]


def test_a_grid_value_times_a_fraction_fails_the_machine_arithmetic():
    """The next-code MLP's neurons that read the states (multiples of 2^-f) with
    integer weights, rescaled by 2^-(f + 1): the same exact values (its facts
    hold), but a product of a fraction and a grid value, which the machine rounds."""
    sim = _f3()
    spec = sim.model.spec
    labels = list(spec.labels)
    li = len(spec.attn_layers) - 1
    L = spec.attn_layers[li]
    h0 = next(a for a, lab in enumerate(labels) if lab.startswith("h0:"))
    m = next(i for i in range(L.W1.shape[0]) if L.W1[i, h0] != 0)
    shim = _rescaled(sim, li, m, Fraction(1, 2 ** (sim.model.fmt.frac_bits + 1)))
    assert _failed(CSIM.next_code_facts(shim)) == []
    failed = CH.exact_facts(shim)
    assert _failed(failed) == ["exact.products"] and "rounds" in failed[0]["counterexample"], failed


# ----------------------------------------------------------------------------
# designs where builder and plan agree (every per-layer fact holds) but the CoT goes wrong:
# each was a hole a review found in the first version of the chain; the runs disagree with the RNN
def _per_layer(sim) -> list:
    return _failed(CSIM.type_facts(sim) + CSIM.head_facts(sim) + CSIM.role_facts(sim) + CSIM.input_facts(sim)
                   + CSIM.next_code_facts(sim) + CSIM.sequence_facts(sim))


def _with_type_mlp(monkeypatch, extra):
    """The simulator built with ``extra(self)`` neurons added to its token-type MLP."""
    real = S.RNNSimulator._token_type_mlp
    with monkeypatch.context() as mp:
        mp.setattr(S.RNNSimulator, "_token_type_mlp", lambda self: real(self) + extra(self))
        return _build()


def _type_row(monkeypatch, row: str, **values):
    real = CSIM.type_plan

    def type_plan(sim):
        return [(n, w, lo, hi, {**want, **values} if n == row else want) for n, w, lo, hi, want in real(sim)]
    monkeypatch.setattr(CSIM, "type_plan", type_plan)
    monkeypatch.setattr(CH, "type_plan", type_plan)


def test_a_flag_of_two_fails_the_flags_fact(monkeypatch):
    """The filler typed with is_counter = 2 (builder and type plan): the role
    lemma's one-hot flags and firstK's 0/1 keys no longer hold; chain.flags says so."""
    sim = _with_type_mlp(monkeypatch, lambda self: S._ge({"tok": 1}, self.tau_F, {"is_counter": 2})
                         + S._ge({"tok": 1}, self.tau_F + 1, {"is_counter": -2}))
    _type_row(monkeypatch, "filler", is_counter=2)
    assert _per_layer(sim) == []
    assert "chain.flags" in _failed(CH.chain_facts(sim))


def test_a_step_out_of_range_at_the_prompt_fails(monkeypatch):
    """counter_value = tau_max + 1 on the RNN's own tokens (builder and type
    plan): the blocks are unchanged, but at the last prompt token the step is
    past the next-code lemma's range (the K(t + 1) neuron fires, not K(0))."""
    sim0 = _build()
    V = sim0.tau_max + 1
    sim = _with_type_mlp(monkeypatch, lambda self: S._ge({"tok": -1}, -(self.tau_F - 1), {"counter_value": V}))
    _type_row(monkeypatch, "rnn_tokens", counter_value=V)
    assert _per_layer(sim) == []
    facts = CH.chain_facts(sim)
    assert _failed(facts) == ["chain.prompt"], _failed(facts)
    assert "step an integer in" in next(f["counterexample"] for f in facts if f["fact"] == "chain.prompt")


def test_two_heads_into_one_direction_are_summed(monkeypatch):
    """The counter head also adds counter_value into prev_state0 (builder and
    plan; prev_state0 made a sum): the chain adds both copies, as the model does."""
    from rnngap.constructions.build import gadgets as G
    real_hidden = G.ResidualSpace.hidden
    monkeypatch.setattr(G.ResidualSpace, "hidden", lambda self, label, accumulate=False, bound=None: real_hidden(
        self, label, accumulate or label == "prev_state0", bound))
    extra = {"prev_state0": {"counter_value": 1}}
    sim = _mutated(monkeypatch, "counter", lambda kw: {**kw, "copy": {**kw["copy"], **extra}})
    real = CSIM.plan

    def plan(s):
        heads = dict(real(s))
        li, q, cp = heads["counter"]
        heads["counter"] = (li, q, {**cp, **extra})
        return heads
    monkeypatch.setattr(CSIM, "plan", plan)
    monkeypatch.setattr(CH, "plan", plan)
    assert _failed(CSIM.head_facts(sim)) == []
    failed = _failed(CH.chain_facts(sim))
    assert "chain.K" in failed and "chain.writers" not in failed, failed


def test_a_scaled_feature_copy_fails_the_features_fact(monkeypatch):
    """The prompt head copying twice an RNN feature (builder and plan): the RNN
    is handed another input than its own embedding of the token."""
    sim = _build()
    lab = CSIM.layout(sim)["emb"][0]
    tgt = f"prompt_token:{lab}"
    sim = _mutated(monkeypatch, "prompt", lambda kw: {**kw, "copy": {**kw["copy"], tgt: {f"rnn_embed:{lab}": 2}}})
    real = CSIM.plan

    def plan(s):
        heads = dict(real(s))
        li, q, cp = heads["prompt"]
        heads["prompt"] = (li, q, {**cp, tgt: {f"rnn_embed:{lab}": 2}})
        return heads
    monkeypatch.setattr(CSIM, "plan", plan)
    monkeypatch.setattr(CH, "plan", plan)
    assert _failed(CSIM.head_facts(sim)) == []
    assert "chain.features.copies" in _failed(CH.chain_facts(sim))


def test_another_grid_or_a_saturating_format_fails_the_machine_arithmetic():
    """The simulator rounding to 2^-(f + 1) while the RNN rounds to 2^-f (a review's
    repro: every exact-arithmetic fact holds, the runs disagree), or in saturate
    mode: exact.products says so."""
    import dataclasses
    from types import SimpleNamespace
    from rnngap.constructions.machine.formats import FixedFormat
    sim = _f3()
    for fmt in (FixedFormat(sim.model.fmt.int_bits, sim.model.fmt.frac_bits + 1),
                dataclasses.replace(sim.model.fmt, mode="saturate")):
        shim = copy.copy(sim)
        shim.model = SimpleNamespace(spec=sim.model.spec, fmt=fmt, max_positions=sim.model.max_positions,
                                     vocab=sim.model.vocab, name=sim.model.name)
        facts = CH.exact_facts(shim)
        assert _failed(facts) == ["exact.products"], fmt
        assert ("rounds to 2^-" in facts[0]["counterexample"]) or ("saturate" in facts[0]["counterexample"])
