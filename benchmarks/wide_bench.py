"""Two-limb storage (constructions/wide_exec.py): its cost, and runs past int64.

``wide_over_narrow``: the same instances at a format that fits int64, run once
in two-limb storage and once in int64 storage (``predict_batch``, each path with
its own shortcuts: the int64 path prunes attention and runs lanes, the two-limb
path scores every key), the best of three runs each; the key reports the worst
ratio of the cases, each case also by itself. The answers of both paths are
compared with each other and with the reduction's.

``beyond``: one timed run past each old ceiling the two-limb executor reaches
today (Counting, the T5.6 retrieval hybrids), the answer checked; the
constructions that still refuse past int64 are listed as such.
"""
from __future__ import annotations

import time

import numpy as np

from rnngap.checks import checks_hybrid as CH
from rnngap.constructions import retrieval as R
from rnngap.constructions.vocab import BOS, NUMBER_BASE, QUERY


def _best(fn, reps: int = 3):
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _counting_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Counting on the reduction's image: marks 0..n-1 each once, query 5, t = 0 and 1."""
    x = np.arange(n)
    toks = np.array([[BOS] + [int(v) + NUMBER_BASE for v in x] + [QUERY, 5 + NUMBER_BASE, t + NUMBER_BASE]
                     for t in (0, 1)])
    return toks, np.array([NUMBER_BASE + 1, NUMBER_BASE + 0])


def _hybrid_case(task: str, n: int, sample=(4, 1)):
    toks, want, _ = CH.reduction_rows(CH.reduction_of(task), n, np.random.default_rng([n, 28]), sample)
    return CH.build_reduction_model(task, n), toks, want


def wide_over_narrow(quick: bool = False) -> dict:
    cases = {}
    specs = [("hybrid ar, reduction n = 2^%d" % (10 if quick else 12), *_hybrid_case("ar", 2 ** 10 if quick else 2 ** 12)),
             ("hybrid counting, reduction n = 2^%d" % (10 if quick else 12),
              *_hybrid_case("counting", 2 ** 10 if quick else 2 ** 12))]
    n = 500 if quick else 2000
    specs.append((f"counting transformer, n = {n}", R.counting_transformer(n, alphabet=n + 1), *_counting_rows(n)))
    for name, narrow, toks, want in specs:
        wide = narrow.with_format(narrow.fmt.with_bits(storage="two-limb"))
        wide.predict_batch(toks[:1])                        # compiled before timing
        narrow.predict_batch(toks[:1])
        tn, pn = _best(lambda: narrow.predict_batch(toks))
        tw, pw = _best(lambda: wide.predict_batch(toks))
        cases[name] = {"format": narrow.fmt.name, "rows": int(len(toks)), "int64_seconds": round(tn, 4),
                       "two_limb_seconds": round(tw, 4), "ratio": round(tw / tn, 2),
                       "correct": bool((pn == want).all() and (pw == pn).all())}
    return {"cases": cases, "wide_over_narrow": max(c["ratio"] for c in cases.values()),
            "correct": all(c["correct"] for c in cases.values())}


def beyond(quick: bool = False) -> dict:
    out = {}
    for n in ((R.COUNTING_MAX_N + 1,) if quick else (2 ** 16, 2 ** 20)):
        m = R.counting_transformer(n, alphabet=n + 1)
        toks, want = _counting_rows(n)
        t, p = _best(lambda: m.predict_batch(toks), 1)
        out["counting transformer" + ("" if n <= 2 ** 16 else " 2^20")] = {
            "n": n, "old_ceiling": R.COUNTING_MAX_N, "format": m.fmt.name, "rows": 2, "seconds": round(t, 3),
            "correct": bool((p == want).all())}
    ceilings = {"ar": 2 ** 12, "cgram3": 2 ** 11, "counting": 2 ** 12}
    for task, old in ceilings.items():
        n = 2 ** 13 if quick else 2 ** 16
        m, toks, want = _hybrid_case(task, n, (1, 1))
        t, p = _best(lambda: m.predict_batch(toks), 1)
        out[f"hybrid {task}"] = {"n": n, "old_ceiling": old, "format": m.fmt.name, "rows": int(len(toks)),
                                 "seconds": round(t, 3), "correct": bool((p == want).all())}
    out["still refused past int64"] = ["IsTree Transformer on arbitrary graphs (N > 1,672)", "T4.1 (n > 23,169)"]
    out["two limbs, no timed run here"] = ["hybrid IsTree (N > 323: checks/checks_hybrid.py runs it)",
                                           "hybrid Turing machines (their match heads need the key-value "
                                           "index, which two limbs do not have: every key is scored)"]
    out["correct"] = all(v["correct"] for v in out.values() if isinstance(v, dict))
    return out
