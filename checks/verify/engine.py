"""The parallel engines of ``rnngap verify``: a pool of local worker processes
(:func:`run_local`, the default on a machine with more than one core) and Dask
(``--engine dask``, :func:`run`); the serial engine, :func:`checks.verify.registry.run`,
is the reference (``--workers 1``). Both parallel engines are :func:`_run_on`
over a client that submits parts: a ``distributed.Client``, or :class:`PoolClient`
over a ``concurrent.futures`` process pool; what follows holds for both.

Details: docs/internals/commands.md#engine.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import multiprocessing
import os
import uuid
from pathlib import Path
from typing import Callable, Iterable

import numba

from rnngap.checks.io.errors import UsageError, atomic_output
from rnngap.constructions.machine.runtime import START_AFFINITY, announce_cache, unpin, worker_init
from rnngap.constructions.models.warmup import GROUPS, warm

from . import registry
from .registry import Record, Task

INSTALL_HINT = "pip install 'rnngap[dask]'"


class DaskUnavailable(RuntimeError):
    """``distributed`` is not installed."""


class SchedulerUnreachable(RuntimeError):
    """No scheduler answered at ``--address``."""


def require_distributed():
    """Import ``distributed`` or raise :class:`DaskUnavailable` naming the install command."""
    try:
        import distributed  # noqa: F401  (optional: the dask extra)
    except ImportError as e:
        raise DaskUnavailable(f"--engine dask needs the 'distributed' package ({e}); install it with "
                              f"{INSTALL_HINT}") from None
    return distributed


def _config():
    import dask
    return dask.config.set({"distributed.scheduler.worker-ttl": None,
                            # no dashboard server, no "event loop unresponsive" chatter while a
                            # numba kernel holds the GIL
                            "distributed.admin.tick.limit": "1 day",
                            "distributed.worker.profile.enabled": False})


def run(profile: str = "quick", only: Iterable[str] | None = None, seed: int = 0, *,
        address: str | None = None, workers: int = 2,
        progress: Callable[[Task, int, int], None] | None = None,
        client=None, connect_timeout: str = "20s") -> list[Record]:
    """Run the registry on Dask: on the scheduler at ``address``, or on a fresh
    ``LocalCluster`` of ``workers`` processes (one thread each) closed at the end
    (also on error and Ctrl-C), or on an existing ``client``. ``progress(task,
    done, total)`` is called as each part finishes. Returns the same records, in
    the same order, as :func:`checks.verify.registry.run`."""
    plan = registry.plan(profile, only)            # validates profile and claims before any cluster starts
    require_distributed()
    if client is not None:
        return _run_on(client, plan, profile, seed, progress)
    with dask_client(workers, address, connect_timeout) as c:
        return _run_on(c, plan, profile, seed, progress)


@contextlib.contextmanager
def dask_client(workers: int = 2, address: str | None = None, connect_timeout: str = "20s"):
    """A ``distributed.Client``: of the scheduler at ``address``, or of a fresh
    ``LocalCluster`` of ``workers`` processes (one thread each, on the cores this
    process had at import), closed at the end (also on error and Ctrl-C)."""
    distributed = require_distributed()
    with _config():
        if address is not None:
            try:
                c = distributed.Client(address, timeout=connect_timeout)
            except (OSError, TimeoutError) as e:
                raise SchedulerUnreachable(f"no Dask scheduler answered at {address} within {connect_timeout} "
                                           f"({type(e).__name__})") from None
            with c:
                yield c
            return
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        cluster = _start_local_cluster(distributed, workers)
        with cluster, distributed.Client(cluster) as c:
            unpin_workers(c, workers)
            yield c


def completed(client, futures):
    """The futures of ``client`` (a :class:`PoolClient` or a ``distributed.Client``)
    in the order they finish."""
    if isinstance(client, PoolClient):
        return client.as_completed(futures)
    from distributed import as_completed  # optional: the dask extra (require_distributed)
    return as_completed(futures)


def unpin_workers(client, workers: int) -> None:
    """Wait for the ``workers`` of a local cluster and let each run on the cores this
    process had at import (:data:`constructions.START_AFFINITY`), not on a core
    this process was pinned to since (they inherit it when spawned)."""
    client.wait_for_workers(workers)
    client.run(unpin, sorted(START_AFFINITY))


def _is_worker(proc) -> bool:
    """A spawned worker process (not multiprocessing's resource tracker, which ends by itself)."""
    try:
        return "spawn_main" in " ".join(proc.cmdline())
    except Exception:
        return False


def _start_local_cluster(distributed, workers: int):
    """A LocalCluster of ``workers`` processes; interrupted (Ctrl-C) or failing while
    it starts, the worker processes it already spawned are killed (by pid: the new
    children of this process) and the half-built cluster is not closed again at exit."""
    import psutil  # optional: installed with distributed (the dask extra), not by rnngap

    me = psutil.Process()
    before = {q.pid for q in me.children(recursive=True)}
    try:
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        dashboard_address=None, silence_logs=logging.ERROR)
    except BaseException:
        new = [q for q in me.children(recursive=True) if q.pid not in before and _is_worker(q)]
        for q in new:
            try:
                q.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(new, timeout=10)
        from distributed.deploy.spec import SpecCluster
        for c in list(SpecCluster._instances):      # half-built: nothing left to shut down at exit
            c.shutdown_on_close = False
        raise


class PoolClient:
    """A pool of ``workers`` spawned processes (one part at a time each) with the
    submission interface :func:`_run_on` uses. The parts are started in the order
    they are submitted; :func:`_run_on` submits the costliest first. Closing it
    (also on error, Ctrl-C or SIGTERM: any exception) cancels the parts not
    started and ends the worker processes, so nothing outlives the run."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        announce_cache()            # the numba cache note, if any, once: here, not in every worker
        # spawn, not fork: the parent may run threads (the progress bar); each worker
        # runs on the cores the parent had at import, not on a core it was pinned to since
        self._before = set(multiprocessing.active_children())
        self.workers = workers
        self.pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=worker_init, initargs=(sorted(START_AFFINITY), os.getpid()))

    def submit(self, fn, *args, pure=False, key=None, priority=0):
        return self.pool.submit(fn, *args)

    @staticmethod
    def as_completed(futures):
        return concurrent.futures.as_completed(futures)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None:
            self.pool.shutdown(wait=True)
            return False
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        # and any process the pool started that its table no longer (or not yet) lists
        procs += [q for q in multiprocessing.active_children() if q not in self._before and q not in procs]
        for q in procs:
            if q.is_alive():
                q.kill()
        for q in procs:
            q.join(timeout=10)
        return False


def run_local(profile: str = "quick", only: Iterable[str] | None = None, seed: int = 0, *, workers: int = 2,
              progress: Callable[[Task, int, int], None] | None = None) -> list[Record]:
    """Run the registry on ``workers`` local processes (:class:`PoolClient`): the
    same records, in the same order, as :func:`checks.verify.registry.run`."""
    plan = registry.plan(profile, only)
    with PoolClient(workers) as c:
        return _run_on(c, plan, profile, seed, progress, warm=only is None)


def default_workers() -> int:
    """The cores this process could run on when rnngap was imported
    (:data:`constructions.START_AFFINITY`)."""
    return max(1, len(START_AFFINITY))


def run_plan(client, plan: list, profile: str, seed: int, progress=None) -> list[Record]:
    """Run an explicit plan ((check, part keys) pairs, :func:`checks.verify.registry.plan`)
    on ``client``; the records of :func:`checks.verify.registry.run_plan` on the same plan."""
    return _run_on(client, plan, profile, seed, progress)


def _priority(t: Task) -> int:
    """A part's cost hint (its check's ``cost``), 0 without one: the costliest parts start first."""
    return int(t.check.cost(t.part)) if t.check.cost is not None and t.part is not None else 0


def part_key(t: Task) -> str:
    """A part's name in the history file: claim, check name and part."""
    return f"{t.check.claim}\t{t.check.name}\t{t.part!r}"


def history_file(profile: str) -> Path | None:
    """``rnngap-part-seconds-<profile>.json`` in numba's cache folder (None when
    kernels are compiled in memory: no cache folder)."""
    folder = numba.config.CACHE_DIR              # chosen by constructions.machine.runtime (imported above)
    return Path(folder) / f"rnngap-part-seconds-{profile}.json" if folder else None


def load_history(profile: str) -> dict[str, float]:
    """The recorded seconds per part ({} if there is no readable file)."""
    path = history_file(profile)
    try:
        data = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))} \
        if isinstance(data, dict) else {}


def save_history(profile: str, seconds: dict[str, float]) -> None:
    """Merge ``seconds`` into the file (written whole, then renamed: never half a
    file); a folder that cannot be written is left alone (the order is only a hint)."""
    path = history_file(profile)
    if path is None:
        return
    data = {**load_history(profile), **seconds}
    try:
        with atomic_output(str(path), what="rnngap verify") as fh:
            json.dump(data, fh, indent=0, sort_keys=True)
    except (UsageError, OSError):
        pass


def order(tasks: list, history: dict[str, float]) -> list:
    """``tasks`` ((ci, pi, Task) triples) in the order they start: parts with no
    recorded seconds first (by cost hint, costliest first), then the others
    longest first; ties keep registry order."""
    def key(x):
        k = part_key(x[2])
        return (k in history, -history.get(k, 0.0), -_priority(x[2]))
    return sorted(tasks, key=key)


def _warm_up(client, profile: str) -> list:
    """On the local pool with two or more workers and a numba cache folder: one
    :func:`constructions.models.warmup.warm` task per kernel group, submitted before any
    part, so the first workers compile different kernels at the same time (on an
    empty cache) instead of the same ones; the parts then load them from the cache.
    The futures (their results are only seconds). Nothing on Dask (its workers
    may not share a cache folder) or without a cache folder. :func:`run_local`
    asks for it on a run of the whole registry only (``--only`` may select checks
    that call none of these kernels; a cold warm-up would compile them for nothing).

    What it does not cover: with more than two workers the others start parts at
    once (and may compile the same kernels); the worker that finishes the shorter
    group starts the costliest part, which may need the other group's kernels
    before they are cached; both groups build a small model, so the readout
    table kernel (~3 s) compiles in both."""
    if not isinstance(client, PoolClient) or client.workers < 2 or history_file(profile) is None:
        return []
    return [client.submit(warm, g) for g in range(min(client.workers, len(GROUPS)))]


def _run_on(client, plan, profile: str, seed: int, progress, warm: bool = False) -> list[Record]:
    tasks = [(ci, pi, Task(chk, part)) for ci, (chk, parts) in enumerate(plan) for pi, part in enumerate(parts)]
    tasks = order(tasks, load_history(profile))
    run_id = uuid.uuid4().hex[:12]
    warming = _warm_up(client, profile) if warm else []
    futures = {}
    for rank, (ci, pi, t) in enumerate(tasks):
        # pure=False: a rerun is always computed again; the key names the part (unique per run)
        f = client.submit(registry.run_part, t.check.fn, profile, seed, t.part, t.check.parts is not None,
                          pure=False, key=f"rnngap-part-{ci}-{pi}-{run_id}", priority=len(tasks) - rank)
        futures[f] = (ci, pi, t)
    results: dict[tuple[int, int], registry.PartResult] = {}
    try:
        for done, f in enumerate(completed(client, list(futures)), start=1):
            ci, pi, t = futures[f]
            try:
                results[(ci, pi)] = f.result()
            except Exception as e:   # the task itself failed on the cluster (e.g. KilledWorker:
                # its workers died allowed-failures times): a failed part, reported as a row
                results[(ci, pi)] = registry.PartResult(None, f"on the cluster: {type(e).__name__}: {e}", 0.0)
            if progress:
                progress(t, done, len(tasks))
    finally:
        for f in futures:
            if not f.done():
                f.cancel()
    for f in warming:
        # a warm-up that raised loses only the compile split (the parts compiled what
        # they needed); one still running is not waited for. A worker process that
        # dies in it breaks the pool as a part would (its parts become FAIL rows).
        if f.done() and not f.cancelled() and f.exception() is not None:
            logging.getLogger(__name__).warning("kernel warm-up failed: %s: %s", type(f.exception()).__name__,
                                                f.exception())
    save_history(profile, {part_key(futures[f][2]): results[futures[f][:2]].history_seconds for f in futures})
    out: list[Record] = []
    for ci, (chk, parts) in enumerate(plan):
        out.extend(registry.assemble(chk, profile, seed, parts, [results[(ci, pi)] for pi in range(len(parts))]))
    return out
