"""Targets of the lower bounds (constructions/models/targets.py): the register linear
RNN solves Index while n fits its register and is broken beyond, with its CoT;
random linear RNNs are broken beyond their state bits; batch_states agrees with
the per-token run. Answers are checked against the plain-Python references of
``checks.tasks``."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rnngap.checks.tasks import index as task_index
from rnngap.checks.tasks import istree as task_istree
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.models import targets as T
from rnngap.constructions.machine.fixedpoint import FixedPointOverflow, new_err
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import Builder, ResidualSpace
from rnngap.constructions.build.protocol import feed, run_rnn
from rnngap.constructions.machine.vocab import Vocab
from rnngap.lowerbounds import reductions as R
from rnngap.lowerbounds import witness as W


def _all_index(n):
    for x in itertools.product((0, 1), repeat=n):
        for i in range(1, n + 1):
            yield x, i, R.INDEX.instance(x, i)


@pytest.mark.parametrize("capacity", [2, 3, 5])
def test_register_correct_up_to_capacity_and_wrong_beyond(capacity):
    target = T.register_target(capacity, max_number=capacity + 3)
    dec = T.register_declared(capacity, capacity + 3)
    for n in range(1, capacity + 3):
        wrong, cot_max = 0, 0
        for x, i, toks in _all_index(n):
            run = run_rnn(target, toks, R.INDEX.answer_tokens, max_cot=n)
            want = task_index.reference(toks.tolist())
            wrong += run.answer != want
            if run.answer is not None:
                assert len(run.cot) == i - 1      # the CoT reads x_1..x_(i-1) out
            cot_max = max(cot_max, len(run.cot))
        if n <= capacity:
            assert wrong == 0, (capacity, n)
            assert cot_max == n - 1 <= dec.cot_bound(n)
        else:
            assert wrong > 0, (capacity, n)   # the bits beyond the register are lost
    r = target.model.resources
    assert r.used_precision_bits <= dec.precision_bits == r.precision_bits
    assert r.state_bits == dec.state_bits == target.state_bits


def test_register_params_constant_in_capacity():
    params = {c: T.register_index_rnn(c, max_number=64).resources.params for c in (2, 8, 32, 56)}
    assert len(set(params.values())) == 1, params


def test_register_precision_is_needed():
    """One integer bit below the declared format the construction cannot run."""
    dec = T.register_declared(6, 10)
    low = FixedFormat(dec.int_bits - 1, dec.frac_bits)
    with pytest.raises(FixedPointOverflow, match="needs at least"):
        model = T.register_index_rnn(6, 10, fmt=low)
        tgt = T.LinearRNNTarget(model)
        for x, i, toks in _all_index(6):
            run_rnn(tgt, toks, R.INDEX.answer_tokens, max_cot=6)


@pytest.mark.parametrize("capacity", [3, 6])
def test_witness_breaks_register_beyond_capacity_with_and_without_cot(capacity):
    target = T.register_target(capacity, max_number=capacity + 4)
    for n in (capacity + 1, capacity + 3):
        w = W.find_witness(target, R.INDEX, n, max_cot=n)
        assert w.found and w.wrong
        assert w.x[:capacity] == w.x_prime[:capacity] and w.i > capacity
        for toks, got, want in w.failing:
            assert got != want == task_index.reference(toks.tolist())
            assert run_rnn(target, toks, R.INDEX.answer_tokens, max_cot=n).answer == got
        assert len(w.cot) == w.i - 1          # the model used its CoT and still failed
        w0 = W.find_witness(target, R.INDEX, n, max_cot=0)
        assert w0.found and w0.answer is None and set(w0.wrong) == {"x", "x'"}
    # within capacity every prefix reaches its own state
    w = W.find_witness(target, R.INDEX, capacity, max_cot=capacity)
    assert not w.found


def test_register_birthday_witness():
    target = T.register_target(16, max_number=20)
    w = W.find_witness(target, R.INDEX, 17, mode="birthday", seed=3, max_cot=17)
    assert w.found and w.i == 17 and w.wrong
    for toks, got, want in w.failing:
        assert want == task_index.reference(toks.tolist()) != got


def test_register_32_bit_reachable_state_broken_by_birthday_search():
    """T4.6-low: the finder breaks a model with a state of >= 32 reachable bits by
    birthday search (default suite; speed is measured by the benchmarks, not here).

    Reachable state: after Alice's prefix the register number r is exactly the
    binary number x_1..x_32 in units of 2^-f, the other state numbers are the same
    for every x (checked on seeded prefixes by the per-token run, and on a batch of
    distinct x_1..x_32 by batch_states: all rows distinct, x_33 ignored), so
    2^32 prefixes reach 2^32 states. The witness is then re-run from scratch."""
    from fractions import Fraction
    c, n = 32, 33
    target = T.register_target(c, max_number=c + 4)
    f = T.register_declared(c, c + 4).frac_bits
    assert target.state_bits >= c
    rng = np.random.default_rng(4601)
    xs = [tuple(int(v) for v in row) for row in rng.integers(0, 2, (40, n))] + [(0,) * n, (1,) * n]
    states = [T.decode_state(target, feed(target, R.INDEX.alice(x))) for x in xs]
    others = [{k: v for k, v in state.items() if k != "r"} for state in states]
    for x, state, rest in zip(xs, states, others):
        assert state["r"] == Fraction(int("".join(map(str, x[:c])), 2), 2 ** f)
        assert rest == others[0]
    tops = np.unique(rng.integers(0, 2 ** c, 4096, dtype=np.int64))        # distinct x_1..x_32
    bits = ((tops[:, None] >> np.arange(c - 1, -1, -1)) & 1).astype(np.uint8)
    rows0, rows1 = (target.batch_states(R.INDEX.prefixes(
        np.concatenate([bits, np.full((len(bits), 1), last, dtype=np.uint8)], axis=1))) for last in (0, 1))
    assert len(np.unique(rows0, axis=0)) == len(tops)
    assert np.array_equal(rows0, rows1)                  # x_33 leaves no trace

    w = W.find_witness(target, R.INDEX, n, mode="birthday", seed=4602, max_cot=n)
    assert w.found and w.mode == "birthday" and w.seed == 4602 and w.wrong
    assert w.x != w.x_prime and w.x[:c] == w.x_prime[:c] and w.i == n
    assert target.state_key(feed(target, R.INDEX.alice(w.x))) == \
        target.state_key(feed(target, R.INDEX.alice(w.x_prime)))
    runs = [run_rnn(target, toks, R.INDEX.answer_tokens, max_cot=n) for toks in (w.tokens, w.tokens_prime)]
    refs = [task_index.reference(toks.tolist()) for toks in (w.tokens, w.tokens_prime)]
    assert runs[0].answer == runs[1].answer is not None and refs[0] != refs[1]
    assert len(runs[0].cot) == len(runs[1].cot) == c    # it used its CoT and still failed
    wrong = tuple(lab for lab, r, ref in zip(("x", "x'"), runs, refs) if r.answer != ref)
    assert wrong == w.wrong and len(wrong) == 1
    for toks, got, want in w.failing:
        assert run_rnn(target, toks, R.INDEX.answer_tokens, max_cot=n).answer == got != want \
            == task_index.reference(toks.tolist())


def _random_prefixes(red, n, rows, seed):
    xs = np.random.default_rng(seed).integers(0, 2, (rows, n), dtype=np.uint8)
    return red.prefixes(xs)


@pytest.mark.parametrize("make", [lambda: T.register_target(12, 20), lambda: T.register_target(40, 44),
                                  lambda: T.random_target(3, 6, seed=5), lambda: T.random_target(2, 3, seed=1)])
def test_batch_states_agree_with_per_token_run(make):
    target = make()
    n = 14
    P = _random_prefixes(R.INDEX, n, 300, seed=1)
    fast = target.batch_states(P)
    target.sparse = False
    dense = target.batch_states(P)
    assert (fast == dense).all()
    for row, raws in zip(P[:60], fast[:60]):
        assert target.key_of_raws(raws) == target.state_key(feed(target, row.tolist()))
    # repeated rows (a whole shared prefix) and a single row give the same states
    target.sparse = True
    again = target.batch_states(np.concatenate([P[:7], P[:7]]))
    assert (again[:7] == fast[:7]).all() and (again[7:] == fast[:7]).all()
    assert (target.batch_states(P[3:4]) == fast[3:4]).all()
    # rows equal iff keys equal
    keys = [target.key_of_raws(r) for r in fast]
    rows = [r.tobytes() for r in fast]
    assert len(set(keys)) == len(set(rows))


def test_fast_mul_equals_fx_mul():
    rng = np.random.default_rng(0)
    for _ in range(3000):
        I = int(rng.integers(1, 40))
        f = int(rng.integers(0, 62 - I + 1))
        lim = (1 << (I + f)) - 1
        a = int(rng.integers(-lim, lim + 1)) >> int(rng.integers(0, I + f))
        b = int(rng.integers(-lim, lim + 1)) >> int(rng.integers(0, I + f))
        e1, e2 = new_err(), new_err()
        assert T._mul(np.int64(a), np.int64(b), I, f, 0, e1) == K.fx_mul(np.int64(a), np.int64(b), I, f, 0, e2)
        assert (e1 == e2).all()


@pytest.mark.parametrize("S, f, seed", [(1, 3, 0), (2, 3, 7), (2, 4, 11)])
def test_random_linear_rnn_broken_beyond_state_bits(S, f, seed):
    target = T.random_target(S, f, seed=seed, max_number=24)
    n = target.state_bits + 1
    assert n <= W.EXHAUSTIVE_MAX_N
    w = W.find_witness(target, R.INDEX, n)
    assert w.found and w.pigeonhole and w.wrong
    for toks, got, want in w.failing:
        assert want == task_index.reference(toks.tolist()) != got
    assert target.model.resources.used_precision_bits <= target.model.resources.precision_bits


def test_random_linear_rnn_is_seeded():
    a, b = T.random_linear_rnn(3, 5, seed=4), T.random_linear_rnn(3, 5, seed=4)
    a, b = a.weights.net, b.weights.net
    assert (a.rA == b.rA).all() and (a.rB == b.rB).all() and (a.rC == b.rC).all()
    c = T.random_linear_rnn(3, 5, seed=5).weights.net
    assert not ((a.rA == c.rA).all() and (a.rB == c.rB).all() and (a.rC == c.rC).all())


def test_random_birthday_witness():
    target = T.random_target(4, 8, seed=2)
    w = W.find_witness(target, R.INDEX, 40, mode="birthday", seed=0)
    assert w.found and w.wrong


def test_readout_reading_the_token_is_refused():
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tau", K.F_TOK)
    s.hidden("h")
    b = Builder("token-readout", "linear_rnn", Vocab(4), s)
    b.rnn_layer(["a"], A={("a", "a"): 1}, B={("a", "tau"): 1}, C={("h", "a"): 1})
    b.readout([("tau", K.F_TOK, 0, 1)])
    model = b.build(FixedFormat(8, 1))
    ok, why = T.output_from_state(model.spec)
    assert not ok and "tau" in why
    with pytest.raises(ValueError, match="state only"):
        T.LinearRNNTarget(model)


def test_istree_register_correct_and_broken():
    c = 4
    target = T.IsTreeRegisterRNN(c, max_number=c + 6)
    for n in range(1, c + 2):
        wrong = 0
        for x in itertools.product((0, 1), repeat=n):
            for i in range(1, n + 1):
                toks = R.ISTREE.instance(x, i)
                want = task_istree.reference(toks.tolist(), R.istree_vertex_count(n))
                run = run_rnn(target, toks, R.ISTREE.answer_tokens, max_cot=n)
                wrong += run.answer != want
        assert (wrong == 0) == (n <= c), (n, wrong)
    w = W.find_witness(target, R.ISTREE, c + 1, max_cot=c + 1)
    assert w.found and w.wrong and w.i == c + 1
    P = _random_prefixes(R.ISTREE, 7, 40, seed=2)
    fast = target.batch_states(P)
    for row, raws in zip(P, fast):
        key = target.inner.key_of_raws(raws[:-2]) + bytes([int(raws[-2]) + 4 * int(raws[-1])])
        assert key == target.state_key(feed(target, row.tolist()))


def test_register_rejects_bad_capacity():
    with pytest.raises(ValueError):
        T.register_declared(0)
    with pytest.raises(ValueError):
        T.register_declared(T.MAX_REGISTER_CAPACITY + 1)
    with pytest.raises(ValueError):
        T.random_linear_rnn(2, 2, seed=0)


def test_benchmark_collision_small():
    r = W.benchmark_collision(12, seed=1)
    assert r["found"] and r["draws"] > 0 and r["i"] == 13 and r["reachable_state_bits"] == 12
    assert r["expected"] != r["expected_prime"]


@functools.lru_cache(maxsize=None)
def _cached_register(capacity):
    return T.register_target(capacity, max_number=48)


@given(st.integers(2, 44).flatmap(lambda c: st.tuples(
    st.just(c), st.integers(1, c).flatmap(lambda n: st.tuples(
        st.lists(st.integers(0, 1), min_size=n, max_size=n), st.integers(1, n))))))
def test_register_random_instances_within_capacity(case):
    """Above the exhaustive sizes: any capacity, any n <= c, any (x, i)."""
    c, (x, i) = case
    target = _cached_register(c)
    toks = R.INDEX.instance(x, i)
    run = run_rnn(target, toks, R.INDEX.answer_tokens, max_cot=len(x))
    assert run.answer == task_index.reference(toks.tolist()) and len(run.cot) == i - 1
