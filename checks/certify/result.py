"""One certificate's record: what ``rnngap certify`` proved of a construction, and how.

Every prover of the subsystem returns a :class:`Result`; ``certify --json``
writes :meth:`Result.record` (docs/records.md).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA_VERSION = 11
"""Version of the ``certify --json`` record (docs/records.md, "Schema history")."""


@dataclass
class Result:
    claim: str
    construction: str
    obligations: int
    n_min: int
    n_max: int | None
    method: str
    certified: bool
    seconds: float
    pieces: int = 0
    failures: list = field(default_factory=list)     # [{"obligation", "first_n", "need", "have"}]
    facts: list = field(default_factory=list)        # per-position facts: name, method, query, answer
    note: str = ""
    params: int | None = None                        # the declared parameter count (its record's), if any
    covers: list = field(default_factory=list)       # the layers a whole-model certificate covers
    source: str = "declared-obligation"              # "built-model": every fact derived from the built model
    steps: list = field(default_factory=list)        # the proof chain (--explain): one dict per step
    n_max_int64: int | None = None                   # where the declared format still fits int64
    sizes: list = field(default_factory=list)        # the sizes n proved at, for a certificate proved at sizes

    def record(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "steps"}
        d["schema_version"] = SCHEMA_VERSION
        return d
