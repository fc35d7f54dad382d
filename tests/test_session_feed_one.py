"""Session.feed_one (the generation driver's per-token feed) against Session.feed
of the same token: the same residual, state, caches, error array, used bits and
tokens, on every catalogue model; the same refusals (a token outside the
vocabulary, a context past the declared positions, an overflow)."""
from __future__ import annotations

import numpy as np
import pytest

from rnngap.checks.catalog.records import by_name, names
from rnngap.constructions.machine.fixedpoint import PrecisionError
from rnngap.constructions.machine.formats import FixedFormat


def _snapshot(s):
    return (s.position, list(s.tokens), s.x.tolist(), s.state.tolist(), s.err.tolist(),
            s.Kc[..., :s.position].tolist(), s.Vc[:, :, :s.position].tolist(),
            s.model.resources.used_precision_bits, s.model.resources.tokens_processed)


@pytest.mark.parametrize("name", names())
def test_feed_one_equals_feed(name):
    entry = by_name(name)
    rng = np.random.default_rng(7)
    toks = entry.example(4, rng)
    m1, m2 = entry.build(4).model, entry.build(4).model
    s1, s2 = m1.session(capacity=2), m2.session(capacity=2)     # both grow their caches on the way
    for t in toks:
        s1.feed([t])
        s2.feed_one(t)
        assert _snapshot(s1) == _snapshot(s2)
        assert s1.next_token() == s2.next_token()


def test_feed_one_refuses_like_feed():
    entry = by_name("index-transformer")
    m = entry.build(4).model
    s = m.session()
    with pytest.raises(ValueError) as e1:
        s.feed([m.vocab.size + 5])
    with pytest.raises(ValueError) as e2:
        s.feed_one(m.vocab.size + 5)
    assert str(e1.value) == str(e2.value) and s.position == 0
    toks = entry.example(4, np.random.default_rng(0))
    s.feed(toks)
    if m.max_positions is not None:
        s2 = m.session()
        s2.feed(toks)
        while s2.position < m.max_positions:
            s2.feed_one(toks[-1])
        with pytest.raises(ValueError, match="exceeds"):
            s2.feed_one(toks[-1])


def test_feed_one_overflow_raises_like_feed():
    """At a format one integer bit short the same token raises the same error."""
    entry = by_name("counting-transformer")
    toks = entry.example(4, np.random.default_rng(3))
    m = entry.build(4).model
    s = m.session()
    s.feed(toks)
    small = m.with_format(FixedFormat(m.resources.used_int_bits - 1, m.fmt.frac_bits))
    msgs = []
    for use_one in (False, True):
        s = small.session()
        try:
            for t in toks:
                s.feed_one(t) if use_one else s.feed([t])
            msgs.append(None)
        except PrecisionError as e:
            msgs.append((str(e), s.position, s.err.tolist()))
    assert msgs[0] is not None and msgs[0] == msgs[1]
