"""Reference for the hybrid IsTree construction (constructions/models/hybrid.py,
``istree_hybrid``): the union-find CoT and answer, in plain Python.

It imports no construction code: only the token ids of the vocabulary
(constructions/machine/vocab.py, the same constants every task module uses).

The CoT, for the edges (u, v) in input order (union by size; a tie puts the
u-side root under the v-side root)::

    find(u)   u = x_0, x_1 = parent(x_0), ..., r_u   then  -  size(r_u)
    find(v)   the same for v, ending  -  size(r_v)
    r_u                                        (the u-side root again)
    if r_u == r_v: the answer is [FALSE] (a cycle), the CoT ends here
    size(r_u)  ~ c p  [QUERY] p size(c) + size(p)    (c goes under p)

and after the last edge the answer is [TRUE] iff N - 1 joins happened.

Example::

    >>> from rnngap.constructions.machine.vocab import TRUE, FALSE, number_token as nt
    >>> cot, answer = unionfind_cot(2, [(0, 1)])
    >>> answer == TRUE, cot[:3] == [nt(0), DASH, nt(1)]
    (True, True)
    >>> unionfind_cot(2, [(0, 1), (1, 0)])[1] == FALSE
    True
"""
from __future__ import annotations

from typing import Sequence

from rnngap.constructions.machine.vocab import DASH, FALSE, QUERY, TILDE, TRUE, number_token

__all__ = ["unionfind_cot"]


def unionfind_cot(n_nodes: int, edges: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """The reference CoT (token ids) and answer token ([TRUE] / [FALSE]) of the
    union-find IsTree hybrid on ``n_nodes`` vertices and ``edges`` in input order
    (union by size; ties: the u-side root goes under the v-side root)."""
    parent: dict[int, int] = {}
    size: dict[int, int] = {}
    cot: list[int] = []

    def find(x: int) -> tuple[int, int]:
        chain = [x]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        cot.extend(number_token(y) for y in chain)
        cot.append(DASH)
        r = chain[-1]
        cot.append(number_token(size.get(r, 1)))
        return r, size.get(r, 1)

    joins = 0
    for u, v in edges:
        ru, su = find(int(u))
        rv, sv = find(int(v))
        cot.append(number_token(ru))
        if ru == rv:
            return cot, FALSE
        cot.append(number_token(su))
        c, p = (ru, rv) if su <= sv else (rv, ru)
        parent[c] = p
        size[p] = su + sv
        cot += [TILDE, number_token(c), number_token(p), QUERY, number_token(p), number_token(su + sv)]
        joins += 1
    return cot, (TRUE if joins == n_nodes - 1 else FALSE)
