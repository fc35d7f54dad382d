"""``rnngap verify`` on local worker processes (checks/verify/engine.py, the default on a
machine with more than one core): the same records as the serial engine, in the
same order (``seconds`` aside), a raising part a FAIL row in place, and no worker
process left when the run is interrupted."""
from __future__ import annotations

import json
import time

import pytest

from rnngap.checks.verify import engine, registry
from rnngap.checks.cli.main import main
from rnngap.checks.verify.registry import Check, Record
from rnngap.checks.tasks import NO_TASK


@pytest.fixture(autouse=True)
def _history_in_tmp(monkeypatch, tmp_path):
    """The parallel runs here keep their part seconds in the test's folder."""
    monkeypatch.setattr(engine, "history_file", lambda profile: tmp_path / f"history-{profile}.json")


def _strip(records) -> list[dict]:
    return [{k: v for k, v in (r.as_json() if isinstance(r, Record) else r).items() if k != "seconds"}
            for r in records]


def _parts_check(profile, seed, part):
    """A sharded check (module level: the workers import it): a part "raise" raises."""
    if part == "raise":
        raise ArithmeticError("part says no")
    return [Record("machine", "test parts", NO_TASK, part, 1, 0, note=f"seed {seed}, {profile}",
                   description=f"part {part}")]


def test_local_workers_equal_serial_with_a_raising_part(monkeypatch):
    registry.load_checks()
    real = [c for c in registry.REGISTRY if c.claim in ("machine", "gadgets")]
    checks = real + [Check("machine", "test parts", _parts_check, parts=lambda p: [7, "raise", 8])]
    monkeypatch.setattr(registry, "REGISTRY", checks)
    done = []
    serial = registry.run("quick", ["machine", "gadgets"], 3)
    local = engine.run_local("quick", ["machine", "gadgets"], 3, workers=2,
                             progress=lambda t, k, total: done.append((k, total)))
    assert _strip(local) == _strip(serial)
    assert len(serial) > 10 and [r.status for r in local[-3:]] == ["PASS", "FAIL", "PASS"]
    assert "ArithmeticError: part says no" in local[-2].note
    assert [k for k, _ in done] == list(range(1, len(done) + 1)) and done[-1][1] == len(done)


def test_verify_defaults_to_every_core_and_writes_the_serial_records(monkeypatch, tmp_path, capsys):
    """No --workers: $RNNGAP_VERIFY_WORKERS, else the machine's cores; the records of
    2 workers equal those of --workers 1."""
    monkeypatch.setenv("RNNGAP_VERIFY_WORKERS", "2")
    seen = []
    real = engine.run_local
    monkeypatch.setattr(engine, "run_local", lambda *a, **k: seen.append(k["workers"]) or real(*a, **k))
    assert main(["verify", "--only", "gadgets", "--json", str(tmp_path / "p.json")]) == 0
    assert seen == [2]
    assert main(["verify", "--only", "gadgets", "--workers", "1", "--json", str(tmp_path / "s.json")]) == 0
    assert seen == [2]
    capsys.readouterr()
    parallel, serial = (json.loads((tmp_path / f"{x}.json").read_text()) for x in "ps")
    assert _strip(parallel) == _strip(serial)
    monkeypatch.delenv("RNNGAP_VERIFY_WORKERS")
    from rnngap.checks.cli import main as cli
    assert cli.default_workers() == engine.default_workers() >= 1
    monkeypatch.setenv("RNNGAP_VERIFY_WORKERS", "zero")
    assert main(["verify", "--only", "gadgets"]) == 2
    assert "RNNGAP_VERIFY_WORKERS" in capsys.readouterr().err


def _sleepy_check(profile, seed, part):
    """Part "slow" runs for two minutes (only a kill ends it sooner), "fast" at once."""
    time.sleep(120 if part == "slow" else 0)
    return [Record("machine", "test sleep", NO_TASK, 0, 1, 0, description=f"part {part}")]


def test_an_interrupted_local_run_leaves_no_worker(monkeypatch):
    """KeyboardInterrupt in the parent (here from the progress callback, as Ctrl-C
    arrives between parts) while a worker is busy with a long part: the pool's
    processes are ended before it propagates."""
    registry.load_checks()
    monkeypatch.setattr(registry, "REGISTRY",
                        [Check("machine", "test sleep", _sleepy_check, parts=lambda p: ["slow", "fast"])])
    seen = []
    before = set(multiprocessing_children())      # an earlier test's processes still ending (a Dask nanny's)

    def stop(t, k, total):
        seen.extend(q for q in multiprocessing_children() if q not in before)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        engine.run_local("quick", ["machine"], 0, workers=2, progress=stop)
    assert seen, "no worker process was running"
    for q in seen:
        q.join(timeout=10)
    # asked of the OS: multiprocessing's is_alive() answers True for a process
    # another waiter (the pool's manager thread) reaped first (waitpid: ECHILD)
    deadline = time.monotonic() + 10
    while any(_running(q.pid) for q in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [q.pid for q in seen if _running(q.pid)]


def _running(pid: int) -> bool:
    """The process exists and has not ended (a zombie has ended; Linux /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def multiprocessing_children():
    import multiprocessing
    return multiprocessing.active_children()


@pytest.mark.full
def test_whole_quick_profile_local_workers_equal_serial():
    serial = registry.run("quick", None, 0)
    local = engine.run_local("quick", None, 0, workers=2)
    assert len(serial) > 800 and _strip(local) == _strip(serial)


def _announced() -> bool:
    from rnngap.constructions.machine import runtime
    return runtime._ANNOUNCED


def test_workers_never_repeat_the_numba_cache_note():
    """Where the kernels cannot be cached in the package, the note is written once,
    by the parent: every worker starts with it marked as written."""
    with engine.PoolClient(2) as c:
        flags = [f.result() for f in [c.submit(_announced) for _ in range(4)]]
    assert flags == [True] * 4


def test_every_check_function_pickles():
    """The local pool and Dask send each part's function by reference: a check
    registered under a name its module does not bind to it cannot be sent."""
    import pickle
    registry.load_checks()
    bad = []
    for c in registry.REGISTRY:
        try:
            pickle.loads(pickle.dumps(c.fn))
        except Exception as e:
            bad.append(f"{c.claim} / {c.name}: {type(e).__name__}: {e}")
    assert not bad, bad


def test_parts_start_longest_first_as_last_run_measured():
    """Parts with no recorded seconds first (cost hint order), then the recorded
    ones longest first; only the order changes, never which parts run."""
    registry.load_checks()
    plan = registry.plan("quick", None)
    tasks = [(ci, pi, registry.Task(c, p)) for ci, (c, ps) in enumerate(plan) for pi, p in enumerate(ps)]
    assert len(tasks) > 50
    hist = {engine.part_key(t): float(i % 7) for i, (_, _, t) in enumerate(tasks[:40])}
    got = engine.order(tasks, hist)
    assert sorted(got, key=lambda x: (x[0], x[1])) == tasks
    keys = [engine.part_key(t) for _, _, t in got]
    known = [k for k in keys if k in hist]
    assert all(k not in hist for k in keys[:len(tasks) - 40]) and len(known) == 40
    assert [hist[k] for k in known] == sorted((hist[k] for k in known), reverse=True)
    assert engine.order(tasks, {}) == sorted(tasks, key=lambda x: -engine._priority(x[2]))


def test_a_parallel_run_records_every_part_for_the_next(tmp_path):
    path = engine.history_file("quick")
    path.write_text("{not json")                      # unreadable: ignored, then replaced
    assert engine.load_history("quick") == {}
    engine.run_local("quick", ["gadgets", "machine"], 0, workers=2)
    data = json.loads(path.read_text())
    want = {engine.part_key(registry.Task(c, p)) for c, ps in registry.plan("quick", ["gadgets", "machine"])
            for p in ps}
    assert set(data) == want and all(v >= 0 for v in data.values())
    assert engine.load_history("quick") == data


def test_an_unwritable_history_is_skipped(monkeypatch, tmp_path):
    """The order is only a hint: a folder that cannot be written costs nothing."""
    monkeypatch.setattr(engine, "history_file", lambda profile: tmp_path / "missing" / "h.json")
    engine.save_history("quick", {"a": 1.0})
    assert not (tmp_path / "missing").exists() and engine.load_history("quick") == {}


def _compiling_check(profile, seed):
    """A check that compiles a new kernel each time it runs (a fresh closure)."""
    from numba import njit
    k = seed + 1

    @njit
    def add_k(a):
        s = 0
        for v in a:
            s += v + k
        return s
    return [Record("machine", "test compile", NO_TASK, int(add_k(__import__("numpy").arange(3))), 1, 0,
                   description="compiles")]


def _python_check(profile, seed):
    return [Record("machine", "test python", NO_TASK, seed, 1, 0, description="no kernel")]


@pytest.mark.skipif(bool(__import__("os").environ.get("NUMBA_DISABLE_JIT")), reason="no compiling without the JIT")
def test_part_seconds_for_the_history_leave_out_compiling():
    """A part that compiles a kernel reports the compile seconds, and the history
    gets its seconds without them; a part that compiles nothing reports 0."""
    r = registry.run_part(_compiling_check, "quick", 0, None, False)
    assert r.error is None and r.output[0].n == 6
    assert 0 < r.compile_seconds <= r.seconds
    assert r.history_seconds == round(r.seconds - r.compile_seconds, 3)
    p = registry.run_part(_python_check, "quick", 0, None, False)
    assert p.compile_seconds == 0 and p.history_seconds == p.seconds


class _Recorder(engine.PoolClient):
    """A PoolClient that starts no process and records what is submitted."""

    def __init__(self, workers):
        self.workers, self.calls = workers, []

    def submit(self, fn, *args, **kw):
        self.calls.append((fn, *args))
        return None


def test_the_local_pool_warms_one_kernel_group_per_worker(monkeypatch):
    from rnngap.constructions.models.warmup import GROUPS, warm
    c = _Recorder(2)
    assert len(engine._warm_up(c, "quick")) == 2 and c.calls == [(warm, 0), (warm, 1)] and len(GROUPS) == 2
    c = _Recorder(3)                                  # more workers than groups: one task per group
    engine._warm_up(c, "quick")
    assert c.calls == [(warm, 0), (warm, 1)]
    c = _Recorder(1)                                  # one worker: nothing to split
    assert engine._warm_up(c, "quick") == [] and c.calls == []
    monkeypatch.setattr(engine, "history_file", lambda profile: None)   # no cache folder: nothing to share
    c = _Recorder(2)
    assert engine._warm_up(c, "quick") == [] and c.calls == []
    with pytest.raises(ValueError, match="group must be one of 0..1"):
        warm(2)


def test_only_a_run_of_the_whole_registry_warms_up(monkeypatch):
    """--only may select checks that call none of the warmed kernels: no warm-up."""
    calls = []
    monkeypatch.setattr(engine, "_warm_up", lambda client, profile: calls.append(profile) or [])
    registry.load_checks()
    monkeypatch.setattr(registry, "REGISTRY", [c for c in registry.REGISTRY if c.claim == "gadgets"])
    subset = engine.run_local("quick", ["gadgets"], 0, workers=2)
    assert calls == []
    whole = engine.run_local("quick", None, 0, workers=2)
    assert calls == ["quick"] and _strip(whole) == _strip(subset)


_SIGNATURES = r"""
import json, sys
import numpy as np
from rnngap.constructions.machine import batch as BT, kernels as K, lanes as LN, readouts as RO
from rnngap.constructions.models import targets as T
from rnngap.constructions.models.warmup import warm
KERNELS = {"forward_loop": BT.forward_loop, "_lanes": LN._lanes, "feed_flat": K.feed_flat,
           "feed_rnn_sparse": BT.feed_rnn_sparse, "readout_flat": RO.readout_flat,
           "_sparse_final_states": T._sparse_final_states}
def sigs():
    return {k: sorted(map(str, f.signatures)) for k, f in KERNELS.items()}
warm(0); warm(1)
after_warm = sigs()
from rnngap.constructions.models.retrieval import counting_transformer, index_transformer
paths = []
for mod, name in ((BT, "forward_batch"), (LN, "forward_lanes")):
    def counted(*a, _f=getattr(mod, name), _n=name):
        paths.append(_n)
        return _f(*a)
    setattr(mod, name, counted)
for m in (index_transformer(300), counting_transformer(300)):
    for n in (5, 300):
        toks = np.full((40, n), int(m.candidates[-1]), dtype=np.int64)   # 40 rows: lanes below 256 tokens
        toks[:, 0] = int(m.candidates[0])
        m.predict_batch(toks, all_positions=True)
    s = m.session(capacity=8)
    s.feed([int(m.candidates[0])] * 3)
    s.next_token()
t = T.register_target(4)
t.batch_states(np.full((5, 3), int(t.model.candidates[0]), dtype=np.int64))
from rnngap.constructions.models.hybrid import index_hybrid
from rnngap.constructions.models.turing import MACHINES, tm_rag
h = index_hybrid(8)
toks = np.full((40, 6), int(h.candidates[-1]), dtype=np.int64)
toks[:, 0] = int(h.candidates[0])
h.predict_batch(toks, all_positions=True)
h.predict_batch(toks[:3], all_positions=True)
h.predict_batch(toks[:3], readout="nearest_code")                # the nearest-code readout (dim 5)
rag = tm_rag(MACHINES["increment"], 3).model                 # a compiled RNN program: sessions only
s = rag.session(capacity=8)
s.feed([int(rag.candidates[0])] * 2)
s.next_token()
print(json.dumps({"warm": after_warm, "real": sigs(), "paths": sorted(set(paths))}))
"""


def test_the_warm_up_compiles_the_signatures_the_checks_call():
    """In a fresh process: after warm(0) and warm(1), the kernels' calls from real
    models (batches row by row and in lanes, sessions, a witness target's states)
    add no signature: the warm-up compiled what the parts need (a signature of
    its own would be compiled a second time, by each worker)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _SIGNATURES], capture_output=True, text=True, check=True,
                         timeout=900)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(got["warm"][k] for k in got["warm"]), got["warm"]
    assert got["paths"] == ["forward_batch", "forward_lanes"]      # both batch paths ran
    assert got["real"] == got["warm"]
