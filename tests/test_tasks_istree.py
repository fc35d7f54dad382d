"""IsTree task layer: formats, labels, generators, enumeration, reference CoTs.

The paper's own generator output (``shared/data/istree_official_sample.jsonl``,
64 rows) is reproduced token for token and byte for byte in both CoT styles.
The reference labels are checked against networkx on every graph up to 5
vertices in every edge order (all orders up to 5 edges, a seeded sample above)
and on every graph on 6 vertices in seeded orders.
"""
from __future__ import annotations

import doctest
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given

import rnngap.checks.io.formats as formats
import rnngap.checks.tasks.istree as istree
from rnngap.checks.io.formats import (
    CotFormatError,
    GraphFormatError,
    format_cot_text,
    format_graph_text,
    graph_tokens,
    parse_cot_text,
    parse_graph_text,
    parse_graph_tokens,
)
from rnngap.checks.tasks.istree import (
    FAMILIES,
    dfs_tour,
    edge_orders,
    enumerate_all,
    enumerate_graphs,
    generate,
    graphs,
    instances,
    is_paper_binary,
    near_tree,
    paper_binary_graph,
    paper_random_graph,
    parse_retrieval_cot,
    random_graph,
    random_tree,
    reference,
    reference_cot,
    reference_label,
    retrieval_cot,
    retrieval_label,
    tour_label,
)
from rnngap.constructions.machine.vocab import (
    BOS,
    DASH,
    ENDSEARCH,
    EOS,
    FAILED,
    FALSE,
    NUMBER_BASE,
    STARTSEARCH,
    TILDE,
    TRUE,
    Vocab,
    number_token,
)

from rnngap.checks.io.shared_data import shared_data_dir  # noqa: E402

DATA_DIR = shared_data_dir()   # RNNGAP_SHARED_DATA, else the package data
SAMPLE = DATA_DIR / "istree_official_sample.jsonl"


@pytest.fixture(scope="module")
def sample_rows() -> list[dict]:
    if not SAMPLE.is_file():
        pytest.fail(
            f"the paper's IsTree sample is missing: {SAMPLE} "
            "(the package data checks/data, or RNNGAP_SHARED_DATA)"
        )
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    assert len(rows) == 64, f"expected 64 rows in {SAMPLE}, found {len(rows)}"
    return rows


def nx_is_tree(n: int, edges) -> bool:
    """Independent of the code under test: networkx directly."""
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    return nx.is_tree(g)


def expected_answer(query: list[int], edges, before: list[int]) -> int:
    """What an in-context search for ``query`` returns, computed from the context
    directly: ``u -`` / ``u - p`` scan the input edges (either orientation) from the
    start / after the edge {u, p}; ``w ~`` finds the first ``w ~ x`` (x a number)
    already written in the CoT."""
    nums = [t - NUMBER_BASE if t >= NUMBER_BASE else None for t in query]
    if len(query) == 2 and query[1] == TILDE:
        w = query[0]
        for k in range(len(before) - 2):
            if before[k] == w and before[k + 1] == TILDE and before[k + 2] >= NUMBER_BASE:
                return before[k + 2]
        return FAILED
    assert query[1] == DASH and len(query) in (2, 3), query
    u = nums[0]
    start = 0
    if len(query) == 3:
        start = [set(e) for e in edges].index({u, nums[2]}) + 1
    for a, b in edges[start:]:
        if u in (a, b):
            return number_token(b if a == u else a)
    return FAILED


def check_retrieval_answers(edges, cot: list[int]) -> int:
    """Every search in a style-2 CoT is answered as the context dictates; returns
    the number of searches checked."""
    body = cot[: cot.index(EOS)]
    count = 0
    for i, t in enumerate(body):
        if t == STARTSEARCH:
            j = body.index(ENDSEARCH, i)
            assert body[j + 1] == expected_answer(body[i + 1:j], edges, body[:i]), (i, body)
            count += 1
    return count


# ---------------------------------------------------------------------------
# The paper's sample
# ---------------------------------------------------------------------------

def test_sample_style1_reproduced_token_for_token(sample_rows):
    for k, row in enumerate(sample_rows):
        n, text = row["n_nodes"], row["cot_text"]
        edges, cot = parse_cot_text(text, n)
        ours = reference_cot(n, edges)
        assert ours[:-1] == cot, f"row {k}: style-1 tokens differ"
        assert ours[-1] == (TRUE if row["is_tree"] else FALSE)
        assert format_cot_text(edges, ours) == text, f"row {k}: style-1 text differs"


def test_sample_style2_reproduced_token_for_token(sample_rows):
    for k, row in enumerate(sample_rows):
        n, text = row["n_nodes"], row["retrieval_text"]
        edges, cot = parse_cot_text(text, n)
        ours = retrieval_cot(n, edges)
        assert ours[:-1] == cot, f"row {k}: style-2 tokens differ"
        assert format_cot_text(edges, ours) == text, f"row {k}: style-2 text differs"
        # the two styles walk the same DFS on the same edge order
        assert list(parse_retrieval_cot(ours).tops) == dfs_tour(n, edges), f"row {k}"
        assert check_retrieval_answers(edges, ours) >= 2


def test_sample_edges_are_one_graph_in_two_orders(sample_rows):
    for k, row in enumerate(sample_rows):
        n = row["n_nodes"]
        e1, tok1 = parse_graph_text(row["cot_text"], n)
        e2, _ = parse_graph_text(row["retrieval_text"], n)
        assert sorted(e1) == sorted(e2), f"row {k}"
        assert all(u > v for u, v in e1 + e2), f"row {k}: the paper writes u > v"
        assert tok1 == graph_tokens(e1)
        assert row["cot_text"].startswith(format_graph_text(e1))


def test_sample_labels_tree_not_connectivity(sample_rows):
    disagree = []
    for k, row in enumerate(sample_rows):
        n = row["n_nodes"]
        edges, _ = parse_graph_text(row["cot_text"], n)
        label = reference_label(n, edges)
        assert label == row["is_tree"] == nx_is_tree(n, edges), f"row {k}"
        assert tour_label(n, dfs_tour(n, edges)) == label, f"row {k}"
        r_edges, r_cot = parse_cot_text(row["retrieval_text"], n)
        assert retrieval_label(n, r_cot) == label, f"row {k}"
        g = nx.Graph(edges)
        g.add_nodes_from(range(n))
        assert row["official_label"] == nx.is_connected(g), f"row {k}: official label is connectivity"
        if row["official_label"] != label:
            disagree.append(k)
            assert nx.is_connected(g) and len(edges) == n, f"row {k}"
    assert len(disagree) == 2, disagree


def test_sample_families_match_our_generators(sample_rows):
    binary = [r for r in sample_rows if r["graph_type"] == "binary"]
    rand = [r for r in sample_rows if r["graph_type"] == "random"]
    assert len(binary) == len(rand) == 32
    for r in binary:
        edges, _ = parse_graph_text(r["cot_text"], r["n_nodes"])
        assert is_paper_binary(r["n_nodes"], edges), r["cot_text"]
    for r in rand:
        edges, _ = parse_graph_text(r["cot_text"], r["n_nodes"])
        assert len(edges) <= r["n_nodes"], r["cot_text"]
    assert {r["n_nodes"] for r in sample_rows} == {4, 6, 10, 16}


# ---------------------------------------------------------------------------
# Worked examples and the documented behaviour of the tour
# ---------------------------------------------------------------------------

def test_theory_worked_example():
    edges = [(2, 0), (3, 2), (1, 0)]
    assert dfs_tour(4, edges) == [0, 2, 3, 2, 0, 1, 0]
    assert reference_cot(4, edges) == [number_token(x) for x in (0, 2, 3, 2, 0, 1, 0)] + [EOS, TRUE]
    assert format_cot_text(edges, reference_cot(4, edges)) == "[BOS]2-0,3-2,1-0[EOS]0,2,3,2,0,1,0[EOS]"
    assert format_cot_text(edges, reference_cot(4, edges), include_label=True).endswith("0[EOS][TRUE]")
    _, toks = parse_graph_text("[BOS]2~0,3~2,1~0[EOS]")
    assert toks == [BOS] + [t for u, v in edges for t in (number_token(u), TILDE, number_token(v))] + [EOS]
    assert reference(toks, 4) == TRUE


def test_tour_stops_at_first_cycle_and_ends_at_0_when_disconnected():
    # cycle 0-2-1: at 1 the non-parent neighbour 0 is already visited; stop there
    assert dfs_tour(4, [(2, 0), (2, 1), (1, 0)]) == [0, 2, 1]
    # the cycle is in 0's component, a neighbour list order decides where it is met
    assert dfs_tour(4, [(1, 0), (3, 0), (2, 1), (3, 2)]) == [0, 1, 2, 3]
    # 0 isolated: the tour is just 0
    assert dfs_tour(4, [(2, 1), (3, 1), (3, 2)]) == [0]
    # disconnected, 0's component a tree: complete tour of 3 vertices, label False
    t = dfs_tour(4, [(3, 2), (2, 0)])
    assert t == [0, 2, 3, 2, 0] and not tour_label(4, t)
    # single vertex: a tree
    assert dfs_tour(1, []) == [0] and tour_label(1, [0]) and reference_label(1, [])
    # the extra vertex is invisible in the tokens: n_nodes decides
    assert reference(graph_tokens([(1, 0)]), 2) == TRUE
    assert reference(graph_tokens([(1, 0)]), 3) == FALSE


def test_retrieval_cot_small_example():
    S, E, T, D, F = STARTSEARCH, ENDSEARCH, TILDE, DASH, FAILED
    n0, n1 = number_token(0), number_token(1)
    assert retrieval_cot(2, [(1, 0)]) == [
        n0, S, n0, T, E, F, S, n0, D, E, n1, S, n1, T, E, F, n1, T, n0,
        n1, S, n1, T, E, n0, S, n1, D, E, n0, S, n1, D, n0, E, F,
        n0, S, n0, T, E, F, S, n0, D, n1, E, F, EOS, TRUE,
    ]
    # a cycle through the root: the lookup of 0 answers [FAILED] and the CoT ends
    cot = retrieval_cot(3, [(1, 0), (2, 1), (2, 0)])
    assert cot[-7:] == [S, number_token(0), T, E, F, EOS, FALSE]
    assert parse_retrieval_cot(cot).stopped


# ---------------------------------------------------------------------------
# Exhaustive: labels and both CoTs vs networkx
# ---------------------------------------------------------------------------

def _check_all_rules(n, order, label):
    tour = dfs_tour(n, order)
    assert tour_label(n, tour) == label, (n, order, tour)
    cot = retrieval_cot(n, order)
    trace = parse_retrieval_cot(cot)
    assert list(trace.tops) == tour, (n, order)
    assert retrieval_label(n, cot) == label and cot[-1] == (TRUE if label else FALSE)
    assert reference_cot(n, order)[-1] == cot[-1]


def test_all_graphs_up_to_5_in_every_edge_order():
    checked = 0
    for n in range(1, 6):
        for edges in enumerate_graphs(n):
            label = reference_label(n, edges)
            assert label == nx_is_tree(n, edges)
            for order in edge_orders(edges, limit=12, rng=np.random.default_rng([n, len(edges)])):
                _check_all_rules(n, order, label)
                checked += 1
    assert checked > 40_000


def test_all_graphs_on_6_in_seeded_orders():
    rng = np.random.default_rng(20250106)
    trees = 0
    for edges in enumerate_graphs(6):
        label = reference_label(6, edges)
        assert label == nx_is_tree(6, edges)
        trees += label
        order = [edges[i] for i in rng.permutation(len(edges))]
        tour = dfs_tour(6, order)
        assert tour_label(6, tour) == label, order
        if len(edges) in (5, 6):            # where trees and near misses live: style 2 as well
            _check_all_rules(6, order, label)
    assert trees == 6 ** 4                  # Cayley


def test_enumeration_counts_and_cayley():
    for n in range(1, 6):
        gs = list(enumerate_graphs(n))
        assert len(gs) == 2 ** (n * (n - 1) // 2)
        assert len({frozenset(g) for g in gs}) == len(gs)
        assert all(u > v for g in gs for u, v in g)
        assert sum(inst.label for inst in enumerate_all(n)) == (n ** (n - 2) if n >= 2 else 1)
    with pytest.raises(ValueError):
        next(enumerate_graphs(7))


def test_edge_orders():
    e5 = [(1, 0), (2, 1), (3, 2), (4, 3), (4, 0)]
    orders = edge_orders(e5, limit=3)
    assert len(orders) == 120 and len({tuple(o) for o in orders}) == 120 and orders[0] == e5
    e7 = [(i + 1, i) for i in range(7)]
    a = edge_orders(e7, 50, np.random.default_rng(1))
    b = edge_orders(e7, 50, np.random.default_rng(1))
    assert a == b and len({tuple(o) for o in a}) == 50 and a[0] == e7
    assert all(sorted(o) == sorted(e7) for o in a)
    with pytest.raises(TypeError):
        edge_orders(e7, 5, rng=None)
    assert edge_orders([], 1) == [[]]


# ---------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------

def _components_and_cycles(n, edges):
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    return nx.number_connected_components(g), len(nx.cycle_basis(g))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generators_deterministic_oriented_labelled(family):
    gen, lo = FAMILIES[family]
    for n in range(lo, 12):
        for seed in range(15):
            a = gen(np.random.default_rng(seed), n)
            b = gen(np.random.default_rng(seed), n)
            assert a == b
            assert all(n > u > v >= 0 for u, v in a.edges)
            assert len({frozenset(e) for e in a.edges}) == len(a.edges)
            assert a.label == nx_is_tree(n, a.edges)
    outs = {tuple(gen(np.random.default_rng(s), 8).edges) for s in range(20)}
    assert len(outs) > 10, "different seeds should give different graphs"
    for bad in (None, 0, np.random.RandomState(0)):
        with pytest.raises(TypeError):
            gen(bad, 8)


def test_generator_families():
    rng = np.random.default_rng(7)
    for n in range(4, 13):
        for _ in range(20):
            t = random_tree(rng, n)
            assert t.label and len(t.edges) == n - 1
            nt = near_tree(rng, n)
            assert not nt.label and len(nt.edges) == n - 1
            assert _components_and_cycles(n, nt.edges) == (2, 1)
            bg = paper_binary_graph(rng, n)
            assert is_paper_binary(n, bg.edges) and len(bg.edges) == n - 1
            comps, cycles = _components_and_cycles(n, bg.edges)
            assert (comps, cycles) == ((1, 0) if bg.label else (2, 1))
            rg = random_graph(rng, n)
            assert not rg.label and len(rg.edges) != n - 1
            pr = paper_random_graph(rng, n)
            assert len(pr.edges) <= n
    assert len(random_graph(rng, 6, m=5).edges) == 5
    assert random_tree(rng, 1) == ([], True) and random_tree(rng, 2) == ([(1, 0)], True)
    for gen, n in ((near_tree, 3), (paper_binary_graph, 3), (paper_random_graph, 1), (random_graph, 1)):
        with pytest.raises(ValueError):
            gen(rng, n)


def test_generator_statistics_seeded():
    rng = np.random.default_rng(11)
    # Prufer trees are uniform: all 16 labelled trees on 4 vertices, none rare
    counts: dict = {}
    for _ in range(1600):
        key = frozenset(frozenset(e) for e in random_tree(rng, 4).edges)
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 16 and min(counts.values()) > 50
    # the paper's families: binary is a tree half the time; random has both branches
    binary = [paper_binary_graph(rng, 10).label for _ in range(400)]
    assert 0.4 < np.mean(binary) < 0.6
    sizes = [len(paper_random_graph(rng, 10).edges) for _ in range(400)]
    assert 0.45 < np.mean([s == 9 for s in sizes]) and min(sizes) < 9 and max(sizes) == 10
    # the edge list comes shuffled, not sorted
    orders = [random_tree(rng, 8).edges for _ in range(20)]
    assert any(o != sorted(o) and o != sorted(o, reverse=True) for o in orders)


def test_paper_random_quirk_is_a_parameter():
    a = paper_random_graph(np.random.default_rng(3), 8, paper_quirk=False)
    assert a.label == nx_is_tree(8, a.edges)
    # n = 2: the non-tree branch has no admissible extra edge, we redraw: only trees
    assert all(paper_random_graph(np.random.default_rng(s), 2).label for s in range(20))


def test_generate_batches():
    rng = np.random.default_rng(5)
    batch = generate(rng, 3, 40)
    assert {b.family for b in batch} <= {"tree", "paper_random", "wrong_size"}
    batch = generate(np.random.default_rng(5), 9, 200)
    assert {b.family for b in batch} == set(FAMILIES)
    assert [b.edges for b in batch] == [b.edges for b in generate(np.random.default_rng(5), 9, 200)]
    for b in batch:
        assert b.tokens.dtype == np.int64 and b.tokens[0] == BOS and b.tokens[-1] == EOS
        assert parse_graph_tokens(b.tokens, 9) == list(b.edges)
        assert b.answer == reference(b.tokens, 9) == (TRUE if nx_is_tree(9, b.edges) else FALSE)
        Vocab(max_number=8).validate(b.tokens)
    with pytest.raises(ValueError):
        generate(rng, 3, 1, family="near_tree")
    with pytest.raises(ValueError):
        generate(rng, 8, 1, family="nope")
    with pytest.raises(TypeError):
        generate(1, 8, 1)


# ---------------------------------------------------------------------------
# Hypothesis: larger graphs, arbitrary orders and orientations
# ---------------------------------------------------------------------------

@given(graphs(1, 12))
def test_hypothesis_rules_agree_with_networkx(g):
    n, edges = g
    label = nx_is_tree(n, edges)
    assert reference_label(n, edges) == label
    _check_all_rules(n, edges, label)
    check_retrieval_answers(edges, retrieval_cot(n, edges))


@given(graphs(1, 12))
def test_hypothesis_text_and_token_round_trip(g):
    n, edges = g
    for sep in ("-", "~"):
        text = format_graph_text(edges, sep=sep)
        parsed, toks = parse_graph_text(text, n)
        assert parsed == list(edges) and toks == graph_tokens(edges, sep=sep)
        assert parse_graph_tokens(toks, n) == list(edges)
    for cot in (reference_cot(n, edges), retrieval_cot(n, edges)):
        text = format_cot_text(edges, cot, include_label=True)
        assert parse_cot_text(text, n) == (list(edges), cot)
        assert parse_cot_text(format_cot_text(edges, cot), n) == (list(edges), cot[:-1])


@given(instances(4, 10))
def test_hypothesis_instances(inst):
    assert inst.label == nx_is_tree(inst.n_nodes, inst.edges)
    assert reference(inst.tokens, inst.n_nodes) == inst.answer


# ---------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, where, token",
    [
        ("3-2,2-1[EOS]", "character 0", "'3'"),                       # missing [BOS]
        ("[BOS]3-2,2-1", "character 12", "missing '[EOS]'"),
        ("[BOS]3-2,2-1,", "character 13", "missing '[EOS]'"),
        ("[BOS]3-2,2-x[EOS]", "character 11, edge 1", "unknown token 'x'"),
        ("[BOS]3-2;1-0[EOS]", "character 8, edge 0", "unknown token ';'"),
        ("[BOS]3-2[FOO]", "character 8, edge 0", "unknown token '[FOO]'"),
        ("[BOS]3+2[EOS]", "character 6, edge 0", "unknown token '+'"),
        ("[BOS]3-2,2-2[EOS]", "character 9, edge 1", "self-loop '2-2'"),
        ("[BOS]3-2,3-2[EOS]", "character 9, edge 1", "duplicate edge '3-2' (same as edge 0)"),
        ("[BOS]3-2,2~3[EOS]", "character 9, edge 1", "duplicate edge '2-3' (same as edge 0)"),
        ("[BOS]3-2,4-1[EOS]", "character 9, edge 1", "vertex 4"),
        ("[BOS]3-2,2-[EOS]", "character 11, edge 1", "dangling separator"),
        ("[BOS]3-2,-1[EOS]", "character 9, edge 1", "separator '-' without a first endpoint"),
        ("[BOS]3-2,,1-0[EOS]", "character 9, edge 1", "empty edge"),
        ("[BOS]3-2,[EOS]", "character 8", "trailing ','"),
        ("[BOS]03-2[EOS]", "character 5, edge 0", "leading zero '03'"),
    ],
)
def test_malformed_graph_text_names_the_position(text, where, token):
    with pytest.raises(GraphFormatError) as err:
        parse_graph_text(text, n_nodes=4)
    assert isinstance(err.value, ValueError)
    msg = str(err.value)
    assert msg.startswith(where) and token in msg, msg


@pytest.mark.parametrize(
    "tokens, where",
    [
        ([35, 7, 34, 1], "token 0"),                                  # no [BOS]
        ([0, 35, 7, 34], "token 4: missing [EOS]"),
        ([0, 35, 7, 1], "token 3, edge 0: dangling separator, found '[EOS]'"),
        ([0, 35, 34, 1], "token 2, edge 0: expected a separator, found '2'"),
        ([0, 35, 7, 34, 34, 8, 35, 1], "token 4, edge 1: duplicate edge '2-3'"),
        ([0, 35, 7, 35, 1], "token 1, edge 0: self-loop '3-3'"),
        ([0, 35, 7, 36, 1], "token 1, edge 0: vertex 4"),
        ([0, 35, 7, 34, 9, 1], "token 4, edge 1: expected a vertex, found '[QUERY]'"),
    ],
)
def test_malformed_graph_tokens_name_the_position(tokens, where):
    with pytest.raises(GraphFormatError) as err:
        parse_graph_tokens(tokens, n_nodes=4)
    assert str(err.value).startswith(where), str(err.value)


def test_malformed_cot_text_and_edge_lists():
    for text, where in [
        ("[BOS]1-0[EOS]0,x,0[EOS]", "character 15: unknown CoT item 'x'"),
        ("[BOS]1-0[EOS]0,1,0", "character 18"),
        ("[BOS]1-0[EOS]0,[EOS],0[EOS]", "character 15: '[EOS]' inside"),
    ]:
        with pytest.raises(CotFormatError) as err:
            parse_cot_text(text)
        assert str(err.value).startswith(where), str(err.value)
    with pytest.raises(GraphFormatError, match="edge 2: duplicate edge '0-1' \\(same as edge 0\\)"):
        reference_label(3, [(1, 0), (2, 1), (0, 1)])
    with pytest.raises(GraphFormatError, match="edge 0: vertex 3"):
        dfs_tour(3, [(3, 0)])
    with pytest.raises(ValueError):
        reference_label(0, [])
    with pytest.raises(CotFormatError):
        format_cot_text([(1, 0)], [number_token(0)])                    # no [EOS]
    with pytest.raises(ValueError, match="token 6: expected a vertex number"):
        parse_retrieval_cot(retrieval_cot(3, [(1, 0)])[:7])


def test_docstring_examples():
    for module in (formats, istree):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
