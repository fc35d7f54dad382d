"""Shared pieces of the retrieval/counting task layer (docs/theory.md §3, docs/conventions.md).

What lives here:

* :class:`TaskBatch`, the container every ``generate`` / ``enumerate_all`` returns;
* argument checks (``check_rng``, ``check_int``, ``check_alphabet``, ...) that raise
  a ``TypeError`` for a wrong type and a ``ValueError`` naming the argument and the
  allowed range otherwise;
* :func:`split_instance`, the plain-Python parser the ``reference`` functions use
  (it names the offending position on a malformed instance);
* vectorised builders: :func:`all_sequences`, :func:`assemble`,
  :func:`retrievable_first_occurrences`, :func:`sample_true_uniform`,
  :func:`retrieval_instances`.

Layout of every instance here (conventions.md)::

    position   0      1 .. n       n+1       n+2 .. L-1
    token      [BOS]  x_1 .. x_n   [QUERY]   suffix (task specific, numbers)

with x_j = ``number_token(value)`` and values in ``0 .. alphabet-1``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, QUERY, SPECIAL_NAMES

ENUMERATION_LIMIT = 5_000_000
"""Default cap on the number of instances (and of data sequences) an
``enumerate_all`` may build. A batch of that size with n = 10 takes about
5e6 * 13 * 8 bytes = 520 MB, so keep exhaustive checks to small n; callers may
pass ``limit=`` explicitly to go higher or lower."""


# --------------------------------------------------------------------------- batch


@dataclass(frozen=True, eq=False)
class TaskBatch:
    """A batch of task instances of one length.

    * ``tokens``: int64 ``[batch, L]`` token ids, one instance per row;
    * ``answers``: int64 ``[batch]`` answer token ids;
    * ``params``: the generation parameters (``task``, ``n``, ``alphabet``,
      ``max_number`` = largest number token used, so ``Vocab(max_number)`` covers
      the batch, ...) plus per-instance arrays of length ``batch`` to slice
      results by (e.g. ``first_position`` for AR).

    Both arrays are made read-only; copy them to build corrupted variants.

    Example::

        >>> b = TaskBatch(np.array([[0, 33, 9, 33]]), np.array([33]), {"task": "index"})
        >>> len(b), b.row(0)
        (1, ([0, 33, 9, 33], 33))
    """

    tokens: np.ndarray
    answers: np.ndarray
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens)
        answers = np.asarray(self.answers)
        if tokens.ndim != 2:
            raise ValueError(f"TaskBatch.tokens must be 2-D [batch, L], got shape {tokens.shape}")
        if answers.ndim != 1:
            raise ValueError(f"TaskBatch.answers must be 1-D [batch], got shape {answers.shape}")
        if tokens.shape[0] != answers.shape[0]:
            raise ValueError(
                f"TaskBatch: {tokens.shape[0]} token rows but {answers.shape[0]} answers"
            )
        if tokens.dtype != np.int64 or answers.dtype != np.int64:
            raise ValueError(
                f"TaskBatch arrays must be int64, got tokens {tokens.dtype}, answers {answers.dtype}"
            )
        tokens = tokens.view()
        answers = answers.view()
        tokens.setflags(write=False)
        answers.setflags(write=False)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "answers", answers)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def length(self) -> int:
        """L, the number of tokens per instance."""
        return int(self.tokens.shape[1])

    def row(self, k: int) -> tuple[list[int], int]:
        """Instance ``k`` as ``(list of Python ints, answer int)``."""
        return [int(t) for t in self.tokens[k]], int(self.answers[k])

    def rows(self) -> Iterator[tuple[list[int], int]]:
        """All instances, in order, as ``(tokens list, answer)``."""
        for k in range(len(self)):
            yield self.row(k)


# ----------------------------------------------------------------- argument checks


def check_rng(rng: Any) -> np.random.Generator:
    """Return ``rng`` if it is a ``numpy.random.Generator``, else raise TypeError.

    Generators take their randomness only from this object (never the global
    ``np.random`` / ``random`` state), so a seed fixes the batch.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def check_int(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as a Python int within ``[minimum, maximum]``.

    TypeError for a non-integer (floats and bools are refused; numpy integers are
    accepted), ValueError naming ``name`` and the range otherwise.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if minimum is not None and v < minimum:
        hi = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be >= {minimum}{hi}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return int(v)


def check_n(n: Any, minimum: int, task: str) -> int:
    """Length of the data sequence; ``minimum`` is the smallest n with a valid instance."""
    return check_int(n, f"{task}: n (length of x_1..x_n)", minimum=minimum)


def check_alphabet(alphabet: Any, task: str, minimum: int = 1) -> int:
    """Alphabet size a: the data symbols are the numbers 0..a-1."""
    return check_int(alphabet, f"{task}: alphabet (size a, symbols 0..a-1)", minimum=minimum)


def check_batch(batch: Any, task: str) -> int:
    return check_int(batch, f"{task}: batch", minimum=1)


def check_enumeration_size(count: int, limit: Any, what: str) -> None:
    """Raise ValueError if ``count`` (a Python int) exceeds ``limit``."""
    limit = check_int(limit, "limit", minimum=0)
    if count > limit:
        raise ValueError(
            f"{what}: {count} exceeds the enumeration limit {limit} "
            f"(pass limit= explicitly to raise it, or use a smaller n / alphabet)"
        )


# ------------------------------------------------------------ parsing (references)


def token_list(tokens: Any, task: str) -> list[int]:
    """``tokens`` (a 1-D sequence / array of integers) as a list of Python ints."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1:
            raise ValueError(f"{task}: an instance is a 1-D token sequence, got shape {tokens.shape}")
        if tokens.dtype.kind in "iu":              # integer dtypes (bool is kind "b")
            return tokens.tolist()                 # Python ints
    elif type(tokens) is list and all(type(t) is int for t in tokens):
        return list(tokens)                        # already what the loop below returns
    out = []
    for pos, t in enumerate(tokens):
        if isinstance(t, (bool, np.bool_)):
            raise TypeError(f"{task}: position {pos}: token must be an integer id, got {t!r}")
        try:
            out.append(int(operator.index(t)))
        except TypeError:
            raise TypeError(
                f"{task}: position {pos}: token must be an integer id, got {type(t).__name__} {t!r}"
            ) from None
    return out


def describe_token(t: int) -> str:
    if t >= NUMBER_BASE:
        return f"number {t - NUMBER_BASE} (id {t})"
    if t in SPECIAL_NAMES:
        return f"{SPECIAL_NAMES[t]} (id {t})"
    return f"id {t} (not a vocabulary token)"


def split_instance(tokens: Any, task: str, suffix_len: int | None) -> tuple[list[int], list[int]]:
    """Parse ``[BOS] x_1..x_n [QUERY] s_1..s_k`` into ``(values of x, values of s)``.

    Plain Python; every token after ``[BOS]`` must be a number token except the
    single ``[QUERY]``. ``suffix_len`` is the required k (None: any k >= 1).
    Raises ValueError naming the first offending position.

    Example::

        >>> split_instance([0, 33, 32, 9, 33], "Index", 1)
        ([1, 0], [1])
    """
    toks = token_list(tokens, task)
    if not toks:
        raise ValueError(f"{task}: empty instance, expected [BOS] at position 0")
    if toks[0] != BOS:
        raise ValueError(f"{task}: position 0: expected [BOS] (id {BOS}), got {describe_token(toks[0])}")
    q_pos = None
    for pos in range(1, len(toks)):
        t = toks[pos]
        if t == QUERY:
            q_pos = pos
            break
        if t < NUMBER_BASE:
            raise ValueError(
                f"{task}: position {pos}: expected a data number or [QUERY], got {describe_token(t)}"
            )
    if q_pos is None:
        raise ValueError(f"{task}: no [QUERY] token (id {QUERY}) after [BOS] in {len(toks)} tokens")
    data = [t - NUMBER_BASE for t in toks[1:q_pos]]
    suffix_tokens = toks[q_pos + 1:]
    for off, t in enumerate(suffix_tokens):
        if t < NUMBER_BASE:
            raise ValueError(
                f"{task}: position {q_pos + 1 + off}: expected a number after [QUERY], "
                f"got {describe_token(t)}"
            )
    if suffix_len is not None and len(suffix_tokens) != suffix_len:
        raise ValueError(
            f"{task}: [QUERY] at position {q_pos} must be followed by exactly {suffix_len} "
            f"token(s) (positions {q_pos + 1}..{q_pos + suffix_len}), got {len(suffix_tokens)}"
        )
    if suffix_len is None and not suffix_tokens:
        raise ValueError(f"{task}: nothing after [QUERY] at position {q_pos} (the instance ends there)")
    return data, [t - NUMBER_BASE for t in suffix_tokens]


# ------------------------------------------------------------- vectorised builders


def all_sequences(n: int, alphabet: int) -> np.ndarray:
    """Every sequence in ``{0..a-1}^n`` as int64 ``[a^n, n]``, lexicographic order
    (x_1 most significant).

    Example::

        >>> all_sequences(2, 2).tolist()
        [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    count = alphabet ** n
    codes = np.arange(count, dtype=np.int64)
    out = np.empty((count, n), dtype=np.int64)
    for col in range(n - 1, -1, -1):
        out[:, col] = codes % alphabet
        codes //= alphabet
    return out


def assemble(data: np.ndarray, suffix: np.ndarray) -> np.ndarray:
    """Token rows ``[BOS] x_1..x_n [QUERY] suffix``.

    ``data``: int ``[B, n]`` symbol values; ``suffix``: int ``[B, k]`` *token ids*.
    Returns int64 ``[B, n + 2 + k]``.
    """
    data = np.asarray(data, dtype=np.int64)
    suffix = np.asarray(suffix, dtype=np.int64)
    b, n = data.shape
    k = suffix.shape[1]
    out = np.empty((b, n + 2 + k), dtype=np.int64)
    out[:, 0] = BOS
    out[:, 1:n + 1] = data + NUMBER_BASE
    out[:, n + 1] = QUERY
    out[:, n + 2:] = suffix
    return out


def retrievable_first_occurrences(x: np.ndarray, width: int) -> np.ndarray:
    """bool ``[B, n - width]``: entry ``[b, s]`` (0-based start s) is True iff the
    window ``x[b, s:s+width]`` has a successor token (``s + width <= n - 1``) and does
    not occur at any earlier start ``s' < s`` in row b.

    These are exactly the valid (width+1)-gram retrieval queries of the row, one per
    distinct window: start 0 is always True when ``n > width``.

    Example (AR, width 1): ``x = [2, 0, 2, 1]`` -> ``[True, True, False]`` (the
    last position has no successor and is not a column).
    """
    x = np.asarray(x, dtype=np.int64)
    b, n = x.shape
    m = n - width
    if m <= 0:
        return np.zeros((b, max(m, 0)), dtype=bool)
    # windows[b, s, k] = x[b, s + k]
    windows = np.stack([x[:, k:k + m] for k in range(width)], axis=2)
    rows = np.repeat(np.arange(b, dtype=np.int64), m)
    starts = np.tile(np.arange(m, dtype=np.int64), b)
    flat = windows.reshape(b * m, width)
    # Sort by (row, window contents, start): the last key passed to lexsort is the
    # primary one. Within a group of equal (row, window) the smallest start comes
    # first, independently of the sort's stability.
    keys = [starts] + [flat[:, k] for k in range(width - 1, -1, -1)] + [rows]
    order = np.lexsort(keys)
    srow = rows[order]
    swin = flat[order]
    new_group = np.ones(b * m, dtype=bool)
    new_group[1:] = (srow[1:] != srow[:-1]) | np.any(swin[1:] != swin[:-1], axis=1)
    mask = np.zeros(b * m, dtype=bool)
    mask[order[new_group]] = True
    return mask.reshape(b, m)


def sample_true_uniform(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """For each row of the bool ``mask`` (each with at least one True), a column
    index drawn uniformly among its True entries. Consumes one
    ``rng.integers(0, count_per_row)`` call. Returns int64 ``[B]``."""
    counts = mask.sum(axis=1)
    if np.any(counts == 0):
        raise ValueError("sample_true_uniform: a row has no True entry")
    u = rng.integers(0, counts)
    cum = np.cumsum(mask, axis=1)
    return np.argmax(mask & (cum == (u + 1)[:, None]), axis=1).astype(np.int64)


def retrieval_instances(x: np.ndarray, starts: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and answers of the retrieval instances ``(x[b], window at starts[b])``.

    The query is the window ``x[b, s:s+width]`` (s = ``starts[b]``, 0-based), the
    answer the token ``x[b, s + width]``. The caller guarantees that s is the window's
    first occurrence and ``s + width <= n - 1``.
    """
    x = np.asarray(x, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    ar = np.arange(x.shape[0])
    query = np.stack([x[ar, starts + k] for k in range(width)], axis=1) + NUMBER_BASE
    answers = x[ar, starts + width] + NUMBER_BASE
    return assemble(x, query.reshape(x.shape[0], width)), answers.astype(np.int64)


def enumeration_sequences(n: int, alphabet: int, limit: Any, what: str) -> np.ndarray:
    """``all_sequences(n, alphabet)`` after checking ``a^n <= limit``."""
    check_enumeration_size(alphabet ** n, limit, f"{what}: number of sequences {alphabet}^{n}")
    return all_sequences(n, alphabet)


def as_strategy_bounds(n_min: Any, n_max: Any, minimum: int, task: str) -> tuple[int, int]:
    """Validate the ``n_min <= n_max`` range of a hypothesis strategy."""
    lo = check_int(n_min, f"{task}: n_min", minimum=minimum)
    hi = check_int(n_max, f"{task}: n_max", minimum=lo)
    return lo, hi


def first_occurrence_starts(x: Sequence[int], width: int) -> list[int]:
    """Plain-Python list of the 0-based starts s with ``s + width <= len(x) - 1``
    where the window ``x[s:s+width]`` occurs for the first time (strategies use it)."""
    seen = set()
    out = []
    for s in range(len(x) - width):
        w = tuple(x[s:s + width])
        if w not in seen:
            seen.add(w)
            out.append(s)
    return out


def sample_retrieval(rng: np.random.Generator, n: int, batch: int, alphabet: int, width: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shared sampler of AR (width 1) and c-gram retrieval (width c-1).

    x uniform over ``{0..a-1}^n`` (one ``rng.integers(0, a, (batch, n))`` call); then
    the query start s uniform among the row's :func:`retrievable_first_occurrences`
    (one :func:`sample_true_uniform` call). Requires ``n >= width + 1``, so s = 0 is
    always available and no rejection is needed.

    Returns ``(x [B, n], starts [B] (0-based), number of valid starts [B])``.
    """
    x = rng.integers(0, alphabet, size=(batch, n), dtype=np.int64)
    mask = retrievable_first_occurrences(x, width)
    starts = sample_true_uniform(rng, mask)
    return x, starts, mask.sum(axis=1).astype(np.int64)


def enumerate_retrieval(n: int, alphabet: int, width: int, limit: Any, what: str
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Every valid retrieval instance ``(x, start)``: all sequences in lexicographic
    order, and for each the first-occurrence starts in increasing order.
    ValueError if ``a^n`` or the number of instances exceeds ``limit``."""
    seqs = enumeration_sequences(n, alphabet, limit, what)
    mask = retrievable_first_occurrences(seqs, width)
    check_enumeration_size(int(mask.sum()), limit, f"{what}: number of instances")
    rows, starts = np.nonzero(mask)
    return seqs[rows], starts.astype(np.int64)
