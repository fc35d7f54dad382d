"""The Dask engine against the serial engine (``rnngap verify --engine dask``).

* :func:`dask_speedup`: a FIXED set of full-profile parts (the T5.6 hybrids'
  easy-family rows: seeded samples at n = 4096, 1024 and 256 and every instance at the
  largest exhaustive n, for Index, AR, c-gram and Counting; about 1-2 minutes
  serially on this project's 2-core machine, no part above a fifth of the
  total), run serially in this process, then on a fresh LocalCluster of
  ``workers`` processes. The records must be identical (``seconds`` aside).
  Reported: ``serial_seconds``, ``dask_seconds`` (the parts on the cluster, the
  workers warmed up first like the serial process: imports and compiled kernels
  loaded), ``cluster_start_seconds`` (starting the cluster and warming it up:
  reported separately, NOT in ``dask_seconds``) and ``dask_speedup_2_workers`` =
  serial / dask, plus ``dask_speedup_with_start`` (start-up included).
* The workers' cores are reported (``worker_cores``): each must have every core
  this process had at import (:func:`checks.verify.engine.unpin_workers`).
* :func:`full_profile_dask`: times ``rnngap verify --profile full --engine dask
  --workers 2`` (a subprocess; hours on 2 cores) and reports its summary line.

``python -m benchmarks.dask_bench [--full]`` prints the results as JSON.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

BENCH_CHECK = "hybrid: Index / AR / c-gram / Counting with no CoT (easy families, extra)"
BENCH_PARTS = ([(t, "sampled", 4096) for t in ("index", "ar", "cgram", "counting")]
               + [(t, "sampled", 1024) for t in ("index", "ar", "cgram", "counting")]
               + [(t, "sampled", 256) for t in ("index", "ar", "cgram", "counting")]
               + [("index", "exhaustive", 8), ("ar", "exhaustive", 8), ("cgram", "exhaustive", 8),
                  ("counting", "exhaustive", 7)])
"""The fixed parts (full profile, seed 0), largest first (the scheduler starts them
in this order)."""
PROFILE, SEED = "full", 0


def bench_plan() -> list:
    """The benchmark's plan: the T5.6 easy-family check restricted to :data:`BENCH_PARTS`
    (each of them a part of the full profile)."""
    from rnngap.checks.verify import registry

    (chk,) = [c for c in registry.load_checks() if c.name == BENCH_CHECK]
    missing = [p for p in BENCH_PARTS if p not in chk.part_keys(PROFILE)]
    if missing:
        raise ValueError(f"not parts of the full profile any more: {missing}")
    return [(chk, list(BENCH_PARTS))]


def _warm() -> None:
    """Imports and compiled kernels loaded (on each worker, and in this process):
    one small part of the benchmark check."""
    from rnngap.checks.verify import registry

    (chk,) = [c for c in registry.load_checks() if c.name == BENCH_CHECK]
    for task in ("index", "ar", "cgram", "counting"):
        registry.run_part(chk.fn, PROFILE, SEED, (task, "sampled", 64), True)


def _cores() -> list[int]:
    """The cores this process's threads may run on (their union)."""
    import os

    from rnngap.constructions.machine.runtime import thread_ids
    out = set()
    for tid in thread_ids():
        try:
            out |= os.sched_getaffinity(tid)
        except OSError:
            pass
    return sorted(out)


def _strip(records) -> list[dict]:
    return [{k: v for k, v in r.as_json().items() if k != "seconds"} for r in records]


def dask_speedup(workers: int = 2) -> dict:
    """Serial vs Dask (``workers`` local processes, one thread each) on the fixed parts."""
    from rnngap.checks.verify import engine, registry

    distributed = engine.require_distributed()
    plan = bench_plan()
    _warm()
    t0 = time.perf_counter()
    serial = registry.run_plan(plan, PROFILE, SEED)
    t_serial = time.perf_counter() - t0

    t0 = time.perf_counter()
    with engine._config():
        cluster = engine._start_local_cluster(distributed, workers)
        with cluster, distributed.Client(cluster) as client:
            engine.unpin_workers(client, workers)
            cores = sorted(client.run(_cores).values())
            client.run(_warm)
            t_start = time.perf_counter() - t0
            t1 = time.perf_counter()
            dask = engine.run_plan(client, plan, PROFILE, SEED)
            t_dask = time.perf_counter() - t1
    identical = _strip(dask) == _strip(serial)
    if not identical:
        raise AssertionError("the Dask engine's records differ from the serial engine's")
    return {"parts": len(BENCH_PARTS), "records": len(serial), "workers": workers, "identical": identical,
            "all_passed": all(r.passed for r in serial),
            "serial_seconds": round(t_serial, 2), "dask_seconds": round(t_dask, 2),
            "cluster_start_seconds": round(t_start, 2),
            f"dask_speedup_{workers}_workers": round(t_serial / t_dask, 3),
            "dask_speedup_with_start": round(t_serial / (t_dask + t_start), 3),
            "largest_part_seconds": round(max(r.seconds for r in serial), 2),
            "worker_cores": cores, "parent_cores_now": _cores(),
            "note": "cluster start-up (and warm-up) is reported separately, not in dask_seconds"}


def full_profile_dask(workers: int = 2, json_path: str | None = None) -> dict:
    """Time ``rnngap verify --profile full --engine dask --workers K`` (a subprocess)."""
    cmd = [sys.executable, "-m", "rnngap.checks.cli.main", "verify", "--profile", "full", "--engine", "dask",
           "--workers", str(workers)] + (["--json", json_path] if json_path else [])
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    lines = [ln for ln in p.stdout.splitlines() if " records, " in ln]
    return {"command": " ".join(cmd[1:]), "exit_code": p.returncode, "wall_seconds": round(wall, 1),
            "summary": lines[-1].strip() if lines else None, "stderr_tail": p.stderr[-2000:]}


if __name__ == "__main__":
    res = full_profile_dask() if "--full" in sys.argv[1:] else dask_speedup()
    print(json.dumps(res, indent=1))
