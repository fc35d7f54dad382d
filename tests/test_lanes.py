"""The lane-parallel batch forward (constructions/machine/lanes.py) against the plain definition.

``lanes.forward_lanes`` advances a block of equal-length rows together and sends
the rows it cannot settle (an overflow, a clamp, an embedding or readout entry
that is not ok, an undecided exp, a product that might leave int64) to the
per-row path. It must agree with ``batch.forward_batch_plain`` on the
predictions, the whole error array (first error, largest |raw|, saturation
count, position) and the failing batch item: on every catalogue model, at the
formats of tests/test_step_fastpath.py (the model's own, one and three integer
bits below what a run uses in raise and saturate mode, random ones, one so wide
the products are not provably inside int64), with all_positions on and off, both
readouts, batches of varied and of equal lengths, block sizes that do not divide
the batch, and blocks where some lanes settle and others fall back. One run
repeats the comparison with NUMBA_DISABLE_JIT=1 in a subprocess.

Run as a script (``python tests/test_lanes.py SEED``) it prints the JSON
fingerprint the subprocess test compares.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine import lanes as LN
from rnngap.constructions.machine.fixedpoint import (
    E_CODE, E_MAXABS, E_SAT, FixedPointOverflow, exp_raw, check_err, exp_zero_threshold, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import BOS, QUERY, number_token

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_step_fastpath import N_BUILD, SMALL, _batch, _formats, _run  # noqa: E402



def _lanes(model, toks, lengths, all_positions, share, readout, block):
    """forward_lanes with the arguments of _run; returns (preds, err, loc) and how
    many rows the lanes settled (-1: the whole batch ran on the per-row path)."""
    preds = np.full(toks.shape, -1, np.int64)
    err = new_err()
    loc = np.full(2, -1, np.int64)
    settled = LN.forward_lanes(toks, lengths, all_positions, share, readout, *model.fmt.args, err, loc,
                               model.weights, preds, LN.exp_table(model.fmt.frac_bits), block)
    return (preds.tolist(), err.tolist(), loc.tolist()), int(settled)


def _equal_batch(model, rng, rows, n, entry=None):
    """``rows`` rows of the same length (the lanes' case): random tokens after [BOS],
    some of them the entry's example prompts cut or padded to that length."""
    cands = np.asarray(model.candidates, np.int64)
    n = n if model.max_positions is None else min(n, model.max_positions)
    toks = cands[rng.integers(0, len(cands), (rows, n))]
    toks[:, 0] = 0
    if entry is not None:
        for r in range(0, rows, 4):
            ex = list(entry.example(N_BUILD, rng))[:n]
            toks[r, :len(ex)] = ex
    return toks.astype(np.int64), np.full(rows, n, np.int64)


def _compare(name, seed, rows=(14, 29), max_len=16, blocks=(4, 16)):
    """forward_lanes == forward_batch_plain on one model over every format of
    _formats, every (all_positions, share_prefix, readout), a batch of varied
    lengths and one of equal lengths, and block sizes that do not divide the
    batch. Returns counts of what happened (so callers can check the adversarial
    cases ran)."""
    rng = np.random.default_rng(seed)
    entry = by_name(name)
    base = entry.build(N_BUILD).model
    batches = [_batch(base, rng, rows[0], max_len, entry), _equal_batch(base, rng, rows[1], max_len, entry)]
    _, err, _ = _run(BT.forward_batch_plain, base, *batches[0], True, False, K.READOUT_TABLE)
    used = base.fmt.used_int_bits(np.array(err))
    st = {"runs": 0, "errors": 0, "saturated": 0, "lanes_runs": 0, "settled": 0, "mixed": 0,
          "mixed_error": 0, "whole_batch_per_row": 0}
    for I, f, mode in _formats(base, used, rng):
        try:
            model = base.with_format(FixedFormat(I, f, mode))
        except (ValueError, OverflowError, ArithmeticError):
            continue                                    # a weight does not fit this format: nothing to run
        readouts = [K.READOUT_TABLE] + ([K.READOUT_NEAREST_CODE] if model.nearest_code_dim >= 0 else [])
        for toks, lengths in batches:
            for all_positions in (False, True):
                for ro in readouts:
                    want = _run(BT.forward_batch_plain, model, toks, lengths, all_positions, False, ro)
                    for block, share in zip(blocks, (False, True)):
                        got, settled = _lanes(model, toks, lengths, all_positions, share, ro, block)
                        assert got == want, (name, I, f, mode, all_positions, share, ro, block)
                        st["runs"] += 1
                        st["errors"] += want[1][E_CODE] != 0
                        st["saturated"] += want[1][E_SAT] > 0
                        if settled < 0:
                            st["whole_batch_per_row"] += 1
                            continue
                        st["lanes_runs"] += 1
                        st["settled"] += settled
                        # a run where some rows were settled by the lanes and others fell back
                        fell_back = want[1][E_CODE] != 0 or want[1][E_SAT] > 0
                        st["mixed"] += fell_back and settled > 0
                        st["mixed_error"] += want[1][E_CODE] != 0 and settled > 0
    return st


@pytest.mark.parametrize("name", names())
def test_lanes_equal_plain_on_every_catalogue_model(name):
    st = _compare(name, 3000 + names().index(name))
    assert st["runs"] >= 16 and st["lanes_runs"] > 0 and st["settled"] > 0, st


def test_the_lane_runs_hit_fallbacks_errors_clamps_and_wide_formats():
    """The comparison above is not vacuous: on the small models some runs have the
    lanes settle rows while other rows overflow (raise: the error stops the run in
    the middle of a block) or clamp (saturate) and fall back, and some formats are
    so wide that the whole batch runs on the per-row path."""
    total: dict = {}
    for i, name in enumerate(SMALL):
        for k, v in _compare(name, 4000 + i).items():
            total[k] = total.get(k, 0) + v
    assert total["errors"] > 0 and total["saturated"] > 0, total
    assert total["mixed"] > 0 and total["mixed_error"] > 0 and total["whole_batch_per_row"] > 0, total


def _mixed_block():
    """Index rows (position-match) where only the rows whose answer bit sits at a
    large position fail one integer bit below: one block holds both kinds."""
    n = 12
    model = by_name("position-match-transformer").build(n).model
    rng = np.random.default_rng(7)
    B = 70
    strings = rng.integers(0, 2, (B, n))
    queries = rng.integers(1, n + 1, B)
    toks = np.concatenate([np.full((B, 1), BOS), strings + number_token(0), np.full((B, 1), QUERY),
                           (queries + number_token(0))[:, None]], axis=1).astype(np.int64)
    lengths = np.full(B, toks.shape[1], np.int64)
    return model, toks, lengths


@pytest.mark.parametrize("mode", ("raise", "saturate"))
def test_a_block_where_only_some_lanes_fall_back(mode):
    """Formats between 'everything fits' and 'every row fails': in each, a block of
    70 lanes (blocks of 32: 70 is not a multiple) has rows the lanes settle and
    rows that fail; err, preds and loc are the plain ones."""
    model, toks, lengths = _mixed_block()
    _, err, _ = _run(BT.forward_batch_plain, model, toks, lengths, True, False, K.READOUT_TABLE)
    used = model.fmt.used_int_bits(np.array(err))
    seen = 0
    for I in range(used, 0, -1):
        try:
            m = model.with_format(FixedFormat(I, model.fmt.frac_bits, mode))
        except (ValueError, OverflowError, ArithmeticError):
            break                                       # the weights themselves no longer fit
        for ap in (False, True):
            want = _run(BT.forward_batch_plain, m, toks, lengths, ap, False, K.READOUT_TABLE)
            got, settled = _lanes(m, toks, lengths, ap, False, K.READOUT_TABLE, 32)
            assert got == want, (I, mode, ap)
            failed = want[1][E_CODE] != 0 or want[1][E_SAT] > 0
            seen += failed and 0 < settled < len(toks)
    assert seen > 0


def _cancelling_heads(I, f, mode):
    """Hand-made weights (kernels.Weights) where the largest |raw| of a run is the sum
    of two heads' outputs, which the residual then cancels: x = -60 tau (token tau = 1),
    both heads average v = 1 (all scores 0), W_O = 32 and 40, so acc ~ 72 while x + acc
    ~ 12. With I = 6 the head sum overflows (or clamps) although nothing after it does."""
    one = 1 << f
    D = 2
    z = lambda *shape: np.zeros(shape, np.int64)                    # noqa: E731
    aWV, aWO = z(1, 2, 1, D), z(1, 2, D, 1)
    aWV[0, :, 0, 1] = one
    aWO[0, 0, 0, 0], aWO[0, 1, 0, 0] = 32 * one, 40 * one
    net = K.Network(np.array([K.F_TOK, K.F_ONE]), z(D), np.array([-60 * one, one]),
                    z(0, 0, 0), z(0, 0, D), z(0, D, 0), z(0, 0, D), z(0, 0), z(0, D, 0), z(0, D),
                    z(1, 2, 1, D), z(1, 2, 1, D), aWV, aWO, np.array([2]), z(1, 0, D), z(1, 0), z(1, D, 0), z(1, D))
    cands = np.array([0, number_token(0)])
    out = (np.array([0]), np.array([K.F_IS_NUM]), z(1), np.array([one]))
    ro = K.Readout(*out, cands, *RO.readout_table(out[1], out[2], out[3], cands, I, f, mode), np.array([-1, 0, 0]))
    return K.Weights(net, ro)


def test_a_head_sum_that_the_residual_cancels():
    """The meter and the overflow check of the sum of the heads' outputs (acc, before
    x += acc) are the lanes' own: nothing later records that value. At I = 7 it is the
    run's largest |raw|; at I = 6 it overflows (raise: the error names it) or clamps."""
    f = 8
    toks = np.full((37, 6), number_token(0), np.int64)
    lengths = np.full(37, 6, np.int64)
    lengths[20:] = 5                                              # two runs, blocks of 16 lanes
    for I, mode in ((7, 0), (6, 0), (6, 1)):
        W = _cancelling_heads(I, f, mode)
        runs = []
        for fn in (BT.forward_batch_plain, LN.forward_lanes):
            preds = np.full(toks.shape, -1, np.int64)
            err = new_err()
            loc = np.full(2, -1, np.int64)
            extra = (LN.exp_table(f), 16) if fn is LN.forward_lanes else ()
            settled = fn(toks, lengths, True, False, K.READOUT_TABLE, I, f, mode, err, loc, W, preds, *extra)
            runs.append((preds.tolist(), err.tolist(), loc.tolist()))
        assert runs[0] == runs[1], (I, mode)
        err = runs[0][1]
        if I == 7:
            assert err[E_CODE] == 0 and err[E_MAXABS] > 60 << f and settled == 37     # the head sum is the max
        else:
            assert err[E_CODE] != 0 if mode == 0 else err[E_SAT] > 0


def _summing_state(I, f, mode):
    """Hand-made linear RNN (kernels.Weights) whose state h_t = h_{t-1} + 35 tau is
    the run's largest |raw| only as the sum A h + B x (each product <= 35, C = 1/4):
    70 at the second token; with I = 6 that sum overflows (or clamps) alone."""
    one = 1 << f
    D = 2
    z = lambda *shape: np.zeros(shape, np.int64)                    # noqa: E731
    rA, rB, rC = z(1, 1, 1) + one, z(1, 1, D), z(1, D, 1)
    rB[0, 0, 0] = 35 * one
    rC[0, 0, 0] = one // 4
    net = K.Network(np.array([K.F_TOK, K.F_ONE]), z(D), np.array([one, one]),
                    rA, rB, rC, z(1, 0, D), z(1, 0), z(1, D, 0), z(1, D),
                    z(0, 0, 0, D), z(0, 0, 0, D), z(0, 0, 0, D), z(0, 0, D, 0), z(0), z(0, 0, D), z(0, 0),
                    z(0, D, 0), z(0, D))
    cands = np.array([0, number_token(0)])
    out = (np.array([0]), np.array([K.F_IS_NUM]), z(1), np.array([one]))
    ro = K.Readout(*out, cands, *RO.readout_table(out[1], out[2], out[3], cands, I, f, mode), np.array([-1, 0, 0]))
    return K.Weights(net, ro)


def test_a_state_sum_no_product_repeats():
    """The meter and the overflow check of the RNN state sum A h + B x are the lanes'
    own: at I = 7 it is the run's largest |raw|, at I = 6 it overflows or clamps."""
    f = 8
    toks = np.full((21, 3), number_token(0), np.int64)
    lengths = np.full(21, 2, np.int64)
    lengths[9:] = 3                                               # the third token: h = 105 > 64 as well
    for I, mode in ((7, 0), (6, 0), (6, 1)):
        W = _summing_state(I, f, mode)
        lens = lengths if I == 6 else np.full(21, 2, np.int64)
        runs = []
        for fn in (BT.forward_batch_plain, LN.forward_lanes):
            preds = np.full(toks.shape, -1, np.int64)
            err = new_err()
            loc = np.full(2, -1, np.int64)
            extra = (LN.exp_table(f), 8) if fn is LN.forward_lanes else ()
            settled = fn(toks, lens, True, False, K.READOUT_TABLE, I, f, mode, err, loc, W, preds, *extra)
            runs.append((preds.tolist(), err.tolist(), loc.tolist()))
        assert runs[0] == runs[1], (I, mode)
        err = runs[0][1]
        if I == 7:
            assert err[E_CODE] == 0 and err[E_MAXABS] == 70 << f and settled == 21
        else:
            assert err[E_CODE] != 0 if mode == 0 else err[E_SAT] > 0

# ---------------------------------------------------------------------------- predict_batch
def test_predict_batch_uses_the_lanes_for_an_exhaustive_batch():
    """The benchmark's kind of batch (every binary string, equal lengths) goes to the
    lanes, with and without sharing, and gives the plain predictions and used bits;
    one bit below, the same error message (batch item and position) as the per-row
    path."""
    n = 8
    entry = by_name("position-match-transformer")
    model = entry.build(n).model
    strings = ((np.arange(2 ** n)[:, None] >> (n - 1 - np.arange(n))[None, :]) & 1).astype(np.int64)
    queries = (np.arange(2 ** n) % n) + 1
    toks = np.concatenate([np.full((2 ** n, 1), BOS), strings + number_token(0), np.full((2 ** n, 1), QUERY),
                           (queries + number_token(0))[:, None]], axis=1).astype(np.int64)
    lengths = np.full(len(toks), toks.shape[1], np.int64)
    for share in (False, True):
        assert LN.choose_block(model, toks, lengths, share, "table") > 0
    want = _run(BT.forward_batch_plain, model, toks, lengths, False, False, K.READOUT_TABLE)
    for share in (False, True):
        m = entry.build(n).model
        got = m.predict_batch(toks, share_prefix=share)
        assert got.tolist() == np.array(want[0])[:, -1].tolist()
        assert (got == strings[np.arange(2 ** n), queries - 1] + number_token(0)).all()
        assert m.err[E_MAXABS] == max(entry.build(n).model.err[E_MAXABS], want[1][E_MAXABS])
    used = model.fmt.used_int_bits(np.array(want[1]))
    low = model.with_format(FixedFormat(used - 1, model.fmt.frac_bits))
    assert LN.choose_block(low, toks, lengths, False, "table") > 0
    _, err, loc = _run(BT.forward_batch_plain, low, toks, lengths, False, False, K.READOUT_TABLE)
    msgs = []
    with pytest.raises(FixedPointOverflow) as e:
        check_err(np.array(err), low.fmt, f"{low.name}, batch item {loc[0]}")
    msgs.append(str(e.value))
    with pytest.raises(FixedPointOverflow) as e:
        low.predict_batch(toks, share_prefix=False)
    msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "batch item" in msgs[0]


def test_a_bad_token_in_a_lanes_sized_batch_is_refused_before_any_kernel(monkeypatch):
    """predict_batch's cheap full-length token check: a batch the lanes would take,
    with one id outside the vocabulary (above it, below 0, or a gap inside its
    range), is refused with the message naming the first bad entry, and no kernel
    runs."""
    model = by_name("position-match-transformer").build(8).model
    rng = np.random.default_rng(3)
    toks = np.concatenate([np.zeros((40, 1), np.int64), rng.integers(0, 2, (40, 10)) + number_token(0)], axis=1)
    assert LN.choose_block(model, toks, np.full(40, 11, np.int64), False, "table") > 0

    def boom(*a, **k):
        raise AssertionError("a kernel ran on invalid input")
    monkeypatch.setattr(LN, "forward_lanes", boom)
    monkeypatch.setattr(BT, "forward_batch", boom)
    gap = next(t for t in range(int(model.candidates.max())) if t not in set(model.candidates.tolist()))
    for bad in (int(model.candidates.max()) + 1, -1, gap):
        t = toks.copy()
        t[17, 5] = bad
        t[30, 2] = bad
        with pytest.raises(ValueError, match=rf"batch\[17\] token id {bad} at position 5 is not in the vocabulary"):
            model.predict_batch(t, share_prefix=False)
    monkeypatch.undo()
    assert model.predict_batch(toks, share_prefix=False).shape == (40,)


def test_choose_block_leaves_long_rows_and_long_shared_prefixes_to_the_per_row_path():
    model = by_name("previous-token-transformer").build(600).model
    rng = np.random.default_rng(11)
    toks = np.concatenate([np.zeros((64, 1), np.int64), rng.integers(0, 2, (64, 299)) + number_token(0)], axis=1)
    lengths = np.full(64, 300, np.int64)
    assert LN.choose_block(model, toks, lengths, False, "table") == 0          # rows of 300 > LANES_MAX_N
    short = np.ascontiguousarray(toks[:, :40])
    lengths = np.full(64, 40, np.int64)
    assert LN.choose_block(model, short, lengths, False, "table") > 0
    same = np.repeat(short[:1], 64, axis=0)
    same[:, -1] = number_token(0) + (np.arange(64) % 2)                        # rows differ at the end only
    assert LN.shared_steps(same, lengths) == 40 + 63
    assert LN.choose_block(model, same, lengths, True, "table") == 0          # sharing runs far fewer steps
    assert LN.choose_block(model, same, lengths, False, "table") > 0
    assert LN.choose_block(model, short, np.array([40, 39] * 32), False, "table") == 0   # no equal-length runs


def test_exp_table_holds_the_exps():
    """The memo the lanes fill equals exp_raw at every gap they used."""
    model, toks, lengths = _mixed_block()
    f = model.fmt.frac_bits
    _lanes(model, toks, lengths, True, False, K.READOUT_TABLE, 64)
    tab = LN.exp_table(f)
    assert len(tab) == -exp_zero_threshold(f) + 1
    used = np.flatnonzero(tab >= 0)
    assert len(used) > 0
    for r in used:
        e = new_err()
        assert tab[r] == exp_raw(-int(r), 1, f, 0, e) and e[E_CODE] == 0


# ---------------------------------------------------------------------------- NUMBA_DISABLE_JIT=1
def fingerprint(seed: int) -> dict:
    """forward_lanes and forward_batch_plain on small equal-length batches of the
    SMALL models at their format and one integer bit below what they use (raise
    and saturate), blocks of 3."""
    out = {}
    for i, name in enumerate(SMALL):
        rng = np.random.default_rng(seed + i)
        base = by_name(name).build(N_BUILD).model
        toks, lengths = _equal_batch(base, rng, 5, 7)
        _, err, _ = _run(BT.forward_batch_plain, base, toks, lengths, True, False, K.READOUT_TABLE)
        used = base.fmt.used_int_bits(np.array(err))
        runs = []
        for fmt in (base.fmt, FixedFormat(max(1, used - 1), base.fmt.frac_bits),
                    FixedFormat(max(1, used - 1), base.fmt.frac_bits, "saturate")):
            m = base.with_format(fmt)
            runs.append(list(_lanes(m, toks, lengths, True, False, K.READOUT_TABLE, 3)))
            runs.append(_run(BT.forward_batch_plain, m, toks, lengths, True, False, K.READOUT_TABLE))
        out[name] = runs
    return out


def test_pure_python_path_is_identical_to_the_jit():
    from _nojit import fingerprint_without_jit
    seed = 5151
    jit = fingerprint(seed)
    assert json.loads(json.dumps(jit)) == fingerprint_without_jit(__file__, seed)
    for runs in jit.values():
        assert all(runs[k][0] == runs[k + 1] for k in range(0, len(runs), 2))   # lanes == plain
    assert any(r[1] > 0 for runs in jit.values() for r in runs[0::2])         # the lanes settled rows
    assert any(r[1][E_CODE] for runs in jit.values() for r in runs[1::2])     # an overflow ran
    assert any(r[1][E_SAT] for runs in jit.values() for r in runs[1::2])      # a clamp ran


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
