"""``rnngap certify [--only CLAIM ...] [--json PATH]``: every proof obligation of
every construction (and of the registry's simulators, claim sim), certified
for every n up to the int64 limit, and the per-position facts of the T4.6-up
heads and the simulator's heads proved for all n (checks/certify.py,
docs/certify.md). Prints a table (claim, construction, obligations, n range,
method, declared parameter count, seconds); exits 1 if any obligation fails,
naming it and the first n."""
from __future__ import annotations


def add_command(sub) -> None:
    p = sub.add_parser("certify", help="certify every construction's obligations for every n")
    p.add_argument("--only", nargs="+", metavar="CLAIM", help="claims (or construction names) to certify")
    p.add_argument("--json", metavar="PATH", help="write one record per construction as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    import time

    from .certify import certify, table, write_json
    from .errors import UsageError, check_outputs
    from rnngap.constructions.obligations import CONSTRUCTIONS

    check_outputs({"--json": args.json}, what="certify")   # before any work

    claims = {c.claim for c in CONSTRUCTIONS.values()} | {"sim"}     # sim: built from the registry's RNNs
    known = claims | set(CONSTRUCTIONS)
    for o in args.only or []:
        if o not in known:
            raise UsageError(f"unknown claim or construction {o!r}; known claims: {', '.join(sorted(claims))}")
    t0 = time.perf_counter()
    results = certify(args.only)
    print(table(results))
    bad = [r for r in results if not r.certified]
    print(f"{len(results)} certificates, {len(bad)} failed, {time.perf_counter() - t0:.1f} s")
    if args.json:
        write_json(results, args.json)
    return 1 if bad else 0
