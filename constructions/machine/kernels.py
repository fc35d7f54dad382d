"""numba kernels of the executors: the network's arrays, embedding, layers and one step of any model.

Every model in rnngap is "embedding -> L_r linear-RNN layers -> L_a attention
layers -> formula readout" (docs/theory.md §2): a Transformer has L_r = 0, a
linear RNN L_a = 0, a hybrid L_r >= 1 and L_a = 1. So there is one code path,
:func:`model_step`, and the three architectures cannot drift apart. All arrays
are raw int64 fixed-point values (constructions/machine/fixedpoint.py),
validated by constructions/build/model.py before calling in. A model's encoded
weights travel as one :class:`Weights` (``net``: a :class:`Network`;
``readout``: a :class:`Readout`). Beside this module: attention.py (scores,
pruning, the sparse softmax), readouts.py and batch.py (many rows at once,
with its exact shortcuts, tested against the plain step).

Details (array shapes, readouts, the exact shortcuts):
docs/internals/machine.md#kernels
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_WHERE, ERR_OVERFLOW, MODE_SATURATE, E_SAT, OP_ADD, fit_value, record_error, bit_length, fx_add,
    fx_attend, fx_div, fx_mul, fx_relu,
)
from .vocab import NUMBER_BASE
from .attention import attend_sparse, attention_scores, store_key


# feature kinds of the embedding / readout formulas
F_ZERO = 0
F_ONE = 1
F_TOK = 2        # tau(token)
F_TOK_SQ = 3     # tau(token)^2
F_IS_TOKEN = 4   # [token == param]
F_IS_NUM = 5     # [token is a number]
F_TOK_INV = 6    # 1 / (tau(token) + param/2^f)
F_POS = 7        # i
F_POS_SQ = 8     # i^2
F_POS_INV = 9    # 1 / (i + param/2^f)

FEATURE_NAMES = {
    F_ZERO: "zero", F_ONE: "one", F_TOK: "tau", F_TOK_SQ: "tau^2", F_IS_TOKEN: "is_token",
    F_IS_NUM: "is_number", F_TOK_INV: "1/(tau+c)", F_POS: "pos", F_POS_SQ: "pos^2",
    F_POS_INV: "1/(pos+c)",
}
READOUT_TABLE = 0          # forward_batch: generic readout, weights from readout_table
READOUT_NEAREST_CODE = 1   # forward_batch: nearest_code_readout (needs Weights.nearest[0] >= 0)


class Network(NamedTuple):
    """The encoded embedding and layers of one model (see the module docstring for
    the shapes): what :func:`model_step` reads."""

    ekind: np.ndarray
    eparam: np.ndarray
    ecoef: np.ndarray
    rA: np.ndarray
    rB: np.ndarray
    rC: np.ndarray
    rW1: np.ndarray
    rb1: np.ndarray
    rW2: np.ndarray
    rb2: np.ndarray
    aWQ: np.ndarray
    aWK: np.ndarray
    aWV: np.ndarray
    aWO: np.ndarray
    a_nheads: np.ndarray
    aW1: np.ndarray
    ab1: np.ndarray
    aW2: np.ndarray
    ab2: np.ndarray


class Readout(NamedTuple):
    """The encoded readout of one model and format: the formula's terms, the
    candidate tokens, the table of readouts.readout_table for this format, and
    ``nearest`` (v, code_lo, code_hi) of readouts.nearest_code_readout (v = -1: not applicable)."""

    out_dim: np.ndarray
    out_kind: np.ndarray
    out_param: np.ndarray
    out_coef: np.ndarray
    candidates: np.ndarray
    w_tab: np.ndarray
    wmax_tab: np.ndarray
    ok_tab: np.ndarray
    nearest: np.ndarray


class Weights(NamedTuple):
    """The encoded weights of one model and format, the single structured argument
    of :func:`forward_batch` (a Python function: it unpacks them, :func:`loop_args`)
    and of the per-token kernels (numba passes a NamedTuple of arrays like
    positional arrays). Built once by :class:`constructions.build.model.Model` (``model.weights``).
    The per-token kernels take only the part they read (``weights.net`` for
    :func:`feed_tokens` / :func:`model_step`, ``weights.readout`` for the readouts):
    each call from Python unboxes every array it is given. The loops take the
    arrays one by one (:func:`forward_loop` through :func:`loop_args`,
    :func:`feed_flat`, :func:`step_arrays`): arrays unpacked from a tuple inside the loop
    function measured ~25% slower."""

    net: Network
    readout: Readout


POSITION_FEATURES = frozenset({F_POS, F_POS_SQ, F_POS_INV})
READOUT_FEATURES = frozenset({F_ZERO, F_ONE, F_TOK, F_TOK_SQ, F_IS_TOKEN, F_IS_NUM, F_TOK_INV})


@njit(cache=True)
def tok_code(tok):
    """tau: number k -> k + 1, special id s -> -s (see vocab.token_code)."""
    if tok >= NUMBER_BASE:
        return tok - NUMBER_BASE + 1
    return -tok


@njit(cache=True)
def int_raw(v, I, f, mode, err):
    """The raw of the integer v, range-checked (an out-of-range integer feature,
    e.g. pos^2 beyond 2^I, is an overflow of the encoding)."""
    a = v if v >= 0 else -v
    if a >= (np.int64(1) << I):
        if mode == MODE_SATURATE:
            err[E_SAT] += 1
        else:
            record_error(err, ERR_OVERFLOW, OP_ADD, bit_length(a))   # |v| < 2^bit_length(|v|)
        lim = (np.int64(1) << (I + f)) - 1
        return lim if v > 0 else -lim
    return fit_value(v << f, I, f, mode, OP_ADD, err)


@njit(cache=True)
def feature_raw(kind, param, tok, pos, I, f, mode, err):
    if kind == F_ZERO:
        return np.int64(0)
    if kind == F_ONE:
        return int_raw(np.int64(1), I, f, mode, err)
    if kind == F_TOK:
        return int_raw(tok_code(tok), I, f, mode, err)
    if kind == F_TOK_SQ:
        c = tok_code(tok)
        return int_raw(c * c, I, f, mode, err)
    if kind == F_IS_TOKEN:
        return int_raw(1 if tok == param else 0, I, f, mode, err)
    if kind == F_IS_NUM:
        return int_raw(1 if tok >= NUMBER_BASE else 0, I, f, mode, err)
    if kind == F_TOK_INV:
        den = fx_add(int_raw(tok_code(tok), I, f, mode, err), param, I, f, mode, err)
        return fx_div(int_raw(np.int64(1), I, f, mode, err), den, I, f, mode, err)
    if kind == F_POS:
        return int_raw(pos, I, f, mode, err)
    if kind == F_POS_SQ:
        return int_raw(pos * pos, I, f, mode, err)
    if kind == F_POS_INV:
        den = fx_add(int_raw(pos, I, f, mode, err), param, I, f, mode, err)
        return fx_div(int_raw(np.int64(1), I, f, mode, err), den, I, f, mode, err)
    return np.int64(0)


@njit(cache=True)
def embed_features(tok, pos, ekind, eparam, ecoef, I, f, mode, err, x):
    for d in range(x.shape[0]):
        k = ekind[d]
        if k == F_ZERO or ecoef[d] == 0:
            x[d] = 0
        else:
            x[d] = fx_mul(ecoef[d], feature_raw(k, eparam[d], tok, pos, I, f, mode, err), I, f, mode, err)


@njit(cache=True)
def embed(tok, pos, net, I, f, mode, err, x):
    """x = the embedding of token ``tok`` at position ``pos`` (``net``: a :class:`Network`)."""
    embed_features(tok, pos, net.ekind, net.eparam, net.ecoef, I, f, mode, err, x)


MATVEC_SPARSE_MIN_COLS = 8      # matvec gathers x's nonzero columns first when it is this wide and <= 1/4 full


@njit(cache=True)
def matvec(W, x, I, f, mode, err, out):
    """out = W x (products rounded, sums exact, zero terms skipped).

    A wide, mostly zero x (the residual streams of the compiled RNN programs:
    a few live directions among hundreds) is gathered first: each row then
    visits only the columns where x is nonzero, in increasing order, which are
    exactly the terms the dense loop does not skip, in the same order: the same
    numbers and the same effect on ``err``."""
    rows, cols = W.shape
    if cols >= MATVEC_SPARSE_MIN_COLS:
        nz = 0
        for c in range(cols):
            if x[c] != 0:
                nz += 1
        if 4 * nz <= cols:
            live = np.empty(nz, dtype=np.int64)
            k = 0
            for c in range(cols):
                if x[c] != 0:
                    live[k] = c
                    k += 1
            for r in range(rows):
                acc = np.int64(0)
                for k in range(nz):
                    c = live[k]
                    w = W[r, c]
                    if w != 0:
                        acc = fx_add(acc, fx_mul(w, x[c], I, f, mode, err), I, f, mode, err)
                out[r] = acc
            return
    for r in range(rows):
        acc = np.int64(0)
        for c in range(cols):
            w = W[r, c]
            if w != 0:
                xc = x[c]
                if xc != 0:
                    acc = fx_add(acc, fx_mul(w, xc, I, f, mode, err), I, f, mode, err)
        out[r] = acc


@njit(cache=True)
def mlp_residual(W1, b1, W2, b2, x, I, f, mode, err, hidden, tmp):
    """x += W2 relu(W1 x + b1) + b2."""
    matvec(W1, x, I, f, mode, err, hidden)
    for m in range(hidden.shape[0]):
        hidden[m] = fx_relu(fx_add(hidden[m], b1[m], I, f, mode, err))
    matvec(W2, hidden, I, f, mode, err, tmp)
    for d in range(x.shape[0]):
        x[d] = fx_add(x[d], fx_add(tmp[d], b2[d], I, f, mode, err), I, f, mode, err)


@njit(cache=True)
def _mlp_residual_metered(W1, b1, W2, b2, x, I, f, mode, err, hidden, tmp):
    """:func:`mlp_residual` for an ``x`` that holds results of checked operations
    under ``err`` (in range, their |raw| already metered: within :func:`step_arrays`,
    which embeds x with that err): a zero added to x[d] gives x[d] and records
    nothing new, so it is skipped; x and err are the same as mlp_residual's."""
    matvec(W1, x, I, f, mode, err, hidden)
    for m in range(hidden.shape[0]):
        hidden[m] = fx_relu(fx_add(hidden[m], b1[m], I, f, mode, err))
    matvec(W2, hidden, I, f, mode, err, tmp)
    for d in range(x.shape[0]):
        if tmp[d] != 0 or b2[d] != 0:
            x[d] = fx_add(x[d], fx_add(tmp[d], b2[d], I, f, mode, err), I, f, mode, err)


@njit(cache=True)
def workspace_size(D, S, Mr, Dh, Ma):
    """Scratch entries model_step needs (RNN and attention parts reuse the space)."""
    return D + max(2 * S + Mr, 2 * D + 5 * Dh + Ma) + 1


@njit(cache=True)
def step_arrays(tok, t, I, f, mode, err,
               ekind, eparam, ecoef,
               rA, rB, rC, rW1, rb1, rW2, rb2, rnn_state,
               aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Km, Vc,
               x, scores, wbuf, record, attn_rec, need_output, ws):
    """:func:`model_step` with the arrays of the :class:`Network` passed one by one
    (the loops of :func:`feed_tokens` / :func:`feed_flat` and the plain reference
    loop :func:`forward_batch_plain` call this per token; :func:`forward_batch`'s
    fast loop writes the step out). Process token ``tok`` at position ``t``: updates rnn_state, appends to the
    KV cache at index t, and leaves the final residual in ``x``. If ``record``,
    the attention weights of every head at this position go to attn_rec[l, h, :t+1].

    ``need_output=False`` (nobody reads this position's output): the last
    attention layer only writes its K, V (they depend on the residual before
    that layer), and its attention and MLP are skipped; ``x`` is then not the
    final residual. Every value that is read is computed exactly as before.

    ``ws`` is a scratch int64 array of at least :func:`workspace_size` entries
    (no allocation happens per step)."""
    D = x.shape[0]
    embed_features(tok, t, ekind, eparam, ecoef, I, f, mode, err, x)
    tmp = ws[0:D]
    # --- linear RNN layers
    Lr = rA.shape[0]
    if Lr > 0:
        S = rA.shape[1]
        ah = ws[D:D + S]
        bx = ws[D + S:D + 2 * S]
        hidden = ws[D + 2 * S:D + 2 * S + rW1.shape[1]]
        for l in range(Lr):
            matvec(rA[l], rnn_state[l], I, f, mode, err, ah)
            matvec(rB[l], x, I, f, mode, err, bx)
            for s in range(S):
                rnn_state[l, s] = fx_add(ah[s], bx[s], I, f, mode, err)
            matvec(rC[l], rnn_state[l], I, f, mode, err, tmp)
            for d in range(D):
                if tmp[d] != 0:          # x + 0 = x, already metered (_mlp_residual_metered)
                    x[d] = fx_add(x[d], tmp[d], I, f, mode, err)
            _mlp_residual_metered(rW1[l], rb1[l], rW2[l], rb2[l], x, I, f, mode, err, hidden, tmp)
    # --- attention layers
    La = aWQ.shape[0]
    if La > 0:
        Dh = aWQ.shape[2]
        q = ws[D:D + Dh]
        o = ws[D + Dh:D + 2 * Dh]
        ho = ws[D + 2 * Dh:2 * D + 2 * Dh]
        acc = ws[2 * D + 2 * Dh:3 * D + 2 * Dh]
        Ma = aW1.shape[1]
        hidden = ws[3 * D + 2 * Dh:3 * D + 2 * Dh + Ma]
        qnz = ws[3 * D + 2 * Dh + Ma:3 * D + 3 * Dh + Ma]
        kr = ws[3 * D + 3 * Dh + Ma:3 * D + 4 * Dh + Ma]
        cm = ws[3 * D + 4 * Dh + Ma:3 * D + 5 * Dh + Ma]
        for l in range(La):
            for d in range(D):
                acc[d] = 0
            if l == La - 1 and not need_output:
                for h in range(a_nheads[l]):
                    matvec(aWK[l, h], x, I, f, mode, err, kr)
                    store_key(kr, t, Kc[l, h], Km[l, h])
                    matvec(aWV[l, h], x, I, f, mode, err, Vc[l, h, t])
                return
            for h in range(a_nheads[l]):
                matvec(aWQ[l, h], x, I, f, mode, err, q)
                matvec(aWK[l, h], x, I, f, mode, err, kr)
                store_key(kr, t, Kc[l, h], Km[l, h])
                matvec(aWV[l, h], x, I, f, mode, err, Vc[l, h, t])
                M = attention_scores(q, Kc[l, h], Km[l, h], t + 1, I, f, mode, err, qnz, cm, scores)
                if record:
                    fx_attend(scores, t + 1, Vc[l, h], I, f, mode, err, wbuf, o)
                    for j in range(t + 1):
                        attn_rec[l, h, j] = wbuf[j]
                else:
                    attend_sparse(scores, t + 1, M, Vc[l, h], I, f, mode, err, wbuf, o)
                matvec(aWO[l, h], o, I, f, mode, err, ho)
                for d in range(D):
                    if ho[d] != 0:       # acc[d] is 0 or a checked sum: + 0 changes nothing
                        acc[d] = fx_add(acc[d], ho[d], I, f, mode, err)
            for d in range(D):
                if acc[d] != 0:
                    x[d] = fx_add(x[d], acc[d], I, f, mode, err)
            _mlp_residual_metered(aW1[l], ab1[l], aW2[l], ab2[l], x, I, f, mode, err, hidden, tmp)


@njit(cache=True)
def model_step(tok, t, I, f, mode, err, net, rnn_state, Kc, Km, Vc,
               x, scores, wbuf, record, attn_rec, need_output, ws):
    """Process token ``tok`` at position ``t`` with the layers ``net`` (a
    :class:`Network`); see :func:`step_arrays`."""
    step_arrays(tok, t, I, f, mode, err, net.ekind, net.eparam, net.ecoef,
          net.rA, net.rB, net.rC, net.rW1, net.rb1, net.rW2, net.rb2, rnn_state,
          net.aWQ, net.aWK, net.aWV, net.aWO, net.a_nheads, net.aW1, net.ab1, net.aW2, net.ab2, Kc, Km, Vc,
          x, scores, wbuf, record, attn_rec, need_output, ws)


@njit(cache=True)
def feed_tokens(tokens, t0, I, f, mode, err, net, rnn_state, Kc, Km, Vc,
                x, scores, wbuf, record, attn_rec):
    """Feed ``tokens`` at positions t0, t0+1, ... through the layers ``net`` (a
    :class:`Network`); stops at the first error (err[E_WHERE] = its position).
    Returns the next position."""
    return feed_flat(tokens, t0, I, f, mode, err,
                 net.ekind, net.eparam, net.ecoef, net.rA, net.rB, net.rC, net.rW1, net.rb1, net.rW2, net.rb2,
                 net.aWQ, net.aWK, net.aWV, net.aWO, net.a_nheads, net.aW1, net.ab1, net.aW2, net.ab2,
                 rnn_state, Kc, Km, Vc, x, scores, wbuf, record, attn_rec)


@njit(cache=True)
def feed_flat(tokens, t0, I, f, mode, err,
          ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2,
          rnn_state, Kc, Km, Vc, x, scores, wbuf, record, attn_rec):
    """:func:`feed_tokens` with the :class:`Network` flattened (``*weights.net``):
    what a session calls per token, since numba unboxes a tuple argument about
    1 us slower per call than the same arrays passed one by one."""
    t = t0
    last = tokens.shape[0] - 1
    La = aWQ.shape[0]
    ws = np.zeros(workspace_size(x.shape[0], rA.shape[1] if rA.shape[0] > 0 else 0, rW1.shape[1],
                                 aWQ.shape[2] if La > 0 else 0, aW1.shape[1]), dtype=np.int64)
    for i in range(tokens.shape[0]):
        need = i == last
        step_arrays(tokens[i], t, I, f, mode, err, ekind, eparam, ecoef,
              rA, rB, rC, rW1, rb1, rW2, rb2, rnn_state,
              aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Km, Vc,
              x, scores, wbuf, record, attn_rec, need, ws)
        if err[E_CODE] != 0:
            err[E_WHERE] = t
            return t + 1
        t += 1
    return t
