"""Adding a construction through the documented path (docs/conventions.md,
"Adding a construction"): a builder and its record, nothing else. The toy here
is a one-head Transformer that answers the first data token x_1 of
``[BOS] x_1 .. x_n [QUERY]``; once its record is in ``catalog.RECORDS`` it is
listed by ``rnngap show --list``, its declarations, parameter count and
certificate-vs-measurement rows appear in ``rnngap verify``, and ``rnngap
certify`` certifies it, and a wrong declaration in the record fails there."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from rnngap.checks.catalog import records as catalog
from rnngap.checks.cli.main import main
from rnngap.constructions.models import bounds as Bd, obligations as O
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError, Builder, Component, base_space, match_head, number_readout
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import BOS, QUERY, Vocab, number_token

# ---------------------------------------------------------------- 1. the builder
TOY = Bd.Declared("first-token", lambda B, n, a, c: 2 * B.lc(n + 3) + 6, Bd.const(8), claim="toy")
"""Its declared format: one match head with keys up to n + 3 (position + 1) and
query 2, scores <= lambda (2 * 2 (n + 3) + (n + 3)^2) with lambda = sharpness(8) = 7."""


def first_transformer(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """[BOS] x_1..x_n [QUERY] -> x_1: the head's query is the constant 2, the key of
    position j is j + 1, so the score peaks at j = 1."""
    fmt = fmt or TOY.format(n)
    s = base_space()
    s.hidden("answer", bound=max(n, alphabet, 9) + 1)
    b = Builder(f"first-token(n={n})", "transformer", Vocab(max(n, alphabet)), s, claim="toy", bounded=True)
    b.max_positions = n + 2
    first = Component(query={"one": 2}, key={"pos": 1, "one": 1}, key_sq={"pos_sq": 1, "pos": 2, "one": 1},
                      max_query=2, max_key=n + 3)
    b.attention_layer([match_head("first", components=[first], copy={"answer": {"tok": 1}}, fmt=fmt)])
    number_readout(b, "answer")
    return b.build(fmt)


def _example(n, rng):
    return [BOS] + [number_token(int(v)) for v in rng.integers(0, 2, n)] + [QUERY]


# ---------------------------------------------------------------- 2. its record
def _record(params: int, int_fn=TOY.int_fn) -> catalog.ConstructionRecord:
    decl = dataclasses.replace(TOY, int_fn=int_fn)
    cert = O.Construction("toy", "toy.first[a=2]", decl, 1, tuple(O.match_obligations(
        "first", lambda B, n: n + 3, lambda B, n: 2)))
    return catalog.ConstructionRecord(
        catalog.Key("toy", "first", "transformer"), first_transformer, _example, "toy: answers x_1",
        (catalog.Form("toy.first", params=params, params_n=(1, 1024),
                      resources=lambda: catalog.int_frac_resources("toy.first", decl),
                      certificates=lambda: (catalog.Certificate(cert),)),))


PARAMS = first_transformer(4).resources.params
"""The toy's parameter count, read once from one build; the declarations check
measures the builds at every sampled n against it."""


@pytest.fixture
def with_toy(monkeypatch):
    """The toy beside the Index Transformer's record (all records' checks take
    minutes; the T4.6-up certificate check needs at least one of its records)."""
    def add(record):
        monkeypatch.setattr(catalog, "RECORDS", (catalog.by_name("index-transformer"), record))
    return add


def test_the_toy_answers_the_first_token():
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 17):
        model = first_transformer(n)
        for _ in range(4):
            toks = _example(n, rng)
            assert model.predict(toks) == toks[1], (n, toks)


def test_a_record_is_seen_by_show_verify_and_certify(with_toy, capsys, tmp_path):
    with_toy(_record(PARAMS))
    assert main(["show", "--list"]) == 0
    listed = capsys.readouterr().out
    assert any(line.split()[0] == "first-transformer" and "toy: answers x_1" in line
               for line in listed.splitlines() if line.strip())
    assert main(["show", "first-transformer", "--n", "5"]) == 0
    assert "head first" in capsys.readouterr().out

    path = tmp_path / "verify.json"
    assert main(["verify", "--profile", "quick", "--only", "declarations", "--json", str(path)]) == 0
    capsys.readouterr()
    recs = [r for r in json.loads(path.read_text()) if r["model"].startswith(("toy.", "first-"))]
    seen = {(r["model"], r["description"]) for r in recs}
    assert {("toy.first", "int_bits in O(log) [toy]"), ("toy.first", "frac_bits in O(log) [toy]"),
            ("toy.first", "params in O(constant) [toy]"),
            ("first-transformer vs toy.first[a=2]", "certificate vs measurement")} <= seen, seen
    assert all(r["status"] == "PASS" and r["instances"] > 1 for r in recs), recs

    path = tmp_path / "certify.json"
    assert main(["certify", "--only", "toy", "--json", str(path)]) == 0
    capsys.readouterr()
    (cert,) = json.loads(path.read_text())
    assert cert["construction"] == "toy.first[a=2]" and cert["certified"] and cert["params"] == PARAMS
    assert cert["n_max"] > 10 ** 6 and cert["obligations"] == 2


def test_a_wrong_record_fails_in_verify_and_certify(with_toy, capsys, tmp_path):
    """One parameter too few declared fails verify's declarations; a declared I three
    bits short from n = 100 on (the declaration has 2 to 4 bits of slack) fails
    certify at the first n whose scores no longer fit, where the builder refuses too."""
    short = lambda B, n, a, c: TOY.int_fn(B, n, a, c) - (3 if B is Bd.INT and n >= 100 else 0)
    with_toy(_record(PARAMS - 1, short))
    path = tmp_path / "verify.json"
    assert main(["verify", "--profile", "quick", "--only", "declarations", "--json", str(path)]) == 1
    capsys.readouterr()
    bad = [r for r in json.loads(path.read_text()) if r["status"] != "PASS"]
    assert bad and all(r["model"].startswith("toy.") for r in bad), bad
    assert any(r["description"] == "params in O(constant) [toy]" for r in bad)
    path = tmp_path / "certify.json"
    assert main(["certify", "--only", "toy.first[a=2]", "--json", str(path)]) == 1
    capsys.readouterr()
    (cert,) = json.loads(path.read_text())
    assert not cert["certified"] and cert["failures"][0]["obligation"] == "first.range"
    n1 = cert["failures"][0]["first_n"]
    assert n1 >= 100
    fmt = lambda n: FixedFormat(short(Bd.INT, n, 2, 2), 8)
    with pytest.raises(MarginError):
        first_transformer(n1, fmt=fmt(n1))
    first_transformer(n1 - 1, fmt=fmt(n1 - 1))
