"""The CoT-hierarchy family: the T4.1 RNN for ITER and the Transformer that simulates a linear RNN.

The T4.1 RNN's record, certified form and whole-model plan (its four state
numbers in closed form and what its MLPs write), and the simulator's record
and certified form. The simulator depends on the RNN it simulates, so its
record is not certified itself: ``rnngap certify`` certifies every simulator the
registry builds. The builders are in constructions/models/cot_hierarchy.py and
constructions/models/simulate.py.
"""
from __future__ import annotations

from rnngap.constructions.models import bounds as Bd, cot_hierarchy, simulate, targets as TG
from rnngap.constructions.models.bounds import INT
from rnngap.constructions.models.obligations import Construction, Obligation, gap, range_
from rnngap.checks.certify.interpreter import Plan, Written
from rnngap.checks.certify.plans import ModelPlan
from rnngap.checks.tasks.abstract import z3

from .asymptotics import N as N_DECL
from .examples import iterate_example
from .schema import Certificate, ConstructionRecord, Form, Key, Resource, fixed_certificates, int_frac_resources

SPECIAL = -Bd.SPECIAL_MIN_CODE


def iterate_cert() -> Construction:
    """The T4.1 RNN with CoT for ITER."""
    return Construction("T4.1", "iterate-rnn", Bd.ITERATE, 2, (
        range_("readout", lambda B, n, f: Bd.iterate_readout_bound(B, n)),))


def sim_construction(p: "Bd.SimRNN", n_min: int = 1) -> Construction:
    """The simulator of the RNN ``p`` (constructions/models/simulate.py) at context length n.

    The simulator's I is defined as the largest of its parts' needs
    (bounds.sim_int = max of bounds.sim_needs), so every ``*.range`` obligation
    holds by definition; what certify adds for them is that the declared format
    fits int64 up to n_max and that I(n) is nondecreasing (so a simulator with a
    shorter context is covered). The gap obligation and the clamp gate are real
    inequalities; the simulator's heads are proved from each built simulator
    (checks/certify/simulator.py, row 'rnnsim-transformer[layers]')."""
    names = list(Bd.sim_needs(INT, p, 1, 1))
    obl = [gap("heads")]
    for k in names:
        obl.append(Obligation(k, lambda B, n, I, f, k=k: Bd.sim_needs(B, p, n, n)[k], lambda B, n, I, f: I,
                              doc="defined from its own obligation: I = max of the needs"))
    obl.append(Obligation("clamp.gate", lambda B, n, I, f: Bd.sim_clamp(B, p)[0] + SPECIAL,
                          lambda B, n, I, f: Bd.sim_clamp(B, p)[2],
                          doc="big >= v_max - TAU_MIN: the clamp's gate is closed off the Y position"))
    return Construction("sim", f"rnnsim-transformer[{p.name}]", Bd.sim_declared(p), n_min, tuple(obl))


def _iterate_plan(inst) -> Plan:
    """The T4.1 RNN (no heads): its four state numbers in closed form (the prompt
    is ``[BOS] z_1..z_n [QUERY] (2n + s) a``, then the CoT) and what its MLPs
    write: the step count s at the step token, done = [k >= s] at the k-th CoT
    position n + 3 + k, and at every readout position the code of the
    reference's next token (g(v) + 1 while k < s, the answer at k = s)."""
    n, s = inst.n, inst.steps
    one, zero = z3.IntVal(1), z3.IntVal(0)
    return Plan({}, states={
        "q": lambda inst, t: z3.If(t >= n + 1, one, zero),            # [QUERY] seen
        "c": lambda inst, t: z3.If(t >= n + 1, t - n, zero),          # tokens since [QUERY], inclusive
        "r": lambda inst, t: z3.If(t >= n + 2, s, zero),              # the step count, once read
        "x": lambda inst, t: inst.tau(t) - 1,                         # the value just read
    }, mlps={
        "wt": Written(lambda inst, t, case: z3.If(t == n + 2, s, zero),
                      lemma="wt = relu(tau - m - 1) is s at the step token and 0 elsewhere"),
        "done": Written(lambda inst, t, case: z3.If(t >= n + 3 + s, one, zero),
                        lemma="done = [c - r >= 3] is [k >= s]"),
        "out": Written(lambda inst, t, case: inst.answer_code(t, case), at=lambda inst, t: inst.readout_positions(t), by_case=True,
                       lemma="out is the code of the reference's next token: g(v) + 1, or the answer"),
    }, value_bound=Bd.iterate_readout_bound(Bd.SYM, Bd.N))


ITERATE = ModelPlan("iterate", _iterate_plan)


def _iterate_resources():
    D = cot_hierarchy.DECLARED
    return int_frac_resources("iterate-rnn", D, frac_order="constant", sub={cot_hierarchy.N: N_DECL}) + (
        Resource("iterate-rnn", "cot", cot_hierarchy.STEPS_EXPR.subs(cot_hierarchy.N, N_DECL), "poly:2",
                 cot_hierarchy.cot_bound),)


def _sim_size(n):
    """The T4.1 RNN for n simulated as checks_hierarchy.sim_iterate does."""
    T = cot_hierarchy.steps(n)
    return {"rnn": cot_hierarchy.iterate_rnn(n), "max_prompt": n + 4, "max_rnn_cot": T,
            "state_int_bits": (T + 2 * n + 4).bit_length()}


# ----------------------------------------------------------------------------
# The simulators' sizes: rnngap verify checks them (checks/verify/checks_hierarchy.py)
# and rnngap certify proves the same ones (:func:`sim_simulators`).
SIM_SEEDS = {"quick": 4, "full": 12}
"""Random linear RNNs simulated, per profile (seeds 0..k-1)."""
SIM_EXH_LEN = {"quick": 3, "full": 4}
"""Every prompt [BOS] + x with |x| <= this (alphabet 3) is run."""
SIM_RANDOM = {"quick": [(8, 10)], "full": [(8, 40), (16, 20), (32, 6)]}
"""(prompt length, count) of the random prompts."""
SIM_RNN_COT = 2
"""The random RNNs' CoT length."""
SIM_STATE_BITS = 4
"""The random RNNs' state integer bits (the promise |s_t| < 2^I_s)."""
SIM_NECESSITY = {"quick": 1, "full": 3}
"""How many of the random RNNs get a necessity record (frontiers of their simulator)."""
SIM_T41 = {"quick": [(2, None), (3, None), (4, 40)], "full": [(2, None), (3, None), (4, None), (5, 200)]}
"""(n, count) for the T4.1 RNN (count None: every (a, t))."""
SIM_REGISTER = {"quick": [3], "full": [3, 4, 5]}
"""The register Index RNN's sizes c."""
SIM_TARGET_SEEDS = {"quick": 2, "full": 8}
"""Random indicator-readout target RNNs (seeds)."""


def sim_simulators(seed: int = 0, profile: str = "quick") -> list:
    """The simulators the registry builds in ``profile`` (checks/verify/checks_hierarchy.py
    builds them from the sizes above): random RNNs, the T4.1 RNN at each sampled n,
    the register Index RNN and the random indicator-readout target RNNs."""
    sim = simulate.rnnsim_transformer
    longest = max([SIM_EXH_LEN[profile] + 1] + [L + 1 for L, _ in SIM_RANDOM[profile]])
    out = [sim(simulate.random_linear_rnn(seed * 100 + s), max_prompt=longest, max_rnn_cot=SIM_RNN_COT,
               state_int_bits=SIM_STATE_BITS) for s in range(SIM_SEEDS[profile])]
    for n, _ in SIM_T41[profile]:
        T = cot_hierarchy.steps(n)
        out.append(sim(cot_hierarchy.iterate_rnn(n), max_prompt=n + 4, max_rnn_cot=T,
                       state_int_bits=(T + 2 * n + 4).bit_length()))
    out += [sim(TG.register_index_rnn(c, max_number=c + 2), max_prompt=c + 3, max_rnn_cot=c)
            for c in SIM_REGISTER[profile]]
    out += [sim(TG.random_linear_rnn(2, 3, seed * 100 + s, max_number=4), max_prompt=5, max_rnn_cot=0)
            for s in range(SIM_TARGET_SEEDS[profile])]
    return out


def _sim_resources():
    """The simulator's precision depends on the RNN it is given (bounds.sim_int of the
    RNN's constants): declared for the registry's first random RNN as a function of
    the context length n (every simulator the registry builds is certified by
    ``rnngap certify``)."""
    p = simulate.rnnsim_transformer(simulate.random_linear_rnn(0), max_prompt=1, max_rnn_cot=0,
                                    state_int_bits=SIM_STATE_BITS).params()
    sim = Bd.sim_declared(p)
    return int_frac_resources(sim.name, sim, sub={Bd.N: N_DECL}, frac=False)


RECORDS = (
    ConstructionRecord(Key("T4.1", "iterate", "rnn"), cot_hierarchy.iterate_rnn, iterate_example,
                       "RNN with CoT for ITER (iterating the permutation g)",
                       (Form("iterate-rnn", params=439, params_n=(2, 64), resources=_iterate_resources,
                             certificates=fixed_certificates(Certificate(iterate_cert(), ITERATE))),)),
    ConstructionRecord(Key("sim", "rnnsim", "transformer"), simulate.rnnsim_transformer, iterate_example,
                       "the Transformer simulating a linear RNN step by step (here the T4.1 RNN for n)",
                       (Form("sim", resources=_sim_resources),),
                       uncertified="the simulator depends on the RNN it simulates: `rnngap certify` certifies each "
                                   "simulator the registry builds (rows sim[...] and 'rnnsim-transformer[layers]'), not this "
                                   "record", size=_sim_size),
)
"""The T4.1 RNN and the simulator."""
