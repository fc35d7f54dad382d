"""The pruned attention of constructions/machine/kernels.py (docs/machine.md "Pruned
attention") against the plain definition, bit for bit: scores built with fx_mul /
fx_add in component order, then fixedpoint.fx_attend; the same output, the same
maximum score, the same err array (largest |raw|, first error, saturation count).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from rnngap.constructions.machine import fixedpoint as FP, kernels as K
from rnngap.constructions.machine import attention as AT
from rnngap.constructions.machine.fixedpoint import E_MAXABS, fx_add, fx_attend, fx_mul, new_err
from rnngap.constructions.machine.formats import FixedFormat


def _plain(q, Kh, V, m, args, err):
    """The plain definition: every score by fx_mul / fx_add, then fx_attend."""
    sc = np.zeros(m, np.int64)
    for j in range(m):
        s = np.int64(0)
        for c in range(len(q)):
            if q[c] != 0 and Kh[j, c] != 0:
                s = fx_add(s, fx_mul(q[c], Kh[j, c], *args, err), *args, err)
        sc[j] = s
    out = np.zeros(V.shape[1], np.int64)
    fx_attend(sc, m, V, *args, err, np.zeros(m, np.int64), out)
    return out, (int(sc.max()) if m else 0)


def _pruned(q, Kh, V, m, args, err, cap=None):
    """The kernels as model_step runs them on a pruning cache (keys stored one by
    one with store_key); returns (out, M, number of keys scored or -1)."""
    Dh = len(q)
    cap = AT.cache_capacity(max(m, cap or 0), True)
    KhT = np.zeros((Dh, cap), np.int64)
    KmT = np.zeros((AT.cache_rows(Dh, True), cap), np.int64)
    Vc = np.zeros((cap, V.shape[1]), np.int64)
    Vc[:m] = V[:m]
    for t in range(m):
        AT.store_key(np.ascontiguousarray(Kh[t]), t, KhT, KmT)
    scores = np.zeros(AT.scores_length(cap, True), np.int64)
    M = AT.attention_scores(q, KhT, KmT, m, *args, err, np.zeros(Dh, np.int64), np.zeros(Dh, np.int64), scores)
    nv = int(scores[cap])
    leaves = scores[cap + 1:cap + 1 + max(nv, 0)].tolist()
    out = np.zeros(V.shape[1], np.int64)
    AT.attend_sparse(scores, m, M, Vc, *args, err, np.zeros(cap, np.int64), out)
    return out, int(M), leaves if nv >= 0 else None


def _case(rng, m_choices):
    """Random format, keys (smooth position-like features, random codes, or a mix),
    query (sharp or random), values."""
    I = int(rng.integers(2, 40))
    f = int(rng.integers(0, min(20, 60 - I) + 1))
    m = int(rng.choice(m_choices))
    m = max(1, m + int(rng.integers(-1, 2)))
    kind = int(rng.integers(0, 3))
    Dh = int(rng.integers(1, 6))
    j = np.arange(m, dtype=np.int64)
    scale = int(rng.integers(0, 4))
    if kind == 0:        # shift-head-like keys (pos, pos^2) and a query peaked at some target
        Kh = np.zeros((m, max(Dh, 2)), np.int64)
        Kh[:, 0] = j << f
        Kh[:, 1] = (j * j) << f
        tgt = int(rng.integers(0, m))
        lam = int(rng.integers(1, 6))
        q = np.zeros(Kh.shape[1], np.int64)
        q[0] = (2 * lam * tgt) << f >> scale
        q[1] = -(lam << f)
    elif kind == 1:      # match-head-like keys: random codes and their squares
        a = int(rng.integers(2, 50))
        codes = rng.integers(0, a, size=m)
        Kh = np.stack([codes << f, (codes * codes) << f, j << f], axis=1).astype(np.int64)
        lam = int(rng.integers(1, 6))
        qc = int(rng.integers(0, a))
        q = np.array([(2 * lam * qc) << f, -(lam << f), -int(rng.integers(0, 3)) << f], np.int64)
    else:                # random keys and query
        kb = int(rng.integers(0, I + f))
        Kh = rng.integers(-(1 << kb), (1 << kb) + 1, size=(m, Dh)).astype(np.int64)
        Kh[rng.random((m, Dh)) < 0.2] = 0
        qb = int(rng.integers(0, 40))
        q = rng.integers(-(1 << qb), (1 << qb), size=Dh, endpoint=True).astype(np.int64)
    vb = int(rng.integers(0, I + f))
    d = int(rng.integers(1, 4))
    V = rng.integers(-(1 << vb), (1 << vb) + 1, size=(m, d)).astype(np.int64)
    return I, f, q, Kh, V, m


M_CHOICES = (1, 15, 16, 17, 33, 64, 100, 256, 700, 1024, 1500, 4096, 5000)


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(5))
def test_pruned_equals_plain(seed, mode):
    """Random formats, keys, queries and m (near the block sizes 16, 64, 1024,
    4096): the output, M and err of the plain definition; pruning skipped keys in
    some trials, and some trials overflowed (the unpruned fallbacks)."""
    rng = np.random.default_rng([seed, 77])
    pruned = errs = 0
    for trial in range(30):
        I, f, q, Kh, V, m = _case(rng, M_CHOICES)
        args = FixedFormat(I, f, mode).args
        e1, e2 = new_err(), new_err()
        want, Mw = _plain(q, Kh, V, m, args, e1)
        got, Mg, leaves = _pruned(q, Kh, V, m, args, e2)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (trial, I, f, m, q.tolist())
        if e1[0] == 0 and e1[5] == 0:
            assert Mg == Mw
        pruned += int(leaves is not None and 16 * len(leaves) < m)
        errs += int(e1[0] != 0 or e1[5] != 0)
    assert pruned > 0
    assert errs > 0


def _threshold_keys(f, delta, m=200):
    """Dh = 1, q = 1.0: score = key. Leaf 5 holds the maximum Mx; leaf 2 holds
    Mx + thr + delta (its box bound minus M0 is thr + delta); the rest far below."""
    thr = int(FP.exp_zero_threshold(f))
    Mx = 1 << (f + 10)
    keys = np.full(m, Mx + thr - (1 << (f + 8)), np.int64)
    keys[5 * 16:6 * 16] = Mx
    keys[2 * 16:3 * 16] = Mx + thr + delta
    return np.ones(1, np.int64) << f, keys[:, None], Mx


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("f", (0, 1, 5, 12))
@pytest.mark.parametrize("delta", (-1, 0, 1))
def test_skip_threshold_exactly(delta, f, mode):
    """A block whose bound minus M0 is thr - 1 is skipped, thr or thr + 1 is
    scored (listed); the results are the plain definition's in every case."""
    q, Kh, Mx = _threshold_keys(f, delta)
    m = len(Kh)
    V = (np.arange(m, dtype=np.int64)[:, None] + 1) << f
    args = FixedFormat(24, f, mode).args
    e1, e2 = new_err(), new_err()
    want, _ = _plain(q, Kh, V, m, args, e1)
    got, M, leaves = _pruned(q, Kh, V, m, args, e2)
    assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist()
    assert M == Mx
    assert (2 in leaves) == (delta >= 0), leaves
    assert 5 in leaves and 0 not in leaves


@pytest.mark.parametrize("preset", (0, 10 ** 9))
def test_skipped_block_above_the_meter(preset):
    """A skipped block whose partial sums exceed everything else the run touched:
    q = (1, -1), keys (-1000, 500) there (partial sums -1000, -1500; column
    products only 1000 and 500), the peak elsewhere. With a fresh err the block's
    partial sums must be recorded (1500 is the largest |raw|); with a larger meter
    already recorded nothing changes. Both equal the plain definition."""
    f = 3
    m = 300
    q = np.array([1 << f, -(1 << f)], np.int64)
    Kh = np.zeros((m, 2), np.int64)
    Kh[:, 0] = -(200 << f)
    Kh[:, 1] = 0
    Kh[100:116] = [-(1000 << f), 500 << f]
    Kh[250] = [10 << f, 0]
    V = np.ones((m, 1), np.int64) << f
    args = FixedFormat(20, f, "raise").args
    e1, e2 = new_err(), new_err()
    e1[E_MAXABS] = e2[E_MAXABS] = preset
    want, _ = _plain(q, Kh, V, m, args, e1)
    got, M, leaves = _pruned(q, Kh, V, m, args, e2)
    assert 6 not in leaves and 16 * len(leaves) < m          # the block was skipped in the softmax
    assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist()
    assert e2[E_MAXABS] == max(preset, 1500 << f)


def test_models_pruned_session_equals_full_path():
    """A c-gram Transformer and a shift-heavy model through a pruning session and
    through a record session (the full path with fx_attend): the same residual,
    the same err after every chunk, and in saturate mode with too few bits too."""
    from rnngap.checks.tasks import hard
    from rnngap.constructions.models import retrieval as R
    c = 3
    m = hard.index_bits("cgram", 1500, c)
    toks, _ = hard.sampled_reduction_instances(np.random.default_rng(5), "cgram", m, 2, c)
    n, a = hard.data_length("cgram", m, c), hard.alphabet("cgram", m, c)
    base = R.cgram_transformer(n, alphabet=a, c=c)
    saturating = base.with_format(FixedFormat(base.fmt.int_bits - 3, base.fmt.frac_bits, "saturate"))
    sat = 0
    for model in (base, saturating):
        for row in toks:
            s1 = model.session(capacity=len(row))
            s2 = model.session(capacity=len(row), record=True)
            assert s1.Km.shape[2] == AT.cache_rows(s2.Km.shape[2], True)
            for i in range(0, len(row), 400):
                s1.feed(row[i:i + 400])
                s2.feed(row[i:i + 400])
                assert s1.x.tolist() == s2.x.tolist() and s1.err.tolist() == s2.err.tolist(), (model.fmt, i)
            assert s1.next_token() == s2.next_token()
            sat += int(s1.err[5])
        pruned = s1.Km[0, 0, s2.Km.shape[2], AT.PRUNE_HINT + 1]
        assert pruned > 0           # the pruned path ran
    assert sat > 0                  # the saturating model did clamp


_SUBPROCESS = r"""
import json, sys
import numpy as np
sys.path[:0] = json.loads(sys.argv[1])
import test_pruned_attention as T
from rnngap.constructions.machine.fixedpoint import new_err
from rnngap.constructions.machine.formats import FixedFormat
rng = np.random.default_rng(123)
res = []
for trial in range(6):
    I, f, q, Kh, V, m = T._case(rng, (17, 40, 70))
    args = FixedFormat(I, f, ("raise", "saturate")[trial % 2]).args
    e = new_err()
    out, M, leaves = T._pruned(q, Kh, V, m, args, e)
    res.append([out.tolist(), M, leaves, e.tolist()])
# a few steps on one cache (the hints kept between steps): shift-like keys and queries
f, Dh, cap = 2, 3, 1024
KhT = np.zeros((Dh, cap), np.int64)
KmT = np.zeros((2 * Dh, cap), np.int64)
Vc = (np.arange(cap, dtype=np.int64)[:, None] % 7) << f
scores = np.zeros(2 * cap, np.int64)
e = new_err()
args = FixedFormat(40, f, "raise").args
for t in range(260):
    T.AT.store_key(np.array([t << f, (t * t) << f, (t % 3) << f], np.int64), t, KhT, KmT)
    q = np.array([(6 * max(0, t - 1)) << f, -(3 << f), 1 << f], np.int64)
    M = T.AT.attention_scores(q, KhT, KmT, t + 1, *args, e, np.zeros(Dh, np.int64), np.zeros(Dh, np.int64), scores)
    out = np.zeros(1, np.int64)
    T.AT.attend_sparse(scores, t + 1, M, Vc, *args, e, np.zeros(cap, np.int64), out)
    res.append([out.tolist(), int(M), int(scores[cap]), e.tolist()])
print(json.dumps(res))
"""


def test_no_jit_gives_the_same():
    """The same small cases with NUMBA_DISABLE_JIT=1 (the kernels as plain
    Python) and compiled: identical outputs, M, listed leaves and err, for fresh
    caches and for 260 steps on one cache (the hints and kept exps in use)."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [here] + [p for p in sys.path if p]
    outs = []
    for jit_off in ("1", "0"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit_off)
        r = subprocess.run([sys.executable, "-c", _SUBPROCESS, json.dumps(paths)], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    assert any(x[2] is not None for x in outs[0][:6])
    steps = outs[0][6:]
    assert sum(1 for t, x in enumerate(steps) if 0 <= x[2] and 16 * x[2] < t + 1) > 100     # pruned steps


@pytest.mark.parametrize("kind", (0, 1, 2))
def test_step_by_step_on_one_cache(kind):
    """As model_step runs it: one cache, key t stored, then attention over keys
    0..t, for every t (the per-head hints and pauses kept in the cache between
    steps): each step equals the plain definition; the query's target moves
    (kind 0: a shift-like head, kind 1: the target jumps, kind 2: random keys)."""
    rng = np.random.default_rng([kind, 9])
    I, f, Dh, steps = 40, 2, 3, 700
    j = np.arange(steps, dtype=np.int64)
    if kind == 2:
        Kh = rng.integers(-(1 << 12), (1 << 12) + 1, size=(steps, Dh)).astype(np.int64)
    else:
        Kh = np.stack([j << f, (j * j) << f, rng.integers(0, 3, size=steps) << f], axis=1).astype(np.int64)
    V = rng.integers(-(1 << 10), (1 << 10) + 1, size=(steps, 2)).astype(np.int64)
    cap = AT.cache_capacity(steps, True)
    KhT = np.zeros((Dh, cap), np.int64)
    KmT = np.zeros((AT.cache_rows(Dh, True), cap), np.int64)
    Vc = np.zeros((cap, 2), np.int64)
    Vc[:steps] = V
    scores = np.zeros(AT.scores_length(cap, True), np.int64)
    args = FixedFormat(I, f, "raise").args
    e1, e2 = new_err(), new_err()
    skipped = 0
    for t in range(steps):
        AT.store_key(np.ascontiguousarray(Kh[t]), t, KhT, KmT)
        if kind == 2:
            q = rng.integers(-(1 << 8), (1 << 8) + 1, size=Dh).astype(np.int64)
        else:
            tgt = max(0, t - 1) if kind == 0 else int(rng.integers(0, t + 1))
            q = np.array([(2 * 3 * tgt) << f, -(3 << f), 1 << f], np.int64)
        want, _ = _plain(q, Kh, V, t + 1, args, e1)
        M = AT.attention_scores(q, KhT, KmT, t + 1, *args, e2, np.zeros(Dh, np.int64), np.zeros(Dh, np.int64),
                               scores)
        # the position blocks (header >= 0: leaves listed) or the key-value index
        # (header <= -2: the kept keys listed, constructions/machine/keyindex.py)
        skipped += int((scores[cap] >= 0 and 16 * scores[cap] < t + 1) or scores[cap] <= -2)
        got = np.zeros(2, np.int64)
        AT.attend_sparse(scores, t + 1, M, Vc, *args, e2, np.zeros(cap, np.int64), got)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (kind, t)
    if kind != 2:
        assert skipped > steps // (2 if kind == 0 else 4)


def test_scale_benchmarks_run_small():
    """benchmarks/scale.py at small sizes: the answers are checked inside (the
    c-gram answer against the reference and the reduction, the IsTree tour against
    dfs_tour); here only that they ran and report their keys (no timing asserted)."""
    from benchmarks import scale
    c = scale.cgram_2e20(log2n=9, reduction_log2n=8)
    assert c["correct"] and c["reduction"]["correct"] and c["n"] == 2 ** 9
    assert c["reduction"]["family"] == "reduction" and c["reduction"]["alphabet"] == 2 ** 8 // 4 + 2
    ist = scale.istree_scaling(sizes=(30, 60))
    assert set(ist["measured"]) == {"30", "60"} and "istree_1e4_seconds" not in ist


@pytest.mark.parametrize("mode", ["raise", "saturate"])
def test_batch_path_pruned_equals_full_path(mode):
    """forward_batch gives rows of >= PRUNE_BATCH_MIN_N tokens a pruning cache.
    Rows that share a prefix with the row before them (share_prefix rewinds and
    overwrites the keys after the first difference, whose blocks keep bounds of
    the overwritten keys) and rows that don't: every position's prediction and
    the err array equal per-row record sessions (the full path, fx_attend)."""
    from rnngap.checks.tasks import hard
    from rnngap.constructions.models import retrieval as R
    c = 3
    m = hard.index_bits("cgram", 300, c)
    rng = np.random.default_rng(11)
    toks, _ = hard.sampled_reduction_instances(rng, "cgram", m, 2, c)
    n, a = hard.data_length("cgram", m, c), hard.alphabet("cgram", m, c)
    assert toks.shape[1] >= AT.PRUNE_BATCH_MIN_N
    rows = []
    for row in toks:                       # each instance, then copies whose tail is redrawn at a late point
        rows.append(row.copy())
        for cut in sorted(rng.integers(toks.shape[1] // 2, toks.shape[1] - 2, 2)):
            r = row.copy()
            r[cut:-2] = rng.permutation(r[cut:-2])
            rows.append(r)
    batch = np.array(rows)
    base = R.cgram_transformer(n, alphabet=a, c=c)
    fmt = base.fmt if mode == "raise" else FixedFormat(base.fmt.int_bits - 3, base.fmt.frac_bits, "saturate")
    want, want_err = [], new_err()
    ref = base.with_format(fmt)
    for row in batch:
        s = ref.session(capacity=len(row), record=True)
        preds = []
        for t in row:
            s.feed([int(t)])
            preds.append(s.next_token())
        want.append(preds)
        want_err[E_MAXABS] = max(want_err[E_MAXABS], s.err[E_MAXABS])
        want_err[5] += s.err[5]
    for share in (True, False):
        model = base.with_format(fmt)
        got = model.predict_batch(batch, all_positions=True, share_prefix=share)
        assert got.tolist() == want, share
        assert int(model.err[E_MAXABS]) == int(want_err[E_MAXABS])
        assert int(model.err[5]) == int(want_err[5])                # (saturate mode never shares: kernels)
    assert mode == "raise" or want_err[5] > 0                     # the saturating format did clamp
