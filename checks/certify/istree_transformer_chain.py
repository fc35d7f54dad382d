"""The IsTree Transformer's composition: its proved layers, chained over the DFS tour it writes.

checks/certify/istree_transformer.py proves each layer of a built DFS-tour Transformer on its
own, on free inputs, under stated hypotheses. :func:`chain_facts` proves the
composition: at every position of the reference run, the values each layer is
handed are the ones its fact is proved for, and they make the next token the
reference's. The reference is written symbolically: the prompt (with an optional
``[COUNT]`` header), the tour by the local DFS rule (tested to be ``dfs_tour``),
and the label. The z3 facts ``chain.<role>`` and ``chain.<role>.keys`` (per role
of a position, symbolic in the sizes) evaluate every layer by its proved plan;
``chain.order`` checks each direction's one writer is before its readers. The
facts read plans, not a model, so they are proved once per process
(:data:`_PROVED`).

Details (the reference, the proof, what is taken as given):
docs/internals/certify.md#istree_transformer_chain
"""
from __future__ import annotations

import contextlib

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import BOS, COUNT, DASH, EOS, FALSE, TILDE, TRUE, token_code

from .layer_facts import conjoined_fact, indicator, int_value, token_flag, unmet, z3_value
from .istree_transformer import MLP_INPUTS, embedding_plan, mlp_hyps, mlp_plan, plan
from .istree_hybrid_chain import as_integer, case_value, order_record
from .sizes import z3

LAYER = "composition"
_C = {name: token_code(t) for name, t in (("BOS", BOS), ("EOS", EOS), ("TRUE", TRUE), ("FALSE", FALSE),
                                          ("DASH", DASH), ("TILDE", TILDE), ("COUNT", COUNT))}
ROLES = ("bos", "count", "cval", "a", "sep", "b", "eos", "tv", "teos")
WRITES = ("eos", "tv", "teos")
"""The roles whose next token the model writes (the tour and its label)."""
_WHERE = {"bos": "[BOS]", "count": "the header's [COUNT]", "cval": "the header's count N_c",
          "a": "an edge's first endpoint", "sep": "an edge's separator", "b": "an edge's second endpoint (its record)",
          "eos": "the prompt's [EOS]", "tv": "a tour vertex W(i)", "teos": "the tour's [EOS]"}
_SIDES = ("first", "second")


class _Ref:
    """The reference run, symbolic (the module's docstring); the ranges of every
    application made are collected in :attr:`hyps`, guarded by where it is one."""

    def __init__(self, tag: str):
        I = z3.IntSort()
        fn = lambda name: z3.Function(f"{tag}.ref.{name}", I, I)          # noqa: E731
        self.tag = tag
        self.N, self.M, self.m, self.h, self.Nc, self.L = z3.Ints(" ".join(
            f"{tag}.ref.{x}" for x in ("N", "M", "m", "h", "Nc", "L")))
        self._A, self._B, self._SEP, self._W = fn("a"), fn("b"), fn("sep"), fn("W")
        self._PA, self._PB = fn("pred_a"), fn("pred_b")
        self.T = 3 * self.M + 2 * self.N + 4
        self.V = z3.If(self.N + 1 >= -_C["COUNT"], self.N + 1, int_value(-_C["COUNT"]))
        self.P = self.h + 3 * self.m + 1
        self._vars = {str(v): v for v in (self.N, self.M, self.m, self.h, self.Nc, self.L)}
        self.hyps = [self.N >= 1, self.m >= 0, self.m <= self.M, z3.Or(self.h == 0, self.h == 2), self.Nc >= 1,
                     self.Nc <= self.N, self.L >= 1, self.L <= 2 * self.Nc - 1, self._W(int_value(0)) == 1]
        self._seen: set = set()
        self._sinks: list = []

    def note(self, key: str, hyp) -> None:
        sink = self._sinks[-1] if self._sinks else self.hyps
        if (id(sink), key) not in self._seen:
            self._seen.add((id(sink), key))
            sink.append(hyp)

    @contextlib.contextmanager
    def divert(self, sink: list):
        """A context in which the ranges noted go to ``sink`` (the no-other-key
        fact's hypotheses: the role's own fact does not need them)."""
        self._sinks.append(sink)
        try:
            yield
        finally:
            self._sinks.pop()

    def edge(self, k):
        return z3.And(k >= 0, k < self.m)

    def r(self, k):
        """Record k's position (its id)."""
        return self.h + 3 * k + 3

    def a(self, k):
        return self._end(self._A, k)

    def b(self, k):
        return self._end(self._B, k)

    def _end(self, f, k):
        v = f(k)
        self.note(f"end {v.sexpr()}", z3.Implies(self.edge(k), z3.And(v >= 1, v <= self.Nc)))
        self.note(f"loop {k.sexpr()}", z3.Implies(self.edge(k), self._A(k) != self._B(k)))
        return v

    def sep(self, k):
        s = self._SEP(k)
        self.note(f"sep {s.sexpr()}", z3.Implies(self.edge(k), z3.Or(s == _C["DASH"], s == _C["TILDE"])))
        return s

    def w(self, i):
        v = self._W(i)
        self.note(f"w {v.sexpr()}", z3.Implies(z3.And(i >= 0, i < self.L), z3.And(v >= 1, v <= self.Nc)))
        return v

    def pred(self, side: str, k):
        """The reference's pred pointer of record k's ``side`` endpoint (what the
        record offers; chain.b proves it is the latest earlier incident record)."""
        v = (self._PA if side == "first" else self._PB)(k)
        self.note(f"pred {v.sexpr()}", z3.Implies(self.edge(k), z3.And(v >= 0, v <= self.r(k) - 3)))
        return v

    def tok(self, j):
        """The code at position j (0 <= j <= P + L + 1). A position written as h + 3X + c
        (a record's, an endpoint's) or as P + Y + c (the tour's, the prompt's tail)
        is resolved by its form (its edge index X + (c - 1) // 3, its tour index),
        so the solver meets no division; any other by :meth:`_tok_any`."""
        if z3.is_app_of(j, z3.Z3_OP_ITE):
            return z3.If(j.arg(0), self.tok(j.arg(1)), self.tok(j.arg(2)))
        lin = _affine(z3.simplify(j - self.h - 1))
        if lin is not None and all(c % 3 == 0 for c in lin[1].values()):
            const, coefs = lin
            i = sum((z3.IntVal(c // 3) * _TERMS[n] for n, c in coefs.items()), z3.IntVal(const // 3))
            edge = (self.a, self.sep, self.b)[const % 3](i)
            return z3.If(i < 0, self._head(j), z3.If(i < self.m, edge, self._after(j)))
        y = z3.simplify(j - self.P)
        lin = _affine(y)
        if lin is not None and all(n not in self._vars for n in lin[1]):
            back = self._tok_any(j)
            for c in range(5, 0, -1):
                back = z3.If(y == -c, self.tok(self.P - c), back)
            return z3.If(y >= 0, self._after(j), back)
        return self._tok_any(j)

    def _head(self, j):
        """The code at a position j <= h (the header's, [BOS])."""
        return z3.If(j <= 0, int_value(_C["BOS"]), z3.If(j == 1, int_value(_C["COUNT"]), self.Nc + 1))

    def _after(self, j):
        """The code at a position j >= P: the prompt's [EOS], the tour, the tour's [EOS]."""
        y = z3.simplify(j - self.P)
        return z3.If(y == 0, int_value(_C["EOS"]), z3.If(y <= self.L, self.w(y - 1), int_value(_C["EOS"])))

    def _tok_any(self, j):
        h, m, P = self.h, self.m, self.P
        i, r = (j - h - 1) / 3, (j - h - 1) % 3
        edge = z3.If(r == 0, self.a(i), z3.If(r == 1, self.sep(i), self.b(i)))
        tour = z3.If(j <= P + self.L, self.w(j - P - 1), int_value(_C["EOS"]))
        return z3.If(j <= 0, int_value(_C["BOS"]), z3.If(z3.And(h == 2, j == 1), int_value(_C["COUNT"]),
                     z3.If(z3.And(h == 2, j == 2), self.Nc + 1,
                           z3.If(j <= h + 3 * m, edge, z3.If(j == P, int_value(_C["EOS"]), tour)))))



_TERMS: dict = {}
"""The variables :func:`_affine` met, by name."""


def _affine(e):
    """(constant, {name: coefficient}) when the Int term ``e`` is a sum of integer
    multiples of constants (variables), else None."""
    if z3.is_int_value(e):
        return e.as_long(), {}
    if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        _TERMS.setdefault(str(e), e)
        return 0, {str(e): 1}
    kids = [e.arg(n) for n in range(e.num_args())]
    if z3.is_add(e):
        const, coefs = 0, {}
        for x in kids:
            got = _affine(x)
            if got is None:
                return None
            const += got[0]
            for n, c in got[1].items():
                coefs[n] = coefs.get(n, 0) + c
        return const, {n: c for n, c in coefs.items() if c}
    if z3.is_mul(e) and len(kids) == 2:
        a, b = _affine(kids[0]), _affine(kids[1])
        if a is None or b is None:
            return None
        if not a[1]:
            return a[0] * b[0], {n: a[0] * c for n, c in b[1].items()}
        if not b[1]:
            return a[0] * b[0], {n: b[0] * c for n, c in a[1].items()}
        return None
    if z3.is_sub(e) and len(kids) == 2:
        a, b = _affine(kids[0]), _affine(kids[1])
        if a is None or b is None:
            return None
        coefs = dict(a[1])
        for n, c in b[1].items():
            coefs[n] = coefs.get(n, 0) - c
        return a[0] - b[0], {n: c for n, c in coefs.items() if c}
    if z3.is_app_of(e, z3.Z3_OP_UMINUS):
        a = _affine(kids[0])
        return None if a is None else (-a[0], {n: -c for n, c in a[1].items()})
    return None


class _At:
    """Layer 1's values (the embedding and the first layer's heads) at position j:
    what a head copies from the position it attends, and what a position offers
    the later heads' keys."""

    def __init__(self, ref: _Ref, j, depth: int = 0):
        self.ref, self.j, self.depth = ref, j, depth
        self.memo: dict = {}

    def val(self, d: str):
        if d not in self.memo:
            self.memo[d] = z3.simplify(self._val(d))
        return self.memo[d]

    def _val(self, d: str):
        emb = embedding_plan()
        if d in emb:
            kind, param, coef = emb[d]
            code = self.ref.tok(self.j)
            base = {K.F_ONE: lambda: int_value(1), K.F_TOK: lambda: code, K.F_TOK_SQ: lambda: code * code,
                    K.F_POS: lambda: self.j, K.F_POS_SQ: lambda: self.j * self.j,
                    K.F_IS_NUM: lambda: z3.If(code >= 1, int_value(1), int_value(0)),
                    K.F_IS_TOKEN: lambda: z3.If(token_flag(param, code), int_value(1), int_value(0))}.get(kind)
            if base is None:
                raise ValueError(f"the embedding plan's {d}: a feature kind the chain does not read")
            return z3_value(coef) * z3.ToReal(base())
        for h, (li, kind, args, copy) in plan().items():
            if li == 0 and d in copy:
                if self.depth > 4:
                    raise ValueError(f"{h}'s copy of {d} reads layer 1's own outputs, around")
                return _copy(_At(self.ref, _first_layer_target(self.ref, h, kind, args, self.j), self.depth + 1),
                             copy[d])
        raise ValueError(f"{d} is not a direction of the embedding or the first layer's heads")


def _first_layer_target(ref: _Ref, h: str, kind: str, args: tuple, j):
    """The position a first-layer head attends from j: a shift's max(j - k, 0); the
    first [EOS]'s P from the prompt's [EOS] on, [BOS] before (is_eos is 0 at every
    position before P: each role's offer)."""
    if kind == "shift":
        return z3.If(j - args[0] >= 0, j - args[0], 0)
    if kind == "first_max" and args[0] == {"is_eos": 1}:
        return z3.If(j >= ref.P, ref.P, 0)
    raise ValueError(f"head {h}: a first-layer head the reference has no target for ({kind}, {args})")


def _copy(at, combo: dict):
    return sum((z3_value(c) * at.val(d) for d, c in combo.items()), z3.RealVal(0))


def _mlp_outputs(li: int) -> set:
    probe = {lab: z3.Int(f"outputs.{lab}") for lab in MLP_INPUTS[li]}
    return {out for _, _, out, _, _ in mlp_plan(li, probe)}


class _Look:
    """A head's lookup at a role: ``found`` (a Bool term), ``at`` the position it
    attends when found (None: it never finds one, [BOS]), ``kk`` that record's
    index (None: not a record), ``checked`` (the reference's lookup: that its key
    matches and that no other key wins are goals; else the lemma's conclusion,
    a hypothesis) and ``inst(kind, idx, pos)``: the reference's definitions at a
    key of another position (hypotheses the no-other-key goals use)."""

    def __init__(self, found, at=None, kk=None, checked: bool = True, inst=None, kinds: tuple = ("b",)):
        self.found, self.at, self.kk, self.checked = found, at, kk, checked
        self.inst = inst or (lambda kind, idx, pos: [])
        self.kinds = kinds          # unchecked: the kinds of position the attended key may be (a goal: no other)


def _kinds(ref: _Ref, tag: str) -> list[tuple]:
    """Every position of the run, as (kind, its index (fresh), position, conditions):
    the key a head may attend is one of these."""
    k, i = _free(tag, "kind.k"), _free(tag, "kind.i")
    P = ref.P
    return [("bos", None, int_value(0), []), ("count", None, int_value(1), [ref.h == 2]), ("cval", None, int_value(2), [ref.h == 2]),
            ("a", k, ref.h + 3 * k + 1, [ref.edge(k)]), ("sep", k, ref.h + 3 * k + 2, [ref.edge(k)]),
            ("b", k, ref.r(k), [ref.edge(k)]), ("eos", None, P, []), ("tv", i, P + 1 + i, [i >= 0, i < ref.L]),
            ("teos", None, P + 1 + ref.L, [])]


class _Role:
    """A role's position t and every value the layers write at it, by the plans."""

    def __init__(self, ref: _Ref, role: str, t, tag: str, lookups: dict):
        self.ref, self.role, self.t, self.tag = ref, role, t, tag
        self.here = _At(ref, t)
        self.lookups = lookups          # head -> _Look
        self.memo: dict = {}
        self.goals: list = []
        self.hyps: list = []
        self.key_goals: list = []       # that the attended key wins: a fact of its own (chain.<role>.keys)
        self.key_hyps: list = []        # the reference's definitions at the other keys, which those use
        self.heads: dict = {}
        self.mlps: dict = {}

    def val(self, d: str):
        if d not in self.memo:
            self.memo[d] = z3.simplify(self._val(d))
        return self.memo[d]

    def _val(self, d: str):
        for h, (li, _, _, copy) in plan().items():
            if d in copy:
                return self.here.val(d) if li == 0 else self.head(h)[d]
        for li in MLP_INPUTS:
            if d in _mlp_outputs(li):
                return self.mlp(li)[d]
        return self.here.val(d)

    # --- the heads
    def head(self, h: str) -> dict:
        if h not in self.heads:
            li, kind, args, copy = plan()[h]
            if h not in self.lookups:
                raise ValueError(f"head {h} (layer {li + 1}) is read at {self.role}, where the chain has no lookup")
            look = self.lookups[h]
            if kind == "match":
                self._match_goals(h, args, look)
            elif kind == "first_max":
                self._max_goals(h, args[0], look, self.ref.Nc)
            else:
                raise ValueError(f"head {h}: a kind the chain does not read past layer 1 ({kind})")
            bos = _At(self.ref, int_value(0))
            if look.at is None:
                self.heads[h] = {tgt: _copy(bos, c) for tgt, c in copy.items()}
            else:
                hit = _At(self.ref, look.at)
                self.heads[h] = {tgt: z3.If(look.found, _copy(hit, c), _copy(bos, c)) for tgt, c in copy.items()}
        return self.heads[h]

    def _query(self, combo: dict):
        return sum((z3_value(c) * self.val(d) for d, c in combo.items()), z3.RealVal(0))

    def _key(self, d: str, pos, kind, idx):
        """Key direction d at a position of ``kind`` (index idx): layer 1's values
        there; the pred pointers and their squares a record offers (chain.b's
        goals, :data:`RECORD_OFFERS`); elsewhere those
        are whatever the model wrote (a free value: a key that matches on them must
        be excluded by its flags)."""
        if d in RECORD_OFFERS:
            if kind != "b":
                return z3.ToReal(_free(f"{self.tag}.{kind}.{pos.sexpr()}", d))
            return z3.ToReal(_offer(self.ref, d, idx))
        return _At(self.ref, pos).val(d)

    def _matches(self, comps, flags, pos, kind, idx, qs) -> list:
        return ([self._key(kd, pos, kind, idx) == qv for (_, _, kd, _), qv in zip(comps, qs)]
                + [_At(self.ref, pos).val(fl) == 1 for fl in flags])

    def _match_goals(self, h: str, args: tuple, look: _Look) -> None:
        """The query's lemma preconditions (goals); the attended key matches (a goal
        where the lookup is the reference's, ``checked``, else the lemma's
        conclusion, a hypothesis); and, checked, every other key that matches loses
        to it by the plan's tie-break (so the lemma attends it), at every kind of
        position before t."""
        comps, flags, tie = args
        qs = []
        for q, qsq, kd, _ in comps:
            for d in sorted(set(q) | set(qsq)):         # the lemma takes every direction the query reads an integer
                as_integer(self.goals, f"{h}'s query direction {d}", self.val(d))
            qv = self._query(q)
            qi = as_integer(self.goals, f"{h}'s query {kd}", qv)
            self.goals.append((f"{h}'s query square", self._query(qsq) == z3.ToReal(qi * qi)))
            qs.append(qv)
        if look.at is not None:
            kind = "b" if look.kk is not None else None
            match = z3.Implies(look.found, z3.And(*self._matches(comps, flags, look.at, kind, look.kk, qs),
                                                  look.at <= self.t, look.at >= 1))
            if look.checked:
                self.goals.append((f"{h}: the attended key matches the query (the lemma's match)", match))
            else:
                self.hyps.append(match)
        with self.ref.divert(self.key_hyps):
            self._no_other_match(h, comps, flags, tie, look, qs)

    def _no_other_match(self, h: str, comps, flags, tie, look: _Look, qs: list) -> None:
        for kind, idx, pos, conds in _kinds(self.ref, f"{self.tag}.{h}"):
            m = z3.And(*conds, pos <= self.t, *self._matches(comps, flags, pos, kind, idx, qs))
            if not look.checked:            # whatever it attends is of the lookup's kinds: no other kind matches
                if kind not in look.kinds:
                    self.key_goals.append((f"{h}: no key at {kind} matches (it attends a record or [BOS])",
                                           z3.Not(m)))
                continue
            if look.at is None:
                wins = z3.BoolVal(False)
            else:
                wins = z3.And(look.found, {None: pos == look.at, "last": pos <= look.at,
                                           "first": pos >= look.at}[tie])
            self.key_hyps += look.inst(kind, idx, pos)
            self.key_goals.append((f"{h}: a key at {kind} that matches is the one attended, or loses the tie-break "
                               f"({tie})", z3.Implies(m, wins)))

    def _max_goals(self, h: str, combo: dict, look: _Look, want=None) -> None:
        """A first-max head attends the first key with the largest value: the
        attended one's value is at least every key's before t, and larger than every
        earlier one's; with ``want``, it is the reference's."""
        best = _copy(_At(self.ref, look.at), combo)
        self.goals.append((f"{h}: the attended key is at or before t", z3.And(look.at >= 0, look.at <= self.t)))
        if want is not None:
            self.goals.append((f"{h}: the attended key's value is the reference's", best == z3.ToReal(want)))
        with self.ref.divert(self.key_hyps):
            for kind, idx, pos, conds in _kinds(self.ref, f"{self.tag}.{h}"):
                v = _copy(_At(self.ref, pos), combo)
                self.key_hyps += look.inst(kind, idx, pos)
                self.key_goals.append((f"{h}: a key at {kind} is at most the attended one's, and below it before "
                                       f"it", z3.Implies(z3.And(*conds, pos <= self.t),
                                                         z3.And(v <= best, z3.Implies(pos < look.at, v < best)))))

    # --- the MLPs
    def mlp(self, li: int) -> dict:
        if li not in self.mlps:
            v = {lab: as_integer(self.goals, f"MLP {li + 1}'s input {lab}", self.val(lab)) for lab in MLP_INPUTS[li]}
            self.goals.append((f"MLP {li + 1}'s domain", z3.And(*mlp_hyps(li, v, self.ref.T, self.ref.V))))
            rows = mlp_plan(li, v)
            out = {}
            for d in sorted({r[2] for r in rows}):
                cover, out[d] = case_value([(extra, want) for _, extra, o, want, _ in rows if o == d],
                                           f"{self.tag}.{d}.uncovered")
                if cover is not None:
                    self.goals.append((f"one of MLP {li + 1}'s cases for {d} holds", cover))
            self.mlps[li] = out
        return self.mlps[li]


# ----------------------------------------------------------------------------
# the lookups each role's heads make (the reference's lookups)
def _free(tag: str, name: str, sort: str = "int"):
    return z3.Bool(f"{tag}.{name}") if sort == "bool" else z3.Int(f"{tag}.{name}")


def _incident(ref: _Ref, k, x):
    return z3.Or(ref.a(k) == x, ref.b(k) == x)


def _end(ref: _Ref, side: str, k):
    return ref.a(k) if side == "first" else ref.b(k)


def _latest(ref: _Ref, k1, k2, side: str):
    """The reference's pred is the latest earlier incident record: record k2's
    pred for its ``side`` endpoint is at least the id of every earlier record k1
    incident to that endpoint (an instance)."""
    return z3.Implies(z3.And(ref.edge(k1), ref.edge(k2), k1 < k2, _incident(ref, k1, _end(ref, side, k2))),
                      ref.pred(side, k2) >= ref.r(k1))


def _pred_lookups(ref: _Ref, role: str, t, k, tag: str, hyps: list) -> dict:
    """pred-{u,v}-{first,second}: the latest record key whose delayed endpoint
    (back5: the previous record's a; back3: its b) is the query's vertex. At a
    record k (the query a_k for u, b_k for v) the reference's: the latest k' < k
    with a(k') (first) or b(k') (second) that vertex, whose key sits at r(k' + 1);
    elsewhere the lemma's: some record at or before t, or [BOS]."""
    out = {}
    for end in ("u", "v"):
        for side in _SIDES:
            h = f"pred-{end}-{side}"
            found, kp = _free(tag, f"{h}.found", "bool"), _free(tag, f"{h}.k")
            if role == "b":
                x = ref.a(k) if end == "u" else ref.b(k)
                hyps.append(z3.Implies(found, z3.And(kp >= 0, kp < k, _end(ref, side, kp) == x)))

                def inst(kind, idx, pos, found=found, kp=kp, x=x, side=side):
                    if kind != "b":
                        return []
                    k2 = idx - 1            # the key at r(idx) is delayed: record idx - 1's endpoint
                    return [z3.Implies(z3.And(k2 >= 0, k2 < k, _end(ref, side, k2) == x), z3.And(found, k2 <= kp))]
                out[h] = _Look(found, ref.r(kp + 1), kp + 1, True, inst)
            else:
                hyps.append(z3.Implies(found, z3.And(kp >= 0, kp < ref.m, ref.r(kp) <= t)))
                out[h] = _Look(found, ref.r(kp), kp, False)
    return out


RECORD_OFFERS = {"pred_u": ("first", 1), "pred_u_sq": ("first", 2), "pred_v": ("second", 1),
                 "pred_v_sq": ("second", 2)}
"""The directions a record offers the later heads' keys from the reference's pred
pointers (direction -> (the endpoint's side, the power)): chain.b proves each,
and a key reads them at a record from the reference (:meth:`_Role._key`)."""


def _offer(ref: _Ref, d: str, k):
    side, power = RECORD_OFFERS[d]
    p = ref.pred(side, k)
    return p * p if power == 2 else p


def _pred_offer(ref: _Ref, k, lookups: dict) -> tuple[dict, list]:
    """At record k: the reference's pred pointers, the latest earlier record incident
    to a_k (pred_u) and to b_k (pred_v): the later of the latest with it as first
    endpoint and the latest with it as second (0 if none); and the definitions."""
    hyps = []
    for end, side in (("u", "first"), ("v", "second")):
        parts = []
        for s in _SIDES:
            look = lookups[f"pred-{end}-{s}"]
            parts.append(z3.If(look.found, ref.r(look.kk - 1), 0))
        hyps.append(ref.pred(side, k) == z3.If(parts[0] >= parts[1], parts[0], parts[1]))
    return {d: _offer(ref, d, k) for d in RECORD_OFFERS}, hyps


def _edge_lookups(ref: _Ref, t, tag: str, hyps: list) -> tuple[dict, list, list]:
    """edge-u-{first,second}: the record of edge {x, y} (x the token at t, y the one
    before) with x as its first endpoint, or as its second: found iff there is one
    before t, and a simple graph has one record per edge (instances)."""
    x, y = ref.tok(t), ref.tok(t - 1)
    out, ks, fs = {}, [], []

    def one(kk, kn):
        return z3.Implies(z3.And(ref.edge(kk), ref.edge(kn), z3.Or(
            z3.And(ref.a(kk) == ref.a(kn), ref.b(kk) == ref.b(kn)),
            z3.And(ref.a(kk) == ref.b(kn), ref.b(kk) == ref.a(kn)))), kk == kn)
    for side, (ea, eb) in zip(_SIDES, ((x, y), (y, x))):
        h = f"edge-u-{side}"
        found, ke = _free(tag, f"{h}.found", "bool"), _free(tag, f"{h}.k")
        cond = lambda kk, ea=ea, eb=eb: z3.And(ref.edge(kk), ref.r(kk) <= t, ref.a(kk) == ea, ref.b(kk) == eb)  # noqa
        hyps.append(z3.Implies(found, cond(ke)))

        def inst(kind, idx, pos, found=found, ke=ke, cond=cond):
            return [] if kind != "b" else [z3.Implies(cond(idx), found), one(idx, ke)]
        out[h] = _Look(found, ref.r(ke), ke, True, inst)
        ks.append(ke)
        fs.append(found)
    hyps.append(one(ks[0], ks[1]))
    return out, fs, ks


def _record_lookup(ref: _Ref, name: str, u, e, t, tag: str, hyps: list) -> tuple[dict, list, list]:
    """next-/hop-{first,second}: the record incident to u whose pred for u is e (u
    its first endpoint: the other is its b; u its second: its a): found iff there is
    one, and there is at most one (pred is the latest earlier incident record:
    instances)."""
    out, fs, other, ks = {}, [], [], []
    for side in _SIDES:
        h = f"{name}-{side}"
        found, kn = _free(tag, f"{h}.found", "bool"), _free(tag, f"{h}.k")
        cond = lambda kk, side=side: z3.And(ref.edge(kk), ref.r(kk) <= t, _end(ref, side, kk) == u,  # noqa: E731
                                            ref.pred(side, kk) == e)
        hyps.append(z3.Implies(found, cond(kn)))

        def inst(kind, idx, pos, found=found, kn=kn, cond=cond, side=side):
            return [] if kind != "b" else [z3.Implies(cond(idx), found), _latest(ref, idx, kn, side),
                                           _latest(ref, kn, idx, side)]
        out[h] = _Look(found, ref.r(kn), kn, True, inst)
        fs.append(found)
        ks.append(kn)
        other.append((found, ref.b(kn) if side == "first" else ref.a(kn), ref.r(kn)))
    hyps += [_latest(ref, ks[0], ks[1], "second"), _latest(ref, ks[1], ks[0], "first")]
    return out, fs, other


def _pick(parts: list, default):
    v = default
    for found, x in reversed(parts):
        v = z3.If(found, x, v)
    return v


def _lookups(ref: _Ref, role: str, t, k, i, tag: str, hyps: list) -> tuple[dict, dict]:
    """(head -> its :class:`_Look`, the reference's values the role's goals compare
    against)."""
    out: dict = {}
    ref_vals: dict = {}
    out.update(_pred_lookups(ref, role, t, k, tag, hyps))
    edges, e_found, e_k = _edge_lookups(ref, t, tag, hyps)
    out.update(edges)
    # parent: the first key with the query's token from the prompt's [EOS] on
    if role == "tv":
        f = _free(tag, "first_occurrence")
        hyps += [f >= 0, f <= i, ref.w(f) == ref.w(i)]
        out["parent"] = _Look(z3.BoolVal(True), ref.P + 1 + f, None, True, lambda kind, idx, pos: [] if kind != "tv"
                              else [z3.Implies(z3.And(idx >= 0, idx < f), ref.w(idx) != ref.w(i))])
        ref_vals["parent"] = z3.If(f >= 1, ref.w(f - 1), int_value(_C["EOS"]))
    elif role in ("eos", "teos"):
        out["parent"] = _Look(z3.BoolVal(True), ref.P)      # the query is [EOS]: the prompt's [EOS] first
    else:
        out["parent"] = _Look(z3.BoolVal(False))            # no key has after_eos = 1 before P
    if role not in WRITES:
        return out, ref_vals
    # the vertex count: the first key with the largest count key, N_c: [BOS] if N_c = 1, else the header's
    # count, else the first endpoint of code N_c
    jw, kw = _free(tag, "count_witness"), _free(tag, "count_witness.k")
    first_end = z3.Or(z3.And(ref.edge(kw), jw == ref.h + 3 * kw + 1, ref.a(kw) == ref.Nc),
                      z3.And(ref.edge(kw), jw == ref.r(kw), ref.b(kw) == ref.Nc))
    hyps.append(z3.If(ref.Nc == 1, jw == 0, z3.If(ref.h == 2, jw == 2, first_end)))

    def count_inst(kind, idx, pos):
        if kind not in ("a", "b"):
            return []
        code = ref.a(idx) if kind == "a" else ref.b(idx)
        return [z3.Implies(z3.And(ref.edge(idx), pos < jw), code != ref.Nc)]
    out["vertex-count"] = _Look(z3.BoolVal(True), jw, None, True, count_inst)
    if role != "tv":
        # the query vertex is [EOS]'s code: no record is incident to it; w is 0 (a goal), which no key holds
        for name in ("next", "hop"):
            got, _, _ = _record_lookup(ref, name, int_value(_C["EOS"]), _free(tag, f"{name}.e"), t, tag, hyps)
            out.update(got)
        out["visited"] = _Look(z3.BoolVal(False))
        ref_vals["w"] = int_value(0)
        return out, ref_vals
    # a tour vertex: the local DFS rule
    u, p = ref.w(i), z3.If(i >= 1, ref.w(i - 1), int_value(_C["EOS"]))
    hyps.append(z3.Implies(i >= 1, z3.Or(*e_found)))           # consecutive tour vertices are adjacent
    par = ref_vals["parent"]
    edge_id = _pick(list(zip(e_found, [ref.r(x) for x in e_k])), int_value(0))
    e = z3.If(p == par, int_value(0), edge_id)
    nxt, n_found, n_other = _record_lookup(ref, "next", u, e, t, tag, hyps)
    out.update(nxt)
    has_next = z3.Or(*n_found)
    nv = _pick([(f_, x) for f_, x, _ in n_other], int_value(0))
    ne = _pick([(f_, r) for f_, _, r in n_other], int_value(0))
    hop, h_found, h_other = _record_lookup(ref, "hop", u, ne, t, tag, hyps)
    out.update(hop)
    skip = z3.And(has_next, nv == par)
    w = z3.If(skip, _pick([(f_, x) for f_, x, _ in h_other], int_value(0)), nv)
    has_w = z3.If(skip, z3.Or(*h_found), has_next)
    fv = _free(tag, "visited.at")
    found_v = _free(tag, "visited.found", "bool")
    hyps.append(z3.Implies(found_v, z3.And(fv >= 0, fv <= i, ref.w(fv) == w)))
    out["visited"] = _Look(found_v, ref.P + 1 + fv, None, True, lambda kind, idx, pos: [] if kind != "tv" else [
        z3.Implies(z3.And(idx >= 0, idx <= i, ref.w(idx) == w), z3.And(found_v, idx >= fv))])
    ref_vals.update({"e": e, "w": w, "has_w": has_w, "visited": found_v,
                     "next": z3.If(has_w, z3.If(found_v, int_value(_C["EOS"]), w), par)})
    return out, ref_vals


# ----------------------------------------------------------------------------
# the facts
def _role_query(role: str, tag: str, keep: dict | None = None) -> dict:
    """``chain.<role>`` and ``chain.<role>.keys``, each (the statement, the
    hypotheses, the goals (text, term)); ``keep`` (a dict) receives the role's
    :class:`_Role` (every value the chain computes at the position: a test
    compares them with real runs' residuals)."""
    ref = _Ref(f"{tag}.{role}")
    k, i = z3.Ints(f"{tag}.{role}.k {tag}.{role}.i")
    hyps: list = []
    t = {"bos": int_value(0), "count": int_value(1), "cval": int_value(2), "a": ref.h + 3 * k + 1, "sep": ref.h + 3 * k + 2,
         "b": ref.r(k), "eos": ref.P, "tv": ref.P + 1 + i, "teos": ref.P + 1 + ref.L}[role]
    if role in ("count", "cval"):
        hyps.append(ref.h == 2)
    if role in ("a", "sep", "b"):
        hyps.append(ref.edge(k))
    if role == "tv":
        hyps += [i >= 0, i < ref.L]
    lookups, rv = _lookups(ref, role, t, k, i, f"{tag}.{role}", hyps)
    pos = _Role(ref, role, t, f"{tag}.{role}", lookups)
    if keep is not None:
        keep["role"] = pos
    goals = [("the position is below T (the heads' lemmas cover positions 0..T - 1)", t <= ref.T - 1),
             ("pos = t, pos_sq = t^2, one = 1 (what the heads' lemmas and the MLPs' facts take)",
              z3.And(pos.val("pos") == z3.ToReal(t), pos.val("pos_sq") == z3.ToReal(t * t), pos.val("one") == 1))]
    # what the position offers the heads' keys
    goals += [("is_bos = [t = 0]", pos.val("is_bos") == indicator(role == "bos")),
              ("is_eos: 1 at the [EOS]s alone", pos.val("is_eos") == indicator(role in ("eos", "teos"))),
              ("is_record: 1 at the records alone", pos.val("is_record") == indicator(role == "b")),
              ("after_eos: 1 from the prompt's [EOS] on", pos.val("after_eos") == indicator(role in WRITES))]
    ck = _copy(pos, plan()["vertex-count"][2][0])
    goals.append(("the count key is at most N_c (N_c at the header's count) and at least -V",
                  z3.And(ck <= z3.ToReal(ref.Nc), ck >= -z3.ToReal(ref.V))
                  if role != "cval" else ck == z3.ToReal(ref.Nc)))
    goals += _key_side(pos, ref, role)
    if role == "b":
        offers, defs = _pred_offer(ref, k, lookups)
        hyps += defs
        for d, want in offers.items():
            goals.append((f"{d} = the reference's pred pointer (or its square)", pos.val(d) == z3.ToReal(want)))
    # the first layer's first-max head: the first [EOS] from P on, else [BOS]
    for h, (li, kind, args, _) in plan().items():
        if li == 0 and kind == "first_max":
            pos._max_goals(h, args[0], _Look(z3.BoolVal(True), _first_layer_target(ref, h, kind, args, t)))
    # the layers the position needs: the first two everywhere (their outputs are keys), all where it writes
    for li in (0, 1):
        pos.mlp(li)
    for h in ("edge-u-first", "edge-u-second", "parent"):
        pos.head(h)
    text = ("the keys it offers are the reference's (flags, squares, the count key, the pred pointers at a record), "
            "the heads' queries meet their lemmas, and the first two MLPs' inputs lie in their proved domains")
    if role in WRITES:
        _written_goals(pos, ref, role, i, rv, hyps, goals)
        text += ", every MLP's do too, and the next code is the reference's"
    goals += pos.goals
    hyps += pos.hyps
    every = f"at {_WHERE[role]}, for every N, M, m, header and every reference run (the module's docstring)"
    keys = (f"{every}: each head that attends the reference's record or tour position attends it by its lemma: "
            "every other key of the run up to the position (of every kind of position, its index free) that "
            "matches the query loses to it by the plan's tie-break (the only match, the first, the latest), or "
            "there is none where the reference finds none; each first-max head's key is the first largest; with "
            "the reference's definitions at that key (first occurrence, the latest incident record, one record "
            "per edge, pred the latest earlier incident record, N_c's first witness)")
    return {f"chain.{role}": (f"{every}: {text}", ref.hyps + hyps, goals),
            f"chain.{role}.keys": (keys, ref.hyps + hyps + pos.key_hyps, pos.key_goals)}


def _written_goals(pos: _Role, ref: _Ref, role: str, i, rv: dict, hyps: list, goals: list) -> None:
    """At a position that writes the next token (:data:`WRITES`): every head and
    MLP read there, and the goal that ``out`` is the reference's next code
    (:func:`_role_query`); the reference's definitions join ``hyps``."""
    for h, entry in plan().items():
        if entry[0] >= 1:               # the first layer's heads: in every value read at the position
            pos.head(h)
    for li in MLP_INPUTS:
        pos.mlp(li)
    out = as_integer(pos.goals, "out", pos.val("out"))
    if role == "eos":
        want, what = int_value(1), "vertex 0, the tour's start"
    elif role == "teos":
        want = z3.If(ref.L == 2 * ref.Nc - 1, int_value(_C["TRUE"]), int_value(_C["FALSE"]))
        what = "[TRUE] iff the tour has 2 N_c - 1 vertices"
    else:
        want = rv["next"]
        hyps.append(z3.Implies(i + 1 < ref.L, ref.w(i + 1) == want))
        hyps.append(z3.Implies(i + 1 == ref.L, want == _C["EOS"]))
        goals += [("e_prev is the rule's e", pos.val("e_prev") == z3.ToReal(rv["e"])),
                  ("parent is parent(u)", pos.val("parent") == z3.ToReal(rv["parent"]))]
        what = "the local DFS rule's next token"
    if role != "tv":
        goals.append(("w = 0 (no key holds code 0 from the prompt's [EOS] on: visited finds none)",
                      pos.val("w") == 0))
    goals.append((f"out = the reference's next code ({what})", out == want))


def _key_side(pos: _Role, ref: _Ref, role: str) -> list:
    """What every head's lemma takes of the key at this position, read off the
    plan: each match component's key direction an integer whose square direction
    is its square, each flag 0 or 1, each first-max key within the range the plan
    proves it on and its directions integers; every one of them 0 at [BOS]."""
    goals: list = []
    squares, flags, plain = set(), set(), set()     # squares: (key direction, its square's), every head's
    for h, (_, kind, args, _) in plan().items():
        if kind == "match":
            squares |= {(kd, ksq) for _, _, kd, ksq in args[0]}
            flags |= set(args[1])
        elif kind == "first_max":
            combo, rng = args
            plain |= {d for d in combo if d not in ("is_bos", "one")}
            lo, hi = {"flag": (int_value(0), int_value(1)), "code": (-ref.V, ref.V)}[rng]
            v = _copy(pos, combo)
            goals.append((f"{h}'s key lies in the range its lemma is proved on ({rng})",
                          z3.And(v >= z3.ToReal(lo), v <= z3.ToReal(hi))))
    for kd, ksq in sorted(squares):
        ki = as_integer(goals, f"the key direction {kd}", pos.val(kd))
        goals.append((f"{ksq} = {kd}^2 (a match key's square)", pos.val(ksq) == z3.ToReal(ki * ki)))
    for fl in sorted(flags):
        goals.append((f"the flag {fl} is 0 or 1", z3.Or(pos.val(fl) == 0, pos.val(fl) == 1)))
    for d in sorted(plain):
        as_integer(goals, f"the key direction {d}", pos.val(d))
    if role == "bos":
        for d in sorted({x for pair in squares for x in pair} | flags | plain):
            goals.append((f"{d} = 0 at [BOS] (the lemmas' key there)", pos.val(d) == 0))
    return goals


def _role_facts(role: str, tag: str) -> list[dict]:
    """``chain.<role>`` and ``chain.<role>.keys`` (:func:`_role_query`)."""
    try:
        queries = _role_query(role, tag)
    except (ValueError, KeyError) as e:
        return [unmet(f"chain.{role}", LAYER, f"the composition at {_WHERE[role]}", f"{type(e).__name__}: {e}")]
    return [conjoined_fact(name, LAYER, stmt, hyps, goals) for name, (stmt, hyps, goals) in queries.items()]


def stages() -> list[tuple[str, set, set]]:
    """The layers in the order the model runs them, each (name, the directions its
    plan writes, those it reads): the embedding; per attention layer its heads (the
    queries, keys, flags and copies; the clock pos, pos_sq and is_bos), then its MLP."""
    out = [("the embedding", set(embedding_plan()), set())]
    heads = plan()
    for li in range(5):
        for h, (hl, kind, args, copy) in heads.items():
            if hl != li:
                continue
            reads = {d for combo in copy.values() for d in combo} | {"pos", "pos_sq", "is_bos"}
            if kind == "match":
                for q, qsq, kd, ksq in args[0]:
                    reads |= set(q) | set(qsq) | {kd, ksq}
                reads |= set(args[1])
            elif kind == "first_max":
                reads |= set(args[0])
            out.append((f"head {h}", set(copy), reads - {"one"}))
        out.append((f"attention layer {li + 1}'s MLP", _mlp_outputs(li), set(MLP_INPUTS[li])))
    return out


def order_fact() -> dict:
    """``chain.order``: each direction has one writer, and every direction a layer
    reads is written before it (a head reads the residual before its layer)."""
    st = stages()
    first_head = {}
    for n, (name, _, _) in enumerate(st):
        if name.startswith("head "):
            first_head.setdefault(plan()[name[5:]][0], n)
    return order_record(st, lambda n: first_head[plan()[st[n][0][5:]][0]] if st[n][0].startswith("head ") else n,
                        "each direction is written by one head or layer of the plans, and every direction a layer "
                        "reads is written before it (the embedding, then each attention layer's heads and MLP): "
                        "what a layer reads is its writer's value")


_PROVED: dict = {}
"""The plans' texts -> the chain's facts (proved once per process)."""


def _plans_key() -> str:
    probe = lambda li: {lab: z3.Int(f"k.{lab}") for lab in MLP_INPUTS[li]}          # noqa: E731
    T, V = z3.Ints("k.T k.V")
    texts = [repr(sorted(embedding_plan().items())), repr(plan()), repr(MLP_INPUTS)]
    for li in MLP_INPUTS:
        texts += [str([e.sexpr() for e in mlp_hyps(li, probe(li), T, V)]),
                  repr([(f, [e.sexpr() for e in ex], d, w.sexpr()) for f, ex, d, w, _ in mlp_plan(li, probe(li))])]
    return "\n".join(texts)


def chain_facts(model=None, N=None, tag: str = "dfs") -> list[dict]:
    """The composition of the IsTree Transformer's proved layers over the DFS tour
    (the module's docstring), for every N: the facts read the plans alone."""
    if z3 is None:
        return []
    key = _plans_key()
    if key not in _PROVED:
        _PROVED[key] = [order_fact()] + [f for role in ROLES for f in _role_facts(role, f"{tag}.chain")]
    return [dict(d) for d in _PROVED[key]]
