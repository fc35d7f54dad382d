"""The whole-model certificates: their records, ``--explain``, and the abstract
instances they reason about, checked against the executable references.

A certificate proves "the readout decodes ``answer_code`` on every instance
satisfying the abstract instance's facts" (checks/tasks/abstract.py). That is a
statement about the task only if every concrete instance of the task satisfies
those facts and ``answer_code`` is the reference's answer there; the tests below
check both on every instance up to a small n (and MQAR on seeded sequences).
"""
from __future__ import annotations

import json
from argparse import Namespace

import numpy as np
import pytest

z3 = pytest.importorskip("z3")

from rnngap.checks.certify.run import certify, explain  # noqa: E402
from rnngap.checks.tasks import ar as AR, cgram as CG, counting as CT, index as IX  # noqa: E402
from rnngap.checks.tasks.abstract import INSTANCES, code  # noqa: E402


def _concrete_check(inst, tokens, values: dict, answer_token: int) -> None:
    """tau := the tokens' codes; the instance's facts, token facts and promise at every
    position are satisfiable together with the concrete values, and they force
    answer_code to the reference's code."""
    s = z3.Solver()
    for t, tok in enumerate(tokens):
        s.add(inst.tau(t) == code(int(tok)))
    s.add(inst.n == values.pop("n"))
    for name, v in values.items():
        s.add(inst.params[name] == v)
    s.add(*inst.facts)
    last = len(tokens) - 1
    s.add(inst.length == len(tokens))
    for t in range(len(tokens)):
        s.add(*inst.token_facts(z3.IntVal(t)))
        s.add(*inst.promise_at(z3.IntVal(t)))
    assert s.check() == z3.sat, "a concrete instance violates the abstract instance's facts"
    s.add(inst.answer_code(z3.IntVal(last)) != code(int(answer_token)))
    assert s.check() == z3.unsat, "the abstract answer is not the reference's"


@pytest.mark.parametrize("task, module, n_max, alphabet, kw", [
    ("index", IX, 4, 3, {}), ("ar", AR, 5, 3, {}), ("cgram(c=3)", CG, 5, 2, {"c": 3}),
    ("cgram(c=4)", CG, 6, 2, {"c": 4}), ("counting", CT, 4, 3, {})])
def test_abstract_instance_agrees_with_the_reference_on_every_small_instance(task, module, n_max, alphabet, kw):
    checked = 0
    lo = {"index": 1, "ar": 2, "cgram(c=3)": 3, "cgram(c=4)": 4, "counting": 1}[task]
    for n in range(lo, n_max + 1):
        batch = module.enumerate_all(n, alphabet, **kw)
        for row, ans in zip(batch.tokens, batch.answers):
            inst = INSTANCES[task]()
            ref = module.reference(row, **kw) if kw else module.reference(row)
            assert ref == ans
            vals = inst.concrete([int(x) for x in row])
            vals = {k: v for k, v in vals.items() if k == "n" or k in inst.params}
            inst.facts.append(inst.a == alphabet)
            _concrete_check(inst, row, vals, ans)
            checked += 1
    assert checked > 20


def test_the_facts_reject_an_instance_that_breaks_the_promise():
    """Can fail: AR with q occurring first at j but the instance claiming a later j."""
    inst = INSTANCES["ar"]()
    tokens = [0, 33, 34, 33, 35, 9, 33]          # x = 1 2 1 3, q = 1: first occurrence j = 1
    s = z3.Solver()
    for t, tok in enumerate(tokens):
        s.add(inst.tau(t) == code(tok))
    s.add(inst.n == 4, inst.params["j"] == 3, inst.a == 4, *inst.facts)
    for t in range(len(tokens)):
        s.add(*inst.token_facts(z3.IntVal(t)), *inst.promise_at(z3.IntVal(t)))
    assert s.check() == z3.unsat


def test_mqar_cases_agree_with_the_reference():
    rng = np.random.default_rng(7)
    for _ in range(15):
        seq = [int(v) for v in rng.integers(0, 4, size=int(rng.integers(2, 9)))]
        want = AR.mqar_reference(seq)
        tokens = [0] + [32 + v for v in seq]
        inst = INSTANCES["mqar"]()
        for t in range(1, len(tokens)):
            T = z3.IntVal(t)
            answers = set()
            for case in inst.cases(T):
                s = z3.Solver()
                for k, tok in enumerate(tokens):
                    s.add(inst.tau(k) == code(tok))
                s.add(inst.n == len(seq), *inst.facts, *case.facts)
                for k in range(len(tokens) + 1):
                    s.add(*inst.promise_at_case(case, z3.IntVal(k)))
                if s.check() != z3.sat:
                    continue
                answers.add(s.model().eval(inst.answer_code(T, case)).as_long())
            # the model's token at t predicts the token after the first earlier match
            expect = 0 if want[t - 1] < 0 else want[t - 1] + 1
            assert answers == {expect}, (seq, t, answers)


def test_json_records_carry_covers_source_and_schema(tmp_path):
    from rnngap.checks.cli import cmd_certify
    path = tmp_path / "c.json"
    rc = cmd_certify.run(Namespace(only=["index-transformer[a=n+2]", "index-rag"], json=str(path),
                                   explain=None))
    assert rc == 0
    recs = {r["construction"]: r for r in json.loads(path.read_text())}
    b = recs["index-transformer[a=n+2]"]
    assert b["source"] == "built-model" and b["schema_version"] == 11 and b["n_max_int64"] == b["n_max"]
    assert {"format", "embedding", "heads", "readout", "builder-margins"} <= set(b["covers"])
    assert all(f["answer"] in ("unsat", "holds") for f in b["facts"])
    h = recs["index-rag"]
    assert h["source"] == "declared-obligation" and h["covers"] == []


def test_explain_prints_the_chain(capsys):
    from rnngap.checks.cli import cmd_certify
    from rnngap.checks.io.errors import UsageError
    rc = cmd_certify.run(Namespace(only=None, json=None, explain="counting-transformer[a=3]"))
    out = capsys.readouterr().out
    assert rc == 0
    for part in ("[format]", "[builder]", "[layer 2 head count]", "[readout]", "every non-member is s below"):
        assert part in out, part
    with pytest.raises(UsageError):
        cmd_certify.run(Namespace(only=None, json=None, explain="no-such"))
    r = certify(["index-rag"], facts=False)[0]
    assert "no built-model proof chain" in explain(r)


# ----------------------------------------------------------------------------
# the machine lemmas (checks/certify/machine_lemmas.py), and that they can fail
def test_machine_lemmas_hold_on_every_format_of_a_slice():
    from rnngap.checks.certify import machine_lemmas as ML
    fmts = [(I, f) for I, f in ML.formats() if f in (0, 1, 7, 20, 40, 61) or I + f == 62]
    assert len(fmts) > 100
    for I, f in fmts:
        assert ML.one_hot(I, f) == [] and ML.equal_split(I, f) == [], (I, f)


def test_one_hot_lemma_fails_for_a_gap_below_the_sharpness():
    from rnngap.checks.certify import machine_lemmas as ML
    from rnngap.constructions.build.num import sharpness
    import math
    # a gap just below (f + 1) ln 2 leaves exp(-g) 2^f >= 1/2: it rounds to a nonzero weight
    broken = [f for f in range(0, 40) if ML.one_hot(20, f, s=math.floor((f + 1) * math.log(2))) != []]
    assert broken, "no format shows the lemma failing one step below the sharpness"
    assert all(sharpness(f) > (f + 1) * math.log(2) for f in range(62))


def test_equal_split_lemma_fails_with_a_truncating_division(monkeypatch):
    from rnngap.checks.certify import machine_lemmas as ML
    from rnngap.constructions.machine import fixedpoint as FP
    monkeypatch.setattr(FP, "fx_div", lambda a, b, I, f, mode, err: (int(a) << f) // int(b))
    assert ML.equal_split(4, 3) != []


def test_every_plan_names_a_task_spec_and_an_abstract_instance():
    from rnngap.checks.catalog.records import certificates
    from rnngap.checks.tasks import task
    planned = {name: c.plan for name, c in certificates().items() if c.plan is not None}
    assert len(planned) >= 12
    for key, mp in planned.items():
        assert task(mp.task).name == mp.task, key
        assert mp.task in INSTANCES, key


def test_ctrl_c_inside_z3_stops_the_proof():
    """z3 takes SIGINT for itself while it solves and answers unknown; prove() turns
    that into KeyboardInterrupt, so Ctrl-C ends `rnngap certify` (exit 130) instead
    of being read as an unknown answer and ignored."""
    import os
    import signal
    import threading
    import time

    from rnngap.checks.certify.sizes import prove
    x, y, w = z3.Ints("x y w")
    hard = [x * x * x + y * y * y == w * w * w, x > 1, y > 1, w > 1]
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        timer.start()
        prove(hard, z3.BoolVal(False), timeout_ms=60000, portfolio=False)
    timer.join()
    assert time.monotonic() - t0 < 30


def test_a_tactic_configuration_solves_the_recorded_query_in_a_new_process():
    """prove() with a tactic portfolio (checks.certify.sizes.NIA_PORTFOLIO): a true
    nonlinear fact is unsat, a false one sat with its counterexample, the query
    recorded is the SMT-LIB text solved, a text that does not say what the terms
    say is refused (unknown, never a proof), and Ctrl-C while the new process
    solves ends the proof."""
    import os
    import signal
    import threading
    import time

    from rnngap.checks.certify.sizes import NIA_PORTFOLIO, prove
    lam, u, v = z3.Ints("lam u v")
    hyps = [lam >= 1, u != v]
    ok = prove(hyps, lam * (u - v) * (u - v) >= lam, 20000, NIA_PORTFOLIO)
    assert ok["answer"] == "unsat" and ok["config"].startswith("tactic=qfnia")
    assert "(declare-fun lam () Int)" in ok["query"]
    bad = prove(hyps, lam * (u - v) * (u - v) >= lam + 1, 20000, NIA_PORTFOLIO)
    assert bad["answer"] == "sat" and "lam = " in bad["counterexample"]
    # two functions named f with different sorts print as one name: the text would
    # not say what the terms say (here it would make a satisfiable query unsat)
    fi = z3.Function("f", z3.IntSort(), z3.IntSort())
    fr = z3.Function("f", z3.IntSort(), z3.RealSort())
    clash = prove([fi(u) == 1, fr(u) == z3.RealVal("1/2")], z3.BoolVal(False), 20000, NIA_PORTFOLIO[:1])
    assert clash["answer"] == "unknown" and "does not parse back" in clash["config"]
    x, y, w = z3.Ints("x y w")
    hard = [x * x * x + y * y * y == w * w * w, x > 1, y > 1, w > 1]
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):      # interrupted while the solver process runs
        timer.start()
        prove(hard, z3.BoolVal(False), 60000, NIA_PORTFOLIO[:1])
    timer.join()
    assert time.monotonic() - t0 < 30


def _iterate_rows(n: int, rng) -> list[tuple[list[int], int, int]]:
    """(padding, a, s) of ITER(n): every instance for n <= 2, else zero and one seeded
    random padding with every a and s."""
    import itertools
    m = 2 * n
    pads = ([list(p) for p in itertools.product(range(m), repeat=n)] if n <= 2
            else [[0] * n, [int(v) for v in rng.integers(0, m, n)]])
    return [(p, a, s) for p in pads for a in range(m) for s in range(n * n + 1)]


def test_the_iterate_instance_agrees_with_the_reference_token_for_token():
    """The ITER abstract instance (prompt, then the CoT so far) against
    checks/tasks/iterate.py: on every instance for n <= 2 (and every a, s with two
    paddings at n = 3), the prompt followed by the reference's CoT g(a)..g^s(a)
    satisfies the facts, and at each readout position n + 3 + k the answer term of
    its case is the reference's next token: g^(k+1)(a) while k < s, the answer at
    k = s. Can fail: a wrong g (e.g. the rotation by 0) or a case at the wrong k."""
    from rnngap.checks.tasks import iterate as IT
    from rnngap.constructions.machine.vocab import BOS, QUERY
    rng = np.random.default_rng(3)
    checked = 0
    for n in (1, 2, 3):
        for pad, a, steps in _iterate_rows(n, rng):
            prompt = [BOS] + [32 + v for v in pad] + [QUERY, 32 + 2 * n + steps, 32 + a]
            orbit = IT.orbit(n, a, steps)
            tokens = prompt + [32 + v for v in orbit[1:]]
            inst = INSTANCES["iterate"]()
            assert inst.concrete(prompt) == {"n": n, "s": steps, "a0": a}
            s = z3.Solver()
            for t, tok in enumerate(tokens):
                s.add(inst.tau(t) == code(tok))
            s.add(inst.n == n, inst.steps == steps, inst.a0 == a, *inst.facts, inst.length == len(tokens))
            for t in range(len(tokens)):
                s.add(*inst.token_facts(z3.IntVal(t)))
            assert s.check() == z3.sat, (n, pad, a, steps)
            answer = IT.reference(prompt)
            for k in range(steps + 1):
                T = z3.IntVal(n + 3 + k)
                want = code(answer) if k == steps else orbit[k + 1] + 1
                live = [c for c in inst.cases(T)
                        if s.check(*c.facts, inst.readout_positions(T)) == z3.sat]
                assert [c.terms["answer"] for c in live] == [k == steps]
                assert s.check(*live[0].facts, inst.answer_code(T, live[0]) != want) == z3.unsat, (n, a, steps, k)
                checked += 1
    assert checked > 1000


def test_the_iterate_facts_reject_a_wrong_step_count():
    """Can fail: the prompt says s = 3 but the instance claims s = 2."""
    from rnngap.constructions.machine.vocab import BOS, QUERY
    inst = INSTANCES["iterate"]()
    tokens = [BOS, 32, 32, QUERY, 32 + 4 + 3, 32 + 1]
    s = z3.Solver()
    for t, tok in enumerate(tokens):
        s.add(inst.tau(t) == code(tok), *inst.token_facts(z3.IntVal(t)))
    s.add(inst.n == 2, inst.steps == 2, *inst.facts)
    assert s.check() == z3.unsat
