"""The fast batch path (kernels._forward_fast) against the plain definition.

``forward_batch`` runs every step with the embedding tables and the checked-once
matrix-vector products, residual sums, MLPs and readout; ``forward_batch_plain``
runs the same loop on the plain ``_step`` and ``_readout_fast``. They must agree
on the predictions, the whole error array (first error, largest |raw|,
saturation count, position) and the failing batch item, on every catalogue
model, at formats where everything fits, where an operation overflows (raise
mode) and where values are clamped (saturate mode), and at formats so wide that
the fast products are not provably inside int64 (the plain products run).
The building blocks are compared one by one on adversarial operands too, and
one run repeats the comparison with NUMBA_DISABLE_JIT=1 in a subprocess.

Run as a script (``python tests/test_step_fastpath.py SEED``) it prints the
JSON fingerprint the subprocess test compares.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine.fixedpoint import E_CODE, E_MAXABS, E_SAT, MODE_SATURATE, new_err
from rnngap.constructions.machine.formats import FixedFormat

N_BUILD = 4
SMALL = ("position-match-transformer", "index-hybrid", "ar-rag", "counting-transformer")


def _batch(model, rng, rows, max_len, entry=None):
    """Rows of valid token ids: the entry's example prompts, random tokens, and
    rows sharing prefixes with the row before (sorted), padded with -7."""
    cands = np.asarray(model.candidates, np.int64)
    cap = max_len if model.max_positions is None else min(max_len, model.max_positions)
    seqs = []
    for r in range(rows):
        if entry is not None and r % 3 == 0:
            s = entry.example(N_BUILD, rng)[:cap]
        else:
            s = [int(t) for t in cands[rng.integers(0, len(cands), int(rng.integers(1, cap + 1)))]]
            s[0] = 0                                    # [BOS] first, as every prompt
        seqs.append(s)
    for r in range(1, rows, 4):                         # a prefix of another row plus a new tail
        k = int(rng.integers(1, len(seqs[0]) + 1))
        seqs[r] = seqs[0][:k] + seqs[r][k:]
    seqs.sort()
    seqs += [seqs[-1], seqs[-1][:max(1, len(seqs[-1]) - 2)]]
    N = max(map(len, seqs))
    toks = np.full((len(seqs), N), -7, np.int64)
    for b, s in enumerate(seqs):
        toks[b, :len(s)] = s
    return toks, np.array([len(s) for s in seqs], np.int64)


def _run(fn, model, toks, lengths, all_positions, share, readout):
    preds = np.full(toks.shape, -1, np.int64)
    err = new_err()
    loc = np.full(2, -1, np.int64)
    fn(toks, lengths, all_positions, share, readout, *model.fmt.args, err, loc, model.weights, preds)
    return preds.tolist(), err.tolist(), loc.tolist()


def _formats(model, used, rng):
    """The model's format, one and three integer bits below what a run used (raise
    and saturate), random narrower / wider formats, and a format so wide that
    |w| 2^(I+f) may reach 2^62 (the fast products are then not used)."""
    I0, f0 = model.fmt.int_bits, model.fmt.frac_bits
    out = [(I0, f0, "raise")]
    for dI in (1, 3):
        for mode in ("raise", "saturate"):
            out.append((max(1, used - dI), f0, mode))
    for _ in range(3):
        f = f0 + int(rng.integers(0, 3))
        out.append((int(rng.integers(1, max(2, min(I0, 62 - f)) + 1)), f, str(rng.choice(["raise", "saturate"]))))
    f = f0 + 2
    out.append((62 - f, f, "raise"))
    return out


def _compare_all(name, seed, rows=10, max_len=24):
    """Fast and plain forward_batch on one model over every format of _formats and
    every (all_positions, share_prefix, readout); returns how many runs erred and
    saturated (so the caller can check the adversarial cases happened)."""
    rng = np.random.default_rng(seed)
    entry = by_name(name)
    base = entry.build(N_BUILD).model
    toks, lengths = _batch(base, rng, rows, max_len, entry)
    _, err, _ = _run(BT.forward_batch_plain, base, toks, lengths, True, False, K.READOUT_TABLE)
    used = base.fmt.used_int_bits(np.array(err))
    stats = {"runs": 0, "errors": 0, "saturated": 0, "unsafe_products": 0}
    for I, f, mode in _formats(base, used, rng):
        try:
            model = base.with_format(FixedFormat(I, f, mode))
        except (ValueError, OverflowError, ArithmeticError):
            continue                                    # a weight does not fit this format: nothing to run
        readouts = [K.READOUT_TABLE] + ([K.READOUT_NEAREST_CODE] if model.nearest_code_dim >= 0 else [])
        W = model.weights.net
        wbits = max(int(np.abs(a).max(initial=0)).bit_length()
                    for a in (W.rA, W.rB, W.rC, W.rW1, W.rW2, W.aWQ, W.aWK, W.aWV, W.aWO, W.aW1, W.aW2))
        stats["unsafe_products"] += wbits + I + f > 62
        for all_positions in (False, True):
            for share in (False, True):
                for ro in readouts:
                    got = _run(BT.forward_batch, model, toks, lengths, all_positions, share, ro)
                    want = _run(BT.forward_batch_plain, model, toks, lengths, all_positions, share, ro)
                    assert got == want, (name, I, f, mode, all_positions, share, ro)
                    stats["runs"] += 1
                    stats["errors"] += got[1][E_CODE] != 0
                    stats["saturated"] += got[1][E_SAT] > 0
    return stats


@pytest.mark.parametrize("name", names())
def test_fast_batch_equals_plain_on_every_catalogue_model(name):
    stats = _compare_all(name, 1000 + names().index(name))
    assert stats["runs"] >= 8 * 4, stats


def test_the_catalogue_runs_hit_overflow_saturation_and_wide_formats():
    """The comparison above is not vacuous: on the small models, runs overflow,
    runs saturate, and a format with possibly-unsafe products is among them."""
    total = {"errors": 0, "saturated": 0, "unsafe_products": 0, "runs": 0}
    for i, name in enumerate(SMALL):
        for k, v in _compare_all(name, 2000 + i).items():
            total[k] += v
    assert total["errors"] > 0 and total["saturated"] > 0 and total["unsafe_products"] > 0, total


# ---------------------------------------------------------------------------- the building blocks
def _adversarial(rng, shape, lim):
    """Raws up to the range limit, many zeros, some exactly +-(lim - 1)."""
    scale = int(rng.choice([4, 12, max(1, lim.bit_length() - 3), lim.bit_length() - 1]))
    a = rng.integers(-(1 << scale), (1 << scale) + 1, size=shape, dtype=np.int64)
    a = np.clip(a, -(lim - 1), lim - 1)
    a[rng.random(shape) < 0.3] = 0
    a[rng.random(shape) < 0.05] = lim - 1
    a[rng.random(shape) < 0.05] = -(lim - 1)
    return a


def _fmt(rng):
    f = int(rng.integers(0, 12))
    I = int(rng.integers(1, (30 if rng.random() < 0.8 else 50) - f))
    return I, f, (0 if rng.random() < 0.5 else MODE_SATURATE)


@pytest.mark.parametrize("seed", range(6))
def test_matvec_fast_equals_matvec(seed):
    rng = np.random.default_rng(seed)
    outcomes = set()
    for _ in range(300):
        I, f, mode = _fmt(rng)
        lim = 1 << (I + f)
        R, C = int(rng.integers(0, 6)), int(rng.integers(0, 8))
        W, x = _adversarial(rng, (R, C), lim), _adversarial(rng, C, lim)
        psafe = int(np.abs(W).max(initial=0)).bit_length() + I + f <= 62
        e1, e2 = new_err(), new_err()
        e1[E_MAXABS] = e2[E_MAXABS] = int(rng.integers(0, lim))
        o1, o2 = np.full(R, 7, np.int64), np.full(R, -7, np.int64)
        K.matvec(W, x, I, f, mode, e1, o1)
        stack = _adversarial(rng, (2, 3, R, C), lim)      # W read in place from a stack of matrices
        l, h = int(rng.integers(0, 2)), int(rng.integers(0, 3))
        stack[l, h] = W
        BT.matvec_fast(stack, (l, h), x, I, f, mode, e2, o2, psafe)
        assert o1.tolist() == o2.tolist() and e1.tolist() == e2.tolist(), (I, f, mode, W.tolist(), x.tolist())
        outcomes.add((bool(e1[E_CODE]), bool(e1[E_SAT]), psafe))
    assert {(True, False, True), (False, True, True), (False, False, True)} <= outcomes, outcomes


@pytest.mark.parametrize("seed", range(4))
def test_mlp_and_residual_sums_equal_the_plain_loops(seed):
    rng = np.random.default_rng(100 + seed)
    outcomes = set()
    for _ in range(300):
        I, f, mode = _fmt(rng)
        lim = 1 << (I + f)
        D, M = int(rng.integers(1, 6)), int(rng.integers(0, 5))
        W1, b1 = _adversarial(rng, (M, D), lim), _adversarial(rng, M, lim)
        W2, b2 = _adversarial(rng, (D, M), lim), _adversarial(rng, D, lim)
        x = _adversarial(rng, D, lim)
        psafe = max(int(np.abs(W1).max(initial=0)), int(np.abs(W2).max(initial=0))).bit_length() + I + f <= 62
        e1, e2 = new_err(), new_err()
        x1, x2 = x.copy(), x.copy()
        K.mlp_residual(W1, b1, W2, b2, x1, I, f, mode, e1, np.zeros(M, np.int64), np.zeros(D, np.int64))
        l = int(rng.integers(0, 3))                     # layer l of stacks of 3
        st = [_adversarial(rng, (3,) + a.shape, lim) for a in (W1, b1, W2, b2)]
        for a, v in zip(st, (W1, b1, W2, b2)):
            a[l] = v
        BT.mlp_residual_fast(*st, l, x2, I, f, mode, e2, np.zeros(M, np.int64), np.zeros(D, np.int64), psafe)
        assert x1.tolist() == x2.tolist() and e1.tolist() == e2.tolist()
        outcomes.add((bool(e1[E_CODE]), bool(e1[E_SAT])))
        y = _adversarial(rng, D, lim)
        e1, e2 = new_err(), new_err()
        x1, x2 = x.copy(), x.copy()
        for d in range(D):
            x1[d] = K.fx_add(x1[d], y[d], I, f, mode, e1)
        BT.add_into(x2, y, I, f, mode, e2)
        assert x1.tolist() == x2.tolist() and e1.tolist() == e2.tolist()
        outcomes.add((bool(e1[E_CODE]), bool(e1[E_SAT])))
    assert {(True, False), (False, True), (False, False)} <= outcomes, outcomes


@pytest.mark.parametrize("seed", range(3))
def test_metered_mlp_skips_only_zero_additions(seed):
    """_step's MLP (kernels._mlp_residual_metered) skips adding 0 to x[d]: with x
    metered under err (as _step's embedding leaves it) it gives the same x and
    the same err as mlp_residual, at fitting, overflowing and saturating formats;
    and the skip is really taken (zero rows of W2 with zero biases)."""
    rng = np.random.default_rng(200 + seed)
    outcomes = set()
    for _ in range(300):
        I, f, mode = _fmt(rng)
        lim = 1 << (I + f)
        D, M = int(rng.integers(1, 7)), int(rng.integers(0, 5))
        W1, b1 = _adversarial(rng, (M, D), lim), _adversarial(rng, M, lim)
        W2, b2 = _adversarial(rng, (D, M), lim), _adversarial(rng, D, lim)
        zero = rng.random(D) < 0.4
        W2[zero], b2[zero] = 0, 0
        e = new_err()
        x = np.array([K.fx_add(v, 0, I, f, mode, e) for v in _adversarial(rng, D, lim)], np.int64)
        e1, e2 = e.copy(), e.copy()
        x1, x2 = x.copy(), x.copy()
        K.mlp_residual(W1, b1, W2, b2, x1, I, f, mode, e1, np.zeros(M, np.int64), np.zeros(D, np.int64))
        K._mlp_residual_metered(W1, b1, W2, b2, x2, I, f, mode, e2, np.zeros(M, np.int64), np.zeros(D, np.int64))
        assert x1.tolist() == x2.tolist() and e1.tolist() == e2.tolist()
        outcomes.add((bool(e1[E_CODE]), bool(e1[E_SAT]), bool(zero.any())))
    assert {(True, False, True), (False, True, True), (False, False, True)} <= outcomes, outcomes


def test_readout_and_embedding_tables_equal_the_plain_ones():
    """_readout_table_fast == _readout_fast and ttab[tok] + ptab[t] == _embed (with
    the same err effects, or the row is marked not ok), at formats that fit and
    formats that overflow, on the SMALL models."""
    bad_rows = fallbacks = 0
    for name in SMALL:
        bad_rows, fallbacks = _check_tables(name, bad_rows, fallbacks)
    assert fallbacks > 0 and bad_rows > 0, (fallbacks, bad_rows)


def _check_tables(name, bad_rows, fallbacks):
    rng = np.random.default_rng(300 + SMALL.index(name))
    base = by_name(name).build(N_BUILD).model
    for I in (base.fmt.int_bits, 4, 2, 1):
        for mode in ("raise", "saturate"):
            try:
                m = base.with_format(FixedFormat(I, base.fmt.frac_bits, mode))
            except (ValueError, OverflowError, ArithmeticError):
                continue
            I_, f, md = m.fmt.args
            lim = 1 << (I_ + f)
            ro, net = m.weights.readout, m.weights.net
            rsafe = int(np.abs(ro.w_tab).max(initial=0)).bit_length() + I_ + f <= 62
            for _ in range(60):
                x = _adversarial(rng, net.ekind.shape[0], lim)
                e1, e2 = new_err(), new_err()
                a = RO.readout_fast_args(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates,
                                    ro.w_tab, ro.wmax_tab, ro.ok_tab, I_, f, md, e1)
                b = BT._readout_table_fast(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates,
                                          ro.w_tab, ro.wmax_tab, ro.ok_tab, I_, f, md, e2, rsafe,
                                          *BT.readout_columns(ro.wmax_tab, ro.ok_tab),
                                          np.zeros(len(ro.candidates), np.int64))
                assert a == b and e1.tolist() == e2.tolist()
                fallbacks += bool(e1[E_CODE] or e1[E_SAT])
            npos = 40
            ttab, tmx, tok_ok, ptab, pmx, pos_ok = BT.embed_tables(net.ekind, net.eparam, net.ecoef, m.candidates,
                                                                  npos, I_, f, md)
            for tok in m.candidates:
                for t in range(npos):
                    e = new_err()
                    x = np.zeros(net.ekind.shape[0], np.int64)
                    K.embed_features(tok, t, net.ekind, net.eparam, net.ecoef, I_, f, md, e, x)
                    if tok_ok[tok] and pos_ok[t]:
                        assert (ttab[tok] + ptab[t]).tolist() == x.tolist()
                        assert e[E_MAXABS] == max(tmx[tok], pmx[t]) and e[E_CODE] == e[E_SAT] == 0
                    else:
                        bad_rows += 1
                        assert e[E_CODE] != 0 or e[E_SAT] > 0     # a row is marked not ok only if it errs
    return bad_rows, fallbacks


# ---------------------------------------------------------------------------- NUMBA_DISABLE_JIT=1
def fingerprint(seed: int) -> dict:
    """Fast and plain forward_batch on small batches of the SMALL models at their
    format and one integer bit below what they use (raise and saturate)."""
    out = {}
    for i, name in enumerate(SMALL):
        rng = np.random.default_rng(seed + i)
        base = by_name(name).build(N_BUILD).model
        toks, lengths = _batch(base, rng, 4, 10)
        _, err, _ = _run(BT.forward_batch_plain, base, toks, lengths, True, False, K.READOUT_TABLE)
        used = base.fmt.used_int_bits(np.array(err))
        runs = []
        for fmt in (base.fmt, FixedFormat(max(1, used - 1), base.fmt.frac_bits),
                    FixedFormat(max(1, used - 1), base.fmt.frac_bits, "saturate")):
            m = base.with_format(fmt)
            for fn in (BT.forward_batch, BT.forward_batch_plain):
                runs.append(_run(fn, m, toks, lengths, True, False, K.READOUT_TABLE))
        out[name] = runs
    return out


def test_pure_python_path_is_identical_to_the_jit():
    from _nojit import fingerprint_without_jit
    seed = 4242
    jit = fingerprint(seed)
    assert json.loads(json.dumps(jit)) == fingerprint_without_jit(__file__, seed)
    for runs in jit.values():
        assert all(runs[k] == runs[k + 1] for k in range(0, len(runs), 2))   # fast == plain
    assert any(r[1][E_CODE] for runs in jit.values() for r in runs)            # an overflow ran
    assert any(r[1][E_SAT] for runs in jit.values() for r in runs)             # a clamp ran


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
