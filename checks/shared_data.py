"""Where the peers' sample data (``shared/data``: the paper's IsTree sample, the
Zoology MQAR batches) is found.

Searched in order: the directory named by ``RNNGAP_SHARED_DATA``; ``shared/data``
beside a source checkout of rnngap (the CI layout); ``shared/data`` beside or
below the current working directory. ``None`` if none exists: the checks that
need it then report NOT CHECKED (never a pass); the test suite, which runs in
the CI layout, fails instead.
"""
from __future__ import annotations

import os
from pathlib import Path


def shared_data_dir() -> Path | None:
    env = os.environ.get("RNNGAP_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [
        Path(__file__).resolve().parents[2] / "shared" / "data",   # source checkout
        Path.cwd().parent / "shared" / "data",
        Path.cwd() / "shared" / "data",
    ]
    for c in candidates:
        if c.is_dir():
            return c
    return None


def shared_file(name: str) -> Path | None:
    d = shared_data_dir()
    return d / name if d is not None and (d / name).is_file() else None
