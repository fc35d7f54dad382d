"""Turing machines simulated with CoT (claims T5-RAG, TM part, and T5-hyb-P).

A deterministic Turing machine is an automata-lib ``DTM`` (one tape, input from
cell 0, head on cell 0; it accepts on entering a final state, rejects when no
transition is defined). :func:`tm_hybrid` compiles it into a hybrid (two
linear-RNN layers, one attention layer) whose CoT is one record ``c a`` per step
(the head's cell, then the action taken) ending in [TRUE] / [FALSE]; its
attention reads the symbol under the head as the cell's last write.
:func:`tm_rag` compiles it into a linear RNN with the in-context RAG oracle
(RAG CoT: the comment block above :func:`rag_cot_bound`). :class:`Encoding`
numbers symbols and actions. The head must never move left of cell 0.

Example::

    >>> sim = tm_hybrid(MACHINES["increment"], n=3)
    >>> g = sim.run("110")        # LSB first: 3 + 1 = 4 = "001"
    >>> sim.records(g.cot), g.answer == TRUE
    ([(0, 1), (1, 1), (2, 0)], True)

Details (encodings, the hybrid CoT, supported machines):
docs/internals/models.md#turing
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

import sympy as sp
from automata.base.exceptions import RejectionException
from automata.tm.dtm import DTM

from rnngap.constructions.machine import kernels as K
from .demos import Declared
from rnngap.constructions.machine.fixedpoint import log2_ceil
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    Builder, Component, Head, MarginError, Neuron, Recurrence, ResidualSpace, bits_for, clock,
    gated_equality, match_head, require, sharpness,
)
from rnngap.constructions.build.generate import Generation, generate
from . import bounds as _bounds
from rnngap.constructions.build.model import Model
from rnngap.constructions.build.rnn_program import Program
from .rag import RagOracle
from rnngap.constructions.machine.vocab import (
    BOS, ENDSEARCH, EOS, FAILED, FALSE, META_TOKENS, NUMBER_BASE, STARTSEARCH, TILDE, TRUE, Vocab, number_token,
    token_code,
)

NSYM = sp.Symbol("n", nonnegative=True, integer=True)


# ----------------------------------------------------------------------------
# machines (automata-lib DTMs)
def binary_increment() -> DTM:
    """Little-endian binary increment: flip leading 1s to 0, then the first 0 or
    blank to 1; always accepts. Final tape = w + 1 (LSB first). Steps = #leading 1s + 1."""
    return DTM(states={"carry", "done"}, input_symbols={"0", "1"}, tape_symbols={"0", "1", "_"},
               transitions={"carry": {"1": ("carry", "0", "R"), "0": ("done", "1", "N"),
                                      "_": ("done", "1", "N")}},
               initial_state="carry", blank_symbol="_", final_states={"done"})


def palindromes() -> DTM:
    """Accepts the palindromes over {0, 1}: erase the first symbol, remember it,
    run to the right end, compare and erase the last, run back, repeat."""
    t = {
        "start": {"0": ("seek0", "_", "R"), "1": ("seek1", "_", "R"), "_": ("acc", "_", "N")},
        "seek0": {"0": ("seek0", "0", "R"), "1": ("seek0", "1", "R"), "_": ("test0", "_", "L")},
        "seek1": {"0": ("seek1", "0", "R"), "1": ("seek1", "1", "R"), "_": ("test1", "_", "L")},
        "test0": {"0": ("back", "_", "L"), "_": ("acc", "_", "N")},
        "test1": {"1": ("back", "_", "L"), "_": ("acc", "_", "N")},
        "back": {"0": ("back", "0", "L"), "1": ("back", "1", "L"), "_": ("start", "_", "R")},
    }
    return DTM(states=set(t) | {"acc"}, input_symbols={"0", "1"}, tape_symbols={"0", "1", "_"},
               transitions=t, initial_state="start", blank_symbol="_", final_states={"acc"})


def zeros_then_ones() -> DTM:
    """0^k 1^k, k >= 1 (automata-lib's own example machine, blank '.')."""
    return DTM(
        states={"q0", "q1", "q2", "q3", "q4"}, input_symbols={"0", "1"},
        tape_symbols={"0", "1", "x", "y", "."},
        transitions={
            "q0": {"0": ("q1", "x", "R"), "y": ("q3", "y", "R")},
            "q1": {"0": ("q1", "0", "R"), "1": ("q2", "y", "L"), "y": ("q1", "y", "R")},
            "q2": {"0": ("q2", "0", "L"), "x": ("q0", "x", "R"), "y": ("q2", "y", "L")},
            "q3": {"y": ("q3", "y", "R"), ".": ("q4", ".", "R")},
        },
        initial_state="q0", blank_symbol=".", final_states={"q4"})


def binary_addition() -> DTM:
    """Binary addition, little-endian, the two operands interleaved:
    w = a_0 b_0 a_1 b_1 ... (so inputs of odd length are rejected). At an a-cell
    the machine reads a_i into its state and marks the cell ('X' on cell 0, 'x'
    elsewhere); at the b-cell it writes the sum bit of a_i + b_i + carry ('z' = 0,
    'u' = 1) and keeps the carry in its state; at the end it writes the final
    carry ('u') on the first blank, walks back to the 'X' and accepts.
    Final tape: the sum bits of a + b on the b-cells, then the carry."""
    t: dict = {}
    for c in (0, 1):
        at_a = t.setdefault(f"c{c}", {})
        first = t.setdefault(f"s{c}", {}) if c == 0 else None
        for bit in "01":
            at_a[bit] = (f"c{c}a{bit}", "x", "R")
            if first is not None:
                first[bit] = (f"c{c}a{bit}", "X", "R")
            at_b = t.setdefault(f"c{c}a{bit}", {})
            for y in "01":
                sm = int(bit) + int(y) + c
                at_b[y] = (f"c{sm >> 1}", "u" if sm & 1 else "z", "R")
        at_a["_"] = ("rew", "u" if c else "_", "L")
    t["s0"]["_"] = ("acc", "_", "N")
    t["rew"] = {"x": ("rew", "x", "L"), "z": ("rew", "z", "L"), "u": ("rew", "u", "L"), "X": ("acc", "X", "N")}
    return DTM(states=set(t) | {"acc"}, input_symbols={"0", "1"}, tape_symbols=set("01xXzu_"),
               transitions=t, initial_state="s0", blank_symbol="_", final_states={"acc"})


@dataclass(frozen=True)
class MachineSpec:
    """A machine with its declared time bound T(n) (Python and sympy)."""

    name: str
    build: Callable[[], DTM]
    time_bound: Callable[[int], int]
    time_expr: sp.Expr
    describe: str
    tape_value: Callable[[str, str], bool] | None = None   # (input, final tape) -> is the tape right?


def _inc_ok(w: str, tape: str) -> bool:
    v = sum(int(ch) << i for i, ch in enumerate(w))
    bits = tape.rstrip("_")
    return sum(int(ch) << i for i, ch in enumerate(bits)) == v + 1 and set(bits) <= {"0", "1"}


def _add_ok(w: str, tape: str) -> bool:
    a = sum(int(ch) << i for i, ch in enumerate(w[0::2]))
    b = sum(int(ch) << i for i, ch in enumerate(w[1::2]))
    bits = [ch for ch in tape if ch in "zu"]
    return sum((ch == "u") << i for i, ch in enumerate(bits)) == a + b


MACHINES: dict[str, MachineSpec] = {
    "increment": MachineSpec("increment", binary_increment, *_bounds.tm_time("increment", NSYM),
                             "little-endian binary increment", _inc_ok),
    "palindrome": MachineSpec("palindrome", palindromes, *_bounds.tm_time("palindrome", NSYM),
                              "palindromes over {0,1}"),
    "0k1k": MachineSpec("0k1k", zeros_then_ones, *_bounds.tm_time("0k1k", NSYM),
                        "0^k 1^k, k >= 1 (automata-lib's example)"),
    "addition": MachineSpec("addition", binary_addition, *_bounds.tm_time("addition", NSYM),
                            "interleaved little-endian binary addition, then rewind", _add_ok),
}


# ----------------------------------------------------------------------------
# encoding (the plain-Python reference runs are in checks/tasks/turing.py)
@dataclass(frozen=True)
class Action:
    state: str
    symbol: int
    new_state: str
    write: int
    move: int


@dataclass
class Encoding:
    dtm: DTM
    symbols: list[str]
    states: list[str]
    actions: list[Action]
    action_of: dict[tuple[str, int], int]

    @classmethod
    def of(cls, dtm: DTM) -> "Encoding":
        blank = dtm.blank_symbol
        inputs = sorted(dtm.input_symbols)
        others = sorted(set(dtm.tape_symbols) - set(inputs) - {blank})
        symbols = inputs + others + [blank]
        sid = {s: i for i, s in enumerate(symbols)}
        states = sorted(dtm.states)
        actions, action_of = [], {}
        moves = {"L": -1, "N": 0, "R": 1}
        for q in states:
            for s in symbols:
                tr = dtm.transitions.get(q, {}).get(s)
                if tr is None:
                    continue
                q2, s2, d = tr
                action_of[(q, sid[s])] = len(actions)
                actions.append(Action(q, sid[s], q2, sid[s2], moves[d]))
        return cls(dtm, symbols, states, actions, action_of)

    @property
    def blank(self) -> int:
        return len(self.symbols) - 1

    def symbol_id(self, s: str) -> int:
        return self.symbols.index(s)

    def prompt(self, word: str) -> list[int]:
        for i, ch in enumerate(word):
            if ch not in self.dtm.input_symbols:
                raise ValueError(f"input position {i}: {ch!r} is not an input symbol of the machine "
                                 f"({sorted(self.dtm.input_symbols)})")
        return [BOS] + [number_token(self.symbol_id(ch)) for ch in word] + [EOS]


def automata_run(dtm: DTM, word: str) -> tuple[bool, int, str]:
    """automata-lib's own verdict: (accepted, steps, final tape as a string)."""
    steps, last = -1, None
    try:
        for conf in dtm.read_input_stepwise(word):
            steps += 1
            last = conf
        return True, steps, "".join(last.tape.tape)
    except RejectionException:
        return False, steps, "".join(last.tape.tape) if last is not None else ""


def tape_string(enc: Encoding, tape: dict[int, int], upto: int) -> str:
    return "".join(enc.symbols[tape.get(i, enc.blank)] for i in range(upto + 1))


def decode_records(enc: Encoding, word: str, records: Sequence[tuple[int, int]]) -> dict[int, int]:
    """The tape after replaying (cell, action) records over the input."""
    tape = {i: enc.symbol_id(ch) for i, ch in enumerate(word)}
    for c, a in records:
        tape[c] = enc.actions[a].write
    return tape


# ----------------------------------------------------------------------------
# the hybrid compiler (claim T5-hyb-P)
@dataclass
class TMSize:
    """Sizes of a compiled simulation for inputs of length n and T(n) steps."""

    n: int
    steps: int
    positions: int       # P: context length bound (prompt + CoT + answer)
    max_number: int      # largest number token (cells, actions, symbols)
    code: int            # bound on every |tau| and every cnt

    @classmethod
    def of(cls, enc: Encoding, n: int, T: int) -> "TMSize":
        P = _bounds.tm_positions(_bounds.INT, n, T)
        maxnum = max(n, T + 1, len(enc.actions), len(enc.symbols))
        return cls(n, T, P, maxnum, max(P, maxnum + 1) + NUMBER_BASE)


def time_of(spec: MachineSpec):
    """T(B, n): the step bound, an int (backend INT) or the sympy T(n) (backend SYM)."""
    return lambda B, n: spec.time_bound(n) if B is _bounds.INT else spec.time_expr.subs(NSYM, n)


def hybrid_declared(enc: Encoding, spec: MachineSpec) -> Declared:
    """I(n), f(n) for the hybrid simulating ``spec`` for T(n) steps: the retrieval
    head's scores reach 4 lambda K^2 + mu (P + 1) with lambda = mu (P + 1) + mu,
    mu = sharpness(f), K the code bound, P the positions (both O(T(n)));
    written once in :func:`constructions.models.bounds.tm_hybrid_int`."""
    nA, nG = len(enc.actions), len(enc.symbols)
    T = time_of(spec)
    return Declared(f"tm-{spec.name}-hybrid" if hasattr(spec, "name") else "hybrid-tm",
                    lambda B, n, a, c: _bounds.tm_hybrid_int(B, n, T(B, n), nA, nG),
                    lambda B, n: _bounds.tm_hybrid_f(B, n, T(B, n)), claim="T5-hyb-P", n_symbol=NSYM, two_limb=True)


@dataclass
class HybridTM:
    """A compiled hybrid: ``run(word)`` generates the CoT and the answer."""

    enc: Encoding
    spec: MachineSpec
    n: int
    size: TMSize
    model: Model

    def run(self, word: str) -> Generation:
        if len(word) > self.n:
            raise ValueError(f"input of length {len(word)} exceeds the compiled n = {self.n}")
        # a model compiled for n serves every shorter input; the CoT bound is that of len(word)
        return generate(self.model, self.enc.prompt(word), answer_tokens=[TRUE, FALSE],
                        max_cot=2 * self.spec.time_bound(len(word)) + 1)

    def records(self, cot: Sequence[int]) -> list[tuple[int, int]]:
        """(cell, action) pairs of a hybrid CoT (a trailing stuck cell is dropped)."""
        nums = [int(t) - NUMBER_BASE for t in cot]
        return [(nums[i], nums[i + 1]) for i in range(0, len(nums) - 1, 2)]


def tm_hybrid(spec: MachineSpec, n: int, fmt: FixedFormat | None = None) -> HybridTM:
    """The hybrid for ``spec``'s machine on inputs of length <= n (module docstring).

    Layer 1 (RNN): cnt, cnt^2, prev1 (code of the previous token) and its square, the
    latch eos_seen = [EOS seen], the ``phase`` p_t = eos_seen_t - p_{t-1} (1 at [EOS] and
    at action tokens: "emit a cell next"; 0 at cell tokens: "emit an action next").
    MLP 1: at an action token (gate p - [EOS]) decode the action a by gated
    equality on tau = a + 1 into dq = e_{q'} - e_q, ``head_move`` = move,
    ``written_code`` = s'(a) + 1; at [BOS], dq = e_{q0}.
    Layer 2 (RNN): the registers q (one-hot, |Q| numbers) and ``head`` (the head
    cell), sums of dq and head_move. MLP 2: ``cell_key`` (cell + 1) and its square at
    input positions (cnt - 1) and at action tokens (prev1 = code of the cell token
    before), 0 elsewhere; ``input_code`` = tau of an input symbol.
    Attention (the one layer): query = the cell token's code h + 1; last match wins
    (mu * cnt), [BOS] is the default (blank): ``symbol_code`` = the symbol under the
    head + 1. MLP: the next token's code ``next_code``:
    h' + 1 (p = 1, running), -2 = [TRUE] (p = 1, final state), a + 1 for the
    action of (q, symbol) or -3 = [FALSE] if none (p = 0). Readout: nearest code.
    """
    enc = Encoding.of(spec.build())
    fmt = fmt or hybrid_declared(enc, spec).format(n)
    size = TMSize.of(enc, n, spec.time_bound(n))
    s, front = _tm_space(enc, size)
    b = Builder(f"tm-{spec.name}-hybrid(n={n})", "hybrid", Vocab(size.max_number), s, claim="T5-hyb-P")
    b.max_positions = size.positions          # prompt, CoT and answer of an input of length <= n
    front.apply(b, _tm_decode_action(enc, size), name="clock+phase")
    registers, key_mlp = _tm_registers(enc, size)
    registers.apply(b, key_mlp, name="registers")
    b.attention_layer([_tm_tape_head(enc, size, fmt)], _tm_next_token(enc, size))
    b.readout([("next_code", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    b.notes.update({"machine": spec.name, "actions": len(enc.actions), "symbols": enc.symbols,
                    "states": enc.states, "time_bound": size.steps})
    return HybridTM(enc, spec, n, size, b.build(fmt))


def _state_dir(q: str) -> str:
    return f"q[{q}]"


def _state_change_dir(q: str) -> str:
    return f"dq[{q}]"


def _tm_space(enc: Encoding, size: TMSize) -> tuple[ResidualSpace, Recurrence]:
    """Embedded features, the front-end recurrence (clock, prev1, the [EOS] latch and
    the phase p), then every hidden direction (all exist before layer 1 is assembled).
    The tape head's inputs carry bounds (cnt <= P, |tau| and the cell key <= the code
    bound), so :class:`Builder` checks its scores centrally too."""
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    s.embedded("is_bos", K.F_IS_TOKEN, BOS)
    s.embedded("is_eos", K.F_IS_TOKEN, EOS)
    front = Recurrence()
    clock(s, front, delays=1, delays_sq=1, latches={"eos_seen": "is_eos"}, max_positions=size.positions,
          max_code=size.code)
    ph = front.add_state("s_phase")
    front.A[(ph, ph)] = -1
    front.A[(ph, "s_eos_seen")] = 1
    front.B[(ph, "is_eos")] = 1         # p_t = -p_{t-1} + eos_seen_{t-1} + [EOS]_t = eos_seen_t - p_{t-1}
    front.C[(s.hidden("phase"), ph)] = 1
    for q in enc.states:
        s.hidden(_state_change_dir(q))
    for lab in ["head_move", "written_code"] + [_state_dir(q) for q in enc.states] + \
            ["head", "cell_key", "cell_key_sq", "input_code", "symbol_code", "next_code"]:
        s.hidden(lab, bound={"cell_key": size.code, "cell_key_sq": size.code ** 2}.get(lab))
    return s, front


def _tm_decode_action(enc: Encoding, size: TMSize) -> list[Neuron]:
    """MLP 1: at an action token (gate p - [EOS] = 1) the action a = tau - 1, by
    :func:`gated_equality` on d = tau - (a + 1). Off the gate d <= max tau - 1 =
    max_number (every special has tau <= 0), so big = max_number + 1."""
    is_action = {"phase": 1, "is_eos": -1}
    big = size.max_number + 1
    dq = _state_change_dir
    mlp: list[Neuron] = [Neuron({"is_bos": 1}, 0, {**{dq(q): 0 for q in enc.states}, dq(enc.dtm.initial_state): 1,
                                                   "head_move": 0, "written_code": 0})]
    for a, act in enumerate(enc.actions):
        out: dict = {"head_move": act.move, "written_code": act.write + 1}
        if act.new_state != act.state:
            out[dq(act.new_state)] = 1
            out[dq(act.state)] = -1
        mlp += gated_equality({"tok": 1, "one": -(a + 1)}, is_action, big, out)
    return mlp


def _tm_registers(enc: Encoding, size: TMSize) -> tuple[Recurrence, list[Neuron]]:
    """Layer 2: the state registers q (sums of dq) and the head h (sum of dh); its
    MLP writes the retrieval key (cell + 1, and its square) and the input symbol.

    The keys are gated: cnt - 1 at input positions, prev1 at action tokens, <= 0
    elsewhere, which needs big >= max cnt = P and big >= max tau = max_number + 1
    (and their squares); ``size.code`` bounds both."""
    rec = Recurrence()
    for q in enc.states:
        st = rec.add_state(f"s_{_state_dir(q)}")
        rec.A[(st, st)] = 1
        rec.B[(st, _state_change_dir(q))] = 1
        rec.C[(_state_dir(q), st)] = 1
    rec.add_state("s_head")
    rec.A[("s_head", "s_head")] = 1
    rec.B[("s_head", "head_move")] = 1
    rec.C[("head", "s_head")] = 1
    big, big_sq = size.code, size.code ** 2
    if big < size.positions or big < size.max_number + 1:
        raise MarginError(f"hybrid-tm keys: big {big} below the largest cnt {size.positions} or tau")
    return rec, [
        # key = cell + 1 = cnt - 1 at input positions (cnt - 1 >= 0 there; <= P - big < 0 elsewhere)
        Neuron({"cnt": 1, "eos_seen": -big, "is_bos": -big}, -1, {"cell_key": 1}),
        Neuron({"cnt_sq": 1, "cnt": -2, "eos_seen": -big_sq, "is_bos": -big_sq}, 1, {"cell_key_sq": 1}),
        # key = prev1 = code of the cell token at action tokens (>= 1 there)
        Neuron({"prev1": 1, "phase": big, "is_eos": -big}, -big, {"cell_key": 1}),
        Neuron({"prev1_sq": 1, "phase": big_sq, "is_eos": -big_sq}, -big_sq, {"cell_key_sq": 1}),
        # the input symbol's code (>= 1) at input positions
        Neuron({"tok": 1, "eos_seen": -big, "is_bos": -big}, 0, {"input_code": 1}),
    ]


def _tm_tape_head(enc: Encoding, size: TMSize, fmt: FixedFormat) -> Head:
    """The attention layer's one head: the last write to the cell the token names."""
    return match_head("tape", components=[Component({"tok": 1}, {"cell_key": 1}, {"cell_key_sq": 1}, size.code,
                                                    size.code, query_sq={"tok_sq": 1})],
                      copy={"symbol_code": {"input_code": 1, "written_code": 1, "is_bos": enc.blank + 1}}, fmt=fmt,
                      tie_break="last", fallback="bos", tight=True, n_positions=size.positions + 2, pos="cnt")


def _tm_next_token(enc: Encoding, size: TMSize) -> list[Neuron]:
    """The MLP of the attention layer: the next token's code ``v`` by phase.

    p = 1: v = h + 1 (running) or code([TRUE]) (final state); the gated value needs
    head + 1 <= big_v where p = 0 or a final state holds: the head moves at most one
    cell per step from cell 0, so head <= T and big_v = T + 1.
    p = 0: v = a + 1 of (q, symbol), or code([FALSE]); :func:`gated_equality` on
    d = sym - (s + 1) with gate q - p: off the gate d <= max sym - 1, and sym (a copy
    of symv + wsym + (blank + 1) [BOS], each <= G) is <= 3 G, so big_s = 3 G."""
    G = len(enc.symbols)
    fin = {_state_dir(q): 1 for q in enc.states if q in enc.dtm.final_states}
    big_v = size.steps + 1
    mlp = [
        Neuron({"head": 1, "phase": big_v, **{k: -big_v for k in fin}}, 1 - big_v, {"next_code": 1}),  # running
        Neuron({"phase": 1, **fin}, -1, {"next_code": token_code(TRUE)}),                              # final state
    ]
    big_s = 3 * G
    for q in enc.states:
        if q in enc.dtm.final_states:
            continue
        for sid in range(G):
            a = enc.action_of.get((q, sid))
            val = a + 1 if a is not None else token_code(FALSE)
            mlp += gated_equality({"symbol_code": 1, "one": -(sid + 1)}, {_state_dir(q): 1, "phase": -1}, big_s,
                                  {"next_code": val})
    return mlp


# ----------------------------------------------------------------------------
# the linear RNN + in-context RAG compiler (claim T5-RAG, Turing-machine part)
#
# CoT per step (h = head cell, q = state; all emitted by the RNN except r, r2):
#
#   [SS] [.] [*] ~ h [(] [#] [)] [ES] r          the LAST record of cell h (see below)
#   ( [SS] [BOS] [#]^h [(] [#] [)] [ES] r2 )     only if r = [FAILED]: the input symbol w_h
#   ~ h a'                                        the record of this step's write
#
# then [SS] of the next step, or [TRUE] right after an a' entering a final state,
# or [FALSE] right after "~ h" when (q, symbol) has no transition.
#
# The regex of ``[.] [*] ~ h [(] [#] [)]`` is ``(?:tok)*(?:<~>)(?:<n h>)(<number>)``
# (constructions/models/rag.py renders it): the greedy run (?:tok)* starts at the first
# token and backtracks from the end, so the leftmost match ends at the LAST
# ``~ h <number>`` of the searched text: the newest record of cell h. ``~`` occurs
# only in records (the prompt has none; queries and their answers are cut out by
# the oracle). r is that record's action a (the symbol under the head is then
# s'(a), the symbol a wrote), or [FAILED] if cell h was never written. Then
# ``[BOS] [#]^h [(] [#] [)]`` reads the (h+1)-th token after [BOS]: the input
# symbol w_h if h < n, else [FAILED] ([EOS] is not a number): the blank.
# Every step writes a record of its cell, so each cell falls back at most once.

def rag_cot_bound(n: int, T: int) -> int:
    """13 tokens per step (9 query + r + 3 record), plus h + 7 for the one
    fallback of each cell h <= C = max(n, T), plus the last step's query, r and
    fallback-free ``~ h`` (13)."""
    C = max(n, T)
    return 13 * (T + 1) + (C + 1) * (C + 14) // 2


@dataclass
class RagTM:
    """A compiled linear RNN + RAG simulation: ``run(word)`` -> (Generation, oracle)."""

    enc: Encoding
    spec: MachineSpec
    n: int
    program: object
    model: Model
    cot_bound: int

    def run(self, word: str, model: Model | None = None):
        if len(word) > self.n:
            raise ValueError(f"input of length {len(word)} exceeds the compiled n = {self.n}")
        oracle = RagOracle()
        # a model compiled for n serves every shorter input (T, the vocabulary and
        # the bits are monotone in n); the CoT bound used is that of len(word)
        g = generate(model or self.model, self.enc.prompt(word), answer_tokens=[TRUE, FALSE],
                     max_cot=rag_cot_bound(len(word), self.spec.time_bound(len(word))), oracle=oracle)
        return g, oracle

    @staticmethod
    def records(cot: Sequence[int]) -> list[tuple[int, int]]:
        """(cell, action) of every complete record ``~ h a`` outside search spans."""
        out, i, inq = [], 0, False
        while i < len(cot):
            t = cot[i]
            if t == STARTSEARCH:
                inq = True
            elif t == ENDSEARCH:
                inq = False
                i += 1                      # skip the retrieved token
            elif t == TILDE and not inq and i + 2 < len(cot) and cot[i + 2] >= NUMBER_BASE:
                out.append((cot[i + 1] - NUMBER_BASE, cot[i + 2] - NUMBER_BASE))
                i += 2
            i += 1
        return out


def rag_sizes(enc: Encoding, n: int, T: int) -> tuple[int, int]:
    """(largest number token, largest |tau| of the vocabulary)."""
    maxnum = max(n, T + 1, len(enc.actions), len(enc.symbols))
    return maxnum, max(maxnum + 1, NUMBER_BASE)


def rag_declared(enc: Encoding, spec: MachineSpec) -> Declared:
    """f = 0 (every signal is an integer); I(n) = bits_for(8 K^2) + 1 with K the
    largest token code (<= T(n) + A + G + 32): the program's interval bound on every
    value and partial sum (required_int_bits) stays below it -- asserted when
    compiling. Readout logits 2 tau out - tau^2 are the largest terms. Written once
    in :func:`constructions.models.bounds.tm_rag_int`."""
    nA, nG = len(enc.actions), len(enc.symbols)
    T = time_of(spec)
    return Declared(f"tm-{spec.name}-rag" if hasattr(spec, "name") else "rag-tm",
                    lambda B, n, a, c: _bounds.tm_rag_int(B, n, T(B, n), nA, nG),
                    _bounds.const(0), claim="T5-RAG", n_symbol=NSYM)


def tm_rag(spec: MachineSpec, n: int, fmt: FixedFormat | None = None) -> RagTM:
    """The linear RNN (a :class:`~constructions.build.rnn_program.Program`) that writes
    the RAG CoT above. Registers: q (one-hot counters, incremented by the decoded
    action at a' tokens, q0 set at [EOS]), h (head), R (fallback countdown: + h at
    a [BOS] inside the CoT, - 1 per counting [#]), inq (inside a query). Token
    history through delay lines of flags. The symbol under the head is decoded at
    the retrieved token (s'(a) after the main query, w_h or the blank after the
    fallback) and delayed to the record's h, where (q, symbol) selects a' or [FALSE]."""
    enc = Encoding.of(spec.build())
    T = spec.time_bound(n)
    maxnum, K = rag_sizes(enc, n, T)
    p = Program(f"tm-{spec.name}-rag(n={n})", Vocab(maxnum, meta=True), claim="T5-RAG")
    # gate constant of every gated equality below: d = x - c - big (1 - gate) with
    # 1 <= c and x <= max(K, G) (a token code or a symbol code), so for gate <= 0,
    # d <= max(K, G) - 1 - big < 0 needs big >= max(K, G); K + G + 2 is kept (it
    # also keeps the program's interval bounds, hence its used bits, as they were)
    big = K + len(enc.symbols) + 2
    require(big >= max(K, len(enc.symbols)), f"rag-tm: gate constant {big} below the largest code")
    w = _rag_history(p)
    regs = _rag_registers(p, enc, w, big, max(n, T))
    sym_d = _rag_symbol(p, enc, w, big)
    more = _rag_fallback(p, w, regs["h"], max(n, T))
    p.emit(_rag_rules(p, enc, w, regs, sym_d, more, big))
    fmt = fmt or rag_declared(enc, spec).format(n)
    model = p.compile(fmt)          # raises MarginError if the program's interval bound exceeds fmt
    return RagTM(enc, spec, n, p, model, rag_cot_bound(n, T))


def _rag_history(p) -> dict:
    """Token flags, their delay lines and ``inq`` (inside a query)."""
    M = META_TOKENS
    ist = {name: p.is_token(t) for name, t in (
        ("SS", STARTSEARCH), ("ES", ENDSEARCH), ("FAILED", FAILED), ("~", TILDE), ("BOS", BOS), ("EOS", EOS),
        ("[.]", M["[.]"]), ("[*]", M["[*]"]), ("[(]", M["[(]"]), ("[#]", M["[#]"]), ("[)]", M["[)]"]))}
    return {"ist": ist,
            "tilde_d": p.delay_line("tilde", ist["~"], 2),          # [~] at t-1, t-2
            "es_d": p.delay_line("es", ist["ES"], 1),
            "failed_d": p.delay_line("failed", ist["FAILED"], 1),
            "lpar_d": p.delay_line("lpar", ist["[(]"], 1),
            "num_d": p.delay_line("isnum", p.is_number, 5),         # is_number at t-1 .. t-5
            "inq": p.counter("inq", ist["SS"] - ist["ES"], 0, 1)}


def _rag_registers(p, enc: Encoding, w: dict, big: int, max_cell: int) -> dict:
    """The action token a' of a record (a number two tokens after ~), decoded by gated
    equality; the one-hot state counters q, the head h, and [q is final]."""
    tok, isnum, ist = p.token, p.is_number, w["ist"]
    act = []
    for a in range(len(enc.actions)):
        gate = isnum + w["tilde_d"][1] - 1                 # 1 iff number with ~ two tokens back
        act.append(p.equal(f"act[{a}]", tok - (a + 1) - big * (1 - gate)))
    dq = {}
    for q in enc.states:
        lin = ist["EOS"] * (1 if q == enc.dtm.initial_state else 0)
        for a, x in enumerate(enc.actions):
            if x.new_state != x.state:
                lin = lin + act[a] * ((q == x.new_state) - (q == x.state))
        dq[q] = lin
    qreg = {q: p.counter(f"q[{q}]", dq[q], 0, 1) for q in enc.states}
    dh = sum((act[a] * x.move for a, x in enumerate(enc.actions) if x.move), p.const_flag(0))
    h = p.counter("h", dh, 0, max_cell)
    fin = sum((qreg[q].lin() for q in enc.states if q in enc.dtm.final_states), p.const_flag(0))
    return {"q": qreg, "h": h, "fin": fin}


def _rag_symbol(p, enc: Encoding, w: dict, big: int) -> list:
    """The symbol under the head + 1, decoded at the retrieved token (s'(a) + 1 after
    a main query, w_h + 1 or the blank after the fallback) and delayed two steps."""
    tok, ist, es_d, num_d = p.token, w["ist"], w["es_d"], w["num_d"]
    main_r = es_d[0] + num_d[4] - 1                       # 1 iff right after [ES] of a main query
    fb_r = es_d[0] - num_d[4]                             # 1 iff right after [ES] of a fallback query
    parts = []
    for a, x in enumerate(enc.actions):
        parts.append((p.equal(f"r_act[{a}]", tok - (a + 1) - big * (1 - main_r)), x.write + 1))
    for sid in range(len(enc.symbols)):
        parts.append((p.equal(f"r_sym[{sid}]", tok - (sid + 1) - big * (1 - fb_r)), sid + 1))
    parts.append((p.equal("r_blank", ist["FAILED"] + fb_r, 2), enc.blank + 1))
    sym_lin = sum((f * c for f, c in parts), p.const_flag(0))
    sym = p.select("sym", p.const_flag(1), sym_lin, 0)
    return p.delay_line("sym", sym, 2)                    # at "~ h": the retrieved token is 2 back


def _rag_fallback(p, w: dict, h, max_cell: int):
    """The fallback countdown R (+ h at a [BOS] in the CoT, - 1 per counting [#]) and [R >= 1]."""
    ist = w["ist"]
    start = p.select("fb_start", ist["BOS"], h, 0)
    count_hash = p.all_of("count_hash", [ist["[#]"]], [w["lpar_d"][0]])
    R = p.counter("R", start - count_hash, 0, max_cell)
    return p.at_least("more", R, 1)


def _rag_rules(p, enc: Encoding, w: dict, regs: dict, sym_d: list, more, big: int) -> list:
    """The next token, one rule per case of the CoT grammar (comment block above),
    then the step's action a' (or [FALSE]) selected by (q, symbol) at the record's h."""
    M, code, A = META_TOKENS, token_code, p.all_of
    ist, es_d, failed_d, lpar_d, num_d = w["ist"], w["es_d"], w["failed_d"], w["lpar_d"], w["num_d"]
    isnum, tilde_d, inq, h = p.is_number, w["tilde_d"], w["inq"], regs["h"]
    rec_h = A("rec_h", [tilde_d[0], isnum], [inq])          # h of a record "~ h"
    qry_h = A("qry_h", [tilde_d[0], isnum, inq])            # h of a main query
    act_pos = A("act_pos", [isnum, tilde_d[1]])
    rules = [
        (ist["EOS"], code(STARTSEARCH)),
        (A("ss_fb", [ist["SS"], failed_d[0]]), code(BOS)),
        (A("ss_main", [ist["SS"]], [failed_d[0]]), code(M["[.]"])),
        (ist["[.]"], code(M["[*]"])),
        (ist["[*]"], code(TILDE)),
        (ist["~"], h + 1),
        (qry_h, code(M["[(]"])),
        (A("bos_more", [ist["BOS"], more]), code(M["[#]"])),
        (A("bos_done", [ist["BOS"]], [more]), code(M["[(]"])),
        (ist["[(]"], code(M["[#]"])),
        (A("hash_close", [ist["[#]"], lpar_d[0]]), code(M["[)]"])),
        (A("hash_more", [ist["[#]"], more], [lpar_d[0]]), code(M["[#]"])),
        (A("hash_done", [ist["[#]"]], [lpar_d[0], more]), code(M["[(]"])),
        (ist["[)]"], code(ENDSEARCH)),
        (A("r_found", [es_d[0], isnum]), code(TILDE)),
        (A("r_main_failed", [ist["FAILED"], es_d[0], num_d[4]]), code(STARTSEARCH)),
        (A("r_fb_failed", [ist["FAILED"], es_d[0]], [num_d[4]]), code(TILDE)),
        (A("accept", [act_pos, regs["fin"]]), code(TRUE)),
        (A("continue", [act_pos], [regs["fin"]]), code(STARTSEARCH)),
    ]
    for q in enc.states:
        if q in enc.dtm.final_states:
            continue
        for sid in range(len(enc.symbols)):
            a = enc.action_of.get((q, sid))
            cond = p.equal(f"do[{q},{sid}]", sym_d[1] - (sid + 1) - big * (2 - regs["q"][q] - rec_h))
            rules.append((cond, a + 1 if a is not None else code(FALSE)))
    return rules
