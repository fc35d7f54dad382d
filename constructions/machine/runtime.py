"""The machine's runtime set-up: numba's cache folder and threading layer, worker processes' cores.

Importing this module (which importing any module of ``rnngap.constructions``
does first) sets up numba. Its on-disk cache checks only the source
file of the function it loads, so the cache lives in
``constructions/__pycache__/numba-<hash>``, the hash taken over the source of
every module under constructions/ (unless
``NUMBA_CACHE_DIR`` is set), with fallbacks to a private temporary folder or to
in-memory compiling when nothing is writable. The threading layer is
``workqueue`` unless ``NUMBA_THREADING_LAYER`` says otherwise, so no OpenMP
kernel pins the process to one core; :data:`START_AFFINITY` holds the cores
available at import, on which the engines start their workers (:func:`unpin`).

Details: docs/internals/machine.md#runtime
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

import numba
from numba.core import dispatcher

START_AFFINITY: frozenset[int] = frozenset(
    os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1))
"""The cores this process could run on when the package was imported (before any kernel ran)."""


def thread_ids() -> list[int]:
    """The ids of this process's threads (Linux: /proc/self/task); [0], this
    thread, where they cannot be listed."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def unpin(cores) -> None:
    """Let every thread of this process run on ``cores`` (a worker started by a
    parent whose thread was pinned since: see the module docstring). A no-op where
    affinity cannot be set; a thread that ends meanwhile is skipped."""
    if not hasattr(os, "sched_setaffinity"):
        return
    for tid in thread_ids():
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass


def _threading_layer() -> None:
    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER = "workqueue"


CACHE_NOTE: str | None = None
"""The note written on stderr when the cache is not where it normally is (or None)."""


def numba_cache_dir(package: Path) -> Path:
    """``package/__pycache__/numba-<hash>``, the hash over every ``*.py`` of ``package``
    and its sub-folders (each named by its path inside ``package``)."""
    h = hashlib.sha256()
    for p in sorted(package.rglob("*.py")):
        h.update(p.relative_to(package).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return package / "__pycache__" / f"numba-{h.hexdigest()[:16]}"


def _writable(folder: Path, private: bool = False) -> bool:
    """Create ``folder`` if needed and write a probe file in it; ``private``: the
    folder's parent must be ours alone (a shared temporary directory)."""
    try:
        if private:
            folder.parent.mkdir(mode=0o700, exist_ok=True)
            st = folder.parent.lstat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                return False
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".writable").touch()
        return True
    except OSError:
        return False


def _note(message: str) -> None:
    """Keep the note; :func:`announce_cache` writes it when kernels are first loaded
    (so a command that runs no kernel, ``rnngap --help``, prints none)."""
    global CACHE_NOTE
    CACHE_NOTE = message


_ANNOUNCED = False


def quiet_cache_note() -> None:
    """Never write the note in this process (a worker of ``rnngap verify``: its
    parent has written it)."""
    global _ANNOUNCED
    _ANNOUNCED = True


def worker_init(cores, parent: int | None = None) -> None:
    """The initializer of a worker process of the local engine: runs on ``cores``
    (the parent's :data:`START_AFFINITY`), writes no cache note, and ends itself
    within about half a second once process ``parent`` is gone (killed, hung up:
    :func:`watch_parent`)."""
    unpin(cores)
    quiet_cache_note()
    if parent is not None:
        watch_parent(parent)


PARENT_POLL = 0.5
"""Seconds between a worker's checks that its parent still lives."""


def watch_parent(parent: int) -> None:
    """A daemon thread that ends this process (``os._exit(1)``) when its parent
    process ``parent`` has gone: the process is re-parented then, so
    ``os.getppid()`` changes. No worker outlives a killed parent."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="watch-parent").start()


def announce_cache() -> None:
    """Write :data:`CACHE_NOTE` on stderr, once per process (called by the kernel
    modules when they are imported)."""
    global _ANNOUNCED
    if CACHE_NOTE is None or _ANNOUNCED:
        return
    _ANNOUNCED = True
    try:
        print(f"rnngap: note: {CACHE_NOTE}", file=sys.stderr)
    except (OSError, ValueError):
        pass


def _cache_dir_for_sources() -> None:
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user and _writable(Path(user)):
        return
    why = f"NUMBA_CACHE_DIR={user} is not writable" if user else "the package folder is not writable"
    package = Path(__file__).resolve().parents[1]    # constructions/
    target = numba_cache_dir(package)
    if not user and _writable(target):
        for old in target.parent.glob("numba-*"):
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
        numba.config.CACHE_DIR = str(target)
        return
    if user and _writable(target):
        numba.config.CACHE_DIR = str(target)
        _note(f"{why}; numba kernels are cached in {target}")
        return
    fallback = Path(tempfile.gettempdir()) / f"rnngap-numba-{os.getuid()}" / target.name
    if _writable(fallback, private=True):
        numba.config.CACHE_DIR = str(fallback)
        _note(f"{why}; numba kernels are cached in {fallback}")
        return
    # nowhere to cache: compile in memory (numba raises "no locator available" at import otherwise)
    dispatcher.Dispatcher.enable_caching = lambda self: None
    numba.config.CACHE_DIR = ""
    _note(f"{why} and neither is {fallback.parent}; numba kernels are compiled in memory on every run")


_cache_dir_for_sources()
_threading_layer()
