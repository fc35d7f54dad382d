"""The IsTree Transformer's composition (checks/certify/istree_transformer_chain.py).

The chain of the unmutated plans is proved for every N; its reference (the
local DFS rule the chain states) writes the task's ``dfs_tour`` on every graph
tried; its hypotheses hold on real runs with their values pinned; and designs
where the builder and the plan change together, so that every per-layer fact
still holds, fail the chain at the role whose next token, or whose head's
lookup, they break.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from rnngap.checks.certify import istree_transformer as CD
from rnngap.checks.certify import istree_transformer_chain as C
from rnngap.checks.certify.sizes import z3
from rnngap.checks.tasks.istree import dfs_tour, tour_label
from rnngap.constructions.models import istree as I
from rnngap.constructions.machine.vocab import DASH, TILDE, token_code
from rnngap.checks.certify import rows

from _mutants import head_kwargs

EOS = None


def _failed(facts):
    return sorted({f["fact"] for f in facts if f["answer"] not in ("unsat", "holds")})


def test_the_composition_is_proved_for_every_n():
    facts = C.chain_facts()
    names = ["chain.order"] + [n for r in C.ROLES for n in (f"chain.{r}", f"chain.{r}.keys")]
    assert [f["fact"] for f in facts] == names
    assert _failed(facts) == [] and all(f["method"] == "smt" and f["query"] for f in facts[1:])
    assert "for every N, M, m, header" in facts[1]["statement"]
    assert C.chain_facts() == facts          # proved once per process: the same records


# ----------------------------------------------------------------------------
# the chain's reference is the task's
def _records(edges):
    """Each record's pred pointers (the latest earlier record incident to its a,
    to its b: an index, None if none)."""
    preds = []
    for k, (a, b) in enumerate(edges):
        def latest(x):
            return next((j for j in range(k - 1, -1, -1) if x in edges[j]), None)
        preds.append((latest(a), latest(b)))
    return preds


def _rule(edges) -> tuple[list[int], list[dict]]:
    """The tour the local DFS rule writes (the module's docstring), and at each tour
    vertex what its lookups find: the first occurrence, the edge record {u, p},
    the next and hop records (index, side), the visited occurrence."""
    preds = _records(edges)
    tour, steps = [0], []

    def record(u, e):
        for k, (a, b) in enumerate(edges):
            for side, (x, other) in enumerate(((a, b), (b, a))):
                if x == u and preds[k][side] == e:
                    return k, side, other
        return None
    while len(tour) <= 4 * len(edges) + 2:
        i = len(tour) - 1
        u, p = tour[i], (tour[i - 1] if i >= 1 else EOS)
        f = tour.index(u)
        par = tour[f - 1] if f >= 1 else EOS
        edge = next((k for k, (a, b) in enumerate(edges) if {a, b} == {u, p}), None)
        e = None if p == par else edge
        nxt = record(u, e)
        hop = record(u, nxt[0] if nxt is not None else None)      # looked up always, used past the parent
        found = hop if (nxt is not None and nxt[2] == par) else nxt
        w = found[2] if found is not None else None
        seen = tour.index(w) if w in tour else None
        steps.append({"f": f, "edge": edge, "next": nxt, "hop": hop, "w": w, "visited": seen})
        out = par if found is None else (EOS if seen is not None else w)
        if out is EOS:
            return tour, steps
        tour.append(out)
    raise AssertionError(f"the rule does not end on {edges}")


def _graphs():
    """Every simple graph on up to 4 vertices in every edge order and orientation
    (up to 4 edges), and 300 random ones on up to 12 vertices."""
    for n in range(1, 5):
        pairs = list(itertools.combinations(range(n), 2))
        for m in range(0, min(len(pairs), 4) + 1):
            for chosen in itertools.permutations(pairs, m):
                for flips in itertools.product((False, True), repeat=m):
                    yield n, [(b, a) if fl else (a, b) for (a, b), fl in zip(chosen, flips)]
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(2, 13))
        pairs = list(itertools.combinations(range(n), 2))
        m = int(rng.integers(0, min(len(pairs), n + 2) + 1))
        chosen = [pairs[j] for j in rng.permutation(len(pairs))[:m]]
        yield n, [(b, a) if rng.integers(2) else (a, b) for a, b in chosen]


def test_the_local_rule_writes_the_tasks_dfs_tour():
    """The rule, the tour's length bound and the decision rule the chain states."""
    count = 0
    for n, edges in _graphs():
        tour, steps = _rule(edges)
        assert tour == dfs_tour(n, edges), (n, edges)
        assert 1 <= len(tour) <= 2 * n - 1
        assert tour_label(n, tour) == (len(tour) == 2 * n - 1), (n, edges)
        assert all({tour[j], tour[j + 1]} in [set(e) for e in edges] for j in range(len(tour) - 1))
        count += 1
    assert count > 5000


# ----------------------------------------------------------------------------
# the chain's hypotheses hold on real runs
def _run(n, edges, header: bool, sep: int):
    """A real run's reference values: h, m, N_c, the tour, the records' ids."""
    h = 2 if header else 0
    Nc = n if header else 1 + max((max(e) for e in edges), default=0)
    tour, steps = _rule(edges)
    return {"h": h, "m": len(edges), "Nc": Nc, "tour": tour, "steps": steps, "sep": sep, "edges": edges,
            "preds": _records(edges), "P": h + 3 * len(edges) + 1}


def _positions(run):
    out = [("bos", None, None)] + ([("count", None, None), ("cval", None, None)] if run["h"] else [])
    out += [(r, k, None) for k in range(run["m"]) for r in ("a", "sep", "b")] + [("eos", None, None)]
    return out + [("tv", None, i) for i in range(len(run["tour"]))] + [("teos", None, None)]


def _pins(role, N, M, run, k, i) -> list:
    """The real run's values for the free functions and variables of ``role``'s facts."""
    tag = f"real.{role}"
    I_ = z3.IntSort()
    fn = lambda name: z3.Function(f"{tag}.ref.{name}", I_, I_)          # noqa: E731
    v = lambda name: z3.Int(f"{tag}.{name}")                           # noqa: E731
    b = lambda name: z3.Bool(f"{tag}.{name}")                          # noqa: E731
    h, edges, tour = run["h"], run["edges"], run["tour"]
    r = lambda kk: h + 3 * kk + 3                                      # noqa: E731
    rid = lambda kk: 0 if kk is None else r(kk)                        # noqa: E731
    out = [z3.Int(f"{tag}.ref.{x}") == val for x, val in
           (("N", N), ("M", M), ("m", run["m"]), ("h", h), ("Nc", run["Nc"]), ("L", len(tour)))]
    for kk, (a, bb) in enumerate(edges):
        out += [fn("a")(kk) == a + 1, fn("b")(kk) == bb + 1, fn("sep")(kk) == token_code(run["sep"]),
                fn("pred_a")(kk) == rid(run["preds"][kk][0]), fn("pred_b")(kk) == rid(run["preds"][kk][1])]
    out += [fn("W")(j) == x + 1 for j, x in enumerate(tour)]
    if k is not None:
        out.append(v("k") == k)
    if i is not None:
        out.append(v("i") == i)
    t = {"bos": 0, "count": 1, "cval": 2, "eos": run["P"], "teos": run["P"] + 1 + len(tour)}.get(role)
    t = (h + 3 * k + {"a": 1, "sep": 2, "b": 3}[role]) if role in ("a", "sep", "b") else t
    t = run["P"] + 1 + i if role == "tv" else t
    toks = [None] + ([None, None] if h else []) + [x for (a, bb) in edges for x in (a, "sep", bb)]
    x, y = (toks[t] if 1 <= t < len(toks) else None), (toks[t - 1] if 1 <= t - 1 < len(toks) else None)
    if role == "tv":
        x, y = tour[i], (tour[i - 1] if i >= 1 else None)
    for side, (ea, eb) in (("first", (x, y)), ("second", (y, x))):
        kk = next((j for j, e in enumerate(edges) if e == (ea, eb) and r(j) <= t), None)
        out.append(b(f"edge-u-{side}.found") == (kk is not None))
        out += [] if kk is None else [v(f"edge-u-{side}.k") == kk]
    if role == "b":
        for end, xx in (("u", edges[k][0]), ("v", edges[k][1])):
            for s, pos in (("first", 0), ("second", 1)):
                kk = next((j for j in range(k - 1, -1, -1) if edges[j][pos] == xx), None)
                out.append(b(f"pred-{end}-{s}.found") == (kk is not None))
                out += [] if kk is None else [v(f"pred-{end}-{s}.k") == kk]
    if role in C.WRITES:
        Nc = run["Nc"]
        if Nc == 1:
            jw = 0
        elif h:
            jw = 2
        else:
            jw = next(h + 3 * kk + (1 if side == 0 else 3) for kk, e in enumerate(edges) for side in (0, 1)
                      if e[side] + 1 == Nc)
            out.append(v("count_witness.k") == (jw - h - 1) // 3)
        out.append(v("count_witness") == jw)
    if role == "tv":
        st = run["steps"][i]
        out.append(v("first_occurrence") == st["f"])
        for name in ("next", "hop"):
            got = st[name]
            for s, side in (("first", 0), ("second", 1)):
                hit = got is not None and got[1] == side
                out.append(b(f"{name}-{s}.found") == hit)
                out += [v(f"{name}-{s}.k") == got[0]] if hit else []
        out.append(b("visited.found") == (st["visited"] is not None))
        out += [] if st["visited"] is None else [v("visited.at") == st["visited"]]
    return out


def test_the_reference_hypotheses_hold_on_real_runs():
    """Every role's hypotheses are satisfiable with a real run's values pinned (the
    graph, the tour, the pred pointers, what each lookup finds), and its goals
    hold there; the built model writes that tour, and at every position the values
    the chain computes (every direction it evaluates there) are the built model's
    residual, but for the pred heads' off a record, which the chain leaves free."""
    kept = {r: {} for r in C.ROLES}
    queries = {r: C._role_query(r, "real", kept[r]) for r in C.ROLES}
    graphs = [(4, [(0, 1), (1, 2), (2, 3)], DASH, False), (4, [(0, 1), (1, 2), (2, 0)], TILDE, True),
              (1, [], DASH, False), (3, [(1, 0)], TILDE, True), (5, [(2, 0), (3, 2), (1, 0), (4, 3)], DASH, True),
              (6, [(0, 1), (2, 3), (4, 5), (0, 2), (4, 0), (3, 1)], DASH, False), (2, [], DASH, True)]
    N, M = 7, 6
    model = I.istree_transformer(N, M)
    seen = set()
    compared = 0
    for n, edges, sep, header in graphs:
        run = _run(n, edges, header, sep)
        got = I.run(model, edges, sep=sep, n_nodes=n if header else None)
        assert [t - 32 for t in got.cot[:-1]] == run["tour"], (edges, got.cot)
        tokens = I.prompt_tokens(edges, sep, n if header else None) + got.cot
        sess = model.session(capacity=len(tokens) + 1)
        for (role, k, i), tok in zip(_positions(run), tokens, strict=True):
            sess.feed([tok])
            residual = sess.residual()
            for name, (_, hyps, goals) in queries[role].items():
                s = z3.Solver()
                s.add(*hyps, *_pins(role, N, M, run, k, i))
                assert s.check() == z3.sat, (edges, header, name, k, i)
                mdl = s.model()
                bad = [t for t, g in goals if not z3.is_true(mdl.eval(g, model_completion=True))]
                assert bad == [], (edges, header, name, k, i, bad)
                if name == f"chain.{role}":
                    for d, term in kept[role]["role"].memo.items():
                        if d.startswith("pred_") and role != "b":
                            continue
                        v = mdl.eval(term, model_completion=True)
                        assert Fraction(v.numerator_as_long(), v.denominator_as_long()) == residual[d], (
                            edges, header, role, k, i, d, v, residual[d])
                        compared += 1
            seen.add(role)
    assert seen == set(C.ROLES) and compared > 3000


# ----------------------------------------------------------------------------
# a design changed in the builder and the plan together: the layers prove, the chain does not
def _build(monkeypatch, name, wrap, N=7, M=6):
    real = getattr(I, name)
    with monkeypatch.context() as mp:
        mp.setattr(I, name, wrap(real))
        return I.istree_transformer(N, M)


def _plan_with(monkeypatch, head, change):
    real = CD.plan

    def plan():
        out = real()
        out[head] = change(out[head])
        return out
    monkeypatch.setattr(CD, "plan", plan)
    monkeypatch.setattr(C, "plan", plan)


def _chain(roles) -> dict:
    return {f["fact"]: f for r in roles for f in C._role_facts(r, "mutant")}


def test_the_parent_tie_break_latest_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """The parent head attends u's latest occurrence (the token before it is not
    the parent once u was re-entered): the head lemma holds of the mutant, the
    chain's no-other-key goal does not."""
    model = _build(monkeypatch, "match_head", head_kwargs("parent", lambda kw: {**kw, "tie_break": "last"}))
    _plan_with(monkeypatch, "parent", lambda e: (e[0], e[1], (e[2][0], e[2][1], "last"), e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    got = _chain(["tv"])
    assert _failed(got.values()) == ["chain.tv.keys"]
    assert "parent: a key at tv that matches" in got["chain.tv.keys"]["counterexample"]


def test_a_next_lookup_without_its_pred_component_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """next-first keyed by u alone (every record with u first matches, not the one
    after e_prev): the head lemma holds under its promise, the chain does not."""
    model = _build(monkeypatch, "match_head", head_kwargs("next-first", lambda kw: {
        **kw, "components": [kw["components"][0], kw["components"][2]]}))
    _plan_with(monkeypatch, "next-first", lambda e: (e[0], e[1], ([e[2][0][0]], e[2][1], e[2][2]), e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    got = _chain(["tv"])
    assert _failed(got.values()) == ["chain.tv.keys"]
    assert "next-first: a key at b that matches" in got["chain.tv.keys"]["counterexample"]


def test_pred_keyed_by_the_records_own_endpoint_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """pred-u-first keyed by back2 (the record's own a) instead of the delayed back5:
    the head lemma holds, the record's pred offer is not the reference's."""
    def change(kw):
        import dataclasses
        c = kw["components"]
        return {**kw, "components": [dataclasses.replace(c[0], key={"back2": 1}, key_sq={"back2_sq": 1})] + c[1:]}
    model = _build(monkeypatch, "match_head", head_kwargs("pred-u-first", change))
    _plan_with(monkeypatch, "pred-u-first", lambda e: (e[0], e[1], ([CD._v("back2", "back2")], e[2][1], e[2][2]),
                                                        e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    assert "chain.b" in _failed(_chain(["b"]).values())


def test_the_start_vertex_changed_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """The output at the prompt's [EOS] is vertex 1 (code 2), in the MLP and its plan."""
    import dataclasses
    real_n, real_p = I._output_neurons, CD.mlp_plan

    def neurons(p):
        return [dataclasses.replace(n, out={"out": 2}) if n.inp == {"at_prompt_eos": 1} else n for n in real_n(p)]

    def mlp_plan(li, v):
        rows = real_p(li, v)
        return [(f, ex, d, z3.RealVal(2) if f == "out.start" else w, t) for f, ex, d, w, t in rows]
    with monkeypatch.context() as mp:
        mp.setattr(I, "_output_neurons", neurons)
        model = I.istree_transformer(7, 6)
    monkeypatch.setattr(CD, "mlp_plan", mlp_plan)
    monkeypatch.setattr(C, "mlp_plan", mlp_plan)
    assert _failed(CD.mlp_facts(model, 7)) == []
    got = _chain(["eos", "b"])
    assert _failed(got.values()) == ["chain.eos"]
    assert "out = the reference's next code" in got["chain.eos"]["counterexample"]


def test_w_never_hopping_past_the_parent_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """w = the next neighbour even when it is the parent (the MLP and its plan)."""
    def sel(real):
        def patched(cond, x, y, out, bound):
            return real(cond, y, y, out, bound) if out in ("w", "w_sq", "has_w") else real(cond, x, y, out, bound)
        return patched
    model = _build(monkeypatch, "select_neurons", sel)
    real_p = CD.mlp_plan

    def mlp_plan(li, v):
        if li != 3:
            return real_p(li, v)
        w = v["next_first"] + v["next_second"]
        return [("w", [], "w", z3.ToReal(w), "w"), ("w_sq", [], "w_sq", z3.ToReal(w * w), "w_sq"),
                ("has_w", [], "has_w", z3.ToReal(v["found_first"] + v["found_second"]), "has_w")]
    monkeypatch.setattr(CD, "mlp_plan", mlp_plan)
    monkeypatch.setattr(C, "mlp_plan", mlp_plan)
    assert _failed(CD.mlp_facts(model, 7)) == []
    got = _chain(["tv"])
    # the visited lookup's query (w) is no longer the reference's either: its key fact fails too
    assert _failed(got.values()) == ["chain.tv", "chain.tv.keys"]
    assert "out = the reference's next code" in got["chain.tv"]["counterexample"]


def test_a_shift_of_4_for_the_delayed_a_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """shift5 aimed at t - 4 (the previous record's separator, not its a)."""
    def shift(real):
        def patched(name, pos, pos_sq, one, copy, fmt, n_positions, shift=1):
            return real(name, pos, pos_sq, one, copy, fmt, n_positions=n_positions,
                        shift=4 if name == "shift5" else shift)
        return patched
    model = _build(monkeypatch, "shift_head", shift)
    _plan_with(monkeypatch, "shift5", lambda e: (e[0], e[1], (4,), e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    assert "chain.b" in _failed(_chain(["b"]).values())


def test_a_key_square_read_off_another_direction_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """edge-u-first's key square read off back3_sq (not back2_sq): the head lemma
    holds of the mutant (it takes the square direction to be the square), the
    model writes wrong tours (a read review's hole: the chain now proves every
    match component's square from the plan)."""
    import dataclasses
    model = _build(monkeypatch, "match_head", head_kwargs("edge-u-first", lambda kw: {
        **kw, "components": [dataclasses.replace(kw["components"][0], key_sq={"back3_sq": 1})]
        + kw["components"][1:]}))
    _plan_with(monkeypatch, "edge-u-first", lambda e: (e[0], e[1], (
        [e[2][0][0][:3] + ("back3_sq",)] + e[2][0][1:], e[2][1], e[2][2]), e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    assert I.run(model, [(0, 1), (0, 2), (0, 3)]).cot != [33, 34, 33, 35, 33, 36, 33, 1]     # the mutant errs
    got = _chain(["a"])
    assert _failed(got.values()) == ["chain.a"]
    assert "back3_sq = back2^2 (a match key's square)" in got["chain.a"]["counterexample"]


def test_a_first_max_key_outside_its_lemmas_range_fails_the_chain(monkeypatch):
    """vertex-count's lemma proved for keys in 0..1 only (the plan's range "flag"):
    the count key of [COUNT] (-31) and of the vertices lies outside it."""
    _plan_with(monkeypatch, "vertex-count", lambda e: (e[0], e[1], (e[2][0], "flag"), e[3]))
    got = _chain(["count"])
    assert _failed(got.values()) == ["chain.count"]
    assert "vertex-count's key lies in the range its lemma is proved on (flag)" in got["chain.count"][
        "counterexample"]


def test_a_token_flag_no_token_has_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """Two flags, [vertex 0] and F_IS_TOKEN with parameter -1 (the kernel: never
    1; read as a code, token_code(-1) = 1 would be vertex 0's), and next-first
    copying tok + the first - the second: the model writes 2 for vertex 0, a second
    read review's hole (the chain read the parameter as a code)."""
    from rnngap.constructions.machine import kernels as K

    def space(real):
        def patched():
            s = real()
            s.embedded("is_v0", K.F_IS_TOKEN, 32)
            s.embedded("is_v0x", K.F_IS_TOKEN, -1)
            return s
        return patched
    copy = {"next_first": {"tok": 1, "is_v0": 1, "is_v0x": -1}}
    with monkeypatch.context() as mp:
        mp.setattr(I, "_embedded_space", space(I._embedded_space))
        mp.setattr(I, "match_head", head_kwargs("next-first", lambda kw: {**kw, "copy": {**kw["copy"], **copy}})(
            I.match_head))
        model = I.istree_transformer(7, 6)
    real_emb = CD.embedding_plan

    def emb():
        return {**real_emb(), "is_v0": (K.F_IS_TOKEN, 32, 1), "is_v0x": (K.F_IS_TOKEN, -1, 1)}
    monkeypatch.setattr(CD, "embedding_plan", emb)
    monkeypatch.setattr(C, "embedding_plan", emb)
    _plan_with(monkeypatch, "next-first", lambda e: (e[0], e[1], e[2], {**e[3], **copy}))
    assert _failed(CD.embedding_facts(model) + CD.head_facts(model, 7)) == []
    assert I.run(model, [(1, 0)]).cot != [32, 33, 32, 1]                 # the mutant errs
    assert "chain.tv" in _failed(_chain(["tv"]).values())


def test_a_pred_head_flagged_by_is_num_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """pred-u-first's flag is_num, not is_record: at a record the same keys match
    (chain.b holds), off a record the head may attend a tour position, which the
    chain took to be a record (a second read review's hole: it built a design that
    read that head off a record and wrote wrong tours)."""
    from rnngap.constructions.build.gadgets import flag_component
    model = _build(monkeypatch, "match_head", head_kwargs("pred-u-first", lambda kw: {
        **kw, "components": [kw["components"][0], flag_component("is_num")]}))
    _plan_with(monkeypatch, "pred-u-first", lambda e: (e[0], e[1], (e[2][0], ["is_num"], e[2][2]), e[3]))
    assert _failed(CD.head_facts(model, 7)) == []
    got = _chain(["b", "tv"])
    assert _failed(got.values()) == ["chain.tv.keys"]
    assert "pred-u-first: no key at tv matches (it attends a record or [BOS])" in got["chain.tv.keys"][
        "counterexample"]


def test_the_order_fact_fails_on_a_head_reading_its_own_layer(monkeypatch):
    """The parent head moved into the first layer: it reads back1, which a head of
    that layer writes."""
    _plan_with(monkeypatch, "parent", lambda e: (0,) + e[1:])
    f = C.order_fact()
    assert f["answer"] == "sat" and "head parent reads back1, written by head shift1, not before it" in f[
        "counterexample"]


def test_the_order_fact_fails_on_two_writers(monkeypatch):
    _plan_with(monkeypatch, "next-first", lambda e: (e[0], e[1], e[2], {**e[3], "parent": {"back2": 1}}))
    f = C.order_fact()
    assert f["answer"] == "sat" and "parent is written by head parent and by head next-first" in f["counterexample"]


def test_the_memo_is_keyed_by_the_plans(monkeypatch):
    """A head's plan, and a change deep in an MLP plan's term (z3's str() cuts deep
    terms short: the key is their whole s-expression; a third read review's point)."""
    key = C._plans_key()
    real = CD.mlp_plan

    def mlp_plan(li, v):
        return [(f, ex, d, w + 5 if f == "out.w" else w, t) for f, ex, d, w, t in real(li, v)]
    with monkeypatch.context() as mp:
        mp.setattr(C, "mlp_plan", mlp_plan)
        assert C._plans_key() != key
    _plan_with(monkeypatch, "shift5", lambda e: (e[0], e[1], (4,), e[3]))
    assert C._plans_key() != key


def test_a_records_pred_square_is_proved_not_assumed(monkeypatch):
    """MLP 2's plan writing pred_u_sq as pred_u_via_first^2 (not the square of the
    maximum): a key reading pred_u_sq at a record takes the reference's square,
    so chain.b proves the squares too (a third read review's point)."""
    real = CD.mlp_plan

    def mlp_plan(li, v):
        rows = real(li, v)
        sq = z3.ToReal(v["pred_u_via_first"] * v["pred_u_via_first"]) if li == 1 else None
        return [(f, ex, d, sq if f == "pred_u_sq" else w, t) for f, ex, d, w, t in rows]
    monkeypatch.setattr(C, "mlp_plan", mlp_plan)
    got = _chain(["b"])
    assert "chain.b" in _failed(got.values())
    assert "pred_u_sq = the reference's pred pointer (or its square)" in got["chain.b"]["counterexample"]


# ----------------------------------------------------------------------------
# the row
def test_the_row_with_the_composition_covers_it():

    res = rows.layer_row(CD.NAME, ((3, 3),), chain=True)
    assert res.certified and res.covers[-1] == "composition"
    chain = [f for f in res.facts if f["fact"].startswith(CD.CHAIN_LABEL)]
    assert len(chain) == 1 + 2 * len(C.ROLES)


@pytest.mark.parametrize("every_n", [False, True])
def test_certify_proves_the_compositions_with_full_only(every_n):
    """With --full the first chunk of each IsTree row proves its composition (the
    Transformer's here, the hybrid's in checks/certify/istree_hybrid_chain.py)."""
    from rnngap.checks.certify import run as CE
    chunks = [("istree_transformer", ((7, 6),)), ("istree_transformer", ((8, 7),)), ("istree_hybrid", ((4, 6),))]
    got = [CE._chain(mod, k, chunks, every_n) for k, (mod, _) in enumerate(chunks)]
    assert got == ([True, False, True] if every_n else [False, False, False])
