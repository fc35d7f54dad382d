"""Input fuzzing of every reader and every command's argument parser (issue 18).

Generated bad inputs (random bytes, truncated files, wrong dtypes and shapes,
huge and negative numbers, deep nesting, mixed separators, bad paths) are
thrown at ``checks.cli.main.main``, run in-process (fast). For every bad input:

* the exit code is 2 and stderr is exactly one line, with no traceback;
* no file changed (inputs byte for byte), no output written, nothing left
  behind (no temporary file);

and for the generated inputs that are valid (e.g. mixed separators) the
exit code is 0, only the intended output is added, and it is right.

Issue 30 adds the edges: generated output paths (streams, sockets, symlink
loops, trailing slashes, names around NAME_MAX: refused in one line before the
work, or written whole; every legal name written), JSON texts for the linear
depth pre-check, every mode of ``cc`` within its caps, and signals at any
moment (exit 130 / 143, nothing left behind). The named cases are in
tests/test_cli_edges.py.

The default suite runs a few dozen examples per test (about half a minute in
all); ``python -m pytest -m full tests/test_fuzz_cli.py`` runs many more.
"""
from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rnngap.checks.cli.main import main
from rnngap.checks.tasks import istree as R
from rnngap.constructions.build.spec import MAX_CANDIDATES

QUICK = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FULL = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- harness

def cli(argv: list[str]) -> tuple[int, str, str]:
    """rnngap.checks.cli.main.main in-process: (exit code, stdout, stderr); argparse's
    SystemExit is an exit code too."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def snapshot(d: Path) -> dict[str, bytes]:
    """Every file under d, hidden temporaries included, with its bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def assert_refused(argv: list[str], d: Path, before: dict[str, bytes] | None = None) -> str:
    """Exit 2, one line on stderr, no traceback, the directory unchanged."""
    before = snapshot(d) if before is None else before
    rc, out, err = cli(argv)
    assert rc == 2, (argv[:4], rc, err[-300:])
    assert len(err.splitlines()) == 1 and err.endswith("\n"), err[-500:]
    assert err.startswith("rnngap: "), err[-500:]
    assert "Traceback" not in err, err
    assert len(err) < 700, f"the message quotes too much of the input: {len(err)} characters"
    assert snapshot(d) == before, "a file changed or was left behind"
    return err


def assert_ran(argv: list[str], d: Path, out_name: str, before: dict[str, bytes]) -> None:
    """Exit 0; the only change is the intended output."""
    rc, _, err = cli(argv)
    assert rc == 0, err
    after = snapshot(d)
    assert set(after) == set(before) | {out_name}, sorted(after)
    assert all(after[k] == v for k, v in before.items() if k != out_name)


# ---------------------------------------------------------------- predict istree: the JSON lines reader

def _graph(edges, seps):
    return "[BOS]" + ",".join(f"{u}{s}{v}" for (u, v), s in zip(edges, seps)) + "[EOS]"


@st.composite
def trees(draw, max_n=12):
    n = draw(st.integers(2, max_n))
    edges = [(v, draw(st.integers(0, v - 1))) for v in range(1, n)]
    edges = [(u, v) if draw(st.booleans()) else (v, u) for u, v in edges]
    return draw(st.permutations(edges))


@st.composite
def valid_jsonl(draw):
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        edges = draw(trees())
        rows.append(json.dumps({"text": _graph(edges, ["-"] * len(edges))}))
    return ("\n".join(rows) + "\n").encode()


def _numbers():
    """Huge, negative and non-integer numbers as JSON text."""
    return st.one_of(
        st.integers(19, 6000).map(lambda k: "9" * k),                 # more digits than int64 holds
        st.integers(19, 6000).map(lambda k: "-" + "9" * k),
        st.integers(-10 ** 6, 0).map(str),
        st.sampled_from(["1e999", "-1e999", "1.5", "NaN", "Infinity", "true", '"3"', "[]", "{}"]),
    )


@st.composite
def bad_jsonl(draw):
    kind = draw(st.sampled_from(["bytes", "truncated", "deep", "number", "vertex", "field", "nonutf8", "syntax",
                                 "too-big"]))
    if kind == "too-big":
        # well-formed, but more vertices than either model takes (the transformer's readout
        # lists every token: constructions.build.spec.MAX_CANDIDATES; the rag table)
        v = draw(st.integers(MAX_CANDIDATES, 10 ** 18 - 1))
        return (json.dumps({"text": f"[BOS]{v}-0,1-0[EOS]"}) + "\n").encode()
    if kind == "bytes":
        raw = draw(st.binary(min_size=0, max_size=300))
        # random bytes that happen to be a valid instance line are not bad input
        try:
            obj = json.loads(raw.decode("utf-8"))
            if isinstance(obj, dict) and isinstance(obj.get("text"), str) and obj["text"].startswith("[BOS]"):
                raw = b"\x00" + raw
        except (UnicodeDecodeError, ValueError):
            pass
        return raw
    if kind == "truncated":
        good = draw(valid_jsonl())
        cut = draw(st.integers(1, len(good) - 2))
        raw = good[:cut]
        lines = raw.split(b"\n")
        if all(not line.strip() or line.strip().endswith(b"}") for line in lines):
            raw += b"{"                           # a cut exactly at a line end would still be valid
        return raw
    if kind == "deep":
        depth = draw(st.integers(33, 200_000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{\"a\":", "}")]))
        inner = draw(st.sampled_from(['"[BOS]1-0[EOS]"', "1", ""]))
        return (opener * depth + inner + closer * depth + "\n").encode()
    if kind == "number":
        return ('{"text": "[BOS]1-0[EOS]", "n_nodes": ' + draw(_numbers()) + "}\n").encode()
    if kind == "vertex":
        big = draw(st.one_of(st.integers(19, 5000).map(lambda k: "1" + "0" * k),
                             st.sampled_from(["-1", "01", "1e3", "x", "", " 1", "\u0661"])))
        return json.dumps({"text": f"[BOS]{big}-0[EOS]"}).encode() + b"\n"
    if kind == "field":
        obj = draw(st.sampled_from([[], 3, "x", None, {"text": 3}, {"txt": "[BOS]1-0[EOS]"}, {"text": None},
                                    {"text": "[BOS]1-0[EOS]", "n_nodes": 0},
                                    {"text": "[BOS]1-0[EOS]", "n_nodes": 1}]))
        return (json.dumps(obj) + "\n").encode()
    if kind == "nonutf8":
        good = draw(valid_jsonl())
        at = draw(st.integers(0, len(good) - 1))
        bad = draw(st.sampled_from([b"\xff", b"\xfe", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
        return good[:at] + bad + good[at:]
    # syntax: a valid graph with one character replaced or dropped
    edges = draw(trees(6))
    text = _graph(edges, ["-"] * len(edges))
    at = draw(st.integers(5, len(text) - 6))
    text = text[:at] + draw(st.sampled_from(["", ",", "--", "~~", "[EOS]", " ", "0"])) + text[at + 1:]
    try:
        from rnngap.checks.io.formats import parse_graph_text
        parse_graph_text(text)
        return b'{"text": ' + json.dumps(text).encode() + b', "n_nodes": 0}\n'   # still valid: make it bad
    except ValueError:
        return (json.dumps({"text": text}) + "\n").encode()


def _istree_bad(raw: bytes, model: str):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "in.jsonl").write_bytes(raw)
        (d / "old.jsonl").write_bytes(b"previous output\n")
        for out in ("out.jsonl", "old.jsonl"):
            assert_refused(["predict", "istree", "--inputs", str(d / "in.jsonl"), "--out", str(d / out),
                            "--model", model], d)


MODELS = st.sampled_from(["transformer", "rag"])


@QUICK
@given(bad_jsonl(), MODELS)
def test_predict_istree_bad_inputs(raw, model):
    _istree_bad(raw, model)


@pytest.mark.full
@FULL
@given(bad_jsonl(), MODELS)
def test_predict_istree_bad_inputs_full(raw, model):
    _istree_bad(raw, model)


def _istree_mixed(edges, seps, model):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        text = _graph(edges, seps)
        (d / "in.jsonl").write_text(json.dumps({"text": text}) + "\n")
        before = snapshot(d)
        assert_ran(["predict", "istree", "--inputs", str(d / "in.jsonl"), "--out", str(d / "out.jsonl"),
                    "--model", model], d, "out.jsonl", before)
        row = json.loads((d / "out.jsonl").read_text())
        n = 1 + max(max(e) for e in edges)
        assert row["cot"].startswith(text), (text, row["cot"])          # separators as written
        assert row["label"] is R.reference_label(n, edges)
        if model == "transformer":
            from rnngap.checks.io.formats import format_cot_text, format_graph_text
            tail = format_cot_text(edges, R.reference_cot(n, edges))[len(format_graph_text(edges)):]
            assert row["cot"] == text + tail


@settings(QUICK, max_examples=25)
@given(trees(10).flatmap(lambda e: st.tuples(st.just(e), st.lists(st.sampled_from("-~"), min_size=len(e),
                                                                      max_size=len(e)))))
def test_predict_istree_mixed_separators_kept(case):
    _istree_mixed(*case, model="transformer")


# ---------------------------------------------------------------- predict ar: the .npy reader

def _npy_bytes(arr) -> bytes:
    b = io.BytesIO()
    np.save(b, arr, allow_pickle=True)
    return b.getvalue()


def _raw_npy(shape_text: str, descr: str = "<i8", body: bytes = b"") -> bytes:
    """A .npy file whose header is written by hand: shapes numpy's writer refuses
    but its reader parses (bools, 4,000-digit numbers, thousands of dims)."""
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    pad = 64 - (10 + len(text) + 1) % 64
    head = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head + body


ODD_SHAPES = ["(True, 2)", "(0, 18446744073709551616)", "(" + "9" * 4000 + ", 2)", "(2.5, 2)", "(-1, 2)",
              "(" + ", ".join(["1099511627776"] * 300) + ")", "(2147483648, 2)", "(0, 2 ** 64)", "None"]
"""Header shapes that crashed or ran away before (a 4,000-digit dim, a bool,
2^64, a 2^31-row claim over an empty body, 300 dims of 2^40)."""


@st.composite
def bad_npy(draw):
    kind = draw(st.sampled_from(["bytes", "truncated", "dtype", "shape", "values", "header", "text", "npz",
                                 "object", "odd-header", "odd-npz"]))
    if kind == "odd-header":
        return _raw_npy(draw(st.sampled_from(ODD_SHAPES)), draw(st.sampled_from(["<i8", "|u1"])))
    if kind == "odd-npz":
        import zipfile
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w") as z:
            z.writestr("a_inputs.npy", _raw_npy(draw(st.sampled_from(ODD_SHAPES))))
            z.writestr("a_labels.npy", _npy_bytes(np.zeros((1, 2), np.int64)))
        return b.getvalue()
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    good = rng.integers(0, 100, (draw(st.integers(1, 3)), draw(st.integers(1, 20))))
    if kind == "bytes":
        return draw(st.binary(min_size=0, max_size=400))
    if kind == "truncated":
        raw = _npy_bytes(good)
        return raw[:draw(st.integers(0, len(raw) - 1))]
    if kind == "dtype":
        dt = draw(st.sampled_from(["float64", "float32", "bool", "complex128", "U3", "S2", "datetime64[s]",
                                   "float16"]))
        return _npy_bytes(good.astype(dt))
    if kind == "shape":
        shape = draw(st.sampled_from([(5,), (), (2, 3, 4), (0, 4), (3, 0), (1, 4097), (1, 1, 1)]))
        return _npy_bytes(np.zeros(shape, dtype=np.int64))
    if kind == "values":
        v = draw(st.sampled_from([-1, 65536, 2 ** 63 - 1, -(2 ** 63), 10 ** 9]))
        arr = good.astype(np.int64)
        arr[draw(st.integers(0, arr.shape[0] - 1)), draw(st.integers(0, arr.shape[1] - 1))] = v
        return _npy_bytes(arr)
    if kind == "header":
        # a header claiming a huge (or merely wrong) shape over a few values
        shape = draw(st.sampled_from([(10 ** 7, 4096), (2 ** 40, 2 ** 20), (3, 5), (1, 17)]))
        head = {"descr": "<i8", "fortran_order": False, "shape": shape}
        b = io.BytesIO()
        np.lib.format.write_array_header_1_0(b, head)
        return b"\x93NUMPY\x01\x00"[:0] + b.getvalue() + np.arange(16, dtype=np.int64).tobytes()
    if kind == "text":
        return draw(st.sampled_from([b"1 2 3\n4 5 6\n", b"hello", b"[[1, 2], [3, 4]]", b"\x93NUMPY"]))
    if kind == "npz":
        b = io.BytesIO()
        np.savez(b, x=good)
        return b.getvalue()
    return _npy_bytes(np.array([[1, None]], dtype=object))


def _ar_bad(raw: bytes):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "X.npy").write_bytes(raw)
        (d / "old.npy").write_bytes(b"previous")
        for out in ("P.npy", "old.npy"):
            assert_refused(["predict", "ar", "--inputs", str(d / "X.npy"), "--out", str(d / out)], d)


@QUICK
@given(bad_npy())
def test_predict_ar_bad_inputs(raw):
    _ar_bad(raw)


@pytest.mark.full
@FULL
@given(bad_npy())
def test_predict_ar_bad_inputs_full(raw):
    _ar_bad(raw)


def test_predict_ar_valid_input_still_runs(tmp_path):
    X = np.array([[5, 6, 5, 7, 6]], dtype=np.int16)
    np.save(tmp_path / "X.npy", X)
    before = snapshot(tmp_path)
    assert_ran(["predict", "ar", "--inputs", str(tmp_path / "X.npy"), "--out", str(tmp_path / "P.npy"),
                "--quiet"], tmp_path, "P.npy", before)
    assert np.load(tmp_path / "P.npy").tolist() == [[-1, -1, 6, -1, 5]]


# ---------------------------------------------------------------- every command's argument parser

BAD_INT = st.one_of(st.integers(max_value=-1).map(str), st.just("0"),
                    st.integers(10 ** 5, 10 ** 30).map(str), st.integers(5000, 20000).map(lambda k: "9" * k),
                    st.sampled_from(["x", "", "1.5", "1e3", "--", "0x10", "nan"]))
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.0123456789ÄЖ", min_size=0, max_size=12)


def _paths(d: Path):
    """Bad output paths: a directory, a missing directory, below a regular file,
    empty, the input itself (where the command has one)."""
    return st.sampled_from([str(d), str(d / "no" / "dir" / "o.x"), str(d / "file.txt" / "o.x"), ""])


def _bad_argvs(d: Path):
    """(argv) lists each with exactly one bad argument (the rest valid)."""
    inp_j, inp_n = str(d / "in.jsonl"), str(d / "X.npy")
    bad_path = _paths(d)
    return st.one_of(
        # verify: nothing may run
        st.builds(lambda s: ["verify", "--only", "machine", "--seed", s], st.integers(max_value=-1).map(str)),
        st.builds(lambda c: ["verify", "--only", c], NAME.filter(lambda c: c not in ("machine",)).map(
            lambda c: c + "!")),
        st.builds(lambda p: ["verify", "--only", "machine", "--json", p], bad_path),
        st.builds(lambda p: ["verify", "--profile", p], NAME.filter(lambda p: p not in ("quick", "full"))),
        # show
        st.builds(lambda m: ["show", m, "--n", "8"], NAME.map(lambda m: m + "?")),
        st.builds(lambda n: ["show", "istree-transformer", "--n", n], BAD_INT),
        st.builds(lambda s: ["show", "istree-transformer", "--n", "8", "--seed", s], st.integers(max_value=-1).map(str)),
        # cc
        st.builds(lambda t: ["cc", "--task", t, "--n", "3"], NAME.map(lambda t: t + "?")),
        st.builds(lambda n, t: ["cc", "--task", t, "--n", n], BAD_INT.filter(lambda v: v not in ("x",)),
                  st.sampled_from(["index", "ar", "cgram", "counting", "istree"])),
        st.builds(lambda a, t: ["cc", "--task", t, "--n", "3", "--alphabet", a],
                  st.one_of(st.integers(max_value=0).map(str), st.integers(10 ** 7, 10 ** 400).map(str)),
                  st.sampled_from(["index", "ar", "cgram", "counting", "istree"])),
        st.builds(lambda p: ["cc", "--task", "index", "--n", "3", "--json", p], bad_path),
        # witness
        st.builds(lambda t: ["witness", "--task", t, "--n", "4", "--model", "register"], NAME.map(lambda t: t + "?")),
        st.builds(lambda m: ["witness", "--task", "index", "--n", "4", "--model", m], NAME.map(lambda m: m + "?")),
        st.builds(lambda n: ["witness", "--task", "index", "--n", n, "--model", "register"], BAD_INT),
        st.builds(lambda b, m: ["witness", "--task", "index", "--n", "4", "--model", m, "--bits", b],
                  st.one_of(st.integers(max_value=0).map(str), st.integers(65, 10 ** 20).map(str)),
                  st.sampled_from(["register", "random", "toy-register", "toy-register-cot", "hash"])),
        st.builds(lambda s: ["witness", "--task", "index", "--n", "4", "--model", "register", "--seed", s],
                  st.integers(max_value=-1).map(str)),
        st.builds(lambda m: ["witness", "--task", "index", "--n", "4", "--model", "register", "--mode", m],
                  NAME.map(lambda m: m + "?")),
        st.builds(lambda k: ["witness", "--task", "index", "--n", "4", "--model", "register", "--max-cot", k],
                  st.integers(max_value=-1).map(str)),
        st.builds(lambda p: ["witness", "--task", "index", "--n", "4", "--model", "register", "--json", p], bad_path),
        # precision
        st.builds(lambda t: ["precision", "--task", t, "--out", str(d / "p.png")], NAME.map(lambda t: t + "?")),
        st.builds(lambda k: ["precision", "--task", "index", "--out", str(d / "p.png"), "--max-log2n", k],
                  st.one_of(st.integers(max_value=3).map(str), st.integers(17, 10 ** 9).map(str))),
        st.builds(lambda p: ["precision", "--task", "index", "--out", p, "--max-log2n", "4"],
                  st.sampled_from([str(d / "no" / "dir" / "p.png"), str(d / "file.txt" / "p.png"), str(d),
                                   "", str(d / "in.jsonl")])),
        st.just(["precision", "--task", "index", "--out", str(d / "p.png"), "--json", str(d / "p.png")]),
        st.just(["precision", "--task", "index", "--out", str(d / "p.txt")]),
        # predict
        st.builds(lambda p: ["predict", "istree", "--inputs", inp_j, "--out", p], bad_path),
        st.just(["predict", "istree", "--inputs", inp_j, "--out", inp_j]),
        st.just(["predict", "istree", "--inputs", str(d / "missing.jsonl"), "--out", str(d / "o.jsonl")]),
        st.just(["predict", "istree", "--inputs", inp_j, "--out", str(d / "o.jsonl"), "--field", ""]),
        st.builds(lambda m: ["predict", "istree", "--inputs", inp_j, "--out", str(d / "o.jsonl"), "--model", m],
                  NAME.map(lambda m: m + "?")),
        st.builds(lambda p: ["predict", "ar", "--inputs", inp_n, "--out", p], bad_path),
        st.just(["predict", "ar", "--inputs", inp_n, "--out", inp_n]),
        st.just(["predict", "ar", "--inputs", str(d), "--out", str(d / "P.npy")]),
        st.builds(lambda o: ["predict", "ar", "--inputs", inp_n, "--out", str(d / "P.npy"), o],
                  st.sampled_from(["--bogus", "--model=x", "--inputs"])),
        # long values echoed by argparse and by the commands (issue 30: messages stay short)
        st.builds(lambda k, c: ["witness", "--task", "index", "--n", c * k, "--model", "register"],
                  st.integers(300, 5000), st.sampled_from("x9é")),
        st.builds(lambda k: ["verify", "--profile", "p" * k], st.integers(300, 5000)),
        st.builds(lambda k: ["cc", "--task", "t" * k, "--n", "3"], st.integers(300, 5000)),
        # no command / unknown command / bad option
        st.builds(lambda c: [c], NAME.filter(lambda c: c not in ("verify", "show", "cc", "witness", "precision",
                                                                 "predict")).map(lambda c: c or "?")),
    )


@pytest.fixture(scope="module")
def argdir():
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "in.jsonl").write_text(json.dumps({"text": "[BOS]2-1,1-0[EOS]"}) + "\n")
        np.save(d / "X.npy", np.array([[1, 2, 1]], dtype=np.int64))
        (d / "file.txt").write_text("x")
        yield d


def _argv_case(d, data, n):
    before = snapshot(d)
    for _ in range(n):
        argv = data.draw(_bad_argvs(d))
        assert_refused(argv, d, before)


@QUICK
@given(st.data())
def test_every_parser_refuses_bad_arguments_before_work(argdir, data):
    _argv_case(argdir, data, 4)


@pytest.mark.full
@FULL
@given(st.data())
def test_every_parser_refuses_bad_arguments_full(argdir, data):
    _argv_case(argdir, data, 4)


# ---------------------------------------------------------------- the text formats: only their own errors

@QUICK
@given(st.text(alphabet="[]BOSEQUYRT0123456789-~,\u0661 x", max_size=60))
def test_format_parsers_raise_only_format_errors(text):
    from rnngap.checks.io.formats import CotFormatError, GraphFormatError, parse_cot_text, parse_graph_text
    for parse in (parse_graph_text, parse_cot_text):
        try:
            parse("[BOS]" + text)
        except (GraphFormatError, CotFormatError) as e:
            assert str(e) and "\n" not in str(e)


# ---------------------------------------------------------------- cc: every mode within the caps (issue 30)

@settings(QUICK, max_examples=12)
@given(st.sampled_from(["index", "ar", "cgram", "counting", "istree"]), st.integers(1, 3), st.booleans())
def test_cc_caps_bound_the_work_of_every_mode(task, alphabet, table):
    """The accepted --n of each mode: the matrices it enumerates (read off the
    problems themselves) stay within MAX_CELLS cells and MAX_WORK instance
    tokens, summed over n = 1..N with --table; one more is refused."""
    from rnngap.checks.cli import cmd_cc
    if task == "istree" and alphabet < 2:
        alphabet = 2
    cap = cmd_cc.max_n(task, alphabet, table=table)
    ns = range(1, cap + 1) if table else [cap]
    cells = work = 0
    for n in ns:
        p = cmd_cc.make_problem(task, n, alphabet)
        length = len(p.alice_prefix(p.alice_inputs[0])) + len(p.bob_suffix(p.bob_inputs[0]))
        cells += p.cells
        work += p.cells * length
    assert cells <= cmd_cc.MAX_CELLS and work <= cmd_cc.MAX_WORK, (task, alphabet, table, cap, cells, work)
    from unittest import mock

    def no_work(*a, **k):
        raise AssertionError("past the cap, the work started")
    with mock.patch("rnngap.lowerbounds.cc.one_way_complexity", no_work):
        rc, _, err = cli(["cc", "--task", task, "--alphabet", str(alphabet), "--n", str(cap + 1)]
                         + (["--table"] if table else []))
    assert rc == 2 and "too large" in err, err


JSON_VALUES = st.recursive(st.none() | st.integers(-5, 5) | st.text(alphabet='"\\[]{}ab\u00e9', max_size=8),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                               st.text(alphabet='"\\[]{}k', max_size=4), kids, max_size=3), max_leaves=12)


@settings(QUICK, max_examples=40)
@given(JSON_VALUES)
def test_json_depth_pre_check_equals_the_nesting(value):
    """The linear depth pre-check of predict istree equals the nesting depth of
    any JSON text (strings full of quotes, backslashes and brackets)."""
    from rnngap.checks.cli.predict_istree import _json_depth

    def depth(v):
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0
    line = json.dumps(value, ensure_ascii=False)
    assert _json_depth(line) == depth(value), line


# ---------------------------------------------------------------- output paths (issue 30)

def _path_world(d: Path):
    """A directory holding one of each kind of entry an output path may meet."""
    import socket
    (d / "file").write_text("x")
    (d / "sub").mkdir()
    (d / "loop").symlink_to(d / "loop")
    (d / "link").symlink_to(d / "file")
    (d / "dangling").symlink_to(d / "sub" / "new-target")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(d / "sock"))
    return s


FRESH = st.text(alphabet="abcxyz-_.0123456789éжλ€ ", min_size=1, max_size=140).filter(
    lambda s: s not in (".", ".."))


@st.composite
def output_paths(draw, d: Path):
    kind = draw(st.sampled_from(["stream", "fresh", "fresh-in-sub", "existing", "special", "nested", "long", "long"]))
    if kind == "stream":
        return draw(st.sampled_from(["-", "/dev/stdout", "/dev/null", "/dev/full", "/dev/stderr"]))
    if kind == "fresh":
        path = str(d / draw(FRESH))
    elif kind == "fresh-in-sub":
        path = str(d / "sub" / draw(FRESH))
    elif kind == "existing":
        path = str(d / draw(st.sampled_from(["file", "sub", "loop", "link", "dangling", "sock", ".", ".."])))
    elif kind == "special":
        path = str(d / draw(st.sampled_from(["sock", "loop", "sub", "."])))
    elif kind == "long":                  # names of 235..262 bytes: around NAME_MAX (255), past it with the suffix
        char, size = draw(st.sampled_from(["a", "é", "€"])), draw(st.integers(235, 262))
        width = len(char.encode())
        path = str(d / (char * (size // width) + "b" * (size % width)))
    else:
        parts = draw(st.lists(st.sampled_from(["file", "sub", "loop", "link", "sock", "missing", ".", "..", "x"]),
                              min_size=1, max_size=4))
        path = str(d.joinpath(*parts)) + "/" + draw(FRESH)
    return path + ("/" if draw(st.booleans()) and kind != "stream" else "")


def _output_path_case(data):
    import os
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        sock = _path_world(d)
        try:
            path = data.draw(output_paths(d))
            before = {str(p): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
                      for p in d.rglob("*")}
            from unittest import mock

            from rnngap.lowerbounds import cc
            real, calls = cc.one_way_complexity, []

            def recorded(*a, **k):
                calls.append(1)
                return real(*a, **k)
            with mock.patch.object(cc, "one_way_complexity", recorded):
                rc, out, err = cli(["cc", "--task", "index", "--n", "3", "--json", path])
            after = {str(p): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
                     for p in d.rglob("*")}
            assert not [p for p in after if p.endswith(".part")], sorted(after)
            assert rc in (0, 2), (path, rc, err)
            if rc == 2:
                assert len(err.splitlines()) == 1 and err.startswith("rnngap: ") and len(err) < 700, err
                assert "Traceback" not in err and after == before, path
                assert not calls or path == "/dev/full", (path, "refused only after the work")
            else:
                assert err == "" or path == "/dev/stderr", err
                assert path != "/dev/full"
            name = os.path.basename(path)
            legal = (not path.endswith("/") and os.path.dirname(path) in (str(d), str(d / "sub"))
                     and name not in ("file", "sub", "loop", "link", "dangling", "sock", ".", "..")
                     and len(name.encode()) <= 255)
            if path.endswith("/"):
                assert rc == 2, (path, "a trailing '/' names a directory")
            if legal or path in ("-", "/dev/stdout", "/dev/null"):
                assert rc == 0, (path, err)           # every legal name is written
            if rc == 0 and path in ("-", "/dev/stdout"):
                first, rest = out.split("\n", 1)
                assert "one-way complexity 3 bits" in first and json.loads(rest)[0]["bits"] == 3
            elif rc == 0 and path not in ("/dev/null", "/dev/stderr"):
                target = os.path.realpath(path)
                assert json.loads(Path(target).read_text())[0]["bits"] == 3
                assert {k: v for k, v in after.items() if k != target} == \
                    {k: v for k, v in before.items() if k != target}
        finally:
            sock.close()


@settings(QUICK, max_examples=60)
@given(st.data())
def test_output_paths_refused_in_one_line_or_written_whole(data):
    _output_path_case(data)


@pytest.mark.full
@FULL
@given(st.data())
def test_output_paths_full(data):
    _output_path_case(data)


# ---------------------------------------------------------------- signals at any moment (issue 30)

def _signal_case(sig_name: str, delay: float):
    """predict istree on a large input, interrupted after ``delay`` s by SIGINT
    or SIGTERM: exit 130 / 143 with one line and the directory unchanged (no
    output, no temporary file), or, if it finished first, exit 0 with the
    whole output."""
    import signal
    import subprocess
    import sys
    import time
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        line = "[BOS]" + ",".join(f"{v}-{v - 1}" for v in range(1, 400)) + "[EOS]"
        (d / "g.jsonl").write_text((json.dumps({"text": line}) + "\n") * 40)
        (d / "out.jsonl").write_text("old\n")
        before = snapshot(d)
        p = subprocess.Popen([sys.executable, "-m", "rnngap.checks.cli.main", "predict", "istree", "--inputs",
                              str(d / "g.jsonl"), "--out", str(d / "out.jsonl")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(delay)
        finished = p.poll() is not None
        p.send_signal(getattr(signal, sig_name))
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError(f"no answer to {sig_name} within 30 s")
        if finished:
            assert p.returncode == 0, err
            assert len((d / "out.jsonl").read_text().splitlines()) == 40
            return
        code, text = {"SIGINT": (130, "interrupted"), "SIGTERM": (143, "terminated")}[sig_name]
        assert (p.returncode, err) == (code, f"rnngap: {text}\n"), (p.returncode, err[-500:])
        assert snapshot(d) == before


@settings(QUICK, max_examples=2)
@given(st.sampled_from(["SIGINT", "SIGTERM"]), st.floats(2.5, 5.0))
def test_a_signal_at_any_moment_leaves_nothing(sig_name, delay):
    _signal_case(sig_name, delay)


@pytest.mark.full
@settings(FULL, max_examples=12)
@given(st.sampled_from(["SIGINT", "SIGTERM"]), st.floats(2.0, 12.0))
def test_a_signal_at_any_moment_full(sig_name, delay):
    _signal_case(sig_name, delay)
