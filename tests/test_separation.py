"""Separation records (checks/verify/checks_separation.py; claims T4.6-low, T4.7-low):
both sides on the Index reduction's family, and records that must fail do."""
import dataclasses

import pytest

from rnngap.checks.verify import checks_separation as S
from rnngap.constructions.models import targets as T
from rnngap.constructions.build.protocol import run_rnn
from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, QUERY, TRUE, number_token
from rnngap.lowerbounds import witness as W
from rnngap.lowerbounds.targets_toy import CompactIndexRegister

PARSER_BITS = {"index": 0, "ar": 2, "cgram3": 3, "counting": 2, "istree": 3}


def _forced_n(key: str) -> int:
    """Smallest n with a compact register of s >= 1 and s + 2 + parser bits < n."""
    return PARSER_BITS[key] + 4


@pytest.mark.parametrize("key", sorted(S.TASKS))
def test_every_task_has_passing_records_at_two_n(key):
    recs = [S.separation_record(key, 3, kind="register"), S.separation_record(key, _forced_n(key), kind="compact")]
    for r in recs:
        assert r.kind == "separation" and r.family == "reduction"
        assert r.passed, r.note
        assert r.failures == 0 and r.witness_verified is True
        assert r.cc_bits == r.n                 # computed from the matrix: Index's n bits
        assert r.collision_forced == (r.state_bits < r.cc_bits)
        assert r.alphabet == S.TASKS[key].alphabet(r.n)
    assert [r.collision_forced for r in recs] == [False, True]
    assert recs[0].n != recs[1].n


def test_parser_bits_as_declared():
    for key, bits in PARSER_BITS.items():
        t = S.TASKS[key]
        assert T.ReductionFormatParser(t.layout, t.c).bits == bits


class ConstantRNN:
    """Emits one token whatever it reads: wrong on half of every family."""

    name = "constant"
    state_bits = 1

    def __init__(self, token):
        self.token = token

    def initial_state(self):
        return 0

    def step(self, state, token):
        return 0

    def output(self, state):
        return self.token

    def state_key(self, state):
        return b"\x00"


@pytest.mark.parametrize("key,token", [("index", number_token(0)), ("counting", number_token(1)),
                                       ("istree", TRUE)])
def test_constant_rnn_fails_the_record(key, token):
    rec = S.separation_record(key, 4, rnn=ConstantRNN(token), capacity=3)
    # its witness is real (every prefix shares the one state), but it is wrong below capacity
    assert rec.witness_verified is True
    assert not rec.passed and rec.failures >= 1
    assert "wrong below its capacity" in rec.note


def test_capacity_must_be_below_n_and_positive():
    rnn, _ = S.rnn_for(S.TASKS["ar"], 4, "register")
    assert not S.separation_record("ar", 4, rnn=rnn, capacity=0).passed
    big = T.ParsedIndexRNN(CompactIndexRegister(4), T.ReductionFormatParser("keyvalue", 2), 4)
    rec = S.separation_record("ar", 4, rnn=big, capacity=4)
    assert not rec.passed


def test_unfound_witness_fails():
    # an RNN that is in fact correct at n (s = n) but claims capacity n - 1: no fooling pair exists
    n = 4
    rnn = T.ParsedIndexRNN(CompactIndexRegister(n), T.ReductionFormatParser("counting"), n - 1)
    rec = S.separation_record("counting", n, rnn=rnn, capacity=n - 1)
    assert rec.witness_verified is False and not rec.passed


def test_tampered_witness_is_not_verified():
    task = S.TASKS["cgram3"]
    rnn, cap = S.rnn_for(task, 5, "register")
    w = W.find_witness(rnn, task.reduction, 5, max_cot=5)
    ok, _ = S.verify_witness(rnn, task, w, 5)
    assert ok
    # claim the other instance of the pair is the wrong one: the re-run answers it correctly
    flipped = dataclasses.replace(w, wrong=("x",) if w.wrong == ("x'",) else ("x'",))
    ok, why = S.verify_witness(rnn, task, flipped, 5)
    assert not ok and "correctly" in why
    rec = S.separation_record("cgram3", 5, rnn=rnn, capacity=cap, witness=flipped)
    assert rec.witness_verified is False and not rec.passed
    # a recorded answer that the re-run does not reproduce
    lied = dataclasses.replace(w, answer=number_token(7), answer_prime=number_token(7))
    ok, why = S.verify_witness(rnn, task, lied, 5)
    assert not ok and "re-run" in why


def test_model_failure_fails_the_record():
    side = S.model_side("index", 4)
    bad = dataclasses.replace(side, failures=1)
    assert S.separation_record("index", 4, kind="register", model_side=side).passed
    assert not S.separation_record("index", 4, kind="register", model_side=bad).passed


def test_compact_register_states_fit_declared_bits():
    """Every state reachable by any token sequence over the relevant tokens is
    one of the 3 * 2^s + 2 codes (so state_bits = s + 2 is honest)."""
    for s in (1, 2, 3):
        r = CompactIndexRegister(s)
        alphabet = [BOS, QUERY, 5] + [number_token(v) for v in range(s + 3)]
        seen, frontier = {r.initial_state()}, [r.initial_state()]
        while frontier:
            nxt = []
            for st in frontier:
                for t in alphabet:
                    u = r.step(st, t)
                    if u not in seen:
                        seen.add(u)
                        nxt.append(u)
            frontier = nxt
        assert len(seen) <= r.state_count == 3 * 2 ** s + 2
        assert all(len(r.state_key(st)) * 8 <= ((r.state_bits + 7) // 8) * 8 for st in seen)
        assert r.state_bits == s + 2


@pytest.mark.parametrize("key", sorted(S.TASKS))
def test_parsed_rnns_correct_to_capacity_then_broken(key):
    task = S.TASKS[key]
    for rnn, cap in (S.rnn_for(task, 4, "register"), S.rnn_for(task, _forced_n(key), "compact")):
        count, fails, first = S.rnn_correct_below(rnn, task, cap)
        assert count == sum(m * 2 ** m for m in range(1, cap + 1)) and fails == 0, first
        w = W.find_witness(rnn, task.reduction, cap + 1, max_cot=cap + 1)
        assert w.found and S.verify_witness(rnn, task, w, cap + 1)[0]
        # the failing instance, re-run here against the reduction's answer
        for toks, got, want in w.failing:
            assert run_rnn(rnn, toks, task.reduction.answer_tokens, max_cot=cap + 1).answer == got != want


def test_family_alphabet_is_measured():
    for key, task in S.TASKS.items():
        cases, toks = S.family(task, 3)
        assert len(cases) == 3 * 8 == toks.shape[0]
        assert S.data_alphabet(task, toks) == task.alphabet(3)
        for (x, i), row in list(zip(cases, toks))[:5]:
            assert row.tolist() == task.reduction.instance(x, i).tolist()
    # Index's alphabet ignores the query position i
    _, toks = S.family(S.TASKS["index"], 5)
    assert int(toks[:, -1].max()) - NUMBER_BASE == 5 and S.data_alphabet(S.TASKS["index"], toks) == 2


@pytest.mark.full
def test_full_profile_rows_pass():
    recs = S.separation_records(sorted(S.TASKS), "full")
    assert all(r.passed for r in recs), [r.note for r in recs if not r.passed]


def test_other_model_and_claim_can_be_plugged_in():
    """A caller (e.g. a T5.6 hybrid check) can put its own no-CoT model on the
    family; a model that is wrong on the family fails the record."""
    from rnngap.constructions.models import retrieval as RT
    good = S.model_side("ar", 4, RT.ar_transformer(8, alphabet=6))
    assert good.failures == 0 and good.instances == 4 * 16
    rec = S.separation_record("ar", 4, kind="register", model_side=good, claim="T5.6")
    assert rec.claim == "T5.6" and rec.passed
    # the Index Transformer reads the AR instances as Index ones: wrong on the family
    wrong = S.model_side("ar", 4, RT.index_transformer(8, alphabet=6))
    assert wrong.failures > 0
    assert not S.separation_record("ar", 4, kind="register", model_side=wrong).passed


# ------------------------------------------------- forced collisions, computed CC (issue 27)
SMALL_ROWS = {"retrieval": ((7, "compact"),), "istree": ((7, "compact"),)}
"""One row per task: n = 7 is the least n with a compact register for every task
(c-gram's and IsTree's parsers hold 3 bits)."""


def _verify_t46(monkeypatch, tmp_path, name):
    import json

    from rnngap.checks.cli.main import main
    monkeypatch.setitem(S.ROWS, "quick", SMALL_ROWS)
    out = tmp_path / f"{name}.json"
    rc = main(["verify", "--profile", "quick", "--only", "T4.6-low", "--json", str(out)])
    return rc, [r for r in json.loads(out.read_text()) if r["kind"] == "separation"]


def test_verify_fails_without_a_forced_collision(monkeypatch, tmp_path, capsys):
    """Known bad input: every compact register one bit larger (capacity s + 1, so its
    state bits reach the CC: the collision is only found). Each record alone would
    still pass (the witness is found and verified), but `rnngap verify` must fail
    every record of the T4.6-low separation check: no task has a forced collision
    there (each check enforces the requirement on its own records). (The unpatched compact
    rows pass: test_every_task_has_passing_records_at_two_n, and
    test_require_forced_groups_by_claim_and_task for the requirement itself.)"""
    original = S.rnn_for

    def one_larger(task, n, kind, cc_bits=None):
        rnn, cap = original(task, n, kind, cc_bits)
        if kind != "compact":
            return rnn, cap
        return T.ParsedIndexRNN(CompactIndexRegister(cap + 1), T.ReductionFormatParser(task.layout, task.c),
                                cap + 1), cap + 1
    monkeypatch.setattr(S, "rnn_for", one_larger)
    rc, recs = _verify_t46(monkeypatch, tmp_path, "bad")
    capsys.readouterr()
    # the streamed records (n = 16, their own check and RNN, untouched here) still pass
    streamed = [r for r in recs if "streamed" in r["description"]]
    assert streamed and all(r["status"] == "PASS" and r["collision_forced"] for r in streamed)
    recs = [r for r in recs if "streamed" not in r["description"]]
    assert rc != 0 and {r["task"] for r in recs} == {"index", "ar", "cgram(c=3)", "counting"}
    assert not any(r["collision_forced"] for r in recs)
    assert all(r["witness_verified"] for r in recs)          # each record alone would pass
    assert all(r["status"] == "FAIL" and "has a forced collision" in r["note"] for r in recs)


def test_cc_is_computed_and_compared_with_n(monkeypatch):
    """Known bad input: a CC computation one bit short. The compact register is
    sized from the computed CC (one bit smaller) and the record fails: the exact CC
    at n must be Index's n bits."""
    good = S.separation_record("index", 5, kind="compact")
    assert good.passed and good.cc_bits == 5 and good.state_bits == 4
    real = S.cc.one_way_complexity

    def short(problem, **kw):
        return dataclasses.replace(real(problem, **kw), bits=real(problem, **kw).bits - 1)
    monkeypatch.setattr(S.cc, "one_way_complexity", short)
    bad = S.separation_record("index", 5, kind="compact")
    assert bad.cc_bits == 4 and bad.state_bits == 3 and bad.collision_forced
    assert not bad.passed and "exact CC 4 bits != n = 5" in bad.note


def test_require_forced_groups_by_claim_and_task():
    recs = [S.separation_record("index", 4, kind="register"), S.separation_record("index", 4, kind="compact")]
    assert [r.collision_forced for r in recs] == [False, True]
    only_found = [dataclasses.replace(recs[0])]
    S.require_forced(only_found)
    assert not only_found[0].passed and "has a forced collision" in only_found[0].note
    both = [dataclasses.replace(r) for r in recs]
    S.require_forced(both)
    assert all(r.passed for r in both)


# ------------------------------------------------ streamed separations beyond n = 12 (issue 27)
@pytest.mark.parametrize("key", sorted(S.TASKS))
def test_expected_batch_equals_expected(key):
    """The batched answers the streamed CC hashes equal ``expected`` entry by entry."""
    import itertools

    import numpy as np
    red = S.TASKS[key].reduction
    for n in (1, 3, 6):
        xs = np.array(list(itertools.product((0, 1), repeat=n)))
        got = red.expected_batch(xs)
        assert got.shape == (2 ** n, n)
        assert got.tolist() == [[red.expected(tuple(x), i) for i in range(1, n + 1)] for x in xs.tolist()]


def test_streamed_cc_equals_the_exhaustive_cc():
    for key in ("index", "istree"):
        task = S.TASKS[key]
        for n in (3, 6):
            exact = S.cc.one_way_complexity(S.cc.reduction_split(task.reduction, n, task.reference(n)))
            assert S.streamed_cc(task, n) == (exact.bits, exact.distinct_rows)


def test_streamed_cc_refuses_a_batch_that_disagrees():
    """Known bad input: an expected_batch with one answer flipped is caught."""
    bad = dataclasses.replace(S.TASKS["index"], spec=dataclasses.replace(
        S.TASKS["index"].spec, reduction=dataclasses.replace(
            S.TASKS["index"].reduction, expected_batch=lambda xs: 65 - S.R.expected_bits_batch(xs))))
    with pytest.raises(ValueError, match="expected_batch"):
        S.streamed_cc(bad, 5)


@pytest.mark.parametrize("key", ["index", "istree"])
def test_streamed_record_at_n16_is_forced_and_verified(key):
    """n = 16 (2^16 of Alice's inputs, beyond the exhaustive n <= 12): the streamed CC
    is 16 bits, the RNN has at most 15 state bits, the witness from the streamed
    collision search is re-run and verified, the model right on the witness pair
    and the seeded sample (the failing instance re-run here too)."""
    rec = S.streamed_separation_record(key, 16, seed=0)
    assert rec.passed and rec.kind == "separation", rec.note
    assert rec.cc_bits == 16 and rec.state_bits <= 15 and rec.collision_forced and rec.witness_verified


def test_streamed_record_fails_when_the_rnn_is_too_large():
    """Known bad inputs: a compact register with n state bits is only found (the
    forced requirement fails the group); one holding every bit (capacity n) has no
    collision at all (no witness: the record fails)."""
    task = S.TASKS["index"]
    n = 16
    rnn, s = S.streamed_rnn(task, n)
    parser = T.ReductionFormatParser(task.layout, task.c)
    big = T.ParsedIndexRNN(CompactIndexRegister(s + 1), parser, s + 1)
    rec = S.streamed_separation_record("index", n, 0, rnn=big, capacity=s + 1)
    assert rec.state_bits == n and rec.collision_forced is False and rec.passed   # alone: a found collision
    (rec,) = S.require_forced([rec])
    assert not rec.passed and "forced collision" in rec.note
    whole = T.ParsedIndexRNN(CompactIndexRegister(n), parser, n)
    rec = S.streamed_separation_record("index", n, 0, rnn=whole, capacity=n - 1)
    assert rec.witness_verified is False and not rec.passed


@pytest.mark.full
def test_full_profile_streamed_rows_pass():
    """Every streamed row of the full profile (n = 16, 18, 20, every task) passes."""
    recs = [S.streamed_separation_record(key, n, seed=0) for key, ns in S.STREAMED["full"].items() for n in ns]
    assert all(r.passed and r.collision_forced and r.cc_bits == r.n for r in recs), \
        [r.note for r in recs if not r.passed]
