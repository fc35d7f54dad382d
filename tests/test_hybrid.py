"""Hybrid retrieval constructions (constructions/hybrid.py, claim T5.6).

Layers: the RNN front end decoded position by position against plain Python
(cnt = t+1, cnt^2, delayed token codes, latches); every task on every instance up
to a small n; seeded samples at growing n up to 2^12 (hypothesis draws the seed
and n); the declared formats (Python = sympy, O(log n)), constant parameter
count, state bits; and failure one integer bit below what a run used.
"""
from __future__ import annotations


import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from checks.tasks import ar, cgram, counting, index
from constructions import hybrid as H
from constructions.fixedpoint import FixedFormat, PrecisionError
from constructions.vocab import token_code

TASKS = {"index": index, "ar": ar, "cgram": cgram, "counting": counting}


def build(task, n, alphabet, c=3):
    if task == "cgram":
        return H.hybrid_cgram(n, c=c, alphabet=alphabet)
    return H.RETRIEVAL_BUILDERS[task](n, alphabet=alphabet)


def refs(task, tokens, c=3):
    mod = TASKS[task]
    return np.array([mod.reference(list(map(int, row))) for row in tokens], dtype=np.int64)


# ---------------------------------------------------------------- block level: the RNN front end
def test_clock_state_decoded_every_position():
    model = H.hybrid_counting(6, alphabet=3)
    toks = [0, 33, 34, 32, 33, 34, 32, 9, 33, 35]
    sess = model.session(capacity=len(toks))
    after = 0
    for t, tok in enumerate(toks):
        sess.feed([tok])
        r = sess.residual()
        after += tok == 9
        assert r["cnt"] == t + 1 and r["cnt_sq"] == (t + 1) ** 2
        assert r["prev1"] == (token_code(toks[t - 1]) if t else 0)
        assert r["prev1_sq"] == (token_code(toks[t - 1]) ** 2 if t else 0)
        assert r["after_query"] == after


def test_cgram_delay_lines():
    model = H.hybrid_cgram(5, c=4, alphabet=3)
    toks = [0, 33, 34, 32, 33, 34, 9, 34, 32, 33]
    sess = model.session(capacity=len(toks))
    for t, tok in enumerate(toks):
        sess.feed([tok])
        r = sess.residual()
        for k in (1, 2, 3):
            assert r[f"prev{k}"] == (token_code(toks[t - k]) if t >= k else 0)


# ---------------------------------------------------------------- whole models, exhaustive
# the smallest n with a valid instance: AR needs n >= 2, 3-gram n >= 3
@pytest.mark.parametrize("task,n", [(t, n) for t in ("index", "ar", "cgram", "counting") for n in range(1, 6)
                                    if n >= {"ar": 2, "cgram": 3}.get(t, 1)])
def test_exhaustive_small_n(task, n):
    mod = TASKS[task]
    kw = {"c": 3} if task == "cgram" else {}
    batch = mod.enumerate_all(n, alphabet=3, **kw)
    model = build(task, n, 3)
    got = model.predict_batch(np.asarray(batch.tokens))
    want = refs(task, batch.tokens)
    assert (want == batch.answers).all()
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{task} n={n}: {bad.size} wrong, first {batch.tokens[bad[0]].tolist()}"
    assert model.resources.used_precision_bits <= model.fmt.total_bits


@pytest.mark.parametrize("c", [2, 4])
def test_cgram_other_c_exhaustive(c):
    n = 5
    batch = cgram.enumerate_all(n, alphabet=3, c=c)
    model = H.hybrid_cgram(n, c=c, alphabet=3)
    got = model.predict_batch(np.asarray(batch.tokens))
    assert (got == np.asarray(batch.answers)).all()


# ---------------------------------------------------------------- growing n
@settings(max_examples=12)
@given(task=st.sampled_from(["index", "ar", "cgram", "counting"]),
       n=st.sampled_from([16, 100, 512, 4096]), seed=st.integers(0, 2 ** 32 - 1))
def test_growing_n_samples(task, n, seed):
    rng = np.random.default_rng(seed)
    kw = {"threshold": "near"} if task == "counting" else {}
    batch = TASKS[task].generate(rng, n, 8, alphabet=4, **kw)
    model = _cached(task, n)
    got = model.predict_batch(np.asarray(batch.tokens))
    assert (got == refs(task, batch.tokens)).all()
    assert model.resources.used_precision_bits <= model.fmt.total_bits


_CACHE: dict = {}


def _cached(task, n):
    if (task, n) not in _CACHE:
        _CACHE[(task, n)] = build(task, n, 4)
    return _CACHE[(task, n)]


@given(inst=counting.instances(1, 9, alphabet=3))
def test_counting_hypothesis_instances(inst):
    tokens, answer = inst
    n = len(tokens) - 4
    assert _cached_small("counting", n).predict(tokens) == answer


@given(inst=ar.instances(2, 12, alphabet=3))
def test_ar_hypothesis_instances(inst):
    tokens, answer = inst
    n = len(tokens) - 3
    assert _cached_small("ar", n).predict(tokens) == answer


def _cached_small(task, n):
    key = ("small", task, n)
    if key not in _CACHE:
        _CACHE[key] = build(task, n, 3)
    return _CACHE[key]


# ---------------------------------------------------------------- resources
@pytest.mark.parametrize("task", ["index", "ar", "cgram", "counting"])
def test_constant_params_and_log_state(task):
    params = {build(task, n, 3).resources.params for n in (4, 64, 1024)}
    assert len(params) == 1
    for n in (4, 64, 1024):
        m = build(task, n, 3)
        r = m.resources
        assert r.state_bits == r.state_numbers * m.fmt.total_bits
        assert r.state_numbers == build(task, 4, 3).resources.state_numbers


@pytest.mark.parametrize("name", ["index", "ar", "counting", "cgram3"])
def test_declared_python_equals_sympy_and_is_log(name):
    decl = H.cgram_declared(3) if name == "cgram3" else H.DECLARED[name]
    for n in list(range(1, 70)) + [255, 256, 257, 1000, 4095, 4096, 4097]:
        assert decl.int_bits(n) == int(decl.int_expr.subs(H.N, n)), n
        assert decl.frac_bits(n) == int(decl.frac_expr.subs(H.N, n)), n
    for expr in (decl.int_expr, decl.frac_expr):
        ratio = sp.limit(expr.replace(sp.floor, lambda a: a).replace(sp.ceiling, lambda a: a) / sp.log(H.N), H.N, sp.oo)
        assert ratio.is_finite and ratio > 0


@pytest.mark.parametrize("task", ["index", "ar", "cgram", "counting"])
def test_one_int_bit_below_used_fails(task):
    """The same weights one integer bit below what the exhaustive run used must
    fail: the run overflows (or a weight no longer fits the format)."""
    n = 6
    mod = TASKS[task]
    kw = {"c": 3} if task == "cgram" else {}
    batch = mod.enumerate_all(n, alphabet=3, **kw)
    model = build(task, n, 3)
    want = np.asarray(batch.answers)
    assert (model.predict_batch(np.asarray(batch.tokens)) == want).all()
    low = FixedFormat(model.resources.used_int_bits - 1, model.fmt.frac_bits)
    with pytest.raises((PrecisionError, ValueError)):
        model.with_format(low).predict_batch(np.asarray(batch.tokens))


def test_no_position_feature_and_one_attention_layer():
    for task in TASKS:
        spec = build(task, 8, 3).spec
        assert spec.kind == "hybrid" and len(spec.attn_layers) == 1
        assert all(k not in (7, 8, 9) for k, _, _ in spec.embedding)


# ---------------------------------------------------------------- IsTree (union-find by size, CoT O(N log N))
from checks.formats import graph_tokens  # noqa: E402
from checks.tasks import istree  # noqa: E402
from constructions.generate import generate  # noqa: E402
from constructions.vocab import FALSE, TRUE  # noqa: E402

_IST: dict = {}


def _istree_model(N, m_max):
    if (N, m_max) not in _IST:
        _IST[(N, m_max)] = H.hybrid_istree(N, m_max=m_max)
    return _IST[(N, m_max)]


def _run_istree(N, edges, m_max, sep="-"):
    model = _istree_model(N, m_max)
    g = generate(model, graph_tokens(edges, sep=sep), answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
    return g, model


def test_istree_reference_cot_label_equals_networkx():
    for N in range(1, 6):
        for inst in istree.enumerate_all(N):
            _, ans = H.istree_unionfind_cot(N, inst.edges)
            assert ans == inst.answer, inst


@pytest.mark.parametrize("N", [1, 2, 3, 4])
@pytest.mark.parametrize("sep", ["-", "~"])
def test_istree_every_graph_several_orders(N, sep):
    """Both endpoint separators (theory.md §3 accepts '-' and '~')."""
    rng = np.random.default_rng(N)
    m_max = N * (N - 1) // 2
    for inst in istree.enumerate_all(N):
        for edges in istree.edge_orders(list(inst.edges), 4 if sep == "-" else 1, rng):
            g, model = _run_istree(N, edges, m_max, sep)
            want_cot, want = H.istree_unionfind_cot(N, edges)
            assert g.answer == want == inst.answer
            assert g.cot == want_cot
            assert g.cot_length <= H.istree_cot_bound(N)
    assert model.resources.used_precision_bits <= model.fmt.total_bits


@settings(max_examples=25)
@given(inst=istree.instances(1, 9))
def test_istree_hypothesis(inst):
    N = inst.n_nodes
    g, _ = _run_istree(N, inst.edges, N * (N - 1) // 2)
    assert g.answer == inst.answer
    assert g.cot == H.istree_unionfind_cot(N, inst.edges)[0]


def test_istree_large_seeded():
    rng = np.random.default_rng(2024)
    N = 64
    insts = istree.generate(rng, N, 4, family="mixed") + istree.generate(rng, N, 2, family="tree")
    m_max = max(max(len(i.edges) for i in insts), N)
    for inst in insts:
        g, model = _run_istree(N, inst.edges, m_max)
        assert g.answer == inst.answer
        assert g.cot_length <= H.istree_cot_bound(N)


@pytest.mark.full
def test_istree_200_vertices():
    rng = np.random.default_rng(200)
    for fam in ("tree", "near_tree", "paper_binary", "paper_random"):
        for inst in istree.generate(rng, 200, 3, family=fam):
            g, _ = _run_istree(200, inst.edges, max(len(inst.edges), 200))
            assert g.answer == inst.answer
            assert g.cot == H.istree_unionfind_cot(200, inst.edges)[0]


def test_istree_resources():
    params = {H.hybrid_istree(N).resources.params for N in (2, 16, 100)}
    assert len(params) == 1
    d = H.ISTREE
    for N in list(range(1, 12)) + [64, 200]:
        assert d.int_bits(N) == int(d.int_expr.subs(H.N, N)), N
        assert d.frac_bits(N) == int(d.frac_expr.subs(H.N, N)), N
    for expr in (d.int_expr, d.frac_expr):
        e = expr.replace(sp.floor, lambda a: a).replace(sp.ceiling, lambda a: a)
        ratio = sp.limit(e / sp.log(H.N), H.N, sp.oo)
        assert ratio.is_finite and ratio > 0
    m = H.hybrid_istree(8)
    assert m.spec.kind == "hybrid" and len(m.spec.attn_layers) == 1


def test_contrast_attention_removed_records():
    from checks.checks_hybrid import hybrid_contrast_check
    recs = hybrid_contrast_check("quick", 0)
    assert len(recs) == 4 and all(r.passed for r in recs), [r.note for r in recs]
