"""rnngap benchmarks: ``python -m benchmarks [--quick]``.

Speed is reported as ratios and slopes measured in ONE run (the machine is
shared and noisy), never as absolute targets inside tests. Writes
``benchmarks/results.json`` and prints a short table. Every measurement also
checks its results (a fast wrong answer is not a speed-up).

1. exhaustive throughput: Index at n = 16 on every binary string in
   lexicographic order (one query per string, rotating), numba executor (with
   and without prefix sharing) vs the numpy implementation of the same
   fixed-point semantics (benchmarks/numpy_fx.py) vs the float64 real twin;
2. decoding with the KV cache: seconds per generated token at context 10^3,
   10^4, 10^5, and the log-log slope;
3. witness search: states/s and time to a collision for 32- and 40-bit states
   (needs lowerbounds.witness);
4. IsTree CoT: wall time of the Transformer construction at 500, 10^3 and 10^4
   vertices, the log-log slope and time(10^4) / time(10^3) (needs constructions.istree);
5. one c-gram (c = 4) instance at n = 2^20 through a session (pruned attention;
   benchmarks/scale.py), the answer checked;
6. Dask: a fixed set of full-profile parts, serial vs a 2-worker LocalCluster,
   the records compared (benchmarks/dask_bench.py); with ``--full-profile`` also
   the wall time of ``verify --profile full --engine dask --workers 2``;
7. two-limb storage (benchmarks/wide_bench.py): ``wide_over_narrow``, the same
   instances at an int64 format on the two-limb and the int64 executor (the worst
   case's ratio), and one timed run past each old int64 ceiling it reaches;
8. the first run and the next: ``rnngap verify --profile quick`` (default
   engine and workers) in a subprocess on an empty numba cache (a fresh folder in
   NUMBA_CACHE_DIR: every kernel compiled), then again on that cache
   (``cold_quick_verify_seconds``, ``warm_quick_verify_seconds``; both runs must
   pass). Skipped with ``--quick`` or ``--no-verify``;
9. the float breaking point (benchmarks/float_break.py): per construction with
   an Index reduction, the smallest m at which its export in float32, bfloat16,
   float16 (the machine's rounding in that dtype) and float64 with a plain
   softmax first answers wrong (key ``float_breaking_point``; needs rnngap[torch]).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np

from rnngap.checks.catalog.records import by_name
from rnngap.constructions.machine.vocab import BOS, QUERY, number_token

from . import dask_bench, float_break, scale, wide_bench
from .numpy_fx import predict_last

OUT = Path(__file__).resolve().parent / "results.json"


def exhaustive_throughput(n: int = 16, real_sample: int = 2000) -> dict:
    """Every binary string of length n in lexicographic order (itertools.product
    order), one query per string, rotating. The numba executor is timed twice on
    the same batch: as users run it (``predict_batch`` shares the KV cache of the
    prefix a row has in common with the row before it: exact, the model is causal)
    and with ``share_prefix=False`` (every row from position 0, like the numpy
    implementation, which recomputes everything). Both ratios are reported;
    ``speedup_vs_numpy_like_for_like`` is the second (numpy seconds / numba
    seconds without sharing, the same rows, the results compared)."""
    model = by_name("position-match-transformer").build(n).model
    strings = ((np.arange(2 ** n)[:, None] >> (n - 1 - np.arange(n))[None, :]) & 1).astype(np.int64)
    queries = (np.arange(2 ** n) % n) + 1
    toks = np.concatenate([np.full((2 ** n, 1), BOS), strings + number_token(0), np.full((2 ** n, 1), QUERY),
                           (queries + number_token(0))[:, None]], axis=1)
    want = strings[np.arange(2 ** n), queries - 1] + number_token(0)
    # compile (or load from numba's cache) the kernels both timed calls use: 64 equal-length
    # rows take the lane-parallel path (constructions/machine/lanes.py), 8 would take the per-row one
    model.predict_batch(toks[:64])
    model.predict_batch(toks[:64], share_prefix=False)
    t0 = time.perf_counter()
    got = model.predict_batch(toks)
    t_numba = time.perf_counter() - t0
    t0 = time.perf_counter()
    got_dense = model.predict_batch(toks, share_prefix=False)
    t_dense = time.perf_counter() - t0
    t0 = time.perf_counter()
    got_np = np.concatenate([predict_last(model, toks[i:i + 8192]) for i in range(0, len(toks), 8192)])
    t_numpy = time.perf_counter() - t0
    real = model.real()
    t0 = time.perf_counter()
    got_real = np.array([real.predict(list(map(int, row))) for row in toks[:real_sample]])
    t_real = (time.perf_counter() - t0) * len(toks) / real_sample
    steps_shared = len(toks[0]) + sum(len(toks[0]) - min(int(np.argmin(np.append(toks[b] == toks[b - 1], False))),
                                                         len(toks[0]) - 1) for b in range(1, len(toks)))
    return {
        "instances": int(len(toks)),
        "tokens": int(toks.size),
        "steps_with_sharing": int(steps_shared),
        "numba_seconds": t_numba,
        "numba_no_sharing_seconds": t_dense,
        "numpy_seconds": t_numpy,
        "real_seconds_extrapolated": t_real,
        "numba_instances_per_s": len(toks) / t_numba,
        "numba_no_sharing_instances_per_s": len(toks) / t_dense,
        "mismatches_numba": int((got != want).sum()),
        "mismatches_no_sharing_vs_sharing": int((got_dense != got).sum()),
        "mismatches_numpy_vs_numba": int((got_np != got).sum()),
        "mismatches_real": int((got_real != want[:real_sample]).sum()),
        "speedup_vs_numpy": t_numpy / t_numba,
        "speedup_vs_numpy_no_sharing": t_numpy / t_dense,
        "speedup_vs_numpy_like_for_like": t_numpy / t_dense,
        "speedup_vs_real": t_real / t_numba,
    }


def decode_slope(contexts=(10 ** 3, 10 ** 4, 10 ** 5), new_tokens: int = 40) -> dict:
    per_token = {}
    rng = np.random.default_rng(0)
    for L in contexts:
        model = by_name("previous-token-transformer").build(L + new_tokens + 2, alphabet=2).model
        prompt = np.concatenate([[BOS], rng.integers(0, 2, L - 1) + number_token(0)]).astype(np.int64)
        sess = model.session(capacity=L + new_tokens + 2)
        sess.feed(prompt)
        sess.next_token()          # compiled before the clock starts (the readout kernel)
        t0 = time.perf_counter()
        for _ in range(new_tokens):
            tok = sess.next_token()
            if tok != sess.tokens[-2]:
                raise AssertionError("decode benchmark: the previous-token model answered wrongly")
            sess.feed([tok])
        per_token[L] = (time.perf_counter() - t0) / new_tokens
    xs = np.log10(list(per_token))
    ys = np.log10(list(per_token.values()))
    slope = float(np.polyfit(xs, ys, 1)[0])
    return {"seconds_per_token": {str(k): v for k, v in per_token.items()}, "loglog_slope": slope}


def witness_search(bit_sizes=(32, 40)) -> dict:
    try:
        from rnngap.lowerbounds import witness  # noqa: F401
    except ImportError as e:
        return {"available": False, "reason": f"rnngap.lowerbounds.witness not importable: {e}"}
    bench = getattr(witness, "benchmark_collision", None)
    if bench is None:
        return {"available": False, "reason": "rnngap.lowerbounds.witness has no benchmark_collision(bits, seed)"}
    out = {"available": True}
    for bits in bit_sizes:
        t0 = time.perf_counter()
        r = bench(bits, seed=bits)
        r["seconds"] = time.perf_counter() - t0
        out[f"{bits}bit"] = r
    return out


def istree_cot(sizes=(500, 1000, 10 ** 4)) -> dict:
    """Wall time of the IsTree Transformer (T4.7-up) writing its whole DFS-tour CoT
    on one random tree per size (the tour is checked against the reference), and
    the log-log slope over the sizes. ``projected_1e4_seconds`` extrapolates the
    sizes below 10^4 with that slope (labelled as a projection; the measured
    10^4 time is reported beside it when 10^4 is among the sizes)."""
    try:
        from rnngap.constructions.models import istree as IT  # noqa: F401
    except ImportError as e:
        return {"available": False, "reason": f"IsTree construction not importable: {e}"}
    out: dict = {"available": True, "measured": {}}
    for n in sizes:       # one random tree per size, the tour checked against the reference
        out["measured"][str(n)] = scale._istree_run(n)
    small = {k: v for k, v in out["measured"].items() if int(k) < 10 ** 4}
    xs = np.log10([float(k) for k in small])
    ys = np.log10([v["seconds"] for v in small.values()])
    slope = float(np.polyfit(xs, ys, 1)[0])
    last = max(small, key=int)
    out["loglog_slope"] = slope
    out["projected_1e4_seconds"] = out["measured"][last]["seconds"] * (10 ** 4 / int(last)) ** slope
    return out


def quick_verify_cold_warm() -> dict:
    """``rnngap verify --profile quick`` twice in subprocesses sharing one fresh numba
    cache folder: the first run compiles every kernel it uses (cold), the second
    loads them (warm). Each run's wall seconds, exit code and summary line."""
    import os
    import subprocess
    import sys
    import tempfile

    from rnngap.checks.verify.engine import default_workers
    cmd = [sys.executable, "-m", "rnngap.checks.cli.main", "verify", "--profile", "quick"]
    out: dict = {"command": " ".join(cmd[1:])}
    with tempfile.TemporaryDirectory(prefix="rnngap-cold-cache-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for which in ("cold", "warm"):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            wall = time.perf_counter() - t0
            lines = [ln.strip() for ln in p.stdout.splitlines() if " records, " in ln]
            out[which] = {"seconds": round(wall, 1), "exit_code": p.returncode,
                          "summary": lines[-1] if lines else None, "stderr_tail": p.stderr[-1000:]}
    out["cold_minus_warm_seconds"] = round(out["cold"]["seconds"] - out["warm"]["seconds"], 1)
    out["workers"] = default_workers()
    return out


def speed_probe() -> float:
    """Seconds for a fixed pure-Python loop (10^7 additions) on one core: a record
    of how fast this shared machine ran at that moment. It measures one core only:
    on 2026-11-27 it read 0.47-0.56 s while 2-worker runs of the same code were
    40% slower than earlier that day (two copies at once: 0.50 s and 0.67 s), so it
    does not correct the timings (docs/benchmarks.md)."""
    t0 = time.perf_counter()
    s = 0
    for i in range(10 ** 7):
        s += i
    return round(time.perf_counter() - t0, 3)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not the targets)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-istree-1e4", action="store_true",
                    help="skip the IsTree CoT at 10^4 vertices (minutes on 2 cores)")
    ap.add_argument("--no-dask", action="store_true", help="skip the Dask speed-up (needs rnngap[dask])")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip timing `rnngap verify --profile quick` on an empty and a warm numba cache")
    ap.add_argument("--full-profile", action="store_true",
                    help="also time `verify --profile full --engine dask --workers 2` (tens of minutes); "
                         "without it the last recorded full-profile run is kept in the results, with its date")
    ap.add_argument("--full-json", default=None,
                    help="with --full-profile: also write that run's records here (verify --json)")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    t_all = time.perf_counter()
    probes = {"start": speed_probe()}
    ex = exhaustive_throughput(12 if args.quick else 16, 200 if args.quick else 2000)
    dec = decode_slope((10 ** 2, 10 ** 3, 10 ** 4) if args.quick else (10 ** 3, 10 ** 4, 10 ** 5))
    wit = witness_search((16, 24) if args.quick else (32, 40))
    ist = istree_cot((100, 200) if args.quick else (500, 1000) + (() if args.no_istree_1e4 else (10 ** 4,)))
    cg = scale.cgram_2e20(log2n=12, reduction_log2n=10) if args.quick else scale.cgram_2e20()
    dsk = None if args.no_dask else dask_bench.dask_speedup(2)
    wide = {"over_narrow": wide_bench.wide_over_narrow(args.quick), "beyond": wide_bench.beyond(args.quick)}
    floats = float_breaking_point(args.quick)
    probes["before_verify"] = speed_probe()
    qv = None if (args.quick or args.no_verify) else quick_verify_cold_warm()
    probes["end"] = speed_probe()
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    if args.full_profile:
        full = dask_bench.full_profile_dask(2, json_path=args.full_json)
        full["date"] = time.strftime("%Y-%m-%d")
    else:
        full = previous.get("full_profile_dask")
    results = _results(args.quick, probes, ex, dec, wit, ist, cg, wide, dsk, full, qv)
    results["float_breaking_point"] = floats
    results["total_seconds"] = time.perf_counter() - t_all
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"{'measure':34s} {'value':>12s}  target")
    for name, v, tgt in _targets(results, wide, qv, full):
        print(f"{name:34s} {('n/a' if v is None else f'{v:12.3f}'):>12s}  {tgt}")
    for k in ("witness", "istree"):
        if not results[k].get("available"):
            print(f"  {k}: not measured: {results[k]['reason']}")
    if floats.get("available"):
        print("\n".join(float_break.table(floats)))
    else:
        print(f"  float breaking point: not measured: {floats['reason']}")
    if _wrong(ex, wide, qv):
        return 1
    print(f"written {args.out} ({results['total_seconds']:.0f} s)")
    return 0


def float_breaking_point(quick: bool) -> dict:
    """benchmarks/float_break.py's search, or why it did not run (no torch)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return {"available": False, "reason": "needs PyTorch: pip install 'rnngap[torch]'"}
    return {"available": True, **float_break.breaking_points(quick)}


def _results(quick: bool, probes: dict, ex, dec, wit, ist, cg, wide, dsk, full, qv) -> dict:
    """The record benchmarks/results.json holds: every measurement, and the
    headline numbers the targets read."""
    results = {
        "machine": {"python": platform.python_version(), "cpu_count": __import__("os").cpu_count(),
                    "speed_probe_seconds": probes},
        "quick": quick,
        "exhaustive": ex,
        "exhaustive_speedup_vs_numpy": ex["speedup_vs_numpy"],
        "exhaustive_speedup_vs_numpy_no_sharing": ex["speedup_vs_numpy_no_sharing"],
        "exhaustive_speedup_vs_numpy_like_for_like": ex["speedup_vs_numpy_like_for_like"],
        "exhaustive_speedup_vs_real": ex["speedup_vs_real"],
        "decode": dec,
        "decode_loglog_slope": dec["loglog_slope"],
        "witness": wit,
        "collision_40bit_seconds": wit.get("40bit", {}).get("seconds") if wit.get("available") else None,
        "istree": ist,
        "istree_1e4_seconds": ist["measured"].get("10000", {}).get("seconds") if ist.get("available") else None,
        "istree_1e3_seconds": ist["measured"].get("1000", {}).get("seconds") if ist.get("available") else None,
        "istree_1e4_seconds_projected": ist.get("projected_1e4_seconds"),
        "istree_1e4_over_1e3": (ist["measured"]["10000"]["seconds"] / ist["measured"]["1000"]["seconds"]
                                if ist.get("available") and {"1000", "10000"} <= set(ist["measured"]) else None),
        "cgram": cg,
        "cgram_2e20_seconds": cg["seconds"] if cg["n"] == 2 ** 20 else None,
        "wide": wide,
        "wide_over_narrow": wide["over_narrow"]["wide_over_narrow"],
        "dask": dsk,
        "dask_speedup_2_workers": dsk["dask_speedup_2_workers"] if dsk else None,
        "full_profile_dask": full,
        "quick_verify": qv,
        "cold_quick_verify_seconds": qv["cold"]["seconds"] if qv else None,
        "warm_quick_verify_seconds": qv["warm"]["seconds"] if qv else None,
    }
    return results


def _targets(results: dict, wide: dict, qv, full) -> list[tuple]:
    """(measure, value, target) for the table :func:`main` prints."""
    targets = [
        ("exhaustive speed-up vs numpy", results["exhaustive_speedup_vs_numpy"], ">= 10"),
        ("  like for like (no sharing)", results["exhaustive_speedup_vs_numpy_like_for_like"], ">= 10"),
        ("exhaustive speed-up vs real", results["exhaustive_speedup_vs_real"], "(reported)"),
        ("decode log-log slope", results["decode_loglog_slope"], "<= 1.1"),
        ("40-bit collision seconds", results["collision_40bit_seconds"], "< 60"),
        ("IsTree 10^3 vertices seconds", results["istree_1e3_seconds"], "(measured)"),
        ("IsTree 10^4 vertices seconds", results["istree_1e4_seconds"], "< 60"),
        ("IsTree 10^4 seconds, PROJECTED", results["istree_1e4_seconds_projected"], "(from the smaller sizes)"),
        ("IsTree 10^4 / 10^3 seconds", results["istree_1e4_over_1e3"], "<= 13"),
        ("c-gram (c = 4) n = 2^20 seconds", results["cgram_2e20_seconds"], "< 60"),
        ("two-limb / int64 seconds (worst)", results["wide_over_narrow"], "<= 3"),
        *[(f"  past old ceiling: {k}, n = {v['n']}", v["seconds"], "(measured)")
          for k, v in wide["beyond"].items() if isinstance(v, dict)],
        ("Dask speed-up, 2 workers", results["dask_speedup_2_workers"], ">= 1.6"),
        ("quick verify, empty numba cache, s", results["cold_quick_verify_seconds"], "(first run)"),
        ("quick verify, warm cache, s", results["warm_quick_verify_seconds"], "<= 100 on 2 cores"),
        ("  cold - warm, s", qv and qv["cold_minus_warm_seconds"], "<= 60"),
        ("full profile, Dask 2 workers, s", (full or {}).get("wall_seconds"),
         f"< 1800 ({(full or {}).get('date', 'never run')})"),
    ]
    return targets


def _wrong(ex: dict, wide: dict, qv) -> bool:
    """Whether a benchmark computed a wrong result (said on stdout): the run fails."""
    bad = (ex["mismatches_numba"] + ex["mismatches_no_sharing_vs_sharing"] + ex["mismatches_numpy_vs_numba"]
           + ex["mismatches_real"])
    if bad:
        print(f"  WRONG RESULTS in the exhaustive benchmark: {bad} mismatches")
        return True
    if not (wide["over_narrow"]["correct"] and wide["beyond"]["correct"]):
        print("  WRONG RESULTS in the two-limb benchmark")
        return True
    if qv and (qv["cold"]["exit_code"] or qv["warm"]["exit_code"]):
        print(f"  quick verify FAILED: exit codes {qv['cold']['exit_code']} (cold), {qv['warm']['exit_code']} (warm)")
        return True
    return False


if __name__ == "__main__":
    raise SystemExit(main())
