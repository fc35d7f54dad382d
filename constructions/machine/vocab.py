"""The project-wide vocabulary: special tokens first, then one token per number.

Token ids are fixed across every task and every n, so that a construction's
weights never depend on a lookup table:

* ids ``0 .. NUMBER_BASE-1`` are reserved for special tokens (those in
  :data:`SPECIAL_TOKENS`; unnamed slots are reserved for later meta-tokens),
* the number ``k >= 0`` is the token id ``NUMBER_BASE + k``.

Example::

    >>> v = Vocab(max_number=5)
    >>> v.encode(["[BOS]", 3, "-", 1, "[EOS]"])
    [0, 35, 7, 33, 1]
    >>> v.decode([0, 35])
    ['[BOS]', 3]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

NUMBER_BASE = 32
"""Id of the number 0; ids below it are special tokens."""

SPECIAL_TOKENS: dict[str, int] = {
    "[BOS]": 0,
    "[EOS]": 1,
    "[TRUE]": 2,
    "[FALSE]": 3,
    "[STARTSEARCH]": 4,
    "[ENDSEARCH]": 5,
    "[FAILED]": 6,
    "-": 7,
    "~": 8,
    "[QUERY]": 9,
}
"""Named special tokens of every vocabulary. Ids 10..20 are the regex meta-tokens
of the in-context RAG oracle (:data:`META_TOKENS`, only in a ``Vocab(..., meta=True)``);
ids 21..30 are reserved; id 31 is ``[COUNT]`` (:data:`COUNT`, only in a
``Vocab(..., count=True)``)."""

SPECIAL_NAMES: dict[int, str] = {i: s for s, i in SPECIAL_TOKENS.items()}

BOS = SPECIAL_TOKENS["[BOS]"]
EOS = SPECIAL_TOKENS["[EOS]"]
TRUE = SPECIAL_TOKENS["[TRUE]"]
FALSE = SPECIAL_TOKENS["[FALSE]"]
STARTSEARCH = SPECIAL_TOKENS["[STARTSEARCH]"]
ENDSEARCH = SPECIAL_TOKENS["[ENDSEARCH]"]
FAILED = SPECIAL_TOKENS["[FAILED]"]
DASH = SPECIAL_TOKENS["-"]
TILDE = SPECIAL_TOKENS["~"]
QUERY = SPECIAL_TOKENS["[QUERY]"]

META_TOKENS: dict[str, int] = {
    "[(]": 10,      # capture group; group 1 (the first one opened) is retrieved
    "[(?:]": 11,    # non-capturing group
    "[(?|]": 12,    # branch-reset group: each alternative numbers its groups from the same index
    "[)]": 13,      # closes any group or lookahead
    "[|]": 14,      # alternation
    "[.]": 15,      # any one token
    "[#]": 16,      # any one number token
    "[.*?]": 17,    # lazy wildcard: the shortest run of tokens (possibly empty)
    "[*]": 18,      # greedy repetition (zero or more) of the preceding token, wildcard or group
    "[(?=]": 19,    # lookahead
    "[(?!]": 20,    # negative lookahead
}
"""The regex meta-tokens of the in-context RAG oracle (constructions/models/rag.py renders
them; inside a search query every other token is a literal). They belong to a
vocabulary only if it is built with ``meta=True`` (the RAG constructions); every
other model keeps them out of its vocabulary."""

META_NAMES: dict[int, str] = {i: s for s, i in META_TOKENS.items()}

COUNT = 31
"""``[COUNT]``: the IsTree vertex-count header ``[BOS] [COUNT] N u - v ... [EOS]``
(constructions/models/istree.py, docs/conventions.md), for a vertex count the edges
cannot show (isolated vertices above the largest id). Like the meta-tokens it is
not in :data:`SPECIAL_TOKENS` (whose largest id other constructions use as the
bound on |tau| of a special): it belongs to a vocabulary only if it is built
with ``count=True`` (the IsTree Transformer)."""
COUNT_NAME = "[COUNT]"


def number_token(k: int) -> int:
    """Token id of the number ``k`` (``k >= 0``)."""
    if k < 0:
        raise ValueError(f"numbers in the vocabulary are >= 0, got {k}")
    return NUMBER_BASE + int(k)


def token_code(token: int) -> int:
    """The integer code tau of a token, the value a construction computes with.

    tau(number k) = k + 1, tau(special with id s) = -s; so tau([BOS]) = 0 and tau is
    injective on the vocabulary. A match head compares tau's (gap >= 1 between
    distinct tokens); [BOS] having tau = 0 drops out of every product
    tau_query * tau_key, which the counting head uses.
    """
    token = int(token)
    return token - NUMBER_BASE + 1 if token >= NUMBER_BASE else -token


def token_from_code(code: int) -> int:
    """Inverse of :func:`token_code`."""
    code = int(code)
    return code - 1 + NUMBER_BASE if code >= 1 else -code


def token_number(token: int) -> int:
    """The number a number token stands for; raises for a special token."""
    if token < NUMBER_BASE:
        raise ValueError(f"token {token} ({SPECIAL_NAMES.get(token, 'reserved')}) is not a number")
    return int(token) - NUMBER_BASE


@dataclass(frozen=True)
class Vocab:
    """Specials plus the numbers ``0..max_number``; ``size`` tokens in all."""

    max_number: int
    meta: bool = False
    """Whether the regex meta-tokens (:data:`META_TOKENS`) belong to the vocabulary."""
    count: bool = False
    """Whether ``[COUNT]`` (:data:`COUNT`) belongs to the vocabulary."""

    def __post_init__(self) -> None:
        if hasattr(self.max_number, "free_symbols"):     # a symbolic build (constructions/build/num.py)
            return
        if self.max_number < 0:
            raise ValueError(f"max_number must be >= 0, got {self.max_number}")

    @property
    def size(self) -> int:
        return NUMBER_BASE + self.max_number + 1

    def number(self, k: int) -> int:
        if not 0 <= k <= self.max_number:
            raise ValueError(f"number {k} is outside this vocabulary (0..{self.max_number})")
        return NUMBER_BASE + int(k)

    def is_number(self, token: int) -> bool:
        return NUMBER_BASE <= token < self.size

    def contains(self, token: int) -> bool:
        return 0 <= token < self.size and (token >= NUMBER_BASE or token in SPECIAL_NAMES
                                           or (self.meta and token in META_NAMES)
                                           or (self.count and token == COUNT))

    def name(self, token: int) -> str:
        """The name of a special or meta token (raises for numbers and unknown ids)."""
        token = int(token)
        if token in SPECIAL_NAMES:
            return SPECIAL_NAMES[token]
        if self.meta and token in META_NAMES:
            return META_NAMES[token]
        if self.count and token == COUNT:
            return COUNT_NAME
        raise ValueError(f"token id {token} is not a named token of this vocabulary")

    def encode(self, items: Iterable[str | int]) -> list[int]:
        """Special-token names and Python ints (numbers) to token ids."""
        out = []
        for pos, item in enumerate(items):
            if isinstance(item, str):
                if item in SPECIAL_TOKENS:
                    out.append(SPECIAL_TOKENS[item])
                elif self.meta and item in META_TOKENS:
                    out.append(META_TOKENS[item])
                elif self.count and item == COUNT_NAME:
                    out.append(COUNT)
                else:
                    raise ValueError(f"position {pos}: unknown special token {item!r}")
            else:
                out.append(self.number(int(item)))
        return out

    def decode(self, tokens: Sequence[int]) -> list[str | int]:
        out: list[str | int] = []
        for pos, t in enumerate(tokens):
            t = int(t)
            if not self.contains(t):
                raise ValueError(f"position {pos}: token id {t} is not in the vocabulary (size {self.size})")
            out.append(t - NUMBER_BASE if t >= NUMBER_BASE else self.name(t))
        return out

    def validate(self, tokens: Sequence[int], what: str = "sequence") -> None:
        """Raise ValueError naming the first token outside the vocabulary."""
        for pos, t in enumerate(tokens):
            if not self.contains(int(t)):
                raise ValueError(
                    f"{what}: token id {int(t)} at position {pos} is not in the vocabulary "
                    f"(specials {sorted(SPECIAL_NAMES)} and numbers 0..{self.max_number})"
                )
