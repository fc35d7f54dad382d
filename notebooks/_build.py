"""Build and execute the worked notebooks.

    python notebooks/_build.py            # every notebook
    python notebooks/_build.py 02 04      # the notebooks whose names start with 02 or 04

The single source of truth is ``notebooks/src/NN_name.py`` (percent format: a
line ``# %%`` opens a code cell, ``# %% [markdown]`` a markdown cell whose lines
are written as ``# text``). This script turns each source into
``notebooks/NN_name.ipynb``, executes it top to bottom with nbclient in a fresh
temporary directory (so it imports the installed package, or whatever
PYTHONPATH names, never the source tree by accident), and saves it with its
outputs. Run it after editing a source or the code a notebook shows;
``tests/test_notebooks.py`` fails when the committed outputs are stale.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
TIMEOUT = 300


def parse_source(text: str) -> list[tuple[str, str]]:
    """``[(kind, source)]`` of a percent-format file, kind ``"md"`` or ``"code"``."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# %%"):
            cells.append(("md" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"text before the first '# %%' cell marker: {line!r}")
    out = []
    for kind, lines in cells:
        if kind == "md":
            bad = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
            if bad:
                raise ValueError(f"markdown cell line without '# ': {bad[0]!r}")
            lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines]
        out.append((kind, "\n".join(lines).strip()))
    return [c for c in out if c[1]]


def sources() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SRC.glob("[0-9]*.py"))}


def notebook_from_source(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(s) if kind == "md" else nbformat.v4.new_code_cell(s)
                for kind, s in parse_source(path.read_text())]
    return nb


def execute(nb: nbformat.NotebookNode, cwd: str, timeout: int = TIMEOUT, env: dict | None = None) -> float:
    """Execute ``nb`` in place (kernel started in ``cwd``); returns the seconds taken."""
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3").execute(cwd=cwd, env=env)
    return time.perf_counter() - start


def coalesce_streams(outputs: list) -> list:
    """Merge consecutive stream outputs of the same stream (how a kernel splits
    printed text into messages depends on timing, the text does not)."""
    out: list = []
    for o in outputs:
        if (o.get("output_type") == "stream" and out and out[-1].get("output_type") == "stream"
                and out[-1].get("name") == o.get("name")):
            out[-1]["text"] += o["text"]
        else:
            out.append(o)
    return out


def build(name: str) -> tuple[Path, float]:
    nb = notebook_from_source(sources()[name])
    env = dict(os.environ)
    try:        # resolve shared/data here (the kernel runs elsewhere), as tests/test_notebooks.py does
        from rnngap.checks.io.shared_data import shared_data_dir
        data = shared_data_dir()
        if data is not None:
            env["RNNGAP_SHARED_DATA"] = str(data.resolve())
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        seconds = execute(nb, tmp, env=env)
    for k, cell in enumerate(nb.cells):          # stable ids, no timestamps: a rebuild of an unchanged source
        cell["id"] = f"{name[:2]}-{k:02d}"      # changes nothing
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path, seconds


if __name__ == "__main__":
    names = list(sources())
    wanted = [n for n in names if not sys.argv[1:] or any(n.startswith(a) for a in sys.argv[1:])]
    if not wanted:
        sys.exit(f"no notebook source matches {sys.argv[1:]} (have {names})")
    for name in wanted:
        path, seconds = build(name)
        figures = sum(1 for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
                      for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
        print(f"built {path.name}: {seconds:.1f} s, {figures} figures")
