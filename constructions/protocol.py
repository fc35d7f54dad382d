"""The general RNN protocol used by the lower bounds (docs/theory.md §2, §5).

Any Python object with these members is an RNN for the witness finder:

* ``state_bits``: int, the declared memory in bits;
* ``initial_state()``: the state s_0;
* ``step(state, token) -> state``: s_t = trans(s_{t-1}, token_t) (must not mutate
  its argument);
* ``output(state) -> token``: the next token, greedy;
* ``state_key(state) -> bytes``: a canonical encoding of the state with
  ``len(key) * 8 <= state_bits`` rounded up to whole bytes; equal keys must mean
  equal states (the model's future behaviour depends on the state only).

To wrap an outside model, implement these five members; ``state_key`` is where
the bounded memory is made explicit (e.g. the fixed-point raw integers of the
hidden vector, packed). A sketch for a model with a numpy hidden vector of
``d`` int16 numbers and a greedy next-token function::

    class Wrapped:
        state_bits = 16 * d                      # what the model can remember
        def initial_state(self):  return outside.zeros()           # s_0
        def step(self, state, token):            # a NEW state, never in place
            return outside.update(state.copy(), token)
        def output(self, state):  return int(outside.argmax_token(state))
        def state_key(self, state):              # equal keys <=> equal states
            return state.astype(np.int16).tobytes()

Rules the lower bounds rely on (``lowerbounds/witness.py`` checks them and
raises ``ProtocolViolation``): the model is deterministic; its future behaviour
(``output`` now and after any further tokens) is a function of ``state_key``
alone, so anything the next token depends on (e.g. the last token read, if
the readout sees it) belongs to the state; keys fit ``state_bits``. Every
failure the witness finder reports is re-run through these members.

Optional extension ``batch_states(prefixes) -> keys``: prefixes is an int64
array ``[B, L]`` of equal-length token sequences, each fed from s_0; the result
has B rows (shape ``[B]`` or ``[B, w]``) and two rows are equal iff the two
``state_key``s are equal. The search then runs many prefixes per call (e.g. a
numba kernel or vectorised numpy); it must agree with ``step`` / ``state_key``
(the finder re-verifies every pair and raises on a disagreement). Examples:
``constructions.targets.LinearRNNTarget`` (any linear-RNN ``Model`` whose
readout depends on h only; state_key = h), ``lowerbounds.targets_toy.HashRNN``.
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
