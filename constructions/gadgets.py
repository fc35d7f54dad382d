"""Named residual space and the reusable gadgets every construction is built from.

Style after Tracr: every direction of the residual stream has a name; a weight is
written as its action on named directions ("the query of this head is
2*lambda*pos; its key is pos"), and the dense arrays are assembled once by
:meth:`Builder.build`. A direction is written by exactly one block (the
embedding, one head, one MLP neuron group or one RNN readout) unless it is
declared ``accumulate=True``; anything else is refused, so two gadgets can
never silently add into the same place.

Margins. A softmax weight is exactly 0 when its score is more than
(f + 1) ln 2 below the maximum (exp rounds to 0 on a grid of 2^-f; theory.md §1).
Each attention gadget therefore derives its sharpness lambda from the fraction
bits f and the score gap of its inputs, and checks (:func:`require`), with exact
rationals, both the gap (weights of non-targets vanish) and the integer bits its
scores need (they fit the format). A failed check raises :class:`MarginError`
naming the gadget, before any kernel runs. :class:`Builder` checks every head
again from the directions' bounds (largest score below 2^I, declared gap above
(f + 1) ln 2), so a hand-built head cannot skip the check.

Example (Index, claim T4.6-up): the query token i has tau = i + 1 and position j
has key j + 1, so::

    position = Component(query={"tok": 1}, key={"pos": 1, "one": 1},
                         key_sq={"pos_sq": 1, "pos": 2, "one": 1}, max_query=n + 1, max_key=n + 1)
    head = match_head("index", components=[position], copy={"answer": {"tok": 1}}, fmt=fmt)

attends exactly to position i and copies tau(x_i) into ``answer``.

Gadgets: attention -- :func:`match_head` (the one match head: components,
``tie_break=None|"first"|"last"``, ``fallback=None|"bos"``), :func:`first_max_head`,
:func:`shift_head`, :func:`count_head`; MLP -- :func:`equality_neurons`,
:func:`step_neurons`, :func:`select_neurons`, :func:`count_compare_neurons`,
:func:`mask_unless_equal_neurons`, :func:`max_neurons`; recurrent gadgets at the
end of the file. Each has a block-level test in tests/test_gadgets.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping

import numpy as np

from . import kernels as K
from .fixedpoint import FixedFormat
from .model import AttnLayerSpec, HeadSpec, Model, ModelSpec, RNNLayerSpec, _frac_matrix
from .vocab import COUNT, META_NAMES, SPECIAL_NAMES, Vocab

Combo = Mapping[str, Any]
"""A linear combination of named directions: {direction: coefficient}."""

LN2_UPPER = Fraction(6931471806, 10 ** 10)
"""A rational strictly above ln 2 (ln 2 = 0.69314718055994...)."""


class MarginError(ValueError):
    """A gadget's exactness condition does not hold for the given n and format."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`MarginError` with ``message`` unless ``condition`` holds (the
    margin checks of every construction; unlike ``assert`` it survives ``python -O``)."""
    if not condition:
        raise MarginError(message)


def zero_gap(f: int) -> Fraction:
    """A score gap strictly above this makes the lower weight exactly 0 on a
    grid of 2^-f: round(exp(-g) * 2^f) = 0 iff exp(-g) < 2^-(f+1)."""
    return (f + 1) * LN2_UPPER


def sharpness(f: int, unit_gap: Fraction | int = 1) -> int:
    """Smallest integer lambda with lambda * unit_gap > (f + 1) ln 2."""
    g = zero_gap(f) / Fraction(unit_gap)
    return int(g) + 1


def bits_for(magnitude: Fraction | int) -> int:
    """Integer bits I with |magnitude| < 2^I."""
    m = abs(Fraction(magnitude))
    I = 0
    while m >= (1 << I):
        I += 1
    return I


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
        self.embedding[label] = (kind, param, Fraction(coef))
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
            if Fraction(bound) < 0:
                raise ValueError(f"direction {label!r}: bound must be >= 0, got {bound}")
            self.bound[label] = Fraction(bound)
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
            v[self[k]] += Fraction(c)
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


@dataclass
class Neuron:
    """out += coef * relu(inp . x + bias) for each (dir, coef) in ``out``."""

    inp: Combo
    bias: Any
    out: Combo


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
        W1, W2 = _frac_matrix(M, D), _frac_matrix(D, M)
        b1 = np.array([Fraction(n.bias) for n in neurons], dtype=object).reshape(M)
        b2 = np.empty(D, dtype=object)
        b2.fill(Fraction(0))
        for m, n in enumerate(neurons):
            W1[m] = self.space.row(n.inp)
            for d, c in n.out.items():
                W2[self.space[d], m] += Fraction(c)
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
        tau = max(self.vocab.max_number + 1, max(SPECIAL_NAMES),
                  max(META_NAMES) if self.vocab.meta else 0, COUNT if self.vocab.count else 0)
        last = None if self.max_positions is None else self.max_positions - 1
        p = Fraction(param)
        dist = min(p - (p.numerator // p.denominator), 1 - (p - (p.numerator // p.denominator)))
        feature = {K.F_ZERO: 0, K.F_ONE: 1, K.F_TOK: tau, K.F_TOK_SQ: tau * tau, K.F_IS_TOKEN: 1, K.F_IS_NUM: 1,
                   K.F_TOK_INV: (1 / dist) if dist > 0 else None,
                   K.F_POS: last, K.F_POS_SQ: None if last is None else last * last,
                   K.F_POS_INV: (1 / p) if p > 0 else None}.get(kind)
        return None if feature is None else abs(coef) * Fraction(feature)

    def combo_bound(self, combo: Combo) -> Fraction | None:
        total = Fraction(0)
        for d, c in combo.items():
            if Fraction(c) == 0:
                continue
            b = self.direction_bound(d)
            if b is None:
                return None
            total += abs(Fraction(c)) * b
        return total

    def _check_head(self, name: str, fmt: FixedFormat) -> None:
        max_score, gap = self.head_bounds[name]
        if max_score is not None:
            require(max_score < Fraction(1 << fmt.int_bits),
                    f"{self.name}: {name}: scores up to {max_score} (from the directions' bounds) do not "
                    f"fit {fmt.name} (|score| < 2^{fmt.int_bits})")
        if gap is not None:
            require(Fraction(gap) > zero_gap(fmt.frac_bits),
                    f"{self.name}: {name}: score gap {gap} is not above (f + 1) ln 2 = "
                    f"{float(zero_gap(fmt.frac_bits)):.4f}")

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
            WQ, WK = _frac_matrix(dq, D), _frac_matrix(dq, D)
            for k, (qc, kc) in enumerate(h.score):
                WQ[k] = self.space.row(qc)
                WK[k] = self.space.row(kc)
            targets = list(h.copy)
            WV, WO = _frac_matrix(len(targets), D), _frac_matrix(D, len(targets))
            for k, tgt in enumerate(targets):
                WV[k] = self.space.row(h.copy[tgt])
                WO[self.space[tgt], k] = Fraction(1)
            specs.append(HeadSpec(WQ, WK, WV, WO, h.name))
        W1, b1, W2, b2 = self._mlp(mlp)
        return AttnLayerSpec(specs, W1, b1, W2, b2)

    def rnn_layer(self, state: list[str], A: Mapping[tuple[str, str], Any], B: Mapping[tuple[str, str], Any],
                  C: Mapping[tuple[str, str], Any], mlp: list[Neuron] = (), name: str = "") -> None:
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
        self._rnn_blocks.append((list(state), dict(A), dict(B), dict(C), list(mlp)))

    def _assemble_rnn(self, state: list[str], A: dict, B: dict, C: dict, mlp: list[Neuron]) -> RNNLayerSpec:
        D, S = len(self.space), len(state)
        si = {s: i for i, s in enumerate(state)}
        Am, Bm, Cm = _frac_matrix(S, S), _frac_matrix(S, D), _frac_matrix(D, S)
        for (a, b), c in A.items():
            Am[si[a], si[b]] += Fraction(c)
        for (s, d), c in B.items():
            Bm[si[s], self.space[d]] += Fraction(c)
        for (d, s), c in C.items():
            Cm[self.space[d], si[s]] += Fraction(c)
        W1, b1, W2, b2 = self._mlp(mlp)
        return RNNLayerSpec(Am, Bm, Cm, W1, b1, W2, b2, list(state))

    def readout(self, terms: list[tuple[str, int, Any, Any]]) -> None:
        """logit(k) = sum coef * feature(k) * x[direction], terms (direction, kind, param, coef)."""
        for d, kind, param, coef in terms:
            self.readout_terms.append((self.space[d], kind, param, Fraction(coef)))

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

    def build(self, fmt: FixedFormat) -> Model:
        for name in self.head_bounds:
            self._check_head(name, fmt)
        return Model(self.spec(), fmt)


def number_readout(b: "Builder", direction: str, one: str = "one") -> None:
    """Read out the token whose code tau is nearest the value v in ``direction``:
    logit(k) = 2 tau_k v - tau_k^2 = v^2 - (v - tau_k)^2."""
    b.readout([(direction, K.F_TOK, 0, 2), (one, K.F_TOK_SQ, 0, -1)])


# ----------------------------------------------------------------------------
# attention gadgets
def _need_bits(fmt: FixedFormat, need: int, gadget: str, what: str) -> None:
    if fmt.int_bits < need:
        raise MarginError(f"{gadget}: {what} needs {need} integer bits, {fmt.name} has {fmt.int_bits}")


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
    max_query: int
    max_key: int
    query_sq: Combo | None = None


def flag_component(flag: str, one: str = "one") -> Component:
    """Require the 0/1 key flag to be 1 (q = 1 = q^2, flag^2 = flag)."""
    return Component({one: 1}, {flag: 1}, {flag: 1}, 1, 1, query_sq={one: 1})


def _scaled(combo: Combo, c: Any) -> dict:
    return {k: Fraction(c) * Fraction(v) for k, v in combo.items()}


def _add(*combos: Combo) -> dict:
    out: dict = {}
    for c in combos:
        for k, v in c.items():
            out[k] = out.get(k, 0) + Fraction(v)
    return out


def match_head(name: str, *, components: list[Component], copy: dict[str, Combo], fmt: FixedFormat,
               n_positions: int | None = None, tie_break: str | None = None, fallback: str | None = None,
               tight: bool = False, one: str = "one", pos: str = "pos", is_bos: str = "is_bos") -> Head:
    """Attend exactly to the position whose key components all equal the query's.

    The one match head of every construction. With integer components,
    2 q k - k^2 = q^2 - (q - k)^2, so

        score_j = lam * sum_c (2 q_c k_cj - k_cj^2)  [+ (lam sum_c q_c^2 - delta) is_bos_j]  [-/+ mu pos_j]

    is S = lam sum_c q_c^2 at a full match, and at most S - lam at any key with
    one component off (by >= 1). Lemma (theory.md §1): a score more than
    zero_gap(f) = (f + 1) ln 2 below the maximum gets weight exactly 0 (exp(-g)
    rounds to 0 on the 2^-f grid), so gap > (f + 1) ln 2 makes every other weight
    exactly 0. Let s = sharpness(f) (the least integer above (f + 1) ln 2) and
    P = n_positions - 1 the largest position.

    * ``tie_break=None``: mu = 0; the promise is at most one match (m matches get
      exactly 1/m each, rounded once). ``"first"`` / ``"last"``: mu = s, score
      -mu pos (+mu pos): the earliest (latest) match beats every other match by
      >= mu > (f + 1) ln 2 (weight exactly 1).
    * ``fallback=None``: lam = mu P + s; a non-match at any position is
      >= lam - mu P = s below every match.
    * ``fallback="bos"``: the [BOS] position (``is_bos`` = 1, every key component
      0 there, its ``pos`` below every other position's by >= 1) scores S - delta.
      Default (symmetric): delta = mu P + s, lam = delta + mu P + s: [BOS] is
      >= s below every match and >= s above every non-match whatever their
      positions (match over [BOS] >= delta - mu P = s with "first"; [BOS] over a
      non-match >= lam - delta - mu P = s with "last"). ``tight=True``: the least
      lam the tie-break allows: "first" delta = mu P + s, lam = delta + s
      (mismatches only lose by -mu pos); "last" delta = 0, lam = mu P + s
      ([BOS], the earliest position, ties a match and loses it by >= mu);
      without tie-break both are delta = s, lam = 2 s. So the weight is exactly
      1 on the (first/last) match, or on [BOS] if there is none.

    Every gap above is checked against zero_gap(f) with :class:`MarginError`, and
    the integer bits of the largest score,
    |score| <= lam sum_c (2 Q_c K_c + K_c^2 [+ Q_c^2]) + mu P [+ delta] (plus one
    bit for score differences), against ``fmt``. Layout: without fallback each component
    has its own key-square row; with fallback the key squares share one row
    beside the [BOS] row (the layouts of the constructions that first used each,
    kept so parameter counts do not change).
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
    mu = s if tie_break else 0
    if fallback is None:
        delta = 0
        lam = mu * P + s
        gaps = {"non-match": lam - mu * P}
    else:
        delta = 0 if (tight and tie_break == "last") else mu * P + s
        lam = delta + s + (mu * P if tie_break == "last" or not tight else 0)
        gaps = {"match over [BOS]": delta + {None: 0, "first": -mu * P, "last": mu}[tie_break],
                "[BOS] over non-match": lam - delta - (mu * P if tie_break == "last" else 0)}
    if tie_break:
        gaps["between matches"] = mu
    for what, g in gaps.items():
        require(g > zg, f"{name}: gap {what} = {g} is not above (f + 1) ln 2 = {float(zg):.4f}")
    # the sum of the score rows' largest magnitudes (what Builder.attention_layer computes too)
    per_comp = sum(2 * c.max_query * c.max_key + c.max_key ** 2 + (c.max_query ** 2 if fallback else 0)
                   for c in components)
    max_score = lam * per_comp + mu * P + delta
    need = bits_for(max_score) + 1
    _need_bits(fmt, need, name, f"scores up to {max_score}")
    score: list[tuple[Combo, Combo]] = []
    if fallback is None:
        for c in components:
            score += [(_scaled(c.query, 2 * lam), dict(c.key)), ({one: -lam}, dict(c.key_sq))]
    else:
        score += [(_scaled(c.query, 2 * lam), dict(c.key)) for c in components]
        score.append(({one: -lam}, _add(*[c.key_sq for c in components])))
        score.append((_add(*[_scaled(c.query_sq, lam) for c in components], {one: -delta}), {is_bos: 1}))
    if tie_break:
        score.append(({one: mu if tie_break == "last" else -mu}, {pos: 1}))
    margin = {"lambda": lam, "mu": mu, "delta": delta, "zero_gap": float(zg), "score_int_bits": need,
              **{f"gap {k}": v for k, v in gaps.items()}}
    return Head(name, score, copy, margin, gap=min(gaps.values()))


def first_max_head(name: str, *, key: Combo, max_key: int, copy: dict[str, Combo], fmt: FixedFormat,
                   n_positions: int, one: str = "one", pos: str = "pos") -> Head:
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
        require(g > zero_gap(f), f"{name}: gap to a {what} = {g} is not above {float(zero_gap(f)):.4f}")
    max_score = lam * max_key + mu * n_positions
    need = bits_for(max_score) + 1
    _need_bits(fmt, need, name, f"scores up to {max_score}")
    return Head(name, [({one: lam}, dict(key)), ({one: -mu}, {pos: 1})], copy,
                {"lambda": lam, "mu": mu, "zero_gap": float(zero_gap(f)), "score_int_bits": need},
                gap=min(gaps.values()))


def shift_head(name: str, pos: str, pos_sq: str, one: str, copy: dict[str, Combo], fmt: FixedFormat,
               n_positions: int, shift: int = 1) -> Head:
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
    _need_bits(fmt, need, name, f"scores up to {max_score} for {N} positions")
    return Head(name,
                [({pos: 2 * lam, one: -2 * lam * shift}, {pos: 1}), ({one: -lam}, {pos_sq: 1})],
                copy,
                {"lambda": lam, "gap": lam, "zero_gap": float(zero_gap(f)), "score_int_bits": need}, gap=lam)


def count_head(name: str, query: Combo, query_sq: Combo, key: Combo, key_sq: Combo, one: str, not_bos: Combo,
               bos_flag: str, out: str, fmt: FixedFormat, max_key: int, n: int) -> Head:
    """The BOS counting head: attend uniformly to [BOS] and to every position whose
    key equals the query, and copy the [BOS] indicator: the output is
    round(2^f / (c + 1)) / 2^f with c the number of matches.

    score = -lambda (q - k_j)^2 * [j is not BOS]: 0 on matches and on [BOS], <= -lambda
    elsewhere; written as lambda (2 q k_j - k_j^2 - q^2 [not bos]) with the key
    combos zero at [BOS] (tau([BOS]) = 0). Weights: exactly 1/(c+1) each, rounded once.

    Distinguishing c from c+1 needs 1/(c+1) - 1/(c+2) > 2^-f, i.e. the caller's
    comparison gadget needs f >= log2((n+1)(n+2)) + 1; asserted by
    :func:`count_compare_neurons`.
    """
    f = fmt.frac_bits
    lam = sharpness(f)
    max_score = lam * (4 * max_key * max_key)
    need = bits_for(max_score) + 1
    _need_bits(fmt, need, name, f"scores up to {max_score}")
    need_count = bits_for(n + 1) + 1
    _need_bits(fmt, need_count, name, f"softmax normaliser up to {n + 1}")
    return Head(name,
                [({k: 2 * lam * Fraction(c) for k, c in query.items()}, dict(key)),
                 ({one: -lam}, dict(key_sq)),
                 ({k: -lam * Fraction(c) for k, c in query_sq.items()}, dict(not_bos))],
                {out: {bos_flag: 1}},
                {"lambda": lam, "gap": lam, "zero_gap": float(zero_gap(f)), "score_int_bits": need}, gap=lam)


# ----------------------------------------------------------------------------
# MLP gadgets (exact when their inputs are on the promised grid)
def equality_neurons(a: Combo, b: Combo, out: str, scale: Any = 1) -> list[Neuron]:
    """out += scale * [a == b] for integer-valued a, b: the hat
    relu(d + 1) - 2 relu(d) + relu(d - 1) with d = a - b."""
    d = dict(a)
    for k, c in b.items():
        d[k] = d.get(k, 0) - Fraction(c)
    s = Fraction(scale)
    return [Neuron(d, 1, {out: s}), Neuron(d, 0, {out: -2 * s}), Neuron(d, -1, {out: s})]


def step_neurons(d: Combo, lo: Fraction, hi: Fraction, out: str, scale: Any = 1) -> list[Neuron]:
    """out += scale * step(d): 0 if d <= lo, 1 if d >= hi (promise: d is never in
    between), as relu((d - lo)/w) - relu((d - lo)/w - 1), w = hi - lo. Exact when
    1/w is a power of two and d is on the grid."""
    lo, hi = Fraction(lo), Fraction(hi)
    w = hi - lo
    if w <= 0:
        raise MarginError(f"step gadget: hi {hi} must exceed lo {lo}")
    inv = 1 / w
    inp = {k: inv * Fraction(c) for k, c in d.items()}
    s = Fraction(scale)
    return [Neuron(inp, -lo * inv, {out: s}), Neuron(inp, -lo * inv - 1, {out: -s})]


def select_neurons(cond: Combo, x: Combo, y: Combo, out: str, bound: Any) -> list[Neuron]:
    """out += x if cond == 1 else y, for cond in {0, 1} and |x|, |y| <= bound:
    relu(x - B(1-c)) - relu(-x - B(1-c)) + relu(y - B c) - relu(-y - B c)."""
    B = Fraction(bound)
    neg = lambda combo: {k: -Fraction(c) for k, c in combo.items()}

    def plus(combo, extra):
        r = dict(combo)
        for k, c in extra.items():
            r[k] = r.get(k, 0) + Fraction(c)
        return r

    cB = {k: B * Fraction(c) for k, c in cond.items()}
    mcB = {k: -B * Fraction(c) for k, c in cond.items()}
    return [Neuron(plus(x, cB), -B, {out: 1}), Neuron(plus(neg(x), cB), -B, {out: -1}),
            Neuron(plus(y, mcB), 0, {out: 1}), Neuron(plus(neg(y), mcB), 0, {out: -1})]


def power_of_two_at_most(x: Fraction) -> Fraction:
    """The largest 2^k (k integer, possibly negative) with 2^k <= x (x > 0)."""
    x = Fraction(x)
    if x <= 0:
        raise ValueError("need x > 0")
    p = Fraction(1)
    while p > x:
        p /= 2
    while p * 2 <= x:
        p *= 2
    return p


def count_compare_neurons(frac_dir: str, thr_dir: str, out: str, n: int, fmt: FixedFormat) -> list[Neuron]:
    """out += [c > t], given frac = round(1/(c+1)) (from :func:`count_head`) and
    thr = round(1/(t + 3/2)) (embedding feature 1/(tau + 1/2) of the number t,
    tau = t + 1), for 0 <= c, t <= n.

    c > t  <=>  1/(c+1) < 1/(t+3/2). The exact values differ by at least
    g = 1/(2 (n+1)(n+3/2)); each is rounded by at most 2^-(f+1), so the rounded
    difference thr - frac is >= g - 2^-f when c > t and <= -(g - 2^-f) otherwise.
    Needs g > 2^-f; the step runs from 0 to the largest power of two <= g - 2^-f.
    """
    f = fmt.frac_bits
    g = Fraction(1, 2 * (n + 1)) / (n + Fraction(3, 2))
    slack = g - Fraction(1, 1 << f)
    if slack <= 0:
        raise MarginError(f"count comparison for n={n}: gap {float(g):.3g} between 1/(c+1) and 1/(t+3/2) is "
                          f"not above the rounding error 2^-{f}; needs f >= {bits_for(1 / g)}")
    w = power_of_two_at_most(slack)
    _need_bits(fmt, bits_for(1 / w) + 1, "count comparison", f"step slope {1 / w}")
    return step_neurons({thr_dir: 1, frac_dir: -1}, 0, w, out)


def mask_unless_equal_neurons(x: Combo, a: Combo, b: Combo, out: str, bound: int) -> list[Neuron]:
    """out += x if a != b else 0, for integer a, b and 0 <= x <= bound (= B):
    with d = a - b, relu(x - B + B d) - relu(B d - B) + relu(x - B - B d) - relu(-B d - B).
    d = 0: 0; d >= 1: x + B(d-1) - B(d-1) (the second pair is 0); d <= -1 symmetric."""
    B = Fraction(bound)
    d = _add(a, {k: -Fraction(v) for k, v in b.items()})
    Bd = {k: B * v for k, v in d.items()}
    mBd = {k: -B * v for k, v in d.items()}
    return [Neuron(_add(x, Bd), -B, {out: 1}), Neuron(Bd, -B, {out: -1}),
            Neuron(_add(x, mBd), -B, {out: 1}), Neuron(mBd, -B, {out: -1})]


def max_neurons(x: str, y: str, out: str) -> list[Neuron]:
    """out += max(x, y) for x >= 0: relu(x) + relu(y - x)."""
    return [Neuron({x: 1}, 0, {out: 1}), Neuron({y: 1, x: -1}, 0, {out: 1})]


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

    def add_state(self, name: str) -> str:
        if name in self.state:
            raise ValueError(f"state {name!r} exists already")
        self.state.append(name)
        return name

    def apply(self, b: "Builder", mlp: list[Neuron] = (), name: str = "") -> None:
        b.rnn_layer(self.state, self.A, self.B, self.C, list(mlp), name=name)


def delay_chain(rec: Recurrence, name: str, source: Combo, depth: int, outputs: Mapping[int, str]) -> list[str]:
    """A shift register of ``source``: state s_{name}_0 = source(t), s_{name}_k =
    s_{name}_{k-1} of the previous step, so s_{name}_k = source(t - k) (0 before
    the sequence start). ``outputs`` maps a delay k (1..depth) to the direction
    that receives source(t - k). Returns the state names (index k = delay k).

    Lemma (exact, no rounding: every weight is 1): direction ``outputs[k]`` at
    position t holds source(t - k) if t >= k, else 0. Values stay within the
    source's own range, so the chain needs no integer bits beyond the source's."""
    chain = [rec.add_state(f"s_{name}_0")]
    for d, c in source.items():
        rec.B[(chain[0], d)] = c
    for k in range(1, depth + 1):
        chain.append(rec.add_state(f"s_{name}_{k}"))
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
    c, c2 = rec.add_state("s_cnt"), rec.add_state("s_cnt_sq")
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
        s = rec.add_state(f"s_{direction}")
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
    inp = dict(d)
    for k, c in gate.items():
        inp[k] = inp.get(k, 0) + big * Fraction(c)
    return [Neuron(inp, 1 - big, {k: Fraction(c) for k, c in out.items()}),
            Neuron(inp, -big, {k: -2 * Fraction(c) for k, c in out.items()}),
            Neuron(inp, -1 - big, {k: Fraction(c) for k, c in out.items()})]


def gated_value_neuron(value: Combo, gates: list[Combo], big: int, out: Mapping[str, Any],
                       closed: list[Combo] = (), bias: Any = 0) -> Neuron:
    """out += coef * relu(value + bias) where every gate in ``gates`` is 1 and every
    flag in ``closed`` is 0; nothing otherwise. Input: value + bias - big * (#gates
    - sum gates + sum closed).

    Lemma: with 0/1 gates and flags, if all hold the input is value + bias; if any
    fails it is <= value + bias - big <= 0 provided value + bias <= big wherever the
    gadget is off. Pass big = that bound (>= 1, checked)."""
    require(big >= 1, f"gated value: big = {big} must be >= 1")
    inp = dict(value)
    for g in gates:
        for k, c in g.items():
            inp[k] = inp.get(k, 0) + big * Fraction(c)
    for g in closed:
        for k, c in g.items():
            inp[k] = inp.get(k, 0) - big * Fraction(c)
    return Neuron(inp, Fraction(bias) - big * len(gates), dict(out))


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
    _need_bits(fmt, need, name, f"scores up to {max_score}")
    return Head(name, [({one: lam}, dict(flag)), ({one: mu}, dict(pos))], copy,
                {"lambda": lam, "mu": mu, "gap_non_match": lam - mu * max_pos, "zero_gap": float(zero_gap(f)),
                 "score_int_bits": need}, gap=min(lam - mu * max_pos, mu))
