"""The simulator's (claim ``sim``) token types, heads and RNN layers, proved from the BUILT simulator.

For every simulator the registry builds (checks/catalog/hierarchy.py ``sim_simulators``),
each layer is proved from its built weights against a plan (:func:`plan`, with
constants from :func:`layout`, never the builder's): the token types
(:func:`type_facts`), block roles (:func:`role_facts`), input selection
(:func:`input_facts`), each simulated RNN layer's step with the RNN's own weights
(:func:`step_facts`), the next code (:func:`next_code_facts`), the readout
(:func:`readout_facts`), an indicator readout's argmax (:func:`argmax_facts`),
and the layers' order (:func:`sequence_facts`). Each head's score is read off the
built W_Q, W_K; z3 proves each position head and ``firstK`` attend the plan's key
by at least sharpness(f), and each copy is checked exactly. The composition is
checks/certify/simulator_chain.py's.

Details (the scores, the heads, what is not covered):
docs/internals/certify.md#simulator
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.build.num import sharpness
from rnngap.constructions.machine.vocab import token_code
from rnngap.constructions.models.bounds import INT, sim_emb_bound
from rnngap.constructions.models.simulate import (
    AFTER_LAST_STATE, ARGMAX_KINDS, BEATS, COUNTER_HEAD, COUNTER_VALUE, EMIT_FILLER, EMIT_NEXT_COUNTER,
    EMIT_RNN_TOKEN, FIRST_COUNTER_HEAD, IN_PROMPT, IS_COUNTER, IS_FILLER, IS_RNN_TOKEN, LOGIT, NEXT_CODE,
    PREV_TOKEN_HEAD, PROMPT_DONE, PROMPT_HEAD, PROMPT_LENGTH, SEEN_COUNTER, STATE_VALUE, STEP, TAU_MIN, WINNER,
    argmax_direction, emit_state, is_state, prev_state, prev_state_head, prev_token, prompt_token, rnn_embedded,
    rnn_residual, rnn_state,
)

from .layer_facts import (
    copy_fact, embedded_value, HeadScore, mlp_out, nearest_readout_facts, planned_heads, query_combo,
    show_combo, smt_fact, unmet, writes_only, z3_value,
)
from .sizes import z3



def layout(sim) -> dict:
    """The plan's constants, from what the simulator's layout is defined by, not
    from the builder's working constants: S = the RNN's state numbers (its
    built layers), B = S + 2, f = the RNN's fraction bits, and the token ranges
    ``decode`` reads (the filler id, S_i's numbers Sb_i + OFF + raw, K(t) the
    number Kb + t); ``gaps`` lists where the code ranges do not tile TAU_MIN..top."""
    S = sum(L.A.shape[0] for L in sim.rnn.spec.rnn_layers)
    lo_F = token_code(sim.filler)
    lo_S = [b + 1 for b in sim.Sb]                  # codes of the numbers Sb_i .. Sb_i + 2 OFF - 1
    hi_S = [b + 2 * sim.OFF for b in sim.Sb]
    lo_K, top = sim.Kb + 1, sim.model.vocab.max_number + 1
    ends = [(TAU_MIN, lo_F - 1), (lo_F, lo_F)] + list(zip(lo_S, hi_S)) + [(lo_K, top)]
    gaps = [f"{a[1]} then {b[0]}" for a, b in zip(ends, ends[1:]) if b[0] != a[1] + 1]
    if len(sim.Sb) != S:
        gaps.append(f"{len(sim.Sb)} state ranges for {S} state numbers")
    return {"S": S, "B": S + 2, "f": sim.rnn.fmt.frac_bits, "tau_min": TAU_MIN, "filler": lo_F,
            "S_lo": lo_S, "S_hi": hi_S, "S_c": [b + sim.OFF + 1 for b in sim.Sb], "K": lo_K, "top": top,
            "gaps": gaps, "emb": [lab for lab, e in zip(sim.rnn.spec.labels, sim.rnn.spec.embedding)
                                  if e[0] != K.F_ZERO and e[2] != 0]}


def position_query(lay: dict, shift: int) -> dict:
    """The plan's query of a block head: the block's start plus ``shift``,
    pos - idx + shift (idx the current token's index in its block of B = S + 2
    tokens: S_i is at index i + 1, the Y token (filler or RNN token) at S + 1)."""
    q = {"pos": 1, "one": shift}
    for i in range(lay["S"]):
        q[is_state(i)] = -(i + 1)
    q[IS_FILLER] = q[IS_RNN_TOKEN] = -(lay["S"] + 1)
    return q


def plan(sim) -> dict:
    """head name -> (attention layer index, ("position", query combo) | ("first",
    key direction), copy: target direction -> the key's combo it must hold)."""
    lay = layout(sim)
    emb = {prompt_token(lab): {rnn_embedded(lab): 1} for lab in lay["emb"]}
    prev = {prev_token(lab): {rnn_embedded(lab): 1} for lab in lay["emb"]}
    heads = {FIRST_COUNTER_HEAD: (1, ("first", IS_COUNTER), {SEEN_COUNTER: {IS_COUNTER: 1},
                                                             PROMPT_LENGTH: {"pos": 1}}),
             COUNTER_HEAD: (1, ("position", position_query(lay, 1)), {STEP: {COUNTER_VALUE: 1}}),
             PREV_TOKEN_HEAD: (1, ("position", position_query(lay, 0)), prev),
             PROMPT_HEAD: (2, ("position", {STEP: 1, "one": 1}), emb)}
    for i in range(lay["S"]):
        heads[prev_state_head(i)] = (1, ("position", position_query(lay, 2 - lay["B"] + i)),
                                     {prev_state(i): {STATE_VALUE: 1}})
    return heads


def head_facts(sim, tag: str = "sim") -> list[dict]:
    """One proof record per head of the built simulator (its score read off W_Q,
    W_K and the embedding), and one per missing or unplanned head."""
    spec = sim.model.spec
    s = sharpness(sim.model.fmt.frac_bits)
    P = (sim.model.max_positions or sim.n_pos + 1) - 1        # the largest position the model reads

    def prove(li, h, entry, layer):
        _, (kind, arg), copy = entry
        score = HeadScore(spec, h, f"{tag}.{h.name}")
        try:
            got = (_position_facts(score, arg, s, layer) if kind == "position"
                   else _first_facts(score, arg, s, layer, P))
        except ValueError as e:
            got = [unmet(f"{h.name}.read", layer, "the score's directions", str(e))]
        return got + [copy_fact(spec, h, copy, layer)]
    return _single_writer(spec, ("pos", "pos_sq", "one")) + planned_heads(spec, plan(sim), lambda e: e[0], prove)


def _single_writer(spec, labels) -> list[dict]:
    """The directions the heads read as the embedding's (pos, pos^2, 1) hold the
    embedding at every layer: no head's W_O and no MLP writes them."""
    idx = {lab: spec.labels.index(lab) for lab in labels if lab in spec.labels}
    bad = []
    for li, L in enumerate(spec.attn_layers):
        for lab, d in idx.items():
            if any(v != 0 for h in L.heads for v in h.WO[d]) or any(v != 0 for v in L.W2[d]) or L.b2[d] != 0:
                bad.append(f"layer {li + 1} writes {lab}")
    return [{"fact": "embedding.single_writer", "layer": "embedding", "method": "exact",
             "statement": f"no layer writes {', '.join(idx)} (the heads read the embedding's values there)",
             "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(bad)} if bad else {})}]


def clamp_key(Q, n):
    """The key a position head attends at query position n (its lemma, below):
    clamp(Q - 1, 0, n) for the query value Q."""
    return z3.If(Q < 1, 0, z3.If(Q > n + 1, n, Q - 1))


def _position_facts(score: HeadScore, query: dict, s: int, layer: str) -> list[dict]:
    n, j = z3.Ints(f"{score.tag}.n {score.tag}.j")
    Q = query_combo(score, query)
    t = clamp_key(Q, n)
    hyps = [n >= 1, j >= 0, j <= n, j != t]
    concl = score(t, {}) - score(j, {}) >= s
    shown = show_combo(query)
    stmt = (f"for every n >= 1 and every integer value of the query's directions: with Q = {shown}, the key "
            f"j* = clamp(Q - 1, 0, n) scores at least {s} (sharpness(f)) above every other key j in 0..n "
            f"(score read off the built W_Q, W_K and the embedding)")
    return [smt_fact(layer, f"{score.head.name}.one_hot", stmt, hyps, concl)]


def _first_facts(score: HeadScore, flag: str, s: int, layer: str, n_pos: int) -> list[dict]:
    """``n_pos``: the largest position index the model reads."""
    j0, j1 = z3.Ints(f"{score.tag}.j0 {score.tag}.j1")
    k0, k1 = z3.Ints(f"{score.tag}.k0 {score.tag}.k1")
    P = n_pos
    rng = [j0 >= 0, j0 <= P, j1 >= 0, j1 <= P, j0 != j1]
    s0 = score(j0, {flag: z3.ToReal(k0)})
    s1 = score(j1, {flag: z3.ToReal(k1)})
    cases = [("flag_beats_no_flag", [k0 == 1, k1 == 0],
              f"a key with {flag} = 1 beats every key with {flag} = 0"),
             ("first_of_flagged", [k0 == 1, k1 == 1, j0 < j1], f"of two keys with {flag} = 1 the earlier wins"),
             ("first_of_unflagged", [k0 == 0, k1 == 0, j0 < j1],
              f"of two keys with {flag} = 0 the earlier wins (no flag yet: position 0)")]
    out = []
    for name, extra, what in cases:
        stmt = (f"at every pair of key positions in 0..{P} (n_pos) and every query position: {what}, by at least "
                f"{s} (sharpness(f)); score read off the built W_Q, W_K and the embedding")
        out.append(smt_fact(layer, f"{score.head.name}.{name}", stmt, rng + extra, s0 - s1 >= s))
    return out


# ----------------------------------------------------------------------------
# layer 1: the token-type MLP (a function of the token code alone)
class Val:
    """A planned value that depends on the code tau: ``fn(tau)`` (z3), shown as ``text``."""

    def __init__(self, fn, text: str):
        self.fn, self.text = fn, text


def type_plan(sim) -> list[tuple[str, str, int, int, dict]]:
    """(name, what, lowest code, highest code, what the layer-1 MLP writes there:
    label -> a constant or a :class:`Val`) over the code ranges of :func:`layout`:
    the RNN's own tokens, the filler, each state number S_i (its value
    2^-f (tau - c_i), c_i the code of the number Sb_i + OFF, which decode reads as 0),
    the counter tokens K(t) (t = tau - the code of K(0))."""
    lay = layout(sim)
    flags = [IS_RNN_TOKEN, IS_FILLER] + [is_state(i) for i in range(lay["S"])] + [IS_COUNTER]
    unit = Fraction(1, 1 << lay["f"])

    def only(flag, values=None):
        d = {f: (1 if f == flag else 0) for f in flags}
        d.update({STATE_VALUE: 0, COUNTER_VALUE: 0})
        d.update(values or {})
        return d
    out = [("rnn_tokens", "the RNN's own tokens", lay["tau_min"], lay["filler"] - 1, only(IS_RNN_TOKEN)),
           ("filler", "the filler", lay["filler"], lay["filler"], only(IS_FILLER))]
    for i in range(lay["S"]):
        c = lay["S_c"][i]
        out.append((f"state{i}", f"the state number S{i}", lay["S_lo"][i], lay["S_hi"][i],
                    only(is_state(i), {STATE_VALUE: Val(lambda tau, c=c: z3_value(unit) * (tau - c),
                                                        f"2^-{lay['f']} (tau - {c})")})))
    K0 = lay["K"]
    out.append(("counter", "the counter K(t)", K0, lay["top"],
                only(IS_COUNTER, {COUNTER_VALUE: Val(lambda tau: tau - K0, f"tau - {K0}")})))
    return out


def type_facts(sim, tag: str = "sim") -> list[dict]:
    """The first attention layer (no heads: its MLP only) read off the built
    weights, applied to the built embedding at a token of code tau (ReLU as
    if-then-else): the layout's code ranges tile TAU_MIN..top; on each, for
    every code in it and every position, the MLP writes exactly the plan's flags
    and values; and it writes no other direction."""
    spec = sim.model.spec
    L = spec.attn_layers[0]
    layer = "attention layer 1 (MLP only): token type"
    lay = layout(sim)
    spans = sorted((lo, hi) for _, _, lo, hi, _ in type_plan(sim))
    gaps = list(lay["gaps"]) + [f"{a[1]} then {b[0]}" for a, b in zip(spans, spans[1:]) if b[0] != a[1] + 1]
    if spans[0][0] != lay["tau_min"] or spans[-1][1] != lay["top"]:
        gaps.append(f"the ranges span {spans[0][0]}..{spans[-1][1]}")
    out = [{"fact": "type.tiling", "layer": layer, "method": "exact",
            "statement": f"the type lemma's code ranges (the layout's, decode's token ranges) tile "
                         f"{lay['tau_min']}..{lay['top']}",
            "answer": "holds" if not gaps else "sat",
            **({"counterexample": "; ".join(gaps)} if gaps else {})}]
    if L.heads:
        return out + [unmet("type.mlp_only", layer, "the first layer has no heads",
                             f"heads {[h.name for h in L.heads]}")]
    labels = list(spec.labels)
    plan_ = type_plan(sim)
    planned = set(plan_[0][4])
    out += writes_only(L, labels, planned, "type.writes", layer)
    tau, pos = z3.Ints(f"{tag}.tau {tag}.pos")
    try:
        x = {labels[a]: embedded_value(spec, a, tau, pos) for a in range(len(labels))
             if any(v != 0 for v in L.W1[:, a]) or labels[a] in planned}
        after = mlp_out(L, labels, x)
    except ValueError as e:
        return out + [unmet("type.read", layer, "the MLP's inputs", str(e))]
    for name, what, lo, hi, want in plan_:
        goals = [after(lab) == (v.fn(tau) if isinstance(v, Val) else z3_value(v)) for lab, v in want.items()]
        stmt = (f"for every token code tau in {lo}..{hi} ({what}) and every position: the layer-1 MLP writes "
                + ", ".join(f"{lab} = {v.text if isinstance(v, Val) else v}" for lab, v in want.items()
                            if isinstance(v, Val) or v)
                + "; every other flag and value 0 (read off the built W1, b1, W2, b2 and the embedding)")
        out.append(smt_fact(layer, f"type.{name}", stmt, [tau >= lo, tau <= hi, pos >= 0], z3.And(*goals)))
    return out


# ----------------------------------------------------------------------------
# layer 2's MLP: the block roles (after the position heads)


def role_plan(sim) -> dict:
    """What the second layer's MLP writes, as a function of the flags (one of the
    token-type flags is 1), seen_counter in {0, 1} and the integers step and
    prompt_length: label -> (z3 function of the inputs, text)."""
    S = layout(sim)["S"]
    b = lambda c: z3.If(c, z3.RealVal(1), z3.RealVal(0))     # noqa: E731
    plan_ = {IN_PROMPT: (lambda v: b(v[STEP] < v[PROMPT_LENGTH]), f"[{STEP} < {PROMPT_LENGTH}]"),
             PROMPT_DONE: (lambda v: b(v[STEP] >= v[PROMPT_LENGTH] - 1), f"[{STEP} >= {PROMPT_LENGTH} - 1]")}
    for i in range(S):
        flag = IS_COUNTER if i == 0 else is_state(i - 1)
        plan_[emit_state(i)] = (lambda v, flag=flag: b(z3.And(v[SEEN_COUNTER] == 1, v[flag] == 1)),
                                   f"[{SEEN_COUNTER} and {flag}]")
    plan_[AFTER_LAST_STATE] = (lambda v: b(z3.And(v[SEEN_COUNTER] == 1, v[is_state(S - 1)] == 1)),
                                 f"[{SEEN_COUNTER} and {is_state(S - 1)}]")
    plan_[EMIT_NEXT_COUNTER] = (lambda v: b(z3.And(v[SEEN_COUNTER] == 1,
                                                     z3.Or(v[IS_FILLER] == 1, v[IS_RNN_TOKEN] == 1))),
                                  f"[{SEEN_COUNTER} and ({IS_FILLER} or {IS_RNN_TOKEN})]")
    return plan_


def role_facts(sim, tag: str = "sim") -> list[dict]:
    """The second layer's MLP (after firstK, counter and the prev heads) read off
    the built weights: for every integer step and prompt_length, seen_counter in
    {0, 1} and one-hot token-type flags (what layer 1 writes: :func:`type_facts`),
    it writes the plan's block roles (:func:`role_plan`), and no other direction."""
    spec = sim.model.spec
    labels = list(spec.labels)
    li = next((i for i, L in enumerate(spec.attn_layers) if any(h.name == FIRST_COUNTER_HEAD for h in L.heads)), None)
    layer = "attention layer 2, MLP: block roles"
    if li is None:
        return [unmet("roles.layer", layer, "the layer of the position heads", f"no head {FIRST_COUNTER_HEAD}")]
    L = spec.attn_layers[li]
    want = role_plan(sim)
    out = writes_only(L, labels, set(want), "roles.writes", layer)
    flags = [IS_RNN_TOKEN, IS_FILLER] + [is_state(i) for i in range(layout(sim)["S"])] + [IS_COUNTER]
    ints = {lab: z3.Int(f"{tag}.roles.{lab}") for lab in flags + [SEEN_COUNTER, STEP, PROMPT_LENGTH]}
    hyps = [z3.Or(ints[lab] == 0, ints[lab] == 1) for lab in flags + [SEEN_COUNTER]]
    hyps.append(sum((ints[lab] for lab in flags), z3.IntVal(0)) == 1)
    x = {lab: z3.ToReal(v) for lab, v in ints.items()}
    try:
        after = mlp_out(L, labels, x)
    except ValueError as e:
        return out + [unmet("roles.read", layer, "the MLP's inputs", str(e))]
    for lab, (fn, text) in want.items():
        if lab not in labels:
            out.append(unmet(f"roles.{lab}", layer, f"{lab} = {text}", "no such direction"))
            continue
        stmt = (f"for every integer step and prompt_length, seen_counter in {{0, 1}} and one-hot token-type "
                f"flags: the MLP writes {lab} = {text} (read off the built W1, b1, W2, b2)")
        out.append(smt_fact(layer, f"roles.{lab}", stmt, hyps, after(lab) == fn(ints)))
    return out


# ----------------------------------------------------------------------------
# the RNN layers: each simulated by two MLPs, read against the RNN's own weights
def rnn_dims(sim) -> tuple[dict, list]:
    """({RNN dim d: its simulator direction "rnn:<label>" or None}, problems): a dim
    the simulator does not carry must be zero throughout the RNN's run: neither
    embedded nor written by any of its layers."""
    rspec, labels = sim.rnn.spec, set(sim.model.spec.labels)
    dims, bad = {}, []
    for d in range(rspec.width):
        lab = rnn_residual(rspec.labels[d])
        if lab in labels:
            dims[d] = lab
            continue
        kind, _, coef = rspec.embedding[d]
        written = any(np.any(L.C[d] != 0) or np.any(L.W2[d] != 0) or L.b2[d] != 0 for L in rspec.rnn_layers)
        if (kind != K.F_ZERO and coef != 0) or written:
            bad.append(f"the RNN's {rspec.labels[d]!r} is embedded or written but has no direction {lab!r}")
        dims[d] = None
    return dims, bad


def step_facts(sim, tag: str = "sim") -> list[dict]:
    """Each RNN layer l of the simulated RNN, against that RNN's own A, B, C, W1, b1,
    W2, b2 (not the builder's working copies): the one heads-free layer whose MLP
    writes the states h{l}:* computes, for every real value of every direction,
    h{l}:s += z_s = sum A[s, s'] prev_state(l, s') + sum B[s, d] x_d and
    x_d += sum C[d, s] z_s, and writes nothing else; the layer right after it (the
    RNN's own MLP comes after C h, as in the RNN's step) computes
    x_d += W2 relu(W1 x + b1) + b2 and writes nothing else."""
    spec = sim.model.spec
    labels = list(spec.labels)
    rspec = sim.rnn.spec
    dims, bad = rnn_dims(sim)
    if bad:
        return [unmet("step.dims", "RNN layers", "the RNN's residual in the simulator", "; ".join(bad))]
    x = {lab: z3.Real(f"{tag}.step.{lab}") for lab in labels}

    def xv(d):                                   # the RNN's x_d (0 where the simulator has no direction)
        return x[dims[d]] if dims[d] is not None else z3.RealVal(0)
    out, base = [], 0
    for l, R in enumerate(rspec.rnn_layers):
        S_l = R.A.shape[0]
        hl = [rnn_state(l, R.state_labels[s] if R.state_labels else s) for s in range(S_l)]
        layer = f"RNN layer {l}: state MLP"
        missing = [h for h in hl if h not in labels]
        if missing:
            out.append(unmet(f"step{l}.dims", layer, "the states' directions", f"no directions {missing}"))
            base += S_l
            continue
        rows = [labels.index(h) for h in hl]
        where = [i for i, L in enumerate(spec.attn_layers) if any(np.any(L.W2[r] != 0) or L.b2[r] != 0 for r in rows)]
        at = plan(sim)[PROMPT_HEAD][0] + 1 + 2 * l               # after the input layer, two layers per RNN layer
        if where != [at] or spec.attn_layers[at].heads:
            out.append(unmet(f"step{l}.layer", layer, f"layer {at} (no heads) alone writes the states",
                              f"layers writing them: {where}"))
            base += S_l
            continue
        L = spec.attn_layers[where[0]]
        prev = [prev_state(base + s) for s in range(S_l)]
        if any(p not in labels for p in prev):
            out.append(unmet(f"step{l}.prev", layer, "the previous states' directions", f"missing among {prev}"))
            base += S_l
            continue
        z = [sum((z3_value(R.A[s, s2]) * x[prev[s2]] for s2 in range(S_l) if R.A[s, s2] != 0), z3.RealVal(0))
             + sum((z3_value(R.B[s, d]) * xv(d) for d in range(rspec.width) if R.B[s, d] != 0), z3.RealVal(0))
             for s in range(S_l)]
        c_dims = [d for d in range(rspec.width) if np.any(R.C[d] != 0)]
        out += writes_only(L, labels, set(hl) | {dims[d] for d in c_dims}, f"step{l}.writes", layer)
        after = mlp_out(L, labels, x)
        for s in range(S_l):
            out.append(smt_fact(layer, f"step{l}.{hl[s]}", f"for every real value of every direction: the MLP adds "
                             f"z_{s} = (A h_(t-1) + B x)_{s} to {hl[s]} (A, B the RNN's own)", [],
                             after(hl[s]) - x[hl[s]] == z[s]))
        for d in c_dims:
            cz = sum((z3_value(R.C[d, s]) * z[s] for s in range(S_l) if R.C[d, s] != 0), z3.RealVal(0))
            out.append(smt_fact(layer, f"step{l}.{dims[d]}", f"for every real value of every direction: the MLP adds "
                             f"(C z)_{d} to {dims[d]} (C the RNN's own)", [], after(dims[d]) - x[dims[d]] == cz))
        out += _own_mlp_facts(sim, l, where[0] + 1, x, xv, dims)      # the RNN's own MLP, in the next layer
        base += S_l
    return out


def _own_mlp_facts(sim, l: int, nxt: int, x: dict, xv, dims: dict) -> list[dict]:
    """RNN layer ``l``'s own MLP, in attention layer ``nxt`` (heads-free, right
    after the state MLP), against the RNN's own W1, b1, W2, b2 (:func:`step_facts`)."""
    spec, rspec = sim.model.spec, sim.rnn.spec
    labels = list(spec.labels)
    R = rspec.rnn_layers[l]
    own_layer = f"RNN layer {l}: its own MLP"
    own_dims = [d for d in range(rspec.width) if np.any(R.W2[d] != 0) or R.b2[d] != 0]
    if not own_dims:
        return []
    if nxt >= len(spec.attn_layers) or spec.attn_layers[nxt].heads:
        return [unmet(f"own{l}.layer", own_layer, "a heads-free layer right after the state MLP",
                      f"layer {nxt} is missing or has heads")]
    L2 = spec.attn_layers[nxt]
    out = writes_only(L2, labels, {dims[d] for d in own_dims}, f"own{l}.writes", own_layer)
    after2 = mlp_out(L2, labels, x)
    hidden = []
    for m in range(R.W1.shape[0]):
        pre = sum((z3_value(R.W1[m, c]) * xv(c) for c in range(rspec.width) if R.W1[m, c] != 0), z3.RealVal(0)) \
            + z3_value(R.b1[m])
        hidden.append(z3.If(pre > 0, pre, z3.RealVal(0)))
    for d in own_dims:
        want = z3_value(R.b2[d]) + sum((z3_value(R.W2[d, m]) * hidden[m] for m in range(len(hidden))
                                        if R.W2[d, m] != 0), z3.RealVal(0))
        out.append(smt_fact(own_layer, f"own{l}.{dims[d]}", f"for every real value of every direction: the MLP "
                            f"adds (W2 relu(W1 x + b1) + b2)_{d} to {dims[d]} (the RNN's own weights)", [],
                            after2(dims[d]) - x[dims[d]] == want))
    return out


# ----------------------------------------------------------------------------
# the order of the layers and where every direction starts
def sequence_facts(sim) -> list[dict]:
    """What the per-layer facts leave open about the stack, read off the built
    model: the layers come in the plan's order (the token-type MLP, the position
    heads with the block roles, the prompt head with the input select, then per
    RNN layer in the RNN's order its state MLP and its own MLP, the argmax's
    three MLPs for an indicator readout, the next-code MLP last); only the planned
    layers write the RNN's directions (the input select and the RNN layers), the
    states (their state MLP), the argmax's logits, comparisons and winners (its
    first, second and third layer) and next_code (the last); and the embedding writes
    only one, tok, pos, pos_sq and the RNN's embedded features, so every direction
    a layer adds to starts at 0."""
    spec = sim.model.spec
    labels = list(spec.labels)
    rspec = sim.rnn.spec
    layer = "layer order"
    li = plan(sim)[PROMPT_HEAD][0]
    argmax = _nearest_weights(rspec) is None
    want = li + 1 + 2 * len(rspec.rnn_layers) + (3 if argmax else 0) + 1
    out = []
    if len(spec.attn_layers) != want:
        out.append(unmet("order.count", layer, f"{want} layers: 3, two per RNN layer"
                          f"{', three for the argmax' if argmax else ''}, the next code",
                          f"the model has {len(spec.attn_layers)}"))

    def writers(lab):
        d = labels.index(lab)
        return [i for i, L in enumerate(spec.attn_layers) if np.any(L.W2[d] != 0) or L.b2[d] != 0
                or any(np.any(h.WO[d] != 0) for h in L.heads)]
    planned = {}
    base = 0
    for l, R in enumerate(rspec.rnn_layers):
        state_layer = li + 1 + 2 * l
        for s in range(R.A.shape[0]):
            planned[rnn_state(l, R.state_labels[s] if R.state_labels else s)] = {state_layer}
        for d in range(rspec.width):
            lab = rnn_residual(rspec.labels[d])
            if lab in labels:
                planned.setdefault(lab, {li} if rspec.labels[d] in layout(sim)["emb"] else set())
                if np.any(R.C[d] != 0):
                    planned[lab].add(state_layer)
                if np.any(R.W2[d] != 0) or R.b2[d] != 0:
                    planned[lab].add(state_layer + 1)
        base += R.A.shape[0]
    planned[NEXT_CODE] = {len(spec.attn_layers) - 1}
    if argmax:                                    # the argmax's three layers, one kind of direction each
        first = li + 1 + 2 * len(rspec.rnn_layers)
        for lab in labels:
            for k, kind in enumerate(ARGMAX_KINDS):
                if lab.startswith(kind) and lab[len(kind):].isdigit():
                    planned[lab] = {first + k}
    for lab, where in planned.items():
        if lab not in labels:
            continue
        got = set(writers(lab))
        if got != where:
            out.append(unmet(f"order.{lab}", layer, f"only layers {sorted(where)} write {lab}",
                              f"layers {sorted(got)} write it"))
    embedded = {"one", "tok", "pos", "pos_sq"} | {rnn_embedded(lab) for lab in layout(sim)["emb"]}
    nonzero = {lab for lab, (k, _, c) in zip(labels, spec.embedding) if k != K.F_ZERO and c != 0}
    if nonzero != embedded:
        out.append(unmet("order.embedding", "embedding", "the embedding writes one, tok, pos, pos_sq and the "
                          "RNN's embedded features only; every other direction starts at 0",
                          f"it writes {sorted(nonzero - embedded)} too, misses {sorted(embedded - nonzero)}"))
    if not out:
        out.append({"fact": "order", "layer": layer, "method": "exact", "answer": "holds",
                    "statement": f"{want} layers in the plan's order; the RNN's directions, its states"
                                 f"{', the argmax directions' if argmax else ''} and "
                                 f"next_code written by the planned layers only; every other direction embedded 0"})
    return out


# ----------------------------------------------------------------------------
# layer 3's MLP: the RNN's input and the Y / filler decision
def input_facts(sim, tag: str = "sim") -> list[dict]:
    """The MLP of the prompt head's layer (:func:`plan`), read off the built
    weights: for in_prompt, after_last_state and prompt_done in {0, 1} and every
    value of the copied features within the declared embedding bound
    (constructions/models/bounds.py ``sim_emb_bound``), it adds prompt_token:<d> to the
    RNN's embedded direction x_d in the prompt and prev_token:<d> after it (the
    RNN's input: the prompt's token, else the RNN's own last token), writes
    emit_rnn_token = [after_last_state and prompt_done] and emit_filler =
    [after_last_state and not prompt_done], and nothing else."""
    spec = sim.model.spec
    labels = list(spec.labels)
    lay = layout(sim)
    layer = "attention layer 3, MLP: the RNN's input"
    li = plan(sim)[PROMPT_HEAD][0]
    if li >= len(spec.attn_layers) or not any(h.name == PROMPT_HEAD for h in spec.attn_layers[li].heads):
        return [unmet("input.layer", layer, "the prompt head's layer", f"no head '{PROMPT_HEAD}' in layer {li}")]
    L = spec.attn_layers[li]
    xs = {lab: rnn_residual(lab) for lab in lay["emb"]}
    if any(v not in labels for v in xs.values()):
        return [unmet("input.dims", layer, "the RNN's embedded directions", f"missing among {sorted(xs.values())}")]
    out = writes_only(L, labels, set(xs.values()) | {EMIT_RNN_TOKEN, EMIT_FILLER}, "input.writes", layer)
    bound = z3_value(sim_emb_bound(INT, sim.params(), sim.max_steps))
    flags = [IN_PROMPT, AFTER_LAST_STATE, PROMPT_DONE]
    ints = {lab: z3.Int(f"{tag}.input.{lab}") for lab in flags}
    x = {lab: z3.Real(f"{tag}.input.{lab}") for lab in labels}
    x.update({lab: z3.ToReal(v) for lab, v in ints.items()})
    x["one"] = z3.RealVal(1)
    hyps = [z3.Or(v == 0, v == 1) for v in ints.values()]
    for lab in lay["emb"]:
        for src_ in (prompt_token(lab), prev_token(lab)):
            hyps += [x[src_] <= bound, x[src_] >= -bound]
    after = mlp_out(L, labels, x)
    for lab, d in xs.items():
        want = z3.If(ints[IN_PROMPT] == 1, x[prompt_token(lab)], x[prev_token(lab)])
        out.append(smt_fact(layer, f"input.{d}", f"for in_prompt in {{0, 1}} and copied features within the declared "
                         f"bound: the MLP adds ({IN_PROMPT} ? prompt_token : prev_token):{lab} to {d}", hyps,
                         after(d) - x[d] == want))
    for lab, (fn, text) in emit_plan().items():
        out.append(smt_fact(layer, f"input.{lab}", f"for 0/1 flags: the MLP writes {lab} = {text}", hyps,
                         after(lab) - x[lab] == fn(ints)))
    return out


def emit_plan() -> dict:
    """What the input MLP writes besides the RNN's input, from the 0/1 values
    after_last_state and prompt_done: label -> (z3 function of them, text)."""
    b = lambda c: z3.If(c, z3.RealVal(1), z3.RealVal(0))     # noqa: E731
    return {EMIT_RNN_TOKEN: (lambda v: b(z3.And(v[AFTER_LAST_STATE] == 1, v[PROMPT_DONE] == 1)),
                               f"[{AFTER_LAST_STATE} and {PROMPT_DONE}]"),
            EMIT_FILLER: (lambda v: b(z3.And(v[AFTER_LAST_STATE] == 1, v[PROMPT_DONE] == 0)),
                            f"[{AFTER_LAST_STATE} and not {PROMPT_DONE}]")}


# ----------------------------------------------------------------------------
# the last layer: the next token's code, by case
def _nearest_weights(rspec) -> dict | None:
    """{RNN dim: w} of the RNN's readout when it is the nearest-code readout
    2 tau v - tau^2 (+ a constant), v = sum_d w_d x_d; None for another readout
    (the indicator readout, simulated by an argmax: not covered here)."""
    w, sq = {}, []
    for dim, kind, _, coef in rspec.readout:
        if kind == K.F_TOK:
            w[dim] = w.get(dim, Fraction(0)) + Fraction(coef) / 2
        elif kind == K.F_TOK_SQ:
            sq.append((dim, Fraction(coef)))
        elif kind != K.F_ONE:
            return None
    if len(sq) != 1 or sq[0][1] != -1:
        return None
    one = sq[0][0]                      # the tau^2 term on a constant 1: embedded 1, written by no layer
    kind, _, c = rspec.embedding[one]
    if kind != K.F_ONE or c != 1 or any(np.any(L.C[one] != 0) or np.any(L.W2[one] != 0) or L.b2[one] != 0
                                        for L in rspec.rnn_layers):
        return None
    return {d: v for d, v in w.items() if v != 0}


def indicator_plan(sim) -> tuple[list[int], list[list[tuple[int, Fraction]]]]:
    """The simulated RNN's indicator readout as the plan of the argmax, from the
    RNN's own readout and the tokens its readout's argmax runs over (the built
    RNN's ``candidates``; not the builder's lists): the contenders, in ascending
    token id (every such token with an indicator term (d, [tok = p], c), plus the
    smallest-id token without one, whose logit is 0 like every other such token's), and each contender's terms [(d, c)], its
    logit sum_d c x_d. The RNN's readout emits the first contender (smallest id)
    with the largest logit; constant terms add the same to every logit."""
    rspec = sim.rnn.spec
    domain = sorted(int(t) for t in sim.rnn.candidates)        # the RNN readout's argmax runs over these
    terms: dict[int, list[tuple[int, Fraction]]] = {}
    for dim, kind, param, coef in rspec.readout:
        if kind == K.F_IS_TOKEN and int(param) in domain and Fraction(coef) != 0:
            terms.setdefault(int(param), []).append((dim, Fraction(coef)))
    rest = next((t for t in domain if t not in terms), None)
    cont = sorted(set(terms) | ({rest} if rest is not None else set()))
    return cont, [terms.get(t, []) for t in cont]


def argmax_facts(sim, tag: str = "sim") -> list[dict]:
    """The three heads-free layers between the RNN's last layer and the next-code
    layer of a simulator whose RNN has an indicator readout (none otherwise), read
    off the built weights against :func:`indicator_plan`:

    * the logits layer writes logit_j = sum_d c x_d over contender j's terms (the
      RNN's directions x_d any reals), and nothing else;
    * the comparison layer, for logits that are multiples of 2^-f (f the RNN's
      fraction bits), writes beats_j = the number of other
      contenders i with logit_j > logit_i (i of smaller id) or logit_j >= logit_i
      (larger id), and nothing else;
    * the winner layer, for integer beats_j in 0..C - 1 and any logits (it may
      read them: they are in the residual), writes winner_j = [beats_j = C - 1],
      and nothing else;
    * the comparisons and the winner in a row (``argmax.one-hot``, each layer
      handed the residual the one before left): for logits on the grid 2^-f,
      winner is one-hot, on the first contender with the largest logit.

    What links the logits layer to that query is an argument, not a query: the
    indicator coefficients must be integers (else ``argmax.coefficients``
    fails) and the RNN's directions are on its grid 2^-f (every fixed-point
    value is; the simulator keeps the RNN's fraction bits), so by
    ``argmax.logit<j>`` the logits are on the grid, the RNN's rounding of each
    product c x_d is exact, and the RNN's logit is the exact sum: the winner is
    the token the RNN's readout emits. A readout with terms other than
    indicator and constant ones fails the plan (``argmax.readout``)."""
    early, ctx = _argmax_plan(sim)
    if ctx is None:
        return early
    labels, rspec, cont, terms, C = (ctx[k] for k in ("labels", "rspec", "cont", "terms", "C"))
    layers, want, dims, Ls = ctx["layers"], ctx["want"], ctx["dims"], ctx["Ls"]
    out = []
    for L, kind, layer in zip(Ls, ARGMAX_KINDS, layers):
        out += writes_only(L, labels, set(want[kind]), f"argmax.{kind}.writes", layer)
    sc = 1 << sim.rnn.fmt.frac_bits
    b = lambda c: z3.If(c, z3.IntVal(1), z3.IntVal(0))     # noqa: E731
    # the logits: every direction a free real (0 before the layer: sequence_facts)
    x = {lab: z3.Real(f"{tag}.argmax.{lab}") for lab in labels}
    x["one"] = z3.RealVal(1)
    for lab in labels:
        if lab.startswith(ARGMAX_KINDS):
            x[lab] = z3.RealVal(0)
    logit = [sum((z3_value(c) * x[dims[d]] for d, c in tl if dims[d] is not None),
                 z3.RealVal(0)) for tl in terms]
    after1 = mlp_out(Ls[0], labels, x)
    for j in range(C):
        out.append(smt_fact(layers[0], f"argmax.logit{j}", f"for every real value of the RNN's directions: the MLP "
                         f"writes logit{j} = {_show_terms(rspec, terms[j])} (token {cont[j]}'s indicator terms)",
                         [], after1(want[LOGIT][j]) == logit[j]))
    # the comparisons: logits multiples of 2^-f
    u = [z3.Int(f"{tag}.argmax.u{j}") for j in range(C)]
    y = dict(x)
    y.update({argmax_direction(LOGIT, j): z3.ToReal(u[j]) / sc for j in range(C)})
    after2 = mlp_out(Ls[1], labels, y)

    def beats(uu, j):
        return sum((b(uu[j] > uu[i]) if i < j else b(uu[j] >= uu[i]) for i in range(C) if i != j), z3.IntVal(0))
    for j in range(C):
        out.append(smt_fact(layers[1], f"argmax.beats{j}", f"for logits that are multiples of 2^-{sim.rnn.fmt.frac_bits}: "
                         f"the MLP writes beats{j} = #{{i < {j}: logit{j} > logit_i}} + #{{i > {j}: logit{j} >= "
                         f"logit_i}}", [], after2(argmax_direction(BEATS, j)) == z3.ToReal(beats(u, j))))
    # the winner: beats in 0..C - 1, the logits any reals (in the residual: the layer may read them)
    v = [z3.Int(f"{tag}.argmax.v{j}") for j in range(C)]
    w = dict(x)
    w.update({argmax_direction(LOGIT, j): z3.Real(f"{tag}.argmax.logit{j}") for j in range(C)})
    w.update({argmax_direction(BEATS, j): z3.ToReal(v[j]) for j in range(C)})
    after3 = mlp_out(Ls[2], labels, w)
    rng = [z3.And(vj >= 0, vj <= C - 1) for vj in v]
    for j in range(C):
        out.append(smt_fact(layers[2], f"argmax.winner{j}", f"for integer beats in 0..{C - 1}: the MLP writes "
                         f"winner{j} = [beats{j} = {C - 1}]", rng,
                         after3(argmax_direction(WINNER, j)) == z3.ToReal(b(v[j] == C - 1))))
    out.append(_argmax_in_a_row(sim, ctx, y, u))
    return out


def _argmax_plan(sim):
    """(failed steps, None) where the simulator's argmax layers do not fit
    :func:`argmax_facts`' plan, else ([], what the facts read: the contenders,
    their indicator terms, the three layers and their directions); ([], None)
    for an RNN without an indicator readout."""
    spec = sim.model.spec
    labels = list(spec.labels)
    rspec = sim.rnn.spec
    if _nearest_weights(rspec) is not None or not any(k == K.F_IS_TOKEN for _, k, _, _ in rspec.readout):
        return [], None
    other = sorted({K.FEATURE_NAMES.get(k, k) for _, k, _, _ in rspec.readout if k not in (K.F_IS_TOKEN, K.F_ONE)})
    if other:
        return [unmet("argmax.readout", "the RNN's readout", "indicator and constant terms only (the argmax's "
                       "plan)", f"terms of kind {other}")], None
    cont, terms = indicator_plan(sim)
    C = len(cont)
    frac = sorted({str(c) for tl in terms for _, c in tl if c.denominator != 1})
    if frac:
        return [unmet("argmax.coefficients", "the RNN's readout", "integer indicator coefficients (so the RNN's "
                       "rounded products are the exact ones the argmax's MLPs compute)", f"coefficients {frac}")], None
    first = plan(sim)[PROMPT_HEAD][0] + 1 + 2 * len(rspec.rnn_layers)
    names = ("the logits", "the comparisons", "the winner")
    layers = [f"argmax layer {k + 1} (attention layer {first + k + 1}), MLP: {names[k]}" for k in range(3)]
    if len(spec.attn_layers) < first + 3 or any(spec.attn_layers[first + k].heads for k in range(3)):
        return [unmet("argmax.layers", layers[0], "three heads-free layers after the RNN's last layer",
                       f"layers {first}..{first + 2} of {len(spec.attn_layers)}")], None
    want = {kind: [argmax_direction(kind, j) for j in range(C)] for kind in ARGMAX_KINDS}
    if any(lab not in labels for v in want.values() for lab in v):
        return [unmet("argmax.dims", layers[0], f"logit, beats and winner directions for {C} contenders",
                       f"the model has {sorted(lab for lab in labels if lab.startswith(ARGMAX_KINDS))}")], None
    dims, bad = rnn_dims(sim)
    if bad:
        return [unmet("argmax.dims", layers[0], "the RNN's residual in the simulator", "; ".join(bad))], None
    Ls = [spec.attn_layers[first + k] for k in range(3)]
    return [], dict(spec=spec, labels=labels, rspec=rspec, cont=cont, terms=terms, C=C, layers=layers,
                    want=want, dims=dims, Ls=Ls)


def _argmax_in_a_row(sim, ctx: dict, y: dict, u: list) -> dict:
    """The fact ``argmax.one-hot`` of :func:`argmax_facts`: the comparisons and the
    winner layer in a row, for logits on the grid 2^-f (``u``: their integer
    numerators; ``y``: the residual the comparisons read)."""
    labels, Ls, C = ctx["labels"], ctx["Ls"], ctx["C"]
    # the comparisons and the winner in a row, each handed the residual the layer
    # before left: the logits (what the logits layer writes, argmax.logit<j>: from
    # the RNN's values on its grid 2^-f and integer coefficients, multiples of 2^-f)
    # stay in the residual, the winner layer reads the beats the comparisons wrote
    z = dict(y)
    a2 = mlp_out(Ls[1], labels, z)
    zz = dict(z)
    zz.update({argmax_direction(BEATS, j): a2(argmax_direction(BEATS, j)) for j in range(C)})
    a3 = mlp_out(Ls[2], labels, zz)

    def is_first_max(j):
        return z3.And(*([u[j] > u[i] for i in range(j)] + [u[j] >= u[i] for i in range(j + 1, C)]))
    concl = z3.And(*[a3(argmax_direction(WINNER, j)) == z3.If(is_first_max(j), z3.RealVal(1), z3.RealVal(0))
                     for j in range(C)])
    return smt_fact("argmax layers 1-3 (the composition)", "argmax.one-hot",
                     f"for every {C} logits on the grid 2^-{sim.rnn.fmt.frac_bits} (what the logits layer writes, "
                     f"argmax.logit<j>, from the RNN's values on that grid with integer indicator coefficients), "
                     f"each layer handed the residual the one before left: the comparisons and the winner in a row "
                     f"write winner_j = 1 for the first contender (smallest id) with the largest logit, 0 for every "
                     f"other: the token the RNN's readout emits",
                     [], concl)


def _show_terms(rspec, tl) -> str:
    return " + ".join(f"{c} x[{rspec.labels[d]}]" for d, c in tl) or "0"


def next_code_facts(sim, tag: str = "sim") -> list[dict]:
    """The one heads-free layer whose MLP writes ``next_code`` (the readout reads it),
    read off the built weights, for every value of its inputs in each case of the
    block (seen_counter and the one-hot emit flags, as the block-role and input
    MLPs write them), with the codes from :func:`layout` and the RNN's own readout:
    in the prompt (seen_counter = 0) K(0); emit_state<i>: the code of the number
    S_i whose value is the state h_i (2^f h_i an integer in (-OFF, OFF), decode's
    range); emit_rnn_token: clamp(v, TAU_MIN, the RNN's largest number + 1), v the
    RNN's readout value sum_d w_d x_d (nearest-code readouts only; every x_d below
    2^I_R, the RNN's format, in magnitude); the filler's code; emit_next_counter:
    the code of K(step + 1), for 0 <= step < the last counter. It writes nothing
    else. With an indicator readout (simulated by an argmax, :func:`argmax_facts`)
    the winner directions are one-hot (what ``argmax.one-hot`` proves the argmax
    writes) and the Y case is the winner's token code, which lies in the readout's
    range.
    These are hypotheses on the MLP's inputs: the chain (checks/certify/simulator_chain.py)
    discharges the flags and the step's range; the states' range is the
    simulator's promise (|s| < 2^I_s), stated at every position, also at the last
    prompt token, where the state directions hold the zero-state step computed
    there, and the residual below 2^I_R is the RNN's format: both checked by
    running."""
    spec = sim.model.spec
    labels = list(spec.labels)
    lay = layout(sim)
    layer = "last layer, MLP: the next code"
    where = [i for i, L in enumerate(spec.attn_layers) if NEXT_CODE in labels
             and (np.any(L.W2[labels.index(NEXT_CODE)] != 0) or L.b2[labels.index(NEXT_CODE)] != 0)]
    if len(where) != 1 or spec.attn_layers[where[0]].heads or where[0] != len(spec.attn_layers) - 1:
        return [unmet("next.layer", layer, "the last layer, without heads, alone writes next_code",
                       f"layers writing it: {where} of {len(spec.attn_layers)}")]
    L = spec.attn_layers[where[0]]
    out = writes_only(L, labels, {NEXT_CODE}, "next.writes", layer)
    rspec = sim.rnn.spec
    dims, bad = rnn_dims(sim)
    if bad:
        return out + [unmet("next.dims", layer, "the RNN's residual in the simulator", "; ".join(bad))]
    S, f, IR = lay["S"], lay["f"], sim.rnn.fmt.int_bits
    hs = [rnn_state(l, R.state_labels[s] if R.state_labels else s) for l, R in enumerate(rspec.rnn_layers)
          for s in range(R.A.shape[0])]
    emits = [emit_state(i) for i in range(S)] + [EMIT_RNN_TOKEN, EMIT_FILLER, EMIT_NEXT_COUNTER]
    ints = {lab: z3.Int(f"{tag}.next.{lab}") for lab in emits + [SEEN_COUNTER, STEP]}
    u = [z3.Int(f"{tag}.next.u{i}") for i in range(S)]            # 2^f h_i
    x = {lab: z3.Real(f"{tag}.next.{lab}") for lab in labels}
    x.update({lab: z3.ToReal(v) for lab, v in ints.items()})
    x.update({h: z3.ToReal(u[i]) / (1 << f) for i, h in enumerate(hs)})
    x["one"] = z3.RealVal(1)
    winners = [lab for lab in labels if lab.startswith(WINNER)]     # an argmax readout's one-hot winner
    win = {lab: z3.Int(f"{tag}.next.{lab}") for lab in winners}
    x.update({lab: z3.ToReal(v) for lab, v in win.items()})
    off, lim = sim.OFF, z3.RealVal(1 << IR)
    hyps = [z3.Or(ints[e] == 0, ints[e] == 1) for e in emits + [SEEN_COUNTER]]
    hyps += [ui > -off for ui in u] + [ui < off for ui in u]
    hyps += [ints[STEP] >= 0, ints[STEP] <= lay["top"] - lay["K"] - 1]
    hyps += [z3.And(x[d] < lim, x[d] > -lim) for d in dims.values() if d is not None]
    if win:
        hyps += [z3.Or(v == 0, v == 1) for v in win.values()] + [sum(win.values(), z3.IntVal(0)) == 1]
    after = mlp_out(L, labels, x)
    got = after(NEXT_CODE) - x[NEXT_CODE]

    def case(flag):
        on = [ints[SEEN_COUNTER] == (0 if flag is None else 1)]
        return on + [ints[e] == (1 if e == flag else 0) for e in emits]
    cases = [(None, "K(0)", "the prompt (seen_counter = 0)", z3.RealVal(lay["K"]))]
    cases += [(emit_state(i), f"S{i}", emit_state(i), z3_value(lay["S_c"][i]) + z3.ToReal(u[i])) for i in range(S)]
    y_cases, failed = _y_cases(sim, lay, layer, x, dims, win)
    cases += y_cases
    out += failed
    cases += [(EMIT_FILLER, "filler", EMIT_FILLER, z3.RealVal(lay["filler"])),
              (EMIT_NEXT_COUNTER, "K(t+1)", EMIT_NEXT_COUNTER, z3.ToReal(ints[STEP]) + lay["K"] + 1)]
    for flag, name, when, want in cases:
        stmt = (f"{when}: the MLP writes next_code = the code of {name}, for every value of its inputs "
                f"(read off the built W1, b1, W2, b2)")
        out.append(smt_fact(layer, f"next.{name}", stmt, hyps + case(flag), got == want))
    return out


def _y_cases(sim, lay: dict, layer: str, x: dict, dims: dict, win: dict) -> tuple[list, list]:
    """(the emit_rnn_token case of :func:`next_code_facts`, failed steps): with a
    nearest-code readout, clamp(v, TAU_MIN, the RNN's largest number + 1); with an
    indicator readout, the code of the one-hot winner; else a failed step."""
    rspec = sim.rnn.spec
    w = _nearest_weights(rspec)
    cases, failed = [], []
    if w is None and not any(k == K.F_IS_TOKEN for _, k, _, _ in rspec.readout):
        failed.append(unmet("next.Y", layer, "the RNN's token: its readout's value",
                             "the RNN's readout is neither 2 tau v - tau^2 on a constant 1 nor an indicator readout"))
    if w is not None:
        v = sum((z3_value(c) * x[dims[d]] for d, c in w.items() if dims[d] is not None), z3.RealVal(0))
        hi = sim.rnn.vocab.max_number + 1
        clamp = z3.If(v < TAU_MIN, z3.RealVal(TAU_MIN), z3.If(v > hi, z3.RealVal(hi), v))
        cases.append((EMIT_RNN_TOKEN, "Y", f"{EMIT_RNN_TOKEN}: clamp(v, {TAU_MIN}, {hi})", clamp))
    elif win:
        cont, _ = indicator_plan(sim)
        if len(cont) != len(win):
            failed.append(unmet("next.Y", layer, f"one winner direction per contender ({len(cont)})",
                                 f"the model has {len(win)}"))
        else:
            yv = sum((token_code(t) * win.get(argmax_direction(WINNER, j), z3.IntVal(0)) for j, t in enumerate(cont)),
                     z3.IntVal(0))
            cases.append((EMIT_RNN_TOKEN, "Y", f"{EMIT_RNN_TOKEN}: the code of the winner (the contender j with "
                          "winner_j = 1: the RNN's argmax)", z3.ToReal(yv)))
            off = [t for t in cont if not lay["tau_min"] <= token_code(t) <= lay["top"]]
            if off:
                failed.append(unmet("next.Y.range", layer, f"every contender's code in the readout's range "
                                     f"{lay['tau_min']}..{lay['top']}", f"tokens {off} lie outside"))
    return cases, failed


def readout_facts(sim, tag: str = "sim") -> list[dict]:
    """The built readout, read term by term: with next_code an integer code n of
    the layout's range (TAU_MIN..top, every code of which is a token:
    ``type.tiling``) and ``one`` = 1 (embedded, written by no layer:
    ``embedding.single_writer``), the token of code n has a logit above every
    other code's in the range, so the argmax emits exactly the code the last MLP
    wrote."""
    lay = layout(sim)
    return nearest_readout_facts(sim.model.spec, lay["tau_min"], lay["top"], tag)


NAME = "rnnsim-transformer[layers]"
NOTE = ("each simulator the registry builds, read off its built weights (checks/certify/simulator.py): the "
        "layer-1 MLP writes the token-type flags and the state / counter values on every code range; each "
        "head's score (W_Q, W_K, embedding): the position heads attend the plan's key clamp(Q - 1, 0, n) "
        "for every n >= 1, firstK the first flagged key at every position up to the simulator's n_pos, "
        "each by sharpness(f); the layer-2 MLP writes the block roles for every step, prompt length, "
        "seen_counter and one-hot flags; the layer-3 MLP selects the RNN's input and decides Y or the filler; "
        "each RNN layer's state MLP and own MLP compute that layer's step "
        "with the simulated RNN's own weights, for every value of every direction; the last MLP writes the "
        "next token's code in each case of the block, and the readout emits the token of an integer code. "
        "With an indicator readout (integer coefficients), its argmax's three MLPs write the logits, the "
        "pairwise comparisons and the one-hot winner, each on its own, and the last two in a row on the logits "
        "the first writes: the first contender with the largest logit, the token the RNN emits; the last MLP "
        "writes that token's code. "
        "The composition (checks/certify/simulator_chain.py): by induction over the CoT, for every prompt length and "
        "step the simulator is built for, at each kind of position the lemmas above hand each layer what it is "
        "proved for (step t, prompt length L, the previous block's states, the RNN's input u_t) and the roles "
        "select the case of the layout's next token; every product the machine rounds is exact (an integer factor) "
        "or, in the layers that simulate the RNN's step, the RNN's own product (exact.products). Not covered: the "
        "promise |s| < 2^I_s (also for the zero-state step at the last prompt token) and the RNN's values in its "
        "format (hypotheses, checked by running), the kernels' "
        "arithmetic (tested, not proved) and the scores' ranges (the declared obligations)")


