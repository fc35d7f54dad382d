"""``rnngap cc --task T --n N [--table] [--alphabet A] [--json PATH]``: the exact
deterministic one-way communication complexity of a task's Alice/Bob split
(claims T4.6-low, T4.7-low; ``lowerbounds/cc.py``), computed by enumeration.

Tasks and splits (Alice's input x in {0..a-1}^n, Bob's query):

* ``index``: ``[BOS] x_1..x_n`` | ``[QUERY] i``: exactly ceil(n log2 a) (= n for bits);
* ``ar``, ``cgram`` (c = 3): key-value layout ``[BOS] K_1 x_1 ..`` | ``[QUERY] K_i``;
* ``counting``: ``[BOS] x_1..x_n`` | ``[QUERY] q t`` (the histogram of x: O(a log n));
* ``istree``: the hub gadget (a hubs, default 2) | ``w - v_i, w - hub .. [EOS]``.

Answers come from the plain-Python references of ``checks.tasks``. With
``--table`` the complexity is printed for every n = 1..N (the growth with n).
Bad arguments (unknown task, n < 1, a matrix too large to enumerate) exit 2
with one line.

Example::

    $ rnngap cc --task index --n 8
    index(a=2) n=8: one-way complexity 8 bits (256 distinct rows; 256 x 8 matrix, exact)
"""
from __future__ import annotations

import json
from functools import partial

TASKS = ("index", "ar", "cgram", "counting", "istree")


def add_command(sub) -> None:
    p = sub.add_parser("cc", help="exact one-way communication complexity of a task split")
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    p.add_argument("--n", required=True, type=int, help="data length n (>= 1)")
    p.add_argument("--alphabet", type=int, default=None,
                   help="Alice's alphabet size a (default 2; for istree: the number of hubs)")
    p.add_argument("--table", action="store_true", help="print the complexity for every n = 1..N")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.set_defaults(func=run)


def make_problem(task: str, n: int, alphabet: int):
    """The :class:`lowerbounds.cc.CommProblem` of ``task`` at length n."""
    from lowerbounds import cc, reductions

    from .tasks import ar, cgram, counting, index, istree
    if task == "index":
        return cc.index_split(n, index.reference, alphabet=alphabet)
    if task == "ar":
        return cc.ar_split(n, ar.reference, alphabet=alphabet)
    if task == "cgram":
        return cc.cgram_split(n, cgram.reference, c=3, alphabet=alphabet)
    if task == "counting":
        return cc.counting_split(n, counting.reference, alphabet=alphabet)
    if task == "istree":
        return cc.istree_split(n, partial(istree.reference, n_nodes=reductions.istree_vertex_count(n, alphabet)),
                               hubs=alphabet)
    raise ValueError(task)


def run(args) -> int:
    from lowerbounds import cc

    from .cli import UsageError
    task = str(args.task).lower()
    if task not in TASKS:
        raise UsageError(f"cc: unknown task {args.task!r}; known: {', '.join(TASKS)}")
    if args.n < 1:
        raise UsageError(f"cc: --n must be >= 1, got {args.n}")
    alphabet = 2 if args.alphabet is None else args.alphabet
    if alphabet < (2 if task == "istree" else 1):
        raise UsageError(f"cc: --alphabet must be >= {2 if task == 'istree' else 1}, got {alphabet}")
    ns = list(range(1, args.n + 1)) if args.table else [args.n]
    results = []
    for n in ns:
        try:
            results.append(cc.one_way_complexity(make_problem(task, n, alphabet)))
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
        try:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
        except OSError as e:
            raise UsageError(f"cannot write {args.json}: {e.strerror}") from None
    return 0
