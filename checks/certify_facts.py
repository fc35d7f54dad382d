"""Per-position facts stated next to the builders: the simulator's (sim) heads.

These facts are RESTATED formulas of the heads' scores, not read off the built
model (their certificates say ``source: restated-formula``): a change to the
builder does not change them. The T4.6-up constructions (Index, AR, c-gram
c = 3, 4, Counting, MQAR) are certified from the model the builder builds
instead (checks/certify.py, ``certify_built``); their restated facts were
removed. What remains here is what is not yet covered that way: the
simulator's position heads.

Each fact is stated over symbolic integers: the size n (unbounded), the query
and key positions, the token codes in their ranges, and the head's sharpness
parameters as free integers >= 1 (lambda, mu, s), so the proof covers every
format, not one. The facts are exactly what the gadget lemmas need (gadgets.py,
retrieval.py): the intended key's score beats every other key's by the stated
gap (lambda, mu or s, each > (f + 1) ln 2 by the format obligations of
constructions/obligations.py), and every score stays within the bound the
declared I(n) covers (obligation ``*.range``). z3 is asked for a counterexample
(the hypotheses and the negated conclusion); ``unsat`` proves the fact. The
SMT-LIB query and the answer go into the certificate.

If z3 (the ``z3-solver`` package) is absent, each fact is reported unproved
(method ``smt-unavailable``), never silently passed.
"""
from __future__ import annotations

try:
    import z3
except ImportError:     # reported as method smt-unavailable, a failed certificate, never hidden
    z3 = None

TIMEOUT_MS = 20000


def _abs(x):
    return z3.If(x >= 0, x, -x)


# ----------------------------------------------------------------------------
# sim (constructions/simulate.py): the position heads (counter, prevY, prev_i,
# prompt: one component, query q an integer, keys pos + 1 for positions 0..n, no
# tie-break, lambda = s) and the firstK head (tie-break "first", P = n).
def _sim_position_gap():
    """For every context n and every integer query q, the key nearest to q among
    1..n+1 (t = q clamped to [1, n + 1]: the intended position, or [BOS] when the
    query points before the sequence, whose state value is 0) beats every other
    key by lambda."""
    n, q, k, lam = z3.Ints("n q k lam")
    t = z3.If(q < 1, 1, z3.If(q > n + 1, n + 1, q))
    s = lambda key: lam * (2 * q * key - key * key)
    hyps = [n >= 1, lam >= 1, k >= 1, k <= n + 1, k != t]
    return hyps, s(t) - s(k) >= lam


def _sim_query_range():
    """The queries pos - idx + shift (idx the index in a block of B tokens, the
    block starting at pos - idx >= 0, shifts 2 - B .. 1) and step + 1 stay within
    |q| <= n + 2 at every context n >= n_pos = max_prompt + B max_steps + 1 >= B + 2."""
    n, pos, idx, shift, Bk = z3.Ints("n pos idx shift B")
    q = pos - idx + shift
    hyps = [Bk >= 3, n >= Bk + 2, pos >= 0, pos <= n, idx >= 0, idx <= Bk - 1, idx <= pos,
            shift >= 2 - Bk, shift <= 1]
    return hyps, _abs(q) <= n + 2


def _sim_position_range():
    """|score| terms of a position head: |2 lambda q k| + |lambda k^2| <= 3 lambda (n + 2)^2 + lambda n
    (the declared bounds.sim_needs 'position.range')."""
    n, q, k, lam = z3.Ints("n q k lam")
    hyps = [n >= 1, lam >= 1, _abs(q) <= n + 2, k >= 0, k <= n + 1]
    return hyps, _abs(2 * lam * q * k) + _abs(lam * k * k) <= 3 * lam * (n + 2) * (n + 2) + lam * n


def _sim_first_k(what: str):
    """firstK: query 1 on the key is_counter in {0, 1} (key square = itself), mu = s,
    lambda = mu n + s: score(j) = lambda k_j - mu j."""
    def fact():
        n, s0, j0, j1, k0, k1 = z3.Ints("n s j0 j1 k0 k1")
        mu, lam = s0, s0 * n + s0
        score = lambda k, j: lam * (2 * k - k) - mu * j
        hyps = [n >= 1, s0 >= 1, j0 >= 0, j0 <= n, j1 >= 0, j1 <= n, z3.Or(k0 == 0, k0 == 1), z3.Or(k1 == 0, k1 == 1)]
        if what == "gap_partial":
            return hyps + [k0 == 1, k1 == 0], score(k0, j0) - score(k1, j1) >= s0
        if what == "gap_between_matches":
            return hyps + [k0 == 1, k1 == 1, j1 > j0], score(k0, j0) - score(k1, j1) >= mu
        return hyps, _abs(2 * lam * k1) + _abs(lam * k1) + _abs(mu * j1) <= lam * 3 + s0 * n
    return fact


SIM_FACTS = [("position.gap", _sim_position_gap), ("position.query_range", _sim_query_range),
             ("position.range", _sim_position_range), ("firstK.gap_partial", _sim_first_k("gap_partial")),
             ("firstK.gap_between_matches", _sim_first_k("gap_between_matches")),
             ("firstK.range", _sim_first_k("range"))]


FACTS = [
    ("sim", "sim: per-position", SIM_FACTS),
]


def prove_fact(fn) -> dict:
    """z3 looks for a counterexample; 'unsat' proves the fact for all values."""
    from .symbolic import prove as prove_implication
    hyps, concl = fn()
    return prove_implication(list(hyps), concl, TIMEOUT_MS)


def prove(facts) -> tuple[str, list, list]:
    """(method, fact records, failures) of the facts; checks/certify.py wraps them
    in its certificate record."""
    if z3 is None:
        return "smt-unavailable", [], [{"obligation": fname, "first_n": None, "need": "-", "have": "-",
                                        "why": "z3 absent"} for fname, _ in facts]
    records, failures = [], []
    for fname, fn in facts:
        r = prove_fact(fn)
        records.append({"fact": fname, "method": "smt", **r})
        if r["answer"] != "unsat":
            failures.append({"obligation": fname, "first_n": None, "need": "-", "have": "-",
                             "why": f"z3 answered {r['answer']}" + (f": {r['counterexample']}"
                                                                    if "counterexample" in r else "")})
    return "smt", records, failures
