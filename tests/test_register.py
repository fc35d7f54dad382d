"""A researcher's own construction, in a module outside this repository, joins
rnngap through the API: ``rnngap.register`` (or ``$RNNGAP_CONSTRUCTIONS`` naming
the module). It is listed by ``rnngap show``, checked by ``rnngap verify`` on
its task's reduction family, and certified by ``rnngap certify`` from its built
model, like a built-in one; a one-term change to its builder fails both."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rnngap.checks.catalog import records as catalog
from rnngap.checks.cli.main import main

MODULE = textwrap.dedent('''
    """An Index Transformer of one's own: [BOS] x_1..x_n [QUERY] i -> x_i."""
    import rnngap
    from rnngap.checks.catalog import records as catalog
    from rnngap.checks.catalog import retrieval
    from rnngap.constructions.models import bounds, obligations
    from rnngap.constructions.build.gadgets import Builder, Component, base_space, match_head, number_readout
    from rnngap.constructions.build.num import smax
    from rnngap.constructions.machine.vocab import BOS, QUERY, Vocab, number_token

    KEY_OFFSET = {offset}      # 1: the key of position j is j + 1, the query tau(i) = i + 1


    def index_mine(n, *, alphabet=2, fmt=None):
        fmt = fmt or bounds.INDEX.format(n, alphabet)
        code = smax(n + 1, alphabet, 9)   # symbolic n too: certify builds it so
        s = base_space()
        s.hidden("answer", bound=code)
        b = Builder(f"{name}(n={{n}})", "transformer", Vocab(smax(n, alphabet - 1)), s, claim="T4.6-up",
                    bounded=True)
        b.max_positions = n + 3
        k = KEY_OFFSET
        position = Component(query={{"tok": 1}}, key={{"pos": 1, "one": k}},
                             key_sq={{"pos_sq": 1, "pos": 2 * k, "one": k * k}}, max_query=code,
                             max_key=smax(n + 3, alphabet, 9))
        b.attention_layer([match_head("index", components=[position], copy={{"answer": {{"tok": 1}}}}, fmt=fmt)])
        number_readout(b, "answer")
        return b.build(fmt)


    def example(n, rng):
        return [BOS] + [number_token(int(v)) for v in rng.integers(0, 2, n)] + [QUERY, number_token(1)]


    CERT = obligations.Construction("T4.6-up", "{name}[a=2]", bounds.INDEX, 1, tuple(obligations.match_obligations(
        "index", lambda B, n: B.max(n + 3, 2, 9), lambda B, n: B.max(n + 1, 2, 9))), alphabet=lambda B, n: 2)
    PARAMS = index_mine(4).resources.params
    RECORD = rnngap.register(catalog.ConstructionRecord(
        catalog.Key("T4.6-up", "index", "{arch}"), index_mine, example, "my own Index Transformer",
        (catalog.Form("{name}", params=PARAMS, params_n=(1, 64),
                      certificates=lambda: (catalog.Certificate(CERT, retrieval.INDEX),)),)))
''')


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """Import a module written in a temporary directory, which registers its record."""
    def load(name: str, arch: str, offset: int):
        (tmp_path / f"{arch}.py").write_text(MODULE.format(name=name, arch=arch, offset=offset))
        monkeypatch.syspath_prepend(str(tmp_path))
        __import__(arch)
        return name
    yield load
    catalog.REGISTERED[:] = []
    for m in [m for m in sys.modules if m in ("mine", "wrong")]:
        del sys.modules[m]


def test_a_registered_construction_is_shown_verified_and_certified(registered, capsys, tmp_path):
    name = registered("index-mine", "mine", 1)
    assert main(["show", "--list"]) == 0
    assert any(line.split()[0] == name for line in capsys.readouterr().out.splitlines() if line.strip())
    path = tmp_path / "verify.json"
    assert main(["verify", "--only", name, "--json", str(path)]) == 0
    capsys.readouterr()
    recs = json.loads(path.read_text())
    mine = [r for r in recs if r["model"] == name and r["family"] == "reduction"]
    assert len(mine) >= 6 and all(r["status"] == "PASS" and r["instances"] > 0 for r in mine), recs
    assert sum(r["instances"] for r in mine) >= 6 * 64        # every instance of m = 6: 6 * 2^6
    assert any(r["claim"] == "declarations" for r in recs)
    path = tmp_path / "certify.json"
    assert main(["certify", "--only", name, "--json", str(path)]) == 0
    capsys.readouterr()
    (cert,) = json.loads(path.read_text())
    assert cert["construction"] == f"{name}[a=2]" and cert["certified"] and cert["source"] == "built-model"


def test_a_wrong_registered_construction_fails_verify_and_certify(registered, capsys, tmp_path):
    """The key of position j is j + 2 (one term of the builder changed): the head
    attends x_{i-1}."""
    name = registered("index-wrong", "wrong", 2)
    path = tmp_path / "verify.json"
    assert main(["verify", "--only", name, "--json", str(path)]) == 1
    capsys.readouterr()
    bad = [r for r in json.loads(path.read_text()) if r["status"] == "FAIL"]
    assert bad and all(r["model"] == name and r["family"] == "reduction" for r in bad), bad
    assert main(["certify", "--only", name]) == 1
    assert f"FAILED {name}[a=2]" in capsys.readouterr().out


def test_a_module_named_in_the_environment_is_seen_by_every_process(tmp_path):
    (tmp_path / "mine.py").write_text(MODULE.format(name="index-mine", arch="mine", offset=1))
    env = {**os.environ, "RNNGAP_CONSTRUCTIONS": "mine",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", "from rnngap.checks.cli.main import main; raise SystemExit(main())",
                        "show", "--list"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "index-mine" in r.stdout and "my own Index Transformer" in r.stdout


def test_register_refuses_a_taken_name():
    with pytest.raises(ValueError, match="exists"):
        catalog.register(catalog.by_name("index-transformer").__class__(
            catalog.Key("T4.6-up", "index", "transformer"), print, print, "dup"))
    with pytest.raises(ValueError, match="ConstructionRecord"):
        catalog.register("index-transformer")
