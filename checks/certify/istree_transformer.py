"""The IsTree Transformer (claim T4.7-up), every layer on its own, proved from the BUILT model.

The DFS-tour Transformer (constructions/models/istree.py ``istree_transformer``) writes
the tour as its CoT, so its whole-model certificate is an induction over the
tour: checks/certify/istree_transformer_chain.py (``--full``; the row:
checks/certify/rows.py). This module proves each layer on its own, read off the built
weights for the sizes of :data:`NS`, against a plan written here from the tour's
design, never from the builder's constants: the embedding's directions; each
head's score (shift, first-max and match heads attend what the plan says, each
case by at least sharpness(f)) and copy; each MLP's planned values; the readout.
Each fact states its hypotheses (flags, code ranges, squares, edge ids, ...),
which the chain discharges. The facts use exact arithmetic; the format's ranges
are other rows' claims.

Details (each layer, the hypotheses): docs/internals/certify.md#istree_transformer
"""
from __future__ import annotations

import re

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.build.num import sharpness
from rnngap.constructions.machine.vocab import BOS, COUNT, DASH, EOS, FALSE, NUMBER_BASE, TILDE, TRUE, token_code

from .layer_facts import (
    copy_fact, HeadScore, indicator, nearest_readout_facts, planned_heads, query_combo, show_combo, smt_fact,
    unmet, z3_value,
)
from . import istree_hybrid
from .sizes import z3

NAME = "istree-transformer[layers]"
CLAIM = "T4.7-up"
NS = ((7, 6),)
"""(N vertices, M edges) of the models ``rnngap certify`` proves by default: the
hub gadget's at n = 4 bits (N = n + 3, M = n + 2), a model the quick profile runs."""
NS_FULL = tuple(sorted({(n + 3, n + 2) for n in range(1, 65)} | {(259, 258)}
                       | {(N, N * (N - 1) // 2) for N in range(1, 7)}))
"""``--full``: the hub gadget's models at every n up to 64 and at 256, and the
models of every simple graph on 1 to 6 vertices (M = N (N - 1) / 2): the
models of the quick profile's reduction and small-graph runs, and more."""
EVERY = "the hub gadget's (n + 3, n + 2) for n = 1..64, 256; (N, N (N - 1) / 2) for N = 1..6"
COVERS = ("embedding", "heads", "mlps", "readout")
NOTE = ("the IsTree Transformer, every layer on its own, at the sizes proved (by default the hub gadget's model at n = "
        "4 bits, (N, M) = (7, 6); --full: the hub gadget's models to n = 64 and at 256, and the models of every simple "
        "graph on 1 to 6 vertices; checks/certify/istree_transformer.py), read off the built weights: the embedding; each head's score attends the plan's "
        "key (the shifts, the first [EOS], the vertex count, the pred pointers, the parent, the edge {u, p}, the "
        "next and hop lookups, visited; at most one match where the plan has no tie-break: its promise) by "
        "sharpness(f), W_O W_V copies the plan's values; each MLP (position "
        "types, pred maxima and e_prev, next_is_parent, the neighbour w, the output code in each case); the readout "
        "emits out. With --full also the composition (checks/certify/istree_transformer_chain.py: an induction over the tour the "
        "model writes, for every N, discharging each layer's stated hypotheses; exact arithmetic); not in the "
        "default run")


def _v(q: str, k: str, q_sq: dict | None = None) -> tuple:
    """A vertex component: the query's code ``q`` (its square ``q_sq``, default
    ``q``_sq) equals the key's code ``k`` (its square k_sq)."""
    return ({q: 1}, q_sq or {f"{q}_sq": 1}, k, f"{k}_sq")


def plan() -> dict:
    """head name -> (layer, kind, arguments, copy).

    kinds: ("shift", k): the key max(t - k, 0); ("first_max", key combo, its
    range: "flag" 0..1 or "code" -V..V): the first key with the largest value; ("match",
    components, flags, tie-break): the key whose components equal the query's
    and whose flags are 1 (first / latest / at most one), else [BOS]."""
    FOUND = {"one": 1, "is_bos": -1}
    prev_id = {"pos": 1, "one": -3, "is_bos": 3}
    prev_id_sq = {"pos_sq": 1, "pos": -6, "one": 9, "is_bos": -9}
    out = {}
    for k in (1, 2, 3, 5):
        copy = {f"back{k}": {"tok": 1}, f"back{k}_sq": {"tok_sq": 1}}
        if k == 1:
            copy.update({"is_record": {"is_dash": 1, "is_tilde": 1}, "is_count_value": {"is_count": 1}})
        out[f"shift{k}"] = (0, "shift", (k,), copy)
    out["first-eos"] = (0, "first_max", ({"is_eos": 1}, "flag"), {"after_eos": {"is_eos": 1}, "prompt_end": {"pos": 1}})
    for end, q in (("u", "back2"), ("v", "tok")):
        for side, key in (("first", "back5"), ("second", "back3")):
            pred = f"pred_{end}_via_{side}"
            out[f"pred-{end}-{side}"] = (1, "match", ([_v(q, key)], ["is_record"], "last"),
                                         {pred: prev_id, f"{pred}_sq": prev_id_sq})
    out["parent"] = (1, "match", ([_v("tok", "tok")], ["after_eos"], "first"), {"parent": {"back1": 1}})
    out["edge-u-first"] = (1, "match", ([_v("tok", "back2"), _v("back1", "tok")], ["is_record"], None),
                           {"edge_u_first": {"pos": 1}, "edge_u_first_sq": {"pos_sq": 1}})
    out["edge-u-second"] = (1, "match", ([_v("back1", "back2"), _v("tok", "tok")], ["is_record"], None),
                            {"edge_u_second": {"pos": 1}, "edge_u_second_sq": {"pos_sq": 1}})
    count = {"tok": 1, "is_bos": 1, "is_count_value": -1}
    out["vertex-count"] = (1, "first_max", (count, "code"), {"vertex_count": count})   # -31 at [COUNT] .. N
    for name, layer, edge, edge_sq, outs in (
            ("next", 2, {"e_prev": 1}, {"e_prev_sq": 1},
             lambda side, other: {f"next_{side}": {other: 1}, f"next_{side}_sq": {f"{other}_sq": 1},
                                  f"next_edge_{side}": {"pos": 1}, f"next_edge_{side}_sq": {"pos_sq": 1},
                                  f"found_{side}": FOUND}),
            ("hop", 3, {"next_edge_first": 1, "next_edge_second": 1}, {"next_edge_first_sq": 1, "next_edge_second_sq": 1},
             lambda side, other: {f"hop_{side}": {other: 1}, f"hop_{side}_sq": {f"{other}_sq": 1},
                                  f"hop_found_{side}": FOUND})):
        for side, (u_key, pred, other) in (("first", ("back2", "pred_u", "tok")),
                                           ("second", ("tok", "pred_v", "back2"))):
            comps = [_v("tok", u_key), (edge, edge_sq, pred, f"{pred}_sq")]
            out[f"{name}-{side}"] = (layer, "match", (comps, ["is_record"], None), outs(side, other))
    out["visited"] = (4, "match", ([_v("w", "tok")], ["after_eos"], "first"), {"visited": FOUND})
    return out


def _key(p, free: dict) -> dict:
    """The key side at position p: is_bos = [p = 0] and the ``free`` values (each
    0 at [BOS]); pos, pos^2 and 1 come from the embedding (:class:`HeadScore`)."""
    zero = z3.RealVal(0)
    out = {lab: z3.If(p == 0, zero, v) for lab, v in free.items()}
    out["is_bos"] = z3.If(p == 0, z3.RealVal(1), zero)
    return out


def _shift_facts(score: HeadScore, k: int, s: int, T: int, layer: str) -> list[dict]:
    t = score.var("pos")
    j = z3.Int(f"{score.tag}.j")
    tgt = z3.If(t - k >= 0, t - k, 0)
    hyps = [t >= 0, t <= T - 1, j >= 0, j <= t, j != tgt]
    stmt = (f"at every query position t in 0..{T - 1}: the key max(t - {k}, 0) scores at least {s} (sharpness(f)) "
            f"above every other key j in 0..t (score read off the built W_Q, W_K and the embedding)")
    return [smt_fact(layer, f"{score.head.name}.one_hot", stmt, hyps, score(tgt, _key(tgt, {})) - score(j, _key(j, {}))
                  >= s)]


def _combo_at(combo: dict, vals: dict):
    """The combination's value, its coefficients exact (a fraction is not truncated)."""
    return sum((z3_value(c) * vals[d] for d, c in combo.items()), z3.RealVal(0))


def _first_max_facts(score: HeadScore, key: dict, lo: int, top: int, s: int, T: int, layer: str) -> list[dict]:
    """Of two keys, the larger value of ``key`` wins, and of equal values the earlier."""
    tag = score.tag
    j, i = z3.Ints(f"{tag}.j {tag}.i")
    dirs = [d for d in key if d not in ("is_bos", "one")]
    fj = {d: z3.ToReal(z3.Int(f"{tag}.j.{d}")) for d in dirs}
    fi = {d: z3.ToReal(z3.Int(f"{tag}.i.{d}")) for d in dirs}
    kj, ki = _key(j, fj), _key(i, fi)
    vj, vi = _combo_at(key, {**kj, "one": z3.RealVal(1)}), _combo_at(key, {**ki, "one": z3.RealVal(1)})
    rng = [j >= 0, j < T, i >= 0, i < T, i != j, vj >= lo, vj <= top, vi >= lo, vi <= top]
    shown = show_combo({d: int(c) for d, c in key.items()})
    out = []
    # the values are integers: "larger" is stated as "at least one larger", which z3 needs spelled out
    for name, extra, what in (("larger_wins", [vj >= vi + 1], f"a key with a larger {shown} beats a smaller one"),
                              ("first_of_equal", [vj == vi, j < i], f"of two keys with equal {shown} the earlier wins")):
        stmt = (f"at every query and keys at positions j in 0..{T - 1} (is_bos = [j = 0]; {shown} an integer in "
                f"{lo}..{top}): {what}, by at least {s} (sharpness(f)); score read off the built W_Q, W_K")
        out.append(smt_fact(layer, f"{score.head.name}.{name}", stmt, rng + extra, score(j, kj) - score(i, ki) >= s))
    return out


def _match_facts(score: HeadScore, comps: list, flags: list, tie: str | None, s: int, T: int, layer: str) -> list[dict]:
    """A match head with the [BOS] fallback: the match beats every non-match and
    [BOS]; [BOS] beats every non-match; of two matches the plan's tie-break."""
    tag = score.tag
    hyps = [query_combo(score, qsq) == query_combo(score, q) * query_combo(score, q) for q, qsq, _, _ in comps]
    qs = [query_combo(score, q) for q, _, _, _ in comps]
    j, i = z3.Ints(f"{tag}.j {tag}.i")

    def side(p, name):
        ks = [z3.Int(f"{tag}.{name}.k{c}") for c in range(len(comps))]
        fs = [z3.Int(f"{tag}.{name}.f{c}") for c in range(len(flags))]
        free = {}
        for (_, _, kd, ksq), k in zip(comps, ks):
            free[kd], free[ksq] = z3.ToReal(k), z3.ToReal(k * k)
        for fl, f in zip(flags, fs):
            free[fl] = z3.ToReal(f)
        match = z3.And(p >= 1, *[k == q for k, q in zip(ks, qs)], *[f == 1 for f in fs])
        non = z3.And(p >= 1, z3.Or(*[k != q for k, q in zip(ks, qs)], *[f == 0 for f in fs]))
        return _key(p, free), match, non, [z3.Or(f == 0, f == 1) for f in fs]
    kj, mj, nj, hj = side(j, "j")
    ki, mi, ni, hi_ = side(i, "i")
    sj, si = score(j, kj), score(i, ki)
    rng = hyps + hj + hi_ + [j >= 0, j < T, i >= 0, i < T, i != j]
    squares = ", ".join(f"{show_combo({d: int(c) for d, c in qsq.items()})} = ({show_combo({d: int(c) for d, c in q.items()})})^2"
                        for q, qsq, _, _ in comps)
    what = " and ".join([f"{kd} = {show_combo({d: int(c) for d, c in q.items()})}" for q, _, kd, _ in comps]
                        + [f"{f} = 1" for f in flags])
    cases = [("match_beats_non_match", [mj, ni], "a matching key beats every other key but [BOS]"),
             ("match_beats_bos", [mj, i == 0], "a matching key beats [BOS]"),
             ("bos_beats_non_match", [j == 0, ni], "[BOS] beats every key that does not match")]
    if tie == "first":
        cases.append(("first_match", [mj, mi, j < i], "of two matching keys the earlier wins"))
    elif tie == "last":
        cases.append(("latest_match", [mj, mi, j > i], "of two matching keys the later wins"))
    out = []
    for name, extra, text in cases:
        stmt = (f"for every integer value of the query's directions with {squares} and "
                f"keys at positions j in 0..{T - 1} (is_bos = [j = 0]; every key direction an integer, 0 at [BOS]; "
                f"flags in {{0, 1}}), a key matches when {what}: {text}, by at least {s} (sharpness(f))"
                + ("" if tie else "; the plan's promise: at most one key matches") + "; score read off the built "
                "W_Q, W_K")
        out.append(smt_fact(layer, f"{score.head.name}.{name}", stmt, rng + extra, sj - si >= s))
    return out


def positions(N: int, M: int) -> int:
    """T = 3M + 2N + 4 positions the task needs: [BOS], the header [COUNT] N, 3
    tokens per edge, [EOS], a tour of at most 2N - 1 vertices, its [EOS]."""
    return 3 * M + 2 * N + 4


def structure_facts(model, N: int, M: int) -> list[dict]:
    """Five attention layers and no RNN layer; the model reads at least the
    positions the task needs (:func:`positions`)."""
    spec = model.spec
    T = positions(N, M)
    bad = []
    if len(spec.attn_layers) != 5 or spec.rnn_layers:
        bad.append(f"{len(spec.attn_layers)} attention and {len(spec.rnn_layers)} RNN layers")
    if (model.max_positions or 0) < T:
        bad.append(f"it reads {model.max_positions} positions, the task needs {T}")
    return [{"fact": "structure", "layer": "embedding", "method": "exact",
             "statement": f"five attention layers, no RNN layer; the model reads at least 3M + 2N + 4 = {T} positions",
             "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(bad)} if bad else {})}]


def head_facts(model, N: int, tag: str = "dfs") -> list[dict]:
    """One proof record per planned head (its score read off W_Q, W_K), its copy,
    and a failed step per head missing, unplanned, built twice or in another layer."""
    spec = model.spec
    s = sharpness(model.fmt.frac_bits)
    T = model.max_positions
    V = _tau_bound(N)

    def prove(li, h, entry, layer):
        _, kind, args, copy = entry
        score = HeadScore(spec, h, f"{tag}.{_key_of(model)}.{h.name}")
        try:
            if kind == "shift":
                got = _shift_facts(score, args[0], s, T, layer)
            elif kind == "first_max":
                got = _first_max_facts(score, args[0], *{"flag": (0, 1), "code": (-V, V)}[args[1]], s, T, layer)
            else:
                got = _match_facts(score, *args, s, T, layer)
        except ValueError as e:
            got = [unmet(f"{h.name}.read", layer, "the score's directions", str(e))]
        return got + [copy_fact(spec, h, copy, layer)]
    return planned_heads(spec, plan(), lambda e: e[0], prove)


def _tau_bound(N: int) -> int:
    """|tau| of every token the model reads, from the task: the vertices 0..N - 1
    (codes 1..N), the header's count N (N + 1), the specials (>= -9) and
    [COUNT] (-31)."""
    return max(N + 1, -token_code(COUNT))


def _key_of(model) -> str:
    return f"N{model.spec.notes['n_vertices']}M{model.spec.notes['max_edges']}"


def label(model) -> str:
    return f"istree-transformer(N={model.spec.notes['n_vertices']}, M={model.spec.notes['max_edges']})"


def embedding_plan() -> dict:
    out = {"one": (K.F_ONE, 0, 1), "tok": (K.F_TOK, 0, 1), "tok_sq": (K.F_TOK_SQ, 0, 1), "pos": (K.F_POS, 0, 1),
           "pos_sq": (K.F_POS_SQ, 0, 1), "is_num": (K.F_IS_NUM, 0, 1), "is_count": (K.F_IS_TOKEN, COUNT, 1)}
    for lab, token in (("is_bos", BOS), ("is_eos", EOS), ("is_dash", DASH), ("is_tilde", TILDE)):
        out[lab] = (K.F_IS_TOKEN, token, 1)
    return out


def embedding_facts(model) -> list[dict]:
    return istree_hybrid.embedding_facts(model, embedding_plan(), "the embedding writes one, tau, tau^2, pos, pos^2 and the flags [BOS], "
                 "[EOS], -, ~, [COUNT] and [a number]; nothing else")


# ----------------------------------------------------------------------------
# the MLPs
def _layer_mlp(model, li: int, what: str, ints: dict, hyps: list, plan_: list, tag: str, given: str = "") -> list[dict]:
    """Attention layer ``li``'s MLP against ``plan_`` (istree_hybrid.mlp_plan_facts)."""
    spec = model.spec
    return istree_hybrid.mlp_plan_facts(spec.attn_layers[li], list(spec.labels), f"attention layer {li + 1}, MLP: {what}",
                          f"mlp{li + 1}", ints, hyps, plan_, f", for every value of the inputs with {given}")


_PAIRS = (("hop_first", "hop_second"), ("next_first", "next_second"))
MLP_INPUTS = {
    0: ("after_eos", "is_num", "is_eos", "pos", "prompt_end"),
    1: tuple(f"pred_{e}_via_{s}{q}" for e in "uv" for s in ("first", "second") for q in ("", "_sq"))
    + ("edge_u_first", "edge_u_second", "edge_u_first_sq", "edge_u_second_sq", "back1", "parent"),
    2: ("next_first", "next_second", "parent"),
    3: ("next_is_parent",) + tuple(p + q for a in _PAIRS for p in a for q in ("", "_sq"))
    + ("hop_found_first", "hop_found_second", "found_first", "found_second"),
    4: ("at_tour_vertex", "at_prompt_eos", "at_tour_eos", "has_w", "visited", "w", "parent", "pos", "prompt_end",
        "vertex_count"),
}
"""Attention layer li + 1's MLP: the directions it reads (:func:`mlp_plan`, :func:`mlp_hyps`)."""
MLP_WHAT = {0: "position types", 1: "pred pointers and e_prev", 2: "next_is_parent", 3: "the neighbour w",
            4: "the output code"}
MLP_GIVEN = {
    0: "after_eos, is_num, is_eos in {0, 1} and 0 <= prompt_end <= pos < T",
    1: "the pred and edge ids in 0..T - 1 with their squares, at most one of edge_u_first, edge_u_second nonzero "
       "(a simple graph records an edge once), |back1|, |parent| <= V",
    2: "codes |.| <= V, at most one of next_first, next_second nonzero",
    3: "next_is_parent in {0, 1}; of each pair (hop, next) at most one nonzero, |.| <= V, squares the squares; "
       "the found flags in {0, 1}, at most one per pair",
    4: "exactly one of at_tour_vertex, at_prompt_eos, at_tour_eos; has_w, visited in {0, 1}; 0 <= w <= V, "
       "-1 <= parent <= V, 0 <= vertex_count <= V, 0 <= prompt_end <= pos < T"}


def mlp_hyps(li: int, v: dict, T, V) -> list:
    """The domain MLP li + 1 is proved on (:data:`MLP_GIVEN`), over the Ints ``v``
    of :data:`MLP_INPUTS`; T, V ints or z3 terms (the composition's are symbolic)."""
    if li == 0:
        return [z3.Or(v[f] == 0, v[f] == 1) for f in ("after_eos", "is_num", "is_eos")] + [
            v["prompt_end"] >= 0, v["prompt_end"] <= v["pos"], v["pos"] <= T - 1]
    if li == 1:
        hyps = []
        for lab in [f"pred_{e}_via_{s_}" for e in "uv" for s_ in ("first", "second")] + ["edge_u_first",
                                                                                         "edge_u_second"]:
            a = v[lab]
            hyps += [a >= 0, a <= T - 1, v[f"{lab}_sq"] == a * a]
        hyps += [z3.Or(v["edge_u_first"] == 0, v["edge_u_second"] == 0)]      # a simple graph: one record per edge
        return hyps + [v[c] >= -V for c in ("back1", "parent")] + [v[c] <= V for c in ("back1", "parent")]
    if li == 2:
        return [z3.And(v[c] >= -V, v[c] <= V) for c in MLP_INPUTS[2]] + [
            z3.Or(v["next_first"] == 0, v["next_second"] == 0)]
    if li == 3:
        hyps = [z3.Or(v["next_is_parent"] == 0, v["next_is_parent"] == 1)]
        for a, b in _PAIRS:
            hyps += [z3.Or(v[a] == 0, v[b] == 0), v[a] >= -V, v[a] <= V, v[b] >= -V, v[b] <= V,
                     v[f"{a}_sq"] == v[a] * v[a], v[f"{b}_sq"] == v[b] * v[b]]
        for a, b in (("hop_found_first", "hop_found_second"), ("found_first", "found_second")):
            hyps += [z3.Or(v[a] == 0, v[a] == 1), z3.Or(v[b] == 0, v[b] == 1), v[a] + v[b] <= 1]
        return hyps
    flags = ("at_tour_vertex", "at_prompt_eos", "at_tour_eos", "has_w", "visited")
    return [z3.Or(v[f] == 0, v[f] == 1) for f in flags] + [
        v["at_tour_vertex"] + v["at_prompt_eos"] + v["at_tour_eos"] == 1,
        v["w"] >= 0, v["w"] <= V, v["parent"] >= -1, v["parent"] <= V, v["vertex_count"] >= 0,
        v["vertex_count"] <= V, v["prompt_end"] >= 0, v["prompt_end"] <= v["pos"], v["pos"] <= T - 1]


def mlp_plan(li: int, v: dict) -> list:
    """MLP li + 1's plan over the Ints ``v``: [(fact, extra hypotheses (a case),
    direction, its value, text)]."""
    if li == 0:
        after = z3.And(v["is_eos"] == 1, v["pos"] > v["prompt_end"])
        return [("at_tour_vertex", [], "at_tour_vertex", indicator(z3.And(v["after_eos"] == 1, v["is_num"] == 1)),
                 "at_tour_vertex = [a number after the prompt's [EOS]]"),
                ("at_tour_eos", [], "at_tour_eos", indicator(after), "at_tour_eos = [an [EOS] after the prompt's]"),
                ("at_prompt_eos", [], "at_prompt_eos", indicator(z3.And(v["is_eos"] == 1, z3.Not(after))),
                 "at_prompt_eos = [the prompt's [EOS]]")]
    if li == 1:
        out = []
        for e in "uv":
            a, b = v[f"pred_{e}_via_first"], v[f"pred_{e}_via_second"]
            m = z3.If(a >= b, a, b)
            out += [(f"pred_{e}", [], f"pred_{e}", z3.ToReal(m),
                     f"pred_{e} = max(pred_{e}_via_first, pred_{e}_via_second)"),
                    (f"pred_{e}_sq", [], f"pred_{e}_sq", z3.ToReal(m * m), f"pred_{e}_sq = pred_{e}^2")]
        edge = v["edge_u_first"] + v["edge_u_second"]
        keep = v["back1"] != v["parent"]
        return out + [("e_prev", [], "e_prev", z3.ToReal(z3.If(keep, edge, 0)),
                       "e_prev = the edge {u, back1} unless back1 is u's parent, else 0"),
                      ("e_prev_sq", [], "e_prev_sq", z3.ToReal(z3.If(keep, edge * edge, 0)), "e_prev_sq = e_prev^2")]
    if li == 2:
        return [("next_is_parent", [], "next_is_parent", indicator(v["next_first"] + v["next_second"] == v["parent"]),
                 "next_is_parent = [next_first + next_second = parent]")]
    if li == 3:
        par = v["next_is_parent"] == 1
        w = z3.If(par, v["hop_first"] + v["hop_second"], v["next_first"] + v["next_second"])
        return [("w", [], "w", z3.ToReal(w), "w = the hop past the parent if next_is_parent else the next neighbour"),
                ("w_sq", [], "w_sq", z3.ToReal(w * w), "w_sq = w^2"),
                ("has_w", [], "has_w", z3.ToReal(z3.If(par, v["hop_found_first"] + v["hop_found_second"],
                                                        v["found_first"] + v["found_second"])),
                 "has_w = whether that neighbour was found")]
    c = lambda tok: z3.RealVal(token_code(tok))          # noqa: E731
    at_v, has = v["at_tour_vertex"] == 1, v["has_w"] == 1
    length = v["pos"] - v["prompt_end"] == 2 * v["vertex_count"]
    return [("out.w", [at_v, has, v["visited"] == 0, v["w"] >= 1], "out", z3.ToReal(v["w"]),
             "at a tour vertex with an unvisited next neighbour w (a vertex's code, >= 1): out = w"),
            ("out.cycle", [at_v, has, v["visited"] == 1, v["w"] >= 1], "out", c(EOS),
             "at a tour vertex whose next neighbour was visited (a cycle): out = code([EOS])"),
            ("out.back", [at_v, z3.Not(has)], "out", z3.ToReal(v["parent"]),
             "at a tour vertex with no next neighbour: out = parent"),
            ("out.start", [v["at_prompt_eos"] == 1], "out", z3.RealVal(token_code(NUMBER_BASE)),
             "at the prompt's [EOS]: out = the code of vertex 0"),
            ("out.true", [v["at_tour_eos"] == 1, length], "out", c(TRUE),
             "at the tour's [EOS] after 2 vertex_count tokens: out = code([TRUE])"),
            ("out.false", [v["at_tour_eos"] == 1, z3.Not(length)], "out", c(FALSE),
             "at the tour's [EOS] otherwise: out = code([FALSE])")]


def mlp_facts(model, N: int, tag: str = "dfs") -> list[dict]:
    """Each attention layer's MLP against :func:`mlp_plan` on :func:`mlp_hyps`'s domain."""
    T, V = model.max_positions, _tau_bound(N)
    key = f"{tag}.{_key_of(model)}"
    out = []
    for li in range(5):
        v = {lab: z3.Int(f"{key}.mlp{li + 1}.{lab}") for lab in MLP_INPUTS[li]}
        out += _layer_mlp(model, li, MLP_WHAT[li], v, mlp_hyps(li, v, T, V), mlp_plan(li, v), tag, MLP_GIVEN[li])
    return out


def readout_facts(model, N: int, tag: str = "dfs") -> list[dict]:
    """The readout emits the token of code ``out`` against every integer code
    between the vocabulary's lowest and highest (a superset of its tokens)."""
    voc = model.vocab
    codes = [token_code(t) for t in range(voc.size) if voc.contains(t)]
    need = sorted({token_code(t) for t in (BOS, EOS, TRUE, FALSE, DASH, TILDE, COUNT)} | set(range(1, N + 2)))
    missing = [c for c in need if c not in codes]
    out = [{"fact": "readout.vocabulary", "layer": "readout", "method": "exact",
            "statement": f"the vocabulary has a token of every code the model reads or writes: [BOS], [EOS], "
                         f"[TRUE], [FALSE], -, ~, [COUNT], the vertices 0..N - 1 and the count N (codes 1..{N + 1})",
            "answer": "holds" if not missing else "sat",
            **({"counterexample": f"no token of code {missing[:6]}"} if missing else {})}]
    return out + nearest_readout_facts(model.spec, min(codes), max(codes), f"{tag}.{_key_of(model)}",
                                       direction="out")


def facts(model, N: int) -> list[dict]:

    def rank(f):
        m = re.match(r"attention layer (\d+), (head|MLP)", f["layer"])
        if m:
            return 10 * int(m.group(1)) + (m.group(2) == "MLP")
        return {"embedding": 0, "readout": 200}.get(f["layer"], 100)
    M = model.spec.notes["max_edges"]
    return sorted(structure_facts(model, N, M) + embedding_facts(model) + head_facts(model, N) + mlp_facts(model, N)
                  + readout_facts(model, N), key=rank)


CHAIN_LABEL = "istree-transformer(every N)"
"""The label of the composition's facts (checks/certify/istree_transformer_chain.py): they are
symbolic in N and read the plans, not one model."""


