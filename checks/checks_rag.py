"""Claim T5-RAG, retrieval tasks and IsTree: constant-size linear RNNs with in-context
RAG (constructions/rag_models.py), and the contrast without the oracle.

Records per construction: every instance at small n (``enumerate_all``), seeded
samples at growing n (to 2^12 for the retrieval tasks, N = 200 vertices for
IsTree), the paper's IsTree sample token for token, the parameter count across
n, and side by side for each Index reduction (lowerbounds/reductions.py): the
witness finder (lowerbounds/witness.py) breaks the RNN alone (oracle removed, same
weights, same answer protocol), while the same RNN with the oracle answers every
instance of the reduction, the witness pair included.

References are the plain-Python task references of ``checks.tasks`` (the IsTree
CoT is ``retrieval_cot``, compared token for token).
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import numpy as np

from constructions.protocol import RNN
from constructions.rag_models import (
    CGRAM_INT, COUNTING_INT, INDEX_INT, ISTREE_INT, N_SYM, RagConstruction, _int_cgram, _int_counting,
    _int_index, _int_istree, ar_rag, cgram_rag, counting_rag, index_rag, istree_cot_bound, istree_rag,
)
from constructions.vocab import EOS, FALSE, TRUE, number_token

from .checks_declarations import FUNCTIONS
from .declarations import declare
from .formats import format_cot_text, graph_tokens, parse_cot_text
from .shared_data import shared_file
from .registry import Record, register
from .tasks import ar, cgram, counting, index, istree

CLAIM = "T5-RAG"
SAMPLE_NAME = "istree_official_sample.jsonl"

# declared resources (f = 0: every weight and value is an integer)
for _model, _expr, _fn, _cot, _cot_order in (
        ("index-rag", INDEX_INT, _int_index, N_SYM + 7, "linear"),
        ("3-gram-rag", CGRAM_INT, _int_cgram, 9, "constant"),
        ("counting-rag", COUNTING_INT, _int_counting, 8 * N_SYM + 15, "linear"),
        ("istree-rag", ISTREE_INT, _int_istree, 52 * N_SYM - 25, "linear")):
    declare(CLAIM, _model, "int_bits", _expr, "log")
    FUNCTIONS[(_model, "int_bits")] = _fn
    declare(CLAIM, _model, "frac_bits", 0, "constant")
    declare(CLAIM, _model, "cot", _cot, _cot_order)
FUNCTIONS[("istree-rag", "cot")] = istree_cot_bound

EXHAUSTIVE = {"quick": {"index": [1, 2, 3, 4, 5], "ar": [2, 3, 4, 5, 6], "cgram": [3, 4, 5, 6], "counting": [1, 2, 3, 4]},
              "full": {"index": list(range(1, 8)), "ar": list(range(2, 9)), "cgram": list(range(3, 9)),
                       "counting": list(range(1, 7))}}
GROWING = {"quick": [(64, 8), (256, 3), (4096, 1)], "full": [(64, 40), (256, 20), (1024, 8), (4096, 4)]}
GROWING_QUICK_COUNTING = [(64, 8), (256, 3), (1024, 1)]
"""Counting's CoT is 8t + 15 tokens and every generated token costs a readout over the
whole vocabulary (numbers up to n), ~1.4 ms at n = 2^12: about 40 s for one instance,
so the quick profile stops at 2^10 for Counting (the full profile and
``pytest -m full`` run 2^12)."""
ALPHABET = {"index": 5, "ar": 5, "cgram": 3, "counting": 3}
BUILD: dict[str, Callable[[int, int], RagConstruction]] = {
    "index": index_rag, "ar": ar_rag, "cgram": lambda n, a: cgram_rag(n, 3, a), "counting": counting_rag}
TASKS = {"index": index, "ar": ar, "cgram": cgram, "counting": counting}


def _batch(name: str, n: int, a: int, rng=None, size: int = 0):
    mod = TASKS[name]
    kw = {"c": 3} if name == "cgram" else {}
    if rng is None:
        return mod.enumerate_all(n, a, **kw)
    return mod.generate(rng, n, size, a, **kw)


def _run_rows(c: RagConstruction, rows) -> tuple[int, int, int, int, str]:
    """(instances, failures, max CoT, oracle failures, first failure)."""
    count = bad = cot_max = oracle_bad = 0
    first = ""
    for toks, ans in rows:
        o = c.oracle()
        g = c.run(toks, oracle=o)
        count += 1
        cot_max = max(cot_max, g.cot_length)
        oracle_bad += len(o.failures())
        if g.answer != ans or g.stopped != "answer":
            bad += 1
            first = first or f"n={c.n}: answer {g.answer} != {ans} ({g.stopped})"
    return count, bad, cot_max, oracle_bad, first


def _record(c: RagConstruction, task: str, n: int, stats, t0: float, note: str = "") -> Record:
    count, bad, cot_max, oracle_bad, first = stats
    r = c.model.resources
    return Record(CLAIM, c.name, task, n, count, bad + oracle_bad, r.used_precision_bits, c.model.fmt.total_bits,
                  cot_max, c.cot_bound, r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                  note=first or (f"state: {r.state_numbers} numbers x p = {r.precision_bits} declared bits "
                                 f"(I = {c.int_bits_declared}, f = 0), {r.state_numbers * r.used_precision_bits} "
                                 f"bits at the used p = {r.used_precision_bits}; {oracle_bad} malformed/timed-out "
                                 f"searches" +
                                 (f"; {note}" if note else "")))


@register(CLAIM, "linear RNN + RAG: Index, AR, c-gram, Counting")
def retrieval_check(profile: str, seed: int) -> list[Record]:
    out = []
    rng = np.random.default_rng(seed)
    for name in ("index", "ar", "cgram", "counting"):
        a = ALPHABET[name]
        params = {}
        for n in EXHAUSTIVE[profile][name]:
            t0 = time.perf_counter()
            c = BUILD[name](n, 2)
            stats = _run_rows(c, _batch(name, n, 2).rows())
            out.append(_record(c, f"{name}: every instance, alphabet 2", n, stats, t0))
            params[n] = c.params
        plan = GROWING_QUICK_COUNTING if (name == "counting" and profile == "quick") else GROWING[profile]
        for n, size in plan:
            t0 = time.perf_counter()
            c = BUILD[name](n, a)
            stats = _run_rows(c, _batch(name, n, a, rng, size).rows())
            out.append(_record(c, f"{name}: {size} seeded instances, alphabet {a}", n, stats, t0))
            params[n] = c.params
        out.append(_below_used(name, a, rng))
        distinct = sorted(set(params.values()))
        out.append(Record(CLAIM, f"{name}-rag", "params identical at every n checked", max(params), len(params),
                          len(distinct) - 1, params=distinct[-1], note=f"params {distinct} at n = {sorted(params)}"))
    return out


def _below_used(name: str, a: int, rng, n: int = 256, size: int = 4) -> Record:
    """The same weights one integer bit below what the run used must fail (overflow
    raised, never a silent wrap): the declared bits are needed, not decorative."""
    from constructions.fixedpoint import FixedFormat, FixedPointOverflow
    c = BUILD[name](n, a)
    rows = list(_batch(name, n, a, rng, size).rows())
    _run_rows(c, rows)
    used = c.model.resources.used_int_bits
    low = c.model.with_format(FixedFormat(used - 1, 0))
    lowc = RagConstruction(**{**c.__dict__, "model": low})
    t0 = time.perf_counter()
    failed = False
    try:
        _run_rows(lowc, rows)
    except FixedPointOverflow:
        failed = True
    return Record(CLAIM, c.name, f"{name}: one integer bit below used ({low.fmt.name}) must fail", n, len(rows),
                  0 if failed else 1, seconds=round(time.perf_counter() - t0, 3),
                  note="overflow raised as expected" if failed else "ran without overflow below the used bits")


# ---------------------------------------------------------------------------- IsTree
ISTREE_SEEDED = {"quick": [(200, 1)], "full": [(40, 20), (100, 8), (200, 4), (256, 2)]}


def _istree_rows(c: RagConstruction, graphs) -> tuple[int, int, int, int, str]:
    count = bad = cot_max = oracle_bad = 0
    first = ""
    for edges in graphs:
        o = c.oracle()
        g = c.run(graph_tokens(edges), oracle=o)
        want = istree.retrieval_cot(c.n, edges)
        count += 1
        cot_max = max(cot_max, g.cot_length)
        oracle_bad += len(o.failures())
        if g.cot + [g.answer] != want:
            bad += 1
            first = first or f"N={c.n} edges {list(edges)[:6]}...: CoT differs from retrieval_cot"
    return count, bad, cot_max, oracle_bad, first


_ISTREE: dict[int, RagConstruction] = {}


def _istree(N: int) -> RagConstruction:
    """One IsTree model per vertex count within a verify run (a build takes ~1 s)."""
    if N not in _ISTREE:
        _ISTREE[N] = istree_rag(N)
    return _ISTREE[N]


@register(CLAIM, "linear RNN + RAG: IsTree with the paper's retrieval CoT")
def istree_check(profile: str, seed: int) -> list[Record]:
    out = []
    rng = np.random.default_rng(seed + 1)
    params = {}
    orders = 1 if profile == "quick" else 2
    for N in range(1, 5 if profile == "quick" else 6):
        t0 = time.perf_counter()
        c = _istree(N)
        graphs = [o for e in istree.enumerate_graphs(N) for o in istree.edge_orders(e, orders, rng)[:orders]]
        out.append(_record(c, f"IsTree: every graph ({orders} edge order(s)), CoT token for token", N,
                           _istree_rows(c, graphs), t0))
        params[N] = c.params
    for N, size in ISTREE_SEEDED[profile]:
        t0 = time.perf_counter()
        c = _istree(N)
        graphs = [inst.edges for inst in istree.generate(rng, N, size)]
        out.append(_record(c, f"IsTree: {size} seeded graphs (mixed families), CoT token for token", N,
                           _istree_rows(c, graphs), t0))
        params[N] = c.params
    # the paper's own sample, token for token (retrieval_text)
    t0 = time.perf_counter()
    SAMPLE = shared_file(SAMPLE_NAME)
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()] if SAMPLE else []
    built: dict[int, RagConstruction] = {}
    bad, cot_max, first = 0, 0, ""
    for r in rows:
        N = r["n_nodes"]
        edges, _ = parse_cot_text(r["retrieval_text"], N)
        c = built[N] = _istree(N)
        g = c.run(graph_tokens(edges))
        cot_max = max(cot_max, g.cot_length)
        if format_cot_text(edges, g.cot) != r["retrieval_text"] or (g.answer == TRUE) != r["is_tree"]:
            bad += 1
            first = first or f"row with n_nodes={N} differs"
    out.append(Record(CLAIM, "istree-rag", "the paper's sample (retrieval_text), token for token + tree label",
                      max(built, default=0), len(rows), bad, checked=bool(rows), cot_max=cot_max,
                      cot_bound=istree_cot_bound(max(built, default=1)), seconds=round(time.perf_counter() - t0, 3),
                      note=first or (f"{len(rows)} rows, N in {sorted(built)}" if rows else f"NOT CHECKED: shared data file {SAMPLE_NAME} not found (set RNNGAP_SHARED_DATA)")))
    distinct = sorted(set(params.values()))
    out.append(Record(CLAIM, "istree-rag", "params identical at every N checked", max(params), len(params),
                      len(distinct) - 1, params=distinct[-1], note=f"params {distinct} at N = {sorted(params)}"))
    return out


# ---------------------------------------------------------------------------- the contrast
class AnswerAfter:
    """An RNN (constructions/protocol.py) whose run ends one token after ``marker``:
    the protocol of ``generate(..., answer_after=EOS)`` expressed for ``run_rnn``.

    CoT tokens are passed to ``run_rnn`` shifted by ``SHIFT`` (outside every
    vocabulary), so only the token after the marker is a real token id and can be
    in ``answer_tokens``; ``step`` shifts them back. The state adds the flag 'marker seen'
    (one byte of the state key, so 8 declared bits)."""

    SHIFT = 1 << 20

    def __init__(self, rnn: RNN, marker: int = EOS):
        self.rnn, self.marker = rnn, marker
        self.state_bits = rnn.state_bits + 8          # the flag takes a whole byte of the key

    def initial_state(self):
        return (self.rnn.initial_state(), False)

    def step(self, state, token: int):
        s, seen = state
        t = int(token)
        t = t - self.SHIFT if t >= self.SHIFT else t
        return (self.rnn.step(s, t), seen or t == self.marker)

    def output(self, state) -> int:
        s, seen = state
        t = int(self.rnn.output(s))
        return t if seen else t + self.SHIFT

    def state_key(self, state):
        s, seen = state
        return self.rnn.state_key(s) + bytes([int(seen)])


def _contrast(task: str, c: RagConstruction, reduction, n: int, answers, sample: int | None = None,
              seed: int = 0) -> list[Record]:
    """The witness finder on the RNN alone, then the same RNN with the oracle on every
    (x, i) of the reduction, or (``sample``) on the witness pair's x and x' for every i
    plus ``sample`` seeded (x, i)."""
    from lowerbounds.witness import find_witness
    t0 = time.perf_counter()
    if c.answer_tokens is None:
        rnn = AnswerAfter(c.model.rnn())
    else:
        rnn = c.model.rnn()
    w = find_witness(rnn, reduction, n, mode="exhaustive", max_cot=c.cot_bound, answer_tokens=answers)
    ok = w.found and bool(w.wrong)
    how = (f"x={''.join(map(str, w.x))} x'={''.join(map(str, w.x_prime))} i={w.i}: same state after Alice's prefix, "
           f"wrong on {list(w.wrong)}" if w.found else w.how)
    alone = Record(CLAIM, c.name + " WITHOUT oracle", f"{task}: fooling pair via Index -> {task} (witness finder)",
                   n, 2, 0 if ok else 1, state_bits=rnn.state_bits, seconds=round(time.perf_counter() - t0, 3),
                   note=("broken: " + how) if ok else "NOT broken: " + how)
    # the same RNN with the oracle: every instance of the reduction, the witness pair included
    t0 = time.perf_counter()
    rows = []
    if sample is None:
        pairs = [(tuple((b >> (n - 1 - k)) & 1 for k in range(n)), i) for b in range(1 << n) for i in range(1, n + 1)]
        what = f"every x in {{0,1}}^{n} and i (witness pair included)"
    else:
        rng = np.random.default_rng(seed)
        pairs = [(x, i) for x in ((w.x, w.x_prime) if w.found else ()) for i in range(1, n + 1)]
        pairs += [(tuple(int(v) for v in rng.integers(0, 2, n)), int(rng.integers(1, n + 1))) for _ in range(sample)]
        what = f"the witness pair's x, x' for every i + {sample} seeded (x, i)"
    for x, i in pairs:
        rows.append((reduction.instance(x, i), reduction.expected(x, i)))
    count, bad, cot_max, oracle_bad, first = 0, 0, 0, 0, ""
    for toks, want in rows:
        o = c.oracle()
        g = c.run([int(t) for t in toks], oracle=o)
        count += 1
        cot_max = max(cot_max, g.cot_length)
        oracle_bad += len(o.failures())
        if g.answer != want:
            bad += 1
            first = first or f"wrong on {list(map(int, toks))}"
    r = c.model.resources
    with_oracle = Record(CLAIM, c.name + " WITH oracle", f"{task}: {what}",
                         n, count, bad + oracle_bad, r.used_precision_bits, c.model.fmt.total_bits, cot_max,
                         c.cot_bound, r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                         note=first or f"the pair that breaks the RNN alone is answered correctly ({how[:60]})")
    return [alone, with_oracle]


@register(CLAIM, "linear RNN + RAG vs the same RNN without the oracle (witness finder)")
def contrast_check(profile: str, seed: int) -> list[Record]:
    from lowerbounds.reductions import AR, CGRAM, COUNTING, INDEX, ISTREE
    numbers = [number_token(k) for k in range(0, 64)]
    n = 6 if profile == "quick" else 8
    out = []
    out += _contrast("Index", index_rag(n, 2), INDEX, n, numbers)
    out += _contrast("AR", ar_rag(2 * n, n + 2), AR, n, numbers)
    out += _contrast("3-gram", cgram_rag(3 * n, 3, n + 2), CGRAM, n, numbers)
    out += _contrast("Counting", counting_rag(n, n + 1), COUNTING, n, numbers)
    # the state keeps the last 13 tokens: x_1 (token 3 of Alice's 3 nt + 1) leaves it once nt >= 6
    nt = 6 if profile == "quick" else 7
    out += _contrast("IsTree", _istree(nt + 3), ISTREE, nt, (TRUE, FALSE),
                     sample=20 if profile == "quick" else None, seed=seed)
    return out
