"""The task modules and reference algorithms (checks/tasks/) never import the code
under test: of constructions/ they may read only the token conventions
(``rnngap.constructions.machine.vocab``). Relative imports are resolved, so
``from ...constructions import x`` cannot slip past."""
import ast
from pathlib import Path

import pytest

TASKS = Path(__file__).resolve().parents[1] / "checks" / "tasks"
PACKAGE = "rnngap.checks.tasks"


def imported_modules(path: Path, package: str = PACKAGE) -> set[str]:
    """Every module a file imports, relative imports resolved against ``package``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}     # `from pkg import module`
    return out


def construction_imports(mods: set[str]) -> set[str]:
    return {m for m in mods if m == "rnngap.constructions" or m.startswith("rnngap.constructions.")}


MODULES = sorted(p for p in TASKS.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_task_module_imports_only_the_vocabulary(path):
    bad = {m for m in construction_imports(imported_modules(path))
           if not m.startswith("rnngap.constructions.machine.vocab")}
    assert not bad, f"{path.name} imports code under test: {sorted(bad)}"


def test_the_check_sees_relative_and_absolute_construction_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from ...constructions.models import retrieval\nimport rnngap.constructions.build.model\n"
                 "from rnngap.constructions.machine.vocab import BOS\n")
    got = construction_imports(imported_modules(f))
    assert {"rnngap.constructions.models.retrieval", "rnngap.constructions.build.model"} <= got
    assert len(MODULES) >= 10
