"""Checks of the CoT hierarchy: claim T4.1 (construction side and mechanism) and
claim ``sim`` (a Transformer with CoT simulates a given linear RNN).

T4.1 is CONDITIONAL: it holds under the assumption PSPACE not in P/poly, which no
check can establish. Checked here: the CoT RNN of
:mod:`constructions.models.cot_hierarchy` solves ITER(n) with exactly t <= n^2 CoT
tokens, its state the machine's configuration after every token; the CoT-free
unrolling (:func:`constructions.models.cot_hierarchy.unrolled_rnn`) is right on every
instance with t <= k and wrong on a concrete one with t > k (about that network
only); and the saturate-mode necessity of the RNN's integer bits. For ``sim``,
the Transformer of :mod:`constructions.models.simulate` must reproduce every state,
CoT token and answer of random seeded linear RNNs and of the T4.1 RNN. The
references are plain Python.

Details (what is checked, rows that do not exist and why):
docs/internals/verify.md#checks_hierarchy
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from rnngap.constructions.models import cot_hierarchy as CH, targets as TG
from rnngap.constructions.build.generate import generate
from rnngap.constructions.models.simulate import compare, random_linear_rnn, rnnsim_transformer
from rnngap.constructions.machine.vocab import BOS, FALSE, NUMBER_BASE, QUERY as Q, TRUE

from rnngap.checks.catalog.hierarchy import (
    SIM_EXH_LEN, SIM_NECESSITY, SIM_RANDOM, SIM_REGISTER, SIM_RNN_COT, SIM_SEEDS, SIM_STATE_BITS, SIM_T41,
    SIM_TARGET_SEEDS,
)
from .necessity import Outcome, classify, generation_runner, necessity_record
from .registry import Record, register
from rnngap.checks.tasks import NO_TASK
from rnngap.checks.tasks import index as task_index
from rnngap.checks.tasks import iterate as task_iterate
from rnngap.checks.tasks.iterate import orbit as iter_orbit, reference as iter_reference

CONDITIONAL = ("conditional claim (PSPACE not in P/poly) - only the construction and the no-CoT "
               "mechanism of these networks are checked")


# ----------------------------------------------------------------------------
# ITER(n): plain-Python reference and instances
NAMES = {TRUE: "[TRUE]", FALSE: "[FALSE]"}


def answer_counts(answers) -> str:
    """``answers: [TRUE] 31, [FALSE] 29`` (a row whose model emits one token on the
    whole family says so here; tests/test_cot_hierarchy.py refuses such rows)."""
    names = NAMES
    vals, counts = np.unique(np.asarray([-1 if a is None else int(a) for a in answers]), return_counts=True)
    return "answers: " + ", ".join(f"{names.get(int(v), 'none' if v == -1 else int(v))} {int(c)}"
                                   for v, c in zip(vals, counts))


def iter_instances(n: int, rng: np.random.Generator, count: int | None = None) -> list[tuple[int, int, list[int]]]:
    """(a, t, padding) triples: every (a, t) if count is None (random padding each),
    else ``count`` uniform random ones."""
    m, T = 2 * n, n * n
    if count is None:
        pairs = [(a, t) for a in range(m) for t in range(T + 1)]
    else:
        pairs = [(int(rng.integers(0, m)), int(rng.integers(0, T + 1))) for _ in range(count)]
    return [(a, t, [int(v) for v in rng.integers(0, m, size=n)]) for a, t in pairs]


EXHAUSTIVE = {"quick": [2, 3, 4, 5], "full": [2, 3, 4, 5, 6, 7, 8]}
SAMPLED = {"quick": [(8, 150), (16, 60)], "full": [(16, 400), (32, 200), (64, 40)]}


BEYOND = {"quick": [(1 << 16, 4)], "full": [(1 << 16, 8), (1 << 20, 2)]}
"""(n, instances) of the runs past the old ceilings: a vocabulary of n^2 + 2n
tokens past constructions.build.spec.MAX_CANDIDATES (n > 4,094: implicit, the
nearest-code readout without a candidate list) and a declared format past int64
(n > 23,169: two limbs). Their t is drawn from 0..BEYOND_T, not from 0..n^2: a
run of n^2 = 2^32 CoT steps is out of reach."""
BEYOND_T = 4096


def beyond_instances(n: int, rng: np.random.Generator, count: int) -> list[tuple[int, int, list[int]]]:
    """``count`` (a, t, padding) triples drawn uniformly (t <= BEYOND_T), kept so that
    half answer [TRUE] and half [FALSE] (by the plain-Python reference)."""
    m = 2 * n
    want = {TRUE: count // 2, FALSE: count - count // 2}
    out = []
    while any(want.values()):
        a, t = int(rng.integers(0, m)), int(rng.integers(0, BEYOND_T + 1))
        pad = [int(v) for v in rng.integers(0, m, size=n)]
        ans = iter_reference(CH.prompt(n, a, t, pad))
        if want[ans]:
            want[ans] -= 1
            out.append((a, t, pad))
    return out


def _t41_record(n: int, inst, profile: str, exhaustive: bool, beyond: bool = False) -> Record:
    t0 = time.perf_counter()
    model = CH.iterate_rnn(n)
    rnn = model.rnn() if exhaustive else None
    T = CH.steps(n)
    bad = cot_max = 0
    state_checked = 0
    answers: list[int] = []
    for a, t, pad in inst:
        p = CH.prompt(n, a, t, pad)
        want = iter_reference(p)
        # past the old ceilings T = n^2 is out of reach: a model that never answers
        # stops one token past t (and fails the CoT length check) instead of running on
        g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=t + 1 if beyond else T)
        answers.append(g.answer)
        cot_max = max(cot_max, g.cot_length)
        ok = g.answer == want and g.cot_length == t
        if ok and beyond:         # the CoT is the map's orbit, token by token
            ok = g.cot == [NUMBER_BASE + v for v in iter_orbit(n, a, t)[1:]]
        if ok and exhaustive:
            # step by step: the machine register x of the RNN state is g^k(a) after
            # the k-th CoT token, the counter c = k + 3, the step register r = t
            orbit = iter_orbit(n, a, t)
            ok = g.cot == [NUMBER_BASE + v for v in orbit[1:]]
            st = rnn.initial_state()
            for tok in p:
                st = rnn.step(st, tok)
            for k in range(t + 1):
                h = st[0]
                q, c, r, x = int(h[0, 0]), int(h[0, 1]), int(h[1, 0]), int(h[2, 0])
                if (q, c, r, x) != (1, k + 3, t, orbit[k]):
                    ok = False
                    break
                if k < t:
                    st = rnn.step(st, NUMBER_BASE + orbit[k + 1])
            state_checked += 1
        bad += not ok
    r = model.resources
    where = ""
    if beyond:
        where = (f"; past the old ceilings: {model.fmt.name} ({'two limbs' if model.fmt.wide else 'int64'}), "
                 f"vocabulary {model.vocab.size:,} tokens ({'implicit, nearest-code readout' if model.implicit_vocab else 'listed'}); "
                 f"t <= {BEYOND_T} of T = n^2, CoT compared token by token")
    return Record("T4.1", model.name, task_iterate.SPEC.name, n,
                  len(inst), bad, r.used_precision_bits, CH.DECLARED.format(n).total_bits, cot_max, CH.cot_bound(n),
                  r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                  note=f"m={2 * n}, T=n^2={T}; {answer_counts(answers)}{where}; {CONDITIONAL}",
                  family="ITER" + (" exhaustive" if exhaustive else " random"), alphabet=2 * n,
                  description="ITER" + (" exhaustive, state by state" if exhaustive
                                        else f" sampled past the old ceilings (t <= {BEYOND_T})" if beyond
                                        else " sampled"))


@register("T4.1", "ITER(n): a linear RNN with CoT runs g_n on its state")
def t41_with_cot(profile: str, seed: int) -> list[Record]:
    out = []
    for n in EXHAUSTIVE[profile]:
        out.append(_t41_record(n, iter_instances(n, np.random.default_rng(seed * 1000 + n)), profile, True))
    for n, count in SAMPLED[profile]:
        out.append(_t41_record(n, iter_instances(n, np.random.default_rng(seed * 1000 + n), count), profile, False))
    for n, count in BEYOND[profile]:
        out.append(_t41_record(n, beyond_instances(n, np.random.default_rng([seed, n, 4101]), count), profile,
                               False, beyond=True))
    return out


CONTRAST = {"quick": [(3, 2), (5, 2), (8, 3), (16, 3)], "full": [(3, 1), (3, 2), (5, 2), (5, 4), (8, 3), (16, 3),
                                                              (32, 4)]}
"""(n, k) pairs of the contrast: the no-CoT network unrolls k applications of g_n.
Every (a, t) is run (2n (n^2 + 1) prompts, 8,224 at n = 16, one batch)."""


def iter_batch(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (a, t) of ITER(n) with seeded random padding: (tokens [B, n + 4], a, t,
    reference answers)."""
    m, T = 2 * n, n * n
    pairs = np.array([(a, t) for a in range(m) for t in range(T + 1)], dtype=np.int64)
    toks = np.array([CH.prompt(n, int(a), int(t), [int(v) for v in rng.integers(0, m, size=n)])
                     for a, t in pairs], dtype=np.int64)
    want = np.array([iter_reference(row) for row in toks], dtype=np.int64)
    return toks, pairs[:, 0], pairs[:, 1], want


def contrast_record(n: int, k: int, seed: int) -> Record:
    """The no-CoT unrolled network (k applications) on every instance of ITER(n):
    it must be right on every t <= k, with both answers occurring there, and wrong
    on some t > k; the first wrong instance (by t, then a) is shown and must be
    answered right by the CoT RNN. Failures: 1 per broken condition."""
    t0 = time.perf_counter()
    model = CH.unrolled_rnn(n, k)
    toks, a, t, want = iter_batch(n, np.random.default_rng([seed, n, k, 41]))
    got = model.predict_batch(toks)
    easy, hard = t <= k, t > k
    easy_wrong = int((got[easy] != want[easy]).sum())
    wrong = np.flatnonzero(hard & (got != want))
    # a contrast must fail a model that is right on the easy part, not a constant
    failures = int(easy_wrong > 0) + int(len(set(got[easy].tolist())) < 2)
    if len(wrong):
        j = int(wrong[np.lexsort((a[wrong], t[wrong]))[0]])
        cot = generate(CH.iterate_rnn(n), toks[j].tolist(), answer_tokens=[TRUE, FALSE], max_cot=CH.cot_bound(n))
        cot_ok = cot.answer == want[j] and cot.cot_length == t[j]
        failures += int(not cot_ok)
        shown = (f"first wrong: [{' '.join(map(str, toks[j].tolist()))}], a={a[j]}, t={t[j]} (g^{k}(a) = {iter_orbit(n, int(a[j]), k)[-1]}, "
                 f"g^t(a) = {iter_orbit(n, int(a[j]), int(t[j]))[-1]}) -> {NAMES[int(got[j])]}, "
                 f"want {NAMES[int(want[j])]}; the CoT RNN answers {NAMES.get(cot.answer, cot.answer)} after "
                 f"{cot.cot_length} CoT tokens")
    else:
        failures += 1
        shown = "NO WRONG INSTANCE with t > k"
    r = model.resources
    note = (f"no CoT, {k} applications of g unrolled; t <= k: {easy_wrong} wrong of {int(easy.sum())} "
            f"({answer_counts(got[easy])}); t > k: {len(wrong)} wrong of {int(hard.sum())}; {shown}; {CONDITIONAL}")
    return Record("T4.1", model.name, task_iterate.SPEC.name, n,
                  len(toks), failures, r.used_precision_bits, CH.DECLARED.format(n).total_bits, 0, 0, r.params,
                  r.state_bits, round(time.perf_counter() - t0, 3), note=note, family="ITER exhaustive",
                  alphabet=2 * n, description=f"ITER contrast: no-CoT unrolled k={k}, right for t <= k, wrong beyond")


@register("T4.1", "contrast: a no-CoT RNN unrolling k applications is right for t <= k, wrong beyond")
def t41_contrast(profile: str, seed: int) -> list[Record]:
    return [contrast_record(n, k, seed) for n, k in CONTRAST[profile]]


def iter_cot_runner(n: int, seed: int, count: int | None = None):
    """A necessity ``run(model)``: generate on ITER(n) instances (every (a, t) if
    count is None) and compare answer and CoT with the plain-Python orbit; the
    :class:`checks.verify.necessity.Outcome` of every instance run to completion (wrong
    final answer, CoT (the map's orbit) deviating with the answer right, no
    answer, raised)."""
    inst = iter_instances(n, np.random.default_rng([seed, n, 4100]), count)
    cases = [(CH.prompt(n, a, t, pad), iter_reference(CH.prompt(n, a, t, pad)),
              [NUMBER_BASE + v for v in iter_orbit(n, a, t)[1:]]) for a, t, pad in inst]

    def describe(p):
        return f"(a, t) = ({p[-1] - NUMBER_BASE}, {p[-2] - NUMBER_BASE - 2 * n})"
    return generation_runner(cases, CH.cot_bound(n), describe), len(cases)


NECESSITY_T41 = {"quick": [3, 5], "full": [3, 5, 8]}


@register("T4.1", "necessity: the T4.1 RNN's integer-bit frontier (saturate), wrong one bit below")
def t41_necessity(profile: str, seed: int) -> list[Record]:
    out = []
    for n in NECESSITY_T41[profile]:
        run, count = iter_cot_runner(n, seed)
        model = CH.iterate_rnn(n)
        out.append(necessity_record("T4.1", model.name, "ITER (every (a, t), CoT compared token by token)", n,
                                    task=task_iterate.SPEC.name, family="ITER exhaustive", alphabet=2 * n, declared=CH.DECLARED.format(n),
                                    run=run, model=model, instances=count,
                                    build_frac=lambda fmt, n=n: CH.iterate_rnn(n, fmt=fmt)))
    return out


# ----------------------------------------------------------------------------
# sim
# the sizes (SIM_*) are checks/catalog/hierarchy.py's: certify builds the same simulators


def sim_runner(runs):
    """A necessity ``run(model)`` over verified simulator runs (prompt, answer set,
    CoT, answer): the Transformer at another format must write the same answer and
    the same CoT token for token (every decoded RNN state, every Y token); each run
    to completion and classified (:func:`checks.verify.necessity.classify`)."""
    def run(model) -> Outcome:
        out = Outcome(len(runs))
        for p, ans, cot, answer in runs:
            try:
                g = generate(model, p, answer_tokens=ans, max_cot=len(cot))
            except Exception as e:   # never a wrong answer (checks/verify/necessity.py)
                out.add("raised", f"prompt {p}: {type(e).__name__}: {str(e)[:100]}")
                continue
            classify(out, f"prompt {p}", g.answer, answer, g.cot, cot, g.cot_length)
        return out
    return run


def _sim_necessity(sim, runs, task: str, n: int, family: str, alphabet: int | None,
                   task_name: str = NO_TASK) -> Record:
    """Saturate-mode frontiers of the simulating Transformer on verified runs."""
    return necessity_record("sim", sim.model.name, task, n, task=task_name, family=family, alphabet=alphabet, declared=sim.fmt,
                            run=sim_runner(runs), model=sim.model, instances=len(runs))


def _sim_record(sim, task: str, n: int, cases, t0: float, family: str, alphabet: int | None,
                task_name: str = NO_TASK) -> tuple[Record, list]:
    """``task``: what was run, in words (the description); ``task_name``: the task the
    simulated RNN solves (checks.tasks), NO_TASK for a random RNN."""
    bad, cot_max, cot_bound, first, runs = 0, 0, 0, "", []
    answered, rnn_cot, outputs = 0, 0, set()
    for p, ans in cases:
        msg, run, tr = compare(sim, p, ans)
        answered += tr.answer is not None
        rnn_cot += len(tr.cot)
        outputs.update(tr.cot + ([tr.answer] if tr.answer is not None else []))
        cot_max = max(cot_max, len(run.cot))
        cot_bound = max(cot_bound, sim.cot_bound(len(p)))
        if msg:
            bad += 1
            first = first or f"{list(p)}: {msg}"
        else:
            runs.append((list(p), ans if ans is not None else
                         [t for t in range(sim.rnn.vocab.size) if sim.rnn.vocab.contains(t)], run.cot, run.answer))
    r = sim.model.resources
    note = (f"B={sim.B} tokens per RNN step (S={sim.S} state numbers + counter + Y); CoT = B(L + c) - 1; "
            f"RNN {sim.rnn.fmt.name}, I_s={sim.Is}; RNN runs: {answered} answered (others hit the RNN CoT "
            f"limit), {rnn_cot} RNN CoT tokens, {len(outputs)} distinct RNN output tokens") + (f"; FIRST FAILURE {first[:200]}" if first else "")
    return Record("sim", sim.model.name, task_name, n, len(cases), bad, r.used_precision_bits, sim.fmt.total_bits,
                  cot_max, cot_bound, r.params, None, round(time.perf_counter() - t0, 3), note, family=family,
                  alphabet=alphabet, description=task), runs


@register("sim", "a Transformer with CoT simulates random linear RNNs step by step")
def sim_random(profile: str, seed: int) -> list[Record]:
    out = []
    Lmax = max([SIM_EXH_LEN[profile] + 1] + [L + 1 for L, _ in SIM_RANDOM[profile]])
    for s in range(SIM_SEEDS[profile]):
        t0 = time.perf_counter()
        rnn = random_linear_rnn(seed * 100 + s)
        sim = rnnsim_transformer(rnn, max_prompt=Lmax, max_rnn_cot=SIM_RNN_COT, state_int_bits=SIM_STATE_BITS)
        cases = []
        for L in range(SIM_EXH_LEN[profile] + 1):
            for xs in itertools.product(range(3), repeat=L):
                p = [BOS] + [NUMBER_BASE + x for x in xs]
                cases += [(p, None), (p, [TRUE, FALSE])]
        rec, runs = _sim_record(sim, f"random RNN, all prompts |x|<={SIM_EXH_LEN[profile]}",
                                SIM_EXH_LEN[profile], cases, t0, "every prompt", 3)
        out.append(rec)
        if s < SIM_NECESSITY[profile]:
            out.append(_sim_necessity(sim, runs, f"random RNN, all prompts |x|<={SIM_EXH_LEN[profile]}",
                                      SIM_EXH_LEN[profile], "every prompt", 3))
        rng = np.random.default_rng(seed * 100 + s + 50_000)
        for L, count in SIM_RANDOM[profile]:
            t0 = time.perf_counter()
            cases = [([BOS] + [NUMBER_BASE + int(v) for v in rng.integers(0, 3, size=L)],
                      None if rng.random() < 0.5 else [TRUE, FALSE]) for _ in range(count)]
            rec, more = _sim_record(sim, f"random RNN, random prompts |x|={L}", L, cases, t0, "random prompts", 3)
            out.append(rec)
    return out


@register("sim", "a Transformer with CoT simulates the T4.1 RNN (ITER) step by step")
def sim_t41(profile: str, seed: int) -> list[Record]:
    out = []
    for n, count in SIM_T41[profile]:
        t0 = time.perf_counter()
        rnn = CH.iterate_rnn(n)
        T = CH.steps(n)
        sim = rnnsim_transformer(rnn, max_prompt=n + 4, max_rnn_cot=T, state_int_bits=(T + 2 * n + 4).bit_length())
        inst = iter_instances(n, np.random.default_rng(seed * 31 + n), count)
        cases = [(CH.prompt(n, a, t, pad), [TRUE, FALSE]) for a, t, pad in inst]
        fam = "ITER exhaustive" if count is None else "ITER random"
        rec, runs = _sim_record(sim, "T4.1 RNN on ITER" + (" exhaustive" if count is None else " sampled"), n,
                                cases, t0, fam, 2 * n, task_name=task_iterate.SPEC.name)
        out.append(rec)
        if n == 2:
            out.append(_sim_necessity(sim, runs, "T4.1 RNN on ITER (every (a, t))", n, fam, 2 * n, task_name=task_iterate.SPEC.name))
    return out


@register("sim", "a Transformer with CoT simulates the project's target RNNs (register Index RNN with CoT, "
                 "random indicator-readout RNNs)")
def sim_targets(profile: str, seed: int) -> list[Record]:
    out = []
    for c in SIM_REGISTER[profile]:
        t0 = time.perf_counter()
        rnn = TG.register_index_rnn(c, max_number=c + 2)
        sim = rnnsim_transformer(rnn, max_prompt=c + 3, max_rnn_cot=c)
        cases = []
        for n in range(1, c + 1):
            for xs in itertools.product(range(2), repeat=n):
                for i in range(1, n + 1):
                    cases.append(([BOS] + [NUMBER_BASE + x for x in xs] + [Q, NUMBER_BASE + i],
                                  [NUMBER_BASE, NUMBER_BASE + 1]))
        rec, runs = _sim_record(sim, f"register Index RNN (its CoT), every instance n<={c}", c, cases, t0,
                                "reduction", 2, task_name=task_index.SPEC.name)
        out.append(rec)
    for s in range(SIM_TARGET_SEEDS[profile]):
        t0 = time.perf_counter()
        rnn = TG.random_linear_rnn(2, 3, seed * 100 + s, max_number=4)
        sim = rnnsim_transformer(rnn, max_prompt=5, max_rnn_cot=0)
        cases = [(p, None) for L in range(4) for p in
                 ([BOS] + [NUMBER_BASE + x for x in xs] for xs in itertools.product(range(3), repeat=L))]
        rec, runs = _sim_record(sim, "targets.random_linear_rnn, all prompts |x|<=3", 3, cases, t0,
                                "every prompt", 3)
        out.append(rec)
    return out
