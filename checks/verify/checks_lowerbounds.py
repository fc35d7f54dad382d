"""Checks of the lower bounds, claims T4.6-low and T4.7-low (docs/theory.md §5).

A record demonstrates a bound (a failure means: NOT demonstrated): ``cc`` (the
exact one-way CC of a task split, by enumeration, equals the stated value),
``reduction`` (Index -> task on every (x, i) against the task's reference),
``register correct`` / ``register broken`` (the register linear RNN is right up
to its capacity and broken beyond by a verified witness, exhaustive or birthday),
``random`` (seeded random linear RNNs broken), and the T4.7-low IsTree split,
reduction and register RNN. Records on a reduction's image say
``family="reduction"``; the splits of ``cc`` say ``family="split"``. The
separation records are in :mod:`checks.checks_separation`.

Details (each record, fields): docs/internals/verify.md#checks_lowerbounds
"""
from __future__ import annotations

import itertools
import time
from fractions import Fraction

import numpy as np

from rnngap.constructions.models import targets as T
from rnngap.constructions.build.protocol import feed, run_rnn
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as R
from rnngap.lowerbounds import witness as W

from .registry import Record, register
from rnngap.checks.tasks import task

CC_NS = {"quick": {"index": range(1, 11), "ar": range(1, 9), "cgram": range(1, 9), "counting": range(1, 9),
                   "istree": range(1, 8), "reduction": range(1, 7)},
         "full": {"index": range(1, 13), "ar": range(1, 11), "cgram": range(1, 11), "counting": range(1, 11),
                  "istree": range(1, 10), "reduction": range(1, 9)}}
REDUCTION_N = {"quick": range(1, 8), "full": range(1, 11)}
CAPACITIES = {"quick": (2, 3, 5), "full": (2, 3, 5, 8)}
SAMPLED_CAPACITIES = {"quick": (12,), "full": (12, 24, 40)}
SAMPLES = {"quick": 60, "full": 400}
BIRTHDAY_CAPACITIES = {"quick": (20, 32), "full": (20, 32)}
"""Register capacities c broken by birthday search at n = c + 1 (reachable state c
bits: ~1.25 * 2^(c/2) draws expected; c = 32 takes a few seconds, T4.6-low's
'at least 32 bits within a few minutes'; speed itself is measured by benchmarks)."""
REACHABLE_SAMPLES = 64
RANDOM_MODELS = {"quick": [(1, 3, s) for s in range(2)] + [(2, 3, 7)],
                 "full": [(1, 3, s) for s in range(5)] + [(2, 3, s) for s in range(5)] + [(2, 4, 11)]}
ISTREE_CAPACITY = {"quick": (3,), "full": (3, 5)}
ISTREE_BIRTHDAY = {"quick": 16, "full": 32}


def _ref(name: str, n: int):
    """The plain-Python task reference for the instances of reduction ``name`` (the task's spec)."""
    return task(name).reduction_reference(n)


def _reduction_alphabet(name: str, n: int) -> int:
    """The data alphabet reduction ``name`` writes at n (the task spec's ``reduction_alphabet``)."""
    return task(name).reduction_alphabet(n)


def _cc_records(claim: str, label: str, make, ns, expected) -> list[Record]:
    out = []
    for n in ns:
        t0 = time.perf_counter()
        problem = make(n)
        res = cc.one_way_complexity(problem)
        if problem.name.startswith("reduction:"):
            family, alphabet = "reduction", _reduction_alphabet(problem.name.split(":", 1)[1], n)
        else:   # the task's own split (alphabet 2; IsTree: the hub gadget's vertices)
            family, alphabet = "split", (n + 3 if label == "istree" else 2)
        want = expected(n)
        ok = res.exact and res.bits == want
        out.append(Record(claim, "one-way CC (exhaustive)", task(label).name, n, res.cells, 0 if ok else 1,
                          seconds=max(round(time.perf_counter() - t0, 3), 0.001),
                          note=f"{res.bits} bits ({res.distinct_rows} distinct rows), expected {want}",
                          family=family, alphabet=alphabet, description=f"cc {res.name}"))
    return out


def _reduction_records(claim: str, red: R.Reduction, ns) -> list[Record]:
    out = []
    for n in ns:
        t0 = time.perf_counter()
        try:
            chk = R.check_reduction(red, n, _ref(red.name, n))
            inst, fails, note = chk.instances, 0, f"answers {chk.answers}"
        except R.ReductionError as e:
            inst, fails, note = n * 2 ** n, 1, str(e)[:200]
        out.append(Record(claim, "reduction (exhaustive)", task(red.name).name, n, inst, fails,
                          seconds=max(round(time.perf_counter() - t0, 3), 0.001), note=note,
                          family="reduction", alphabet=_reduction_alphabet(red.name, n),
                          description=f"Index -> {red.name}"))
    return out


def _correctness(claim: str, target, red: R.Reduction, n: int, cases, declared_bits: int, label: str) -> Record:
    """Run ``target`` with a CoT of up to n tokens on ``cases`` ((x, i) pairs) and
    compare with the task reference."""
    t0 = time.perf_counter()
    ref = _ref(red.name, n)
    model = target.model if hasattr(target, "model") else target.inner.model
    fails, cot_max, first = 0, 0, ""
    count = 0
    for x, i in cases:
        toks = red.instance(x, i)
        run = run_rnn(target, toks, red.answer_tokens, max_cot=n)
        want = ref(toks.tolist())
        count += 1
        if run.answer != want:
            fails += 1
            first = first or f"x={''.join(map(str, x))} i={i}: model {run.answer}, reference {want}"
        cot_max = max(cot_max, len(run.cot))
    r = model.resources
    return Record(claim, target.name, task(red.name).name, n, count, fails, r.used_precision_bits, declared_bits,
                  cot_max, max(0, n - 1), r.params, target.state_bits, max(round(time.perf_counter() - t0, 3), 0.001),
                  note=first or "every answer equals the reference", family="reduction",
                  alphabet=_reduction_alphabet(red.name, n), description=label)


def _register_reachable(target, c: int, n: int, seed: int) -> tuple[int, str]:
    """Check the register RNN's reachable state after Alice's Index prefix:
    on ``REACHABLE_SAMPLES`` seeded x in {0,1}^n plus all-zeros and all-ones, the
    state number ``r`` decodes to exactly the binary number x_1..x_c in units of
    2^-f (plain integers: r 2^f == int('x_1..x_c', 2)), and every other state
    number is the same for every x. The map x_1..x_c -> r is then injective, so the
    2^c prefixes reach 2^c distinct states (c bits), and x_(c+1)..x_n are lost.
    Returns (prefixes checked, '' or what differs)."""
    f = T.register_declared(c, c + 4).frac_bits
    rng = np.random.default_rng(seed)
    xs = [tuple(int(v) for v in row) for row in rng.integers(0, 2, (REACHABLE_SAMPLES, n))]
    xs += [(0,) * n, (1,) * n]
    rest = None
    for x in xs:
        state = T.decode_state(target, feed(target, R.INDEX.alice(x)))
        want = Fraction(int("".join(map(str, x[:c])), 2), 1 << f)
        if state["r"] != want:
            return len(xs), f"x={''.join(map(str, x))}: register r = {state['r']}, want x_1..x_{c} / 2^{f} = {want}"
        others = {k: v for k, v in state.items() if k != "r"}
        if rest is None:
            rest = others
        elif others != rest:
            return len(xs), f"x={''.join(map(str, x))}: state numbers {others} differ from {rest}"
    return len(xs), ""


def _witness_record(claim: str, target, red: R.Reduction, n: int, mode: str, max_cot: int, label: str,
                    seed: int | None = None, reachable: int | None = None) -> Record:
    kw = {"max_cot": max_cot}
    if mode == "birthday":
        kw["seed"] = seed
    t0 = time.perf_counter()
    w = W.find_witness(target, red, n, mode=mode, **kw)
    ref = _ref(red.name, n)
    ok = w.found and bool(w.wrong)
    note = w.how
    if w.found:
        for toks, got, want in w.failing:   # the reference, not the reduction, decides
            ok = ok and ref(toks.tolist()) == want != got
        note = (f"x={''.join(map(str, w.x))} x'={''.join(map(str, w.x_prime))} i={w.i}: model "
                f"{w.answer} after {len(w.cot)} CoT tokens on both, references {w.expected}/{w.expected_prime}, "
                f"wrong on {','.join(w.wrong)}; {w.how}")
    if reachable is not None:
        note = f"{reachable}-bit reachable state (~{W.expected_birthday_draws(reachable):.0f} draws expected); " + note
    return Record(claim, getattr(target, "name", type(target).__name__), task(red.name).name, n,
                  max(1, w.states_explored),
                  0 if ok else 1, cot_max=len(w.cot) if w.found else None, cot_bound=max_cot,
                  state_bits=target.state_bits, seconds=max(round(time.perf_counter() - t0, 3), 0.001), note=note[:400],
                  family="reduction", alphabet=_reduction_alphabet(red.name, n), description=label)


# ------------------------------------------------------------------------ T4.6-low


@register("T4.6-low", "one-way communication complexity tables")
def cc_tables(profile: str, seed: int) -> list[Record]:
    ns = CC_NS[profile]
    out = []
    for label, expected in (("index", lambda n: n), ("ar", lambda n: n), ("cgram", lambda n: n),
                            ("counting", lambda n: cc.bits_for(n + 1))):
        out += _cc_records("T4.6-low", label, lambda n, s=task(label): s.cc_split(n, 2), ns[label], expected)
    for name in ("index", "ar", "cgram(c=3)", "counting"):
        red = R.REDUCTIONS[name]
        out += _cc_records("T4.6-low", name, lambda n, red=red: cc.reduction_split(red, n, _ref(red.name, n)),
                           ns["reduction"], lambda n: n)
    return out


@register("T4.6-low", "Index reductions (exhaustive)")
def reductions_check(profile: str, seed: int) -> list[Record]:
    out = []
    for name in ("index", "ar", "cgram(c=3)", "counting"):
        out += _reduction_records("T4.6-low", R.REDUCTIONS[name], REDUCTION_N[profile])
    return out


@register("T4.6-low", "register linear RNN: correct up to capacity, broken beyond")
def register_check(profile: str, seed: int) -> list[Record]:
    out = []
    for c in CAPACITIES[profile]:
        target = T.register_target(c, max_number=c + 4)
        dec = T.register_declared(c, c + 4)
        for n in range(1, c + 1):
            cases = [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
            out.append(_correctness("T4.6-low", target, R.INDEX, n, cases, dec.precision_bits,
                                    f"index, all instances, capacity {c}"))
        for n in (c + 1, c + 2):
            out.append(_witness_record("T4.6-low", target, R.INDEX, n, "exhaustive", n,
                                       f"index witness (CoT <= n), capacity {c}"))
        out.append(_witness_record("T4.6-low", target, R.INDEX, c + 1, "exhaustive", 0,
                                   f"index witness (no CoT), capacity {c}"))
    rng = np.random.default_rng(seed)
    for c in SAMPLED_CAPACITIES[profile]:
        target = T.register_target(c, max_number=c + 4)
        dec = T.register_declared(c, c + 4)
        xs = rng.integers(0, 2, (SAMPLES[profile], c))
        cases = [(tuple(int(v) for v in x), int(i)) for x, i in zip(xs, rng.integers(1, c + 1, len(xs)))]
        out.append(_correctness("T4.6-low", target, R.INDEX, c, cases, dec.precision_bits,
                                f"index, {len(cases)} seeded samples at n = c, capacity {c}"))
        mode = "exhaustive" if c + 1 <= W.EXHAUSTIVE_MAX_N else "birthday"
        out.append(_witness_record("T4.6-low", target, R.INDEX, c + 1, mode, c + 1,
                                   f"index witness (CoT <= n), capacity {c}", seed=seed))
    for c in BIRTHDAY_CAPACITIES[profile]:
        target = T.register_target(c, max_number=c + 4)
        rec = _witness_record("T4.6-low", target, R.INDEX, c + 1, "birthday", c + 1,
                              f"index birthday witness, {c}-bit register", seed=seed, reachable=c)
        t0 = time.perf_counter()
        checked, why = _register_reachable(target, c, c + 1, seed + 1000 + c)
        rec.seconds = round(rec.seconds + time.perf_counter() - t0, 3)
        if why:
            rec.failures += 1
            rec.note = f"reachable state NOT as claimed: {why}; {rec.note}"[:400]
        else:
            rec.note = (f"register = x_1..x_{c} in binary on {checked} seeded prefixes; " + rec.note)[:400]
        out.append(rec)
    return out


@register("T4.6-low", "random linear RNNs broken")
def random_check(profile: str, seed: int) -> list[Record]:
    out = []
    for S, f, s in RANDOM_MODELS[profile]:
        target = T.random_target(S, f, seed=seed + s, max_number=30)
        n = target.state_bits + 1
        mode = "exhaustive" if n <= W.EXHAUSTIVE_MAX_N else "birthday"
        out.append(_witness_record("T4.6-low", target, R.INDEX, n, mode, 0,
                                   f"index witness at n = state bits + 1 ({mode})", seed=seed))
    target = T.random_target(4, 8, seed=seed + 100, max_number=70)
    out.append(_witness_record("T4.6-low", target, R.AR, 64, "birthday", 0, "ar birthday witness", seed=seed))
    return out


# ------------------------------------------------------------------------ T4.7-low


@register("T4.7-low", "IsTree hub gadget: CC, reduction, register RNN broken")
def istree_check(profile: str, seed: int) -> list[Record]:
    out = _cc_records("T4.7-low", "istree", lambda n: task("istree").cc_split(n, 2),
                      CC_NS[profile]["istree"], lambda n: n)
    out += _cc_records("T4.7-low", "istree",
                       lambda n: cc.reduction_split(R.ISTREE, n, _ref("istree", n)),
                       CC_NS[profile]["reduction"], lambda n: n)
    out += _reduction_records("T4.7-low", R.ISTREE, REDUCTION_N[profile])
    for c in ISTREE_CAPACITY[profile]:
        target = T.IsTreeRegisterRNN(c, max_number=c + 6)
        dec = T.register_declared(c, c + 6)
        for n in range(1, c + 1):
            cases = [(x, i) for x in itertools.product((0, 1), repeat=n) for i in range(1, n + 1)]
            out.append(_correctness("T4.7-low", target, R.ISTREE, n, cases, dec.precision_bits,
                                    f"istree gadget, all instances, capacity {c}"))
        for n in (c + 1, c + 2):
            out.append(_witness_record("T4.7-low", target, R.ISTREE, n, "exhaustive", n,
                                       f"istree witness (CoT <= n), capacity {c}"))
        out.append(_witness_record("T4.7-low", target, R.ISTREE, c + 1, "exhaustive", 0,
                                   f"istree witness (no CoT), capacity {c}"))
    c = ISTREE_BIRTHDAY[profile]
    target = T.IsTreeRegisterRNN(c, max_number=c + 6)
    out.append(_witness_record("T4.7-low", target, R.ISTREE, c + 1, "birthday", c + 1,
                               f"istree birthday witness, {c}-bit register", seed=seed, reachable=c))
    return out
