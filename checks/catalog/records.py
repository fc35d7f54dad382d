"""The construction records: one :class:`ConstructionRecord` per construction,
the one place that says what a construction is.

A record, keyed by (claim, task, architecture), holds the builder, a seeded
example prompt, a one-line description, its forms (declared parameter count,
resources and certificates) and, where it has none, why it is not certified.
Every command reads :func:`records` (the built-in :data:`RECORDS` and those
:func:`register` added), so a record is seen everywhere. Details:
docs/internals/commands.md#catalog.

    >>> e = by_name("index-transformer")
    >>> e.key, e.where
    (Key(claim='T4.6-up', task='index', architecture='transformer'), 'constructions/models/retrieval.py:index_transformer')
    >>> b = e.build(4)
    >>> b.model.kind, b.construction is b.model
    ('transformer', True)
    >>> [c.name for c in e.certificate_list()]
    ['index-transformer[a=2]', 'index-transformer[a=n+2]']
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

import numpy as np
import sympy as sp

from rnngap.constructions.models import bounds as Bd, obligations as O
from rnngap.constructions.models import cot_hierarchy, demos, hybrid, rag_models, retrieval, simulate, turing
from rnngap.constructions.models import istree as istree_model
from rnngap.constructions.build.model import Model
from rnngap.constructions.models.obligations import Construction

from rnngap.checks.certify import plans as P
from .asymptotics import N as N_DECL, Declaration
from rnngap.checks.io.formats import graph_tokens
from rnngap.checks.tasks import ar, cgram, counting, index, istree


class Key(NamedTuple):
    claim: str
    task: str
    architecture: str


@dataclass(frozen=True)
class Built:
    name: str
    model: Model
    construction: Any


def _model_of(obj) -> Model:
    return obj if isinstance(obj, Model) else obj.model


@dataclass(frozen=True)
class Resource:
    """One declared resource (claim 'declarations' checks it): the sympy expression
    in n (:data:`checks.catalog.asymptotics.N`), its asymptotic order (constant, log,
    linear, nlogn, poly:K) and the Python function of n the construction uses
    (None: the expression alone), with the n it applies to per profile (None:
    the declarations check's sample)."""

    model: str
    resource: str
    expr: Any
    order: str
    fn: Callable[[int], int] | None = None
    sample: dict | None = None


@dataclass(frozen=True)
class Certificate:
    """One certified form, read by ``rnngap certify``: ``con`` (the declared format
    and obligations at an alphabet a(n), constructions/models/obligations.py), and for a
    whole-model certificate the plan of its heads (checks/certify/plans.py) with
    the record's builder (``build(n, a)``, sizes possibly symbolic, filled in by
    :func:`certificates`)."""

    con: Construction
    plan: Any = None
    params: int | None = None
    build: Callable | None = None
    slow: bool = False
    """Certified only by ``rnngap certify --full`` (or when named in ``--only``): a
    certificate whose proof takes over half a minute and is not where the theorem
    bites (c-gram c = 4 at the registry's alphabet; its reduction's alphabet is in
    the default run)."""

    @property
    def name(self) -> str:
        return self.con.name

    @property
    def claim(self) -> str:
        return self.con.claim

    def planned(self) -> bool:
        """True iff ``rnngap certify`` proves it from the built model."""
        return self.plan is not None


@dataclass(frozen=True)
class Form:
    """The construction at fixed task parameters (``kw``, e.g. ``{"c": 4}``):
    ``name`` is what its parameter count and resources are declared as;
    ``params`` its declared parameter count (the same at every n and alphabet:
    docs/theory.md §1), measured on builds for n in ``params_n`` (lo, hi) and
    again at each reduction alphabet of ``params_alphabets`` ((label, a(n)));
    ``certificates`` and ``resources`` are functions (made when first read:
    some need a compiled Turing machine)."""

    name: str
    kw: dict = field(default_factory=dict)
    params: int | None = None
    params_n: tuple = (1, None)
    params_alphabets: tuple = ()
    certificates: Callable[[], tuple] = tuple
    resources: Callable[[], tuple] = tuple


@dataclass(frozen=True)
class ConstructionRecord:
    key: Key
    builder: Callable
    example: Callable[[int, np.random.Generator], list[int]]
    about: str
    forms: tuple = ()
    uncertified: str = ""
    defaults: dict = field(default_factory=dict)
    size: Callable[[int], dict] | None = None   # n -> the builder's size arguments (default: (n,))
    args: tuple = ()                            # leading positional arguments (the TM spec)

    @property
    def name(self) -> str:
        return f"{self.key.task}-{self.key.architecture}"

    @property
    def where(self) -> str:
        path = os.path.relpath(inspect.getsourcefile(self.builder), os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        return f"{path.replace(os.sep, '/')}:{self.builder.__name__}"

    def call(self, n, **kw):
        """What the builder returns at size n (n may be symbolic: a symbolic build)."""
        sized = self.size(n) if self.size else {}
        return self.builder(*self.args, *(() if self.size else (n,)), **{**self.defaults, **sized, **kw})

    def build(self, n: int, **kw) -> Built:
        obj = self.call(n, **kw)
        return Built(self.name, _model_of(obj), obj)

    def certificate_list(self) -> list[Certificate]:
        """Every certificate of every form, each with its builder filled in."""
        takes_alphabet = "alphabet" in inspect.signature(self.builder).parameters
        out = []
        for form in self.forms:
            def build(n, a, form=form):
                return self.call(n, **form.kw, **({"alphabet": a} if takes_alphabet else {}))
            out += [replace(c, params=form.params, build=build) for c in form.certificates()]
        return out

    @property
    def certificates(self) -> tuple[str, ...]:
        """The names of its certificates."""
        return tuple(c.name for c in self.certificate_list())


# ---------------------------------------------------------------------------- example prompts
def _ints(a) -> list[int]:
    return [int(t) for t in a]


def _index_example(n, rng, alphabet=2):
    return _ints(index.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def _count_example(n, rng):
    return _ints(counting.generate(rng, n, 1, threshold="near").tokens[0])


def _ar_example(alphabet):
    return lambda n, rng: _ints(ar.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def _cgram_example(n, rng):
    return _ints(cgram.generate(rng, n, 1, alphabet=2, c=3).tokens[0])


def _istree_example(n, rng):
    return istree_model.prompt_tokens(istree.random_tree(rng, max(n, 2)).edges)


def _graph_example(n, rng):
    return graph_tokens(istree.random_tree(rng, max(n, 2)).edges)


def _prev_example(n, rng):
    return [0] + _ints(rng.integers(0, 2, n) + 32)


def _mqar_example(n, rng):
    return _ints(retrieval.mqar_tokens(rng.integers(0, 4, (1, n)))[0])


def _tm_example(spec):
    def make(n, rng):
        enc = turing.Encoding.of(spec.build())
        syms = sorted(enc.dtm.input_symbols)
        return enc.prompt("".join(syms[int(i)] for i in rng.integers(0, len(syms), n)))
    return make


def _iterate_example(n, rng):
    m, T = cot_hierarchy.modulus(n), cot_hierarchy.steps(n)
    return cot_hierarchy.prompt(n, int(rng.integers(0, m)), int(rng.integers(0, T + 1)),
                                _ints(rng.integers(0, m, n)))


def _sim_size(n):
    """The T4.1 RNN for n simulated as checks_hierarchy.sim_iterate does."""
    T = cot_hierarchy.steps(n)
    return {"rnn": cot_hierarchy.iterate_rnn(n), "max_prompt": n + 4, "max_rnn_cot": T,
            "state_int_bits": (T + 2 * n + 4).bit_length()}


# ---------------------------------------------------------------------------- declared resources
def int_frac_resources(name: str, decl, int_order: str = "log", frac_order: str = "log", sub: dict | None = None,
                       a=None, c=None, frac: bool = True) -> tuple[Resource, ...]:
    """int_bits (and frac_bits) of a Declared at fixed (a, c), with the Python functions it uses."""
    sub = {**(sub or {}), **({Bd.A: a} if a is not None else {}), **({Bd.C: c} if c is not None else {})}
    out = (Resource(name, "int_bits", decl.int_expr.subs(sub), int_order,
                    decl.int_bits if a is None and c is None else (lambda n: decl.int_bits(n, a, c))),)
    if frac:
        out += (Resource(name, "frac_bits", sp.sympify(decl.frac_expr).subs(sub), frac_order, decl.frac_bits),)
    return out


def _retrieval_resources(key: str, a: int, c: int, reduction: bool = True) -> Callable[[], tuple]:
    """The T4.6-up Transformer ``key`` at the registry's sampled alphabet a, and (``reduction``) at the
    Index reduction's alphabet a(n) of the task spec, which grows with n."""
    def make():
        from rnngap.checks.tasks import task
        decl = {"counting": Bd.COUNTING, "index": Bd.INDEX, "ar": Bd.AR}.get(key, Bd.CGRAM)
        out = int_frac_resources(O.retrieval_name(key), decl, frac_order="log" if key == "counting" else "constant",
                                 a=a, c=c)
        if reduction:
            alpha = task({"ar": "ar", "counting": "counting"}.get(key, f"cgram(c={c})")).reduction_alphabet
            name = O.retrieval_name(key, str(alpha(N_DECL)).replace(' ', ''))
            out += (Resource(name, "int_bits", decl.int_expr.subs({Bd.A: alpha(N_DECL), Bd.C: c}), "log",
                             lambda n: decl.int_bits(n, alpha(n), c)),)
        return out
    return make


def _hybrid_resources(key: str) -> Callable[[], tuple]:
    def make():
        if key == "istree":
            return int_frac_resources("istree-hybrid", hybrid.ISTREE) + (
                Resource("istree-hybrid", "cot", Bd.hybrid_istree_cot(Bd.SYM, N_DECL), "nlogn",
                         hybrid.istree_cot_bound),)
        decl = hybrid.cgram_declared(3) if key == "cgram(c=3)" else hybrid.DECLARED[key]
        return int_frac_resources("cgram-hybrid" if key == "cgram(c=3)" else f"{key}-hybrid", decl)
    return make


def _rag_resources(name: str, int_expr, int_fn, cot_order: str, cot_fn=None) -> Callable[[], tuple]:
    """f = 0: every weight and value of a RAG construction is an integer."""
    return lambda: (Resource(name, "int_bits", int_expr, "log", int_fn),
                    Resource(name, "frac_bits", sp.Integer(0), "constant"),
                    Resource(name, "cot", Bd.RAG_COT[name](Bd.SYM, N_DECL), cot_order, cot_fn))


def _istree_resources():
    C = istree_model
    sparse = C.INT_EXPR.subs({C.N_SYM: N_DECL, C.M_SYM: N_DECL + 2})
    dense = C.INT_EXPR.subs({C.N_SYM: N_DECL, C.M_SYM: N_DECL * (N_DECL - 1) / 2})
    return (Resource("istree-transformer", "int_bits (m <= n+2)", sparse, "log", lambda n: C.declared_int_bits(n, n + 2)),
            Resource("istree-transformer", "int_bits (any simple graph)", dense, "log",
                     lambda n: C.declared_int_bits(n, n * (n - 1) // 2)),
            Resource("istree-transformer", "frac_bits", C.FRAC_EXPR, "constant", lambda n: C.FRAC_BITS),
            Resource("istree-transformer", "cot", Bd.istree_cot(Bd.SYM, N_DECL), "linear", C.cot_bound))


def _tm_resources(mname: str, architecture: str) -> Callable[[], tuple]:
    def make():
        spec = turing.MACHINES[mname]
        enc = turing.Encoding.of(spec.build())
        sub = {turing.NSYM: N_DECL}
        if architecture == "rag":
            return int_frac_resources(f"tm-{mname}-rag", turing.rag_declared(enc, spec), sub=sub, frac=False)
        degree = int(sp.degree(sp.expand(spec.time_expr.subs(sub)), N_DECL))
        return int_frac_resources(f"tm-{mname}-hybrid", turing.hybrid_declared(enc, spec), sub=sub) + (
            Resource(f"tm.{mname}", "steps T(n)", spec.time_expr.subs(sub), f"poly:{degree}", spec.time_bound),)
    return make


def _iterate_resources():
    D = cot_hierarchy.DECLARED
    return int_frac_resources("iterate-rnn", D, frac_order="constant", sub={cot_hierarchy.N: N_DECL}) + (
        Resource("iterate-rnn", "cot", cot_hierarchy.STEPS_EXPR.subs(cot_hierarchy.N, N_DECL), "poly:2",
                 cot_hierarchy.cot_bound),)


def _sim_resources():
    """The simulator's precision depends on the RNN it is given (bounds.sim_int of the
    RNN's constants): declared for the registry's first random RNN as a function of
    the context length n (every simulator the registry builds is certified by
    ``rnngap certify``)."""
    from rnngap.checks.verify.checks_hierarchy import SIM_STATE_BITS
    p = simulate.rnnsim_transformer(simulate.random_linear_rnn(0), max_prompt=1, max_rnn_cot=0,
                                    state_int_bits=SIM_STATE_BITS).params()
    sim = Bd.sim_declared(p)
    return int_frac_resources(sim.name, sim, sub={Bd.N: N_DECL}, frac=False)


def _one(*certs: Certificate) -> Callable[[], tuple]:
    return lambda: certs


# ---------------------------------------------------------------------------- the records
_R, _H, _G = "T4.6-up", "T5.6", "T5-RAG"
_GADGET_DEMO = ("a gadget demo: its gadget is certified inside every construction that uses it, and "
                "`rnngap verify --only gadgets` checks it at its declared bits and one bit below")
_TM_PARAMS = {"increment": (2125, 15221), "palindrome": (9018, 57546), "0k1k": (7102, 47516),
              "addition": (19941, 150036)}
"""Declared parameter counts of the Turing-machine constructions: (hybrid, RAG) per machine."""


def _tm_records() -> list[ConstructionRecord]:
    out = []
    for m, spec in turing.MACHINES.items():
        hyb, rag = _TM_PARAMS[m]
        out.append(ConstructionRecord(
            Key("T5-hyb-P", f"tm-{m}", "hybrid"), turing.tm_hybrid, _tm_example(spec),
            f"hybrid with CoT simulating the TM {m!r} ({spec.describe})",
            (Form(f"tm-{m}-hybrid", params=hyb, params_n=(1, 8), resources=_tm_resources(m, "hybrid"),
                  certificates=lambda m=m: (Certificate(O.tm_hybrid_cert(m)),)),), args=(spec,)))
        out.append(ConstructionRecord(
            Key(_G, f"tm-{m}", "rag"), turing.tm_rag, _tm_example(spec),
            f"linear RNN + RAG simulating the TM {m!r}",
            (Form(f"tm-{m}-rag", params=rag, params_n=(1, 8), resources=_tm_resources(m, "rag"),
                  certificates=lambda m=m: (Certificate(O.tm_rag_cert(m)),)),), args=(spec,)))
    return out


RECORDS: tuple[ConstructionRecord, ...] = (
    # gadgets: one mechanism each (declared precision, no certificate)
    ConstructionRecord(Key("gadgets", "position-match", "transformer"), demos.position_match_transformer,
                       _index_example, "match head on positions (Index mechanism)",
                       (Form("position-match",
                             resources=lambda: int_frac_resources("position-match", demos.POSITION_MATCH)),),
                       uncertified=_GADGET_DEMO),
    ConstructionRecord(Key("gadgets", "previous-token", "transformer"), demos.previous_token_transformer,
                       _prev_example, "shift head: predicts the token before the last",
                       (Form("previous-token",
                             resources=lambda: int_frac_resources("previous-token", demos.PREVIOUS_TOKEN)),),
                       uncertified=_GADGET_DEMO),
    ConstructionRecord(Key("gadgets", "count-threshold", "transformer"), demos.count_threshold_transformer,
                       _count_example, "BOS counting head + comparison MLP",
                       (Form("count-threshold",
                             resources=lambda: int_frac_resources("count-threshold", demos.COUNT_THRESHOLD)),),
                       uncertified=_GADGET_DEMO),
    # T4.6-up: constant-size Transformers for the retrieval tasks
    ConstructionRecord(Key(_R, "index", "transformer"), retrieval.index_transformer, _index_example,
                       "Index Transformer",
                       (Form("index-transformer", params=50, resources=_retrieval_resources("index", 2, 2, False),
                             certificates=lambda: (Certificate(O.retrieval_cert("index", 2), P.INDEX),
                                                   Certificate(O.retrieval_cert("index", "n+2"), P.INDEX))),)),
    ConstructionRecord(Key(_R, "ar", "transformer"), retrieval.ar_transformer, _ar_example(4),
                       "associative recall",
                       (Form("ar-transformer", params=154, params_n=(2, None),
                             params_alphabets=(("ar-transformer[a=n+2]", lambda n: n + 2),),
                             resources=_retrieval_resources("ar", 4, 2),
                             certificates=lambda: (Certificate(O.retrieval_cert("ar", 4), P.AR),
                                                   Certificate(O.retrieval_cert("ar", "n+2"), P.AR))),),
                       defaults={"alphabet": 4}),
    ConstructionRecord(Key(_R, "cgram", "transformer"), retrieval.cgram_transformer, _cgram_example,
                       "c-gram retrieval (shown at c = 3)",
                       (Form("cgram-transformer[c=2]", {"c": 2}, resources=_retrieval_resources("cgram2", 3, 2, False)),
                        Form("cgram-transformer[c=3]", {"c": 3}, params=312, params_n=(3, None),
                             params_alphabets=(("cgram-transformer[c=3,a=n+2]", lambda n: n + 2),),
                             resources=_retrieval_resources("cgram3", 2, 3),
                             certificates=lambda: (Certificate(O.retrieval_cert("cgram3", 2), P.CGRAM3),
                                                   Certificate(O.retrieval_cert("cgram3", "n+2"), P.CGRAM3))),
                        Form("cgram-transformer[c=4]", {"c": 4}, params=518, params_n=(4, None),
                             resources=_retrieval_resources("cgram4", 3, 4),
                             certificates=lambda: (Certificate(O.retrieval_cert("cgram4", 3), P.CGRAM4, slow=True),
                                                   Certificate(O.retrieval_cert("cgram4", "n+2"), P.CGRAM4)))),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(_R, "counting", "transformer"), retrieval.counting_transformer, _count_example,
                       "Counting Transformer",
                       (Form("counting-transformer", params=314,
                             params_alphabets=(("counting-transformer[a=n+1]", lambda n: n + 1),),
                             resources=_retrieval_resources("counting", 3, 2),
                             certificates=lambda: (Certificate(O.retrieval_cert("counting", 3), P.COUNTING),
                                                   Certificate(O.retrieval_cert("counting", "n+1"), P.COUNTING))),)),
    ConstructionRecord(Key(_R, "mqar", "transformer"), retrieval.mqar_transformer, _mqar_example,
                       "multi-query AR (every position answers)",
                       (Form("mqar-transformer", params=191, params_n=(1, 1024),
                             resources=lambda: int_frac_resources("mqar-transformer", Bd.MQAR, frac=False),
                             certificates=lambda: (Certificate(O.mqar_cert(), P.MQAR),)),),
                       size=lambda n: {"length": n}),
    # T4.7-up
    ConstructionRecord(Key("T4.7-up", "istree", "transformer"), istree_model.istree_transformer, _istree_example,
                       "IsTree Transformer (next token = first token of the DFS tour)",
                       (Form("istree-transformer", params=22215, params_n=(2, None), resources=_istree_resources,
                             certificates=lambda: (Certificate(O.istree_dfs_cert("sparse")),
                                                   Certificate(O.istree_dfs_cert("dense")))),),
                       size=lambda n: {"n_vertices": max(n, 2)}),
    # T5.6: hybrids
    ConstructionRecord(Key(_H, "index", "hybrid"), hybrid.index_hybrid, _index_example, "hybrid for Index",
                       (Form("index-hybrid", params=84, params_n=(2, None), resources=_hybrid_resources("index"),
                             certificates=_one(Certificate(O.hybrid_cert("index"), P.HYBRID_INDEX))),)),
    ConstructionRecord(Key(_H, "ar", "hybrid"), hybrid.ar_hybrid, _ar_example(2), "hybrid for AR",
                       (Form("ar-hybrid", params=222, params_n=(2, None), resources=_hybrid_resources("ar"),
                             certificates=_one(Certificate(O.hybrid_cert("ar"), P.HYBRID_AR))),)),
    ConstructionRecord(Key(_H, "cgram", "hybrid"), hybrid.cgram_hybrid, _cgram_example, "hybrid for c-gram (c = 3)",
                       (Form("cgram-hybrid", params=376, params_n=(3, None),
                             resources=_hybrid_resources("cgram(c=3)"),
                             certificates=_one(Certificate(O.hybrid_cert("cgram(c=3)"), P.HYBRID_CGRAM3))),),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(_H, "counting", "hybrid"), hybrid.counting_hybrid, _count_example, "hybrid for Counting",
                       (Form("counting-hybrid", params=457, params_n=(3, 4096), resources=_hybrid_resources("counting"),
                             certificates=_one(Certificate(O.hybrid_cert("counting"), P.HYBRID_COUNTING))),)),
    ConstructionRecord(Key(_H, "istree", "hybrid"), hybrid.istree_hybrid, _graph_example,
                       "hybrid for IsTree (union-find CoT)",
                       (Form("istree-hybrid", params=12938, params_n=(2, 256), resources=_hybrid_resources("istree"),
                             certificates=_one(Certificate(O.hybrid_cert("istree")))),),
                       size=lambda n: {"N": max(n, 2)}),
    # T5-RAG: linear RNN + in-context RAG
    ConstructionRecord(Key(_G, "index", "rag"), rag_models.index_rag, _index_example, "linear RNN + RAG for Index",
                       (Form("index-rag", params=1932, params_n=(2, None),
                             resources=_rag_resources("index-rag", rag_models.INDEX_INT, rag_models.index_int_bits,
                                                      "linear"),
                             certificates=_one(Certificate(O.rag_cert("index-rag")))),)),
    ConstructionRecord(Key(_G, "ar", "rag"), rag_models.ar_rag, _ar_example(2), "linear RNN + RAG for AR",
                       (Form("ar-rag", params=718, params_n=(2, None),
                             certificates=_one(Certificate(O.rag_cert("ar-rag")))),)),
    ConstructionRecord(Key(_G, "cgram", "rag"), rag_models.cgram_rag, _cgram_example,
                       "linear RNN + RAG for c-gram (c = 3)",
                       (Form("cgram-rag", params=1076, params_n=(3, None),
                             resources=_rag_resources("cgram-rag", rag_models.CGRAM_INT, rag_models.cgram_int_bits,
                                                      "constant"),
                             certificates=_one(Certificate(O.rag_cert("cgram-rag")))),),
                       defaults={"alphabet": 2, "c": 3}),
    ConstructionRecord(Key(_G, "counting", "rag"), rag_models.counting_rag, _count_example,
                       "linear RNN + RAG for Counting",
                       (Form("counting-rag", params=7317, params_n=(2, None),
                             resources=_rag_resources("counting-rag", rag_models.COUNTING_INT,
                                                      rag_models.counting_int_bits, "linear"),
                             certificates=_one(Certificate(O.rag_cert("counting-rag")))),)),
    ConstructionRecord(Key(_G, "istree", "rag"), rag_models.istree_rag, _graph_example, "linear RNN + RAG for IsTree",
                       (Form("istree-rag", params=92894, params_n=(2, None),
                             resources=_rag_resources("istree-rag", rag_models.ISTREE_PLAIN_INT,
                                                      rag_models.istree_plain_int_bits, "linear",
                                                      rag_models.istree_plain_cot_bound),
                             certificates=_one(Certificate(O.rag_cert("istree-rag")))),),
                       size=lambda n: {"n_nodes": max(n, 2)}),
    ConstructionRecord(Key(_G, "istree", "rag-paper"), rag_models.istree_rag_paper, _graph_example,
                       "IsTree in the paper's retrieval-CoT format (its own oracle dialect)",
                       (Form("istree-rag-paper", params=50682, params_n=(2, 8),
                             resources=_rag_resources("istree-rag-paper", rag_models.ISTREE_INT,
                                                      rag_models.istree_int_bits, "linear",
                                                      rag_models.istree_cot_bound),
                             certificates=_one(Certificate(O.rag_cert("istree-rag-paper")))),),
                       size=lambda n: {"n_nodes": max(n, 2)}),
    # T4.1 and sim
    ConstructionRecord(Key("T4.1", "iterate", "rnn"), cot_hierarchy.iterate_rnn, _iterate_example,
                       "RNN with CoT for ITER (iterating the permutation g)",
                       (Form("iterate-rnn", params=439, params_n=(2, 64), resources=_iterate_resources,
                             certificates=_one(Certificate(O.iterate_cert(), P.ITERATE))),)),
    ConstructionRecord(Key("sim", "rnnsim", "transformer"), simulate.rnnsim_transformer, _iterate_example,
                       "the Transformer simulating a linear RNN step by step (here the T4.1 RNN for n)",
                       (Form("sim", resources=_sim_resources),),
                       uncertified="the simulator depends on the RNN it simulates: `rnngap certify` certifies each "
                                   "simulator the registry builds (rows sim[...] and 'rnnsim-transformer[layers]'), not this "
                                   "record", size=_sim_size),
    # T5-hyb-P and T5-RAG: the Turing machines, one record per machine and architecture
    *_tm_records(),
)
"""Every construction, once."""

CONSTRUCTION_CLAIMS = ("T4.6-up", "T4.7-up", "T5-RAG", "T5.6", "T5-hyb-P", "T4.1", "sim")
"""The claims whose upper bounds are constructions; each has a record."""


REGISTERED: list[ConstructionRecord] = []
"""Records added in this process by :func:`register` (``rnngap.register``)."""

ENTRY_POINTS = "rnngap.constructions"
"""The entry point group whose objects (a record, or a function returning records)
are constructions of other packages."""

MODULES_ENV = "RNNGAP_CONSTRUCTIONS"
"""Modules (``a.b:c.d``) imported before the records are read; they call
:func:`register`. Spawned workers import them too."""

_LOADED: list[tuple] = []


def _load_plugins() -> None:
    """Import $RNNGAP_CONSTRUCTIONS's modules and the entry points' records, once
    per value of the variable."""
    import importlib
    import importlib.metadata as md
    mods = tuple(m for m in os.environ.get(MODULES_ENV, "").split(":") if m.strip())
    if _LOADED and _LOADED[0] == mods:
        return
    _LOADED[:] = [mods]
    for m in mods:
        importlib.import_module(m.strip())
    for ep in md.entry_points(group=ENTRY_POINTS):
        obj = ep.load()
        for rec in (obj() if callable(obj) and not isinstance(obj, ConstructionRecord) else [obj]):
            if rec not in REGISTERED:
                register(rec)


def register(record: ConstructionRecord) -> ConstructionRecord:
    """Add a construction record in this process: seen by every command and check
    that reads :func:`records`. ValueError if its name or key is taken."""
    if not isinstance(record, ConstructionRecord):
        raise ValueError(f"register takes a ConstructionRecord, got {type(record).__name__}")
    taken = [r for r in (*RECORDS, *REGISTERED) if r.name == record.name or r.key == record.key]
    if taken and taken != [record]:
        raise ValueError(f"a construction named {record.name!r} (or with key {tuple(record.key)}) exists")
    if record not in REGISTERED:
        REGISTERED.append(record)
    return record


def records() -> tuple[ConstructionRecord, ...]:
    """:data:`RECORDS` and the registered ones, checked: names and keys unique."""
    _load_plugins()
    out = (*RECORDS, *REGISTERED)
    if len({r.key for r in out}) != len(out) or len({r.name for r in out}) != len(out):
        raise RuntimeError("two construction records with one key or name")
    return out


def certificates() -> dict[str, Certificate]:
    """Every certificate of every record, by name (``rnngap certify`` reads this)."""
    out: dict[str, Certificate] = {}
    for r in records():
        for c in r.certificate_list():
            if c.name in out:
                raise RuntimeError(f"two certificates named {c.name!r}")
            out[c.name] = c
    return out


def certificate(name: str) -> Certificate:
    certs = certificates()
    if name not in certs:
        raise KeyError(f"no certificate {name!r}; known: {', '.join(certs)}")
    return certs[name]


def declarations() -> list[tuple[Declaration, Callable | None, dict | None]]:
    """(declaration, the Python function of n the construction uses or None, its
    sample n per profile or None) for every declared resource of every record,
    then every declared parameter count (:func:`params_declarations`)."""
    out = []
    for r in records():
        for form in r.forms:
            for res in form.resources():
                out.append((Declaration(r.key.claim, res.model, res.resource, sp.sympify(res.expr), res.order),
                            res.fn, res.sample))
    return out + params_declarations()


PARAM_N = {"quick": [2, 3, 5, 8, 64, 1024], "full": [2, 3, 4, 5, 6, 7, 8, 9, 16, 64, 256, 1024, 4096]}
"""The n a declared parameter count is measured at (within its form's ``params_n``)."""


def params_declarations() -> list[tuple[Declaration, Callable, dict]]:
    """The declared parameter count of every form ("constant size", docs/theory.md §1)
    with its measurement: the parameter count of the model the record builds at each
    sample n (and at the reduction alphabets of ``params_alphabets``)."""
    out = []
    for r in records():
        for form in r.forms:
            if form.params is None:
                continue
            lo, hi = form.params_n
            sample = {p: [n for n in v if n >= lo and (hi is None or n <= hi)] for p, v in PARAM_N.items()}
            for label, alpha in ((form.name, None),) + tuple(form.params_alphabets):
                def measure(n, r=r, form=form, alpha=alpha):
                    kw = {**form.kw, **({"alphabet": alpha(n)} if alpha else {})}
                    return int(r.build(n, **kw).model.resources.params)
                out.append((Declaration(r.key.claim, label, "params", sp.Integer(form.params), "constant"),
                            measure, sample))
    return out


def _retrieval_tasks() -> tuple[str, ...]:
    from rnngap.checks.tasks import TASKS
    return tuple(dict.fromkeys(s.family for s in TASKS.values() if s.reduction is not None and s.family != "istree"))


RETRIEVAL_TASKS = _retrieval_tasks()
"""The retrieval tasks by family (index, ar, cgram, counting): the tasks of checks.tasks
with an Index reduction, IsTree excepted; the catalogue's ``cgram`` is c = 3."""


def canonical_task(name: str) -> str:
    """The canonical task name (checks.tasks) of a construction record's task: ``cgram``
    is c-gram with c = 3, ``tm-*`` the Turing-machine task; NO_TASK for the entries
    that solve no task of checks.tasks (the gadgets, the RNN simulator)."""
    from rnngap.checks.tasks import NO_TASK, task
    try:
        return task("tm" if name.startswith("tm-") else name).name
    except ValueError:
        return NO_TASK
_ARCH_CLAIM = {"transformer": "T4.6-up", "hybrid": "T5.6", "rag": "T5-RAG"}


def retrieval_model(task: str, architecture: str, n: int, *, alphabet: int, c: int = 3, fmt=None) -> Model:
    """The catalogue's model for a retrieval task (``c`` is passed to c-gram only):
    the uniform call of the registry checks that build by task name."""
    kw = {"alphabet": alphabet, "fmt": fmt, **({"c": c} if task == "cgram" else {})}
    return entry(_ARCH_CLAIM[architecture], task, architecture).build(n, **kw).model


def names() -> list[str]:
    return sorted(r.name for r in records())


def by_name(name: str) -> ConstructionRecord:
    for r in records():
        if r.name == name:
            return r
    raise KeyError(name)


def entry(claim: str, task: str, architecture: str) -> ConstructionRecord:
    key = Key(claim, task, architecture)
    for r in records():
        if r.key == key:
            return r
    raise KeyError(key)


def closest(name: str, known, k: int = 3) -> list[str]:
    """The ``k`` names of ``known`` closest to ``name`` (for an unknown name's message).

    >>> closest("index-transfomer", names())
    ['index-transformer', 'istree-transformer', 'ar-transformer']
    """
    import difflib
    known = list(dict.fromkeys(known))
    near = difflib.get_close_matches(name, known, n=k, cutoff=0.0)
    return near or known[:k]


def named_by(name: str, certificate_names) -> list[str]:
    """The certificate names a construction name (or a certificate name) stands for:
    ``name`` itself and every ``name[variant]``.

    >>> named_by("index-transformer", ["index-transformer[a=2]", "index-hybrid", "index-transformer[a=n+2]"])
    ['index-transformer[a=2]', 'index-transformer[a=n+2]']
    """
    return [c for c in certificate_names if c == name or c.startswith(name + "[")]
