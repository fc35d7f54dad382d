"""Claim 'declarations': every declared resource expression has the asymptotic
class its claim states (checked symbolically), and the Python function the
construction uses agrees with the sympy expression at sample n."""
from __future__ import annotations

import time

from .declarations import DECLARATIONS, evaluate, holds
from .registry import Record, register
from .tasks import NO_TASK

SAMPLE_N = {"quick": [1, 2, 3, 7, 8, 9, 100, 1000, 2 ** 14], "full": list(range(1, 300)) + [1000, 2 ** 14, 2 ** 20]}
FUNCTIONS: dict[tuple[str, str], object] = {}
"""(model, resource) -> the Python function of n the construction actually uses,
or (function, {profile: sample n}) when only some n apply (e.g. a model that
refuses sizes its int64 storage cannot hold)."""


@register("declarations", "asymptotic declarations (sympy)")
def check_declarations(profile: str, seed: int) -> list[Record]:
    out = []
    for d in DECLARATIONS:
        t0 = time.perf_counter()
        fails = 0 if holds(d) else 1
        fn = FUNCTIONS.get((d.model, d.resource))
        ns = SAMPLE_N[profile]
        if isinstance(fn, tuple):
            fn, ns = fn[0], fn[1][profile]
        n_checked = 1
        note = f"{d.resource} = {d.expr} is O({d.growth()})" if not fails else f"{d.resource} = {d.expr} is NOT O({d.growth()})"
        if fn is not None:
            bad = [n for n in ns if evaluate(d.expr, n) != fn(n)]
            n_checked += len(ns)
            if bad:
                fails += len(bad)
                note += f"; python and sympy disagree at n = {bad[:5]}"
        out.append(Record("declarations", d.model, NO_TASK, 0, n_checked, fails,
                          seconds=max(round(time.perf_counter() - t0, 3), 0.001), note=note,
                          description=f"{d.resource} in O({d.order}) [{d.claim}]"))
    return out


# ----------------------------------------------------------------------------
# Declarations of the claims whose check modules do not declare their own:
# the hybrids (T5.6), the Turing-machine compilers (T5-RAG machines, T5-hyb-P)
# and the T4.1 RNN. Each is paired with the Python function the construction
# uses, so the symbolic class and the numbers actually used cannot drift apart.
# sim: the simulator's precision depends on the RNN it is given (bounds.sim_int of
# the RNN's constants); declared here for the registry's first random RNN as a
# function of the context length n (every registry simulator is certified by
# `rnngap certify`).
def _declare_more() -> None:
    import sympy as sp

    from rnngap.constructions import cot_hierarchy as CH, hybrid as H, turing as TM
    from .declarations import N as n_sym, declare

    def add(claim, model, resource, expr, order, fn):
        declare(claim, model, resource, expr, order)
        FUNCTIONS[(model, resource)] = fn

    for task, decl in (("index", H.DECLARED["index"]), ("ar", H.DECLARED["ar"]),
                       ("cgram(c=3)", H.cgram_declared(3)), ("counting", H.DECLARED["counting"])):
        model = f"hybrid.{task}"
        add("T5.6", model, "int_bits", decl.int_expr.subs(H.N, n_sym), "log", decl.int_bits)
        add("T5.6", model, "frac_bits", sp.sympify(decl.frac_expr).subs(H.N, n_sym), "log", decl.frac_bits)
    add("T5.6", "hybrid.istree", "int_bits", H.ISTREE.int_expr.subs(H.N, n_sym), "log", H.ISTREE.int_bits)
    add("T5.6", "hybrid.istree", "frac_bits", sp.sympify(H.ISTREE.frac_expr).subs(H.N, n_sym), "log",
        H.ISTREE.frac_bits)
    from rnngap.constructions import bounds as BD
    add("T5.6", "hybrid.istree", "cot", BD.hybrid_istree_cot(BD.SYM, n_sym), "nlogn",
        H.istree_cot_bound)
    for name, spec in TM.MACHINES.items():
        enc = TM.Encoding.of(spec.build())
        hyb, rag = TM.hybrid_declared(enc, spec), TM.rag_declared(enc, spec)
        sub = {TM.NSYM: n_sym}
        add("T5-hyb-P", f"hybrid-tm.{name}", "int_bits", hyb.int_expr.subs(sub), "log", hyb.int_bits)
        add("T5-hyb-P", f"hybrid-tm.{name}", "frac_bits", sp.sympify(hyb.frac_expr).subs(sub), "log",
            hyb.frac_bits)
        add("T5-RAG", f"rag-tm.{name}", "int_bits", rag.int_expr.subs(sub), "log", rag.int_bits)
        add("T5-hyb-P", f"tm.{name}", "steps T(n)", spec.time_expr.subs(sub),
            f"poly:{int(sp.degree(sp.expand(spec.time_expr.subs(sub)), n_sym))}", spec.time_bound)
    add("T4.1", "iterate-rnn", "int_bits", CH.DECLARED.int_expr.subs(CH.N, n_sym), "log", CH.DECLARED.int_bits)
    add("T4.1", "iterate-rnn", "frac_bits", sp.sympify(CH.DECLARED.frac_expr), "constant", CH.DECLARED.frac_bits)
    add("T4.1", "iterate-rnn", "cot", CH.STEPS_EXPR.subs(CH.N, n_sym), "poly:2", CH.cot_bound)
    from rnngap.constructions.simulate import random_linear_rnn, rnnsim_transformer
    from .checks_hierarchy import SIM_STATE_BITS
    p = rnnsim_transformer(random_linear_rnn(0), max_prompt=1, max_rnn_cot=0, state_int_bits=SIM_STATE_BITS).params()
    sim = BD.sim_declared(p)
    add("sim", sim.name, "int_bits", sim.int_expr.subs(BD.N, n_sym), "log", sim.int_bits)


_declare_more()


# ----------------------------------------------------------------------------
# Parameter counts: "constant size" (docs/theory.md §1), declared once as constants in
# constructions/bounds.py (PARAMS) and checked against the models actually built
# at sample n (the measurement side; a build with one more or one fewer weight fails).
PARAM_N = {"quick": [2, 3, 5, 8, 64, 1024], "full": [2, 3, 4, 5, 6, 7, 8, 9, 16, 64, 256, 1024, 4096]}


def _declare_params() -> None:
    from rnngap.constructions import cot_hierarchy as CH, hybrid as H, istree as IT, rag_models as RM
    from rnngap.constructions import retrieval as R, turing as TM
    from .declarations import declare

    def params(model) -> int:
        return int(model.resources.params)

    def ns(lo: int = 1, hi: int | None = None):
        return {p: [n for n in v if n >= lo and (hi is None or n <= hi)] for p, v in PARAM_N.items()}

    builders = [
        ("T4.6-up", "retrieval.index", lambda n: params(R.index_transformer(n)), ns()),
        ("T4.6-up", "retrieval.ar", lambda n: params(R.ar_transformer(n)), ns(2)),
        ("T4.6-up", "retrieval.cgram3", lambda n: params(R.cgram_transformer(n, alphabet=2, c=3)), ns(3)),
        ("T4.6-up", "retrieval.cgram4", lambda n: params(R.cgram_transformer(n, alphabet=2, c=4)), ns(4)),
        ("T4.6-up", "retrieval.counting", lambda n: params(R.counting_transformer(n)), ns()),
        ("T4.6-up", "retrieval.mqar", lambda n: params(R.mqar_transformer(n)), ns(1, 1024)),
        # at the reductions' alphabets (growing with n): the same count (constant size includes the alphabet)
        ("T4.6-up", "retrieval.counting[a=n+1]", lambda n: params(R.counting_transformer(n, alphabet=n + 1)), ns()),
        ("T4.6-up", "retrieval.ar[a=n+2]", lambda n: params(R.ar_transformer(n, alphabet=n + 2)), ns(2)),
        ("T4.6-up", "retrieval.cgram3[a=n+2]", lambda n: params(R.cgram_transformer(n, alphabet=n + 2, c=3)), ns(3)),
        ("T4.7-up", "istree-dfs", lambda n: params(IT.istree_transformer(n)), ns(2)),
        ("T5.6", "hybrid.index", lambda n: params(H.index_hybrid(n)), ns(2)),
        ("T5.6", "hybrid.ar", lambda n: params(H.ar_hybrid(n)), ns(2)),
        ("T5.6", "hybrid.cgram(c=3)", lambda n: params(H.cgram_hybrid(n, c=3)), ns(3)),
        ("T5.6", "hybrid.counting", lambda n: params(H.counting_hybrid(n)), ns(3, 4096)),
        ("T5.6", "hybrid.istree", lambda n: params(H.istree_hybrid(n)), ns(2, 256)),
        ("T5-RAG", "index-rag", lambda n: params(RM.index_rag(n).model), ns(2)),
        ("T5-RAG", "ar-rag", lambda n: params(RM.ar_rag(n).model), ns(2)),
        ("T5-RAG", "3-gram-rag", lambda n: params(RM.cgram_rag(n, c=3).model), ns(3)),
        ("T5-RAG", "counting-rag", lambda n: params(RM.counting_rag(n).model), ns(2)),
        ("T5-RAG", "istree-rag", lambda n: params(RM.istree_rag(n).model), ns(2)),
        ("T5-RAG", "istree-rag-paper", lambda n: params(RM.istree_rag_paper(n).model), ns(2, 8)),
        ("T4.1", "iterate-rnn", lambda n: params(CH.iterate_rnn(n)), ns(2, 64)),
    ]
    for name, spec in TM.MACHINES.items():
        builders.append(("T5-hyb-P", f"hybrid-tm.{name}",
                         lambda n, spec=spec: params(TM.tm_hybrid(spec, n).model), ns(1, 8)))
        builders.append(("T5-RAG", f"rag-tm.{name}",
                         lambda n, spec=spec: params(TM.tm_rag(spec, n).model), ns(1, 8)))
    from rnngap.constructions.bounds import params_of
    for claim, model, fn, sample in builders:
        declared = params_of(model)          # the one declaration (constructions/bounds.py PARAMS)
        if declared is None:
            raise KeyError(f"{model}: no parameter count declared in constructions/bounds.py PARAMS")
        declare(claim, model, "params", declared, "constant")
        FUNCTIONS[(model, "params")] = (fn, sample)       # the measurement: built models at sample n


_declare_params()
