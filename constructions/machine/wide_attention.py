"""Attention on two-limb raws: scores, pruned scores, the key-value index and the softmax, as the int64 kernels compute them.

The same numbers as constructions/machine/attention.py with the operations of
wide.py in place of fx_*: the scores of a query against the key cache, the
block-pruned and indexed searches (exact), and the softmax whose exp runs on
int64 shifts up to f = :data:`EXP_INT64_MAX_FRAC_BITS` and on three magnitude
limbs past it (docs/internals/machine.md#wide_exec).
"""
from __future__ import annotations


import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, E_NEED, E_OP, E_SAT, OP_ADD,
    OP_EXP, bit_length, exp_raw, exp_zero_threshold, mul_limbs, mul_round_abs, record_error,
)
from .keyindex import (
    best_lift, KI_LEAF, KI_MAX_DH, KI_N, KI_NT, KI_ROOT, KI_STACK, node_record, leaf_slot, index_rows,
    update_index,
)
from .attention import PRUNE_MIN_CAPACITY
from .wide import (
    M63,
    E_MAXABS_HI, magnitude_bits, sign_magnitude, magnitude_sub,
    overflow_raw, signed_limbs, track_maxabs, w_add, w_div, w_exp_neg, w_fit, w_mul,
)


EXP_INT64_MAX_FRAC_BITS = 56
"""Up to this f the softmax's exp is fixedpoint.exp_raw on an int64 shift (its
double-double decides rounding to 2^-96); past it, wide.w_exp_neg (210-bit fixed
point) on the shift's three magnitude limbs, and the weights take two limbs."""


# ---------------------------------------------------------------------------- attention
@njit(cache=True)
def query_setup(q, qnz, I, f):
    """(nq, small, top): the query's nonzero components listed in ``qnz``; small:
    every one below 2^62 in magnitude; top = min(2^62, 2^(I+f))."""
    nq = 0
    small = True
    for c in range(q.shape[0]):
        if q[c, 0] != 0 or q[c, 1] != 0:
            qnz[nq] = c
            nq += 1
            if q[c, 0] != 0 or q[c, 1] >= (np.int64(1) << 62) or q[c, 1] <= -(np.int64(1) << 62):
                small = False
    top = np.int64(1) << 62
    if I + f < 62:
        top = np.int64(1) << (I + f)
    return nq, small, top


@njit(cache=True)
def score_keys(q, qnz, nq, small, top, Kc, j0, j1, I, f, mode, err, scr, scores, seen):
    """scores[j] for j0 <= j < j1 (see :func:`w_scores`); returns (the largest
    score's limbs, seen), ``seen`` the local maximum of the int64-scored magnitudes."""
    bh, bl = np.int64(0), np.int64(0)
    for j in range(j0, j1):
        done = False
        if small:
            acc = np.int64(0)
            done = True
            for i in range(nq):
                c = qnz[i]
                kh, kl = Kc[j, c, 0], Kc[j, c, 1]
                if kh == 0 and kl == 0:
                    continue
                if kh != 0 or kl >= top or kl <= -top:
                    done = False
                    break
                qc = q[c, 1]
                p = mul_round_abs(qc if qc > 0 else -qc, kl if kl > 0 else -kl, f)
                if p < 0 or p >= top:
                    done = False
                    break
                if (qc < 0) != (kl < 0):
                    p = -p
                acc += p
                a = acc if acc > 0 else -acc
                pa = p if p > 0 else -p
                if a >= top:
                    done = False
                    break
                if pa > seen:
                    seen = pa
                if a > seen:
                    seen = a
            if done:
                scores[j, 0] = 0
                scores[j, 1] = acc
        if not done:
            sh, sl = np.int64(0), np.int64(0)
            for i in range(nq):
                c = qnz[i]
                kh, kl = Kc[j, c, 0], Kc[j, c, 1]
                if kh != 0 or kl != 0:
                    ph, pl = w_mul(q[c, 0], q[c, 1], kh, kl, I, f, mode, err, scr)
                    sh, sl = w_add(sh, sl, ph, pl, I, f, mode, err)
            scores[j, 0] = sh
            scores[j, 1] = sl
        if j == j0 or scores[j, 0] > bh or (scores[j, 0] == bh and scores[j, 1] > bl):
            bh, bl = scores[j, 0], scores[j, 1]
    return bh, bl, seen


@njit(cache=True)
def w_scores(q, Kc, m, I, f, mode, err, scr, qnz, scores):
    """scores[j] = sum_c round(q_c K[j, c]) for j < m (attention.attention_scores'
    plain definition: component order, zero terms skipped, partial sums checked).
    Returns the largest score's limbs. ``qnz``: int64 scratch (>= Dh).

    A key whose components, and the query's, are below 2^62 in magnitude is
    scored on int64 (fixedpoint.mul_round_abs, the rounding w_mul uses there)
    while every product and partial sum stays below min(2^62, 2^(I+f)); those
    values are in range, so the plain definition records nothing for them but
    their magnitudes, kept in a local maximum. Any other key is scored with
    w_mul / w_add from its first component: the same numbers and errors."""
    nq, small, top = query_setup(q, qnz, I, f)
    Mh, Ml, seen = score_keys(q, qnz, nq, small, top, Kc, 0, m, I, f, mode, err, scr, scores, np.int64(0))
    track_maxabs(np.int64(0), seen, err)
    return Mh, Ml


# ---------------------------------------------------------------------------- pruned attention
LEAF_LOG = 6            # blocks of 64 keys


SUPER_LOG = 12          # and of 64 blocks (4,096 keys)


PRUNE_MIN_KEYS = 256
"""A query over fewer keys scores them all."""


PRUNE_MAX_COMPONENTS = 400
"""A query with more nonzero components scores every key: the bounds' relative
margin 2^-44 covers the float64 sums of up to about 500 terms."""


_TWO63 = 9.223372036854775808e18


@njit(cache=True, inline='always')
def limbs_float(h, l):
    """The value of limbs (h, l) as a float64 (relative error below 2^-51: float(h)
    2^63 and float(l) are each within 2^-53 of h 2^63 and l, of the same sign, and
    their sum rounds once; 0 is exact)."""
    return float(h) * _TWO63 + float(l)


@njit(cache=True)
def prune_sizes(cap):
    """(blocks, super blocks) of a cache of ``cap`` keys."""
    return (cap >> LEAF_LOG) + 1, (cap >> SUPER_LOG) + 1


@njit(cache=True)
def w_store_bounds(k, t, KmE, LB, SB):
    """Key ``k`` (Dh, 2) was written at position t: KmE[t, c] = the exact largest
    |key component c| over positions 0..t; LB / SB: float64 bounds (max, min) per
    component of the block / super block holding t, rounded outward (relative
    2^-50: limbs_float is within 2^-51, and 0 is exact), restarted at a block's first position (a batch row rewriting
    keys from some position on leaves earlier keys in the bounds: still bounds)."""
    b = t >> LEAF_LOG
    sb = t >> SUPER_LOG
    first_b = (t & ((1 << LEAF_LOG) - 1)) == 0
    first_s = (t & ((1 << SUPER_LOG) - 1)) == 0
    for c in range(k.shape[0]):
        h, l = k[c, 0], k[c, 1]
        _, mh, ml = sign_magnitude(h, l)
        if t > 0 and (KmE[t - 1, c, 0] > mh or (KmE[t - 1, c, 0] == mh and KmE[t - 1, c, 1] > ml)):
            mh, ml = KmE[t - 1, c, 0], KmE[t - 1, c, 1]
        KmE[t, c, 0] = mh
        KmE[t, c, 1] = ml
        v = limbs_float(h, l)
        e = abs(v) * 2.0 ** -50
        up, lo = v + e, v - e
        if first_b:
            LB[b, c, 0] = up
            LB[b, c, 1] = lo
        else:
            LB[b, c, 0] = max(LB[b, c, 0], up)
            LB[b, c, 1] = min(LB[b, c, 1], lo)
        if first_s:
            SB[sb, c, 0] = up
            SB[sb, c, 1] = lo
        else:
            SB[sb, c, 0] = max(SB[sb, c, 0], up)
            SB[sb, c, 1] = min(SB[sb, c, 1], lo)


@njit(cache=True)
def prune_arrays(La, H, cap, Dh, prune):
    """(KmE, LB, SB, mark, vis, dfr, qf, idx) for a cache of ``cap`` keys (no
    keys when not ``prune``)."""
    cp = cap if prune else 0
    nl, ns = prune_sizes(cp)
    return (np.zeros((La, H, cp, Dh, 2), np.int64), np.zeros((La, H, nl if prune else 0, Dh, 2), np.float64),
            np.zeros((La, H, ns if prune else 0, Dh, 2), np.float64), np.zeros(nl + 1, np.int64),
            np.zeros(nl, np.int64), np.zeros(nl + ns, np.int64), np.zeros(max(Dh, 1), np.float64),
            np.zeros(max(cp, 1), np.int64))


@njit(cache=True, inline='always')
def _block_bound(qf, qnz, nq, B, i, sf, Dh1):
    """(upper bound of every score of block i, upper bound of every |partial sum|)
    for bounds B[i] (raw units: sum_c q_c k_c / 2^f plus 1/2 per rounded product,
    the float64 errors covered by a relative 2^-44 and Dh + 1)."""
    ub = 0.0
    S = 0.0
    for ii in range(nq):
        c = qnz[ii]
        a, b = qf[ii] * B[i, c, 0], qf[ii] * B[i, c, 1]
        ub += a if a > b else b
        S += max(abs(a), abs(b))
    ub = (ub + S * 2.0 ** -44) * sf + Dh1
    return ub, (S * (1.0 + 2.0 ** -44)) * sf + Dh1


@njit(cache=True)
def _unchecked_setup(q, KmE, m, I, f, mode, err, scr, qnz, qf):
    """(ok, nq, small, top) of a pruned search over the first m keys: ok when the
    query has 1 to PRUNE_MAX_COMPONENTS nonzero components (listed in ``qnz``,
    their values as float64 in ``qf``) and the column maxima KmE[m - 1] show that
    no product or partial sum of any key can leave the format (so nothing but
    magnitudes can be recorded); then the largest product of every column,
    round(|q_c| max_j |k_jc|), is computed (w_mul records it in the meter: the
    plain definition's largest product). Nothing is recorded when not ok."""
    nq, small, top = query_setup(q, qnz, I, f)
    if nq == 0 or nq > PRUNE_MAX_COMPONENTS:
        return False, nq, small, top
    t = m - 1
    sf = 2.0 ** (-f)
    S_all = 0.0
    for ii in range(nq):
        c = qnz[ii]
        qf[ii] = limbs_float(q[c, 0], q[c, 1])
        S_all += abs(qf[ii]) * limbs_float(KmE[t, c, 0], KmE[t, c, 1])
    # every product and partial sum of every key below 2^(I+f) (at I + f = 126 too:
    # a sum past 2^126 would clamp or err where no bound covers it)
    if (S_all * (1.0 + 2.0 ** -44)) * sf + float(q.shape[0] + 1) >= 2.0 ** (I + f) * (1.0 - 2.0 ** -40):
        return False, nq, small, top
    for ii in range(nq):
        c = qnz[ii]
        if KmE[t, c, 0] != 0 or KmE[t, c, 1] != 0:
            _, qh, ql = sign_magnitude(q[c, 0], q[c, 1])
            w_mul(qh, ql, KmE[t, c, 0], KmE[t, c, 1], I, f, mode, err, scr)
    return True, nq, small, top


@njit(cache=True)
def w_scores_pruned(q, Kc, KmE, LB, SB, m, I, f, mode, err, scr, qnz, scores, mark, vis, dfr, qf):
    """:func:`w_scores` visiting only the blocks whose scores can reach M +
    exp_zero_threshold(f) (every other key has weight exactly 0), when the column
    bounds show that no product or partial sum of any key can leave the format
    (so no error or clamp can occur); returns (ok, M limbs, number of blocks
    listed in ``vis``, ascending). ok False: not provably in range; nothing was
    changed, score every key.

    1. The block of largest bound inside the super block of largest bound is
       scored exactly: M0 <= M.
    2. In key order, a super block or block whose bound is below M_cur + thr
       (M_cur the largest exact score so far, <= M) is skipped; other blocks are
       scored exactly and listed. Every unscored key is below M + thr.
    3. The meter: every product of a key is at most round(|q_c| max_j |k_jc|),
       which is computed (w_mul records it): the plain definition's largest
       product. A skipped block whose partial-sum bound may exceed the largest
       |raw| at the end is scored exactly then (for the meter only), so the
       recorded maximum is the plain definition's.
    ``mark`` (blocks + 1 entries; the last one a counter), ``vis``, ``dfr``, ``qf``
    are scratch."""
    Dh = q.shape[0]
    ok, nq, small, top = _unchecked_setup(q, KmE, m, I, f, mode, err, scr, qnz, qf)
    if not ok:
        return False, np.int64(0), np.int64(0), 0
    sf = 2.0 ** (-f)
    Dh1 = float(Dh + 1)
    nleaf = (m + (1 << LEAF_LOG) - 1) >> LEAF_LOG
    nsup = (m + (1 << SUPER_LOG) - 1) >> SUPER_LOG
    stamp = mark[mark.shape[0] - 1] + 1
    mark[mark.shape[0] - 1] = stamp
    thr = _zero_threshold(f)
    # 1. the first block
    best_s, best_u = 0, -np.inf
    for sb in range(nsup):
        u, _ = _block_bound(qf, qnz, nq, SB, sb, sf, Dh1)
        if u > best_u:
            best_s, best_u = sb, u
    b0, best_u = best_s << (SUPER_LOG - LEAF_LOG), -np.inf
    for b in range(best_s << (SUPER_LOG - LEAF_LOG), min(nleaf, (best_s + 1) << (SUPER_LOG - LEAF_LOG))):
        u, _ = _block_bound(qf, qnz, nq, LB, b, sf, Dh1)
        if u > best_u:
            b0, best_u = b, u
    seen = np.int64(0)
    Mh, Ml, seen = score_keys(q, qnz, nq, small, top, Kc, b0 << LEAF_LOG, min(m, (b0 + 1) << LEAF_LOG),
                               I, f, mode, err, scr, scores, seen)
    mark[b0] = stamp
    Mf = limbs_float(Mh, Ml)
    lim = Mf - abs(Mf) * 2.0 ** -50 - 1.0 + thr - abs(thr) * 2.0 ** -50 - 1.0
    # 2. the walk, in key order
    nv = 0
    nd = 0
    per = 1 << (SUPER_LOG - LEAF_LOG)
    for sb in range(nsup):
        u, pb = _block_bound(qf, qnz, nq, SB, sb, sf, Dh1)
        if u < lim and not (b0 >= sb * per and b0 < (sb + 1) * per):
            dfr[nd] = -1 - sb
            nd += 1
            continue
        for b in range(sb * per, min(nleaf, (sb + 1) * per)):
            if mark[b] == stamp:
                vis[nv] = b
                nv += 1
                continue
            u, pb = _block_bound(qf, qnz, nq, LB, b, sf, Dh1)
            if u < lim:
                dfr[nd] = b
                nd += 1
                continue
            bh, bl, seen = score_keys(q, qnz, nq, small, top, Kc, b << LEAF_LOG, min(m, (b + 1) << LEAF_LOG),
                                       I, f, mode, err, scr, scores, seen)
            mark[b] = stamp
            vis[nv] = b
            nv += 1
            if bh > Mh or (bh == Mh and bl > Ml):
                Mh, Ml = bh, bl
                Mf = limbs_float(Mh, Ml)
                lim = Mf - abs(Mf) * 2.0 ** -50 - 1.0 + thr - abs(thr) * 2.0 ** -50 - 1.0
    # 3. the meter: skipped blocks whose partial sums may pass the largest |raw|
    track_maxabs(np.int64(0), seen, err)
    for i in range(nd):
        d = dfr[i]
        lo_b, hi_b = (d, d + 1) if d >= 0 else ((-1 - d) * per, min(nleaf, (-d) * per))
        if d < 0:
            _, pb = _block_bound(qf, qnz, nq, SB, -1 - d, sf, Dh1)
            if pb <= limbs_float(err[E_MAXABS_HI], err[E_MAXABS]) * (1.0 - 2.0 ** -50) - 1.0:
                continue
        for b in range(lo_b, hi_b):
            if mark[b] == stamp:
                continue
            _, pb = _block_bound(qf, qnz, nq, LB, b, sf, Dh1)
            if pb > limbs_float(err[E_MAXABS_HI], err[E_MAXABS]) * (1.0 - 2.0 ** -50) - 1.0:
                _, _, sn = score_keys(q, qnz, nq, small, top, Kc, b << LEAF_LOG, min(m, (b + 1) << LEAF_LOG),
                                       I, f, mode, err, scr, scores, np.int64(0))
                track_maxabs(np.int64(0), sn, err)
    return True, Mh, Ml, nv


# ---------------------------------------------------------------------------- the key-value index on two limbs
IX_USE, IX_PAUSE, IX_SHIFT, IX_FILLED, IX_CALLS, IX_SCORED, IX_KEYS, IX_FAILS, IX_NOT_OK = 0, 1, 2, 3, 4, 5, 6, 7, 8


IX_FIELDS = 9
"""Fields of a head's index state (:func:`index_arrays`' ``ist``): 1 while the
head uses the index; block-pruned steps left before it may try again; the
shadow keys' shift s; shadow keys written so far; statistics: index uses, keys
they scored, keys they covered, uses that were not exact (ok False) or scored
over a quarter of the keys, uses that were not exact."""


IX_PAUSE_STEPS = 32


SHADOW_BITS = 61
"""Shadow keys are below 2^61 in magnitude (the int64 index's keys are below 2^62)."""


IX_STACK = KI_STACK


def index_arrays(La: int, H: int, cap: int, Dh: int, on: bool):
    """(Ksh, Kix, ist, stk, stf, nb, gs, gc) of the two-limb key-value index
    (:func:`w_index_scores`) for a cache of ``cap`` keys: per head the shadow keys
    (Dh, cap'), the int64 index's rows (keyindex.index_rows(Dh), cap') with
    cap' = max(cap, attention.PRUNE_MIN_CAPACITY) (the node records' columns stay
    below it), the state (IX_FIELDS fields, ``IX_*``); and the search's scratch. Empty
    (no index) when not ``on`` or Dh > keyindex.KI_MAX_DH."""
    on = on and 0 < Dh <= KI_MAX_DH
    cp = max(cap, PRUNE_MIN_CAPACITY) if on else 0
    return (np.zeros((La, H, Dh, cp), np.int64), np.zeros((La, H, index_rows(Dh) if on else 0, cp), np.int64),
            np.zeros((La, H, IX_FIELDS), np.int64), np.zeros(max(cp, 1), np.int64), np.zeros(2 * IX_STACK, np.float64),
            np.zeros((1, max(Dh, 1), 2), np.float64), np.zeros((max(cp, 1), 2), np.int64),
            np.zeros(max(cp, 1), np.int64))


@njit(cache=True)
def no_index_arrays(La, H, Dh):
    """:func:`index_arrays` without an index, inside njit code."""
    return (np.zeros((La, H, Dh, 0), np.int64), np.zeros((La, H, 0, 0), np.int64), np.zeros((La, H, IX_FIELDS), np.int64),
            np.zeros(1, np.int64), np.zeros(2 * IX_STACK, np.float64), np.zeros((1, max(Dh, 1), 2), np.float64),
            np.zeros((1, 2), np.int64), np.zeros(1, np.int64))


@njit(cache=True)
def _shadow(h, l, s):
    """The wide raw (h, l) divided by 2^s, truncated toward 0 (|result| < 2^61
    when |raw| < 2^(61 + s)): the raw lies within 2^s - 1 of result * 2^s."""
    neg, mh, ml = sign_magnitude(h, l)
    if s == 0:
        v = ml
    elif s < 63:
        v = (mh << (63 - s)) | (ml >> s)
    else:
        v = mh >> (s - 63)
    return -v if neg else v


@njit(cache=True)
def _shadow_fill(Kc, Ksh, st, m):
    """Write the shadow keys of positions st[IX_FILLED] .. m - 1; a key of 2^(61 + s)
    or more raises the shift (to 4 bits more than it needs) and rewrites every
    shadow key. Returns True when the shift changed (the tree is then rebuilt)."""
    Dh = Ksh.shape[0]
    s = st[IX_SHIFT]
    j0 = st[IX_FILLED]
    if j0 > m:
        j0 = 0
    need = s
    for j in range(j0, m):
        for c in range(Dh):
            _, mh, ml = sign_magnitude(Kc[j, c, 0], Kc[j, c, 1])
            b = magnitude_bits(mh, ml) - SHADOW_BITS
            if b > need:
                need = b
    moved = need > s
    if moved:
        s = need + 4
        st[IX_SHIFT] = s
        j0 = 0
    for j in range(j0, m):
        for c in range(Dh):
            Ksh[c, j] = _shadow(Kc[j, c, 0], Kc[j, c, 1], s)
    st[IX_FILLED] = m
    return moved


@njit(cache=True)
def _node_bound(qf, qnz, nq, Kix, R, Dh, u, s, nb, sf, Dh1, qd, ls, lS):
    """(score bound, partial-sum bound) of node u of the shadow tree: _block_bound of
    its box (shadow units) scaled by 2^s and widened by 2^s (truncation) when
    s > 0, rounded outward as w_store_bounds rounds; with a square row (ls >= 0:
    k_ls 2^f = sum_{c in lS} k_c^2 for every key, q_ls < 0; only when s = 0, where
    shadow keys are the keys) the score bound is also at most keyindex's lifted
    bound: each q_c k_c / 2^f + q_ls k_c^2 / 2^(2f) is concave in k_c, largest at
    the vertex clamped to the box; the other components by the box; 1/2 per
    rounded product; float64 errors covered by 1e-12 of the terms' magnitudes
    plus 2 (``qd``: the query's components as float64)."""
    rr, c0 = node_record(R, Dh, u)
    rec = Kix[rr]
    sc = 2.0 ** s
    for ii in range(nq):
        c = qnz[ii]
        hi = float(rec[c0 + 2 * c])
        lo = float(rec[c0 + 2 * c + 1])
        if s > 0:
            hi = hi * sc + sc
            lo = lo * sc - sc
        nb[0, c, 0] = hi + abs(hi) * 2.0 ** -50
        nb[0, c, 1] = lo - abs(lo) * 2.0 ** -50
    ub, pb = _block_bound(qf, qnz, nq, nb, 0, sf, Dh1)
    if ls >= 0 and s == 0:
        qs = qd[ls]
        acc = 0.0
        mag = 0.0
        for ii in range(nq):
            c = qnz[ii]
            if c == ls or ((lS >> c) & 1) == 1:
                continue
            a, b = qd[c] * nb[0, c, 0] * sf, qd[c] * nb[0, c, 1] * sf
            acc += a if a > b else b
            mag += abs(a) + abs(b)
        for c in range(Dh):
            if ((lS >> c) & 1) == 0:
                continue
            lo = float(rec[c0 + 2 * c + 1])
            hi = float(rec[c0 + 2 * c])
            xv = min(max(-qd[c] / (2.0 * qs * sf), lo), hi)
            t1 = qd[c] * xv * sf
            t2 = qs * xv * xv * sf * sf
            acc += t1 + t2
            mag += abs(t1) + abs(t2)
        ubf = acc + 0.5 * nq + 1e-12 * mag + 2.0
        if ubf < ub:
            ub = ubf
    return ub, pb


@njit(cache=True, inline='always')
def _lim(Mh, Ml, thr):
    """A float64 lower bound of M + thr (M = (Mh, Ml)): a bound below it is below M + thr."""
    Mf = limbs_float(Mh, Ml)
    return Mf - abs(Mf) * 2.0 ** -50 - 1.0 + thr - abs(thr) * 2.0 ** -50 - 1.0


@njit(cache=True, inline='always')
def _meter_floor(err):
    """A float64 lower bound of the largest |raw| recorded so far."""
    return limbs_float(err[E_MAXABS_HI], err[E_MAXABS]) * (1.0 - 2.0 ** -50) - 1.0


@njit(cache=True)
def _score_leaf_keys(q, qnz, nq, small, top, Kc, Kix, R, Dh, y, n, I, f, mode, err, scr, scores, seen, idx, ni):
    """Score the n keys of leaf y exactly (positions from its slot), listing them in
    idx from ``ni`` when ni >= 0; returns (max score limbs, seen)."""
    prow, s0 = leaf_slot(R, Dh, y)
    bh, bl = np.int64(0), np.int64(0)
    for i in range(n):
        j = Kix[prow, s0 + i]
        sh, sl, seen = score_keys(q, qnz, nq, small, top, Kc, j, j + 1, I, f, mode, err, scr, scores, seen)
        if i == 0 or sh > bh or (sh == bh and sl > bl):
            bh, bl = sh, sl
        if ni >= 0:
            idx[ni + i] = j
    return bh, bl, seen


@njit(cache=True)
def w_index_scores(q, Kc, KmE, Ksh, Kix, st, m, I, f, mode, err, scr, qnz, scores, idx, stk, stf, nb, qf, gs, gc):
    """:func:`w_scores` over the first m keys on a key-value index (the int64
    kd-tree of :mod:`constructions.machine.keyindex`, over shadow keys): returns
    (ok, M limbs, n, ng, scored). ok False: not provably in range or out of stack;
    score every key (only true values were recorded). Else M is the plain
    definition's, scores[j] is exact for the n keys listed in idx[:n]
    (ascending), the keys of the ng groups (gs[g] their score, gc[g] their
    number) all have weight exactly 0 (:func:`w_attend_groups`), every other key's
    score is below M + exp_zero_threshold(f) (its weight is exactly 0), and the
    meter holds the plain definition's largest |raw|; ``scored``: keys scored (the
    index's cost).

    * Shadow keys (:func:`_shadow_fill`): each key component divided by 2^s and
      truncated, s the head's shift (:data:`SHADOW_BITS`); the tree
      (keyindex.update_index, unchanged) is built over them, so a node's shadow
      box, scaled by 2^s and widened by 2^s - 1, holds every raw key of the node.
      Bounds: the box bound of :func:`_block_bound`, and keyindex's lifted bound
      when s = 0 (the shadow keys are then the keys, so its square-row detection
      holds for them; at s > 0 it would see shadow keys and is not used):
      :func:`_node_bound`.
    * Search: the buffer (the newest keys, keyindex's KI_NT .. m - 1) exactly,
      then depth first from the root, the child of the larger bound popped first;
      a node whose bound is below M_cur + thr is skipped (M_cur <= M); a leaf that
      is not is scored exactly and listed. Groups (as keyindex's, only when s = 0,
      I >= 2 and m < 2^(I-1)): a node that is not skipped, holds over 2^(f+1) keys
      and whose keys agree on every component the query reads is scored once (one
      key: the same products and partial sums for all) and kept as a group.
    * The meter, as :func:`w_scores_pruned`: column products by
      :func:`_unchecked_setup`; a skipped node whose partial-sum bound may exceed
      the largest |raw| at the end is descended then, and its leaves whose bound
      still may are scored (not listed).
    ``stk`` (>= the number of nodes + IX_STACK entries), ``stf`` (2 IX_STACK),
    ``nb``, ``qf``: scratch (:func:`index_arrays`)."""
    Dh = q.shape[0]
    ok, nq, small, top = _unchecked_setup(q, KmE, m, I, f, mode, err, scr, qnz, qf)
    if not ok or m < 2 * KI_LEAF:
        return False, np.int64(0), np.int64(0), 0, 0, 0
    R = 2 * Dh
    if _shadow_fill(Kc, Ksh, st, m):
        Kix[R, KI_N] = 0                      # a new shift: the tree is built afresh
    update_index(Ksh, Kix, m, f)
    s = st[IX_SHIFT]
    sf = 2.0 ** (-f)
    Dh1 = float(Dh + 1)
    thr = _zero_threshold(f)
    qd = np.empty(Dh, np.float64)            # the query as float64 by component
    s_ok = np.zeros(Dh, np.bool_)
    for c in range(Dh):
        qd[c] = limbs_float(q[c, 0], q[c, 1])
        s_ok[c] = qd[c] < 0.0
    ls, lS = best_lift(Kix[R], Dh, s_ok)
    b0 = Kix[R, KI_NT]
    seen = np.int64(0)
    Mh, Ml, seen = score_keys(q, qnz, nq, small, top, Kc, b0, m, I, f, mode, err, scr, scores, seen)
    n = 0
    for j in range(b0, m):
        idx[n] = j
        n += 1
    scored = m - b0
    lim = _lim(Mh, Ml, thr)
    grouping = s == 0 and I >= 2 and m < (np.int64(1) << min(I - 1, 62)) and f <= EXP_INT64_MAX_FRAC_BITS
    gmin = (np.int64(1) << (f + 1)) if grouping else np.int64(0)    # grouping: f <= 56
    ng = 0
    # the deferred nodes fill stk from its end, the search stack from its start
    top_d = stk.shape[0]
    sp = 0
    if b0 > 0:
        root = Kix[R, KI_ROOT]
        ub, pb = _node_bound(qf, qnz, nq, Kix, R, Dh, root, s, nb, sf, Dh1, qd, ls, lS)
        stk[0] = root
        stf[0] = ub
        stf[1] = pb
        sp = 1
    while sp > 0:
        sp -= 1
        u = stk[sp]
        ub = stf[2 * sp]
        if ub < lim:
            if top_d - 1 <= sp + 2:
                return False, np.int64(0), np.int64(0), 0, 0, 0
            top_d -= 1
            stk[top_d] = u
            continue
        rr, c0 = node_record(R, Dh, u)
        cnt = Kix[rr, c0 + 2 * Dh]
        if grouping and cnt > gmin:
            same = True
            for ii in range(nq):
                c = qnz[ii]
                if Kix[rr, c0 + 2 * c] != Kix[rr, c0 + 2 * c + 1]:
                    same = False
                    break
            if same:
                if ng >= gc.shape[0]:
                    return False, np.int64(0), np.int64(0), 0, 0, 0
                v = u
                while (v & 1) == 0:                  # its leftmost leaf's first key
                    vr, v0 = node_record(R, Dh, v)
                    v = Kix[vr, v0 + 2 * Dh + 1]
                bh, bl, seen = _score_leaf_keys(q, qnz, nq, small, top, Kc, Kix, R, Dh, v >> 1, 1, I, f, mode, err,
                                                scr, scores, seen, idx, -1)
                scored += 1
                gs[ng, 0] = bh
                gs[ng, 1] = bl
                gc[ng] = cnt
                ng += 1
                if bh > Mh or (bh == Mh and bl > Ml):
                    Mh, Ml = bh, bl
                    lim = _lim(Mh, Ml, thr)
                continue
        if (u & 1) == 1:
            bh, bl, seen = _score_leaf_keys(q, qnz, nq, small, top, Kc, Kix, R, Dh, u >> 1, cnt, I, f, mode, err,
                                            scr, scores, seen, idx, n)
            n += cnt
            scored += cnt
            if bh > Mh or (bh == Mh and bl > Ml):
                Mh, Ml = bh, bl
                lim = _lim(Mh, Ml, thr)
            continue
        if sp + 2 > IX_STACK or sp + 2 >= top_d:
            return False, np.int64(0), np.int64(0), 0, 0, 0
        a = Kix[rr, c0 + 2 * Dh + 1]
        b = Kix[rr, c0 + 2 * Dh + 2]
        ua, pa = _node_bound(qf, qnz, nq, Kix, R, Dh, a, s, nb, sf, Dh1, qd, ls, lS)
        ubb, pbb = _node_bound(qf, qnz, nq, Kix, R, Dh, b, s, nb, sf, Dh1, qd, ls, lS)
        if ua > ubb:                          # the larger bound on top
            a, b, ua, ubb, pa, pbb = b, a, ubb, ua, pbb, pa
        stk[sp] = a
        stf[2 * sp] = ua
        stf[2 * sp + 1] = pa
        stk[sp + 1] = b
        stf[2 * sp + 2] = ubb
        stf[2 * sp + 3] = pbb
        sp += 2
    # the meter: skipped nodes whose partial sums may pass the largest |raw|
    track_maxabs(np.int64(0), seen, err)
    for i in range(top_d, stk.shape[0]):
        stk[0] = stk[i]
        sp = 1
        while sp > 0:
            sp -= 1
            u = stk[sp]
            _, pb = _node_bound(qf, qnz, nq, Kix, R, Dh, u, s, nb, sf, Dh1, qd, ls, lS)
            if pb <= _meter_floor(err):
                continue
            rr, c0 = node_record(R, Dh, u)
            if (u & 1) == 1:
                _, _, sn = _score_leaf_keys(q, qnz, nq, small, top, Kc, Kix, R, Dh, u >> 1, Kix[rr, c0 + 2 * Dh],
                                            I, f, mode, err, scr, scores, np.int64(0), idx, -1)
                track_maxabs(np.int64(0), sn, err)
                continue
            if sp + 2 > IX_STACK or sp + 2 > i:
                return False, np.int64(0), np.int64(0), 0, 0, 0
            stk[sp] = Kix[rr, c0 + 2 * Dh + 1]
            stk[sp + 1] = Kix[rr, c0 + 2 * Dh + 2]
            sp += 2
    idx[:n].sort()
    return True, Mh, Ml, n, ng, scored


@njit(cache=True)
def _shift_mag(sh, sl, Mh, Ml):
    """(ok, |s - M|) for s <= M as an int64 when it is below 2^63 (ok False: larger)."""
    ns, s_h, s_l = sign_magnitude(sh, sl)
    nm, m_h, m_l = sign_magnitude(Mh, Ml)
    if not nm and not ns:                      # 0 <= s <= M
        dh, dl = magnitude_sub(m_h, m_l, s_h, s_l)
    elif nm:                                   # s <= M < 0: |s| >= |M|
        dh, dl = magnitude_sub(s_h, s_l, m_h, m_l)
    else:                                      # s < 0 <= M: M + |s|
        if m_h != 0 or s_h != 0 or m_l > M63 - s_l:
            return False, np.int64(0)
        return True, m_l + s_l
    if dh != 0:
        return False, np.int64(0)
    return True, dl


@njit(cache=True)
def _add3(acc, k, bh, bl):
    """acc[k] (carry, hi, lo) += the magnitude (bh, bl): exact to 2^189."""
    l = acc[k, 2]
    if l > M63 - bl:
        l = l - (M63 - bl) - 1
        carry = 1
    else:
        l = l + bl
        carry = 0
    h = acc[k, 1]
    if h > M63 - bh - carry:
        h = h - (M63 - bh - carry) - 1
        acc[k, 0] += 1
    else:
        h = h + bh + carry
    acc[k, 1] = h
    acc[k, 2] = l


@njit(cache=True)
def _fit3(pos, neg, k, I, f, mode, err, out):
    """out[k] = pos[k] - neg[k] (three-limb magnitudes), range-checked once."""
    pc, ph, pl = pos[k, 0], pos[k, 1], pos[k, 2]
    nc, nh, nl = neg[k, 0], neg[k, 1], neg[k, 2]
    sign = pc > nc or (pc == nc and (ph > nh or (ph == nh and pl >= nl)))
    if not sign:
        pc, ph, pl, nc, nh, nl = nc, nh, nl, pc, ph, pl
    l = pl - nl
    borrow = 0
    if l < 0:
        l = l + M63 + 1
        borrow = 1
    h = ph - nh - borrow
    borrow = 0
    if h < 0:
        h = h + M63 + 1
        borrow = 1
    c = pc - nc - borrow
    if c > 0:                                  # |out| >= 2^126
        oh, ol = overflow_raw(not sign, I, f, mode, OP_ADD, 126 + bit_length(c) - f, err)
    else:
        sh, sl = signed_limbs(not sign, h, l)
        oh, ol = w_fit(sh, sl, I, f, mode, OP_ADD, err)
    out[k, 0] = oh
    out[k, 1] = ol


@njit(cache=True)
def _zero_threshold(f):
    """A float64 threshold t of the pruning: a score below M + t has weight exactly
    0 (exp(-x) 2^f < 1/2 for x > (f + 1) ln 2): fixedpoint.exp_zero_threshold up
    to f = 56, past it the same bound in float64 (it passes int64 from f = 58)."""
    if f <= EXP_INT64_MAX_FRAC_BITS:
        return float(exp_zero_threshold(f))
    return -((f + 1) * 0.6931471805599453 * 2.0 ** f * (1.0 + 1e-12)) - 2.0


@njit(cache=True)
def _shift_mag3(sh, sl, Mh, Ml):
    """(c, hi, lo): the magnitude M - s = c 2^126 + hi 2^63 + lo for s <= M (both
    below 2^126 in magnitude, so the shift is below 2^127)."""
    ns, s_h, s_l = sign_magnitude(sh, sl)
    nm, m_h, m_l = sign_magnitude(Mh, Ml)
    if not nm and not ns:                      # 0 <= s <= M
        dh, dl = magnitude_sub(m_h, m_l, s_h, s_l)
        return np.int64(0), dh, dl
    if nm:                                     # s <= M < 0
        dh, dl = magnitude_sub(s_h, s_l, m_h, m_l)
        return np.int64(0), dh, dl
    if m_l > M63 - s_l:                       # s < 0 <= M: M + |s|, with carries
        lo = m_l - (M63 - s_l) - 1
        carry = 1
    else:
        lo = m_l + s_l
        carry = 0
    if m_h > M63 - s_h - carry:                # m_h >= 1 here: no intermediate leaves int64
        return np.int64(1), (m_h - 1) - (M63 - s_h - carry), lo
    return np.int64(0), m_h + s_h + carry, lo


@njit(cache=True)
def exp_shift_wide(c, dh, dl, I, f, mode, err, e2):
    """exp(-(c 2^126 + dh 2^63 + dl) / 2^f) 2^f rounded (wide.w_exp_neg), fitted
    as fx_attend fits it: only exp(0) = 2^f can leave the format (at I = 0); the
    error recorded in err, the |raw| tracked."""
    if c == 0 and dh == 0 and dl == 0:
        if I == 0:
            return overflow_raw(False, I, f, mode, OP_EXP, np.int64(1), err)
        eh, el = (np.int64(0), np.int64(1) << f) if f < 63 else (np.int64(1) << (f - 63), np.int64(0))
        track_maxabs(eh, el, err)
        return eh, el
    e2[E_CODE] = 0
    eh, el = w_exp_neg(c, dh, dl, f, e2)
    if e2[E_CODE] != 0:
        record_error(err, e2[E_CODE], e2[E_OP], e2[E_NEED])
    track_maxabs(eh, el, err)
    return eh, el


@njit(cache=True, inline='always')
def _exp_shift(dm, I, f, mode, err, e2, count):
    """exp(-dm) as fx_attend computes it for ``count`` keys of the shift dm: its
    error recorded in err, its clamps counted count times (exp(0) = 2^f clamps at
    I = 0), its |raw| tracked once (the same value each time)."""
    e2[E_CODE] = 0
    e2[E_MAXABS] = 0
    e2[E_SAT] = 0
    e = exp_raw(-dm, min(I, 62 - f), f, mode, e2)
    if e2[E_CODE] != 0:
        record_error(err, e2[E_CODE], e2[E_OP], e2[E_NEED])
    err[E_SAT] += count * e2[E_SAT]
    track_maxabs(np.int64(0), e, err)
    return e


@njit(cache=True)
def w_attend(scores, Mh, Ml, m, values, I, f, mode, err, e2, scr, weights, acc, out, idx, nidx):
    """fixedpoint.fx_attend on wide scores and values, M = (Mh, Ml) the largest
    score; the weights (at most 2^f) go to ``weights`` (m, 2) as two-limb raws.
    ``nidx`` < 0: every key j < m; else only the keys idx[:nidx] (ascending: the
    others have weight exactly 0, :func:`w_scores_pruned`). ``e2`` is a scratch
    fixedpoint error array (exp's own), ``acc`` scratch (2 d, 3)."""
    w_attend_groups(scores, Mh, Ml, m, values, I, f, mode, err, e2, scr, weights, acc, out, idx, nidx,
                    np.zeros((0, 2), np.int64), np.zeros(0, np.int64), 0)


@njit(cache=True)
def w_attend_groups(scores, Mh, Ml, m, values, I, f, mode, err, e2, scr, weights, acc, out, idx, nidx, gs, gc, ng):
    """:func:`w_attend` with, besides the listed keys, ``ng`` groups of the key-value
    index (:func:`w_index_scores`): gc[g] > 2^(f+1) keys of the score gs[g] each.
    Each key of a group has e = exp(s - M) (recorded once: the same value) and the
    weight round(e 2^f / Z) = 0 (Z >= gc[g] e), so a group adds gc[g] e to Z and
    nothing to the output; no partial sum of Z can overflow (the index groups only
    when m < 2^(I-1), so Z <= m 2^f < 2^(I+f-1)), and the largest one is the final
    Z in any order, so Z and the meter are the plain definition's."""
    d = values.shape[1]
    for k in range(d):
        out[k, 0] = 0
        out[k, 1] = 0
    if m == 0:
        return
    cnt = m if nidx < 0 else nidx
    wide_exp = f > EXP_INT64_MAX_FRAC_BITS
    thr = exp_zero_threshold(min(f, EXP_INT64_MAX_FRAC_BITS))
    Zh, Zl = np.int64(0), np.int64(0)
    small = Mh == 0 and Ml < (np.int64(1) << 62) and Ml > -(np.int64(1) << 62)
    for jj in range(cnt):
        j = jj if nidx < 0 else idx[jj]
        sh, sl = scores[j, 0], scores[j, 1]
        weights[j, 0] = 0
        weights[j, 1] = 0
        if wide_exp:                          # the shift's three limbs, exp in 210-bit fixed point
            c3, dh, dl = _shift_mag3(sh, sl, Mh, Ml)
            eh, el = exp_shift_wide(c3, dh, dl, I, f, mode, err, e2)
            if eh != 0 or el != 0:
                weights[j, 0] = eh
                weights[j, 1] = el
                Zh, Zl = w_add(Zh, Zl, eh, el, I, f, mode, err)
            continue
        if small and sh == 0 and sl > -(np.int64(1) << 62):    # both below 2^62: M - s < 2^63
            ok, dm = True, Ml - sl
        else:
            ok, dm = _shift_mag(sh, sl, Mh, Ml)
        if ok and -dm >= thr:
            ej = _exp_shift(dm, I, f, mode, err, e2, np.int64(1))
            weights[j, 1] = ej
            Zh, Zl = w_add(Zh, Zl, np.int64(0), ej, I, f, mode, err)
    for g in range(ng):                       # none past f = 56: a group needs over 2^(f+1) keys
        ok, dm = _shift_mag(gs[g, 0], gs[g, 1], Mh, Ml)
        if ok and -dm >= thr:
            eg = _exp_shift(dm, I, f, mode, err, e2, gc[g])
            ph, pl = mul_limbs(gc[g], eg)         # gc e = ph 2^62 + pl: limbs (ph >> 1, (ph & 1) 2^62 + pl)
            Zh, Zl = w_add(Zh, Zl, ph >> 1, ((ph & 1) << 62) | pl, I, f, mode, err)
    for k in range(2 * d):
        acc[k, 0] = 0
        acc[k, 1] = 0
        acc[k, 2] = 0
    for jj in range(cnt):
        j = jj if nidx < 0 else idx[jj]
        eh, el = weights[j, 0], weights[j, 1]
        if eh != 0 or el != 0:
            wh, wl = w_div(eh, el, Zh, Zl, I, f, mode, err)
            weights[j, 0] = wh                   # 0 <= w_j <= 1
            weights[j, 1] = wl
            if wh != 0 or wl != 0:
                for k in range(d):
                    vh, vl = values[j, k, 0], values[j, k, 1]
                    if vh != 0 or vl != 0:
                        ph, pl = w_mul(wh, wl, vh, vl, I, f, mode, err, scr)
                        neg, mh, ml = sign_magnitude(ph, pl)
                        _add3(acc, d + k if neg else k, mh, ml)
    for k in range(d):
        _fit3(acc[:d], acc[d:], k, I, f, mode, err, out)
