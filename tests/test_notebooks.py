"""The worked notebooks (notebooks/src/*.py -> notebooks/*.ipynb, built by
``python notebooks/_build.py``) execute top to bottom against the installed
package, in under two minutes each, and their committed outputs are current.

Each notebook is re-executed in a fresh temporary directory, so ``import
rnngap.constructions`` finds the installed package (or whatever PYTHONPATH names), not
the source tree beside the notebooks, and nothing can lean on files found
relative to the checkout. The peers' sample data (``shared/data``) is handed to
the kernel through ``RNNGAP_SHARED_DATA`` (``checks/io/shared_data.py``).

Fails when:

* a notebook source has no committed notebook (or the reverse), or the committed
  cells' sources differ from the source file (edited one, not rebuilt);
* a cell raises, or the notebook takes 120 s or more;
* the committed text outputs are stale: any stdout / result text (plain or markdown) of any code
  cell differs from the fresh run's, after masking timings (``1.23 s``, ``45 ms``)
  and memory addresses (``0x7f...``);
* a cell renders a different number of images than committed, an image of
  different pixel dimensions, or an image under :data:`MIN_PNG_BYTES`;
* a figure is empty: at ``plt.show()`` (patched by a first injected cell) a
  figure has no axes, or an axes holds no artist (line, collection, image,
  patch, text or container), or an image output appears that did not go
  through ``plt.show()``.
"""
import base64
import importlib.util
import json
import os
import re
import struct
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from rnngap.checks.io.shared_data import shared_data_dir

HERE = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
MIN_NOTEBOOKS = 5          # the five chapters of the README's notebook list
MIN_FIGURES = 2            # per notebook
MAX_SECONDS = 120          # per notebook: kernel start, every cell, shutdown
MIN_PNG_BYTES = 5000       # a rendered figure with content is far larger
_SHARED_FILE = re.compile(r"""shared_file\(\s*["']([^"']+)["']""")
_TAG = "rnngap-test-probe"
_MASKS = [(re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
          (re.compile(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?(?:s|ms|µs|seconds?)\b"), "<time>")]

_SETUP = f"""# {_TAG}: every figure shown must have content
import matplotlib.pyplot as _rg_plt
_rg_show, _rg_log = _rg_plt.show, {{"shown": 0, "empty": []}}
def _rg_checked_show(*args, **kwargs):
    for num in _rg_plt.get_fignums():
        fig = _rg_plt.figure(num)
        _rg_log["shown"] += 1
        if not fig.axes:
            _rg_log["empty"].append(f"figure {{num}}: no axes")
        for k, ax in enumerate(fig.axes):
            if not (ax.lines or ax.collections or ax.images or ax.patches or ax.texts or ax.containers):
                _rg_log["empty"].append(f"figure {{num}} axes {{k}} ({{ax.get_title()!r}}): no artist")
    return _rg_show(*args, **kwargs)
_rg_plt.show = _rg_checked_show
"""
_PROBE = ("import json as _j, os as _o, rnngap.constructions as _c\n"
          "print(_j.dumps({'cwd': _o.getcwd(), 'constructions': _c.__file__, 'figures': _rg_log}))")


def _builder():
    spec = importlib.util.spec_from_file_location("notebooks_build", HERE / "_build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream" and o.get("name") == "stdout":
            parts.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            for kind in ("text/markdown", "text/plain"):
                if kind in o.get("data", {}):
                    parts.append(f"[{kind}] " + o["data"][kind] + "\n")
        elif o.output_type == "error":
            parts.append(f"[error] {o.ename}: {o.evalue}\n")
    text = "".join(parts)
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def _pngs(cell) -> list[tuple[int, int, int]]:
    """(width, height, bytes) of every PNG output of a cell."""
    out = []
    for o in cell.get("outputs", []):
        data = o.get("data", {}).get("image/png")
        if data is None:
            continue
        raw = base64.b64decode(data)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n", "image/png output is not a PNG"
        w, h = struct.unpack(">II", raw[16:24])
        out.append((w, h, len(raw)))
    return out


def test_notebooks_exist_and_match_their_sources():
    assert len(NOTEBOOKS) >= MIN_NOTEBOOKS, f"{len(NOTEBOOKS)} notebooks found: {[p.name for p in NOTEBOOKS]}"
    build = _builder()
    srcs = build.sources()
    assert sorted(srcs) == [p.stem for p in NOTEBOOKS], \
        f"sources {sorted(srcs)} vs notebooks {[p.stem for p in NOTEBOOKS]} (run python notebooks/_build.py)"
    for p in NOTEBOOKS:
        committed = [(("md" if c.cell_type == "markdown" else "code"), c.source)
                     for c in nbformat.read(p, as_version=4).cells]
        assert committed == build.parse_source(srcs[p.stem].read_text()), \
            f"{p.name} differs from notebooks/src/{p.stem}.py (run python notebooks/_build.py {p.stem[:2]})"
        figures = sum(len(_pngs(c)) for c in _code_cells(nbformat.read(p, as_version=4)))
        assert figures >= MIN_FIGURES, f"{p.name} commits {figures} figures, at least {MIN_FIGURES} expected"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_outputs_are_current(path, tmp_path):
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

    setup, probe = nbformat.v4.new_code_cell(_SETUP), nbformat.v4.new_code_cell(_PROBE)
    nb.cells.insert(0, setup)
    nb.cells.append(probe)
    start = time.perf_counter()
    NotebookClient(nb, timeout=MAX_SECONDS, kernel_name="python3").execute(cwd=str(tmp_path), env=env)
    seconds = time.perf_counter() - start

    errors = [o for c in _code_cells(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    assert nb.cells.pop(0) is setup and not setup.outputs, f"setup cell printed {setup.outputs}"
    assert nb.cells.pop() is probe
    where = json.loads("".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream"))
    assert Path(where["cwd"]).resolve() == tmp_path.resolve(), where
    assert seconds < MAX_SECONDS, f"{path.name} took {seconds:.1f} s (limit {MAX_SECONDS} s)"

    fresh, old = _code_cells(nb), _code_cells(committed)
    assert len(fresh) == len(old)
    # figures: each non-empty, each shown through plt.show, same count and pixel size as committed
    assert not where["figures"]["empty"], f"{path.name}: empty figures {where['figures']['empty']}"
    rendered = [_pngs(c) for c in fresh]
    total = sum(len(r) for r in rendered)
    assert total == where["figures"]["shown"], \
        f"{path.name}: {total} images rendered, {where['figures']['shown']} went through plt.show()"
    small = [(k, b) for k, r in enumerate(rendered) for (_, _, b) in r if b < MIN_PNG_BYTES]
    assert not small, f"{path.name}: images under {MIN_PNG_BYTES} bytes in code cells {small}"
    for k, (r, s) in enumerate(zip(rendered, (_pngs(c) for c in old))):
        assert [(w, h) for w, h, _ in r] == [(w, h) for w, h, _ in s], \
            (f"{path.name} code cell {k}: images {[(w, h) for w, h, _ in r]} vs committed "
             f"{[(w, h) for w, h, _ in s]} (run python notebooks/_build.py {path.stem[:2]})")
    # text: identical after masking timings and addresses
    for k, (a, b) in enumerate(zip(fresh, old)):
        assert _text(a) == _text(b), (f"{path.name} code cell {k}: committed outputs are stale "
                                      f"(run python notebooks/_build.py {path.stem[:2]})\n--- fresh\n{_text(a)}"
                                      f"\n--- committed\n{_text(b)}")
