"""The two-limb executor (constructions/machine/wide_exec.py) against the int64 executor.

On formats both hold (I + f <= 62) the two executors must compute the same
numbers: every catalogue model, at its own format, below what a run used (raise:
overflows; saturate: clamps) and at random formats, gives the same predictions,
the same error array (first error, its need and position, largest |raw|,
saturations) and the same failing row on ``batch.forward_batch_plain`` and
``wide_exec.w_forward`` (with and without shared prefixes); sessions give the same tokens, residuals and attention
weights. Past int64 (I + f > 62, values above 2^63 really used) the models must
still answer every instance as the reference does; FixedFormat's storage rules;
and NUMBA_DISABLE_JIT gives the same results. Run as a script (``python
tests/test_wide_exec.py SEED``) it prints the fingerprint the subprocess compares.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.models import retrieval as R
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine import wide_attention as WA
from rnngap.constructions.machine.fixedpoint import E_CODE, E_SAT, FixedPointOverflow, max_abs_raw, new_err
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, QUERY

from test_step_fastpath import N_BUILD, _batch, _formats


def _int64_run(model, toks, lengths, all_positions, ro, share=False):
    preds = np.full(toks.shape, -1, np.int64)
    err = new_err()
    loc = np.full(2, -1, np.int64)
    BT.forward_batch_plain(toks, lengths, all_positions, share, ro, *model.fmt.args, err, loc, model.weights, preds)
    return preds, err, loc


def _wide_run(model, toks, lengths, all_positions, ro, share=False, prune=True):
    preds = np.full(toks.shape, -1, np.int64)
    err = WD.new_wide_err()
    loc = np.full(2, -1, np.int64)
    r = model.weights.readout
    WX.w_forward(toks, lengths, all_positions, share, ro == K.READOUT_NEAREST_CODE, prune, *model.fmt.args, err, loc,
                 *model.weights.net, r.out_dim, r.out_kind, r.out_param, r.out_coef, r.candidates, r.nearest, preds)
    return preds, err, loc


def _same(a, b, what):
    (pa, ea, la), (pb, eb, lb) = a, b
    assert eb[WD.E_MAXABS_HI] == 0, what                # every value of an int64 format is below 2^63
    if ea[E_CODE] == 0:
        assert pa.tolist() == pb.tolist(), what
        assert ea.tolist() == eb[:len(ea)].tolist(), what
    else:
        # the first error (code, operation, need), its row and position; what a
        # row computes after its first error is not part of the contract
        assert ea[:3].tolist() == eb[:3].tolist() and la.tolist() == lb.tolist(), what
        done = lb[0]
        assert pa[:done].tolist() == pb[:done].tolist(), what


def _compare(name, seed, rows=8, max_len=20):
    rng = np.random.default_rng(seed)
    entry = by_name(name)
    base = entry.build(N_BUILD).model
    toks, lengths = _batch(base, rng, rows, max_len, entry)
    _, err, _ = _int64_run(base, toks, lengths, True, K.READOUT_TABLE)
    used = base.fmt.used_int_bits(err)
    stats = {"runs": 0, "errors": 0, "saturated": 0}
    for I, f, mode in _formats(base, used, rng)[:6]:
        try:
            narrow = base.with_format(FixedFormat(I, f, mode))
            wide = base.with_format(FixedFormat(I, f, mode, storage="two-limb"))
        except (ValueError, OverflowError, ArithmeticError):
            continue                                    # a weight does not fit this format
        readouts = [K.READOUT_TABLE] + ([K.READOUT_NEAREST_CODE] if narrow.nearest_code_dim >= 0 else [])
        for all_positions, share, ro in itertools.product((False, True), (False, True), readouts):
            a = _int64_run(narrow, toks, lengths, all_positions, ro, share)
            b = _wide_run(wide, toks, lengths, all_positions, ro, share)
            _same(a, b, (name, I, f, mode, all_positions, share, ro))
            stats["runs"] += 1
            stats["errors"] += a[1][E_CODE] != 0
            stats["saturated"] += a[1][E_SAT] > 0
    return stats


@pytest.mark.parametrize("name", names())
def test_two_limb_executor_equals_int64_on_every_catalogue_model(name):
    stats = _compare(name, 3000 + names().index(name))
    assert stats["runs"] >= 4, stats


def test_the_comparison_hits_overflow_and_saturation():
    """Not vacuous: among the small models' runs some overflow and some clamp."""
    total = {"runs": 0, "errors": 0, "saturated": 0}
    for i, name in enumerate(("position-match-transformer", "index-hybrid", "counting-transformer")):
        for k, v in _compare(name, 4000 + i).items():
            total[k] += v
    assert total["errors"] > 0 and total["saturated"] > 0, total


@pytest.mark.parametrize("name", ["counting-transformer", "index-hybrid", "position-match-transformer"])
def test_sessions_agree(name):
    """Sessions (feed in chunks, next token, residual, recorded attention) on both storages."""
    rng = np.random.default_rng(7)
    entry = by_name(name)
    base = entry.build(N_BUILD).model
    wide = base.with_format(base.fmt.with_bits(storage="two-limb"))
    for _ in range(3):
        prompt = entry.example(N_BUILD, rng)
        sa, sb = base.session(record=True), wide.session(capacity=2, record=True)    # the wide one grows
        for k in range(0, len(prompt), 3):
            sa.feed(prompt[k:k + 3])
            sb.feed(prompt[k:k + 3])
            assert sa.next_token() == sb.next_token()
            assert sa.residual() == sb.residual()
            if base.spec.attn_layers:
                assert sa.attention().tolist() == sb.attention().tolist()
        assert max_abs_raw(sa.err) == max_abs_raw(sb.err)
    assert base.resources.used_int_bits == wide.resources.used_int_bits


# ---------------------------------------------------------------------------- past int64
def _counting_rows(n, rng, count):
    """Counting prompts [BOS] x [QUERY] q t at alphabet 3 with their answers."""
    rows, want = [], []
    for _ in range(count):
        x = rng.integers(0, 3, size=n)
        q, t = int(x[rng.integers(n)]), int(rng.integers(0, n))
        rows.append([BOS] + [int(v) + NUMBER_BASE for v in x] + [QUERY, q + NUMBER_BASE, t + NUMBER_BASE])
        want.append(NUMBER_BASE + int(int((x == q).sum()) > t))
    return np.array(rows), np.array(want)


@pytest.mark.parametrize("I,f,big", [(20, 56, True), (60, 8, False), (64, 54, True), (20, 60, True), (26, 100, True)])
def test_counting_past_int64_answers_every_instance(I, f, big):
    """Counting (n = 6) at formats past int64: the answers are the reference's.
    With many fraction bits raws above 2^63 are really computed (``big``: the used
    bits pass 62); at Q60.8 the values stay small (the high limbs stay 0). Q20.60
    and Q26.100: past f = 56 (the exp in 210-bit fixed point, two-limb weights)."""
    n = 6
    m = R.counting_transformer(n, alphabet=3, fmt=FixedFormat(I, f, storage="two-limb"))
    rng = np.random.default_rng(I + f)
    toks, want = _counting_rows(n, rng, 40)
    assert m.predict_batch(toks).tolist() == want.tolist()
    assert (m.resources.used_int_bits + f > 62) == big
    s = m.session()
    s.feed(toks[0].tolist())
    assert s.next_token() == want[0]


def test_two_limb_overflow_is_reported():
    """Past int64 the range checks still bite: Counting re-encoded at Q10.56
    overflows (its scores need more than 10 integer bits), raising with the bits
    it needed."""
    m = R.counting_transformer(6, alphabet=3, fmt=FixedFormat(20, 56, storage="two-limb"))
    m = m.with_format(FixedFormat(10, 56, storage="two-limb"))
    toks, _ = _counting_rows(6, np.random.default_rng(1), 4)
    with pytest.raises(FixedPointOverflow) as e:
        m.predict_batch(toks)
    assert e.value.needed_int_bits > 10


def test_counting_runs_past_its_int64_limit():
    """Counting at n = COUNTING_MAX_N + 1 (alphabet n + 1) is built in two-limb
    storage at its declared format and answers a reduction-style instance (every
    data mark distinct, the query's count compared with t = 0 and t = 1)."""
    n = R.COUNTING_MAX_N + 1
    m = R.counting_transformer(n, alphabet=n + 1)
    assert m.fmt.wide and m.fmt.int_bits + m.fmt.frac_bits > 62
    assert (m.fmt.int_bits, m.fmt.frac_bits) == (R.COUNTING.int_bits(n, n + 1), R.COUNTING.frac_bits(n))
    x = np.arange(n) % (n + 1)
    q = 5
    rows = [[BOS] + [int(v) + NUMBER_BASE for v in x] + [QUERY, q + NUMBER_BASE, t + NUMBER_BASE] for t in (0, 1)]
    assert m.predict_batch(np.array(rows)).tolist() == [NUMBER_BASE + 1, NUMBER_BASE + 0]
    assert m.resources.used_int_bits <= m.fmt.int_bits     # (the values here still fit 62 bits; the format not)


def test_counting_refuses_past_the_two_limb_executor():
    lim = R.COUNTING_WIDE_MAX_N
    assert lim > 2 ** 20
    with pytest.raises(ValueError, match=f"largest n at alphabet n \\+ 1 is {lim}"):
        R.counting_transformer(lim + 1, alphabet=lim + 2)


# ---------------------------------------------------------------------------- pruned attention
def _pruned_vs_plain(m, toks, all_positions=False):
    L = np.full(len(toks), toks.shape[1], np.int64)
    a = _wide_run(m, toks, L, all_positions, K.READOUT_TABLE, True, True)
    b = _wide_run(m, toks, L, all_positions, K.READOUT_TABLE, True, False)
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist() and a[2].tolist() == b[2].tolist()
    return a


@pytest.mark.parametrize("n,fmt", [(300, None), (700, (40, 23)), (1500, (60, 50)), (600, "narrow")])
def test_pruned_attention_equals_every_key_scored(n, fmt):
    """w_scores_pruned against scoring every key, on Counting rows of n >= 256
    tokens (its after-query and fetch heads prune: most blocks are skipped): the
    same predictions at every position and the same error array (largest |raw|
    included), at the declared format, at formats with raws past 2^63, and at a
    format too narrow for the scores (the safety check falls back and the run
    overflows exactly as without pruning)."""
    m = R.counting_transformer(n, alphabet=n + 1)
    if fmt == "narrow":                                   # the declared weights, one bit below what they use
        m = m.with_format(FixedFormat(m.fmt.int_bits, m.fmt.frac_bits, storage="two-limb"))
        m.predict_batch(np.array([[BOS] + [NUMBER_BASE + (v % n) for v in range(n)] + [QUERY, NUMBER_BASE, NUMBER_BASE]]))
        m = m.with_format(FixedFormat(m.resources.used_int_bits - 1, m.fmt.frac_bits, storage="two-limb"))
    else:                                                 # built at the format (lambda grows with f)
        m = R.counting_transformer(n, alphabet=n + 1, fmt=FixedFormat(*(fmt or (m.fmt.int_bits, m.fmt.frac_bits)),
                                                                      storage="two-limb"))
    rng = np.random.default_rng(n)
    x = rng.permutation(n)
    toks = np.array([[BOS] + [int(v) + NUMBER_BASE for v in x] + [QUERY, int(x[7]) + NUMBER_BASE, t + NUMBER_BASE]
                     for t in (0, 1)])
    preds, err, _ = _pruned_vs_plain(m, toks, all_positions=True)
    if fmt == "narrow":
        assert err[E_CODE] != 0                           # the narrow format overflows, pruned or not
    else:
        assert err[E_CODE] == 0 and preds[:, -1].tolist() == [NUMBER_BASE + 1, NUMBER_BASE + 0]


def test_pruned_attention_on_adversarial_keys():
    """Random wide keys and queries against scoring every key: blocks whose scores
    are far below the maximum are skipped, blocks whose partial sums are the
    largest magnitudes are revisited for the meter, keys near the range's edge
    make the safety check fall back: M, the output and the error array agree."""
    rng = np.random.default_rng(11)
    outcomes = set()
    for trial in range(60):
        I, f = int(rng.integers(30, 70)), int(rng.integers(4, 40))
        m, Dh, d = int(rng.integers(256, 2000)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
        scale = int(rng.integers(10, I + f - 2))
        K_ = rng.integers(-(1 << 20), 1 << 20, size=(m, Dh)).astype(object) * (1 << max(0, scale - 20))
        K_[rng.random((m, Dh)) < 0.2] = 0
        if trial % 3 == 0:                                # a peaked head: one far larger key
            K_[int(rng.integers(m)), 0] = (1 << scale)
        if trial % 5 == 1:                                # very negative partial sums far from the max
            K_[rng.integers(0, m, 5), 0] = -(1 << (I + f - 3))
        q = [int(v) for v in rng.integers(-(1 << 12), 1 << 12, size=Dh)]
        Kw = np.array([[WD.to_limbs(int(v)) for v in row] for row in K_], np.int64)
        V = np.array([[WD.to_limbs(int(v)) for v in row] for row in rng.integers(-1000, 1000, size=(m, d))], np.int64)
        qw = np.array([WD.to_limbs(v) for v in q], np.int64)
        KmE, LB, SB, mark, vis, dfr, qf, idx = WA.prune_arrays(1, 1, m, Dh, True)
        for t in range(m):
            WA.w_store_bounds(Kw[t], t, KmE[0, 0], LB[0, 0], SB[0, 0])
        scr = np.zeros(WX.SCRATCH_LEN, np.int64)
        qnz = np.zeros(Dh, np.int64)
        e1, e2 = WD.new_wide_err(), WD.new_wide_err()
        s1, s2 = np.zeros((m, 2), np.int64), np.zeros((m, 2), np.int64)
        ok, Mh, Ml, nv = WA.w_scores_pruned(qw, Kw, KmE[0, 0], LB[0, 0], SB[0, 0], m, I, f, 0, e1, scr, qnz, s1,
                                            mark, vis, dfr, qf)
        Ph, Pl = WA.w_scores(qw, Kw, m, I, f, 0, e2, scr, qnz, s2)
        if not ok:
            outcomes.add("fallback")
            continue
        assert (Mh, Ml) == (Ph, Pl) and e1.tolist() == e2.tolist(), trial
        n = 0
        for b in vis[:nv]:
            for j in range(b << WA.LEAF_LOG, min(m, (b + 1) << WA.LEAF_LOG)):
                idx[n] = j
                n += 1
        outcomes.add("pruned" if n < m else "every block")
        o1, o2 = np.zeros((d, 2), np.int64), np.zeros((d, 2), np.int64)
        acc = np.zeros((2 * d, 3), np.int64)
        x1, x2 = np.zeros(6, np.int64), np.zeros(6, np.int64)
        WA.w_attend(s1, Mh, Ml, m, V, I, f, 0, e1, x1, scr, np.zeros((m, 2), np.int64), acc, o1, idx, n)
        WA.w_attend(s2, Ph, Pl, m, V, I, f, 0, e2, x2, scr, np.zeros((m, 2), np.int64), acc, o2, idx, -1)
        assert o1.tolist() == o2.tolist() and e1.tolist() == e2.tolist(), trial
    assert {"pruned", "fallback"} <= outcomes, outcomes


def _pruned_and_full(K_, q, V_, I, f, mode):
    """(pruned (ok, M, output, err), full (M, output, err)) of one head."""
    m, Dh = len(K_), len(q)
    Kw = np.array([[WD.to_limbs(v) for v in row] for row in K_], np.int64)
    V = np.array([[WD.to_limbs(v) for v in row] for row in V_], np.int64)
    qw = np.array([WD.to_limbs(v) for v in q], np.int64)
    KmE, LB, SB, mark, vis, dfr, qf, idx = WA.prune_arrays(1, 1, m, Dh, True)
    for t in range(m):
        WA.w_store_bounds(Kw[t], t, KmE[0, 0], LB[0, 0], SB[0, 0])
    scr, qnz = np.zeros(WX.SCRATCH_LEN, np.int64), np.zeros(Dh, np.int64)
    out = []
    for prune in (True, False):
        err, s_ = WD.new_wide_err(), np.zeros((m, 2), np.int64)
        n = -1
        if prune:
            ok, Mh, Ml, nv = WA.w_scores_pruned(qw, Kw, KmE[0, 0], LB[0, 0], SB[0, 0], m, I, f, mode, err, scr, qnz,
                                                s_, mark, vis, dfr, qf)
            if not ok:
                err, s_ = WD.new_wide_err(), np.zeros((m, 2), np.int64)
                Mh, Ml = WA.w_scores(qw, Kw, m, I, f, mode, err, scr, qnz, s_)
            else:
                n = 0
                for b in vis[:nv]:
                    for j in range(b << WA.LEAF_LOG, min(m, (b + 1) << WA.LEAF_LOG)):
                        idx[n] = j
                        n += 1
        else:
            Mh, Ml = WA.w_scores(qw, Kw, m, I, f, mode, err, scr, qnz, s_)
        o = np.zeros((V.shape[1], 2), np.int64)
        WA.w_attend(s_, Mh, Ml, m, V, I, f, mode, err, np.zeros(6, np.int64), scr, np.zeros((m, 2), np.int64),
                    np.zeros((2 * V.shape[1], 3), np.int64), o, idx, n)
        out.append(((int(Mh), int(Ml)), o.tolist(), err.tolist()))
    return out


@pytest.mark.parametrize("mode", [0, 1])
def test_pruned_attention_past_f56(mode):
    """Block pruning at f = 86 (its zero threshold, (f + 1) ln 2 2^f, past int64 in
    float64): keys rising with the position (a shift head's), so the early blocks
    are skipped; the same M, output and errors as scoring every key."""
    I, f, m = 36, 86, 700
    rng = np.random.default_rng(86 + mode)
    K_ = [[(j + int(rng.integers(0, 3))) << f, int(rng.integers(-5, 5)) << f] for j in range(m)]
    q = [1 << f, 1 << (f - 2)]
    V_ = [[int(v) << f] for v in rng.integers(-1000, 1000, size=m)]
    a, b = _pruned_and_full(K_, q, V_, I, f, mode)
    assert a == b
    Kw = np.array([[WD.to_limbs(v) for v in row] for row in K_], np.int64)
    KmE, LB, SB, mark, vis, dfr, qf, idx = WA.prune_arrays(1, 1, m, 2, True)
    for t in range(m):
        WA.w_store_bounds(Kw[t], t, KmE[0, 0], LB[0, 0], SB[0, 0])
    ok, Mh, Ml, nv = WA.w_scores_pruned(np.array([WD.to_limbs(v) for v in q], np.int64), Kw, KmE[0, 0], LB[0, 0],
                                        SB[0, 0], m, I, f, mode, WD.new_wide_err(), np.zeros(WX.SCRATCH_LEN, np.int64),
                                        np.zeros(2, np.int64), np.zeros((m, 2), np.int64), mark, vis, dfr, qf)
    assert ok and 0 < nv < (m >> WA.LEAF_LOG)              # blocks were skipped


@pytest.mark.parametrize("mode", [0, 1])
def test_pruned_attention_at_126_bits(mode):
    """At I + f = 126 the safety check applies too (a review found it skipped
    there): partial sums that pass 2^126 and clamp, or a product that overflows
    after a key where a sum did, give the full path's M, output and errors."""
    I, f, m = 118, 8, 256                   # keys 64..127: partial sums past 2^126 (clamped in saturate mode)
    K_ = [[-(1 << 100), 0, 0, 0] for _ in range(m)]
    K_[0] = [0, 0, 0, 0]
    for p in range(64, 128):
        K_[p] = [-((1 << 125) + (1 << 124)), -(1 << 125), (1 << 125) + (1 << 124), (1 << 124) + 5]
    a, b = _pruned_and_full(K_, [256] * 4, [[j << 8] for j in range(m)], I, f, mode)
    assert a == b
    K_ = [[1 << 60] for _ in range(300)]    # Q70.56: the largest product overflows after an earlier overflow
    K_[5], K_[200] = [1 << 100], [1 << 125]
    a, b = _pruned_and_full(K_, [1 << 100], [[1] for _ in range(300)], 70, 56, mode)
    assert a == b


def test_pruned_sessions_agree_with_recorded_ones():
    """A session without recording prunes; one recording every weight scores every
    key: the hybrid IsTree's CoT (over 256 positions) and the largest |raw| agree."""
    from rnngap.checks.io.formats import graph_tokens
    from rnngap.checks.tasks import istree
    from rnngap.constructions.models import hybrid as H
    from rnngap.constructions.build.generate import generate
    from rnngap.constructions.machine.vocab import FALSE, TRUE
    N = 40
    fmt = H.ISTREE.format(N)
    m = H.istree_hybrid(N, fmt=FixedFormat(fmt.int_bits, fmt.frac_bits, storage="two-limb"))
    for inst in istree.generate(np.random.default_rng(3), N, 2, family="tree"):
        prompt = graph_tokens(inst.edges)
        ma, mb = m.fresh(), m.fresh()
        ga = generate(ma, prompt, answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
        gb = generate(mb, prompt, answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N), record=True)
        assert ga.cot == gb.cot and ga.answer == gb.answer == inst.answer and len(prompt) + len(ga.cot) > 256
        assert max_abs_raw(ma.err) == max_abs_raw(mb.err) and ma.err[E_SAT] == mb.err[E_SAT] == 0


# ---------------------------------------------------------------------------- formats
def test_storage_rules():
    with pytest.raises(ValueError, match="storage='two-limb'"):
        FixedFormat(40, 30)
    with pytest.raises(ValueError, match="exceeds 126"):
        FixedFormat(70, 57, storage="two-limb")
    with pytest.raises(ValueError, match="storage must be"):
        FixedFormat(4, 4, storage="int128")
    w = FixedFormat(40, 30, storage="two-limb")
    assert w.wide and w.name == "Q40.30[2x64]" and w.with_bits(frac_bits=20).wide
    assert not FixedFormat(4, 4).wide and FixedFormat(4, 4).name == "Q4.4"
    raws = w.encode_array(np.array([[3, -5], [0, 2 ** 39]], dtype=object))
    assert raws.shape == (2, 2, 2)
    assert [WD.from_limbs(*raws[i, j]) for i in range(2) for j in range(2)] == [3 << 30, -5 << 30, 0, 1 << 69]
    a, b = w.encode(2 ** 20 + 3), w.encode(-(2 ** 18))
    assert w.mul(a, b) == (2 ** 20 + 3) * -(2 ** 18) << 30
    with pytest.raises(FixedPointOverflow):
        w.mul(w.encode(2 ** 30), w.encode(2 ** 30))


# ---------------------------------------------------------------------------- NUMBA_DISABLE_JIT
def fingerprint(seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for I, f in ((12, 8), (20, 56), (70, 20), (20, 90)):
        m = R.counting_transformer(4, alphabet=3, fmt=FixedFormat(I, f, storage="two-limb"))
        toks, _ = _counting_rows(4, rng, 6)
        preds, err, loc = _wide_run(m, toks, np.full(len(toks), toks.shape[1], np.int64), True, K.READOUT_TABLE)
        out.append([preds.tolist(), err.tolist(), loc.tolist()])
    return out


def test_no_jit_gives_the_same_results():
    from _nojit import fingerprint_without_jit
    assert fingerprint_without_jit(__file__, 5) == fingerprint(5)


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
