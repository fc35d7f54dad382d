"""The one catalogue of constructions, keyed by (claim, task, architecture).

Every builder in constructions/ is named ``<task>_<architecture>`` (the key's
task and architecture with ``-`` spelled ``_``: ``tm_hybrid`` serves every
``tm-<machine>`` key, its first argument the machine), with ``alphabet=`` and ``c=`` keyword-only; this
module lists each once, with

* ``builder``: the construction's own function (``where`` gives its
  ``file:function``), called with the entry's ``defaults`` and the caller's
  keywords;
* ``example``: a seeded example prompt maker ``(n, rng) -> list[int]``;
* ``about``: a one-line description;
* ``certificates``: the names in :data:`constructions.obligations.CONSTRUCTIONS`
  that ``rnngap certify`` proves for this builder (empty: not certified, and the
  construction claims' exceptions are listed in :data:`UNCERTIFIED` with why).

Uniform interface (the builders themselves return different types: ``Model``,
``RagConstruction``, ``HybridTM``, ``RagTM``, ``RNNSimulator``; they are not
rewritten): ``entry.build(n, **kw)`` returns a :class:`Built` with ``.name``,
``.model`` (always a ``Model``) and ``.construction`` (what the builder
returned, e.g. the ``RagConstruction`` with its oracle). Used by ``rnngap show``
(:func:`names`, :func:`by_name`), the registry's checks that build retrieval
models by task (checks_separation.py, checks_hybrid.py), the benchmarks and the
tests; tests/test_catalog.py checks it against ``rnngap certify``.

    >>> e = CATALOG[Key("T4.6-up", "index", "transformer")]
    >>> e.name, e.where
    ('index-transformer', 'constructions/retrieval.py:index_transformer')
    >>> b = e.build(4)
    >>> b.model.kind, b.construction is b.model
    ('transformer', True)
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from rnngap.constructions import cot_hierarchy, demos, hybrid, rag_models, retrieval, simulate, turing
from rnngap.constructions import istree as istree_model
from rnngap.constructions.model import Model

from .formats import graph_tokens
from .tasks import ar, cgram, counting, index, istree


class Key(NamedTuple):
    claim: str
    task: str
    architecture: str


@dataclass(frozen=True)
class Built:
    name: str
    model: Model
    construction: Any


def _model_of(obj) -> Model:
    return obj if isinstance(obj, Model) else obj.model


@dataclass(frozen=True)
class Entry:
    key: Key
    builder: Callable
    example: Callable[[int, np.random.Generator], list[int]]
    about: str
    certificates: tuple[str, ...] = ()
    defaults: dict = field(default_factory=dict)
    size: Callable[[int], dict] | None = None   # n -> the builder's size arguments (default: (n,))
    args: tuple = ()                            # leading positional arguments (the TM spec)

    @property
    def name(self) -> str:
        return f"{self.key.task}-{self.key.architecture}"

    @property
    def where(self) -> str:
        path = os.path.relpath(inspect.getsourcefile(self.builder), os.path.dirname(os.path.dirname(__file__)))
        return f"{path.replace(os.sep, '/')}:{self.builder.__name__}"

    def build(self, n: int, **kw) -> Built:
        sized = self.size(n) if self.size else {}
        obj = self.builder(*self.args, *(() if self.size else (n,)), **{**self.defaults, **sized, **kw})
        return Built(self.name, _model_of(obj), obj)


# ---------------------------------------------------------------------------- example prompts
def _ints(a) -> list[int]:
    return [int(t) for t in a]


def _index_example(n, rng, alphabet=2):
    return _ints(index.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def _count_example(n, rng):
    return _ints(counting.generate(rng, n, 1, threshold="near").tokens[0])


def _ar_example(alphabet):
    return lambda n, rng: _ints(ar.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def _cgram_example(n, rng):
    return _ints(cgram.generate(rng, n, 1, alphabet=2, c=3).tokens[0])


def _istree_example(n, rng):
    return istree_model.prompt_tokens(istree.random_tree(rng, max(n, 2)).edges)


def _graph_example(n, rng):
    return graph_tokens(istree.random_tree(rng, max(n, 2)).edges)


def _prev_example(n, rng):
    return [0] + _ints(rng.integers(0, 2, n) + 32)


def _mqar_example(n, rng):
    return _ints(retrieval.mqar_tokens(rng.integers(0, 4, (1, n)))[0])


def _tm_example(spec):
    def make(n, rng):
        enc = turing.Encoding.of(spec.build())
        syms = sorted(enc.dtm.input_symbols)
        return enc.prompt("".join(syms[int(i)] for i in rng.integers(0, len(syms), n)))
    return make


def _iterate_example(n, rng):
    m, T = cot_hierarchy.modulus(n), cot_hierarchy.steps(n)
    return cot_hierarchy.prompt(n, int(rng.integers(0, m)), int(rng.integers(0, T + 1)),
                                _ints(rng.integers(0, m, n)))


def _sim_size(n):
    """The T4.1 RNN for n simulated as checks_hierarchy.sim_iterate does."""
    T = cot_hierarchy.steps(n)
    return {"rnn": cot_hierarchy.iterate_rnn(n), "max_prompt": n + 4, "max_rnn_cot": T,
            "state_int_bits": (T + 2 * n + 4).bit_length()}


# ---------------------------------------------------------------------------- the catalogue
_R, _H, _G = "T4.6-up", "T5.6", "T5-RAG"
_ENTRIES: list[Entry] = [
    Entry(Key("gadgets", "position-match", "transformer"), demos.position_match_transformer, _index_example,
          "match head on positions (Index mechanism)"),
    Entry(Key("gadgets", "previous-token", "transformer"), demos.previous_token_transformer, _prev_example,
          "shift head: predicts the token before the last"),
    Entry(Key("gadgets", "count-threshold", "transformer"), demos.count_threshold_transformer, _count_example,
          "BOS counting head + comparison MLP"),
    # T4.6-up: constant-size Transformers for the retrieval tasks
    Entry(Key(_R, "index", "transformer"), retrieval.index_transformer, _index_example,
          "Index Transformer", ("retrieval.index[a=2]", "retrieval.index[a=n+2]")),
    Entry(Key(_R, "ar", "transformer"), retrieval.ar_transformer, _ar_example(4),
          "associative recall", ("retrieval.ar[a=4]", "retrieval.ar[a=n+2]"),
          defaults={"alphabet": 4}),
    Entry(Key(_R, "cgram", "transformer"), retrieval.cgram_transformer, _cgram_example,
          "c-gram retrieval (shown at c = 3)",
          ("retrieval.cgram3[a=2]", "retrieval.cgram3[a=n+2]", "retrieval.cgram4[a=3]", "retrieval.cgram4[a=n+2]"),
          defaults={"alphabet": 2, "c": 3}),
    Entry(Key(_R, "counting", "transformer"), retrieval.counting_transformer, _count_example,
          "Counting Transformer", ("retrieval.counting[a=3]", "retrieval.counting[a=n+1]")),
    Entry(Key(_R, "mqar", "transformer"), retrieval.mqar_transformer, _mqar_example,
          "multi-query AR (every position answers)", ("retrieval.mqar",), size=lambda n: {"length": n}),
    # T4.7-up
    Entry(Key("T4.7-up", "istree", "transformer"), istree_model.istree_transformer, _istree_example,
          "IsTree Transformer (next token = first token of the DFS tour)",
          ("istree-dfs (m <= n+2)", "istree-dfs (any simple graph)"), size=lambda n: {"n_vertices": max(n, 2)}),
    # T5.6: hybrids
    Entry(Key(_H, "index", "hybrid"), hybrid.index_hybrid, _index_example, "hybrid for Index",
          ("hybrid.index",)),
    Entry(Key(_H, "ar", "hybrid"), hybrid.ar_hybrid, _ar_example(2), "hybrid for AR", ("hybrid.ar",)),
    Entry(Key(_H, "cgram", "hybrid"), hybrid.cgram_hybrid, _cgram_example, "hybrid for c-gram (c = 3)",
          ("hybrid.cgram(c=3)",), defaults={"alphabet": 2, "c": 3}),
    Entry(Key(_H, "counting", "hybrid"), hybrid.counting_hybrid, _count_example, "hybrid for Counting",
          ("hybrid.counting",)),
    Entry(Key(_H, "istree", "hybrid"), hybrid.istree_hybrid, _graph_example,
          "hybrid for IsTree (union-find CoT)", ("hybrid.istree",), size=lambda n: {"N": max(n, 2)}),
    # T5-RAG: linear RNN + in-context RAG
    Entry(Key(_G, "index", "rag"), rag_models.index_rag, _index_example, "linear RNN + RAG for Index",
          ("index-rag",)),
    Entry(Key(_G, "ar", "rag"), rag_models.ar_rag, _ar_example(2), "linear RNN + RAG for AR", ("ar-rag",)),
    Entry(Key(_G, "cgram", "rag"), rag_models.cgram_rag, _cgram_example, "linear RNN + RAG for c-gram (c = 3)",
          ("3-gram-rag",), defaults={"alphabet": 2, "c": 3}),
    Entry(Key(_G, "counting", "rag"), rag_models.counting_rag, _count_example,
          "linear RNN + RAG for Counting", ("counting-rag",)),
    Entry(Key(_G, "istree", "rag"), rag_models.istree_rag, _graph_example, "linear RNN + RAG for IsTree",
          ("istree-rag",), size=lambda n: {"n_nodes": max(n, 2)}),
    Entry(Key(_G, "istree", "rag-paper"), rag_models.istree_rag_paper, _graph_example,
          "IsTree in the paper's retrieval-CoT format (its own oracle dialect)", ("istree-rag-paper",),
          size=lambda n: {"n_nodes": max(n, 2)}),
    # T4.1 and sim
    Entry(Key("T4.1", "iterate", "rnn"), cot_hierarchy.iterate_rnn, _iterate_example,
          "RNN with CoT for ITER (iterating the permutation g)", ("iterate-rnn",)),
    Entry(Key("sim", "rnnsim", "transformer"), simulate.rnnsim_transformer, _iterate_example,
          "the Transformer simulating a linear RNN step by step (here the T4.1 RNN for n)",
          size=_sim_size),
]
# T5-hyb-P and T5-RAG: the Turing machines, one entry per machine and architecture
for _m, _spec in turing.MACHINES.items():
    _ENTRIES.append(Entry(Key("T5-hyb-P", f"tm-{_m}", "hybrid"), turing.tm_hybrid, _tm_example(_spec),
                          f"hybrid with CoT simulating the TM {_m!r} ({_spec.describe})",
                          (f"hybrid-tm.{_m}",), args=(_spec,)))
    _ENTRIES.append(Entry(Key(_G, f"tm-{_m}", "rag"), turing.tm_rag, _tm_example(_spec),
                          f"linear RNN + RAG simulating the TM {_m!r}", (f"rag-tm.{_m}",), args=(_spec,)))

CATALOG: dict[Key, Entry] = {e.key: e for e in _ENTRIES}
BY_NAME: dict[str, Entry] = {e.name: e for e in _ENTRIES}
if not len(CATALOG) == len(BY_NAME) == len(_ENTRIES):
    raise RuntimeError("duplicate catalogue key or name")

CONSTRUCTION_CLAIMS = ("T4.6-up", "T4.7-up", "T5-RAG", "T5.6", "T5-hyb-P", "T4.1", "sim")
"""The claims whose upper bounds are constructions; each has a catalogue entry."""

UNCERTIFIED: dict[str, str] = {
    "rnnsim-transformer": "the simulator depends on the RNN it simulates: `rnngap certify` certifies each "
                          "simulator the registry builds (rows sim[...] and 'sim: per-position'), not this "
                          "catalogue entry",
}
"""Construction-claim entries with no ``rnngap certify`` certificate, and why."""


def _retrieval_tasks() -> tuple[str, ...]:
    from .tasks import TASKS
    return tuple(dict.fromkeys(s.family for s in TASKS.values() if s.reduction is not None and s.family != "istree"))


RETRIEVAL_TASKS = _retrieval_tasks()
"""The retrieval tasks by family (index, ar, cgram, counting): the tasks of checks.tasks
with an Index reduction, IsTree excepted; the catalogue's ``cgram`` is c = 3."""


def canonical_task(name: str) -> str:
    """The canonical task name (checks.tasks) of a catalogue entry's task: ``cgram``
    is c-gram with c = 3, ``tm-*`` the Turing-machine task; NO_TASK for the entries
    that solve no task of checks.tasks (the gadgets, the RNN simulator)."""
    from .tasks import NO_TASK, task
    try:
        return task("tm" if name.startswith("tm-") else name).name
    except ValueError:
        return NO_TASK
_ARCH_CLAIM = {"transformer": "T4.6-up", "hybrid": "T5.6", "rag": "T5-RAG"}


def retrieval_model(task: str, architecture: str, n: int, *, alphabet: int, c: int = 3, fmt=None) -> Model:
    """The catalogue's model for a retrieval task (``c`` is passed to c-gram only):
    the uniform call of the registry checks that build by task name."""
    kw = {"alphabet": alphabet, "fmt": fmt, **({"c": c} if task == "cgram" else {})}
    return entry(_ARCH_CLAIM[architecture], task, architecture).build(n, **kw).model


def names() -> list[str]:
    return sorted(BY_NAME)


def by_name(name: str) -> Entry:
    return BY_NAME[name]


def entry(claim: str, task: str, architecture: str) -> Entry:
    return CATALOG[Key(claim, task, architecture)]
