"""The constructions rnngap knows: list them, and register one of your own.

    >>> import rnngap
    >>> [c.name for c in rnngap.list_constructions()][:3]
    ['ar-hybrid', 'ar-rag', 'ar-transformer']
    >>> c = {c.name: c for c in rnngap.list_constructions()}["index-transformer"]
    >>> c.claim, c.where, c.certificates
    ('T4.6-up', 'constructions/models/retrieval.py:index_transformer', ('index-transformer[a=2]', 'index-transformer[a=n+2]'))

A construction of your own is a :class:`rnngap.checks.catalog.records.ConstructionRecord`
(its builder, example, declared resources and certificates; docs/conventions.md).
:func:`register` adds it in this process; a package can also name it under the
entry point group ``rnngap.constructions``, and ``$RNNGAP_CONSTRUCTIONS`` lists
modules (``a.b:c.d``) imported first, which register theirs. Either way it is
listed by ``rnngap show``, checked by ``rnngap verify`` and certified by
``rnngap certify`` like a built-in one.
"""
from __future__ import annotations

from dataclasses import dataclass

from rnngap.checks.catalog import records as catalog


@dataclass(frozen=True)
class ConstructionInfo:
    """One construction: its name, claim, one-line description, builder and certificates."""

    name: str
    claim: str
    task: str
    architecture: str
    about: str
    where: str
    certificates: tuple[str, ...]


def list_constructions() -> list[ConstructionInfo]:
    """Every construction (built-in and registered), sorted by name."""
    out = []
    for name in catalog.names():
        r = catalog.by_name(name)
        out.append(ConstructionInfo(name, r.key.claim, r.key.task, r.key.architecture, r.about, r.where,
                                    r.certificates))
    return out


def register(record: "catalog.ConstructionRecord") -> "catalog.ConstructionRecord":
    """Add ``record`` to the constructions of this process (see the module docstring).
    ValueError if it is not a ConstructionRecord or its name or key is taken."""
    return catalog.register(record)
