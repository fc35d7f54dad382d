"""c-gram retrieval (docs/theory.md §3): ``[BOS] x_1..x_n [QUERY] q_1..q_{c-1}`` -> the
token after the first occurrence of the (c-1)-gram q in x.

Promise: q occurs in x, first at positions ``j..j+c-2`` with ``j + c - 2 <= n - 1``;
the answer is ``x_{j+c-1}`` (valid instances exist for ``n >= c``). ``c = 2`` is
AR (:mod:`checks.tasks.ar` produces the same tokens). ``generate`` draws x
uniformly, then the query uniformly among the distinct (c-1)-grams of
``x_1..x_{n-1}``, without rejection; this is not uniform over valid (x, q) pairs
(``params["first_position"]`` records j to slice by).

Details (the promise, examples, the distribution): docs/internals/tasks.md#cgram
"""
from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from hypothesis import strategies as st

from rnngap.constructions.machine.vocab import number_token
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as LR

from .common import (
    ENUMERATION_LIMIT,
    TaskBatch,
    as_strategy_bounds,
    assemble,
    check_alphabet,
    check_batch,
    check_int,
    check_n,
    check_rng,
    enumerate_retrieval,
    first_occurrence_starts,
    retrieval_instances,
    sample_retrieval,
    split_instance,
)
from .spec import TaskSpec

TASK = "c-gram"
MIN_C = 2
DEFAULT_C = 3
DEFAULT_ALPHABET = 2


def check_c(c: Any) -> int:
    return check_int(c, f"{TASK}: c (query is a (c-1)-gram)", minimum=MIN_C)


def min_n(c: int) -> int:
    """Smallest n with a valid instance: the gram and its successor fit, n >= c."""
    return c


def make_batch(x: np.ndarray, starts: np.ndarray, n: int, alphabet: int, c: int,
               task: str, valid_starts: np.ndarray | None = None) -> TaskBatch:
    """Assemble a :class:`TaskBatch` from sequences and 0-based first-occurrence starts."""
    tokens, answers = retrieval_instances(x, starts, c - 1)
    params: dict[str, Any] = {
        "task": task,
        "n": n,
        "alphabet": alphabet,
        "c": c,
        "length": n + 2 + (c - 1),
        "max_number": alphabet - 1,
        "first_position": starts + 1,
    }
    if valid_starts is not None:
        params["valid_starts"] = valid_starts
    return TaskBatch(tokens, answers, params)


def generate(rng: np.random.Generator, n: int, batch: int, alphabet: int = DEFAULT_ALPHABET,
             *, c: int = DEFAULT_C) -> TaskBatch:
    """``batch`` c-gram instances (distribution in the module docstring).

    Tokens ``[batch, n + c + 1]``. ``params``: ``first_position`` (int64 ``[batch]``,
    the 1-based j where q first occurs), ``valid_starts`` (int64 ``[batch]``, how many
    queries that x admits), ``c``.
    """
    check_rng(rng)
    c = check_c(c)
    n = check_n(n, min_n(c), f"{TASK} (c = {c})")
    batch = check_batch(batch, TASK)
    alphabet = check_alphabet(alphabet, TASK)
    x, starts, counts = sample_retrieval(rng, n, batch, alphabet, c - 1)
    return make_batch(x, starts, n, alphabet, c, "cgram", counts)


def enumerate_all(n: int, alphabet: int = 3, *, c: int = DEFAULT_C, limit: int = ENUMERATION_LIMIT) -> TaskBatch:
    """Every valid c-gram instance: sequences in lexicographic order (x_1 most
    significant), for each its distinct queries ordered by first occurrence j.
    ValueError if ``a^n`` or the instance count exceeds ``limit``."""
    c = check_c(c)
    n = check_n(n, min_n(c), f"{TASK} (c = {c})")
    alphabet = check_alphabet(alphabet, TASK)
    x, starts = enumerate_retrieval(n, alphabet, c - 1, limit, f"{TASK}.enumerate_all")
    return make_batch(x, starts, n, alphabet, c, "cgram")


def reference(tokens: Any, c: int | None = None) -> int:
    """The answer token of a c-gram instance, in plain Python.

    c is read off the instance (number of tokens after ``[QUERY]`` plus one); pass
    ``c`` to insist on it. ValueError (naming the position) for a malformed
    instance or when the gram does not occur ending at or before x_{n-1}.

    >>> reference([0, 32, 33, 33, 32, 33, 9, 33, 32])
    33
    """
    want = None if c is None else check_c(c) - 1
    data, gram = split_instance(tokens, TASK, suffix_len=want)
    n = len(data)
    width = len(gram)
    for s in range(n - width):  # window x[s..s+width-1] (0-based), successor x[s+width]
        if data[s:s + width] == gram:
            return number_token(data[s + width])
    late = n - width >= 0 and data[n - width:] == gram
    where = "only as the last tokens (no successor)" if late else "nowhere"
    raise ValueError(
        f"{TASK}: positions {n + 2}..{n + 1 + width}: query gram {gram} occurs {where} in "
        f"x_1..x_{n}; promise: first occurrence ending at or before x_{n - 1}"
    )


def instances(n_min: int | None = None, n_max: int = 8, alphabet: int = DEFAULT_ALPHABET,
              *, c: int = DEFAULT_C) -> st.SearchStrategy:
    """Hypothesis strategy of valid instances ``(tokens list, answer token)``:
    n in ``[n_min, n_max]`` (n_min defaults to c), x over ``0..alphabet-1``, the query
    start drawn among the first-occurrence starts."""
    c = check_c(c)
    lo, hi = as_strategy_bounds(min_n(c) if n_min is None else n_min, n_max, min_n(c), f"{TASK} (c = {c})")
    alphabet = check_alphabet(alphabet, TASK)
    return retrieval_strategy(lo, hi, alphabet, c - 1)


def retrieval_strategy(lo: int, hi: int, alphabet: int, width: int) -> st.SearchStrategy:
    """Shared by AR (width 1) and c-gram (width c-1); bounds already checked."""

    @st.composite
    def _draw(draw: Any) -> tuple[list[int], int]:
        n = draw(st.integers(lo, hi))
        x = draw(st.lists(st.integers(0, alphabet - 1), min_size=n, max_size=n))
        s = draw(st.sampled_from(first_occurrence_starts(x, width)))
        query = [number_token(v) for v in x[s:s + width]]
        tokens = assemble(np.array([x], dtype=np.int64), np.array([query], dtype=np.int64))[0]
        return [int(t) for t in tokens], number_token(x[s + width])

    return _draw()


_SPECS: dict = {}


def spec(c: int):
    """The spec of c-gram retrieval with gram length ``c`` (``cgram(c=3)`` ...)."""
    c = check_c(c)
    if c not in _SPECS:
        ref = partial(reference, c=c)
        _SPECS[c] = TaskSpec(
            name=f"cgram(c={c})",
            description=f"{c}-gram retrieval: [BOS] x_1..x_n [QUERY] q_1..q_{c - 1} -> the token after the "
                        "gram's first occurrence",
            reference=ref, generate=partial(generate, c=c), enumerate_all=partial(enumerate_all, c=c),
            reduction=LR.cgram_reduction(c), reduction_alphabet=lambda n: n + 2, data_length=lambda n: c * n,
            cc_split=lambda n, a: cc.cgram_split(n, ref, c=c, alphabet=a),
            family="cgram", c=c, min_n=min_n(c), default_alphabet=DEFAULT_ALPHABET, kwargs={"c": c},
            aliases=(f"cgram{c}", f"{c}-gram") + (("cgram",) if c == DEFAULT_C else ()))
    return _SPECS[c]


SPECS = tuple(spec(c) for c in (2, 3, 4))
"""The specs of the c-gram tasks the checks use (c = 2, 3, 4; ``cgram`` is c = 3)."""
