"""Implicit vocabularies (constructions/build/model.py ``Model.implicit_vocab``): a
vocabulary past ``MAX_CANDIDATES`` tokens has no candidate list, and the model reads
out with the nearest-code readout alone.

The exactness argument (the nearest-code readout gives the generic readout's token
and largest |raw|, and errs exactly when it does) is checked by running the same
model both ways: the limit is lowered (monkeypatched) so that a small T4.1 RNN
becomes implicit, and every instance of ITER(n) must give the same CoT, answer,
used bits and errors as the listed model. Then the real thing: the T4.1 RNN past
n = 4,094 (vocabulary 2^24 + ...) on int64 and past the int64 format (two limbs).
"""
from __future__ import annotations

import numpy as np
import pytest

from rnngap.checks.tasks.iterate import orbit, reference
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.build import model as M
from rnngap.constructions.build import spec as MS
from rnngap.constructions.machine.fixedpoint import E_CODE, PrecisionError
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import FALSE, NUMBER_BASE, TRUE


def _implicit(monkeypatch, build):
    """``build()`` with the candidate limit just below its vocabulary."""
    size = build().vocab.size
    with monkeypatch.context() as mp:
        mp.setattr(M, "MAX_CANDIDATES", size - 1)
        return build()


def _runs(model, n):
    """(CoT, answer, the reference's answer) on every (a, t) of ITER(n)."""
    out = []
    for a in range(2 * n):
        for t in range(n * n + 1):
            p = CH.prompt(n, a, t, [(a * 7 + t + i) % (2 * n) for i in range(n)])
            g = generate(model, p, answer_tokens=[TRUE, FALSE], max_cot=CH.steps(n))
            out.append((g.cot, g.answer, reference(p)))
    return out


def _pair(monkeypatch, n, storage):
    """The T4.1 RNN for n at its declared integer bits in ``storage``: listed, and
    implicit (the candidate limit lowered below its vocabulary)."""
    fmt = FixedFormat(CH.DECLARED.format(n).int_bits, 0, storage=storage)
    return CH.iterate_rnn(n, fmt=fmt), _implicit(monkeypatch, lambda: CH.iterate_rnn(n, fmt=fmt))


@pytest.mark.parametrize("storage", ["int64", "two-limb"])
def test_implicit_equals_listed_on_every_instance(monkeypatch, storage):
    n = 4
    listed, implicit = _pair(monkeypatch, n, storage)
    assert not listed.implicit_vocab and implicit.implicit_vocab
    assert implicit.candidates.tolist() == sorted(M.SPECIAL_NAMES)     # the specials only
    assert implicit.nearest_code_dim == listed.nearest_code_dim >= 0
    a, b = _runs(listed, n), _runs(implicit, n)
    assert a == b
    # the answers are the reference's, and both occur (not a constant)
    assert all(ans == want for _, ans, want in a) and {ans for _, ans, _ in a} == {TRUE, FALSE}
    assert listed.resources.used_precision_bits == implicit.resources.used_precision_bits > 0


@pytest.mark.parametrize("storage", ["int64", "two-limb"])
def test_implicit_batches_equal_listed_and_refuse_the_table(monkeypatch, storage):
    n = 5
    listed, implicit = _pair(monkeypatch, n, storage)
    rng = np.random.default_rng(0)
    toks = np.array([CH.prompt(n, int(rng.integers(0, 2 * n)), int(rng.integers(0, n * n + 1)),
                               [int(v) for v in rng.integers(0, 2 * n, size=n)]) for _ in range(40)])
    want = listed.predict_batch(toks, all_positions=True)
    got = implicit.predict_batch(toks, all_positions=True)           # the default: nearest code
    assert (got == want).all()
    assert (implicit.predict_batch(toks, all_positions=True, readout="nearest_code") == want).all()
    assert listed.resources.used_precision_bits == implicit.resources.used_precision_bits
    with pytest.raises(ValueError, match="no candidate list"):
        implicit.predict_batch(toks, readout="table")
    # token ids: a meta-token id, one past the vocabulary, a negative id; named with their position
    for bad in (10, implicit.vocab.size, -1):
        row = toks[:2].copy()
        row[1, 3] = bad
        with pytest.raises(ValueError, match=rf"batch\[1\] token id {bad} at position 3"):
            implicit.predict_batch(row)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        implicit.session().feed([0, 10])
    if storage == "two-limb":       # the RNN protocol view runs on int64 storage only
        return
    # the RNN protocol view reads out the same way
    h = implicit.rnn()
    st = h.initial_state()
    for tok in toks[0]:
        st = h.step(st, int(tok))
    assert h.output(st) == want[0, -1]


def test_implicit_refusals(monkeypatch):
    from rnngap.constructions.models.targets import random_target
    n = 4
    sat = FixedFormat(CH.DECLARED.format(n).int_bits, 0, mode="saturate")
    with pytest.raises(ValueError, match="raise mode only"):
        _implicit(monkeypatch, lambda: CH.iterate_rnn(n, fmt=sat))
    # a readout that is not the nearest-code form cannot go without its list
    # a layer that writes x[one]: the vertex is no longer v (the readout form needs x[one] = 1)
    import copy
    spec = copy.deepcopy(CH.iterate_rnn(n).spec)
    spec.rnn_layers[-1].b2[spec.labels.index("one")] = 1
    assert M.Model(spec, CH.DECLARED.format(n)).nearest_code_dim == -1
    with monkeypatch.context() as mp:
        mp.setattr(M, "MAX_CANDIDATES", spec.vocab.size - 1)
        with pytest.raises(ValueError, match="runs only with the nearest-code readout"):
            M.Model(spec, CH.DECLARED.format(n))
    m = random_target(2, 4, seed=0).model
    assert m.nearest_code_dim < 0
    monkeypatch.setattr(M, "MAX_CANDIDATES", m.vocab.size - 1)
    with pytest.raises(ValueError, match=f"at most {m.vocab.size - 1:,}; a larger vocabulary runs only"):
        M.Model(m.spec, m.fmt)


def test_errors_agree_at_every_integer_width(monkeypatch):
    """From the declared integer bits down to 2: the listed and the implicit model
    both read the same token, or both raise (the readout's logits are largest at
    the code range's ends, which the nearest-code readout evaluates). The frontier
    is inside the range: some widths raise at the readout, some read."""
    n = 6
    spec = CH.iterate_rnn(n).spec
    p = CH.prompt(n, 3, 5, [1] * n) + [NUMBER_BASE + orbit(n, 3, 5)[1]]
    kinds = set()
    for I in range(2, CH.int_bits_needed(n) + 1):
        outcome = []
        for implicit in (False, True):
            monkeypatch.setattr(M, "MAX_CANDIDATES", spec.vocab.size - 1 if implicit else 1 << 24)
            try:
                m = M.Model(spec, FixedFormat(I, 0))
            except PrecisionError:
                outcome.append("weights off the format")
                continue
            s = m.session()
            try:
                s.feed(p)
            except PrecisionError as e:
                outcome.append(("feed", type(e).__name__))
                continue
            try:
                outcome.append(("read", s.next_token()))
            except PrecisionError:
                assert int(s.err[E_CODE]) != 0
                outcome.append(("readout raised",))     # the first error's kind may differ
        assert outcome[0] == outcome[1], (I, outcome)
        kinds.add(outcome[0][0] if isinstance(outcome[0], tuple) else outcome[0])
    assert {"read", "readout raised"} <= kinds, kinds


@pytest.mark.parametrize("n", [4095, 1 << 16])
def test_t41_past_the_old_ceilings(n):
    """The T4.1 RNN past the listed vocabulary (n = 4,095: 2^24 + 31 tokens, int64)
    and past the int64 format (2^16: two limbs), CoT compared with the orbit."""
    m = CH.iterate_rnn(n)
    assert m.implicit_vocab and m.vocab.size > MS.MAX_CANDIDATES
    assert m.fmt.wide == (n > 23169)
    rng = np.random.default_rng(n)
    for t, want in ((0, TRUE), (1, FALSE), (37, TRUE), (600, FALSE)):
        while True:              # a drawn instance whose reference answer is ``want``
            a = int(rng.integers(0, 2 * n))
            p = CH.prompt(n, a, t, [int(v) for v in rng.integers(0, 2 * n, size=n)])
            if reference(p) == want:
                break
        g = generate(m, p, answer_tokens=[TRUE, FALSE], max_cot=t + 1)
        assert g.cot == [NUMBER_BASE + v for v in orbit(n, a, t)[1:]]
        assert g.answer == want
    assert m.resources.used_precision_bits <= CH.DECLARED.format(n).total_bits
