"""The float64 twin of a model: the same specification computed without rounding, for comparison only.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import NUMBER_BASE, token_code
from .spec import MAX_CANDIDATES, ModelSpec


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
