"""The claim registry's declarations (checks/catalog/asymptotics.py): every claim that
has constructions declares its resources as sympy expressions, every claim has
a registered check, and the symbolic class check is not vacuous."""
from __future__ import annotations

import re

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from rnngap.checks.catalog.records import declarations
from rnngap.checks.catalog.asymptotics import N, Declaration, evaluate, holds
from rnngap.checks.verify.registry import CLAIMS, load_checks, unchecked_claims

CONSTRUCTION_CLAIMS = ("gadgets", "T4.6-up", "T4.7-up", "T4.1", "T5-RAG", "T5.6", "T5-hyb-P")
DECLARATIONS = [d for d, _, _ in declarations()]


def test_every_claim_has_a_registered_check():
    load_checks()
    assert unchecked_claims() == []


def test_every_construction_claim_declares_its_resources():
    load_checks()
    declared = {}
    for d in DECLARATIONS:
        declared.setdefault(d.claim, set()).add(d.resource)
    for claim in CONSTRUCTION_CLAIMS:
        assert claim in CLAIMS
        assert any(r.startswith("int_bits") for r in declared.get(claim, ())), claim
        if claim != "gadgets":
            assert "params" in declared[claim], claim
    # params are declared constant and tied to real builds at several n
    for d, fn, sample in declarations():
        if d.resource == "params":
            assert d.order == "constant" and d.expr.is_Integer and int(d.expr) > 0, d
            assert len(sample["quick"]) >= 4 and fn(sample["quick"][-1]) == int(d.expr), d.model
    # the CoT bounds the claims state: O(n) IsTree tour, O(n log n) hybrid IsTree, n^2 for T4.1
    cot = {(d.claim, d.model): d for d in DECLARATIONS if d.resource == "cot"}
    assert cot[("T4.7-up", "istree-transformer")].order == "linear"
    assert cot[("T5.6", "istree-hybrid")].order == "nlogn"
    assert cot[("T4.1", "iterate-rnn")].order == "poly:2"


def test_the_class_checker_rejects_false_declarations():
    # every registered declaration is checked by `rnngap verify --only declarations`;
    # here: the checker is not vacuous: a linear expression is not O(log n), n log n is not O(n), log n is not constant
    assert not holds(Declaration("x", "m", "r", N + 1, "log"))
    assert not holds(Declaration("x", "m", "r", N * sp.log(N, 2), "linear"))
    assert not holds(Declaration("x", "m", "r", sp.ceiling(sp.log(N, 2)), "constant"))
    assert not holds(Declaration("x", "m", "r", N ** 3, "poly:2"))
    assert holds(Declaration("x", "m", "r", 2 * sp.ceiling(sp.log(N + 3, 2)) + 6, "log"))
    assert evaluate(2 * sp.ceiling(sp.log(N + 3, 2)) + 6, 5) == 12


def test_retrieval_declarations_cover_the_reductions_alphabets():
    """T4.6-up declares its integer bits at the alphabets the reductions write
    (a = n + 1 for Counting, n + 2 for AR / c-gram) as O(log n), and one parameter
    count whatever the alphabet: the declared constant at a = n + 1 is the one at
    a = 3 (docs/theory.md §1: constant size includes the alphabet)."""
    load_checks()
    by = {(d.model, d.resource): d for d in DECLARATIONS if d.claim == "T4.6-up"}
    for model in ("counting-transformer[a=n+1]", "ar-transformer[a=n+2]", "cgram-transformer[c=3,a=n+2]",
                  "cgram-transformer[c=4,a=n+2]"):
        d = by[(model, "int_bits")]
        assert d.order == "log" and holds(d), model
    for base, wide in (("counting-transformer", "counting-transformer[a=n+1]"), ("ar-transformer", "ar-transformer[a=n+2]"),
                       ("cgram-transformer[c=3]", "cgram-transformer[c=3,a=n+2]")):
        assert by[(base, "params")].expr == by[(wide, "params")].expr, (base, wide)


def test_parameter_counts_are_read_from_the_records_and_a_wrong_build_fails(monkeypatch):
    """Every params declaration is the constant of its construction record's form
    (no count measured and re-declared), every form's count is measured on builds,
    and the measurement side fails when a build's count differs by one."""
    from rnngap.checks.catalog import records as CAT
    from rnngap.checks.verify import checks_declarations as CD
    forms = {f.name: f.params for r in CAT.records() for f in r.forms if f.params is not None}
    ds = CAT.params_declarations()
    base = lambda name: re.sub(r",a=[^\]]*|\[a=[^\]]*\]", "", name)     # the form at every alphabet
    assert all(int(d.expr) == forms[base(d.model)] for d, _, _ in ds)
    assert {d.model for d, _, _ in ds} >= set(forms)
    d, fn, sample = next(x for x in ds if x[0].model == "index-transformer")
    monkeypatch.setattr(CAT, "declarations", lambda: [(d, fn, sample)])
    ok = CD.check_declarations("quick", 0)
    assert len(ok) == 1 and ok[0].failures == 0
    monkeypatch.setattr(CAT, "declarations", lambda: [(d, lambda n: fn(n) + (n == sample["quick"][-1]), sample)])
    bad = CD.check_declarations("quick", 0)
    assert bad[0].failures == 1 and "disagree" in bad[0].note


# ---------------------------------------------------------------------------
# The order rules in front of sympy's limit (declarations.order_bound): sound, so
# a declaration they accept is one the limit accepts; what they do not accept
# goes to the limit, which decides every failure.

def _limit_finite(e, g) -> bool:
    return bool(sp.limit(e / g, N, sp.oo).is_finite)


def test_order_rules_known_orders():
    from rnngap.checks.catalog.asymptotics import order_bound
    h = sp.Rational(1, 2)
    assert order_bound(N * (N - 1)) == (2, 0)
    assert order_bound(sp.log(N + 2, 2) * N) == (1, 1)
    assert order_bound(sp.sqrt(N) / sp.log(N)) == (h, -1)
    assert order_bound(sp.log(N ** 3 + N)) == (0, 1)
    assert order_bound(sp.log(3 + 1 / N)) == (0, 0)          # 3 <= arg <= 4: bounded
    assert order_bound(sp.log(N), lower=True) == (0, 1)
    # not known, so sympy decides: exp, floor, a log of what may reach 0, 1 / (n - n^2 / 2)
    assert order_bound(2 ** N) is None
    assert order_bound(sp.floor(N / 2)) is None
    assert order_bound(sp.log(N - N ** 2 / 2 + 5)) is None
    assert order_bound(1 / (N - N ** 2)) is None


def test_order_rules_leave_every_false_declaration_to_the_limit():
    """A false declaration is never accepted by the rules: holds() falls through
    to the limit, which rejects it."""
    from rnngap.checks.catalog.asymptotics import _within, order_bound
    false = [(N + 1, sp.log(N)), (N * sp.log(N, 2), N), (N ** 3, N ** 2), (sp.log(N) ** 2, sp.log(N)),
             (sp.sqrt(N), sp.log(N)), (N * (N - 1), N), (N / sp.log(N) ** -1, N)]
    for e, g in false:
        assert not _within(order_bound(e), order_bound(g, lower=True)), (e, g)
        assert not _limit_finite(e, g), (e, g)


def test_order_rules_agree_with_the_limit_on_every_declared_expression():
    """Every registered declaration's upper expression: the rules accept it (so
    `verify` asks sympy only for failures) and the limit agrees. The cheap rules
    answer all of them today; one they cannot answer would still be checked by
    the limit, so this test also says when that changes."""
    from rnngap.checks.catalog.asymptotics import _upper, _within, order_bound
    load_checks()
    seen = set()
    for d in DECLARATIONS:
        if d.order == "constant":
            continue
        key = (_upper(d.expr), d.growth())
        if key in seen:
            continue
        seen.add(key)
        up, g = key
        assert _within(order_bound(up), order_bound(g, lower=True)), d
    # the limit on a fixed sample of them (all of them: the full profile's test below)
    for up, g in sorted(seen, key=str)[::8]:
        assert _limit_finite(up, g), (up, g)


@pytest.mark.full
def test_order_rules_agree_with_the_limit_on_all_declared_expressions():
    from rnngap.checks.catalog.asymptotics import _upper
    load_checks()
    for up, g in {(_upper(d.expr), d.growth()) for d in DECLARATIONS if d.order != "constant"}:
        assert _limit_finite(up, g), (up, g)


_atoms = st.one_of(st.just(N), st.integers(1, 9).map(sp.Integer), st.integers(-9, 9).map(lambda c: N + c))


def _grow(children):
    return st.one_of(
        st.tuples(children, children).map(lambda p: p[0] + p[1]),
        st.tuples(children, children).map(lambda p: p[0] * p[1]),
        st.tuples(children, st.sampled_from([sp.Rational(1, 2), 2, -1])).map(lambda p: p[0] ** p[1]),
        children.map(lambda e: sp.log(e, 2)),
        st.tuples(children, children).map(lambda p: p[0] - p[1]),
    )


@settings(max_examples=40, deadline=None)
@given(st.recursive(_atoms, _grow, max_leaves=5),
       st.sampled_from([sp.Integer(1), sp.log(N), N, N * sp.log(N), N ** 2]))
def test_order_rules_are_sound(e, g):
    """Whatever the rules accept, the limit accepts (random expressions of sums,
    differences, products, powers and logs in n)."""
    from rnngap.checks.catalog.asymptotics import _within, order_bound
    if e.has(sp.zoo, sp.nan, sp.oo) or e.free_symbols != {N}:
        return
    if _within(order_bound(e), order_bound(g, lower=True)):
        assert _limit_finite(e, g), (e, g)
