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
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import attention as AT
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import readouts as RO
from rnngap.constructions.machine import lanes as LN
from rnngap.constructions.machine import wide as WD
from rnngap.constructions.machine import wide_exec as WX
from rnngap.constructions.machine import wide_attention as WA
from rnngap.constructions.machine.fixedpoint import (
    E_MAXABS, E_SAT, PrecisionError, check_err, max_abs_raw, new_err,
)
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.machine.vocab import NUMBER_BASE, SPECIAL_NAMES, Vocab, token_code

KINDS = ("transformer", "linear_rnn", "hybrid")
SPECIAL_MIN_CODE = -max(SPECIAL_NAMES)
"""The smallest token code (tau of the largest special id)."""
READOUTS = {"table": K.READOUT_TABLE, "nearest_code": K.READOUT_NEAREST_CODE}


def frac_matrix(rows: int, cols: int) -> np.ndarray:
    m = np.empty((rows, cols), dtype=object)
    m.fill(Fraction(0))
    return m


@dataclass
class RNNLayerSpec:
    """h_t = A h_{t-1} + B x_t;  x += C h_t;  x += W2 relu(W1 x + b1) + b2."""

    A: np.ndarray   # (S, S) Fractions
    B: np.ndarray   # (S, D)
    C: np.ndarray   # (D, S)
    W1: np.ndarray  # (M, D)
    b1: np.ndarray  # (M,)
    W2: np.ndarray  # (D, M)
    b2: np.ndarray  # (D,)
    state_labels: list[str] = field(default_factory=list)
    groups: list = field(default_factory=list)
    """Per MLP neuron, the gadget intent it belongs to (gadgets.MLPIntent) or None."""
    state_meaning: list = field(default_factory=list)
    """Per state number, what it holds at step t (gadgets.Recurrence.meaning), or ()."""


@dataclass
class HeadSpec:
    WQ: np.ndarray  # (Dh, D)
    WK: np.ndarray  # (Dh, D)
    WV: np.ndarray  # (Dv, D)
    WO: np.ndarray  # (D, Dv)
    name: str = ""
    intent: tuple = ()
    """(gadget, parameters) of the gadget that made the head (gadgets.Head.intent)."""
    copy: dict = field(default_factory=dict)
    """The head's copy combos by target direction, as the builder wrote them."""


@dataclass
class AttnLayerSpec:
    """x += sum_h WO_h attn(WQ_h x, WK_h x, WV_h x);  x += W2 relu(W1 x + b1) + b2."""

    heads: list[HeadSpec]
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    groups: list = field(default_factory=list)
    """Per MLP neuron, the gadget intent it belongs to (gadgets.MLPIntent) or None."""


@dataclass
class ModelSpec:
    """A construction, exactly. ``embedding[d] = (kind, param, coef)``;
    ``readout`` terms are ``(dim, kind, param, coef)``."""

    name: str
    kind: str
    vocab: Vocab
    labels: list[str]
    embedding: list[tuple[int, Any, Fraction]]
    rnn_layers: list[RNNLayerSpec]
    attn_layers: list[AttnLayerSpec]
    readout: list[tuple[int, int, Any, Fraction]]
    claim: str = ""
    notes: dict = field(default_factory=dict)
    max_positions: int | None = None
    """The longest context (prompt + CoT, positions 0..max_positions-1) the
    construction's declared format and margins were derived for; longer inputs
    are refused before any kernel runs. None: the construction declares no
    length (e.g. the bounded-memory targets, which are meant to be run past
    their capacity)."""

    @property
    def width(self) -> int:
        return len(self.labels)

    def validate(self) -> None:
        D = self.width
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.embedding) != D:
            raise ValueError(f"{self.name}: embedding has {len(self.embedding)} entries, width is {D}")
        if self.kind == "transformer" and self.rnn_layers:
            raise ValueError(f"{self.name}: a transformer has no RNN layers")
        if self.kind == "linear_rnn" and self.attn_layers:
            raise ValueError(f"{self.name}: a linear RNN has no attention layers")
        if self.kind == "hybrid" and (len(self.attn_layers) != 1 or not self.rnn_layers):
            raise ValueError(f"{self.name}: a hybrid is RNN layers then exactly ONE attention layer "
                             f"(has {len(self.rnn_layers)} RNN, {len(self.attn_layers)} attention)")
        if self.kind != "transformer":
            for d, (kind, _, _) in enumerate(self.embedding):
                if kind in K.POSITION_FEATURES:
                    raise ValueError(f"{self.name}: direction {self.labels[d]!r} uses a position feature; "
                                     f"a {self.kind} sees tokens only (s_t = trans(s_(t-1), token_t))")
        for i, (dim, kind, _, _) in enumerate(self.readout):
            if not 0 <= dim < D:
                raise ValueError(f"{self.name}: readout term {i} reads dimension {dim} outside width {D}")
            if kind not in K.READOUT_FEATURES:
                raise ValueError(f"{self.name}: readout term {i} uses feature {K.FEATURE_NAMES.get(kind, kind)}, "
                                 f"not a formula of the output token")
        for l, layer in enumerate(self.rnn_layers):
            S = layer.A.shape[0]
            for nm, arr, shp in (("A", layer.A, (S, S)), ("B", layer.B, (S, D)), ("C", layer.C, (D, S)),
                                 ("W1", layer.W1, (layer.W1.shape[0], D)), ("W2", layer.W2, (D, layer.W1.shape[0])),
                                 ("b1", layer.b1, (layer.W1.shape[0],)), ("b2", layer.b2, (D,))):
                if arr.shape != shp:
                    raise ValueError(f"{self.name}: RNN layer {l} {nm} has shape {arr.shape}, expected {shp}")
        for l, layer in enumerate(self.attn_layers):
            for h, hd in enumerate(layer.heads):
                if hd.WQ.shape != hd.WK.shape or hd.WQ.shape[1] != D:
                    raise ValueError(f"{self.name}: layer {l} head {h}: WQ {hd.WQ.shape} / WK {hd.WK.shape} "
                                     f"must both be (Dh, {D})")
                if hd.WV.shape[1] != D or hd.WO.shape != (D, hd.WV.shape[0]):
                    raise ValueError(f"{self.name}: layer {l} head {h}: WV {hd.WV.shape} / WO {hd.WO.shape} "
                                     f"inconsistent with width {D}")
            M = layer.W1.shape[0]
            if layer.W1.shape != (M, D) or layer.W2.shape != (D, M) or layer.b1.shape != (M,) or layer.b2.shape != (D,):
                raise ValueError(f"{self.name}: attention layer {l} MLP shapes inconsistent with width {D}")

    # -- size
    def param_counts(self) -> tuple[int, int]:
        """(total entries of all weight arrays and formula coefficients, nonzero ones)."""
        total = nonzero = 0

        def add(arr):
            nonlocal total, nonzero
            total += arr.size
            nonzero += int(np.count_nonzero(np.asarray(arr, dtype=object).ravel() != 0)) if arr.size else 0

        for _, _, c in self.embedding:
            total += 1
            nonzero += int(c != 0)
        for L in self.rnn_layers:
            for arr in (L.A, L.B, L.C, L.W1, L.b1, L.W2, L.b2):
                add(arr)
        for L in self.attn_layers:
            for h in L.heads:
                for arr in (h.WQ, h.WK, h.WV, h.WO):
                    add(arr)
            for arr in (L.W1, L.b1, L.W2, L.b2):
                add(arr)
        for *_, c in self.readout:
            total += 1
            nonzero += int(c != 0)
        return total, nonzero

    def state_numbers(self) -> int:
        return sum(L.A.shape[0] for L in self.rnn_layers)


def _enc(fmt: FixedFormat, arr: np.ndarray, what: str) -> np.ndarray:
    return fmt.encode_array(arr, exact=True, what=what) if arr.size else _zeros(fmt, *arr.shape)


MAX_CANDIDATES = 1 << 24
"""The largest vocabulary whose token ids a model lists (``Model.candidates``, built
in Python when the model is; the generic readout's argmax runs over that list).
A larger vocabulary is *implicit* (``Model.implicit_vocab``): accepted only for
the nearest-code readout, which needs no list (see :class:`Model`)."""


def _zeros(fmt: FixedFormat, *shape: int) -> np.ndarray:
    """Raws of zero: int64 of ``shape``, or (two-limb storage) ``shape + (2,)``."""
    return np.zeros(shape + ((2,) if fmt.wide else ()), np.int64)


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
    z = lambda *shape: _zeros(fmt, *shape)     # noqa: E731
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
    z = lambda *shape: _zeros(fmt, *shape)     # noqa: E731
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
        if self.implicit_vocab:
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
            self.candidates = np.array(sorted(SPECIAL_NAMES), dtype=np.int64)
        else:
            self.candidates = np.array([t for t in range(self.vocab.size) if self.vocab.contains(t)],
                                       dtype=np.int64)
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
        # the weights are numbers of the format too: a run needs at least their bits
        # (offsets of the 1/(.+c) features included; token ids of is_token are not numbers)
        inv = (K.F_TOK_INV, K.F_POS_INV)
        params = [eparam[d] for d in range(len(ekind))] + [out_param[i] for i in range(len(out_kind))]
        offsets = [int(p) if not fmt.wide else WD.from_limbs(*p)
                   for k, p in zip(np.r_[ekind, out_kind], params) if k in inv]
        weights = (ecoef, rA, rB, rC, rW1, rb1, rW2, rb2, aWQ, aWK, aWV, aWO, aW1, ab1, aW2, ab2, out_coef)
        self._set_max_abs(max([_raw_max(a, fmt.wide) for a in weights] + [abs(o) for o in offsets] + [0]))
        self._update_resources()
        self._built = (self.err.copy(), replace(self.resources))     # the statistics of a new build: fresh()

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
        # every token read must be in the vocabulary. When every row is full length, a
        # lookup table over the ids 0..max candidate settles it in one gather (~10x
        # cheaper than the masked isin below, which runs otherwise and names the token)
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
        mask = None if full_ok else np.arange(N)[None, :] < lengths[:, None]
        # a lookup table over the candidates' id range (memory ~ that range, any ids)
        bad = None if full_ok else mask & ~np.isin(tokens, self.candidates, kind="table")
        if bad is not None and bad.any():
            b, t = map(int, np.argwhere(bad)[0])
            raise ValueError(f"{self.name}: batch[{b}] token id {int(tokens[b, t])} at position {t} "
                             f"is not in the vocabulary (size {self.vocab.size})")
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


class Session:
    """Incremental decoding: feed tokens one at a time or in chunks; a generated
    token costs O(context) thanks to the KV cache (attention layers) and O(1)
    for RNN layers."""

    def __init__(self, model: Model, capacity: int = 64, record: bool = False):
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
        self.state = _zeros(m.fmt, W.rA.shape[0], W.rA.shape[1])
        self.x = _zeros(m.fmt, m.spec.width)
        self.scores = _zeros(m.fmt, cap) if self._wide else np.zeros(AT.scores_length(cap, self._prune), np.int64)
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

    def __init__(self, model: Model):
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


def _residual_from_state(m: Model, h: np.ndarray, x: np.ndarray, err: np.ndarray) -> None:
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


# ----------------------------------------------------------------------------
# float64 'real' mode (comparison only: no rounding, no range)
def _f(arr: np.ndarray) -> np.ndarray:
    return np.asarray([[float(v) for v in row] for row in arr], dtype=np.float64).reshape(arr.shape) \
        if arr.ndim == 2 else np.asarray([float(v) for v in arr.ravel()], dtype=np.float64).reshape(arr.shape)


def _feature_real(kind: int, param: Any, tok: int, pos: int) -> float:
    c = token_code(tok)
    if kind == K.F_ZERO:
        return 0.0
    if kind == K.F_ONE:
        return 1.0
    if kind == K.F_TOK:
        return float(c)
    if kind == K.F_TOK_SQ:
        return float(c * c)
    if kind == K.F_IS_TOKEN:
        return 1.0 if tok == int(param) else 0.0
    if kind == K.F_IS_NUM:
        return 1.0 if tok >= NUMBER_BASE else 0.0
    if kind == K.F_TOK_INV:
        return 1.0 / (c + float(param))
    if kind == K.F_POS:
        return float(pos)
    if kind == K.F_POS_SQ:
        return float(pos * pos)
    if kind == K.F_POS_INV:
        return 1.0 / (pos + float(param))
    raise ValueError(f"unknown feature kind {kind}")


class RealModel:
    """The same construction in float64 with exact softmax (no grid). Comparison only."""

    def __init__(self, spec: ModelSpec):
        spec.validate()
        self.spec = spec
        self.vocab = spec.vocab
        self.rnn = [tuple(_f(a) for a in (L.A, L.B, L.C, L.W1, L.b1, L.W2, L.b2)) for L in spec.rnn_layers]
        self.attn = [([tuple(_f(a) for a in (h.WQ, h.WK, h.WV, h.WO)) for h in L.heads],
                      tuple(_f(a) for a in (L.W1, L.b1, L.W2, L.b2))) for L in spec.attn_layers]
        if self.vocab.size > MAX_CANDIDATES:
            raise ValueError(f"{spec.name} (real): the float twin lists every token; a vocabulary of "
                             f"{self.vocab.size:,} tokens is past {MAX_CANDIDATES:,}")
        self.candidates = [t for t in range(self.vocab.size) if self.vocab.contains(t)]

    def residuals(self, tokens: Sequence[int]) -> np.ndarray:
        """Final residual at every position, (N, D) float64."""
        self.vocab.validate(tokens, what=f"{self.spec.name} (real)")
        N, D = len(tokens), self.spec.width
        X = np.array([[float(c) * _feature_real(k, p, int(tok), t) for (k, p, c) in self.spec.embedding]
                      for t, tok in enumerate(tokens)], dtype=np.float64).reshape(N, D)
        for (A, B, C, W1, b1, W2, b2) in self.rnn:
            h = np.zeros(A.shape[0])
            for t in range(N):
                h = A @ h + B @ X[t]
                X[t] = X[t] + C @ h
                X[t] = X[t] + W2 @ np.maximum(W1 @ X[t] + b1, 0) + b2
        for heads, (W1, b1, W2, b2) in self.attn:
            out = np.zeros_like(X)
            for (WQ, WK, WV, WO) in heads:
                Q, Kk, V = X @ WQ.T, X @ WK.T, X @ WV.T
                S = Q @ Kk.T
                S = np.where(np.tril(np.ones((N, N), bool)), S, -np.inf)
                S = S - S.max(axis=1, keepdims=True)
                W = np.exp(S)
                W /= W.sum(axis=1, keepdims=True)
                out += (W @ V) @ WO.T
            X = X + out
            X = X + np.maximum(X @ W1.T + b1, 0) @ W2.T + b2
        return X

    def predict(self, tokens: Sequence[int]) -> int:
        x = self.residuals(tokens)[-1]
        best, best_logit = None, -math.inf
        for k in self.candidates:
            logit = sum(float(c) * _feature_real(kind, p, k, 0) * x[d] for (d, kind, p, c) in self.spec.readout)
            if logit > best_logit:
                best, best_logit = k, logit
        return int(best)
