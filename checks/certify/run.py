"""``rnngap certify``: the run of every certificate, its records, table and proof chain.

A certificate is proved from the built model where its record has a plan
(checks/certify/interpreter.py), or else its declared obligations are checked for
every n up to the storage limit, piecewise-monotone. The simulators', the IsTree
Transformer's and the IsTree hybrid's layers have rows of their own, and the
machine lemmas run on the kernels. Details: docs/certify.md and
docs/internals/commands.md#certify.

Example::

    >>> from rnngap.checks.catalog.retrieval import retrieval_cert
    >>> r = certify_construction(retrieval_cert("index", 2))
    >>> r.certified, r.method, r.n_min
    (True, 'piecewise-monotone', 1)
"""
from __future__ import annotations

import json
import time
from typing import Callable

import sympy as sp

from rnngap.constructions.build.num import symbolic_build
from rnngap.constructions.models.bounds import SYM, A, N, largest
from rnngap.constructions.machine.fixedpoint import MAX_MAGNITUDE_BITS, MAX_WIDE_MAGNITUDE_BITS
from rnngap.constructions.models.obligations import Construction

from rnngap.checks.catalog import records as catalog
from rnngap.checks.catalog.hierarchy import sim_construction, sim_simulators
from rnngap.checks.io.errors import atomic_output
from rnngap.checks.tasks.abstract import INSTANCES
from rnngap.checks.verify.engine import PoolClient, completed, dask_client

from . import rows
from .interpreter import prove_model
from .machine_lemmas import check_all, lemmas_at
from .program import PROGRAM_METHOD, certify_program
from .result import Result
from .sizes import Z3Terms, compiled_truth, exact_truth, exact_value, prove

I_SYM = sp.Symbol("I", integer=True, nonnegative=True)
F_SYM = sp.Symbol("f", integer=True, nonnegative=True)
N_CAP = 1 << 62


# ----------------------------------------------------------------------------
# a syntactic proof that an expression is nondecreasing in x on integers x >= lo
def nondecreasing(expr, x=N, lo: int = 1, hi: int | None = None) -> bool:
    """True only if ``expr`` is provably nondecreasing in x for integers x in
    [lo, hi] (hi None: x >= lo; other symbols are constants): built from x and
    constants by +, * (a constant factor's sign read), powers (a negative
    exponent of a positive part turns the direction; a constant base >= 1 raised
    to a monotone part), Max/Min, floor/ceiling and log of positive parts; a part
    nonincreasing in x is shown positive at hi, so only on a bounded range. False
    means "not shown", never "decreasing"."""
    return _mono(sp.sympify(expr), x, lo, hi, 1)


def nonincreasing(expr, x=N, lo: int = 1, hi: int | None = None) -> bool:
    """As :func:`nondecreasing`, for nonincreasing."""
    return _mono(sp.sympify(expr), x, lo, hi, -1)


def _signed_ok(e, x, lo, hi, strict: bool) -> bool:
    """``e`` is shown >= 0 (> 0 if strict) on [lo, hi]: at lo if it is shown
    nondecreasing there, at hi (a bounded range) if it is shown nonincreasing."""
    test = (lambda v: bool(sp.sympify(v).is_positive)) if strict else (lambda v: bool(sp.sympify(v).is_nonnegative))
    if x not in e.free_symbols:
        return test(e)
    if _mono(e, x, lo, hi, 1):
        return test(e.subs(x, lo))
    return hi is not None and _mono(e, x, lo, hi, -1) and test(e.subs(x, hi))


def _mono(e, x, lo, hi, d: int) -> bool:
    """``e`` shown monotone in x on [lo, hi], in direction d (1: nondecreasing,
    -1: nonincreasing)."""
    if x not in e.free_symbols:
        return True
    if e == x:
        return d == 1
    if isinstance(e, sp.Add):
        return all(_mono(a, x, lo, hi, d) for a in e.args)
    if isinstance(e, sp.Mul):
        const = sp.Mul(*[a for a in e.args if x not in a.free_symbols])
        parts = [a for a in e.args if x in a.free_symbols]
        if const.is_negative:
            d = -d
        elif not const.is_nonnegative:
            return False
        if len(parts) == 1:
            return _mono(parts[0], x, lo, hi, d)
        return all(_mono(a, x, lo, hi, d) and _signed_ok(a, x, lo, hi, False) for a in parts)
    if isinstance(e, sp.Pow):
        b, k = e.args
        if x not in k.free_symbols:
            if k.is_positive:
                return _mono(b, x, lo, hi, d) and _signed_ok(b, x, lo, hi, False)
            if k.is_negative:
                return _mono(b, x, lo, hi, -d) and _signed_ok(b, x, lo, hi, True)
            return False
        if x not in b.free_symbols:
            if (b - 1).is_nonnegative:
                return _mono(k, x, lo, hi, d)
            if b.is_positive and (1 - b).is_nonnegative:
                return _mono(k, x, lo, hi, -d)
        return False
    if isinstance(e, (sp.Max, sp.Min)):
        return all(_mono(a, x, lo, hi, d) for a in e.args)
    if isinstance(e, (sp.floor, sp.ceiling)):
        return _mono(e.args[0], x, lo, hi, d)
    if isinstance(e, sp.log):
        a = e.args[0]
        return _mono(a, x, lo, hi, d) and _signed_ok(a, x, lo, hi, True)
    return False


def freeze_steps(expr, x, lo: int, hi: int):
    """``expr`` with every floor/ceiling part that is constant on [lo, hi]
    replaced by its value (innermost first): a part whose argument is shown
    monotone there and whose values at lo and hi agree, exactly. On a piece of
    constant declared format the step functions of n in a margin (its f(n), its
    I(n)) are such parts, and what is left may be monotone where the whole is not."""
    e = sp.sympify(expr)
    while True:
        inner = [a for a in e.atoms(sp.floor, sp.ceiling) if a.free_symbols == {x}
                 and not any(x in b.free_symbols for b in a.args[0].atoms(sp.floor, sp.ceiling))]
        done = {}
        for a in inner:
            arg = a.args[0]
            if not (_mono(arg, x, lo, hi, 1) or _mono(arg, x, lo, hi, -1)):
                continue
            v = exact_value(a, {x: lo})
            if v == exact_value(a, {x: hi}):
                done[a] = sp.Integer(int(v))
        if not done:
            return e
        e = e.xreplace(done)


# ----------------------------------------------------------------------------
def n_max_of(con: Construction) -> int | None:
    """Largest n >= n_min whose declared format the machine runs (I + f
    nondecreasing), or None: I(n) + f(n) <= 62 (int64 storage), or, for a
    construction declaring two-limb storage past int64 (``Declared.two_limb``),
    I + f <= 126."""
    if getattr(con.declared, "two_limb", False):
        fits = lambda n: sum(con.fmt(n)) <= MAX_WIDE_MAGNITUDE_BITS
    else:
        fits = lambda n: sum(con.fmt(n)) <= MAX_MAGNITUDE_BITS
    return largest(fits, con.n_min, N_CAP)


def n_max_int64_of(con: Construction) -> int | None:
    """Largest n >= n_min with I(n) + f(n) <= 62, or None."""
    return largest(lambda n: sum(con.fmt(n)) <= MAX_MAGNITUDE_BITS, con.n_min, N_CAP)


def _pieces(con: Construction, n0: int, n1: int):
    """Maximal [lo, hi] with a constant declared (I, f), covering n0..n1."""
    lo = n0
    while lo <= n1:
        v = con.fmt(lo)
        step, hi = 1, lo
        while hi + step <= n1 and con.fmt(hi + step) == v:
            hi += step
            step *= 2
        while step > 1:
            step //= 2
            if hi + step <= n1 and con.fmt(hi + step) == v:
                hi += step
        yield lo, hi, v
        lo = hi + 1


def certify_construction(con: Construction, params: int | None = None) -> Result:
    t0 = time.perf_counter()
    res = Result(con.claim, con.name, len(con.obligations), con.n_min, None, "piecewise-monotone", False, 0.0,
                 params=params)
    I_e, f_e = con.fmt_expr(SYM, N)
    if not (nondecreasing(I_e, N, con.n_min) and nondecreasing(f_e, N, con.n_min)):
        res.note = f"the declared format is not shown nondecreasing in n: I = {I_e}, f = {f_e}"
        res.method = "none"
        res.seconds = round(time.perf_counter() - t0, 3)
        return res
    shape_ok = {}
    for o in con.obligations:
        need = sp.expand(sp.sympify(o.need(SYM, N, I_SYM, F_SYM)))
        have = sp.expand(sp.sympify(o.have(SYM, N, I_SYM, F_SYM)))
        shape_ok[o.name] = nondecreasing(need, N, con.n_min) and N not in have.free_symbols
        if not shape_ok[o.name]:
            res.failures.append({"obligation": o.name, "first_n": None, "need": str(need), "have": str(have),
                                 "why": "need not shown nondecreasing in n or have depends on n"})
    n_max = n_max_of(con)
    res.n_max, res.n_max_int64 = n_max, n_max_int64_of(con)
    if n_max is None:
        res.note = f"the declared format at n = {con.n_min} does not fit the machine's storage"
        res.seconds = round(time.perf_counter() - t0, 3)
        return res
    failed = set()
    for lo, hi, (I, f) in _pieces(con, con.n_min, n_max):
        res.pieces += 1
        for o in con.obligations:
            if o.name in failed or not shape_ok[o.name]:
                continue
            if o.holds(con, hi):
                continue
            a, b = lo, hi                   # need nondecreasing on the piece: the failing n form a suffix
            while a < b:
                m = (a + b) // 2
                a, b = (a, m) if not o.holds(con, m) else (m + 1, b)
            need, have = o.values(con, a)
            res.failures.append({"obligation": o.name, "first_n": a, "need": str(need), "have": str(have),
                                 "format": f"Q{I}.{f}"})
            failed.add(o.name)
    res.certified = not res.failures
    res.seconds = max(round(time.perf_counter() - t0, 3), 0.001)
    return res


# ----------------------------------------------------------------------------
# whole-model certificates: the built model, read layer by layer (checks/certify/interpreter.py)

NOT_MONOTONE = "z3 did not prove it for all n and its sides are not shown nondecreasing in n"
"""Why a builder margin is not shown on a range too long to check every n."""
BUILDER_TIMEOUT_MS = 5000
EXHAUSTIVE_LIMIT = 20000
"""A builder margin neither z3 nor the monotone pieces prove is checked at every n
exactly when n_max - n_min is below this."""
COVERS = ["format", "machine", "embedding", "rnn-layers", "heads", "mlps", "readout", "ranges", "builder-margins"]


def _relation_sides(rel):
    """(small, big, strict) with rel == (small < big) or (small <= big)."""
    if isinstance(rel, (sp.StrictLessThan, sp.LessThan)):
        return rel.lhs, rel.rhs, isinstance(rel, sp.StrictLessThan)
    if isinstance(rel, (sp.StrictGreaterThan, sp.GreaterThan)):
        return rel.rhs, rel.lhs, isinstance(rel, sp.StrictGreaterThan)
    return None


_EXHAUSTIVE: dict = {}


def _first_failure(cond, lo: int, hi: int) -> int | None:
    """The first n in lo..hi where the condition fails, exactly (None: it holds at every
    n); cached per condition, since a certificate's builder margins do not change
    when only the built model is changed (the mutation tests)."""
    key = (sp.srepr(cond), lo, hi)
    if key not in _EXHAUSTIVE:
        holds = compiled_truth(sp.sympify(cond)) if lo <= hi else None
        _EXHAUSTIVE[key] = next((m for m in range(lo, hi + 1) if not holds({N: m})), None)
    return _EXHAUSTIVE[key]


def _builder_obligation(ob, terms, hyps, con: Construction, n_max: int | None, pieces: list,
                        a_max=None) -> dict:
    """One margin check a builder recorded in its symbolic build: proved by z3 for
    every n >= n_min, or else checked exactly on every piece of constant declared
    format up to n_max, where both sides are shown nondecreasing in n (the small
    side at the piece's last n against the big side at its first n covers the
    piece). With ``a_max`` (a plan certifying every alphabet up to a_max(n)), a
    condition on the alphabet a is checked at a = a_max(n) where its small side is
    nondecreasing in a and its big side free of a."""
    out = {"layer": "builder", "lemma": ob.message, "statement": str(ob.condition)}
    try:
        goal = terms.relation(ob.condition)          # first: translating it adds its atoms' facts
        r = prove(hyps + terms.facts, goal, BUILDER_TIMEOUT_MS, portfolio=False)
    except ValueError as e:           # an atom z3 cannot read: the piecewise method below
        r = {"answer": f"not translated ({e})", "query": ""}
    if r["answer"] == "unsat":
        return {**out, "method": "smt", "answer": "unsat", "range": f"all n >= {con.n_min}", "query": r["query"],
                "config": r.get("config", "")}
    sides = _relation_sides(ob.condition)
    if n_max is None or sides is None:
        return {**out, "method": "smt", "answer": r["answer"], "why": "z3 did not prove it and no piecewise method"}
    small, big, strict = sides
    cond = ob.condition.subs(A, a_max) if a_max is not None else ob.condition
    if a_max is not None and (A in small.free_symbols or A in big.free_symbols):
        # every alphabet 1 <= a <= a_max(n) at once: the small side nondecreasing in a, the big free of a
        if A in big.free_symbols or not nondecreasing(small, A, 1):
            return {**out, "method": "smt", "answer": r["answer"],
                    "why": "z3 did not prove it and it is not shown monotone in the alphabet a"}
        small = small.subs(A, a_max)
    if not (nondecreasing(small, N, con.n_min) and nondecreasing(big, N, con.n_min)):
        frozen = _frozen_pieces(small, big, strict, cond, pieces)
        if frozen is not None:
            return {**out, **frozen}
        if n_max - con.n_min < EXHAUSTIVE_LIMIT:        # small enough to check every n exactly
            first = _first_failure(cond, con.n_min, n_max)
            if first is None:
                return {**out, "method": "exhaustive", "answer": "holds", "range": f"{con.n_min}..{n_max}"}
            return {**out, "method": "exhaustive", "answer": "fails", "first_n": first, "why": f"fails at n = {first}"}
        return {**out, "method": "smt", "answer": r["answer"], "why": NOT_MONOTONE}
    for lo, hi in pieces:
        a, b = exact_value(small, {N: hi}), exact_value(big, {N: lo})
        if (a < b) if strict else (a <= b):
            continue
        # not shown on this piece; a failure at n = hi itself is a real one
        return {**out, "method": "piecewise-monotone", "answer": "fails",
                "first_n": None if exact_truth(cond, {N: hi}) else hi,
                "why": f"not shown on [{lo}, {hi}]: the small side at {hi} is {a}, the big side at {lo} is {b}"}
    return {**out, "method": "piecewise-monotone", "answer": "holds", "range": f"{con.n_min}..{n_max}"}


def _frozen_pieces(small, big, strict: bool, cond, pieces: list) -> dict | None:
    """A margin whose sides are not monotone in n as a whole, on the pieces of
    constant declared format: on each piece its floor/ceiling parts that are
    constant there are replaced by their values (:func:`freeze_steps`, e.g. the
    f(n) = 2 ceil(log2(n + 2)) + 3 inside a rounding error 2^-f), and what is left
    must be shown nondecreasing on the piece, both sides; then the small side at
    the piece's last n against the big side at its first n covers the piece, as in
    the plain piecewise method. The method's record; a record that fails where the
    condition is false at a piece's last n; None where some piece is not shown
    this way (then the exhaustive check or the cap may still apply)."""
    for lo, hi in pieces:
        s, b = freeze_steps(small, N, lo, hi), freeze_steps(big, N, lo, hi)
        if (s.free_symbols | b.free_symbols) - {N} or not (nondecreasing(s, N, lo, hi) and nondecreasing(b, N, lo, hi)):
            return None
        a, c = exact_value(s, {N: hi}), exact_value(b, {N: lo})
        if not ((a < c) if strict else (a <= c)):
            if exact_truth(cond, {N: hi}):       # not shown, not refuted: the other methods may still show it
                return None
            return {"method": "piecewise-monotone (steps frozen)", "answer": "fails", "first_n": hi,
                    "why": f"fails at n = {hi}: the small side at {hi} is {a}, the big side at {lo} is {c}"}
    lo, hi = pieces[0][0], pieces[-1][1]
    return {"method": "piecewise-monotone (steps frozen)", "answer": "holds", "range": f"{lo}..{hi}"}


def _margin_cap(con: Construction, n_max: int | None, n_max_int64: int | None, margins: list) -> int | None:
    """For a construction declaring two limbs past int64: when a builder margin is
    neither proved by z3 nor shown monotone on the pieces up to the two-limb n_max
    (too many n to check each), the n up to which it can be checked exactly, n_min
    + EXHAUSTIVE_LIMIT - 1 (at least the int64 n_max); None when nothing needs it."""
    if n_max is None or n_max_int64 is None or n_max <= n_max_int64:
        return None
    if not any(m["answer"] not in ("unsat", "holds") and m.get("why") == NOT_MONOTONE for m in margins):
        return None
    return max(n_max_int64, min(n_max, con.n_min + EXHAUSTIVE_LIMIT - 1))


def _format_step(model, con: Construction) -> dict:
    """The built model's format is the record's declared format, as expressions of n
    (sympy proves the differences 0): the proof's sharpness(f) is then the f the
    machine runs at, and the piecewise checks use the I the machine has."""
    I_d, f_d = con.fmt_expr(SYM, N)
    I_b, f_b = model.fmt.int_bits, model.fmt.frac_bits
    same = all(sp.simplify(sp.sympify(x) - sp.sympify(y)) == 0 for x, y in ((I_b, I_d), (f_b, f_d)))
    return {"layer": "format", "lemma": "the built format is the declared one",
            "statement": f"I = {I_b}, f = {f_b} (declared I = {I_d}, f = {f_d})", "method": "sympy",
            "answer": "holds" if same else "fails", "range": f"all n >= {con.n_min}" if same else "",
            **({} if same else {"why": "the builder built a format other than the declared one"})}


def _machine_step(con: Construction, n_max: int | None, pieces: list) -> dict:
    """The machine lemmas (one-hot, equal split) on the kernels, at every format the
    construction's declared (I(n), f(n)) takes for n_min <= n <= n_max (the
    formats of ``pieces``; checks/certify/machine_lemmas.py)."""
    fmts = sorted({v for _, _, v in pieces})
    bad = [b for I, f in fmts for b in lemmas_at(I, f)]
    out = {"layer": "machine", "lemma": "fx_attend: a gap >= sharpness(f) gives an exact one-hot; m tied maxima "
                                        "give round(1/m) each", "method": "kernel-exhaustive",
           "statement": f"on the kernels, at each of the {len(fmts)} declared formats up to n_max",
           "answer": "holds" if fmts and not bad else "fails", "range": f"{con.n_min}..{n_max}" if fmts else ""}
    if bad or not fmts:
        out["why"] = "; ".join(bad[:3]) if bad else "no declared format fits the machine's storage"
    return out


def certify_built(cert, mutate=None, build=None, timeout_ms: int | None = None) -> Result:
    """The whole-model certificate of a certificate with a plan (a
    :class:`checks.catalog.schema.Certificate`; each plan is with its record, checks/catalog/):
    the record's builder is run with n symbolic; every margin check it records is
    proved (:func:`_builder_obligation`), and every layer of the model it built is
    proved on the task's abstract instance (checks/certify/interpreter.py). For the
    mutation tests: ``build(n, a)`` replaces the record's builder, ``mutate(model)``
    changes the built model before the proof."""


    t0 = time.perf_counter()
    con, mp = cert.con, cert.plan
    if mp is None:
        raise ValueError(f"{con.name}: no whole-model plan")
    res = Result(con.claim, con.name, 0, con.n_min, None, "built-model", False, 0.0, params=cert.params,
                 covers=[], source="built-model")
    inst = (mp.instance or INSTANCES[mp.task])()
    alpha = A if mp.alphabet_max else sp.sympify(con.alphabet(SYM, N))
    with symbolic_build() as obligations:
        model = (build or cert.build)(N, int(alpha) if alpha.is_Integer else alpha)
    if mutate is not None:
        mutate(model)
    terms = Z3Terms({N: inst.n, A: inst.a})
    inst.facts += [inst.n >= con.n_min] + ([inst.a >= 1, inst.a <= mp.alphabet_max(inst.n)] if mp.alphabet_max
                                            else [inst.a == terms(alpha)])
    n_max = n_max_of(con)
    res.n_max, res.n_max_int64 = n_max, n_max_int64_of(con)
    with_fmt = [] if n_max is None else list(_pieces(con, con.n_min, n_max))
    pieces = [(lo, hi) for lo, hi, _ in with_fmt]
    res.pieces = len(pieces)
    steps = [_format_step(model, con)]
    if model.spec.attn_layers:           # the softmax lemmas matter only to a model with heads
        steps.append(_machine_step(con, n_max, with_fmt))
    a_max = mp.alphabet_max(N) if mp.alphabet_max else None
    margins = [_builder_obligation(ob, terms, list(inst.facts), con, n_max, pieces, a_max) for ob in obligations]
    cap = _margin_cap(con, n_max, res.n_max_int64, margins)
    if cap is not None:               # a margin shown only exhaustively: certify up to where that reaches
        res.note = (f"builder margins checked to n = {cap} (a margin not shown monotone is checked at every n "
                    f"there); the declared two-limb format reaches n = {n_max}; ")
        n_max = res.n_max = cap
        with_fmt = list(_pieces(con, con.n_min, n_max))
        pieces = [(lo, hi) for lo, hi, _ in with_fmt]
        res.pieces = len(pieces)
        if model.spec.attn_layers:
            steps[-1] = _machine_step(con, n_max, with_fmt)
        margins = [_builder_obligation(ob, terms, list(inst.facts), con, n_max, pieces, a_max) for ob in obligations]
    steps += margins
    for f in prove_model(model, inst, mp.heads(inst), {N: inst.n, A: inst.a}, timeout_ms or mp.timeout_ms,
                         mp.portfolio):
        steps.append({**f.record(), "range": f"all n >= {con.n_min}" if f.ok else ""})
    res.steps = steps
    res.obligations = len(steps)
    res.covers = [c for c in COVERS if _covered(c, model.spec, steps)]
    for st in steps:
        if st["answer"] not in ("unsat", "holds"):
            res.failures.append({"obligation": f"{st['layer']}: {st['lemma']}", "first_n": st.get("first_n"),
                                 "need": "-", "have": "-",
                                 "why": st.get("why") or f"z3 answered {st['answer']}"
                                 + (f": {st['counterexample']}" if st.get("counterexample") else "")})
    res.facts = [{k: v for k, v in st.items() if k != "query"} for st in steps]
    res.note += (f"task {mp.task}: every layer of the model the builder built, on every instance; "
                 f"layer facts for all n >= {con.n_min}, builder margins as their method says")
    res.certified = not res.failures
    res.seconds = max(round(time.perf_counter() - t0, 3), 0.001)
    return res


def _covered(what: str, spec, steps: list) -> bool:
    """A layer kind is covered when the model has it and a step is about it (an
    absent kind, e.g. RNN layers of a Transformer, is not listed)."""
    layers = {st["layer"] for st in steps}
    if what == "embedding":
        return True                 # the residual of every later step is the embedding's formula
    if what == "rnn-layers":
        return bool(spec.rnn_layers) and any(l.startswith("rnn layer") for l in layers)
    if what == "heads":
        return any(" head " in l for l in layers)
    if what == "mlps":
        return any(L.W1.shape[0] for L in list(spec.attn_layers) + list(spec.rnn_layers))
    if what == "readout":
        return "readout" in layers
    if what == "ranges":                   # every value of the run within the declared bound (attention-free)
        return "ranges" in layers
    if what in ("format", "machine"):
        return what in layers
    if what == "builder-margins":
        return "builder" in layers
    return False


def _clip(text: str, width: int = 300) -> str:
    return text if len(text) <= width else text[:width - 5] + " ..."


def _lemma_text(step: dict) -> str:
    """What a step proves, in words. A builder margin's recorded text is the message
    the builder raises when the margin fails; shown is what it is about, and the
    statement line below it says what holds."""
    if step["layer"] != "builder":
        return step["lemma"]
    about = step["lemma"].rsplit(": ", 1)[0] if ": " in step["lemma"] else step["lemma"]
    return f"builder margin ({about}): the inequality below holds, so the builder builds"


def explain(res: Result) -> str:
    """The proof chain of one certificate, readable (``certify --explain``)."""
    lines = [f"{res.construction} ({res.claim}): {'certified' if res.certified else 'NOT certified'}; "
             f"source {res.source}; covers {', '.join(res.covers) or '-'}", res.note, ""]
    if not res.steps:
        lines.append("(no built-model proof chain: the declared obligations, checked as the method says)")
        for fl in res.facts:
            lines.append(f"  {fl.get('fact', '?')}: {fl.get('answer')}")
        return "\n".join(lines)
    layer = None
    for st in res.steps:
        if st["layer"] != layer:
            layer = st["layer"]
            lines.append(f"[{layer}]")
        verdict = {"unsat": "proved", "holds": "holds"}.get(st["answer"], f"NOT PROVED ({st['answer']})")
        lines.append(f"  {_clip(_lemma_text(st))}")
        lines.append(f"      {_clip(st['statement'])}")
        lines.append(f"      method {st['method']}, {verdict}" + (f", {st['range']}" if st.get("range") else "")
                     + (f"; {st['why']}" if st.get("why") else ""))
    return "\n".join(lines)


SIM_NOTE = ("the simulator's I is defined as the largest of its needs (bounds.sim_int), so its range "
            "obligations hold by definition; certified: the int64 fit up to n_max, I nondecreasing in the "
            "context n, the heads' gap and the clamp gate; the heads themselves are proved from each built "
            "simulator ('rnnsim-transformer[layers]')")


def certify_sim(sim) -> Result:
    """The simulator's obligations over its context length n, plus the measurement:
    the built simulator's I at its own context is <= the certified I(n_pos)."""
    con = sim_construction(sim.params())
    res = certify_construction(con)
    res.note = SIM_NOTE
    I_cert = con.fmt(sim.n_pos)[0]
    if sim.fmt.int_bits > I_cert:
        res.failures.append({"obligation": "measured.int_bits", "first_n": sim.n_pos, "need": str(sim.fmt.int_bits),
                             "have": str(I_cert), "why": "the built simulator uses more bits than certified"})
        res.certified = False
    return res


def certify_machine() -> Result:
    """The machine lemmas on the kernels at EVERY format the int64 machine holds."""
    r = check_all()
    res = Result("machine", "machine", 2, 0, None, "kernel-exhaustive", not r["failures"],
                 max(r["seconds"], 0.001), source="kernel",
                 failures=[{"obligation": "machine lemma", "first_n": None, "need": "-", "have": "-", "why": b}
                           for b in r["failures"][:20]],
                 note=f"one-hot and equal split of fx_attend at all {r['formats']} formats with I + f <= 62 "
                      f"({r['one_hot_vacuous']} hold no one-hot head: sharpness(f) >= 2^(I+1)); "
                      "checks/certify/machine_lemmas.py")
    return res


_CERTIFICATES = catalog.certificates
"""checks.catalog.records.certificates as imported: :func:`certify` uses its pool only while
that is still the catalogue's function."""


def _certify_one(cert) -> Result:
    """One certificate of the construction records: from the built model where it has a
    whole-model plan, its compiled program's facts at its sizes where it has those
    (checks/certify/program.py), else its declared obligations piecewise."""
    if cert.planned():
        return certify_built(cert)
    if cert.program_sizes:
        return certify_program(cert)
    return certify_construction(cert.con, cert.params)


def _certify_named(name: str) -> Result | None:
    """A pool worker's job: the certificate ``name`` of the construction records as this
    (spawned) process builds them; None if it has no such record (a record
    registered only in the parent process at run time: the parent certifies it)."""
    cert = catalog.certificates().get(name)
    return None if cert is None else _certify_one(cert)


def _cost(cert) -> int:
    """A certificate's cost hint: the pool starts the costliest first (the z3 tactic
    portfolios of c-gram c = 4, then the other whole-model proofs)."""
    if not cert.planned():
        return 0
    return 2 if cert.plan.portfolio is not None else 1


def chosen_certificates(only: list[str] | None = None, constructions: dict | None = None,
                        full: bool = False) -> tuple[list, list]:
    """(the certificates :func:`certify` runs, the slow ones it leaves out): those of
    the construction records (``constructions``: a name -> Certificate map instead)
    of the claims or names in ``only`` (all when None); a slow certificate
    (``Certificate.slow``) only with ``full`` or when ``only`` names it."""
    certs = catalog.certificates() if constructions is None else constructions
    picked = [cert for cert in certs.values() if not only or cert.claim in only or cert.name in only]
    run = [c for c in picked if full or not getattr(c, "slow", False) or (only and c.name in only)]
    names = {c.name for c in run}
    return run, [c for c in picked if c.name not in names]


def certify(only: list[str] | None = None, constructions: dict | None = None,
            facts: bool = True, workers: int = 1, full: bool = False, every_n: bool = False,
            progress: Callable[[int, int], None] | None = None, engine: str = "local",
            address: str | None = None) -> list[Result]:
    """Certify the certificates of :func:`chosen_certificates` (the slow ones only
    with ``full``): from the built model where the certificate has a whole-model
    plan, else its declared obligations piecewise; plus the simulators the registry
    builds (their declared obligations; with ``facts`` their heads, proved from the
    built simulators: checks/certify/simulator.py), the IsTree hybrid's layers
    (checks/certify/istree_hybrid.py: at its default sizes N, or with ``every_n`` at
    every N to int64, in chunks spread over the workers, the first of which also
    proves the composition, checks/certify/istree_hybrid_chain.py), the IsTree
    Transformer's (checks/certify/istree_transformer.py: at its NS, or with ``every_n`` at its
    NS_FULL in chunks, the first of which also proves its composition over the
    DFS tour, checks/certify/istree_transformer_chain.py) and the machine lemmas.

    With ``workers`` > 1 every certificate runs on a pool of that many spawned
    processes (checks.verify.engine.PoolClient: Ctrl-C or an error ends them), the
    costliest first (c-gram c = 4's, then the simulators, their heads and the machine
    lemmas as one job, then the others); each certificate is computed by the same
    code as in one process (z3's time limits are wall-clock), and the results come
    in the same order. ``engine``: ``"local"`` (that pool), ``"serial"`` (this
    process) or ``"dask"`` (a LocalCluster of ``workers`` processes, or the
    scheduler at ``address``: the same jobs, the same records). A record the
    workers do not have (one registered in this process at run time) is
    certified here; a ``constructions`` map, or a catalogue function replaced in
    this process, is certified in this process alone."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if address is not None and engine != "dask":
        raise ValueError("an address needs the dask engine")
    if engine == "serial":
        workers = 1
    chosen, _ = chosen_certificates(only, constructions, full)
    # the workers build the catalogue afresh: a catalogue replaced in this process (a
    # test's monkeypatch) is certified here, where the change is seen
    chunks = []                           # (per-layer row, its sizes): jobs of their own
    for mod, row in rows.LAYER_ROWS.items():
        sizes = row.layers.NS_FULL if every_n else row.layers.NS
        chunks += [(mod, c) for c in ((sizes[k::2 * workers] for k in range(2 * workers)) if every_n else [sizes])
                   if c]
    jobs = len(chosen) + (len(chunks) if every_n else 0)
    total, done = len(chosen) + len(chunks) + 1, [0]

    def tick():                           # one job finished: ``progress(done, total)``
        done[0] += 1
        if progress is not None:
            progress(done[0], total)
    if progress is not None:
        progress(0, total)
    here = constructions is not None or catalog.certificates is not _CERTIFICATES
    if engine == "dask" and not here:
        with dask_client(workers, address) as client:
            out, parts, rest = _certify_on(client, chosen, chunks, only, constructions, facts, every_n, tick)
    elif engine == "local" and not here and min(workers, jobs) > 1:
        with PoolClient(min(workers, jobs)) as client:
            out, parts, rest = _certify_on(client, chosen, chunks, only, constructions, facts, every_n, tick)
    else:
        out = []
        for cert in chosen:
            out.append(_certify_one(cert))
            tick()
        parts = []
        for k, (mod, chunk) in enumerate(chunks):
            parts.append(_layer_row(only, constructions, facts, mod, chunk, _chain(mod, k, chunks, every_n)))
            tick()
        rest = _rest(only, constructions, facts)
        tick()
    merged = []
    for mod in rows.LAYER_ROWS:
        mine = [p[0] for (m, _), p in zip(chunks, parts) if m == mod and p]
        merged += [rows.merge(mine)] if mine else []
    return out + merged + rest


def _certify_on(client, chosen: list, chunks: list, only, constructions, facts: bool,
                every_n: bool, tick) -> tuple[list, list, list]:
    """:func:`certify`'s jobs on ``client`` (a local pool or a Dask client), the
    costliest certificate first: (the certificates' results in the order of
    ``chosen``, the per-layer chunks' results, the rest's); ``tick()`` after each job."""
    parts: list = [None] * len(chunks)
    out: list = [None] * len(chosen)
    rest: list = []
    order = sorted(range(len(chosen)), key=lambda i: -_cost(chosen[i]))
    futures = {client.submit(_certify_named, chosen[i].name, pure=False): i for i in order[:1]}
    futures[client.submit(_rest, only, constructions, facts, pure=False)] = -1
    futures.update({client.submit(_layer_row, only, constructions, facts, mod, chunk,
                                  _chain(mod, k, chunks, every_n), pure=False): -2 - k
                    for k, (mod, chunk) in enumerate(chunks)})
    futures.update({client.submit(_certify_named, chosen[i].name, pure=False): i for i in order[1:]})
    for fut in completed(client, list(futures)):
        tick()
        if futures[fut] == -1:
            rest = fut.result()
        elif futures[fut] <= -2:
            parts[-2 - futures[fut]] = fut.result()
        else:
            out[futures[fut]] = fut.result()
    out = [r if r is not None else _certify_one(cert) for r, cert in zip(out, chosen)]
    return out, parts, rest


ENGINES = ("local", "serial", "dask")
"""Where ``certify`` runs its jobs (as ``rnngap verify --engine``)."""


def _chain(mod: str, k: int, chunks: list, every_n: bool) -> bool:
    """Whether chunk k proves its row's composition: with ``every_n`` (``--full``)
    the first chunk of each row that has one (the IsTree Transformer's, the IsTree
    hybrid's; tens of seconds of one worker each, so not in the default run)."""
    return every_n and all(m != mod for m, _ in chunks[:k])


def _layer_row(only, constructions, facts: bool, mod: str, sizes: tuple, chain: bool = False) -> list[Result]:
    """The per-layer certificate of row ``mod`` (rows.LAYER_ROWS) at the sizes
    ``sizes``, proved from the built models, with ``facts``, and with ``chain``
    its composition; [] when not asked for."""
    L = rows.LAYER_ROWS[mod].layers
    if constructions is not None or not facts or (only and L.CLAIM not in only and L.NAME not in only):
        return []
    return [rows.layer_row(mod, sizes, chain=chain)]


def _rest(only, constructions, facts: bool) -> list[Result]:
    """The certificates that are not construction records': the simulators the
    registry builds (their declared obligations, and with ``facts`` their heads
    proved from the built simulators, checks/certify/simulator.py) and the machine
    lemmas."""
    out = []
    declared = not only or "sim" in only
    heads = facts and (declared or rows.SIM_ROW in only)
    if constructions is None and (declared or heads):
        sims = sim_simulators()
        if declared:
            out += [certify_sim(sim) for sim in sims]
        if heads:
            out.append(rows.simulator_row(sims))
    if constructions is None and (not only or "machine" in only):
        out.append(certify_machine())
    return out


def write_json(results: list[Result], path: str) -> None:
    """One record per construction (claim, construction, obligations, n_min, n_max,
    method, certified, seconds, ...)."""

    with atomic_output(path, what="certify --json") as fh:
        json.dump([r.record() for r in results], fh, indent=1)


def table(results: list[Result]) -> str:
    table_rows = [("claim", "construction", "obligations", "n certified", "method", "source", "params", "ok", "seconds")]
    for r in results:
        wide = (f"; int64 to {r.n_max_int64}" if r.n_max is not None and r.n_max_int64 is not None
                and r.n_max_int64 < r.n_max else "")
        rng = ("every format, I + f <= 62" if r.method == "kernel-exhaustive" else
               "position heads: all n; firstK: to n_pos" if r.construction == rows.SIM_ROW else
               rows.sizes_text(r) if r.construction in rows.LAYER_ROWS else
               "n in {" + ", ".join(map(str, r.sizes)) + "}" if r.method == PROGRAM_METHOD else
               f"all n >= {r.n_min}" if r.method.startswith("smt") else
               f"all n >= {r.n_min} (+ margins {r.n_min}..{r.n_max}{wide})" if r.method == "built-model" else
               f"{r.n_min}..{r.n_max}{wide}" if r.n_max is not None else "-")
        table_rows.append((r.claim, r.construction, str(r.obligations), rng, r.method, r.source,
                     "-" if r.params is None else str(r.params), "yes" if r.certified else "NO",
                     f"{r.seconds:.2f}"))
    w = [max(len(row[i]) for row in table_rows) for i in range(len(table_rows[0]))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)) for row in table_rows]
    for r in results:
        for fl in r.failures:
            lines.append(f"FAILED {r.construction}: {fl['obligation']} first fails at n = {fl['first_n']} "
                         f"(need {fl['need']}, have {fl['have']}{', ' + fl.get('why', '') if fl.get('why') else ''})")
        if r.note and not r.certified:
            lines.append(f"FAILED {r.construction}: {r.note}")
    return "\n".join(lines)
