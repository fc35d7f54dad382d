"""``rnngap predict istree``: the paper's own data, our generators, the n_nodes
rule, and malformed input (exit 2 with the line and character position).

The paper's sample (``istree_official_sample.jsonl``, 64 rows from its own
generator, shipped as package data in ``checks/data``) is run as a new user would: each row's ``cot_text`` as
``text``, and the file itself, unchanged, with ``--field cot_text`` (and
``--field retrieval_text --model rag``). Every tour is reproduced token for
token (the output ``cot`` equals ``cot_text`` byte for byte) and every label
equals ``is_tree`` (networkx). The paper's ``official_label`` is connectivity
only: on the 2 rows that are connected graphs with n edges it says true, and
rnngap says false.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rnngap.checks.cli import main as cli
from rnngap.checks.cli import predict_istree as P
from rnngap.checks.io.formats import format_cot_text, format_graph_text, parse_graph_text
from rnngap.checks.tasks import istree as R

from rnngap.checks.io.shared_data import PACKAGE_DATA

SAMPLE = PACKAGE_DATA / "istree_official_sample.jsonl"


def _sample_rows() -> list[dict]:
    if not SAMPLE.is_file():
        pytest.fail(f"the paper's IsTree sample is missing: {SAMPLE} "
                    "(package data checks/data, see checks/data/README.md)")
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    assert len(rows) == 64
    return rows


def _write(path: Path, objs) -> Path:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))
    return path


def _predict(tmp_path: Path, objs, name: str = "in.jsonl", extra: tuple[str, ...] = ()) -> tuple[int, list[dict]]:
    inp = _write(tmp_path / name, objs)
    return _predict_file(tmp_path, inp, extra, out_name="out_" + name)


def _predict_file(tmp_path: Path, inp: Path, extra: tuple[str, ...] = (),
                  out_name: str = "out.jsonl") -> tuple[int, list[dict]]:
    out = tmp_path / out_name
    rc = cli.main(["predict", "istree", "--inputs", str(inp), "--out", str(out), *extra])
    rows = [json.loads(line) for line in out.read_text().splitlines()] if rc == 0 else []
    return rc, rows


def test_paper_sample_tours_and_true_labels(tmp_path):
    rows = _sample_rows()
    rc, outs = _predict(tmp_path, [{"text": r["cot_text"], "n_nodes": r["n_nodes"]} for r in rows])
    assert rc == 0 and len(outs) == len(rows)
    for r, o in zip(rows, outs):
        assert o["cot"] == r["cot_text"]                 # tour token for token (and byte for byte)
        assert o["label"] == r["is_tree"]
        assert o["n_nodes"] == r["n_nodes"]
    disagree = [k for k, (r, o) in enumerate(zip(rows, outs)) if o["label"] != r["official_label"]]
    assert len(disagree) == 2
    for k in disagree:                                   # connected graphs with n edges: one cycle
        r = rows[k]
        edges, _ = parse_graph_text(r["cot_text"])
        assert r["official_label"] and not r["is_tree"]
        assert len(edges) == r["n_nodes"] and not R.reference_label(r["n_nodes"], edges)


def test_paper_sample_file_as_is_with_field_cot_text(tmp_path):
    """The peers' file unchanged (fields cot_text, retrieval_text, n_nodes, ...):
    --field cot_text reproduces every tour byte for byte and the true labels."""
    rows = _sample_rows()
    rc, outs = _predict_file(tmp_path, SAMPLE, ("--field", "cot_text"))
    assert rc == 0 and len(outs) == len(rows)
    for r, o in zip(rows, outs):
        assert o["cot"] == r["cot_text"]
        assert o["label"] == r["is_tree"] and o["n_nodes"] == r["n_nodes"]
        edges, _ = parse_graph_text(r["cot_text"])
        assert o["label"] == R.reference_label(r["n_nodes"], edges)      # networkx, independently
    assert sum(o["label"] != r["official_label"] for r, o in zip(rows, outs)) == 2


def test_paper_sample_file_as_is_without_field_names_the_fields(tmp_path, capsys):
    rc, _ = _predict_file(tmp_path, SAMPLE)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "line 1: no field 'text'" in err
    for name in ("'cot_text'", "'retrieval_text'", "'n_nodes'", "'is_tree'", "--field"):
        assert name in err, err
    assert not (tmp_path / "out.jsonl").exists()


def test_paper_sample_with_rag_and_field_retrieval_text(tmp_path):
    """--model rag --field retrieval_text on the unchanged file: the paper's
    retrieval-style CoT byte for byte, the true labels."""
    rows = _sample_rows()
    rc, outs = _predict_file(tmp_path, SAMPLE, ("--model", "rag", "--field", "retrieval_text"))
    assert rc == 0 and len(outs) == len(rows)
    for r, o in zip(rows, outs):
        assert o["cot"] == r["retrieval_text"]
        assert o["label"] == r["is_tree"] and o["n_nodes"] == r["n_nodes"]


def test_field_option_on_own_instances(tmp_path):
    """--field reads the named field and ignores 'text'; the result equals the
    plain-Python reference tour and label."""
    rng = np.random.default_rng(11)
    insts = [i for n in (3, 5, 8) for i in R.generate(rng, n, 4)]
    objs = [{"graph": format_graph_text(i.edges), "text": "[BOS]1-0[EOS]", "n_nodes": i.n_nodes} for i in insts]
    rc, outs = _predict(tmp_path, objs, extra=("--field", "graph"))
    assert rc == 0
    for inst, o in zip(insts, outs):
        edges = list(inst.edges)
        assert o["cot"] == format_cot_text(edges, R.reference_cot(inst.n_nodes, edges))
        assert o["label"] == R.reference_label(inst.n_nodes, edges)


@pytest.mark.parametrize("obj, extra, fragments", [
    ({"graph": "[BOS]1-0[EOS]", "n": 2}, ("--field", "edges"),
     ["line 2: no field 'edges' (fields on this line: 'graph', 'n')", "--field graph"]),
    ({"cot_text": "[BOS]1-0[EOS]0,1,0[EOS]"}, (), ["line 2: no field 'text'", "'cot_text'", "--field cot_text"]),
    ({"other": 3}, (), ["line 2: no field 'text' (fields on this line: 'other')", "--field NAME"]),
    ({}, (), ["line 2: no field 'text' (fields on this line: none)", "--field NAME"]),
    ({"text": 5}, (), ["line 2: field 'text' must be a string, got int"]),
    ([1, 2], (), ["line 2: expected a JSON object with a string field 'text', got list"]),
    ({"text": "[BOS]1-0[EOS]", "g": "[BOS]1-1[EOS]"}, ("--field", "g"), ["line 2: character 5, edge 0: self-loop"]),
])
def test_bad_field_exit_2_one_line(tmp_path, capsys, obj, extra, fragments):
    first = {"text": "[BOS]1-0[EOS]", "graph": "[BOS]1-0[EOS]", "edges": "[BOS]1-0[EOS]", "g": "[BOS]1-0[EOS]"}
    rc, _ = _predict(tmp_path, [first, obj], extra=extra)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "in.jsonl" in err
    for f in fragments:
        assert f in err, err
    assert not (tmp_path / "out_in.jsonl").exists()


def test_empty_field_name_is_a_usage_error(tmp_path, capsys):
    rc, _ = _predict(tmp_path, [{"text": "[BOS]1-0[EOS]"}], extra=("--field", ""))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--field" in err


def test_paper_sample_without_n_nodes_uses_max_id(tmp_path):
    """Without n_nodes the label is for {0..max id}; it equals is_tree exactly on
    the rows where max id + 1 == n_nodes."""
    rows = _sample_rows()
    rc, outs = _predict(tmp_path, [{"text": r["cot_text"]} for r in rows])
    assert rc == 0
    for r, o in zip(rows, outs):
        assert o["cot"] == r["cot_text"]
        if o["n_nodes"] == r["n_nodes"]:
            assert o["label"] == r["is_tree"] and o["label_from"] == "model"
        else:
            assert o["n_nodes"] < r["n_nodes"]


def test_own_generators_and_tilde(tmp_path):
    rng = np.random.default_rng(7)
    insts = [i for n in (1, 2, 4, 7, 12) for i in R.generate(rng, n, 6)]
    objs = []
    for k, inst in enumerate(insts):
        sep = "~" if k % 3 == 0 else "-"
        objs.append({"text": format_graph_text(inst.edges, sep=sep), "n_nodes": inst.n_nodes})
    rc, outs = _predict(tmp_path, objs)
    assert rc == 0
    for k, (inst, o) in enumerate(zip(insts, outs)):
        sep = "~" if k % 3 == 0 and inst.edges else "-"
        want = format_cot_text(list(inst.edges), R.reference_cot(inst.n_nodes, list(inst.edges)), sep=sep)
        assert o["cot"] == want
        assert o["label"] == R.reference_label(inst.n_nodes, list(inst.edges)) == inst.label


def test_n_nodes_rule(tmp_path):
    objs = [{"text": "[BOS]2-1,1-0[EOS]"}, {"text": "[BOS]2-1,1-0[EOS]", "n_nodes": 3},
            {"text": "[BOS]2-1,1-0[EOS]", "n_nodes": 4}, {"text": "[BOS][EOS]"},
            {"text": "[BOS][EOS]", "n_nodes": 2}, {"text": "[BOS]2-0,1-2,0-1[EOS]0,1[EOS]"}]
    rc, outs = _predict(tmp_path, objs)
    assert rc == 0
    assert [(o["label"], o["label_from"], o["n_nodes"]) for o in outs] == [
        (True, "model", 3), (True, "model", 3), (False, "model", 4), (True, "model", 1),
        (False, "model", 2), (False, "model", 3)]                # n_nodes reaches the model as [COUNT] N
    for obj, o in zip(objs, outs):                       # the same labels from networkx
        edges, _ = parse_graph_text(obj["text"])
        assert o["label"] == R.reference_label(o["n_nodes"], edges)
    assert outs[2]["cot"] == "[BOS]2-1,1-0[EOS]0,1,2,1,0[EOS]"     # the tour is still the model's
    assert outs[3]["cot"] == "[BOS][EOS]0[EOS]"
    assert outs[5]["cot"] == "[BOS]2-0,1-2,0-1[EOS]0,2,1[EOS]"     # the text after [EOS] is ignored


@pytest.mark.parametrize("obj, fragment", [
    ({"text": "[BOS]3-2,2-2[EOS]"}, "line 2: character 9, edge 1: self-loop '2-2'"),
    ({"text": "[BOS]3-2,2-x[EOS]"}, "line 2: character 11, edge 1:"),
    ({"text": "[BOS]3-2,[FOO]-1[EOS]"}, "line 2: character 9, edge 1:"),
    ({"text": "[BOS]3-2,2-3[EOS]"}, "line 2: character 9, edge 1: duplicate edge '2-3' (same as edge 0)"),
    ({"text": "[BOS]1-0,2-1[EOS]", "n_nodes": 2}, "line 2: character 9, edge 1: vertex 2 in '2-1' is out of range"),
    ({"text": "[BOS]1-0,2-1"}, "line 2: character 12: missing '[EOS]'"),
    ({"text": "1-0[EOS]"}, "line 2: character 0: expected '[BOS]'"),
    ({"text": "[BOS]1-0[EOS]", "n_nodes": 0}, "line 2: 'n_nodes' must be an integer >= 1"),
    ({"text": "[BOS]1-0[EOS]", "n_nodes": "3"}, "line 2: 'n_nodes' must be an integer >= 1"),
    ({"txt": "[BOS]1-0[EOS]"}, "line 2: no field 'text' (fields on this line: 'txt'); pass --field NAME"),
    ('{"text": "[BOS]1-0[EOS]"', "line 2: invalid JSON"),
])
def test_malformed_input_exit_2_naming_line_and_position(tmp_path, capsys, obj, fragment):
    rc, _ = _predict(tmp_path, [{"text": "[BOS]1-0[EOS]"}, obj])
    err = capsys.readouterr().err
    assert rc == 2
    assert fragment in err, err
    assert err.count("\n") == 1 and "in.jsonl" in err
    assert not (tmp_path / "out_in.jsonl").exists()


def test_missing_or_empty_input(tmp_path, capsys):
    rc = cli.main(["predict", "istree", "--inputs", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")])
    assert rc == 2 and "cannot read" in capsys.readouterr().err
    rc, _ = _predict(tmp_path, ["", "  "], name="empty.jsonl")
    assert rc == 2 and "no instances" in capsys.readouterr().err


def test_models_registry_and_unknown_model(tmp_path, capsys):
    assert "transformer" in P.MODELS
    inp = _write(tmp_path / "in.jsonl", [{"text": "[BOS]1-0[EOS]"}])
    with pytest.raises(SystemExit) as e:
        cli.main(["predict", "istree", "--inputs", str(inp), "--out", str(tmp_path / "o"), "--model", "nope"])
    assert e.value.code == 2
    predict = P.MODELS["transformer"](2, 1)
    from rnngap.constructions.machine.vocab import EOS, TRUE, number_token
    assert predict([0, number_token(1), 7, number_token(0), EOS]) == \
        [number_token(0), number_token(1), number_token(0), EOS, TRUE]


def test_console_script_end_to_end(tmp_path):
    inp = _write(tmp_path / "in.jsonl", [{"text": "[BOS]3-2,2-1,1-0[EOS]"}, {"text": "[BOS]2~0,2~1,1~0[EOS]"}])
    out = tmp_path / "out.jsonl"
    res = subprocess.run([sys.executable, "-m", "rnngap.checks.cli.main", "predict", "istree", "--inputs", str(inp),
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row, (edges, sep) in zip(rows, [([(3, 2), (2, 1), (1, 0)], "-"), ([(2, 0), (2, 1), (1, 0)], "~")]):
        n = 1 + max(max(e) for e in edges)
        assert row == {"cot": format_cot_text(edges, R.reference_cot(n, edges), sep=sep),
                       "label": R.reference_label(n, edges), "label_from": "model", "n_nodes": n}


def test_graph_too_large_for_the_readout_is_a_usage_error(tmp_path, capsys):
    """Vertex ids past the readout's candidate list (MAX_CANDIDATES tokens): exit 2, one line."""
    from rnngap.constructions.build.spec import MAX_CANDIDATES
    rc, _ = _predict(tmp_path, [{"text": f"[BOS]{MAX_CANDIDATES}-0[EOS]"}])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot build the transformer model" in err and f"at most {MAX_CANDIDATES:,}" in err
    assert len(err.strip().splitlines()) == 1


def test_graph_past_the_int64_format_runs_in_two_limbs(tmp_path):
    """300,000 vertices: the declared format passes 62 bits and runs in two limbs
    (before issue 28's two-limb storage this was refused); the edge 300000-0 with
    the other vertices isolated is not a tree, and the model says so."""
    rc, rows = _predict(tmp_path, [{"text": "[BOS]300000-0[EOS]"}])
    assert rc == 0 and rows[0]["label"] is False and rows[0]["n_nodes"] == 300001
    assert rows[0]["cot"] == "[BOS]300000-0[EOS]" + format_cot_text([(300000, 0)], R.reference_cot(
        300001, [(300000, 0)]))[len(format_graph_text([(300000, 0)])):]


def test_help_states_the_label_conventions(capsys):
    with pytest.raises(SystemExit):
        cli.main(["predict", "istree", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "connectivity only" in out and "isolated" in out and "--model" in out
    assert "--field NAME" in out and "cot_text" in out and "retrieval_text" in out


# ---------------------------------------------------------------- issue 18: input guards, separators, Ctrl-C

@pytest.mark.parametrize("raw, fragment", [
    (b'\xff\xfe{"text":"[BOS]1-0[EOS]"}\n', "not UTF-8"),                       # was UnicodeDecodeError
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested 100000 deep"),             # was RecursionError
    (b'{"text": "[BOS]1-0[EOS]", "n_nodes": 1' + b"0" * 5000 + b"}\n", "5001 digits"),   # was the 4300-digit limit
    (b'{"text": "[BOS]1' + b"0" * 5000 + b'-0[EOS]"}\n', "5001 digits"),
    (b'{"text": "[BOS]1-0[EOS]0,1' + b"0" * 30 + b'[EOS]"}\n', None),            # CoT part is not read: fine
    (b"", "no instances"),
    (b'{"text": "[BOS]1-0[EOS]", "n_nodes": -' + b"9" * 400 + b"}\n", "400 digits"),
])
def test_hostile_bytes_exit_2_with_one_line(tmp_path, capsys, raw, fragment):
    inp = tmp_path / "bad.jsonl"
    inp.write_bytes(raw)
    out = tmp_path / "out.jsonl"
    rc = cli.main(["predict", "istree", "--inputs", str(inp), "--out", str(out)])
    err = capsys.readouterr().err
    if fragment is None:
        assert rc == 0, err
        return
    assert rc == 2 and fragment in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "bad.jsonl" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_mixed_separators_are_kept_in_the_output(tmp_path):
    """Before: '2~1,1-0' came back as '2-1,1-0'. The output's input part is the
    graph as written; the CoT is the reference tour."""
    for text in ("[BOS]2~1,1-0[EOS]", "[BOS]2-1,1~0[EOS]", "[BOS]3~0,0-1,1~2[EOS]", "[BOS]2~1,1~0[EOS]"):
        rc, rows = _predict(tmp_path, [{"text": text}])
        assert rc == 0
        edges, _ = parse_graph_text(text)
        n = 1 + max(max(e) for e in edges)
        assert rows[0]["cot"] == text + format_cot_text(edges, R.reference_cot(n, edges))[len(format_graph_text(edges)):]


def test_greedy_chunked_equals_generate_and_bounds_each_call(monkeypatch):
    """The chunked prompt feed writes the same CoT and answer as
    constructions.build.generate.generate, and no model call feeds more than about
    FEED_WORK attention scores (so Ctrl-C is seen within about a second)."""
    from rnngap.constructions.models import istree as C
    from rnngap.constructions.build.generate import generate
    from rnngap.constructions.build.session import Session
    from rnngap.constructions.machine.vocab import FALSE, TRUE
    rng = np.random.default_rng(5)
    monkeypatch.setattr(P, "FEED_WORK", 2 ** 10)        # small, so a small graph is cut in many chunks
    calls = []
    real_feed = Session.feed

    def spy(self, tokens):
        toks = [tokens] if isinstance(tokens, int) else list(tokens)
        calls.append((self.position, len(toks)))
        return real_feed(self, toks)
    for n in (3, 40, 120):
        edges = [(v, int(rng.integers(v))) for v in range(1, n)]
        if n == 40:                                   # the last edge moved: usually not a tree (a FALSE case)
            edges = edges[:-1] + [(0, n - 1)] if (0, n - 1) not in edges else edges
        model = C.istree_transformer(n, len(edges))
        prompt = C.prompt_tokens(edges)
        g = generate(model, prompt, answer_tokens=[TRUE, FALSE], max_cot=C.cot_bound(n))
        calls.clear()
        monkeypatch.setattr(Session, "feed", spy)
        got = P.greedy_chunked(model, prompt, frozenset((TRUE, FALSE)), C.cot_bound(n))
        monkeypatch.setattr(Session, "feed", real_feed)
        assert got == g.cot + [g.answer]
        prompt_calls = [c for c in calls if c[0] < len(prompt)]
        assert sum(k for _, k in prompt_calls) == len(prompt)
        assert all(k * (pos + k) <= 4 * P.FEED_WORK or k <= 64 for pos, k in prompt_calls), prompt_calls
        if len(prompt) > 200:
            assert len(prompt_calls) > 2


def test_output_checked_before_reading(tmp_path, capsys):
    inp = _write(tmp_path / "in.jsonl", [{"text": "[BOS]1-0[EOS]"}])
    before = inp.read_bytes()
    rc = cli.main(["predict", "istree", "--inputs", str(inp), "--out", str(inp)])
    err = capsys.readouterr().err
    assert rc == 2 and "is the input" in err and err.count("\n") == 1
    assert inp.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_rag_model_refuses_a_huge_vertex_id_at_once(tmp_path, capsys):
    """Before: an 18-digit vertex id made --model rag tabulate 10^18 entries
    (no answer after minutes). Now one line with the cap, at once."""
    import time
    t0 = time.perf_counter()
    rc, _ = _predict(tmp_path, [{"text": "[BOS]999999999999999999-0[EOS]"}], extra=("--model", "rag"))
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < 5
    assert rc == 2 and f"at most {P.RAG_MAX_VERTICES:,} vertices" in err and err.count("\n") == 1, err


def test_line_longer_than_the_limit_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(P, "MAX_LINE_BYTES", 64)
    inp = tmp_path / "long.jsonl"
    inp.write_text(json.dumps({"text": "[BOS]1-0[EOS]"}) + "\n" + json.dumps({"text": "[BOS]" + ",".join(
        f"{v}-{v - 1}" for v in range(1, 40)) + "[EOS]"}) + "\n")
    rc = cli.main(["predict", "istree", "--inputs", str(inp), "--out", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "long.jsonl, line 2: line longer than 64 bytes" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.jsonl"]
