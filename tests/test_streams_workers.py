"""Worker counts are plain ASCII integers in 1..4 x the cores (else exit 2, one
line); a closed stdout or stderr gives an exit code and no traceback; a bad
MPLBACKEND does not break ``precision`` (it writes a PNG with Agg)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rnngap.checks.io.errors import UsageError, worker_cap, worker_count

CLI = [sys.executable, "-c", "from rnngap.checks.cli.main import main; raise SystemExit(main())"]


@pytest.mark.parametrize("text", ["0", "-1", "²", "٣", "1e3", "", " ", "1180591620717411303424", "2147483648", "abc"])
def test_bad_worker_counts(text):
    with pytest.raises(UsageError):
        worker_count(text)


def test_good_worker_counts():
    assert worker_count("1") == 1 and worker_count(f" {worker_cap()} ") == worker_cap()


@pytest.mark.parametrize("argv, env", [
    (["verify", "--only", "machine", "--workers", "1180591620717411303424"], {}),
    (["certify", "--only", "machine", "--workers", "2147483648"], {}),
    (["verify", "--only", "machine"], {"RNNGAP_VERIFY_WORKERS": "99999999999999999999"}),
    (["verify", "--only", "machine"], {"RNNGAP_VERIFY_WORKERS": "²"}),
])
def test_worker_counts_exit_2_with_one_line(argv, env):
    r = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def test_closed_stdout_and_stderr():
    r = subprocess.run(CLI + ["cc", "--task", "index", "--n", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=lambda: os.close(1))
    assert r.returncode == 141 and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run(CLI + ["cc", "--task", "index", "--n", "3"], capture_output=False, stdout=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=lambda: os.close(2))
    assert r.returncode == 0 and "3 bits" in r.stdout
    r = subprocess.run(CLI + ["cc", "--task", "nope", "--n", "3"], stdout=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(2))
    assert r.returncode == 2 and r.stdout == ""          # the error is not sent to stdout


def test_a_bad_mplbackend_falls_back_to_agg(tmp_path):
    out = tmp_path / "x.png"
    r = subprocess.run(CLI + ["precision", "--task", "index", "--out", str(out), "--max-log2n", "4"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "MPLBACKEND": "bogus"})
    assert r.returncode == 0, r.stderr
    assert out.read_bytes().startswith(b"\x89PNG")
