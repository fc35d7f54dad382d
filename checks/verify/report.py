"""What ``rnngap verify`` prints: one line per claim, then every failing record in full.

The summary line of a claim gives its records, its failures, the largest n
checked, whether it was checked where its theorem bites (records on the lower
bound's reduction family, or separation records) and the seconds its records
took. ``--records`` adds the table of every record, ``--notes`` every record's
note, ``--quiet`` keeps the failures and the closing line only. ``--json``
(written by the caller) always has every field.
"""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .registry import CLAIMS


def _fmt(v) -> str:
    return "-" if v is None else str(v)


def _bites(recs) -> str:
    if any(r.kind == "separation" for r in recs):
        return "separation"
    if any(r.family == "reduction" for r in recs):
        return "reduction"
    return "-"


def claim_table(records, claims) -> Table:
    """One row per claim: records, failed, largest n, where it bites (separation
    records, or records on the reduction's instances), seconds, status."""
    t = Table(title=None, box=None, pad_edge=False)
    for col in ("claim", "records", "failed", "largest n", "where it bites", "s", "status"):
        t.add_column(col, no_wrap=True, min_width=len(col))
    t.add_column("what", no_wrap=True, overflow="ellipsis", max_width=30)
    for c in claims:
        recs = [r for r in records if r.claim == c]
        if not recs:
            continue
        bad = sum(r.checked and not r.passed for r in recs)
        skipped = sum(not r.checked for r in recs)
        status = "FAIL" if bad else "NOT CHECKED" if skipped else "PASS"
        t.add_row(escape(c), str(len(recs)), str(bad), str(max(r.n for r in recs)), _bites(recs),
                  f"{sum(r.seconds for r in recs):.0f}", status, escape(claims[c]))
    return t


def record_table(records, title: str) -> Table:
    """Every record, one row each (``--records``)."""
    t = Table(title=title)
    for col in ("claim", "model", "task", "what", "n", "instances", "failures", "bits used/decl", "CoT max/bound",
                "params", "state bits", "s", "ok"):
        t.add_column(col)
    for r in records:
        t.add_row(escape(r.claim), escape(r.model), escape(r.task), escape(r.description), str(r.n),
                  str(r.instances), str(r.failures),
                  f"{_fmt(r.precision_bits_used)}/{_fmt(r.precision_bits_declared)}",
                  f"{_fmt(r.cot_max)}/{_fmt(r.cot_bound)}", _fmt(r.params), _fmt(r.state_bits),
                  f"{r.seconds:.2f}", r.status)
    return t


def in_full(r) -> str:
    """A failing record on one line: every field that says what was run and what failed."""
    return (f"{r.status} {r.claim} {r.model} task={r.task} n={r.n} ({r.description}): "
            f"{r.failures} of {r.instances} failed, bits {_fmt(r.precision_bits_used)}/"
            f"{_fmt(r.precision_bits_declared)}, CoT {_fmt(r.cot_max)}/{_fmt(r.cot_bound)}, family {r.family}"
            + (f"; {r.note}" if r.note else ""))


def report(records, unchecked, args, seconds: float, console: Console | None = None) -> None:
    """Print the run's report on stdout (see the module docstring)."""
    out = console or Console(width=max(Console().width, 100 if not args.records else 170), soft_wrap=True)
    if args.records:
        out.print(record_table(records, f"rnngap verify ({args.profile} profile, seed {args.seed})"))
    if not args.quiet:
        present = {c: CLAIMS.get(c, "") for c in dict.fromkeys(r.claim for r in records)}
        out.print(claim_table(records, present))
    for r in records:
        if r.checked and not r.passed:
            out.print(escape(f"  {in_full(r)}"), soft_wrap=True)
        elif r.note and args.notes:
            out.print(escape(f"  {r.status} {r.claim} {r.model} {r.task} {r.description} n={r.n}: {r.note}"))
    for c in unchecked:
        out.print(escape(f"  NOT CHECKED {c}: {CLAIMS[c]} (no check registered)"))
    failed = sum(r.checked and not r.passed for r in records)
    skipped = sum(not r.checked for r in records)
    out.print(f"{len(records)} records, {failed} failed, {skipped} not checked (missing data), "
              f"{len(unchecked)} claims not checked, {seconds:.1f} s")
