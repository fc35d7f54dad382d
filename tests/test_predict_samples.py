"""``rnngap predict`` reads the shipped samples as they are: the Zoology MQAR
.npz (inputs and labels) and the paper's IsTree rows with their ``is_tree``
labels. Where labels are present the accuracy is printed, and a mismatch
exits 1 with the predictions still written."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rnngap.checks.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "checks" / "data"


def test_predict_ar_reads_the_zoology_npz(tmp_path, capsys):
    out = tmp_path / "p.npz"
    assert main(["predict", "ar", "--inputs", str(DATA / "mqar_sample.npz"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "accuracy 100.00% (832 of 832 labelled positions, 6 batches" in text
    with np.load(DATA / "mqar_sample.npz") as src, np.load(out) as got:
        names = sorted(k[:-len("_inputs")] for k in src.files if k.endswith("_inputs"))
        assert sorted(got.files) == [f"{n}_predictions" for n in names]
        for n in names:
            assert got[f"{n}_predictions"].shape == src[f"{n}_inputs"].shape


def test_predict_ar_without_out_prints_the_accuracy(capsys):
    assert main(["predict", "ar", "--inputs", str(DATA / "mqar_sample.npz")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("accuracy 100.00%")


def test_predict_ar_a_wrong_label_exits_1_and_still_writes(tmp_path, capsys):
    with np.load(DATA / "mqar_sample.npz") as src:
        arrays = {k: src[k] for k in src.files}
    key = next(k for k in sorted(arrays) if k.endswith("_labels"))
    lab = arrays[key].copy()
    b, t = map(int, np.argwhere(lab != -100)[0])
    lab[b, t] += 1
    arrays[key] = lab
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    out = tmp_path / "p.npz"
    assert main(["predict", "ar", "--inputs", str(bad), "--out", str(out)]) == 1
    assert "831 of 832" in capsys.readouterr().out and out.exists()


def test_predict_ar_npz_needs_an_npz_out(tmp_path, capsys):
    assert main(["predict", "ar", "--inputs", str(DATA / "mqar_sample.npz"), "--out", str(tmp_path / "p.npy")]) == 2
    assert "--out must name a .npz" in capsys.readouterr().err


def test_predict_istree_reads_the_is_tree_labels(tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    args = ["predict", "istree", "--inputs", str(DATA / "istree_official_sample.jsonl"), "--field", "cot_text"]
    assert main(args + ["--out", str(out)]) == 0
    assert "accuracy against 'is_tree' 100.00% (64 of 64)" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    truth = [json.loads(line)["is_tree"] for line in (DATA / "istree_official_sample.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == truth


def test_predict_istree_mismatching_labels_exit_1(tmp_path, capsys):
    """The paper's generator labels by connectivity only: its official_label differs
    from the true tree property on two rows (checks/data/README.md)."""
    out = tmp_path / "o.jsonl"
    args = ["predict", "istree", "--inputs", str(DATA / "istree_official_sample.jsonl"), "--field", "cot_text",
            "--labels", "official_label", "--out", str(out)]
    assert main(args) == 1
    assert "(62 of 64), the first mismatch at line" in capsys.readouterr().out
    assert len(out.read_text().splitlines()) == 64
