"""The simulator's composition: its proved layers, chained over the chain of thought it writes.

checks/certify/simulator.py proves each layer of a built simulator on its own, on free
inputs, under stated hypotheses. :func:`chain_facts` proves the composition, for
every prompt length 1 <= L <= max_prompt and every step t: by induction on the
position, if the tokens so far are the reference CoT's (the layout of
constructions/models/simulate.py, written here as the specification), the token the
model emits next is the reference's. Each step chains the per-layer lemmas on the
domains they are proved on. :func:`exact_facts` shows the machine's rounding
changes nothing: every rounded product has an integer factor, except the RNN's
own products, rounded alike. The RNN's promise and the kernels' arithmetic are
not proved (docs/certify.md).

Details (the induction, the chain's facts, what is not discharged):
docs/internals/certify.md#simulator_chain
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import token_code
from rnngap.constructions.models.bounds import INT, sim_emb_bound
from rnngap.constructions.models.simulate import (
    EMIT_FILLER, EMIT_NEXT_COUNTER, EMIT_RNN_TOKEN, IN_PROMPT, IS_COUNTER, IS_FILLER, IS_RNN_TOKEN,
    PREV_TOKEN_HEAD, PROMPT_HEAD, PROMPT_LENGTH, SEEN_COUNTER, STEP, emit_state, is_state, prev_state, prev_token,
    prompt_token, rnn_embedded, rnn_state,
)

from .layer_facts import conjoined_fact, embedded_value, smt_fact, unmet, z3_value
from .simulator import Val, clamp_key, emit_plan, layout, plan, rnn_dims, role_plan, type_plan
from .sizes import z3

def _real(v):
    if isinstance(v, (int, Fraction)):
        return z3_value(v)
    return z3.ToReal(v) if v.is_int() else v


class _Reference:
    """The reference CoT of one simulator, symbolic in the prompt length L: the
    code at a position term j and the values layer 1 and the embedding write
    there (from the type lemma's plan and the built embedding)."""

    def __init__(self, sim, tag: str):
        self.lay = layout(sim)
        self.spec, self.labels = sim.model.spec, list(sim.model.spec.labels)
        lay = self.lay
        self.S, self.B = lay["S"], lay["B"]
        I = z3.IntSort()
        self.L = z3.Int(f"{tag}.chain.L")
        self.u = z3.Function(f"{tag}.chain.prompt", I, I)         # the prompt's code at position j
        self.y = z3.Function(f"{tag}.chain.y", I, I)              # the code of the RNN's token y_b
        self.U = [z3.Function(f"{tag}.chain.U{i}", I, I) for i in range(self.S)]   # 2^f s_b^i
        self.rows = {name: (lo, hi, want) for name, _, lo, hi, want in type_plan(sim)}
        """type-lemma row -> (lowest code, highest code, what layer 1 writes there)"""

    def kinds(self, j):
        """[(type-lemma row, condition on j, code at j)] over the layout's kinds of position."""
        L, B, S, lay = self.L, self.B, self.S, self.lay
        b, o = (j - L) / B, (j - L) % B
        out = [("rnn_tokens", j < L, self.u(j)), ("counter", z3.And(j >= L, o == 0), lay["K"] + b)]
        out += [(f"state{i}", z3.And(j >= L, o == i + 1), lay["S_c"][i] + self.U[i](b)) for i in range(S)]
        out += [("filler", z3.And(j >= L, o == S + 1, b < L - 1), z3.IntVal(lay["filler"])),
                ("rnn_tokens", z3.And(j >= L, o == S + 1, b >= L - 1), self.y(b))]
        return out

    def code(self, j):
        out = z3.IntVal(0)
        for _, cond, c in reversed(self.kinds(j)):
            out = z3.If(cond, c, out)
        return out

    def value_of(self, row: str, code, j, lab: str):
        """x[lab] at a position of kind ``row`` and code ``code``: layer 1's value
        there (the type lemma) or, for a direction layer 1 does not write, the
        built embedding's."""
        want = self.rows[row][2]
        if lab in want:
            v = want[lab]
            return _real(v.fn(code) if isinstance(v, Val) else v)
        if lab not in self.labels:
            raise ValueError(f"no direction {lab!r}")
        return embedded_value(self.spec, self.labels.index(lab), code, j)

    def copy(self, combo: dict, j):
        """sum_lab c x[lab] at position j (one case split over the kinds)."""
        cases = []
        for row, cond, code in self.kinds(j):
            here = z3.simplify(sum((z3_value(c) * self.value_of(row, code, j, lab) for lab, c in combo.items()),
                                   z3.RealVal(0)))
            cases.append((cond, here))
        if all(h.eq(cases[0][1]) for _, h in cases):       # the kinds cover every position: one term
            return cases[0][1]
        out = z3.RealVal(0)
        for cond, here in reversed(cases):
            if not (z3.is_rational_value(here) and here.as_fraction() == 0):
                out = z3.If(cond, here, out)
        return out


def chain_facts(sim, tag: str = "sim") -> list[dict]:
    """The composition of the simulator's proved layers over the reference CoT
    (the module's docstring); every fact names what it fails on."""
    ref = _Reference(sim, tag)
    lay, S, L = ref.lay, ref.S, ref.L
    layer = "composition"
    heads = plan(sim)
    P = (sim.model.max_positions or sim.n_pos + 1) - 1
    mp, mc = sim.max_prompt, sim.max_rnn_cot
    out = []
    rows = ref.rows
    flags = [IS_RNN_TOKEN, IS_FILLER] + [is_state(i) for i in range(S)] + [IS_COUNTER]
    # --- the type lemma's flags: 0/1 and one-hot on every row (the role and firstK lemmas' hypotheses)
    bad = [f"{name}: {({f_: want.get(f_) for f_ in flags})}" for name, (_, _, want) in rows.items()
           if any(isinstance(want.get(f_), Val) or want.get(f_) not in (0, 1) for f_ in flags)
           or sum(want[f_] for f_ in flags) != 1]
    out.append(_exact(layer, "chain.flags", "on every code range of the type lemma the token-type flags ("
                      + ", ".join(flags) + ") are 0 or 1 and exactly one is 1", bad))
    # --- each kind of token in its type lemma's range (the ranges the type lemma is proved on)
    v = z3.Int(f"{tag}.chain.v")
    off = sim.OFF
    codes = [("counter", "K(t) for every step 0 <= t <= max_steps", [v >= 0, v <= sim.max_steps], lay["K"] + v)]
    codes += [(f"state{i}", f"S{i}(s) for every state number with |2^f s| < 2^(I_s + f)",
               [v > -off, v < off], lay["S_c"][i] + v) for i in range(S)]
    codes += [("filler", "the filler", [v == 0], z3.IntVal(lay["filler"]) + v)]
    for row, what, hyps, code in codes:
        if row not in rows:
            out.append(unmet(f"chain.codes.{row}", layer, f"a type lemma type.{row}", "the type plan has none"))
            continue
        lo, hi, _ = rows[row]
        out.append(smt_fact(layer, f"chain.codes.{row}", f"the code of {what} lies in {lo}..{hi}, the range the type "
                         f"lemma type.{row} is proved on", hyps, z3.And(code >= lo, code <= hi)))
    rnn_codes = sorted(token_code(i) for i in range(sim.rnn.vocab.size) if sim.rnn.vocab.contains(i))
    lo, hi, _ = rows["rnn_tokens"]
    out.append(_exact(layer, "chain.codes.rnn_tokens", f"every token of the RNN's vocabulary (codes {rnn_codes[0]}.."
                      f"{rnn_codes[-1]}) lies in {lo}..{hi}, the range the type lemma type.rnn_tokens is proved on",
                      [] if lo <= rnn_codes[0] and rnn_codes[-1] <= hi else [f"codes {rnn_codes[0]}..{rnn_codes[-1]}"]))
    out += _feature_facts(sim, ref, heads, tag)
    out.append(_writers_fact(sim, heads))
    # --- firstK: no counter before L, K(0) at L (after L the flags are 0/1: chain.flags)
    j = z3.Int(f"{tag}.chain.j")
    base = [L >= 1, L <= mp]
    try:
        out.append(smt_fact(layer, "chain.firstK", "for every prompt length 1 <= L <= max_prompt: is_counter = 0 at "
                         "every position j < L and = 1 at L (so firstK's lemma, with is_counter 0/1 everywhere, "
                         "makes it attend L from position L on, and position 0 before)", base + [j >= 0, j < L],
                         z3.And(ref.copy({IS_COUNTER: 1}, j) == 0, ref.copy({IS_COUNTER: 1}, L) == 1)))
        emb = {lab: ref.spec.embedding[ref.labels.index(lab)] for lab in ("pos", "one") if lab in ref.labels}
        texts = [(n, lo_, hi_, sorted((k, v_.text if isinstance(v_, Val) else v_) for k, v_ in w.items()))
                 for n, (lo_, hi_, w) in rows.items()]
        key = (tag, repr(sorted(lay.items())), repr(heads), P, mp, mc, repr(emb), repr(texts),
               repr([t_ for _, t_ in role_plan(sim).values()]), repr([t_ for _, t_ in emit_plan().values()]))
        if key not in _POSITIONS:
            _POSITIONS[key] = _positions(sim, ref, heads, P, mp, mc, tag)
        out += [dict(d) for d in _POSITIONS[key]]
    except (ValueError, KeyError) as e:
        out.append(unmet("chain.read", layer, "the plan's directions", f"{type(e).__name__}: {e}"))
    return out


def _exact(layer: str, fact: str, statement: str, bad: list) -> dict:
    return {"fact": fact, "layer": layer, "method": "exact", "statement": statement,
            "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(map(str, bad[:4]))} if bad else {})}


def embedding_mismatch(sim) -> list[str]:
    """The RNN's embedded features the simulator does not embed as the RNN does
    (its direction rnn_embed:<label>: the same feature kind, parameter and
    coefficient), or does not carry."""
    spec, rspec = sim.model.spec, sim.rnn.spec
    labels = list(spec.labels)
    bad = []
    for d, lab in enumerate(rspec.labels):
        theirs = rspec.embedding[d]
        if theirs[0] == K.F_ZERO or theirs[2] == 0:
            continue
        if rnn_embedded(lab) not in labels:
            bad.append(f"the RNN embeds {lab!r}, the simulator has no {rnn_embedded(lab)}")
            continue
        mine = spec.embedding[labels.index(rnn_embedded(lab))]
        if (mine[0], Fraction(mine[1]), Fraction(mine[2])) != (theirs[0], Fraction(theirs[1]), Fraction(theirs[2])):
            bad.append(f"{rnn_embedded(lab)} is embedded as {tuple(mine)}, the RNN embeds {tuple(theirs)}")
    return bad


def _feature_facts(sim, ref, heads: dict, tag: str) -> list[dict]:
    """The prompt and prev_token heads copy the RNN's embedded features of the key's
    token, one to one (prompt_token:<d> <- rnn_embed:<d>, prev_token:<d> <- the
    same), the simulator embeds each as the RNN does, and each lies within the
    bound the input lemma assumes for every code of the layout: what the input
    MLP adds to the RNN's x_d is then the RNN's own embedding of the token the
    key holds (the chain follows these copies as the token)."""
    layer = "composition"
    lay = ref.lay
    bad = []
    for h, copy_of in ((PROMPT_HEAD, prompt_token), (PREV_TOKEN_HEAD, prev_token)):
        want = {copy_of(lab): {rnn_embedded(lab): 1} for lab in lay["emb"]}
        got = {tgt: {k: Fraction(c) for k, c in combo.items()} for tgt, combo in heads[h][2].items()}
        if got != want:
            bad.append(f"{h} copies {got}, not the RNN's features one to one {want}")
    bad += embedding_mismatch(sim)
    out = [_exact(layer, "chain.features.copies", f"the {PROMPT_HEAD} and {PREV_TOKEN_HEAD} heads copy the RNN's "
                  "embedded features of the key's token one to one, and the simulator embeds each as the RNN does",
                  bad)]
    bound = z3_value(sim_emb_bound(INT, sim.params(), sim.max_steps))
    tau, pos = z3.Ints(f"{tag}.chain.tau {tag}.chain.pos")
    try:
        feats = [embedded_value(ref.spec, ref.labels.index(rnn_embedded(lab)), tau, pos) for lab in lay["emb"]
                 if rnn_embedded(lab) in ref.labels]
        goal = z3.And(*[z3.And(x <= bound, x >= -bound) for x in feats]) if feats else z3.BoolVal(True)
        out.append(smt_fact(layer, "chain.features.bound", f"each RNN feature the heads copy lies within the declared "
                         f"bound {bound} (the input lemma's hypothesis) for every code in {lay['tau_min']}.."
                         f"{lay['top']}", [tau >= lay["tau_min"], tau <= lay["top"], pos >= 0], goal))
    except ValueError as e:
        out.append(unmet("chain.features.bound", layer, "the copied directions are embedded token features", str(e)))
    return out


def _writers_fact(sim, heads: dict) -> dict:
    """Every direction a head of the plan copies into is written by the plan's
    heads alone (their writes are pinned by the copy facts): no other head's W_O
    and no MLP writes it, and the embedding writes 0 there; the prompt and prev_token
    heads' targets by that head alone. So the value the later layers read there
    is the sum of the plan's copies."""
    spec = sim.model.spec
    labels = list(spec.labels)
    targets: dict = {}
    for h, (_, _, copy_) in heads.items():
        for tgt in copy_:
            targets.setdefault(tgt, []).append(h)
    bad = []
    for tgt, hs in sorted(targets.items()):
        if tgt not in labels:
            bad.append(f"{tgt}: no such direction")
            continue
        d = labels.index(tgt)
        kind, _, coef = spec.embedding[d]
        if kind != K.F_ZERO and coef != 0:
            bad.append(f"the embedding writes {tgt}")
        for li, L in enumerate(spec.attn_layers):
            if np.any(L.W2[d] != 0) or L.b2[d] != 0:
                bad.append(f"layer {li + 1}'s MLP writes {tgt}")
            for hd in L.heads:
                if hd.name not in hs and np.any(hd.WO[d] != 0):
                    bad.append(f"head {hd.name} writes {tgt}")
        if tgt.startswith((prompt_token(""), prev_token(""))) and len(hs) != 1:
            bad.append(f"{tgt} is copied by {hs}")
    return _exact("composition", "chain.writers", "each direction the plan's heads copy into is written by those "
                  "heads alone (no other head, no MLP, not the embedding), the RNN features' copies by one head each",
                  bad)


_POSITIONS: dict = {}
"""The per-position facts of the simulators proved in this process, keyed by
everything they read (the layout, the head plan, P, max_prompt, max_rnn_cot, the
embedding of pos; the type and role plans are functions of the layout): a
simulator with the same key gets the same records (queries included) as a proof
of its own would give."""


def _position_kinds(ref: _Reference, t, mp: int, mc: int) -> list[tuple]:
    """The kinds of position of the reference CoT, each (name, its position, its
    row, its token's code, its extra hypotheses, the kind of the next token),
    in block t (a z3 Int) of a prompt of L tokens (L <= ``mp``, a CoT of at
    most ``mc`` RNN tokens)."""
    lay, S, B, L = ref.lay, ref.S, ref.B, ref.L
    last = [t <= L + mc - 1]                   # the blocks of a run: t < L + c, c <= max_rnn_cot
    kinds = [("prompt", L - 1, "rnn_tokens", ref.u(L - 1), [], "K(0)")]
    kinds.append(("K", L + B * t, "counter", lay["K"] + t, last, "S0"))
    for i in range(S):
        nxt = f"S{i + 1}" if i + 1 < S else None
        if nxt:
            kinds.append((f"S{i}", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t), last, nxt))
        else:                                  # the last state number: the filler, then the RNN's token
            if mp >= 2:                        # a filler block needs t < L - 1 <= max_prompt - 2
                kinds.append((f"S{i}.filler", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t),
                              [t < L - 1], "filler"))
            kinds.append((f"S{i}.token", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t),
                          [t >= L - 1] + last, "Y"))
    if mp >= 2:
        kinds.append(("Y.filler", L + B * t + S + 1, "filler", z3.IntVal(lay["filler"]), [t < L - 1], "K(t+1)"))
    if mc >= 1:                                # an RNN token with a next block: only with a CoT
        kinds.append(("Y.token", L + B * t + S + 1, "rnn_tokens", ref.y(t), [t >= L - 1, t <= L + mc - 2],
                      "K(t+1)"))
    return kinds


def _handed_goals(ref: _Reference, handed: dict, block: bool, t, ykey) -> list[tuple]:
    """What the first layers must hand the later ones at a position of
    :func:`_positions` (``block``: in a block of the CoT, else the last prompt
    token): seen_counter, the step in the next-code lemma's range, the prompt
    length and the previous states; ``ykey`` the key prev_token attends."""
    lay, S, L = ref.lay, ref.S, ref.L
    unit = Fraction(1, 1 << lay["f"])
    last_counter = lay["top"] - lay["K"] - 1
    goals = [(f"{SEEN_COUNTER} = " + ("1" if block else "0"), handed[SEEN_COUNTER] == (1 if block else 0)),
             (f"{STEP} an integer in 0..{last_counter} (the next-code lemma's range)",
              z3.And(z3.IsInt(handed[STEP]), handed[STEP] >= 0, handed[STEP] <= last_counter)),
             (f"{PROMPT_LENGTH} an integer", z3.IsInt(handed[PROMPT_LENGTH]))]
    if block:
        goals += [(f"{STEP} = t", handed[STEP] == z3.ToReal(t)),
                  (f"{PROMPT_LENGTH} = L", handed[PROMPT_LENGTH] == z3.ToReal(L))]
        for i in range(S):
            want = z3.If(t >= 1, z3_value(unit) * z3.ToReal(ref.U[i](t - 1)), z3.RealVal(0))
            goals.append((f"{prev_state(i)} = s_(t-1)^{i} (0 at t = 0)", handed[prev_state(i)] == want))
    else:
        # the step computed at the last prompt token (unused; the next token is K(0)) starts from the
        # zero state, on a prompt token (the prompt and prev_token heads' keys are <= p < L): the documented
        # precondition that one such step stays in range
        goals += [(f"{prev_state(i)} = 0", handed[prev_state(i)] == 0) for i in range(S)]
        goals.append((f"{PREV_TOKEN_HEAD} reads the token at max(0, L - S - 3) (the one whose zero-state step "
                      "compare checks against the promise)", ykey == z3.If(L - S - 3 > 0, L - S - 3, 0)))
    return goals


def _positions(sim, ref: _Reference, heads: dict, P: int, mp: int, mc: int, tag: str) -> list[dict]:
    """``chain.<kind>`` for each kind of position."""
    S, L = ref.S, ref.L
    layer = "composition"
    t = z3.Int(f"{tag}.chain.t")
    flags = [IS_RNN_TOKEN, IS_FILLER] + [is_state(i) for i in range(S)] + [IS_COUNTER]
    base = [L >= 1, L <= mp, t >= 0]
    kinds = _position_kinds(ref, t, mp, mc)
    needed = (SEEN_COUNTER, PROMPT_LENGTH, STEP) + tuple(prev_state(i) for i in range(S))
    out = []
    for name, p, row, code, extra, nxt in kinds:
        hyps = base + extra
        block = name != "prompt"
        keys: list = []

        def bind(head, key):
            """A name for the key ``head`` attends (its definition joins the hypotheses)."""
            k = z3.Int(f"{tag}.chain.{name}.{head}.key")
            keys.append(k == key)
            return k
        x = {lab: ref.value_of(row, code, p, lab) for lab in flags + ["pos", "one"]}
        handed = {tgt: z3.RealVal(0) for tgt in needed}      # each starts at 0 (the order fact) ...
        goals = [("p lies within the positions the heads' lemmas cover (0..P)", z3.And(p >= 0, p <= P))]

        def attend(h, arg, vals):
            """The key position head h attends (its lemma), and its query proved an integer."""
            Q = _query(arg, vals, h)
            goals.append((f"{h}'s query is an integer", z3.IsInt(Q)))
            return bind(h, clamp_key(z3.ToInt(Q), p))
        for h, (_, (kind, arg), copy) in heads.items():
            if h == PROMPT_HEAD:
                continue
            key = bind(h, z3.If(p >= L, L, 0)) if kind == "first" else attend(h, arg, x)
            for tgt, combo in copy.items():                # ... and gains every copy into it
                if tgt in handed:
                    handed[tgt] = handed[tgt] + ref.copy(combo, key)
        # the prompt head reads the carried step (layer 3): its query from what layer 2 handed
        pkey = attend(PROMPT_HEAD, heads[PROMPT_HEAD][1][1], {**x, **handed})
        ykey = attend(PREV_TOKEN_HEAD, heads[PREV_TOKEN_HEAD][1][1], x)
        goals += _handed_goals(ref, handed, block, t, ykey)
        handed_text = "; ".join(text for text, _ in goals)
        # the roles and the case of the next code, on what the heads handed
        vals = {lab: x[lab] for lab in flags}
        vals.update({SEEN_COUNTER: handed[SEEN_COUNTER], STEP: handed[STEP], PROMPT_LENGTH: handed[PROMPT_LENGTH]})
        roles = {lab: fn(vals) for lab, (fn, _) in role_plan(sim).items()}
        roles.update({lab: fn(roles) for lab, (fn, _) in emit_plan().items()})
        emits = [emit_state(i) for i in range(S)] + [EMIT_RNN_TOKEN, EMIT_FILLER, EMIT_NEXT_COUNTER]
        case = {"K(0)": None, "Y": EMIT_RNN_TOKEN, "filler": EMIT_FILLER, "K(t+1)": EMIT_NEXT_COUNTER}
        flag = case.get(nxt, emit_state(int(nxt[1:])) if nxt.startswith("S") else None)
        goals += [(f"{e} = {int(e == flag)}", roles[e] == (1 if e == flag else 0)) for e in emits]
        if block:
            src_p, src_y = ref.code(pkey), ref.code(ykey)
            goals.append((f"the RNN's input (the input MLP: {PROMPT_HEAD}'s copy if {IN_PROMPT}, else "
                          f"{PREV_TOKEN_HEAD}'s) is the token u_t: the prompt's token t at t < L, else y_(t-1)",
                          z3.If(roles[IN_PROMPT] == 1, src_p, src_y) == z3.If(t < L, ref.u(t), ref.y(t - 1))))
        if nxt == "K(t+1)":
            goals.append((f"K({STEP} + 1) is K(t + 1)", vals[STEP] + 1 == z3.ToReal(t + 1)))
        stmt = (f"at the {_where(name)}: the type, head and copy lemmas on the reference CoT's tokens hand the "
                f"later layers {handed_text}; on these the block roles and the input MLP set "
                f"{flag or 'no emit flag (seen_counter = 0)'} alone, the next-code case of {nxt}, the kind of the "
                f"reference's next token" + (", and the RNN's input is u_t" if block else ""))
        out.append(conjoined_fact(f"chain.{name}", layer, stmt, hyps + keys, goals))
    return out


def _query(combo: dict, x: dict, head: str):
    """The plan's query combination on the query position's values (a real term;
    the chain proves it an integer, as the heads' lemma takes it)."""
    missing = [lab for lab in combo if lab not in x]
    if missing:
        raise ValueError(f"{head}: the plan's query reads {missing}, which the chain gives no value")
    return sum((z3_value(c) * x[lab] for lab, c in combo.items()), z3.RealVal(0))


def _where(name: str) -> str:
    return {"prompt": "last prompt position L - 1 (every L)", "K": "counter K(t) of every block t",
            "Y.filler": "filler Y_t of every block t < L - 1",
            "Y.token": "RNN token Y_t of every block t >= L - 1 that has a next block"}.get(
        name, f"state number {name} of every block" + (" t < L - 1" if name.endswith(".filler") else
                                                     " t >= L - 1" if name.endswith(".token") else ""))


# ----------------------------------------------------------------------------
# the machine's arithmetic: which products it rounds, and that rounding them changes nothing
def _integral(v) -> bool:
    return Fraction(v).denominator == 1


def _embedded_integral(entry) -> bool:
    """The embedding writes an integer at every position (a token or position
    feature of integer values times an integer coefficient)."""
    kind, _, coef = entry
    if kind == K.F_ZERO:
        return True
    return kind in (K.F_ONE, K.F_TOK, K.F_TOK_SQ, K.F_IS_TOKEN, K.F_IS_NUM, K.F_POS, K.F_POS_SQ) and _integral(coef)


def _rnn_layer_rows(sim) -> dict:
    """Attention-layer index -> the neurons (W1 row, b1, W2 column over the
    simulator's directions) that make the same products as the RNN's step: the
    state MLP of RNN layer l (per state s: the row A[s, :] on prev_state, B[s, :]
    on the RNN's input, writing 1 to h_s and C[:, s] to the RNN's directions, and
    its negation) and its own MLP (per hidden unit m with a nonzero W2 column:
    W1[m, :], b1[m], W2[:, m]; b2 through one constant neuron)."""
    rspec = sim.rnn.spec
    dims, _ = rnn_dims(sim)
    first = plan(sim)[PROMPT_HEAD][0] + 1
    out, base = {}, 0
    for l, R in enumerate(rspec.rnn_layers):
        S_l = R.A.shape[0]
        hl = [rnn_state(l, R.state_labels[s] if R.state_labels else s) for s in range(S_l)]
        state = []
        for s in range(S_l):
            row = {prev_state(base + s2): Fraction(R.A[s, s2]) for s2 in range(S_l) if R.A[s, s2] != 0}
            row.update({dims[d]: Fraction(R.B[s, d]) for d in range(rspec.width) if R.B[s, d] != 0 and dims[d]})
            col = {hl[s]: Fraction(1)}
            col.update({dims[d]: Fraction(R.C[d, s]) for d in range(rspec.width) if R.C[d, s] != 0 and dims[d]})
            state.append((row, Fraction(0), col))
            state.append(({k: -v for k, v in row.items()}, Fraction(0), {k: -v for k, v in col.items()}))
        own = []
        for m in range(R.W1.shape[0]):
            col = {dims[d]: Fraction(R.W2[d, m]) for d in range(rspec.width) if R.W2[d, m] != 0 and dims[d]}
            if col:
                row = {dims[d]: Fraction(R.W1[m, d]) for d in range(rspec.width) if R.W1[m, d] != 0 and dims[d]}
                own.append((row, Fraction(R.b1[m]), col))
        b2 = {dims[d]: Fraction(R.b2[d]) for d in range(rspec.width) if R.b2[d] != 0 and dims[d]}
        if b2:
            own.append(({}, Fraction(1), b2))
        out[first + 2 * l] = state
        out[first + 2 * l + 1] = own
        base += S_l
    return out


def _neurons(L, labels) -> list:
    """The built MLP's neurons as (W1 row, b1, W2 column) over named directions
    (a neuron with a zero W2 column writes nothing and is left out), and b2."""
    out = []
    for m in range(L.W1.shape[0]):
        col = {labels[d]: Fraction(L.W2[d, m]) for d in range(len(labels)) if L.W2[d, m] != 0}
        if col:
            row = {labels[a]: Fraction(L.W1[m, a]) for a in range(len(labels)) if L.W1[m, a] != 0}
            out.append((row, Fraction(L.b1[m]), col))
    return out


def _canon(neurons) -> list:
    return sorted((sorted(r.items()), b, sorted(c.items())) for r, b, c in neurons)


def _head_products(li: int, L, labels: list, ints: set, bad: list) -> None:
    """The products of attention layer ``li``'s heads (:func:`exact_facts`): each
    one rounded without an integer factor is added to ``bad``; a direction a head
    writes a non-integer into leaves ``ints``."""
    for h in L.heads:
        def proj(W, what):
            vals = []
            for r in range(W.shape[0]):
                terms = [(Fraction(W[r, a]), labels[a]) for a in range(W.shape[1]) if W[r, a] != 0]
                for w, lab in terms:
                    if not (_integral(w) or lab in ints):
                        bad.append(f"layer {li + 1}, head {h.name}: {what} row {r} rounds {w} x {lab}")
                vals.append(all(_integral(w) and lab in ints for w, lab in terms))
            return vals
        q, k, v = proj(h.WQ, "W_Q"), proj(h.WK, "W_K"), proj(h.WV, "W_V")
        for r in range(len(q)):
            if not (q[r] or k[r]) and (np.any(h.WQ[r] != 0) and np.any(h.WK[r] != 0)):
                bad.append(f"layer {li + 1}, head {h.name}: the score rounds q_{r} k_{r} (neither an integer)")
        # the weights are an exact one-hot (the machine lemma): o = v at the key, exact
        for d in range(len(labels)):
            for r in range(h.WO.shape[1]):
                w = h.WO[d, r]
                if w != 0 and not (_integral(w) or v[r]):
                    bad.append(f"layer {li + 1}, head {h.name}: W_O rounds {Fraction(w)} x o_{r}")
        for d in range(len(labels)):
            if any(h.WO[d, r] != 0 and not (_integral(h.WO[d, r]) and v[r]) for r in range(h.WO.shape[1])):
                ints.discard(labels[d])


def exact_facts(sim) -> list[dict]:
    """What the machine rounds, read off the built simulator: every value it
    holds is a multiple of 2^-f (its format), and it rounds each product (the
    kernels' matvec: products rounded half to even, sums exact). A product of
    an integer weight, or of an integer value, is exact on that grid. Following
    which directions hold integers at every position (the embedding's integer
    features, then each layer: a neuron, a query, key or value row of integer
    weights on integer values, plus an integer bias, is an integer), every
    product of every head and every MLP is checked to have an integer factor,
    except in the layers that simulate the RNN's step: there each neuron is
    checked to make exactly the products the RNN's step makes (``_rnn_layer_rows``),
    so the machine rounds them as it rounds the RNN's (a neuron and its negation
    round to negated values: rounding half to even is odd-symmetric), and the
    RNN's input directions are embedded with the RNN's own features and
    coefficients. Then the exact-arithmetic facts of the row are the machine's
    values (while no value leaves the format: the declared obligations and the
    runs in raise mode)."""
    spec = sim.model.spec
    labels = list(spec.labels)
    layer = "machine arithmetic"
    rows = _rnn_layer_rows(sim)
    ints = {lab for lab, e in zip(labels, spec.embedding) if _embedded_integral(e)}
    bad = embedding_mismatch(sim)                          # the RNN's input: its own embedding
    fm, fr = sim.model.fmt, sim.rnn.fmt
    if fm.frac_bits != fr.frac_bits:
        bad.append(f"the simulator rounds to 2^-{fm.frac_bits}, the RNN to 2^-{fr.frac_bits}")
    for what, fmt in (("the simulator", fm), ("the RNN", fr)):
        if fmt.mode != "raise":
            bad.append(f"{what}'s format is in {fmt.mode} mode (values would be clipped, not refused)")
    for lab, e in zip(labels, spec.embedding):            # the embedding's own products: coef x feature
        if e[0] in (K.F_TOK_INV, K.F_POS_INV) and not _integral(e[2]):   # every other feature is an integer
            bad.append(f"the embedding rounds {Fraction(e[2])} x {K.FEATURE_NAMES.get(e[0], e[0])} into {lab}")
    out = []
    for li, L in enumerate(spec.attn_layers):
        _head_products(li, L, labels, ints, bad)
        neurons = _neurons(L, labels)
        if li in rows:
            if _canon(neurons) != _canon(rows[li]) or np.any(L.b2 != 0):
                bad.append(f"layer {li + 1}: its neurons are not the RNN step's products "
                           f"({len(neurons)} neurons, the RNN's step makes {len(rows[li])})")
            for _, _, col in neurons:
                ints.difference_update(col)
            continue
        hidden_int = []
        for row, b, col in neurons:
            for lab, w in row.items():
                if not (_integral(w) or lab in ints):
                    bad.append(f"layer {li + 1}: a neuron rounds {w} x {lab}")
            hidden_int.append(all(_integral(w) and lab in ints for lab, w in row.items()) and _integral(b))
        for (row, b, col), hi in zip(neurons, hidden_int):
            for lab, w in col.items():
                if not (_integral(w) or hi):
                    bad.append(f"layer {li + 1}: W2 rounds {w} x a neuron's value into {lab}")
        for d, lab in enumerate(labels):
            if (any(lab in col and not (_integral(col[lab]) and hi) for (_, _, col), hi in zip(neurons, hidden_int))
                    or not _integral(L.b2[d])):
                ints.discard(lab)
    stmt = ("the simulator and the RNN round to the same grid 2^-f, both in raise mode; every product the machine "
            "rounds in the built simulator (the embedding's coefficient times its feature, each head's W_Q, W_K, "
            "W_V, score and W_O, each MLP's W1 and W2) has an integer factor (an integer weight, or a direction that holds an integer "
            "at every position: the embedding's integer features and what integer weights make of them), so it "
            "is exact on the grid 2^-f; the layers that simulate the RNN's step make exactly the RNN's products "
            "(each state's row A[s, :], B[s, :] and its negation, each hidden unit's W1 row, b1 and W2 column), "
            "and the RNN's input is embedded with the RNN's own features: the machine rounds them as the RNN does")
    out.append({"fact": "exact.products", "layer": layer, "method": "exact", "statement": stmt,
                "answer": "holds" if not bad else "sat",
                **({"counterexample": "; ".join(bad[:4]) + (f" (and {len(bad) - 4} more)" if len(bad) > 4 else "")}
                   if bad else {})})
    return out
