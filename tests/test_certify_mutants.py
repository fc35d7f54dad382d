"""Mutation tests of the whole-model certificates (checks/certify/run.py, certify_built).

Each mutant is a one-term change of what a builder builds: a score term dropped,
a key or a position off by one, a readout code changed, lambda one smaller, a
head reading the wrong direction, a builder run at a format other than the
declared one. ``certify`` must fail on each, and name the layer and the
obligation that breaks. The certificate is about the object that runs: none of
these mutants touches a formula written next to the builder, and each is caught.

Mutants that change nothing observable are listed apart (:data:`EQUIVALENT`):
they must still certify, and the reason they are equivalent is stated.
"""
from __future__ import annotations

import pytest

pytest.importorskip("z3")

import sympy as sp  # noqa: E402

from rnngap.checks.certify.run import certify_built  # noqa: E402
from rnngap.checks.catalog.records import certificate  # noqa: E402


def _head(model, name):
    for L in model.spec.attn_layers:
        for h in L.heads:
            if h.name == name:
                return h
    raise KeyError(name)


def _set(model, head, matrix, row, label, value):
    """W[row, label] = value (value may use the entry: a callable old -> new)."""
    h = _head(model, head)
    d = model.spec.labels.index(label)
    W = getattr(h, matrix)
    W[row, d] = value(W[row, d]) if callable(value) else value


def _scale_row(model, head, matrix, row, factor):
    h = _head(model, head)
    W = getattr(h, matrix)
    for d in range(W.shape[1]):
        if W[row, d] != 0:
            W[row, d] = sp.nsimplify(sp.sympify(W[row, d]) * factor)


def _lambda_one_smaller(model, head, rows):
    """Every score row of the head with lambda replaced by lambda - 1 (rows scaled by
    (lambda - 1) / lambda; lambda the head's recorded sharpness)."""
    h = _head(model, head)
    lam = sp.sympify(dict(h.intent[1]).get("lambda")) if h.intent else None
    assert lam is not None, f"{head} records no lambda"
    for r in rows:
        _scale_row(model, head, "WQ", r, (lam - 1) / lam)


def _readout(model, i, **kw):
    dim, kind, param, coef = model.spec.readout[i]
    new = dict(dim=dim, kind=kind, param=param, coef=coef) | kw
    model.spec.readout[i] = (new["dim"], new["kind"], new["param"], new["coef"])


def _build_with(key, fmt_change):
    """A builder run at a format other than the declared one."""
    from rnngap.constructions.models import retrieval as R
    from rnngap.constructions.models.bounds import AR, COUNTING, INDEX
    from rnngap.constructions.build.num import SymbolicFormat

    def build(n, a):
        decl = {"index": INDEX, "ar": AR, "counting": COUNTING}[key]
        fmt = decl.format(n, a) if key != "ar" else decl.format(n, a, 2)
        fmt = SymbolicFormat(*fmt_change(fmt.int_bits, fmt.frac_bits))
        fn = {"index": R.index_transformer, "ar": R.ar_transformer, "counting": R.counting_transformer}[key]
        return fn(n, alphabet=a, fmt=fmt)
    assert key in ("index", "ar", "counting")
    return build


def _rnn_b(model, state, label, value):
    """B[state, label] = value in the first RNN layer."""
    L = model.spec.rnn_layers[0]
    L.B[list(L.state_labels).index(state), model.spec.labels.index(label)] = value


def _rnn_a(model, layer, state, source, value):
    """A[state, source] = value in RNN layer ``layer``."""
    L = model.spec.rnn_layers[layer]
    L.A[list(L.state_labels).index(state), list(L.state_labels).index(source)] = value


def _mlp_bias(model, layer, *neurons, delta):
    """b1[neuron] += delta for each neuron of the MLP of RNN layer ``layer`` (a ReLU's
    breakpoint moved by -delta)."""
    L = model.spec.rnn_layers[layer]
    for i in neurons:
        L.b1[i] = L.b1[i] + delta


# (construction, mutant, mutate(model) or None, build or None, the layer its failure must name)
MUTANTS = [
    ("index-transformer[a=2]", "query reads tau + 1 (the key one position off)",
     lambda m: _set(m, "index", "WQ", 0, "one", lambda w: w + 4), None, "head index"),
    ("index-transformer[a=n+2]", "the -(j+1)^2 score term dropped",
     lambda m: _set(m, "index", "WQ", 1, "one", 0), None, "head index"),
    ("index-transformer[a=2]", "readout reads tau^2 in place of tau",
     lambda m: _readout(m, 0, kind=3), None, "readout"),
    ("index-transformer[a=2]", "f one smaller than declared (builder run at Q[I].[f-1])",
     None, _build_with("index", lambda I, f: (I, f - 1)), "format"),
    ("ar-transformer[a=4]", "shift head aimed one position off (t - 2 in place of t - 1)",
     lambda m: _set(m, "shift_1", "WQ", 0, "one", lambda w: w - 4), None, "head shift_1"),
    ("ar-transformer[a=n+2]", "match head reads prev_1_sq as its linear key (wrong direction)",
     lambda m: (_set(m, "match", "WK", 0, "prev_1", 0), _set(m, "match", "WK", 0, "prev_1_sq", 1)), None,
     "head match"),
    ("ar-transformer[a=4]", "first-occurrence tie-break (-mu pos) dropped",
     lambda m: _set(m, "match", "WQ", 2, "one", 0), None, "head match"),
    ("cgram-transformer[c=3,a=2]", "the second gram component's square term dropped",
     lambda m: _set(m, "match", "WQ", 3, "one", 0), None, "head match"),
    ("cgram-transformer[c=3,a=n+2]", "shift_2 with lambda one smaller",
     lambda m: _lambda_one_smaller(m, "shift_2", [0, 1]), None, "head shift_2"),
    ("cgram-transformer[c=4,a=n+2]", "the third gram component's key reads prev_2 (wrong direction)",
     lambda m: (_set(m, "match", "WK", 4, "prev_3", 0), _set(m, "match", "WK", 4, "prev_2", 1)), None,
     "head match"),
    ("cgram-transformer[c=4,a=3]", "first-occurrence tie-break (-mu pos) dropped",
     lambda m: _set(m, "match", "WQ", 6, "one", 0), None, "head match"),
    ("counting-transformer[a=3]", "count head missing the lambda Q^2 [BOS] term",
     lambda m: _set(m, "count", "WK", 2, "is_bos", 0), None, "head count"),
    ("counting-transformer[a=n+1]", "fetch-q without its -mu pos term (q ties with t)",
     lambda m: _set(m, "fetch-q", "WK", 1, "pos", 0), None, "head fetch-q"),
    ("counting-transformer[a=3]", "readout codes swapped (thr votes for number 0)",
     lambda m: (_readout(m, 0, param=32), _readout(m, 1, param=33)), None, "readout"),
    ("counting-transformer[a=3]", "after-query head weighs [BOS] like [QUERY]",
     lambda m: _set(m, "after-query", "WK", 0, "is_bos", 2), None, "head after-query"),
    ("mqar-transformer", "the [BOS] penalty nu dropped ([BOS] ties the matches)",
     lambda m: _set(m, "first-match-or-bos", "WQ", 2, "one", 0), None, "head first-match-or-bos"),
    ("mqar-transformer", "readout code off by one (coefficient of tau 2 -> 3)",
     lambda m: _readout(m, 0, coef=3), None, "readout"),
    ("index-hybrid", "the clock starts at 0 (cnt = t, not t + 1)",
     lambda m: _rnn_b(m, "s_cnt", "one", 2), None, "rnn layer"),
    ("ar-hybrid", "the delay line reads tau^2 into prev1",
     lambda m: (_rnn_b(m, "s_tok_0", "tok", 0), _rnn_b(m, "s_tok_0", "tok_sq", 1)), None, "rnn layer"),
    ("counting-hybrid", "the latch's push-down of [QUERY], q, t dropped",
     lambda m: _set(m, "count", "WK", 3, "after_query", 0), None, "head count"),
    # T4.1 (the ITER RNN; its MLP neurons in builder order, constructions/models/cot_hierarchy.py)
    ("iterate-rnn", "the tent's first breakpoint moved up by one (relu(y - m/2) -> relu(y - m/2 - 1))",
     lambda m: _mlp_bias(m, 2, 1, delta=-1), None, "rnn layer 2 mlp"),
    ("iterate-rnn", "the answer's threshold moved up by one ([v >= m/2 + 1])",
     lambda m: _mlp_bias(m, 2, 12, 13, delta=-1), None, "rnn layer 2 mlp"),
    ("iterate-rnn", "done one step late ([c - r >= 4])",
     lambda m: _mlp_bias(m, 1, 0, 1, delta=-1), None, "rnn layer 1 mlp"),
    ("iterate-rnn", "wt reads the step count one too large (relu(tau - m))",
     lambda m: _mlp_bias(m, 0, 0, delta=1), None, "rnn layer 0 mlp"),
    ("iterate-rnn", "the counter c without its carry of q (c_t = c_(t-1) + [QUERY])",
     lambda m: _rnn_a(m, 0, "c", "q", 0), None, "rnn layer 0"),
]


@pytest.mark.parametrize("con, what, mutate, build, layer", MUTANTS, ids=[f"{c}: {w}" for c, w, *_ in MUTANTS])
def test_a_mutant_fails_its_certificate_naming_the_layer(con, what, mutate, build, layer):
    r = certify_built(certificate(con), mutate=mutate, build=build, timeout_ms=20000)
    assert not r.certified, f"{con}: the mutant '{what}' still certifies"
    named = [f for f in r.failures if layer in f["obligation"].split(":")[0]]
    assert named, (what, [f["obligation"] for f in r.failures])
    # refuted (a counterexample, a failed check), not only left unknown by a timeout
    assert any(f["why"] and "answered unknown" not in f["why"] for f in named), (what, named)


EQUIVALENT = [
    ("index-transformer[a=2]", "the key without its +1 (key j, key_sq (j+1)^2)",
     "score = lambda (2 (i+1) j - (j+1)^2) = lambda (2 (i+1)(j+1) - (j+1)^2) - 2 lambda (i+1): the same scores "
     "up to a constant per query, which softmax removes",
     lambda m: _set(m, "index", "WK", 0, "one", 0)),
    ("mqar-transformer", "a constant added to every readout logit",
     "the readout term 5 * one * [feature ONE] adds 5 to the logit of every token: the argmax is unchanged",
     lambda m: m.spec.readout.append((0, 1, 0, 5))),
]


@pytest.mark.parametrize("con, what, why, mutate", EQUIVALENT, ids=[f"{c}: {w}" for c, w, *_ in EQUIVALENT])
def test_an_equivalent_mutant_still_certifies(con, what, why, mutate):
    r = certify_built(certificate(con), mutate=mutate, timeout_ms=20000)
    assert r.certified, (what, why, r.failures)


def test_the_unmutated_models_certify_with_every_layer_covered(all_certificates):
    by = {r.construction: r for r in all_certificates}
    for con in ("index-transformer[a=n+2]", "ar-transformer[a=n+2]", "cgram-transformer[c=3,a=n+2]",
                "counting-transformer[a=n+1]", "mqar-transformer", "index-hybrid", "ar-hybrid"):
        r = by[con]
        assert r.certified, (con, r.failures)
        assert r.source == "built-model"
        assert {"format", "embedding", "heads", "readout", "builder-margins"} <= set(r.covers), r.covers
        assert any(s["layer"] == "readout" and s["answer"] == "unsat" for s in r.steps)


def test_a_split_of_the_gap_that_misses_a_case_fails_its_coverage_step(all_certificates):
    """The c-gram match head's gap is proved by cases (a later key; an earlier key
    whose k-th token back is below or above the gram's): a hint to z3, not an
    assumption. A split without the cases of the third component leaves the
    earlier keys that differ only there uncovered, and the coverage step fails
    with a counterexample."""
    import dataclasses

    from rnngap.checks.catalog import retrieval

    def heads(inst):
        p = retrieval.CGRAM4.heads(inst)
        whole = p.heads["match"].split
        p.heads["match"] = dataclasses.replace(p.heads["match"], split=lambda *a: whole(*a)[:-2])
        return p
    cert = certificate("cgram-transformer[c=4,a=n+2]")
    r = certify_built(dataclasses.replace(cert, plan=dataclasses.replace(retrieval.CGRAM4, heads=heads)))
    assert not r.certified
    assert [f["obligation"] for f in r.failures] == \
        ["layer 1 head match: the cases of the gap cover every other key"]
    assert "sat" in r.failures[0]["why"]
    full = next(r for r in all_certificates if r.construction == cert.name)
    assert full.certified and sum(s["lemma"].startswith("first full match") for s in full.steps) == 7


def test_the_iterate_rnn_certifies_every_layer_with_its_mlps_named():
    """T4.1 has no heads: its certificate covers its three RNN layers (each state's
    closed form by induction), what each MLP writes, and the readout, for both
    readout cases (a CoT step and the answer); no softmax lemma is claimed."""
    r = certify_built(certificate("iterate-rnn"))
    assert r.certified, r.failures
    assert r.covers == ["format", "embedding", "rnn-layers", "mlps", "readout", "ranges", "builder-margins"]
    mlp_steps = {s["layer"] for s in r.steps if s["layer"].endswith(" mlp")}
    assert mlp_steps == {"rnn layer 0 mlp", "rnn layer 1 mlp", "rnn layer 2 mlp"}
    readout = [s for s in r.steps if s["layer"] == "readout"]
    assert len(readout) == 4 and all(s["answer"] == "unsat" for s in readout)


def test_the_iterate_value_ranges_fail_under_a_smaller_bound():
    """Can fail: with the value bound V (the largest token code) in place of the
    declared 3 V^2 the readout's logit terms (2 tau out up to about 2 V^2) exceed it;
    the failure is a 'ranges' step. Every number of the run is bounded: each
    embedded value, each matrix row's products and partial sums, each state, each
    residual value, the readout's weights and logit terms."""
    import dataclasses

    from rnngap.checks.catalog import hierarchy
    from rnngap.constructions.models import bounds
    cert = certificate("iterate-rnn")
    small = dataclasses.replace(hierarchy.ITERATE, heads=lambda inst: dataclasses.replace(
        hierarchy.ITERATE.heads(inst), value_bound=bounds.iterate_code_bound(bounds.SYM, bounds.N)))
    r = certify_built(dataclasses.replace(cert, plan=small))
    assert not r.certified
    assert {f["obligation"].split(":")[0] for f in r.failures} == {"ranges"}
    full = certify_built(cert)
    ranges = [s for s in full.steps if s["layer"] == "ranges"]
    assert len(ranges) > 20 and all(s["answer"] == "unsat" for s in ranges)
