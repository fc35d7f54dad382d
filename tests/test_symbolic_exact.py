"""The exact evaluator of checks/certify/sizes.py (compiled once per expression, run at
every n by the exhaustive certificates) against sympy's own exact evaluation.

Random expressions in n over the atoms the declarations use (integers,
rationals, +, *, integer powers including negative ones, floor / ceiling of a
rational, ceiling / floor of log2, Max, Min, Abs, Piecewise) are evaluated at
random n by :func:`checks.certify.sizes.exact_value` and by substituting n into the
expression and letting sympy simplify it to a number (sympy evaluates floor of a
logarithm of an integer exactly). Relations likewise."""
from __future__ import annotations

from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, strategies as st

from rnngap.checks.certify.sizes import compiled_truth, exact_truth, exact_value

n = sp.Symbol("n", positive=True, integer=True)


def _positive(draw_expr):
    """An expression that is positive at every n >= 1 (for log2 and negative powers)."""
    return sp.Abs(draw_expr) + 1


@st.composite
def exprs(draw, depth: int = 3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.integers(0, 2))
        if leaf == 0:
            return n
        if leaf == 1:
            return sp.Integer(draw(st.integers(-9, 9)))
        return sp.Rational(draw(st.integers(-9, 9)), draw(st.integers(1, 7)))
    a = draw(exprs(depth=depth - 1))
    kind = draw(st.integers(0, 10))
    if kind == 0:
        return a + draw(exprs(depth=depth - 1))
    if kind == 1:
        return a * draw(exprs(depth=depth - 1))
    if kind == 2:
        return a ** draw(st.integers(0, 3))
    if kind == 3:
        return _positive(a) ** draw(st.integers(-2, -1))
    if kind == 4:
        return sp.floor(a)
    if kind == 5:
        return sp.ceiling(a)
    if kind == 6:
        return sp.ceiling(sp.log(_positive(a), 2))
    if kind == 7:
        return sp.floor(sp.log(_positive(a), 2))
    if kind == 8:
        return sp.Max(a, draw(exprs(depth=depth - 1)))
    if kind == 9:
        return sp.Min(a, draw(exprs(depth=depth - 1)))
    b = draw(exprs(depth=depth - 1))
    return sp.Piecewise((a, sp.Gt(b, draw(st.integers(-5, 5)))), (b, True))


def _sympy_value(e, v: int) -> Fraction:
    r = e.subs(n, v)
    if not r.is_Rational:
        r = sp.simplify(r)
    assert r.is_Rational, (e, v, r)
    return Fraction(int(r.p), int(r.q))


@given(exprs(), st.integers(1, 10 ** 6))
def test_exact_value_equals_sympy(e, v):
    got = exact_value(e, {n: v})
    assert isinstance(got, Fraction)
    assert got == _sympy_value(e, v), (e, v)


@given(exprs(), exprs(), st.integers(1, 10 ** 6), st.sampled_from([sp.Lt, sp.Le, sp.Gt, sp.Ge, sp.Eq, sp.Ne]))
def test_exact_truth_equals_sympy(a, b, v, rel):
    r = rel(a, b, evaluate=False)
    want = {sp.Lt: lambda x, y: x < y, sp.Le: lambda x, y: x <= y, sp.Gt: lambda x, y: x > y,
            sp.Ge: lambda x, y: x >= y, sp.Eq: lambda x, y: x == y, sp.Ne: lambda x, y: x != y}[rel]
    expect = want(_sympy_value(a, v), _sympy_value(b, v))
    assert exact_truth(r, {n: v}) == expect
    big = sp.Ge(n, 500_000)             # not simplified away (n >= 1 would be)
    assert compiled_truth(sp.And(r, big))({n: v}) == (expect and v >= 500_000)
    assert compiled_truth(sp.Or(r, big))({n: v}) == (expect or v >= 500_000)
    assert compiled_truth(sp.Not(sp.And(r, big)))({n: v}) == (not (expect and v >= 500_000))


def test_exact_evaluation_boundaries():
    """Exact powers of two for the logarithms, negative powers, and refusals."""
    for k in range(1, 70):
        for y in (2 ** k - 1, 2 ** k, 2 ** k + 1):
            assert exact_value(sp.ceiling(sp.log(n, 2)), {n: y}) == (y - 1).bit_length()
            assert exact_value(sp.floor(sp.log(n, 2)), {n: y}) == y.bit_length() - 1
    assert exact_value(sp.ceiling(sp.log(n / 3, 2)), {n: 8}) == 2            # log2(8/3) = 1.41...
    assert exact_value(sp.floor(sp.log(n / 3, 2)), {n: 6}) == 1              # exactly 1
    assert exact_value(n ** -2, {n: 4}) == Fraction(1, 16)
    assert exact_value(sp.Integer(2) ** (n - 70), {n: 3}) == Fraction(1, 2 ** 67)
    with pytest.raises(ValueError, match="log2 outside"):
        exact_value(sp.log(n, 2), {n: 4})
    with pytest.raises(ValueError, match="log2 of"):
        exact_value(sp.ceiling(sp.log(n - 4, 2)), {n: 4})
    with pytest.raises(KeyError):
        exact_value(n + sp.Symbol("m"), {n: 4})
    with pytest.raises(ValueError, match="fractional power"):
        exact_value(n ** (n / 2), {n: 3})
    # a branch (or an And argument) evaluation never reaches is never read
    unreadable = sp.Mod(n, 3)
    assert exact_value(sp.Piecewise((n, sp.Gt(n, 2)), (unreadable, True)), {n: 5}) == 5
    assert exact_truth(sp.And(sp.Gt(n, 9), sp.Gt(unreadable, 0)), {n: 5}) is False
    with pytest.raises(ValueError, match="cannot evaluate"):
        exact_value(sp.Piecewise((n, sp.Gt(n, 2)), (unreadable, True)), {n: 1})
    # sympy writes the condition of this nested Piecewise as ITE(n > 1, False, n > 1)
    nested = sp.Piecewise((n, sp.Gt(n, 1)), (sp.Piecewise((0, sp.Gt(n, 1)), (n, True)), True))
    for v in (1, 2, 3):
        assert exact_value(nested, {n: v}) == v
    ite = sp.ITE(sp.Gt(n, 2), sp.Lt(n, 5), sp.Eq(n, 1))
    assert [exact_truth(ite, {n: v}) for v in range(1, 7)] == [True, False, True, True, False, False]
