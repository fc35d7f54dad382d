"""One greedy generation driver for every model (docs/theory.md §2, CoT and in-context RAG).

After the prompt the model generates tokens one by one; each is appended and fed
back. The run stops at an answer token (returned as ``answer``) or when the CoT
would exceed ``max_cot`` tokens (``answer=None``, ``stopped="limit"``).

The optional ``oracle`` hook implements in-context RAG: after each generated
token it is called as ``oracle(context, token)`` with the whole context so far
(prompt + CoT, token included; a list the driver keeps and extends, which the
oracle must not change: a change of its length is refused) and returns either None or a list of tokens that
are appended and fed to the model as if generated. Those retrieved tokens count
toward the CoT length (docs/theory.md §2: the oracle, not the model, produced them);
``retrieved`` counts them separately.

Example::

    >>> from rnngap.constructions.models.cot_hierarchy import iterate_rnn, prompt     # T4.1: t = 7 steps of CoT
    >>> from rnngap.constructions.machine.vocab import FALSE, TRUE
    >>> g = generate(iterate_rnn(3), prompt(3, a=5, t=7), answer_tokens=[TRUE, FALSE], max_cot=9)
    >>> g.answer in (TRUE, FALSE), g.cot_length, g.stopped
    (True, 7, 'answer')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from .model import Model

Oracle = Callable[[list[int], int], Optional[Sequence[int]]]


@dataclass
class Generation:
    prompt: list[int]
    cot: list[int] = field(default_factory=list)
    answer: int | None = None
    stopped: str = ""            # "answer" or "limit"
    retrieved: int = 0           # CoT tokens that came from the oracle
    oracle_calls: int = 0

    @property
    def cot_length(self) -> int:
        """Tokens generated (or retrieved) before the answer."""
        return len(self.cot)

    @property
    def context(self) -> list[int]:
        return self.prompt + self.cot


GROW_FROM = 1 << 16
"""CoT tokens the session's cache holds before it first grows (see generate)."""


def generate(model: Model, prompt: Sequence[int], answer_tokens: Sequence[int] | None = None,
             max_cot: int = 0, oracle: Oracle | None = None, record: bool = False,
             answer_after: int | None = None) -> Generation:
    """Run ``model`` greedily on ``prompt``; see the module docstring.

    ``answer_tokens=None`` means no CoT: the first generated token is the answer.
    ``answer_after=m`` (with ``answer_tokens=None``): the CoT ends when the model
    emits the marker m (which counts toward the CoT); the model's next token is the
    answer, whatever it is. For tasks whose answers are numbers that the CoT also
    writes (e.g. a search for the query number, then ``[EOS]`` and the answer).
    """
    if answer_after is not None:
        if answer_tokens is not None:
            raise ValueError("give answer_tokens or answer_after, not both")
        model.vocab.validate([int(answer_after)], what="answer_after")
        answer_after = int(answer_after)
    if max_cot < 0:
        raise ValueError(f"max_cot must be >= 0, got {max_cot}")
    prompt = [int(t) for t in model.validate_tokens(list(prompt), "prompt")]
    if not prompt:
        raise ValueError("the prompt must hold at least one token")
    answers = None if answer_tokens is None else frozenset(int(a) for a in answer_tokens)
    if answers is not None:
        model.vocab.validate(sorted(answers), what="answer_tokens")
    # the KV cache starts at the prompt and up to GROW_FROM CoT tokens, and doubles when
    # the CoT needs more (a bound of millions of tokens allocates only what is written)
    sess = model.session(capacity=len(prompt) + min(max_cot, GROW_FROM) + 1, record=record)
    sess.feed(prompt)
    return drive(sess, prompt, answers, max_cot, oracle, answer_after,
                 lambda toks: [int(t) for t in model.validate_tokens(list(toks), "oracle output")])


def drive(sess, prompt: list[int], answers: frozenset | None, max_cot: int, oracle: Oracle | None = None,
          answer_after: int | None = None, validate: Callable = list) -> Generation:
    """The greedy loop of :func:`generate` on anything with a session's ``feed``,
    ``feed_one`` and ``next_token`` that has been fed ``prompt`` (the exported
    PyTorch module's too, checks/export/conformance.py); ``validate`` checks and
    converts the oracle's output. Arguments as validated by :func:`generate`."""
    g = Generation(prompt=prompt)
    context = list(prompt)       # = g.context, kept up to date (not rebuilt per token)
    while True:
        tok = sess.next_token()
        if (answers is None and answer_after is None) or (answers is not None and tok in answers):
            g.answer, g.stopped = tok, "answer"
            return g
        if g.cot_length >= max_cot:
            g.stopped = "limit"
            return g
        g.cot.append(tok)
        context.append(tok)
        sess.feed_one(tok)
        if answer_after is not None and tok == answer_after:
            g.answer, g.stopped = sess.next_token(), "answer"
            return g
        if oracle is not None:
            g.oracle_calls += 1
            extra = oracle(context, tok)
            if len(context) != len(g.prompt) + len(g.cot):
                raise RuntimeError("the oracle changed the context it was given")
            if extra:
                extra = validate(extra)
                room = max_cot - g.cot_length
                if len(extra) > room:
                    g.cot.extend(extra[:room])
                    context.extend(extra[:room])
                    g.retrieved += room
                    sess.feed(extra[:room])
                    g.stopped = "limit"
                    return g
                g.cot.extend(extra)
                context.extend(extra)
                g.retrieved += len(extra)
                sess.feed(extra)
