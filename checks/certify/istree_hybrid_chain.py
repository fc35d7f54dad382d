"""The IsTree hybrid's composition: its proved layers, chained over the union-find CoT it writes.

checks/certify/istree_hybrid.py proves each layer of a built hybrid on its own, on free
inputs, under stated hypotheses. :func:`chain_facts` proves the composition: at
every position of the reference run, the values each layer is handed are the ones
its fact is proved for, and they make the next token the reference's. The
reference is the union-find CoT of checks/tasks/istree_unionfind.py, written
symbolically. The proof is an induction on the position: one z3 fact
``chain.<role>`` per role (N-symbolic) evaluates every layer by its proved plan
and steps the RNN's counts; ``chain.order`` (:func:`order_fact`) checks each
direction's one writer is before its readers. The facts read plans, not a model,
so they are proved once per process (:data:`_PROVED`).

Details (the reference, the proof, what is taken as given):
docs/internals/certify.md#istree_hybrid_chain
"""
from __future__ import annotations

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import BOS, DASH, EOS, FALSE, QUERY, TILDE, TRUE, token_code
from rnngap.constructions.models.hybrid import (
    AT_PARENT_RECORD, AT_SIZE_RECORD, AT_U_SIZE, AT_V_SIZE, CHAIN_MARKER, CHILD_ROOT, IS_BOS, IS_EOS, JOINS_OK,
    LAST_SU_HEAD, MERGED_SIZE, NEXT_CODE, PARENT_HEAD, PARENT_KEY, PARENT_ROOT, ROOTS_EQUAL, SIZE_HEAD, SIZE_KEY,
    U_SMALLER, delayed, squared,
)

from .layer_facts import conjoined_fact, int_value, token_flag, unmet, z3_value
from .istree_hybrid import (
    COUNTER_INPUTS, NEXT_INPUTS, RECORD_INPUTS, cot_code_range, OTHER_FLAGS, VALUES, StreamOps,
    TextStream, counter_hyps, counter_plan, direction_plan, embedding_plan, next_domain, plan,
    plan_text, record_hyps, record_plan,
)
from . import istree_hybrid
from .sizes import z3

LAYER = "composition"
BASIC = (IS_EOS, AT_SIZE_RECORD, CHAIN_MARKER, AT_U_SIZE)
"""The per-position flags whose counts the reference states (:meth:`_Ref.count`):
every prefix sum of the plan must be a combination of these."""
RECORD = {PARENT_KEY: "p", SIZE_KEY: "s"}
"""The key direction of each match head -> the role whose position holds a
record keyed there (the reference's design: "~ c p" keyed by c at p, "[QUERY]
p s" keyed by p at s; 0 everywhere else)."""

_C = {name: token_code(t) for name, t in (("BOS", BOS), ("EOS", EOS), ("TRUE", TRUE), ("FALSE", FALSE),
                                          ("DASH", DASH), ("TILDE", TILDE), ("QUERY", QUERY))}


class _Ref:
    """The reference run, symbolic: N, m, the prompt's and the segments' free
    functions, and the ranges of every application made (collected in
    :attr:`hyps` as they are made, each guarded by where it is a position)."""

    def __init__(self, tag: str):
        I = z3.IntSort()
        fn = lambda name, n=1: z3.Function(f"{tag}.ref.{name}", *([I] * n), I)   # noqa: E731
        self.N, self.m = z3.Ints(f"{tag}.ref.N {tag}.ref.m")
        self._U, self._V, self._SEP = fn("u"), fn("v"), fn("sep")
        self._A, self._B, self._SU, self._SV, self._St = fn("A"), fn("B"), fn("s_u"), fn("s_v"), fn("St")
        self._X, self._Y = fn("x", 2), fn("y", 2)
        self.hyps = [self.N >= 1, self.m >= 0, self._St(int_value(0)) == 3 * self.m + 2]
        self._seen: set = set()
        self._segs: dict = {}

    def _note(self, key: str, hyp) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.hyps.append(hyp)

    def vertex(self, v, guard) -> None:
        self._note(f"v {v.sexpr()}", z3.Implies(guard, z3.And(v >= 1, v <= self.N)))

    # --- the prompt
    def edge(self, i):
        return z3.And(i >= 0, i < self.m)

    def u(self, i):
        v = self._U(i)
        self.vertex(v, self.edge(i))
        return v

    def v(self, i):
        v = self._V(i)
        self.vertex(v, self.edge(i))
        return v

    def sep(self, i):
        s = self._SEP(i)
        self._note(f"sep {s.sexpr()}", z3.Implies(self.edge(i), z3.Or(s == _C["DASH"], s == _C["TILDE"])))
        return s

    def prompt_tok(self, j):
        """The prompt's code at position j (0 <= j <= 3m + 1)."""
        i, r = (j - 1) / 3, (j - 1) % 3
        return z3.If(j == 0, int_value(_C["BOS"]), z3.If(j == 3 * self.m + 1, int_value(_C["EOS"]),
                     z3.If(r == 0, self.u(i), z3.If(r == 1, self.sep(i), self.v(i)))))

    # --- the segments
    def seg(self, k) -> dict:
        """Segment k's lengths and values (its ranges noted, guarded by 0 <= k < m)."""
        key = k.sexpr()
        if key not in self._segs:
            self._segs[key] = self._seg(k)
        return self._segs[key]

    def _seg(self, k) -> dict:
        A, B, SU, SV = self._A(k), self._B(k), self._SU(k), self._SV(k)
        g = self.edge(k)
        key = k.sexpr()
        self._note(f"seg {key}", z3.Implies(g, z3.And(A >= 0, B >= 0, SU >= 2, SU <= self.N + 1, SV >= 2,
                                                      SV <= self.N + 1, self._X(k, int_value(0)) == self.u(k),
                                                      self._Y(k, int_value(0)) == self.v(k))))
        ru, rv = self.x(k, A), self.y(k, B)
        small = SU <= SV
        S = SU + SV - 1
        self._note(f"size {key}", z3.Implies(z3.And(g, ru != rv), S <= self.N + 1))    # a tree's size <= N
        return {"A": A, "B": B, "e": A + B, "SU": SU, "SV": SV, "ru": ru, "rv": rv, "C": z3.If(small, ru, rv),
                "P": z3.If(small, rv, ru), "S": S, "LEN": A + B + 14, "cycle": ru == rv}

    def x(self, k, i):
        v = self._X(k, i)
        self.vertex(v, z3.And(self.edge(k), i >= 0, i <= self._A(k)))
        return v

    def y(self, k, i):
        v = self._Y(k, i)
        self.vertex(v, z3.And(self.edge(k), i >= 0, i <= self._B(k)))
        return v

    def offsets(self, k) -> dict:
        """role -> its offset in segment k (the chains' roles: their first one)."""
        s = self.seg(k)
        A, e = s["A"], s["e"]
        out = {"xu": int_value(0), "rootu": A, "marku": A + 1, "su": A + 2, "xv": A + 3, "rootv": A + 3 + s["B"],
               "markv": e + 4, "sv": e + 5, "ru": e + 6, "su2": e + 7, "tilde": e + 8, "c": e + 9, "p": e + 10,
               "query": e + 11, "p2": e + 12, "s": e + 13}
        return out

    def seg_tok(self, k, q):
        """Segment k's code at offset q (0 <= q < its length)."""
        s = self.seg(k)
        A, e = s["A"], s["e"]
        rows = [(q <= A, self.x(k, q)), (q == A + 1, int_value(_C["DASH"])), (q == A + 2, s["SU"]),
                (q <= A + 3 + s["B"], self.y(k, q - A - 3)), (q == e + 4, int_value(_C["DASH"])), (q == e + 5, s["SV"]),
                (q == e + 6, s["ru"]), (q == e + 7, s["SU"]), (q == e + 8, int_value(_C["TILDE"])), (q == e + 9, s["C"]),
                (q == e + 10, s["P"]), (q == e + 11, int_value(_C["QUERY"])), (q == e + 12, s["P"])]
        out = s["S"]
        for cond, v in reversed(rows):
            out = z3.If(cond, v, out)
        return out

    def seg_count(self, d: str, k, q):
        s = self.seg(k)
        one = lambda c: z3.If(c, int_value(1), int_value(0))        # noqa: E731
        return {IS_EOS: int_value(1), AT_SIZE_RECORD: k + one(q == s["e"] + 13),
                CHAIN_MARKER: 2 * k + one(q >= s["A"] + 1) + one(q >= s["e"] + 4),
                AT_U_SIZE: k + one(q >= s["A"] + 2)}[d]

    def prompt_count(self, d: str, j):
        if d != IS_EOS:
            return int_value(0)
        return z3.If(z3.And(j >= 0, j == 3 * self.m + 1), int_value(1), int_value(0))

    def _resolve(self, k, q, in_seg, in_prompt):
        """in_seg(k', q') where position (k, q) lies in a segment (q >= 0: k; q < 0:
        the previous one, whose tail of 14 reaches back far enough), else
        in_prompt(j) at the prompt's position j = 3m + 2 + q."""
        if z3.is_int_value(k) and k.as_long() == 0:
            back = in_prompt(3 * self.m + 2 + q)
        else:
            prev = self.seg(k - 1)
            back = z3.If(k >= 1, in_seg(k - 1, q + prev["LEN"]), in_prompt(3 * self.m + 2 + q))
        return z3.If(q >= 0, in_seg(k, q), back)

    def tok(self, k, q):
        return self._resolve(k, q, self.seg_tok, self.prompt_tok)

    def count(self, d: str, k, q):
        """The reference's count of the positions <= (k, q) whose flag d is 1 (0 before the start)."""
        return self._resolve(k, q, lambda a, b: self.seg_count(d, a, b),
                             lambda j: z3.If(j < 0, int_value(0), self.prompt_count(d, j)))

    def abs(self, k, q):
        """The position's index: St(k) + q (St(k) >= 3m + 2 + 14 k: the layout)."""
        St = self._St(k)
        self._note(f"St {k.sexpr()}", z3.Implies(k >= 0, St >= 3 * self.m + 2 + 14 * k))
        if not (z3.is_int_value(k) and k.as_long() == 0):
            self._note(f"St- {k.sexpr()}", z3.Implies(k >= 1, St == self._St(k - 1) + self.seg(k - 1)["LEN"]))
        return St + q


class _Stream(StreamOps):
    """The RNN plans' view of the input sequences, from one position: x_d(u) is
    the value at position u (``u - t`` a constant offset), prefix sums are the
    reference's counts (the induction's hypothesis; stepped at the position
    itself by :meth:`_Pos.step_goals`)."""

    def __init__(self, pos: "_Pos"):
        self.pos = pos

    def _off(self, u) -> int:
        o = z3.simplify(u - self.pos.t)
        if not z3.is_int_value(o):
            raise ValueError(f"a plan reads position {u}, not a constant offset from the position")
        return o.as_long()

    def x(self, d: str, u):
        return z3.RealVal(1) if d == "one" else self.pos.val(self._off(u), d)

    def prefix(self, combo: dict, u):
        bad = [d for d in combo if d not in BASIC]
        if bad:
            raise ValueError(f"a prefix sum of the plan counts {bad}, which the reference's counts do not include")
        off = self._off(u)
        total = sum((z3_value(c) * z3.ToReal(self.pos.count(off, d)) for d, c in combo.items()), z3.RealVal(0))
        return z3.If(u < 0, z3.RealVal(0), total)


def _as_int(e):
    """The Int term equal to the real term ``e`` when ``e`` is an integer by its
    form (numerals with denominator 1, ToReal of an Int, and +, -, *, if-then-else
    of those), else None: the integrality the lemmas' domains ask for, shown by
    the term's structure."""
    if e.sort() == z3.IntSort():
        return e
    if z3.is_rational_value(e):
        return int_value(e.numerator_as_long()) if e.denominator_as_long() == 1 else None
    if z3.is_to_real(e):
        return e.arg(0)
    kids = [e.arg(i) for i in range(e.num_args())]
    if z3.is_app_of(e, z3.Z3_OP_ITE):
        a, b = _as_int(kids[1]), _as_int(kids[2])
        return None if a is None or b is None else z3.If(kids[0], a, b)
    ops = {z3.Z3_OP_ADD: lambda xs: sum(xs[1:], xs[0]), z3.Z3_OP_SUB: lambda xs: xs[0] - sum(xs[1:], int_value(0)),
           z3.Z3_OP_MUL: lambda xs: _product(xs), z3.Z3_OP_UMINUS: lambda xs: -xs[0]}
    op = e.decl().kind()
    if op not in ops:
        return None
    xs = [_as_int(x) for x in kids]
    return None if any(x is None for x in xs) else ops[op](xs)


def _product(xs: list):
    out = xs[0]
    for x in xs[1:]:
        out = out * x
    return out


def case_value(rows: list, uncovered: str):
    """(the goal that one of the plan's cases holds, None when no row has a case;
    the direction's value): ``rows`` are one direction's (case conditions, value)
    in the plan's order. A value no case covers is the unknown ``uncovered``
    (never taken where the cover goal is proved)."""
    cover = (z3.Or(*[z3.And(*extra) if extra else z3.BoolVal(True) for extra, _ in rows])
             if any(extra for extra, _ in rows) else None)
    out = z3.ToReal(z3.Int(uncovered))
    for extra, want in reversed(rows):
        out = z3.If(z3.And(*extra), want, out) if extra else want
    return cover, out


def as_integer(goals: list, text: str, v):
    """``v`` as an Int term: by its form when it has one (:func:`_as_int`), else
    ToInt(v) with the goal that v is an integer."""
    got = _as_int(v)
    if got is not None:
        return got
    goals.append((f"{text} an integer", z3.IsInt(v)))
    return z3.ToInt(v)


_READS: dict = {}


def _reads(make, args: tuple, inputs: tuple, d: str) -> set:
    """The inputs the plan's rows for direction d read (``args``: the plan's further
    arguments, N, which change no row's inputs)."""
    key = (make, inputs, d)
    if key not in _READS:
        from z3.z3util import get_vars         # z3 is optional (.sizes): only when it is there
        probe = {lab: z3.Int(f"reads.{lab}") for lab in inputs}
        names = set()
        for _, extra, out, want, _ in make(probe, *args):
            if out == d:
                for term in list(extra) + [want]:
                    names |= {str(x) for x in get_vars(term)}
        _READS[key] = {lab for lab in inputs if f"reads.{lab}" in names}
    return _READS[key]


_OUTPUTS: dict = {}


def _outputs(make, args: tuple, inputs: tuple) -> set:
    """The directions an MLP plan writes (keyed by the plan function and its inputs:
    ``args``, N, changes none)."""
    key = (make, inputs)
    if key not in _OUTPUTS:
        probe = {lab: z3.Int(f"outputs.{lab}") for lab in inputs}
        _OUTPUTS[key] = {out for _, _, out, _, _ in make(probe, *args)}
    return _OUTPUTS[key]


class _Pos:
    """A position of the reference (segment k, offset q) and, by the plans, every
    value the layers write at it and at the positions before it (``off`` <= 0)."""

    def __init__(self, ref: _Ref, k, q, N, tag: str):
        self.ref, self.k, self.q, self.N, self.tag = ref, k, q, N, tag
        self.t = ref.abs(k, q)
        self.memo: dict = {}
        self.goals: list = []           # (text, term): the lemmas' domains at off = 0
        self.domains: set = set()
        self.names: dict = {}
        self.emb = embedding_plan()
        self.rnn = direction_plan(None)
        self.lo, self.hi = cot_code_range(N)

    def code(self, off: int):
        """The code at t + off, named (its definition joins the reference's hypotheses)."""
        if off < -13:                   # the previous segment's tail (>= 14 positions) must hold it
            raise ValueError(f"a plan reads {-off} positions back, beyond the previous segment's tail")
        return self._named(("tok", off), lambda: self.ref.tok(self.k, self.q + off))

    def square(self, off: int):
        """code(t + off)^2, named: the squares the lemmas' domains ask for are then the
        terms themselves."""
        key = ("sq", off)
        if key not in self.names:
            c = self.code(off)
            v = z3.Int(f"{self.tag}.sq{off}")
            self.ref.hyps.append(v == c * c)
            self.names[key] = v
        return self.names[key]

    def count(self, off: int, d: str):
        return self._named((d, off), lambda: self.ref.count(d, self.k, self.q + off))

    def _named(self, key: tuple, make):
        if key not in self.names:
            v = z3.Int(f"{self.tag}.{key[0]}@{key[1]}")
            self.ref.hyps.append(v == make())
            self.names[key] = v
        return self.names[key]

    def ival(self, off: int, d: str):
        return as_integer(self.goals if off == 0 else [], d, self.val(off, d))

    def val(self, off: int, d: str):
        """The real value of direction d at position t + off."""
        key = (off, d)
        if key not in self.memo:
            self.memo[key] = z3.simplify(self._val(off, d))
        return self.memo[key]

    def _val(self, off: int, d: str):
        if d == "one":
            return z3.RealVal(1)
        if d in self.emb:
            kind, param, coef = self.emb[d]
            code = self.code(off)
            base = {K.F_ONE: lambda: int_value(1), K.F_TOK: lambda: code, K.F_TOK_SQ: lambda: self.square(off),
                    K.F_IS_TOKEN: lambda: z3.If(token_flag(param, code), int_value(1), int_value(0))}.get(kind)
            if base is None:
                raise ValueError(f"the embedding plan's {d}: a feature kind the chain does not read")
            return z3_value(coef) * z3.ToReal(base())
        for li, fns in self.rnn.items():
            if d in fns:
                return fns[d](_Stream(self), self.t + off)
        for inputs, make, args, hyps in ((RECORD_INPUTS, record_plan, (), record_hyps),
                                         (COUNTER_INPUTS, counter_plan, (self.N,), counter_hyps)):
            if d in _outputs(make, args, inputs):
                return self._mlp(off, d, inputs, make, args, hyps)
        raise ValueError(f"no layer of the plans writes {d!r}")

    def _mlp(self, off: int, d: str, inputs, make, args: tuple, hyps):
        first = off == 0 and inputs not in self.domains
        if off == 0:
            self.domains.add(inputs)
        # the inputs d's rows read (at off = 0 all of them: the domain is a goal there)
        reads = inputs if first else _reads(make, args, inputs, d)
        v = {lab: (as_integer(self.goals if first else [], lab, self.val(off, lab)) if lab in reads
                   else z3.Int(f"{self.tag}.unread.{lab}")) for lab in inputs}
        rows = [(extra, want) for _, extra, out, want, _ in make(v, *args) if out == d]
        if first:
            self.goals += [(f"the domain of the MLP reading {', '.join(inputs)}", z3.And(*hyps(v, self.lo, self.hi)))]
        cover, out = case_value(rows, f"{self.tag}.{d}@{off}.uncovered")
        if off == 0 and cover is not None:
            self.goals.append((f"one of the plan's cases for {d} holds", cover))
        return out

    def step_goals(self) -> list:
        """The counts step at this position: count(t) = count(t - 1) + flag(t)."""
        return [(f"the count of {d} steps", z3.ToReal(self.count(0, d)) == z3.ToReal(self.count(-1, d))
                 + self.val(0, d)) for d in BASIC]


_PROVED: dict = {}
"""The plans' texts -> the chain's facts: they do not depend on the model, so
they are proved once per process; a model whose plans are the same gets the same
records (queries included)."""


def chain_facts(model=None, N=None, tag: str = "istree") -> list[dict]:
    """The composition of the hybrid's proved layers over the reference CoT (the
    module's docstring), for every N: the facts read the plans alone."""
    if z3 is None:
        return []
    key = _plans_key()
    if key not in _PROVED:
        try:
            _PROVED[key] = _roles(f"{tag}.chain")
        except (ValueError, KeyError) as e:
            _PROVED[key] = [unmet("chain.read", LAYER, "the plans' directions", f"{type(e).__name__}: {e}")]
    return [dict(d) for d in _PROVED[key]]


def _plans_key() -> str:
    role_plan = istree_hybrid.role_plan      # at call time: the tests patch istree_hybrid.role_plan
    n = z3.Int("plans.key")
    probe = lambda labs: {lab: z3.Int(f"k.{lab}") for lab in labs}          # noqa: E731
    lo, hi = cot_code_range(n)
    texts = [repr(sorted(embedding_plan().items())), repr(plan()), repr((RECORD, BASIC, OTHER_FLAGS, VALUES)),
             repr((RECORD_INPUTS, COUNTER_INPUTS, NEXT_INPUTS)), str((lo, hi))]
    texts += [repr([(f, [str(e) for e in ex], d, str(w)) for f, ex, d, w, _ in make])
              for make in (record_plan(probe(RECORD_INPUTS)), counter_plan(probe(COUNTER_INPUTS), n))]
    texts += [str(record_hyps(probe(RECORD_INPUTS), lo, hi)), str(counter_hyps(probe(COUNTER_INPUTS), lo, hi))]
    texts += [plan_text(fns) for fns in direction_plan(None).values()]
    hyps, cases = next_domain(probe(NEXT_INPUTS), lo, hi)
    texts += [str(hyps), repr([(r, str(c), str(w({lab: z3.Real(lab) for lab in VALUES + (delayed(MERGED_SIZE, 5),)})))
                               for r, _, c, w in cases])]
    texts += [repr([(r, f) for r, f, _, _ in role_plan()])]
    return "\n".join(texts)


def stages() -> list[tuple[str, set, set]]:
    """The layers in the order the model runs them, each (name, the directions its
    plan writes, those it reads): the embedding; each RNN layer's recurrence, then
    its MLP (layer 3 has none); the heads (their queries, keys and copies); the
    attention layer's MLP."""
    out = [("the embedding", set(embedding_plan()), set())]
    mlps = {0: ("RNN layer 1's MLP", record_plan, (), RECORD_INPUTS),
            1: ("RNN layer 2's MLP", counter_plan, (z3.Int("order.N"),), COUNTER_INPUTS)}
    for li, fns in sorted(direction_plan(None).items()):
        st = TextStream()
        for fn in fns.values():
            fn(st, z3.Int("order.u"))
        out.append((f"RNN layer {li + 1}'s recurrence", set(fns), st.read - {"one"}))
        if li in mlps:
            name, make, args, inputs = mlps[li]
            out.append((name, set(_outputs(make, args, inputs)), set(inputs)))
    for h, (kind, args, copy) in plan().items():
        reads = {d for combo in copy.values() for d in combo}
        reads |= set(args[0]) if kind == "position" else set(args) if kind == "match" else set(args)
        reads |= {"cnt", "cnt_sq", IS_BOS}             # the lemmas' key side: the clock and [BOS]
        out.append((f"head {h}", set(copy), reads - {"one"}))
    out.append(("the attention layer's MLP", {NEXT_CODE}, set(NEXT_INPUTS)))
    return out


def order_fact() -> dict:
    """``chain.order``: each direction has one writer, a head or a layer, and every
    direction a layer reads is written before it (the embedding, or an earlier
    layer; the heads of the one attention layer read what the RNN layers wrote,
    the attention MLP what the heads copied): so the value a layer reads is the
    value the chain gives it, the writer's. With the per-layer facts (each layer
    writes only its plan's directions) this holds of the built model."""
    st = stages()
    heads = [i for i, (n, _, _) in enumerate(st) if n.startswith("head ")]
    # the heads read the residual before their layer
    return order_record(st, lambda i: min(heads) if i in heads else i,
                        "each direction is written by one layer or head of the plans, and every direction a layer "
                        "reads is written before it (the embedding, the RNN layers' recurrences and MLPs in turn, "
                        "the heads, the attention MLP): what a layer reads is its writer's value")


def order_record(st: list, before, statement: str) -> dict:
    """``chain.order`` over the stages ``st`` ((name, writes, reads), in the order
    the model runs them): a direction written twice, or read by stage i but not
    written before stage ``before(i)``, is a counterexample."""
    bad, writer = [], {}
    for i, (name, writes, _) in enumerate(st):
        for d in writes:
            if d in writer:
                bad.append(f"{d} is written by {st[writer[d]][0]} and by {name}")
            writer.setdefault(d, i)
    for i, (name, _, reads) in enumerate(st):
        for d in sorted(reads):
            if d not in writer:
                bad.append(f"{name} reads {d}, which no layer writes")
            elif writer[d] >= before(i):
                bad.append(f"{name} reads {d}, written by {st[writer[d]][0]}, not before it")
    return {"fact": "chain.order", "layer": LAYER, "method": "exact", "statement": statement,
            "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(bad[:4])} if bad else {})}


def _roles(tag: str) -> list[dict]:
    out = [order_fact()]
    for role in _PROMPT_ROLES + _SEG_ROLES:
        out.append(_role_fact(role, tag))
    return out


_PROMPT_ROLES = ("bos", "u", "sep", "v", "eos")
_SEG_ROLES = ("xu", "rootu", "marku", "su", "xv", "rootv", "markv", "sv", "ru", "su2", "tilde", "c", "p", "query",
              "p2", "s")
_WHERE = {"bos": "the prompt's [BOS]", "u": "an edge's first endpoint", "sep": "an edge's separator",
          "v": "an edge's second endpoint", "eos": "the prompt's [EOS]", "xu": "a vertex of u's find chain with a "
          "parent", "rootu": "u's root", "marku": "the u-side marker -", "su": "s_u", "xv": "a vertex of v's find "
          "chain with a parent", "rootv": "v's root", "markv": "the v-side marker -", "sv": "s_v",
          "ru": "r_u written again", "su2": "s_u written again", "tilde": "~", "c": "the child root c",
          "p": "the parent root p", "query": "[QUERY]", "p2": "p written again", "s": "the merged size s"}


def _role_fact(role: str, tag: str) -> dict:
    stmt, hyps, goals = _role_query(role, tag)
    return conjoined_fact(f"chain.{role}", LAYER, stmt, hyps, goals)


def _role_query(role: str, tag: str) -> tuple[str, list, list]:
    """(the statement, the hypotheses, the goals (text, term)) of ``chain.<role>``."""
    ref = _Ref(f"{tag}.{role}")
    N, m = ref.N, ref.m
    k, i = z3.Ints(f"{tag}.{role}.k {tag}.{role}.i")
    hyps: list = []
    if role in _PROMPT_ROLES:
        j = {"bos": int_value(0), "u": 3 * k + 1, "sep": 3 * k + 2, "v": 3 * k + 3, "eos": 3 * m + 1}[role]
        if role in ("u", "sep", "v"):
            hyps.append(ref.edge(k))
        kseg, q = int_value(0), j - (3 * m + 2)
        seg = None
    else:
        hyps.append(ref.edge(k))
        seg = ref.seg(k)
        offs = ref.offsets(k)
        kseg, q = k, offs[role]
        if role in ("xu", "xv"):
            bound = seg["A"] if role == "xu" else seg["B"]
            q = q + i
            hyps += [i >= 0, i < bound]
        if role not in ("xu", "rootu", "marku", "su", "xv", "rootv", "markv", "sv", "ru"):
            hyps.append(z3.Not(seg["cycle"]))        # the CoT goes on past r_u only without a cycle
    hyps += [z3.Implies(kseg >= 1, z3.Not(ref.seg(kseg - 1)["cycle"]))] if role not in _PROMPT_ROLES else []
    pos = _Pos(ref, kseg, q, N, f"{tag}.{role}")
    goals = []
    # what the position offers the heads as a key
    for kd, rec in RECORD.items():
        want = seg["C"] if (rec == "p" and role == "p") else seg["P"] if (rec == "s" and role == "s") else int_value(0)
        v = pos.val(0, kd)
        goals += [(f"{kd} = {'c' if role == 'p' == rec else 'p' if role == 's' == rec else '0'}",
                   v == z3.ToReal(want)), (f"{squared(kd)} = {kd}^2", pos.val(0, squared(kd)) == v * v)]
    for h, (kind, args, _) in plan().items():
        if kind == "latest":                # the latest flagged key, by the offers: this segment's s_u
            goals.append((f"{h}'s flag {args[0]} = {int(role == 'su')} (1 at s_u alone)",
                          pos.val(0, args[0]) == (1 if role == "su" else 0)))
    # the heads' lemmas take the key at position j to hold cnt = j + 1, cnt_sq = (j + 1)^2 and is_bos = [j = 0]
    # (istree_hybrid._key): the clock the recurrences write, and [BOS] at position 0 alone
    goals += [("cnt = t + 1 (the key side of the heads' lemmas)", pos.val(0, "cnt") == z3.ToReal(pos.t + 1)),
              ("cnt_sq = (t + 1)^2", pos.val(0, "cnt_sq") == z3.ToReal((pos.t + 1) * (pos.t + 1))),
              (f"is_bos = {int(role == 'bos')} ([BOS] at position 0 alone)",
               pos.val(0, IS_BOS) == (1 if role == "bos" else 0))]
    for _, writes, _ in [s_ for s_ in stages() if not s_[0].startswith("head ") and s_[0] != "the attention layer's MLP"]:
        for d in sorted(writes):            # whatever a head's built W_Q reads is an integer here
            as_integer(goals, f"{d} (a direction a query may read)", pos.val(0, d))
    for h, (_, _, copy) in plan().items():
        for tgt, combo in copy.items():
            c = _copy(pos, combo)
            if tgt in OTHER_FLAGS:
                goals.append((f"{h}'s copy {tgt} is 0 or 1 here", z3.Or(c == 0, c == 1)))
            else:
                goals.append((f"{h}'s copy {tgt} lies in {pos.lo}..N + 1 here", z3.And(c >= pos.lo, c <= pos.hi)))
    # the counts step; every MLP's domain (collected as the values were read)
    for d in (CHAIN_MARKER, AT_SIZE_RECORD, AT_U_SIZE, U_SMALLER, ROOTS_EQUAL, AT_V_SIZE, JOINS_OK,
              CHILD_ROOT, PARENT_ROOT, PARENT_KEY, SIZE_KEY, AT_PARENT_RECORD):
        pos.val(0, d)
    goals += pos.step_goals()
    writes = role not in ("bos", "u", "sep", "v")
    text = (f"the keys it offers ({PARENT_KEY}, {SIZE_KEY} and their squares, {AT_U_SIZE}) are the reference's, "
            "each head's copy lies in range, the counts step, and every MLP's inputs lie in its proved domain")
    if writes:
        nxt, lookups = _next_token(role, ref, seg, k, i, N, m)
        vals, head_goals, head_hyps = _heads(pos, role, ref, k, lookups, tag)
        goals += head_goals
        hyps += head_hyps
        ints = {}
        for lab in NEXT_INPUTS:
            ints[lab] = as_integer(goals, lab, vals[lab] if lab in vals else pos.val(0, lab))
        dom, cases = next_domain(ints, pos.lo, pos.hi)
        goals.append(("the next-code lemma's domain", z3.And(*dom)))
        real = {lab: z3.ToReal(ints[lab]) for lab in VALUES + (delayed(MERGED_SIZE, 5),)}
        goals.append(("one case of the next-code lemma holds and gives the reference's next token",
                      z3.Or(*[z3.And(*case, w(real) == z3.ToReal(nxt)) for _, _, case, w in cases])))
        text += ("; the heads' queries satisfy their lemmas, and on what they attend the next-code lemma's "
                 "domain holds and one of its cases gives the reference's next token")
    goals += pos.goals
    stmt = (f"at {_WHERE[role]}, for every N >= 1, every m and every reference run (the module's docstring): "
            f"{text}")
    return stmt, ref.hyps + hyps, goals


def _copy(pos: _Pos, combo: dict):
    return sum((z3_value(c) * pos.val(0, d) for d, c in combo.items()), z3.RealVal(0))


def _next_token(role: str, ref: _Ref, seg, k, i, N, m):
    """(the reference's next code, the lookups: head -> (the record's segment
    offset role, what the reference says of the lookup))."""
    C = lambda name: int_value(_C[name])       # noqa: E731
    answer = z3.If(m == N - 1, C("TRUE"), C("FALSE"))
    if role == "eos":
        return z3.If(m >= 1, ref.u(int_value(0)), answer), {}
    s = seg
    chain = {"xu": ("x", s["A"]), "rootu": ("x", s["A"]), "xv": ("y", s["B"]), "rootv": ("y", s["B"])}
    if role in chain:
        side, bound = chain[role]
        at = i if role in ("xu", "xv") else bound
        here = ref.x(k, at) if side == "x" else ref.y(k, at)
        nxt = (ref.x(k, at + 1) if side == "x" else ref.y(k, at + 1)) if role in ("xu", "xv") else C("DASH")
        # the reference: x_(i+1) is the p of the latest record "~ x_i p" before; the root has none
        return nxt, {PARENT_HEAD: (here, role in ("xu", "xv"), nxt)}
    if role in ("marku", "markv"):
        root, size = (s["ru"], s["SU"]) if role == "marku" else (s["rv"], s["SV"])
        return size, {SIZE_HEAD: (root, None, size)}
    table = {"su": ref.v(k), "sv": s["ru"], "ru": z3.If(s["cycle"], C("FALSE"), s["SU"]), "su2": C("TILDE"),
             "tilde": s["C"], "c": s["P"], "p": C("QUERY"), "query": s["P"], "p2": s["S"],
             "s": z3.If(k + 1 < m, ref.u(k + 1), answer)}
    return table[role], ({LAST_SU_HEAD: None} if role in ("sv", "ru") else {})


def _heads(pos: _Pos, role: str, ref: _Ref, k, lookups: dict, tag: str):
    """(the heads' outputs at the position, the goals their lemmas need, the
    hypotheses naming what they attend)."""
    vals, goals, hyps = {}, [], []
    for h, (kind, args, copy) in plan().items():
        out = None
        if kind == "position":
            Q = sum((z3_value(c) * pos.val(0, d) for d, c in args[0].items()), z3.RealVal(0))
            Qi = as_integer(goals, f"{h}'s query Q", Q)
            goals.append((f"{h}'s key exists: 1 <= Q <= t + 1", z3.And(Qi >= 1, Qi <= pos.t + 1)))
            goals.append((f"{h}'s key lies in the prompt or the CoT's first 14 positions (where the chain reads it)",
                          Qi - 1 <= 3 * ref.m + 2 + 13))
            key = _Pos(ref, int_value(0), Qi - 1 - (3 * ref.m + 2), pos.N, f"{pos.tag}.{h}")
            out = {tgt: _copy(key, combo) for tgt, combo in copy.items()}
        elif kind == "match":
            qd, qsq, kd, _ = args
            qv = pos.val(0, qd)
            qi = as_integer(goals, f"{h}'s query {qd}", qv)
            goals.append((f"{h}'s {qsq} = {qd}^2", pos.val(0, qsq) == z3.ToReal(qi * qi)))
            if h in lookups:
                out = _lookup(pos, h, kd, copy, lookups[h], ref, k, goals, hyps, tag)
        elif kind == "latest":
            if h in lookups:
                # its flag is 1 at s_u alone (every role's offer): the latest flagged key is this segment's s_u
                key = _Pos(ref, k, ref.offsets(k)["su"], pos.N, f"{pos.tag}.{h}")
                out = {tgt: _copy(key, combo) for tgt, combo in copy.items()}
        else:
            raise ValueError(f"head {h}: a kind the chain does not read ({kind})")
        if out is None:          # unused here: a copy of some key, in the range every key offers
            out = {}
            for tgt in copy:
                v = z3.Int(f"{tag}.{role}.{h}.{tgt}")
                hyps.append(z3.Or(v == 0, v == 1) if tgt in OTHER_FLAGS else z3.And(v >= pos.lo, v <= pos.hi))
                out[tgt] = z3.ToReal(v)
        vals.update(out)
    return vals, goals, hyps


def _lookup(pos: _Pos, h: str, kd: str, copy: dict, lookup, ref: _Ref, k, goals: list, hyps: list, tag: str):
    """A match head at a role whose next token reads it: it attends the latest key
    whose ``kd`` equals the query, else [BOS]. By the key offers that is the
    latest record (of the role :data:`RECORD` names) keyed by the query, in a
    segment kk < k, or [BOS]; ``lookup`` = (the query's reference value, whether
    the reference finds a record (None: either), the reference's value then)."""
    rec = RECORD.get(kd)
    if rec is None:
        raise ValueError(f"{h}: its key {kd} is not a record key of the reference")
    q_ref, found_ref, value = lookup
    qv = pos.val(0, plan()[h][1][0])
    goals.append((f"{h}'s query is the reference's {'vertex' if rec == 'p' else 'root'} (a vertex's code, >= 1: "
                  f"only a record's key can equal it)", qv == z3.ToReal(q_ref)))
    found = z3.Bool(f"{tag}.{h}.found")
    kk = z3.Int(f"{tag}.{h}.kk")
    recseg = ref.seg(kk)
    keyed = recseg["C"] if rec == "p" else recseg["P"]
    hyps.append(z3.Implies(found, z3.And(kk >= 0, kk < k, z3.Not(recseg["cycle"]), keyed == q_ref)))
    at = _Pos(ref, kk, ref.offsets(kk)[rec], pos.N, f"{pos.tag}.{h}.rec")
    bos = _Pos(ref, int_value(0), -(3 * ref.m + 2), pos.N, f"{pos.tag}.{h}.bos")
    goals.append((f"{h}: the record's {kd} is its key (the lemma's match)",
                  z3.Implies(found, at.val(0, kd) == z3.ToReal(q_ref))))
    # the reference's lookup: a find chain goes on while a record is found (its p is the next vertex);
    # a root's size is the record's s, else 1 (code 2)
    if found_ref is not None:
        hyps.append(found == found_ref)
        if found_ref is not False:
            hyps.append(z3.Implies(found, value == recseg["P"]))
    else:
        hyps.append(value == z3.If(found, recseg["S"], int_value(2)))
    return {tgt: z3.If(found, _copy(at, combo), _copy(bos, combo)) for tgt, combo in copy.items()}

