"""Seeded example prompts, one maker per task: ``make(n, rng)`` -> a list of token codes.

``rnngap show`` prints a record's example and the benchmarks time models on
them; each maker draws from the task's own generator (checks/tasks/) with the
generator ``rng`` it is given.
"""
from __future__ import annotations

from rnngap.constructions.models import cot_hierarchy, retrieval, turing
from rnngap.constructions.models import istree as istree_model
from rnngap.checks.io.formats import graph_tokens
from rnngap.checks.tasks import ar, cgram, counting, index, istree

from .schema import ints


def index_example(n, rng, alphabet=2):
    return ints(index.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def count_example(n, rng):
    return ints(counting.generate(rng, n, 1, threshold="near").tokens[0])


def ar_example(alphabet):
    return lambda n, rng: ints(ar.generate(rng, n, 1, alphabet=alphabet).tokens[0])


def cgram_example(n, rng):
    return ints(cgram.generate(rng, n, 1, alphabet=2, c=3).tokens[0])


def istree_example(n, rng):
    """The IsTree Transformer's prompt (constructions/models/istree.py) of a random tree."""
    return istree_model.prompt_tokens(istree.random_tree(rng, max(n, 2)).edges)


def graph_example(n, rng):
    """The edge-list prompt of a random tree (checks/io/formats.py)."""
    return graph_tokens(istree.random_tree(rng, max(n, 2)).edges)


def prev_example(n, rng):
    return [0] + ints(rng.integers(0, 2, n) + 32)


def mqar_example(n, rng):
    return ints(retrieval.mqar_tokens(rng.integers(0, 4, (1, n)))[0])


def tm_example(spec):
    """A random input word over the machine's input alphabet, encoded as its prompt."""
    def make(n, rng):
        enc = turing.Encoding.of(spec.build())
        syms = sorted(enc.dtm.input_symbols)
        return enc.prompt("".join(syms[int(i)] for i in rng.integers(0, len(syms), n)))
    return make


def iterate_example(n, rng):
    m, T = cot_hierarchy.modulus(n), cot_hierarchy.steps(n)
    return cot_hierarchy.prompt(n, int(rng.integers(0, m)), int(rng.integers(0, T + 1)),
                                ints(rng.integers(0, m, n)))
