"""What a construction record holds: its key, forms, declared resources and certificates.

A :class:`ConstructionRecord` (keyed by claim, task and architecture) holds the
builder, a seeded example prompt, a one-line description and its forms; a
:class:`Form` declares the parameter count, the :class:`Resource` s and the
:class:`Certificate` s of the construction at fixed task parameters. The
families' modules of this folder (retrieval, hybrid, istree, rag, hierarchy,
turing, gadgets) make the records; checks/catalog/records.py lists them.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

import numpy as np
import sympy as sp

from rnngap.constructions.models import bounds as Bd
from rnngap.constructions.build.model import Model
from rnngap.constructions.models.obligations import Construction

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
    and the gadgets' obligations at an alphabet a(n)), and for a whole-model
    certificate its plan (a checks.certify.plans.ModelPlan, made in the family's module) with
    the record's builder (``build(n, a)``, sizes possibly symbolic, filled in by
    :func:`certificates`)."""

    con: Construction
    plan: Any = None
    params: int | None = None
    build: Callable | None = None
    program_sizes: tuple = ()
    """For a model compiled from an RNN program (constructions/build/rnn_program.py): the
    sizes n at which ``rnngap certify`` proves the built model computes its program
    (checks/certify/program.py); the builder's result has ``program`` and ``model``."""
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
        """True iff ``rnngap certify`` proves it from the built model for every n (a whole-model plan)."""
        return self.plan is not None

    @property
    def source(self) -> str:
        """What ``rnngap certify`` reads: ``built-model`` (a plan, or a compiled program
        at its sizes) or ``declared-obligation``."""
        return "built-model" if self.plan is not None or self.program_sizes else "declared-obligation"


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


def ints(a) -> list[int]:
    """An example prompt as a list of Python ints."""
    return [int(t) for t in a]


def fixed_certificates(*certs: Certificate) -> Callable[[], tuple]:
    """A form's ``certificates`` when they need nothing made on first read."""
    return lambda: certs


def int_frac_resources(name: str, decl, int_order: str = "log", frac_order: str = "log", sub: dict | None = None,
                       a=None, c=None, frac: bool = True) -> tuple[Resource, ...]:
    """int_bits (and frac_bits) of a Declared at fixed (a, c), with the Python functions it uses."""
    sub = {**(sub or {}), **({Bd.A: a} if a is not None else {}), **({Bd.C: c} if c is not None else {})}
    out = (Resource(name, "int_bits", decl.int_expr.subs(sub), int_order,
                    decl.int_bits if a is None and c is None else (lambda n: decl.int_bits(n, a, c))),)
    if frac:
        out += (Resource(name, "frac_bits", sp.sympify(decl.frac_expr).subs(sub), frac_order, decl.frac_bits),)
    return out

