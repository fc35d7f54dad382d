"""Errors of the command line (in their own module so that ``python -m
checks.cli`` and ``checks.cli`` share one class), and the up-front checks of
the paths a command will write, so that bad usage is reported before any long
run rather than after it."""
from __future__ import annotations

import os
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
    checks.errors.UsageError: verify --json: cannot write /: it is a directory
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
