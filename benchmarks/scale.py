"""Scaling benchmarks of the pruned attention (docs/machine.md "Pruned attention").

* :func:`cgram_2e20`: one c = 4 c-gram instance at data length n = 2^20, the
  catalogue's c-gram Transformer fed through a session (the prompt, then the
  next token), its answer checked against the plain-Python reference: the easy
  family at alphabet 3 at 2^20, and the image of the Index reduction
  (:mod:`checks.tasks.hard`, the adversarial row: query i = m, x = 1^m except
  x_m = 0, also checked against the reduction's answer) at 2^19, the largest
  power of two whose declared format fits int64 (at 2^20 it needs 63 bits).
* :func:`istree_scaling`: the IsTree Transformer (T4.7-up) writing its whole
  DFS-tour CoT on one random tree per size, the tour checked against the
  reference; the seconds at 10^4 vertices and the ratio time(10^4) / time(10^3),
  measured in the same run.

Timings are wall seconds on a shared machine: compare ratios from one run, and
report the load beside them (``load`` is os.getloadavg() before and after).
Each function compiles its kernels on a small instance first, outside the timing.
"""
from __future__ import annotations

import os
import time

import numpy as np

from rnngap.checks.catalog.records import by_name
from rnngap.constructions.machine.vocab import number_token


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _cgram_instance(n_target: int, seed: int, c: int, family: str):
    """(tokens, reference answer, n, alphabet): the reduction image's adversarial row
    (``family="reduction"``, m = n_target // c Index bits, alphabet m + 2) or one
    instance of the easy family at alphabet 3 (``"easy"``, the full profile's
    sampled records)."""
    from rnngap.checks.tasks import cgram, hard
    rng = np.random.default_rng([seed, n_target, c])
    if family == "reduction":
        m = hard.index_bits("cgram", n_target, c)
        toks, want = hard.sampled_reduction_instances(rng, "cgram", m, 1, c)
        n, a = hard.data_length("cgram", m, c), hard.alphabet("cgram", m, c)
    else:
        n, a = n_target, 3
        toks = cgram.generate(rng, n, 1, alphabet=a, c=c).tokens
        want = None
    row = np.asarray(toks[0], np.int64)
    ref = cgram.reference([int(t) for t in row], c=c)
    if want is not None and ref != int(want[0]):
        raise AssertionError(f"c-gram reference {ref} differs from the reduction's answer {int(want[0])}")
    return row, ref, n, a


def _cgram_run(n_target: int, seed: int, c: int, family: str) -> dict:
    row, ref, n, a = _cgram_instance(n_target, seed, c, family)
    model = by_name("cgram-transformer").build(n, alphabet=a, c=c).model
    t0 = time.perf_counter()
    sess = model.session(capacity=len(row))
    sess.feed(row)
    got = sess.next_token()
    dt = time.perf_counter() - t0
    if got != ref:
        raise AssertionError(f"c-gram at n={n}: the model answered {got}, the reference {ref}")
    return {"seconds": dt, "family": family, "n": n, "alphabet": a, "tokens": len(row), "answer": got,
            "reference": ref, "correct": True, "used_bits": model.resources.used_precision_bits,
            "format": model.fmt.name}


def cgram_2e20(seed: int = 0, c: int = 4, log2n: int = 20, reduction_log2n: int = 19) -> dict:
    """Seconds of one c-gram instance (c = 4) at n = 2^``log2n`` fed through a
    session, the answer checked (AssertionError if wrong): ``seconds`` is the easy
    family at alphabet 3 (the full profile's 2^20 records); the reduction image's
    declared format at n = 2^20 (alphabet m + 2 = 262,146) needs I + f = 63 bits,
    beyond int64 storage, so the model refuses it, and ``reduction`` times the
    image at 2^``reduction_log2n``, the largest power of two that fits."""
    _cgram_run(256, seed, c, "easy")                 # compile outside the timing
    load0 = _load()
    out = _cgram_run(2 ** log2n, seed, c, "easy")
    out["reduction"] = _cgram_run(2 ** reduction_log2n, seed, c, "reduction")
    out["load"] = [load0, _load()]
    return out


def _istree_run(n: int) -> dict:
    from rnngap.checks.tasks import istree as T
    from rnngap.constructions.models import istree as IT
    g = T.random_tree(np.random.default_rng(n), n)
    model = by_name("istree-transformer").build(n).model
    t0 = time.perf_counter()
    run = IT.run(model, g.edges)
    dt = time.perf_counter() - t0
    tour = [t - number_token(0) for t in run.cot if t >= number_token(0)]
    if tour != T.dfs_tour(n, g.edges):
        raise AssertionError(f"IsTree benchmark: the tour at n={n} differs from the reference")
    return {"seconds": dt, "cot_length": run.cot_length}


def istree_scaling(sizes=(1000, 10 ** 4)) -> dict:
    """Wall seconds of the IsTree CoT per size (one random tree each, the tour
    checked), ``istree_1e4_seconds`` and ``istree_1e4_over_1e3`` when both sizes
    are among ``sizes``."""
    _istree_run(20)                                  # compile outside the timing
    load0 = _load()
    measured = {str(n): _istree_run(n) for n in sizes}
    out: dict = {"measured": measured, "load": [load0, _load()]}
    if "10000" in measured:
        out["istree_1e4_seconds"] = measured["10000"]["seconds"]
        if "1000" in measured:
            out["istree_1e4_over_1e3"] = measured["10000"]["seconds"] / measured["1000"]["seconds"]
    return out


if __name__ == "__main__":      # a manual run: python -m benchmarks.scale [istree] [cgram]
    import json
    import sys
    which = sys.argv[1:] or ["cgram", "istree"]
    res = {}
    if "istree" in which:
        res["istree"] = istree_scaling()
    if "cgram" in which:
        res["cgram"] = cgram_2e20()
    print(json.dumps(res, indent=1))
