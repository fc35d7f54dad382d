"""Small test models built from the gadgets, and plain-Python references for them.

Used by tests/test_gadgets.py and tests/test_executors.py (and run as a script,
under NUMBA_DISABLE_JIT=1, by the executor test that compares the pure-Python
path with the JIT path). Nothing here is code under test: the references use
ints and Fractions only, never the kernels.

Every builder takes the format explicitly; ``*_int_bits(f, ...)`` helpers give
the integer bits the model's gadgets declare for that f (the smallest I at which
the gadgets do not raise :class:`MarginError`, plus what the rest of the model
needs), so tests can build exactly at, above and below the declaration.
"""
from __future__ import annotations

import json
import sys
from fractions import Fraction
from typing import Sequence

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    Builder, Component, MarginError, ResidualSpace, count_compare_neurons, count_head, equality_neurons, match_head,
    shift_head, step_neurons,
)
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import BOS, EOS, NUMBER_BASE, QUERY, SPECIAL_TOKENS, Vocab, number_token

DASH = SPECIAL_TOKENS["-"]
TILDE = SPECIAL_TOKENS["~"]
SPECIALS_IN_DATA = (EOS, DASH, TILDE, QUERY)   # tau = -1, -7, -8, -9


# ----------------------------------------------------------------------------
# plain-Python helpers (independent of the code under test)
def tau(tok: int) -> int:
    """tau(number k) = k + 1, tau(special s) = -s (docs/conventions.md)."""
    tok = int(tok)
    return tok - NUMBER_BASE + 1 if tok >= NUMBER_BASE else -tok


def round_grid(x: Fraction, f: int) -> Fraction:
    """x rounded to the grid 2^-f, half to even (Fraction.__round__ is half-even)."""
    return Fraction(round(Fraction(x) * (1 << f)), 1 << f)


def ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


def f_default(n: int) -> int:
    """f(n) = 2 ceil(log2(n + 1)) (docs/theory.md §1's example)."""
    return 2 * ceil_log2(n + 1)


def smallest_ok(make, lo: int = 1, hi: int = 60) -> int:
    """Smallest I in [lo, hi] for which ``make(I)`` does not raise MarginError
    (``make`` must be monotone in I)."""
    for I in range(lo, hi + 1):
        try:
            make(I)
        except MarginError:
            continue
        return I
    raise AssertionError("no integer-bit count in range satisfies the gadget")


def random_tokens(rng: np.random.Generator, length: int, alphabet: Sequence[int]) -> list[int]:
    """[BOS] followed by ``length`` tokens drawn uniformly from ``alphabet``."""
    alph = np.asarray(alphabet, dtype=np.int64)
    return [BOS] + [int(t) for t in alph[rng.integers(0, len(alph), size=length)]]


def _space(*features: tuple[str, int] | tuple[str, int, object]) -> ResidualSpace:
    s = ResidualSpace()
    for feat in features:
        s.embedded(*feat)
    return s


def tau_readout(b: Builder, direction: str) -> None:
    """Predict the token whose tau is nearest ``direction``: logit(k) = 2 tau_k v - tau_k^2."""
    b.readout([(direction, K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])


# ----------------------------------------------------------------------------
# match head, two variants
#   "tok":   query tau(token_i), key tau(token_j)  (AR-like: repeated keys)
#   "index": query tau(token_i), key j + 1        (Index-like: unique keys)
MATCH_ALPHABET = tuple(number_token(k) for k in range(9)) + SPECIALS_IN_DATA   # |tau| <= 9


def index_alphabet(n: int) -> tuple[int, ...]:
    return tuple(number_token(k) for k in range(n)) + SPECIALS_IN_DATA


def match_model(n: int, fmt: FixedFormat, variant: str = "tok", first: bool = False) -> tuple:
    """One attention layer, one match head. Sequences are [BOS] + n tokens
    (positions 0..n). Returns (model, head)."""
    feats = [("one", K.F_ONE), ("tok", K.F_TOK), ("tok_sq", K.F_TOK_SQ), ("pos", K.F_POS)]
    if variant == "index":
        feats.append(("pos_sq", K.F_POS_SQ))
    s = _space(*feats)
    s.hidden("at")
    s.hidden("val")
    copy = {"at": {"pos": 1}, "val": {"tok": 1}}
    order = dict(tie_break="first", n_positions=n + 1) if first else {}
    if variant == "tok":
        vocab = Vocab(8)
        comp = Component({"tok": 1}, {"tok": 1}, {"tok_sq": 1}, max_query=9, max_key=9)
    elif variant == "index":
        vocab = Vocab(max(n - 1, 0))
        comp = Component({"tok": 1}, {"pos": 1, "one": 1}, {"pos_sq": 1, "pos": 2, "one": 1},
                         max_query=max(n, 9), max_key=n + 1)
    else:
        raise ValueError(variant)
    head = match_head("match", components=[comp], copy=copy, fmt=fmt, **order)
    b = Builder(f"match-{variant}(n={n}, first={first})", "transformer", vocab, s, claim="gadgets")
    b.attention_layer([head])
    tau_readout(b, "val")
    return b.build(fmt), head


def match_int_bits(n: int, f: int, variant: str = "tok", first: bool = False) -> int:
    """Integer bits the match head declares for (n, f); at least enough for the
    other values of the model (pos^2 <= n^2, the softmax normaliser <= n + 1)."""
    need = smallest_ok(lambda I: match_model(n, FixedFormat(I, f), variant, first))
    other = (n * n).bit_length() if variant == "index" else (n + 1).bit_length()
    return max(need, other + 1)


def match_reference(tokens: Sequence[int], f: int, variant: str, first: bool) -> list[dict]:
    """Per position i: exact attention weights {j: w} (nonzero only) and the
    residual values at, val."""
    out = []
    for i in range(len(tokens)):
        q = tau(tokens[i])
        if variant == "tok":
            matches = [j for j in range(i + 1) if tau(tokens[j]) == q]     # always contains i
        else:
            # keys j + 1 for j = 0..i, all distinct: the nearest key to q is unique
            matches = [min(max(q - 1, 0), i)]
        if first:
            matches = matches[:1]
        w = round_grid(Fraction(1, len(matches)), f)
        out.append({"weights": {j: w for j in matches},
                    "at": sum(w * j for j in matches),
                    "val": sum(w * tau(tokens[j]) for j in matches)})
    return out


# ----------------------------------------------------------------------------
# shift head
def shift_model(n: int, fmt: FixedFormat, shift: int = 1) -> tuple:
    """One shift head over positions 0..n (sequences [BOS] + n tokens)."""
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK), ("tok_sq", K.F_TOK_SQ), ("pos", K.F_POS),
               ("pos_sq", K.F_POS_SQ))
    s.hidden("prev")
    s.hidden("prev_pos")
    head = shift_head("shift", "pos", "pos_sq", "one", {"prev": {"tok": 1}, "prev_pos": {"pos": 1}}, fmt,
                      n_positions=n + 1, shift=shift)
    b = Builder(f"shift{shift}(n={n})", "transformer", Vocab(8), s, claim="gadgets")
    b.attention_layer([head])
    tau_readout(b, "prev")
    return b.build(fmt), head


def shift_int_bits(n: int, f: int, shift: int = 1) -> int:
    need = smallest_ok(lambda I: shift_model(n, FixedFormat(I, f), shift))
    return max(need, (n * n).bit_length() + 1)


# ----------------------------------------------------------------------------
# BOS counting head + comparison MLP
COUNT_QUERY = TILDE   # the fixed query token q0 (tau = -8); thresholds are numbers


def count_model(n: int, fmt: FixedFormat, max_number: int | None = None) -> Model:
    """Count head with the fixed query q0 = '~' over positions 0..i, then
    gt = [c > t] with t the number at the current position. Readout: number 1
    if gt else number 0."""
    m = n if max_number is None else max_number
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK), ("tok_sq", K.F_TOK_SQ), ("is_bos", K.F_IS_TOKEN, BOS),
               ("thr", K.F_TOK_INV, Fraction(1, 2)))
    s.hidden("frac")
    s.hidden("gt")
    q = tau(COUNT_QUERY)
    head = count_head("count", query={"one": q}, query_sq={"one": q * q}, key={"tok": 1}, key_sq={"tok_sq": 1},
                      one="one", not_bos={"one": 1, "is_bos": -1}, bos_flag="is_bos", out="frac", fmt=fmt,
                      max_key=max(m + 1, 9), n=n)
    b = Builder(f"count(n={n})", "transformer", Vocab(m), s, claim="gadgets")
    b.attention_layer([head], mlp=count_compare_neurons("frac", "thr", "gt", n, fmt))
    b.readout([("gt", K.F_IS_TOKEN, number_token(1), 2), ("one", K.F_IS_TOKEN, number_token(0), 1)])
    return b.build(fmt)


def count_min_frac_bits(n: int) -> int:
    """Smallest f with 2^-f < 1/(2 (n+1)(n+3/2)) = 1/((n+1)(2n+3)), derived here
    from the gap of 1/(c+1) and 1/(t+3/2) for 0 <= c, t <= n."""
    g = (n + 1) * (2 * n + 3)
    f = 0
    while (1 << f) <= g:
        f += 1
    return f


def count_int_bits(n: int, f: int) -> int:
    return smallest_ok(lambda I: count_model(n, FixedFormat(I, f)))


def count_tokens(rng: np.random.Generator, n: int) -> list[int]:
    """[BOS] + n tokens: q0 with probability 1/2, else a number t within 1 of the
    current count (so c = t and c = t + 1 both occur), clipped to 0..n."""
    toks, c = [BOS], 0
    for _ in range(n):
        if rng.random() < 0.5:
            toks.append(COUNT_QUERY)
            c += 1
        else:
            t = int(min(max(c + int(rng.integers(-1, 2)), 0), n))
            toks.append(number_token(t))
    return toks


def count_reference(tokens: Sequence[int], f: int) -> list[dict]:
    """Per position: c = #{1 <= j <= i: token_j = q0}, frac = round(1/(c+1)),
    gt = [c > t] when the current token is the number t (else None)."""
    out, c = [], 0
    for i, tok in enumerate(tokens):
        if i >= 1 and tok == COUNT_QUERY:
            c += 1
        t = tok - NUMBER_BASE if tok >= NUMBER_BASE else None
        out.append({"c": c, "frac": round_grid(Fraction(1, c + 1), f),
                    "thr": None if t is None else round_grid(1 / (t + Fraction(3, 2)), f),
                    "gt": None if t is None else int(c > t)})
    return out


# ----------------------------------------------------------------------------
# MLP gadgets in a head-less attention layer
def mlp_model(fmt: FixedFormat, max_number: int, neurons_for, labels: Sequence[str]) -> Model:
    """Embedding one, tok, pos, is_num; one attention layer with no heads whose
    MLP is ``neurons_for()``; ``labels`` are the MLP's output directions."""
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK), ("pos", K.F_POS), ("is_num", K.F_IS_NUM))
    for lab in labels:
        s.hidden(lab)
    b = Builder("mlp-gadgets", "transformer", Vocab(max_number), s, claim="gadgets")
    b.attention_layer([], mlp=neurons_for())
    b.readout([(labels[0], K.F_IS_TOKEN, number_token(1), 1)])   # small logits: never the bottleneck
    return b.build(fmt)


# ----------------------------------------------------------------------------
# AR transformer (two layers): shift head, then first-occurrence match head
def ar_transformer(n: int, fmt: FixedFormat) -> Model:
    """At position i: the token after the first j-1 with token_{j-1} = token_i
    (position 0's 'previous token' is [BOS] itself). Sequences up to n + 1 tokens."""
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK), ("tok_sq", K.F_TOK_SQ), ("pos", K.F_POS),
               ("pos_sq", K.F_POS_SQ))
    for lab in ("prev", "prev_sq", "ans"):
        s.hidden(lab)
    b = Builder(f"ar(n={n})", "transformer", Vocab(8), s, claim="tests")
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"prev": {"tok": 1}, "prev_sq": {"tok_sq": 1}},
                                  fmt, n_positions=n + 1)])
    b.attention_layer([match_head("ar", components=[Component({"tok": 1}, {"prev": 1}, {"prev_sq": 1}, 9, 9)],
                                  copy={"ans": {"tok": 1}}, fmt=fmt, n_positions=n + 1, tie_break="first")])
    tau_readout(b, "ans")
    return b.build(fmt)


def ar_format(n: int) -> FixedFormat:
    f = f_default(n)
    need = max(smallest_ok(lambda I: ar_transformer(n, FixedFormat(I, f))), (n * n).bit_length() + 1)
    return FixedFormat(need, f)


def ar_reference(tokens: Sequence[int]) -> list[int | None]:
    """Per position the answer token, or None where no key matches (not exact there)."""
    out = []
    for i in range(len(tokens)):
        prev = [tokens[max(j - 1, 0)] for j in range(i + 1)]
        js = [j for j in range(i + 1) if prev[j] == tokens[i]]
        out.append(tokens[js[0]] if js else None)
    return out


def ar_instance(rng: np.random.Generator, n: int) -> list[int]:
    """[BOS] + n - 1 data tokens + a query token that occurs among the first
    n - 2 data tokens (so the answer is defined)."""
    data = [int(t) for t in np.asarray(MATCH_ALPHABET)[rng.integers(0, len(MATCH_ALPHABET), size=n - 1)]]
    q = data[int(rng.integers(0, n - 2))]
    return [BOS] + data + [q]


# ----------------------------------------------------------------------------
# linear RNN: counter, running sum, halving sum; MLP compares; second layer counts
RNN_ALPHABET = (number_token(0), number_token(1), number_token(2), DASH)   # tau 1, 2, 3, -7


def counter_rnn(fmt: FixedFormat) -> Model:
    """Layer 1: c_t = c_{t-1} + 1, s_t = s_{t-1} + tau_t, d_t = d_{t-1}/2 + tau_t;
    x += (cnt, sum, dec) = (c, s, d); MLP: eq = [cnt == sum], gt = [sum > cnt].
    Layer 2: e_t = e_{t-1} + eq_t; x += neq = e.
    Readout: number 1 if eq, number 2 if gt, else number 0."""
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK))
    for lab in ("cnt", "sum", "dec", "eq", "gt", "neq"):
        s.hidden(lab)
    b = Builder("counter-rnn", "linear_rnn", Vocab(2), s, claim="tests")
    b.rnn_layer(["c", "s", "d"],
                A={("c", "c"): 1, ("s", "s"): 1, ("d", "d"): Fraction(1, 2)},
                B={("c", "one"): 1, ("s", "tok"): 1, ("d", "tok"): 1},
                C={("cnt", "c"): 1, ("sum", "s"): 1, ("dec", "d"): 1},
                mlp=equality_neurons({"cnt": 1}, {"sum": 1}, "eq")
                + step_neurons({"sum": 1, "cnt": -1}, 0, 1, "gt"), name="counters")
    b.rnn_layer(["e"], A={("e", "e"): 1}, B={("e", "eq"): 1}, C={("neq", "e"): 1}, name="eq-counter")
    b.readout([("eq", K.F_IS_TOKEN, number_token(1), 2), ("gt", K.F_IS_TOKEN, number_token(2), 2),
               ("one", K.F_IS_TOKEN, number_token(0), 1)])
    return b.build(fmt)


RNN_FORMAT = FixedFormat(12, 4)


def counter_reference(tokens: Sequence[int], f: int) -> list[dict]:
    """Per position: the state (c, s, d, e) and the prediction, in Fractions."""
    c = s = d = e = Fraction(0)
    out = []
    for tok in tokens:
        c += 1
        s += tau(tok)
        d = round_grid(d / 2, f) + tau(tok)
        eq = int(c == s)
        gt = int(s > c)
        e += eq
        pred = number_token(1) if eq else number_token(2) if gt else number_token(0)
        out.append({"c": c, "s": s, "d": d, "e": e, "eq": eq, "gt": gt, "pred": pred})
    return out


# ----------------------------------------------------------------------------
# hybrid: an RNN computes p = i + 1 and p^2; one attention layer with a shift
# head (previous token) and a first-occurrence match head (on tau)
def prev_hybrid(n: int, fmt: FixedFormat) -> Model:
    """Positions 0..n. p_t = p_{t-1} + 1, q_t = q_{t-1} + 2 p_{t-1} + 1 (= p_t^2).
    Heads: prev = tau(token_{max(i-1, 0)}); first_at = 1 + first j with token_j = token_i.
    Readout: the token with tau = prev."""
    s = _space(("one", K.F_ONE), ("tok", K.F_TOK), ("tok_sq", K.F_TOK_SQ))
    for lab in ("p", "p_sq", "prev", "first_at"):
        s.hidden(lab)
    b = Builder(f"prev-hybrid(n={n})", "hybrid", Vocab(8), s, claim="tests")
    b.rnn_layer(["p", "q"], A={("p", "p"): 1, ("q", "q"): 1, ("q", "p"): 2}, B={("p", "one"): 1, ("q", "one"): 1},
                C={("p", "p"): 1, ("p_sq", "q"): 1}, name="positions")
    b.attention_layer([
        shift_head("prev", "p", "p_sq", "one", {"prev": {"tok": 1}}, fmt, n_positions=n + 1),
        match_head("first", components=[Component({"tok": 1}, {"tok": 1}, {"tok_sq": 1}, 9, 9)],
                   copy={"first_at": {"p": 1}}, fmt=fmt, n_positions=n + 2, tie_break="first", pos="p"),
    ])
    tau_readout(b, "prev")
    return b.build(fmt)


def hybrid_format(n: int) -> FixedFormat:
    f = f_default(n)
    need = max(smallest_ok(lambda I: prev_hybrid(n, FixedFormat(I, f))), ((n + 1) ** 2).bit_length() + 1)
    return FixedFormat(need, f)


def hybrid_reference(tokens: Sequence[int]) -> list[dict]:
    out = []
    for i, tok in enumerate(tokens):
        j_first = min(j for j in range(i + 1) if tokens[j] == tok)
        out.append({"p": i + 1, "p_sq": (i + 1) ** 2, "prev": tau(tokens[max(i - 1, 0)]),
                    "first_at": j_first + 1, "pred": tokens[max(i - 1, 0)]})
    return out


# ----------------------------------------------------------------------------
# fingerprint: the same numbers with or without the JIT
def fingerprint(seed: int = 20250101, length: int = 7, batch: int = 2) -> dict:
    """Predictions (all positions) and final raw residuals / RNN states of three
    small models on seeded inputs, as plain ints (JSON-able)."""
    rng = np.random.default_rng(seed)
    n = length - 1
    models = {"ar-transformer": ar_transformer(n, ar_format(n)),
              "counter-rnn": counter_rnn(RNN_FORMAT),
              "prev-hybrid": prev_hybrid(n, hybrid_format(n))}
    alph = {"ar-transformer": MATCH_ALPHABET, "counter-rnn": RNN_ALPHABET, "prev-hybrid": MATCH_ALPHABET}
    out = {}
    for name, m in models.items():
        toks = np.array([random_tokens(rng, length - 1, alph[name]) for _ in range(batch)], dtype=np.int64)
        preds = m.predict_batch(toks, all_positions=True)
        rows = []
        for row in toks:
            sess = m.session(capacity=2)
            sess.feed(row[:3])
            sess.feed(row[3:])
            rows.append({"x": [int(v) for v in sess.x], "state": [int(v) for v in sess.state.ravel()],
                         "next": sess.next_token()})
        used = m.resources.used_int_bits
        try:
            m.with_format(FixedFormat(used - 1, m.fmt.frac_bits)).predict_batch(toks, all_positions=True)
            overflow = None
        except Exception as e:           # the message names op, bits and position
            overflow = f"{type(e).__name__}: {e}"
        out[name] = {"tokens": toks.tolist(), "preds": preds.tolist(), "rows": rows,
                     "used_int_bits": used, "overflow": overflow}
    return out


if __name__ == "__main__":
    import numba

    json.dump({"jit_disabled": bool(numba.config.DISABLE_JIT),
               "fingerprint": fingerprint(*[int(a) for a in sys.argv[1:]])}, sys.stdout)


# ----------------------------------------------------------------------------
# The one-hot Counting Transformer that constructions/models/retrieval.py had before issue 13
# (one embedded direction hot_s = [token = number s] per data symbol, and its copy
# qhot_s): correct, but its width and parameter count grow with the alphabet, so
# it is NOT constant-size on the reduction's alphabet n + 1. Kept here only so the
# parameter check can be shown to fail it (tests/test_retrieval.py).
def onehot_counting_model(n: int, alphabet: int, f: int | None = None) -> Model:
    """``[BOS] x_1..x_n [QUERY] q t`` -> number [count(q) > t]; 3 layers, width 8 + 2a.
    Default f: 2^f > (n+1)(2n+3) (the comparison margin); I = min(30, 62 - f)."""
    from rnngap.constructions.build.gadgets import Head, sharpness

    a = int(alphabet)
    f = ceil_log2((n + 1) * (2 * n + 3) + 1) if f is None else f
    fmt = FixedFormat(min(30, 62 - f), f)
    lam = sharpness(f)
    M = lam * (n + 2) + lam
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("pos", K.F_POS)
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.embedded("is_number", K.F_IS_NUM)
    s.embedded("thr", K.F_TOK_INV, Fraction(1, 2))
    for v in range(a):
        s.embedded(f"hot_{v}", K.F_IS_TOKEN, number_token(v))
    for lab in ["after"] + [f"qhot_{v}" for v in range(a)] + ["frac"]:
        s.hidden(lab)
    b = Builder(f"onehot-counting(n={n},a={a})", "transformer", Vocab(max(n, a - 1, 1)), s)
    b.max_positions = n + 4
    b.attention_layer([Head("after-query", [({"one": lam}, {"is_query": 2, "is_bos": 1})], {"after": {"is_query": 1}})])
    b.attention_layer([Head("fetch-q", [({"one": M}, {"after": 1, "is_number": 1}), ({"one": -lam}, {"pos": 1})],
                            {f"qhot_{v}": {f"hot_{v}": 1} for v in range(a)})])
    score = [({f"qhot_{v}": lam}, {f"hot_{v}": 1}) for v in range(a)]
    score += [({"one": lam}, {"is_bos": 1}), ({"one": -2 * lam}, {"after": 1})]
    b.attention_layer([Head("count", score, {"frac": {"is_bos": 1}})])
    b.readout([("thr", K.F_IS_TOKEN, number_token(1), 1), ("frac", K.F_IS_TOKEN, number_token(0), 1)])
    return b.build(fmt)
