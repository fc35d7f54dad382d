"""rnngap export: the safetensors round trip is exact, bad input leaves nothing behind, and every
architecture's PyTorch module (and the TransformerLens model) gives the exact machine's tokens."""
import itertools
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

from rnngap.checks.catalog.records import RECORDS, by_name
from rnngap.checks.cli.main import main
from rnngap.checks.export import conformance as C
from rnngap.checks.export import lens
from rnngap.checks.export.bundle import ExportError, bundle, exact
from rnngap.checks.export.torch_model import load, module
from rnngap.checks.export.write import export, read_safetensors
from rnngap.checks.tasks import hard
from rnngap.constructions.machine.vocab import EOS, FALSE, TRUE


def _cli(capsys, *argv):
    """The CLI in-process: (exit code, stdout, stderr); an argparse refusal is exit 2 too."""
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


# --- safetensors: nothing lost ------------------------------------------------------------

@pytest.mark.parametrize("name, n", [("index-transformer", 8), ("counting-hybrid", 6), ("iterate-rnn", 3)])
def test_safetensors_round_trip_is_exact(tmp_path, name, n):
    out = tmp_path / "m.safetensors"
    b = export(name, n, "safetensors", out)
    back = read_safetensors(out)
    assert back.metadata == b.metadata
    assert sorted(back.tensors) == sorted(b.tensors)
    for k, v in b.tensors.items():
        assert back.tensors[k].dtype == v.dtype and np.array_equal(back.tensors[k], v), k
    spec = by_name(name).build(n).model.spec
    weights = [(f"attn.{l}.head.{h}.{w}", getattr(hd, w)) for l, L in enumerate(spec.attn_layers)
               for h, hd in enumerate(L.heads) for w in ("WQ", "WK", "WV", "WO")]
    weights += [(f"rnn.{l}.{w}", getattr(L, w)) for l, L in enumerate(spec.rnn_layers) for w in ("A", "B", "C")]
    weights += [(f"{kind}.{l}.mlp.{w}", getattr(L, w)) for kind, layers in (("rnn", spec.rnn_layers),
                                                                           ("attn", spec.attn_layers))
                for l, L in enumerate(layers) for w in ("W1", "b1", "W2", "b2")]
    assert weights
    for k, w in weights:           # the rationals read back are the built weights, every entry
        got = exact(back.tensors, k)
        assert got.shape == np.asarray(w, dtype=object).shape, k
        assert all(Fraction(g) == Fraction(x) for g, x in zip(got.ravel(), np.asarray(w, dtype=object).ravel())), k
    meta = json.loads(back.metadata["residual"])
    assert meta == list(spec.labels) and json.loads(back.metadata["format"])["frac_bits"] >= 0
    assert back.tensors["embed.token"].shape == (spec.vocab.size, spec.width)


# --- bad input: exit 2, one line, nothing half-written -------------------------------------

def test_cli_writes_and_refuses_bad_input(tmp_path, capsys):
    out = tmp_path / "x.safetensors"
    rc, text, _ = _cli(capsys, "export", "index-transformer", "--n", "4", "--to", "safetensors", "--out", str(out))
    assert rc == 0 and out.exists() and "index-transformer" in text
    before = out.read_bytes()
    for argv in (["nosuch-model", "--n", "4", "--to", "safetensors"],
                 ["index-transformer", "--n", "0", "--to", "safetensors"],
                 ["cgram-transformer", "--n", "1", "--to", "safetensors"],      # the builder refuses n < c
                 ["index-hybrid", "--n", "4", "--to", "transformer-lens"],
                 ["index-transformer", "--n", "4", "--to", "onnx"],
                 ["iterate-rnn", "--n", "65536", "--to", "safetensors"]):      # 4.3e9 tokens: refused at once
        rc, _, err = _cli(capsys, "export", *argv, "--out", str(out))
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert out.read_bytes() == before, argv          # the existing file is kept whole
    rc, _, err = _cli(capsys, "export", "index-transformer", "--n", "4", "--to", "torch",
                      "--out", str(tmp_path / "no" / "x.pt"))
    assert rc == 2 and "no folder" in err and not (tmp_path / "no").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.safetensors"]      # no temporary left


def test_unknown_and_refused_say_why():
    with pytest.raises(ExportError, match="closest"):
        export("index-transformr", 4, "safetensors", "unused")
    with pytest.raises(ExportError, match="Transformers only"):
        lens.config(bundle(by_name("index-hybrid").build(4).model, name="index-hybrid", n=4))


# --- conformance: the float64 module gives the machine's tokens, per architecture ----------

@pytest.mark.parametrize("name", ["index-transformer", "ar-transformer", "cgram-transformer", "counting-transformer",
                                  "index-hybrid", "ar-hybrid", "cgram-hybrid", "counting-hybrid"])
def test_reduction_family_answers(name):
    """Every instance of the Index reduction's image at m = 1, 2, 4 and 64 samples at m = 16."""
    for m in (1, 2, 4, 16):
        c = C.compare(name, m)
        assert c.instances >= (2 ** m * m if m <= 4 else 64) and c.mismatches == 0, (m, c.first)


def _words(spec, max_len):
    from rnngap.constructions.models import turing
    syms = sorted(turing.Encoding.of(spec.build()).dtm.input_symbols)
    return ["".join(w) for k in range(max_len + 1) for w in itertools.product(syms, repeat=k)]


def _cases():
    """(name, n, prompts, answers) per architecture: the reduction family where a model has one
    (the IsTree hub gadget for the IsTree models), every short word for the Turing machines."""
    t2, _ = hard.reduction_instances("istree", 2)
    istree = [row.tolist() for row in t2]
    idx, _ = hard.reduction_instances("index", 3)
    rng = np.random.default_rng(0)
    cases = [("istree-transformer", hard.data_length("istree", 2), istree, (TRUE, FALSE)),
             ("istree-hybrid", hard.data_length("istree", 2), istree, (TRUE, FALSE)),
             ("istree-rag", hard.data_length("istree", 2), istree[:3], None),
             ("index-rag", 3, [row.tolist() for row in idx[::5]], None),
             ("iterate-rnn", 3, [by_name("iterate-rnn").example(3, np.random.default_rng(s)) for s in range(4)],
              (TRUE, FALSE)),
             ("rnnsim-transformer", 3, [by_name("rnnsim-transformer").example(3, rng)], (TRUE, FALSE))]
    for arch in ("hybrid", "rag"):
        rec = by_name(f"tm-increment-{arch}")
        cases.append((rec.name, 2, _words(rec.args[0], 2), None))
    return cases


@pytest.mark.parametrize("name, n, prompts, answers", _cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_prefix_of_a_run(name, n, prompts, answers):
    """The machine's whole run (CoT, oracle tokens, answer): at every position the module's
    argmax is the machine's next token at that prefix."""
    built = by_name(name).build(n)
    contexts = [C.transcript(built.construction, built.model, p, answers) for p in prompts]
    assert all(len(ctx) > (len(p) if not isinstance(p, str) else 1) for ctx, p in zip(contexts, prompts))
    c = C.compare_prefixes(name, n, built.model, contexts)
    assert c.mismatches == 0, c.first
    assert c.positions == sum(len(ctx) - 1 for ctx in contexts)


@pytest.mark.parametrize("name, n", [("index-rag", 4), ("counting-rag", 3)])
def test_rag_closed_loop_with_the_oracle_in_python(name, n):
    """The exported RNN plus the RAG oracle in Python, generating on its own, writes the
    machine's CoT (the oracle's tokens included) and answer."""
    rc = by_name(name).build(n).construction
    tm = module(bundle(rc.model, name=name, n=n))
    family = "index" if name == "index-rag" else "counting"
    toks, ans = hard.reduction_instances(family, hard.index_bits(family, n))
    for row in toks[::9]:
        g = rc.run(row.tolist())
        mine = C.torch_generate(tm, row.tolist(), rc.answer_tokens, rc.cot_bound, rc.oracle(),
                                answer_after=EOS if rc.answer_tokens is None else None)
        assert g.stopped == "answer" and g.retrieved > 0
        assert (mine.context, mine.answer, mine.retrieved) == (g.context, g.answer, g.retrieved)


def test_grid_off_breaks_index():
    """Without the machine's rounding (plain float64 softmax) the Index Transformer answers wrong
    at once: the check can fail, and the grid is what makes the export the machine."""
    assert C.compare("index-transformer", 2, grid=False).mismatches > 0


# --- the files load with their own libraries alone ------------------------------------------

def test_torch_file_loads_with_torch_alone(tmp_path):
    path = tmp_path / "index.pt"
    export("index-transformer", 8, "torch", path)
    toks, _ = hard.reduction_instances("index", 8)
    model = by_name("index-transformer").build(8).model
    rows = toks[::97]
    script = ("import sys, json, torch\n"
              "extra = {'rnngap.json': ''}\n"
              "m = torch.jit.load(sys.argv[1], _extra_files=extra)\n"
              "rows = json.loads(sys.argv[2])\n"
              "print(json.dumps([m.predict(torch.tensor(r)) for r in rows]))\n"
              "assert not any(k.startswith('rnngap') for k in sys.modules)\n"
              "print(json.loads(extra['rnngap.json'])['name'])\n")
    r = subprocess.run([sys.executable, "-I", "-c", script, str(path), json.dumps(rows.tolist())],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got, name = r.stdout.strip().splitlines()
    assert json.loads(got) == model.predict_batch(rows).tolist() and name == "index-transformer"
    m, meta = load(path)
    assert meta["name"] == "index-transformer"


LENS_SCRIPT = '''
import json, sys, torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

saved = torch.load(sys.argv[1])
cfg = dict(saved["config"], dtype=getattr(torch, saved["config"]["dtype"]))
model = HookedTransformer(HookedTransformerConfig(**cfg))
model.load_state_dict(saved["state_dict"])
scale = 2.0 ** saved["frac_bits"]
grid = lambda x: torch.round(x * scale) / scale            # the machine's rounding, half to even
scores = {}

def keep(s, hook):
    scores[hook.layer()] = s

def machine_softmax(p, hook):                               # e = round(exp(s - max)), w = round(e / sum e)
    s = scores.pop(hook.layer())
    e = grid(torch.exp(s - s.max(-1, keepdim=True).values))
    return grid(e / e.sum(-1, keepdim=True))

hooks = [(f"blocks.{l}.attn.hook_attn_scores", keep) for l in range(cfg["n_layers"])]
hooks += [(f"blocks.{l}.attn.hook_pattern", machine_softmax) for l in range(cfg["n_layers"])]
tokens = torch.tensor(json.loads(sys.argv[2]))
with torch.no_grad():
    hooked = model.run_with_hooks(tokens, fwd_hooks=hooks)[:, -1].argmax(-1)
    plain = model(tokens)[:, -1].argmax(-1)
print(json.dumps([hooked.tolist(), plain.tolist()]))
'''


def test_transformer_lens_script_gives_the_machine_answers(tmp_path, capsys):
    """`rnngap export index-transformer --n 64 --to transformer-lens`: a short script with only
    torch and TransformerLens loads it into a HookedTransformer and, with the machine's softmax
    as a hook, answers as the exact machine on the reduction family (plain softmax does not)."""
    path = tmp_path / "index64.tl"
    rc, _, _ = _cli(capsys, "export", "index-transformer", "--n", "64", "--to", "transformer-lens",
                    "--out", str(path))
    assert rc == 0
    toks, _ = hard.sampled_reduction_instances(np.random.default_rng(1), "index", 64, 48)
    want = by_name("index-transformer").build(64).model.predict_batch(toks).tolist()
    (tmp_path / "run.py").write_text(LENS_SCRIPT)
    r = subprocess.run([sys.executable, "-I", str(tmp_path / "run.py"), str(path), json.dumps(toks.tolist())],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    hooked, plain = json.loads(r.stdout.strip().splitlines()[-1])
    assert hooked == want
    assert plain != want


@pytest.mark.parametrize("name", ["ar-transformer", "cgram-transformer", "counting-transformer", "istree-transformer",
                                  "rnnsim-transformer"])
def test_transformer_lens_every_transformer(name):
    """Every Transformer rnngap builds loads into a HookedTransformer that, with the hooks,
    predicts as the machine at every position of its runs: every instance of the Index
    reduction's image at m = 3 (the IsTree hub gadget's at m = 2; the simulator on examples)."""
    rec = by_name(name)
    if rec.key.task == "istree":
        model, n = rec.build(hard.data_length("istree", 2)).model, hard.data_length("istree", 2)
        prompts, answers = [r.tolist() for r in hard.reduction_instances("istree", 2)[0]], (TRUE, FALSE)
    elif rec.key.task in hard.TASKS:
        model, family, c, n = C.reduction_model(name, 3)
        prompts, answers = [r.tolist() for r in hard.reduction_instances(family, 3, c)[0]], None
    else:
        model, n = rec.build(3).model, 3
        prompts, answers = [rec.example(3, np.random.default_rng(s)) for s in range(2)], (TRUE, FALSE)
    tl = lens.hooked_transformer(bundle(model, name=name, n=n))
    hooks = lens.machine_softmax_hooks(tl.cfg.n_layers, model.fmt.frac_bits)
    for p in prompts:
        ctx = C.transcript(model, model, p, answers)[:-1]
        with torch.no_grad():
            got = tl.run_with_hooks(torch.tensor([ctx]), fwd_hooks=hooks)[0].argmax(-1).numpy()
        assert np.array_equal(got, C.machine_predictions(model, ctx)), (name, p)


def test_every_record_exports_or_says_why(tmp_path):
    """Every record of `rnngap show --list` exports to safetensors at a small n."""
    for rec in RECORDS:
        b = export(rec.name, 4, "safetensors", tmp_path / f"{rec.name}.safetensors")
        assert b.metadata["name"] == rec.name
    assert len(os.listdir(tmp_path)) == len(RECORDS)


def test_python_api(tmp_path):
    """rnngap.export and BuiltModel.export write what the command writes; bad input is a ValueError."""
    import rnngap
    assert "export" in dir(rnngap)
    a = rnngap.export("index-transformer", 8, "safetensors", tmp_path / "a.safetensors")
    m = rnngap.build("index-transformer", n=8)
    b = m.export("safetensors", tmp_path / "b.safetensors")
    assert read_safetensors(a).metadata == read_safetensors(b).metadata
    ta, tb = read_safetensors(a).tensors, read_safetensors(b).tensors
    assert all(np.array_equal(ta[k], tb[k]) for k in ta) and sorted(ta) == sorted(tb)
    with pytest.raises(ValueError, match="Transformers only"):
        rnngap.build("index-hybrid", n=4).export("transformer-lens", tmp_path / "c")
    assert not (tmp_path / "c").exists()
