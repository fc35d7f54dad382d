"""Named residual space and the reusable gadgets every construction is built from.

In the style of Tracr, every direction of the residual stream has a name, a weight
is written as its action on named directions, and :meth:`Builder.build` assembles
the dense arrays once. A direction has exactly one writer unless declared
``accumulate=True``. Each attention gadget derives its sharpness from the fraction
bits and its score gap, and checks with exact rationals (:func:`require`) that
non-target weights vanish and its scores fit the format; a failure raises
:class:`MarginError` before any kernel runs, and :class:`Builder` checks every
head again. Gadgets: :func:`match_head`, :func:`first_max_head`,
:func:`shift_head`, :func:`count_head` (attention); :func:`equality_neurons`,
:func:`step_neurons`, :func:`select_neurons`, :func:`count_compare_neurons`,
:func:`mask_unless_equal_neurons`, :func:`max_neurons` (MLP); recurrent gadgets
at the end of the file. Each is tested in tests/test_gadgets.py.

Details (margins, an Index example): docs/internals/build.md#gadgets
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

import numpy as np
import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.formats import FixedFormat
from .spec import AttnLayerSpec, HeadSpec, ModelSpec, RNNLayerSpec, frac_matrix
from .model import Model
from .num import (
    LN2_UPPER, MarginError, SymbolicFormat, as_float, bits_for, exact, is_sym, is_zero, pow2,
    require, sabs, sharpness, smax, smin, zero_gap,
)
from rnngap.constructions.machine.vocab import COUNT, META_NAMES, SPECIAL_NAMES, Vocab

Combo = Mapping[str, Any]
"""A linear combination of named directions: {direction: coefficient}."""


# ----------------------------------------------------------------------------
class ResidualSpace:
    """Named directions of the residual stream, in order of creation."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.index: dict[str, int] = {}
        self.embedding: dict[str, tuple[int, Any, Fraction]] = {}
        self.writer: dict[str, str] = {}
        self.accumulate: set[str] = set()
        self.bound: dict[str, Fraction] = {}      # |value| <= bound, where known (see Builder.direction_bound)

    def _new(self, label: str) -> str:
        if label in self.index:
            raise ValueError(f"direction {label!r} exists already")
        self.index[label] = len(self.labels)
        self.labels.append(label)
        return label

    def embedded(self, label: str, kind: int, param: Any = 0, coef: Any = 1) -> str:
        """A direction filled by the embedding formula coef * feature(token, position);
        its bound follows from the vocabulary and the positions
        (:meth:`Builder.direction_bound`)."""
        self._new(label)
        self.embedding[label] = (kind, exact(param) if kind in (K.F_TOK_INV, K.F_POS_INV) else param, exact(coef))
        self.writer[label] = "embedding"
        return label

    def hidden(self, label: str, accumulate: bool = False, bound: Any = None) -> str:
        """A direction written later by exactly one block (or several, if
        accumulate); ``bound``: an integer B with |value| <= B at every position,
        used by :meth:`Builder.attention_layer` to bound scores."""
        self._new(label)
        if accumulate:
            self.accumulate.add(label)
        if bound is not None:
            bound = exact(bound)
            if not is_sym(bound) and bound < 0:
                raise ValueError(f"direction {label!r}: bound must be >= 0, got {bound}")
            self.bound[label] = bound
        return label

    def __getitem__(self, label: str) -> int:
        try:
            return self.index[label]
        except KeyError:
            raise KeyError(f"no direction named {label!r}; have {self.labels}") from None

    def __len__(self) -> int:
        return len(self.labels)

    def claim_write(self, label: str, block: str) -> None:
        self[label]
        if label in self.accumulate:
            self.writer.setdefault(label, block)   # written (possibly by several blocks)
            return
        prev = self.writer.get(label)
        if prev is not None and prev != block:
            raise ValueError(f"direction {label!r} is written by {prev!r} already; {block!r} may not write it "
                             f"(declare it accumulate=True if both are meant to add)")
        self.writer[label] = block

    def row(self, combo: Combo) -> np.ndarray:
        v = np.empty(len(self.labels), dtype=object)
        v.fill(Fraction(0))
        for k, c in combo.items():
            v[self[k]] += exact(c)
        return v


def base_space() -> ResidualSpace:
    """The directions every Transformer construction starts from, in this order:
    ``one``, ``tok`` (tau), ``tok_sq`` (tau^2), ``pos``, ``pos_sq``."""
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("tok_sq", K.F_TOK_SQ)
    s.embedded("pos", K.F_POS)
    s.embedded("pos_sq", K.F_POS_SQ)
    return s


@dataclass
class Head:
    """score(i, j) = sum_k (query_k . x_i) (key_k . x_j); the head adds to each
    ``copy`` target direction the attention-weighted average of its combo."""

    name: str
    score: list[tuple[Combo, Combo]]
    copy: dict[str, Combo]
    margin: dict = field(default_factory=dict)
    gap: Any = None
    """The head's score gap: every position it must not attend scores at least
    ``gap`` below the position(s) it attends; checked > zero_gap(f) by the builder."""
    intent: tuple = ()
    """What the head is meant to compute, as (gadget, parameters): recorded by the
    gadget that made it (e.g. ``("shift", {"shift": 1, ...})``) and carried into
    the built model, where ``rnngap certify`` checks the built weights against it."""


@dataclass
class Neuron:
    """out += coef * relu(inp . x + bias) for each (dir, coef) in ``out``."""

    inp: Combo
    bias: Any
    out: Combo
    group: Any = None
    """The gadget this neuron belongs to (an :class:`MLPIntent` shared by its
    neurons), carried into the built model for ``rnngap certify``; None for a
    neuron no gadget made."""


@dataclass(eq=False)
class MLPIntent:
    """What a group of neurons is meant to compute: ``gadget`` (its name),
    ``params`` (the combos and constants it was called with) and the premise on
    its inputs under which it is exact. Identity (not value) names a group."""

    gadget: str
    params: dict
    premise: str = ""


def tagged(neurons: list[Neuron], gadget: str, premise: str = "", **params) -> list[Neuron]:
    """The neurons of one gadget, each tagged with the same :class:`MLPIntent`."""
    intent = MLPIntent(gadget, params, premise)
    for nrn in neurons:
        nrn.group = intent
    return neurons


class Builder:
    """Assembles named blocks into a :class:`ModelSpec` and then a :class:`Model`.

    Central margin check: every head of :meth:`attention_layer` records its
    largest |score| = sum over score rows of max|query . x| * max|key . x|, from
    the directions' bounds (:meth:`direction_bound`), and its declared ``gap``;
    :meth:`build` (and :meth:`attention_layer`, when the builder was given
    ``fmt``) refuses with :class:`MarginError` a score bound >= 2^I or a gap not
    above zero_gap(f). With ``bounded=True`` every direction a head reads must
    have a bound and every head must declare its gap, so no head (gadget or
    hand-built) skips the check; the Transformer constructions of retrieval.py,
    istree.py and demos.py are built that way. Builders without it (the hybrid,
    Turing-machine, simulator and RAG constructions, whose hidden directions carry
    no bounds yet) check the heads whose directions are all bounded.
    """

    def __init__(self, name: str, kind: str, vocab: Vocab, space: ResidualSpace, claim: str = "",
                 bounded: bool = False, fmt: FixedFormat | None = None):
        self.name, self.kind, self.vocab, self.space, self.claim = name, kind, vocab, space, claim
        self.bounded, self.fmt = bounded, fmt
        self.head_bounds: dict[str, tuple[Fraction, Any]] = {}
        # blocks are checked when added and assembled into dense arrays by spec(), over
        # every direction created by then (a phase may create directions after an earlier layer)
        self._rnn_blocks: list[tuple] = []
        self._attn_blocks: list[tuple] = []
        self.readout_terms: list[tuple[int, int, Any, Fraction]] = []
        self.margins: dict[str, dict] = {}
        self.notes: dict = {}
        self.max_positions: int | None = None     # see ModelSpec.max_positions

    # -- MLPs
    def _claim_mlp(self, neurons: list[Neuron], block: str) -> None:
        for n in neurons:
            self.space.row(n.inp)                     # every input direction exists
            for d in n.out:
                self.space.claim_write(d, block)

    def _mlp(self, neurons: list[Neuron]):
        D = len(self.space)
        M = len(neurons)
        W1, W2 = frac_matrix(M, D), frac_matrix(D, M)
        b1 = np.empty(M, dtype=object)
        b2 = np.empty(D, dtype=object)
        b2.fill(Fraction(0))
        for m, n in enumerate(neurons):
            b1[m] = exact(n.bias)
            W1[m] = self.space.row(n.inp)
            for d, c in n.out.items():
                W2[self.space[d], m] += exact(c)
        return W1, b1, W2, b2

    # -- bounds
    def direction_bound(self, label: str) -> Fraction | None:
        """B with |x[label]| <= B at every position, or None if unknown. Embedded
        features: |tau| <= max(max number + 1, largest special id in the
        vocabulary), positions <= max_positions - 1, indicators 1,
        1/(tau + p) <= 1/dist(p, Z); hidden directions: the bound given at creation."""
        if label in self.space.bound:
            return self.space.bound[label]
        if label not in self.space.embedding:
            return None
        kind, param, coef = self.space.embedding[label]
        tau = smax(self.vocab.max_number + 1, max(SPECIAL_NAMES),
                   max(META_NAMES) if self.vocab.meta else 0, COUNT if self.vocab.count else 0)
        last = None if self.max_positions is None else self.max_positions - 1
        p = exact(param)
        dist = min(p - (p.numerator // p.denominator), 1 - (p - (p.numerator // p.denominator)))
        feature = {K.F_ZERO: 0, K.F_ONE: 1, K.F_TOK: tau, K.F_TOK_SQ: tau * tau, K.F_IS_TOKEN: 1, K.F_IS_NUM: 1,
                   K.F_TOK_INV: (1 / dist) if dist > 0 else None,
                   K.F_POS: last, K.F_POS_SQ: None if last is None else last * last,
                   K.F_POS_INV: (1 / p) if p > 0 else None}.get(kind)
        return None if feature is None else sabs(coef) * exact(feature)

    def combo_bound(self, combo: Combo) -> Fraction | None:
        total = Fraction(0)
        for d, c in combo.items():
            if is_zero(c):
                continue
            b = self.direction_bound(d)
            if b is None:
                return None
            total += sabs(exact(c)) * b
        return total

    def _check_head(self, name: str, fmt: FixedFormat) -> None:
        max_score, gap = self.head_bounds[name]
        if max_score is not None:
            require(max_score < pow2(fmt.int_bits),
                    f"{self.name}: {name}: scores up to {max_score} (from the directions' bounds) do not "
                    f"fit {fmt.name} (|score| < 2^{fmt.int_bits})")
        if gap is not None:
            require(exact(gap) > zero_gap(fmt.frac_bits),
                    f"{self.name}: {name}: score gap {gap} is not above (f + 1) ln 2 = "
                    f"{as_float(zero_gap(fmt.frac_bits))}")

    def _record_head(self, h: Head) -> None:
        rows = [(self.combo_bound(q), self.combo_bound(k)) for q, k in h.score]
        max_score = None if any(a is None or b is None for a, b in rows) else sum(a * b for a, b in rows)
        if self.bounded:
            unbounded = sorted({d for q, k in h.score for d in (*q, *k) if self.direction_bound(d) is None})
            if unbounded:
                raise ValueError(f"{self.name}: head {h.name} reads directions without a bound: {unbounded}")
            if h.gap is None:
                raise ValueError(f"{self.name}: head {h.name} declares no score gap")
        key = f"layer {len(self._attn_blocks)} head {h.name}"
        self.head_bounds[key] = (max_score, h.gap)
        if self.fmt is not None:
            self._check_head(key, self.fmt)

    # -- layers
    def attention_layer(self, heads: list[Head], mlp: list[Neuron] = ()) -> None:
        """One attention layer (heads, then the MLP). Each head's score bound and gap
        are recorded and checked (class doc); the arrays are assembled by :meth:`spec`."""
        for h in heads:
            self._record_head(h)
            for qc, kc in h.score:
                self.space.row(qc), self.space.row(kc)        # every direction exists
            for tgt, combo in h.copy.items():
                self.space.claim_write(tgt, f"head {h.name}")
                self.space.row(combo)
            if h.margin:
                self.margins[h.name] = h.margin
        self._claim_mlp(list(mlp), f"mlp of layer {len(self._attn_blocks)}")
        self._attn_blocks.append((list(heads), list(mlp)))

    def _assemble_attention(self, heads: list[Head], mlp: list[Neuron]) -> AttnLayerSpec:
        D = len(self.space)
        specs = []
        for h in heads:
            dq = len(h.score)
            WQ, WK = frac_matrix(dq, D), frac_matrix(dq, D)
            for k, (qc, kc) in enumerate(h.score):
                WQ[k] = self.space.row(qc)
                WK[k] = self.space.row(kc)
            targets = list(h.copy)
            WV, WO = frac_matrix(len(targets), D), frac_matrix(D, len(targets))
            for k, tgt in enumerate(targets):
                WV[k] = self.space.row(h.copy[tgt])
                WO[self.space[tgt], k] = Fraction(1)
            specs.append(HeadSpec(WQ, WK, WV, WO, h.name, h.intent, dict(h.copy)))
        W1, b1, W2, b2 = self._mlp(mlp)
        return AttnLayerSpec(specs, W1, b1, W2, b2, [n.group for n in mlp])

    def rnn_layer(self, state: list[str], A: Mapping[tuple[str, str], Any], B: Mapping[tuple[str, str], Any],
                  C: Mapping[tuple[str, str], Any], mlp: list[Neuron] = (), name: str = "",
                  meaning: Mapping[str, tuple] | None = None) -> None:
        """h_t = A h_{t-1} + B x_t over named state components ``state``;
        x += C h_t. Keys: A[(s_out, s_in)], B[(s, direction)], C[(direction, s)]."""
        S = len(state)
        si = {s: i for i, s in enumerate(state)}
        if len(si) != S:
            raise ValueError(f"rnn layer {name}: duplicate state names")
        for (a, b) in A:
            si[a], si[b]
        for (s, d) in B:
            si[s], self.space[d]
        for (d, s) in C:
            si[s]
            self.space.claim_write(d, f"rnn {name or len(self._rnn_blocks)} readout")
        self._claim_mlp(list(mlp), f"mlp of rnn layer {name or len(self._rnn_blocks)}")
        self._rnn_blocks.append((list(state), dict(A), dict(B), dict(C), list(mlp), dict(meaning or {})))

    def _assemble_rnn(self, state: list[str], A: dict, B: dict, C: dict, mlp: list[Neuron],
                      meaning: dict) -> RNNLayerSpec:
        D, S = len(self.space), len(state)
        si = {s: i for i, s in enumerate(state)}
        Am, Bm, Cm = frac_matrix(S, S), frac_matrix(S, D), frac_matrix(D, S)
        for (a, b), c in A.items():
            Am[si[a], si[b]] += exact(c)
        for (s, d), c in B.items():
            Bm[si[s], self.space[d]] += exact(c)
        for (d, s), c in C.items():
            Cm[self.space[d], si[s]] += exact(c)
        W1, b1, W2, b2 = self._mlp(mlp)
        return RNNLayerSpec(Am, Bm, Cm, W1, b1, W2, b2, list(state), [n.group for n in mlp],
                            [meaning.get(st, ()) for st in state])

    def readout(self, terms: list[tuple[str, int, Any, Any]]) -> None:
        """logit(k) = sum coef * feature(k) * x[direction], terms (direction, kind, param, coef)."""
        for d, kind, param, coef in terms:
            self.readout_terms.append((self.space[d], kind, param, exact(coef)))

    def spec(self) -> ModelSpec:
        emb = []
        for lab in self.space.labels:
            emb.append(self.space.embedding.get(lab, (K.F_ZERO, 0, Fraction(0))))
        unwritten = [lab for lab in self.space.labels if lab not in self.space.writer]
        if unwritten:
            raise ValueError(f"{self.name}: directions never written: {unwritten}")
        notes = dict(self.notes)
        notes["margins"] = self.margins
        return ModelSpec(self.name, self.kind, self.vocab, list(self.space.labels), emb,
                         [self._assemble_rnn(*blk) for blk in self._rnn_blocks],
                         [self._assemble_attention(*blk) for blk in self._attn_blocks],
                         self.readout_terms, self.claim, notes, self.max_positions)

    def build(self, fmt: FixedFormat | SymbolicFormat) -> Model:
        """The model in ``fmt``; in a symbolic build (``fmt`` a
        :class:`~constructions.build.num.SymbolicFormat`) the :class:`SymbolicModel`
        that ``rnngap certify`` reads."""
        for name in self.head_bounds:
            self._check_head(name, fmt)
        if isinstance(fmt, SymbolicFormat):
            return SymbolicModel(self.spec(), fmt)
        return Model(self.spec(), fmt)


@dataclass
class SymbolicModel:
    """A construction built with symbolic sizes (:func:`constructions.build.num.symbolic_build`):
    its exact :class:`ModelSpec` (weights as sympy expressions of the sizes where
    they depend on them) and its declared format."""

    spec: ModelSpec
    fmt: SymbolicFormat

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.kind


def number_readout(b: "Builder", direction: str, one: str = "one") -> None:
    """Read out the token whose code tau is nearest the value v in ``direction``:
    logit(k) = 2 tau_k v - tau_k^2 = v^2 - (v - tau_k)^2."""
    b.readout([(direction, K.F_TOK, 0, 2), (one, K.F_TOK_SQ, 0, -1)])


# ----------------------------------------------------------------------------
# attention gadgets
#
# The match-head lemma (docs/theory.md §1). With integer components,
# 2 q k - k^2 = q^2 - (q - k)^2, so a score lam * sum_c (2 q_c k_c - k_c^2) is
# S = lam sum_c q_c^2 at a full match and at most S - lam at a key with one
# component off (by >= 1). A score more than zero_gap(f) = (f + 1) ln 2 below the
# maximum gets weight exactly 0 (exp(-g) rounds to 0 on the 2^-f grid), so every
# gap > (f + 1) ln 2 makes the weights exactly 0 and 1. s = sharpness(f) is the
# least integer above (f + 1) ln 2; P = n_positions - 1 is the largest position.
#
# * tie_break None: mu = 0, the promise is at most one match (m matches get 1/m
#   each, rounded once). "first" / "last": mu = s and a score row -mu pos
#   (+mu pos): the earliest (latest) match beats every other by >= mu.
# * fallback None: lam = mu P + s; a non-match anywhere is >= lam - mu P = s below
#   every match.
# * fallback "bos": [BOS] (is_bos = 1, every key component 0 there, its pos below
#   every other) scores S - delta. Default (symmetric): delta = mu P + s,
#   lam = delta + mu P + s: [BOS] is >= s below every match and >= s above every
#   non-match whatever their positions. tight=True: the least lam the tie-break
#   allows: "first" delta = mu P + s, lam = delta + s (mismatches only lose by
#   -mu pos); "last" delta = 0, lam = mu P + s ([BOS], the earliest position, ties a
#   match and loses by >= mu); no tie-break: delta = s, lam = 2 s.
def require_int_bits(fmt: FixedFormat, need: Any, gadget: str, what: str) -> None:
    require(fmt.int_bits >= need, f"{gadget}: {what} needs {need} integer bits, {fmt.name} has {fmt.int_bits}")


@dataclass(frozen=True)
class Component:
    """One matched component of :func:`match_head`: the query q (and its square
    ``query_sq``, needed only with ``fallback="bos"``) at the query position, the
    key k and its square ``key_sq`` at the key position. Both integer-valued,
    |q| <= ``max_query``, |k| <= ``max_key``; ``key_sq`` must equal k^2 (and
    ``query_sq`` q^2) as combos of directions."""

    query: Combo
    key: Combo
    key_sq: Combo
    max_query: Any
    max_key: Any
    query_sq: Combo | None = None


def flag_component(flag: str, one: str = "one") -> Component:
    """Require the 0/1 key flag to be 1 (q = 1 = q^2, flag^2 = flag)."""
    return Component({one: 1}, {flag: 1}, {flag: 1}, 1, 1, query_sq={one: 1})


def scaled(combo: Combo, c: Any) -> dict:
    """The combo times c."""
    return {k: exact(c) * exact(v) for k, v in combo.items()}


def combo_sum(*combos: Combo) -> dict:
    """The sum of combos."""
    out: dict = {}
    for c in combos:
        for k, v in c.items():
            out[k] = out.get(k, 0) + exact(v)
    return out


def _match_margins(s: Any, P: Any, tie_break: str | None, fallback: str | None, tight: bool):
    """(mu, delta, lam, gaps) of :func:`match_head` (derivation in the comment above)."""
    mu = s if tie_break else 0
    if fallback is None:
        lam = mu * P + s
        gaps = {"non-match": lam - mu * P}
    else:
        delta = 0 if (tight and tie_break == "last") else mu * P + s
        lam = delta + s + (mu * P if tie_break == "last" or not tight else 0)
        gaps = {"match over [BOS]": delta + {None: 0, "first": -mu * P, "last": mu}[tie_break],
                "[BOS] over non-match": lam - delta - (mu * P if tie_break == "last" else 0)}
    if tie_break:
        gaps["between matches"] = mu
    return mu, (0 if fallback is None else delta), lam, gaps


def match_head(name: str, *, components: list[Component], copy: dict[str, Combo], fmt: FixedFormat,
               n_positions: Any = None, tie_break: str | None = None, fallback: str | None = None,
               tight: bool = False, score_bound: Any = None, one: str = "one", pos: str = "pos",
               is_bos: str = "is_bos") -> Head:
    """Attend exactly to the position whose key components all equal the query's.

        score_j = lam * sum_c (2 q_c k_cj - k_cj^2)  [+ (lam sum_c q_c^2 - delta) is_bos_j]  [-/+ mu pos_j]

    The one match head of every construction; ``tie_break`` None | "first" |
    "last", ``fallback`` None | "bos", ``tight`` and the margins lam, mu, delta as
    derived in the comment above. Every gap is checked against zero_gap(f)
    (:class:`MarginError`) and the integer bits of the largest score against
    ``fmt``: by default |score| <= lam sum_c (2 Q_c K_c + K_c^2 [+ Q_c^2]) + mu P
    [+ delta] (one more bit for score differences); ``score_bound`` replaces that
    estimate by the caller's declared one (a tighter bound the caller proves, e.g.
    MQAR's, where [BOS]'s key is 0 so its two rows never both peak). Layout:
    without fallback each component has its own key-square row; with fallback
    the key squares share one row beside the [BOS] row.
    """
    if tie_break not in (None, "first", "last"):
        raise ValueError(f"{name}: tie_break must be None, 'first' or 'last', got {tie_break!r}")
    if fallback not in (None, "bos"):
        raise ValueError(f"{name}: fallback must be None or 'bos', got {fallback!r}")
    if not components:
        raise ValueError(f"{name}: need at least one component")
    if (tie_break or fallback) and n_positions is None:
        raise ValueError(f"{name}: a tie-break or fallback needs n_positions")
    if fallback and any(c.query_sq is None for c in components):
        raise ValueError(f"{name}: fallback='bos' needs query_sq on every component")
    f = fmt.frac_bits
    s, zg = sharpness(f), zero_gap(f)
    P = 0 if n_positions is None else n_positions - 1
    mu, delta, lam, gaps = _match_margins(s, P, tie_break, fallback, tight)
    for what, g in gaps.items():
        require(g > zg, f"{name}: gap {what} = {g} is not above (f + 1) ln 2 = {as_float(zg)}")
    if score_bound is None:
        score_bound = lam * sum(2 * c.max_query * c.max_key + c.max_key ** 2 + (c.max_query ** 2 if fallback else 0)
                                for c in components) + mu * P + delta
    need = bits_for(score_bound) + 1
    require_int_bits(fmt, need, name, f"scores up to {score_bound}")
    score: list[tuple[Combo, Combo]] = [(scaled(c.query, 2 * lam), dict(c.key)) for c in components]
    if fallback is None:
        score = [row for c, r in zip(components, score) for row in (r, ({one: -lam}, dict(c.key_sq)))]
    else:
        score.append(({one: -lam}, combo_sum(*[c.key_sq for c in components])))
        score.append((combo_sum(*[scaled(c.query_sq, lam) for c in components], {one: -delta}), {is_bos: 1}))
    if tie_break:
        score.append(({one: mu if tie_break == "last" else -mu}, {pos: 1}))
    margin = {"lambda": lam, "mu": mu, "delta": delta, "zero_gap": as_float(zg), "score_int_bits": need,
              **{f"gap {k}": v for k, v in gaps.items()}}
    intent = ("match", {"components": tuple(components), "tie_break": tie_break, "fallback": fallback,
                        "positions": n_positions, "lambda": lam, "mu": mu, "delta": delta})
    return Head(name, score, copy, margin, gap=smin(*gaps.values()), intent=intent)


def first_max_head(name: str, *, key: Combo, max_key: Any, copy: dict[str, Combo], fmt: FixedFormat,
                   n_positions: Any, one: str = "one", pos: str = "pos") -> Head:
    """Attend exactly to the first position with the largest integer key (0 <= key <= max_key):
    score lam * k_j - mu * pos_j with mu = sharpness(f), lam = mu P + sharpness(f)
    (P = n_positions - 1): a smaller key at any position is >= lam - mu P below,
    a later equal key >= mu below; both gaps above (f + 1) ln 2 (weights exactly 0/1).
    Integer bits: |score| <= lam max_key + mu n_positions."""
    f = fmt.frac_bits
    s = sharpness(f)
    mu = s
    lam = mu * (n_positions - 1) + s
    gaps = {"smaller key": lam - mu * (n_positions - 1), "later equal key": mu}
    for what, g in gaps.items():
        require(g > zero_gap(f), f"{name}: gap to a {what} = {g} is not above {as_float(zero_gap(f))}")
    max_score = lam * max_key + mu * n_positions
    need = bits_for(max_score) + 1
    require_int_bits(fmt, need, name, f"scores up to {max_score}")
    return Head(name, [({one: lam}, dict(key)), ({one: -mu}, {pos: 1})], copy,
                {"lambda": lam, "mu": mu, "zero_gap": as_float(zero_gap(f)), "score_int_bits": need,
                 **{f"gap {k}": v for k, v in gaps.items()}}, gap=smin(*gaps.values()),
                intent=("first_max", {"key": dict(key), "max_key": max_key, "positions": n_positions,
                                      "lambda": lam, "mu": mu}))


def shift_head(name: str, pos: str, pos_sq: str, one: str, copy: dict[str, Combo], fmt: FixedFormat,
               n_positions: Any, shift: int = 1) -> Head:
    """Attend exactly to position i - shift (the previous token for shift = 1).

    score = lambda (2 (i - s) j - j^2) = lambda ((i - s)^2 - (i - s - j)^2); the
    target scores >= lambda above any other j. For i < s the nearest position,
    0 ([BOS]), is attended. Integer bits: |score| <= 3 lambda N^2.
    """
    if shift < 1:
        raise ValueError(f"{name}: shift must be >= 1, got {shift}")
    f = fmt.frac_bits
    lam = sharpness(f)
    N = n_positions
    max_score = lam * (2 * N * N + N * N) + 2 * lam * shift * N
    need = bits_for(max_score) + 1
    require_int_bits(fmt, need, name, f"scores up to {max_score} for {N} positions")
    return Head(name,
                [({pos: 2 * lam, one: -2 * lam * shift}, {pos: 1}), ({one: -lam}, {pos_sq: 1})],
                copy,
                {"lambda": lam, "gap": lam, "zero_gap": as_float(zero_gap(f)), "score_int_bits": need}, gap=lam,
                intent=("shift", {"shift": shift, "positions": n_positions, "lambda": lam}))


def count_head(name: str, query: Combo, query_sq: Combo, key: Combo, key_sq: Combo, one: str, not_bos: Combo,
               bos_flag: str, out: str, fmt: FixedFormat, max_key: Any, n: Any,
               push_down: Combo | None = None, square_row: str = "not_bos", score_bound: Any = None) -> Head:
    """The BOS counting head: attend uniformly to [BOS] and to every position whose
    key equals the query, and copy the [BOS] indicator: the output is
    round(2^f / (c + 1)) / 2^f with c the number of matches.

    score = lambda (2 q k_j - k_j^2) - lambda q^2 [j is not BOS]: 0 on matches and on
    [BOS], <= -lambda elsewhere (the key combos are zero at [BOS], tau([BOS]) = 0).
    ``square_row="bos"`` writes the q^2 row as + lambda q^2 [j is BOS] instead (the
    same weights: softmax subtracts the maximum, and the scores stay lambda K^2
    smaller); ``not_bos`` is then the [BOS] flag combo. ``push_down``: directions
    whose keys (0/1 flags, e.g. "at or after [QUERY]") are pushed down by
    ``coef * lambda`` each, below every maximal key. ``score_bound`` replaces the
    generic |score| <= 4 lambda K^2 by the caller's declared bound. Weights:
    exactly 1/(c+1) on each maximal key, rounded once.

    Distinguishing c from c+1 needs 1/(c+1) - 1/(c+2) > 2^-f, i.e. the caller's
    comparison gadget needs f >= log2((n+1)(n+2)) + 1; asserted by
    :func:`count_compare_neurons`.
    """
    if square_row not in ("not_bos", "bos"):
        raise ValueError(f"{name}: square_row must be 'not_bos' or 'bos', got {square_row!r}")
    f = fmt.frac_bits
    lam = sharpness(f)
    max_score = lam * (4 * max_key * max_key) if score_bound is None else score_bound
    need = bits_for(max_score) + 1
    require_int_bits(fmt, need, name, f"scores up to {max_score}")
    need_count = bits_for(n + 1) + 1
    require_int_bits(fmt, need_count, name, f"softmax normaliser up to {n + 1}")
    sign = -1 if square_row == "not_bos" else 1
    score = [(scaled(query, 2 * lam), dict(key)), ({one: -lam}, dict(key_sq)),
             (scaled(query_sq, sign * lam), dict(not_bos))]
    score += [({one: -lam * exact(c)}, {d: 1}) for d, c in (push_down or {}).items()]
    return Head(name, score, {out: {bos_flag: 1}},
                {"lambda": lam, "gap": lam, "zero_gap": as_float(zero_gap(f)), "score_int_bits": need}, gap=lam,
                intent=("count", {"query": dict(query), "key": dict(key), "bos_flag": bos_flag,
                                  "push_down": dict(push_down or {}), "square_row": square_row, "lambda": lam}))


# ----------------------------------------------------------------------------
# MLP gadgets (exact when their inputs are on the promised grid). Each tags its
# neurons with its intent (:func:`tagged`): the gadget's name, the combos it was
# called with and the premise under which its lemma holds; ``rnngap certify``
# proves the built neurons compute the lemma's value on the premise.
def negated(combo: Combo) -> dict:
    return {k: -exact(c) for k, c in combo.items()}


def equality_neurons(a: Combo, b: Combo, out: str, scale: Any = 1) -> list[Neuron]:
    """out += scale * [a == b] for integer-valued a, b: the hat
    relu(d + 1) - 2 relu(d) + relu(d - 1) with d = a - b."""
    d = combo_sum(a, negated(b))
    s = exact(scale)
    return tagged([Neuron(d, 1, {out: s}), Neuron(d, 0, {out: -2 * s}), Neuron(d, -1, {out: s})],
                  "equality", "a - b is an integer", a=dict(a), b=dict(b), out=out, scale=s)


def step_neurons(d: Combo, lo: Any, hi: Any, out: str, scale: Any = 1) -> list[Neuron]:
    """out += scale * step(d): 0 if d <= lo, 1 if d >= hi (promise: d is never in
    between), as relu((d - lo)/w) - relu((d - lo)/w - 1), w = hi - lo. Exact when
    1/w is a power of two and d is on the grid."""
    lo, hi = exact(lo), exact(hi)
    w = hi - lo
    require(w > 0, f"step gadget: hi {hi} must exceed lo {lo}")
    inv = 1 / w
    inp = scaled(d, inv)
    s = exact(scale)
    return tagged([Neuron(inp, -lo * inv, {out: s}), Neuron(inp, -lo * inv - 1, {out: -s})],
                  "step", "d <= lo or d >= hi", d=dict(d), lo=lo, hi=hi, out=out, scale=s)


def select_neurons(cond: Combo, x: Combo, y: Combo, out: str, bound: Any) -> list[Neuron]:
    """out += x if cond == 1 else y, for cond in {0, 1} and |x|, |y| <= bound:
    relu(x - B(1-c)) - relu(-x - B(1-c)) + relu(y - B c) - relu(-y - B c)."""
    B = exact(bound)
    cB, mcB = scaled(cond, B), scaled(cond, -B)
    return tagged([Neuron(combo_sum(x, cB), -B, {out: 1}), Neuron(combo_sum(negated(x), cB), -B, {out: -1}),
                   Neuron(combo_sum(y, mcB), 0, {out: 1}), Neuron(combo_sum(negated(y), mcB), 0, {out: -1})],
                  "select", "cond in {0, 1}, |x|, |y| <= bound", cond=dict(cond), x=dict(x), y=dict(y), out=out,
                  bound=B)


def power_of_two_at_most(x: Any) -> Any:
    """The largest 2^k (k integer, possibly negative) with 2^k <= x (x > 0)."""
    if is_sym(x):
        return 1 / pow2(sp.ceiling(sp.log(1 / x, 2)))
    x = Fraction(x)
    if x <= 0:
        raise ValueError("need x > 0")
    p = Fraction(1)
    while p > x:
        p /= 2
    while p * 2 <= x:
        p *= 2
    return p


def count_compare_neurons(frac_dir: str, thr_dir: str, out: str, n: Any, fmt: FixedFormat,
                          check_margins: bool = True) -> list[Neuron]:
    """out += [c > t], given frac = round(1/(c+1)) (from :func:`count_head`) and
    thr = round(1/(t + 3/2)) (embedding feature 1/(tau + 1/2) of the number t,
    tau = t + 1), for 0 <= c, t <= n.

    c > t  <=>  1/(c+1) < 1/(t+3/2). The exact values differ by at least
    g = 1/(2 (n+1)(n+3/2)); each is rounded by at most 2^-(f+1), so the rounded
    difference thr - frac is >= g - 2^-f when c > t and <= -(g - 2^-f) otherwise.
    Needs g > 2^-f; the step runs from 0 to the largest power of two <= g - 2^-f.
    ``check_margins=False`` (necessity scans only) builds below that: the step is
    then one grid unit 2^-f wide and the run decides which comparisons survive.
    """
    f = fmt.frac_bits
    g = 1 / (2 * (n + 1) * (n + Fraction(3, 2)))
    slack = g - exact(1) / pow2(f)
    if check_margins or slack > 0:
        require(slack > 0, f"count comparison for n={n}: gap {g} between 1/(c+1) and 1/(t+3/2) is "
                           f"not above the rounding error 2^-{f}; needs f >= {bits_for(1 / g)}")
        w = power_of_two_at_most(slack)
    else:
        w = exact(1) / pow2(f)
    require_int_bits(fmt, bits_for(1 / w) + 1, "count comparison", f"step slope {1 / w}")
    return step_neurons({thr_dir: 1, frac_dir: -1}, 0, w, out)


def mask_unless_equal_neurons(x: Combo, a: Combo, b: Combo, out: str, bound: Any) -> list[Neuron]:
    """out += x if a != b else 0, for integer a, b and 0 <= x <= bound (= B):
    with d = a - b, relu(x - B + B d) - relu(B d - B) + relu(x - B - B d) - relu(-B d - B).
    d = 0: 0; d >= 1: x + B(d-1) - B(d-1) (the second pair is 0); d <= -1 symmetric."""
    B = exact(bound)
    d = combo_sum(a, negated(b))
    Bd, mBd = scaled(d, B), scaled(d, -B)
    return tagged([Neuron(combo_sum(x, Bd), -B, {out: 1}), Neuron(Bd, -B, {out: -1}),
                   Neuron(combo_sum(x, mBd), -B, {out: 1}), Neuron(mBd, -B, {out: -1})],
                  "mask_unless_equal", "a - b an integer, 0 <= x <= bound", x=dict(x), a=dict(a), b=dict(b),
                  out=out, bound=B)


def max_neurons(x: str, y: str, out: str) -> list[Neuron]:
    """out += max(x, y) for x >= 0: relu(x) + relu(y - x)."""
    return tagged([Neuron({x: 1}, 0, {out: 1}), Neuron({y: 1, x: -1}, 0, {out: 1})],
                  "max", "x >= 0", x={x: 1}, y={y: 1}, out=out)


# ---- recurrent gadgets (clock, delay chains, gated equality) ----
# Owned by the recurrent/hybrid side (hybrid.py, turing.py). Each gadget states
# its lemma; tests/test_recurrent_gadgets.py checks it exhaustively on small
# formats and shows it failing one margin below.
@dataclass
class Recurrence:
    """Named pieces of one linear-RNN layer: h_t = A h_{t-1} + B x_t, x += C h_t.

    Keys as in :meth:`Builder.rnn_layer`: A[(s_out, s_in)], B[(s, direction)],
    C[(direction, s)]. ``apply(builder)`` hands the layer to the builder."""

    state: list[str] = field(default_factory=list)
    A: dict = field(default_factory=dict)
    B: dict = field(default_factory=dict)
    C: dict = field(default_factory=dict)
    meaning: dict = field(default_factory=dict)
    """state -> what it holds at step t, recorded by the gadget that made it:
    ``("power", k)`` (t + 1)^k, ``("delay", source, k)`` source(t - k) (0 for t < k),
    ``("prefix_sum", flag)`` the sum of flag over steps 0..t. ``rnngap certify``
    proves it by induction on t from the built A and B."""

    def add_state(self, name: str, meaning: tuple = ()) -> str:
        if name in self.state:
            raise ValueError(f"state {name!r} exists already")
        self.state.append(name)
        if meaning:
            self.meaning[name] = meaning
        return name

    def apply(self, b: "Builder", mlp: list[Neuron] = (), name: str = "") -> None:
        b.rnn_layer(self.state, self.A, self.B, self.C, list(mlp), name=name, meaning=self.meaning)


def delay_chain(rec: Recurrence, name: str, source: Combo, depth: int, outputs: Mapping[int, str]) -> list[str]:
    """A shift register of ``source``: state s_{name}_0 = source(t), s_{name}_k =
    s_{name}_{k-1} of the previous step, so s_{name}_k = source(t - k) (0 before
    the sequence start). ``outputs`` maps a delay k (1..depth) to the direction
    that receives source(t - k). Returns the state names (index k = delay k).

    Lemma (exact, no rounding: every weight is 1): direction ``outputs[k]`` at
    position t holds source(t - k) if t >= k, else 0. Values stay within the
    source's own range, so the chain needs no integer bits beyond the source's."""
    chain = [rec.add_state(f"s_{name}_0", ("delay", dict(source), 0))]
    for d, c in source.items():
        rec.B[(chain[0], d)] = c
    for k in range(1, depth + 1):
        chain.append(rec.add_state(f"s_{name}_{k}", ("delay", dict(source), k)))
        rec.A[(chain[k], chain[k - 1])] = 1
        if k in outputs:
            rec.C[(outputs[k], chain[k])] = 1
    bad = [k for k in outputs if not 1 <= k <= depth]
    if bad:
        raise ValueError(f"delay chain {name!r}: outputs at delays {bad} outside 1..{depth}")
    return chain


def clock(space: ResidualSpace, rec: Recurrence, delays: int = 0, delays_sq: int = 0,
          latches: dict[str, str] | None = None, one: str = "one", tok: str = "tok", tok_sq: str = "tok_sq",
          max_positions: int | None = None, max_code: int | None = None) -> None:
    """The hybrids' RNN front end (no position feature needed):

    * ``cnt`` = t + 1, ``cnt_sq`` = (t + 1)^2 by cnt_t = cnt_{t-1} + 1,
      cnt_sq_t = cnt_sq_{t-1} + 2 cnt_{t-1} + 1 (so position 0 has cnt = 1);
    * delay lines ``prev{k}`` = tau(token_{t-k}) for k = 1..delays and
      ``prev{k}_sq`` = tau^2 for k = 1..delays_sq (:func:`delay_chain`; 0 before the start);
    * latches: ``latches`` maps a new direction to an embedded 0/1 flag; the
      direction holds L_t = L_{t-1} + flag_t, the number of flagged positions so far.

    With ``max_positions`` = L (the model's refusal bound) the directions carry the
    bounds cnt <= L, cnt_sq <= L^2, and with ``max_code`` >= every |tau| also
    |prev{k}| <= max_code, prev{k}_sq <= max_code^2, so :class:`Builder` checks the
    heads that read them centrally (latches stay unbounded: they count flags).

    Lemma (exact: integer weights, integer values): at position t of L positions,
    cnt = t + 1 <= L, cnt_sq = (t + 1)^2 <= L^2, |prev{k}| <= max |tau|, latch <= t + 1.
    The format needs bits_for(L^2) integer bits (|v| < 2^I) for cnt_sq and its partial
    sums (cnt_sq_{t-1} + 2 cnt_{t-1} < (t + 1)^2), if no tau^2 is larger; one bit fewer
    overflows at the last position."""
    c, c2 = rec.add_state("s_cnt", ("power", 1)), rec.add_state("s_cnt_sq", ("power", 2))
    rec.A[(c, c)] = 1
    rec.B[(c, one)] = 1
    rec.A[(c2, c2)] = 1
    rec.A[(c2, c)] = 2          # (t+1)^2 = t^2 + 2 t + 1, with cnt_{t-1} = t
    rec.B[(c2, one)] = 1
    L, T = max_positions, max_code
    rec.C[(space.hidden("cnt", bound=L), c)] = 1
    rec.C[(space.hidden("cnt_sq", bound=None if L is None else L * L), c2)] = 1
    for src, depth, suffix, bound in ((tok, delays, "", T), (tok_sq, delays_sq, "_sq", None if T is None else T * T)):
        if depth > 0:
            outs = {k: space.hidden(f"prev{k}{suffix}", bound=bound) for k in range(1, depth + 1)}
            delay_chain(rec, src, {src: 1}, depth, outs)
    for direction, flag in (latches or {}).items():
        s = rec.add_state(f"s_{direction}", ("prefix_sum", {flag: 1}))
        rec.A[(s, s)] = 1
        rec.B[(s, flag)] = 1
        rec.C[(space.hidden(direction), s)] = 1


def gated_equality(d: Combo, gate: Combo, big: int, out: Mapping[str, Any]) -> list[Neuron]:
    """out += coef * [d == 0] where gate == 1; nothing where gate <= 0.

    The hat relu(x + 1) - 2 relu(x) + relu(x - 1) of x = d - big (1 - gate).
    Lemma: for integer d and gate = 1 it is [d == 0]; wherever gate <= 0 and
    d <= big - 1, x <= d - big <= -1 and all three ReLUs are 0. The caller passes
    ``big`` = (a bound on d where the gate is off) + 1; big >= 1 is checked here,
    the premise on d by the caller's interval bound (d = big makes the hat fire)."""
    require(big >= 1, f"gated equality: big = {big} must be >= 1")
    inp = combo_sum(d, scaled(gate, big))
    return tagged([Neuron(inp, 1 - big, {k: exact(c) for k, c in out.items()}),
                   Neuron(inp, -big, {k: -2 * exact(c) for k, c in out.items()}),
                   Neuron(inp, -1 - big, {k: exact(c) for k, c in out.items()})],
                  "gated_equality", "d an integer; d <= big - 1 where gate <= 0", d=dict(d), gate=dict(gate),
                  big=big, out=dict(out))


def gated_value_neuron(value: Combo, gates: list[Combo], big: int, out: Mapping[str, Any],
                       closed: list[Combo] = (), bias: Any = 0) -> Neuron:
    """out += coef * relu(value + bias) where every gate in ``gates`` is 1 and every
    flag in ``closed`` is 0; nothing otherwise. Input: value + bias - big * (#gates
    - sum gates + sum closed).

    Lemma: with 0/1 gates and flags, if all hold the input is value + bias; if any
    fails it is <= value + bias - big <= 0 provided value + bias <= big wherever the
    gadget is off. Pass big = that bound (>= 1, checked)."""
    require(big >= 1, f"gated value: big = {big} must be >= 1")
    inp = combo_sum(value, *[scaled(g, big) for g in gates], *[scaled(g, -big) for g in closed])
    return tagged([Neuron(inp, exact(bias) - big * len(gates), dict(out))], "gated_value",
                  "0/1 gates and flags; value + bias <= big where the gadget is off", value=dict(value),
                  gates=[dict(g) for g in gates], closed=[dict(g) for g in closed], big=big, bias=exact(bias),
                  out=dict(out))[0]


def latest_flag_head(name: str, flag: Combo, pos: Combo, one: str, copy: dict[str, Combo], fmt: FixedFormat,
                     max_pos: int) -> Head:
    """Attend exactly to the latest position j with flag_j = 1 (a 0/1 flag; 1 <= pos_j <= P).

    score = lambda flag_j + mu pos_j with mu = sharpness(f) and lambda = mu P + sharpness(f).
    Lemma: the latest flagged j beats an earlier flagged one by >= mu and any
    unflagged one by >= lambda - mu (P - 1) > (f + 1) ln 2, so its weight is
    exactly 1 whenever a flagged position exists (without one: the latest position).
    Integer bits: |score| <= lambda + mu P."""
    f = fmt.frac_bits
    mu = sharpness(f)
    lam = mu * max_pos + sharpness(f)
    require(lam - mu * max_pos > zero_gap(f), f"{name}: unflagged positions would keep weight")
    require(mu > zero_gap(f), f"{name}: an earlier flagged position would keep weight")
    max_score = lam + mu * max_pos
    need = bits_for(max_score) + 1
    require_int_bits(fmt, need, name, f"scores up to {max_score}")
    return Head(name, [({one: lam}, dict(flag)), ({one: mu}, dict(pos))], copy,
                {"lambda": lam, "mu": mu, "gap_non_match": lam - mu * max_pos, "zero_gap": as_float(zero_gap(f)),
                 "score_int_bits": need}, gap=smin(lam - mu * max_pos, mu),
                intent=("latest_flag", {"flag": dict(flag), "pos": dict(pos), "max_pos": max_pos, "lambda": lam,
                                        "mu": mu}))
