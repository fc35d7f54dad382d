"""The IsTree hybrid's composition (checks/certify/istree_hybrid_chain.py).

The chain of the unmutated plans is proved for every N; its reference (the
layout the chain states) is the task's union-find CoT on every graph tried; and
designs where the builder and the plan change together, so that every
per-layer fact still holds, fail the chain at the role whose next token they
break.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from rnngap.checks.certify import istree_hybrid as CI
from rnngap.checks.certify import istree_hybrid_chain as C
from rnngap.checks.tasks.istree_unionfind import unionfind_cot
from rnngap.constructions.models import hybrid as H
from rnngap.checks.certify.sizes import z3
from rnngap.constructions.machine.vocab import DASH, FALSE, QUERY, TILDE, TRUE, number_token, token_code
from rnngap.checks.certify import rows

from _mutants import head_kwargs, last_su_copies_r_u_from_prev1


def _failed(facts):
    return sorted({f["fact"] for f in facts if f["answer"] not in ("unsat", "holds")})


def test_the_composition_is_proved_for_every_n():
    facts = C.chain_facts()
    assert [f["fact"] for f in facts] == ["chain.order"] + [f"chain.{r}" for r in C._PROMPT_ROLES + C._SEG_ROLES]
    assert _failed(facts) == [] and all(f["method"] == "smt" and f["query"] for f in facts[1:])
    assert "for every N >= 1" in facts[1]["statement"]
    assert C.chain_facts() == facts          # proved once per process: the same records


# ----------------------------------------------------------------------------
# the chain's reference is the task's
def _layout_cot(n_nodes: int, edges) -> tuple[list[int], int]:
    """The CoT as the chain's reference lays it out (the module's docstring): a find
    chain follows the latest record "~ x p" written so far, a root's size is the
    s of the latest "[QUERY] r s" (1 without one); union by size, ties to the
    v-side root."""
    cot: list[int] = []

    def latest(first, key):
        for j in range(len(cot) - 3, -1, -1):
            if cot[j] == first and cot[j + 1] == key:
                return cot[j + 2]
        return None

    def find(x):
        chain = [number_token(x)]
        while (p := latest(TILDE, chain[-1])) is not None:
            chain.append(p)
        size = latest(QUERY, chain[-1])
        cot.extend(chain + [DASH, number_token(1) if size is None else size])
        return chain[-1], cot[-1]
    for u, v in edges:
        ru, su = find(u)
        rv, sv = find(v)
        cot.append(ru)
        if ru == rv:
            return cot, FALSE
        cot.append(su)
        c, p = (ru, rv) if su <= sv else (rv, ru)
        cot += [TILDE, c, p, QUERY, p, su + sv - number_token(0)]
    return cot, (TRUE if len(edges) == n_nodes - 1 else FALSE)


def _graphs():
    for n in range(1, 5):
        pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
        for m in range(0, 4):
            yield from ((n, list(es)) for es in itertools.product(pairs, repeat=m))
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(2, 40))
        m = int(rng.integers(0, n + 2))
        yield n, [(int(rng.integers(0, n)), int(rng.integers(0, n))) for _ in range(m)]


def test_the_chains_reference_is_the_tasks_union_find_cot():
    count = 0
    for n, edges in _graphs():
        assert _layout_cot(n, edges) == unionfind_cot(n, edges), (n, edges)
        count += 1
    assert count > 2000


def _segments(edges) -> list[dict]:
    """Each edge's segment of a real run: its find chains, sizes, whether it closes
    a cycle, and the segment of the record each lookup finds (None: none)."""
    parent, size, child_rec, size_rec, out = {}, {}, {}, {}, []

    def find(x):
        chain = [x]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        return chain
    for k, (u, v) in enumerate(edges):
        xs, ys = find(u), find(v)
        su, sv = size.get(xs[-1], 1), size.get(ys[-1], 1)
        seg = {"x": xs, "y": ys, "su": su, "sv": sv, "cycle": xs[-1] == ys[-1],
               "size_rec": (size_rec.get(xs[-1]), size_rec.get(ys[-1])),
               "parent_rec": ([child_rec.get(a) for a in xs], [child_rec.get(a) for a in ys])}
        out.append(seg)
        if seg["cycle"]:
            break
        c, p = (xs[-1], ys[-1]) if su <= sv else (ys[-1], xs[-1])
        parent[c], size[p], child_rec[c], size_rec[p] = p, su + sv, k, k
    return out


def _positions(edges, segs):
    """(role, k, chain index) of every position of the run, with St(k)."""
    m = len(edges)
    out = [("bos", None, None)] + [(r, k, None) for k in range(m) for r in ("u", "sep", "v")] + [("eos", None, None)]
    t = 3 * m + 2
    for k, s in enumerate(segs):
        A, B = len(s["x"]) - 1, len(s["y"]) - 1
        s["St"] = t
        out += [("xu", k, i) for i in range(A)] + [("rootu", k, None), ("marku", k, None), ("su", k, None)]
        out += [("xv", k, i) for i in range(B)] + [(r, k, None) for r in ("rootv", "markv", "sv", "ru")]
        out += [] if s["cycle"] else [(r, k, None) for r in ("su2", "tilde", "c", "p", "query", "p2", "s")]
        t += A + B + 14
    return out


def _pins(role, N, edges, segs, k, i, sep) -> list:
    """The real run's values for the free functions and variables of ``role``'s fact."""
    I = z3.IntSort()
    fn = lambda name, n=1: z3.Function(f"real.{role}.ref.{name}", *([I] * n), I)     # noqa: E731
    out = [z3.Int(f"real.{role}.ref.N") == N, z3.Int(f"real.{role}.ref.m") == len(edges)]
    out += [c for j, (u, v) in enumerate(edges) for c in (fn("u")(j) == u + 1, fn("v")(j) == v + 1,
                                                           fn("sep")(j) == token_code(sep))]
    for kk, s in enumerate(segs):
        out += [fn("A")(kk) == len(s["x"]) - 1, fn("B")(kk) == len(s["y"]) - 1, fn("s_u")(kk) == s["su"] + 1,
                fn("s_v")(kk) == s["sv"] + 1, fn("St")(kk) == s["St"]]
        out += [fn("x", 2)(kk, j) == a + 1 for j, a in enumerate(s["x"])]
        out += [fn("y", 2)(kk, j) == a + 1 for j, a in enumerate(s["y"])]
    if k is not None:
        out.append(z3.Int(f"real.{role}.k") == k)
    if i is not None:
        out.append(z3.Int(f"real.{role}.i") == i)
    side = {"xu": 0, "rootu": 0, "xv": 1, "rootv": 1}.get(role)
    lookup = (("parent", segs[k]["parent_rec"][side][i if i is not None else -1]) if side is not None else
              ("size", segs[k]["size_rec"][role == "markv"]) if role in ("marku", "markv") else None)
    if lookup:
        h, kk = lookup
        out.append(z3.Bool(f"real.{h}.found") == (kk is not None))
        out += [] if kk is None else [z3.Int(f"real.{h}.kk") == kk]
    return out


def test_the_reference_hypotheses_hold_on_real_runs():
    """Every role's hypotheses are satisfiable with a real run's values pinned (the
    find chains, sizes, the records each lookup finds), and its goals hold there:
    the chain's reference is true of real runs, none of which it leaves uncovered
    by a false hypothesis (a third read review's check)."""
    queries = {r: C._role_query(r, "real") for r in C._PROMPT_ROLES + C._SEG_ROLES}
    graphs = [(4, [(0, 1), (1, 2), (2, 3)], DASH), (4, [(0, 1), (1, 2), (2, 0)], TILDE), (1, [], DASH),
              (3, [(1, 0)], TILDE), (8, [(0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (4, 6), (0, 4), (7, 1)], DASH)]
    seen = set()
    for N, edges, sep in graphs:
        segs = _segments(edges)
        for role, k, i in _positions(edges, segs):
            _, hyps, goals = queries[role]
            s = z3.Solver()
            s.add(*hyps, *_pins(role, N, edges, segs, k, i, sep))
            assert s.check() == z3.sat, (N, edges, role, k, i)
            model = s.model()
            assert [t for t, g in goals if not z3.is_true(model.eval(g, model_completion=True))] == [], (role, k, i)
            seen.add(role)
    assert seen == set(queries)


# ----------------------------------------------------------------------------
# a design changed in the builder and the plan together: the layers prove, the chain does not
def _build(monkeypatch, name, wrap, N=3):
    real = getattr(H, name)
    with monkeypatch.context() as mp:
        mp.setattr(H, name, wrap(real))
        return H.istree_hybrid(N)


def _plan_with(monkeypatch, head, copy):
    real = CI.plan

    def plan():
        out = real()
        kind, args, cp = out[head]
        out[head] = (kind, args, {**cp, **copy})
        return out
    monkeypatch.setattr(CI, "plan", plan)
    monkeypatch.setattr(C, "plan", plan)


def _chain_fails(roles_failing, roles_holding):
    for role in roles_failing:
        f = C._role_fact(role, "mutant")
        assert f["answer"] == "sat" and "reference's next token" in f["counterexample"], (role, f)
    for role in roles_holding:
        assert C._role_fact(role, "mutant")["answer"] == "unsat", role


def test_a_fetch_one_position_off_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    wrap = head_kwargs("fetch", lambda kw: {**kw, "components": [
        dataclasses.replace(c, query={"joins": 3, "edge_markers": 2, "one": 1}) for c in kw["components"]]})
    model = _build(monkeypatch, "match_head", wrap)
    monkeypatch.setattr(CI, "_FETCH_QUERY", {"joins": 3, "edge_markers": 2, "one": 1})
    assert _failed(CI.head_facts(model)) == []
    _chain_fails(["eos", "s"], ["p"])


def test_r_u_copied_from_prev1_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    model = _build(monkeypatch, "latest_flag_head", last_su_copies_r_u_from_prev1)
    _plan_with(monkeypatch, "last_su", {"latest_ru": {"prev1": 1}})
    assert _failed(CI.head_facts(model)) == []
    _chain_fails(["sv"], [])


def test_a_lone_roots_size_as_code_1_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    model = _build(monkeypatch, "match_head", head_kwargs(
        "size", lambda kw: {**kw, "copy": {"root_size": {"tok": 1, "is_bos": 1}}}))
    _plan_with(monkeypatch, "size", {"root_size": {"tok": 1, "is_bos": 1}})
    assert _failed(CI.head_facts(model)) == []
    _chain_fails(["marku"], [])


def test_the_merged_size_delayed_by_4_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    def wrap(real):
        def patched(rec, name, combo, depth, outs):
            if name == "s":
                depth, outs = 4, {4: "merged_size@5"}
            return real(rec, name, combo, depth, outs)
        return patched
    model = _build(monkeypatch, "delay_chain", wrap)
    real = CI.direction_plan

    def direction_plan(model):
        out = real(model)
        out[2]["merged_size@5"] = lambda st, u: st.delay({"tok": 1, "prev2": 1, "one": -1}, 4, u)
        return out
    monkeypatch.setattr(CI, "direction_plan", direction_plan)
    monkeypatch.setattr(C, "direction_plan", direction_plan)
    assert _failed(CI.recurrence_facts(model)) == []
    _chain_fails(["p2"], [])


def test_the_child_root_slot_writing_the_parent_root_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    def wrap(real):
        def patched(value, gates, big, out, closed=(), bias=0):
            if gates == [{"after_sv3": 1}]:
                value = {"parent_root@2": 1}
            return real(value, gates, big, out, closed, bias)
        return patched
    model = _build(monkeypatch, "gated_value_neuron", wrap)
    real = CI.role_plan

    def role_plan():
        return [(r, f, t, (lambda v: v["parent_root@2"]) if r == "after_sv3" else w) for r, f, t, w in real()]
    monkeypatch.setattr(CI, "role_plan", role_plan)
    monkeypatch.setattr(CI, "_EMITS", {**CI._EMITS, "after_sv3": "parent_root@2"})
    assert _failed(CI.next_code_facts(model, 3)) == []
    _chain_fails(["tilde"], ["c"])


def test_last_su_keyed_by_a_flag_also_set_at_s_v_in_builder_and_plan_fails_only_the_chain(monkeypatch):
    """chain_marker@1 is 1 right after either marker: at s_v the head would attend
    s_v itself (a second review's find: the head's flag is now an offer of every role)."""
    def wrap(real):
        def patched(name, flag, pos, one, copy, fmt, max_pos):
            return real(name, {"chain_marker@1": 1} if name == "last_su" else flag, pos, one, copy, fmt, max_pos)
        return patched
    model = _build(monkeypatch, "latest_flag_head", wrap)
    real = CI.plan

    def plan():
        out = real()
        kind, _, copy = out["last_su"]
        out["last_su"] = (kind, ("chain_marker@1",), copy)
        return out
    monkeypatch.setattr(CI, "plan", plan)
    monkeypatch.setattr(C, "plan", plan)
    assert _failed(CI.head_facts(model)) == []
    f = C._role_fact("sv", "mutant")
    assert f["answer"] == "sat" and "last_su's flag chain_marker@1 = 0" in f["counterexample"], f
    assert C._role_fact("su", "mutant")["answer"] == "unsat"


def test_a_clock_at_twice_the_position_fails_the_chain(monkeypatch):
    """The recurrences' plan writing cnt = 2 (t + 1) (a builder can be made to match,
    and every per-layer fact then holds): the heads' lemmas take cnt = j + 1 at
    the key, so every role's fact fails."""
    real = CI.direction_plan

    def direction_plan(model):
        out = real(model)
        out[0]["cnt"] = lambda st, u: z3.ToReal(2 * (u + 1))
        out[0]["cnt_sq"] = lambda st, u: z3.ToReal(4 * (u + 1) * (u + 1))
        return out
    monkeypatch.setattr(C, "direction_plan", direction_plan)
    for role in ("bos", "xu"):
        f = C._role_fact(role, "mutant")
        assert f["answer"] == "sat" and "cnt = t + 1" in f["counterexample"], f


def test_the_recurrence_proofs_memo_is_keyed_by_the_plan(monkeypatch):
    model = H.istree_hybrid(3)
    assert _failed(CI.recurrence_facts(model)) == []
    real = CI.direction_plan

    def direction_plan(model):
        out = real(model)
        out[0]["cnt"] = lambda st, u: z3.ToReal(u + 7)
        return out
    monkeypatch.setattr(CI, "direction_plan", direction_plan)
    assert _failed(CI.recurrence_facts(model)) == ["rnn1.directions"]


def test_a_prefix_sum_the_reference_does_not_count_is_named(monkeypatch):
    real = CI.direction_plan

    def direction_plan(model):
        out = real(model)
        out[1]["joins"] = lambda st, u: st.prefix({"at_parent_record": 1}, u)
        return out
    monkeypatch.setattr(C, "direction_plan", direction_plan)
    facts = C.chain_facts(tag="mutant")
    assert [f["fact"] for f in facts] == ["chain.read"] and "at_parent_record" in facts[0]["counterexample"]


def test_a_delay_read_before_its_source_is_written_fails_the_order(monkeypatch):
    """chain_marker@1 moved into RNN layer 1's recurrence (builder and plan), which
    runs before layer 1's MLP writes chain_marker: the model's delay reads 0 there,
    every per-layer fact holds (a recurrence is proved for any input sequence), and
    the role facts, which read each direction at its writer's value, cannot see
    it; the order fact names it."""
    from rnngap.constructions.build.gadgets import Recurrence, delay_chain
    orig_space, orig_counters = H._istree_space, H._istree_counters

    def space(m_max, P, code_max):
        s, front = orig_space(m_max, P, code_max)
        s.hidden("chain_marker@1")
        delay_chain(front, "chain_marker", {"chain_marker": 1}, 1, {1: "chain_marker@1"})
        return s, front

    def counters(N, code_max):
        rec, mlp = orig_counters(N, code_max)
        out = Recurrence()
        for name in ("joins", "edge_markers"):
            st = out.add_state(f"s_{name}")
            out.A[(st, st)] = 1
            for (s_, d), c in rec.B.items():
                if s_ == f"s_{name}":
                    out.B[(st, d)] = c
            out.C[(name, st)] = 1
        return out, mlp
    monkeypatch.setattr(H, "_istree_space", space)
    monkeypatch.setattr(H, "_istree_counters", counters)
    monkeypatch.setattr(H, "_IST_COUNTERS", tuple(d for d in H._IST_COUNTERS if d != "chain_marker@1"))
    model = H.istree_hybrid(3)
    real = CI.direction_plan

    def direction_plan(model):
        out = real(model)
        out[0]["chain_marker@1"] = out[1].pop("chain_marker@1")
        return out
    monkeypatch.setattr(CI, "direction_plan", direction_plan)
    monkeypatch.setattr(C, "direction_plan", direction_plan)
    assert _failed(CI.facts(model, 3)) == []
    f = C.order_fact()
    assert f["answer"] == "sat" and "RNN layer 1's recurrence reads chain_marker, written by RNN layer 1's MLP" \
        in f["counterexample"], f


def test_two_writers_of_one_direction_fail_the_order(monkeypatch):
    """A direction the plans let two layers, or two heads, write: the model adds the
    writes, the chain would read one of them."""
    real_rp, real_plan = CI.record_plan, CI.plan

    def record_plan(v):
        return real_rp(v) + [("prev1_bump", [], "prev1", v["is_dash"], "prev1 += is_dash")]
    monkeypatch.setattr(C, "record_plan", record_plan)
    f = C.order_fact()
    assert f["answer"] == "sat" and "prev1 is written by RNN layer 1's recurrence and by RNN layer 1's MLP" \
        in f["counterexample"], f
    monkeypatch.setattr(C, "record_plan", real_rp)

    def plan():
        out = real_plan()
        kind, args, copy = out["fetch"]
        out["fetch"] = (kind, args, {**copy, "latest_ru": {"tok": 1}})
        return out
    monkeypatch.setattr(C, "plan", plan)
    f = C.order_fact()
    assert f["answer"] == "sat" and "latest_ru is written by head fetch and by head last_su" in f["counterexample"]


# ----------------------------------------------------------------------------
# the row
def test_the_row_with_the_composition_covers_it():

    res = rows.layer_row(CI.NAME, ((2, 2),), chain=True)
    assert res.certified and res.covers[-1] == "composition"
    chain = [f for f in res.facts if f["fact"].startswith(CI.CHAIN_LABEL)]
    assert len(chain) == 1 + len(C._PROMPT_ROLES + C._SEG_ROLES)
    plain = rows.layer_row(CI.NAME, ((3, 3),))
    merged = rows.merge([res, plain])
    assert "composition" in merged.covers and rows.sizes_text(merged) == "(N, m_max) in (2, 2), (3, 3)"

