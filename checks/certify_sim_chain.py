"""The simulator's composition: its proved layers, chained over the chain of thought it writes.

checks/certify_sim.py proves each layer of a built simulator on its own, on
free inputs, under stated hypotheses (one-hot flags, the step an integer, the
keys' flags 0/1, ...). What those facts leave open is the composition: that at
every position of the CoT the model writes, the values each layer is handed are
the ones its fact is proved for, and that they make the next token the one the
CoT's layout calls for. :func:`chain_facts` proves that, for every prompt length
1 <= L <= max_prompt and every step t the simulator is built for, from the
reference CoT (the layout of constructions/simulate.py, written here as the
specification: the prompt's tokens at 0..L - 1, then block t at L + B t, B = S + 2)::

    K(t)  S_0(s_t^0) .. S_(S-1)(s_t^(S-1))  Y_t

with the prompt's codes, the RNN's states s_t (integers 2^f s_t^i under the
promise |s| < 2^I_s) and the RNN's tokens y_t as free functions. The proof is
an induction on the position p: if the tokens at 0..p are the reference's, the
token the model emits at p is the reference's token at p + 1. Its step, for
each kind of position (the last prompt token, K(t), each S_i(t), Y_t as the
filler and as the RNN's token), chains the per-layer lemmas, each used as what
its fact proves about the built model:

* the token-type lemma (``type.*``): the flags and values layer 1 writes at
  each position, the query's and every key's, from the reference's code (each
  kind's code in its lemma's range: ``chain.codes.*``);
* the position heads' lemma (``<head>.one_hot``): each attends
  clamp(Q - 1, 0, p), Q the plan's query on the query's flags; ``firstK``'s
  (``firstK.*``): the first key with is_counter = 1, else position 0; each
  copies the plan's values (``<head>.copy``) of the key the layout puts there;
* the block-role and input lemmas (``roles.*``, ``input.*``) on those values;
* the next-code cases (``next.*``): exactly one case's flags are set, the case
  of the reference's next token.

The chain's facts (:func:`chain_facts`): ``chain.codes.*`` (each kind of token
lies in its type lemma's code range; the RNN's own codes below the filler);
``chain.features`` (the copied features are token features, within the
declared bound the input lemma assumes, for every code of the layout);
``chain.firstK`` (no key before L has is_counter = 1, K(0) has it);
``chain.<kind>.handed`` (what the heads hand the later layers: step = t,
seen_counter, prompt_length = L, prev_state_i = s_(t-1)^i (0 at t = 0), the
RNN's input u_t = the prompt's token at t < L, else y_(t-1); and p within the
positions the heads' lemmas cover); ``chain.<kind>.next`` (the roles select
exactly the case of the reference's next token, with its code).

What the chain does not discharge (docs/certify.md): the RNN's step itself is
the per-layer step facts', in exact arithmetic; that the machine rounds each
of the simulator's products as the RNN rounds the same product (so the states
it writes are the RNN's s_t) is argued in constructions/simulate.py and
compared on every run, not certified; and the promise (|s_t| < 2^I_s, the
RNN's values in its format, one step from the zero state on a prompt token in
range) is a hypothesis, checked by running.
"""
from __future__ import annotations

from fractions import Fraction

from rnngap.constructions import kernels as K
from rnngap.constructions.vocab import token_code

from .certify_sim import (Val, _embedded, _fact, _q, _unmet, emit_plan, layout, plan, role_plan, type_plan)
from .symbolic import prove, z3

COVERS = "composition"
NEEDED = ("seen_counter", "prompt_length", "step") + tuple(f"prev_state{i}" for i in range(64))
"""The copies the chain follows value by value; the prompt and prevY heads' copies
(the RNN embedding's features of a token) are followed as the token's code:
``chain.features`` proves them functions of the code alone."""


def _real(v):
    if isinstance(v, (int, Fraction)):
        return _q(v)
    return z3.ToReal(v) if v.is_int() else v


class _Reference:
    """The reference CoT of one simulator, symbolic in the prompt length L: the
    code at a position term j and the values layer 1 and the embedding write
    there (from the type lemma's plan and the built embedding)."""

    def __init__(self, sim, tag: str):
        self.sim, self.lay = sim, layout(sim)
        self.spec, self.labels = sim.model.spec, list(sim.model.spec.labels)
        lay = self.lay
        self.S, self.B = lay["S"], lay["B"]
        I = z3.IntSort()
        self.L = z3.Int(f"{tag}.chain.L")
        self.u = z3.Function(f"{tag}.chain.prompt", I, I)         # the prompt's code at position j
        self.y = z3.Function(f"{tag}.chain.y", I, I)              # the code of the RNN's token y_b
        self.U = [z3.Function(f"{tag}.chain.U{i}", I, I) for i in range(self.S)]   # 2^f s_b^i
        self.rows = {name: want for name, _, _, _, want in type_plan(sim)}

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
        want = self.rows[row]
        if lab in want:
            v = want[lab]
            return _real(v.fn(code) if isinstance(v, Val) else v)
        if lab not in self.labels:
            raise ValueError(f"no direction {lab!r}")
        return _embedded(self.spec, self.labels.index(lab), code, j)

    def value(self, lab: str, j):
        out = z3.RealVal(0)
        for row, cond, c in reversed(self.kinds(j)):
            out = z3.If(cond, self.value_of(row, c, j, lab), out)
        return out

    def copy(self, combo: dict, j):
        """sum_lab c x[lab] at position j (one case split over the kinds)."""
        cases = []
        for row, cond, code in self.kinds(j):
            here = z3.simplify(sum((_q(c) * self.value_of(row, code, j, lab) for lab, c in combo.items()),
                                   z3.RealVal(0)))
            cases.append((cond, here))
        if all(h.eq(cases[0][1]) for _, h in cases):       # the kinds cover every position: one term
            return cases[0][1]
        out = z3.RealVal(0)
        for cond, here in reversed(cases):
            if not (z3.is_rational_value(here) and here.as_fraction() == 0):
                out = z3.If(cond, here, out)
        return out


def _clamp_key(Q, p):
    """The key a position head attends at query position p (its lemma): clamp(Q - 1, 0, p)."""
    return z3.If(Q < 1, 0, z3.If(Q > p + 1, p, Q - 1))


def _conjoin(name: str, layer: str, stmt: str, hyps: list, goals: list) -> dict:
    """One fact whose conclusion is the conjunction of ``goals`` ((text, term));
    when it fails, each goal is tried alone so that the record names the ones
    that fail."""
    d = _fact(layer, name, stmt, hyps, z3.And(*[g for _, g in goals]))
    if d["answer"] == "sat":
        bad = [text for text, g in goals if prove(hyps, g, 20000)["answer"] != "unsat"]
        d["counterexample"] = f"fails: {'; '.join(bad)} -- " + d.get("counterexample", "")
    return d


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
    # --- each kind of token in its type lemma's range
    v = z3.Int(f"{tag}.chain.v")
    off = sim.OFF
    codes = [("counter", "K(t) for every step t < max_steps + 1",
              [v >= 0, v <= sim.max_steps], lay["K"] + v, lay["K"], lay["top"])]
    codes += [(f"state{i}", f"S{i}(s) for every state number with |2^f s| < 2^(I_s + f)",
               [v > -off, v < off], lay["S_c"][i] + v, lay["S_lo"][i], lay["S_hi"][i]) for i in range(S)]
    for row, what, hyps, code, lo, hi in codes:
        out.append(_fact(layer, f"chain.codes.{row}", f"the code of {what} lies in {lo}..{hi}, the range of "
                         f"the type lemma type.{row}", hyps, z3.And(code >= lo, code <= hi)))
    rnn_codes = sorted(token_code(i) for i in range(sim.rnn.vocab.size) if sim.rnn.vocab.contains(i))
    ok = lay["tau_min"] <= rnn_codes[0] and rnn_codes[-1] <= lay["filler"] - 1
    out.append({"fact": "chain.codes.rnn_tokens", "layer": layer, "method": "exact",
                "statement": f"every token of the RNN's vocabulary (codes {rnn_codes[0]}..{rnn_codes[-1]}) lies in "
                             f"{lay['tau_min']}..{lay['filler'] - 1}, the range of type.rnn_tokens",
                "answer": "holds" if ok else "sat",
                **({} if ok else {"counterexample": f"codes {rnn_codes[0]}..{rnn_codes[-1]}"})})
    # --- the features the prompt and prevY heads copy: token features, within the input lemma's bound
    from rnngap.constructions.bounds import INT, sim_emb_bound
    bound = _q(sim_emb_bound(INT, sim.params(), sim.max_steps))
    read = sorted({lab for name in ("prompt", "prevY") for combo in heads[name][2].values() for lab in combo})
    tau, pos = z3.Ints(f"{tag}.chain.tau {tag}.chain.pos")
    pos_kinds = [lab for lab in read if lab in ref.labels
                 and ref.spec.embedding[ref.labels.index(lab)][0] in (K.F_POS, K.F_POS_SQ)]
    try:
        feats = [_embedded(ref.spec, ref.labels.index(lab), tau, pos) for lab in read if lab not in pos_kinds]
        goal = z3.And(*[z3.And(x <= bound, x >= -bound) for x in feats]) if feats else z3.BoolVal(True)
        d = _fact(layer, "chain.features", f"the directions prompt and prevY copy ({', '.join(read)}) are "
                  f"token features (functions of the code alone), within the declared bound {bound} for every "
                  f"code in {lay['tau_min']}..{lay['top']}", [tau >= lay["tau_min"], tau <= lay["top"], pos >= 0],
                  goal)
        if pos_kinds:
            d.update(answer="sat", counterexample=f"{pos_kinds} are position features")
        out.append(d)
    except ValueError as e:
        out.append(_unmet("chain.features", layer, "the copied directions are embedded token features", str(e)))
    # --- firstK: no counter before L, K(0) at L
    j = z3.Int(f"{tag}.chain.j")
    base = [L >= 1, L <= mp]
    try:
        out.append(_fact(layer, "chain.firstK", "for every prompt length 1 <= L <= max_prompt: is_counter = 0 at "
                         "every position j < L and = 1 at L (so firstK's lemma makes it attend L from position L "
                         "on, and position 0 before)", base + [j >= 0, j < L],
                         z3.And(ref.value("is_counter", j) == 0, ref.value("is_counter", L) == 1)))
        pos_entry = ref.spec.embedding[ref.labels.index("pos")] if "pos" in ref.labels else None
        key = (tag, repr(sorted(lay.items())), repr(heads), P, mp, mc, repr(pos_entry))
        if key not in _POSITIONS:
            _POSITIONS[key] = _positions(sim, ref, heads, P, mp, mc, tag)
        out += [dict(d) for d in _POSITIONS[key]]
    except ValueError as e:
        out.append(_unmet("chain.read", layer, "the plan's directions", str(e)))
    return out


_POSITIONS: dict = {}
"""The per-position facts of the simulators proved in this process, keyed by
everything they read (the layout, the head plan, P, max_prompt, max_rnn_cot, the
embedding of pos; the type and role plans are functions of the layout): a
simulator with the same key gets the same records (queries included) as a proof
of its own would give."""


def _positions(sim, ref: _Reference, heads: dict, P: int, mp: int, mc: int, tag: str) -> list[dict]:
    """``chain.<kind>.handed`` and ``chain.<kind>.next`` for each kind of position."""
    lay, S, B, L = ref.lay, ref.S, ref.B, ref.L
    layer = "composition"
    t = z3.Int(f"{tag}.chain.t")
    flags = ["is_rnn_token", "is_filler"] + [f"is_state{i}" for i in range(S)] + ["is_counter"]
    base = [L >= 1, L <= mp, t >= 0]
    last = [t <= L + mc - 1]                   # the blocks of a run: t < L + c, c <= max_rnn_cot
    kinds = [("prompt", L - 1, "rnn_tokens", ref.u(L - 1), [], "K(0)")]
    kinds.append(("K", L + B * t, "counter", lay["K"] + t, last, "S0"))
    for i in range(S):
        nxt = f"S{i + 1}" if i + 1 < S else None
        if nxt:
            kinds.append((f"S{i}", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t), last, nxt))
        else:                                  # the last state number: the filler, then the RNN's token
            kinds.append((f"S{i}.filler", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t),
                          [t < L - 1], "filler"))
            kinds.append((f"S{i}.token", L + B * t + 1 + i, f"state{i}", lay["S_c"][i] + ref.U[i](t),
                          [t >= L - 1] + last, "Y"))
    kinds.append(("Y.filler", L + B * t + S + 1, "filler", z3.IntVal(lay["filler"]), [t < L - 1], "K(t+1)"))
    if mc >= 1:                                # an RNN token with a next block: only with a CoT
        kinds.append(("Y.token", L + B * t + S + 1, "rnn_tokens", ref.y(t), [t >= L - 1, t <= L + mc - 2],
                      "K(t+1)"))
    unit = Fraction(1, 1 << lay["f"])
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
        x = {lab: ref.value_of(row, code, p, lab) for lab in flags}
        x["pos"], x["one"] = z3.ToReal(p), z3.RealVal(1)
        handed = {}
        for h, (_, (kind, arg), copy) in heads.items():
            if kind == "first":
                key = bind(h, z3.If(p >= L, L, 0))
            else:
                if h == "prompt":
                    continue
                key = bind(h, _clamp_key(_query(arg, x, h), p))
            handed.update({tgt: ref.copy(combo, key) for tgt, combo in copy.items() if tgt in NEEDED})
        # the prompt head reads the carried step (layer 3): its query from what layer 2 handed
        _, (_, arg), copy = heads["prompt"]
        pkey = bind("prompt", _clamp_key(_query(arg, {**handed, "one": z3.RealVal(1)}, "prompt"), p))
        goals = [("p lies within the positions the heads' lemmas cover (0..P)", z3.And(p >= 0, p <= P)),
                 ("seen_counter = " + ("1" if block else "0"), handed["seen_counter"] == (1 if block else 0))]
        if block:
            goals += [("step = t", handed["step"] == z3.ToReal(t)),
                      ("prompt_length = L", handed["prompt_length"] == z3.ToReal(L))]
            for i in range(S):
                want = z3.If(t >= 1, _q(unit) * z3.ToReal(ref.U[i](t - 1)), z3.RealVal(0))
                goals.append((f"prev_state{i} = s_(t-1)^{i} (0 at t = 0)", handed[f"prev_state{i}"] == want))
        handed_text = "; ".join(text for text, _ in goals)
        # the roles and the case of the next code, on what the heads handed
        vals = {lab: x[lab] for lab in flags}
        vals.update(seen_counter=handed["seen_counter"], step=handed.get("step", z3.RealVal(0)),
                    prompt_length=handed.get("prompt_length", z3.RealVal(0)))
        roles = {lab: fn(vals) for lab, (fn, _) in role_plan(sim).items()}
        roles.update({lab: fn(roles) for lab, (fn, _) in emit_plan().items()})
        emits = [f"emit_state{i}" for i in range(S)] + ["emit_rnn_token", "emit_filler", "emit_next_counter"]
        case = {"K(0)": None, "Y": "emit_rnn_token", "filler": "emit_filler", "K(t+1)": "emit_next_counter"}
        flag = case.get(nxt, f"emit_state{nxt[1:]}" if nxt.startswith("S") else None)
        goals += [(f"{e} = {int(e == flag)}", roles[e] == (1 if e == flag else 0)) for e in emits]
        if not block:
            # the step computed at the last prompt token (unused; the next token is K(0)) starts from the
            # zero state on a prompt token: the precondition that it stays in range is about that step
            ykey = bind("prevY", _prev_key(heads, x, p))
            goals += [(f"prev_state{i} = 0", handed[f"prev_state{i}"] == 0) for i in range(S)]
            goals.append(("the RNN's input is a prompt token's (in_prompt = 0, prevY's key < L)",
                          z3.And(roles["in_prompt"] == 0, ykey < L)))
        if block:
            src_p, src_y = ref.code(pkey), ref.code(bind("prevY", _prev_key(heads, x, p)))
            goals.append(("the RNN's input (the input MLP: prompt's copy if in_prompt, else prevY's) has the code "
                          "of u_t: the prompt's token t at t < L, else y_(t-1)",
                          z3.If(roles["in_prompt"] == 1, src_p, src_y) == z3.If(t < L, ref.u(t), ref.y(t - 1))))
        if nxt == "K(t+1)":
            goals.append(("K(step + 1) is K(t + 1), a counter token (step + 1 <= the last counter)",
                          z3.And(vals["step"] + 1 == z3.ToReal(t + 1), t + 1 <= lay["top"] - lay["K"])))
        stmt = (f"at the {_where(name)}: the type, head and copy lemmas on the reference CoT's tokens hand the "
                f"later layers {handed_text}; on these the block roles and the input MLP set "
                f"{flag or 'no emit flag (seen_counter = 0)'} alone, the next-code case of {nxt}, the reference's "
                f"next token" + (", and the RNN's input u_t" if block else ""))
        out.append(_conjoin(f"chain.{name}", layer, stmt, hyps + keys, goals))
    return out


def _query(combo: dict, x: dict, head: str):
    """The plan's query combination on the query position's values (integers)."""
    missing = [lab for lab in combo if lab not in x]
    if missing:
        raise ValueError(f"{head}: the plan's query reads {missing}, which the chain gives no value")
    return z3.ToInt(sum((_q(c) * x[lab] for lab, c in combo.items()), z3.RealVal(0)))


def _prev_key(heads: dict, x: dict, p):
    return _clamp_key(_query(heads["prevY"][1][1], x, "prevY"), p)


def _where(name: str) -> str:
    return {"prompt": "last prompt position L - 1 (every L)", "K": "counter K(t) of every block t",
            "Y.filler": "filler Y_t of every block t < L - 1",
            "Y.token": "RNN token Y_t of every block t >= L - 1 that has a next block"}.get(
        name, f"state number {name} of every block" + (" t < L - 1" if name.endswith(".filler") else
                                                     " t >= L - 1" if name.endswith(".token") else ""))
