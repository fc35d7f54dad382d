"""The construction records: every family's records in one list, and the lookups every command uses.

A record (checks/catalog/schema.py), keyed by (claim, task, architecture),
holds the builder, a seeded example prompt, a one-line description, its forms
(declared parameter count, resources and certificates) and, where it has none,
why it is not certified. Each family's module of this folder makes its own
records; :data:`RECORDS` lists them all. Every command reads :func:`records`
(:data:`RECORDS` and those :func:`register` added), so a record is seen
everywhere. Details: docs/internals/commands.md#catalog.

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

import difflib
import importlib
import importlib.metadata as md
import os
from typing import Callable

import sympy as sp

from rnngap.constructions.build.model import Model
from rnngap.checks.tasks import NO_TASK, TASKS, task

from . import gadgets, hierarchy, hybrid, istree, rag, retrieval, turing
from .asymptotics import Declaration
from .schema import Built, Certificate, ConstructionRecord, Form, Key, Resource, int_frac_resources

__all__ = ["Built", "Certificate", "ConstructionRecord", "Form", "Key", "Resource", "int_frac_resources",
           "RECORDS", "CONSTRUCTION_CLAIMS", "register", "records", "certificates", "certificate", "declarations",
           "params_declarations", "RETRIEVAL_TASKS", "canonical_task", "retrieval_model", "names", "by_name", "entry",
           "closest", "named_by"]

RECORDS: tuple[ConstructionRecord, ...] = (*gadgets.RECORDS, *retrieval.RECORDS, *istree.RECORDS, *hybrid.RECORDS,
                                           *rag.RECORDS, *hierarchy.RECORDS, *turing.RECORDS)
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
    return tuple(dict.fromkeys(s.family for s in TASKS.values() if s.reduction is not None and s.family != "istree"))


RETRIEVAL_TASKS = _retrieval_tasks()
"""The retrieval tasks by family (index, ar, cgram, counting): the tasks of checks.tasks
with an Index reduction, IsTree excepted; the catalogue's ``cgram`` is c = 3."""


def canonical_task(name: str) -> str:
    """The canonical task name (checks.tasks) of a construction record's task: ``cgram``
    is c-gram with c = 3, ``tm-*`` the Turing-machine task; NO_TASK for the entries
    that solve no task of checks.tasks (the gadgets, the RNN simulator)."""
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
