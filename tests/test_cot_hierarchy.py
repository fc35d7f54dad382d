"""Tests of the T4.1 construction (constructions/models/cot_hierarchy.py).

T4.1 itself is conditional (PSPACE not in P/poly) and is never tested; these
tests check the construction side (exact answers, CoT length, the RNN state
equal to the machine's configuration after every CoT token) and the contrast
(a no-CoT network unrolling k applications of g is right for t <= k, with both
answers, and wrong beyond). References: plain Python in this file and in
checks/verify/checks_hierarchy.py, never the RNN.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from rnngap.checks.verify import checks_hierarchy as CK
from rnngap.checks.tasks import iterate
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import BOS, FALSE, NUMBER_BASE, QUERY, TRUE


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
    assert iterate.reference(p) == answer(3, 4, 2)
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


@pytest.mark.parametrize("n,k", [(2, 0), (2, 2), (3, 1), (5, 2), (8, 3)])
def test_unrolled_no_cot_right_for_t_up_to_k_wrong_beyond(n, k):
    """The T4.1 contrast model: no CoT, k applications of g unrolled. Right on every
    (a, t) with t <= k, with both answers occurring there (not a constant), and
    wrong on some t > k; the CoT RNN is right on that instance."""
    model = CH.unrolled_rnn(n, k)
    easy, wrong = set(), None
    for a in range(2 * n):
        for t in range(n * n + 1):
            g = generate(model, CH.prompt(n, a, t), answer_tokens=[TRUE, FALSE], max_cot=0)
            assert g.cot_length == 0
            if t <= k:
                assert g.answer == answer(n, a, t), (a, t)
                easy.add(g.answer)
            elif g.answer != answer(n, a, t) and wrong is None:
                wrong = (a, t)
    assert easy == {TRUE, FALSE}
    assert wrong is not None
    a, t = wrong
    g = generate(CH.iterate_rnn(n), CH.prompt(n, a, t), answer_tokens=[TRUE, FALSE], max_cot=CH.cot_bound(n))
    assert g.answer == answer(n, a, t)


def test_unrolled_size_depends_on_k_only():
    for k in (0, 2, 4):
        shapes = {(CH.unrolled_rnn(n, k).resources.params, CH.unrolled_rnn(n, k).spec.width) for n in (2, 7, 30)}
        assert len(shapes) == 1


def test_t41_records_never_rest_on_a_constant():
    """Every T4.1 correctness row (the construction and the contrast) counts the
    model's answers on its family in the note; each must show both answers. A
    contrast against a network that emits one token (or no answer) fails here."""
    import re
    from rnngap.checks.verify.registry import REGISTRY, load_checks
    load_checks()
    recs = [r for c in REGISTRY if c.claim == "T4.1" for r in c.fn("quick", 0)]
    assert recs and all(r.passed for r in recs), [r.note for r in recs if not r.passed]
    assert {r.kind for r in recs} == {"correctness", "necessity"}
    for r in recs:
        if r.kind != "correctness":
            continue
        m = re.search(r"answers: ([^;)]*)", r.note)
        assert m, r.note
        parts = dict(re.findall(r"(\[TRUE\]|\[FALSE\]|none) (\d+)", m.group(1)))
        assert set(parts) == {"[TRUE]", "[FALSE]"}, r.note
    assert any("contrast" in r.description for r in recs)
    assert not any("forced" in r.description or "disabled" in r.description for r in recs)


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


def test_saturate_one_bit_below_the_frontier_is_wrong():
    """Necessity in saturate mode (not a raise-mode re-run): the integer-bit
    frontier on every ITER(3) instance is at most the declared I, and at one bit
    below it some instance's answer or CoT is wrong against the plain-Python orbit
    of this file."""
    from rnngap.checks.verify.checks_hierarchy import iter_cot_runner
    from rnngap.checks.verify.necessity import measure
    n = 3
    run, count = iter_cot_runner(n, 0)
    assert count == 2 * n * (n * n + 1)
    si, sf = measure(CH.DECLARED.format(n), run, model=CH.iterate_rnn(n),
                     build_frac=lambda fmt: CH.iterate_rnn(n, fmt=fmt))
    assert si.frontier is not None and si.frontier <= CH.DECLARED.format(n).int_bits and si.wrong_below
    low = CH.iterate_rnn(n).with_format(FixedFormat(si.frontier - 1, 0, "saturate"))
    wrong = 0
    for a in range(2 * n):
        for t in range(n * n + 1):
            g = generate(low, CH.prompt(n, a, t), answer_tokens=[TRUE, FALSE], max_cot=n * n)
            x, cot = a, []
            for _ in range(t):
                x = tent_rotate(x, n)
                cot.append(NUMBER_BASE + x)
            wrong += g.answer != answer(n, a, t) or g.cot != cot
    assert wrong > 0


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
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import TRUE, FALSE
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
