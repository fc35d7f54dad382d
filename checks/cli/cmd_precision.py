"""``rnngap precision --task T --out FILE.png [--max-log2n K] [--json PATH]``:
the measured precision frontier of a T4.6-up construction against its declared
bits, as a plot (checks/verify/frontier.py computes it on a fixed seeded sample), plus
one line per n and the least-squares slopes of the measured and declared bits
against log2 n on stdout. Exits 1 if the declaration is below the frontier at
some n. The PNG and the JSON are written all or nothing
(:class:`checks.io.errors.Outputs`)."""
from __future__ import annotations

import argparse
import json
import os

from rnngap.checks.io.errors import Outputs, UsageError, check_outputs
from rnngap.checks.io.progress import Bar

# Lazy imports: the functions below import checks.verify.frontier and matplotlib (slow)
# only when the command runs, so that `rnngap --help` stays fast.


def add_command(sub) -> None:
    p = sub.add_parser("precision", help="plot the precision frontier of a construction",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  rnngap precision --task index --out index.png --max-log2n 6\n"
                              "  rnngap precision --task counting --out counting.png --json counting.json\n")
    p.add_argument("--task", required=True, help="index, ar, cgram, cgram4 or counting")
    p.add_argument("--out", required=True, help="PNG file to write")
    p.add_argument("--max-log2n", type=int, default=8, help="largest n = 2^K (default 8; 4 <= K <= 16)")
    p.add_argument("--json", help="also write the frontier rows as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from rnngap.checks.verify.frontier import (
        CONSTRUCTIONS, format_slopes, frontier_summary, frontier_table, row_violations,
    )

    if args.task not in CONSTRUCTIONS:
        raise UsageError(f"unknown task {args.task!r}; known: {', '.join(sorted(CONSTRUCTIONS))}")
    if not 4 <= args.max_log2n <= 16:
        raise UsageError(f"--max-log2n must be between 4 and 16, got {args.max_log2n}")
    if not args.out.lower().endswith(".png"):
        raise UsageError(f"--out must name a .png file, got {args.out!r}")
    check_outputs({"--out": args.out, "--json": args.json}, what="precision")
    os.environ.pop("MPLBACKEND", None)      # the plot is written to a file: Agg, whatever the environment says
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [2 ** k for k in range(4, args.max_log2n + 1)]
    rows = []
    with Bar("precision frontier") as tick:
        for k, n in enumerate(ns):
            tick(k, len(ns))
            rows += frontier_table([args.task], [n])
    summary = frontier_summary(rows, args.task)
    x = [r["log2_n"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x, [r["f_declared"] for r in rows], "b--", label="f declared")
    ax.plot(x, [r["f_min"] for r in rows], "bo-", label="f measured (frontier)")
    ax.plot(x, [r["I_declared"] for r in rows], "r--", label="I declared")
    ax.plot(x, [r["I_min_at_f_declared"] for r in rows], "ro-", label="I measured at declared f")
    ax.set_xlabel("log2 n")
    ax.set_ylabel("bits")
    fs, Is = summary["slope_f_min"], summary["slope_I_min_at_f_declared"]
    ax.set_title(f"{args.task}: precision frontier (slopes vs log2 n: f {fs:.2f}, I {Is:.2f})"
                 if fs is not None and Is is not None else f"{args.task}: precision frontier")
    ax.legend()
    fig.tight_layout()
    for r in rows:
        why = row_violations(r)
        print(f"n={r['n']:6d}  f: {r['f_min']}/{r['f_declared']}  I: {r['I_min_at_f_declared']}/{r['I_declared']}"
              f"  ({'declared at or above the frontier' if not why else 'DECLARED BELOW THE FRONTIER: ' + '; '.join(why)})")
    print(f"{args.task}: {format_slopes(summary)}")
    with Outputs() as outs:          # all or nothing: both files are complete before either is moved into place
        fh = outs.open(args.out, "wb", what="precision --out")
        fig.savefig(fh, dpi=110, format="png")
        if args.json:
            fh = outs.open(args.json, what="precision --json")
            json.dump(rows, fh, indent=1)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 1 if summary["violations"] else 0
