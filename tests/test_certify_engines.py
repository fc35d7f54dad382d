"""``rnngap certify`` on the engines of ``rnngap verify``: a local pool, this
process (serial) and Dask (a LocalCluster here; a scheduler's address on a
cluster) give the same records, and bad engine arguments exit 2 before any work."""
from __future__ import annotations

import subprocess
import sys

import pytest

from rnngap.checks.certify.run import certify

ONLY = ["index-transformer[a=2]", "index-transformer[a=n+2]"]     # two jobs: the pools really run them


def _records(results) -> list[dict]:
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "seconds"}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return [strip(r.record()) for r in results]


@pytest.fixture(scope="module")
def serial():
    return _records(certify(ONLY, engine="serial"))


def test_the_serial_run_proves_both_certificates(serial):
    assert [r["construction"] for r in serial] == ["index-transformer[a=2]", "index-transformer[a=n+2]"]
    assert all(r["certified"] and r["source"] == "built-model" for r in serial)


def test_the_local_pool_gives_the_serial_records(serial):
    assert _records(certify(ONLY, workers=2, engine="local")) == serial


def test_dask_gives_the_serial_records(serial):
    pytest.importorskip("distributed")
    assert _records(certify(ONLY, workers=2, engine="dask")) == serial


def test_a_changed_record_differs(serial):
    """The comparison can fail: the records of another construction are not these."""
    assert _records(certify(["counting-transformer[a=3]"], engine="serial")) != serial


CLI = [sys.executable, "-c", "from rnngap.checks.cli.main import main; raise SystemExit(main())"]


@pytest.mark.parametrize("argv, says", [
    (["--engine", "serial", "--workers", "2"], "--engine serial runs in this process"),
    (["--address", "tcp://127.0.0.1:8786"], "--address needs --engine dask"),
    (["--engine", "dask", "--address", "nowhere"], "--address must look like tcp://HOST:PORT"),
    (["--engine", "dask", "--address", "tcp://127.0.0.1:8786", "--workers", "2"], "not both"),
    (["--engine", "cluster"], "invalid choice"),
])
def test_bad_engine_arguments_exit_2_with_one_line(argv, says):
    r = subprocess.run([*CLI, "certify", "--only", "index-transformer", *argv], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and says in r.stderr and not r.stdout, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr


def test_an_unreachable_scheduler_exits_2():
    pytest.importorskip("distributed")
    r = subprocess.run([*CLI, "certify", "--only", "index-transformer", "--engine", "dask",
                        "--address", "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "no Dask scheduler answered at tcp://127.0.0.1:9" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
