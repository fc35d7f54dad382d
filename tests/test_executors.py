"""The executors (constructions/build/model.py, constructions/machine/kernels.py) on three small
models from tests/_models.py: a 2-layer Transformer (shift head + first-occurrence
match head: AR), a 2-layer linear RNN (counters, a halving sum, an MLP, a second
layer counting the MLP's output) and a hybrid (an RNN computing p = i + 1 and p^2,
one attention layer with a shift head and a match head on those).

* the execution paths agree exactly: ``predict_batch`` (one kernel, batch, with
  or without ``all_positions``) == ``Session.feed`` + ``next_token`` token by token
  == ``Session.feed`` in random chunks (KV cache, growing capacity) == per-prefix
  predictions == ``RealModel.predict`` where the construction is exact, and all
  equal a plain-Python reference;
* the linear RNN's state after every token equals the recurrence (decoded
  exactly), and ``model.rnn()`` obeys constructions/build/protocol.py;
* resource accounting; bad inputs refused before any kernel runs;
* NUMBA_DISABLE_JIT=1 gives identical numbers.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import _models as tm
from _models import FixedFormat, tau
from rnngap.constructions.machine import fixedpoint as FP, kernels as K
from rnngap.constructions.machine import attention as AT
from rnngap.constructions.machine import batch as BT, readouts as RO
from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
from rnngap.constructions.build.gadgets import Builder, Neuron, ResidualSpace
from rnngap.constructions.build.protocol import RNN, feed as protocol_feed, run_rnn
from rnngap.constructions.machine.vocab import BOS, QUERY, Vocab, number_token

ROOT = Path(__file__).resolve().parents[1]
N = 12     # data length of the attention models in most tests


def build(name: str, n: int = N):
    if name == "transformer":
        return tm.ar_transformer(n, tm.ar_format(n))
    if name == "linear_rnn":
        return tm.counter_rnn(tm.RNN_FORMAT)
    if name == "hybrid":
        return tm.prev_hybrid(n, tm.hybrid_format(n))
    raise ValueError(name)


ALPHABET = {"transformer": tm.MATCH_ALPHABET, "linear_rnn": tm.RNN_ALPHABET, "hybrid": tm.MATCH_ALPHABET}
KINDS = ("transformer", "linear_rnn", "hybrid")
MODELS = {kind: build(kind) for kind in KINDS}    # shared by tests that only read


def reference_preds(kind: str, toks, f: int) -> list:
    """Per-position reference prediction (None where the construction promises nothing)."""
    if kind == "transformer":
        return tm.ar_reference(toks)
    if kind == "linear_rnn":
        return [r["pred"] for r in tm.counter_reference(toks, f)]
    return [r["pred"] for r in tm.hybrid_reference(toks)]


def random_batch(rng, kind, batch, max_len):
    """(tokens (batch, max_len) padded with -7, an id outside every vocabulary; lengths)."""
    lengths = rng.integers(1, max_len + 1, size=batch)
    lengths[0] = max_len
    toks = np.full((batch, max_len), -7, dtype=np.int64)
    for b, L in enumerate(lengths):
        toks[b, :L] = tm.random_tokens(rng, int(L) - 1, ALPHABET[kind])
    return toks, lengths


def session_trace(model, toks, capacity=64):
    """Token by token: (residual raws after each token, next_token after each)."""
    sess = model.session(capacity=capacity)
    xs, preds = [], []
    for t in toks:
        sess.feed([int(t)])
        xs.append(sess.x.copy())
        preds.append(sess.next_token())
    return xs, preds, sess


# ============================================================================
# consistency of the execution paths
@pytest.mark.parametrize("kind", KINDS)
def test_execution_paths_agree(kind):
    rng = np.random.default_rng({"transformer": 1, "linear_rnn": 2, "hybrid": 3}[kind])
    model = build(kind)
    f = model.fmt.frac_bits
    toks, lengths = random_batch(rng, kind, 8, N + 1)
    all_preds = model.predict_batch(toks, lengths, all_positions=True)
    last_preds = model.predict_batch(toks, lengths)
    assert all_preds.shape == toks.shape and last_preds.shape == (len(toks),)
    checked_ref = 0
    for b, L in enumerate(lengths):
        row = [int(t) for t in toks[b, :L]]
        assert (all_preds[b, L:] == -1).all()
        assert last_preds[b] == all_preds[b, L - 1]
        xs, preds, _ = session_trace(model, row)
        assert preds == all_preds[b, :L].tolist()
        # chunks of random sizes, starting from capacity 1 (the KV cache grows)
        sess = model.session(capacity=1)
        pos = 0
        while pos < L:
            step = int(rng.integers(1, 5))
            sess.feed(np.asarray(row[pos:pos + step], dtype=np.int64))
            pos = min(L, pos + step)
            assert (sess.x == xs[pos - 1]).all(), (b, pos)
            assert sess.next_token() == preds[pos - 1]
        assert sess.position == L and sess.tokens == row
        # every prefix at once
        for t in range(L):
            one = model.session(capacity=t + 1)
            one.feed(row[:t + 1])
            assert (one.x == xs[t]).all() and one.next_token() == preds[t]
        # the plain-Python reference, where it promises an answer
        for t, want in enumerate(reference_preds(kind, row, f)):
            if want is not None:
                assert preds[t] == want, (b, t)
                checked_ref += 1
    assert checked_ref >= len(lengths)


@pytest.mark.parametrize("kind", KINDS)
def test_all_positions_equal_separate_prefix_predictions(kind):
    rng = np.random.default_rng(40 + KINDS.index(kind))
    model = build(kind)
    row = tm.random_tokens(rng, N, ALPHABET[kind])
    L = len(row)
    per_pos = model.predict_batch(np.asarray([row]), all_positions=True)[0]
    prefixes = np.full((L, L), BOS, dtype=np.int64)
    for t in range(L):
        prefixes[t, :t + 1] = row[:t + 1]
    separate = model.predict_batch(prefixes, lengths=np.arange(1, L + 1))
    assert per_pos.tolist() == separate.tolist()
    assert separate.tolist() == [model.predict(row[:t + 1]) for t in range(L)]


@given(seed=st.integers(0, 2 ** 32 - 1))
def test_chunked_feeding_equals_feeding_at_once(seed):
    """KV cache correctness on the 2-layer Transformer: any chunking of a prompt
    leaves the same residual (and the same cache) as feeding it at once."""
    rng = np.random.default_rng(seed)
    model = MODELS["transformer"]
    row = tm.random_tokens(rng, int(rng.integers(1, N + 1)), tm.MATCH_ALPHABET)
    once = model.session(capacity=len(row))
    once.feed(row)
    sess = model.session(capacity=int(rng.integers(1, 4)))
    cuts = sorted(set(int(c) for c in rng.integers(0, len(row) + 1, size=int(rng.integers(0, 5)))))
    for a, b in zip([0] + cuts, cuts + [len(row)]):
        sess.feed(row[a:b])
    L = len(row)
    assert (sess.x == once.x).all()
    assert (sess.Kc[..., :L] == once.Kc[..., :L]).all() and (sess.Vc[:, :, :L] == once.Vc[:, :, :L]).all()
    assert sess.next_token() == once.next_token()



@pytest.mark.parametrize("kind", ("index", "hybrid"))
def test_real_twin_agrees_where_exact(kind):
    """The float64 twin (exact softmax, no grid) predicts the same token where one
    attention layer retrieves exactly: the one-layer Index-like match head and the
    hybrid (its RNN part is integer arithmetic)."""
    rng = np.random.default_rng(50 + len(kind))
    if kind == "index":
        model, _ = tm.match_model(N, FixedFormat(tm.match_int_bits(N, tm.f_default(N), "index"), tm.f_default(N)),
                                  "index")
    else:
        model = MODELS[kind]
    real = model.real()
    for _ in range(12):
        if kind == "index":
            row = tm.random_tokens(rng, N, tm.index_alphabet(N))
            (j,) = tm.match_reference(row, model.fmt.frac_bits, "index", False)[-1]["weights"]
            want = row[j]
        else:
            row = tm.random_tokens(rng, N, tm.MATCH_ALPHABET)
            want = tm.hybrid_reference(row)[-1]["pred"]
        assert real.predict(row) == model.predict(row) == want


def test_real_twin_leaks_where_fixed_point_is_exact():
    """Comparison only: in float64 the shift head's off-target weights are tiny but
    not 0, so layer 1 of the AR Transformer writes prev = tau +- epsilon, which
    layer 2's large lambda amplifies; the fixed-point model rounds them to exactly 0.
    (Seeded AR instance where the two disagree.)"""
    model = MODELS["transformer"]
    real = model.real()
    rng = np.random.default_rng(50)
    rows = [tm.ar_instance(rng, N + 1) for _ in range(12)]
    assert all(model.predict(r) == tm.ar_reference(r)[-1] for r in rows)
    prev = model.labels.index("prev")
    for r in rows:
        X = real.residuals(r)
        assert not np.all(X[1:, prev] == np.round(X[1:, prev]))    # float leaks
        sess = model.session()
        sess.feed(r)
        assert sess.residual()["prev"] == tau(r[-2])                  # exact
    assert any(real.predict(r) != model.predict(r) for r in rows)


def test_real_twin_agrees_on_the_linear_rnn():
    rng = np.random.default_rng(53)
    model = MODELS["linear_rnn"]
    real = model.real()
    for _ in range(12):
        row = tm.random_tokens(rng, int(rng.integers(1, 30)), tm.RNN_ALPHABET)
        assert real.predict(row) == model.predict(row) == tm.counter_reference(row, model.fmt.frac_bits)[-1]["pred"]


# ============================================================================
# linear RNN
def decode_state(model, state_raw):
    """Layer 0 (c, s, d), layer 1 (e) from the padded (2, 3) raw state."""
    dec = model.fmt.decode
    return {"c": dec(state_raw[0, 0]), "s": dec(state_raw[0, 1]), "d": dec(state_raw[0, 2]),
            "e": dec(state_raw[1, 0]), "pad": (dec(state_raw[1, 1]), dec(state_raw[1, 2]))}


def test_linear_rnn_state_follows_the_recurrence():
    model = MODELS["linear_rnn"]
    f = model.fmt.frac_bits
    rng = np.random.default_rng(60)
    for length in (1, 5, 40, 120):
        row = tm.random_tokens(rng, length - 1, tm.RNN_ALPHABET)
        ref = tm.counter_reference(row, f)
        sess = model.session()
        for t, tok in enumerate(row):
            sess.feed([tok])
            st_ = decode_state(model, sess.state)
            r = ref[t]
            assert (st_["c"], st_["s"], st_["d"], st_["e"]) == (r["c"], r["s"], r["d"], r["e"]), t
            assert st_["pad"] == (0, 0)
            res = sess.residual()
            assert (res["cnt"], res["sum"], res["dec"], res["eq"], res["gt"], res["neq"]) == \
                (r["c"], r["s"], r["d"], r["eq"], r["gt"], r["e"])
            assert sess.next_token() == r["pred"]
    # the halving sum really rounds (half to even) somewhere on these inputs
    assert any(r["d"].denominator > 1 for r in ref)


def _all_prompts(max_len):
    for L in range(max_len + 1):
        for rest in itertools.product(tm.RNN_ALPHABET, repeat=L):
            yield [BOS, *rest]


def test_linear_rnn_protocol():
    model = MODELS["linear_rnn"]
    rnn = model.rnn()
    assert isinstance(rnn, RNN)
    p = model.fmt.total_bits
    assert model.resources.state_numbers == 4
    assert model.resources.state_bits == 4 * p
    assert rnn.state_bits == 4 * p + math.ceil(math.log2(model.vocab.size))
    s0 = rnn.initial_state()
    with pytest.raises(ValueError, match="read no token"):
        rnn.output(s0)
    rng = np.random.default_rng(61)
    for _ in range(5):
        row = tm.random_tokens(rng, int(rng.integers(1, 25)), tm.RNN_ALPHABET)
        run = run_rnn(rnn, row)
        assert run.answer == model.predict(row) and run.cot == []
        sess = model.session()
        sess.feed(row)
        h, last = run.state
        assert (np.asarray(h) == sess.state).all() and last == row[-1]
    # step does not mutate its input, and two interleaved runs do not interfere
    a = protocol_feed(rnn, [BOS, tm.RNN_ALPHABET[0]])
    b = protocol_feed(rnn, [BOS, tm.RNN_ALPHABET[3], tm.RNN_ALPHABET[2]])
    a_copy = (a[0].copy(), a[1])
    a2 = rnn.step(a, tm.RNN_ALPHABET[1])
    b2 = rnn.step(b, tm.RNN_ALPHABET[1])
    assert (a[0] == a_copy[0]).all() and a[1] == a_copy[1]
    a2_again = rnn.step(a, tm.RNN_ALPHABET[1])
    assert rnn.state_key(a2) == rnn.state_key(a2_again) != rnn.state_key(b2)
    assert rnn.output(a2) == model.predict([BOS, tm.RNN_ALPHABET[0], tm.RNN_ALPHABET[1]])


def _check_key_groups(rnn, groups):
    """Within a key group: equal states and equal outputs after every one-token
    continuation. Across groups: distinct states. Returns the number of merges."""
    merges = 0
    states = set()
    for key, members in groups.items():
        h0, t0 = members[0][1]
        for _row, (h, t) in members[1:]:
            assert (np.asarray(h) == np.asarray(h0)).all() and t == t0
            merges += 1
        states.add((np.asarray(h0).tobytes(), t0))
        for tok in tm.RNN_ALPHABET:
            assert len({rnn.output(rnn.step(s, tok)) for _, s in members}) == 1
    assert len(states) == len(groups)      # distinct keys <=> distinct states
    return merges


def test_linear_rnn_state_key_is_canonical():
    """Equal keys <=> equal states, and equal keys behave the same afterwards: all
    prompts [BOS] + up to 4 tokens over a 4-letter alphabet, then 1500 seeded
    random prompts of 10 tokens (where the halving sum forgets old tokens, so
    different prompts do reach the same state)."""
    model = MODELS["linear_rnn"]
    rnn = model.rnn()
    groups: dict = {}
    for row in _all_prompts(4):
        groups.setdefault(rnn.state_key(protocol_feed(rnn, row)), []).append((row, protocol_feed(rnn, row)))
    _check_key_groups(rnn, groups)
    rng = np.random.default_rng(62)
    groups = {}
    for _ in range(1500):
        row = tm.random_tokens(rng, 10, tm.RNN_ALPHABET)
        s = protocol_feed(rnn, row)
        members = groups.setdefault(rnn.state_key(s), [])
        if all(r != row for r, _ in members):
            members.append((row, s))
    assert _check_key_groups(rnn, groups) > 0


def test_linear_rnn_state_key_fits_the_declared_state_bits():
    """constructions/build/protocol.py: len(state_key) * 8 <= state_bits rounded up to bytes."""
    rnn = MODELS["linear_rnn"].rnn()
    s = protocol_feed(rnn, [BOS, tm.RNN_ALPHABET[1]])
    key = rnn.state_key(s)
    assert len(key) <= math.ceil(rnn.state_bits / 8), (len(key), rnn.state_bits)


def test_linear_rnn_overflows_on_long_inputs_below_its_bits():
    """The running sum grows linearly: Q12.4 holds 300 tokens of tau 3 (sum 900),
    Q9.4 does not, and says so at the position where it stops fitting."""
    model = MODELS["linear_rnn"]
    row = [BOS] + [number_token(2)] * 300
    assert model.predict(row) == number_token(2)
    small = model.with_format(FixedFormat(9, 4))
    with pytest.raises(FixedPointOverflow, match=r"at position 171: .* needs at least 10 integer bits"):
        small.predict(row)        # 171 * 3 = 513 >= 2^9


def test_only_a_linear_rnn_is_an_rnn():
    for kind in ("transformer", "hybrid"):
        with pytest.raises(ValueError, match="only a linear RNN is an RNN"):
            MODELS[kind].rnn()


# ============================================================================
# hybrid
@pytest.mark.parametrize("n", (8, 32))
def test_hybrid_matches_reference(n):
    model = build("hybrid", n)
    assert model.kind == "hybrid" and len(model.spec.attn_layers) == 1 and len(model.spec.rnn_layers) == 1
    rng = np.random.default_rng(70 + n)
    for _ in range(3):
        row = tm.random_tokens(rng, n, tm.MATCH_ALPHABET)
        ref = tm.hybrid_reference(row)
        sess = model.session(record=True)
        for t, tok in enumerate(row):
            sess.feed([tok])
            res = sess.residual()
            r = ref[t]
            assert (res["p"], res["p_sq"], res["prev"], res["first_at"]) == (r["p"], r["p_sq"], r["prev"], r["first_at"])
            att = sess.attention()
            w_prev = [Fraction(float(w)) for w in att[0, 0]]
            w_first = [Fraction(float(w)) for w in att[0, 1]]
            assert w_prev == [int(j == max(t - 1, 0)) for j in range(t + 1)]
            assert w_first == [int(j == r["first_at"] - 1) for j in range(t + 1)]
            assert sess.next_token() == r["pred"]
        assert model.predict_batch(np.asarray([row]), all_positions=True)[0].tolist() == [r["pred"] for r in ref]


# ============================================================================
# resources
def test_params_do_not_depend_on_n():
    for make in (lambda n: tm.ar_transformer(n, tm.ar_format(n)), lambda n: tm.prev_hybrid(n, tm.hybrid_format(n)),
                 lambda n: tm.count_model(n, FixedFormat(tm.count_int_bits(n, tm.count_min_frac_bits(n)),
                                                         tm.count_min_frac_bits(n)))):
        res = [make(n).resources for n in (4, 16, 64, 256)]
        assert len({(r.params, r.params_nonzero) for r in res}) == 1
        assert len({r.kv_numbers_per_token for r in res}) == 1 and len({r.state_numbers for r in res}) == 1
        # the precision grows (O(log n)), the architecture does not
        assert res[0].precision_bits < res[-1].precision_bits


@pytest.mark.parametrize("kind", KINDS)
def test_resource_accounting(kind):
    model = build(kind)
    r = model.resources
    p = model.fmt.total_bits
    assert (r.int_bits, r.frac_bits, r.precision_bits) == (model.fmt.int_bits, model.fmt.frac_bits, p)
    rng = np.random.default_rng(80)
    toks, lengths = random_batch(rng, kind, 5, N + 1)
    before = r.tokens_processed
    model.predict_batch(toks, lengths)
    assert r.tokens_processed == before + int(lengths.sum())
    assert 1 <= r.used_int_bits <= r.int_bits
    assert r.used_precision_bits == r.used_int_bits + model.fmt.frac_bits + 1
    sess = model.session(capacity=1)
    for L in range(1, N + 2):
        sess.feed([BOS if L == 1 else ALPHABET[kind][L % 4]])
        assert sess.kv_cache_bits() == r.kv_bits(L) == L * r.kv_bits(1)
    # the KV cache declared per token is what a session stores per position
    assert r.kv_numbers_per_token == sess.Kc[..., 0].size + sess.Vc[:, :, 0].size
    n_heads = sum(len(layer.heads) for layer in model.spec.attn_layers)
    if kind == "linear_rnn":
        assert r.kv_numbers_per_token == 0 and r.state_numbers == 4 and r.state_bits == 4 * p
    elif kind == "transformer":
        assert r.state_numbers == 0 and r.state_bits == 0 and n_heads == 2 and r.kv_numbers_per_token > 0
    else:
        assert r.state_numbers == 2 and r.state_bits == 2 * p and n_heads == 2 and r.kv_numbers_per_token > 0


def _count_model_64():
    f = tm.count_min_frac_bits(64)
    return tm.count_model(64, FixedFormat(tm.count_int_bits(64, f), f))


@pytest.mark.parametrize("all_positions", (False, True))
@pytest.mark.parametrize("kind", KINDS + ("count64",))
def test_used_int_bits_are_sufficient_and_necessary(kind, all_positions):
    """The same weights at used_int_bits give identical predictions; one bit less
    fails, naming exactly used_int_bits."""
    rng = np.random.default_rng(90)
    if kind == "count64":
        model = _count_model_64()
        toks = np.asarray([tm.count_tokens(rng, 64) for _ in range(4)])
        lengths = None
    else:
        model = build(kind)
        toks, lengths = random_batch(rng, kind, 6, N + 1)
    preds = model.predict_batch(toks, lengths, all_positions=all_positions)
    used = model.resources.used_int_bits
    f = model.fmt.frac_bits
    again = model.with_format(FixedFormat(used, f)).predict_batch(toks, lengths, all_positions=all_positions)
    assert (again == preds).all()
    with pytest.raises(FixedPointOverflow) as e:
        model.with_format(FixedFormat(used - 1, f)).predict_batch(toks, lengths, all_positions=all_positions)
    assert e.value.needed_int_bits == used


def test_used_int_bits_cover_the_weights():
    """Minimal case: x = 1/8 (embedding coefficient), an MLP weight 8 reads it, so
    every computed value is <= 1 (1 integer bit) but the weight 8 itself needs 4."""
    s = ResidualSpace()
    s.embedded("eighth", K.F_ONE, 0, Fraction(1, 8))
    s.hidden("out")
    b = Builder("big-weight", "transformer", Vocab(1), s)
    b.attention_layer([], mlp=[Neuron({"eighth": 8}, 0, {"out": 1})])
    b.readout([("out", K.F_IS_TOKEN, number_token(0), 1)])
    model = b.build(FixedFormat(6, 3))
    assert model.predict([BOS]) == number_token(0)
    used = model.resources.used_int_bits
    assert model.with_format(FixedFormat(used, 3)).predict([BOS]) == number_token(0)


# ============================================================================
# bad inputs: refused before any kernel runs
@pytest.fixture
def no_kernels(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a kernel ran on invalid input")
    for mod, name in ((BT, "forward_batch"), (K, "feed_tokens"), (K, "feed_flat"), (RO, "readout"),
                      (RO, "readout_fast"), (RO, "readout_flat"), (K, "model_step")):
        monkeypatch.setattr(mod, name, boom)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_batches_are_refused_before_any_kernel(kind, no_kernels):
    model = MODELS[kind]
    before = (model.resources.tokens_processed, model.err.copy())
    good = np.array([[BOS, number_token(1), number_token(2), number_token(0)]] * 2, dtype=np.int64)
    cases = [
        (lambda: model.predict_batch(np.where(np.arange(4) == 3, number_token(99), good)), ValueError,
         r"batch\[0\] token id 131 at position 3 is not in the vocabulary"),
        (lambda: model.predict_batch(np.array([[BOS, 12, 33]])), ValueError, r"token id 12 at position 1"),
        (lambda: model.predict_batch(np.array([[BOS, 33], [BOS, -1]])), ValueError,
         r"batch\[1\] token id -1 at position 1"),
        (lambda: model.predict_batch(good.astype(np.float64)), TypeError, "integer token ids"),
        (lambda: model.predict_batch(good[None]), ValueError, r"2-D \(batch, length\)"),
        (lambda: model.predict_batch(good[0]), ValueError, r"2-D \(batch, length\)"),
        (lambda: model.predict_batch(good, lengths=[4, 0]), ValueError, "1 <= length <= 4"),
        (lambda: model.predict_batch(good, lengths=[4, 5]), ValueError, "1 <= length <= 4"),
        (lambda: model.predict_batch(good, lengths=[4]), ValueError, r"lengths must be \(batch,\)"),
        (lambda: model.predict_batch(good, max_length=3), ValueError, "length 4 exceed the declared maximum 3"),
        (lambda: model.predict([BOS, 33, 10]), ValueError, "token id 10 at position 2"),
        (lambda: model.predict([BOS, 33.0]), TypeError, "integer token ids"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    assert model.resources.tokens_processed == before[0] and (model.err == before[1]).all()


@pytest.mark.parametrize("kind", KINDS)
def test_bad_session_inputs_are_refused_before_any_kernel(kind, no_kernels):
    model = MODELS[kind]
    sess = model.session()
    with pytest.raises(ValueError, match="feed at least one token before asking for the next one"):
        sess.next_token()
    with pytest.raises(ValueError, match=r"token id 500 at position 2 is not in the vocabulary"):
        sess.feed([BOS, 33, 500])
    with pytest.raises(TypeError, match="integer token ids"):
        sess.feed(np.array([0.0, 33.0]))
    with pytest.raises(ValueError, match="must be a 1-D token sequence"):
        sess.feed(np.array([[BOS, 33]]))
    with pytest.raises(ValueError, match="token id 9999 at position 0"):
        sess.feed(9999)
    assert sess.position == 0 and sess.tokens == [] and not sess.x.any() and not sess.state.any()


def test_refused_chunk_leaves_a_session_unchanged():
    model = MODELS["hybrid"]
    sess = model.session()
    sess.feed([BOS, number_token(3)])
    x, state, kc = sess.x.copy(), sess.state.copy(), sess.Kc.copy()
    with pytest.raises(ValueError, match="token id 31 at position 1"):
        sess.feed([number_token(2), 31])
    assert sess.position == 2 and (sess.x == x).all() and (sess.state == state).all() and (sess.Kc == kc).all()
    sess.feed([number_token(2)])
    assert sess.next_token() == number_token(3)     # predicts the previous token


def test_integer_feature_overflow_names_the_bits_it_needs():
    """A position feature i = 4 does not fit Q2.f (|v| < 4) but fits Q3.f: the
    error must say 3 integer bits, at position 4."""
    s = ResidualSpace()
    s.embedded("pos", K.F_POS)
    b = Builder("pos-only", "transformer", Vocab(2), s)
    b.readout([("pos", K.F_IS_TOKEN, number_token(0), 1)])
    model = b.build(FixedFormat(3, 2))
    row = [BOS, 33, 33, 33, 33]
    model.predict(row)
    assert model.resources.used_int_bits == 3
    with pytest.raises(FixedPointOverflow, match="at position 4") as e:
        model.with_format(FixedFormat(2, 2)).predict(row)
    assert e.value.needed_int_bits == 3


# ============================================================================
# NUMBA_DISABLE_JIT=1 gives the same numbers
def test_pure_python_path_is_identical_to_the_jit():
    args = ["20250101", "12", "3"]
    env = dict(os.environ, NUMBA_DISABLE_JIT="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "_models.py"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["jit_disabled"] is True
    import numba
    assert not numba.config.DISABLE_JIT
    jit = tm.fingerprint(*map(int, args))
    assert set(jit) == {"ar-transformer", "counter-rnn", "prev-hybrid"}
    for name, got in out["fingerprint"].items():
        assert got == json.loads(json.dumps(jit[name])), name
    # the overflow error path ran too (one bit below what the run used)
    assert all(v["overflow"] and "FixedPointOverflow" in v["overflow"] for v in jit.values())


# ============================================================================
# prefix sharing in predict_batch and the readout table: exact shortcuts
def _sharing_batch(rng, kind, rows=24):
    """Rows sorted so that neighbours share prefixes, with duplicates, a row that
    is a prefix of the one before, and a row longer than the one before."""
    toks, lengths = random_batch(rng, kind, rows, N + 1)
    base = toks[0, :lengths[0]].copy()
    for b in range(1, rows, 3):          # every third row: the first row's prefix plus a new tail
        k = int(rng.integers(1, lengths[0]))
        toks[b, :k] = base[:k]
    order = sorted(range(rows), key=lambda b: toks[b, :lengths[b]].tolist())
    toks, lengths = toks[order], lengths[order]
    toks = np.concatenate([toks, toks[-1:], toks[-1:]])
    lengths = np.concatenate([lengths, lengths[-1:], [max(1, lengths[-1] - 2)]])
    return toks, lengths


@pytest.mark.parametrize("all_positions", (False, True))
@pytest.mark.parametrize("kind", KINDS)
def test_prefix_sharing_changes_nothing(kind, all_positions):
    """share_prefix=True and False give the same predictions, the same used bits,
    and (one integer bit below) the same error naming the same batch item."""
    rng = np.random.default_rng(500 + KINDS.index(kind))
    toks, lengths = _sharing_batch(rng, kind)
    shared_prefix = sum(int(np.argmin(np.append(toks[b, :lengths[b]] == toks[b - 1, :lengths[b]], False)))
                        for b in range(1, len(toks)) if lengths[b - 1] >= lengths[b])
    assert shared_prefix > len(toks)          # the batch really shares prefixes
    runs = {}
    for share in (False, True):
        model = build(kind)
        preds = model.predict_batch(toks, lengths, all_positions=all_positions, share_prefix=share)
        runs[share] = (preds.tolist(), model.resources.used_int_bits, model.err.tolist())
    assert runs[True] == runs[False]
    used, f = runs[True][1], build(kind).fmt.frac_bits
    msgs = []
    for share in (False, True):
        with pytest.raises(FixedPointOverflow) as e:
            build(kind).with_format(FixedFormat(used - 1, f)).predict_batch(
                toks, lengths, all_positions=all_positions, share_prefix=share)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("kind", KINDS)
def test_prefix_sharing_is_off_in_saturate_mode(kind):
    """Saturate mode counts every clamping per row, so it never shares: the counts
    with and without share_prefix agree (and are nonzero here)."""
    rng = np.random.default_rng(600 + KINDS.index(kind))
    toks, lengths = _sharing_batch(rng, kind)
    model = build(kind)
    used, f = None, model.fmt.frac_bits
    model.predict_batch(toks, lengths)
    used = model.resources.used_int_bits
    out = []
    for share in (False, True):
        m = build(kind).with_format(FixedFormat(used - 1, f, "saturate"))
        p = m.predict_batch(toks, lengths, all_positions=True, share_prefix=share)
        out.append((p.tolist(), m.resources.saturations))
    assert out[0] == out[1] and out[0][1] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_readout_table_equals_the_generic_readout(kind):
    """readout_fast (weights from readout_table) == readout: the same token and the
    same error array (largest |raw|, first error), for residuals from real runs and
    random ones, at the model's format and at formats so small that the table's
    own entries overflow (those are recomputed and raise as before)."""
    from rnngap.constructions.machine.fixedpoint import new_err
    rng = np.random.default_rng(700 + KINDS.index(kind))
    model = build(kind)
    f = model.fmt.frac_bits
    xs = []
    toks, lengths = random_batch(rng, kind, 4, N + 1)
    for b, L in enumerate(lengths):
        xs.extend(session_trace(model, [int(t) for t in toks[b, :L]])[0])
    D = model.spec.width
    for scale in (4, 12, 30):
        xs.extend(rng.integers(-(1 << scale), 1 << scale, size=(20, D)))
    m, W = model, model.weights.readout
    assert all((a == b).all() for a, b in zip((W.w_tab, W.wmax_tab, W.ok_tab), RO.readout_table(
        W.out_kind, W.out_param, W.out_coef, m.candidates, *m.fmt.args)))
    checked_bad = 0
    # the kernels at smaller integer bits (the model's readout raws, the same f)
    for I in (model.fmt.int_bits, 6, 3, 1):
        for mode in ("raise", "saturate"):
            args = FixedFormat(I, f, mode).args
            w, wmax, ok = RO.readout_table(W.out_kind, W.out_param, W.out_coef, m.candidates, *args)
            Wf = W._replace(w_tab=w, wmax_tab=wmax, ok_tab=ok)
            checked_bad += int((~ok).sum())
            for x in xs:
                x = np.asarray(x, np.int64)
                e1, e2 = new_err(), new_err()
                a = RO.readout(x, W, m.candidates, *args, e1)
                b = RO.readout_fast(x, Wf, *args, e2)
                assert a == b and e1.tolist() == e2.tolist(), (I, mode, x.tolist())
    assert checked_bad > 0      # some table entries did overflow and took the recomputing path


def _scores_reference(q, Kh, m, I, f, mode, err):
    """The plain definition: fx_mul / fx_add per key, in component order."""
    from rnngap.constructions.machine.fixedpoint import fx_add, fx_mul
    out = np.zeros(m, np.int64)
    for j in range(m):
        s = np.int64(0)
        for c in range(len(q)):
            if q[c] != 0 and Kh[j, c] != 0:
                s = fx_add(s, fx_mul(q[c], Kh[j, c], I, f, mode, err), I, f, mode, err)
        out[j] = s
    return out


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(6))
def test_attention_scores_equal_the_plain_definition(seed, mode):
    """attention.attention_scores (unchecked fast loop, checked loop, fallback to
    fx_mul / fx_add) gives the scores, the error array (largest |raw|, first error,
    saturation count) of the plain per-key definition: magnitudes chosen so that
    each path runs, including products beyond 2^62 and overflowing sums."""
    from rnngap.constructions.machine.fixedpoint import new_err
    rng = np.random.default_rng(seed)
    paths = 0
    for trial in range(40):
        I = int(rng.integers(1, 40))
        f = int(rng.integers(0, 62 - I + 1))
        Dh = int(rng.integers(1, 6))
        m = int(rng.integers(1, 30))
        kb = int(rng.integers(0, I + f + 1))
        qb = int(rng.integers(0, 62))
        Kh = rng.integers(-(1 << kb), (1 << kb) + 1, size=(m, Dh)).astype(np.int64)
        Kh[rng.random((m, Dh)) < 0.3] = 0
        q = rng.integers(-(1 << qb), (1 << qb), size=Dh, endpoint=True).astype(np.int64)
        q[rng.random(Dh) < 0.2] = 0
        args = FixedFormat(I, f, mode).args
        e1, e2 = new_err(), new_err()
        want = _scores_reference(q, Kh, m, *args, e1)
        got = np.zeros(m, np.int64)
        KhT = np.ascontiguousarray(Kh.T)
        KmT = np.maximum.accumulate(np.abs(KhT), axis=1)        # what model_step keeps beside the cache
        M = AT.attention_scores(q, KhT, KmT, m, *args, e2, np.zeros(Dh, np.int64), np.zeros(Dh, np.int64), got)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (trial, I, f, q.tolist())
        assert M == want.max()
        paths += int(e1[0] != 0 or e1[5] != 0)
    assert paths > 0     # some trials overflowed (the fallback path ran)


def _round_half_even_shift(p: int, f: int) -> int:
    """round_half_even(p / 2^f) on Python integers (the exact reference)."""
    if f == 0:
        return p
    q, rem = divmod(p, 1 << f)
    half = 1 << (f - 1)
    return q + 1 if rem > half or (rem == half and q % 2 == 1) else q


@pytest.mark.parametrize("seed", range(3))
def test_mul_round_abs_is_the_exact_rounded_product(seed):
    """fixedpoint.mul_round_abs against Python integers: products below and above
    2^62 (the two-limb path), results just below 2^62 and those of 2^62 or more
    (-1), half-way remainders."""
    from rnngap.constructions.machine.fixedpoint import mul_round_abs
    rng = np.random.default_rng(seed)
    cases = [(0, 5, 3), (1, 1, 1), ((1 << 62) - 1, 1, 0), ((1 << 62) - 1, 2, 1), ((1 << 62) - 1, 3, 1),
             ((1 << 61) + 1, 2, 0), (3, 1 << 60, 2), ((1 << 31) + 1, (1 << 31) + 1, 0)]
    for _ in range(400):
        xb, yb = int(rng.integers(0, 63)), int(rng.integers(0, 63))
        cases.append((int(rng.integers(0, 1 << xb)) if xb else 0, int(rng.integers(0, 1 << yb)) if yb else 0,
                      int(rng.integers(0, 62))))
    for x, y, f in cases:
        want = _round_half_even_shift(x * y, f)
        got = int(mul_round_abs(np.int64(x), np.int64(y), np.int64(f)))
        assert got == (want if want < (1 << 62) else -1), (x, y, f)


@pytest.mark.parametrize("mode", ("raise", "saturate"))
def test_attention_scores_large_products_in_range(mode):
    """Products of raw values beyond 2^62 whose rounded value is still in range (the
    checked loop computes them on two limbs instead of falling back): the same
    scores and error array as the plain per-key definition, at formats with
    I + f = 62 (the frontier's generous runs); some keys then overflow a sum."""
    from rnngap.constructions.machine.fixedpoint import new_err
    rng = np.random.default_rng(5)
    big = 0
    for trial in range(60):
        f = int(rng.integers(8, 31))
        I = 62 - f
        Dh, m = int(rng.integers(1, 6)), int(rng.integers(1, 40))
        hb = (I + 2 * f) // 2              # |q|, |k| ~ 2^hb: products near 2^(I + 2 f), above 2^62
        Kh = rng.integers(-(1 << hb), (1 << hb) + 1, size=(m, Dh)).astype(np.int64)
        q = rng.integers(-(1 << (hb - 2)), (1 << (hb - 2)) + 1, size=Dh).astype(np.int64)
        args = FixedFormat(I, f, mode).args
        e1, e2 = new_err(), new_err()
        want = _scores_reference(q, Kh, m, *args, e1)
        got = np.zeros(m, np.int64)
        KhT = np.ascontiguousarray(Kh.T)
        KmT = np.maximum.accumulate(np.abs(KhT), axis=1)
        M = AT.attention_scores(q, KhT, KmT, m, *args, e2, np.zeros(Dh, np.int64), np.zeros(Dh, np.int64), got)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (trial, I, f)
        assert M == want.max()
        big += int(sum(abs(float(a)) * abs(float(b)) >= 4.0e18 for a in q for b in Kh.ravel()))
    assert big > 0


@pytest.mark.parametrize("mode", ("raise", "saturate"))
@pytest.mark.parametrize("seed", range(6))
def test_attend_sparse_equals_fx_attend(seed, mode):
    """attention.attend_sparse (the softmax that visits only keys whose weight can be
    nonzero, a block of 64 at a time) gives the output and the error array
    (largest |raw|, first error, saturation count) of fixedpoint.fx_attend:
    scores spread so that blocks are skipped, kept, or partly kept, many keys
    sharing a few scores near the maximum (the exp / division memo), one key,
    values that overflow the output."""
    from rnngap.constructions.machine.fixedpoint import fx_attend, new_err
    rng = np.random.default_rng(1000 + seed)
    skipped = kept = bad = memo = 0
    for trial in range(60):
        I = int(rng.integers(2, 30))
        f = int(rng.integers(0, min(20, 62 - I) + 1))
        m = int(rng.integers(1, 400))
        d = int(rng.integers(1, 4))
        spread = int(rng.integers(0, I + f - 1))
        scores = rng.integers(-(1 << spread), (1 << spread) + 1, size=m).astype(np.int64)
        share = (0.05, 0.5)[int(rng.integers(0, 2))]
        if rng.random() < 0.6:          # some keys near the top (few, or many sharing a few scores)
            top = rng.random(m) < share
            scores[top] = (1 << spread) - rng.integers(0, 4 << f, size=int(top.sum()))
        vb = int(rng.integers(0, I + f))
        values = rng.integers(-(1 << vb), (1 << vb) + 1, size=(m, d)).astype(np.int64)
        args = FixedFormat(I, f, mode).args
        e1, e2 = new_err(), new_err()
        want = np.zeros(d, np.int64)
        fx_attend(scores.copy(), m, values, *args, e1, np.zeros(m, np.int64), want)
        got = np.zeros(d, np.int64)
        AT.attend_sparse(scores.copy(), m, scores.max(), values, *args, e2, np.zeros(m, np.int64), got)
        assert got.tolist() == want.tolist() and e1.tolist() == e2.tolist(), (trial, I, f, m)
        thr = int(FP.exp_zero_threshold(f))
        blocks = [scores[j:j + 64].max() - scores.max() >= thr for j in range(0, m, 64)]
        skipped += blocks.count(False)
        kept += blocks.count(True)
        bad += int(e1[0] != 0 or e1[5] != 0)
        memo += int(I >= 1 and int((scores - scores.max() >= thr).sum()) > 16)
    assert skipped > 0 and kept > 0 and bad > 0 and memo > 0     # every path ran


def _declared_length_cases():
    """(builder, the longest valid prompt) per construction that declares n."""
    from rnngap.constructions.models import demos, hybrid as H, retrieval as R
    from rnngap.constructions.models import istree as IT
    n = 6
    idx = [BOS] + [number_token(1)] * n + [QUERY, number_token(2)]
    ar = [BOS] + [number_token(1)] * n + [QUERY, number_token(1)]
    c3 = [BOS] + [number_token(1)] * n + [QUERY, number_token(1), number_token(1)]
    cnt = [BOS] + [number_token(1)] * n + [QUERY, number_token(1), number_token(0)]
    return [
        (lambda: R.index_transformer(n), idx), (lambda: R.ar_transformer(n), ar), (lambda: R.cgram_transformer(n, alphabet=2, c=3), c3),
        (lambda: R.counting_transformer(n), cnt), (lambda: demos.position_match_transformer(n), idx),
        (lambda: demos.count_threshold_transformer(n), cnt), (lambda: H.index_hybrid(n), idx), (lambda: H.ar_hybrid(n), ar),
        (lambda: H.cgram_hybrid(n, c=3), c3), (lambda: H.counting_hybrid(n), cnt),
        (lambda: IT.istree_transformer(3, 2), None), (lambda: H.istree_hybrid(3, 2), None),
    ]


def test_inputs_longer_than_declared_are_refused_before_any_kernel(monkeypatch):
    """Every construction built for n declares the positions its format covers
    (``max_positions``); a batch row or a session context one token longer is
    refused with a clear error before any kernel runs, and a session that
    refused a chunk is unchanged. The longest valid prompt still runs."""
    checked = 0
    for build, prompt in _declared_length_cases():
        model = build()
        P = model.max_positions
        assert P is not None and P == model.spec.max_positions, model.name
        if prompt is not None:
            assert len(prompt) == P, (model.name, len(prompt), P)
            model.predict(prompt)                          # the longest declared prompt runs
            filler = prompt[-1]
        else:
            filler = BOS
        too_long = np.full((1, P + 1), filler, np.int64)
        too_long[0, 0] = BOS
        sess = model.session()
        if prompt is not None:
            sess.feed(prompt[:-1])
        else:
            sess.position = P - 1                           # as if P - 1 tokens had been fed
        with monkeypatch.context() as mp:
            for mod, name in ((BT, "forward_batch"), (K, "feed_tokens"), (K, "feed_flat"), (K, "model_step")):
                mp.setattr(mod, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("a kernel ran")))
            with pytest.raises(ValueError, match=rf"{P + 1} tokens exceeds the {P} positions"):
                model.predict_batch(too_long)
            with pytest.raises(ValueError, match=rf"context of {P + 1} tokens exceeds the {P} positions"):
                sess.feed([filler, filler])
            assert sess.position == P - 1
        checked += 1
    assert checked == len(_declared_length_cases())


def test_rnn_adapter_refuses_malformed_states_and_tokens():
    """Model.rnn() (the protocol view): a state of the wrong shape or kind, or a
    non-integer token, is a clear error, never silently broadcast or truncated."""
    rnn = MODELS["linear_rnn"].rnn()
    s0 = rnn.initial_state()
    s1 = rnn.step(s0, BOS)
    h, tok = s1
    cases = [
        (lambda: rnn.step((h[:, :1], tok), BOS), ValueError, "state h must be an integer array of shape"),
        (lambda: rnn.step((h.astype(float), tok), BOS), ValueError, "integer array"),
        (lambda: rnn.step(h, BOS), TypeError, r"a pair \(h, last token\)"),
        (lambda: rnn.step(s1, 3.5), TypeError, "a token is an integer id"),
        (lambda: rnn.step(s1, True), TypeError, "a token is an integer id"),
        (lambda: rnn.output((h, 2.0)), TypeError, "last token must be an int"),
        (lambda: rnn.step(s1, 10 ** 6), ValueError, "not in the vocabulary"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    assert rnn.output(rnn.step(s1, number_token(2))) == MODELS["linear_rnn"].predict([BOS, number_token(2)])
