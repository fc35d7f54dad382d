"""Constant-size Transformers for Index, AR, c-gram retrieval, Counting and
per-position AR (MQAR): the positive half of claim T4.6-up.

Every model here is built from the named gadgets of :mod:`constructions.gadgets`
(or, where a gadget is specific to one task, from :class:`Head` / :class:`Neuron`
with its margin derived and asserted beside it). The architecture (layers,
heads, widths, parameter count) is ONE for all n and all alphabets (theory.md §1
"constant size" includes the alphabet: the lower bounds' reductions write keys
up to n + 1): tokens enter only through the fixed code formulas tau, tau^2,
1/(tau + 1/2) and is_token of named specials, never a direction per symbol. n and
the alphabet a enter through lambda, the position features and the declared bits
only, as theory.md §1 allows. Only the gram length c of c-gram (one shift head per
gram position) is part of the architecture.

Instances (docs/conventions.md)::

    Index     [BOS] x_1..x_n [QUERY] i              -> x_i                         (1 layer)
    AR        [BOS] x_1..x_n [QUERY] q              -> x_{j+1}, j first with x_j=q (2 layers)
    c-gram    [BOS] x_1..x_n [QUERY] q_1..q_{c-1}   -> x_{j+c-1}                   (2 layers)
    Counting  [BOS] x_1..x_n [QUERY] q t            -> number [#{j: x_j = q} > t]  (3 layers)
    MQAR      [BOS] r_1..r_L (raw ints r as number tokens) -> at every t the token
              after the first earlier occurrence of r_t, or [BOS] (= "-1")         (2 layers)

Precision (the declarations :data:`INDEX`, :data:`AR`, :data:`CGRAM`,
:data:`COUNTING`, :data:`MQAR`; I(n) and f(n) as Python functions and sympy
expressions):

* Index, AR, c-gram and MQAR produce no fractional value at all: every softmax in
  them has a unique maximum whose score beats every other by more than
  (f + 1) ln 2, so each weight is exactly 0 or 1 and every value copied is an
  integer code. The fraction bits only set the sharpness lambda = sharpness(f).
  They declare a constant f = :data:`RETRIEVAL_FRAC_BITS` (= 1; O(1) is O(log n));
  the measured precision frontier (checks/frontier.py) is f_min = 0 at every n.
  Their O(log n) cost is in the integer bits: position features pos, pos^2 and
  scores lambda * pos^2 need I(n) = 2 log2 n + O(1).
* Counting needs f(n) = log2((n+1)(2n+3)) + O(1) fraction bits (it must tell
  1/(c+1) from 1/(t+3/2)), and I(n, a) = 2 log2 max(n + 1, a) + log2 lambda + O(1)
  integer bits: its count head compares the query code with every data code by
  lambda (2 Q tau - tau^2) (codes up to n + 1 at the reduction's alphabet n + 1).
  So p ~ 4 log2 n; the declared format fits int64 (I + f <= 62) up to
  n = :data:`COUNTING_MAX_N` (= 11,583, a little above 2^13) at alphabet n + 1, and
  the model refuses larger n. The comparison is made by the readout itself
  (logit(number 1) = thr, logit(number 0) = frac), so no steep step MLP is needed.

Example::

    >>> m = ar_model(8, alphabet=3)                            # doctest: +SKIP
    >>> m.predict([0, 34, 32, 34, 33, 32, 32, 33, 34, 9, 32])  # x = 2 0 2 1 0 0 1 2, q = 0
    34                                                         # the token after the first 0
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import sympy as sp

from . import kernels as K
from .fixedpoint import MAX_MAGNITUDE_BITS, FixedFormat, log2_ceil
from .gadgets import (
    base_space, number_readout,
    LN2_UPPER, Builder, Head, MarginError, ResidualSpace, bits_for, match_head, sharpness, shift_head, zero_gap,
)
from .model import Model
from .vocab import BOS, NUMBER_BASE, QUERY, SPECIAL_NAMES, Vocab, number_token, token_from_code

CLAIM = "T4.6-up"
RETRIEVAL_FRAC_BITS = 1
"""Declared fraction bits of Index, AR, c-gram and MQAR (constant; see the module doc)."""
MQAR_MAX_VALUE = 1 << 16
"""MQAR inputs are raw ints in [0, 2^16) (Zoology vocabularies up to 65536)."""
MQAR_MAX_LENGTH = 4096
SPECIAL_MIN_CODE = -max(SPECIAL_NAMES)
"""tau of the named special with the largest id ([QUERY] = 9 -> -9)."""

N, A, C = sp.symbols("n a c", positive=True, integer=True)
_LN2_UP = sp.Rational(LN2_UPPER.numerator, LN2_UPPER.denominator)


def _lc(x: int) -> int:
    return log2_ceil(max(1, int(x)))


def _sp_lc(e):
    return sp.ceiling(sp.log(e, 2))


def _sp_sharp(f):
    return sp.floor((f + 1) * _LN2_UP) + 1


@dataclass(frozen=True)
class Declared:
    """Declared precision of one construction: I(n, a, c) and f(n) as Python
    functions and as sympy expressions in the symbols n, a, c (a: alphabet size,
    c: gram length; unused ones are ignored)."""

    name: str
    int_bits: Callable[..., int]
    frac_bits: Callable[[int], int]
    int_expr: sp.Expr
    frac_expr: sp.Expr

    def format(self, n: int, a: int = 2, c: int = 2) -> FixedFormat:
        return FixedFormat(self.int_bits(n, a, c), self.frac_bits(n))

    def total_bits(self, n: int, a: int = 2, c: int = 2) -> int:
        return self.format(n, a, c).total_bits

    def int_value(self, n: int, a: int = 2, c: int = 2) -> int:
        """The sympy expression evaluated (tests check it equals :attr:`int_bits`)."""
        return int(self.int_expr.subs({N: n, A: a, C: c}))


# ----------------------------------------------------------------------------
# declarations (the bounds the gadgets assert, in closed form)
def _f_ret(n: int) -> int:
    return RETRIEVAL_FRAC_BITS


def _int_index(n: int, a: int = 2, c: int = 2) -> int:
    # match head on positions: keys pos + 1 <= n + 3, queries |tau| <= max(n + 1, a, 9):
    # |score| <= 3 lambda K^2 with K = max(n + 3, a, 9); need bits_for(.) + 1 <= 2 lc(K) + lc(3 lambda) + 2.
    lam = sharpness(_f_ret(n))
    Kmax = max(n + 3, a, -SPECIAL_MIN_CODE)
    return 2 * _lc(Kmax) + _lc(3 * lam) + 2


_LAM_RET = _sp_sharp(RETRIEVAL_FRAC_BITS)
INDEX = Declared("index", _int_index, _f_ret,
                 2 * _sp_lc(sp.Max(N + 3, A, -SPECIAL_MIN_CODE)) + _sp_lc(3 * _LAM_RET) + 2,
                 sp.Integer(RETRIEVAL_FRAC_BITS))


def _cgram_parts(n: int, a: int, c: int, f: int) -> tuple[int, int]:
    """(bits of the shift heads, bits of the joint match head) for c-gram / AR."""
    lam = sharpness(f)
    Npos = n + c + 1                       # positions 0..n+c
    shift = 2 * _lc(Npos) + _lc(lam * (3 + 2 * (c - 1))) + 2
    Kc = max(a, -SPECIAL_MIN_CODE)
    P = n + c
    lam_m = lam * P + lam
    B = lam_m * 3 * (c - 1) * Kc * Kc + lam * P
    return shift, _lc(B + 1) + 1


def _int_cgram(n: int, a: int = 2, c: int = 2) -> int:
    return max(_cgram_parts(n, a, c, _f_ret(n)))


def _sp_cgram_int():
    lam = _LAM_RET
    shift = 2 * _sp_lc(N + C + 1) + _sp_lc(lam * (3 + 2 * (C - 1))) + 2
    Kc = sp.Max(A, -SPECIAL_MIN_CODE)
    B = (lam * (N + C) + lam) * 3 * (C - 1) * Kc ** 2 + lam * (N + C)
    return sp.Max(shift, _sp_lc(B + 1) + 1)


CGRAM = Declared("c-gram", _int_cgram, _f_ret, _sp_cgram_int(), sp.Integer(RETRIEVAL_FRAC_BITS))
AR = Declared("AR", lambda n, a=2, c=2: _int_cgram(n, a, 2), _f_ret,
              _sp_cgram_int().subs(C, 2), sp.Integer(RETRIEVAL_FRAC_BITS))


def _f_count(n: int) -> int:
    # 2^f > (n+1)(2n+3) = 1 / g, the comparison margin of counting_model
    return _lc((n + 1) * (2 * n + 3) + 1)


def _count_code_bound(n: int, a: int) -> int:
    """K: the largest |tau| a Counting instance can carry (data numbers 0..a-1 ->
    tau <= a; the threshold t <= n -> tau <= n + 1; [QUERY] -> 9)."""
    return max(n + 1, a, -SPECIAL_MIN_CODE)


def _count_fetch_bound(n: int, f: int) -> int:
    """|score| (and partial sums) of the fetch head: 2 M + mu (n + 3), M = mu (n + 2) + mu."""
    mu = sharpness(f)
    return 2 * (mu * (n + 2) + mu) + mu * (n + 3)


def _count_match_bound(n: int, a: int, f: int) -> int:
    """|score| (and partial sums) of the count head at any position and key:
    lambda (|2 qc tau| + tau^2 + 1) <= lambda (3 K^2 + 1) for a key that is not
    [BOS] (its is_bos term is 0), lambda qc_sq <= lambda K^2 for [BOS] (its tau
    terms are 0); qc, qc_sq are (averages of) codes and squares, so |qc| <= K,
    qc_sq <= K^2 at every position."""
    K = _count_code_bound(n, a)
    return sharpness(f) * (3 * K * K + 1)


def _int_count(n: int, a: int = 2, c: int = 2) -> int:
    # count-head scores (the largest), fetch-head scores, the softmax normaliser Z <= n + 4
    # keys; +1: a score difference s_j - max (twice the bound) must fit too
    f = _f_count(n)
    return max(bits_for(_count_match_bound(n, a, f)) + 1, bits_for(_count_fetch_bound(n, f)) + 1,
               bits_for(n + 4) + 1)


_F_COUNT_EXPR = _sp_lc((N + 1) * (2 * N + 3) + 1)
_MU_COUNT = _sp_sharp(_F_COUNT_EXPR)
_K_COUNT = sp.Max(N + 1, A, -SPECIAL_MIN_CODE)
COUNTING = Declared("counting", _int_count, _f_count,
                    sp.Max(sp.floor(sp.log(_MU_COUNT * (3 * _K_COUNT ** 2 + 1), 2)) + 2,
                           sp.floor(sp.log(2 * (_MU_COUNT * (N + 2) + _MU_COUNT) + _MU_COUNT * (N + 3), 2)) + 2,
                           sp.floor(sp.log(N + 4, 2)) + 2),
                    _F_COUNT_EXPR)


def counting_max_n(alphabet: Callable[[int], int] | int | None = None) -> int:
    """The largest n whose declared Counting format fits int64 storage
    (I(n, a) + f(n) <= 62), with the alphabet a = ``alphabet(n)`` (a callable),
    a fixed int, or None for a = n + 1 (the Index -> Counting reduction's marks
    0..n). I + f grows with n, so a binary search finds it."""
    alpha = (lambda n: n + 1) if alphabet is None else (alphabet if callable(alphabet) else (lambda n: int(alphabet)))
    fits = lambda n: _int_count(n, alpha(n)) + _f_count(n) <= MAX_MAGNITUDE_BITS
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _int_mqar(n: int, a: int = MQAR_MAX_VALUE, c: int = 2) -> int:
    # n = sequence length L (positions 0..L); codes up to 2^16 (K), see mqar_model
    lam = sharpness(_f_ret(n))
    Npos = n + 1
    shift = 2 * _lc(Npos) + _lc(5 * lam) + 2            # shift head: 3 lambda N^2 + 2 lambda N <= 5 lambda N^2
    Kc = MQAR_MAX_VALUE
    nu = lam * n + lam
    lam_m = nu + lam
    B = lam_m * 3 * Kc * Kc + lam * n + nu
    return max(shift, _lc(B + 1) + 1)


_NU = _LAM_RET * N + _LAM_RET
MQAR = Declared("MQAR", _int_mqar, _f_ret,
                sp.Max(2 * _sp_lc(N + 1) + _sp_lc(5 * _LAM_RET) + 2,
                       _sp_lc((_NU + _LAM_RET) * 3 * MQAR_MAX_VALUE ** 2 + _LAM_RET * N + _NU + 1) + 1),
                sp.Integer(RETRIEVAL_FRAC_BITS))

DECLARED = {"index": INDEX, "ar": AR, "cgram": CGRAM, "counting": COUNTING, "mqar": MQAR}
COUNTING_MAX_N = counting_max_n()
"""The largest n whose declared Counting format fits int64 at alphabet n + 1 (the
reduction's alphabet): :func:`counting_model` refuses larger n (with that alphabet
or a larger one) with a clear error."""


# ----------------------------------------------------------------------------
def _check_n(n: int, minimum: int, what: str) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < minimum:
        raise ValueError(f"{what}: n must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _check_alphabet(a: int, what: str) -> int:
    if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or a < 1:
        raise ValueError(f"{what}: alphabet must be an integer >= 1, got {a!r}")
    return int(a)


# ----------------------------------------------------------------------------
# Index
def index_model(n: int, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] i`` -> x_i, one attention layer (T4.6-up).

    The match head of :func:`constructions.demos.position_match`, for any alphabet:
    the query is tau(i) = i + 1 (the last token), the key of position j is j + 1, so
    score = lambda (2 (i+1)(j+1) - (j+1)^2) peaks exactly at j = i, every other
    position >= lambda lower (lambda = sharpness(f) > (f + 1) ln 2: weight exactly 0);
    the head copies tau(x_i) into ``answer``, read out by the nearest-code formula.
    [BOS] (key 1), [QUERY] (key n + 2) and i itself (key n + 3) never match since
    2 <= i + 1 <= n + 1. Weights: width 7, one head.
    """
    n = _check_n(n, 1, "index_model")
    a = _check_alphabet(alphabet, "index_model")
    fmt = fmt or INDEX.format(n, a)
    s = base_space()
    s.hidden("answer")
    b = Builder(f"index(n={n},a={a})", "transformer", Vocab(max(n, a - 1)), s, claim=CLAIM)
    b.max_positions = n + 3                   # [BOS] x_1..x_n [QUERY] i
    b.attention_layer([match_head("index", query={"tok": 1}, key={"pos": 1, "one": 1},
                                  key_sq={"pos_sq": 1, "pos": 2, "one": 1}, one="one",
                                  copy={"answer": {"tok": 1}}, fmt=fmt,
                                  max_key=max(n + 3, a, -SPECIAL_MIN_CODE),
                                  max_query=max(n + 1, a, -SPECIAL_MIN_CODE))])
    number_readout(b, "answer")
    return b.build(fmt)


# ----------------------------------------------------------------------------
# c-gram retrieval (AR is c = 2)
def joint_match_head(name: str, pairs: list[tuple[str, str, str]], one: str, pos: str,
                     copy: dict, fmt: FixedFormat, max_code: int, max_position: int) -> Head:
    """Attend exactly to the FIRST position j whose keys p_k(j) all equal the
    queries q_k (k = 1..m): score = sum_k lambda (2 q_k p_k - p_k^2) - mu pos_j.

    ``pairs`` = [(query direction, key direction, key-square direction)].
    Per component, 2 q p - p^2 = q^2 - (q - p)^2, so a full match scores
    lambda sum q_k^2 - mu j and ANY mismatch costs >= lambda (integer codes: one
    mismatched component loses lambda (q - p)^2 >= lambda; more lose more; the
    matched components contribute the same as for a full match).
    Margins (P = max_position): mu = sharpness(f) > (f+1) ln 2 separates consecutive
    full matches (the earliest wins, weight exactly 1); lambda = mu P + sharpness(f)
    keeps any partial match at position j' below a full match at j:
    lambda - mu j + mu j' >= lambda - mu P > (f+1) ln 2.
    Integer bits: |score| <= lambda m (2 Q K + K^2) + mu P with Q = K = max_code.
    """
    f = fmt.frac_bits
    mu = sharpness(f)
    lam = mu * max_position + sharpness(f)
    m = len(pairs)
    if not (lam - mu * max_position > zero_gap(f)):
        raise MarginError("a partial match would keep weight (score gap not above (f + 1) ln 2)")
    if not (mu > zero_gap(f)):
        raise MarginError("a later full match would keep weight (score gap not above (f + 1) ln 2)")
    B = lam * m * 3 * max_code * max_code + mu * max_position
    need = bits_for(B) + 1
    if fmt.int_bits < need:
        raise MarginError(f"{name}: scores up to {B} need {need} integer bits, {fmt.name} has {fmt.int_bits}")
    score = []
    for q, p, psq in pairs:
        score.append(({q: 2 * lam}, {p: 1}))
        score.append(({one: -lam}, {psq: 1}))
    score.append(({one: -mu}, {pos: 1}))
    return Head(name, score, copy, {"lambda": lam, "mu": mu, "gap_partial_match": lam - mu * max_position,
                                    "gap_between_matches": mu, "zero_gap": float(zero_gap(f)),
                                    "score_int_bits": need})


def cgram_model(n: int, alphabet: int = 2, c: int = 3, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q_1..q_{c-1}`` -> the token after the first
    occurrence of the gram q (T4.6-up). Two attention layers.

    Layer 1: c - 1 shift heads; head k copies tau and tau^2 of the token k
    positions back into ``prev_k``, ``prev_k_sq`` at every position (position j < k
    gets [BOS], tau = 0). Layer 2: :func:`joint_match_head` at the last position
    L - 1 = n + c: its queries are the gram, q_{c-1} = ``tok`` and q_{c-k} =
    ``prev_{k-1}`` (k = 2..c-1), matched against ``prev_1..prev_{c-1}`` of every
    position p, i.e. against x_{p-1}, ..., x_{p-c+1}; a full match at p means the
    gram occurs at p-c+1..p-1 and the head copies tau(x_p), the answer.

    Why nothing after the data wins: position n + 1 ([QUERY]) sees the gram ending
    at x_n, which may equal q, but the promise puts a first occurrence ending at or
    before x_{n-1}, i.e. a full match at some p <= n, and the first-occurrence
    tie-break (-mu pos) prefers it; positions n + 2 .. n + c have [QUERY]
    (tau = -9, never a data code >= 1) among their keys, so they mismatch. Positions
    p < c - 1 have [BOS] (tau = 0) among their keys and mismatch too.
    """
    c = int(c)
    if c < 2:
        raise ValueError(f"cgram_model: c must be >= 2, got {c}")
    n = _check_n(n, c, f"cgram_model (c = {c})")
    a = _check_alphabet(alphabet, "cgram_model")
    decl = AR if c == 2 else CGRAM
    fmt = fmt or decl.format(n, a, c)
    s = base_space()
    for k in range(1, c):
        s.hidden(f"prev_{k}")
        s.hidden(f"prev_{k}_sq")
    s.hidden("answer")
    name = "ar" if c == 2 else f"cgram(c={c})"
    b = Builder(f"{name}(n={n},a={a})", "transformer", Vocab(a - 1), s, claim=CLAIM)
    npos = n + c + 1
    b.max_positions = npos                    # [BOS] x_1..x_n [QUERY] q_1..q_{c-1}
    b.attention_layer([shift_head(f"shift_{k}", "pos", "pos_sq", "one",
                                  {f"prev_{k}": {"tok": 1}, f"prev_{k}_sq": {"tok_sq": 1}}, fmt,
                                  n_positions=npos, shift=k) for k in range(1, c)])
    pairs = [("tok", "prev_1", "prev_1_sq")] + [(f"prev_{k - 1}", f"prev_{k}", f"prev_{k}_sq")
                                                for k in range(2, c)]
    b.attention_layer([joint_match_head("match", pairs, "one", "pos", {"answer": {"tok": 1}}, fmt,
                                        max_code=max(a, -SPECIAL_MIN_CODE), max_position=n + c)])
    number_readout(b, "answer")
    b.notes["c"] = c
    return b.build(fmt)


def ar_model(n: int, alphabet: int = 4, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q`` -> x_{j+1}, j the first occurrence of q (T4.6-up).

    Layer 1: the shift head copies tau and tau^2 of the previous token into
    ``prev_1`` / ``prev_1_sq`` at every position. Layer 2: a match head with
    first-occurrence tie-break compares tau(q) (the last token) with ``prev_1`` of
    every position p and copies tau(x_p). The positions after the data cannot win:
    [QUERY] at n + 1 carries prev = x_n, which may equal q, but the promise gives a
    first occurrence j <= n - 1, i.e. a match at p = j + 1 <= n, earlier, and the
    tie-break makes the earliest match's weight exactly 1; q itself at n + 2
    carries prev = [QUERY] (tau = -9 != tau(q) >= 1). This is :func:`cgram_model`
    with c = 2.
    """
    return cgram_model(n, alphabet, 2, fmt)


# ----------------------------------------------------------------------------
# Counting
def counting_model(n: int, alphabet: int = 3, fmt: FixedFormat | None = None,
                   check_margins: bool = True) -> Model:
    """``[BOS] x_1..x_n [QUERY] q t`` -> number 1 if #{j: x_j = q} > t else
    number 0 (T4.6-up). Three attention layers, width 12, one head per layer:
    the SAME architecture and parameter count for every n and every alphabet.
    Tokens enter only through the fixed formulas tau, tau^2, 1/(tau + 1/2) and
    is_token of the named specials [BOS], [QUERY] (plus is_number); the alphabet
    a only enters the declared integer bits (codes up to K = max(n + 1, a, 9)).

    * L1 ``after-query``: score lambda (2 is_query + is_bos)[key]: [QUERY] wins at
      positions >= n + 1, [BOS] before (gap lambda); copying is_query gives ``after``
      = 1 exactly at and after [QUERY], else 0.
    * L2 ``fetch-q``: score M (after + is_number)[key] - mu pos[key] (mu =
      sharpness(f), M = mu (n + 2) + sharpness(f)): at t's position (n + 3) q (score
      2M - mu (n + 2)) beats t (gap mu), every data number (M - mu j, gap >= M -
      mu (n + 1) = mu + sharpness(f)), [QUERY] and [BOS]. Weight exactly 1 on q:
      copies tau(q), tau(q)^2 into ``query_code``, ``query_code_sq``.
    * L3 ``count`` (read at the last position; Q = tau(q) >= 1):
      score = lambda (2 Q tau - tau^2)[key] + lambda Q^2 is_bos[key] - lambda after[key].
      2 Q tau - tau^2 = Q^2 - (Q - tau)^2, so a data key equal to q and [BOS] (tau
      = 0, is_bos = 1) both score lambda Q^2; any other data key scores <=
      lambda (Q^2 - 1) (integer codes); the after-query keys [QUERY], q, t score <=
      lambda Q^2 - lambda. Every non-maximal key is >= lambda > (f + 1) ln 2 below:
      weight exactly 0, and the c + 1 maximal keys ([BOS] and the c copies of q)
      get round(1/(c+1)) each. (The constant -lambda Q^2 of the usual
      -lambda (Q - tau)^2 is left out: softmax subtracts the maximum, so the weights
      are the same, and the scores stay lambda K^2 smaller.) Copying is_bos gives
      ``frac`` = round(1/(c+1)).
    * Readout: logit(number 1) = thr = round(1/(t + 3/2)) (the embedding feature
      1/(tau + 1/2) of t, tau = t + 1), logit(number 0) = frac, every other token 0.

    Margins. Comparison: c > t iff 1/(c+1) < 1/(t+3/2); for 0 <= c, t <= n the exact
    values differ by at least g = 1/((n+1)(2n+3)) (closest: c = t = n); each is
    rounded by at most 2^-(f+1), so the rounded values keep their order iff
    g > 2^-f, asserted (``check_margins=False`` skips this one assertion so that
    the precision frontier can probe fewer fraction bits; the run then decides).
    Both stay >= 1/(n + 3/2) - 2^-(f+1) > 0, above the other tokens' logit 0.
    Integer bits: count scores <= lambda (3 K^2 + 1), fetch scores <= 2M + mu (n + 3),
    normalisers <= n + 4, each + 1 bit for score differences (:data:`COUNTING`).
    The declared format leaves int64 (I + f > 62) above :data:`COUNTING_MAX_N` at
    alphabet n + 1; larger n are refused.

    Example (n = 4, a = 3)::

        >>> m = counting_model(4, 3)                                      # doctest: +SKIP
        >>> m.predict([0, 34, 32, 34, 33, 9, 34, 33])   # x = 2 0 2 1, q = 2, t = 1
        33                                              # number 1: 2 occurs twice > 1
    """
    n = _check_n(n, 1, "counting_model")
    a = _check_alphabet(alphabet, "counting_model")
    if fmt is None:
        I_d, f_d = COUNTING.int_bits(n, a), COUNTING.frac_bits(n)
        if I_d + f_d > MAX_MAGNITUDE_BITS:
            raise ValueError(f"counting_model: n = {n} at alphabet {a} needs the declared format Q{I_d}.{f_d}: "
                             f"I + f = {I_d + f_d} exceeds 62 (int64 storage); the largest n at alphabet n + 1 "
                             f"is {COUNTING_MAX_N}")
        fmt = COUNTING.format(n, a)
    f = fmt.frac_bits
    lam = sharpness(f)
    g = Fraction(1, (n + 1) * (2 * n + 3))
    if check_margins and not g > Fraction(1, 1 << f):
        raise MarginError(f"counting_model(n={n}): the gap {float(g):.3g} between 1/(c+1) and 1/(t+3/2) is not "
                          f"above the rounding error 2^-{f}; needs 2^f > {(n + 1) * (2 * n + 3)}")
    mu = lam
    M = mu * (n + 2) + lam
    if not (lam > zero_gap(f) and mu > zero_gap(f)):
        raise MarginError(f"counting_model: lambda = {lam} is not above (f + 1) ln 2 = {float(zero_gap(f)):.3f}")
    if not M - mu * (n + 1) > zero_gap(f):
        raise MarginError(f"counting_model: fetch-q gap {M - mu * (n + 1)} to a data number is not above "
                          f"(f + 1) ln 2")
    Kc = _count_code_bound(n, a)
    bounds = {"count scores": _count_match_bound(n, a, f), "fetch scores": _count_fetch_bound(n, f),
              "softmax normalisers": n + 4}
    need = max(bits_for(v) + 1 for v in bounds.values())
    if fmt.int_bits < need:
        raise MarginError(f"counting_model(n={n}, a={a}): {bounds} need {need} integer bits, "
                          f"{fmt.name} has {fmt.int_bits}")
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    s.embedded("pos", K.F_POS)
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.embedded("is_number", K.F_IS_NUM)
    s.embedded("thr", K.F_TOK_INV, Fraction(1, 2))     # 1/(tau + 1/2) = 1/(t + 3/2) for the number t
    for lab in ("after", "query_code", "query_code_sq", "frac"):
        s.hidden(lab)
    vocab = Vocab(max(n, a - 1, 1))
    b = Builder(f"counting(n={n},a={a})", "transformer", vocab, s, claim=CLAIM)
    b.max_positions = n + 4                   # [BOS] x_1..x_n [QUERY] q t
    gap = {"lambda": lam, "gap": lam, "zero_gap": float(zero_gap(f))}
    b.attention_layer([Head("after-query", [({"one": lam}, {"is_query": 2, "is_bos": 1})],
                            {"after": {"is_query": 1}}, gap)])
    b.attention_layer([Head("fetch-q", [({"one": M}, {"after": 1, "is_number": 1}), ({"one": -mu}, {"pos": 1})],
                            {"query_code": {"tok": 1}, "query_code_sq": {"tok_sq": 1}},
                            {"M": M, "mu": mu, "gap_q_t": mu, "gap_q_data": M - mu * (n + 1),
                             "zero_gap": float(zero_gap(f)), "score_int_bits": need})])
    count_score = [({"query_code": 2 * lam}, {"tok": 1}), ({"one": -lam}, {"tok_sq": 1}),
                   ({"query_code_sq": lam}, {"is_bos": 1}), ({"one": -lam}, {"after": 1})]
    b.attention_layer([Head("count", count_score, {"frac": {"is_bos": 1}},
                            dict(gap, comparison_gap=float(g), max_code=Kc, score_int_bits=need))])
    b.readout([("thr", K.F_IS_TOKEN, number_token(1), 1), ("frac", K.F_IS_TOKEN, number_token(0), 1)])
    return b.build(fmt)


# ----------------------------------------------------------------------------
# MQAR (per-position AR over raw ints)
def mqar_model(length: int, fmt: FixedFormat | None = None) -> Model:
    """Per-position AR over ``[BOS] r_1..r_L`` (r raw ints in [0, 2^16) as number
    tokens; vocabulary fixed at numbers 0..2^16-1): the next-token prediction at
    position t is the token after the first earlier occurrence of r_t, or [BOS]
    when r_t has not occurred before (mapped to -1 by :func:`mqar_predict`).

    Layer 1: shift head, ``prev`` / ``prev_sq`` = tau, tau^2 of the previous token.
    Layer 2: match head at every position t, query tau(r_t), over keys p <= t:
    score = lambda (2 q prev_p - prev_p^2) - mu p + [p is BOS] (lambda q^2 - nu).

    * a match (prev_p = q, i.e. r_{p-1} = r_t, p - 1 < t) scores lambda q^2 - mu p;
    * a non-match scores <= lambda q^2 - lambda - mu p (integer codes);
    * [BOS] (prev = 0 from the shift head attending to itself) scores lambda q^2 - nu.

    mu = sharpness(f) makes the earliest match win over later ones; nu = mu L +
    sharpness(f) puts [BOS] below every match (p <= L); lambda = nu + sharpness(f) puts
    every non-match below [BOS]. So the weight is exactly 1 on the first match, or
    on [BOS] if there is none; the head copies tau of that position: tau(r_p) = the
    answer, or tau([BOS]) = 0, and the nearest-code readout returns that token.
    p = t itself is a key: prev_t = r_{t-1}, so r_{t-1} = r_t (first) predicts r_t,
    as mqar_reference does. Integer bits for codes up to K = 2^16: see :data:`MQAR`.
    """
    L = _check_n(length, 1, "mqar_model")
    if L > MQAR_MAX_LENGTH:
        raise ValueError(f"mqar_model: length {L} exceeds the supported {MQAR_MAX_LENGTH}")
    fmt = fmt or MQAR.format(L)
    f = fmt.frac_bits
    s = base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    for lab in ("prev", "prev_sq", "answer"):
        s.hidden(lab)
    b = Builder(f"mqar(L={L})", "transformer", Vocab(MQAR_MAX_VALUE - 1), s, claim=CLAIM)
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"prev": {"tok": 1}, "prev_sq": {"tok_sq": 1}},
                                  fmt, n_positions=L + 1)])
    sh = sharpness(f)
    mu = sh
    nu = mu * L + sh
    lam = nu + sh
    if not (mu > zero_gap(f)):
        raise MarginError("later matches would keep weight (score gap not above (f + 1) ln 2)")
    if not (nu - mu * L > zero_gap(f)):
        raise MarginError("[BOS] would keep weight next to a match (score gap not above (f + 1) ln 2)")
    if not (lam - nu > zero_gap(f)):
        raise MarginError("a non-match would keep weight next to [BOS] (score gap not above (f + 1) ln 2)")
    Kc = MQAR_MAX_VALUE
    B = lam * 3 * Kc * Kc + mu * L + nu
    need = bits_for(B) + 1
    if fmt.int_bits < need:
        raise MarginError(f"mqar match: scores up to {B} need {need} integer bits, {fmt.name} has {fmt.int_bits}")
    head = Head("first-match-or-bos",
                [({"tok": 2 * lam}, {"prev": 1}), ({"one": -lam}, {"prev_sq": 1}), ({"one": -mu}, {"pos": 1}),
                 ({"tok_sq": lam, "one": -nu}, {"is_bos": 1})],
                {"answer": {"tok": 1}},
                {"lambda": lam, "mu": mu, "nu": nu, "zero_gap": float(zero_gap(f)), "score_int_bits": need})
    b.attention_layer([head])
    number_readout(b, "answer")
    b.notes["max_length"] = L
    b.max_positions = L + 1                   # [BOS] then the L raw values
    return b.build(fmt)


# --- exact fast readout for the nearest-code formula ------------------------
def predict_all_positions(model: Model, tokens: np.ndarray, lengths: np.ndarray | None = None,
                          fast: bool = True) -> np.ndarray:
    """Next-token predictions at every position, (B, N) (-1 past each length);
    ``model.predict_batch(tokens, lengths, all_positions=True)``, with the exact
    nearest-code readout (:func:`constructions.kernels.nearest_code_readout`) when
    ``fast`` and the model's readout is that formula (``model.nearest_code_dim``)."""
    readout = "nearest_code" if fast and model.nearest_code_dim >= 0 else "table"
    return model.predict_batch(tokens, lengths, all_positions=True, readout=readout)


def mqar_tokens(X: np.ndarray) -> np.ndarray:
    """Raw ints (B, L) -> tokens (B, L + 1): [BOS] then number tokens."""
    X = np.asarray(X, dtype=np.int64)
    return np.concatenate([np.full((X.shape[0], 1), BOS, dtype=np.int64), X + NUMBER_BASE], axis=1)


def validate_mqar_inputs(X) -> np.ndarray:
    """ValueError with one clear line unless X is a 2-D integer array with values
    in [0, 2^16) and length 1..4096."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"inputs must be a 2-D (batch, length) array, got shape {X.shape}")
    if X.dtype == bool or not np.issubdtype(X.dtype, np.integer):
        raise ValueError(f"inputs must hold integers, got dtype {X.dtype}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"inputs must have at least one row and one column, got shape {X.shape}")
    if X.shape[1] > MQAR_MAX_LENGTH:
        raise ValueError(f"sequence length {X.shape[1]} exceeds the supported {MQAR_MAX_LENGTH}")
    lo, hi = int(X.min()), int(X.max())
    if lo < 0 or hi >= MQAR_MAX_VALUE:
        bad = lo if lo < 0 else hi
        b, t = map(int, np.argwhere(X == bad)[0])
        raise ValueError(f"value {bad} at [{b}, {t}] is outside [0, {MQAR_MAX_VALUE})")
    return X.astype(np.int64)


def mqar_predict(X, model: Model | None = None, fast: bool = True) -> np.ndarray:
    """Per-position AR predictions (B, L) int64 for raw ints X (B, L): the value
    after the first earlier occurrence of X[b, t], or -1 (the model read out [BOS])."""
    X = validate_mqar_inputs(X)
    L = X.shape[1]
    model = model or mqar_model(L)
    if L > model.spec.notes.get("max_length", 0):
        raise ValueError(f"{model.name} was built for sequences of length <= {model.spec.notes.get('max_length')}, "
                         f"got {L} (its tie-break margins are derived from the length)")
    toks = mqar_tokens(X)
    P = predict_all_positions(model, toks, fast=fast)[:, 1:]
    out = np.where(P == BOS, -1, P - NUMBER_BASE)
    odd = (P != BOS) & (P < NUMBER_BASE)
    if odd.any():
        b, t = map(int, np.argwhere(odd)[0])
        raise RuntimeError(f"{model.name}: predicted special token {int(P[b, t])} at [{b}, {t}]")
    return out.astype(np.int64)


# ----------------------------------------------------------------------------
BUILDERS = {
    "index": lambda n, a=2, c=2, fmt=None: index_model(n, a, fmt),
    "ar": lambda n, a=4, c=2, fmt=None: ar_model(n, a, fmt),
    "cgram": lambda n, a=2, c=3, fmt=None: cgram_model(n, a, c, fmt),
    "counting": lambda n, a=3, c=2, fmt=None: counting_model(n, a, fmt),
}
"""Uniform signature (n, a, c, fmt) -> Model, used by the checks and the frontier."""
