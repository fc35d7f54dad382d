"""The T5-RAG family: linear RNNs with an in-context retrieval oracle for Index, AR, c-gram, Counting and IsTree.

Each model's record, its certified form (the declared format and its readout
range; every weight and value of a RAG model is an integer, f = 0) and its
declared resources. The Turing-machine RAG models are in turing.py of this
folder. The builders are in constructions/models/rag_models.py.
"""
from __future__ import annotations

from typing import Callable

import sympy as sp

from rnngap.constructions.models import bounds as Bd, rag_models
from rnngap.constructions.models.obligations import Construction, Obligation

from .asymptotics import N as N_DECL
from .examples import ar_example, cgram_example, count_example, graph_example, index_example
from .schema import Certificate, ConstructionRecord, Form, Key, Resource, fixed_certificates

CLAIM = "T5-RAG"


def rag_cert(name: str) -> Construction:
    """A T5-RAG construction (index-rag, ar-rag, cgram-rag, counting-rag, istree-rag,
    istree-rag-paper). The readout logit 2 T V + T^2 < 5 (n + 21)^2 (rag_models; the
    compiler's interval bound, re-checked at compile time, covers the rest); ar-rag
    is cgram-rag's builder at c = 2: the same declared format, its own certificate."""
    decl = Bd.RAG["cgram-rag" if name == "ar-rag" else name]
    return Construction(CLAIM, name, decl, 2, (
        Obligation("readout.range", lambda B, n, I, f: B.bits(5 * (n + 21) ** 2), lambda B, n, I, f: I),))


def _resources(name: str, int_expr, int_fn, cot_order: str, cot_fn=None) -> Callable[[], tuple]:
    """f = 0: every weight and value of a RAG construction is an integer."""
    return lambda: (Resource(name, "int_bits", int_expr, "log", int_fn),
                    Resource(name, "frac_bits", sp.Integer(0), "constant"),
                    Resource(name, "cot", Bd.RAG_COT[name](Bd.SYM, N_DECL), cot_order, cot_fn))


PROGRAM_SIZES = (2, 3, 8, 64, 1024)
"""The sizes n at which ``rnngap certify`` proves each RAG model computes its program."""
ISTREE_PROGRAM_SIZES = {"istree-rag": (2, 4, 16, 64), "istree-rag-paper": (2, 8)}


def program_cert(con: Construction) -> Construction:
    """The certificate that the model compiled for ``con`` computes its RNN program
    (checks/certify/program.py), named ``<name>[program]``, with ``con``'s declared format."""
    return Construction(con.claim, f"{con.name}[program]", con.declared, 1, ())


def _certified(name: str) -> Callable[[], tuple]:
    sizes = ISTREE_PROGRAM_SIZES.get(name, PROGRAM_SIZES)
    return fixed_certificates(Certificate(rag_cert(name)), Certificate(program_cert(rag_cert(name)), program_sizes=sizes))


RECORDS = (
    ConstructionRecord(Key(CLAIM, "index", "rag"), rag_models.index_rag, index_example, "linear RNN + RAG for Index",
                       (Form("index-rag", params=1932, params_n=(2, None),
                             resources=_resources("index-rag", rag_models.INDEX_INT, rag_models.index_int_bits,
                                                  "linear"),
                             certificates=_certified("index-rag")),)),
    ConstructionRecord(Key(CLAIM, "ar", "rag"), rag_models.ar_rag, ar_example(2), "linear RNN + RAG for AR",
                       (Form("ar-rag", params=718, params_n=(2, None), certificates=_certified("ar-rag")),)),
    ConstructionRecord(Key(CLAIM, "cgram", "rag"), rag_models.cgram_rag, cgram_example,
                       "linear RNN + RAG for c-gram (c = 3)",
                       (Form("cgram-rag", params=1076, params_n=(3, None),
                             resources=_resources("cgram-rag", rag_models.CGRAM_INT, rag_models.cgram_int_bits,
                                                  "constant"),
                             certificates=_certified("cgram-rag")),),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(CLAIM, "counting", "rag"), rag_models.counting_rag, count_example,
                       "linear RNN + RAG for Counting",
                       (Form("counting-rag", params=7317, params_n=(2, None),
                             resources=_resources("counting-rag", rag_models.COUNTING_INT,
                                                  rag_models.counting_int_bits, "linear"),
                             certificates=_certified("counting-rag")),)),
    ConstructionRecord(Key(CLAIM, "istree", "rag"), rag_models.istree_rag, graph_example, "linear RNN + RAG for IsTree",
                       (Form("istree-rag", params=92894, params_n=(2, None),
                             resources=_resources("istree-rag", rag_models.ISTREE_PLAIN_INT,
                                                  rag_models.istree_plain_int_bits, "linear",
                                                  rag_models.istree_plain_cot_bound),
                             certificates=_certified("istree-rag")),),
                       size=lambda n: {"n_nodes": max(n, 2)}),
    ConstructionRecord(Key(CLAIM, "istree", "rag-paper"), rag_models.istree_rag_paper, graph_example,
                       "IsTree in the paper's retrieval-CoT format (its own oracle dialect)",
                       (Form("istree-rag-paper", params=50682, params_n=(2, 8),
                             resources=_resources("istree-rag-paper", rag_models.ISTREE_INT,
                                                  rag_models.istree_int_bits, "linear",
                                                  rag_models.istree_cot_bound),
                             certificates=_certified("istree-rag-paper")),),
                       size=lambda n: {"n_nodes": max(n, 2)}),
)
"""The RAG models of the retrieval tasks and IsTree."""
