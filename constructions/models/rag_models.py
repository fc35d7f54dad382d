"""Constant-size linear RNNs with in-context RAG (docs/theory.md §2, claim T5-RAG).

Each construction is a :class:`~constructions.build.rnn_program.Program` compiled to a
``linear_rnn`` model, run greedily by :func:`constructions.build.generate.generate` with
a fresh plain :class:`~constructions.models.rag.RagOracle`, so the model writes every
alternation, group and lookahead of its queries itself: :func:`index_rag`,
:func:`cgram_rag` (and :func:`ar_rag`), :func:`counting_rag`, :func:`istree_rag`
(a DFS whose queries cover both edge orientations and skip the parent). Every
weight is an integer (f = 0), I(n) = O(log n), and the state is a constant count
of numbers. :func:`istree_rag_paper` is format reproduction only: the paper's
retrieval CoT through :mod:`constructions.models.rag_dialect`; no theorem row rests on
it.

Details (each CoT, resources, CoT bounds): docs/internals/models.md#rag_models
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import sympy as sp

from rnngap.constructions.machine.fixedpoint import log2_ceil
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError
from rnngap.constructions.build.generate import Generation, generate
from rnngap.constructions.build.model import Model
from .rag import RagOracle, token_name
from .rag_dialect import PaperDialectOracle
from rnngap.constructions.build.rnn_program import Program
from rnngap.constructions.machine.vocab import (
    BOS, DASH, ENDSEARCH, EOS, FAILED, FALSE, META_TOKENS, QUERY, STARTSEARCH, TILDE, TRUE, Vocab,
    number_token, token_code,
)

from .bounds import INT as _INT, N as N_SYM, RAG as _RAG, RAG_COT as _RAG_COT  # noqa: E402  (written once)


def _cot(name: str, n: int, *c) -> int:
    """The declared CoT bound of a T5-RAG model (constructions/models/bounds.py)."""
    return _RAG_COT[name](_INT, n, *c)

M = META_TOKENS
CAP, NONCAP, CLOSE, ANY, ANY_NUMBER, STAR, NEG_LOOKAHEAD = (
    M["[(]"], M["[(?:]"], M["[)]"], M["[.]"], M["[#]"], M["[*]"], M["[(?!]"])
BRANCH_RESET, ALT, LAZY_ANY = M["[(?|]"], M["[|]"], M["[.*?]"]


def tau(t: int) -> int:
    return token_code(t)


@dataclass
class RagConstruction:
    """A compiled linear RNN + the way to run it with the oracle.

    ``int_bits_declared(n)`` / ``int_expr`` is the declared I(n) (f = 0);
    ``cot_bound`` the declared CoT bound for this instance size."""

    name: str
    task: str
    n: int
    program: Program
    model: Model
    int_bits_declared: int
    int_expr: sp.Expr
    cot_bound: int
    dialect: str = "plain"
    answer_tokens: tuple[int, ...] | None = None
    notes: dict = field(default_factory=dict)

    @property
    def state_bits(self) -> int:
        return self.model.resources.state_bits

    @property
    def params(self) -> int:
        return self.model.resources.params

    def oracle(self, timeout: float | None = None) -> RagOracle:
        """A fresh oracle: the plain :class:`RagOracle` (every theorem row), or for
        ``dialect="paper"`` (the paper-format IsTree model only) the dialect of
        :mod:`constructions.models.rag_dialect`."""
        kw = {} if timeout is None else {"timeout": timeout}
        if self.dialect == "plain":
            return RagOracle(**kw)
        if self.dialect == "paper":
            return PaperDialectOracle(**kw)
        raise ValueError(f"{self.name}: unknown dialect {self.dialect!r} (plain or paper)")

    def run(self, prompt: Sequence[int], oracle: RagOracle | None | bool = True,
            max_cot: int | None = None) -> Generation:
        """Generate on ``prompt`` with a fresh oracle (``oracle=False``: no oracle,
        the RNN alone; ``[ENDSEARCH]`` then gets no answer)."""
        if oracle is True:
            oracle = self.oracle()
        elif oracle is False:
            oracle = None
        cap = self.cot_bound if max_cot is None else max_cot
        if self.answer_tokens is None:
            return generate(self.model, prompt, max_cot=cap, oracle=oracle, answer_after=EOS)
        return generate(self.model, prompt, answer_tokens=self.answer_tokens, max_cot=cap, oracle=oracle)


def _finish(p: Program, name: str, task: str, n: int, declared: Callable[[int], int], expr: sp.Expr,
            cot_bound: int, fmt: FixedFormat | None, prompt_length: int | None = None, **kw) -> RagConstruction:
    """Compile ``p`` in the declared format. ``prompt_length``: the longest prompt of
    the task at this n; the model then refuses contexts longer than prompt + CoT
    bound (``Model.max_positions``) before running."""
    need = p.required_int_bits()
    m = max(n, p.vocab.max_number)      # the alphabet enters the codes: declare for the largest number
    I = declared(m)
    if need > I:
        raise MarginError(f"{name}: needs {need} integer bits, declares {I} for n={n}, largest number {m}")
    model = p.compile(fmt or FixedFormat(I, 0))
    if prompt_length is not None:
        model.spec.max_positions = model.max_positions = prompt_length + cot_bound
    return RagConstruction(name, task, n, p, model, I, expr, cot_bound, **kw)


# ----------------------------------------------------------------------------
# Index
# largest intermediate: the readout logit 2 T V + T^2 with T = n + 1 (token codes),
# V <= 2 T (two rules can fire together at a prompt position): < 5 (n + 21)^2
index_int_bits = _RAG["index-rag"].int_bits
INDEX_INT = _RAG["index-rag"].int_expr


def index_rag(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> RagConstruction:
    """Index with RAG: ``[BOS] x_1..x_n [QUERY] i`` -> x_i; CoT i + 7 <= n + 7 tokens."""
    vocab = Vocab(max(n, alphabet), meta=True)
    p = Program(f"index-rag(n={n})", vocab, claim="T5-RAG")
    s1, = p.delay_line("tok", p.token, 1)
    is_i = p.equal("is_i", s1, tau(QUERY))                   # the current token is the query i
    ival = p.latch("ival", is_i, p.token)                     # tau(i) = i + 1
    dots = p.counter("dots", p.is_token(ANY), 0, n + 1)
    more = p.at_least("more", ival - 3 - dots, 0)             # dots <= i - 2: another wildcard
    is_bos, is_dot = p.is_token(BOS), p.is_token(ANY)
    after_cap = p.equal("after_cap", s1, tau(CAP))
    rules = [
        (is_i, tau(STARTSEARCH)),
        (p.is_token(STARTSEARCH), tau(BOS)),
        (p.all_of("dot_bos", [is_bos, more]), tau(ANY)),
        (p.all_of("dot_dot", [is_dot, more], [after_cap]), tau(ANY)),
        (p.all_of("open_bos", [is_bos], [more]), tau(CAP)),
        (p.all_of("open_dot", [is_dot], [more, after_cap]), tau(CAP)),
        (p.is_token(CAP), tau(ANY)),
        (p.all_of("close", [is_dot, after_cap]), tau(CLOSE)),
        (p.is_token(CLOSE), tau(ENDSEARCH)),
        (p.equal("retrieved", s1, tau(ENDSEARCH)), tau(EOS)),
        (p.is_token(EOS), s1),
    ]
    p.emit(rules)
    return _finish(p, p.name, "index", n, index_int_bits, INDEX_INT, _cot("index-rag", n), fmt, prompt_length=n + 3)


# ----------------------------------------------------------------------------
# c-gram / AR
cgram_int_bits = _RAG["cgram-rag"].int_bits
CGRAM_INT = _RAG["cgram-rag"].int_expr


def cgram_rag(n: int, *, alphabet: int = 2, c: int = 3, fmt: FixedFormat | None = None) -> RagConstruction:
    """c-gram retrieval with RAG: ``... [QUERY] q_1..q_{c-1}`` -> the token after the first
    occurrence of the (c-1)-gram; CoT c + 6 tokens (constant)."""
    if c < 2:
        raise ValueError(f"c-gram needs c >= 2, got {c}")
    g = c - 1
    vocab = Vocab(max(n, alphabet), meta=True)
    p = Program(f"{c}-gram-rag(n={n})", vocab, claim="T5-RAG")
    s = [p.token] + p.delay_line("tok", p.token, g)           # s[k] = token k places back
    rules = [(p.equal("start", s[g], tau(QUERY)), tau(STARTSEARCH))]
    for k in range(g):                                         # SS is k places back: copy q_{k+1}
        cond = p.is_token(STARTSEARCH) if k == 0 else p.equal(f"ss@-{k}", s[k], tau(STARTSEARCH))
        rules.append((cond, s[g]))
    rules += [
        (p.equal(f"ss@-{g}", s[g], tau(STARTSEARCH)), tau(CAP)),
        (p.is_token(CAP), tau(ANY)),
        (p.is_token(ANY), tau(CLOSE)),
        (p.is_token(CLOSE), tau(ENDSEARCH)),
        (p.equal("retrieved", s[1], tau(ENDSEARCH)), tau(EOS)),
        (p.is_token(EOS), s[1]),
    ]
    p.emit(rules)
    return _finish(p, p.name, "cgram" if c > 2 else "ar", n, cgram_int_bits, CGRAM_INT, _cot("cgram-rag", n, c), fmt,
                   prompt_length=n + c + 1)


def ar_rag(n: int, *, alphabet: int = 2, fmt: FixedFormat | None = None) -> RagConstruction:
    """AR with RAG: the 2-gram construction (``SS q [(] [.] [)] ES r [EOS]``)."""
    return cgram_rag(n, c=2, alphabet=alphabet, fmt=fmt)


# ----------------------------------------------------------------------------
# Counting
counting_int_bits = _RAG["counting-rag"].int_bits
COUNTING_INT = _RAG["counting-rag"].int_expr


def counting_rag(n: int, *, alphabet: int = 3, fmt: FixedFormat | None = None) -> RagConstruction:
    """Counting with RAG: ``... [QUERY] q t`` -> number 1 iff q occurs more than t times;
    CoT 8 t + 15 <= 8 n + 15 tokens."""
    vocab = Vocab(max(n, alphabet), meta=True)
    p = Program(f"counting-rag(n={n})", vocab, claim="T5-RAG")
    s1, s2 = p.delay_line("tok", p.token, 2)
    is_q = p.equal("is_q", s1, tau(QUERY))
    is_t = p.equal("is_t", s2, tau(QUERY))
    q = p.latch("q", is_q, p.token)
    tval = p.latch("t", is_t, p.token)                        # tau(t) = t + 1
    stars = p.counter("stars", p.is_token(STAR), 0, n + 2)
    block = p.at_least("block", tval - 1 - stars, 0)           # the k-th star with k <= t: a block B
    tok = p.token
    is_star = p.is_token(STAR)
    close = p.is_token(CLOSE)
    after_neg = p.equal("s1=(?!", s1, tau(NEG_LOOKAHEAD))
    after_cap = p.equal("s1=(", s1, tau(CAP))
    ret_failed = p.equal("s1=FAILED", s1, tau(FAILED))
    is_eos = p.is_token(EOS)
    rules = [
        (is_t, tau(STARTSEARCH)),
        (p.is_token(STARTSEARCH), tau(BOS)),
        (p.all_of("bos_in_query", [p.is_token(BOS), p.equal("s1=SS", s1, tau(STARTSEARCH))]), tau(NONCAP)),
        (p.all_of("block_end", [p.is_number, p.equal("s1=*", s1, tau(STAR))]), tau(NONCAP)),
        (p.is_token(NONCAP), tau(NEG_LOOKAHEAD)),
        (p.is_token(NEG_LOOKAHEAD), q),
        (after_neg, tau(CLOSE)),
        (p.all_of("close_look", [close, p.equal("s2=(?!", s2, tau(NEG_LOOKAHEAD))]), tau(ANY_NUMBER)),
        (p.is_token(ANY_NUMBER), tau(CLOSE)),
        (p.all_of("close_run", [close, p.equal("s1=#", s1, tau(ANY_NUMBER))]), tau(STAR)),
        (p.all_of("star_block", [is_star, block]), q),
        (p.all_of("star_final", [is_star], [block]), tau(CAP)),
        (p.is_token(CAP), q),
        (after_cap, tau(CLOSE)),
        (p.all_of("close_cap", [close, p.equal("s2=(", s2, tau(CAP))]), tau(ENDSEARCH)),
        (p.equal("retrieved", s1, tau(ENDSEARCH)), tau(EOS)),
        (p.all_of("yes", [is_eos], [ret_failed]), tau(number_token(1))),
        (p.all_of("no", [is_eos, ret_failed]), tau(number_token(0))),
    ]
    p.emit(rules)
    return _finish(p, p.name, "counting", n, counting_int_bits, COUNTING_INT, _cot("counting-rag", n), fmt,
                   prompt_length=n + 4)


# ----------------------------------------------------------------------------
# IsTree
ISTREE_WINDOW = 13
"""Delay slots of the IsTree construction: its rules read s_1..s_13."""

from .bounds import RAG_ISTREE_STEP_TOKENS as ISTREE_STEP_TOKENS  # noqa: E402
"""Tokens of one DFS step of the retrieval CoT, at most: u SS u ~ ES p (6), SS u - c ES w (6),
SS u - p ES w (6), SS w ~ ES r (5), w ~ u (3)."""


istree_int_bits = _RAG["istree-rag-paper"].int_bits
ISTREE_INT = _RAG["istree-rag-paper"].int_expr


def istree_cot_bound(n_nodes: int) -> int:
    """At most 2N - 1 DFS steps (stack tops = the Euler tour) plus [EOS]; the label is the answer."""
    return _cot("istree-rag-paper", n_nodes)


class _Window:
    """The token window s_0..s_K of a RAG program (s_0 the current token, s_k the token
    k steps back, by a delay line) and memoised tests on it: ``eq(k, t)`` = [s_k = t],
    ``num(k)`` = [s_k is a number], ``same(a, b)`` = [s_a = s_b]. ``all_of`` is the
    program's conjunction gadget."""

    def __init__(self, p: Program, depth: int):
        self.p = p
        self.s = [p.token] + p.delay_line("tok", p.token, depth)
        self.memo: dict = {}
        self.all_of = p.all_of

    def eq(self, k: int, t: int):
        key = (k, t)
        if key not in self.memo:
            self.memo[key] = self.p.is_token(t) if k == 0 else self.p.equal(f"s{k}={_nm(t)}", self.s[k], tau(t))
        return self.memo[key]

    def num(self, k: int):
        key = (k, "num")
        if key not in self.memo:
            self.memo[key] = self.p.is_number if k == 0 else self.p.at_least(f"s{k}=num", self.s[k], 1)
        return self.memo[key]

    def same(self, a: int, b: int):
        return self.p.equal(f"s{a}=s{b}", self.s[a], self.s[b])


def istree_rag_paper(n_nodes: int, fmt: FixedFormat | None = None) -> RagConstruction:
    """IsTree with RAG on N = ``n_nodes`` vertices writing the paper's retrieval CoT, token
    for token, for FORMAT REPRODUCTION: its short queries (``u -``, ``u - c``, ``u ~``) mean
    what they mean only through the dialect oracle of :mod:`constructions.models.rag_dialect`
    (``dialect="paper"``), so no T5-RAG theorem row rests on it; :func:`istree_rag` is the
    construction that writes every alternation and group itself for the plain oracle.

    N is a build-time integer weight (the label compares the record counter with
    N - 1; the tokens cannot show an isolated largest vertex), like the sharpness
    lambda(n) of an attention construction; the architecture does not depend on it.

    Rules (s_0 = current token; 'num' = a vertex number; every case of the CoT grammar of
    ``checks/tasks/istree.py`` is one row; at each CoT position exactly one row fires):

    ========================================================  ======================
    s_0 = [EOS], first [EOS]                                   0 (the root)
    s_0 = [EOS], second, s_3 != ~ and N - 1 records            [TRUE], else [FALSE]
    s_0 num and (s_1 = [EOS], or s_1 = [FAILED], s_2 = ES,      SS (s_0 is a stack top)
    s_3 != ~, or s_2 = ~, s_4 = [FAILED])
    s_0 = SS, s_2 != ES                                        s_1 (query 'u ~' for top u)
    s_0 = SS, s_2 = ES, s_3 = ~                                s_4 (u, for 'u -')
    s_0 = SS, s_2 = ES, s_3 = -: s_1 = s_6 ? s_4 : s_1          requery 'u - p' or 'w ~'
    s_0 = SS, s_2 = ES, s_3 num: s_1 = s_7 ? s_5 : s_1          (same after 'u - c')
    s_1 = SS: s_3 != ES -> ~; s_4 = ~ -> -; else s_0 = s_2 ? ~ : -
    s_0 = ~: s_2 = SS -> ES; s_2 = [FAILED] -> u (s_10 if s_9 = -, else s_11)
    s_0 = -: s_5 != ~ -> s_3 (= p); s_9 != [FAILED] -> ES (first visit); else the last
             child c (s_12 if s_11 = -, else s_13)
    s_0 num, s_1 = -                                           ES
    s_1 = ES, s_2 = ~ (parent lookup answered): s_6 != ES -> SS;  else (visit check)
             r num or w = 0 -> [EOS], else w (= s_3)
    s_1 = ES, s_2 != ~ (neighbour answered): w num -> SS; w = [FAILED] -> pop: p
             (s_5 if s_2 = -, else s_6), or [EOS] if p = [FAILED] (the root)
    s_0 num, s_1 = ~                                           s_2 (the pushed top)
    s_0 num, s_1 = [FAILED], s_2 = ES, s_3 = ~                 ~ (record 'w ~ u')
    ========================================================  ======================
    """
    N = int(n_nodes)
    if N < 1:
        raise ValueError(f"IsTree needs n_nodes >= 1, got {N}")
    p = Program(f"istree-rag-paper(N={N})", Vocab(max(N - 1, 1)), claim="T5-RAG")
    w = _Window(p, ISTREE_WINDOW)
    rules = _paper_label_rules(w, N) + _paper_top_rules(w) + _paper_subject_rules(w) + \
        _paper_marker_rules(w) + _paper_answer_rules(w)
    p.emit(rules)
    return _finish(p, p.name, "istree", N, istree_int_bits, ISTREE_INT, istree_cot_bound(N), fmt,
                   dialect="paper", answer_tokens=(TRUE, FALSE))


def _paper_label_rules(w: _Window, N: int) -> list:
    """D1: after an [EOS]: the root 0, or the label ([TRUE] iff N - 1 records 'w ~ u'
    and the run did not end on a cycle)."""
    p, eq, A = w.p, w.eq, w.all_of
    eos_count = p.counter("eos", p.is_token(EOS), 0, 2)
    record = A("record", [eq(0, TILDE), eq(2, FAILED)])
    records = p.counter("records", record, 0, N)
    first_eos = p.equal("eos=1", eos_count, 1)
    second_eos = p.equal("eos=2", eos_count, 2)
    n_ok = p.equal("records=N-1", records, N - 1)
    true = A("label_true", [eq(0, EOS), second_eos, n_ok], [eq(3, TILDE)])
    return [
        (A("root", [eq(0, EOS), first_eos]), tau(number_token(0))),
        (true, tau(TRUE)),
        (A("label_false", [eq(0, EOS), second_eos], [true]), tau(FALSE)),
    ]


def _paper_top_rules(w: _Window) -> list:
    """D2, D3: a stack top was written (SS next); after SS, the query's subject."""
    s, eq, num, same, A = w.s, w.eq, w.num, w.same, w.all_of
    rules = [
        (A("top_root", [num(0), eq(1, EOS)]), tau(STARTSEARCH)),
        (A("top_pop", [num(0), eq(1, FAILED), eq(2, ENDSEARCH)], [eq(3, TILDE)]), tau(STARTSEARCH)),
        (A("top_push", [num(0), eq(2, TILDE), eq(4, FAILED)]), tau(STARTSEARCH)),
        (A("ss_top", [eq(0, STARTSEARCH)], [eq(2, ENDSEARCH)]), s[1]),
        (A("ss_nbr", [eq(0, STARTSEARCH), eq(2, ENDSEARCH), eq(3, TILDE)]), s[4]),
    ]
    d3c = A("ss_after_first", [eq(0, STARTSEARCH), eq(2, ENDSEARCH), eq(3, DASH)])
    d3e = A("ss_after_next", [eq(0, STARTSEARCH), eq(2, ENDSEARCH)], [eq(3, TILDE), eq(3, DASH)])
    w_is_p6, w_is_p7 = same(1, 6), same(1, 7)
    return rules + [
        (A("requery_first", [d3c, w_is_p6]), s[4]),
        (A("visit_first", [d3c], [w_is_p6]), s[1]),
        (A("requery_next", [d3e, w_is_p7]), s[5]),
        (A("visit_next", [d3e], [w_is_p7]), s[1]),
    ]


def _paper_subject_rules(w: _Window) -> list:
    """D4, D5: after 'SS x' the query's operator; after '~' its end or the record's u."""
    s, eq, num, same, A = w.s, w.eq, w.num, w.same, w.all_of
    d4 = A("subject", [eq(1, STARTSEARCH), num(0)])
    after_answer = A("subject_after_answer", [d4, eq(3, ENDSEARCH)])
    s0_is_s2 = same(0, 2)
    rules = [
        (A("subject_top", [d4], [eq(3, ENDSEARCH)]), tau(TILDE)),
        (A("subject_nbr", [after_answer, eq(4, TILDE)]), tau(DASH)),
        (A("subject_visit", [after_answer, s0_is_s2], [eq(4, TILDE)]), tau(TILDE)),
        (A("subject_requery", [after_answer], [s0_is_s2, eq(4, TILDE)]), tau(DASH)),
    ]
    rec_u = A("record_u", [eq(0, TILDE), eq(2, FAILED)])
    return rules + [
        (A("tilde_query", [eq(0, TILDE), eq(2, STARTSEARCH)]), tau(ENDSEARCH)),
        (A("record_u_first", [rec_u, eq(9, DASH)]), s[10]),
        (A("record_u_next", [rec_u], [eq(9, DASH)]), s[11]),
    ]


def _paper_marker_rules(w: _Window) -> list:
    """D6, D7: after '-' (the parent p, ES, or the last child c); 'SS u - c' -> ES."""
    s, eq, num, A = w.s, w.eq, w.num, w.all_of
    dash_first = A("dash_step", [eq(0, DASH), eq(5, TILDE)])
    revisit = A("dash_revisit", [dash_first, eq(9, FAILED)])
    return [
        (A("dash_requery", [eq(0, DASH), eq(4, ENDSEARCH)], [eq(5, TILDE)]), s[3]),
        (A("dash_first_visit", [dash_first], [eq(9, FAILED)]), tau(ENDSEARCH)),
        (A("dash_last_first", [revisit, eq(11, DASH)]), s[12]),
        (A("dash_last_next", [revisit], [eq(11, DASH)]), s[13]),
        (A("after_c", [num(0), eq(1, DASH)]), tau(ENDSEARCH)),
    ]


def _paper_answer_rules(w: _Window) -> list:
    """D9 to D12: a parent lookup answered (SS, a cycle: [EOS], or the new vertex), a
    neighbour query answered (SS, pop to p, or [EOS] at the root), the record
    'w ~ u', then the pushed top w."""
    p, s, eq, num, A = w.p, w.s, w.eq, w.num, w.all_of
    looked = A("parent_answered", [eq(1, ENDSEARCH), eq(2, TILDE)])
    visit = A("visit_answered", [looked, eq(6, ENDSEARCH)])
    w_root = p.equal("s3=0", s[3], tau(number_token(0)))
    rules = [
        (A("parent_known", [looked], [eq(6, ENDSEARCH)]), tau(STARTSEARCH)),
        (A("cycle_visited", [visit, num(0)]), tau(EOS)),
        (A("cycle_root", [visit, eq(0, FAILED), w_root]), tau(EOS)),
        (A("new_vertex", [visit, eq(0, FAILED)], [w_root]), s[3]),
    ]
    nb = A("neighbour_answered", [eq(1, ENDSEARCH)], [eq(2, TILDE)])
    none = A("no_neighbour", [nb, eq(0, FAILED)])
    none_first = A("no_neighbour_first", [none, eq(2, DASH)])
    none_next = A("no_neighbour_next", [none], [eq(2, DASH)])
    return rules + [
        (A("neighbour_found", [nb, num(0)]), tau(STARTSEARCH)),
        (A("done_first", [none_first, eq(5, FAILED)]), tau(EOS)),
        (A("pop_first", [none_first], [eq(5, FAILED)]), s[5]),
        (A("done_next", [none_next, eq(6, FAILED)]), tau(EOS)),
        (A("pop_next", [none_next], [eq(6, FAILED)]), s[6]),
        (A("pushed_top", [num(0), eq(1, TILDE)]), s[2]),
        (A("record_tilde", [num(0), eq(1, FAILED), eq(2, ENDSEARCH), eq(3, TILDE)]), tau(TILDE)),
    ]


# ----------------------------------------------------------------------------
# IsTree for the plain oracle (T5-RAG evidence)
PLAIN_WINDOW = 16
"""Delay slots of :func:`istree_rag`: its rules read s_1..s_16."""

from .bounds import RAG_PLAIN_LINE_TOKENS as PLAIN_LINE_TOKENS  # noqa: E402
"""Tokens of one line of :func:`istree_rag`'s CoT, at most: the header ``u ~ p c`` (4),
``SS`` A(u, c, p) ``ES w`` (1 + 29 + 2), then ``SS x ~ [(] [#] [)] ES r`` (7)."""

istree_plain_int_bits = _RAG["istree-rag"].int_bits
ISTREE_PLAIN_INT = _RAG["istree-rag"].int_expr


def istree_plain_cot_bound(n_nodes: int) -> int:
    """At most 2N - 1 lines (the root, one per push, one per pop) of <= 43 tokens, then [EOS]."""
    return _cot("istree-rag", n_nodes)


def neighbour_query(u: int, p: int, c: int | None = None) -> list[int]:
    """The neighbour query :func:`istree_rag` writes (token ids; u, p, c are token ids):
    ``F(u, p)`` = ``[(?|] u - [(?!] p [)] [(] [#] [)] [|] [(?!] p [)] [(] [#] [)] - u [)]``, u's
    first neighbour other than p in edge-list order, either orientation; with ``c``,
    ``[(?:] u - c [|] c - u [)] [.*?]`` F(u, p): the first such neighbour after the edge {u, c}."""
    f = [BRANCH_RESET, u, DASH, NEG_LOOKAHEAD, p, CLOSE, CAP, ANY_NUMBER, CLOSE, ALT,
         NEG_LOOKAHEAD, p, CLOSE, CAP, ANY_NUMBER, CLOSE, DASH, u, CLOSE]
    if c is None:
        return f
    return [NONCAP, u, DASH, c, ALT, c, DASH, u, CLOSE, LAZY_ANY] + f


def istree_rag(n_nodes: int, fmt: FixedFormat | None = None) -> RagConstruction:
    """IsTree with RAG on N = ``n_nodes`` vertices for the PLAIN oracle: the model writes
    every alternation, group and lookahead itself (docs/theory.md §2; no dialect).

    Prompt ``[BOS] u - v ... [EOS]`` (edges written with ``-``). The CoT is a DFS from 0
    in lines; a line starts with the header ``u ~ p c`` (top u, its parent p, the last
    neighbour scanned c; ``[FAILED]`` for none) and asks for u's next neighbour other
    than p (:func:`neighbour_query`: ``SS F(u, p) ES w`` if c is none, else
    ``SS A(u, c, p) ES w``). Then

    * w = [FAILED], p = [FAILED]: the root is done: ``[EOS]``;
    * w = [FAILED], p a vertex: pop: ``SS p ~ [(] [#] [)] ES pp`` (p's parent from its first
      header), then the line ``p ~ pp u``;
    * w a vertex: ``SS w ~ [(] [#] [)] ES r``; r a vertex (w has a header: visited) or w = 0:
      a cycle, ``[EOS]``; else push: the line ``w ~ u [FAILED]``.

    Then the label: [TRUE] iff the root finished (the token 4 before the last [EOS] is a
    vertex, the end ``- u [)]`` of a neighbour query) and N headers ended with [FAILED]
    (the root's and one per push: N vertices visited). The header ``u ~ p ...`` is also
    u's parent record: ``~`` occurs only in headers and queries, ``-`` only in the
    prompt, so ``x ~ [(] [#] [)]`` finds x's parent (nothing for 0, whose parent is
    [FAILED]) and the neighbour queries see only input edges. The plain-Python
    reference is ``checks/tasks/istree_rag.py`` ``plain_cot``.

    The next token is a function of the window s_0..s_16, the number of [EOS] seen and
    the number of headers ending in [FAILED]; each rule below is one row of that
    function, exactly one fires at every CoT position (tests/test_rag_models.py).
    """
    N = int(n_nodes)
    if N < 1:
        raise ValueError(f"IsTree needs n_nodes >= 1, got {N}")
    p = Program(f"istree-rag(N={N})", Vocab(max(N - 1, 1), meta=True), claim="T5-RAG")
    w = _Window(p, PLAIN_WINDOW)
    rules = _plain_eos_and_answer_rules(w, _plain_counters(w, N)) + _plain_header_rules(w) + \
        _plain_lookup_rules(w) + _plain_alternation_rules(w) + _plain_neighbour_rules(w)
    p.emit(rules)
    return _finish(p, p.name, "istree", N, istree_plain_int_bits, ISTREE_PLAIN_INT, istree_plain_cot_bound(N), fmt,
                   answer_tokens=(TRUE, FALSE))


def _plain_counters(w: _Window, N: int) -> tuple:
    """The two counters (``eos``: [EOS] seen; ``visited``: headers ending in [FAILED],
    one per visited vertex) and the label's condition: (first [EOS], second [EOS],
    label_true = the root finished (s_4 a vertex) and N vertices visited)."""
    p, eq, num, A = w.p, w.eq, w.num, w.all_of
    eos_count = p.counter("eos", p.is_token(EOS), 0, 2)
    visited = p.counter("visited", A("header_new", [eq(0, FAILED), eq(2, TILDE)]), 0, N)
    first_eos = p.equal("eos=1", eos_count, 1)
    second_eos = p.equal("eos=2", eos_count, 2)
    all_seen = p.equal("visited=N", visited, N)
    return first_eos, second_eos, A("label_true", [eq(0, EOS), second_eos, num(4), all_seen])


def _plain_eos_and_answer_rules(w: _Window, counters: tuple) -> list:
    """After [EOS] (the root, or the label) and after a retrieved token: the neighbour
    w of a query (pop, visit check, or [EOS] when the root is done) or the answer r of
    a parent lookup (the pop's header, a cycle: [EOS], or the push's header)."""
    p, s, eq, num, A = w.p, w.s, w.eq, w.num, w.all_of
    first_eos, second_eos, true = counters
    rn = A("r_neighbour", [eq(1, ENDSEARCH), num(3)])          # the answer w of a neighbour query
    rp = A("r_parent", [eq(1, ENDSEARCH), eq(3, ANY_NUMBER)])  # the answer of a parent lookup
    visit = A("r_visit", [rp, num(8)])
    zero6 = p.equal("s6=0", s[6], tau(number_token(0)))
    return [
        (A("root", [eq(0, EOS), first_eos]), tau(number_token(0))),
        (true, tau(TRUE)),
        (A("label_false", [eq(0, EOS), second_eos], [true]), tau(FALSE)),
        (A("root_done", [rn, eq(0, FAILED), eq(9, FAILED)]), tau(EOS)),
        (A("pop", [rn, eq(0, FAILED), num(9)]), tau(STARTSEARCH)),
        (A("visit_check", [rn, num(0)]), tau(STARTSEARCH)),
        (A("pop_header", [rp], [num(8)]), s[6]),
        (A("cycle_visited", [visit, num(0)]), tau(EOS)),
        (A("cycle_root", [visit, eq(0, FAILED), zero6]), tau(EOS)),
        (A("push_header", [visit, eq(0, FAILED)], [zero6]), s[6]),
    ]


def _plain_header_rules(w: _Window) -> list:
    """The header ``u ~ p c`` of a line, then SS."""
    s, eq, num, A = w.s, w.eq, w.num, w.all_of
    return [
        (A("h_tilde", [num(0), eq(2, ENDSEARCH)]), tau(TILDE)),
        (A("h_tilde_root", [num(0), eq(1, EOS)]), tau(TILDE)),
        (A("h_p_root", [eq(0, TILDE), eq(2, EOS)]), tau(FAILED)),
        (A("h_p_pop", [eq(0, TILDE), eq(3, ENDSEARCH), eq(10, FAILED)]), s[2]),
        (A("h_p_push", [eq(0, TILDE), eq(3, ENDSEARCH), num(10)]), s[13]),
        (A("h_c_root", [eq(1, TILDE), eq(3, EOS)]), tau(FAILED)),
        (A("h_c_pop", [eq(1, TILDE), eq(4, ENDSEARCH), eq(11, FAILED)]), s[14]),
        (A("h_c_push", [eq(1, TILDE), eq(4, ENDSEARCH), num(11)]), tau(FAILED)),
        (A("h_ss", [eq(2, TILDE), eq(5, ENDSEARCH)]), tau(STARTSEARCH)),
        (A("h_ss_root", [eq(2, TILDE), eq(4, EOS)]), tau(STARTSEARCH)),
    ]


def _plain_lookup_rules(w: _Window) -> list:
    """After SS: the neighbour query's opening, or a parent lookup ``x ~ [(] [#] [)]``."""
    s, eq, num, A = w.s, w.eq, w.num, w.all_of
    return [
        (A("q_first", [eq(0, STARTSEARCH), eq(3, TILDE), eq(1, FAILED)]), tau(BRANCH_RESET)),
        (A("q_after", [eq(0, STARTSEARCH), eq(3, TILDE), num(1)]), tau(NONCAP)),
        (A("q_pop", [eq(0, STARTSEARCH), eq(2, ENDSEARCH), eq(1, FAILED)]), s[10]),
        (A("q_visit", [eq(0, STARTSEARCH), eq(2, ENDSEARCH), num(1)]), s[1]),
        (A("p_tilde", [num(0), eq(1, STARTSEARCH)]), tau(TILDE)),
        (A("p_open", [eq(0, TILDE), eq(2, STARTSEARCH)]), tau(CAP)),
        (eq(0, CAP), tau(ANY_NUMBER)),
        (eq(0, ANY_NUMBER), tau(CLOSE)),
        (A("p_end", [eq(0, CLOSE), eq(1, ANY_NUMBER), eq(3, TILDE)]), tau(ENDSEARCH)),
    ]


def _plain_alternation_rules(w: _Window) -> list:
    """A(u, c, p) = ``[(?:] u - c [|] c - u [)] [.*?]`` F(u, p), token by token."""
    s, eq, num, A = w.s, w.eq, w.num, w.all_of
    NC, DS, AL = NONCAP, DASH, ALT
    return [
        (eq(0, NC), s[5]),
        (A("a2", [num(0), eq(1, NC)]), tau(DS)),
        (A("a3", [eq(0, DS), eq(2, NC)]), s[4]),
        (A("a4", [num(0), eq(1, DS), eq(3, NC)]), tau(AL)),
        (A("a5", [eq(0, AL), eq(4, NC)]), s[1]),
        (A("a6", [num(0), eq(1, AL)]), tau(DS)),
        (A("a7", [eq(0, DS), eq(2, AL)]), s[5]),
        (A("a8", [num(0), eq(1, DS), eq(3, AL)]), tau(CLOSE)),
        (A("a9", [eq(0, CLOSE), num(1), num(3)]), tau(LAZY_ANY)),
        (eq(0, LAZY_ANY), tau(BRANCH_RESET)),
    ]


def _plain_neighbour_rules(w: _Window) -> list:
    """F(u, p) = ``[(?|] u - [(?!] p [)] [(] [#] [)] [|] [(?!] p [)] [(] [#] [)] - u [)]``, then ES."""
    s, eq, num, A = w.s, w.eq, w.num, w.all_of
    BR, DS, NEG, CL, HN, AL, LZ = BRANCH_RESET, DASH, NEG_LOOKAHEAD, CLOSE, ANY_NUMBER, ALT, LAZY_ANY
    return [
        (A("f1_first", [eq(0, BR), eq(1, STARTSEARCH)]), s[5]),
        (A("f1_after", [eq(0, BR), eq(1, LZ)]), s[3]),
        (A("f2", [num(0), eq(1, BR)]), tau(DS)),
        (A("f3", [eq(0, DS), eq(2, BR)]), tau(NEG)),
        (A("f4_first", [eq(0, NEG), eq(1, DS), eq(4, STARTSEARCH)]), s[6]),
        (A("f4_after", [eq(0, NEG), eq(1, DS), eq(4, LZ)]), s[16]),
        (eq(1, NEG), tau(CL)),
        (A("f6", [eq(0, CL), eq(2, NEG)]), tau(CAP)),
        (A("f9", [eq(0, CL), eq(1, HN), eq(3, CL), eq(6, DS)]), tau(AL)),
        (A("f10", [eq(0, AL), eq(1, CL)]), tau(NEG)),
        (A("f11", [eq(0, NEG), eq(1, AL)]), s[6]),
        (A("f16", [eq(0, CL), eq(1, HN), eq(3, CL), eq(6, AL)]), tau(DS)),
        (A("f17", [eq(0, DS), eq(1, CL)]), s[15]),
        (A("f18", [num(0), eq(1, DS), eq(2, CL)]), tau(CL)),
        (A("f19", [eq(0, CL), num(1), eq(2, DS), eq(3, CL)]), tau(ENDSEARCH)),
    ]


def _nm(t: int) -> str:
    return token_name(t)


def istree_rag_predictor(max_vertices: int, max_edges: int) -> Callable[[list[int]], list[int]]:
    """``rnngap predict istree --model rag``: ``predict(prompt) -> CoT + [answer]`` for
    the vertex set {0..max id} of each prompt (the protocol of ``checks/cli/predict_istree.py``),
    in the paper's retrieval format: :func:`istree_rag_paper` with the paper dialect of
    :mod:`constructions.models.rag_dialect` (format reproduction, not T5-RAG evidence).

    The vertex count N is a build-time constant of :func:`istree_rag_paper` (its label rule
    compares the number of records with N - 1), so one model per distinct N of the
    file is built (cached; constant size, only that integer weight differs) and run with
    a fresh paper-dialect oracle. ``max_edges`` is not needed (the RNN state does not
    grow with the edge count). Edges written with ``~`` (docs/theory.md accepts both) are
    rewritten with ``-`` first: in this CoT ``~`` marks the parent records, and the
    oracle's ``u -`` queries read the input's edges."""
    if max_vertices < 1:
        raise ValueError(f"max_vertices must be >= 1, got {max_vertices}")
    built: dict[int, RagConstruction] = {}

    def predict(prompt: list[int]) -> list[int]:
        N = 1 + max((int(t) - number_token(0) for t in prompt if int(t) >= number_token(0)), default=0)
        if N > max_vertices:
            raise ValueError(f"istree-rag: a graph with max vertex id {N - 1} exceeds max_vertices={max_vertices}")
        if N not in built:
            built[N] = istree_rag_paper(N)
        c = built[N]
        end = prompt.index(EOS) if EOS in prompt else len(prompt)
        prompt = [DASH if (k < end and int(t) == TILDE) else int(t) for k, t in enumerate(prompt)]
        g = c.run(prompt)
        if g.stopped != "answer":
            raise RuntimeError(f"{c.name}: no answer within {c.cot_bound} CoT tokens")
        return g.cot + [g.answer]
    return predict
