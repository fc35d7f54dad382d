"""The ``rnngap`` command line: the parser, the ``verify`` command and the exit codes.

Every subcommand but ``verify`` lives in a ``checks/cli/cmd_*.py`` module that adds
its parser. Exit codes: 0 passed, 1 a check failed, 2 bad usage or input (one
line on stderr, before any work), 3 a record NOT CHECKED, 130 / 143 Ctrl-C /
SIGTERM (no partial output file), 141 stdout closed early. Details (engines,
outputs): docs/internals/commands.md#cli and docs/running.md.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import io
import json
import os
import pkgutil
import re
import signal
import sys
import threading
import time


from rnngap.checks.io.errors import (
    Terminated, UsageError, os_reason, atomic_output, check_outputs, one_line, shown, worker_arg, worker_count,
)
from rnngap.checks.io.shared_data import SharedDataError, shared_data_dir

from . import __path__ as package_path

# Lazy imports: the functions below import rnngap.checks.verify (the claim registry and
# its engines, which load the tasks and constructions) and rich only when a command runs,
# so that `rnngap --help` stays fast.


WORKERS_ENV = "RNNGAP_VERIFY_WORKERS"
"""Overrides the default of ``verify --workers`` (the test suite sets it to 1)."""


def default_workers() -> int:
    """``verify --workers`` when not given: $RNNGAP_VERIFY_WORKERS (ASCII digits,
    1..4 x the cores), else every core this process may run on."""
    from rnngap.checks.verify.engine import default_workers as cores
    v = os.environ.get(WORKERS_ENV, "").strip()
    if v:
        return worker_count(v, f"verify: ${WORKERS_ENV}")
    return cores()


def _valid_address(addr: str) -> bool:
    """``tcp://HOST:PORT`` (or tls://, ucx://) with a port in 1..65535."""
    m = re.fullmatch(r"(tcp|tls|ucx)://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})", addr)
    return bool(m) and 1 <= int(m.group(3)) <= 65535


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line, exit 2
        self.exit(2, f"rnngap: {one_line(message)}\n")


def _verify(args) -> int:
    from rnngap.checks.verify import registry

    only, keep, workers = _verify_arguments(args)
    t0 = time.perf_counter()
    records = _verify_records(args, only, workers)
    from rnngap.checks.verify.report import report
    if keep is not None:
        records = [r for r in records if keep(r)]
    unchecked = registry.unchecked_claims(only)
    report(records, unchecked, args, time.perf_counter() - t0)
    failed = [r for r in records if r.checked and not r.passed]
    skipped = [r for r in records if not r.checked]
    if args.json:
        with atomic_output(args.json, what="verify --json") as fh:
            json.dump([r.as_json(seed=args.seed, profile=args.profile) for r in records], fh, indent=1)
    if failed:
        return 1
    if (skipped or unchecked) and not args.allow_missing_data:
        for r in skipped:
            print(f"rnngap: NOT CHECKED {r.claim} {r.model} {r.task} {r.description}: {r.note}", file=sys.stderr)
        print("rnngap: some records were NOT CHECKED (exit 3); --allow-missing-data accepts that",
              file=sys.stderr)
        return 3
    return 0


def _verify_arguments(args) -> tuple:
    """(the claims chosen, the record filter, the worker count) of ``verify``'s
    arguments, every one checked before anything runs: a bad --json path must
    not cost a whole run to find out."""
    if args.seed < 0:
        raise UsageError(f"verify: --seed must be >= 0, got {args.seed}")
    check_outputs({"--json": args.json}, what="verify")
    try:
        shared_data_dir()          # a set but missing RNNGAP_SHARED_DATA is an error, not a fallback
    except SharedDataError as e:
        raise UsageError(f"verify: {e}") from None
    from rnngap.checks.verify.select import select
    only, keep = select(args.only) if args.only else (None, None)
    return only, keep, engine_workers(args, "verify", default_workers)


def engine_workers(args, what: str, default) -> int:
    """The worker count of a command run on ``args.engine`` (``--engine``,
    ``--address``, ``--workers``), every combination checked: ``default()`` when
    --workers is absent, 1 for the serial engine."""
    if args.engine != "dask" and args.address is not None:
        raise UsageError(f"{what}: --address needs --engine dask")
    if args.address is not None and args.workers is not None:
        raise UsageError(f"{what}: give --address (an existing scheduler) or --workers (a local cluster), not both")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"{what}: --workers must be >= 1, got {args.workers}")
    if args.engine == "serial" and args.workers not in (None, 1):
        raise UsageError(f"{what}: --engine serial runs in this process: --workers must be 1 or absent")
    workers = 1 if args.engine == "serial" else args.workers if args.workers is not None else default()
    if args.address is not None and not _valid_address(args.address):
        raise UsageError(f"{what}: --address must look like tcp://HOST:PORT, got {args.address!r}")
    if args.engine == "dask":
        from rnngap.checks.verify.engine import DaskUnavailable, require_distributed
        try:
            require_distributed()
        except DaskUnavailable as e:
            raise UsageError(f"{what}: {e}") from None
    return workers


def add_engine_arguments(parser) -> None:
    """``--engine`` and ``--address``, as ``verify`` and ``certify`` take them."""
    parser.add_argument("--engine", choices=("local", "serial", "dask"), default="local",
                        help="local (default: --workers processes on this machine; 1 is the serial engine), "
                             "serial (the reference, in this process) or dask (Dask distributed; "
                             "pip install 'rnngap[dask]')")
    parser.add_argument("--address", metavar="tcp://HOST:PORT",
                        help="--engine dask: the scheduler to use (workers started with `dask worker`)")


def _verify_records(args, only, workers: int) -> list:
    """The records of ``verify``'s run on its engine, with a progress bar on a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from rnngap.checks.verify import registry
    console = Console(stderr=True)
    plan = registry.plan(args.profile, only)
    n_parts = sum(len(parts) for _, parts in plan)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=args.quiet or not console.is_terminal) as bar:
        task = bar.add_task("verifying", total=n_parts)

        def finished(t, done, total):
            bar.update(task, completed=done, description=f"done {t.label}"[:60])
        if args.engine == "dask":
            from rnngap.checks.verify import engine
            try:
                return engine.run(args.profile, only, args.seed, address=args.address,
                                  workers=workers, progress=finished)
            except engine.SchedulerUnreachable as e:
                raise UsageError(f"verify: {e}") from None
        if workers > 1:
            from rnngap.checks.verify import engine
            return engine.run_local(args.profile, only, args.seed, workers=workers, progress=finished)
        started = []

        def progress(t):
            if started:
                bar.advance(task)
            started.append(t)
            bar.update(task, description=t.label[:60])
        records = registry.run(args.profile, only, args.seed, progress)
        bar.advance(task)
        return records


VERIFY_EXAMPLES = """examples:
  rnngap verify --only index-transformer     # the Index Transformer's rows (T4.6-up, on the reduction)
  rnngap verify --profile quick --json records.json --records
"""


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rnngap", description="Executable checks of 'RNNs are not Transformers (Yet)'.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    v = sub.add_parser("verify", help="check every claim on instances, against the plain-Python references",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=VERIFY_EXAMPLES)
    v.add_argument("--profile", choices=("quick", "full"), default="quick",
                   help="quick (default: minutes on 2 cores) or full (larger n and exhaustive sizes; hours)")
    v.add_argument("--only", nargs="+", metavar="NAME",
                   help="claim ids (T4.6-up, ...) or construction names (`rnngap show --list`) to run "
                        "(default: all)")
    v.add_argument("--json", metavar="PATH",
                   help="also write the records as JSON (every field; 'seconds' is wall-clock time, the one field "
                        "that differs between two runs, e.g. serial and dask)")
    v.add_argument("--seed", type=int, default=0, help="seed of the checked instances (>= 0)")
    v.add_argument("--notes", action="store_true",
                   help="print every record's note (measured constants, witnesses), not only the failures'")
    v.add_argument("--records", action="store_true",
                   help="print the table of every record (default: one line per claim, and the failing records)")
    v.add_argument("--quiet", action="store_true", help="no progress bar and only the closing line")
    v.add_argument("--allow-missing-data", action="store_true",
                   help="exit 0 (not 3) when records are NOT CHECKED because their data is missing")
    add_engine_arguments(v)
    v.add_argument("--workers", type=worker_arg, metavar="K",
                   help="worker processes on this machine (default: every core, or $RNNGAP_VERIFY_WORKERS; "
                        "1: the serial engine, in this process); with --engine dask: the local cluster's; "
                        "at most 4 x the cores")
    v.set_defaults(func=_verify)
    # further commands: every checks/cli/cmd_*.py module defines add_command(subparsers),
    # which adds its parser with set_defaults(func=run) (run returns the exit code
    # and raises UsageError for bad input)
    for mod in sorted(m.name for m in pkgutil.iter_modules(package_path)):
        if mod.startswith("cmd_"):
            importlib.import_module(f"{__package__}.{mod}").add_command(sub)
    return p


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so that Python's final flush of a closed or full
    stdout raises nothing at interpreter exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _flush_stdout() -> OSError | None:
    """Flush stdout; the OSError if it fails (stdout full or closed)."""
    try:
        sys.stdout.flush()
    except OSError as e:
        _silence_stdout()
        return e
    return None


def _reopen_closed_streams() -> bool:
    """A closed stdout or stderr (``>&-``: Python has None there) becomes /dev/null,
    so nothing raises on writing; True if stdout was closed (exit 141 then)."""
    closed = sys.stdout is None
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))
    return closed


def _on_sigterm(signum, frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    """The ``rnngap`` entry point: the exit code (README, "Errors and exit codes").

    Around the command: SIGTERM and SIGHUP become :class:`checks.io.errors.Terminated` (exit 143 / 129,
    every temporary file removed on the way out, like Ctrl-C's 130), every
    OSError of a path is one line and exit 2, a full stdout one line on stderr
    and exit 2, a closed one 141; every message is one line of bounded length
    (:func:`checks.io.errors.one_line`)."""
    closed = _reopen_closed_streams()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):     # a hang-up ends the run the same way
            if sig is None:
                continue
            try:
                previous[sig] = signal.signal(sig, _on_sigterm)
            except (ValueError, OSError):
                pass
    try:
        rc = _main(argv)
        if closed:
            return rc if rc else 141          # stdout was closed from the start: its output is lost
        failed = _flush_stdout()
        if isinstance(failed, BrokenPipeError):
            return 141
        if failed is not None:
            print(f"rnngap: cannot write stdout: {failed.strerror or failed}", file=sys.stderr)
            return 2
        return rc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        return args.func(args)
    except KeyboardInterrupt:
        # Ctrl-C: one line, exit 130 (128 + SIGINT); atomic_output has already
        # removed any half-written output
        print("rnngap: interrupted", file=sys.stderr)
        return 130
    except Terminated as e:
        signum = e.args[0] if e.args else signal.SIGTERM
        hup = signum == getattr(signal, "SIGHUP", None)
        try:
            print(f"rnngap: {'hung up' if hup else 'terminated'}", file=sys.stderr)
        except OSError:                              # the terminal that hung up may be gone
            pass
        return 128 + int(signum)                     # 143 for SIGTERM, 129 for SIGHUP
    except UsageError as e:
        print(f"rnngap: {one_line(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # stdout closed early (e.g. `rnngap show ar-transformer | head`): no traceback, and
        # none at interpreter exit either when Python flushes stdout again
        _silence_stdout()
        return 141  # what a shell reports for a process ended by SIGPIPE (128 + 13)
    except OSError as e:
        # any other error of a path (a FIFO with no writer, a name too long, a symlink
        # loop, a full stdout...): one line, exit 2
        if e.filename is not None:
            print(one_line(f"rnngap: cannot read {shown(e.filename)}: {os_reason(e)}"), file=sys.stderr)
        elif _flush_stdout() is not None or e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            # an unnamed write error: stdout (every file goes through Outputs, which names its path)
            _silence_stdout()
            print(one_line(f"rnngap: cannot write stdout: {os_reason(e)}"), file=sys.stderr)
        else:
            print(one_line(f"rnngap: {os_reason(e)}"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
