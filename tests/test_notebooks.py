"""Every committed notebook executes top to bottom against the installed
package, without errors, in under two minutes, and its plots render."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert len(NOTEBOOKS) >= 1, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    committed = nbformat.read(path, as_version=4)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {}))
    committed_images = sum(1 for c in committed.cells if c.cell_type == "code" for o in c.outputs
                           if "image/png" in o.get("data", {}))
    assert images == committed_images, f"{path.name}: {images} plots rendered, the committed notebook has {committed_images}"
    with_out = [bool(c.outputs) for c in nb.cells if c.cell_type == "code"]
    committed_out = [bool(c.outputs) for c in committed.cells if c.cell_type == "code"]
    assert with_out == committed_out, f"{path.name}: committed outputs are stale (run notebooks/_build.py)"
