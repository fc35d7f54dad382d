"""``rnngap certify [--only CLAIM ...] [--json PATH] [--explain NAME]``:
every construction's certificate (checks/certify.py, docs/certify.md). Where a
construction has a whole-model plan, the certificate is about the model its
builder builds: every layer proved on every instance of its task, for every n
(source ``built-model``); elsewhere its declared obligations are checked for every
n up to the int64 limit (source ``declared-obligation``) and a few per-position
facts restated next to the builders are proved (source ``restated-formula``).
Prints a table; exits 1 if anything fails, naming the layer or obligation.
``--explain NAME`` prints one construction's proof chain instead."""
from __future__ import annotations


def add_command(sub) -> None:
    p = sub.add_parser("certify", help="certify every construction (the built models, every layer, every n)")
    p.add_argument("--only", nargs="+", metavar="CLAIM", help="claims (or construction names) to certify")
    p.add_argument("--explain", metavar="NAME", help="print one construction's proof chain, layer by layer")
    p.add_argument("--json", metavar="PATH", help="write one record per construction as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    import time

    from .certify import certify, explain, table, write_json
    from .errors import UsageError, check_outputs
    from .catalog import certificates

    check_outputs({"--json": getattr(args, "json", None)}, what="certify")   # before any work

    certs = certificates()
    claims = {c.claim for c in certs.values()} | {"sim", "machine"}  # sim: the registry's RNNs
    known = claims | set(certs)
    for o in args.only or []:
        if o not in known:
            raise UsageError(f"unknown claim or construction {o!r}; known claims: {', '.join(sorted(claims))}")
    name = getattr(args, "explain", None)
    if name is not None and name not in certs:
        raise UsageError(f"--explain: unknown construction {name!r}; known: {', '.join(certs)}")
    t0 = time.perf_counter()
    if name is not None:
        results = certify([name], facts=False)
        print(explain(results[0]))
    else:
        results = certify(args.only)
        print(table(results))
    bad = [r for r in results if not r.certified]
    print(f"{len(results)} certificates, {len(bad)} failed, {time.perf_counter() - t0:.1f} s")
    if getattr(args, "json", None):
        write_json(results, args.json)
    return 1 if bad else 0
