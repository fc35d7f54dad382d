"""``rnngap certify [--only CLAIM ...] [--json PATH] [--explain NAME] [--full] [--workers N]``:
every construction's certificate (checks/certify.py, docs/certify.md). Where a
construction has a whole-model plan, the certificate is about the model its
builder builds: every layer proved on every instance of its task, for every n
(source ``built-model``); elsewhere its declared obligations are checked for every
n up to the storage limit (source ``declared-obligation``); the simulators' heads
are proved from the built simulators (row ``sim: token types, heads and RNN layers (built)``).
Prints a table; exits 1 if anything fails, naming the layer or obligation.
``--explain NAME`` prints one construction's proof chain instead."""
from __future__ import annotations


def add_command(sub) -> None:
    p = sub.add_parser("certify", help="certify every construction (the built models, every layer, every n)")
    p.add_argument("--only", nargs="+", metavar="CLAIM", help="claims (or construction names) to certify")
    p.add_argument("--explain", metavar="NAME", help="print one construction's proof chain, layer by layer")
    p.add_argument("--json", metavar="PATH", help="write one record per construction as JSON")
    p.add_argument("--full", action="store_true",
                   help="also the slow certificates (c-gram c = 4 at the registry's alphabet, about 35 s more) and "
                        "the IsTree Transformer's and hybrid's layers at many more sizes, and both IsTree models' "
                        "compositions over their CoT (minutes: docs/certify.md)")
    p.add_argument("--workers", type=int, metavar="N", default=None,
                   help="processes certifying the construction records at once (default: the cores this "
                        "process may run on)")
    p.set_defaults(func=run)


def run(args) -> int:
    import time

    from .certify import certify, chosen_certificates, explain, table, write_json
    from .certify_dfs import NAME as DFS_LAYERS
    from .certify_istree import NAME as ISTREE_LAYERS
    from .certify_sim import NAME as SIM_HEADS
    from .errors import UsageError, check_outputs
    from .catalog import certificates

    check_outputs({"--json": getattr(args, "json", None)}, what="certify")   # before any work

    certs = certificates()
    claims = {c.claim for c in certs.values()} | {"sim", "machine"}  # sim: the registry's RNNs
    rows = [SIM_HEADS, DFS_LAYERS, ISTREE_LAYERS]       # certificates that are no construction record's
    known = claims | set(certs) | set(rows)
    for o in args.only or []:
        if o not in known:
            raise UsageError(f"unknown claim or construction {o!r}; known claims: {', '.join(sorted(claims))}")
    name = getattr(args, "explain", None)
    if name is not None and name not in certs and name not in rows:
        raise UsageError(f"--explain: unknown construction {name!r}; known: {', '.join([*certs, *rows])}")
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    if workers is None:
        from .engine import default_workers
        workers = default_workers()
    t0 = time.perf_counter()
    if name is not None:
        results = certify([name], facts=name in rows)
        print(explain(results[0]))
    else:
        full = bool(getattr(args, "full", False))
        results = certify(args.only, workers=workers, full=full, every_n=full)
        print(table(results))
        _, slow = chosen_certificates(args.only, full=full)
        if slow:
            print(f"not run (slow; `rnngap certify --full`, or name it in --only): "
                  f"{', '.join(c.name for c in slow)}")
    bad = [r for r in results if not r.certified]
    print(f"{len(results)} certificates, {len(bad)} failed, {time.perf_counter() - t0:.1f} s")
    if getattr(args, "json", None):
        write_json(results, args.json)
    return 1 if bad else 0
