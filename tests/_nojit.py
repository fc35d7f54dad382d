"""Run a test module's ``fingerprint(seed)`` again with NUMBA_DISABLE_JIT=1.

The kernel tests that compare the compiled path with the pure-Python one
(test_step_fastpath, test_lanes, test_kernels_sparse) run themselves as a
script in a subprocess: ``python tests/test_x.py SEED`` prints
``{"jit_disabled": ..., "fingerprint": ...}`` (:func:`main`), and
:func:`fingerprint_without_jit` returns that fingerprint after checking that
the subprocess really ran without the JIT. Nothing here is code under test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fingerprint_without_jit(script: str, seed: int) -> dict:
    """``fingerprint(seed)`` of the test module ``script`` (its __file__), computed
    in a subprocess with NUMBA_DISABLE_JIT=1, round-tripped through JSON."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(Path(script).resolve()), str(seed)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["jit_disabled"] is True
    return out["fingerprint"]


def main(fingerprint) -> None:
    """The script side: print the fingerprint of the seed given on the command line."""
    import numba
    print(json.dumps({"jit_disabled": bool(numba.config.DISABLE_JIT), "fingerprint": fingerprint(int(sys.argv[1]))}))
