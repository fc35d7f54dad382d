"""The two-limb executor: a model's step, batch loop and readouts on wide raws
(constructions/machine/wide.py), for formats stored in two limbs (``FixedFormat(...,
storage="two-limb")``, needed when I + f > 62; any format may use it).

Every function computes exactly the numbers of the plain int64 definition in
constructions/machine/kernels.py, with the operations of wide.py in place of fx_*: the
same operations in the same order, the same first error and the same largest
|raw|. Weights, residual, RNN state and KV cache are int64 arrays with a trailing
axis of 2 (hi, lo). Prefix sharing, pruned attention, the key-value index and the
quadratic readout are here too, all exact. tests/test_wide_exec.py compares both
executors bit for bit on every catalogue model.

Details (wide arrays, the shortcuts, exp past f = 56):
docs/internals/machine.md#wide_exec
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, E_SAT, E_WHERE, ERR_LEN, ERR_OVERFLOW, MODE_SATURATE, OP_ADD,
    mul_limbs, record_error,
)
from .kernels import (
    F_IS_NUM, F_IS_TOKEN, F_ONE, F_POS, F_POS_INV, F_POS_SQ, F_TOK, F_TOK_INV, F_TOK_SQ, F_ZERO, tok_code,
)
from .readouts import QUAD_MIN_CANDIDATES, code_rank, nearest_ids
from .vocab import NUMBER_BASE
from .wide import (
    M63,
    PRODUCT_COLUMNS, QUOTIENT_PIECES, E_MAXABS_HI, magnitude_bits, sign_magnitude, max_raw_limbs, signed_limbs, track_maxabs, w_add, w_div, w_fit, w_mul, w_relu,
)
from .wide_attention import IX_CALLS, IX_FAILS, IX_KEYS, IX_NOT_OK, IX_PAUSE, IX_PAUSE_STEPS, IX_SCORED, IX_USE, LEAF_LOG, PRUNE_MIN_KEYS, limbs_float, no_index_arrays, prune_arrays, w_attend, w_attend_groups, w_index_scores, w_scores, w_scores_pruned, w_store_bounds


SCRATCH_LEN = PRODUCT_COLUMNS + QUOTIENT_PIECES       # wide.new_scratch's length (w_mul's columns and quotient pieces)


# ---------------------------------------------------------------------------- integers and features
@njit(cache=True)
def w_int(v, I, f, mode, err):
    """The raw of the int64 integer v, range-checked as kernels.int_raw."""
    neg = v < 0
    m = -v if neg else v
    return _int_mag(neg, np.int64(0), m, I, f, mode, err)


@njit(cache=True)
def _int_mag(neg, mh, ml, I, f, mode, err):
    """The raw of the integer +-(mh 2^63 + ml): an integer of 2^I or more is an
    overflow of the encoding (need = its bit length; the clamp is not metered, as
    kernels.int_raw); otherwise shifted by f and fitted."""
    b = magnitude_bits(mh, ml)
    if b > I:
        if mode == MODE_SATURATE:
            err[E_SAT] += 1
        else:
            record_error(err, ERR_OVERFLOW, OP_ADD, b)
        lh, ll = max_raw_limbs(I, f)
        return signed_limbs(neg, lh, ll)
    s = f
    if s == 0:
        h, l = mh, ml
    elif s >= 63:                       # b + s <= 126: mh = 0 and ml < 2^(126 - s)
        h, l = ml << (s - 63), np.int64(0)
    else:
        h = (mh << s) | (ml >> (63 - s))
        l = (ml << s) & M63
    hh, ll2 = signed_limbs(neg, h, l)
    return w_fit(hh, ll2, I, f, mode, OP_ADD, err)


@njit(cache=True)
def _int_sq(v, I, f, mode, err):
    """The raw of v^2 (|v| < 2^62), exact in two limbs."""
    m = -v if v < 0 else v
    hi, lo = mul_limbs(m, m)            # m^2 = hi 2^62 + lo
    return _int_mag(False, hi >> 1, ((hi & 1) << 62) | lo, I, f, mode, err)


@njit(cache=True)
def w_feature(kind, ph, pl, tok, pos, I, f, mode, err):
    """kernels.feature_raw on wide raws (``ph, pl``: the offset of a 1/(.+c) feature)."""
    if kind == F_ZERO:
        return np.int64(0), np.int64(0)
    if kind == F_ONE:
        return w_int(np.int64(1), I, f, mode, err)
    if kind == F_TOK:
        return w_int(tok_code(tok), I, f, mode, err)
    if kind == F_TOK_SQ:
        return _int_sq(tok_code(tok), I, f, mode, err)
    if kind == F_IS_TOKEN:
        return w_int(np.int64(1 if tok == pl else 0), I, f, mode, err)
    if kind == F_IS_NUM:
        return w_int(np.int64(1 if tok >= NUMBER_BASE else 0), I, f, mode, err)
    if kind == F_TOK_INV:
        ch, cl = w_int(tok_code(tok), I, f, mode, err)
        dh, dl = w_add(ch, cl, ph, pl, I, f, mode, err)
        oh, ol = w_int(np.int64(1), I, f, mode, err)
        return w_div(oh, ol, dh, dl, I, f, mode, err)
    if kind == F_POS:
        return w_int(pos, I, f, mode, err)
    if kind == F_POS_SQ:
        return _int_sq(pos, I, f, mode, err)
    if kind == F_POS_INV:
        ch, cl = w_int(pos, I, f, mode, err)
        dh, dl = w_add(ch, cl, ph, pl, I, f, mode, err)
        oh, ol = w_int(np.int64(1), I, f, mode, err)
        return w_div(oh, ol, dh, dl, I, f, mode, err)
    return np.int64(0), np.int64(0)


@njit(cache=True)
def w_embed(tok, pos, ekind, eparam, ecoef, I, f, mode, err, scr, x):
    """x = the embedding of ``tok`` at ``pos`` (kernels._embed)."""
    for d in range(x.shape[0]):
        k = ekind[d]
        if k == F_ZERO or (ecoef[d, 0] == 0 and ecoef[d, 1] == 0):
            x[d, 0] = 0
            x[d, 1] = 0
        else:
            vh, vl = w_feature(k, eparam[d, 0], eparam[d, 1], tok, pos, I, f, mode, err)
            x[d, 0], x[d, 1] = w_mul(ecoef[d, 0], ecoef[d, 1], vh, vl, I, f, mode, err, scr)


# ---------------------------------------------------------------------------- layers
@njit(cache=True)
def w_matvec(W, x, I, f, mode, err, scr, out):
    """out = W x (kernels.matvec: products rounded, partial sums checked in column
    order, zero terms skipped)."""
    rows, cols = W.shape[0], W.shape[1]
    for r in range(rows):
        ah, al = np.int64(0), np.int64(0)
        for c in range(cols):
            wh, wl = W[r, c, 0], W[r, c, 1]
            if wh != 0 or wl != 0:
                xh, xl = x[c, 0], x[c, 1]
                if xh != 0 or xl != 0:
                    ph, pl = w_mul(wh, wl, xh, xl, I, f, mode, err, scr)
                    ah, al = w_add(ah, al, ph, pl, I, f, mode, err)
        out[r, 0] = ah
        out[r, 1] = al


@njit(cache=True)
def w_mlp_residual(W1, b1, W2, b2, x, I, f, mode, err, scr, hidden, tmp):
    """x += W2 relu(W1 x + b1) + b2 (kernels._mlp_residual_metered: a zero added
    to x[d] is skipped)."""
    w_matvec(W1, x, I, f, mode, err, scr, hidden)
    for m in range(hidden.shape[0]):
        hh, hl = w_add(hidden[m, 0], hidden[m, 1], b1[m, 0], b1[m, 1], I, f, mode, err)
        hidden[m, 0], hidden[m, 1] = w_relu(hh, hl)
    w_matvec(W2, hidden, I, f, mode, err, scr, tmp)
    for d in range(x.shape[0]):
        if tmp[d, 0] != 0 or tmp[d, 1] != 0 or b2[d, 0] != 0 or b2[d, 1] != 0:
            sh, sl = w_add(tmp[d, 0], tmp[d, 1], b2[d, 0], b2[d, 1], I, f, mode, err)
            x[d, 0], x[d, 1] = w_add(x[d, 0], x[d, 1], sh, sl, I, f, mode, err)


@njit(cache=True, inline='always')
def _add_into(x, d, yh, yl, I, f, mode, err):
    if yh != 0 or yl != 0:
        x[d, 0], x[d, 1] = w_add(x[d, 0], x[d, 1], yh, yl, I, f, mode, err)


@njit(cache=True)
def _step_scratch(D, S, Mr, Dh, Ma):
    """(ws, scr, e2, acc, qnz): the scratch of :func:`w_step`."""
    return (np.zeros((workspace_rows(D, S, Mr, Dh, Ma), 2), np.int64), np.zeros(SCRATCH_LEN, np.int64),
            np.zeros(ERR_LEN, np.int64), np.zeros((2 * max(Dh, 1), 3), np.int64), np.zeros(max(Dh, 1), np.int64))


# ---------------------------------------------------------------------------- the step
@njit(cache=True)
def w_step(tok, t, I, f, mode, err, ekind, eparam, ecoef,
           rA, rB, rC, rW1, rb1, rW2, rb2, rnn_state,
           aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Vc,
           x, scores, wbuf, record, attn_rec, need_output, ws, scr, e2, acc, qnz,
           prune, KmE, LB, SB, mark, vis, dfr, qf, idx, Ksh, Kix, ist, stk, stf, nb, gs, gc):
    """kernels._step on wide raws (the KV cache row-major: Kc[l, h, t] is key t).
    ``ws``: wide scratch (:func:`workspace_rows` rows); ``scr``, ``e2``, ``acc``,
    ``qnz``: the scratch of w_mul, of exp, of the softmax sums and of the scores.
    ``prune`` (never with ``record``): keep the bounds of :func:`w_store_bounds`
    in KmE, LB, SB and attend with :func:`w_scores_pruned` over
    PRUNE_MIN_KEYS keys or more (``mark``, ``vis``, ``dfr``, ``qf``, ``idx``: its
    scratch, :func:`prune_arrays`). ``Ksh``, ``Kix``, ``ist``, ``stk``, ``stf``,
    ``nb`` (:func:`index_arrays`; empty: no index): a head whose block pruning
    keeps over a quarter of the keys uses the key-value index
    (:func:`w_index_scores`) from its next step on, while the index scores at most
    a quarter of them; after an index step that scored more, the head prunes by
    blocks for IX_PAUSE_STEPS steps before it may try the index again. These
    choices decide only the order of work: the numbers and err are the same."""
    D = x.shape[0]
    w_embed(tok, t, ekind, eparam, ecoef, I, f, mode, err, scr, x)
    tmp = ws[0:D]
    Lr = rA.shape[0]
    if Lr > 0:
        S = rA.shape[1]
        ah = ws[D:D + S]
        bx = ws[D + S:D + 2 * S]
        hidden = ws[D + 2 * S:D + 2 * S + rW1.shape[1]]
        for l in range(Lr):
            w_matvec(rA[l], rnn_state[l], I, f, mode, err, scr, ah)
            w_matvec(rB[l], x, I, f, mode, err, scr, bx)
            for s in range(S):
                rnn_state[l, s, 0], rnn_state[l, s, 1] = w_add(ah[s, 0], ah[s, 1], bx[s, 0], bx[s, 1],
                                                               I, f, mode, err)
            w_matvec(rC[l], rnn_state[l], I, f, mode, err, scr, tmp)
            for d in range(D):
                _add_into(x, d, tmp[d, 0], tmp[d, 1], I, f, mode, err)
            w_mlp_residual(rW1[l], rb1[l], rW2[l], rb2[l], x, I, f, mode, err, scr, hidden, tmp)
    La = aWQ.shape[0]
    if La > 0:
        Dh = aWQ.shape[2]
        q = ws[D:D + Dh]
        o = ws[D + Dh:D + 2 * Dh]
        ho = ws[D + 2 * Dh:2 * D + 2 * Dh]
        sm = ws[2 * D + 2 * Dh:3 * D + 2 * Dh]
        Ma = aW1.shape[1]
        hidden = ws[3 * D + 2 * Dh:3 * D + 2 * Dh + Ma]
        for l in range(La):
            for d in range(D):
                sm[d, 0] = 0
                sm[d, 1] = 0
            if l == La - 1 and not need_output:
                for h in range(a_nheads[l]):
                    w_matvec(aWK[l, h], x, I, f, mode, err, scr, Kc[l, h, t])
                    if prune:
                        w_store_bounds(Kc[l, h, t], t, KmE[l, h], LB[l, h], SB[l, h])
                    w_matvec(aWV[l, h], x, I, f, mode, err, scr, Vc[l, h, t])
                return
            for h in range(a_nheads[l]):
                w_matvec(aWQ[l, h], x, I, f, mode, err, scr, q)
                w_matvec(aWK[l, h], x, I, f, mode, err, scr, Kc[l, h, t])
                if prune:
                    w_store_bounds(Kc[l, h, t], t, KmE[l, h], LB[l, h], SB[l, h])
                w_matvec(aWV[l, h], x, I, f, mode, err, scr, Vc[l, h, t])
                done = False
                if prune and t + 1 >= PRUNE_MIN_KEYS:
                    st = ist[l, h]
                    has_ix = Kix.shape[2] > 0
                    tried = has_ix and st[IX_USE] == 1
                    if tried:
                        ok, Mh, Ml, n, ng, scored = w_index_scores(q, Kc[l, h], KmE[l, h], Ksh[l, h], Kix[l, h],
                                                                   st, t + 1, I, f, mode, err, scr, qnz, scores, idx,
                                                                   stk, stf, nb, qf, gs, gc)
                        st[IX_CALLS] += 1
                        st[IX_SCORED] += scored
                        st[IX_KEYS] += t + 1
                        if ok:
                            w_attend_groups(scores, Mh, Ml, t + 1, Vc[l, h], I, f, mode, err, e2, scr, wbuf, acc, o,
                                            idx, n, gs, gc, ng)
                            done = True
                        if not ok:
                            st[IX_NOT_OK] += 1
                        if not ok or 4 * scored > t + 1:
                            st[IX_FAILS] += 1
                            st[IX_USE] = 0
                            st[IX_PAUSE] = IX_PAUSE_STEPS
                    if not done:
                        ok, Mh, Ml, nv = w_scores_pruned(q, Kc[l, h], KmE[l, h], LB[l, h], SB[l, h], t + 1, I, f,
                                                         mode, err, scr, qnz, scores, mark, vis, dfr, qf)
                        if ok:
                            n = 0
                            for i in range(nv):
                                b = vis[i]
                                for j in range(b << LEAF_LOG, min(t + 1, (b + 1) << LEAF_LOG)):
                                    idx[n] = j
                                    n += 1
                            w_attend(scores, Mh, Ml, t + 1, Vc[l, h], I, f, mode, err, e2, scr, wbuf, acc, o, idx, n)
                            done = True
                            if has_ix:
                                if st[IX_PAUSE] > 0:
                                    if not tried:     # the pause counts block-pruned steps after the failed one
                                        st[IX_PAUSE] -= 1
                                elif 4 * n > t + 1:
                                    st[IX_USE] = 1
                if not done:
                    Mh, Ml = w_scores(q, Kc[l, h], t + 1, I, f, mode, err, scr, qnz, scores)
                    w_attend(scores, Mh, Ml, t + 1, Vc[l, h], I, f, mode, err, e2, scr, wbuf, acc, o, idx, -1)
                if record:
                    for j in range(t + 1):
                        attn_rec[l, h, j, 0] = wbuf[j, 0]
                        attn_rec[l, h, j, 1] = wbuf[j, 1]
                w_matvec(aWO[l, h], o, I, f, mode, err, scr, ho)
                for d in range(D):
                    _add_into(sm, d, ho[d, 0], ho[d, 1], I, f, mode, err)
            for d in range(D):
                _add_into(x, d, sm[d, 0], sm[d, 1], I, f, mode, err)
            w_mlp_residual(aW1[l], ab1[l], aW2[l], ab2[l], x, I, f, mode, err, scr, hidden, tmp)


@njit(cache=True)
def workspace_rows(D, S, Mr, Dh, Ma):
    """Wide scratch rows :func:`w_step` needs (kernels.workspace_size's layout)."""
    return D + max(2 * S + Mr, 2 * D + 2 * Dh + Ma) + 1


# ---------------------------------------------------------------------------- readouts
@njit(cache=True)
def w_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err, scr):
    """readouts._readout: argmax over ``candidates`` (ascending ids) of
    sum_terms round(coef feat(k)) x[dim]; ties -> the smallest id."""
    best = candidates[0]
    bh, bl = np.int64(0), np.int64(0)
    T = out_dim.shape[0]
    for ci in range(candidates.shape[0]):
        k = candidates[ci]
        lh, ll = np.int64(0), np.int64(0)
        for i in range(T):
            xh, xl = x[out_dim[i], 0], x[out_dim[i], 1]
            if xh != 0 or xl != 0:
                fh, fl = w_feature(out_kind[i], out_param[i, 0], out_param[i, 1], k, np.int64(0), I, f, mode, err)
                wh, wl = w_mul(out_coef[i, 0], out_coef[i, 1], fh, fl, I, f, mode, err, scr)
                if wh != 0 or wl != 0:
                    ph, pl = w_mul(wh, wl, xh, xl, I, f, mode, err, scr)
                    lh, ll = w_add(lh, ll, ph, pl, I, f, mode, err)
        if ci == 0 or lh > bh or (lh == bh and ll > bl):
            best = k
            bh, bl = lh, ll
    return best


@njit(cache=True)
def _floor_clip(h, l, f, lo, hi):
    """floor(v / 2^f) of the wide raw v, clipped to [lo - 2, hi + 2]."""
    neg, mh, ml = sign_magnitude(h, l)
    if f >= 63:
        qh, ql = np.int64(0), mh >> (f - 63)
        mask = M63 if f - 63 == 63 else (np.int64(1) << (f - 63)) - 1
        frac = ml != 0 or (mh & mask) != 0
    elif f == 0:
        qh, ql = mh, ml
        frac = False
    else:
        qh, ql = mh >> f, ((mh & ((np.int64(1) << f) - 1)) << (63 - f)) | (ml >> f)
        frac = (ml & ((np.int64(1) << f) - 1)) != 0
    if qh != 0 or ql > (np.int64(1) << 62):
        return lo - 2 if neg else hi + 2
    q = -ql - (1 if frac else 0) if neg else ql
    return max(lo - 2, min(hi + 2, q))


@njit(cache=True)
def w_nearest_code_readout(x, v_dim, code_lo, code_hi, out_dim, out_kind, out_param, out_coef, I, f, mode, err,
                           scr):
    """readouts.nearest_code_readout_args on wide raws: the generic readout over the
    range ends and the codes floor(v) - 1 .. floor(v) + 2 (the int64 version's
    numbers exactly; equal to the generic readout's in range, see there)."""
    fl = _floor_clip(x[v_dim, 0], x[v_dim, 1], f, code_lo, code_hi)
    ids = nearest_ids(fl, code_lo, code_hi)
    return w_readout(x, out_dim, out_kind, out_param, out_coef, ids, I, f, mode, err, scr)


@njit(cache=True)
def w_quadratic_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err, scr):
    """readouts.quadratic_readout on wide raws: :func:`w_readout` over ``candidates``
    for a readout a tau_k x[d1] + b tau_k^2 x[d2] (kinds F_TOK then F_TOK_SQ,
    integer a, b, f <= 56), evaluated on the subset of readouts.quadratic_readout
    (the smallest id, the smallest and largest code, the codes next to the vertex
    -A / (2 B), from float64 estimates of A = a x[d1] / 2^f, B = b x[d2] / 2^f:
    |vertex| is clipped to the code range, below 2^53, so the estimate is within a
    code of it). Every weight and product is exact, so the subset's argmax and
    largest |raw| are the full readout's, and the subset errs or clamps iff some
    candidate does; then -1 (``err`` untouched: the subset ran on a copy) and the
    caller runs :func:`w_readout`."""
    C = candidates.shape[0]
    T = out_dim.shape[0]
    if T != 2 or C < QUAD_MIN_CANDIDATES or out_kind[0] != F_TOK or out_kind[1] != F_TOK_SQ or f > 56:
        return np.int64(-1)
    low = (np.int64(1) << f) - 1
    if (out_coef[0, 1] & low) != 0 or (out_coef[1, 1] & low) != 0 or err[E_CODE] != 0:
        return np.int64(-1)
    lo = 0
    hi = C
    while lo < hi:
        mid = (lo + hi) >> 1
        if candidates[mid] < NUMBER_BASE:
            lo = mid + 1
        else:
            hi = mid
    ns = lo
    ids = np.empty(7, dtype=np.int64)
    ids[0] = candidates[0]
    ids[1] = candidates[code_rank(candidates, ns, 0)]
    ids[2] = candidates[code_rank(candidates, ns, C - 1)]
    n = 3
    sc = 2.0 ** (-f)
    x2h, x2l = x[out_dim[1], 0], x[out_dim[1], 1]
    B = limbs_float(out_coef[1, 0], out_coef[1, 1]) * sc * limbs_float(x2h, x2l)
    if B != 0.0:
        A = limbs_float(out_coef[0, 0], out_coef[0, 1]) * sc * limbs_float(x[out_dim[0], 0], x[out_dim[0], 1])
        c_lo = float(tok_code(candidates[code_rank(candidates, ns, 0)]))
        c_hi = float(tok_code(candidates[code_rank(candidates, ns, C - 1)]))
        if max(abs(c_lo), abs(c_hi)) >= 2.0 ** 49:    # the float vertex within a code of the real one
            return np.int64(-1)
        v = min(max(-A / (2.0 * B), c_lo - 2.0), c_hi + 2.0)
        lo = 0
        hi = C
        while lo < hi:
            mid = (lo + hi) >> 1
            if float(tok_code(candidates[code_rank(candidates, ns, mid)])) <= math.floor(v):
                lo = mid + 1
            else:
                hi = mid
        for k in range(lo - 2, lo + 2):
            if k >= 0 and k < C:
                ids[n] = candidates[code_rank(candidates, ns, k)]
                n += 1
    sub = np.unique(ids[:n])
    e2 = err.copy()
    tok = w_readout(x, out_dim, out_kind, out_param, out_coef, sub, I, f, mode, e2, scr)
    if e2[E_CODE] != 0 or e2[E_SAT] != err[E_SAT]:
        return np.int64(-1)
    track_maxabs(e2[E_MAXABS_HI], e2[E_MAXABS], err)
    return tok


@njit(cache=True)
def _read(x, use_nearest, out_dim, out_kind, out_param, out_coef, candidates, nearest, I, f, mode, err, scr):
    """The batch loop's and a session's readout: the nearest-code readout when asked
    (equal to the generic one in range only), else the generic readout, through
    :func:`w_quadratic_readout` where it applies (the same token and err)."""
    if use_nearest:
        return w_nearest_code_readout(x, nearest[0], nearest[1], nearest[2], out_dim, out_kind, out_param, out_coef,
                                      I, f, mode, err, scr)
    tok = w_quadratic_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err, scr)
    if tok >= 0:
        return tok
    return w_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err, scr)


# ---------------------------------------------------------------------------- loops
@njit(cache=True)
def w_forward(tokens, lengths, all_positions, share_prefix, use_nearest, prune, I, f, mode, err, loc,
              ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2,
              aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2,
              out_dim, out_kind, out_param, out_coef, candidates, nearest, preds):
    """preds[b, t] for the positions read (every position if ``all_positions``,
    else the last). Stops at the first error, with its (row, position) in ``loc``.

    ``share_prefix`` (as batch.forward_loop; not in saturate mode, whose clamp
    counts would then differ): a row starts after the prefix it shares with the
    row before (at most its length minus one), from the RNN state kept for that
    position and with the KV cache of those positions, which the models' causality
    makes exact; otherwise every row starts from a fresh state.

    ``prune``: rows of PRUNE_MIN_KEYS tokens or more attend with
    :func:`w_scores_pruned` (exact; False: every key is scored)."""
    B, N = tokens.shape
    D = ekind.shape[0]
    La, Lr = aWQ.shape[0], rA.shape[0]
    H = aWQ.shape[1] if La > 0 else 0
    Dh = aWQ.shape[2] if La > 0 else 0
    S = rA.shape[1] if Lr > 0 else 0
    ws, scr, e2, acc, qnz = _step_scratch(D, S, rW1.shape[1], Dh, aW1.shape[1])
    x = np.zeros((D, 2), np.int64)
    state = np.zeros((Lr, S, 2), np.int64)
    Kc = np.zeros((La, H, N, Dh, 2), np.int64)
    Vc = np.zeros((La, H, N, Dh, 2), np.int64)
    scores = np.zeros((N, 2), np.int64)
    wbuf = np.zeros((N, 2), np.int64)
    attn = np.zeros((La, H, 1, 2), np.int64)
    share = share_prefix and mode != MODE_SATURATE
    hist = np.zeros((N + 1 if share else 1, Lr, S, 2), np.int64)     # hist[t]: the state before position t
    pr = prune and La > 0 and N >= PRUNE_MIN_KEYS
    KmE, LB, SB, mark, vis, dfr, qf, idx = prune_arrays(La, H, N, Dh, pr)
    Ksh, Kix, ist, stk, stf, nb, gs, gc = no_index_arrays(La, H, Dh)     # rows rewrite keys: no index (sessions only)
    for b in range(B):
        L = lengths[b]
        start = 0
        if share and b > 0:
            lim = min(L - 1, lengths[b - 1])
            while start < lim and tokens[b, start] == tokens[b - 1, start]:
                start += 1
        if share:
            state[:] = hist[start]
        else:
            state[:] = 0
        if all_positions:
            for t in range(start):
                preds[b, t] = preds[b - 1, t]
        for t in range(start, L):
            need = all_positions or t == L - 1
            w_step(tokens[b, t], t, I, f, mode, err, ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, state,
                   aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Vc, x, scores, wbuf, False, attn, need,
                   ws, scr, e2, acc, qnz, pr, KmE, LB, SB, mark, vis, dfr, qf, idx, Ksh, Kix, ist, stk, stf, nb, gs,
                   gc)
            if need and err[E_CODE] == 0:
                preds[b, t] = _read(x, use_nearest, out_dim, out_kind, out_param, out_coef, candidates, nearest,
                                    I, f, mode, err, scr)
            if err[E_CODE] != 0:
                loc[0] = b
                loc[1] = t
                err[E_WHERE] = t
                return
            if share:
                hist[t + 1] = state


@njit(cache=True)
def w_feed(tokens, t0, I, f, mode, err, ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2,
           aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, rnn_state, Kc, Vc, x, scores, wbuf, record, attn_rec,
           prune, KmE, LB, SB, mark, vis, dfr, qf, idx, Ksh, Kix, ist, stk, stf, nb, gs, gc):
    """kernels.feed_flat on wide raws: feed ``tokens`` from position t0 (only the
    last one's output is computed); returns the position reached (stops after the
    first error, with ``err[E_WHERE]`` its position). ``prune`` and its arrays
    (:func:`prune_arrays`, kept by the session) and the index's (:func:`index_arrays`):
    see :func:`w_step`."""
    D = x.shape[0]
    La, Lr = aWQ.shape[0], rA.shape[0]
    Dh = aWQ.shape[2] if La > 0 else 0
    S = rA.shape[1] if Lr > 0 else 0
    ws, scr, e2, acc, qnz = _step_scratch(D, S, rW1.shape[1], Dh, aW1.shape[1])
    t = t0
    last = tokens.shape[0] - 1
    for i in range(tokens.shape[0]):
        w_step(tokens[i], t, I, f, mode, err, ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, rnn_state,
               aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Vc, x, scores, wbuf, record, attn_rec,
               i == last, ws, scr, e2, acc, qnz, prune, KmE, LB, SB, mark, vis, dfr, qf, idx, Ksh, Kix, ist, stk,
               stf, nb, gs, gc)
        if err[E_CODE] != 0:
            err[E_WHERE] = t
            return t + 1
        t += 1
    return t


@njit(cache=True)
def w_read(x, use_nearest, out_dim, out_kind, out_param, out_coef, candidates, nearest, I, f, mode, err):
    """A session's readout on the wide residual ``x``."""
    return _read(x, use_nearest, out_dim, out_kind, out_param, out_coef, candidates, nearest, I, f, mode, err,
                 np.zeros(SCRATCH_LEN, np.int64))


__all__ = ["EXP_INT64_MAX_FRAC_BITS", "w_attend", "w_embed", "w_feature", "w_feed", "w_forward", "w_int",
           "w_matvec", "w_mlp_residual", "w_nearest_code_readout", "w_read", "w_readout", "w_scores", "w_step",
           "workspace_rows"]
