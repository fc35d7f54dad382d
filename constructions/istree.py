"""IsTree with a DFS-tour chain of thought: a constant-size Transformer (claim T4.7-up).

After ``[BOS] u - v u - v ... [EOS]`` (``-`` or ``~`` between endpoints, either
endpoint order) the model writes the DFS Euler tour from vertex 0 exactly as
:func:`checks.tasks.istree.dfs_tour` (neighbours in edge-list order, stop right
after the vertex whose scan first meets a visited non-parent neighbour), then
``[EOS]`` and ``[TRUE]``/``[FALSE]``. Five attention layers, 18 heads, width
and parameter count independent of n; driven by :func:`constructions.generate.generate`.

Example (edges 2-0 3-2 1-0)::

    >>> m = build(n_vertices=4)                       # doctest: +SKIP
    >>> run(m, [(2, 0), (3, 2), (1, 0)]).cot          # doctest: +SKIP
    [32, 34, 35, 34, 32, 33, 32, 1]                   # 0 2 3 2 0 1 0 [EOS], answer [TRUE]

Vertex count: the optional ``[COUNT]`` header
----------------------------------------------
The edges cannot show isolated vertices above the largest id. The input may
therefore start with a vertex-count header::

    [BOS] [COUNT] N u - v u - v ... [EOS]        (every vertex < N, N >= 1)

(``[COUNT]`` is token id 31, :data:`constructions.vocab.COUNT`; N a number
token). With the header the model decides for the vertex set ``{0..N-1}``;
without it (the paper's format, reproduced token for token) for ``{0..max id}``
(``{0}`` without edges). Either way the label is the model's own output token:
the max-vertex head reads N off the header (key tau - [previous token is
[COUNT]] = N at the count's position, tau = id + 1 <= N elsewhere), and a
tour that visits fewer than N vertices can never have 2N - 1 tokens, so an
isolated vertex above the largest id gives [FALSE] by the same comparison as
any other disconnected graph. :func:`prompt_tokens` writes the header when given
``n_nodes``; callers pass it when ``n_nodes > max id + 1`` (the text cannot
show it) and may pass it always. No label is computed in Python.

Why the header cannot disturb the edge machinery: at the first record r (the
second endpoint of the first edge) the delayed keys read positions r - 5 = 0
([BOS], tau 0) and r - 3 = 2 (the count, tau N + 1); no vertex of the promise
has tau N + 1, so no pred head matches there, and neither [COUNT] nor the count
is a record (the token before them is not a separator).

Positions and records
---------------------
Edge k (0-based) occupies positions 3k+1 (first endpoint a), 3k+2 (separator),
3k+3 (second endpoint b); its *record position* is r = 3k+3, which also serves
as the edge's id (ids are > 0, so 0 means "none"). A position is a record iff
the previous token is a separator (``is_rec`` = shift-1 copy of ``is_sep``).
At r the model computes, for each endpoint x of the edge, ``pred_x`` = the id of
the previous edge incident to x (0 if none): the *latest* earlier record with x
as an endpoint. Two records live at r:

* R1 (endpoint a): key (a, pred_a), value b;
* R2 (endpoint b): key (b, pred_b), value a.

"The edge after e incident to u" is then the unique record with key (u, e),
and "u's first edge" the one with key (u, 0): two lookup heads (R1, R2), one
of which finds it; both fall back to [BOS] (value 0 = none) otherwise.
pred is computed without seeing the current edge by *delayed keys*: at record
position r the keys are the endpoints of the previous record r-3 (shift heads
by 5 and 3), whose id is r - 3.

One CoT step (current vertex u = last token, p = previous token)
-----------------------------------------------------------------
* parent(u) = the token before u's first occurrence in the CoT (first-occurrence
  match over CoT positions, value = shift-1 copy); for the root the token
  before is the prompt's [EOS], tau = -1 = "no parent".
* entered = [p == parent(u)] (u was just entered; never true when we come back
  from a child). e_prev = 0 if entered, else the id of edge {u, p} (pair match
  over records, both orientations).
* (w1, e1) = lookup (u, e_prev); if w1 is the parent: w = lookup (u, e1) (a
  simple graph has one parent edge), else w = w1.
* no w: output parent(u) (tau -1 = [EOS] at the root: the tour ends).
  w visited (occurs in the CoT: first-occurrence match with a [BOS] fallback):
  output [EOS] (cycle). Otherwise output w.
* At the prompt's [EOS]: output 0. At the CoT's [EOS] (position t): the label.
  A tour visiting k vertices has 2k-1 tokens if it completed and fewer if it
  stopped at a cycle (checks.tasks.istree), so with N vertices the graph is
  a tree iff the tour length t - P - 1 equals 2N - 1 (P = the prompt's [EOS]).
  N comes from a max head (layer 2) over the key tau + [BOS] - [previous token
  is [COUNT]]: the header's N if there is one (every vertex id + 1 <= N), else
  max id + 1 (1 without edges, from [BOS]).

Matching heads, margins (derivation, asserted in :func:`multi_match_head`)
---------------------------------------------------------------------------
All queried quantities are integers. A head matching components q_c against
key components k_c scores

    lam * sum_c (2 q_c k_c - k_c^2)  +  [j = BOS] * (lam * sum_c q_c^2 - lam/2)  +/- mu * pos_j

i.e. lam * (sum q_c^2 - sum (q_c - k_c)^2) off [BOS]: all components equal ->
S = lam * sum q_c^2; any component off by >= 1 -> <= S - lam; [BOS] (whose keys
are all 0) -> S - lam/2, the fallback. With positions 0..T-1 and a tie-break
mu = sharpness(f) toward the latest (or first) match, lam = 2 (mu (T-1) + s),
s = sharpness(f) > (f+1) ln 2 gives every gap (match/match >= mu, match/BOS,
BOS/mismatch >= s) above the zero-weight gap: every weight is exactly 0 or 1.
Without tie-break (unique matches) lam = 2 s.

Resources (declared, checked by the registry): positions T = 3M + 2N + 4 for N
vertices and at most M edges (the header's two tokens included); f = 1 fraction
bit (every quantity is an integer and every weight is 0 or 1);
I(N, M) = 2 ceil(log2 T') + ceil(log2 V) + 6 integer bits with V = max(N + 1, 31)
(bounds |tau| of every token: the count N has tau N + 1, [COUNT] tau -31) and
T' = max(T, V) (tie-break head scores <= 17 T V^2, asserted per head; the MLP
masking e_prev^2 reaches ~ 3 T^2 V; derivation in :func:`declared_int_bits`):
p = I + 2 <= 63 holds up to N = 65536 vertices with M <= N + 2 edges (int64
storage).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Mapping, Sequence

import sympy as sp

from . import kernels as K
from .fixedpoint import FixedFormat, log2_ceil
from .gadgets import (
    base_space, first_max_head, flag_component, match_head, _add,
    Builder, Component, Neuron, equality_neurons, select_neurons, shift_head,
)
from .generate import Generation, generate
from .model import Model
from .vocab import BOS, COUNT, DASH, EOS, FALSE, NUMBER_BASE, TILDE, TRUE, Vocab, number_token, token_code

Combo = Mapping[str, object]

# ----------------------------------------------------------------------------
# declared resources
N_SYM, M_SYM = sp.symbols("N M", positive=True, integer=True)
T_EXPR = 3 * M_SYM + 2 * N_SYM + 4
V_EXPR = sp.Max(N_SYM + 1, -token_code(COUNT))
INT_EXPR = 2 * sp.ceiling(sp.log(sp.Max(T_EXPR, V_EXPR), 2)) + sp.ceiling(sp.log(V_EXPR, 2)) + 6
FRAC_EXPR = sp.Integer(1)
FRAC_BITS = 1
N_LAYERS = 5
N_HEADS = 18


HEADER = 2
"""Tokens of the optional vertex-count header ``[COUNT] N`` (after [BOS])."""


def n_positions(n_vertices: int, max_edges: int) -> int:
    """T = 3M + 2N + 4: [BOS], the optional header ``[COUNT] N``, 3 tokens per
    edge, [EOS], a tour of <= 2N - 1 tokens, the CoT's [EOS] (the label is
    predicted at position T - 1)."""
    return 3 * max_edges + 2 * n_vertices + 2 + HEADER


def tau_bound(n_vertices: int) -> int:
    """V = max(N + 1, 31) >= |tau| of every token the model reads: vertices
    (tau <= N), the count N (tau N + 1), specials (|tau| <= 9) and [COUNT] (-31)."""
    return max(n_vertices + 1, -token_code(COUNT))


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
    * the MLP masking e_prev^2 (bound B = T^2, |s1 - parent| <= 2V):
      <= T^2 + 2 V T^2 + T^2 <= 3 T'^2 V < 2^(2 + 2 ceil(log2 T') + ceil(log2 V));
    * shift heads 6 T^2 + 20 T, embeddings pos^2 <= T^2, readout <= 3 V^2.

    Every head re-checks its own bound at build time (MarginError).
    """
    V = tau_bound(n_vertices)
    T = max(n_positions(n_vertices, max_edges), V)
    return 2 * log2_ceil(T) + log2_ceil(V) + 6


def declared_format(n_vertices: int, max_edges: int | None = None) -> FixedFormat:
    m = n_vertices if max_edges is None else max_edges
    return FixedFormat(declared_int_bits(n_vertices, m), FRAC_BITS)


def cot_bound(n_vertices: int) -> int:
    """CoT tokens before the answer: a tour of <= 2N - 1 vertices and its [EOS]."""
    return 2 * n_vertices


# ----------------------------------------------------------------------------
# gadgets of this construction
def mask_unless_equal_neurons(x: Combo, a: Combo, b: Combo, out: str, bound: int) -> list[Neuron]:
    """out += x if a != b else 0, for integer a, b and 0 <= x <= bound (= B):
    with d = a - b, relu(x - B + B d) - relu(B d - B) + relu(x - B - B d) - relu(-B d - B).
    d = 0: 0; d >= 1: x + B(d-1) - B(d-1) (the second pair is 0); d <= -1 symmetric."""
    B = Fraction(bound)
    d = _add(a, {k: -Fraction(v) for k, v in b.items()})
    Bd = {k: B * v for k, v in d.items()}
    mBd = {k: -B * v for k, v in d.items()}
    return [Neuron(_add(x, Bd), -B, {out: 1}), Neuron(Bd, -B, {out: -1}),
            Neuron(_add(x, mBd), -B, {out: 1}), Neuron(mBd, -B, {out: -1})]


def max_neurons(x: str, y: str, out: str) -> list[Neuron]:
    """out += max(x, y) for x >= 0: relu(x) + relu(y - x)."""
    return [Neuron({x: 1}, 0, {out: 1}), Neuron({y: 1, x: -1}, 0, {out: 1})]


# ----------------------------------------------------------------------------
def build(n_vertices: int, max_edges: int | None = None, fmt: FixedFormat | None = None) -> Model:
    """The IsTree model for graphs on at most ``n_vertices`` vertices (ids
    0..n_vertices-1) with at most ``max_edges`` edges (default n_vertices), in
    ``fmt`` (default :func:`declared_format`). Margins are asserted for
    T = :func:`n_positions` positions."""
    N = int(n_vertices)
    if N < 1:
        raise ValueError(f"n_vertices must be >= 1, got {n_vertices}")
    M = N if max_edges is None else int(max_edges)
    if M < 0:
        raise ValueError(f"max_edges must be >= 0, got {max_edges}")
    fmt = fmt or declared_format(N, M)
    T = n_positions(N, M)
    VM = tau_bound(N)                 # |tau| of any token (the count N: N + 1; [COUNT]: -31)
    s = base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_eos", K.F_IS_TOKEN, EOS)
    s.embedded("is_dash", K.F_IS_TOKEN, DASH)
    s.embedded("is_tilde", K.F_IS_TOKEN, TILDE)
    s.embedded("is_num", K.F_IS_NUM)
    s.embedded("is_count", K.F_IS_TOKEN, COUNT)
    hidden = ["s1", "s1_sq", "is_rec", "cnt_num", "s2", "s2_sq", "s3", "s3_sq", "s5", "s5_sq", "after_eos", "P", "maxtau",
              "g", "first_eos", "second_eos",
              "pUA", "pUA_sq", "pUB", "pUB_sq", "pVA", "pVA_sq", "pVB", "pVB_sq", "parent",
              "eA", "eA_sq", "eB", "eB_sq",
              "pred_u", "pred_u_sq", "pred_v", "pred_v_sq", "e_prev", "e_prev_sq",
              "w1A", "w1A_sq", "e1A", "e1A_sq", "f1A", "w1B", "w1B_sq", "e1B", "e1B_sq", "f1B",
              "is_parent1",
              "w2A", "w2A_sq", "f2A", "w2B", "w2B_sq", "f2B",
              "w", "w_sq", "has_w", "visited", "out"]
    for lab in hidden:
        s.hidden(lab)
    b = Builder(f"istree-dfs(N={N},M={M})", "transformer", Vocab(N, count=True), s, claim="T4.7-up")
    b.max_positions = T                       # header, prompt of <= M edges, tour, [EOS] (n_positions)
    one = "one"

    # ---- layer 1: shifts (is_rec: after a separator; cnt_num: after [COUNT]), the prompt's [EOS]
    def sh(name, k, copy):
        return shift_head(name, "pos", "pos_sq", one, copy, fmt, n_positions=T, shift=k)

    l1 = [sh("shift1", 1, {"s1": {"tok": 1}, "s1_sq": {"tok_sq": 1}, "is_rec": {"is_dash": 1, "is_tilde": 1},
                           "cnt_num": {"is_count": 1}}),
          sh("shift2", 2, {"s2": {"tok": 1}, "s2_sq": {"tok_sq": 1}}),
          sh("shift3", 3, {"s3": {"tok": 1}, "s3_sq": {"tok_sq": 1}}),
          sh("shift5", 5, {"s5": {"tok": 1}, "s5_sq": {"tok_sq": 1}}),
          first_max_head("first-eos", key={"is_eos": 1}, max_key=1, copy={"after_eos": {"is_eos": 1}, "P": {"pos": 1}},
                         fmt=fmt, n_positions=T)]
    # MLP 1: position types. g = CoT vertex; second_eos = [EOS] after P (t - P >= 1, gated by
    # is_eos with B = T > |t - P|); first_eos = is_eos - second_eos.
    Bt = T
    mlp1 = [Neuron({"after_eos": 1, "is_num": 1}, -1, {"g": 1}),
            Neuron({"pos": 1, "P": -1, "is_eos": Bt}, -Bt, {"second_eos": 1, "first_eos": -1}),
            Neuron({"pos": 1, "P": -1, "is_eos": Bt}, -Bt - 1, {"second_eos": -1, "first_eos": 1}),
            Neuron({"is_eos": 1}, 0, {"first_eos": 1})]
    b.attention_layer(l1, mlp1)

    # ---- layer 2: previous edge of each endpoint (delayed keys), parent, edge {u, p}, the vertex count
    vert = lambda q, qsq, k, ksq: Component(q, k, ksq, VM, VM, query_sq=qsq)

    def multi(name, comps, copy, tie=None):
        return match_head(name, components=comps, copy=copy, fmt=fmt, n_positions=T, tie_break=tie, fallback="bos")
    rec = flag_component("is_rec")
    eid = {"pos": 1, one: -3, "is_bos": 3}                              # id of the record 3 back
    eid_sq = {"pos_sq": 1, "pos": -6, one: 9, "is_bos": -9}
    l2 = []
    for nm, (q, qsq) in (("U", ("s2", "s2_sq")), ("V", ("tok", "tok_sq"))):
        for side, (k, ksq) in (("A", ("s5", "s5_sq")), ("B", ("s3", "s3_sq"))):
            l2.append(multi(f"pred{nm}{side}", [vert({q: 1}, {qsq: 1}, {k: 1}, {ksq: 1}), rec],
                            {f"p{nm}{side}": eid, f"p{nm}{side}_sq": eid_sq}, "last"))
    l2.append(multi("parent", [vert({"tok": 1}, {"tok_sq": 1}, {"tok": 1}, {"tok_sq": 1}),
                                          flag_component("after_eos")],
                               {"parent": {"s1": 1}}, "first"))
    first = lambda q, qsq: vert({q: 1}, {qsq: 1}, {"s2": 1}, {"s2_sq": 1})
    second = lambda q, qsq: vert({q: 1}, {qsq: 1}, {"tok": 1}, {"tok_sq": 1})
    l2.append(multi("pairA", [first("tok", "tok_sq"), second("s1", "s1_sq"), rec],
                               {"eA": {"pos": 1}, "eA_sq": {"pos_sq": 1}}))
    l2.append(multi("pairB", [first("s1", "s1_sq"), second("tok", "tok_sq"), rec],
                               {"eB": {"pos": 1}, "eB_sq": {"pos_sq": 1}}))
    # N: the header's count (tau N + 1 - 1 after [COUNT]) or max id + 1; 1 from [BOS]
    nkey = {"tok": 1, "is_bos": 1, "cnt_num": -1}
    l2.append(first_max_head("vertex-count", key=nkey, max_key=VM, copy={"maxtau": nkey}, fmt=fmt, n_positions=T))
    mlp2 = (max_neurons("pUA", "pUB", "pred_u") + max_neurons("pUA_sq", "pUB_sq", "pred_u_sq")
            + max_neurons("pVA", "pVB", "pred_v") + max_neurons("pVA_sq", "pVB_sq", "pred_v_sq")
            + mask_unless_equal_neurons({"eA": 1, "eB": 1}, {"s1": 1}, {"parent": 1}, "e_prev", T)
            + mask_unless_equal_neurons({"eA_sq": 1, "eB_sq": 1}, {"s1": 1}, {"parent": 1}, "e_prev_sq", T * T))
    b.attention_layer(l2, mlp2)

    # ---- layer 3: (w1, e1) = lookup (u, e_prev); is w1 the parent?
    def lookup(name, e, e_sq, out):
        wA, wB = out
        cA = [vert({"tok": 1}, {"tok_sq": 1}, {"s2": 1}, {"s2_sq": 1}),
              Component(e, {"pred_u": 1}, {"pred_u_sq": 1}, T, T, query_sq=e_sq), rec]
        cB = [vert({"tok": 1}, {"tok_sq": 1}, {"tok": 1}, {"tok_sq": 1}),
              Component(e, {"pred_v": 1}, {"pred_v_sq": 1}, T, T, query_sq=e_sq), rec]
        return [multi(f"{name}A", cA, {k.replace("#", "A"): v for k, v in wA.items()}),
                multi(f"{name}B", cB, {k.replace("#", "B"): v for k, v in wB.items()})]

    found = {one: 1, "is_bos": -1}
    l3 = lookup("next", {"e_prev": 1}, {"e_prev_sq": 1},
                ({"w1#": {"tok": 1}, "w1#_sq": {"tok_sq": 1}, "e1#": {"pos": 1}, "e1#_sq": {"pos_sq": 1},
                  "f1#": found},
                 {"w1#": {"s2": 1}, "w1#_sq": {"s2_sq": 1}, "e1#": {"pos": 1}, "e1#_sq": {"pos_sq": 1},
                  "f1#": found}))
    b.attention_layer(l3, equality_neurons({"w1A": 1, "w1B": 1}, {"parent": 1}, "is_parent1"))

    # ---- layer 4: hop over the parent edge
    l4 = lookup("hop", {"e1A": 1, "e1B": 1}, {"e1A_sq": 1, "e1B_sq": 1},
                ({"w2#": {"tok": 1}, "w2#_sq": {"tok_sq": 1}, "f2#": found},
                 {"w2#": {"s2": 1}, "w2#_sq": {"s2_sq": 1}, "f2#": found}))
    mlp4 = (select_neurons({"is_parent1": 1}, {"w2A": 1, "w2B": 1}, {"w1A": 1, "w1B": 1}, "w", VM)
            + select_neurons({"is_parent1": 1}, {"w2A_sq": 1, "w2B_sq": 1}, {"w1A_sq": 1, "w1B_sq": 1}, "w_sq",
                             VM * VM)
            + select_neurons({"is_parent1": 1}, {"f2A": 1, "f2B": 1}, {"f1A": 1, "f1B": 1}, "has_w", 1))
    b.attention_layer(l4, mlp4)

    # ---- layer 5: visited?, then the output value (tau of the next token)
    l5 = [multi("visited", [Component({"w": 1}, {"tok": 1}, {"tok_sq": 1}, VM, VM, query_sq={"w_sq": 1}),
                                       flag_component("after_eos")],
                           {"visited": found}, "first")]
    B = VM + 2       # > |w|, |parent|, w + 1
    Bl = T + 2 * VM + 4   # > |d| for d = pos - P - 2 maxtau
    d = {"pos": 1, "P": -1, "maxtau": -2}
    mlp5 = [
        # CoT vertex (g = 1): w if has_w else parent
        Neuron({"w": 1, "has_w": B, "g": B}, -2 * B, {"out": 1}),
        Neuron({"w": -1, "has_w": B, "g": B}, -2 * B, {"out": -1}),
        Neuron({"parent": 1, "has_w": -B, "g": B}, -B, {"out": 1}),
        Neuron({"parent": -1, "has_w": -B, "g": B}, -B, {"out": -1}),
        # ... and a visited w means a cycle: w - (w + 1) = -1 = tau([EOS])
        Neuron({"w": 1, "has_w": B, "visited": B, "g": B}, 1 - 3 * B, {"out": -1}),
        # the prompt's [EOS]: vertex 0 (tau 1)
        Neuron({"first_eos": 1}, 0, {"out": 1}),
        # the CoT's [EOS]: tau -3 ([FALSE]) + [t - P - 2 maxtau == 0] (-> -2, [TRUE])
        Neuron({"second_eos": 1}, 0, {"out": -3}),
        Neuron(_add(d, {"second_eos": Bl}), 1 - Bl, {"out": 1}),
        Neuron(_add(d, {"second_eos": Bl}), -Bl, {"out": -2}),
        Neuron(_add(d, {"second_eos": Bl}), -1 - Bl, {"out": 1}),
    ]
    b.attention_layer(l5, mlp5)
    # readout: the token whose tau is nearest `out`: logit(k) = 2 tau_k out - tau_k^2
    b.readout([("out", K.F_TOK, 0, 2), (one, K.F_TOK_SQ, 0, -1)])
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
                         f"build(n_vertices, max_edges) a larger one")


def run(model: Model, edges: Sequence[Sequence[int]], sep: int = DASH, n_nodes: int | None = None) -> Generation:
    """Greedy generation on the graph: ``cot`` = tour + [EOS], ``answer`` the
    model's label for the vertex set {0..n_nodes-1} (prompt with the ``[COUNT]``
    header), or {0..max id} when ``n_nodes`` is None (the paper's format)."""
    check_fits(model, edges, n_nodes)
    N = model.spec.notes["n_vertices"]
    return generate(model, prompt_tokens(edges, sep, n_nodes), answer_tokens=[TRUE, FALSE], max_cot=cot_bound(N))
