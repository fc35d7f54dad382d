"""numba kernels of the executors: one step of any model, batch forward, readout.

Every model in rnngap is "embedding -> L_r linear-RNN layers -> L_a attention
layers -> formula readout" (docs/theory.md §2): a Transformer has L_r = 0, a
linear RNN L_a = 0, a hybrid L_r >= 1 and L_a = 1. So there is one code path,
:func:`model_step`, and the three architectures cannot drift apart. All arrays
are raw int64 fixed-point values (:mod:`constructions.fixedpoint`), validated by
:mod:`constructions.model` before calling in. A model's encoded weights travel as
one :class:`Weights` (``net``: a :class:`Network`; ``readout``: a
:class:`Readout`). :func:`forward_batch` takes a readout mode (``READOUT_TABLE``
or ``READOUT_NEAREST_CODE``). Its shortcuts (pruned attention, the key-value
index, unchecked scores, readout tables, prefix reuse, per-stage checks) are
exact: tested against the plain definition.

Details (array shapes, readouts, the exact shortcuts):
docs/internals/machine.md#kernels
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .fixedpoint import (
    E_CODE, E_MAXABS, E_WHERE, ERR_LEN, ERR_OVERFLOW, MODE_SATURATE, E_SAT, OP_ADD, exp_raw,
    fit_value, record_error, bit_length, exp_zero_threshold, fx_add, fx_attend, fx_div, fx_mul,
    fx_relu, mul_round_abs,
)
from .heap import heap_pop as _heap_pop, heap_push as _heap_push
from .keyindex import KI_PAUSE, ST_ABORTED, ST_EFFECTIVE, has_index, index_rows, index_scores
from .vocab import NUMBER_BASE

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
    candidate tokens, the :func:`readout_table` of this format, and ``nearest``
    (v, code_lo, code_hi) of :func:`nearest_code_readout` (v = -1: not applicable)."""

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
    positional arrays). Built once by :class:`constructions.model.Model` (``model.weights``).
    The per-token kernels take only the part they read (``weights.net`` for
    :func:`feed_tokens` / :func:`model_step`, ``weights.readout`` for the readouts):
    each call from Python unboxes every array it is given. The loops take the
    arrays one by one (:func:`forward_loop` through :func:`loop_args`,
    :func:`feed_flat`, :func:`_step`): arrays unpacked from a tuple inside the loop
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
def _embed(tok, pos, ekind, eparam, ecoef, I, f, mode, err, x):
    for d in range(x.shape[0]):
        k = ekind[d]
        if k == F_ZERO or ecoef[d] == 0:
            x[d] = 0
        else:
            x[d] = fx_mul(ecoef[d], feature_raw(k, eparam[d], tok, pos, I, f, mode, err), I, f, mode, err)


@njit(cache=True)
def embed(tok, pos, net, I, f, mode, err, x):
    """x = the embedding of token ``tok`` at position ``pos`` (``net``: a :class:`Network`)."""
    _embed(tok, pos, net.ekind, net.eparam, net.ecoef, I, f, mode, err, x)


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
    under ``err`` (in range, their |raw| already metered: within :func:`_step`,
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
    :mod:`constructions.keyindex` (``KmT`` with ``keyindex.index_rows(Dh)`` rows, sessions only), the
    exact key-value index instead (:func:`constructions.keyindex.index_scores`,
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
    pruned attention and the key-value index of :mod:`constructions.keyindex` if
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
            nh = _heap_push(scores, dfr, nh, _heap_key(ub, ubf), b * 16 + top)
        level = top
        best = np.int64(0)
        while nh > 0:
            code = scores[dfr + 1]
            nh = _heap_pop(scores, dfr, nh)
            level = code & 15
            best = code >> 4
            if level == 1 or nh + (1 << PRUNE_BRANCH_LOG) > PRUNE_HEAP:
                break
            c0 = best << PRUNE_BRANCH_LOG
            for b in range(c0, c0 + (1 << PRUNE_BRANCH_LOG)):
                if (b << _level_log(level - 1)) >= m:
                    break
                ub, ubf, pb = _node_bound(q, qnz, nq, KhT, KmT, cm, level - 1, b, m, f, hm1)
                nh = _heap_push(scores, dfr, nh, _heap_key(ub, ubf), b * 16 + level - 1)
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


@njit(cache=True)
def _step(tok, t, I, f, mode, err,
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
    _embed(tok, t, ekind, eparam, ecoef, I, f, mode, err, x)
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
    :class:`Network`); see :func:`_step`."""
    _step(tok, t, I, f, mode, err, net.ekind, net.eparam, net.ecoef,
          net.rA, net.rB, net.rC, net.rW1, net.rb1, net.rW2, net.rb2, rnn_state,
          net.aWQ, net.aWK, net.aWV, net.aWO, net.a_nheads, net.aW1, net.ab1, net.aW2, net.ab2, Kc, Km, Vc,
          x, scores, wbuf, record, attn_rec, need_output, ws)


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
def _readout_fast(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab, I, f, mode, err):
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
    return _readout_fast(x, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates,
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
    return _readout_fast(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
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
def _nearest_code_readout(x, v_dim, code_lo, code_hi, out_dim, out_kind, out_param, out_coef, I, f, mode, err):
    """The generic :func:`readout` restricted to the few candidates that can
    matter for logit(k) = 2 tau_k v - tau_k^2 (v = x[v_dim]) over the contiguous
    code range [code_lo, code_hi] (every special id 0..-code_lo and the numbers
    present; :class:`constructions.model.Model` checks that its readout and
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
    """:func:`_nearest_code_readout` with (v, code_lo, code_hi) = ``ro.nearest``."""
    return _nearest_code_readout(x, ro.nearest[0], ro.nearest[1], ro.nearest[2],
                                 ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, I, f, mode, err)


def loop_args(W: Weights) -> tuple:
    """The arguments of :func:`forward_loop` / :func:`constructions.lanes._lanes`
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
    :func:`_step`); :func:`forward_batch_plain` is the same loop on :func:`_step`
    itself, the reference the tests compare it with. (Each compiled level above
    the loop re-optimizes the whole loop when it is compiled: the two compiled
    wrappers this replaces, one unpacking ``W`` and one passing the flag, cost
    ~4 s each on a cold cache; and the loop runs ~25% slower on arrays unpacked
    from a tuple in the same function than on arrays that are arguments.)"""
    forward_loop(tokens, lengths, all_positions, share_prefix, readout_mode == READOUT_NEAREST_CODE, None,
                 I, f, mode, err, loc, *loop_args(W), preds)


def forward_batch_plain(tokens, lengths, all_positions, share_prefix, readout_mode, I, f, mode, err, loc, W, preds):
    """:func:`forward_batch` running every step with the plain :func:`_step` and
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

    ttab[v, d] is x[d] of :func:`_embed` for token id v if d's feature is not a
    position feature (else 0), ptab[t, d] the same for position t and the position
    features; every dimension has one feature, so x = ttab[tok] + ptab[t] exactly.
    tmx[v] / pmx[t]: the largest |raw| the row's computation touched; tok_ok[v] /
    pos_ok[t]: no error and no saturation happened in it (ids that are not
    candidates are not ok). A step whose token or position row is not ok runs the
    plain :func:`_embed` (so it records or counts exactly as before)."""
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
    """:func:`_readout_fast`, checked once and a term at a time: with ``rsafe``
    (every |w_tab| * 2^(I+f) < 2^62) and every table entry of the terms read ok
    (``col_ok``, :func:`readout_columns`), all candidates' logits advance together
    over the terms (a loop over the candidates the compiler vectorises) on plain
    int64. Each candidate's partial sums are the plain ones, in the same order, so
    the largest |product| and |partial sum| is the same set's maximum; a term with
    x[dim] = 0 is skipped as the plain readout skips it, and a read term records
    max_c wmax_tab[c, i] (``col_wmax``) as the plain one records every wmax_tab[c,
    i]. If that maximum reaches 2^(I+f) (an int64 sum can only wrap after a
    partial sum or product has reached it), or a read term has an entry that is
    not ok, :func:`_readout_fast` runs instead (same token, same effects). The
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
    return _readout_fast(x, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                         I, f, mode, err)


@njit(cache=True)
def forward_loop(tokens, lengths, all_positions, share_prefix, use_nearest, plain, I, f, mode, err, loc,
                  ekind, eparam, ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, a_nheads,
                  aW1, ab1, aW2, ab2, out_dim, out_kind, out_param, out_coef, candidates, w_tab, wmax_tab, ok_tab,
                  v_dim, code_lo, code_hi, preds):
    """The batch loop of :func:`forward_batch`. ``plain`` = True: every step by
    :func:`_step` and the readout by :func:`_readout_fast` (the plain definition,
    :func:`forward_batch_plain`, which only the tests run). ``plain`` = None: the
    fast loop. For a None-typed argument numba decides ``plain is None`` when it
    compiles, so the fast version is compiled without the plain branch (it never
    compiles :func:`_step`) and carries no test per step; the plain version
    (``plain`` a bool) compiles both branches and tests ``plain is None`` (False)
    per step, which only the tests pay. The fast
    step is written out here (a call per step with the ~50 arrays of the model as
    arguments cost more than the step itself: numba increments and decrements a
    reference count per array argument, an atomic operation), the same numbers
    and the same effect on ``err`` as :func:`_step` (record = False), faster:

    * the embedding from :func:`embed_tables` (x = ttab[tok] + ptab[t]; the plain
      :func:`_embed` if the token's or the position's row is not ok);
    * every matrix-vector product by :func:`matvec_fast`, every residual sum by
      :func:`add_into`, the MLPs by :func:`mlp_residual_fast`: each checked once,
      falling back to the plain definition as a whole, so the first error and the
      saturation count are the plain ones (stages run in the plain order; no
      stage writes ``err`` before it knows it stays in range; the largest |raw|
      is a maximum, so recording it per stage changes nothing);
    * the readout by :func:`_readout_table_fast`;
    * the attention kernels (:func:`store_key`, :func:`attention_scores`,
      :func:`attend_sparse`) are called exactly as :func:`_step` calls them."""
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
                    _embed(tok, t, ekind, eparam, ecoef, I, f, mode, err, x)
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
                _step(tokens[b, t], t, I, f, mode, err, ekind, eparam, ecoef,
                      rA, rB, rC, rW1, rb1, rW2, rb2, state,
                      aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Km, Vc,
                      x, scores, wbuf, np.bool_(False), attn_rec, need, ws)
            if share:
                for l in range(Lr):
                    for s in range(S):
                        hist[t + 1, l, s] = state[l, s]
            if need:
                if use_nearest:
                    preds[b, t] = _nearest_code_readout(x, v_dim, code_lo, code_hi, out_dim, out_kind, out_param,
                                                        out_coef, I, f, mode, err)
                elif plain is None:
                    preds[b, t] = _readout_table_fast(x, out_dim, out_kind, out_param, out_coef, candidates,
                                                      w_tab, wmax_tab, ok_tab, I, f, mode, err, rsafe,
                                                      col_wmax, col_ok, logits)
                else:
                    preds[b, t] = _readout_fast(x, out_dim, out_kind, out_param, out_coef, candidates,
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
    :func:`_step` visits every token. Built by :func:`rnn_sparse`; fed by
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
    (:class:`RNNSparse`): :func:`_step`'s RNN part with every matrix product over the
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
        _embed(tokens[i], t, ekind, eparam, ecoef, I, f, mode, err, x)
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
        _step(tokens[i], t, I, f, mode, err, ekind, eparam, ecoef,
              rA, rB, rC, rW1, rb1, rW2, rb2, rnn_state,
              aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2, Kc, Km, Vc,
              x, scores, wbuf, record, attn_rec, need, ws)
        if err[E_CODE] != 0:
            err[E_WHERE] = t
            return t + 1
        t += 1
    return t
