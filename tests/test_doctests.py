"""Every ``>>>`` example in constructions/, lowerbounds/ and checks/ runs (issue
16.7): one test per module that contains one, found by scanning the source, so a
new module with examples is doctested without being listed here. Examples that
need shared data or minutes are marked ``# doctest: +SKIP`` in place, with why."""
from __future__ import annotations

import doctest
import sys
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("constructions", "lowerbounds", "checks")


def module_name(path: Path) -> str:
    """The import name of a source file: checks/api/ is the package ``rnngap`` itself
    (pyproject.toml), every other folder ``rnngap.<folder>``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[:2] == ["checks", "api"]:
        parts = parts[2:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["rnngap", *parts])


def _modules_with_examples() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if ">>>" in path.read_text():
                out.append(module_name(path))
    return out


MODULES = _modules_with_examples()


def test_the_scan_finds_the_modules():
    assert len(MODULES) >= 30 and "rnngap.constructions.models.rag" in MODULES and "rnngap.checks.catalog.records" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name)
    examples = sum(len(t.examples) for t in tests)
    assert examples > 0, f"{name} has '>>>' in its source but doctest finds no example in it"
    for t in tests:
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, f"{name}: {res.failed} of {res.attempted} examples failed (output above)"


def _imports(pkg_name: str) -> list[str]:
    """Library modules (constructions/, lowerbounds/, checks/) importing ``pkg_name``."""
    import ast
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
                if any(n == pkg_name or n.startswith(pkg_name + ".") for n in names):
                    out.append(str(path.relative_to(ROOT)))
    return out


def test_test_and_notebook_tools_are_dev_dependencies_only():
    """pytest and the notebook tools are in the ``dev`` extra, not runtime
    dependencies, and no library module imports them; hypothesis is a runtime
    dependency exactly because a library module (checks/tasks) imports it."""
    import re
    tomllib = __import__("tomllib" if sys.version_info >= (3, 11) else "tomli")
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = lambda req: re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower()
    runtime = {name(r) for r in conf["dependencies"]}
    dev = {name(r) for r in conf["optional-dependencies"]["dev"]}
    for tool in ("pytest", "nbclient", "nbformat", "ipykernel"):
        assert tool in dev and tool not in runtime, tool
        assert _imports(tool) == [], (tool, _imports(tool))
    assert ("hypothesis" in runtime) == bool(_imports("hypothesis")), _imports("hypothesis")
