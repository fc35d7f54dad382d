"""Proof obligations of every construction, stated over constructions/models/bounds.py.

An :class:`Obligation` is one inequality ``need(n, I, f) <= have(n, I, f)`` (or
``<`` when ``strict``) that a gadget's correctness lemma needs, written with a
backend ``B`` so that ``rnngap certify`` can evaluate it exactly and inspect it
symbolically; ``I`` and ``f`` are the declared format's values at n. A
construction's obligations are its gadgets' plus its own. The lemmas (gap, range,
counting comparison) live in the gadgets' docstrings and are checked on small
formats by tests/test_obligations.py.

Example::

    >>> con = retrieval_cert("index", 2)
    >>> [o.name for o in con.obligations]
    ['match.gap', 'match.range']
    >>> all(o.holds(con, 10) for o in con.obligations)
    True

Details (the lemmas): docs/internals/build.md#obligations
"""
from __future__ import annotations

import re

import functools
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


# ----------------------------------------------------------------------------
# the certified forms of the constructions: each function returns one
# Construction; the construction records (checks/catalog/records.py) say which forms of
# which construction are certified, and at which alphabets.
S = -Bd.SPECIAL_MIN_CODE


def alphabet_fn(spec: int | str) -> Callable:
    """a(n) of a certificate: a constant, or "n+1" / "n+2" (a reduction's alphabet)."""
    if spec == "n+2":
        return lambda B, n: n + 2
    if spec == "n+1":
        return lambda B, n: n + 1
    return lambda B, n, k=int(spec): k


def retrieval_name(key: str, alphabet: int | str | None = None) -> str:
    """The name of the T4.6-up Transformer ``key`` (index, ar, cgram3, counting, ...),
    at the alphabet a(n) when given: ``cgram3`` -> ``cgram-transformer[c=3]``,
    ``("index", 2)`` -> ``index-transformer[a=2]``."""
    variant = [f"c={key[5:]}"] if key.startswith("cgram") else []
    variant += [] if alphabet is None else [f"a={alphabet}"]
    task = "cgram" if key.startswith("cgram") else key
    return f"{task}-transformer" + (f"[{','.join(variant)}]" if variant else "")


def retrieval_key(name: str) -> str:
    """The inverse of :func:`retrieval_name`: ``cgram-transformer[c=3,a=2]`` -> ``cgram3``."""
    task = name.split("-transformer", 1)[0]
    c = re.search(r"\bc=(\d+)", name)
    return f"{task}{c.group(1)}" if task == "cgram" and c else task


def retrieval_cert(key: str, alphabet: int | str) -> Construction:
    """The T4.6-up Transformer ``key`` (index, ar, cgram3, cgram4, counting) at a(n)."""
    alpha = alphabet_fn(alphabet)
    name = retrieval_name(key, alphabet)
    if key == "index":
        obl = match_obligations("match", lambda B, n: B.max(n + 3, alpha(B, n), S),
                                lambda B, n: B.max(n + 1, alpha(B, n), S))
        return Construction("T4.6-up", name, Bd.INDEX, 1, tuple(obl), alphabet=alpha)
    if key == "counting":
        return Construction("T4.6-up", name, Bd.COUNTING, 1, tuple(counting_obligations("counting", alpha)),
                            alphabet=alpha)
    c = 2 if key == "ar" else int(key[-1])
    obl = []
    for k in range(1, c):
        obl += shift_obligations(f"shift_{k}", lambda B, n: n + c + 1, k)
    obl += joint_match_obligations("match", c - 1, lambda B, n: B.max(alpha(B, n), S), lambda B, n: n + c)
    return Construction("T4.6-up", name, Bd.AR if c == 2 else Bd.CGRAM, c, tuple(obl), alphabet=alpha, c=c)


def mqar_cert() -> Construction:
    bound = lambda B, n, f: Bd.mqar_match_bound(B, n, f)
    return Construction("T4.6-up", "mqar-transformer", Bd.MQAR, 1, tuple(
        shift_obligations("shift", lambda B, n: n + 1, 1)
        + [gap("match", "gap_partial"), gap("match", "gap_between_matches"), range_("match", bound)]),
        alphabet=lambda B, n: Bd.MQAR_MAX_VALUE)


def hybrid_cert(key: str) -> Construction:
    """The T5.6 hybrid ``key`` (index, ar, cgram(c=3), counting, istree)."""
    H = Bd.HYBRID
    if key == "index":
        return Construction("T5.6", "index-hybrid", H["index"], 2, (
            gap("match"), range_("match", lambda B, n, f: Bd.hybrid_index_bound(B, n))))
    if key in ("ar", "cgram(c=3)"):
        width = 1 if key == "ar" else 2
        decl = H["ar"] if key == "ar" else Bd.hybrid_cgram(3)
        return Construction("T5.6", "ar-hybrid" if key == "ar" else "cgram-hybrid", decl, width + 1, (
            gap("match", "gap_non_match"), gap("match", "gap_between_matches"),
            range_("match", lambda B, n, f: Bd.hybrid_first_bound(B, n, width))))
    if key == "counting":
        return Construction("T5.6", "counting-hybrid", H["counting"], 3, (
            gap("count"), range_("count", lambda B, n, f: Bd.hybrid_count_bound(B, n)),
            Obligation("compare.gap", lambda B, n, I, f: Bd.count_compare_inverse_gap(B, n),
                       lambda B, n, I, f: B.pow2(f), strict=True)))
    if key == "istree":
        return Construction("T5.6", "istree-hybrid", Bd.hybrid_istree(), 2, (
            gap("union-find", "gap_non_match"), gap("union-find", "gap_between_matches"),
            range_("union-find", lambda B, n, f: Bd.hybrid_istree_bound(B, n, n))))
    raise ValueError(f"no hybrid {key!r}")


ISTREE_LABELS = {"sparse": "istree-transformer[m<=n+2]", "dense": "istree-transformer[any-graph]"}


def istree_dfs_cert(graphs: str) -> Construction:
    """The T4.7-up IsTree Transformer on graphs with m <= n + 2 edges ("sparse") or
    on any simple graph ("dense")."""
    m = (lambda n: n + 2) if graphs == "sparse" else (
        lambda n: n * (n - 1) / 2 if not isinstance(n, int) else n * (n - 1) // 2)
    label = ISTREE_LABELS[graphs]
    decl = Declared(label, lambda B, n, a, c: Bd.istree_int(B, n, m(n)), Bd.const(Bd.ISTREE_FRAC_BITS),
                    claim="T4.7-up", two_limb=True)

    def T1(B, n):
        return B.max(Bd.istree_positions(B, n, m(n)), Bd.istree_tau_bound(B, n))
    V = lambda B, n: Bd.istree_tau_bound(B, n)
    return Construction("T4.7-up", label, decl, 2, (
        gap("heads", "gap"),
        range_("tie-break", lambda B, n, f: 17 * T1(B, n) ** 2 * V(B, n)),
        range_("lookup", lambda B, n, f: 33 * T1(B, n) ** 2),
        range_("mlp-mask", lambda B, n, f: 3 * T1(B, n) ** 2 * V(B, n)),
        range_("readout", lambda B, n, f: 3 * V(B, n) ** 2)))


def rag_cert(name: str) -> Construction:
    """A T5-RAG construction (index-rag, ar-rag, cgram-rag, counting-rag, istree-rag,
    istree-rag-paper). The readout logit 2 T V + T^2 < 5 (n + 21)^2 (rag_models; the
    compiler's interval bound, re-checked at compile time, covers the rest); ar-rag
    is cgram-rag's builder at c = 2: the same declared format, its own certificate."""
    decl = Bd.RAG["cgram-rag" if name == "ar-rag" else name]
    return Construction("T5-RAG", name, decl, 2, (
        Obligation("readout.range", lambda B, n, I, f: B.bits(5 * (n + 21) ** 2), lambda B, n, I, f: I),))


@functools.lru_cache(maxsize=None)
def tm_hybrid_cert(mname: str) -> Construction:
    """The T5-hyb-P hybrid simulating the machine ``mname`` (constructions/models/turing.py)."""
    from .turing import MACHINES, Encoding, hybrid_declared, time_of
    spec = MACHINES[mname]
    enc = Encoding.of(spec.build())
    nA, nG, T = len(enc.actions), len(enc.symbols), time_of(spec)
    return Construction("T5-hyb-P", f"tm-{mname}-hybrid", hybrid_declared(enc, spec), 1, (
        gap("retrieval", "gap_non_match"), gap("retrieval", "gap_between_matches"),
        range_("retrieval", lambda B, n, f: Bd.tm_hybrid_bound(B, n, T(B, n), nA, nG))))


@functools.lru_cache(maxsize=None)
def tm_rag_cert(mname: str) -> Construction:
    """The T5-RAG linear RNN + RAG simulating the machine ``mname``."""
    from .turing import MACHINES, Encoding, rag_declared, time_of
    spec = MACHINES[mname]
    enc = Encoding.of(spec.build())
    nA, nG, T = len(enc.actions), len(enc.symbols), time_of(spec)

    def K(B, n):
        return B.max(B.max(n, T(B, n) + 1, nA, nG) + 1, Bd.NUMBER_BASE)
    return Construction("T5-RAG", f"tm-{mname}-rag", rag_declared(enc, spec), 1, (
        range_("readout", lambda B, n, f: 3 * K(B, n) ** 2),))


def iterate_cert() -> Construction:
    """The T4.1 RNN with CoT for ITER."""
    return Construction("T4.1", "iterate-rnn", Bd.ITERATE, 2, (
        range_("readout", lambda B, n, f: Bd.iterate_readout_bound(B, n)),))


def sim_construction(p: "Bd.SimRNN", n_min: int = 1) -> Construction:
    """The simulator of the RNN ``p`` (constructions/models/simulate.py) at context length n.

    Honest note: the simulator's I is DEFINED as the largest of its parts' needs
    (bounds.sim_int = max of bounds.sim_needs), so every ``*.range`` obligation
    holds by definition; what certify adds for them is that the declared format
    fits int64 up to n_max and that I(n) is nondecreasing (so a simulator with a
    shorter context is covered). The gap obligation and the clamp gate are real
    inequalities; the simulator's heads are proved from each built simulator
    (checks/certify/simulator.py, row 'rnnsim-transformer[layers]')."""
    names = list(Bd.sim_needs(INT, p, 1, 1))
    obl = [gap("heads")]
    for k in names:
        obl.append(Obligation(k, lambda B, n, I, f, k=k: Bd.sim_needs(B, p, n, n)[k], lambda B, n, I, f: I,
                              doc="defined from its own obligation: I = max of the needs"))
    obl.append(Obligation("clamp.gate", lambda B, n, I, f: Bd.sim_clamp(B, p)[0] + S,
                          lambda B, n, I, f: Bd.sim_clamp(B, p)[2],
                          doc="big >= v_max - TAU_MIN: the clamp's gate is closed off the Y position"))
    return Construction("sim", f"rnnsim-transformer[{p.name}]", Bd.sim_declared(p), n_min, tuple(obl))


__all__ = ["Construction", "Obligation", "hybrid_cert", "istree_dfs_cert", "iterate_cert", "mqar_cert", "rag_cert",
           "retrieval_cert", "sim_construction", "tm_hybrid_cert", "tm_rag_cert"]
