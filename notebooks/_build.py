"""Build and execute the worked notebooks: ``python notebooks/_build.py [NAME ...]``.

Each notebook is a list of cells below; it is written, executed top to bottom
with nbclient (importing the installed package), and saved with its outputs.
The test suite re-executes every committed notebook (tests/test_notebooks.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}


def notebook(name: str):
    def deco(fn):
        NOTEBOOKS[name] = fn()
        return fn
    return deco


def md(s: str) -> tuple[str, str]:
    return ("md", s.strip())


def code(s: str) -> tuple[str, str]:
    return ("code", s.strip())


@notebook("01_machine_and_precision")
def _nb1():
    return [
        md("""# 1. The machine: O(log n)-bit fixed point, and why it makes attention exact

Every number a construction computes is a multiple of $2^{-f}$ with $|x| < 2^I$
(theory.md §1). Additions are exact and overflow raises; multiplications,
divisions and exponentials are rounded half to even from the exact result.
This notebook shows the rules, then the consequence that drives the whole paper:
a softmax weight becomes **exactly 0** once its score is more than $(f+1)\\ln 2$
below the maximum, so a head with $O(\\log n)$ bits can retrieve exactly."""),
        code("""from fractions import Fraction
import numpy as np
import matplotlib.pyplot as plt
from constructions.fixedpoint import FixedFormat, FixedPointOverflow

fmt = FixedFormat(int_bits=4, frac_bits=3)          # Q4.3: p = 8 bits
a, b = fmt.encode(Fraction(3, 2)), fmt.encode(Fraction(5, 8))
print("3/2 * 5/8 = 15/16 ->", fmt.decode(fmt.mul(a, b)), "(15/16 is a tie between 7/8 and 1: half to even)")
print("1 / 3 ->", fmt.decode(fmt.div(fmt.encode(1), fmt.encode(3))))
print("exp(-1) ->", fmt.decode(fmt.exp(fmt.encode(-1))), "=", float(fmt.decode(fmt.exp(fmt.encode(-1)))))
try:
    fmt.add(fmt.encode(15), fmt.encode(1))
except FixedPointOverflow as e:
    print("overflow:", e)"""),
        md("""## Softmax on the grid

$M = \\max_j s_j$, $e_j = \\mathrm{round}(\\exp(s_j - M))$, $Z = \\sum_j e_j$,
$w_j = \\mathrm{round}(e_j / Z)$. With two keys whose scores differ by a gap $g$,
the runner-up's weight is exactly 0 as soon as $\\exp(-g) < 2^{-(f+1)}$."""),
        code("""gaps = np.linspace(0, 30, 301)
fig, ax = plt.subplots(figsize=(7, 3.5))
for f in (4, 8, 16, 24):
    F = FixedFormat(int_bits=8, frac_bits=f)
    ws = []
    for g in gaps:
        w, _ = F.attend([0, F.encode(-g, exact=False)], np.array([[F.encode(1)], [0]]))
        ws.append(float(F.decode(w[1])))
    ax.plot(gaps, ws, label=f"f = {f}")
    ax.axvline((f + 1) * np.log(2), color="gray", lw=0.5)
ax.set_yscale("symlog", linthresh=1e-8); ax.set_ylim(0, 1); ax.set_xlabel("score gap g"); ax.set_ylabel("runner-up weight")
ax.set_title("the runner-up weight is exactly 0 beyond g = (f+1) ln 2 (gray lines)")
ax.legend(); plt.tight_layout(); plt.show()"""),
        md("""## A gadget at its declared precision, and below it

The position-match head (the Index mechanism of claim T4.6-up) declares
$I(n) = 2\\lceil\\log_2(n+2)\\rceil + 6$ integer bits and a constant $f$. It is exact
at its declaration; one integer bit below what it actually uses, it overflows
(raise mode) or, saturating, can retrieve the wrong token (how often depends on
the sample: the table shows it)."""),
        code("""from constructions import demos
from checks.tasks import index
rng = np.random.default_rng(0)
for n in (16, 256, 4096):
    m = demos.position_match(n)
    batch = index.generate(rng, n, 200)
    got = m.predict_batch(np.asarray(batch.tokens))
    r = m.resources
    low = m.with_format(FixedFormat(r.used_int_bits - 1, m.fmt.frac_bits, "saturate"))
    bad = int((low.predict_batch(np.asarray(batch.tokens)) != np.asarray(batch.answers)).sum())
    print(f"n={n:5d} {m.fmt.name:8s} mismatches {int((got != np.asarray(batch.answers)).sum())}, "
          f"int bits used {r.used_int_bits}/{m.fmt.int_bits}; one bit fewer (saturating): {bad}/200 wrong")"""),
    ]


def build(name: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(s) if kind == "md" else nbformat.v4.new_code_cell(s)
                for kind, s in NOTEBOOKS[name]]
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name in (sys.argv[1:] or list(NOTEBOOKS)):
        print("built", build(name))
