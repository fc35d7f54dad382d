"""Models: exact specifications, fixed-point executors, sessions, resources.

A :class:`ModelSpec` holds a construction's weights as exact rationals
(``Fraction``), independent of any number format. A :class:`Model` is a spec
encoded into a :class:`~rnngap.constructions.machine.formats.FixedFormat` (every weight must
lie on the grid exactly; nothing is silently rounded) and runs on the numba
kernels of :mod:`constructions.machine.kernels`. ``Model.with_format`` re-encodes the
same construction at other bits, which is how the checks show a construction
failing below its declared precision.

Architectures (docs/theory.md §2): ``kind`` is ``"transformer"`` (attention layers
only; position features allowed), ``"linear_rnn"`` (RNN layers only; no
position features), or ``"hybrid"`` (RNN layers then exactly one attention
layer; no position features). The RNN readout ``x += C h_t`` is the project's
choice of how a recurrent layer writes into the residual stream.

Example::

    >>> from rnngap.constructions.models.demos import position_match_transformer
    >>> model = position_match_transformer(4)
    >>> sess = model.session()
    >>> sess.feed([0, 33, 32, 33, 32, 9, 34])   # [BOS] x = 1 0 1 0 [QUERY] i = 2
    >>> sess.next_token()                       # number 0 = x_2
    32
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine import lanes as LN
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine.fixedpoint import (
    E_MAXABS, E_SAT, check_err, max_abs_raw, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import NUMBER_BASE, SPECIAL_NAMES
from .spec import MAX_CANDIDATES, ModelSpec
from .session import RNNAdapter, Session, zeros_for
from .real import RealModel


SPECIAL_MIN_CODE = -max(SPECIAL_NAMES)
"""The smallest token code (tau of the largest special id)."""
READOUTS = {"table": K.READOUT_TABLE, "nearest_code": K.READOUT_NEAREST_CODE}


def _enc(fmt: FixedFormat, arr: np.ndarray, what: str) -> np.ndarray:
    return fmt.encode_array(arr, exact=True, what=what) if arr.size else zeros_for(fmt, *arr.shape)


def _raw_max(arr: np.ndarray, wide: bool) -> int:
    """The largest |raw| of an encoded array (two-limb: limbs on the last axis)."""
    if not arr.size:
        return 0
    if not wide:
        return int(np.abs(arr).max())
    a = np.abs(arr.reshape(-1, 2))
    i = int(np.lexsort((a[:, 1], a[:, 0]))[-1])
    return (int(a[i, 0]) << 63) + int(a[i, 1])


@dataclass
class Resources:
    """What a model declares and what a run used."""

    params: int
    params_nonzero: int
    int_bits: int
    frac_bits: int
    precision_bits: int            # p = I + f + 1 declared
    state_numbers: int             # numbers in the RNN state (0 for a Transformer)
    state_bits: int                # state_numbers * p (docs/theory.md §1)
    kv_numbers_per_token: int      # numbers the KV cache grows by per token
    used_int_bits: int = 0
    used_precision_bits: int = 0   # used_int_bits + f + 1
    saturations: int = 0
    tokens_processed: int = 0

    def kv_bits(self, context_length: int) -> int:
        return self.kv_numbers_per_token * context_length * self.precision_bits


def _encode_rnn_layers(spec: ModelSpec, fmt: FixedFormat, D: int) -> tuple:
    """(A, B, C, W1, b1, W2, b2) of every RNN layer, encoded and padded to common
    state and hidden sizes (zeros beyond a layer's own)."""
    Lr = len(spec.rnn_layers)
    S = max([L.A.shape[0] for L in spec.rnn_layers], default=0)
    Mr = max([L.W1.shape[0] for L in spec.rnn_layers], default=0)
    z = lambda *shape: zeros_for(fmt, *shape)     # noqa: E731
    rA, rB, rC = z(Lr, S, S), z(Lr, S, D), z(Lr, D, S)
    rW1, rb1 = z(Lr, Mr, D), z(Lr, Mr)
    rW2, rb2 = z(Lr, D, Mr), z(Lr, D)
    for l, L in enumerate(spec.rnn_layers):
        s, m = L.A.shape[0], L.W1.shape[0]
        rA[l, :s, :s] = _enc(fmt, L.A, f"rnn[{l}].A")
        rB[l, :s, :] = _enc(fmt, L.B, f"rnn[{l}].B")
        rC[l, :, :s] = _enc(fmt, L.C, f"rnn[{l}].C")
        rW1[l, :m, :] = _enc(fmt, L.W1, f"rnn[{l}].W1")
        rb1[l, :m] = _enc(fmt, L.b1, f"rnn[{l}].b1")
        rW2[l, :, :m] = _enc(fmt, L.W2, f"rnn[{l}].W2")
        rb2[l, :] = _enc(fmt, L.b2, f"rnn[{l}].b2")
    return rA, rB, rC, rW1, rb1, rW2, rb2


def _encode_attention_layers(spec: ModelSpec, fmt: FixedFormat, D: int) -> tuple:
    """((WQ, WK, WV, WO, heads per layer, W1, b1, W2, b2), Dh) of every attention
    layer, encoded and padded to common head count, head width and MLP size."""
    La = len(spec.attn_layers)
    H = max([len(L.heads) for L in spec.attn_layers], default=0)
    Dh = max([max(h.WQ.shape[0], h.WV.shape[0]) for L in spec.attn_layers for h in L.heads], default=0)
    Ma = max([L.W1.shape[0] for L in spec.attn_layers], default=0)
    z = lambda *shape: zeros_for(fmt, *shape)     # noqa: E731
    aWQ, aWK = z(La, H, Dh, D), z(La, H, Dh, D)
    aWV, aWO = z(La, H, Dh, D), z(La, H, D, Dh)
    a_nheads = np.array([len(L.heads) for L in spec.attn_layers], dtype=np.int64)
    aW1, ab1 = z(La, Ma, D), z(La, Ma)
    aW2, ab2 = z(La, D, Ma), z(La, D)
    for l, L in enumerate(spec.attn_layers):
        for h, hd in enumerate(L.heads):
            dq, dv = hd.WQ.shape[0], hd.WV.shape[0]
            tag = f"layer {l} head {h} ({hd.name})"
            aWQ[l, h, :dq] = _enc(fmt, hd.WQ, f"{tag} WQ")
            aWK[l, h, :dq] = _enc(fmt, hd.WK, f"{tag} WK")
            aWV[l, h, :dv] = _enc(fmt, hd.WV, f"{tag} WV")
            aWO[l, h, :, :dv] = _enc(fmt, hd.WO, f"{tag} WO")
        m = L.W1.shape[0]
        aW1[l, :m] = _enc(fmt, L.W1, f"layer {l} W1")
        ab1[l, :m] = _enc(fmt, L.b1, f"layer {l} b1")
        aW2[l, :, :m] = _enc(fmt, L.W2, f"layer {l} W2")
        ab2[l] = _enc(fmt, L.b2, f"layer {l} b2")
    return (aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2), Dh


class Model:
    """A :class:`ModelSpec` encoded in a fixed-point format, ready to run."""

    def __init__(self, spec: ModelSpec, fmt: FixedFormat):
        spec.validate()
        if fmt.int_bits < 1:
            raise ValueError(f"{spec.name}: softmax needs the value 1 on the grid: int_bits >= 1, got {fmt.int_bits}")
        self.spec = spec
        self.fmt = fmt
        self.vocab = spec.vocab
        self.name = spec.name
        self.kind = spec.kind
        if spec.max_positions is not None and int(spec.max_positions) < 1:
            raise ValueError(f"{spec.name}: max_positions must be >= 1 or None, got {spec.max_positions}")
        self.max_positions = None if spec.max_positions is None else int(spec.max_positions)
        self.labels = list(spec.labels)
        D = spec.width
        self.implicit_vocab = self.vocab.size > MAX_CANDIDATES
        """True for a vocabulary of more than :data:`MAX_CANDIDATES` tokens: its ids are
        not listed (``candidates`` holds the specials only) and the model reads out
        with the nearest-code readout alone (:func:`constructions.machine.readouts.nearest_code_readout`,
        no candidate list): every batch, session and generation. That readout gives
        the generic readout's token and largest |raw|, and errs exactly when the
        generic one would (it evaluates the code range's ends and the codes next to
        the vertex, where every |value| of the generic readout is largest); only the
        first error's kind may differ. Saturate mode is refused (the generic readout
        would count a clamp at every token, the nearest-code one at a few)."""
        self.candidates = self._candidate_ids()
        """The token ids of the vocabulary, ascending (the generic readout's argmax runs
        over them); for an implicit vocabulary, the special ids only (the numbers are
        every id from NUMBER_BASE to vocab.size - 1)."""
        ekind, eparam, ecoef = self._encode_embedding()
        rnn = _encode_rnn_layers(spec, fmt, D)
        rA, rB, rC, rW1, rb1, rW2, rb2 = rnn
        self.rnn_sizes = [L.A.shape[0] for L in spec.rnn_layers]
        attn, Dh = _encode_attention_layers(spec, fmt, D)
        aWQ, aWK, aWV, aWO, a_nheads, aW1, ab1, aW2, ab2 = attn
        out_dim, out_kind, out_param, out_coef = self._encode_readout()
        total, nonzero = spec.param_counts()
        p = fmt.total_bits
        kv = 2 * sum(len(L.heads) for L in spec.attn_layers) * Dh
        self.resources = Resources(
            params=total, params_nonzero=nonzero, int_bits=fmt.int_bits, frac_bits=fmt.frac_bits,
            precision_bits=p, state_numbers=spec.state_numbers(), state_bits=spec.state_numbers() * p,
            kv_numbers_per_token=kv,
        )
        self.nearest_code_dim = self._nearest_code_dim()
        """The residual dimension v if the readout is exactly logit(k) = 2 tau_k x[v]
        - tau_k^2 x[one] over every special and number token (so the exact
        nearest-code readout applies, ``predict_batch(readout="nearest_code")``),
        else -1."""
        nearest = np.array([self.nearest_code_dim, SPECIAL_MIN_CODE, self.vocab.max_number + 1], dtype=np.int64)
        table = (RO.readout_table(out_kind, out_param, out_coef, self.candidates, *fmt.args)
                 if not (fmt.wide or self.implicit_vocab) else (np.zeros((0, 0), np.int64), np.zeros((0, 0), np.int64), np.zeros((0, 0), np.bool_)))
        self.weights = K.Weights(
            K.Network(ekind, eparam, ecoef, *rnn, *attn),
            K.Readout(out_dim, out_kind, out_param, out_coef, self.candidates, *table, nearest))
        """The encoded weights, the one structured argument of the kernels
        (:class:`constructions.machine.kernels.Weights`: ``.net`` the embedding and layers,
        ``.readout`` the readout with its table for this format). In two-limb
        storage (``fmt.wide``) every raw array has a last axis (hi, lo) and the
        table is empty (constructions/machine/wide_exec.py reads them)."""
        self.rnn_sparse = (BT.rnn_sparse(self.weights.net) if rA.shape[0] and not aWQ.shape[0] and not fmt.wide
                           else None)
        """An attention-free model's RNN layers by rows (:class:`constructions.machine.batch.RNNSparse`),
        which a :class:`Session` feeds with :func:`~constructions.machine.batch.feed_rnn_sparse`
        (the dense step's numbers, visiting only the nonzero weights); None for a
        model with attention layers or without RNN layers."""
        self.err = WD.new_wide_err() if fmt.wide else new_err()   # cumulative statistics of every run
        self._set_max_abs(self._weights_max_abs())
        self._update_resources()
        self._built = (self.err.copy(), replace(self.resources))     # the statistics of a new build: fresh()

    def _candidate_ids(self) -> np.ndarray:
        """The candidate token ids (see :attr:`candidates`); a vocabulary past
        :data:`MAX_CANDIDATES` must fit the nearest-code readout, in raise mode."""
        spec, fmt = self.spec, self.fmt
        if not self.implicit_vocab:
            return np.array([t for t in range(self.vocab.size) if self.vocab.contains(t)], dtype=np.int64)
        plain = not self.vocab.meta and not self.vocab.count
        if not (plain and self._nearest_code_form() >= 0):
            raise ValueError(f"{spec.name}: a vocabulary of {self.vocab.size:,} tokens; the generic readout "
                             f"lists every candidate token, at most {MAX_CANDIDATES:,}; a larger vocabulary runs "
                             f"only with the nearest-code readout (2 tau x[v] - tau^2 x[one] over the specials and numbers, "
                             f"no meta or [COUNT] tokens)")
        if fmt.mode != "raise":
            raise ValueError(f"{spec.name}: a vocabulary of {self.vocab.size:,} tokens (no candidate list) runs "
                             f"in raise mode only, got {fmt.mode!r} (the nearest-code readout does not count "
                             f"the generic readout's clamps)")
        return np.array(sorted(SPECIAL_NAMES), dtype=np.int64)

    def _weights_max_abs(self) -> int:
        """The largest |raw| of the encoded weights: they are numbers of the format
        too, so a run needs at least their bits (offsets of the 1/(.+c) features
        included; token ids of is_token are not numbers)."""
        net, ro, wide = self.weights.net, self.weights.readout, self.fmt.wide
        inv = (K.F_TOK_INV, K.F_POS_INV)
        params = list(net.eparam) + list(ro.out_param)
        offsets = [int(p) if not wide else WD.from_limbs(*p)
                   for k, p in zip(np.r_[net.ekind, ro.out_kind], params) if k in inv]
        weights = (net.ecoef, net.rA, net.rB, net.rC, net.rW1, net.rb1, net.rW2, net.rb2, net.aWQ, net.aWK,
                   net.aWV, net.aWO, net.aW1, net.ab1, net.aW2, net.ab2, ro.out_coef)
        return max([_raw_max(a, wide) for a in weights] + [abs(o) for o in offsets] + [0])

    def _encode_embedding(self) -> tuple:
        """(kind, param, coef) arrays of the embedding, encoded in the model's format."""
        spec, fmt = self.spec, self.fmt
        ekind = np.array([e[0] for e in spec.embedding], dtype=np.int64)
        eparam = self._raws([self._param(k, p, f"embedding[{spec.labels[d]}]")
                             for d, (k, p, _) in enumerate(spec.embedding)])
        ecoef = self._raws([fmt.encode(c, what=f"embedding coefficient of {spec.labels[d]!r}")
                            for d, (_, _, c) in enumerate(spec.embedding)])
        return ekind, eparam, ecoef

    def _raws(self, values: list[int]) -> np.ndarray:
        """Python int raws (or token ids) as an int64 array, or (two-limb storage)
        as limbs, shape (len, 2)."""
        if not self.fmt.wide:
            return np.array(values, dtype=np.int64)
        return np.array([WD.to_limbs(v) for v in values], dtype=np.int64).reshape(len(values), 2)

    def _encode_readout(self) -> tuple:
        """(dim, kind, param, coef) arrays of the readout terms, encoded."""
        spec, fmt = self.spec, self.fmt
        if not len(spec.readout):
            raise ValueError(f"{spec.name}: a model needs at least one readout term")
        out_dim = np.array([t[0] for t in spec.readout], dtype=np.int64)
        out_kind = np.array([t[1] for t in spec.readout], dtype=np.int64)
        out_param = self._raws([self._param(t[1], t[2], f"readout term {i}") for i, t in enumerate(spec.readout)])
        out_coef = self._raws([fmt.encode(t[3], what=f"readout coefficient {i}") for i, t in enumerate(spec.readout)])
        return out_dim, out_kind, out_param, out_coef

    def _param(self, kind: int, param: Any, what: str) -> int:
        if kind in (K.F_TOK_INV, K.F_POS_INV):
            return self.fmt.encode(param, what=f"{what} offset")
        if kind == K.F_IS_TOKEN:
            return int(param)
        return 0

    # -- derived models
    def with_format(self, fmt: FixedFormat) -> "Model":
        """The same construction encoded in another format (may raise if a weight
        is not on the new grid)."""
        return Model(self.spec, fmt)

    def _nearest_code_dim(self) -> int:
        if self.implicit_vocab:      # checked in __init__: no meta or [COUNT] ids, the code range is contiguous
            return self._nearest_code_form()
        codes = list(range(-SPECIAL_MIN_CODE + 1)) + list(range(NUMBER_BASE, NUMBER_BASE + self.vocab.max_number + 1))
        if self.candidates.tolist() != codes:       # the code range must be contiguous
            return -1
        return self._nearest_code_form()

    def _nearest_code_form(self) -> int:
        """The dimension v of a readout 2 tau x[v] - tau^2 x[one] with x[one] the
        constant 1 at the readout (embedded as 1, and no layer writes it: its rows of
        every C, W2, b2 and W_O are zero), else -1."""
        r = self.spec.readout
        if len(r) != 2 or "one" not in self.labels:
            return -1
        (d1, k1, _, c1), (d2, k2, _, c2) = r
        one = self.labels.index("one")
        if (k1, c1, k2, c2, d2) != (K.F_TOK, Fraction(2), K.F_TOK_SQ, Fraction(-1), one) \
                or self.spec.embedding[one] != (K.F_ONE, 0, 1):
            return -1
        rows = [L.C[one] for L in self.spec.rnn_layers] + [L.W2[one] for L in self.spec.rnn_layers]
        rows += [L.W2[one] for L in self.spec.attn_layers] + [h.WO[one] for L in self.spec.attn_layers for h in L.heads]
        rows += [[L.b2[one]] for L in list(self.spec.rnn_layers) + list(self.spec.attn_layers)]
        if any(v != 0 for row in rows for v in row):
            return -1
        return d1

    def fresh(self) -> "Model":
        """This model with the statistics of a new build (``err`` and ``resources``
        as right after construction), sharing the spec and the encoded weights
        (no run writes them): what building it again would give, without the
        build."""
        m = copy.copy(self)
        m.err = self._built[0].copy()
        m.resources = replace(self._built[1])
        return m

    # -- statistics
    def absorb(self, err: np.ndarray) -> None:
        """Add a run's error array (largest |raw|, saturations) to this model's
        cumulative statistics and ``resources``."""
        self.absorb_values(max_abs_raw(err), int(err[E_SAT]))

    def absorb_values(self, max_abs: int, saturations: int) -> None:
        """:meth:`absorb` of a largest |raw| and a number of NEW saturations (a
        session passes those its cumulative array gained since it last absorbed)."""
        if max_abs <= max_abs_raw(self.err) and saturations == 0:
            return                                  # nothing changes
        self._set_max_abs(max(max_abs_raw(self.err), max_abs))
        self.err[E_SAT] += saturations
        self._update_resources()

    def _set_max_abs(self, v: int) -> None:
        if self.fmt.wide:
            self.err[WD.E_MAXABS_HI], self.err[E_MAXABS] = v >> 63, v & ((1 << 63) - 1)
        else:
            self.err[E_MAXABS] = v

    def _update_resources(self) -> None:
        r = self.resources
        r.used_int_bits = self.fmt.used_int_bits(self.err)
        r.used_precision_bits = r.used_int_bits + self.fmt.frac_bits + 1
        r.saturations = int(self.err[E_SAT])

    # -- validation
    def validate_tokens(self, tokens: Sequence[int], what: str = "input") -> np.ndarray:
        arr = np.asarray(tokens)
        if arr.ndim != 1:
            raise ValueError(f"{self.name}: {what} must be a 1-D token sequence, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{self.name}: {what} must hold integer token ids, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        self.vocab.validate(arr, what=f"{self.name}: {what}")
        return arr

    def check_length(self, length: int, what: str = "context") -> None:
        """Refuse a context longer than the construction declares (``max_positions``)."""
        if self.max_positions is not None and length > self.max_positions:
            raise ValueError(f"{self.name}: a {what} of {length} tokens exceeds the {self.max_positions} positions "
                             f"this construction is declared for (build it for a larger n)")

    # -- running
    def session(self, capacity: int = 64, record: bool = False) -> "Session":
        return Session(self, capacity, record)

    def predict(self, prompt: Sequence[int]) -> int:
        """Next token after ``prompt`` (no CoT)."""
        s = self.session(capacity=max(1, len(prompt)))
        s.feed(prompt)
        return s.next_token()

    def predict_batch(self, tokens: np.ndarray, lengths: np.ndarray | None = None,
                      all_positions: bool = False, max_length: int | None = None,
                      share_prefix: bool = True, readout: str | None = None) -> np.ndarray:
        """Next-token predictions for a batch (B, N) of prompts, one kernel call.
        Returns (B,) for the last positions, or (B, N) (-1 past each length) if
        ``all_positions``.

        ``share_prefix``: each row reuses the KV cache (and RNN state) of the prefix
        it shares with the row before it (exact, the models are causal; see
        :func:`constructions.machine.batch.forward_batch`), so batches ordered like an
        exhaustive enumeration (consecutive rows share long prefixes) cost far
        fewer steps. Results, used bits and errors are identical either way.

        Batches of many consecutive rows of equal length (shorter than
        ``lanes.LANES_MAX_N``) run on the lane-parallel path
        (:func:`constructions.machine.lanes.forward_lanes`: a block of rows advances
        together, vectorised across the rows; the same results, used bits and
        errors), chosen by :func:`constructions.machine.lanes.choose_block`. It computes
        every token of every row, so with ``share_prefix`` it is used only when
        sharing would still run more than 1 / ``lanes.LANES_SHARE_RATIO`` of the
        tokens (an exhaustive enumeration of short rows: yes; long rows that
        differ only at the end: no, the per-row path shares their prefixes).

        ``readout``: ``"table"`` (the generic readout over every token) or
        ``"nearest_code"`` (the shortcut of
        :func:`constructions.machine.readouts.nearest_code_readout`: the same tokens and
        used bits while every logit is in range; past it the first error or the
        clamps may differ; only for models with ``nearest_code_dim >= 0``). None:
        ``"table"``, or ``"nearest_code"`` for an implicit vocabulary (the only
        readout it has; ``"table"`` is refused there)."""
        readout = self._batch_readout(readout)
        tokens, lengths = self._batch_arrays(tokens, lengths, max_length)
        B, N = tokens.shape
        preds = np.full((B, N), -1, dtype=np.int64)
        err = WD.new_wide_err() if self.fmt.wide else new_err()
        loc = np.full(2, -1, dtype=np.int64)
        block = 0 if self.fmt.wide else LN.choose_block(self, tokens, lengths, bool(share_prefix), readout)
        if self.fmt.wide:             # the two-limb executor (no lanes)
            ro = self.weights.readout
            WX.w_forward(tokens, lengths, bool(all_positions), bool(share_prefix), readout == "nearest_code", True,
                         *self.fmt.args, err, loc,
                         *self.weights.net, ro.out_dim, ro.out_kind, ro.out_param, ro.out_coef, ro.candidates,
                         ro.nearest, preds)
        elif block:
            LN.forward_lanes(tokens, lengths, bool(all_positions), bool(share_prefix), READOUTS[readout],
                             *self.fmt.args, err, loc, self.weights, preds, LN.exp_table(self.fmt.frac_bits), block)
        else:
            BT.forward_batch(tokens, lengths, bool(all_positions), bool(share_prefix), READOUTS[readout],
                             *self.fmt.args, err, loc, self.weights, preds)
        self.absorb(err)
        self.resources.tokens_processed += int(lengths.sum())
        check_err(err, self.fmt, f"{self.name}, batch item {int(loc[0])}")
        if all_positions:
            return preds
        return preds[np.arange(B), lengths - 1]

    def _batch_readout(self, readout: str | None) -> str:
        """The readout a batch runs with (:meth:`predict_batch`'s ``readout``), checked."""
        if readout is None:
            readout = "nearest_code" if self.implicit_vocab else "table"
        if readout == "table" and self.implicit_vocab:
            raise ValueError(f"{self.name}: a vocabulary of {self.vocab.size:,} tokens has no candidate list for the "
                             f"table readout; it reads out with readout='nearest_code' (the default)")
        if readout not in READOUTS:
            raise ValueError(f"{self.name}: readout must be one of {sorted(READOUTS)}, got {readout!r}")
        if readout == "nearest_code" and self.nearest_code_dim < 0:
            raise ValueError(f"{self.name}: the nearest-code readout needs the readout 2 tau x[v] - tau^2 x[one] "
                             f"over every special and number token")
        return readout

    def _batch_arrays(self, tokens, lengths, max_length: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, lengths) of a batch as the kernels take them (int64, C order,
        writeable), every shape, length and token read checked first."""
        tokens = np.asarray(tokens)
        if tokens.ndim != 2:
            raise ValueError(f"{self.name}: batch must be 2-D (batch, length), got shape {tokens.shape}")
        if not np.issubdtype(tokens.dtype, np.integer):
            raise TypeError(f"{self.name}: batch must hold integer token ids, got dtype {tokens.dtype}")
        B, N = tokens.shape
        if lengths is None:
            lengths = np.full(B, N, dtype=np.int64)
        lengths = np.require(lengths, dtype=np.int64, requirements=("C", "W"))
        if lengths.shape != (B,) or (lengths < 1).any() or (lengths > N).any():
            raise ValueError(f"{self.name}: lengths must be (batch,) = ({B},) with 1 <= length <= {N}")
        if max_length is not None and N > max_length:
            raise ValueError(f"{self.name}: sequences of length {N} exceed the declared maximum {max_length}")
        self.check_length(int(lengths.max()), "batch row")
        # writeable too: numba types a read-only array apart from a writeable one,
        # and a read-only batch would compile every kernel a second time.
        tokens = np.require(tokens, dtype=np.int64, requirements=("C", "W"))
        self._check_batch_tokens(tokens, lengths)
        return tokens, lengths

    def _check_batch_tokens(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Every token a batch reads is in the vocabulary (ValueError naming the
        first one that is not). When every row is full length, a lookup table over
        the ids 0..max candidate settles it in one gather (~10x cheaper than the
        masked isin, which runs otherwise and names the token)."""
        N = tokens.shape[1]
        full_ok = False
        if self.implicit_vocab:      # no list: ids 0 .. size - 1 that are numbers or specials
            inside = np.arange(N)[None, :] < lengths[:, None]
            known = ((tokens >= NUMBER_BASE) & (tokens < self.vocab.size)) | np.isin(tokens, self.candidates)
            full_ok = bool(known[inside].all())
            if not full_ok:
                b, t = map(int, np.argwhere(inside & ~known)[0])
                raise ValueError(f"{self.name}: batch[{b}] token id {int(tokens[b, t])} at position {t} "
                                 f"is not in the vocabulary (size {self.vocab.size})")
        elif int(lengths.min()) == N and tokens.size:
            table = np.zeros(int(self.candidates.max()) + 1, dtype=bool)
            table[self.candidates] = True
            full_ok = int(tokens.min()) >= 0 and int(tokens.max()) < table.size and bool(table.take(tokens).all())
        if full_ok:
            return
        mask = np.arange(N)[None, :] < lengths[:, None]
        # a lookup table over the candidates' id range (memory ~ that range, any ids)
        bad = mask & ~np.isin(tokens, self.candidates, kind="table")
        if bad.any():
            b, t = map(int, np.argwhere(bad)[0])
            raise ValueError(f"{self.name}: batch[{b}] token id {int(tokens[b, t])} at position {t} "
                             f"is not in the vocabulary (size {self.vocab.size})")

    def rnn(self) -> "RNNAdapter":
        """This model as a general RNN (constructions/build/protocol.py)."""
        if self.fmt.wide:
            raise ValueError(f"{self.name}: the RNN protocol view runs on int64 storage, not {self.fmt.name}")
        if self.kind != "linear_rnn":
            raise ValueError(f"{self.name}: only a linear RNN is an RNN in the protocol's sense (kind={self.kind})")
        return RNNAdapter(self)

    def real(self) -> "RealModel":
        """The float64 'real' twin (no rounding), for comparison only."""
        return RealModel(self.spec)

    def describe(self) -> str:
        r = self.resources
        return (f"{self.name} [{self.kind}] {self.fmt.name} (p={r.precision_bits}), width {self.spec.width}, "
                f"{len(self.spec.rnn_layers)} RNN + {len(self.spec.attn_layers)} attention layers, "
                f"{r.params} params ({r.params_nonzero} nonzero), state {r.state_bits} bits")


