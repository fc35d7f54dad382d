"""Numerics, executors, gadgets and the hand-wired models.

Numba's on-disk cache (``@njit(cache=True)``) checks only the source file of the
function it loads: a kernel that calls or inlines a function of another module
(``kernels`` -> ``fixedpoint``, ``keyindex``, ``heap``) keeps running the old
code after that other module changes. So unless ``NUMBA_CACHE_DIR`` is set, the
cache lives in ``__pycache__/numba-<hash>`` of this package, the hash taken over
the sources of every module here: any change to any of them starts a fresh
cache (older ``numba-*`` folders are removed). Where the package folder is not
writable, numba's own default applies.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path


def numba_cache_dir(package: Path) -> Path:
    """``package/__pycache__/numba-<hash>``, the hash over every ``*.py`` of ``package``."""
    h = hashlib.sha256()
    for p in sorted(package.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return package / "__pycache__" / f"numba-{h.hexdigest()[:16]}"


def _cache_dir_for_sources() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    target = numba_cache_dir(Path(__file__).resolve().parent)
    root = target.parent
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / ".writable"
        probe.touch()
    except OSError:
        return
    for old in root.glob("numba-*"):
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    import numba

    numba.config.CACHE_DIR = str(target)


_cache_dir_for_sources()
