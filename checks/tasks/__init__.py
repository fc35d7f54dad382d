"""The tasks: instance generators and plain-Python references (one module a task)
and, collected here, one :class:`~checks.tasks.spec.TaskSpec` per task.

``TASKS`` maps each canonical task name to its spec; :func:`task` resolves a
name or an alias. Every check and the ``cc``, ``witness`` and ``predict``
commands read these specs; no other module keeps a task -> reference map.
"""
from __future__ import annotations

from . import ar, cgram, counting, index, istree, iterate, turing
from .spec import NO_TASK, TaskSpec

__all__ = ["NO_TASK", "TASKS", "TaskSpec", "aliases", "is_task_name", "names_having", "task", "task_having"]


def _collect() -> dict[str, TaskSpec]:
    specs = (index.SPEC, ar.SPEC, ar.MQAR_SPEC, *cgram.SPECS, counting.SPEC, istree.SPEC, iterate.SPEC, turing.SPEC)
    return {s.name: s for s in specs}


TASKS: dict[str, TaskSpec] = _collect()
"""Canonical name -> spec."""


def aliases() -> dict[str, str]:
    """Every accepted name (canonical names and aliases, lower case) -> canonical name."""
    out = {name: name for name in TASKS}
    for s in TASKS.values():
        for a in s.aliases:
            if a in out and out[a] != s.name:
                raise ValueError(f"alias {a!r} names both {out[a]!r} and {s.name!r}")
            out[a] = s.name
    return out


_ALIASES = aliases()


def task(name: str) -> TaskSpec:
    """The spec of ``name`` (a canonical name or an alias, any case; ``cgram(c=K)``
    for any K >= 2). ValueError listing the known names otherwise."""
    key = str(name).strip().lower()
    if key in _ALIASES:
        return TASKS[_ALIASES[key]]
    if key.startswith("cgram(c=") and key.endswith(")") and key[8:-1].isdigit():
        try:
            return cgram.spec(int(key[8:-1]))
        except ValueError:
            pass
    raise ValueError(f"unknown task {name!r}; known: {', '.join(TASKS)} "
                     f"(aliases: {', '.join(a for a in _ALIASES if a not in TASKS)})")


def is_task_name(name: str) -> bool:
    """True for a canonical task name (or :data:`NO_TASK`); aliases are not canonical."""
    if name == NO_TASK or name in TASKS:
        return True
    try:
        return task(name).name == name
    except ValueError:
        return False


def names_having(attr: str) -> tuple[str, ...]:
    """The canonical names (in :data:`TASKS` order) of the tasks whose ``attr`` is set."""
    return tuple(n for n, s in TASKS.items() if getattr(s, attr) is not None)


def task_having(attr: str, value) -> TaskSpec:
    """The one spec whose ``attr`` equals ``value`` (e.g. ``("predict", "ar")``)."""
    found = [s for s in TASKS.values() if getattr(s, attr) == value]
    if len(found) != 1:
        raise ValueError(f"{len(found)} tasks have {attr} = {value!r}")
    return found[0]
