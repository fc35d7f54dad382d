"""Model.fresh: the statistics of a new build, the weights shared and untouched."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names


def _stats(m):
    return m.err.tolist(), dataclasses.asdict(m.resources)


@pytest.mark.parametrize("name", names())
def test_fresh_equals_a_new_build(name):
    entry = by_name(name)
    toks = entry.example(4, np.random.default_rng(11))
    used = entry.build(4).model
    s = used.session()
    s.feed(toks)
    s.next_token()
    before = _stats(used)
    new = entry.build(4).model
    f = used.fresh()
    assert _stats(f) == _stats(new)
    assert _stats(used) == before                                # the original keeps its statistics
    # a run on the fresh copy and on a new build: the same statistics; the original is untouched
    for m in (f, new):
        s = m.session()
        s.feed(toks)
        s.next_token()
    assert _stats(f) == _stats(new) and _stats(used) == before
    assert f.weights is used.weights                             # shared, and never written by a run
    w_before = [a.copy() for a in used.weights.net]
    s = f.session()
    s.feed(toks)
    assert all(np.array_equal(a, b) for a, b in zip(used.weights.net, w_before))


def test_fresh_statistics_move_on_a_run():
    """The check can fail: a run does change the statistics of the copy it ran on."""
    entry = by_name("counting-transformer")
    m = entry.build(8).model.fresh()
    before = _stats(m)
    s = m.session()
    s.feed(entry.example(8, np.random.default_rng(1)))
    assert _stats(m) != before


def _saturating(entry, n, seed):
    """A model of ``entry`` two integer bits below what its run used, in saturate mode."""
    from rnngap.constructions.machine.formats import FixedFormat
    m0 = entry.build(n).model
    toks = entry.example(n, np.random.default_rng(seed))
    s = m0.session()
    s.feed(toks)
    s.next_token()
    fmt = FixedFormat(m0.resources.used_int_bits - 2, m0.fmt.frac_bits, "saturate")
    return m0.with_format(fmt), toks


@pytest.mark.parametrize("how", ("feed", "feed_one", "mixed"))
def test_session_saturations_counted_once(how):
    """The model's saturation count is the sum of the clampings of its runs: a
    session's error array is cumulative, and each clamping is added to the model
    once however the tokens are fed and however often next_token is asked (it was
    added again at every call before)."""
    entry = by_name("counting-transformer")
    m, toks = _saturating(entry, 8, 1)
    sessions = [m.session(), m.session()]
    for s in sessions:
        if how == "feed":
            s.feed(toks)
        else:
            for i, t in enumerate(toks):
                if how == "mixed" and i % 3 == 0:
                    s.feed([t, t][:1])
                else:
                    s.feed_one(t)
                s.next_token()
        s.next_token()
        s.next_token()
    from rnngap.constructions.machine.fixedpoint import E_SAT
    total = sum(int(s.err[E_SAT]) for s in sessions)
    assert total > 0
    assert m.resources.saturations == total
