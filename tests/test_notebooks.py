"""Every committed notebook executes top to bottom against the installed
package, without errors, in under two minutes, and its plots render.

The kernel runs in a fresh temporary directory, so ``import constructions``
finds the installed package (or whatever PYTHONPATH names), not the source tree
beside the notebooks, and the notebooks cannot lean on files found relative to
the checkout. The peers' sample data (``shared/data``) is handed to the kernel
through ``RNNGAP_SHARED_DATA`` (``checks/shared_data.py``).
"""
import json
import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from checks.shared_data import shared_data_dir

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
MIN_NOTEBOOKS = 5          # the five chapters of the README's notebook list
MAX_SECONDS = 120          # per notebook: kernel start, every cell, shutdown
_SHARED_FILE = re.compile(r"""shared_file\(\s*["']([^"']+)["']""")
_PROBE_TAG = "rnngap-test-probe"


def _images(cell) -> int:
    return sum(1 for o in cell.get("outputs", []) if "image/png" in o.get("data", {}))


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_notebooks_exist():
    assert len(NOTEBOOKS) >= MIN_NOTEBOOKS, f"{len(NOTEBOOKS)} notebooks found: {[p.name for p in NOTEBOOKS]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    committed = nbformat.read(path, as_version=4)
    nb = nbformat.read(path, as_version=4)
    for cell in _code_cells(nb):
        cell.outputs = []
    source = "\n".join(c.source for c in _code_cells(nb))

    env = dict(os.environ)
    if "shared_file(" in source or "shared_data_dir(" in source:
        data = shared_data_dir()
        assert data is not None, f"{path.name} reads shared/data, which is not found (set RNNGAP_SHARED_DATA)"
        missing = [name for name in _SHARED_FILE.findall(source) if not (data / name).is_file()]
        assert not missing, f"{path.name} reads {missing}, absent from {data}"
        env["RNNGAP_SHARED_DATA"] = str(data.resolve())

    # a last cell, removed again before the comparisons, reports where the kernel ran
    probe = nbformat.v4.new_code_cell(
        "import json as _j, os as _o, constructions as _c\n"
        "print(_j.dumps({'cwd': _o.getcwd(), 'constructions': _c.__file__}))")
    probe.metadata["tags"] = [_PROBE_TAG]
    nb.cells.append(probe)

    start = time.perf_counter()
    NotebookClient(nb, timeout=MAX_SECONDS, kernel_name="python3").execute(cwd=str(tmp_path), env=env)
    seconds = time.perf_counter() - start

    errors = [o for c in _code_cells(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    probe = nb.cells.pop()
    assert probe.metadata["tags"] == [_PROBE_TAG]
    where = json.loads("".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream"))
    assert Path(where["cwd"]).resolve() == tmp_path.resolve(), where
    assert seconds < MAX_SECONDS, f"{path.name} took {seconds:.1f} s (limit {MAX_SECONDS} s)"

    # the saved outputs: every committed plot renders again, cell by cell
    rendered = [_images(c) for c in _code_cells(nb)]
    saved = [_images(c) for c in _code_cells(committed)]
    assert len(rendered) == len(saved)
    short = [k for k, (r, s) in enumerate(zip(rendered, saved)) if r < s]
    assert not short, (f"{path.name}: code cells {short} rendered {[rendered[k] for k in short]} plots, "
                       f"the committed notebook has {[saved[k] for k in short]}")
    assert sum(rendered) == sum(saved), \
        f"{path.name}: {sum(rendered)} plots rendered, the committed notebook has {sum(saved)} (run notebooks/_build.py)"
    with_out = [bool(c.outputs) for c in _code_cells(nb)]
    committed_out = [bool(c.outputs) for c in _code_cells(committed)]
    assert with_out == committed_out, f"{path.name}: committed outputs are stale (run notebooks/_build.py)"
