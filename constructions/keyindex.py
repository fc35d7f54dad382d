"""An exact index over key VALUES for the pruned attention (docs/machine.md "Key-value index").

The position-block bounds of :func:`constructions.kernels._pruned_scores` prune
heads whose keys vary smoothly with the position (shift heads). A match head whose
keys are (tau, tau^2)-like (token codes and their squares: points on a parabola)
does not prune there: a block of positions holds codes on both sides of the
query's. This module indexes such a head's keys by value instead:

* **Layout** (in the rows of the head's pruning cache ``KmT`` after the 2 Dh rows of
  :mod:`constructions.kernels`, :func:`index_rows`): row ``2 Dh`` holds the meta
  fields (``KI_*`` columns), row ``2 Dh + 1`` the permutation ``perm`` of the key
  positions, rows ``2 Dh + 2 + c`` the boxes (max, min of component c) of every
  node, rows ``3 Dh + 2 + c`` component c of the keys in perm order (the leaves'
  keys side by side, so that scoring a leaf reads one run of each row instead of
  a key scattered anywhere in the cache). Everything is indexed by key count or
  node, never by capacity, so a grown cache keeps its index.
* **Structure** (the logarithmic method): the first ``B floor(m / B)`` keys
  (B = 2^KI_LEAF_LOG) form static kd-trees over aligned segments of ``perm`` of
  sizes B 2^i (one per set bit of floor(m / B)); the last m mod B keys (the
  buffer) are scored exactly every time. A node covers an aligned range of
  ``perm``, numbered in order like the position blocks (level 1 = leaves of B
  keys); its children are the halves of that range, split at the median of one
  component (the non-monotone component of widest range, the detected square row
  excluded; a component nondecreasing in the position, like ``pos``, only when the
  others are constant). New keys are added lazily when the head next uses the index.
* **Bounds** of a node for a query q (all exact upper bounds): the integer box bound
  sum_c round(q_c (max_c if q_c > 0 else min_c)) (rounding is monotone), and, when a
  row s holds the scaled sum of squares of a set S of other rows for every key
  (k_s 2^f = sum_{c in S} k_c^2, detected key by key: :func:`_update_lift`) and
  q_s < 0, the lifted bound: round(x) <= x + 1/2 term by term, and
  q_c k_c + q_s k_c^2 / 2^f is concave in k_c, so its maximum over [min_c, max_c]
  is at the clamped vertex; computed in float64 with a relative margin. That
  bound is tight for nearest-code matching (lam (q^2 - (q - k)^2)), so a node whose
  codes miss the query's by d loses lam d^2.
* **Search** (:func:`index_scores`): the buffer is scored exactly, then the trees
  best-first (a max-heap of nodes by bound): a node whose bound is below M_cur +
  exp_zero_threshold(f) (M_cur <= M the largest exact score so far) has every
  weight exactly 0 and is skipped; leaves that are not are scored exactly. The
  meter and the kept list are handled as in the position pruning (see
  :func:`index_scores`).

Only used where :func:`constructions.kernels.attention_scores` runs unchecked (the
column bounds show that no product or partial sum can leave the range, so no error
and no saturation can occur) and never in record mode (the session then has no
pruning cache).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fixedpoint import E_MAXABS, exp_zero_threshold
from .heap import heap_pop as _hpop, heap_push as _hpush

KI_LEAF_LOG = 4
KI_LEAF = 1 << KI_LEAF_LOG
KI_MAX_DH = 6            # the square-row detection tracks 2^Dh subsets per row in one int64
# meta fields (columns of row 2 Dh)
KI_N = 0                 # keys indexed (perm, lift masks and monotone flags cover positions < KI_N)
KI_MONO = 1              # bit c: component c nondecreasing in the position so far
KI_NOLIFT = 2            # 1: a key too large for the square detection was seen (no lifted bound)
KI_PAUSE = 3             # steps left on the plain loop after an ineffective use
KI_CALLS = 4             # statistics: index uses, keys scored, keys
KI_SCORED = 5
KI_KEYS = 6
KI_FAILS = 7             # statistics: ineffective or aborted uses
KI_LIFT = 8              # KI_LIFT + s: bit S set while k_s 2^f == sum_{c in S} k_c^2 for every key
KI_BIG = np.int64(1) << 62
KI_EXACT = np.int64(1) << 52     # integers below it are exact in float64

ST_EFFECTIVE = 0         # index_scores: exact, scored at most a quarter of the keys
ST_INEFFECTIVE = 1       # exact, but scored more
ST_ABORTED = 2           # ran out of scratch: nothing usable, run the plain loop


def index_rows(Dh: int) -> int:
    """Rows of one head's pruning cache with the key-value index (Dh <= KI_MAX_DH),
    else the 2 Dh rows of the position blocks alone."""
    return 4 * Dh + 2 if Dh <= KI_MAX_DH else 2 * Dh


@njit(cache=True, inline='always')
def has_index(KmT, Dh):
    return Dh <= KI_MAX_DH and KmT.shape[0] >= 4 * Dh + 2


@njit(cache=True, inline='always')
def _rne(p, f, hm1):
    return (p + hm1 + ((p >> f) & 1)) >> f if f > 0 else p


@njit(cache=True, inline='always')
def _node(level, b):
    return (b << level) + (np.int64(1) << (level - 1)) - 1


@njit(cache=True)
def _update_lift(KhT, KmT, t, R, f, sub, fsub):
    """Clear, for key t, every (s, S) of the square-row masks that it violates
    (k_s 2^f != sum_{c in S} k_c^2). The equality is exact: both sides agree modulo
    2^64 (wrapping int64 sums) and differ by less than 2^63 (float sums of values
    below 2^103, within a relative 2^-49 of the exact ones, compared with a
    relative tolerance 1e-14); keys of 2^50 or more turn the detection off."""
    Dh = KhT.shape[0]
    meta = KmT[R]
    if meta[KI_NOLIFT] != 0:
        return
    lim = np.int64(1) << 50
    for c in range(Dh):
        v = KhT[c, t]
        if v >= lim or v <= -lim:
            meta[KI_NOLIFT] = 1
            return
    sub[0] = 0
    fsub[0] = 0.0
    for S in range(1, 1 << Dh):
        low = S & (-S)
        c = 0
        while (1 << c) != low:
            c += 1
        v = KhT[c, t]
        sub[S] = sub[S ^ low] + v * v          # wraps modulo 2^64
        fsub[S] = fsub[S ^ low] + float(v) * float(v)
    for s in range(Dh):
        mask = meta[KI_LIFT + s]
        if mask == 0:
            continue
        ks = KhT[s, t]
        target = ks << f                       # wraps modulo 2^64
        ft = float(ks) * 2.0 ** f
        for S in range(1 << Dh):
            if (mask >> S) & 1:
                fs = fsub[S]
                if (sub[S] != target or abs(ft) >= 2.0 ** 103
                        or abs(fs - ft) > 1e-14 * max(fs, abs(ft)) + 1.0):
                    mask &= ~(np.int64(1) << S)
        meta[KI_LIFT + s] = mask


@njit(cache=True)
def _best_lift(meta, Dh, s_ok):
    """(s, S) with S of the most rows among the valid square rows s with s_ok[s]; (-1, 0) if none."""
    bs = -1
    bS = np.int64(0)
    bc = 0
    if meta[KI_NOLIFT] != 0:
        return bs, bS
    for s in range(Dh):
        if not s_ok[s]:
            continue
        mask = meta[KI_LIFT + s]
        for S in range(1, 1 << Dh):
            if (mask >> S) & 1:
                pc = 0
                for c in range(Dh):
                    pc += (S >> c) & 1
                if pc > bc:
                    bc = pc
                    bs = s
                    bS = np.int64(S)
    return bs, bS


@njit(cache=True)
def _select(KhT, c, perm, lo, hi, k):
    """Reorder perm[lo:hi] so that perm[k] holds the key of rank k by component c,
    smaller ones before it, larger ones after (three-way quickselect)."""
    row = KhT[c]
    while hi - lo > 1:
        a = row[perm[lo]]
        b = row[perm[(lo + hi) >> 1]]
        d = row[perm[hi - 1]]
        p = max(min(a, b), min(max(a, b), d))        # median of three
        lt = lo
        i = lo
        gt = hi
        while i < gt:
            v = row[perm[i]]
            if v < p:
                x = perm[i]
                perm[i] = perm[lt]
                perm[lt] = x
                lt += 1
                i += 1
            elif v > p:
                gt -= 1
                x = perm[i]
                perm[i] = perm[gt]
                perm[gt] = x
            else:
                i += 1
        if k < lt:
            hi = lt
        elif k >= gt:
            lo = gt
        else:
            return


@njit(cache=True)
def _build(KhT, KmT, R, u0, level_top, skip_row):
    """Build the kd-tree over perm[u0 B, u0 B + B 2^(level_top - 1)) (u0 a multiple
    of 2^(level_top - 1)): every node's box, children split at the median."""
    Dh = KhT.shape[0]
    perm = KmT[R + 1]
    mono = KmT[R, KI_MONO]
    stk = np.empty(2 * (level_top + 2), np.int64)
    sp = 0
    stk[0] = u0 >> (level_top - 1)
    stk[1] = level_top
    sp = 1
    while sp > 0:
        sp -= 1
        b = stk[2 * sp]
        level = stk[2 * sp + 1]
        lo = b << (level - 1 + KI_LEAF_LOG)
        hi = lo + (np.int64(1) << (level - 1 + KI_LEAF_LOG))
        col = 2 * _node(level, b)
        best = np.int64(-1)
        bestr = np.int64(-1)
        bestm = True
        for c in range(Dh):
            row = KhT[c]
            mxv = row[perm[lo]]
            mnv = mxv
            for i in range(lo + 1, hi):
                v = row[perm[i]]
                if v > mxv:
                    mxv = v
                if v < mnv:
                    mnv = v
            KmT[R + 2 + c, col] = mxv
            KmT[R + 2 + c, col + 1] = mnv
            if level > 1 and c != skip_row and mxv > mnv:
                r = mxv - mnv
                ismono = ((mono >> c) & 1) == 1
                if best < 0 or (bestm and not ismono) or (bestm == ismono and r > bestr):
                    best = c
                    bestr = r
                    bestm = ismono
        if level == 1:
            # the leaf's keys in perm order (read by _score_tree_range: one run per row)
            for c in range(Dh):
                row = KhT[c]
                for i in range(lo, hi):
                    KmT[R + 2 + Dh + c, i] = row[perm[i]]
        if level > 1:
            if best >= 0:
                _select(KhT, best, perm, lo, hi, (lo + hi) >> 1)
            stk[2 * sp] = 2 * b
            stk[2 * sp + 1] = level - 1
            stk[2 * sp + 2] = 2 * b + 1
            stk[2 * sp + 3] = level - 1
            sp += 2


@njit(cache=True)
def update_index(KhT, KmT, m, f):
    """Bring one head's index up to its first m keys (see the module docstring)."""
    Dh = KhT.shape[0]
    R = 2 * Dh
    meta = KmT[R]
    perm = KmT[R + 1]
    n0 = meta[KI_N]
    if n0 > m or n0 < 0 or meta[KI_LIFT + Dh] != f:
        n0 = 0
    if n0 == 0:
        meta[KI_MONO] = (np.int64(1) << Dh) - 1
        meta[KI_NOLIFT] = 0
        meta[KI_LIFT + Dh] = f
        full = np.int64(-1) if Dh == 6 else (np.int64(1) << (np.int64(1) << Dh)) - 1
        for s in range(Dh):
            # subsets S of the other rows only
            mask = np.int64(0)
            for S in range(1 << Dh):
                if (S >> s) & 1 == 0:
                    mask |= np.int64(1) << S
            meta[KI_LIFT + s] = mask & full
    sub = np.empty(1 << Dh, np.int64)
    fsub = np.empty(1 << Dh, np.float64)
    for t in range(n0, m):
        perm[t] = t
        if t > 0:
            for c in range(Dh):
                if KhT[c, t] < KhT[c, t - 1]:
                    meta[KI_MONO] &= ~(np.int64(1) << c)
        _update_lift(KhT, KmT, t, R, f, sub, fsub)
    u0 = n0 >> KI_LEAF_LOG
    u1 = m >> KI_LEAF_LOG
    if u1 > u0:
        s_ok = np.ones(Dh, np.bool_)
        skip, _ = _best_lift(meta, Dh, s_ok)
        h = 0
        x = u0 ^ u1
        while (x >> (h + 1)) != 0:
            h += 1
        start = (u1 >> (h + 1)) << (h + 1)
        for i in range(h, -1, -1):
            if (u1 >> i) & 1:
                _build(KhT, KmT, R, start, i + 1, skip)
                start += np.int64(1) << i
    meta[KI_N] = m


@njit(cache=True)
def _lift_setup(q, ls, lS, f, lc, lq, lx):
    """The query's constants of the lifted bound of a square row ls over the rows
    lS: lc the rows of lS ascending, lq their q_c, lx the unclamped vertex
    -q_c / (2 q_s 2^-f) of each; returns (count, q_s, 2^-f, number of terms)."""
    Dh = q.shape[0]
    sc = 2.0 ** (-f)
    qs = float(q[ls]) if ls >= 0 else 0.0
    nlc = 0
    nt = 1
    if ls >= 0:
        for c in range(Dh):
            if (lS >> c) & 1:
                qc = float(q[c])
                if q[c] != 0:
                    nt += 1
                lc[nlc] = c
                lq[nlc] = qc
                lx[nlc] = -qc / (2.0 * qs * sc)
                nlc += 1
    return nlc, qs, sc, nt


@njit(cache=True)
def _bound(q, qnz, nq, KmT, R, node, f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, cut):
    """(ub, ubf, pb) of a node: the integer box bound, the lifted float bound (inf
    without a square row, or when ub < cut: the node is then skippable by its box
    bound alone) and the box bound of |every partial sum|. The lifted bound's
    query constants come from :func:`_lift_setup`."""
    col = 2 * node
    hi = np.int64(0)
    lo = np.int64(0)
    pb = np.int64(0)
    other = 0.0
    mag = 0.0
    for ci in range(nq):
        c = qnz[ci]
        qc = q[c]
        kmax = KmT[R + 2 + c, col]
        kmin = KmT[R + 2 + c, col + 1]
        if qc > 0:
            th = _rne(qc * kmax, f, hm1)
            hi += th
            lo += _rne(qc * kmin, f, hm1)
        else:
            th = _rne(qc * kmin, f, hm1)
            hi += th
            lo += _rne(qc * kmax, f, hm1)
        pb = max(pb, max(hi if hi >= 0 else -hi, lo if lo >= 0 else -lo))
        if ls >= 0 and c != ls and ((lS >> c) & 1) == 0:
            other += float(th)
            mag += abs(float(th))
    ubf = np.inf
    if ls >= 0 and hi >= cut:
        acc = other
        for i in range(nlc):
            c = lc[i]
            qc = lq[i]
            a = float(KmT[R + 2 + c, col + 1])
            b = float(KmT[R + 2 + c, col])
            xv = min(max(lx[i], a), b)
            t1 = qc * xv * sc
            t2 = qs * xv * xv * sc * sc
            acc += t1 + t2
            mag += abs(t1) + abs(t2)
        ubf = acc + 0.5 * nt + 1e-12 * mag + 2.0
    return hi, ubf, pb


@njit(cache=True, inline='always')
def _skippable(ub, ubf, M, thr):
    if ub < M + thr:
        return True
    Mt = float(M) + float(thr)
    return ubf + 1e-12 * (abs(ubf) + abs(Mt)) + 2.0 < Mt


@njit(cache=True)
def _score_tree_range(q, qnz, nq, KmT, R, Dh, perm, i0, i1, f, hm1, scores):
    """:func:`_score_range` over positions of perm covered by the trees, reading the
    keys from their copy in perm order (rows R + 2 + Dh + c, written by _build)."""
    smax = np.int64(0)
    M = -KI_BIG
    for i in range(i0, i1):
        s = np.int64(0)
        for ci in range(nq):
            c = qnz[ci]
            s += _rne(q[c] * KmT[R + 2 + Dh + c, i], f, hm1)
            smax = max(smax, s if s >= 0 else -s)
        scores[perm[i]] = s
        M = max(M, s)
    return M, smax


@njit(cache=True)
def _score_range(q, qnz, nq, KhT, perm, i0, i1, f, hm1, scores):
    """scores[perm[i]] for i0 <= i < i1 on plain int64; (max score, largest |partial sum|)."""
    smax = np.int64(0)
    M = -KI_BIG
    for i in range(i0, i1):
        j = perm[i]
        s = np.int64(0)
        for ci in range(nq):
            c = qnz[ci]
            s += _rne(q[c] * KhT[c, j], f, hm1)
            smax = max(smax, s if s >= 0 else -s)
        scores[j] = s
        M = max(M, s)
    return M, smax




@njit(cache=True, inline='always')
def _hkey(ub, ubf):
    v = min(float(ub), ubf)
    if v > 4.0e18:
        return np.int64(4000000000000000000)
    if v < -4.0e18:
        return -np.int64(4000000000000000000)
    return np.int64(v)


@njit(cache=True)
def index_scores(q, KhT, KmT, m, I, f, err, qnz, nq, cm, scores):
    """The unchecked case of attention_scores on the key-value index: returns
    (M, status). Exact when status < ST_ABORTED: the same M as scoring every key,
    scores[j] exact for every key whose weight can be nonzero, the same largest
    |raw| recorded in err, and the header scores[cap] = -2 - n followed by the n
    positions (ascending) whose score is >= M + exp_zero_threshold(f): the keys
    :func:`constructions.kernels.attend_sparse` visits, in the plain order.

    1. The buffer keys, then the trees best-first: a node whose bound is below
       M_cur + thr is skipped (every key in it is below M + thr: weight exactly 0,
       not the maximum); a leaf that is not is scored exactly.
    2. The meter: every product is at most its column product round(|q_c| cm_c)
       (recorded, as the unpruned loop does); the partial sums of a skipped node
       lie between its box's low and high partial sums (|.| <= pb). A skipped node
       with pb above the largest |raw| of everything else is descended at the end
       and its leaves whose pb is still above it are scored exactly, so the
       recorded maximum is the plain definition's.
    3. Scratch after the header: the scored keys (<= cap / 4), the heap (<= cap / 8
       nodes), the skipped nodes (<= cap / 4); the last entries (the exp memo of
       attend_sparse) are not touched. Running out returns ST_ABORTED with the
       header -1 (the caller runs the plain loop; err then holds only true values)."""
    Dh = KhT.shape[0]
    cap = KhT.shape[1]
    R = 2 * Dh
    update_index(KhT, KmT, m, f)
    meta = KmT[R]
    perm = KmT[R + 1]
    hm1 = ((np.int64(1) << (f - 1)) - 1) if f > 0 else np.int64(0)
    thr = exp_zero_threshold(f)
    mx = err[E_MAXABS]
    for ci in range(nq):
        qc = q[qnz[ci]]
        mx = max(mx, _rne((qc if qc > 0 else -qc) * cm[ci], f, hm1))
    s_ok = np.zeros(Dh, np.bool_)
    for c in range(Dh):
        s_ok[c] = q[c] < 0
    ls, lS = _best_lift(meta, Dh, s_ok)
    lc = np.empty(Dh, np.int64)
    lq = np.empty(Dh, np.float64)
    lx = np.empty(Dh, np.float64)
    nlc, qs, sc, nt = _lift_setup(q, ls, lS, f, lc, lq, lx)
    fast = thr > -KI_EXACT
    LM = cap >> 2
    HM = cap >> 3
    DM = cap >> 2
    GM = cap >> 4
    lst = cap + 1
    hp = lst + LM
    dfr = hp + 2 * HM
    gl = dfr + DM
    ng = 0
    # a node whose keys agree on every component the query reads is scored once (one
    # score, the same partial sums) and kept as a group when it holds more than
    # 2^(f+1) keys: each of them gets the weight round(e 2^f / Z) = 0 (Z >= count e),
    # so attend_sparse needs only count * e in Z (Z <= m 2^f < 2^(I+f-1): no overflow)
    grouping = I >= 2 and m < (np.int64(1) << (I - 1))
    nl = 0
    nh = np.int64(0)
    nd = 0
    status = ST_EFFECTIVE
    # 1. the buffer, then best-first over the trees
    ufull = m >> KI_LEAF_LOG
    b0 = ufull << KI_LEAF_LOG
    M = -KI_BIG
    if b0 < m:
        M, smax = _score_range(q, qnz, nq, KhT, perm, b0, m, f, hm1, scores)
        mx = max(mx, smax)
        for i in range(b0, m):
            scores[lst + nl] = i
            nl += 1
    start = np.int64(0)
    for i in range(62, -1, -1):
        if (ufull >> i) & 1:
            level = i + 1
            b = start >> i
            code = b * 64 + level
            ub, ubf, pb = _bound(q, qnz, nq, KmT, R, _node(level, b), f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
            if nh >= HM:
                status = ST_ABORTED
                break
            nh = _hpush(scores, hp, nh, _hkey(ub, ubf), code)
            start += np.int64(1) << i
    while nh > 0 and status != ST_ABORTED:
        key = scores[hp]
        code = scores[hp + 1]
        nh = _hpop(scores, hp, nh)
        level = code & 63
        b = code >> 6
        # the heap key trunc(min(ub, ubf)) is above both bounds minus 1; while key,
        # thr and M + thr are below 2^52 in magnitude (then M, thr and M + thr are
        # exact in float64), key - 1 >= M + thr means the node is not skippable,
        # and then neither its bounds nor pb are needed
        if not (fast and key < KI_EXACT and M + thr > -KI_EXACT and key - 1 >= M + thr):
            ub, ubf, pb = _bound(q, qnz, nq, KmT, R, _node(level, b), f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
            skip = _skippable(ub, ubf, M, thr)
        else:
            skip = False
        if skip:
            if pb > mx:
                if nd >= DM:
                    status = ST_ABORTED
                    break
                scores[dfr + nd] = code
                nd += 1
            continue
        if grouping and (np.int64(1) << (level - 1 + KI_LEAF_LOG)) > (np.int64(1) << (f + 1)):
            col = 2 * _node(level, b)
            same = True
            for ci in range(nq):
                c = qnz[ci]
                if KmT[R + 2 + c, col] != KmT[R + 2 + c, col + 1]:
                    same = False
                    break
            if same:
                if ng >= GM:
                    status = ST_ABORTED
                    break
                i0 = b << (level - 1 + KI_LEAF_LOG)
                bm, smax = _score_tree_range(q, qnz, nq, KmT, R, Dh, perm, i0, i0 + 1, f, hm1, scores)
                mx = max(mx, smax)
                M = max(M, bm)
                scores[gl + 2 * ng] = bm
                scores[gl + 2 * ng + 1] = np.int64(1) << (level - 1 + KI_LEAF_LOG)
                ng += 1
                continue
        if level == 1:
            i0 = b << KI_LEAF_LOG
            if nl + KI_LEAF > LM:
                status = ST_ABORTED
                break
            bm, smax = _score_tree_range(q, qnz, nq, KmT, R, Dh, perm, i0, i0 + KI_LEAF, f, hm1, scores)
            mx = max(mx, smax)
            M = max(M, bm)
            for i in range(i0, i0 + KI_LEAF):
                scores[lst + nl] = i
                nl += 1
            continue
        for cb in range(2 * b, 2 * b + 2):
            ub, ubf, pb = _bound(q, qnz, nq, KmT, R, _node(level - 1, cb), f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
            if _skippable(ub, ubf, M, thr):
                if pb > mx:
                    if nd >= DM:
                        status = ST_ABORTED
                        break
                    scores[dfr + nd] = cb * 64 + level - 1
                    nd += 1
                continue
            if nh >= HM:
                status = ST_ABORTED
                break
            nh = _hpush(scores, hp, nh, _hkey(ub, ubf), cb * 64 + level - 1)
    if status == ST_ABORTED:
        meta[KI_FAILS] += 1
        scores[cap] = -1
        if mx > err[E_MAXABS]:
            err[E_MAXABS] = mx
        return M, status
    # 2. skipped nodes whose partial sums might exceed the meter (the heap's room is the stack)
    nsc = nl
    for di in range(nd):
        sp = 0
        scores[hp] = scores[dfr + di]
        sp = 1
        while sp > 0:
            sp -= 1
            code = scores[hp + sp]
            level = code & 63
            b = code >> 6
            # pb alone: the box bounds without a square row (ls = -1)
            _, _, pb = _bound(q, qnz, nq, KmT, R, _node(level, b), f, hm1, np.int64(-1), np.int64(0), lc, lq, lx,
                               np.int64(0), qs, sc, nt, np.int64(0))
            if pb <= mx:
                continue
            if level == 1:
                i0 = b << KI_LEAF_LOG
                bm, smax = _score_tree_range(q, qnz, nq, KmT, R, Dh, perm, i0, i0 + KI_LEAF, f, hm1, scores)
                mx = max(mx, smax)
                nsc += KI_LEAF
                continue
            scores[hp + sp] = (2 * b) * 64 + level - 1
            scores[hp + sp + 1] = (2 * b + 1) * 64 + level - 1
            sp += 2
    # 3. the kept keys, ascending
    nk = 0
    for i in range(nl):
        j = perm[scores[lst + i]]
        if scores[j] - M >= thr:
            scores[lst + nk] = j
            nk += 1
    kept = scores[lst:lst + nk]
    if nk > 1:
        kept.sort()
    scores[cap] = -2 - nk
    # then the kept groups: their number, and (score, count) pairs
    nkg = 0
    for g in range(ng):
        if scores[gl + 2 * g] - M >= thr:
            scores[lst + nk + 1 + 2 * nkg] = scores[gl + 2 * g]
            scores[lst + nk + 2 + 2 * nkg] = scores[gl + 2 * g + 1]
            nkg += 1
        nsc += 1
    scores[lst + nk] = nkg
    if mx > err[E_MAXABS]:
        err[E_MAXABS] = mx
    meta[KI_CALLS] += 1
    meta[KI_SCORED] += nsc
    meta[KI_KEYS] += m
    if 4 * nsc > m:
        status = ST_INEFFECTIVE
        meta[KI_FAILS] += 1
    return M, status
