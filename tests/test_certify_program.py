"""The compiled RNN computes its program (checks/certify/program.py): every RAG model's facts hold,
and one-term changes to the compiler or to the built weights fail the fact they touch."""
import numpy as np
import pytest

from rnngap.checks.catalog.records import RECORDS, by_name, certificates
from rnngap.checks.certify.program import PROGRAM_METHOD, program_facts
from rnngap.checks.certify.run import certify
from rnngap.constructions.build import rnn_program as RP
from rnngap.constructions.build.gadgets import Neuron
from rnngap.constructions.machine.vocab import Vocab


def _failed(facts):
    return sorted(f["fact"] for f in facts if f["answer"] not in ("unsat", "holds"))


def _every_op_program() -> RP.Program:
    """A program with every operation: a counter, a delay line, a latch, equal, at_least,
    all_of, select and an emit with a constant and a signal rule."""
    p = RP.Program("every-op", Vocab(6))
    seen = p.counter("seen", p.is_number, 0, 16)
    prev = p.delay_line("prev", p.token, 2)
    big = p.at_least("big", p.token, 3)
    same = p.equal("same", p.token, prev[0])
    both = p.all_of("both", [big, same])
    first = p.latch("first", p.equal("at1", seen, 1), p.token)
    pick = p.select("pick", both, prev[1], first)
    p.emit([(both, pick), (1 - both, 1)])
    return p


def _compiled(p=None):
    p = p or _every_op_program()
    return p, p.compile()


def test_every_op_program_is_certified():
    p, m = _compiled()
    facts = program_facts(p, m)
    assert _failed(facts) == []
    names = {f["fact"] for f in facts}
    assert {"state.seen", "state.prev", "state.first", "mlp.big", "mlp.same", "mlp.both", "mlp.pick",
            "embedding.features", "schedule", "readout", "ranges"} <= names
    assert any(n.startswith("mlp.out[") for n in names)


@pytest.mark.parametrize("name", [r.name for r in RECORDS if r.key.architecture.startswith("rag")])
def test_every_rag_program_is_certified(name):
    """Each RAG model of the catalogue (the four Turing machines' too) at its smallest sizes."""
    cert = certificates()[f"{name}[program]"]
    for n in cert.program_sizes[:2]:
        built = by_name(name).build(n).construction
        assert _failed(program_facts(built.program, built.model)) == [], (name, n)


def test_certify_rows():
    res = certify(["index-rag[program]", "tm-increment-rag[program]"], workers=1)
    assert [r.construction for r in res] == ["index-rag[program]", "tm-increment-rag[program]"]
    for r in res:
        assert r.certified and r.source == "built-model" and r.method == PROGRAM_METHOD
        assert r.sizes == list(certificates()[r.construction].program_sizes)
        assert r.record()["sizes"] == r.sizes and "Not proved here" in r.note


# --- one-term changes to the compiler ----------------------------------------------------

def _with_compiler_change(monkeypatch, kind, change):
    real = RP._mlp_op_neurons

    def changed(op, one):
        neurons = real(op, one)
        return change(neurons) if op.kind == kind else neurons
    monkeypatch.setattr(RP, "_mlp_op_neurons", changed)


@pytest.mark.parametrize("kind, fact", [("at_least", "mlp.big"), ("equal", "mlp.same"), ("all_of", "mlp.both"),
                                        ("select", "mlp.pick")])
def test_compiler_mutant_bias_fails(monkeypatch, kind, fact):
    """The first neuron of an operation's gadget with its bias one higher."""
    def change(neurons):
        n0 = neurons[0]
        return [Neuron(n0.inp, n0.bias + 1, n0.out)] + neurons[1:]
    _with_compiler_change(monkeypatch, kind, change)
    p, m = _compiled()
    assert fact in _failed(program_facts(p, m))


def test_compiler_mutant_wrong_output_weight_fails(monkeypatch):
    """An emit rule's neuron writing twice its value."""
    def change(neurons):
        n0 = neurons[0]
        return [Neuron(n0.inp, n0.bias, {k: 2 * v for k, v in n0.out.items()})] + neurons[1:]
    _with_compiler_change(monkeypatch, "emit", change)
    p, m = _compiled()
    assert any(f.startswith("mlp.out[") for f in _failed(program_facts(p, m)))


def test_compiler_mutant_counter_step_fails(monkeypatch):
    """A counter compiled with its self-loop 2 instead of 1."""
    real = RP._layer_of

    def changed(p, l):
        state, A, B, C, neurons = real(p, l)
        if ("seen", "seen") in A:
            A = {**A, ("seen", "seen"): 2}
        return state, A, B, C, neurons
    monkeypatch.setattr(RP, "_layer_of", changed)
    p, m = _compiled()
    assert "state.seen" in _failed(program_facts(p, m))


def test_compiler_mutant_delay_fails(monkeypatch):
    """A delay line whose second slot copies the source, not the first slot."""
    real = RP._layer_of

    def changed(p, l):
        state, A, B, C, neurons = real(p, l)
        if ("prev@-2", "prev@-1") in A:
            A = {k: v for k, v in A.items() if k != ("prev@-2", "prev@-1")}
            B = {**B, ("prev@-2", "tok"): 1}
        return state, A, B, C, neurons
    monkeypatch.setattr(RP, "_layer_of", changed)
    p, m = _compiled()
    assert "state.prev" in _failed(program_facts(p, m))


# --- one-term changes to the built weights -----------------------------------------------

def _layer_with(m, label):
    d = list(m.spec.labels).index(label)
    for L in m.spec.rnn_layers:
        if any(w != 0 for w in L.W2[d]):
            return L, d
    raise AssertionError(label)


def test_weight_mutants_fail():
    p, m = _compiled()
    L, d = _layer_with(m, "big")
    k = int(np.flatnonzero([w != 0 for w in L.W2[d]])[0])
    L.W2[d, k] = L.W2[d, k] * 2
    assert "mlp.big" in _failed(program_facts(p, m))

    p, m = _compiled()
    m.spec.readout[0] = (m.spec.readout[0][0], m.spec.readout[0][1], m.spec.readout[0][2], 3)
    assert "readout" in _failed(program_facts(p, m))

    p, m = _compiled()
    kind, param, coef = m.spec.embedding[list(m.spec.labels).index("is_number")]
    m.spec.embedding[list(m.spec.labels).index("is_number")] = (kind, param, 2)
    assert "embedding.features" in _failed(program_facts(p, m))


def test_schedule_mutant_fails():
    """An MLP that reads an output of its own layer's MLP (not yet written when it reads)."""
    p, m = _compiled()
    L, d_big = _layer_with(m, "big")
    k_same = int(np.flatnonzero([w != 0 for w in L.W2[list(m.spec.labels).index("same")]])[0]) \
        if any(w != 0 for w in L.W2[list(m.spec.labels).index("same")]) else None
    assert k_same is not None, "big and same are built in one layer"
    L.W1[k_same, d_big] = 1
    assert "schedule" in _failed(program_facts(p, m))


def test_too_few_integer_bits_fail_the_ranges():
    p, m = _compiled()
    fmt = m.fmt
    small = type(fmt)(int_bits=2, frac_bits=0, mode=fmt.mode, storage=fmt.storage)
    m.fmt = small
    assert "ranges" in _failed(program_facts(p, m))
