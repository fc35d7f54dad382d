"""Every declared resource bound of every construction, written once.

A bound is one Python function of a *backend* ``B`` and the sizes (n, alphabet a,
gram length c, ...). The same function gives

* the exact integer the builders use, with ``B = INT`` (``ceil(log2 x)`` by
  integer bit arithmetic, ``lambda = sharpness(f)`` by exact rationals), and
* a sympy expression in the symbols ``N, A, C`` with ``B = SYM`` (the asymptotic
  class checks of checks/verify/checks_declarations.py and ``rnngap certify`` read it).

So there is no "Python function and its sympy twin" to keep in step: there is
one definition and two evaluations of it (the registry's claim 'declarations'
still evaluates both at sample n, a check of the two backends).

Example (Index, claim T4.6-up; f = 1 so lambda = 2)::

    >>> INDEX.int_bits(5), INDEX.frac_bits(5)
    (13, 1)
    >>> INDEX.int_expr
    2*ceiling(log(Max(9, a, n + 3))/log(2)) + 5
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Callable

import sympy as sp

from rnngap.constructions.machine.fixedpoint import log2_ceil, storage_for
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.num import (
    LN2_UPPER, SymbolicFormat, any_sym, bits_for, is_sym, sharpness, zero_gap,
)
from rnngap.constructions.machine.vocab import COUNT, NUMBER_BASE, SPECIAL_NAMES, token_code

N, A, C = sp.symbols("n a c", positive=True, integer=True)
M_SYM = sp.Symbol("M", positive=True, integer=True)
"""Symbols of the sizes: n (input length / vertices), a (alphabet), c (gram
length), M (edges, IsTree)."""

_LN2 = sp.Rational(LN2_UPPER.numerator, LN2_UPPER.denominator)


class _Int:
    """Exact integer backend."""

    name = "int"

    @staticmethod
    def lc(x) -> int:
        """ceil(log2 x) for x >= 1 (0 below)."""
        return log2_ceil(max(1, int(x)))

    @staticmethod
    def bits(x) -> int:
        """Integer bits I with |x| < 2^I: floor(log2 x) + 1 for x >= 1."""
        return bits_for(x)

    @staticmethod
    def max(*xs):
        return max(xs)

    @staticmethod
    def sharp(f) -> int:
        """lambda(f) = the smallest integer with lambda > (f + 1) ln 2."""
        return sharpness(int(f))

    @staticmethod
    def zg(f) -> Fraction:
        """(f + 1) ln 2 from above: a score gap beyond it zeroes a softmax weight."""
        return zero_gap(int(f))

    @staticmethod
    def pow2(x) -> int:
        return 1 << int(x)

    @staticmethod
    def half(x) -> int:
        """x / 2 for an even x."""
        if x % 2:
            raise ValueError(f"half of an odd number {x}")
        return x // 2


class _Sym:
    """sympy backend: the same bound as an expression."""

    name = "sym"

    @staticmethod
    def lc(x):
        return sp.ceiling(sp.log(x, 2))

    @staticmethod
    def bits(x):
        return sp.floor(sp.log(x, 2)) + 1

    @staticmethod
    def max(*xs):
        return sp.Max(*xs)

    @staticmethod
    def sharp(f):
        return sp.floor((f + 1) * _LN2) + 1

    @staticmethod
    def zg(f):
        return (f + 1) * _LN2

    @staticmethod
    def pow2(x):
        return sp.Integer(2) ** x

    @staticmethod
    def half(x):
        return x / 2


INT = _Int()
SYM = _Sym()


def backend_of(*sizes):
    """The backend for these sizes: SYM when one is symbolic (a symbolic build,
    constructions/build/num.py), INT otherwise."""
    return SYM if any_sym(*sizes) else INT


@dataclass(frozen=True, eq=False)
class Declared:
    """Declared precision of one construction: I(n, a, c) and f(n), each one
    function of a backend (see the module doc). ``int_bits`` / ``frac_bits`` are
    the exact integers, ``int_expr`` / ``frac_expr`` the sympy expressions."""

    name: str
    int_fn: Callable            # (B, n, a, c) -> I
    frac_fn: Callable           # (B, n) -> f
    defaults: tuple = (2, 2)    # default (a, c)
    claim: str = ""
    n_symbol: sp.Symbol = N     # the symbol n of the sympy forms
    two_limb: bool = False      # past int64 (I + f > 62) the format is stored in two limbs (else refused)

    def int_bits(self, n: int, a: int | None = None, c: int | None = None) -> int:
        a = self.defaults[0] if a is None else a
        c = self.defaults[1] if c is None else c
        if any_sym(n, a, c):
            return sp.sympify(self.int_fn(SYM, n, a, c))
        return int(self.int_fn(INT, int(n), int(a), int(c)))

    def frac_bits(self, n: int) -> int:
        if is_sym(n):
            return sp.sympify(self.frac_fn(SYM, n))
        return int(self.frac_fn(INT, int(n)))

    def format(self, n: int, a: int | None = None, c: int | None = None) -> FixedFormat:
        """The declared format at n (a :class:`~constructions.build.num.SymbolicFormat` of
        sympy expressions when a size is symbolic: a symbolic build)."""
        if any_sym(n, a, c):
            return SymbolicFormat(self.int_bits(n, a, c), self.frac_bits(n))
        I, f = self.int_bits(n, a, c), self.frac_bits(n)
        return FixedFormat(I, f, storage=storage_for(I, f) if self.two_limb else "int64")

    def total_bits(self, n: int, a: int | None = None, c: int | None = None) -> int:
        return self.format(n, a, c).total_bits

    @cached_property
    def int_expr(self) -> sp.Expr:
        return sp.sympify(self.int_fn(SYM, self.n_symbol, A, C))

    @cached_property
    def frac_expr(self) -> sp.Expr:
        return sp.sympify(self.frac_fn(SYM, self.n_symbol))

    def int_value(self, n: int, a: int | None = None, c: int | None = None) -> int:
        """The sympy expression evaluated exactly (equals :meth:`int_bits`)."""
        a = self.defaults[0] if a is None else a
        c = self.defaults[1] if c is None else c
        return int(self.int_expr.subs({self.n_symbol: n, A: a, C: c}))


def largest(pred: Callable[[int], bool], lo: int, cap: int = 1 << 62) -> int | None:
    """The largest n >= lo with pred(n), for a predicate true on an initial segment
    (e.g. "the declared format fits int64", I + f nondecreasing); None if pred(lo)
    is false, ``cap`` if it holds that far."""
    if not pred(lo):
        return None
    hi = lo + 1
    while pred(hi):
        if hi >= cap:
            return cap
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pred(mid) else (lo, mid)
    return lo


def const(k: int) -> Callable:
    """A constant fraction-bit declaration f(n) = k."""
    return lambda B, n: k


# ============================================================================
# T4.6-up: retrieval.py (Index, AR, c-gram, Counting, MQAR)
RETRIEVAL_FRAC_BITS = 1
"""Declared fraction bits of Index, AR, c-gram and MQAR (constant; f only sets lambda)."""
SPECIAL_MIN_CODE = -max(SPECIAL_NAMES)
"""tau of the named special with the largest id ([QUERY] = 9 -> -9)."""
MQAR_MAX_VALUE = 1 << 16
"""MQAR inputs are raw ints in [0, 2^16) (Zoology vocabularies up to 65536)."""


def index_code_bound(B, n, a):
    """K: every key pos + 1 <= n + 3, every |query| <= max(n + 1, a, 9) <= K."""
    return B.max(n + 3, a, -SPECIAL_MIN_CODE)


def index_score_bound(B, n, a, f):
    """|score| of the Index match head: lambda |2 q p - p^2| <= 3 lambda K^2."""
    K = index_code_bound(B, n, a)
    return 3 * B.sharp(f) * K * K


def index_int_bits(B, n, a, c):
    # |score| <= 3 lambda K^2; bits(.) + 1 <= 2 lc(K) + lc(3 lambda) + 2
    lam = B.sharp(RETRIEVAL_FRAC_BITS)
    return 2 * B.lc(index_code_bound(B, n, a)) + B.lc(3 * lam) + 2


def cgram_shift_bits(B, n, a, c, f):
    """Bits of the shift heads of c-gram / AR (positions 0..n+c)."""
    lam = B.sharp(f)
    return 2 * B.lc(n + c + 1) + B.lc(lam * (3 + 2 * (c - 1))) + 2


def cgram_match_bound(B, n, a, c, f):
    """|score| of the joint (first-occurrence) match head: lambda_m 3 (c-1) K^2 + mu P,
    lambda_m = mu P + mu, P = n + c, K = max(a, 9)."""
    lam = B.sharp(f)
    Kc = B.max(a, -SPECIAL_MIN_CODE)
    P = n + c
    return (lam * P + lam) * 3 * (c - 1) * Kc * Kc + lam * P


def cgram_int_bits(B, n, a, c):
    f = RETRIEVAL_FRAC_BITS
    return B.max(cgram_shift_bits(B, n, a, c, f), B.lc(cgram_match_bound(B, n, a, c, f) + 1) + 1)


def count_compare_inverse_gap(B, n):
    """1 / g with g = 1/((n+1)(2n+3)) <= |1/(c+1) - 1/(t+3/2)| (counts c, thresholds t in 0..n)."""
    return (n + 1) * (2 * n + 3)


def _f_count(B, n):
    # 2^f > (n+1)(2n+3) = 1 / g, the comparison margin of counting_transformer
    return B.lc(count_compare_inverse_gap(B, n) + 1)


def count_code_bound(B, n, a):
    """K: the largest |tau| a Counting instance carries (numbers 0..a-1 -> tau <= a;
    the threshold t <= n -> tau <= n + 1; [QUERY] -> 9)."""
    return B.max(n + 1, a, -SPECIAL_MIN_CODE)


def count_fetch_bound(B, n, f):
    """|score| (and partial sums) of the fetch head: 2 M + mu (n + 3), M = mu (n + 2) + mu."""
    mu = B.sharp(f)
    return 2 * (mu * (n + 2) + mu) + mu * (n + 3)


def count_match_bound(B, n, a, f):
    """|score| of the count head: lambda (3 K^2 + 1) (see retrieval.counting_transformer)."""
    K = count_code_bound(B, n, a)
    return B.sharp(f) * (3 * K * K + 1)


def _int_count(B, n, a, c):
    # count-head scores, fetch-head scores, the softmax normaliser Z <= n + 4 keys;
    # +1: a score difference s_j - max (twice the bound) must fit too
    f = _f_count(B, n)
    return B.max(B.bits(count_match_bound(B, n, a, f)) + 1, B.bits(count_fetch_bound(B, n, f)) + 1,
                 B.bits(n + 4) + 1)


def mqar_shift_bits(B, n, f):
    """Shift head over positions 0..L: 3 lambda N^2 + 2 lambda N <= 5 lambda N^2."""
    return 2 * B.lc(n + 1) + B.lc(5 * B.sharp(f)) + 2


def mqar_match_bound(B, n, f):
    """Joint match head of MQAR: lambda_m 3 K^2 + lambda n + nu, nu = lambda n + lambda,
    lambda_m = nu + lambda, K = 2^16."""
    lam = B.sharp(f)
    nu = lam * n + lam
    return (nu + lam) * 3 * MQAR_MAX_VALUE * MQAR_MAX_VALUE + lam * n + nu


def _int_mqar(B, n, a, c):
    # n = sequence length L (positions 0..L); codes up to 2^16
    f = RETRIEVAL_FRAC_BITS
    return B.max(mqar_shift_bits(B, n, f), B.lc(mqar_match_bound(B, n, f) + 1) + 1)


INDEX = Declared("index", index_int_bits, const(RETRIEVAL_FRAC_BITS), claim="T4.6-up")
CGRAM = Declared("c-gram", cgram_int_bits, const(RETRIEVAL_FRAC_BITS), claim="T4.6-up")
AR = Declared("AR", lambda B, n, a, c: cgram_int_bits(B, n, a, 2), const(RETRIEVAL_FRAC_BITS), claim="T4.6-up")
COUNTING = Declared("counting", _int_count, _f_count, claim="T4.6-up", two_limb=True)
MQAR = Declared("MQAR", _int_mqar, const(RETRIEVAL_FRAC_BITS), defaults=(MQAR_MAX_VALUE, 2), claim="T4.6-up")
RETRIEVAL = {"index": INDEX, "ar": AR, "cgram": CGRAM, "counting": COUNTING, "mqar": MQAR}


# ============================================================================
# gadgets demos (demos.py)
MATCH_FRAC_BITS = 8
"""Fraction bits of the position heads: lambda = sharpness(8) = 7."""


def _int_match(B, n, a, c):
    # scores <= lambda * 3 (n+3)^2 = 21 (n+3)^2 < 2^(2 ceil(log2(n+3)) + 5); +1 sign margin
    return 2 * B.lc(n + 3) + 6


def _f_count_demo(B, n):
    # the comparison needs 2^-f < 1/(2 (n+1)(n+3/2)) with room for a power-of-two step
    return 2 * B.lc(n + 2) + 3


def _int_count_demo(B, n, a, c):
    # count scores <= 4 lambda K^2 with K <= n + 33 (special-token codes reach -31);
    # shift-head scores <= 3 lambda (n+3)^2; lambda <= f + 2
    return 2 * B.lc(n + 34) + B.lc(_f_count_demo(B, n) + 2) + 5


POSITION_MATCH = Declared("position-match", _int_match, const(MATCH_FRAC_BITS), claim="gadgets")
PREVIOUS_TOKEN = Declared("previous-token", _int_match, const(MATCH_FRAC_BITS), claim="gadgets")
COUNT_THRESHOLD = Declared("count-threshold", _int_count_demo, _f_count_demo, claim="gadgets")


# ============================================================================
# T5.6: hybrid.py
CODE_SLACK = NUMBER_BASE
"""Every |tau| and every ``cnt`` a retrieval hybrid sees is at most M(n) = n + 32."""


def hybrid_code_bound(B, n):
    return n + CODE_SLACK


def _f_hyb_retrieval(B, n):
    """Match heads need no fraction (integer keys, weights exactly 0/1); f only sets
    lambda: f(n) = ceil(log2(n + 1)) + 1 keeps p = O(log n) small."""
    return B.lc(n + 1) + 1


def _f_hyb_count(B, n):
    """The comparison 1/(c+1) vs 1/(t+3/2) needs 2^-f below 1/(2 (n+1)(n+3/2))."""
    return 2 * B.lc(n + 2) + 3


def hybrid_index_bound(B, n):
    M = hybrid_code_bound(B, n)
    return B.sharp(_f_hyb_retrieval(B, n)) * 3 * M * M


def hybrid_first_bound(B, n, width):
    M = hybrid_code_bound(B, n)
    s = B.sharp(_f_hyb_retrieval(B, n))
    return s * (M + 1) * width * 3 * M * M + s * M


def hybrid_count_bound(B, n):
    M = hybrid_code_bound(B, n)
    return B.sharp(_f_hyb_count(B, n)) * (4 * M * M + 2)


HYBRID = {
    "index": Declared("index-hybrid", lambda B, n, a, c: B.bits(hybrid_index_bound(B, n)) + 1,
                      _f_hyb_retrieval, claim="T5.6", two_limb=True),
    "ar": Declared("ar-hybrid", lambda B, n, a, c: B.bits(hybrid_first_bound(B, n, 1)) + 1,
                   _f_hyb_retrieval, claim="T5.6", two_limb=True),
    "counting": Declared("counting-hybrid", lambda B, n, a, c: B.bits(hybrid_count_bound(B, n)) + 1,
                         _f_hyb_count, claim="T5.6", two_limb=True),
}


def hybrid_cgram(c: int) -> Declared:
    """c-gram hybrid with the (c-1)-token key; c is part of the architecture."""
    w = c - 1
    return Declared("cgram-hybrid" if c == 3 else f"cgram-hybrid[c={c}]", lambda B, n, a, cc: B.bits(hybrid_first_bound(B, n, w)) + 1,
                    _f_hyb_retrieval, claim="T5.6", two_limb=True)


def hybrid_istree_cot(B, n):
    """CoT bound of the union-find hybrid: n (2 floor(log2 n) + 16) + 1."""
    fl = (int(n).bit_length() - 1) if B is INT else sp.floor(sp.log(n, 2))
    return n * (2 * fl + 16) + 1


def hybrid_istree_positions(B, n, m_max):
    return 3 * m_max + 3 + hybrid_istree_cot(B, n)


def _f_hyb_istree_P(B, P):
    return B.lc(P + 1) + 1


def hybrid_istree_bound(B, n, m_max):
    P = hybrid_istree_positions(B, n, m_max)
    K = P + CODE_SLACK
    s = B.sharp(_f_hyb_istree_P(B, P))
    return 4 * s * (P + 2) * K * K + s * (P + 1)


def hybrid_istree(m_of_n=lambda n: n) -> Declared:
    """I(N), f(N) with at most m_of_n(N) input edges (default N; the sympy form is
    taken with the same m_of_n applied to the symbol)."""
    return Declared("istree-hybrid",
                    lambda B, n, a, c: B.bits(hybrid_istree_bound(B, n, m_of_n(n))) + 1,
                    lambda B, n: _f_hyb_istree_P(B, hybrid_istree_positions(B, n, m_of_n(n))), claim="T5.6", two_limb=True)


# ============================================================================
# T5-hyb-P / T5-RAG machines: turing.py (sizes from the encoding: A actions,
# G symbols, T = T(n) steps, int or sympy)
TM_TIME = {
    "increment": lambda B, n: n + 1,
    "palindrome": lambda B, n: B.half((n + 1) * (n + 2)) + n + 1,
    "0k1k": lambda B, n: (n + 1) * (n + 1) + 1,
    "addition": lambda B, n: 2 * n + 2,
}
"""T(n): the step bound of each compiled machine (turing.MACHINES)."""


def tm_time(name: str, nsym) -> tuple:
    """(T as an int function of n, T as a sympy expression in ``nsym``)."""
    fn = TM_TIME[name]
    return (lambda n: fn(INT, n)), sp.sympify(fn(SYM, nsym))


def tm_positions(B, n, T):
    return n + 2 * T + 4


def tm_hybrid_f(B, n, T):
    return B.lc(tm_positions(B, n, T) + 1) + 1


def tm_hybrid_bound(B, n, T, nA, nG):
    """The retrieval head's scores: 4 lambda K^2 + mu (P + 1), lambda = mu (P + 1) + mu."""
    P = tm_positions(B, n, T)
    maxnum = B.max(n, T + 1, nA, nG)
    code = B.max(P, maxnum + 1) + NUMBER_BASE
    s = B.sharp(tm_hybrid_f(B, n, T))
    return 4 * s * (P + 2) * code * code + s * (P + 1)


def tm_hybrid_int(B, n, T, nA, nG):
    return B.bits(tm_hybrid_bound(B, n, T, nA, nG)) + 1


def tm_rag_int(B, n, T, nA, nG):
    """bits(8 K^2) + 1 with K the largest token code."""
    K = B.max(B.max(n, T + 1, nA, nG) + 1, NUMBER_BASE)
    return B.bits(8 * K * K) + 1


# ============================================================================
# T5-RAG: rag_models.py (f = 0)
def rag_int(extra: int) -> Callable:
    """I(n) = 2 ceil(log2(n + 21)) + extra (the program's interval bound)."""
    return lambda B, n, a=2, c=2: 2 * B.lc(n + 21) + extra


RAG_ISTREE_STEP_TOKENS = 26
RAG_PLAIN_LINE_TOKENS = 43
RAG_COT = {
    "index-rag": lambda B, n: n + 7,
    "cgram-rag": lambda B, n, c=3: c + 6,
    "counting-rag": lambda B, n: 8 * n + 15,
    "istree-rag-paper": lambda B, n: RAG_ISTREE_STEP_TOKENS * (2 * n - 1) + 1,   # per DFS step, + [EOS]
    "istree-rag": lambda B, n: RAG_PLAIN_LINE_TOKENS * (2 * n - 1) + 1,          # per line, + [EOS]
}
"""CoT(n) of the T5-RAG models (rag_models.py: the longest CoT before the answer)."""

RAG = {
    "index-rag": Declared("index-rag", rag_int(3), const(0), claim="T5-RAG"),
    "cgram-rag": Declared("cgram-rag", rag_int(3), const(0), claim="T5-RAG"),
    "counting-rag": Declared("counting-rag", rag_int(4), const(0), claim="T5-RAG"),
    "istree-rag-paper": Declared("istree-rag-paper", rag_int(6), const(0), claim="T5-RAG"),
    "istree-rag": Declared("istree-rag", rag_int(7), const(0), claim="T5-RAG"),
}


# ============================================================================
# T4.1: cot_hierarchy.py
def iterate_code_bound(B, n):
    """V = m + T + 10 = n^2 + 2n + 10 >= |tau| of every candidate (step tokens up to
    m + T + 1, |out| <= m + 1; m = 2n, T = n^2)."""
    return n * n + 2 * n + 10


def iterate_readout_bound(B, n):
    """|readout logit| 2 tau out - tau^2 <= 3 V^2."""
    V = iterate_code_bound(B, n)
    return 3 * V * V


def _int_iterate(B, n, a, c):
    # readout logits < 3 V^2 < 2^(2 lc V + 2); + 1
    return 2 * B.lc(iterate_code_bound(B, n)) + 3


ITERATE = Declared("iterate-rnn", _int_iterate, const(0), claim="T4.1", two_limb=True)


def iterate_steps(B, n):
    """T(n) = n^2 applications of g_n (the CoT length)."""
    return n * n


# ============================================================================
# T4.7-up: istree.py (N vertices, at most M edges)
ISTREE_FRAC_BITS = 1
ISTREE_HEADER = 2


def istree_positions(B, nv, m):
    """T = 3M + 2N + 4: [BOS], the header, 3 tokens per edge, [EOS], the tour, [EOS]."""
    return 3 * m + 2 * nv + 2 + ISTREE_HEADER


def istree_tau_bound(B, nv):
    """V = max(N + 1, 31) >= |tau| of every token the model reads."""
    return B.max(nv + 1, -token_code(COUNT))


def istree_cot(B, nv):
    """CoT tokens before the answer: a tour of <= 2N - 1 vertices and its [EOS]."""
    return 2 * nv


def istree_int(B, nv, m):
    """I(N, M) = 2 ceil(log2 max(T, V)) + ceil(log2 V) + 6 (derivation: istree.declared_int_bits)."""
    V = istree_tau_bound(B, nv)
    return 2 * B.lc(B.max(istree_positions(B, nv, m), V)) + B.lc(V) + 6


# ============================================================================
# lower-bound target: targets.register_index_rnn (capacity c, numbers up to max_number)
def register_int_bits(B, c, max_number, f):
    """Every magnitude the register RNN computes: the step input 2^f P0 + 1, the
    reg pre-activations 2 P0, query_in 33 + M (M = max_number + 1), done's hat input
    2 max_number + 2, the readout logits (3); P0 = 2^(c - f)."""
    p0 = B.pow2(c - f)
    return B.max(B.bits(B.pow2(f) * p0 + 1), B.bits(2 * p0), B.bits(33 + max_number + 1),
                 B.bits(2 * max_number + 2), B.bits(3))


# ============================================================================
# sim: simulate.py (a Transformer with CoT simulating a given linear RNN)
@dataclass(frozen=True)
class SimRNN:
    """The constants of a simulated linear RNN that the simulator's format depends
    on (simulate.RNNSimulator.params reads them off the RNN): its format Q(I_R).(f_R),
    the declared state range I_s, the number S of state numbers, its largest number,
    the readout weight sum |w_d| (nearest-code readouts; 0 for indicator readouts)
    and the largest embedding coefficients (constant features, including 2^f_R for
    1/(tau + p); tau; tau^2)."""

    name: str
    int_bits: int
    frac_bits: int
    state_bits: int
    states: int
    max_number: int
    readout_weight: int
    emb: tuple = (0, 0, 0)


def sim_tau_max(B, p: SimRNN, steps):
    """The largest token code of the simulator: the counter K(steps) has number
    Kb + steps, Kb = MR + 2 + S 2^(I_s + f_R + 1); tau = number + 1, and one more
    for the vocabulary's end (the layout of simulate.py's module doc)."""
    return p.max_number + 2 + p.states * B.pow2(p.state_bits + p.frac_bits + 1) + steps + 2


def sim_clamp(B, p: SimRNN) -> tuple:
    """(v_max, v_bound, big) of the final MLP's clamp: |v| < v_max = w_abs 2^I_R;
    v_bound = v_max + (code span) + 1 bounds |v - code|; the gate constant big =
    v_bound + code span + 2 (obligation ``clamp.gate``: big >= v_max - TAU_MIN)."""
    v_max = p.readout_weight * B.pow2(p.int_bits)
    span = p.max_number + 1 - SPECIAL_MIN_CODE
    v_bound = v_max + span + 1
    return v_max, v_bound, v_bound + span + 2


def sim_emb_bound(B, p: SimRNN, steps):
    """max |coef x feature(token)| over every code up to sim_tau_max (>= 1 so that its bits are defined)."""
    T = sim_tau_max(B, p, steps)
    return B.max(p.emb[0], p.emb[1] * T, p.emb[2] * T * T, 1)


def sim_needs(B, p: SimRNN, n_pos, steps) -> dict:
    """The integer bits each part of the simulator needs at context n_pos (positions
    0..n_pos) and at most ``steps`` RNN steps: readout logits 3 tau_max^2, the
    position heads 3 lambda (n_pos + 2)^2 + lambda n_pos (keys pos + 1 <= n_pos + 1,
    one more for the shifted queries), firstK (lambda = mu P + mu) 3 lambda + mu n_pos,
    the embedded features, the final MLP's gates 2 V + big + v_bound, the RNN's own
    values (I_R); each + 2 (a difference of two, and the rounding of a sum of them)."""
    lam = B.sharp(p.frac_bits)
    T = sim_tau_max(B, p, steps)
    _, v_bound, big = sim_clamp(B, p)
    return {
        "readout.range": B.bits(3 * T * T) + 2,
        "position.range": B.bits(3 * lam * (n_pos + 2) ** 2 + lam * n_pos) + 2,
        "firstK.range": B.bits((lam * n_pos + lam) * 3 + lam * n_pos) + 2,
        "embedding.range": B.bits(sim_emb_bound(B, p, steps)) + 3,
        "next_code.range": B.bits(2 * (T + 1) + big + v_bound) + 2,
        "rnn.range": p.int_bits + 4,
    }


def sim_int(B, p: SimRNN, n_pos, steps):
    """I of the simulator: the largest of :func:`sim_needs` (so each of its
    obligations holds by definition; ``rnngap certify`` says so)."""
    return B.max(*sim_needs(B, p, n_pos, steps).values())


def sim_declared(p: SimRNN) -> Declared:
    """I(n), f(n) of the simulator of ``p`` at context length n (at most n RNN steps:
    every simulator with context <= n has a format <= this one, I nondecreasing)."""
    return Declared(f"rnnsim-transformer[{p.name}]", lambda B, n, a, c: sim_int(B, p, n, n), const(p.frac_bits), claim="sim")


__all__ = ["A", "C", "INT", "M_SYM", "N", "SYM", "Declared", "Fraction"]
