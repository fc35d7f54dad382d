"""The proof of one built model: its layers read as formulas over every instance at once.

``certify`` builds a construction with symbolic sizes (constructions/build/num.py)
and hands the result here. :func:`prove_model` reads the BUILT model, never a
formula written next to its builder: the embedding as formulas of the token
function tau; each RNN state's meaning proved by induction on t from the built A
and B; each head's intended key (``OneHot``) or tie (``EqualSplit``), from the
construction's plan, proved by z3 to win by at least sharpness(f), so the
fixed-point softmax is exact (checks/certify/machine_lemmas.py); MLPs applied exactly,
with :class:`Written` values proved at their own layer; and the readout's argmax
proved to be the task's reference answer. Every multiplied weight is an integer,
so the kernels' arithmetic is the proof's while no value leaves the format; only
the heads' score ranges are certified (docs/certify.md).

Details (each part, the arithmetic): docs/internals/certify.md#interpreter
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.build.num import exact, sharpness
from rnngap.constructions.machine.vocab import COUNT, META_NAMES, NUMBER_BASE, SPECIAL_NAMES

from .sizes import Z3Terms, prove, z3
from rnngap.checks.tasks.abstract import Case, Instance


# ----------------------------------------------------------------------------
# what a construction's record says its heads do (its plan)
@dataclass
class OneHot:
    """At the query positions ``at(t)`` the head attends exactly the key
    ``target(t, case)``; ``every`` says the plan covers every position (its output is
    then known everywhere)."""

    target: Callable
    at: Callable | None = None
    every: bool = False
    lemma: str = ""
    split: Callable | None = None
    """(inst, t, j, target, case) -> [(name, condition)]: the other keys j in pieces (their
    disjunction is proved to cover every key j != target in the window); the gap
    is proved on each piece on its own. A hint for z3 (a proof by cases), never an
    assumption: the coverage is itself a step."""


@dataclass
class EqualSplit:
    """At ``at(t)`` the head splits its weight equally over the keys j with
    ``member(t, j)`` (``size(t)`` of them, ``ref(t)`` one of them): the output is
    round(1/size) times the value at ``ref`` when every other member's value is 0."""

    member: Callable
    ref: Callable
    size: Callable
    at: Callable | None = None
    lemma: str = ""
    every: bool = False


@dataclass
class Written:
    """What a direction holds after the MLP that writes it: ``value(inst, t, case)``
    at the positions ``at(inst, t)`` (every position when None), proved for each
    case of the task's split when ``by_case`` (the readout's cases), else once.
    Once proved, the later layers read ``value`` at those positions."""

    value: Callable
    at: Callable | None = None
    by_case: bool = False
    lemma: str = ""


@dataclass
class Plan:
    """What each head of a construction does on the task's instances, by head name;
    the closed form of an RNN state whose meaning depends on the instance (a
    count, a latch: ``states[state](inst, t)``; a state without a recorded
    gadget meaning needs one here); and what an MLP writes (``mlps[label]``, a
    :class:`Written`). Every entry is proved from the built weights: a state's
    closed form by induction on t, an MLP's by evaluating it."""

    heads: dict
    states: dict = field(default_factory=dict)
    mlps: dict = field(default_factory=dict)
    value_bound: Any = None
    """A declared bound (a sympy expression of the sizes, from constructions/models/bounds.py)
    on every number an attention-free model's run computes: at every position of
    every instance each embedded value, each product and partial sum of every
    matrix row (at most the row's sum of |w| |v|, plus |bias|), each state, each
    residual value; and at the readout positions (where the generation driver
    reads) each readout weight and logit partial sum. With the builder's margin
    bits(bound) + 1 <= I (its own step) the run then stays in the format.
    Embedding features other than 1, tau, tau^2, [tau = c] and [tau >= 1] are
    not supported (their inner sums are not bounded): such a feature makes the
    ranges step fail (a readout feature z3 cannot read is refused, as by the
    readout step). (A ``Written`` claim proved without a
    case is also used inside each case: sound while no earlier layer's value
    depends on the case, as in the attention-free models this is used for.)"""


@dataclass
class Fact:
    """One proof step: the layer it is about, the lemma, the method, the statement,
    the answer (``unsat`` = proved), and the SMT-LIB query."""

    layer: str
    lemma: str
    statement: str
    answer: str
    method: str = "smt"
    query: str = ""
    counterexample: str = ""
    config: str = ""          # the z3 configuration that answered (checks.certify.sizes.PORTFOLIO)

    @property
    def ok(self) -> bool:
        return self.answer in ("unsat", "holds")

    def record(self, with_query: bool = True) -> dict:
        d = {"layer": self.layer, "lemma": self.lemma, "statement": self.statement, "method": self.method,
             "answer": self.answer}
        if self.counterexample:
            d["counterexample"] = self.counterexample
        if self.config:
            d["config"] = self.config
        if with_query and self.query:
            d["query"] = self.query
        return d


@dataclass
class _Replace:
    """A step of the residual stream that sets proved values (``fn(t, case, x)``
    rewrites x in place) instead of adding an increment."""

    fn: Callable


# ----------------------------------------------------------------------------
class ModelProof:
    """The symbolic forward pass of one built model over a task's instance."""

    def __init__(self, model, inst: Instance, plan: Plan, sizes: dict, timeout_ms: int = 30000,
                 portfolio: tuple | None = None):
        self.model, self.spec, self.inst, self.plan = model, model.spec, inst, plan
        self.sym = Z3Terms(sizes)
        self.timeout = timeout_ms
        self.portfolio = portfolio or True
        self.facts: list[Fact] = []
        self.labels = list(self.spec.labels)
        self.f = model.fmt.frac_bits
        self.s = self.sym(sharpness(self.f))        # the gap every head must achieve
        self.half_ulp = self.sym(sp.Rational(1, 2) * sp.Integer(2) ** (-sp.sympify(self.f)))
        self._funcs: dict = {}        # name -> (z3 function, facts(arg) -> list)
        self._layers: list[Callable] = []      # increments: (t, case) -> {label: term}
        self._cache: dict = {}
        self._ranges: list = []       # (layer, what, t -> a nonnegative term at most the value bound)
        if plan.value_bound is not None and self.spec.attn_layers:
            raise ValueError("value bounds are proved for attention-free models only")

    # -- terms with facts: every uninterpreted application carries its facts
    def func(self, name: str, facts: Callable, real: bool = True):
        """The uninterpreted value ``name`` (a function of the position), whose facts
        at an argument u are ``facts(fn, u)``."""
        if name not in self._funcs:
            fn = z3.Function(name, z3.IntSort(), z3.RealSort() if real else z3.IntSort())
            self._funcs[name] = (fn, lambda u, fn=fn: facts(fn, u))
        return self._funcs[name][0]

    def closure(self, formulas: list, case: Case | None = None, mentions: tuple = ()) -> list:
        """``formulas`` plus the facts of every term they mention: the facts of each
        uninterpreted value (to a fixed point), the task's promise instantiated once
        at every position term of tau met (and the case's), and the token facts of
        every tau term, new ones included; plus the translator's atom facts and the
        instance's own facts."""
        out = list(formulas) + list(self.inst.facts)
        decls = {fn.name(): facts for fn, facts in self._funcs.values()}
        seen_apps: set = set()
        tau_args: dict = {}

        def scan(fs):
            todo = list(fs)
            while todo:
                e = todo.pop()
                for app in _applications(e):
                    if app.get_id() in seen_apps:
                        continue
                    seen_apps.add(app.get_id())
                    if app.decl().eq(self.inst.tau):
                        arg = z3.simplify(app.arg(0))
                        tau_args.setdefault(arg.sexpr(), arg)
                    elif app.decl().name() in decls:
                        new = decls[app.decl().name()](app.arg(0))
                        out.extend(new)
                        todo.extend(new)
        scan(out + list(mentions))
        promised = []
        for arg in list(tau_args.values()):
            promised += self.inst.promise_at(arg)
            if case is not None and hasattr(self.inst, "promise_at_case"):
                promised += self.inst.promise_at_case(case, arg) + self.inst.promise_at_case(case, arg + 1)
        out += promised
        scan(promised)
        for arg in tau_args.values():
            out += self.inst.token_facts(arg)
        return out + self.sym.facts

    def check(self, layer: str, lemma: str, statement: str, hyps: list, goal, case: Case | None = None) -> Fact:
        """Prove hyps (+ the case's facts) => goal for all values, with the facts of
        every term they mention (:meth:`closure`)."""
        hyps = list(hyps) + (list(case.facts) if case else [])
        r = prove(self.closure(hyps, case, mentions=(goal,)), goal, self.timeout, self.portfolio)
        fact = Fact(layer, lemma, statement + (f" [{case.name}]" if case and case.name else ""), r["answer"],
                    query=r["query"], counterexample=r.get("counterexample", ""), config=r.get("config", ""))
        self.facts.append(fact)
        return fact

    # -- the residual stream
    def x(self, t, case: Case | None = None) -> dict:
        """label -> term: the residual at position t after every block added so far."""
        return self._snapshot()(t, case)

    def _combo(self, row, x: dict):
        """row . x for a row of built weights (sympy entries)."""
        total = z3.IntVal(0)
        for d, w in enumerate(row):
            if w != 0:
                total = total + self.sym(sp.sympify(w)) * x[self.labels[d]]
        return total

    def embedding(self) -> None:
        inst = self.inst

        def feature(kind, param, t):
            T = inst.tau(t)
            if kind == K.F_ZERO:
                return z3.IntVal(0)
            if kind == K.F_ONE:
                return z3.IntVal(1)
            if kind == K.F_TOK:
                return T
            if kind == K.F_TOK_SQ:
                return T * T
            if kind == K.F_POS:
                return t
            if kind == K.F_POS_SQ:
                return t * t
            if kind == K.F_IS_TOKEN:
                return z3.If(T == _code(int(param)), z3.IntVal(1), z3.IntVal(0))
            if kind == K.F_IS_NUM:
                return z3.If(T >= 1, z3.IntVal(1), z3.IntVal(0))
            if kind == K.F_TOK_INV:
                p = Fraction(exact(param))
                return self._rounded_inverse(f"inv_tau{p.numerator}_{p.denominator}", inst.tau, p)(t)
            raise ValueError(f"no z3 reading of the embedding feature {K.FEATURE_NAMES.get(kind, kind)}")

        emb = list(self.spec.embedding)

        def inc(t, case):
            return {lab: self.sym(sp.sympify(c)) * feature(k, p, t) for lab, (k, p, c) in zip(self.labels, emb)
                    if k != K.F_ZERO and c != 0}
        self._layers.append(inc)
        if self.plan.value_bound is None:
            return
        plain = (K.F_ONE, K.F_TOK, K.F_TOK_SQ, K.F_IS_TOKEN, K.F_IS_NUM)
        for lab, (k, p, c) in zip(self.labels, emb):
            if k == K.F_ZERO or c == 0:
                continue
            if k not in plain:
                self.facts.append(Fact("ranges", f"embedding: {lab} within the declared value bound",
                                       f"feature {K.FEATURE_NAMES.get(k, k)}: its inner sums are not bounded",
                                       "unknown"))
                continue
            self._range("embedding", f"|{lab}| and its feature",
                        lambda t, k=k, p=p, c=c: _abs(feature(k, p, t)) + _abs(self.sym(sp.sympify(c))
                                                                             * feature(k, p, t)))

    def _rounded_inverse(self, name: str, arg: Callable, p: Fraction):
        """round(1 / (arg(t) + p)) on the 2^-f grid: a value within half an ulp of it."""
        pz = z3.RealVal(f"{p.numerator}/{p.denominator}")

        def facts(fn, t):
            v, den = fn(t), z3.ToReal(arg(t)) + pz
            size = z3.If(den > 0, den, -den)
            return [den != 0, v * den - 1 <= self.half_ulp * size, 1 - v * den <= self.half_ulp * size]
        return self.func(name, facts)

    # -- RNN layers
    def rnn_layer(self, l: int, layer) -> None:
        """Prove every state number's meaning by induction on t, then add C h_t."""
        labels_state = list(layer.state_labels)
        before = self._snapshot()
        meaning = {}
        for s, (st, m) in enumerate(zip(labels_state, layer.state_meaning)):
            meaning[st] = self._meaning(st, m, before)
        tag = f"rnn layer {l}"
        t = z3.Int("pos_q")
        hyp_t = [t >= 1, t <= self.inst.last]
        for s, st in enumerate(labels_state):
            if meaning[st] is None:
                self.facts.append(Fact(tag, f"state {st}", "no meaning recorded for this state", "unknown"))
                continue
            x0, xt = before(z3.IntVal(0)), before(t)
            h0 = self._combo(layer.B[s], x0)
            ht = sum((self.sym(sp.sympify(a)) * meaning[labels_state[r]](t - 1) for r, a in enumerate(layer.A[s])
                      if a != 0), z3.IntVal(0)) + self._combo(layer.B[s], xt)
            text = (f"the plan's closed form {_one_line(meaning[st](z3.Int('t')))}" if st in self.plan.states
                    else _meaning_text(layer.state_meaning[s]))
            self.check(tag, f"state {st} = {text} (base)",
                       "h_0 = B x_0 equals the meaning at t = 0", [], h0 == meaning[st](z3.IntVal(0)))
            self.check(tag, f"state {st} = {text} (step)",
                       "h_t = A h_(t-1) + B x_t equals the meaning at t", hyp_t, ht == meaning[st](t))
        bounded = self.plan.value_bound is not None and all(meaning[st] is not None for st in labels_state)
        if self.plan.value_bound is not None and not bounded:
            self.facts.append(Fact("ranges", f"{tag}: the states' values within the declared value bound",
                                   "a state has no meaning: its values are not bounded", "unknown"))
        if bounded:
            def prev(t, st):
                return z3.If(t >= 1, meaning[st](t - 1), z3.IntVal(0))
            for s, st in enumerate(labels_state):
                self._range(tag, f"state {st}: |A h_(t-1)| and |B x_t| terms",
                            lambda t, s=s: self._abs_row(layer.A[s], {labels_state[r]: prev(t, labels_state[r])
                                                                        for r in range(len(labels_state))},
                                                         labels_state) + self._abs_row(layer.B[s], before(t)))
        C = layer.C

        def inc(t, case, C=C, meaning=meaning, labels_state=labels_state):
            out = {}
            for d, lab in enumerate(self.labels):
                v = sum((self.sym(sp.sympify(c)) * meaning[labels_state[s]](t) for s, c in enumerate(C[d]) if c != 0),
                        z3.IntVal(0))
                if not _is_zero(v):
                    out[lab] = v
            return out
        self._layers.append(inc)
        if bounded:
            after_c = self._snapshot()
            for d, lab in enumerate(self.labels):
                if any(c != 0 for c in layer.C[d]):
                    self._range(tag, f"|C h_t| terms into {lab}, and {lab} after",
                                lambda t, d=d, lab=lab: self._abs_row(layer.C[d], {st: meaning[st](t)
                                                                                   for st in labels_state},
                                                                      labels_state) + _abs(after_c(t)[lab]))
        self._mlp(tag, layer)

    def _meaning(self, st: str, m: tuple, before: Callable):
        closed = self.plan.states.get(st)
        if closed is not None:            # the plan's closed form (proved below like a recorded meaning)
            return lambda t: closed(self.inst, t)
        if not m:
            return None
        kind = m[0]
        if kind == "power":
            k = int(m[1])
            return lambda t: _power_term(t + 1, k)
        if kind == "delay":
            source, k = m[1], int(m[2])
            return lambda t: z3.If(t >= k, self._combo_named(source, before(t - k)), z3.IntVal(0))
        return None     # a prefix sum needs its closed form in the plan

    def _combo_named(self, combo: dict, x: dict):
        return sum((self.sym(sp.sympify(exact(c))) * x[d] for d, c in combo.items()), z3.IntVal(0))

    def _snapshot(self) -> Callable:
        layers = list(self._layers)

        def x(t, case=None):
            out = {lab: z3.IntVal(0) for lab in self.labels}
            for inc in layers:
                if isinstance(inc, _Replace):
                    inc.fn(t, case, out)
                    continue
                for lab, v in inc(t, case).items():
                    out[lab] = out[lab] + v
            return out
        return x

    # -- attention layers
    def attention_layer(self, l: int, layer) -> None:
        before = self._snapshot()
        incs = []
        for h, head in enumerate(layer.heads):
            tag = f"layer {l} head {head.name}"
            plan = self.plan.heads.get(head.name)
            if plan is None:
                self.facts.append(Fact(tag, "plan", "the construction's record says nothing of this head", "unknown"))
                continue
            incs.append(self._head(tag, head, plan, before))

        def inc(t, case):
            out = {}
            for fn in incs:
                for lab, v in fn(t, case).items():
                    out[lab] = out.get(lab, z3.IntVal(0)) + v
            return out
        self._layers.append(inc)
        self._mlp(f"layer {l} mlp", layer)

    def _score(self, head, xt: dict, xj: dict):
        return sum((self._combo(head.WQ[r], xt) * self._combo(head.WK[r], xj) for r in range(head.WQ.shape[0])),
                   z3.IntVal(0))

    def _value(self, head, xj: dict) -> dict:
        """label -> the value the head writes when it attends j alone (W_O W_V x_j)."""
        vals = [self._combo(head.WV[k], xj) for k in range(head.WV.shape[0])]
        out = {}
        for d, lab in enumerate(self.labels):
            ks = [k for k in range(len(vals)) if head.WO[d, k] != 0]
            if ks:
                out[lab] = sum((self.sym(sp.sympify(head.WO[d, k])) * vals[k] for k in ks), z3.IntVal(0))
        return out

    def _claims(self, plan, t):
        return z3.BoolVal(True) if (plan.every or plan.at is None) else plan.at(self.inst, t)

    def _positions(self, plan):
        t = z3.Int("pos_q")
        if plan.every:
            return t, [t >= 0, t <= self.inst.last]
        return t, [t >= 0, t <= self.inst.last, plan.at(self.inst, t)] if plan.at else [t == self.inst.last]

    def _head(self, tag: str, head, plan, before: Callable) -> Callable:
        inst = self.inst
        t, hyp_t = self._positions(plan)
        j = z3.Int("pos_k")
        cases = inst.cases(t) if not plan.every else [Case("", [])]
        if isinstance(plan, OneHot):
            for case in cases:
                tgt = plan.target(inst, t, case)
                xt = before(t, case)
                st, sj = self._score(head, xt, before(tgt, case)), self._score(head, xt, before(j, case))
                self.check(tag, "target in the causal window", "0 <= target(t) <= t", hyp_t,
                           z3.And(tgt >= 0, tgt <= t), case)
                others = hyp_t + [j >= 0, j <= t, j != tgt]
                lemma = plan.lemma or "one-hot: the target beats every other key by s = sharpness(f)"
                pieces = plan.split(inst, t, j, tgt, case) if plan.split else [("", None)]
                if plan.split:
                    self.check(tag, "the cases of the gap cover every other key",
                               " or ".join(name for name, _ in pieces) + " for every key j != target, 0 <= j <= t",
                               others, z3.Or([cond for _, cond in pieces]), case)
                for name, cond in pieces:
                    self.check(tag, lemma + (f" ({name})" if name else ""),
                               "score(t, target) - score(t, j) >= s for every key j != target, 0 <= j <= t"
                               + (f" with {name}" if name else ""),
                               others + ([cond] if cond is not None else []), st - sj >= self.s, case)
        else:
            for case in cases:
                xt = before(t, case)
                ref = plan.ref(inst, t)
                s_ref = self._score(head, xt, before(ref, case))
                sj = self._score(head, xt, before(j, case))
                member = plan.member(inst, t, j)
                window = [j >= 0, j <= t]
                self.check(tag, "reference member in the causal window", "0 <= ref(t) <= t and ref is a member",
                           hyp_t, z3.And(ref >= 0, ref <= t, plan.member(inst, t, ref)), case)
                self.check(tag, plan.lemma or "equal split: every member ties the reference member",
                           "score(t, j) = score(t, ref) for every member j", hyp_t + window + [member],
                           sj == s_ref, case)
                self.check(tag, "every non-member is s below the members",
                           "score(t, ref) - score(t, j) >= s for every non-member j",
                           hyp_t + window + [z3.Not(member)], s_ref - sj >= self.s, case)
                for lab, v in self._value(head, before(ref, case)).items():
                    if not z3.is_int(v):      # round(1/m) * v is exact on the grid only for an integer v
                        self.facts.append(Fact(tag, "the reference member's value is an integer",
                                               f"the value {lab} is not integer-valued: the product with "
                                               "round(1/m) would be rounded", "fails", method="sort"))
                vj = self._value(head, before(j, case))
                for lab, v in vj.items():
                    self.check(tag, "only the reference member carries a value",
                               f"the value {lab} is 0 at every member j != ref",
                               hyp_t + window + [member, j != ref], v == 0, case)
        def unknown(lab):       # an unclaimed output: known only through the interval bounds
            return self.func(f"U[{tag}:{lab}]", lambda fn, u: [])

        def inc(tq, case, head=head, plan=plan):
            out = {}
            if isinstance(plan, OneHot):
                claimed = self._claims(plan, tq)
                for lab, v in self._value(head, before(plan.target(inst, tq, case), case)).items():
                    out[lab] = v if plan.every else z3.If(claimed, v, unknown(lab)(tq))
            else:
                claimed = self._claims(plan, tq)
                w = self.func(f"W[{tag}]", self._split_facts(plan))(tq)
                for lab, v in self._value(head, before(plan.ref(inst, tq), case)).items():
                    out[lab] = z3.If(claimed, w * v, unknown(lab)(tq))
            return out
        return inc

    def _split_facts(self, plan: EqualSplit) -> Callable:
        """round(1/size) on the 2^-f grid: within half an ulp of 1/size, and >= 0."""
        def facts(fn, t):
            size, w = z3.ToReal(plan.size(self.inst, t)), fn(t)
            return [size >= 1, w >= 0, w * size - 1 <= self.half_ulp * size, 1 - w * size <= self.half_ulp * size]
        return facts

    # -- MLPs
    def _mlp(self, tag: str, layer) -> None:
        M = layer.W1.shape[0]
        if M == 0:
            return
        before = self._snapshot()

        def inc(t, case, layer=layer):
            x = before(t, case)
            hidden = []
            for m in range(M):
                pre = self._combo(layer.W1[m], x) + self.sym(sp.sympify(layer.b1[m]))
                hidden.append(z3.If(pre > 0, pre, z3.IntVal(0)))
            out = {}
            for d, lab in enumerate(self.labels):
                v = sum((self.sym(sp.sympify(layer.W2[d, m])) * hidden[m] for m in range(M) if layer.W2[d, m] != 0),
                        z3.IntVal(0))
                if layer.b2[d] != 0:
                    v = v + self.sym(sp.sympify(layer.b2[d]))
                if not _is_zero(v):
                    out[lab] = v
            return out
        self._layers.append(inc)
        if self.plan.value_bound is not None:
            after_mlp = self._snapshot()

            def hidden_at(t, m):
                pre = self._combo(layer.W1[m], before(t)) + self.sym(sp.sympify(layer.b1[m]))
                return z3.If(pre > 0, pre, z3.IntVal(0))
            for m in range(M):
                self._range(f"{tag} mlp", f"neuron {m}: |W1 x| terms and |b1|",
                            lambda t, m=m: self._abs_row(layer.W1[m], before(t))
                            + _abs(self.sym(sp.sympify(layer.b1[m]))))
            for d, lab in enumerate(self.labels):
                if layer.b2[d] != 0 or any(layer.W2[d, m] != 0 for m in range(M)):
                    self._range(f"{tag} mlp", f"|W2 relu| terms and |b2| into {lab}, and {lab} after",
                                lambda t, d=d, lab=lab: self._abs_row(layer.W2[d], {m: hidden_at(t, m)
                                                                                  for m in range(M)}, list(range(M)))
                                + _abs(self.sym(sp.sympify(layer.b2[d]))) + _abs(after_mlp(t)[lab]))
        written = {lab: w for lab, w in self.plan.mlps.items()
                   if layer.b2[self.labels.index(lab)] != 0 or any(layer.W2[self.labels.index(lab), m] != 0
                                                                 for m in range(M))}
        if not written:
            return
        after = self._snapshot()
        claims = {}
        for lab, w in written.items():
            t = z3.Int("pos_q")
            hyp_t = [t >= 0, t <= self.inst.last] + ([w.at(self.inst, t)] if w.at is not None else [])
            ok = True
            for case in (self.inst.cases(t) if w.by_case else [None]):
                value = w.value(self.inst, t, case)
                where = f" where {_one_line(w.at(self.inst, t))}" if w.at is not None else ""
                ok &= self.check(f"{tag} mlp", w.lemma or f"the MLP writes {lab}",
                                 f"{lab}(t) = {_one_line(value)}{where}", hyp_t, after(t, case)[lab] == value,
                                 case).ok
            if ok:
                claims[lab] = w

        def settle(t, case, x, claims=claims):      # later layers read the proved value where it is proved
            for lab, w in claims.items():
                if w.by_case and case is None:
                    continue
                v = w.value(self.inst, t, case)
                x[lab] = v if w.at is None else z3.If(w.at(self.inst, t), v, x[lab])
        if claims:
            self._layers.append(_Replace(settle))

    # -- readout
    def readout(self) -> None:
        inst, spec = self.inst, self.spec
        t = z3.Int("pos_q")
        kc = z3.Int("cand")              # a candidate token, by its code
        vocab = spec.vocab
        maxnum = self.sym(sp.sympify(vocab.max_number))
        specials = sorted(set(SPECIAL_NAMES) | (set(META_NAMES) if vocab.meta else set())
                          | ({COUNT} if vocab.count else set()))

        def in_vocab(c):
            return z3.Or(z3.And(c >= 1, c <= maxnum + 1), z3.Or([c == -s for s in specials]))

        def token_id(c):
            return z3.If(c >= 1, c - 1 + NUMBER_BASE, -c)

        def logit(c, x):
            total = z3.IntVal(0)
            for dim, kind, param, coef in spec.readout:
                total = total + self.sym(sp.sympify(coef)) * _readout_feature(kind, param, c) * x[self.labels[dim]]
            return total
        hyp_t = [t >= 0, t <= inst.last, inst.readout_positions(t)]
        if self.plan.value_bound is not None:      # every candidate's weights and logit terms where it is read
            def within(tq, c, bound):
                x = self.x(tq)
                goals, total = [], z3.IntVal(0)
                for dim, kind, param, coef in spec.readout:
                    feat = _readout_feature(kind, param, c)
                    w = self.sym(sp.sympify(coef)) * feat
                    goals += [_abs(feat) <= bound, _abs(w) <= bound]
                    total = total + _abs(w * x[self.labels[dim]])
                return z3.And(goals + [total <= bound])
            tq = z3.Int("pos_q")
            self.check("ranges", "the readout's weights and logit terms are within the declared value bound",
                       "at every readout position, for every candidate k: |feat(k)|, |coef feat(k)| and "
                       f"sum |coef feat(k) x| <= {self.plan.value_bound}",
                       [tq >= 0, tq <= inst.last, inst.readout_positions(tq), in_vocab(kc)],
                       within(tq, kc, self.sym(self.plan.value_bound)))
        for case in inst.cases(t):
            x = self.x(t, case)
            ans = inst.answer_code(t, case)
            self.check("readout", "the answer is a token of the vocabulary", "the reference answer's code is a "
                       "candidate of the readout", hyp_t, in_vocab(ans), case)
            la, lk = logit(ans, x), logit(kc, x)
            wins = z3.Or(la > lk, z3.And(la == lk, token_id(ans) < token_id(kc)))
            self.check("readout", "the argmax (ties to the smallest id) is the reference answer",
                       "logit(answer) beats every other candidate token k", hyp_t + [in_vocab(kc), kc != ans],
                       wins, case)

    # -- the whole model
    def run(self) -> list[Fact]:
        self.embedding()
        self._grid_facts()
        for l, layer in enumerate(self.spec.rnn_layers):
            self.rnn_layer(l, layer)
        for l, layer in enumerate(self.spec.attn_layers):
            self.attention_layer(l + len(self.spec.rnn_layers), layer)
        self._prove_ranges()
        self.readout()
        return self.facts

    # -- value ranges (attention-free models with a plan's value_bound)
    def _range(self, layer: str, what: str, term: Callable) -> None:
        self._ranges.append((layer, what, term))

    def _abs_row(self, row, x: dict, labels: list | None = None):
        """sum_c |w_c| |x_c| over the nonzero weights of a row (``labels`` names the
        columns; default the residual directions): it bounds every product and
        partial sum the kernels form for this row, in any order."""
        labels = self.labels if labels is None else labels
        total = z3.IntVal(0)
        for c, w in enumerate(row):
            if w != 0:
                total = total + _abs(self.sym(sp.sympify(w))) * _abs(x[labels[c]])
        return total

    def _prove_ranges(self) -> None:
        if self.plan.value_bound is None:
            return
        bound = self.sym(self.plan.value_bound)
        t = z3.Int("pos_q")
        for layer, what, term in self._ranges:
            self.check("ranges", f"{layer}: {what} within the declared value bound",
                       f"at every position: {what} <= {self.plan.value_bound}", [t >= 0, t <= self.inst.last],
                       term(t) <= bound)

    def _grid_facts(self) -> None:
        """Every weight the proof multiplies is an integer (or the exact power of two
        of a step), so every product the kernels round is exact on the grid."""
        bad, powers = [], {}
        for where, w in _weights(self.spec):
            e = sp.sympify(w)
            if e.is_integer is True or (e.is_Rational and e.q == 1):
                continue
            k = _power_of_two_exponent(e)
            if k is not None:                  # +-2^k: an integer iff k >= 0, proved below for all n
                powers.setdefault(k, where)
                continue
            bad.append(f"{where} = {e}")
        for k, where in powers.items():
            goal = self.sym(k) >= 0
            r = prove(list(self.inst.facts) + self.sym.facts, goal, self.timeout)
            if r["answer"] != "unsat":
                bad.append(f"{where} = 2^({k}): exponent >= 0 not proved ({r['answer']})")
        self.facts.append(Fact("weights", "every weight is an integer (products exact on the grid)",
                               "; ".join(bad[:3]) if bad else "all weights integer-valued",
                               "holds" if not bad else "fails", method="sympy"))


def _weights(spec):
    for d, (_, _, c) in enumerate(spec.embedding):
        yield f"embedding[{spec.labels[d]}]", c
    for l, L in enumerate(spec.rnn_layers):
        for nm in ("A", "B", "C", "W1", "b1", "W2", "b2"):
            for w in getattr(L, nm).ravel():
                if w != 0:
                    yield f"rnn {l} {nm}", w
    for l, L in enumerate(spec.attn_layers):
        for hd in L.heads:
            for nm in ("WQ", "WK", "WV", "WO"):
                for w in getattr(hd, nm).ravel():
                    if w != 0:
                        yield f"layer {l} {hd.name} {nm}", w
        for nm in ("W1", "b1", "W2", "b2"):
            for w in getattr(L, nm).ravel():
                if w != 0:
                    yield f"layer {l} mlp {nm}", w
    for *_, c in spec.readout:
        yield "readout", c


def _power_of_two_exponent(e):
    """k if e is 2**k or -2**k with k symbolic, else None."""
    if isinstance(e, sp.Mul) and len(e.args) == 2 and e.args[0] == -1:
        e = e.args[1]
    if isinstance(e, sp.Pow) and e.args[0] == 2:
        return e.args[1]
    return None


def _power_term(x, k: int):
    out = x
    for _ in range(k - 1):
        out = out * x
    return out


def _code(token: int) -> int:
    return token - NUMBER_BASE + 1 if token >= NUMBER_BASE else -token


def _is_zero(v) -> bool:
    try:
        return z3.is_rational_value(v) and v.as_fraction() == 0
    except Exception:
        return False


def _applications(e) -> list:
    """Every application of an uninterpreted function in the z3 term e."""
    out, stack, seen = [], [e], set()
    while stack:
        x = stack.pop()
        if not z3.is_expr(x) or x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_app(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED and x.num_args() > 0:
            out.append(x)
        stack.extend(x.children())
    return out


def _abs(e):
    return z3.If(e >= 0, e, -e)


def _readout_feature(kind: int, param, c):
    """The readout feature ``kind`` of the candidate token with code c, as a z3 term."""
    one, zero = z3.IntVal(1), z3.IntVal(0)
    if kind == K.F_IS_TOKEN:
        return z3.If(c == _code(int(param)), one, zero)
    feat = {K.F_ONE: one, K.F_TOK: c, K.F_TOK_SQ: c * c, K.F_IS_NUM: z3.If(c >= 1, one, zero),
            K.F_ZERO: zero}.get(kind)
    if feat is None:
        raise ValueError(f"no z3 reading of the readout feature {K.FEATURE_NAMES.get(kind, kind)}")
    return feat


def _one_line(e) -> str:
    """A z3 term, simplified, on one line (t printed as pos_q)."""
    return " ".join(str(z3.simplify(e)).split())


def _meaning_text(m: tuple) -> str:
    if not m:
        return "?"
    if m[0] == "power":
        return f"(t + 1)^{m[1]}"
    if m[0] == "delay":
        return f"{_combo_text(m[1])}(t - {m[2]})"
    if m[0] == "prefix_sum":
        return f"sum of {_combo_text(m[1])} over 0..t"
    return str(m)


def _combo_text(combo: dict) -> str:
    return " + ".join(f"{c} {d}" if c != 1 else d for d, c in combo.items())


def prove_model(model, inst: Instance, plan: Plan, sizes: dict, timeout_ms: int = 30000,
                portfolio: tuple | None = None) -> list[Fact]:
    """Every fact of the built symbolic ``model`` on ``inst`` (module doc); ``portfolio``:
    the z3 configurations to try (default checks.certify.sizes.PORTFOLIO)."""
    return ModelProof(model, inst, plan, sizes, timeout_ms, portfolio).run()
