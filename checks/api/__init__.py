"""rnngap's public Python API: build a construction, run it, check and certify it.

Everything a user needs is here; every other module is internal and may move.

    >>> import rnngap
    >>> m = rnngap.build("index-transformer", n=8)
    >>> inst = rnngap.tasks.reduction("index", n=8, seed=1)
    >>> m.predict(inst.tokens) == inst.answer
    True

The names are those of ``rnngap show --list`` (:func:`list_constructions`).
The import is light: each name loads its modules when first used.
"""
from __future__ import annotations

import importlib

__all__ = ["BuiltModel", "ConstructionInfo", "Trace", "build", "certify", "export", "list_constructions",
           "register", "tasks", "verify"]

_HOME = {"BuiltModel": "model", "Trace": "model", "build": "model", "ConstructionInfo": "catalogue",
         "list_constructions": "catalogue", "register": "catalogue", "verify": "runs", "certify": "runs",
         "export": "runs"}


def __getattr__(name: str):
    if name == "tasks":
        return importlib.import_module(f"{__name__}.tasks")
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rnngap' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
