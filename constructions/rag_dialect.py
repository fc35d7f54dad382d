"""The paper's retrieval-CoT shorthand: a *dialect* of the RAG oracle, for format reproduction only.

The paper's IsTree experiment (docs/theory.md §6, CoT style 2; ``checks/tasks/istree.py``
``retrieval_cot``) writes short queries whose meaning is not their literal text:

==================  ===========================================================
``u ~``             the token after the record ``u ~`` (u's parent)
``u -``             u's first neighbour in edge-list order, either orientation
``u - c``           u's neighbour after c, either orientation
==================  ===========================================================

This module is a fixed rewriting of those short queries into meta-token queries
(:func:`expand_paper_query`), run by :class:`PaperDialectOracle`, a
:class:`~constructions.rag.RagOracle` whose searches rewrite first. It exists
only to read and write that external data format (``rnngap predict istree
--model rag`` and the paper-format records of ``checks/checks_rag.py``, labelled
``family="paper-format"``). docs/theory.md §2: no theorem row rests on a dialect; the
T5-RAG rows use :class:`~constructions.rag.RagOracle` itself, which renders every
query token by token and never rewrites it.

Rewriting (``[#]`` one number token, ``[.]`` one token; queries holding any
meta-token, and every other shape, are passed unchanged)::

    u -      ->  [(?|] u - [(] [#] [)] [|] [(] [#] [)] - u [)]
    u - c    ->  [(?:] u - c [|] c - u [)] [.*?] [(?|] u - [(] [#] [)] [|] [(] [#] [)] - u [)]
    q        ->  q [(] [.] [)]        (any other meta-free query: the token after q)
"""
from __future__ import annotations

from typing import Sequence

from .rag import (
    ALT, ANY, ANY_NUMBER, BRANCH_RESET, CAPTURE, CLOSE, LAZY_ANY, NONCAP, RagOracle, SearchResult,
)
from .vocab import DASH, META_NAMES, NUMBER_BASE


def expand_paper_query(query: Sequence[int]) -> list[int]:
    """The dialect's reading of a short query as a meta-token query (module docstring).

    >>> from rnngap.constructions.vocab import number_token as num, META_NAMES
    >>> [META_NAMES.get(t, t) for t in expand_paper_query([num(4), DASH])]
    ['[(?|]', 36, 7, '[(]', '[#]', '[)]', '[|]', '[(]', '[#]', '[)]', 7, 36, '[)]']
    """
    q = [int(t) for t in query]
    if any(t in META_NAMES for t in q):
        return q
    if len(q) in (2, 3) and q[1] == DASH and all(t >= NUMBER_BASE for t in q[:1] + q[2:]):
        u = q[0]
        neighbour = [BRANCH_RESET, u, DASH, CAPTURE, ANY_NUMBER, CLOSE, ALT,
                     CAPTURE, ANY_NUMBER, CLOSE, DASH, u, CLOSE]
        if len(q) == 2:
            return neighbour
        c = q[2]
        return [NONCAP, u, DASH, c, ALT, c, DASH, u, CLOSE, LAZY_ANY] + neighbour
    return q + [CAPTURE, ANY, CLOSE]


class PaperDialectOracle(RagOracle):
    """A :class:`RagOracle` that rewrites each query by :func:`expand_paper_query`
    before searching (the searched text, exclusions and answers are the plain
    oracle's). For the paper's format only; see the module docstring."""

    def _search(self, query: list[int]) -> SearchResult:
        res = super()._search(expand_paper_query(query))
        res.query = list(query)
        return res
