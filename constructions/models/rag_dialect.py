"""The paper's retrieval-CoT shorthand: a *dialect* of the RAG oracle, for format reproduction only.

The paper's IsTree experiment (docs/theory.md §6) writes short queries whose
meaning is not their literal text (``u ~`` u's parent, ``u -`` u's first
neighbour, ``u - c`` u's neighbour after c). :func:`expand_paper_query` rewrites
them into meta-token queries by a fixed rule, and :class:`PaperDialectOracle` is a
:class:`~constructions.models.rag.RagOracle` whose searches rewrite first. It serves only
to read and write that external format (``rnngap predict istree --model rag``,
the ``family="paper-format"`` records of checks/verify/checks_rag.py); no theorem row
rests on it.

Details (the shorthand, the rewriting rules): docs/internals/build.md#rag_dialect
"""
from __future__ import annotations

from typing import Sequence

from .rag import ALT, ANY, ANY_NUMBER, BRANCH_RESET, CAPTURE, CLOSE, LAZY_ANY, NONCAP, RagOracle, SearchResult
from rnngap.constructions.machine.vocab import DASH, META_NAMES, NUMBER_BASE


def expand_paper_query(query: Sequence[int]) -> list[int]:
    """The dialect's reading of a short query as a meta-token query (module docstring).

    >>> from rnngap.constructions.machine.vocab import number_token as num, META_NAMES
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
