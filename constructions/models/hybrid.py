"""Hybrid models (claim T5.6): linear-RNN layers, then exactly ONE attention layer.

A hybrid has no position feature in its embedding (docs/theory.md §2); the shared
front end :func:`~constructions.build.gadgets.clock` computes by linear recurrences
what the attention layer needs: counters ``cnt = t + 1`` and ``cnt_sq``, delay
lines of previous token codes, and latches. The attention layer then retrieves
with no CoT: :func:`index_hybrid`, :func:`ar_hybrid`, :func:`cgram_hybrid`,
:func:`counting_hybrid`. Each builder returns a :class:`~constructions.build.model.Model`
in its declared format ``DECLARED[task]``; the architecture is the same for every
n.

Example::

    >>> m = index_hybrid(8)
    >>> m.predict([0, 33, 32, 33, 33, 32, 32, 33, 32, 9, 34])   # x_2 = 0
    32

Details (the clock, each task's head, formats): docs/internals/models.md#hybrid
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

import sympy as sp

from rnngap.constructions.machine import kernels as K
from .demos import COUNT_ABOVE_THRESHOLD, Declared
from rnngap.constructions.machine.fixedpoint import log2_ceil
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    LN2_UPPER, Builder, Combo, Component, Head, MarginError, Neuron, Recurrence, ResidualSpace,
    bits_for, clock, count_compare_neurons, count_head, delay_chain, equality_neurons,
    gated_value_neuron, is_sym, latest_flag_head, match_head, number_readout, require,
    require_int_bits, select_neurons, sharpness, smax, zero_gap,
)
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import (
    BOS, DASH, EOS, FALSE, NUMBER_BASE, QUERY, TILDE, TRUE, Vocab, token_code,
)

from .bounds import CODE_SLACK, INT as _INT, N  # noqa: E402,F401  (CODE_SLACK: see bounds.py)
from . import bounds as _bounds  # noqa: E402


def code_bound(n: int) -> int:
    """M(n) = n + 32 >= every |tau| and every ``cnt`` a retrieval hybrid sees."""
    return _bounds.hybrid_code_bound(_bounds.backend_of(n), n)



def _base_space() -> ResidualSpace:
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    return s


def _premise(n: int, alphabet: int, extra_positions: int) -> Vocab:
    if is_sym(n) or is_sym(alphabet):       # a symbolic build: its plan states the domain (checks/certify/plans.py)
        return Vocab(smax(n, alphabet))
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if alphabet < 1 or alphabet > n + CODE_SLACK - 1:
        raise ValueError(f"alphabet {alphabet} outside 1..n+{CODE_SLACK - 1} (the declared code bound)")
    if n + extra_positions + 1 > code_bound(n):
        raise ValueError(f"{extra_positions} positions after the data exceed the declared code bound")
    return Vocab(max(n, alphabet))


# ----------------------------------------------------------------------------
# ----------------------------------------------------------------------------
# declared formats: written once in constructions/models/bounds.py
from .bounds import HYBRID as DECLARED, hybrid_cgram as cgram_declared  # noqa: E402,F401
from .bounds import hybrid_istree as istree_declared  # noqa: E402,F401


def _count_bound(n: int) -> int:
    return _bounds.hybrid_count_bound(_bounds.backend_of(n), n)


def _istree_code(N: int, m_max: int) -> int:
    return istree_positions(N, m_max) + CODE_SLACK


# ----------------------------------------------------------------------------
# the four retrieval hybrids (no CoT)
def _retrieval_front(name: str, n: int, alphabet: int, after: int, delays: int, layer: str) -> Builder:
    """The front every retrieval hybrid but Counting shares: the vocabulary, the
    base space, the clock with ``delays`` delay lines (and their squares), an
    ``answer`` direction and the clock's RNN layer, for prompts of n data tokens
    and ``after`` more ([QUERY] and the query), i.e. n + after + 1 positions."""
    vocab = _premise(n, alphabet, after)
    s = _base_space()
    rec = Recurrence()
    clock(s, rec, delays=delays, delays_sq=delays, max_positions=n + after + 1, max_code=code_bound(n))
    s.hidden("answer")
    b = Builder(name, "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + after + 1
    rec.apply(b, name=layer)
    return b


def index_hybrid(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] i`` -> x_i. RNN: cnt, cnt_sq. Attention: match
    tau(i) = i + 1 against cnt_j = j + 1 (gap lambda between keys; T5.6)."""
    fmt = fmt or DECLARED["index"].format(n)
    b = _retrieval_front(f"index-hybrid(n={n})", n, alphabet, 2, 0, "clock")    # [BOS] x_1..x_n [QUERY] i
    M = code_bound(n)
    b.attention_layer([match_head("index", components=[Component({"tok": 1}, {"cnt": 1}, {"cnt_sq": 1}, M, M)],
                                  copy={"answer": {"tok": 1}}, fmt=fmt)])
    number_readout(b, "answer")
    return b.build(fmt)


def ar_hybrid(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q`` -> x_{j+1}, j the first occurrence of q.

    RNN: cnt and the delay prev1 = tau(x_{t-1}) (and its square). Attention: key
    prev1 against the query tau(q), first occurrence by cnt: the first position
    whose previous token is q holds the answer; [BOS] has prev1 = 0 (never a
    number's code), and a later match (e.g. at [QUERY] after x_n = q) loses by mu."""
    fmt = fmt or DECLARED["ar"].format(n)
    b = _retrieval_front(f"ar-hybrid(n={n})", n, alphabet, 2, 1, "clock+delay")  # [BOS] x_1..x_n [QUERY] q
    M = code_bound(n)
    b.attention_layer([match_head("ar", components=[Component({"tok": 1}, {"prev1": 1}, {"prev1_sq": 1}, M, M)],
                                  copy={"answer": {"tok": 1}}, fmt=fmt, tie_break="first", n_positions=M + 1,
                                  pos="cnt")])
    number_readout(b, "answer")
    return b.build(fmt)


def cgram_hybrid(n: int, *, alphabet: int = 2, c: int = 3, fmt: FixedFormat | None = None) -> Model:
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
    b = _retrieval_front(f"cgram-hybrid(c={c},n={n})", n, alphabet, c, w, "clock+delays")  # ... [QUERY] q_1..q_{c-1}
    M = code_bound(n)
    components = []
    for k in range(1, w + 1):      # query component q_{c-k} = token delayed by k-1; key = delayed by k
        q = {"tok": 1} if k == 1 else {f"prev{k - 1}": 1}
        components.append(Component(q, {f"prev{k}": 1}, {f"prev{k}_sq": 1}, M, M))
    b.attention_layer([match_head(f"{c}gram", components=components, copy={"answer": {"tok": 1}}, fmt=fmt,
                                  tie_break="first", n_positions=M + 1, pos="cnt")])
    number_readout(b, "answer")
    return b.build(fmt)


def counting_hybrid(n: int, *, alphabet: int = 3, fmt: FixedFormat | None = None,
                    check_margins: bool = True) -> Model:
    """``[BOS] x_1..x_n [QUERY] q t`` -> number 1 if q occurs more than t times, else 0.

    RNN: cnt, prev1 (= q at the last position) and its square, and the latch
    after_query (1 from [QUERY] on). Attention: the BOS counting head with query
    prev1 over keys tok, the latch pushing [QUERY], q and t 2 lambda down, so the
    weight is exactly 1/(c+1) on [BOS] and on each of the c matches; its MLP
    compares round(1/(c+1)) with the embedded 1/(t + 3/2). ``check_margins=False``:
    the comparison's margin is not asserted (necessity scans below the declared f)."""
    fmt = fmt or DECLARED["counting"].format(n)
    vocab = _premise(n, alphabet, 3)
    s = _base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.embedded("thr", K.F_TOK_INV, Fraction(1, 2))     # 1/(tau + 1/2) = 1/(t + 3/2) for the number t
    rec = Recurrence()
    clock(s, rec, delays=1, delays_sq=1, latches={"after_query": "is_query"}, max_positions=n + 4,
          max_code=code_bound(n))
    s.bound["after_query"] = 1                # the prompt has one [QUERY] (Builder's central score check)
    s.hidden("frac")
    s.hidden(COUNT_ABOVE_THRESHOLD)
    b = Builder(f"counting-hybrid(n={n})", "hybrid", vocab, s, claim="T5.6")
    b.max_positions = n + 4                   # [BOS] x_1..x_n [QUERY] q t
    rec.apply(b, name="clock+delay+latch")
    M = code_bound(n)
    head = count_head("count", query={"prev1": 1}, query_sq={"prev1_sq": 1}, key={"tok": 1}, key_sq={"tok_sq": 1},
                      one="one", not_bos={"one": 1, "is_bos": -1}, bos_flag="is_bos", out="frac",
                      fmt=fmt, max_key=M, n=n, push_down={"after_query": 2})
    require_int_bits(fmt, bits_for(_count_bound(n)) + 1, "count", "scores with the after-query term")
    b.attention_layer([head], mlp=count_compare_neurons("frac", "thr", COUNT_ABOVE_THRESHOLD, n, fmt, check_margins))
    b.readout([(COUNT_ABOVE_THRESHOLD, K.F_TOK, 0, 2), ("one", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    return b.build(fmt)


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
#   fetch   query 3 i + 2 + 2 k (i = ``joins`` so far, k = ``edge_markers``, the
#           markers '-' in this edge) vs key cnt = position + 1: the input token
#           u_i (position 3i+1) or v_i (3i+3), into ``fetched_token``;
#   parent  query tau(x) vs key tau(c) at the p of every record "~ c p"; last match;
#           default [BOS] (``parent_found`` = 0: x is a root, emit '-');
#   size    query tau(root) (the token before '-') vs key tau(p) at the s of every
#           record "[QUERY] p s"; last match (sizes grow); default [BOS] (size 1);
#   last_su the latest s_u position (:func:`~constructions.build.gadgets.latest_flag_head`):
#           its token s_u and the token two before it, r_u.
# With union by size every tree of size k has depth <= log2 k, so a find writes at
# most floor(log2 N) + 2 tokens: the CoT is at most N (2 floor(log2 N) + 16) + 1.
# Measured (checks/verify/checks_hybrid.py, hybrid_istree_fit_check: binomial merges of the
# deepest vertices, a deep binomial core with pendant vertices, the same closed by a
# cycle, a random tree): the longest CoT per N fits 0.79 N log2 N + 12.6 N by least
# squares over N = 16..256 (0.77 N log2 N + 12.8 N over N = 16..320); the declared
# format fits int64 storage up to N = 323 (m_max = N).

def istree_cot_bound(N: int) -> int:
    return _bounds.hybrid_istree_cot(_INT, N)




def istree_positions(N: int, m_max: int) -> int:
    return _bounds.hybrid_istree_positions(_INT, N, m_max)


ISTREE = istree_declared()


# The union-find hybrid's residual directions and heads, by name (the plans of
# checks/certify/istree_hybrid.py and istree_hybrid_chain.py import them; the clock's cnt,
# cnt_sq, prev<k>, prev1_sq are constructions/build/gadgets.py's). Embedded: the token flags.
IS_BOS, IS_EOS, IS_DASH, IS_TILDE, IS_QUERY = "is_bos", "is_eos", "is_dash", "is_tilde", "is_query"
EOS_SEEN = "eos_seen"
"""The front end's latch: the [EOS] seen so far."""


def delayed(direction: str, k: int) -> str:
    """``direction`` k positions back (a delay line of the RNN layers; 0 before the start)."""
    return f"{direction}@{k}"


def squared(direction: str) -> str:
    """The square of ``direction`` (a key's square, which the match heads read)."""
    return f"{direction}_sq"


def after_sv(k: int) -> str:
    """The role k positions after s_v (at_v_size delayed by k)."""
    return f"after_sv{k}"


# RNN layer 1's MLP: where the position sits in a record, the match heads' keys, the tests of
# the re-emitted u-side
CHAIN_MARKER = "chain_marker"                       # a '-' inside the CoT
AT_PARENT_RECORD, AT_SIZE_RECORD = "at_parent_record", "at_size_record"    # the p of "~ c p", the s of "[QUERY] p s"
PARENT_KEY, SIZE_KEY = "parent_key", "size_key"     # tau(c) at the p of "~ c p", tau(p) at the s of "[QUERY] p s"
PARENT_KEY_SQ, SIZE_KEY_SQ = squared(PARENT_KEY), squared(SIZE_KEY)
ROOTS_EQUAL, U_SMALLER = "roots_equal", "u_smaller"    # [r_u = r_v], [s_u <= s_v]
# RNN layer 2: the counts and the roles right after the u- and v-markers, [joins = N - 1], the union's roots
JOINS, EDGE_MARKERS, JOINS_OK = "joins", "edge_markers", "joins_ok"
AT_U_SIZE = "at_u_size"
"""1 right after an edge's u-side marker, where the CoT writes s_u, the size of u's tree."""
AT_V_SIZE = "at_v_size"
"""1 right after an edge's v-side marker, where the CoT writes s_v, the size of v's tree."""
CHILD_ROOT, PARENT_ROOT = "child_root", "parent_root"
# RNN layer 3: in a find chain, and the union's values delayed to their slots
IN_CHAIN, MERGED_SIZE = "in_chain", "merged_size"
# the heads (fetch, parent, size, last_su) and what they copy, the next token's code
FETCH_HEAD, PARENT_HEAD, SIZE_HEAD, LAST_SU_HEAD = "fetch", "parent", "size", "last_su"
FETCHED_TOKEN, PARENT_TOKEN, PARENT_FOUND, ROOT_SIZE = "fetched_token", "parent_token", "parent_found", "root_size"
LATEST_SU, LATEST_RU = "latest_su", "latest_ru"     # at the latest s_u: its token s_u and r_u two before it
NEXT_CODE = "next_code"

# Residual directions of the union-find hybrid, by the phase that writes them
# (layout order = this order; every direction exists before the first layer is assembled).
_IST_RECORD_FLAGS = (CHAIN_MARKER, AT_PARENT_RECORD, AT_SIZE_RECORD, PARENT_KEY, PARENT_KEY_SQ,
                     SIZE_KEY, SIZE_KEY_SQ, ROOTS_EQUAL, U_SMALLER)
_IST_COUNTERS = (JOINS, EDGE_MARKERS, delayed(CHAIN_MARKER, 1), AT_U_SIZE, AT_V_SIZE, JOINS_OK, CHILD_ROOT,
                 PARENT_ROOT)
_IST_DELAYS = (IN_CHAIN, delayed(CHILD_ROOT, 1), delayed(PARENT_ROOT, 2), delayed(PARENT_ROOT, 4),
               delayed(MERGED_SIZE, 5)) + tuple(after_sv(k) for k in range(1, 8))
_IST_HEADS = (FETCHED_TOKEN, PARENT_TOKEN, PARENT_FOUND, ROOT_SIZE, LATEST_SU, LATEST_RU)
_IST_NEXT = (NEXT_CODE,)

# e2 = [[EOS] at least two tokens back] = eos_seen - [EOS now] - [EOS one back]: a
# record's marker two back is then a CoT token (the input may use '~' between endpoints)
_IST_IN_COT2 = {EOS_SEEN: 1, IS_EOS: -1, delayed(IS_EOS, 1): -1}


def _written(rec: Recurrence | None, mlp: Sequence) -> set[str]:
    out = {d for (d, _) in rec.C} if rec is not None else set()
    return out | {d for nrn in mlp for d in nrn.out}


def _phase(b: Builder, name: str, declared: tuple[str, ...], rec: Recurrence | None, mlp: list,
           heads: list[Head] = ()) -> tuple[str, ...]:
    """Assemble one phase and check it writes exactly the directions it declares."""
    got = _written(rec, mlp) | {d for h in heads for d in h.copy}
    if got != set(declared):
        raise ValueError(f"phase {name}: writes {sorted(got)}, declares {sorted(declared)}")
    if rec is not None:
        rec.apply(b, mlp, name=name)
    else:
        b.attention_layer(list(heads), list(mlp))
    return declared


def _istree_space(m_max: int, P: int, code_max: int) -> tuple[ResidualSpace, Recurrence]:
    """Embedded flags, then the RNN front end (clock, token delays, flag delays,
    the [EOS] latch ``eos_seen``), then every hidden direction of the later phases.
    The directions the heads read carry their bounds (so :class:`Builder` checks
    the heads' scores centrally too): cnt <= P, |tau| and the keys <= code_max,
    joins <= m_max, edge_markers <= 2 (two markers per edge), at_u_size a flag."""
    s = _base_space()
    for lab, token in ((IS_BOS, BOS), (IS_EOS, EOS), (IS_DASH, DASH), (IS_TILDE, TILDE),
                       (IS_QUERY, QUERY)):
        s.embedded(lab, K.F_IS_TOKEN, token)
    front = Recurrence()
    clock(s, front, delays=4, delays_sq=1, latches={EOS_SEEN: IS_EOS}, max_positions=P, max_code=code_max)
    for flag, depth in ((IS_TILDE, 2), (IS_QUERY, 2), (IS_EOS, 1)):
        delay_chain(front, flag, {flag: 1}, depth, {k: s.hidden(delayed(flag, k)) for k in range(1, depth + 1)})
    bounds = {PARENT_KEY: code_max, PARENT_KEY_SQ: code_max ** 2, SIZE_KEY: code_max,
              SIZE_KEY_SQ: code_max ** 2, JOINS: m_max, EDGE_MARKERS: 2, AT_U_SIZE: 1}
    for lab in _IST_RECORD_FLAGS + _IST_COUNTERS + _IST_DELAYS + _IST_HEADS + _IST_NEXT:
        s.hidden(lab, bound=bounds.get(lab))
    return s, front


def _istree_record_flags(code_max: int) -> list[Neuron]:
    """MLP after the front end: where the position sits in a record, the keys of the
    parent and size heads, and the two tests of an edge's re-emitted u-side.

    The keys are gated values (:func:`gated_value_neuron`): tau(c) = prev1 at the p of
    "~ c p", tau(p) = prev1 at the s of "[QUERY] p s", else <= 0. Off the gate the
    value must stay <= big: |prev1| <= code_max (every |tau|, ``_istree_code``) and
    prev1_sq <= code_max^2."""
    parent_rec = [{delayed(IS_TILDE, 2): 1}, _IST_IN_COT2]
    size_rec = [{delayed(IS_QUERY, 2): 1}, _IST_IN_COT2]
    big, big_sq = code_max, code_max * code_max
    mlp = [
        Neuron({IS_DASH: 1, EOS_SEEN: 1}, -1, {CHAIN_MARKER: 1}),              # '-' inside the CoT
        gated_value_neuron({}, parent_rec, 1, {AT_PARENT_RECORD: 1}, bias=1),  # p of "~ c p"
        gated_value_neuron({}, size_rec, 1, {AT_SIZE_RECORD: 1}, bias=1),      # s of "[QUERY] p s"
        gated_value_neuron({"prev1": 1}, parent_rec, big, {PARENT_KEY: 1}),
        gated_value_neuron({"prev1_sq": 1}, parent_rec, big_sq, {PARENT_KEY_SQ: 1}),
        gated_value_neuron({"prev1": 1}, size_rec, big, {SIZE_KEY: 1}),
        gated_value_neuron({"prev1_sq": 1}, size_rec, big_sq, {SIZE_KEY_SQ: 1}),
        # u_smaller = [s_u <= s_v] at the re-emitted s_u (tok = s_u, prev2 = s_v): relu(d+1) - relu(d)
        Neuron({"prev2": 1, "tok": -1}, 1, {U_SMALLER: 1}),
        Neuron({"prev2": 1, "tok": -1}, 0, {U_SMALLER: -1}),
    ]
    return mlp + equality_neurons({"tok": 1}, {"prev3": 1}, ROOTS_EQUAL)       # at r_u': r_u == r_v ?


def _istree_counters(N: int, code_max: int) -> tuple[Recurrence, list[Neuron]]:
    """RNN layer 2: ``joins`` (size records written), ``edge_markers`` (markers '-' in
    this edge: + each marker, - 2 at the size record closing the edge), the marker
    delayed by one; its MLP: the roles right after the u- and v-markers, [joins = N - 1],
    and at the re-emitted s_u the child root c = (u_smaller ? r_u : r_v) and the
    parent root p (the other; r_u = prev1, r_v = prev4, |code| <= code_max)."""
    rec = Recurrence()
    for name, inc in ((JOINS, {AT_SIZE_RECORD: 1}), (EDGE_MARKERS, {CHAIN_MARKER: 1, AT_SIZE_RECORD: -2})):
        st = rec.add_state(f"s_{name}")
        rec.A[(st, st)] = 1
        for d, c in inc.items():
            rec.B[(st, d)] = c
        rec.C[(name, st)] = 1
    delay_chain(rec, "chain_marker", {CHAIN_MARKER: 1}, 1, {1: delayed(CHAIN_MARKER, 1)})
    mlp = [
        Neuron({delayed(CHAIN_MARKER, 1): 2, EDGE_MARKERS: -1}, 0, {AT_U_SIZE: 1}),  # right after the u-marker
        Neuron({delayed(CHAIN_MARKER, 1): 1, EDGE_MARKERS: 1}, -2, {AT_V_SIZE: 1}),  # right after the v-marker
    ]
    mlp += equality_neurons({JOINS: 1}, {"one": N - 1}, JOINS_OK)
    mlp += select_neurons({U_SMALLER: 1}, {"prev1": 1}, {"prev4": 1}, CHILD_ROOT, code_max)
    mlp += select_neurons({U_SMALLER: 1}, {"prev4": 1}, {"prev1": 1}, PARENT_ROOT, code_max)
    return rec, mlp


def _istree_delays() -> Recurrence:
    """RNN layer 3: the s_v role delayed 1..7 (the offsets of r_u', s_u', ~, c, p,
    [QUERY], p, s), the union values delayed to their slots, and ``in_chain``: + 1 the
    step after a fetch (the fetched vertex starts a parent chain), - 1 at its marker."""
    rec = Recurrence()
    delay_chain(rec, "sv", {AT_V_SIZE: 1}, 7, {k: after_sv(k) for k in range(1, 8)})
    delay_chain(rec, "c", {CHILD_ROOT: 1}, 1, {1: delayed(CHILD_ROOT, 1)})
    delay_chain(rec, "p", {PARENT_ROOT: 1}, 4, {2: delayed(PARENT_ROOT, 2), 4: delayed(PARENT_ROOT, 4)})
    delay_chain(rec, "s", {"tok": 1, "prev2": 1, "one": -1}, 5, {5: delayed(MERGED_SIZE, 5)})   # s = s_u + s_v (codes)
    fetch = delay_chain(rec, "fetch", {IS_EOS: 1, AT_SIZE_RECORD: 1, AT_U_SIZE: 1}, 0, {})
    ic = rec.add_state("s_in_chain")
    rec.A[(ic, ic)] = 1
    rec.A[(ic, fetch[0])] = 1             # + fetch at t-1 (the fetched vertex starts a chain)
    rec.B[(ic, CHAIN_MARKER)] = -1        # - the marker ends it
    rec.C[(IN_CHAIN, ic)] = 1
    return rec


def _istree_heads(fmt: FixedFormat, P: int, code_max: int) -> list[Head]:
    """The four heads of the single attention layer (comment block above)."""
    return [
        match_head(FETCH_HEAD, components=[Component({JOINS: 3, EDGE_MARKERS: 2, "one": 2}, {"cnt": 1},
                                                  {"cnt_sq": 1}, code_max, code_max)],
                   copy={FETCHED_TOKEN: {"tok": 1}}, fmt=fmt),
        match_head(PARENT_HEAD, components=[Component({"tok": 1}, {PARENT_KEY: 1}, {PARENT_KEY_SQ: 1}, code_max,
                                                   code_max, query_sq={"tok_sq": 1})],
                   copy={PARENT_TOKEN: {"tok": 1}, PARENT_FOUND: {AT_PARENT_RECORD: 1}}, fmt=fmt,
                   tie_break="last", fallback="bos", tight=True, n_positions=P + 2, pos="cnt"),
        match_head(SIZE_HEAD, components=[Component({"prev1": 1}, {SIZE_KEY: 1}, {SIZE_KEY_SQ: 1}, code_max,
                                                 code_max, query_sq={"prev1_sq": 1})],
                   copy={ROOT_SIZE: {"tok": 1, IS_BOS: 2}}, fmt=fmt,
                   tie_break="last", fallback="bos", tight=True, n_positions=P + 2, pos="cnt"),
        latest_flag_head(LAST_SU_HEAD, {AT_U_SIZE: 1}, {"cnt": 1}, "one",
                         {LATEST_SU: {"tok": 1}, LATEST_RU: {"prev2": 1}}, fmt, max_pos=P + 1),
    ]


def _istree_next_token(code_max: int) -> list[Neuron]:
    """The MLP of the attention layer: next_code = sum over roles of [role] value.

    Each rule is a :func:`gated_value_neuron`: value + bias where its role flags hold
    and its closed flags are 0, and an input <= value + bias - big <= 0 elsewhere. So
    big is the largest value + bias any rule can see, from the interval bounds of the
    directions: one code (<= code_max: a copied token, a selected root, an average of
    codes) or merged_size@5 = s_u + s_v - 1 <= 2 code_max - 1 (two codes)."""
    upper = {d: code_max for d in (FETCHED_TOKEN, PARENT_TOKEN, ROOT_SIZE, LATEST_SU, LATEST_RU,
                                   delayed(CHILD_ROOT, 1), delayed(PARENT_ROOT, 2), delayed(PARENT_ROOT, 4))}
    upper[delayed(MERGED_SIZE, 5)] = 2 * code_max - 1
    fetch_role = {IS_EOS: 1, AT_SIZE_RECORD: 1, AT_U_SIZE: 1}
    eos_half = {FETCHED_TOKEN: Fraction(-1, 2)}    # (1 - tau)/2: 1 for [EOS] (tau = -1), <= 0 for a vertex
    code = token_code
    rules = [  # (value, role flags, closed flags, bias, coefficient on next_code)
        ({FETCHED_TOKEN: 1}, [fetch_role], [], 0, 1),                         # fetch: the input token
        (eos_half, [fetch_role, JOINS_OK], [], Fraction(1, 2), code(TRUE)),   # [EOS]: the answer
        (eos_half, [fetch_role], [JOINS_OK], Fraction(1, 2), code(FALSE)),
        ({PARENT_TOKEN: 1}, [IN_CHAIN, PARENT_FOUND], [], 0, 1),              # in a chain: the parent
        ({}, [IN_CHAIN], [PARENT_FOUND], 1, code(DASH)),                      # or the marker
        ({ROOT_SIZE: 1}, [CHAIN_MARKER], [], 0, 1),                           # at the marker: the size
        ({LATEST_RU: 1}, [AT_V_SIZE], [], 0, 1),                              # after s_v: r_u again
        ({}, [after_sv(1), ROOTS_EQUAL], [], 1, code(FALSE)),                 # r_u = r_v: a cycle
        ({LATEST_SU: 1}, [after_sv(1)], [ROOTS_EQUAL], 0, 1),                 # else s_u again
        ({}, [after_sv(2)], [], 1, code(TILDE)),                              # the union records
        ({delayed(CHILD_ROOT, 1): 1}, [after_sv(3)], [], 0, 1),
        ({delayed(PARENT_ROOT, 2): 1}, [after_sv(4)], [], 0, 1),
        ({}, [after_sv(5)], [], 1, code(QUERY)),
        ({delayed(PARENT_ROOT, 4): 1}, [after_sv(6)], [], 0, 1),
        ({delayed(MERGED_SIZE, 5): 1}, [after_sv(7)], [], 0, 1),
    ]

    def value_max(value, bias):                     # |d| <= upper[d] for every direction d
        return bias + sum(abs(c) * upper[d] for d, c in value.items())

    big = math.ceil(max(value_max(v, bias) for v, _, _, bias, _ in rules))
    return [gated_value_neuron(v, [g if isinstance(g, dict) else {g: 1} for g in gates], big, {NEXT_CODE: coef},
                               [{g: 1} for g in closed], bias)
            for v, gates, closed, bias, coef in rules]


def istree_hybrid(N: int, m_max: int | None = None, fmt: FixedFormat | None = None) -> Model:
    """The union-find hybrid for graphs on N vertices with at most m_max edges
    (default N); see the comment block above for the CoT and the heads."""
    m_max = N if m_max is None else m_max
    if N < 1:
        raise ValueError(f"N must be >= 1, got {N}")
    fmt = fmt or (ISTREE.format(N) if m_max == N else istree_declared(lambda n: m_max).format(N))
    P = istree_positions(N, m_max)
    code_max = _istree_code(N, m_max)
    s, front = _istree_space(m_max, P, code_max)
    b = Builder(f"istree-hybrid(N={N})", "hybrid", Vocab(max(N, 1)), s, claim="T5.6")
    b.max_positions = P                       # prompt of <= m_max edges and the CoT (istree_positions)
    _phase(b, "clock+delays", _written(front, []) | set(_IST_RECORD_FLAGS), front, _istree_record_flags(code_max))
    _phase(b, "counters", _IST_COUNTERS, *_istree_counters(N, code_max))
    _phase(b, "roles", _IST_DELAYS, _istree_delays(), [])
    _phase(b, "attention", _IST_HEADS + _IST_NEXT, None, _istree_next_token(code_max),
           _istree_heads(fmt, P, code_max))
    number_readout(b, NEXT_CODE)
    b.notes.update({"N": N, "m_max": m_max, "positions": P, "cot_bound": istree_cot_bound(N)})
    return b.build(fmt)
