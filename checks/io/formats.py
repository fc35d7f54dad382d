"""IsTree instances as text (the paper's format) and as token ids (ours).

The paper's IsTree generator (github dangxingyu/rnn-icrag, ``rnn/data.py``)
writes every example as one string.  The rules below were read off the 64 rows
of ``shared/data/istree_official_sample.jsonl`` and are reproduced here byte for
byte:

Details: docs/internals/commands.md#formats.

    >>> parse_graph_text("[BOS]3-2,2-2[EOS]")
    Traceback (most recent call last):
    ...
    rnngap.checks.io.formats.GraphFormatError: character 9, edge 1: self-loop '2-2'
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

from rnngap.constructions.machine.vocab import (
    BOS,
    DASH,
    EOS,
    FALSE,
    NUMBER_BASE,
    SPECIAL_NAMES,
    SPECIAL_TOKENS,
    TILDE,
    TRUE,
    number_token,
)

from .errors import excerpt

Edge = tuple[int, int]

BOS_TEXT = "[BOS]"
EOS_TEXT = "[EOS]"
EDGE_SEPARATORS = {"-": DASH, "~": TILDE}
"""Endpoint separators accepted in the input, text and token id."""


class GraphFormatError(ValueError):
    """A malformed IsTree input (text or tokens); the message says where."""


class CotFormatError(ValueError):
    """A malformed CoT part of a paper-format text; the message says where."""


# ---------------------------------------------------------------------------
# Edge lists
# ---------------------------------------------------------------------------

def validate_edges(edges: Iterable[Sequence[int]], n_nodes: int | None = None) -> list[Edge]:
    """Check a simple undirected edge list and return it as a list of int pairs.

    Raises :class:`GraphFormatError` naming the edge index for a self-loop, a
    negative vertex, a vertex ``>= n_nodes`` (when ``n_nodes`` is given) or a
    duplicate edge, a reversed duplicate (``2-1`` after ``1-2``) included.
    The orientation of each pair is kept.
    """
    if n_nodes is not None and n_nodes < 1:
        raise GraphFormatError(f"n_nodes must be >= 1, got {n_nodes}")
    out: list[Edge] = []
    seen: dict[frozenset, int] = {}
    for k, e in enumerate(edges):
        if len(e) != 2:
            raise GraphFormatError(f"edge {k}: expected a pair (u, v), got {excerpt(repr(e))}")
        u, v = int(e[0]), int(e[1])
        _check_edge(u, v, k, n_nodes, seen, where=f"edge {k}")
        out.append((u, v))
    return out


def _check_edge(u: int, v: int, k: int, n_nodes: int | None, seen: dict, where: str) -> None:
    if u < 0 or v < 0:
        raise GraphFormatError(f"{where}: negative vertex in '{u}-{v}'")
    if u == v:
        raise GraphFormatError(f"{where}: self-loop '{u}-{v}'")
    if n_nodes is not None:
        for w in (u, v):
            if w >= n_nodes:
                raise GraphFormatError(
                    f"{where}: vertex {w} in '{u}-{v}' is out of range 0..{n_nodes - 1}"
                )
    key = frozenset((u, v))
    if key in seen:
        j = seen[key]
        raise GraphFormatError(f"{where}: duplicate edge '{u}-{v}' (same as edge {j})")
    seen[key] = k


# ---------------------------------------------------------------------------
# Tokens
# ---------------------------------------------------------------------------

def graph_tokens(edges: Iterable[Sequence[int]], sep: str = "-") -> list[int]:
    """``[BOS] u sep v ... [EOS]`` as token ids.

    >>> graph_tokens([(2, 0), (3, 2)])
    [0, 34, 7, 32, 35, 7, 34, 1]
    """
    if sep not in EDGE_SEPARATORS:
        raise ValueError(f"sep must be one of {sorted(EDGE_SEPARATORS)}, got {sep!r}")
    out = [BOS]
    for u, v in validate_edges(edges):
        out += [number_token(u), EDGE_SEPARATORS[sep], number_token(v)]
    out.append(EOS)
    return out


def parse_graph_tokens(tokens: Sequence[int], n_nodes: int | None = None) -> list[Edge]:
    """Edges of ``[BOS] u - v ... [EOS]`` (``-`` or ``~``), read up to the first ``[EOS]``.

    Anything after that ``[EOS]`` (a CoT, a label) is ignored.  Errors name the
    token position.

    >>> parse_graph_tokens([0, 34, 7, 32, 35, 8, 34, 1, 32])
    [(2, 0), (3, 2)]
    """
    toks = [int(t) for t in tokens]

    def name(t: int) -> str:
        return str(t - NUMBER_BASE) if t >= NUMBER_BASE else SPECIAL_NAMES.get(t, f"<reserved id {t}>")

    if not toks or toks[0] != BOS:
        found = name(toks[0]) if toks else "end of input"
        raise GraphFormatError(f"token 0: expected [BOS], found {excerpt(found)}")
    edges: list[Edge] = []
    seen: dict = {}
    pos = 1
    while True:
        if pos >= len(toks):
            raise GraphFormatError(f"token {pos}: missing [EOS] (input ended)")
        if toks[pos] == EOS:
            return edges
        k = len(edges)
        triple = toks[pos:pos + 3]
        for off, want in enumerate(("vertex", "separator", "vertex")):
            p = pos + off
            if p >= len(toks):
                raise GraphFormatError(f"token {p}, edge {k}: missing {want} (input ended)")
            t = toks[p]
            ok = (t >= NUMBER_BASE) if want == "vertex" else (t in (DASH, TILDE))
            if not ok:
                what = "dangling separator" if (want == "vertex" and off == 2) else f"expected a {want}"
                raise GraphFormatError(f"token {p}, edge {k}: {what}, found {excerpt(name(t))}")
        u, v = triple[0] - NUMBER_BASE, triple[2] - NUMBER_BASE
        _check_edge(u, v, k, n_nodes, seen, where=f"token {pos}, edge {k}")
        edges.append((u, v))
        pos += 3


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------

_SPECIAL_TEXT = re.compile(r"\[[A-Z]*\]")
_DIGITS = re.compile(r"[0-9]+")

MAX_NUMBER_DIGITS = 18
"""Longest decimal number read from a text: a vertex v is the int64 token id
NUMBER_BASE + v < 2^63, which every 18-digit number fits (the models refuse far
smaller graphs by their precision); checked before ``int()`` so a 5,000-digit
number is a one-line GraphFormatError, not Python's digit-limit ValueError."""


def format_graph_text(edges: Iterable[Sequence[int]], sep: str = "-") -> str:
    """The paper's input string, e.g. ``[BOS]3-2,2-1,1-0[EOS]``."""
    if sep not in EDGE_SEPARATORS:
        raise ValueError(f"sep must be one of {sorted(EDGE_SEPARATORS)}, got {sep!r}")
    return BOS_TEXT + ",".join(f"{u}{sep}{v}" for u, v in validate_edges(edges)) + EOS_TEXT


def _token_at(text: str, pos: int) -> str:
    """The lexical token starting at ``pos`` (for error messages)."""
    if pos >= len(text):
        return "end of text"
    m = _SPECIAL_TEXT.match(text, pos)
    if m:
        return m.group()
    m = _DIGITS.match(text, pos)
    if m:
        return m.group()
    return text[pos]


def _is_known(tok: str) -> bool:
    """Is this lexical token part of the paper's alphabet at all?"""
    return (tok.isascii() and tok.isdigit()) or tok in (",", "-", "~") or tok in SPECIAL_TOKENS


def _found(tok: str) -> str:
    if tok == "end of text":
        return "but the text ended (missing '[EOS]')"
    return f"found {excerpt(tok)}" if _is_known(tok) else f"unknown token {excerpt(tok)}"


def _read_number(text: str, pos: int, k: int, role: str) -> tuple[int, int]:
    m = _DIGITS.match(text, pos)
    if not m:
        tok = _token_at(text, pos)
        if pos >= len(text):
            what = f"text ended where a vertex number ({role}) belongs; missing '[EOS]'"
        elif role == "second endpoint" and _is_known(tok):
            what = f"dangling separator: no vertex number after it, found {excerpt(tok)}"
        elif tok in ("-", "~"):
            what = f"separator {tok!r} without a first endpoint"
        elif tok in (",", EOS_TEXT):
            what = f"empty edge: expected a vertex number, found {excerpt(tok)}"
        else:
            what = f"{_found(tok)} where a vertex number ({role}) belongs"
        raise GraphFormatError(f"character {pos}, edge {k}: {what}")
    digits = m.group()
    if len(digits) > MAX_NUMBER_DIGITS:
        raise GraphFormatError(f"character {pos}, edge {k}: vertex number with {len(digits)} digits "
                               f"(at most {MAX_NUMBER_DIGITS}: token ids are int64)")
    if len(digits) > 1 and digits[0] == "0":
        raise GraphFormatError(f"character {pos}, edge {k}: number with a leading zero {digits!r}")
    return int(digits), m.end()


def parse_graph_text(text: str, n_nodes: int | None = None) -> tuple[list[Edge], list[int]]:
    """Parse the input part of a paper-format string (up to its first ``[EOS]``).

    Returns ``(edges, tokens)``: the edges as written (orientation kept) and the
    token ids ``[BOS] u sep v ... [EOS]`` (the separator as written, ``-`` or
    ``~``).  Everything after the first ``[EOS]`` is ignored.

    >>> parse_graph_text("[BOS]3-2,2~1[EOS]0,3,2[EOS]")
    ([(3, 2), (2, 1)], [0, 35, 7, 34, 34, 8, 33, 1])
    """
    if not text.startswith(BOS_TEXT):
        raise GraphFormatError(f"character 0: expected '[BOS]', found {excerpt(_token_at(text, 0))}")
    edges: list[Edge] = []
    tokens = [BOS]
    seen: dict = {}
    pos = len(BOS_TEXT)
    if text.startswith(EOS_TEXT, pos):
        return edges, tokens + [EOS]
    while True:
        k = len(edges)
        start = pos
        u, pos = _read_number(text, pos, k, "first endpoint")
        sep = text[pos] if pos < len(text) else ""
        if sep not in EDGE_SEPARATORS:
            tok = _token_at(text, pos)
            raise GraphFormatError(
                f"character {pos}, edge {k}: expected '-' or '~' after vertex {u}, {_found(tok)}"
            )
        v, pos = _read_number(text, pos + 1, k, "second endpoint")
        _check_edge(u, v, k, n_nodes, seen, where=f"character {start}, edge {k}")
        edges.append((u, v))
        tokens += [number_token(u), EDGE_SEPARATORS[sep], number_token(v)]
        if text.startswith(EOS_TEXT, pos):
            return edges, tokens + [EOS]
        if pos >= len(text):
            raise GraphFormatError(f"character {pos}: missing '[EOS]' after edge {k} (text ended)")
        if text[pos] != ",":
            raise GraphFormatError(
                f"character {pos}, edge {k}: expected ',' or '[EOS]' after '{u}{sep}{v}', "
                f"{_found(_token_at(text, pos))}"
            )
        pos += 1
        if text.startswith(EOS_TEXT, pos):
            raise GraphFormatError(f"character {pos - 1}: trailing ',' before '[EOS]'")


def _render_token(t: int) -> str:
    t = int(t)
    if t >= NUMBER_BASE:
        return str(t - NUMBER_BASE)
    if t in SPECIAL_NAMES:
        return SPECIAL_NAMES[t]
    raise ValueError(f"token id {t} is a reserved id with no name")


def format_cot_text(
    edges: Iterable[Sequence[int]],
    cot_tokens: Sequence[int],
    *,
    include_label: bool = False,
    sep: str = "-",
) -> str:
    """The paper's full string: input, then the CoT, e.g.
    ``[BOS]3-2,2-1,1-0[EOS]0,1,2,3,2,1,0[EOS]``.

    ``cot_tokens`` are token ids: the CoT, its closing ``[EOS]`` and optionally
    a final label token (as produced by ``reference_cot``/``retrieval_cot`` in
    :mod:`checks.tasks.istree`).  The paper's text has no label, so it is dropped
    unless ``include_label`` (then ``...[EOS][TRUE]``).
    """
    toks = [int(t) for t in cot_tokens]
    label = None
    if toks and toks[-1] in (TRUE, FALSE):
        label = toks.pop()
    if not toks or toks[-1] != EOS:
        raise CotFormatError("CoT tokens must end with [EOS] (optionally followed by the label)")
    body = toks[:-1]
    if EOS in body:
        raise CotFormatError(f"CoT token {body.index(EOS)}: [EOS] inside the CoT")
    out = format_graph_text(edges, sep=sep) + ",".join(_render_token(t) for t in body) + EOS_TEXT
    if include_label:
        if label is None:
            raise CotFormatError("include_label=True but the CoT tokens carry no label")
        out += SPECIAL_NAMES[label]
    return out


def parse_cot_text(text: str, n_nodes: int | None = None) -> tuple[list[Edge], list[int]]:
    """Inverse of :func:`format_cot_text`: ``(edges, cot_tokens)``.

    ``cot_tokens`` are the ids after the input's ``[EOS]``, closing ``[EOS]``
    included, plus the label if the text carries one.  Items of the CoT are
    decimal numbers or special-token names (``[STARTSEARCH]``, ``-``, ``~``...).

    >>> parse_cot_text("[BOS]1-0[EOS]0,1,0[EOS]")
    ([(1, 0)], [32, 33, 32, 1])
    """
    edges, graph = parse_graph_text(text, n_nodes=n_nodes)
    start = text.index(EOS_TEXT) + len(EOS_TEXT)
    rest = text[start:]
    tail = None
    for label in ("[TRUE]", "[FALSE]"):
        if rest.endswith(EOS_TEXT + label):
            tail = SPECIAL_TOKENS[label]
            rest = rest[: -len(label)]
            break
    if not rest.endswith(EOS_TEXT):
        raise CotFormatError(f"character {len(text)}: the CoT does not end with '[EOS]'")
    body = rest[: -len(EOS_TEXT)]
    cot: list[int] = []
    if body:
        pos = start
        for item in body.split(","):
            if item in (BOS_TEXT, EOS_TEXT):
                raise CotFormatError(f"character {pos}: {excerpt(item)} inside the CoT")
            if item in SPECIAL_TOKENS:
                cot.append(SPECIAL_TOKENS[item])
            elif item.isdigit() and item.isascii() and (item == "0" or item[0] != "0") \
                    and len(item) <= MAX_NUMBER_DIGITS:
                cot.append(number_token(int(item)))
            else:
                raise CotFormatError(f"character {pos}: unknown CoT item {excerpt(item)}")
            pos += len(item) + 1
    cot.append(EOS)
    if tail is not None:
        cot.append(tail)
    return edges, cot
