"""The T5.6 family: linear RNNs with one attention layer for Index, AR, c-gram, Counting and IsTree.

Each hybrid's record, its certified form (declared format and the gadgets'
obligations) and, for the four retrieval hybrids, its whole-model plan. The
hybrids are built with a symbolic alphabet and certified for every alphabet up
to their code bound at once. The builders are in constructions/models/hybrid.py.
"""
from __future__ import annotations

from typing import Callable

from rnngap.constructions.models import bounds as Bd, hybrid
from rnngap.constructions.models.bounds import CODE_SLACK
from rnngap.constructions.models.obligations import Construction, Obligation, gap, range_
from rnngap.checks.certify.interpreter import Plan
from rnngap.checks.certify.plans import ModelPlan
from rnngap.checks.tasks.abstract import z3

from .asymptotics import N as N_DECL
from .examples import ar_example, cgram_example, count_example, graph_example, index_example
from .retrieval import count_split, gram_match_head, index_plan
from .schema import Certificate, ConstructionRecord, Form, Key, Resource, fixed_certificates, int_frac_resources

CLAIM = "T5.6"


def hybrid_cert(key: str) -> Construction:
    """The T5.6 hybrid ``key`` (index, ar, cgram(c=3), counting, istree)."""
    H = Bd.HYBRID
    if key == "index":
        return Construction(CLAIM, "index-hybrid", H["index"], 2, (
            gap("match"), range_("match", lambda B, n, f: Bd.hybrid_index_bound(B, n))))
    if key in ("ar", "cgram(c=3)"):
        width = 1 if key == "ar" else 2
        decl = H["ar"] if key == "ar" else Bd.hybrid_cgram(3)
        return Construction(CLAIM, "ar-hybrid" if key == "ar" else "cgram-hybrid", decl, width + 1, (
            gap("match", "gap_non_match"), gap("match", "gap_between_matches"),
            range_("match", lambda B, n, f: Bd.hybrid_first_bound(B, n, width))))
    if key == "counting":
        return Construction(CLAIM, "counting-hybrid", H["counting"], 3, (
            gap("count"), range_("count", lambda B, n, f: Bd.hybrid_count_bound(B, n)),
            Obligation("compare.gap", lambda B, n, I, f: Bd.count_compare_inverse_gap(B, n),
                       lambda B, n, I, f: B.pow2(f), strict=True)))
    if key == "istree":
        return Construction(CLAIM, "istree-hybrid", Bd.hybrid_istree(), 2, (
            gap("union-find", "gap_non_match"), gap("union-find", "gap_between_matches"),
            range_("union-find", lambda B, n, f: Bd.hybrid_istree_bound(B, n, n))))
    raise ValueError(f"no hybrid {key!r}")


def _count_plan(inst) -> Plan:
    n = inst.n
    return Plan({"count": count_split("[BOS] and every copy of q tie; [QUERY], q, t pushed down by the latch")},
                states={"s_after_query": lambda inst, t: z3.If(t >= n + 1, z3.IntVal(1), z3.IntVal(0))})


def _alphabet_max(n):
    """The hybrids accept any alphabet a <= n + 31 (their code bound is n + 32)."""
    return n + CODE_SLACK - 1


INDEX = ModelPlan("index", index_plan, alphabet_max=_alphabet_max)
AR = ModelPlan("ar", lambda inst: Plan({"ar": gram_match_head(2)}), alphabet_max=_alphabet_max)
CGRAM3 = ModelPlan("cgram(c=3)", lambda inst: Plan({"3gram": gram_match_head(3)}), alphabet_max=_alphabet_max)
COUNTING = ModelPlan("counting", _count_plan, alphabet_max=_alphabet_max)


def _resources(key: str) -> Callable[[], tuple]:
    def make():
        if key == "istree":
            return int_frac_resources("istree-hybrid", hybrid.ISTREE) + (
                Resource("istree-hybrid", "cot", Bd.hybrid_istree_cot(Bd.SYM, N_DECL), "nlogn",
                         hybrid.istree_cot_bound),)
        decl = hybrid.cgram_declared(3) if key == "cgram(c=3)" else hybrid.DECLARED[key]
        return int_frac_resources("cgram-hybrid" if key == "cgram(c=3)" else f"{key}-hybrid", decl)
    return make


RECORDS = (
    ConstructionRecord(Key(CLAIM, "index", "hybrid"), hybrid.index_hybrid, index_example, "hybrid for Index",
                       (Form("index-hybrid", params=84, params_n=(2, None), resources=_resources("index"),
                             certificates=fixed_certificates(Certificate(hybrid_cert("index"), INDEX))),)),
    ConstructionRecord(Key(CLAIM, "ar", "hybrid"), hybrid.ar_hybrid, ar_example(2), "hybrid for AR",
                       (Form("ar-hybrid", params=222, params_n=(2, None), resources=_resources("ar"),
                             certificates=fixed_certificates(Certificate(hybrid_cert("ar"), AR))),)),
    ConstructionRecord(Key(CLAIM, "cgram", "hybrid"), hybrid.cgram_hybrid, cgram_example,
                       "hybrid for c-gram (c = 3)",
                       (Form("cgram-hybrid", params=376, params_n=(3, None),
                             resources=_resources("cgram(c=3)"),
                             certificates=fixed_certificates(Certificate(hybrid_cert("cgram(c=3)"), CGRAM3))),),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(CLAIM, "counting", "hybrid"), hybrid.counting_hybrid, count_example, "hybrid for Counting",
                       (Form("counting-hybrid", params=457, params_n=(3, 4096), resources=_resources("counting"),
                             certificates=fixed_certificates(Certificate(hybrid_cert("counting"), COUNTING))),)),
    ConstructionRecord(Key(CLAIM, "istree", "hybrid"), hybrid.istree_hybrid, graph_example,
                       "hybrid for IsTree (union-find CoT)",
                       (Form("istree-hybrid", params=12938, params_n=(2, 256), resources=_resources("istree"),
                             certificates=fixed_certificates(Certificate(hybrid_cert("istree")))),),
                       size=lambda n: {"N": max(n, 2)}),
)
"""The T5.6 hybrids."""
