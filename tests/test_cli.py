"""The rnngap front door: exit codes, one-line errors, the --json schema."""
import json
import subprocess
import sys

import numpy as np
import pytest

from rnngap.checks.cli.main import main
from rnngap.checks.tasks import is_task_name

# The --json record schema as issues 8, 13, 18 and 27 specify it (not read from the code).
BASE_FIELDS = {"claim", "model", "task", "n", "instances", "failures", "precision_bits_used",
               "precision_bits_declared", "cot_max", "cot_bound", "params", "state_bits", "seconds"}
JSON_FIELDS = BASE_FIELDS | {"checked", "note", "family", "alphabet", "kind", "status", "seed", "profile",
                             "description", "schema_version"}
KIND_FIELDS = {"correctness": set(),
               "separation": {"cc_bits", "state_bits", "collision_forced", "witness_verified"},
               "necessity": {"frontier_int_bits", "frontier_frac_bits", "wrong_below", "cot_deviation_below",
                             "no_answer_below", "raised_below", "int_tight", "frac_tight", "int_slack",
                             "frac_slack"}}
STRING_FIELDS = {"claim", "model", "task", "description", "note", "family", "profile"}
COUNT_FIELDS = {"n", "instances", "failures", "seed"}                # always ints
RESOURCE_FIELDS = BASE_FIELDS - STRING_FIELDS - COUNT_FIELDS - {"seconds"}  # int, or null if not applicable


def run(*args):
    return subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", *args], capture_output=True, text=True, timeout=600)


def _main(capsys, *argv):
    """rnngap.checks.cli.main.main in-process: (exit code, stdout, stderr)."""
    rc = main(list(argv))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_clean_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_verify_only_machine_json(tmp_path):
    out = tmp_path / "v.json"
    r = run("verify", "--only", "machine", "gadgets", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    recs = json.loads(out.read_text())
    assert recs
    for rec in recs:
        assert set(rec) == JSON_FIELDS | KIND_FIELDS[rec["kind"]], sorted(rec)
        for k in STRING_FIELDS - {"note"}:
            assert isinstance(rec[k], str) and rec[k], (k, rec)
        assert isinstance(rec["note"], str)
        assert rec["checked"] is True and rec["status"] == "PASS" and rec["profile"] == "quick", rec
        assert rec["alphabet"] is None or (type(rec["alphabet"]) is int and rec["alphabet"] >= 1), rec
        for k in COUNT_FIELDS:
            assert type(rec[k]) is int and rec[k] >= 0, (k, rec)   # bool is not an int here
        for k in RESOURCE_FIELDS:
            assert rec[k] is None or (type(rec[k]) is int and rec[k] >= 0), (k, rec)
        assert type(rec["seconds"]) in (int, float) and rec["seconds"] >= 0, rec
        assert rec["schema_version"] == 4 and is_task_name(rec["task"]), rec
    assert {rec["claim"] for rec in recs} == {"machine", "gadgets"}
    assert all(rec["failures"] == 0 for rec in recs)
    assert "PASS" in r.stdout


@pytest.mark.parametrize("argv, needle", [
    (["verify", "--only", "T9.9"], "unknown claim"),
    (["verify", "--profile", "huge"], "invalid choice"),
    (["bogus"], "invalid choice"),
    (["show", "no-such-model"], "unknown model"),
    (["show", "position-match-transformer", "--n", "0"], "--n must be"),
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
    r = run("show", "count-threshold-transformer", "--n", "5", "--seed", "3")
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
    from rnngap.checks.verify import registry
    from rnngap.constructions.machine.formats import FixedFormat

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
    assert recs[1].description == "check returned no records"


# ---------------------------------------------------------------- show: every model, every impossible size


def _show_names(capsys) -> list[str]:
    rc, out, err = _main(capsys, "show", "--list")
    assert rc == 0 and not err
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def test_show_list_names_the_catalogue(capsys):
    from rnngap.checks.catalog.records import names
    assert sorted(_show_names(capsys)) == names()


def test_show_every_model_refuses_too_small_n_and_runs_at_a_small_one(capsys):
    """For every listed model, each n from -1 upwards is either refused (exit 2,
    one line, no traceback) or shown (exit 0), and the first shown n is at most 3:
    the catalogue's tasks need at most c = 3 data tokens (c-gram with c = 3)."""
    names = _show_names(capsys)
    assert len(names) >= 5
    for name in names:
        first_ok = None
        for n in range(-1, 5):
            rc, out, err = _main(capsys, "show", name, "--n", str(n), "--seed", "1")
            if rc == 0:
                first_ok = n
                assert "next token:" in out and "residual stream:" in out, (name, n, out[-500:])
                assert not err, (name, n, err)
                break
            assert rc == 2, (name, n, rc, err)
            assert _one_clean_line(err) and err.startswith("rnngap: "), (name, n, err)
            assert not out, (name, n, out[-300:])    # refused before printing anything
        assert first_ok is not None and 1 <= first_ok <= 3, (name, first_ok)
        # every size from the first shown one on is shown too (up to a few more)
        for n in range(first_ok + 1, first_ok + 3):
            rc, out, err = _main(capsys, "show", name, "--n", str(n))
            assert rc == 0 and "next token:" in out, (name, n, err)


@pytest.mark.parametrize("argv, needle", [
    (["show", "ar-transformer", "--n", "1"], "--n 1"),        # AR needs a key and a value: n >= 2
    (["show", "cgram-transformer", "--n", "2"], "--n 2"),     # 3-gram retrieval needs n >= 3
    (["show", "ar-hybrid", "--n", "0"], "--n must be"),
    (["show", "index-transformer", "--n", "4097"], "--n must be"),
    (["show", "index-transformer", "--seed", "-1"], "--seed"),
    (["show"], "--list"),
])
def test_show_impossible_input_exits_2(capsys, argv, needle):
    rc, out, err = _main(capsys, *argv)
    assert rc == 2 and needle in err and _one_clean_line(err), err


@pytest.mark.parametrize("error", ["margin", "overflow"])
def test_show_turns_a_builders_refusal_into_a_usage_error(capsys, monkeypatch, error):
    """MarginError (a ValueError) and FixedPointOverflow (a PrecisionError) raised
    while building become exit 2 with the builder's reason on one line."""
    from rnngap.checks.catalog import records as catalog
    from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
    from rnngap.constructions.machine.formats import FixedFormat
    from rnngap.constructions.build.gadgets import MarginError

    def build(n):
        if error == "margin":
            raise MarginError(f"the match head's gap is too small for n = {n}\nsecond line")
        raise FixedPointOverflow("mul", 70, FixedFormat(8, 4), "the position embedding")

    fake = catalog.ConstructionRecord(catalog.Key("test", "fake", "model"), build, lambda n, rng: [0], "a test double")
    monkeypatch.setattr(catalog, "RECORDS", catalog.RECORDS + (fake,))
    rc, out, err = _main(capsys, "show", "fake-model", "--n", "5")
    assert rc == 2 and _one_clean_line(err) and not out, err
    assert "fake-model" in err and ("gap is too small for n = 5" in err if error == "margin"
                                    else "needs at least 70 integer bits" in err)


# ---------------------------------------------------------------- verify: arguments checked up front


@pytest.fixture
def registry_must_not_run(monkeypatch):
    from rnngap.checks.verify import registry

    def run(*a, **k):
        raise AssertionError("the registry ran although the arguments are bad")
    monkeypatch.setattr(registry, "run", run)


@pytest.mark.parametrize("seed", ["-1", "-123456789"])
def test_verify_negative_seed_is_usage_error(capsys, registry_must_not_run, seed):
    rc, out, err = _main(capsys, "verify", "--only", "machine", "--seed", seed)
    assert rc == 2 and "--seed" in err and _one_clean_line(err), err


def test_verify_json_path_checked_before_the_run(capsys, tmp_path, registry_must_not_run):
    rc, _, err = _main(capsys, "verify", "--only", "machine", "--json", str(tmp_path))
    assert rc == 2 and "is a directory" in err and _one_clean_line(err), err
    missing = tmp_path / "no" / "such" / "dir" / "v.json"
    rc, _, err = _main(capsys, "verify", "--only", "machine", "--json", str(missing))
    assert rc == 2 and "cannot write" in err and "does not exist" in err and _one_clean_line(err), err
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    rc, _, err = _main(capsys, "verify", "--only", "machine", "--json", str(a_file / "v.json"))
    assert rc == 2 and "not a directory" in err and _one_clean_line(err), err
    assert not missing.parent.exists() and a_file.read_text() == "x"


def test_verify_json_directory_refused_by_the_console_entry_point(tmp_path):
    """The console entry point (a fresh process) refuses a directory as --json
    quickly: nothing of the registry runs, so no table is printed."""
    r = run("verify", "--only", "machine", "--json", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr and _one_clean_line(r.stderr), r.stderr
    assert "records" not in r.stdout


# ---------------------------------------------------------------- predict ar: a directory is not a file


def test_predict_ar_inputs_directory(capsys, tmp_path):
    out = tmp_path / "P.npy"
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(tmp_path), "--out", str(out))
    assert rc == 2 and "is a directory" in err and "no such file" not in err and _one_clean_line(err), err
    assert not out.exists()
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(tmp_path / "absent.npy"), "--out", str(out))
    assert rc == 2 and "no such file" in err and _one_clean_line(err), err


def test_predict_ar_out_directory(capsys, tmp_path):
    inp = tmp_path / "X.npy"
    np.save(inp, np.array([[1, 2, 1]], dtype=np.int64))
    out_dir = tmp_path / "outdir"
    out_dir.mkdir()
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(inp), "--out", str(out_dir))
    assert rc == 2 and "is a directory" in err and _one_clean_line(err), err
    assert list(out_dir.iterdir()) == []
    # the same input to a file works: position 2 repeats key 1 (position 0), whose value is 2
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(inp), "--out", str(out_dir / "P.npy"), "--quiet")
    assert rc == 0, err
    assert np.load(out_dir / "P.npy").tolist() == [[-1, -1, 2]]


def test_verify_notes_prints_passing_records_notes(capsys):
    """--notes prints every record's note (e.g. the machine checks' sample
    sizes), passing ones included; without it only failures' notes appear."""
    from rnngap.checks.cli.main import main
    from rnngap.checks.verify.registry import run as run_registry
    notes = [r.note for r in run_registry("quick", only=["machine"]) if r.note]
    assert notes                                             # the machine records carry notes
    assert main(["verify", "--only", "machine"]) == 0
    plain = capsys.readouterr().out
    assert main(["verify", "--only", "machine", "--notes"]) == 0
    noted = capsys.readouterr().out
    assert "  PASS machine" not in plain
    assert noted.count("  PASS machine") == len(notes)


# ================================================================ issue 18: each defect found by the hostile user
# (each test below failed on the base commit 5c869a1 and passes now)

def _snapshot(d):
    """{name: bytes} of every file under d (hidden temporaries included)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _istree_input(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))


def test_predict_istree_refuses_out_equal_to_input(capsys, tmp_path):
    inp = tmp_path / "same.jsonl"
    _istree_input(inp, ["[BOS]2-1,1-0[EOS]"])
    before = _snapshot(tmp_path)
    for out in (inp, tmp_path / "." / "same.jsonl"):
        rc, _, err = _main(capsys, "predict", "istree", "--inputs", str(inp), "--out", str(out))
        assert rc == 2 and "is the input" in err and _one_clean_line(err), err
    link = tmp_path / "link.jsonl"            # a hard link is the same file under another name
    import os
    os.link(inp, link)
    rc, _, err = _main(capsys, "predict", "istree", "--inputs", str(inp), "--out", str(link))
    assert rc == 2 and "is the input" in err, err
    link.unlink()
    assert _snapshot(tmp_path) == before


def test_predict_ar_refuses_out_equal_to_input(capsys, tmp_path):
    inp = tmp_path / "X.npy"
    np.save(inp, np.array([[1, 2, 1]], dtype=np.int64))
    before = _snapshot(tmp_path)
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(inp), "--out", str(inp))
    assert rc == 2 and "is the input" in err and _one_clean_line(err), err
    assert _snapshot(tmp_path) == before


def test_precision_refuses_json_equal_to_out_before_any_work(capsys, tmp_path, monkeypatch):
    from rnngap.checks.verify import frontier

    def no_work(*a, **k):
        raise AssertionError("the frontier ran although the arguments are bad")
    monkeypatch.setattr(frontier, "frontier_table", no_work)
    p = tmp_path / "p.png"
    rc, out, err = _main(capsys, "precision", "--task", "index", "--out", str(p), "--json", str(p),
                         "--max-log2n", "4")
    assert rc == 2 and "same file" in err and _one_clean_line(err) and "wrote" not in out, err
    rc, _, err = _main(capsys, "precision", "--task", "index", "--out", str(tmp_path / "nodir" / "p.png"),
                       "--max-log2n", "4")
    assert rc == 2 and "does not exist" in err and _one_clean_line(err), err
    assert list(tmp_path.iterdir()) == []


def test_predict_istree_out_checked_before_the_model_runs(capsys, tmp_path, monkeypatch):
    from rnngap.checks.cli import predict_istree as P

    def no_model(*a, **k):
        raise AssertionError("the model was built although --out cannot be written")
    monkeypatch.setitem(P.MODELS, "transformer", no_model)
    inp = tmp_path / "g.jsonl"
    _istree_input(inp, ["[BOS]2-1,1-0[EOS]"])
    rc, _, err = _main(capsys, "predict", "istree", "--inputs", str(inp), "--out", str(tmp_path / "nodir" / "x.jsonl"))
    assert rc == 2 and "does not exist" in err and _one_clean_line(err), err


def _fsize_limited(limit):
    """preexec_fn of a child whose files may not grow past ``limit`` bytes (as
    ``ulimit -f``): a write past it fails with EFBIG (SIGXFSZ ignored)."""
    def pre():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def test_a_failed_write_leaves_no_partial_output_and_the_old_file_intact(tmp_path):
    """With a file-size limit the write fails half-way: exit 2 with the reason,
    the previous output (and the input) unchanged, no temporary file left."""
    inp = tmp_path / "g.jsonl"
    _istree_input(inp, [f"[BOS]{','.join(f'{v}-{v - 1}' for v in range(1, 40))}[EOS]"] * 30)
    out = tmp_path / "out.jsonl"
    out.write_text("old output\n")
    X = tmp_path / "X.npy"
    np.save(X, np.random.default_rng(0).integers(0, 50, (40, 64)))
    P = tmp_path / "P.npy"
    P.write_bytes(b"old")
    limit = 4096                 # the outputs are larger (the limit binds writes only)
    warm = tmp_path / "warm"
    warm.mkdir()
    for argv in (["predict", "istree", "--inputs", str(inp), "--out", str(warm / "o.jsonl")],
                 ["predict", "ar", "--inputs", str(X), "--out", str(warm / "P.npy"), "--quiet"]):
        # without the limit first, so that numba's on-disk cache is written (a cold
        # cache written under the limit would fail for another reason)
        assert main(argv) == 0
    import shutil
    shutil.rmtree(warm)
    before = _snapshot(tmp_path)
    for argv in (["predict", "istree", "--inputs", str(inp), "--out", str(out)],
                 ["predict", "ar", "--inputs", str(X), "--out", str(P), "--quiet"]):
        r = subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", *argv], capture_output=True, text=True,
                           timeout=600, preexec_fn=_fsize_limited(limit if argv[1] == "istree" else 8192))
        assert r.returncode == 2, r.stderr
        assert "cannot write" in r.stderr and "None" not in r.stderr and _one_clean_line(r.stderr), r.stderr
        reason = r.stderr.strip().split(".jsonl: " if argv[1] == "istree" else ".npy: ", 1)[1]
        assert reason and reason != "None", r.stderr             # the reason is named
    assert _snapshot(tmp_path) == before


def test_ctrl_c_exits_130_with_one_line_and_no_output(tmp_path):
    """SIGINT in the middle of a run: one line, exit 130, no output file and no
    temporary file left."""
    import signal
    import time
    inp = tmp_path / "g.jsonl"
    _istree_input(inp, [f"[BOS]{','.join(f'{v}-{v - 1}' for v in range(1, 400))}[EOS]"] * 50)
    before = _snapshot(tmp_path)
    p = subprocess.Popen([sys.executable, "-m", "rnngap.checks.cli.main", "predict", "istree", "--inputs", str(inp),
                          "--out", str(tmp_path / "out.jsonl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4)
    assert p.poll() is None, "finished before the interrupt: make the input larger"
    p.send_signal(signal.SIGINT)
    t0 = time.perf_counter()
    _, err = p.communicate(timeout=60)
    waited = time.perf_counter() - t0
    assert p.returncode == 130 and err == "rnngap: interrupted\n", (p.returncode, err)
    assert waited < 5, waited           # about a second; generous for a loaded machine
    assert _snapshot(tmp_path) == before


def test_atomic_output_removes_the_temporary_on_interrupt(tmp_path):
    from rnngap.checks.io.errors import atomic_output
    target = tmp_path / "t.txt"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(str(target)) as fh:
            fh.write("half")
            raise KeyboardInterrupt
    assert _snapshot(tmp_path) == {"t.txt": b"old"}
    with atomic_output(str(target)) as fh:
        fh.write("new")
    assert _snapshot(tmp_path) == {"t.txt": b"new"}


def test_atomic_output_follows_a_symlink_and_writes_devices_in_place(tmp_path):
    import os
    from rnngap.checks.io.errors import atomic_output
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with atomic_output(str(link)) as fh:
        fh.write("new")
    assert link.is_symlink() and real.read_text() == "new"
    with atomic_output(os.devnull) as fh:        # not replaced by a regular file
        fh.write("x")
    assert not os.path.isfile(os.devnull)


def test_every_written_file_goes_through_atomic_output():
    """grep: no command module opens a file for writing, saves an array or a
    figure to a path, other than through checks.io.errors.atomic_output (or
    ``outs.open`` of checks.io.errors.Outputs, several files all or nothing)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "checks"
    writer = re.compile(r"""(?<!outs\.)open\([^)]*["'][wax]b?\+?["']|\.savefig\((?!fh)|np\.save\((?!fh)|\.write_text\(|"""
                        r"""\.write_bytes\(|json\.dump\((?!.*\bfh\b)|\.tofile\(|shutil\.copy""")
    offenders = []
    for f in sorted(root.glob("*.py")):
        if f.name == "errors.py":
            continue
        for k, line in enumerate(f.read_text().splitlines(), 1):
            if writer.search(line) and "os.devnull" not in line:     # a closed stream's stand-in writes no file
                offenders.append(f"{f.name}:{k}: {line.strip()}")
    assert offenders == [], offenders


def test_set_but_missing_shared_data_is_an_error_not_a_fallback(capsys, tmp_path, monkeypatch,
                                                                 registry_must_not_run):
    monkeypatch.setenv("RNNGAP_SHARED_DATA", str(tmp_path / "nonexistent"))
    rc, _, err = _main(capsys, "verify", "--only", "T4.7-up")
    assert rc == 2 and "RNNGAP_SHARED_DATA" in err and "does not exist" in err and _one_clean_line(err), err
    f = tmp_path / "file"
    f.write_text("")
    monkeypatch.setenv("RNNGAP_SHARED_DATA", str(f))
    rc, _, err = _main(capsys, "verify", "--only", "T4.7-up")
    assert rc == 2 and "not a directory" in err and _one_clean_line(err), err
    from rnngap.checks.io.shared_data import SharedDataError, shared_file
    with pytest.raises(SharedDataError):
        shared_file("istree_official_sample.jsonl")


# ---------------------------------------------------------------- missing data: exit 3, --allow-missing-data, package data

@pytest.fixture
def only_data_checks(monkeypatch):
    """The registry cut down to the checks that read the sample data (the
    T4.7-up paper-sample row), so the exit-code tests cost seconds; the full
    `verify --only T4.7-up` is the full-profile test below."""
    from rnngap.checks.verify import registry
    registry.load_checks()
    keep = [c for c in registry.REGISTRY if c.claim == "T4.7-up" and "paper's sample" in c.name]
    assert len(keep) == 1, [c.name for c in registry.REGISTRY if c.claim == "T4.7-up"]
    monkeypatch.setattr(registry, "REGISTRY", keep)


def _missing_data_exit_codes(capsys, tmp_path, monkeypatch, extra=()):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("RNNGAP_SHARED_DATA", str(empty))
    rc, out, err = _main(capsys, "verify", "--only", "T4.7-up", "--json", str(tmp_path / "v.json"), *extra)
    assert rc == 3, (rc, err)
    assert "NOT CHECKED T4.7-up istree-transformer" in err and "istree_official_sample.jsonl" in err, err
    assert "--allow-missing-data" in err and "Traceback" not in err
    recs = json.loads((tmp_path / "v.json").read_text())
    missing = [r for r in recs if r["status"] == "NOT CHECKED"]
    assert missing and all(not r["checked"] and "istree_official_sample.jsonl" in r["note"] for r in missing)
    assert all(r["status"] == "PASS" for r in recs if r not in missing)
    rc, _, err = _main(capsys, "verify", "--only", "T4.7-up", "--allow-missing-data", *extra)
    assert rc == 0, err
    monkeypatch.delenv("RNNGAP_SHARED_DATA")                  # the package data
    rc, _, err = _main(capsys, "verify", "--only", "T4.7-up", "--json", str(tmp_path / "v.json"), *extra)
    assert rc == 0, err
    recs = json.loads((tmp_path / "v.json").read_text())
    assert recs and all(r["status"] == "PASS" and r["checked"] for r in recs)
    assert any(r["family"] == "paper-sample" or "sample" in r["description"] for r in recs), recs


def test_missing_data_exits_3_allow_missing_data_exits_0_package_data_exits_0(capsys, tmp_path, monkeypatch,
                                                                              only_data_checks):
    _missing_data_exit_codes(capsys, tmp_path, monkeypatch)


@pytest.mark.full
def test_missing_data_exit_codes_full_claim(capsys, tmp_path, monkeypatch):
    """The same with every T4.7-up check (about 40 s a run)."""
    _missing_data_exit_codes(capsys, tmp_path, monkeypatch)


def test_package_data_is_found_by_default_and_matches_its_readme(monkeypatch):
    import hashlib
    from rnngap.checks.io.shared_data import PACKAGE_DATA, shared_data_dir, shared_file
    monkeypatch.delenv("RNNGAP_SHARED_DATA", raising=False)
    assert shared_data_dir() == PACKAGE_DATA
    readme = (PACKAGE_DATA / "README.md").read_text()
    for name in ("istree_official_sample.jsonl", "mqar_sample.npz"):
        f = shared_file(name)
        assert f is not None and f.parent == PACKAGE_DATA
        assert hashlib.sha256(f.read_bytes()).hexdigest() in readme, name
    monkeypatch.setenv("RNNGAP_SHARED_DATA", "")             # empty: unset, the package data
    assert shared_data_dir() == PACKAGE_DATA


def test_pyproject_installs_the_package_data():
    """pyproject.toml lists the data files as package data (the install itself
    is checked by hand: a venv build is too slow for the default suite)."""
    tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli")
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    conf = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["rnngap.checks"]
    import fnmatch
    for name in ("istree_official_sample.jsonl", "mqar_sample.npz", "README.md"):
        assert (root / "checks" / "data" / name).is_file()
        assert any(fnmatch.fnmatch(f"data/{name}", p) for p in patterns), (name, patterns)


# ---------------------------------------------------------------- show: the long prompt

def test_show_fast_feed_equals_recording_every_position():
    """feed_example (prefix without per-position recording, in chunks) gives the
    same last-position attention, residual and next token as recording all."""
    from rnngap.checks.catalog.records import by_name, names
    from rnngap.checks.cli.cmd_show import feed_example
    import io
    for name in names():
        e = by_name(name)
        try:
            model = e.build(16).model
            toks = e.example(16, np.random.default_rng(1))
        except ValueError:
            continue
        full = model.session(capacity=len(toks), record=True)
        full.feed(toks)
        fast = feed_example(model, toks, stream=io.StringIO())
        assert fast.next_token() == full.next_token(), name
        assert np.array_equal(fast.attention(), full.attention()), name
        assert fast.residual() == full.residual(), name


def test_show_reports_progress_on_a_long_prompt():
    import io
    from rnngap.checks.catalog.records import by_name
    from rnngap.checks.cli.cmd_show import feed_example
    e = by_name("istree-transformer")
    model, toks = e.build(300).model, e.example(300, np.random.default_rng(0))
    s = io.StringIO()
    feed_example(model, toks, stream=s, interval=0.0)
    lines = s.getvalue().splitlines()
    assert lines and all(l.startswith("show: fed ") for l in lines), lines


@pytest.mark.parametrize("content, fragment", [
    (b"", "is empty (0 bytes)"),                                                   # was EOFError
    (b"1 2 3\n4 5 6\n", "not a .npy file"),                                        # was "pickled (object) data"
    ("header", "the header says shape (10000000, 4096)"),                          # was a 305 GiB allocation
    ("object", "Python objects"),
    ("npz", ".npz archive"),
])
def test_predict_ar_npy_guards(capsys, tmp_path, content, fragment):
    import io
    import time
    X = tmp_path / "X.npy"
    if content == "header":
        b = io.BytesIO()
        np.lib.format.write_array_header_1_0(b, {"descr": "<i8", "fortran_order": False, "shape": (10 ** 7, 4096)})
        X.write_bytes(b.getvalue() + np.arange(16, dtype=np.int64).tobytes())
    elif content == "object":
        np.save(X, np.array([[1, None]], dtype=object), allow_pickle=True)
    elif content == "npz":
        with open(X, "wb") as fh:
            np.savez(fh, x=np.zeros((1, 3), dtype=np.int64))
    else:
        X.write_bytes(content)
    before = _snapshot(tmp_path)
    t0 = time.perf_counter()
    rc, _, err = _main(capsys, "predict", "ar", "--inputs", str(X), "--out", str(tmp_path / "P.npy"))
    assert time.perf_counter() - t0 < 5
    assert rc == 2 and fragment in err and "X.npy" in err and _one_clean_line(err), err
    assert _snapshot(tmp_path) == before


def test_verify_interrupted_prints_one_line_and_writes_no_json(capsys, tmp_path, monkeypatch):
    from rnngap.checks.verify import registry

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(registry, "run", interrupted)
    rc, _, err = _main(capsys, "verify", "--only", "machine", "--json", str(tmp_path / "v.json"))
    assert rc == 130 and err == "rnngap: interrupted\n", repr(err)
    assert list(tmp_path.iterdir()) == []


def test_out_dev_stdout_redirected_to_a_file_is_written_in_place(tmp_path):
    """`--out /dev/stdout > file`: /dev/stdout resolves to that regular file; it
    is written in place (replacing it would leave the shell's descriptor on an
    unlinked file)."""
    import os
    inp = tmp_path / "g.jsonl"
    _istree_input(inp, ["[BOS]1-0[EOS]"])
    dest = tmp_path / "redirected.txt"
    with open(dest, "w") as fh:
        ino = os.fstat(fh.fileno()).st_ino
        r = subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", "predict", "istree", "--inputs", str(inp),
                            "--out", "/dev/stdout"], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert os.stat(dest).st_ino == ino
    assert json.loads(dest.read_text())["cot"] == "[BOS]1-0[EOS]0,1,0[EOS]"
    assert "1 graphs, 1 trees -> /dev/stdout" in r.stderr          # the summary kept out of the data
