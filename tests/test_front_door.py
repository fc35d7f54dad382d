"""The front door stays true: the README's size and first paragraph, its
quickstart (run as a doctest, so its pasted output is what it prints), its
first-minute command's pasted output, the claim table's cell lengths, the
docs' size and dates, the licence and citation files."""
from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _first_paragraph() -> str:
    body = README.split("\n\n", 2)[1]           # after the title
    return " ".join(body.split())


def test_readme_is_a_front_door():
    assert len(README.encode()) <= 12 * 1024, len(README.encode())
    words = _first_paragraph().split()
    assert len(words) <= 80, len(words)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", _first_paragraph()) if s]
    assert len(sentences) <= 3 and all(len(s.split()) <= 35 for s in sentences), sentences
    assert "arxiv.org/abs/2402.18510" in README


def _block(lang: str) -> str:
    m = re.search(rf"```{lang}\n(.*?)```", README, re.S)
    assert m, f"no {lang} block in README.md"
    return m.group(1)


def test_quickstart_prints_what_the_readme_shows():
    code = _block("python")
    assert len(code.strip().splitlines()) <= 12
    test = doctest.DocTestParser().get_doctest(code, {}, "README quickstart", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.attempted >= 5 and res.failed == 0, res


def test_first_minute_command_prints_what_the_readme_shows():
    lines = _block("console").strip().splitlines()
    cmd, expected = lines[0], lines[1:]
    assert cmd.startswith("$ .venv/bin/rnngap ")
    argv = cmd[len("$ .venv/bin/rnngap "):].split()
    r = subprocess.run([sys.executable, "-c", "from rnngap.checks.cli.main import main; raise SystemExit(main())", *argv],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == expected


def test_claim_table_cells_are_short():
    table = README[README.index("<!-- claims -->"):README.index("<!-- /claims -->")]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert rows
    for row in rows:
        for cell in row.strip("|").split("|"):
            text = re.sub(r"\]\([^)]*\)", "]", cell)           # a link's target is not read
            assert len(text.split()) <= 25, cell


def test_docs_are_reference():
    assert len((ROOT / "docs" / "certify.md").read_bytes()) <= 25 * 1024
    date = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.name in ("benchmarks.md", "CHANGELOG.md"):
            continue
        assert not date.search(path.read_text()), (path.name, date.search(path.read_text()).group())


def test_licence_and_citation():
    tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    cff = (ROOT / "CITATION.cff").read_text()
    assert "2402.18510" in cff and "Wen" in cff and "cff-version" in cff


def test_python_requirement_matches_the_tests():
    """pyproject's requires-python is what the suite needs: tomllib is read through
    tomli below 3.11 (a dev extra), nothing else needs a newer Python."""
    tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli")
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert conf["project"]["requires-python"] == ">=3.10"
    assert any(d.startswith("tomli") and "python_version < '3.11'" in d
               for d in conf["project"]["optional-dependencies"]["dev"])
    for path in (ROOT / "tests").glob("*.py"):
        for line in path.read_text().splitlines():
            assert not re.match(r"\s*(import tomllib|from tomllib)", line), (path.name, line)


def test_module_docstrings_are_a_paragraph():
    """Every module's docstring is about a paragraph (at most ~150 words, doctest
    lines not counted; 175 allows for example output); the detail is in docs/."""
    import ast
    over = []
    for pkg in ("constructions", "lowerbounds", "checks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            lines = [ln for ln in doc.splitlines() if not ln.strip().startswith((">>>", "..."))]
            words = len(" ".join(lines).split())
            if words > 175:
                over.append((path.name, words))
    assert not over, over


def test_every_command_has_examples_and_every_option_a_help():
    import argparse
    from rnngap.checks.cli.main import build_parser

    def subparsers(p):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield name, sp
                    yield from ((f"{name} {n}", q) for n, q in subparsers(sp))
    seen = 0
    for name, sp in subparsers(build_parser()):
        seen += 1
        assert sp.epilog and "examples:" in sp.epilog, name
        for a in sp._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert a.help, (name, a.option_strings or a.dest)
    assert seen >= 9


def test_verify_prints_one_line_per_claim_and_failures_in_full():
    import io
    from types import SimpleNamespace
    from rich.console import Console
    from rnngap.checks.verify.registry import Record
    from rnngap.checks.verify.report import report
    recs = [Record("T4.6-up", "index(n=4,a=2)", "index", 16, 10, 0, family="reduction"),
            Record("T4.6-up", "ar(n=4,a=4)", "ar", 65536, 10, 2, family="reduction", note="x_3 read for x_4"),
            Record("declarations", "index-transformer", "-", 1024, 3, 0)]
    buf = io.StringIO()
    args = SimpleNamespace(records=False, quiet=False, notes=False, profile="quick", seed=0)
    report(recs, [], args, 1.0, console=Console(file=buf, width=100))
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= 100 for line in lines if not line.startswith("  "))   # a failure is one whole line
    claims = [line.split()[0] for line in lines[1:] if line.split() and line.split()[0] in ("T4.6-up", "declarations")]
    assert claims == ["T4.6-up", "declarations"]
    t46 = next(line for line in lines if line.startswith("T4.6-up"))
    assert t46.split()[1:4] == ["2", "1", "65536"] and "reduction" in t46 and "FAIL" in t46
    assert any("FAIL T4.6-up ar(n=4,a=4) task=ar n=65536" in line and "x_3 read for x_4" in line for line in lines)
    assert lines[-1].startswith("3 records, 1 failed")
