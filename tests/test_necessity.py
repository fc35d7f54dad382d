"""checks/verify/necessity.py: what counts as necessity (issue 27).

Only a wrong FINAL answer one bit below a frontier is ``wrong_below``; a CoT
deviation with the right answer, no answer within the CoT bound, and a raised
exception are reported in their own fields and never counted as wrong; a raise in
saturate mode fails the record. Each check is shown failing (or not counting) on a
known bad input: a real model whose run is monkeypatched to raise, or to stop
answering, below a chosen number of integer bits.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from rnngap.checks.verify.necessity import Outcome, batch_runner, classify, measure, necessity_record
from rnngap.constructions.models import retrieval as R
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.lowerbounds import reductions as LR

N = 4


@pytest.fixture(scope="module")
def index_family():
    rows = [(x, i) for x in itertools.product((0, 1), repeat=N) for i in range(1, N + 1)]
    toks = np.array([LR.INDEX.instance(x, i) for x, i in rows])
    want = np.array([LR.INDEX.expected(x, i) for x, i in rows])
    return toks, want


def _record(model, run, declared):
    return necessity_record("T4.6-up", "index", "index", N, task="index", family="reduction", alphabet=2,
                            declared=declared, run=run, model=model,
                            build_frac=lambda f: R.index_transformer(N, alphabet=2, fmt=f))


def test_the_honest_record_is_tight_on_a_wrong_answer(index_family):
    """The unpatched Index Transformer: one integer bit below the frontier a final
    answer is wrong (the runner's claim re-checked here on the model itself); the
    fraction frontier is the floor f = 0, neither tight nor not; slack = declared - frontier."""
    toks, want = index_family
    model, fmt = R.index_transformer(N, alphabet=2), R.INDEX.format(N, 2)
    rec = _record(model, batch_runner(toks, want), fmt)
    assert rec.passed and rec.wrong_below is True and rec.int_tight is True and rec.raised_below is False
    low = model.with_format(FixedFormat(rec.frontier_int_bits - 1, fmt.frac_bits, "saturate"))
    assert (low.predict_batch(toks) != want).any()
    assert rec.frontier_frac_bits == 0 and rec.frac_tight is None and "floor" in rec.note
    assert (rec.int_slack, rec.frac_slack) == (fmt.int_bits - rec.frontier_int_bits, fmt.frac_bits)


class _Patched:
    """The model, except that below ``at`` integer bits its batch run does ``what``:
    'raise' (an exception, as a broken kernel would) or 'right' (answers as at the
    declared format, whatever the bits)."""

    def __init__(self, model, at: int, what: str, truth=None):
        self.model, self.at, self.what, self.truth = model, at, what, truth
        self.resources = model.resources

    def with_format(self, fmt):
        return _Patched(self.model.with_format(fmt), self.at, self.what, self.truth)

    def predict_batch(self, toks):
        if self.model.fmt.int_bits < self.at:
            if self.what == "raise":
                raise RuntimeError("patched: the run raises below the frontier")
            return self.truth.copy()
        return self.model.predict_batch(toks)


def test_a_raise_below_the_frontier_is_raised_below_not_wrong_and_fails(index_family):
    """Bad input: the run raises one bit below the honest frontier. The record must
    say ``raised_below`` (not ``wrong_below``, not tight) and fail."""
    toks, want = index_family
    model, fmt = R.index_transformer(N, alphabet=2), R.INDEX.format(N, 2)
    honest = _record(model, batch_runner(toks, want), fmt)
    bad = _Patched(model, honest.frontier_int_bits, "raise")
    rec = _record(bad, batch_runner(toks, want), fmt)
    assert rec.frontier_int_bits == honest.frontier_int_bits
    assert rec.raised_below is True and rec.wrong_below is False and rec.int_tight is False
    assert not rec.passed and rec.failures == 1 and "DEFECT" in rec.note and "raised" in rec.note
    assert rec.as_json()["status"] == "FAIL" and rec.as_json()["raised_below"] is True


def test_a_raise_at_the_declared_bits_is_a_frontier_above_the_declaration(index_family):
    toks, want = index_family
    model, fmt = R.index_transformer(N, alphabet=2), R.INDEX.format(N, 2)
    rec = _record(_Patched(model, fmt.int_bits + 1, "raise"), batch_runner(toks, want), fmt)
    assert rec.frontier_int_bits is None and not rec.passed and rec.wrong_below is None


def test_no_wrong_answer_below_means_not_tight(index_family):
    """Bad input: a model that stays right at every integer bit down to I = 1 (its
    answers patched to the truth). Nothing below is wrong: the frontier is the floor
    I = 1, int_tight None (neither), wrong_below False."""
    toks, want = index_family
    model, fmt = R.index_transformer(N, alphabet=2), R.INDEX.format(N, 2)
    rec = _record(_Patched(model, fmt.int_bits, "right", want), batch_runner(toks, want), fmt)
    assert rec.frontier_int_bits == 1 and rec.int_tight is None and rec.wrong_below is False
    assert rec.passed   # not tight is information, not a failure


def _fake_runner(outcomes: dict[int, list[tuple]]):
    """A runner over hand-written runs (answer, want, cot, want_cot) per integer bits
    (classification only: the model passed is the FixedFormat itself)."""
    def run(fmt) -> Outcome:
        cases = outcomes.get(fmt.int_bits, outcomes["right"])
        out = Outcome(len(cases))
        for k, (a, w, c, wc) in enumerate(cases):
            classify(out, f"case {k}", a, w, c, wc, len(c))
        return out
    return run


@pytest.mark.parametrize("below, field", [
    ([(1, 1, [5, 6], [5, 7])], "cot_deviation_below"),        # answer right, CoT differs
    ([(None, 1, [5] * 9, [5, 6])], "no_answer_below"),        # the CoT bound reached
    ([(1, 1, [5, 6], [5, 6]), (0, 1, [5, 7], [5, 6])], "wrong_below"),
])
def test_cot_deviation_and_no_answer_are_not_wrong(below, field):
    """A CoT deviation (final answer right) and no answer are their own fields:
    only a wrong final answer is ``wrong_below`` and makes the scan tight."""
    right = [(1, 1, [5, 6], [5, 6]), (None, None, [5], [5])]   # want None: no answer is right
    run = _fake_runner({"right": right, 5: below})
    si, sf = measure(FixedFormat(8, 2), run, build_int=lambda f: f, build_frac=lambda f: f)
    assert si.frontier == 6 and sf.frontier == 0 and sf.tight is None
    got = {k: getattr(si, k) for k in ("wrong_below", "cot_deviation_below", "no_answer_below", "raised_below")}
    assert got == {k: k == field for k in got}
    assert si.tight is (field == "wrong_below") and si.slack == 2


def test_a_runner_must_return_an_outcome():
    with pytest.raises(TypeError, match="Outcome"):
        measure(FixedFormat(4, 0), lambda m: None, build_int=lambda f: f, build_frac=lambda f: f)


def test_counting_fraction_frontier_is_tight_on_the_closest_comparisons():
    """The T5.6 counting hybrid on the reduction (which asks only count > 0) plus the
    closest comparisons: its fraction frontier is tight, and the wrong answer one bit
    below is (re-checked here on the model) a closest comparison. Without the closest
    comparisons the reduction alone is right at that f (its slack is the near-ties')."""
    from rnngap.checks.verify import checks_hybrid as CH
    from rnngap.checks.verify.checks_foundation import closest_comparisons
    from rnngap.checks.tasks import counting
    from rnngap.constructions.models import hybrid as H
    n = 4
    old = (CH.NECESSITY_TASKS, CH.NECESSITY_N["quick"])
    try:
        CH.NECESSITY_TASKS, CH.NECESSITY_N["quick"] = ("counting",), {"retrieval": [n], "istree": []}
        (rec,) = CH.hybrid_necessity_check("quick", 0)
    finally:
        CH.NECESSITY_TASKS, CH.NECESSITY_N["quick"] = old
    assert rec.passed and rec.frac_tight is True and rec.int_tight is True, rec.note
    L, a = CH.data_length("counting", n), CH.reduction_alphabet("counting", n)
    decl = CH.declared_for("counting", n)
    low = H.counting_hybrid(L, alphabet=a, check_margins=False,
                            fmt=FixedFormat(decl.int_bits, rec.frontier_frac_bits - 1, "saturate"))
    close = closest_comparisons(L, a)
    want = np.array([counting.SPEC.reference(list(map(int, r))) for r in close])
    assert (low.predict_batch(close) != want).any()
    toks, red_want, _ = CH.reduction_rows(CH.reduction_of("counting"), n, None)
    assert (low.predict_batch(toks) == red_want).all()


def test_unasserted_comparison_is_the_same_model_where_the_margin_holds():
    """``check_margins=False`` changes nothing where the comparison's margin holds
    (the declared f): the same weights, the same answers."""
    from rnngap.constructions.models import demos
    a = demos.count_threshold_transformer(8, alphabet=3)
    b = demos.count_threshold_transformer(8, alphabet=3, check_margins=False)
    assert a.resources.params == b.resources.params
    from rnngap.checks.verify.checks_foundation import closest_comparisons
    rows = closest_comparisons(8, 3)
    assert (a.predict_batch(rows) == b.predict_batch(rows)).all()
    with pytest.raises(Exception, match="count comparison"):
        demos.count_threshold_transformer(8, alphabet=3, fmt=FixedFormat(20, 3))


def test_a_raising_rag_run_is_raised_below_not_wrong(monkeypatch):
    """The T5-RAG runner (checks_rag.rag_runner) with the construction's run
    monkeypatched to raise one integer bit below the honest frontier: the record
    says raised_below (never wrong_below) and fails."""
    from rnngap.checks.verify.checks_rag import rag_runner, red_pairs, red_rows, red_setup
    from rnngap.checks.tasks import task as task_spec
    from rnngap.constructions.models.rag_models import RagConstruction
    red, c, a = red_setup("index", 3)
    rows = red_rows(red, red_pairs(3))

    def record():
        return necessity_record("T5-RAG", c.name, "index", 3, task=task_spec("index").name, family="reduction",
                                alphabet=a, declared=c.model.fmt, run=rag_runner(c, rows), model=c.model)
    honest = record()
    assert honest.passed and honest.raised_below is False
    real = RagConstruction.run

    def run(self, prompt, *args, **kw):
        if self.model.fmt.int_bits < honest.frontier_int_bits:
            raise ValueError("patched: the oracle refuses the query")
        return real(self, prompt, *args, **kw)
    monkeypatch.setattr(RagConstruction, "run", run)
    rec = record()
    assert rec.frontier_int_bits == honest.frontier_int_bits
    assert rec.raised_below is True and rec.wrong_below is False and rec.no_answer_below is False
    assert not rec.passed and "DEFECT" in rec.note
