"""Claim 'declarations': every declared resource of every construction record
(checks/catalog/records.py) has the asymptotic class its claim states (checked
symbolically), and the Python function the construction uses agrees with the
sympy expression at sample n; every declared parameter count equals the count of
the models the record builds at sample n (the measurement side: a build with one
more or one fewer weight fails)."""
from __future__ import annotations

import time

from rnngap.checks.catalog.asymptotics import evaluate, holds
from rnngap.checks.catalog import records as catalog
from .registry import Record, register
from rnngap.checks.tasks import NO_TASK

SAMPLE_N = {"quick": [1, 2, 3, 7, 8, 9, 100, 1000, 2 ** 14], "full": list(range(1, 300)) + [1000, 2 ** 14, 2 ** 20]}


DECLARATION_PARTS = 4
"""The check runs in this many parts, consecutive runs of :func:`catalog.declarations`."""


@register("declarations", "asymptotic declarations (sympy)", parts=lambda profile: list(range(DECLARATION_PARTS)))
def check_declarations(profile: str, seed: int, part: int) -> list[Record]:
    out = []
    every = catalog.declarations()      # looked up per call (tests replace it)
    lo, hi = len(every) * part // DECLARATION_PARTS, len(every) * (part + 1) // DECLARATION_PARTS
    for d, fn, sample in every[lo:hi]:
        t0 = time.perf_counter()
        fails = 0 if holds(d) else 1
        ns = SAMPLE_N[profile] if sample is None else sample[profile]
        n_checked = 1
        note = f"{d.resource} = {d.expr} is O({d.growth()})" if not fails else f"{d.resource} = {d.expr} is NOT O({d.growth()})"
        if fn is not None:
            bad = [n for n in ns if evaluate(d.expr, n) != fn(n)]
            n_checked += len(ns)
            if bad:
                fails += len(bad)
                note += f"; python and sympy disagree at n = {bad[:5]}"
        out.append(Record("declarations", d.model, NO_TASK, 0, n_checked, fails,
                          seconds=max(round(time.perf_counter() - t0, 3), 0.001), note=note,
                          description=f"{d.resource} in O({d.order}) [{d.claim}]"))
    return out
