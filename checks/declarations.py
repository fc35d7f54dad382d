"""Asymptotic resource declarations, checked symbolically with sympy.

A construction declares its resources as sympy expressions in ``n`` (e.g.
f(n) = 2 ceil(log2(n + 2)) + 3); each declaration states its class: constant,
log (O(log n)), linear (O(n)), nlogn (O(n log n)) or poly (O(n^k) for the stated
k). :func:`holds` confirms the class symbolically: ceilings and floors are
bounded by x + 1 and x, Max by a sum (all declared quantities are >= 0), and
lim_{n->oo} expr / g(n) must be finite.

Example::

    >>> holds(Declaration("T4.6-up", "index", "int_bits", 2*sp.ceiling(sp.log(N + 2, 2)) + 6, "log"))
    True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy as sp

N = sp.Symbol("n", positive=True, integer=True)
_x = sp.Symbol("x", positive=True)

ORDERS = {
    "constant": sp.Integer(1),
    "log": sp.log(N),
    "linear": N,
    "nlogn": N * sp.log(N),
}


@dataclass(frozen=True)
class Declaration:
    claim: str
    model: str
    resource: str          # int_bits, frac_bits, precision_bits, cot, params, state_bits, ...
    expr: sp.Expr
    order: str             # constant | log | linear | nlogn | poly:K

    def growth(self) -> sp.Expr:
        if self.order.startswith("poly:"):
            return N ** sp.Integer(int(self.order.split(":", 1)[1]))
        if self.order not in ORDERS:
            raise ValueError(f"{self.model}.{self.resource}: unknown order {self.order!r}")
        return ORDERS[self.order]


def _upper(expr: sp.Expr) -> sp.Expr:
    """An upper bound of ``expr`` without ceiling/floor/Max (for nonnegative parts)."""
    expr = sp.sympify(expr)
    expr = expr.replace(sp.ceiling, lambda a: a + 1).replace(sp.floor, lambda a: a)
    expr = expr.replace(sp.Max, lambda *args: sp.Add(*args))
    return expr


def holds(decl: Declaration) -> bool:
    """True iff decl.expr is O(decl.growth()) as n -> oo (symbolically)."""
    expr = sp.sympify(decl.expr)
    if expr.free_symbols - {N}:
        raise ValueError(f"{decl.model}.{decl.resource}: expression {expr} uses symbols other than n")
    if decl.order == "constant":
        return not expr.free_symbols
    return _bounded_ratio(_upper(expr), decl.growth())


@functools.lru_cache(maxsize=None)
def _bounded_ratio(up: sp.Expr, growth: sp.Expr) -> bool:
    """lim_{n->oo} up / growth is finite. Memoised on the (hashable, structural)
    sympy expressions: many constructions declare the same expression, and
    sympy's limit is the slow part of the check."""
    lim = sp.limit(up / growth, N, sp.oo)
    return bool(lim.is_finite)


def evaluate(expr: sp.Expr, n: int) -> int:
    """The integer value of a declaration at n (exact: ceilings of logs are
    evaluated by sympy's exact integer logic)."""
    v = sp.sympify(expr).subs(N, n)
    v = sp.nsimplify(v) if not v.is_Integer else v
    return int(sp.ceiling(v)) if not v.is_Integer else int(v)


DECLARATIONS: list[Declaration] = []


def declare(claim: str, model: str, resource: str, expr, order: str) -> Declaration:
    d = Declaration(claim, model, resource, sp.sympify(expr), order)
    DECLARATIONS.append(d)
    return d
