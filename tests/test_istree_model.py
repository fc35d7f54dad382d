"""The IsTree Transformer (constructions/models/istree.py, claim T4.7-up).

Layers of checks: the new gadgets (multi-component match with [BOS] fallback,
the mask and max neurons) on their own; the decoded residual of the whole model
compared step by step with the reference algorithm's quantities (pred pointers
at record positions; parent, e_prev, next neighbour, visited at CoT steps);
whole-model runs against the plain-Python reference (dfs_tour, networkx) on
every graph up to 4 vertices in every edge order, every graph on 5 vertices in
two orders, a seeded sample on 6 (all of n <= 6 in every order up to 5 edges in
the full profile), hypothesis up to 500 vertices (10^4 in the full profile);
resources (constant parameter count, used precision within the declared
O(log n), CoT <= 2n), NUMBA_DISABLE_JIT=1 equality; the label from the model
(the [COUNT] N header: no Python label path); the image of the Index -> IsTree
hub gadget (both formats); necessity in saturate mode (a wrong gadget instance
one integer bit below the measured frontier).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rnngap.checks.verify import checks_istree as X
from rnngap.checks.io.formats import graph_tokens
from rnngap.checks.tasks import istree as R
from rnngap.constructions.models import istree as C
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build import gadgets as G
from rnngap.constructions.build.gadgets import Builder, MarginError, ResidualSpace
from rnngap.constructions.machine.vocab import BOS, COUNT, DASH, EOS, FALSE, NUMBER_BASE, TILDE, TRUE, Vocab, number_token

REPO = Path(__file__).resolve().parents[1]
_MODELS: dict = {}


def model_for(n: int, m: int):
    """One model per (N, M) per test session (weights are a pure function of it)."""
    if (n, m) not in _MODELS:
        _MODELS[(n, m)] = C.istree_transformer(n, m)
    return _MODELS[(n, m)]


def tau(tok: int) -> int:
    return tok - NUMBER_BASE + 1 if tok >= NUMBER_BASE else -tok


# ----------------------------------------------------------------------------
# block level: the multi-component match head with [BOS] fallback
def _pair_model(n: int, tie_break, fmt: FixedFormat):
    """[BOS] then number tokens; query at position i: (tau_i, tau_{i-1}); key at j:
    (tau_{j-1}, tau_j) gated by 'j >= 2'; copies pos_j."""
    s = ResidualSpace()
    for lab, kind, param in (("one", K.F_ONE, 0), ("tok", K.F_TOK, 0), ("tok_sq", K.F_TOK_SQ, 0),
                             ("pos", K.F_POS, 0), ("pos_sq", K.F_POS_SQ, 0), ("is_bos", K.F_IS_TOKEN, BOS)):
        s.embedded(lab, kind, param)
    for lab in ("p", "p_sq", "p2", "valid", "hit"):
        s.hidden(lab)
    b = Builder("pair-match", "transformer", Vocab(n), s)
    T = n + 2
    b.attention_layer([C.shift_head("prev", "pos", "pos_sq", "one", {"p": {"tok": 1}, "p_sq": {"tok_sq": 1}},
                                    fmt, n_positions=T),
                       C.shift_head("prev2", "pos", "pos_sq", "one", {"p2": {"is_bos": 1}}, fmt, n_positions=T,
                                    shift=2)])
    # valid_j = [j >= 2] = 1 - is_bos - [token j-1 is BOS]... built as a neuron: relu(1 - is_bos - p2)
    # (p2 = [token j-2 is BOS] is 1 at j = 0, 1, 2), so valid = [j >= 3]
    from rnngap.constructions.build.gadgets import Neuron
    b.attention_layer([], [Neuron({"one": 1, "is_bos": -1, "p2": -1}, 0, {"valid": 1})])
    comps = [G.Component({"tok": 1}, {"p": 1}, {"p_sq": 1}, n + 1, n + 1, query_sq={"tok_sq": 1}),
             G.Component({"p": 1}, {"tok": 1}, {"tok_sq": 1}, n + 1, n + 1, query_sq={"p_sq": 1}),
             G.flag_component("valid")]
    b.attention_layer([G.match_head("pair", components=comps, copy={"hit": {"pos": 1}}, fmt=fmt, n_positions=T,
                                    tie_break=tie_break, fallback="bos")])
    b.readout([("hit", K.F_TOK, 0, 1)])
    return b.build(fmt)


def _pair_reference(toks, i, tie_break):
    q = (tau(toks[i]), tau(toks[i - 1]) if i >= 1 else 0)
    hits = [j for j in range(3, i + 1) if (tau(toks[j - 1]), tau(toks[j])) == q]
    if not hits:
        return 0
    if tie_break is None:
        return hits[0] if len(hits) == 1 else None
    return hits[0] if tie_break == "first" else hits[-1]


@pytest.mark.parametrize("tie_break", [None, "first", "last"])
@pytest.mark.parametrize("n", [6, 20])
def test_match_head_with_fallback_exact_with_fallback(n, tie_break):
    fmt = FixedFormat(C.declared_int_bits(n, n), C.FRAC_BITS)
    model = _pair_model(n, tie_break, fmt)
    rng = np.random.default_rng(n)
    checked = 0
    for _ in range(40):
        toks = [BOS] + [number_token(int(v)) for v in rng.integers(0, 3, size=n)]
        sess = model.session(capacity=len(toks))
        for i, t in enumerate(toks):
            sess.feed([t])
            want = _pair_reference(toks, i, tie_break)
            if want is None:        # several matches without a tie-break: no promise
                continue
            assert sess.residual()["hit"] == want, (toks, i)
            checked += 1
    assert checked > 100


def test_match_head_with_fallback_margin_error_when_bits_too_few():
    with pytest.raises(MarginError):
        _pair_model(20, "last", FixedFormat(8, C.FRAC_BITS))


def test_match_head_with_fallback_weights_are_zero_or_one():
    n = 10
    model = _pair_model(n, "first", FixedFormat(C.declared_int_bits(n, n), C.FRAC_BITS))
    toks = [BOS] + [number_token(v) for v in (1, 2, 1, 2, 1, 2, 0, 0, 1, 2)]
    sess = model.session(capacity=len(toks), record=True)
    for t in toks:
        sess.feed([t])
        w = sess.attention()[2, 0]          # layer 3, head 0 (the pair head)
        assert sorted(set(w.tolist())) in ([1.0], [0.0, 1.0])


# ----------------------------------------------------------------------------
# the decoded residual, step by step, against the reference algorithm
def _reference_trace(edges):
    """Plain Python: pred pointers per record position, and per CoT position t the
    quantities of one step: parent tau, e_prev, next neighbour tau (0 none), visited."""
    ids = [3 * k + 3 for k in range(len(edges))]
    preds = {}
    for k, (a, b) in enumerate(edges):
        def prev(x):
            earlier = [ids[j] for j in range(k) if x in edges[j]]
            return earlier[-1] if earlier else 0
        preds[ids[k]] = (prev(a), prev(b))
    inc = {}                                      # vertex -> [(edge id, other endpoint)] in order
    for k, (a, b) in enumerate(edges):
        inc.setdefault(a, []).append((ids[k], b))
        inc.setdefault(b, []).append((ids[k], a))
    tour = R.dfs_tour(C.model_vertex_count(edges), edges)
    steps = []
    for t, u in enumerate(tour):
        first = tour.index(u)
        parent = tour[first - 1] + 1 if first > 0 else -1
        p = tour[t - 1] + 1 if t > 0 else -1
        if p == parent:
            e_prev = 0
        else:
            e_prev = next(e for e, o in inc[u] if o + 1 == p)
        after = [(e, o) for e, o in inc.get(u, []) if e > e_prev]
        if after and after[0][1] + 1 == parent:
            after = after[1:]
        w = after[0][1] + 1 if after else 0
        visited = int(w > 0 and (w - 1) in tour[:t + 1])
        steps.append({"parent": parent, "e_prev": e_prev, "w": w, "has_w": int(w > 0), "visited": visited})
    return preds, tour, steps


GRAPHS = [[(2, 0), (3, 2), (1, 0)], [(2, 0), (2, 1), (1, 0)], [(1, 0), (2, 1), (3, 2), (3, 0), (4, 1)],
          [(0, 3), (4, 3), (1, 4), (2, 4), (5, 2)], [(3, 1), (2, 1)], [(4, 0), (1, 4), (0, 2), (2, 3), (3, 4)]]


@pytest.mark.parametrize("edges", GRAPHS)
def test_residual_matches_reference_step_by_step(edges):
    model = model_for(6, 15)
    preds, tour, steps = _reference_trace(edges)
    prompt = graph_tokens(edges)
    sess = model.session(capacity=len(prompt) + 2 * len(tour) + 4)
    for pos, t in enumerate(prompt):
        sess.feed([t])
        if pos in preds:
            res = sess.residual()
            assert (res["pred_u"], res["pred_v"]) == preds[pos], (edges, pos)
            assert (res["pred_u_sq"], res["pred_v_sq"]) == (preds[pos][0] ** 2, preds[pos][1] ** 2)
    assert sess.residual()["out"] == 1                      # vertex 0 first
    for u, want in zip(tour, steps):
        sess.feed([number_token(u)])
        res = sess.residual()
        got = {k: res[k] for k in want}
        assert got == want, (edges, u)


def test_keys_vanish_at_bos():
    """The [BOS] fallback needs every key component to be 0 at position 0."""
    sess = model_for(6, 15).session(capacity=2)
    sess.feed([BOS])
    res = sess.residual()
    for lab in ("tok", "tok_sq", "back1", "back1_sq", "is_record", "back2", "back2_sq", "back3", "back3_sq", "back5", "back5_sq",
                "after_eos", "pred_u", "pred_u_sq", "pred_v", "pred_v_sq"):
        assert res[lab] == 0, lab


# ----------------------------------------------------------------------------
# whole model against the reference
def _assert_outcome(out: X.Outcome, count: int | None = None):
    assert out.failures == 0, out.first_failure
    assert out.instances > 0
    if count is not None:
        assert out.instances == count


def test_examples_from_the_docs():
    model = model_for(4, 4)
    g = C.run(model, [(2, 0), (3, 2), (1, 0)])
    assert g.cot + [g.answer] == R.reference_cot(4, [(2, 0), (3, 2), (1, 0)])
    assert [t - NUMBER_BASE for t in g.cot[:-1]] == [0, 2, 3, 2, 0, 1, 0]
    assert (g.cot[-1], g.answer) == (EOS, TRUE)
    g = C.run(model, [(2, 0), (2, 1), (1, 0)])
    assert [t - NUMBER_BASE for t in g.cot[:-1]] == [0, 2, 1] and g.answer == FALSE
    g = C.run(model, [])
    assert g.cot == [number_token(0), EOS] and g.answer == TRUE


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_exhaustive_every_graph_every_order(n):
    """Every graph on n <= 4 vertices in every edge order (at most 6 edges: all
    orders up to 5 edges, 3 seeded orders for the 6-edge graph): teacher-forced
    predictions equal the reference tour, [EOS] and label token for token."""
    model = model_for(n, n * (n - 1) // 2)
    cases = X.exhaustive_cases(n, np.random.default_rng(40 + n))
    want = sum(len(R.edge_orders(list(i.edges), 3, np.random.default_rng(0))) for i in R.enumerate_all(n))
    _assert_outcome(X.teacher_forced_failures(model, cases), want)


def test_exhaustive_five_vertices_two_orders_and_tilde():
    model = model_for(5, 10)
    cases = X.exhaustive_cases(5, np.random.default_rng(5), orders_beyond=2, all_orders=False)
    _assert_outcome(X.teacher_forced_failures(model, cases), 2 * 1024)
    _assert_outcome(X.teacher_forced_failures(model, cases[::7], sep=TILDE))


def test_six_vertices_seeded_sample():
    model = model_for(6, 15)
    _assert_outcome(X.teacher_forced_failures(model, X.sampled_cases(6, np.random.default_rng(6), 400)), 400)


@pytest.mark.full
@pytest.mark.parametrize("n", [5, 6])
def test_exhaustive_all_orders_full(n):
    """Every graph on 5 and 6 vertices, every edge order up to 5 edges, 3 seeded
    orders beyond (checks.tasks.istree.edge_orders)."""
    model = model_for(n, n * (n - 1) // 2)
    out = X.Outcome()
    for inst in R.enumerate_all(n):
        X.teacher_forced_failures(model, [(n, o) for o in R.edge_orders(list(inst.edges), 3,
                                                                          np.random.default_rng(len(inst.edges)))],
                                  out=out)
    _assert_outcome(out)


def test_teacher_forcing_agrees_with_greedy_generation():
    """The batched check and the generation driver give the same verdicts (and the
    driver's CoTs equal the reference), on a seeded sample including reversed
    orientations and '~'."""
    model = model_for(6, 15)
    cases = X.sampled_cases(6, np.random.default_rng(11), 60) + X.sparse_cases(np.random.default_rng(12), 6, 20)
    _assert_outcome(X.greedy_failures(model, cases), len(cases))
    _assert_outcome(X.greedy_failures(model, cases[:20], sep=TILDE), 20)
    _assert_outcome(X.teacher_forced_failures(model, cases), len(cases))


# ----------------------------------------------------------------------------
# the label from the model: the [COUNT] N header
class LabelForcedTrue:
    """The model with its prediction at the label position replaced by [TRUE]."""

    def __init__(self, inner):
        self.inner, self.spec = inner, inner.spec

    def predict_batch(self, toks, lengths, all_positions=False):
        preds = self.inner.predict_batch(toks, lengths, all_positions=all_positions)
        for b, L in enumerate(lengths):
            preds[b, L - 1] = TRUE            # the prediction after the CoT's [EOS]
        return preds


def test_count_header_format_and_validation():
    edges = [(1, 0), (2, 1)]
    assert C.model_vertex_count(edges) == 3 and C.model_vertex_count([]) == 1
    assert C.prompt_tokens(edges, n_nodes=5) == [BOS, COUNT, number_token(5)] + graph_tokens(edges)[1:]
    assert C.with_count(graph_tokens([(2, 1)], sep="~"), 4)[:4] == [BOS, COUNT, number_token(4), number_token(2)]
    assert not C.needs_count(3, edges) and C.needs_count(4, edges)
    with pytest.raises(ValueError, match="vertex 2"):
        C.needs_count(2, edges)
    with pytest.raises(ValueError, match="not below the vertex count"):
        C.with_count(graph_tokens(edges), 2)
    with pytest.raises(ValueError, match="already has"):
        C.with_count(C.prompt_tokens(edges, n_nodes=4), 4)
    with pytest.raises(ValueError, match="exceeds the model's bounds"):
        C.run(model_for(4, 4), edges, n_nodes=5)          # N = 5 > the model's 4 vertices
    assert Vocab(3, count=True).contains(COUNT) and not Vocab(3).contains(COUNT)
    assert Vocab(3, count=True).decode([COUNT]) == ["[COUNT]"]


def test_the_model_reads_the_vertex_count():
    """The same edges, with and without the header: the model's own label changes
    with N (an isolated vertex above the largest id makes it [FALSE]), the tour
    does not; the header with N = max id + 1 changes nothing."""
    model = model_for(6, 6)
    for edges in ([(1, 0), (2, 1)], [(2, 0), (3, 2), (1, 0)], [], [(3, 1), (2, 1)]):
        plain = C.run(model, edges)
        seen = C.model_vertex_count(edges)
        for N in range(seen, 7):
            g = C.run(model, edges, n_nodes=N)
            assert g.cot == plain.cot and g.stopped == "answer"
            assert g.answer == (TRUE if R.reference_label(N, edges) else FALSE), (edges, N)
            assert g.cot + [g.answer] == R.reference_cot(N, edges)
        assert plain.answer == (TRUE if R.reference_label(seen, edges) else FALSE)
    # a tree on 0..2 is a tree; with N = 4 (vertex 3 isolated) the model itself says [FALSE]
    assert C.run(model, [(1, 0), (2, 1)]).answer == TRUE
    assert C.run(model, [(1, 0), (2, 1)], n_nodes=4).answer == FALSE


def test_no_label_from_python():
    """No Python label path exists any more (answer_for is gone and nothing
    refers to it), and the label the checks compare is the model's own
    prediction: a model whose label prediction is forced to [TRUE] fails
    exactly on the non-trees, the isolated-vertex graphs included."""
    assert not hasattr(C, "answer_for")
    mods = ["checks/verify/checks_istree.py", "checks/cli/predict_istree.py", "constructions/models/istree.py",
            "notebooks/_build.py"] + sorted(str(p.relative_to(REPO)) for p in (REPO / "notebooks" / "src").glob("*.py"))
    assert len(mods) > 4, "the notebook sources were not found"
    for mod in mods:
        assert "answer_for" not in (REPO / mod).read_text(), mod

    model = model_for(4, 6)
    cases = [(4, [(1, 0), (2, 1)]), (4, [(1, 0), (2, 1), (3, 2)]), (3, [(1, 0), (2, 1)]), (2, [])]
    assert X.teacher_forced_failures(model, cases).failures == 0
    forced = X.teacher_forced_failures(LabelForcedTrue(model), cases)
    # the non-trees: the path 0-1-2 with vertex 3 isolated (header) and 2 vertices without edges (header)
    assert forced.failures == 2 and "label predicted 2 want 3" in forced.first_failure
    with pytest.raises(ValueError, match="needs the \\[COUNT\\] header"):
        X.teacher_forced_failures(model, cases[:1], count="never")


def test_header_on_every_prompt_changes_nothing_exhaustive():
    """Every graph on 4 vertices in its enumeration order, with [COUNT] 4 on every
    prompt (and on the graphs that need it only): tours and labels unchanged."""
    model = model_for(4, 6)
    cases = X.exhaustive_cases(4, np.random.default_rng(1), orders_beyond=1, all_orders=False)
    _assert_outcome(X.teacher_forced_failures(model, cases, count="always"), 64)
    _assert_outcome(X.teacher_forced_failures(model, cases, count="auto"), 64)


def test_graph_beyond_the_model_bounds_is_refused():
    with pytest.raises(ValueError, match="exceeds the model's bounds"):
        C.run(model_for(4, 4), [(5, 0)])


# ----------------------------------------------------------------------------
# hypothesis
@given(R.graphs(1, 12), st.sampled_from([DASH, TILDE]))
def test_hypothesis_small_any_graph(graph, sep):
    n, edges = graph
    model = model_for(12, 66)
    _assert_outcome(X.greedy_failures(model, [(n, list(edges))], sep=sep), 1)
    assert model.resources.used_precision_bits <= model.fmt.total_bits


@st.composite
def sparse_graph(draw, n_min, n_max):
    n = draw(st.integers(n_min, n_max))
    seed = draw(st.integers(0, 2**32 - 1))
    k = draw(st.integers(0, 4))
    return X.sparse_cases(np.random.default_rng(seed), n, k + 1)[k]


@settings(max_examples=25)
@given(sparse_graph(7, 60))
def test_hypothesis_sparse_medium(case):
    model = model_for(60, 62)
    out = X.greedy_failures(model, [case])
    _assert_outcome(out, 1)
    assert out.cot_max <= 2 * case[0]


@settings(max_examples=3)
@given(sparse_graph(400, 500))
def test_hypothesis_sparse_up_to_500_vertices(case):
    model = model_for(500, 502)
    out = X.greedy_failures(model, [case])
    _assert_outcome(out, 1)
    assert out.cot_max <= 2 * case[0]
    assert model.resources.used_precision_bits <= model.fmt.total_bits


@pytest.mark.full
@settings(max_examples=1)
@given(sparse_graph(10000, 10000))
def test_hypothesis_ten_thousand_vertices_full(case):
    model = model_for(10000, 10002)
    out = X.greedy_failures(model, [case])
    _assert_outcome(out, 1)
    assert out.cot_max <= 2 * case[0]
    assert model.resources.used_precision_bits <= model.fmt.total_bits


# ----------------------------------------------------------------------------
# resources
def test_parameter_count_and_shape_are_constant():
    counts = set()
    for n, m in ((1, 0), (4, 6), (64, 66), (500, 502), (10000, 10002)):
        mdl = C.istree_transformer(n, m)
        spec = mdl.spec
        counts.add((mdl.resources.params, spec.width, len(spec.attn_layers),
                    tuple(len(L.heads) for L in spec.attn_layers), tuple(L.W1.shape[0] for L in spec.attn_layers)))
    assert len(counts) == 1
    (params, width, layers, heads, _), = counts
    assert layers == C.N_LAYERS and sum(heads) == C.N_HEADS


def test_declared_precision_is_logarithmic_and_matches_the_expression():
    for n, m in ((1, 0), (5, 10), (64, 66), (500, 502), (10000, 10002), (123, 7000)):
        assert int(C.INT_EXPR.subs({C.N_SYM: n, C.M_SYM: m})) == C.declared_int_bits(n, m)
        assert int(C.T_EXPR.subs({C.N_SYM: n, C.M_SYM: m})) == C.n_positions(n, m)
    assert C.FRAC_EXPR == C.FRAC_BITS
    # O(log): I <= 3 ceil(log2 max(T, 31)) + 6 at every size (T = the context length)
    for k in range(0, 21):
        n = 2 ** k
        for m in (0, n, 4 * n, n * (n - 1) // 2):
            T = C.n_positions(n, m)
            assert C.declared_int_bits(n, m) <= 3 * math.ceil(math.log2(max(T, 31))) + 6
    assert C.declared_format(65536, 65538).total_bits <= 63
    assert C.istree_transformer(65536, 65538).fmt.total_bits == 63      # every head's own margin check passes there
    assert C.declared_format(10000).total_bits <= 63


def test_used_precision_within_declared_and_margins_refuse_too_few_bits():
    n = 40
    cases = X.sparse_cases(np.random.default_rng(3), n, 6)
    model = C.istree_transformer(n, n + 2)
    _assert_outcome(X.greedy_failures(model, cases))
    used = model.resources.used_int_bits
    assert model.resources.used_precision_bits <= model.fmt.total_bits
    with pytest.raises(MarginError):
        C.istree_transformer(n, n + 2, fmt=FixedFormat(used - 1, C.FRAC_BITS))


def test_necessity_record_shows_a_wrong_answer_below_the_frontier():
    """Saturate mode on the hub gadget (n = 3): the integer frontier is within the
    declaration, one bit below it a concrete gadget instance is answered wrongly
    (named in the note: a wrong final label, not a CoT deviation), and the record says
    the fraction frontier f = 0 is the floor (neither tight nor not)."""
    (rec,) = X.necessity_check("quick", 0)
    assert rec.kind == "necessity" and rec.family == "reduction" and rec.passed, rec.note
    assert rec.frontier_int_bits <= C.declared_int_bits(6, 5) and rec.wrong_below is True and rec.int_tight
    assert rec.instances == 2 * 3 * 2 ** 3
    assert f"at {rec.frontier_int_bits - 1}: " in rec.note and "wrong final answer, e.g. N=6 edges=" in rec.note
    assert rec.frontier_frac_bits == 0 and rec.frac_tight is None and "floor" in rec.note
    assert rec.int_slack == C.declared_int_bits(6, 5) - rec.frontier_int_bits




@pytest.mark.parametrize("n, density", [(30, 1.0), (40, 0.5)])
def test_dense_graphs_within_declared_bits(n, density):
    """Dense graphs (up to the complete graph): the prompt-side MLP values grow like
    T^2 N (T ~ 1.5 n^2), which the declaration covers."""
    rng = np.random.default_rng(n)
    pairs = [(i, j) for i in range(n) for j in range(i)]
    edges = [pairs[k] for k in rng.permutation(len(pairs)) if rng.random() < density]
    model = C.istree_transformer(n, len(pairs))
    _assert_outcome(X.greedy_failures(model, [(n, edges)]), 1)
    assert model.resources.used_precision_bits <= model.fmt.total_bits


def test_cot_bound():
    model = model_for(12, 66)
    for n in range(1, 13):
        edges = R.random_tree(np.random.default_rng(n), n).edges
        g = C.run(model, edges)
        assert g.cot_length == 2 * n and g.cot_length <= C.cot_bound(n)


_NOJIT_SCRIPT = """
import json, sys
from rnngap.constructions.models import istree as C
m = C.istree_transformer(4, 6)
out = []
for edges in json.loads(sys.argv[1]):
    g = C.run(m, [tuple(e) for e in edges])
    out.append(g.cot + [g.answer])
print(json.dumps([out, m.resources.used_precision_bits]))
"""


def test_numba_disabled_gives_identical_results():
    graphs = [[(2, 0), (3, 2), (1, 0)], [(2, 0), (2, 1), (1, 0)], [(3, 1), (2, 1)]]
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    res = subprocess.run([sys.executable, "-c", _NOJIT_SCRIPT, json.dumps(graphs)], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    cots, bits = json.loads(res.stdout)
    m = C.istree_transformer(4, 6)
    want = []
    for edges in graphs:
        g = C.run(m, edges)
        want.append(g.cot + [g.answer])
    assert cots == want and bits == m.resources.used_precision_bits


# ----------------------------------------------------------------------------
# claim T4.7-low: the adjacency RNN (correct on small graphs) and the witnesses
def test_adjacency_rnn_solves_small_graphs_with_its_cot():
    from rnngap.constructions.build.protocol import run_rnn
    K = 4
    rnn = X.AdjacencyRNN(K, cot=True)
    for n in range(1, K + 1):
        for case_n, edges in X.exhaustive_cases(n, np.random.default_rng(n)):
            r = run_rnn(rnn, graph_tokens(edges), (TRUE, FALSE), 2 * K + 1)
            N = C.model_vertex_count(edges)
            assert r.answer == (TRUE if R.reference_label(N, edges) else FALSE), edges
            assert r.cot[-1] == EOS and len(r.cot) <= 2 * K
    assert rnn.state_bits == K * (K - 1) // 2 + 2 + 3 * 3 + 1 + 4


def test_adjacency_rnn_state_key_fits_and_determines_behaviour():
    rnn = X.AdjacencyRNN(5)
    s = rnn.initial_state()
    for t in graph_tokens([(4, 0), (3, 4), (7, 1)]):
        s = rnn.step(s, t)
        assert len(rnn.state_key(s)) * 8 <= rnn.state_bits + 7
    assert rnn.output(s) == number_token(0)          # CoT starts with vertex 0


def test_lower_bound_check_records_pass_and_witness_is_verified():
    recs = X.istree_lower_bound_check("quick", 0)
    assert all(r.passed for r in recs), [(r.model, r.description, r.note) for r in recs if not r.passed]
    assert all(r.alphabet is None and r.family in ("reduction", "all-graphs") for r in recs)
    wit = [r for r in recs if "fooling pair" in r.description]
    assert len(wit) == 2 and all(r.instances == 2 for r in wit)


def test_witness_verifier_rejects_a_wrong_witness():
    from rnngap.lowerbounds.reductions import ISTREE
    from rnngap.lowerbounds.witness import find_witness
    rnn = X.AdjacencyRNN(5)
    w = find_witness(rnn, ISTREE, 4, mode="exhaustive", max_cot=11)
    assert w.found and X._verify_istree_witness(rnn, w, 11) == ""
    w.wrong = ("x'",) if w.wrong == ("x",) else ("x",)
    assert "disagree" in X._verify_istree_witness(rnn, w, 11)
    # a model big enough for the whole gadget (n + 3 = 7 vertices) is not fooled at n = 4
    w = find_witness(X.AdjacencyRNN(7), ISTREE, 4, mode="exhaustive", max_cot=15)
    assert not w.found and "no witness" in X._verify_istree_witness(X.AdjacencyRNN(7), w, 15)


# ----------------------------------------------------------------------------
# the paper's own sample (shared/data), as `rnngap verify` checks it
from rnngap.checks.io.shared_data import shared_data_dir  # noqa: E402  (RNNGAP_SHARED_DATA, else the package data)

SAMPLE = shared_data_dir() / "istree_official_sample.jsonl"


def _sample_lines() -> list[str]:
    if not SAMPLE.is_file():
        pytest.fail(f"the paper's IsTree sample is missing: {SAMPLE} "
                    "(the package data checks/data, or RNNGAP_SHARED_DATA)")
    return [line for line in SAMPLE.read_text().splitlines() if line.strip()]


def _sample_check_in(tmp_path, monkeypatch, lines: list[str]):
    (tmp_path / X.SAMPLE_NAME).write_text("".join(line + "\n" for line in lines))
    monkeypatch.setenv("RNNGAP_SHARED_DATA", str(tmp_path))
    recs = X.paper_sample_check("quick", 0)
    assert len(recs) == 1
    return recs[0]


def test_paper_sample_check_passes_on_every_row(tmp_path, monkeypatch):
    lines = _sample_lines()
    rows = [json.loads(line) for line in lines]
    rec = _sample_check_in(tmp_path, monkeypatch, lines)
    assert rec.passed and rec.checked, rec.note
    assert rec.claim == "T4.7-up" and rec.instances == len(rows) == 64 and rec.failures == 0
    assert rec.cot_max <= rec.cot_bound and rec.precision_bits_used <= rec.precision_bits_declared
    differ = sum(r["official_label"] != r["is_tree"] for r in rows)       # 2, per shared/data/README.md
    assert differ == 2 and f"differs from it on {differ} rows" in rec.note
    # the check reads the graph of cot_text and its tour: the rows' own tours are the
    # plain-Python reference DFS tours (independent of the model)
    from rnngap.checks.io.formats import parse_cot_text
    for r in rows:
        edges, cot = parse_cot_text(r["cot_text"], r["n_nodes"])
        assert cot == R.reference_cot(C.model_vertex_count(edges), edges)[:-1]


def test_paper_sample_check_default_location_finds_the_data(monkeypatch):
    """Without RNNGAP_SHARED_DATA the package data (checks/data) is used."""
    _sample_lines()
    monkeypatch.delenv("RNNGAP_SHARED_DATA", raising=False)
    (rec,) = X.paper_sample_check("quick", 0)
    assert rec.checked and rec.passed and rec.instances == 64, rec.note


def test_paper_sample_check_not_checked_without_data(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNGAP_SHARED_DATA", str(tmp_path))      # exists, but holds no sample
    (rec,) = X.paper_sample_check("quick", 0)
    assert not rec.checked and not rec.passed
    assert rec.note.startswith("NOT CHECKED") and X.SAMPLE_NAME in rec.note


def test_paper_sample_check_fails_on_a_wrong_tour_or_label(tmp_path, monkeypatch):
    lines = _sample_lines()
    rows = [json.loads(line) for line in lines]
    k_tree = next(k for k, r in enumerate(rows) if r["is_tree"])
    k_other = next(k for k, r in enumerate(rows) if k != k_tree and r["n_nodes"] >= 6)
    bad_tour = dict(rows[k_tree])
    # one more CoT token: the tour no longer matches the model's
    bad_tour["cot_text"] = bad_tour["cot_text"][:-len("[EOS]")] + ",0[EOS]"
    bad_label = dict(rows[k_other], is_tree=not rows[k_other]["is_tree"])
    changed = lines[:]
    changed[k_tree], changed[k_other] = json.dumps(bad_tour), json.dumps(bad_label)
    rec = _sample_check_in(tmp_path, monkeypatch, changed)
    assert rec.checked and not rec.passed and rec.failures == 2 and rec.instances == 64
    assert f"row {k_tree}" in rec.note
    # official_label is not a target: changing it changes only the count in the note
    k = next(k for k, r in enumerate(rows) if r["official_label"] == r["is_tree"])
    relabelled = lines[:]
    relabelled[k] = json.dumps(dict(rows[k], official_label=not rows[k]["official_label"]))
    rec = _sample_check_in(tmp_path, monkeypatch, relabelled)
    assert rec.passed and "differs from it on 3 rows" in rec.note


# ----------------------------------------------------------------------------
# the hard family: the image of the Index -> IsTree hub gadget
def test_gadget_family_exhaustive_both_formats_and_it_can_fail():
    """n = 3: every x and i (24 instances, N = 6), with the header and without:
    tours and the model's own labels equal the reference; a model whose label is
    forced to [TRUE] fails exactly the instances with x_i = 1 (the non-trees)."""
    n = 3
    out = X.Outcome()
    pairs = X.gadget_pairs(n)
    cases = X.gadget_cases(n, pairs, out)
    assert len(cases) == 24 and out.failures == 0 and all(N == 6 for N, _ in cases)
    model = C.istree_transformer(n + 3, n + 2)
    _assert_outcome(X.teacher_forced_failures(model, cases, count="always"), 24)
    _assert_outcome(X.teacher_forced_failures(model, cases, count="never"), 24)
    forced = X.teacher_forced_failures(LabelForcedTrue(model), cases, count="always")
    assert forced.failures == sum(x[i - 1] for x, i in pairs) == 12


def test_gadget_family_check_catches_a_broken_reduction(monkeypatch):
    """The family's own label check (networkx vs x_i) is independent of the model:
    a gadget whose Bob omits the edge w - a is caught."""
    import rnngap.lowerbounds.reductions as LR
    bob = LR.ISTREE.bob
    broken = LR.Reduction("istree-broken", LR.ISTREE.alice, lambda i, n: bob(i, n)[:3] + [EOS],
                          LR.ISTREE.expected, LR.ISTREE.answer_tokens, LR.ISTREE.promise)
    monkeypatch.setattr(LR, "ISTREE", broken)
    out = X.Outcome()
    X.gadget_cases(3, X.gadget_pairs(3), out)
    assert out.failures > 0 and "networkx label" in out.first_failure


def test_gadget_sampled_pairs_are_seeded_and_reach_the_last_query():
    a = X.gadget_pairs(16, np.random.default_rng(5), 8)
    assert a == X.gadget_pairs(16, np.random.default_rng(5), 8)
    assert len(a) == 8 and sum(i == 16 for _, i in a) >= 4 and all(len(x) == 16 for x, _ in a)


def test_reduction_check_records():
    recs = X.reduction_check("quick", 0)
    assert all(r.passed for r in recs), [r.note for r in recs if not r.passed]
    assert {r.family for r in recs} == {"reduction"} and all(r.alphabet is None for r in recs)
    exhaustive = [r for r in recs if r.n in X.REDUCTION["quick"]["exhaustive"]]
    assert [r.instances for r in exhaustive] == [2 * n * 2 ** n for n in X.REDUCTION["quick"]["exhaustive"]]
    assert {r.params for r in recs} == {C.istree_transformer(4, 3).resources.params}
    assert max(r.n for r in recs) == 256


def test_the_builder_checks_every_istree_head_from_direction_bounds(monkeypatch):
    """The IsTree model is built with bounded=True (every direction a head reads has
    a bound): with the gadgets' integer-bit checks switched off, a format far too
    small is still refused by the Builder's central check."""
    monkeypatch.setattr(G, "require_int_bits", lambda *a: None)
    C.istree_transformer(6, 8)
    with pytest.raises(MarginError, match="from the directions' bounds"):
        C.istree_transformer(6, 8, fmt=FixedFormat(8, C.FRAC_BITS))
