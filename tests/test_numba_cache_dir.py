"""The numba cache folder follows the sources of rnngap.constructions (numba's own
cache would keep running a kernel's callee from another module after that module
changed: constructions/machine/runtime.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba

import rnngap.constructions as C
from rnngap.constructions.machine import runtime as RT


def test_cache_dir_changes_with_any_source(tmp_path):
    src = Path(C.__file__).resolve().parent
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for p in src.rglob("*.py"):
        (pkg / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(p, pkg / p.relative_to(src))
    a = RT.numba_cache_dir(pkg)
    assert a == RT.numba_cache_dir(pkg)                       # deterministic
    with open(pkg / "machine" / "heap.py", "a") as fh:        # a callee's module changes
        fh.write("\n# edited\n")
    b = RT.numba_cache_dir(pkg)
    assert b != a and b.parent == a.parent == pkg / "__pycache__"


def test_this_process_uses_it():
    if os.environ.get("NUMBA_CACHE_DIR"):
        assert numba.config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"]
    elif os.access(Path(C.__file__).resolve().parent, os.W_OK):
        assert Path(numba.config.CACHE_DIR) == RT.numba_cache_dir(Path(C.__file__).resolve().parent)
    else:                                                      # numba's own default
        assert not numba.config.CACHE_DIR


def test_user_setting_wins(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import rnngap.constructions, numba; print(numba.config.CACHE_DIR)"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path)


def _unwritable_install(tmp_path: Path) -> dict:
    """A copy of the rnngap package (a regular package: it is found before the
    installed one) whose constructions' __pycache__ cannot be created (a
    regular file is in the way: unwritable even for root), imported first, with
    HOME and XDG_CACHE_HOME unwritable too and NUMBA_CACHE_DIR unset: an
    installed package run by a user whose HOME is read-only."""
    import rnngap
    import rnngap.checks
    import rnngap.lowerbounds
    site = tmp_path / "site" / "rnngap"
    site.mkdir(parents=True)
    for p in Path(rnngap.__file__).resolve().parent.glob("*.py"):    # the public API: rnngap itself
        shutil.copy(p, site / p.name)
    skip = shutil.ignore_patterns("__pycache__", "api")
    for mod in (rnngap.checks, rnngap.lowerbounds):
        shutil.copytree(Path(mod.__file__).resolve().parent, site / mod.__name__.split(".")[-1], ignore=skip)
    src = Path(C.__file__).resolve().parent
    pkg = site / "constructions"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "__pycache__").write_text("not a folder")
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(tmp_path / "site"), HOME=str(blocked / "home"), XDG_CACHE_HOME=str(blocked / "xdg"),
               TMPDIR=str(tmp_path / "tmp"), PYTHONDONTWRITEBYTECODE="1")
    (tmp_path / "tmp").mkdir()
    return env


KERNEL = ("import numba, rnngap.constructions as C; from rnngap.constructions.machine import fixedpoint as F; "
          "assert C.__file__.startswith({site!r}), C.__file__; print(F.bit_length(1000), repr(numba.config.CACHE_DIR))")


def test_unwritable_home_and_package_cache_in_a_private_temp_folder(tmp_path):
    env = _unwritable_install(tmp_path)
    r = subprocess.run([sys.executable, "-c", KERNEL.format(site=str(tmp_path / "site"))], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    bits, where = r.stdout.split(" ", 1)
    assert int(bits) == (1000).bit_length()
    assert where.strip().strip("'").startswith(str(tmp_path / "tmp" / f"rnngap-numba-{os.getuid()}"))
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("rnngap: note: "), r.stderr
    assert list((tmp_path / "tmp").rglob("*.nbi")), "nothing was cached in the fallback folder"
    h = subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", "--help"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert h.returncode == 0 and "usage: rnngap" in h.stdout, h.stderr[-2000:]


def test_nowhere_to_cache_compiles_in_memory(tmp_path):
    env = _unwritable_install(tmp_path)
    env["TMPDIR"] = str(tmp_path / "blocked" / "tmp")          # tempfile falls back to /tmp: set tempdir itself
    code = "import tempfile; tempfile.tempdir = {t!r}; ".format(t=env["TMPDIR"]) + KERNEL.format(
        site=str(tmp_path / "site"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split(" ", 1)[0] == str((1000).bit_length()) and r.stdout.split(" ", 1)[1].strip() == "''"
    assert len(r.stderr.splitlines()) == 1 and "compiled in memory" in r.stderr, r.stderr
    h = subprocess.run([sys.executable, "-c", "import tempfile; tempfile.tempdir = {t!r}; import sys; "
                        "from rnngap.checks.cli.main import main; sys.exit(main(['--help']))".format(t=env["TMPDIR"])],
                       env=env, capture_output=True, text=True, timeout=600)
    assert h.returncode == 0 and "usage: rnngap" in h.stdout, h.stderr[-2000:]
    assert not h.stderr, h.stderr       # --help loads no kernels: nothing to cache, no note
