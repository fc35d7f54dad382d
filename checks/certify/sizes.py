"""sympy expressions of the sizes, read two ways: exactly at one n, and by z3 for all n.

A symbolic build (constructions/build/num.py) gives every weight, bound and margin as a
sympy expression in the sizes, using a few non-polynomial atoms (ceiling/floor
of log2, floor, ceiling, powers of 2). :func:`exact_value` evaluates one at
concrete sizes with integer arithmetic only. :class:`Z3Terms` translates it for
proofs over all sizes, each atom a fresh integer with its defining facts. The
translation is sound: a missing fact shows as ``unknown`` or ``sat``, never as a
false proof.

Example::

    >>> import sympy as sp
    >>> n = sp.Symbol("n", positive=True, integer=True)
    >>> exact_value(sp.ceiling(sp.log(n + 3, 2)), {n: 5})
    Fraction(3, 1)

Details (the atoms, both readings): docs/internals/certify.md#sizes
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from fractions import Fraction
from functools import lru_cache
from typing import Any

import sympy as sp

try:
    import z3
except ImportError:     # certify reports every proof as unavailable (never passed)
    z3 = None


# ----------------------------------------------------------------------------
# exact evaluation
def _log2_arg(e: sp.Expr):
    """y if e is log(y)/log(2) (sympy's form of log(y, 2)), else None."""
    if isinstance(e, sp.Mul) and len(e.args) == 2:
        a, b = e.args
        for x, y in ((a, b), (b, a)):
            if isinstance(x, sp.log) and isinstance(y, sp.Pow) and y.args == (sp.log(2), -1):
                return x.args[0]
    if isinstance(e, sp.log) and len(e.args) == 1 and e.args[0] == 2:
        return None
    return None


def _floor_log2(y) -> int:
    """floor(log2 y) for y > 0 (an int or a Fraction), exactly."""
    if y <= 0:
        raise ValueError(f"log2 of {y}")
    if isinstance(y, int):
        return y.bit_length() - 1
    k = y.numerator.bit_length() - y.denominator.bit_length()
    while Fraction(2) ** k > y:
        k -= 1
    while Fraction(2) ** (k + 1) <= y:
        k += 1
    return k


def _ceil_log2(y) -> int:
    k = _floor_log2(y)
    return k if Fraction(2) ** k == y else k + 1


def _lazy(compile_, e):
    """The evaluator ``compile_(e)``, compiled at its first call: a Piecewise branch or an
    And / Or argument that evaluation never reaches is never read (as the recursive
    reading it replaces)."""
    box: list = []

    def run(env):
        if not box:
            box.append(compile_(e))
        return box[0](env)
    return run


def _normal(v):
    """An exact value as an int when it is one (int arithmetic is several times
    faster than Fraction's), else the Fraction."""
    return v.numerator if isinstance(v, Fraction) and v.denominator == 1 else v


@lru_cache(maxsize=4096, typed=True)
def compiled_value(e: Any):
    """The exact evaluator of a sympy expression: a function of the sizes ``env``
    ({symbol: int}) returning an int or a Fraction. The expression is read once
    and its evaluation is a tree of closures (the exhaustive certificates evaluate
    one condition at every n up to tens of thousands). :func:`exact_value` is this
    function's value as a Fraction."""
    e = sp.sympify(e)
    if isinstance(e, sp.Rational):
        c = _normal(Fraction(int(e.p), int(e.q)))
        return lambda env: c
    if isinstance(e, sp.Symbol):
        def sym(env, e=e):
            if e not in env:
                raise KeyError(f"no value for {e}")
            return _normal(Fraction(env[e])) if not isinstance(env[e], int) else env[e]
        return sym
    if isinstance(e, sp.Add):
        parts = [compiled_value(a) for a in e.args]
        return lambda env: _normal(sum((p(env) for p in parts), 0))
    if isinstance(e, sp.Mul):
        if _log2_arg(e) is not None:
            raise ValueError(f"log2 outside floor/ceiling: {e}")
        parts = [compiled_value(a) for a in e.args]

        def mul(env):
            out = 1
            for p in parts:
                out *= p(env)
            return _normal(out)
        return mul
    if isinstance(e, sp.Pow):
        base, exp = compiled_value(e.args[0]), compiled_value(e.args[1])

        def power(env):
            k = exp(env)
            if not isinstance(k, int):
                raise ValueError(f"a fractional power: {e}")
            b = base(env)
            return _normal(b ** k if k >= 0 else Fraction(b) ** k)
        return power
    if isinstance(e, (sp.floor, sp.ceiling)):
        down = isinstance(e, sp.floor)
        y = _log2_arg(e.args[0])
        if y is not None:
            arg = compiled_value(y)
            return (lambda env: _floor_log2(arg(env))) if down else (lambda env: _ceil_log2(arg(env)))
        arg = compiled_value(e.args[0])

        def rounded(env):
            v = arg(env)
            if isinstance(v, int):
                return v
            q, r = divmod(v.numerator, v.denominator)
            return q if down or r == 0 else q + 1
        return rounded
    if isinstance(e, (sp.Max, sp.Min)):
        parts, pick = [compiled_value(a) for a in e.args], (max if isinstance(e, sp.Max) else min)
        return lambda env: pick([p(env) for p in parts])
    if isinstance(e, sp.Abs):
        arg = compiled_value(e.args[0])
        return lambda env: abs(arg(env))
    if isinstance(e, sp.Piecewise):      # a branch is read when it is first reached, as evaluating does
        branches = [(_lazy(compiled_value, val), None if cond == sp.true else _lazy(compiled_truth, cond))
                    for val, cond in e.args]

        def piecewise(env):
            for val, cond in branches:
                if cond is None or cond(env):
                    return val(env)
            raise ValueError(f"no branch of {e} holds")
        return piecewise
    raise ValueError(f"cannot evaluate {type(e).__name__} exactly: {e}")


_RELATIONS = {sp.StrictLessThan: lambda a, b: a < b, sp.LessThan: lambda a, b: a <= b,
              sp.StrictGreaterThan: lambda a, b: a > b, sp.GreaterThan: lambda a, b: a >= b,
              sp.Equality: lambda a, b: a == b, sp.Unequality: lambda a, b: a != b}


@lru_cache(maxsize=4096, typed=True)
def compiled_truth(rel: Any):
    """The exact evaluator of a sympy relation (or And/Or/Not/ITE of relations): a
    function of ``env`` returning a bool (:func:`compiled_value` for its sides)."""
    rel = sp.sympify(rel)
    if rel in (sp.true, sp.false):
        v = bool(rel == sp.true)
        return lambda env: v
    if isinstance(rel, (sp.And, sp.Or)):       # an argument is read when it is first reached
        parts, join = [_lazy(compiled_truth, a) for a in rel.args], (all if isinstance(rel, sp.And) else any)
        return lambda env: join(p(env) for p in parts)
    if isinstance(rel, sp.Not):
        arg = compiled_truth(rel.args[0])
        return lambda env: not arg(env)
    if isinstance(rel, sp.ITE):     # sympy writes some Piecewise conditions as ITE(c, a, b)
        c, a, b = (_lazy(compiled_truth, x) for x in rel.args)
        return lambda env: a(env) if c(env) else b(env)
    for cls, op in _RELATIONS.items():
        if isinstance(rel, cls):
            lhs, rhs = compiled_value(rel.lhs), compiled_value(rel.rhs)
            return lambda env: op(lhs(env), rhs(env))
    raise ValueError(f"not a relation: {rel}")


def exact_value(e: Any, env: dict) -> Fraction:
    """The exact value of a sympy expression at the sizes ``env`` ({symbol: int})."""
    return Fraction(compiled_value(sp.sympify(e))(env))


def exact_truth(rel: Any, env: dict) -> bool:
    """The truth of a sympy relation (or And/Or/Not of relations) at ``env``, exactly."""
    return bool(compiled_truth(sp.sympify(rel))(env))


# ----------------------------------------------------------------------------
# z3 terms
class Z3Terms:
    """Translate sympy expressions of the sizes into z3 terms (module doc).

    ``env`` maps sympy symbols to z3 terms (e.g. ``{N: z3.Int("n")}``); every atom
    met gets ONE z3 variable (the same sympy atom -> the same variable) and its
    defining facts go into :attr:`facts`, which a proof must assume."""

    def __init__(self, env: dict):
        if z3 is None:
            raise RuntimeError("z3-solver is not installed")
        self.env = dict(env)
        self.facts: list = []
        self._atoms: dict = {}
        self._pow: dict = {}          # log-atom variable name -> its power variable 2^u
        self._count = 0

    # -- atoms
    def _fresh(self, stem: str, real: bool = False):
        self._count += 1
        return (z3.Real if real else z3.Int)(f"{stem}!{self._count}")

    def _log_atom(self, e, y, ceil: bool):
        """u = ceil(log2 y) or floor(log2 y), with its power variable P = 2^u."""
        u = self._fresh("lc" if ceil else "lf")
        P = self._fresh("pow2")
        yz = self(y)
        self._pow[u.get_id()] = P
        self.facts += [P >= 1, u >= 0, z3.Implies(u == 0, P == 1), z3.Implies(u >= 1, P >= 2)]
        if ceil:       # 2^(u-1) < y <= 2^u for y > 1; u = 0 for y <= 1
            self.facts += [z3.Implies(yz > 1, z3.And(yz <= P, 2 * yz > P, u >= 1)), z3.Implies(yz <= 1, u == 0)]
        else:          # 2^u <= y < 2^(u+1) for y >= 1
            self.facts += [z3.Implies(yz >= 1, z3.And(P <= yz, yz < 2 * P))]
        return u

    def atom(self, e):
        if e in self._atoms:
            return self._atoms[e]
        if isinstance(e, (sp.floor, sp.ceiling)):
            y = _log2_arg(e.args[0])
            if y is not None:
                v = self._log_atom(e, y, isinstance(e, sp.ceiling))
            else:
                x = self(e.args[0])
                v = self._fresh("fl" if isinstance(e, sp.floor) else "ce")
                self.facts += ([v <= x, x < v + 1] if isinstance(e, sp.floor) else [v - 1 < x, x <= v])
        elif isinstance(e, sp.Pow):            # 2 ** (symbolic exponent)
            v = self._power(e.args[1])
        else:
            raise ValueError(f"no z3 reading of {e}")
        self._atoms[e] = v
        return v

    def _power(self, k):
        """2^k for a symbolic exponent k = c0 + sum c_i u_i (c_i integers, u_i integer
        atoms): the product of the power variables P_i^c_i (P_i = 2^u_i) and 2^c0,
        negative exponents in the denominator."""
        k = sp.expand(k)
        const, parts = sp.Integer(0), []
        for term in sp.Add.make_args(k):
            c, rest = term.as_coeff_Mul()
            if rest == 1:
                const += c
            else:
                parts.append((c, rest))
        if not isinstance(const, sp.Integer) or any(not isinstance(c, sp.Integer) for c, _ in parts):
            v = self._fresh("pow", real=True)
            self.facts.append(v > 0)
            return v
        num, den = z3.IntVal(2 ** max(int(const), 0)), z3.IntVal(2 ** max(-int(const), 0))
        for c, rest in parts:
            u = self(rest)
            P = self._pow.get(u.get_id()) if z3.is_int(u) else None
            if P is None:         # the exponent is not a log atom: a fresh power with 2^u >= u + 1
                P = self._fresh("pow2")
                self._pow[u.get_id()] = P
                self.facts += [P >= 1, z3.Implies(u >= 0, P >= u + 1)]
            for _ in range(abs(int(c))):
                if c > 0:
                    num = num * P
                else:
                    den = den * P
        if z3.is_int_value(den) and den.as_long() == 1:
            return num
        return z3.ToReal(num) / z3.ToReal(den)

    # -- expressions
    def __call__(self, e):
        e = sp.sympify(e)
        if isinstance(e, sp.Integer):
            return z3.IntVal(int(e))
        if isinstance(e, sp.Rational):
            return z3.RealVal(f"{int(e.p)}/{int(e.q)}")
        if isinstance(e, sp.Symbol):
            if e not in self.env:
                raise KeyError(f"no z3 term for the symbol {e}")
            return self.env[e]
        if isinstance(e, sp.Add):
            out = self(e.args[0])
            for a in e.args[1:]:
                out = out + self(a)
            return out
        if isinstance(e, sp.Mul):
            out = self(e.args[0])
            for a in e.args[1:]:
                out = out * self(a)
            return out
        if isinstance(e, sp.Pow):
            b, k = e.args
            if isinstance(k, sp.Integer):
                base = self(b)
                if k > 0:
                    out = base
                    for _ in range(int(k) - 1):
                        out = out * base
                    return out
                if k == 0:
                    return z3.IntVal(1)
                den = base
                for _ in range(-int(k) - 1):
                    den = den * base
                return 1 / z3.ToReal(den) if z3.is_int(den) else 1 / den
            if b == 2:
                return self.atom(e)
            raise ValueError(f"no z3 reading of the power {e}")
        if isinstance(e, (sp.floor, sp.ceiling)):
            return self.atom(e)
        if isinstance(e, (sp.Max, sp.Min)):
            args = [self(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = z3.If(a > out, a, out) if isinstance(e, sp.Max) else z3.If(a < out, a, out)
            return out
        if isinstance(e, sp.Abs):
            x = self(e.args[0])
            return z3.If(x >= 0, x, -x)
        if isinstance(e, sp.Piecewise):
            out = None
            for val, cond in reversed(e.args):
                v = self(val)
                out = v if out is None else z3.If(self.relation(cond), v, out)
            return out
        raise ValueError(f"no z3 reading of {type(e).__name__}: {e}")

    def relation(self, rel):
        rel = sp.sympify(rel)
        if rel == sp.true:
            return z3.BoolVal(True)
        if rel == sp.false:
            return z3.BoolVal(False)
        if isinstance(rel, sp.And):
            return z3.And([self.relation(a) for a in rel.args])
        if isinstance(rel, sp.Or):
            return z3.Or([self.relation(a) for a in rel.args])
        if isinstance(rel, sp.Not):
            return z3.Not(self.relation(rel.args[0]))
        lhs, rhs = self(rel.lhs), self(rel.rhs)
        if isinstance(rel, sp.StrictLessThan):
            return lhs < rhs
        if isinstance(rel, sp.LessThan):
            return lhs <= rhs
        if isinstance(rel, sp.StrictGreaterThan):
            return lhs > rhs
        if isinstance(rel, sp.GreaterThan):
            return lhs >= rhs
        if isinstance(rel, sp.Equality):
            return lhs == rhs
        if isinstance(rel, sp.Unequality):
            return lhs != rhs
        raise ValueError(f"not a relation: {rel}")


PORTFOLIO = ({"smt.arith.nl.order": False}, {}, {"smt.arith.nl.grobner": False}, {"smt.random_seed": 3})
"""The z3 configurations :func:`prove` tries in turn, each in a fresh context and with
the full time limit, until one answers ``unsat`` (a proof) or ``sat`` (a
counterexample, whichever configuration finds it). Nonlinear queries are
sensitive to z3's search order: a query one configuration leaves ``unknown``
another proves in a second (the c-gram hybrid's match head). A fresh context per
attempt keeps the query's terms apart from earlier queries'; that z3 keeps no
other state across contexts is not established (its tactics do: NIA_PORTFOLIO's
configurations run in a new process)."""


NIA_PORTFOLIO = tuple({"tactic": "qfnia", "random_seed": k} for k in (0, 1, 3)) + PORTFOLIO[:1]
"""For queries whose nonlinear part is a sum of squared code differences times a
symbolic lambda (c-gram c = 4's match head at the alphabet n + 2): z3's QF_NIA
strategy (``qfnia``: simplification, then nonlinear integer solving), each in a
new process, whose answer on these depends on its random seed (in a new process
seed 0 proves each of the seven cases of that gap in 0.2 to 6 s; in one test with
several queries per process, seeds 2 and 6 left a case unknown after 30 s), then
the first of :data:`PORTFOLIO`."""


_ISOLATED = r"""
import json, sys, z3
job = json.loads(sys.stdin.read())
params = {k: v for k, v in job["config"].items() if k != "tactic"}
tac = z3.Tactic(job["config"]["tactic"])
s = (z3.With(tac, **params) if params else tac).solver()
s.set("timeout", job["timeout"])
s.add(z3.parse_smt2_string(job["query"]))
answer = str(s.check())
out = {"answer": answer}
if answer == "sat":
    m = s.model()
    out["counterexample"] = ", ".join(f"{d.name()} = {m[d]}" for d in sorted(m.decls(), key=lambda d: d.name())
                                      if "!" not in d.name())
print(json.dumps(out))
"""


def _solve_isolated(query: str, config: dict, timeout_ms: int) -> dict:
    """A tactic configuration solves the query's SMT-LIB text in a new process
    (``python -I``): z3's tactics keep state across contexts within a process (the
    same query and seed answered ``unsat`` in 0.5 s in a process's first context and
    ``unknown`` after 20 s in a later one), so a new process is what makes the
    answer independent of what ran before. A crash, a timeout or output that is
    not the answer is ``unknown`` (with an ``error``), never a proof."""
    job = json.dumps({"query": query, "config": config, "timeout": timeout_ms})
    try:
        r = subprocess.run([sys.executable, "-I", "-c", _ISOLATED], input=job, capture_output=True, text=True,
                           timeout=timeout_ms / 1000 + 60)
    except subprocess.TimeoutExpired:
        return {"answer": "unknown", "error": "the solver process did not end"}
    if r.returncode < 0 and -r.returncode == signal.SIGINT:
        raise KeyboardInterrupt
    try:
        out = json.loads(r.stdout) if r.returncode == 0 else None
    except ValueError:
        out = None
    if not isinstance(out, dict) or out.get("answer") not in ("sat", "unsat", "unknown"):
        last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return {"answer": "unknown", "error": f"the solver process failed: {last}"}
    return out


def _round_trips(query: str, formulas: list) -> bool:
    """The SMT-LIB text parses back to ``formulas``: each parsed assertion and its
    term are the same after z3's simplifier (the printer writes -2 as ``(- 2)``
    and != as ``distinct``; the simplifier keeps meaning, so equal simplified
    terms mean equivalent formulas). A name declared twice with different sorts,
    or anything else the text does not say as the terms do, fails here."""
    ctx = z3.Context()
    try:
        parsed = list(z3.parse_smt2_string(query, ctx=ctx))
    except z3.Z3Exception:
        return False
    mine = [f.translate(ctx) for f in formulas]
    return len(parsed) == len(mine) and all(z3.simplify(p).eq(z3.simplify(m)) for p, m in zip(parsed, mine))


def prove(hypotheses: list, conclusion, timeout_ms: int = 20000, portfolio: bool | tuple = True) -> dict:
    """z3 looks for a counterexample to ``hypotheses => conclusion``: ``unsat`` proves
    it. Returns ``{"answer", "query", "config"}`` (the SMT-LIB query, the
    configuration that answered) and, on ``sat``, a ``counterexample``. With
    ``portfolio`` the configurations of :data:`PORTFOLIO` (or of the tuple given)
    are tried in turn while the answer is ``unknown``. A configuration
    ``{"tactic": name, **params}`` solves the query's text in a new process
    (:func:`_solve_isolated`), once the text is shown to parse back to the same
    terms; every other configuration solves the terms in a fresh context."""
    out = None
    configs = portfolio if isinstance(portfolio, tuple) else (PORTFOLIO if portfolio else PORTFOLIO[:1])
    formulas = list(hypotheses) + [z3.Not(conclusion)]
    # the query's terms in a fresh context: its SMT-LIB text (the same whatever the
    # process built before), and the first plain configuration solves them there
    ctx = z3.Context()
    fresh = z3.Solver(ctx=ctx)
    for f in formulas:
        fresh.add(f.translate(ctx))
    query = fresh.to_smt2()
    errors = []
    for config in configs:
        name = ", ".join(f"{k}={v}" for k, v in config.items()) or "default"
        if "tactic" in config:
            if not _round_trips(query, formulas):
                r = {"answer": "unknown", "error": "the SMT-LIB text does not parse back to the query's terms"}
            else:
                r = _solve_isolated(query, config, timeout_ms)
            if "error" in r:
                errors.append(f"{name}: {r.pop('error')}")
            out = {**r, "query": query, "config": name}
        else:
            if fresh is not None:   # a fresh context for every configuration
                s, fresh = fresh, None
            else:
                ctx = z3.Context()
                s = z3.Solver(ctx=ctx)
                for f in formulas:
                    s.add(f.translate(ctx))
            s.set("timeout", timeout_ms)
            for k, v in config.items():
                s.set(k, v)
            answer = str(s.check())
            if answer == "unknown" and "interrupted" in s.reason_unknown():
                # z3 takes SIGINT for itself while it solves (it answers unknown, and
                # Python never sees the signal): Ctrl-C stops the whole run
                raise KeyboardInterrupt
            out = {"answer": answer, "query": query, "config": name}
            if answer == "sat":
                m = s.model()
                out["counterexample"] = ", ".join(f"{d.name()} = {m[d]}" for d in sorted(m.decls(),
                                                                                       key=lambda d: d.name())
                                                  if "!" not in d.name())
        if out["answer"] != "unknown":
            break
    if out["answer"] == "unknown" and errors:
        out["config"] += "; " + "; ".join(errors)
    return out
