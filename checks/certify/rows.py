"""The per-layer rows of ``rnngap certify``: each CoT model's layers proved from its built weights, then its composition.

Three rows: the simulator's (``rnnsim-transformer[layers]``, over the
simulators the registry builds), the IsTree Transformer's
(``istree-transformer[layers]``) and the IsTree hybrid's
(``istree-hybrid[layers]``), each at its sizes (N, M). A row's layer facts come
from its layer module (:mod:`.simulator`, :mod:`.istree_transformer`,
:mod:`.istree_hybrid`), its composition from the chain module beside it. The
run splits a row's sizes between workers by the row's name (:data:`LAYER_ROWS`)
and :func:`merge` joins the parts. Details: docs/internals/certify.md.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable

from rnngap.constructions.models.hybrid import istree_hybrid as build_istree_hybrid
from rnngap.constructions.models.istree import istree_transformer as build_istree_transformer

from . import istree_hybrid, istree_hybrid_chain, istree_transformer, istree_transformer_chain
from . import simulator, simulator_chain
from .result import Result
from .sizes import z3


@dataclass(frozen=True)
class LayerRow:
    """A per-layer row: its layer module (CLAIM, NAME, NOTE, COVERS, NS, NS_FULL,
    EVERY, CHAIN_LABEL, ``label`` and ``facts``), the builder of its models at
    (N, M), its composition's facts (for every N) and how its table names a size."""
    layers: object
    build: Callable
    chain_facts: Callable
    pair: str


LAYER_ROWS: dict[str, LayerRow] = {
    istree_transformer.NAME: LayerRow(istree_transformer, build_istree_transformer,
                                      istree_transformer_chain.chain_facts, "(N, M)"),
    istree_hybrid.NAME: LayerRow(istree_hybrid, build_istree_hybrid, istree_hybrid_chain.chain_facts,
                                 "(N, m_max)"),
}
"""The per-layer rows over sizes, by name: the IsTree Transformer's (T4.7-up) and
the IsTree hybrid's (T5.6)."""

SIM_ROW = simulator.NAME
"""The simulator's per-layer row (its sizes are the simulators the registry builds)."""

SIM_COVERS = ["token-type-mlp", "heads", "block-role-mlp", "input-mlp", "rnn-layer-mlps", "argmax-mlps",
              "next-code-mlp", "readout", "composition", "exact-products"]


def _unproved(claim: str, name: str) -> Result:
    return Result(claim, name, 0, 1, None, "smt-unavailable", False, 0.001, source="built-model",
                  failures=[{"obligation": "z3", "first_n": None, "need": "-", "have": "-",
                             "why": "z3 absent: NOT proved"}])


def _collect(runs) -> tuple[list, list, list, list]:
    """The records, failures and proof steps of ``runs`` (each (N, a function
    giving (the model's label, its facts)), run when reached), and the N of each."""
    records, failures, steps, Ns = [], [], [], []
    for N, run in runs:
        Ns.append(N)
        lab, got = run()
        for f in got:
            fact = f"{lab}: {f['fact']}"
            records.append({**f, "fact": fact})
            steps.append({"layer": f"{lab}, {f['layer']}", "lemma": f["fact"], "statement": f["statement"],
                          "method": f["method"], "answer": f["answer"]})
            if f["answer"] not in ("unsat", "holds"):
                failures.append({"obligation": fact, "first_n": None, "need": "-", "have": "-",
                                 "why": f"z3 answered {f['answer']}" + (f": {f['counterexample']}"
                                                                       if f.get("counterexample") else "")})
    return records, failures, steps, Ns


def simulator_row(sims) -> Result:
    """One certificate over the layers of every simulator in ``sims``, each with
    its composition over the CoT and its exact products."""
    t0 = time.perf_counter()
    if z3 is None:
        return _unproved("sim", SIM_ROW)
    S, SC = simulator, simulator_chain

    def runs():
        for sim in sims:
            yield 1, lambda sim=sim: (sim.model.name, (
                S.type_facts(sim) + S.head_facts(sim) + S.role_facts(sim) + S.input_facts(sim)
                + S.step_facts(sim) + S.argmax_facts(sim) + S.next_code_facts(sim) + S.readout_facts(sim)
                + S.sequence_facts(sim) + SC.chain_facts(sim) + SC.exact_facts(sim)))
    records, failures, steps, _ = _collect(runs())
    return Result("sim", SIM_ROW, len(records), 1, None, "smt", not failures,
                  max(round(time.perf_counter() - t0, 3), 0.001), failures=failures, facts=records,
                  note=S.NOTE, covers=list(SIM_COVERS), source="built-model", steps=steps)


def layer_row(name: str, sizes: tuple | None = None, chain: bool = False) -> Result:
    """Row ``name``'s certificate (:data:`LAYER_ROWS`) over its models built at
    each (N, M) in ``sizes`` (its NS when None), each built and proved when
    reached; with ``chain`` also its composition, for every N (``covers`` then
    names it)."""
    row = LAYER_ROWS[name]
    L = row.layers
    sizes = L.NS if sizes is None else tuple(sizes)
    if not sizes:
        raise ValueError(f"{L.NAME}: no sizes to prove")
    t0 = time.perf_counter()
    if z3 is None:
        return _unproved(L.CLAIM, L.NAME)

    def runs():
        for N, m in sizes:
            def run(N=N, m=m):
                model = row.build(N, m)
                return L.label(model), L.facts(model, N)
            yield N, run
        if chain:
            yield sizes[0][0], lambda: (L.CHAIN_LABEL, row.chain_facts())
    covers = tuple(L.COVERS) + (("composition",) if chain else ())
    records, failures, steps, Ns = _collect(runs())
    return Result(L.CLAIM, L.NAME, len(records), min(Ns), max(Ns), "smt", not failures,
                  max(round(time.perf_counter() - t0, 3), 0.001), failures=failures, facts=records,
                  note=L.NOTE, covers=list(covers), source="built-model", steps=steps)


def _sizes_of(rec: dict) -> tuple[int, int]:
    """(N, the edge bound) of a fact's model, from its name: istree-hybrid(N=6,
    m_max=5), istree-transformer(N=7, M=6)."""
    m = re.search(r"\(N=(\d+), \w+=(\d+)\)", rec["fact"])
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def sizes_text(res: Result) -> str:
    """The sizes a per-layer certificate proved, as the table shows them."""
    row = LAYER_ROWS[res.construction]
    got = sorted({_sizes_of(f) for f in res.facts} - {(0, 0)})
    if got == sorted(row.layers.NS_FULL):
        return row.layers.EVERY
    return f"{row.pair} in " + ", ".join(f"({a}, {b})" for a, b in got) if got else "-"


def merge(parts: list[Result]) -> Result:
    """One certificate of several per-layer results of one row (chunks of its
    sizes, proved on different workers), its records in the order of the sizes."""
    if len(parts) == 1:
        return parts[0]
    if any(p.method != "smt" for p in parts):
        return next(p for p in parts if p.method != "smt")
    recs = sorted([(_sizes_of(f), i, f, st) for p in parts for i, (f, st) in enumerate(zip(p.facts, p.steps))],
                  key=lambda r: (r[0], r[1]))
    failures = [fl for p in parts for fl in p.failures]
    first = parts[0]
    covers = [c for p in parts for c in p.covers]
    covers = [c for i, c in enumerate(covers) if c not in covers[:i]]
    return Result(first.claim, first.construction, len(recs), min(p.n_min for p in parts),
                  max(p.n_max for p in parts), "smt", not failures, round(sum(p.seconds for p in parts), 3),
                  failures=failures, facts=[r[2] for r in recs], note=first.note, covers=covers,
                  source="built-model", steps=[r[3] for r in recs])
