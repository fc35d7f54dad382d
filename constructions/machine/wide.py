"""Two-limb ("wide") fixed-point scalars: formats Q(I).(f) with I + f <= 126.

An int64 raw (constructions/machine/fixedpoint.py) holds at most I + f = 62 bits. This
module gives the scalar operations of docs/machine.md (``w_fit``, ``w_add``,
``w_sub``, ``w_mul``, ``w_div``) on raws of up to 126 bits, stored as a pair of
int64 limbs (hi, lo) with value hi 2^63 + lo. They are exact, with the int64
machine's rounding, range and error semantics, and run the same under
NUMBA_DISABLE_JIT. The two-limb executor (constructions/machine/wide_exec.py) is built on
them; tests/test_wide.py checks them bit for bit against Python integers.

Details (representation, each operation's overflow need):
docs/internals/machine.md#wide
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fixedpoint import (
    E_MAXABS, E_SAT, E_WHERE, ERR_DIV_ZERO, ERR_EXP_UNDECIDED, ERR_LEN, ERR_OVERFLOW,
    MODE_SATURATE, OP_ADD, OP_DIV, OP_EXP, OP_MUL, OP_SUB, bit_length, mul_round_abs, record_error,
)

MAX_WIDE_BITS = 126
"""I + f <= 126: the magnitude of a raw is below 2^126."""

E_MAXABS_HI = ERR_LEN
"""The high limb of the largest |raw| seen (the low limb is err[E_MAXABS])."""
WIDE_ERR_LEN = ERR_LEN + 1

M63 = (1 << 63) - 1
_M21 = (1 << 21) - 1
PRODUCT_COLUMNS = 13          # 21-bit columns of a product of two 126-bit magnitudes (252 bits), plus a carry column
QUOTIENT_PIECES = 7         # 21-bit pieces of the quotient's bits [f, f + 147): 126 bits and the overflow piece


def new_wide_err() -> np.ndarray:
    """A fresh error/statistics array of the wide operations (fixedpoint.new_err's
    fields, plus the high limb of the largest |raw|)."""
    e = np.zeros(WIDE_ERR_LEN, dtype=np.int64)
    e[E_WHERE] = -1
    return e


def new_scratch() -> np.ndarray:
    """Scratch space of :func:`w_mul`: its product columns, then the quotient's pieces."""
    return np.zeros(PRODUCT_COLUMNS + QUOTIENT_PIECES, dtype=np.int64)


# ---------------------------------------------------------------------------- Python side
def to_limbs(raw: int) -> tuple[int, int]:
    """The limbs (hi, lo) of a Python int raw with |raw| < 2^126."""
    raw = int(raw)
    if abs(raw) >= 1 << MAX_WIDE_BITS:
        raise ValueError(f"|raw| = {abs(raw)} is not below 2^{MAX_WIDE_BITS}")
    m = abs(raw)
    hi, lo = m >> 63, m & M63
    return (-hi, -lo) if raw < 0 else (hi, lo)


def from_limbs(hi: int, lo: int) -> int:
    """The Python int of limbs (hi, lo) (checked: both below 2^63, same sign)."""
    hi, lo = int(hi), int(lo)
    if abs(hi) > M63 or abs(lo) > M63 or (hi > 0 and lo < 0) or (hi < 0 and lo > 0):
        raise ValueError(f"({hi}, {lo}) are not the limbs of a wide raw")
    return (hi << 63) + lo


def check_format(I: int, f: int) -> None:
    """A wide format: I >= 0, f >= 0, I + f <= 126."""
    if I < 0 or f < 0 or I + f > MAX_WIDE_BITS:
        raise ValueError(f"a wide format needs I, f >= 0 and I + f <= {MAX_WIDE_BITS}, got Q{I}.{f}")


# ---------------------------------------------------------------------------- magnitudes
@njit(cache=True, inline='always')
def sign_magnitude(h, l):
    """(negative, |hi|, |lo|)."""
    if h < 0 or l < 0:
        return True, -h, -l
    return False, h, l


@njit(cache=True, inline='always')
def signed_limbs(neg, mh, ml):
    return (-mh, -ml) if neg else (mh, ml)


@njit(cache=True, inline='always')
def _ge(ah, al, bh, bl):
    """|a| >= |b| for magnitudes."""
    return ah > bh or (ah == bh and al >= bl)


@njit(cache=True, inline='always')
def magnitude_bits(mh, ml):
    """bit_length of the magnitude mh 2^63 + ml."""
    return bit_length(mh) + 63 if mh > 0 else bit_length(ml)


@njit(cache=True, inline='always')
def _mag_add(ah, al, bh, bl):
    """(hi, lo, ok): the magnitude a + b, ok False when it is 2^126 or more."""
    if al > M63 - bl:
        lo = al - (M63 - bl) - 1
        carry = 1
    else:
        lo = al + bl
        carry = 0
    if ah > M63 - bh - carry:
        return np.int64(0), np.int64(0), False
    return ah + bh + carry, lo, True


@njit(cache=True, inline='always')
def magnitude_sub(ah, al, bh, bl):
    """The magnitude a - b for a >= b."""
    lo = al - bl
    if lo < 0:
        return ah - bh - 1, (lo + M63) + 1
    return ah - bh, lo


@njit(cache=True, inline='always')
def _lim(I, f):
    """2^(I+f) as limbs (I + f <= 125), the range bound of the format."""
    k = I + f
    if k <= 62:
        return np.int64(0), np.int64(1) << k
    return np.int64(1) << (k - 63), np.int64(0)


@njit(cache=True, inline='always')
def max_raw_limbs(I, f):
    """2^(I+f) - 1 as limbs: the largest raw of the format."""
    if I + f == MAX_WIDE_BITS:
        return np.int64(M63), np.int64(M63)
    lh, ll = _lim(I, f)
    return magnitude_sub(lh, ll, np.int64(0), np.int64(1))


# ---------------------------------------------------------------------------- range, errors
@njit(cache=True)
def overflow_raw(neg, I, f, mode, op, need, err):
    """The raw an out-of-range result becomes: recorded (raise) or counted
    (saturate), then the largest raw of its sign, tracked in maxabs."""
    if mode == MODE_SATURATE:
        err[E_SAT] += 1
    else:
        record_error(err, ERR_OVERFLOW, op, need)
    mh, ml = max_raw_limbs(I, f)
    track_maxabs(mh, ml, err)
    return signed_limbs(neg, mh, ml)


@njit(cache=True, inline='always')
def track_maxabs(mh, ml, err):
    if mh > err[E_MAXABS_HI] or (mh == err[E_MAXABS_HI] and ml > err[E_MAXABS]):
        err[E_MAXABS_HI] = mh
        err[E_MAXABS] = ml


@njit(cache=True)
def w_fit(h, l, I, f, mode, op, err):
    """Range-check a raw (limbs h, l): |raw| <= 2^(I+f) - 1, else an overflow
    (module doc); returns the limbs, clamped in saturate mode."""
    neg, mh, ml = sign_magnitude(h, l)
    if I + f < MAX_WIDE_BITS:
        lh, ll = _lim(I, f)
        if _ge(mh, ml, lh, ll):
            return overflow_raw(neg, I, f, mode, op, magnitude_bits(mh, ml) - f, err)
    track_maxabs(mh, ml, err)
    return h, l


# ---------------------------------------------------------------------------- operations
@njit(cache=True)
def w_add(ah, al, bh, bl, I, f, mode, err):
    """a + b, exact, then fitted."""
    return _add(ah, al, bh, bl, I, f, mode, OP_ADD, err)


@njit(cache=True)
def w_sub(ah, al, bh, bl, I, f, mode, err):
    """a - b, exact, then fitted."""
    return _add(ah, al, -bh, -bl, I, f, mode, OP_SUB, err)


@njit(cache=True)
def _add(ah, al, bh, bl, I, f, mode, op, err):
    na, mah, mal = sign_magnitude(ah, al)
    nb, mbh, mbl = sign_magnitude(bh, bl)
    if na == nb:
        sh, sl, ok = _mag_add(mah, mal, mbh, mbl)
        if not ok:           # |a + b| >= 2^126: its bit length is 127
            return overflow_raw(na, I, f, mode, op, 127 - f, err)
        rh_, rl_ = signed_limbs(na, sh, sl)
        return w_fit(rh_, rl_, I, f, mode, op, err)
    if _ge(mah, mal, mbh, mbl):
        dh, dl = magnitude_sub(mah, mal, mbh, mbl)
        rh_, rl_ = signed_limbs(na, dh, dl)
        return w_fit(rh_, rl_, I, f, mode, op, err)
    dh, dl = magnitude_sub(mbh, mbl, mah, mal)
    rh_, rl_ = signed_limbs(nb, dh, dl)
    return w_fit(rh_, rl_, I, f, mode, op, err)


@njit(cache=True, inline='always')
def w_relu(h, l):
    return (h, l) if (h > 0 or l > 0) else (np.int64(0), np.int64(0))


@njit(cache=True)
def _mul_columns(xh, xl, yh, yl, c):
    """c[0:13] = the product of the magnitudes x, y in 21-bit columns (normalised:
    each column < 2^21; partial products < 2^42, at most six per column)."""
    for k in range(PRODUCT_COLUMNS):
        c[k] = 0
    a0, a1, a2 = xl & _M21, (xl >> 21) & _M21, xl >> 42
    a3, a4, a5 = xh & _M21, (xh >> 21) & _M21, xh >> 42
    b0, b1, b2 = yl & _M21, (yl >> 21) & _M21, yl >> 42
    b3, b4, b5 = yh & _M21, (yh >> 21) & _M21, yh >> 42
    a = (a0, a1, a2, a3, a4, a5)
    b = (b0, b1, b2, b3, b4, b5)
    na = 6 if xh != 0 else 3
    nb = 6 if yh != 0 else 3
    for i in range(na):
        ai = a[i]
        if ai != 0:
            for j in range(nb):
                c[i + j] += ai * b[j]
    for k in range(PRODUCT_COLUMNS - 1):
        c[k + 1] += c[k] >> 21
        c[k] &= _M21


@njit(cache=True)
def _columns_bits(c):
    for k in range(PRODUCT_COLUMNS - 1, -1, -1):
        if c[k] != 0:
            return 21 * k + bit_length(c[k])
    return 0


@njit(cache=True)
def w_mul(ah, al, bh, bl, I, f, mode, err, scratch):
    """round_half_even(a b / 2^f), exact, then fitted (``scratch``: :func:`new_scratch`)."""
    if (ah == 0 and al == 0) or (bh == 0 and bl == 0):
        return np.int64(0), np.int64(0)
    na, xh, xl = sign_magnitude(ah, al)
    nb, yh, yl = sign_magnitude(bh, bl)
    neg = na != nb
    if f <= 62 and xh == 0 and yh == 0 and xl < (np.int64(1) << 62) and yl < (np.int64(1) << 62):
        q = mul_round_abs(xl, yl, f)        # the int64 machine's own rounding, when below 2^62
        if q >= 0:
            rh_, rl_ = signed_limbs(neg, np.int64(0), q)
            return w_fit(rh_, rl_, I, f, mode, OP_MUL, err)
    c = scratch
    _mul_columns(xh, xl, yh, yl, c)
    # q = the product's bits [f, f + 126); anything at or above bit f + 126 is an overflow
    i0 = f // 21
    s = f - 21 * i0
    for k in range(QUOTIENT_PIECES):
        i = i0 + k
        lo = c[i] >> s if i < PRODUCT_COLUMNS else 0
        hi = (c[i + 1] << (21 - s)) & _M21 if i + 1 < PRODUCT_COLUMNS else 0
        c[PRODUCT_COLUMNS + k] = (lo | hi) & _M21
    big = c[PRODUCT_COLUMNS + 6] != 0
    for i in range(i0 + 7, PRODUCT_COLUMNS):
        if c[i] != 0:
            big = True
    ql = c[PRODUCT_COLUMNS] | (c[PRODUCT_COLUMNS + 1] << 21) | (c[PRODUCT_COLUMNS + 2] << 42)
    qh = c[PRODUCT_COLUMNS + 3] | (c[PRODUCT_COLUMNS + 4] << 21) | (c[PRODUCT_COLUMNS + 5] << 42)
    if big or (I + f <= 62 and (qh != 0 or ql >= (np.int64(1) << 62))):
        # the truncated quotient is past the machine word (2^126; 2^62 on the formats
        # the int64 machine holds): the need fx_mul reports, from the product
        return overflow_raw(neg, I, f, mode, OP_MUL, _columns_bits(c) - 2 * f, err)
    if f > 0:                                 # half to even: the bit f - 1 and the bits below it
        hb = f - 1
        if (c[hb // 21] >> (hb % 21)) & 1 == 1:
            sticky = (c[hb // 21] & ((np.int64(1) << (hb % 21)) - 1)) != 0
            for i in range(hb // 21):
                if c[i] != 0:
                    sticky = True
            if sticky or (ql & 1) == 1:
                if ql == M63:
                    ql = np.int64(0)
                    if qh == M63:            # q = 2^126 after rounding: 127 bits
                        return overflow_raw(neg, I, f, mode, OP_MUL, 127 - f, err)
                    qh += 1
                else:
                    ql += 1
    rh_, rl_ = signed_limbs(neg, qh, ql)
    return w_fit(rh_, rl_, I, f, mode, OP_MUL, err)


@njit(cache=True, inline='always')
def _step(rh, rl, yh, yl, bit):
    """One step of long division: (r', set) with r' = 2 r + bit - (y if set), where
    set = [2 r + bit >= y], computed without forming 2 r (r < y < 2^126)."""
    dh, dl = magnitude_sub(yh, yl, rh, rl)                  # y - r > 0
    if _ge(rh, rl, dh, dl):                              # 2 r >= y: r' = r - (y - r) + bit
        th, tl = magnitude_sub(rh, rl, dh, dl)
        if bit:
            th, tl, _ = _mag_add(th, tl, np.int64(0), np.int64(1))
        return th, tl, True
    th, tl, _ = _mag_add(rh, rl, rh, rl)                 # 2 r < y < 2^126
    if bit:
        nh, nl = magnitude_sub(yh, yl, th, tl)                # y - 2 r >= 1
        if nh == 0 and nl == 1:                           # 2 r + 1 = y
            return np.int64(0), np.int64(0), True
        th, tl, _ = _mag_add(th, tl, np.int64(0), np.int64(1))
    return th, tl, False


@njit(cache=True, inline='always')
def _shift_in(qh, ql, bit):
    """2 q + bit for q < 2^125."""
    h = (qh << 1) | (ql >> 62)
    return h, ((ql << 1) & M63) | bit


@njit(cache=True)
def w_div(ah, al, bh, bl, I, f, mode, err):
    """round_half_even(a 2^f / b) by long division, then fitted."""
    if bh == 0 and bl == 0:
        record_error(err, ERR_DIV_ZERO, OP_DIV, 0)
        return np.int64(0), np.int64(0)
    if ah == 0 and al == 0:
        return np.int64(0), np.int64(0)
    na, xh, xl = sign_magnitude(ah, al)
    nb, yh, yl = sign_magnitude(bh, bl)
    neg = na != nb
    # the integer part floor(x / y), bit by bit from x's top bit (x < 2^126)
    rh, rl = np.int64(0), np.int64(0)
    qh, ql = np.int64(0), np.int64(0)
    for k in range(magnitude_bits(xh, xl) - 1, -1, -1):
        bit = (xh >> (k - 63)) & 1 if k >= 63 else (xl >> k) & 1
        rh, rl, set_ = _step(rh, rl, yh, yl, bit)
        qh, ql = _shift_in(qh, ql, 1 if set_ else 0)
    lh, ll = _lim(I, 0) if I < MAX_WIDE_BITS else (np.int64(0), np.int64(0))
    if I < MAX_WIDE_BITS and _ge(qh, ql, lh, ll):
        return overflow_raw(neg, I, f, mode, OP_DIV, magnitude_bits(qh, ql), err)
    for _ in range(f):                                    # q < 2^(I + f) <= 2^126 throughout
        rh, rl, set_ = _step(rh, rl, yh, yl, 0)
        qh, ql = _shift_in(qh, ql, 1 if set_ else 0)
    dh, dl = magnitude_sub(yh, yl, rh, rl)                     # round: 2 r vs y, as r vs y - r
    if _ge(rh, rl, dh, dl) and (not (rh == dh and rl == dl) or (ql & 1) == 1):
        qh, ql, ok = _mag_add(qh, ql, np.int64(0), np.int64(1))
        if not ok:
            return overflow_raw(neg, I, f, mode, OP_DIV, 127 - f, err)
    rh_, rl_ = signed_limbs(neg, qh, ql)
    return w_fit(rh_, rl_, I, f, mode, OP_DIV, err)


# ---------------------------------------------------------------------------- exp of a two-limb shift
_XB = 30            # bits of a chunk of the exp's fixed point
_XL = 7             # fraction chunks: 210 bits, 84 below the finest rounding point (f <= 126)
_XM = (1 << _XB) - 1
_XDECIDE = 194      # the bits of exp(-r) down to 2^-194 decide the rounding (its error is below 2^-200)


def _ln2_chunks() -> np.ndarray:
    """ln 2 in chunks (integer chunk 0, then _XL fraction chunks), truncated at
    2^-210: from Python integers, ln 2 = sum_k 1 / (k 2^k), each term truncated at
    2^-300 (the sum's error below 2^-290)."""
    P = 300
    s = sum((1 << P) // (k << k) for k in range(1, P + 1))     # the terms past k = 300 add < 2^-300
    v = s >> (P - _XB * _XL)
    return np.array([0] + [(v >> (_XB * (_XL - i))) & _XM for i in range(1, _XL + 1)], np.int64)


_LN2 = _ln2_chunks()


@njit(cache=True, inline='always')
def _dbit(c, h, l, b):
    """Bit b of the magnitude c 2^126 + h 2^63 + l (0 for b < 0)."""
    if b < 0:
        return np.int64(0)
    if b < 63:
        return (l >> b) & 1
    if b < 126:
        return (h >> (b - 63)) & 1
    return (c >> (b - 126)) & 1


@njit(cache=True)
def _cx_mul(a, b, out, col):
    """out = a b truncated at 2^-210 (chunks; exact columns, carries from the bottom)."""
    n = _XL + 1
    for k in range(2 * n):
        col[k] = 0
    for k in range(2 * n - 1, -1, -1):
        s = col[k]
        for i in range(max(0, k - n + 1), min(k, n - 1) + 1):
            s += a[i] * b[k - i]
        col[k] = s
    carry = np.int64(0)
    for k in range(2 * n - 2, -1, -1):       # column k weighs 2^(-30 k)
        s = col[k] + carry
        col[k] = s & _XM
        carry = s >> _XB
    for k in range(n):
        out[k] = col[k]
    out[0] += carry << _XB


@njit(cache=True)
def _cx_div(a, d):
    """a = floor(a / d) in place, truncated at 2^-210 (d a small positive integer)."""
    r = np.int64(0)
    for k in range(_XL + 1):
        cur = (r << _XB) + a[k] if k > 0 else a[k]
        a[k] = cur // d
        r = cur - a[k] * d


@njit(cache=True)
def _cx_add(a, b, sign):
    """a += sign b in place (chunks; a stays >= 0 where the callers use it)."""
    carry = np.int64(0)
    for k in range(_XL, -1, -1):
        s = a[k] + sign * b[k] + carry
        if k > 0:
            a[k] = s & _XM
            carry = s >> _XB           # arithmetic shift: a borrow is -1
        else:
            a[k] = s


@njit(cache=True)
def _cx_ge(a, b):
    for k in range(_XL + 1):
        if a[k] != b[k]:
            return a[k] > b[k]
    return True


@njit(cache=True)
def _cx_bit(a, b):
    """Bit 2^-b of a chunk number (b >= 0; b = 0: the integer chunk's low bit)."""
    if b == 0:
        return a[0] & 1
    k = (b - 1) // _XB + 1
    return (a[k] >> (_XB * k - b)) & 1


@njit(cache=True)
def w_exp_neg(c, h, l, f, err):
    """(hi, lo) of round_half_even(exp(-D / 2^f) 2^f), D = c 2^126 + h 2^63 + l >= 0
    (three magnitude limbs: the shift M - s of two raws can reach 2^127), for
    f <= 126; not range-checked (the result is at most 2^f; D = 0 gives 2^f, for
    f <= 125: 2^126 is no two-limb raw, and the caller's fit clamps it). In
    210-bit fixed point: x = D / 2^f exactly; x = k ln 2 + r, 0 <= r < ln 2 with
    ln 2 to 2^-210; exp(-r) by its alternating Taylor series (both signs summed
    apart, each term truncated at 2^-210, about 45 terms), within 2^-200 of the
    true exp(-r) (r's error is below 131 2^-210, each term's below 4 2^-210); the
    result exp(-r) 2^(f - k) is rounded by the bits of exp(-r) from its rounding
    point down to 2^-194: if the half bit's complement occurs among them, the
    side is certain; otherwise (the true value within about 2^-194 of a half, in
    units of exp(-r)) ``ERR_EXP_UNDECIDED`` is recorded (as fixedpoint.exp_raw)
    and the result rounds down."""
    if c == 0 and h == 0 and l == 0:
        if f < 63:
            return np.int64(0), np.int64(1) << f
        return np.int64(1) << (f - 63), np.int64(0)
    # the integer part of x: past 90 > (f + 1) ln 2 the result rounds to 0
    xi = np.int64(0)
    for b in range(126, f - 1, -1):
        if _dbit(c, h, l, b) != 0:
            if b - f >= 7:
                return np.int64(0), np.int64(0)
            xi += np.int64(1) << (b - f)
    if xi > 90:
        return np.int64(0), np.int64(0)
    n = _XL + 1
    x = np.zeros(n, np.int64)
    x[0] = xi
    for k in range(1, n):
        v = np.int64(0)
        for i in range(_XB):                   # chunk k: D's bits f - 30 k .. f - 30 k + 29
            v |= _dbit(c, h, l, f - _XB * k + i) << i
        x[k] = v
    # k = floor(x / ln 2): from a float estimate, then corrected exactly
    k = np.int64(math.floor((xi + x[1] / 2.0 ** _XB) / 0.6931471805599453))
    if k < 0:
        k = np.int64(0)
    kl = _LN2.copy()
    for i in range(n):
        kl[i] *= k
    _cx_add(kl, np.zeros(n, np.int64), 1)    # carries of k ln 2
    r = x.copy()
    while not _cx_ge(r, kl):                  # k ln 2 > x: one less
        _cx_add(kl, _LN2, -1)
        k -= 1
    _cx_add(r, kl, -1)
    while _cx_ge(r, _LN2):
        _cx_add(r, _LN2, -1)
        k += 1
    s = f - k
    if s < 0:                                  # exp(-x) 2^f <= 1/2 and never equal (x > 0 rational)
        if s == -1 and r[0] == 0 and r[1] == 0 and r[2] == 0 and r[3] == 0 and r[4] == 0 and r[5] == 0 \
                and r[6] == 0 and r[7] < (1 << 20):
            # r below 2^-190: the true x may lie just under (f + 1) ln 2 (r's error is
            # below 131 2^-210), where the result is just over one half
            record_error(err, ERR_EXP_UNDECIDED, OP_EXP, 0)
        return np.int64(0), np.int64(0)
    # exp(-r) = sum_i (-r)^i / i!
    plus = np.zeros(n, np.int64)
    minus = np.zeros(n, np.int64)
    t = np.zeros(n, np.int64)
    t[0] = 1
    plus[0] = 1
    col = np.zeros(2 * n, np.int64)
    tmp = np.zeros(n, np.int64)
    for i in range(1, 200):
        _cx_mul(t, r, tmp, col)
        for j in range(n):
            t[j] = tmp[j]
        _cx_div(t, np.int64(i))
        zero = True
        for j in range(n):
            if t[j] != 0:
                zero = False
        if zero:
            break
        if i % 2 == 1:
            _cx_add(minus, t, 1)
        else:
            _cx_add(plus, t, 1)
    _cx_add(plus, minus, -1)                   # exp(-r) in (1/2, 1]
    # the result's integer part: bits 2^0 .. 2^-s of exp(-r)
    rh, rl = np.int64(0), np.int64(0)
    for b in range(s + 1):
        if _cx_bit(plus, b) != 0:
            p = s - b
            if p < 63:
                rl |= np.int64(1) << p
            else:
                rh |= np.int64(1) << (p - 63)
    # round: the half bit, then the bits down to 2^-194 (the computed exp(-r) is
    # within 2^-200 of the true one, so a bit there decides the side)
    half = _cx_bit(plus, s + 1)
    decided = False
    for b in range(s + 2, _XDECIDE + 1):
        if _cx_bit(plus, b) == half:    # half 1 and a 1 below it: above; half 0 and a 0: below
            decided = True
            break
    if not decided:
        record_error(err, ERR_EXP_UNDECIDED, OP_EXP, 0)
    elif half == 1:
        if rl == M63:
            rl = np.int64(0)
            rh += 1
        else:
            rl += 1
    return rh, rl


__all__ = ["E_MAXABS_HI", "MAX_WIDE_BITS", "WIDE_ERR_LEN", "check_format", "from_limbs", "new_scratch",
           "new_wide_err", "to_limbs", "w_add", "w_div", "w_exp_neg", "w_fit", "w_mul", "w_relu", "w_sub"]
