"""The IsTree hybrid (claim T5.6), every layer on its own, proved from the BUILT model.

The union-find hybrid (constructions/models/hybrid.py ``istree_hybrid``) writes a CoT,
so its whole-model certificate is an induction over that CoT:
checks/certify/istree_hybrid_chain.py (``--full``; the row: checks/certify/rows.py).
This module proves each layer on its own, read off the built weights for the
sizes N of :data:`NS` (``--full``: every N fitting int64), against a plan written
here from the CoT's design, never from the builder's constants: the embedding;
each RNN recurrence by induction on t; each MLP's planned values; each head's
score (``fetch``, ``parent``, ``size``, ``last_su`` attend what :func:`plan` says,
by at least sharpness(f)) and copy; the readout. Each fact states its hypotheses,
which the chain discharges. The facts use exact arithmetic; the format's ranges
are row ``hybrid.istree``'s and the runs'.

Details (each layer, the heads, the hypotheses): docs/internals/certify.md#istree_hybrid
"""
from __future__ import annotations

import re

import numpy as np

from rnngap.constructions.build.num import sharpness
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import BOS, DASH, EOS, FALSE, QUERY, TILDE, TRUE, token_code
from rnngap.constructions.models.hybrid import (
    AT_PARENT_RECORD, AT_SIZE_RECORD, AT_U_SIZE, AT_V_SIZE, CHAIN_MARKER, CHILD_ROOT, EDGE_MARKERS, EOS_SEEN,
    FETCH_HEAD, FETCHED_TOKEN, IN_CHAIN, IS_BOS, IS_DASH, IS_EOS, IS_QUERY, IS_TILDE, JOINS, JOINS_OK, LAST_SU_HEAD,
    LATEST_RU, LATEST_SU, MERGED_SIZE, NEXT_CODE, PARENT_FOUND, PARENT_HEAD, PARENT_KEY, PARENT_KEY_SQ, PARENT_ROOT,
    PARENT_TOKEN, ROOT_SIZE, ROOTS_EQUAL, SIZE_HEAD, SIZE_KEY, SIZE_KEY_SQ, U_SMALLER, after_sv, delayed, squared,
)

from .layer_facts import (
    copy_fact, HeadScore, indicator, mlp_out, nearest_readout_facts, planned_heads, query_combo, show_combo,
    smt_fact, unmet, writes_only, z3_value,
)
from .sizes import z3

NAME = "istree-hybrid[layers]"
CLAIM = "T5.6"
NS = ((4, 6), (7, 6), (259, 258), (323, 323))
"""The sizes (N vertices, m_max edges) whose built hybrids ``rnngap certify``
proves by default: models the quick profile of ``rnngap verify`` runs (every
graph on 4 vertices: m_max = 6; the Index -> IsTree hub gadget at n bits has
N = n + 3, m_max = n + 2: its exhaustive n = 4 and its largest sampled n =
256) and N = m_max = 323, the largest whose format fits int64
(constructions/models/hybrid.py). About 1 s each on one core, so the default run
keeps to its 60 s (the gadget's exhaustive n = 3, (6, 5), is left to
``--full``, which proves every N)."""
DENSE_MAX = 64
"""The largest N whose complete graph's model ``--full`` proves (the dense graphs
``rnngap verify`` runs are on at most 64 vertices: checks/verify/checks_hybrid.py)."""
NS_FULL = tuple(sorted({(N, m) for N in range(1, 324) for m in (N, max(N - 1, 1))}
                       | {(N, N * (N - 1) // 2) for N in range(4, DENSE_MAX + 1)}))
"""``rnngap certify --full``: every N whose format fits int64, with m_max = N and
N - 1 (the hub gadget's), and every N in 4..64 with m_max = N(N - 1)/2 (a
complete graph's edges, the most a simple graph has): 706 models, about 1 s
each on one core. The models ``rnngap verify`` builds for its dense graphs
(m_max = the largest edge count among the graphs drawn, between N and
N(N - 1)/2) are covered only where that count is one of these."""
COVERS = ("embedding", "rnn-layers", "rnn-mlps", "heads", "attention-mlp", "readout")

NOTE = ("the IsTree hybrid, every layer on its own, at each size proved (by default three of the quick "
        "profile's models and (N, m_max) = (323, 323), where int64 ends; --full: every N in 1..323 with m_max = N "
        "and N - 1, every N in 4..64 with m_max = N(N - 1)/2; checks/certify/istree_hybrid.py), "
        "read off the built weights: the embedding; each RNN layer's recurrence by induction on t for every "
        "input sequence (cnt = t + 1, the delays, the counts, in_chain) and its MLP (record flags, keys, roles, "
        "[joins = N - 1], the union's roots); each head's score attends the plan's key (fetch: cnt = 3 joins + "
        "2 edge_markers + 2; parent, size: the latest matching record, else [BOS]; last_su: the latest flagged "
        "key) by sharpness(f), W_O W_V copies the plan's values; the attention MLP writes the next CoT token's "
        "code in each role; the readout emits it. With --full also the composition (checks/certify/istree_hybrid_chain.py: "
        "an induction over the union-find CoT for every N, one fact per role of a position, each layer handed "
        "what its fact is proved for and the next token the reference's; exact arithmetic); not in the default "
        "run")



# ----------------------------------------------------------------------------
# the embedding
def embedding_plan() -> dict:
    """direction -> (feature kind, parameter, coefficient): what the layers read
    as the embedding's: 1, tau, tau^2 and the flags of [BOS], [EOS], '-', '~' and
    [QUERY]; every other direction starts at 0."""
    out = {"one": (K.F_ONE, 0, 1), "tok": (K.F_TOK, 0, 1), "tok_sq": (K.F_TOK_SQ, 0, 1)}
    for lab, token in ((IS_BOS, BOS), (IS_EOS, EOS), (IS_DASH, DASH), (IS_TILDE, TILDE), (IS_QUERY, QUERY)):
        out[lab] = (K.F_IS_TOKEN, token, 1)
    return out


def embedding_facts(model, want: dict | None = None, text: str | None = None) -> list[dict]:
    """The built embedding writes exactly :func:`embedding_plan`, and no layer
    (an RNN layer's C, W2, b2; a head's W_O; the attention MLP's W2, b2) writes an
    embedded direction afterwards, so every layer reads the embedding's values
    there."""
    spec = model.spec
    want = embedding_plan() if want is None else want
    bad = []
    for lab, e in zip(spec.labels, spec.embedding):
        got = (int(e[0]), int(e[1]), e[2]) if e[0] != K.F_ZERO and e[2] != 0 else None
        w = want.get(lab)
        if (got is None) != (w is None) or (got is not None and (got[0], got[1], got[2]) != w):
            bad.append(f"{lab}: {got} (plan: {w})")
    for lab in want:
        if lab not in spec.labels:
            bad.append(f"{lab}: no such direction")
    out = [{"fact": "embedding.features", "layer": "embedding", "method": "exact",
            "statement": text or ("the embedding writes one = 1, tok = tau, tok_sq = tau^2 and the flags [tau = "
                                  "code] of [BOS], [EOS], -, ~, [QUERY]; nothing else"),
            "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(bad[:4])} if bad else {})}]
    idx = [spec.labels.index(lab) for lab in want if lab in spec.labels]
    writers = []
    for li, L in enumerate(spec.rnn_layers):
        for d in idx:
            if any(v != 0 for v in L.C[d]) or any(v != 0 for v in L.W2[d]) or L.b2[d] != 0:
                writers.append(f"RNN layer {li + 1} writes {spec.labels[d]}")
    for li, L in enumerate(spec.attn_layers):
        for d in idx:
            if any(v != 0 for h in L.heads for v in h.WO[d]) or any(v != 0 for v in L.W2[d]) or L.b2[d] != 0:
                writers.append(f"attention layer {li + 1} writes {spec.labels[d]}")
    out.append({"fact": "embedding.single_writer", "layer": "embedding", "method": "exact",
                "statement": "no layer writes an embedded direction (the layers read the embedding's values there)",
                "answer": "holds" if not writers else "sat",
                **({"counterexample": "; ".join(writers[:4])} if writers else {})})
    return out



# ----------------------------------------------------------------------------
# the RNN layers' recurrences, by induction on t over the built A, B, C
class StreamOps:
    """What a recurrence plan calls on a stream besides ``x`` and ``prefix``: a
    combination at one position and a delayed one (0 before the start)."""

    def combo(self, combo: dict, u):
        return sum((z3_value(c) * self.x(d, u) for d, c in combo.items()), z3.RealVal(0))

    def delay(self, combo: dict, k: int, u):
        """combo(x(u - k)), 0 before the start."""
        return z3.If(u >= k, self.combo(combo, u - k), z3.RealVal(0))


class _Stream(StreamOps):
    """The input sequences of a layer as z3 terms: x_d(u) an uninterpreted real
    function of the position for each direction (``one`` = 1), and prefix sums
    sum_{i <= u} combo(x(i)) as uninterpreted functions whose defining equations
    are instantiated where the proof uses them (:meth:`axioms`)."""

    def __init__(self, tag: str):
        self.tag, self.fns, self.pres, self.points = tag, {}, {}, set()

    def x(self, d: str, u):
        if d == "one":
            return z3.RealVal(1)
        if d not in self.fns:
            self.fns[d] = z3.Function(f"{self.tag}.x.{d}", z3.IntSort(), z3.RealSort())
        return self.fns[d](u)

    def prefix(self, combo: dict, u):
        """sum_{i <= u} combo(x(i)) (0 for u < 0)."""
        key = tuple(sorted((d, str(c)) for d, c in combo.items()))
        if key not in self.pres:
            self.pres[key] = (z3.Function(f"{self.tag}.pre{len(self.pres)}", z3.IntSort(), z3.RealSort()), combo)
        return z3.If(u < 0, z3.RealVal(0), self.pres[key][0](u))

    def axioms(self, points) -> list:
        """The prefix sums' defining equations at the positions ``points``."""
        out = []
        for P, combo in self.pres.values():
            out.append(P(0) == self.combo(combo, z3.IntVal(0)))
            for u in points:
                out.append(z3.Implies(u >= 1, P(u) == P(u - 1) + self.combo(combo, u)))
        return out


def direction_plan(model) -> dict:
    """RNN layer -> {direction: its value at position u as a function of the
    layer's input sequences (a :class:`_Stream`)}: what the CoT's design says
    each recurrent direction holds, written here from the design, not from the
    builder."""
    fetch = {IS_EOS: 1, AT_SIZE_RECORD: 1, AT_U_SIZE: 1}
    front = {"cnt": lambda st, u: z3.ToReal(u + 1), "cnt_sq": lambda st, u: z3.ToReal((u + 1) * (u + 1)),
             EOS_SEEN: lambda st, u: st.prefix({IS_EOS: 1}, u),
             "prev1_sq": lambda st, u: st.delay({"tok_sq": 1}, 1, u)}
    for k in range(1, 5):
        front[f"prev{k}"] = lambda st, u, k=k: st.delay({"tok": 1}, k, u)
    for flag, depth in ((IS_TILDE, 2), (IS_QUERY, 2), (IS_EOS, 1)):
        for k in range(1, depth + 1):
            front[delayed(flag, k)] = lambda st, u, flag=flag, k=k: st.delay({flag: 1}, k, u)
    counters = {JOINS: lambda st, u: st.prefix({AT_SIZE_RECORD: 1}, u),
                EDGE_MARKERS: lambda st, u: st.prefix({CHAIN_MARKER: 1, AT_SIZE_RECORD: -2}, u),
                delayed(CHAIN_MARKER, 1): lambda st, u: st.delay({CHAIN_MARKER: 1}, 1, u)}
    roles = {after_sv(k): (lambda st, u, k=k: st.delay({AT_V_SIZE: 1}, k, u)) for k in range(1, 8)}
    roles.update({delayed(CHILD_ROOT, 1): lambda st, u: st.delay({CHILD_ROOT: 1}, 1, u),
                  delayed(PARENT_ROOT, 2): lambda st, u: st.delay({PARENT_ROOT: 1}, 2, u),
                  delayed(PARENT_ROOT, 4): lambda st, u: st.delay({PARENT_ROOT: 1}, 4, u),
                  delayed(MERGED_SIZE, 5): lambda st, u: st.delay({"tok": 1, "prev2": 1, "one": -1}, 5, u),
                  # + 1 the step after each fetch, - 1 at each marker
                  IN_CHAIN: lambda st, u: st.prefix(fetch, u - 1) - st.prefix({CHAIN_MARKER: 1}, u)})
    return {0: front, 1: counters, 2: roles}


_DIRECTION_TEXT = {0: "cnt = t + 1, cnt_sq = (t + 1)^2, prev_k = tok(t - k), prev1_sq = tok_sq(t - 1), eos_seen = "
                      "the [EOS] so far, is_tilde@k, is_query@k, is_eos@1 the flags k back",
                   1: "joins = the size records so far, edge_markers = the markers so far - 2 per size record, "
                      "chain_marker@1 = chain_marker(t - 1)",
                   2: f"after_sv_k = {AT_V_SIZE}(t - k), child_root@1, parent_root@2, parent_root@4 delayed, "
                      "merged_size@5 = (tok + prev2 - 1)(t - 5), in_chain = the fetches before t - the markers to t"}


def _state_meaning(st: _Stream, m: tuple):
    """The invariant a state's gadget recorded (a hint: the induction must prove
    it from A and B, and the directions are then proved against the plan)."""
    if not m:
        return None
    if m[0] == "power":
        return lambda u, k=m[1]: z3.ToReal((u + 1) ** k)
    if m[0] == "delay":
        return lambda u, c=m[1], k=m[2]: st.delay(c, k, u)
    if m[0] == "prefix_sum":
        return lambda u, c=m[1]: st.prefix(c, u)
    return None


class TextStream(StreamOps):
    """A stream that spells a recurrence plan as text (:func:`plan_text`) and records
    the directions it reads."""

    def __init__(self):
        self.read: set = set()

    def x(self, d, u):
        self.read.add(d)
        return z3.Real(f"x.{d}({u})")

    def prefix(self, combo, u):
        self.read |= set(combo)
        return z3.Real(f"prefix.{sorted((d, str(c)) for d, c in combo.items())}({u})")


def plan_text(fns: dict) -> str:
    """One RNN layer's plan (direction -> its value as a function of the stream) as text."""
    st = TextStream()
    return repr({d: str(fn(st, z3.Int("u"))) for d, fn in fns.items()})


_PROVED: dict = {}
"""(tag, layer, labels, states, meanings, the plan, A, B, C) -> its facts: an RNN layer's
recurrence does not depend on N, so its proof is done once per process. The
facts' names do not name the model, so a model with the same key gets exactly
the facts (statements and queries) a proof of its own gives: the records do not
depend on which models a process proved before."""


def recurrence_facts(model, tag: str = "istree") -> list[dict]:
    """Each RNN layer's recurrence h_0 = B x_0, h_t = A h_(t-1) + B x_t, read off
    the built A, B, C, proved by induction on t for every input sequence (each
    direction the layer reads an arbitrary real sequence): each state number
    holds its invariant (its gadget's record, or the plan's value of the one
    direction it alone writes), and C h_t writes each direction the plan's value
    (:func:`direction_plan`) and nothing else."""
    spec = model.spec
    labels = list(spec.labels)
    want = direction_plan(model)
    out = []
    if len(spec.rnn_layers) != len(want):
        return [unmet("rnn.layers", "RNN", f"{len(want)} RNN layers", f"{len(spec.rnn_layers)}")]
    for li, L in enumerate(spec.rnn_layers):
        layer = f"RNN layer {li + 1}, recurrence"
        key = (tag, li, tuple(labels), tuple(L.state_labels), repr(L.state_meaning), plan_text(want[li]),
               *(repr(np.asarray(M).tolist()) for M in (L.A, L.B, L.C)))       # exact values (Fractions)
        if key in _PROVED:              # the same built A, B, C (and plan) as a model proved before: the same proof
            out += [dict(f) for f in _PROVED[key]]
            continue
        mark = len(out)
        st = _Stream(f"{tag}.rnn{li}")
        t = z3.Int(f"{tag}.rnn{li}.t")
        states = list(L.state_labels)
        x_at = lambda u: {lab: st.x(lab, u) for lab in labels}         # noqa: E731
        meaning = {}
        for s, lab in enumerate(states):
            meaning[lab] = _state_meaning(st, L.state_meaning[s] if L.state_meaning else ())
            if meaning[lab] is None:            # the plan's value of the one direction this state alone writes
                ds = [labels[d] for d in range(len(labels)) if L.C[d, s] != 0]
                if len(ds) == 1 and L.C[labels.index(ds[0]), s] == 1 and ds[0] in want[li] \
                        and sum(1 for r in range(len(states)) if L.C[labels.index(ds[0]), r] != 0) == 1:
                    meaning[lab] = lambda u, d=ds[0]: want[li][d](st, u)
        missing = [lab for lab, m in meaning.items() if m is None]
        if missing:
            out.append(unmet(f"rnn{li + 1}.invariant", layer, "an invariant for every state number",
                              f"none for {missing}"))
            continue

        def row(M, r, vals):
            return sum((z3_value(M[r, c]) * vals[c] for c in range(M.shape[1]) if M[r, c] != 0), z3.RealVal(0))
        xs0, xst = x_at(z3.IntVal(0)), x_at(t)
        bx0 = [xs0[lab] for lab in labels]
        bxt = [xst[lab] for lab in labels]
        prev = [meaning[lab](t - 1) for lab in states]
        base, step = [], []
        for s, lab in enumerate(states):
            base.append(row(L.B, s, bx0) == meaning[lab](z3.IntVal(0)))
            step.append(row(L.A, s, prev) + row(L.B, s, bxt) == meaning[lab](t))
        ax = st.axioms([t, t - 1, t - 2, z3.IntVal(0)])
        out.append(smt_fact(layer, f"rnn{li + 1}.base", f"h_0 = B x_0 gives every state number its invariant at t = 0 "
                         f"({len(states)} states; built A, B)", ax, z3.And(*base)))
        out.append(smt_fact(layer, f"rnn{li + 1}.step", "for every t >= 1 and every input sequence: the invariants at "
                         "t - 1 and h_t = A h_(t-1) + B x_t give the invariants at t (built A, B)",
                         ax + [t >= 1], z3.And(*step)))
        cur = [meaning[lab](t) for lab in states]
        written = {labels[d] for d in range(len(labels)) if any(L.C[d, s] != 0 for s in range(len(states)))}
        bad = sorted(written ^ set(want[li]))
        if bad:
            out.append(unmet(f"rnn{li + 1}.writes", layer, "C writes the planned directions only",
                              f"writes {sorted(written - set(want[li]))} unplanned, misses "
                              f"{sorted(set(want[li]) - written)}"))
        goals = [row(L.C, labels.index(d), cur) == fn(st, t) for d, fn in want[li].items() if d in written]
        out.append(smt_fact(layer, f"rnn{li + 1}.directions", f"for every t >= 0 and input sequence, C h_t writes "
                         f"{_DIRECTION_TEXT[li]} (built C)", st.axioms([t, t - 1, z3.IntVal(0)]) + [t >= 0],
                         z3.And(*goals)))
        _PROVED[key] = [dict(f) for f in out[mark:]]
    return out



# ----------------------------------------------------------------------------
# the RNN layers' MLPs


def _mlp_facts(model, li: int, what: str, ints: dict, hyps: list, plan_: list, tag: str) -> list[dict]:
    """RNN layer ``li``'s MLP read off the built W1, b1, W2, b2 against ``plan_``
    (:func:`mlp_plan_facts`)."""
    spec = model.spec
    layer = f"RNN layer {li + 1}, MLP: {what}"
    if len(spec.rnn_layers) <= li:
        return [unmet(f"{tag}.layer", layer, f"an RNN layer {li + 1}", f"{len(spec.rnn_layers)} RNN layers")]
    return mlp_plan_facts(spec.rnn_layers[li], list(spec.labels), layer, tag, ints, hyps, plan_, f"; {_HYPS[tag]}")


def mlp_plan_facts(L, labels: list, layer: str, tag: str, ints: dict, hyps: list, plan_: list,
                   given: str) -> list[dict]:
    """The MLP of layer ``L`` read off its built W1, b1, W2, b2 against ``plan_``:
    [(fact, extra hypotheses, direction, its planned value, text)], with the
    inputs ``ints`` (z3 Ints by direction) under ``hyps`` (``given`` says them in
    the statements); it writes the planned directions and nothing else."""
    out = writes_only(L, labels, {d for _, _, d, _, _ in plan_}, f"{tag}.writes", layer)
    x = {lab: z3.ToReal(v) for lab, v in ints.items()}
    x["one"] = z3.RealVal(1)
    try:
        after = mlp_out(L, labels, x)
    except ValueError as e:
        return out + [unmet(f"{tag}.read", layer, "the MLP's inputs", str(e))]
    for fact, extra, d, want, text in plan_:
        if d not in labels:
            out.append(unmet(f"{tag}.{fact}", layer, text, f"no direction {d}"))
            continue
        stmt = f"{text} (read off the built W1, b1, W2, b2{given})"
        out.append(smt_fact(layer, f"{tag}.{fact}", stmt, hyps + extra, after(d) - x.get(d, 0) == want))
    return out


_HYPS = {"records": "0/1 token flags and their delays, eos_seen in {0, 1} counting the [EOS] seen, codes in the "
                    "vocabulary's range, prev1_sq = prev1^2",
         "counters": "chain_marker@1 in {0, 1}, edge_markers in {0, 1, 2} and >= 1 right after a marker, joins an "
                     "integer >= 0, u_smaller in {0, 1}, codes in the vocabulary's range"}


RECORD_INPUTS = (IS_DASH, delayed(IS_TILDE, 2), delayed(IS_QUERY, 2), IS_EOS, delayed(IS_EOS, 1), EOS_SEEN, "tok",
                 "prev1", "prev2", "prev3", "prev1_sq")
"""The directions RNN layer 1's MLP reads (:func:`record_plan`)."""


def record_hyps(v: dict, lo, hi) -> list:
    """The domain RNN layer 1's MLP is proved on (``v``: its inputs as z3 Int terms)."""
    flags = (IS_DASH, delayed(IS_TILDE, 2), delayed(IS_QUERY, 2), IS_EOS, delayed(IS_EOS, 1), EOS_SEEN)
    hyps = [z3.Or(v[f] == 0, v[f] == 1) for f in flags]
    hyps += [v[EOS_SEEN] >= v[IS_EOS] + v[delayed(IS_EOS, 1)]]     # the latch counts them: at most one [EOS]
    return hyps + [z3.And(v[c] >= lo, v[c] <= hi) for c in ("tok", "prev1", "prev2", "prev3")] + \
        [v["prev1_sq"] == v["prev1"] * v["prev1"]]


def record_plan(v: dict) -> list:
    """[(fact, extra hypotheses, direction, its planned value, text)]: what RNN
    layer 1's MLP writes, as a function of its inputs ``v`` (z3 Int terms): the
    fact proves it of the built MLP on :func:`record_hyps`, the composition
    (checks/certify/istree_hybrid_chain.py) uses it on the CoT's values."""
    e2 = z3.And(v[EOS_SEEN] == 1, v[IS_EOS] == 0, v[delayed(IS_EOS, 1)] == 0)    # [EOS] two or more tokens back
    parent, size = z3.And(v[delayed(IS_TILDE, 2)] == 1, e2), z3.And(v[delayed(IS_QUERY, 2)] == 1, e2)
    p1, p1sq = z3.ToReal(v["prev1"]), z3.ToReal(v["prev1_sq"])
    plan_ = [(CHAIN_MARKER, [], CHAIN_MARKER, indicator(z3.And(v[IS_DASH] == 1, v[EOS_SEEN] == 1)),
              "chain_marker = [a '-' after [EOS]]"),
             (AT_PARENT_RECORD, [], AT_PARENT_RECORD, indicator(parent),
              "at_parent_record = ['~' two back and [EOS] two or more back]: the p of '~ c p'"),
             (AT_SIZE_RECORD, [], AT_SIZE_RECORD, indicator(size),
              "at_size_record = ['[QUERY]' two back and [EOS] two or more back]: the s of '[QUERY] p s'"),
             (U_SMALLER, [], U_SMALLER, indicator(v["prev2"] >= v["tok"]),
              f"{U_SMALLER} = [tok <= prev2] (s_u <= s_v)"),
             (ROOTS_EQUAL, [], ROOTS_EQUAL, indicator(v["tok"] == v["prev3"]), "roots_equal = [tok = prev3]")]
    for key, at, rec in ((PARENT_KEY, parent, "a parent record"), (SIZE_KEY, size, "a size record")):
        plan_ += [(f"{key}.on", [at, v["prev1"] >= 0], key, p1, f"at {rec} (prev1 >= 0, a vertex's code): {key} = prev1"),
                  (f"{key}.off", [z3.Not(at)], key, z3.RealVal(0), f"off {rec}: {key} = 0"),
                  (f"{squared(key)}.on", [at], squared(key), p1sq, f"at {rec}: {squared(key)} = prev1^2"),
                  (f"{squared(key)}.off", [z3.Not(at)], squared(key), z3.RealVal(0), f"off {rec}: {squared(key)} = 0")]
    return plan_


def record_facts(model, N: int, tag: str = "istree") -> list[dict]:
    """RNN layer 1's MLP: where the position sits in a record of the CoT (after
    [EOS]: "~ c p" and "[QUERY] p s") and the keys the parent and size heads read."""
    lo, hi = cot_code_range(N)
    name = f"{tag}.{_key_of(model)}.rec"
    ints = {lab: z3.Int(f"{name}.{lab}") for lab in RECORD_INPUTS}
    return _mlp_facts(model, 0, "records and keys", ints, record_hyps(ints, lo, hi), record_plan(ints), "records")


COUNTER_INPUTS = (delayed(CHAIN_MARKER, 1), EDGE_MARKERS, JOINS, U_SMALLER, "prev1", "prev4")
"""The directions RNN layer 2's MLP reads (:func:`counter_plan`)."""


def counter_hyps(v: dict, lo, hi) -> list:
    """The domain RNN layer 2's MLP is proved on."""
    return [z3.Or(v[delayed(CHAIN_MARKER, 1)] == 0, v[delayed(CHAIN_MARKER, 1)] == 1), v[EDGE_MARKERS] >= 0,
            v[EDGE_MARKERS] <= 2, z3.Implies(v[delayed(CHAIN_MARKER, 1)] == 1, v[EDGE_MARKERS] >= 1),
            v[JOINS] >= 0, z3.Or(v[U_SMALLER] == 0, v[U_SMALLER] == 1)] + \
        [z3.And(v[c] >= lo, v[c] <= hi) for c in ("prev1", "prev4")]


def counter_plan(v: dict, N) -> list:
    """What RNN layer 2's MLP writes (as :func:`record_plan`), N the model's vertex
    count (an int, or a z3 term in the composition)."""
    after_marker = v[delayed(CHAIN_MARKER, 1)] == 1
    u = v[U_SMALLER] == 1
    return [(AT_U_SIZE, [], AT_U_SIZE, indicator(z3.And(after_marker, v[EDGE_MARKERS] == 1)),
             f"{AT_U_SIZE} = [right after the edge's first marker]"),
            (AT_V_SIZE, [], AT_V_SIZE, indicator(z3.And(after_marker, v[EDGE_MARKERS] == 2)),
             f"{AT_V_SIZE} = [right after the edge's second marker]"),
            (JOINS_OK, [], JOINS_OK, indicator(v[JOINS] == N - 1), f"joins_ok = [joins = N - 1 = {N - 1}]"),
            (CHILD_ROOT, [], CHILD_ROOT, z3.ToReal(z3.If(u, v["prev1"], v["prev4"])),
             "child_root = prev1 (r_u) if u_smaller else prev4 (r_v)"),
            (PARENT_ROOT, [], PARENT_ROOT, z3.ToReal(z3.If(u, v["prev4"], v["prev1"])),
             "parent_root = prev4 (r_v) if u_smaller else prev1 (r_u)")]


def counter_facts(model, N: int, tag: str = "istree") -> list[dict]:
    """RNN layer 2's MLP: the roles right after the u- and v-side markers, [joins
    = N - 1] (a tree on N vertices has N - 1 edges) and the child and parent
    roots of a union."""
    lo, hi = cot_code_range(N)
    name = f"{tag}.{_key_of(model)}.cnt"
    ints = {lab: z3.Int(f"{name}.{lab}") for lab in COUNTER_INPUTS}
    hyps, plan_ = counter_hyps(ints, lo, hi), counter_plan(ints, N)
    out = _mlp_facts(model, 1, "roles after the markers, joins_ok, the union's roots", ints, hyps, plan_, "counters")
    if len(model.spec.rnn_layers) > 2:      # RNN layer 3 (the delayed roles) has no MLP
        L = model.spec.rnn_layers[2]
        bad = writes_only(L, list(model.spec.labels), set(), "roles.no_mlp", "RNN layer 3, MLP")
        out += bad or [{"fact": "roles.no_mlp", "layer": "RNN layer 3, MLP", "method": "exact",
                        "statement": "RNN layer 3 (the delayed roles) has no MLP: it writes nothing", "answer": "holds"}]
    return out



# ----------------------------------------------------------------------------
# the heads of the attention layer
_FETCH_QUERY = {JOINS: 3, EDGE_MARKERS: 2, "one": 2}


def plan() -> dict:
    """head name -> (kind, its arguments, copy: target direction -> the key's combo).
    kinds: ("position", query combo) the key with cnt = the query; ("match",
    query direction, its square, key direction, its square) the latest key whose
    key equals the query, else [BOS]; ("latest", flag) the latest flagged key."""
    return {
        FETCH_HEAD: ("position", (_FETCH_QUERY,), {FETCHED_TOKEN: {"tok": 1}}),
        PARENT_HEAD: ("match", ("tok", "tok_sq", PARENT_KEY, PARENT_KEY_SQ),
                   {PARENT_TOKEN: {"tok": 1}, PARENT_FOUND: {AT_PARENT_RECORD: 1}}),
        # no size record: the root is a single vertex, size 1, whose code is 2 = tau([BOS]) + 2
        SIZE_HEAD: ("match", ("prev1", "prev1_sq", SIZE_KEY, SIZE_KEY_SQ), {ROOT_SIZE: {"tok": 1, IS_BOS: 2}}),
        LAST_SU_HEAD: ("latest", (AT_U_SIZE,), {LATEST_SU: {"tok": 1}, LATEST_RU: {"prev2": 1}}),
    }


def _key(j, **free) -> dict:
    """The key side at position j (a z3 Int): the clock's cnt = j + 1, cnt_sq =
    (j + 1)^2, the embedding's is_bos = [j = 0], and the head's own ``free`` values."""
    c = z3.ToReal(j + 1)
    return {"cnt": c, "cnt_sq": c * c, IS_BOS: z3.If(j == 0, z3.RealVal(1), z3.RealVal(0)), **free}


def _position_facts(score: HeadScore, query: dict, s: int, P: int, layer: str) -> list[dict]:
    j, i = z3.Ints(f"{score.tag}.j {score.tag}.i")
    Q = query_combo(score, query)
    hyps = [j >= 0, j < P, i >= 0, i < P, i != j, j + 1 == Q]
    stmt = (f"at every query and every pair of key positions in 0..{P - 1} (the model's positions): the key "
            f"with cnt = {show_combo(query)} scores at least {s} (sharpness(f)) above every other key (score read "
            f"off the built W_Q, W_K; cnt = j + 1, the clock's; is_bos = [j = 0])")
    return [smt_fact(layer, f"{score.head.name}.one_hot", stmt, hyps, score(j, _key(j)) - score(i, _key(i)) >= s)]


def _match_facts(score: HeadScore, dirs: tuple, s: int, P: int, layer: str) -> list[dict]:
    """The four cases of a latest-match head with the [BOS] fallback."""
    qd, qsq, kd, ksq = dirs
    tag = score.tag
    q = score.var(qd)
    hyps = [score.var(qsq) == q * q] if qsq in score.spec.labels else []
    j, i = z3.Ints(f"{tag}.j {tag}.i")
    kj, ki = z3.Ints(f"{tag}.kj {tag}.ki")

    def key(p, k):
        r = z3.ToReal(z3.If(p == 0, 0, k))      # [BOS] holds 0 in the key direction (its gate is off)
        return _key(p, **{kd: r, ksq: r * r})
    sj, si = score(j, key(j, kj)), score(i, key(i, ki))
    rng = hyps + [j >= 0, j < P, i >= 0, i < P, i != j]
    match_j, match_i = z3.And(j >= 1, kj == q), z3.And(i >= 1, ki == q)
    cases = [("match_beats_non_match", [match_j, i >= 1, ki != q],
              f"a key j >= 1 with {kd} = {qd} beats every key i >= 1 with {kd} != {qd}"),
             ("latest_match", [match_j, match_i, j > i], f"of two keys with {kd} = {qd} the later wins"),
             ("match_beats_bos", [match_j, i == 0], f"a key j >= 1 with {kd} = {qd} beats [BOS]"),
             ("bos_beats_non_match", [j == 0, i >= 1, ki != q], f"[BOS] beats every key i >= 1 with {kd} != {qd}")]
    out = []
    for name, extra, what in cases:
        stmt = (f"for every integer {qd} (with {qsq} = {qd}^2) and keys at positions j in 0..{P - 1} (cnt = "
                f"j + 1, is_bos = [j = 0]): {what}, by at least {s} (sharpness(f)); {kd}_j integer with {ksq} = "
                f"{kd}^2, 0 at [BOS] (score read off the built W_Q, W_K)")
        out.append(smt_fact(layer, f"{score.head.name}.{name}", stmt, rng + extra, sj - si >= s))
    return out


def _latest_facts(score: HeadScore, flag: str, s: int, P: int, layer: str) -> list[dict]:
    tag = score.tag
    j, i = z3.Ints(f"{tag}.j {tag}.i")
    fj, fi = z3.Ints(f"{tag}.fj {tag}.fi")
    sj = score(j, _key(j, **{flag: z3.ToReal(fj)}))
    si = score(i, _key(i, **{flag: z3.ToReal(fi)}))
    rng = [j >= 0, j < P, i >= 0, i < P, i != j, z3.Or(fj == 0, fj == 1), z3.Or(fi == 0, fi == 1)]
    cases = [("flag_beats_no_flag", [fj == 1, fi == 0], f"a key with {flag} = 1 beats every key with {flag} = 0"),
             ("latest_flagged", [fj == 1, fi == 1, j > i], f"of two keys with {flag} = 1 the later wins"),
             ("latest_unflagged", [fj == 0, fi == 0, j > i],
              f"of two keys with {flag} = 0 the later wins (no flag yet: the latest key)")]
    out = []
    for name, extra, what in cases:
        stmt = (f"at every query and keys at positions j in 0..{P - 1} (cnt = j + 1, is_bos = [j = 0]): {what}, "
                f"by at least {s} (sharpness(f)); score read off the built W_Q, W_K")
        out.append(smt_fact(layer, f"{score.head.name}.{name}", stmt, rng + extra, sj - si >= s))
    return out


def head_facts(model, tag: str = "istree") -> list[dict]:
    """One proof record per planned head (its score read off W_Q, W_K), its copy,
    and a failed step per head missing, unplanned, built twice or outside the one
    attention layer."""
    spec = model.spec
    s = sharpness(model.fmt.frac_bits)
    P = model.max_positions
    out = []
    if len(spec.attn_layers) != 1:
        out.append(unmet("heads.layers", "attention", "one attention layer",
                          f"{len(spec.attn_layers)} attention layers"))

    def prove(li, h, entry, layer):
        kind, args, copy = entry
        score = HeadScore(spec, h, f"{tag}.{_key_of(model)}.{h.name}")
        try:
            got = (_position_facts(score, args[0], s, P, layer) if kind == "position" else
                   _match_facts(score, args, s, P, layer) if kind == "match" else
                   _latest_facts(score, args[0], s, P, layer))
        except ValueError as e:
            got = [unmet(f"{h.name}.read", layer, "the score's directions", str(e))]
        return got + [copy_fact(spec, h, copy, layer)]
    return out + planned_heads(spec, plan(), lambda e: None, prove)



# ----------------------------------------------------------------------------
# the attention layer's MLP: the next token's code in each role
_ROLE_FLAGS = (IN_CHAIN, CHAIN_MARKER, AT_V_SIZE) + tuple(after_sv(k) for k in range(1, 8))
_FETCH_FLAGS = (IS_EOS, AT_SIZE_RECORD, AT_U_SIZE)
OTHER_FLAGS = (JOINS_OK, PARENT_FOUND, ROOTS_EQUAL)
VALUES = (FETCHED_TOKEN, PARENT_TOKEN, ROOT_SIZE, LATEST_SU, LATEST_RU, delayed(CHILD_ROOT, 1),
           delayed(PARENT_ROOT, 2), delayed(PARENT_ROOT, 4))


def cot_code_range(N: int) -> tuple[int, int]:
    """(lowest, highest) code of a token the CoT for N vertices reads or writes,
    from the task, not from the built vocabulary: the specials [BOS], [EOS],
    [TRUE], [FALSE], -, ~, [QUERY] (codes -9..0), the vertices 0..N - 1 (codes
    1..N) and a root's size 1..N (codes 2..N + 1); every code between is one of
    those or another special's."""
    return min(token_code(t) for t in (BOS, EOS, TRUE, FALSE, DASH, TILDE, QUERY)), N + 1


def _vocab_codes(model) -> list[int]:
    voc = model.vocab
    return sorted(token_code(t) for t in range(voc.size) if voc.contains(t))


def vocabulary_facts(model, N: int) -> list[dict]:
    """The built vocabulary holds a token of every code of :func:`cot_code_range` (the
    readout can emit every code the CoT needs)."""
    lo, hi = cot_code_range(N)
    have = set(_vocab_codes(model))
    missing = [c for c in range(lo, hi + 1) if c not in have]
    return [{"fact": "readout.vocabulary", "layer": "readout", "method": "exact",
             "statement": f"the vocabulary has a token of every code {lo}..{hi} (specials, vertices 0..N - 1, "
                          f"sizes 1..N; N = {N})", "answer": "holds" if not missing else "sat",
             **({"counterexample": f"no token of code {missing[:6]}"} if missing else {})}]


def role_plan() -> list[tuple[str, dict, str, object]]:
    """The CoT's roles: (name, the flags that hold besides the role's own, text,
    next_code as a function of the values v). The role flags are one-hot; the
    fetch role is one of is_eos, at_size_record, at_u_size."""
    c = lambda tok: z3.RealVal(token_code(tok))        # noqa: E731
    return [
        ("fetch.vertex", {"fetch": 1}, "a fetch of a vertex (fetched_token >= 1): the fetched token",
         lambda v: v[FETCHED_TOKEN]),
        ("fetch.eos_tree", {"fetch": 1, JOINS_OK: 1}, "a fetch of [EOS] with joins_ok: [TRUE]", lambda v: c(TRUE)),
        ("fetch.eos_not_tree", {"fetch": 1, JOINS_OK: 0}, "a fetch of [EOS] without joins_ok: [FALSE]",
         lambda v: c(FALSE)),
        ("chain.parent", {IN_CHAIN: 1, PARENT_FOUND: 1}, "in a chain, a parent record found: the parent",
         lambda v: v[PARENT_TOKEN]),
        ("chain.root", {IN_CHAIN: 1, PARENT_FOUND: 0}, "in a chain, no parent record: the marker -",
         lambda v: c(DASH)),
        ("marker", {CHAIN_MARKER: 1}, "at the marker: the root's size", lambda v: v[ROOT_SIZE]),
        ("after_v_marker", {AT_V_SIZE: 1}, "after s_v: r_u again", lambda v: v[LATEST_RU]),
        ("after_sv1.cycle", {after_sv(1): 1, ROOTS_EQUAL: 1}, "r_u = r_v: [FALSE] (a cycle)", lambda v: c(FALSE)),
        ("after_sv1.union", {after_sv(1): 1, ROOTS_EQUAL: 0}, "r_u != r_v: s_u again", lambda v: v[LATEST_SU]),
        ("after_sv2", {after_sv(2): 1}, "the union record's ~", lambda v: c(TILDE)),
        ("after_sv3", {after_sv(3): 1}, "the child root", lambda v: v[delayed(CHILD_ROOT, 1)]),
        ("after_sv4", {after_sv(4): 1}, "the parent root", lambda v: v[delayed(PARENT_ROOT, 2)]),
        ("after_sv5", {after_sv(5): 1}, "[QUERY]", lambda v: c(QUERY)),
        ("after_sv6", {after_sv(6): 1}, "the parent root again", lambda v: v[delayed(PARENT_ROOT, 4)]),
        ("after_sv7", {after_sv(7): 1}, "the merged root's size s_u + s_v",
         lambda v: v[delayed(MERGED_SIZE, 5)]),
    ]


# the value a role emits, which must be a code of a number token (>= 1) for the role to emit it
_EMITS = {"fetch.vertex": FETCHED_TOKEN, "chain.parent": PARENT_TOKEN, "marker": ROOT_SIZE,
          "after_v_marker": LATEST_RU, "after_sv1.union": LATEST_SU, "after_sv3": delayed(CHILD_ROOT, 1),
          "after_sv4": delayed(PARENT_ROOT, 2), "after_sv6": delayed(PARENT_ROOT, 4),
          "after_sv7": delayed(MERGED_SIZE, 5)}


def next_code_facts(model, N: int, tag: str = "istree") -> list[dict]:
    """The attention layer's MLP read off the built W1, b1, W2, b2: in each role
    of :func:`role_plan` (one-hot role flags, 0/1 flags, every value an integer
    code of the vocabulary: merged_size@5 a sum of two codes minus 1, and the
    value the role emits a number's code >= 1, or [EOS]'s at a fetch of [EOS]),
    it writes the planned next_code, and nothing else."""
    spec = model.spec
    labels = list(spec.labels)
    layer = "attention layer 1, MLP: the next code"
    if len(spec.attn_layers) != 1:
        return [unmet("next.layer", layer, "one attention layer", f"{len(spec.attn_layers)}")]
    L = spec.attn_layers[0]
    out = writes_only(L, labels, {NEXT_CODE}, "next.writes", layer)
    lo, hi = cot_code_range(N)
    name = f"{tag}.{_key_of(model)}.next"
    ints = {lab: z3.Int(f"{name}.{lab}") for lab in NEXT_INPUTS}
    x = {lab: z3.Real(f"{name}.x.{lab}") for lab in labels}
    x.update({lab: z3.ToReal(v) for lab, v in ints.items()})
    x["one"] = z3.RealVal(1)
    hyps, cases = next_domain(ints, lo, hi)
    try:
        after = mlp_out(L, labels, x)
    except ValueError as e:
        return out + [unmet("next.read", layer, "the MLP's inputs", str(e))]
    if NEXT_CODE not in labels:
        return out + [unmet("next.direction", layer, "a direction next_code", "none")]
    got = after(NEXT_CODE) - x[NEXT_CODE]
    v = {lab: x[lab] for lab in VALUES + (delayed(MERGED_SIZE, 5),)}
    for role, text, case, want in cases:
        stmt = (f"{text}: the MLP writes next_code = {_want_text(role)}, for every value of its inputs "
                f"(codes in {lo}..{hi}; read off the built W1, b1, W2, b2)")
        out.append(smt_fact(layer, f"next.{role}", stmt, hyps + case, got == want(v)))
    return out


NEXT_INPUTS = _ROLE_FLAGS + _FETCH_FLAGS + OTHER_FLAGS + VALUES + (delayed(MERGED_SIZE, 5),)
"""The directions the attention layer's MLP reads (:func:`next_domain`)."""


def next_domain(ints: dict, lo, hi) -> tuple[list, list]:
    """(the domain the attention layer's MLP is proved on, its cases [(role, text,
    the case's conditions, next_code as a function of the values)]), on its
    inputs ``ints`` (z3 Int terms; :func:`role_plan`)."""
    fetch = sum((ints[f] for f in _FETCH_FLAGS), z3.IntVal(0))
    hyps = [z3.Or(ints[f] == 0, ints[f] == 1) for f in _ROLE_FLAGS + _FETCH_FLAGS + OTHER_FLAGS]
    hyps += [fetch + sum((ints[f] for f in _ROLE_FLAGS), z3.IntVal(0)) == 1]
    hyps += [z3.And(ints[v] >= lo, ints[v] <= hi) for v in VALUES]
    hyps += [ints[delayed(MERGED_SIZE, 5)] >= 2 * lo - 1, ints[delayed(MERGED_SIZE, 5)] <= 2 * hi - 1]
    cases = []
    for role, flags, text, want in role_plan():
        case = []
        for f, val in flags.items():
            case.append((fetch if f == "fetch" else ints[f]) == val)
        if role in _EMITS:
            case.append(ints[_EMITS[role]] >= 1)
            case.append(ints[_EMITS[role]] <= hi)
        elif role.startswith("fetch.eos"):
            case.append(ints[FETCHED_TOKEN] == token_code(EOS))
        cases.append((role, text, case, want))
    return hyps, cases


def _want_text(role: str) -> str:
    return _EMITS.get(role, {"fetch.eos_tree": "code([TRUE])", "fetch.eos_not_tree": "code([FALSE])",
                             "chain.root": "code(-)", "after_sv1.cycle": "code([FALSE])",
                             "after_sv2": "code(~)", "after_sv5": "code([QUERY])"}.get(role, "?"))



# ----------------------------------------------------------------------------
# the readout, and the certificate
def readout_facts(model, N: int, tag: str = "istree") -> list[dict]:
    """The readout emits the token of code next_code, over every code of the
    vocabulary (what its argmax ranges over), and that vocabulary has every code
    the CoT needs."""
    codes = _vocab_codes(model)
    if codes != list(range(codes[0], codes[-1] + 1)):
        return [unmet("readout.codes", "readout", "the vocabulary's codes are consecutive",
                       f"gaps in {codes[0]}..{codes[-1]}")]
    return vocabulary_facts(model, N) + nearest_readout_facts(model.spec, codes[0], codes[-1],
                                                              f"{tag}.{_key_of(model)}")


def facts(model, N: int) -> list[dict]:
    """Every fact of the hybrid built for N vertices, in the order of its layers."""

    def rank(f):
        m = re.match(r"RNN layer (\d+), (recurrence|MLP)", f["layer"])
        if m:
            return 10 * int(m.group(1)) + (m.group(2) == "MLP")
        return {"embedding": 0, "readout": 200}.get(f["layer"], 100 + ("MLP" in f["layer"]))
    return sorted(embedding_facts(model) + recurrence_facts(model) + record_facts(model, N)
                  + counter_facts(model, N) + head_facts(model) + next_code_facts(model, N)
                  + readout_facts(model, N), key=rank)


CHAIN_LABEL = "istree-hybrid(every N)"
"""The label of the composition's facts (checks/certify/istree_hybrid_chain.py): they
are symbolic in N and read the plans, not one model."""


def label(model) -> str:
    """istree-hybrid(N=6, m_max=5): the model's sizes (its name gives N only)."""
    return f"istree-hybrid(N={model.spec.notes['N']}, m_max={model.spec.notes['m_max']})"


def _key_of(model) -> str:
    return f"N{model.spec.notes['N']}m{model.spec.notes['m_max']}"


EVERY = f"every N in 1..323, m_max = N, N - 1; every N in 4..{DENSE_MAX}, m_max = N(N - 1)/2"


