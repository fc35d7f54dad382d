"""Constant-size Transformers for Index, AR, c-gram retrieval, Counting and
per-position AR (MQAR): the positive half of claim T4.6-up.

Every model is built from the named gadgets of :mod:`constructions.build.gadgets`. Its
architecture is one for all n and all alphabets: tokens enter only through fixed
code formulas (tau, tau^2, 1/(tau + 1/2), named specials), and n and the alphabet
only through lambda, position features and the declared bits; only c-gram's c is
part of the architecture. The declarations :data:`INDEX`, :data:`AR`,
:data:`CGRAM`, :data:`COUNTING`, :data:`MQAR` give I(n) and f(n). Index, AR,
c-gram and MQAR use weights of exactly 0 or 1 and a constant f; Counting needs
O(log n) fraction bits and runs in two-limb storage past
:data:`COUNTING_MAX_N`, up to :data:`COUNTING_WIDE_MAX_N`.

Example::

    >>> m = ar_transformer(8, alphabet=3)
    >>> m.predict([0, 34, 32, 34, 33, 32, 32, 33, 34, 9, 32])  # x = 2 0 2 1 0 0 1 2, q = 0: the token after the first 0
    34

Details (instances, layers, precision): docs/internals/models.md#retrieval
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np
import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import MAX_MAGNITUDE_BITS, MAX_WIDE_MAGNITUDE_BITS, log2_ceil
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    base_space, count_head, number_readout, require, Builder, Component, Head, ResidualSpace,
    match_head, shift_head,
)
from rnngap.constructions.build.num import (
    as_float, bits_for, exact, is_sym, pow2, sharpness, smax, smin, zero_gap,
)
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import (
    BOS, NUMBER_BASE, QUERY, SPECIAL_NAMES, Vocab, number_token, token_from_code,
)

CLAIM = "T4.6-up"
MQAR_MAX_LENGTH = 4096

# ----------------------------------------------------------------------------
# declarations: written once in constructions/models/bounds.py (the bounds the gadgets
# assert, in closed form); re-exported here so the builders read the same names.
from .bounds import (
    AR, CGRAM, COUNTING, INDEX, MQAR, MQAR_MAX_VALUE, RETRIEVAL as DECLARED, RETRIEVAL_FRAC_BITS,
    SPECIAL_MIN_CODE, A, C, Declared, N, backend_of, largest, count_code_bound as _ccb,
    count_fetch_bound as _cfb, count_match_bound as _cmb,
    count_compare_inverse_gap as _count_inv_gap, mqar_match_bound as _mqar_match_bound,
)


def counting_max_n(alphabet: Callable[[int], int] | int | None = None, wide: bool = False) -> int:
    """The largest n whose declared Counting format fits int64 storage
    (I(n, a) + f(n) <= 62), with the alphabet a = ``alphabet(n)`` (a callable),
    a fixed int, or None for a = n + 1 (the Index -> Counting reduction's marks
    0..n). I + f grows with n, so a binary search finds it. ``wide``: the largest
    n the two-limb executor runs (I + f <= 126)."""
    alpha = (lambda n: n + 1) if alphabet is None else (alphabet if callable(alphabet) else (lambda n: int(alphabet)))
    if wide:
        fits = lambda n: COUNTING.int_bits(n, alpha(n)) + COUNTING.frac_bits(n) <= MAX_WIDE_MAGNITUDE_BITS
    else:
        fits = lambda n: COUNTING.int_bits(n, alpha(n)) + COUNTING.frac_bits(n) <= MAX_MAGNITUDE_BITS
    return largest(fits, 1) or 0


COUNTING_MAX_N = counting_max_n()
"""The largest n whose declared Counting format fits int64 at alphabet n + 1 (the
reduction's alphabet); larger n run in two-limb storage."""
COUNTING_WIDE_MAX_N = counting_max_n(wide=True)
"""The largest n the two-limb executor runs Counting at alphabet n + 1:
:func:`counting_transformer` refuses larger n (with that alphabet or a larger
one) with a clear error."""


# ----------------------------------------------------------------------------
def _check_n(n: int, minimum: int, what: str) -> int:
    """n as an int (a symbolic n of a symbolic build passes as it is: constructions/build/num.py)."""
    if is_sym(n):
        return n
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < minimum:
        raise ValueError(f"{what}: n must be an integer >= {minimum}, got {n!r}")
    return int(n)


def _check_alphabet(a: int, what: str) -> int:
    if is_sym(a):
        return a
    if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or a < 1:
        raise ValueError(f"{what}: alphabet must be an integer >= 1, got {a!r}")
    return int(a)


# ----------------------------------------------------------------------------
# Index
def index_transformer(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] i`` -> x_i, one attention layer (T4.6-up).

    The match head of :func:`constructions.models.demos.position_match_transformer`, for any alphabet:
    the query is tau(i) = i + 1 (the last token), the key of position j is j + 1, so
    score = lambda (2 (i+1)(j+1) - (j+1)^2) peaks exactly at j = i, every other
    position >= lambda lower (lambda = sharpness(f) > (f + 1) ln 2: weight exactly 0);
    the head copies tau(x_i) into ``answer``, read out by the nearest-code formula.
    [BOS] (key 1), [QUERY] (key n + 2) and i itself (key n + 3) never match since
    2 <= i + 1 <= n + 1. Weights: width 7, one head.
    """
    n = _check_n(n, 1, "index_transformer")
    a = _check_alphabet(alphabet, "index_transformer")
    fmt = fmt or INDEX.format(n, a)
    code_bound = smax(n + 1, a, -SPECIAL_MIN_CODE)         # |tau| of any token of the vocabulary
    s = base_space()
    s.hidden("answer", bound=code_bound)
    b = Builder(f"index(n={n},a={a})", "transformer", Vocab(smax(n, a - 1)), s, claim=CLAIM, bounded=True)
    b.max_positions = n + 3                   # [BOS] x_1..x_n [QUERY] i
    position = Component(query={"tok": 1}, key={"pos": 1, "one": 1}, key_sq={"pos_sq": 1, "pos": 2, "one": 1},
                         max_query=code_bound, max_key=smax(n + 3, a, -SPECIAL_MIN_CODE))
    b.attention_layer([match_head("index", components=[position], copy={"answer": {"tok": 1}}, fmt=fmt)])
    number_readout(b, "answer")
    return b.build(fmt)


# ----------------------------------------------------------------------------
# c-gram retrieval (AR is c = 2)
def cgram_transformer(n: int, *, alphabet: int = 2, c: int = 3, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q_1..q_{c-1}`` -> the token after the first
    occurrence of the gram q (T4.6-up). Two attention layers.

    Layer 1: c - 1 shift heads; head k copies tau and tau^2 of the token k
    positions back into ``prev_k``, ``prev_k_sq`` at every position (position j < k
    gets [BOS], tau = 0). Layer 2: :func:`~constructions.build.gadgets.match_head` (one
    component per gram token, first-occurrence tie-break) at the last position
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
    c = int(c)          # the gram length is part of the architecture: always an integer
    if c < 2:
        raise ValueError(f"cgram_transformer: c must be >= 2, got {c}")
    n = _check_n(n, c, f"cgram_transformer (c = {c})")
    a = _check_alphabet(alphabet, "cgram_transformer")
    decl = AR if c == 2 else CGRAM
    fmt = fmt or decl.format(n, a, c)
    code_bound = smax(a, -SPECIAL_MIN_CODE)                # |tau| of any token of Vocab(a - 1)
    s = base_space()
    for k in range(1, c):
        s.hidden(f"prev_{k}", bound=code_bound)
        s.hidden(f"prev_{k}_sq", bound=code_bound ** 2)
    s.hidden("answer", bound=code_bound)
    name = "ar" if c == 2 else f"cgram(c={c})"
    b = Builder(f"{name}(n={n},a={a})", "transformer", Vocab(a - 1), s, claim=CLAIM, bounded=True)
    npos = n + c + 1
    b.max_positions = npos                    # [BOS] x_1..x_n [QUERY] q_1..q_{c-1}
    b.attention_layer([shift_head(f"shift_{k}", "pos", "pos_sq", "one",
                                  {f"prev_{k}": {"tok": 1}, f"prev_{k}_sq": {"tok_sq": 1}}, fmt,
                                  n_positions=npos, shift=k) for k in range(1, c)])
    # gram token q_{c-1} is the last token, q_{c-k} is prev_{k-1}; matched against prev_1..prev_{c-1}
    gram = ["tok"] + [f"prev_{k - 1}" for k in range(2, c)]
    components = [Component(query={q: 1}, key={f"prev_{k}": 1}, key_sq={f"prev_{k}_sq": 1},
                            max_query=code_bound, max_key=code_bound) for k, q in enumerate(gram, start=1)]
    b.attention_layer([match_head("match", components=components, copy={"answer": {"tok": 1}}, fmt=fmt,
                                  n_positions=npos, tie_break="first")])
    number_readout(b, "answer")
    b.notes["c"] = c
    return b.build(fmt)


def ar_transformer(n: int, *, alphabet: int = 4, fmt: FixedFormat | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q`` -> x_{j+1}, j the first occurrence of q (T4.6-up).

    Layer 1: the shift head copies tau and tau^2 of the previous token into
    ``prev_1`` / ``prev_1_sq`` at every position. Layer 2: a match head with
    first-occurrence tie-break compares tau(q) (the last token) with ``prev_1`` of
    every position p and copies tau(x_p). The positions after the data cannot win:
    [QUERY] at n + 1 carries prev = x_n, which may equal q, but the promise gives a
    first occurrence j <= n - 1, i.e. a match at p = j + 1 <= n, earlier, and the
    tie-break makes the earliest match's weight exactly 1; q itself at n + 2
    carries prev = [QUERY] (tau = -9 != tau(q) >= 1). This is :func:`cgram_transformer`
    with c = 2.
    """
    return cgram_transformer(n, alphabet=alphabet, c=2, fmt=fmt)


# ----------------------------------------------------------------------------
# Counting
def _counting_format(n: int, a: int) -> FixedFormat:
    """The declared Counting format: int64 storage where I + f <= 62, two limbs
    beyond (constructions/machine/wide_exec.py); ValueError past the two-limb executor
    (I + f > 126)."""
    if is_sym(n) or is_sym(a):
        return COUNTING.format(n, a)          # a symbolic build: the storage is not part of the model
    I_d, f_d = COUNTING.int_bits(n, a), COUNTING.frac_bits(n)
    if I_d + f_d > MAX_WIDE_MAGNITUDE_BITS:
        raise ValueError(f"counting_transformer: n = {n} at alphabet {a} needs the declared format Q{I_d}.{f_d}: "
                         f"beyond the two-limb executor (I + f <= {MAX_WIDE_MAGNITUDE_BITS}); the largest n at "
                         f"alphabet n + 1 is {COUNTING_WIDE_MAX_N}")
    return COUNTING.format(n, a)             # int64 storage up to I + f = 62, two limbs beyond


def _counting_margins(n: int, a: int, fmt: FixedFormat, check_margins: bool = True) -> dict:
    """lambda, mu, M of :func:`counting_transformer`, its margins checked (see its docstring)."""
    f = fmt.frac_bits
    B = backend_of(n, a, f)
    lam = sharpness(f)
    g = exact(1) / _count_inv_gap(B, n)           # the declared comparison gap (bounds.py)
    if check_margins:
        require(g > exact(1) / pow2(f),
                f"counting_transformer(n={n}): the gap {g} between 1/(c+1) and 1/(t+3/2) is not above the "
                f"rounding error 2^-{f}; needs 2^f > {1 / g}")
    mu = lam
    M = mu * (n + 2) + lam
    require(lam > zero_gap(f), f"counting_transformer: lambda = {lam} is not above (f + 1) ln 2 = "
                               f"{as_float(zero_gap(f))}")
    require(M - mu * (n + 1) > zero_gap(f),
            f"counting_transformer: fetch-q gap {M - mu * (n + 1)} to a data number is not above (f + 1) ln 2")
    bounds = {"count scores": _cmb(B, n, a, f), "fetch scores": _cfb(B, n, f), "softmax normalisers": n + 4}
    need = smax(*[bits_for(v) + 1 for v in bounds.values()])
    require(fmt.int_bits >= need, f"counting_transformer(n={n}, a={a}): {bounds} need {need} integer bits, "
                                  f"{fmt.name} has {fmt.int_bits}")
    return {"lambda": lam, "mu": mu, "M": M, "comparison_gap": g, "need": need, "max_code": _ccb(B, n, a),
            "count_bound": bounds["count scores"]}


def _counting_space(max_code: int) -> ResidualSpace:
    s = ResidualSpace()
    for label, kind, param in (("one", K.F_ONE, 0), ("tok", K.F_TOK, 0), ("tok_sq", K.F_TOK_SQ, 0),
                               ("pos", K.F_POS, 0), ("is_bos", K.F_IS_TOKEN, BOS), ("is_query", K.F_IS_TOKEN, QUERY),
                               ("is_number", K.F_IS_NUM, 0),
                               ("thr", K.F_TOK_INV, Fraction(1, 2))):    # 1/(tau + 1/2) = 1/(t + 3/2), number t
        s.embedded(label, kind, param)
    s.hidden("after", bound=1)                         # [at or after [QUERY]]
    s.hidden("query_code", bound=max_code)             # tau(q) (an average of codes before [QUERY])
    s.hidden("query_code_sq", bound=max_code ** 2)
    s.hidden("frac", bound=1)                          # round(1/(c+1))
    return s


def counting_transformer(n: int, *, alphabet: int = 3, fmt: FixedFormat | None = None,
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
    alphabet n + 1; larger n run in two-limb storage (the two-limb executor: the
    same numbers, every score computed) up to :data:`COUNTING_WIDE_MAX_N`, and
    are refused beyond.

    Example (n = 4, a = 3)::

        >>> m = counting_transformer(4, alphabet=3)
        >>> m.predict([0, 34, 32, 34, 33, 9, 34, 33])   # x = 2 0 2 1, q = 2, t = 1: 2 occurs twice > 1
        33
    """
    n = _check_n(n, 1, "counting_transformer")
    a = _check_alphabet(alphabet, "counting_transformer")
    fmt = fmt or _counting_format(n, a)
    c = _counting_margins(n, a, fmt, check_margins)
    b = Builder(f"counting(n={n},a={a})", "transformer", Vocab(smax(n, a - 1, 1)), _counting_space(c["max_code"]),
                claim=CLAIM, bounded=True)
    b.max_positions = n + 4                   # [BOS] x_1..x_n [QUERY] q t
    lam, mu, M = c["lambda"], c["mu"], c["M"]
    gap = {"lambda": lam, "gap": lam, "zero_gap": as_float(zero_gap(fmt.frac_bits))}
    b.attention_layer([Head("after-query", [({"one": lam}, {"is_query": 2, "is_bos": 1})],
                            {"after": {"is_query": 1}}, gap, gap=lam)])
    b.attention_layer([Head("fetch-q", [({"one": M}, {"after": 1, "is_number": 1}), ({"one": -mu}, {"pos": 1})],
                            {"query_code": {"tok": 1}, "query_code_sq": {"tok_sq": 1}},
                            {"M": M, "mu": mu, "gap_q_t": mu, "gap_q_data": M - mu * (n + 1),
                             "zero_gap": gap["zero_gap"], "score_int_bits": c["need"]},
                            gap=smin(mu, M - mu * (n + 1)))])
    count = count_head("count", {"query_code": 1}, {"query_code_sq": 1}, {"tok": 1}, {"tok_sq": 1}, "one",
                       {"is_bos": 1}, "is_bos", "frac", fmt, max_key=c["max_code"], n=n, push_down={"after": 1},
                       square_row="bos", score_bound=c["count_bound"])
    b.attention_layer([count])
    b.readout([("thr", K.F_IS_TOKEN, number_token(1), 1), ("frac", K.F_IS_TOKEN, number_token(0), 1)])
    return b.build(fmt)


# ----------------------------------------------------------------------------
# MQAR (per-position AR over raw ints)
def mqar_transformer(length: int, fmt: FixedFormat | None = None) -> Model:
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
    L = _check_n(length, 1, "mqar_transformer")
    if not is_sym(L) and L > MQAR_MAX_LENGTH:     # (a symbolic build's record states the same domain)
        raise ValueError(f"mqar_transformer: length {L} exceeds the supported {MQAR_MAX_LENGTH}")
    fmt = fmt or MQAR.format(L)
    max_code = MQAR_MAX_VALUE                # |tau| of every token (numbers 0..2^16-1; specials <= 9)
    s = base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.hidden("prev", bound=max_code)
    s.hidden("prev_sq", bound=max_code ** 2)
    s.hidden("answer", bound=max_code)
    b = Builder(f"mqar(L={L})", "transformer", Vocab(MQAR_MAX_VALUE - 1), s, claim=CLAIM, bounded=True)
    b.max_positions = L + 1                   # [BOS] then the L raw values
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"prev": {"tok": 1}, "prev_sq": {"tok_sq": 1}},
                                  fmt, n_positions=L + 1)])
    # match_head's tight "first" variant: mu = s between matches, nu = mu L + s puts [BOS]
    # below every match (p <= L), lambda = nu + s every non-match below [BOS]; the
    # declared score bound (bounds.mqar_match_bound) uses that [BOS]'s key is 0
    value = Component({"tok": 1}, {"prev": 1}, {"prev_sq": 1}, max_code, max_code, query_sq={"tok_sq": 1})
    B = backend_of(L, fmt.frac_bits)
    require(max_code <= MQAR_MAX_VALUE, f"mqar: codes up to {max_code} exceed the declared {MQAR_MAX_VALUE}")
    b.attention_layer([match_head("first-match-or-bos", components=[value], copy={"answer": {"tok": 1}}, fmt=fmt,
                                  n_positions=L + 1, tie_break="first", fallback="bos", tight=True,
                                  score_bound=_mqar_match_bound(B, L, fmt.frac_bits))])
    number_readout(b, "answer")
    b.notes["max_length"] = L
    return b.build(fmt)


# --- exact fast readout for the nearest-code formula ------------------------
def predict_all_positions(model: Model, tokens: np.ndarray, lengths: np.ndarray | None = None,
                          fast: bool = True) -> np.ndarray:
    """Next-token predictions at every position, (B, N) (-1 past each length);
    ``model.predict_batch(tokens, lengths, all_positions=True)``, with the exact
    nearest-code readout (:func:`constructions.machine.readouts.nearest_code_readout`) when
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
    model = model or mqar_transformer(L)
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
