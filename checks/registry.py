"""The claim registry: theory.md §4 claim ids -> the checks that verify them.

A check is a function ``(profile, seed) -> list[Record]``; ``rnngap verify`` runs
every registered check (or those of ``--only`` claims) and fails if any record
fails. A record passes only if it has zero failures, its measured precision is
within the declared one, and its CoT stays within the declared bound.
Claims without a registered check are listed as NOT CHECKED, never as passed.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
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
                 "precision_bits_declared", "cot_max", "cot_bound", "params", "state_bits", "seconds",
                 "checked", "note", "kind", "family", "alphabet")
SEPARATION_FIELDS = ("cc_bits", "collision_forced", "witness_verified")
NECESSITY_FIELDS = ("frontier_int_bits", "frontier_frac_bits", "wrong_below")
KINDS = ("correctness", "separation", "necessity")
"""What a record shows:

* ``correctness``: a construction (or a lower-bound artefact) checked on the
  instances of ``family``; passes with zero failures within its declared bounds.
* ``separation``: one task and n, both sides on the same instance family
  (theory.md §1 "Where the theorem bites"): the constant-size model correct on
  every instance checked, the exact one-way CC of that family (``cc_bits``), and
  a bounded-memory RNN that is correct below its capacity broken on a verified
  witness from that family (``witness_verified``); ``collision_forced`` says
  whether the collision is forced by pigeonhole (state bits < CC) or only found.
  Passes only if the model has zero failures and the witness is verified.
* ``necessity``: the measured integer-bit and fraction-bit frontiers (saturate
  mode) and whether one bit below a frontier some concrete instance is answered
  wrongly (``wrong_below``; False means the bound is not tight there, which is
  information, not a failure). Fails if a frontier lies above the declared bits.
"""


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
    kind: str = "correctness"
    family: str = "random"        # "reduction": the image of the lower bound's Index reduction
    alphabet: int | None = None   # the data alphabet of the instances (None where there is none)
    cc_bits: int | None = None             # separation: exact one-way CC of the family at n
    collision_forced: bool | None = None   # separation: state bits < cc_bits (pigeonhole)
    witness_verified: bool | None = None   # separation: the failing instance re-run and checked
    frontier_int_bits: int | None = None   # necessity: smallest I (saturate) with every instance right
    frontier_frac_bits: int | None = None  # necessity: smallest f (saturate) with every instance right
    wrong_below: bool | None = None        # necessity: a wrong instance exists one bit below a frontier

    def __post_init__(self) -> None:
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
                                         or self.wrong_below is None):
            return False
        return True

    def as_json(self, seed: int | None = None, profile: str | None = None) -> dict:
        """The record as a JSON object: :data:`RECORD_FIELDS`, ``status``, the run's
        ``seed`` and ``profile``, and the fields of its kind."""
        d = asdict(self)
        out = {k: d[k] for k in RECORD_FIELDS}
        out["status"] = self.status
        out["seed"] = seed
        out["profile"] = profile
        if self.kind == "separation":
            out.update({k: d[k] for k in SEPARATION_FIELDS} | {"state_bits": self.state_bits})
        if self.kind == "necessity":
            out.update({k: d[k] for k in NECESSITY_FIELDS})
        return out


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
