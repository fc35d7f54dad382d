"""The numbers a builder computes with: exact rationals, or sympy expressions of the sizes.

A builder is one function of its sizes: called with integers it builds the
:class:`~constructions.build.model.Model` that runs; called with sympy symbols
(``bounds.N``, ``bounds.A``) inside :func:`symbolic_build` it builds the same
construction with every weight an expression, which ``rnngap certify`` reads. So a
certificate is about the object the builder builds. The helpers (:func:`exact`,
:func:`smax`, :func:`smin`, :func:`bits`, :func:`lc`, :func:`pow2`) work on both
kinds of number; :func:`require` is every margin check: a failing concrete
condition raises :class:`MarginError`, an undecidable symbolic one becomes an
obligation the certificate must prove.

Example::

    >>> from rnngap.constructions.models.bounds import N
    >>> with symbolic_build() as obligations:
    ...     require(smax(N + 1, 9) >= 2, "two")
    ...     require(N + 3 > 3, "positive")
    >>> [o.message for o in obligations]
    ['two']

Details: docs/internals/machine.md#num
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterator

import numpy as np
import sympy as sp

LN2_UPPER = Fraction(6931471806, 10 ** 10)
"""A rational strictly above ln 2 (ln 2 = 0.69314718055994...)."""


class MarginError(ValueError):
    """A gadget's exactness condition does not hold for the given n and format."""


def is_sym(x: Any) -> bool:
    """True for a sympy expression that is not a plain rational number."""
    return isinstance(x, sp.Basic) and not (isinstance(x, sp.Rational))


def any_sym(*xs: Any) -> bool:
    return any(is_sym(x) for x in xs)


def exact(x: Any):
    """A coefficient as an exact number: ``Fraction`` for ints, Fractions and
    sympy rationals; a symbolic sympy expression stays as it is."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"a coefficient must be a number, got {x!r}")
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, sp.Basic):
        if isinstance(x, sp.Rational):
            return Fraction(int(x.p), int(x.q))
        return x
    return Fraction(x)


def is_zero(x: Any) -> bool:
    """x == 0 for an exact number; a symbolic expression is zero only if it is 0 identically."""
    if is_sym(x):
        return bool(sp.expand(x) == 0)
    return exact(x) == 0


def _expanded(x: Any):
    """x with products and powers of sums multiplied out, logarithms left as they are
    (expanding log(a b) into log a + log b would hide the ceil/floor of log2 atoms
    that checks/certify/sizes.py reads)."""
    return sp.expand(x, log=False, power_base=False, power_exp=False, mul=True, multinomial=True)


def smax(*xs: Any):
    """max of exact numbers; sympy Max (of the expanded values) when one is symbolic."""
    return sp.Max(*[_expanded(x) for x in xs]) if any_sym(*xs) else max(xs)


def smin(*xs: Any):
    """min of exact numbers; sympy Min (of the expanded values) when one is symbolic."""
    return sp.Min(*[_expanded(x) for x in xs]) if any_sym(*xs) else min(xs)


def bits_for(magnitude: Any):
    """Integer bits I with |magnitude| < 2^I (floor(log2 |m|) + 1 for |m| >= 1, else 0)."""
    if is_sym(magnitude):
        return sp.floor(sp.log(magnitude, 2)) + 1
    m = abs(exact(magnitude))
    # |m| >= 2^k iff floor(|m|) >= 2^k (2^k an integer): the bit length of the floor
    return (m.numerator // m.denominator).bit_length()


bits = bits_for


def lc(x: Any):
    """ceil(log2 x) for x >= 1 (0 below)."""
    if is_sym(x):
        return sp.ceiling(sp.log(x, 2))
    v = max(1, int(x))
    return (v - 1).bit_length()


def pow2(k: Any):
    return sp.Integer(2) ** k if is_sym(k) else 1 << int(k)


def zero_gap(f: Any):
    """A score gap strictly above this makes the lower weight exactly 0 on a
    grid of 2^-f: round(exp(-g) * 2^f) = 0 iff exp(-g) < 2^-(f+1)."""
    if is_sym(f):
        return (f + 1) * sp.Rational(LN2_UPPER.numerator, LN2_UPPER.denominator)
    return (int(f) + 1) * LN2_UPPER


def sharpness(f: Any, unit_gap: Any = 1):
    """Smallest integer lambda with lambda * unit_gap > (f + 1) ln 2."""
    if any_sym(f, unit_gap):
        return sp.floor(zero_gap(f) / unit_gap) + 1
    g = zero_gap(f) / Fraction(exact(unit_gap))
    return int(g) + 1


def as_float(x: Any):
    """float of a concrete value (for the margin notes a model carries), the expression otherwise."""
    return x if is_sym(x) else float(exact(x))


# ----------------------------------------------------------------------------
# margin checks and the obligations of a symbolic build
@dataclass(frozen=True)
class BuilderObligation:
    """A margin check of a builder whose condition is symbolic in the sizes:
    ``condition`` (a sympy relation) must hold for the certificate to hold."""

    condition: Any
    message: str


_COLLECT: contextvars.ContextVar[list | None] = contextvars.ContextVar("rnngap_num_collect", default=None)


@contextlib.contextmanager
def symbolic_build() -> Iterator[list[BuilderObligation]]:
    """Collect the symbolic margin checks of the builders called inside (see the
    module doc); yields the list they are appended to."""
    found: list[BuilderObligation] = []
    token = _COLLECT.set(found)
    try:
        yield found
    finally:
        _COLLECT.reset(token)


def require(condition: Any, message: str) -> None:
    """Raise :class:`MarginError` with ``message`` unless ``condition`` holds (the
    margin checks of every construction; unlike ``assert`` it survives ``python
    -O``). A symbolic condition is recorded as an obligation inside
    :func:`symbolic_build` and refused (TypeError) outside it."""
    if isinstance(condition, sp.Basic):
        if condition == sp.true:
            return
        if condition == sp.false:
            raise MarginError(message)
        found = _COLLECT.get()
        if found is None:
            raise TypeError(f"a symbolic margin check outside a symbolic build: {message}")
        found.append(BuilderObligation(condition, message))
        return
    if not condition:
        raise MarginError(message)


def sabs(x: Any):
    """|x|; a symbolic x whose sign sympy knows stays free of Abs."""
    if not is_sym(x):
        return abs(exact(x))
    if x.is_nonnegative:
        return x
    if (-x).is_nonnegative:
        return -x
    return sp.Abs(x)


@dataclass(frozen=True)
class SymbolicFormat:
    """The declared format of a symbolic build: I and f as sympy expressions of the
    sizes (the same functions of constructions/models/bounds.py that give the integers of
    a model that runs). Builders read ``int_bits``, ``frac_bits`` and ``name``."""

    int_bits: Any
    frac_bits: Any
    mode: str = "raise"

    @property
    def name(self) -> str:
        return f"Q[{self.int_bits}].[{self.frac_bits}]"

    @property
    def total_bits(self):
        return self.int_bits + self.frac_bits + 1
