"""``rnngap certify [--only CLAIM ...] [--json PATH] [--explain NAME] [--full] [--workers N] [--engine E]``:
every construction's certificate (checks/certify/run.py, docs/certify.md). Where a
construction has a whole-model plan, the certificate is about the model its
builder builds: every layer proved on every instance of its task, for every n
(source ``built-model``); elsewhere its declared obligations are checked for every
n up to the storage limit (source ``declared-obligation``); the simulators' heads
are proved from the built simulators (row ``rnnsim-transformer[layers]``).
Prints a table; exits 1 if anything fails, naming the layer or obligation.
``--explain NAME`` prints one construction's proof chain instead."""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

from rnngap.checks.cli.main import add_engine_arguments, engine_workers
from rnngap.checks.io.errors import UsageError, check_outputs, worker_arg
from rnngap.checks.io.progress import Bar

# Lazy imports: the functions below import rnngap's heavier modules
# (checks.certify, the catalog, the engines)
# only when the command runs, so that `rnngap --help` stays fast.


EXAMPLES = """examples:
  rnngap certify --only index-transformer         # its two certificates, about 10 s
  rnngap certify --explain 'index-transformer[a=2]'   # what is proved, fact by fact
"""


def add_command(sub) -> None:
    p = sub.add_parser("certify", help="certify every construction (the built models, every layer, every n)",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="claim ids (T4.6-up, ...), construction names (`rnngap show --list`) or certificate "
                        "names (index-transformer[a=2]) to certify")
    p.add_argument("--explain", metavar="NAME",
                   help="print the proof chain of a construction (all its certificates) or of one certificate, "
                        "layer by layer")
    p.add_argument("--json", metavar="PATH", help="write one record per construction as JSON")
    p.add_argument("--full", action="store_true",
                   help="also the slow certificates (c-gram c = 4 at the registry's alphabet, about 35 s more) and "
                        "the IsTree Transformer's and hybrid's layers at many more sizes, and both IsTree models' "
                        "compositions over their CoT (minutes: docs/certify.md)")
    p.add_argument("--workers", type=worker_arg, metavar="N", default=None,
                   help="processes certifying the construction records at once (default: the cores this process may "
                        "run on; at most 4 x the cores); with --engine dask: the local cluster's")
    add_engine_arguments(p)
    p.set_defaults(func=run)


def _rows() -> list[str]:
    """The certificates that are no construction record's (checks/certify/run.py)."""
    from rnngap.checks.certify.istree_transformer import NAME as DFS_LAYERS
    from rnngap.checks.certify.istree_hybrid import NAME as ISTREE_LAYERS
    from rnngap.checks.certify.simulator import NAME as SIM_HEADS
    return [SIM_HEADS, DFS_LAYERS, ISTREE_LAYERS]


def resolve(names: list[str], certs: dict, what: str) -> list[str]:
    """Claim ids and certificate names as given; a construction name becomes its
    certificates' names. An unknown name is a UsageError naming the three closest."""
    from rnngap.checks.catalog.records import closest, named_by, names as construction_names
    claims = {c.claim for c in certs.values()} | {"sim", "machine"}     # sim: the registry's RNNs
    rows = _rows()
    out = []
    for o in names:
        if o in claims or o in rows:
            out.append(o)
        elif named_by(o, [*certs, *rows]):       # a construction's name: all its certificates
            out += named_by(o, [*certs, *rows])
        elif o in construction_names():
            out.append(o)              # a construction without a certificate: nothing to run
        else:
            near = closest(o, [*construction_names(), *sorted(claims), *certs, *rows])
            raise UsageError(f"{what}: unknown claim or construction {o!r}; closest: {', '.join(near)}")
    return out


def _explain(name: str, certs: dict) -> int:
    from rnngap.checks.catalog.records import by_name
    from rnngap.checks.certify.run import certify, explain
    targets = resolve([name], certs, "--explain")
    rows = _rows()
    targets = [t for t in targets if t in certs or t in rows]
    if not targets:
        why = by_name(name).uncertified or "its record declares no certificate"
        print(f"{name}: no certificate: {why}")
        return 0
    bad = 0
    for t in targets:
        res = certify([t], facts=t in rows)[0]
        bad += not res.certified
        print(explain(res))
        print()
    return 1 if bad else 0


def run(args) -> int:
    from rnngap.checks.certify.run import certify, chosen_certificates, table, write_json
    from rnngap.checks.catalog.records import certificates

    check_outputs({"--json": getattr(args, "json", None)}, what="certify")   # before any work

    certs = certificates()
    only = resolve(args.only, certs, "--only") if args.only else None
    name = getattr(args, "explain", None)
    if name is not None:
        resolve([name], certs, "--explain")        # an unknown name: exit 2 before any work
    from rnngap.checks.verify.engine import default_workers
    run_on = SimpleNamespace(workers=getattr(args, "workers", None), engine=getattr(args, "engine", "local"),
                             address=getattr(args, "address", None))    # a Namespace made by hand lacks them
    workers = engine_workers(run_on, "certify", default_workers)
    t0 = time.perf_counter()
    if name is not None:
        return _explain(name, certs)
    if only is not None and not only:
        print("no certificate to run")
        return 0
    full = bool(getattr(args, "full", False))
    from rnngap.checks.verify.engine import SchedulerUnreachable
    try:
        with Bar("certifying", quiet=bool(getattr(args, "quiet", False))) as tick:
            results = certify(only, workers=workers, full=full, every_n=full, progress=tick,
                              engine=run_on.engine, address=run_on.address)
    except SchedulerUnreachable as e:
        raise UsageError(f"certify: {e}") from None
    print(table(results))
    _, slow = chosen_certificates(only, full=full)
    if slow:
        print(f"not run (slow; `rnngap certify --full`, or name it in --only): "
              f"{', '.join(c.name for c in slow)}")
    bad = [r for r in results if not r.certified]
    print(f"{len(results)} certificates, {len(bad)} failed, {time.perf_counter() - t0:.1f} s")
    if getattr(args, "json", None):
        write_json(results, args.json)
    return 1 if bad else 0
