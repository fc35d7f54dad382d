"""Exact references for the fixed-point semantics of docs/theory.md §1, in plain Python.

Nothing here imports the code under test. A format is ``(I, f)``: a value is
``raw / 2^f`` with ``|raw| <= max_raw(I, f) = 2^(I+f) - 1``.

Every reference returns the *exact rounded* raw as an unbounded Python int (no
range check), together with the truncated magnitude ``floor(|exact|)`` where the
tests need it; :func:`need_bits` turns a raw into the number of integer bits it
needs. Rounding is half to even of the exact rational (``round(Fraction)`` is
half to even). exp is evaluated with mpmath at >= 320 bits and *certified*: the
reference refuses (AssertionError) rather than guess if the value it rounds lies
within its own error bound of a rounding boundary.

Example::

    >>> mul_exact(12, 5, 3)          # (12/8) * (5/8) = 15/16 -> 8/8 (half to even)
    (8, 7)
    >>> need_bits(16 << 3, 3)        # the value 16 needs 5 integer bits
    5
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import mpmath

EXP_PREC = 320  # bits of mpmath precision beyond the argument's integer part


def max_raw(I: int, f: int) -> int:
    return (1 << (I + f)) - 1


def fits(raw: int, I: int, f: int) -> bool:
    return abs(raw) <= max_raw(I, f)


def need_bits(raw: int, f: int) -> int:
    """Smallest I' >= 0 with |raw| <= 2^(I'+f) - 1."""
    return max(0, abs(raw).bit_length() - f)


def rne(q: Fraction) -> int:
    """Round half to even."""
    r = round(q)
    assert isinstance(r, int)
    return r


def clamp(raw: int, I: int, f: int) -> int:
    m = max_raw(I, f)
    return max(-m, min(m, raw))


# --------------------------------------------------------------------------- ops
def add_exact(a: int, b: int) -> int:
    return a + b


def sub_exact(a: int, b: int) -> int:
    return a - b


def mul_exact(a: int, b: int, f: int) -> tuple[int, int]:
    """(round(a*b / 2^f), floor(|a*b| / 2^f)): the rounded raw and the truncated magnitude."""
    q = Fraction(a * b, 1 << f)
    return rne(q), abs(a * b) >> f


def div_exact(a: int, b: int, f: int) -> tuple[int, int]:
    """(round(a * 2^f / b), floor(|a| * 2^f / |b|)); b != 0."""
    if b == 0:
        raise ZeroDivisionError
    q = Fraction(a * (1 << f), b)
    return rne(q), (abs(a) << f) // abs(b)


@dataclass(frozen=True)
class ExpRef:
    """exp(d / 2^f) * 2^f rounded (``raw``, None when it has more than 256 bits),
    its bit length and the bit length of its floor."""
    raw: int | None
    raw_bits: int
    trunc_bits: int


def exp_exact(d: int, f: int) -> ExpRef:
    """round_half_even(exp(d / 2^f) * 2^f), certified.

    exp(0) = 1 exactly; for d != 0 the value is irrational (Lindemann), so it is
    never a tie, and the mpmath value decides the rounding once its distance to
    the nearest half-integer exceeds the error bound (checked, never assumed).
    """
    if d == 0:
        r = 1 << f
        return ExpRef(r, r.bit_length(), r.bit_length())
    mag = max(0, abs(d).bit_length() - f)          # bits of |x|'s integer part
    prec = EXP_PREC + mag + 16
    with mpmath.workprec(prec):
        x = mpmath.ldexp(mpmath.mpf(d), -f)        # exact
        t = x / mpmath.ln2 + f                     # log2 of the value
        if t < -2:                                 # value < 1/4: rounds to 0
            return ExpRef(0, 0, 0)
        if t < 200:
            y = mpmath.ldexp(mpmath.exp(x), f)     # relative error ~2^-(prec - 4)
            fl = int(mpmath.floor(y))
            frac = y - fl
            tol = mpmath.ldexp(y + 1, -(EXP_PREC - 8))
            assert abs(frac - mpmath.mpf(0.5)) > tol, f"exp reference undecided at d={d}, f={f}"
            assert frac > tol and 1 - frac > tol, f"exp floor undecided at d={d}, f={f}"
            r = fl + (1 if frac > 0.5 else 0)
            return ExpRef(r, r.bit_length(), fl.bit_length())
        # huge value: bit length from log2; a carry of the rounding into a new
        # power of two would need frac(t) within 2^-t of 1, far below resolution
        ft = int(mpmath.floor(t))
        ft_frac = t - ft
        tol = mpmath.ldexp(mpmath.mpf(1), -(EXP_PREC - 8))
        assert tol < ft_frac < 1 - tol, f"exp bit length undecided at d={d}, f={f}"
        return ExpRef(None, ft + 1, ft + 1)


# ----------------------------------------------------------------------- softmax
class RefOverflow(Exception):
    """The exact result of ``op`` is out of range; ``need`` is its exact need."""

    def __init__(self, op: str, need: int):
        super().__init__(op, need)
        self.op = op
        self.need = need


def attend_exact(scores: list[int], values: list[list[int]], I: int, f: int):
    """Softmax attention as docs/theory.md §1, every intermediate exact.

    M = max s_j; e_j = round(exp(s_j - M)); Z = sum e_j (exact); w_j = round(e_j / Z);
    out_k = sum_j round(w_j * v_jk) (exact sum). Range checks on the stored numbers
    e_j, Z and out_k (weights and products are <= 1 resp. |v| in magnitude).
    Returns (weights, out) as raws or raises :class:`RefOverflow` (the first
    failing stage; for out, the largest need over the failing coordinates).
    """
    m = len(scores)
    d = len(values[0]) if m else 0
    if m == 0:
        return [], [0] * d
    M = max(scores)
    e = []
    for s in scores:
        ref = exp_exact(s - M, f)
        assert ref.raw is not None  # s - M <= 0: the value is <= 2^f
        if not fits(ref.raw, I, f):
            raise RefOverflow("exp", need_bits(ref.raw, f))
        e.append(ref.raw)
    Z = sum(e)
    if not fits(Z, I, f):
        raise RefOverflow("add", need_bits(Z, f))
    w = [rne(Fraction(ej << f, Z)) for ej in e]
    out = []
    for k in range(d):
        out.append(sum(rne(Fraction(w[j] * values[j][k], 1 << f)) for j in range(m)))
    bad = [need_bits(o, f) for o in out if not fits(o, I, f)]
    if bad:
        raise RefOverflow("add", max(bad))
    return w, out
