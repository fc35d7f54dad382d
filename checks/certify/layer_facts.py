"""The per-layer provers' shared pieces: facts proved by z3, a head's score and an MLP read off the built weights as z3 terms.

A fact is a dict (fact, layer, statement, method, answer, query, and a
counterexample when it fails): :func:`smt_fact` asks z3 for a counterexample
to hypotheses => conclusion and refuses hypotheses no value satisfies;
:func:`unmet` records a plan the built model does not meet. The z3 terms read
the built model's exact rationals (:func:`z3_value`), its embedding
(:func:`embedded_value`), a head's score (:class:`HeadScore`) and an MLP
(:func:`mlp_out`).
"""
from __future__ import annotations

from fractions import Fraction

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import token_code

from .sizes import prove, z3

TIMEOUT_MS = 20000
"""z3's time limit on one fact, in milliseconds."""


def z3_value(v) -> "z3.ArithRef":
    """An exact rational (a built weight) as a z3 real."""
    v = Fraction(v)
    return z3.RealVal(f"{v.numerator}/{v.denominator}") if v.denominator != 1 else z3.RealVal(v.numerator)


def token_flag(param, code):
    """[the token is ``param``] at a position of code ``code``, as the kernel's
    F_IS_TOKEN feature reads it (``tok == param``): the code comparison for a
    token id (token_code is injective on ids >= 0), never true for a parameter
    no token has (a negative one: token_code would make it a vertex's code)."""
    param = int(param)
    return code == token_code(param) if param >= 0 else z3.BoolVal(False)


def indicator(v) -> "z3.ArithRef":
    """1 where the z3 condition ``v`` holds, else 0 (a real)."""
    return z3.If(v, z3.RealVal(1), z3.RealVal(0))


def int_value(v: int):
    """An integer as a z3 integer."""
    return z3.IntVal(int(v))


def unmet(fact: str, layer: str, statement: str, why: str) -> dict:
    """A record of the plan not met by the built model (a failed step, never a proof)."""
    return {"fact": fact, "layer": layer, "statement": statement, "method": "plan", "answer": "sat",
            "counterexample": why}


_SAT: list = []


def _satisfiable(hyps: list) -> bool:
    """z3 finds a model of ``hyps`` (one solver per process, each query between a
    push and a pop: a fresh solver per fact cost a fifth of these rows' time).
    Anything but ``sat`` (``unknown`` included) counts as no model."""
    if not _SAT:
        _SAT.append(z3.Solver())
        _SAT[0].set("timeout", TIMEOUT_MS)
    s = _SAT[0]
    s.push()
    try:
        s.add(*hyps)
        return s.check() == z3.sat
    finally:
        s.pop()


def smt_fact(layer: str, lemma: str, statement: str, hyps: list, concl) -> dict:
    """z3 looks for a counterexample (``unsat`` proves the fact); hypotheses that no
    value satisfies would prove anything, so they are refused (answer ``vacuous``)."""
    r = prove(hyps, concl, TIMEOUT_MS)
    d = {"fact": lemma, "layer": layer, "statement": statement, "method": "smt", "answer": r["answer"],
         "query": r.get("query", "")}
    if "counterexample" in r:
        d["counterexample"] = r["counterexample"]
    if r["answer"] == "unsat" and not _satisfiable(hyps):
        d["answer"] = "vacuous"
        d["counterexample"] = "the hypotheses have no model"
    return d


def conjoined_fact(name: str, layer: str, stmt: str, hyps: list, goals: list) -> dict:
    """One fact whose conclusion is the conjunction of ``goals`` ((text, term));
    when it fails, each goal is tried alone so that the record names the ones
    that fail."""
    d = smt_fact(layer, name, stmt, hyps, z3.And(*[g for _, g in goals]))
    if d["answer"] == "sat":
        bad = [text for text, g in goals if prove(hyps, g, 20000)["answer"] != "unsat"]
        d["counterexample"] = f"fails: {'; '.join(bad)} -- " + d.get("counterexample", "")
    return d


def embedded_value(spec, a: int, tau, pos):
    """x[a] at a position of code tau and position pos: the built embedding's feature."""
    kind, param, coef = spec.embedding[a]
    c = z3_value(coef)
    if kind == K.F_ZERO:
        return z3.RealVal(0)
    if kind == K.F_ONE:
        return c
    if kind == K.F_TOK:
        return c * z3.ToReal(tau)
    if kind == K.F_TOK_SQ:
        return c * z3.ToReal(tau * tau)
    if kind == K.F_IS_TOKEN:
        return c * z3.If(token_flag(param, tau), z3.RealVal(1), z3.RealVal(0))
    if kind == K.F_IS_NUM:
        return c * z3.If(tau >= 1, z3.RealVal(1), z3.RealVal(0))
    if kind == K.F_POS:
        return c * z3.ToReal(pos)
    if kind == K.F_POS_SQ:
        return c * z3.ToReal(pos * pos)
    raise ValueError(f"embedding feature {K.FEATURE_NAMES.get(kind, kind)} of {spec.labels[a]!r} is not read here")


class HeadScore:
    """The built head's score as a z3 term of the query's free directions and
    the key's embedded features."""

    def __init__(self, spec, head, tag: str):
        self.spec, self.head, self.tag = spec, head, tag
        self.labels = list(spec.labels)
        self.qvars: dict = {}

    def var(self, lab: str):
        """The free integer value of the query's direction ``lab``."""
        if lab not in self.qvars:
            self.qvars[lab] = z3.Int(f"{self.tag}.q.{lab}")
        return self.qvars[lab]

    def query_value(self, a: int):
        lab = self.labels[a]
        if lab == "one" and self.spec.embedding[a] == (K.F_ONE, 0, 1):
            return z3.RealVal(1)
        return z3.ToReal(self.var(lab))

    def key_value(self, b: int, j, free: dict):
        """The key side's direction b at position j: the embedded feature (coef x
        pos, pos^2 or 1) or, for a hidden direction, ``free[label]``."""
        kind, param, coef = self.spec.embedding[b]
        lab = self.labels[b]
        if lab in free:
            return free[lab]
        if kind in (K.F_POS, K.F_POS_SQ, K.F_ONE):      # a function of the position alone
            return embedded_value(self.spec, b, None, j)
        raise ValueError(f"{self.head.name}: the key reads {lab!r} (embedding kind "
                         f"{K.FEATURE_NAMES.get(kind, kind)}), which the plan gives no value")

    def __call__(self, j, free: dict):
        WQ, WK = self.head.WQ, self.head.WK
        total = z3.RealVal(0)
        for r in range(WQ.shape[0]):
            q = sum((z3_value(WQ[r, a]) * self.query_value(a) for a in range(WQ.shape[1]) if WQ[r, a] != 0),
                    z3.RealVal(0))
            k = sum((z3_value(WK[r, b]) * self.key_value(b, j, free) for b in range(WK.shape[1]) if WK[r, b] != 0),
                    z3.RealVal(0))
            total = total + q * k
        return total


def query_combo(score: HeadScore, combo: dict):
    """The plan's query value: sum_d c_d x_t[d] over the same variables the score reads."""
    total = z3.IntVal(0)
    for lab, c in combo.items():
        if Fraction(c).denominator != 1:
            raise ValueError(f"the plan's query coefficient {lab}: {c} is not an integer")
        if lab == "one":
            total = total + int(c)
        else:
            if lab not in score.labels:
                raise ValueError(f"the plan's query reads {lab!r}, which the model has no direction for")
            total = total + int(c) * score.var(lab)
    return total


def show_combo(combo: dict) -> str:
    """pos - is_state0 - 2 is_state1 + 1: a combination as a reader writes it."""
    terms = [(lab, int(c)) for lab, c in combo.items() if lab != "one" and c != 0]
    terms += [("", int(combo["one"]))] if combo.get("one") else []
    out = ""
    for i, (lab, c) in enumerate(terms):
        mag = str(abs(c)) if not lab or abs(c) != 1 else ""
        body = f"{mag} {lab}".strip() if lab else mag
        out += (("- " if c < 0 else "+ ") if i else ("-" if c < 0 else "")) + body + " "
    return out.strip() or "0"


def copy_fact(spec, head, copy: dict, layer: str) -> dict:
    """With its weights an exact one-hot on key j, a head adds W_O W_V x_j: the
    built W_O W_V (exact rationals) must be the plan's copy (target <- combo of
    the key's directions) and zero on every other target."""
    labels = list(spec.labels)
    WO, WV = head.WO, head.WV
    D = len(labels)
    bad = []
    vrows = [[(b, Fraction(WV[r, b])) for b in range(WV.shape[1]) if WV[r, b] != 0] for r in range(WV.shape[0])]
    for t in range(D):
        row = {}                                   # (W_O W_V)[t, :], exact, over the nonzero entries only
        for r in range(WV.shape[0]):
            if WO[t, r] != 0:
                o = Fraction(WO[t, r])
                for b, v in vrows[r]:
                    row[labels[b]] = row.get(labels[b], Fraction(0)) + o * v
        row = {k: v for k, v in row.items() if v != 0}
        want = {k: Fraction(c) for k, c in copy.get(labels[t], {}).items()}
        if row != want:
            bad.append(f"{labels[t]} <- {row or 0} (plan: {want or 0})")
    for lab in copy:
        if lab not in labels:
            bad.append(f"{lab}: no such direction")
    shown = "; ".join(f"{t} <- {show_combo({k: int(c) for k, c in c_.items()})}" for t, c_ in copy.items())
    return {"fact": f"{head.name}.copy", "layer": layer, "method": "exact",
            "statement": f"W_O W_V (built, exact) writes {shown} of the attended key, nothing else",
            "answer": "holds" if not bad else "sat", **({"counterexample": "; ".join(bad[:4])} if bad else {})}


def mlp_out(L, labels, x: dict):
    """``out(label)``: the direction after the layer's MLP, x + W2 relu(W1 x + b1) + b2,
    with ``x`` the z3 values of the directions W1 reads (ReLU as if-then-else)."""
    hidden = []
    for i in range(L.W1.shape[0]):
        terms = []
        for a in range(L.W1.shape[1]):
            if L.W1[i, a] != 0:
                if labels[a] not in x:
                    raise ValueError(f"the MLP reads {labels[a]!r}, which the plan gives no value")
                terms.append(z3_value(L.W1[i, a]) * x[labels[a]])
        pre = sum(terms, z3.RealVal(0)) + z3_value(L.b1[i])
        hidden.append(z3.If(pre > 0, pre, z3.RealVal(0)))

    def out(lab):
        d = labels.index(lab)
        return x.get(lab, z3.RealVal(0)) + z3_value(L.b2[d]) + sum(
            (z3_value(L.W2[d, i]) * hidden[i] for i in range(len(hidden)) if L.W2[d, i] != 0), z3.RealVal(0))
    return out


def writes_only(L, labels, planned: set, fact: str, layer: str) -> list[dict]:
    """[] if the layer's MLP writes exactly the ``planned`` directions (a nonzero
    row of W2 or b2), else the failed step naming the difference."""
    written = {labels[d] for d in range(len(labels)) if any(v != 0 for v in L.W2[d]) or L.b2[d] != 0}
    if written == planned:
        return []
    return [unmet(fact, layer, "the MLP writes the planned directions only",
                   f"writes {sorted(written - planned)} not planned, misses {sorted(planned - written)}")]


def planned_heads(spec, want: dict, layer_of, prove) -> list[dict]:
    """Every head of the built ``spec`` against the plan ``want`` (head name ->
    entry): ``prove(li, head, entry, layer)`` gives the head's records; a head
    the plan does not name, one built twice, one outside the plan's attention
    layer (``layer_of(entry)``, None: any), or a plan head the model lacks is a
    failed step."""
    out, seen = [], set()
    for li, L in enumerate(spec.attn_layers):
        for h in L.heads:
            layer = f"attention layer {li + 1}, head {h.name}"
            if h.name not in want or h.name in seen:
                out.append(unmet(f"{h.name}.planned", layer, "a head the plan names, once",
                                  "built twice" if h.name in seen else "the plan does not name it"))
                continue
            seen.add(h.name)
            at = layer_of(want[h.name])
            if at is not None and at != li:
                out.append(unmet(f"{h.name}.layer", layer, f"the head sits in attention layer {at + 1}",
                                  f"it sits in layer {li + 1}"))
            try:
                out += prove(li, h, want[h.name], layer)
            except ValueError as e:
                out.append(unmet(f"{h.name}.read", layer, "the score's directions", str(e)))
    for name in sorted(set(want) - seen):
        out.append(unmet(f"{name}.present", "attention", "the plan's head is built", "no head of that name"))
    return out


def nearest_readout_facts(spec, lo: int, hi: int, tag: str, direction: str = "next_code") -> list[dict]:
    """The readout of ``spec`` (terms in tau, tau^2 and 1 only) proved to emit
    the code in ``direction``: for every integer code n there and every other
    code c in lo..hi, logit(n) > logit(c), every other direction a free real."""
    labels = list(spec.labels)
    layer = "readout"
    n, c = z3.Int(f"{tag}.readout.n"), z3.Int(f"{tag}.readout.c")
    x = {lab: z3.Real(f"{tag}.readout.{lab}") for lab in labels}
    if direction not in x:
        return [unmet(f"readout.{direction}", layer, f"a direction {direction}", "none")]
    x[direction], x["one"] = z3.ToReal(n), z3.RealVal(1)

    def logit(code):
        total = z3.RealVal(0)
        for dim, kind, _, coef in spec.readout:
            if kind == K.F_TOK:
                feat = z3.ToReal(code)
            elif kind == K.F_TOK_SQ:
                feat = z3.ToReal(code * code)
            elif kind == K.F_ONE:
                feat = z3.RealVal(1)
            else:
                return None
            total = total + z3_value(coef) * feat * x[labels[dim]]
        return total
    ln, lc = logit(n), logit(c)
    if ln is None:
        return [unmet("readout.terms", layer, "a readout of tau, tau^2 and constant terms",
                       f"feature kinds {sorted({k for _, k, _, _ in spec.readout})}")]
    rng = [n >= lo, n <= hi, c >= lo, c <= hi, c != n]
    return [smt_fact(layer, "readout.nearest", f"for every integer code n = {direction} and every other code c in "
                  f"{lo}..{hi}: logit(n) > logit(c) (read off the built readout)", rng, ln > lc)]
