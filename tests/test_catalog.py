"""The construction records (checks/catalog/records.py): every construction reachable, listed by
``rnngap show --list``, and in one-to-one correspondence with ``rnngap certify``."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np

from rnngap.checks.catalog import records as CAT
from rnngap.checks.cli.main import main
from rnngap.constructions.build.model import Model

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURES = ("transformer", "hybrid", "rag", "rnn")


def _builders_in_constructions() -> set[tuple[str, str]]:
    """(file, function) of every public top-level ``def <task>_<architecture>`` in
    constructions/, read from the source (not from the catalogue)."""
    out = set()
    for path in sorted((ROOT / "constructions").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") \
                    and node.name.removesuffix("_paper").rsplit("_", 1)[-1] in ARCHITECTURES:
                out.add((path.relative_to(ROOT).as_posix(), node.name))
    return out


# defs named like builders that build no claim's upper-bound construction: the
# simulator's inputs and the lower bounds' targets (random / register RNNs), the
# no-CoT contrast of T4.1 and the protocol's runner
NOT_CATALOGUED = {("constructions/models/simulate.py", "random_linear_rnn"),
                  ("constructions/models/targets.py", "random_linear_rnn"),
                  ("constructions/models/targets.py", "register_index_rnn"),
                  ("constructions/models/cot_hierarchy.py", "unrolled_rnn"),
                  ("constructions/build/protocol.py", "run_rnn")}


def test_every_builder_is_in_the_catalogue():
    where = {tuple(e.where.split(":")) for e in CAT.records()}
    found = _builders_in_constructions()
    assert found, "the scan found no builder"
    assert found - NOT_CATALOGUED <= where, sorted(found - NOT_CATALOGUED - where)
    assert where <= found, sorted(where - found)       # and every entry's builder is such a def


def test_catalogue_covers_every_construction_claim():
    keys = {r.key for r in CAT.records()}
    claims = {k.claim for k in keys}
    assert set(CAT.CONSTRUCTION_CLAIMS) <= claims, set(CAT.CONSTRUCTION_CLAIMS) - claims
    for claim, task in [("T4.6-up", t) for t in CAT.RETRIEVAL_TASKS] + [("T4.6-up", "mqar")]:
        assert (claim, task, "transformer") in keys
    for t in CAT.RETRIEVAL_TASKS + ("istree",):
        assert ("T5.6", t, "hybrid") in keys and ("T5-RAG", t, "rag") in keys


def test_keyword_only_alphabet_and_c():
    for e in CAT.records():
        params = inspect.signature(e.builder).parameters
        for name in ("alphabet", "c"):
            if name in params:
                assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (e.where, name)


def test_show_list_names_every_entry_once(capsys):
    assert main(["show", "--list"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert sorted(listed) == CAT.names() and len(set(listed)) == len(CAT.records())
    for e in CAT.records():
        assert e.where in out


def test_every_entry_builds_a_model_and_its_example_runs():
    """entry.build(n) -> Built with a Model (the uniform interface) at n = 3, and
    the model reads its seeded example (the next token is a vocabulary token)."""
    for e in CAT.records():
        b = e.build(3)
        assert isinstance(b.model, Model) and b.name == e.name, e.name
        assert (b.construction is b.model) == isinstance(b.construction, Model)
        toks = e.example(3, np.random.default_rng(0))
        s = b.model.session(capacity=len(toks))
        s.feed(toks)
        assert b.model.vocab.contains(s.next_token()), e.name


def test_certificates_map_one_to_one_onto_records():
    """Every certificate of ``rnngap certify`` belongs to one record of its own
    claim, and every construction-claim record has a certificate or a stated reason."""
    certs = CAT.certificates()
    owner = {}
    for e in CAT.records():
        for name in e.certificates:
            assert certs[name].claim == e.key.claim, (e.name, name)
            assert name not in owner, (name, owner.get(name), e.name)
            owner[name] = e.name
    assert set(owner) == set(certs)
    for e in CAT.records():
        if e.key.claim in CAT.CONSTRUCTION_CLAIMS:
            assert bool(e.certificates) != bool(e.uncertified), e.name


def test_retrieval_model_passes_c_to_cgram_only():
    m3 = CAT.retrieval_model("cgram", "transformer", 6, alphabet=2, c=3)
    m4 = CAT.retrieval_model("cgram", "transformer", 6, alphabet=2, c=4)
    assert m3.spec.notes != m4.spec.notes or m3.resources.params != m4.resources.params or m3.name != m4.name
    a = CAT.retrieval_model("index", "hybrid", 6, alphabet=3, c=4)
    assert a.name == CAT.entry("T5.6", "index", "hybrid").build(6, alphabet=3).model.name


def test_the_tour_names_each_claims_builders():
    """docs/tour.md names every catalogued builder as file:function in its claim's
    section, and the README's claim table has a row for every claim."""
    from rnngap.checks.verify.registry import CLAIMS
    tour = (ROOT / "docs" / "tour.md").read_text()
    sections = {}
    for part in tour.split("\n## ")[1:]:
        sections[part.split(":", 1)[0].strip().strip("`")] = part
    for e in CAT.records():
        assert e.key.claim in sections, e.key.claim
        assert e.where in sections[e.key.claim], (e.name, e.where)
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- claims -->"):readme.index("<!-- /claims -->")]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert sorted(r.split("]", 1)[0][3:].strip("`") for r in rows) == sorted(CLAIMS), rows
