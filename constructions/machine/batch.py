"""The batch forward on int64 raws: many rows at once, with prefix reuse, readout tables and per-stage checks.

:func:`forward_batch` runs every row of a token batch through the model and
reads out each position (or the last); its shortcuts (shared prefixes, a
pruning cache for long rows, unchecked stages once a stage cannot overflow,
the sparse RNN feed) give the numbers of the plain step, tested against it
(docs/internals/machine.md#kernels).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, E_WHERE, ERR_LEN, MODE_SATURATE, E_SAT, bit_length, fx_add, fx_mul,
    fx_relu,
)
from .attention import PRUNE_BATCH_MIN_N, PRUNE_MIN_CAPACITY, attend_sparse, attention_scores, store_key
from .readouts import nearest_code_readout_args, readout_fast_args
from .kernels import (
    F_POS, F_POS_INV, F_POS_SQ, F_ZERO, READOUT_NEAREST_CODE, Network, Weights, embed_features, feature_raw,
    matvec, step_arrays, workspace_size,
)


def loop_args(W: Weights) -> tuple:
    """The arguments of :func:`forward_loop` / :func:`constructions.machine.lanes._lanes`
    taken from ``W`` (they follow ``loc``): the network's arrays, the readout's
    arrays, then the nearest-code readout's (v_dim, code_lo, code_hi)."""
    net, ro = W.net, W.readout
    return (net.ekind, net.eparam, net.ecoef, net.rA, net.rB, net.rC, net.rW1, net.rb1, net.rW2, net.rb2,
            net.aWQ, net.aWK, net.aWV, net.aWO, net.a_nheads, net.aW1, net.ab1, net.aW2, net.ab2,
            ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates, ro.w_tab, ro.wmax_tab,
            ro.ok_tab, ro.nearest[0], ro.nearest[1], ro.nearest[2])


def forward_batch(tokens, lengths, all_positions, share_prefix, readout_mode, I, f, mode, err, loc, W, preds):
    """Greedy next-token prediction for a batch of prompts (no CoT).

    preds[b, t] is written for every t < lengths[b] if ``all_positions``, else only
    for t = lengths[b] - 1. On the first error, loc = (b, t) and the run stops.
    ``readout_mode``: ``READOUT_TABLE`` (:func:`readout_fast`) or
    ``READOUT_NEAREST_CODE`` (:func:`nearest_code_readout`).

    ``share_prefix`` (used only in raise mode): row b starts at the length P of its
    common prefix with row b - 1 (at most lengths[b] - 1) instead of at 0. The
    models are causal, so the KV cache at positions < P and the RNN state after
    position P - 1 (kept per position) are exactly what row b would compute; with
    ``all_positions`` the predictions at t < P are copied from row b - 1. Every
    operation skipped was carried out, with the same operands, for row b - 1 (with
    at least as many layers active), so the outputs, the largest |raw| touched and
    the first error are the same as without sharing. Saturate mode counts every
    clamping in err[E_SAT] per row, so it never shares.

    A Python function: it hands the weights' arrays one by one (:func:`loop_args`)
    to the compiled :func:`forward_loop` (the checked-once fast path of
    :func:`step_arrays`); :func:`forward_batch_plain` is the same loop on :func:`step_arrays`
    itself, the reference the tests compare it with. (Each compiled level above
    the loop re-optimizes the whole loop when it is compiled: the two compiled
    wrappers this replaces, one unpacking ``W`` and one passing the flag, cost
    ~4 s each on a cold cache; and the loop runs ~25% slower on arrays unpacked
    from a tuple in the same function than on arrays that are arguments.)"""
    forward_loop(tokens, lengths, all_positions, share_prefix, readout_mode == READOUT_NEAREST_CODE, None,
                 I, f, mode, err, loc, *loop_args(W), preds)


def forward_batch_plain(tokens, lengths, all_positions, share_prefix, readout_mode, I, f, mode, err, loc, W, preds):
    """:func:`forward_batch` running every step with the plain :func:`step_arrays` and
    the plain :func:`readout_fast` (no embedding tables, no checked-once
    shortcuts): the reference the fast path is tested against."""
    forward_loop(tokens, lengths, all_positions, share_prefix, readout_mode == READOUT_NEAREST_CODE, True,
                 I, f, mode, err, loc, *loop_args(W), preds)


@njit(cache=True)
def absmax(A):
    """max |A| over every entry (0 for an empty array)."""
    m = np.int64(0)
    for v in A.flat:
        a = v if v >= 0 else -v
        if a > m:
            m = a
    return m


@njit(cache=True)
def embed_tables(ekind, eparam, ecoef, candidates, npos, I, f, mode):
    """The embedding split into what depends on the token and what depends on the
    position, computed once per batch: (ttab, tmx, tok_ok, ptab, pmx, pos_ok).

    ttab[v, d] is x[d] of :func:`embed_features` for token id v if d's feature is not a
    position feature (else 0), ptab[t, d] the same for position t and the position
    features; every dimension has one feature, so x = ttab[tok] + ptab[t] exactly.
    tmx[v] / pmx[t]: the largest |raw| the row's computation touched; tok_ok[v] /
    pos_ok[t]: no error and no saturation happened in it (ids that are not
    candidates are not ok). A step whose token or position row is not ok runs the
    plain :func:`embed_features` (so it records or counts exactly as before)."""
    D = ekind.shape[0]
    nv = np.int64(0)
    for ci in range(candidates.shape[0]):
        nv = max(nv, candidates[ci] + 1)
    ttab = np.zeros((nv, D), dtype=np.int64)
    tmx = np.zeros(nv, dtype=np.int64)
    tok_ok = np.zeros(nv, dtype=np.bool_)
    ptab = np.zeros((npos, D), dtype=np.int64)
    pmx = np.zeros(npos, dtype=np.int64)
    pos_ok = np.zeros(npos, dtype=np.bool_)
    e = np.zeros(ERR_LEN, dtype=np.int64)
    for r in range(candidates.shape[0] + npos):
        is_tok = r < candidates.shape[0]
        v = candidates[r] if is_tok else np.int64(0)
        t = np.int64(0) if is_tok else r - candidates.shape[0]
        if is_tok and v < 0:
            continue
        for j in range(ERR_LEN):
            e[j] = 0
        for d in range(D):
            k = ekind[d]
            pos_kind = k == F_POS or k == F_POS_SQ or k == F_POS_INV
            if k != F_ZERO and ecoef[d] != 0 and pos_kind != is_tok:
                val = fx_mul(ecoef[d], feature_raw(k, eparam[d], v, t, I, f, mode, e), I, f, mode, e)
                if is_tok:
                    ttab[v, d] = val
                else:
                    ptab[t, d] = val
        ok = e[E_CODE] == 0 and e[E_SAT] == 0
        if is_tok:
            tmx[v] = e[E_MAXABS]
            tok_ok[v] = ok
        else:
            pmx[t] = e[E_MAXABS]
            pos_ok[t] = ok
    return ttab, tmx, tok_ok, ptab, pmx, pos_ok


@njit(cache=True, inline='always')
def round_raw(p, f, hm1):
    """round_half_even(p / 2^f) for a signed int64 p (arithmetic shift; hm1 = 2^(f-1) - 1)."""
    return ((p + hm1 + ((p >> f) & 1)) >> f) if f > 0 else p


@njit(cache=True)
def matvec_fast(W, at, x, I, f, mode, err, out, psafe):
    """:func:`matvec` of the matrix W[at] (``at``: a tuple of leading indices into a
    stack of matrices, read in place: a view per call would cost two atomic
    reference-count updates), checked once: with ``psafe`` (every |w| * 2^(I+f) <
    2^62, so no product leaves int64) the products and sums run on plain int64,
    tracking the largest |product| and |partial sum| in a local; if that stays
    below 2^(I+f), nothing overflowed or saturated and the result and the largest
    |raw| are exactly matvec's (zero terms add 0 and change no maximum).
    Otherwise ``out`` is recomputed by :func:`matvec`, which records / counts as
    always."""
    if psafe:
        k = len(at)
        rows = W.shape[k]
        cols = W.shape[k + 1]
        lim = np.int64(1) << (I + f)
        hm1 = (np.int64(1) << (f - 1)) - 1 if f > 0 else np.int64(0)
        mx = np.int64(0)
        for r in range(rows):
            acc = np.int64(0)
            for c in range(cols):
                w = W[at + (r, c)]
                if w != 0:
                    q = round_raw(w * x[c], f, hm1)
                    acc += q
                    a = max(q if q >= 0 else -q, acc if acc >= 0 else -acc)
                    if a > mx:
                        if a >= lim:
                            mx = lim
                            break
                        mx = a
            out[r] = acc
            if mx >= lim:
                break
        if mx < lim:
            if mx > err[E_MAXABS]:
                err[E_MAXABS] = mx
            return
    matvec(W[at], x, I, f, mode, err, out)


@njit(cache=True)
def add_into(x, y, I, f, mode, err):
    """x[d] = fx_add(x[d], y[d]) for every d, checked once (the sums are looked at
    first; if one leaves the range, the plain loop runs)."""
    lim = np.int64(1) << (I + f)
    mx = np.int64(0)
    for d in range(x.shape[0]):
        s = x[d] + y[d]
        mx = max(mx, s if s >= 0 else -s)
    if mx < lim:
        for d in range(x.shape[0]):
            x[d] += y[d]
        if mx > err[E_MAXABS]:
            err[E_MAXABS] = mx
    else:
        for d in range(x.shape[0]):
            x[d] = fx_add(x[d], y[d], I, f, mode, err)


@njit(cache=True)
def bias_relu_fast(hidden, b, l, I, f, mode, err):
    """hidden[m] = relu(fx_add(hidden[m], b[l, m])) for every m, checked once (the
    sums are looked at first; if one leaves the range, the plain loop runs)."""
    lim = np.int64(1) << (I + f)
    mx = np.int64(0)
    for m in range(hidden.shape[0]):
        s = hidden[m] + b[l, m]
        mx = max(mx, s if s >= 0 else -s)
    if mx < lim:
        for m in range(hidden.shape[0]):
            s = hidden[m] + b[l, m]
            hidden[m] = s if s > 0 else 0
        if mx > err[E_MAXABS]:
            err[E_MAXABS] = mx
    else:
        for m in range(hidden.shape[0]):
            hidden[m] = fx_relu(fx_add(hidden[m], b[l, m], I, f, mode, err))


@njit(cache=True)
def residual_add_fast(x, tmp, b, l, I, f, mode, err):
    """x[d] = fx_add(x[d], fx_add(tmp[d], b[l, d])) for every d, checked once."""
    lim = np.int64(1) << (I + f)
    mx = np.int64(0)
    for d in range(x.shape[0]):
        s = tmp[d] + b[l, d]
        u = x[d] + s
        mx = max(mx, max(s if s >= 0 else -s, u if u >= 0 else -u))
    if mx < lim:
        for d in range(x.shape[0]):
            x[d] += tmp[d] + b[l, d]
        if mx > err[E_MAXABS]:
            err[E_MAXABS] = mx
    else:
        for d in range(x.shape[0]):
            x[d] = fx_add(x[d], fx_add(tmp[d], b[l, d], I, f, mode, err), I, f, mode, err)


@njit(cache=True)
def mlp_residual_fast(W1, b1, W2, b2, l, x, I, f, mode, err, hidden, tmp, psafe):
    """:func:`mlp_residual` of layer l of the stacks (x += W2[l] relu(W1[l] x +
    b1[l]) + b2[l]), each stage checked once
    (:func:`matvec_fast`, :func:`bias_relu_fast`, :func:`residual_add_fast`)."""
    matvec_fast(W1, (l,), x, I, f, mode, err, hidden, psafe)
    bias_relu_fast(hidden, b1, l, I, f, mode, err)
    matvec_fast(W2, (l,), hidden, I, f, mode, err, tmp, psafe)
    residual_add_fast(x, tmp, b2, l, I, f, mode, err)


@njit(cache=True)
def readout_columns(wmax_tab, ok_tab):
    """Per readout term i: (max_c wmax_tab[c, i], every ok_tab[c, i]), for
    :func:`_readout_table_fast`."""
    C, T = ok_tab.shape
    col_wmax = np.zeros(T, dtype=np.int64)
    col_ok = np.ones(T, dtype=np.bool_)
    for ci in range(C):
        for i in range(T):
            col_wmax[i] = max(col_wmax[i], wmax_tab[ci, i])
            col_ok[i] = col_ok[i] and ok_tab[ci, i]
    return col_wmax, col_ok


@njit(cache=True)
def _readout_table_fast(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                        I, f, mode, err, rsafe, col_wmax, col_ok, logits):
    """:func:`readout_fast_args`, checked once and a term at a time: with ``rsafe``
    (every |w_tab| * 2^(I+f) < 2^62) and every table entry of the terms read ok
    (``col_ok``, :func:`readout_columns`), all candidates' logits advance together
    over the terms (a loop over the candidates the compiler vectorises) on plain
    int64. Each candidate's partial sums are the plain ones, in the same order, so
    the largest |product| and |partial sum| is the same set's maximum; a term with
    x[dim] = 0 is skipped as the plain readout skips it, and a read term records
    max_c wmax_tab[c, i] (``col_wmax``) as the plain one records every wmax_tab[c,
    i]. If that maximum reaches 2^(I+f) (an int64 sum can only wrap after a
    partial sum or product has reached it), or a read term has an entry that is
    not ok, :func:`readout_fast_args` runs instead (same token, same effects). The
    argmax is the first largest logit (ties -> smallest id, candidates ascending).
    ``logits``: scratch (C,)."""
    C = candidates.shape[0]
    T = out_dim.shape[0]
    good = rsafe
    if good:
        for i in range(T):
            if x[out_dim[i]] != 0 and not col_ok[i]:
                good = False
    if good:
        lim = np.int64(1) << (I + f)
        hm1 = (np.int64(1) << (f - 1)) - 1 if f > 0 else np.int64(0)
        mx = np.int64(0)
        for ci in range(C):
            logits[ci] = 0
        for i in range(T):
            xv = x[out_dim[i]]
            if xv != 0:
                mx = max(mx, col_wmax[i])
                mq = np.int64(0)
                for ci in range(C):
                    qv = round_raw(w_tab[ci, i] * xv, f, hm1)
                    lg = logits[ci] + qv
                    logits[ci] = lg
                    mq = max(mq, max(qv if qv >= 0 else -qv, lg if lg >= 0 else -lg))
                mx = max(mx, mq)
                if mx >= lim:
                    good = False
                    break
        if good:
            if mx > err[E_MAXABS]:
                err[E_MAXABS] = mx
            best = 0
            for ci in range(1, C):
                if logits[ci] > logits[best]:
                    best = ci
            return candidates[best]
    return readout_fast_args(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                         I, f, mode, err)


@njit(cache=True)
def forward_loop(tokens, lengths, all_positions, share_prefix, use_nearest, plain, I, f, mode, err, loc,
                  ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, a_nheads,
                  aW1, ab1, aW2, ab2, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                  v_dim, code_lo, code_hi, preds):
    """The batch loop of :func:`forward_batch`. ``plain`` = True: every step by
    :func:`step_arrays` and the readout by :func:`readout_fast_args` (the plain definition,
    :func:`forward_batch_plain`, which only the tests run). ``plain`` = None: the
    fast loop. For a None-typed argument numba decides ``plain is None`` when it
    compiles, so the fast version is compiled without the plain branch (it never
    compiles :func:`step_arrays`) and carries no test per step; the plain version
    (``plain`` a bool) compiles both branches and tests ``plain is None`` (False)
    per step, which only the tests pay. The fast
    step is written out here (a call per step with the ~50 arrays of the model as
    arguments cost more than the step itself: numba increments and decrements a
    reference count per array argument, an atomic operation), the same numbers
    and the same effect on ``err`` as :func:`step_arrays` (record = False), faster:

    * the embedding from :func:`embed_tables` (x = ttab[tok] + ptab[t]; the plain
      :func:`embed_features` if the token's or the position's row is not ok);
    * every matrix-vector product by :func:`matvec_fast`, every residual sum by
      :func:`add_into`, the MLPs by :func:`mlp_residual_fast`: each checked once,
      falling back to the plain definition as a whole, so the first error and the
      saturation count are the plain ones (stages run in the plain order; no
      stage writes ``err`` before it knows it stays in range; the largest |raw|
      is a maximum, so recording it per stage changes nothing);
    * the readout by :func:`_readout_table_fast`;
    * the attention kernels (:func:`store_key`, :func:`attention_scores`,
      :func:`attend_sparse`) are called exactly as :func:`step_arrays` calls them."""
    B, N = tokens.shape
    D = ekind.shape[0]
    La = aWQ.shape[0]
    H = aWQ.shape[1] if La > 0 else 0
    Dh = aWQ.shape[2] if La > 0 else 0
    # rows of >= PRUNE_BATCH_MIN_N tokens get a pruning cache (cache_rows /
    # cache_capacity / scores_length with prune=True): the pruned attention of
    # attention_scores, the same numbers. Rows that share a prefix with the row
    # before them overwrite its keys from the first difference on; a block's
    # bounds then also cover the overwritten keys (max/min only grow until the
    # block restarts at its first position), so they stay bounds: still exact.
    prune = La > 0 and N >= PRUNE_BATCH_MIN_N
    cap = max(N, PRUNE_MIN_CAPACITY) if prune else N
    Kc = np.zeros((La, H, Dh, cap), dtype=np.int64)
    Km = np.zeros((La, H, 2 * Dh if prune else Dh, cap), dtype=np.int64)
    Vc = np.zeros((La, H, cap, Dh), dtype=np.int64)
    Lr = rA.shape[0]
    S = rA.shape[1] if Lr > 0 else 0
    state = np.zeros((Lr, S), dtype=np.int64)
    share = share_prefix and mode != MODE_SATURATE
    hist = np.zeros((N + 1 if share else 1, Lr, S), dtype=np.int64)   # hist[t]: state before position t
    x = np.zeros(D, dtype=np.int64)
    scores = np.zeros(2 * cap if prune else N, dtype=np.int64)
    wbuf = np.zeros(cap, dtype=np.int64)
    attn_rec = np.zeros((1, 1, 1), dtype=np.int64)
    ws = np.zeros(workspace_size(D, S, rW1.shape[1], Dh, aW1.shape[1]), dtype=np.int64)
    # the fast path's tables, bounds and scratch (built once per batch)
    ttab, tmx, tok_ok, ptab, pmx, pos_ok = embed_tables(ekind, eparam, ecoef, candidates, N if plain is None else 0,
                                                        I, f, mode)
    wm = max(max(max(absmax(rA), absmax(rB)), max(absmax(rC), absmax(rW1))),
             max(max(absmax(rW2), absmax(aWQ)), max(absmax(aWK), absmax(aWV))))
    wm = max(wm, max(absmax(aWO), max(absmax(aW1), absmax(aW2))))
    psafe = bit_length(wm) + I + f <= 62
    rsafe = bit_length(absmax(w_tab)) + I + f <= 62
    col_wmax, col_ok = readout_columns(wmax_tab, ok_tab)
    logits = np.zeros(candidates.shape[0], dtype=np.int64)
    nv = tok_ok.shape[0]
    tmp = np.zeros(D, dtype=np.int64)
    ah = np.zeros(S, dtype=np.int64)
    bx = np.zeros(S, dtype=np.int64)
    rhid = np.zeros(rW1.shape[1], dtype=np.int64)
    q = np.zeros(Dh, dtype=np.int64)
    o = np.zeros(Dh, dtype=np.int64)
    ho = np.zeros(D, dtype=np.int64)
    acc = np.zeros(D, dtype=np.int64)
    ahid = np.zeros(aW1.shape[1], dtype=np.int64)
    qnz = np.zeros(Dh, dtype=np.int64)
    kr = np.zeros(Dh, dtype=np.int64)
    vr = np.zeros(Dh, dtype=np.int64)
    cm = np.zeros(Dh, dtype=np.int64)
    for b in range(B):
        n_b = lengths[b]
        start = 0
        if share and b > 0:
            lim = min(n_b - 1, lengths[b - 1])
            while start < lim and tokens[b, start] == tokens[b - 1, start]:
                start += 1
        for l in range(Lr):
            for s in range(S):
                state[l, s] = hist[start, l, s] if share else 0
        if all_positions:
            for t in range(start):
                preds[b, t] = preds[b - 1, t]
        for t in range(start, n_b):
            need = all_positions or t == n_b - 1
            if plain is None:         # the fast step (see the docstring)
                tok = tokens[b, t]
                if tok >= 0 and tok < nv and tok_ok[tok] and pos_ok[t]:
                    mx = max(tmx[tok], pmx[t])
                    for d in range(D):
                        x[d] = ttab[tok, d] + ptab[t, d]
                    if mx > err[E_MAXABS]:
                        err[E_MAXABS] = mx
                else:
                    embed_features(tok, t, ekind, eparam, ecoef, I, f, mode, err, x)
                for l in range(Lr):
                    matvec_fast(rA, (l,), state[l], I, f, mode, err, ah, psafe)
                    matvec_fast(rB, (l,), x, I, f, mode, err, bx, psafe)
                    add_into(ah, bx, I, f, mode, err)
                    for s in range(S):
                        state[l, s] = ah[s]
                    matvec_fast(rC, (l,), state[l], I, f, mode, err, tmp, psafe)
                    add_into(x, tmp, I, f, mode, err)
                    mlp_residual_fast(rW1, rb1, rW2, rb2, l, x, I, f, mode, err, rhid, tmp, psafe)
                for l in range(La):
                    if l == La - 1 and not need:
                        for h in range(a_nheads[l]):
                            matvec_fast(aWK, (l, h), x, I, f, mode, err, kr, psafe)
                            store_key(kr, t, Kc[l, h], Km[l, h])
                            matvec_fast(aWV, (l, h), x, I, f, mode, err, vr, psafe)
                            for k in range(Dh):
                                Vc[l, h, t, k] = vr[k]
                        break
                    for d in range(D):
                        acc[d] = 0
                    for h in range(a_nheads[l]):
                        matvec_fast(aWQ, (l, h), x, I, f, mode, err, q, psafe)
                        matvec_fast(aWK, (l, h), x, I, f, mode, err, kr, psafe)
                        store_key(kr, t, Kc[l, h], Km[l, h])
                        matvec_fast(aWV, (l, h), x, I, f, mode, err, vr, psafe)
                        for k in range(Dh):
                            Vc[l, h, t, k] = vr[k]
                        M = attention_scores(q, Kc[l, h], Km[l, h], t + 1, I, f, mode, err, qnz, cm, scores,
                                             None)
                        attend_sparse(scores, t + 1, M, Vc[l, h], I, f, mode, err, wbuf, o)
                        matvec_fast(aWO, (l, h), o, I, f, mode, err, ho, psafe)
                        add_into(acc, ho, I, f, mode, err)
                    add_into(x, acc, I, f, mode, err)
                    mlp_residual_fast(aW1, ab1, aW2, ab2, l, x, I, f, mode, err, ahid, tmp, psafe)
            else:
                step_arrays(tokens[b, t], t, I, f, mode, err, ekind, eparam, ecoef,
                      rA, rB, rC, rW1, rb1, rW2, rb2, state,
                      aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Km, Vc,
                      x, scores, wbuf, np.bool_(False), attn_rec, need, ws)
            if share:
                for l in range(Lr):
                    for s in range(S):
                        hist[t + 1, l, s] = state[l, s]
            if need:
                if use_nearest:
                    preds[b, t] = nearest_code_readout_args(x, v_dim, code_lo, code_hi, out_dim, out_kind, out_param,
                                                        out_coef, I, f, mode, err)
                elif plain is None:
                    preds[b, t] = _readout_table_fast(x, out_dim, out_kind, out_param, out_coef, candidates,
                                                      w_tab, wmax_tab, ok_tab, I, f, mode, err, rsafe,
                                                      col_wmax, col_ok, logits)
                else:
                    preds[b, t] = readout_fast_args(x, out_dim, out_kind, out_param, out_coef, candidates,
                                                w_tab, wmax_tab, ok_tab, I, f, mode, err)
            if err[E_CODE] != 0:
                loc[0] = b
                loc[1] = t
                err[E_WHERE] = t
                return


class RNNSparse(NamedTuple):
    """The RNN layers of an attention-free model with every weight matrix stored by
    rows (compressed sparse rows, over the stack of layers): for a stack M of shape
    (L, R, C), ``Mp[l, r]:Mp[l, r + 1]`` index the nonzero entries of row r of layer
    l in ``Mi`` (their columns, increasing) and ``Mv`` (their values). The compiled
    programs of T5-RAG keep about 1% of their dense weights, which the dense
    :func:`step_arrays` visits every token. Built by :func:`rnn_sparse`; fed by
    :func:`feed_rnn_sparse`."""

    Ap: np.ndarray
    Ai: np.ndarray
    Av: np.ndarray
    Bp: np.ndarray
    Bi: np.ndarray
    Bv: np.ndarray
    Cp: np.ndarray
    Ci: np.ndarray
    Cv: np.ndarray
    W1p: np.ndarray
    W1i: np.ndarray
    W1v: np.ndarray
    W2p: np.ndarray
    W2i: np.ndarray
    W2v: np.ndarray
    rb1: np.ndarray
    rb2: np.ndarray
    wbits: np.ndarray
    """[bit_length(max |weight|)] of the five stacks: with I + f it decides whether
    no product can leave int64 (the unchecked fast path, :func:`_rows_mv_fast`)."""


def _rows(M: np.ndarray) -> tuple:
    """(ptr (L, R + 1), columns, values) of the stack M (L, R, C) by rows."""
    L, R, _ = M.shape
    ls, rs, cs = np.nonzero(M)                   # row-major order: by layer, row, then column
    ptr = np.zeros(L * R + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(ls * R + rs, minlength=L * R))
    out = np.array([ptr[l * R:(l + 1) * R + 1] for l in range(L)], dtype=np.int64).reshape(L, R + 1)
    return out, cs.astype(np.int64), M[ls, rs, cs].astype(np.int64)


def rnn_sparse(net: Network) -> RNNSparse:
    """The RNN layers of ``net`` by rows (:class:`RNNSparse`): the same numbers as the
    dense stacks, nothing dropped but zeros."""
    parts = []
    for M in (net.rA, net.rB, net.rC, net.rW1, net.rW2):
        parts += _rows(M)
    wmax = max([int(np.abs(v).max()) for v in parts[2::3] if v.size] + [0])
    return RNNSparse(*parts, net.rb1, net.rb2, np.array([wmax.bit_length()], dtype=np.int64))


@njit(cache=True)
def _rows_mv(Mp, Mi, Mv, l, v, I, f, mode, err, out):
    """out = M[l] v over the nonzero weights of each row, columns increasing, zero
    terms of v skipped: exactly the terms :func:`matvec` adds, in its order (rows
    beyond the layer's own size have no entries and give 0, as the padded dense
    rows do)."""
    for r in range(out.shape[0]):
        acc = np.int64(0)
        for k in range(Mp[l, r], Mp[l, r + 1]):
            vc = v[Mi[k]]
            if vc != 0:
                acc = fx_add(acc, fx_mul(Mv[k], vc, I, f, mode, err), I, f, mode, err)
        out[r] = acc


@njit(cache=True)
def _rows_mv_fast(Mp, Mi, Mv, l, v, I, f, mode, err, out, psafe):
    """:func:`_rows_mv`, checked once as :func:`matvec_fast` does: with ``psafe`` (no
    product can leave int64) the products and sums run on plain int64, tracking the
    largest |product| and |partial sum|; if that stays below 2^(I+f) nothing
    overflowed or saturated, and the result and the largest |raw| are exactly
    :func:`_rows_mv`'s. Otherwise ``out`` is recomputed by :func:`_rows_mv`, which
    records / counts as always."""
    if psafe:
        lim = np.int64(1) << (I + f)
        hm1 = (np.int64(1) << (f - 1)) - 1 if f > 0 else np.int64(0)
        mx = np.int64(0)
        for r in range(out.shape[0]):
            acc = np.int64(0)
            for k in range(Mp[l, r], Mp[l, r + 1]):
                vc = v[Mi[k]]
                if vc != 0:
                    q = round_raw(Mv[k] * vc, f, hm1)
                    acc += q
                    a = max(q if q >= 0 else -q, acc if acc >= 0 else -acc)
                    if a > mx:
                        if a >= lim:
                            mx = lim
                            break
                        mx = a
            out[r] = acc
            if mx >= lim:
                break
        if mx < lim:
            if mx > err[E_MAXABS]:
                err[E_MAXABS] = mx
            return
    _rows_mv(Mp, Mi, Mv, l, v, I, f, mode, err, out)


@njit(cache=True)
def feed_rnn_sparse(tokens, t0, I, f, mode, err, ekind, eparam, ecoef,
                    Ap, Ai, Av, Bp, Bi, Bv, Cp, Ci, Cv, W1p, W1i, W1v, W2p, W2i, W2v, rb1, rb2, wbits,
                    rnn_state, x):
    """:func:`feed_flat` for a model without attention layers, its RNN layers by rows
    (:class:`RNNSparse`): :func:`step_arrays`'s RNN part with every matrix product over the
    nonzero weights only, each stage checked once (:func:`_rows_mv_fast`,
    :func:`add_into`, :func:`bias_relu_fast`, :func:`residual_add_fast`):
    where nothing leaves the range these are the checked operations' numbers and
    largest |raw|, and where something does the stage reruns with the checked
    operations in the dense step's order, so the state, the residual and ``err``
    are the dense step's (tests/test_kernels_sparse.py). Stops at the first error
    (err[E_WHERE] = its position); returns the next position."""
    D = x.shape[0]
    Lr = rnn_state.shape[0]
    S = rnn_state.shape[1]
    Mr = rb1.shape[1]
    psafe = wbits[0] + I + f <= 62
    ah = np.zeros(S, dtype=np.int64)
    bx = np.zeros(S, dtype=np.int64)
    hs = np.zeros(S, dtype=np.int64)
    tmp = np.zeros(D, dtype=np.int64)
    hidden = np.zeros(Mr, dtype=np.int64)
    t = t0
    for i in range(tokens.shape[0]):
        embed_features(tokens[i], t, ekind, eparam, ecoef, I, f, mode, err, x)
        for l in range(Lr):
            for s in range(S):
                hs[s] = rnn_state[l, s]
            _rows_mv_fast(Ap, Ai, Av, l, hs, I, f, mode, err, ah, psafe)
            _rows_mv_fast(Bp, Bi, Bv, l, x, I, f, mode, err, bx, psafe)
            add_into(ah, bx, I, f, mode, err)
            for s in range(S):
                hs[s] = ah[s]
                rnn_state[l, s] = ah[s]
            _rows_mv_fast(Cp, Ci, Cv, l, hs, I, f, mode, err, tmp, psafe)
            add_into(x, tmp, I, f, mode, err)
            # the layer's MLP (mlp_residual_fast with the products by rows)
            _rows_mv_fast(W1p, W1i, W1v, l, x, I, f, mode, err, hidden, psafe)
            bias_relu_fast(hidden, rb1, l, I, f, mode, err)
            _rows_mv_fast(W2p, W2i, W2v, l, hidden, I, f, mode, err, tmp, psafe)
            residual_add_fast(x, tmp, rb2, l, I, f, mode, err)
        if err[E_CODE] != 0:
            err[E_WHERE] = t
            return t + 1
        t += 1
    return t
