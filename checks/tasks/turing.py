"""Reference runs of deterministic Turing machines (claims T5-hyb-P and T5-RAG, TM
part), in plain Python: the CoT the hybrid and the RAG simulations of
constructions/models/turing.py must write, and their answers.

It imports no construction code (only token ids from constructions/machine/vocab.py): the
machine is an automata-lib ``DTM``, and the numbering of symbols and actions
(:func:`numbering`) is derived here by the convention of constructions/models/turing.py.
Hybrid CoT: per step ``c a``; RAG CoT: :func:`reference_rag_cot`.

Example::

    >>> from automata.tm.dtm import DTM
    >>> dtm = DTM(states={"a", "f"}, input_symbols={"0", "1"}, tape_symbols={"0", "1", "_"},
    ...           transitions={"a": {"0": ("a", "1", "R"), "_": ("f", "_", "N")}},
    ...           initial_state="a", blank_symbol="_", final_states={"f"})
    >>> run = reference_run(dtm, "00", 10)
    >>> run.accepted, run.steps, run.records, numbering(dtm).symbols
    (True, 3, [(0, 0), (1, 0), (2, 1)], ['0', '1', '_'])
    >>> reference_run(dtm, "01", 10).accepted       # no transition on (a, 1)
    False

Details (the machine model, the numbering, the CoTs): docs/internals/tasks.md#turing
"""
from __future__ import annotations

from dataclasses import dataclass

from rnngap.constructions.machine.vocab import (
    BOS, ENDSEARCH, FAILED, FALSE, META_TOKENS, STARTSEARCH, TILDE, TRUE, number_token,
)

from .spec import TaskSpec

__all__ = ["LeftOfTape", "Numbering", "ReferenceRun", "numbering", "reference_rag_cot", "reference_run"]

MOVES = {"L": -1, "N": 0, "R": 1}


class LeftOfTape(ValueError):
    """The head would move left of cell 0 (the simulations number cells from 0)."""


@dataclass(frozen=True)
class Numbering:
    """Symbols (index = symbol number) and actions (index = action number) as
    tuples (state, symbol, new state, written symbol, move)."""

    symbols: list[str]
    actions: list[tuple[str, int, str, int, int]]
    action_of: dict[tuple[str, int], int]

    @property
    def blank(self) -> int:
        return len(self.symbols) - 1


def numbering(dtm) -> Numbering:
    """The documented numbering of ``dtm``'s symbols and actions."""
    blank = dtm.blank_symbol
    inputs = sorted(dtm.input_symbols)
    symbols = inputs + sorted(set(dtm.tape_symbols) - set(inputs) - {blank}) + [blank]
    sid = {s: i for i, s in enumerate(symbols)}
    actions: list[tuple[str, int, str, int, int]] = []
    action_of: dict[tuple[str, int], int] = {}
    for q in sorted(dtm.states):
        for s in symbols:
            tr = dtm.transitions.get(q, {}).get(s)
            if tr is not None:
                q2, s2, d = tr
                action_of[(q, sid[s])] = len(actions)
                actions.append((q, sid[s], q2, sid[s2], MOVES[d]))
    return Numbering(symbols, actions, action_of)


@dataclass
class ReferenceRun:
    """A plain-Python run: accepted?, steps, the (cell, action) records, the final
    tape (cell -> symbol number), the largest cell the head visited, and the cell
    where a rejecting run got stuck."""

    accepted: bool
    steps: int
    records: list[tuple[int, int]]
    tape: dict[int, int]
    max_cell: int
    stuck_cell: int | None = None

    def hybrid_cot(self) -> list[int]:
        """The hybrid simulation's CoT: ``c a`` per step, then the stuck cell if rejected."""
        out: list[int] = []
        for c, a in self.records:
            out += [number_token(c), number_token(a)]
        if not self.accepted:
            out.append(number_token(self.stuck_cell))
        return out

    @property
    def answer(self) -> int:
        return TRUE if self.accepted else FALSE


def _input_symbols(num: Numbering, dtm, word: str) -> list[int]:
    for i, ch in enumerate(word):
        if ch not in dtm.input_symbols:
            raise ValueError(f"input position {i}: {ch!r} is not an input symbol of the machine")
    return [num.symbols.index(ch) for ch in word]


def reference_run(dtm, word: str, max_steps: int) -> ReferenceRun:
    """Run ``dtm`` on ``word`` in plain Python (dict lookups only). Raises
    :class:`LeftOfTape` if the head leaves cell 0 leftwards, RuntimeError beyond
    ``max_steps`` steps."""
    num = numbering(dtm)
    tape = dict(enumerate(_input_symbols(num, dtm, word)))
    q, h, steps, records, max_cell = dtm.initial_state, 0, 0, [], 0
    while q not in dtm.final_states:
        s = tape.get(h, num.blank)
        a = num.action_of.get((q, s))
        if a is None:
            return ReferenceRun(False, steps, records, tape, max_cell, stuck_cell=h)
        _, _, q, write, move = num.actions[a]
        records.append((h, a))
        tape[h] = write
        h += move
        steps += 1
        if h < 0:
            raise LeftOfTape(f"{word!r}: the head moves left of cell 0 at step {steps}")
        max_cell = max(max_cell, h)
        if steps > max_steps:
            raise RuntimeError(f"{word!r}: more than {max_steps} steps")
    return ReferenceRun(True, steps, records, tape, max_cell)


def reference_rag_cot(dtm, word: str, max_steps: int) -> tuple[list[int], int]:
    """The CoT the RAG simulation must write, and the answer token. Per step at
    cell h: the query ``[STARTSEARCH] [.] [*] ~ h [(] [#] [)] [ENDSEARCH]`` and its
    answer, the last action written for cell h; if there is none, [FAILED], then
    the fallback query ``[STARTSEARCH] [BOS] [#]^h [(] [#] [)] [ENDSEARCH]`` and
    its answer, the input symbol w_h (h < n) or [FAILED] (the blank); then the
    record ``~ h a`` (a rejecting run's last record is ``~ h`` alone)."""
    M = META_TOKENS
    num = numbering(dtm)
    syms = _input_symbols(num, dtm, word)
    ref = reference_run(dtm, word, max_steps)
    last: dict[int, int] = {}
    out: list[int] = []
    steps: list[tuple[int, int | None]] = list(ref.records)
    if not ref.accepted:
        steps.append((ref.stuck_cell, None))
    for h, a in steps:
        out += [STARTSEARCH, M["[.]"], M["[*]"], TILDE, number_token(h), M["[(]"], M["[#]"], M["[)]"], ENDSEARCH]
        if h in last:
            out.append(number_token(last[h]))
        else:
            out.append(FAILED)
            out += [STARTSEARCH, BOS] + [M["[#]"]] * h + [M["[(]"], M["[#]"], M["[)]"], ENDSEARCH]
            out.append(number_token(syms[h]) if h < len(word) else FAILED)
        out += [TILDE, number_token(h)]
        if a is not None:
            out.append(number_token(a))
            last[h] = a
    return out, ref.answer


def _spec():
    return TaskSpec(name="tm", description="a given deterministic Turing machine's run on an input word "
                                           "(the reference is the machine's: reference_run)",
                    reference=None, family="tm", aliases=("turing",))


SPEC = _spec()
"""The task's spec (:mod:`checks.tasks.spec`)."""
