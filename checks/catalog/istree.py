"""The T4.7-up family: the IsTree Transformer, whose CoT writes a DFS tour of the graph.

Its record, its two certified forms (graphs with at most n + 2 edges, and any
simple graph) and its declared resources. Its layers are proved from the
built model at sizes by checks/certify/istree_transformer.py. The builder is
in constructions/models/istree.py.
"""
from __future__ import annotations

from rnngap.constructions.models import bounds as Bd
from rnngap.constructions.models import istree as istree_model
from rnngap.constructions.models.bounds import Declared
from rnngap.constructions.models.obligations import Construction, gap, range_

from .asymptotics import N as N_DECL
from .examples import istree_example
from .schema import Certificate, ConstructionRecord, Form, Key, Resource

CLAIM = "T4.7-up"
LABELS = {"sparse": "istree-transformer[m<=n+2]", "dense": "istree-transformer[any-graph]"}
"""The certified forms' names, by the graphs they cover."""


def istree_dfs_cert(graphs: str) -> Construction:
    """The T4.7-up IsTree Transformer on graphs with m <= n + 2 edges ("sparse") or
    on any simple graph ("dense")."""
    m = (lambda n: n + 2) if graphs == "sparse" else (
        lambda n: n * (n - 1) / 2 if not isinstance(n, int) else n * (n - 1) // 2)
    label = LABELS[graphs]
    decl = Declared(label, lambda B, n, a, c: Bd.istree_int(B, n, m(n)), Bd.const(Bd.ISTREE_FRAC_BITS),
                    claim=CLAIM, two_limb=True)

    def T1(B, n):
        return B.max(Bd.istree_positions(B, n, m(n)), Bd.istree_tau_bound(B, n))
    V = lambda B, n: Bd.istree_tau_bound(B, n)
    return Construction(CLAIM, label, decl, 2, (
        gap("heads", "gap"),
        range_("tie-break", lambda B, n, f: 17 * T1(B, n) ** 2 * V(B, n)),
        range_("lookup", lambda B, n, f: 33 * T1(B, n) ** 2),
        range_("mlp-mask", lambda B, n, f: 3 * T1(B, n) ** 2 * V(B, n)),
        range_("readout", lambda B, n, f: 3 * V(B, n) ** 2)))


def _resources():
    C = istree_model
    sparse = C.INT_EXPR.subs({C.N_SYM: N_DECL, C.M_SYM: N_DECL + 2})
    dense = C.INT_EXPR.subs({C.N_SYM: N_DECL, C.M_SYM: N_DECL * (N_DECL - 1) / 2})
    return (Resource("istree-transformer", "int_bits (m <= n+2)", sparse, "log", lambda n: C.declared_int_bits(n, n + 2)),
            Resource("istree-transformer", "int_bits (any simple graph)", dense, "log",
                     lambda n: C.declared_int_bits(n, n * (n - 1) // 2)),
            Resource("istree-transformer", "frac_bits", C.FRAC_EXPR, "constant", lambda n: C.FRAC_BITS),
            Resource("istree-transformer", "cot", Bd.istree_cot(Bd.SYM, N_DECL), "linear", C.cot_bound))


RECORDS = (
    ConstructionRecord(Key(CLAIM, "istree", "transformer"), istree_model.istree_transformer, istree_example,
                       "IsTree Transformer (next token = first token of the DFS tour)",
                       (Form("istree-transformer", params=22215, params_n=(2, None), resources=_resources,
                             certificates=lambda: (Certificate(istree_dfs_cert("sparse")),
                                                   Certificate(istree_dfs_cert("dense")))),),
                       size=lambda n: {"n_vertices": max(n, 2)}),
)
"""The IsTree Transformer."""
