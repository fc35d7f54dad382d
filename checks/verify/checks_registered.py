"""Checks of the constructions registered from outside rnngap (``rnngap.register``,
the ``rnngap.constructions`` entry points, ``$RNNGAP_CONSTRUCTIONS``).

A registered construction whose claim is one of the paper's and whose task has
a reduction from Index is checked where the theorem bites: on every instance of
the reduction's image for m = 1..:data:`EXHAUSTIVE_BITS` Index bits, then on
seeded adversarial samples at larger m (:data:`SAMPLED_BITS`), built at the
task's data length for m bits, as a next-token predictor (its answer is the
token it writes after the prompt), against the reduction's expected answer.
A record fails on any wrong answer or where the bits it used pass its declared
precision. With nothing registered these checks do not run.
"""
from __future__ import annotations

import time

import numpy as np

from rnngap.checks.catalog import records as catalog
from rnngap.checks.tasks import hard, task

from .registry import Record, register

EXHAUSTIVE_BITS = {"quick": 6, "full": 10}
SAMPLED_BITS = {"quick": (16, 64), "full": (16, 64, 256, 1024)}
SAMPLES = 32
CHECK_NAME = "registered constructions on the reduction"


def _checked(claim: str) -> list:
    """The registered records of ``claim`` with a task that has a reduction."""
    out = []
    for rec in catalog.records():
        if rec in catalog.RECORDS or rec.key.claim != claim:
            continue
        try:
            spec = task(rec.key.task)
        except ValueError:
            continue
        if spec.reduction is not None and spec.family in ("index", "ar", "cgram", "counting"):
            out.append(rec)
    return out


def _run(rec, profile: str, seed: int) -> list[Record]:
    spec = task(rec.key.task)
    family, c = spec.family, spec.c or 3
    out = []
    rng = np.random.default_rng(seed)
    sizes = [(m, None) for m in range(1, EXHAUSTIVE_BITS[profile] + 1)] + [(m, SAMPLES) for m in SAMPLED_BITS[profile]]
    for m, count in sizes:
        t0 = time.perf_counter()
        n = hard.data_length(family, m, c)
        if n < spec.min_n:
            continue
        toks, answers = (hard.reduction_instances(family, m, c) if count is None
                         else hard.sampled_reduction_instances(rng, family, m, count, c))
        model = rec.build(n).model
        got = model.predict_batch(toks)
        fails = int(np.sum(got != answers))
        r = model.resources
        out.append(Record(rec.key.claim, rec.name, spec.name, n, int(len(answers)), fails,
                          precision_bits_used=r.used_precision_bits, precision_bits_declared=r.precision_bits,
                          params=r.params, state_bits=r.state_bits, seconds=round(time.perf_counter() - t0, 3),
                          family="reduction", alphabet=hard.alphabet(family, m, c),
                          description=f"registered construction on the Index reduction, m = {m}"
                                      + (" (every instance)" if count is None else f" ({count} sampled)")))
    return out


def _part(claim: str, profile: str, seed: int, part) -> list[Record]:
    rec = catalog.by_name(part)
    if rec.key.claim != claim:
        raise ValueError(f"{part} is a construction of {rec.key.claim}, not {claim}")
    return _run(rec, profile, seed)


@register("T4.6-up", CHECK_NAME, optional=True, parts=lambda profile: [r.name for r in _checked("T4.6-up")])
def check_registered_transformers(profile: str, seed: int, part) -> list[Record]:
    """The registered constructions of T4.6-up on the reduction."""
    return _part("T4.6-up", profile, seed, part)


@register("T5.6", CHECK_NAME, optional=True, parts=lambda profile: [r.name for r in _checked("T5.6")])
def check_registered_hybrids(profile: str, seed: int, part) -> list[Record]:
    """The registered constructions of T5.6 on the reduction."""
    return _part("T5.6", profile, seed, part)
