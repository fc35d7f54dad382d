"""The two-limb softmax past f = 56: wide.w_exp_neg and wide_attention.w_attend.

w_exp_neg(D, f) must be round(exp(-D / 2^f) 2^f) for every shift D < 2^127 and
every f <= 126, bit for bit: against mpmath at 1,000 bits (each reference is
checked to sit at least 2^-400 from a rounding boundary, so it is exact), and
against fixedpoint.exp_raw, the int64 machine's exp, wherever that one runs
(f <= 56, D < 2^63). w_attend at f > 56 must be fixedpoint.fx_attend's definition
(docs/machine.md) computed with exact rationals: weights, output and errors.
NUMBA_DISABLE_JIT gives the same numbers.
"""
from __future__ import annotations

import json
import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rnngap.constructions.machine import fixedpoint as FP
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine import wide_attention as WA

M63 = (1 << 63) - 1
LN2 = Fraction(6931471805599453094172321214581765680755, 10 ** 40)   # to 10^-40: thresholds only


def _exp_ref(D: int, f: int) -> int:
    """round(exp(-D / 2^f) 2^f), exactly (asserted 2^-400 away from a half)."""
    if D == 0:
        return 1 << f
    with mpmath.workprec(1000):
        y = mpmath.exp(-mpmath.mpf(D) / mpmath.mpf(2) ** f) * mpmath.mpf(2) ** f
        n = int(mpmath.floor(y))
        u = y - n
        assert abs(u - mpmath.mpf(0.5)) > mpmath.mpf(2) ** -400, (D, f)
        return n + int(u > 0.5)


def _exp(D: int, f: int):
    err = FP.new_err()
    h, lo = WD.w_exp_neg(np.int64(D >> 126), np.int64((D >> 63) & M63), np.int64(D & M63), f, err)
    return int(h) * (1 << 63) + int(lo), int(err[FP.E_CODE])


def _threshold(f: int) -> int:
    """About (f + 1) ln 2 2^f: the shifts where the result turns 0."""
    return int((f + 1) * LN2 * (1 << f))


@settings(max_examples=300, deadline=None)
@given(f=st.integers(1, 126), how=st.sampled_from(["any", "small", "threshold", "tiny"]),
       r=st.integers(0, (1 << 127) - 1))
def test_exp_is_exactly_rounded_at_every_width(f, how, r):
    if how == "any":
        D = r
    elif how == "small":                                      # x below 8: results near 2^f
        D = r % (8 << f)
    elif how == "threshold":                                  # results 0, 1, 2 around (f + 1) ln 2
        D = max(0, _threshold(f) + (r % (4 << f)) - (2 << f))
    else:
        D = r % 64                                            # x a few 2^-f: 2^f - D and its neighbours
    D = min(D, (1 << 127) - 1)
    if D == 0 and f == 126:
        return                                                # 2^126: not a two-limb raw (the caller clamps)
    assert _exp(D, f) == (_exp_ref(D, f), 0)


def test_exp_boundaries_and_the_int64_exp():
    """The largest shift, shifts at the zero boundary of every f, the smallest
    shifts; and wherever fixedpoint.exp_raw runs (f <= 56, D < 2^63) both agree."""
    rng = random.Random(56)
    cases = [((1 << 127) - 1, 126), ((1 << 127) - 1, 1), (1, 126), (1, 125), (0, 125), (0, 1), (1 << 126, 126)]
    for f in range(1, 127):
        t = _threshold(f)
        cases += [(t + d, f) for d in (-3 << f, -1, 0, 1, 1 << f)] + [(rng.randrange(1 << min(127, f + 7)), f)]
    zeros = ones = 0
    for D, f in cases:
        D = max(0, min(D, (1 << 127) - 1))
        got = _exp(D, f)
        assert got == (_exp_ref(D, f), 0), (D, f)
        zeros += got[0] == 0
        ones += got[0] == 1
    assert zeros > 50 and ones > 20                          # both sides of the zero boundary were hit
    agree = 0
    for _ in range(3000):
        f = rng.randint(0, 56)
        D = rng.choice([rng.randrange(1 << 63), rng.randrange(max(1, _threshold(f) + (2 << f))), rng.randrange(1 << f + 1)])
        e = FP.new_err()
        want = int(FP.exp_raw(np.int64(-D), 62 - f, f, FP.MODE_RAISE, e))
        assert _exp(D, f) == (want, int(e[FP.E_CODE])), (D, f)
        agree += want not in (0, 1 << f)
    assert agree > 1000


def _round_half_even(q: Fraction) -> int:
    n = q.numerator // q.denominator
    r = q - n
    return n + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2) else 0)


def _attend_ref(scores, values, I, f):
    """fx_attend's definition on exact integers (raise mode, no overflow expected):
    (weights, output)."""
    M = max(scores)
    e = [_exp_ref(M - s, f) for s in scores]
    Z = sum(e)
    w = [_round_half_even(Fraction(x << f, Z)) for x in e]
    out = [sum(_round_half_even(Fraction(wj * v[k], 1 << f)) for wj, v in zip(w, values) if wj)
           for k in range(len(values[0]))]
    return w, out


def _attend(scores, values, I, f, mode=FP.MODE_RAISE):
    m, d = len(scores), len(values[0])
    s = np.array([WD.to_limbs(x) for x in scores], np.int64)
    V = np.array([[WD.to_limbs(x) for x in row] for row in values], np.int64)
    Mh, Ml = WD.to_limbs(max(scores))
    w, out, err = np.zeros((m, 2), np.int64), np.zeros((d, 2), np.int64), WD.new_wide_err()
    WA.w_attend(s, np.int64(Mh), np.int64(Ml), m, V, I, f, mode, err, FP.new_err(), np.zeros(WX.SCRATCH_LEN, np.int64),
                w, np.zeros((2 * d, 3), np.int64), out, np.zeros(m, np.int64), -1)
    return ([WD.from_limbs(*w[j]) for j in range(m)], [WD.from_limbs(*out[k]) for k in range(d)],
            [int(x) for x in err])


def _attend_case(rng: random.Random):
    f = rng.randint(57, 120)
    m, d = rng.randint(1, 7), rng.randint(1, 3)
    I = rng.randint(m.bit_length() + 1, 126 - f)             # Z <= m 2^f fits
    lim = (1 << (I + f)) - 1
    top = rng.randint(-lim // 2, lim // 2)
    spread = rng.choice([1 << f, 4 << f, 64 << f, lim])       # gaps of a few units up to the whole range
    scores = [max(-lim, min(lim, top - rng.randint(0, spread))) for _ in range(m)]
    if rng.random() < 0.3:
        scores[rng.randrange(m)] = max(scores)                # ties at the top
    vb = min(lim, 1 << min(I + f - 1, f + rng.randint(0, I)))
    values = [[rng.randint(-vb, vb) for _ in range(d)] for _ in range(m)]
    return scores, values, I, f


def test_attention_past_f56_is_the_exact_definition():
    rng = random.Random(57)
    split = 0
    for trial in range(300):
        scores, values, I, f = _attend_case(rng)
        w, out, err = _attend(scores, values, I, f)
        want_w, want_out = _attend_ref(scores, values, I, f)
        assert err[FP.E_CODE] == 0, (trial, err)
        assert (w, out) == (want_w, want_out), trial
        split += sum(1 for x in w if 0 < x < 1 << f) >= 2
    assert split > 50                                         # not only one-hot weights


def test_attention_exp_zero_at_f126_and_clamp_at_I0():
    """exp(0) = 2^f overflows Q0.f (recorded with need 1, clamped in saturate mode);
    at I + f = 126 the shift M - s passes 2^126 and is still exact."""
    w, out, err = _attend([0, -((1 << 125) - 1)], [[1], [1]], 0, 125)
    assert err[FP.E_CODE] == FP.ERR_OVERFLOW and err[FP.E_OP] == FP.OP_EXP and err[FP.E_NEED] == 1
    w, out, err = _attend([0, -((1 << 125) - 1)], [[1], [1]], 0, 125, FP.MODE_SATURATE)
    assert err[FP.E_CODE] == 0 and err[FP.E_SAT] >= 1
    scores = [(1 << 125) - 7, -((1 << 125) - 9)]             # shift (2^126 - 16): x near 2 at f = 125
    w, out, err = _attend(scores, [[3], [5]], 1, 125)
    assert (w, out) == _attend_ref(scores, [[3], [5]], 1, 125) and err[FP.E_CODE] == 0
    assert 0 < w[1] < w[0]
    scores = [(1 << 126) - 1, -((1 << 126) - 1)]             # shift 2^127 - 2: its third limb is 1
    w, out, err = _attend(scores, [[3], [5]], 1, 125)
    assert (w, out) == _attend_ref(scores, [[3], [5]], 1, 125) and err[FP.E_CODE] == 0 and w[1] > 0


def fingerprint(seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(12):
        f = rng.randint(1, 126)
        D = rng.randrange(min(1 << 127, _threshold(f) + (1 << f)))
        out.append([f, str(D), str(_exp(D, f)[0])])
    for _ in range(6):
        w, o, err = _attend(*_attend_case(rng))
        out.append([[str(x) for x in w], [str(x) for x in o], err])
    return out


def test_no_jit_gives_the_same_results():
    from _nojit import fingerprint_without_jit
    assert json.loads(json.dumps(fingerprint(7))) == fingerprint_without_jit(__file__, 7)


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
