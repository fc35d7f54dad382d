"""The package's layout, measured from its own sources: no import circle (imports
inside functions included), no private name imported from another module, the
layers of rnngap.constructions in order (machine, then build, then models) and
nothing under it importing checks or lowerbounds, and a first docstring line in
every file (docs/conventions.md, "Layout")."""
from __future__ import annotations

import ast
from pathlib import Path

import rnngap
import rnngap.checks
import rnngap.constructions
import rnngap.lowerbounds

ROOTS = {"rnngap": Path(rnngap.__file__).resolve().parent,
         "rnngap.checks": Path(rnngap.checks.__file__).resolve().parent,
         "rnngap.constructions": Path(rnngap.constructions.__file__).resolve().parent,
         "rnngap.lowerbounds": Path(rnngap.lowerbounds.__file__).resolve().parent}


def modules() -> dict[str, Path]:
    """Every module of the package: its dotted name -> its source file."""
    out = {}
    for pkg, root in ROOTS.items():
        files = root.glob("*.py") if pkg == "rnngap" else root.rglob("*.py")
        for p in files:
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if pkg != "rnngap" and parts and parts[0] == "api":
                continue                          # checks/api is the package rnngap itself
            out[".".join([pkg, *parts])] = p
    return out


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, str, int]]:
    """(module imported, name imported or "", line) for every import of a module
    of the package in ``path``, at any depth (inside functions too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in known:
                    out.append((full, "", node.lineno))
                elif target in known:
                    out.append((target, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(alias.name, "", node.lineno) for alias in node.names if alias.name in known]
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and
    the modules that import themselves."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


MODULES = modules()
EDGES = {m: imports(m, p, set(MODULES)) for m, p in MODULES.items()}


def test_the_scan_sees_the_package():
    assert {"rnngap.constructions.machine.kernels", "rnngap.checks.certify.run", "rnngap.checks.cli.main",
            "rnngap.lowerbounds.cc", "rnngap.model"} <= set(MODULES)
    assert "rnngap.constructions.machine.kernels" in {t for t, _, _ in EDGES["rnngap.constructions.build.model"]}


def test_no_import_circles():
    graph = {m: {t for t, _, _ in es if t != m and not m.startswith(t + ".")} for m, es in EDGES.items()}
    assert cycles(graph) == []


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n")
    known = {"p.a", "p.b"}
    graph = {m: {t for t, _, _ in imports(m, tmp_path / f"{m[2:]}.py", known)} for m in known}
    assert cycles(graph) == [["p.a", "p.b"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_no_private_name_is_imported_from_another_module():
    private = [f"{m}:{line} imports {n} from {t}" for m, es in EDGES.items() for t, n, line in es
               if n.startswith("_") and not n.startswith("__")]
    assert private == []


LAYERS = ["rnngap.constructions.machine", "rnngap.constructions.build", "rnngap.constructions.models"]


def test_the_constructions_are_layered_and_import_no_check():
    bad = []
    for m, es in EDGES.items():
        if not m.startswith("rnngap.constructions"):
            continue
        mine = next((i for i, L in enumerate(LAYERS) if m.startswith(L + ".")), -1)
        for t, _, line in es:
            if not t.startswith("rnngap.constructions") and t != "rnngap.constructions":
                bad.append(f"{m}:{line} imports {t}")
            theirs = next((i for i, L in enumerate(LAYERS) if t.startswith(L + ".")), -1)
            if mine >= 0 and theirs > mine:
                bad.append(f"{m}:{line} imports {t}, a later layer")
    assert bad == []


def test_lowerbounds_import_no_check():
    bad = [f"{m}:{line} imports {t}" for m, es in EDGES.items() if m.startswith("rnngap.lowerbounds")
           for t, _, line in es if t.startswith("rnngap.checks") or t in ("rnngap",)
           or (t.startswith("rnngap.") and t.split(".")[1] not in ("constructions", "lowerbounds"))]
    assert bad == []


def test_every_file_says_what_it_is():
    missing = [str(p) for p in MODULES.values()
               if not (ast.get_docstring(ast.parse(p.read_text())) or "").strip().splitlines()[:1]]
    assert missing == []


MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 80


def _jitted(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, (ast.Name, ast.Call, ast.Attribute)) and "jit" in ast.unparse(d)
               for d in fn.decorator_list)


def test_no_file_over_900_lines():
    long = {str(p): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_over_80_lines_outside_numba_kernels():
    long = [f"{p}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for p in MODULES.values() for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _jitted(node)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []
