"""A built model as named tensors: float64 weights, their exact rationals, and metadata saying what they mean.

:func:`bundle` reads a built model's specification (constructions/build/spec.py)
and returns a :class:`Bundle`. Every weight matrix ``W`` becomes three tensors:
``W`` (float64), ``W.num`` and ``W.den`` (int64: the exact rational, nothing
lost). The embedding is split into a token table ``embed.token`` (vocabulary x
width: the token-dependent features, e.g. tau and [token == t]) and three
position-feature rows (``embed.pos.kind``, ``.param``, ``.coef``): a position
feature (pos, pos^2, 1/(pos + c)) is a formula of the position, not a lookup
table, so the export carries its kind and coefficients. The readout is an
unembedding ``unembed`` (vocabulary x width: logit = unembed @ x) with
``unembed.mask`` marking the tokens of the vocabulary. The metadata (JSON
strings) names the residual directions in order, the vocabulary, the heads,
the fixed-point format the model was built for and its certificate record.

    >>> from rnngap.constructions.models.retrieval import index_transformer
    >>> b = bundle(index_transformer(4), name="index-transformer", n=4)
    >>> b.tensors["attn.0.head.0.WQ"].shape == b.tensors["attn.0.head.0.WQ.num"].shape
    True
    >>> json.loads(b.metadata["format"])
    {'int_bits': 13, 'frac_bits': 1}
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from rnngap.constructions.build.model import Model
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import NUMBER_BASE, token_code

SCHEMA = 1
"""The version of the tensor names and metadata keys below."""

INT64_MAX = (1 << 63) - 1
MAX_TOKENS = 1 << 18
"""The largest vocabulary a bundle tabulates: the token table and the unembedding have
a row per token (T4.1's RNN has about n^2 tokens: refused past n of about 500)."""

TOKEN_KINDS = (K.F_ZERO, K.F_ONE, K.F_TOK, K.F_TOK_SQ, K.F_IS_TOKEN, K.F_IS_NUM, K.F_TOK_INV)
POSITION_KINDS = (K.F_POS, K.F_POS_SQ, K.F_POS_INV)
POSITION_KIND_CODES = {K.F_POS: 1, K.F_POS_SQ: 2, K.F_POS_INV: 3}
"""``embed.pos.kind``: 0 none, 1 pos, 2 pos^2, 3 1/(pos + param)."""


class ExportError(ValueError):
    """A model that cannot be exported as asked (the message says why)."""


@dataclass
class Bundle:
    tensors: dict[str, np.ndarray]
    metadata: dict[str, str]


def feature_value(kind: int, param, token: int, pos: int) -> Fraction:
    """One embedding or readout feature at (token, position), exactly."""
    c = token_code(token)
    if kind in (K.F_ZERO, K.F_ONE):
        return Fraction(int(kind == K.F_ONE))
    if kind in (K.F_TOK, K.F_TOK_SQ):
        return Fraction(c if kind == K.F_TOK else c * c)
    if kind == K.F_IS_TOKEN:
        return Fraction(int(token == int(param)))
    if kind == K.F_IS_NUM:
        return Fraction(int(token >= NUMBER_BASE))
    if kind == K.F_TOK_INV:
        return 1 / (c + Fraction(param))
    if kind in (K.F_POS, K.F_POS_SQ):
        return Fraction(pos if kind == K.F_POS else pos * pos)
    if kind == K.F_POS_INV:
        return 1 / (pos + Fraction(param))
    raise ExportError(f"unknown feature kind {kind}")


def machine_feature(kind: int, param, coef, token: int, pos: int, frac_bits: int) -> Fraction:
    """coef times the feature, as the machine computes it: round(coef * round(feature))."""
    return rounded(Fraction(coef) * rounded(feature_value(kind, param, token, pos), frac_bits), frac_bits)


INTEGER_KINDS = (K.F_ZERO, K.F_ONE, K.F_TOK, K.F_TOK_SQ, K.F_IS_TOKEN, K.F_IS_NUM)
"""Token features with integer values: times an integer coefficient, exact without rounding."""


def token_column(kind: int, param, coef, tokens: np.ndarray, frac_bits: int) -> np.ndarray:
    """:func:`machine_feature` of every token id in ``tokens`` (position 0), as float64:
    with numpy for an integer feature and coefficient (exactly the same values),
    else token by token in exact rationals."""
    if kind in INTEGER_KINDS and Fraction(coef).denominator == 1:
        codes = np.where(tokens >= NUMBER_BASE, tokens - NUMBER_BASE + 1, -tokens)
        value = {K.F_ZERO: np.zeros_like(codes), K.F_ONE: np.ones_like(codes), K.F_TOK: codes,
                 K.F_TOK_SQ: codes * codes, K.F_IS_TOKEN: (tokens == int(param or 0)).astype(np.int64),
                 K.F_IS_NUM: (tokens >= NUMBER_BASE).astype(np.int64)}[kind]
        return (int(Fraction(coef)) * value).astype(np.float64)
    return np.array([float(machine_feature(kind, param, coef, int(t), 0, frac_bits)) for t in tokens],
                    dtype=np.float64)


def _rational(arr, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(float64, numerators, denominators) of an array of Fractions or ints."""
    fr = [Fraction(v) for v in np.asarray(arr, dtype=object).ravel()]
    if any(abs(f.numerator) > INT64_MAX or f.denominator > INT64_MAX for f in fr):
        raise ExportError(f"{what}: a weight's numerator or denominator does not fit int64")
    shape = np.asarray(arr, dtype=object).shape
    num = np.array([f.numerator for f in fr], dtype=np.int64).reshape(shape)
    den = np.array([f.denominator for f in fr], dtype=np.int64).reshape(shape)
    return np.array([float(f) for f in fr], dtype=np.float64).reshape(shape), num, den


def _put(tensors: dict, name: str, arr) -> None:
    tensors[name], tensors[name + ".num"], tensors[name + ".den"] = _rational(arr, name)


def _embedding(tensors: dict, spec, tokens: np.ndarray, frac_bits: int) -> list:
    V, D = spec.vocab.size, spec.width
    table = np.zeros((V, D), dtype=np.float64)
    pos_kind, pos_param, pos_coef = np.zeros(D, dtype=np.int64), [Fraction(0)] * D, [Fraction(0)] * D
    for d, (kind, param, coef) in enumerate(spec.embedding):
        if kind in POSITION_KINDS:
            pos_kind[d] = POSITION_KIND_CODES[kind]
            pos_param[d], pos_coef[d] = Fraction(param or 0), Fraction(coef)
        else:
            table[tokens, d] = token_column(kind, param, coef, tokens, frac_bits)
    tensors["embed.token"] = table
    tensors["embed.pos.kind"] = pos_kind
    _put(tensors, "embed.pos.param", pos_param)
    _put(tensors, "embed.pos.coef", pos_coef)
    rows = [(kind, str(Fraction(param)) if param is not None else None, str(Fraction(coef)))
            for kind, param, coef in spec.embedding]
    tensors["embed.kind"] = np.array([r[0] for r in spec.embedding], dtype=np.int64)
    _put(tensors, "embed.coef", [Fraction(c) for _, _, c in spec.embedding])
    return rows


def rounded(x: Fraction, frac_bits: int) -> Fraction:
    """x rounded half-to-even to the grid 2^-f, as the machine rounds a product or quotient."""
    scale = 2 ** frac_bits
    return Fraction(round(x * scale), scale)


def _unembedding(tensors: dict, spec, tokens: np.ndarray, frac_bits: int) -> None:
    """``readout.weight`` (vocabulary x terms: each term's weight for each token, on the
    grid as the machine computes it) with ``readout.dim`` (the direction each term
    reads), and their sum per direction ``unembed`` (vocabulary x width)."""
    V, D, T = spec.vocab.size, spec.width, len(spec.readout)
    U, W = np.zeros((V, D), dtype=np.float64), np.zeros((V, T), dtype=np.float64)
    mask = np.zeros(V, dtype=np.bool_)
    mask[tokens] = True
    for i, (d, kind, param, coef) in enumerate(spec.readout):
        W[tokens, i] = token_column(kind, param, coef, tokens, frac_bits)
        U[:, d] += W[:, i]
    tensors["unembed"], tensors["unembed.mask"] = U, mask
    tensors["readout.weight"], tensors["readout.dim"] = W, np.array([r[0] for r in spec.readout], dtype=np.int64)


def _vocabulary(spec) -> dict:
    names = {}
    for t in range(min(spec.vocab.size, NUMBER_BASE)):
        if spec.vocab.contains(t):
            names[str(t)] = spec.vocab.name(t)
    return {"size": spec.vocab.size, "number_base": NUMBER_BASE, "max_number": spec.vocab.max_number,
            "named": names, "number": "token id NUMBER_BASE + k is the number k; its code tau is k + 1",
            "code": "tau(token) = token - NUMBER_BASE + 1 for a number, -token for a named token"}


def bundle(model: Model, *, name: str, n: int, certificate: dict | None = None) -> Bundle:
    """The exported form of ``model`` (built by the record ``name`` at size ``n``)."""
    spec = model.spec
    if spec.vocab.size > MAX_TOKENS:
        raise ExportError(f"export {name}: its vocabulary at --n {n} has {spec.vocab.size:,} tokens, more than the "
                          f"{MAX_TOKENS:,} an export tabulates (the token table and the unembedding have a row per "
                          f"token); export it at a smaller --n")
    tensors: dict[str, np.ndarray] = {}
    f = int(model.fmt.frac_bits)
    tokens = np.array([t for t in range(spec.vocab.size) if spec.vocab.contains(t)], dtype=np.int64)
    embedding = _embedding(tensors, spec, tokens, f)
    _unembedding(tensors, spec, tokens, f)
    layers = []
    for l, L in enumerate(spec.rnn_layers):
        for w in ("A", "B", "C"):
            _put(tensors, f"rnn.{l}.{w}", getattr(L, w))
        for w in ("W1", "b1", "W2", "b2"):
            _put(tensors, f"rnn.{l}.mlp.{w}", getattr(L, w))
        layers.append({"type": "rnn", "index": l, "states": list(L.state_labels), "mlp_width": int(L.W1.shape[0])})
    for l, L in enumerate(spec.attn_layers):
        for h, hd in enumerate(L.heads):
            for w in ("WQ", "WK", "WV", "WO"):
                _put(tensors, f"attn.{l}.head.{h}.{w}", getattr(hd, w))
        for w in ("W1", "b1", "W2", "b2"):
            _put(tensors, f"attn.{l}.mlp.{w}", getattr(L, w))
        layers.append({"type": "attention", "index": l, "heads": [hd.name for hd in L.heads],
                       "mlp_width": int(L.W1.shape[0])})
    fmt = model.fmt
    metadata = {
        "schema": str(SCHEMA), "name": name, "n": str(n), "kind": spec.kind, "model": spec.name,
        "claim": spec.claim, "residual": json.dumps(list(spec.labels)),
        "layers": json.dumps(layers),
        "order": "rnn layers in order, then attention layers in order; each layer adds to the residual",
        "embedding": json.dumps([{"kind": K.FEATURE_NAMES[k], "param": p, "coef": c} for k, p, c in embedding]),
        "vocabulary": json.dumps(_vocabulary(spec)),
        "format": json.dumps({"int_bits": int(fmt.int_bits), "frac_bits": int(fmt.frac_bits)}),
        "max_positions": json.dumps(spec.max_positions),
        "certificate": json.dumps(certificate),
        "semantics": ("float64 twin: exact softmax, no rounding; the exact machine rounds every value to "
                      "the format's grid (docs/machine.md)"),
    }
    return Bundle(tensors, metadata)


def exact(tensors: dict, name: str) -> np.ndarray:
    """The exact rationals of the weight ``name`` (an object array of Fractions)."""
    num, den = tensors[name + ".num"], tensors[name + ".den"]
    out = np.empty(num.shape, dtype=object)
    for idx in np.ndindex(num.shape):
        out[idx] = Fraction(int(num[idx]), int(den[idx]))
    return out
