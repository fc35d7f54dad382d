"""The rnngap front door: exit codes, one-line errors, the --json schema."""
import json
import subprocess
import sys

import pytest

from checks.registry import RECORD_FIELDS


def run(*args):
    return subprocess.run([sys.executable, "-m", "checks.cli", *args], capture_output=True, text=True, timeout=600)


def test_verify_only_machine_json(tmp_path):
    out = tmp_path / "v.json"
    r = run("verify", "--only", "machine", "gadgets", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    recs = json.loads(out.read_text())
    assert recs and all(list(rec) == list(RECORD_FIELDS) for rec in recs)
    assert {rec["claim"] for rec in recs} == {"machine", "gadgets"}
    assert all(rec["failures"] == 0 for rec in recs)
    assert "PASS" in r.stdout


@pytest.mark.parametrize("argv, needle", [
    (["verify", "--only", "T9.9"], "unknown claim"),
    (["verify", "--profile", "huge"], "invalid choice"),
    (["bogus"], "invalid choice"),
    (["show", "no-such-model"], "unknown model"),
    (["show", "position-match", "--n", "0"], "--n must be"),
    (["verify", "--only", "machine", "--json", "/nonexistent/dir/x.json"], "cannot write"),
    (["precision", "--task", "sorting", "--out", "x.png"], "unknown task"),
    (["precision", "--task", "index", "--out", "x.txt"], "--out must name a .png"),
    (["precision", "--task", "index", "--out", "x.png", "--max-log2n", "40"], "--max-log2n must be"),
    (["precision", "--task", "index", "--out", "/nonexistent/dir/x.png", "--max-log2n", "4"], "cannot write"),
])
def test_bad_usage_exits_2_with_one_line(argv, needle):
    r = run(*argv)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_argparse_errors_exit_2():
    r = run("verify", "--seed", "notanint")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_show_runs():
    r = run("show", "count-threshold", "--n", "5", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "attention layer 1" in r.stdout and "head count" in r.stdout and "next token" in r.stdout


def test_no_command_prints_help_and_exits_2():
    r = run()
    assert r.returncode == 2


def test_precision_plot_renders(tmp_path):
    out = tmp_path / "f.png"
    r = run("precision", "--task", "index", "--out", str(out), "--max-log2n", "5")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "declared at or above the frontier" in r.stdout


def test_a_crashing_check_is_a_failed_row_not_a_traceback(monkeypatch):
    from checks import registry
    from constructions.fixedpoint import FixedFormat

    registry.load_checks()

    def boom(profile, seed):
        FixedFormat(2, 1).add(FixedFormat(2, 1).encode(3), FixedFormat(2, 1).encode(3))
        return []

    def empty(profile, seed):
        return []

    monkeypatch.setattr(registry, "REGISTRY", [registry.Check("machine", "boom", boom),
                                               registry.Check("machine", "empty", empty)])
    recs = registry.run("quick", ["machine"])
    assert [r.passed for r in recs] == [False, False]
    assert "FixedPointOverflow" in recs[0].note and "needs at least 3 integer bits" in recs[0].note
    assert recs[1].task == "check returned no records"
