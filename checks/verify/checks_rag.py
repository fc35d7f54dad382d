"""Claim T5-RAG, retrieval tasks and IsTree: constant-size linear RNNs with in-context
RAG (constructions/models/rag_models.py) run with the plain oracle of constructions/models/rag.py
(docs/theory.md §2: every query rendered token by token, never rewritten, no group added).

The evidence is ``family="reduction"``: the image of the Index reductions with
each one's alphabet, exhaustive at small n and seeded with adversarial queries up
to 2^14, one parameter count throughout. ``exhaustive`` / ``random`` rows cover
the easy families; ``paper-format`` rows reproduce the paper's IsTree retrieval
CoT through the dialect (format reproduction, NOT T5-RAG evidence); necessity
rows give the saturate-mode integer-bit frontier. The separation records are
checks/verify/checks_separation.py's. References: the reductions' answers, the task
references of ``checks.tasks``, networkx and
:func:`checks.tasks.istree_rag.plain_cot`.

Details (each family, why there is no oracle-free contrast):
docs/internals/verify.md#checks_rag
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import time
from typing import Callable

import numpy as np

from rnngap.constructions.models.rag_models import (
    RagConstruction, ar_rag, cgram_rag, counting_rag, index_rag, istree_cot_bound, istree_rag, istree_rag_paper,
)
from rnngap.constructions.machine.vocab import FALSE, TRUE
from rnngap.lowerbounds import reductions as LR

from rnngap.checks.io.formats import format_cot_text, graph_tokens, parse_cot_text, parse_graph_tokens
from .necessity import Outcome, classify, necessity_record
from .registry import Record, register
from rnngap.checks.io.shared_data import shared_file
from rnngap.checks.tasks import istree
from rnngap.checks.tasks import task as task_spec
from rnngap.checks.tasks.istree_rag import plain_cot as istree_plain_cot

CLAIM = "T5-RAG"
SAMPLE_NAME = "istree_official_sample.jsonl"

PAPER_NOTE = ("format reproduction through the paper dialect (constructions/models/rag_dialect.py rewrites the "
              "short queries), not T5-RAG evidence")


# ---------------------------------------------------------------------------- running
def _with_model(c: RagConstruction, model) -> RagConstruction:
    return RagConstruction(**{**c.__dict__, "model": model})


def _run_rows(c: RagConstruction, rows, want_cot: Callable | None = None) -> tuple[int, int, int, int, str]:
    """(instances, failures, max CoT, oracle failures, first failure) over ``rows`` of
    (tokens, answer[, key for want_cot]); ``want_cot(key)`` -> the CoT + answer expected."""
    count = bad = cot_max = oracle_bad = 0
    first = ""
    for row in rows:
        toks, ans = row[0], row[1]
        o = c.oracle()
        g = c.run([int(t) for t in toks], oracle=o)
        count += 1
        cot_max = max(cot_max, g.cot_length)
        oracle_bad += len(o.failures())
        wrong = g.answer != ans or g.stopped != "answer"
        if not wrong and want_cot is not None and g.cot + [g.answer] != want_cot(row[2]):
            wrong = True
        if wrong:
            bad += 1
            first = first or (f"n={c.n}: answer {g.answer} vs {ans} ({g.stopped})"
                              + ("" if g.answer != ans else ": CoT differs from the reference") +
                              f" on {list(map(int, toks))[:24]}")
    return count, bad, cot_max, oracle_bad, first


def _record(c: RagConstruction, task: str, n: int, stats, t0: float, family: str, alphabet: int | None,
            note: str = "", *, task_name: str) -> Record:
    """``task``: what was run, in words (the record's description); ``task_name``: the canonical task name."""
    count, bad, cot_max, oracle_bad, first = stats
    r = c.model.resources
    return Record(CLAIM, c.name, task_name, n, count, bad + oracle_bad, r.used_precision_bits, c.model.fmt.total_bits,
                  cot_max, c.cot_bound, r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                  family=family, alphabet=alphabet,
                  note=first or (f"state: {r.state_numbers} numbers x p = {r.precision_bits} declared bits "
                                 f"(I = {c.int_bits_declared}, f = 0), {r.state_numbers * r.used_precision_bits} "
                                 f"bits at the used p = {r.used_precision_bits}; {oracle_bad} malformed/timed-out "
                                 f"searches" + (f"; {note}" if note else "")), description=task)


def _params_record(name: str, params: dict, what: str, family: str, task_name: str) -> Record:
    distinct = sorted(set(params.values()))
    return Record(CLAIM, name, task_name, max(params)[0], len(params),
                  len(distinct) - 1, params=distinct[-1], seconds=0.001, family=family,
                  alphabet=max(a for _, a in params),
                  note=f"params {distinct} at (n, alphabet) = {sorted(params)}",
                  description=f"params identical at every {what} checked")


# ---------------------------------------------------------------------------- easy families (extra)
EXHAUSTIVE = {"quick": {"index": [1, 2, 3, 4, 5], "ar": [2, 3, 4, 5, 6], "cgram": [3, 4, 5, 6], "counting": [1, 2, 3, 4]},
              "full": {"index": list(range(1, 8)), "ar": list(range(2, 9)), "cgram": list(range(3, 9)),
                       "counting": list(range(1, 7))}}
GROWING = {"quick": [(64, 8), (256, 3), (4096, 1)], "full": [(64, 40), (256, 20), (1024, 8), (4096, 4)]}
GROWING_QUICK_COUNTING = [(64, 8), (256, 3), (1024, 1)]
"""Counting's CoT is 8t + 15 tokens and every generated token costs a readout over the
whole vocabulary (numbers up to n), ~1.4 ms at n = 2^12: about 40 s for one random
instance, so the quick profile stops at 2^10 for random Counting (the reduction's
instances have t = 0 and run to 2^14)."""
ALPHABET = {"index": 5, "ar": 5, "cgram": 3, "counting": 3}
BUILD: dict[str, Callable[[int, int], RagConstruction]] = {   # (n, alphabet) -> the construction
    "index": lambda n, a: index_rag(n, alphabet=a), "ar": lambda n, a: ar_rag(n, alphabet=a),
    "cgram": lambda n, a: cgram_rag(n, c=3, alphabet=a), "counting": lambda n, a: counting_rag(n, alphabet=a)}


def _batch(name: str, n: int, a: int, rng=None, size: int = 0):
    spec = task_spec(name)      # cgram: c = 3
    if rng is None:
        return spec.enumerate_all(n, a)
    return spec.generate(rng, n, size, a)


RETRIEVAL_NAMES = ("index", "ar", "cgram", "counting")


def _growing(name: str, profile: str) -> list[tuple[int, int]]:
    return GROWING_QUICK_COUNTING if (name == "counting" and profile == "quick") else GROWING[profile]


def _retrieval_parts(profile: str) -> list[tuple[str, str, int]]:
    """(name, "every", n) and (name, "seeded", k) (the k-th row of :func:`_growing`), in record order."""
    return [(name, how, x) for name in RETRIEVAL_NAMES
            for how, xs in (("every", EXHAUSTIVE[profile][name]), ("seeded", range(len(_growing(name, profile)))))
            for x in xs]


@register(CLAIM, "linear RNN + RAG: Index, AR, c-gram, Counting on easy families (extra)", parts=_retrieval_parts)
def retrieval_check(profile: str, seed: int, part: tuple[str, str, int]) -> list[Record]:
    """One part per row (:func:`_retrieval_parts`). The seeded rows of every task
    draw from ONE generator in order: a part replays the draws of the rows before
    it (generation only) so that its instances are those of the unsplit run."""
    name, how, x = part
    if how == "every":
        n = x
        t0 = time.perf_counter()
        c = BUILD[name](n, 2)
        stats = _run_rows(c, _batch(name, n, 2).rows())
        return [_record(c, f"{name}: every instance, alphabet 2", n, stats, t0, "exhaustive", 2,
                        task_name=task_spec(name).name)]
    rng = np.random.default_rng(seed)
    for prev in RETRIEVAL_NAMES:
        for k, (n, size) in enumerate(_growing(prev, profile)):
            a = ALPHABET[prev]
            if (prev, k) != (name, x):
                _batch(prev, n, a, rng, size)       # advance the shared generator
                continue
            t0 = time.perf_counter()
            c = BUILD[name](n, a)
            stats = _run_rows(c, _batch(name, n, a, rng, size).rows())
            return [_record(c, f"{name}: {size} seeded instances, alphabet {a}", n, stats, t0, "random", a,
                            task_name=task_spec(name).name)]
    raise ValueError(f"no such part {part!r}")


# ---------------------------------------------------------------------------- the reduction family
def _reductions():
    return LR


RED_TASKS = ("index", "ar", "3-gram", "4-gram", "counting")
RED_EXHAUSTIVE = {"quick": [1, 2, 3, 4, 5, 6], "full": list(range(1, 9))}
RED_SAMPLED = {"quick": [64, 1024, 2 ** 14], "full": [64, 256, 1024, 4096, 2 ** 14]}
RED_SAMPLED_INDEX_QUICK = [64, 1024, 4096]


def red_setup(task: str, n: int):
    """(reduction, construction, alphabet) for the image of Index at n bits:
    the alphabet is the largest number the reduction writes + 1."""
    spec = task_spec(task)
    L, a = spec.data_length(n), spec.reduction_alphabet(n)
    if spec.family == "index":
        return spec.reduction, index_rag(L, alphabet=a), a
    if spec.family in ("ar", "cgram"):
        return spec.reduction, cgram_rag(L, c=spec.c, alphabet=a), a
    if spec.family == "counting":
        return spec.reduction, counting_rag(L, alphabet=a), a
    raise ValueError(task)


def red_pairs(n: int, rng=None, sample: int = 2) -> list[tuple[tuple[int, ...], int]]:
    """Every (x, i) (no rng), or ``sample`` seeded x, each with i = n, n - 1 (adversarial:
    the key sits at the end of the data) and one uniform i."""
    if rng is None:
        return [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
    out = []
    for _ in range(sample):
        x = tuple(int(v) for v in rng.integers(0, 2, n))
        for i in sorted({n, max(1, n - 1), int(rng.integers(1, n + 1))}, reverse=True):
            out.append((x, i))
    return out


def red_rows(red, pairs):
    return [(red.instance(x, i), red.expected(x, i)) for x, i in pairs]


def _red_sizes(task: str, profile: str) -> list[int]:
    return RED_SAMPLED_INDEX_QUICK if (task == "index" and profile == "quick") else RED_SAMPLED[profile]


def _reduction_parts(profile: str) -> list[tuple[str, str, int]]:
    """(task, "every" | "seeded", n) in record order."""
    return [(task, how, n) for task in RED_TASKS
            for how, ns in (("every", RED_EXHAUSTIVE[profile]), ("seeded", _red_sizes(task, profile))) for n in ns]


def _reduction_combine(profile: str, seed: int, outputs: list) -> list[Record]:
    """Each task's rows, then its parameter record over every (n, alphabet) it built."""
    out = []
    for task in RED_TASKS:
        mine = [o for t, o in outputs if t == task]
        out += [rec for rec, _ in mine]
        out.append(_params_record(f"{task}-rag", dict(kv for _, kv in mine), "(n, alphabet)", "reduction",
                                  task_spec(task).name))
    return out


@register(CLAIM, "linear RNN + RAG: Index, AR, c-gram, Counting on the image of the Index reductions",
          parts=_reduction_parts, combine=_reduction_combine)
def reduction_check(profile: str, seed: int, part: tuple[str, str, int]):
    """One part per row: (task, (record, ((n, alphabet), params))). The seeded rows
    of every task draw from ONE generator in order: a part replays the draws of the
    rows before it so that its instances are those of the unsplit run."""
    task, how, n = part
    t0 = time.perf_counter()
    red, c, a = red_setup(task, n)
    if how == "every":
        pairs = red_pairs(n)
        rec = _record(c, f"{task}: every x in {{0,1}}^{n} and i, Index -> {red.name}", n,
                      _run_rows(c, red_rows(red, pairs)), t0, "reduction", a, task_name=task_spec(task).name)
        return task, (rec, ((n, a), c.params))
    rng = np.random.default_rng(seed + 7)
    for prev in RED_TASKS:
        for m in _red_sizes(prev, profile):
            if (prev, m) == (task, n):
                pairs = red_pairs(n, rng, sample=2 if n <= 1024 else 1)
                rec = _record(c, f"{task}: {len(pairs)} seeded (x, i), i = n, n-1 and uniform, Index -> {red.name}",
                              n, _run_rows(c, red_rows(red, pairs)), t0, "reduction", a, task_name=task_spec(task).name)
                return task, (rec, ((n, a), c.params))
            red_pairs(m, rng, sample=2 if m <= 1024 else 1)      # advance the shared generator
    raise ValueError(f"no such part {part!r}")


# ---------------------------------------------------------------------------- IsTree
_ISTREE: dict[tuple[str, int], RagConstruction] = {}


def _istree(N: int, paper: bool = False) -> RagConstruction:
    """The IsTree model for N vertices, built once per process (a build takes ~0.5 s)
    and handed out with a fresh model (:meth:`Model.fresh`: the statistics of a new
    build), so that its statistics (bits used) are those of the caller's own runs:
    a record never depends on which records ran before it in the same process (a
    Dask worker runs any subset of them)."""
    key = ("paper" if paper else "plain", N)
    if key not in _ISTREE:
        _ISTREE[key] = istree_rag_paper(N) if paper else istree_rag(N)
    return dataclasses.replace(_ISTREE[key], model=_ISTREE[key].model.fresh())


def _istree_rows(c: RagConstruction, graphs, paper: bool = False) -> tuple[int, int, int, int, str]:
    ref = (lambda e: istree.retrieval_cot(c.n, e)) if paper else (lambda e: istree_plain_cot(c.n, e))
    rows = [(graph_tokens(e), TRUE if istree.reference_label(c.n, e) else FALSE, e) for e in graphs]
    return _run_rows(c, rows, want_cot=ref)


ISTREE_SEEDED = {"quick": [(200, 1)], "full": [(40, 20), (100, 8), (200, 4), (256, 2)]}
ISTREE_RED = {"quick": [1, 2, 3], "full": [1, 2, 3, 4, 5]}
ISTREE_RED_SAMPLED = {"quick": [8, 32], "full": [8, 32, 64, 128]}
"""The plain IsTree CoT is ~80 tokens per gadget vertex (about 0.2 ms each): n = 4 (64
instances, 12 s) and n = 64 (10 s) are in the full profile only."""


def _istree_parts(profile: str) -> list[tuple[str, int]]:
    """The rows of :func:`istree_check` in record order: ("gadget", n), ("gadget-seeded",
    n), ("every", N), ("seeded", k) (the k-th row of ISTREE_SEEDED)."""
    return ([("gadget", n) for n in ISTREE_RED[profile]] + [("gadget-seeded", n) for n in ISTREE_RED_SAMPLED[profile]]
            + [("every", N) for N in range(1, 5 if profile == "quick" else 6)]
            + [("seeded", k) for k in range(len(ISTREE_SEEDED[profile]))])


def _istree_combine(profile: str, seed: int, outputs: list) -> list[Record]:
    params = dict(kv for _, kv in outputs)
    return [rec for rec, _ in outputs] + [_params_record("istree-rag", params, "(N, vertices)", "reduction", istree.SPEC.name)]


@register(CLAIM, "linear RNN + RAG: IsTree (plain oracle) on the hub gadget and on small/random graphs",
          parts=_istree_parts, combine=_istree_combine)
def istree_check(profile: str, seed: int, part: tuple[str, int]):
    """One part per row: (record, ((N, vertices), params)). The seeded rows draw from
    ONE generator in order (gadget samples, edge orders, random graphs): a part
    replays the draws of the rows before it so that its instances are those of the
    unsplit run."""
    rng = np.random.default_rng(seed + 1)
    LR = _reductions()
    orders = 1 if profile == "quick" else 2
    for how, x in _istree_parts(profile):
        mine = (how, x) == tuple(part)
        if how == "gadget" and mine:
            # the image of the Index -> IsTree hub gadget (N = n + 3 vertices)
            n = x
            t0 = time.perf_counter()
            c = _istree(n + 3)
            pairs = red_pairs(n)
            rows = [(LR.ISTREE.instance(x, i), LR.ISTREE.expected(x, i), (x, i)) for x, i in pairs]
            stats = _run_rows(c, rows, want_cot=lambda key: istree_plain_cot(n + 3, _gadget_edges(*key)))
            return (_record(c, f"IsTree: every x in {{0,1}}^{n} and i, Index -> hub gadget, CoT token for token",
                            n, stats, t0, "reduction", n + 3, task_name=istree.SPEC.name), ((n + 3, n + 3), c.params))
        if how == "gadget-seeded":
            n = x
            if not mine:
                red_pairs(n, rng, sample=1)          # advance the shared generator
                continue
            t0 = time.perf_counter()
            c = _istree(n + 3)
            pairs = red_pairs(n, rng, sample=1)
            rows = [(LR.ISTREE.instance(x, i), LR.ISTREE.expected(x, i), (x, i)) for x, i in pairs]
            stats = _run_rows(c, rows, want_cot=lambda key: istree_plain_cot(n + 3, _gadget_edges(*key)))
            return (_record(c, f"IsTree: {len(pairs)} seeded (x, i), i = n, n-1 and uniform, hub gadget, "
                               f"CoT token for token", n, stats, t0, "reduction", n + 3, task_name=istree.SPEC.name), ((n + 3, n + 3), c.params))
        # easy families (extra)
        if how == "every":
            N = x
            t0 = time.perf_counter()
            graphs = [o for e in istree.enumerate_graphs(N) for o in istree.edge_orders(e, orders, rng)[:orders]]
            if not mine:
                continue
            c = _istree(N)
            return (_record(c, f"IsTree: every graph ({orders} edge order(s)), CoT token for token", N,
                            _istree_rows(c, graphs), t0, "exhaustive", N, task_name=istree.SPEC.name), ((N, N), c.params))
        if how == "seeded":
            N, size = ISTREE_SEEDED[profile][x]
            t0 = time.perf_counter()
            graphs = [inst.edges for inst in istree.generate(rng, N, size)]
            if not mine:
                continue
            c = _istree(N)
            return (_record(c, f"IsTree: {size} seeded graphs (mixed families), CoT token for token", N,
                            _istree_rows(c, graphs), t0, "random", N, task_name=istree.SPEC.name), ((N, N), c.params))
    raise ValueError(f"no such part {part!r}")


def _gadget_edges(x, i) -> list[tuple[int, int]]:
    """The hub gadget's edge list in order, read back from its tokens."""
    LR = _reductions()
    return [tuple(e) for e in parse_graph_tokens([int(t) for t in LR.ISTREE.instance(x, i)], len(x) + 3)]


@register(CLAIM, "IsTree in the paper's retrieval format (paper dialect): format reproduction, not evidence")
def paper_format_check(profile: str, seed: int) -> list[Record]:
    out = []
    rng = np.random.default_rng(seed + 2)
    for N in range(1, 5):
        t0 = time.perf_counter()
        c = _istree(N, paper=True)
        graphs = [o for e in istree.enumerate_graphs(N) for o in istree.edge_orders(e, 1, rng)[:1]]
        out.append(_record(c, f"IsTree (paper's retrieval CoT via the dialect): every graph, token for token", N,
                           _istree_rows(c, graphs, paper=True), t0, "paper-format", N, note=PAPER_NOTE, task_name=istree.SPEC.name))
    t0 = time.perf_counter()
    SAMPLE = shared_file(SAMPLE_NAME)
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()] if SAMPLE else []
    built: set[int] = set()
    bad, cot_max, first = 0, 0, ""
    for r in rows:
        N = r["n_nodes"]
        edges, _ = parse_cot_text(r["retrieval_text"], N)
        c = _istree(N, paper=True)
        built.add(N)
        g = c.run(graph_tokens(edges))
        cot_max = max(cot_max, g.cot_length)
        if format_cot_text(edges, g.cot) != r["retrieval_text"] or (g.answer == TRUE) != r["is_tree"]:
            bad += 1
            first = first or f"row with n_nodes={N} differs"
    out.append(Record(CLAIM, "istree-rag-paper", istree.SPEC.name,
                      max(built, default=0), len(rows), bad, checked=bool(rows), cot_max=cot_max,
                      cot_bound=istree_cot_bound(max(built, default=1)), seconds=round(time.perf_counter() - t0, 3),
                      family="paper-format", alphabet=max(built, default=None),
                      note=(first or f"{len(rows)} rows, N in {sorted(built)}; {PAPER_NOTE}") if rows
                      else f"NOT CHECKED: shared data file {SAMPLE_NAME} not found (set RNNGAP_SHARED_DATA)", description="the paper's sample (retrieval_text), token for token + tree label"))
    return out


# ---------------------------------------------------------------------------- necessity
def rag_runner(c: RagConstruction, rows, want_cot: Callable | None = None) -> Callable[[object], Outcome]:
    """``run(model)`` for :func:`checks.verify.necessity.necessity_record`: the construction's
    generation with a fresh plain oracle per instance and ``model`` in place of its own,
    every row run to completion and classified (:func:`checks.verify.necessity.classify`:
    wrong final answer, no answer, CoT deviation with ``want_cot`` (CoT + answer), raised)."""
    def run(model) -> Outcome:
        cm = _with_model(c, model)
        out = Outcome(len(rows))
        for row in rows:
            toks, want = [int(t) for t in row[0]], row[1]
            name = f"{toks[:24]}{'...' if len(toks) > 24 else ''}"
            try:
                g = cm.run(toks)
            except Exception as e:   # never a wrong answer (checks/verify/necessity.py)
                out.add("raised", f"{name}: {type(e).__name__}: {str(e)[:80]}")
                continue
            ref = None if want_cot is None else want_cot(row[2])
            classify(out, name, g.answer, want, g.cot, None if ref is None else ref[:-1], g.cot_length)
        return out
    return run


NECESSITY = {"quick": [("index", 3, None), ("index", 6, None), ("index", 1024, 1), ("ar", 3, None), ("ar", 6, None),
                       ("ar", 1024, 2), ("3-gram", 4, None), ("4-gram", 4, None), ("counting", 3, None),
                       ("counting", 6, None), ("counting", 1024, 2), ("istree", 2, None)],
             "full": [("index", 3, None), ("index", 7, None), ("index", 4096, 3), ("ar", 3, None), ("ar", 7, None),
                      ("ar", 4096, 3), ("3-gram", 6, None), ("4-gram", 6, None), ("counting", 3, None),
                      ("counting", 7, None), ("counting", 4096, 3), ("istree", 3, None)]}
"""(task, n, sample): every (x, i) of the reduction at n (sample None), or ``sample``
seeded x with i = n, n - 1 and uniform (:func:`red_pairs`): the frontier at several n,
the large n showing that the integer bits needed grow with log n."""


def _necessity_pairs(profile: str, seed: int, k: int) -> list[tuple[tuple[int, ...], int]]:
    """The (x, i) of entry ``k`` of :data:`NECESSITY`: every pair, or the seeded ones
    drawn from ONE generator (seed + 11) in entry order, the earlier entries' draws
    replayed, so that a part alone draws what the whole check draws."""
    rng = np.random.default_rng(seed + 11)
    for _, n, sample in NECESSITY[profile][:k]:
        if sample is not None:
            red_pairs(n, rng, sample=sample)          # replayed: advances the generator
    _, n, sample = NECESSITY[profile][k]
    return red_pairs(n) if sample is None else red_pairs(n, rng, sample=sample)


@register(CLAIM, "linear RNN + RAG: necessity of the declared bits on the reduction family",
          parts=lambda profile: list(range(len(NECESSITY[profile]))))
def necessity_check(profile: str, seed: int, part: int) -> list[Record]:
    """One record: entry ``part`` of :data:`NECESSITY`."""
    LR = _reductions()
    task, n, sample = NECESSITY[profile][part]
    pairs = _necessity_pairs(profile, seed, part)
    what = f"every (x, i) at n = {n}" if sample is None else f"{len(pairs)} seeded (x, i), i = n, n-1, uniform"
    if task == "istree":
        c, a = _istree(n + 3), n + 3
        rows = [(LR.ISTREE.instance(x, i), LR.ISTREE.expected(x, i), (x, i)) for x, i in pairs]
        run = rag_runner(c, rows, want_cot=lambda key, n=n: istree_plain_cot(n + 3, _gadget_edges(*key)))
    else:
        red, c, a = red_setup(task, n)
        rows = red_rows(red, pairs)
        run = rag_runner(c, rows)
    return [necessity_record(CLAIM, c.name, f"{task}: {what} of the Index reduction", n,
                             task=task_spec(task).name, family="reduction", alphabet=a, declared=c.model.fmt, run=run,
                             instances=len(rows), model=c.model)]
