"""Errors of the command line (in their own module so that ``python -m
checks.cli`` and ``checks.cli.main`` share one class), the up-front checks of the
paths a command will write (so that bad usage is reported before any long run
rather than after it, and no output overwrites an input),
:class:`Outputs` / :func:`atomic_output`, the one way a command writes a file,
and the limits on what an input may cost (:func:`memory_budget`,
:func:`open_input` for pipes and FIFOs, worker counts).

Output paths (:func:`check_output_path`, before any work):

Details: docs/internals/commands.md#errors.
"""
from __future__ import annotations

import argparse
import errno
import io
import os
import secrets
import stat
import sys
import threading
from contextlib import contextmanager


class UsageError(Exception):
    """Bad usage or input: the CLI prints one line and exits with code 2."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP (its number the argument), turned into an exception by
    the CLI (exit 143 / 129) so that every ``finally`` runs and no temporary
    file is left behind."""


EXCERPT = 120
"""Characters of an input quoted in a message, at most (:func:`excerpt`)."""

PATH_MAX = 4096
"""Longest path (bytes) an output may have (Linux's PATH_MAX)."""

STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
STDERR_NAMES = ("/dev/stderr", "/dev/fd/2", "/proc/self/fd/2")


def excerpt(value, limit: int = EXCERPT) -> str:
    """``repr`` of a piece of input, cut to about ``limit`` characters with the
    total length named, so that a message never echoes megabytes.

    >>> excerpt("ab")
    "'ab'"
    >>> excerpt("x" * 1000, limit=10)
    "'xxxxxxxxxx'... (1,000 characters)"
    """
    s = value if isinstance(value, str) else str(value)
    if len(s) <= limit:
        return repr(s)
    return f"{s[:limit]!r}... ({len(s):,} characters)"


def one_line(message: str, limit: int = 5 * EXCERPT) -> str:
    """``message`` on one line and at most about ``limit`` characters (the middle
    elided): the last guard before stderr.

    >>> one_line("a\\nb")
    'a b'
    >>> len(one_line("y" * 10_000)) < 1000
    True
    """
    s = " ".join(str(message).splitlines())
    if len(s) > limit:
        s = f"{s[:limit - 60]} ...[{len(s) - limit + 40:,} characters omitted]... {s[-20:]}"
    return s


def shown(path) -> str:
    """A path as a message names it: as is, or cut like :func:`excerpt` when long."""
    p = str(path)
    return p if len(p) <= 3 * EXCERPT else excerpt(p)


def stream_of(path: str):
    """``sys.stdout`` / ``sys.stderr`` if ``path`` names one of them, else None."""
    p = str(path)
    if p in STDOUT_NAMES:
        return sys.stdout
    if p in STDERR_NAMES:
        return sys.stderr
    return None


def report_stream(out: str | None):
    """Where a command's summary line goes: stderr when ``out`` (its --out) is
    stdout, so the summary never mixes into the written data; else stdout."""
    return sys.stderr if out is not None and stream_of(out) is sys.stdout else sys.stdout


def name_max(directory: str) -> int:
    """Longest file name (bytes) in ``directory`` (255 where the file system does not say)."""
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def os_reason(e: OSError) -> str:
    return {errno.ELOOP: "too many levels of symbolic links (a symlink loop?)",
            errno.ENOTDIR: "a component of the path is not a directory",
            errno.ENAMETOOLONG: "file name too long"}.get(e.errno, e.strerror or str(e))


def check_output_path(path: str, what: str) -> None:
    """Raise :class:`UsageError` unless ``path`` can name a file to be written.

    ``what`` prefixes the message (e.g. ``"verify --json"``); the list of what
    is checked is in the module docstring. (Whether the write then succeeds is
    still checked when it happens: the disk may fill up meanwhile.)

    >>> check_output_path("/", "verify --json")
    Traceback (most recent call last):
    ...
    rnngap.checks.io.errors.UsageError: verify --json: cannot write /: it is a directory
    """
    p = str(path)
    if not p:
        raise UsageError(f"{what}: the output path is empty")
    if "\0" in p:
        raise UsageError(f"{what}: cannot write {shown(p)}: the path contains a NUL byte")
    if stream_of(p) is not None:
        return
    if len(os.fsencode(os.path.abspath(p))) >= PATH_MAX:
        raise UsageError(f"{what}: cannot write {shown(p)}: path longer than {PATH_MAX - 1} bytes")
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"{what}: cannot write {shown(p)}: {os_reason(e)}") from None
    fd = _descriptor(p)
    if fd is not None and st is None:
        raise UsageError(f"{what}: cannot write {shown(p)}: file descriptor {fd} is not open")
    if st is not None:
        mode = st.st_mode
        if stat.S_ISREG(mode) and not os.access(p, os.W_OK):
            raise UsageError(f"{what}: cannot write {shown(p)}: the file is read-only for you (mode "
                             f"{stat.S_IMODE(mode):04o}); make it writable or remove it")
        if stat.S_ISDIR(mode):
            raise UsageError(f"{what}: cannot write {path}: it is a directory")
        if stat.S_ISSOCK(mode):
            raise UsageError(f"{what}: cannot write {path}: it is a socket")
        if stat.S_ISBLK(mode):
            raise UsageError(f"{what}: cannot write {path}: it is a block device")
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            if not os.access(p, os.W_OK):
                raise UsageError(f"{what}: cannot write {path}: permission denied")
            return                                       # written in place
    if p.endswith(os.sep) or os.path.basename(p) in (".", ".."):
        raise UsageError(f"{what}: cannot write {shown(p)}: a trailing '/' names a directory, not a file")
    target = os.path.realpath(p)
    parent = os.path.dirname(target)
    parent = parent or "."
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise UsageError(f"{what}: cannot write {path}: directory {parent} does not exist") from None
    except OSError as e:
        raise UsageError(f"{what}: cannot write {shown(p)}: {os_reason(e)}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise UsageError(f"{what}: cannot write {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: cannot write {path}: directory {parent} is not writable")
    # a name longer than the file system takes failed os.stat above (ENAMETOOLONG)


def _descriptor(path: str) -> int | None:
    """N if ``path`` is /dev/fd/N or /proc/self/fd/N, else None."""
    for head in ("/dev/fd/", "/proc/self/fd/"):
        if path.startswith(head) and path[len(head):].isascii() and path[len(head):].isdigit():
            return int(path[len(head):])
    return None


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
    rnngap.checks.io.errors.UsageError: precision: --json and --out name the same file a.png
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
    path). Devices, pipes and the standard streams are never "the same file":
    ``--inputs /dev/stdin --out /dev/stdout`` on one terminal loses nothing."""
    if stream_of(a) is not None or stream_of(b) is not None:
        return False
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.isfile(a) and os.path.isfile(b) and os.path.samefile(a, b)
    except (OSError, ValueError):
        pass
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return a == b


def check_outputs(outputs: dict[str, str | None], inputs: dict[str, str | None] | None = None,
                  what: str = "rnngap") -> None:
    """Every up-front check of a command's output paths, before any work:
    :func:`check_output_path` on each, then :func:`check_distinct_paths`."""
    for opt, path in outputs.items():
        if path is not None:
            check_output_path(path, f"{what} {opt}")
    check_distinct_paths(outputs, inputs, what)


def _temp_name(name: str, limit: int) -> str:
    """``.NAME.XXXXXXXX.part`` within ``limit`` bytes: NAME cut (at a character
    boundary) as much as needed."""
    suffix = f".{secrets.token_hex(4)}.part"
    room = limit - 1 - len(suffix)
    raw = os.fsencode(name)
    if len(raw) > room:
        raw = raw[:max(room, 0)]
        name = raw.decode("utf-8", "ignore") if isinstance(name, str) else name
        while len(os.fsencode(name)) > room:
            name = name[:-1]
    return f".{name}{suffix}"


class _Staged:
    """One output of :class:`Outputs`: a temporary file ("file") or a buffer ("memory")."""

    def __init__(self, path: str, what: str):
        self.path, self.what, self.stream = str(path), what, stream_of(path)
        self.kind, self.fh, self.dir_fd, self.tmp, self.target_name, self.buffer = "file", None, None, None, "", None
        self.mode, self.links = None, 1        # an existing target's permission bits and link count


class Outputs:
    """Several output files written all or nothing.

    ``open(path, mode)`` returns a file object on a temporary file in the
    target's directory (or an in-memory buffer for a stream, a FIFO or a
    device). When the ``with`` block ends normally, the buffers of the
    streams and devices are written first (they cannot be taken back), then
    every temporary file is flushed, fsynced and moved onto its target with
    :func:`os.replace` (a reader sees the old file or the whole new one). If the
    block raises (any exception, KeyboardInterrupt and :class:`Terminated`
    included) or a write fails, every temporary file is removed and no target
    is touched. A symlink is followed (its target is replaced, the link kept).
    An OSError becomes :class:`UsageError` ("cannot write PATH: reason").
    """

    def __init__(self):
        self._staged: list[_Staged] = []

    def __enter__(self) -> "Outputs":
        return self

    def open(self, path: str, mode: str = "w", *, what: str = "rnngap", encoding: str | None = None):
        if "w" not in mode or "+" in mode or "a" in mode:
            raise ValueError(f"atomic_output writes a whole file: mode 'w' or 'wb', got {mode!r}")
        binary = "b" in mode
        if encoding is None and not binary:
            encoding = "utf-8"
        s = _Staged(path, what)
        try:
            st = os.stat(s.path) if s.stream is None else None
        except OSError:
            st = None
        in_place = os.path.abspath(s.path).startswith(("/dev/", "/proc/"))   # /dev/fd/N: the open descriptor
        if s.stream is not None or in_place or (st is not None and not stat.S_ISREG(st.st_mode)):
            s.kind = "memory"                      # a stream, FIFO or device: written at commit
            s.buffer = io.BytesIO()
            s.fh = s.buffer if binary else io.TextIOWrapper(s.buffer, encoding=encoding, write_through=True)
            self._staged.append(s)
            return s.fh
        target = os.path.realpath(s.path)
        directory, s.target_name = os.path.split(target)
        if st is not None:                         # replacing a file: it keeps its permissions
            s.mode, s.links = stat.S_IMODE(st.st_mode), st.st_nlink
        try:
            s.dir_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY)
            limit = name_max(directory or ".")
            while True:
                s.tmp = _temp_name(s.target_name, limit)
                try:
                    fd = os.open(s.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=s.dir_fd)
                    break
                except FileExistsError:
                    continue
        except OSError as e:
            self._discard(s)
            raise UsageError(f"{what}: cannot write {shown(s.path)}: {os_reason(e)}") from None
        self._staged.append(s)
        s.fh = os.fdopen(fd, mode, encoding=encoding)
        return s.fh

    @staticmethod
    def _discard(s: _Staged) -> None:
        if s.kind == "file":
            try:
                if s.fh is not None:
                    s.fh.close()
            except OSError:
                pass
            s.fh = None
            if s.tmp is not None and s.dir_fd is not None:
                try:
                    os.unlink(s.tmp, dir_fd=s.dir_fd)
                except OSError:
                    pass
        if s.dir_fd is not None:
            try:
                os.close(s.dir_fd)
            except OSError:
                pass
            s.dir_fd = None

    def abort(self) -> None:
        """Remove every temporary file; no target is touched."""
        staged, self._staged = self._staged, []
        for s in staged:
            self._discard(s)

    def commit(self) -> None:
        current = None
        try:
            for s in self._staged:                 # first what cannot be taken back
                if s.kind == "memory":
                    current = s
                    self._emit(s)
            for s in self._staged:                 # every file complete on disk ...
                if s.kind == "file":
                    current = s
                    s.fh.flush()
                    os.fsync(s.fh.fileno())
                    os.fchmod(s.fh.fileno(), 0o666 & ~_umask() if s.mode is None else s.mode)
                    s.fh.close()
                    s.fh = None
            for s in self._staged:                 # ... before any is moved into place
                if s.kind == "file":
                    current = s
                    os.replace(s.tmp, s.target_name, src_dir_fd=s.dir_fd, dst_dir_fd=s.dir_fd)
                    s.tmp = None
                    if s.links > 1:
                        _note(f"{s.what}: {shown(s.path)} had {s.links} hard links; it is replaced, the "
                              "other names keep the old content")
        except OSError as e:
            what, path = (current.what, current.path) if current else ("rnngap", "?")
            raise UsageError(f"{what}: cannot write {shown(path)}: {os_reason(e)}") from None
        finally:                                   # any exception (a signal too): the temporaries go;
            self.abort()                           # after success this only closes the directories

    @staticmethod
    def _emit(s: _Staged) -> None:
        data = s.buffer.getvalue()
        if s.stream is not None:
            s.stream.flush()
            out = getattr(s.stream, "buffer", None)
            if out is None:                        # a text-only stream (e.g. io.StringIO in tests)
                s.stream.write(data.decode("utf-8", "replace"))
            else:
                out.write(data)
                out.flush()
            return
        with open(s.path, "wb") as fh:             # a FIFO or a device, in place
            fh.write(data)

    def __exit__(self, kind, value, tb) -> bool:
        if kind is None:
            self.commit()
        else:
            self.abort()
        return False


@contextmanager
def atomic_output(path: str, mode: str = "w", *, what: str = "rnngap", encoding: str | None = None):
    """Open ``path`` for writing, atomically: one :class:`Outputs` with one file.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_output(str(d / "x.txt")) as fh:
    ...     _ = fh.write("whole")
    >>> (d / "x.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('whole', ['x.txt'])
    """
    with Outputs() as outs:
        fh = outs.open(path, mode, what=what, encoding=encoding)
        try:
            yield fh
        except OSError as e:
            raise UsageError(f"{what}: cannot write {shown(path)}: {os_reason(e)}") from None


def _note(message: str) -> None:
    """One ``rnngap: note:`` line on stderr (never raising: stderr may be closed)."""
    try:
        print(f"rnngap: note: {message}", file=sys.stderr)
    except (OSError, ValueError):
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def worker_cap() -> int:
    """The most worker processes a command takes: 4 x the cores of this machine."""
    return 4 * max(1, os.cpu_count() or 1)


def worker_count(text: str, what: str = "--workers") -> int:
    """A worker count: plain ASCII digits, 1..:func:`worker_cap`; else a UsageError of
    one line (the value shown at most 40 characters long).

    >>> worker_count("2")
    2
    >>> worker_count("²")
    Traceback (most recent call last):
    ...
    rnngap.checks.io.errors.UsageError: --workers must be a whole number (ASCII digits), got '²'
    """
    s = str(text).strip()
    if not s or len(s) > 6 or not all("0" <= ch <= "9" for ch in s):
        shown_ = s if len(s) <= 40 else s[:37] + "..."
        if s and all("0" <= ch <= "9" for ch in s):
            raise UsageError(f"{what} must be >= 1 and <= {worker_cap()} (4 x the cores), got a {len(s)}-digit number")
        raise UsageError(f"{what} must be a whole number (ASCII digits), got {shown_!r}")
    n = int(s)
    if not 1 <= n <= worker_cap():
        raise UsageError(f"{what} must be >= 1 and <= {worker_cap()} (4 x the cores), got {n}")
    return n


def worker_arg(text: str) -> int:
    """:func:`worker_count` as an argparse ``type`` (exit 2 with one line)."""
    try:
        return worker_count(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


MEMORY_ENV = "RNNGAP_MEMORY_BUDGET"
"""The environment variable that sets :func:`memory_budget` (bytes, or a number
with the suffix K, M, G or T: binary multiples)."""

_SUFFIX = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


def physical_memory() -> int:
    """This machine's memory in bytes (4 GiB where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2 ** 30


def memory_budget() -> int:
    """The most memory an input may make a command use: $RNNGAP_MEMORY_BUDGET, else
    half of this machine's memory; a bad setting is a UsageError of one line.

    >>> os.environ[MEMORY_ENV] = "2G"; memory_budget() == 2 * 2 ** 30
    True
    >>> del os.environ[MEMORY_ENV]
    """
    text = os.environ.get(MEMORY_ENV, "").strip()
    if not text:
        return physical_memory() // 2
    digits, suffix = (text[:-1], text[-1].upper()) if text[-1].upper() in _SUFFIX else (text, "")
    if not digits or len(digits) > 15 or not all("0" <= ch <= "9" for ch in digits) or int(digits) == 0:
        raise UsageError(f"${MEMORY_ENV} must be a positive whole number of bytes, optionally with K, M, G "
                         f"or T, got {excerpt(text, 40)}")
    return int(digits) * _SUFFIX[suffix]


def size_text(n: int) -> str:
    """Bytes as a person reads them (``1.5 GiB``); any Python int, however large."""
    if n >= 2 ** 70:
        return f"more than 2^{n.bit_length() - 1} bytes"
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def check_memory(need: int, what: str) -> None:
    """A UsageError of one line, before any work, if ``need`` bytes (an estimate of
    what ``what`` would hold at once) exceed :func:`memory_budget`."""
    budget = memory_budget()
    if need > budget:
        need_text = size_text(need)
        need_text = need_text if need_text.startswith("more") else "about " + need_text
        raise UsageError(f"{what} would need {need_text} of memory, over the budget of "
                         f"{size_text(budget)} (set ${MEMORY_ENV}, e.g. 16G, to change it)")


OPEN_TIMEOUT = 30.0
"""Seconds an input that is not a regular file (a FIFO, a terminal) may take to
open: a FIFO nothing writes to would otherwise block ``open`` forever."""

STREAM_BYTES = 256 * 2 ** 20
"""Most bytes read from an input that is not a regular file (a pipe, a FIFO):
an endless stream is refused instead of filling the memory."""


def open_input(path: str, what: str, timeout: float | None = None):
    """``(binary file, bytes cap)`` for the input at ``path``: a regular file as is
    (its size the cap), anything else opened within ``timeout`` seconds and
    capped at :data:`STREAM_BYTES` (``timeout`` None: :data:`OPEN_TIMEOUT`). A
    UsageError of one line otherwise."""
    timeout = OPEN_TIMEOUT if timeout is None else timeout
    try:
        st = os.stat(path)
    except OSError as e:
        raise UsageError(f"{what}: cannot read {shown(path)}: {os_reason(e)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what}: cannot read {shown(path)}: it is a directory")
    if stat.S_ISREG(st.st_mode):
        try:
            return open(path, "rb"), st.st_size
        except OSError as e:
            raise UsageError(f"{what}: cannot read {shown(path)}: {os_reason(e)}") from None
    box: dict = {}

    def opener() -> None:
        try:
            box["fh"] = open(path, "rb")
        except OSError as e:
            box["error"] = e
    t = threading.Thread(target=opener, daemon=True, name="open-input")
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise UsageError(f"{what}: {shown(path)} did not open within {timeout:.0f} s (a FIFO nothing writes to?)")
    if "error" in box:
        raise UsageError(f"{what}: cannot read {shown(path)}: {os_reason(box['error'])}") from None
    return box["fh"], STREAM_BYTES


def text_arg(value: str) -> str:
    """An option value that names text (a JSON field), as the user typed it: under
    a C or POSIX locale Python decodes argv bytes with surrogate escapes, so a
    non-ASCII name arrives as ``'t\\udcc3\\udca9xt'``; those bytes are read as
    UTF-8 again (a value that is not UTF-8 is kept as it came).

    >>> text_arg("t\\udcc3\\udca9xt") == "t\\u00e9xt"
    True
    """
    if not any("\udc80" <= ch <= "\udcff" for ch in value):
        return value
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return value
