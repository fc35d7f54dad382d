"""Turing-machine simulation with CoT (constructions/models/turing.py; claims T5-hyb-P and T5-RAG).

Layers:
* the machines and the plain-Python reference agree with automata-lib's own
  runs (acceptance, step count, final tape; arithmetic for increment / addition)
  on every input up to length 8;
* the hybrid: registers (state one-hot, head) decoded from the residual at every
  CoT position against the reference run; every input up to a small length
  (default suite) and up to 8 (``-m full``), CoT token for token;
* the linear RNN + RAG: every input up to length 8 for increment (default suite,
  one model compiled for 8, a few seconds) and up to a small length for the others
  (8 with ``-m full``), CoT token for token, the oracle never failing; the program's exact Python
  interpretation agrees with the compiled model position by position;
* resources: constant params across n, declared formats (Python = sympy, O(log n)),
  state bits; a wrong input one bit below the measured frontier (saturate mode); machines moving left of cell 0
  are refused.
"""
from __future__ import annotations


import pytest
import sympy as sp
from automata.tm.dtm import DTM

from rnngap.checks.verify import checks_turing as CT
from rnngap.checks.tasks import turing as TR
from rnngap.constructions.models import turing as T
from rnngap.constructions.machine.vocab import FALSE, TRUE
from rnngap.constructions.machine.formats import FixedFormat

MACHINES = list(T.MACHINES)


def all_words(enc, n_max):
    for n in range(n_max + 1):
        yield from CT.words(enc, n)


# ---------------------------------------------------------------- machines and reference
@pytest.mark.parametrize("name", MACHINES)
def test_reference_matches_automata_lib_up_to_8(name):
    spec = T.MACHINES[name]
    enc = T.Encoding.of(spec.build())
    for w in all_words(enc, 8):
        acc, steps, tape = T.automata_run(enc.dtm, w)
        ref = TR.reference_run(enc.dtm, w, spec.time_bound(len(w)))
        assert (ref.accepted, ref.steps) == (acc, steps), w
        assert steps <= spec.time_bound(len(w))
        got = T.tape_string(enc, ref.tape, max(len(tape) - 1, max(ref.tape, default=0)))
        assert got.rstrip(enc.dtm.blank_symbol) == tape.rstrip(enc.dtm.blank_symbol), w
        if acc and spec.tape_value is not None:
            assert spec.tape_value(w, tape), (w, tape)


def test_machine_languages():
    """The languages, decided independently in plain Python."""
    enc = {k: T.Encoding.of(T.MACHINES[k].build()) for k in MACHINES}
    for w in all_words(enc["palindrome"], 8):
        assert T.automata_run(enc["palindrome"].dtm, w)[0] == (w == w[::-1])
        k = len(w) // 2
        assert T.automata_run(enc["0k1k"].dtm, w)[0] == (k >= 1 and w == "0" * k + "1" * k)
        assert T.automata_run(enc["addition"].dtm, w)[0] == (len(w) % 2 == 0)
        assert T.automata_run(enc["increment"].dtm, w)[0]


def test_left_of_tape_refused():
    dtm = DTM(states={"a", "f"}, input_symbols={"0"}, tape_symbols={"0", "_"},
              transitions={"a": {"0": ("a", "0", "L"), "_": ("f", "_", "N")}},
              initial_state="a", blank_symbol="_", final_states={"f"})
    enc = T.Encoding.of(dtm)
    with pytest.raises(TR.LeftOfTape):
        TR.reference_run(enc.dtm, "0", 10)


# ---------------------------------------------------------------- hybrid
def test_hybrid_registers_decoded_step_by_step():
    spec = T.MACHINES["palindrome"]
    sim = T.tm_hybrid(spec, 5)
    enc = sim.enc
    for w in ("01010", "0110", "011"):
        ref = TR.reference_run(enc.dtm, w, spec.time_bound(5))
        g = sim.run(w)
        assert g.cot == ref.hybrid_cot()
        sess = sim.model.session(capacity=len(g.context) + 1)
        sess.feed(g.prompt)
        q, h = enc.dtm.initial_state, 0
        for i, tok in enumerate(g.cot):
            sess.feed([tok])
            r = sess.residual()
            if i % 2 == 1:                      # an action token: registers updated
                act = enc.actions[tok - T.NUMBER_BASE]
                q, h = act.new_state, h + act.move
            assert r["head"] == h
            assert all(r[f"q[{s}]"] == (s == q) for s in enc.states)
            assert r["phase"] == (i % 2)


@pytest.mark.parametrize("name", MACHINES)
def test_hybrid_every_input_small(name):
    spec = T.MACHINES[name]
    for n in range(0, 6):
        tally, sim = CT.run_hybrid(spec, n)
        assert tally.failures == 0, tally.first_failure
        assert tally.cot_max <= 2 * spec.time_bound(n) + 1
        r = sim.model.resources
        assert r.used_precision_bits <= sim.model.fmt.total_bits


@pytest.mark.full
@pytest.mark.parametrize("name", MACHINES)
def test_hybrid_every_input_up_to_8(name):
    spec = T.MACHINES[name]
    for n in range(0, 9):
        tally, _ = CT.run_hybrid(spec, n)
        assert tally.failures == 0, tally.first_failure


@pytest.mark.parametrize("name", MACHINES)
def test_hybrid_constant_params_and_declared(name):
    spec = T.MACHINES[name]
    sims = [T.tm_hybrid(spec, n) for n in (0, 3, 8)]
    assert len({s.model.resources.params for s in sims}) == 1
    assert len({s.model.resources.state_numbers for s in sims}) == 1
    decl = T.hybrid_declared(sims[0].enc, spec)
    for n in list(range(0, 10)) + [31, 64, 1000]:
        assert decl.int_bits(n) == int(decl.int_expr.subs(T.NSYM, n))
        assert decl.frac_bits(n) == int(decl.frac_expr.subs(T.NSYM, n))
    _assert_log(decl.int_expr)


def _assert_log(expr):
    """expr = O(log n): drop floor/ceiling/Max (monotone, within +1 / a max of
    polynomials) and take the limit of expr / log n."""
    e = expr.replace(sp.floor, lambda a: a).replace(sp.ceiling, lambda a: a)
    e = e.replace(sp.Max, lambda *a: sum(a))
    ratio = sp.limit(e / sp.log(T.NSYM), T.NSYM, sp.oo)
    assert ratio.is_finite and ratio > 0


@pytest.mark.parametrize("kind", ["hybrid", "rag"])
def test_necessity_wrong_one_bit_below_the_frontier(kind):
    """Saturate mode (never raise): at the declared format every input of length <= n
    is right; one integer bit below the measured frontier some input is answered
    wrongly, answered not at all or written wrongly, classified as a re-run here finds."""
    from rnngap.checks.verify.necessity import necessity_record
    spec = T.MACHINES["0k1k"]
    if kind == "hybrid":
        sim = T.tm_hybrid(spec, 3)

        def run(model, w):
            from rnngap.constructions.build.generate import generate
            g = generate(model, sim.enc.prompt(w), answer_tokens=[TRUE, FALSE],
                         max_cot=2 * spec.time_bound(len(w)) + 1)
            return g.answer, g.cot, TR.reference_run(sim.enc.dtm, w, spec.time_bound(len(w))).hybrid_cot()
    else:
        sim = T.tm_rag(spec, 3)

        def run(model, w):
            g, _ = sim.run(w, model=model)
            return g.answer, g.cot, TR.reference_rag_cot(sim.enc.dtm, w, spec.time_bound(len(w)))[0]
    check = CT.tm_runner(sim.enc, spec, 3, run)
    assert check(sim.model).ok
    rec = necessity_record("T5-RAG", sim.model.name, "0k1k", 3, task="tm", family="exhaustive", alphabet=2,
                           declared=sim.model.fmt, run=check, model=sim.model)
    assert rec.passed and rec.raised_below is False, rec.note
    assert rec.frontier_int_bits <= sim.model.fmt.int_bits
    # one bit below, re-run here: a wrong final answer and no answer are told apart
    low = sim.model.with_format(FixedFormat(rec.frontier_int_bits - 1, sim.model.fmt.frac_bits, "saturate"))
    got = [(run(low, w)[0], TR.reference_run(sim.enc.dtm, w, spec.time_bound(len(w))).answer)
           for k in range(4) for w in CT.words(sim.enc, k)]
    assert rec.wrong_below == any(a is not None and a != want for a, want in got)
    assert rec.no_answer_below == any(a is None for a, want in got)
    assert rec.int_tight == rec.wrong_below
    assert rec.wrong_below or rec.no_answer_below or rec.cot_deviation_below, rec.note


# ---------------------------------------------------------------- linear RNN + RAG
@pytest.mark.parametrize("name,n_max", [("increment", 8), ("palindrome", 3), ("0k1k", 4), ("addition", 4)])
def test_rag_every_input_small(name, n_max):
    """One model compiled for n_max runs every input of every length <= n_max
    (increment reaches 8 cheaply: its runs take n + 1 steps)."""
    spec = T.MACHINES[name]
    sim = T.tm_rag(spec, n_max)
    for n in range(0, n_max + 1):
        tally, _, bad_oracle = CT.run_rag(spec, n, sim)
        assert tally.failures == 0, tally.first_failure
        assert bad_oracle == 0
        assert tally.cot_max <= T.rag_cot_bound(n, spec.time_bound(n))
    assert sim.model.resources.used_precision_bits <= sim.model.fmt.total_bits


@pytest.mark.full
@pytest.mark.parametrize("name", MACHINES)
def test_rag_every_input_up_to_8(name):
    spec = T.MACHINES[name]
    for n in range(0, 9):
        tally, _, bad_oracle = CT.run_rag(spec, n)
        assert tally.failures == 0 and bad_oracle == 0, tally.first_failure


def test_rag_program_interpretation_agrees_with_model():
    """The Program's exact Python interpretation and the compiled model agree at
    every position of a run: the head register, and wherever the output is read
    (from [EOS] on, except at [ENDSEARCH] where the oracle answers) exactly one
    rule fires and the model emits the next context token (the answer at the end)."""
    from rnngap.constructions.machine.vocab import ENDSEARCH, token_from_code
    spec = T.MACHINES["palindrome"]
    sim = T.tm_rag(spec, 3)
    g, _ = sim.run("010")
    ctx = g.context
    trace = sim.program.run_python(ctx)
    sess = sim.model.session(capacity=len(ctx) + 1)
    read = 0
    for i, tok in enumerate(ctx):
        sess.feed([tok])
        out = sess.next_token()
        env = trace[i]
        assert env["h"] == sess.residual()["h"]
        if i >= len(g.prompt) - 1 and tok != ENDSEARCH:
            want = ctx[i + 1] if i + 1 < len(ctx) else g.answer
            assert len(env["_fired"]) == 1, (i, env["_fired"])
            assert token_from_code(env["out"]) == out == want
            read += 1
    assert read > len(g.cot) // 2


def test_rag_constant_params_and_declared():
    spec = T.MACHINES["increment"]
    sims = [T.tm_rag(spec, n) for n in (0, 4, 12)]
    assert len({s.model.resources.params for s in sims}) == 1
    decl = T.rag_declared(sims[0].enc, spec)
    for n in list(range(0, 10)) + [31, 64, 1000]:
        assert decl.int_bits(n) == int(decl.int_expr.subs(T.NSYM, n))
    _assert_log(decl.int_expr)
    for s in sims:
        assert s.model.resources.state_bits == s.model.resources.state_numbers * s.model.fmt.total_bits


def test_rag_records_decode():
    spec = T.MACHINES["increment"]
    sim = T.tm_rag(spec, 4)
    g, _ = sim.run("1101")
    ref = TR.reference_run(sim.enc.dtm, "1101", spec.time_bound(4))
    assert sim.records(g.cot) == ref.records


# ---------------------------------------------------------------- NUMBA_DISABLE_JIT=1 gives the same runs
_FINGERPRINT = """
import json, numpy as np, numba
from rnngap.constructions.models import turing as T, hybrid as H
from rnngap.checks.tasks import index
out = {"jit_disabled": bool(numba.config.DISABLE_JIT)}
sim = T.tm_hybrid(T.MACHINES["increment"], 3)
out["hybrid_tm"] = [[w, sim.run(w).cot, sim.run(w).answer] for w in ("", "1", "11", "101", "111")]
rag = T.tm_rag(T.MACHINES["increment"], 2)
out["rag_tm"] = [[w, rag.run(w)[0].cot] for w in ("", "1", "11")]
b = index.enumerate_all(3, alphabet=2)
out["index_hybrid"] = H.index_hybrid(3).predict_batch(np.asarray(b.tokens)).tolist()
print(json.dumps(out))
"""


def test_pure_python_path_is_identical_to_the_jit():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", _FINGERPRINT], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nojit = json.loads(proc.stdout.strip().splitlines()[-1])
    assert nojit.pop("jit_disabled") is True
    env.pop("NUMBA_DISABLE_JIT")
    proc = subprocess.run([sys.executable, "-c", _FINGERPRINT], env=env, cwd=root, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jit = json.loads(proc.stdout.strip().splitlines()[-1])
    assert jit.pop("jit_disabled") is False
    assert jit == nojit
