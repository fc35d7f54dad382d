"""Fixed-point core (constructions/machine/fixedpoint.py) against exact arithmetic, docs/theory.md §1.

Every operation is compared with an independent exact reference (tests/_exact.py:
``Fraction`` for add/sub/mul/div, certified mpmath at >= 320 bits for exp, the
softmax of docs/theory.md §1 step by step) with zero tolerated mismatches:

* add/sub/mul/div/exp in ``raise`` mode: the result equals the exact rounded raw
  when it fits (|raw| <= 2^(I+f) - 1), and :class:`FixedPointOverflow` is raised
  exactly when it does not, naming the op, with ``needed_int_bits`` a true lower
  bound on the integer bits of the exact rounded result (exact for add/sub and
  whenever the kernel range-checks the rounded result itself; for mul/div it may
  be the need of the truncated magnitude; for exp it is computed in floats and
  may fall short, never exceed);
* ties built explicitly for mul (a*b = odd * 2^(f-1)) and div (a * 2^(f+1) = odd * b);
  exp arguments around the zero threshold -(f+1) ln 2, the overflow threshold
  I ln 2, the bit-length boundaries k ln 2 and the rounding boundaries
  ln((n + 1/2) 2^-f);
* ``saturate`` mode clamps to +-max_raw and counts each clamp in ``err[E_SAT]``;
  division by zero raises in both modes;
* ``encode``/``decode``: exact mode refuses off-grid values, ``exact=False`` rounds
  half to even, overflow and saturation, round trip on the grid;
* softmax attention (``FixedFormat.attend`` = kernel ``fx_attend``): weights and
  outputs equal the exact reference, including all-equal scores, one dominant
  score with a gap just above/below (f+1) ln 2 (weight exactly 0 or not), and the
  overflow of Z = sum e_j;
* ``err[E_MAXABS]`` is the max |raw| over the results of a chain of ops;
* the kernels give identical results with NUMBA_DISABLE_JIT=1 (subprocess).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from _exact import (RefOverflow, attend_exact, clamp, div_exact, exp_exact, fits, max_raw,
                    mul_exact, need_bits, rne)
from rnngap.constructions.machine.fixedpoint import (
    E_CODE, E_MAXABS, E_OP, E_SAT, E_WHERE, ERR_OK, ERR_OVERFLOW, MODE_RAISE, MODE_SATURATE, OP_ADD, OP_DIV, OP_EXP, OP_MUL, OP_SUB, FixedPointDivisionByZero, FixedPointOverflow, fx_add, fx_div, fx_exp, fx_mul, fx_sub, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat

REPO_ROOT = Path(__file__).resolve().parents[1]
KERNELS = {"add": fx_add, "sub": fx_sub, "mul": fx_mul, "div": fx_div, "exp": fx_exp}
OP_CODES = {"add": OP_ADD, "sub": OP_SUB, "mul": OP_MUL, "div": OP_DIV, "exp": OP_EXP}


# =============================================================================
# strategies
@st.composite
def formats(draw, min_int_bits: int = 0, max_frac_bits: int = 62):
    """(I, f) with I >= min_int_bits, f >= 0, I + f <= 62, biased to the edges."""
    I = draw(st.one_of(
        st.sampled_from(sorted({min_int_bits, min_int_bits + 1, 2, 31, 61, 62} & set(range(min_int_bits, 63)))),
        st.integers(min_int_bits, 62)))
    top = min(62 - I, max_frac_bits)
    f = draw(st.one_of(st.sampled_from(sorted({0, 1, top // 2, top} & set(range(top + 1)))),
                       st.integers(0, top)))
    return I, f


def signed(mag: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    return st.tuples(mag, st.booleans()).map(lambda t: -t[0] if t[1] else t[0])


def raws(I: int, f: int) -> st.SearchStrategy[int]:
    """Raws of Q(I).(f), biased to 0, +-1, +-max_raw, +-max_raw//2, powers of two (+-1),
    the value 1 and small values."""
    M = max_raw(I, f)
    if M == 0:
        return st.just(0)
    edges = sorted(x for x in {0, 1, 2, 3, M, M - 1, M // 2, M // 2 + 1, 1 << f} if x <= M)
    bits = I + f
    pow2 = st.tuples(st.integers(0, bits - 1), st.sampled_from([-1, 0, 1])).map(
        lambda t: min(M, max(0, (1 << t[0]) + t[1])))
    mag = st.one_of(st.sampled_from(edges), pow2, st.integers(0, M),
                    st.integers(0, min(M, 1 << (f + 2))))
    return signed(mag)


def odd_upto(n: int) -> st.SearchStrategy[int]:
    """An odd integer in [1, n], n >= 1."""
    return st.integers(0, (n - 1) // 2).map(lambda k: 2 * k + 1)


@st.composite
def fmt_and_raws(draw, k: int, min_int_bits: int = 0):
    I, f = draw(formats(min_int_bits))
    return (I, f, *[draw(raws(I, f)) for _ in range(k)])


@st.composite
def mul_cases(draw):
    """(I, f, a, b): random raws, exact ties a*b = odd * 2^(f-1) (and their neighbours),
    products landing around the largest magnitude, or just past it after rounding."""
    I, f = draw(formats())
    M = max_raw(I, f)
    kind = draw(st.sampled_from(["random", "tie", "boundary", "round_up"]))
    lo = (2 * M + 1) << max(0, f - 1)          # (M + 1/2) 2^f when f >= 1
    if kind == "round_up" and f >= 1 and M >= 1 and -(-lo // M) <= M:
        # a*b >= (M + 1/2) 2^f: the smallest such b; when a*b < (M + 1) 2^f as well the
        # truncated product fits and only the rounding leaves the range (e.g. Q2.2, 7 * 9)
        a = draw(st.integers(-(-lo // M), M))
        b = min(M, -(-lo // a))
    elif kind == "tie" and f >= 1 and M >= 1:
        s = draw(st.integers(0, f - 1))
        a = draw(odd_upto(M >> s)) << s
        b = draw(odd_upto(M >> (f - 1 - s))) << (f - 1 - s)
        b = min(M, max(0, b + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))))
    elif kind == "boundary" and M >= 1:
        a = draw(st.integers(1, M))
        b = min(M, max(0, (M << f) // a + draw(st.integers(-3, 3))))
    else:
        a, b = draw(raws(I, f)), draw(raws(I, f))
    sa, sb = draw(st.booleans()), draw(st.booleans())
    return I, f, -a if sa else a, -b if sb else b


@st.composite
def div_cases(draw):
    """(I, f, a, b), b != 0: random raws, exact ties a * 2^(f+1) = odd * b
    (a = q t, b = t 2^(f+1), q odd; needs I >= 2), or quotients around the largest
    magnitude."""
    I, f = draw(formats())
    M = max_raw(I, f)
    assume(M >= 1)
    kind = draw(st.sampled_from(["random", "tie", "boundary"]))
    if kind == "tie" and (M >> (f + 1)) >= 1:
        t = draw(st.one_of(st.integers(1, M >> (f + 1)), st.just(1), st.just(M >> (f + 1))))
        q = draw(odd_upto(M // t))
        a, b = q * t, t << (f + 1)
        a = min(M, max(0, a + draw(st.sampled_from([0, 0, 0, 0, -1, 1]))))
    elif kind == "boundary":
        a = draw(st.integers(1, M))
        b = min(M, max(1, ((a << f) // M) + draw(st.integers(-3, 3))))
    else:
        a, b = draw(raws(I, f)), draw(raws(I, f))
        assume(b != 0)
    sa, sb = draw(st.booleans()), draw(st.booleans())
    return I, f, -a if sa else a, -b if sb else b


def _floor_center(expr_of_ln2) -> int:
    with mpmath.workprec(256):
        return int(mpmath.floor(expr_of_ln2()))


@st.composite
def exp_cases(draw):
    """(I, f, d): raws d around the zero threshold -(f+1) ln 2 2^f, the overflow
    threshold I ln 2 2^f, the need boundaries k ln 2 2^f (k > I), the rounding
    boundaries 2^f ln((n + 1/2) 2^-f), or anywhere."""
    I, f = draw(formats())
    M = max_raw(I, f)
    kind = draw(st.sampled_from(["random", "zero", "overflow", "need", "near_tie", "small"]))
    if kind == "random":
        return I, f, draw(raws(I, f))
    if kind == "small":
        return I, f, draw(st.integers(-(4 << f), 4 << f).map(lambda d: clamp(d, I, f)))
    if kind == "zero":
        c = _floor_center(lambda: -(f + 1) * mpmath.ln2 * mpmath.ldexp(1, f))
    elif kind == "overflow":
        c = _floor_center(lambda: I * mpmath.ln2 * mpmath.ldexp(1, f))
    elif kind == "need":
        k = I + draw(st.integers(1, 8))
        c = _floor_center(lambda: k * mpmath.ln2 * mpmath.ldexp(1, f))
    else:
        n = draw(st.one_of(st.integers(0, 8), st.integers(0, M)))
        c = _floor_center(lambda: mpmath.ldexp(mpmath.log(mpmath.ldexp(2 * n + 1, -f - 1)), f))
    d = c + draw(st.integers(-4, 4))
    return I, f, clamp(d, I, f)


# =============================================================================
# references per op, and the raise-mode check shared by all scalar ops
def reference(op: str, args: tuple[int, ...], f: int) -> tuple[int | None, int, int]:
    """(exact rounded raw or None if astronomically large and positive, need of the
    rounded result, need of the truncated magnitude)."""
    if op in ("add", "sub"):
        r = args[0] + args[1] if op == "add" else args[0] - args[1]
        return r, need_bits(r, f), need_bits(r, f)
    if op == "mul":
        r, t = mul_exact(args[0], args[1], f)
    elif op == "div":
        r, t = div_exact(args[0], args[1], f)
    else:
        e = exp_exact(args[0], f)
        return e.raw, max(0, e.raw_bits - f), max(0, e.trunc_bits - f)
    return r, need_bits(r, f), need_bits(t, f)


def out_of_range(raw: int | None, I: int, f: int) -> bool:
    return raw is None or not fits(raw, I, f)


def check_raise_mode(op: str, I: int, f: int, *args: int) -> None:
    assert all(fits(a, I, f) for a in args)              # the strategies stay in range
    fmt = FixedFormat(I, f)
    r, need, trunc_need = reference(op, args, f)
    method = getattr(fmt, op)
    if not out_of_range(r, I, f):
        assert method(*args) == r, (op, I, f, args)
        return
    with pytest.raises(FixedPointOverflow) as ei:
        method(*args)
    e = ei.value
    assert e.op == op and e.int_bits == I
    # the result does not fit in I bits, and the reported need is a true lower bound
    assert I < e.needed_int_bits <= need, (op, I, f, args, e.needed_int_bits, need)
    if op in ("add", "sub"):
        assert e.needed_int_bits == need
    elif op in ("mul", "div"):
        # exact: either the need of the rounded result or of the truncated one
        assert e.needed_int_bits in (need, trunc_need), (op, I, f, args, e.needed_int_bits)
    else:
        # exp: floor(x / ln 2) + 1 evaluated in binary64 with a safety margin of
        # 2^-50 (relative) towards zero: off by at most 1 + need * 2^-49
        assert e.needed_int_bits >= trunc_need - 1 - (trunc_need >> 49), (I, f, args)


# =============================================================================
# scalar ops, raise mode
@settings(max_examples=500)
@given(fmt_and_raws(2))
@example((2, 1, 7, 1))                  # 3.5 + 0.5 = 4 needs 3 integer bits
@example((0, 0, 0, 0))
@example((1, 61, (1 << 62) - 1, (1 << 62) - 1))
def test_add_exact(case):
    check_raise_mode("add", *case)


@settings(max_examples=500)
@given(fmt_and_raws(2))
@example((1, 61, -((1 << 62) - 1), (1 << 62) - 1))
def test_sub_exact(case):
    check_raise_mode("sub", *case)


@settings(max_examples=1000)
@given(mul_cases())
@example((4, 3, 12, 5))                 # doc example: 15/16 -> 1 (half to even)
@example((4, 3, 12, 7))                 # 21/16 -> 10/8 (half to even, down)
@example((62, 0, (1 << 62) - 1, (1 << 62) - 1))
@example((0, 62, (1 << 62) - 1, (1 << 62) - 1))
@example((1, 61, (1 << 62) - 1, -((1 << 62) - 1)))
@example((31, 31, (1 << 62) - 1, (1 << 62) - 1))
@example((2, 2, 7, 9))                  # 63/16 -> 16/4 = 4.0: only the rounding overflows
def test_mul_exact(case):
    check_raise_mode("mul", *case)


@settings(max_examples=300)
@given(st.data())
def test_mul_ties_round_half_even(data):
    """a = u 2^s, b = v 2^(f-1-s) with u, v odd: a*b / 2^f = odd / 2, an exact tie."""
    I, f = data.draw(formats(), "format")
    assume(f >= 1 and max_raw(I, f) >= 1)
    M = max_raw(I, f)
    s = data.draw(st.integers(0, f - 1), "s")
    a = data.draw(odd_upto(M >> s), "u") << s
    b = data.draw(odd_upto(M >> (f - 1 - s)), "v") << (f - 1 - s)
    assert Fraction(a * b, 1 << f).denominator == 2      # the construction is a tie
    for sa, sb in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
        check_raise_mode("mul", I, f, sa * a, sb * b)
    r, _, _ = reference("mul", (a, b), f)
    assert r % 2 == 0 or not fits(r, I, f)               # half to even lands on even raws


@settings(max_examples=1000)
@given(div_cases())
@example((4, 3, 1, 16))                 # (1/8) / 2 = 1/16 -> 0 (half to even)
@example((4, 3, 3, 16))                 # (3/8) / 2 = 3/16 -> 2/8
@example((0, 62, (1 << 62) - 1, (1 << 62) - 2))
@example((0, 62, (1 << 62) - 2, (1 << 62) - 1))
@example((62, 0, (1 << 62) - 1, 1))
@example((61, 1, (1 << 62) - 1, 1))
def test_div_exact(case):
    check_raise_mode("div", *case)


@settings(max_examples=300)
@given(st.data())
def test_div_ties_round_half_even(data):
    """a = q t, b = t 2^(f+1), q odd: a * 2^f / b = q / 2, an exact tie (needs I >= 2)."""
    I, f = data.draw(formats(min_int_bits=2), "format")
    M = max_raw(I, f)
    t = data.draw(st.integers(1, M >> (f + 1)), "t")
    q = data.draw(odd_upto(M // t), "q")
    a, b = q * t, t << (f + 1)
    assert Fraction(a << f, b).denominator == 2
    for sa, sb in ((1, 1), (-1, 1), (1, -1), (-1, -1)):
        check_raise_mode("div", I, f, sa * a, sb * b)
    assert rne(Fraction(q, 2)) % 2 == 0


@settings(max_examples=200)
@given(fmt_and_raws(1))
def test_div_by_zero_raises(case):
    I, f, a = case
    for mode in ("raise", "saturate"):
        with pytest.raises(FixedPointDivisionByZero):
            FixedFormat(I, f, mode).div(a, 0)


@settings(max_examples=1000)
@given(exp_cases())
@example((4, 3, 0))                     # exp(0) = 1 exactly
@example((0, 5, 0))                     # exp(0) = 1 does not fit Q0.5
@example((0, 62, -((1 << 62) - 1)))
@example((62, 0, (1 << 62) - 1))        # exp(2^62 - 1): needs ~6.65e18 integer bits
@example((62, 0, -((1 << 62) - 1)))
@example((10, 50, 8584557806227368))    # x just below 11 ln 2: needs exactly 11 bits
@example((10, 50, 9364972152248038))    # x just below 12 ln 2: needs exactly 12 bits
@example((1, 3, -4))                    # exp(-1/2) * 8 = 4.85 -> 5
@example((0, 54, 12486629536330718))    # x just below ln 2: needs exactly 1 bit
@example((6, 50, -39801131647054165))   # exp(x) 2^50 = 1/2 - 1.9e-17: rounds to 0
def test_exp_exact(case):
    check_raise_mode("exp", *case)


def test_exp_overflow_need_is_a_lower_bound():
    """Regression: x = d / 2^50 just below k ln 2 (k = 11..16) overflows Q10.50 and
    needs exactly k integer bits; the binary64 quotient x / ln 2 rounds up to k, and
    the kernel used to report k + 1 (not a lower bound)."""
    I, f = 10, 50
    fmt = FixedFormat(I, f)
    for k in range(11, 17):
        d = _floor_center(lambda: k * mpmath.ln2 * mpmath.ldexp(1, f))
        for delta in range(-3, 1):
            e = exp_exact(d + delta, f)
            assert e.raw_bits - f == k            # reference: exactly k integer bits
            with pytest.raises(FixedPointOverflow) as ei:
                fmt.exp(d + delta)
            assert k - 1 <= ei.value.needed_int_bits <= k


# =============================================================================
# saturate mode and the err array
@st.composite
def any_op_cases(draw):
    op = draw(st.sampled_from(sorted(KERNELS)))
    if op == "mul":
        return (op, *draw(mul_cases()))
    if op == "div":
        return (op, *draw(div_cases()))
    if op == "exp":
        return (op, *draw(exp_cases()))
    return (op, *draw(fmt_and_raws(2)))


def run_kernel(op: str, I: int, f: int, mode: int, args, err=None):
    err = new_err() if err is None else err
    r = KERNELS[op](*[np.int64(a) for a in args], I, f, mode, err)
    return int(r), err


@settings(max_examples=600)
@given(any_op_cases())
def test_saturate_mode_clamps_and_counts(case):
    op, I, f, *args = case
    r, _, _ = reference(op, tuple(args), f)
    M = max_raw(I, f)
    expected = M if r is None else clamp(r, I, f)
    got, err = run_kernel(op, I, f, MODE_SATURATE, args)
    assert got == expected
    assert err[E_CODE] == ERR_OK
    assert err[E_SAT] == (1 if out_of_range(r, I, f) else 0)
    assert err[E_MAXABS] == abs(expected)
    assert getattr(FixedFormat(I, f, "saturate"), op)(*args) == expected


@settings(max_examples=600)
@given(any_op_cases())
def test_raise_mode_err_record(case):
    """Kernel level: out of range records (ERR_OVERFLOW, op) and returns the clamped
    value; in range leaves the record clean. Never a saturation count."""
    op, I, f, *args = case
    r, _, _ = reference(op, tuple(args), f)
    got, err = run_kernel(op, I, f, MODE_RAISE, args)
    assert err[E_SAT] == 0 and err[E_WHERE] == -1
    if out_of_range(r, I, f):
        assert (err[E_CODE], err[E_OP]) == (ERR_OVERFLOW, OP_CODES[op])
        assert got == (max_raw(I, f) if r is None else clamp(r, I, f))
    else:
        assert err[E_CODE] == ERR_OK and got == r


@st.composite
def chains(draw):
    I, f = draw(formats())
    start = draw(raws(I, f))
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(KERNELS)), raws(I, f)), min_size=1, max_size=12))
    return I, f, start, steps


@settings(max_examples=200)
@given(chains())
def test_err_maxabs_is_max_abs_result_of_chain(case):
    """acc <- op(acc, b) along a chain (steps whose exact result would overflow or
    divide by zero are left out); err[E_MAXABS] = max |result|."""
    I, f, acc, steps = case
    err = new_err()
    produced = []
    for op, b in steps:
        args = (acc,) if op == "exp" else (acc, b)
        if op == "div" and b == 0:
            continue
        r, _, _ = reference(op, args, f)
        if out_of_range(r, I, f):
            continue
        got, _ = run_kernel(op, I, f, MODE_RAISE, args, err)
        assert got == r, (op, args)
        produced.append(r)
        acc = r
    assert err[E_CODE] == ERR_OK and err[E_SAT] == 0
    expected = max((abs(r) for r in produced), default=0)
    assert err[E_MAXABS] == expected
    assert FixedFormat(I, f).used_int_bits(err) == need_bits(expected, f)


# =============================================================================
# encode / decode
@st.composite
def encode_cases(draw):
    """(I, f, x): on-grid values (raws, also past the range), off-grid dyadics
    (ties included), other rationals, finite floats."""
    I, f = draw(formats())
    kind = draw(st.sampled_from(["grid", "beyond", "dyadic", "rational", "float"]))
    if kind == "grid":
        x = Fraction(draw(raws(I, f)), 1 << f)
    elif kind == "beyond":
        x = Fraction(draw(signed(st.integers(max_raw(I, f) + 1, 1 << (I + f + 3)))), 1 << f)
    elif kind == "dyadic":
        k = draw(st.integers(1, 8))
        x = Fraction(draw(signed(st.integers(0, 1 << (I + f + k + 1)))), 1 << (f + k))
    elif kind == "rational":
        x = Fraction(draw(st.integers(-(1 << 70), 1 << 70)), draw(st.integers(1, 1 << 20)))
    else:
        x = draw(st.floats(allow_nan=False, allow_infinity=False))
    form = draw(st.sampled_from(["fraction", "native"]))
    if form == "native" and not isinstance(x, float) and x.denominator == 1:
        x = int(x)
    return I, f, x


@settings(max_examples=600)
@given(encode_cases())
@example((4, 3, Fraction(1, 16)))       # tie -> 0
@example((4, 3, Fraction(3, 16)))       # tie -> 2/8
@example((4, 3, 0.1))                   # off grid (as a binary64)
@example((4, 3, 16))                    # out of range: needs 5 integer bits
@example((0, 0, 0))
def test_encode_against_exact(case):
    I, f, x = case
    q = Fraction(x)
    scaled = q * (1 << f)
    on_grid = scaled.denominator == 1
    r = rne(scaled)
    for mode in ("raise", "saturate"):
        fmt = FixedFormat(I, f, mode)
        # exact mode
        if not on_grid:
            with pytest.raises(ValueError):
                fmt.encode(x)
        elif fits(r, I, f) or mode == "saturate":
            assert fmt.encode(x) == clamp(r, I, f)
        else:
            with pytest.raises(FixedPointOverflow) as ei:
                fmt.encode(x)
            assert ei.value.op == "encode" and ei.value.needed_int_bits == need_bits(r, f)
        # rounding mode
        if fits(r, I, f) or mode == "saturate":
            assert fmt.encode(x, exact=False) == clamp(r, I, f)
        else:
            with pytest.raises(FixedPointOverflow) as ei:
                fmt.encode(x, exact=False)
            assert ei.value.needed_int_bits == need_bits(r, f) > I
    if on_grid and fits(r, I, f):
        fmt = FixedFormat(I, f)
        assert fmt.decode(fmt.encode(x)) == q
        assert fmt.decode(r) == q


@settings(max_examples=300)
@given(fmt_and_raws(1))
def test_decode_encode_roundtrip(case):
    I, f, a = case
    fmt = FixedFormat(I, f)
    v = fmt.decode(a)
    assert v == Fraction(a, 1 << f)
    assert fmt.encode(v) == a
    assert fmt.encode(v, exact=False) == a
    if Fraction(float(v)) == v:
        assert fmt.encode(float(v)) == a


def test_format_validation():
    for I, f in ((-1, 3), (3, -1), (40, 23), (63, 0), (0, 63)):
        with pytest.raises(ValueError):
            FixedFormat(I, f)
    with pytest.raises(ValueError):
        FixedFormat(3, 3, "wrap")
    with pytest.raises(TypeError):
        FixedFormat(3.0, 3)
    assert FixedFormat(62, 0).max_raw == max_raw(62, 0) == (1 << 62) - 1
    assert FixedFormat(0, 0).max_raw == 0 and FixedFormat(5, 7).total_bits == 13


# =============================================================================
# softmax attention
def check_attend(I: int, f: int, scores: list[int], values: list[list[int]]) -> tuple[list[int], list[int]] | None:
    """Compare FixedFormat.attend with the exact softmax; returns the reference
    (weights, out), or None when it overflows (and the code raised accordingly)."""
    assert all(fits(x, I, f) for x in scores) and all(fits(x, I, f) for row in values for x in row)
    fmt = FixedFormat(I, f)
    s = np.array(scores, dtype=np.int64)
    v = np.array(values, dtype=np.int64).reshape(len(scores), -1)
    try:
        w_ref, out_ref = attend_exact(scores, values, I, f)
    except RefOverflow as ro:
        with pytest.raises(FixedPointOverflow) as ei:
            fmt.attend(s, v)
        assert ei.value.op == ro.op
        assert I < ei.value.needed_int_bits <= ro.need
        return None
    w, out = fmt.attend(s, v)
    assert [int(x) for x in w] == w_ref, (I, f, scores, values)
    assert [int(x) for x in out] == out_ref, (I, f, scores, values)
    return w_ref, out_ref


def _gap_threshold_floor(f: int) -> int:
    """floor((f+1) ln 2 2^f): a score gap g (raw) zeroes e_j iff g > (f+1) ln 2 2^f."""
    return _floor_center(lambda: (f + 1) * mpmath.ln2 * mpmath.ldexp(1, f))


@st.composite
def attend_cases(draw):
    kind = draw(st.sampled_from(["random", "equal", "dominant", "clustered"]))
    if kind == "dominant":
        f = draw(st.integers(0, 54))
        g0 = _gap_threshold_floor(f)
        I_min = max(1, (g0 + 8).bit_length() - f)     # room for a score gap of g0 + 4
        I = draw(st.integers(I_min, 62 - f))
    else:
        I, f = draw(formats(min_int_bits=1))
    M = max_raw(I, f)
    m = draw(st.integers(1, 6))
    d = draw(st.integers(1, 3))
    if kind == "random":
        scores = [draw(raws(I, f)) for _ in range(m)]
    elif kind == "equal":
        scores = [draw(raws(I, f))] * m
    elif kind == "clustered":
        base = draw(raws(I, f))
        scores = [clamp(base + draw(st.integers(-(2 << f), 2 << f)), I, f) for _ in range(m)]
    else:
        g0 = _gap_threshold_floor(f)
        top = draw(st.integers(-M + g0 + 4, M))
        scores = [top] + [max(-M, top - g0 - draw(st.integers(-3, 4))) for _ in range(m - 1)]
        scores = draw(st.permutations(scores))
    values = [[draw(raws(I, f)) for _ in range(d)] for _ in range(m)]
    return I, f, scores, values


@settings(max_examples=600)
@given(attend_cases())
@example((2, 1, [0, 0, 0], [[7], [7], [-7]]))    # exact sum 4 + 4 - 4 fits Q2.1
@example((2, 1, [0, 0, 0], [[7], [-7], [7]]))
@example((1, 3, [5, 5], [[1], [2]]))             # Z = 2 does not fit Q1.3
@example((62 - 40, 40, [0], [[(1 << 62) - 1]]))
@example((6, 50, [0, -39801131647054165], [[0], [0]]))   # gap just below 51 ln 2 2^50
def test_attend_matches_exact_softmax(case):
    check_attend(*case)


@settings(max_examples=200)
@given(st.data())
def test_attend_gap_threshold_zeroes_weight(data):
    """Two keys, gap g: e = round(exp(-g 2^-f) 2^f) is 0 iff g > (f+1) ln 2 2^f, so the
    weight of the far key is exactly 0 above the threshold, and (f >= 1) nonzero below."""
    f = data.draw(st.integers(0, 54), "f")
    g0 = _gap_threshold_floor(f)
    I = data.draw(st.integers(max(1, (g0 + 8).bit_length() - f), 62 - f), "I")
    M = max_raw(I, f)
    delta = data.draw(st.integers(-3, 4), "delta")
    g = g0 + delta
    assume(g >= 0)
    top = data.draw(st.integers(-M + g, M), "top")
    # |v| <= M/2: the output cannot overflow even if both weights round up
    v = [data.draw(raws(I, f), "v0") // 2, data.draw(raws(I, f), "v1") // 2]
    scores = [top, top - g]
    if data.draw(st.booleans(), "swap"):
        scores, v = scores[::-1], v[::-1]
    ref = check_attend(I, f, scores, [[x] for x in v])
    assert ref is not None                               # one weight <= 1: never overflows
    w_far = ref[0][scores.index(top - g)]
    if delta >= 1:                                       # g > (f+1) ln 2 2^f (irrational)
        assert w_far == 0
    elif f >= 1:
        assert w_far >= 1


@settings(max_examples=100)
@given(st.data())
def test_attend_Z_overflow_raises(data):
    """In Q1.f, m >= 2 equal scores give Z = m 2^f > 2^(f+1) - 1: overflow of the sum."""
    f = data.draw(st.integers(0, 61), "f")
    m = data.draw(st.integers(2, 5), "m")
    s = data.draw(raws(1, f), "s")
    with pytest.raises(RefOverflow):
        attend_exact([s] * m, [[1]] * m, 1, f)
    with pytest.raises(FixedPointOverflow) as ei:
        FixedFormat(1, f).attend([s] * m, [[1]] * m)
    assert ei.value.op == "add" and ei.value.needed_int_bits == 2


def test_attend_needs_an_integer_bit_and_in_range_inputs():
    with pytest.raises(FixedPointOverflow) as ei:        # exp(0) = 1 does not fit Q0.f
        FixedFormat(0, 8).attend([3], [[1]])
    assert ei.value.op == "exp" and ei.value.needed_int_bits == 1
    fmt = FixedFormat(2, 3)
    with pytest.raises(ValueError):
        fmt.attend([32, 0], [[1], [1]])                  # |score| > max_raw = 31
    with pytest.raises(ValueError):
        fmt.attend([0, 0], [[1], [-32]])
    with pytest.raises(ValueError):
        fmt.attend([0, 0], [[1, 2]])                     # values not (m, d)


# =============================================================================
# NUMBA_DISABLE_JIT gives the same numbers
_PROBE = r'''
import numpy as np
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.fixedpoint import (FixedPointDivisionByZero,
                                      FixedPointOverflow, fx_mul)


def _probe():
    rng = np.random.default_rng(20250611)
    rows = []
    for _ in range(40):
        I = int(rng.integers(1, 40))
        f = int(rng.integers(0, 62 - I + 1))
        fmt = FixedFormat(I, f)
        M = fmt.max_raw
        a, b = (int(x) >> int(rng.integers(0, I + f + 1)) for x in rng.integers(-M, M, size=2, endpoint=True))
        d = int(rng.integers(-M, M, endpoint=True)) >> int(rng.integers(0, I + f + 1))
        for name, args in (("mul", (a, b)), ("div", (a, b)), ("exp", (d,)), ("exp", (-abs(d) >> 3,))):
            try:
                rows.append([name, I, f, *args, getattr(fmt, name)(*args)])
            except FixedPointOverflow as e:
                rows.append([name, I, f, *args, "overflow", e.op, e.needed_int_bits])
            except FixedPointDivisionByZero:
                rows.append([name, I, f, *args, "div0"])
        m = int(rng.integers(1, 5))
        scores = rng.integers(-M, M, size=m, endpoint=True) >> int(rng.integers(0, I + f + 1))
        values = rng.integers(-M, M, size=(m, 2), endpoint=True)
        try:
            w, o = fmt.attend(scores, values)
            rows.append(["attend", I, f, [int(x) for x in w], [int(x) for x in o]])
        except FixedPointOverflow as e:
            rows.append(["attend", I, f, "overflow", e.op, e.needed_int_bits])
    return type(fx_mul).__name__, rows


KIND, ROWS = _probe()
'''


def test_numba_disable_jit_gives_identical_results():
    env = dict(os.environ, NUMBA_DISABLE_JIT="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE + "\nimport json\nprint(json.dumps([KIND, ROWS]))"],
        env=env, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    kind_nojit, rows_nojit = json.loads(proc.stdout.strip().splitlines()[-1])
    ns: dict = {}
    exec(compile(_PROBE, "<probe>", "exec"), ns)
    assert kind_nojit == "function" and ns["KIND"] == "CPUDispatcher"
    rows_jit = json.loads(json.dumps(ns["ROWS"]))
    assert len(rows_jit) == len(rows_nojit) > 100
    assert rows_nojit == rows_jit
    assert any(r[-3] == "overflow" for r in rows_jit if r[0] == "exp")
    assert any(r[0] == "attend" and r[3] != "overflow" for r in rows_jit)
