"""The model catalogue behind ``rnngap show`` and the notebooks: a name -> a
builder of the model for n and a seeded example prompt."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from constructions import demos
from constructions.model import Model

from .tasks import counting, index


@dataclass(frozen=True)
class Entry:
    build: Callable[[int], Model]
    example: Callable[[int, np.random.Generator], list[int]]
    about: str


def _index_example(n, rng):
    return [int(t) for t in index.generate(rng, n, 1).tokens[0]]


def _count_example(n, rng):
    return [int(t) for t in counting.generate(rng, n, 1, threshold="near").tokens[0]]


def _prev_example(n, rng):
    return [0] + [int(t) for t in rng.integers(0, 2, n) + 32]


CATALOG: dict[str, Entry] = {
    "position-match": Entry(demos.position_match, _index_example, "match head on positions (Index mechanism)"),
    "previous-token": Entry(demos.previous_token, _prev_example, "shift head: predicts the token before the last"),
    "count-threshold": Entry(demos.count_threshold, _count_example, "BOS counting head + comparison MLP"),
}


def names() -> list[str]:
    return sorted(CATALOG)
