"""Concrete failures of bounded-memory RNNs: fooling pairs (claims T4.6-low,
T4.7-low; docs/theory.md §5).

If an RNN reaches the same state after Alice's prefixes for x != x', then for a
query i with x_i != x'_i it behaves identically on ``alice(x) + bob(i)`` and
``alice(x') + bob(i)``, whatever CoT it writes, though they demand different
answers. :func:`find_witness` finds such a pair and returns the failing
instance(s) as a :class:`Witness`, always re-verified from scratch. Search modes:
``exhaustive`` (all 2^n prefixes, shared prefixes reused) and ``birthday``
(seeded random prefixes, bounded memory); either says ``found=False`` when it
finds no collision. An optional ``batch_states`` speeds the search; every pair
is re-verified with ``step`` and ``state_key``, and a mismatch raises
:class:`ProtocolViolation`.

Example::

    >>> from rnngap.lowerbounds.targets_toy import IndexRegisterRNN
    >>> from rnngap.lowerbounds.reductions import INDEX
    >>> w = find_witness(IndexRegisterRNN(3), INDEX, 4)
    >>> w.found, w.x, w.x_prime, w.i, w.wrong
    (True, (0, 0, 0, 0), (0, 0, 0, 1), 4, ("x'",))

Details (the search modes, ``batch_states``): docs/internals/lowerbounds.md#witness
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from rnngap.constructions.build.protocol import RNN, feed, run_rnn
from rnngap.constructions.models.targets import register_target

from .reductions import INDEX, Reduction, integer_arg, check_bits

EXHAUSTIVE_MAX_N = 22
"""Largest n of the exhaustive mode (2^22 prefixes; a dict of up to 4M keys)."""

DEFAULT_MAX_STORED = 1 << 21
"""Default cap on the birthday hash map (entries; ~200 bytes each, ~400 MB)."""

DEFAULT_MAX_DRAWS_CAP = 1 << 24
"""The default birthday budget is min(this, 16 * 2^(s/2)) draws."""

ProgressFn = Callable[[int, int], None]


class ProtocolViolation(RuntimeError):
    """The model does not behave as a deterministic RNN with the declared memory:
    equal state keys but different behaviour, keys longer than ``state_bits``
    allow, more distinct keys than 2^state_bits, or ``batch_states``
    disagreeing with ``state_key``."""


@dataclass
class Witness:
    """Outcome of a fooling-pair search.

    If ``found``: prefixes ``alice(x)`` and ``alice(x_prime)`` lead to the same
    ``state_key``; ``tokens`` / ``tokens_prime`` are the full instances for query
    ``i``; ``answer`` / ``answer_prime`` are the model's final answers (equal;
    None if the CoT limit was hit), ``cot`` / ``cot_prime`` its generated CoTs,
    ``expected`` / ``expected_prime`` the task's answers (different);
    ``wrong`` names the instance(s) answered wrongly (``"x"``, ``"x'"``).
    If not found, the pair fields are None and ``how`` says what was searched.
    """

    found: bool
    reduction: str
    n: int
    mode: str
    state_bits: int
    states_explored: int
    seconds: float
    how: str
    seed: int | None = None
    x: tuple[int, ...] | None = None
    x_prime: tuple[int, ...] | None = None
    i: int | None = None
    tokens: np.ndarray | None = None
    tokens_prime: np.ndarray | None = None
    answer: int | None = None
    answer_prime: int | None = None
    cot: list[int] = field(default_factory=list)
    cot_prime: list[int] = field(default_factory=list)
    expected: int | None = None
    expected_prime: int | None = None
    state_key: Hashable | None = None
    wrong: tuple[str, ...] = ()

    @property
    def pigeonhole(self) -> bool:
        """True when 2^n prefixes exceed the 2^state_bits declared states."""
        return self.state_bits < self.n

    @property
    def failing(self) -> list[tuple[np.ndarray, int | None, int]]:
        """The wrongly answered instances as ``(tokens, model answer, expected)``."""
        out = []
        for label in self.wrong:
            if label == "x":
                out.append((self.tokens, self.answer, self.expected))
            else:
                out.append((self.tokens_prime, self.answer_prime, self.expected_prime))
        return out


# ----------------------------------------------------------------- validation


def _check_rnn(rnn: Any) -> int:
    missing = [m for m in ("state_bits", "initial_state", "step", "output", "state_key")
               if not hasattr(rnn, m)]
    if missing or not isinstance(rnn, RNN):
        raise TypeError(f"{type(rnn).__name__} does not follow the RNN protocol "
                        f"(constructions/build/protocol.py); missing {missing}")
    bits = integer_arg(rnn.state_bits, "rnn.state_bits")
    if bits < 0:
        raise ValueError(f"rnn.state_bits must be >= 0, got {bits}")
    return bits


def _check_common(rnn: Any, reduction: Any, n: Any) -> tuple[int, int]:
    bits = _check_rnn(rnn)
    if not isinstance(reduction, Reduction):
        raise TypeError(f"reduction must be a lowerbounds.reductions.Reduction, got {type(reduction).__name__}")
    n = integer_arg(n, "n")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return bits, n


def _check_max_cot(max_cot: Any) -> int:
    max_cot = integer_arg(max_cot, "max_cot")
    if max_cot < 0:
        raise ValueError(f"max_cot must be >= 0, got {max_cot}")
    return max_cot


def _check_key(key: Hashable, state_bits: int) -> None:
    if isinstance(key, (bytes, bytearray)) and len(key) * 8 > 8 * math.ceil(state_bits / 8):
        raise ProtocolViolation(
            f"state_key has {len(key)} bytes but state_bits = {state_bits} allows at most "
            f"{math.ceil(state_bits / 8)}")


def _check_count(count: int, state_bits: int) -> None:
    if state_bits < 64 and count > (1 << state_bits):
        raise ProtocolViolation(
            f"{count} distinct state keys exceed the 2^{state_bits} states that state_bits = "
            f"{state_bits} allows")


def _bits_of(index: int, n: int) -> tuple[int, ...]:
    """The x at position ``index`` of the lexicographic order (x_1 most significant)."""
    return tuple((index >> (n - 1 - k)) & 1 for k in range(n))


def _bit_rows(lo: int, hi: int, n: int) -> np.ndarray:
    """uint8 ``[hi-lo, n]``: the x number lo..hi-1 of the lexicographic order."""
    idx = np.arange(lo, hi, dtype=np.int64)
    shifts = np.arange(n - 1, -1, -1, dtype=np.int64)
    return ((idx[:, None] >> shifts[None, :]) & 1).astype(np.uint8)


def _prefix_array(reduction: Reduction, xs: np.ndarray) -> np.ndarray | None:
    """Alice's prefixes of the rows of ``xs`` as ``[B, L]``, or None if ragged."""
    try:
        return reduction.prefixes(xs)
    except ValueError:
        return None


BATCH_WORK = 1 << 17
"""Prefix tokens per ``batch_states`` call, at most (at least one row): a long
kernel call holds Python off, so a batch is fed in slices of rows and Ctrl-C /
SIGTERM are seen between them (a whole birthday batch at n = 4096, 4096 rows of
4097 tokens, was one call of about 40 s). The keys are per row, so the slices
change nothing."""


def _batch_keys(rnn: Any, prefixes: np.ndarray) -> list[Hashable]:
    """Hashable keys of ``rnn.batch_states(prefixes)`` (optional protocol
    extension), called on slices of at most :data:`BATCH_WORK` tokens."""
    rows = max(1, BATCH_WORK // max(1, prefixes.shape[1]))
    parts = [np.asarray(rnn.batch_states(prefixes[lo:lo + rows])) for lo in range(0, prefixes.shape[0], rows)]
    for lo, part in zip(range(0, prefixes.shape[0], rows), parts):
        want = min(rows, prefixes.shape[0] - lo)
        if part.ndim not in (1, 2) or part.shape[0] != want or part.shape[1:] != parts[0].shape[1:]:
            raise ProtocolViolation(
                f"batch_states returned shape {part.shape} for {want} prefixes (need [B] or [B, w])")
    keys = np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else
                                                          np.asarray(rnn.batch_states(prefixes)))
    if keys.ndim not in (1, 2) or keys.shape[0] != prefixes.shape[0]:
        raise ProtocolViolation(
            f"batch_states returned shape {keys.shape} for {prefixes.shape[0]} prefixes (need [B] or [B, w])")
    if keys.ndim == 1:
        return keys.tolist()
    keys = np.ascontiguousarray(keys)
    return [row.tobytes() for row in keys]


# ---------------------------------------------------------------- verification


def verify_fooling_pair(rnn: RNN, reduction: Reduction, x: Sequence[int], x_prime: Sequence[int], *,
                        max_cot: int = 0, answer_tokens: Sequence[int] | None = None,
                        mode: str = "given", how: str = "pair given by the caller",
                        states_explored: int = 0, seconds: float = 0.0, seed: int | None = None
                        ) -> Witness:
    """Re-run the model from scratch on a candidate pair and build the :class:`Witness`.

    Checks that both prefixes give the same ``state_key``, picks the first i with
    ``expected(x, i) != expected(x', i)``, runs ``run_rnn`` on both full instances
    (``answer_tokens`` default: the reduction's; ``max_cot`` generated tokens
    allowed before the answer), and asserts the runs coincide, so that at least
    one instance is answered wrongly. Raises :class:`ProtocolViolation` if the keys
    differ or the runs differ (non-deterministic model or unfaithful state_key),
    ValueError if x == x' or no query separates them.
    """
    start = time.perf_counter()
    x, x_prime = check_bits(x), check_bits(x_prime)
    state_bits, n = _check_common(rnn, reduction, len(x))
    if len(x_prime) != n:
        raise ValueError(f"x and x' must have the same length, got {n} and {len(x_prime)}")
    if x == x_prime:
        raise ValueError("a fooling pair needs x != x'")
    max_cot = _check_max_cot(max_cot)
    answers = tuple(reduction.answer_tokens if answer_tokens is None else (int(a) for a in answer_tokens))
    key = rnn.state_key(feed(rnn, reduction.alice(x)))
    key_prime = rnn.state_key(feed(rnn, reduction.alice(x_prime)))
    _check_key(key, state_bits)
    if key != key_prime:
        raise ProtocolViolation(
            f"re-running the prefixes of x={x} and x'={x_prime} from s_0 gives different state keys "
            f"({key!r} vs {key_prime!r}) although the search found them equal: the model is not "
            "deterministic, or batch_states disagrees with state_key, or the reduction's alice_batch "
            "disagrees with alice")
    sep = [i for i in range(1, n + 1) if reduction.expected(x, i) != reduction.expected(x_prime, i)]
    if not sep:
        raise ValueError(f"no query i separates x={x} and x'={x_prime} under {reduction.name}")
    i = sep[0]
    tokens, tokens_prime = reduction.instance(x, i), reduction.instance(x_prime, i)
    run = run_rnn(rnn, tokens, answers, max_cot)
    run_prime = run_rnn(rnn, tokens_prime, answers, max_cot)
    if run.answer != run_prime.answer or run.cot != run_prime.cot:
        raise ProtocolViolation(
            f"same state key {key!r} after the prefixes of x={x} and x'={x_prime}, same suffix (i={i}), "
            f"but different runs: answers {run.answer} vs {run_prime.answer}, CoT lengths "
            f"{len(run.cot)} vs {len(run_prime.cot)}. The model is non-deterministic or its state_key "
            "does not determine its future behaviour")
    expected, expected_prime = reduction.expected(x, i), reduction.expected(x_prime, i)
    wrong = tuple(label for label, want in (("x", expected), ("x'", expected_prime)) if run.answer != want)
    # Equal answers, different expectations: at least one is wrong.
    assert wrong, "internal error: equal answers cannot match two different expected answers"
    return Witness(
        True, reduction.name, n, mode, state_bits, states_explored,
        seconds + time.perf_counter() - start, how, seed, x, x_prime, i, tokens, tokens_prime,
        run.answer, run_prime.answer, run.cot, run_prime.cot, expected, expected_prime, key, wrong)


# ---------------------------------------------------------------- the searches


def find_witness_exhaustive(rnn: RNN, reduction: Reduction, n: int, *, max_cot: int = 0,
                            answer_tokens: Sequence[int] | None = None, use_batch: bool = True,
                            batch_size: int = 1 << 14) -> Witness:
    """Enumerate all 2^n prefixes (lexicographic x) until two share a state key.

    ValueError ("n too large for exhaustive mode") if n > :data:`EXHAUSTIVE_MAX_N`.
    Returns the verified :class:`Witness`, or ``found=False`` if the 2^n keys are
    distinct (then the prefixes alone do not fool the model).
    """
    start = time.perf_counter()
    state_bits, n = _check_common(rnn, reduction, n)
    if n > EXHAUSTIVE_MAX_N:
        raise ValueError(f"n too large for exhaustive mode: n = {n} > {EXHAUSTIVE_MAX_N} "
                         "(use mode='birthday' with an explicit seed)")
    max_cot = _check_max_cot(max_cot)
    batch_size = integer_arg(batch_size, "batch_size")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batched = use_batch and hasattr(rnn, "batch_states")
    if batched:
        _check_key(rnn.state_key(feed(rnn, reduction.alice((0,) * n))), state_bits)
    seen: dict[Hashable, int] = {}
    total = 1 << n

    def done(first: int, second: int, explored: int, how_keys: str) -> Witness:
        return verify_fooling_pair(
            rnn, reduction, _bits_of(first, n), _bits_of(second, n), max_cot=max_cot,
            answer_tokens=answer_tokens, mode="exhaustive", states_explored=explored,
            seconds=time.perf_counter() - start,
            how=(f"exhaustive ({how_keys}): x number {second} (lexicographic, from 0) repeats the "
                 f"state key of x number {first}"))

    if batched:
        for lo in range(0, total, batch_size):
            hi = min(total, lo + batch_size)
            prefixes = _prefix_array(reduction, _bit_rows(lo, hi, n))
            if prefixes is None:  # prefixes of different lengths: step through them
                batched = False
                break
            keys = _batch_keys(rnn, prefixes)
            for off, key in enumerate(keys):
                prev = seen.setdefault(key, lo + off)
                if prev != lo + off:
                    return done(prev, lo + off, lo + off + 1, "batch_states")
                _check_count(len(seen), state_bits)
        else:
            return _not_found(reduction, n, "exhaustive", state_bits, total, start,
                              f"exhaustive (batch_states): all {total} prefixes reach distinct state keys")
        seen.clear()

    prev_tokens: list[int] = []
    stack = [rnn.initial_state()]  # stack[k] = state after the first k tokens of prev_tokens
    for k, x in enumerate(itertools.product((0, 1), repeat=n)):
        toks = reduction.alice(x)
        common = 0
        limit = min(len(toks), len(prev_tokens))
        while common < limit and toks[common] == prev_tokens[common]:
            common += 1
        del stack[common + 1:]
        for t in toks[common:]:
            stack.append(rnn.step(stack[-1], int(t)))
        prev_tokens = toks
        key = rnn.state_key(stack[-1])
        if k == 0:
            _check_key(key, state_bits)
        prev = seen.setdefault(key, k)
        if prev != k:
            return done(prev, k, k + 1, "step")
        _check_count(len(seen), state_bits)
    return _not_found(reduction, n, "exhaustive", state_bits, total, start,
                      f"exhaustive (step): all {total} prefixes reach distinct state keys")


def _not_found(reduction: Reduction, n: int, mode: str, state_bits: int, explored: int, start: float,
               how: str, seed: int | None = None) -> Witness:
    return Witness(False, reduction.name, n, mode, state_bits, explored, time.perf_counter() - start,
                   how, seed)


def expected_birthday_draws(state_bits: int) -> float:
    """sqrt(pi/2 * 2^s): the mean number of uniform draws from 2^s values until
    the first repeat (asymptotically)."""
    return math.sqrt(math.pi / 2 * 2.0 ** state_bits)


def default_max_draws(state_bits: int) -> int:
    """The birthday search's default budget: min(2^24, 16 * 2^(s/2)) draws, s = state_bits."""
    return int(min(DEFAULT_MAX_DRAWS_CAP, math.ceil(16 * 2.0 ** (state_bits / 2))))


def find_witness_birthday(rnn: RNN, reduction: Reduction, n: int, *, seed: int,
                          max_draws: int | None = None, max_stored: int = DEFAULT_MAX_STORED,
                          batch_size: int = 4096, max_cot: int = 0,
                          answer_tokens: Sequence[int] | None = None, use_batch: bool = True,
                          progress: ProgressFn | None = None) -> Witness:
    """Birthday search over uniform random x from ``numpy.random.default_rng(seed)``.

    Draws come in batches of ``batch_size`` (one ``rng.integers(0, 2, (B, n))``
    call each); ``progress(draws, stored)`` is called after every batch. The
    hash map holds at most ``max_stored`` entries (then it only answers
    look-ups). Default ``max_draws``: min(2^24, 16 * 2^(s/2)), s = state_bits.
    A draw equal to the stored x is not a collision. Returns the verified
    :class:`Witness`, or ``found=False`` when the budget runs out.
    """
    start = time.perf_counter()
    state_bits, n = _check_common(rnn, reduction, n)
    if seed is None:
        raise ValueError("birthday search needs an explicit integer seed")
    seed = integer_arg(seed, "seed")
    max_cot = _check_max_cot(max_cot)
    if max_draws is None:
        max_draws = default_max_draws(state_bits)
    max_draws = integer_arg(max_draws, "max_draws")
    max_stored = integer_arg(max_stored, "max_stored")
    batch_size = integer_arg(batch_size, "batch_size")
    for name, v in (("max_draws", max_draws), ("max_stored", max_stored), ("batch_size", batch_size)):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    rng = np.random.default_rng(seed)
    batched = use_batch and hasattr(rnn, "batch_states")
    table: dict[Hashable, bytes] = {}
    draws = 0
    checked_key = False
    while draws < max_draws:
        size = min(batch_size, max_draws - draws)
        xs = rng.integers(0, 2, size=(size, n), dtype=np.uint8)
        rows = xs.tolist()
        arr = _prefix_array(reduction, xs) if (batched or reduction.alice_batch is not None) else None
        if batched and arr is not None:
            keys = _batch_keys(rnn, arr)
        else:
            prefixes = arr.tolist() if arr is not None else [reduction.alice(tuple(r)) for r in rows]
            keys = [rnn.state_key(feed(rnn, p)) for p in prefixes]
        if not checked_key:
            _check_key(rnn.state_key(feed(rnn, reduction.alice(tuple(rows[0])))), state_bits)
            checked_key = True
        for off, key in enumerate(keys):
            packed = xs[off].tobytes()
            prev = table.get(key)
            if prev is None:
                if len(table) < max_stored:
                    table[key] = packed
                    _check_count(len(table), state_bits)
            elif prev != packed:
                x_first = tuple(np.frombuffer(prev, dtype=np.uint8).tolist())
                explored = draws + off + 1
                return verify_fooling_pair(
                    rnn, reduction, x_first, tuple(rows[off]), max_cot=max_cot,
                    answer_tokens=answer_tokens, mode="birthday", states_explored=explored,
                    seconds=time.perf_counter() - start, seed=seed,
                    how=(f"birthday (seed {seed}, {'batch_states' if batched and arr is not None else 'step'}): draw "
                         f"{explored} repeated a stored state key; {len(table)} keys stored; "
                         f"~{expected_birthday_draws(state_bits):.0f} draws expected for uniform "
                         f"{state_bits}-bit keys (fewer when fewer states are reachable)"))
        draws += size
        if progress is not None:
            progress(draws, len(table))
    return _not_found(reduction, n, "birthday", state_bits, draws, start,
                      f"birthday (seed {seed}): no collision in {draws} draws "
                      f"({len(table)} keys stored, cap {max_stored}); "
                      f"~{expected_birthday_draws(state_bits):.0f} draws expected for uniform "
                      f"{state_bits}-bit keys", seed)


def find_witness(rnn: RNN, reduction: Reduction, n: int, mode: str = "exhaustive", **kwargs: Any
                 ) -> Witness:
    """Dispatch to :func:`find_witness_exhaustive` or :func:`find_witness_birthday`
    (``mode="birthday"`` needs ``seed=``)."""
    if mode == "exhaustive":
        return find_witness_exhaustive(rnn, reduction, n, **kwargs)
    if mode == "birthday":
        if "seed" not in kwargs:
            raise ValueError("mode='birthday' needs an explicit seed= (an int)")
        return find_witness_birthday(rnn, reduction, n, **kwargs)
    raise ValueError(f"unknown mode {mode!r}: use 'exhaustive' or 'birthday'")


def benchmark_collision(bits: int, seed: int, *, batch_size: int = 1 << 14,
                        max_draws: int | None = None) -> dict:
    """Time to a verified collision with a model of exactly ``bits``-bit memory.

    The model is the register linear RNN of capacity c = ``bits``
    (``constructions.models.targets.register_index_rnn``) on Index with n = bits + 1:
    after Alice's prefix its hidden state takes exactly 2^bits values (the
    register holds x_1..x_bits; its other state numbers are the same for every
    prefix), so the birthday search needs about sqrt(pi/2 * 2^bits) draws. The
    search uses the model's ``batch_states`` (one numba call per batch) and the
    pair is re-verified by the per-token run, the model allowed its CoT.

    Returns found, draws, seconds (wall), cpu_seconds, states_per_s (prefixes
    run per wall second), expected_draws, the declared state bits and the
    witness (x, x', i, answers).
    """
    bits = integer_arg(bits, "bits")
    if not 1 <= bits <= 56:
        raise ValueError(f"benchmark_collision: bits must be in 1..56, got {bits}")

    n = bits + 1
    target = register_target(bits, max_number=max(n, 2))
    target.batch_states(INDEX.prefixes(np.zeros((2, n), dtype=np.uint8)))  # compile outside the timing
    wall, cpu = time.perf_counter(), time.process_time()
    w = find_witness_birthday(target, INDEX, n, seed=seed, batch_size=batch_size, max_cot=n,
                              max_draws=max_draws if max_draws is not None else DEFAULT_MAX_DRAWS_CAP)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = {
        "bits": bits, "n": n, "model": target.name, "state_bits_declared": target.state_bits,
        "reachable_state_bits": bits, "found": w.found, "draws": w.states_explored,
        "expected_draws": expected_birthday_draws(bits), "seconds": wall, "cpu_seconds": cpu,
        "states_per_s": w.states_explored / wall if wall > 0 else float("nan"), "seed": seed,
    }
    if w.found:
        out.update(x="".join(map(str, w.x)), x_prime="".join(map(str, w.x_prime)), i=w.i,
                   answer=w.answer, expected=w.expected, expected_prime=w.expected_prime,
                   cot_length=len(w.cot), wrong=list(w.wrong))
    return out
