"""Readout kernels on int64 raws: a formula per candidate token, the arg-max, and its exact shortcuts.

:func:`readout` scores every candidate with the readout formula; the table,
quadratic and nearest-code forms compute the same arg-max faster where the
formula allows (docs/internals/machine.md#kernels, "Readouts").
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, ERR_LEN, E_SAT, fx_add, fx_mul,
)
from .vocab import NUMBER_BASE
from .kernels import F_TOK, F_TOK_SQ, feature_raw, tok_code


@njit(cache=True)
def _readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err):
    """argmax over the token ids in ``candidates`` (ascending) of
    sum_terms round(coef * feat(k)) * x[dim]; ties -> smallest id."""
    best = candidates[0]
    best_logit = np.int64(0)
    T = out_dim.shape[0]
    for ci in range(candidates.shape[0]):
        k = candidates[ci]
        logit = np.int64(0)
        for i in range(T):
            xv = x[out_dim[i]]
            if xv != 0:
                w = fx_mul(out_coef[i], feature_raw(out_kind[i], out_param[i], k, np.int64(0), I, f, mode, err),
                           I, f, mode, err)
                if w != 0:
                    logit = fx_add(logit, fx_mul(w, xv, I, f, mode, err), I, f, mode, err)
        if ci == 0 or logit > best_logit:
            best = k
            best_logit = logit
    return best


@njit(cache=True)
def readout(x, ro, candidates, I, f, mode, err):
    """argmax over the token ids in ``candidates`` (ascending) of the readout ``ro``
    (a :class:`Readout`): sum_terms round(coef * feat(k)) * x[dim]; ties -> smallest id."""
    return _readout(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, candidates, I, f, mode, err)


@njit(cache=True)
def readout_table(out_kind, out_param, out_coef, candidates, I, f, mode):
    """The readout weights w[c, i] = round(coef_i * feat_i(candidate c)) of one model
    and format, computed once: (w, largest |raw| its computation touched, ok). An
    entry that overflowed or saturated has ok = False and is recomputed by
    :func:`readout_fast` each time (so it raises or counts exactly as before)."""
    C = candidates.shape[0]
    T = out_kind.shape[0]
    w = np.zeros((C, T), dtype=np.int64)
    wmax = np.zeros((C, T), dtype=np.int64)
    ok = np.zeros((C, T), dtype=np.bool_)
    e = np.zeros(ERR_LEN, dtype=np.int64)
    for ci in range(C):
        for i in range(T):
            for j in range(e.shape[0]):
                e[j] = 0
            w[ci, i] = fx_mul(out_coef[i],
                              feature_raw(out_kind[i], out_param[i], candidates[ci], np.int64(0), I, f, mode, e),
                              I, f, mode, e)
            wmax[ci, i] = e[E_MAXABS]
            ok[ci, i] = e[E_CODE] == 0 and e[E_SAT] == 0
    return w, wmax, ok


@njit(cache=True)
def readout_fast_args(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab, I, f, mode, err):
    """:func:`readout` with the per-candidate weights taken from
    :func:`readout_table`: the same token, the same largest |raw| recorded, the same
    errors (entries that err are recomputed)."""
    best = candidates[0]
    best_logit = np.int64(0)
    T = out_dim.shape[0]
    for ci in range(candidates.shape[0]):
        logit = np.int64(0)
        for i in range(T):
            xv = x[out_dim[i]]
            if xv != 0:
                if ok_tab[ci, i]:
                    if wmax_tab[ci, i] > err[E_MAXABS]:
                        err[E_MAXABS] = wmax_tab[ci, i]
                    w = w_tab[ci, i]
                else:
                    w = fx_mul(out_coef[i],
                               feature_raw(out_kind[i], out_param[i], candidates[ci], np.int64(0), I, f, mode, err),
                               I, f, mode, err)
                if w != 0:
                    logit = fx_add(logit, fx_mul(w, xv, I, f, mode, err), I, f, mode, err)
        if ci == 0 or logit > best_logit:
            best = candidates[ci]
            best_logit = logit
    return best


@njit(cache=True)
def readout_fast(x, ro, I, f, mode, err):
    """:func:`readout` over ``ro.candidates`` with the per-candidate weights taken
    from :func:`readout_table` (``ro.w_tab``, ``ro.wmax_tab``, ``ro.ok_tab``): the same
    token, the same largest |raw| recorded, the same errors (entries that err are
    recomputed)."""
    return readout_fast_args(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates,
                         ro.w_tab, ro.wmax_tab, ro.ok_tab, I, f, mode, err)


@njit(cache=True)
def readout_flat(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab, nearest,
                 I, f, mode, err):
    """:func:`readout_fast` with the :class:`Readout` flattened (``*weights.readout``),
    for a session's per-token calls (see :func:`feed_flat`); a readout
    a tau x[d1] + b tau^2 x[d2] goes through :func:`quadratic_readout` (the same token
    and the same effects on ``err``)."""
    tok = quadratic_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err)
    if tok >= 0:
        return tok
    return readout_fast_args(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                         I, f, mode, err)


QUAD_MIN_CANDIDATES = 64      # fewer candidates: the full readout is as fast


@njit(cache=True, inline='always')
def code_rank(candidates, ns, k):
    """The candidate index of the k-th smallest token code (specials, code -id, come
    first in reverse id order, then the numbers, code id - NUMBER_BASE + 1)."""
    return ns - 1 - k if k < ns else k


@njit(cache=True)
def quadratic_readout(x, out_dim, out_kind, out_param, out_coef, candidates, I, f, mode, err):
    """The generic :func:`readout` over ``candidates`` for the readout of two terms
    a tau_k x[d1] + b tau_k^2 x[d2] (kinds F_TOK then F_TOK_SQ) with integer
    coefficients a, b: every weight (a tau, b tau^2) and every product
    (a tau x / 2^f = (a / 2^f) tau x) is then exact, so logit(tau) = g(tau) =
    A tau + B tau^2 exactly (A = (a / 2^f) x[d1], B = (b / 2^f) x[d2]). Returns -1
    (the caller runs the full readout) if the readout is not of that form, there are
    few candidates, ``err`` already holds an error, or the subset below overflows or
    saturates.

    The subset: the smallest id (all logits tie when A = B = 0), the candidates of
    the smallest and largest code, and, when B != 0, the two candidates on either
    side of the vertex -A / (2B) (float estimate; the real vertex is within one code
    of it). Its argmax is the full argmax: a strictly concave g (B < 0) takes its
    maximum over the codes at the candidates next to the vertex, at most two codes
    reach it and both are in the subset; a convex or linear g (B >= 0) at the ends.
    Every intermediate |value| is largest at the subset: |tau|, |a tau|, |b tau^2|,
    |A tau|, |B tau^2| grow with |tau| (largest at an end), and |g| is largest at
    an end or next to the vertex (g concave: -g convex; g convex: the same with the
    signs swapped). So the subset, evaluated by :func:`_readout` in ascending id
    order (ties -> smallest id), gives the same token and the same largest |raw|,
    and it overflows or saturates iff some candidate does: then -1 (err untouched,
    the subset ran on a copy)."""
    C = candidates.shape[0]
    T = out_dim.shape[0]
    if T != 2 or C < QUAD_MIN_CANDIDATES or out_kind[0] != F_TOK or out_kind[1] != F_TOK_SQ:
        return np.int64(-1)
    one = np.int64(1) << f
    a = out_coef[0]
    b = out_coef[1]
    if a % one != 0 or b % one != 0 or err[E_CODE] != 0:
        return np.int64(-1)
    # specials (ids < NUMBER_BASE) come first among the ascending candidate ids
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
    n = 0
    ids[n] = candidates[0]
    ids[n + 1] = candidates[code_rank(candidates, ns, 0)]
    ids[n + 2] = candidates[code_rank(candidates, ns, C - 1)]
    n = 3
    x1 = x[out_dim[0]]
    x2 = x[out_dim[1]]
    A = float(a >> f) * float(x1)
    B = float(b >> f) * float(x2)
    if b != 0 and x2 != 0:
        v = -A / (2.0 * B)
        # the first code rank whose code exceeds floor(v)
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
    tok = _readout(x, out_dim, out_kind, out_param, out_coef, sub, I, f, mode, e2)
    if e2[E_CODE] != 0 or e2[E_SAT] != err[E_SAT]:
        return np.int64(-1)
    if e2[E_MAXABS] > err[E_MAXABS]:
        err[E_MAXABS] = e2[E_MAXABS]
    return tok


@njit(cache=True)
def nearest_code_readout_args(x, v_dim, code_lo, code_hi, out_dim, out_kind, out_param, out_coef, I, f, mode, err):
    """The generic :func:`readout` restricted to the few candidates that can
    matter for logit(k) = 2 tau_k v - tau_k^2 (v = x[v_dim]) over the contiguous
    code range [code_lo, code_hi] (every special id 0..-code_lo and the numbers
    present; :class:`constructions.build.model.Model` checks that its readout and
    candidates are exactly these before it sets ``Readout.nearest``).

    Each term is computed exactly (tau_k integer, v on the grid), so logit(tau) =
    v^2 - (v - tau)^2: concave in tau, maximised by the codes nearest v; its
    intermediates 2 tau v, tau^2 and |logit| are largest at the ends of the range
    or at the maximiser. Evaluating the two range ends and floor(v) - 1 .. floor(v)
    + 2 (clipped), in ascending token-id order as the generic readout does, gives
    the same argmax (ties -> smallest id) and the same largest |raw| when every
    logit is in range. Past the range the two may differ: the generic readout
    meets a candidate's overflow (or clamp) that this one never computes, so the
    first error's need, the clamps and then the token can differ (a review found
    need 10 against 9 for iterate-rnn at Q8.0, and other tokens in saturate mode).
    Equality with the generic readout in range is tested (tests/test_retrieval.py)."""
    v = x[v_dim]
    fl = v >> f          # floor(v) (arithmetic shift)
    return _readout(x, out_dim, out_kind, out_param, out_coef, nearest_ids(fl, code_lo, code_hi), I, f, mode, err)


@njit(cache=True)
def nearest_ids(fl, code_lo, code_hi):
    """The token ids of the codes the nearest-code readout evaluates, ascending:
    the range ends code_lo, code_hi and the codes fl - 1 .. fl + 2 inside them."""
    codes = np.empty(6, dtype=np.int64)
    codes[0] = code_lo
    codes[1] = code_hi
    m = 2
    for dc in range(-1, 3):
        c = fl + dc
        if c > code_lo and c < code_hi:
            codes[m] = c
            m += 1
    ids = np.empty(m, dtype=np.int64)
    for i in range(m):
        c = codes[i]
        ids[i] = c - 1 + NUMBER_BASE if c >= 1 else -c
    return np.unique(ids)


@njit(cache=True)
def nearest_code_readout(x, ro, I, f, mode, err):
    """:func:`nearest_code_readout_args` with (v, code_lo, code_hi) = ``ro.nearest``."""
    return nearest_code_readout_args(x, ro.nearest[0], ro.nearest[1], ro.nearest[2],
                                 ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, I, f, mode, err)
