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
    """lim_{n->oo} up / growth is finite. First the order rules of
    :func:`order_bound` (sound: they bound |up| from above); what they do not
    settle (a term they do not know, or an order above the growth) goes to
    sympy's limit, which alone decides every failure. Memoised on the (hashable,
    structural) sympy expressions: many constructions declare the same one."""
    if _within(order_bound(up), order_bound(growth, lower=True)):
        return True
    lim = sp.limit(up / growth, N, sp.oo)
    return bool(lim.is_finite)


# ----------------------------------------------------------------------------
# Order rules. An order (a, b) stands for n^a (log n)^b (a, b rational). The
# rules give, for an expression e in n, an upper order U with |e| <= C n^a log^b n
# for all large n, and a lower order L with e >= c n^a log^b n > 0 for all large n
# (only for expressions that are eventually positive). None: not known. Sums:
# U = max over the terms (|sum| <= sum |terms|); L = max over the eventually
# positive terms, provided every other term has an upper order strictly below it
# (e.g. n (n - 1): the -1 is dominated). Products: U, L add. Powers with a rational exponent k:
# scale (k < 0 swaps U and L). log e: needs L(e) (so e is eventually >= c > 0):
# |log e| <= max(|a_U|, |a_L|) log n + O(log log n), so U = (0, 1), or (0, 0) when
# c <= e <= C; L = (0, 1) when L(e) has a > 0 (e >= n^a), (0, 0) when e -> oo
# more slowly. Anything else (floor, Max, functions, symbols other than n) is
# not known: the caller then asks sympy.

Order = tuple  # (a, b) of sympy Rationals


def _max_order(orders):
    return max(orders, key=lambda o: (o[0], o[1]))


def _bounds(e: sp.Expr) -> tuple:
    """(U, L) of ``e``; either may be None (not known)."""
    if e.is_number:
        if not e.is_real:
            return None, None
        if e.is_zero:
            return (sp.Integer(0), sp.Integer(0)), None
        zero = (sp.Integer(0), sp.Integer(0))
        return zero, (zero if e.is_positive else None)
    if e == N:
        return (sp.Integer(1), sp.Integer(0)), (sp.Integer(1), sp.Integer(0))
    if isinstance(e, sp.Add):
        parts = [_bounds(t) for t in e.args]
        ups = [u for u, _ in parts]
        lows = [lo for _, lo in parts]
        U = None if any(u is None for u in ups) else _max_order(ups)
        known = [lo for lo in lows if lo is not None]
        L = _max_order(known) if known else None
        # the terms not known positive must be of a strictly lower order than the
        # largest positive one (they are then eventually below half of it)
        if L is not None and any(lo is None and (u is None or (u[0], u[1]) >= (L[0], L[1])) for u, lo in parts):
            L = None
        return U, L
    if isinstance(e, sp.Mul):
        parts = [_bounds(t) for t in e.args]
        U = L = (sp.Integer(0), sp.Integer(0))
        for u, lo in parts:
            U = None if U is None or u is None else (U[0] + u[0], U[1] + u[1])
            L = None if L is None or lo is None else (L[0] + lo[0], L[1] + lo[1])
        return U, L      # U: |product| <= product of |factors|, whatever their signs
    if isinstance(e, sp.Pow):
        base, k = e.args
        if not (k.is_Rational and k.is_number):
            return None, None
        U, L = _bounds(base)
        if k >= 0:
            if k.is_integer:
                # |base^k| <= |base|^k for any sign; positive only if base is
                return (None if U is None else (k * U[0], k * U[1])), (None if L is None else (k * L[0], k * L[1]))
            if L is None:        # a fractional power of a base not known positive
                return None, None
            return (None if U is None else (k * U[0], k * U[1])), (k * L[0], k * L[1])
        if L is None:            # 1 / base needs base bounded away from 0
            return None, None
        return (k * L[0], k * L[1]), (None if U is None else (k * U[0], k * U[1]))
    if isinstance(e, sp.log):
        (arg,) = e.args
        U, L = _bounds(arg)
        if L is None or U is None:
            return None, None
        zero = (sp.Integer(0), sp.Integer(0))
        if L[0] > 0:
            return (sp.Integer(0), sp.Integer(1)), (sp.Integer(0), sp.Integer(1))
        if L[0] == 0 and L[1] > 0:
            return (sp.Integer(0), sp.Integer(1)), zero
        if U == zero and L == zero:
            return zero, None
        return (sp.Integer(0), sp.Integer(1)), None
    return None, None


def order_bound(e: sp.Expr, lower: bool = False) -> Order | None:
    """The upper order of ``e`` (lower=True: its lower order), or None."""
    U, L = _bounds(sp.sympify(e))
    return L if lower else U


def _within(up: Order | None, growth: Order | None) -> bool:
    return up is not None and growth is not None and (up[0], up[1]) <= (growth[0], growth[1])


def evaluate(expr: sp.Expr, n: int) -> int:
    """The integer value of a declaration at n (exact: ceilings of logs are
    evaluated by sympy's exact integer logic)."""
    v = sp.sympify(expr).subs(N, n)
    v = sp.nsimplify(v) if not v.is_Integer else v
    return int(sp.ceiling(v)) if not v.is_Integer else int(v)
