"""The compiled RNN computes its program: every operation's weights read back from the built model and proved.

constructions/build/rnn_program.py compiles a :class:`Program` into linear-RNN
weights. :func:`program_facts` reads the BUILT model and proves with z3, over
the weights as built: the embedding holds the program's token features; each
counter's and delay line's A, B, C rows compute it for every real value; the
neurons that write each MLP signal compute its operation (equal, at_least,
all_of, select, emit rule by rule) on every integer value of their inputs'
declared intervals and write nothing else; each direction has one writer, read
only after it is written; the readout's argmax is the emitted code's token; and
every value fits I. The hypotheses (the counters stay in their intervals, the
emit rules are exclusive) are checked by ``Program.run_python`` on every run;
that the program's token is the task's answer is not proved here. The facts,
hypotheses and mutants: docs/certify.md, "Compiled programs".
"""
from __future__ import annotations

import time
from fractions import Fraction

from rnngap.constructions.build.gadgets import MarginError
from rnngap.constructions.build.rnn_program import Program, Signal
from rnngap.constructions.models.bounds import INT
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.vocab import META_NAMES, SPECIAL_NAMES

from .result import Result
from .layer_facts import smt_fact, z3_value
from .sizes import z3

TIMEOUT_MS = 20000
PROGRAM_METHOD = "program-at-sizes"
"""The ``method`` of a certificate this module proves (``Result.sizes`` names its sizes)."""
COVERS = ["embedding", "rnn-layers", "mlps", "schedule", "readout", "ranges"]


def _fact(layer: str, fact: str, statement: str, answer: str, method: str = "smt", query: str = "",
          counterexample: str = "") -> dict:
    d = {"layer": layer, "fact": fact, "statement": statement, "method": method, "answer": answer}
    if query:
        d["query"] = query
    if counterexample:
        d["counterexample"] = counterexample
    return d


def _smt(layer: str, fact: str, statement: str, hyps: list, goal) -> dict:
    """layer_facts.smt_fact (hypotheses with no model are refused as vacuous), in this
    module's record order."""
    d = smt_fact(layer, fact, statement, hyps, goal)
    return _fact(layer, fact, statement, d["answer"], "smt", d.get("query", ""), d.get("counterexample", ""))


_q = z3_value


def _dot(row, xs: list):
    """row . xs (built weights, z3 terms), skipping zero weights."""
    total = z3.RealVal(0)
    for k, w in enumerate(row):
        if w != 0:
            total = total + _q(w) * xs[k]
    return total


def _relu(e):
    return z3.If(e > 0, e, z3.RealVal(0))


def _lin(lin, env: dict):
    """A program Lin as a z3 term over the directions' variables."""
    total = z3.RealVal(lin.const)
    for s, a in lin.terms.items():
        total = total + a * env[s.name]
    return total


class _Reader:
    """The built model's weights, by direction name, and one variable per direction."""

    def __init__(self, program: Program, model):
        self.p, self.spec = program, model.spec
        self.labels = list(self.spec.labels)
        self.index = {lab: d for d, lab in enumerate(self.labels)}
        self.x = [z3.Real(f"x.{lab}") for lab in self.labels]
        self.env = dict(zip(self.labels, self.x))

    def interval(self, lab: str) -> list:
        """Integer-valued in its declared interval (an embedded or program signal)."""
        s: Signal = self.p.signals[lab]
        v = self.env[lab]
        return [v >= s.lo, v <= s.hi, z3.IsInt(v)]


def _embedding_facts(r: _Reader) -> list[dict]:
    bad = []
    for d, (kind, param, coef) in enumerate(r.spec.embedding):
        lab = r.labels[d]
        if lab in r.p.embedded:
            want = r.p.embedded[lab]
            if (kind, param) != want or Fraction(coef) != 1:
                bad.append(f"{lab}: feature ({K.FEATURE_NAMES.get(kind, kind)}, {param}, {coef}), "
                           f"the program's ({K.FEATURE_NAMES.get(want[0], want[0])}, {want[1]}, 1)")
        elif kind != K.F_ZERO and coef != 0:
            bad.append(f"{lab}: embedded ({K.FEATURE_NAMES.get(kind, kind)}) but not a program feature")
    missing = [lab for lab in r.p.embedded if lab not in r.index]
    bad += [f"{lab}: no direction" for lab in missing]
    return [_fact("embedding", "embedding.features", "each embedded signal's direction holds the program's "
                  "token feature with coefficient 1; no other direction is embedded",
                  "holds" if not bad else "fails", "exact", counterexample="; ".join(bad[:3]))]


def _state_facts(r: _Reader, l: int, L) -> list[dict]:
    """Each state op of layer l, its A, B, C rows read back and proved."""
    out = []
    states = list(L.state_labels)
    D = len(r.labels)
    h_prev = [z3.Real(f"h.{st}@-1") for st in states]
    h_now = [z3.Real(f"h.{st}") for st in states]
    tag = f"rnn layer {l} state"

    def stray(s: int, target: str | None) -> list[str]:
        """Directions other than ``target`` that C writes state s into."""
        return [r.labels[d] for d in range(D) if r.labels[d] != target and L.C[d, s] != 0]

    for op in (o for o in r.p.ops if o.layer == l and o.kind in ("counter", "delay")):
        if op.kind == "counter":
            c = op.out[0].name
            name = f"state.{c}"
            if c not in states or c not in r.index:
                out.append(_fact(tag, name, "the counter has a state and a direction", "fails", "exact"))
                continue
            s = states.index(c)
            if stray(s, c):
                out.append(_fact(tag, name, f"C writes the counter to {c} alone", "fails", "exact",
                                 counterexample=f"also into {stray(s, c)[0]}"))
                continue
            step = _dot(L.A[s], h_prev) + _dot(L.B[s], r.x) == h_prev[s] + _lin(op.args["inc"], r.env)
            out.append(_smt(tag, name, f"h_t = h_(t-1) + ({_lin_text(op.args['inc'])}) and {c} = h_t (the built "
                            f"A, B rows and C's row of {c}; C writes the state nowhere else), for every real state "
                            f"and residual", [], z3.And(step, _dot(L.C[r.index[c]], h_now) == h_now[s])))
            continue
        line, source = op.args["name"], op.args["source"].name
        name = f"state.{line}"
        slots = [line + "#0"] + [o.name for o in op.out]
        if any(n not in states for n in slots) or any(o.name not in r.index for o in op.out):
            out.append(_fact(tag, name, "the delay line has its slots and directions", "fails", "exact"))
            continue
        idx = [states.index(n) for n in slots]
        wrong = stray(idx[0], None) + [x for k in range(1, len(slots)) for x in stray(idx[k], slots[k])]
        if wrong:
            out.append(_fact(tag, name, "C writes slot k to its own direction alone (slot 0 nowhere)", "fails",
                             "exact", counterexample=f"a slot also writes {wrong[0]}"))
            continue
        goals = [_dot(L.A[idx[0]], h_prev) + _dot(L.B[idx[0]], r.x) == r.env[source]]
        for k in range(1, len(slots)):
            goals.append(_dot(L.A[idx[k]], h_prev) + _dot(L.B[idx[k]], r.x) == h_prev[idx[k - 1]])
            goals.append(_dot(L.C[r.index[slots[k]]], h_now) == h_now[idx[k]])
        out.append(_smt(tag, name, f"slot 0 = {source}(t), slot k = slot k-1 at t - 1 and {line}@-k = slot k (the "
                        f"built A, B, C rows, every real value): {line}@-k holds {source}(t - k), 0 before the "
                        f"start (induction on t from the zero state)", [], z3.And(goals)))
    return out


def _semantics(op, env: dict):
    k = op.kind
    if k == "equal":
        return z3.If(_lin(op.args["d"], env) == 0, z3.RealVal(1), z3.RealVal(0)), "[d = 0]"
    if k == "at_least":
        return z3.If(_lin(op.args["d"], env) >= 0, z3.RealVal(1), z3.RealVal(0)), "[d >= 0]"
    if k == "all_of":
        return z3.If(_lin(op.args["d"], env) >= 1, z3.RealVal(1), z3.RealVal(0)), "[d >= 1]"
    if k == "select":
        a = op.args
        return (z3.If(_lin(a["c"], env) == 1, _lin(a["x"], env), _lin(a["y"], env)),
                "x if c else y")
    if k == "emit":
        total = z3.RealVal(0)
        for c, v in op.args["rules"]:
            total = total + z3.If(_lin(c, env) == 1, _lin(v, env), z3.RealVal(0))
        return total, "the sum of the fired rules' values"
    raise ValueError(f"unknown operation {k!r}")


def _mlp_facts(r: _Reader, l: int, L) -> list[dict]:
    """Each MLP op of layer l: the neurons writing its output compute it, on every
    integer value of what they read within its declared interval."""
    out = []
    tag = f"rnn layer {l} mlp"
    D, M = len(r.labels), L.W1.shape[0]
    for op in (o for o in r.p.ops if o.layer == l and o.kind not in ("counter", "delay")):
        s = op.out[0].name
        d = r.index.get(s)
        if d is None:
            out.append(_fact(tag, f"mlp.{s}", "the operation's output has a direction", "fails", "exact"))
            continue
        ks = [k for k in range(M) if L.W2[d, k] != 0]
        others = [(r.labels[e], k) for k in ks for e in range(D) if e != d and L.W2[e, k] != 0]
        reads = sorted({r.labels[c] for k in ks for c in range(D) if L.W1[k, c] != 0})
        hyps = [h for lab in reads for h in r.interval(lab)]
        value = sum((_q(L.W2[d, k]) * _relu(_dot(L.W1[k], r.x) + _q(L.b1[k])) for k in ks), z3.RealVal(0))
        value = value + _q(L.b2[d])
        want, text = _semantics(op, r.env)
        if others:
            out.append(_fact(tag, f"mlp.{s}", f"the neurons of {s} write only {s}", "fails", "exact",
                             counterexample=f"neuron {others[0][1]} also writes {others[0][0]}"))
            continue
        where = (f"(the built W1, b1, W2, b2 of its {len(ks)} neurons) for every integer value of "
                 f"{', '.join(reads) or 'nothing'} in its declared interval")
        if op.kind != "emit":
            out.append(_smt(tag, f"mlp.{s}", f"{s} = {text} ({op.kind}) {where}", hyps, value == want))
            continue
        # the emit: one case per rule (it fires, the others not) and one with none firing. The
        # program promises its rules exclusive where the output is read (run_python checks it).
        conds = [_lin(c, r.env) for c, _ in op.args["rules"]]
        for i, (c, v) in enumerate(op.args["rules"] + [(None, None)]):
            fire = [z3.And(*[cj == (1 if j == i else 0) for j, cj in enumerate(conds)])]
            goal = value == (_lin(v, r.env) if v is not None else z3.RealVal(0))
            case = f"rule {i} ({_lin_text(c)} = 1, the others 0): {s} = {_lin_text(v)}" if v is not None else \
                f"no rule fires: {s} = 0"
            name = f"mlp.{s}[{i if v is not None else 'none'}]"
            fact = _smt(tag, name, f"{case} {where}", hyps + fire, goal)
            if fact["answer"] == "vacuous":      # e.g. "no rule fires" when the rules' conditions cover every value
                fact = _smt(tag, name, f"{case}: no value of {', '.join(reads)} in its declared interval reaches "
                            f"this case", hyps, z3.Not(z3.And(*fire)))
            out.append(fact)
    return out


def _schedule_fact(r: _Reader) -> dict:
    """One writer per direction, every reader after it (stages: embedding 0, layer
    l's states 2l + 1, its MLP 2l + 2; a state reads stage < 2l + 1, an MLP < 2l + 2)."""
    D = len(r.labels)
    writers: dict[int, list[int]] = {d: [] for d in range(D)}
    for d, (kind, _, coef) in enumerate(r.spec.embedding):
        if kind != K.F_ZERO and coef != 0:
            writers[d].append(0)
    readers: list[tuple[int, int, str]] = []
    for l, L in enumerate(r.spec.rnn_layers):
        for d in range(D):
            if any(c != 0 for c in L.C[d]):
                writers[d].append(2 * l + 1)
            if any(w != 0 for w in L.W2[d]) or L.b2[d] != 0:
                writers[d].append(2 * l + 2)
            if any(b != 0 for b in L.B[:, d]):
                readers.append((d, 2 * l + 1, f"layer {l}'s states"))
            if any(w != 0 for w in L.W1[:, d]):
                readers.append((d, 2 * l + 2, f"layer {l}'s MLP"))
    for dim, *_ in r.spec.readout:
        readers.append((dim, 2 * len(r.spec.rnn_layers) + 1, "the readout"))
    bad = [f"{r.labels[d]}: {len(w)} writers" for d, w in writers.items() if len(w) > 1]
    for d, stage, who in readers:
        if not writers[d]:
            bad.append(f"{r.labels[d]} is read by {who} and written by nothing")
        elif writers[d][0] >= stage:
            bad.append(f"{r.labels[d]} is read by {who} before it is written")
    for lab in r.p.signals:
        if lab not in r.index:
            bad.append(f"signal {lab} has no direction")
    return _fact("schedule", "schedule", "every direction has one writer and every reader comes after it "
                 "(a state reads the residual before its layer, an MLP after its layer's states, the readout "
                 "the last layer's output)", "holds" if not bad else "fails", "exact",
                 counterexample="; ".join(bad[:3]))


def _in_vocab(vocab, c):
    specials = sorted(set(SPECIAL_NAMES) | (set(META_NAMES) if vocab.meta else set()))
    return z3.Or(z3.And(c >= 1, c <= vocab.max_number + 1), z3.Or([c == -s for s in specials]))


def _readout_fact(r: _Reader) -> dict:
    """For every value o of the emitted signal that is a vocabulary token's code, the
    argmax over the vocabulary is that token (logits read off the built readout)."""
    emit = r.p._emit
    if emit is None:
        return _fact("readout", "readout", "the program emits", "fails", "exact")
    o, kc = z3.Int("o"), z3.Int("cand")
    feats = {K.F_ONE: lambda c: z3.IntVal(1), K.F_TOK: lambda c: c, K.F_TOK_SQ: lambda c: c * c}
    if any(kind not in feats for _, kind, _, _ in r.spec.readout):
        return _fact("readout", "readout", "the readout's features are 1, tau, tau^2", "fails", "exact")

    def logit(c):
        x = {r.labels[d]: (z3.ToReal(o) if r.labels[d] == emit.out[0].name else
                           (z3.RealVal(1) if r.labels[d] == Program.ONE else None)) for d, *_ in r.spec.readout}
        total = z3.RealVal(0)
        for dim, kind, _, coef in r.spec.readout:
            xv = x[r.labels[dim]]
            if xv is None:
                return None
            total = total + _q(coef) * z3.ToReal(feats[kind](c)) * xv
        return total
    lo, lk = logit(o), logit(kc)
    if lo is None:
        return _fact("readout", "readout", "the readout reads the emitted signal and one only", "fails", "exact")
    return _smt("readout", "readout", f"for every value o of {emit.out[0].name} that is a token's code, "
                "logit(o) beats every other token's (so the argmax, ties to the smallest id, is that token)",
                [_in_vocab(r.spec.vocab, o), _in_vocab(r.spec.vocab, kc), kc != o], lo > lk)


def _ranges_fact(r: _Reader, int_bits: int) -> dict:
    """With every direction in its interval: |every value and partial sum| < 2^I
    (the compiler's interval arithmetic, ``Program.int_bits_of``, on the built rows)."""
    try:
        need, why = r.p.int_bits_of(r.spec), ""
    except MarginError as e:
        need, why = None, str(e)
    ok = need is not None and need <= int_bits
    return _fact("ranges", "ranges", f"with every signal in its declared interval, every value and partial sum "
                 f"of the built rows is below 2^I = 2^{int_bits} (interval arithmetic: {need} bits needed)",
                 "holds" if ok else "fails", "exact", counterexample=why)


def program_facts(program: Program, model) -> list[dict]:
    """Every fact of the compiled ``model`` against its ``program`` (module docstring)."""
    if z3 is None:
        return [_fact("z3", "z3", "z3 is not installed", "unknown", "none")]
    r = _Reader(program, model)
    facts = _embedding_facts(r)
    program._layers()                  # each operation's layer, as the compiler scheduled it
    for l, L in enumerate(model.spec.rnn_layers):
        facts += _state_facts(r, l, L) + _mlp_facts(r, l, L)
    ops = [o for o in program.ops if o.layer >= len(model.spec.rnn_layers)]
    facts += [_fact("schedule", f"layer.{o.out[0].name}", "the operation's layer exists", "fails", "exact")
              for o in ops]
    facts += [_schedule_fact(r), _readout_fact(r), _ranges_fact(r, model.fmt.int_bits)]
    return facts


def _lin_text(lin) -> str:
    parts = [f"{a} {s.name}" if a != 1 else s.name for s, a in lin.terms.items()]
    if lin.const:
        parts.append(str(lin.const))
    return " + ".join(parts) or "0"



def certify_program(cert) -> Result:
    """The certificate ``cert`` (its ``program_sizes``): at each size n the record's
    builder is run, and every fact of :func:`program_facts` proved of the model it
    built against the program it compiled."""
    t0 = time.perf_counter()
    con = cert.con
    records, steps, failures = [], [], []
    for n in cert.program_sizes:
        built = cert.build(n, con.alphabet(INT, n))
        label = built.model.name
        for f in program_facts(built.program, built.model):
            fact = f"{label}: {f['fact']}"
            records.append({**{k: v for k, v in f.items() if k != "query"}, "fact": fact})
            steps.append({"layer": f"{label}, {f['layer']}", "lemma": f["fact"], "statement": f["statement"],
                          "method": f["method"], "answer": f["answer"]})
            if f["answer"] not in ("unsat", "holds"):
                failures.append({"obligation": fact, "first_n": n, "need": "-", "have": "-",
                                 "why": f"{f['method']} answered {f['answer']}"
                                 + (f": {f['counterexample']}" if f.get("counterexample") else "")})
    sizes = list(cert.program_sizes)
    return Result(con.claim, con.name, len(records), min(sizes), max(sizes), PROGRAM_METHOD, not failures,
                  max(round(time.perf_counter() - t0, 3), 0.001), failures=failures, facts=records,
                  note=NOTE, covers=list(COVERS), source="built-model", steps=steps, params=cert.params,
                  sizes=sizes)


NOTE = ("the built linear RNN computes the program it was compiled from, at each size: every operation's "
        "weights read back and proved on its declared intervals, the schedule, the readout, the ranges. "
        "Hypotheses: the counters stay in their declared intervals and the emit rules are exclusive (both "
        "checked on every run). Not proved here: that the program's token is the task's answer")
