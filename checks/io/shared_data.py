"""Where the peers' sample data (the paper's IsTree sample, the Zoology MQAR
batches) is found.

The samples ship inside the package (``checks/data/``, installed as package
data by ``pip install``; their provenance is in ``checks/data/README.md``), so
``rnngap verify`` is complete wherever the install worked. The environment
variable ``RNNGAP_SHARED_DATA`` overrides that directory (e.g. to check other
samples of the same generators); when it is set (non-empty) it must name an
existing directory: a set but missing directory is an error
(:class:`SharedDataError`, exit 2 in ``rnngap verify``), never a silent
fallback. A file missing from the directory in use makes the checks that need
it report NOT CHECKED (``verify`` exits 3), never a pass.
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"
"""The samples installed with the package."""

ENV = "RNNGAP_SHARED_DATA"


class SharedDataError(ValueError):
    """``RNNGAP_SHARED_DATA`` is set but names no directory."""


def shared_data_dir() -> Path | None:
    """The directory in use: ``$RNNGAP_SHARED_DATA`` if set (SharedDataError
    unless it is a directory), else the package data (None if that is absent,
    e.g. deleted from an install)."""
    env = os.environ.get(ENV)
    if env:
        p = Path(env)
        if not p.is_dir():
            why = "does not exist" if not p.exists() else "is not a directory"
            raise SharedDataError(f"{ENV}={env} {why} (unset it to use the samples shipped in {PACKAGE_DATA})")
        return p
    return PACKAGE_DATA if PACKAGE_DATA.is_dir() else None


def shared_file(name: str) -> Path | None:
    """``name`` in :func:`shared_data_dir`, or None if it is not a file there."""
    d = shared_data_dir()
    return d / name if d is not None and (d / name).is_file() else None
