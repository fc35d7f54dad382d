"""Tests of the Transformer that simulates a linear RNN (claim sim,
constructions/models/simulate.py): decoded CoT state == the RNN's own state after every
token, Y tokens == the RNN's CoT, same answer, CoT length B (L + c) - 1; on
random seeded dyadic RNNs (exhaustive short prompts, hypothesis longer ones) and
on the T4.1 RNN; blocks (heads, MLP gadgets), refusals, bits."""
import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.models.demos import count_threshold_transformer
from rnngap.constructions.machine.fixedpoint import PrecisionError
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import Builder, ResidualSpace
from rnngap.constructions.build.generate import generate
from rnngap.constructions.models.simulate import compare, random_linear_rnn, rnn_trace, rnnsim_transformer
from rnngap.constructions.machine.vocab import BOS, FALSE, NUMBER_BASE, TRUE, Vocab

ALL = None


def prompts(max_len, alphabet=3):
    for L in range(max_len + 1):
        for xs in itertools.product(range(alphabet), repeat=L):
            yield [BOS] + [NUMBER_BASE + x for x in xs]


@pytest.fixture(scope="module")
def sims():
    out = {}
    for seed in (0, 1, 2):
        out[seed] = rnnsim_transformer(random_linear_rnn(seed), max_prompt=9, max_rnn_cot=2, state_int_bits=4)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_rnn_exhaustive_short_prompts(sims, seed):
    sim = sims[seed]
    n_states = 0
    for p in prompts(3):
        for ans in (ALL, [TRUE, FALSE]):
            msg, run, tr = compare(sim, p, ans)
            assert msg == "", (p, ans, msg)
            n_states += len(tr.states)
            assert len(run.cot) <= sim.cot_bound(len(p))
    assert n_states > 0
    r = sim.model.resources
    assert r.used_precision_bits <= sim.fmt.total_bits


def test_states_are_nontrivial_dyadic(sims):
    """The random RNNs exercise rounding: some states are not integers, and the
    simulation reproduces them (checked by compare above)."""
    sim = sims[0]
    tr = rnn_trace(sim.rnn, [BOS, NUMBER_BASE + 1, NUMBER_BASE + 2, NUMBER_BASE], None, 0)
    vals = {v for s in tr.states for v in s}
    assert any(v.denominator > 1 for v in vals) and len(vals) > 3


def test_step_by_step_decoding_matches(sims):
    sim = sims[1]
    p = [BOS, NUMBER_BASE + 2, NUMBER_BASE + 0, NUMBER_BASE + 1]
    tr = rnn_trace(sim.rnn, p, [TRUE, FALSE], 2)
    run = sim.run(p, [TRUE, FALSE])
    assert run.counters == list(range(len(tr.states)))
    assert run.states == tr.states
    assert run.ys[:len(p) - 1] == [None] * (len(p) - 1)


def test_compare_detects_a_wrong_state(sims, monkeypatch):
    sim = sims[0]
    p = [BOS, NUMBER_BASE + 1]
    good = sim.run(p, None)
    bad_cot = list(good.cot)
    bad_cot[1] += 1                      # first state number of block 0, one grid step off
    monkeypatch.setattr(sim, "run", lambda prompt, answers: sim.decode(bad_cot, good.answer, good.stopped))
    msg, _, _ = compare(sim, p, None)
    assert msg.startswith("step 0")


@pytest.mark.parametrize("n", [2, 3])
def test_t41_rnn_exhaustive(n):
    rnn = CH.iterate_rnn(n)
    T = CH.steps(n)
    sim = rnnsim_transformer(rnn, max_prompt=n + 4, max_rnn_cot=T, state_int_bits=(T + 2 * n + 4).bit_length())
    for a in range(2 * n):
        for t in range(T + 1):
            p = CH.prompt(n, a, t)
            msg, run, tr = compare(sim, p, [TRUE, FALSE])
            assert msg == "", (a, t, msg)
            # L = n + 4 prompt tokens, t RNN CoT tokens, B = S + 2 = 6 tokens per step
            assert len(p) == n + 4 and sim.B == 6
            assert run.answer == tr.answer and len(run.cot) == sim.B * (n + 4 + t) - 1
    assert sim.model.resources.used_precision_bits <= sim.fmt.total_bits


def test_constant_size_in_the_length():
    rnn = random_linear_rnn(5)
    shapes = set()
    for L in (4, 16, 64):
        m = rnnsim_transformer(rnn, max_prompt=L, max_rnn_cot=L, state_int_bits=4).model
        shapes.add((m.resources.params, m.spec.width, len(m.spec.attn_layers),
                    tuple(len(l.heads) for l in m.spec.attn_layers)))
    assert len(shapes) == 1


def test_saturate_one_bit_below_the_frontier_is_classified(sims):
    """Necessity (docs/theory.md §1), not a raise-mode re-run: in saturate mode the
    simulating Transformer's integer-bit frontier lies at or below its declared
    I, and one bit below it some run differs from the RNN's. Checked here
    independently at frontier - 1, run by run against the RNN's own trace: the
    scan's ``wrong_below`` is exactly "some final answer is another answer",
    ``no_answer_below`` "some run wrote no answer where the RNN answers",
    ``cot_deviation_below`` "some answer is right but the CoT differs"."""
    from rnngap.checks.verify.checks_hierarchy import sim_runner
    from rnngap.checks.verify.necessity import measure
    sim = sims[2]
    runs = []
    for p in prompts(2):
        msg, run, tr = compare(sim, p, [TRUE, FALSE])
        assert msg == ""
        runs.append((p, [TRUE, FALSE], run.cot, run.answer))
    si, sf = measure(sim.fmt, sim_runner(runs), model=sim.model)
    assert si.frontier is not None and si.frontier <= sim.fmt.int_bits and not si.raised_below
    low = sim.model.with_format(FixedFormat(si.frontier - 1, sim.fmt.frac_bits, "saturate"))
    differs = wrong = none = cot_only = 0
    for p, ans, cot, answer in runs:
        tr = rnn_trace(sim.rnn, p, ans, sim.max_rnn_cot)
        g = generate(low, p, answer_tokens=ans, max_cot=len(cot))
        r = sim.decode(g.cot, g.answer, g.stopped)
        differs += r.states[:len(tr.states)] != tr.states or g.answer != tr.answer
        wrong += g.answer != answer and g.answer is not None
        none += g.answer != answer and g.answer is None
        cot_only += g.answer == answer and g.cot != cot
    assert differs > 0
    assert (si.wrong_below, si.no_answer_below, si.cot_deviation_below) == (wrong > 0, none > 0, cot_only > 0)
    assert si.tight == si.wrong_below


def test_refuses_unsupported_models():
    with pytest.raises(ValueError, match="linear RNN"):
        rnnsim_transformer(count_threshold_transformer(4), max_prompt=4)
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.hidden("u")
    b = Builder("mixed-readout", "linear_rnn", Vocab(3), s)
    b.rnn_layer(["h"], A={("h", "h"): Fraction(1, 2)}, B={("h", "tok"): 1}, C={("u", "h"): 1})
    b.readout([("u", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1), ("u", K.F_IS_TOKEN, NUMBER_BASE + 1, 1)])
    with pytest.raises(ValueError, match="not supported"):
        rnnsim_transformer(b.build(FixedFormat(6, 2)), max_prompt=4)
    b2 = Builder("half-readout", "linear_rnn", Vocab(3), s.__class__())
    s2 = b2.space
    s2.embedded("one", K.F_ONE)
    s2.embedded("tok", K.F_TOK)
    s2.hidden("u")
    b2.rnn_layer(["h"], A={}, B={("h", "tok"): 1}, C={("u", "h"): 1})
    b2.readout([("u", K.F_TOK, 0, 1), ("one", K.F_TOK_SQ, 0, -1)])
    with pytest.raises(ValueError, match="2 x an integer"):
        rnnsim_transformer(b2.build(FixedFormat(6, 2)), max_prompt=4)


def test_state_range_precondition_is_reported():
    rnn = CH.iterate_rnn(2)
    sim = rnnsim_transformer(rnn, max_prompt=6, max_rnn_cot=4, state_int_bits=2)    # c reaches 3 + t >= 4
    msg, _, _ = compare(sim, CH.prompt(2, 1, 4), [TRUE, FALSE])
    assert msg.startswith("precondition violated")


_LONG_SIMS = {}


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2), st.sampled_from([8, 16, 32, 64]), st.data(), st.booleans())
def test_hypothesis_longer_prompts(seed, max_prompt, data, with_cot):
    """Growing prompts: a simulator built for prompts up to 8, 16, 32 or 64 tokens
    reproduces the random RNN's run (state after every token) on a drawn prompt
    of up to that length."""
    key = (seed, max_prompt)
    if key not in _LONG_SIMS:
        _LONG_SIMS[key] = rnnsim_transformer(random_linear_rnn(seed), max_prompt=max_prompt, max_rnn_cot=2,
                                       state_int_bits=4)
    sim = _LONG_SIMS[key]
    xs = data.draw(st.lists(st.integers(0, 2), min_size=max_prompt // 2, max_size=max_prompt - 1))
    p = [BOS] + [NUMBER_BASE + x for x in xs]
    msg, run, tr = compare(sim, p, [TRUE, FALSE] if with_cot else None)
    assert msg == ""


def test_indicator_readout_random_targets():
    from rnngap.constructions.models import targets as TG
    for seed in (0, 1):
        sim = rnnsim_transformer(TG.random_linear_rnn(2, 3, seed, max_number=4), max_prompt=5, max_rnn_cot=0)
        for p in prompts(3):
            msg, run, tr = compare(sim, p, None)
            assert msg == "", (seed, p, msg)


def test_register_index_rnn_with_its_cot():
    from rnngap.constructions.models import targets as TG
    from rnngap.constructions.machine.vocab import QUERY
    c = 3
    sim = rnnsim_transformer(TG.register_index_rnn(c, max_number=c + 2), max_prompt=c + 3, max_rnn_cot=c)
    for n in range(1, c + 1):
        for xs in itertools.product(range(2), repeat=n):
            for i in range(1, n + 1):
                p = [BOS] + [NUMBER_BASE + x for x in xs] + [QUERY, NUMBER_BASE + i]
                msg, run, tr = compare(sim, p, [NUMBER_BASE, NUMBER_BASE + 1])
                assert msg == "", (p, msg)
                assert tr.answer == NUMBER_BASE + xs[i - 1] and len(tr.cot) == i - 1


NOJIT_SCRIPT = """
import json
from rnngap.constructions.models.simulate import rnnsim_transformer, random_linear_rnn
from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, TRUE, FALSE
sim = rnnsim_transformer(random_linear_rnn(1), max_prompt=3, max_rnn_cot=1, state_int_bits=3)
run = sim.run([BOS, NUMBER_BASE + 2], [TRUE, FALSE])
print(json.dumps([run.cot, run.answer, sim.model.resources.used_int_bits]))
"""


def test_numba_disabled_identical():
    import json
    import os
    import subprocess
    import sys
    outs = []
    for jit in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit)
        r = subprocess.run([sys.executable, "-c", NOJIT_SCRIPT], env=env, capture_output=True, text=True, check=True)
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1] and len(outs[0][0]) > 0


def test_declared_int_bits_grow_logarithmically():
    rnn = random_linear_rnn(3)
    bits = {L: rnnsim_transformer(rnn, max_prompt=L, max_rnn_cot=0, state_int_bits=4).fmt.int_bits
            for L in (4, 64, 1024)}
    # I = 2 log2(context) + O(1) once positions dominate the token codes
    assert bits[1024] - bits[64] <= 2 * 4 + 2
    assert bits[4] <= bits[64] <= bits[1024]


_T41_SIMS = {}


@settings(max_examples=6, deadline=None)
@given(st.sampled_from([4, 6, 8, 10]), st.data())
def test_hypothesis_t41_growing_n(n, data):
    if n not in _T41_SIMS:
        T = CH.steps(n)
        _T41_SIMS[n] = rnnsim_transformer(CH.iterate_rnn(n), max_prompt=n + 4, max_rnn_cot=T,
                                    state_int_bits=(T + 2 * n + 4).bit_length())
    sim = _T41_SIMS[n]
    a = data.draw(st.integers(0, 2 * n - 1))
    t = data.draw(st.integers(0, n * n))
    pad = data.draw(st.lists(st.integers(0, 2 * n - 1), min_size=n, max_size=n))
    msg, run, tr = compare(sim, CH.prompt(n, a, t, pad), [TRUE, FALSE])
    assert msg == ""
    assert len(run.cot) == sim.cot_length(n + 4, t) <= sim.cot_bound(n + 4)


def test_random_rnns_are_not_degenerate():
    """Guard on the strength of the random-RNN tests: over a few seeds the RNNs
    emit several distinct tokens, some runs end with an answer after a CoT and
    some hit the CoT limit."""
    outs, with_cot_answered, limited = set(), 0, 0
    for seed in range(8):
        rnn = random_linear_rnn(seed)
        for p in prompts(2):
            tr = rnn_trace(rnn, p, [TRUE, FALSE], 2)
            outs.update(tr.cot)
            with_cot_answered += tr.answer is not None and len(tr.cot) > 0
            limited += tr.answer is None
    assert len(outs) >= 4 and with_cot_answered > 0 and limited > 0


@pytest.mark.full
def test_full_t41_n4_exhaustive_and_register_c5():
    from rnngap.constructions.models import targets as TG
    from rnngap.constructions.machine.vocab import QUERY
    n, T = 4, 16
    sim = rnnsim_transformer(CH.iterate_rnn(n), max_prompt=n + 4, max_rnn_cot=T, state_int_bits=(T + 2 * n + 4).bit_length())
    for a in range(2 * n):
        for t in range(T + 1):
            assert compare(sim, CH.prompt(n, a, t), [TRUE, FALSE])[0] == ""
    c = 5
    sim = rnnsim_transformer(TG.register_index_rnn(c, max_number=c + 2), max_prompt=c + 3, max_rnn_cot=c)
    for xs in itertools.product(range(2), repeat=c):
        for i in range(1, c + 1):
            p = [BOS] + [NUMBER_BASE + x for x in xs] + [QUERY, NUMBER_BASE + i]
            assert compare(sim, p, [NUMBER_BASE, NUMBER_BASE + 1])[0] == ""


def _jump_rnn():
    """One state s_t = s_(t-1) + 21/4 tau - 35/4 (Q8.2), promise I_s = 2: the
    numbers 0, 1, 2 (tau 1, 2, 3) move it by -7/2, +7/4, +7, so one step from
    the zero state on the number 2 leaves |s| < 4 although runs that only ever
    return to it keep it."""
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    b = Builder("jump-rnn", "linear_rnn", Vocab(2), s, claim="sim")
    b.rnn_layer(["s"], A={("s", "s"): 1}, B={("s", "tok"): Fraction(21, 4), ("s", "one"): Fraction(-35, 4)}, C={},
                name="L0")
    b.readout([("one", K.F_TOK, 0, -4), ("one", K.F_TOK_SQ, 0, -1)])
    return rnnsim_transformer(b.build(FixedFormat(8, 2)), max_prompt=5, max_rnn_cot=0, state_int_bits=2)


def test_the_zero_state_step_read_at_the_last_prompt_token_is_a_precondition():
    """At the last prompt position the simulator computes one RNN step from the
    zero state on the prompt token at max(0, L - S - 3) (its last layer reads
    those states; the certificate's chain proves which token it is). compare
    reports it as a precondition when that step breaks the promise, though the
    RNN's own states keep it; a prompt whose token there is harmless agrees."""
    sim = _jump_rnn()
    a, c, m = NUMBER_BASE + 0, NUMBER_BASE + 2, NUMBER_BASE + 1
    msg, _, tr = compare(sim, [a, c, a, a, m], [TRUE, FALSE])          # L = 5, S = 1: the token at 1 is c
    assert all(abs(v) < 4 for st in tr.states for v in st)
    assert msg.startswith("precondition violated: one RNN step from the zero state on the prompt token"), msg
    assert compare(sim, [a, c, a], [TRUE, FALSE])[0] == ""              # L = 3: the token at 0 is a


def test_a_saturating_rnn_is_refused():
    rnn = random_linear_rnn(0)
    sat = rnn.with_format(FixedFormat(rnn.fmt.int_bits, rnn.fmt.frac_bits, "saturate"))
    with pytest.raises(ValueError, match="raise mode"):
        rnnsim_transformer(sat, max_prompt=3, max_rnn_cot=1)
