"""Errors of the command line (in their own module so that ``python -m
checks.cli`` and ``checks.cli`` share one class)."""


class UsageError(Exception):
    """Bad usage or input: the CLI prints one line and exits with code 2."""
