"""Which records ``rnngap verify --only NAME ...`` runs and shows.

A name is a claim id (``T4.6-up``: every record of the claim) or a construction
name as ``rnngap show --list`` prints it (``index-transformer``: the claim's
checks run, and the records about that construction are shown). A record is
about a construction when it has the construction's claim and task, and for the
claims with several architectures per task (T5-RAG's two IsTree models, the
Turing machines) when its model or description names that variant. A claim
with one construction (T4.1, sim) keeps all its records. A registered
construction runs only its own checks: the reduction check of
checks/verify/checks_registered.py and the declarations. An unknown name is a
:class:`~checks.io.errors.UsageError` naming the three closest known names.
"""
from __future__ import annotations

from typing import Callable, Iterable

from rnngap.checks.catalog import records as catalog
from rnngap.checks.io.errors import UsageError

from . import registry
from .checks_registered import CHECK_NAME


def _family(task: str) -> str:
    """``cgram(c=3)`` -> ``cgram``; other task names unchanged."""
    return task.split("(", 1)[0]


def about(record, key) -> bool:
    """True if ``record`` (a registry Record) is about the construction with ``key``."""
    if record.claim != key.claim:
        return False
    text = f"{record.model} {record.description}"
    if key.task.startswith("tm-"):
        return key.task[3:] in text
    if key.claim in ("T4.1", "sim"):
        return True
    if key.claim == "gadgets":
        return text.startswith(key.task) or key.task in text
    if _family(record.task) != key.task:
        return False
    if key.task == "istree" and key.claim == "T5-RAG":
        return ("paper" in text) == (key.architecture == "rag-paper")
    return True


def select(names: Iterable[str]) -> tuple[list[str], Callable | None]:
    """(the claims to run, a predicate keeping the records to show, or None: all)."""
    claims: list[str] = []
    whole: set[str] = set()
    keys = []
    constructions = {r.name: r.key for r in catalog.records()}
    for name in names:
        if name in registry.CLAIMS:
            whole.add(name)
            claims.append(name)
        elif name in constructions:
            key = constructions[name]
            keys.append(key)
            if catalog.by_name(name) in catalog.RECORDS:
                claims.append(key.claim)
            else:                # registered: its reduction check and its declarations
                claims += [f"{key.claim}{registry.CHECK_SEP}{CHECK_NAME}", "declarations"]
        else:
            near = catalog.closest(name, [*constructions, *registry.CLAIMS])
            raise UsageError(f"verify: unknown claim or construction {name!r}; closest: {', '.join(near)}")
    claims = list(dict.fromkeys(claims))
    if not keys:
        return claims, None
    names_ = {catalog.by_name(n).name for n in names if n in constructions}
    return claims, lambda r: (r.claim in whole or any(about(r, k) for k in keys)
                              or (r.claim == "declarations" and any(n in r.model for n in names_)))
