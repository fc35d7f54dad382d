"""An exact index over key VALUES for the pruned attention (docs/machine.md "Key-value index").

Position-block bounds (:func:`constructions.machine.attention._pruned_scores`) do not prune
a match head, whose keys are (tau, tau^2)-like: a block of positions holds codes
on both sides of the query's. This module indexes such a head's keys by value: a
weight-balanced kd-tree per head (a scapegoat tree, leaves of at most KI_LEAF = 16
keys) over all keys but a small buffer of the newest, stored in the rows of the
head's pruning cache. :func:`index_scores` scores the buffer exactly, then walks
the tree best bound first, skipping every node whose exact upper bound (box bound,
or the lifted bound of a squared-norm row) shows all its weights are exactly 0.
It runs only where :func:`constructions.machine.attention.attention_scores` runs unchecked,
and never in record mode.

Details (structure, insertion, layout, bounds, search):
docs/internals/machine.md#keyindex
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .fixedpoint import E_MAXABS, exp_zero_threshold

KI_LEAF_LOG = 4
KI_LEAF = 1 << KI_LEAF_LOG        # keys of a leaf at most (a leaf slot's columns)
KI_ALPHA10 = 7           # weight balance: a node whose larger child holds over 7/10 of its keys is rotated or rebuilt
KI_MAX_DH = 6            # the square-row detection tracks 2^Dh subsets per row in one int64
KI_STACK = 256           # entries of the search's and the insertion's stacks (the depth stays far below)
# meta fields (columns of row 2 Dh)
KI_N = 0                 # keys seen (lift masks and monotone flags cover positions < KI_N; the tree < KI_NT)
KI_MONO = 1              # bit c: component c nondecreasing in the position so far
KI_NOLIFT = 2            # 1: a key too large for the square detection was seen (no lifted bound)
KI_PAUSE = 3             # steps left on the plain loop after an ineffective use
KI_CALLS = 4             # statistics: index uses, keys scored, keys
KI_SCORED = 5
KI_KEYS = 6
KI_FAILS = 7             # statistics: ineffective or aborted uses
KI_LIFT = 8              # KI_LIFT + s: bit S set while k_s 2^f == sum_{c in S} k_c^2 for every key
#                          (s < Dh <= 6; KI_LIFT + Dh holds the f the index was built for)
KI_ROOT = 16             # the root's node code
KI_NFREE = 17            # + 0 / 1: ids on the free stack of internal nodes / leaves
KI_NEXT = 19             # + 0 / 1: the next fresh internal node / leaf id
KI_REBUILT = 21          # statistics: keys placed by (re)builds
KI_ANTI = 23             # bit c: component c nonincreasing in the position so far (with KI_MONO: rotations)
KI_NT = 22               # keys in the tree: positions < KI_NT; the buffer, positions KI_NT .. m - 1, is scored exactly
KI_ROW_FREE = 1          # rows R + 1 + 0 / 1: the free stacks of internal node / leaf ids
KI_ROW_NODE = 3          # rows R + 3 ..: the node records (node_record), then the leaf slots (leaf_slot)
KI_BIG = np.int64(1) << 62
KI_EXACT = np.int64(1) << 52     # integers below it are exact in float64

ST_EFFECTIVE = 0         # index_scores: exact, scored at most a quarter of the keys
ST_INEFFECTIVE = 1       # exact, but scored more
ST_ABORTED = 2           # ran out of scratch: nothing usable, run the plain loop


@njit(cache=True)
def _nrec(Dh):
    """Rows of node records: a record has 2 Dh + 5 entries and there are at most
    m / 4 + 1 node codes (leaves hold >= 8 of the m keys), so NR rows keep every
    record's columns below m (and below the capacity's minimum 1024 for small m)."""
    return (2 * Dh + 5 + 3) // 4 + 1


def index_rows(Dh: int) -> int:
    """Rows of one head's pruning cache with the key-value index (Dh <= KI_MAX_DH),
    else the 2 Dh rows of the position blocks alone."""
    return 2 * Dh + KI_ROW_NODE + int(_nrec(Dh)) + 2 + 2 * Dh if Dh <= KI_MAX_DH else 2 * Dh


@njit(cache=True, inline='always')
def has_index(KmT, Dh):
    return Dh <= KI_MAX_DH and KmT.shape[0] >= 4 * Dh + KI_ROW_NODE + _nrec(Dh) + 2


@njit(cache=True, inline='always')
def node_record(R, Dh, u):
    """(row, first column) of node code u's record: the box (column + 2c: max of
    component c, + 2c + 1: min), then + 2 Dh the key count, + 2 Dh + 1 / + 2 Dh + 2
    the children's codes, + 2 Dh + 3 / + 2 Dh + 4 the split component / value."""
    nr = _nrec(Dh)
    return R + KI_ROW_NODE + u % nr, (2 * Dh + 5) * (u // nr)


@njit(cache=True, inline='always')
def leaf_slot(R, Dh, y):
    """(row of the positions, first column) of leaf y's slot; the copies of
    component c of its keys are in row R + KI_ROW_NODE + NR + 2 + 2 c + (y & 1),
    same columns."""
    return R + KI_ROW_NODE + _nrec(Dh) + (y & 1), (y >> 1) << KI_LEAF_LOG


@njit(cache=True, inline='always')
def _copy_row(R, Dh, c, y):
    return R + KI_ROW_NODE + _nrec(Dh) + 2 + 2 * c + (y & 1)


@njit(cache=True, inline='always')
def _rne(p, f, hm1):
    return (p + hm1 + ((p >> f) & 1)) >> f if f > 0 else p


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
def best_lift(meta, Dh, s_ok):
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


@njit(cache=True, inline='always')
def _alloc(KmT, R, which):
    """A free id: internal nodes (which = 0) or leaves (1), from the free stack
    (row R + KI_ROW_FREE + which) or a fresh one (the high-water mark)."""
    meta = KmT[R]
    nf = meta[KI_NFREE + which]
    if nf > 0:
        nf -= 1
        meta[KI_NFREE + which] = nf
        return KmT[R + KI_ROW_FREE + which, nf]
    x = meta[KI_NEXT + which]
    meta[KI_NEXT + which] = x + 1
    return x


@njit(cache=True, inline='always')
def _release(KmT, R, which, x):
    meta = KmT[R]
    nf = meta[KI_NFREE + which]
    KmT[R + KI_ROW_FREE + which, nf] = x
    meta[KI_NFREE + which] = nf + 1


@njit(cache=True)
def _build(KhT, KmT, R, P, n, skip_row):
    """Build a subtree over the key positions P[0:n] (n >= 1; P is reordered):
    halves split at the median of one component until at most KI_LEAF keys
    remain (leaves of KI_LEAF / 2 to KI_LEAF keys when n >= KI_LEAF / 2); every
    node's record, every leaf's slot. Returns the subtree's root code."""
    Dh = KhT.shape[0]
    mono = KmT[R, KI_MONO]
    stk = np.empty(3 * KI_STACK, np.int64)
    stk[0] = 0
    stk[1] = n
    stk[2] = -1
    sp = 1
    root = np.int64(-1)
    while sp > 0:
        sp -= 1
        lo = stk[3 * sp]
        hi = stk[3 * sp + 1]
        lk = stk[3 * sp + 2]           # the parent's record entry of this child (row * 2^32 + column), or -1
        leaf = hi - lo <= KI_LEAF
        if leaf:
            y = _alloc(KmT, R, np.int64(1))
            code = 2 * y + 1
        else:
            x = _alloc(KmT, R, np.int64(0))
            code = 2 * x
        rr, c0 = node_record(R, Dh, code)
        rec = KmT[rr]
        best = np.int64(-1)
        bestr = np.int64(-1)
        bestm = True
        for c in range(Dh):
            row = KhT[c]
            mxv = row[P[lo]]
            mnv = mxv
            for i in range(lo + 1, hi):
                v = row[P[i]]
                if v > mxv:
                    mxv = v
                if v < mnv:
                    mnv = v
            rec[c0 + 2 * c] = mxv
            rec[c0 + 2 * c + 1] = mnv
            if not leaf and c != skip_row and mxv > mnv:
                r = mxv - mnv
                ismono = ((mono >> c) & 1) == 1
                if best < 0 or (bestm and not ismono) or (bestm == ismono and r > bestr):
                    best = c
                    bestr = r
                    bestm = ismono
        rec[c0 + 2 * Dh] = hi - lo
        if leaf:
            # the leaf's positions and its keys side by side (read by _score_leaf: one run per row)
            prow, s0 = leaf_slot(R, Dh, y)
            for i in range(lo, hi):
                KmT[prow, s0 + i - lo] = P[i]
            for c in range(Dh):
                row = KhT[c]
                krow = KmT[_copy_row(R, Dh, c, y)]
                for i in range(lo, hi):
                    krow[s0 + i - lo] = row[P[i]]
        else:
            mid = (lo + hi) >> 1
            if best >= 0:
                _select(KhT, best, P, lo, hi, mid)
            else:
                best = 0          # every key alike: any split, ties routed to the smaller side
            rec[c0 + 2 * Dh + 3] = best
            rec[c0 + 2 * Dh + 4] = KhT[best, P[mid]]
            stk[3 * sp] = mid
            stk[3 * sp + 1] = hi
            stk[3 * sp + 2] = (rr << 32) + c0 + 2 * Dh + 2
            stk[3 * sp + 3] = lo
            stk[3 * sp + 4] = mid
            stk[3 * sp + 5] = (rr << 32) + c0 + 2 * Dh + 1
            sp += 2
        if lk >= 0:
            KmT[lk >> 32, lk & 0xFFFFFFFF] = code
        else:
            root = code
    return root


@njit(cache=True)
def _rebuild(KhT, KmT, R, u, extra, skip_row):
    """Rebuild the subtree of node code u over its keys and the position ``extra``
    (if >= 0): its ids are released, a balanced subtree built; returns its root code."""
    Dh = KhT.shape[0]
    rr, c0 = node_record(R, Dh, u)
    n = KmT[rr, c0 + 2 * Dh] + (1 if extra >= 0 else 0)
    P = np.empty(n, np.int64)
    k = 0
    stk = np.empty(KI_STACK, np.int64)
    stk[0] = u
    sp = 1
    while sp > 0:
        sp -= 1
        v = stk[sp]
        rr, c0 = node_record(R, Dh, v)
        if (v & 1) == 1:
            y = v >> 1
            prow, s0 = leaf_slot(R, Dh, y)
            for i in range(KmT[rr, c0 + 2 * Dh]):
                P[k] = KmT[prow, s0 + i]
                k += 1
            _release(KmT, R, np.int64(1), y)
        else:
            stk[sp] = KmT[rr, c0 + 2 * Dh + 1]
            stk[sp + 1] = KmT[rr, c0 + 2 * Dh + 2]
            sp += 2
            _release(KmT, R, np.int64(0), v >> 1)
    if extra >= 0:
        P[k] = extra
    return _build(KhT, KmT, R, P, n, skip_row)


@njit(cache=True, inline='always')
def _relink(KmT, R, Dh, path, i, u, nu):
    """Point the parent path[i - 1] of node u (or the root if i == 0) to nu."""
    if i == 0:
        KmT[R, KI_ROOT] = nu
    else:
        pr, p0 = node_record(R, Dh, path[i - 1])
        if KmT[pr, p0 + 2 * Dh + 1] == u:
            KmT[pr, p0 + 2 * Dh + 1] = nu
        else:
            KmT[pr, p0 + 2 * Dh + 2] = nu


@njit(cache=True, inline='always')
def _count(KmT, R, Dh, u):
    rr, c0 = node_record(R, Dh, u)
    return KmT[rr, c0 + 2 * Dh]


@njit(cache=True)
def _rotate(KmT, R, Dh, path, i, d):
    """A single rotation at the unbalanced node u = path[i] when its heavier child h
    (on the insertion path) splits on the same component and that component is
    monotone in the position so far (keys appended along it: every new key goes
    the same way, and the nodes stay intervals of it): h's record becomes the
    node N over u's lighter child and h's inner child (u's split), u's record the
    node over N and h's outer child (h's split); every count and box stays exact
    (N's box is the union of its children's). Only when u and N come out balanced;
    returns False (nothing changed) otherwise."""
    if i + 1 >= d:
        return False
    u = path[i]
    h = path[i + 1]
    ur, u0 = node_record(R, Dh, u)
    hr, h0 = node_record(R, Dh, h)
    urec = KmT[ur]
    hrec = KmT[hr]
    comp = urec[u0 + 2 * Dh + 3]
    if hrec[h0 + 2 * Dh + 3] != comp or (((KmT[R, KI_MONO] | KmT[R, KI_ANTI]) >> comp) & 1) == 0:
        return False
    right = urec[u0 + 2 * Dh + 2] == h            # the heavy side (the key went there)
    light = urec[u0 + 2 * Dh + 1] if right else urec[u0 + 2 * Dh + 2]
    inner = hrec[h0 + 2 * Dh + 1] if right else hrec[h0 + 2 * Dh + 2]
    outer = hrec[h0 + 2 * Dh + 2] if right else hrec[h0 + 2 * Dh + 1]
    n = urec[u0 + 2 * Dh]
    cl = _count(KmT, R, Dh, light)
    ci = _count(KmT, R, Dh, inner)
    co = _count(KmT, R, Dh, outer)
    nn = cl + ci
    if 10 * max(nn, co) > KI_ALPHA10 * n or 10 * max(cl, ci) > KI_ALPHA10 * nn:
        return False
    lr, l0 = node_record(R, Dh, light)
    ir, i0 = node_record(R, Dh, inner)
    for c in range(Dh):
        hrec[h0 + 2 * c] = max(KmT[lr, l0 + 2 * c], KmT[ir, i0 + 2 * c])
        hrec[h0 + 2 * c + 1] = min(KmT[lr, l0 + 2 * c + 1], KmT[ir, i0 + 2 * c + 1])
    hrec[h0 + 2 * Dh] = nn
    sv = hrec[h0 + 2 * Dh + 4]
    hrec[h0 + 2 * Dh + 4] = urec[u0 + 2 * Dh + 4]
    urec[u0 + 2 * Dh + 4] = sv
    if right:
        hrec[h0 + 2 * Dh + 1] = light
        hrec[h0 + 2 * Dh + 2] = inner
        urec[u0 + 2 * Dh + 1] = h
        urec[u0 + 2 * Dh + 2] = outer
    else:
        hrec[h0 + 2 * Dh + 1] = inner
        hrec[h0 + 2 * Dh + 2] = light
        urec[u0 + 2 * Dh + 1] = outer
        urec[u0 + 2 * Dh + 2] = h
    # the path below: through N (h's record) if the key went to the inner child, else
    # from u straight to the outer child
    if i + 2 < d and path[i + 2] == outer:
        path[i + 1] = u
    return True


@njit(cache=True)
def _insert(KhT, KmT, R, t, skip_row, path, key):
    """Insert key t: down from the root by the split values (a key equal to the
    split value goes to the side with fewer keys), every node on the way counting
    it and widening its box; appended to its leaf, or the leaf (full) rebuilt in
    two with it; then every node on the way, from the top, whose larger child holds
    more than KI_ALPHA10 / 10 of its keys is rotated (:func:`_rotate`), or, where
    that does not apply, the first such is rebuilt and the walk ends (weight
    balance: every node balanced, depth O(log m))."""
    Dh = KhT.shape[0]
    meta = KmT[R]
    for c in range(Dh):
        key[c] = KhT[c, t]
    u = meta[KI_ROOT]
    d = np.int64(0)         # typed: a literal 0 would make numba compile _rotate a second time
    while True:
        rr, c0 = node_record(R, Dh, u)
        rec = KmT[rr]
        for c in range(Dh):
            v = key[c]
            if v > rec[c0 + 2 * c]:
                rec[c0 + 2 * c] = v
            if v < rec[c0 + 2 * c + 1]:
                rec[c0 + 2 * c + 1] = v
        if (u & 1) == 1:
            break
        rec[c0 + 2 * Dh] += 1
        path[d] = u
        d += 1
        kv = key[rec[c0 + 2 * Dh + 3]]
        sv = rec[c0 + 2 * Dh + 4]
        a = rec[c0 + 2 * Dh + 1]
        b = rec[c0 + 2 * Dh + 2]
        if kv < sv:
            u = a
        elif kv > sv:
            u = b
        else:
            u = a if _count(KmT, R, Dh, a) <= _count(KmT, R, Dh, b) else b
    y = u >> 1
    n = rec[c0 + 2 * Dh]
    if n < KI_LEAF:
        prow, s0 = leaf_slot(R, Dh, y)
        KmT[prow, s0 + n] = t
        for c in range(Dh):
            KmT[_copy_row(R, Dh, c, y), s0 + n] = key[c]
        rec[c0 + 2 * Dh] = n + 1
    else:
        nu = _rebuild(KhT, KmT, R, u, t, skip_row)
        meta[KI_REBUILT] += KI_LEAF + 1
        _relink(KmT, R, Dh, path, d, u, nu)
    i = np.int64(0)
    while i < d:
        u = path[i]
        rr, c0 = node_record(R, Dh, u)
        rec = KmT[rr]
        a = rec[c0 + 2 * Dh + 1]
        b = rec[c0 + 2 * Dh + 2]
        ca = _count(KmT, R, Dh, a)
        cb = _count(KmT, R, Dh, b)
        n = rec[c0 + 2 * Dh]
        if 10 * max(ca, cb) <= KI_ALPHA10 * n:
            i += 1
            continue
        if not _rotate(KmT, R, Dh, path, i, d):
            meta[KI_REBUILT] += n
            nu = _rebuild(KhT, KmT, R, u, np.int64(-1), skip_row)
            _relink(KmT, R, Dh, path, i, u, nu)
            break
        i += 1


@njit(cache=True)
def update_index(KhT, KmT, m, f):
    """Bring one head's index up to its first m keys (see the module docstring)."""
    Dh = KhT.shape[0]
    R = 2 * Dh
    meta = KmT[R]
    n0 = meta[KI_N]
    if n0 > m or n0 < 0 or meta[KI_LIFT + Dh] != f:
        n0 = 0
    if n0 == m:
        return
    if n0 == 0:
        meta[KI_MONO] = (np.int64(1) << Dh) - 1
        meta[KI_ANTI] = (np.int64(1) << Dh) - 1
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
        if t > 0:
            for c in range(Dh):
                if KhT[c, t] < KhT[c, t - 1]:
                    meta[KI_MONO] &= ~(np.int64(1) << c)
                if KhT[c, t] > KhT[c, t - 1]:
                    meta[KI_ANTI] &= ~(np.int64(1) << c)
        _update_lift(KhT, KmT, t, R, f, sub, fsub)
    meta[KI_N] = m
    # the newest keys wait in the buffer (KI_LEAF to 2 KI_LEAF - 1 of them, scored exactly
    # by every search: a query for a recent key finds its maximum there first)
    nt = meta[KI_NT] if n0 > 0 else np.int64(0)
    if m - nt < 2 * KI_LEAF:
        meta[KI_NT] = nt
        return
    m1 = m - KI_LEAF
    s_ok = np.ones(Dh, np.bool_)
    skip, _ = best_lift(meta, Dh, s_ok)
    if m1 - nt > nt:
        # from scratch (the first use, or more new keys than old): one balanced tree
        meta[KI_NFREE] = 0
        meta[KI_NFREE + 1] = 0
        meta[KI_NEXT] = 0
        meta[KI_NEXT + 1] = 0
        P = np.arange(m1).astype(np.int64)
        meta[KI_ROOT] = _build(KhT, KmT, R, P, m1, skip)
        meta[KI_REBUILT] += m1
    else:
        path = np.empty(KI_STACK, np.int64)
        key = np.empty(Dh, np.int64)
        for t in range(nt, m1):
            _insert(KhT, KmT, R, t, skip, path, key)
    meta[KI_NT] = m1


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
    Dh = q.shape[0]
    rr, col = node_record(R, Dh, node)
    rec = KmT[rr]
    hi = np.int64(0)
    lo = np.int64(0)
    pb = np.int64(0)
    other = 0.0
    mag = 0.0
    for ci in range(nq):
        c = qnz[ci]
        qc = q[c]
        kmax = rec[col + 2 * c]
        kmin = rec[col + 2 * c + 1]
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
            a = float(rec[col + 2 * c + 1])
            b = float(rec[col + 2 * c])
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
def _score_leaf(q, qnz, nq, KmT, R, Dh, y, n, f, hm1, scores):
    """scores[j] of the first n keys j of leaf y on plain int64 (the unchecked loop
    of attention_scores), read from the leaf's key copies; (max score, largest
    |partial sum|)."""
    prow, s0 = leaf_slot(R, Dh, y)
    kb = _copy_row(R, Dh, 0, y)
    smax = np.int64(0)
    M = -KI_BIG
    for i in range(s0, s0 + n):
        s = np.int64(0)
        for ci in range(nq):
            c = qnz[ci]
            s += _rne(q[c] * KmT[kb + 2 * c, i], f, hm1)
            smax = max(smax, s if s >= 0 else -s)
        scores[KmT[prow, i]] = s
        M = max(M, s)
    return M, smax


@njit(cache=True)
def _score_range(q, qnz, nq, KhT, j0, j1, f, hm1, scores):
    """scores[j] for j0 <= j < j1 on plain int64 (the buffer); (max score, largest |partial sum|)."""
    smax = np.int64(0)
    M = -KI_BIG
    for j in range(j0, j1):
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
    :func:`constructions.machine.attention.attend_sparse` visits, in the plain order.

    1. Depth first from the root, the child of the larger bound on top, every
       waiting node's bounds (ub, ubf, pb) kept on the stack (bounds do not depend
       on M: a node is bounded once): a node whose bound is below M_cur + thr is
       skipped (every key in it is below M + thr: weight exactly 0, not the
       maximum); a leaf that is not is scored exactly.
    2. The meter: every product is at most its column product round(|q_c| cm_c)
       (recorded, as the unpruned loop does); the partial sums of a skipped node
       lie between its box's low and high partial sums (|.| <= pb). A skipped node
       with pb above the largest |raw| of everything else is descended at the end
       and its leaves whose pb is still above it are scored exactly, so the
       recorded maximum is the plain definition's.
    3. Scratch after the header: the scored keys (<= cap / 4), the stack (<=
       KI_STACK nodes, three entries each, in the cap / 4 entries after them), the
       skipped nodes (<= cap / 4), the groups (<= cap / 16); the last entries (the
       exp memo of attend_sparse) are not touched. Running out returns ST_ABORTED
       with the header -1 (the caller runs the plain loop; err then holds only
       true values)."""
    Dh = KhT.shape[0]
    cap = KhT.shape[1]
    R = 2 * Dh
    update_index(KhT, KmT, m, f)
    meta = KmT[R]
    hm1 = ((np.int64(1) << (f - 1)) - 1) if f > 0 else np.int64(0)
    thr = exp_zero_threshold(f)
    mx = err[E_MAXABS]
    for ci in range(nq):
        qc = q[qnz[ci]]
        mx = max(mx, _rne((qc if qc > 0 else -qc) * cm[ci], f, hm1))
    s_ok = np.zeros(Dh, np.bool_)
    for c in range(Dh):
        s_ok[c] = q[c] < 0
    ls, lS = best_lift(meta, Dh, s_ok)
    lc = np.empty(Dh, np.int64)
    lq = np.empty(Dh, np.float64)
    lx = np.empty(Dh, np.float64)
    nlc, qs, sc, nt = _lift_setup(q, ls, lS, f, lc, lq, lx)
    LM = cap >> 2
    SM = min(KI_STACK, cap >> 4)
    DM = cap >> 2
    GM = cap >> 4
    lst = cap + 1
    sk = lst + LM
    dfr = sk + (cap >> 2)
    gl = dfr + DM
    sf = np.empty(SM, np.float64)           # the waiting nodes' lifted bounds
    ng = 0
    # a node whose keys agree on every component the query reads is scored once (one
    # score, the same partial sums) and kept as a group when it holds more than
    # 2^(f+1) keys: each of them gets the weight round(e 2^f / Z) = 0 (Z >= count e),
    # so attend_sparse needs only count * e in Z (Z <= m 2^f < 2^(I+f-1): no overflow)
    grouping = I >= 2 and m < (np.int64(1) << (I - 1))
    gmin = (np.int64(1) << (f + 1)) if f < 61 else KI_BIG
    nl = 0
    nd = 0
    status = ST_EFFECTIVE
    # 1. the buffer, then depth first from the root
    b0 = meta[KI_NT]
    M = -KI_BIG
    if b0 < m:
        M, smax = _score_range(q, qnz, nq, KhT, b0, m, f, hm1, scores)
        mx = max(mx, smax)
        for j in range(b0, m):
            scores[lst + nl] = j
            nl += 1
    sp = 0
    if b0 > 0:
        root = meta[KI_ROOT]
        ub, ubf, pb = _bound(q, qnz, nq, KmT, R, root, f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
        scores[sk] = root
        scores[sk + 1] = ub
        scores[sk + 2] = pb
        sf[0] = ubf
        sp = 1
    while sp > 0:
        sp -= 1
        u = scores[sk + 3 * sp]
        ub = scores[sk + 3 * sp + 1]
        pb = scores[sk + 3 * sp + 2]
        ubf = sf[sp]
        if _skippable(ub, ubf, M, thr):
            if pb > mx:
                if nd >= DM:
                    status = ST_ABORTED
                    break
                scores[dfr + nd] = u
                nd += 1
            continue
        rr, c0 = node_record(R, Dh, u)
        rec = KmT[rr]
        n = rec[c0 + 2 * Dh]
        if grouping and n > gmin:
            same = True
            for ci in range(nq):
                c = qnz[ci]
                if rec[c0 + 2 * c] != rec[c0 + 2 * c + 1]:
                    same = False
                    break
            if same:
                if ng >= GM:
                    status = ST_ABORTED
                    break
                v = u
                while (v & 1) == 0:
                    vr, v0 = node_record(R, Dh, v)
                    v = KmT[vr, v0 + 2 * Dh + 1]
                bm, smax = _score_leaf(q, qnz, nq, KmT, R, Dh, v >> 1, np.int64(1), f, hm1, scores)
                mx = max(mx, smax)
                M = max(M, bm)
                scores[gl + 2 * ng] = bm
                scores[gl + 2 * ng + 1] = n
                ng += 1
                continue
        if (u & 1) == 1:
            if nl + n > LM:
                status = ST_ABORTED
                break
            y = u >> 1
            bm, smax = _score_leaf(q, qnz, nq, KmT, R, Dh, y, n, f, hm1, scores)
            mx = max(mx, smax)
            M = max(M, bm)
            prow, s0 = leaf_slot(R, Dh, y)
            for i in range(s0, s0 + n):
                scores[lst + nl] = KmT[prow, i]
                nl += 1
            continue
        a = rec[c0 + 2 * Dh + 1]
        b = rec[c0 + 2 * Dh + 2]
        uba, ubfa, pba = _bound(q, qnz, nq, KmT, R, a, f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
        ubb, ubfb, pbb = _bound(q, qnz, nq, KmT, R, b, f, hm1, ls, lS, lc, lq, lx, nlc, qs, sc, nt, M + thr)
        if _hkey(uba, ubfa) > _hkey(ubb, ubfb):      # the larger bound on top, popped first
            a, b = b, a
            uba, ubb = ubb, uba
            ubfa, ubfb = ubfb, ubfa
            pba, pbb = pbb, pba
        if sp + 2 > SM:
            status = ST_ABORTED
            break
        scores[sk + 3 * sp] = a
        scores[sk + 3 * sp + 1] = uba
        scores[sk + 3 * sp + 2] = pba
        sf[sp] = ubfa
        scores[sk + 3 * sp + 3] = b
        scores[sk + 3 * sp + 4] = ubb
        scores[sk + 3 * sp + 5] = pbb
        sf[sp + 1] = ubfb
        sp += 2
    if status == ST_ABORTED:
        meta[KI_FAILS] += 1
        scores[cap] = -1
        if mx > err[E_MAXABS]:
            err[E_MAXABS] = mx
        return M, status
    # 2. skipped nodes whose partial sums might exceed the meter (the stack's room)
    nsc = nl
    for di in range(nd):
        scores[sk] = scores[dfr + di]
        sp = 1
        while sp > 0:
            sp -= 1
            u = scores[sk + sp]
            # pb alone: the box bounds without a square row (ls = -1)
            _, _, pb = _bound(q, qnz, nq, KmT, R, u, f, hm1, np.int64(-1), np.int64(0), lc, lq, lx,
                               np.int64(0), qs, sc, nt, np.int64(0))
            if pb <= mx:
                continue
            rr, c0 = node_record(R, Dh, u)
            if (u & 1) == 1:
                n = KmT[rr, c0 + 2 * Dh]
                bm, smax = _score_leaf(q, qnz, nq, KmT, R, Dh, u >> 1, n, f, hm1, scores)
                mx = max(mx, smax)
                nsc += n
                continue
            scores[sk + sp] = KmT[rr, c0 + 2 * Dh + 1]
            scores[sk + sp + 1] = KmT[rr, c0 + 2 * Dh + 2]
            sp += 2
    # 3. the kept keys, ascending
    nk = 0
    for i in range(nl):
        j = scores[lst + i]
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
