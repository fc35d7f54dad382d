"""The general RNN protocol used by the lower bounds (docs/theory.md §2, §5).

Any Python object with ``state_bits``, ``initial_state()``, ``step(state, token)``
(a new state, never in place), ``output(state)`` (the greedy next token) and
``state_key(state)`` (bytes fitting ``state_bits``; equal keys mean equal states)
is an RNN for the witness finder. To wrap an outside model, implement these five
members; ``state_key`` makes the bounded memory explicit. The model must be
deterministic and its whole future a function of ``state_key``;
lowerbounds/witness.py checks this and raises ``ProtocolViolation``. An optional
``batch_states(prefixes)`` maps equal-length prefixes to rows that are equal iff
the state keys are; the finder uses it for speed and re-verifies every pair.

Details (a wrapping sketch, the rules, ``batch_states``):
docs/internals/build.md#protocol
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Protocol, Sequence, runtime_checkable


@runtime_checkable
class RNN(Protocol):
    state_bits: int

    def initial_state(self) -> Any: ...

    def step(self, state: Any, token: int) -> Any: ...

    def output(self, state: Any) -> int: ...

    def state_key(self, state: Any) -> Hashable: ...


@dataclass
class RNNRun:
    """What :func:`run_rnn` saw: the answer token (or None if the CoT limit was hit),
    the generated CoT tokens before it, and the final state."""

    answer: int | None
    cot: list[int] = field(default_factory=list)
    state: Any = None


def feed(rnn: RNN, tokens: Sequence[int], state: Any = None) -> Any:
    """Run ``rnn`` over ``tokens`` from ``state`` (default s_0) and return the state."""
    s = rnn.initial_state() if state is None else state
    for t in tokens:
        s = rnn.step(s, int(t))
    return s


def run_rnn(rnn: RNN, tokens: Sequence[int], answer_tokens: Sequence[int] | None = None,
            max_cot: int = 0, state: Any = None) -> RNNRun:
    """Feed ``tokens``, then generate greedily: a token in ``answer_tokens`` (default:
    any token, i.e. no CoT) ends the run and is the answer; any other token is
    appended to the CoT and fed back. More than ``max_cot`` CoT tokens -> answer None.
    """
    s = feed(rnn, tokens, state)
    answers = None if answer_tokens is None else set(int(a) for a in answer_tokens)
    cot: list[int] = []
    while True:
        tok = int(rnn.output(s))
        if answers is None or tok in answers:
            return RNNRun(tok, cot, s)
        if len(cot) >= max_cot:
            return RNNRun(None, cot, s)
        cot.append(tok)
        s = rnn.step(s, tok)
