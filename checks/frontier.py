"""The precision frontier of the T4.6-up constructions (constructions/retrieval.py).

For a construction and n, on a FIXED SEEDED SAMPLE (:func:`frontier_sample`: random
instances from the task generator plus deterministic adversarial ones):

* fraction bits: the construction is REBUILT at each f (lambda, mu, nu re-derived
  from f by the gadgets; Counting built with ``check_margins=False`` so that the
  comparison-margin assertion does not refuse small f and the run decides), with
  GENEROUS integer bits I_gen = 62 - f. Scanning f downward from the declared f(n),
  ``f_min`` is the smallest f such that the construction is exactly correct (no
  error, every answer right) at EVERY f' in [f_min, f(n)]; f_min - 1 fails (or
  f_min = 0, where no fewer fraction bits exist).
* integer bits (at f = f_min and at the declared f): the construction built at
  (I_gen, f) is run; its used integer bits u (every computed value and every weight
  below 2^u) is the integer frontier: re-encoding the same weights at (u, f) runs
  identically, at (u - 1, f) it must fail (an overflow or a weight that does not
  fit). Both are run and recorded.

:func:`frontier_table` returns one plain dict per (construction, n): easy to plot
(:func:`fit_slope` gives the least-squares slope of a column against log2 n).
Index, AR and c-gram never produce a fractional value (weights exactly 0/1), so
their f_min is 0 at every n and their O(log n) cost shows in the integer bits.

Example::

    >>> rows = frontier_table(["index"], [16, 64])          # doctest: +SKIP
    >>> [(r["n"], r["f_min"], r["I_min_at_f_min"]) for r in rows]
"""
from __future__ import annotations

import math
import time
from typing import Iterable

import numpy as np

from constructions import retrieval as R
from constructions.fixedpoint import MAX_MAGNITUDE_BITS, FixedFormat, PrecisionError
from constructions.gadgets import MarginError
from constructions.vocab import BOS, QUERY, number_token

from .tasks import ar, cgram, counting, index

CONSTRUCTIONS = {
    # name: (declaration, alphabet, c)
    "index": (R.INDEX, 2, 2),
    "ar": (R.AR, 4, 2),
    "cgram": (R.CGRAM, 2, 3),
    "counting": (R.COUNTING, 3, 2),
}
FRONTIER_SEED = 20260
"""Seed range of the frontier samples (separate from the checks' seeds)."""


def build(name: str, n: int, fmt: FixedFormat):
    _, a, c = CONSTRUCTIONS[name]
    if name == "index":
        return R.index_model(n, a, fmt)
    if name == "ar":
        return R.ar_model(n, a, fmt)
    if name == "cgram":
        return R.cgram_model(n, a, c, fmt)
    if name == "counting":
        return R.counting_model(n, a, fmt, check_margins=False)
    raise ValueError(f"unknown construction {name!r}; known: {sorted(CONSTRUCTIONS)}")


def _with_data(x: list[int], suffix: list[int]) -> list[int]:
    return [BOS] + [number_token(v) for v in x] + [QUERY] + [number_token(v) for v in suffix]


def frontier_sample(name: str, n: int, random: int = 4, seed: int = FRONTIER_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (B, L), answers (B,)): ``random`` generator instances (seed + n) plus
    adversarial ones (answers from the plain-Python references):

    * index: x alternating 0 1 0 1..., queries i = 1, n - 1, n;
    * ar: x = 1 2 3 0 0 ... 0 1 with q = 1 (first occurrence at j = 1, a later one as
      x_n) and q = 0 first at j = 4 (n >= 6), and q first at j = n - 1;
    * cgram: the gram (0, 1) first at j = n - 2 (answer x_n) and at j = 1 with a
      later repeat;
    * counting: the closest comparisons: c = #q in x in {n, n-1, n-2, n-3} (q = 0,
      the rest 1) with t = c - 1 (answer 1) and t = c (answer 0).
    """
    _, a, c = CONSTRUCTIONS[name]
    rng = np.random.default_rng(seed + n)
    rows: list[list[int]] = []
    if name == "index":
        b = index.generate(rng, n, random, alphabet=a)
        x = [j % 2 for j in range(n)]
        rows = [_with_data(x, [i]) for i in sorted({1, max(1, n - 1), n})]
        ref = index.reference
    elif name == "ar":
        b = ar.generate(rng, n, random, alphabet=a)
        if n >= 6:
            x = [1, 2, 3] + [0] * (n - 4) + [1]
            rows += [_with_data(x, [1]), _with_data(x, [0])]
        y = [0] * (n - 2) + [3, 2]               # q = 3 first (and only) at j = n - 1
        rows.append(_with_data(y, [3]))
        ref = ar.reference
    elif name == "cgram":
        b = cgram.generate(rng, n, random, alphabet=a, c=c)
        if n >= 4:
            x = [1] * (n - 3) + [0, 1, 0]        # (0, 1) at j = n - 2, answer x_n = 0
            rows.append(_with_data(x, [0, 1]))
            z = [0, 1, 1] + [1] * (n - 5) + [0, 1]   # first at j = 1, repeat at the end
            rows.append(_with_data(z[:n], [0, 1]))
        ref = lambda t: cgram.reference(t, c=c)
    elif name == "counting":
        b = counting.generate(rng, n, random, alphabet=a, threshold="near")
        for cnt in range(n, max(-1, n - 4), -1):
            x = [0] * cnt + [1] * (n - cnt)
            perm = rng.permutation(n)
            x = [x[k] for k in perm]
            for t in (cnt - 1, cnt):
                if 0 <= t <= n:
                    rows.append(_with_data(x, [0, t]))
        ref = counting.reference
    else:
        raise ValueError(f"unknown construction {name!r}")
    toks = [list(map(int, r)) for r in b.tokens] + rows
    L = max(len(r) for r in toks)
    if any(len(r) != L for r in toks):
        raise AssertionError("frontier sample rows must share one length")
    answers = np.array([ref(r) for r in toks], dtype=np.int64)
    return np.array(toks, dtype=np.int64), answers


def run_sample(model, tokens: np.ndarray, answers: np.ndarray) -> tuple[bool, str]:
    """(exactly correct?, how it failed)."""
    try:
        got = model.predict_batch(tokens)
    except PrecisionError as e:
        return False, f"raised {type(e).__name__}: {str(e)[:100]}"
    bad = int((got != answers).sum())
    return bad == 0, ("" if bad == 0 else f"{bad}/{len(answers)} wrong answers")


def _try_build(name, n, fmt):
    try:
        return build(name, n, fmt), ""
    except (MarginError, PrecisionError, ValueError) as e:
        return None, f"refused to build: {str(e)[:100]}"


def integer_frontier(name: str, n: int, f: int, tokens, answers) -> dict:
    """At fraction bits f: the used integer bits u of a run at generous I, and the
    checks that (u, f) is correct and (u - 1, f) fails (same weights re-encoded)."""
    I_gen = MAX_MAGNITUDE_BITS - f
    model, why = _try_build(name, n, FixedFormat(I_gen, f))
    if model is None:
        return {"I_min": None, "note": why}
    ok, how = run_sample(model, tokens, answers)
    if not ok:
        return {"I_min": None, "note": f"incorrect even at I = {I_gen}: {how}"}
    u = model.resources.used_int_bits
    try:
        ok_u, how_u = run_sample(model.with_format(FixedFormat(u, f)), tokens, answers)
    except (PrecisionError, ValueError) as e:
        ok_u, how_u = False, f"weights do not fit: {str(e)[:80]}"
    try:
        ok_below, how_below = run_sample(model.with_format(FixedFormat(u - 1, f)), tokens, answers)
    except (PrecisionError, ValueError) as e:
        ok_below, how_below = False, f"weights do not fit: {str(e)[:80]}"
    return {"I_min": u, "correct_at_I_min": ok_u, "fails_below_I_min": not ok_below,
            "below_I_min_how": how_below, "note": how_u}


def frontier_row(name: str, n: int, random: int = 4, seed: int = FRONTIER_SEED) -> dict:
    """One row of the frontier table (see the module docstring)."""
    t0 = time.perf_counter()
    decl, a, c = CONSTRUCTIONS[name]
    tokens, answers = frontier_sample(name, n, random, seed)
    f_dec, I_dec = decl.frac_bits(n), decl.int_bits(n, a, c)
    f = f_dec
    f_min, below_how = None, ""
    while f >= 0:
        if f + 1 > MAX_MAGNITUDE_BITS:
            break
        model, why = _try_build(name, n, FixedFormat(MAX_MAGNITUDE_BITS - f, f))
        ok, how = (False, why) if model is None else run_sample(model, tokens, answers)
        if not ok:
            below_how = how
            break
        f_min = f
        f -= 1
    at_min = integer_frontier(name, n, f_min, tokens, answers) if f_min is not None else {"I_min": None}
    at_dec = integer_frontier(name, n, f_dec, tokens, answers)
    return {
        "construction": name, "n": n, "log2_n": math.log2(n), "alphabet": a, "c": c,
        "instances": int(len(answers)),
        "f_declared": f_dec, "I_declared": I_dec, "p_declared": I_dec + f_dec + 1,
        "f_min": f_min, "fails_below_f_min": (f_min == 0) or bool(below_how),
        "below_f_min_how": below_how if f_min else "f_min = 0: no fewer fraction bits exist",
        "I_min_at_f_min": at_min.get("I_min"), "I_min_at_f_declared": at_dec.get("I_min"),
        "p_min": None if f_min is None or at_min.get("I_min") is None else at_min["I_min"] + f_min + 1,
        "correct_at_I_min": at_min.get("correct_at_I_min"), "fails_below_I_min": at_min.get("fails_below_I_min"),
        "below_I_min_how": at_min.get("below_I_min_how", ""),
        "declared_at_or_above": f_min is not None and f_dec >= f_min and at_dec.get("I_min") is not None
        and I_dec >= at_dec["I_min"],
        "mode": "rebuild at each f (lambda re-derived), integer bits re-encoded",
        "seconds": round(time.perf_counter() - t0, 3),
    }


def frontier_table(constructions: Iterable[str] = tuple(CONSTRUCTIONS), ns: Iterable[int] = (16, 64, 256),
                   random: int = 4, seed: int = FRONTIER_SEED) -> list[dict]:
    """Rows (plain dicts, one per construction and n) of the precision frontier."""
    return [frontier_row(name, int(n), random, seed) for name in constructions for n in ns]


def fit_slope(rows: list[dict], column: str = "f_min") -> dict[str, float]:
    """Least-squares slope and intercept of ``column`` against log2 n, per construction."""
    out = {}
    for name in sorted({r["construction"] for r in rows}):
        pts = [(r["log2_n"], r[column]) for r in rows if r["construction"] == name and r[column] is not None]
        if len(pts) < 2:
            continue
        x = np.array([p[0] for p in pts])
        y = np.array([p[1] for p in pts], dtype=float)
        slope, icpt = np.polyfit(x, y, 1)
        out[name] = {"slope": float(slope), "intercept": float(icpt), "points": len(pts)}
    return out


if __name__ == "__main__":  # python -m checks.frontier [max_k]: print the table
    import json
    import sys

    kmax = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = []
    for k in range(4, kmax + 1):
        for name in CONSTRUCTIONS:
            r = frontier_row(name, 2 ** k)
            rows.append(r)
            print(json.dumps(r), flush=True)
    print(json.dumps({"slope_f_min": fit_slope(rows, "f_min"), "slope_I_min_at_f_min": fit_slope(rows, "I_min_at_f_min"),
                      "slope_p_min": fit_slope(rows, "p_min")}), flush=True)
