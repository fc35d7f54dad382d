"""``rnngap.build``: a construction built at size n, with ``predict`` and a traced ``run``.

    >>> import rnngap
    >>> m = rnngap.build("index-transformer", n=4)
    >>> toks = m.encode(["[BOS]", 1, 0, 1, 1, "[QUERY]", 2])
    >>> m.decode([m.predict(toks)])
    [0]
    >>> t = m.run(toks)
    >>> t.attention.shape                      # (layer, head, query position, key position)
    (1, 1, 7, 7)
    >>> int(t.attention[0, 0, -1].argmax())    # the query position attends x_2, position 2
    2
    >>> t.direction("one")[:3]
    [Fraction(1, 1), Fraction(1, 1), Fraction(1, 1)]

The model computes; this module only feeds tokens and reads what the machine
recorded (the residual by named direction, every head's weights).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from rnngap.checks.catalog import records as catalog
from rnngap.checks.export.write import export


@dataclass(frozen=True)
class Trace:
    """One run: the tokens, the answer (the next token the model writes), the
    residual stream at every position (exact values, one row per position, one
    column per direction of ``labels``) and every head's attention weights
    (``attention[layer, head, query, key]``, zero above the diagonal)."""

    tokens: tuple[int, ...]
    answer: int
    labels: tuple[str, ...]
    residual: tuple[tuple[Fraction, ...], ...]
    attention: np.ndarray

    def direction(self, name: str) -> list[Fraction]:
        """The values of residual direction ``name`` at every position."""
        if name not in self.labels:
            raise KeyError(f"no residual direction {name!r}; directions: {', '.join(self.labels[:12])}, ...")
        k = self.labels.index(name)
        return [row[k] for row in self.residual]


class BuiltModel:
    """A construction built at size ``n`` (:func:`build`). ``model`` is the machine
    model (constructions/build/model.py), ``construction`` what the builder returned
    (the model itself, or e.g. a RAG construction with its oracle)."""

    def __init__(self, name: str, n: int, built: Any):
        self.name, self.n = name, n
        self.model = built.model
        self.construction = built.construction
        self.claim = catalog.by_name(name).key.claim

    def __repr__(self) -> str:
        return f"<rnngap {self.name} n={self.n}: {self.model.describe()}>"

    @property
    def labels(self) -> tuple[str, ...]:
        """The residual directions' names, in order."""
        return tuple(self.model.labels)

    def encode(self, items: Sequence[str | int]) -> list[int]:
        """Token names (``"[BOS]"``) and numbers to token ids."""
        return self.model.vocab.encode(items)

    def decode(self, tokens: Sequence[int]) -> list[str | int]:
        """Token ids to names and numbers."""
        return self.model.vocab.decode(tokens)

    def export(self, to: str, out) -> str:
        """Write this model to the file ``out``: ``to`` is ``"safetensors"``,
        ``"torch"`` or ``"transformer-lens"`` (as ``rnngap export``; docs/export.md).
        Returns ``out``; ValueError, with nothing written, if the target cannot hold it."""
        export(self.name, self.n, to, out, model=self.model)
        return str(out)

    def predict(self, tokens: Sequence[int]) -> int:
        """The next token the model writes after ``tokens`` (its answer, for a model
        without chain of thought)."""
        return self.model.predict(list(tokens))

    def run(self, tokens: Sequence[int]) -> Trace:
        """Feed ``tokens`` one at a time and record every position (:class:`Trace`)."""
        toks = [int(t) for t in tokens]
        if not toks:
            raise ValueError(f"{self.name}: run needs at least one token")
        sess = self.model.session(capacity=len(toks), record=True)
        L = len(toks)
        spec = self.model.weights.net.aWQ.shape
        att = np.zeros((spec[0], spec[1], L, L))
        rows = []
        for t, tok in enumerate(toks):
            sess.feed_one(tok)
            rows.append(tuple(sess.residual().values()))
            if spec[0]:
                att[:, :, t, : t + 1] = sess.attention()
        return Trace(tuple(toks), sess.next_token(), self.labels, tuple(rows), att)


def build(name: str, n: int, **params) -> BuiltModel:
    """The construction ``name`` (``rnngap show --list``) built for size ``n``.
    ValueError for an unknown name (naming the closest) or a size it refuses."""
    if name not in catalog.names():
        raise ValueError(f"unknown construction {name!r}; closest: {', '.join(catalog.closest(name, catalog.names()))}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name}: n must be a whole number >= 1, got {n!r}")
    return BuiltModel(name, int(n), catalog.by_name(name).build(int(n), **params))
