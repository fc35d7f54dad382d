"""One spec per task: what a task is, in one place, read by every check and by
the ``cc``, ``witness`` and ``predict`` commands (no other module keeps a map
from task names to references, reductions or alphabets).

A :class:`TaskSpec` names the task (its canonical name, the ``task`` field of
every ``rnngap verify --json`` record about it), says what it is, and holds its
plain-Python reference, its instance generator and enumerator, the lower bound's
reduction from Index and the alphabet that reduction writes as a function of the
Index length n. The specs live in the task modules (``SPEC``) and are collected
by :mod:`checks.tasks` (``TASKS``, :func:`checks.tasks.task`).

This module imports nothing from ``rnngap.constructions`` beyond the token
conventions (tasks are the bottom of the dependency order: checks ->
constructions, lowerbounds -> tasks).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

NO_TASK = "-"
"""The ``task`` of a record that is about no task (fixed-point arithmetic, a
declaration, a gadget, an error row)."""


@dataclass(frozen=True)
class TaskSpec:
    """What one task is.

    * ``name``: canonical name (``index``, ``ar``, ``cgram(c=3)``, ...);
    * ``description``: one line, what the task asks;
    * ``reference``: the plain-Python answer of an instance (tokens -> answer
      token; IsTree also takes ``n_nodes``, see :meth:`reference_at`); None for a
      task with no single reference (a Turing machine's run depends on the machine);
    * ``generate`` / ``enumerate_all``: ``(rng, n, batch, alphabet)`` /
      ``(n, alphabet)`` -> instances, with ``kwargs`` bound (e.g. c-gram's c);
    * ``reduction``: the lower bound's reduction from Index
      (``lowerbounds.reductions.Reduction``) or None;
    * ``reduction_alphabet``: Index length n -> the data alphabet the reduction
      writes (numbers 0..a-1 occur among the data), or None;
    * ``data_length``: Index length n -> the task's n for the reduction's data;
    * ``cc_split``: ``(n, alphabet)`` -> the task's Alice/Bob split
      (``lowerbounds.cc.CommProblem``) under this reference, or None;
    * ``family``: the task family (``cgram`` for every c), ``c`` its gram length;
    * ``min_n``, ``default_alphabet``;
    * ``aliases``: other names the CLI and :func:`checks.tasks.task` accept;
    * ``predict`` / ``predict_help``: the ``rnngap predict`` subcommand that runs
      this task (module ``checks/predict_<predict>.py``), or None.
    """

    name: str
    description: str
    reference: Callable[..., Any] | None
    generate: Callable[..., Any] | None = None
    enumerate_all: Callable[..., Any] | None = None
    reduction: Any = None
    reduction_alphabet: Callable[[int], int] | None = None
    data_length: Callable[[int], int] | None = None
    cc_split: Callable[[int, int], Any] | None = None
    family: str = ""
    c: int | None = None
    min_n: int = 1
    default_alphabet: int | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    predict: str | None = None
    predict_help: str | None = None
    reduction_nodes: Callable[[int], int] | None = None
    """IsTree: Index length n -> the vertex count N of the reduction's graphs."""

    def key(self) -> str:
        """The canonical name (the ``task`` of records about this task)."""
        return self.name

    def reference_at(self, n: int | None = None, *, n_nodes: int | None = None) -> Callable[[Any], Any]:
        """The reference as tokens -> answer. IsTree needs the vertex count: given
        ``n_nodes``, or the reduction's at Index length ``n``."""
        if self.reference is None:
            raise ValueError(f"task {self.name!r} has no plain-Python reference")
        if self.reduction_nodes is None:
            return self.reference
        if n_nodes is None:
            if n is None:
                raise ValueError(f"task {self.name!r}: the reference needs n or n_nodes")
            n_nodes = self.reduction_nodes(n)
        return partial(self.reference, n_nodes=n_nodes)

    def reduction_reference(self, n: int) -> Callable[[Any], Any]:
        """The reference on the reduction's instances at Index length n."""
        return self.reference_at(n)
