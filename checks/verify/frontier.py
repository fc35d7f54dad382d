"""The precision frontier of the T4.6-up constructions (constructions/models/retrieval.py).

RAISE mode throughout: the rows measure how the bits grow with n and that the bit
meter is consistent, which says nothing about the answers below the bound (the
necessity records of checks/verify/necessity.py are that evidence). On a fixed seeded
sample (:func:`frontier_sample`), ``f_min`` is the smallest fraction-bit count
at and above which the rebuilt construction is exactly correct, and the used
integer bits u are the integer frontier (u runs identically, u - 1 fails).
:func:`frontier_table` gives one dict per (construction, n), :func:`fit_slope`
and :func:`frontier_summary` the slopes against log2 n.

Example::

    >>> rows = frontier_table(["index"], [16, 64])
    >>> [(r["n"], r["f_min"], r["I_min_at_f_min"]) for r in rows]
    [(16, 0, 10), (64, 0, 14)]
    >>> round(frontier_summary(rows, "index")["slope_I_min_at_f_declared"], 2)
    2.0

Details (both scans, what the frontiers show, cost): docs/internals/verify.md#frontier
"""
from __future__ import annotations

import math
import time
from typing import Iterable

import numpy as np

from rnngap.constructions.models import retrieval as R
from rnngap.constructions.machine.fixedpoint import MAX_MAGNITUDE_BITS, PrecisionError
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError
from rnngap.constructions.machine.vocab import BOS, QUERY, number_token

from rnngap.checks.tasks import ar, cgram, counting, index

CONSTRUCTIONS = {
    # name: (declaration, alphabet, c)
    "index": (R.INDEX, 2, 2),
    "ar": (R.AR, 4, 2),               # c-gram with c = 2 (ar_transformer is cgram_transformer(c=2))
    "cgram": (R.CGRAM, 2, 3),
    "cgram4": (R.CGRAM, 3, 4),
    "counting": (R.COUNTING, 3, 2),
}
FRONTIER_SEED = 20260
"""Seed range of the frontier samples (separate from the checks' seeds)."""
RANDOM_ROWS = ((2 ** 12, 4), (2 ** 14, 2))
"""Generator instances in the frontier sample: 4 for n <= 2^12, 2 for n <= 2^14,
none beyond, where only the adversarial rows remain (each random row costs a full
O(n^2) run, and a row is run 6 to 8 times: one Counting instance takes about 2
minutes at n = 2^16 on the 2-core machine, its adversarial rows together about
the same, as they share their prefix)."""


def random_rows(n: int) -> int:
    """The number of generator instances in the default frontier sample at n."""
    for limit, rows in RANDOM_ROWS:
        if n <= limit:
            return rows
    return 0


def build(name: str, n: int, fmt: FixedFormat):
    _, a, c = CONSTRUCTIONS[name]
    if name == "index":
        return R.index_transformer(n, alphabet=a, fmt=fmt)
    if name == "ar":
        return R.ar_transformer(n, alphabet=a, fmt=fmt)
    if name in ("cgram", "cgram4"):
        return R.cgram_transformer(n, alphabet=a, c=c, fmt=fmt)
    if name == "counting":
        return R.counting_transformer(n, alphabet=a, fmt=fmt, check_margins=False)
    raise ValueError(f"unknown construction {name!r}; known: {sorted(CONSTRUCTIONS)}")


def _with_data(x: list[int], suffix: list[int]) -> list[int]:
    return [BOS] + [number_token(v) for v in x] + [QUERY] + [number_token(v) for v in suffix]


def frontier_sample(name: str, n: int, random: int | None = None,
                    seed: int = FRONTIER_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (B, L), answers (B,)): ``random`` generator instances (seed + n;
    default :func:`random_rows`) plus adversarial ones (answers from the
    plain-Python references):

    * index: x alternating 0 1 0 1..., queries i = 1, n - 1, n;
    * ar: x = 1 2 3 0 0 ... 0 1 with q = 1 (first occurrence at j = 1, a later one as
      x_n) and q = 0 first at j = 4 (n >= 6), and q first at j = n - 1;
    * c-gram (gram g = 0 1 0 ... of length c - 1): x = 1 ... 1 g 0, g first at
      j = n - c + 1 (answer x_n), and x = g 1 ... 1 g (first at j = 1, a later
      repeat at the end);
    * counting: the closest comparisons: c = #q in x in {n, n-1, n-2, n-3} (q = 0 at
      the first c positions, 1 after; the rows share their first n - 3 data tokens,
      and the count does not depend on where the q's are) with t = c - 1 (answer 1)
      and t = c (answer 0).

    >>> tokens, answers = frontier_sample("counting", 16)   # 4 random + 8 adversarial rows
    >>> tokens.shape, answers[4:].tolist()                 # number 1 = 33, number 0 = 32
    ((12, 20), [33, 32, 33, 32, 33, 32, 33, 32])
    """
    _, a, c = CONSTRUCTIONS[name]
    random = random_rows(n) if random is None else int(random)
    rng = np.random.default_rng(seed + n)
    rows: list[list[int]] = []
    if name == "index":
        gen = lambda: index.generate(rng, n, random, alphabet=a)
        x = [j % 2 for j in range(n)]
        rows = [_with_data(x, [i]) for i in sorted({1, max(1, n - 1), n})]
        ref = index.reference
    elif name == "ar":
        gen = lambda: ar.generate(rng, n, random, alphabet=a)
        if n >= 6:
            x = [1, 2, 3] + [0] * (n - 4) + [1]
            rows += [_with_data(x, [1]), _with_data(x, [0])]
        y = [0] * (n - 2) + [3, 2]               # q = 3 first (and only) at j = n - 1
        rows.append(_with_data(y, [3]))
        ref = ar.reference
    elif name in ("cgram", "cgram4"):
        gen = lambda: cgram.generate(rng, n, random, alphabet=a, c=c)
        g = [k % 2 for k in range(c - 1)]        # 0 1 0 ...: starts with 0, so it is absent from 1 ... 1
        if n >= c + 1:
            rows.append(_with_data([1] * (n - c) + g + [0], g))       # first at j = n - c + 1, answer x_n
        if n >= 2 * (c - 1) + 1:
            rows.append(_with_data(g + [1] * (n - 2 * (c - 1)) + g, g))   # first at j = 1, repeat at the end
        ref = lambda t: cgram.reference(t, c=c)
    elif name == "counting":
        gen = lambda: counting.generate(rng, n, random, alphabet=a, threshold="near")
        for cnt in range(n, max(-1, n - 4), -1):
            x = [0] * cnt + [1] * (n - cnt)
            for t in (cnt - 1, cnt):
                if 0 <= t <= n:
                    rows.append(_with_data(x, [0, t]))
        ref = counting.reference
    else:
        raise ValueError(f"unknown construction {name!r}; known: {sorted(CONSTRUCTIONS)}")
    toks = ([list(map(int, r)) for r in gen().tokens] if random > 0 else []) + rows
    if not toks:
        raise ValueError(f"frontier_sample({name!r}, {n}): no rows (random = 0 and no adversarial row at this n)")
    L = max(len(r) for r in toks)
    if any(len(r) != L for r in toks):
        raise AssertionError("frontier sample rows must share one length")
    answers = np.array([ref(r) for r in toks], dtype=np.int64)
    return np.array(toks, dtype=np.int64), answers


def run_sample(model, tokens: np.ndarray, answers: np.ndarray) -> tuple[bool, str]:
    """(exactly correct?, how it failed). The rows run in lexicographic order, so
    each reuses the KV cache of the prefix it shares with the one before (exact:
    the same outputs, used bits and first error as row by row)."""
    tokens = np.asarray(tokens)
    order = np.lexsort(tokens.T[::-1])
    try:
        got = np.empty(len(tokens), dtype=np.int64)
        got[order] = model.predict_batch(tokens[order])
    except PrecisionError as e:
        return False, f"raised {type(e).__name__}: {str(e)[:100]}"
    bad = int((got != answers).sum())
    return bad == 0, ("" if bad == 0 else f"{bad}/{len(answers)} wrong answers")


def _try_build(name, n, fmt):
    try:
        return build(name, n, fmt), ""
    except (MarginError, PrecisionError, ValueError) as e:
        return None, f"refused to build: {str(e)[:100]}"


def integer_frontier(name: str, n: int, f: int, tokens, answers, ran=None) -> dict:
    """At fraction bits f: the used integer bits u of a run at generous I, and the
    checks that (u, f) is correct and (u - 1, f) fails (same weights re-encoded).
    ``ran``: a model built at (62 - f, f) that already ran the sample correctly
    (the fraction-bit scan's run), reused instead of running again."""
    I_gen = MAX_MAGNITUDE_BITS - f
    if ran is None:
        model, why = _try_build(name, n, FixedFormat(I_gen, f))
        if model is None:
            return {"I_min": None, "note": why}
        ok, how = run_sample(model, tokens, answers)
        if not ok:
            return {"I_min": None, "note": f"incorrect even at I = {I_gen}: {how}"}
    else:
        model = ran
        if model.fmt != FixedFormat(I_gen, f):
            raise ValueError(f"integer_frontier: the reused run is at {model.fmt.name}, not at I = {I_gen}, f = {f}")
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


def frontier_row(name: str, n: int, random: int | None = None, seed: int = FRONTIER_SEED) -> dict:
    """One row of the frontier table (see the module docstring)."""
    t0 = time.perf_counter()
    decl, a, c = CONSTRUCTIONS[name]
    tokens, answers = frontier_sample(name, n, random, seed)
    f_dec, I_dec = decl.frac_bits(n), decl.int_bits(n, a, c)
    f = f_dec
    f_min, below_how, ran = None, "", {}
    while f >= 0:
        if f + 1 > MAX_MAGNITUDE_BITS:
            break
        model, why = _try_build(name, n, FixedFormat(MAX_MAGNITUDE_BITS - f, f))
        ok, how = (False, why) if model is None else run_sample(model, tokens, answers)
        if not ok:
            below_how = how
            break
        ran[f] = model
        f_min = f
        f -= 1
    at_min = integer_frontier(name, n, f_min, tokens, answers, ran.get(f_min)) if f_min is not None \
        else {"I_min": None}
    at_dec = at_min if f_min == f_dec else integer_frontier(name, n, f_dec, tokens, answers, ran.get(f_dec))
    return {
        "construction": name, "n": n, "log2_n": math.log2(n), "alphabet": a, "c": c,
        "instances": int(len(answers)),
        "f_declared": f_dec, "I_declared": I_dec, "p_declared": I_dec + f_dec + 1,
        "f_min": f_min, "fails_below_f_min": f_min is not None and ((f_min == 0) or bool(below_how)),
        "below_f_min_how": (below_how if f_min else "f_min = 0: no fewer fraction bits exist") if f_min is not None
        else f"incorrect at the declared f = {f_dec}: {below_how}",
        "I_min_at_f_min": at_min.get("I_min"), "I_min_at_f_declared": at_dec.get("I_min"),
        "p_min": None if f_min is None or at_min.get("I_min") is None else at_min["I_min"] + f_min + 1,
        "correct_at_I_min": at_min.get("correct_at_I_min"), "fails_below_I_min": at_min.get("fails_below_I_min"),
        "below_I_min_how": at_min.get("below_I_min_how", ""),
        "correct_at_I_min_at_f_declared": at_dec.get("correct_at_I_min"),
        "fails_below_I_min_at_f_declared": at_dec.get("fails_below_I_min"),
        "declared_at_or_above": f_min is not None and f_dec >= f_min and at_dec.get("I_min") is not None
        and I_dec >= at_dec["I_min"],
        "mode": "rebuild at each f (lambda re-derived), integer bits re-encoded",
        "seconds": round(time.perf_counter() - t0, 3),
    }


def frontier_table(constructions: Iterable[str] = tuple(CONSTRUCTIONS), ns: Iterable[int] = (16, 64, 256),
                   random: int | None = None, seed: int = FRONTIER_SEED) -> list[dict]:
    """Rows (plain dicts, one per construction and n) of the precision frontier."""
    ns = list(ns)
    return [frontier_row(name, int(n), random, seed) for name in constructions for n in ns]


def fit_slope(rows: list[dict], column: str = "f_min") -> dict[str, dict[str, float]]:
    """Least-squares slope and intercept of ``column`` against log2 n, per construction
    (constructions with fewer than 2 measured points are left out)."""
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


SLOPE_COLUMNS = ("f_min", "f_declared", "I_min_at_f_declared", "I_declared", "p_min", "p_declared")


def row_violations(r: dict) -> list[str]:
    """Why a frontier row shows the declaration below the measured frontier (or a
    frontier that is not one): empty if none."""
    out = []
    if r["f_min"] is None:
        out.append(f"incorrect at the declared f = {r['f_declared']} ({r['below_f_min_how']})")
    else:
        if r["f_declared"] < r["f_min"]:
            out.append(f"declared f = {r['f_declared']} < f_min = {r['f_min']}")
        if not r["fails_below_f_min"]:
            out.append(f"f_min - 1 = {r['f_min'] - 1} did not fail")
        if not r["correct_at_I_min"] or not r["fails_below_I_min"]:
            out.append(f"integer frontier at f_min not exact (correct at I_min: {r['correct_at_I_min']}, "
                       f"fails below: {r['fails_below_I_min']})")
    if r["I_min_at_f_declared"] is None:
        out.append("no integer frontier at the declared f")
    elif r["I_declared"] < r["I_min_at_f_declared"]:
        out.append(f"declared I = {r['I_declared']} < I_min = {r['I_min_at_f_declared']} at the declared f")
    return out


def frontier_summary(rows: list[dict], name: str) -> dict:
    """For the rows of one construction: the slope (bits per doubling of n) of each
    of :data:`SLOPE_COLUMNS` against log2 n (None with fewer than 2 points) and the
    violations [(n, reason)] of :func:`row_violations`."""
    mine = [r for r in rows if r["construction"] == name]
    out = {"construction": name, "ns": [r["n"] for r in mine], "instances": sum(r["instances"] for r in mine)}
    for col in SLOPE_COLUMNS:
        out[f"slope_{col}"] = fit_slope(mine, col).get(name, {}).get("slope")
    out["violations"] = [(r["n"], v) for r in mine for v in row_violations(r)]
    return out


def format_slopes(summary: dict) -> str:
    """One line: the measured and declared slopes against log2 n."""
    def s(col):
        v = summary[f"slope_{col}"]
        return "n/a" if v is None else f"{v:.2f}"
    return (f"slopes vs log2 n: f_min {s('f_min')} (declared f {s('f_declared')}), "
            f"I_min at declared f {s('I_min_at_f_declared')} (declared I {s('I_declared')}), "
            f"p_min {s('p_min')} (declared p {s('p_declared')})")


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
    for name in CONSTRUCTIONS:
        print(name, format_slopes(frontier_summary(rows, name)), flush=True)
