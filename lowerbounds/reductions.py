"""Index -> AR / c-gram / Counting / IsTree, split between Alice and Bob
(claims T4.6-low and T4.7-low; docs/theory.md §5).

A reduction maps an Index instance (x in {0,1}^n, i in 1..n) to an instance of
another task as ``alice(x) + bob(i, n)``: Alice's prefix depends only on x, Bob's
suffix only on i and n. A streaming model's behaviour on the suffix, CoT
included, is a function of its state after the prefix, so an s-bit model solving
the target task gives an s-bit one-way protocol for Index, which needs n bits
(:mod:`lowerbounds.cc`). :func:`check_reduction` verifies a reduction
exhaustively against an answer callable (this package never imports
``checks``). The IsTree reduction is the hub gadget, with N = n + 3 vertices
(:func:`istree_vertex_count`).

Example (n = 3, x = (1, 0, 1), i = 2)::

    >>> from rnngap.constructions.machine.vocab import Vocab
    >>> V = Vocab(10)
    >>> V.decode(AR.instance((1, 0, 1), 2))
    ['[BOS]', 2, 1, 3, 0, 4, 1, '[QUERY]', 3]
    >>> V.decode(ISTREE.instance((1, 0, 1), 2))
    ['[BOS]', 2, '-', 1, 3, '-', 0, 4, '-', 1, 5, '-', 3, 5, '-', 1, '[EOS]']
    >>> ISTREE.expected((1, 0, 1), 2) == TRUE
    True

Details (token layouts, why each promise holds):
docs/internals/lowerbounds.md#reductions
"""
from __future__ import annotations

import itertools
import operator
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from rnngap.constructions.machine.vocab import (
    BOS,
    DASH,
    EOS,
    FALSE,
    NUMBER_BASE,
    QUERY,
    TILDE,
    TRUE,
    number_token,
)

Bits = tuple[int, ...]
AnswerFn = Callable[[np.ndarray], int]

EXHAUSTIVE_MAX_N = 16
"""Largest n :func:`check_reduction` enumerates (n * 2^n instances)."""


# ----------------------------------------------------------------- argument checks


def integer_arg(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        return int(operator.index(value))
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


def check_bits(x: Any) -> Bits:
    """``x`` as a non-empty tuple of Python ints in {0, 1}; ValueError otherwise.

    >>> check_bits([1, 0])
    (1, 0)
    """
    if type(x) is tuple and x and all(type(b) is int and (b == 0 or b == 1) for b in x):
        return x  # fast path: already a tuple of int bits
    try:
        items = list(x)
    except TypeError:
        raise TypeError(f"x must be a sequence of bits, got {type(x).__name__}") from None
    if not items:
        raise ValueError("x must hold at least one bit (n >= 1)")
    out = []
    for j, b in enumerate(items, start=1):
        v = integer_arg(b, f"x_{j}")
        if v not in (0, 1):
            raise ValueError(f"x_{j} = {v} is not a bit (0 or 1)")
        out.append(v)
    return tuple(out)


def check_query(i: Any, n: Any) -> tuple[int, int]:
    """``(i, n)`` as ints with ``n >= 1`` and ``1 <= i <= n``; ValueError otherwise."""
    n = integer_arg(n, "n")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    i = integer_arg(i, "i")
    if not 1 <= i <= n:
        raise ValueError(f"query index i = {i} outside 1..{n}")
    return i, n


def check_values(values: Any, alphabet: int) -> tuple[int, ...]:
    """Non-empty tuple of ints in ``0..alphabet-1`` (the generalised splits of cc.py)."""
    alphabet = integer_arg(alphabet, "alphabet")
    if alphabet < 1:
        raise ValueError(f"alphabet must be >= 1, got {alphabet}")
    items = list(values)
    if not items:
        raise ValueError("Alice's input must hold at least one symbol (n >= 1)")
    out = []
    for j, v in enumerate(items, start=1):
        v = integer_arg(v, f"x_{j}")
        if not 0 <= v < alphabet:
            raise ValueError(f"x_{j} = {v} outside the alphabet 0..{alphabet - 1}")
        out.append(v)
    return tuple(out)


def check_c(c: Any) -> int:
    c = integer_arg(c, "c")
    if c < 2:
        raise ValueError(f"c-gram retrieval needs c >= 2 (a (c-1)-gram query), got c = {c}")
    return c


# ------------------------------------------------------------- generalised layouts
# Alice's symbols may come from an alphabet {0..a-1}; the reductions are the
# a = 2 cases. cc.py builds its communication problems from these.


def index_prefix(values: Sequence[int]) -> list[int]:
    """``[BOS] x_1..x_n``."""
    return [BOS] + [number_token(v) for v in values]


def index_suffix(i: int) -> list[int]:
    """``[QUERY] i``."""
    return [QUERY, number_token(i)]


def keyvalue_prefix(values: Sequence[int], alphabet: int, c: int) -> list[int]:
    """``[BOS] K_1 v_1 .. K_n v_n`` with K_j = the number ``alphabet + j - 1``
    repeated c-1 times (keys are disjoint from the values 0..alphabet-1)."""
    out = [BOS]
    for j, v in enumerate(values, start=1):
        out.extend([number_token(alphabet + j - 1)] * (c - 1))
        out.append(number_token(v))
    return out


def keyvalue_suffix(i: int, alphabet: int, c: int) -> list[int]:
    """``[QUERY] K_i``."""
    return [QUERY] + [number_token(alphabet + i - 1)] * (c - 1)


def hub_vertex(j: int, hubs: int) -> int:
    """Vertex number of v_j (j = 1..n) in the hub gadget with hubs 0..hubs-1."""
    return hubs + j - 1


def hub_prefix(values: Sequence[int], hubs: int) -> list[int]:
    """``[BOS]`` then the edges ``v_j - x_j`` (v_j attached to hub x_j), j = 1..n."""
    out = [BOS]
    for j, v in enumerate(values, start=1):
        out.extend([number_token(hub_vertex(j, hubs)), DASH, number_token(v)])
    return out


def hub_suffix(i: int, r: int, n: int, hubs: int) -> list[int]:
    """Edges ``w - v_i`` and ``w - k`` for every hub k != r, then ``[EOS]``; w = hubs + n.

    With Alice's stars S_0..S_{hubs-1} (S_k = hub k and the v_j attached to it),
    w joins S_{x_i} through v_i and every S_k, k != r, through its hub; the graph
    (hubs + n + 1 vertices, hubs + n edges) is a tree iff x_i = r.
    """
    w = number_token(hubs + n)
    out = [w, DASH, number_token(hub_vertex(i, hubs))]
    for k in range(hubs):
        if k != r:
            out.extend([w, DASH, number_token(k)])
    out.append(EOS)
    return out


def counting_marks_prefix(x: Sequence[int]) -> list[int]:
    """``[BOS] y_1..y_n`` with y_j = j if x_j = 1 else 0."""
    return [BOS] + [number_token(j if b else 0) for j, b in enumerate(x, start=1)]


def _bit_matrix(xs: Any) -> np.ndarray:
    """``xs`` as an int64 ``[B, n]`` array of bits (n >= 1); ValueError otherwise."""
    arr = np.asarray(xs)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"a batch of bit strings must be 2-D [B, n] with n >= 1, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_:
        raise TypeError(f"bit strings must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError("a batch of bit strings may only hold 0 and 1")
    return arr


def index_prefix_batch(xs: Any) -> np.ndarray:
    """Vectorised :func:`alice_index`: bits ``[B, n]`` -> int64 tokens ``[B, n+1]``."""
    x = _bit_matrix(xs)
    out = np.empty((x.shape[0], x.shape[1] + 1), dtype=np.int64)
    out[:, 0] = BOS
    out[:, 1:] = x + NUMBER_BASE
    return out


def keyvalue_prefix_batch(xs: Any, c: int) -> np.ndarray:
    """Vectorised :func:`alice_cgram` (alphabet 2): ``[B, n]`` -> ``[B, c*n + 1]``."""
    x = _bit_matrix(xs)
    b, n = x.shape
    blocks = np.empty((b, n, c), dtype=np.int64)
    blocks[:, :, :c - 1] = (NUMBER_BASE + 2 + np.arange(n, dtype=np.int64))[None, :, None]
    blocks[:, :, c - 1] = x + NUMBER_BASE
    return np.concatenate([np.full((b, 1), BOS, dtype=np.int64), blocks.reshape(b, n * c)], axis=1)


def counting_prefix_batch(xs: Any) -> np.ndarray:
    """Vectorised :func:`alice_counting`: ``[B, n]`` -> ``[B, n+1]``."""
    x = _bit_matrix(xs)
    out = np.empty((x.shape[0], x.shape[1] + 1), dtype=np.int64)
    out[:, 0] = BOS
    out[:, 1:] = NUMBER_BASE + x * np.arange(1, x.shape[1] + 1, dtype=np.int64)[None, :]
    return out


def hub_prefix_batch(xs: Any) -> np.ndarray:
    """Vectorised :func:`alice_istree`: ``[B, n]`` -> ``[B, 3n+1]``."""
    x = _bit_matrix(xs)
    b, n = x.shape
    edges = np.empty((b, n, 3), dtype=np.int64)
    edges[:, :, 0] = (NUMBER_BASE + 2 + np.arange(n, dtype=np.int64))[None, :]
    edges[:, :, 1] = DASH
    edges[:, :, 2] = x + NUMBER_BASE
    return np.concatenate([np.full((b, 1), BOS, dtype=np.int64), edges.reshape(b, 3 * n)], axis=1)


# ---------------------------------------------------------- the five reductions


def alice_index(x: Sequence[int]) -> list[int]:
    """Index prefix: ``[BOS] x_1..x_n`` (the identity reduction)."""
    return index_prefix(check_bits(x))


def bob_index(i: int, n: int) -> list[int]:
    """Index suffix: ``[QUERY] i``."""
    i, n = check_query(i, n)
    return index_suffix(i)


def expected_index(x: Sequence[int], i: int) -> int:
    """The number token of x_i."""
    x = check_bits(x)
    i, _ = check_query(i, len(x))
    return number_token(x[i - 1])


def alice_ar(x: Sequence[int]) -> list[int]:
    """AR prefix: ``[BOS] 2 x_1 3 x_2 .. (n+1) x_n`` (key j+1, then value x_j)."""
    return keyvalue_prefix(check_bits(x), 2, 2)


def bob_ar(i: int, n: int) -> list[int]:
    """AR suffix: ``[QUERY] (i+1)``: the key of block i."""
    i, n = check_query(i, n)
    return keyvalue_suffix(i, 2, 2)


def expected_ar(x: Sequence[int], i: int) -> int:
    """The number token of x_i (the value after key i+1)."""
    return expected_index(x, i)


def alice_cgram(x: Sequence[int], c: int = 3) -> list[int]:
    """c-gram prefix: ``[BOS] K_1 x_1 .. K_n x_n``, K_j = (j+1) repeated c-1 times."""
    return keyvalue_prefix(check_bits(x), 2, check_c(c))


def bob_cgram(i: int, n: int, c: int = 3) -> list[int]:
    """c-gram suffix: ``[QUERY] K_i`` (c-1 copies of the number i+1)."""
    i, n = check_query(i, n)
    return keyvalue_suffix(i, 2, check_c(c))


def expected_cgram(x: Sequence[int], i: int) -> int:
    """The number token of x_i."""
    return expected_index(x, i)


def alice_counting(x: Sequence[int]) -> list[int]:
    """Counting prefix: ``[BOS] y_1..y_n`` with y_j = j if x_j = 1 else 0."""
    return counting_marks_prefix(check_bits(x))


def bob_counting(i: int, n: int) -> list[int]:
    """Counting suffix: ``[QUERY] i 0``: does the number i occur more than 0 times?"""
    i, n = check_query(i, n)
    return [QUERY, number_token(i), number_token(0)]


def expected_counting(x: Sequence[int], i: int) -> int:
    """Number 1 if x_i = 1 else number 0 (so, as a token, x_i)."""
    return expected_index(x, i)


def alice_istree(x: Sequence[int]) -> list[int]:
    """IsTree prefix: ``[BOS]`` and the edges ``(j+1) - x_j`` (v_j to hub a = 1 if
    x_j = 1, to hub b = 0 otherwise), j = 1..n; no [EOS] (Bob closes)."""
    return hub_prefix(check_bits(x), 2)


def bob_istree(i: int, n: int) -> list[int]:
    """IsTree suffix: ``(n+2) - (i+1)  (n+2) - 1  [EOS]``: w to v_i and to hub a."""
    i, n = check_query(i, n)
    return hub_suffix(i, 0, n, 2)


def expected_istree(x: Sequence[int], i: int) -> int:
    """[TRUE] iff x_i = 0 (the negation of the Index answer)."""
    x = check_bits(x)
    i, _ = check_query(i, len(x))
    return TRUE if x[i - 1] == 0 else FALSE


def expected_bits_batch(xs: Any) -> np.ndarray:
    """``expected_index`` (= AR's, c-gram's, Counting's) for every row and every i:
    the number token of x_i, as int64 ``[B, n]``."""
    return number_token(0) + _bit_matrix(xs).astype(np.int64)


def expected_istree_batch(xs: Any) -> np.ndarray:
    """``expected_istree`` for every row and every i: [TRUE] iff x_i = 0."""
    return np.where(_bit_matrix(xs) == 0, TRUE, FALSE).astype(np.int64)


# ------------------------------------------------------------------ promise checks
# Plain-Python validators of the task formats (conventions.md), written here so
# the reductions are checked without importing ``checks``. Each returns None if
# the instance is valid, else a sentence saying why not.


def _numbers(tokens: Sequence[int]) -> bool:
    return all(t >= NUMBER_BASE for t in tokens)


def _split_query(tokens: Sequence[int]) -> tuple[list[int], list[int]] | str:
    toks = [int(t) for t in tokens]
    if not toks or toks[0] != BOS:
        return "position 0 is not [BOS]"
    if QUERY not in toks:
        return "no [QUERY] token"
    q = toks.index(QUERY)
    data, suffix = toks[1:q], toks[q + 1:]
    if not _numbers(data) or not _numbers(suffix):
        return "a data or query token is not a number"
    return [t - NUMBER_BASE for t in data], [t - NUMBER_BASE for t in suffix]


def index_promise(tokens: Sequence[int]) -> str | None:
    parts = _split_query(tokens)
    if isinstance(parts, str):
        return parts
    data, suffix = parts
    if len(suffix) != 1:
        return f"[QUERY] must be followed by one token, got {len(suffix)}"
    if not 1 <= suffix[0] <= len(data):
        return f"query index {suffix[0]} outside 1..{len(data)}"
    return None


def cgram_promise(tokens: Sequence[int], c: int) -> str | None:
    parts = _split_query(tokens)
    if isinstance(parts, str):
        return parts
    data, gram = parts
    width = c - 1
    if len(gram) != width:
        return f"[QUERY] must be followed by c-1 = {width} tokens, got {len(gram)}"
    n = len(data)
    for s in range(n - width):  # 0-based start; the successor data[s+width] exists
        if data[s:s + width] == gram:
            return None
    return f"query gram {gram} has no occurrence ending at or before x_{n - 1}"


def ar_promise(tokens: Sequence[int]) -> str | None:
    return cgram_promise(tokens, 2)


def counting_promise(tokens: Sequence[int]) -> str | None:
    parts = _split_query(tokens)
    if isinstance(parts, str):
        return parts
    data, suffix = parts
    if len(suffix) != 2:
        return f"[QUERY] must be followed by q t, got {len(suffix)} tokens"
    if not 0 <= suffix[1] <= len(data):
        return f"threshold t = {suffix[1]} outside 0..{len(data)}"
    return None


def parse_istree(tokens: Sequence[int]) -> tuple[int, list[tuple[int, int]]]:
    """``[BOS] u - v u - v ... [EOS]`` (``~`` also accepted) -> ``(n_nodes, edges)``.

    ``n_nodes`` = 1 + the largest vertex mentioned (0 if there is no edge): the
    token format carries no vertex count, so this is the convention used when
    handing an instance to a ``reference_label(n_nodes, edges)`` callable.
    ValueError if the format is broken.

    >>> parse_istree([0, 34, 7, 32, 1])
    (3, [(2, 0)])
    """
    toks = [int(t) for t in tokens]
    if len(toks) < 2 or toks[0] != BOS or toks[-1] != EOS:
        raise ValueError("IsTree instance must be [BOS] u - v ... [EOS]")
    body = toks[1:-1]
    if len(body) % 3:
        raise ValueError(f"IsTree body has {len(body)} tokens, not a multiple of 3 (u - v triples)")
    edges = []
    for k in range(0, len(body), 3):
        u, sep, v = body[k:k + 3]
        if sep not in (DASH, TILDE) or u < NUMBER_BASE or v < NUMBER_BASE:
            raise ValueError(f"IsTree edge at positions {k + 1}..{k + 3} is not 'u - v'")
        edges.append((u - NUMBER_BASE, v - NUMBER_BASE))
    n_nodes = 1 + max((max(e) for e in edges), default=-1)
    return n_nodes, edges


def istree_promise(tokens: Sequence[int]) -> str | None:
    """None for a well-formed simple graph (no self-loop, no repeated edge)."""
    try:
        _, edges = parse_istree(tokens)
    except ValueError as exc:
        return str(exc)
    seen = set()
    for k, (u, v) in enumerate(edges):
        if u == v:
            return f"edge {k} is a self-loop {u} - {v}"
        if frozenset((u, v)) in seen:
            return f"edge {k} ({u} - {v}) repeats an earlier edge"
        seen.add(frozenset((u, v)))
    return None


def istree_vertex_count(n: int, hubs: int = 2) -> int:
    """N of the hub gadget for Index length n: hubs + n + 1 (hubs, v_1..v_n, w)."""
    return hubs + n + 1


def istree_answer_from_label(reference_label: Callable[[int, list[tuple[int, int]]], bool],
                             n_nodes: int | None = None) -> AnswerFn:
    """Adapt ``reference_label(n_nodes, edges) -> bool`` to a token-level answer
    callable returning [TRUE] / [FALSE]. ``n_nodes`` fixed (e.g.
    :func:`istree_vertex_count`), or None for 1 + the largest vertex mentioned
    (:func:`parse_istree`)."""

    def answer(tokens: Sequence[int]) -> int:
        parsed_nodes, edges = parse_istree(tokens)
        nodes = parsed_nodes if n_nodes is None else n_nodes
        return TRUE if reference_label(nodes, edges) else FALSE

    answer.__name__ = f"istree_answer_from_label({getattr(reference_label, '__name__', 'label')})"
    return answer


# ------------------------------------------------------------------ the container


@dataclass(frozen=True)
class Reduction:
    """An Index -> task reduction split between Alice and Bob.

    * ``alice(x) -> list[int]``: the prefix, a function of the bits x only;
    * ``bob(i, n) -> list[int]``: the suffix, a function of i (and n) only;
    * ``expected(x, i) -> int``: the answer token the task demands;
    * ``answer_tokens``: the tokens a model may answer with (they end its CoT);
    * ``promise(tokens) -> str | None``: the task's validity check;
    * ``alice_batch(xs) -> int64 [B, L]`` (optional): ``alice`` on every row of
      a bit matrix ``[B, n]`` at once (must equal it row by row; the witness
      finder uses it to build random prefixes quickly).
    * ``expected_batch(xs) -> int64 [B, n]`` (optional): ``expected(x, i)`` for
      every row x of a bit matrix ``[B, n]`` and every i = 1..n (must equal it
      entry by entry; the streamed one-way CC of checks/verify/checks_separation.py
      uses it to hash the rows of the communication matrix at n up to 20).
    """

    name: str
    alice: Callable[[Sequence[int]], list[int]]
    bob: Callable[[int, int], list[int]]
    expected: Callable[[Sequence[int], int], int]
    answer_tokens: tuple[int, ...]
    promise: Callable[[Sequence[int]], str | None]
    description: str = ""
    alice_batch: Callable[[Any], np.ndarray] | None = None
    expected_batch: Callable[[Any], np.ndarray] | None = None

    def prefixes(self, xs: Any) -> np.ndarray:
        """Alice's prefixes of the rows of the bit matrix ``xs`` as int64 ``[B, L]``
        (``alice_batch`` if given, else ``alice`` row by row; equal lengths needed)."""
        if self.alice_batch is not None:
            return self.alice_batch(xs)
        rows = [self.alice(tuple(int(b) for b in row)) for row in _bit_matrix(xs)]
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"{self.name}: Alice's prefixes have different lengths; no [B, L] array")
        return np.asarray(rows, dtype=np.int64)

    def instance(self, x: Sequence[int], i: int) -> np.ndarray:
        """``alice(x) + bob(i, len(x))`` as a 1-D int64 array."""
        x = check_bits(x)
        return np.asarray(self.alice(x) + self.bob(i, len(x)), dtype=np.int64)


INDEX = Reduction("index", alice_index, bob_index, expected_index,
                  (number_token(0), number_token(1)), index_promise,
                  "identity: [BOS] x_1..x_n | [QUERY] i -> x_i", index_prefix_batch, expected_bits_batch)
AR = Reduction("ar", alice_ar, bob_ar, expected_ar,
               (number_token(0), number_token(1)), ar_promise,
               "[BOS] 2 x_1 .. (n+1) x_n | [QUERY] (i+1) -> x_i",
               partial(keyvalue_prefix_batch, c=2), expected_bits_batch)
COUNTING = Reduction("counting", alice_counting, bob_counting, expected_counting,
                     (number_token(0), number_token(1)), counting_promise,
                     "[BOS] y_1..y_n (y_j = j if x_j else 0) | [QUERY] i 0 -> [count(i) > 0] = x_i",
                     counting_prefix_batch, expected_bits_batch)
ISTREE = Reduction("istree", alice_istree, bob_istree, expected_istree,
                   (TRUE, FALSE), istree_promise,
                   "hub gadget: v_j - hub x_j | w - v_i, w - hub 1 [EOS] -> tree iff x_i = 0",
                   hub_prefix_batch, expected_istree_batch)


def cgram_reduction(c: int = 3) -> Reduction:
    """The c-gram reduction for a fixed c >= 2 (c = 2 gives the AR tokens)."""
    c = check_c(c)
    return Reduction(
        f"cgram(c={c})", partial(alice_cgram, c=c), partial(bob_cgram, c=c), expected_cgram,
        (number_token(0), number_token(1)), partial(cgram_promise, c=c),
        f"[BOS] K_1 x_1 .. K_n x_n | [QUERY] K_i -> x_i, K_j = (j+1) x {c - 1}",
        partial(keyvalue_prefix_batch, c=c), expected_bits_batch,
    )


CGRAM = cgram_reduction(3)

REDUCTIONS: dict[str, Reduction] = {r.name: r for r in (INDEX, AR, CGRAM, COUNTING, ISTREE)}
"""The reductions by name (c-gram with c = 3; others via :func:`cgram_reduction`)."""


# ------------------------------------------------------------------ the checker


@dataclass
class ReductionCheck:
    """Outcome of a passing :func:`check_reduction`."""

    reduction: str
    n: int
    instances: int
    answers: dict[int, int] = field(default_factory=dict)
    """How often each answer token was expected (both answers must occur for n >= 1)."""
    prefix_lengths: tuple[int, ...] = ()
    suffix_lengths: tuple[int, ...] = ()
    seconds: float = 0.0


class ReductionError(AssertionError):
    """A counterexample: ``answer_fn(alice(x) + bob(i, n)) != expected(x, i)``, or an
    instance that breaks the task's promise."""

    def __init__(self, message: str, x: Bits, i: int, tokens: list[int], got: Any, expected: int):
        super().__init__(message)
        self.x, self.i, self.tokens, self.got, self.expected = x, i, tokens, got, expected


def check_reduction(red: Reduction, n: int, answer_fn: AnswerFn, *, check_promise: bool = True
                    ) -> ReductionCheck:
    """Verify ``answer_fn(prefix + suffix) == red.expected(x, i)`` for every
    x in {0,1}^n (lexicographic, x_1 most significant) and every i in 1..n.

    Alice's prefixes are built once per x and Bob's suffixes once per i, so the
    instance really is the concatenation of two independent halves. With
    ``check_promise`` each instance is also validated by ``red.promise`` first.
    Raises :class:`ReductionError` with the first counterexample; ValueError if
    n > EXHAUSTIVE_MAX_N ("n too large for exhaustive mode").

    Returns a :class:`ReductionCheck` (``instances`` = n * 2^n).
    """
    if not isinstance(red, Reduction):
        raise TypeError(f"red must be a Reduction, got {type(red).__name__}")
    n = integer_arg(n, "n")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n > EXHAUSTIVE_MAX_N:
        raise ValueError(f"n too large for exhaustive mode: n = {n} > {EXHAUSTIVE_MAX_N} "
                         f"({n} * 2^{n} instances)")
    if not callable(answer_fn):
        raise TypeError("answer_fn must be callable: tokens -> answer token")
    start = time.perf_counter()
    suffixes = [red.bob(i, n) for i in range(1, n + 1)]
    counts: dict[int, int] = {}
    prefix_lengths = set()
    total = 0
    for x in itertools.product((0, 1), repeat=n):
        prefix = red.alice(x)
        prefix_lengths.add(len(prefix))
        for i, suffix in enumerate(suffixes, start=1):
            toks = prefix + suffix
            want = red.expected(x, i)
            if check_promise:
                why = red.promise(toks)
                if why is not None:
                    raise ReductionError(f"{red.name}: instance for x={x}, i={i} breaks the promise: {why}",
                                         x, i, toks, None, want)
            got = answer_fn(np.asarray(toks, dtype=np.int64))
            if got != want:
                raise ReductionError(
                    f"{red.name}: answer_fn gives {got!r}, expected {want} for x={x}, i={i}; tokens {toks}",
                    x, i, toks, got, want)
            counts[want] = counts.get(want, 0) + 1
            total += 1
    return ReductionCheck(red.name, n, total, counts, tuple(sorted(prefix_lengths)),
                          tuple(sorted({len(s) for s in suffixes})), time.perf_counter() - start)
