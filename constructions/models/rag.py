"""The in-context RAG oracle (docs/theory.md §2, claim T5-RAG).

When the model emits ``[ENDSEARCH]``, the tokens since the last
``[STARTSEARCH]`` form a *query*. The oracle renders it into a regular expression
token by token (meta-tokens to syntax, every other token a literal unit), searches
the context rendered as one unit per token (earlier searches and the current
query cut out), and appends capture group 1 of the leftmost match (the whole
match if the query opens no group; ``[FAILED]`` if nothing matches, the query is
malformed or the search times out). It never rewrites a query. Plugged into
:func:`constructions.build.generate.generate` as its ``oracle`` hook, the retrieved
tokens count toward the CoT. The paper's shorthand dialect is in
:mod:`constructions.models.rag_dialect`, not here.

Example::

    >>> from rnngap.constructions.machine.vocab import STARTSEARCH as SS, ENDSEARCH as ES, BOS, number_token as num
    >>> from rnngap.constructions.machine.vocab import META_TOKENS as M
    >>> oracle = RagOracle()
    >>> ctx = [BOS, num(5), num(7), num(5), num(9)]
    >>> for t in (SS, num(5)):      # the model writes [STARTSEARCH] 5 [ENDSEARCH]
    ...     ctx.append(t); _ = oracle(ctx, t)
    >>> oracle(ctx + [ES], ES)      # no group: the whole leftmost match, the token 5
    [37]
    >>> oracle = RagOracle()
    >>> ctx = [BOS, num(5), num(7), num(5), num(9)]
    >>> for t in (SS, num(5), M["[(]"], M["[.]"], M["[)]"]):
    ...     ctx.append(t); _ = oracle(ctx, t)
    >>> oracle(ctx + [ES], ES)      # 5 [(] [.] [)]: the token after the first 5
    [39]

Details (rendering, excluded text, failures): docs/internals/build.md#rag
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Sequence

import regex

from rnngap.constructions.machine.vocab import (
    ENDSEARCH, FAILED, META_NAMES, META_TOKENS, NUMBER_BASE, SPECIAL_NAMES, STARTSEARCH,
)

DEFAULT_TIMEOUT = 2.0
"""Seconds a single search may take before it counts as failed."""

TOKEN_PATTERN = r"<[ns]\d+>"
NUMBER_PATTERN = r"<n\d+>"
_UNIT = regex.compile(r"<([ns])(\d+)>")

M = META_TOKENS
CAPTURE, NONCAP, BRANCH_RESET, CLOSE, ALT = M["[(]"], M["[(?:]"], M["[(?|]"], M["[)]"], M["[|]"]
ANY, ANY_NUMBER, LAZY_ANY, STAR, LOOKAHEAD, NEG_LOOKAHEAD = (
    M["[.]"], M["[#]"], M["[.*?]"], M["[*]"], M["[(?=]"], M["[(?!]"])

META_SYNTAX: dict[int, str] = {
    CAPTURE: "(",
    NONCAP: "(?:",
    BRANCH_RESET: "(?|",
    CLOSE: ")",
    ALT: "|",
    ANY: f"(?:{TOKEN_PATTERN})",
    ANY_NUMBER: f"(?:{NUMBER_PATTERN})",
    LAZY_ANY: f"(?:{TOKEN_PATTERN})*?",
    STAR: "*",
    LOOKAHEAD: "(?=",
    NEG_LOOKAHEAD: "(?!",
}
"""Regex syntax of each meta-token (docs/theory.md §2: groups, alternation, lazy
wildcard, lookahead; plus one-token wildcards and greedy repetition)."""

if set(META_SYNTAX) != set(META_NAMES):
    raise RuntimeError("every meta-token needs a rendering: META_SYNTAX and META_NAMES differ")


class MalformedQuery(ValueError):
    """A query the oracle cannot turn into a regular expression."""


def render_token(token: int) -> str:
    """The text unit of one token: ``<n{k}>`` for the number k, ``<s{id}>`` otherwise."""
    token = int(token)
    if token < 0:
        raise ValueError(f"token ids are >= 0, got {token}")
    return f"<n{token - NUMBER_BASE}>" if token >= NUMBER_BASE else f"<s{token}>"


def render_text(tokens: Sequence[int]) -> str:
    """The searched text of a token sequence (units concatenated).

    >>> render_text([0, 35, 7, 45])
    '<s0><n3><s7><n13>'
    """
    return "".join(render_token(t) for t in tokens)


def parse_text(text: str) -> list[int]:
    """Inverse of :func:`render_text` (raises on anything that is not whole units)."""
    out, pos = [], 0
    for m in _UNIT.finditer(text):
        if m.start() != pos:
            raise ValueError(f"character {pos}: not a token unit: {text[pos:m.start()]!r}")
        k = int(m.group(2))
        out.append(NUMBER_BASE + k if m.group(1) == "n" else k)
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"character {pos}: not a token unit: {text[pos:]!r}")
    return out


def token_name(token: int) -> str:
    token = int(token)
    if token >= NUMBER_BASE:
        return str(token - NUMBER_BASE)
    return SPECIAL_NAMES.get(token) or META_NAMES.get(token) or f"<id {token}>"


def render_query(query: Sequence[int]) -> str:
    """The regular expression of a query (token ids between the search tokens).

    Raises :class:`MalformedQuery` if the query holds a search token or the
    pattern does not compile.

    >>> from rnngap.constructions.machine.vocab import number_token as num, TILDE
    >>> render_query([num(3), TILDE])
    '(?:<n3>)(?:<s8>)'
    """
    parts = []
    for pos, t in enumerate(query):
        t = int(t)
        if t in (STARTSEARCH, ENDSEARCH):
            raise MalformedQuery(f"query token {pos}: {token_name(t)} inside a query")
        if t in META_SYNTAX:
            parts.append(META_SYNTAX[t])
        else:
            parts.append("(?:" + regex.escape(render_token(t)) + ")")
    pattern = "".join(parts)
    try:
        regex.compile(pattern)
    except regex.error as e:
        raise MalformedQuery(f"query {' '.join(token_name(t) for t in query)!r}: {e}") from None
    return pattern


@dataclass
class SearchResult:
    """One search: the query, its pattern, the outcome and what was appended.

    ``status`` is ``"match"``, ``"no match"``, ``"malformed"`` or ``"timeout"``;
    ``at`` is the context position where the retrieved tokens start (capture
    group 1, or the whole match without a group; None unless matched); ``reason`` explains a malformed query or a timeout."""

    query: list[int]
    pattern: str | None
    status: str
    tokens: list[int]
    at: int | None = None
    reason: str = ""


def search(context: Sequence[int], query: Sequence[int], excluded: Sequence[tuple[int, int]] = (),
           timeout: float = DEFAULT_TIMEOUT) -> SearchResult:
    """Stateless search: ``query`` over ``context`` with the half-open position
    ranges ``excluded`` cut out. Never raises for a bad query (see the module
    docstring); raises ValueError for bad arguments."""
    keep = [True] * len(context)
    for a, b in excluded:
        if not 0 <= a <= b <= len(context):
            raise ValueError(f"excluded span {(a, b)} outside the context of length {len(context)}")
        for p in range(a, b):
            keep[p] = False
    positions = [p for p in range(len(context)) if keep[p]]
    pieces = [render_token(context[p]) for p in positions]
    return _search_pieces(pieces, positions, query, timeout)


def _search_pieces(pieces: list[str], positions: list[int], query: Sequence[int], timeout: float
                   ) -> SearchResult:
    query = [int(t) for t in query]
    try:
        pattern = render_query(query)
    except MalformedQuery as e:
        return SearchResult(query, None, "malformed", [FAILED], reason=str(e))
    text = "".join(pieces)
    try:
        m = regex.search(pattern, text, timeout=timeout)
    except TimeoutError as e:
        return SearchResult(query, pattern, "timeout", [FAILED], reason=f"search exceeded {timeout} s ({e})")
    except regex.error as e:   # defensive: compiled above, so this is not expected
        return SearchResult(query, pattern, "malformed", [FAILED], reason=str(e))
    group = 1 if m is not None and m.re.groups >= 1 else 0     # the whole match if the query opens no group
    if m is None or m.start(group) < 0:
        return SearchResult(query, pattern, "no match", [FAILED])
    got = parse_text(m.group(group))
    starts = _char_starts(pieces)
    i = bisect.bisect_left(starts, m.start(group))
    at = positions[i] if got else None
    return SearchResult(query, pattern, "match", got, at=at)


def _char_starts(pieces: list[str]) -> list[int]:
    out, c = [], 0
    for p in pieces:
        out.append(c)
        c += len(p)
    return out


@dataclass
class RagOracle:
    """The oracle hook for :func:`constructions.build.generate.generate`, one per generation.

    Call it after every generated token as ``oracle(context, token)`` (context =
    prompt + CoT so far, ``token`` its last element). It returns None, or the
    tokens to append after an ``[ENDSEARCH]``. It keeps the searched text
    incrementally (tokens outside search spans, rendered once), so a search
    costs one regex scan of the text. ``log`` holds every search.

    A ``[STARTSEARCH]`` while a search is open restarts the query (the earlier
    partial query stays excluded); ``[ENDSEARCH]`` with no open search is a
    malformed query.
    """

    timeout: float = DEFAULT_TIMEOUT
    log: list[SearchResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        self._pieces: list[str] = []
        self._positions: list[int] = []
        self._seen = 0
        self._skip_until = 0          # positions below this belong to the last search span
        self._open: int | None = None  # position of the open search's [STARTSEARCH]

    def _keep(self, pos: int, token: int) -> None:
        self._pieces.append(render_token(token))
        self._positions.append(pos)

    def __call__(self, context: Sequence[int], token: int) -> list[int] | None:
        n = len(context)
        if n <= self._seen or int(context[-1]) != int(token):
            raise ValueError("RagOracle: the context must grow by the generated token on every call "
                             "(use a new RagOracle for each generation)")
        for p in range(self._seen, n - 1):   # prompt tokens (first call) or the last retrieval
            if p >= self._skip_until and self._open is None:
                self._keep(p, int(context[p]))
        self._seen = n
        token = int(token)
        if token == STARTSEARCH:
            if self._open is None:
                self._open = n - 1
            else:                            # restart: the earlier partial query stays cut out
                self._open = n - 1
            return None
        if token != ENDSEARCH:
            if self._open is None:
                self._keep(n - 1, token)
            return None
        if self._open is None:
            res = SearchResult([], None, "malformed", [FAILED], reason="[ENDSEARCH] without an open [STARTSEARCH]")
        else:
            query = [int(t) for t in context[self._open + 1:n - 1]]
            res = self._search(query)
        self.log.append(res)
        self._open = None
        self._skip_until = n + len(res.tokens)
        return list(res.tokens)

    def _search(self, query: list[int]) -> SearchResult:
        """The search of one query over the kept text (the query exactly as written)."""
        return _search_pieces(self._pieces, self._positions, query, self.timeout)

    @property
    def text(self) -> str:
        """The text the next search would see (excluded spans cut out)."""
        return "".join(self._pieces)

    def failures(self) -> list[SearchResult]:
        """Searches that failed for a reason other than 'no match'."""
        return [r for r in self.log if r.status in ("malformed", "timeout")]
