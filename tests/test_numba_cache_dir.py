"""The numba cache folder follows the sources of rnngap.constructions (numba's own
cache would keep running a kernel's callee from another module after that module
changed: constructions/__init__.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba

import rnngap.constructions as C


def test_cache_dir_changes_with_any_source(tmp_path):
    src = Path(C.__file__).resolve().parent
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for p in src.glob("*.py"):
        shutil.copy(p, pkg / p.name)
    a = C.numba_cache_dir(pkg)
    assert a == C.numba_cache_dir(pkg)                       # deterministic
    with open(pkg / "heap.py", "a") as fh:                    # a callee's module changes
        fh.write("\n# edited\n")
    b = C.numba_cache_dir(pkg)
    assert b != a and b.parent == a.parent == pkg / "__pycache__"


def test_this_process_uses_it():
    if os.environ.get("NUMBA_CACHE_DIR"):
        assert numba.config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"]
    elif os.access(Path(C.__file__).resolve().parent, os.W_OK):
        assert Path(numba.config.CACHE_DIR) == C.numba_cache_dir(Path(C.__file__).resolve().parent)
    else:                                                      # numba's own default
        assert not numba.config.CACHE_DIR


def test_user_setting_wins(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import rnngap.constructions, numba; print(numba.config.CACHE_DIR)"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path)
