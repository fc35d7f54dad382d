"""Attention kernels on int64 raws: scores, the pruned search over block bounds, the sparse softmax, the key cache.

:func:`attention_scores` scores a query against the key cache (or, with a
pruning cache, only the blocks whose bound can reach the maximum: exact);
:func:`attend_sparse` takes the softmax over the scores that are not exactly
0 after exp; :func:`store_key` appends a key and its block bounds. Layout of
the cache and the pruning rule: docs/machine.md "Pruned attention" and
docs/internals/machine.md#kernels.
"""
from __future__ import annotations


import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, OP_ADD, exp_raw,
    fit_value, exp_zero_threshold, fx_add, fx_div, fx_mul,
    mul_round_abs,
)
from .heap import heap_pop, heap_push
from .keyindex import KI_PAUSE, ST_ABORTED, ST_EFFECTIVE, has_index, index_rows, index_scores


@njit(cache=True)
def attention_scores(q, KhT, KmT, m, I, f, mode, err, qnz, cm, scores, index=True):
    """scores[j] = sum_c round(q_c KhT[c, j]) for j < m: products rounded half to
    even, each partial sum range-checked, zero terms skipped (fx_mul / fx_add in
    component order). Returns max_j scores[j].

    ``KhT`` is one head's key cache stored column-major (component c of key j at
    KhT[c, j]); ``KmT[c, j]`` = max_{i <= j} |KhT[c, i]| (the running column bound,
    kept beside the cache by :func:`model_step`); ``qnz``, ``cm`` are scratch (>= Dh).

    The same numbers as calling fx_mul / fx_add, faster: when the column bounds
    show that no product reaches 2^62 and no partial sum can leave the range, it
    runs on plain int64 a column at a time (a loop the compiler vectorises), and
    the largest |raw| touched is tracked exactly: per column, the largest
    |product| is round(|q_c| max_j |k_jc|) (rounding half to even is odd and
    monotone), and every partial sum is looked at. Otherwise it runs key by key
    with checks, and the first key where a check fails is recomputed with fx_mul
    / fx_add, which record the overflow (or count the saturation) exactly as they
    always do, in the same order as the plain definition.

    Pruned attention (:func:`_pruned_scores`), in that unchecked case only, when
    the cache carries block bounds (``KmT`` has 2 Dh rows, :func:`cache_rows`) and
    ``scores`` has room for the list of visited blocks (>= 2 capacity entries,
    :func:`scores_length`): only the keys of blocks whose scores can get a nonzero
    weight are scored; the others keep stale ``scores`` entries, and the header
    scores[capacity] = number of visited leaf blocks (their ids follow) tells
    :func:`attend_sparse` which keys to read. Header -1: every score was computed.

    A head where the position blocks kept over a quarter of the keys (paused for
    PRUNE_PAUSE steps) tries, when its cache has the rows of
    :mod:`constructions.machine.keyindex` (``KmT`` with ``keyindex.index_rows(Dh)`` rows, sessions only), the
    exact key-value index instead (:func:`constructions.machine.keyindex.index_scores`,
    same unchecked case): header -2 - n, the n kept positions ascending, then the
    groups of equal keys. It stays on it while it scores at most a quarter of the
    keys; otherwise the plain loop for PRUNE_PAUSE steps (either way the same numbers).

    ``index`` = None: the caller's caches never carry the index rows (the batch
    loop, :func:`forward_loop`), so this version is compiled without the index
    branch (``index is None`` is decided when numba compiles); the numbers are
    the same, since without those rows the index is never tried."""
    Dh = q.shape[0]
    cap = KhT.shape[1]
    ext = scores.shape[0] >= 2 * cap
    if ext:
        scores[cap] = -1
    nq = np.int64(0)        # typed: a literal 0 here would specialise every pruning kernel a second time
    for c in range(Dh):
        if q[c] != 0:
            qnz[nq] = c
            nq += 1
    lim = np.int64(1) << (I + f)
    half = (np.int64(1) << (f - 1)) if f > 0 else np.int64(0)
    mx = err[E_MAXABS]
    # Column bounds: if |q_c| max_j |K[j, c]| < 2^62 for every c and the sum of the
    # rounded bounds is below 2^(I+f), no product and no partial sum can leave the
    # range, and the loop needs no checks (round half to even, branch-free, exact
    # for signed p with an arithmetic shift: (p + 2^(f-1) - 1 + bit_f(p)) >> f).
    safe = True
    bound = 0.0
    for ci in range(nq):
        a = KmT[qnz[ci], m - 1]
        cm[ci] = a
        qc = q[qnz[ci]]
        pb = float(qc if qc > 0 else -qc) * float(a)
        if not (pb < 4.0e18):
            safe = False
        bound += pb * 2.0 ** (-f) + 1.0
    if safe and bound < 0.5 * float(lim):
        hm1 = half - 1 if f > 0 else np.int64(0)
        if nq == 0:
            for j in range(m):
                scores[j] = 0
            return np.int64(0)
        if (ext and m > PRUNE_MIN_KEYS and KmT.shape[0] >= 2 * Dh and cap >= PRUNE_MIN_CAPACITY
                and exp_zero_threshold(f) > -(np.int64(1) << 61)):
            # a head where pruning kept over a quarter of the keys runs the plain loop
            # for its next PRUNE_PAUSE steps (either way the same numbers)
            if KmT[Dh, PRUNE_HINT] > 0:
                # a head the position blocks do not prune tries the key-value index
                # (constructions/machine/keyindex.py) while it scores at most a quarter of the keys
                use_index = index is not None and has_index(KmT, Dh)
                if use_index and KmT[2 * Dh, KI_PAUSE] > 0:
                    KmT[2 * Dh, KI_PAUSE] -= 1
                    use_index = False
                # `index is not None` tested on its own first: numba drops the branch
                # (and never compiles index_scores) when index is None
                if index is not None and use_index:
                    M, status = index_scores(q, KhT, KmT, m, I, f, err, qnz, nq, cm, scores)
                    if status == ST_EFFECTIVE:
                        return M
                    KmT[2 * Dh, KI_PAUSE] = PRUNE_PAUSE
                    KmT[Dh, PRUNE_HINT] -= 1
                    if status != ST_ABORTED:
                        return M
                    mx = err[E_MAXABS]
                else:
                    KmT[Dh, PRUNE_HINT] -= 1
            else:
                M = _pruned_scores(q, KhT, KmT, m, f, err, qnz, nq, cm, scores)
                if 4 * (scores[cap] << PRUNE_LEAF_LOG) > m:
                    KmT[Dh, PRUNE_HINT] = PRUNE_PAUSE
                KmT[Dh, PRUNE_HINT + 1] += 1
                KmT[Dh, PRUNE_HINT + 2] += scores[cap] << PRUNE_LEAF_LOG
                KmT[Dh, PRUNE_HINT + 3] += m
                return M
        smax = np.int64(0)
        for ci in range(nq):
            qc = q[qnz[ci]]
            col = KhT[qnz[ci]]
            pa = (qc if qc > 0 else -qc) * cm[ci]
            mx = max(mx, (pa + hm1 + ((pa >> f) & 1)) >> f if f > 0 else pa)
            first = ci == 0
            for j in range(m):
                p = qc * col[j]
                r = (p + hm1 + ((p >> f) & 1)) >> f if f > 0 else p
                sc = r if first else scores[j] + r
                scores[j] = sc
                smax = max(smax, sc if sc >= 0 else -sc)
        return _record_and_max(scores, m, max(mx, smax), err)
    for j in range(m):
        s = np.int64(0)
        ok = True
        for ci in range(nq):
            c = qnz[ci]
            kc = KhT[c, j]
            if kc != 0:
                qc = q[c]
                # the rounded |product| exactly (two limbs past 2^62); -1: far out of range
                r = mul_round_abs(qc if qc > 0 else -qc, kc if kc > 0 else -kc, f)
                if r < 0 or r >= lim:
                    ok = False
                    break
                if r > mx:
                    mx = r
                s = s - r if (qc < 0) != (kc < 0) else s + r
                a = s if s >= 0 else -s
                if a >= lim:
                    ok = False
                    break
                if a > mx:
                    mx = a
        if not ok:
            if mx > err[E_MAXABS]:
                err[E_MAXABS] = mx
            s = np.int64(0)
            for ci in range(nq):
                c = qnz[ci]
                kc = KhT[c, j]
                if kc != 0:
                    s = fx_add(s, fx_mul(q[c], kc, I, f, mode, err), I, f, mode, err)
            mx = err[E_MAXABS]
        scores[j] = s
    return _record_and_max(scores, m, mx, err)


@njit(cache=True)
def _record_and_max(scores, m, mx, err):
    """Record the largest |raw| ``mx`` touched in ``err`` and return max_j scores[j] (j < m)."""
    if mx > err[E_MAXABS]:
        err[E_MAXABS] = mx
    M = scores[0]
    for j in range(1, m):
        M = max(M, scores[j])
    return M


# ---------------------------------------------------------------------------
# Pruned attention: block bounds of the key cache (docs/machine.md "Pruned attention").
#
# Layout. A pruning cache keeps, beside the running column bounds KmT[0:Dh], Dh more
# rows KmT[Dh + c] holding, for every block of a tree over the key positions, four
# fields of component c at columns 4 node + (0: max, 1: min, 2: max increment,
# 3: min increment), the increments k_{j+1,c} - k_{j,c} over the consecutive pairs
# inside the block. Level 1 blocks (leaves) hold PRUNE_LEAF keys, each level
# 2^PRUNE_BRANCH_LOG times more, PRUNE_LEVELS levels; block b of level l is node
# 2^l b + 2^(l-1) - 1 (an in-order numbering: levels never collide, and the column
# does not depend on the capacity, so a grown cache keeps its bounds). With
# capacity >= PRUNE_MIN_CAPACITY every node of every position fits in the columns.
PRUNE_LEAF_LOG = 4


PRUNE_LEAF = 1 << PRUNE_LEAF_LOG


PRUNE_BRANCH_LOG = 2


PRUNE_LEVELS = 8                 # block sizes 16, 64, ..., 16 * 4^7 = 2^18 keys


PRUNE_MIN_CAPACITY = 1024


PRUNE_MIN_KEYS = 2 * PRUNE_LEAF  # fewer keys: the plain loop is as fast


PRUNE_BATCH_MIN_N = 256          # forward_batch: rows this long get a pruning cache


PRUNE_HINT = 4 * 255             # KmT[Dh, PRUNE_HINT .. + 3]: node 255 is never a block (no level l <= 8 has


#                                  node = 255 mod 256): steps left on the plain loop, pruned calls, keys scored, keys
PRUNE_PAUSE = 32


def cache_rows(Dh: int, prune: bool) -> int:
    """Rows of one head's ``Km`` (the column bounds, plus the block bounds of the
    pruned attention and the key-value index of :mod:`constructions.machine.keyindex` if
    ``prune``)."""
    return index_rows(Dh) if prune else Dh


def cache_capacity(capacity: int, prune: bool) -> int:
    """The capacity to allocate: a pruning cache holds >= PRUNE_MIN_CAPACITY keys."""
    return max(int(capacity), PRUNE_MIN_CAPACITY) if prune else max(1, int(capacity))


def scores_length(capacity: int, prune: bool) -> int:
    """Length of the ``scores`` scratch: the pruned attention keeps the list of
    visited blocks, a stack and the deferred blocks behind the ``capacity`` scores."""
    return 2 * capacity if prune else capacity


@njit(cache=True, inline='always')
def _level_log(level):
    return PRUNE_LEAF_LOG + PRUNE_BRANCH_LOG * (level - 1)


@njit(cache=True, inline='always')
def _node_col(level, b):
    return 4 * ((b << level) + (np.int64(1) << (level - 1)) - 1)


@njit(cache=True, inline='always')
def _rne(p, f, hm1):
    """round half to even of p / 2^f (p signed, |p| < 2^62), branch-free."""
    return (p + hm1 + ((p >> f) & 1)) >> f if f > 0 else p


@njit(cache=True)
def _node_bound(q, qnz, nq, KhT, KmT, cm, level, b, m, f, hm1):
    """Bounds over the keys j of block b of ``level`` (j < m) for the query q:
    (ub, ubf, pb) with ub >= every score (exact integer, the block's signed column
    box: round is monotone, so round(q_c k) <= round(q_c kmax_c) for q_c > 0 and
    <= round(q_c kmin_c) for q_c < 0), ubf >= every score (a float, from the
    increments: k_jc lies between k_ac + r dmin_c and k_ac + r dmax_c for
    j = a + r, so sum_c q_c k_jc is at most a linear function of r, largest at
    r = 0 or r = R, and round(x) <= x + 1/2; a relative margin covers the float
    rounding), and pb >= |every partial sum| of every key (the partial sums lie
    between the box's low and high partial sums). The box is clipped to the
    column bounds cm (|k_jc| <= cm for every key j < m)."""
    Dh = q.shape[0]
    sh = _level_log(level)
    a = b << sh
    e = min(a + (np.int64(1) << sh), m) - 1
    R = float(e - a)
    col = _node_col(level, b)
    hi = np.int64(0)
    lo = np.int64(0)
    pb = np.int64(0)
    l0 = 0.0
    lr = 0.0
    labs = 0.0
    for ci in range(nq):
        c = qnz[ci]
        qc = q[c]
        row = KmT[Dh + c]
        kmax = min(row[col], cm[ci])
        kmin = max(row[col + 1], -cm[ci])
        if qc > 0:
            hi += _rne(qc * kmax, f, hm1)
            lo += _rne(qc * kmin, f, hm1)
            dl = float(row[col + 2])
        else:
            hi += _rne(qc * kmin, f, hm1)
            lo += _rne(qc * kmax, f, hm1)
            dl = float(row[col + 3])
        pb = max(pb, max(hi if hi >= 0 else -hi, lo if lo >= 0 else -lo))
        fq = float(qc)
        ka = float(KhT[c, a])
        t0 = fq * ka
        t1 = fq * (ka + R * dl)
        l0 += t0
        lr += t1
        labs += abs(t0) + abs(t1) + abs(fq * R * dl)
    ubf = (max(l0, lr) + 1e-12 * labs) * 2.0 ** (-f) + 0.5 * nq + 1.0
    return hi, ubf, pb


@njit(cache=True)
def _skippable(ub, ubf, M, thr):
    """True if every score under the bounds (ub, ubf) is below M + thr (weight 0)."""
    if ub < M + thr:
        return True
    Mt = float(M) + float(thr)
    return ubf + 1e-12 * (abs(ubf) + abs(Mt)) + 2.0 < Mt


@njit(cache=True)
def _score_block(q, qnz, nq, KhT, j0, j1, f, hm1, scores):
    """scores[j] for j0 <= j < j1 on plain int64 (the unchecked loop of
    :func:`attention_scores`); returns (max score, largest |partial sum|)."""
    smax = np.int64(0)
    for ci in range(nq):
        qc = q[qnz[ci]]
        col = KhT[qnz[ci]]
        first = ci == 0
        for j in range(j0, j1):
            r = _rne(qc * col[j], f, hm1)
            sc = r if first else scores[j] + r
            scores[j] = sc
            smax = max(smax, sc if sc >= 0 else -sc)
    M = scores[j0]
    for j in range(j0 + 1, j1):
        M = max(M, scores[j])
    return M, smax


PRUNE_HEAP = 256                 # entries of the best-first heap of _pruned_scores


@njit(cache=True)
def _heap_key(ub, ubf):
    """The heap order of a block: the smaller of its two bounds, as an int64."""
    v = min(float(ub), ubf)
    if v > 4.0e18:
        return np.int64(4000000000000000000)
    if v < -4.0e18:
        return -np.int64(4000000000000000000)
    return np.int64(v)


@njit(cache=True)
def _pruned_scores(q, KhT, KmT, m, f, err, qnz, nq, cm, scores):
    """:func:`attention_scores` (unchecked case) visiting only the blocks whose
    scores can reach M + exp_zero_threshold(f); the same M, the same scores of every
    key whose weight can be nonzero, the same largest |raw| in err.

    1. Best-first descent from the top blocks (the block with the largest bound
       first) to a leaf; its exact scores give M0 <= M. (Or, if the head's largest
       score lay in its hinted leaf the step before, the exact scores of the leaf
       of the last maximum and the next one.)
    2. Depth-first, in key order: a block whose bound is below M_cur + thr (M_cur
       the largest exact score so far, M_cur <= M) has every weight exactly 0 and is
       skipped; a leaf that is not is scored exactly and listed. Every key not
       scored is below M_cur + thr < M, so M = M_cur at the end.
    3. The meter: every product is at most the column product round(|q_c| cm_c)
       (recorded, as in the unchecked loop); the partial sums of a skipped block
       are at most its pb. A skipped block with pb above the largest |raw| of
       everything else is looked at again at the end: its leaves whose pb is still
       above it are scored exactly (their partial sums recorded), so the recorded
       maximum is the plain definition's.
    Writes the header scores[cap] = number of listed leaves and their ids after it."""
    cap = KhT.shape[1]
    hm1 = ((np.int64(1) << (f - 1)) - 1) if f > 0 else np.int64(0)
    thr = exp_zero_threshold(f)
    mx = err[E_MAXABS]
    for ci in range(nq):
        qc = q[qnz[ci]]
        mx = max(mx, _rne((qc if qc > 0 else -qc) * cm[ci], f, hm1))
    # the top level: the largest whose blocks are smaller than m
    top = 1
    while top < PRUNE_LEVELS and (np.int64(1) << _level_log(top + 1)) < m:
        top += 1
    ntop = ((m - 1) >> _level_log(top)) + 1
    # 1. best-first descent (a max-heap of (bound, node) in the tail of scores, at
    # the deferred blocks' place) to the first leaf popped; if the heap fills up,
    # greedy descent from the node popped last
    vis = cap + 1
    stk = vis + (cap >> PRUNE_LEAF_LOG) + 1
    dfr = stk + (PRUNE_LEVELS << PRUNE_BRANCH_LOG) + (cap >> _level_log(PRUNE_LEVELS)) + 2
    # a head whose largest score was, the step before, in the leaf its hint named
    # (or the next one) starts from those two leaves instead (KmT[Dh + 1, PRUNE_HINT]:
    # that step's argmax leaf + 1, [.., PRUNE_HINT + 1]: 1 if it was the hinted one)
    Dh = q.shape[0]
    hint = KmT[Dh + 1, PRUNE_HINT] - 1 if Dh >= 2 else np.int64(-1)
    use_hint = Dh >= 2 and hint >= 0 and KmT[Dh + 1, PRUNE_HINT + 1] == 1 and (hint << PRUNE_LEAF_LOG) < m
    gl = np.int64(-1)
    if use_hint:
        g0 = hint << PRUNE_LEAF_LOG
        M, smax = _score_block(q, qnz, nq, KhT, g0, min(g0 + PRUNE_LEAF, m), f, hm1, scores)
        mx = max(mx, smax)
        ml = hint
        if g0 + PRUNE_LEAF < m:
            bm, smax = _score_block(q, qnz, nq, KhT, g0 + PRUNE_LEAF, min(g0 + 2 * PRUNE_LEAF, m), f, hm1, scores)
            mx = max(mx, smax)
            if bm > M:
                M = bm
                ml = hint + 1
    else:
        nh = np.int64(0)
        for b in range(ntop):
            ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, top, b, m, f, hm1)
            nh = heap_push(scores, dfr, nh, _heap_key(ub, ubf), b * 16 + top)
        level = top
        best = np.int64(0)
        while nh > 0:
            code = scores[dfr + 1]
            nh = heap_pop(scores, dfr, nh)
            level = code & 15
            best = code >> 4
            if level == 1 or nh + (1 << PRUNE_BRANCH_LOG) > PRUNE_HEAP:
                break
            c0 = best << PRUNE_BRANCH_LOG
            for b in range(c0, c0 + (1 << PRUNE_BRANCH_LOG)):
                if (b << _level_log(level - 1)) >= m:
                    break
                ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, level - 1, b, m, f, hm1)
                nh = heap_push(scores, dfr, nh, _heap_key(ub, ubf), b * 16 + level - 1)
        while level > 1:
            level -= 1
            c0 = best << PRUNE_BRANCH_LOG
            bestv = -np.inf
            for b in range(c0, c0 + (1 << PRUNE_BRANCH_LOG)):
                if (b << _level_log(level)) >= m:
                    break
                ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, level, b, m, f, hm1)
                v = min(float(ub), ubf)
                if v > bestv:
                    bestv = v
                    best = b
        gl = best
        g0 = gl << PRUNE_LEAF_LOG
        M, smax = _score_block(q, qnz, nq, KhT, g0, min(g0 + PRUNE_LEAF, m), f, hm1, scores)
        mx = max(mx, smax)
        ml = gl
    # 2. depth-first in key order; tail of scores: [cap] count, [cap+1 ..] visited
    # leaves, then the stack, then the deferred blocks (level, b, pb)
    nv = 0
    sp = 0
    nd = 0
    for b in range(ntop - 1, -1, -1):
        scores[stk + sp] = b * 16 + top
        sp += 1
    while sp > 0:
        sp -= 1
        code = scores[stk + sp]
        level = code & 15
        b = code >> 4
        if level == 1 and b == gl:
            scores[vis + nv] = b
            nv += 1
            continue
        ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, level, b, m, f, hm1)
        if _skippable(ub, ubf, M, thr):
            if pb > mx:
                scores[dfr + 2 * nd] = code
                scores[dfr + 2 * nd + 1] = pb
                nd += 1
            continue
        if level == 1:
            j0 = b << PRUNE_LEAF_LOG
            bm, smax = _score_block(q, qnz, nq, KhT, j0, min(j0 + PRUNE_LEAF, m), f, hm1, scores)
            if bm > M:
                M = bm
                ml = b
            mx = max(mx, smax)
            scores[vis + nv] = b
            nv += 1
            continue
        c0 = b << PRUNE_BRANCH_LOG
        sh = _level_log(level - 1)
        for cb in range(c0 + (1 << PRUNE_BRANCH_LOG) - 1, c0 - 1, -1):
            if (cb << sh) < m:
                scores[stk + sp] = cb * 16 + level - 1
                sp += 1
    # 3. skipped blocks whose partial sums might exceed the meter
    for i in range(nd):
        if scores[dfr + 2 * i + 1] <= mx:
            continue
        code = scores[dfr + 2 * i]
        level = code & 15
        b = code >> 4
        sh = _level_log(level)
        l0 = (b << sh) >> PRUNE_LEAF_LOG
        l1 = (min((b + 1) << sh, m) + PRUNE_LEAF - 1) >> PRUNE_LEAF_LOG
        for lb in range(l0, l1):
            ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, np.int64(1), lb, m, f, hm1)
            if pb > mx:
                j0 = lb << PRUNE_LEAF_LOG
                bm, smax = _score_block(q, qnz, nq, KhT, j0, min(j0 + PRUNE_LEAF, m), f, hm1, scores)
                mx = max(mx, smax)
    scores[cap] = nv
    if Dh >= 2:
        KmT[Dh + 1, PRUNE_HINT + 1] = 1 if hint >= 0 and (ml == hint or ml == hint + 1) else 0
        KmT[Dh + 1, PRUNE_HINT] = ml + 1
    if mx > err[E_MAXABS]:
        err[E_MAXABS] = mx
    return M


PRUNE_EXP_MEMO = 64              # gaps kept by _exp_kept (the last PRUNE_EXP_MEMO + 3 entries of scores)


@njit(cache=True)
def _exp_memo_check(scores, I, f):
    """Reset the kept exps at the end of ``scores`` unless they were made for (I, f)."""
    n = scores.shape[0]
    if scores[n - 1] != f or scores[n - 2] != I:
        scores[n - 1] = f
        scores[n - 2] = I
        for r in range(PRUNE_EXP_MEMO + 1):
            scores[n - 3 - r] = -1


@njit(cache=True)
def _exp_kept(d, I, f, mode, err, scores):
    """exp_raw(d) for thr <= d <= 0 with I >= 1, each gap computed once per format
    and kept at the end of ``scores``: the same value and the same effect on err (the
    exp lies in [0, 2^f], below 2^(I+f), so its only effect is the largest |raw|,
    recorded here on reuse; nothing is kept once err holds an error)."""
    n = scores.shape[0]
    e = scores[n - 3 + d]
    if e >= 0:
        if e > err[E_MAXABS]:
            err[E_MAXABS] = e
        return e
    e = exp_raw(d, I, f, mode, err)
    if err[E_CODE] == 0:
        scores[n - 3 + d] = e
    return e


@njit(cache=True)
def attend_sparse(scores, m, M, values, I, f, mode, err, idx, out):
    """The softmax attention of :func:`fx_attend` (docs/theory.md §1) given the
    maximum score M, the same numbers in the same order of operations, visiting
    only the keys whose weight
    can be nonzero: e_j = round(exp(s_j - M)) is exactly 0 when s_j - M is below
    ``exp_zero_threshold(f)``, and such keys add exactly 0 to Z and to the output.
    The scan runs a block of 64 keys at a time (a block whose largest score is
    below the threshold is skipped whole).

    After the pruned :func:`attention_scores` (``scores`` longer than twice the
    capacity ``values.shape[0]`` and scores[capacity] = n >= 0) only the n leaf
    blocks listed after the header hold computed scores: only their keys are
    looked at (every other key's score is below M + threshold, weight 0). After
    the key-value index (scores[capacity] = -2 - n): the n positions listed,
    ascending (the plain order), then the index's groups (score, count), whose
    keys all get weight 0 and enter only Z (see keyindex.index_scores).

    Overwrites ``scores`` and uses ``idx`` (>= m entries) as scratch; the
    per-key weights are not kept (use fx_attend to record them)."""
    d = values.shape[1]
    for k in range(d):
        out[k] = 0
    if m == 0:
        return
    thr = exp_zero_threshold(f)
    nc = 0
    cap = values.shape[0]
    pruned = scores.shape[0] >= 2 * cap and scores[cap] >= 0
    listed = scores.shape[0] >= 2 * cap and scores[cap] <= -2
    # after the pruned scores, exps of the few gaps r = M - s_j <= PRUNE_EXP_MEMO are kept
    # across calls at the end of ``scores`` (:func:`_exp_kept`)
    keep = (pruned or listed) and I >= 1 and -thr <= PRUNE_EXP_MEMO
    if keep:
        _exp_memo_check(scores, I, f)
    ngroups = 0
    gbase = 0
    if listed:                     # the key-value index's kept positions, ascending, then its groups
        nl = -2 - scores[cap]
        for v in range(nl):
            j = scores[cap + 1 + v]
            if scores[j] - M >= thr:
                idx[nc] = j
                nc += 1
        ngroups = scores[cap + 1 + nl]
        gbase = cap + 2 + nl
    elif pruned:
        for v in range(scores[cap]):
            j0 = scores[cap + 1 + v] << PRUNE_LEAF_LOG
            for j in range(j0, min(j0 + PRUNE_LEAF, m)):
                if scores[j] - M >= thr:
                    idx[nc] = j
                    nc += 1
    else:
        for j0 in range(0, m, 64):
            j1 = min(j0 + 64, m)
            bm = scores[j0]
            for j in range(j0 + 1, j1):
                bm = max(bm, scores[j])
            if bm - M < thr:
                continue
            for j in range(j0, j1):
                if scores[j] - M >= thr:
                    idx[nc] = j
                    nc += 1
    # exp and the division depend on a key only through r = M - s_j in [0, -thr]:
    # when many keys survive (nc > 16) and I >= 1 (so exp <= 1, every weight
    # fits and nothing saturates), each distinct r is computed once and reused;
    # that gives the same numbers and the same effect on ``err`` (largest |raw|,
    # first error) as computing it again. ``scores`` is reused to hold, packed
    # at the front, r (with the memo) or e_j (without): ci <= idx[ci] keeps every
    # read ahead of every write.
    R = -thr
    memo = nc > 16 and I >= 1 and R <= 4096
    if memo:
        ememo = np.full(R + 1, -1, np.int64)
        wmemo = np.full(R + 1, -1, np.int64)
    else:                          # never read: empty views, nothing allocated
        ememo = idx[:0]
        wmemo = idx[:0]
    Z = np.int64(0)
    for ci in range(nc):
        dj = scores[idx[ci]] - M
        if memo:
            ej = ememo[-dj]
            if ej < 0:
                ej = exp_raw(dj, I, f, mode, err)
                ememo[-dj] = ej
            scores[ci] = -dj
        else:
            ej = _exp_kept(dj, I, f, mode, err, scores) if keep else exp_raw(dj, I, f, mode, err)
            scores[ci] = ej
        Z = fx_add(Z, ej, I, f, mode, err)
    # groups of the key-value index (keyindex.index_scores): count keys of one score
    # each; their weights round(e 2^f / Z) are 0 (count > 2^(f+1), Z >= count e), and
    # Z stays below 2^(I+f-1), so the sum's order does not matter
    for g in range(ngroups):
        dj = scores[gbase + 2 * g] - M
        ej = _exp_kept(dj, I, f, mode, err, scores) if keep else exp_raw(dj, I, f, mode, err)
        Z = fx_add(Z, scores[gbase + 2 * g + 1] * ej, I, f, mode, err)
    for ci in range(nc):
        r = scores[ci]
        ej = ememo[r] if memo else r
        if ej != 0:
            if memo:
                wj = wmemo[r]
                if wj < 0:
                    wj = fx_div(ej, Z, I, f, mode, err)
                    wmemo[r] = wj
            else:
                wj = fx_div(ej, Z, I, f, mode, err)
            if wj != 0:
                j = idx[ci]
                for k in range(d):
                    v = values[j, k]
                    if v != 0:
                        out[k] += fx_mul(wj, v, I, f, mode, err)
    for k in range(d):
        out[k] = fit_value(out[k], I, f, mode, OP_ADD, err)


@njit(cache=True)
def store_key(kr, t, KhT, KmT):
    """Write key ``kr`` at position t of one head's column-major cache, and the
    running column bound KmT[c, t] = max(KmT[c, t-1], |kr[c]|) beside it; in a
    pruning cache (``KmT`` with 2 Dh rows and >= PRUNE_MIN_CAPACITY columns) also
    the bounds of every block holding t (max, min, and the max / min increment
    from key t - 1 to key t when t - 1 lies in the block; a block restarts at its
    first position)."""
    Dh = kr.shape[0]
    for c in range(Dh):
        v = kr[c]
        a = v if v >= 0 else -v
        KhT[c, t] = v
        KmT[c, t] = a if t == 0 or a > KmT[c, t - 1] else KmT[c, t - 1]
    if KmT.shape[0] >= 2 * Dh and KmT.shape[1] >= PRUNE_MIN_CAPACITY:
        for level in range(1, PRUNE_LEVELS + 1):
            sh = _level_log(level)
            b = t >> sh
            r = t - (b << sh)
            col = _node_col(level, b)
            for c in range(Dh):
                v = kr[c]
                row = KmT[Dh + c]
                if r == 0:
                    row[col] = v
                    row[col + 1] = v
                    row[col + 2] = 0
                    row[col + 3] = 0
                    continue
                if v > row[col]:
                    row[col] = v
                if v < row[col + 1]:
                    row[col + 1] = v
                dv = v - KhT[c, t - 1]
                if r == 1 or dv > row[col + 2]:
                    row[col + 2] = dv
                if r == 1 or dv < row[col + 3]:
                    row[col + 3] = dv
