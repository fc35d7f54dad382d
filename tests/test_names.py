"""One name per construction: the names of ``rnngap show --list`` are taken by
``certify --only`` / ``--explain`` and ``verify --only``; certificates are named
``<construction>`` or ``<construction>[variant]``; an unknown name is exit 2
with the closest names; ``certify`` shows progress on a terminal."""
from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest

from rnngap.checks.catalog import records as catalog
from rnngap.checks.cli.main import main
from rnngap.checks.cli.cmd_certify import resolve
from rnngap.checks.io.errors import UsageError
from rnngap.checks.verify.registry import Record
from rnngap.checks.verify.select import about, select as verify_select


def test_every_certificate_is_named_after_its_construction():
    names = set(catalog.names())
    for cert in catalog.certificates():
        assert cert.split("[", 1)[0] in names, cert
    from rnngap.checks.certify.istree_transformer import NAME as DFS
    from rnngap.checks.certify.istree_hybrid import NAME as IST
    from rnngap.checks.certify.simulator import NAME as SIM
    assert {DFS, IST, SIM} == {"istree-transformer[layers]", "istree-hybrid[layers]", "rnnsim-transformer[layers]"}


def test_every_listed_name_is_taken_by_certify_and_verify():
    certs = catalog.certificates()
    for name in catalog.names():
        resolve([name], certs, "--explain")              # raises for an unknown name
        claims, keep = verify_select([name])
        assert claims == [catalog.by_name(name).key.claim] and keep is not None
    assert resolve(["index-transformer"], certs, "--only") == ["index-transformer[a=2]", "index-transformer[a=n+2]"]
    assert resolve(["rnnsim-transformer"], certs, "--only") == ["rnnsim-transformer[layers]"]


@pytest.mark.parametrize("argv", [["certify", "--explain", "index-transfomer"], ["certify", "--only", "idx"],
                                  ["verify", "--only", "index-transfomer"]])
def test_an_unknown_name_is_exit_2_with_the_closest(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "closest:" in err
    assert len(err.split("closest:")[1].split(",")) == 3


def test_explain_a_construction_without_certificate(capsys):
    assert main(["certify", "--explain", "position-match-transformer"]) == 0
    assert capsys.readouterr().out.startswith("position-match-transformer: no certificate: ")


def test_explain_a_construction_explains_each_certificate(capsys):
    assert main(["certify", "--explain", "index-transformer"]) == 0
    out = capsys.readouterr().out
    assert "index-transformer[a=2] (T4.6-up): certified" in out and "index-transformer[a=n+2] (T4.6-up): certified" in out
    assert "do not fit" not in out and "builder margin (" in out


def _rec(claim, model, task, description=""):
    return Record(claim, model, task, 4, 1, 0, description=description)


def test_verify_keeps_the_records_about_the_construction():
    key = catalog.by_name("index-transformer").key
    assert about(_rec("T4.6-up", "index(n=4,a=2)", "index"), key)
    assert not about(_rec("T4.6-up", "ar(n=4,a=4)", "ar"), key)
    assert not about(_rec("T5.6", "index-hybrid(n=4)", "index"), key)
    cg = catalog.by_name("cgram-transformer").key
    assert about(_rec("T4.6-up", "cgram(c=3)(n=4,a=2)", "cgram(c=3)"), cg)
    paper = catalog.by_name("istree-rag-paper").key
    plain = catalog.by_name("istree-rag").key
    r = _rec("T5-RAG", "istree-rag-paper(N=4)", "istree")
    assert about(r, paper) and not about(r, plain)
    tm = catalog.by_name("tm-palindrome-hybrid").key
    assert about(_rec("T5-hyb-P", "tm-palindrome-hybrid(n=4)", "-", "TM palindrome: every input of length 4"), tm)
    assert not about(_rec("T5-hyb-P", "tm-0k1k-hybrid(n=4)", "-", "TM 0k1k: every input"), tm)


def test_certify_shows_progress_on_a_terminal():
    """On a pseudo-terminal the bar is drawn before the first certificate ends."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-c", "from rnngap.checks.cli.main import main; raise SystemExit(main())",
                             "certify", "--only", "iterate-rnn", "--workers", "1"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 240
    try:
        while time.monotonic() < deadline and b"certificates," not in seen:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
    finally:
        proc.wait(timeout=240)
        os.close(master)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text
    assert text.index("certifying") < text.index("1 certificates, 0 failed"), text
