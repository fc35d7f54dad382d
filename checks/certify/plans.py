"""A whole-model certificate's plan: what each head and state of a construction does, and how z3 runs.

A whole-model certificate (checks/certify/interpreter.py) needs, per head, the key the
head is meant to attend (or the keys it splits its weight over): the
construction's *intent*, the one thing not read off the built weights. A
:class:`ModelPlan` states it over the task's abstract instance
(checks/tasks/abstract.py), with the interpreter's vocabulary (``OneHot``,
``EqualSplit``, ``Written``, :func:`shift_head`). Every claim of a plan is itself
proved, so a plan cannot make a wrong model pass. Each construction's plan lives
with its record, in its family's module of checks/catalog/.

Details: docs/internals/certify.md#plans
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .interpreter import OneHot
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
    instance: Callable | None = None
    """The maker of the task's abstract instance (a checks.tasks.abstract.Instance)
    for a task that has none in checks.tasks.abstract.INSTANCES; None: the
    instance registered under ``task``."""


def shift_head(k: int) -> OneHot:
    """A shift head: position t attends t - k (position 0, [BOS], when t < k)."""
    return OneHot(target=lambda inst, t, case, k=k: z3.If(t >= k, t - k, 0), every=True,
                  lemma=f"shift by {k}: the score peaks at t - {k} (or [BOS])")
