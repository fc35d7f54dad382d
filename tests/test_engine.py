"""The sharded registry and ``rnngap verify --engine dask`` (checks/verify/engine.py).

The Dask engine must give the serial engine's records (same records, same order,
same fields; ``seconds`` is wall-clock time and left out of every comparison), on
a real LocalCluster and on a scheduler and worker started as separate processes;
a part that raises is a FAIL row as in the serial run; a worker that dies has its
part rerun. Usage errors exit 2 before any cluster starts.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rnngap.checks.verify import registry
from rnngap.checks.cli.main import main
from rnngap.checks.verify.registry import Check, Record
from rnngap.checks.tasks import NO_TASK

distributed = pytest.importorskip("distributed")   # the dev extra installs it (pyproject.toml)


def _strip(records) -> list[dict]:
    """Records as JSON objects without the wall-clock ``seconds``."""
    return [{k: v for k, v in (r.as_json() if isinstance(r, Record) else r).items() if k != "seconds"}
            for r in records]


@pytest.fixture(scope="module")
def client():
    """One real 2-worker LocalCluster (processes, one thread each) for this module."""
    from rnngap.checks.verify import engine

    with engine._config(), distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                    dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


# ------------------------------------------------------------------ test-only checks (module level:
# the workers import this module to unpickle them)
def _parts_check(profile, seed, part):
    """A sharded check: one record per part, a part "raise" raises."""
    if part == "raise":
        raise ArithmeticError("part says no")
    return [Record("machine", "test parts", NO_TASK, part, 1, 0, note=f"seed {seed}, {profile}",
                   description=f"part {part}")]


def _dying_check(profile, seed, part):
    """Part (marker, k): the first attempt of k = 1 kills its worker process."""
    marker, k = part
    if k == 1 and not os.path.exists(marker):
        Path(marker).write_text("died once")
        os._exit(1)
    return [Record("machine", "test dying worker", NO_TASK, k, 1, 0, note=Path(marker).read_text()
                   if k == 1 else "", description=f"part {k}")]


def _merging_combine(profile, seed, outputs):
    """Sum the parts' records into one."""
    return [Record("machine", "test merge", NO_TASK, sum(r.n for o in outputs for r in o),
                   sum(r.instances for o in outputs for r in o), 0, note=f"{len(outputs)} parts",
                   description="sum")]


# ------------------------------------------------------------------ registry: parts, assemble
def test_register_a_sharded_check_runs_every_part_in_order(monkeypatch):
    registry.load_checks()            # every module imported first: nothing registers into the patched list
    monkeypatch.setattr(registry, "REGISTRY", [])
    fn = registry.register("machine", "test parts", parts=lambda profile: [3, 1, 2])(_parts_check)
    (chk,) = registry.REGISTRY
    assert chk.part_keys("quick") == [3, 1, 2] and chk.fn is fn
    assert [r.n for r in fn("quick", 0)] == [3, 1, 2]           # no part: the whole check, in order
    assert [r.n for r in fn("quick", 0, 2)] == [2]
    seen = []
    recs = registry.run("quick", ["machine"], 5, progress=lambda t: seen.append(t.part))
    assert seen == [3, 1, 2] and [r.n for r in recs] == [3, 1, 2] and recs[0].note == "seed 5, quick"
    with pytest.raises(ValueError, match="combine needs parts"):
        registry.register("machine", "x", combine=_merging_combine)


def test_a_raising_part_is_a_fail_row_in_place_of_its_records(monkeypatch):
    registry.load_checks()
    monkeypatch.setattr(registry, "REGISTRY", [Check("machine", "test parts", _parts_check,
                                                     parts=lambda p: [1, "raise", 2]),
                                               Check("machine", "test merge", _parts_check,
                                                     parts=lambda p: [1, "raise"], combine=_merging_combine)])
    recs = registry.run("quick", ["machine"])
    assert [(r.description, r.passed) for r in recs] == [("part 1", True), ("check raised an error", False),
                                                  ("part 2", True), ("check raised an error", False)]
    assert recs[1].note == "part raise: ArithmeticError: part says no" == recs[3].note


def test_index_exhaustive_split_in_ranges_equals_the_unsplit_record():
    """The exhaustive Index reduction record (quick: m = 1..12) computed from chunk
    ranges (chunks of 2^7 strings, 3 chunks a range: m = 8..12 split in 1 to 11
    ranges, the last one short) equals the record of one part per m."""
    from rnngap.checks.verify import checks_retrieval as CR

    def record(**kw):
        parts = CR._reduction_exhaustive_parts("index", "quick", **kw)
        return parts, CR._reduction_exhaustive_record(
            "index", "quick", [CR._reduction_exhaustive_part("index", *p[1:]) for p in parts])

    whole_parts, (whole, whole_seen) = record()
    split_parts, (split, split_seen) = record(chunk_bits=7, range_chunks=3)
    assert len(whole_parts) == 12 and len(split_parts) == 7 + sum(-(-2 ** (m - 7) // 3) for m in range(8, 13))
    assert _strip([split]) == _strip([whole]) and split_seen == whole_seen
    assert whole.instances == sum(m * 2 ** m for m in range(1, 13)) and whole.passed



def _istree_exhaustive(split: dict[int, int]) -> tuple[list, list[Record]]:
    """The quick T4.7-up exhaustive records computed from the parts of ``split``."""
    from rnngap.checks.verify import checks_istree as CI

    parts = CI.exhaustive_parts("quick", split)
    return parts, CI.exhaustive_combine("quick", 0, [CI.exhaustive_part("quick", 0, p) for p in parts])


def test_istree_exhaustive_split_in_ranges_equals_the_unsplit_record():
    """The exhaustive IsTree records (quick: n = 1..6) computed from case ranges
    (n = 4 in 3 ranges, n = 5 in 7, n = 6 in 2) equal the records of one part per n."""
    whole_parts, whole = _istree_exhaustive({})
    split_parts, split = _istree_exhaustive({4: 3, 5: 7, 6: 2})
    assert len(whole_parts) == 6 and len(split_parts) == 3 + 3 + 7 + 2
    assert _strip(split) == _strip(whole) and [r.n for r in whole] == [1, 2, 3, 4, 5, 6]
    assert all(r.passed for r in whole) and whole[3].instances > 24


def test_istree_exhaustive_merge_keeps_the_unsplit_order_of_failures(monkeypatch):
    """With failures planted in every pass (a stand-in for the model run: the main
    pass fails only on the complete graphs, which come last, so only in the last
    range), the merged records name the failure the unsplit run meets first (every
    case, then the '~' pass, then the header pass) and count every one."""
    from rnngap.checks.verify import checks_istree as CI
    from rnngap.constructions.machine.vocab import DASH

    def planted(model, cases, sep=DASH, count="auto"):
        out = CI.Outcome()
        for n_nodes, edges in cases:
            out.instances += 1
            out.cot_max = max(out.cot_max, 2 * len(edges))
            if 2 * len(edges) == n_nodes * (n_nodes - 1) or (sep != DASH and len(edges) == 1) \
                    or count == "always":
                out.fail(f"sep {sep} count {count} n {n_nodes} edges {edges}")
        return out
    monkeypatch.setattr(CI, "teacher_forced_failures", planted)
    _, whole = _istree_exhaustive({})
    _, split = _istree_exhaustive({3: 2, 4: 5, 5: 3, 6: 4})
    assert _strip(split) == _strip(whole)
    assert all(r.failures > 0 and not r.passed for r in whole)
    for r in whole[2:5]:         # n = 3, 4, 5 (every graph): the first failure is the main pass's complete graph
        assert f"sep {DASH} count auto n {r.n} edges [(" in r.note


# ------------------------------------------------------------------ the Dask engine on a LocalCluster
def _index_check_in_ranges():
    """The T4.6-up Index check with its exhaustive reduction split into chunk ranges
    (2^8 strings a chunk, 4 chunks a range) and only the sampled n <= 2^10."""
    from rnngap.checks.verify import checks_retrieval as CR

    (chk,) = [c for c in registry.load_checks() if c.fn is CR.check_index]

    def parts(profile):
        rex = [("index", *p) for p in CR._reduction_exhaustive_parts("index", profile, chunk_bits=8, range_chunks=4)]
        rest = [p for p in chk.part_keys(profile) if p[1] != "rex" and (p[1] != "sam" or p[2] <= 2 ** 10)
                and (p[1] != "rsam" or p[2] <= 2 ** 10)]
        return rex + rest
    return Check(chk.claim, chk.name, chk.fn, parts, chk.combine, chk.cost)


def test_dask_equals_serial_on_a_sharded_check_with_a_merged_range_record(client, monkeypatch):
    """A sharded check whose first record merges index ranges, a plain check and
    a failing part: the Dask engine's records equal the serial engine's."""
    registry.load_checks()
    machine = [c for c in registry.REGISTRY if c.claim == "machine"]
    checks = [_index_check_in_ranges()] + machine + [Check("machine", "test parts", _parts_check,
                                                           parts=lambda p: [7, "raise", 8])]
    monkeypatch.setattr(registry, "REGISTRY", checks)
    assert sum(1 for p in checks[0].part_keys("quick") if p[1] == "rex") > 12     # really split
    from rnngap.checks.verify import engine

    done = []
    serial = registry.run("quick", ["T4.6-up", "machine"], 3)
    dask = engine.run("quick", ["T4.6-up", "machine"], 3, client=client,
                      progress=lambda t, k, total: done.append((k, total)))
    assert _strip(dask) == _strip(serial)
    assert [k for k, _ in done] == list(range(1, len(done) + 1)) and done[-1][1] == len(done) \
        == sum(len(c.part_keys("quick")) for c in checks)
    assert serial[0].description.startswith("reduction image, every x and i") and serial[0].passed
    assert [r.status for r in dask[-3:]] == ["PASS", "FAIL", "PASS"]
    assert "ArithmeticError: part says no" in dask[-2].note


def test_a_worker_that_dies_has_its_part_rerun(client, monkeypatch, tmp_path):
    """A part that kills its worker (os._exit) on its first attempt: the scheduler
    reruns it on a worker and the run completes with the right records."""
    from rnngap.checks.verify import engine

    marker = str(tmp_path / "died")
    registry.load_checks()
    monkeypatch.setattr(registry, "REGISTRY", [Check("machine", "test dying worker", _dying_check,
                                                     parts=lambda p: [(marker, k) for k in range(4)])])
    recs = engine.run("quick", ["machine"], 0, client=client)
    assert Path(marker).exists(), "the part never killed its worker"
    assert [(r.description, r.passed) for r in recs] == [(f"part {k}", True) for k in range(4)]
    assert recs[1].note == "died once"
    client.wait_for_workers(2, timeout=120)          # the nanny restarted the worker
    # serial agrees (the marker exists now, so nothing dies in this process)
    assert _strip(registry.run("quick", ["machine"])) == _strip(recs)


# ------------------------------------------------------------------ CLI
def _main(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:          # argparse's own errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def no_cluster(monkeypatch):
    """Fail the test if a cluster or a run starts."""
    from rnngap.checks.verify import engine

    def boom(*a, **k):
        raise AssertionError("a run started although the arguments are bad")
    monkeypatch.setattr(engine, "run", boom)
    monkeypatch.setattr(engine, "run_local", boom)
    monkeypatch.setattr(registry, "run", boom)
    monkeypatch.setattr(distributed, "LocalCluster", boom)


@pytest.mark.parametrize("argv,needle", [
    (["--workers", "0"], "--workers must be >= 1"),
    (["--address", "tcp://127.0.0.1:8786"], "--address needs --engine dask"),
    (["--engine", "serial", "--workers", "2"], "--workers must be 1 or absent"),
    (["--engine", "dask", "--workers", "0"], "--workers must be >= 1"),
    (["--engine", "dask", "--address", "127.0.0.1:8786"], "--address must look like tcp://HOST:PORT"),
    (["--engine", "dask", "--address", "tcp://h:1", "--workers", "2"], "not both"),
    (["--engine", "dask", "--only", "nosuchclaim"], "unknown claim or construction"),
    (["--engine", "dask", "--seed", "-1"], "--seed must be >= 0"),
    (["--engine", "ray"], "invalid choice"),
])
def test_bad_engine_usage_exits_2_with_one_line(capsys, no_cluster, argv, needle):
    rc, out, err = _main(capsys, "verify", "--only", "machine", *argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and err.startswith("rnngap: "), err


def test_missing_distributed_names_the_extra(capsys, no_cluster, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)          # import distributed -> ImportError
    rc, out, err = _main(capsys, "verify", "--only", "machine", "--engine", "dask")
    assert rc == 2 and "pip install 'rnngap[dask]'" in err and err.count("\n") == 1, err


def test_an_unreachable_scheduler_exits_2(capsys, tmp_path):
    port = _free_port()                                  # nothing listens there
    from rnngap.checks.verify import engine

    with pytest.raises(engine.SchedulerUnreachable, match=f"tcp://127.0.0.1:{port}"):
        engine.run("quick", ["machine"], 0, address=f"tcp://127.0.0.1:{port}", connect_timeout="2s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "rnngap.checks.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _children(p: subprocess.Popen) -> list:
    """The processes ``p`` started (none once ``p`` has ended)."""
    import psutil

    try:
        return psutil.Process(p.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _spawned(q) -> bool:
    """Whether ``q`` is a spawned worker. A process that ended meanwhile, or a zombie
    not yet reaped (a cluster's helper process ending), has no command line to read:
    it is not a running worker."""
    import psutil

    try:
        return "spawn_main" in " ".join(q.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):     # ZombieProcess is a NoSuchProcess
        return False


def _kill_tree(p: subprocess.Popen) -> None:
    """End ``p`` (which we started) and every process it started."""
    import psutil

    try:
        procs = psutil.Process(p.pid).children(recursive=True) + [psutil.Process(p.pid)]
    except psutil.NoSuchProcess:
        return
    for q in procs:
        try:
            q.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)


def test_verify_on_a_separately_started_scheduler_and_worker_equals_serial(tmp_path):
    """`dask scheduler` and `dask worker` as separate processes on 127.0.0.1; `rnngap
    verify --engine dask --address` against them gives the serial run's JSON; both
    are torn down (also on failure)."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker")}
    procs = []
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                       "--port", str(port), "--no-dashboard"], stdout=logs["scheduler"],
                                      stderr=subprocess.STDOUT, env=dict(os.environ, DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL="None")))
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "1",
                                       "--nworkers", "1", "--no-dashboard"], stdout=logs["worker"],
                                      stderr=subprocess.STDOUT))
        with distributed.Client(addr, timeout="60s") as c:
            c.wait_for_workers(1, timeout=120)
        only = ["--only", "machine", "T5-hyb-P"]
        d = _cli("verify", "--engine", "dask", "--address", addr, *only, "--json", str(tmp_path / "d.json"))
        s = _cli("verify", *only, "--json", str(tmp_path / "s.json"))
        (_, derr), (_, serr) = d.communicate(timeout=900), s.communicate(timeout=900)
        assert d.returncode == 0 == s.returncode, (derr, serr)
        dj, sj = (json.loads((tmp_path / f).read_text()) for f in ("d.json", "s.json"))
        assert len(sj) > 10 and _strip(dj) == _strip(sj)
        assert [r["claim"] for r in sj] == [r["claim"] for r in dj] and {r["claim"] for r in sj} == {"machine",
                                                                                                   "T5-hyb-P"}
        assert all(p.poll() is None for p in procs), "the scheduler or the worker died"
    finally:
        for p in reversed(procs):
            _kill_tree(p)
        for fh in logs.values():
            fh.close()
    assert all(p.poll() is not None for p in procs)


def test_ctrl_c_exits_130_and_closes_the_local_cluster(tmp_path):
    """SIGINT while the local cluster runs: one line, exit 130, no JSON, and no
    worker process left behind."""
    import psutil

    p = _cli("verify", "--engine", "dask", "--workers", "2", "--only", "T4.6-up", "--json", str(tmp_path / "v.json"),
             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        workers = []
        while time.monotonic() < deadline and len(workers) < 2 and p.poll() is None:   # wait until both workers run
            time.sleep(1)
            workers = [q for q in _children(p) if _spawned(q)]
        assert p.poll() is None and len(workers) >= 2, "no local cluster came up"
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 130 and err.strip().splitlines()[-1] == "rnngap: interrupted", (p.returncode, err)
        gone, alive = psutil.wait_procs(workers, timeout=60)
        assert not alive, f"worker processes left behind: {alive}"
        assert not (tmp_path / "v.json").exists() and list(tmp_path.iterdir()) == []
    finally:
        _kill_tree(p)


# ------------------------------------------------------------------ the whole quick profile
@pytest.mark.full
def test_whole_quick_profile_dask_equals_serial():
    """Every registered check, quick profile: the Dask engine (2-worker LocalCluster)
    gives the serial engine's records (seconds aside)."""
    from rnngap.checks.verify import engine

    serial = registry.run("quick", None, 0)
    dask = engine.run("quick", None, 0, workers=2)
    assert len(serial) > 800 and _strip(dask) == _strip(serial)


# ------------------------------------------------------------------ parts that replay a shared generator
class _Dummy:
    name, params = "dummy", 1


def _capture(monkeypatch, CR):
    """Patch the T5-RAG checks to record the rows each part would run (no model runs)."""
    seen = []
    monkeypatch.setattr(CR, "_run_rows", lambda c, rows, want_cot=None: seen.append(
        [tuple(map(int, r[0])) for r in rows]) or (len(seen[-1]), 0, 0, 0, ""))
    monkeypatch.setattr(CR, "_record", lambda c, task, n, stats, *a, **k: Record(
        "T5-RAG", "m", k["task_name"], n, stats[0], 0, description=task))
    monkeypatch.setattr(CR, "BUILD", {k: (lambda n, a: _Dummy()) for k in CR.BUILD})
    monkeypatch.setattr(CR, "red_setup", lambda task, n: (_red_only(task), _Dummy(), 0))
    monkeypatch.setattr(CR, "_istree", lambda N, paper=False: _Dummy())
    monkeypatch.setattr(CR, "_istree_rows", lambda c, graphs, paper=False: seen.append(
        [tuple(map(tuple, g)) for g in graphs]) or (len(graphs), 0, 0, 0, ""))
    return seen


def _red_only(task):
    """The reduction object of ``checks_rag.red_setup`` without building its model."""
    from rnngap.checks.verify import checks_rag as CR

    LR = CR._reductions()
    return {"index": LR.INDEX, "ar": LR.AR, "counting": LR.COUNTING}.get(task) or LR.cgram_reduction(
        int(task.split("-")[0]))


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_rag_parts_draw_the_instances_of_one_generator_in_order(monkeypatch, profile):
    """The T5-RAG rows that share one seeded generator, run part by part in REVERSE
    order, get the instances a single generator drawn in the unsplit order gives."""
    from rnngap.checks.verify import checks_rag as CR
    import numpy as np

    seen = _capture(monkeypatch, CR)
    # retrieval easy families: one generator over every task's seeded rows
    rng, want = np.random.default_rng(9), []
    for name in CR.RETRIEVAL_NAMES:
        for n, size in CR._growing(name, profile):
            want.append([tuple(map(int, r[0])) for r in CR._batch(name, n, CR.ALPHABET[name], rng, size).rows()])
    parts = [p for p in CR._retrieval_parts(profile) if p[1] == "seeded"]
    for p in reversed(parts):
        CR.retrieval_check(profile, 9, p)
    assert seen[::-1] == want and len(want) == len(parts)
    # the reduction rows
    seen.clear()
    rng, want = np.random.default_rng(9 + 7), []
    for task in CR.RED_TASKS:
        for n in CR._red_sizes(task, profile):
            red = _red_only(task)
            want.append([tuple(map(int, t)) for t, _ in CR.red_rows(red, CR.red_pairs(n, rng, 2 if n <= 1024 else 1))])
    parts = [p for p in CR._reduction_parts(profile) if p[1] == "seeded"]
    for p in reversed(parts):
        CR.reduction_check(profile, 9, p)
    assert seen[::-1] == want
    # IsTree: gadget samples, edge orders, random graphs from one generator
    seen.clear()
    rng, want, LR = np.random.default_rng(9 + 1), [], CR._reductions()
    orders = 1 if profile == "quick" else 2
    for n in CR.ISTREE_RED_SAMPLED[profile]:
        want.append([tuple(map(int, LR.ISTREE.instance(x, i))) for x, i in CR.red_pairs(n, rng, sample=1)])
    for N in range(1, 5 if profile == "quick" else 6):
        want.append([tuple(map(tuple, o)) for e in CR.istree.enumerate_graphs(N)
                     for o in CR.istree.edge_orders(e, orders, rng)[:orders]])
    for N, size in CR.ISTREE_SEEDED[profile]:
        want.append([tuple(map(tuple, g.edges)) for g in CR.istree.generate(rng, N, size)])
    parts = [p for p in CR._istree_parts(profile) if p[0] != "gadget"]
    for p in reversed(parts):
        CR.istree_check(profile, 9, p)
    assert seen[::-1] == want
