"""Tests of the T4.1 construction (constructions/cot_hierarchy.py).

T4.1 itself is conditional (PSPACE not in P/poly) and is never tested; these
tests check the construction side (exact answers, CoT length, the RNN state
equal to the machine's configuration after every CoT token) and the mechanism
(the same network with CoT disabled or a small fixed budget is wrong on
instances found by search). References: plain Python in this file and in
checks/checks_hierarchy.py, never the RNN.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from checks import checks_hierarchy as CK
from constructions import cot_hierarchy as CH
from constructions.fixedpoint import FixedFormat
from constructions.gadgets import MarginError
from constructions.generate import generate
from constructions.protocol import run_rnn
from constructions.vocab import BOS, FALSE, NUMBER_BASE, QUERY, TRUE


def tent_rotate(x, n):
    """Independent plain-Python copy of g_n."""
    m = 2 * n
    y = (x + 1) % m
    return 2 * y if y < n else 2 * m - 1 - 2 * y


def answer(n, a, t):
    x = a
    for _ in range(t):
        x = tent_rotate(x, n)
    return TRUE if x >= n else FALSE


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_g_is_a_bijection_and_matches_reference(n):
    m = 2 * n
    assert sorted(CH.g_map(x, m) for x in range(m)) == list(range(m))
    assert all(CH.g_map(x, m) == tent_rotate(x, n) for x in range(m))


def test_instance_layout_and_reference():
    p = CH.prompt(3, a=4, t=2, padding=[5, 0, 1])
    assert p == [BOS, NUMBER_BASE + 5, NUMBER_BASE, NUMBER_BASE + 1, QUERY, NUMBER_BASE + 6 + 2, NUMBER_BASE + 4]
    assert CK.iter_reference(p) == answer(3, 4, 2)
    with pytest.raises(ValueError):
        CH.prompt(3, a=6, t=0)
    with pytest.raises(ValueError):
        CH.prompt(3, a=0, t=10)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_exhaustive_answers_cot_and_orbit(n):
    model = CH.iterate_rnn(n)
    rng = np.random.default_rng(n)
    for a in range(2 * n):
        for t in range(n * n + 1):
            pad = [int(v) for v in rng.integers(0, 2 * n, size=n)]
            g = generate(model, CH.prompt(n, a, t, pad), answer_tokens=[TRUE, FALSE], max_cot=n * n)
            assert g.answer == answer(n, a, t)
            assert g.cot_length == t
            x, orbit = a, []
            for _ in range(t):
                x = tent_rotate(x, n)
                orbit.append(NUMBER_BASE + x)
            assert g.cot == orbit
    assert model.resources.used_precision_bits <= CH.DECLARED.format(n).total_bits


def test_state_is_the_machine_configuration_after_every_token():
    n = 3
    model = CH.iterate_rnn(n)
    rnn = model.rnn()
    for a, t in [(0, 0), (5, 9), (2, 4)]:
        st_ = rnn.initial_state()
        for tok in CH.prompt(n, a, t, [1, 2, 3]):
            st_ = rnn.step(st_, tok)
        x = a
        for k in range(t + 1):
            h = st_[0]
            assert (int(h[0, 0]), int(h[0, 1]), int(h[1, 0]), int(h[2, 0])) == (1, k + 3, t, x)
            x = tent_rotate(x, n)
            if k < t:
                st_ = rnn.step(st_, NUMBER_BASE + x)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_no_cot_is_bounded_depth_and_fails_on_found_instances(n):
    zero = CH.iterate_rnn(n, cot_budget=0)
    found = None
    for a in range(2 * n):
        for t in range(n * n + 1):
            g = generate(zero, CH.prompt(n, a, t), answer_tokens=[TRUE, FALSE], max_cot=0)
            # with CoT disabled the answer is the bounded-depth function [a >= m/2] of the state
            assert g.answer == (TRUE if a >= n else FALSE) and g.cot_length == 0
            if g.answer != answer(n, a, t) and found is None:
                found = (a, t)
    assert found is not None
    # the full construction forced to answer at once emits a number, not an answer
    rnn = CH.iterate_rnn(n).rnn()
    first = run_rnn(rnn, CH.prompt(n, 1, 1)).answer
    assert first not in (TRUE, FALSE)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_fixed_budget_k_is_found_wrong(k):
    n = 5
    inst, got, want, searched = CK.search_failure(CH.iterate_rnn(n, cot_budget=k), n, np.random.default_rng(k),
                                                  max_cot=k, tries=1000)
    assert inst is not None and got != want
    a, t = inst
    assert want == answer(n, a, t)


def test_declared_bits_are_needed():
    for n in (2, 4, 9):
        fmt = CH.DECLARED.format(n)
        assert fmt.int_bits >= CH.int_bits_needed(n)
        assert CH.DECLARED.int_expr.subs(CH.N, n) == CH.DECLARED.int_bits(n)
        with pytest.raises(MarginError):
            CH.iterate_rnn(n, fmt=FixedFormat(CH.int_bits_needed(n) - 1, 0))
    # O(log n): I(n) / log2(n) stays bounded
    assert sp.limit(CH.DECLARED.int_expr.replace(sp.ceiling, lambda e: e) / sp.log(CH.N, 2), CH.N, sp.oo) == 4


def test_constant_size():
    sizes = {(CH.iterate_rnn(n).resources.params, CH.iterate_rnn(n).spec.width,
              CH.iterate_rnn(n).spec.state_numbers()) for n in (2, 5, 17, 40)}
    assert len(sizes) == 1


def test_below_used_bits_fails():
    from constructions.fixedpoint import PrecisionError
    n = 4
    model = CH.iterate_rnn(n)
    p = CH.prompt(n, 7, 16)
    g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=16)
    assert g.answer == answer(n, 7, 16)
    used = model.resources.used_int_bits
    lowm = model.with_format(FixedFormat(used - 1, 0))
    try:
        g2 = generate(lowm, p, answer_tokens=[TRUE, FALSE], max_cot=16)
        failed = (g2.cot, g2.answer) != (g.cot, g.answer)
    except PrecisionError:
        failed = True
    assert failed


@settings(max_examples=25, deadline=None)
@given(st.integers(6, 24), st.data())
def test_hypothesis_growing_n(n, data):
    a = data.draw(st.integers(0, 2 * n - 1))
    t = data.draw(st.integers(0, n * n))
    pad = data.draw(st.lists(st.integers(0, 2 * n - 1), min_size=n, max_size=n))
    model = CH.iterate_rnn(n)
    g = generate(model, CH.prompt(n, a, t, pad), answer_tokens=[TRUE, FALSE], max_cot=CH.cot_bound(n))
    assert g.answer == answer(n, a, t) and g.cot_length == t
    assert model.resources.used_precision_bits <= CH.DECLARED.format(n).total_bits


def test_conditional_claim_is_stated():
    for text in (CH.__doc__, CK.__doc__, CK.CONDITIONAL):
        assert "PSPACE" in text and "P/poly" in text


SCRIPT = """
import json
from constructions import cot_hierarchy as CH
from constructions.generate import generate
from constructions.vocab import TRUE, FALSE
m = CH.iterate_rnn(3)
out = [generate(m, CH.prompt(3, a, t, [a, t % 6, 1]), answer_tokens=[TRUE, FALSE], max_cot=9).cot + [0]
       for a, t in [(0, 9), (5, 4), (3, 7)]]
print(json.dumps([out, m.resources.used_int_bits]))
"""


def test_numba_disabled_identical():
    runs = []
    for jit in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit)
        r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]


@pytest.mark.full
@pytest.mark.parametrize("n", [6, 7, 8])
def test_full_exhaustive(n):
    model = CH.iterate_rnn(n)
    for a in range(2 * n):
        for t in range(n * n + 1):
            g = generate(model, CH.prompt(n, a, t), answer_tokens=[TRUE, FALSE], max_cot=n * n)
            assert g.answer == answer(n, a, t) and g.cot_length == t
