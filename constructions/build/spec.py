"""A model's exact specification: its layers' weights as exact rationals, before any format encodes them.

:class:`ModelSpec` holds the embedding formulas, the linear-RNN layers
(:class:`RNNLayerSpec`), the attention layers (:class:`AttnLayerSpec` of
:class:`HeadSpec`) and the readout, and validates their shapes;
constructions/build/model.py encodes a spec into a fixed-point format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import Vocab


KINDS = ("transformer", "linear_rnn", "hybrid")


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


MAX_CANDIDATES = 1 << 24
"""The largest vocabulary whose token ids a model lists (``Model.candidates``, built
in Python when the model is; the generic readout's argmax runs over that list).
A larger vocabulary is *implicit* (``Model.implicit_vocab``): accepted only for
the nearest-code readout, which needs no list (see :class:`Model`)."""
