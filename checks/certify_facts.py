"""Per-position facts of the T4.6-up heads and of the simulator (sim), proved for ALL n with z3.

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

import time

try:
    import z3
except ImportError:     # reported as method smt-unavailable, a failed certificate, never hidden
    z3 = None

TIMEOUT_MS = 20000


def _max(*xs):
    m = xs[0]
    for x in xs[1:]:
        m = z3.If(x > m, x, m)
    return m


def _abs(x):
    return z3.If(x >= 0, x, -x)


# ----------------------------------------------------------------------------
# facts: each a function returning (hypotheses, conclusion)
def _index_gap():
    n, i, j, lam = z3.Ints("n i j lam")
    q, p, t = i + 1, j + 1, i + 1
    s = lambda key: lam * (2 * q * key - key * key)
    hyps = [n >= 1, i >= 1, i <= n, j >= 0, j <= n + 2, lam >= 1, j != i]
    return hyps, s(t) - s(p) >= lam


def _index_target():
    n, i = z3.Ints("n i")
    return [n >= 1, i >= 1, i <= n], z3.And(i + 1 >= 1, i + 1 <= n + 3)   # the key i + 1 exists (position i)


def _index_range():
    n, a, q, j, lam = z3.Ints("n a q j lam")
    K, Q = _max(n + 3, a, z3.IntVal(9)), _max(n + 1, a, z3.IntVal(9))
    p = j + 1
    hyps = [n >= 1, a >= 1, lam >= 1, j >= 0, j <= n + 2, _abs(q) <= Q]
    # the sum of the terms' absolute values: every partial sum of the score is in range too
    return hyps, _abs(2 * lam * q * p) + _abs(lam * p * p) <= lam * (2 * Q * K + K * K)


def _shift_gap(shift: int):
    def fact():
        Np, i, j, lam = z3.Ints("N i j lam")         # N positions 0..N-1, any N >= 1
        t = z3.If(i - shift >= 0, i - shift, 0)      # the target: i - s, or [BOS] at 0
        s = lambda key: lam * (2 * (i - shift) * key - key * key)
        hyps = [Np >= 1, lam >= 1, i >= 0, i < Np, j >= 0, j < Np, j != t]
        return hyps, s(t) - s(j) >= lam
    return fact


def _shift_range(shift: int):
    def fact():
        Np, i, j, lam = z3.Ints("N i j lam")
        hyps = [Np >= 1, lam >= 1, i >= 0, i <= Np, j >= 0, j <= Np]
        return hyps, (_abs(2 * lam * i * j) + _abs(2 * lam * shift * j) + _abs(lam * j * j)
                      <= lam * 3 * Np * Np + 2 * lam * shift * Np)
    return fact


def _joint(m: int, what: str):
    """retrieval.joint_match_head with m components: score(j) = lambda sum_k
    (2 q_k p_k(j) - p_k(j)^2) - mu j, lambda = mu P + s."""
    def fact():
        n, P, mu, s0, j0, j1, Kc = z3.Ints("n P mu s j0 j1 Kc")
        q = [z3.Int(f"q{k}") for k in range(m)]
        p0 = [z3.Int(f"p0_{k}") for k in range(m)]
        p1 = [z3.Int(f"p1_{k}") for k in range(m)]
        lam = mu * P + s0
        score = lambda p, j: lam * z3.Sum([2 * q[k] * p[k] - p[k] * p[k] for k in range(m)]) - mu * j
        codes = [z3.And(_abs(v) <= Kc) for v in q + p0 + p1]
        hyps = [n >= 1, P >= n, mu >= 1, s0 >= 1, Kc >= 9, j0 >= 0, j0 <= P, j1 >= 0, j1 <= P] + codes
        full0 = [p0[k] == q[k] for k in range(m)]
        if what == "gap_partial":      # a full match at j0 beats any key with a mismatch, anywhere
            hyps += full0 + [z3.Or([p1[k] != q[k] for k in range(m)])]
            return hyps, score(p0, j0) - score(p1, j1) >= s0
        if what == "gap_between_matches":   # the earliest full match beats a later one by mu
            hyps += full0 + [p1[k] == q[k] for k in range(m)] + [j1 > j0]
            return hyps, score(p0, j0) - score(p1, j1) >= mu
        # range: each component's terms |2 q p| + |p^2| <= 3 Kc^2 = W (fact
        # match.component_range), so the terms of the whole score sum to at most
        # lambda m W + mu P in absolute value: every partial sum is in range
        t = [z3.Int(f"t{k}") for k in range(m)]
        W = z3.Int("W")
        hyps += [W >= 0] + [_abs(tk) <= W for tk in t]
        return hyps, z3.Sum([_abs(lam * tk) for tk in t]) + _abs(mu * j1) <= lam * m * W + mu * P
    return fact


def _component_range():
    """|2 q p| + |p^2| <= 3 K^2 for integer codes |q|, |p| <= K (W = 3 K^2 above)."""
    q, p, K = z3.Ints("q p K")
    return [K >= 0, _abs(q) <= K, _abs(p) <= K], _abs(2 * q * p) + _abs(p * p) <= 3 * K * K


def _count_gap():
    """count head: score = lambda (2 Q tau - tau^2) + lambda Q^2 bos - lambda after
    (read at the last position, Q = tau(q) >= 1). [BOS] and data keys equal to q score
    lambda Q^2; every other key scores <= lambda Q^2 - lambda."""
    lam, Q, tau, bos, after = z3.Ints("lam Q tau bos after")
    s = lam * (2 * Q * tau - tau * tau) + lam * Q * Q * bos - lam * after
    kinds = z3.Or(z3.And(bos == 0, after == 0, tau >= 1),          # data number
                  z3.And(bos == 1, after == 0, tau == 0),          # [BOS]
                  z3.And(bos == 0, after == 1))                    # [QUERY], q, t
    maximal = z3.Or(bos == 1, z3.And(after == 0, tau == Q))
    hyps = [lam >= 1, Q >= 1, kinds]
    return hyps, z3.And(z3.Implies(maximal, s == lam * Q * Q), z3.Implies(z3.Not(maximal), s <= lam * Q * Q - lam))


def _count_range():
    """At any position the queries are averages of codes: |Q| <= K, 0 <= Q2 <= K^2 (reals)."""
    lam, tau, bos, after, n, a = z3.Ints("lam tau bos after n a")
    Q, Q2 = z3.Reals("Q Q2")
    K = _max(n + 1, a, z3.IntVal(9))
    s = lam * (2 * Q * tau - tau * tau) + lam * Q2 * bos - lam * after
    hyps = [n >= 1, a >= 1, lam >= 1, _abs(tau) <= K, Q <= K, Q >= -K, Q2 >= 0, Q2 <= K * K,
            z3.Or(bos == 0, bos == 1), z3.Or(after == 0, after == 1), z3.Implies(bos == 1, tau == 0)]
    terms = _abs(2 * lam * Q * tau) + _abs(lam * tau * tau) + _abs(lam * Q2 * bos) + _abs(lam * after)
    return hyps, z3.And(terms <= lam * (3 * K * K + 1), s <= lam * (3 * K * K + 1), s >= -lam * (3 * K * K + 1))


def _fetch_gap():
    """fetch-q at t's position: score M (after + is_number) - mu j, M = mu (n + 2) + lambda;
    q at n + 2 beats every other key j in 0..n+3 by >= min(mu, lambda)."""
    n, j, mu, lam = z3.Ints("n j mu lam")
    M = mu * (n + 2) + lam
    after = lambda k: z3.If(k >= n + 1, 1, 0)
    isnum = lambda k: z3.If(z3.Or(z3.And(k >= 1, k <= n), k >= n + 2), 1, 0)
    s = lambda k: M * (after(k) + isnum(k)) - mu * k
    hyps = [n >= 1, mu >= 1, lam >= 1, j >= 0, j <= n + 3, j != n + 2]
    return hyps, s(n + 2) - s(j) >= _max(z3.IntVal(0), z3.If(mu < lam, mu, lam))


def _compare_gap():
    """|1/(c+1) - 1/(t+3/2)| >= 1/((n+1)(2n+3)) for counts 0 <= c <= n, thresholds 0 <= t <= n."""
    n, c, t = z3.Ints("n c t")
    hyps = [n >= 1, c >= 0, c <= n, t >= 0, t <= n]
    return hyps, _abs(2 * t + 3 - 2 * (c + 1)) * (n + 1) * (2 * n + 3) >= (c + 1) * (2 * t + 3)


def _after_query_gap():
    """after-query: score lambda (2 is_query + is_bos): in every window, [QUERY] (once
    present) or else [BOS] leads every other key by lambda."""
    lam, isq, isb = z3.Ints("lam isq isb")
    hyps = [lam >= 1, z3.Or(z3.And(isq == 0, isb == 0), z3.And(isq == 0, isb == 1))]
    return hyps, z3.And(lam * 2 - lam * (2 * isq + isb) >= lam, lam - lam * 2 * isq >= lam)


def _cgram_facts(c: int):
    out = []
    for k in range(1, c):
        out += [(f"shift_{k}.gap", _shift_gap(k)), (f"shift_{k}.range", _shift_range(k))]
    out += [("match.gap_partial", _joint(c - 1, "gap_partial")),
            ("match.gap_between_matches", _joint(c - 1, "gap_between_matches")),
            ("match.component_range", _component_range), ("match.range", _joint(c - 1, "range"))]
    return out


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
    ("T4.6-up", "retrieval.index: per-position", [("match.gap", _index_gap), ("match.target", _index_target),
                                                   ("match.range", _index_range)]),
    ("T4.6-up", "retrieval.ar: per-position", _cgram_facts(2)),
    ("T4.6-up", "retrieval.cgram3: per-position", _cgram_facts(3)),
    ("T4.6-up", "retrieval.cgram4: per-position", _cgram_facts(4)),
    ("T4.6-up", "retrieval.counting: per-position", [
        ("after-query.gap", _after_query_gap), ("fetch-q.gap", _fetch_gap), ("count.gap", _count_gap),
        ("count.range", _count_range), ("compare.gap", _compare_gap)]),
    ("sim", "sim: per-position", SIM_FACTS),
]


def prove_fact(fn) -> dict:
    """z3 looks for a counterexample; 'unsat' proves the fact for all values."""
    hyps, concl = fn()
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    s.add(*hyps)
    s.add(z3.Not(concl))
    answer = str(s.check())
    out = {"answer": answer, "query": s.to_smt2()}
    if answer == "sat":
        out["counterexample"] = str(s.model())
    return out


def prove(claim: str, name: str, facts) -> "Result":
    from .certify import Result
    t0 = time.perf_counter()
    res = Result(claim, name, len(facts), 1, None, "smt", False, 0.0)
    if z3 is None:
        res.method = "smt-unavailable"
        res.note = "z3-solver is not installed: the per-position facts are NOT proved"
        res.failures = [{"obligation": fname, "first_n": None, "need": "-", "have": "-", "why": "z3 absent"}
                        for fname, _ in facts]
        res.seconds = round(time.perf_counter() - t0, 3)
        return res
    for fname, fn in facts:
        r = prove_fact(fn)
        res.facts.append({"fact": fname, "method": "smt", **r})
        if r["answer"] != "unsat":
            res.failures.append({"obligation": fname, "first_n": None, "need": "-", "have": "-",
                                 "why": f"z3 answered {r['answer']}" + (f": {r['counterexample']}"
                                                                        if "counterexample" in r else "")})
    res.certified = not res.failures
    res.seconds = max(round(time.perf_counter() - t0, 3), 0.001)
    return res
