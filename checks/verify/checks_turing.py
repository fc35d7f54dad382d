"""Turing machines simulated with CoT: T5-hyb-P (hybrid) and the TM part of T5-RAG.

For each machine of :data:`constructions.models.turing.MACHINES` and each input length
n, EVERY input word runs through the compiled model and is compared with
automata-lib's own run: the answer, the CoT token for token, and the tape rebuilt
from the CoT. The CoT bound is the declared 2 T(n) + 1 (hybrid) or
``rag_cot_bound`` (RAG). A last record per machine gives the saturate-mode
frontiers of the declared bits (checks/verify/necessity.py).

Details: docs/internals/verify.md#checks_turing
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from rnngap.constructions.build.generate import generate
from rnngap.constructions.models import turing as T
from typing import Callable


from .necessity import Outcome, classify, necessity_record
from .registry import Record, register
from rnngap.checks.tasks import turing as TR

LENGTHS = {"quick": {"increment": 8, "palindrome": 8, "0k1k": 8, "addition": 8},
           "full": {"increment": 8, "palindrome": 8, "0k1k": 8, "addition": 8}}
RAG_LENGTHS = {"quick": {"increment": 8, "palindrome": 8, "0k1k": 8, "addition": 8},
               "full": {"increment": 8, "palindrome": 8, "0k1k": 8, "addition": 8}}
"""Quick profile (RAG): ONE model compiled for length 8 serves every shorter input
(one compile per machine instead of nine); full profile: one model per n. Both reach
every input up to length 8 (the issue's bar: four machines, all inputs <= 8). The
cost is the generated tokens (RAG CoT ~ 13 per step plus cell fallbacks): measured on
the 2-core machine, about 50 s for the four machines (3.6 s when the quick profile
stopped at lengths 6/4/5/5), most of it palindrome and addition at n = 7, 8 (256
inputs with CoTs up to ~700 tokens at n = 8)."""


_H = ("0110" * 14)[:55]
_P = ("0110100110010110" * 8)[:128]          # a palindrome's half (length 256), the Thue-Morse prefix
LONG_WORDS = {
    "quick": {"palindrome": (_H + _H[::-1], "1" + _H[1:] + "0" + _H[::-1])},
    "full": {"increment": ("1" * 255 + "0",),
             "palindrome": (_P + _P[::-1], _P + "1" + _P[::-1], _P + "10" + _P[::-1][2:] + "1"),
             "0k1k": ("0" * 128 + "1" * 128, "0" * 128 + "1" * 127 + "0"),
             "addition": (("0110" * 64)[:256], ("1" * 256))}}
"""Long inputs, beyond the exhaustive lengths. Quick: a palindrome of length 110
and a non-palindrome of length 111, past the int64 limit of the declared format
(103 for palindromes; the hybrid declares two-limb storage beyond). Full: every
machine at input length 256 or more (the increment's and the addition's formats
still fit int64 there: their limits are 3,777 and 2,266; the palindromes' and
0^k1^k's (74) do not). The tape head's attention uses the key-value index on two
limbs (docs/machine.md): about 20 s per input of length 256, 3 s at 110."""
LONG_PAST_INT64 = {"palindrome", "0k1k"}
"""Machines whose long inputs lie past the int64 limit: their records fail with
NOT PAST INT64 unless the model ran in two-limb storage."""


def words(enc: T.Encoding, n: int) -> list[str]:
    return ["".join(w) for w in itertools.product(sorted(enc.dtm.input_symbols), repeat=n)]


@dataclass
class TMTally:
    instances: int = 0
    failures: int = 0
    cot_max: int = 0
    steps_max: int = 0
    first_failure: str = ""
    rows: list = field(default_factory=list)    # (word, steps, cot length)

    def cot_vs_steps(self, per_step: int | None = None) -> str:
        """The measured CoT length against automata-lib's step count T: max CoT / max T,
        the range of CoT / T over the inputs with T >= 1 and, with ``per_step`` = c,
        the set of CoT - c T over all inputs (e.g. c = 2 for the hybrid's records).

        >>> t = TMTally(cot_max=9, steps_max=4, rows=[("01", 4, 9), ("", 0, 1)])
        >>> t.cot_vs_steps(2)
        'max CoT 9 / max steps 4 = 2.25; per input CoT/steps in [2.25, 2.25]; CoT - 2 steps in [1]'
        """
        ratios = [c / t for _, t, c in self.rows if t > 0]
        out = (f"max CoT {self.cot_max} / max steps {self.steps_max} = {self.cot_max / self.steps_max:.2f}"
               if self.steps_max else f"max CoT {self.cot_max}, max steps 0")
        if ratios:
            out += f"; per input CoT/steps in [{min(ratios):.2f}, {max(ratios):.2f}]"
        if per_step is not None:
            out += f"; CoT - {per_step} steps in {sorted({c - per_step * t for _, t, c in self.rows})}"
        return out


def compare_run(enc: T.Encoding, spec: T.MachineSpec, word: str, answer: int | None, cot: list[int],
                records: list[tuple[int, int]], want_cot: list[int] | None, tally: TMTally) -> None:
    """One input: automata-lib's verdict and tape vs the model's answer, CoT, records."""
    acc, steps, tape = T.automata_run(enc.dtm, word)
    ref = TR.reference_run(enc.dtm, word, spec.time_bound(len(word)))
    problems = []
    if ref.accepted != acc or ref.steps != steps:
        problems.append(f"reference disagrees with automata-lib ({ref.accepted},{ref.steps}) vs ({acc},{steps})")
    want_answer = T.TRUE if acc else T.FALSE
    if answer != want_answer:
        problems.append(f"answer {answer} != {want_answer}")
    if want_cot is not None and cot != want_cot:
        problems.append("CoT differs from the reference CoT")
    got_tape = T.decode_records(enc, word, records)
    upto = max([len(tape) - 1] + list(got_tape))
    blank = enc.dtm.blank_symbol
    if T.tape_string(enc, got_tape, upto).rstrip(blank) != tape.rstrip(blank):
        problems.append(f"tape {T.tape_string(enc, got_tape, upto)!r} != automata-lib {tape!r}")
    if acc and spec.tape_value is not None and not spec.tape_value(word, tape):
        problems.append(f"automata-lib's tape {tape!r} is not the machine's intended output")
    tally.instances += 1
    tally.cot_max = max(tally.cot_max, len(cot))
    tally.steps_max = max(tally.steps_max, steps)
    tally.rows.append((word, steps, len(cot)))
    if problems:
        tally.failures += 1
        if not tally.first_failure:
            tally.first_failure = f"{word!r}: " + "; ".join(problems)


def run_hybrid(spec: T.MachineSpec, n: int, sim: T.HybridTM | None = None) -> tuple[TMTally, T.HybridTM]:
    """Every input of length n through the hybrid compiled for n (or ``sim``, compiled
    for some n' >= n)."""
    sim = sim or T.tm_hybrid(spec, n)
    tally = TMTally()
    for w in words(sim.enc, n):
        g = sim.run(w)
        ref = TR.reference_run(sim.enc.dtm, w, spec.time_bound(n))
        compare_run(sim.enc, spec, w, g.answer, g.cot, sim.records(g.cot), ref.hybrid_cot(), tally)
    return tally, sim


NECESSITY_N = {"hybrid": 4, "rag": 3}
"""Input lengths of the necessity records: every word of length <= n (31 words for the
hybrid, 15 for the RAG, whose runs cost ~13 tokens per step) at every scan step."""


def tm_runner(enc: T.Encoding, spec: T.MachineSpec, n: int, run) -> "Callable[[object], Outcome]":
    """``run(model)`` for :func:`checks.verify.necessity.necessity_record`: every word of length
    <= n through ``run(model, word) -> (answer, cot, reference cot)``, compared with the
    plain-Python reference (answer, then CoT token for token), every word run to
    completion and classified (:func:`checks.verify.necessity.classify`)."""
    ws = [w for k in range(n + 1) for w in words(enc, k)]

    def check(model) -> Outcome:
        out = Outcome(len(ws))
        for w in ws:
            ref = TR.reference_run(enc.dtm, w, spec.time_bound(len(w)))
            try:
                answer, cot, want_cot = run(model, w)
            except Exception as e:   # never a wrong answer (checks/verify/necessity.py)
                out.add("raised", f"{w!r}: {type(e).__name__}: {str(e)[:80]}")
                continue
            classify(out, repr(w), answer, ref.answer, cot, want_cot, len(cot))
        return out
    check.instances = len(ws)
    return check


def _necessity(claim: str, model, spec: T.MachineSpec, n: int, run, build_frac=None) -> Record:
    return necessity_record(claim, model.name, f"TM {spec.name}: every input of length <= {n}",
                           n, task=TR.SPEC.name, family="exhaustive", alphabet=2, declared=model.fmt, run=run,
                           instances=run.instances, model=model, build_frac=build_frac)


def _machines(profile: str) -> list[str]:
    """The parts of the two checks below: one per machine (records in this order)."""
    return list(T.MACHINES)


@register("T5-hyb-P", "hybrid (2 RNN layers + 1 attention) simulates DTMs with CoT", parts=_machines)
def hybrid_tm_check(profile: str, seed: int, part: str) -> list[Record]:
    out = []
    name, spec = part, T.MACHINES[part]
    for n in range(0, LENGTHS[profile][name] + 1):
        t0 = time.perf_counter()
        tally, sim = run_hybrid(spec, n)
        r = sim.model.resources
        bound = 2 * spec.time_bound(n) + 1
        out.append(Record("T5-hyb-P", sim.model.name, TR.SPEC.name, n,
                          tally.instances, tally.failures, r.used_precision_bits, sim.model.fmt.total_bits,
                          tally.cot_max, bound, r.params, r.state_bits,
                          round(time.perf_counter() - t0, 3), family="exhaustive", alphabet=2,
                          note=(tally.cot_vs_steps(2) + "; "
                                + (tally.first_failure or "all match automata-lib")), description=f"TM {name}: every input of length {n}"))

    extra = LONG_WORDS[profile].get(name, ())
    if extra:
        t0 = time.perf_counter()
        n = max(map(len, extra))
        sim = T.tm_hybrid(spec, n)
        tally = TMTally()
        for w in extra:
            g = sim.run(w)
            ref = TR.reference_run(sim.enc.dtm, w, spec.time_bound(len(w)))
            compare_run(sim.enc, spec, w, g.answer, g.cot, sim.records(g.cot), ref.hybrid_cot(), tally)
        r = sim.model.resources
        past = sim.model.fmt.wide or name not in LONG_PAST_INT64
        where = "past the int64 limit" if name in LONG_PAST_INT64 else "on int64"
        out.append(Record("T5-hyb-P", sim.model.name, TR.SPEC.name, n, tally.instances,
                          tally.failures if past else max(1, tally.failures), r.used_precision_bits,
                          sim.model.fmt.total_bits, tally.cot_max, 2 * spec.time_bound(n) + 1, r.params,
                          r.state_bits, round(time.perf_counter() - t0, 3),
                          family="two-limb" if name in LONG_PAST_INT64 else "long", alphabet=2,
                          note=("" if past else "NOT PAST INT64: ") + f"{sim.model.fmt.name}; "
                               + tally.cot_vs_steps(2) + "; " + (tally.first_failure or "all match automata-lib"),
                          description=f"TM {name}: {len(extra)} long inputs {where} (length up to {n})"))

    small = T.tm_hybrid(spec, NECESSITY_N["hybrid"])

    def run_hyb(model, w, small=small):
        g = generate(model, small.enc.prompt(w), answer_tokens=[T.TRUE, T.FALSE],
                     max_cot=2 * spec.time_bound(len(w)) + 1)
        return g.answer, g.cot, TR.reference_run(small.enc.dtm, w, spec.time_bound(len(w))).hybrid_cot()
    out.append(_necessity("T5-hyb-P", small.model, spec, small.n, tm_runner(small.enc, spec, small.n, run_hyb),
                          build_frac=lambda fmt, spec=spec: T.tm_hybrid(spec, NECESSITY_N["hybrid"], fmt).model))
    return out


def run_rag(spec: T.MachineSpec, n: int, sim: T.RagTM | None = None) -> tuple[TMTally, T.RagTM, int]:
    """Every input of length n through the linear RNN + RAG compiled for n (or
    ``sim``, compiled for some n' >= n); returns the tally, the simulation and the
    number of oracle failures (malformed / timeout)."""
    sim = sim or T.tm_rag(spec, n)
    tally = TMTally()
    oracle_failures = 0
    for w in words(sim.enc, n):
        g, oracle = sim.run(w)
        want, _ = TR.reference_rag_cot(sim.enc.dtm, w, spec.time_bound(n))
        oracle_failures += len(oracle.failures())
        compare_run(sim.enc, spec, w, g.answer, g.cot, sim.records(g.cot), want, tally)
    return tally, sim, oracle_failures


@register("T5-RAG", "linear RNN + in-context RAG simulates DTMs with CoT", parts=_machines)
def rag_tm_check(profile: str, seed: int, part: str) -> list[Record]:
    out = []
    name, spec = part, T.MACHINES[part]
    L = RAG_LENGTHS[profile][name]
    shared = T.tm_rag(spec, L) if profile == "quick" else None
    for n in range(0, L + 1):
        t0 = time.perf_counter()
        tally, sim, bad_oracle = run_rag(spec, n, shared)
        r = sim.model.resources
        bound = T.rag_cot_bound(n, spec.time_bound(n))
        out.append(Record("T5-RAG", sim.model.name, TR.SPEC.name, n,
                          tally.instances, tally.failures + bad_oracle, r.used_precision_bits,
                          sim.model.fmt.total_bits, tally.cot_max, bound, r.params, r.state_bits,
                          round(time.perf_counter() - t0, 3), family="exhaustive", alphabet=2,
                          note=(f"{tally.cot_vs_steps()}; {bad_oracle} malformed/timed-out searches; "
                                + (tally.first_failure or "all match automata-lib")), description=f"TM {name} (RAG): every input of length {n}"))

    small = T.tm_rag(spec, NECESSITY_N["rag"])

    def run_rag_model(model, w, small=small):
        g, _ = small.run(w, model=model)
        return g.answer, g.cot, TR.reference_rag_cot(small.enc.dtm, w, spec.time_bound(len(w)))[0]
    out.append(_necessity("T5-RAG", small.model, spec, small.n,
                          tm_runner(small.enc, spec, small.n, run_rag_model)))
    return out
