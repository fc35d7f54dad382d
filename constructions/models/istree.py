"""IsTree with a DFS-tour chain of thought: a constant-size Transformer (claim T4.7-up).

After ``[BOS] u - v u - v ... [EOS]`` (``-`` or ``~`` between endpoints, either
endpoint order) the model writes the DFS Euler tour from vertex 0 exactly as
:func:`checks.tasks.istree.dfs_tour` (neighbours in edge-list order, stop right
after the vertex whose scan first meets a visited non-parent neighbour), then
``[EOS]`` and ``[TRUE]``/``[FALSE]``. Five attention layers, 18 heads, width
and parameter count independent of n; driven by :func:`constructions.build.generate.generate`.
An optional header ``[BOS] [COUNT] N ...`` sets the vertex set to 0..N-1
(:func:`prompt_tokens` writes it); the label is always the model's own output.
Each edge's record position serves as its id, so a lookup by (vertex, previous
edge) finds the next neighbour; every weight is exactly 0 or 1 and f = 1.

Example (edges 2-0 3-2 1-0)::

    >>> m = istree_transformer(n_vertices=4)
    >>> run(m, [(2, 0), (3, 2), (1, 0)]).cot          # 0 2 3 2 0 1 0 [EOS], answer [TRUE]
    [32, 34, 35, 34, 32, 33, 32, 1]

Details (the header, records, one CoT step, margins, resources):
docs/internals/models.md#istree
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import log2_ceil, storage_for
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    base_space, first_max_head, flag_component, mask_unless_equal_neurons, match_head, max_neurons,
    number_readout, require, Builder, Component, Head, Neuron, ResidualSpace, equality_neurons,
    select_neurons, shift_head,
)
from rnngap.constructions.build.generate import Generation, generate
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import (
    BOS, COUNT, DASH, EOS, FALSE, NUMBER_BASE, TILDE, TRUE, Vocab, number_token, token_code,
)

Combo = Mapping[str, object]

# ----------------------------------------------------------------------------
# declared resources
from . import bounds as _bounds  # noqa: E402  (the declared bits, written once)
N_SYM, M_SYM = sp.symbols("N M", positive=True, integer=True)
T_EXPR = _bounds.istree_positions(_bounds.SYM, N_SYM, M_SYM)
V_EXPR = _bounds.istree_tau_bound(_bounds.SYM, N_SYM)
INT_EXPR = _bounds.istree_int(_bounds.SYM, N_SYM, M_SYM)
FRAC_BITS = _bounds.ISTREE_FRAC_BITS
FRAC_EXPR = sp.Integer(FRAC_BITS)
N_LAYERS = 5
N_HEADS = 18


HEADER = _bounds.ISTREE_HEADER
"""Tokens of the optional vertex-count header ``[COUNT] N`` (after [BOS])."""


def n_positions(n_vertices: int, max_edges: int) -> int:
    """T = 3M + 2N + 4: [BOS], the optional header ``[COUNT] N``, 3 tokens per
    edge, [EOS], a tour of <= 2N - 1 tokens, the CoT's [EOS] (the label is
    predicted at position T - 1)."""
    return _bounds.istree_positions(_bounds.INT, n_vertices, max_edges)


def tau_bound(n_vertices: int) -> int:
    """V = max(N + 1, 31) >= |tau| of every token the model reads: vertices
    (tau <= N), the count N (tau N + 1), specials (|tau| <= 9) and [COUNT] (-31)."""
    return _bounds.istree_tau_bound(_bounds.INT, n_vertices)


def declared_int_bits(n_vertices: int, max_edges: int) -> int:
    """I(N, M) = 2 ceil(log2 T') + ceil(log2 V) + 6, V = :func:`tau_bound`,
    T' = max(T, V) (so V <= T'; V >= 31 > 22).

    * tie-break heads (pred, parent, visited): lam = 4T (f = 1, mu = 2), scores
      <= lam (4 V^2 + 4) + lam + 2T = 16 T V^2 + 22 T <= 17 T V^2 <= 17 T'^2 V
      < 2^(5 + 2 ceil(log2 T') + ceil(log2 V)); the gadget asks one more bit:
      <= 6 + 2 ceil(log2 T') + ceil(log2 V) = I;
    * lookup heads (lam = 4, edge ids <= T): <= 4 (4 V^2 + 4 T^2 + 4) + 4 <= 33 T'^2,
      7 + 2 ceil(log2 T') bits <= I (ceil(log2 V) >= 5);
    * first-max heads (lam = 2T, keys <= V): <= 2 T V + 2 T;
    * the MLP masking e_prev^2 (bound B = T^2, |back1 - parent| <= 2V):
      <= T^2 + 2 V T^2 + T^2 <= 3 T'^2 V < 2^(2 + 2 ceil(log2 T') + ceil(log2 V));
    * shift heads 6 T^2 + 20 T, embeddings pos^2 <= T^2, readout <= 3 V^2.

    Every head re-checks its own bound at build time (MarginError).
    """
    return _bounds.istree_int(_bounds.INT, n_vertices, max_edges)


def declared_format(n_vertices: int, max_edges: int | None = None) -> FixedFormat:
    """Q(I(N, M)).1, stored in two limbs when I + f passes 62 bits (from N = 1,673 on
    any simple graph, N = 104,856 with at most N + 2 edges)."""
    m = n_vertices if max_edges is None else max_edges
    I = declared_int_bits(n_vertices, m)
    return FixedFormat(I, FRAC_BITS, storage=storage_for(I, FRAC_BITS))


def cot_bound(n_vertices: int) -> int:
    """CoT tokens before the answer: a tour of <= 2N - 1 vertices and its [EOS]."""
    return _bounds.istree_cot(_bounds.INT, n_vertices)


# ----------------------------------------------------------------------------
# the model, one function per layer; each returns the directions it writes
@dataclass(frozen=True)
class _Plan:
    """What every phase needs: the builder, the format, T = :func:`n_positions`
    and V = :func:`tau_bound` (|tau| of any token)."""

    b: Builder
    fmt: FixedFormat
    T: int
    V: int

    def hidden(self, *labels: str, bound: int) -> list[str]:
        """New directions, each |value| <= bound."""
        for lab in labels:
            self.b.space.hidden(lab, bound=bound)
        return list(labels)

    def code(self, label: str) -> list[str]:
        """A token code (|tau| <= V) and its square ``label_sq``."""
        return self.hidden(label, bound=self.V) + self.hidden(f"{label}_sq", bound=self.V ** 2)

    def edge_id(self, label: str) -> list[str]:
        """An edge id (a record position < T, 0 = none) and its square ``label_sq``."""
        return self.hidden(label, bound=self.T) + self.hidden(f"{label}_sq", bound=self.T ** 2)

    def match(self, name: str, components: list[Component], copy: dict, tie_break: str | None = None) -> Head:
        return match_head(name, components=components, copy=copy, fmt=self.fmt, n_positions=self.T,
                          tie_break=tie_break, fallback="bos")

    def vertex(self, query: str, key: str) -> Component:
        """Match the vertex code in direction ``query`` against ``key`` (both with a ``_sq`` twin)."""
        return Component({query: 1}, {key: 1}, {f"{key}_sq": 1}, self.V, self.V, query_sq={f"{query}_sq": 1})


FOUND = {"one": 1, "is_bos": -1}
"""Copied by a lookup head: 1 if it found a record, 0 if it fell back to [BOS]."""


def _embedded_space() -> ResidualSpace:
    s = base_space()
    for label, token in (("is_bos", BOS), ("is_eos", EOS), ("is_dash", DASH), ("is_tilde", TILDE)):
        s.embedded(label, K.F_IS_TOKEN, token)
    s.embedded("is_num", K.F_IS_NUM)
    s.embedded("is_count", K.F_IS_TOKEN, COUNT)
    return s


def _layer1_shifts(p: _Plan) -> list[str]:
    """Tokens 1, 2, 3, 5 back (``back1`` ...), whether the token is a record (after a
    separator) or the count (after [COUNT]), the prompt's [EOS] position
    ``prompt_end``, and the position types of MLP 1: ``at_tour_vertex`` (a vertex
    after the prompt), ``at_prompt_eos``, ``at_tour_eos`` (the [EOS] after the prompt's)."""
    T = p.T
    written = p.code("back1") + p.hidden("is_record", "is_count_value", bound=1)
    for k in (2, 3, 5):
        written += p.code(f"back{k}")
    written += p.hidden("after_eos", bound=1) + p.hidden("prompt_end", bound=T)
    p.hidden("vertex_count", bound=p.V)       # written in layer 2 (created here: the residual order is unchanged)
    written += p.hidden("at_tour_vertex", "at_prompt_eos", "at_tour_eos", bound=1)

    def back(k: int, extra: dict | None = None) -> Head:
        copy = {f"back{k}": {"tok": 1}, f"back{k}_sq": {"tok_sq": 1}, **(extra or {})}
        return shift_head(f"shift{k}", "pos", "pos_sq", "one", copy, p.fmt, n_positions=T, shift=k)

    heads = [back(1, {"is_record": {"is_dash": 1, "is_tilde": 1}, "is_count_value": {"is_count": 1}}),
             back(2), back(3), back(5),
             first_max_head("first-eos", key={"is_eos": 1}, max_key=1,
                            copy={"after_eos": {"is_eos": 1}, "prompt_end": {"pos": 1}}, fmt=p.fmt, n_positions=T)]
    # at_tour_eos = is_eos and t - prompt_end >= 1 (a step of height 1 gated by is_eos:
    # big-M B = T > |t - prompt_end|); at_prompt_eos = is_eos - at_tour_eos
    B = T
    require(B > T - 1, "layer 1: the [EOS] gate needs B > |t - prompt_end|")
    gate = {"pos": 1, "prompt_end": -1, "is_eos": B}
    mlp = [Neuron({"after_eos": 1, "is_num": 1}, -1, {"at_tour_vertex": 1}),
           Neuron(gate, -B, {"at_tour_eos": 1, "at_prompt_eos": -1}),
           Neuron(gate, -B - 1, {"at_tour_eos": -1, "at_prompt_eos": 1}),
           Neuron({"is_eos": 1}, 0, {"at_prompt_eos": 1})]
    p.b.attention_layer(heads, mlp)
    return written


def _layer2_pred_parent_count(p: _Plan) -> list[str]:
    """At record r (endpoints a = back2, b = tok): ``pred_u`` / ``pred_v`` = the id of
    the latest earlier record incident to a / b (delayed keys: the previous
    record's endpoints back5 / back3, id r - 3); at CoT vertex u: its ``parent``
    (first-occurrence match, value the token before) and ``e_prev`` (the id of
    edge {u, previous token}, 0 if u was just entered); ``vertex_count`` N."""
    T = p.T
    record = flag_component("is_record")
    previous_id = {"pos": 1, "one": -3, "is_bos": 3}                   # id of the record 3 back (0 at [BOS])
    previous_id_sq = {"pos_sq": 1, "pos": -6, "one": 9, "is_bos": -9}
    heads, written = [], []
    for end, query in (("u", "back2"), ("v", "tok")):
        for side, key in (("first", "back5"), ("second", "back3")):
            pred, pred_sq = p.edge_id(f"pred_{end}_via_{side}")
            heads.append(p.match(f"pred-{end}-{side}", [p.vertex(query, key), record],
                                 {pred: previous_id, pred_sq: previous_id_sq}, "last"))
            written += [pred, pred_sq]
    written += p.hidden("parent", bound=p.V)
    heads.append(p.match("parent", [p.vertex("tok", "tok"), flag_component("after_eos")], {"parent": {"back1": 1}},
                         "first"))
    # the edge {u, p} (u = tok, p = back1) at a record, u as first (u = back2, p = tok) or second endpoint
    for orient, pair in (("first", [p.vertex("tok", "back2"), p.vertex("back1", "tok")]),
                         ("second", [p.vertex("back1", "back2"), p.vertex("tok", "tok")])):
        edge, edge_sq = p.edge_id(f"edge_u_{orient}")
        heads.append(p.match(f"edge-u-{orient}", pair + [record], {edge: {"pos": 1}, edge_sq: {"pos_sq": 1}}))
        written += [edge, edge_sq]
    # N: the header's count (tau N + 1, minus 1 after [COUNT]) or max id + 1; 1 from [BOS]
    count_key = {"tok": 1, "is_bos": 1, "is_count_value": -1}
    heads.append(first_max_head("vertex-count", key=count_key, max_key=p.V, copy={"vertex_count": count_key},
                                fmt=p.fmt, n_positions=T))
    written += ["vertex_count"] + p.edge_id("pred_u") + p.edge_id("pred_v") + p.edge_id("e_prev")
    mlp = []
    for end in ("u", "v"):
        for sq in ("", "_sq"):
            mlp += max_neurons(f"pred_{end}_via_first{sq}", f"pred_{end}_via_second{sq}", f"pred_{end}{sq}")
    # e_prev = the edge {u, p} unless p is u's parent; masks need bounds >= the edge id (< T) and its square
    mlp += mask_unless_equal_neurons({"edge_u_first": 1, "edge_u_second": 1}, {"back1": 1}, {"parent": 1},
                                     "e_prev", T)
    mlp += mask_unless_equal_neurons({"edge_u_first_sq": 1, "edge_u_second_sq": 1}, {"back1": 1}, {"parent": 1},
                                     "e_prev_sq", T * T)
    p.b.attention_layer(heads, mlp)
    return written


def _lookup(p: _Plan, name: str, edge: Combo, edge_sq: Combo, outputs: dict[str, dict[str, Combo]]) -> list[Head]:
    """Two heads finding the record with key (u, edge): R1 (u is the edge's first
    endpoint back2, value tok) and R2 (u is the second endpoint tok, value back2);
    ``outputs[side]`` maps output directions to the copied combos."""
    heads = []
    for side, (u_key, pred) in (("first", ("back2", "pred_u")), ("second", ("tok", "pred_v"))):
        after = Component(dict(edge), {pred: 1}, {f"{pred}_sq": 1}, p.T, p.T, query_sq=dict(edge_sq))
        heads.append(p.match(f"{name}-{side}", [p.vertex("tok", u_key), after, flag_component("is_record")],
                             outputs[side]))
    return heads


def _layer3_next_neighbour(p: _Plan) -> list[str]:
    """(next, next_edge) = the record after e_prev at u, from either side; ``next_is_parent``."""
    outputs, written = {}, []
    for side, other in (("first", "tok"), ("second", "back2")):
        written += p.code(f"next_{side}") + p.edge_id(f"next_edge_{side}") + p.hidden(f"found_{side}", bound=1)
        outputs[side] = {f"next_{side}": {other: 1}, f"next_{side}_sq": {f"{other}_sq": 1},
                         f"next_edge_{side}": {"pos": 1}, f"next_edge_{side}_sq": {"pos_sq": 1},
                         f"found_{side}": FOUND}
    heads = _lookup(p, "next", {"e_prev": 1}, {"e_prev_sq": 1}, outputs)
    written += p.hidden("next_is_parent", bound=1)
    p.b.attention_layer(heads, equality_neurons({"next_first": 1, "next_second": 1}, {"parent": 1},
                                                "next_is_parent"))
    return written


def _layer4_skip_parent(p: _Plan) -> list[str]:
    """If the next neighbour is the parent, look once more past the parent edge (a
    simple graph has one): ``w`` (and ``has_w``) = the neighbour the tour goes to."""
    V = p.V
    outputs, written = {}, []
    for side, other in (("first", "tok"), ("second", "back2")):
        written += p.code(f"hop_{side}") + p.hidden(f"hop_found_{side}", bound=1)
        outputs[side] = {f"hop_{side}": {other: 1}, f"hop_{side}_sq": {f"{other}_sq": 1},
                         f"hop_found_{side}": FOUND}
    heads = _lookup(p, "hop", {"next_edge_first": 1, "next_edge_second": 1},
                    {"next_edge_first_sq": 1, "next_edge_second_sq": 1}, outputs)
    written += p.code("w") + p.hidden("has_w", bound=1)
    is_parent = {"next_is_parent": 1}
    mlp = (select_neurons(is_parent, {"hop_first": 1, "hop_second": 1}, {"next_first": 1, "next_second": 1}, "w", V)
           + select_neurons(is_parent, {"hop_first_sq": 1, "hop_second_sq": 1},
                            {"next_first_sq": 1, "next_second_sq": 1}, "w_sq", V * V)
           + select_neurons(is_parent, {"hop_found_first": 1, "hop_found_second": 1},
                            {"found_first": 1, "found_second": 1}, "has_w", 1))
    p.b.attention_layer(heads, mlp)
    return written


def _output_neurons(p: _Plan) -> list[Neuron]:
    """``out`` = tau of the next token: at a tour vertex w if has_w (-1 = [EOS] if w
    was visited: a cycle) else the parent (-1 = [EOS] at the root); 1 (vertex 0) at
    the prompt's [EOS]; at the tour's [EOS] -2 ([TRUE]) iff t - prompt_end = 2 N
    (a tour of 2N - 1 vertices), else -3 ([FALSE])."""
    # big-M gates: B > |w|, |parent|, w + 1 (all <= V + 1); Bl > |t - prompt_end - 2 N| <= T + 2 V
    B = p.V + 2
    Bl = p.T + 2 * p.V + 4
    require(B > p.V + 1 and Bl > p.T + 2 * p.V, "layer 5: big-M gates below the values they gate")
    tour_step = {"has_w": B, "at_tour_vertex": B}
    length = {"pos": 1, "prompt_end": -1, "vertex_count": -2, "at_tour_eos": Bl}
    return [
        Neuron({"w": 1, **tour_step}, -2 * B, {"out": 1}),
        Neuron({"w": -1, **tour_step}, -2 * B, {"out": -1}),
        Neuron({"parent": 1, "has_w": -B, "at_tour_vertex": B}, -B, {"out": 1}),
        Neuron({"parent": -1, "has_w": -B, "at_tour_vertex": B}, -B, {"out": -1}),
        Neuron({"w": 1, **tour_step, "visited": B}, 1 - 3 * B, {"out": -1}),     # w - (w + 1) = -1
        Neuron({"at_prompt_eos": 1}, 0, {"out": 1}),
        Neuron({"at_tour_eos": 1}, 0, {"out": -3}),
        Neuron(length, 1 - Bl, {"out": 1}),                                     # + [length == 0]
        Neuron(length, -Bl, {"out": -2}),
        Neuron(length, -1 - Bl, {"out": 1}),
    ]


def _layer5_visited_and_output(p: _Plan) -> list[str]:
    """``visited`` = w occurs in the tour so far; then the output code ``out``."""
    written = p.hidden("visited", bound=1) + p.hidden("out", bound=p.V + 3)   # out: a vertex's tau or -1, -2, -3
    head = p.match("visited", [Component({"w": 1}, {"tok": 1}, {"tok_sq": 1}, p.V, p.V, query_sq={"w_sq": 1}),
                               flag_component("after_eos")], {"visited": FOUND}, "first")
    p.b.attention_layer([head], _output_neurons(p))
    return written


def istree_transformer(n_vertices: int, max_edges: int | None = None, fmt: FixedFormat | None = None) -> Model:
    """The IsTree model for graphs on at most ``n_vertices`` vertices (ids
    0..n_vertices-1) with at most ``max_edges`` edges (default n_vertices), in
    ``fmt`` (default :func:`declared_format`). Margins are checked for
    T = :func:`n_positions` positions.

    One phase per layer, each creating (with bounds) and returning the
    directions it writes: :func:`_layer1_shifts` (tokens back, record flags,
    position types), :func:`_layer2_pred_parent_count` (pred pointers, parent,
    e_prev, N), :func:`_layer3_next_neighbour`, :func:`_layer4_skip_parent`,
    :func:`_layer5_visited_and_output`; the Builder is ``bounded``, so every
    head's score bound and gap is checked again from those bounds."""
    N = int(n_vertices)
    if N < 1:
        raise ValueError(f"n_vertices must be >= 1, got {n_vertices}")
    M = N if max_edges is None else int(max_edges)
    if M < 0:
        raise ValueError(f"max_edges must be >= 0, got {max_edges}")
    fmt = fmt or declared_format(N, M)
    T = n_positions(N, M)
    b = Builder(f"istree-transformer(N={N},M={M})", "transformer", Vocab(N, count=True), _embedded_space(),
                claim="T4.7-up", bounded=True)
    b.max_positions = T                       # header, prompt of <= M edges, tour, [EOS] (n_positions)
    plan = _Plan(b, fmt, T, tau_bound(N))
    for phase in (_layer1_shifts, _layer2_pred_parent_count, _layer3_next_neighbour, _layer4_skip_parent,
                  _layer5_visited_and_output):
        phase(plan)
    number_readout(b, "out")                  # the token whose tau is nearest `out`
    b.notes.update({"n_vertices": N, "max_edges": M, "n_positions": T})
    return b.build(fmt)


# ----------------------------------------------------------------------------
# running
def count_header(n_nodes: int) -> list[int]:
    """``[COUNT] N``: the header saying the vertex set is ``{0..N-1}``."""
    n_nodes = int(n_nodes)
    if n_nodes < 1:
        raise ValueError(f"the vertex count must be >= 1, got {n_nodes}")
    return [COUNT, number_token(n_nodes)]


def with_count(tokens: Sequence[int], n_nodes: int) -> list[int]:
    """``[BOS] u - v ... [EOS]`` -> ``[BOS] [COUNT] N u - v ... [EOS]`` (separators
    kept as written). ValueError if the prompt already has a header or mentions
    a vertex >= N."""
    toks = [int(t) for t in tokens]
    if not toks or toks[0] != BOS:
        raise ValueError("an IsTree prompt starts with [BOS]")
    if COUNT in toks:
        raise ValueError("the prompt already has a [COUNT] header")
    end = toks.index(EOS) if EOS in toks else len(toks)
    top = max((t - NUMBER_BASE for t in toks[1:end] if t >= NUMBER_BASE), default=0)
    if top >= int(n_nodes):
        raise ValueError(f"vertex {top} is not below the vertex count {n_nodes}")
    return [BOS] + count_header(n_nodes) + toks[1:]


def prompt_tokens(edges: Sequence[Sequence[int]], sep: int = DASH, n_nodes: int | None = None) -> list[int]:
    """``[BOS] u sep v ... [EOS]``, with the header ``[COUNT] N`` after [BOS] when
    ``n_nodes`` is given."""
    out = [BOS]
    for u, v in edges:
        out += [number_token(int(u)), int(sep), number_token(int(v))]
    out.append(EOS)
    return out if n_nodes is None else with_count(out, n_nodes)


def model_vertex_count(edges: Sequence[Sequence[int]]) -> int:
    """The vertex count the model answers for without a header: max id + 1 (1 without edges)."""
    return 1 + max((max(int(u), int(v)) for u, v in edges), default=0)


def needs_count(n_nodes: int, edges: Sequence[Sequence[int]]) -> bool:
    """Whether the text cannot show ``n_nodes`` (isolated vertices above the largest
    id): then the prompt must carry the ``[COUNT]`` header."""
    need = model_vertex_count(edges)
    if n_nodes < need:
        raise ValueError(f"n_nodes = {n_nodes} but the graph has vertex {need - 1}")
    return n_nodes > need


def check_fits(model: Model, edges: Sequence[Sequence[int]], n_nodes: int | None = None) -> None:
    """Raise ValueError if the graph (and its vertex count, if given) exceeds the
    bounds the model was built for, or mentions a vertex >= n_nodes."""
    N, M = model.spec.notes["n_vertices"], model.spec.notes["max_edges"]
    V = model_vertex_count(edges) if n_nodes is None else int(n_nodes)
    if n_nodes is not None:
        needs_count(V, edges)
    if V > N or len(edges) > M:
        raise ValueError(f"{model.name}: a graph with {len(edges)} edges on {V} vertices (max vertex id "
                         f"{model_vertex_count(edges) - 1}) exceeds the model's bounds (N={N}, M={M}); "
                         f"istree_transformer(n_vertices, max_edges) a larger one")


def run(model: Model, edges: Sequence[Sequence[int]], sep: int = DASH, n_nodes: int | None = None) -> Generation:
    """Greedy generation on the graph: ``cot`` = tour + [EOS], ``answer`` the
    model's label for the vertex set {0..n_nodes-1} (prompt with the ``[COUNT]``
    header), or {0..max id} when ``n_nodes`` is None (the paper's format)."""
    check_fits(model, edges, n_nodes)
    N = model.spec.notes["n_vertices"]
    return generate(model, prompt_tokens(edges, sep, n_nodes), answer_tokens=[TRUE, FALSE], max_cot=cot_bound(N))
