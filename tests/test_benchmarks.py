"""The benchmark suite runs (quick sizes) and every measurement's results are
right; speed itself is never asserted here (it is reported by the suite)."""
import json

from benchmarks.__main__ import main

KEYS = ("exhaustive_speedup_vs_numpy", "exhaustive_speedup_vs_numpy_like_for_like", "decode_loglog_slope",
        "collision_40bit_seconds", "istree_1e4_seconds", "istree_1e4_over_1e3", "cgram_2e20_seconds",
        "dask_speedup_2_workers", "full_profile_dask", "wide_over_narrow", "cold_quick_verify_seconds", "warm_quick_verify_seconds",
        "float_breaking_point")


def test_quick_benchmark_runs_and_is_correct(tmp_path):
    out = tmp_path / "results.json"
    assert main(["--quick", "--no-dask", "--out", str(out)]) == 0   # the Dask run: tests/test_engine.py
    res = json.loads(out.read_text())
    for k in KEYS:
        assert k in res
    ex = res["exhaustive"]
    assert ex["mismatches_numba"] == ex["mismatches_numpy_vs_numba"] == ex["mismatches_real"] == 0
    assert ex["mismatches_no_sharing_vs_sharing"] == 0
    assert ex["steps_with_sharing"] < ex["tokens"]
    assert ex["instances"] == 2 ** 12
    assert res["witness"]["available"] and all(res["witness"][f"{b}bit"]["found"] for b in (16, 24))
    assert res["istree"]["available"] and set(res["istree"]["measured"]) == {"100", "200"}
    assert res["wide"]["over_narrow"]["correct"] and res["wide"]["beyond"]["correct"]
    assert res["wide"]["beyond"]["counting transformer"]["n"] > res["wide"]["beyond"]["counting transformer"]["old_ceiling"]
    assert res["cgram"]["correct"] and res["cgram"]["n"] == 2 ** 12 and res["cgram"]["reduction"]["correct"]
    fb = res["float_breaking_point"]          # the test install has torch: the search runs
    assert fb["available"] and set(fb["constructions"]) == {"index-transformer", "index-hybrid"}
    for row in fb["constructions"].values():
        assert row["float64-plain-softmax"] is not None and row["float64-plain-softmax"]["m"] == 1
        for found in row.values():
            assert found is None or (1 <= found["m"] <= fb["m_max"] and found["instance"])
