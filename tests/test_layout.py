"""The package's layout, measured from its own sources: no import circle (imports
inside functions included), no private name imported from another module, the
layers of rnngap.constructions in order (machine, then build, then models) and
nothing under it importing checks or lowerbounds, and a first docstring line in
every file (docs/conventions.md, "Layout")."""
from __future__ import annotations

import ast
import warnings
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


# ---------------------------------------------------------------------------
# Imports inside function bodies (issue 49). One is allowed only (i) of an
# optional or slow package (LAZY_PACKAGES), (ii) in the command line
# (checks/cli/, lazy by design so that `rnngap --help` stays fast; each file says
# why in a comment), or (iii) to break a real import circle, marked by a comment
# containing "circle:" (naming the circle) on its line or the line above. Every
# other import belongs at the top of its module.

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("constructions", "lowerbounds", "checks", "benchmarks")
LAZY_PACKAGES = frozenset({
    "torch", "transformer_lens", "safetensors",        # rnngap export (the torch extra; safetensors on demand)
    "distributed", "dask",                             # rnngap verify --engine dask (the dask extra)
    "psutil",                                          # installed with distributed only, not by rnngap
    "matplotlib", "rich", "numba", "z3",               # slow to import, loaded where they are used
    "IPython", "nbformat", "nbclient",                 # the notebooks (the dev extra)
})
LAZY_BY_DESIGN = ("checks/cli/", "checks/api/")
"""Lazy by design: the command line (``rnngap --help`` stays fast) and the Python
API (``import rnngap`` is light: each name loads its modules when first used)."""
OPTIONAL_MODULES = frozenset({"torch_model", "lens", "conformance"})
"""checks/export's modules that import torch (the torch extra) at their top: imported lazily."""

KNOWN_FUNCTION_IMPORTS = {
    # Files whose function-level imports are not yet moved: path -> how many
    # disallowed ones they have. A count may only go DOWN; when it does, lower it
    # here (and drop a file that reaches 0).
    "benchmarks/__main__.py": 7,
    "benchmarks/dask_bench.py": 5,
    "benchmarks/scale.py": 3,
    "benchmarks/wide_bench.py": 15,
}
CLI_WITHOUT_A_REASON: set[str] = set()
"""CLI files whose lazy imports say no reason yet (same rule: remove names, add none)."""


def function_imports(path: Path) -> list[tuple[int, list[str], str]]:
    """(line, modules imported, the line and the one above it) of every import
    inside a function body of ``path`` (nested functions counted once); a relative
    import's module is "." plus its name."""
    src = path.read_text()
    lines = src.splitlines()
    out, seen = [], set()
    for node in ast.walk(ast.parse(src)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Import, ast.ImportFrom)) and sub.lineno not in seen:
                seen.add(sub.lineno)
                mods = ([a.name for a in sub.names] if isinstance(sub, ast.Import)
                        else ["." * sub.level + sub.module] if sub.module
                        else ["." * sub.level + a.name for a in sub.names])
                around = "\n".join(lines[max(0, sub.lineno - 2):sub.lineno])
                out.append((sub.lineno, mods, around))
    return out


MARKS = ("circle:", "import order:")
"""A comment that says why an import stays in its function: it breaks an import
circle (naming it), or importing it at the top would change an import order that
matters (verify's checks run in the order their modules register them)."""


def _marks_a_circle(around: str) -> bool:
    """A comment containing one of :data:`MARKS` on the import's line, or on a comment
    line right above it."""
    *above, line = around.splitlines()
    return ("#" in line and any(m in line.split("#", 1)[1] for m in MARKS)) or any(
        a.lstrip().startswith("#") and any(m in a for m in MARKS) for a in above)


def disallowed_function_imports(path: Path, rel: str) -> list[str]:
    """``rel:line modules`` of every function-level import of ``path`` that no rule allows."""
    if rel.startswith(LAZY_BY_DESIGN):
        return []
    return [f"{rel}:{line} {', '.join(mods)}" for line, mods, around in function_imports(path)
            if not all(_optional(m, rel) for m in mods) and not _marks_a_circle(around)]


def _optional(module: str, rel: str) -> bool:
    """An optional or slow package, or one of checks/export's modules that need torch."""
    if module.startswith("."):
        return rel.startswith("checks/export/") and module.lstrip(".") in OPTIONAL_MODULES
    return module.split(".")[0] in LAZY_PACKAGES


def scanned_files() -> dict[str, Path]:
    return {p.relative_to(REPO).as_posix(): p for folder in SCANNED for p in sorted((REPO / folder).rglob("*.py"))
            if "__pycache__" not in p.parts}


def test_no_function_level_import_without_a_reason():
    files = scanned_files()
    assert "constructions/machine/kernels.py" in files and "benchmarks/__main__.py" in files
    new, shrunk = [], []
    for rel, path in files.items():
        bad = disallowed_function_imports(path, rel)
        known = KNOWN_FUNCTION_IMPORTS.get(rel, 0)
        if len(bad) > known:
            new.append(f"{rel}: {len(bad)} function-level imports, {known} known: " + "; ".join(bad))
        elif len(bad) < known:
            shrunk.append(f"{rel}: {known} -> {len(bad)}")
    assert new == [], ("move these imports to the top of their module (or mark a real import circle with "
                       "'# circle: a -> b -> a'): " + " | ".join(new))
    if shrunk:
        warnings.warn("KNOWN_FUNCTION_IMPORTS can be shrunk: " + ", ".join(shrunk), stacklevel=1)


def test_the_known_function_imports_name_existing_files():
    files = scanned_files()
    assert sorted(set(KNOWN_FUNCTION_IMPORTS) - set(files)) == []
    assert all(n > 0 for n in KNOWN_FUNCTION_IMPORTS.values())


def test_every_lazy_cli_module_says_why():
    """Each checks/cli/ or checks/api/ file with function-level imports says why in a
    comment (a comment containing "lazy", at the top of the file or at the import)."""
    silent = []
    for rel, path in scanned_files().items():
        if not rel.startswith(LAZY_BY_DESIGN) or rel in CLI_WITHOUT_A_REASON:
            continue
        if function_imports(path) and not any(
                "#" in line and "lazy" in line.split("#", 1)[1].lower() for line in path.read_text().splitlines()):
            silent.append(rel)
    assert silent == []


def test_the_function_import_scan_finds_a_planted_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\n\n\ndef f():\n    import json\n    import numba\n"
                 "    # circle: m -> n -> m\n    from . import n\n    from .o import p  # circle: m -> o -> m\n"
                 "    from . import q\n\n\nclass C:\n    def g(self):\n        def h():\n            import re\n")
    assert disallowed_function_imports(f, "checks/m.py") == ["checks/m.py:5 json", "checks/m.py:10 .q",
                                                             "checks/m.py:16 re"]
    assert disallowed_function_imports(f, "checks/cli/m.py") == []
