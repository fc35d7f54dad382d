"""The claim registry: docs/theory.md §4 claim ids -> the checks that verify them.

A check is a function ``(profile, seed) -> list[Record]``, or a sharded one
(``@register(claim, name, parts=...)``, :class:`Check`) computing one part at a
time; ``rnngap verify`` runs every registered check (or those of ``--only``
claims) and fails if any record fails. The serial engine (:func:`run`, the
reference) and the Dask engine (checks/verify/engine.py) run the same parts and assemble
them with the same :func:`assemble`. A record passes only if it has zero failures, its measured precision is
within the declared one, and its CoT stays within the declared bound.
Claims without a registered check are listed as NOT CHECKED, never as passed.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import time
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from numba.core.event import install_timer

from . import __path__ as package_path

CLAIMS: dict[str, str] = {
    "machine": "fixed-point operations and softmax equal exact arithmetic (docs/theory.md §1)",
    "gadgets": "each gadget is exact at its declared O(log n) precision and fails below it",
    "declarations": "every declared resource (precision bits, CoT bound, TM time) has its claimed asymptotic class",
    "T4.6-up": "constant-size Transformers solve Index, AR, c-gram, Counting (no CoT, p = O(log n))",
    "T4.6-low": "no RNN with o(n)-bit memory solves them, with any CoT length",
    "T4.7-up": "a constant-size Transformer solves IsTree with CoT O(n)",
    "T4.7-low": "no RNN with o(n)-bit memory solves IsTree, any CoT (reduction from Index)",
    "T4.1": "RNN + CoT (O(log n) bits) is strictly stronger than RNN without CoT (conditional)",
    "sim": "a constant-size Transformer with CoT simulates any given RNN with CoT",
    "T5-RAG": "a linear RNN with in-context RAG solves the retrieval tasks, IsTree, and simulates TMs",
    "T5.6": "a hybrid (linear RNN + 1 attention layer) solves the retrieval tasks and IsTree",
    "T5-hyb-P": "a hybrid with CoT simulates any poly-time Turing machine",
}

from rnngap.checks.tasks import NO_TASK, is_task_name

SCHEMA_VERSION = 4
"""Version of the ``rnngap verify --json`` record schema (docs/records.md, "Schema history")."""
RECORD_FIELDS = ("claim", "model", "task", "n", "instances", "failures", "precision_bits_used",
                 "precision_bits_declared", "cot_max", "cot_bound", "params", "state_bits", "seconds",
                 "checked", "note", "kind", "family", "alphabet", "description")
SEPARATION_FIELDS = ("cc_bits", "collision_forced", "witness_verified")
NECESSITY_FIELDS = ("frontier_int_bits", "frontier_frac_bits", "wrong_below", "cot_deviation_below",
                    "no_answer_below", "raised_below", "int_tight", "frac_tight", "int_slack", "frac_slack")
KINDS = ("correctness", "separation", "necessity")
"""What a record shows:

* ``correctness``: a construction (or a lower-bound artefact) checked on the
  instances of ``family``; passes with zero failures within its declared bounds.
* ``separation``: one task and n, both sides on the same instance family
  (docs/theory.md §1 "Where the theorem bites"): the constant-size model correct on
  every instance checked, the exact one-way CC of that family (``cc_bits``), and
  a bounded-memory RNN that is correct below its capacity broken on a verified
  witness from that family (``witness_verified``); ``collision_forced`` says
  whether the collision is forced by pigeonhole (state bits < CC) or only found.
  Passes only if the model has zero failures and the witness is verified.
* ``necessity``: the measured integer-bit and fraction-bit frontiers (saturate
  mode) and what happens one bit below each: a wrong FINAL answer on a concrete
  instance (``wrong_below``: the only evidence of necessity), a CoT deviation
  with the answer right (``cot_deviation_below``), no answer within the CoT bound
  (``no_answer_below``), an exception (``raised_below``: never counted as wrong);
  per scan ``int_tight`` / ``frac_tight`` (True: wrong answer one bit below;
  None: the frontier is the floor, I = 1 or f = 0) and the slack (declared minus
  frontier bits). Fails if a frontier lies above the declared bits or a run one
  bit below a frontier raised (saturate mode never should).
"""


@dataclass
class Record:
    claim: str
    model: str
    task: str               # the canonical task name (checks.tasks.TASKS) or NO_TASK
    n: int
    instances: int
    failures: int
    precision_bits_used: int | None = None
    precision_bits_declared: int | None = None
    cot_max: int | None = None
    cot_bound: int | None = None
    params: int | None = None
    state_bits: int | None = None
    seconds: float = 0.0
    note: str = ""
    checked: bool = True   # False: the check could not run (e.g. data absent); neither pass nor fail
    kind: str = "correctness"
    family: str = "random"        # "reduction": the image of the lower bound's Index reduction
    alphabet: int | None = None   # the data alphabet of the instances (None where there is none)
    cc_bits: int | None = None             # separation: exact one-way CC of the family at n
    collision_forced: bool | None = None   # separation: state bits < cc_bits (pigeonhole)
    witness_verified: bool | None = None   # separation: the failing instance re-run and checked
    frontier_int_bits: int | None = None   # necessity: smallest I (saturate) with every instance right
    frontier_frac_bits: int | None = None  # necessity: smallest f (saturate) with every instance right
    wrong_below: bool | None = None        # necessity: a wrong FINAL answer one bit below a frontier
    cot_deviation_below: bool | None = None  # necessity: a CoT differs (answer right) one bit below a frontier
    no_answer_below: bool | None = None    # necessity: no answer within the CoT bound one bit below a frontier
    raised_below: bool | None = None       # necessity: a run raised one bit below a frontier (a defect)
    int_tight: bool | None = None          # necessity: wrong answer at I frontier - 1 (None: I = 1 is the floor)
    frac_tight: bool | None = None         # necessity: wrong answer at f frontier - 1 (None: f = 0 is the floor)
    int_slack: int | None = None           # necessity: declared I minus the I frontier
    frac_slack: int | None = None          # necessity: declared f minus the f frontier
    description: str = ""                  # what was run, in words (the free text of schema version 1's task)

    def __post_init__(self) -> None:
        if not is_task_name(self.task):
            raise ValueError(f"record task must be a canonical task name (checks.tasks.TASKS) or {NO_TASK!r}, "
                             f"got {self.task!r}")
        if self.kind not in KINDS:
            raise ValueError(f"record kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def status(self) -> str:
        return "PASS" if self.passed else ("NOT CHECKED" if not self.checked else "FAIL")

    @property
    def passed(self) -> bool:
        if not self.checked:
            return False
        if self.failures != 0 or self.instances <= 0:
            return False
        if self.precision_bits_used is not None and self.precision_bits_declared is not None \
                and self.precision_bits_used > self.precision_bits_declared:
            return False
        if self.cot_max is not None and self.cot_bound is not None and self.cot_max > self.cot_bound:
            return False
        if self.kind == "separation" and (self.cc_bits is None or self.witness_verified is not True
                                          or self.collision_forced is None):
            return False
        if self.kind == "necessity" and (self.frontier_int_bits is None or self.frontier_frac_bits is None
                                         or self.wrong_below is None or self.raised_below is not False):
            return False
        return True

    def as_json(self, seed: int | None = None, profile: str | None = None) -> dict:
        """The record as a JSON object: :data:`RECORD_FIELDS`, ``status``, the run's
        ``seed`` and ``profile``, ``schema_version`` and the fields of its kind
        (docs/records.md)."""
        d = asdict(self)
        out = {k: d[k] for k in RECORD_FIELDS}
        out["status"] = self.status
        out["seed"] = seed
        out["profile"] = profile
        out["schema_version"] = SCHEMA_VERSION
        if self.kind == "separation":
            out.update({k: d[k] for k in SEPARATION_FIELDS} | {"state_bits": self.state_bits})
        if self.kind == "necessity":
            out.update({k: d[k] for k in NECESSITY_FIELDS})
        return out


@dataclass
class Check:
    """A registered check. Unsharded: ``fn(profile, seed) -> list[Record]``.
    Sharded (``parts`` given): ``parts(profile)`` lists the part keys (small JSON-able
    values: an n, a (task, n) pair, an index range) and ``fn(profile, seed, part)``
    computes one part; the check's records are the parts' records concatenated in
    part order, or ``combine(profile, seed, outputs)`` of the parts' outputs (in part
    order) when the check merges partial results (e.g. one record aggregating an
    enumeration split into index ranges). Every engine runs the same parts and
    assembles them with :func:`assemble`, so the engines agree by construction."""
    claim: str
    name: str
    fn: Callable
    parts: Callable[[str], list] | None = None
    combine: Callable[[str, int, list], list[Record]] | None = None
    cost: Callable[[object], float] | None = None
    """Optional estimate of a part's cost (any unit): a parallel engine starts the
    costliest parts first (it never changes what a part computes)."""
    optional: bool = False
    """True: a check with no parts at this run (e.g. no registered construction to
    check) is left out of the run, not an error."""

    def part_keys(self, profile: str) -> list:
        """The part keys of this check at ``profile`` (``[None]``: one unsharded part)."""
        if self.parts is None:
            return [None]
        keys = list(self.parts(profile))
        if not keys and not self.optional:
            raise ValueError(f"check {self.claim}: {self.name} declares no parts for profile {profile!r}")
        return keys


REGISTRY: list[Check] = []
_ALL = object()   # sharded check called with no part: run them all


def register(claim: str, name: str, parts: Callable[[str], list] | None = None,
             combine: Callable[[str, int, list], list[Record]] | None = None,
             cost: Callable[[object], float] | None = None, optional: bool = False):
    """Register a check of ``claim`` (see :class:`Check` for ``parts`` and ``combine``)."""
    if claim not in CLAIMS:
        raise ValueError(f"unknown claim id {claim!r}; known: {sorted(CLAIMS)}")
    if combine is not None and parts is None:
        raise ValueError("combine needs parts")

    def deco(fn):
        if parts is None:
            REGISTRY.append(Check(claim, name, fn))
            return fn

        @functools.wraps(fn)
        def sharded(profile: str, seed: int, part=_ALL):
            """One part, or (no part given) every part in order, concatenated or
            combined: the unsplit check, errors propagating."""
            if part is not _ALL:
                return fn(profile, seed, part)
            outputs = [fn(profile, seed, p) for p in parts(profile)]
            return list(combine(profile, seed, outputs)) if combine else [r for o in outputs for r in o]
        REGISTRY.append(Check(claim, name, sharded, parts, combine, cost, optional))
        return sharded
    return deco


def load_checks() -> list[Check]:
    """Import every ``checks/verify/checks_*.py`` module; each registers its checks."""
    for mod in sorted(m.name for m in pkgutil.iter_modules(package_path)):
        if mod.startswith("checks_"):
            importlib.import_module(f"{__package__}.{mod}")
    return REGISTRY


@dataclass
class PartResult:
    """What one part of a check gave: its output (``None`` if it raised), the error
    (``"TypeName: message"``), its wall-clock seconds and, of those, the seconds
    numba spent compiling kernels (0 when every kernel came from the cache)."""
    output: object
    error: str | None
    seconds: float
    compile_seconds: float = 0.0

    @property
    def history_seconds(self) -> float:
        """The seconds without compiling: what the part costs on a warm cache (the
        engine orders the next run's parts by it)."""
        return round(max(0.0, self.seconds - self.compile_seconds), 3)


@dataclass
class Task:
    """One unit of work of a run: part ``part`` of check ``check`` (``None``: unsharded)."""
    check: Check
    part: object

    @property
    def label(self) -> str:
        where = "" if self.part is None else f" [{_part_label(self.part)}]"
        return f"{self.check.claim}: {self.check.name}{where}"


def _part_label(part) -> str:
    return ", ".join(map(str, part)) if isinstance(part, (tuple, list)) else str(part)


def run_part(fn: Callable, profile: str, seed: int, part, sharded: bool) -> PartResult:
    """Run one part (the same function on every engine; a dask worker runs it too).
    A check that raises gives its error as the result, never an exception. Every
    check module is imported first, as in a serial run: some checks read what the
    others declare when imported (e.g. the declarations check)."""
    load_checks()
    t0 = time.perf_counter()
    compiled = []
    with install_timer("numba:compile", compiled.append):   # outermost compiles only, summed
        try:
            out, err = (fn(profile, seed, part) if sharded else fn(profile, seed)), None
        except Exception as e:  # a check that crashes is a failed check, reported as a row
            # (in raise mode a run needing more bits than declared ends here with
            # FixedPointOverflow, which names the bits it needed)
            out, err = None, f"{type(e).__name__}: {e}"
    return PartResult(out, err, round(time.perf_counter() - t0, 3), round(sum(compiled), 3))


def _error_row(chk: Check, note: str) -> Record:
    return Record(chk.claim, chk.name, NO_TASK, 0, 0, 1, note=note, description="check raised an error")


def assemble(chk: Check, profile: str, seed: int, parts: list, results: list[PartResult]) -> list[Record]:
    """The records of ``chk`` from its parts' results (in part order). A part that
    raised becomes a FAIL row ("check raised an error", the error in the note, the
    part named when the check is sharded) in place of its records; a check with a
    ``combine`` that has a raising part gives only those FAIL rows. Records with no
    ``seconds`` get their part's wall-clock seconds (the sum over the parts for
    combined records)."""
    sharded = chk.parts is not None
    errs = [_error_row(chk, r.error if not sharded else f"part {_part_label(p)}: {r.error}")
            for p, r in zip(parts, results) if r.error is not None]
    if chk.combine is not None:
        if errs:
            recs = errs
        else:
            try:
                recs = list(chk.combine(profile, seed, [r.output for r in results]))
            except Exception as e:
                recs = [_error_row(chk, f"combining the parts: {type(e).__name__}: {e}")]
            total = round(sum(r.seconds for r in results), 3)
            for r in recs:
                if not r.seconds:
                    r.seconds = total
    else:
        recs = []
        for p, r in zip(parts, results):
            if r.error is not None:
                recs.append(_error_row(chk, r.error if not sharded else f"part {_part_label(p)}: {r.error}"))
                continue
            for rec in r.output or []:
                if not rec.seconds:
                    rec.seconds = r.seconds
                recs.append(rec)
    if not recs:
        recs = [Record(chk.claim, chk.name, NO_TASK, 0, 0, 1, note="a check must report what it ran",
                       description="check returned no records")]
    return recs


CHECK_SEP = "::"
"""``only`` may name one check of a claim as ``CLAIM::check name``."""


def plan(profile: str = "quick", only: Iterable[str] | None = None) -> list[tuple[Check, list]]:
    """The checks of a run (registry order, ``only`` claims, or ``CLAIM::check name``
    for one check) with their part keys."""
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    checks = load_checks()
    wanted = {w.split(CHECK_SEP, 1)[0] for w in only} if only else None
    named = {tuple(w.split(CHECK_SEP, 1)) for w in only or () if CHECK_SEP in w}
    if wanted:
        unknown = wanted - set(CLAIMS)
        if unknown:
            raise ValueError(f"unknown claim id(s) {sorted(unknown)}; known: {', '.join(CLAIMS)}")
    whole = {w for w in only or () if CHECK_SEP not in w}

    def chosen(chk: Check) -> bool:
        return not wanted or chk.claim in whole or (chk.claim, chk.name) in named
    planned = [(chk, chk.part_keys(profile)) for chk in checks if chosen(chk)]
    return [(chk, keys) for chk, keys in planned if keys]


def run(profile: str = "quick", only: Iterable[str] | None = None, seed: int = 0,
        progress: Callable[[Task], None] | None = None) -> list[Record]:
    """The serial engine (the reference): every part of every check in order, in this
    process. ``progress(task)`` is called before each part runs."""
    return run_plan(plan(profile, only), profile, seed, progress)


def run_plan(checks: list[tuple[Check, list]], profile: str, seed: int,
             progress: Callable[[Task], None] | None = None) -> list[Record]:
    """The serial engine on an explicit plan: (check, part keys) pairs (:func:`plan`)."""
    out: list[Record] = []
    for chk, parts in checks:
        results = []
        for part in parts:
            if progress:
                progress(Task(chk, part))
            results.append(run_part(chk.fn, profile, seed, part, chk.parts is not None))
        out.extend(assemble(chk, profile, seed, parts, results))
    return out


def unchecked_claims(only: Iterable[str] | None = None) -> list[str]:
    load_checks()
    have = {c.claim for c in REGISTRY}
    claims = list(dict.fromkeys(c.split(CHECK_SEP, 1)[0] for c in only)) if only else list(CLAIMS)
    return [c for c in claims if c not in have]
