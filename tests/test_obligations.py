"""Obligations and ``rnngap certify`` (constructions/models/obligations.py, checks/certify/run.py).

* the gadget lemmas behind the obligations, exhaustively on small formats: a
  gap above (f + 1) ln 2 makes the kernel's exp exactly 0 and lambda - 1 does
  not; the counting comparison gap; the per-position score facts by plain
  integer enumeration (independent of z3);
* the monotonicity prover rejects what is not nondecreasing;
* certify fails when a declaration or a margin is weakened, naming the
  obligation and the first failing n, which the builder confirms (MarginError);
* certificate vs measurement reports an excess when the model is larger than
  the certificate.
"""
from __future__ import annotations

import dataclasses
import json
from argparse import Namespace
from fractions import Fraction

import pytest
import sympy as sp

from rnngap.constructions.models import bounds as Bd
from rnngap.constructions.models import retrieval as R
from rnngap.constructions.machine.fixedpoint import fx_exp, new_err
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import MarginError, sharpness, zero_gap
from rnngap.checks.catalog.records import certificate, certificates
from rnngap.constructions.models.obligations import Obligation
from rnngap.checks.certify import run as CF
from rnngap.checks.certify.run import N, certify, certify_construction, nondecreasing, table, write_json


# ----------------------------------------------------------------------------
# gadget lemmas, exhaustively on small formats
@pytest.mark.parametrize("f", range(0, 16))
def test_gap_lemma_exp_rounds_to_zero_exactly_above_the_zero_gap(f):
    """gap > (f + 1) ln 2 -> exp(-gap) is exactly 0 on the grid 2^-f; lambda(f) is the
    smallest such integer (lambda - 1 keeps a nonzero weight)."""
    lam = sharpness(f)
    assert lam > zero_gap(f) >= lam - 1
    for g in range(lam, lam + 4):
        assert fx_exp(-g << f, 2, f, 0, new_err()) == 0, (f, g)
    assert fx_exp(-(lam - 1) << f, 2, f, 0, new_err()) >= 1, f
    # a fractional gap just above the threshold (raw units of 2^-f)
    d = -(int(zero_gap(f) * (1 << f)) + 1)
    assert fx_exp(d, 2, f, 0, new_err()) == 0, f


@pytest.mark.parametrize("n", range(1, 25))
def test_counting_comparison_lemma(n):
    """|1/(c+1) - 1/(t+3/2)| >= 1/((n+1)(2n+3)) for all counts and thresholds 0..n,
    attained, and above 2^-f for the declared f(n) (obligation counting.compare.gap)."""
    gaps = [abs(Fraction(1, c + 1) - Fraction(2, 2 * t + 3)) for c in range(n + 1) for t in range(n + 1)]
    assert min(gaps) == Fraction(1, (n + 1) * (2 * n + 3))
    assert min(gaps) > Fraction(1, 1 << Bd.COUNTING.frac_bits(n))


@pytest.mark.parametrize("n", range(1, 9))
def test_index_and_shift_scores_by_enumeration(n):
    """The facts z3 proves for all n, enumerated for small n with plain integers."""
    lam = 2
    for i in range(1, n + 1):
        scores = {j: lam * (2 * (i + 1) * (j + 1) - (j + 1) ** 2) for j in range(n + 3)}
        assert all(scores[i] - s >= lam for j, s in scores.items() if j != i)
    K = Q = max(n + 3, 9)
    assert all(abs(lam * (2 * q * p - p * p)) <= lam * (2 * Q * K + K * K)
               for q in range(-Q, Q + 1) for p in range(1, n + 4))
    Np = n + 3
    for shift in (1, 2, 3):
        for i in range(Np):
            t = max(i - shift, 0)
            sc = {j: lam * (2 * (i - shift) * j - j * j) for j in range(Np)}
            assert all(sc[t] - s >= lam for j, s in sc.items() if j != t)


def test_joint_match_by_enumeration():
    """m = 2 components, codes in -3..3, positions 0..P: a full match beats partial
    matches by >= s and later full matches by >= mu."""
    import itertools
    mu, s0, P = 2, 2, 4
    lam = mu * P + s0
    codes = range(-3, 4)
    for q in itertools.product(codes, repeat=2):
        full = lam * sum(2 * x * x - x * x for x in q)
        for p in itertools.product(codes, repeat=2):
            sc = lam * sum(2 * q[k] * p[k] - p[k] ** 2 for k in range(2))
            for j0 in range(P + 1):
                for j1 in range(P + 1):
                    if p != q:
                        assert (full - mu * j0) - (sc - mu * j1) >= s0
                    elif j1 > j0:
                        assert (full - mu * j0) - (sc - mu * j1) >= mu


# ----------------------------------------------------------------------------
def test_nondecreasing_prover():
    yes = [N, sp.ceiling(sp.log(N + 3, 2)), sp.Max(N, 9) ** 2, 2 ** sp.ceiling(sp.log(N, 2)), 3 * N + 7]
    no = [-N, 1 / N, 10 - N, N * (N - 5), sp.Max(N, 9) - N, sp.floor(sp.log(11 - N, 2))]
    assert all(nondecreasing(e) for e in yes)
    assert not any(nondecreasing(e) for e in no)
    # on a bounded range: a reciprocal of a positive nonincreasing part rises
    assert CF.nondecreasing(1 / (1 - N / 100), N, 1, 99) and not CF.nondecreasing(1 / (1 - N / 100), N, 1, 100)
    assert not CF.nondecreasing(1 / (1 - N / 100))                # positive only up to 99: not shown for all n
    assert CF.nonincreasing(10 - N) and not CF.nonincreasing(N * (N - 5), N, 1, 50)


# a rounding error 2^-(2K + 1), K = ceil(log2(n + 2)): a step of n, constant on each piece
_K = sp.ceiling(sp.log(N + 2) / sp.log(2))
_PIECES = [(2 ** (k - 1) - 1, 2 ** k - 2) for k in range(3, 21)]
_SMALL = 1 / (1 / N ** 2 - 2 ** (-2 * _K - 1))                 # rises on a piece, drops where K steps


def test_steps_frozen_on_a_piece():
    assert not nondecreasing(_SMALL)                          # not monotone as a whole
    lo, hi = _PIECES[4]
    s = CF.freeze_steps(_SMALL, N, lo, hi)
    assert s.free_symbols == {N} and not s.atoms(sp.ceiling) and CF.nondecreasing(s, N, lo, hi)
    assert CF.freeze_steps(_SMALL, N, lo, hi + 1).atoms(sp.ceiling)   # K not constant there: kept
    assert [i for i, (a, b) in enumerate(_PIECES) if (a, b) == (lo, hi)] == [4]


@pytest.mark.parametrize("bound, holds", [(2 * 4 ** _K, True), (4 ** _K / 4, False)])
def test_frozen_pieces_prove_and_can_fail(bound, holds):
    """small <= bound on every piece: shown with the steps frozen, or a failure at
    the first piece's last n, where the condition itself fails."""
    cond = sp.Le(_SMALL, bound)
    rec = CF._frozen_pieces(_SMALL, bound, False, cond, _PIECES)
    assert rec["method"] == "piecewise-monotone (steps frozen)"
    if holds:
        assert rec["answer"] == "holds" and rec["range"] == f"{_PIECES[0][0]}..{_PIECES[-1][1]}"
    else:
        assert rec["answer"] == "fails" and rec["first_n"] == _PIECES[0][1]
        n = _PIECES[0][1]
        assert Fraction(1) / (Fraction(1, n * n) - Fraction(1, 2 * 4 ** 3)) > Fraction(4 ** 3, 4)
    assert CF._frozen_pieces(sp.Abs(N - 100), bound, False, sp.Le(sp.Abs(N - 100), bound), _PIECES) is None
    # true at every n but not shown (the big side rises within a piece): no verdict, the fallbacks decide
    big = sp.Rational(11, 5) * N ** 2
    assert CF._frozen_pieces(_SMALL, big, False, sp.Le(_SMALL, big), _PIECES) is None


def test_margin_cap_only_for_a_margin_shown_nowhere():
    con = certificate("counting-hybrid").con
    shown = [{"answer": "holds"}, {"answer": "unsat"}]
    assert CF._margin_cap(con, 10 ** 7, 7118, shown) is None
    assert CF._margin_cap(con, 10 ** 7, 7118, shown + [{"answer": "sat", "why": CF.NOT_MONOTONE}]) == \
        con.n_min + CF.EXHAUSTIVE_LIMIT - 1
    assert CF._margin_cap(con, 7000, 7118, [{"answer": "sat", "why": CF.NOT_MONOTONE}]) is None


def test_certify_everything_quickly(all_certificates):
    rs = all_certificates
    assert all(r.certified for r in rs), table(rs)
    assert [r.construction for r in rs[:len(certificates())]] == list(certificates())   # the catalogue's order
    claims = {r.claim for r in rs}
    assert {"T4.6-up", "T4.7-up", "T5-RAG", "T5.6", "T5-hyb-P", "T4.1", "sim"} <= claims
    facts = {r.construction: r for r in rs if r.method == "smt"}
    sim_row = "rnnsim-transformer[layers]"
    ist_row = "istree-hybrid[layers]"
    dfs_row = "istree-transformer[layers]"
    assert set(facts) == {sim_row, ist_row, dfs_row} and all(facts[r].source == "built-model" for r in facts)
    dfs = facts[dfs_row]
    assert dfs.claim == "T4.7-up" and dfs.certified and (dfs.n_min, dfs.n_max) == (7, 7) and dfs.obligations >= 80
    assert dfs.covers == ["embedding", "heads", "mlps", "readout"]
    ist = facts[ist_row]
    assert ist.claim == "T5.6" and ist.certified and (ist.n_min, ist.n_max) == (4, 323) and ist.obligations >= 200
    assert ist.covers == ["embedding", "rnn-layers", "rnn-mlps", "heads", "attention-mlp", "readout"]
    assert not any(r.source == "restated-formula" for r in rs)
    built = {r.construction: r for r in rs if r.source == "built-model"}
    for key in ("index[a=2]", "index[a=n+2]", "ar[a=4]", "ar[a=n+2]", "cgram[c=3,a=2]", "cgram[c=3,a=n+2]",
                "cgram[c=4,a=3]", "cgram[c=4,a=n+2]", "counting[a=3]", "counting[a=n+1]"):
        r = built[key.replace("[", "-transformer[", 1)]
        assert r.certified and {"heads", "readout"} <= set(r.covers)
    assert "mqar-transformer" in built
    heads = facts[sim_row]
    assert heads.n_max is None and heads.obligations >= 200 and heads.covers == ["token-type-mlp", "heads", "block-role-mlp",
                                                                               "input-mlp", "rnn-layer-mlps", "argmax-mlps", "next-code-mlp",
                                                                               "readout", "composition",
                                                                               "exact-products"]
    assert any(f["fact"].endswith(": chain.K") and f["answer"] == "unsat" for f in heads.facts)
    sims = [r for r in rs if r.claim == "sim" and r.method == "piecewise-monotone"]
    assert len(sims) >= 8 and all(r.n_max > 10 ** 6 and "by definition" in r.note for r in sims)
    idx = next(r for r in rs if r.construction == "index-transformer[a=2]")
    assert idx.n_max is not None and sum(certificate("index-transformer[a=2]").con.fmt(idx.n_max)) <= 62
    assert sum(certificate("index-transformer[a=2]").con.fmt(idx.n_max + 1)) > 62
    cnt = next(r for r in rs if r.construction == "counting-transformer[a=n+1]")
    assert cnt.n_max == R.COUNTING_WIDE_MAX_N and cnt.n_max_int64 == R.COUNTING_MAX_N
    by = {r.construction: r for r in rs}
    assert idx.n_max_int64 == idx.n_max                  # an int64-only construction
    for name in ("ar-hybrid", "cgram-hybrid", "index-hybrid"):   # two limbs: past 2^17 data positions
        assert by[name].n_max >= 2 ** 17 and by[name].n_max > by[name].n_max_int64, name
    hc = by["counting-hybrid"]                            # the step slope's margin: steps frozen per piece
    assert hc.n_max >= 2 ** 16 > hc.n_max_int64 and "checked to n =" not in hc.note
    assert any(f["method"] == "piecewise-monotone (steps frozen)" and f["answer"] == "holds" for f in hc.facts)
    assert by["istree-hybrid"].n_max > 2000 > by["istree-hybrid"].n_max_int64
    it = by["iterate-rnn"]                                # T4.1: two limbs past 23,169 (issue 28: >= 2^16)
    assert it.n_max_int64 == 23169 and it.n_max >= 2 ** 20 and it.certified


def test_machine_lemmas_on_two_limb_formats(monkeypatch):
    """The one-hot and equal-split lemmas hold on the two-limb executor's softmax and
    division at wide formats (the certificates' machine step checks each declared
    two-limb format), and the check can fail: a division off by one raw unit."""
    from rnngap.checks.certify import machine_lemmas as ML
    from rnngap.constructions.machine import wide as WD
    for I, f in ((40, 34), (48, 42), (70, 56), (10, 53), (120, 6), (60, 57), (20, 100), (8, 118)):
        assert ML.lemmas_at(I, f) == (), (I, f)
    bad = ML.one_hot_two_limb(60, 57, s=3)                # a gap of 3 does not round exp to 0 at f = 57
    assert bad and "exp of gap 3" in bad[0]
    real = WD.w_div
    monkeypatch.setattr(WD, "w_div", lambda *a: (lambda h, lo: (h, lo + 1))(*real(*a)))
    assert ML.equal_split_two_limb(40, 34)


# ----------------------------------------------------------------------------
# it must be able to fail
def _weaken_I(con, below: int, by: int = 1):
    d = con.declared
    w = Bd.Declared(d.name, lambda B, n, a, c: d.int_fn(B, n, a, c) - (by if (B is Bd.INT and n >= below) else 0),
                    d.frac_fn)
    return con.weakened(declared=w)


@pytest.mark.parametrize("name,below,by", [("counting-transformer[a=3]", 1000, 1), ("ar-transformer[a=n+2]", 5000, 1),
                                           ("index-transformer[a=2]", 3000, 2)])
def test_weakened_declaration_fails_at_the_first_n_the_builder_refuses(name, below, by):
    con = certificate(name).con
    r = certify_construction(_weaken_I(con, below, by))
    assert not r.certified
    fl = r.failures[0]
    n1 = fl["first_n"]
    assert fl["obligation"].endswith("range") and n1 >= below
    # the builder itself (its gadgets' MarginError) agrees: refused at n1, accepted just before
    build = {"counting-transformer[a=3]": lambda n, fmt: R.counting_transformer(n, alphabet=3, fmt=fmt),
             "ar-transformer[a=n+2]": lambda n, fmt: R.ar_transformer(n, alphabet=n + 2, fmt=fmt),
             "index-transformer[a=2]": lambda n, fmt: R.index_transformer(n, alphabet=2, fmt=fmt)}[name]
    I, f = con.fmt(n1)
    with pytest.raises(MarginError):
        build(n1, FixedFormat(I - by, f))
    if n1 - 1 >= below:
        I0, f0 = con.fmt(n1 - 1)
        build(n1 - 1, FixedFormat(I0 - by, f0))


def test_lambda_one_smaller_fails_at_the_smallest_n():
    con = certificate("index-transformer[a=2]").con
    weak = tuple(Obligation(o.name, o.need, (lambda B, n, I, f: B.sharp(f) - 1), o.strict) if o.name == "match.gap"
                 else o for o in con.obligations)
    r = certify_construction(con.weakened(obligations=weak))
    assert not r.certified
    assert [(x["obligation"], x["first_n"]) for x in r.failures] == [("match.gap", con.n_min)]


def test_cli_exits_1_and_json_names_the_failure(tmp_path, monkeypatch):
    from rnngap.checks.cli import cmd_certify
    from rnngap.checks.catalog import records as catalog
    cert = certificate("index-rag")                  # a declared-obligation certificate (no whole-model plan)
    con = cert.con
    weak = {**certificates(), con.name: dataclasses.replace(cert, con=_weaken_I(con, 2000))}
    monkeypatch.setattr(catalog, "certificates", lambda: weak)
    path = tmp_path / "cert.json"
    rc = cmd_certify.run(Namespace(only=[con.name], json=str(path)))
    assert rc == 1
    recs = json.loads(path.read_text())      # the construction's name: all its certificates
    assert [r["construction"] for r in recs] == [con.name, f"{con.name}[program]"]
    assert recs[0]["certified"] is False and recs[1]["certified"] is True
    assert {"claim", "construction", "obligations", "n_min", "n_max", "method", "certified", "seconds"} <= set(recs[0])
    assert recs[0]["failures"][0]["first_n"] >= 2000


def test_certify_on_two_workers_equals_one_process():
    """The pool runs each certificate exactly as one process does: the same records
    (but the seconds), in the same order, with the simulators, the machine lemmas and
    the facts."""
    only = ["T5-RAG", "index-hybrid", "rnnsim-transformer[layers]", "machine"]
    one, two = certify(only, workers=1), certify(only, workers=2)
    # the SMT-LIB text of each query too: it is written from the fresh context the
    # query is solved in, so its names of shared subterms (z3's term ids, ?x193) do not
    # depend on what the process built before
    strip = lambda rs: [{k: v for k, v in r.record().items() if k != "seconds"} for r in rs]
    assert any(f.get("query") for r in two for f in r.record().get("facts", []))
    assert strip(one) == strip(two)
    from rnngap.checks.certify.run import chosen_certificates
    names = [c.name for c in chosen_certificates(only)[0]]
    assert len(names) > 5 and [r.construction for r in two][:len(names)] == names     # the catalogue's order
    assert any(r.construction == "index-hybrid" and r.source == "built-model" for r in two)
    assert {r.method for r in two} >= {"smt", "kernel-exhaustive", "built-model", "piecewise-monotone"}
    with pytest.raises(ValueError, match="workers"):
        certify(only, workers=0)


def test_a_catalogue_replaced_in_this_process_is_certified_here(monkeypatch):
    """The workers build the catalogue afresh; a catalogue replaced in this process
    (here: index-rag with I two bits short from n = 2000) is certified in this
    process, so the change is seen however many workers are asked for."""
    from rnngap.checks.catalog import records as catalog
    cert = certificate("index-rag")
    weak = {**certificates(), "index-rag": dataclasses.replace(cert, con=_weaken_I(cert.con, 2000))}
    monkeypatch.setattr(catalog, "certificates", lambda: weak)
    rs = certify(["index-rag", "counting-rag"], facts=False, workers=2)
    assert [(r.construction, r.certified) for r in rs] == [("index-rag", False), ("counting-rag", True)]
    assert rs[0].failures[0]["first_n"] >= 2000


def test_slow_certificates_run_only_with_full_or_by_name(capsys, monkeypatch):
    """c-gram c = 4 at the registry's alphabet is the one slow certificate: left out
    of the default run (and said so), run with --full or when --only names it."""
    from rnngap.checks.certify.run import chosen_certificates
    from rnngap.checks.cli.main import main
    run, slow = chosen_certificates()
    assert [c.name for c in slow] == ["cgram-transformer[c=4,a=3]"] and "cgram-transformer[c=4,a=n+2]" in [c.name for c in run]
    assert chosen_certificates(full=True)[1] == [] and len(chosen_certificates(full=True)[0]) == len(certificates())
    assert [c.name for c in chosen_certificates(["cgram-transformer[c=4,a=3]"])[0]] == ["cgram-transformer[c=4,a=3]"]
    assert [c.name for c in chosen_certificates(["T4.6-up"])[1]] == ["cgram-transformer[c=4,a=3]"]
    with pytest.raises(SystemExit) as bad:                 # argparse's usage error: exit 2, one line
        main(["certify", "--only", "T5-RAG", "--workers", "0"])
    assert bad.value.code == 2 and "--workers must be >= 1" in capsys.readouterr().err
    from rnngap.checks.certify import run as C
    asked = []
    monkeypatch.setattr(C, "certify", lambda only, workers, full, every_n, progress=None, engine="local",
                        address=None: asked.append((only, workers, full, every_n)) or [])
    for argv, line in ((["--only", "T4.6-up"], True), (["--only", "T4.6-up", "--full"], False),
                       (["--only", "cgram-transformer[c=4,a=3]"], False)):
        assert main(["certify", *argv, "--workers", "3"]) == 0
        out = capsys.readouterr().out
        assert ("not run (slow; `rnngap certify --full`, or name it in --only): cgram-transformer[c=4,a=3]" in out) == line
    assert asked == [(["T4.6-up"], 3, False, False), (["T4.6-up"], 3, True, True),
                     (["cgram-transformer[c=4,a=3]"], 3, False, False)]


def test_write_json_roundtrip(tmp_path):
    rs = certify(["index-rag"], facts=False)
    write_json(rs, str(tmp_path / "x.json"))
    rec = json.loads((tmp_path / "x.json").read_text())[0]
    assert rec["construction"] == "index-rag" and rec["claim"] == "T5-RAG"
    assert rec["certified"] is True and rec["method"] == "piecewise-monotone"


# ----------------------------------------------------------------------------
def test_certificate_vs_measurement_finds_excess():
    from rnngap.checks.verify.checks_certificate import compare
    con = certificate("index-transformer[a=2]").con
    checked, bad = compare(con, R.index_transformer(64), 64)
    assert checked == 2 and bad == []
    checked, bad = compare(con, R.index_transformer(4096), 64)      # a larger model than certified at 64
    assert any("score_int_bits" in b for b in bad)


def test_certificate_record_zero_excess():
    from rnngap.checks.verify.checks_certificate import check_certificate
    recs = check_certificate("quick", 0)
    assert len(recs) >= 10 and all(r.passed for r in recs), [r.note for r in recs if not r.passed]


def test_docstring_examples():
    import doctest
    from rnngap.checks.certify import run as C
    from rnngap.constructions.models import obligations as O
    for module in (Bd, O, C):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_int_and_sympy_backends_agree_on_every_certified_format():
    """The one declaration evaluated by both backends (what certify reasons about
    symbolically is what the builders use), at the ends of the certified range."""
    from rnngap.checks.catalog.hierarchy import sim_construction
    for con in [c.con for c in certificates().values()] + [sim_construction(_a_simulator().params())]:
        I_e, f_e = con.fmt_expr(Bd.SYM, Bd.N)
        sym = con.declared.n_symbol
        I_e, f_e = sp.sympify(I_e).subs(Bd.N, sym), sp.sympify(f_e).subs(Bd.N, sym)
        from rnngap.checks.certify.run import n_max_of
        top = n_max_of(con)
        for n in {con.n_min, con.n_min + 5, 100, top}:
            if n is None or n > top:
                continue
            assert (int(I_e.subs(sym, n)), int(f_e.subs(sym, n))) == con.fmt(n), (con.name, n)


# ----------------------------------------------------------------------------
# sim: the simulator's format (bounds.sim_int, defined from its needs) and its position heads
def _a_simulator():
    from rnngap.constructions.models.simulate import random_linear_rnn, rnnsim_transformer
    return rnnsim_transformer(random_linear_rnn(1), max_prompt=4, max_rnn_cot=1, state_int_bits=3)


def test_sim_builder_reads_the_declaration_and_is_covered():
    from rnngap.checks.certify.run import certify_sim
    from rnngap.checks.catalog.hierarchy import sim_construction
    sim = _a_simulator()
    p = sim.params()
    assert sim.fmt.int_bits == Bd.sim_int(Bd.INT, p, sim.n_pos, sim.max_steps)
    con = sim_construction(p)
    # I nondecreasing in the context: the certified I(n_pos) (at most n_pos steps) covers the build
    assert sim.fmt.int_bits <= con.fmt(sim.n_pos)[0]
    r = certify_sim(sim)
    assert r.certified and r.n_max is not None and sum(con.fmt(r.n_max)) <= 62 < sum(con.fmt(r.n_max + 1))
    # a larger simulator than the certificate's n would be an excess (the measurement can fail)
    small = con.weakened(declared=Bd.Declared("x", lambda B, n, a, c: 1, Bd.const(p.frac_bits)))
    assert small.fmt(sim.n_pos)[0] < sim.fmt.int_bits


def test_sim_weakened_declaration_fails_at_the_first_n():
    from rnngap.checks.catalog.hierarchy import sim_construction
    p = _a_simulator().params()
    con = sim_construction(p)
    below = 5000
    r = certify_construction(_weaken_I(con, below))
    assert not r.certified
    fl = r.failures[0]
    # I is the max of the needs: one bit less fails at once, on the need that attains the max
    assert fl["first_n"] == below
    needs = Bd.sim_needs(Bd.INT, p, below, below)
    assert needs[fl["obligation"]] == max(needs.values()) and int(fl["need"]) == int(fl["have"]) + 1
    weak = tuple(Obligation(o.name, o.need, (lambda B, n, I, f: B.sharp(f) - 1), o.strict) if o.name == "heads.gap"
                 else o for o in con.obligations)
    r = certify_construction(con.weakened(obligations=weak))
    assert [(x["obligation"], x["first_n"]) for x in r.failures] == [("heads.gap", con.n_min)]


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_sim_position_gap_by_enumeration(n):
    """Independent of z3: for every integer query q (also outside the keys), the key
    nearest q in 1..n+1 beats every other by lambda; scores within the declared range."""
    for lam in (1, 3):
        for q in range(-n - 2, n + 3):
            sc = {k: lam * (2 * q * k - k * k) for k in range(1, n + 2)}
            t = min(max(q, 1), n + 1)
            assert all(sc[t] - v >= lam for k, v in sc.items() if k != t)
            assert all(abs(2 * lam * q * k) + lam * k * k <= 3 * lam * (n + 2) ** 2 + lam * n for k in sc)


def test_sim_certificate_vs_measurement_zero_excess_and_can_fail(monkeypatch):
    from rnngap.checks.verify import checks_certificate as CC
    sim = _a_simulator()
    checked, bad, I_cert = CC.compare_sim(sim)
    assert checked >= 8 and bad == [] and sim.fmt.int_bits <= I_cert
    # a head whose measured score bits exceed the certificate is reported
    m = sim.model.spec.notes["margins"]
    monkeypatch.setitem(m, "counter", dict(m["counter"], score_int_bits=I_cert + 5))
    _, bad, _ = CC.compare_sim(sim)
    assert any("counter.score_int_bits" in b for b in bad)


def test_catalogue_certificate_record_can_fail():
    """The per-entry certificate-vs-measurement comparison passes on the catalogue's
    own build and fails on the same construction built in an uncertified format."""
    import dataclasses

    from rnngap.checks.catalog.records import by_name
    from rnngap.checks.verify.checks_certificate import compare_entry
    from rnngap.constructions.machine.formats import FixedFormat

    entry = by_name("index-transformer")
    cert, checked, bad, used = compare_entry(entry, 16, seed=0)
    assert cert is not None and not bad and checked >= 2 and used >= 1
    wide = dataclasses.replace(entry, defaults={**entry.defaults, "fmt": FixedFormat(30, 1)})
    cert, _, bad, _ = compare_entry(wide, 16, seed=0)
    assert cert is None and bad and "none of its certificates' formats" in bad[0]
