"""Pure-Python toy RNNs with a declared, bounded memory, for testing the
witness finder (claims T4.6-low, T4.7-low). They follow
``constructions/build/protocol.py``; the real linear-RNN targets live in
``constructions``.

:class:`IndexRegisterRNN` keeps the first s data bits (optionally reading them
out as a CoT), :class:`HashRNN` mixes an s-bit state by a bijective hash (the
birthday target, with ``batch_states``), and :class:`WindowRNN` keeps a head and
a tail of the tokens (for any task). ``state_key`` packs each state with
:func:`pack_fields`.

Details: docs/internals/lowerbounds.md#targets_toy
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from rnngap.constructions.machine.vocab import BOS, DASH, NUMBER_BASE, QUERY, TILDE, number_token


def width(max_value: int) -> int:
    """Bits needed to store the integers 0..max_value (at least 1).

    >>> [width(v) for v in (0, 1, 2, 3, 4)]
    [1, 1, 2, 2, 3]
    """
    return max(1, int(max_value).bit_length())


def pack_fields(values: Sequence[int], widths: Sequence[int]) -> bytes:
    """Pack non-negative ints into ``ceil(sum(widths) / 8)`` little-endian bytes.

    >>> pack_fields([1, 2], [1, 2]).hex()
    '05'
    """
    acc, shift = 0, 0
    for v, w in zip(values, widths, strict=True):
        v = int(v)
        if not 0 <= v < (1 << w):
            raise ValueError(f"field value {v} does not fit in {w} bits")
        acc |= v << shift
        shift += w
    return acc.to_bytes((shift + 7) // 8, "little")


# ------------------------------------------------------------------ register


class IndexRegisterRNN:
    """Index with an s-bit register: ``[BOS] x_1..x_n [QUERY] i`` -> x_i for i <= s.

    State ``(phase, pos, reg, q, countdown)``:

    * phase 0 before [BOS], 1 reading data, 2 after [QUERY], 3 answering;
    * ``pos`` = data bits seen, saturating at s; ``reg`` holds x_1..x_min(n,s)
      (x_j at bit j-1); data after the s-th bit is ignored;
    * ``q`` = min(i, s+1) (an i > s cannot be answered from the register);
    * ``countdown``: CoT steps left (``cot=True`` only).

    Without CoT the answer is bit q-1 of reg. With CoT the model emits q-1
    tokens (``~`` for a 1, ``-`` for a 0: the bit it shifts out), each of which,
    fed back, shifts reg right by one; then it answers reg's bit 0. For i > s
    both answer 0. The state after any prefix is determined by x_1..x_min(n,s)
    alone, so prefixes differing only after bit s collide.

    >>> from rnngap.constructions.build.protocol import run_rnn
    >>> r = IndexRegisterRNN(3, cot=True)
    >>> run = run_rnn(r, [0, 33, 32, 33, 9, 35], [32, 33], max_cot=5)
    >>> run.answer == number_token(1), len(run.cot)
    (True, 2)
    """

    def __init__(self, s: int, cot: bool = False):
        if int(s) < 1:
            raise ValueError(f"register size s must be >= 1, got {s}")
        self.s = int(s)
        self.cot = bool(cot)
        self.widths = (2, width(self.s), self.s, width(self.s + 1), width(self.s))
        self.state_bits = sum(self.widths)

    def initial_state(self) -> tuple[int, int, int, int, int]:
        return (0, 0, 0, 0, 0)

    def step(self, state: tuple[int, int, int, int, int], token: int) -> tuple[int, int, int, int, int]:
        phase, pos, reg, q, countdown = state
        token = int(token)
        if phase == 0:
            return (1, 0, 0, 0, 0) if token == BOS else state
        if phase == 1:
            if token == QUERY:
                return (2, pos, reg, 0, 0)
            if token >= NUMBER_BASE and pos < self.s:
                return (1, pos + 1, reg | (((token - NUMBER_BASE) & 1) << pos), 0, 0)
            return state
        if phase == 2:
            if token >= NUMBER_BASE:
                q = min(token - NUMBER_BASE, self.s + 1)
                return (3, pos, reg, q, max(q - 1, 0) if self.cot else 0)
            return state
        if countdown > 0 and token in (DASH, TILDE):
            return (3, pos, reg >> 1, q, countdown - 1)
        return state

    def output(self, state: tuple[int, int, int, int, int]) -> int:
        phase, _pos, reg, q, countdown = state
        if phase != 3:
            return number_token(0)
        if countdown > 0:
            return TILDE if reg & 1 else DASH
        if self.cot:
            return number_token(reg & 1)
        return number_token((reg >> (q - 1)) & 1 if q >= 1 else 0)

    def state_key(self, state: tuple[int, int, int, int, int]) -> bytes:
        return pack_fields(state, self.widths)


# ---------------------------------------------------------------------- hash

_MIX_TOKEN = 0x9E3779B97F4A7C15
_MIX_MUL = 0xD6E8FEB86659FD93


class HashRNN:
    """An s-bit state (1 <= s <= 64) mixed per token; for the birthday search.

    ``h_0 = 0``; per token t::

        h ^= (t * C1) mod 2^s;  h = (h * C2) mod 2^s (C2 odd);  h ^= h >> r

    with r = max(1, s // 2); each step is a bijection of h for a fixed t, and
    the state after a random prefix is spread over all 2^s values. The output
    is ``answer_tokens[h mod len(answer_tokens)]`` (a deterministic guess).
    ``batch_states`` computes the same h for a batch with numpy uint64
    arithmetic (wrapping mod 2^64, then masked: equal to the exact products
    mod 2^s) and returns them as ``uint64 [B]``; ``int.from_bytes(state_key(h),
    'little') == h``.
    """

    def __init__(self, s: int, answer_tokens: Sequence[int] = (number_token(0), number_token(1))):
        s = int(s)
        if not 1 <= s <= 64:
            raise ValueError(f"HashRNN needs 1 <= s <= 64, got {s}")
        if not answer_tokens:
            raise ValueError("answer_tokens must not be empty")
        self.state_bits = s
        self.mask = (1 << s) - 1
        self.shift = max(1, s // 2)
        self.c1 = _MIX_TOKEN & self.mask
        self.c2 = (_MIX_MUL & self.mask) | 1
        self.answer_tokens = tuple(int(a) for a in answer_tokens)

    def initial_state(self) -> int:
        return 0

    def step(self, state: int, token: int) -> int:
        h = state ^ ((int(token) * self.c1) & self.mask)
        h = (h * self.c2) & self.mask
        return h ^ (h >> self.shift)

    def output(self, state: int) -> int:
        return self.answer_tokens[state % len(self.answer_tokens)]

    def state_key(self, state: int) -> bytes:
        return state.to_bytes((self.state_bits + 7) // 8, "little")

    def batch_states(self, prefixes: np.ndarray) -> np.ndarray:
        """States after each row of ``prefixes`` (int64 ``[B, L]``) as uint64 ``[B]``."""
        prefixes = np.asarray(prefixes)
        if prefixes.ndim != 2:
            raise ValueError(f"prefixes must be 2-D [B, L], got shape {prefixes.shape}")
        mask, c1, c2, r = (np.uint64(v) for v in (self.mask, self.c1, self.c2, self.shift))
        toks = prefixes.astype(np.uint64)
        h = np.zeros(prefixes.shape[0], dtype=np.uint64)
        for col in range(prefixes.shape[1]):
            h ^= (toks[:, col] * c1) & mask
            h = (h * c2) & mask
            h ^= h >> r
        return h


# -------------------------------------------------------------------- window


class WindowRNN:
    """Keeps the first ``head`` tokens and the last ``tail`` tokens after them;
    answers ``answer_fn(head + tail)`` (a task reference), or ``default_answer``
    if that raises ValueError / IndexError / KeyError (the kept tokens are then
    not a well-formed instance). Correct on every instance of at most
    head + tail tokens; with a longer one the middle is lost.

    State ``(head tuple, tail tuple, dropped flag)``; each token must be below
    ``2^token_bits``. ``state_bits = (head + tail) * token_bits + width(head) +
    width(tail) + 1``. No CoT: ``output`` is always an answer.
    """

    def __init__(self, answer_fn: Callable[[np.ndarray], int], head: int, tail: int,
                 default_answer: int, token_bits: int = 8):
        if int(head) < 0 or int(tail) < 0:
            raise ValueError(f"head and tail must be >= 0, got {head}, {tail}")
        self.answer_fn = answer_fn
        self.head, self.tail = int(head), int(tail)
        self.token_bits = int(token_bits)
        self.default_answer = int(default_answer)
        self.widths_meta = (width(self.head), width(self.tail), 1)
        self.state_bits = (self.head + self.tail) * self.token_bits + sum(self.widths_meta)

    def initial_state(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        return ((), (), 0)

    def step(self, state: tuple, token: int) -> tuple:
        head, tail, dropped = state
        token = int(token)
        if not 0 <= token < (1 << self.token_bits):
            raise ValueError(f"token {token} does not fit in token_bits = {self.token_bits}")
        if len(head) < self.head:
            return (head + (token,), tail, dropped)
        if self.tail == 0:
            return (head, tail, 1)
        tail = tail + (token,)
        if len(tail) > self.tail:
            return (head, tail[1:], 1)
        return (head, tail, dropped)

    def output(self, state: tuple) -> int:
        head, tail, _ = state
        try:
            return int(self.answer_fn(np.asarray(head + tail, dtype=np.int64)))
        except (ValueError, IndexError, KeyError):
            return self.default_answer

    def state_key(self, state: tuple) -> bytes:
        head, tail, dropped = state
        pad = [0] * (self.head - len(head)) + [0] * (self.tail - len(tail))
        values = [len(head), len(tail), dropped, *head, *tail, *pad]
        widths = [*self.widths_meta] + [self.token_bits] * (self.head + self.tail)
        return pack_fields(values, widths)


# ---------------------------------------------------------- compact register


class CompactIndexRegister:
    """Index with an s-bit register and the fewest states that can do it (no
    CoT): the bounded-memory side of the separation records where the collision
    is *forced* by pigeonhole (claims T4.6-low, T4.7-low).

    The state is one integer code, every reachable state enumerated::

        0                      before [BOS]
        2^pos + reg            reading data: pos bits seen (0..s), reg < 2^pos (x_j at bit j-1)
        2^(s+1) + reg          after [QUERY]: reg, s bits (valid queries i <= n <= s)
        3 * 2^s + b            answered: the bit b = x_i

    so 3 * 2^s + 2 codes and ``state_bits = s + 2`` (3 * 2^s + 2 <= 2^(s+2) for
    s >= 1). Data after the s-th bit is dropped (pos saturates), a query i > s is
    answered 0. Correct on every Index instance with n <= s; at n > s + 2 =
    state_bits the 2^n prefixes must share a state (pigeonhole), and prefixes
    that differ after bit s already do.

    >>> r = CompactIndexRegister(2)
    >>> from rnngap.constructions.build.protocol import run_rnn
    >>> run_rnn(r, [0, 33, 32, 9, 33]).answer == number_token(1), r.state_bits
    (True, 4)
    """

    def __init__(self, s: int):
        if int(s) < 1:
            raise ValueError(f"register size s must be >= 1, got {s}")
        self.s = int(s)
        self.name = f"compact-register(s={self.s})"
        self.state_count = 3 * (1 << self.s) + 2
        self.state_bits = (self.state_count - 1).bit_length()
        assert self.state_bits == self.s + 2, "3 * 2^s + 2 codes need exactly s + 2 bits"
        self._query = 1 << (self.s + 1)
        self._answered = 3 * (1 << self.s)

    def initial_state(self) -> int:
        return 0

    def step(self, state: int, token: int) -> int:
        token = int(token)
        if state == 0:
            return 1 if token == BOS else 0             # 2^0 + 0: no bit seen yet
        if state < self._query:                          # reading data
            pos = state.bit_length() - 1
            reg = state - (1 << pos)
            if token == QUERY:
                return self._query + reg
            if token >= NUMBER_BASE and pos < self.s:
                return (1 << (pos + 1)) + (reg | (((token - NUMBER_BASE) & 1) << pos))
            return state
        if state < self._answered:                       # after [QUERY]: the query number i
            if token >= NUMBER_BASE:
                i = token - NUMBER_BASE
                reg = state - self._query
                return self._answered + ((reg >> (i - 1)) & 1 if 1 <= i <= self.s else 0)
            return state
        return state

    def output(self, state: int) -> int:
        return number_token(state - self._answered) if state >= self._answered else number_token(0)

    def state_key(self, state: int) -> bytes:
        if not 0 <= state < self.state_count:
            raise ValueError(f"{self.name}: state code {state} outside 0..{self.state_count - 1}")
        return int(state).to_bytes((self.state_bits + 7) // 8, "little")
