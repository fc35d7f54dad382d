"""A straightforward numpy implementation of the same fixed-point semantics.

Vectorised over whole arrays with numpy int64/float64 and np.where instead of
branches; no numba. It exists as the baseline of the exhaustive-throughput
benchmark and, because it is written independently of the kernels' control
flow, as a cross-check: its predictions must equal the numba executor's
exactly. Only attention-only models (kind "transformer") are supported.
Overflow raises ``OverflowError`` (raise mode only).
"""
from __future__ import annotations

import math

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import NUMBER_BASE

_M31 = np.int64((1 << 31) - 1)
_M62 = np.int64((1 << 62) - 1)
LN2_HI = 0.6931471805599453
LN2_LO = 2.3190468138462996e-17


class Fx:
    def __init__(self, I: int, f: int):
        self.I, self.f = I, f
        self.lim = np.int64(1) << np.int64(I + f)
        self.maxabs = 0

    def fit(self, r: np.ndarray, op: str) -> np.ndarray:
        if r.size:
            m = int(np.abs(r).max())
            if m >= int(self.lim):
                raise OverflowError(f"{op} overflows Q{self.I}.{self.f}")
            self.maxabs = max(self.maxabs, m)
        return r

    def add(self, a, b):
        return self.fit(a + b, "add")

    def mul(self, a, b):
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        neg = (a < 0) != (b < 0)
        x, y = np.abs(a), np.abs(b)
        x0, x1, y0, y1 = x & _M31, x >> 31, y & _M31, y >> 31
        p00 = x0 * y0
        mid = x0 * y1 + x1 * y0
        t = p00 + ((mid & _M31) << 31)
        lo = t & _M62
        hi = x1 * y1 + (mid >> 31) + (t >> 62)
        f = self.f
        if f == 0:
            if (hi != 0).any():
                raise OverflowError("mul overflows")
            q = lo
        else:
            if (hi >= (1 << f)).any():
                raise OverflowError("mul overflows")
            q = (hi << (62 - f)) + (lo >> f)
            rem = lo & ((1 << f) - 1)
            half = 1 << (f - 1)
            q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        q = np.where((a == 0) | (b == 0), 0, q)
        return self.fit(np.where(neg, -q, q).astype(np.int64), "mul")

    def div(self, a, b):
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        if (b == 0).any():
            raise ZeroDivisionError("division by zero")
        neg = (a < 0) != (b < 0)
        x, y = np.abs(a), np.abs(b)
        q = x // y
        r = x - q * y
        if (q >= (1 << self.I)).any():
            raise OverflowError("div overflows")
        for _ in range(self.f):
            r = r << 1
            q = q << 1
            ge = r >= y
            r = np.where(ge, r - y, r)
            q = q + ge
        r2 = r << 1
        q = q + ((r2 > y) | ((r2 == y) & ((q & 1) == 1)))
        q = np.where(a == 0, 0, q)
        return self.fit(np.where(neg, -q, q).astype(np.int64), "div")

    def exp_nonpos(self, d):
        """round(exp(d / 2^f) * 2^f) for raw d <= 0 (softmax), double-double."""
        d = np.asarray(d, np.int64)
        f = self.f
        out = np.zeros(d.shape, np.int64)
        thr = -(f + 1) * LN2_HI * 2.0 ** f * (1 + 1e-12)
        live = (d.astype(np.float64) >= thr - 2) & (d != 0)
        out[d == 0] = np.int64(1) << f
        if not live.any():
            return out
        dl = d[live]
        xh = dl.astype(np.float64)
        xl = (dl - xh.astype(np.int64)).astype(np.float64)
        xh, xl = xh * 2.0 ** -f, xl * 2.0 ** -f
        k = np.floor(xh / LN2_HI + 0.5)
        kh, kl = _two_prod(k, LN2_HI)
        kl2, kl3 = _two_prod(k, LN2_LO)
        rh, rl = _dd_add(xh, xl, -kh, -kl)
        rh, rl = _dd_add(rh, rl, -kl2, -kl3)
        sh, sl = np.ones_like(rh), np.zeros_like(rh)
        th, tl = np.ones_like(rh), np.zeros_like(rh)
        for i in range(1, 30):
            th, tl = _dd_mul(th, tl, rh, rl)
            th, tl = _dd_div(th, tl, float(i))
            sh, sl = _dd_add(sh, sl, th, tl)
        e2 = np.exp2(k + f)
        yh, yl = sh * e2, sl * e2
        n0, m0 = np.floor(yh), np.floor(yl)
        n = n0.astype(np.int64) + m0.astype(np.int64)
        uh, ul = _two_sum(yh - n0, yl - m0)
        over = uh >= 1.0
        n = n + over
        uh2, ul2 = _dd_add(uh, ul, -np.ones_like(uh), np.zeros_like(uh))
        uh, ul = np.where(over, uh2, uh), np.where(over, ul2, ul)
        dh, _ = _dd_add(uh, ul, -0.5 * np.ones_like(uh), np.zeros_like(uh))
        if (np.abs(dh) <= yh * 2.0 ** -96 + 2.0 ** -100).any():
            raise ArithmeticError("exp rounding undecided")
        out[live] = n + (dh > 0)
        return self.fit(out, "exp")


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _quick(a, b):
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = 134217729.0 * a
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(np.asarray(b, np.float64) * np.ones_like(a))
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _dd_add(ah, al, bh, bl):
    s1, s2 = _two_sum(ah, bh)
    t1, t2 = _two_sum(al, bl)
    s2 = s2 + t1
    s1, s2 = _quick(s1, s2)
    s2 = s2 + t2
    return _quick(s1, s2)


def _dd_mul(ah, al, bh, bl):
    p, e = _two_prod(ah, bh)
    e = e + ah * bl + al * bh
    return _quick(p, e)


def _dd_div(ah, al, k):
    q1 = ah / k
    p1, p2 = _two_prod(q1, k)
    s, e = _two_sum(ah, -p1)
    e = e - p2 + al
    return _quick(q1, (s + e) / k)


def _features(fx: Fx, kind: int, param: int, tok: np.ndarray, pos: np.ndarray) -> np.ndarray:
    code = np.where(tok >= NUMBER_BASE, tok - NUMBER_BASE + 1, -tok).astype(np.int64)
    one = np.int64(1) << fx.f

    def ival(v):
        if (np.abs(v) >= (1 << fx.I)).any():
            raise OverflowError("feature out of range")
        return fx.fit(v.astype(np.int64) << fx.f, "feature")

    if kind == K.F_ZERO:
        return np.zeros_like(tok)
    if kind == K.F_ONE:
        return np.full_like(tok, one)
    if kind == K.F_TOK:
        return ival(code)
    if kind == K.F_TOK_SQ:
        return ival(code * code)
    if kind == K.F_IS_TOKEN:
        return ival((tok == param).astype(np.int64))
    if kind == K.F_IS_NUM:
        return ival((tok >= NUMBER_BASE).astype(np.int64))
    if kind == K.F_TOK_INV:
        return fx.div(np.full_like(tok, one), fx.add(ival(code), param))
    if kind == K.F_POS:
        return ival(pos)
    if kind == K.F_POS_SQ:
        return ival(pos * pos)
    if kind == K.F_POS_INV:
        return fx.div(np.full_like(tok, one), fx.add(ival(pos), param))
    raise ValueError(kind)


def _matvec(fx: Fx, W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """X (..., C) -> (..., R): products rounded, partial sums range-checked."""
    out = np.zeros(X.shape[:-1] + (W.shape[0],), np.int64)
    for r in range(W.shape[0]):
        acc = np.zeros(X.shape[:-1], np.int64)
        for c in range(W.shape[1]):
            if W[r, c] != 0:
                acc = fx.add(acc, fx.mul(W[r, c], X[..., c]))
        out[..., r] = acc
    return out


def predict_last(model: Model, tokens: np.ndarray) -> np.ndarray:
    """Next-token predictions at the last position of each row of ``tokens`` (B, N)."""
    if model.kind != "transformer":
        raise ValueError("numpy baseline supports attention-only models")
    fx = Fx(model.fmt.int_bits, model.fmt.frac_bits)
    W, Ro = model.weights.net, model.weights.readout
    tokens = np.asarray(tokens, np.int64)
    B, N = tokens.shape
    pos = np.broadcast_to(np.arange(N, dtype=np.int64), (B, N))
    X = np.stack([fx.mul(W.ecoef[d], _features(fx, int(W.ekind[d]), int(W.eparam[d]), tokens, pos))
                  if W.ekind[d] != K.F_ZERO else np.zeros((B, N), np.int64)
                  for d in range(W.ekind.shape[0])], axis=-1)
    La = W.aWQ.shape[0]
    for l in range(La):
        # the last layer only at the last position: nobody reads the others' output
        # (the executors skip it too, docs/machine.md), so neither its work nor its
        # overflows happen there; K and V still come from every position
        last = l == La - 1
        Xq = X[:, -1:, :] if last else X
        causal = np.tril(np.ones((N, N), bool))[-Xq.shape[1]:]
        acc = np.zeros_like(Xq)
        for h in range(int(W.a_nheads[l])):
            Q = _matvec(fx, W.aWQ[l, h], Xq)
            Kk = _matvec(fx, W.aWK[l, h], X)
            V = _matvec(fx, W.aWV[l, h], X)
            S = np.zeros((B, Xq.shape[1], N), np.int64)
            for c in range(Q.shape[-1]):
                S = fx.add(S, fx.mul(Q[:, :, None, c], Kk[:, None, :, c]))
            Sm = np.where(causal, S, np.iinfo(np.int64).min // 4)
            M = Sm.max(axis=2, keepdims=True)
            E = np.where(causal, fx.exp_nonpos(np.where(causal, S - M, 0)), 0)
            Z = np.zeros((B, Xq.shape[1]), np.int64)
            for j in range(N):
                Z = fx.add(Z, E[:, :, j])
            Wt = np.where(E != 0, fx.div(E, np.maximum(Z, 1)[:, :, None]), 0)
            O = np.zeros((B, Xq.shape[1], V.shape[-1]), np.int64)
            for j in range(N):
                O = fx.add(O, fx.mul(Wt[:, :, j, None], V[:, None, j, :]))
            acc = fx.add(acc, _matvec(fx, W.aWO[l, h], O))
        X = fx.add(Xq, acc)
        H = _matvec(fx, W.aW1[l], X)
        H = np.maximum(fx.add(H, W.ab1[l]), 0)
        X = fx.add(X, fx.add(_matvec(fx, W.aW2[l], H), W.ab2[l]))
    x = X[:, -1, :]
    if model.implicit_vocab:
        raise ValueError(f"{model.name}: the numpy reference lists every token; the vocabulary is implicit")
    cands = model.candidates
    best = np.full(B, -1, np.int64)
    best_logit = np.zeros(B, np.int64)
    for ci, k in enumerate(cands):
        logit = np.zeros(B, np.int64)
        for i in range(Ro.out_dim.shape[0]):
            w = fx.mul(Ro.out_coef[i], _features(fx, int(Ro.out_kind[i]), int(Ro.out_param[i]),
                                                    np.array([k]), np.array([0]))[0])
            if w != 0:
                logit = fx.add(logit, fx.mul(w, x[:, Ro.out_dim[i]]))
        better = (ci == 0) | (logit > best_logit)
        best = np.where(better, k, best)
        best_logit = np.where(better, logit, best_logit)
    return best
