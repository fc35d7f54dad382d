"""Block-level tests of the recurrent gadgets (the section at the end of
constructions/build/gadgets.py): clock, delay_chain, gated_equality, gated_value_neuron,
latest_flag_head, and match_head(tie_break='last', fallback='bos', tight=True) as the
hybrids use it. Each gadget gets a tiny model of its own; at every position of
every input up to a small length (exhaustive), its residual directions equal, as
exact Fractions, a plain-Python expectation computed here (ints, no code under
test). Then each lemma is shown failing one margin below: one integer bit fewer
overflows, a big-M one smaller fires off its gate, a finer grid than lambda was
derived for leaves weight on a non-target.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    Builder, MarginError, Recurrence, ResidualSpace, base_space, clock, delay_chain, gated_equality,
    gated_value_neuron, latest_flag_head, number_readout,
)
from rnngap.constructions.machine.vocab import BOS, Vocab, number_token

ALPHABET = [BOS, number_token(0), number_token(1), number_token(2)]   # tau = 0, 1, 2, 3


def tau(t: int) -> int:
    """Plain-Python token code (numbers k -> k + 1, [BOS] -> 0)."""
    return 0 if t == BOS else t - number_token(0) + 1


def residuals(model, toks):
    """Per position: (residual by label, attention weights of layer 0 head 0 as exact
    Fractions, or None without heads). attention() is raw / 2^f in float64, exact here."""
    sess = model.session(capacity=len(toks), record=True)
    out = []
    for t in toks:
        sess.feed([t])
        att = sess.attention()
        w = [Fraction(float(v)) for v in att[0, 0]] if att.shape[1] else None
        out.append((sess.residual(), w))
    return out


# ============================================================================ clock + delay chains
def clock_model(fmt: FixedFormat, delays=3, delays_sq=2):
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    s.embedded("is_two", K.F_IS_TOKEN, number_token(1))        # the latch flag: token "1" (tau = 2)
    rec = Recurrence()
    clock(s, rec, delays=delays, delays_sq=delays_sq, latches={"twos": "is_two"})
    s.hidden("diff")
    delay_chain(rec, "diff", {"tok": 1, "one": -1}, 2, {2: "diff"})   # tau - 1, two steps back
    b = Builder("clock-block", "linear_rnn", Vocab(3), s)
    rec.apply(b, name="clock")
    number_readout(b, "cnt")
    return b.build(fmt)


def clock_expect(toks, t, delays=3, delays_sq=2):
    e = {"cnt": t + 1, "cnt_sq": (t + 1) ** 2, "twos": sum(x == number_token(1) for x in toks[:t + 1])}
    for k in range(1, delays + 1):
        e[f"prev{k}"] = tau(toks[t - k]) if t >= k else 0
    for k in range(1, delays_sq + 1):
        e[f"prev{k}_sq"] = tau(toks[t - k]) ** 2 if t >= k else 0
    e["diff"] = tau(toks[t - 2]) - 1 if t >= 2 else 0
    return e


def clock_int_bits(L: int) -> int:
    """The clock lemma's bound: every value and partial sum is <= max(L^2, 9) (cnt_sq,
    tok_sq), and |v| < 2^I needs I = floor(log2 max) + 1."""
    return math.floor(math.log2(max(L * L, 9))) + 1


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5])
def test_clock_exact_on_every_sequence(L):
    fmt = FixedFormat(clock_int_bits(L), 0)
    model = clock_model(fmt)
    for toks in itertools.product(ALPHABET, repeat=L):
        for t, (res, _) in enumerate(residuals(model, list(toks))):
            want = clock_expect(toks, t)
            got = {k: res[k] for k in want}
            assert got == want, (toks, t, got, want)
    assert model.resources.used_int_bits <= fmt.int_bits


@pytest.mark.parametrize("L", [4, 6, 9])
def test_clock_overflows_one_bit_below_used(L):
    fmt = FixedFormat(clock_int_bits(L), 0)
    model = clock_model(fmt)
    toks = [BOS] + [number_token(2)] * (L - 1)
    residuals(model, toks)                            # the recurrence only (no readout)
    used = model.resources.used_int_bits
    assert used == clock_int_bits(L), (used, clock_int_bits(L))     # the lemma's bound is tight
    with pytest.raises(FixedPointOverflow) as e:
        residuals(model.with_format(FixedFormat(used - 1, 0)), toks)
    assert (e.value.needed_int_bits, e.value.int_bits) == (used, used - 1)


def test_delay_chain_rejects_outputs_outside_its_depth():
    s = base_space()
    s.hidden("x")
    with pytest.raises(ValueError, match="outside 1..2"):
        delay_chain(Recurrence(), "x", {"tok": 1}, 2, {3: "x"})


# ============================================================================ gated MLP gadgets
def mlp_model(neurons, outs, fmt=FixedFormat(12, 0)):
    s = base_space()
    s.embedded("is_a", K.F_IS_TOKEN, number_token(0))
    s.embedded("is_b", K.F_IS_TOKEN, number_token(1))
    for o in outs:
        s.hidden(o)
    b = Builder("mlp-block", "transformer", Vocab(12), s)
    b.attention_layer([], neurons)
    number_readout(b, outs[0])
    return b.build(fmt)


ALL_TOKENS = [BOS] + [number_token(k) for k in range(13)]          # tau = 0 .. 13


def gate_of(t):                  # gate combo {is_a: 1, is_b: -1}: 1, -1 or 0
    return 1 if t == number_token(0) else -1 if t == number_token(1) else 0


@pytest.mark.parametrize("c", [0, 1, 4, 13])
def test_gated_equality_exhaustive(c):
    """out = [tau == c] where the gate is 1, 0 where it is 0 or -1, for every token;
    premise d = tau - c <= big - 1 off the gate, so big = 13 - c + 1 (tau <= 13)."""
    big = 13 - c + 1
    model = mlp_model(gated_equality({"tok": 1, "one": -c}, {"is_a": 1, "is_b": -1}, big, {"out": 5}), ["out"])
    for t in ALL_TOKENS:
        (res, _), = residuals(model, [t])
        assert res["out"] == (5 if gate_of(t) == 1 and tau(t) == c else 0), (t, res["out"])


@pytest.mark.parametrize("c", [0, 1, 4])
def test_gated_equality_fires_off_gate_one_below(c):
    """big one smaller than the premise needs: the token with d = big fires with the gate off."""
    big = 13 - c
    model = mlp_model(gated_equality({"tok": 1, "one": -c}, {"is_a": 1, "is_b": -1}, big, {"out": 1}), ["out"])
    wrong = [t for t in ALL_TOKENS if residuals(model, [t])[0][0]["out"] != (gate_of(t) == 1 and tau(t) == c)]
    assert wrong == [number_token(12)]           # tau = 13 = c + big, gate 0
    with pytest.raises(MarginError):
        gated_equality({"tok": 1}, {"is_a": 1}, 0, {"out": 1})


@pytest.mark.parametrize("bias", [0, -2, Fraction(1, 2)])
def test_gated_value_exhaustive_and_one_below(bias):
    """out = relu(tau + bias) where is_a = 1 and is_b = 0 (a gate and a closed flag);
    big = max(tau + bias) = 13 + bias (rounded up) makes it exact, one less fires off the gate
    on the largest tau. Here the gate is a token flag, so the off case is every other token."""
    big = math.ceil(13 + bias)

    def expect(t):
        return max(Fraction(tau(t)) + bias, 0) if t == number_token(0) else 0

    for g_big, ok in ((big, True), (big - 1, False)):
        model = mlp_model([gated_value_neuron({"tok": 1}, [{"is_a": 1}], g_big, {"out": 1}, [{"is_b": 1}], bias)],
                          ["out"], FixedFormat(12, 1))
        wrong = [t for t in ALL_TOKENS if residuals(model, [t])[0][0]["out"] != expect(t)]
        assert (wrong == []) == ok, (g_big, wrong)
        if not ok:
            assert wrong == [number_token(12)]
    with pytest.raises(MarginError):
        gated_value_neuron({"tok": 1}, [{"is_a": 1}], 0, {"out": 1})


# ============================================================================ latest_flag_head
def flag_model(fmt: FixedFormat, P: int):
    s = base_space()
    s.embedded("flag", K.F_IS_TOKEN, number_token(0))
    s.hidden("at")
    head = latest_flag_head("latest", {"flag": 1}, {"pos": 1, "one": 1}, "one", {"at": {"pos": 1}}, fmt, max_pos=P)
    b = Builder("flag-block", "transformer", Vocab(2), s)
    b.max_positions = P
    b.attention_layer([head])
    number_readout(b, "at")
    return b.build(fmt), head


@pytest.mark.parametrize("f", [0, 3, 6])
def test_latest_flag_head_exhaustive(f):
    """Every sequence of length <= 6 over {[BOS], flagged, unflagged}: the weight is
    exactly 1 on the latest flagged position (on the latest position if none)."""
    P = 6
    _, head = flag_model(FixedFormat(40, f), P)
    fmt = FixedFormat(head.margin["score_int_bits"], f)
    model, _ = flag_model(fmt, P)
    for L in range(1, P + 1):
        for toks in itertools.product([BOS, number_token(0), number_token(1)], repeat=L):
            for t, (res, w) in enumerate(residuals(model, list(toks))):
                flagged = [j for j in range(t + 1) if toks[j] == number_token(0)]
                target = flagged[-1] if flagged else t
                assert w == [Fraction(int(j == target)) for j in range(t + 1)], (toks, t, w)
                assert res["at"] == target


def test_latest_flag_head_margins_one_below():
    P, f = 6, 3
    _, head = flag_model(FixedFormat(40, f), P)
    need = head.margin["score_int_bits"]
    with pytest.raises(MarginError, match=f"needs {need} integer bits"):
        flag_model(FixedFormat(need - 1, f), P)
    # a grid finer than mu was derived for: an earlier flagged position keeps weight
    model, head = flag_model(FixedFormat(need, f), P)
    mu = head.margin["mu"]
    f2 = next(g for g in range(f + 1, 40) if math.exp(-mu) * 2 ** g >= 1)
    fine = model.with_format(FixedFormat(need + 2, f2))
    toks = [BOS, number_token(0), number_token(0)]
    res, w = residuals(fine, toks)[-1]
    assert w[1] > 0 and res["at"] != 2


# ============================================================ match_head: last match, else [BOS] (tight)
def default_head_model(fmt: FixedFormat, P: int):
    """Query tau_t + 1 against key tau_j: the latest j whose token is one above the
    current one, else [BOS] (the default, position 0). max_code = 32 bounds |tau| + 1
    over the vocabulary (specials up to id 31), as the Builder's central check requires."""
    from rnngap.constructions.build.gadgets import Component, match_head
    s = base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.hidden("at")
    comp = Component({"tok": 1, "one": 1}, {"tok": 1}, {"tok_sq": 1}, 32, 32,
                     query_sq={"tok_sq": 1, "tok": 2, "one": 1})
    head = match_head("last-or-bos", components=[comp], copy={"at": {"pos": 1}}, fmt=fmt, tie_break="last",
                      fallback="bos", tight=True, n_positions=P)
    b = Builder("default-block", "transformer", Vocab(3), s)
    b.max_positions = P
    b.attention_layer([head])
    number_readout(b, "at")
    return b.build(fmt), head


@pytest.mark.parametrize("f", [0, 4])
def test_match_head_last_with_bos_fallback_tight_exhaustive(f):
    P = 6
    _, head = default_head_model(FixedFormat(40, f), P)
    model, _ = default_head_model(FixedFormat(head.margin["score_int_bits"], f), P)
    nums = [number_token(0), number_token(1), number_token(2)]
    for L in range(0, P):
        for rest in itertools.product(nums, repeat=L):
            toks = [BOS] + list(rest)
            for t, (res, w) in enumerate(residuals(model, toks)):
                hits = [j for j in range(1, t + 1) if tau(toks[j]) == tau(toks[t]) + 1]
                target = hits[-1] if hits else 0
                assert w == [Fraction(int(j == target)) for j in range(t + 1)], (toks, t, w)
                assert res["at"] == target


def test_match_head_last_bos_tight_margins_one_below():
    P, f = 6, 2
    _, head = default_head_model(FixedFormat(40, f), P)
    need = head.margin["score_int_bits"]
    with pytest.raises(MarginError, match=f"needs {need} integer bits"):
        default_head_model(FixedFormat(need - 1, f), P)
    model, head = default_head_model(FixedFormat(need, f), P)
    f2 = next(g for g in range(f + 1, 40) if math.exp(-head.margin["mu"]) * 2 ** g >= 1)
    toks = [BOS, number_token(1), number_token(1), number_token(0)]     # two matches (tau 2) for tau 1 + 1
    res, w = residuals(model.with_format(FixedFormat(need + 2, f2)), toks)[-1]
    assert w[1] > 0 and res["at"] != 2
