"""Sessions of a built model: incremental decoding with a KV cache, and a linear RNN in the RNN protocol.

:class:`Session` feeds tokens one at a time or in chunks and reads the next
token; :class:`RNNAdapter` shows a linear-RNN model as the protocol of
constructions/build/protocol.py (the lower bounds' view: state, step, output).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import attention as AT
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine import wide_attention as WA
from rnngap.constructions.machine.fixedpoint import (
    E_SAT, check_err, max_abs_raw, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat


def zeros_for(fmt: FixedFormat, *shape: int) -> np.ndarray:
    """Raws of zero: int64 of ``shape``, or (two-limb storage) ``shape + (2,)``."""
    return np.zeros(shape + ((2,) if fmt.wide else ()), np.int64)


class Session:
    """Incremental decoding of ``model`` (a :class:`~rnngap.constructions.build.model.Model`):
    feed tokens one at a time or in chunks; a generated token costs O(context)
    thanks to the KV cache (attention layers) and O(1) for RNN layers."""

    def __init__(self, model, capacity: int = 64, record: bool = False):
        self.model = model
        self.position = 0
        self.tokens: list[int] = []
        self.record = record
        m = model
        W = m.weights.net
        La, H, Dh = W.aWQ.shape[0], W.aWQ.shape[1], W.aWQ.shape[2]
        # pruned attention (attention.attention_scores; wide_attention.w_scores_pruned on two
        # limbs) needs the block bounds and, on int64, room behind the scores; record
        # mode keeps every score (the full path)
        self._prune = La > 0 and not record
        self._wide = m.fmt.wide
        cap = AT.cache_capacity(capacity, self._prune and not self._wide)
        if self._wide:            # the two-limb executor's cache: row-major keys, limbs last
            self.Kc = np.zeros((La, H, cap, Dh, 2), np.int64)
            self.Km = np.zeros((0,), np.int64)
            self.Vc = np.zeros((La, H, cap, Dh, 2), np.int64)
            self._pr = WA.prune_arrays(La, H, cap, Dh, self._prune) + WA.index_arrays(La, H, cap, Dh, self._prune)
        else:
            self.Kc = np.zeros((La, H, Dh, cap), np.int64)      # keys column-major (kernels)
            self.Km = np.zeros((La, H, AT.cache_rows(Dh, self._prune), cap), np.int64)   # column (+ block) bounds
            self.Vc = np.zeros((La, H, cap, Dh), np.int64)
        self.state = zeros_for(m.fmt, W.rA.shape[0], W.rA.shape[1])
        self.x = zeros_for(m.fmt, m.spec.width)
        self.scores = zeros_for(m.fmt, cap) if self._wide else np.zeros(AT.scores_length(cap, self._prune), np.int64)
        limbs = (2,) if self._wide else ()    # two-limb weights: up to 2^f, f up to 125
        self.wbuf = np.zeros((cap,) + limbs, np.int64)
        self.attn = np.zeros((La, H, cap if record else 1) + limbs, np.int64)
        self.err = WD.new_wide_err() if self._wide else new_err()
        self._sat_absorbed = 0                 # saturations of self.err already added to the model
        self._one = np.zeros(1, np.int64)      # feed_one's token

    @property
    def capacity(self) -> int:
        return self.Kc.shape[2 if self._wide else 3]

    def _grow(self, need: int) -> None:
        cap = self.capacity
        if need <= cap:
            return
        new = max(need, 2 * cap)
        pad = new - cap
        if self._wide:
            def grow(a, size):     # axis 2 to ``size`` entries, the old ones kept
                return np.concatenate([a, np.zeros(a.shape[:2] + (size - a.shape[2],) + a.shape[3:], a.dtype)], axis=2)
            self.Kc, self.Vc = grow(self.Kc, new), grow(self.Vc, new)
            if self._prune:       # the bounds and the index kept, the scratch new
                KmE, LB, SB = self._pr[:3]
                Ksh, Kix, ist = self._pr[8:11]
                W = self.model.weights.net
                La, H, Dh = W.aWQ.shape[0], W.aWQ.shape[1], W.aWQ.shape[2]
                fresh = WA.prune_arrays(La, H, new, Dh, True)
                ix = WA.index_arrays(La, H, new, Dh, True)
                nl, ns = WA.prune_sizes(new)

                def grow3(a, size):   # the index's columns (axis 3), when it has any
                    if a.shape[3] >= size or a.shape[3] == 0:
                        return a
                    return np.concatenate([a, np.zeros(a.shape[:3] + (size - a.shape[3],), a.dtype)], axis=3)
                self._pr = ((grow(KmE, new), grow(LB, nl), grow(SB, ns)) + fresh[3:]
                            + (grow3(Ksh, ix[0].shape[3]), grow3(Kix, ix[1].shape[3]), ist) + ix[3:])
            self.scores = np.zeros((new, 2), np.int64)
            self.wbuf = np.zeros((new, 2), np.int64)
            if self.record:
                self.attn = np.zeros(self.attn.shape[:2] + (new, 2), np.int64)
            return
        self.Kc = np.concatenate([self.Kc, np.zeros(self.Kc.shape[:3] + (pad,), np.int64)], axis=3)
        self.Km = np.concatenate([self.Km, np.zeros(self.Km.shape[:3] + (pad,), np.int64)], axis=3)
        self.Vc = np.concatenate([self.Vc, np.zeros(self.Vc.shape[:2] + (pad,) + self.Vc.shape[3:], np.int64)], axis=2)
        self.scores = np.zeros(AT.scores_length(new, self._prune), np.int64)
        self.wbuf = np.zeros(new, np.int64)
        if self.record:
            self.attn = np.zeros(self.attn.shape[:2] + (new,), np.int64)

    def feed(self, tokens: Iterable[int] | int) -> None:
        if isinstance(tokens, (int, np.integer)):
            tokens = [int(tokens)]
        arr = self.model.validate_tokens(list(tokens) if not isinstance(tokens, np.ndarray) else tokens)
        if arr.size == 0:
            return
        self.model.check_length(self.position + arr.size)
        self._grow(self.position + arr.size)
        m = self.model
        err = self.err
        t = self._feed(arr)
        fed = t - self.position
        self.tokens.extend(int(v) for v in arr[:fed])
        self.position = t
        self._absorb()
        m.resources.tokens_processed += fed
        check_err(err, m.fmt, m.name)

    def feed_one(self, token: int) -> None:
        """:meth:`feed` of one token id (the generation driver's per-token call):
        the same validation, kernel and bookkeeping without building arrays."""
        token = int(token)
        m = self.model
        if not m.vocab.contains(token):
            m.vocab.validate([token], what=f"{m.name}: input")     # raises, with the usual message
        m.check_length(self.position + 1)
        self._grow(self.position + 1)
        one = self._one
        one[0] = token
        err = self.err
        t = self._feed(one)
        if t > self.position:
            self.tokens.append(token)
            self.position = t
            m.resources.tokens_processed += 1
        self._absorb()
        check_err(err, m.fmt, m.name)

    def _feed(self, arr: np.ndarray) -> int:
        """The kernel call of :meth:`feed` / :meth:`feed_one` (validated tokens; the
        flat entry points: one numba dispatch per call, ~1 us cheaper than a tuple
        argument). An attention-free model (``model.rnn_sparse``) without attention
        recording runs its RNN layers by rows: the same numbers as the dense step."""
        m = self.model
        if self._wide:
            return WX.w_feed(arr, self.position, *m.fmt.args, self.err, *m.weights.net, self.state, self.Kc, self.Vc,
                             self.x, self.scores, self.wbuf, self.record, self.attn, self._prune, *self._pr)
        if m.rnn_sparse is not None and not self.record:
            e = m.weights.net
            return BT.feed_rnn_sparse(arr, self.position, *m.fmt.args, self.err, e.ekind, e.eparam, e.ecoef,
                                     *m.rnn_sparse, self.state, self.x)
        return K.feed_flat(arr, self.position, *m.fmt.args, self.err, *m.weights.net, self.state,
                           self.Kc, self.Km, self.Vc, self.x, self.scores, self.wbuf, self.record, self.attn)

    def _absorb(self) -> None:
        """Add this session's statistics to the model's: the largest |raw| so far
        and the saturations since the last call (``err`` is cumulative per session)."""
        sat = int(self.err[E_SAT])
        self.model.absorb_values(max_abs_raw(self.err), sat - self._sat_absorbed)
        self._sat_absorbed = sat

    def next_token(self) -> int:
        if self.position == 0:
            raise ValueError(f"{self.model.name}: feed at least one token before asking for the next one")
        m = self.model
        if self._wide:
            ro = m.weights.readout
            tok = WX.w_read(self.x, m.implicit_vocab, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef,
                            ro.candidates, ro.nearest, *m.fmt.args, self.err)
        elif m.implicit_vocab:       # no candidate list: the nearest-code readout
            tok = RO.nearest_code_readout(self.x, m.weights.readout, *m.fmt.args, self.err)
        else:
            tok = RO.readout_flat(self.x, *m.weights.readout, *m.fmt.args, self.err)
        self._absorb()
        check_err(self.err, m.fmt, f"{m.name} readout")
        return int(tok)

    def residual(self) -> dict[str, Fraction]:
        """The current residual stream, by direction label, as exact values."""
        return {lab: self.model.fmt.decode(v) for lab, v in zip(self.model.labels, self.x)}   # v: limbs if wide

    def attention(self) -> np.ndarray:
        """Attention weights (layer, head, position) at the last fed position, as floats."""
        if not self.record:
            raise ValueError("create the session with record=True to see attention weights")
        a = self.attn[:, :, : self.position]
        if self._wide:                          # the limbs (hi, lo): hi 2^63 + lo
            a = a[..., 0].astype(np.float64) * 2.0 ** 63 + a[..., 1].astype(np.float64)
        return a.astype(np.float64) / 2.0 ** self.model.fmt.frac_bits

    def kv_cache_bits(self) -> int:
        return self.model.resources.kv_bits(self.position)


class RNNAdapter:
    """A linear-RNN model in the general RNN protocol (constructions/build/protocol.py).

    The protocol state is (h of every layer, last token): the readout sees the
    last layer's residual, which is a function of h_t and token_t, so the last
    token is part of the memory. ``state_bits`` = (#h numbers) * p +
    ceil(log2 (|V| + 1)) (token ids and "no token yet").
    """

    def __init__(self, model):
        self.model = model
        self._tok_bits = max(1, math.ceil(math.log2(model.vocab.size + 1)))
        self.state_bits = model.resources.state_bits + self._tok_bits
        self._sess = Session(model, capacity=1)

    def initial_state(self):
        return (np.zeros_like(self._sess.state), -1)

    def _check_state(self, state):
        if not (isinstance(state, tuple) and len(state) == 2):
            raise TypeError(f"{self.model.name}: a state is a pair (h, last token), got {type(state).__name__}")
        h, tok = state
        h = np.asarray(h)
        if h.shape != self._sess.state.shape or not np.issubdtype(h.dtype, np.integer):
            raise ValueError(f"{self.model.name}: state h must be an integer array of shape "
                             f"{self._sess.state.shape}, got {h.dtype} {h.shape}")
        if isinstance(tok, bool) or not isinstance(tok, (int, np.integer)):
            raise TypeError(f"{self.model.name}: the state's last token must be an int, got {tok!r}")
        return h, int(tok)

    def step(self, state, token: int):
        h, _ = self._check_state(state)
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"{self.model.name}: a token is an integer id, got {token!r}")
        s = self._sess
        s.state[...] = h
        s.position = 0
        s.tokens = []
        s.feed([int(token)])
        return (s.state.copy(), int(token))

    def output(self, state) -> int:
        h, tok = self._check_state(state)
        if tok < 0:
            raise ValueError("the RNN has read no token yet")
        s = self._sess
        # recompute the residual of the last step from (h_t, token_t): the layers only
        # read h_t, so re-running the step from h_{t-1} is not needed; we re-run with
        # the stored state and restore it.
        return self.readout_from(h, tok)

    def readout_from(self, h, tok) -> int:
        """The next token of the state (h, last token ``tok``), without touching the session."""
        m = self.model
        s = self._sess
        x = np.zeros(m.spec.width, np.int64)
        err = new_err()
        K.embed(np.int64(tok), np.int64(0), m.weights.net, *m.fmt.args, err, x)
        _residual_from_state(m, h, x, err)
        tokout = (RO.nearest_code_readout(x, m.weights.readout, *m.fmt.args, err) if m.implicit_vocab
                  else RO.readout(x, m.weights.readout, m.candidates, *m.fmt.args, err))
        m.absorb(err)
        check_err(err, m.fmt, f"{m.name} readout")
        return int(tokout)

    def state_key(self, state) -> bytes:
        """ceil(state_bits / 8) bytes (protocol.py): each real h entry (padding
        excluded) as raw + 2^(I+f) in p bits, then last token + 1, little-endian."""
        h, tok = state
        fmt = self.model.fmt
        p, off = fmt.total_bits, 1 << (fmt.int_bits + fmt.frac_bits)
        acc, shift = 0, 0
        for l, size in enumerate(self.model.rnn_sizes):
            for s in range(size):
                acc |= (int(h[l][s]) + off) << shift
                shift += p
        acc |= (int(tok) + 1) << shift
        return acc.to_bytes((self.state_bits + 7) // 8, "little")


def _residual_from_state(m, h: np.ndarray, x: np.ndarray, err: np.ndarray) -> None:
    """x (holding the embedding) -> final residual given the layers' h_t."""
    I, f, mode = m.fmt.args
    D = x.shape[0]
    tmp = np.zeros(D, np.int64)
    W = m.weights.net
    hidden = np.zeros(W.rW1.shape[1], np.int64)
    for l in range(W.rA.shape[0]):
        K.matvec(W.rC[l], h[l], I, f, mode, err, tmp)
        for d in range(D):
            x[d] = K.fx_add(x[d], tmp[d], I, f, mode, err)
        K.mlp_residual(W.rW1[l], W.rb1[l], W.rW2[l], W.rb2[l], x, I, f, mode, err, hidden, tmp)
