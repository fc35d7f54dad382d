"""The two-limb scalar operations (constructions/machine/wide.py) against exact Python integers.

Each operation on formats with I + f <= 126 is compared bit for bit with the
exact references of tests/_exact.py plus the range semantics of docs/machine.md
(fit: |raw| <= 2^(I+f) - 1, the first error recorded with its need in raise
mode, a clamp counted in saturate mode, the largest |raw| tracked); on the
formats the int64 machine holds (I + f <= 62) they must equal its own
operations (fixedpoint.fx_*), error array included; and NUMBA_DISABLE_JIT gives
the same results.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rnngap.constructions.machine import fixedpoint as FP
from rnngap.constructions.machine import wide as W

from _exact import div_exact, mul_exact, need_bits

MODES = (FP.MODE_RAISE, FP.MODE_SATURATE)
OPS = {"add": FP.OP_ADD, "sub": FP.OP_SUB, "mul": FP.OP_MUL, "div": FP.OP_DIV}


# ---------------------------------------------------------------------------- the reference
def _expect(op: str, a: int, b: int, I: int, f: int, mode: int):
    """(raw, err fields) of one operation, from exact integers: (raw, code, op, need, sat, maxabs)."""
    lim = 1 << (I + f)
    code = need = sat = 0
    opc = OPS[op]
    if op == "div" and b == 0:
        return 0, FP.ERR_DIV_ZERO, opc, 0, 0, 0
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    elif op == "mul":
        r = mul_exact(a, b, f)[0]
    else:
        r = div_exact(a, b, f)[0]
        whole = abs(a) // abs(b)
        if whole >= 1 << I:              # the integer part alone is out of range
            need = whole.bit_length()
            r = (lim - 1) * (1 if r > 0 else -1)
            if mode == FP.MODE_SATURATE:
                return r, 0, 0, 0, 1, abs(r)
            return r, FP.ERR_OVERFLOW, opc, need, 0, abs(r)
    if abs(r) >= lim:
        word = 62 if I + f <= 62 else W.MAX_WIDE_BITS
        if op == "mul" and abs(a * b) >> f >= 1 << word:
            need = abs(a * b).bit_length() - 2 * f       # as fx_mul reports a quotient past the word
        else:
            need = need_bits(r, f)
        r = (lim - 1) * (1 if r > 0 else -1)
        if mode == FP.MODE_SATURATE:
            sat = 1
        else:
            code = FP.ERR_OVERFLOW
    return r, code, (opc if code else 0), (need if code else 0), sat, abs(r)


def _run(op: str, a: int, b: int, I: int, f: int, mode: int):
    err = W.new_wide_err()
    ah, al = (np.int64(x) for x in W.to_limbs(a))       # int64 limbs: a wrap shows without the JIT too
    bh, bl = (np.int64(x) for x in W.to_limbs(b))
    fn = {"add": W.w_add, "sub": W.w_sub, "div": W.w_div}.get(op)
    if fn is not None:
        h, l = fn(ah, al, bh, bl, I, f, mode, err)
    else:
        h, l = W.w_mul(ah, al, bh, bl, I, f, mode, err, W.new_scratch())
    maxabs = (int(err[W.E_MAXABS_HI]) << 63) + int(err[FP.E_MAXABS])
    return (W.from_limbs(h, l), int(err[FP.E_CODE]), int(err[FP.E_OP]), int(err[FP.E_NEED]), int(err[FP.E_SAT]),
            maxabs)


@st.composite
def _case(draw):
    """A format with I + f <= 126, two raws of the format (or a little beyond it,
    or near 2^126), with ties and boundaries among them."""
    total = draw(st.integers(0, W.MAX_WIDE_BITS))
    f = draw(st.integers(0, total))
    I = total - f
    lim = 1 << total
    big = (1 << W.MAX_WIDE_BITS) - 1

    def raw():
        kind = draw(st.sampled_from(["in", "edge", "wide", "small", "tie"]))
        if kind == "in":
            v = draw(st.integers(0, lim - 1))
        elif kind == "edge":
            v = max(0, lim - 1 - draw(st.integers(0, 3)))
        elif kind == "wide":
            v = draw(st.integers(0, big))
        elif kind == "small":
            v = draw(st.integers(0, 1 << 8))
        else:                            # an odd multiple of 2^(f-1): products and quotients near ties
            v = (2 * draw(st.integers(0, 1 << 20)) + 1) << max(f - 1, 0)
            v = min(v, big)
        return -v if draw(st.booleans()) else v
    return I, f, raw(), raw(), draw(st.sampled_from(MODES))


@pytest.mark.parametrize("op", sorted(OPS))
@settings(max_examples=400)
@given(case=_case())
def test_every_operation_is_exact_at_every_width(op, case):
    I, f, a, b, mode = case
    assert _run(op, a, b, I, f, mode) == _expect(op, a, b, I, f, mode), (op, I, f, a, b, mode)


@pytest.mark.parametrize("op", sorted(OPS))
def test_boundaries_near_two_to_the_126(op):
    """Products and sums at and past 2^126, negative zero, exact ties of mul and
    div, the largest and smallest raws of the widest formats."""
    top = (1 << 126) - 1
    raws = [0, 1, -1, 2, top, -top, top - 1, 1 << 125, -(1 << 125), (1 << 63) - 1, 1 << 63, -(1 << 63),
            (1 << 62) + 1, 3 << 61, (1 << 64) - 1, 12345 << 70]
    fmts = [(126, 0), (0, 126), (63, 63), (1, 125), (125, 1), (62, 0), (0, 62), (64, 62), (3, 60), (70, 56)]
    for I, f in fmts:
        lim = 1 << (I + f)
        for a in raws:
            for b in raws:
                if abs(a) >= lim and abs(b) >= lim:
                    continue
                for mode in MODES:
                    assert _run(op, a, b, I, f, mode) == _expect(op, a, b, I, f, mode), (op, I, f, a, b, mode)
    # exact ties, both ways: the raw 2k + 1 times the raw 2^(f-1) (the value 1/2), and
    # divided by the raw 2^(f+1) (the value 2), is k + 1/2 ulp: it rounds to the even one
    for f in (1, 5, 40, 61, 62, 63, 64, 100, 125):
        for k in (0, 1, 2, 7, (1 << 40) + 3):
            a = 2 * k + 1
            if a.bit_length() > 126 - f:
                continue
            for I in (126 - f, max(0, (k + 1).bit_length() - f)):
                for op, b in (("mul", 1 << (f - 1)), ("div", 1 << (f + 1))):
                    if b.bit_length() > 126:
                        continue
                    got = _run(op, a, b, I, f, FP.MODE_RAISE)
                    assert got == _expect(op, a, b, I, f, FP.MODE_RAISE), (op, f, k, I)
                    assert got[0] == k + (k & 1), (op, f, k)


def test_overflow_needs_are_those_of_the_int64_machine_and_past_it():
    """Regressions: a product whose truncated quotient passes 2^62 on a narrow
    format reports fx_mul's need (from the product, before rounding); at
    I + f = 126 a product rounding up to exactly 2^126 needs 127 - f bits, one
    more than the format has."""
    for a, b, I, f in (((1 << 32) - 1, (1 << 32) + 1, 61, 1), ((1 << 47) - 1, (1 << 47) + 1, 31, 31)):
        e64 = FP.new_err()
        FP.fx_mul(np.int64(a), np.int64(b), I, f, FP.MODE_RAISE, e64)
        got = _run("mul", a, b, I, f, FP.MODE_RAISE)
        assert got[1:4] == (FP.ERR_OVERFLOW, FP.OP_MUL, int(e64[FP.E_NEED])) == _expect("mul", a, b, I, f, 0)[1:4]
    got = _run("mul", (1 << 64) - 1, (1 << 64) + 1, 124, 2, FP.MODE_RAISE)
    assert got[1:4] == (FP.ERR_OVERFLOW, FP.OP_MUL, 125) and got[0] == (1 << 126) - 1


def test_fit_and_relu():
    """w_fit alone: in range the raw and maxabs; past it the clamp, the need and
    the mode's record; w_relu keeps positives (either limb) and zeroes the rest."""
    for I, f, raw in ((0, 0, 1), (3, 2, 40), (60, 3, -(1 << 63)), (100, 20, (1 << 120) + 5), (63, 0, 1 << 63)):
        for mode in MODES:
            err = W.new_wide_err()
            h, l = W.w_fit(*W.to_limbs(raw), I, f, mode, FP.OP_ADD, err)
            lim = 1 << (I + f)
            out = raw if abs(raw) < lim else (lim - 1) * (1 if raw > 0 else -1)
            assert W.from_limbs(h, l) == out
            assert (int(err[W.E_MAXABS_HI]) << 63) + int(err[FP.E_MAXABS]) == abs(out)
            over = abs(raw) >= lim
            assert int(err[FP.E_CODE]) == (FP.ERR_OVERFLOW if over and mode == FP.MODE_RAISE else 0)
            assert int(err[FP.E_SAT]) == (1 if over and mode == FP.MODE_SATURATE else 0)
            if over and mode == FP.MODE_RAISE:
                assert int(err[FP.E_NEED]) == need_bits(raw, f)
    for raw in (5, 1 << 70, -(1 << 70), -3, 0, (1 << 63) + 0):
        h, l = W.w_relu(*W.to_limbs(raw))
        assert W.from_limbs(h, l) == max(raw, 0)


def test_narrow_formats_equal_the_int64_operations():
    """On every format the int64 machine holds, the wide operations give its raws
    and its error arrays, for the same seeded operands (ties and overflows among them)."""
    rng = random.Random(11)
    fns = {"add": FP.fx_add, "sub": FP.fx_sub, "mul": FP.fx_mul, "div": FP.fx_div}
    checked = overflowed = 0
    for _ in range(4000):
        total = rng.randint(0, 62)
        f = rng.randint(0, total)
        I = total - f
        lim = 1 << total
        a = rng.choice([rng.randrange(lim), lim - 1, rng.randrange(1 << 10), (2 * rng.randrange(1 << 10) + 1) << max(f - 1, 0)])
        b = rng.choice([rng.randrange(lim), lim - 1, rng.randrange(1 << 10), 1 << f])
        a, b = min(a, lim - 1) * rng.choice((1, -1)), min(b, lim - 1) * rng.choice((1, -1))
        op = rng.choice(sorted(fns))
        if op == "mul" and rng.random() < 0.25:        # (2^m - 1)(2^m + 1): rounding carries to a power of two
            m = rng.randint(1, total // 2 if total >= 2 else 1)
            a, b = min((1 << m) - 1, lim - 1) * rng.choice((1, -1)), min((1 << m) + 1, lim - 1)
        mode = rng.choice(MODES)
        e64 = FP.new_err()
        r64 = int(fns[op](np.int64(a), np.int64(b), I, f, mode, e64))
        got = _run(op, a, b, I, f, mode)
        want = (r64, int(e64[FP.E_CODE]), int(e64[FP.E_OP]), int(e64[FP.E_NEED]), int(e64[FP.E_SAT]),
                int(e64[FP.E_MAXABS]))
        assert got == want, (op, I, f, a, b, mode)
        checked += 1
        overflowed += bool(want[1] or want[4])
    assert checked == 4000 and overflowed > 100


def test_limbs_round_trip_and_refuse_what_is_not_a_wide_raw():
    for v in (0, 1, -1, (1 << 63) - 1, 1 << 63, -(1 << 63), (1 << 126) - 1, -((1 << 126) - 1), 5 << 80):
        h, l = W.to_limbs(v)
        assert W.from_limbs(h, l) == v and abs(h) < 1 << 63 and abs(l) < 1 << 63 and h * l >= 0
    with pytest.raises(ValueError):
        W.to_limbs(1 << 126)
    with pytest.raises(ValueError):
        W.from_limbs(1, -1)                  # limbs of opposite signs
    with pytest.raises(ValueError):
        W.check_format(64, 63)
    W.check_format(63, 63)


def fingerprint(seed: int) -> list:
    """Seeded operations at every width, as plain ints (compared with and without the JIT)."""
    rng = random.Random(seed)
    out = []
    for _ in range(300):
        total = rng.randint(0, 126)
        f = rng.randint(0, total)
        I = total - f
        a = rng.getrandbits(rng.randint(0, 126)) * rng.choice((1, -1))
        b = rng.getrandbits(rng.randint(0, 126)) * rng.choice((1, -1))
        for op in sorted(OPS):
            out.append([op, I, f, str(a), str(b)] + [str(x) for x in _run(op, a, b, I, f, rng.choice(MODES))])
    return out


def test_pure_python_path_is_identical_to_the_jit():
    from _nojit import fingerprint_without_jit
    seed = 126
    jit = fingerprint(seed)
    assert json.loads(json.dumps(jit)) == fingerprint_without_jit(__file__, seed)
    assert any(row[6] != "0" for row in jit)                 # an overflow was recorded
    assert any(row[9] != "0" for row in jit)                 # a clamp was counted


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
