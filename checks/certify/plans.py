"""What each head of a certified construction does on its task's instances.

A whole-model certificate (checks/certify/interpreter.py) needs, per head, the key the
head is meant to attend (or the keys it splits its weight over): the
construction's *intent*, the one thing not read off the built weights, stated
here once per construction over the task's abstract instance
(checks/tasks/abstract.py). Every claim of a plan is itself proved, so a plan
cannot make a wrong model pass. Each :class:`ModelPlan` also names its task and
alphabets; checks/catalog/records.py attaches it to a certificate.

Details: docs/internals/certify.md#plans
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rnngap.constructions.models import bounds

from .interpreter import EqualSplit, OneHot, Plan, Written
from .sizes import NIA_PORTFOLIO
from rnngap.checks.tasks.abstract import z3


@dataclass(frozen=True)
class ModelPlan:
    """One construction's certificate plan: its task's abstract instance, its
    heads' plan, and how z3 is run on its queries."""

    task: str
    heads: Callable          # inst -> Plan
    timeout_ms: int = 30000
    """z3's time limit per query and configuration."""
    portfolio: tuple | None = None
    """The z3 configurations tried in turn on each query (default
    checks.certify.sizes.PORTFOLIO; c-gram c = 4: checks.certify.sizes.NIA_PORTFOLIO)."""
    alphabet_max: Callable | None = None
    """n -> the largest alphabet (n a sympy or a z3 term): the model is built with a
    symbolic alphabet and certified for every 1 <= a <= alphabet_max(n) at once
    (the hybrids, whose format does not depend on a); None: the construction
    record's alphabet."""


def _shift(k: int):
    """A shift head: position t attends t - k (position 0, [BOS], when t < k)."""
    return OneHot(target=lambda inst, t, case, k=k: z3.If(t >= k, t - k, 0), every=True,
                  lemma=f"shift by {k}: the score peaks at t - {k} (or [BOS])")


def _index_plan(inst) -> Plan:
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


def _gram_plan(c: int):
    def plan(inst) -> Plan:
        heads = {f"shift_{k}": _shift(k) for k in range(1, c)}
        heads["match"] = OneHot(target=lambda inst, t, case: inst.j + c - 1, split=_gram_split(c),
                                lemma="first full match of the gram: the key after its first occurrence")
        return Plan(heads)
    return plan


def _count_split(lemma: str) -> EqualSplit:
    """The BOS counting head: an equal split over [BOS] and the copies of q, read at [BOS]."""
    return EqualSplit(member=lambda inst, t, j: inst.is_member(j), ref=lambda inst, t: z3.IntVal(0),
                      size=lambda inst, t: inst.member_count(), lemma=lemma)


def _counting_plan(inst) -> Plan:
    n = inst.n
    return Plan({
        "after-query": OneHot(target=lambda inst, t, case: z3.If(t >= n + 1, n + 1, 0), every=True,
                              lemma="[QUERY] at and after it, [BOS] before"),
        "fetch-q": OneHot(target=lambda inst, t, case: n + 2, lemma="q beats t, the data, [QUERY] and [BOS]"),
        "count": _count_split("[BOS] and every copy of q tie at the maximum"),
    })


def _mqar_plan(inst) -> Plan:
    return Plan({
        "prev": _shift(1),
        "first-match-or-bos": OneHot(target=lambda inst, t, case: case.terms["target"],
                                     at=lambda inst, t: z3.And(t >= 1, t <= inst.n),
                                     lemma="the first earlier match, else [BOS]"),
    })


def _hybrid_count_plan(inst) -> Plan:
    n = inst.n
    return Plan({"count": _count_split("[BOS] and every copy of q tie; [QUERY], q, t pushed down by the latch")},
                states={"s_after_query": lambda inst, t: z3.If(t >= n + 1, z3.IntVal(1), z3.IntVal(0))})


def _hybrid_alphabet_max(n):
    """The hybrids accept any alphabet a <= n + 31 (their code bound is n + 32)."""
    from rnngap.constructions.models.bounds import CODE_SLACK
    return n + CODE_SLACK - 1


def _iterate_plan(inst) -> Plan:
    """The T4.1 RNN (no heads): its four state numbers in closed form (the prompt
    is ``[BOS] z_1..z_n [QUERY] (2n + s) a``, then the CoT) and what its MLPs
    write: the step count s at the step token, done = [k >= s] at the k-th CoT
    position n + 3 + k, and at every readout position the code of the
    reference's next token (g(v) + 1 while k < s, the answer at k = s)."""
    n, s = inst.n, inst.steps
    one, zero = z3.IntVal(1), z3.IntVal(0)
    return Plan({}, states={
        "q": lambda inst, t: z3.If(t >= n + 1, one, zero),            # [QUERY] seen
        "c": lambda inst, t: z3.If(t >= n + 1, t - n, zero),          # tokens since [QUERY], inclusive
        "r": lambda inst, t: z3.If(t >= n + 2, s, zero),              # the step count, once read
        "x": lambda inst, t: inst.tau(t) - 1,                         # the value just read
    }, mlps={
        "wt": Written(lambda inst, t, case: z3.If(t == n + 2, s, zero),
                      lemma="wt = relu(tau - m - 1) is s at the step token and 0 elsewhere"),
        "done": Written(lambda inst, t, case: z3.If(t >= n + 3 + s, one, zero),
                        lemma="done = [c - r >= 3] is [k >= s]"),
        "out": Written(lambda inst, t, case: inst.answer_code(t, case), at=lambda inst, t: inst.readout_positions(t), by_case=True,
                       lemma="out is the code of the reference's next token: g(v) + 1, or the answer"),
    }, value_bound=bounds.iterate_readout_bound(bounds.SYM, bounds.N))


INDEX = ModelPlan("index", _index_plan)
AR = ModelPlan("ar", _gram_plan(2))
CGRAM3 = ModelPlan("cgram(c=3)", _gram_plan(3))
CGRAM4 = ModelPlan("cgram(c=4)", _gram_plan(4), timeout_ms=20000, portfolio=NIA_PORTFOLIO)
COUNTING = ModelPlan("counting", _counting_plan)
MQAR = ModelPlan("mqar", _mqar_plan)
HYBRID_INDEX = ModelPlan("index", _index_plan, alphabet_max=_hybrid_alphabet_max)
HYBRID_AR = ModelPlan("ar", lambda inst: Plan({"ar": _gram_plan(2)(inst).heads["match"]}),
                      alphabet_max=_hybrid_alphabet_max)
HYBRID_CGRAM3 = ModelPlan("cgram(c=3)", lambda inst: Plan({"3gram": _gram_plan(3)(inst).heads["match"]}),
                          alphabet_max=_hybrid_alphabet_max)
HYBRID_COUNTING = ModelPlan("counting", _hybrid_count_plan, alphabet_max=_hybrid_alphabet_max)
ITERATE = ModelPlan("iterate", _iterate_plan)
"""The whole-model plans; the construction records (checks/catalog/records.py) attach each
to the certificates it proves, with the record's own builder."""
