"""Necessity of a declared precision, measured (docs/theory.md §1 "Necessity").

A declared bound is shown to matter by running BELOW it: in ``saturate`` mode
(every out-of-range value clamped, never raised) with one bit less than the
measured frontier, some concrete instance must be answered wrongly. Re-running
the same computation in raise mode with fewer bits overflows by construction and
proves nothing about the answer, so nothing here uses raise mode.

For one construction at one n, on a fixed set of instances (the caller's: the
lower bound's family at that n, say):

* integer bits: at the declared f, I is scanned DOWNWARD from the declared I(n),
  the model built at ``FixedFormat(I, f, "saturate")`` by ``build_int`` (by
  default the declared model's weights re-encoded, clamped where they do not
  fit). The frontier I_min is the smallest I such that every instance is right
  at every I' in [I_min, I(n)]; one bit below it either a concrete instance is
  answered wrongly (shown), or the model cannot be built there (said), or
  I_min = 1 (the softmax needs the value 1 on the grid: nothing below exists).
* fraction bits: the same at the declared I, scanning f downward, the model
  built by ``build_frac`` (by default rebuilt by its builder at that f, so every
  sharpness derived from f is re-derived), down to f = 0.

A frontier ABOVE the declaration (a wrong answer at the declared bits) is a
failure of the record. A frontier with no wrong answer below it is reported as
"not tight" in the note (information, not a failure): the record's
``wrong_below`` is True when at least one of the two scans shows a concrete wrong
answer one bit below its frontier.

Example (the T4.6-up Index Transformer on the reduction's instances, n = 4)::

    >>> from rnngap.constructions import retrieval as R
    >>> from rnngap.lowerbounds import reductions as LR
    >>> import itertools, numpy as np
    >>> n = 4
    >>> rows = [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
    >>> toks = np.array([LR.INDEX.instance(x, i) for x, i in rows])
    >>> want = np.array([LR.INDEX.expected(x, i) for x, i in rows])
    >>> fmt = R.INDEX.format(n, 2)
    >>> rec = necessity_record("T4.6-up", "index", "index", n, task="index", family="reduction", alphabet=2,
    ...                        declared=fmt, build_frac=lambda f: R.index_transformer(n, alphabet=2, fmt=f),
    ...                        run=batch_runner(toks, want), model=R.index_transformer(n, alphabet=2))
    >>> rec.kind, rec.frontier_int_bits <= fmt.int_bits, rec.wrong_below
    ('necessity', True, True)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from rnngap.constructions.fixedpoint import FixedFormat, PrecisionError
from rnngap.constructions.gadgets import MarginError
from rnngap.constructions.generate import generate
from rnngap.constructions.vocab import FALSE, TRUE

from .registry import Record

RunFn = Callable[[object], "str | None"]
"""run(model) -> None if every instance is answered right, else one line naming
the first instance answered wrongly (tokens, got, want) or the error raised."""


@dataclass
class Scan:
    """One downward scan of integer or fraction bits."""

    what: str                   # "I" or "f"
    declared: int
    frontier: int | None        # None: already wrong at the declared bits
    below: str                  # what happens one bit below the frontier
    wrong_below: bool           # a concrete instance answered wrongly one bit below
    runs: int = 0

    @property
    def tight(self) -> str:
        if self.frontier is None:
            return f"{self.what}: WRONG at the declared {self.what} = {self.declared}: {self.below}"
        slack = self.declared - self.frontier
        head = f"{self.what}: frontier {self.frontier} (declared {self.declared}, slack {slack})"
        if self.wrong_below:
            return f"{head}; at {self.frontier - 1}: {self.below}"
        return f"{head}; not tight below: {self.below}"


def batch_runner(tokens, answers, describe: Callable[[np.ndarray], str] | None = None) -> RunFn:
    """A :data:`RunFn` over a fixed batch of equal-length prompts and their
    answer tokens (rows run in lexicographic order so each reuses the KV cache
    of the prefix it shares with the one before: exact)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    answers = np.asarray(answers, dtype=np.int64)
    if tokens.ndim != 2 or answers.shape != (tokens.shape[0],) or not len(answers):
        raise ValueError(f"batch_runner: tokens (B, L) and answers (B,) with B >= 1, got {tokens.shape}, "
                         f"{answers.shape}")
    order = np.lexsort(tokens.T[::-1])
    sorted_tokens = tokens[order]
    show = describe or (lambda row: " ".join(map(str, row.tolist()))[:160])

    def run(model) -> str | None:
        try:
            got = np.empty(len(tokens), dtype=np.int64)
            got[order] = model.predict_batch(sorted_tokens)
        except PrecisionError as e:
            return f"raised {type(e).__name__}: {str(e)[:120]}"
        bad = np.flatnonzero(got != answers)
        if not len(bad):
            return None
        k = int(bad[0])
        return f"{len(bad)}/{len(answers)} wrong, e.g. [{show(tokens[k])}] -> {int(got[k])}, want {int(answers[k])}"
    return run


def generation_runner(cases, max_cot: int, describe: Callable[[list[int]], str],
                      answer_tokens: tuple[int, ...] = (TRUE, FALSE)) -> RunFn:
    """A :data:`RunFn` for a model with CoT: greedy generation (constructions.generate)
    on each case ``(prompt, answer token, reference CoT)``. A wrong answer is
    reported first (``describe(prompt)`` names the instance); if every answer is
    right, the first instance whose CoT differs from the reference."""
    cases = list(cases)
    if not cases:
        raise ValueError("generation_runner: no cases")

    def run(model) -> str | None:
        cot_only = None
        for p, want, cot in cases:
            try:
                g = generate(model, p, answer_tokens=list(answer_tokens), max_cot=max_cot)
            except PrecisionError as e:
                return f"raised {type(e).__name__}: {str(e)[:100]}"
            if g.answer != want:
                return f"{describe(p)} -> answer {g.answer}, want {want} (CoT of {g.cot_length} tokens)"
            if g.cot != cot and cot_only is None:
                k = next((j for j, (u, v) in enumerate(zip(g.cot, cot)) if u != v), min(len(g.cot), len(cot)))
                cot_only = (f"every answer right, but {describe(p)}: CoT token {k + 1} of {len(cot)} is "
                            f"{g.cot[k] if k < len(g.cot) else 'none'}, want {cot[k] if k < len(cot) else 'none'}")
        return cot_only
    return run


def _scan(what: str, declared: int, floor: int, make: Callable[[int], object], run: RunFn) -> Scan:
    runs = 0
    frontier = None
    below = ""
    wrong = False
    for bits in range(declared, floor - 1, -1):
        try:
            model = make(bits)
        except (MarginError, PrecisionError, ValueError) as e:
            if frontier is None:
                return Scan(what, declared, None, f"the model cannot be built: {str(e)[:120]}", False, runs)
            below = f"the model cannot be built at {what} = {bits}: {str(e)[:120]}"
            break
        runs += 1
        bad = run(model)
        if bad is not None:
            if frontier is None:
                return Scan(what, declared, None, bad, False, runs)
            below, wrong = bad, True
            break
        frontier = bits
    else:
        below = f"no fewer {what} bits exist ({what} = {floor} is the least the machine allows)"
    return Scan(what, declared, frontier, below, wrong, runs)


def measure(declared: FixedFormat, run: RunFn, *, model=None,
            build_int: Callable[[FixedFormat], object] | None = None,
            build_frac: Callable[[FixedFormat], object] | None = None) -> tuple[Scan, Scan]:
    """(integer scan, fraction scan) in saturate mode; see the module doc.
    ``model``: the construction at its declared format (its weights are re-encoded
    for the integer scan unless ``build_int`` is given); ``build_frac`` rebuilds it
    at a format (default: re-encode ``model``, which keeps every sharpness)."""
    if build_int is None:
        if model is None:
            raise ValueError("measure: give the declared model or build_int")
        build_int = model.with_format
    if build_frac is None:
        if model is None:
            raise ValueError("measure: give the declared model or build_frac")
        build_frac = model.with_format
    I, f = declared.int_bits, declared.frac_bits
    int_scan = _scan("I", I, 1, lambda b: build_int(FixedFormat(b, f, "saturate")), run)
    frac_scan = _scan("f", f, 0, lambda b: build_frac(FixedFormat(I, b, "saturate")), run)
    return int_scan, frac_scan


def necessity_record(claim: str, model_name: str, description: str, n: int, *, task: str | None = None, family: str,
                     alphabet: int | None,
                     declared: FixedFormat, run: RunFn, instances: int | None = None, model=None,
                     build_int: Callable[[FixedFormat], object] | None = None,
                     build_frac: Callable[[FixedFormat], object] | None = None,
                     params: int | None = None) -> Record:
    """One ``kind="necessity"`` record: both frontiers, what happens one bit below
    each (in the note), failures = 1 if either frontier lies above the declaration. ``task``: the
    canonical task name (checks.tasks) or NO_TASK, by default the description itself (which must
    then be a canonical name); ``description``: what was run, in words."""
    t0 = time.perf_counter()
    task = description if task is None else task
    si, sf = measure(declared, run, model=model, build_int=build_int, build_frac=build_frac)
    failures = int(si.frontier is None) + int(sf.frontier is None)
    used = None if failures else si.frontier + sf.frontier + 1
    if params is None and model is not None:
        params = model.resources.params
    note = f"saturate mode; {si.tight} | {sf.tight}"
    return Record(claim, f"{model_name} necessity", task, n, instances if instances is not None else si.runs + sf.runs,
                  failures, precision_bits_used=used, precision_bits_declared=declared.total_bits, params=params,
                  seconds=round(time.perf_counter() - t0, 3), note=note[:600], kind="necessity", family=family,
                  alphabet=alphabet, frontier_int_bits=si.frontier, frontier_frac_bits=sf.frontier,
                  wrong_below=bool(si.wrong_below or sf.wrong_below) if not failures else None,
                  description=description)
