"""batch.feed_rnn_sparse: an attention-free model's RNN layers fed with their
weights stored by rows (the compiled T5-RAG programs keep about 1% of their dense
weights). It must be the dense step (kernels.feed_flat) number for number: the
returned position, every RNN state, the residual, and ``err`` (largest |raw|,
first error and its position, saturation count), at formats where everything
fits, where an operation overflows (raise mode), where values are clamped
(saturate mode), and at formats so wide that the unchecked products are not
provably inside int64 (the checked products run). The row product is compared
with kernels.matvec on random operands too, and one run repeats the comparison
with NUMBA_DISABLE_JIT=1 in a subprocess.

Run as a script (``python tests/test_kernels_sparse.py SEED``) it prints the JSON
fingerprint the subprocess test compares.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine.fixedpoint import E_CODE, E_MAXABS, E_SAT, FixedPointOverflow, new_err
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.session import Session
from rnngap.constructions.models.simulate import random_linear_rnn

def _doubler(fmt: FixedFormat, bias: int | None = None):
    """s_t = s_(t-1) + tau_t, y = s; the MLP adds relu(y) to y again (y = 2 s: the
    residual sum leaves the range while s and every product are inside) and, with
    ``bias``, writes relu(y + bias) to z (the bias sum leaves the range first)."""
    from rnngap.constructions.build.gadgets import Builder, Neuron, ResidualSpace
    from rnngap.constructions.machine.vocab import Vocab
    sp = ResidualSpace()
    sp.embedded("one", K.F_ONE)
    sp.embedded("tok", K.F_TOK)
    sp.hidden("y", accumulate=True)
    if bias is not None:
        sp.hidden("z")
    b = Builder("doubler", "linear_rnn", Vocab(3), sp, claim="tests")
    mlp = [Neuron({"y": 1}, 0, {"y": 1})] + ([Neuron({"y": 1}, bias, {"z": 1})] if bias is not None else [])
    b.rnn_layer(["s"], A={("s", "s"): 1}, B={("s", "tok"): 1}, C={("y", "s"): 1}, mlp=mlp, name="doubler")
    b.readout([("y", K.F_TOK, 0, 1)])
    return b.build(fmt)


def _feed(model, tokens, sparse: bool) -> tuple:
    """(next position, state, residual, err) after feeding ``tokens`` from position 0."""
    W = model.weights.net
    state = np.zeros((W.rA.shape[0], W.rA.shape[1]), np.int64)
    x = np.zeros(model.spec.width, np.int64)
    err = new_err()
    arr = np.asarray(tokens, np.int64)
    if sparse:
        t = BT.feed_rnn_sparse(arr, 0, *model.fmt.args, err, W.ekind, W.eparam, W.ecoef, *model.rnn_sparse, state, x)
    else:
        z = lambda *shape: np.zeros(shape, np.int64)
        t = K.feed_flat(arr, 0, *model.fmt.args, err, *W, state, z(0, 0, 0, 1), z(0, 0, 1, 1), z(0, 0, 1, 0), x,
                        z(4), z(1), False, z(0, 0, 1))
    return int(t), state.tolist(), x.tolist(), err.tolist()


def _tokens(model, rng, length: int, numbers_only: bool = False) -> list[int]:
    cands = [int(c) for c in model.candidates if model.vocab.contains(int(c)) and (c >= 32 or not numbers_only)]
    return [0] + [cands[int(i)] for i in rng.integers(0, len(cands), length - 1)]


def _models() -> list:
    """Attention-free models: compiled RAG programs, the T4.1 RNN, random linear RNNs."""
    out = [by_name(name).build(n).model for name, n in (("ar-rag", 4), ("index-rag", 4), ("tm-addition-rag", 3),
                                                       ("counting-rag", 3))]
    out.append(CH.iterate_rnn(8))
    out += [random_linear_rnn(seed) for seed in range(3)]
    return out


def _formats(model) -> list:
    """The model's format; an integer part too small for its values (raise: the run
    stops at an overflow; saturate: values are clamped); and one so wide that no
    product is provably inside int64 (the checked products run)."""
    used = model.fmt.used_int_bits(np.array(_feed(model, _tokens(model, np.random.default_rng(0), 60), False)[3]))
    wbits = int(model.rnn_sparse.wbits[0])
    small = max(wbits + 1 - model.fmt.frac_bits, used - 2, 1)
    out = [model.fmt]
    if small < used:
        out += [FixedFormat(small, model.fmt.frac_bits), FixedFormat(small, model.fmt.frac_bits, "saturate")]
    out.append(FixedFormat(62 - model.fmt.frac_bits, model.fmt.frac_bits))
    return out


def test_every_attention_free_catalogue_model_gets_the_sparse_form_and_no_other_does():
    for name in ("tm-palindrome-rag", "istree-rag", "iterate-rnn"):
        assert by_name(name).build(4).model.rnn_sparse is not None, name
    for name in ("index-hybrid", "index-transformer"):
        assert by_name(name).build(4).model.rnn_sparse is None, name


@pytest.mark.parametrize("k", range(8))
def test_feed_rnn_sparse_equals_the_dense_step(k):
    model = _models()[k]
    rng = np.random.default_rng(100 + k)
    saw = set()
    for fmt in _formats(model):
        try:
            m = model.with_format(fmt)
        except (ValueError, FixedPointOverflow):      # the weights or readout coefficients do not fit
            continue
        for length in (1, 7, 80):
            toks = _tokens(m, rng, length)
            dense, sparse = _feed(m, toks, False), _feed(m, toks, True)
            assert sparse == dense, (model.name, fmt.name, length)
            e = dense[3]
            saw.add("overflow" if e[E_CODE] else "clamped" if e[E_SAT] else "exact")
    assert "exact" in saw


def test_the_overflow_and_clamp_cases_run():
    """Where each checked-once stage leaves the range first, in raise and saturate
    mode: the T4.1 RNN at 7 integer bits (its counters pass 127 within 200 tokens:
    the state sum), the doubler (the MLP's residual sum, or its bias sum), and the
    counter RNN of tests/_models.py at f = 4 (rounded products) at 5 integer bits."""
    import _models as tm
    cases = [(CH.iterate_rnn(8), 7, 0), (_doubler(FixedFormat(8, 0)), 8, 0), (_doubler(FixedFormat(8, 0), 100), 8, 0),
             (tm.counter_rnn(tm.RNN_FORMAT), 5, 4)]
    for base, I, f in cases:
        rng = np.random.default_rng(1)
        toks = _tokens(base, rng, 200, numbers_only=base.name == "doubler")    # s grows: 2 s leaves the range
        for mode, field in (("raise", E_CODE), ("saturate", E_SAT)):
            m = base.with_format(FixedFormat(I, f, mode))
            dense, sparse = _feed(m, toks, False), _feed(m, toks, True)
            assert dense[3][field] != 0, (base.name, mode)
            assert sparse == dense, (base.name, mode)


def test_a_changed_sparse_weight_is_seen():
    """Can fail: one stored nonzero weight changed by one changes the run."""
    m = CH.iterate_rnn(8)
    toks = _tokens(m, np.random.default_rng(2), 40)
    before = _feed(m, toks, True)
    m.rnn_sparse.Bv[0] += 1
    assert _feed(m, toks, True) != before


def test_sessions_of_an_attention_free_model_match_the_dense_path():
    """Session.feed / feed_one use the sparse form; the same tokens through the dense
    kernel (the form hidden) give the same residual, state, statistics and readout."""
    m = by_name("tm-addition-rag").build(3).model
    toks = _tokens(m, np.random.default_rng(3), 50)
    runs = []
    for hide in (False, True):
        mm = m.with_format(m.fmt)
        if hide:
            mm.rnn_sparse = None
        s = Session(mm)
        s.feed(toks[:20])
        for t in toks[20:]:
            s.feed_one(t)
        runs.append((s.x.tolist(), s.state.tolist(), s.err.tolist(), s.next_token(),
                     mm.resources.used_int_bits, mm.resources.tokens_processed))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("mode", ["raise", "saturate"])
def test_rows_product_equals_matvec(mode):
    """batch._rows_mv_fast (and its checked fallback) against kernels.matvec on
    random sparse stacks, formats and operands: outputs and err."""
    rng = np.random.default_rng(7)
    paths = set()
    for _ in range(300):
        I, f = int(rng.integers(2, 14)), int(rng.integers(0, 10))
        fmt = FixedFormat(I, f, mode)
        L, rows, cols = 2, int(rng.integers(1, 30)), int(rng.choice([3, 8, 40]))
        top = fmt.max_raw
        M = np.where(rng.random((L, rows, cols)) < 0.15, rng.integers(-top, top + 1, (L, rows, cols)), 0)
        M = M.astype(np.int64)
        v = np.where(rng.random(cols) < 0.4, rng.integers(-top, top + 1, cols), 0).astype(np.int64)
        Mp, Mi, Mv = BT._rows(M)
        l = int(rng.integers(0, L))
        for psafe in (True, False):
            e1, e2 = new_err(), new_err()
            o1, o2 = np.zeros(rows, np.int64), np.zeros(rows, np.int64)
            BT._rows_mv_fast(Mp, Mi, Mv, l, v, *fmt.args, e1, o1, psafe)
            K.matvec(M[l], v, *fmt.args, e2, o2)
            assert e1.tolist() == e2.tolist()
            if e2[E_CODE] == 0:
                assert o1.tolist() == o2.tolist()
            paths.add((psafe, bool(e2[E_CODE] or e2[E_SAT])))
    assert {(True, False), (True, True), (False, True)} <= paths


# ---------------------------------------------------------------------------- NUMBA_DISABLE_JIT=1
def fingerprint(seed: int) -> dict:
    """Sparse and dense feeds of two small models at their format and at an integer
    part too small (raise and saturate)."""
    out = {}
    for i, model in enumerate((by_name("ar-rag").build(3).model, CH.iterate_rnn(4))):
        rng = np.random.default_rng(seed + i)
        toks = _tokens(model, rng, 80)
        runs = []
        # the T4.1 RNN's weights fit 6 integer bits, its counters pass 63 within 80 tokens
        small = [FixedFormat(6, 0), FixedFormat(6, 0, "saturate")] if model.name.startswith("iterate") else []
        for fmt in _formats(model)[:3] + small:
            try:
                m = model.with_format(fmt)
            except (ValueError, FixedPointOverflow):
                continue
            runs += [_feed(m, toks, True), _feed(m, toks, False)]
        out[model.name] = runs
    return out


def test_pure_python_path_is_identical_to_the_jit():
    from _nojit import fingerprint_without_jit
    seed = 4242
    jit = fingerprint(seed)
    assert json.loads(json.dumps(jit)) == fingerprint_without_jit(__file__, seed)
    for runs in jit.values():
        assert all(runs[k] == runs[k + 1] for k in range(0, len(runs), 2))     # sparse == dense
    assert any(r[3][E_CODE] for runs in jit.values() for r in runs)            # an overflow ran
    assert any(r[3][E_SAT] for runs in jit.values() for r in runs)             # a clamp ran
    assert all(r[3][E_MAXABS] > 0 for runs in jit.values() for r in runs)


if __name__ == "__main__":
    from _nojit import main
    main(fingerprint)
