"""Inputs too large to hold, streams, hang-ups, killed parents and outputs that keep
their permissions: every case exits 0, 2 or 128 + the signal, with at most one
line on stderr and nothing left behind.

The memory cases run under an address-space limit (``resource.setrlimit``) and a
small ``$RNNGAP_MEMORY_BUDGET``, so a regression fails instead of filling the
machine. The odd .npy headers are in tests/test_fuzz_cli.py (``ODD_SHAPES``).
"""
from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rnngap.checks.io import errors as E
from rnngap.checks.cli.main import main

AS_LIMIT = 8 * 2 ** 30
"""Address space a memory case may map (numba and LLVM map about 1 GiB)."""


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _rnngap(args, env=None, timeout=600, **kw):
    env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, preexec_fn=_capped, **kw)


def _one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _path_graph(n: int) -> str:
    return json.dumps({"text": "[BOS]" + ",".join(f"{i + 1}-{i}" for i in range(n - 1)) + "[EOS]"}) + "\n"


def test_a_sparse_npy_too_large_to_hold_is_refused_before_reading(tmp_path):
    """(2^31, 2) uint8: 4 GiB claimed, a few KB on disk; refused by the budget in
    about the time of an import, never read."""
    x = tmp_path / "X.npy"
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "|u1", "fortran_order": False, "shape": (2 ** 31, 2)})
    with open(x, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00"[:0] + head.getvalue())
        fh.truncate(len(head.getvalue()) + 2 ** 32)
    r = _rnngap(["predict", "ar", "--inputs", str(x)], env={E.MEMORY_ENV: "1G"})
    assert r.returncode == 2 and _one_line(r.stderr) and "over the budget of 1.0 GiB" in r.stderr, r.stderr


def test_an_istree_graph_too_large_for_the_budget_is_refused_before_the_model_runs(tmp_path):
    """A path of 4,096 vertices needs a session of about half a GiB: over a 64 MiB
    budget, refused with the estimate; under the default budget it runs."""
    g = tmp_path / "path.jsonl"
    g.write_text(_path_graph(2 ** 12))
    r = _rnngap(["predict", "istree", "--inputs", str(g)], env={E.MEMORY_ENV: "64M"})
    assert r.returncode == 2 and _one_line(r.stderr) and "--model transformer on 4,096 vertices" in r.stderr, \
        r.stderr
    small = tmp_path / "small.jsonl"
    small.write_text(_path_graph(64))
    r = _rnngap(["predict", "istree", "--inputs", str(small)], env={E.MEMORY_ENV: "64M"})
    assert r.returncode == 0 and "1 graphs, 1 trees" in r.stdout, r.stderr


@pytest.mark.parametrize("value", ["0", "-5G", "1.5G", "lots", "9" * 40, "12Q"])
def test_a_bad_memory_budget_is_one_line(tmp_path, value):
    g = tmp_path / "g.jsonl"
    g.write_text(_path_graph(3))
    r = _rnngap(["predict", "istree", "--inputs", str(g)], env={E.MEMORY_ENV: value})
    assert r.returncode == 2 and _one_line(r.stderr) and E.MEMORY_ENV in r.stderr, r.stderr


def test_memory_budget_reads_suffixes(monkeypatch):
    for text, want in (("512M", 2 ** 29), ("3g", 3 * 2 ** 30), ("4096", 4096), ("1T", 2 ** 40)):
        monkeypatch.setenv(E.MEMORY_ENV, text)
        assert E.memory_budget() == want
    monkeypatch.delenv(E.MEMORY_ENV)
    assert E.memory_budget() == E.physical_memory() // 2


def test_a_fifo_nothing_writes_to_is_refused_after_the_open_timeout(tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(E, "OPEN_TIMEOUT", 0.5)
    t0 = time.monotonic()
    assert main(["predict", "istree", "--inputs", str(fifo)]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert _one_line(err) and "did not open within" in err, err


def test_a_fifo_with_a_writer_is_read(tmp_path, capsys):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "w") as fh:
            fh.write(_path_graph(3))
    threading.Thread(target=write, daemon=True).start()
    assert main(["predict", "istree", "--inputs", str(fifo)]) == 0
    assert "1 graphs, 1 trees" in capsys.readouterr().out


def test_an_endless_stream_is_cut_at_the_stream_cap(tmp_path, monkeypatch, capsys):
    """A writer that never stops: refused once more than STREAM_BYTES came."""
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(E, "STREAM_BYTES", 64 * 1024)
    stop = threading.Event()

    def write():
        try:
            with open(fifo, "w") as fh:
                while not stop.is_set():
                    fh.write(_path_graph(8))
        except (BrokenPipeError, OSError):
            pass
    threading.Thread(target=write, daemon=True).start()
    try:
        assert main(["predict", "istree", "--inputs", str(fifo)]) == 2
    finally:
        stop.set()
    err = capsys.readouterr().err
    assert _one_line(err) and "more than 65,536 bytes from a stream" in err, err


def test_duplicate_json_keys_are_an_error(tmp_path, capsys):
    g = tmp_path / "dup.jsonl"
    g.write_text('{"text": "[BOS]1-0[EOS]", "text": "[BOS]1-0,2-1[EOS]"}\n')
    assert main(["predict", "istree", "--inputs", str(g)]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) and "the key 'text' is given twice" in err and "line 1" in err, err


def test_a_non_ascii_field_works_under_the_c_locale(tmp_path):
    g = tmp_path / "u.jsonl"
    g.write_text(json.dumps({"t\u00e9xt": "[BOS]1-0[EOS]"}) + "\n", encoding="utf-8")
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    r = _rnngap(["predict", "istree", "--inputs", str(g), "--field", "t\u00e9xt"], env=env)
    assert r.returncode == 0 and "1 graphs, 1 trees" in r.stdout, r.stderr


def _children(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    kids, todo = set(), [pid]
    table = [tuple(map(int, line.split())) for line in out.splitlines() if line.strip()]
    while todo:
        p = todo.pop()
        for c, pp in table:
            if pp == p and c not in kids:
                kids.add(c)
                todo.append(c)
    return kids


def _alive(pids) -> set[int]:
    left = set()
    for p in pids:
        try:
            os.kill(p, 0)
        except ProcessLookupError:
            continue
        try:                                       # a zombie (not yet reaped) is gone for our purpose
            with open(f"/proc/{p}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        left.add(p)
    return left


def _verify_with_workers():
    return subprocess.Popen([sys.executable, "-m", "rnngap.checks.cli.main", "verify", "--profile", "quick",
                             "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_workers(proc, want: int = 2, limit: float = 120) -> set[int]:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        if len(kids) >= want + 1:              # the workers and the resource tracker
            return kids
        time.sleep(0.5)
    raise AssertionError(f"verify started {len(_children(proc.pid))} processes in {limit} s")


def test_sighup_ends_verify_like_sigterm_and_leaves_no_process():
    proc = _verify_with_workers()
    kids = _wait_for_workers(proc)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGHUP and err.strip() == "rnngap: hung up", err
    deadline = time.monotonic() + 10
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(kids)


def test_workers_die_with_a_killed_parent():
    """SIGKILL leaves the parent no time to clean up: the workers see it gone
    (their parent changes) and end; the resource tracker follows them."""
    proc = _verify_with_workers()
    kids = _wait_for_workers(proc)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(kids), _alive(kids)


def test_replacing_an_output_keeps_its_mode_and_says_it_breaks_a_hard_link(tmp_path, capsys):
    g = tmp_path / "g.jsonl"
    g.write_text(_path_graph(3))
    out, other = tmp_path / "out.jsonl", tmp_path / "other.jsonl"
    out.write_text("old\n")
    os.chmod(out, 0o600)
    os.link(out, other)
    assert main(["predict", "istree", "--inputs", str(g), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (os.stat(out).st_mode & 0o777) == 0o600
    assert other.read_text() == "old\n" and json.loads(out.read_text())["label"] is True
    assert "had 2 hard links" in err and _one_line(err), err


def test_a_read_only_output_is_refused_before_the_work(tmp_path, monkeypatch, capsys):
    """As a user who cannot write the file: exit 2, the file unchanged. Root may
    write any file, so under root ``os.access`` answers as the file's owner
    would by its permission bits (what an unprivileged owner gets)."""
    g = tmp_path / "g.jsonl"
    g.write_text(_path_graph(3))
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    os.chmod(out, 0o444)
    if os.geteuid() == 0:
        real = os.access

        def as_owner(path, mode, **kw):
            st = os.stat(path)
            if mode & os.W_OK and not st.st_mode & 0o200:
                return False
            return real(path, mode, **kw)
        monkeypatch.setattr(E.os, "access", as_owner)
    assert main(["predict", "istree", "--inputs", str(g), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) and "read-only for you (mode 0444)" in err, err
    assert out.read_text() == "keep\n"


def test_a_closed_descriptor_as_output_is_refused_before_the_work(tmp_path, capsys):
    g = tmp_path / "g.jsonl"
    g.write_text(_path_graph(3))
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)                                   # a descriptor number that is surely closed now
    assert main(["predict", "istree", "--inputs", str(g), "--out", f"/proc/self/fd/{fd}"]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) and f"file descriptor {fd} is not open" in err, err


def test_predict_ar_calls_the_model_in_bounded_chunks(tmp_path, monkeypatch, capsys):
    """Many short rows (length 2) go in calls of at most CHUNK_POSITIONS
    positions, so SIGTERM and Ctrl-C are seen between calls; the predictions
    equal one call over everything."""
    from rnngap.checks.cli import predict_ar as PA
    from rnngap.constructions.models import retrieval as RT
    X = np.random.default_rng(0).integers(1, 60, (3 * PA.CHUNK_POSITIONS // 2 + 5, 2)).astype(np.int64)
    np.save(tmp_path / "X.npy", X)
    calls = []
    real = RT.mqar_predict

    def counted(x, model):
        calls.append(x.size)
        return real(x, model)
    monkeypatch.setattr(RT, "mqar_predict", counted)
    assert main(["predict", "ar", "--inputs", str(tmp_path / "X.npy"), "--out", str(tmp_path / "P.npy")]) == 0
    rows = PA.chunk_rows(2)
    assert len(calls) == -(-X.shape[0] // rows) == 4 and max(calls) <= PA.CHUNK_POSITIONS and sum(calls) == X.size
    whole = real(X, RT.mqar_transformer(2))
    assert np.array_equal(np.load(tmp_path / "P.npy"), whole)
    assert all(PA.chunk_rows(L) * L <= PA.CHUNK_POSITIONS or PA.chunk_rows(L) == 1 for L in (1, 2, 7, 4096, 10 ** 5))
