"""Errors of the command line (in their own module so that ``python -m
checks.cli`` and ``checks.cli`` share one class), the up-front checks of the
paths a command will write (so that bad usage is reported before any long run
rather than after it, and no output overwrites an input), and
:func:`atomic_output`, the one way a command writes a file."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


class UsageError(Exception):
    """Bad usage or input: the CLI prints one line and exits with code 2."""


def check_output_path(path: str, what: str) -> None:
    """Raise :class:`UsageError` unless ``path`` can name a file to be written.

    ``what`` prefixes the message (e.g. ``"verify --json"``). Checked: the path is
    not empty, is not an existing directory, its parent directory exists, is a
    directory and is writable. (Whether the write then succeeds is still
    checked when it happens: the disk may fill up meanwhile.)

    >>> check_output_path("/", "verify --json")
    Traceback (most recent call last):
    ...
    rnngap.checks.errors.UsageError: verify --json: cannot write /: it is a directory
    """
    if not str(path):
        raise UsageError(f"{what}: the output path is empty")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what}: cannot write {path}: it is a directory")
    parent = p.parent
    if not parent.exists():
        raise UsageError(f"{what}: cannot write {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"{what}: cannot write {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot write {path}: directory {parent} is not writable")


def check_distinct_paths(outputs: dict[str, str], inputs: dict[str, str] | None = None, what: str = "rnngap") -> None:
    """Raise :class:`UsageError` if two of the named paths are the same file.

    ``outputs`` / ``inputs`` map an option name (``"--out"``) to a path. An output
    may be neither an input nor another output of the same command: writing it
    would destroy the input (or one output would overwrite the other). Two
    paths are the same if :func:`os.path.samefile` says so (both exist; hard
    links and symlinks included) or, otherwise, if their resolved absolute
    paths are equal.

    >>> check_distinct_paths({"--out": "a.png", "--json": "./a.png"}, what="precision")
    Traceback (most recent call last):
    ...
    rnngap.checks.errors.UsageError: precision: --json and --out name the same file a.png
    """
    named = [(k, str(v)) for k, v in (inputs or {}).items() if v is not None]
    named += [(k, str(v)) for k, v in outputs.items() if v is not None]
    n_in = len([v for v in (inputs or {}).values() if v is not None])
    for j in range(n_in, len(named)):          # every output against everything before it
        for k in range(j):
            if _same_file(named[j][1], named[k][1]):
                a, b = named[k][0], named[j][0]
                raise UsageError(f"{what}: {b} {named[j][1]} is the input ({a} {named[k][1]}); refusing to overwrite it"
                                 if k < n_in else
                                 f"{what}: {b} and {a} name the same file {named[k][1]}")


def _same_file(a: str, b: str) -> bool:
    """Same regular file (or, where one does not exist yet, the same resolved
    path). Devices and pipes are never "the same file": ``--inputs /dev/stdin
    --out /dev/stdout`` on one terminal loses nothing."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.isfile(a) and os.path.isfile(b) and os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(outputs: dict[str, str | None], inputs: dict[str, str | None] | None = None,
                  what: str = "rnngap") -> None:
    """Every up-front check of a command's output paths, before any work:
    :func:`check_output_path` on each, then :func:`check_distinct_paths`."""
    for opt, path in outputs.items():
        if path is not None:
            check_output_path(path, f"{what} {opt}")
    check_distinct_paths(outputs, inputs, what)


@contextmanager
def atomic_output(path: str, mode: str = "w", *, what: str = "rnngap", encoding: str | None = None):
    """Open ``path`` for writing, atomically: the only way rnngap writes a file.

    Yields a file object on a temporary file in the target's directory; when the
    block ends normally the file is flushed, fsynced and moved onto ``path``
    with :func:`os.replace` (so a reader sees the old file or the whole new one,
    never a part); if the block raises (any exception, KeyboardInterrupt
    included) the temporary file is removed and ``path`` is untouched. A
    symlink is followed (its target is replaced, the link kept). A ``path``
    that exists and is not a regular file (a FIFO, a terminal), or any path
    under ``/dev/`` or ``/proc/`` (``/dev/stdout`` redirected by a shell to a
    regular file must stay that open file), is written in place: there is
    nothing to replace atomically. An OSError while writing
    becomes :class:`UsageError` ("cannot write PATH: reason").

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_output(str(d / "x.txt")) as fh:
    ...     _ = fh.write("whole")
    >>> (d / "x.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('whole', ['x.txt'])
    """
    if "w" not in mode or "+" in mode or "a" in mode:
        raise ValueError(f"atomic_output writes a whole file: mode 'w' or 'wb', got {mode!r}")
    if encoding is None and "b" not in mode:
        encoding = "utf-8"
    target = os.path.realpath(path)
    special = os.path.abspath(path).startswith(("/dev/", "/proc/"))   # /dev/stdout may resolve to a
    if special or (os.path.exists(target) and not os.path.isfile(target)):  # file a shell redirected to
        try:
            fh = open(target, mode, encoding=encoding)
        except OSError as e:
            raise UsageError(f"{what}: cannot write {path}: {e.strerror or e}") from None
        try:
            with fh:
                yield fh
        except OSError as e:
            raise UsageError(f"{what}: cannot write {path}: {e.strerror or e}") from None
        return
    directory = os.path.dirname(target) or "."
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".part")
    except OSError as e:
        raise UsageError(f"{what}: cannot write {path}: {e.strerror or e}") from None
    ok = False
    try:
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
        ok = True
    except OSError as e:
        raise UsageError(f"{what}: cannot write {path}: {e.strerror or e}") from None
    finally:
        if not ok:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
