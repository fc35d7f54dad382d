"""The claim registry: theory.md §4 claim ids -> the checks that verify them.

A check is a function ``(profile, seed) -> list[Record]``; ``rnngap verify`` runs
every registered check (or those of ``--only`` claims) and fails if any record
fails. A record passes only if it has zero failures, its measured precision is
within the declared one, and its CoT stays within the declared bound.
Claims without a registered check are listed as NOT CHECKED, never as passed.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

CLAIMS: dict[str, str] = {
    "machine": "fixed-point operations and softmax equal exact arithmetic (theory.md §1)",
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

RECORD_FIELDS = ("claim", "model", "task", "n", "instances", "failures", "precision_bits_used",
                 "precision_bits_declared", "cot_max", "cot_bound", "params", "state_bits", "seconds")


@dataclass
class Record:
    claim: str
    model: str
    task: str
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
        return True

    def as_json(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in RECORD_FIELDS}


@dataclass
class Check:
    claim: str
    name: str
    fn: Callable[[str, int], list[Record]]


REGISTRY: list[Check] = []


def register(claim: str, name: str):
    if claim not in CLAIMS:
        raise ValueError(f"unknown claim id {claim!r}; known: {sorted(CLAIMS)}")

    def deco(fn):
        REGISTRY.append(Check(claim, name, fn))
        return fn
    return deco


def load_checks() -> list[Check]:
    """Import every ``checks/checks_*.py`` module; each registers its checks."""
    import importlib
    import pkgutil

    from . import __path__ as pkg_path
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg_path)):
        if mod.startswith("checks_"):
            importlib.import_module(f"{__package__}.{mod}")
    return REGISTRY


def run(profile: str = "quick", only: Iterable[str] | None = None, seed: int = 0,
        progress: Callable[[Check], None] | None = None) -> list[Record]:
    if profile not in ("quick", "full"):
        raise ValueError(f"profile must be 'quick' or 'full', got {profile!r}")
    checks = load_checks()
    wanted = set(only) if only else None
    if wanted:
        unknown = wanted - set(CLAIMS)
        if unknown:
            raise ValueError(f"unknown claim id(s) {sorted(unknown)}; known: {', '.join(CLAIMS)}")
    out: list[Record] = []
    for chk in checks:
        if wanted and chk.claim not in wanted:
            continue
        if progress:
            progress(chk)
        t0 = time.perf_counter()
        try:
            recs = chk.fn(profile, seed)
        except Exception as e:  # a check that crashes is a failed check, reported as a row
            # (in raise mode a run needing more bits than declared ends here with
            # FixedPointOverflow, which names the bits it needed)
            recs = [Record(chk.claim, chk.name, "check raised an error", 0, 0, 1,
                           note=f"{type(e).__name__}: {e}")]
        if not recs:
            recs = [Record(chk.claim, chk.name, "check returned no records", 0, 0, 1,
                           note="a check must report what it ran")]
        for r in recs:
            if not r.seconds:
                r.seconds = round(time.perf_counter() - t0, 3)
        out.extend(recs)
    return out


def unchecked_claims(only: Iterable[str] | None = None) -> list[str]:
    load_checks()
    have = {c.claim for c in REGISTRY}
    claims = list(only) if only else list(CLAIMS)
    return [c for c in claims if c not in have]
