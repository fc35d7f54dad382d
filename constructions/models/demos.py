"""Gadget-level demonstration models: one gadget each, checked by ``rnngap verify``.

Each builder takes n (the data length) and returns a :class:`Model` encoded in
the format it declares for n; ``declared_format(n)`` is that format and
``DECLARED`` gives I(n), f(n) as sympy expressions (asymptotic declarations,
checked symbolically by the registry). The gadgets assert their own margins when
built, so a declaration that is too small fails loudly at build time.

* :func:`position_match_transformer` - the match head on positions: ``[BOS] x_1..x_n [QUERY] i``
  -> x_i (the Index mechanism of T4.6-up, one layer).
* :func:`previous_token_transformer` - the shift head: the next token predicted is the token
  before the last one, ``x_{t-1}``.
* :func:`count_threshold_transformer` - the BOS counting head and the comparison MLP:
  ``[BOS] x_1..x_n [QUERY] q t`` with q moved next to t by a shift head -> number
  1 if q occurs more than t times, else number 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import log2_ceil
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import (
    base_space, number_readout, Builder, Component, Head, count_compare_neurons, count_head,
    match_head, shift_head, sharpness,
)
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import Vocab

from .bounds import COUNT_THRESHOLD, MATCH_FRAC_BITS, N, POSITION_MATCH, PREVIOUS_TOKEN, Declared  # noqa: E402,F401
"""The declared formats (written once in constructions/models/bounds.py)."""

COUNT_ABOVE_THRESHOLD = "count_above_threshold"
"""The comparison MLP's output [c > t]: the count c of the query q exceeds the threshold t
(:func:`count_threshold_transformer`, and constructions/models/hybrid.py's ``counting_hybrid``)."""


def position_match_transformer(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    fmt = fmt or POSITION_MATCH.format(n)
    code_bound = max(n, alphabet, 9) + 1      # |tau| of any token of Vocab(max(n, alphabet))
    s = base_space()
    s.hidden("answer", bound=code_bound)
    b = Builder(f"position-match(n={n})", "transformer", Vocab(max(n, alphabet)), s, claim="gadgets",
                bounded=True)
    b.max_positions = n + 3                   # [BOS] x_1..x_n [QUERY] i
    # the query token i has tau = i + 1; position j has key j + 1 (so [BOS] at 0 has key 1,
    # and the query token itself, at position n + 2, has the largest key n + 3)
    position = Component(query={"tok": 1}, key={"pos": 1, "one": 1}, key_sq={"pos_sq": 1, "pos": 2, "one": 1},
                         max_query=max(n, alphabet) + 1, max_key=n + 3)
    b.attention_layer([match_head("match", components=[position], copy={"answer": {"tok": 1}}, fmt=fmt)])
    number_readout(b, "answer")
    return b.build(fmt)


def previous_token_transformer(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> Model:
    fmt = fmt or PREVIOUS_TOKEN.format(n)
    s = base_space()
    s.hidden("prev", bound=max(alphabet, 2, 9))          # |tau| of any token of the vocabulary
    # the vocabulary is the alphabet only: the head reads positions, not numbers up to n
    b = Builder(f"previous-token(n={n})", "transformer", Vocab(max(alphabet, 2) - 1), s, claim="gadgets",
                bounded=True)
    b.max_positions = n + 2                   # positions 0..n+1 (the shift head's margin)
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"prev": {"tok": 1}}, fmt, n_positions=n + 2)])
    number_readout(b, "prev")
    return b.build(fmt)


def count_threshold_transformer(n: int, *, alphabet: int = 3, fmt: FixedFormat | None = None,
                                check_margins: bool = True) -> Model:
    """``[BOS] x_1..x_n [QUERY] q t`` -> number 1 if #{j: x_j = q} > t else number 0.

    Layer 1: a shift head copies q (and q^2) to the last position; a flag head
    marks every position at or after [QUERY] (score lambda * is_query: weight 1
    on [QUERY] once it is in the window, else uniform over zeros).
    Layer 2: the BOS counting head over the data positions only (the flag pushes
    q, t and [QUERY] 2 lambda down), giving round(1/(c+1)); the comparison MLP
    against 1/(t + 3/2) (an embedding feature of t) writes count_above_threshold = [c > t].
    Readout: tau = 1 + count_above_threshold, i.e. the number 1 or 0. ``check_margins=False``: the
    comparison's margin is not asserted (necessity scans below the declared f).
    """
    fmt = fmt or COUNT_THRESHOLD.format(n)
    s = base_space()
    s.embedded("is_bos", K.F_IS_TOKEN, 0)
    s.embedded("is_query", K.F_IS_TOKEN, 9)
    s.embedded("thr", K.F_TOK_INV, Fraction(1, 2))     # 1 / (tau + 1/2) = 1/(t + 3/2) for the number t
    code_bound = max(n, alphabet, 9) + 1      # |tau| of any token of Vocab(max(n, alphabet))
    for lab, bound in (("q", code_bound), ("q_sq", code_bound ** 2), ("after_query", 1), ("frac", 1),
                       (COUNT_ABOVE_THRESHOLD, 1)):
        s.hidden(lab, bound=bound)
    vocab = Vocab(max(n, alphabet))
    b = Builder(f"count-threshold(n={n})", "transformer", vocab, s, claim="gadgets", bounded=True)
    b.max_positions = n + 4                   # [BOS] x_1..x_n [QUERY] q t
    lam = sharpness(fmt.frac_bits)
    # [QUERY] in the window: it outscores every other key by lam; before it all scores are 0 (uniform)
    flag = Head("after-query", [({"one": lam}, {"is_query": 1})], {"after_query": {"is_query": 1}},
                {"lambda": lam, "gap": lam}, gap=lam)
    b.attention_layer([shift_head("prev", "pos", "pos_sq", "one", {"q": {"tok": 1}, "q_sq": {"tok_sq": 1}},
                                  fmt, n_positions=n + 3), flag])
    maxk = max(n, alphabet, 31) + 1
    head = count_head("count", query={"q": 1}, query_sq={"q_sq": 1}, key={"tok": 1}, key_sq={"tok_sq": 1},
                      one="one", not_bos={"one": 1, "is_bos": -1}, bos_flag="is_bos", out="frac",
                      fmt=fmt, max_key=maxk, n=n, push_down={"after_query": 2})
    b.attention_layer([head], mlp=count_compare_neurons("frac", "thr", COUNT_ABOVE_THRESHOLD, n, fmt, check_margins))
    b.readout([(COUNT_ABOVE_THRESHOLD, K.F_TOK, 0, 2), ("one", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    return b.build(fmt)
