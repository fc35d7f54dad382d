"""Necessity of a declared precision, measured (docs/theory.md §1 "Necessity").

A declared bound is shown to matter by running BELOW it, in ``saturate`` mode:
with one bit less than the measured frontier, some concrete instance must be
answered wrongly (raise mode would overflow by construction and prove nothing).
For one construction at one n, on the caller's instances, the integer bits and
then the fraction bits are scanned downward from the declaration. Each run is
sorted (:class:`Outcome`); only a wrong final answer counts as evidence
(``wrong_below``, ``int_tight`` / ``frac_tight``). A frontier above the
declaration, or a raise below one, fails the record; a frontier with no wrong
answer below is "not tight".

Example (the T4.6-up Index Transformer on the reduction's instances, n = 4)::

    >>> from rnngap.constructions.models import retrieval as R
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

Details (the scans, outcomes, fields): docs/internals/verify.md#necessity
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from rnngap.constructions.machine.fixedpoint import PrecisionError
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import FALSE, TRUE

from .registry import Record

OUTCOMES = ("wrong", "cot", "no_answer", "raised")
"""What can go wrong on one instance, in the order reported:

* ``wrong``: the model ran to completion and its FINAL answer is wrong (the only
  outcome that shows a bound necessary);
* ``cot``: the final answer is right but the CoT differs from the reference;
* ``no_answer``: generation hit the CoT bound without writing an answer;
* ``raised``: the run raised an exception. Never counted as wrong: in saturate
  mode nothing should raise, so a record with a raise below a frontier fails (a
  defect of the runner or the model, to be explained, not evidence)."""

OUTCOME_WORDS = {"wrong": "wrong final answer", "cot": "CoT deviation (answer right)",
                 "no_answer": "no answer within the CoT bound", "raised": "raised"}


@dataclass
class Outcome:
    """What a run of the model on every instance of a family gave: how many
    instances had each of :data:`OUTCOMES` and the first of each, described."""

    instances: int = 0
    counts: dict = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    first: dict = field(default_factory=dict)

    def add(self, kind: str, text: str, count: int = 1) -> None:
        if kind not in OUTCOMES:
            raise ValueError(f"outcome kind must be one of {OUTCOMES}, got {kind!r}")
        self.counts[kind] += count
        self.first.setdefault(kind, text)

    @property
    def ok(self) -> bool:
        """Every instance right (answer and, where compared, CoT); nothing raised."""
        return not any(self.counts.values())

    def has(self, kind: str) -> bool:
        return self.counts[kind] > 0

    def describe(self) -> str:
        if self.ok:
            return f"all {self.instances} right"
        return "; ".join(f"{self.counts[k]}/{self.instances} {OUTCOME_WORDS[k]}, e.g. {self.first[k]}"
                         for k in OUTCOMES if self.counts[k])


RunFn = Callable[[object], Outcome]
"""run(model) -> the :class:`Outcome` of the model on every instance of a fixed
family (every instance is run to completion, so a wrong final answer anywhere is
seen even when an earlier instance only deviates in its CoT)."""


@dataclass
class Scan:
    """One downward scan of integer or fraction bits."""

    what: str                   # "I" or "f"
    declared: int
    frontier: int | None        # None: already wrong at the declared bits
    below: str                  # what happens one bit below the frontier
    outcome: Outcome | None = None   # the run one bit below the frontier (None: not run)
    floor: bool = False         # the frontier is the least the machine allows (nothing below exists)
    runs: int = 0

    def _has(self, kind: str) -> bool:
        return self.frontier is not None and self.outcome is not None and self.outcome.has(kind)

    @property
    def wrong_below(self) -> bool:
        """A concrete instance's final answer is wrong one bit below the frontier."""
        return self._has("wrong")

    @property
    def cot_deviation_below(self) -> bool:
        return self._has("cot")

    @property
    def no_answer_below(self) -> bool:
        return self._has("no_answer")

    @property
    def raised_below(self) -> bool:
        return self._has("raised")

    @property
    def tight(self) -> bool | None:
        """True: a wrong final answer one bit below the frontier; None: the frontier
        is the floor (no fewer bits exist: neither tight nor not); False otherwise."""
        if self.frontier is None or self.floor:
            return None
        return self.wrong_below

    @property
    def slack(self) -> int | None:
        """Declared minus frontier bits."""
        return None if self.frontier is None else self.declared - self.frontier

    @property
    def text(self) -> str:
        if self.frontier is None:
            return f"{self.what}: WRONG at the declared {self.what} = {self.declared}: {self.below}"
        head = f"{self.what}: frontier {self.frontier} (declared {self.declared}, slack {self.slack})"
        if self.floor:
            return f"{head}; floor: {self.below}"
        return f"{head}; {'tight' if self.wrong_below else 'not tight'}, at {self.frontier - 1}: {self.below}"


def batch_runner(tokens, answers, describe: Callable[[np.ndarray], str] | None = None) -> RunFn:
    """A :data:`RunFn` over a fixed batch of equal-length prompts and their
    answer tokens (rows run in lexicographic order so each reuses the KV cache
    of the prefix it shares with the one before: exact). No CoT: a mismatch is a
    wrong final answer; an exception is ``raised`` for every row of the batch."""
    tokens = np.asarray(tokens, dtype=np.int64)
    answers = np.asarray(answers, dtype=np.int64)
    if tokens.ndim != 2 or answers.shape != (tokens.shape[0],) or not len(answers):
        raise ValueError(f"batch_runner: tokens (B, L) and answers (B,) with B >= 1, got {tokens.shape}, "
                         f"{answers.shape}")
    order = np.lexsort(tokens.T[::-1])
    sorted_tokens = tokens[order]
    show = describe or (lambda row: " ".join(map(str, row.tolist()))[:160])

    def run(model) -> Outcome:
        out = Outcome(len(answers))
        try:
            got = np.empty(len(tokens), dtype=np.int64)
            got[order] = model.predict_batch(sorted_tokens)
        except Exception as e:   # never a wrong answer (module doc)
            out.add("raised", f"{type(e).__name__}: {str(e)[:120]}", len(answers))
            return out
        bad = np.flatnonzero(got != answers)
        if len(bad):
            k = int(bad[0])
            out.add("wrong", f"[{show(tokens[k])}] -> {int(got[k])}, want {int(answers[k])}", len(bad))
        return out
    return run


def classify(out: Outcome, name: str, answer, want, cot=None, want_cot=None, cot_length: int | None = None) -> None:
    """Add one completed run to ``out``: an answer other than ``want`` is ``no_answer``
    if it is None (the CoT bound reached), else ``wrong``; a right answer with
    ``cot != want_cot`` (when both given) is ``cot``. ``want`` may itself be None
    (a simulated model that answers nothing): then no answer is right."""
    if answer != want:
        if answer is None:
            out.add("no_answer", f"{name}: no answer after "
                                 f"{cot_length if cot_length is not None else len(cot or [])} CoT tokens, want {want}")
        else:
            out.add("wrong", f"{name} -> answer {answer}, want {want}"
                             + (f" (CoT of {cot_length} tokens)" if cot_length is not None else ""))
    elif want_cot is not None and cot is not None and list(cot) != list(want_cot):
        k = next((j for j, (u, v) in enumerate(zip(cot, want_cot)) if u != v), min(len(cot), len(want_cot)))
        out.add("cot", f"{name}: answer {answer} right, CoT token {k + 1} of {len(want_cot)} is "
                       f"{cot[k] if k < len(cot) else 'none'}, want {want_cot[k] if k < len(want_cot) else 'none'}")


def generation_runner(cases, max_cot: int, describe: Callable[[list[int]], str],
                      answer_tokens: tuple[int, ...] = (TRUE, FALSE)) -> RunFn:
    """A :data:`RunFn` for a model with CoT: greedy generation (constructions.generate)
    on each case ``(prompt, answer token, reference CoT)`` to completion
    (``describe(prompt)`` names the instance); each case classified by :func:`classify`."""
    cases = list(cases)
    if not cases:
        raise ValueError("generation_runner: no cases")

    def run(model) -> Outcome:
        out = Outcome(len(cases))
        for p, want, cot in cases:
            try:
                g = generate(model, p, answer_tokens=list(answer_tokens), max_cot=max_cot)
            except Exception as e:   # never a wrong answer (module doc)
                out.add("raised", f"{describe(p)}: {type(e).__name__}: {str(e)[:100]}")
                continue
            classify(out, describe(p), g.answer, want, g.cot, cot, g.cot_length)
        return out
    return run


def _scan(what: str, declared: int, floor: int, make: Callable[[int], object], run: RunFn) -> Scan:
    runs = 0
    frontier = None
    for bits in range(declared, floor - 1, -1):
        try:
            model = make(bits)
        except (MarginError, PrecisionError, ValueError) as e:
            if frontier is None:
                return Scan(what, declared, None, f"the model cannot be built: {str(e)[:120]}", None, runs=runs)
            return Scan(what, declared, frontier, f"the model cannot be built at {what} = {bits}: {str(e)[:120]}",
                        None, runs=runs)
        runs += 1
        out = run(model)
        if not isinstance(out, Outcome):
            raise TypeError(f"a necessity runner must return an Outcome, got {type(out).__name__}")
        if not out.ok:
            if frontier is None:
                return Scan(what, declared, None, out.describe(), out, runs=runs)
            return Scan(what, declared, frontier, out.describe(), out, runs=runs)
        frontier = bits
    return Scan(what, declared, frontier, f"no fewer {what} bits exist ({what} = {floor} is the least the machine "
                                          f"allows)", None, floor=True, runs=runs)


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
    each (in the note and the fields ``wrong_below``, ``cot_deviation_below``,
    ``no_answer_below``, ``raised_below``, ``int_tight``, ``frac_tight``,
    ``int_slack``, ``frac_slack``). Failures: one per frontier above the declaration,
    one per scan whose run one bit below raised (saturate mode never should).
    ``task``: the canonical task name (checks.tasks) or NO_TASK, by default the
    description itself (which must then be a canonical name); ``description``:
    what was run, in words."""
    t0 = time.perf_counter()
    task = description if task is None else task
    si, sf = measure(declared, run, model=model, build_int=build_int, build_frac=build_frac)
    above = int(si.frontier is None) + int(sf.frontier is None)
    raised = int(si.raised_below) + int(sf.raised_below)
    used = None if above else si.frontier + sf.frontier + 1
    if params is None and model is not None:
        params = model.resources.params
    note = f"saturate mode; {si.text} | {sf.text}"
    if raised:
        note = "DEFECT: a run raised in saturate mode (never counted as wrong) | " + note
    either = (lambda k: bool(getattr(si, k) or getattr(sf, k))) if not above else (lambda k: None)
    return Record(claim, f"{model_name} necessity", task, n, instances if instances is not None else si.runs + sf.runs,
                  above + raised, precision_bits_used=used, precision_bits_declared=declared.total_bits, params=params,
                  seconds=round(time.perf_counter() - t0, 3), note=note[:900], kind="necessity", family=family,
                  alphabet=alphabet, frontier_int_bits=si.frontier, frontier_frac_bits=sf.frontier,
                  wrong_below=either("wrong_below"), cot_deviation_below=either("cot_deviation_below"),
                  no_answer_below=either("no_answer_below"), raised_below=either("raised_below"),
                  int_tight=si.tight, frac_tight=sf.tight, int_slack=si.slack, frac_slack=sf.slack,
                  description=description)
