"""``rnngap show`` for a reader (issue 48 item 5): every line in 100 columns,
grouped by layer, tokens by their vocabulary names (codes only behind --codes),
the answer as a token, the help with examples."""
from __future__ import annotations

import re

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names
from rnngap.checks.cli.main import build_parser, main
from rnngap.checks.cli.cmd_show import WIDTH, pack
from rnngap.constructions.machine.vocab import NUMBER_BASE, Vocab, token_code

SMALL_N = 3          # every catalogue model is shown at n = 3 (tests/test_cli.py)


def show(capsys, *argv):
    try:
        rc = main(["show", *argv])
    except SystemExit as e:                  # argparse
        rc = e.code
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def width(line: str) -> int:
    """Columns as `awk '{print length($0)}'` counts them in a C locale: bytes."""
    return len(line.encode("utf-8"))


def names_of(toks) -> list[str]:
    """The tokens as constructions/machine/vocab.py decodes them (a number as its value)."""
    v = Vocab(max_number=max([t - NUMBER_BASE for t in toks if t >= NUMBER_BASE] + [0]), meta=True, count=True)
    return [str(x) for x in v.decode(list(toks))]


def prompt_tokens(out: str) -> list[str]:
    """The example's tokens as printed: the lines after 'example (...)', each led by a position."""
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("example (seed"))
    toks = []
    for l in lines[i + 1:]:
        if l.startswith("next token:"):
            break
        m = re.match(r"^ +(\d+)  (.*)$", l)
        assert m, l
        toks.extend(m.group(2).split(" "))
    return toks


@pytest.mark.parametrize("flags", [(), ("--codes", "--full")])
def test_every_model_fits_in_100_columns_at_a_small_n(capsys, flags):
    for name in names():
        rc, out, err = show(capsys, name, "--n", str(SMALL_N), *flags)
        assert rc == 0 and not err, (name, err)
        lines = out.splitlines()
        wide = [(width(l), l) for l in lines if width(l) > WIDTH]
        assert not wide, (name, flags, wide[:3])
        assert "next token:" in out and "residual stream:" in out and "readout" in lines, name
        assert len(lines) < 300, (name, len(lines))


def test_a_big_model_is_grouped_by_layer_and_summarised(capsys):
    """istree-transformer (5 attention layers, 18 heads): a heading per layer, a
    head line per head with what it attends to at the last position, every MLP;
    far fewer lines than the 255 of the one-direction-per-line layout."""
    e = by_name("istree-transformer")
    spec = e.build(8).model.spec
    rc, out, err = show(capsys, "istree-transformer")
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) < 200 and max(width(l) for l in lines) <= WIDTH
    for h in ("embedding", "readout"):
        assert h in lines
    heads = [h for L in spec.attn_layers for h in L.heads]
    for l, L in enumerate(spec.attn_layers):
        assert any(x.startswith(f"attention layer {l}: {len(L.heads)} head") for x in lines), l
    for h in heads:
        assert any(x.startswith(f"  head {h.name}") for x in lines), h.name
    assert sum("attends at the last position to: pos " in x for x in lines) == len(heads)
    assert sum(x.startswith("  MLP: ") for x in lines) == sum(1 for L in spec.attn_layers if L.W1.shape[0])
    # at n = 256 the layout (heads, terms) is the same size; the prompt is cut, its end kept
    rc, out, err = show(capsys, "istree-transformer", "--n", "256")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) < 200 and max(width(l) for l in lines) <= WIDTH
    cut = [x for x in lines if "not shown (--full shows them)" in x and "positions" in x]
    assert len(cut) == 1
    toks = e.example(256, np.random.default_rng(0))
    start, *last = lines[lines.index(cut[0]) + 1].split()          # the prompt's last line, led by its position
    assert int(start) + len(last) == len(toks) and last[-1] == "[EOS]"


def test_tokens_are_printed_by_name(capsys):
    """The prompt, the answer, the attended positions, the embedding's is_token
    and the residual's token directions print tokens as the vocabulary names
    them; no code tau appears."""
    name, n, seed = "istree-transformer", 5, 2
    e = by_name(name)
    toks = e.example(n, np.random.default_rng(seed))
    model = e.build(n).model
    answer = names_of([model.predict(toks)])[0]
    rc, out, err = show(capsys, name, "--n", str(n), "--seed", str(seed))
    assert rc == 0, err
    assert prompt_tokens(out) == names_of(toks)
    assert f"next token: {answer}\n" in out
    assert "is_token([EOS])" in out and "is_token(-)" in out and "is_token([BOS])" in out
    assert "pos 0 ([BOS]): 1" in out
    assert re.search(r"\btok: \[EOS\]", out)                # the last token's code, shown as [EOS]
    assert re.search(rf"\bout: {re.escape(answer)}\b", out)  # the answer's direction, as the answer
    coded = re.compile(r"[^\s(]\[-?\d+\]")                 # a token then [code]: '[EOS][-1]', '6[7]'
    assert not coded.search(out), coded.findall(out)[:3]


def test_the_answer_is_a_token_not_its_code(capsys):
    """The Index Transformer's answer direction holds tau = k + 1 for the number
    k: it prints as k (the issue's 'answer 2' for token 1)."""
    e = by_name("index-transformer")
    for seed in range(4):
        toks = e.example(6, np.random.default_rng(seed))
        k = e.build(6).model.predict(toks) - NUMBER_BASE
        rc, out, err = show(capsys, "index-transformer", "--n", "6", "--seed", str(seed))
        assert rc == 0, err
        assert f"next token: {k}\n" in out and f"answer: {k}" in out, out[-600:]
        assert f"answer = {k + 1}, the code of {k} -> next token {k}" in out
        assert f"answer: {k + 1}" not in out


def test_codes_shows_each_tokens_code_in_brackets(capsys):
    name, n, seed = "istree-transformer", 5, 2
    e = by_name(name)
    toks = e.example(n, np.random.default_rng(seed))
    nxt = e.build(n).model.predict(toks)
    rc, out, err = show(capsys, name, "--n", str(n), "--seed", str(seed), "--codes")
    assert rc == 0, err
    assert prompt_tokens(out) == [f"{s}[{token_code(t)}]" for s, t in zip(names_of(toks), toks)]
    assert f"next token: {names_of([nxt])[0]}[{token_code(nxt)}]\n" in out
    assert "is_token([EOS][-1])" in out and "pos 0 ([BOS][0]): 1" in out and "tok: [EOS][-1]" in out


def test_pack_wraps_at_term_boundaries_and_counts_the_rest():
    labels = [f"direction_{i}_of_the_stream" for i in range(60)]
    terms = [f"({i + 1}*{lab})·({lab})" for i, lab in enumerate(labels)]
    full = pack("    score = ", terms, indent=10)
    assert len(full) > 3 and all(width(l) <= WIDTH for l in full)
    assert all(l.startswith("          + ") for l in full[1:])
    assert " + ".join(l.strip().removeprefix("score = ").removeprefix("+ ") for l in full) == " + ".join(terms)
    short = pack("    score = ", terms, indent=10, max_lines=3)
    assert len(short) == 3 and all(width(l) <= WIDTH for l in short)
    kept = re.findall(r"\(\d+\*(direction_\d+_of_the_stream)\)·\((direction_\d+_of_the_stream)\)", "\n".join(short))
    assert all(a == b for a, b in kept) and [a for a, _ in kept] == labels[:len(kept)]   # whole names, in order
    more = re.search(r"\+ (\d+) more terms$", short[-1])
    assert more and len(kept) + int(more.group(1)) == len(terms)
    # a list ends its lines with the separator; one item longer than a line breaks at its spaces only
    lst = pack("  reads: ", labels, sep=", ")
    assert all(l.endswith(",") for l in lst[:-1]) and all(width(l) <= WIDTH for l in lst)
    long_item = " + ".join(labels[:12])
    lines = pack("  x = ", [long_item])
    assert all(width(l) <= WIDTH for l in lines)
    assert " ".join(l.strip() for l in lines).removeprefix("x = ") == long_item


def test_help_has_examples_and_every_option_a_help_text(capsys):
    sub = next(a for a in build_parser()._actions if getattr(a, "choices", None) and "show" in a.choices)
    p = sub.choices["show"]
    assert p.epilog and p.epilog.startswith("examples:")
    assert all(a.help for a in p._actions), [a.dest for a in p._actions if not a.help]
    for opt in ("--codes", "--full", "--n", "--seed", "--list"):
        assert any(opt in a.option_strings for a in p._actions), opt
    with pytest.raises(SystemExit) as ex:
        main(["show", "--help"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].lstrip().startswith("rnngap show")
    # the examples run
    examples = [l.split("#")[0].split()[2:] for l in p.epilog.splitlines() if l.strip().startswith("rnngap show")]
    assert 1 <= len(examples) <= 3
    for argv in examples:
        rc, out, err = show(capsys, *argv)
        assert rc == 0 and out and not err, (argv, err)


@pytest.mark.parametrize("argv, needle", [
    (["no-such-model", "--codes"], "unknown model"),
    (["index-transformer", "--n", "0", "--full"], "--n must be"),
    (["index-transformer", "--seed", "-2", "--codes"], "--seed"),
    (["ar-transformer", "--n", "1", "--codes"], "--n 1"),
    (["index-transformer", "--n", "x"], "invalid int value"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    rc, out, err = show(capsys, *argv)
    assert rc == 2 and needle in err and not out, (rc, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
