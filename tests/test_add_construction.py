"""Adding a construction through the documented path (docs/conventions.md,
"Adding a construction"): its builder (what constructions/models/<family>.py
would hold), its record with a certified form and a whole-model plan (what
checks/catalog/<family>.py would hold), and this test. The toy is a one-head
Transformer that answers the first data token x_1 of ``[BOS] x_1 .. x_n
[QUERY]``. Once its record is in ``catalog.RECORDS`` it is listed by ``rnngap
show --list``, its declarations, parameter count and certificate-vs-measurement
rows appear in ``rnngap verify``, and ``rnngap certify`` proves it from the
model its builder builds, for every n. A wrong declaration in the record, or
one term changed in the builder, fails there."""
from __future__ import annotations

import dataclasses
import json
import re
import sys

import numpy as np
import pytest
import z3

from rnngap.checks.catalog import records as catalog
from rnngap.checks.certify.interpreter import OneHot, Plan
from rnngap.checks.certify.plans import ModelPlan
from rnngap.checks.certify.run import certify_built
from rnngap.checks.cli.main import main
from rnngap.checks.tasks.abstract import QUERY_CODE, Instance
from rnngap.constructions.models import bounds as Bd, obligations as O
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError, Builder, Component, base_space, match_head, number_readout
from rnngap.constructions.build.model import Model
from rnngap.constructions.build.num import smax
from rnngap.constructions.machine.vocab import BOS, QUERY, Vocab, number_token

# ---------------------------------------------------------------- 1. the builder
TOY = Bd.Declared("first-token", lambda B, n, a, c: 2 * B.lc(n + 3) + 6, Bd.const(8), claim="toy")
"""Its declared format: one match head with keys up to n + 3 (position + 1) and
query 2, scores <= lambda (2 * 2 (n + 3) + (n + 3)^2) with lambda = sharpness(8) = 7."""


KEY_OFFSET = 1
"""The key of position j is j + KEY_OFFSET (the one term the mutant test changes)."""


def first_transformer(n, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    """[BOS] x_1..x_n [QUERY] -> x_1: the head's query is the constant 2, the key of
    position j is j + 1, so the score peaks at j = 1. ``n`` may be a sympy symbol
    (``rnngap certify`` builds it so): sizes use ``smax``, not ``max``."""
    fmt = fmt or TOY.format(n)
    k = KEY_OFFSET
    s = base_space()
    s.hidden("answer", bound=smax(n, alphabet, 9) + 1)
    b = Builder(f"first-token(n={n})", "transformer", Vocab(smax(n, alphabet)), s, claim="toy", bounded=True)
    b.max_positions = n + 2
    first = Component(query={"one": 2}, key={"pos": 1, "one": k}, key_sq={"pos_sq": 1, "pos": 2 * k, "one": k * k},
                      max_query=2, max_key=n + 3)
    b.attention_layer([match_head("first", components=[first], copy={"answer": {"tok": 1}}, fmt=fmt)])
    number_readout(b, "answer")
    return b.build(fmt)


def _example(n, rng):
    return [BOS] + [number_token(int(v)) for v in rng.integers(0, 2, n)] + [QUERY]


# ---------------------------------------------------------------- 2. its record and plan
class FirstInstance(Instance):
    """The toy task's abstract instance: ``[BOS] x_1..x_n [QUERY]`` -> x_1 for every
    n >= 1 and data codes 1..a. A task of checks/tasks has its instance in
    checks/tasks/abstract.py; the toy's one-off task brings its own
    (``ModelPlan.instance``)."""

    task = "first"

    @property
    def length(self):
        return self.n + 2

    def token_facts(self, t):
        T = self.tau(t)
        return [z3.Implies(t == 0, T == 0), z3.Implies(z3.And(t >= 1, t <= self.n), z3.And(T >= 1, T <= self.a)),
                z3.Implies(t == self.n + 1, T == QUERY_CODE)]

    def answer_code(self, t, case=None):
        return self.tau(1)

    def concrete(self, tokens, **kw):
        return {"n": len(tokens) - 2}


PLAN = ModelPlan("first", lambda inst: Plan({"first": OneHot(
    target=lambda inst, t, case: 1, lemma="the key of x_1 (its position + 1 = 2) equals the query 2")}),
    instance=FirstInstance)
"""The one thing not read off the built weights: the head attends x_1."""


def _record(params: int, int_fn=TOY.int_fn) -> catalog.ConstructionRecord:
    decl = dataclasses.replace(TOY, int_fn=int_fn)
    cert = O.Construction("toy", "toy.first[a=2]", decl, 1, tuple(O.match_obligations(
        "first", lambda B, n: n + 3, lambda B, n: 2)))
    return catalog.ConstructionRecord(
        catalog.Key("toy", "first", "transformer"), first_transformer, _example, "toy: answers x_1",
        (catalog.Form("toy.first", params=params, params_n=(1, 1024),
                      resources=lambda: catalog.int_frac_resources("toy.first", decl),
                      certificates=lambda: (catalog.Certificate(cert, PLAN),)),))


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
    assert cert["method"] == "built-model" and cert["n_min"] == 1 and cert["n_max"] > 10 ** 6
    assert {"embedding", "heads", "readout", "builder-margins"} <= set(cert["covers"]), cert["covers"]
    lemmas = {f["lemma"] for f in cert["facts"]}
    assert PLAN.heads(FirstInstance()).heads["first"].lemma in lemmas
    assert all(f["answer"] in ("unsat", "holds") for f in cert["facts"])


def test_one_term_changed_in_the_builder_fails_certify(monkeypatch):
    """Keys j + 2 instead of j + 1: the head attends [BOS], the model answers [BOS]'s
    code, and the head's fact fails with z3's counterexample."""
    monkeypatch.setattr(sys.modules[__name__], "KEY_OFFSET", 2)
    toks = _example(5, np.random.default_rng(0))
    assert first_transformer(5).predict(toks) == BOS != toks[1]
    (cert,) = _record(PARAMS).certificate_list()
    r = certify_built(cert)
    assert not r.certified
    assert [f["obligation"] for f in r.failures] == ["layer 0 head first: " + PLAN.heads(FirstInstance()).heads[
        "first"].lemma], r.failures
    assert "sat" in r.failures[0]["why"]


def _builds(n, int_fn) -> bool:
    try:
        first_transformer(n, fmt=FixedFormat(int_fn(Bd.INT, n, 2, 2), 8))
        return True
    except MarginError:
        return False


def test_a_wrong_parameter_count_fails_in_verify(with_toy, capsys, tmp_path):
    """One parameter too few declared fails verify's declarations, in the toy's row."""
    with_toy(_record(PARAMS - 1))
    path = tmp_path / "verify.json"
    assert main(["verify", "--profile", "quick", "--only", "declarations", "--json", str(path)]) == 1
    capsys.readouterr()
    bad = [r for r in json.loads(path.read_text()) if r["status"] != "PASS"]
    assert [(r["model"], r["description"]) for r in bad] == [("toy.first", "params in O(constant) [toy]")], bad


def test_a_declared_format_too_small_fails_in_certify(with_toy, monkeypatch, capsys, tmp_path):
    """A declared I that grows too slowly (log n + 10 integer bits, where the scores
    need about 2 log n + 4) fails certify on the piece of n where the builder,
    which reads the same declaration, first refuses; the builds below it pass."""
    short = lambda B, n, a, c: B.lc(n + 3) + 10
    monkeypatch.setattr(sys.modules[__name__], "TOY", dataclasses.replace(TOY, int_fn=short))
    with_toy(_record(PARAMS, short))
    path = tmp_path / "certify.json"
    assert main(["certify", "--only", "toy.first[a=2]", "--json", str(path)]) == 1
    capsys.readouterr()
    (cert,) = json.loads(path.read_text())
    assert not cert["certified"] and cert["failures"][0]["obligation"].startswith("builder: first: scores up to")
    lo, hi = map(int, re.search(r"not shown on \[(\d+), (\d+)\]", cert["failures"][0]["why"]).groups())
    assert cert["failures"][0]["first_n"] == hi
    assert all(_builds(n, short) for n in (1, 2, lo - 1))
    assert not all(_builds(n, short) for n in range(lo, hi + 1))
