"""The in-context RAG oracle (constructions/models/rag.py): rendering, escaping, span
exclusion, NO rewriting (docs/theory.md §2: a query is rendered token by token, no group
is ever added), malformed queries and timeouts; and, separately, the paper dialect
(constructions/models/rag_dialect.py), which only serves the paper's retrieval format.

Every property test compares the oracle with a plain-Python search over token
lists for the same family of patterns (never the regex engine).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rnngap.checks.io.formats import graph_tokens
from rnngap.checks.tasks import istree
from rnngap.constructions.models.rag import (
    ALT, ANY, ANY_NUMBER, BRANCH_RESET, CAPTURE, CLOSE, LAZY_ANY, LOOKAHEAD, NEG_LOOKAHEAD, NONCAP, STAR,
    RagOracle, parse_text, render_query, render_text, render_token, search,
)
from rnngap.constructions.models.rag_dialect import PaperDialectOracle, expand_paper_query
from rnngap.constructions.machine.vocab import (
    BOS, DASH, ENDSEARCH, EOS, FAILED, META_NAMES, META_TOKENS, QUERY, STARTSEARCH, TILDE, Vocab, number_token,
)

num = number_token
# values whose decimal forms contain one another: a number must never match inside another
TRICKY = [1, 3, 11, 13, 31, 33, 113, 131, 0, 10]
plain_specials = [BOS, EOS, DASH, TILDE, QUERY]
token_st = st.one_of(st.sampled_from([num(v) for v in TRICKY]), st.sampled_from(plain_specials))


# ---------------------------------------------------------------- plain-Python references
def first_occurrence(ctx: list[int], q: list[int]) -> int | None:
    """Leftmost i with ctx[i:i+len(q)] == q."""
    k = len(q)
    for i in range(len(ctx) - k + 1):
        if ctx[i:i + k] == q:
            return i
    return None


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
    r = search(ctx, [num(3), CAPTURE, ANY, CLOSE])
    assert (r.status, r.tokens, r.at) == ("match", [num(7)], 5)
    r = search(ctx, [num(3)])                    # no group: the whole match, the token 3 itself
    assert (r.status, r.tokens, r.at) == ("match", [num(3)], 4)
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
    """A meta-free query q is searched literally: the whole leftmost occurrence of q
    comes back (no group is added); ``q [(] [.] [)]`` returns the token after it."""
    if ctx and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(ctx) - 1))
        q = ctx[i:i + data.draw(st.integers(1, 3))]
    else:
        q = data.draw(st.lists(token_st, min_size=1, max_size=3))
    r = search(ctx, q)
    at = first_occurrence(ctx, q)
    assert r.tokens == (list(q) if at is not None else [FAILED]) and r.at == at
    assert r.status == ("match" if at is not None else "no match")
    assert r.pattern == "".join("(?:" + __import__("regex").escape(render_token(t)) + ")" for t in q)
    r = search(ctx, list(q) + [CAPTURE, ANY, CLOSE])
    want, at = first_after(ctx, q)
    assert r.tokens == want and r.at == at


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
    r = search(ctx, q + [CAPTURE, ANY, CLOSE], excluded=spans)
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


# ---------------------------------------------------------------- no rewriting (docs/theory.md §2)
def test_plain_oracle_never_rewrites_an_edge_query():
    """``u - c`` without meta-tokens is the literal text u - c: it does NOT match the
    reversed edge c - u (the old graph dialect did), and no group is added: a match
    returns the query's own tokens."""
    ctx = graph_tokens([(2, 0), (3, 2), (1, 0)])          # [BOS] 2 - 0 3 - 2 1 - 0 [EOS]
    for q in ([num(0), DASH, num(2)], [num(0), DASH], [num(2), DASH, num(3)]):
        r = search(ctx, q)
        assert (r.status, r.tokens) == ("no match", [FAILED]), q
    r = search(ctx, [num(3), DASH, num(2)])
    assert (r.status, r.tokens, r.at) == ("match", [num(3), DASH, num(2)], 4)
    r = search(ctx, [num(2), DASH])
    assert r.tokens == [num(2), DASH]                        # the match, not the neighbour 0
    # through the incremental oracle too
    o = RagOracle()
    full = list(ctx)
    o(full, full[-1])
    for t in (STARTSEARCH, num(0), DASH, num(2)):
        full.append(t)
        assert o(full, t) is None
    full.append(ENDSEARCH)
    assert o(full, ENDSEARCH) == [FAILED]
    assert o.log[-1].pattern == render_query([num(0), DASH, num(2)])


@settings(max_examples=200, deadline=None)
@given(st.lists(token_st, min_size=0, max_size=20),
       st.lists(st.one_of(st.sampled_from(sorted(META_NAMES)), token_st), min_size=0, max_size=10))
def test_pattern_is_the_token_by_token_rendering(ctx, query):
    """Whatever the query, the pattern searched is the concatenation of its tokens'
    renderings (escaped literal units, META_SYNTAX for meta-tokens) and nothing else."""
    from rnngap.constructions.models.rag import META_SYNTAX
    import regex
    r = search(ctx, query, timeout=0.5)
    want = "".join(META_SYNTAX[t] if t in META_SYNTAX else "(?:" + regex.escape(render_token(t)) + ")"
                   for t in query)
    assert r.status == "malformed" or r.pattern == want


def test_rag_module_has_no_query_rewriting():
    """The oracle module of the theorem rows holds no dialect and no group insertion."""
    import ast
    from pathlib import Path
    import rnngap.constructions.models.rag as R
    tree = ast.parse(Path(R.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name)
    for word in ("expand", "graph", "dialect", "has_capture", "rewrite"):
        assert not [n for n in names if word in n.lower()], word
    assert not {"DASH", "TILDE"} & names                    # no task token is special to the oracle


# ---------------------------------------------------------------- the paper dialect (format reproduction only)
@settings(max_examples=150, deadline=None)
@given(istree.graphs(n_min=1, n_max=9), st.randoms(use_true_random=False))
def test_paper_dialect_equals_neighbour_lists(graph, rnd):
    """Through the dialect: 'u -' is u's first neighbour in edge-list order, 'u - c' the
    one after c; both orientations count; 'w ~' gives the token after the record w ~ u."""
    n, edges = graph
    edges = list(edges)
    rnd.shuffle(edges)
    adj = istree.neighbour_lists(n, edges)
    tail = [num(0)]
    for w in range(1, n):
        tail += [num(w), TILDE, num(w - 1)]
    ctx = graph_tokens(edges) + tail

    def ask(q):
        return search(ctx, expand_paper_query(q))

    for u in range(n):
        assert ask([num(u), DASH]).tokens == ([num(adj[u][0])] if adj[u] else [FAILED])
        for k, c in enumerate(adj[u]):
            r = ask([num(u), DASH, num(c)])
            assert r.tokens == ([num(adj[u][k + 1])] if k + 1 < len(adj[u]) else [FAILED])
        assert ask([num(u), TILDE]).tokens == ([num(u - 1)] if u >= 1 else [FAILED])


def test_paper_dialect_expansion_and_oracle():
    q = expand_paper_query([num(4), DASH, num(2)])
    assert q[:9] == [NONCAP, num(4), DASH, num(2), ALT, num(2), DASH, num(4), CLOSE] and q[9] == LAZY_ANY
    assert expand_paper_query([num(4), TILDE]) == [num(4), TILDE, CAPTURE, ANY, CLOSE]
    assert expand_paper_query([num(4), DASH, ANY]) == [num(4), DASH, ANY]     # meta-tokens: unchanged
    ctx = graph_tokens([(2, 0), (1, 0)])
    assert search(ctx, [num(0), DASH]).tokens == [FAILED]                      # plain: literal
    o = PaperDialectOracle()
    full = list(ctx)
    o(full, full[-1])
    for t in (STARTSEARCH, num(0), DASH):
        full.append(t)
        o(full, t)
    full.append(ENDSEARCH)
    assert o(full, ENDSEARCH) == [num(2)]                                      # dialect: 0's first neighbour
    assert o.log[-1].query == [num(0), DASH]


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
    # a second [STARTSEARCH] restarts the query: 'SS 7 SS 5 [(] [.] [)] ES' searches '5 [(] [.] [)]'
    for t in (STARTSEARCH, num(7), STARTSEARCH, num(5), CAPTURE, ANY, CLOSE):
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
    with pytest.raises(TypeError):
        RagOracle(dialect="graph")           # the plain oracle has no dialects
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
    """Context [BOS] 5 7 | SS 5 [(] [.] [)] ES 7 | 9 | SS 7 [(] [.] [)] ES: the spans are cut
    out, so the kept text is [BOS] 5 7 9 and '7' is followed by 9 (in the raw context by SS)."""
    o = RagOracle()
    ctx = [BOS, num(5), num(7)]
    o(ctx, num(7))
    for t in (STARTSEARCH, num(5), CAPTURE, ANY, CLOSE):
        ctx.append(t)
        o(ctx, t)
    ctx.append(ENDSEARCH)
    ctx += o(ctx, ENDSEARCH)
    assert ctx[-1] == num(7)
    for t in (num(9), STARTSEARCH, num(7), CAPTURE, ANY, CLOSE):
        ctx.append(t)
        o(ctx, t)
    ctx.append(ENDSEARCH)
    assert o(ctx, ENDSEARCH) == [num(9)]
    assert o.text == render_text([BOS, num(5), num(7), num(9)])
