"""Checks of claim T5.6: a constant-size hybrid (linear-RNN layers + ONE attention
layer, constructions/models/hybrid.py) solves Index, AR, c-gram and Counting with no CoT,
and IsTree with CoT O(N log N).

Every hybrid is checked on the image of the lower bound's Index reduction, with
the reduction's alphabet (docs/theory.md §1 "Where the theorem bites"):
exhaustively at small n, then seeded samples with adversarial queries as far as
the declared format fits int64, and past int64 in two-limb storage. IsTree runs
the hub gadget and sparse random graphs, its union-find CoT compared token by
token with ``checks.tasks.istree_unionfind.unionfind_cot``. Records have
``family="reduction"``; easy families are extra rows. Necessity records give
saturate-mode frontiers; :func:`hybrid_separation_check` adds separation records
with the hybrid as the constant-size side.

Details (sizes, records, rows that do not exist and why):
docs/internals/verify.md#checks_hybrid
"""
from __future__ import annotations

import itertools
import math
import time

import numpy as np

from rnngap.constructions.models import hybrid as H
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import FALSE, NUMBER_BASE, TRUE
from rnngap.lowerbounds import reductions as LR

from rnngap.checks.catalog.records import RETRIEVAL_TASKS, retrieval_model
from rnngap.checks.io.formats import graph_tokens
from . import checks_separation as _S
from .checks_foundation import closest_comparisons
from .necessity import batch_runner, generation_runner, necessity_record
from .registry import Record, register
from rnngap.checks.tasks import istree
from rnngap.checks.tasks import task as task_spec
from rnngap.checks.tasks.istree_unionfind import unionfind_cot
from .forcing import forced_continuations

TASKS = RETRIEVAL_TASKS
"""The retrieval tasks by family (their specs: ``task_spec(name)``; ``cgram`` is c = C = 3)."""
EXHAUSTIVE = {"quick": {"index": 6, "ar": 6, "cgram": 6, "counting": 5},
              "full": {"index": 8, "ar": 8, "cgram": 8, "counting": 7}}
EXHAUSTIVE_FROM = {"quick": None, "full": 1}
"""Easy rows: every instance at alphabet 3 for each n from this (None: the largest
n only) to EXHAUSTIVE's."""
SAMPLED = {"quick": [64, 512], "full": [64, 256, 1024, 4096]}
SAMPLE = {"quick": 100, "full": 1000}
ALPHABET_SMALL = 3
ALPHABET_LARGE = 4
C = 3


def build(task: str, n: int, alphabet: int):
    return retrieval_model(task, "hybrid", n, alphabet=alphabet, c=C)


def declared(task: str):
    return H.cgram_declared(C) if task == "cgram" else H.DECLARED[task]


def reference(task: str, tokens) -> np.ndarray:
    ref = task_spec(task).reference_at()
    return np.array([ref(list(map(int, row))) for row in tokens], dtype=np.int64)


def answer_counts(answers) -> str:
    """``answers: 0 x 12, 1 x 11`` over the model's answer tokens (numbers shown as
    numbers). A row whose model answers one token on its whole family says so."""
    vals, counts = np.unique(np.asarray(answers, dtype=np.int64), return_counts=True)
    show = {TRUE: "[TRUE]", FALSE: "[FALSE]"}
    return "answers: " + ", ".join(f"{show.get(int(v), int(v) - NUMBER_BASE)} x {int(c)}"
                                   for v, c in zip(vals, counts))


def _record(task, model, n, toks, what, t0, family: str, alphabet: int) -> Record:
    want = reference(task, toks)
    got = model.predict_batch(toks)
    r = model.resources
    return Record("T5.6", model.name, task_spec(task).name, n, len(toks), int((got != want).sum()),
                  r.used_precision_bits, declared(task).format(n).total_bits, 0, 0, r.params, r.state_bits,
                  round(time.perf_counter() - t0, 3),
                  note=f"no CoT; {len(model.spec.rnn_layers)} RNN layer(s) + 1 attention layer; "
                       f"{answer_counts(got)}", family=family, alphabet=alphabet, description=f"{task} ({what})")


def _retrieval_parts(profile: str) -> list[tuple[str, str, int]]:
    """(task, "exhaustive" | "sampled", n) in the order of the records."""
    out = []
    for task in TASKS:
        lo = task_spec(task).min_n
        hi = EXHAUSTIVE[profile][task]
        start = EXHAUSTIVE_FROM[profile]
        out += [(task, "exhaustive", n) for n in range(max(lo, start) if start else hi, hi + 1)]
        out += [(task, "sampled", n) for n in SAMPLED[profile]]
    return out


@register("T5.6", "hybrid: Index / AR / c-gram / Counting with no CoT (easy families, extra)", parts=_retrieval_parts)
def hybrid_retrieval_check(profile: str, seed: int, part: tuple[str, str, int]) -> list[Record]:
    """Extra coverage off the lower bound's family: every instance at alphabet 3
    and seeded random instances at alphabet 4 (Counting with 'near' thresholds).
    One part per (task, how, n) of :func:`_retrieval_parts`."""
    out = []
    task, how, n_part = part
    for spec in [task_spec(task)]:
        for n in [n_part] if how == "exhaustive" else []:
            t0 = time.perf_counter()
            batch = spec.enumerate_all(n, alphabet=ALPHABET_SMALL)
            model = build(task, n, ALPHABET_SMALL)
            out.append(_record(task, model, n, np.asarray(batch.tokens), "exhaustive", t0, "exhaustive",
                               ALPHABET_SMALL))
        for n in [n_part] if how == "sampled" else []:
            t0 = time.perf_counter()
            rng = np.random.default_rng([seed, n, list(TASKS).index(task)])
            gkw = {"threshold": "near"} if task == "counting" else {}
            batch = spec.generate(rng, n, SAMPLE[profile], alphabet=ALPHABET_LARGE, **gkw)
            model = build(task, n, ALPHABET_LARGE)
            out.append(_record(task, model, n, np.asarray(batch.tokens), f"{SAMPLE[profile]} seeded samples", t0,
                               "random", ALPHABET_LARGE))
    return out


# ----------------------------------------------------------------------------
# the lower bound's family: the image of the Index reduction
REDUCTION_TASKS = ("index", "ar", "cgram2", "cgram3", "cgram4", "counting")
REDUCTION_EXHAUSTIVE = {"quick": [4, 8], "full": list(range(1, 11))}
REDUCTION_MAX_LOG2 = {"index": 14, "ar": 12, "cgram2": 12, "cgram3": 11, "cgram4": 11, "counting": 12}
"""Largest k sampled with n = 2^k reduction bits. For AR, c-gram and Counting it is
the largest k whose hybrid (data length c n for c-gram, 2 n for AR) fits int64:
at 2^(k+1) the declared format needs I + f > 62 (tests/test_hybrid.py checks both
sides). Index stops at the issue's 2^14; its format fits further (2^15: Q37.17)."""
REDUCTION_SAMPLED_LOG2 = {"quick": [4, 8], "full": [4, 6, 8, 10]}
"""Sampled n = 2^k for these k, then REDUCTION_MAX_LOG2 (and 2^12 for Index) too."""
REDUCTION_SAMPLE = {"quick": (12, 3), "full": (48, 6)}
"""(random x per n, random i per x); each x also gets i = n and i = n - 1."""
REDUCTION_TWO_LIMB_LOG2 = {"quick": (0,), "full": (0, 2)}
"""Past int64: n = 2^(k0 + d) reduction bits for these d, k0 the first k >= 16
whose declared format needs two limbs (constructions/machine/wide_exec.py): 16 for AR,
c-gram and Counting (AR data length 2^17), 18 for Index. A hybrid attends only
at its last position, so a row costs O(L) wide steps."""
REDUCTION_TWO_LIMB_SAMPLE = {"quick": (0, 1), "full": (4, 2)}
"""The smaller sample there: (random x, random i per x), each x with i = n, n - 1 too,
plus x = 0^n and 1^n at i = n (the quick profile: only those two rows, one per answer)."""


def reduction_of(task: str) -> LR.Reduction:
    return task_spec(task).reduction


def data_length(task: str, n: int) -> int:
    """The data length the reduction writes for n bits (positions 1..L; the task spec's)."""
    return task_spec(task).data_length(n)


def reduction_alphabet(task: str, n: int) -> int:
    """Numbers 0..a-1 the reduction writes (the task spec's): bits (Index), values
    0/1 and keys 2..n+1 (AR, c-gram), marks 0..n (Counting)."""
    return task_spec(task).reduction_alphabet(n)


def build_reduction_model(task: str, n: int, fmt=None):
    L, a = data_length(task, n), reduction_alphabet(task, n)
    spec = task_spec(task)
    if spec.family == "cgram":
        return retrieval_model("cgram", "hybrid", L, alphabet=a, c=spec.c, fmt=fmt)
    return retrieval_model(task, "hybrid", L, alphabet=a, fmt=fmt)


def declared_for(task: str, n: int):
    """The declared format of the hybrid for the reduction at n bits."""
    L = data_length(task, n)
    spec = task_spec(task)
    decl = H.cgram_declared(spec.c) if spec.family == "cgram" else H.DECLARED[task]
    return decl.format(L)


def reduction_rows(red: LR.Reduction, n: int, rng: np.random.Generator | None, sample=(12, 3)):
    """(tokens [B, L], expected answers [B], queries i [B]) on the reduction's image:
    every (x, i) if ``rng`` is None, else ``sample[0]`` random x with ``sample[1]``
    random i each, plus i = n, n - 1 for each, plus x = 0^n and 1^n at i = n."""
    if rng is None:
        pairs = [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
    else:
        nx, ni = sample
        xs = [tuple(int(b) for b in rng.integers(0, 2, size=n)) for _ in range(nx)]
        pairs = [(x, int(i)) for x in xs for i in list(rng.integers(1, n + 1, size=ni)) + [n, max(1, n - 1)]]
        pairs += [((0,) * n, n), ((1,) * n, n)]
    toks = np.array([red.instance(x, i) for x, i in pairs], dtype=np.int64)
    want = np.array([red.expected(x, i) for x, i in pairs], dtype=np.int64)
    return toks, want, np.array([i for _, i in pairs], dtype=np.int64)


def reduction_record(task: str, n: int, seed: int | None, sample=(12, 3)) -> Record:
    """One T5.6 row on the reduction's image (exhaustive if seed is None)."""
    t0 = time.perf_counter()
    red = reduction_of(task)
    rng = None if seed is None else np.random.default_rng([seed, n, REDUCTION_TASKS.index(task), 56])
    toks, want, qs = reduction_rows(red, n, rng, sample)
    model = build_reduction_model(task, n)
    got = model.predict_batch(toks)
    bad = np.flatnonzero(got != want)
    r = model.resources
    what = "every x, every i" if seed is None else f"{len(toks)} seeded (x, i), i = n and n - 1 included"
    first = f"; FIRST WRONG {toks[bad[0]].tolist()[:12]}... -> {int(got[bad[0]])}" if len(bad) else ""
    return Record("T5.6", model.name, task_spec(task).name, n, len(toks), len(bad),
                  r.used_precision_bits, model.fmt.total_bits, 0, 0, r.params, r.state_bits,
                  round(time.perf_counter() - t0, 3),
                  note=(f"Index -> {red.name}: data length {data_length(task, n)}, largest query i = {int(qs.max())}; "
                        f"{answer_counts(got)}{first}"),
                  family="reduction", alphabet=reduction_alphabet(task, n),
                  description=f"{red.name} reduction ({what})")


def reduction_sizes(task: str, profile: str) -> list[int]:
    ks = [k for k in REDUCTION_SAMPLED_LOG2[profile] if k < REDUCTION_MAX_LOG2[task]]
    ks += [12] if task == "index" and profile == "quick" else []
    return [1 << k for k in sorted(set(ks + [REDUCTION_MAX_LOG2[task]]))]


def two_limb_sizes(task: str, profile: str) -> list[int]:
    """The n of the two-limb records (:data:`REDUCTION_TWO_LIMB_LOG2`)."""
    k0 = 16
    while not declared_for(task, 1 << k0).wide:
        k0 += 1
    return [1 << (k0 + d) for d in REDUCTION_TWO_LIMB_LOG2[profile]]


def _reduction_parts(profile: str) -> list[tuple[str, str, int]]:
    return [(task, how, n) for task in REDUCTION_TASKS
            for how, ns in (("exhaustive", REDUCTION_EXHAUSTIVE[profile]), ("sampled", reduction_sizes(task, profile)),
                            ("two-limb", two_limb_sizes(task, profile)))
            for n in ns]


@register("T5.6", "hybrid: Index / AR / c-gram / Counting on the image of the Index reduction",
          parts=_reduction_parts)
def hybrid_reduction_check(profile: str, seed: int, part: tuple[str, str, int]) -> list[Record]:
    """One part per (task, "exhaustive" | "sampled", n)."""
    task, how, n = part
    if how == "exhaustive":
        return [reduction_record(task, n, None)]
    if how == "two-limb":
        rec = reduction_record(task, n, seed, REDUCTION_TWO_LIMB_SAMPLE[profile])
        wide = declared_for(task, n).wide
        if not wide:                      # the record is meant to run past int64: say so if it does not
            rec.failures, rec.note = max(rec.failures, 1), "NOT PAST INT64: " + rec.note
        return [rec]
    return [reduction_record(task, n, seed, REDUCTION_SAMPLE[profile])]


ISTREE_REDUCTION = {"quick": ([3, 4], [16, 64, 256], 3), "full": ([1, 2, 3, 4, 5, 6], [16, 32, 64, 128, 256], 12)}
"""(exhaustive n, sampled n, random x per sampled n) of the hub gadget; the gadget
at n bits has N = n + 3 vertices and n + 2 edges (its declared format fits int64
up to n = 320)."""
ISTREE_REDUCTION_TWO_LIMB = {"quick": [330], "full": [330, 1000]}
"""Hub-gadget n past int64 (two-limb storage), one random x each (5 rows): about
4 s at n = 330 (Q47.16[2x64])."""


def istree_reduction_record(n: int, seed: int | None, nx: int = 4) -> Record:
    """The IsTree hybrid (N = n + 3, m_max = n + 2) on the hub gadget: answer and
    the union-find CoT token for token (exhaustive if seed is None, else nx random
    x with i = n, n - 1 and one random i, plus 0^n and 1^n at i = n)."""
    t0 = time.perf_counter()
    red = LR.ISTREE
    N, m = LR.istree_vertex_count(n), n + 2
    rng = None if seed is None else np.random.default_rng([seed, n, 57])
    toks, want, qs = reduction_rows(red, n, rng, (nx, 1))
    model = H.istree_hybrid(N, m_max=m)
    bad, cot_max, first, got = 0, 0, "", []
    for row, w in zip(toks, want):
        edges = LR.parse_istree(row)[1]
        ref_cot, ref_answer = unionfind_cot(N, edges)
        g = generate(model, row.tolist(), answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
        got.append(g.answer if g.answer is not None else -1)
        ok = g.answer == w == ref_answer and g.cot == ref_cot
        bad += not ok
        cot_max = max(cot_max, g.cot_length)
        if not ok and not first:
            first = f"; FIRST WRONG {row.tolist()[:12]}...: answer {g.answer}, want {int(w)}, CoT equal {g.cot == ref_cot}"
    r = model.resources
    what = "every x, every i" if seed is None else f"{len(toks)} seeded (x, i), i = n and n - 1 included"
    return Record("T5.6", model.name, istree.SPEC.name, n, len(toks), bad,
                  r.used_precision_bits, model.fmt.total_bits, cot_max, H.istree_cot_bound(N), r.params,
                  r.state_bits, round(time.perf_counter() - t0, 3),
                  note=f"N = n + 3 = {N} vertices, {m} edges, largest i = {int(qs.max())}; union-find CoT equal to "
                       f"the reference; {answer_counts(got)}{first}", family="reduction", alphabet=None,
                  description=f"IsTree hub-gadget reduction ({what})")


def _istree_reduction_parts(profile: str) -> list[tuple[str, int]]:
    exh, sampled, _ = ISTREE_REDUCTION[profile]
    return [("exhaustive", n) for n in exh] + [("sampled", n) for n in sampled] + \
        [("two-limb", n) for n in ISTREE_REDUCTION_TWO_LIMB[profile]]


@register("T5.6", "hybrid IsTree (CoT) on the image of the Index -> IsTree hub gadget", parts=_istree_reduction_parts)
def hybrid_istree_reduction_check(profile: str, seed: int, part: tuple[str, int]) -> list[Record]:
    how, n = part
    if how == "two-limb":
        rec = istree_reduction_record(n, seed, 1)
        if rec.precision_bits_declared <= 63:         # meant to run past int64: say so if it does not
            rec.failures, rec.note = max(rec.failures, 1), "NOT PAST INT64: " + rec.note
        return [rec]
    return [istree_reduction_record(n, None) if how == "exhaustive"
            else istree_reduction_record(n, seed, ISTREE_REDUCTION[profile][2])]


# ----------------------------------------------------------------------------
# necessity (saturate mode) on the reduction's image
NECESSITY_N = {"quick": {"retrieval": [4], "istree": [3]}, "full": {"retrieval": [4, 8], "istree": [3, 5]}}
NECESSITY_TASKS = ("index", "ar", "cgram3", "counting")


def istree_runner(n: int):
    """A necessity ``run(model)`` over every hub-gadget instance at n bits: the
    answer and the union-find CoT token for token, every instance run to completion
    and classified (:class:`checks.verify.necessity.Outcome`)."""
    N = LR.istree_vertex_count(n)
    toks, want, _ = reduction_rows(LR.ISTREE, n, None)
    cases = [(row.tolist(), int(w), unionfind_cot(N, LR.parse_istree(row)[1])[0]) for row, w in zip(toks, want)]

    return generation_runner(cases, H.istree_cot_bound(N), lambda p: f"[{' '.join(map(str, p[:10]))} ...]"), \
        len(cases)


@register("T5.6", "necessity: each hybrid's frontiers (saturate) on the reduction's image, wrong one bit below")
def hybrid_necessity_check(profile: str, seed: int) -> list[Record]:
    out = []
    for task in NECESSITY_TASKS:
        for n in NECESSITY_N[profile]["retrieval"]:
            toks, want, _ = reduction_rows(reduction_of(task), n, None)
            model = build_reduction_model(task, n)
            what = f"{reduction_of(task).name} reduction (every x, every i)"
            build_frac = (lambda fmt, task=task, n=n: build_reduction_model(task, n, fmt))
            if task == "counting":
                # the reduction asks only count > 0; the declared f is sized for the
                # closest comparisons (c = L, t = L - 1, L), added with the
                # same alphabet; below the declared f the comparison's margin is
                # not asserted (the run decides): one bit below the frontier is wrong
                L, a = data_length(task, n), reduction_alphabet(task, n)
                close = closest_comparisons(L, a)
                toks = np.concatenate([toks, close])
                want = np.concatenate([want, [task_spec(task).reference(list(map(int, r))) for r in close]])
                what += f" + the {len(close)} closest comparisons [BOS] q^{L} [QUERY] q t, t = {L - 1}, {L}"
                build_frac = (lambda fmt, L=L, a=a: H.counting_hybrid(L, alphabet=a, fmt=fmt, check_margins=False))
            out.append(necessity_record("T5.6", model.name, what,
                                        n, task=task_spec(task).name, family="reduction",
                                        alphabet=reduction_alphabet(task, n),
                                        declared=declared_for(task, n), run=batch_runner(toks, want), model=model,
                                        instances=len(toks), build_frac=build_frac))
    for n in NECESSITY_N[profile]["istree"]:
        run, count = istree_runner(n)
        N, m = LR.istree_vertex_count(n), n + 2
        model = H.istree_hybrid(N, m_max=m)
        out.append(necessity_record("T5.6", model.name, "IsTree hub-gadget reduction (every x, every i, CoT)", n,
                                    task=istree.SPEC.name, family="reduction", alphabet=None, declared=model.fmt, run=run, model=model,
                                    instances=count,
                                    build_frac=lambda fmt, N=N, m=m: H.istree_hybrid(N, m_max=m, fmt=fmt)))
    return out


# ----------------------------------------------------------------------------
# IsTree with CoT O(N log N) (union-find by size; constructions/models/hybrid.py)
ISTREE_EXHAUSTIVE = {"quick": 4, "full": 5}
ISTREE_SAMPLED = {"quick": [(16, 20), (64, 8), (200, 3)], "full": [(16, 100), (64, 40), (200, 20), (256, 10)]}
ISTREE_SPARSE = ("tree", "near_tree", "paper_binary", "paper_random")
"""Families with at most N edges. The declared bits grow like 3 log2(3 m + CoT) in the
number m of input edges (positions are keys of the fetch head and tie-breaks of the
record heads), so a dense 'wrong_size' graph at N = 200 (m ~ 16000) needs more than
the 62 magnitude bits of int64 storage; dense graphs are checked at N <= 64 only."""
ISTREE_TWO_LIMB = {"quick": [(400, 2)], "full": [(400, 4), (2000, 2)]}
"""(N, graphs) past int64 (the declared format needs two limbs from N = 324: Q48.15
at 400, Q56.18 at 2000), sparse families (a tree, then a near-tree: both answers):
two graphs at 400 in quick (a few seconds), more at 2000 in full (about 25 s per
tree, its CoT about 30,000 tokens)."""
ISTREE_DENSE = {"quick": [(16, 10), (64, 4)], "full": [(16, 50), (64, 20)]}
"""(N, graphs): dense wrong-size graphs alternating with random trees (so both
answers occur; the model is declared for the dense graphs' edge count)."""


def run_istree(N: int, instances, m_max: int | None = None, sep: str = "-"):
    """(model, instances, failures, cot_max, cot/(N log2 N) max over trees, first
    failure or the answer counts)."""
    insts = list(instances)
    mm = max([len(i.edges) for i in insts] + [N]) if m_max is None else m_max
    model = H.istree_hybrid(N, m_max=mm)
    bad, cot_max, ratio, first, got = 0, 0, 0.0, "", []
    for inst in insts:
        want_cot, want = unionfind_cot(N, inst.edges)
        g = generate(model, graph_tokens(inst.edges, sep=sep), answer_tokens=[TRUE, FALSE],
                     max_cot=H.istree_cot_bound(N))
        got.append(g.answer if g.answer is not None else -1)
        ok = g.answer == inst.answer and want == inst.answer and g.cot == want_cot
        bad += not ok
        if not ok and not first:
            first = f"edges {list(inst.edges)[:6]}...: answer {g.answer} (label {inst.answer}), CoT equal {g.cot == want_cot}"
        cot_max = max(cot_max, g.cot_length)
        if inst.label and N > 1:
            ratio = max(ratio, g.cot_length / (N * math.log2(N)))
    return model, len(insts), bad, cot_max, ratio, first or answer_counts(got)


def _istree_parts(profile: str) -> list[tuple]:
    """("every", N, sep), then ("seeded", i): the i-th seeded run of :func:`_istree_runs`."""
    return [("every", N, sep) for N in range(2, ISTREE_EXHAUSTIVE[profile] + 1) for sep in "-~"] + \
        [("seeded", i) for i in range(len(_istree_runs(profile)))]


def _istree_runs(profile: str) -> list[tuple]:
    return [(N, b, ISTREE_SPARSE, "sparse families") for N, b in ISTREE_SAMPLED[profile]] + \
        [(N, b, ("wrong_size", "tree"), "dense wrong-size graphs and trees") for N, b in ISTREE_DENSE[profile]] + \
        [(N, b, ISTREE_SPARSE, "sparse families, two-limb storage") for N, b in ISTREE_TWO_LIMB[profile]]


@register("T5.6", "hybrid: IsTree with CoT O(N log N) (union-find by size)", parts=_istree_parts)
def hybrid_istree_check(profile: str, seed: int, part: tuple) -> list[Record]:
    """One part per exhaustive (N, separator) and per seeded run (:func:`_istree_parts`)."""
    out = []
    # from N = 2: the one graph on N = 1 vertex (a tree) is a family with a single
    # answer, which a constant would pass too (tests/test_hybrid.py runs it)
    for N, sep in [part[1:]] if part[0] == "every" else []:
        t0 = time.perf_counter()
        model, cnt, bad, cot_max, ratio, first = run_istree(N, istree.enumerate_all(N), m_max=N * (N - 1) // 2,
                                                            sep=sep)
        r = model.resources
        out.append(Record("T5.6", model.name, istree.SPEC.name, N, cnt, bad,
                          r.used_precision_bits, model.fmt.total_bits, cot_max, H.istree_cot_bound(N), r.params,
                          r.state_bits, round(time.perf_counter() - t0, 3),
                          note=f"{first}; CoT/(N log2 N) <= {ratio:.2f} on trees", family="every graph",
                          alphabet=None, description=f"IsTree (every graph, enumeration order, 'u {sep} v')"))
    for N, batch, fams, what in [_istree_runs(profile)[part[1]]] if part[0] == "seeded" else []:
        t0 = time.perf_counter()
        rng = np.random.default_rng([seed, N, 77, len(fams)])
        insts = [inst for k in range(batch) for inst in istree.generate(rng, N, 1, family=fams[k % len(fams)])]
        model, cnt, bad, cot_max, ratio, first = run_istree(N, insts)
        if "two-limb" in what and not model.fmt.wide:        # meant to run past int64: say so if it does not
            bad, first = max(bad, 1), "NOT PAST INT64: " + first
        r = model.resources
        out.append(Record("T5.6", model.name, istree.SPEC.name, N, cnt, bad,
                          r.used_precision_bits, model.fmt.total_bits, cot_max, H.istree_cot_bound(N), r.params,
                          r.state_bits, round(time.perf_counter() - t0, 3),
                          note=f"{first}; " + (f"CoT/(N log2 N) <= {ratio:.2f} on trees" if ratio else "no trees")
                               + f"; m_max = {max(len(i.edges) for i in insts)}",
                          family="dense random" if "dense" in what else "sparse random", alphabet=None, description=f"IsTree ({batch} seeded graphs, {what})"))
    return out


# ----------------------------------------------------------------------------
# IsTree: the CoT constant, measured on adversarial edge orders
ISTREE_FIT_N = {"quick": [16, 32, 64, 128, 256], "full": [16, 24, 32, 48, 64, 96, 128, 192, 256, 320]}
"""Vertex counts of the fit. Quick: 5 models, 20 runs, a few seconds (the runs at
N = 256 write ~5000 CoT tokens each); full: twice as many points, up to N = 320
(the declared format ``ISTREE.format(N)`` fits int64 storage up to N = 323)."""
ISTREE_ADVERSARIAL = ("binomial", "broom", "broom_cycle")


class _Forest:
    """Plain-Python union-find by size (ties: the u-side root goes under the v-side
    root, the convention of ``unionfind_cot``), used ONLY to choose
    adversarial edges: it tracks each tree's members and each vertex's depth so a
    generator can join the deepest vertices. The checked CoT is the model's,
    compared with ``unionfind_cot`` token for token."""

    def __init__(self, vertices):
        self.parent = {v: v for v in vertices}
        self.members = {v: [v] for v in vertices}

    def root(self, x: int) -> int:
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def depth(self, x: int) -> int:
        d = 0
        while self.parent[x] != x:
            x, d = self.parent[x], d + 1
        return d

    def deepest(self, r: int) -> int:
        """The deepest member of the tree rooted at r (the smallest such vertex)."""
        return max(self.members[r], key=lambda v: (self.depth(v), -v))

    def join(self, u: int, v: int) -> None:
        ru, rv = self.root(u), self.root(v)
        assert ru != rv, "the generators only join two different trees"
        c, p = (ru, rv) if len(self.members[ru]) <= len(self.members[rv]) else (rv, ru)
        self.parent[c] = p
        self.members[p] += self.members.pop(c)


def _binomial(forest: _Forest, vertices: list[int], edges: list) -> int:
    """Join the singletons ``vertices`` in rounds of neighbouring pairs (sizes 1, 2,
    4, ...: binomial trees when |vertices| is a power of two), each edge between
    the deepest vertices of the two trees, so every round deepens the tree by one
    and the finds of later edges walk chains of length up to log2 |vertices|.
    Appends the edges; returns the final root."""
    roots = list(vertices)
    while len(roots) > 1:
        nxt = []
        for a, b in zip(roots[0::2], roots[1::2]):
            u, v = forest.deepest(a), forest.deepest(b)
            edges.append((u, v))
            forest.join(u, v)
            nxt.append(forest.root(u))
        roots = nxt + roots[len(roots) - len(roots) % 2:]
    return roots[0]


def istree_adversarial(N: int, family: str) -> list[tuple[int, int]]:
    """Edge orders that make the union-find CoT long (a pure function of N):

    * ``binomial``: a spanning tree built by :func:`_binomial` on all N vertices;
    * ``broom``: a binomial core on the first M vertices (M a power of two), then
      every other vertex w as a pendant edge (deepest core vertex, w): each such
      find walks the core's full depth log2 M (a singleton goes under the big root,
      so the depth never shrinks or grows). M is the power of two maximising the
      reference CoT length: the N - M pendant finds cost log2 M each against O(M)
      for the core, best near M ln M = N, i.e. M ~ N / ln N (64 for N = 256);
    * ``broom_cycle``: the broom plus one edge between the two core vertices not
      yet adjacent with the largest depth sum (the smallest such pair), which closes
      a cycle ([FALSE] after N - 1 joins and two deep finds; N edges).

    >>> istree_adversarial(4, "binomial")
    [(0, 1), (2, 3), (0, 2)]
    """
    if family == "binomial":
        edges: list = []
        _binomial(_Forest(range(N)), list(range(N)), edges)
        return edges
    if family not in ("broom", "broom_cycle"):
        raise ValueError(f"unknown adversarial family {family!r}; choose from {ISTREE_ADVERSARIAL}")
    best: tuple[int, list] | None = None
    M = 1
    while M <= N:
        forest = _Forest(range(N))
        edges = []
        core = _binomial(forest, list(range(M)), edges)
        deep = forest.deepest(core)
        edges += [(deep, w) for w in range(M, N)]
        length = len(unionfind_cot(N, edges)[0])
        if best is None or length > best[0]:
            best = (length, edges, forest, M)
        M *= 2
    _, edges, forest, M = best
    if family == "broom_cycle":
        adjacent = {frozenset(e) for e in edges}
        depth = {v: forest.depth(v) for v in range(M)}
        pairs = [(depth[a] + depth[b], -a, -b) for a in range(M) for b in range(a + 1, M)
                 if frozenset((a, b)) not in adjacent]
        if not pairs:
            raise ValueError(f"N = {N}: the core is complete, no cycle edge left")
        _, a, b = max(pairs)
        edges = edges + [(-a, -b)]
    return edges


def istree_fit(points: list[tuple[int, int]]) -> tuple[float, float, float]:
    """Least squares of CoT ~ a N log2 N + b N over (N, CoT) points: (a, b, largest
    relative residual). Needs two distinct N."""
    A = np.array([[N * math.log2(N), N] for N, _ in points], dtype=float)
    y = np.array([c for _, c in points], dtype=float)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = float(np.max(np.abs(A @ np.array([a, b]) - y) / y))
    return float(a), float(b), resid


@register("T5.6", "hybrid IsTree: CoT on adversarial edge orders, fit a N log2 N + b N")
def hybrid_istree_fit_check(profile: str, seed: int) -> list[Record]:
    """Per N: the three adversarial orders and one seeded random tree through the
    hybrid (one model, m_max = N), CoT token for token against the reference and
    within ``istree_cot_bound(N)`` = N (2 floor(log2 N) + 16) + 1; then a least-squares
    fit of the measured CoT lengths per family and of the worst order per N (one
    record; its instances are the fitted N, a failure any N with a wrong run)."""
    out: list[Record] = []
    lengths: dict[str, list[tuple[int, int]]] = {f: [] for f in ISTREE_ADVERSARIAL + ("random_tree",)}
    bad_points = 0
    for N in ISTREE_FIT_N[profile]:
        t0 = time.perf_counter()
        rng = np.random.default_rng([seed, N, 4242])
        cases = [(f, istree_adversarial(N, f)) for f in ISTREE_ADVERSARIAL]
        cases.append(("random_tree", list(istree.generate(rng, N, 1, family="tree")[0].edges)))
        model = H.istree_hybrid(N)
        bad, cot_max, first, per, got = 0, 0, "", [], []
        for fam, edges in cases:
            want_cot, want = unionfind_cot(N, edges)
            label = istree.reference_label(N, edges)
            g = generate(model, graph_tokens(edges), answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
            got.append(g.answer if g.answer is not None else -1)
            ok = g.cot == want_cot and g.answer == want == (TRUE if label else FALSE)
            bad += not ok
            if not ok and not first:
                first = f"{fam}: answer {g.answer}, label {label}, CoT equal {g.cot == want_cot}"
            cot_max = max(cot_max, g.cot_length)
            lengths[fam].append((N, g.cot_length))
            per.append(f"{fam} {g.cot_length} ({g.cot_length / (N * math.log2(N)):.2f} N log2 N)")
        bad_points += bad > 0
        r = model.resources
        out.append(Record("T5.6", model.name, istree.SPEC.name, N, len(cases),
                          bad, r.used_precision_bits, model.fmt.total_bits, cot_max, H.istree_cot_bound(N),
                          r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                          note=(first or answer_counts(got)) + "; CoT: " + ", ".join(per), family="adversarial orders",
                          alphabet=None, description="IsTree (adversarial orders + 1 seeded random tree)"))
    t0 = time.perf_counter()
    worst = [(N, max(dict(lengths[f])[N] for f in lengths)) for N in ISTREE_FIT_N[profile]]
    a, b, res = istree_fit(worst)
    fits = "; ".join("{} a = {:.3f}, b = {:.2f}".format(f, *istree_fit(pts)[:2]) for f, pts in lengths.items())
    Nmax = ISTREE_FIT_N[profile][-1]
    out.append(Record("T5.6", f"istree-hybrid(N<={Nmax})",
                      istree.SPEC.name, Nmax, len(worst),
                      bad_points,
                      cot_max=dict(worst)[Nmax], cot_bound=H.istree_cot_bound(Nmax),
                      seconds=round(time.perf_counter() - t0, 3),
                      note=(f"least squares over N = {ISTREE_FIT_N[profile]}, max relative residual {res:.3f}; "
                            f"per family: {fits}; declared bound N (2 floor(log2 N) + 16) + 1"),
                      family="adversarial orders", alphabet=None, description=f"IsTree CoT fit (worst order per N): {a:.3f} N log2 N + {b:.2f} N"))
    return out


# ----------------------------------------------------------------------------
# separation records: the hybrids as the constant-size side
SEPARATION_KEYS = ("index", "ar", "cgram3", "counting", "istree")


def teacher_forced_istree(model, N: int, prompts: list[list[int]]) -> list[tuple[bool, int, list[int]]]:
    """Per prompt: (every next-token prediction along prompt + reference union-find
    CoT + label equals the reference, CoT length, the reference CoT + label), in
    one batched call. All predictions right is exactly "greedy generation writes
    the reference CoT and label" (by induction over the generated tokens)."""
    rows, starts = [], []
    for p in prompts:
        cot, want = unionfind_cot(N, LR.parse_istree(p)[1])
        rows.append(p + cot + [want])
        starts.append(len(p))
    forced = forced_continuations(model, rows, starts)
    return [(got == r[s:], len(r) - s - 1, r[s:]) for got, r, s in zip(forced, rows, starts)]


def hybrid_istree_side(S, n: int):
    """The IsTree hybrid (N = n + 3, m_max = n + 2) on every hub-gadget instance at
    n, teacher forced along the union-find CoT (:func:`teacher_forced_istree`) and
    by greedy generation on the first and last instance; the label must equal the
    task reference and the reduction's answer. A ``checks_separation.ModelSide``."""
    t0 = time.perf_counter()
    task = S.TASKS["istree"]
    cases, toks = S.family(task, n)
    N = LR.istree_vertex_count(n)
    model = H.istree_hybrid(N, m_max=n + 2)
    ref = task.reference(n)
    prompts = [row.tolist() for row in toks]
    forced = teacher_forced_istree(model, N, prompts)
    fails, first, cot_max = 0, "", 0
    for (x, i), p, (ok, length, cont) in zip(cases, prompts, forced):
        cot_max = max(cot_max, length)
        if not ok or cont[-1] != ref(p) or cont[-1] != task.reduction.expected(x, i):
            fails += 1
            first = first or f"x={''.join(map(str, x))} i={i}: a prediction along the reference CoT differs"
    for b in (0, len(prompts) - 1):
        g = generate(model, prompts[b], answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
        if g.cot + [g.answer] != forced[b][2]:
            fails += 1
            first = first or f"greedy generation on instance {b} differs from the reference CoT"
    r = model.resources
    return S.ModelSide(model.name, len(cases), fails, r.params, r.used_precision_bits, model.fmt.total_bits,
                       cot_max, H.istree_cot_bound(N), first, time.perf_counter() - t0)


SEPARATION_ISTREE_MAX_N = {"quick": 8, "full": 10}
"""IsTree rows up to this n (all n 2^n gadget instances, teacher forced in one batch)."""


@register("T5.6", "separation: the hybrids vs a bounded-memory RNN on the reduction's family",
          parts=lambda profile: list(SEPARATION_KEYS),
          combine=lambda profile, seed, outputs: _S.require_forced([r for o in outputs for r in o]))
def hybrid_separation_check(profile: str, seed: int, key: str) -> list[Record]:
    """checks_separation's rows (same n, same bounded-memory RNN: the register RNN
    with capacity n - 1, collision only found; the compact register with state
    bits < n = CC, collision forced) with the T5.6 hybrid as the constant-size
    side, on every instance of the reduction's family; one part per hybrid
    (``key`` of :data:`SEPARATION_KEYS`). Every instance is enumerated: the seed
    is unused."""
    S = _S
    out = []
    rows = S.ROWS[profile]["istree" if key == "istree" else "retrieval"]
    sides: dict[int, object] = {}
    for n, kind in rows:
        if key == "istree" and n > SEPARATION_ISTREE_MAX_N[profile]:
            continue
        if n not in sides:
            sides[n] = (hybrid_istree_side(S, n) if key == "istree"
                        else S.model_side(key, n, build_reduction_model(key, n)))
        out.append(S.separation_record(key, n, kind=kind, model_side=sides[n], claim="T5.6"))
    return out
