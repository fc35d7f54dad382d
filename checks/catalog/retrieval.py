"""The T4.6-up family: constant-size Transformers for Index, AR, c-gram, Counting and MQAR.

Each construction's facts are here: its record (builder, forms, declared
parameter count and resources), its certified forms (the declared format and
the gadgets' obligations at an alphabet a(n)) and its whole-model plan (which
key each head attends on the task's abstract instance). The builders are in
constructions/models/retrieval.py, the declared formats in
constructions/models/bounds.py.
"""
from __future__ import annotations

import re
from typing import Callable

from rnngap.constructions.models import bounds as Bd, retrieval
from rnngap.constructions.models.obligations import (Construction, counting_obligations, gap,
                                                     joint_match_obligations, match_obligations, range_,
                                                     shift_obligations)
from rnngap.checks.certify.interpreter import EqualSplit, OneHot, Plan
from rnngap.checks.certify.plans import ModelPlan, shift_head
from rnngap.checks.certify.sizes import NIA_PORTFOLIO
from rnngap.checks.tasks import task
from rnngap.checks.tasks.abstract import z3

from .asymptotics import N as N_DECL
from .examples import ar_example, cgram_example, count_example, index_example, mqar_example
from .schema import Certificate, ConstructionRecord, Form, Key, Resource, int_frac_resources

CLAIM = "T4.6-up"
SPECIAL = -Bd.SPECIAL_MIN_CODE
"""The largest special token's code magnitude: keys and queries reach it."""


# ---------------------------------------------------------------------------- certified forms
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
    task_name = "cgram" if key.startswith("cgram") else key
    return f"{task_name}-transformer" + (f"[{','.join(variant)}]" if variant else "")


def retrieval_key(name: str) -> str:
    """The inverse of :func:`retrieval_name`: ``cgram-transformer[c=3,a=2]`` -> ``cgram3``."""
    task_name = name.split("-transformer", 1)[0]
    c = re.search(r"\bc=(\d+)", name)
    return f"{task_name}{c.group(1)}" if task_name == "cgram" and c else task_name


def retrieval_cert(key: str, alphabet: int | str) -> Construction:
    """The T4.6-up Transformer ``key`` (index, ar, cgram3, cgram4, counting) at a(n)."""
    alpha = alphabet_fn(alphabet)
    name = retrieval_name(key, alphabet)
    if key == "index":
        obl = match_obligations("match", lambda B, n: B.max(n + 3, alpha(B, n), SPECIAL),
                                lambda B, n: B.max(n + 1, alpha(B, n), SPECIAL))
        return Construction(CLAIM, name, Bd.INDEX, 1, tuple(obl), alphabet=alpha)
    if key == "counting":
        return Construction(CLAIM, name, Bd.COUNTING, 1, tuple(counting_obligations("counting", alpha)),
                            alphabet=alpha)
    c = 2 if key == "ar" else int(key[-1])
    obl = []
    for k in range(1, c):
        obl += shift_obligations(f"shift_{k}", lambda B, n: n + c + 1, k)
    obl += joint_match_obligations("match", c - 1, lambda B, n: B.max(alpha(B, n), SPECIAL), lambda B, n: n + c)
    return Construction(CLAIM, name, Bd.AR if c == 2 else Bd.CGRAM, c, tuple(obl), alphabet=alpha, c=c)


def mqar_cert() -> Construction:
    bound = lambda B, n, f: Bd.mqar_match_bound(B, n, f)
    return Construction(CLAIM, "mqar-transformer", Bd.MQAR, 1, tuple(
        shift_obligations("shift", lambda B, n: n + 1, 1)
        + [gap("match", "gap_partial"), gap("match", "gap_between_matches"), range_("match", bound)]),
        alphabet=lambda B, n: Bd.MQAR_MAX_VALUE)


# ---------------------------------------------------------------------------- plans
def index_plan(inst) -> Plan:
    return Plan({"index": OneHot(target=lambda inst, t, case: inst.i,
                                 lemma="position match: the key of x_i is the query i + 1")})


def _gram_split(c: int):
    """The keys j other than the first full match's, in cases: a later key, or an
    earlier key whose k-th component (the token k back, [BOS]'s code 0 before
    position k) is below or above the gram's token g_(c-k), for k = 1..c-1 (the
    promise: no full occurrence starts before the first). z3 proves the gap on each
    case on its own (with codes up to n + 2 the whole gap of c = 4 is beyond it)
    and, as its own step, that the cases cover every other key."""
    def split(inst, t, j, tgt, case):
        out = [("a later key", j > tgt)]
        for k in range(1, c):
            back = inst.tau(z3.If(j >= k, j - k, 0))
            g = inst.g[c - k - 1]
            out.append((f"an earlier key, its token {k} back below g_{c - k}", z3.And(j < tgt, back < g)))
            out.append((f"an earlier key, its token {k} back above g_{c - k}", z3.And(j < tgt, back > g)))
        return out
    return split


def gram_match_head(c: int) -> OneHot:
    """The c-gram match head: the key after the gram's first full occurrence."""
    return OneHot(target=lambda inst, t, case: inst.j + c - 1, split=_gram_split(c),
                  lemma="first full match of the gram: the key after its first occurrence")


def gram_plan(c: int):
    def plan(inst) -> Plan:
        heads = {f"shift_{k}": shift_head(k) for k in range(1, c)}
        heads["match"] = gram_match_head(c)
        return Plan(heads)
    return plan


def count_split(lemma: str) -> EqualSplit:
    """The BOS counting head: an equal split over [BOS] and the copies of q, read at [BOS]."""
    return EqualSplit(member=lambda inst, t, j: inst.is_member(j), ref=lambda inst, t: z3.IntVal(0),
                      size=lambda inst, t: inst.member_count(), lemma=lemma)


def _counting_plan(inst) -> Plan:
    n = inst.n
    return Plan({
        "after-query": OneHot(target=lambda inst, t, case: z3.If(t >= n + 1, n + 1, 0), every=True,
                              lemma="[QUERY] at and after it, [BOS] before"),
        "fetch-q": OneHot(target=lambda inst, t, case: n + 2, lemma="q beats t, the data, [QUERY] and [BOS]"),
        "count": count_split("[BOS] and every copy of q tie at the maximum"),
    })


def _mqar_plan(inst) -> Plan:
    return Plan({
        "prev": shift_head(1),
        "first-match-or-bos": OneHot(target=lambda inst, t, case: case.terms["target"],
                                     at=lambda inst, t: z3.And(t >= 1, t <= inst.n),
                                     lemma="the first earlier match, else [BOS]"),
    })


INDEX = ModelPlan("index", index_plan)
AR = ModelPlan("ar", gram_plan(2))
CGRAM3 = ModelPlan("cgram(c=3)", gram_plan(3))
CGRAM4 = ModelPlan("cgram(c=4)", gram_plan(4), timeout_ms=20000, portfolio=NIA_PORTFOLIO)
COUNTING = ModelPlan("counting", _counting_plan)
MQAR = ModelPlan("mqar", _mqar_plan)


# ---------------------------------------------------------------------------- declared resources
def _resources(key: str, a: int, c: int, reduction: bool = True) -> Callable[[], tuple]:
    """The T4.6-up Transformer ``key`` at the registry's sampled alphabet a, and (``reduction``) at the
    Index reduction's alphabet a(n) of the task spec, which grows with n."""
    def make():
        decl = {"counting": Bd.COUNTING, "index": Bd.INDEX, "ar": Bd.AR}.get(key, Bd.CGRAM)
        out = int_frac_resources(retrieval_name(key), decl, frac_order="log" if key == "counting" else "constant",
                                 a=a, c=c)
        if reduction:
            alpha = task({"ar": "ar", "counting": "counting"}.get(key, f"cgram(c={c})")).reduction_alphabet
            name = retrieval_name(key, str(alpha(N_DECL)).replace(' ', ''))
            out += (Resource(name, "int_bits", decl.int_expr.subs({Bd.A: alpha(N_DECL), Bd.C: c}), "log",
                             lambda n: decl.int_bits(n, alpha(n), c)),)
        return out
    return make


# ---------------------------------------------------------------------------- the records
RECORDS = (
    ConstructionRecord(Key(CLAIM, "index", "transformer"), retrieval.index_transformer, index_example,
                       "Index Transformer",
                       (Form("index-transformer", params=50, resources=_resources("index", 2, 2, False),
                             certificates=lambda: (Certificate(retrieval_cert("index", 2), INDEX),
                                                   Certificate(retrieval_cert("index", "n+2"), INDEX))),)),
    ConstructionRecord(Key(CLAIM, "ar", "transformer"), retrieval.ar_transformer, ar_example(4),
                       "associative recall",
                       (Form("ar-transformer", params=154, params_n=(2, None),
                             params_alphabets=(("ar-transformer[a=n+2]", lambda n: n + 2),),
                             resources=_resources("ar", 4, 2),
                             certificates=lambda: (Certificate(retrieval_cert("ar", 4), AR),
                                                   Certificate(retrieval_cert("ar", "n+2"), AR))),),
                       defaults={"alphabet": 4}),
    ConstructionRecord(Key(CLAIM, "cgram", "transformer"), retrieval.cgram_transformer, cgram_example,
                       "c-gram retrieval (shown at c = 3)",
                       (Form("cgram-transformer[c=2]", {"c": 2}, resources=_resources("cgram2", 3, 2, False)),
                        Form("cgram-transformer[c=3]", {"c": 3}, params=312, params_n=(3, None),
                             params_alphabets=(("cgram-transformer[c=3,a=n+2]", lambda n: n + 2),),
                             resources=_resources("cgram3", 2, 3),
                             certificates=lambda: (Certificate(retrieval_cert("cgram3", 2), CGRAM3),
                                                   Certificate(retrieval_cert("cgram3", "n+2"), CGRAM3))),
                        Form("cgram-transformer[c=4]", {"c": 4}, params=518, params_n=(4, None),
                             resources=_resources("cgram4", 3, 4),
                             certificates=lambda: (Certificate(retrieval_cert("cgram4", 3), CGRAM4, slow=True),
                                                   Certificate(retrieval_cert("cgram4", "n+2"), CGRAM4)))),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(CLAIM, "counting", "transformer"), retrieval.counting_transformer, count_example,
                       "Counting Transformer",
                       (Form("counting-transformer", params=314,
                             params_alphabets=(("counting-transformer[a=n+1]", lambda n: n + 1),),
                             resources=_resources("counting", 3, 2),
                             certificates=lambda: (Certificate(retrieval_cert("counting", 3), COUNTING),
                                                   Certificate(retrieval_cert("counting", "n+1"), COUNTING))),)),
    ConstructionRecord(Key(CLAIM, "mqar", "transformer"), retrieval.mqar_transformer, mqar_example,
                       "multi-query AR (every position answers)",
                       (Form("mqar-transformer", params=191, params_n=(1, 1024),
                             resources=lambda: int_frac_resources("mqar-transformer", Bd.MQAR, frac=False),
                             certificates=lambda: (Certificate(mqar_cert(), MQAR),)),),
                       size=lambda n: {"length": n}),
)
"""The T4.6-up Transformers."""
