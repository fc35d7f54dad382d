"""The exported PyTorch module against the exact machine: every prefix of a run, and the float breaking point.

:func:`transcript` runs the exact machine on a prompt as the construction
runs (greedy CoT until an answer token, the in-context RAG oracle for a RAG
model, the Turing machine's word for a TM model) and returns the whole
context. :func:`compare_prefixes` takes such contexts and checks, at every
position, that the exported module's argmax is the machine's next token at
that prefix: the answer, every CoT token, and the positions where the oracle
wrote (the RNN's own prediction there). :func:`torch_generate` runs the
exported RNN with the oracle in Python, closed loop. :func:`compare` is the
check on the Index reduction's family at m Index bits (every instance up to
:data:`EXHAUSTIVE_BITS`, seeded samples above), and :func:`breaking_point`
searches the smallest m at which a dtype first answers wrong (doubling, then
bisection) and re-runs the failing instance.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from rnngap.constructions.build.generate import Generation, drive, generate
from rnngap.constructions.build.model import Model
from rnngap.constructions.models.rag_models import RagConstruction
from rnngap.constructions.models.turing import HybridTM, RagTM
from rnngap.constructions.machine.vocab import FALSE, TRUE
from rnngap.checks.catalog.records import by_name
from rnngap.checks.tasks import hard, task

from .bundle import bundle
from .torch_model import module

EXHAUSTIVE_BITS = 8
"""Up to this many Index bits every instance of the image is run; above, samples."""
FREE_RUN = 512
"""A CoT model with no position bound runs at most this many tokens past its prompt."""
RUNS_ITSELF = (RagConstruction, HybridTM, RagTM)
"""The constructions whose ``run(prompt)`` is their whole run (the RAG oracle, the TM's word)."""


@dataclass
class Comparison:
    name: str
    m: int
    """The Index bits of :func:`compare` (0 for :func:`compare_prefixes`' contexts)."""
    n: int
    instances: int
    mismatches: int
    first: list | None = None
    """The first instance (its tokens) the two answer differently on, or None."""
    positions: int = 0
    """Positions compared (by :func:`compare_prefixes`; the answer alone by :func:`compare`)."""


def transcript(built: object, model: Model, prompt: Sequence[int] | str,
               answers: Sequence[int] | None = (TRUE, FALSE)) -> list[int]:
    """The whole context of the exact machine's run on ``prompt``: prompt, CoT
    (oracle tokens included) and answer. A RAG construction, or a Turing-machine
    one (``prompt`` then the word), runs with its own ``run``; any other model
    greedily (constructions/build/generate.py) until a token of ``answers`` (None:
    no CoT, the next token is the answer), within :data:`FREE_RUN` CoT tokens and
    the model's positions."""
    if isinstance(built, RUNS_ITSELF):
        g = built.run(prompt)
        g = g[0] if isinstance(g, tuple) else g       # a RagTM returns (generation, oracle)
    else:
        prompt = [int(t) for t in prompt]
        room = FREE_RUN if model.max_positions is None else min(FREE_RUN, model.max_positions - len(prompt) - 1)
        g = generate(model, prompt, answer_tokens=answers, max_cot=max(room, 0))
    return g.context + ([g.answer] if g.answer is not None else [])


def machine_predictions(model: Model, context: Sequence[int]) -> np.ndarray:
    """The exact machine's next token after every prefix context[:t + 1]."""
    sess = model.session(capacity=len(context) + 1)
    out = np.empty(len(context), dtype=np.int64)
    for t, tok in enumerate(context):
        sess.feed_one(int(tok))
        out[t] = sess.next_token()
    return out


def module_predictions(tm, context: Sequence[int]) -> np.ndarray:
    """The exported module's argmax at every position (ties to the smallest id)."""
    with torch.no_grad():
        return torch.argmax(tm(torch.tensor(list(context), dtype=torch.long)), dim=1).numpy()


def compare_prefixes(name: str, n: int, model: Model, contexts: Sequence[Sequence[int]], dtype: str = "float64",
                     grid: bool = True) -> Comparison:
    """At every position of every context but its last token (the answer): the
    exported module's argmax against the machine's next token there."""
    tm = module(bundle(model, name=name, n=n), dtype, grid)
    bad, first, positions = 0, None, 0
    for whole in contexts:
        ctx = list(whole)[:-1]
        want, got = machine_predictions(model, ctx), module_predictions(tm, ctx)
        positions += len(ctx)
        wrong = np.flatnonzero(want != got)
        if len(wrong):
            bad += 1
            if first is None:
                first = [int(t) for t in ctx[:wrong[0] + 1]]
    return Comparison(name, 0, n, len(contexts), bad, first, positions)


class ModuleSession:
    """A session over the exported module (``feed``, ``feed_one``, ``next_token``, as
    constructions/build/session.py's), so that the machine's generation loop runs it."""

    def __init__(self, tm):
        self.tm, self.tokens = tm, []

    def feed(self, tokens) -> None:
        self.tokens.extend(int(t) for t in tokens)

    def feed_one(self, token: int) -> None:
        self.tokens.append(int(token))

    def next_token(self) -> int:
        return int(module_predictions(self.tm, self.tokens)[-1])


def torch_generate(tm, prompt: Sequence[int], answers: Sequence[int] | None, max_cot: int,
                   oracle: Callable | None = None, answer_after: int | None = None) -> Generation:
    """Greedy generation with the exported module and the oracle (if any) in Python:
    the machine's own loop (constructions/build/generate.py ``drive``) on a
    :class:`ModuleSession`, so it stops exactly where the machine's run would."""
    sess = ModuleSession(tm)
    prompt = [int(t) for t in prompt]
    sess.feed(prompt)
    return drive(sess, prompt, None if answers is None else frozenset(int(a) for a in answers), max_cot, oracle,
                 answer_after, lambda toks: [int(t) for t in toks])


def reduction_model(name: str, m: int) -> tuple[Model, str, int, int]:
    """(model, family, c, n): the record ``name`` built for m Index bits, with the reduction's alphabet."""
    rec = by_name(name)
    spec = task(rec.key.task)
    family, c = spec.family, spec.c or 3
    n = hard.data_length(family, m, c)
    kw = {"alphabet": hard.alphabet(family, m, c)} if "alphabet" in inspect.signature(rec.builder).parameters else {}
    return rec.build(n, **kw).model, family, c, n


def compare(name: str, m: int, dtype: str = "float64", grid: bool = True, samples: int = 64,
            seed: int = 0) -> Comparison:
    """The export of ``name`` against the exact machine at m Index bits (the answers)."""
    model, family, c, n = reduction_model(name, m)
    toks, _ = (hard.reduction_instances(family, m, c) if m <= EXHAUSTIVE_BITS
               else hard.sampled_reduction_instances(np.random.default_rng(seed), family, m, samples, c))
    exact = model.predict_batch(toks)
    tm = module(bundle(model, name=name, n=n), dtype, grid)
    got = np.array([tm.predict(torch.from_numpy(np.ascontiguousarray(row))) for row in toks])
    bad = np.flatnonzero(got != exact)
    return Comparison(name, m, n, int(len(toks)), int(len(bad)), [int(t) for t in toks[bad[0]]] if len(bad) else None,
                      int(len(toks)))


def breaking_point(name: str, dtype: str, grid: bool = True, m_max: int = 1024, seed: int = 0) -> Comparison | None:
    """The comparison at the smallest m (a power-of-two search: doubling, then
    bisection) at which the ``dtype`` export first answers wrong, or None if it
    agrees with the machine up to ``m_max``. The failing instance is re-run on
    its own (the module, then the machine) before it is reported."""
    lo, hi, m = 0, None, 1
    while m <= m_max:
        if compare(name, m, dtype, grid, seed=seed).mismatches:
            hi = m
            break
        lo, m = m, 2 * m
    if hi is None:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if compare(name, mid, dtype, grid, seed=seed).mismatches:
            hi = mid
        else:
            lo = mid
    found = compare(name, hi, dtype, grid, seed=seed)
    model, _, _, n = reduction_model(name, hi)
    again = module(bundle(model, name=name, n=n), dtype, grid).predict(torch.tensor(found.first, dtype=torch.long))
    if again == model.predict(found.first):
        raise RuntimeError(f"{name} {dtype}: the failing instance at m={hi} agrees when re-run alone")
    return found
