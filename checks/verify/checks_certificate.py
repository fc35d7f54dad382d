"""Claim 'declarations', certificate vs measurement: at the n the registry samples (and for
the simulators the registry builds, claim sim),
the built T4.6-up models' own margins (each head's score bits and gaps, as the
gadgets computed them at build time) and the bits a seeded run actually used are
compared with what ``rnngap certify`` certifies (the records' certificates,
each made with its obligations in its family's module of checks/catalog/):

* every head's ``score_int_bits`` <= the certified need of its range obligations;
* every head's gaps >= the certified have of its gap obligations;
* the used integer bits of the run <= the certified (declared) I(n).

A record's failures count the excesses (a measured magnitude above, or a measured
gap below, the certificate): the certificate can never be looser than what runs.
"""
from __future__ import annotations

import time

import numpy as np

from rnngap.checks.catalog import records as catalog
from rnngap.checks.catalog.hierarchy import sim_construction, sim_simulators
from rnngap.checks.catalog.retrieval import retrieval_key, retrieval_name
from rnngap.checks.certify.run import n_max_of
from .registry import Record, register
from rnngap.checks.tasks import NO_TASK

HEADS = {
    # construction key -> [(head, margin key, obligation names, "need" | "gap")]
    "index": [("index", "score_int_bits", ["match.range"], "need"),
              ("index", "gap non-match", ["match.gap"], "gap")],
    "counting": [(h, "score_int_bits", ["counting.count.range", "counting.fetch-q.range",
                                        "counting.count.normaliser_range"], "need") for h in ("fetch-q", "count")]
    + [("after-query", "gap", ["counting.after-query.gap"], "gap"),
       ("fetch-q", "gap_q_t", ["counting.fetch-q.gap_q_t"], "gap"),
       ("fetch-q", "gap_q_data", ["counting.fetch-q.gap_q_data"], "gap"),
       ("count", "gap", ["counting.count.gap"], "gap")],
}
for _key, _c in (("ar", 2), ("cgram3", 3), ("cgram4", 4)):
    HEADS[_key] = ([(f"shift_{k}", "score_int_bits", [f"shift_{k}.range"], "need") for k in range(1, _c)]
                   + [(f"shift_{k}", "gap", [f"shift_{k}.gap"], "gap") for k in range(1, _c)]
                   + [("match", "score_int_bits", ["match.range"], "need"),
                      ("match", "gap non-match", ["match.gap_partial"], "gap"),
                      ("match", "gap between matches", ["match.gap_between_matches"], "gap")])
SAMPLE_N = {"quick": [8, 64, 1024], "full": [8, 16, 64, 256, 1024, 4096]}
BATCH = 4


def compare(con, model, n: int) -> tuple[int, list[str]]:
    """(comparisons, excesses) of one built model against the certificate at n."""
    key = retrieval_key(con.name)
    margins = model.spec.notes["margins"]
    obl = {o.name: o for o in con.obligations}
    checked, bad = 0, []
    for head, mkey, names, kind in HEADS[key]:
        measured = margins[head][mkey]
        vals = [obl[nm].values(con, n) for nm in names]
        checked += 1
        if kind == "need":
            cert = max(v[0] for v in vals)
            if measured > cert:
                bad.append(f"{head}.{mkey} = {measured} > certified {cert}")
        else:
            cert = min(v[1] for v in vals)
            if measured < cert:
                bad.append(f"{head}.{mkey} = {measured} < certified {cert}")
    return checked, bad


@register("declarations", "certificate vs measurement (T4.6-up)")
def check_certificate(profile: str, seed: int) -> list[Record]:
    # at the top this would register checks_retrieval's checks before this module's, and
    # `rnngap verify` runs and lists checks in registration order (import order: kept here)
    from .checks_retrieval import TASKS, generator_kwargs, reference_of, run_model
    certs = catalog.certificates()           # the records' certificates at the registry's alphabets
    out = []
    for key in HEADS:
        spec, a, c, build, decl, _ = TASKS[key]
        if retrieval_name(key, a) not in certs:
            continue
        con = certs[retrieval_name(key, a)].con
        for n in SAMPLE_N[profile]:
            if n < con.n_min:
                continue
            t0 = time.perf_counter()
            model = build(n, a, c)
            checked, bad = compare(con, model, n)
            b = spec.generate(np.random.default_rng([seed, n, len(key), 14]), n, BATCH, **generator_kwargs(key, a))
            inst, wrong = run_model(model, np.asarray(b.tokens), reference_of(key))
            I_cert = con.fmt(n)[0]
            used = model.resources.used_int_bits
            if used > I_cert:
                bad.append(f"used int bits {used} > certified I = {I_cert}")
            if model.fmt.int_bits != I_cert:
                bad.append(f"model format I = {model.fmt.int_bits} is not the certified I = {I_cert}")
            out.append(Record("declarations", con.name, spec.name, n, checked + 2,
                              len(bad) + wrong, model.resources.used_precision_bits, decl.total_bits(n, a, c),
                              seconds=max(round(time.perf_counter() - t0, 3), 0.001),
                              note=(f"{checked} margins within the certificate, used I {used} <= {I_cert}; "
                                    f"{inst} runs, {wrong} wrong" if not bad else "; ".join(bad[:4])),
                              family="random", alphabet=a, description="certificate vs measurement"))
    return out


def compare_sim(sim) -> tuple[int, list[str], int]:
    """(comparisons, excesses, certified I) of one built simulator against the sim
    certificate at its context n = n_pos: each position head's and firstK's
    ``score_int_bits`` <= the certified need, each gap >= the certified lambda,
    the simulator's I <= the certified I(n_pos)."""
    con = sim_construction(sim.params())
    n = sim.n_pos
    obl = {o.name: o for o in con.obligations}
    margins = sim.model.spec.notes["margins"]
    checked, bad = 0, []
    lam = obl["heads.gap"].values(con, n)[1]
    for head, m in margins.items():
        need = obl["firstK.range" if head == "firstK" else "position.range"].values(con, n)[0]
        checked += 1
        if m["score_int_bits"] > need:
            bad.append(f"{head}.score_int_bits = {m['score_int_bits']} > certified {need}")
        for k in ("gap non-match", "gap between matches"):
            if k in m:
                checked += 1
                if m[k] < lam:
                    bad.append(f"{head}.{k} = {m[k]} < certified {lam}")
    I_cert = con.fmt(n)[0]
    checked += 1
    if sim.fmt.int_bits > I_cert:
        bad.append(f"simulator I = {sim.fmt.int_bits} > certified I({n}) = {I_cert}")
    return checked, bad, I_cert


@register("declarations", "certificate vs measurement (sim)")
def check_certificate_sim(profile: str, seed: int) -> list[Record]:
    out = []
    for sim in sim_simulators(seed):
        t0 = time.perf_counter()
        checked, bad, I_cert = compare_sim(sim)
        out.append(Record("declarations", f"rnnsim-transformer[{sim.rnn.spec.name}]", NO_TASK, sim.n_pos,
                          checked, len(bad), None, sim.fmt.total_bits,
                          seconds=max(round(time.perf_counter() - t0, 3), 0.001),
                          note=(f"{checked} margins within the certificate at context {sim.n_pos}; "
                                f"I {sim.fmt.int_bits} <= certified {I_cert}" if not bad else "; ".join(bad[:4])),
                          family="registry", alphabet=sim.rnn.vocab.max_number + 1,
                          description="certificate vs measurement"))
    return out


CATALOGUE_NS = {"quick": (4, 16), "full": (4, 16, 64, 256)}


def compare_entry(entry, n: int, seed: int) -> tuple[str | None, int, list[str], int]:
    """(the certificate whose format the built model has, comparisons, excesses,
    used int bits) for one construction record at n: the model the record builds
    must sit in the format of one of its certificates at n, and what it measures
    while reading a seeded example prompt (every computed value, every weight),
    and every head's build-time score bound, must stay within that format's I."""
    built = entry.build(n)
    model = built.model
    fmt = (model.fmt.int_bits, model.fmt.frac_bits)
    cons = [c.con for c in entry.certificate_list()]
    cons = [c for c in cons if n >= c.n_min and c.fmt(n) == fmt]
    if not cons:
        return None, 1, [f"the built format Q{fmt[0]}.{fmt[1]} is none of its certificates' formats at n = {n}"], 0
    I_cert = cons[0].fmt(n)[0]
    bad: list[str] = []
    checked = 0
    for head, m in model.spec.notes.get("margins", {}).items():
        if "score_int_bits" in m:
            checked += 1
            if m["score_int_bits"] > I_cert:
                bad.append(f"{head}.score_int_bits = {m['score_int_bits']} > certified I = {I_cert}")
    prompt = entry.example(n, np.random.default_rng([seed, n, 15]))
    model.predict(prompt)
    used = model.resources.used_int_bits
    checked += 1
    if used > I_cert:
        bad.append(f"used int bits {used} > certified I = {I_cert}")
    return cons[0].name, checked, bad, used


@register("declarations", "certificate vs measurement (every catalogued construction)")
def check_certificate_catalogue(profile: str, seed: int) -> list[Record]:
    """One record per construction record that has a certificate (T4.6-up, T4.7-up,
    T5-RAG, T5.6, T5-hyb-P, T4.1): at each sampled n the built model's format is
    a certified one and its measured magnitudes stay within it (zero excess)."""
    out = []
    for entry in catalog.records():
        certs = entry.certificate_list()
        if not certs:
            continue
        # a construction whose declared format outgrows int64 below a sampled n
        # refuses to be built there (n_max, `rnngap certify`): it is checked at
        # its n_max instead, and the note says so
        n_max = max((n_max_of(c.con) or 0) for c in certs)
        ns = sorted({min(n, n_max) for n in CATALOGUE_NS[profile]})
        for n in ns:
            t0 = time.perf_counter()
            cert, checked, bad, used = compare_entry(entry, n, seed)
            out.append(Record("declarations", f"{entry.name} vs {cert or 'no certificate'}",
                              catalog.canonical_task(entry.key.task), n, checked, len(bad),
                              seconds=max(round(time.perf_counter() - t0, 3), 0.001),
                              note=(f"format of certificate {cert}; {checked - 1} head score bounds and the run's "
                                    f"used I = {used} within it" if not bad else "; ".join(bad[:4]))
                              + (f"; n_max = {n_max} (int64), sampled n above it checked at n_max"
                                 if n == n_max < max(CATALOGUE_NS[profile]) else ""),
                              family="catalogue example", alphabet=None, description="certificate vs measurement"))
    return out
