"""``rnngap cc`` and ``rnngap witness``: happy paths checked against the task
references, and every bad-input path exits 2 with one line."""
from __future__ import annotations

import json
import re

import pytest

from rnngap.checks.cli.main import main
from rnngap.checks.tasks import index as task_index
from rnngap.checks.tasks import istree as task_istree
from rnngap.lowerbounds import reductions as R


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("n", [1, 3, 8])
def test_cc_index_gives_exactly_n(capsys, n):
    rc, out, _ = _run(capsys, "cc", "--task", "index", "--n", str(n))
    assert rc == 0 and f"one-way complexity {n} bits" in out and f"{2 ** n} distinct rows" in out


def test_cc_table_and_json(capsys, tmp_path):
    path = tmp_path / "cc.json"
    rc, out, _ = _run(capsys, "cc", "--task", "istree", "--n", "4", "--table", "--json", str(path))
    assert rc == 0 and out.count("istree(hubs=2)") == 4
    rows = json.loads(path.read_text())
    assert [r["bits"] for r in rows] == [1, 2, 3, 4] and all(r["exact"] for r in rows)
    rc, out, _ = _run(capsys, "cc", "--task", "counting", "--n", "4", "--table")
    assert rc == 0 and out.count("counting(a=2)") == 4


@pytest.mark.parametrize("argv, msg", [
    (["cc", "--task", "nope", "--n", "3"], "unknown task"),
    (["cc", "--task", "index", "--n", "0"], "--n must be >= 1"),
    (["cc", "--task", "index", "--n", "40"], "too large"),
    (["cc", "--task", "istree", "--n", "3", "--alphabet", "1"], "--alphabet"),
    (["cc", "--task", "index", "--n", "3", "--json", "/nonexistent/dir/x.json"], "cannot write"),
])
def test_cc_bad_input(capsys, argv, msg):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_witness_register_index(capsys, tmp_path):
    path = tmp_path / "w.json"
    rc, out, _ = _run(capsys, "witness", "--task", "index", "--n", "7", "--model", "register", "--bits", "6",
                      "--json", str(path))
    assert rc == 0 and "WRONG" in out
    rec = json.loads(path.read_text())
    assert rec["found"] and rec["i"] == 7 and rec["x"][:6] == rec["x_prime"][:6]
    wrong = [r for r in rec["runs"] if not r["correct"]]
    assert wrong
    for r in rec["runs"]:
        assert r["reference"] == task_index.reference(r["tokens"])
        assert (r["answer"] == r["reference"]) == r["correct"]
        assert len(r["cot"]) == 6      # the CoT reads x_1..x_6 out, then answers


def test_witness_istree_and_birthday(capsys, tmp_path):
    path = tmp_path / "w.json"
    rc, out, _ = _run(capsys, "witness", "--task", "istree", "--n", "5", "--model", "register", "--bits", "4",
                      "--json", str(path))
    assert rc == 0 and "[TRUE]" in out
    rec = json.loads(path.read_text())
    for r in rec["runs"]:
        assert r["reference"] == task_istree.reference(r["tokens"], R.istree_vertex_count(5))
    rc, out, _ = _run(capsys, "witness", "--task", "index", "--n", "26", "--model", "register", "--bits", "14",
                      "--mode", "birthday", "--seed", "2")
    assert rc == 0 and "birthday (seed 2" in out and "WRONG" in out


@pytest.mark.parametrize("model", ["random", "toy-register", "toy-register-cot", "hash"])
def test_witness_other_models(capsys, model):
    rc, out, _ = _run(capsys, "witness", "--task", "counting", "--n", "12", "--model", model, "--bits", "4")
    assert rc == 0 and "WRONG" in out


def test_witness_not_found_within_capacity(capsys):
    rc, out, _ = _run(capsys, "witness", "--task", "index", "--n", "5", "--model", "register", "--bits", "8")
    assert rc == 1 and "no fooling pair" in out


@pytest.mark.parametrize("argv, msg", [
    (["--task", "nope", "--n", "3", "--model", "register"], "unknown task"),
    (["--task", "index", "--n", "3", "--model", "nope"], "unknown model"),
    (["--task", "index", "--n", "30", "--model", "register", "--mode", "exhaustive"], "too large for exhaustive"),
    (["--task", "index", "--n", "3", "--model", "register", "--mode", "sideways"], "unknown mode"),
    (["--task", "index", "--n", "0", "--model", "register"], "--n must be in"),
    (["--task", "index", "--n", "3", "--model", "register", "--bits", "0"], "--bits"),
    (["--task", "index", "--n", "3", "--model", "register", "--bits", "57"], "--bits"),
    (["--task", "index", "--n", "3", "--model", "random", "--bits", "2"], "--bits"),
    (["--task", "index", "--n", "3", "--model", "hash", "--bits", "65"], "--bits"),
    (["--task", "index", "--n", "3", "--model", "register", "--max-cot", "-1"], "--max-cot"),
    (["--task", "index", "--n", "9", "--model", "register", "--json", "/nonexistent/dir/w.json"], "cannot write"),
    (["--task", "index", "--n", "9", "--model", "register", "--json", "/"], "is a directory"),
    (["--task", "index", "--n", "30", "--model", "random", "--mode", "birthday", "--seed", "-1"], "--seed"),
    (["--task", "index", "--n", "3", "--model", "register", "--seed", "-5"], "--seed"),
])
def test_witness_bad_input(capsys, argv, msg):
    rc, out, err = _run(capsys, "witness", *argv)
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_witness_json_path_checked_before_the_search(capsys, monkeypatch, tmp_path):
    from rnngap.lowerbounds import witness as W

    def search(*a, **k):
        raise AssertionError("the search ran although --json cannot be written")
    monkeypatch.setattr(W, "find_witness", search)
    rc, out, err = _run(capsys, "witness", "--task", "index", "--n", "30", "--model", "register", "--bits", "20",
                        "--mode", "birthday", "--json", str(tmp_path))
    assert rc == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1 and not out


_PROGRESS = re.compile(r"^witness: birthday search: (\d+) draws, (\d+) state keys stored, (\d+\.\d) s$")


def test_witness_birthday_progress_on_stderr_only(capsys, tmp_path, monkeypatch):
    """A 28-bit register needs about 1.25 * 2^14 ~ 20,000 draws, several batches
    of the search, so progress is reported on a terminal; it goes to stderr as
    lines that say how far the search got, never to stdout (which holds the
    result). On a pipe (below) nothing extra is written."""
    from rnngap.checks.cli import cmd_witness
    path = tmp_path / "w.json"
    rc, out, err = _run(capsys, "witness", "--task", "index", "--n", "29", "--model", "register", "--bits", "28",
                        "--mode", "birthday", "--seed", "0", "--json", str(path))
    assert rc == 0 and "WRONG" in out and err == ""                      # stderr is no terminal here
    monkeypatch.setattr(cmd_witness, "on_terminal", lambda stream: True)
    rc, out, err = _run(capsys, "witness", "--task", "index", "--n", "29", "--model", "register", "--bits", "28",
                        "--mode", "birthday", "--seed", "0", "--json", str(path))
    assert rc == 0 and "WRONG" in out
    rec = json.loads(path.read_text())
    lines = err.strip().splitlines()
    assert lines, "no progress on stderr"
    parsed = []
    for line in lines:
        m = _PROGRESS.match(line)
        assert m, line
        parsed.append(tuple(float(g) for g in m.groups()))
    draws = [p[0] for p in parsed]
    assert draws == sorted(set(draws)) and all(0 < d < rec["states_explored"] for d in draws)
    assert all(stored <= d for d, stored, _ in parsed)
    assert "birthday search:" not in out and "state keys stored" not in out


def test_witness_exhaustive_writes_nothing_on_stderr(capsys):
    rc, out, err = _run(capsys, "witness", "--task", "index", "--n", "7", "--model", "register", "--bits", "6")
    assert rc == 0 and err == ""


def test_search_progress_is_throttled():
    """Called every 1/16 s for 10 s with a 1 s interval: the first call is
    reported, then a line whenever a second has passed since the last one, so
    10 lines, at least 1 s apart (times on the fake clock, exact in binary)."""
    import io

    from rnngap.checks.cli.cmd_witness import SearchProgress
    t = [0.0]
    stream = io.StringIO()
    p = SearchProgress(stream, interval=1.0, clock=lambda: t[0])
    reported_at = []
    for k in range(1, 161):
        t[0] = k / 16
        before = stream.getvalue().count("\n")
        p(4096 * k, 4000 * k)
        if stream.getvalue().count("\n") > before:
            reported_at.append(t[0])
    lines = stream.getvalue().splitlines()
    assert reported_at[0] == 1 / 16 and len(lines) == len(reported_at) == p.lines == 10, lines
    assert all(b - a >= 1.0 for a, b in zip(reported_at, reported_at[1:])), reported_at
    assert all(_PROGRESS.match(line) for line in lines), lines
    assert lines[0].startswith("witness: birthday search: 4096 draws, 4000 state keys stored")


def test_missing_required_argument_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["witness", "--task", "index", "--n", "3"])
    assert e.value.code == 2


def test_registry_quick_profile_passes():
    from rnngap.checks.verify import registry
    records = registry.run("quick", only=["T4.6-low", "T4.7-low"], seed=0)
    assert records and all(r.passed for r in records), [r.note for r in records if not r.passed]
    labels = " ".join(r.description for r in records)
    for what in ("cc index", "Index -> istree", "index witness (CoT <= n)", "index witness (no CoT)",
                 "birthday witness", "random", "istree witness"):
        assert what in labels or any(what in r.model for r in records), what
    # the register is correct up to its capacity with its declared precision and CoT bound
    for r in records:
        if "all instances" in r.description:
            assert r.failures == 0 and r.precision_bits_used <= r.precision_bits_declared
            assert r.cot_max <= r.cot_bound


# ---------------------------------------------------------------- issue 18: cc sizes in logarithms, --n capped

@pytest.mark.parametrize("argv", [
    ["cc", "--task", "index", "--n", "1000000000000"],
    ["cc", "--task", "counting", "--n", "1000000000000"],
    ["cc", "--task", "istree", "--n", "1000000000000"],
    ["cc", "--task", "index", "--n", "1000000000000", "--table"],
    ["cc", "--task", "index", "--n", "20000"],
    ["cc", "--task", "counting", "--n", "20000", "--table"],
    ["cc", "--task", "ar", "--n", "3", "--alphabet", "1" + "0" * 400],
    ["cc", "--task", "istree", "--n", "2", "--alphabet", "1" + "0" * 30],
])
def test_cc_huge_sizes_refused_at_once_with_the_cap(capsys, argv):
    """Before: computed alphabet**n*n first and never returned (MemoryError with
    --table, a digit-limit error at n = 20000). Now one line in well under a
    second, saying the cap and not suggesting an option the CLI lacks."""
    import time
    t0 = time.perf_counter()
    rc, out, err = _run(capsys, *argv)
    assert time.perf_counter() - t0 < 2
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "too large" in err and "max_cells" not in err, err
    assert re.search(r"the cap is --n \d+|no n fits", err), err
    assert out == ""


def test_cc_cap_is_the_largest_n_that_runs():
    """max_n is monotone and the library (which checks the exact cell count)
    accepts n = cap and refuses a matrix one step larger than MAX_CELLS."""
    from rnngap.checks.cli import cmd_cc
    from rnngap.lowerbounds import cc
    for task in ("index", "ar", "cgram", "counting", "istree"):
        cap = cmd_cc.max_n(task, 2)
        assert cap >= 4
        assert all(cmd_cc._fits(task, n, 2) for n in range(1, cap + 1)) and not cmd_cc._fits(task, cap + 1, 2)
    cmd_cc.make_problem("index", cmd_cc.max_n("index", 2), 2)      # builds (no ValueError)
    with pytest.raises(ValueError, match="too large"):
        cc.index_split(10 ** 9, lambda t: 0)                       # in logarithms: returns at once


def test_cc_check_size_power_agrees_with_the_exact_count():
    from rnngap.lowerbounds import cc
    for base, exp, factor in [(2, 20, 2), (3, 12, 12), (2, 21, 1), (1, 5, 10 ** 6), (10 ** 6, 1, 3)]:
        exact_ok = base ** exp * factor <= 2_000_000
        try:
            cc.check_size_power(base, exp, factor, 2_000_000, "x")
            ok = True
        except ValueError:
            ok = False
        assert ok == exact_ok, (base, exp, factor)


def test_witness_birthday_stops_at_the_work_cap(capsys, tmp_path, monkeypatch):
    """The birthday search's draws x prefix tokens never pass the work cap: a 64-bit
    hash (2^24 draws by default) at n = 200 stops after cap // 201 draws, says so,
    and finds nothing; below the cap the default budget is kept (the 28-bit register
    of the test above still finds its pair)."""
    from rnngap.checks.cli import cmd_witness
    from rnngap.lowerbounds import witness as W
    monkeypatch.setattr(cmd_witness, "BIRTHDAY_WORK_CAP", 1 << 20)
    path = tmp_path / "w.json"
    rc, out, _ = _run(capsys, "witness", "--task", "index", "--n", "200", "--model", "hash", "--bits", "64",
                      "--mode", "birthday", "--seed", "0", "--json", str(path))
    rec = json.loads(path.read_text())
    assert rc == 1 and not rec["found"] and "work cap of 1048576 token steps" in out, out
    assert rec["max_draws"] == (1 << 20) // 201 < W.default_max_draws(64)
    assert rec["states_explored"] <= rec["max_draws"]
    monkeypatch.undo()                                    # the real cap
    rc, out, _ = _run(capsys, "witness", "--task", "index", "--n", "29", "--model", "register", "--bits", "28",
                      "--mode", "birthday", "--seed", "0", "--json", str(path))
    rec = json.loads(path.read_text())
    assert rc == 0 and rec["found"] and "work cap" not in out
    assert rec["max_draws"] == W.default_max_draws(rec["state_bits"])
