"""Claim ``sim``: a constant-size Transformer with CoT simulates a given linear RNN.

Given a linear RNN (a :class:`~constructions.build.model.Model` of kind ``linear_rnn``
in a format Q(I_R).(f_R)), :func:`rnnsim_transformer` builds a Transformer (same
fraction bits f_R, more integer bits) whose greedy CoT writes, per RNN step, a
counter token, each state number as one token and the RNN's own next token, and
then emits the RNN's answer. Every product of the RNN is computed as the same
rounded product, so the simulation is exact. The gap is one-sided: the
Transformer pays with a CoT of (S + 2) x (RNN steps) tokens and a growing KV
cache. Indicator readouts and the project's number readout are supported; others
raise ``ValueError``. Preconditions (raise mode, states within the declared
range) are checked by running (:func:`compare`).

Details (CoT layout, the five layers, readouts, preconditions):
docs/internals/models.md#simulate
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Sequence

import numpy as np

from rnngap.constructions.machine import kernels as K
from .bounds import INT as _INT, SimRNN, sim_clamp, sim_emb_bound, sim_int, sim_tau_max
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    Builder, Component, Head, MarginError, Neuron, ResidualSpace, match_head, select_neurons,
)
from rnngap.constructions.build.generate import generate
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import NUMBER_BASE, SPECIAL_NAMES, Vocab, token_code

TAU_MIN = -max(SPECIAL_NAMES)
"""The smallest token code of any vocabulary: tau(special id 9) = -9."""

# The simulator's residual directions and heads, by name (the plans of checks/certify/simulator.py
# import them). Layer 1 writes the token type and the token's value:
IS_COUNTER, IS_FILLER, IS_RNN_TOKEN = "is_counter", "is_filler", "is_rnn_token"
STATE_VALUE, COUNTER_VALUE = "state_value", "counter_value"
# the position heads' copies and the block roles of layers 2 and 3, the next token's code:
SEEN_COUNTER, PROMPT_LENGTH, STEP = "seen_counter", "prompt_length", "step"
IN_PROMPT, PROMPT_DONE, AFTER_LAST_STATE = "in_prompt", "prompt_done", "after_last_state"
EMIT_NEXT_COUNTER, EMIT_RNN_TOKEN, EMIT_FILLER = "emit_next_counter", "emit_rnn_token", "emit_filler"
NEXT_CODE = "next_code"
# the heads: firstK (the first counter K(0): seen_counter, prompt_length), counter (the block's
# step), prev_token (the token before the block: the RNN's last input token), prompt (the
# prompt's token at the carried step), prev<i> (state number i of the block before)
FIRST_COUNTER_HEAD, COUNTER_HEAD, PREV_TOKEN_HEAD, PROMPT_HEAD = "firstK", "counter", "prev_token", "prompt"
# the argmax of an indicator readout: logit<j>, beats<j>, winner<j> per contender j
LOGIT, BEATS, WINNER = "logit", "beats", "winner"
ARGMAX_KINDS = (LOGIT, BEATS, WINNER)


def is_state(i: int) -> str:
    """The token-type flag of the state number S_i."""
    return f"is_state{i}"


def emit_state(i: int) -> str:
    """The block role: the next token is the state number S_i."""
    return f"emit_state{i}"


def prev_state(i: int) -> str:
    """State number i of the block before (the RNN's previous state), copied by head prev<i>."""
    return f"prev_state{i}"


def prev_state_head(i: int) -> str:
    """The head that copies state number i of the block before into :func:`prev_state`."""
    return f"prev{i}"


def rnn_embedded(label: str) -> str:
    """The simulator's copy of the RNN's embedded feature ``label`` (embedded as the RNN does)."""
    return f"rnn_embed:{label}"


def prompt_token(label: str) -> str:
    """The RNN feature ``label`` of the prompt's token at the carried step (the prompt head's copy)."""
    return f"prompt_token:{label}"


def prev_token(label: str) -> str:
    """The RNN feature ``label`` of the token before the block (the prev_token head's copy)."""
    return f"prev_token:{label}"


def rnn_residual(label: str) -> str:
    """The RNN's residual direction ``label`` (its input x_d, accumulated by several MLPs)."""
    return f"rnn:{label}"


def rnn_state(layer: int, label) -> str:
    """The state number ``label`` (its label, or its index) of the RNN's layer ``layer``."""
    return f"h{layer}:{label}"


def argmax_direction(kind: str, j: int) -> str:
    """The argmax's direction of ``kind`` (one of :data:`ARGMAX_KINDS`) for contender j."""
    return f"{kind}{j}"

# The declared integer bits are constructions/models/bounds.py's sim_int (O(log n_pos) for
# a fixed RNN: 2 log2 of the context and of the largest code, plus constants of the RNN).


def _ge(combo: dict, b: int, out: dict) -> list[Neuron]:
    """out += [v >= b] for integer-valued v = combo . x: relu(v - b + 1) - relu(v - b)."""
    return [Neuron(dict(combo), 1 - b, dict(out)), Neuron(dict(combo), -b, {k: -Fraction(c) for k, c in out.items()})]


def _feature_bound(kind: int, param, coef: Fraction, tau_lo: int, tau_hi: int, f: int) -> Fraction:
    """max |coef * feature(token)| over token codes tau_lo..tau_hi (exact enough: upper bound)."""
    c = abs(Fraction(coef))
    T = max(abs(tau_lo), abs(tau_hi))
    if kind in (K.F_ZERO,):
        return Fraction(0)
    if kind in (K.F_ONE, K.F_IS_TOKEN, K.F_IS_NUM):
        return c
    if kind == K.F_TOK:
        return c * T
    if kind == K.F_TOK_SQ:
        return c * T * T
    if kind == K.F_TOK_INV:
        return c * (1 << f)          # |1/(tau + param)| <= 2^f after rounding for any grid denominator
    raise ValueError(f"RNN embedding feature {K.FEATURE_NAMES.get(kind, kind)} is not a token feature")


@dataclass
class RNNTrace:
    """The simulated RNN's own run: state after every token it read (per layer,
    exact values), its CoT tokens, its answer (None if the CoT limit was hit)."""

    states: list[list[Fraction]]
    cot: list[int]
    answer: int | None


@dataclass
class SimRun:
    """A Transformer run decoded into blocks."""

    cot: list[int]
    answer: int | None
    stopped: str
    counters: list[int] = field(default_factory=list)
    states: list[list[Fraction]] = field(default_factory=list)
    ys: list[int | None] = field(default_factory=list)     # Y slot: None for the filler
    malformed: str = ""


def rnn_trace(rnn: Model, prompt: Sequence[int], answer_tokens: Sequence[int] | None, max_cot: int) -> RNNTrace:
    """Run the RNN token by token (its own kernels, its own format), recording the
    state after each token: the reference the simulation is compared with."""
    sizes = [L.A.shape[0] for L in rnn.spec.rnn_layers]
    sess = rnn.session(capacity=1)
    fmt = rnn.fmt
    states: list[list[Fraction]] = []

    def record():
        states.append([fmt.decode(sess.state[l, s]) for l, S in enumerate(sizes) for s in range(S)])

    for tok in prompt:
        sess.feed([int(tok)])
        record()
    answers = None if answer_tokens is None else set(int(a) for a in answer_tokens)
    cot: list[int] = []
    while True:
        y = sess.next_token()
        if answers is None or y in answers:
            return RNNTrace(states, cot, y)
        if len(cot) >= max_cot:
            return RNNTrace(states, cot, None)
        cot.append(y)
        sess.feed([y])
        record()


class RNNSimulator:
    """The Transformer of :func:`rnnsim_transformer` plus its token layout and decoder."""

    def __init__(self, rnn: Model, max_prompt: int, max_rnn_cot: int, state_int_bits: int | None = None):
        if rnn.kind != "linear_rnn":
            raise ValueError(f"{rnn.name}: rnnsim_transformer takes a linear RNN, got kind {rnn.kind!r}")
        if rnn.fmt.mode != "raise":
            raise ValueError(f"{rnn.name}: the RNN's format is in {rnn.fmt.mode!r} mode; the simulator takes an RNN "
                             f"in raise mode (a saturating RNN clips its weights and values silently, and the "
                             f"simulator reproduces the unclipped arithmetic)")
        if max_prompt < 1 or max_rnn_cot < 0:
            raise ValueError(f"need max_prompt >= 1 and max_rnn_cot >= 0, got {max_prompt}, {max_rnn_cot}")
        self.rnn = rnn
        spec = rnn.spec
        self.fR, self.IR = rnn.fmt.frac_bits, rnn.fmt.int_bits
        self.sizes = [L.A.shape[0] for L in spec.rnn_layers]
        self.S = sum(self.sizes)
        if self.S == 0:
            raise ValueError(f"{rnn.name}: the RNN has no state")
        self.B = self.S + 2
        self.max_prompt, self.max_rnn_cot = int(max_prompt), int(max_rnn_cot)
        self.max_steps = self.max_prompt + self.max_rnn_cot
        self.n_pos = self.max_prompt + self.B * self.max_steps + 1
        # --- token layout
        self.MR = rnn.vocab.max_number
        # state numbers are promised to satisfy |s| < 2^I_s (default I_s = I_R: anything the
        # RNN's format holds); each component gets R = 2^(I_s + f_R + 1) tokens
        self.Is = self.IR if state_int_bits is None else int(state_int_bits)
        if not 0 <= self.Is <= self.IR:
            raise ValueError(f"state_int_bits must be in 0..{self.IR}, got {state_int_bits}")
        self.R = 1 << (self.Is + self.fR + 1)
        self.OFF = 1 << (self.Is + self.fR)
        self.filler = NUMBER_BASE + self.MR + 1
        self.Sb = [self.MR + 2 + i * self.R for i in range(self.S)]       # number of S_i's first token
        self.Kb = self.MR + 2 + self.S * self.R
        self.vocab = Vocab(self.Kb + self.max_steps + 1)
        self.tau_F = self.MR + 2
        self.tau_S = [b + 1 for b in self.Sb] + [self.Kb + 1]
        self.tau_K = self.Kb + 1
        self.tau_max = self.vocab.max_number + 1
        self._parse_readout()
        self.model = self._build()

    # -- the RNN's readout: v = sum_d w_d x_d, nearest code
    def _parse_readout(self) -> None:
        spec = self.rnn.spec
        self.mode = "nearest"
        kinds = {kind for _, kind, _, _ in spec.readout}
        if kinds and kinds <= {K.F_IS_TOKEN, K.F_ONE} and K.F_IS_TOKEN in kinds:
            self._parse_indicator_readout()
            return
        w: dict[int, Fraction] = {}
        sq = []
        for dim, kind, _, coef in spec.readout:
            coef = Fraction(coef)
            if kind == K.F_TOK:
                if (coef / 2).denominator != 1:
                    raise ValueError(f"{spec.name}: readout tau coefficient {coef} on {spec.labels[dim]!r} is not "
                                     f"2 x an integer (only nearest-code readouts are simulated exactly)")
                w[dim] = w.get(dim, Fraction(0)) + coef / 2
            elif kind == K.F_TOK_SQ:
                sq.append((dim, coef))
            elif kind == K.F_ONE:
                continue                      # the same for every token: no effect on the argmax
            else:
                raise ValueError(f"{spec.name}: readout feature {K.FEATURE_NAMES.get(kind, kind)} is not supported "
                                 f"(only the nearest-code readout 2 tau v - tau^2)")
        if len(sq) != 1 or sq[0][1] != -1:
            raise ValueError(f"{spec.name}: the readout needs exactly one term (one, tau^2, -1), got {sq}")
        one = sq[0][0]
        kind, _, c = spec.embedding[one]
        written = any(np.any(L.C[one] != 0) or np.any(L.W2[one] != 0) or L.b2[one] != 0 for L in spec.rnn_layers)
        if kind != K.F_ONE or c != 1 or written:
            raise ValueError(f"{spec.name}: the tau^2 readout term must sit on a constant-1 direction "
                             f"({spec.labels[one]!r} is not one)")
        self.readout_w = {d: int(v) for d, v in w.items() if v != 0}

    def _parse_indicator_readout(self) -> None:
        """Readouts made of indicator terms (d, [tok = p], coef) (and constant terms):
        logit(p) = sum of round(coef x_d) over p's terms, 0 for every other token. The
        contenders are the tokens p of the RNN's vocabulary with terms plus the
        smallest-id token without any (logit 0); the RNN's argmax is the first
        contender (by id) with the largest logit."""
        spec, voc = self.rnn.spec, self.rnn.vocab
        terms: dict[int, list[tuple[int, Fraction]]] = {}
        for dim, kind, param, coef in spec.readout:
            if kind == K.F_IS_TOKEN and voc.contains(int(param)):
                terms.setdefault(int(param), []).append((dim, Fraction(coef)))
        others = [t for t in range(voc.size) if voc.contains(t) and t not in terms]
        cont = sorted(set(terms) | ({others[0]} if others else set()))
        self.mode = "argmax"
        self.contenders = cont
        self.contender_terms = [terms.get(t, []) for t in cont]
        self.readout_w = {}

    # -- names
    def _x(self, d: int) -> str:
        return rnn_residual(self.rnn.spec.labels[d])

    def _h(self, l: int, s: int) -> str:
        labels = self.rnn.spec.rnn_layers[l].state_labels
        return rnn_state(l, labels[s] if labels else s)

    def _build(self) -> Model:
        """Assemble the Transformer phase by phase (module docstring, "Layers")."""
        spec = self.rnn.spec
        space, emb_dims, emb_bound = self._space()
        fmt, v_bound, big = self._format(emb_bound)
        b = Builder(f"sim({spec.name}; L<={self.max_prompt}, cot<={self.max_rnn_cot})", "transformer",
                    self.vocab, space, claim="sim")
        b.max_positions = self.max_prompt + self.cot_bound(self.max_prompt)   # prompt + the longest CoT
        b.attention_layer([], mlp=self._token_type_mlp())
        b.attention_layer(self._position_heads(fmt, emb_dims), mlp=self._block_role_mlp())
        heads, mlp = self._rnn_input(fmt, emb_dims, emb_bound)
        b.attention_layer(heads, mlp=mlp)
        for l in range(len(spec.rnn_layers)):
            for mlp in self._rnn_layer_mlps(l):
                b.attention_layer([], mlp=mlp)
        if self.mode == "argmax":
            for mlp in self._argmax_mlps():
                b.attention_layer([], mlp=mlp)
        b.attention_layer([], mlp=self._next_code_mlp(big))
        b.readout([(NEXT_CODE, K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
        b.notes.update({"block": self.B, "state_numbers": self.S, "layout": {"filler": self.filler, "Sb": self.Sb,
                                                                             "Kb": self.Kb, "R": self.R}})
        return b.build(fmt)

    # -- directions
    def _space(self) -> tuple[ResidualSpace, list[int], Fraction]:
        """Every direction, in layout order: the Transformer's embedding, the RNN's
        embedded features (``rnn_embed:``), the token-type flags and block roles, the
        RNN's residual (``rnn:``, accumulated by several MLPs) and state (``h{l}:``).
        Returns the space, the RNN's embedded dims and the bound on their features."""
        spec, f, S = self.rnn.spec, self.fR, self.S
        sp_ = ResidualSpace()
        for lab, kind in (("one", K.F_ONE), ("tok", K.F_TOK), ("pos", K.F_POS), ("pos_sq", K.F_POS_SQ)):
            sp_.embedded(lab, kind)
        D_R = spec.width
        emb_dims = [d for d in range(D_R) if spec.embedding[d][0] != K.F_ZERO and spec.embedding[d][2] != 0]
        written = set()
        for L in spec.rnn_layers:
            for d in range(D_R):
                if np.any(L.C[d] != 0) or np.any(L.W2[d] != 0) or L.b2[d] != 0:
                    written.add(d)
        self.x_dims = sorted(set(emb_dims) | written)
        emb_bound = Fraction(0)
        for d in emb_dims:
            kind, param, coef = spec.embedding[d]
            sp_.embedded(rnn_embedded(spec.labels[d]), kind, param, coef)
            emb_bound = max(emb_bound, _feature_bound(kind, param, coef, TAU_MIN, self.tau_max, f))
        types = [IS_COUNTER, IS_FILLER, IS_RNN_TOKEN] + [is_state(i) for i in range(S)]
        roles = [STATE_VALUE, COUNTER_VALUE, SEEN_COUNTER, PROMPT_LENGTH, STEP, IN_PROMPT,
                 PROMPT_DONE, AFTER_LAST_STATE, EMIT_NEXT_COUNTER, EMIT_RNN_TOKEN, EMIT_FILLER,
                 NEXT_CODE]
        for lab in types + roles + [emit_state(i) for i in range(S)] + [prev_state(i) for i in range(S)]:
            sp_.hidden(lab)
        for d in emb_dims:
            sp_.hidden(prev_token(spec.labels[d]))
            sp_.hidden(prompt_token(spec.labels[d]))
        for d in self.x_dims:
            sp_.hidden(self._x(d), accumulate=True)
        if self.mode == "argmax":
            for j in range(len(self.contenders)):
                for lab in (argmax_direction(LOGIT, j), argmax_direction(BEATS, j), argmax_direction(WINNER, j)):
                    sp_.hidden(lab)
        comp = []                                     # (layer, index in layer) per state number
        for l, size in enumerate(self.sizes):
            for s in range(size):
                comp.append((l, s))
                sp_.hidden(self._h(l, s))
        self.comp = comp
        return sp_, emb_dims, emb_bound

    # -- the format
    def params(self) -> "SimRNN":
        """The simulated RNN's constants the declared format depends on
        (constructions/models/bounds.py :class:`~constructions.models.bounds.SimRNN`): its format,
        I_s, S, its largest number, the readout weight sum |w_d| and the largest
        embedding coefficients (constant features with 2^f_R for 1/(tau + p); tau; tau^2)."""
        spec, f = self.rnn.spec, self.fR
        emb = [Fraction(0), Fraction(0), Fraction(0)]
        for d in range(spec.width):
            kind, _, coef = spec.embedding[d]
            c = abs(Fraction(coef))
            if kind == K.F_ZERO or c == 0:
                continue
            slot, c = {K.F_TOK: (1, c), K.F_TOK_SQ: (2, c), K.F_TOK_INV: (0, c * (1 << f))}.get(kind, (0, c))
            emb[slot] = max(emb[slot], c)
        w_abs = sum(abs(v) for v in self.readout_w.values())
        return SimRNN(spec.name, self.IR, f, self.Is, self.S, self.MR, int(w_abs), tuple(emb))

    def _format(self, emb_bound: Fraction) -> tuple[FixedFormat, int, int]:
        """The declared format of constructions/models/bounds.py (:func:`~constructions.models.bounds.sim_int`
        at this context n_pos and max_steps RNN steps), read, not recomputed; what
        is checked here is the built simulator against it (measurements): its
        largest code is the declared tau_max, its embedded features stay within the
        declared bound, and the format fits int64."""
        f, p = self.fR, self.params()
        if self.tau_max != sim_tau_max(_INT, p, self.max_steps):
            raise MarginError(f"simulating {self.rnn.spec.name}: the layout's largest code {self.tau_max} is not "
                              f"the declared {sim_tau_max(_INT, p, self.max_steps)}")
        if emb_bound > sim_emb_bound(_INT, p, self.max_steps):
            raise MarginError(f"simulating {self.rnn.spec.name}: embedded features up to {emb_bound} exceed the "
                              f"declared {sim_emb_bound(_INT, p, self.max_steps)}")
        v_max, v_bound, big = sim_clamp(_INT, p)
        if not big >= v_max - TAU_MIN:
            raise MarginError(f"simulating {self.rnn.spec.name}: clamp gate {big} below v_max - TAU_MIN")
        need = sim_int(_INT, p, self.n_pos, self.max_steps)
        self.int_bits_declared = need
        if need + f > 62:
            raise MarginError(f"simulating {self.rnn.spec.name} needs I = {need} integer bits with f = {f}: "
                              f"I + f > 62 does not fit int64")
        self.fmt = FixedFormat(need, f)
        return self.fmt, v_bound, big

    # -- layer 1: token type and value from tau (integer steps)
    def _token_type_mlp(self) -> list[Neuron]:
        """Token type flags by steps on tau at the layout's range boundaries, and
        state_value = 2^-f (tau - c_i) on S_i's range (c_i = tau_S[i] + OFF), taken at
        both ends of the range as relu(tau - b) + (b - c) [tau >= b]; counter_value = t
        of a K token."""
        S, f = self.S, self.fR
        mlp: list[Neuron] = []
        tok = {"tok": 1}
        mlp += _ge(tok, self.tau_F, {IS_FILLER: 1, IS_RNN_TOKEN: -1})
        mlp.append(Neuron({}, 1, {IS_RNN_TOKEN: 1}))
        mlp += _ge(tok, self.tau_F + 1, {IS_FILLER: -1, "is_state0": 1})
        for i in range(S):
            hi_out = {is_state(i): -1}
            hi_out[IS_COUNTER if i == S - 1 else is_state(i + 1)] = 1
            mlp += _ge(tok, self.tau_S[i + 1], hi_out)
        unit = Fraction(1, 1 << f)
        for i in range(S):
            c = self.tau_S[i] + self.OFF
            for bnd, sgn in ((self.tau_S[i], 1), (self.tau_S[i + 1], -1)):
                mlp.append(Neuron(tok, -bnd, {STATE_VALUE: sgn * unit}))
                mlp += _ge(tok, bnd, {STATE_VALUE: sgn * (bnd - c) * unit})
        mlp.append(Neuron(tok, -self.tau_K, {COUNTER_VALUE: 1}))
        return mlp

    # -- layer 2: position-match heads and the block roles
    def _position_query(self, shift: int) -> dict:
        """pos - (index in the block) + shift: the block's start plus shift."""
        q = {"pos": 1, "one": shift}
        q.update({is_state(i): -(i + 1) for i in range(self.S)})
        q.update({IS_FILLER: -(self.S + 1), IS_RNN_TOKEN: -(self.S + 1)})
        return q

    def _position_heads(self, fmt: FixedFormat, emb_dims: list[int]) -> list[Head]:
        labels, Kmax = self.rnn.spec.labels, self.n_pos + 1
        key, key_sq = {"pos": 1, "one": 1}, {"pos_sq": 1, "pos": 2, "one": 1}
        first = Component({"one": 1}, {IS_COUNTER: 1}, {IS_COUNTER: 1}, 1, 1)
        heads = [match_head(FIRST_COUNTER_HEAD, components=[first],
                            copy={SEEN_COUNTER: {IS_COUNTER: 1}, PROMPT_LENGTH: {"pos": 1}}, fmt=fmt,
                            tie_break="first", n_positions=self.n_pos + 1),
                 match_head(COUNTER_HEAD, components=[Component(self._position_query(1), key, key_sq, Kmax, Kmax)],
                            copy={STEP: {COUNTER_VALUE: 1}}, fmt=fmt),
                 match_head(PREV_TOKEN_HEAD, components=[Component(self._position_query(0), key, key_sq, Kmax, Kmax)],
                            copy={prev_token(labels[d]): {rnn_embedded(labels[d]): 1} for d in emb_dims},
                            fmt=fmt)]
        for i in range(self.S):
            q = self._position_query(2 - self.B + i)
            heads.append(match_head(prev_state_head(i), components=[Component(q, key, key_sq, Kmax, Kmax)],
                                    copy={prev_state(i): {STATE_VALUE: 1}}, fmt=fmt))
        return heads

    def _block_role_mlp(self) -> list[Neuron]:
        """[t < L], [t >= L - 1], and which token the block emits next."""
        S = self.S
        mlp = _ge({PROMPT_LENGTH: 1, STEP: -1}, 1, {IN_PROMPT: 1}) + \
            _ge({STEP: 1, PROMPT_LENGTH: -1}, -1, {PROMPT_DONE: 1})
        for i in range(S):
            flag = IS_COUNTER if i == 0 else is_state(i - 1)
            mlp.append(Neuron({flag: 1, SEEN_COUNTER: 1}, -1, {emit_state(i): 1}))
        mlp.append(Neuron({is_state(S - 1): 1, SEEN_COUNTER: 1}, -1, {AFTER_LAST_STATE: 1}))
        mlp.append(Neuron({IS_FILLER: 1, IS_RNN_TOKEN: 1, SEEN_COUNTER: 1}, -1, {EMIT_NEXT_COUNTER: 1}))
        return mlp

    # -- layer 3: the prompt token at the carried counter t; the RNN input x_R
    def _rnn_input(self, fmt: FixedFormat, emb_dims: list[int], emb_bound: Fraction) -> tuple[list[Head], list[Neuron]]:
        labels, Kmax = self.rnn.spec.labels, self.n_pos + 1
        key, key_sq = {"pos": 1, "one": 1}, {"pos_sq": 1, "pos": 2, "one": 1}
        heads = [match_head(PROMPT_HEAD, components=[Component({STEP: 1, "one": 1}, key, key_sq, Kmax, Kmax)],
                            copy={prompt_token(labels[d]): {rnn_embedded(labels[d]): 1} for d in emb_dims},
                            fmt=fmt)]
        mlp = []
        for d in emb_dims:
            mlp += select_neurons({IN_PROMPT: 1}, {prompt_token(labels[d]): 1}, {prev_token(labels[d]): 1},
                                  self._x(d), emb_bound)
        mlp.append(Neuron({AFTER_LAST_STATE: 1, PROMPT_DONE: 1}, -1, {EMIT_RNN_TOKEN: 1}))
        mlp.append(Neuron({AFTER_LAST_STATE: 1, PROMPT_DONE: -1}, 0, {EMIT_FILLER: 1}))
        return heads, mlp

    # -- the RNN layers, two MLPs each
    def _rnn_layer_mlps(self, l: int) -> tuple[list[Neuron], list[Neuron]]:
        """(a) h^l = A h^l_prev + B x_R and x_R += C h^l, each signed value as
        relu(z) - relu(-z); (b) the RNN layer's own MLP on x_R (b2 through a constant neuron)."""
        L = self.rnn.spec.rnn_layers[l]
        flat = {c: i for i, c in enumerate(self.comp)}
        step = []
        for s in range(self.sizes[l]):
            z = {}
            for s2 in range(self.sizes[l]):
                if L.A[s, s2] != 0:
                    z[prev_state(flat[(l, s2)])] = Fraction(L.A[s, s2])
            for d in self.x_dims:
                if L.B[s, d] != 0:
                    z[self._x(d)] = Fraction(L.B[s, d])
            out = {self._h(l, s): 1}
            for d in self.x_dims:
                if L.C[d, s] != 0:
                    out[self._x(d)] = Fraction(L.C[d, s])
            step.append(Neuron(z, 0, out))
            step.append(Neuron({k: -v for k, v in z.items()}, 0, {k: -Fraction(v) for k, v in out.items()}))
        own = []
        for m in range(L.W1.shape[0]):
            inp = {self._x(d): Fraction(L.W1[m, d]) for d in self.x_dims if L.W1[m, d] != 0}
            out = {self._x(d): Fraction(L.W2[d, m]) for d in self.x_dims if L.W2[d, m] != 0}
            if out:
                own.append(Neuron(inp, Fraction(L.b1[m]), out))
        b2 = {self._x(d): Fraction(L.b2[d]) for d in self.x_dims if L.b2[d] != 0}
        if b2:
            own.append(Neuron({}, 1, b2))
        return step, own

    # -- the indicator readout: logits, pairwise wins, the one-hot winner
    def _argmax_mlps(self) -> tuple[list[Neuron], list[Neuron], list[Neuron]]:
        """The RNN's logits, each product rounded exactly as its readout rounds it;
        j beats i: [lg_j > lg_i] if i has a smaller id, [lg_j >= lg_i] if larger (logits
        are multiples of 2^-f: d 2^f is an integer, steps exact); the winner beats all."""
        C_ = len(self.contenders)
        logits = []
        for j, tl in enumerate(self.contender_terms):
            for d, c in tl:
                if d in self.x_dims and c != 0:
                    logits.append(Neuron({self._x(d): c}, 0, {argmax_direction(LOGIT, j): 1}))
                    logits.append(Neuron({self._x(d): -c}, 0, {argmax_direction(LOGIT, j): -1}))
        # relu(0) = 0 into every logit, so that a contender without terms has logit 0 (its
        # direction is written); one per contender, as the layout has always had (params)
        logits += [Neuron({}, 0, {argmax_direction(LOGIT, j): 1}) for j in range(C_)]
        wins = []
        sc = 1 << self.fR
        for j in range(C_):
            for i in range(C_):
                if i == j:
                    continue
                lo_ = 1 if i < j else 0                     # d 2^f >= 1 (strict) or >= 0
                wins += _ge({argmax_direction(LOGIT, j): sc, argmax_direction(LOGIT, i): -sc}, lo_,
                            {argmax_direction(BEATS, j): 1})
            if C_ == 1:
                wins.append(Neuron({}, 0, {argmax_direction(BEATS, j): 1}))
        winner = [Neuron({argmax_direction(BEATS, j): 1}, -(C_ - 2), {argmax_direction(WINNER, j): 1})
                  for j in range(C_)]
        return logits, wins, winner

    # -- final layer: the next token's code, by case
    def _next_code_mlp(self, big: int) -> list[Neuron]:
        """K(0) in the prompt, S_i(s_t^i), Y (the RNN's clamped value or its argmax
        winner's code), the filler, K(t + 1). Each case's gate constant is the span
        of the values it passes: V = tau_max + 1 for codes, big for the clamp."""
        V = self.tau_max + 1
        mlp = [Neuron({"one": 1, SEEN_COUNTER: -1}, 0, {NEXT_CODE: self.tau_K})]          # prompt: K(0)
        scale = 1 << self.fR
        for i, (l, s) in enumerate(self.comp):                                               # S_i(s_t^i)
            base = self.tau_S[i] + self.OFF
            mlp.append(Neuron({self._h(l, s): scale, emit_state(i): V}, base - V, {NEXT_CODE: 1}))
        lo, hi = TAU_MIN, self.MR + 1
        if self.mode == "nearest":                                                           # Y: clamp(v)
            v = {self._x(d): w for d, w in self.readout_w.items() if d in self.x_dims}
            mlp.append(Neuron({EMIT_RNN_TOKEN: 1}, 0, {NEXT_CODE: lo}))
            mlp.append(Neuron({**v, EMIT_RNN_TOKEN: big}, -lo - big, {NEXT_CODE: 1}))
            mlp.append(Neuron({**v, EMIT_RNN_TOKEN: big}, -hi - big, {NEXT_CODE: -1}))
        else:                                                                                # Y: sum_j tau_j win_j
            yv = {argmax_direction(WINNER, j): token_code(t) for j, t in enumerate(self.contenders)}
            Vy = hi - lo + 1
            mlp.append(Neuron({**yv, EMIT_RNN_TOKEN: Vy}, -Vy, {NEXT_CODE: 1}))
            mlp.append(Neuron({**{k: -c for k, c in yv.items()}, EMIT_RNN_TOKEN: Vy}, -Vy, {NEXT_CODE: -1}))
        mlp.append(Neuron({EMIT_FILLER: 1}, 0, {NEXT_CODE: self.tau_F}))                  # filler
        mlp.append(Neuron({STEP: 1, EMIT_NEXT_COUNTER: V}, self.tau_K + 1 - V, {NEXT_CODE: 1}))  # K(t + 1)
        return mlp

    # -- bounds
    def cot_length(self, prompt_length: int, rnn_cot: int) -> int:
        """B (L + c) - 1: the Transformer's CoT for an RNN run with c CoT tokens."""
        return self.B * (prompt_length + rnn_cot) - 1

    def cot_bound(self, prompt_length: int) -> int:
        return self.cot_length(prompt_length, self.max_rnn_cot)

    # -- running and decoding
    def run(self, prompt: Sequence[int], answer_tokens: Sequence[int] | None) -> SimRun:
        L = len(prompt)
        if L > self.max_prompt:
            raise ValueError(f"prompt of length {L} exceeds the simulator's max_prompt {self.max_prompt}")
        if answer_tokens is None and self.rnn.implicit_vocab:
            raise ValueError(f"{self.rnn.name}: name the answer tokens (its vocabulary of "
                             f"{self.rnn.vocab.size:,} tokens is implicit, not listed)")
        answers = list(answer_tokens) if answer_tokens is not None else \
            [t for t in range(self.rnn.vocab.size) if self.rnn.vocab.contains(t)]
        g = generate(self.model, prompt, answer_tokens=answers, max_cot=self.cot_bound(L))
        return self.decode(g.cot, g.answer, g.stopped)

    def decode(self, cot: list[int], answer: int | None, stopped: str) -> SimRun:
        r = SimRun(list(cot), answer, stopped)
        f = self.fR
        for start in range(0, len(cot), self.B):
            blk = cot[start:start + self.B]
            t = len(r.counters)
            num = blk[0] - NUMBER_BASE
            if num != self.Kb + t:
                r.malformed = f"block {t}: counter token {blk[0]} != K({t})"
                return r
            r.counters.append(t)
            vals = []
            for i, tok in enumerate(blk[1:1 + self.S]):
                raw = tok - NUMBER_BASE - self.Sb[i] - self.OFF
                if not -self.OFF < raw < self.OFF:
                    r.malformed = f"block {t}: token {tok} is not an S_{i + 1} token"
                    return r
                vals.append(Fraction(raw, 1 << f))
            r.states.append(vals)
            if len(blk) == self.B:
                y = blk[-1]
                r.ys.append(None if y == self.filler else y)
        return r


def rnnsim_transformer(rnn: Model, max_prompt: int, max_rnn_cot: int = 0,
                       state_int_bits: int | None = None) -> RNNSimulator:
    """Build the Transformer that simulates ``rnn`` on prompts of length <= max_prompt
    with RNN CoTs of <= max_rnn_cot tokens (these only size the counter range and
    the attention sharpness; the architecture does not depend on them).
    ``state_int_bits`` = I_s promises |state number| < 2^I_s (default: the RNN's
    own integer bits); it sizes the state-token ranges. :func:`compare` checks the
    promise on the RNN's trace and reports a violation as a failure.

    >>> from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, TRUE, FALSE
    >>> sim = rnnsim_transformer(random_linear_rnn(1), max_prompt=3, max_rnn_cot=1, state_int_bits=3)
    >>> disagreement, run, trace = compare(sim, [BOS, NUMBER_BASE + 2], [TRUE, FALSE])
    >>> disagreement, run.answer == trace.answer, len(run.states) == len(trace.states) > 0
    ('', True, True)
    """
    return RNNSimulator(rnn, max_prompt, max_rnn_cot, state_int_bits)


def compare(sim: RNNSimulator, prompt: Sequence[int], answer_tokens: Sequence[int] | None,
            max_rnn_cot: int | None = None) -> tuple[str, SimRun, RNNTrace]:
    """Run the RNN and its simulator on ``prompt``; return ('' if they agree else the
    first disagreement, the decoded run, the RNN trace). Checked: every decoded
    state equals the RNN's state after the same token, every Y token after the
    prompt equals the RNN's CoT token, the answers and the CoT length agree."""
    c_max = sim.max_rnn_cot if max_rnn_cot is None else max_rnn_cot
    tr = rnn_trace(sim.rnn, prompt, answer_tokens, c_max)
    run = sim.run(prompt, answer_tokens)
    L = len(prompt)
    lim = 1 << sim.Is
    for t, st in enumerate(tr.states):
        if any(abs(v) >= lim for v in st):
            return f"precondition violated: RNN state at step {t} leaves |s| < 2^{sim.Is}", run, tr
    # at the last prompt position the simulator computes, unused, one RNN step from the zero state on
    # the prompt token its prev_token head reads there (the token at max(0, L - S - 3): the position before
    # the block the prompt token's index S + 1 points at); its next-code layer reads those states, so
    # they too must keep the promise (at earlier prompt positions the output is not used)
    u = int(prompt[max(0, L - sim.S - 3)])
    st = rnn_trace(sim.rnn, [u], None, 0).states[0]
    if any(abs(v) >= lim for v in st):
        return (f"precondition violated: one RNN step from the zero state on the prompt token {u} (read at the "
                f"last prompt position) leaves |s| < 2^{sim.Is}"), run, tr
    if run.malformed:
        return run.malformed, run, tr
    if len(run.states) != len(tr.states):
        return f"{len(run.states)} state blocks, the RNN took {len(tr.states)} steps", run, tr
    for t, (a, b) in enumerate(zip(run.states, tr.states)):
        if a != b:
            return f"step {t}: decoded state {[str(v) for v in a]} != RNN state {[str(v) for v in b]}", run, tr
    ys = [y for y in run.ys[L - 1:]]
    if any(y is not None for y in run.ys[:L - 1]):
        return "a Y token before the prompt was consumed", run, tr
    if ys != tr.cot[:len(ys)] or len(ys) != len(tr.cot):
        return f"RNN CoT {tr.cot} != simulated {ys}", run, tr
    if run.answer != tr.answer:
        return f"answer {run.answer} != RNN answer {tr.answer}", run, tr
    if tr.answer is not None and len(run.cot) != sim.cot_length(L, len(tr.cot)):
        return f"CoT length {len(run.cot)} != {sim.cot_length(L, len(tr.cot))}", run, tr
    return "", run, tr


__all__ = ["RNNSimulator", "RNNTrace", "SimRun", "compare", "random_linear_rnn", "rnn_trace",
           "rnnsim_transformer"]


def state_output(layer: int, k: int) -> str:
    """The direction a :func:`random_linear_rnn`'s layer ``layer`` writes its state k to (its C h)."""
    return f"state_out{layer}_{k}"


def mlp_output(layer: int) -> str:
    """The direction the own MLP of a :func:`random_linear_rnn`'s layer ``layer`` writes."""
    return f"mlp_out{layer}"


def random_linear_rnn(seed: int, alphabet: int = 3, layers: int | None = None, fmt: FixedFormat | None = None,
                      name: str = "") -> Model:
    """A random small linear RNN (seeded) with dyadic weights whose values stay in
    range: |A| row sums <= 1/2, entries of B, C, W1, W2 in {0, +-1/4, +-1/2, +-1}
    (so products round on the grid 2^-2 and the simulation must reproduce each
    rounding), a nearest-code readout v = w0 +- 3 (u + m) (integers). Default format
    Q9.2. For tests and the ``sim`` checks."""
    rng = np.random.default_rng(seed)
    fmt = fmt or FixedFormat(9, 2)
    nl = int(rng.integers(1, 3)) if layers is None else int(layers)
    dy = [Fraction(0), Fraction(1, 4), Fraction(-1, 4), Fraction(1, 2), Fraction(-1, 2), Fraction(1), Fraction(-1)]

    def pick(k=len(dy)):
        return dy[int(rng.integers(0, k))]

    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK, 0, Fraction(1, 2))
    s.embedded("is_num", K.F_IS_NUM)
    emb = ["one", "tok", "is_num"]
    sizes = [int(rng.integers(1, 3)) for _ in range(nl)]
    outs_of = [[s.hidden(state_output(l, k)) for k in range(S)] for l, S in enumerate(sizes)]
    mo_of = [s.hidden(mlp_output(l)) for l in range(nl)]
    b = Builder(name or f"random-rnn(seed={seed})", "linear_rnn", Vocab(alphabet - 1), s, claim="sim")
    readable = list(emb)
    for l, S in enumerate(sizes):
        st = [f"s{l}_{k}" for k in range(S)]
        A = {}
        for i in range(S):
            budget = Fraction(1, 2)
            for j in range(S):
                a = pick(5)
                if abs(a) <= budget:
                    A[(st[i], st[j])] = a
                    budget -= abs(a)
        B = {(st[i], d): pick() for i in range(S) for d in readable}
        outs = outs_of[l]
        C = {(outs[k], st[k]): pick(5) or Fraction(1, 2) for k in range(S)}
        mo = mo_of[l]
        mlp = [Neuron({d: pick() for d in readable + outs}, pick(5), {mo: pick(5) or Fraction(1, 4)})
               for _ in range(2)]
        b.rnn_layer(st, A=A, B=B, C=C, mlp=mlp, name=f"L{l}")
        readable += outs + [mo]
    # readout v = w0 + 3 (u + m): u the last layer's first state readout, m its MLP
    # output; w0 near the middle of the codes, so that the emitted tokens vary over
    # numbers and specials (among them [TRUE] = -2, [FALSE] = -3, which end a CoT)
    w0 = int(rng.integers(-1, 2))
    sgn = 1 if rng.random() < 0.5 else -1
    b.readout([("one", K.F_TOK, 0, 2 * w0), (outs_of[-1][0], K.F_TOK, 0, 6 * sgn), (mo_of[-1], K.F_TOK, 0, 6 * sgn),
               ("one", K.F_TOK_SQ, 0, -1)])
    return b.build(fmt)
