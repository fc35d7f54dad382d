"""Lane-parallel batch forward: many rows of equal length at once, the same
numbers and the same ``err`` as :func:`constructions.machine.batch.forward_batch`.

A block of up to ``block`` consecutive rows of the same length (the *lanes*)
advances together, position by position and layer by layer, on lane-last int64
arrays the compiler vectorises, so fixed per-call costs are paid once per block.
Each lane keeps the largest |raw| the plain run would record; a lane that might
overflow, clamp, hit an undecided exp or leave int64 is marked bad, and the bad
rows are run again by :func:`batch.forward_loop`, which stops at the first
error as the plain run does. A model whose products could leave int64 runs the
per-row loop throughout; :func:`choose_block` decides when lanes pay
(docs/machine.md "Lane-parallel batches").

Details (the meter, bad lanes, the end of a block):
docs/internals/machine.md#lanes
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import kernels as K
from . import attention as AT
from . import batch as BT
from .fixedpoint import E_CODE, E_MAXABS, E_SAT, ERR_LEN, exp_raw, bit_length, exp_zero_threshold, fx_div

LANES_BLOCK_MAX = 256           # lanes per block at most
LANES_BLOCK_MIN = 32            # predict_batch: fewer lanes per block (scratch too large) -> per-row path
LANES_BLOCK_BYTES = 1 << 18     # the block's scratch (KV cache, residuals, scores) kept about this size
LANES_MAX_N = AT.PRUNE_BATCH_MIN_N - 1   # longer rows get the per-row path's pruned attention
LANES_MIN_RUN = 16              # predict_batch: rows of equal length in a run, on average, at least
LANES_NEAREST_MAX_C = 64        # nearest-code readout: the lanes run the full table, so only few candidates
LANES_SHARE_RATIO = 6           # predict_batch with sharing: a shared-prefix step costs about this many lane tokens
EXP_TABLE_MAX = 1 << 17         # exps of gaps 0..-thr kept per f when -thr is at most this

_EXP_TABLES: dict[int, np.ndarray] = {}


def exp_table(f: int) -> np.ndarray:
    """The memo of round(exp(-r / 2^f) 2^f) for r = 0 .. -exp_zero_threshold(f),
    shared by every model with f fraction bits (for a gap d <= 0 the exp does not
    depend on I >= 1 or the mode) and filled by the kernels on first use: -1 not
    yet computed, -2 the computation recorded an error (ExpRoundingUndecided; such
    a lane runs the per-row path, which records it). Empty when -thr is too large
    (every exp is then computed where it is needed)."""
    t = _EXP_TABLES.get(int(f))
    if t is None:
        R = -int(exp_zero_threshold(int(f)))
        t = np.full(R + 1 if 0 <= R <= EXP_TABLE_MAX else 0, -1, dtype=np.int64)
        _EXP_TABLES[int(f)] = t
    return t


def lane_bytes(model, N: int) -> int:
    """Scratch bytes one lane needs for rows of N tokens (the block's KV cache,
    residual, scores and the rest)."""
    net = model.weights.net
    La, H, Dh = net.aWQ.shape[0], net.aWQ.shape[1], net.aWQ.shape[2]
    Lr, S = net.rA.shape[0], net.rA.shape[1]
    words = (2 * La * H * N * Dh + N + 4 * net.ekind.shape[0] + Lr * S + 2 * S + net.rW1.shape[1]
             + net.aW1.shape[1] + 2 * Dh + 8)
    return 8 * words


def block_size(model, N: int) -> int:
    """Lanes per block for rows of N tokens: a power of two, at most
    LANES_BLOCK_MAX, with the block's scratch about LANES_BLOCK_BYTES."""
    per = lane_bytes(model, N)
    bl = 1
    while bl < LANES_BLOCK_MAX and 2 * bl * per <= LANES_BLOCK_BYTES:
        bl *= 2
    return bl


@njit(cache=True)
def shared_steps(tokens, lengths):
    """The steps :func:`batch.forward_batch` runs with prefix sharing: row b
    starts at its common prefix with row b - 1 (at most lengths[b] - 1 and
    lengths[b - 1] tokens)."""
    B = tokens.shape[0]
    steps = np.int64(0)
    for b in range(B):
        start = 0
        if b > 0:
            lim = min(lengths[b] - 1, lengths[b - 1])
            while start < lim and tokens[b, start] == tokens[b - 1, start]:
                start += 1
        steps += lengths[b] - start
    return steps


def choose_block(model, tokens: np.ndarray, lengths: np.ndarray, share_prefix: bool, readout: str) -> int:
    """The block size if the lane-parallel path should run this batch, else 0:
    rows shorter than LANES_MAX_N (longer ones profit from the per-row path's
    pruned attention), runs of equal-length consecutive rows of LANES_MIN_RUN rows
    on average, a block of at least LANES_BLOCK_MIN lanes, for the nearest-code
    readout at most LANES_NEAREST_MAX_C candidates (never an implicit
    vocabulary, which has no table), and, when the per-row path
    would share prefixes (``share_prefix`` in raise mode), at most
    LANES_SHARE_RATIO lane tokens per step it would run (:func:`shared_steps`;
    the lanes compute every token of every row). Whatever is chosen, the results
    and ``err`` are the same."""
    B = int(lengths.shape[0])
    N = int(lengths.max())
    if N > LANES_MAX_N or B < LANES_MIN_RUN:
        return 0
    if model.implicit_vocab or (readout == "nearest_code" and len(model.candidates) > LANES_NEAREST_MAX_C):
        return 0          # the lanes' readout runs the table: an implicit vocabulary has none
    runs = 1 + int(np.count_nonzero(lengths[1:] != lengths[:-1]))
    if B < LANES_MIN_RUN * runs:
        return 0
    bl = block_size(model, N)
    if bl < LANES_BLOCK_MIN:
        return 0
    if share_prefix and model.fmt.mode != "saturate" and \
            int(lengths.sum()) > LANES_SHARE_RATIO * int(shared_steps(tokens, lengths)):
        return 0
    return bl


# ---------------------------------------------------------------------------- stages (over the lanes)
@njit(cache=True)
def _lmv(W, X, out, nb, mt, f, hm1):
    """out[r, i] = sum_c round(W[r, c] X[c, i]) for lanes i < nb (terms with W[r, c]
    = 0 skipped, as :func:`kernels.matvec` skips them; a term with X[c, i] = 0 adds
    0 and changes no maximum); mt[i] keeps the largest |product| and |partial sum|."""
    rows, cols = W.shape
    for r in range(rows):
        o = out[r]
        for i in range(nb):
            o[i] = 0
        for c in range(cols):
            w = W[r, c]
            if w != 0:
                xc = X[c]
                for i in range(nb):
                    q = BT.round_raw(w * xc[i], f, hm1)
                    a = o[i] + q
                    o[i] = a
                    mt[i] = max(mt[i], max(q if q >= 0 else -q, a if a >= 0 else -a))


@njit(cache=True)
def _ladd(X, Y, nb, mt):
    """X += Y (exact sums; mt keeps every |sum|)."""
    for d in range(X.shape[0]):
        xd = X[d]
        yd = Y[d]
        for i in range(nb):
            s = xd[i] + yd[i]
            xd[i] = s
            mt[i] = max(mt[i], s if s >= 0 else -s)


@njit(cache=True)
def _lsum(X, Y, out, nb, mt):
    """out = X + Y (exact sums; mt keeps every |sum|)."""
    for d in range(X.shape[0]):
        xd = X[d]
        yd = Y[d]
        od = out[d]
        for i in range(nb):
            s = xd[i] + yd[i]
            od[i] = s
            mt[i] = max(mt[i], s if s >= 0 else -s)


@njit(cache=True)
def _lmlp(W1, b1, W2, b2, X, hid, tmp, nb, mt, f, hm1):
    """X += W2 relu(W1 X + b1) + b2, as :func:`kernels.mlp_residual`: mt keeps the
    matrix-vector products' maxima, |hidden + b1| (before the ReLU), |tmp + b2| and
    |X + (tmp + b2)|."""
    _lmv(W1, X, hid, nb, mt, f, hm1)
    for m in range(hid.shape[0]):
        hm = hid[m]
        bm = b1[m]
        for i in range(nb):
            s = hm[i] + bm
            mt[i] = max(mt[i], s if s >= 0 else -s)
            hm[i] = s if s > 0 else 0
    _lmv(W2, hid, tmp, nb, mt, f, hm1)
    for d in range(X.shape[0]):
        xd = X[d]
        td = tmp[d]
        bd = b2[d]
        for i in range(nb):
            s = td[i] + bd
            u = xd[i] + s
            xd[i] = u
            mt[i] = max(mt[i], max(s if s >= 0 else -s, u if u >= 0 else -u))


@njit(cache=True)
def _lane_exp(d, I, f, mode, etab, es):
    """round(exp(d / 2^f) 2^f) for thr <= d <= 0 from the memo ``etab``
    (:func:`exp_table`), computed by exp_raw on first use; -2 if that records an
    error (the lane then runs the per-row path)."""
    r = -d
    if r < etab.shape[0]:
        e = etab[r]
        if e != -1:
            return e
    for k in range(ERR_LEN):
        es[k] = 0
    e = exp_raw(d, I, f, mode, es)
    if es[E_CODE] != 0 or es[E_SAT] != 0:
        e = np.int64(-2)
    if r < etab.shape[0]:
        etab[r] = e
    return e


@njit(cache=True)
def _lattend(Q, Kh, Vh, m, Sc, Mx, O, nb, mt, lim, I, f, mode, hm1, thr, etab, es, idx, ev):
    """One head's attention of every lane over its keys j < m: Kh[j, c, i], Vh[j, k, i].

    Scores as :func:`attention.attention_scores`: S_j = sum_c round(q_c k_jc), each
    |product| and |partial sum| kept (a component with q_c = 0 or k_jc = 0 adds 0).
    If 2(I+f) > 62 a product of in-range operands might leave int64: a lane where
    float |q_c| |k_jc| >= 4e18 is bad (the per-row path then computes it exactly).

    Softmax as :func:`attention.attend_sparse` (= :func:`fixedpoint.fx_attend`), per
    lane: M = max_j S_j; the keys with S_j - M >= thr get e_j = round(exp(S_j - M))
    (from the memo) and Z = sum e_j (exact); w_j = round(e_j 2^f / Z) (half to
    even; e_j = Z gives exactly 2^f); o_k = sum_j round(w_j v_jk), exact, then
    range-checked. The largest |raw| of all this is max(Z, |o_k|): every e_j and
    every partial sum of Z is at most Z, every w_j <= 2^f <= Z (the maximal key has
    e = 2^f), and |round(w_j v_jk)| <= |v_jk|, recorded when v was computed."""
    Dh = Q.shape[0]
    for j in range(m):
        s = Sc[j]
        for i in range(nb):
            s[i] = 0
    for c in range(Dh):
        qc = Q[c]
        for j in range(m):
            kc = Kh[j, c]
            s = Sc[j]
            for i in range(nb):
                r = BT.round_raw(qc[i] * kc[i], f, hm1)
                a = s[i] + r
                s[i] = a
                mt[i] = max(mt[i], max(r if r >= 0 else -r, a if a >= 0 else -a))
    if 2 * (I + f) > 62:
        for c in range(Dh):
            qc = Q[c]
            for j in range(m):
                kc = Kh[j, c]
                for i in range(nb):
                    if not (abs(float(qc[i])) * abs(float(kc[i])) < 4.0e18):
                        mt[i] = lim
    s0 = Sc[0]
    for i in range(nb):
        Mx[i] = s0[i]
    for j in range(1, m):
        s = Sc[j]
        for i in range(nb):
            Mx[i] = max(Mx[i], s[i])
    wide_v = I + 2 * f > 62
    one = np.int64(1) << f
    for i in range(nb):
        for k in range(Dh):
            O[k, i] = 0
        if mt[i] >= lim:
            continue
        M = Mx[i]
        nc = 0
        Z = np.int64(0)
        bad = False
        for j in range(m):
            d = Sc[j, i] - M
            if d >= thr:
                e = _lane_exp(d, I, f, mode, etab, es)
                if e < 0:
                    bad = True
                    break
                idx[nc] = j
                ev[nc] = e
                nc += 1
                Z += e
        if bad or Z >= lim:
            mt[i] = lim
            continue
        mm = max(mt[i], Z)
        for ci in range(nc):
            e = ev[ci]
            if e == 0:
                continue
            if e == Z:
                w = one
            elif f <= 31:
                num = e << f
                w = num // Z
                r2 = (num - w * Z) << 1
                if r2 > Z or (r2 == Z and (w & 1) == 1):
                    w += 1
            else:
                for k in range(ERR_LEN):
                    es[k] = 0
                w = fx_div(e, Z, I, f, mode, es)
            if w == 0:
                continue
            j = idx[ci]
            for k in range(Dh):
                v = Vh[j, k, i]
                if v != 0:
                    if wide_v and not (float(w) * abs(float(v)) < 4.0e18):
                        bad = True
                    O[k, i] += BT.round_raw(w * v, f, hm1)
        for k in range(Dh):
            a = O[k, i]
            mm = max(mm, a if a >= 0 else -a)
        mt[i] = lim if bad else mm


@njit(cache=True)
def _lreadout(X, out_dim, w_tab, col_wmax, col_ok, col_wabs, nb, mt, lim, f, hm1, lg, bestv, best):
    """The readout of :func:`readouts.readout_fast_args` for every lane: best[i] = the
    index of the first largest logit_c = sum_terms round(w_tab[c, t] x[dim_t]) (terms
    with x = 0 or w = 0 skipped); mt keeps every |product| and |partial logit| and,
    per read term (x[dim] != 0), the largest |raw| of its table column (a read
    column with an entry that is not ok makes the lane bad, and so does a read term
    whose products might leave int64: max_c |w_tab[c, t]| |x| >= 4e18 in float64,
    which is below 2^62 (1 - 2^-50))."""
    C, T = w_tab.shape
    for t in range(T):
        xr = X[out_dim[t]]
        cw = col_wmax[t] if col_ok[t] else lim
        wa = float(col_wabs[t])
        for i in range(nb):
            if xr[i] != 0:
                mt[i] = max(mt[i], cw)
                if not (wa * abs(float(xr[i])) < 4.0e18):
                    mt[i] = lim
    for c in range(C):
        for i in range(nb):
            lg[i] = 0
        for t in range(T):
            w = w_tab[c, t]
            if w != 0:
                xr = X[out_dim[t]]
                for i in range(nb):
                    q = BT.round_raw(w * xr[i], f, hm1)
                    a = lg[i] + q
                    lg[i] = a
                    mt[i] = max(mt[i], max(q if q >= 0 else -q, a if a >= 0 else -a))
        if c == 0:
            for i in range(nb):
                bestv[i] = lg[i]
                best[i] = 0
        else:
            for i in range(nb):
                if lg[i] > bestv[i]:
                    bestv[i] = lg[i]
                    best[i] = c


# ---------------------------------------------------------------------------- the batch
def forward_lanes(tokens, lengths, all_positions, share_prefix, readout_mode, I, f, mode, err, loc, W, preds,
                  etab, block):
    """:func:`batch.forward_batch` (same arguments, same ``preds``, ``err`` and
    ``loc``) computed a block of up to ``block`` equal-length rows at a time (see the
    module docstring); ``etab``: :func:`exp_table` (f). ``share_prefix`` only
    matters where the per-row path runs (the whole batch, if the model's products
    are not provably inside int64): the results are the same either way.
    A Python function handing the weights' arrays one by one to the compiled
    :func:`_lanes` (as :func:`batch.forward_batch` does, for the same reasons).

    Returns how many rows the lanes settled without the per-row path (-1: the
    whole batch ran on the per-row path), for the tests."""
    return _lanes(tokens, lengths, all_positions, share_prefix, readout_mode == K.READOUT_NEAREST_CODE, I, f, mode,
                  err, loc, *BT.loop_args(W), etab, block, preds)


@njit(cache=True)
def _lanes(tokens, lengths, all_positions, share_prefix, use_nearest, I, f, mode, err, loc,
           ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2,
           out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab, v_dim, code_lo, code_hi,
           etab, block, preds):
    """:func:`forward_lanes` on the weights' arrays passed one by one."""
    B, N = tokens.shape
    wm = max(max(max(BT.absmax(rA), BT.absmax(rB)), max(BT.absmax(rC), BT.absmax(rW1))),
             max(max(BT.absmax(rW2), BT.absmax(aWQ)), max(BT.absmax(aWK), BT.absmax(aWV))))
    wm = max(wm, max(BT.absmax(aWO), max(BT.absmax(aW1), BT.absmax(aW2))))
    psafe = bit_length(wm) + I + f <= 62
    if not psafe or B == 0:
        BT.forward_loop(tokens, lengths, all_positions, share_prefix, use_nearest, None, I, f, mode, err, loc,
                        ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, a_nheads,
                        aW1, ab1, aW2, ab2, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab,
                        ok_tab, v_dim, code_lo, code_hi, preds)
        return -1
    BL = max(1, min(block, B))
    D = ekind.shape[0]
    Lr = rA.shape[0]
    S = rA.shape[1] if Lr > 0 else 0
    La = aWQ.shape[0]
    H = aWQ.shape[1] if La > 0 else 0
    Dh = aWQ.shape[2] if La > 0 else 0
    lim = np.int64(1) << (I + f)
    hm1 = (np.int64(1) << (f - 1)) - 1 if f > 0 else np.int64(0)
    thr = exp_zero_threshold(f)
    ttab, tmx, tok_ok, ptab, pmx, pos_ok = BT.embed_tables(ekind, eparam, ecoef, candidates, N, I, f, mode)
    nv = tok_ok.shape[0]
    col_wmax, col_ok = BT.readout_columns(wmax_tab, ok_tab)
    C, T = w_tab.shape
    col_wabs = np.zeros(T, dtype=np.int64)
    for c in range(C):
        for t in range(T):
            col_wabs[t] = max(col_wabs[t], abs(w_tab[c, t]))
    x = np.zeros((D, BL), dtype=np.int64)
    tmp = np.zeros((D, BL), dtype=np.int64)
    acc = np.zeros((D, BL), dtype=np.int64)
    ho = np.zeros((D, BL), dtype=np.int64)
    state = np.zeros((Lr, S, BL), dtype=np.int64)
    ah = np.zeros((S, BL), dtype=np.int64)
    bx = np.zeros((S, BL), dtype=np.int64)
    rhid = np.zeros((rW1.shape[1], BL), dtype=np.int64)
    ahid = np.zeros((aW1.shape[1], BL), dtype=np.int64)
    Kc = np.zeros((La, H, N, Dh, BL), dtype=np.int64)
    Vc = np.zeros((La, H, N, Dh, BL), dtype=np.int64)
    q = np.zeros((Dh, BL), dtype=np.int64)
    o = np.zeros((Dh, BL), dtype=np.int64)
    Sc = np.zeros((N, BL), dtype=np.int64)
    Mx = np.zeros(BL, dtype=np.int64)
    mt = np.zeros(BL, dtype=np.int64)
    lg = np.zeros(BL, dtype=np.int64)
    bestv = np.zeros(BL, dtype=np.int64)
    best = np.zeros(BL, dtype=np.int64)
    es = np.zeros(ERR_LEN, dtype=np.int64)
    idx = np.zeros(N, dtype=np.int64)
    ev = np.zeros(N, dtype=np.int64)
    fb = np.zeros(BL, dtype=np.int64)
    sub_tok = np.zeros((BL, N), dtype=np.int64)
    sub_len = np.zeros(BL, dtype=np.int64)
    sub_pred = np.zeros((BL, N), dtype=np.int64)
    sub_loc = np.zeros(2, dtype=np.int64)
    settled = 0
    b0 = 0
    while b0 < B:
        n = lengths[b0]
        b1 = b0 + 1
        while b1 < B and b1 - b0 < BL and lengths[b1] == n:
            b1 += 1
        nb = b1 - b0
        for i in range(nb):
            mt[i] = 0
        for l in range(Lr):
            for s in range(S):
                for i in range(nb):
                    state[l, s, i] = 0
        for t in range(n):
            need = all_positions or t == n - 1
            # the embedding: x = ttab[tok] + ptab[t] (a row that is not ok: the lane is bad)
            pm = pmx[t]
            pok = pos_ok[t]
            for i in range(nb):
                tok = tokens[b0 + i, t]
                if pok and tok >= 0 and tok < nv and tok_ok[tok]:
                    for d in range(D):
                        x[d, i] = ttab[tok, d] + ptab[t, d]
                    mt[i] = max(mt[i], max(tmx[tok], pm))
                else:
                    for d in range(D):
                        x[d, i] = 0
                    mt[i] = lim
            # linear RNN layers: h = A h + B x; x += C h; x += MLP
            for l in range(Lr):
                _lmv(rA[l], state[l], ah, nb, mt, f, hm1)
                _lmv(rB[l], x, bx, nb, mt, f, hm1)
                _lsum(ah, bx, state[l], nb, mt)
                _lmv(rC[l], state[l], tmp, nb, mt, f, hm1)
                _ladd(x, tmp, nb, mt)
                _lmlp(rW1[l], rb1[l], rW2[l], rb2[l], x, rhid, tmp, nb, mt, f, hm1)
            # attention layers (the last one only stores K, V where nobody reads the output)
            for l in range(La):
                skip = l == La - 1 and not need
                if not skip:
                    for d in range(D):
                        for i in range(nb):
                            acc[d, i] = 0
                for h in range(a_nheads[l]):
                    _lmv(aWK[l, h], x, Kc[l, h, t], nb, mt, f, hm1)
                    _lmv(aWV[l, h], x, Vc[l, h, t], nb, mt, f, hm1)
                    if skip:
                        continue
                    _lmv(aWQ[l, h], x, q, nb, mt, f, hm1)
                    _lattend(q, Kc[l, h], Vc[l, h], t + 1, Sc, Mx, o, nb, mt, lim, I, f, mode, hm1, thr, etab, es,
                             idx, ev)
                    _lmv(aWO[l, h], o, ho, nb, mt, f, hm1)
                    _ladd(acc, ho, nb, mt)
                if skip:
                    break
                _ladd(x, acc, nb, mt)
                _lmlp(aW1[l], ab1[l], aW2[l], ab2[l], x, ahid, tmp, nb, mt, f, hm1)
            if need:
                _lreadout(x, out_dim, w_tab, col_wmax, col_ok, col_wabs, nb, mt, lim, f, hm1, lg, bestv, best)
                for i in range(nb):
                    preds[b0 + i, t] = candidates[best[i]]
        # the bad lanes: the per-row path, in row order, with err
        nbad = 0
        for i in range(nb):
            if mt[i] >= lim:
                fb[nbad] = i
                nbad += 1
        stop = nb
        if nbad > 0:
            for k in range(nbad):
                r = b0 + fb[k]
                sub_len[k] = lengths[r]
                for t in range(N):
                    sub_tok[k, t] = tokens[r, t]
                    sub_pred[k, t] = -1
            sub_loc[0] = -1
            sub_loc[1] = -1
            BT.forward_loop(sub_tok[:nbad], sub_len[:nbad], all_positions, np.bool_(False), use_nearest,
                            None, I, f, mode,
                            err, sub_loc, ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO,
                            a_nheads, aW1, ab1, aW2, ab2, out_dim, out_kind, out_param, out_coef, candidates, w_tab,
                            wmax_tab, ok_tab, v_dim, code_lo, code_hi, sub_pred[:nbad])
            done = nbad
            if err[E_CODE] != 0:
                done = sub_loc[0] + 1
                stop = fb[sub_loc[0]]
            for k in range(nbad):            # rows after the failing one keep no prediction
                r = b0 + fb[k]
                for t in range(N):
                    preds[r, t] = sub_pred[k, t] if k < done else -1
        mx = err[E_MAXABS]
        for i in range(nb):
            if mt[i] < lim:
                if i < stop:
                    mx = max(mx, mt[i])
                    settled += 1
                else:
                    for t in range(N):
                        preds[b0 + i, t] = -1
        err[E_MAXABS] = mx
        if stop < nb:
            loc[0] = b0 + stop
            loc[1] = sub_loc[1]
            return settled
        b0 = b1
    return settled
