"""IsTree: is an undirected graph on vertices ``0..N-1`` a tree?

An instance is a vertex count ``n_nodes`` (N, not recoverable from the tokens)
and an *ordered* edge list; the tokens are ``[BOS] u - v u - v ... [EOS]``
(:func:`rnngap.checks.io.formats.graph_tokens`) and the answer is ``[TRUE]`` iff the graph
is a tree (:func:`reference_label`; the paper's generator labels by connectivity
only, which differs on connected graphs with one cycle). Two chains of thought
walk neighbours in edge-list order: the DFS Euler tour (:func:`dfs_tour`, decided
by :func:`tour_label`: a tree iff the tour has 2N - 1 tokens and N distinct
vertices) and the same DFS written as RAG searches (:func:`retrieval_cot`).
Generators take an explicit ``numpy.random.Generator`` and return edges with
``u > v`` in a random order.

Details (the labels, both CoTs, the decision rule):
docs/internals/tasks.md#istree
"""
from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator, NamedTuple, Sequence

import networkx as nx
import numpy as np
from hypothesis import strategies as st

from rnngap.checks.io.formats import Edge, graph_tokens, parse_graph_tokens, validate_edges
from rnngap.constructions.machine.vocab import (
    DASH,
    ENDSEARCH,
    EOS,
    FAILED,
    FALSE,
    NUMBER_BASE,
    SPECIAL_NAMES,
    STARTSEARCH,
    TILDE,
    TRUE,
    number_token,
)
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as LR

from .spec import TaskSpec

__all__ = [
    "GeneratedGraph", "IsTreeInstance", "RetrievalTrace", "FAMILIES",
    "reference_label", "reference", "neighbour_lists",
    "dfs_tour", "tour_label", "reference_cot",
    "retrieval_cot", "parse_retrieval_cot", "retrieval_label",
    "random_tree", "near_tree", "paper_binary_graph", "paper_random_graph", "random_graph",
    "is_paper_binary", "generate", "enumerate_graphs", "enumerate_all", "edge_orders",
    "graphs", "instances",
]


# ---------------------------------------------------------------------------
# Label
# ---------------------------------------------------------------------------

def _check(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[Edge]:
    if not isinstance(n_nodes, (int, np.integer)) or n_nodes < 1:
        raise ValueError(f"n_nodes must be an int >= 1 (vertex 0 is the DFS root), got {n_nodes!r}")
    return validate_edges(edges, int(n_nodes))


def reference_label(n_nodes: int, edges: Sequence[Sequence[int]]) -> bool:
    """True iff the graph on vertices ``0..n_nodes-1`` is a tree (``networkx.is_tree``).

    >>> reference_label(4, [(2, 0), (3, 2), (1, 0)]), reference_label(4, [(2, 0), (3, 2)])
    (True, False)
    """
    edges = _check(n_nodes, edges)
    g = nx.Graph()
    g.add_nodes_from(range(n_nodes))
    g.add_edges_from(edges)
    return bool(nx.is_tree(g))


def reference(tokens: Sequence[int], n_nodes: int) -> int:
    """The answer token (``[TRUE]``/``[FALSE]``) for ``[BOS] u - v ... [EOS]`` on ``n_nodes`` vertices."""
    return TRUE if reference_label(n_nodes, parse_graph_tokens(tokens, n_nodes)) else FALSE


# ---------------------------------------------------------------------------
# CoT style 1: DFS Euler tour
# ---------------------------------------------------------------------------

def neighbour_lists(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[list[int]]:
    """``adj[u]``: u's neighbours in the order their edges appear in the list.

    >>> neighbour_lists(4, [(2, 0), (3, 2), (1, 0)])
    [[2, 1], [0], [0, 3], [2]]
    """
    adj: list[list[int]] = [[] for _ in range(n_nodes)]
    for u, v in _check(n_nodes, edges):
        adj[u].append(v)
        adj[v].append(u)
    return adj


def dfs_tour(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[int]:
    """CoT style 1 without its ``[EOS]`` and label (see the module docstring).

    >>> dfs_tour(4, [(2, 0), (3, 2), (1, 0)])
    [0, 2, 3, 2, 0, 1, 0]
    >>> dfs_tour(4, [(2, 0), (2, 1), (1, 0)])       # cycle: stops at 1, which sees 0
    [0, 2, 1]
    """
    adj = neighbour_lists(n_nodes, edges)
    tour = [0]
    visited = {0}
    # frames: [vertex, parent (None for the root), index of the next neighbour to scan]
    stack: list[list] = [[0, None, 0]]
    while stack:
        frame = stack[-1]
        u, parent = frame[0], frame[1]
        if frame[2] == len(adj[u]):          # u finished: back to its parent
            stack.pop()
            if stack:
                tour.append(stack[-1][0])
            continue
        y = adj[u][frame[2]]
        frame[2] += 1
        if y == parent:
            continue
        if y in visited:                     # first visited non-parent neighbour: cycle
            return tour
        visited.add(y)
        tour.append(y)
        stack.append([y, u, 0])
    return tour


def tour_label(n_nodes: int, tour: Sequence[int]) -> bool:
    """The decision rule read off a style-1 tour: completed and visited all vertices.

    ``len(tour) == 2 * n_nodes - 1`` and ``len(set(tour)) == n_nodes``.
    """
    return len(tour) == 2 * n_nodes - 1 and len(set(tour)) == n_nodes


def reference_cot(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[int]:
    """Style-1 CoT as token ids: the tour, ``[EOS]``, then ``[TRUE]``/``[FALSE]`` (tree label).

    >>> reference_cot(2, [(1, 0)])
    [32, 33, 32, 1, 2]
    """
    tour = dfs_tour(n_nodes, edges)
    label = reference_label(n_nodes, edges)
    return [number_token(u) for u in tour] + [EOS, TRUE if label else FALSE]


# ---------------------------------------------------------------------------
# CoT style 2: retrieval
# ---------------------------------------------------------------------------

def _next_neighbour(adj_u: list[int], after: int | None) -> int | None:
    """u's first neighbour (``after is None``) or the one following ``after``; None if none."""
    if after is None:
        return adj_u[0] if adj_u else None
    i = adj_u.index(after) + 1
    return adj_u[i] if i < len(adj_u) else None


def retrieval_cot(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[int]:
    """Style-2 CoT as token ids (searches and their answers), ``[EOS]``, the tree label.

    Semantics in the module docstring.  One-edge example, edges ``1-0``::

        0 SS 0 ~ ES [FAILED] SS 0 - ES 1 SS 1 ~ ES [FAILED] 1 ~ 0
        1 SS 1 ~ ES 0 SS 1 - ES 0 SS 1 - 0 ES [FAILED]
        0 SS 0 ~ ES [FAILED] SS 0 - 1 ES [FAILED] [EOS] [TRUE]
    """
    adj = neighbour_lists(n_nodes, edges)
    num = number_token

    def ans(x: int | None) -> int:
        return FAILED if x is None else num(x)

    parent: dict[int, int] = {}              # the records 'w ~ u' written so far
    out: list[int] = []
    stack = [0]
    last: int | None = None                  # child just finished, None on a first visit
    while stack:
        u = stack[-1]
        pu = parent.get(u)
        out += [num(u), STARTSEARCH, num(u), TILDE, ENDSEARCH, ans(pu)]
        if last is None:
            out += [STARTSEARCH, num(u), DASH, ENDSEARCH]
        else:
            out += [STARTSEARCH, num(u), DASH, num(last), ENDSEARCH]
        w = _next_neighbour(adj[u], last)
        out.append(ans(w))
        if w is not None and w == pu:
            out += [STARTSEARCH, num(u), DASH, num(pu), ENDSEARCH]
            w = _next_neighbour(adj[u], pu)
            out.append(ans(w))
        if w is None:
            stack.pop()
            last = u
            continue
        out += [STARTSEARCH, num(w), TILDE, ENDSEARCH]
        if w == 0 or w in parent:            # visited: the cycle, stop
            out.append(ans(parent.get(w)))
            break
        out += [FAILED, num(w), TILDE, num(u)]
        parent[w] = u
        stack.append(w)
        last = None
    label = reference_label(n_nodes, edges)
    return out + [EOS, TRUE if label else FALSE]


_KIND_NAMES = {"num": "a vertex number", "ans": "a vertex number or [FAILED]"}


def _token_name(t: int | None) -> str:
    if t is None:
        return "end of CoT"
    return str(t - NUMBER_BASE) if t >= NUMBER_BASE else SPECIAL_NAMES.get(t, f"<id {t}>")


@dataclass(frozen=True)
class RetrievalTrace:
    """A style-2 CoT read back: the stack top of every step (equals the style-1
    tour), the records ``(w, u)`` in order, and whether it stopped at a cycle."""

    tops: tuple[int, ...]
    records: tuple[tuple[int, int], ...]
    stopped: bool


def parse_retrieval_cot(cot: Sequence[int]) -> RetrievalTrace:
    """Parse a style-2 CoT (token ids, up to ``[EOS]``; a label after it is ignored).

    Raises ``ValueError`` naming the token position where the grammar of the
    module docstring is violated.  It checks the shape only, not the answers.
    """
    toks = [int(t) for t in cot]
    pos = 0

    def peek() -> int | None:
        return toks[pos] if pos < len(toks) else None

    def take(kind: str) -> int | None:
        nonlocal pos
        t = toks[pos] if pos < len(toks) else None
        if kind == "num":
            ok = t is not None and t >= NUMBER_BASE
        elif kind == "ans":
            ok = t is not None and (t >= NUMBER_BASE or t == FAILED)
        else:
            ok = t == kind
        if not ok:
            want = _KIND_NAMES.get(kind, kind) if isinstance(kind, str) else _token_name(kind)
            found = "end of CoT" if t is None else _token_name(t)
            raise ValueError(f"retrieval CoT token {pos}: expected {want}, found {found}")
        pos += 1
        return None if t == FAILED else (t - NUMBER_BASE if t >= NUMBER_BASE else t)

    tops: list[int] = []
    records: list[tuple[int, int]] = []
    stopped = False
    while peek() != EOS:
        u = take("num")
        tops.append(u)
        for want in (STARTSEARCH, u + NUMBER_BASE, TILDE, ENDSEARCH):
            take(want)
        take("ans")
        w = None
        for _ in range(2):                    # neighbour query, possibly repeated past the parent
            if peek() != STARTSEARCH or toks[pos + 2:pos + 3] != [DASH]:
                break
            take(STARTSEARCH), take(u + NUMBER_BASE), take(DASH)
            if peek() != ENDSEARCH:
                take("num")
            take(ENDSEARCH)
            w = take("ans")
        if w is None:
            continue
        take(STARTSEARCH), take(w + NUMBER_BASE), take(TILDE), take(ENDSEARCH)
        r = take("ans")
        if r is None and toks[pos:pos + 2] == [w + NUMBER_BASE, TILDE]:
            take("num"), take(TILDE)
            records.append((w, take("num")))
            continue
        stopped = True
        if peek() != EOS:
            raise ValueError(
                f"retrieval CoT token {pos}: expected [EOS] after the cycle, found {_token_name(peek())}"
            )
    return RetrievalTrace(tuple(tops), tuple(records), stopped)


def retrieval_label(n_nodes: int, cot: Sequence[int]) -> bool:
    """Decision rule on a style-2 CoT: no cycle stop and ``n_nodes - 1`` records."""
    trace = parse_retrieval_cot(cot)
    return not trace.stopped and len(trace.records) == n_nodes - 1


# ---------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------

class GeneratedGraph(NamedTuple):
    """``edges`` (u > v each, random order) and the tree ``label``."""

    edges: list[Edge]
    label: bool


def _need_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"pass an explicit numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _finish(rng: np.random.Generator, n: int, edges) -> GeneratedGraph:
    """Orient every edge u > v, shuffle the list with ``rng``, attach the label."""
    oriented = [(max(int(a), int(b)), min(int(a), int(b))) for a, b in edges]
    order = rng.permutation(len(oriented))
    out = [oriented[i] for i in order]
    return GeneratedGraph(out, reference_label(n, out))


def _prufer_tree(rng: np.random.Generator, n: int) -> list[Edge]:
    """A uniform labelled tree on ``0..n-1`` from a random Prufer sequence."""
    if n == 1:
        return []
    seq = [int(x) for x in rng.integers(0, n, size=n - 2)]
    degree = [1] * n
    for x in seq:
        degree[x] += 1
    leaves = [v for v in range(n) if degree[v] == 1]
    heapq.heapify(leaves)
    edges = []
    for x in seq:
        leaf = heapq.heappop(leaves)
        edges.append((leaf, x))
        degree[x] -= 1
        if degree[x] == 1:
            heapq.heappush(leaves, x)
    edges.append((heapq.heappop(leaves), heapq.heappop(leaves)))
    return edges


def random_tree(rng: np.random.Generator, n: int) -> GeneratedGraph:
    """A uniformly random labelled tree on ``n >= 1`` vertices (label True)."""
    rng = _need_rng(rng)
    if n < 1:
        raise ValueError(f"random_tree needs n >= 1, got {n}")
    return _finish(rng, n, _prufer_tree(rng, n))


def _component(n: int, edges: list[Edge], start: int) -> set[int]:
    adj = [[] for _ in range(n)]
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    seen, todo = {start}, [start]
    while todo:
        for y in adj[todo.pop()]:
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return seen


def near_tree(rng: np.random.Generator, n: int) -> GeneratedGraph:
    """A random tree with one edge moved: cut a tree edge, then join two non-adjacent
    vertices of one side.  N-1 edges, one cycle, two components (label False).

    Needs ``n >= 4`` (a side with >= 3 vertices must exist).  The cut edge is
    uniform among edges leaving a side of >= 3 vertices, the side uniform among
    such sides, the new edge uniform among that side's non-adjacent pairs.
    """
    rng = _need_rng(rng)
    if n < 4:
        raise ValueError(f"near_tree needs n >= 4, got {n}")
    tree = _prufer_tree(rng, n)
    options = []
    for k, (a, b) in enumerate(tree):
        rest = tree[:k] + tree[k + 1:]
        for side in (_component(n, rest, a), _component(n, rest, b)):
            if len(side) >= 3:
                options.append((k, sorted(side)))
    k, side = options[int(rng.integers(len(options)))]
    rest = tree[:k] + tree[k + 1:]
    present = {frozenset(e) for e in rest}
    pairs = [(x, y) for x, y in itertools.combinations(side, 2) if frozenset((x, y)) not in present]
    extra = pairs[int(rng.integers(len(pairs)))]
    return _finish(rng, n, rest + [extra])


def paper_binary_graph(rng: np.random.Generator, n: int) -> GeneratedGraph:
    """The paper's ``binary`` family (``rnn/data.py``), same distribution.

    A random permutation ``p`` of the vertices; hubs ``p[0]``, ``p[1]`` (not
    joined); every other ``p[i]`` is attached to one hub by a fair coin; then one
    extra edge ``p[i] - p[i+1]`` for ``i`` uniform in ``2..n-2``.  Always N-1
    edges; a tree iff ``p[i]``, ``p[i+1]`` hang on different hubs, else a
    triangle plus a separate star (probability 1/2 each).  Needs ``n >= 4``.
    """
    rng = _need_rng(rng)
    if n < 4:
        raise ValueError(f"paper_binary_graph needs n >= 4 (the paper draws i in 2..n-2), got {n}")
    p = [int(x) for x in rng.permutation(n)]
    edges = [(p[0] if rng.random() < 0.5 else p[1], p[i]) for i in range(2, n)]
    i = int(rng.integers(2, n - 1))
    edges.append((p[i], p[i + 1]))
    return _finish(rng, n, edges)


def is_paper_binary(n: int, edges: Sequence[Sequence[int]]) -> bool:
    """Could ``paper_binary_graph`` have produced this graph?  (Two non-adjacent hubs,
    every other vertex on exactly one hub, exactly one extra edge between non-hubs.)"""
    es = [frozenset(e) for e in _check(n, edges)]
    if n < 4 or len(es) != n - 1:
        return False
    for a, b in itertools.combinations(range(n), 2):
        if frozenset((a, b)) in es:
            continue
        others = [e for e in es if not (e & {a, b})]
        ok = len(others) == 1 and all(
            sum(frozenset((h, v)) in es for h in (a, b)) == 1 for v in range(n) if v not in (a, b)
        )
        if ok:
            return True
    return False


def paper_random_graph(rng: np.random.Generator, n: int, *, paper_quirk: bool = True) -> GeneratedGraph:
    """The paper's ``random`` family (``rnn/data.py``), same distribution where it halts.

    With probability 1/2 a random recursive tree (``p[i]`` hangs on ``p[j]``,
    ``j`` uniform in ``0..i-1``; label True).  Otherwise: ``r`` uniform in
    ``1..n-1``; every ``p[i]`` with ``i != r`` is joined to ``p[j]``, ``j`` uniform
    in ``0..n-1`` (``j == i`` gives a self-loop, which the paper's edge list
    drops; repeated pairs collapse); then one extra edge between a uniform pair
    of distinct, non-adjacent vertices avoiding ``r``.  At most N edges.

    ``paper_quirk``: the paper compares the *vertex ids* of the extra edge with
    the permutation *index* ``r`` (so it avoids vertex ``r``, not ``p[r]``); True
    reproduces that, False avoids ``p[r]``.  Where no admissible extra edge
    exists the paper's rejection loop never ends; we redraw the whole graph
    instead (so ``n = 2`` yields only trees).  Needs ``n >= 2``.
    """
    rng = _need_rng(rng)
    if n < 2:
        raise ValueError(f"paper_random_graph needs n >= 2, got {n}")
    while True:
        if rng.random() < 0.5:
            p = [int(x) for x in rng.permutation(n)]
            edges = [(p[int(rng.integers(0, i))], p[i]) for i in range(1, n)]
            return _finish(rng, n, edges)
        r = int(rng.integers(1, n))
        p = [int(x) for x in rng.permutation(n)]
        present: set[frozenset] = set()
        for i in range(n):
            if i != r:
                j = int(rng.integers(0, n))
                if j != i:
                    present.add(frozenset((p[i], p[j])))
        avoid = r if paper_quirk else p[r]
        pairs = [
            (x, y) for x, y in itertools.combinations(range(n), 2)
            if avoid not in (x, y) and frozenset((x, y)) not in present
        ]
        if not pairs:
            continue
        x, y = pairs[int(rng.integers(len(pairs)))]
        edges = [tuple(e) for e in present] + [(x, y)]
        edges.sort()                          # set order is not seeded; _finish shuffles
        return _finish(rng, n, edges)


def random_graph(rng: np.random.Generator, n: int, m: int | None = None) -> GeneratedGraph:
    """A uniform graph with ``m`` edges; ``m=None`` draws ``m`` uniformly from
    ``0..n(n-1)/2`` minus ``{n-1}`` (so never a tree: label False).  ``n >= 2``
    when ``m`` is None."""
    rng = _need_rng(rng)
    total = n * (n - 1) // 2
    pairs = [(i, j) for i in range(n) for j in range(i)]
    if m is None:
        if n < 2:
            raise ValueError(f"random_graph with m != n-1 needs n >= 2, got {n}")
        sizes = [k for k in range(total + 1) if k != n - 1]
        m = sizes[int(rng.integers(len(sizes)))]
    if not 0 <= m <= total:
        raise ValueError(f"m must be in 0..{total} for n = {n}, got {m}")
    chosen = sorted(int(k) for k in rng.choice(total, size=m, replace=False))
    return _finish(rng, n, [pairs[k] for k in chosen])


FAMILIES: dict[str, tuple[Callable[[np.random.Generator, int], GeneratedGraph], int]] = {
    "tree": (random_tree, 1),
    "near_tree": (near_tree, 4),
    "paper_binary": (paper_binary_graph, 4),
    "paper_random": (paper_random_graph, 2),
    "wrong_size": (random_graph, 2),
}
"""Family name -> (generator, smallest n it accepts)."""


@dataclass(frozen=True)
class IsTreeInstance:
    """One instance: ``n_nodes``, the ordered ``edges``, its tree ``label`` and ``family``."""

    n_nodes: int
    edges: tuple[Edge, ...]
    label: bool
    family: str

    @property
    def tokens(self) -> np.ndarray:
        """``[BOS] u - v ... [EOS]`` as a 1-D int64 array."""
        return np.asarray(graph_tokens(self.edges), dtype=np.int64)

    @property
    def answer(self) -> int:
        return TRUE if self.label else FALSE


def generate(rng: np.random.Generator, n: int, batch: int, family: str = "mixed") -> list[IsTreeInstance]:
    """``batch`` instances on ``n`` vertices from one family, or ``"mixed"``: each
    instance from a family drawn uniformly among those that accept ``n``."""
    rng = _need_rng(rng)
    allowed = [f for f, (_, lo) in FAMILIES.items() if n >= lo]
    if family != "mixed" and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {sorted(FAMILIES)} or 'mixed'")
    if family != "mixed" and family not in allowed:
        raise ValueError(f"family {family!r} needs n >= {FAMILIES[family][1]}, got {n}")
    out = []
    for _ in range(batch):
        fam = allowed[int(rng.integers(len(allowed)))] if family == "mixed" else family
        g = FAMILIES[fam][0](rng, n)
        out.append(IsTreeInstance(n, tuple(g.edges), g.label, fam))
    return out


# ---------------------------------------------------------------------------
# Exhaustive enumeration
# ---------------------------------------------------------------------------

MAX_ENUMERATE_N = 6


def enumerate_graphs(n: int) -> Iterator[list[Edge]]:
    """Every simple graph on ``0..n-1`` (``1 <= n <= 6``; 2^(n(n-1)/2) of them), edges
    ``(u, v)`` with ``u > v`` in the order ``(1,0), (2,0), (2,1), (3,0), ...``."""
    if not 1 <= n <= MAX_ENUMERATE_N:
        raise ValueError(f"enumerate_graphs is for 1 <= n <= {MAX_ENUMERATE_N}, got {n}")
    pairs = [(i, j) for i in range(n) for j in range(i)]
    for mask in range(1 << len(pairs)):
        yield [e for k, e in enumerate(pairs) if mask >> k & 1]


def enumerate_all(n: int) -> Iterator[IsTreeInstance]:
    """:func:`enumerate_graphs` as labelled instances (family ``"all"``)."""
    for edges in enumerate_graphs(n):
        yield IsTreeInstance(n, tuple(edges), reference_label(n, edges), "all")


MAX_ALL_ORDERS = 5


def edge_orders(edges: Sequence[Edge], limit: int, rng: np.random.Generator | None = None) -> list[list[Edge]]:
    """Orders of an edge list: all ``m!`` of them when ``m <= 5`` (``limit``, ``rng``
    unused), else the given order plus random distinct ones drawn with ``rng``,
    ``min(limit, m!)`` in all."""
    edges = [tuple(e) for e in edges]
    m = len(edges)
    if m <= MAX_ALL_ORDERS:
        return [list(p) for p in itertools.permutations(edges)]
    rng = _need_rng(rng)
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    want = min(limit, math.factorial(m))
    seen = {tuple(range(m))}
    out = [list(edges)]
    while len(out) < want:
        perm = tuple(int(i) for i in rng.permutation(m))
        if perm not in seen:
            seen.add(perm)
            out.append([edges[i] for i in perm])
    return out


# ---------------------------------------------------------------------------
# Hypothesis
# ---------------------------------------------------------------------------

@st.composite
def _any_graph(draw, n: int) -> list[Edge]:
    pairs = [(i, j) for i in range(n) for j in range(i)]
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    chosen = draw(st.permutations([e for e, k in zip(pairs, keep) if k]))
    flips = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    return [(v, u) if f else (u, v) for (u, v), f in zip(chosen, flips)]


@st.composite
def graphs(draw, n_min: int = 1, n_max: int = 8) -> tuple[int, list[Edge]]:
    """``(n_nodes, edges)``: one of the generator families (seeded from a drawn
    seed) or an arbitrary edge subset in arbitrary order and orientation."""
    if not 1 <= n_min <= n_max:
        raise ValueError(f"need 1 <= n_min <= n_max, got {n_min}, {n_max}")
    n = draw(st.integers(n_min, n_max))
    fams = [f for f, (_, lo) in FAMILIES.items() if n >= lo] + ["arbitrary"]
    fam = draw(st.sampled_from(fams))
    if fam == "arbitrary":
        return n, draw(_any_graph(n))
    seed = draw(st.integers(0, 2**32 - 1))
    return n, FAMILIES[fam][0](np.random.default_rng(seed), n).edges


@st.composite
def instances(draw, n_min: int = 1, n_max: int = 8) -> IsTreeInstance:
    """:func:`graphs` as labelled instances (family ``"hypothesis"``)."""
    n, edges = draw(graphs(n_min, n_max))
    return IsTreeInstance(n, tuple(edges), reference_label(n, edges), "hypothesis")


def _spec():
    def split(n: int, hubs: int):
        return cc.istree_split(n, partial(reference, n_nodes=LR.istree_vertex_count(n, hubs)), hubs=hubs)
    return TaskSpec(
        name="istree", description="IsTree: [BOS] u - v ... [EOS] on N vertices -> whether the graph is a tree",
        reference=reference, generate=generate, enumerate_all=enumerate_all,
        reduction=LR.ISTREE, reduction_alphabet=lambda n: n + 3, data_length=LR.istree_vertex_count,
        reduction_nodes=LR.istree_vertex_count, cc_split=split, family="istree", min_n=1,
        predict="istree", predict_help="IsTree on the paper's textual graph format (JSON lines)")


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`); the reference takes ``n_nodes``
(:meth:`checks.tasks.spec.TaskSpec.reference_at`)."""
