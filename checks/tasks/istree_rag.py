"""Reference for the plain IsTree linear RNN + in-context RAG
(constructions/models/rag_models.py, ``istree_rag``, claim T5-RAG): its CoT and label, in
plain Python. Imports no construction code, only the token ids of the vocabulary.

Example::

    >>> from rnngap.constructions.machine.vocab import FALSE, TRUE
    >>> plain_cot(2, [(0, 1)])[-1] == TRUE, plain_cot(3, [(0, 1)])[-1] == FALSE
    (True, True)
"""
from __future__ import annotations

from typing import Sequence

from rnngap.constructions.machine.vocab import (
    DASH, ENDSEARCH, EOS, FAILED, FALSE, META_TOKENS, STARTSEARCH, TILDE, TRUE, number_token,
)

__all__ = ["plain_cot"]


def plain_cot(n_nodes: int, edges: Sequence[Sequence[int]]) -> list[int]:
    """Plain-Python reference of :func:`constructions.models.rag_models.istree_rag`'s CoT and
    label (token ids): lines ``u ~ p c SS query ES w``, then a parent lookup
    ``SS x ~ [(] [#] [)] ES r`` (see the construction's docstring), ``[EOS]``, label."""
    M = META_TOKENS
    BR, NC, NEG, LZ, AL, CA, CL, HN = (M[k] for k in ("[(?|]", "[(?:]", "[(?!]", "[.*?]", "[|]", "[(]", "[)]", "[#]"))
    adj: list[list[int]] = [[] for _ in range(n_nodes)]
    for u, v in edges:
        adj[u].append(v)
        adj[v].append(u)

    def tok(v):
        return FAILED if v is None else number_token(v)

    def lookup(x, r):
        return [STARTSEARCH, tok(x), TILDE, CA, HN, CL, ENDSEARCH, tok(r)]

    parent: dict[int, int | None] = {0: None}
    out: list[int] = []
    u, p, c = 0, None, None
    while True:
        U, P = tok(u), tok(p)
        query = [BR, U, DASH, NEG, P, CL, CA, HN, CL, AL, NEG, P, CL, CA, HN, CL, DASH, U, CL]
        if c is not None:
            C = tok(c)
            query = [NC, U, DASH, C, AL, C, DASH, U, CL, LZ] + query
        start = 0 if c is None else adj[u].index(c) + 1
        w = next((y for y in adj[u][start:] if y != p), None)
        out += [U, TILDE, P, tok(c), STARTSEARCH] + query + [ENDSEARCH, tok(w)]
        if w is None:
            if p is None:
                return out + [EOS, TRUE if len(parent) == n_nodes else FALSE]
            out += lookup(p, parent[p])
            u, p, c = p, parent[p], u
        elif w in parent:                      # visited (0's lookup gives [FAILED] like a new vertex's)
            return out + lookup(w, parent[w]) + [EOS, FALSE]
        else:
            out += lookup(w, None)
            parent[w] = u
            u, p, c = w, u, None
