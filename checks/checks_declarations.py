"""Claim 'declarations': every declared resource expression has the asymptotic
class its claim states (checked symbolically), and the Python function the
construction uses agrees with the sympy expression at sample n."""
from __future__ import annotations

import time

from .declarations import DECLARATIONS, evaluate, holds
from .registry import Record, register

SAMPLE_N = {"quick": [1, 2, 3, 7, 8, 9, 100, 1000, 2 ** 14], "full": list(range(1, 300)) + [1000, 2 ** 14, 2 ** 20]}
FUNCTIONS: dict[tuple[str, str], object] = {}
"""(model, resource) -> the Python function of n the construction actually uses."""


@register("declarations", "asymptotic declarations (sympy)")
def check_declarations(profile: str, seed: int) -> list[Record]:
    out = []
    for d in DECLARATIONS:
        t0 = time.perf_counter()
        fails = 0 if holds(d) else 1
        fn = FUNCTIONS.get((d.model, d.resource))
        n_checked = 1
        note = f"{d.resource} = {d.expr} is O({d.growth()})" if not fails else f"{d.resource} = {d.expr} is NOT O({d.growth()})"
        if fn is not None:
            bad = [n for n in SAMPLE_N[profile] if evaluate(d.expr, n) != fn(n)]
            n_checked += len(SAMPLE_N[profile])
            if bad:
                fails += len(bad)
                note += f"; python and sympy disagree at n = {bad[:5]}"
        out.append(Record("declarations", d.model, f"{d.resource} in O({d.order}) [{d.claim}]", 0, n_checked, fails,
                          seconds=round(time.perf_counter() - t0, 3), note=note))
    return out
