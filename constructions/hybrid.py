"""Hybrid models (claim T5.6): linear-RNN layers, then exactly ONE attention layer.

theory.md §2: a hybrid sees tokens only (no position feature in its embedding);
whatever its single attention layer needs about positions, the RNN computes by
linear recurrences. The shared front end is :func:`clock`, one RNN layer with

* ``cnt = t + 1`` and ``cnt_sq = (t + 1)^2``:  cnt_t = cnt_{t-1} + 1,
  cnt_sq_t = cnt_sq_{t-1} + 2 cnt_{t-1} + 1 (so [BOS] at t = 0 has cnt = 1);
* delay lines ``prev{k} = tau(token_{t-k})`` (and ``prev{k}_sq = tau^2``), a chain
  h_0 = tau_t, h_k = h_{k-1} of the previous step (0 = tau([BOS]) before the start);
* latches ``L_t = L_{t-1} + [token_t = marker]`` (0 before the marker, 1 from it on).

The attention layer then does the retrieval with no CoT:

* Index ``[BOS] x_1..x_n [QUERY] i``: the query tau(i) = i + 1 matches the key
  ``cnt`` = j + 1 at position j = i (:func:`hybrid_index`);
* AR ``... [QUERY] q``: the key is the previous token ``prev1``, the first match
  (position tie-break by ``cnt``) sits right after q's first occurrence; the head
  copies that position's token (:func:`hybrid_ar`);
* c-gram: the same with the c-1 previous tokens as a tuple key (:func:`hybrid_cgram`,
  gadget :func:`tuple_match_head`);
* Counting ``... [QUERY] q t``: the BOS counting head with the query q = ``prev1``
  at the last position, every position from [QUERY] on pushed out by the latch
  ``after_query``; the comparison MLP against 1/(t + 3/2) (:func:`hybrid_counting`).

Each builder returns a :class:`~constructions.model.Model` in its declared format
(``DECLARED[task]``, a :class:`~constructions.demos.Declared`: I(n), f(n) as
Python functions and as sympy expressions). The architecture (widths, layers,
parameter count) is the same for every n; only values that fit the p(n)-bit
format (the sharpness lambda(f), the vocabulary's numbers) depend on n.

Example::

    >>> m = hybrid_index(8)                              # doctest: +SKIP
    >>> m.predict([0, 33, 32, 33, 33, 32, 32, 33, 32, 9, 34])   # x_2 = 0
    32
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy as sp

from . import kernels as K
from .demos import Declared
from .fixedpoint import FixedFormat, log2_ceil
from .gadgets import (
    number_readout,
    LN2_UPPER, Builder, Combo, Head, MarginError, ResidualSpace, _need_bits, bits_for, count_compare_neurons,
    count_head, match_head, sharpness, zero_gap,
)
from .model import Model
from .vocab import BOS, NUMBER_BASE, QUERY, Vocab, token_code

N = sp.Symbol("n", positive=True, integer=True)

CODE_SLACK = NUMBER_BASE
"""Every |tau| and every ``cnt`` a retrieval hybrid sees is at most M(n) = n + 32:
numbers up to max(n, alphabet) have tau <= n + 1 when the alphabet is <= n + 31,
specials have |tau| <= 31, and the prompt has at most n + c + 1 <= n + 32 positions
(c <= 28). The builders assert these premises."""


def code_bound(n: int) -> int:
    return n + CODE_SLACK


M_EXPR = N + CODE_SLACK


def sharpness_expr(f_expr: sp.Expr) -> sp.Expr:
    """sympy twin of :func:`~constructions.gadgets.sharpness` (unit gap 1)."""
    return sp.floor((f_expr + 1) * sp.Rational(LN2_UPPER.numerator, LN2_UPPER.denominator)) + 1


def _bits_expr(bound: sp.Expr) -> sp.Expr:
    """sympy twin of ``bits_for(bound) + 1`` for an integer bound >= 1."""
    return sp.floor(sp.log(bound, 2)) + 2


# ----------------------------------------------------------------------------
# the RNN front end
@dataclass
class Recurrence:
    """Named pieces of one RNN layer: h_t = A h_{t-1} + B x_t, x += C h_t."""

    state: list[str] = field(default_factory=list)
    A: dict = field(default_factory=dict)
    B: dict = field(default_factory=dict)
    C: dict = field(default_factory=dict)

    def add_state(self, name: str) -> str:
        if name in self.state:
            raise ValueError(f"state {name!r} exists already")
        self.state.append(name)
        return name


def clock(space: ResidualSpace, rec: Recurrence, delays: int = 0, delays_sq: int = 0,
          latches: dict[str, str] | None = None, one: str = "one", tok: str = "tok", tok_sq: str = "tok_sq") -> None:
    """Add the counters, delay lines and latches described in the module docstring
    to ``rec``; their readouts go to new directions ``cnt``, ``cnt_sq``, ``prev{k}``,
    ``prev{k}_sq`` (k = 1..delays) and one direction per latch (``latches`` maps
    the latch's direction to the embedded flag it integrates).

    Values: cnt <= L, cnt_sq <= L^2 for L positions; prev{k} is a token code."""
    c, c2 = rec.add_state("s_cnt"), rec.add_state("s_cnt_sq")
    rec.A[(c, c)] = 1
    rec.B[(c, one)] = 1
    rec.A[(c2, c2)] = 1
    rec.A[(c2, c)] = 2          # (t+1)^2 = t^2 + 2 t + 1, with cnt_{t-1} = t
    rec.B[(c2, one)] = 1
    rec.C[(space.hidden("cnt"), c)] = 1
    rec.C[(space.hidden("cnt_sq"), c2)] = 1
    for src, depth, suffix in ((tok, delays, ""), (tok_sq, delays_sq, "_sq")):
        if depth <= 0:
            continue
        chain = [rec.add_state(f"s_{src}_0")]
        rec.B[(chain[0], src)] = 1
        for k in range(1, depth + 1):
            chain.append(rec.add_state(f"s_{src}_{k}"))
            rec.A[(chain[k], chain[k - 1])] = 1
            rec.C[(space.hidden(f"prev{k}{suffix}"), chain[k])] = 1
    for direction, flag in (latches or {}).items():
        s = rec.add_state(f"s_{direction}")
        rec.A[(s, s)] = 1
        rec.B[(s, flag)] = 1
        rec.C[(space.hidden(direction), s)] = 1


def _base_space() -> ResidualSpace:
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    return s


def _premise(n: int, alphabet: int, extra_positions: int) -> Vocab:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if alphabet < 1 or alphabet > n + CODE_SLACK - 1:
        raise ValueError(f"alphabet {alphabet} outside 1..n+{CODE_SLACK - 1} (the declared code bound)")
    if n + extra_positions + 1 > code_bound(n):
        raise ValueError(f"{extra_positions} positions after the data exceed the declared code bound")
    return Vocab(max(n, alphabet))


# ----------------------------------------------------------------------------
# a tuple match head with first / last occurrence and an optional default position
def tuple_match_head(name: str, pairs: list[tuple[Combo, Combo, Combo]], one: str, copy: dict[str, Combo],
                     fmt: FixedFormat, max_code: int, order: tuple[str, str, int] | None = None,
                     default: tuple[Combo, list[Combo]] | None = None) -> Head:
    """Attend exactly to the positions j whose integer keys (k_1..k_m)_j all equal
    the query's (q_1..q_m)_i.

    ``pairs`` = [(query_k, key_k, key_k^2)]; score = sum_k lambda (2 q_k k_kj - k_kj^2)
    = lambda (sum_k q_k^2 - sum_k (q_k - k_kj)^2): a matching j scores
    lambda Q_i (Q_i = sum q_k^2), any other j at least lambda lower.

    ``order = ("first" | "last", pos_direction, P)`` adds -/+ mu * pos_j (1 <= pos <= P),
    mu = sharpness(f), and lambda = mu P + sharpness(f): the earliest / latest match
    then beats every other match by >= mu and every non-match by > zero_gap(f).

    ``default = (flag_combo, [query_k^2 combos])`` adds lambda * Q_i * flag_j: a
    position whose keys are all 0 and whose flag is 1 scores like a match (the
    query's own squares come from the query side). With order "last" and the flag
    on the position with pos = 1, it wins exactly when nothing matches.

    Integer bits: |score| <= lambda m (3 K^2 [+ K^2 with default]) + mu P with
    K = ``max_code`` bounding every |q_k|, |k_k|; asserted against ``fmt``.
    """
    f = fmt.frac_bits
    m = len(pairs)
    if m < 1:
        raise ValueError(f"{name}: need at least one key component")
    s = sharpness(f)
    mu, P = 0, 0
    if order is not None:
        kind, pos_dir, P = order
        if kind not in ("first", "last"):
            raise ValueError(f"{name}: order must be 'first' or 'last', got {kind!r}")
        mu = s
    lam = mu * P + s
    margin = {"lambda": lam, "mu": mu, "gap_non_match": lam - mu * P, "zero_gap": float(zero_gap(f))}
    if not lam - mu * P > zero_gap(f):
        raise MarginError(f"{name}: non-matching keys would keep weight")
    if order is not None and not mu > zero_gap(f):
        raise MarginError(f"{name}: a second match would keep weight")
    Kc = max_code
    max_score = lam * m * (3 * Kc * Kc + (Kc * Kc if default is not None else 0)) + mu * P
    need = bits_for(max_score) + 1
    _need_bits(fmt, need, name, f"scores up to {max_score}")
    margin["score_int_bits"] = need
    score: list[tuple[Combo, Combo]] = []
    for q, k, k_sq in pairs:
        score.append(({d: 2 * lam * Fraction(c) for d, c in q.items()}, dict(k)))
        score.append(({one: -lam}, dict(k_sq)))
    if order is not None:
        score.append(({one: mu if order[0] == "last" else -mu}, {order[1]: 1}))
    if default is not None:
        flag, q_sqs = default
        for q_sq in q_sqs:
            score.append(({d: lam * Fraction(c) for d, c in q_sq.items()}, dict(flag)))
    return Head(name, score, copy, margin)


# ----------------------------------------------------------------------------
# declared formats
def _f_retrieval(n: int) -> int:
    """Match heads need no fraction at all (integer keys, weights exactly 0/1);
    f only sets lambda. f(n) = ceil(log2(n + 1)) + 1 keeps p = O(log n) small."""
    return log2_ceil(n + 1) + 1


F_RETRIEVAL = sp.ceiling(sp.log(N + 1, 2)) + 1


def _index_bound(n: int) -> int:
    M = code_bound(n)
    return sharpness(_f_retrieval(n)) * 3 * M * M


def _first_bound(n: int, width: int) -> int:
    M = code_bound(n)
    s = sharpness(_f_retrieval(n))
    return s * (M + 1) * width * 3 * M * M + s * M


def _f_count(n: int) -> int:
    """The comparison 1/(c+1) vs 1/(t+3/2) needs 2^-f below 1/(2 (n+1)(n+3/2))."""
    return 2 * log2_ceil(n + 2) + 3


F_COUNT = 2 * sp.ceiling(sp.log(N + 2, 2)) + 3


def _count_bound(n: int) -> int:
    M = code_bound(n)
    return sharpness(_f_count(n)) * (4 * M * M + 2)


S_RET = sharpness_expr(F_RETRIEVAL)
S_COUNT = sharpness_expr(F_COUNT)

DECLARED: dict[str, Declared] = {
    "index": Declared(lambda n: bits_for(_index_bound(n)) + 1, _f_retrieval,
                      _bits_expr(S_RET * 3 * M_EXPR ** 2), F_RETRIEVAL),
    "ar": Declared(lambda n: bits_for(_first_bound(n, 1)) + 1, _f_retrieval,
                   _bits_expr(S_RET * (M_EXPR + 1) * 3 * M_EXPR ** 2 + S_RET * M_EXPR), F_RETRIEVAL),
    "counting": Declared(lambda n: bits_for(_count_bound(n)) + 1, _f_count,
                         _bits_expr(S_COUNT * (4 * M_EXPR ** 2 + 2)), F_COUNT),
}


def cgram_declared(c: int) -> Declared:
    """c-gram with the (c-1)-token key; c is part of the architecture."""
    w = c - 1
    return Declared(lambda n: bits_for(_first_bound(n, w)) + 1, _f_retrieval,
                    _bits_expr(S_RET * (M_EXPR + 1) * w * 3 * M_EXPR ** 2 + S_RET * M_EXPR), F_RETRIEVAL)


# ----------------------------------------------------------------------------
# the four retrieval hybrids (no CoT)
def hybrid_index(n: int, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] i`` -> x_i. RNN: cnt, cnt_sq. Attention: match
    tau(i) = i + 1 against cnt_j = j + 1 (gap lambda between keys; T5.6)."""
    fmt = fmt or DECLARED["index"].format(n)
    vocab = _premise(n, alphabet, 2)
    s = _base_space()
    rec = Recurrence()
    clock(s, rec)
    s.hidden("answer")
    b = Builder(f"hybrid-index(n={n})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + 3                   # [BOS] x_1..x_n [QUERY] i
    b.rnn_layer(rec.state, rec.A, rec.B, rec.C, name="clock")
    M = code_bound(n)
    b.attention_layer([match_head("index", query={"tok": 1}, key={"cnt": 1}, key_sq={"cnt_sq": 1}, one="one",
                                  copy={"answer": {"tok": 1}}, fmt=fmt, max_key=M, max_query=M)])
    number_readout(b, "answer")
    return b.build(fmt)


def hybrid_ar(n: int, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q`` -> x_{j+1}, j the first occurrence of q.

    RNN: cnt and the delay prev1 = tau(x_{t-1}) (and its square). Attention: key
    prev1 against the query tau(q), first occurrence by cnt: the first position
    whose previous token is q holds the answer; [BOS] has prev1 = 0 (never a
    number's code), and a later match (e.g. at [QUERY] after x_n = q) loses by mu."""
    fmt = fmt or DECLARED["ar"].format(n)
    vocab = _premise(n, alphabet, 2)
    s = _base_space()
    rec = Recurrence()
    clock(s, rec, delays=1, delays_sq=1)
    s.hidden("answer")
    b = Builder(f"hybrid-ar(n={n})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + 3                   # [BOS] x_1..x_n [QUERY] q
    b.rnn_layer(rec.state, rec.A, rec.B, rec.C, name="clock+delay")
    M = code_bound(n)
    b.attention_layer([match_head("ar", query={"tok": 1}, key={"prev1": 1}, key_sq={"prev1_sq": 1}, one="one",
                                  copy={"answer": {"tok": 1}}, fmt=fmt, max_key=M, max_query=M,
                                  first_occurrence=("cnt", M))])
    number_readout(b, "answer")
    return b.build(fmt)


def hybrid_cgram(n: int, c: int = 3, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q_1..q_{c-1}`` -> the token after the first occurrence.

    RNN: cnt and delays prev1..prev{c-1}. At the last position the query gram is
    (prev{c-2}, .., prev1, tok) = (q_1, .., q_{c-1}); at a key position j the window
    (prev{c-1}, .., prev1) = (x_{j-c+1}, .., x_{j-1}). The tuple head matches all
    c-1 components (gap lambda per differing component), first occurrence by cnt;
    every window reaching [QUERY] (code -9) or before [BOS] (code 0) never matches
    a gram of numbers."""
    if c < 2:
        raise ValueError(f"c must be >= 2, got {c}")
    w = c - 1
    decl = cgram_declared(c)
    fmt = fmt or decl.format(n)
    vocab = _premise(n, alphabet, c)
    s = _base_space()
    rec = Recurrence()
    clock(s, rec, delays=w, delays_sq=w)
    s.hidden("answer")
    b = Builder(f"hybrid-{c}gram(n={n})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + c + 1               # [BOS] x_1..x_n [QUERY] q_1..q_{c-1}
    b.rnn_layer(rec.state, rec.A, rec.B, rec.C, name="clock+delays")
    M = code_bound(n)
    pairs = []
    for k in range(1, w + 1):      # query component q_{c-k} = token delayed by k-1; key = delayed by k
        q = {"tok": 1} if k == 1 else {f"prev{k - 1}": 1}
        pairs.append((q, {f"prev{k}": 1}, {f"prev{k}_sq": 1}))
    b.attention_layer([tuple_match_head(f"{c}gram", pairs, "one", {"answer": {"tok": 1}}, fmt, max_code=M,
                                        order=("first", "cnt", M))])
    number_readout(b, "answer")
    return b.build(fmt)


def hybrid_counting(n: int, alphabet: int = 3, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q t`` -> number 1 if q occurs more than t times, else 0.

    RNN: cnt, prev1 (= q at the last position) and its square, and the latch
    after_query (1 from [QUERY] on). Attention: the BOS counting head with query
    prev1 over keys tok, the latch pushing [QUERY], q and t 2 lambda down, so the
    weight is exactly 1/(c+1) on [BOS] and on each of the c matches; its MLP
    compares round(1/(c+1)) with the embedded 1/(t + 3/2)."""
    fmt = fmt or DECLARED["counting"].format(n)
    vocab = _premise(n, alphabet, 3)
    s = _base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.embedded("thr", K.F_TOK_INV, Fraction(1, 2))     # 1/(tau + 1/2) = 1/(t + 3/2) for the number t
    rec = Recurrence()
    clock(s, rec, delays=1, delays_sq=1, latches={"after_query": "is_query"})
    s.hidden("frac")
    s.hidden("gt")
    b = Builder(f"hybrid-counting(n={n})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + 4                   # [BOS] x_1..x_n [QUERY] q t
    b.rnn_layer(rec.state, rec.A, rec.B, rec.C, name="clock+delay+latch")
    M = code_bound(n)
    head = count_head("count", query={"prev1": 1}, query_sq={"prev1_sq": 1}, key={"tok": 1}, key_sq={"tok_sq": 1},
                      one="one", not_bos={"one": 1, "is_bos": -1}, bos_flag="is_bos", out="frac",
                      fmt=fmt, max_key=M, n=n)
    head.score.append(({"one": -2 * head.margin["lambda"]}, {"after_query": 1}))
    _need_bits(fmt, bits_for(_count_bound(n)) + 1, "count", "scores with the after-query term")
    b.attention_layer([head], mlp=count_compare_neurons("frac", "thr", "gt", n, fmt))
    b.readout([("gt", K.F_TOK, 0, 2), ("one", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    return b.build(fmt)


RETRIEVAL_BUILDERS = {"index": hybrid_index, "ar": hybrid_ar, "cgram": hybrid_cgram, "counting": hybrid_counting}


# ----------------------------------------------------------------------------
# IsTree with CoT O(N log N): union-find by size, one attention layer (T5.6)
#
# CoT per input edge (u_i, v_i), i = 0, 1, ...  (codes: vertex x -> tau = x + 1):
#
#   u_i x_1 .. x_a -  s_u        find(u_i): the parent chain to the root r_u = x_a
#                                (or u_i itself), the marker '-', then |tree of r_u|
#   v_i y_1 .. y_b -  s_v        the same for v_i (r_v, s_v)
#   r_u s_u                      the u-side again, so that the RNN sees r_u, s_u, s_v,
#                                r_v at fixed offsets; after r_u: [FALSE] if r_u = r_v
#   ~ c p [QUERY] p s            union by size: the smaller root c (c = r_u iff
#                                s_u <= s_v) gets the parent record "~ c p", the
#                                larger root p the size record "[QUERY] p s", s = s_u + s_v
#
# and, once the input is used up (the edge to fetch is [EOS]): [TRUE] iff exactly
# N - 1 edges were joined, else [FALSE] (N - 1 joins without a cycle = a spanning
# tree; a cycle, i.e. r_u = r_v, answers [FALSE] at once, and any graph with more
# than N - 1 edges has one among its first N edges).
#
# Heads of the single attention layer (all four at every position; the final MLP
# uses the one the position's role needs):
#   fetch   query 3 i + 2 + 2 Mk (i = edges joined, Mk = markers in this edge) vs
#           key cnt = position + 1: the input token u_i (position 3i+1) or v_i (3i+3);
#   parent  query tau(x) vs key tau(c) at the p of every record "~ c p"; last match;
#           default [BOS] (found = 0: x is a root, emit '-');
#   size    query tau(root) (the token before '-') vs key tau(p) at the s of every
#           record "[QUERY] p s"; last match (sizes grow); default [BOS] (size 1);
#   last_su the latest s_u position (flag, position tie-break): its token s_u and the
#           token two before it, r_u.
# With union by size every tree of size k has depth <= log2 k, so a find writes at
# most floor(log2 N) + 2 tokens: the CoT is at most N (2 floor(log2 N) + 16) + 1.
# Measured (checks/checks_hybrid.py, hybrid_istree_fit_check: binomial merges of the
# deepest vertices, a deep binomial core with pendant vertices, the same closed by a
# cycle, a random tree): the longest CoT per N fits 0.79 N log2 N + 12.6 N by least
# squares over N = 16..256 (0.77 N log2 N + 12.8 N over N = 16..320); the declared
# format fits int64 storage up to N = 323 (m_max = N).

def istree_cot_bound(N: int) -> int:
    return N * (2 * (N.bit_length() - 1) + 16) + 1


def _f_istree(P: int) -> int:
    return log2_ceil(P + 1) + 1


def istree_positions(N: int, m_max: int) -> int:
    return 3 * m_max + 3 + istree_cot_bound(N)


def _istree_code(N: int, m_max: int) -> int:
    return istree_positions(N, m_max) + CODE_SLACK


def _istree_bound(N: int, m_max: int) -> int:
    P = istree_positions(N, m_max)
    K = _istree_code(N, m_max)
    s = sharpness(_f_istree(P))
    return 4 * s * (P + 2) * K * K + s * (P + 1)


def istree_declared(m_of_n=lambda N: N) -> Declared:
    """I(N), f(N) with at most m_of_n(N) input edges (default N)."""
    M_e = N                                   # sympy: m_max = N
    CB = N * (2 * sp.floor(sp.log(N, 2)) + 16) + 1
    P = 3 * M_e + 3 + CB
    K = P + CODE_SLACK
    f = sp.ceiling(sp.log(P + 1, 2)) + 1
    s = sharpness_expr(f)
    return Declared(lambda n: bits_for(_istree_bound(n, m_of_n(n))) + 1,
                    lambda n: _f_istree(istree_positions(n, m_of_n(n))),
                    _bits_expr(4 * s * (P + 2) * K ** 2 + s * (P + 1)), f)


ISTREE = istree_declared()


def hybrid_istree(N: int, m_max: int | None = None, fmt: FixedFormat | None = None) -> Model:
    """The union-find hybrid for graphs on N vertices with at most m_max edges
    (default N); see the comment block above for the CoT and the heads."""
    from .gadgets import Neuron, select_neurons, equality_neurons
    from .vocab import DASH, EOS, FALSE, QUERY, TILDE, TRUE
    m_max = N if m_max is None else m_max
    if N < 1:
        raise ValueError(f"N must be >= 1, got {N}")
    fmt = fmt or (ISTREE.format(N) if m_max == N else istree_declared(lambda n: m_max).format(N))
    P = istree_positions(N, m_max)
    Kc = _istree_code(N, m_max)
    vocab = Vocab(max(N, 1))
    s = _base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_eos", K.F_IS_TOKEN, EOS)
    s.embedded("is_dash", K.F_IS_TOKEN, DASH)
    s.embedded("is_tilde", K.F_IS_TOKEN, TILDE)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    # ---- layer 1: clock, token delays, flag delays, the EOS latch
    r1 = Recurrence()
    clock(s, r1, delays=4, delays_sq=1, latches={"e": "is_eos"})
    for flag, depth in (("is_tilde", 2), ("is_query", 2), ("is_eos", 1)):
        chain = [r1.add_state(f"s_{flag}_0")]
        r1.B[(chain[0], flag)] = 1
        for k in range(1, depth + 1):
            chain.append(r1.add_state(f"s_{flag}_{k}"))
            r1.A[(chain[k], chain[k - 1])] = 1
            r1.C[(s.hidden(f"{flag}@{k}"), chain[k])] = 1
    hid = ["mark", "rec_p", "siz_s", "keyB", "keyB_sq", "keyC", "keyC_sq", "eq_r", "cmp",
           "i", "Mk", "mark@1", "su_pos", "sv_pos", "okc", "c_val", "p_val",
           "inchain", "c@1", "p@2", "p@4", "s@5"] + [f"sv@{k}" for k in range(1, 8)] + \
          ["fa", "par", "found", "sz", "su", "ru", "v"]
    for lab in hid:
        s.hidden(lab)
    b = Builder(f"hybrid-istree(N={N})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = P                       # prompt of <= m_max edges and the CoT (istree_positions)
    Bc, Bc2 = Kc, Kc * Kc
    # e2 = [EOS at least two tokens back] = e - [EOS now] - [EOS one back]: a record's
    # marker two back is then a CoT token (the input may use '~' between endpoints)
    e2 = {"e": 1, "is_eos": -1, "is_eos@1": -1}

    def with_e2(combo, scale):
        out = dict(combo)
        for d, c in e2.items():
            out[d] = out.get(d, 0) + scale * c
        return out

    mlp1 = [
        Neuron({"is_dash": 1, "e": 1}, -1, {"mark": 1}),                  # '-' inside the CoT
        Neuron(with_e2({"is_tilde@2": 1}, 1), -1, {"rec_p": 1}),          # p of "~ c p"
        Neuron(with_e2({"is_query@2": 1}, 1), -1, {"siz_s": 1}),          # s of "[QUERY] p s"
        # parent key: tau(c) = prev1 (>= 1) at record p's; size key: tau(p) = prev1 at size s's
        Neuron(with_e2({"prev1": 1, "is_tilde@2": Bc}, Bc), -2 * Bc, {"keyB": 1}),
        Neuron(with_e2({"prev1_sq": 1, "is_tilde@2": Bc2}, Bc2), -2 * Bc2, {"keyB_sq": 1}),
        Neuron(with_e2({"prev1": 1, "is_query@2": Bc}, Bc), -2 * Bc, {"keyC": 1}),
        Neuron(with_e2({"prev1_sq": 1, "is_query@2": Bc2}, Bc2), -2 * Bc2, {"keyC_sq": 1}),
        # cmp = [s_u <= s_v] at the re-emitted s_u (tok = s_u, prev2 = s_v): relu(d+1) - relu(d)
        Neuron({"prev2": 1, "tok": -1}, 1, {"cmp": 1}),
        Neuron({"prev2": 1, "tok": -1}, 0, {"cmp": -1}),
    ]
    mlp1 += equality_neurons({"tok": 1}, {"prev3": 1}, "eq_r")             # at r_u': r_u == r_v ?
    b.rnn_layer(r1.state, r1.A, r1.B, r1.C, mlp1, name="clock+delays")
    # ---- layer 2: counters i (joins), Mk (markers in this edge), mark delayed
    r2 = Recurrence()
    for name, inc in (("i", {"siz_s": 1}), ("Mk", {"mark": 1, "siz_s": -2})):
        st = r2.add_state(f"s_{name}")
        r2.A[(st, st)] = 1
        for d, c in inc.items():
            r2.B[(st, d)] = c
        r2.C[(name, st)] = 1
    m0, m1 = r2.add_state("s_mark_0"), r2.add_state("s_mark_1")
    r2.B[(m0, "mark")] = 1
    r2.A[(m1, m0)] = 1
    r2.C[("mark@1", m1)] = 1
    mlp2 = [
        Neuron({"mark@1": 2, "Mk": -1}, 0, {"su_pos": 1}),                # right after the u-marker
        Neuron({"mark@1": 1, "Mk": 1}, -2, {"sv_pos": 1}),                # right after the v-marker
    ]
    mlp2 += equality_neurons({"i": 1}, {"one": N - 1}, "okc")
    # at the re-emitted s_u: r_u = prev1, r_v = prev4; c = cmp ? r_u : r_v, p = the other
    mlp2 += select_neurons({"cmp": 1}, {"prev1": 1}, {"prev4": 1}, "c_val", Kc)
    mlp2 += select_neurons({"cmp": 1}, {"prev4": 1}, {"prev1": 1}, "p_val", Kc)
    b.rnn_layer(r2.state, r2.A, r2.B, r2.C, mlp2, name="counters")
    # ---- layer 3: role delays, value delays, the in-chain counter
    r3 = Recurrence()

    def chain_of(name, combo, depth, outs):
        ch = [r3.add_state(f"s_{name}_0")]
        for d, c in combo.items():
            r3.B[(ch[0], d)] = c
        for k in range(1, depth + 1):
            ch.append(r3.add_state(f"s_{name}_{k}"))
            r3.A[(ch[k], ch[k - 1])] = 1
            if k in outs:
                r3.C[(outs[k], ch[k])] = 1
        return ch

    chain_of("sv", {"sv_pos": 1}, 7, {k: f"sv@{k}" for k in range(1, 8)})
    chain_of("c", {"c_val": 1}, 1, {1: "c@1"})
    chain_of("p", {"p_val": 1}, 4, {2: "p@2", 4: "p@4"})
    chain_of("s", {"tok": 1, "prev2": 1, "one": -1}, 5, {5: "s@5"})       # s = s_u + s_v (codes)
    fetch = {"is_eos": 1, "siz_s": 1, "su_pos": 1}
    fd = chain_of("fetch", fetch, 0, {})
    ic = r3.add_state("s_inchain")
    r3.A[(ic, ic)] = 1
    r3.A[(ic, fd[0])] = 1                 # + fetch at t-1 (the fetched vertex starts a chain)
    r3.B[(ic, "mark")] = -1               # - the marker ends it
    r3.C[("inchain", ic)] = 1
    b.rnn_layer(r3.state, r3.A, r3.B, r3.C, [], name="roles")
    # ---- the attention layer
    f = fmt.frac_bits
    heads = [
        match_head("fetch", query={"i": 3, "Mk": 2, "one": 2}, key={"cnt": 1}, key_sq={"cnt_sq": 1}, one="one",
                   copy={"fa": {"tok": 1}}, fmt=fmt, max_key=Kc, max_query=Kc),
        tuple_match_head("parent", [({"tok": 1}, {"keyB": 1}, {"keyB_sq": 1})], "one",
                         {"par": {"tok": 1}, "found": {"rec_p": 1}}, fmt, max_code=Kc,
                         order=("last", "cnt", P + 1), default=({"is_bos": 1}, [{"tok_sq": 1}])),
        tuple_match_head("size", [({"prev1": 1}, {"keyC": 1}, {"keyC_sq": 1})], "one",
                         {"sz": {"tok": 1, "is_bos": 2}}, fmt, max_code=Kc,
                         order=("last", "cnt", P + 1), default=({"is_bos": 1}, [{"prev1_sq": 1}])),
    ]
    mu = sharpness(f)
    lamE = mu * (P + 1) + sharpness(f)
    heads.append(Head("last_su", [({"one": lamE}, {"su_pos": 1}), ({"one": mu}, {"cnt": 1})],
                      {"su": {"tok": 1}, "ru": {"prev2": 1}},
                      {"lambda": lamE, "mu": mu, "gap_non_match": lamE - mu * (P + 1)}))
    Bv = 2 * Kc + 8
    code = token_code
    fetch_role = {"is_eos": 1, "siz_s": 1, "su_pos": 1}

    def gate(combo, pos, neg=(), bias=0):
        """inp = combo - Bv (1 - product of pos flags and not neg flags), linearised:
        combo + Bv (sum pos - sum neg) - Bv |pos|."""
        inp = dict(combo)
        for g in pos:
            for d, c in (g.items() if isinstance(g, dict) else [(g, 1)]):
                inp[d] = inp.get(d, 0) + Bv * c
        for g in neg:
            inp[g] = inp.get(g, 0) - Bv
        return inp, bias - Bv * len(pos)

    mlp = []

    def emit_value(value, pos, neg=()):
        """v += value (a code >= 1) where the role flags hold."""
        inp, bias = gate(value, pos, neg)
        mlp.append(Neuron(inp, bias, {"v": 1}))

    def emit_const(c, pos, neg=()):
        inp, bias = gate({}, pos, neg, 1)
        mlp.append(Neuron(inp, bias, {"v": c}))

    # fetch: the input token (a vertex code >= 1), or the answer if it is [EOS] (code -1):
    # (1 - fa)/2 is 1 for [EOS] and <= 0 for a vertex
    emit_value({"fa": 1}, [fetch_role])
    eos_half = {"fa": Fraction(-1, 2)}
    inp, bias = gate(eos_half, [fetch_role, "okc"], (), Fraction(1, 2))
    mlp.append(Neuron(inp, bias, {"v": code(TRUE)}))
    inp, bias = gate(eos_half, [fetch_role], ["okc"], Fraction(1, 2))
    mlp.append(Neuron(inp, bias, {"v": code(FALSE)}))
    # in a chain: the parent if found, else the marker
    emit_value({"par": 1}, ["inchain", "found"])
    emit_const(code(DASH), ["inchain"], ["found"])
    # at the marker: the root's size
    emit_value({"sz": 1}, ["mark"])
    # right after s_v: r_u again
    emit_value({"ru": 1}, ["sv_pos"])
    # at r_u': [FALSE] if r_u = r_v, else s_u again
    emit_const(code(FALSE), ["sv@1", "eq_r"])
    emit_value({"su": 1}, ["sv@1"], ["eq_r"])
    # the union records
    emit_const(code(TILDE), ["sv@2"])
    emit_value({"c@1": 1}, ["sv@3"])
    emit_value({"p@2": 1}, ["sv@4"])
    emit_const(code(QUERY), ["sv@5"])
    emit_value({"p@4": 1}, ["sv@6"])
    emit_value({"s@5": 1}, ["sv@7"])
    b.attention_layer(heads, mlp)
    number_readout(b, "v")
    b.notes.update({"N": N, "m_max": m_max, "positions": P, "cot_bound": istree_cot_bound(N)})
    return b.build(fmt)
