"""Targets for the lower bounds (claims T4.6-low, T4.7-low): real fixed-point
linear RNNs of the project (kind ``"linear_rnn"``, built from named directions
with :class:`~constructions.build.gadgets.Builder`) with a bounded memory, wrapped in
the general RNN protocol (``constructions/build/protocol.py``) so that the witness
finder of ``lowerbounds/witness.py`` can break them.

:func:`register_index_rnn` solves Index with a CoT while n fits its register,
whose capacity c is set by its precision (rounding drops every later data bit);
:func:`random_linear_rnn` builds seeded random contractions;
:func:`istree_register_rnn` reads the IsTree hub gadget's prefixes;
:class:`LinearRNNTarget` wraps any linear-RNN Model with state h only and a batch
``batch_states``.

Example::

    >>> m = register_index_rnn(4)
    >>> rnn = LinearRNNTarget(m)
    >>> from rnngap.constructions.build.protocol import run_rnn
    >>> run = run_rnn(rnn, [0, 33, 32, 33, 33, 9, 35], [32, 33], max_cot=4)
    >>> run.answer, len(run.cot)       # x_3 = 1 after a CoT of 2 tokens
    (33, 2)

Details (the register RNN's layers and readout): docs/internals/models.md#targets
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numba import get_num_threads, njit, prange

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import (
    E_CODE, E_MAXABS, E_NEED, E_OP, E_SAT, E_WHERE, OP_MUL, fit_value, check_err, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    Builder, MarginError, Neuron, ResidualSpace, bits_for, equality_neurons, step_neurons,
)
from rnngap.constructions.build.model import Model
from rnngap.constructions.build.spec import ModelSpec
from . import bounds as _bounds
from rnngap.constructions.machine.vocab import (
    BOS, DASH, EOS, FALSE, NUMBER_BASE, QUERY, TILDE, TRUE, Vocab, number_token,
)

REGISTER_FRAC_BITS = 1
"""f of the register RNN: the halving weight 1/2 must lie on the grid."""

MAX_REGISTER_CAPACITY = 56
"""Largest capacity :func:`register_index_rnn` accepts (I + f <= 62 with room)."""


# ------------------------------------------------------------------ the protocol


def tainted_directions(spec: ModelSpec) -> set[int]:
    """Directions whose final value may depend on the current token directly
    (not only through the hidden states): embedded non-constant features, and
    whatever an MLP writes from a neuron reading such a direction.

    The RNN readouts ``x += C h`` add state-determined values; an MLP neuron
    with a nonzero input weight on a tainted direction taints every direction
    it writes. ``one`` (F_ONE) and unembedded directions start untainted.
    """
    tainted = {d for d, (kind, _, coef) in enumerate(spec.embedding)
               if kind not in (K.F_ZERO, K.F_ONE) and coef != 0}
    for layer in spec.rnn_layers:
        W1, W2 = layer.W1, layer.W2
        for m in range(W1.shape[0]):
            if any(W1[m, d] != 0 for d in tainted):
                tainted |= {d for d in range(W2.shape[0]) if W2[d, m] != 0}
    return tainted


def output_from_state(spec: ModelSpec) -> tuple[bool, str]:
    """(True, "") if the readout reads only state-determined directions, so that
    the next token is a function of the hidden states h alone; else (False, why)."""
    if spec.kind != "linear_rnn":
        return False, f"{spec.name} is a {spec.kind}, not a linear RNN"
    tainted = tainted_directions(spec)
    bad = sorted({spec.labels[d] for d, *_ in spec.readout if d in tainted})
    if bad:
        return False, f"{spec.name}: the readout reads token-dependent directions {bad}"
    return True, ""


@njit(cache=True)
def _final_states(tokens, I, f, mode, err, loc, W, out):
    """out[b] = the hidden states (Lr, S) after feeding row b of ``tokens`` from
    h = 0, by the model's own step kernel. Stops at the first error (loc = b, t)."""
    B, L = tokens.shape
    D = W.ekind.shape[0]
    Lr = W.rA.shape[0]
    S = W.rA.shape[1]
    state = np.zeros((Lr, S), dtype=np.int64)
    x = np.zeros(D, dtype=np.int64)
    Kc = np.zeros((0, 1, 1, 1), dtype=np.int64)
    Vc = np.zeros((0, 1, 1, 1), dtype=np.int64)
    scores = np.zeros(1, dtype=np.int64)
    wbuf = np.zeros(1, dtype=np.int64)
    attn_rec = np.zeros((1, 1, 1), dtype=np.int64)
    ws = np.zeros(K.workspace_size(D, S, W.rW1.shape[1], 0, W.aW1.shape[1]), dtype=np.int64)
    for b in range(B):
        for l in range(Lr):
            for s in range(S):
                state[l, s] = 0
        for t in range(L):
            K.model_step(tokens[b, t], t, I, f, mode, err, W, state, Kc, Kc, Vc,
                         x, scores, wbuf, np.bool_(False), attn_rec, np.bool_(False), ws)
            if err[E_CODE] != 0:
                loc[0] = b
                loc[1] = t
                return
        for l in range(Lr):
            for s in range(S):
                out[b, l, s] = state[l, s]


def _csr(mats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise nonzeros of each matrix of a stack (Lr, R, C), in the (row, column)
    order of the dense :func:`~constructions.machine.kernels.matvec`: indptr (Lr, R+1),
    indices and values (Lr, max nnz)."""
    Lr, R, C = mats.shape
    nnz = [int((mats[l] != 0).sum()) for l in range(Lr)]
    width = max(nnz + [1])
    indptr = np.zeros((Lr, R + 1), dtype=np.int64)
    idx = np.zeros((Lr, width), dtype=np.int64)
    val = np.zeros((Lr, width), dtype=np.int64)
    for l in range(Lr):
        k = 0
        for r in range(R):
            for c in range(C):
                if mats[l, r, c] != 0:
                    idx[l, k] = c
                    val[l, k] = mats[l, r, c]
                    k += 1
            indptr[l, r + 1] = k
    return indptr, idx, val


_LIM31 = np.int64(1) << 31


@njit(cache=True, inline='always')
def _mul(a, b, I, f, mode, err):
    """fx_mul with a fast path: when |a b| < 2^62 the product is formed in int64
    and rounded half to even exactly as fx_mul does; otherwise fx_mul itself."""
    if a == 0 or b == 0:
        return np.int64(0)
    x = a if a > 0 else -a
    y = b if b > 0 else -b
    if (x < _LIM31 and y < _LIM31) or float(x) * float(y) < 2.0 ** 61:
        if f == 0:
            return fit_value(a * b, I, f, mode, OP_MUL, err)
        p = x * y
        q = p >> f
        rem = p & ((np.int64(1) << f) - 1)
        half = np.int64(1) << (f - 1)
        if rem > half or (rem == half and (q & 1) == 1):
            q += 1
        neg = (a < 0) != (b < 0)
        return fit_value(-q if neg else q, I, f, mode, OP_MUL, err)
    return K.fx_mul(a, b, I, f, mode, err)


@njit(cache=True, inline='always')
def _csr_dot(indptr, idx, val, r, v, I, f, mode, err):
    acc = np.int64(0)
    for k in range(indptr[r], indptr[r + 1]):
        xv = v[idx[k]]
        if xv != 0:
            acc = K.fx_add(acc, _mul(val[k], xv, I, f, mode, err), I, f, mode, err)
    return acc


@njit(cache=True, parallel=True)
def _sparse_final_states(tokens, I, f, mode, err, loc, emb,
                         Ap, Ai, Av, Bp, Bi, Bv, Cp, Ci, Cv, W1p, W1i, W1v, rb1, W2p, W2i, W2v, rb2,
                         sizes, out, chunks, shared):
    """Rows split into ``chunks`` contiguous parts run in parallel (numba prange),
    each with its own statistics array; merged into ``err`` (the first error by
    row, the largest |raw|). ``shared[b]``: leading tokens row b has in common
    with row b - 1 (their states are reused, not recomputed)."""
    B = tokens.shape[0]
    errs = np.zeros((chunks, err.shape[0]), dtype=np.int64)
    locs = np.full((chunks, 2), -1, dtype=np.int64)
    for c in prange(chunks):
        lo = (B * c) // chunks
        hi = (B * (c + 1)) // chunks
        errs[c, E_WHERE] = -1
        _sparse_rows(tokens, lo, hi, I, f, mode, errs[c], locs[c], emb, Ap, Ai, Av, Bp, Bi, Bv, Cp, Ci, Cv,
                     W1p, W1i, W1v, rb1, W2p, W2i, W2v, rb2, sizes, out, shared)
    for c in range(chunks):
        if errs[c, E_MAXABS] > err[E_MAXABS]:
            err[E_MAXABS] = errs[c, E_MAXABS]
        err[E_SAT] += errs[c, E_SAT]
        if err[E_CODE] == 0 and errs[c, E_CODE] != 0:
            err[E_CODE] = errs[c, E_CODE]
            err[E_OP] = errs[c, E_OP]
            err[E_NEED] = errs[c, E_NEED]
            loc[0] = locs[c, 0]
            loc[1] = locs[c, 1]


@njit(cache=True)
def _sparse_rows(tokens, lo, hi, I, f, mode, err, loc, emb,
                 Ap, Ai, Av, Bp, Bi, Bv, Cp, Ci, Cv, W1p, W1i, W1v, rb1, W2p, W2i, W2v, rb2,
                 sizes, out, shared):
    """:func:`_final_states` for linear RNNs over the nonzeros only (the same
    operations, in the same order, as model_step's dense loops, which skip zero
    terms; the embedding from a per-token table): out[b] = h after row b, for
    rows lo..hi-1. A row starts from the stored state after the ``shared[b]``
    tokens it has in common with row b - 1 (the state after a token prefix is
    a function of that prefix), except the first row of the range."""
    L = tokens.shape[1]
    D = emb.shape[1]
    Lr = Ap.shape[0]
    S = Ap.shape[1] - 1
    M = W1p.shape[1] - 1
    h = np.zeros((Lr, S), dtype=np.int64)
    ah = np.zeros(S, dtype=np.int64)
    x = np.zeros(D, dtype=np.int64)
    hidden = np.zeros(M, dtype=np.int64)
    stack = np.zeros((L + 1, Lr, S), dtype=np.int64)   # stack[t] = h after t tokens of the row
    for b in range(lo, hi):
        t0 = shared[b] if b > lo else 0
        for l in range(Lr):
            for s in range(S):
                h[l, s] = stack[t0, l, s]
        for t in range(t0, L):
            tok = tokens[b, t]
            for d in range(D):
                x[d] = emb[tok, d]
            for l in range(Lr):
                hl = h[l]
                for s in range(sizes[l]):
                    ah[s] = K.fx_add(_csr_dot(Ap[l], Ai[l], Av[l], s, hl, I, f, mode, err),
                                     _csr_dot(Bp[l], Bi[l], Bv[l], s, x, I, f, mode, err), I, f, mode, err)
                for s in range(sizes[l]):
                    hl[s] = ah[s]
                for d in range(D):
                    if Cp[l, d + 1] > Cp[l, d]:
                        x[d] = K.fx_add(x[d], _csr_dot(Cp[l], Ci[l], Cv[l], d, hl, I, f, mode, err),
                                        I, f, mode, err)
                for m in range(M):
                    hidden[m] = K.fx_relu(K.fx_add(_csr_dot(W1p[l], W1i[l], W1v[l], m, x, I, f, mode, err),
                                                   rb1[l, m], I, f, mode, err))
                for d in range(D):
                    if W2p[l, d + 1] > W2p[l, d] or rb2[l, d] != 0:
                        x[d] = K.fx_add(x[d], K.fx_add(_csr_dot(W2p[l], W2i[l], W2v[l], d, hidden, I, f, mode, err),
                                                       rb2[l, d], I, f, mode, err), I, f, mode, err)
            if err[E_CODE] != 0:
                loc[0] = b
                loc[1] = t
                return
            for l in range(Lr):
                for s in range(S):
                    stack[t + 1, l, s] = h[l, s]
        for l in range(Lr):
            for s in range(S):
                out[b, l, s] = h[l, s]


class LinearRNNTarget:
    """A linear-RNN :class:`Model` whose next token depends on its hidden states
    only (checked by :func:`output_from_state`), as a protocol RNN.

    State: ``(h, last token)`` as in :class:`~rnngap.constructions.build.session.RNNAdapter`;
    ``state_key`` packs only h (every real entry as raw + 2^(I+f) in p bits), so
    ``state_bits`` = (numbers in h) * p, no token bits. ``batch_states(prefixes)``
    (int64 ``[B, L]``) returns the raws of h, int64 ``[B, numbers]``: rows equal
    iff state keys equal; it runs :func:`~constructions.machine.kernels.model_step`, the
    kernel every other run uses, in one numba call.
    """

    def __init__(self, model: Model):
        ok, why = output_from_state(model.spec)
        if not ok:
            raise ValueError(f"LinearRNNTarget needs a readout that depends on the state only: {why}")
        if model.implicit_vocab:
            raise ValueError(f"LinearRNNTarget embeds every token id: {model.name}'s vocabulary of "
                             f"{model.vocab.size:,} tokens is implicit")
        self.model = model
        self.name = model.name
        self._adapter = model.rnn()
        self.state_bits = model.resources.state_bits
        fmt = model.fmt
        self._p = fmt.total_bits
        self._off = 1 << (fmt.int_bits + fmt.frac_bits)
        self._index = [(l, s) for l, size in enumerate(model.rnn_sizes) for s in range(size)]
        self.sparse = True
        """``batch_states`` path: True = the sparse kernel (fast), False = model_step itself."""
        m = model
        # a linear RNN's embedding is a function of the token only: one row per token id,
        # computed by the kernels' own embed (its statistics go to the model)
        self._emb = np.zeros((m.vocab.size, m.spec.width), dtype=np.int64)
        err = new_err()
        for tok in m.candidates:
            K.embed(np.int64(tok), np.int64(0), m.weights.net, *m.fmt.args, err, self._emb[tok])
        m.absorb(err)
        check_err(err, m.fmt, f"{m.name} embedding")
        W = m.weights.net
        self._csr = (*_csr(W.rA), *_csr(W.rB), *_csr(W.rC), *_csr(W.rW1), W.rb1, *_csr(W.rW2), W.rb2,
                     np.array(m.rnn_sizes, dtype=np.int64))

    # -- the protocol
    def initial_state(self):
        return self._adapter.initial_state()

    def step(self, state, token: int):
        return self._adapter.step(state, token)

    def output(self, state) -> int:
        h, tok = state
        # the readout does not depend on the token (checked in __init__): a state
        # before any token reads out as if [BOS] had been read last
        return self._adapter.readout_from(h, tok if tok >= 0 else BOS)

    def state_key(self, state) -> bytes:
        h, _ = state
        acc, shift = 0, 0
        for l, s in self._index:
            acc |= (int(h[l][s]) + self._off) << shift
            shift += self._p
        return acc.to_bytes((self.state_bits + 7) // 8, "little")

    def key_of_raws(self, raws) -> bytes:
        """The ``state_key`` of a row of :meth:`batch_states`."""
        acc, shift = 0, 0
        for v in raws:
            acc |= (int(v) + self._off) << shift
            shift += self._p
        return acc.to_bytes((self.state_bits + 7) // 8, "little")

    def batch_states(self, prefixes: np.ndarray) -> np.ndarray:
        """h after each row of ``prefixes`` (int64 ``[B, L]``, fed from h = 0) as
        int64 raws ``[B, numbers]``."""
        m = self.model
        arr = np.asarray(prefixes)
        if arr.ndim != 2:
            raise ValueError(f"prefixes must be 2-D [B, L], got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"prefixes must hold integer token ids, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.int64)
        if arr.size and not np.isin(arr, m.candidates).all():
            b, t = map(int, np.argwhere(~np.isin(arr, m.candidates))[0])
            raise ValueError(f"{m.name}: prefix {b} token id {int(arr[b, t])} at position {t} is not in "
                             f"the vocabulary (size {m.vocab.size})")
        out = np.zeros((arr.shape[0], m.weights.net.rA.shape[0], m.weights.net.rA.shape[1]), dtype=np.int64)
        err = new_err()
        loc = np.full(2, -1, dtype=np.int64)
        if self.sparse:
            # rows in lexicographic order share their longest common prefixes
            order = np.lexsort(arr.T[::-1]) if arr.shape[1] else np.arange(arr.shape[0])
            srt = np.ascontiguousarray(arr[order])
            shared = np.zeros(arr.shape[0], dtype=np.int64)
            if arr.shape[0] > 1 and arr.shape[1]:
                neq = srt[1:] != srt[:-1]
                shared[1:] = np.where(neq.any(axis=1), neq.argmax(axis=1), arr.shape[1])
            chunks = max(1, min(get_num_threads(), arr.shape[0] // 1024))
            sorted_out = np.zeros_like(out)
            _sparse_final_states(srt, *m.fmt.args, err, loc, self._emb, *self._csr, sorted_out, chunks, shared)
            out[order] = sorted_out
            if loc[0] >= 0:
                loc[0] = order[loc[0]]
        else:
            _final_states(arr, *m.fmt.args, err, loc, m.weights.net, out)
        m.absorb(err)
        check_err(err, m.fmt, f"{m.name}, batch_states prefix {int(loc[0])}")
        ls = np.array([l for l, _ in self._index], dtype=np.int64)
        ss = np.array([s for _, s in self._index], dtype=np.int64)
        return np.ascontiguousarray(out[:, ls, ss])


# ------------------------------------------------------------- the register RNN


@dataclass(frozen=True)
class RegisterDeclared:
    """Resources of :func:`register_index_rnn` for capacity c (a target to break:
    its precision grows with c on purpose)."""

    capacity: int
    max_number: int
    frac_bits: int
    int_bits: int
    p0: int

    @property
    def format(self) -> FixedFormat:
        return FixedFormat(self.int_bits, self.frac_bits)

    @property
    def precision_bits(self) -> int:
        return self.int_bits + self.frac_bits + 1

    @property
    def state_numbers(self) -> int:
        return 6

    @property
    def state_bits(self) -> int:
        return self.state_numbers * self.precision_bits

    def cot_bound(self, n: int) -> int:
        """CoT length i - 1 <= n - 1."""
        return max(0, n - 1)


def register_declared(capacity: int, max_number: int = 64, frac_bits: int = REGISTER_FRAC_BITS
                      ) -> RegisterDeclared:
    """Derive P0 = 2^(c - f) and the integer bits from every magnitude the model
    computes (asserted, no slack beyond them):

    * step input 2^f (r - g_q) + 1 with |r - g_q| <= P0: 2^f P0 + 1;
    * reg_in / reg_out pre-activations >= -2 P0;
    * query_in pre-activation tau - 1 - M(1 - a) >= -32 - M, M = max_number + 1;
    * done's hat input q - 1 - k +- 1 with q, k <= max_number: 2 max_number + 2;
    * the embedding coefficient P0 and the readout logits (<= 2).
    """
    c, f = int(capacity), int(frac_bits)
    if f < 1:
        raise MarginError(f"register RNN: frac_bits must be >= 1 (the weight 1/2 lies on the grid), got {f}")
    if not f <= c <= MAX_REGISTER_CAPACITY:
        raise MarginError(f"register RNN: capacity must be in {f}..{MAX_REGISTER_CAPACITY} (capacity >= "
                          f"frac_bits = {f}), got {c}")
    if max_number < 2:
        raise ValueError(f"register RNN: max_number must be >= 2, got {max_number}")
    p0 = 1 << (c - f)
    need = _bounds.register_int_bits(_bounds.INT, c, int(max_number), f)   # written once in bounds.py
    return RegisterDeclared(c, int(max_number), f, need, p0)


def register_index_rnn(capacity: int, max_number: int = 64, frac_bits: int = REGISTER_FRAC_BITS,
                       fmt: FixedFormat | None = None) -> Model:
    """The Index register RNN of capacity c (module docstring), in the declared
    format (or ``fmt``: the same weights at other bits; may raise if a weight is
    off the grid). ``max_number``: the largest number token (queries i <= it)."""
    dec = register_declared(capacity, max_number, frac_bits)
    fmt = fmt or dec.format
    p0, f, c = dec.p0, dec.frac_bits, dec.capacity
    # the last stored weight w_c = P0 2^-c = 2^-f is on the grid; w_(c+1) rounds to 0
    if Fraction(p0, 1 << c) != Fraction(1, 1 << f):
        raise MarginError(f"register Index RNN: P0 2^-c = {Fraction(p0, 1 << c)} is not the grid step 2^-{f} "
                          f"(capacity / P0 mismatch)")
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tau", K.F_TOK)
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.embedded("is_one", K.F_IS_TOKEN, number_token(1))
    s.embedded("is_tilde", K.F_IS_TOKEN, TILDE)
    s.embedded("is_dash", K.F_IS_TOKEN, DASH)
    for lab in ("geo", "geo_q", "after_query", "cot_count", "reg_in", "reg_out", "query_in",
                "reg", "query_idx", "top", "done"):
        s.hidden(lab)
    b = Builder(f"register-index(c={c})", "linear_rnn", Vocab(max_number), s, claim="T4.6-low")
    half = Fraction(1, 2)
    M = max_number + 1
    mlp1 = [
        # x_j w_j at data position j (a = 0), 0 at [BOS] (g = P0, bit 0) and after the query
        Neuron({"geo": 1, "is_one": p0, "one": -p0, "after_query": -p0}, 0, {"reg_in": 1}),
        # w_k = 2 g_q when the k-th CoT token is '~' (g_q <= P0, so 0 otherwise)
        Neuron({"geo_q": 2, "is_tilde": 2 * p0, "one": -2 * p0}, 0, {"reg_out": 1}),
        # the query number i (tau - 1) at the first number after [QUERY]; CoT tokens are specials
        Neuron({"tau": 1, "one": -1 - M, "after_query": M}, 0, {"query_in": 1}),
    ]
    b.rnn_layer(["g", "g_q", "a", "k"],
                A={("g", "g"): half, ("g_q", "g_q"): half, ("a", "a"): 1, ("k", "k"): 1},
                B={("g", "is_bos"): p0, ("g_q", "is_query"): p0, ("a", "is_query"): 1,
                   ("k", "is_tilde"): 1, ("k", "is_dash"): 1},
                C={("geo", "g"): 1, ("geo_q", "g_q"): 1, ("after_query", "a"): 1, ("cot_count", "k"): 1},
                mlp=mlp1, name="clock")
    step = Fraction(1, 1 << f)
    mlp2 = (step_neurons({"reg": 1, "geo_q": -1}, -step, 0, "top")
            + equality_neurons({"query_idx": 1}, {"one": 1, "cot_count": 1}, "done"))
    b.rnn_layer(["r", "q"], A={("r", "r"): 1, ("q", "q"): 1},
                B={("r", "reg_in"): 1, ("r", "reg_out"): -1, ("q", "query_in"): 1},
                C={("reg", "r"): 1, ("query_idx", "q"): 1}, mlp=mlp2, name="register")
    n0, n1 = number_token(0), number_token(1)
    b.readout([("top", K.F_IS_TOKEN, n1, 1), ("done", K.F_IS_TOKEN, n1, 1),
               ("one", K.F_IS_TOKEN, n0, 1), ("top", K.F_IS_TOKEN, n0, -1), ("done", K.F_IS_TOKEN, n0, 1),
               ("top", K.F_IS_TOKEN, TILDE, 1), ("one", K.F_IS_TOKEN, TILDE, 1), ("done", K.F_IS_TOKEN, TILDE, -1),
               ("one", K.F_IS_TOKEN, DASH, 2), ("top", K.F_IS_TOKEN, DASH, -1), ("done", K.F_IS_TOKEN, DASH, -1)])
    b.notes.update(capacity=c, p0=p0, declared=dec)
    b.margins["register"] = {"capacity": c, "P0": p0, "last_weight": float(step), "step_width": float(step)}
    return b.build(fmt)


def register_target(capacity: int, max_number: int = 64, frac_bits: int = REGISTER_FRAC_BITS
                    ) -> LinearRNNTarget:
    """:func:`register_index_rnn` wrapped as a protocol RNN."""
    return LinearRNNTarget(register_index_rnn(capacity, max_number, frac_bits))


# ------------------------------------------------------------- random linear RNNs

RANDOM_A_STEPS = (Fraction(-1, 4), Fraction(-1, 8), Fraction(0), Fraction(1, 8), Fraction(1, 4))
RANDOM_B_STEPS = tuple(Fraction(k, 4) for k in range(-4, 5))


def random_linear_rnn(state_numbers: int, frac_bits: int, seed: int, max_number: int = 64) -> Model:
    """A seeded random one-layer linear RNN: h_t = A h_{t-1} + B x_t over the
    features (one, [tok = BOS], [tok = 1], [tok is a number], [tok = QUERY]),
    out = c . h; answers number 1 if out > 0 else number 0.

    Weights: A entries from {0, +-1/8, +-1/4} with every row's absolute sum
    <= 1/2 (rows rescaled by halving until it holds), B, c entries from
    {-1, -3/4, .., 1}: |h| <= 2 max_row |B| (1 + rounding), all dyadic on a grid
    of 2^-3, so ``frac_bits`` >= 3. I is derived from that bound.
    Readout: logit(0) = 4, logit(1) = 4 + out, others 0 (always a number 0 / 1).
    """
    S, f = int(state_numbers), int(frac_bits)
    if not 1 <= S <= 16:
        raise ValueError(f"random linear RNN: state_numbers must be in 1..16, got {S}")
    if not 3 <= f <= 40:
        raise ValueError(f"random linear RNN: frac_bits must be in 3..40 (weights are multiples of 1/8), got {f}")
    rng = np.random.default_rng(seed)
    feats = ["one", "is_bos", "is_one", "is_num", "is_query"]
    A = [[RANDOM_A_STEPS[int(v)] for v in rng.integers(0, len(RANDOM_A_STEPS), S)] for _ in range(S)]
    for row in A:
        while sum(abs(v) for v in row) > Fraction(1, 2):
            row[:] = [v / 2 if (v / 2) * 8 == int((v / 2) * 8) else Fraction(0) for v in row]
    Bm = [[RANDOM_B_STEPS[int(v)] for v in rng.integers(0, len(RANDOM_B_STEPS), len(feats))] for _ in range(S)]
    c = [RANDOM_B_STEPS[int(v)] for v in rng.integers(0, len(RANDOM_B_STEPS), S)]
    if all(v == 0 for v in c):
        c[0] = Fraction(1)
    # |h_t| <= b + a |h_{t-1}| + S 2^-(f+1) (rounded products) with a <= 1/2
    bmax = max(sum(abs(v) for v in row) for row in Bm) + Fraction(S, 1 << (f + 1))
    hmax = 2 * bmax
    outmax = sum(abs(v) for v in c) * hmax + Fraction(S, 1 << (f + 1))
    I = max(bits_for(hmax), bits_for(4 + outmax), bits_for(max(abs(v) for row in Bm for v in row)), 1)
    fmt = FixedFormat(I, f)
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_one", K.F_IS_TOKEN, number_token(1))
    s.embedded("is_num", K.F_IS_NUM)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    s.hidden("out")
    names = [f"h{j}" for j in range(S)]
    b = Builder(f"random-linear-rnn(S={S},f={f},seed={seed})", "linear_rnn", Vocab(max_number), s,
                claim="T4.6-low")
    b.rnn_layer(names,
                A={(names[r], names[q]): A[r][q] for r in range(S) for q in range(S) if A[r][q] != 0},
                B={(names[r], feats[q]): Bm[r][q] for r in range(S) for q in range(len(feats)) if Bm[r][q] != 0},
                C={("out", names[r]): c[r] for r in range(S) if c[r] != 0}, name="random")
    n0, n1 = number_token(0), number_token(1)
    b.readout([("one", K.F_IS_TOKEN, n0, 4), ("one", K.F_IS_TOKEN, n1, 4), ("out", K.F_IS_TOKEN, n1, 1)])
    b.notes.update(seed=seed, bound_h=hmax)
    return b.build(fmt)


def random_target(state_numbers: int, frac_bits: int, seed: int, max_number: int = 64) -> LinearRNNTarget:
    return LinearRNNTarget(random_linear_rnn(state_numbers, frac_bits, seed, max_number))


def decode_state(target: LinearRNNTarget, state: Any) -> dict[str, Fraction]:
    """The hidden state as exact values by state label (layer-qualified)."""
    h, _ = state
    m = target.model
    out = {}
    for l, layer in enumerate(m.spec.rnn_layers):
        for s_idx, lab in enumerate(layer.state_labels):
            out[lab if lab not in out else f"{lab}@{l}"] = m.fmt.decode(int(h[l][s_idx]))
    return out


# ------------------------------------------------------- IsTree (claim T4.7-low)


class IsTreeRegisterRNN:
    """The register RNN reading the IsTree-format hub-gadget instances of
    ``lowerbounds.reductions.ISTREE`` (claim T4.7-low): a finite parser in front
    of :func:`register_index_rnn`, i.e. the register RNN composed with the
    reduction.

    Input ``[BOS] (j+1) - x_j .. (n+2) - (i+1) (n+2) - 1 [EOS]``. The parser
    tracks the position e in the current edge (0, 1, 2) and a mode (0 data
    edges, 1 inside the suffix, 2 after [EOS]). The third token of a data edge
    is the hub, a number 0 / 1, fed to the register as the data bit; the first
    edge whose third token is a number v >= 2 is the query edge ``w - v_i``: the
    register receives ``[QUERY] (v - 1)`` (i = v - 1); the rest up to [EOS] is
    skipped; after [EOS] the register's CoT tokens are passed through both ways
    and its answer x_i is mapped to [TRUE] if x_i = 0 (the hub-b star takes w:
    a tree) else [FALSE]. Correct on every reduced instance with n <= c.

    State ``(register state, mode, e)``; ``state_key`` = the register's key and
    one byte ``mode + 4 e``: ``state_bits`` = register bits + 8.
    ``batch_states`` returns the register's h raws and the parser fields as
    int64 columns.
    """

    def __init__(self, capacity: int, max_number: int = 64, frac_bits: int = REGISTER_FRAC_BITS):
        self.inner = register_target(capacity, max_number, frac_bits)
        self.capacity = int(capacity)
        self.name = f"istree-register(c={capacity})"
        self.state_bits = self.inner.state_bits + 8

    def initial_state(self):
        return (self.inner.initial_state(), 0, 0)

    def step(self, state, token: int):
        inner, mode, e = state
        token = int(token)
        if token == BOS and mode == 0 and e == 0:
            return (self.inner.step(inner, BOS), 0, 0)
        if mode == 0:
            if e < 2:
                return (inner, 0, e + 1)
            v = token - number_token(0)
            if v < 0:
                raise ValueError(f"{self.name}: the third token of an edge must be a number, got {token}")
            if v <= 1:
                return (self.inner.step(inner, token), 0, 0)
            inner = self.inner.step(inner, QUERY)
            return (self.inner.step(inner, number_token(v - 1)), 1, 0)
        if mode == 1:
            return (inner, 2, 0) if token == 1 else (inner, 1, 0)   # 1 = [EOS]
        return (self.inner.step(inner, token), 2, 0)

    def output(self, state) -> int:
        inner, _mode, _e = state
        tok = self.inner.output(inner)
        if tok == number_token(0):
            return TRUE
        if tok == number_token(1):
            return FALSE
        return tok

    def state_key(self, state) -> bytes:
        inner, mode, e = state
        return self.inner.state_key(inner) + bytes([mode + 4 * e])

    def batch_states(self, prefixes: np.ndarray) -> np.ndarray:
        """Register h raws then (mode, e) per row, int64 ``[B, numbers + 2]``."""
        arr = np.asarray(prefixes, dtype=np.int64)
        if arr.ndim != 2:
            raise ValueError(f"prefixes must be 2-D [B, L], got shape {arr.shape}")
        B, L = arr.shape
        hubs = arr[:, 3:L:3] if L >= 4 else arr[:, :0]
        gadget = (L - 1) % 3 == 0 and (arr[:, 0] == BOS).all() and \
            ((hubs == number_token(0)) | (hubs == number_token(1))).all() and \
            (arr[:, 2:L:3] == DASH).all() and (arr[:, 1:L:3] >= number_token(2)).all()
        if gadget:   # data edges only: parser at (mode 0, e 0), the register saw [BOS] and the hubs
            raws = self.inner.batch_states(np.concatenate([arr[:, :1], hubs], axis=1))
            return np.concatenate([raws, np.zeros((B, 2), dtype=np.int64)], axis=1)
        rows = []
        for row in arr.tolist():
            s = self.initial_state()
            for t in row:
                s = self.step(s, t)
            (h, _tok), mode, e = s
            rows.append([int(h[l][q]) for l, q in self.inner._index] + [mode, e])
        return np.asarray(rows, dtype=np.int64).reshape(B, len(self.inner._index) + 2)


# --------------------------------------- parsers for the Index reductions' formats


class ReductionFormatParser:
    """A finite-state transducer from the token format of an Index reduction
    (``lowerbounds.reductions``) to the Index format ``[BOS] x_1..x_n [QUERY] i``
    (claims T4.6-low, T4.7-low): composed with an Index RNN it gives an RNN for
    the reduction's instances (:class:`ParsedIndexRNN`).

    ``step(state, token) -> (state, tokens for the Index RNN)``; states are the
    ints ``0..n_states-1`` (``bits = ceil(log2 n_states)``). Layouts (``k`` = the
    number token k)::

        index      [BOS] x_1..x_n [QUERY] i               identity (1 state)
        keyvalue   [BOS] K_1 x_1 .. K_n x_n [QUERY] K_i   K_j = (j+1) repeated c-1 times:
                   states D_e (e = tokens of the current block read, e < c): the
                   c-th token of a block is the value x_j, passed on, the keys are
                   skipped; [QUERY] is passed on; Q_k (k < c-1): the first query
                   token v gives i = v - 1, the other c-2 copies are skipped; DONE:
                   everything passed (the RNN's own CoT fed back). 2c states.
        counting   [BOS] y_1..y_n [QUERY] q t             y_j = j or 0: the bit [y_j != 0]
                   passed on; q passed as i; t skipped (t = 0 in the reduction).
                   States DATA, Q, T, DONE.
        istree     [BOS] (j+1) - x_j .. w - v_i w - 1 [EOS]   states E_0..E_2 (token of the
                   edge), SKIP, DONE: the third token of a data edge (a hub, 0 / 1) is the
                   bit x_j; the first edge ending in v >= 2 is Bob's ``w - v_i``: [QUERY]
                   and i = v - 1 are passed on; the rest up to [EOS] is skipped; after
                   it, everything passed. The answer x_i maps to [TRUE] if 0 (a tree),
                   [FALSE] if 1.

    Only the reduction's instances are promised to parse as intended: the keys
    of AR / c-gram are not compared, only counted (the family has them in order).
    """

    LAYOUTS = ("index", "keyvalue", "counting", "istree")

    def __init__(self, layout: str, c: int = 2):
        if layout not in self.LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; known: {self.LAYOUTS}")
        self.layout = layout
        self.c = int(c)
        if layout == "keyvalue" and self.c < 2:
            raise ValueError(f"keyvalue layout needs c >= 2, got {c}")
        self.n_states = {"index": 1, "keyvalue": 2 * self.c, "counting": 4, "istree": 5}[layout]
        self.bits = (self.n_states - 1).bit_length()
        self.name = layout if layout != "keyvalue" else f"keyvalue(c={self.c})"

    def step(self, state: int, token: int) -> tuple[int, tuple[int, ...]]:
        t = int(token)
        num = t - NUMBER_BASE if t >= NUMBER_BASE else None
        if self.layout == "index":
            return 0, (t,)
        if self.layout == "keyvalue":
            c, done = self.c, 2 * self.c - 1
            if state == done:
                return state, (t,)
            if state < c:                                    # D_e
                if t == QUERY:
                    return c, (t,)
                if t == BOS:
                    return state, (t,)
                if num is None:
                    return state, ()
                return ((state + 1, ()) if state < c - 1 else (0, (t,)))
            k = state - c                                    # Q_k
            nxt = state + 1 if k < c - 2 else done
            if k == 0:
                return nxt, ((number_token(max(num - 1, 0)),) if num is not None else ())
            return nxt, ()
        if self.layout == "counting":
            if state == 3:
                return 3, (t,)
            if state == 0:
                if t == QUERY:
                    return 1, (t,)
                if num is None:
                    return 0, (t,)
                return 0, (number_token(1 if num != 0 else 0),)
            if state == 1:
                return 2, ((t,) if num is not None else ())
            return 3, ()
        # istree
        if state == 4:
            return 4, (t,)
        if state == 3:
            return (4, ()) if t == EOS else (3, ())
        if state == 0 and t == BOS:
            return 0, (t,)
        if state < 2:
            return state + 1, ()
        if num is None:
            return 0, ()
        if num <= 1:
            return 0, (t,)
        return 3, (QUERY, number_token(num - 1))

    def answer(self, token: int) -> int:
        """The task's answer token for the Index RNN's token (istree: number 0 ->
        [TRUE], number 1 -> [FALSE]; others unchanged)."""
        if self.layout == "istree":
            if token == number_token(0):
                return TRUE
            if token == number_token(1):
                return FALSE
        return int(token)


class ParsedIndexRNN:
    """An Index RNN (any protocol object) behind a :class:`ReductionFormatParser`:
    an RNN for the instances of an Index reduction (claims T4.6-low, T4.7-low).

    State ``(inner state, parser state)``; ``state_bits`` = inner bits + parser
    bits; ``state_key`` packs the inner key (as an integer below
    2^(inner bits)) and the parser state above it. The next token is the
    parser's map of the inner RNN's next token; the composed RNN generates the
    inner's CoT (fed back through the parser, which passes it on after the
    query). Correct on the reduction's instances with n <= the inner capacity.

    >>> from rnngap.constructions.build.protocol import run_rnn
    >>> r = ParsedIndexRNN(register_target(3, max_number=8), ReductionFormatParser("keyvalue", 2))
    >>> run_rnn(r, [0, 34, 33, 35, 32, 36, 33, 9, 35], [32, 33], max_cot=3).answer   # x = 101, i = 2
    32
    """

    def __init__(self, inner: Any, parser: ReductionFormatParser, capacity: int | None = None):
        self.inner = inner
        self.parser = parser
        self.inner_bits = int(inner.state_bits)
        self.state_bits = self.inner_bits + parser.bits
        self.capacity = capacity
        self.name = f"{parser.name}-parser + {getattr(inner, 'name', type(inner).__name__)}"

    def initial_state(self):
        return (self.inner.initial_state(), 0)

    def step(self, state, token: int):
        inner, ps = state
        ps, out = self.parser.step(ps, token)
        for t in out:
            inner = self.inner.step(inner, t)
        return (inner, ps)

    def output(self, state) -> int:
        inner, _ = state
        return self.parser.answer(self.inner.output(inner))

    def state_key(self, state) -> bytes:
        inner, ps = state
        key = int.from_bytes(self.inner.state_key(inner), "little")
        if key >> self.inner_bits:
            raise ValueError(f"{self.name}: the inner key {key} does not fit its {self.inner_bits} state bits")
        return (key | (ps << self.inner_bits)).to_bytes((self.state_bits + 7) // 8, "little")


def parsed_register_target(layout: str, capacity: int, c: int = 2, max_number: int = 64) -> ParsedIndexRNN:
    """:func:`register_target` of capacity c behind the parser of ``layout``."""
    return ParsedIndexRNN(register_target(capacity, max_number), ReductionFormatParser(layout, c), capacity)
