"""The Turing-machine family: one hybrid (T5-hyb-P) and one RAG model (T5-RAG) per registry machine.

Each machine of constructions/models/turing.py (``MACHINES``) gets two records:
the RNN + one-attention-layer hybrid and the linear RNN with RAG that simulate
it step by step with CoT, with their declared parameter counts, resources
(including the machine's time bound T(n)) and certified forms.
"""
from __future__ import annotations

import functools
from typing import Callable

import sympy as sp

from rnngap.constructions.models import bounds as Bd, turing
from rnngap.constructions.models.obligations import Construction, gap, range_

from .asymptotics import N as N_DECL
from .examples import tm_example
from .rag import program_cert
from .schema import Certificate, ConstructionRecord, Form, Key, Resource, int_frac_resources

PARAMS = {"increment": (2125, 15221), "palindrome": (9018, 57546), "0k1k": (7102, 47516),
          "addition": (19941, 150036)}
"""Declared parameter counts of the Turing-machine constructions: (hybrid, RAG) per machine."""


@functools.lru_cache(maxsize=None)
def tm_hybrid_cert(mname: str) -> Construction:
    """The T5-hyb-P hybrid simulating the machine ``mname`` (constructions/models/turing.py)."""
    spec = turing.MACHINES[mname]
    enc = turing.Encoding.of(spec.build())
    nA, nG, T = len(enc.actions), len(enc.symbols), turing.time_of(spec)
    return Construction("T5-hyb-P", f"tm-{mname}-hybrid", turing.hybrid_declared(enc, spec), 1, (
        gap("retrieval", "gap_non_match"), gap("retrieval", "gap_between_matches"),
        range_("retrieval", lambda B, n, f: Bd.tm_hybrid_bound(B, n, T(B, n), nA, nG))))


@functools.lru_cache(maxsize=None)
def tm_rag_cert(mname: str) -> Construction:
    """The T5-RAG linear RNN + RAG simulating the machine ``mname``."""
    spec = turing.MACHINES[mname]
    enc = turing.Encoding.of(spec.build())
    nA, nG, T = len(enc.actions), len(enc.symbols), turing.time_of(spec)

    def K(B, n):
        return B.max(B.max(n, T(B, n) + 1, nA, nG) + 1, Bd.NUMBER_BASE)
    return Construction("T5-RAG", f"tm-{mname}-rag", turing.rag_declared(enc, spec), 1, (
        range_("readout", lambda B, n, f: 3 * K(B, n) ** 2),))


TM_PROGRAM_SIZES = (1, 4, 16)
"""The input lengths at which ``rnngap certify`` proves each RAG machine computes its program."""


def _resources(mname: str, architecture: str) -> Callable[[], tuple]:
    def make():
        spec = turing.MACHINES[mname]
        enc = turing.Encoding.of(spec.build())
        sub = {turing.NSYM: N_DECL}
        if architecture == "rag":
            return int_frac_resources(f"tm-{mname}-rag", turing.rag_declared(enc, spec), sub=sub, frac=False)
        degree = int(sp.degree(sp.expand(spec.time_expr.subs(sub)), N_DECL))
        return int_frac_resources(f"tm-{mname}-hybrid", turing.hybrid_declared(enc, spec), sub=sub) + (
            Resource(f"tm.{mname}", "steps T(n)", spec.time_expr.subs(sub), f"poly:{degree}", spec.time_bound),)
    return make


def _records() -> tuple[ConstructionRecord, ...]:
    out = []
    for m, spec in turing.MACHINES.items():
        hyb, rag = PARAMS[m]
        out.append(ConstructionRecord(
            Key("T5-hyb-P", f"tm-{m}", "hybrid"), turing.tm_hybrid, tm_example(spec),
            f"hybrid with CoT simulating the TM {m!r} ({spec.describe})",
            (Form(f"tm-{m}-hybrid", params=hyb, params_n=(1, 8), resources=_resources(m, "hybrid"),
                  certificates=lambda m=m: (Certificate(tm_hybrid_cert(m)),)),), args=(spec,)))
        out.append(ConstructionRecord(
            Key("T5-RAG", f"tm-{m}", "rag"), turing.tm_rag, tm_example(spec),
            f"linear RNN + RAG simulating the TM {m!r}",
            (Form(f"tm-{m}-rag", params=rag, params_n=(1, 8), resources=_resources(m, "rag"),
                  certificates=lambda m=m: (Certificate(tm_rag_cert(m)),
                                            Certificate(program_cert(tm_rag_cert(m)),
                                                        program_sizes=TM_PROGRAM_SIZES))),),
            args=(spec,)))
    return tuple(out)


RECORDS = _records()
"""Per machine, its hybrid then its RAG model."""
