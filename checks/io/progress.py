"""Progress for long commands: a bar on stderr when stderr is a terminal, nothing otherwise.

A command that may run longer than about two seconds (certify, precision,
predict on many inputs, show on a long prompt, the witness search) opens
:class:`Bar` and calls the function it returns with ``(done, total)``. On a
pipe, in a file or with ``quiet`` the bar is a no-op, so scripted output keeps
only the results. The bar is transient: it disappears when the work ends.

>>> import io
>>> with Bar("working", stream=io.StringIO()) as tick:
...     tick(1, 2)                     # not a terminal: nothing is drawn
"""
from __future__ import annotations

import sys
from typing import Callable


def on_terminal(stream) -> bool:
    """True if ``stream`` is a terminal (a closed or odd stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Bar:
    """A rich progress bar labelled ``label`` on ``stream`` (default stderr), drawn
    only on a terminal and without ``quiet``; entering gives ``tick(done, total)``."""

    def __init__(self, label: str, quiet: bool = False, stream=None):
        self.label, self.quiet = label, quiet
        self.stream = sys.stderr if stream is None else stream
        self.bar = None

    def __enter__(self) -> Callable[[int, int | None], None]:
        if self.quiet or not on_terminal(self.stream):
            return lambda done, total=None: None
        from rich.console import Console  # lazy: rich is slow to load and only a terminal needs it
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        console = Console(file=self.stream)
        self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=console, transient=True)
        self.bar.start()
        task = self.bar.add_task(self.label, total=None)

        def tick(done: int, total: int | None = None) -> None:
            self.bar.update(task, completed=done, total=total)
        return tick

    def __exit__(self, *exc) -> bool:
        if self.bar is not None:
            self.bar.stop()
        return False
