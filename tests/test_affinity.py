"""Workers run on every core the parent had, whatever pinned the parent since.

Under ``OMP_PROC_BIND=true`` numba's OpenMP threading layer pins the calling
thread to one core at the first parallel kernel, and processes started later
inherit that core: ``python -m benchmarks`` (whose witness benchmark runs the
parallel kernel before the Dask benchmark) measured the 2-worker cluster at 0.89x
the serial run. rnngap uses numba's ``workqueue`` layer unless
``NUMBA_THREADING_LAYER`` is set, and its engines start workers on the cores the
parent had at import (constructions.START_AFFINITY). Each case runs in a fresh
interpreter (the environment is read at import)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs at least 2 cores to tell a pinned process from an unpinned one")

SCRIPT = r"""
import json, os, sys
import numpy as np
import numba
from rnngap.constructions.machine.runtime import START_AFFINITY
from rnngap.constructions.models.targets import LinearRNNTarget, register_index_rnn
from rnngap.checks.verify import engine

def cores():
    return sorted(os.sched_getaffinity(0))

if __name__ == "__main__":
    rnn = LinearRNNTarget(register_index_rnn(8))
    rows = np.random.default_rng(0).integers(32, 34, size=(4096, 8))
    rows[:, 0] = 0
    rnn.batch_states(rows)                        # >= 2048 rows: the prange kernel, on 2 threads
    out = {"layer": numba.threading_layer(), "start": sorted(START_AFFINITY), "parent": cores()}
    with engine.PoolClient(2) as pool:
        out["workers"] = [pool.submit(cores).result() for _ in range(2)]
    print(json.dumps(out))
"""


def _run(tmp_path, **env) -> dict:
    script = tmp_path / "pin.py"
    script.write_text(SCRIPT)
    e = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER", "OMP_PROC_BIND")}
    e.update(env)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=e, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_default_layer_does_not_pin_under_omp_proc_bind(tmp_path):
    out = _run(tmp_path, OMP_PROC_BIND="true")
    assert out["layer"] == "workqueue"
    assert out["parent"] == out["start"] and len(out["start"]) >= 2
    assert all(w == out["start"] for w in out["workers"])


def _omp_layer_available() -> bool:
    """numba's OpenMP threading layer is built and loads (what numba itself imports
    to start it)."""
    import importlib
    try:
        importlib.import_module("numba.np.ufunc.omppool")
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _omp_layer_available(), reason="numba's OpenMP threading layer is not installed here")
def test_workers_unpinned_when_the_user_chooses_openmp(tmp_path):
    """The user's own choice of OpenMP pins the parent (numba does it, not rnngap);
    the workers still get every core."""
    out = _run(tmp_path, OMP_PROC_BIND="true", NUMBA_THREADING_LAYER="omp")
    assert out["layer"] == "omp"
    assert len(out["parent"]) == 1            # what rnngap cannot prevent in the parent
    assert all(w == out["start"] for w in out["workers"]) and len(out["start"]) >= 2
