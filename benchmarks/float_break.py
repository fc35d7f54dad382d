"""The float breaking point: the smallest Index reduction size at which an exported construction first answers wrong.

For each construction with an Index reduction, the exported PyTorch module
(checks/export/torch_model.py) runs in float32, bfloat16 and float16 with the
machine's rounding emulated in that dtype, and in float64 with a plain softmax
(what TransformerLens computes without the machine-softmax hook).
checks/export/conformance.py's ``breaking_point`` searches the smallest m (Index
bits) at which it first disagrees with the exact machine on the reduction's
family (doubling, then bisection; every instance up to m = 8, 64 seeded
samples above) and re-runs the failing instance. ``None`` means it agreed on
every m tried up to ``m_max``; the exact machine itself is checked against the
task's reference by ``rnngap verify`` (docs/benchmarks.md).
"""
from __future__ import annotations

import time

from rnngap.checks.export.conformance import breaking_point
from rnngap.checks.tasks import hard, task
from rnngap.checks.catalog.records import by_name

CONSTRUCTIONS = ("index-transformer", "ar-transformer", "cgram-transformer", "counting-transformer",
                 "index-hybrid", "ar-hybrid", "cgram-hybrid", "counting-hybrid")
QUICK = ("index-transformer", "index-hybrid")
MODES = (("float32", True), ("bfloat16", True), ("float16", True), ("float64", False))


def mode_name(dtype: str, grid: bool) -> str:
    return dtype if grid else f"{dtype}-plain-softmax"


def breaking_points(quick: bool = False, seed: int = 0) -> dict:
    """``{"m_max", "seconds", "constructions": {name: {mode: {"m", "n", "instance"} or None}}}``."""
    m_max = 16 if quick else 256
    t0 = time.perf_counter()
    out: dict = {}
    for name in QUICK if quick else CONSTRUCTIONS:
        spec = task(by_name(name).key.task)
        row = {}
        for dtype, grid in MODES:
            found = breaking_point(name, dtype, grid=grid, m_max=m_max, seed=seed)
            row[mode_name(dtype, grid)] = None if found is None else {
                "m": found.m, "n": hard.data_length(spec.family, found.m, spec.c or 3), "instance": found.first}
        out[name] = row
    return {"m_max": m_max, "seed": seed, "seconds": time.perf_counter() - t0, "constructions": out}


def table(result: dict) -> list[str]:
    """The lines :mod:`benchmarks` prints: the first failing m (n) per mode."""
    modes = [mode_name(d, g) for d, g in MODES]
    lines = [f"{'float breaking point (m, n)':28s} " + " ".join(f"{m:>22s}" for m in modes)]
    for name, row in result["constructions"].items():
        cells = [f"never to m={result['m_max']}" if row[m] is None else f"m={row[m]['m']} (n={row[m]['n']})"
                 for m in modes]
        lines.append(f"  {name:26s} " + " ".join(f"{c:>22s}" for c in cells))
    return lines
