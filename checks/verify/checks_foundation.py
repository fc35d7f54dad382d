"""Checks of the foundation: the machine (claim 'machine') and the gadgets ('gadgets').

Every reference here is plain Python (Fractions, mpmath, the task references of
``checks.tasks``), never the code under test.
"""
from __future__ import annotations

import time
from fractions import Fraction

import mpmath
import numpy as np

from rnngap.constructions.models import demos
from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import BOS, QUERY, number_token

from .necessity import batch_runner, necessity_record
from .registry import Record, register
from rnngap.checks.tasks import NO_TASK

from rnngap.checks.tasks import counting, index

SIZES = {"quick": [4, 16, 64], "full": [4, 16, 64, 256, 1024]}
EXHAUSTIVE_N = {"quick": 6, "full": 10}
SAMPLE = {"quick": 200, "full": 1000}
NECESSITY_SIZES = {"quick": [16], "full": [16, 64, 256]}
"""n at which each gadget gets a saturate-mode necessity record."""


@register("machine", "fixed-point ops vs exact arithmetic")
def machine_ops(profile: str, seed: int) -> list[Record]:
    rng = np.random.default_rng(seed)
    trials = {"quick": 3000, "full": 50000}[profile]
    mpmath.mp.prec = 320
    records = []
    for op in ("mul", "div", "exp"):
        t0 = time.perf_counter()
        bad = 0
        for _ in range(trials):
            I = int(rng.integers(1, 31))
            f = int(rng.integers(0, 62 - I + 1))
            fmt = FixedFormat(I, f)
            lim = fmt.max_raw
            a = int(rng.integers(-lim, lim + 1))
            b = int(rng.integers(-lim, lim + 1))
            if rng.random() < 0.8:  # mostly in range, some overflows
                if op == "mul":
                    blim = min(lim, (lim << f) // max(1, abs(a)))
                else:
                    blim = lim
                    a = int(rng.integers(-lim, lim + 1)) >> int(rng.integers(0, I + 1))
                b = int(rng.integers(-blim, blim + 1))
                if op == "div" and abs(b) < (abs(a) >> I):
                    b = (abs(a) >> I) + 1
            if op == "mul":
                want = round(Fraction(a * b, 1 << f))
                call = lambda: fmt.mul(a, b)
            elif op == "div":
                if b == 0:
                    b = 1
                want = round(Fraction(a << f, b))
                call = lambda: fmt.div(a, b)
            else:
                a = int(rng.integers(-min(lim, (f + 3) << f), min(lim, (I + 1) << f) + 1))
                y = mpmath.exp(mpmath.mpf(a) / 2 ** f) * 2 ** f
                fl = int(mpmath.floor(y))
                want = fl + (1 if y - fl > 0.5 else 0)
                call = lambda: fmt.exp(a)
            try:
                got = call()
                ok = abs(want) <= lim and got == want
            except FixedPointOverflow:
                ok = abs(want) > lim
            bad += not ok
        records.append(Record("machine", "fixedpoint", NO_TASK, 0, trials, bad,
                              seconds=round(time.perf_counter() - t0, 3), note="random formats Q(I).(f), I+f<=62",
                              description=op))
    return records


def _gadget_records(name: str, build, declared, batches, ref, profile: str, alphabet: int,
                    task: str = NO_TASK, build_below=None) -> list[Record]:
    """Run ``build(n)`` on ``batches(n)`` against ``ref`` for each n; then, at the
    sizes of :data:`NECESSITY_SIZES`, the saturate-mode necessity of the declared
    bits on the same instances (checks/verify/necessity.py: integer bits re-encoded,
    fraction bits rebuilt by ``build_below(n, fmt)`` if given, else ``build(n, fmt)``;
    the wrong instance one bit below each frontier, or "not tight", in the note). The raise-mode "one bit below
    what the run used" rows that stood here are gone: they overflow by
    construction and show nothing about the answers."""
    out = []
    params = {}
    for n in SIZES[profile]:
        t0 = time.perf_counter()
        model = build(n)
        params[n] = model.resources.params
        toks = batches(n)
        want = np.array([ref(list(map(int, row))) for row in toks], dtype=np.int64)
        got = model.predict_batch(toks)
        r = model.resources
        out.append(Record("gadgets", model.name, task, n, len(toks), int((got != want).sum()),
                          r.used_precision_bits, declared.format(n).total_bits, params=r.params,
                          seconds=round(time.perf_counter() - t0, 3), family="random", alphabet=alphabet,
                          description=name))
        if n in NECESSITY_SIZES[profile]:
            out.append(necessity_record("gadgets", model.name, f"{name}: necessity", n, task=task, family="random",
                                        alphabet=alphabet, declared=declared.format(n),
                                        run=batch_runner(toks, want), instances=len(toks), model=model,
                                        build_frac=lambda fmt, n=n: (build_below or build)(n, fmt)))
    distinct = sorted(set(params.values()))
    out.append(Record("gadgets", name, task, max(params), len(params), len(distinct) - 1,
                      params=distinct[-1], note=f"params by n: {params}", family="random", alphabet=alphabet,
                      description="params constant in n"))
    return out


def _index_batch(n: int, profile: str, seed: int) -> np.ndarray:
    if n <= EXHAUSTIVE_N[profile]:
        return np.asarray(index.enumerate_all(n, alphabet=2).tokens)
    return np.asarray(index.generate(np.random.default_rng(seed + n), n, SAMPLE[profile], alphabet=2).tokens)


@register("gadgets", "match head (position match)")
def match_check(profile: str, seed: int) -> list[Record]:
    return _gadget_records("index via match head",
                           lambda n, fmt=None: demos.position_match_transformer(n, alphabet=2, fmt=fmt),
                           demos.POSITION_MATCH, lambda n: _index_batch(n, profile, seed), index.SPEC.reference, profile, 2,
                           task=index.SPEC.name)


@register("gadgets", "shift head (previous token)")
def shift_check(profile: str, seed: int) -> list[Record]:
    def batches(n):
        rng = np.random.default_rng(seed + 7 * n)
        x = rng.integers(0, 2, size=(SAMPLE[profile], n))
        return np.concatenate([np.full((len(x), 1), BOS), x + number_token(0)], axis=1)
    return _gadget_records("previous token via shift head",
                           lambda n, fmt=None: demos.previous_token_transformer(n, alphabet=2, fmt=fmt),
                           demos.PREVIOUS_TOKEN, batches, lambda toks: toks[-2], profile, 2)


@register("gadgets", "counting head + comparison MLP")
def count_check(profile: str, seed: int) -> list[Record]:
    def batches(n):
        if n <= 4:
            return np.asarray(counting.enumerate_all(n, alphabet=3).tokens)
        sample = np.asarray(counting.generate(np.random.default_rng(seed + 13 * n), n, SAMPLE[profile],
                                              alphabet=3, threshold="near").tokens)
        return np.concatenate([sample, closest_comparisons(n, 3)])
    # the necessity scan builds below the declared f without the comparison's margin
    # assertion (the run decides), so that one bit below the frontier is a wrong answer
    return _gadget_records("count > t via BOS head",
                           lambda n, fmt=None: demos.count_threshold_transformer(n, alphabet=3, fmt=fmt),
                           demos.COUNT_THRESHOLD, batches, counting.SPEC.reference, profile, 3,
                           task=counting.SPEC.name,
                           build_below=lambda n, fmt: demos.count_threshold_transformer(n, alphabet=3, fmt=fmt,
                                                                                         check_margins=False))


def closest_comparisons(n: int, alphabet: int) -> np.ndarray:
    """The Counting instances ``[BOS] q^n [QUERY] q t`` (every q < alphabet, t = n - 1
    and t = n): the comparisons c > t with the smallest gap between 1/(c+1) and
    1/(t+3/2) (c = n: 1/(2 (n+1)(n+1/2)) and 1/(2 (n+1)(n+3/2))), the ones the
    declared fraction bits are sized for."""
    rows = [[BOS] + [number_token(q)] * n + [QUERY, number_token(q), number_token(t)]
            for q in range(alphabet) for t in (n - 1, n)]
    return np.asarray(rows, dtype=np.int64)
