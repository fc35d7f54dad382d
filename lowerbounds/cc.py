"""Exact deterministic one-way communication complexity, by enumeration
(claims T4.6-low, T4.7-low; docs/theory.md §5).

An instance is ``alice_prefix(a) + bob_suffix(b)``, so a streaming model with an
s-bit state, with any chain of thought, is an s-bit one-way protocol: s is at
least the one-way complexity. :func:`one_way_complexity` computes it from the
communication matrix: ``ceil(log2(#distinct rows))`` for a total problem; for a
promise problem ``ceil(log2 chi)``, chi the chromatic number of the rows'
conflict graph, bracketed by a clique and a colouring and settled by a budgeted
branch and bound (``exact=False`` when the budget runs out; it never guesses).
The splits (``(n, answer, ...) -> CommProblem``) make every pair valid except
:func:`ar_free_split`.

Example::

    >>> from rnngap.lowerbounds.cc import index_split, one_way_complexity
    >>> def ref(t): return t[t[-1] - 32]            # x_i of [BOS] x_1..x_n [QUERY] i
    >>> one_way_complexity(index_split(4, ref)).bits
    4

Details (total and promise problems, the splits): docs/internals/lowerbounds.md#cc
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from rnngap.constructions.machine.vocab import QUERY, number_token

from .reductions import (
    Reduction,
    integer_arg,
    check_c,
    hub_prefix,
    hub_suffix,
    index_prefix,
    index_suffix,
    keyvalue_prefix,
    keyvalue_suffix,
)

DONT_CARE = -1
"""Matrix entry of an invalid (Alice, Bob) pair of a promise problem."""

DEFAULT_MAX_CELLS = 2_000_000
"""Default cap on #Alice inputs x #Bob inputs (each cell is one call of the
plain-Python answer callable, a few microseconds)."""

DEFAULT_COLOURING_BUDGET = 50_000
"""Default node budget of the exact colouring search (promise problems only)."""

AnswerFn = Callable[[np.ndarray], int]


@dataclass(frozen=True)
class CommProblem:
    """A two-party split of a task at one size.

    * ``alice_inputs`` / ``bob_inputs``: the inputs, enumerated (hashable);
    * ``alice_prefix(a)`` / ``bob_suffix(b)``: token lists; the instance is their
      concatenation;
    * ``answer(tokens) -> token``: the task's answer (a reference callable);
    * ``valid(a, b) -> bool``: None for a total problem (every pair valid);
      otherwise invalid pairs are don't-care and ``answer`` is not called on them.
    """

    name: str
    n: int
    alice_inputs: tuple[Hashable, ...]
    bob_inputs: tuple[Hashable, ...]
    alice_prefix: Callable[[Any], list[int]]
    bob_suffix: Callable[[Any], list[int]]
    answer: AnswerFn
    valid: Callable[[Any, Any], bool] | None = None
    description: str = ""

    @property
    def cells(self) -> int:
        return len(self.alice_inputs) * len(self.bob_inputs)


@dataclass
class CCResult:
    """Exact one-way complexity of a :class:`CommProblem`.

    ``exact`` says whether the bit count is known: then ``bits`` is the exact
    deterministic one-way complexity (always, for total problems); else
    ``bits`` is None and only ``bits_lower <= complexity <= bits_upper`` holds.
    ``distinct_rows`` counts distinct rows of the matrix (don't-care counted as
    a symbol). ``classes`` is the least number of messages when known exactly
    (= distinct_rows for a total problem, the conflict graph's chromatic number
    for a promise problem), else None with ``classes_lower .. classes_upper``;
    the bits can be exact while the classes are not (both bounds round up to
    the same power of two).
    """

    name: str
    n: int
    alice_count: int
    bob_count: int
    total: bool
    distinct_rows: int
    classes: int | None
    classes_lower: int
    classes_upper: int
    bits: int | None
    bits_lower: int
    bits_upper: int
    exact: bool
    method: str
    seconds: float
    prefix_length: int | None = None
    """Tokens in Alice's prefix, [BOS] included (None if it varies with her input)."""

    @property
    def cells(self) -> int:
        return self.alice_count * self.bob_count


def bits_for(classes: int) -> int:
    """ceil(log2(classes)) for classes >= 1, in exact integer arithmetic.

    >>> [bits_for(k) for k in (1, 2, 3, 4, 5, 1024, 1025)]
    [0, 1, 2, 2, 3, 10, 11]
    """
    if classes < 1:
        raise ValueError(f"need at least one class, got {classes}")
    return (classes - 1).bit_length()


def check_size(cells: int, max_cells: int, what: str) -> None:
    """ValueError("n too large for exhaustive mode") if ``cells > max_cells``."""
    if cells > max_cells:
        raise ValueError(
            f"n too large for exhaustive mode: {what} has {cells} matrix cells > max_cells = {max_cells} "
            "(pass a larger max_cells explicitly, or use a smaller n / alphabet)"
        )


def check_size_power(base: int, exp: int, factor: int, max_cells: int, what: str) -> None:
    """:func:`check_size` of ``base ** exp * factor`` cells, decided in
    logarithms first so that a huge n (or alphabet) is refused before the big
    integer ``base ** exp`` is formed (which alone could take hours).

    >>> check_size_power(2, 10 ** 12, 10 ** 12, 2_000_000, "index")
    Traceback (most recent call last):
    ...
    ValueError: n too large for exhaustive mode: index has about 2^1000000000040 matrix cells > max_cells = 2000000 (use a smaller n / alphabet)
    """
    log_cells = exp * math.log2(base) + math.log2(factor)
    if log_cells > math.log2(max_cells) + 1:
        raise ValueError(f"n too large for exhaustive mode: {what} has about 2^{log_cells:.0f} matrix cells "
                         f"> max_cells = {max_cells} (use a smaller n / alphabet)")
    check_size(base ** exp * factor, max_cells, what)


# ---------------------------------------------------------------- the matrix


def communication_matrix(problem: CommProblem, *, max_cells: int = DEFAULT_MAX_CELLS) -> np.ndarray:
    """int64 ``[#Alice, #Bob]``: answer tokens, :data:`DONT_CARE` on invalid pairs.

    Each prefix and each suffix is built once; the answer callable receives the
    instance as a 1-D int64 array (conventions.md). ValueError if the matrix
    exceeds ``max_cells`` or an answer is not a token id >= 0.
    """
    if not isinstance(problem, CommProblem):
        raise TypeError(f"problem must be a CommProblem, got {type(problem).__name__}")
    check_size(problem.cells, max_cells, problem.name)
    prefixes = [list(problem.alice_prefix(a)) for a in problem.alice_inputs]
    suffixes = [list(problem.bob_suffix(b)) for b in problem.bob_inputs]
    m = np.full((len(prefixes), len(suffixes)), DONT_CARE, dtype=np.int64)
    valid = problem.valid
    answer = problem.answer
    for r, (a, p) in enumerate(zip(problem.alice_inputs, prefixes)):
        row = m[r]
        for col, (b, s) in enumerate(zip(problem.bob_inputs, suffixes)):
            if valid is not None and not valid(a, b):
                continue
            got = answer(np.asarray(p + s, dtype=np.int64))
            got = integer_arg(got, f"{problem.name}: answer for Alice {a!r}, Bob {b!r}")
            if got < 0:
                raise ValueError(f"{problem.name}: answer {got} for Alice {a!r}, Bob {b!r} is not a token id")
            row[col] = got
    return m


# ----------------------------------------------------------- promise: colouring


def conflict_graph(patterns: np.ndarray) -> list[int]:
    """Adjacency bitmasks of the conflict graph of distinct row patterns: u ~ v
    iff some column is defined (not DONT_CARE) in both rows and differs."""
    u_count = patterns.shape[0]
    defined = patterns != DONT_CARE
    adj = []
    for u in range(u_count):
        clash = (defined & defined[u] & (patterns != patterns[u])).any(axis=1)
        mask = 0
        for v in np.flatnonzero(clash):
            mask |= 1 << int(v)
        adj.append(mask)
    return adj


def _members(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, increasing."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _greedy_clique(adj: list[int], starts: int = 64) -> int:
    """Size of the largest clique found greedily from the ``starts`` vertices of
    highest degree (a lower bound on chi)."""
    size = len(adj)
    if size == 0:
        return 0
    deg = [a.bit_count() for a in adj]
    order = sorted(range(size), key=lambda v: (-deg[v], v))
    best = 1
    for s in order[:starts]:
        clique_size = 1
        cand = adj[s]
        while cand:
            # the candidate with most neighbours among the remaining candidates
            v = max(_members(cand), key=lambda w: ((adj[w] & cand).bit_count(), -w))
            clique_size += 1
            cand &= adj[v]
        best = max(best, clique_size)
    return best


def _dsatur(nbrs: list[list[int]]) -> int:
    """Number of colours of a DSatur greedy colouring (an upper bound on chi).
    O(V^2): neighbour colour sets are updated incrementally."""
    size = len(nbrs)
    deg = [len(a) for a in nbrs]
    seen_colours: list[set[int]] = [set() for _ in range(size)]
    uncoloured = set(range(size))
    used = 0
    while uncoloured:
        v = max(uncoloured, key=lambda u: (len(seen_colours[u]), deg[u], -u))
        c = 0
        while c in seen_colours[v]:
            c += 1
        uncoloured.discard(v)
        used = max(used, c + 1)
        for w in nbrs[v]:
            seen_colours[w].add(c)
    return used


class _BudgetExceeded(Exception):
    pass


def _exact_chromatic(nbrs: list[list[int]], lower: int, upper: int, budget: int) -> int:
    """chi by DSatur branch and bound, knowing ``lower <= chi <= upper``.

    Each search node colours the uncoloured vertex of largest saturation (number
    of distinct colours among its neighbours; ties: degree) with every colour
    already used that no neighbour has, or a new one if that can still beat the
    best colouring found; counts of neighbour colours are kept incrementally,
    so a node costs O(V + deg). Raises _BudgetExceeded after ``budget`` nodes.
    """
    size = len(nbrs)
    if size == 0:
        return 0
    if lower >= upper:
        return upper
    deg = [len(a) for a in nbrs]
    colour = [-1] * size
    counts = [[0] * upper for _ in range(size)]  # counts[v][c]: neighbours of v with colour c
    sat = [0] * size
    best = upper
    nodes = 0

    def assign(v: int, c: int) -> None:
        colour[v] = c
        for w in nbrs[v]:
            counts[w][c] += 1
            if counts[w][c] == 1:
                sat[w] += 1

    def unassign(v: int, c: int) -> None:
        colour[v] = -1
        for w in nbrs[v]:
            counts[w][c] -= 1
            if counts[w][c] == 0:
                sat[w] -= 1

    def rec(done: int, used: int) -> bool:  # True: a colouring with `lower` colours exists
        nonlocal best, nodes
        nodes += 1
        if nodes > budget:
            raise _BudgetExceeded
        if done == size:
            best = used
            return best == lower
        v = max((u for u in range(size) if colour[u] < 0), key=lambda u: (sat[u], deg[u]))
        for c in range(used):
            if counts[v][c] == 0:
                assign(v, c)
                if rec(done + 1, used):
                    return True
                unassign(v, c)
                if used >= best:  # a better colouring was found below: prune
                    return False
        if used + 1 < best:
            assign(v, used)
            if rec(done + 1, used + 1):
                return True
            unassign(v, used)
        return False

    rec(0, 0)
    return best


EXACT_COLOURING_MAX_PATTERNS = 1000
"""Above this many distinct row patterns the exact search is not attempted."""


def min_compatible_classes(matrix: np.ndarray, *, budget: int = DEFAULT_COLOURING_BUDGET,
                           bits_only: bool = False) -> tuple[int, int, int | None, str]:
    """Least number of classes of pairwise compatible rows of a matrix with
    :data:`DONT_CARE` entries: ``(lower, upper, exact or None, method)``.

    The bounds are a greedy clique and a DSatur colouring of the conflict graph;
    if they differ, an exact branch and bound (at most ``budget`` nodes, at most
    :data:`EXACT_COLOURING_MAX_PATTERNS` distinct rows) decides. With
    ``bits_only`` the exact search is skipped when ceil(log2) of the two bounds
    already agree.

    >>> m = np.array([[0, -1], [1, -1], [-1, 0], [-1, 1]])
    >>> min_compatible_classes(m)[:3]
    (2, 2, 2)
    """
    matrix = np.asarray(matrix, dtype=np.int64)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"need a non-empty 2-D matrix, got shape {matrix.shape}")
    patterns = np.unique(matrix, axis=0)
    adj = conflict_graph(patterns)
    nbrs = [_members(a) for a in adj]
    lower = max(1, _greedy_clique(adj))
    upper = max(1, _dsatur(nbrs))
    if lower == upper:
        return lower, upper, lower, "clique = DSatur"
    if bits_only and bits_for(lower) == bits_for(upper):
        return lower, upper, None, "clique and DSatur bounds give the same bit count"
    if len(adj) > EXACT_COLOURING_MAX_PATTERNS:
        return lower, upper, None, (f"bounds only ({len(adj)} row patterns > "
                                    f"{EXACT_COLOURING_MAX_PATTERNS}, no exact search)")
    try:
        exact = _exact_chromatic(nbrs, lower, upper, budget)
    except _BudgetExceeded:
        return lower, upper, None, f"bounds only (colouring budget {budget} nodes exhausted)"
    return exact, exact, exact, "exact DSatur branch and bound"


# ------------------------------------------------------------- the complexity


def one_way_complexity(problem: CommProblem, *, max_cells: int = DEFAULT_MAX_CELLS,
                       colouring_budget: int = DEFAULT_COLOURING_BUDGET,
                       exact_classes: bool = False) -> CCResult:
    """Exact deterministic one-way complexity of ``problem`` (module docstring).

    For a promise problem the number of classes is bracketed first; the exact
    colouring runs only if the bracket leaves the bit count open, or always
    with ``exact_classes=True``.

    ValueError ("n too large for exhaustive mode") if the matrix has more than
    ``max_cells`` cells.
    """
    start = time.perf_counter()
    m = communication_matrix(problem, max_cells=max_cells)
    distinct = int(np.unique(m, axis=0).shape[0])
    total = problem.valid is None or not (m == DONT_CARE).any()
    if total:
        lo = hi = exact = distinct
        method = "distinct rows (total problem)"
    else:
        lo, hi, exact, method = min_compatible_classes(m, budget=colouring_budget,
                                                       bits_only=not exact_classes)
    b_lo, b_hi = bits_for(lo), bits_for(hi)
    bits = bits_for(exact) if exact is not None else (b_lo if b_lo == b_hi else None)
    prefix_length = _prefix_length(problem)
    return CCResult(problem.name, problem.n, len(problem.alice_inputs), len(problem.bob_inputs),
                    total, distinct, exact, lo, hi, bits, b_lo, b_hi, bits is not None,
                    method, time.perf_counter() - start, prefix_length)


def _prefix_length(problem: CommProblem) -> int | None:
    lengths = {len(problem.alice_prefix(a)) for a in problem.alice_inputs}
    return lengths.pop() if len(lengths) == 1 else None


def cc_table(make_problem: Callable[[int], CommProblem], ns: Sequence[int], **kwargs: Any) -> list[CCResult]:
    """:func:`one_way_complexity` of ``make_problem(n)`` for each n in ``ns``
    (the growth with n). Keyword arguments go to :func:`one_way_complexity`."""
    return [one_way_complexity(make_problem(int(n)), **kwargs) for n in ns]


def format_cc_table(results: Sequence[CCResult]) -> str:
    """A plain-text table: name, n, prefix length, #Alice, #Bob, classes, bits."""
    head = f"{'problem':<28} {'n':>3} {'|p|':>4} {'#Alice':>8} {'#Bob':>6} {'classes':>9} {'bits':>5}"
    lines = [head, "-" * len(head)]
    for r in results:
        classes = str(r.classes) if r.classes is not None else f"{r.classes_lower}..{r.classes_upper}"
        bits = str(r.bits) if r.bits is not None else f"{r.bits_lower}..{r.bits_upper}"
        length = "-" if r.prefix_length is None else str(r.prefix_length)
        lines.append(f"{r.name:<28} {r.n:>3} {length:>4} {r.alice_count:>8} {r.bob_count:>6} "
                     f"{classes:>9} {bits:>5}")
    return "\n".join(lines)


# --------------------------------------------------------------------- the splits


def _n(n: Any, minimum: int = 1) -> int:
    n = integer_arg(n, "n")
    if n < minimum:
        raise ValueError(f"n must be >= {minimum}, got {n}")
    return n


def _alphabet(a: Any, minimum: int = 1) -> int:
    a = integer_arg(a, "alphabet")
    if a < minimum:
        raise ValueError(f"alphabet must be >= {minimum}, got {a}")
    return a


def _words(n: int, alphabet: int) -> tuple[tuple[int, ...], ...]:
    return tuple(itertools.product(range(alphabet), repeat=n))


def index_split(n: int, answer: AnswerFn, alphabet: int = 2, *, max_cells: int = DEFAULT_MAX_CELLS
                ) -> CommProblem:
    """Index: Alice x in {0..a-1}^n -> ``[BOS] x_1..x_n``; Bob i in 1..n ->
    ``[QUERY] i``. Total. Row of x = x itself, so the complexity is
    ceil(n log2 a) (= n for bits)."""
    n, alphabet = _n(n), _alphabet(alphabet)
    check_size_power(alphabet, n, n, max_cells, f"index(n={n}, a={alphabet})")
    return CommProblem(f"index(a={alphabet})", n, _words(n, alphabet), tuple(range(1, n + 1)),
                       index_prefix, index_suffix, answer, None,
                       "Alice x_1..x_n, Bob i; every pair valid")


def cgram_split(n: int, answer: AnswerFn, c: int = 3, alphabet: int = 2, *,
                max_cells: int = DEFAULT_MAX_CELLS) -> CommProblem:
    """c-gram, key-value layout: Alice v in {0..a-1}^n -> ``[BOS] K_1 v_1 .. K_n v_n``
    with K_j = the number a+j-1 repeated c-1 times (keys disjoint from values);
    Bob i in 1..n -> ``[QUERY] K_i``. Every pair valid: K_i occurs only in block i,
    followed by v_i. Data length c*n. A restriction of c-gram retrieval (the
    keys are fixed), so the value ceil(n log2 a) lower-bounds the task at
    length c*n over the alphabet of a + n symbols."""
    n, c, alphabet = _n(n), check_c(c), _alphabet(alphabet)
    check_size_power(alphabet, n, n, max_cells, f"cgram(n={n}, c={c}, a={alphabet})")
    return CommProblem(
        f"cgram(c={c},a={alphabet})" if c > 2 else f"ar(a={alphabet})", n,
        _words(n, alphabet), tuple(range(1, n + 1)),
        lambda v: keyvalue_prefix(v, alphabet, c), lambda i: keyvalue_suffix(i, alphabet, c),
        answer, None, "key-value layout; every pair valid")


def ar_split(n: int, answer: AnswerFn, alphabet: int = 2, *, max_cells: int = DEFAULT_MAX_CELLS
             ) -> CommProblem:
    """AR, key-value layout: Alice v in {0..a-1}^n -> ``[BOS] a v_1 (a+1) v_2 ..
    (a+n-1) v_n``; Bob i -> ``[QUERY] (a+i-1)``. Every pair valid (keys are
    distinct and disjoint from values). :func:`cgram_split` with c = 2; the value
    ceil(n log2 a) lower-bounds AR at data length 2n."""
    return cgram_split(n, answer, 2, alphabet, max_cells=max_cells)


def ar_free_split(n: int, answer: AnswerFn, alphabet: int = 2, *, max_cells: int = DEFAULT_MAX_CELLS
                  ) -> CommProblem:
    """AR as the natural promise problem: Alice any x in {0..a-1}^n ->
    ``[BOS] x_1..x_n``; Bob any q in 0..a-1 -> ``[QUERY] q``; the pair is valid
    iff q occurs in x_1..x_{n-1}. Solved by colouring (module docstring). With
    a fixed alphabet the row of x is a partial map {0..a-1} -> {0..a-1}, so the
    complexity stays <= ceil(a log2 a) for every n: the AR lower bound needs an
    alphabet (or key length) growing with n."""
    n, alphabet = _n(n), _alphabet(alphabet)
    check_size_power(alphabet, n, alphabet, max_cells, f"ar_free(n={n}, a={alphabet})")

    def valid(x: tuple[int, ...], q: int) -> bool:
        return q in x[:-1]

    return CommProblem(f"ar_free(a={alphabet})", n, _words(n, alphabet), tuple(range(alphabet)),
                       index_prefix, lambda q: [QUERY, number_token(q)], answer, valid,
                       "Alice any x, Bob any q; valid iff q occurs in x_1..x_{n-1}")


def counting_split(n: int, answer: AnswerFn, alphabet: int = 2, *, max_cells: int = DEFAULT_MAX_CELLS
                   ) -> CommProblem:
    """Counting, natural and total: Alice any x in {0..a-1}^n -> ``[BOS] x_1..x_n``;
    Bob (q, t) in {0..a-1} x {0..n} -> ``[QUERY] q t``. Every pair is valid. The row
    of x is [count_q(x) > t] over (q, t), i.e. the histogram of x, so the
    complexity is ceil(log2 C(n+a-1, a-1)): O(a log n) for a fixed alphabet,
    about 2n bits for a = n."""
    n, alphabet = _n(n), _alphabet(alphabet)
    check_size_power(alphabet, n, alphabet * (n + 1), max_cells, f"counting(n={n}, a={alphabet})")
    bob = tuple((q, t) for q in range(alphabet) for t in range(n + 1))
    return CommProblem(f"counting(a={alphabet})", n, _words(n, alphabet), bob, index_prefix,
                       lambda qt: [QUERY, number_token(qt[0]), number_token(qt[1])],
                       answer, None, "Alice any x, Bob (q, t); every pair valid")


def istree_split(n: int, answer: AnswerFn, hubs: int = 2, *, max_cells: int = DEFAULT_MAX_CELLS
                 ) -> CommProblem:
    """IsTree, hub gadget with h hubs (docs/theory.md §5 is h = 2): vertices 0..h-1 are
    hubs, v_j = h+j-1, w = h+n. Alice x in {0..h-1}^n -> ``[BOS]`` and the edges
    ``v_j - x_j``; Bob (i, r) in {1..n} x {0..h-1} -> ``w - v_i``, ``w - k`` for every
    hub k != r, ``[EOS]``. Every pair is a valid graph; it is a tree iff x_i = r
    (w joins each star once). Rows determine x: complexity ceil(n log2 h)."""
    n, hubs = _n(n), _alphabet(hubs, 2)
    check_size_power(hubs, n, n * hubs, max_cells, f"istree(n={n}, hubs={hubs})")
    bob = tuple((i, r) for i in range(1, n + 1) for r in range(hubs))
    return CommProblem(f"istree(hubs={hubs})", n, _words(n, hubs), bob,
                       lambda x: hub_prefix(x, hubs), lambda ir: hub_suffix(ir[0], ir[1], n, hubs),
                       answer, None, "hub gadget; every pair valid")


def reduction_split(reduction: Reduction, n: int, answer: AnswerFn, *, max_cells: int = DEFAULT_MAX_CELLS
                    ) -> CommProblem:
    """The split of an Index reduction: Alice x in {0,1}^n -> ``reduction.alice(x)``,
    Bob i in 1..n -> ``reduction.bob(i, n)``. Total; a correct reduction has rows
    x or its complement, hence complexity exactly n."""
    if not isinstance(reduction, Reduction):
        raise TypeError(f"reduction must be a Reduction, got {type(reduction).__name__}")
    n = _n(n)
    check_size_power(2, n, n, max_cells, f"{reduction.name}(n={n})")
    return CommProblem(f"reduction:{reduction.name}", n, _words(n, 2), tuple(range(1, n + 1)),
                       reduction.alice, lambda i: reduction.bob(i, n), answer, None,
                       reduction.description)
