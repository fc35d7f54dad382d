"""Proof obligations of the gadgets, stated over constructions/models/bounds.py.

An :class:`Obligation` is one inequality ``need(n, I, f) <= have(n, I, f)`` (or
``<`` when ``strict``) that a gadget's correctness lemma needs, written with a
backend ``B`` so that ``rnngap certify`` can evaluate it exactly and inspect it
symbolically; ``I`` and ``f`` are the declared format's values at n. A
construction's obligations are its gadgets' plus its own; each construction's
:class:`Construction` (its certified form) is made in its family's module of
checks/catalog/. The lemmas (gap, range, counting comparison) live in the
gadgets' docstrings and are checked on small formats by tests/test_obligations.py.

Example::

    >>> [o.name for o in match_obligations("match", lambda B, n: n + 3, lambda B, n: n + 1)]
    ['match.gap', 'match.range']

Details (the lemmas): docs/internals/build.md#obligations
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from . import bounds as Bd
from .bounds import INT, Declared


@dataclass(frozen=True)
class Obligation:
    name: str                 # "<gadget>.<fact>"
    need: Callable            # (B, n, I, f) -> number
    have: Callable            # (B, n, I, f) -> number
    strict: bool = False
    doc: str = ""

    def values(self, con: "Construction", n: int) -> tuple:
        I, f = con.fmt(n)
        return self.need(INT, n, I, f), self.have(INT, n, I, f)

    def holds(self, con: "Construction", n: int) -> bool:
        need, have = self.values(con, n)
        return need < have if self.strict else need <= have


@dataclass(frozen=True)
class Construction:
    claim: str
    name: str
    declared: Declared
    n_min: int
    obligations: tuple
    alphabet: Callable = lambda B, n: 2      # a(n), int or sympy
    c: int = 2
    margins: Callable | None = None        # n -> {head: score_int_bits} the obligations certify

    def fmt(self, n: int) -> tuple[int, int]:
        return (self.declared.int_fn(INT, n, self.alphabet(INT, n), self.c), self.declared.frac_fn(INT, n))

    def fmt_expr(self, B, n) -> tuple:
        return self.declared.int_fn(B, n, self.alphabet(B, n), self.c), self.declared.frac_fn(B, n)

    def weakened(self, **kw) -> "Construction":
        return replace(self, **kw)


# ----------------------------------------------------------------------------
# gadget obligations
def gap(prefix: str, what: str = "gap", have=lambda B, n, I, f: B.sharp(f)) -> Obligation:
    """lambda = sharpness(f) > (f + 1) ln 2 (the unit gap of integer keys)."""
    return Obligation(f"{prefix}.{what}", lambda B, n, I, f: B.zg(f), have, strict=True,
                      doc="score gap > (f + 1) ln 2: the lower weight is exactly 0")


def range_(prefix: str, bound: Callable, what: str = "range") -> Obligation:
    """bits(max |score|) + 1 <= I; ``bound(B, n, f)`` is max |score|."""
    return Obligation(f"{prefix}.{what}", lambda B, n, I, f: B.bits(bound(B, n, f)) + 1, lambda B, n, I, f: I,
                      doc="every score (and a difference of two) fits I integer bits")


def match_obligations(prefix: str, K: Callable, Q: Callable) -> list[Obligation]:
    """gadgets.match_head without tie-break: lambda (2 Q K + K^2)."""
    return [gap(prefix), range_(prefix, lambda B, n, f: B.sharp(f) * (2 * Q(B, n) * K(B, n) + K(B, n) ** 2))]


def shift_obligations(prefix: str, npos: Callable, shift: int) -> list[Obligation]:
    """gadgets.shift_head: lambda (3 N^2) + 2 lambda s N."""
    return [gap(prefix), range_(prefix, lambda B, n, f: B.sharp(f) * 3 * npos(B, n) ** 2
                                + 2 * B.sharp(f) * shift * npos(B, n))]


def joint_match_obligations(prefix: str, m: int, Kc: Callable, P: Callable) -> list[Obligation]:
    """retrieval.joint_match_head: mu = s, lambda = mu P + s; partial matches lose
    lambda - mu P = s, later full matches lose mu; |score| <= lambda m 3 K^2 + mu P."""
    def bound(B, n, f):
        mu = B.sharp(f)
        return (mu * P(B, n) + B.sharp(f)) * m * 3 * Kc(B, n) ** 2 + mu * P(B, n)
    return [gap(prefix, "gap_partial"), gap(prefix, "gap_between_matches"), range_(prefix, bound)]


def counting_obligations(prefix: str, alphabet: Callable) -> list[Obligation]:
    """retrieval.counting_transformer: after-query, fetch-q and count heads and the comparison."""
    def fetch_gap(B, n, I, f):      # M - mu (n + 1) with M = mu (n + 2) + lambda: = mu + lambda
        mu = B.sharp(f)
        return mu + B.sharp(f)
    return [
        gap(f"{prefix}.after-query"),
        gap(f"{prefix}.fetch-q", "gap_q_t"),
        gap(f"{prefix}.fetch-q", "gap_q_data", fetch_gap),
        range_(f"{prefix}.fetch-q", lambda B, n, f: Bd.count_fetch_bound(B, n, f)),
        gap(f"{prefix}.count"),
        range_(f"{prefix}.count", lambda B, n, f: Bd.count_match_bound(B, n, alphabet(B, n), f)),
        range_(f"{prefix}.count", lambda B, n, f: n + 4, "normaliser_range"),
        Obligation(f"{prefix}.compare.gap", lambda B, n, I, f: Bd.count_compare_inverse_gap(B, n), lambda B, n, I, f: B.pow2(f),
                   strict=True, doc="1/((n+1)(2n+3)) > 2^-f: the comparison 1/(c+1) vs 1/(t+3/2) is exact"),
    ]


__all__ = ["Construction", "Obligation", "counting_obligations", "gap", "joint_match_obligations",
           "match_obligations", "range_", "shift_obligations"]
