"""``rnngap cc --task T --n N [--table] [--alphabet A] [--json PATH]``: the exact
deterministic one-way communication complexity of a task's Alice/Bob split
(claims T4.6-low, T4.7-low; ``lowerbounds/cc.py``), computed by enumeration.

Tasks and splits (Alice's input x in {0..a-1}^n, Bob's query):

* ``index``: ``[BOS] x_1..x_n`` | ``[QUERY] i``: exactly ceil(n log2 a) (= n for bits);
* ``ar``, ``cgram`` (c = 3): key-value layout ``[BOS] K_1 x_1 ..`` | ``[QUERY] K_i``;
* ``counting``: ``[BOS] x_1..x_n`` | ``[QUERY] q t`` (the histogram of x: O(a log n));
* ``istree``: the hub gadget (a hubs, default 2) | ``w - v_i, w - hub .. [EOS]``.

Details: docs/internals/commands.md#cmdcc.
"""
from __future__ import annotations

import argparse
import json
import math

from rnngap.checks.io.errors import UsageError, atomic_output, check_outputs

# Lazy imports: the functions below import rnngap's heavier modules
# (the task specs, lowerbounds.cc)
# only when the command runs, so that `rnngap --help` stays fast.


def task_names() -> tuple[str, ...]:
    """The tasks with a split, as the CLI spells them (``cgram`` is c = 3)."""
    from rnngap.checks.tasks.hard import TASKS
    return TASKS


MAX_CELLS = 2_000_000
"""Largest matrix (#Alice x #Bob) the command enumerates (each cell is one call
of a plain-Python reference, a few to 70 microseconds: ~2.5 min for IsTree)."""

MAX_WORK = 60_000_000
"""Largest cells x instance length (tokens): with alphabet 1 the matrix is
small but each instance has n tokens."""


def _cells_and_length(task: str, n: int, a: int) -> tuple[float, int, int]:
    """(log2 #cells, #Bob inputs, instance length in tokens) of ``task`` at n, alphabet a."""
    bob = {"index": n, "ar": n, "cgram": n, "counting": a * (n + 1), "istree": n * a}[task]
    length = {"index": n, "ar": 2 * n, "cgram": 3 * n, "counting": n, "istree": 3 * n}[task] + 12
    return n * math.log2(a) + math.log2(bob), bob, length


def _cost(task: str, n: int, a: int) -> tuple[int, int] | None:
    """(#cells, cells x instance length) of ``task`` at n, or None when the
    matrix is far past :data:`MAX_CELLS` (decided in logarithms, before a ** n
    is formed)."""
    log_cells, bob, length = _cells_and_length(task, n, a)
    if log_cells > math.log2(MAX_CELLS) + 1:
        return None
    cells = a ** n * bob
    return cells, cells * length


def _fits(task: str, n: int, a: int) -> bool:
    cost = _cost(task, n, a)
    return cost is not None and cost[0] <= MAX_CELLS and cost[1] <= MAX_WORK


def max_n(task: str, alphabet: int, table: bool = False) -> int:
    """The largest n (0 if none) at which ``cc`` enumerates ``task`` at this
    alphabet (:data:`MAX_CELLS`, :data:`MAX_WORK`); every smaller n fits too.
    With ``table`` (``--table``: every n = 1..N is computed) the caps bound the
    sums over 1..N, so that no mode runs past them.

    >>> max_n("index", 2), max_n("istree", 2), max_n("counting", 3)
    (16, 15, 10)
    >>> max_n("index", 1), max_n("index", 1, table=True)
    (7739, 558)
    """
    n, cells, work = 0, 0, 0
    while True:
        cost = _cost(task, n + 1, alphabet)
        if cost is None:
            return n
        cells, work = (cells + cost[0], work + cost[1]) if table else cost
        if cells > MAX_CELLS or work > MAX_WORK:
            return n
        n += 1


def add_command(sub) -> None:
    p = sub.add_parser("cc", help="exact one-way communication complexity of a task split",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  rnngap cc --task index --n 4              # 4 bits: Alice must send x whole\n"
                              "  rnngap cc --task istree --n 6 --table     # the IsTree hub gadget, n = 1..6\n")
    p.add_argument("--task", required=True, help=f"one of {', '.join(task_names())}")
    p.add_argument("--n", required=True, type=int, help="data length n (>= 1)")
    p.add_argument("--alphabet", type=int, default=None,
                   help="Alice's alphabet size a (default 2; for istree: the number of hubs)")
    p.add_argument("--table", action="store_true", help="print the complexity for every n = 1..N")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.set_defaults(func=run)


def make_problem(task: str, n: int, alphabet: int):
    """The :class:`lowerbounds.cc.CommProblem` of ``task`` at length n (the task
    spec's ``cc_split``; for IsTree ``alphabet`` is the number of hubs)."""
    from rnngap.checks.tasks import task as task_spec
    spec = task_spec(task)
    if spec.cc_split is None:
        raise ValueError(task)
    return spec.cc_split(n, alphabet)


def run(args) -> int:
    from rnngap.lowerbounds import cc

    task = str(args.task).lower()
    if task not in task_names():
        raise UsageError(f"cc: unknown task {args.task!r}; known: {', '.join(task_names())}")
    if args.n < 1:
        raise UsageError(f"cc: --n must be >= 1, got {args.n}")
    alphabet = 2 if args.alphabet is None else args.alphabet
    if alphabet < (2 if task == "istree" else 1):
        raise UsageError(f"cc: --alphabet must be >= {2 if task == 'istree' else 1}, got {alphabet}")
    if args.json is not None:
        check_outputs({"--json": args.json}, what="cc")
    cap = max_n(task, alphabet, table=args.table)
    if args.n > cap:
        what = "hubs" if task == "istree" else "alphabet"
        raise UsageError(f"cc: --n {args.n} is too large for the exact computation of {task} at {what} {alphabet}: "
                         + (f"the cap is --n {cap} (at most {MAX_CELLS:,} matrix cells, {MAX_WORK:,} instance tokens"
                            f"{', summed over n = 1..N with --table' if args.table else ''})"
                            if cap else f"no n fits (even n = 1 exceeds {MAX_CELLS:,} matrix cells); "
                                        f"use a smaller --alphabet"))
    ns = list(range(1, args.n + 1)) if args.table else [args.n]
    results = []
    for n in ns:
        try:
            results.append(cc.one_way_complexity(make_problem(task, n, alphabet), max_cells=MAX_CELLS))
        except ValueError as e:
            raise UsageError(f"cc: {task} at n = {n}: {e}") from None
    if args.table:
        print(cc.format_cc_table(results))
    else:
        r = results[0]
        bits = r.bits if r.bits is not None else f"{r.bits_lower}..{r.bits_upper}"
        print(f"{r.name} n={r.n}: one-way complexity {bits} bits ({r.distinct_rows} distinct rows; "
              f"{r.alice_count} x {r.bob_count} matrix, {'exact' if r.exact else 'bounds only'})")
    if args.json:
        rows = [{"task": task, "problem": r.name, "n": r.n, "bits": r.bits, "bits_lower": r.bits_lower,
                 "bits_upper": r.bits_upper, "distinct_rows": r.distinct_rows, "alice": r.alice_count,
                 "bob": r.bob_count, "exact": r.exact, "method": r.method, "seconds": r.seconds} for r in results]
        with atomic_output(args.json, what="cc --json") as fh:
            json.dump(rows, fh, indent=1)
    return 0
