"""Teacher forcing: a model's next-token predictions along given continuations,
in one batched call.

For a prompt p and a reference continuation r (a CoT and its answer), feeding
p + r and reading the model's prediction at every position from the end of p on
gives the tokens greedy generation would write IF each earlier one was right: all
of them equal to r is exactly "greedy generation writes r" (by induction over the
generated tokens), at the cost of one batched forward pass instead of one
generation per token.

    >>> from rnngap.constructions.models.istree import istree_transformer, prompt_tokens
    >>> from rnngap.checks.tasks.istree import reference_cot
    >>> edges = [(2, 0), (3, 2), (1, 0)]
    >>> p, r = prompt_tokens(edges), reference_cot(4, edges)
    >>> forced_continuations(istree_transformer(4), [p + r], [len(p)]) == [r]
    True
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def forced_continuations(model, rows: Sequence[Sequence[int]], starts: Sequence[int]) -> list[list[int]]:
    """For each row (prompt + continuation, the prompt ending at ``starts[b]``):
    the model's predictions at positions starts[b] - 1 .. len(row) - 2, i.e. its
    guess for every continuation token given everything before it."""
    if len(rows) != len(starts) or not len(rows):
        raise ValueError(f"forced_continuations: {len(rows)} rows and {len(starts)} starts (need equal, >= 1)")
    if any(not 1 <= s < len(r) for r, s in zip(rows, starts)):
        raise ValueError("forced_continuations: every row needs a prompt and a continuation (1 <= start < len)")
    L = max(len(r) for r in rows)
    batch = np.zeros((len(rows), L), dtype=np.int64)
    for b, r in enumerate(rows):
        batch[b, :len(r)] = r
    lengths = np.array([len(r) - 1 for r in rows], dtype=np.int64)
    preds = model.predict_batch(batch, lengths, all_positions=True)
    return [[int(t) for t in preds[b, s - 1:len(r) - 1]] for b, (r, s) in enumerate(zip(rows, starts))]
