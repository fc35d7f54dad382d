"""The key-value index on two limbs (constructions/machine/wide_exec.py ``w_index_scores``)
and the two-limb quadratic readout (``w_quadratic_readout``) against the plain
definitions: scoring every key (``w_scores`` then ``w_attend`` over every key) and
the generic readout over every candidate.

Exact means: the same M, the same attention output, the same error array (the
largest |raw| included), every listed key's score exact and every unlisted key's
score below M + exp_zero_threshold(f) (its weight is exactly 0). The heads are
match heads over token codes (keys tau, tau^2, position, the shape the position
blocks cannot prune), with raws past 2^63 so that the shadow keys are shifted,
keys that grow while the index is in use (the shift rises and the tree is rebuilt),
random heads, and heads whose skipped nodes hold the largest partial sums (the
meter's revisit).
"""
from __future__ import annotations

import numpy as np
import pytest

from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine import wide_attention as WA
from rnngap.constructions.machine.fixedpoint import E_CODE, E_MAXABS, E_SAT, exp_zero_threshold


def _limbs(rows):
    return np.array([[WD.to_limbs(int(v)) for v in row] for row in rows], np.int64)


class Head:
    """One head's keys and values in a two-limb cache with its block bounds and its
    index, filled key by key as a session fills them."""

    def __init__(self, K_, V_):
        self.K = _limbs(K_)
        self.V = _limbs(V_)
        m, Dh = self.K.shape[:2]
        self.m, self.Dh = m, Dh
        self.KmE, LB, SB, *_ = WA.prune_arrays(1, 1, m, Dh, True)
        for t in range(m):
            WA.w_store_bounds(self.K[t], t, self.KmE[0, 0], LB[0, 0], SB[0, 0])
        self.Ksh, self.Kix, self.ist, self.stk, self.stf, self.nb, self.gs, self.gc = WA.index_arrays(1, 1, m, Dh, True)

    def index(self, q, m, I, f, mode=0):
        """(ok, M, output, err, listed, scored) of the index over the first m keys."""
        qw = _limbs([q])[0]
        err, scores = WD.new_wide_err(), np.zeros((self.m, 2), np.int64)
        scr, qnz, qf = np.zeros(WX.SCRATCH_LEN, np.int64), np.zeros(self.Dh, np.int64), np.zeros(self.Dh)
        idx = np.zeros(self.m, np.int64)
        self.groups = 0
        ok, Mh, Ml, n, ng, scored = WA.w_index_scores(qw, self.K, self.KmE[0, 0], self.Ksh[0, 0], self.Kix[0, 0],
                                                      self.ist[0, 0], m, I, f, mode, err, scr, qnz, scores, idx,
                                                      self.stk, self.stf, self.nb, qf, self.gs, self.gc)
        if not ok:
            return False, None, None, err.tolist(), None, scored
        self.groups = int(ng)
        o = self._attend(scores, Mh, Ml, m, I, f, mode, err, idx, n, ng)
        return True, (int(Mh), int(Ml)), o, err.tolist(), (idx[:n].copy(), scores), scored

    def plain(self, q, m, I, f, mode=0):
        qw = _limbs([q])[0]
        err, scores = WD.new_wide_err(), np.zeros((self.m, 2), np.int64)
        scr, qnz = np.zeros(WX.SCRATCH_LEN, np.int64), np.zeros(self.Dh, np.int64)
        Mh, Ml = WA.w_scores(qw, self.K, m, I, f, mode, err, scr, qnz, scores)
        o = self._attend(scores, Mh, Ml, m, I, f, mode, err, np.zeros(1, np.int64), -1, 0)
        return (int(Mh), int(Ml)), o, err.tolist(), scores

    def _attend(self, scores, Mh, Ml, m, I, f, mode, err, idx, n, ng):
        d = self.V.shape[1]
        o = np.zeros((d, 2), np.int64)
        WA.w_attend_groups(scores, Mh, Ml, m, self.V, I, f, mode, err, np.zeros(6, np.int64),
                           np.zeros(WX.SCRATCH_LEN, np.int64), np.zeros((self.m, 2), np.int64),
                           np.zeros((2 * d, 3), np.int64), o, idx, n, self.gs, self.gc, ng)
        return o.tolist()


def _value(s):
    return WD.from_limbs(int(s[0]), int(s[1]))


def _check(head, q, m, I, f, mode=0):
    """The index against the plain definition at m keys; returns "pruned",
    "every key" (exact, scored over a quarter) or "fallback" (not provably in range)."""
    ok, M, o, err, listed, scored = head.index(q, m, I, f, mode)
    PM, Po, Perr, Pscores = head.plain(q, m, I, f, mode)
    if not ok:
        return "fallback"
    assert M == PM and o == Po and err == Perr
    idx, scores = listed
    assert len(set(idx.tolist())) == len(idx) and list(idx) == sorted(idx) and (idx < m).all()
    for j in idx:
        assert scores[j].tolist() == Pscores[j].tolist()
    # past f = 56: (f + 1) ln 2 2^f, above int64 from f = 58 (ln 2 from above: a conservative "near")
    thr = int(exp_zero_threshold(f)) if f <= WA.EXP_INT64_MAX_FRAC_BITS else -((f + 1) * (1 << f) * 6932 // 10000)
    top = _value(PM)
    unlisted = np.setdiff1d(np.arange(m), idx)
    near = [j for j in unlisted if _value(Pscores[j]) - top >= thr]
    # keys near the maximum that are not listed are in the index's groups (weight 0 by count)
    assert len(near) <= sum(int(c) for c in head.gc[:head.groups]), (len(near), head.groups)
    if near:
        return "grouped"
    return "pruned" if 4 * scored <= m else "every key"


def _match_keys(codes, f, lam_shift=0):
    """Keys (tau, tau^2, pos) of a match head at scale 2^f (raws)."""
    return [[int(c) << f, (int(c) * int(c)) << f, p << f] for p, c in enumerate(codes)]


def _match_query(code, f, lam, mu):
    """Query of score lam (2 q tau - tau^2) + mu pos (raws, scale 2^f)."""
    return [(2 * lam * code) << f, -lam << f, mu << f]


@pytest.mark.parametrize("f,big", [(12, 0), (20, 40), (30, 54), (60, 8)])
def test_index_on_match_heads(f, big):
    """A match head over codes up to 2^(big/2 + 10): keys past 2^63 when big > 0 (the
    shadow keys are shifted), queries for present and absent codes, at growing m on
    one index (insertions, rebuilds). f = 60: past the int64 exp (no groups, the
    pruning's threshold in float64 past int64)."""
    rng = np.random.default_rng(f + big)
    m = 3000
    codes = rng.integers(0, 1 << (10 + big // 2), size=m)
    codes[rng.random(m) < 0.3] = 17                       # a code repeated everywhere
    P = m
    lam, mu = 2 * P + 8, 1
    K_ = _match_keys(codes, f)
    head = Head(K_, [[int(c)] for c in codes])
    I = 126 - f
    seen = set()
    for m_ in (256, 300, 301, 900, 2048, 2999, 3000):
        for code in (int(codes[m_ // 2]), 17, int(codes[m_ - 1]), int(codes.max()) + 1):
            seen.add(_check(head, _match_query(code, f, lam, mu), m_, I, f))
    assert "pruned" in seen, seen
    if big:
        assert head.ist[0, 0, WA.IX_SHIFT] > 0                # the shadow keys were shifted


@pytest.mark.parametrize("f", [0, 2, 5])
def test_index_groups_of_equal_keys(f):
    """Keys (tau, tau^2) without a position: a code repeated by hundreds of keys
    ties at the maximum when queried; its nodes are scored once and kept as
    groups (every key's weight round(e 2^f / Z) = 0); the output, Z's effect and
    the meter are the plain definition's."""
    rng = np.random.default_rng(f)
    m = 2500
    codes = rng.integers(0, 400, size=m)
    codes[rng.random(m) < 0.4] = 17
    K_ = [[int(c) << f, (int(c) * int(c)) << f] for c in codes]
    head = Head(K_, [[int(v)] for v in rng.integers(-50, 50, size=m)])
    seen = set()
    for m_ in (1000, 2500):
        for code in (17, int(codes[3]), 401):
            seen.add(_check(head, [(2 * 3 * code) << f, -3 << f], m_, 60, f))
    assert "grouped" in seen, seen


def test_index_groups_enter_z():
    """Groups near the maximum (code 18 keys, scores 2 below it: e = round(e^-2 2^3)
    = 1 each) next to one listed key at the maximum (e = 2^3): that key's weight
    round(2^3 2^3 / Z), Z = 8 + (number of code 18 keys), is 2 below Z = 43 and 1
    from it on, so the outputs show Z exactly (one e less per group changes them)."""
    f, d = 3, 2
    rng = np.random.default_rng(9)
    kinds = set()
    for count in range(28, 60):
        m = 600
        codes = [int(c) for c in rng.choice([c for c in range(100) if abs(c - 17) > 3], size=m)]
        for j in rng.choice(m - 40, size=count, replace=False):
            codes[int(j)] = 18
        codes[m - 1] = 17
        K_ = [[c << f, (c * c) << f] for c in codes]
        head = Head(K_, [[1000 if c == 17 else 7] for c in codes])
        kinds.add(_check(head, [(2 * d * 17) << f, -d << f], m, 40, f))
    assert "grouped" in kinds, kinds


def test_index_when_keys_grow():
    """Keys that pass 2^61, then 2^90 after the index was built: the shift rises,
    every shadow key is rewritten and the tree rebuilt; the results stay exact."""
    f = 16
    rng = np.random.default_rng(5)
    m = 1200
    codes = rng.integers(0, 1000, size=m).astype(object)
    codes[600:] = [int(c) << 20 for c in codes[600:]]
    codes[1000:] = [int(c) << 16 for c in codes[1000:]]
    K_ = _match_keys(codes, f)
    head = Head(K_, [[1] for _ in codes])
    shifts = []
    for m_ in (300, 599, 700, 999, 1100, 1200):
        for code in (int(codes[m_ - 3]), int(codes[5])):
            _check(head, _match_query(code, f, 2 * m + 8, 1), m_, 126 - f, f)
        shifts.append(int(head.ist[0, 0, WA.IX_SHIFT]))
    assert shifts[0] == 0 and shifts[-1] > shifts[2] > 0, shifts


def test_index_on_random_heads():
    """Random keys and queries (sign mixes, zero components, a peaked key, huge
    negative partial sums far from the maximum, keys near the range's edge): the
    index is exact whenever it answers, prunes, and falls back when the column
    bounds cannot exclude an overflow."""
    rng = np.random.default_rng(21)
    outcomes = set()
    for trial in range(50):
        I, f = int(rng.integers(30, 90)), int(rng.integers(4, 40))
        m, Dh, d = int(rng.integers(256, 1500)), int(rng.integers(1, 5)), int(rng.integers(1, 3))
        scale = int(rng.integers(10, I + f - 2))
        K_ = rng.integers(-(1 << 20), 1 << 20, size=(m, Dh)).astype(object) * (1 << max(0, scale - 20))
        K_[rng.random((m, Dh)) < 0.2] = 0
        if trial % 3 == 0:                                # a peaked head
            K_[int(rng.integers(m)), 0] = (1 << scale)
        if trial % 5 == 1:                                # the largest |partial sums| far below the maximum
            K_[rng.integers(0, m, 5), 0] = -(1 << (I + f - 3))
        q = [int(v) for v in rng.integers(-(1 << 12), 1 << 12, size=Dh)]
        head = Head(K_.tolist(), rng.integers(-1000, 1000, size=(m, d)).tolist())
        outcomes.add(_check(head, q, m, I, f, mode=trial % 2))
        outcomes.add(_check(head, q, m - 1, I, f, mode=trial % 2))
    assert {"pruned", "fallback"} <= outcomes, outcomes


def test_index_revisits_skipped_nodes_for_the_meter():
    """Keys whose partial sums are the largest magnitudes of the head (1.25 2^80,
    above every product and every other partial sum) but whose scores are far
    below the maximum: the search skips their leaf, and the meter's revisit scores
    it, so the largest |raw| is the plain definition's."""
    f, I = 10, 100
    m = 2048
    # every key in the tree: partial sums 1.25 2^79, 1.25 2^80, then down to a score near -2^78
    K_ = [[(1 << 79) + (1 << 77), (1 << 79) + (1 << 77), -(1 << 80), -(1 << 79) + (j << 40)] for j in range(m)]
    for j in range(m - 16, m):                # the buffer (a first build leaves the newest 16 keys): scores 2^80
        K_[j] = [1 << 78] * 4
    K_[m - 1] = [1 << 78, 1 << 78, 1 << 78, (1 << 78) + (1 << 60)]    # the maximum
    head = Head(K_, [[j] for j in range(m)])
    q = [1 << 10] * 4
    assert _check(head, q, m, I, f) == "pruned"
    ok, _, _, err, (idx, _), _ = head.index(q, m, I, f)
    assert ok and idx.min() >= m - 16                                     # the search skipped the whole tree
    assert WD.from_limbs(err[WD.E_MAXABS_HI], err[E_MAXABS]) == (1 << 80) + (1 << 78)


def test_quadratic_readout_equals_the_generic_readout():
    """w_quadratic_readout against w_readout on random residuals, raise and saturate,
    formats wide and narrow (overflows give -1, and the generic readout then errs)."""
    from rnngap.constructions.models import turing as T
    from rnngap.constructions.machine.formats import FixedFormat
    rng = np.random.default_rng(4)
    base = T.tm_hybrid(T.MACHINES["palindrome"], 40).model         # readout 2 tau x[v] - tau^2 x[one]
    hits = set()
    for trial in range(300):
        I, f = int(rng.integers(40, 100)), int(rng.integers(0, 30))
        m = base.with_format(FixedFormat(I, f, storage="two-limb"))
        ro = m.weights.readout
        if trial == 0:
            assert WX.w_quadratic_readout(np.zeros((m.spec.width, 2), np.int64), ro.out_dim, ro.out_kind,
                                          ro.out_param, ro.out_coef, ro.candidates, I, f, 0, WD.new_wide_err(),
                                          np.zeros(WX.SCRATCH_LEN, np.int64)) >= 0   # the readout has the form
        x = np.zeros((m.spec.width, 2), np.int64)
        for d in set(ro.out_dim.tolist()):
            v = int(rng.integers(-(1 << 40), 1 << 40)) << int(rng.integers(0, 50))
            v = max(-(1 << (I + f)) + 1, min((1 << (I + f)) - 1, v))
            x[d] = WD.to_limbs(v)
        mode = trial % 2
        e1, e2 = WD.new_wide_err(), WD.new_wide_err()
        scr = np.zeros(WX.SCRATCH_LEN, np.int64)
        t1 = WX.w_quadratic_readout(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates, I, f,
                                    mode, e1, scr)
        t2 = WX.w_readout(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates, I, f, mode, e2, scr)
        if t1 < 0:
            hits.add("fallback")
            assert e1.tolist() == WD.new_wide_err().tolist()        # untouched
            assert e2[E_CODE] != 0 or e2[E_SAT] != 0           # the subset errs or clamps iff some candidate does
        else:
            hits.add("subset")
            assert t1 == t2 and e1.tolist() == e2.tolist(), trial
    assert hits == {"fallback", "subset"}, hits


def test_index_sessions_agree_with_recorded_ones(monkeypatch):
    """The hybrid 0^k1^k machine past its int64 limit (input length 80): a session
    that prunes (its tape head moves to the key-value index) and one recording every
    weight (every key scored) write the same CoT, the reference's, with the same
    largest |raw|; the index was used and pruned."""
    from rnngap.checks.tasks import turing as TR
    from rnngap.constructions.build import session as SS
    from rnngap.constructions.models import turing as T
    from rnngap.constructions.machine.fixedpoint import max_abs_raw
    from rnngap.constructions.build.generate import generate
    spec = T.MACHINES["0k1k"]
    sim = T.tm_hybrid(spec, 80)
    assert sim.model.fmt.wide
    sessions = []
    orig = SS.Session.__init__

    def init(self, *a, **k):                  # keep the sessions generate opens
        orig(self, *a, **k)
        sessions.append(self)
    monkeypatch.setattr(SS.Session, "__init__", init)
    for w in ("0" * 40 + "1" * 40, "0" * 40 + "1" * 39 + "0"):
        bound = 2 * spec.time_bound(len(w)) + 1
        runs = []
        for record in (False, True):
            m = sim.model.fresh()
            sessions.clear()
            g = generate(m, sim.enc.prompt(w), answer_tokens=[T.TRUE, T.FALSE], max_cot=bound, record=record)
            runs.append((g.cot, g.answer, max_abs_raw(m.err)))
            if not record:
                ist = sessions[0]._pr[10]
                calls, scored, keys = (int(ist[..., k].sum()) for k in (WA.IX_CALLS, WA.IX_SCORED, WA.IX_KEYS))
                assert calls > 1000 and 10 * scored < keys, (calls, scored, keys)
        assert runs[0] == runs[1]
        assert runs[0][0] == TR.reference_run(sim.enc.dtm, w, spec.time_bound(len(w))).hybrid_cot()


def test_istree_transformer_past_int64(monkeypatch):
    """The IsTree Transformer built for any simple graph on 1,700 vertices (Q63.1:
    two limbs) on graphs of 150 vertices: the pruning session (key-value index on
    its lookup and tie-break heads) and a recording one write the reference's tour
    and label, with the same largest |raw|."""
    from rnngap.checks.tasks import istree as R
    from rnngap.constructions.models import istree as C
    from rnngap.constructions.build import session as SS
    from rnngap.constructions.machine.fixedpoint import max_abs_raw
    from rnngap.constructions.build.generate import generate
    from rnngap.constructions.machine.vocab import FALSE, TRUE
    N = 1700
    model = C.istree_transformer(N, N * (N - 1) // 2)
    assert model.fmt.wide and model.fmt.total_bits > 62
    sessions = []
    orig = SS.Session.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        sessions.append(self)
    monkeypatch.setattr(SS.Session, "__init__", init)
    rng = np.random.default_rng(8)
    insts = R.generate(rng, 150, 1, family="tree") + R.generate(rng, 150, 1, family="near_tree")
    labels = set()
    for inst in insts:
        prompt = C.prompt_tokens(inst.edges, n_nodes=150)
        want = R.reference_cot(150, inst.edges)
        runs = []
        for record in (False, True):
            m = model.fresh()
            sessions.clear()
            g = generate(m, prompt, answer_tokens=[TRUE, FALSE], max_cot=C.cot_bound(N), record=record)
            runs.append((g.cot + [g.answer], max_abs_raw(m.err)))
            if not record:
                ist = sessions[0]._pr[10]
                assert int(ist[..., WA.IX_CALLS].sum()) > 0
        assert runs[0] == runs[1] and runs[0][0] == want
        labels.add(want[-1])
    assert labels == {TRUE, FALSE}
