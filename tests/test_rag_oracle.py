"""The in-context RAG oracle (constructions/rag.py): rendering, escaping, span
exclusion, the graph dialect, malformed queries and timeouts.

Every property test compares the oracle with a plain-Python search over token
lists for the same family of patterns (never the regex engine).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from checks.formats import graph_tokens
from checks.tasks import istree
from constructions.rag import (
    ALT, ANY, ANY_NUMBER, BRANCH_RESET, CAPTURE, CLOSE, LAZY_ANY, LOOKAHEAD, NEG_LOOKAHEAD, NONCAP, STAR,
    RagOracle, expand_graph_query, parse_text, render_query, render_text, search,
)
from constructions.vocab import (
    BOS, DASH, ENDSEARCH, EOS, FAILED, META_NAMES, META_TOKENS, QUERY, STARTSEARCH, TILDE, Vocab, number_token,
)

num = number_token
# values whose decimal forms contain one another: a number must never match inside another
TRICKY = [1, 3, 11, 13, 31, 33, 113, 131, 0, 10]
plain_specials = [BOS, EOS, DASH, TILDE, QUERY]
token_st = st.one_of(st.sampled_from([num(v) for v in TRICKY]), st.sampled_from(plain_specials))


# ---------------------------------------------------------------- plain-Python references
def first_after(ctx: list[int], q: list[int]) -> tuple[list[int], int | None]:
    """Leftmost i with ctx[i:i+k] == q and a token after it: ([that token], its index)."""
    k = len(q)
    for i in range(len(ctx) - k):
        if ctx[i:i + k] == q:
            return [ctx[i + k]], i + k
    return [FAILED], None


def kept_positions(length: int, spans: list[tuple[int, int]]) -> list[int]:
    out = []
    for p in range(length):
        if not any(a <= p < b for a, b in spans):
            out.append(p)
    return out


# ---------------------------------------------------------------- rendering
@given(st.lists(st.one_of(st.integers(0, 31), st.integers(32, 5000)), max_size=40))
def test_render_roundtrip(tokens):
    assert parse_text(render_text(tokens)) == tokens


def test_render_units_and_escaping():
    assert render_text([BOS, num(3), DASH, num(13)]) == "<s0><n3><s7><n13>"
    # a literal is one whole unit: the number 3 is not found inside 13, 31 or 33
    ctx = [BOS, num(13), num(31), num(33), num(3), num(7)]
    r = search(ctx, [num(3)])
    assert (r.status, r.tokens, r.at) == ("match", [num(7)], 5)
    with pytest.raises(ValueError):
        parse_text("<n3>junk")


def test_every_meta_token_renders():
    assert set(META_NAMES) == set(META_TOKENS.values())
    # each meta-token alone or in a minimal context compiles into syntax, never a literal
    assert render_query([CAPTURE, ANY, CLOSE]) == "((?:<[ns]\\d+>))"
    assert render_query([CAPTURE, ANY_NUMBER, CLOSE]) == "((?:<n\\d+>))"
    assert render_query([LAZY_ANY, CAPTURE, ANY, CLOSE]).startswith("(?:<[ns]\\d+>)*?")
    for q in ([NONCAP, ANY, ALT, ANY_NUMBER, CLOSE, STAR], [LOOKAHEAD, ANY, CLOSE], [NEG_LOOKAHEAD, ANY, CLOSE],
              [BRANCH_RESET, CAPTURE, ANY, CLOSE, ALT, CAPTURE, ANY_NUMBER, CLOSE, CLOSE]):
        assert render_query(q)


# ---------------------------------------------------------------- pattern families vs plain Python
@settings(max_examples=300, deadline=None)
@given(st.lists(token_st, min_size=0, max_size=30), st.data())
def test_literal_query_equals_python(ctx, data):
    """A meta-free query q returns the token after the leftmost occurrence of q."""
    if ctx and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(ctx) - 1))
        q = ctx[i:i + data.draw(st.integers(1, 3))]
    else:
        q = data.draw(st.lists(token_st, min_size=1, max_size=3))
    r = search(ctx, q)
    want, at = first_after(ctx, q)
    assert r.tokens == want and r.at == at
    assert r.status == ("match" if at is not None else "no match")


@settings(max_examples=300, deadline=None)
@given(st.lists(token_st, min_size=1, max_size=30), st.data())
def test_exclusion_equals_python(ctx, data):
    """Excluded spans are cut out and the rest is concatenated: the search equals the
    plain search over the kept tokens (positions mapped back)."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ctx)), max_size=6)))
    spans = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts) - 1, 2)]
    keep = kept_positions(len(ctx), spans)
    kept = [ctx[p] for p in keep]
    q = data.draw(st.lists(token_st, min_size=1, max_size=2))
    r = search(ctx, q, excluded=spans)
    want, at = first_after(kept, q)
    assert r.tokens == want
    assert r.at == (None if at is None else keep[at])


@settings(max_examples=200, deadline=None)
@given(st.lists(token_st, min_size=0, max_size=25), st.integers(0, 12))
def test_index_family_equals_python(ctx, m):
    """[BOS] [.]^m [(] [.] [)]: the token m+1 places after the first [BOS] that has one."""
    ctx = [BOS] + ctx
    q = [BOS] + [ANY] * m + [CAPTURE, ANY, CLOSE]
    want = [FAILED]
    for b, t in enumerate(ctx):
        if t == BOS and b + m + 1 < len(ctx):
            want = [ctx[b + m + 1]]
            break
    assert search(ctx, q).tokens == want


def counting_query(q: int, t: int) -> list[int]:
    block = [NONCAP, NEG_LOOKAHEAD, q, CLOSE, ANY_NUMBER, CLOSE, STAR]
    return [BOS] + (block + [q]) * t + block + [CAPTURE, q, CLOSE]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2, 13]), max_size=25), st.sampled_from([0, 1, 2, 13]), st.integers(0, 6))
def test_counting_family_equals_python(xs, qv, t):
    """The Counting construction's query finds q iff q occurs more than t times in x
    (a [#] run cannot cross [QUERY], whose q is never counted)."""
    ctx = [BOS] + [num(v) for v in xs] + [QUERY, num(qv), num(t)]
    r = search(ctx, counting_query(num(qv), t))
    assert r.tokens == ([num(qv)] if xs.count(qv) > t else [FAILED])


@settings(max_examples=150, deadline=None)
@given(istree.graphs(n_min=1, n_max=9), st.randoms(use_true_random=False))
def test_graph_dialect_equals_neighbour_lists(graph, rnd):
    """'u -' is u's first neighbour in edge-list order, 'u - c' the one after c; both
    orientations of an input edge count; records 'w ~ u' after the input are found by
    'w ~' and never taken for edges."""
    n, edges = graph
    edges = list(edges)
    rnd.shuffle(edges)
    adj = istree.neighbour_lists(n, edges)
    tail = [num(0)]
    for w in range(1, n):
        tail += [num(w), TILDE, num(w - 1)]
    ctx = graph_tokens(edges) + tail
    for u in range(n):
        r = search(ctx, [num(u), DASH], dialect="graph")
        assert r.tokens == ([num(adj[u][0])] if adj[u] else [FAILED])
        for k, c in enumerate(adj[u]):
            r = search(ctx, [num(u), DASH, num(c)], dialect="graph")
            assert r.tokens == ([num(adj[u][k + 1])] if k + 1 < len(adj[u]) else [FAILED])
        r = search(ctx, [num(u), TILDE], dialect="graph")
        assert r.tokens == ([num(u - 1)] if u >= 1 else [FAILED])


def test_graph_dialect_expansion_is_meta_tokens():
    q = expand_graph_query([num(4), DASH, num(2)])
    assert q[:9] == [NONCAP, num(4), DASH, num(2), ALT, num(2), DASH, num(4), CLOSE] and q[9] == LAZY_ANY
    assert expand_graph_query([num(4), TILDE]) == [num(4), TILDE]
    assert expand_graph_query([num(4), DASH, ANY]) == [num(4), DASH, ANY]
    # the regex dialect leaves '-' literal: 'u -' only matches edges written u - v
    ctx = graph_tokens([(2, 0), (1, 0)])
    assert search(ctx, [num(0), DASH]).tokens == [FAILED]
    assert search(ctx, [num(0), DASH], dialect="graph").tokens == [num(2)]


# ---------------------------------------------------------------- failures are the model's
@pytest.mark.parametrize("query, what", [
    ([STAR], "nothing to repeat"),
    ([CAPTURE, ANY], "missing )"),
    ([ANY, CLOSE], "unbalanced"),
    ([ANY, STAR, STAR], "multiple repeat"),
    ([LAZY_ANY, STAR], "multiple repeat"),
    ([num(1), STARTSEARCH, num(2)], "search token inside"),
])
def test_malformed_query_is_failed_with_reason(query, what):
    r = search([BOS, num(1), num(2)], query)
    assert r.status == "malformed" and r.tokens == [FAILED] and r.reason


def test_endsearch_without_startsearch_and_restart():
    o = RagOracle()
    ctx = [BOS, num(5), num(7), num(5), num(9)]
    assert o(ctx + [ENDSEARCH], ENDSEARCH) == [FAILED]
    assert o.log[-1].status == "malformed" and "without" in o.log[-1].reason
    ctx = ctx + [ENDSEARCH, FAILED]
    # a second [STARTSEARCH] restarts the query: 'SS 7 SS 5 ES' searches '5'
    for t in (STARTSEARCH, num(7), STARTSEARCH, num(5)):
        ctx.append(t)
        assert o(ctx, t) is None
    ctx.append(ENDSEARCH)
    assert o(ctx, ENDSEARCH) == [num(7)]
    assert [r.status for r in o.failures()] == ["malformed"]


def test_oracle_must_see_a_growing_context():
    o = RagOracle()
    o([BOS, num(1)], num(1))
    with pytest.raises(ValueError, match="grow"):
        o([BOS, num(1)], num(1))
    with pytest.raises(ValueError):
        RagOracle(dialect="sql")
    with pytest.raises(ValueError):
        RagOracle(timeout=0)


def test_empty_capture_appends_nothing():
    r = search([BOS, num(1)], [CAPTURE, CLOSE])
    assert r.status == "match" and r.tokens == []


def test_timeout_is_failed_with_reason():
    ctx = [BOS] + [num(1)] * 80
    q = [num(1), LAZY_ANY] * 20 + [EOS]          # ~C(80, 20) backtracking paths, no match
    r = search(ctx, q, timeout=0.05)
    assert r.status == "timeout" and r.tokens == [FAILED] and "exceeded" in r.reason


@settings(max_examples=300, deadline=None)
@given(st.lists(token_st, min_size=1, max_size=20),
       st.lists(st.one_of(st.sampled_from(sorted(META_NAMES)), token_st), min_size=0, max_size=10))
def test_junk_queries_never_crash(ctx, query):
    """Any token soup is answered: a contiguous run of the context, or [FAILED] with a status."""
    r = search(ctx, query, timeout=0.5)
    assert r.status in ("match", "no match", "malformed", "timeout")
    if r.status == "match":
        if r.tokens:
            assert ctx[r.at:r.at + len(r.tokens)] == r.tokens
    else:
        assert r.tokens == [FAILED]


# ---------------------------------------------------------------- the stateful hook == stateless search
@settings(max_examples=150, deadline=None)
@given(st.lists(token_st, min_size=1, max_size=15),
       st.lists(st.one_of(st.lists(token_st, min_size=1, max_size=3).map(lambda q: ("search", q)),
                          token_st.map(lambda t: ("plain", t))), max_size=8))
def test_incremental_oracle_equals_stateless_search(prompt, script):
    """Driving RagOracle token by token (as generate does) gives the same answers as
    search() with the spans [STARTSEARCH .. last retrieved token] excluded explicitly."""
    o = RagOracle()
    ctx = [BOS] + prompt
    spans: list[tuple[int, int]] = []
    for kind, item in script:
        if kind == "plain":
            ctx.append(item)
            assert o(ctx, item) is None
            continue
        ss = len(ctx)
        for t in [STARTSEARCH] + item:
            ctx.append(t)
            assert o(ctx, t) is None
        ctx.append(ENDSEARCH)
        got = o(ctx, ENDSEARCH)
        want = search(ctx, item, excluded=spans + [(ss, len(ctx))])
        assert got == want.tokens
        ctx += got
        spans.append((ss, len(ctx)))
    ctx.append(EOS)                       # one more call, so the oracle has seen everything
    assert o(ctx, EOS) is None
    assert o.text == render_text([ctx[p] for p in kept_positions(len(ctx), spans)])


def test_previous_search_spans_are_not_found():
    """Context [BOS] 5 7 | SS 5 ES 7 | 9 | SS 7 ES: the spans are cut out, so the kept
    text is [BOS] 5 7 9 and '7' is followed by 9 (in the raw context by SS)."""
    o = RagOracle()
    ctx = [BOS, num(5), num(7)]
    o(ctx, num(7))
    for t in (STARTSEARCH, num(5)):
        ctx.append(t)
        o(ctx, t)
    ctx.append(ENDSEARCH)
    ctx += o(ctx, ENDSEARCH)
    assert ctx[-1] == num(7)
    for t in (num(9), STARTSEARCH, num(7)):
        ctx.append(t)
        o(ctx, t)
    ctx.append(ENDSEARCH)
    assert o(ctx, ENDSEARCH) == [num(9)]
    assert o.text == render_text([BOS, num(5), num(7), num(9)])
