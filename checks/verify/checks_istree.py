"""Checks of claim T4.7-up: the IsTree Transformer (constructions/models/istree.py) writes
the reference DFS tour token for token and the true tree label.

The model runs two ways, both exact: :func:`teacher_forced_failures` (prompt and
reference CoT in one batched call, every next-token prediction compared: the
same as what greedy generation writes) and :func:`greedy_failures` (the
generation driver). References are plain Python (``checks.tasks.istree``,
networkx). Every label is the model's own output, with the ``[COUNT] N`` header
when the edges cannot show N. Families: ``all-graphs``, ``uniform-graphs``,
``random-sparse``, ``paper-sample`` (:func:`paper_sample_check`; NOT CHECKED
without the file) and ``reduction`` (the hub gadget).

Details (the runs, labels, families): docs/internals/verify.md#checks_istree
"""
from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from rnngap.constructions.models import istree as C
from rnngap.constructions.build.generate import generate
from rnngap.constructions.build.protocol import feed, run_rnn
from rnngap.constructions.machine.vocab import DASH, EOS, FALSE, NUMBER_BASE, TILDE, TRUE, number_token

from rnngap.checks.io.formats import graph_tokens, parse_cot_text, parse_graph_text, parse_graph_tokens
from .necessity import Outcome as RunOutcome, classify, necessity_record
from .registry import Record, register
from rnngap.checks.io.shared_data import shared_file
from rnngap.checks.tasks import istree as R
from .forcing import forced_continuations
from rnngap.lowerbounds import reductions as LR
from rnngap.lowerbounds import witness as W
from rnngap.lowerbounds.targets_toy import HashRNN, pack_fields, width

Case = tuple[int, list[tuple[int, int]]]
"""(n_nodes, ordered edges)."""


@dataclass
class Outcome:
    instances: int = 0
    failures: int = 0
    cot_max: int = 0
    first_failure: str = ""

    def fail(self, msg: str) -> None:
        self.failures += 1
        if not self.first_failure:
            self.first_failure = msg[:300]


def _sep_name(sep: int) -> str:
    return "~" if sep == TILDE else "-"


COUNT_MODES = ("auto", "always", "never")


def _with_header(n_nodes: int, edges, count: str) -> bool:
    """Whether the prompt carries ``[COUNT] N``: ``auto`` iff the edges cannot show
    n_nodes, ``always``, or ``never`` (then n_nodes must be visible)."""
    if count not in COUNT_MODES:
        raise ValueError(f"count must be one of {COUNT_MODES}, got {count!r}")
    hidden = C.needs_count(n_nodes, edges)
    if count == "never" and hidden:
        raise ValueError(f"n_nodes = {n_nodes} is not visible in the edges {list(edges)[:6]}...; "
                         f"the model needs the [COUNT] header")
    return count == "always" or (count == "auto" and hidden)


def case_prompt(n_nodes: int, edges, sep: int = DASH, count: str = "auto") -> list[int]:
    """The prompt of a case: the paper's format, with the ``[COUNT]`` header per ``count``."""
    p = graph_tokens(edges, sep=_sep_name(sep))
    return C.with_count(p, n_nodes) if _with_header(n_nodes, edges, count) else p


def teacher_forced_failures(model, cases: Sequence[Case], sep: int = DASH, batch: int = 2000,
                            out: Outcome | None = None, count: str = "auto") -> Outcome:
    """Compare the model's next-token predictions along ``prompt + reference CoT``
    with the reference (tour, [EOS], the tree label of n_nodes vertices): the
    label compared is the model's own prediction after [EOS]."""
    out = out or Outcome()
    for lo in range(0, len(cases), batch):
        chunk = cases[lo:lo + batch]
        rows, starts = [], []
        for n_nodes, edges in chunk:
            C.check_fits(model, edges, n_nodes)
            p = case_prompt(n_nodes, edges, sep, count)
            rows.append(p + R.reference_cot(n_nodes, edges))
            starts.append(len(p))
        forced = forced_continuations(model, rows, starts)
        for b, (n_nodes, edges) in enumerate(chunk):
            r, s = rows[b], starts[b]
            got, want = forced[b], r[s:]
            out.instances += 1
            out.cot_max = max(out.cot_max, len(want) - 1)
            if got != want:
                k = next(i for i, (a, w) in enumerate(zip(got, want)) if a != w)
                what = "label" if k == len(want) - 1 else f"CoT token {k}"
                out.fail(f"n_nodes={n_nodes} edges={edges} prompt={r[:s][:12]}...: {what} predicted {got[k]}"
                         f" want {want[k]}")
    return out


def greedy_failures(model, cases: Iterable[Case], sep: int = DASH, out: Outcome | None = None,
                    count: str = "auto") -> Outcome:
    """Greedy generation (constructions.generate) against the reference CoT and label;
    the label compared is the model's own answer token."""
    out = out or Outcome()
    for n_nodes, edges in cases:
        header = _with_header(n_nodes, edges, count)
        g = C.run(model, edges, sep=sep, n_nodes=n_nodes if header else None)
        want = R.reference_cot(n_nodes, edges)
        out.instances += 1
        out.cot_max = max(out.cot_max, g.cot_length)
        if not (g.stopped == "answer" and g.cot + [g.answer] == want):
            out.fail(f"n_nodes={n_nodes} edges={list(edges)} header={header}: got {g.cot + [g.answer]} want {want}")
    return out


# ----------------------------------------------------------------------------
# instance sets
def exhaustive_cases(n: int, rng: np.random.Generator, orders_beyond: int = 3,
                     all_orders: bool = True) -> list[Case]:
    """Every graph on n vertices. ``all_orders``: every edge order when it has
    <= 5 edges, else the enumeration order plus seeded ones, ``orders_beyond`` in
    all (:func:`checks.tasks.istree.edge_orders`). Otherwise: the enumeration
    order plus ``orders_beyond - 1`` seeded shuffles."""
    cases: list[Case] = []
    for inst in R.enumerate_all(n):
        edges = list(inst.edges)
        if all_orders:
            orders = R.edge_orders(edges, orders_beyond, rng)
        else:
            orders = [edges] + [[edges[i] for i in rng.permutation(len(edges))] for _ in range(orders_beyond - 1)]
        cases += [(n, o) for o in orders]
    return cases


def sampled_cases(n: int, rng: np.random.Generator, count: int, orders: int = 1) -> list[Case]:
    """``count`` uniformly drawn graphs on n vertices (every subset of pairs equally
    likely), each in ``orders`` seeded edge orders."""
    pairs = [(i, j) for i in range(n) for j in range(i)]
    out: list[Case] = []
    for _ in range(count):
        keep = rng.random(len(pairs)) < 0.5
        edges = [e for e, k in zip(pairs, keep) if k]
        for _ in range(orders):
            out.append((n, [edges[i] for i in rng.permutation(len(edges))]))
    return out


def sparse_cases(rng: np.random.Generator, n: int, count: int) -> list[Case]:
    """Graphs on n vertices with at most n + 2 edges: the generator families
    (trees, near-trees, the paper's two families) and random graphs with a random
    m in 0..min(n + 2, n(n-1)/2), m != n - 1; every 5th edge list reversed in
    orientation (u < v)."""
    fams = [f for f, (_, lo) in R.FAMILIES.items() if n >= lo and f != "wrong_size"]
    if n >= 2:
        fams.append("wrong_size")
    out: list[Case] = []
    for k in range(count):
        fam = fams[k % len(fams)]
        if fam == "wrong_size":
            sizes = [m for m in range(min(n + 2, n * (n - 1) // 2) + 1) if m != n - 1]
            edges = R.random_graph(rng, n, sizes[int(rng.integers(len(sizes)))]).edges
        else:
            edges = R.FAMILIES[fam][0](rng, n).edges
        if k % 5 == 4:
            edges = [(v, u) for u, v in edges]
        out.append((n, list(edges)))
    return out


# ----------------------------------------------------------------------------
EXHAUSTIVE = {"quick": {1: None, 2: None, 3: None, 4: None, 5: "canonical", 6: 300},
              "full": {1: None, 2: None, 3: None, 4: None, 5: None, 6: None}}
SPARSE = {"quick": [(16, 24), (64, 8), (256, 2)], "full": [(16, 200), (64, 100), (256, 20), (1000, 3), (10000, 1)]}


def _record(task: str, model, n: int, out: Outcome, t0: float, note: str = "", family: str = "random") -> Record:
    """A T4.7-up correctness record; ``alphabet`` is None (the vertex numbers are
    the instance size, n or N = n + 3, said in the note)."""
    r = model.resources
    N = model.spec.notes["n_vertices"]
    return Record("T4.7-up", model.name, R.SPEC.name, n, out.instances, out.failures, r.used_precision_bits,
                  model.fmt.total_bits, out.cot_max, C.cot_bound(N), r.params, None,
                  round(time.perf_counter() - t0, 3), (note + " " + out.first_failure).strip(),
                  family=family, alphabet=None, description=task)


EXHAUSTIVE_SPLIT = {"quick": {}, "full": {6: 4}}
"""n -> the number of parts of its exhaustive record (default 1): contiguous ranges of
its case list (the full profile's every graph on 6 vertices is ~0.5 M cases, the
longest single part of a parallel run), merged by :func:`exhaustive_combine` into
exactly the record of the unsplit run."""


def exhaustive_parts(profile: str, split: dict[int, int] | None = None) -> list[tuple[int, int, int]]:
    """Part keys (n, k, K) of the exhaustive record: range k of K of n's case list
    (``split``: n -> K, default :data:`EXHAUSTIVE_SPLIT`)."""
    split = EXHAUSTIVE_SPLIT[profile] if split is None else split
    return [(n, k, split.get(n, 1)) for n in EXHAUSTIVE[profile] for k in range(split.get(n, 1))]


def _exhaustive_cases(profile: str, seed: int, n: int) -> tuple[list[Case], str, str]:
    """(cases, note, family) of the exhaustive record at n: every part draws the whole
    list from the same seeded generator, so each range is the unsplit run's."""
    how = EXHAUSTIVE[profile][n]
    rng = np.random.default_rng(seed + 1000 + n)
    if how is None:
        return exhaustive_cases(n, rng), "every graph, every edge order (<= 5 edges), 3 orders beyond", "all-graphs"
    if how == "canonical":
        return (exhaustive_cases(n, rng, orders_beyond=1, all_orders=False),
                "every graph in its enumeration order (all orders: full profile)", "all-graphs")
    return sampled_cases(n, rng, how), f"{how} seeded uniform graphs, seeded order", "uniform-graphs"


def exhaustive_part(profile: str, seed: int, part: tuple[int, int, int]) -> dict:
    """Range k of K (part = (n, k, K)) of the exhaustive run at n: the three passes
    (every case; the first tenth again with '~'; every tenth case with the header)
    restricted to the cases at indices [lo, hi) of the unsplit list, each pass's
    outcome kept apart so that :func:`exhaustive_combine` can rebuild the unsplit
    order of failures."""
    n, k, K = part
    if not (K >= 1 and 0 <= k < K):
        raise ValueError(f"exhaustive part {part}: need 0 <= k < K")
    t0 = time.perf_counter()
    cases, note, fam = _exhaustive_cases(profile, seed, n)
    lo, hi = len(cases) * k // K, len(cases) * (k + 1) // K
    model = C.istree_transformer(n, n * (n - 1) // 2)
    passes = []
    for sel, kw in ((range(lo, hi), {}),
                    (range(lo, min(hi, max(1, len(cases) // 10))), {"sep": TILDE}),
                    (range(lo + (-lo) % 10, hi, 10), {"count": "always"})):
        # a tenth of the cases again with '~' between the endpoints, and with the header on every prompt
        passes.append(teacher_forced_failures(model, [cases[i] for i in sel], **kw) if len(sel) else Outcome())
    r = model.resources
    return {"n": n, "k": k, "K": K, "passes": passes, "hidden": sum(C.needs_count(*cases[i]) for i in range(lo, hi)),
            "name": model.name, "used": r.used_precision_bits, "bits": model.fmt.total_bits, "params": r.params,
            "N": model.spec.notes["n_vertices"], "note": note, "family": fam, "seconds": time.perf_counter() - t0}


def exhaustive_combine(profile: str, seed: int, outputs: list[dict]) -> list[Record]:
    """One record per n from its parts (in part order): instances, failures summed,
    the CoT maximum, the first failure of the unsplit order (every case, then the
    '~' pass, then the header pass), the used bits the maximum (the meter of one
    model over every run)."""
    recs = []
    for n in dict.fromkeys(o["n"] for o in outputs):
        mine = [o for o in outputs if o["n"] == n]
        if [o["k"] for o in mine] != list(range(mine[0]["K"])):
            raise AssertionError(f"exhaustive n={n}: parts {[o['k'] for o in mine]}, want 0..{mine[0]['K'] - 1}")
        out = Outcome()
        for j in range(3):
            for o in mine:
                p = o["passes"][j]
                out.instances, out.failures = out.instances + p.instances, out.failures + p.failures
                out.cot_max = max(out.cot_max, p.cot_max)
                out.first_failure = out.first_failure or p.first_failure
        first = mine[0]
        hidden = sum(o["hidden"] for o in mine)
        note = first["note"] + (f"; on n vertices: {hidden} graphs with isolated top vertices carry [COUNT] n "
                                f"(the model's own label), a tenth again with '~', a tenth with the header on "
                                f"every prompt")
        # the fields of _record, the used bits the maximum over the parts
        recs.append(Record("T4.7-up", first["name"], R.SPEC.name, n, out.instances,
                           out.failures, max(o["used"] for o in mine), first["bits"], out.cot_max,
                           C.cot_bound(first["N"]), first["params"], None,
                           round(sum(o["seconds"] for o in mine), 3), (note + " " + out.first_failure).strip(),
                           family=first["family"], alphabet=None, description="exhaustive (teacher-forced = greedy)"))
    return recs


@register("T4.7-up", "IsTree DFS-tour Transformer: exhaustive small graphs", parts=exhaustive_parts,
          combine=exhaustive_combine, cost=lambda part: part[0] ** 4 // part[2])
def exhaustive_check(profile: str, seed: int, part: tuple[int, int, int]) -> dict:
    """One part per range of one vertex count's cases (:func:`exhaustive_parts`)."""
    return exhaustive_part(profile, seed, part)


@register("T4.7-up", "IsTree DFS-tour Transformer: larger sparse graphs, greedy generation",
          parts=lambda p: SPARSE[p])
def sparse_check(profile: str, seed: int, part: tuple[int, int]) -> list[Record]:
    """One part per (n, count) of :data:`SPARSE`."""
    recs = []
    for n, count in [part]:
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed + 2000 + n)
        model = C.istree_transformer(n, n + 2)
        out = greedy_failures(model, sparse_cases(rng, n, count))
        recs.append(_record("families, m <= n+2 (greedy)", model, n, out, t0,
                            "trees, near-trees, paper binary/random, random m != n-1 ([COUNT] n where a top "
                            "vertex is isolated)", "random-sparse"))
    return recs


SAMPLE_NAME = "istree_official_sample.jsonl"
SAMPLE_TASK = "the paper's sample (cot_text): DFS tour token for token + true label"


@register("T4.7-up", "IsTree DFS-tour Transformer: the paper's sample rows (cot_text)")
def paper_sample_check(profile: str, seed: int) -> list[Record]:
    """Every row of the paper's sample: greedy generation on the graph of
    ``cot_text`` must write the tour of ``cot_text`` token for token (closing
    [EOS] included) and then the row's true label ``is_tree`` as its own answer
    token. Rows whose ``n_nodes`` exceeds max id + 1 (isolated top vertices)
    get the ``[COUNT] n_nodes`` header; every other row is fed exactly in the
    paper's format.
    The row's ``official_label`` (the paper generator's: connectivity only) is
    not a target; the note counts the rows where it differs from ``is_tree``.
    One model, built for the largest vertex count and edge count of the file (as
    ``rnngap predict istree`` does). The same in both profiles (64 small rows)."""
    t0 = time.perf_counter()
    path = shared_file(SAMPLE_NAME)
    if path is None:
        return [Record("T4.7-up", "istree-transformer", R.SPEC.name, 0, 0, 0, checked=False, family="paper-sample",
                       alphabet=None, seconds=round(time.perf_counter() - t0, 3),
                       note=f"NOT CHECKED: shared data file {SAMPLE_NAME} not found (set RNNGAP_SHARED_DATA)", description=SAMPLE_TASK)]
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    parsed = []
    for r in rows:
        edges, cot = parse_cot_text(r["cot_text"], r["n_nodes"])
        # the separator as written ('-' in the paper's generator; '~' if every edge has it)
        seps = parse_graph_text(r["cot_text"], r["n_nodes"])[1][2::3][:len(edges)]
        parsed.append((r, edges, cot, TILDE if edges and all(t == TILDE for t in seps) else DASH))
    if not parsed:
        return [Record("T4.7-up", "istree-transformer", R.SPEC.name, 0, 0, 1, seconds=round(time.perf_counter() - t0, 3),
                       note=f"{path} holds no rows", family="paper-sample", alphabet=None, description=SAMPLE_TASK)]
    model = C.istree_transformer(max(r["n_nodes"] for r, _, _, _ in parsed), max(len(e) for _, e, _, _ in parsed))
    out = Outcome()
    official_differs = isolated = 0
    for k, (r, edges, want, sep) in enumerate(parsed):
        n_nodes = r["n_nodes"]
        header = C.needs_count(n_nodes, edges)
        g = C.run(model, edges, sep=sep, n_nodes=n_nodes if header else None)
        out.instances += 1
        out.cot_max = max(out.cot_max, g.cot_length)
        truth = TRUE if r["is_tree"] else FALSE
        official_differs += bool(r["official_label"]) != bool(r["is_tree"])
        isolated += header
        if g.stopped != "answer" or g.cot != want:
            i = next((i for i, (a, b) in enumerate(zip(g.cot, want)) if a != b), min(len(g.cot), len(want)))
            out.fail(f"row {k} (n_nodes={n_nodes}): CoT token {i} is {g.cot[i] if i < len(g.cot) else 'missing'}, "
                     f"cot_text has {want[i] if i < len(want) else 'nothing'} ({g.stopped})")
        elif g.answer != truth:
            out.fail(f"row {k} (n_nodes={n_nodes}, header {header}): the model answers {g.answer}, "
                     f"is_tree {r['is_tree']}")
    ns = sorted({r["n_nodes"] for r in rows})
    note = (f"{len(rows)} rows, n_nodes in {ns}, one model for N={model.spec.notes['n_vertices']}, "
            f"M={model.spec.notes['max_edges']}; labels compared with is_tree (networkx), the true label: "
            f"official_label (connectivity only) differs from it on {official_differs} rows, where rnngap's label "
            f"is the true one; {isolated} rows have isolated vertices above the largest id and get the [COUNT] "
            f"n_nodes header (the label is the model's own answer on every row)")
    return [_record(SAMPLE_TASK, model, max(ns), out, t0, note if not out.failures else "", "paper-sample")]


# ----------------------------------------------------------------------------
# the hard family: the image of the Index -> IsTree hub gadget
REDUCTION = {"quick": {"exhaustive": (1, 2, 3, 4, 5, 6), "sampled": ((16, 8), (64, 4), (256, 2))},
             "full": {"exhaustive": tuple(range(1, 11)), "sampled": ((16, 64), (64, 32), (256, 8), (1024, 2))}}
"""Index lengths n of the gadget (N = n + 3 vertices, n + 2 edges): every x and i,
and (n, count) seeded samples."""


def gadget_pairs(n: int, rng: np.random.Generator | None = None, count: int | None = None) -> list[tuple]:
    """(x, i) pairs of the Index instances: all of them (``count`` None), else
    ``count`` seeded ones, every second with i = n (the queried vertex's edge is
    the last of Alice's prefix, adjacent to Bob's suffix: the far end of the
    retrieval)."""
    if count is None:
        return [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
    out = []
    for k in range(count):
        x = tuple(int(b) for b in rng.integers(0, 2, size=n))
        out.append((x, n if k % 2 else int(rng.integers(1, n + 1))))
    return out


def gadget_cases(n: int, pairs: Sequence[tuple], out: Outcome) -> list[Case]:
    """The gadget instances as (N, edges), N = n + 3; a pair whose networkx label
    is not the Index answer (x_i = 0 iff tree) is a failure of the family
    (``out``), independent of the model."""
    N = LR.istree_vertex_count(n)
    cases = []
    for x, i in pairs:
        edges = parse_graph_tokens([int(t) for t in LR.ISTREE.instance(x, i)], N)
        if R.reference_label(N, edges) != (x[i - 1] == 0):
            out.fail(f"gadget x={x} i={i}: networkx label {R.reference_label(N, edges)} but x_i = {x[i - 1]}")
        cases.append((N, edges))
    return cases


def _reduction_runs(profile: str) -> list[tuple[int, int | None]]:
    cfg = REDUCTION[profile]
    return [(n, None) for n in cfg["exhaustive"]] + list(cfg["sampled"])


@register("T4.7-up", "IsTree DFS-tour Transformer: the image of the Index -> IsTree hub gadget",
          parts=_reduction_runs)
def reduction_check(profile: str, seed: int, part: tuple[int, int | None]) -> list[Record]:
    """Teacher-forced (= greedy) on the hub gadget's instances, N = n + 3 vertices,
    each instance twice: with the ``[COUNT] N`` header and in the paper's format
    (the gadget mentions vertex n + 2 = N - 1, so N is visible either way)."""
    recs = []
    for n, count in [part]:          # one part per run (n, count) of _reduction_runs
        t0 = time.perf_counter()
        out = Outcome()
        rng = np.random.default_rng(seed + 4000 + n)
        cases = gadget_cases(n, gadget_pairs(n, rng, count), out)
        model = C.istree_transformer(n + 3, n + 2)
        teacher_forced_failures(model, cases, out=out, count="always")
        teacher_forced_failures(model, cases, out=out, count="never")
        what = "every x in {0,1}^n and every i" if count is None else \
            f"{count} seeded (x, i), every second with i = n"
        recs.append(_record("Index -> IsTree hub gadget (teacher-forced = greedy)", model, n, out, t0,
                            f"{what}; N = n + 3 = {n + 3} vertices, each instance with [COUNT] N and without "
                            f"(vertex N - 1 is mentioned); alphabet: vertex numbers 0..{n + 2}", "reduction"))
    return recs


TWO_LIMB = {"quick": ((1700, "gadget", 2),), "full": ((1700, "gadget", 2), (2000, "mixed", 2), (10000, "gadget", 2))}
"""(N, family, count) runs of the IsTree Transformer built for ANY simple graph on N
vertices (max_edges N(N - 1) / 2, so T ~ 1.5 N^2 positions): its declared format
leaves int64 past N = 1,672 (Q63.1 at 2,000, Q76.1 at 10^4: two-limb storage).
``gadget``: the Index -> IsTree hub gadget at n = N - 3 (x random, i = n, the
answer x_n alternating: a tree and a graph with a cycle); ``mixed``: the random
families of checks.tasks.istree. Greedy generation (sessions: the lookup and
tie-break heads use the key-value index on two limbs) against the reference tour
and label, with the ``[COUNT] N`` header. About 30 s per instance at 10^4 vertices
(a prompt of 3 10^4 tokens and a CoT of 2 10^4)."""


def _two_limb_runs(profile: str) -> list[tuple[int, str, int]]:
    return list(TWO_LIMB[profile])


@register("T4.7-up", "IsTree DFS-tour Transformer for any simple graph, past the int64 limit (two limbs)",
          parts=_two_limb_runs)
def two_limb_check(profile: str, seed: int, part: tuple[int, str, int]) -> list[Record]:
    """The model whose format holds every simple graph on N vertices, past where that
    format fits int64; fails with NOT PAST INT64 if it ran in int64 storage."""
    N, family, count = part
    t0 = time.perf_counter()
    out = Outcome()
    rng = np.random.default_rng(seed + 7000 + N)
    if family == "gadget":
        n = N - 3
        pairs = []
        for k in range(count):
            x = [int(b) for b in rng.integers(0, 2, size=n)]
            x[n - 1] = k % 2
            pairs.append((tuple(x), n))
        cases = gadget_cases(n, pairs, out)
        what = f"the Index -> IsTree hub gadget at n = {n} ({count} seeded x, i = n, x_n = 0 and 1)"
    else:
        cases = [(N, list(inst.edges)) for inst in R.generate(rng, N, count, family=family)]
        what = f"{count} seeded graphs of the {family} families"
    model = C.istree_transformer(N, N * (N - 1) // 2)
    greedy_failures(model, cases, out=out, count="always")
    past = model.fmt.wide
    if not past:
        out.failures = max(1, out.failures)
    rec = _record("any simple graph, past int64: greedy CoT + label", model, N, out, t0,
                  ("" if past else "NOT PAST INT64: ") + f"{model.fmt.name}; {what}; N = {N} vertices, "
                  f"built for up to N(N-1)/2 = {N * (N - 1) // 2} edges; [COUNT] N header",
                  "reduction" if family == "gadget" else "random")
    return [rec]


NECESSITY_N = {"quick": (3,), "full": (3, 5)}


def greedy_runner(cases: Sequence[tuple[int, list, bool]]):
    """A :data:`checks.verify.necessity.RunFn`: greedy generation of every case (n_nodes,
    edges, header?) to completion, the label compared with the reference's, then
    the tour and [EOS] token for token (:func:`checks.verify.necessity.classify`)."""
    prompts = [case_prompt(k, e, count="always" if h else "never") for k, e, h in cases]
    wants = [R.reference_cot(k, e) for k, e, _ in cases]

    def run(model) -> RunOutcome:
        bound = C.cot_bound(model.spec.notes["n_vertices"])
        out = RunOutcome(len(cases))
        for (k, e, h), p, want in zip(cases, prompts, wants):
            name = f"N={k} edges={e} header={h}"
            try:
                g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=bound)
            except Exception as exc:   # never a wrong answer (checks/verify/necessity.py)
                out.add("raised", f"{name}: {type(exc).__name__}: {str(exc)[:100]}")
                continue
            classify(out, name, g.answer, want[-1], g.cot, want[:-1], g.cot_length)
        return out
    return run


@register("T4.7-up", "IsTree DFS-tour Transformer: necessity of the declared bits (saturate mode)")
def necessity_check(profile: str, seed: int) -> list[Record]:
    """Integer- and fraction-bit frontiers on the hub gadget's instances (every x
    and i, with and without the header), greedy CoT against the reference."""
    recs = []
    for n in NECESSITY_N[profile]:
        N, M = n + 3, n + 2
        scratch = Outcome()
        cases = gadget_cases(n, gadget_pairs(n), scratch)
        both = [(k, e, h) for k, e in cases for h in (True, False)]
        model = C.istree_transformer(N, M)
        rec = necessity_record("T4.7-up", model.name, "Index -> IsTree hub gadget, greedy CoT + label", n,
                               task=R.SPEC.name, family="reduction", alphabet=None, declared=model.fmt, run=greedy_runner(both),
                               instances=len(both), model=model,
                               build_frac=lambda fmt: C.istree_transformer(N, M, fmt=fmt))
        rec.cot_bound = C.cot_bound(N)
        if scratch.failures:
            rec.failures += scratch.failures
            rec.note = f"gadget family broken: {scratch.first_failure} | " + rec.note
        recs.append(rec)
    return recs


# ----------------------------------------------------------------------------
# claim T4.7-low: a bounded-memory RNN that really solves IsTree on small graphs,
# broken by the witness finder through the Index -> IsTree reduction
class AdjacencyRNN:
    """An RNN (constructions/build/protocol.py) that stores the adjacency matrix of the
    vertices 0..K-1 and answers IsTree for the vertex set {0..max id}: correct on
    every simple graph whose vertices are all < K (any edge order, checked
    exhaustively by the T4.7-low check), with a bounded state.

    State ``(adj, phase, pending, maxv, m, stage, k)``: ``adj`` the K(K-1)/2 pair
    bits, ``phase`` the place in a ``u - v`` triple (0 first endpoint or [EOS],
    1 separator, 2 second endpoint), ``pending`` the first endpoint, ``maxv`` the
    largest vertex id and ``m`` the number of edges (all three capped at K: "K or
    more"), ``stage`` 1 after [EOS], ``k`` the CoT tokens read (capped at 2K+1).
    An edge with an endpoint >= K is counted but not stored; then the answer is
    [FALSE]. With ``cot=True`` it first writes the DFS Euler tour of its stored
    graph (neighbours in increasing order, 0's component) and [EOS]: a chain of
    thought that does real work and still cannot help (the witness shows it).
    """

    def __init__(self, K: int, cot: bool = True):
        if K < 2:
            raise ValueError(f"AdjacencyRNN needs K >= 2, got {K}")
        self.K, self.cot = int(K), bool(cot)
        self.widths = (K * (K - 1) // 2, 2, width(K), width(K), width(K), 1, width(2 * K + 1))
        self.state_bits = sum(self.widths)

    def initial_state(self):
        return (0, 0, 0, 0, 0, 0, 0)

    def _bit(self, a: int, b: int) -> int:
        a, b = max(a, b), min(a, b)
        return 1 << (a * (a - 1) // 2 + b)

    def step(self, state, token: int):
        adj, phase, pending, maxv, m, stage, k = state
        K, token = self.K, int(token)
        if stage == 1:
            return (adj, phase, pending, maxv, m, stage, min(k + 1, 2 * K + 1))
        if token == EOS:
            return (adj, phase, pending, maxv, m, 1, k)
        if token in (DASH, TILDE):
            return (adj, 2, pending, maxv, m, stage, k)
        if token >= NUMBER_BASE:
            v = min(token - NUMBER_BASE, K)
            if phase == 0:
                return (adj, 1, v, max(maxv, v), m, stage, k)
            if pending < K and v < K:
                adj |= self._bit(pending, v)
            return (adj, 0, 0, max(maxv, v), min(m + 1, K), stage, k)
        return state                                    # [BOS]

    def _tour(self, adj: int, N: int) -> list[int]:
        nb = [[b for b in range(N) if b != a and adj & self._bit(a, b)] for a in range(N)]
        tour, seen = [0], {0}

        def visit(a):
            for b in nb[a]:
                if b not in seen:
                    seen.add(b)
                    tour.append(b)
                    visit(b)
                    tour.append(a)
        visit(0)
        return tour

    def _answer(self, adj: int, maxv: int, m: int) -> int:
        if maxv >= self.K:
            return FALSE
        N = maxv + 1
        return TRUE if m == N - 1 and len(set(self._tour(adj, N))) == N else FALSE

    def output(self, state) -> int:
        adj, _, _, maxv, m, stage, k = state
        if stage == 0:
            return number_token(0)
        cot = [number_token(v) for v in self._tour(adj, min(maxv, self.K - 1) + 1)] + [EOS] if self.cot else []
        return cot[k] if k < len(cot) else self._answer(adj, maxv, m)

    def state_key(self, state) -> bytes:
        return pack_fields(state, self.widths)


def _verify_istree_witness(rnn, w, max_cot: int) -> str:
    """Independent re-check of a witness (plain-Python references, not the
    witness module): both instances are valid IsTree inputs on N = n + 3
    vertices, the prefixes give equal state keys, the model answers both alike,
    and on each instance listed as failing its answer is not the tree label."""
    if not w.found:
        return f"no witness: {w.how}"
    N = LR.istree_vertex_count(w.n)
    if rnn.state_key(feed(rnn, LR.ISTREE.alice(w.x))) != rnn.state_key(feed(rnn, LR.ISTREE.alice(w.x_prime))):
        return "prefix states differ"
    runs = []
    for toks in (w.tokens, w.tokens_prime):
        edges = parse_graph_tokens(toks, N)
        r = run_rnn(rnn, list(toks), (TRUE, FALSE), max_cot)
        runs.append((r.answer, TRUE if R.reference_label(N, edges) else FALSE))
    if runs[0][0] != runs[1][0] or runs[0][1] == runs[1][1]:
        return f"not a fooling pair: {runs}"
    wrong = [lab for lab, (got, want) in zip(("x", "x'"), runs) if got != want]
    if not wrong or tuple(wrong) != tuple(w.wrong):
        return f"failing instances {wrong} disagree with the witness {w.wrong}"
    return ""


@register("T4.7-low", "IsTree: bounded-memory RNNs broken through the Index -> IsTree reduction")
def istree_lower_bound_check(profile: str, seed: int) -> list[Record]:
    recs = []
    # the reduction itself, exhaustively, against the networkx label on N = n + 3 vertices
    for n in ({"quick": (1, 2, 3, 4, 6, 8), "full": tuple(range(1, 13))}[profile]):
        t0 = time.perf_counter()
        try:
            chk = LR.check_reduction(
                LR.ISTREE, n, LR.istree_answer_from_label(R.reference_label, LR.istree_vertex_count(n)))
            recs.append(Record("T4.7-low", "reduction", R.SPEC.name, n,
                               chk.instances, 0, seconds=round(time.perf_counter() - t0, 3),
                               family="reduction", alphabet=None, note=f"N = n + 3 = {n + 3} vertices", description="Index -> IsTree (hub gadget), every x and i"))
        except AssertionError as e:
            recs.append(Record("T4.7-low", "reduction", R.SPEC.name, n, 1, 1,
                               seconds=round(time.perf_counter() - t0, 3), note=str(e)[:200],
                               family="reduction", alphabet=None, description="Index -> IsTree (hub gadget)"))
    # an RNN that solves IsTree on every graph with vertices < K (checked here), with a CoT
    K = 5
    rnn = AdjacencyRNN(K, cot=True)
    max_cot = 2 * K + 1
    t0 = time.perf_counter()
    bad, count, cot_max = 0, 0, 0
    rng = np.random.default_rng(seed + 17)
    cases = [c for n in range(1, K) for c in exhaustive_cases(n, rng)]
    cases += exhaustive_cases(K, rng) if profile == "full" else \
        exhaustive_cases(K, rng, orders_beyond=2, all_orders=False)
    for _, order in cases:
        r = run_rnn(rnn, graph_tokens(order), (TRUE, FALSE), max_cot)
        want = TRUE if R.reference_label(C.model_vertex_count(order), order) else FALSE
        bad += r.answer != want
        count += 1
        cot_max = max(cot_max, len(r.cot))
    recs.append(Record("T4.7-low", f"adjacency-rnn(K={K})", R.SPEC.name, K,
                       count, bad, cot_max=cot_max, cot_bound=max_cot, state_bits=rnn.state_bits,
                       seconds=round(time.perf_counter() - t0, 3), family="all-graphs", alphabet=None,
                       note="every graph on < K vertices in every edge order; on K vertices: " +
                       ("every order up to 5 edges, 3 beyond" if profile == "full" else "two orders each"), description="solves IsTree on every graph with vertices < K"))
    # ... and the witness finder breaks it once the gadget has more than K vertices
    n = K - 1
    t0 = time.perf_counter()
    w = W.find_witness(rnn, LR.ISTREE, n, mode="exhaustive", max_cot=max_cot)
    why = _verify_istree_witness(rnn, w, max_cot)
    recs.append(Record("T4.7-low", f"adjacency-rnn(K={K})", R.SPEC.name, n, 2,
                       0 if not why else 1, state_bits=rnn.state_bits, seconds=round(time.perf_counter() - t0, 3),
                       family="reduction", alphabet=None, note=why or f"x={w.x} x'={w.x_prime} i={w.i}: wrong on {w.wrong} (CoT {len(w.cot)} tokens)", description="fooling pair via Index -> IsTree (exhaustive)"))
    # pigeonhole: any s-bit RNN with s < n collides; a hashing RNN, birthday search with a seed
    for s_bits, n in ({"quick": ((16, 24),), "full": ((16, 24), (24, 40))}[profile]):
        t0 = time.perf_counter()
        h = HashRNN(s_bits, answer_tokens=(TRUE, FALSE))
        w = W.find_witness(h, LR.ISTREE, n, mode="birthday", seed=seed + s_bits)
        why = _verify_istree_witness(h, w, 0)
        recs.append(Record("T4.7-low", f"hash-rnn(s={s_bits})", R.SPEC.name, n, 2,
                           0 if not why else 1, state_bits=h.state_bits, seconds=round(time.perf_counter() - t0, 3),
                           family="reduction", alphabet=None, note=why or f"{w.states_explored} draws; wrong on {w.wrong} at i={w.i}", description="fooling pair via Index -> IsTree (birthday)"))
    return recs
