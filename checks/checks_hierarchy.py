"""Checks of the CoT hierarchy: claim T4.1 (construction side and mechanism) and
claim ``sim`` (a Transformer with CoT simulates a given linear RNN).

T4.1 is CONDITIONAL: "RNN + CoT is strictly stronger than RNN without CoT"
holds under the assumption PSPACE not in P/poly, which nobody can check. What
is checked here: (1) the linear RNN of :mod:`constructions.cot_hierarchy` solves
ITER(n) with a CoT of exactly t <= n^2 tokens, against the plain-Python
reference below, with its state equal to the machine's configuration after every
CoT token; (2) the same network with its CoT disabled (stop after k = 0 steps),
or any small fixed budget k, is wrong on instances that a search finds, and the
full network forced to answer at once emits a non-answer token. (2) is about
these networks only, not about every CoT-free RNN.

``sim``: the Transformer of :mod:`constructions.simulate` is run on random
seeded linear RNNs (exhaustively over short prompts, and on random longer
prompts) and on the T4.1 RNN; every decoded state in its CoT must equal the
RNN's state after the same token, its Y tokens the RNN's CoT, its answer the
RNN's answer; then one integer bit below its measured usage must fail.

The references here are plain Python (ints), never the code under test.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from constructions import cot_hierarchy as CH
from constructions.fixedpoint import FixedFormat, PrecisionError
from constructions.generate import generate
from constructions.protocol import run_rnn
from constructions.simulate import compare, random_linear_rnn, simulate_rnn
from constructions.vocab import BOS, FALSE, NUMBER_BASE, QUERY, TRUE

from .registry import Record, register

CONDITIONAL = ("conditional claim (PSPACE not in P/poly) - only the construction and the no-CoT "
               "mechanism of these networks are checked")


# ----------------------------------------------------------------------------
# ITER(n): plain-Python reference and instances
def iter_reference(tokens) -> int:
    """``[BOS] z_1..z_n [QUERY] (2n + t) a`` -> [TRUE] iff g^t(a) >= n, where
    g(x) = tent((x + 1) mod 2n), tent(y) = 2y if y < n else 4n - 1 - 2y."""
    toks = [int(v) for v in tokens]
    if toks[0] != BOS or len(toks) < 4 or toks[-3] != QUERY:
        raise ValueError(f"not an ITER instance: {toks}")
    n = len(toks) - 4
    m = 2 * n
    t = toks[-2] - NUMBER_BASE - m
    x = toks[-1] - NUMBER_BASE
    if not (0 <= t <= n * n and 0 <= x < m):
        raise ValueError(f"ITER(n={n}): step token or value out of range: {toks}")
    for _ in range(t):
        y = (x + 1) % m
        x = 2 * y if y < n else 2 * m - 1 - 2 * y
    return TRUE if x >= n else FALSE


def iter_orbit(n: int, a: int, t: int) -> list[int]:
    """a, g(a), ..., g^t(a) (plain Python, as in :func:`iter_reference`)."""
    m, out, x = 2 * n, [a], a
    for _ in range(t):
        y = (x + 1) % m
        x = 2 * y if y < n else 2 * m - 1 - 2 * y
        out.append(x)
    return out


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
BUDGETS = {"quick": 3, "full": 6}


def _t41_record(n: int, inst, profile: str, exhaustive: bool) -> Record:
    t0 = time.perf_counter()
    model = CH.iterate_rnn(n)
    rnn = model.rnn()
    T = CH.steps(n)
    bad = cot_max = 0
    state_checked = 0
    for a, t, pad in inst:
        p = CH.prompt(n, a, t, pad)
        want = iter_reference(p)
        g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=T)
        cot_max = max(cot_max, g.cot_length)
        ok = g.answer == want and g.cot_length == t
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
    return Record("T4.1", model.name, "ITER" + (" exhaustive, state by state" if exhaustive else " sampled"), n,
                  len(inst), bad, r.used_precision_bits, CH.DECLARED.format(n).total_bits, cot_max, CH.cot_bound(n),
                  r.params, r.state_bits, round(time.perf_counter() - t0, 3),
                  note=f"m={2 * n}, T=n^2={T}; {CONDITIONAL}")


@register("T4.1", "ITER(n): a linear RNN with CoT runs g_n on its state")
def t41_with_cot(profile: str, seed: int) -> list[Record]:
    out = []
    for n in EXHAUSTIVE[profile]:
        out.append(_t41_record(n, iter_instances(n, np.random.default_rng(seed * 1000 + n)), profile, True))
    for n, count in SAMPLED[profile]:
        out.append(_t41_record(n, iter_instances(n, np.random.default_rng(seed * 1000 + n), count), profile, False))
    return out


def search_failure(model, n: int, rng: np.random.Generator, max_cot: int, tries: int):
    """Search instances (a, t) in random order for one the model answers wrongly;
    returns (instance, got, want, searched) or (None, ..., searched)."""
    m, T = 2 * n, n * n
    pairs = [(a, t) for a in range(m) for t in range(T + 1)]
    order = rng.permutation(len(pairs))[:tries]
    for k, i in enumerate(order):
        a, t = pairs[int(i)]
        p = CH.prompt(n, a, t, [int(v) for v in rng.integers(0, m, size=n)])
        want = iter_reference(p)
        g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=max_cot)
        if g.answer != want:
            return (a, t), g.answer, want, k + 1
    return None, None, None, len(order)


@register("T4.1", "no CoT: the same network answers after bounded depth and fails (search)")
def t41_without_cot(profile: str, seed: int) -> list[Record]:
    out = []
    sizes = EXHAUSTIVE[profile] + [n for n, _ in SAMPLED[profile]]
    for n in sizes:
        rng = np.random.default_rng(seed * 7919 + n)
        for k in range(BUDGETS[profile] + 1):
            t0 = time.perf_counter()
            model = CH.iterate_rnn(n, cot_budget=k)
            inst, got, want, searched = search_failure(model, n, rng, max_cot=k, tries=5000)
            found = inst is not None
            what = "CoT disabled (k=0)" if k == 0 else f"CoT budget k={k}"
            note = (f"fails as it must: (a, t)={inst} -> {got}, reference {want}, after {searched} tries"
                    if found else f"NO FAILURE FOUND in {searched} tries")
            r = model.resources
            out.append(Record("T4.1", model.name, f"ITER, {what}: must fail", n, searched, 0 if found else 1,
                              cot_max=k, cot_bound=k, params=r.params, state_bits=r.state_bits,
                              seconds=round(time.perf_counter() - t0, 3), note=f"{note}; {CONDITIONAL}"))
        # the construction itself with the answer forced at once (no CoT allowed):
        # its first token is the machine's next value, not an answer
        t0 = time.perf_counter()
        model = CH.iterate_rnn(n)
        rnn = model.rnn()
        tries, found = 0, None
        for a, t, pad in iter_instances(n, rng, 200):
            tries += 1
            p = CH.prompt(n, a, t, pad)
            first = run_rnn(rnn, p).answer
            if first != iter_reference(p):
                found = ((a, t), first)
                break
        out.append(Record("T4.1", model.name, "ITER, answer forced at once: must fail", n, tries,
                          0 if found else 1, params=model.resources.params, state_bits=model.resources.state_bits,
                          seconds=round(time.perf_counter() - t0, 3),
                          note=(f"fails as it must: (a, t)={found[0]} -> token {found[1]}" if found
                                else "NO FAILURE FOUND") + f"; {CONDITIONAL}"))
    return out


# ----------------------------------------------------------------------------
# sim
SIM_SEEDS = {"quick": 4, "full": 12}
SIM_EXH_LEN = {"quick": 3, "full": 4}         # prompts [BOS] + x, |x| <= this, alphabet 3
SIM_RANDOM = {"quick": [(8, 10)], "full": [(8, 40), (16, 20), (32, 6)]}
SIM_RNN_COT = 2
SIM_STATE_BITS = 4


def _below_bound(sim, runs) -> Record:
    """The same Transformer one integer bit below its measured usage must fail."""
    t0 = time.perf_counter()
    model = sim.model
    used = model.resources.used_int_bits
    low = FixedFormat(used - 1, model.fmt.frac_bits)
    how, failed = "", False
    try:
        low_model = model.with_format(low)
        for p, ans, cot in runs:
            g = generate(low_model, p, answer_tokens=ans, max_cot=len(cot) + 1)
            if g.cot != cot:
                failed, how = True, "different CoT"
                break
    except (PrecisionError, ValueError) as e:
        failed, how = True, f"raised: {str(e)[:100]}"
    return Record("sim", model.name, f"below bound ({low.name})", 0, len(runs), 0 if failed else 1,
                  seconds=round(time.perf_counter() - t0, 3),
                  note=("fails as it must: " if failed else "DID NOT FAIL below bound: ") + how)


def _sim_record(sim, task: str, n: int, cases, t0: float) -> tuple[Record, list]:
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
        elif len(runs) < 3:
            runs.append((list(p), ans if ans is not None else
                         [t for t in range(sim.rnn.vocab.size) if sim.rnn.vocab.contains(t)], run.cot))
    r = sim.model.resources
    note = (f"B={sim.B} tokens per RNN step (S={sim.S} state numbers + counter + Y); CoT = B(L + c) - 1; "
            f"RNN {sim.rnn.fmt.name}, I_s={sim.Is}; RNN runs: {answered} answered (others hit the RNN CoT "
            f"limit), {rnn_cot} RNN CoT tokens, {len(outputs)} distinct RNN output tokens") + (f"; FIRST FAILURE {first[:200]}" if first else "")
    return Record("sim", sim.model.name, task, n, len(cases), bad, r.used_precision_bits, sim.fmt.total_bits,
                  cot_max, cot_bound, r.params, None, round(time.perf_counter() - t0, 3), note), runs


@register("sim", "a Transformer with CoT simulates random linear RNNs step by step")
def sim_random(profile: str, seed: int) -> list[Record]:
    out = []
    Lmax = max([SIM_EXH_LEN[profile] + 1] + [L + 1 for L, _ in SIM_RANDOM[profile]])
    for s in range(SIM_SEEDS[profile]):
        t0 = time.perf_counter()
        rnn = random_linear_rnn(seed * 100 + s)
        sim = simulate_rnn(rnn, max_prompt=Lmax, max_rnn_cot=SIM_RNN_COT, state_int_bits=SIM_STATE_BITS)
        cases = []
        for L in range(SIM_EXH_LEN[profile] + 1):
            for xs in itertools.product(range(3), repeat=L):
                p = [BOS] + [NUMBER_BASE + x for x in xs]
                cases += [(p, None), (p, [TRUE, FALSE])]
        rec, runs = _sim_record(sim, f"random RNN, all prompts |x|<={SIM_EXH_LEN[profile]}",
                                SIM_EXH_LEN[profile], cases, t0)
        out.append(rec)
        rng = np.random.default_rng(seed * 100 + s + 50_000)
        for L, count in SIM_RANDOM[profile]:
            t0 = time.perf_counter()
            cases = [([BOS] + [NUMBER_BASE + int(v) for v in rng.integers(0, 3, size=L)],
                      None if rng.random() < 0.5 else [TRUE, FALSE]) for _ in range(count)]
            rec, more = _sim_record(sim, f"random RNN, random prompts |x|={L}", L, cases, t0)
            out.append(rec)
        if s == 0:
            out.append(_below_bound(sim, runs))
    return out


SIM_T41 = {"quick": [(2, None), (3, None), (4, 40)], "full": [(2, None), (3, None), (4, None), (5, 200)]}


@register("sim", "a Transformer with CoT simulates the T4.1 RNN (ITER) step by step")
def sim_t41(profile: str, seed: int) -> list[Record]:
    out = []
    for n, count in SIM_T41[profile]:
        t0 = time.perf_counter()
        rnn = CH.iterate_rnn(n)
        T = CH.steps(n)
        sim = simulate_rnn(rnn, max_prompt=n + 4, max_rnn_cot=T, state_int_bits=(T + 2 * n + 4).bit_length())
        inst = iter_instances(n, np.random.default_rng(seed * 31 + n), count)
        cases = [(CH.prompt(n, a, t, pad), [TRUE, FALSE]) for a, t, pad in inst]
        rec, runs = _sim_record(sim, "T4.1 RNN on ITER" + (" exhaustive" if count is None else " sampled"), n,
                                cases, t0)
        out.append(rec)
        if n == 2:
            out.append(_below_bound(sim, runs))
    return out


SIM_REGISTER = {"quick": [3], "full": [3, 4, 5]}
SIM_TARGET_SEEDS = {"quick": 2, "full": 8}


@register("sim", "a Transformer with CoT simulates the project's target RNNs (register Index RNN with CoT, "
                 "random indicator-readout RNNs)")
def sim_targets(profile: str, seed: int) -> list[Record]:
    from constructions import targets as TG
    from constructions.vocab import QUERY as Q
    out = []
    for c in SIM_REGISTER[profile]:
        t0 = time.perf_counter()
        rnn = TG.register_index_rnn(c, max_number=c + 2)
        sim = simulate_rnn(rnn, max_prompt=c + 3, max_rnn_cot=c)
        cases = []
        for n in range(1, c + 1):
            for xs in itertools.product(range(2), repeat=n):
                for i in range(1, n + 1):
                    cases.append(([BOS] + [NUMBER_BASE + x for x in xs] + [Q, NUMBER_BASE + i],
                                  [NUMBER_BASE, NUMBER_BASE + 1]))
        rec, runs = _sim_record(sim, f"register Index RNN (its CoT), every instance n<={c}", c, cases, t0)
        out.append(rec)
    for s in range(SIM_TARGET_SEEDS[profile]):
        t0 = time.perf_counter()
        rnn = TG.random_linear_rnn(2, 3, seed * 100 + s, max_number=4)
        sim = simulate_rnn(rnn, max_prompt=5, max_rnn_cot=0)
        cases = [(p, None) for L in range(4) for p in
                 ([BOS] + [NUMBER_BASE + x for x in xs] for xs in itertools.product(range(3), repeat=L))]
        rec, runs = _sim_record(sim, "targets.random_linear_rnn, all prompts |x|<=3", 3, cases, t0)
        out.append(rec)
    return out
