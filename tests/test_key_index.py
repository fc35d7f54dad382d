"""The key-value index of the pruned attention (constructions/machine/keyindex.py) and the
quadratic readout (readouts.quadratic_readout) against the plain definitions, bit
for bit: scores by fx_mul / fx_add in component order, then fx_attend; the generic
readout over every candidate. The same output, M, err array (largest |raw|, first
error, saturation count) and token.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rnngap.constructions.machine import keyindex as KI
from rnngap.constructions.machine import fixedpoint as FP, kernels as K
from rnngap.constructions.machine import attention as AT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine.fixedpoint import E_MAXABS, new_err
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import NUMBER_BASE
from test_pruned_attention import _plain     # the plain definition: fx_mul / fx_add scores, fx_attend




class _Cache:
    """One head's pruning cache with the index rows, keys stored by store_key, the
    position blocks paused (so attention_scores tries the key-value index)."""

    def __init__(self, Kh, V, cap=0):
        self.Dh = Kh.shape[1]
        self.cap = AT.cache_capacity(max(len(Kh), cap), True)
        self.KhT = np.zeros((self.Dh, self.cap), np.int64)
        self.KmT = np.zeros((AT.cache_rows(self.Dh, True), self.cap), np.int64)
        self.Vc = np.zeros((self.cap, V.shape[1]), np.int64)
        self.Vc[:len(V)] = V
        self.scores = np.zeros(AT.scores_length(self.cap, True), np.int64)
        self.n = 0
        self.Kh = Kh

    def grow_to(self, m):
        for t in range(self.n, m):
            AT.store_key(np.ascontiguousarray(self.Kh[t]), t, self.KhT, self.KmT)
        self.n = m

    def attend(self, q, m, args, err):
        """(out, M, header): header <= -2 when the index ran (-2 - kept keys)."""
        self.grow_to(m)
        self.KmT[self.Dh, AT.PRUNE_HINT] = 10 ** 9          # position blocks paused
        self.KmT[2 * self.Dh, KI.KI_PAUSE] = 0            # the index not paused
        M = AT.attention_scores(q, self.KhT, self.KmT, m, *args, err, np.zeros(self.Dh, np.int64),
                               np.zeros(self.Dh, np.int64), self.scores)
        hdr = int(self.scores[self.cap])
        kept = self.scores[self.cap + 1:self.cap + 1 + max(-2 - hdr, 0)].tolist()
        out = np.zeros(self.Vc.shape[1], np.int64)
        AT.attend_sparse(self.scores, m, M, self.Vc, *args, err, np.zeros(self.cap, np.int64), out)
        return out, int(M), hdr, kept


def _parabola_case(rng, m):
    """Match-head keys (a, rec, a^2 + rec^2, bos, pos) (raw = value 2^f), some
    codes repeated many times, and a query lam (2 Q a + 2 rec - sq) + bos + mu pos
    with Q a code, or between codes (a raw value off the grid of codes)."""
    I = int(rng.integers(24, 46))
    f = int(rng.integers(0, 6))
    span = int(rng.integers(3, 400))
    a = rng.integers(-10, span, size=m)
    if rng.random() < 0.5:                        # many duplicates
        a[rng.random(m) < 0.6] = int(rng.integers(-10, span))
    rec = rng.integers(0, 2, size=m)
    bos = np.zeros(m, np.int64)
    bos[0] = 1
    a[0] = rec[0] = 0
    pos = np.arange(m)
    Kh = np.stack([a << f, rec << f, (a * a + rec * rec) << f, bos << f, pos << f], axis=1).astype(np.int64)
    lam = int(rng.integers(1, 9))
    Q = int(rng.integers(-10, span))
    qa = (2 * lam * Q) << f
    if rng.random() < 0.4:
        qa += int(rng.integers(-(1 << f), (1 << f) + 1)) * lam      # between codes
    mu = int(rng.choice([0, 0, 1, 2]))
    q = np.array([qa, (2 * lam) << f, -(lam << f), int(rng.integers(0, 50)) << f,
                  mu * int(rng.choice([-1, 1])) << f], np.int64)
    vb = int(rng.integers(0, 20))
    V = rng.integers(-(1 << vb), (1 << vb) + 1, size=(m, 2)).astype(np.int64)
    return I, f, q, Kh, V


def _check(c, q, Kh, V, m, args):
    e1, e2 = new_err(), new_err()
    want, Mw = _plain(q, Kh, V, m, args, e1)
    got, Mg, hdr, kept = c.attend(q, m, args, e2)
    assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (m, q.tolist(), args)
    if e1[0] == 0 and e1[5] == 0:
        assert Mg == Mw
    return hdr


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(4))
def test_index_equals_plain_parabola_keys(seed, mode):
    """Keys on a parabola, queries at or between codes, duplicates; several queries
    on one growing cache (the index catches up and merges its trees): every step
    equals the plain definition, and the index ran and skipped keys."""
    rng = np.random.default_rng([seed, 31])
    used = 0
    for trial in range(6):
        m_total = int(rng.choice([100, 700, 1500]))
        I, f, q, Kh, V = _parabola_case(rng, m_total)
        args = FixedFormat(I, f, mode).args
        c = _Cache(Kh, V)
        for m in sorted(set(int(x) for x in rng.integers(40, m_total + 1, size=4))):
            hdr = _check(c, q, Kh, V, m, args)
            used += int(hdr <= -2 and -2 - hdr < m // 4)
    assert used > 10


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(3))
def test_index_equals_plain_random_keys(seed, mode):
    """Random keys (no square row), random queries, formats that sometimes overflow
    (the index never runs then: the checked path) and many equal keys (groups)."""
    rng = np.random.default_rng([seed, 32])
    for trial in range(12):
        I = int(rng.integers(4, 40))
        f = int(rng.integers(0, min(12, 60 - I) + 1))
        m = int(rng.choice([50, 300, 1200]))
        Dh = int(rng.integers(1, 7))
        kb = int(rng.integers(0, I + f))
        Kh = rng.integers(-(1 << kb), (1 << kb) + 1, size=(m, Dh)).astype(np.int64)
        if rng.random() < 0.5:
            Kh[rng.random(m) < 0.7] = Kh[0]
        qb = int(rng.integers(0, 30))
        q = rng.integers(-(1 << qb), (1 << qb), size=Dh, endpoint=True).astype(np.int64)
        V = rng.integers(-(1 << 10), (1 << 10) + 1, size=(m, 2)).astype(np.int64)
        args = FixedFormat(I, f, mode).args
        c = _Cache(Kh, V)
        for mm in (m // 3, m):
            _check(c, q, Kh, V, max(mm, 33), args)


@pytest.mark.parametrize("f", (0, 1, 5, 12))
@pytest.mark.parametrize("delta", (-1, 0, 1))
def test_kept_at_the_threshold(delta, f):
    """Dh = 1, q = 1.0: score = key. One key scores Mx + thr + delta, every other
    one Mx or far below: it is listed (kept) for delta = 0, 1 and not for -1; the
    results are the plain definition's in every case."""
    thr = int(FP.exp_zero_threshold(f))
    Mx = 1 << (f + 10)
    m = 300
    keys = np.full(m, Mx - (1 << (f + 8)), np.int64)
    keys[150] = Mx
    keys[77] = Mx + thr + delta
    Kh = keys[:, None]
    q = np.ones(1, np.int64) << f
    V = (np.arange(m, dtype=np.int64)[:, None] + 1) << f
    args = FixedFormat(24, f, "raise").args
    c = _Cache(Kh, V)
    e1, e2 = new_err(), new_err()
    want, _ = _plain(q, Kh, V, m, args, e1)
    got, M, hdr, kept = c.attend(q, m, args, e2)
    assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist()
    assert hdr <= -2 and M == Mx
    assert (77 in kept) == (delta >= 0)
    assert 150 in kept


def test_skipped_nodes_above_the_meter():
    """Keys (a, a^2, pos) with a >= 0 and a query for the code Q = -7: the best
    keys are those with a = 0, but the largest |partial sum| is lam (a^2 + 14 a)
    at the largest a, above every column product, in a node the search skips; the
    index must score it for the meter (the largest |raw|)."""
    rng = np.random.default_rng(5)
    f, m, lam = 2, 1200, 4
    a = rng.integers(0, 2000, size=m)
    Kh = np.stack([a << f, (a * a) << f, np.arange(m) << f], axis=1).astype(np.int64)
    V = np.ones((m, 1), np.int64) << f
    args = FixedFormat(40, f, "raise").args
    for mu in (1, -1):
        q = np.array([(2 * lam * -7) << f, -(lam << f), mu << f], np.int64)
        c = _Cache(Kh, V)
        e1, e2 = new_err(), new_err()
        want, _ = _plain(q, Kh, V, m, args, e1)
        got, M, hdr, kept = c.attend(q, m, args, e2)
        assert hdr <= -2 and len(kept) < m // 4         # the index ran and skipped
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist()
        amax = int(a.max())
        # above every column product (lam amax^2 the largest): set by a partial sum
        assert e1[E_MAXABS] >= lam * (amax * amax + 14 * amax) << f > (lam * amax * amax << f) + (m << f)


def test_groups_of_equal_keys():
    """A thousand equal keys that tie for the maximum: the index keeps them as a
    group (every weight rounds to 0, only count * e enters Z), same results."""
    f, m = 1, 1500
    Kh = np.zeros((m, 3), np.int64)
    Kh[:, 0] = 5 << f
    Kh[:, 1] = 25 << f
    Kh[::3, 0] = np.arange(0, m, 3) << f
    Kh[::3, 1] = (np.arange(0, m, 3) ** 2) << f
    q = np.array([(2 * 4 * 5) << f, -(4 << f), 0], np.int64)
    V = (np.arange(m, dtype=np.int64)[:, None] % 11) << f
    for mode in ("raise", "saturate"):
        args = FixedFormat(30, f, mode).args
        c = _Cache(Kh, V)
        e1, e2 = new_err(), new_err()
        want, _ = _plain(q, Kh, V, m, args, e1)
        got, M, hdr, kept = c.attend(q, m, args, e2)
        assert hdr <= -2 and len(kept) < m // 4
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist()


def test_square_row_detection():
    """The square-row masks: (a, a^2) keys give s = 1, S = {0}; one key off the
    parabola clears it; huge keys (beyond 2^50) turn the detection off."""
    f = 3
    a = np.arange(-20, 200)
    Kh = np.stack([a << f, (a * a) << f], axis=1).astype(np.int64)
    c = _Cache(Kh, np.zeros((len(a), 1), np.int64))
    c.grow_to(len(a))
    KI.update_index(c.KhT, c.KmT, len(a), f)
    meta = c.KmT[2 * c.Dh]
    assert (int(meta[KI.KI_LIFT + 1]) >> 1) & 1 == 1           # S = {0} for s = 1
    assert int(meta[KI.KI_LIFT + 0]) == 0
    Kh2 = Kh.copy()
    Kh2[100, 1] += 1
    c2 = _Cache(Kh2, np.zeros((len(a), 1), np.int64))
    c2.grow_to(len(a))
    KI.update_index(c2.KhT, c2.KmT, len(a), f)
    assert (int(c2.KmT[2 * c2.Dh, KI.KI_LIFT + 1]) >> 1) & 1 == 0
    big = np.array([[1 << 51, 0]] + [[0, 0]] * 40, np.int64)
    c3 = _Cache(big, np.zeros((41, 1), np.int64))
    c3.grow_to(41)
    KI.update_index(c3.KhT, c3.KmT, 41, f)
    assert c3.KmT[2 * c3.Dh, KI.KI_NOLIFT] == 1


def _tree_keys(c, m, f):
    """Walk one head's index after update_index(m): check every node's record against
    its keys (exact box and count, leaves of 8 to 16 keys side by side with their
    copies, every internal node weight-balanced) and return the positions in the
    tree (each key below KI_NT exactly once) and the tree's depth."""
    Dh, R, KmT = c.Dh, 2 * c.Dh, c.KmT
    KI.update_index(c.KhT, KmT, m, f)
    nt = int(KmT[R, KI.KI_NT])
    assert 0 <= m - nt < 2 * KI.KI_LEAF and int(KmT[R, KI.KI_N]) == m
    if nt == 0:
        return [], 0

    def rec(u):
        r, c0 = KI.node_record(R, Dh, u)
        return KmT[r, c0:c0 + 2 * Dh + 5]

    def walk(u, d):
        r = rec(u)
        if u & 1:
            y = u >> 1
            prow, s0 = KI.leaf_slot(R, Dh, y)
            n = int(r[2 * Dh])
            assert (KI.KI_LEAF // 2 <= n or nt < KI.KI_LEAF // 2) and n <= KI.KI_LEAF
            pos = KmT[prow, s0:s0 + n].tolist()
            for cc in range(Dh):
                assert KmT[KI._copy_row(R, Dh, cc, y), s0:s0 + n].tolist() == c.KhT[cc, pos].tolist()
            depth = d
        else:
            pa, da = walk(int(r[2 * Dh + 1]), d + 1)
            pb, db = walk(int(r[2 * Dh + 2]), d + 1)
            assert 10 * max(len(pa), len(pb)) <= KI.KI_ALPHA10 * (len(pa) + len(pb))
            pos, depth = pa + pb, max(da, db)
        assert int(r[2 * Dh]) == len(pos)
        keys = c.KhT[:, pos]
        assert r[0:2 * Dh:2].tolist() == keys.max(axis=1).tolist()
        assert r[1:2 * Dh:2].tolist() == keys.min(axis=1).tolist()
        return pos, depth

    pos, depth = walk(int(KmT[R, KI.KI_ROOT]), 0)
    assert sorted(pos) == list(range(nt))
    return pos, depth


def _keys_of_kind(rng, kind, m, f):
    """Keys of one kind: random, a parabola (a, a^2, pos) over random codes, codes
    monotone in the position, up or down (appended along the split component), or
    mostly one key."""
    if kind == "random":
        Dh = int(rng.integers(1, 7))
        kb = int(rng.integers(0, 30))
        return rng.integers(-(1 << kb), (1 << kb) + 1, size=(m, Dh)).astype(np.int64)
    if kind == "equal":
        Dh = int(rng.integers(1, 4))
        K_ = rng.integers(-5, 6, size=(m, Dh)).astype(np.int64)
        K_[rng.random(m) < 0.8] = K_[0]
        return K_
    if kind == "parabola":
        a = rng.integers(-10, int(rng.integers(3, 500)), size=m)
    elif kind == "up":
        a = np.cumsum(rng.integers(0, 4, size=m))
    else:
        a = -np.cumsum(rng.integers(0, 4, size=m))
    return np.stack([a << f, (a * a) << f, np.arange(m) << f], axis=1).astype(np.int64)


KINDS = ("random", "equal", "parabola", "up", "down")


@given(seed=st.integers(0, 2 ** 32 - 1), kind=st.sampled_from(KINDS))
def test_tree_records_under_insertion(seed, kind):
    """Keys added a few at a time (the index updated in between): after every
    update the tree's records equal their definitions (boxes, counts, leaf slots),
    every node is weight-balanced, the tree holds every key but the buffer's once,
    and its depth stays within log_{10/7} of the leaves' count."""
    rng = np.random.default_rng(seed)
    f = int(rng.integers(0, 4))
    m_total = int(rng.integers(40, 900))
    Kh = _keys_of_kind(rng, kind, m_total, f)
    c = _Cache(Kh, np.zeros((m_total, 1), np.int64))
    m = 0
    while m < m_total:
        m = min(m_total, m + int(rng.choice([1, 1, 2, 5, 17, 60])))
        c.grow_to(m)
        pos, depth = _tree_keys(c, m, f)
        if pos:
            assert depth <= np.log(len(pos) / 8 + 1) / np.log(10 / 7) + 2


@pytest.mark.parametrize("kind", ("up", "down"))
def test_appended_keys_rotate_not_rebuild(kind):
    """Codes monotone in the position, appended along the split component (every new
    key beyond the others): single rotations keep the tree balanced, so rebuilds
    place about two keys per key (the leaves split in two), not O(log m) of
    rebuilding the spine."""
    rng = np.random.default_rng(11)
    m = 3000
    Kh = _keys_of_kind(rng, kind, m, 1)
    c = _Cache(Kh, np.zeros((m, 1), np.int64))
    for mm in range(64, m + 1):
        c.grow_to(mm)
        KI.update_index(c.KhT, c.KmT, mm, 1)
    _, depth = _tree_keys(c, m, 1)
    rebuilt = int(c.KmT[2 * c.Dh, KI.KI_REBUILT])
    assert rebuilt < 3 * m and depth <= 12


@given(seed=st.integers(0, 2 ** 32 - 1), kind=st.sampled_from(KINDS),
       mode=st.sampled_from(("raise", "saturate")))
def test_index_equals_plain_while_keys_arrive(seed, kind, mode):
    """Queries in between insertions (a new query after every few keys, at a code,
    between codes or random) on one growing cache: every step equals the plain
    definition (output, M, err)."""
    rng = np.random.default_rng(seed)
    f = int(rng.integers(0, 4))
    m_total = int(rng.integers(60, 500))
    Kh = _keys_of_kind(rng, kind, m_total, f)
    Dh = Kh.shape[1]
    I = 44 if kind != "random" else int(rng.integers(20, 50))
    args = FixedFormat(I, f, mode).args
    V = rng.integers(-(1 << 10), (1 << 10) + 1, size=(m_total, 2)).astype(np.int64)
    c = _Cache(Kh, V)
    m = 33
    while m <= m_total:
        if kind in ("random", "equal"):
            qb = int(rng.integers(0, 12))
            q = rng.integers(-(1 << qb), (1 << qb), size=Dh, endpoint=True).astype(np.int64)
        else:
            lam = int(rng.integers(1, 6))
            code = int(Kh[int(rng.integers(0, m)), 0]) >> f
            qa = (2 * lam * code) << f
            if rng.random() < 0.3:
                qa += int(rng.integers(-(1 << f), (1 << f) + 1)) * lam
            q = np.array([qa, -(lam << f), int(rng.choice([0, 1, -1])) << f], np.int64)
        _check(c, q, Kh, V, m, args)
        m += int(rng.choice([1, 3, 16, 40]))


@pytest.mark.parametrize("f", (0, 1, 4))
@pytest.mark.parametrize("order", range(3))
def test_whole_nodes_at_the_threshold(f, order):
    """Dh = 1, q = 1.0: a hundred keys score exactly Mx + thr (a node's bound equals
    the threshold: not skipped, every key kept), a hundred score Mx + thr - 1 (a
    node whose bound is one below: skipped), inserted in a seeded order over many
    steps: the kept keys (listed, or in groups of equal keys) are exactly those at
    Mx + thr or above, and every step equals the plain definition."""
    thr = int(FP.exp_zero_threshold(f))
    Mx = 1 << (f + 12)
    m = 400
    keys = np.full(m, Mx - (1 << (f + 9)), np.int64)
    keys[:100] = Mx + thr
    keys[100:200] = Mx + thr - 1
    keys[200] = Mx
    keys = np.random.default_rng([order, f]).permutation(keys)
    Kh = keys[:, None]
    q = np.ones(1, np.int64) << f
    V = (np.arange(m, dtype=np.int64)[:, None] % 7) << f
    args = FixedFormat(30, f, "raise").args
    c = _Cache(Kh, V)
    for mm in range(40, m + 1, 9):
        e1, e2 = new_err(), new_err()
        want, Mw = _plain(q, Kh, V, mm, args, e1)
        got, M, hdr, kept = c.attend(q, mm, args, e2)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist() and M == Mw
        if hdr <= -2 and M == Mx:
            want_kept = [j for j in range(mm) if keys[j] >= Mx + thr]
            # the kept keys listed, then the groups of equal keys (score, count)
            g0 = c.cap + 1 + len(kept)
            groups = c.scores[g0 + 1:g0 + 1 + 2 * int(c.scores[g0])].reshape(-1, 2).tolist()
            assert set(kept) <= set(want_kept) and all(sc_ >= Mx + thr for sc_, _ in groups)
            assert len(kept) + sum(n_ for _, n_ in groups) == len(want_kept)


def test_istree_session_equals_record_session():
    """The IsTree model (match heads over token codes) through a pruning session
    (the key-value index and the quadratic readout) and through a record session
    (the full path): the same tokens, residual and err after every token; the index
    ran on the match heads."""
    from rnngap.checks.tasks import istree as T
    from rnngap.constructions.models import istree as IT
    from rnngap.constructions.machine.vocab import FALSE, TRUE
    n = 60
    g = T.random_tree(np.random.default_rng(3), n)
    model = IT.istree_transformer(n)
    prompt = IT.prompt_tokens(g.edges)
    cap = len(prompt) + IT.cot_bound(n) + 1
    s1 = model.session(capacity=cap)
    s2 = model.session(capacity=cap, record=True)
    s1.feed(prompt)
    s2.feed(prompt)
    assert s1.x.tolist() == s2.x.tolist() and s1.err.tolist() == s2.err.tolist()
    cot = []
    while True:
        t1, t2 = s1.next_token(), s2.next_token()
        assert t1 == t2 and s1.err.tolist() == s2.err.tolist()
        if t1 in (TRUE, FALSE):
            break
        cot.append(t1)
        s1.feed([t1])
        s2.feed([t1])
        assert s1.x.tolist() == s2.x.tolist() and s1.err.tolist() == s2.err.tolist()
    tour = [t - NUMBER_BASE for t in cot if t >= NUMBER_BASE]
    assert tour == T.dfs_tour(n, g.edges)
    Dh = s2.Km.shape[2]
    calls = s1.Km[:, :, 2 * Dh, KI.KI_CALLS]
    assert (calls > 0).sum() >= 7


def _readout_case(rng):
    """A readout a tau x[0] + b tau^2 x[1] (integer a, b) over a candidate set with
    gaps (some specials, [COUNT]-like ids, some numbers missing)."""
    I = int(rng.integers(8, 40))
    f = int(rng.integers(0, 6))
    nnum = int(rng.integers(60, 400))
    nums = NUMBER_BASE + np.flatnonzero(rng.random(nnum) < 0.8)
    specials = np.flatnonzero(rng.random(NUMBER_BASE) < 0.4)
    cand = np.unique(np.r_[specials, nums, [0, NUMBER_BASE + nnum]]).astype(np.int64)
    a = int(rng.choice([2, 1, -3, 0, 5]))
    b = int(rng.choice([-1, -2, 1, 0, 3]))
    out_dim = np.array([0, 1], np.int64)
    out_kind = np.array([K.F_TOK, K.F_TOK_SQ], np.int64)
    out_param = np.zeros(2, np.int64)
    out_coef = np.array([a << f, b << f], np.int64)
    x = np.zeros(3, np.int64)
    vb = int(rng.integers(0, I + f))
    x[0] = int(rng.integers(-(1 << vb), (1 << vb) + 1))
    x[1] = int(rng.choice([1 << f, 0, 2 << f, -(1 << f), int(rng.integers(-(1 << 8), 1 << 8))]))
    if rng.random() < 0.2:
        x[0] = 0
    if rng.random() < 0.3:      # a half-way value: two codes tie
        x[0] = ((2 * int(rng.integers(-9, nnum)) + 1) << f) >> 1 if f > 0 else x[0]
    return I, f, out_dim, out_kind, out_param, out_coef, cand, x


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(3))
def test_quadratic_readout_equals_full(seed, mode):
    """readout_flat (the quadratic readout when it applies) against the generic
    readout over every candidate: the same token and err, ties and overflows
    included; the shortcut ran in most trials."""
    rng = np.random.default_rng([seed, 41])
    used = 0
    for trial in range(60):
        I, f, od, ok, op, oc, cand, x = _readout_case(rng)
        args = FixedFormat(I, f, mode).args
        w, wm, okt = RO.readout_table(ok, op, oc, cand, *args)
        e1, e2, e3 = new_err(), new_err(), new_err()
        want = RO._readout(x, od, ok, op, oc, cand, *args, e1)
        got = RO.readout_flat(x, od, ok, op, oc, cand, w, wm, okt, np.array([-1, 0, 0], np.int64), *args, e2)
        assert got == want and e1.tolist() == e2.tolist(), (trial, x.tolist(), oc.tolist(), args)
        used += int(RO.quadratic_readout(x, od, ok, op, oc, cand, *args, e3) >= 0)
    assert used > 20


_SUBPROCESS = r"""
import json, sys
import numpy as np
sys.path[:0] = json.loads(sys.argv[1])
import test_key_index as T
from rnngap.constructions.machine.fixedpoint import new_err
from rnngap.constructions.machine.formats import FixedFormat
rng = np.random.default_rng(7)
res = []
I, f, q, Kh, V = T._parabola_case(rng, 120)
args = FixedFormat(I, f, "raise").args
c = T._Cache(Kh, V)
for m in (40, 70, 120):
    e = new_err()
    out, M, hdr, kept = c.attend(q, m, args, e)
    res.append([out.tolist(), M, hdr, kept, e.tolist()])
for trial in range(8):
    I, f, od, ok, op, oc, cand, x = T._readout_case(rng)
    args = FixedFormat(I, f, "saturate").args
    e = new_err()
    res.append([int(T.RO.quadratic_readout(x, od, ok, op, oc, cand, *args, e)), e.tolist()])
print(json.dumps(res))
"""


def test_no_jit_gives_the_same():
    """A small index case (three steps on one cache) and a few quadratic readouts
    with NUMBA_DISABLE_JIT=1 and compiled: identical results."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [here] + [p for p in sys.path if p]
    outs = []
    for jit_off in ("1", "0"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit_off)
        r = subprocess.run([sys.executable, "-W", "ignore", "-c", _SUBPROCESS, json.dumps(paths)], env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    assert any(x[2] <= -2 for x in outs[0][:3])
