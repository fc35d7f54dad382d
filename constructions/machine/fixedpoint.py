"""Fixed-point numbers with O(log n) bits: the machine every construction runs on.

A format has ``I`` integer bits and ``f`` fraction bits; a value is an integer
multiple of 2^-f below 2^I in magnitude, stored as the int64 ``raw = value * 2^f``
(I + f <= 62; two-limb storage, constructions/machine/wide.py, goes past that). Each
elementary operation rounds at most once: add, sub, ReLU, max and comparisons are
exact; mul and div round the exact result half to even; exp reports an undecided
rounding instead of guessing. An overflow raises :class:`FixedPointOverflow` by
default (``MODE_SATURATE`` clamps and counts instead). Kernels never raise: they
write an ``err`` array that every Python entry point checks. The format itself
(encode, decode, the operations on raws) is constructions/machine/formats.py.
Semantics: docs/theory.md §1.

Details (operations, overflow policy, the ``err`` layout):
docs/internals/machine.md#fixedpoint
"""
from __future__ import annotations

import math

from fractions import Fraction
from typing import Union

import numpy as np
from numba import njit

from .runtime import announce_cache

announce_cache()      # where the kernels are cached, if not in the package folder (constructions/machine/runtime.py)

# ----------------------------------------------------------------------------
# constants shared with kernels (module globals are compile-time constants)
MODE_RAISE = 0
MODE_SATURATE = 1
MODES = {"raise": MODE_RAISE, "saturate": MODE_SATURATE}

ERR_OK = 0
ERR_OVERFLOW = 1
ERR_DIV_ZERO = 2
ERR_EXP_UNDECIDED = 3

OP_ADD = 1
OP_SUB = 2
OP_MUL = 3
OP_DIV = 4
OP_EXP = 5
OP_NAMES = {OP_ADD: "add", OP_SUB: "sub", OP_MUL: "mul", OP_DIV: "div", OP_EXP: "exp"}

E_CODE = 0
E_OP = 1
E_NEED = 2
E_WHERE = 3
E_MAXABS = 4
E_SAT = 5
ERR_LEN = 6

MAX_MAGNITUDE_BITS = 62  # I + f <= 62 (int64 storage)
MAX_WIDE_MAGNITUDE_BITS = 126   # I + f <= 126 (two-limb storage, constructions/machine/wide.py)
STORAGES = {"int64": MAX_MAGNITUDE_BITS, "two-limb": MAX_WIDE_MAGNITUDE_BITS}

_LN2_HI = 0.6931471805599453       # float(ln 2)
_LN2_LO = 2.3190468138462996e-17   # ln 2 - _LN2_HI
_M31 = (1 << 31) - 1
_M62 = (1 << 62) - 1


def new_err() -> np.ndarray:
    """A fresh error/statistics array for one kernel call chain."""
    e = np.zeros(ERR_LEN, dtype=np.int64)
    e[E_WHERE] = -1
    return e


# ----------------------------------------------------------------------------
# scalar kernels
@njit(cache=True)
def bit_length(x):
    """Bits of a nonnegative int64 (0 for 0)."""
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


@njit(cache=True)
def record_error(err, code, op, need):
    if err[E_CODE] == ERR_OK:
        err[E_CODE] = code
        err[E_OP] = op
        err[E_NEED] = need


@njit(cache=True, inline='always')
def fit_value(r, I, f, mode, op, err):
    """Range-check an exact result ``r`` (|r| < 2^63) and track the max |raw|."""
    lim = np.int64(1) << (I + f)
    a = r if r >= 0 else -r
    if a >= lim:
        if mode == MODE_SATURATE:
            err[E_SAT] += 1
        else:
            record_error(err, ERR_OVERFLOW, op, bit_length(a) - f)
        a = lim - 1
        r = a if r > 0 else -a
    if a > err[E_MAXABS]:
        err[E_MAXABS] = a
    return r


@njit(cache=True, inline='always')
def fx_add(a, b, I, f, mode, err):
    return fit_value(a + b, I, f, mode, OP_ADD, err)


@njit(cache=True, inline='always')
def fx_sub(a, b, I, f, mode, err):
    return fit_value(a - b, I, f, mode, OP_SUB, err)


@njit(cache=True, inline='always')
def fx_relu(a):
    return a if a > 0 else np.int64(0)


@njit(cache=True, inline='always')
def mul_limbs(x, y):
    """(hi, lo) with x y = hi 2^62 + lo, 0 <= lo < 2^62, for 0 <= x, y < 2^62."""
    x0 = x & _M31
    x1 = x >> 31
    y0 = y & _M31
    y1 = y >> 31
    p00 = x0 * y0
    mid = x0 * y1 + x1 * y0          # each < 2^62, sum < 2^63
    t = p00 + ((mid & _M31) << 31)   # < 2^63
    return x1 * y1 + (mid >> 31) + (t >> 62), t & _M62


@njit(cache=True, inline='always')
def mul_round_abs(x, y, f):
    """round_half_even(x y / 2^f) for 0 <= x, y < 2^62, or -1 when it is 2^62 or
    more (out of every format's range): the value fx_mul computes before fitting."""
    if float(x) * float(y) < 4.0e18:
        p = x * y                    # exact: see fx_mul
        if f == 0:
            return p
        q = p >> f
        rem = p & ((np.int64(1) << f) - 1)
        half = np.int64(1) << (f - 1)
        if rem > half or (rem == half and (q & 1) == 1):
            q += 1
        return q
    hi, lo = mul_limbs(x, y)
    if f == 0:
        return lo if hi == 0 else np.int64(-1)
    if hi >= (np.int64(1) << f):
        return np.int64(-1)
    q = (hi << (62 - f)) + (lo >> f)
    rem = lo & ((np.int64(1) << f) - 1)
    half = np.int64(1) << (f - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    return q if q < (np.int64(1) << 62) else np.int64(-1)


@njit(cache=True)
def fx_mul(a, b, I, f, mode, err):
    """round_half_even(a * b / 2^f), exact via a 124-bit product in two int64 limbs."""
    if a == 0 or b == 0:
        return np.int64(0)
    neg = (a < 0) != (b < 0)
    x = a if a > 0 else -a
    y = b if b > 0 else -b
    if float(x) * float(y) < 4.0e18:
        # the exact product is below 2^62 (the float product is within a relative
        # 2^-52 of it and 4.0e18 < 2^62 (1 - 2^-50)): one int64 holds it, and the
        # same half-to-even rounding as below applies
        p = x * y
        if f == 0:
            q = p
        else:
            q = p >> f
            rem = p & ((np.int64(1) << f) - 1)
            half = np.int64(1) << (f - 1)
            if rem > half or (rem == half and (q & 1) == 1):
                q += 1
        return fit_value(-q if neg else q, I, f, mode, OP_MUL, err)
    hi, lo = mul_limbs(x, y)
    if f == 0:
        if hi != 0:
            lim = np.int64(1) << (I + f)
            if mode == MODE_SATURATE:
                err[E_SAT] += 1
            else:
                record_error(err, ERR_OVERFLOW, OP_MUL, bit_length(hi) + 62)
            return fit_value(-(lim - 1) if neg else lim - 1, I, f, mode, OP_MUL, err)
        q = lo
    else:
        if hi >= (np.int64(1) << f):
            # the result is >= 2^62 >= 2^(I+f): certainly out of range
            lim = np.int64(1) << (I + f)
            if mode == MODE_SATURATE:
                err[E_SAT] += 1
            else:
                record_error(err, ERR_OVERFLOW, OP_MUL, bit_length(hi) + 62 - 2 * f)
            return fit_value(-(lim - 1) if neg else lim - 1, I, f, mode, OP_MUL, err)
        q = (hi << (62 - f)) + (lo >> f)
        rem = lo & ((np.int64(1) << f) - 1)
        half = np.int64(1) << (f - 1)
        if rem > half or (rem == half and (q & 1) == 1):
            q += 1
    return fit_value(-q if neg else q, I, f, mode, OP_MUL, err)


@njit(cache=True)
def fx_div(a, b, I, f, mode, err):
    """round_half_even(a * 2^f / b): the quotient of the two values on the grid."""
    if b == 0:
        record_error(err, ERR_DIV_ZERO, OP_DIV, 0)
        return np.int64(0)
    if a == 0:
        return np.int64(0)
    neg = (a < 0) != (b < 0)
    x = a if a > 0 else -a
    y = b if b > 0 else -b
    q = x // y
    r = x - q * y
    if q >= (np.int64(1) << I):
        lim = np.int64(1) << (I + f)
        if mode == MODE_SATURATE:
            err[E_SAT] += 1
        else:
            record_error(err, ERR_OVERFLOW, OP_DIV, bit_length(q))
        return fit_value(-(lim - 1) if neg else lim - 1, I, f, mode, OP_DIV, err)
    for _ in range(f):
        r <<= 1
        q <<= 1
        if r >= y:
            r -= y
            q += 1
    r2 = r << 1
    if r2 > y or (r2 == y and (q & 1) == 1):
        q += 1
    return fit_value(-q if neg else q, I, f, mode, OP_DIV, err)


# --- double-double helpers (error-free transformations, IEEE binary64) -------
@njit(cache=True)
def _two_sum(a, b):
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@njit(cache=True)
def _quick_two_sum(a, b):
    s = a + b
    e = b - (s - a)
    return s, e


@njit(cache=True)
def _split(a):
    c = 134217729.0 * a  # 2^27 + 1
    hi = c - (c - a)
    return hi, a - hi


@njit(cache=True)
def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@njit(cache=True)
def _dd_add(ah, al, bh, bl):
    s1, s2 = _two_sum(ah, bh)
    t1, t2 = _two_sum(al, bl)
    s2 += t1
    s1, s2 = _quick_two_sum(s1, s2)
    s2 += t2
    return _quick_two_sum(s1, s2)


@njit(cache=True)
def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    e += ah * bl + al * bh
    return _quick_two_sum(p, e)


@njit(cache=True)
def _dd_div_int(ah, al, k):
    q1 = ah / k
    p1, p2 = _two_prod(q1, k)
    s, e = _two_sum(ah, -p1)
    e -= p2
    e += al
    q2 = (s + e) / k
    return _quick_two_sum(q1, q2)


@njit(cache=True)
def exp_zero_threshold(f):
    """A raw d with d < threshold has exp(d / 2^f) * 2^f < 1/2 for certain,
    i.e. exp rounds to exactly 0 (conservative: values just above it are
    still computed exactly)."""
    t = (f + 1) * _LN2_HI * (2.0 ** f) * (1.0 + 1e-12)
    if t >= 9.0e18:
        # beyond int64: no raw d (|d| < 2^63) is that negative, so never zero early
        return np.int64(-9223372036854775807) - 1
    return -np.int64(math.ceil(t)) - 2


@njit(cache=True)
def exp_raw(d, I, f, mode, err):
    """round_half_even(exp(d / 2^f) * 2^f) for any int64 d."""
    if d == 0:
        return fit_value(np.int64(1) << f, I, f, mode, OP_EXP, err)
    if d < exp_zero_threshold(f):
        return np.int64(0)
    # x = d / 2^f as a double-double (exact)
    xh = float(d)
    xl = float(d - np.int64(xh))
    sc = 2.0 ** (-f)
    xh *= sc
    xl *= sc
    # overflow: exp(x) * 2^f >= 2^(I+f)  <=>  x >= I ln 2
    if xh > I * _LN2_HI + 1e-9:
        lim = np.int64(1) << (I + f)
        if mode == MODE_SATURATE:
            err[E_SAT] += 1
        else:
            # at least floor(x / ln 2) + 1 integer bits. q is within relative
            # 2.4 * 2^-53 of x / ln 2 (xh, _LN2_HI, the division), so q (1 - 2^-50)
            # is below it: a true lower bound (q itself may round up to the next
            # integer when x / ln 2 lies just below one).
            q = xh / _LN2_HI
            record_error(err, ERR_OVERFLOW, OP_EXP, np.int64(math.floor(q - q * 2.0 ** -50)) + 1)
        return fit_value(lim - 1, I, f, mode, OP_EXP, err)
    k = float(math.floor(xh / _LN2_HI + 0.5))
    kh, kl = _two_prod(k, _LN2_HI)
    kl2, kl3 = _two_prod(k, _LN2_LO)
    rh, rl = _dd_add(xh, xl, -kh, -kl)
    rh, rl = _dd_add(rh, rl, -kl2, -kl3)
    # exp(r), |r| <= ~0.35: Taylor series to 2^-110
    sh, sl = 1.0, 0.0
    th, tl = 1.0, 0.0
    for i in range(1, 30):
        th, tl = _dd_mul(th, tl, rh, rl)
        th, tl = _dd_div_int(th, tl, float(i))
        sh, sl = _dd_add(sh, sl, th, tl)
    # y = exp(r) * 2^(k + f)
    e2 = 2.0 ** (k + f)
    yh = sh * e2
    yl = sl * e2
    # split y = yh + yl into an integer n and a fraction u in [0, 1), exactly:
    # yh - floor(yh) (yh >= 0) and yl - trunc(yl) are exact in binary64, u in (-1, 2)
    # (yl - floor(yl) is not: for yl = -1e-20 it rounds to 1.0)
    n0 = math.floor(yh)
    m0 = math.floor(yl) if yl >= 0.0 else -math.floor(-yl)
    n = np.int64(n0) + np.int64(m0)
    uh, ul = _two_sum(yh - n0, yl - m0)
    if uh >= 1.0:
        n += 1
        uh, ul = _dd_add(uh, ul, -1.0, 0.0)
    elif uh < 0.0:
        n -= 1
        uh, ul = _dd_add(uh, ul, 1.0, 0.0)
    dh, dl = _dd_add(uh, ul, -0.5, 0.0)
    bound = yh * 2.0 ** -96 + 2.0 ** -100
    if abs(dh) <= bound:
        record_error(err, ERR_EXP_UNDECIDED, OP_EXP, 0)
    elif dh > 0.0:
        n += 1
    return fit_value(n, I, f, mode, OP_EXP, err)


@njit(cache=True)
def fx_exp(a, I, f, mode, err):
    """round_half_even(exp(a / 2^f) * 2^f) (correctly rounded; see module doc)."""
    return exp_raw(a, I, f, mode, err)


@njit(cache=True)
def fx_attend(scores, m, values, I, f, mode, err, weights, out):
    """Softmax attention over the first ``m`` scores, docs/theory.md §1.

    M = max_j s_j; e_j = round(exp(s_j - M)); Z = sum_j e_j (exact);
    w_j = round(e_j / Z); out_k = sum_j round(w_j * v_jk) (exact sum).

    ``s_j - M <= 0`` is formed exactly as an intermediate (never stored, so it is
    not range-checked); its exp lies in [0, 1]. Entries with e_j = 0 contribute
    exactly 0 and are skipped. Shapes: scores (>= m,), values (>= m, d),
    weights (>= m,) written, out (d,) written.
    """
    d = values.shape[1]
    for k in range(d):
        out[k] = 0
    if m == 0:
        return
    M = scores[0]
    for j in range(1, m):
        if scores[j] > M:
            M = scores[j]
    thr = exp_zero_threshold(f)
    Z = np.int64(0)
    for j in range(m):
        dj = scores[j] - M
        if dj < thr:
            weights[j] = 0
        else:
            ej = exp_raw(dj, I, f, mode, err)
            weights[j] = ej
            Z = fx_add(Z, ej, I, f, mode, err)
    for j in range(m):
        ej = weights[j]
        if ej != 0:
            wj = fx_div(ej, Z, I, f, mode, err)
            weights[j] = wj
            if wj != 0:
                for k in range(d):
                    v = values[j, k]
                    if v != 0:
                        out[k] += fx_mul(wj, v, I, f, mode, err)
    # The sum is exact and range-checked once: checking every partial sum would make
    # the output depend on the order of the keys (Q2.1, equal scores, values 7, 7, -7
    # overflowed while 7, -7, 7 gave 2.0). No int64 wrap: |round(w_j v_jk)| <= |v_jk|,
    # a nonzero weight needs e_j / Z > 2^-(f+1), so s < 2^(f+1) of them summing to
    # < 1 + s 2^-(f+1); hence sum_j |round(w_j v_jk)| < 2^63 for any m <= 2^31.
    for k in range(d):
        out[k] = fit_value(out[k], I, f, mode, OP_ADD, err)


# ----------------------------------------------------------------------------
# Python layer
class PrecisionError(ArithmeticError):
    """A fixed-point computation could not be carried out in its declared format."""


class FixedPointOverflow(PrecisionError):
    """A result does not fit the format's integer bits (``fmt``, a
    :class:`~rnngap.constructions.machine.formats.FixedFormat`)."""

    def __init__(self, op: str, needed_int_bits: int, fmt, where: str = ""):
        self.op = op
        self.needed_int_bits = int(needed_int_bits)
        self.int_bits = fmt.int_bits
        self.fmt = fmt
        self.where = where
        loc = f" in {where}" if where else ""
        super().__init__(
            f"{op} overflows {fmt.name}{loc}: the result needs at least "
            f"{self.needed_int_bits} integer bits, the format has {fmt.int_bits}"
        )


class FixedPointDivisionByZero(PrecisionError):
    pass


class ExpRoundingUndecided(PrecisionError):
    pass


Number = Union[int, Fraction, float]


def max_abs_raw(err: np.ndarray) -> int:
    """The largest |raw| an error array has seen (a wide array, constructions/machine/wide.py,
    keeps its high limb at index ERR_LEN)."""
    hi = int(err[ERR_LEN]) if err.shape[0] > ERR_LEN else 0
    return (hi << 63) + int(err[E_MAXABS])


def storage_for(int_bits: int, frac_bits: int) -> str:
    """The storage a declared format needs: int64 when I + f <= 62, else two limbs."""
    return "int64" if int_bits + frac_bits <= MAX_MAGNITUDE_BITS else "two-limb"


def check_err(err: np.ndarray, fmt, where: str = "") -> None:
    """Raise the error a kernel recorded in ``err`` for the format ``fmt`` (its name
    and bits in the message); nothing if none."""
    code = int(err[E_CODE])
    if code == ERR_OK:
        return
    op = OP_NAMES.get(int(err[E_OP]), f"op{int(err[E_OP])}")
    pos = int(err[E_WHERE])
    loc = where + (f" at position {pos}" if pos >= 0 else "")
    if code == ERR_OVERFLOW:
        raise FixedPointOverflow(op, int(err[E_NEED]), fmt, loc)
    if code == ERR_DIV_ZERO:
        raise FixedPointDivisionByZero(f"division by zero in {fmt.name}" + (f" in {loc}" if loc else ""))
    if code == ERR_EXP_UNDECIDED:
        raise ExpRoundingUndecided(
            f"exp result within 2^-96 of a rounding boundary in {fmt.name}"
            + (f" in {loc}" if loc else "") + ": double-double cannot decide the rounding")
    raise PrecisionError(f"unknown error code {code}")


def log2_ceil(n: int) -> int:
    """ceil(log2(n)) for n >= 1, exactly (integers only)."""
    if n < 1:
        raise ValueError(f"log2_ceil needs n >= 1, got {n}")
    return (n - 1).bit_length()
