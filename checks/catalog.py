"""The model catalogue behind ``rnngap show`` and the notebooks: a name -> a
builder of the model for n and a seeded example prompt."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from constructions import demos, hybrid, retrieval
from constructions import istree as istree_model
from constructions.model import Model

from .tasks import ar, cgram, counting, index, istree


@dataclass(frozen=True)
class Entry:
    build: Callable[[int], Model]
    example: Callable[[int, np.random.Generator], list[int]]
    about: str


def _index_example(n, rng):
    return [int(t) for t in index.generate(rng, n, 1).tokens[0]]


def _count_example(n, rng):
    return [int(t) for t in counting.generate(rng, n, 1, threshold="near").tokens[0]]


def _ar_example(n, rng):
    return [int(t) for t in ar.generate(rng, n, 1, alphabet=4).tokens[0]]


def _cgram_example(n, rng):
    return [int(t) for t in cgram.generate(rng, n, 1, alphabet=2, c=3).tokens[0]]


def _istree_example(n, rng):
    return istree_model.prompt_tokens(istree.random_tree(rng, max(n, 2)).edges)


def _prev_example(n, rng):
    return [0] + [int(t) for t in rng.integers(0, 2, n) + 32]


CATALOG: dict[str, Entry] = {
    "position-match": Entry(demos.position_match, _index_example, "match head on positions (Index mechanism)"),
    "previous-token": Entry(demos.previous_token, _prev_example, "shift head: predicts the token before the last"),
    "count-threshold": Entry(demos.count_threshold, _count_example, "BOS counting head + comparison MLP"),
    "index": Entry(lambda n: retrieval.index_model(n), _index_example, "T4.6-up Index Transformer"),
    "ar": Entry(lambda n: retrieval.ar_model(max(n, 2), alphabet=4), _ar_example, "T4.6-up associative recall"),
    "cgram": Entry(lambda n: retrieval.cgram_model(max(n, 3), alphabet=2, c=3), _cgram_example,
                   "T4.6-up 3-gram retrieval"),
    "counting": Entry(lambda n: retrieval.counting_model(n), _count_example, "T4.6-up Counting Transformer"),
    "istree": Entry(lambda n: istree_model.build(max(n, 2)), _istree_example,
                    "T4.7-up IsTree Transformer (next token = first token of the DFS tour)"),
    "hybrid-index": Entry(lambda n: hybrid.hybrid_index(n), _index_example, "T5.6 hybrid for Index"),
    "hybrid-ar": Entry(lambda n: hybrid.hybrid_ar(max(n, 2), alphabet=2), lambda n, rng: [
        int(t) for t in ar.generate(rng, max(n, 2), 1, alphabet=2).tokens[0]], "T5.6 hybrid for AR"),
}


def names() -> list[str]:
    return sorted(CATALOG)
