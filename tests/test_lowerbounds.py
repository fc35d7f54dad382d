"""Executable lower bounds (claims T4.6-low, T4.7-low): one-way communication
complexity, the Index reductions, and the fooling-pair witness finder.

The task answers come from the project's references (``checks.tasks.*``); the
test-local plain-Python references below are an independent second opinion
(the reductions are checked against both) and the brute forces of the CC
tables.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from functools import partial

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rnngap.checks.tasks import ar as task_ar
from rnngap.checks.tasks import cgram as task_cgram
from rnngap.checks.tasks import counting as task_counting
from rnngap.checks.tasks import index as task_index
from rnngap.checks.tasks import istree as task_istree
from rnngap.constructions.build.protocol import feed, run_rnn
from rnngap.constructions.machine.vocab import BOS, DASH, EOS, FALSE, NUMBER_BASE, QUERY, TILDE, TRUE, number_token
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as R
from rnngap.lowerbounds import witness as W
from rnngap.lowerbounds.targets_toy import HashRNN, IndexRegisterRNN, WindowRNN, pack_fields, width

NUM0, NUM1 = number_token(0), number_token(1)


# ------------------------------------------------------- test-local references


def local_index(tokens):
    t = [int(v) for v in tokens]
    q = t.index(QUERY)
    i = t[q + 1] - NUMBER_BASE
    if not 1 <= i <= q - 1:
        raise ValueError(f"query index {i} outside 1..{q - 1}")
    return t[i]


def local_retrieval(tokens):
    t = [int(v) for v in tokens]
    q = t.index(QUERY)
    data, gram = t[1:q], t[q + 1:]
    w = len(gram)
    for s in range(len(data) - w):
        if data[s:s + w] == gram:
            return data[s + w]
    raise ValueError("query does not occur with a successor")


def local_counting(tokens):
    t = [int(v) for v in tokens]
    q = t.index(QUERY)
    data, (sym, thr) = t[1:q], t[q + 1:]
    return NUM1 if sum(1 for v in data if v == sym) > thr - NUMBER_BASE else NUM0


def local_is_tree(n_nodes, edges):
    parent = list(range(n_nodes))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    if len(edges) != n_nodes - 1:
        return False
    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru == rv:
            return False
        parent[ru] = rv
    return True


def real_ref(task, n):
    """The project's reference for a reduction instance of Index length n."""
    if task == "istree":
        return partial(task_istree.reference, n_nodes=R.istree_vertex_count(n))
    return {"index": task_index.reference, "ar": task_ar.reference, "counting": task_counting.reference,
            "cgram": task_cgram.reference}[task.split("(")[0]]


def local_ref(task, n):
    if task == "istree":
        return R.istree_answer_from_label(local_is_tree)
    return {"index": local_index, "ar": local_retrieval, "counting": local_counting,
            "cgram": local_retrieval}[task.split("(")[0]]


ALL_REDUCTIONS = [R.INDEX, R.AR, R.cgram_reduction(2), R.CGRAM, R.cgram_reduction(4), R.COUNTING, R.ISTREE]


# ------------------------------------------------------------------ brute forces


def brute_rows(alice_inputs, bob_inputs, instance, ref):
    """Distinct rows, computed with plain loops and a test-local reference."""
    return len({tuple(ref(instance(a, b)) for b in bob_inputs) for a in alice_inputs})


def brute_min_classes(rows):
    """Least k such that rows (tuples, None = don't care) split into k pairwise
    compatible classes: plain k-colouring backtracking, k = 1, 2, ..."""
    rows = sorted(dict.fromkeys(rows), key=lambda r: sum(v is None for v in r))  # defined rows first

    def clash(r, s):
        return any(a is not None and b is not None and a != b for a, b in zip(r, s))

    m = len(rows)
    conflict = [[clash(rows[u], rows[v]) for v in range(m)] for u in range(m)]
    for k in range(1, m + 1):
        colour = [-1] * m

        def place(u):
            if u == m:
                return True
            for c in range(min(k, max(colour[:u], default=-1) + 2)):  # symmetry breaking
                if all(not (conflict[u][v] and colour[v] == c) for v in range(u)):
                    colour[u] = c
                    if place(u + 1):
                        return True
            colour[u] = -1
            return False

        if place(0):
            return k
    return max(m, 1)


def words(n, a):
    return list(itertools.product(range(a), repeat=n))


def increasing(values):
    return all(a < b for a, b in zip(values, values[1:]))


# ============================================================== cc: Index


def test_cc_index_equals_n_for_n_1_to_10():
    for n in range(1, 11):
        res = cc.one_way_complexity(cc.index_split(n, task_index.reference))
        assert (res.bits, res.distinct_rows, res.classes) == (n, 2 ** n, 2 ** n)
        assert res.exact and res.total and res.cells == n * 2 ** n
        assert res.prefix_length == n + 1


def test_cc_index_alphabet_3_matches_brute_force():
    for n in range(1, 6):
        res = cc.one_way_complexity(cc.index_split(n, task_index.reference, alphabet=3))
        rows = brute_rows(words(n, 3), range(1, n + 1),
                          lambda x, i: [BOS] + [number_token(v) for v in x] + [QUERY, number_token(i)],
                          local_index)
        assert rows == 3 ** n == res.distinct_rows
        assert res.bits == math.ceil(n * math.log2(3))


# ===================================================== cc: the other splits


def _kv_instance(v, i, a, c):
    toks = [BOS]
    for j, val in enumerate(v, start=1):
        toks += [number_token(a + j - 1)] * (c - 1) + [number_token(val)]
    return toks + [QUERY] + [number_token(a + i - 1)] * (c - 1)


@pytest.mark.parametrize("c, a, ns", [(2, 2, range(1, 9)), (2, 3, range(1, 6)), (3, 2, range(1, 9)),
                                      (4, 2, range(1, 8)), (3, 3, range(1, 5))])
def test_cc_keyvalue_splits_ar_cgram(c, a, ns):
    results = cc.cc_table(lambda n: cc.cgram_split(n, task_cgram.reference, c=c, alphabet=a), ns)
    bits = []
    for n, res in zip(ns, results):
        rows = brute_rows(words(n, a), range(1, n + 1), lambda v, i: _kv_instance(v, i, a, c),
                          local_retrieval)
        assert res.distinct_rows == rows == a ** n
        assert res.bits == cc.bits_for(a ** n) and res.exact
        assert res.prefix_length == c * n + 1
        bits.append(res.bits)
    assert increasing(bits)
    if c == 2:  # ar_split is the c = 2 case, with the AR reference
        assert cc.one_way_complexity(cc.ar_split(ns[-1], task_ar.reference, a)).bits == bits[-1]


def _hub_instance(x, ir, h):
    i, r = ir
    n = len(x)
    toks = [BOS]
    for j, v in enumerate(x, start=1):
        toks += [number_token(h + j - 1), DASH, number_token(v)]
    w = number_token(h + n)
    toks += [w, DASH, number_token(h + i - 1)]
    for k in range(h):
        if k != r:
            toks += [w, DASH, number_token(k)]
    return toks + [EOS]


@pytest.mark.parametrize("h, ns", [(2, range(1, 8)), (3, range(1, 5))])
def test_cc_istree_hub_split(h, ns):
    bits = []
    for n in ns:
        ref = partial(task_istree.reference, n_nodes=R.istree_vertex_count(n, h))
        res = cc.one_way_complexity(cc.istree_split(n, ref, hubs=h))
        bob = [(i, r) for i in range(1, n + 1) for r in range(h)]
        rows = brute_rows(words(n, h), bob, lambda x, ir: _hub_instance(x, ir, h),
                          R.istree_answer_from_label(local_is_tree))
        assert res.distinct_rows == rows == h ** n
        assert res.bits == cc.bits_for(h ** n)
        # the gadget's claim itself: tree iff x_i = r, checked with networkx
        x = tuple((j * 7 + 3) % h for j in range(n))
        for i, r in bob:
            n_nodes, edges = R.parse_istree(_hub_instance(x, (i, r), h))
            g = nx.Graph()
            g.add_nodes_from(range(R.istree_vertex_count(n, h)))
            g.add_edges_from(edges)
            assert nx.is_tree(g) == (x[i - 1] == r)
        bits.append(res.bits)
    assert increasing(bits)


def test_cc_counting_fixed_alphabet_grows_like_log_n():
    bits = []
    for n in range(1, 9):
        res = cc.one_way_complexity(cc.counting_split(n, task_counting.reference, alphabet=2))
        bob = [(q, t) for q in range(2) for t in range(n + 1)]
        rows = brute_rows(words(n, 2), bob,
                          lambda x, qt: [BOS] + [number_token(v) for v in x]
                          + [QUERY, number_token(qt[0]), number_token(qt[1])], local_counting)
        histograms = len({tuple(sorted(x)) for x in words(n, 2)})
        assert res.distinct_rows == rows == histograms == n + 1
        assert res.bits == cc.bits_for(n + 1)
        bits.append(res.bits)
    assert bits == sorted(bits) and bits[-1] > bits[0]


def test_cc_counting_alphabet_n_grows_linearly():
    bits = []
    for n in range(1, 6):
        res = cc.one_way_complexity(cc.counting_split(n, task_counting.reference, alphabet=n))
        histograms = len({tuple(x.count(s) for s in range(n)) for x in words(n, n)})
        assert histograms == math.comb(2 * n - 1, n - 1) == res.distinct_rows
        bits.append(res.bits)
    assert bits == [0, 2, 4, 6, 7]
    assert increasing(bits)


@pytest.mark.parametrize("a, ns", [(2, range(1, 8)), (3, range(1, 6))])
def test_cc_ar_free_promise_problem_by_colouring(a, ns):
    results = cc.cc_table(lambda n: cc.ar_free_split(n, task_ar.reference, alphabet=a), ns,
                          exact_classes=True)
    for n, res in zip(ns, results):
        rows = []
        for x in words(n, a):
            row = []
            for q in range(a):
                if q in x[:-1]:
                    row.append(local_retrieval([BOS] + [number_token(v) for v in x] + [QUERY, number_token(q)]))
                else:
                    row.append(None)
            rows.append(tuple(row))
        assert res.exact and res.classes == brute_min_classes(rows)
        assert res.bits == cc.bits_for(res.classes)
        assert not res.total
    # the promise problem over a fixed alphabet saturates: <= ceil(a log2 a) bits
    assert results[-1].bits == cc.bits_for(a ** a) == max(r.bits for r in results)


def test_cc_reduction_splits_give_exactly_n():
    for red in ALL_REDUCTIONS:
        for n in range(1, 7):
            res = cc.one_way_complexity(cc.reduction_split(red, n, real_ref(red.name, n)))
            assert res.bits == n and res.distinct_rows == 2 ** n, (red.name, n)


def _graph_matrix(n_vertices, edges):
    """A don't-care matrix whose conflict graph is the given graph."""
    m = np.full((n_vertices, max(1, len(edges))), cc.DONT_CARE, dtype=np.int64)
    for col, (u, v) in enumerate(edges):
        m[u, col], m[v, col] = 0, 1
    return m


def test_colouring_odd_cycle_and_groetzsch_graph():
    c5 = nx.cycle_graph(5)
    assert cc.min_compatible_classes(_graph_matrix(5, list(c5.edges())))[:3] == (3, 3, 3)
    g = nx.mycielski_graph(4)  # Groetzsch graph: triangle-free, chromatic number 4
    m = _graph_matrix(g.number_of_nodes(), list(g.edges()))
    assert cc.min_compatible_classes(m)[:3] == (4, 4, 4)
    lo, hi, exact, method = cc.min_compatible_classes(m, budget=1)
    assert exact is None and lo <= 4 <= hi and "budget" in method
    # the same matrix as a promise problem through one_way_complexity
    rows = [tuple(int(v) for v in r) for r in m]
    problem = cc.CommProblem("groetzsch", 11, tuple(range(11)), tuple(range(m.shape[1])),
                             lambda a: [a], lambda b: [b], lambda t: rows[t[0]][t[1]],
                             valid=lambda a, b: rows[a][b] != cc.DONT_CARE)
    res = cc.one_way_complexity(problem)
    assert (res.classes, res.bits, res.exact, res.total) == (4, 2, True, False)
    starved = cc.one_way_complexity(problem, colouring_budget=1)
    assert starved.bits_lower <= 2 <= starved.bits_upper
    assert starved.exact == (starved.bits_lower == starved.bits_upper)


def test_colouring_branch_and_bound_on_random_graphs():
    rng = np.random.default_rng(12345)
    searched = 0
    for _ in range(40):
        v = 13
        edges = [(a, b) for a in range(v) for b in range(a + 1, v) if rng.random() < 0.5]
        m = _graph_matrix(v, edges)
        lo, hi, exact, method = cc.min_compatible_classes(m)
        rows = [tuple(None if e == cc.DONT_CARE else int(e) for e in r) for r in m]
        assert exact == lo == hi == brute_min_classes(rows)
        searched += method.startswith("exact")
    assert searched >= 3  # the bounds disagreed and the search decided


@given(st.integers(1, 7).flatmap(lambda r: st.integers(1, 4).flatmap(
    lambda c: st.lists(st.lists(st.integers(-1, 2), min_size=c, max_size=c), min_size=r, max_size=r))))
def test_colouring_matches_brute_force(matrix):
    lo, hi, exact, _ = cc.min_compatible_classes(np.array(matrix))
    rows = [tuple(None if v == -1 else v for v in row) for row in matrix]
    assert exact == lo == hi == brute_min_classes(rows)


def test_cc_errors():
    with pytest.raises(ValueError, match="n too large for exhaustive mode"):
        cc.index_split(25, task_index.reference)
    with pytest.raises(ValueError, match="n too large for exhaustive mode"):
        cc.counting_split(8, task_counting.reference, alphabet=8)
    with pytest.raises(ValueError, match="n too large for exhaustive mode"):
        cc.one_way_complexity(cc.index_split(6, task_index.reference), max_cells=100)
    with pytest.raises(ValueError, match="n must be >= 1"):
        cc.index_split(0, task_index.reference)
    with pytest.raises(ValueError, match="alphabet"):
        cc.counting_split(3, task_counting.reference, alphabet=0)
    with pytest.raises(ValueError, match="c >= 2"):
        cc.cgram_split(3, task_cgram.reference, c=1)
    with pytest.raises(TypeError, match="CommProblem"):
        cc.one_way_complexity("index")
    with pytest.raises(ValueError, match="not a token id"):
        cc.one_way_complexity(cc.index_split(2, lambda t: -5))
    with pytest.raises(ValueError):  # the reference refuses an invalid pair: no silent don't-care
        cc.one_way_complexity(dataclasses.replace(cc.ar_free_split(3, task_ar.reference), valid=None))
    assert [cc.bits_for(k) for k in (1, 2, 3, 4, 5, 1024, 1025)] == [0, 1, 2, 2, 3, 10, 11]
    with pytest.raises(ValueError):
        cc.bits_for(0)
    table = cc.format_cc_table(cc.cc_table(lambda n: cc.index_split(n, task_index.reference), [1, 2]))
    assert "index(a=2)" in table and len(table.splitlines()) == 4


# ============================================================== reductions


@pytest.mark.parametrize("red", ALL_REDUCTIONS, ids=lambda r: r.name)
def test_reductions_exhaustive_against_real_and_local_references(red):
    top = 10 if red.name in ("index", "ar", "counting") else 8
    for n in range(1, top + 1):
        res = R.check_reduction(red, n, real_ref(red.name, n))
        assert res.instances == n * 2 ** n
        assert sum(res.answers.values()) == res.instances
        assert set(res.answers) == set(red.answer_tokens)  # both answers occur
        assert len(res.prefix_lengths) == 1 and len(res.suffix_lengths) == 1
        if n <= 6:
            assert R.check_reduction(red, n, local_ref(red.name, n)).instances == n * 2 ** n


@given(st.sampled_from(ALL_REDUCTIONS),
       st.integers(11, 40).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 1), min_size=n, max_size=n),
                                                       st.integers(1, n))))
def test_reductions_beyond_exhaustive_range(red, xi):
    x, i = tuple(xi[0]), xi[1]
    toks = red.instance(x, i)
    assert red.promise(toks) is None
    assert real_ref(red.name, len(x))(toks) == red.expected(x, i)
    assert local_ref(red.name, len(x))(toks) == red.expected(x, i)


@given(st.sampled_from(ALL_REDUCTIONS), st.integers(1, 12), st.integers(1, 20), st.integers(0, 2 ** 32 - 1))
def test_alice_batch_equals_alice(red, n, b, seed):
    xs = np.random.default_rng(seed).integers(0, 2, size=(b, n))
    want = np.array([red.alice(tuple(int(v) for v in row)) for row in xs], dtype=np.int64)
    got = red.prefixes(xs)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    slow = dataclasses.replace(red, alice_batch=None).prefixes(xs)
    assert np.array_equal(slow, want)


def test_reduction_examples_and_halves():
    x = (1, 0, 1)
    assert R.AR.instance(x, 2).tolist() == [BOS, 34, 33, 35, 32, 36, 33, QUERY, 35]
    assert R.cgram_reduction(3).instance(x, 3).tolist() == [BOS, 34, 34, 33, 35, 35, 32, 36, 36, 33,
                                                             QUERY, 36, 36]
    assert R.COUNTING.instance(x, 2).tolist() == [BOS, 33, 32, 35, QUERY, 34, 32]
    assert R.ISTREE.instance(x, 2).tolist() == [BOS, 34, DASH, 33, 35, DASH, 32, 36, DASH, 33,
                                                 37, DASH, 35, 37, DASH, 33, EOS]
    assert R.ISTREE.expected(x, 2) == TRUE and R.ISTREE.expected(x, 1) == FALSE
    # Alice's half is injective in x; Bob's halves are distinct queries
    for red in ALL_REDUCTIONS:
        prefixes = {tuple(red.alice(w)) for w in words(5, 2)}
        assert len(prefixes) == 32
        assert len({tuple(red.bob(i, 5)) for i in range(1, 6)}) == 5


def test_parse_istree_and_adapter():
    assert R.parse_istree([BOS, 34, DASH, 32, 35, TILDE, 34, EOS]) == (4, [(2, 0), (3, 2)])
    assert R.parse_istree([BOS, EOS]) == (0, [])
    for bad in ([BOS, 34, DASH, 32], [34, DASH, 32, EOS], [BOS, 34, DASH, EOS], [BOS, 34, QUERY, 32, EOS]):
        with pytest.raises(ValueError):
            R.parse_istree(bad)
    assert R.istree_promise([BOS, 34, DASH, 34, EOS]) is not None          # self-loop
    assert R.istree_promise([BOS, 34, DASH, 32, 32, DASH, 34, EOS]) is not None  # repeated edge
    path = [BOS, 34, DASH, 32, 33, DASH, 32, EOS]  # 2-0, 1-0: a tree on 3 vertices
    assert R.istree_answer_from_label(local_is_tree)(path) == TRUE
    assert R.istree_answer_from_label(local_is_tree, n_nodes=4)(path) == FALSE  # vertex 3 isolated


def test_check_reduction_reports_the_first_counterexample():
    with pytest.raises(R.ReductionError) as info:
        R.check_reduction(R.AR, 2, lambda t: NUM0)
    err = info.value
    assert (err.x, err.i, err.got, err.expected) == ((0, 1), 2, NUM0, NUM1)
    assert err.tokens == R.AR.alice((0, 1)) + R.AR.bob(2, 2)
    broken = dataclasses.replace(R.AR, bob=lambda i, n: [QUERY, number_token(n + 5)])
    with pytest.raises(R.ReductionError, match="breaks the promise"):
        R.check_reduction(broken, 2, task_ar.reference)
    # the task's own reference also refuses the broken instance when unchecked
    with pytest.raises(ValueError):
        R.check_reduction(broken, 2, task_ar.reference, check_promise=False)


def test_reduction_bad_arguments():
    with pytest.raises(ValueError, match="not a bit"):
        R.alice_ar((0, 2))
    with pytest.raises(ValueError, match="at least one bit"):
        R.alice_index(())
    with pytest.raises(TypeError):
        R.alice_index((0, 1.0))
    with pytest.raises(TypeError):
        R.alice_index((True, False))
    with pytest.raises(TypeError):
        R.alice_index(5)
    for i in (0, 4):
        with pytest.raises(ValueError, match="outside 1..3"):
            R.bob_ar(i, 3)
    with pytest.raises(TypeError):
        R.bob_counting(1.5, 3)
    with pytest.raises(ValueError, match="c >= 2"):
        R.cgram_reduction(1)
    with pytest.raises(ValueError, match="n too large for exhaustive mode"):
        R.check_reduction(R.INDEX, R.EXHAUSTIVE_MAX_N + 1, task_index.reference)
    with pytest.raises(TypeError):
        R.check_reduction("index", 3, task_index.reference)
    with pytest.raises(ValueError, match="only hold 0 and 1"):
        R.INDEX.prefixes(np.array([[0, 2]]))
    with pytest.raises(ValueError, match="2-D"):
        R.INDEX.prefixes(np.array([0, 1]))


# ================================================================ toy RNNs


def all_instances_correct(rnn, red, n, max_cot=0):
    for x in itertools.product((0, 1), repeat=n):
        for i in range(1, n + 1):
            if run_rnn(rnn, red.instance(x, i), red.answer_tokens, max_cot).answer != red.expected(x, i):
                return False
    return True


def assert_verified(w, rnn, red, max_cot=0):
    """Independent re-check of a witness in the test."""
    assert w.found and w.x != w.x_prime and w.x[w.i - 1] != w.x_prime[w.i - 1]
    assert rnn.state_key(feed(rnn, red.alice(w.x))) == rnn.state_key(feed(rnn, red.alice(w.x_prime)))
    assert np.array_equal(w.tokens, red.instance(w.x, w.i))
    assert np.array_equal(w.tokens_prime, red.instance(w.x_prime, w.i))
    assert w.expected != w.expected_prime and w.answer == w.answer_prime
    assert w.failing and len(w.failing) == len(w.wrong)
    for tokens, model_answer, expected in w.failing:
        rerun = run_rnn(rnn, tokens, red.answer_tokens, max_cot)
        assert rerun.answer == model_answer != expected


def test_toy_helpers():
    assert [width(v) for v in (0, 1, 2, 3, 4)] == [1, 1, 2, 2, 3]
    assert pack_fields([1, 2], [1, 2]) == b"\x05"
    with pytest.raises(ValueError, match="does not fit"):
        pack_fields([4], [2])
    with pytest.raises(ValueError):
        IndexRegisterRNN(0)
    with pytest.raises(ValueError):
        HashRNN(65)
    r = IndexRegisterRNN(5)
    assert len(r.state_key(feed(r, R.alice_index((1, 0, 1))))) * 8 <= r.state_bits + 7
    h = HashRNN(20)
    prefixes = np.random.default_rng(3).integers(0, 60, size=(30, 9))
    batch = h.batch_states(prefixes)
    for row, key in zip(prefixes, batch):
        state = feed(h, row.tolist())
        assert state == int(key) == int.from_bytes(h.state_key(state), "little") < 2 ** 20


@pytest.mark.parametrize("cot", [False, True], ids=["no-cot", "cot"])
@pytest.mark.parametrize("s", [1, 2, 3, 4, 6])
def test_register_rnn_correct_up_to_s_and_broken_beyond(s, cot):
    rnn = IndexRegisterRNN(s, cot=cot)
    max_cot = s + 1
    for n in range(1, s + 1):
        assert all_instances_correct(rnn, R.INDEX, n, max_cot)
        w = W.find_witness(rnn, R.INDEX, n, max_cot=max_cot)
        assert not w.found and w.states_explored == 2 ** n and "distinct" in w.how
    for n in (s + 1, s + 2):
        assert not all_instances_correct(rnn, R.INDEX, n, max_cot)
        w = W.find_witness(rnn, R.INDEX, n, max_cot=max_cot)
        assert_verified(w, rnn, R.INDEX, max_cot)
        assert w.mode == "exhaustive" and w.i > s and w.x[:s] == w.x_prime[:s]
        assert w.wrong == ("x'",) and w.answer == NUM0  # it guesses 0 past its register
        if cot:
            assert len(w.cot) == s and w.cot == w.cot_prime  # it did think, identically


def test_cot_budget_too_small_is_a_failure_on_both():
    rnn = IndexRegisterRNN(3, cot=True)
    w = W.find_witness(rnn, R.INDEX, 4, max_cot=1)
    assert w.found and w.answer is None and set(w.wrong) == {"x", "x'"} and len(w.cot) == 1


@pytest.mark.parametrize("red", ALL_REDUCTIONS, ids=lambda r: r.name)
def test_window_rnn_on_every_reduction(red):
    """Keeps head + tail tokens: exact on the whole instance at n0. Its state after
    a prefix stays injective while the prefix fits in head + tail tokens (then the
    finder must report no pair, even though the model already fails on some
    suffixes); beyond that the finder breaks it."""
    n0 = 4
    head = len(red.alice((0,) * n0))
    tail = len(red.bob(1, n0))
    rnn = WindowRNN(local_ref(red.name, n0), head, tail, default_answer=red.answer_tokens[0])
    assert all_instances_correct(rnn, red, n0)

    def loses_a_bit(n):  # some token carrying a bit of x falls between head and tail
        base = red.alice((0,) * n)
        carrying = {p for j in range(n) for p, (a, b)
                    in enumerate(zip(base, red.alice(tuple(int(k == j) for k in range(n))))) if a != b}
        return any(head <= p < len(base) - tail for p in carrying)

    n = n0
    while not loses_a_bit(n):
        assert not W.find_witness(rnn, red, n).found
        n += 1
    for m in (n, n + 1):
        w = W.find_witness(rnn, red, m)
        assert_verified(w, rnn, red)
        assert w.pigeonhole is False  # found by the search, not promised by the state count


def test_exhaustive_uses_batch_states_with_the_same_result():
    rnn = HashRNN(10)
    a = W.find_witness(rnn, R.INDEX, 14, use_batch=True)
    b = W.find_witness(rnn, R.INDEX, 14, use_batch=False)
    assert "batch_states" in a.how and "step" in b.how
    assert (a.x, a.x_prime, a.i, a.states_explored) == (b.x, b.x_prime, b.i, b.states_explored)
    assert_verified(a, rnn, R.INDEX)
    small = W.find_witness(rnn, R.INDEX, 12, batch_size=100)  # several batches
    assert small.found and small.states_explored <= 2 ** 10 + 1  # pigeonhole


# ================================================================ birthday


def test_birthday_24_bit_per_token_stepping():
    rnn = HashRNN(24)
    calls = []
    w = W.find_witness(rnn, R.INDEX, 40, mode="birthday", seed=20240601, use_batch=False,
                       progress=lambda d, s: calls.append((d, s)))
    assert_verified(w, rnn, R.INDEX)
    assert w.mode == "birthday" and w.seed == 20240601 and "step" in w.how
    assert w.states_explored < 16 * 2 ** 12
    assert all(d1 < d2 for (d1, _), (d2, _) in zip(calls, calls[1:]))
    again = W.find_witness(rnn, R.INDEX, 40, mode="birthday", seed=20240601, use_batch=False)
    assert (again.x, again.x_prime, again.states_explored) == (w.x, w.x_prime, w.states_explored)


def test_birthday_32_bit_batch_states():
    rnn = HashRNN(32)
    w = W.find_witness(rnn, R.INDEX, 48, mode="birthday", seed=7)
    assert_verified(w, rnn, R.INDEX)
    assert "batch_states" in w.how and w.states_explored < 16 * 2 ** 16


def test_birthday_32_bit_per_token_stepping():
    rnn = HashRNN(32)
    w = W.find_witness(rnn, R.INDEX, 48, mode="birthday", seed=11, use_batch=False)
    assert_verified(w, rnn, R.INDEX)
    assert "step" in w.how and w.states_explored < 16 * 2 ** 16


def test_birthday_on_other_reductions_and_models():
    rnn = IndexRegisterRNN(8, cot=True)
    w = W.find_witness(rnn, R.INDEX, 12, mode="birthday", seed=5, max_cot=20)
    assert_verified(w, rnn, R.INDEX, max_cot=20)
    for red in (R.AR, R.COUNTING, R.ISTREE, dataclasses.replace(R.CGRAM, alice_batch=None)):
        h = HashRNN(16, answer_tokens=red.answer_tokens)
        w = W.find_witness(h, red, 30, mode="birthday", seed=99)
        assert_verified(w, h, red)


def test_birthday_budget_and_memory_cap_are_honest():
    rnn = HashRNN(32)
    w = W.find_witness(rnn, R.INDEX, 48, mode="birthday", seed=1, max_draws=100)
    assert not w.found and w.states_explored == 100 and "no collision" in w.how
    assert w.x is None and w.failing == []
    capped = W.find_witness(HashRNN(16), R.INDEX, 30, mode="birthday", seed=2, max_stored=10,
                            max_draws=400_000)
    assert capped.found and "10 keys stored" in capped.how
    assert_verified(capped, HashRNN(16), R.INDEX)


# ======================================================= protocol violations


class LyingKeyRNN(IndexRegisterRNN):
    """Remembers 8 bits but its state_key reveals only the first one."""

    def __init__(self):
        super().__init__(8)

    def state_key(self, state):
        return bytes([state[0], state[2] & 1])


class FlickerRNN:
    """No memory at all, but an output that changes on every call."""

    state_bits = 0

    def __init__(self):
        self.calls = 0

    def initial_state(self):
        return 0

    def step(self, state, token):
        return 0

    def output(self, state):
        self.calls += 1
        return NUM0 if self.calls % 2 else NUM1

    def state_key(self, state):
        return b""


class FatKeyRNN(IndexRegisterRNN):
    def __init__(self):
        super().__init__(2)
        self.state_bits = 3


class BadBatchRNN(HashRNN):
    def batch_states(self, prefixes):
        return np.zeros(len(prefixes), dtype=np.uint64)


def test_protocol_violations_are_reported():
    with pytest.raises(W.ProtocolViolation, match="different runs"):
        W.find_witness(LyingKeyRNN(), R.INDEX, 3)
    with pytest.raises(W.ProtocolViolation, match="different runs"):
        W.find_witness(FlickerRNN(), R.INDEX, 3)
    with pytest.raises(W.ProtocolViolation, match="allows at most"):
        W.find_witness(FatKeyRNN(), R.INDEX, 3)
    liar = HashRNN(8)
    liar.state_bits = 1  # keys still fit one byte, but take more than 2 values
    for use_batch in (True, False):
        with pytest.raises(W.ProtocolViolation, match="exceed"):
            W.find_witness(liar, R.INDEX, 4, use_batch=use_batch)
    with pytest.raises(W.ProtocolViolation, match="batch_states"):
        W.find_witness(BadBatchRNN(16), R.INDEX, 20)
    with pytest.raises(W.ProtocolViolation, match="shape"):
        odd = HashRNN(16)
        odd.batch_states = lambda p: np.zeros((1, 1, 1))
        W.find_witness(odd, R.INDEX, 20)


def test_witness_bad_arguments():
    rnn = IndexRegisterRNN(3)
    with pytest.raises(ValueError, match="n too large for exhaustive mode"):
        W.find_witness(rnn, R.INDEX, W.EXHAUSTIVE_MAX_N + 1)
    with pytest.raises(ValueError, match="explicit seed"):
        W.find_witness(rnn, R.INDEX, 5, mode="birthday")
    with pytest.raises(ValueError, match="explicit integer seed"):
        W.find_witness(rnn, R.INDEX, 5, mode="birthday", seed=None)
    with pytest.raises(ValueError, match="unknown mode"):
        W.find_witness(rnn, R.INDEX, 5, mode="guess")
    with pytest.raises(TypeError, match="RNN protocol"):
        W.find_witness(object(), R.INDEX, 5)
    with pytest.raises(TypeError, match="Reduction"):
        W.find_witness(rnn, "index", 5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        W.find_witness(rnn, R.INDEX, 0)
    with pytest.raises(ValueError, match="max_draws"):
        W.find_witness(rnn, R.INDEX, 5, mode="birthday", seed=1, max_draws=0)
    with pytest.raises(ValueError, match="max_cot"):
        W.find_witness(rnn, R.INDEX, 5, max_cot=-1)
    with pytest.raises(ValueError, match="x != x'"):
        W.verify_fooling_pair(rnn, R.INDEX, (0, 1, 0, 0), (0, 1, 0, 0))
    with pytest.raises(W.ProtocolViolation, match="different state keys"):
        W.verify_fooling_pair(rnn, R.INDEX, (0, 1, 0, 0), (1, 1, 0, 0))
    w = W.verify_fooling_pair(rnn, R.INDEX, (0, 1, 0, 0), (0, 1, 0, 1))
    assert w.found and w.mode == "given" and w.i == 4 and w.pigeonhole is False
    assert W.expected_birthday_draws(32) == pytest.approx(1.2533 * 2 ** 16, rel=1e-3)


def test_register_reachable_check_accepts_the_register_and_rejects_a_smaller_one():
    """checks_lowerbounds._register_reachable, which backs the 'c-bit reachable
    state' of the birthday records: it accepts the capacity-c register and
    rejects a capacity-(c-1) register claimed as c bits (x_c is lost)."""
    from rnngap.checks.verify import checks_lowerbounds as CL
    from rnngap.constructions.models import targets as T
    checked, why = CL._register_reachable(T.register_target(8, 12), 8, 9, seed=5)
    assert why == "" and checked == CL.REACHABLE_SAMPLES + 2
    checked, why = CL._register_reachable(T.register_target(7, 12), 8, 9, seed=5)
    assert "register r =" in why


def test_quick_verify_profile_breaks_a_32_bit_register_by_birthday_search():
    """T4.6-low: 'including one with a state of at least 32 bits found by birthday
    search' is in the quick profile, not only the full one (the search itself is
    run in tests/test_targets.py)."""
    from rnngap.checks.verify import checks_lowerbounds as CL
    assert max(CL.BIRTHDAY_CAPACITIES["quick"]) >= 32
    assert set(CL.BIRTHDAY_CAPACITIES["quick"]) <= set(CL.BIRTHDAY_CAPACITIES["full"])


# ================================================================= full runs


@pytest.mark.full
def test_full_reductions_exhaustive_to_12():
    for red in ALL_REDUCTIONS:
        for n in range(9, 13):
            assert R.check_reduction(red, n, real_ref(red.name, n)).instances == n * 2 ** n


@pytest.mark.full
def test_full_ar_free_alphabet_4_saturates_at_8_bits():
    results = cc.cc_table(lambda n: cc.ar_free_split(n, task_ar.reference, alphabet=4), range(1, 7))
    assert [r.bits for r in results] == [0, 2, 4, 6, 7, 8] and all(r.exact for r in results)
    assert results[-1].bits == cc.bits_for(4 ** 4)


@pytest.mark.full
def test_full_birthday_40_bit_batch_states():
    rnn = HashRNN(40)
    w = W.find_witness(rnn, R.INDEX, 64, mode="birthday", seed=3)
    assert_verified(w, rnn, R.INDEX)
    assert w.states_explored < 16 * 2 ** 20
