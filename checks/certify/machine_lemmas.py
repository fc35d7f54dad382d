"""The machine lemmas a whole-model certificate stands on, checked on the kernels
themselves for EVERY format the int64 machine holds (I >= 1, f >= 0, I + f <= 62),
and, for the constructions that run in two-limb storage past int64, at each of
their declared two-limb formats on the two-limb executor's kernels.

A certificate proves integer score gaps of at least s = sharpness(f) >
(f + 1) ln 2, and ties for the Counting head. It needs two lemmas of
``fixedpoint.fx_attend``: **one-hot** (the rest at least s below the one maximum:
weights exactly (1, 0, ..., 0), the winner's value exactly) and **equal split**
(m tied maxima: each weight within 2^-(f+1) of 1/m). Both are checked per format
through ``exp_raw``, ``fx_attend`` and ``fx_div``, by exact integer comparisons;
a failure names the format and the input.

Details (how each lemma is checked): docs/internals/certify.md#machine_lemmas
"""
from __future__ import annotations

import time
from fractions import Fraction
from functools import lru_cache

import numpy as np

from rnngap.constructions.machine import fixedpoint as FP
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_attention as WA
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.build.num import sharpness

EQUAL_SPLIT_LOW = 256
EQUAL_SPLIT_TOP = 64


def formats(max_bits: int = FP.MAX_MAGNITUDE_BITS):
    """Every (I, f) with I >= 1, f >= 0 and I + f <= max_bits."""
    for f in range(0, max_bits):
        for I in range(1, max_bits - f + 1):
            yield I, f


def _round_half_even(x: Fraction) -> int:
    q, r = divmod(x.numerator, x.denominator)
    r2 = 2 * r
    if r2 > x.denominator or (r2 == x.denominator and q % 2 == 1):
        q += 1
    return q


@lru_cache(maxsize=None)
def lemmas_at(I: int, f: int) -> tuple:
    """Failures of both lemmas at (I, f), cached (a certificate asks for the formats
    of its pieces): on the int64 kernels when I + f <= 62, else on the two-limb
    executor's (:func:`one_hot_two_limb`, :func:`equal_split_two_limb`), the
    executor a model of that declared format runs on."""
    if I + f <= FP.MAX_MAGNITUDE_BITS:
        return tuple(one_hot(I, f) + equal_split(I, f))
    return tuple(one_hot_two_limb(I, f) + equal_split_two_limb(I, f))


def one_hot(I: int, f: int, s: int | None = None) -> list[str]:
    """Failures of the one-hot lemma at (I, f) (module doc) for integer gaps >= s
    (default sharpness(f)); [] when it holds."""
    s = sharpness(f) if s is None else s
    if s >= 1 << (I + 1):
        return []                                # no two scores of the format are s apart
    mode, bad = FP.MODE_RAISE, []
    thr = int(FP.exp_zero_threshold(f))
    limit = 1 << (I + 1)                         # two scores of the format differ by less (|score| < 2^I)
    g = s                                        # raw gaps g 2^f < 2^(I+1+f) <= 2^63: every d fits int64
    while g < limit and -g * (1 << f) >= thr:
        e = int(FP.exp_raw(np.int64(-g * (1 << f)), I, f, mode, FP.new_err()))
        if e != 0:
            bad.append(f"Q{I}.{f}: exp of gap {g} rounds to raw {e}, not 0")
        g += 1
    top = (1 << (I + f)) - 1
    for gap in sorted({s} | ({g} if g < limit else set())):
        d = -gap * (1 << f)
        for v in (top, -top, 1, 0):
            scores = np.array([0, d], dtype=np.int64)
            values = np.array([[v], [top]], dtype=np.int64)
            w, out, err = np.zeros(2, np.int64), np.zeros(1, np.int64), FP.new_err()
            FP.fx_attend(scores, 2, values, I, f, mode, err, w, out)
            if int(w[0]) != 1 << f or int(w[1]) != 0 or int(out[0]) != v:
                bad.append(f"Q{I}.{f}: attend on gap {gap} gives weights {list(w)} and {int(out[0])}, not "
                           f"({1 << f}, 0) and {v}")
    return bad


def _equal_split(I: int, f: int, divide, what: str = "") -> list[str]:
    """Failures of the equal-split lemma at (I, f) with ``divide(2^f, m 2^f)`` ->
    (raw, erred) the machine's division (module doc), or None where the word cannot
    hold m 2^f (no normaliser of the format is that large: skipped)."""
    hi = (1 << I) - 1
    ms = set(range(1, min(hi, EQUAL_SPLIT_LOW) + 1)) | set(range(max(1, hi - EQUAL_SPLIT_TOP + 1), hi + 1))
    bad = []
    one = 1 << f
    for m in sorted(ms):
        r = divide(one, m * one)
        if r is None:
            continue
        w, erred = r
        want = _round_half_even(Fraction(one, m))
        if w != want or erred:
            bad.append(f"Q{I}.{f}: {what}1/{m} rounds to raw {w}, not {want}")
    return bad


def equal_split(I: int, f: int) -> list[str]:
    """Failures of the equal-split lemma at (I, f) on fixedpoint.fx_div; [] when it holds."""
    def divide(a, b):
        if b >= 1 << 62:
            return None
        return int(FP.fx_div(np.int64(a), np.int64(b), I, f, FP.MODE_RAISE, FP.new_err())), False
    return _equal_split(I, f, divide)


def one_hot_two_limb(I: int, f: int, s: int | None = None) -> list[str]:
    """:func:`one_hot` on the two-limb softmax (constructions/wide_attention.w_attend,
    formats up to I + f = 126): the exps of the gaps not below the zero threshold
    (up to f = 56 its exp_raw on int64 shifts, result format Q(min(I, 62 - f)).f;
    past it wide.w_exp_neg on the shift's limbs, which returns 0 by its first
    branch for a gap past 90, so the gaps s..90 are run) and the softmax on scores
    (0, -gap 2^f) with values +-(2^(I+f) - 1), 1, 0."""
    s = sharpness(f) if s is None else s
    if s >= 1 << (I + 1):
        return []
    mode, bad = FP.MODE_RAISE, []
    limit = 1 << (I + 1)
    g = s
    if f <= WA.EXP_INT64_MAX_FRAC_BITS:
        thr = int(FP.exp_zero_threshold(f))
        while g < limit and -g * (1 << f) >= thr:        # |d| < 2^63 here (f <= 56)
            e = int(FP.exp_raw(np.int64(-g * (1 << f)), min(I, 62 - f), f, mode, FP.new_err()))
            if e != 0:
                bad.append(f"Q{I}.{f}: exp of gap {g} rounds to raw {e}, not 0")
            g += 1
    else:
        while g < limit and g <= 90:                      # past 90 w_exp_neg's first branch gives 0
            d = g << f                                    # below 2^127: three magnitude limbs
            e = WD.w_exp_neg(np.int64(d >> 126), np.int64((d >> 63) & ((1 << 63) - 1)),
                             np.int64(d & ((1 << 63) - 1)), f, FP.new_err())
            if WD.from_limbs(*e) != 0:
                bad.append(f"Q{I}.{f}: exp of gap {g} rounds to raw {WD.from_limbs(*e)}, not 0")
            g += 1
    top = (1 << (I + f)) - 1
    for gap in sorted({s} | ({g} if g < limit else set())):
        for v in (top, -top, 1, 0):
            scores = np.array([WD.to_limbs(0), WD.to_limbs(-gap * (1 << f))], dtype=np.int64)
            values = np.array([[WD.to_limbs(v)], [WD.to_limbs(top)]], dtype=np.int64)
            w, out, err = np.zeros((2, 2), np.int64), np.zeros((1, 2), np.int64), WD.new_wide_err()
            WA.w_attend(scores, np.int64(0), np.int64(0), 2, values, I, f, mode, err, FP.new_err(),
                        np.zeros(WX.SCRATCH_LEN, np.int64), w, np.zeros((2, 3), np.int64), out,
                        np.zeros(2, np.int64), -1)
            got = WD.from_limbs(out[0, 0], out[0, 1])
            w0, w1 = WD.from_limbs(w[0, 0], w[0, 1]), WD.from_limbs(w[1, 0], w[1, 1])
            if w0 != 1 << f or w1 != 0 or got != v or err[FP.E_CODE] != 0:
                bad.append(f"Q{I}.{f}: two-limb attend on gap {gap} gives weights {w0} and {w1} and {got}, not "
                           f"({1 << f}, 0) and {v}")
    return bad


def equal_split_two_limb(I: int, f: int) -> list[str]:
    """:func:`equal_split` on the two-limb division (wide.w_div)."""

    def divide(a, b):
        if b >= 1 << WD.MAX_WIDE_BITS:
            return None
        err = WD.new_wide_err()
        h, lo = WD.w_div(*[np.int64(x) for x in WD.to_limbs(a) + WD.to_limbs(b)], I, f, FP.MODE_RAISE, err)
        return WD.from_limbs(h, lo), err[FP.E_CODE] != 0
    return _equal_split(I, f, divide, "two-limb ")


def check_all(max_bits: int = FP.MAX_MAGNITUDE_BITS) -> dict:
    """Both lemmas on every format: {"formats", "one_hot_vacuous", "failures", "seconds"}."""
    t0 = time.perf_counter()
    failures, n, vacuous = [], 0, 0
    for I, f in formats(max_bits):
        n += 1
        if sharpness(f) >= 1 << (I + 1):
            vacuous += 1
        failures += list(lemmas_at(I, f))
    return {"formats": n, "one_hot_vacuous": vacuous, "failures": failures,
            "seconds": round(time.perf_counter() - t0, 3)}
