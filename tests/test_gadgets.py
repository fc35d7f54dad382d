"""Block-level tests of the gadgets (constructions/build/gadgets.py), one gadget per tiny model.

For each gadget, at several n and at several formats at or above what it declares:
the attention weights (``Session.attention``) and the residual stream
(``Session.residual``) at EVERY position equal, as exact Fractions, a plain-Python
expectation (tests/_models.py, ints and Fractions only). Then the failures below
the declared bound, each asserted specifically:

* building in too small a format raises MarginError (integer bits; for the count
  comparison also fraction bits, with the bound derived here independently);
* the same weights re-encoded one integer bit below what a run used raise
  FixedPointOverflow naming exactly the bits the run used;
* too few fraction bits make the count comparison confuse c with c + 1 on a
  concrete instance found here in plain Python;
* ``saturate`` mode with too few integer bits gives wrong retrievals;
* a grid finer than the one lambda was derived for leaves non-targets with weight.

Finally the Builder's refusals (two writers, unwritten directions, position
features in recurrent models, hybrid shape, weights off the grid).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import _models as tm
from _models import FixedFormat, tau
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
from rnngap.constructions.build.gadgets import (
    Builder, Head, MarginError, Neuron, ResidualSpace, count_compare_neurons, equality_neurons, select_neurons,
    sharpness, shift_head, step_neurons,
)
from rnngap.constructions.machine.vocab import BOS, QUERY, Vocab, number_token

NS = (4, 16, 64, 256)


def positions(model, tokens):
    """Feed ``tokens`` one at a time; yield (i, weights of layer 0 head 0 as exact
    Fractions, residual). attention() returns raw / 2^f as float64, exact for the
    formats here (raw < 2^53)."""
    sess = model.session(capacity=len(tokens), record=True)
    for i, t in enumerate(tokens):
        sess.feed([t])
        att = sess.attention()
        assert att.shape[-1] == i + 1
        w = [Fraction(float(v)) for v in att[0, 0]] if att.shape[1] else None
        yield i, w, sess.residual(), sess


def assert_weights(i, got, want: dict, what: str):
    full = [want.get(j, Fraction(0)) for j in range(i + 1)]
    assert got == full, f"{what}: position {i}: weights {got} != {full}"


# ============================================================================
# match head
def match_formats(n, variant, first):
    """Declared formats at two fraction-bit counts, at and above the declared I."""
    out = []
    for f in (tm.f_default(n), tm.f_default(n) + 3):
        I = tm.match_int_bits(n, f, variant, first)
        out += [FixedFormat(I, f), FixedFormat(I + 3, f)]
    return out


def match_instances(rng, n, variant):
    alph = tm.MATCH_ALPHABET if variant == "tok" else tm.index_alphabet(n)
    worst = [BOS] + [QUERY if j % 2 else number_token(min(8, n - 1) if variant == "tok" else n - 1)
                     for j in range(n)]
    return [tm.random_tokens(rng, n, alph), worst]


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("variant,first", [("tok", False), ("tok", True), ("index", False), ("index", True)])
def test_match_head_exact(n, variant, first):
    rng = np.random.default_rng(1000 + n)
    for fmt in match_formats(n, variant, first):
        model, head = tm.match_model(n, fmt, variant, first)
        assert head.gap == min(v for k, v in head.margin.items() if k.startswith("gap ")) > head.margin["zero_gap"]
        for toks in match_instances(rng, n, variant):
            ref = tm.match_reference(toks, fmt.frac_bits, variant, first)
            for i, w, res, sess in positions(model, toks):
                assert_weights(i, w, ref[i]["weights"], f"{model.name} {fmt.name}")
                assert res["at"] == ref[i]["at"] and res["val"] == ref[i]["val"], (i, res, ref[i])
                if len(ref[i]["weights"]) == 1:
                    (j,) = ref[i]["weights"]
                    assert sess.next_token() == toks[j]
        assert model.resources.used_int_bits <= fmt.int_bits


def test_match_head_multiple_matches_weight_is_rounded_reciprocal():
    """Without tie-break, m matches get round(2^f/m)/2^f each (m = 3: not a dyadic)."""
    fmt = FixedFormat(tm.match_int_bits(8, 6), 6)
    model, _ = tm.match_model(8, fmt)
    toks = [BOS, number_token(2), number_token(5), number_token(2), number_token(2)]
    *_, (i, w, res, _s) = positions(model, toks)
    w3 = Fraction(21, 64)   # round(64 / 3) = 21
    assert w == [0, w3, 0, w3, w3]
    assert res["at"] == w3 * (1 + 3 + 4) and res["val"] == 3 * w3 * 3


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("variant,first", [("tok", False), ("tok", True), ("index", True)])
def test_match_head_margin_error_below_declared_int_bits(n, variant, first):
    f = tm.f_default(n)
    _, head = tm.match_model(n, FixedFormat(40, f), variant, first)
    need = head.margin["score_int_bits"]
    tm.match_model(n, FixedFormat(max(need, 30), f), variant, first)
    with pytest.raises(MarginError, match=rf"match: .*needs {need} integer bits, Q{need - 1}\.{f} has {need - 1}"):
        tm.match_model(n, FixedFormat(need - 1, f), variant, first)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("variant,first", [("tok", False), ("tok", True), ("index", False), ("index", True)])
def test_match_head_overflows_one_bit_below_used(n, variant, first):
    f = tm.f_default(n)
    fmt = FixedFormat(tm.match_int_bits(n, f, variant, first), f)
    model, _ = tm.match_model(n, fmt, variant, first)
    toks = match_instances(np.random.default_rng(7), n, variant)[1]
    model.predict(toks)
    used = model.resources.used_int_bits
    assert 1 <= used <= fmt.int_bits
    small = model.with_format(FixedFormat(used - 1, f))
    with pytest.raises(FixedPointOverflow) as e:
        small.predict(toks)
    assert (e.value.needed_int_bits, e.value.int_bits) == (used, used - 1)
    assert e.value.op in ("add", "mul")


@pytest.mark.parametrize("n", (16, 64, 256))
@pytest.mark.parametrize("variant,first", [("tok", False), ("tok", True), ("index", False)])
def test_match_head_saturate_gives_wrong_retrievals(n, variant, first):
    f = tm.f_default(n)
    _, head = tm.match_model(n, FixedFormat(40, f), variant, first)
    sat = FixedFormat(head.margin["score_int_bits"] - 3, f, "saturate")
    model, _ = tm.match_model(n, FixedFormat(40, f), variant, first)
    model = model.with_format(sat)
    toks = tm.random_tokens(np.random.default_rng(11 + n), n, tm.MATCH_ALPHABET if variant == "tok"
                            else tm.index_alphabet(n))
    ref = tm.match_reference(toks, f, variant, first)
    wrong = [i for i, w, res, _ in positions(model, toks)
             if res["val"] != ref[i]["val"]
             and all(w[j] != ref[i]["weights"][j] for j in ref[i]["weights"])]
    assert wrong, "saturated scores should make some retrieval wrong"
    assert model.resources.saturations > 0
    # the same format in raise mode refuses that prefix instead of answering wrongly
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(sat.with_bits(mode="raise")).predict(toks[:wrong[0] + 1])
    assert e.value.int_bits == sat.int_bits < e.value.needed_int_bits


def _finer_grid(lam: int, f: int) -> int:
    """Smallest f' > f with exp(-lam) 2^f' >= 1 (so e = round(exp(-lam) 2^f') >= 1:
    a key one unit away keeps weight), computed in floats with a wide margin."""
    fp = f + 1
    while math.exp(-lam) * 2.0 ** fp < 1.5:
        fp += 1
    return fp


@pytest.mark.parametrize("n", (16, 64))
def test_match_head_lambda_too_small_for_a_finer_grid(n):
    """lambda = sharpness(f) is exact on the grid 2^-f it was derived for; encoded
    with more fraction bits, the neighbouring keys (gap lambda) keep weight."""
    f = tm.f_default(n)
    fmt = FixedFormat(tm.match_int_bits(n, f, "index"), f)
    model, head = tm.match_model(n, fmt, "index")
    fine = _finer_grid(head.margin["lambda"], f)
    model = model.with_format(FixedFormat(fmt.int_bits, fine))
    toks = [BOS] + [number_token(j) for j in range(n)]     # at position i: q = i, target i - 1
    *_, (i, w, res, _s) = positions(model, toks[:n // 2])
    target = i - 1
    assert 0 < w[target] < 1
    assert w[target - 1] > 0 and w[target + 1] > 0


# ============================================================================
# shift head
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("shift", (1, 2))
def test_shift_head_exact(n, shift):
    rng = np.random.default_rng(2000 + 10 * n + shift)
    for f in (tm.f_default(n), tm.f_default(n) + 3):
        I0 = tm.shift_int_bits(n, f, shift)
        for fmt in (FixedFormat(I0, f), FixedFormat(I0 + 3, f)):
            model, head = tm.shift_model(n, fmt, shift)
            assert head.margin["gap"] > head.margin["zero_gap"]
            toks = tm.random_tokens(rng, n, tm.MATCH_ALPHABET)
            for i, w, res, sess in positions(model, toks):
                j = max(i - shift, 0)
                assert_weights(i, w, {j: Fraction(1)}, model.name)
                assert res["prev"] == tau(toks[j]) and res["prev_pos"] == j
                assert sess.next_token() == toks[j]
            assert model.resources.used_int_bits <= fmt.int_bits


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("shift", (1, 2))
def test_shift_head_below_declared_bits(n, shift):
    f = tm.f_default(n)
    _, head = tm.shift_model(n, FixedFormat(40, f), shift)
    need = head.margin["score_int_bits"]
    with pytest.raises(MarginError, match=rf"shift: scores up to .* for {n + 1} positions needs {need} integer"):
        tm.shift_model(n, FixedFormat(need - 1, f), shift)
    model, _ = tm.shift_model(n, FixedFormat(tm.shift_int_bits(n, f, shift), f), shift)
    toks = tm.random_tokens(np.random.default_rng(3), n, tm.MATCH_ALPHABET)
    model.predict(toks)
    used = model.resources.used_int_bits
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(FixedFormat(used - 1, f)).predict(toks)
    assert (e.value.needed_int_bits, e.value.int_bits) == (used, used - 1)


@pytest.mark.parametrize("n", (16, 64, 256))
def test_shift_head_saturate_attends_to_the_wrong_position(n):
    f = tm.f_default(n)
    _, head = tm.shift_model(n, FixedFormat(40, f))
    model, _ = tm.shift_model(n, FixedFormat(40, f))
    model = model.with_format(FixedFormat(head.margin["score_int_bits"] - 3, f, "saturate"))
    toks = tm.random_tokens(np.random.default_rng(5), n, tm.MATCH_ALPHABET)
    wrong = [i for i, w, res, _ in positions(model, toks) if i >= 1 and w[i - 1] != 1 and res["prev_pos"] != i - 1]
    assert wrong and model.resources.saturations > 0


def test_shift_head_lambda_too_small_for_a_finer_grid():
    n, f = 16, tm.f_default(16)
    model, head = tm.shift_model(n, FixedFormat(tm.shift_int_bits(n, f), f))
    model = model.with_format(FixedFormat(model.fmt.int_bits, _finer_grid(head.margin["lambda"], f)))
    toks = tm.random_tokens(np.random.default_rng(6), 8, tm.MATCH_ALPHABET)
    *_, (i, w, res, _s) = positions(model, toks)
    assert 0 < w[i - 1] < 1 and w[i - 2] > 0 and w[i] > 0


def test_shift_head_rejects_shift_zero():
    with pytest.raises(ValueError, match="shift must be >= 1"):
        shift_head("s", "pos", "pos_sq", "one", {}, FixedFormat(20, 8), n_positions=4, shift=0)


# ============================================================================
# count head + comparison
def count_formats(n):
    out = []
    for f in (tm.count_min_frac_bits(n), tm.count_min_frac_bits(n) + 3):
        I = tm.count_int_bits(n, f)
        out += [FixedFormat(I, f), FixedFormat(I + 2, f)]
    return out


@pytest.mark.parametrize("n", NS)
def test_count_head_and_comparison_exact(n):
    rng = np.random.default_rng(3000 + n)
    q0 = tm.COUNT_QUERY
    boundary = set()
    for fmt in count_formats(n):
        f = fmt.frac_bits
        model = tm.count_model(n, fmt)
        toks = tm.count_tokens(rng, n)
        ref = tm.count_reference(toks, f)
        for i, w, res, sess in positions(model, toks):
            r = ref[i]
            on = {0} | {j for j in range(1, i + 1) if toks[j] == q0}
            assert len(on) == r["c"] + 1
            assert_weights(i, w, {j: r["frac"] for j in on}, model.name)
            # the head's output: round(2^f / (c+1)) / 2^f, computed here from the integers
            assert res["frac"] == Fraction(round(Fraction(1 << f, r["c"] + 1)), 1 << f) == r["frac"]
            if r["gt"] is not None:
                assert res["thr"] == r["thr"]
                assert res["gt"] == r["gt"], (i, r)
                assert sess.next_token() == number_token(r["gt"])
                boundary.add(r["c"] - (toks[i] - tm.NUMBER_BASE))
        assert model.resources.used_int_bits <= fmt.int_bits
    assert {0, 1} <= boundary     # both c = t and c = t + 1 were exercised


@pytest.mark.parametrize("n", NS)
def test_count_comparison_frac_bits_bound_is_the_gap_bound(n):
    """Declared f: 2^f > (n+1)(2n+3), derived here from 1/(c+1) - 1/(t+3/2) >= 1/((n+1)(2n+3))."""
    f = tm.count_min_frac_bits(n)
    count_compare_neurons("frac", "thr", "gt", n, FixedFormat(40, f))
    with pytest.raises(MarginError, match=rf"count comparison for n={n}: .*rounding error 2\^-{f - 1}"):
        count_compare_neurons("frac", "thr", "gt", n, FixedFormat(40, f - 1))


def _confusable(n: int, fp: int):
    """A threshold t <= n - 2 whose c = t + 1 rounds like c = t on the grid 2^-fp:
    round(2^fp/(t+2)) == round(2^fp/(t+3/2)) (plain integers / Fractions)."""
    for t in range(n - 1):
        if round(Fraction(1 << fp, t + 2)) == round(Fraction(1 << fp) / (t + Fraction(3, 2))):
            return t
    return None


@pytest.mark.parametrize("n", (16, 64, 256))
def test_count_comparison_confuses_c_and_c_plus_1_with_too_few_fraction_bits(n):
    f = tm.count_min_frac_bits(n)
    model = tm.count_model(n, FixedFormat(tm.count_int_bits(n, f), f))
    fp = f - 1
    while _confusable(n, fp) is None:
        fp -= 1
    assert fp >= f - 2, "the bound should be nearly tight"
    t = _confusable(n, fp)
    small = model.with_format(FixedFormat(model.fmt.int_bits, fp))
    toks = [BOS] + [tm.COUNT_QUERY] * (t + 1) + [number_token(t)]      # c = t + 1 > t
    *_, (i, w, res, sess) = positions(small, toks)
    rounded = Fraction(round(Fraction(1 << fp, t + 2)), 1 << fp)
    assert res["frac"] == res["thr"] == rounded
    assert res["gt"] == 0
    assert sess.next_token() == number_token(0)      # the truth is number 1
    # the declared format gets the same instance right
    assert model.predict(toks) == number_token(1)


@pytest.mark.parametrize("n", (4, 64))
def test_count_head_below_declared_int_bits(n):
    f = tm.count_min_frac_bits(n)
    need = tm.count_int_bits(n, f)
    with pytest.raises(MarginError, match=r"(count|count comparison): .* needs \d+ integer bits"):
        tm.count_model(n, FixedFormat(need - 1, f))
    model = tm.count_model(n, FixedFormat(need, f))
    toks = tm.count_tokens(np.random.default_rng(8), n)
    model.predict(toks)
    used = model.resources.used_int_bits
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(FixedFormat(used - 1, f)).predict(toks)
    assert (e.value.needed_int_bits, e.value.int_bits) == (used, used - 1)


def test_count_head_saturate_miscounts():
    """Saturating below the bits of 2 lambda q0^2 (the query-key product of a
    match): a match scores clamp(2 lambda q0^2) - 2 lambda q0^2 < 0 while [BOS]
    scores 0, so all weight goes to [BOS]: every count reads as c = 0."""
    n = 64
    f = tm.count_min_frac_bits(n)
    model = tm.count_model(n, FixedFormat(tm.count_int_bits(n, f), f))
    lam, q = sharpness(f), tau(tm.COUNT_QUERY)
    sat = FixedFormat((2 * lam * q * q).bit_length() - 1, f, "saturate")
    toks = tm.count_tokens(np.random.default_rng(9), n)
    ref = tm.count_reference(toks, f)
    satm = model.with_format(sat)
    missed = []
    for i, w, res, _s in positions(satm, toks):
        assert w == [1] + [0] * i and res["frac"] == 1
        if ref[i]["gt"] == 1:
            assert res["gt"] == 0
            missed.append(i)
    assert missed and max(r["c"] for r in ref) > 1 and satm.resources.saturations > 0
    # raise mode refuses this format outright: the comparison's step slope 2^(f+1)
    # does not fit (saturate mode clamped that weight at encoding, uncounted)
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(sat.with_bits(mode="raise"))
    assert e.value.op == "encode" and "W1" in e.value.where and e.value.needed_int_bits == f + 2


# ============================================================================
# MLP gadgets: equality, step, select (in a head-less attention layer)
def mlp_tokens(rng, n):
    """[BOS] then at position i a number with tau in {i-1, i, i+1} (or a special)."""
    toks = [BOS]
    for i in range(1, n + 1):
        if rng.random() < 0.2:
            toks.append(int(rng.choice(tm.SPECIALS_IN_DATA)))
        else:
            toks.append(number_token(max(i - 1 + int(rng.integers(-1, 2)), 0)))
    return toks


def mlp_int_bits(n):
    return (n + 2).bit_length() + 1


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("scale", (1, -3, Fraction(1, 4)))
def test_equality_neurons_exact(n, scale):
    rng = np.random.default_rng(4000 + n)
    toks = mlp_tokens(rng, n)
    for fmt in (FixedFormat(mlp_int_bits(n) + 2, 2), FixedFormat(mlp_int_bits(n) + 5, 9)):
        model = tm.mlp_model(fmt, n + 1, lambda: equality_neurons({"tok": 1}, {"pos": 1}, "eq", scale), ["eq"])
        hits = 0
        for i, _w, res, _s in positions(model, toks):
            want = Fraction(scale) * (tau(toks[i]) == i)
            assert res["eq"] == want, (i, toks[i])
            hits += want != 0
        assert 0 < hits < n


def test_equality_neurons_failures():
    n = 16
    toks = mlp_tokens(np.random.default_rng(12), n)
    model = tm.mlp_model(FixedFormat(mlp_int_bits(n), 2), n + 1,
                         lambda: equality_neurons({"tok": 1}, {"pos": 1}, "eq"), ["eq"])
    model.predict(toks)
    used = model.resources.used_int_bits
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(FixedFormat(used - 1, 2)).predict(toks)
    assert (e.value.needed_int_bits, e.value.int_bits) == (used, used - 1)
    # saturate: tau = 14 and pos = 11 both clamp to 2^3 - 2^-2, so "14 == 11"
    sat = model.with_format(FixedFormat(3, 2, "saturate"))
    toks = [BOS] + [number_token(0)] * 10 + [number_token(13)]
    *_, (i, _w, res, _s) = positions(sat, toks)
    assert (i, tau(toks[i])) == (11, 14)
    assert res["eq"] == 1
    *_, (_i, _w, res_ok, _s) = positions(model, toks)
    assert res_ok["eq"] == 0


STEPS = [(0, 1), (2, Fraction(5, 2)), (-2, -1), (Fraction(-1, 4), 0)]


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("lo,hi", STEPS)
def test_step_neurons_exact(n, lo, hi):
    """d = tau - pos is an integer, never strictly between lo and hi: out = scale [d >= hi]."""
    toks = mlp_tokens(np.random.default_rng(5000 + n), n)
    for scale in (1, Fraction(-3, 2)):
        fmt = FixedFormat(mlp_int_bits(n) + 3, 4)
        model = tm.mlp_model(fmt, n + 1, lambda: step_neurons({"tok": 1, "pos": -1}, lo, hi, "st", scale), ["st"])
        for i, _w, res, _s in positions(model, toks):
            d = tau(toks[i]) - i
            assert not lo < d < hi
            assert res["st"] == Fraction(scale) * (d >= hi), (i, d)


def test_step_neurons_failures():
    with pytest.raises(MarginError, match="hi 1 must exceed lo 1"):
        step_neurons({"tok": 1}, 1, 1, "st")
    # promise broken: d = 1 strictly inside (0, 2): the output is the ramp value (d - lo)/w = 1/2
    fmt = FixedFormat(8, 4)
    model = tm.mlp_model(fmt, 8, lambda: step_neurons({"tok": 1, "pos": -1}, 0, 2, "st"), ["st"])
    *_, (_i, _w, res, _s) = positions(model, [BOS, number_token(1)])     # tau 2, pos 1
    assert res["st"] == Fraction(1, 2)
    # 1/w not a power of two: 1/3 is not on any binary grid
    with pytest.raises(ValueError, match="not a multiple of 2\\^-4"):
        tm.mlp_model(fmt, 8, lambda: step_neurons({"tok": 1}, 0, 3, "st"), ["st"])


@pytest.mark.parametrize("n", NS)
def test_select_neurons_exact(n):
    toks = mlp_tokens(np.random.default_rng(6000 + n), n)
    bound = max(n + 2, 9)
    fmt = FixedFormat(mlp_int_bits(n) + 2, 3)
    model = tm.mlp_model(fmt, n + 1, lambda: select_neurons({"is_num": 1}, {"tok": 1}, {"pos": -1}, "sel", bound),
                         ["sel"])
    for i, _w, res, _s in positions(model, toks):
        is_num = toks[i] >= tm.NUMBER_BASE
        assert res["sel"] == (tau(toks[i]) if is_num else -i)


def test_select_neurons_bound_too_small_leaks_the_other_branch():
    """cond = 0 for [QUERY] (x = tau = -9); with bound 4 < 9 the x-branch leaks x + 4 = -5."""
    fmt = FixedFormat(8, 3)
    model = tm.mlp_model(fmt, 8, lambda: select_neurons({"is_num": 1}, {"tok": 1}, {"pos": -1}, "sel", 4), ["sel"])
    *_, (i, _w, res, _s) = positions(model, [BOS, number_token(2), QUERY])
    assert res["sel"] == -i + (-9 + 4) == -7


# ============================================================================
# Builder refusals
def _space():
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("pos", K.F_POS)
    s.embedded("pos_sq", K.F_POS_SQ)
    return s


def _copy_head(name, target, fmt):
    return shift_head(name, "pos", "pos_sq", "one", {target: {"tok": 1}}, fmt, n_positions=8)


def test_builder_refuses_two_writers_of_one_direction():
    fmt = FixedFormat(16, 6)
    s = _space()
    s.hidden("out")
    b = Builder("two-heads", "transformer", Vocab(4), s)
    with pytest.raises(ValueError, match=r"'out' is written by 'head a' already; 'head b' may not"):
        b.attention_layer([_copy_head("a", "out", fmt), _copy_head("b", "out", fmt)])
    s = _space()
    s.hidden("out")
    b = Builder("head-and-mlp", "transformer", Vocab(4), s)
    with pytest.raises(ValueError, match="written by 'head a' already"):
        b.attention_layer([_copy_head("a", "out", fmt)], mlp=[Neuron({"tok": 1}, 0, {"out": 1})])
    with pytest.raises(ValueError, match="'tok' is written by 'embedding' already"):
        _space().claim_write("tok", "head c")
    s = _space()
    with pytest.raises(ValueError, match="exists already"):
        s.hidden("tok")


def test_builder_accumulate_lets_two_blocks_add():
    fmt = FixedFormat(16, 6)
    s = _space()
    s.hidden("out", accumulate=True)
    b = Builder("acc", "transformer", Vocab(8), s)
    b.attention_layer([_copy_head("a", "out", fmt)], mlp=[Neuron({"tok": 1}, 0, {"out": 10})])
    b.readout([("out", K.F_TOK, 0, 1)])
    model = b.build(fmt)
    toks = [BOS, number_token(3), number_token(5)]
    *_, (i, _w, res, _s) = positions(model, toks)
    assert res["out"] == tau(toks[1]) + 10 * tau(toks[2]) == 4 + 60


def test_builder_refuses_unwritten_directions():
    s = _space()
    s.hidden("never")
    b = Builder("unwritten", "transformer", Vocab(4), s)
    b.readout([("tok", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match=r"directions never written: \['never'\]"):
        b.build(FixedFormat(8, 4))


@pytest.mark.parametrize("feature", (K.F_POS, K.F_POS_SQ, K.F_POS_INV))
@pytest.mark.parametrize("kind", ("linear_rnn", "hybrid"))
def test_builder_refuses_position_features_in_recurrent_models(kind, feature):
    fmt = FixedFormat(16, 6)
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("where", feature, 1)
    s.hidden("h")
    s.hidden("out")
    b = Builder("positional", kind, Vocab(4), s)
    b.rnn_layer(["c"], A={("c", "c"): 1}, B={("c", "one"): 1}, C={("h", "c"): 1})
    if kind == "hybrid":
        b.attention_layer([Head("h0", [({"one": 1}, {"one": 1})], {"out": {"tok": 1}})])
    else:
        b.rnn_layer(["d"], A={("d", "d"): 1}, B={("d", "tok"): 1}, C={("out", "d"): 1})
    b.readout([("out", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match=rf"'where' uses a position feature; a {kind} sees tokens only"):
        b.build(fmt)


@pytest.mark.parametrize("n_attn", (0, 2))
def test_builder_refuses_hybrid_without_exactly_one_attention_layer(n_attn):
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.hidden("h")
    outs = [s.hidden(f"out{k}") for k in range(n_attn)]
    b = Builder("hybrid", "hybrid", Vocab(4), s)
    b.rnn_layer(["c"], A={("c", "c"): 1}, B={("c", "one"): 1}, C={("h", "c"): 1})
    for k in range(n_attn):
        b.attention_layer([Head(f"h{k}", [({"one": 1}, {"one": 1})], {outs[k]: {"tok": 1}})])
    b.readout([("tok", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match=rf"exactly ONE attention layer \(has 1 RNN, {n_attn} attention\)"):
        b.build(FixedFormat(8, 4))


def test_builder_refuses_hybrid_without_rnn_and_transformer_with_rnn():
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.hidden("out")
    b = Builder("no-rnn", "hybrid", Vocab(4), s)
    b.attention_layer([Head("h", [({"one": 1}, {"one": 1})], {"out": {"tok": 1}})])
    b.readout([("out", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match=r"exactly ONE attention layer \(has 0 RNN, 1 attention\)"):
        b.build(FixedFormat(8, 4))
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.hidden("h")
    b = Builder("tf-rnn", "transformer", Vocab(4), s)
    b.rnn_layer(["c"], A={("c", "c"): 1}, B={("c", "one"): 1}, C={("h", "c"): 1})
    b.readout([("h", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match="a transformer has no RNN layers"):
        b.build(FixedFormat(8, 4))


def test_builder_refuses_weights_off_the_grid():
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("third", K.F_TOK, 0, Fraction(1, 3))
    b = Builder("thirds", "transformer", Vocab(4), s)
    b.readout([("third", K.F_TOK, 0, 1)])
    with pytest.raises(ValueError, match=r"embedding coefficient of 'third' = 1/3 is not a multiple of 2\^-20"):
        b.build(FixedFormat(8, 20))
    # a weight on the grid at f = 4 leaves it at f = 2
    model = tm.mlp_model(FixedFormat(8, 4), 4, lambda: equality_neurons({"tok": 1}, {"pos": 1}, "eq",
                                                                       Fraction(1, 16)), ["eq"])
    with pytest.raises(ValueError, match=r"layer 0 W2\[\d+, 0\] = 1/16 is not a multiple of 2\^-2"):
        model.with_format(FixedFormat(8, 2))
    # the count head's threshold feature 1/(tau + 1/2) needs the offset 1/2 on the grid
    with pytest.raises(ValueError, match="offset = 1/2 is not a multiple of 2\\^-0"):
        tm.count_model(4, FixedFormat(12, 6)).with_format(FixedFormat(12, 0))


def test_gadget_records_use_saturate_necessity_not_raise_mode():
    """The 'gadgets' claim's below-the-bound evidence is a saturate-mode necessity
    record (checks/verify/necessity.py) that shows a wrong answer one bit below a
    frontier at or under the declaration; no raise-mode 'below bound' row is left."""
    from rnngap.checks.verify import checks_foundation as CF

    recs = CF.match_check("quick", 0)
    assert not any("below bound" in r.description for r in recs)
    nec = [r for r in recs if r.kind == "necessity"]
    assert nec and all(r.passed for r in recs)
    assert all(r.wrong_below is True and "wrong final answer, e.g." in r.note and "saturate" in r.note for r in nec)
    assert all(r.frontier_int_bits + r.frontier_frac_bits + 1 <= r.precision_bits_declared for r in nec)


# ============================================================================
# match head with the [BOS] fallback, and first-max: exhaustive on small formats
import itertools

from rnngap.constructions.build import gadgets as G

SMALL_ALPHABET = (0, 1, 2)
SMALL_LENGTH = 5


def _fallback_model(fmt, tie_break, tight=False, L=SMALL_LENGTH):
    """[BOS] x_1..x_L: layer 1 copies the previous token (prev, prev_sq); layer 2
    matches tau(x_i) against prev_j with the [BOS] fallback and copies pos_j."""
    K_ = len(SMALL_ALPHABET)
    s = G.base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.hidden("prev", bound=9), s.hidden("prev_sq", bound=81), s.hidden("hit", bound=L)
    b = Builder(f"fallback-{tie_break}", "transformer", Vocab(K_ - 1), s, bounded=True)
    b.max_positions = L + 1
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"prev": {"tok": 1}, "prev_sq": {"tok_sq": 1}},
                                  fmt, n_positions=L + 1)])
    comp = G.Component({"tok": 1}, {"prev": 1}, {"prev_sq": 1}, 9, 9, query_sq={"tok_sq": 1})
    head = G.match_head("m", components=[comp], copy={"hit": {"pos": 1}}, fmt=fmt, n_positions=L + 1,
                        tie_break=tie_break, fallback="bos", tight=tight)
    b.attention_layer([head])
    b.readout([("hit", K.F_TOK, 0, 1)])
    return b.build(fmt), head


def _fallback_reference(xs, i, tie_break):
    """The position the head must attend at position i >= 1 (None: no promise)."""
    hits = [j for j in range(2, i + 1) if xs[j - 2] == xs[i - 1]]     # prev_j = x_{j-1} = x_i
    if not hits:
        return 0
    if tie_break is None:
        return hits[0] if len(hits) == 1 else None
    return hits[0] if tie_break == "first" else hits[-1]


def _layer_weights(model, tokens, layer):
    sess = model.session(capacity=len(tokens), record=True)
    for i, t in enumerate(tokens):
        sess.feed([t])
        yield i, [Fraction(float(v)) for v in sess.attention()[layer, 0]], sess.residual()


def _all_inputs():
    for xs in itertools.product(SMALL_ALPHABET, repeat=SMALL_LENGTH):
        yield xs, [BOS] + [number_token(x) for x in xs]


@pytest.mark.parametrize("tight", [False, True])
@pytest.mark.parametrize("tie_break", [None, "first", "last"])
def test_match_head_fallback_lemma_exhaustive(tie_break, tight):
    """Every input over a 3-letter alphabet of length 5, f = 1 and f = 4: the
    weight is exactly 1 on the (first / last) match, or on [BOS] without one,
    and exactly 0 elsewhere (the lemma: every gap > (f + 1) ln 2)."""
    checked = 0
    for f in (1, 4):
        _, head = _fallback_model(FixedFormat(40, f), tie_break, tight)
        model, _ = _fallback_model(FixedFormat(head.margin["score_int_bits"], f), tie_break, tight)
        assert head.gap > G.zero_gap(f)
        for xs, toks in _all_inputs():
            for i, w, res in _layer_weights(model, toks, 1):
                want = _fallback_reference(xs, i, tie_break) if i >= 1 else 0
                if want is None:
                    continue
                assert w == [Fraction(int(j == want)) for j in range(i + 1)], (xs, i, w)
                assert res["hit"] == want
                checked += 1
    assert checked > 2000


def _inexact_one_margin_below(build, layer, monkeypatch):
    """Every sharpness one unit smaller (s - 1 <= (f + 1) ln 2, f = 1): ``build``
    must refuse it (MarginError); built anyway with the checks switched off, the
    number of positions (over all small inputs) where some weight of ``layer`` is
    not exactly 0 or 1."""
    real = G.sharpness
    monkeypatch.setattr(G, "sharpness", lambda f_, unit_gap=1: real(f_, unit_gap) - 1)
    with pytest.raises(MarginError, match="not above"):
        build(FixedFormat(40, 1))
    monkeypatch.setattr(G, "require", lambda cond, msg: None)
    monkeypatch.setattr(Builder, "_check_head", lambda self, name, fmt: None)
    model, _ = build(FixedFormat(40, 1))
    return sum(any(v not in (0, 1) for v in w) for _xs, toks in _all_inputs()
               for _i, w, _r in _layer_weights(model, toks, layer))


@pytest.mark.parametrize("tight", [False, True])
@pytest.mark.parametrize("tie_break", [None, "first", "last"])
def test_match_head_fallback_fails_one_margin_below(tie_break, tight, monkeypatch):
    """The same head with every margin one unit smaller: refused, and run anyway
    some weight on the exhaustive inputs is no longer exactly 0 or 1."""
    assert _inexact_one_margin_below(lambda fmt: _fallback_model(fmt, tie_break, tight), 1, monkeypatch) > 0


def test_match_head_fallback_lambdas():
    """The derived lam / delta (s = sharpness(f), P = n_positions - 1), symmetric and tight."""
    fmt = FixedFormat(40, 1)
    s, P = G.sharpness(1), 9
    comp = G.Component({"tok": 1}, {"tok": 1}, {"tok_sq": 1}, 3, 3, query_sq={"tok_sq": 1})
    want = {(None, False): (2 * s, s), ("first", False): (2 * s * P + 2 * s, s * P + s),
            ("last", False): (2 * s * P + 2 * s, s * P + s), (None, True): (2 * s, s),
            ("first", True): (s * P + 2 * s, s * P + s), ("last", True): (s * P + s, 0)}
    for (tie, tight), (lam, delta) in want.items():
        h = G.match_head("h", components=[comp], copy={}, fmt=fmt, n_positions=P + 1, tie_break=tie,
                         fallback="bos", tight=tight)
        assert (h.margin["lambda"], h.margin["delta"]) == (lam, delta), (tie, tight)
        assert h.gap == s                       # the smallest gap is one sharpness in every variant


def _first_max_model(fmt, L=SMALL_LENGTH):
    s = G.base_space()
    s.hidden("at", bound=L)
    b = Builder("first-max", "transformer", Vocab(len(SMALL_ALPHABET) - 1), s, bounded=True)
    b.max_positions = L + 1
    head = G.first_max_head("fm", key={"tok": 1}, max_key=len(SMALL_ALPHABET), copy={"at": {"pos": 1}}, fmt=fmt,
                            n_positions=L + 1)
    b.attention_layer([head])
    b.readout([("at", K.F_TOK, 0, 1)])
    return b.build(fmt), head


def test_first_max_head_lemma_exhaustive():
    """Weight exactly 1 on the first position with the largest code, at every
    position of every input (3 letters, length 5), f = 1 and f = 4."""
    for f in (1, 4):
        _, head = _first_max_model(FixedFormat(40, f))
        model, _ = _first_max_model(FixedFormat(head.margin["score_int_bits"], f))
        for xs, toks in _all_inputs():
            codes = [0] + [x + 1 for x in xs]
            for i, w, res in _layer_weights(model, toks, 0):
                want = codes.index(max(codes[:i + 1]))
                assert w == [Fraction(int(j == want)) for j in range(i + 1)], (xs, i, w)
                assert res["at"] == want
    with pytest.raises(MarginError, match="scores up to"):
        _first_max_model(FixedFormat(head.margin["score_int_bits"] - 1, 4))


def test_first_max_head_fails_one_margin_below(monkeypatch):
    assert _inexact_one_margin_below(_first_max_model, 0, monkeypatch) > 0


# ============================================================================
# the Builder's central margin check
def _one_head_builder(bounded=True, bound=3):
    s = G.base_space()
    s.hidden("out", bound=bound)
    b = Builder("hand-built", "transformer", Vocab(4), s, bounded=bounded)
    b.max_positions = 8
    b.readout([("out", K.F_TOK, 0, 1)])
    return b


def test_require_raises_margin_error():
    G.require(True, "never")
    with pytest.raises(MarginError, match="the reason"):
        G.require(False, "the reason")


def test_builder_refuses_a_hand_built_head_whose_scores_exceed_the_format():
    """score = 100 tau_j: |tau| <= 9 in Vocab(4) (numbers tau <= 5, specials down to -9), so the
    builder's bound is 900: refused with 9 integer bits (2^9 = 512), accepted with 11."""
    head = Head("big", [({"one": 100}, {"tok": 1})], {"out": {"tok": 1}}, gap=3)
    b = _one_head_builder()
    b.attention_layer([head])
    bound = b.head_bounds["layer 0 head big"][0]
    assert bound == 100 * 9
    with pytest.raises(MarginError, match="scores up to 900"):
        b.build(FixedFormat(9, 1))
    b.build(FixedFormat(11, 1))
    with pytest.raises(MarginError, match="scores up to 900"):        # checked at once when the builder knows fmt
        b2 = _one_head_builder()
        b2.fmt = FixedFormat(9, 1)
        b2.attention_layer([head])


def test_builder_refuses_a_gap_at_or_below_the_zero_gap():
    for gap, ok in ((2, True), (1, False)):        # f = 1: (f + 1) ln 2 = 1.386
        b = _one_head_builder()
        b.attention_layer([Head("h", [({"one": 1}, {"tok": 1})], {"out": {"tok": 1}}, gap=gap)])
        if ok:
            b.build(FixedFormat(12, 1))
        else:
            with pytest.raises(MarginError, match="score gap 1 is not above"):
                b.build(FixedFormat(12, 1))


def test_bounded_builder_needs_bounds_and_gaps():
    s = G.base_space()
    s.hidden("free")
    s.hidden("out", bound=1)
    b = Builder("unbounded", "transformer", Vocab(4), s, bounded=True)
    b.max_positions = 8
    with pytest.raises(ValueError, match=r"without a bound: \['free'\]"):
        b.attention_layer([Head("h", [({"one": 1}, {"free": 1})], {"out": {"tok": 1}}, gap=3)])
    with pytest.raises(ValueError, match="declares no score gap"):
        b.attention_layer([Head("h2", [({"one": 1}, {"tok": 1})], {"out": {"tok": 1}})])
    b.max_positions = None                           # positions unbounded without max_positions
    with pytest.raises(ValueError, match=r"without a bound: \['pos'\]"):
        b.attention_layer([Head("h3", [({"one": 1}, {"pos": 1})], {"out": {"tok": 1}}, gap=3)])


# ============================================================================
# masking and max MLPs (used by the IsTree model)
def _mlp_eval(neurons, vec):
    outs = {}
    for nr in neurons:
        h = max(Fraction(0), sum(Fraction(c) * vec[k] for k, c in nr.inp.items()) + Fraction(nr.bias))
        for d, c in nr.out.items():
            outs[d] = outs.get(d, Fraction(0)) + Fraction(c) * h
    return outs


@pytest.mark.parametrize("bound", [1, 5, 20])
def test_mask_unless_equal_and_max_neurons_exhaustive(bound):
    """out = x if a != b else 0 (integers a, b; 0 <= x <= B) and max(x, y) for x >= 0,
    evaluated exactly with Fractions from the neurons' definitions, for every x in
    0..B and a, b in -3..3; with the big-M one below x's bound (B - 1) x = B is
    masked wrongly."""
    neurons = G.mask_unless_equal_neurons({"x": 1}, {"a": 1}, {"b": 1}, "masked", bound) + \
        G.max_neurons("x", "a", "mx")
    for x in range(0, bound + 1):
        for a in range(-3, 4):
            for bb in range(-3, 4):
                outs = _mlp_eval(neurons, {"x": x, "a": a, "b": bb})
                assert outs["masked"] == (x if a != bb else 0)
                assert outs["mx"] == max(x, a)
    tight = G.mask_unless_equal_neurons({"x": 1}, {"a": 1}, {"b": 1}, "masked", bound - 1)
    assert _mlp_eval(tight, {"x": bound, "a": 0, "b": 0})["masked"] != 0


# ============================================================================
# match head on two components (a bigram), without fallback: exhaustive
def _bigram_model(fmt, tie_break, L=SMALL_LENGTH):
    """Layer 1: prev1, prev2 = tau of the tokens 1 and 2 back; layer 2: the match
    head with components (tok vs prev1, prev1 vs prev2): key j matches query i iff
    x_{j-1} x_{j-2} = x_i x_{i-1} (tau codes)."""
    s = G.base_space()
    for k in (1, 2):
        s.hidden(f"prev{k}", bound=9), s.hidden(f"prev{k}_sq", bound=81)
    s.hidden("hit", bound=L)
    b = Builder(f"bigram-{tie_break}", "transformer", Vocab(len(SMALL_ALPHABET) - 1), s, bounded=True)
    b.max_positions = L + 1
    b.attention_layer([shift_head(f"prev{k}", "pos", "pos_sq", "one",
                                  {f"prev{k}": {"tok": 1}, f"prev{k}_sq": {"tok_sq": 1}}, fmt,
                                  n_positions=L + 1, shift=k) for k in (1, 2)])
    comps = [G.Component({"tok": 1}, {"prev1": 1}, {"prev1_sq": 1}, 9, 9),
             G.Component({"prev1": 1}, {"prev2": 1}, {"prev2_sq": 1}, 9, 9)]
    head = G.match_head("bigram", components=comps, copy={"hit": {"pos": 1}}, fmt=fmt,
                        n_positions=L + 1 if tie_break else None, tie_break=tie_break)
    b.attention_layer([head])
    b.readout([("hit", K.F_TOK, 0, 1)])
    return b.build(fmt), head


@pytest.mark.parametrize("tie_break", [None, "first", "last"])
def test_match_head_two_components_exhaustive_and_one_margin_below(tie_break, monkeypatch):
    """Every input (3 letters, length 5), f = 1 and 3: weight exactly 1 on the
    (first / last / unique) bigram match. Then with sharpness one smaller (the
    gadget refuses it; built anyway) some weight is no longer exactly 0 or 1."""
    codes = lambda xs: [0] + [x + 1 for x in xs]          # tau at positions 0..L

    def want(c, i):
        hits = [j for j in range(2, i + 1) if (c[j - 1], c[j - 2]) == (c[i], c[i - 1])]
        if len(hits) == 1 or (hits and tie_break):
            return hits[0] if tie_break != "last" else hits[-1]
        return None
    checked = 0
    for f in (1, 3):
        _, head = _bigram_model(FixedFormat(40, f), tie_break)
        model, _ = _bigram_model(FixedFormat(head.margin["score_int_bits"], f), tie_break)
        for xs, toks in _all_inputs():
            c = codes(xs)
            for i, w, res in _layer_weights(model, toks, 1):
                j = want(c, i) if i >= 1 else None
                if j is None:
                    continue
                assert w == [Fraction(int(k == j)) for k in range(i + 1)], (xs, i, w)
                assert res["hit"] == j
                checked += 1
    assert checked > 200
    assert _inexact_one_margin_below(lambda fmt: _bigram_model(fmt, tie_break), 1, monkeypatch) > 0
