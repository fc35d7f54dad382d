"""Compile a small register / finite-control program into a linear RNN (docs/theory.md §2).

A linear RNN layer is h_t = A h_{t-1} + B x_t followed by a ReLU MLP, so a
register can only accumulate, and finite control comes from the MLPs and the fed
back CoT tokens. :class:`Program` is a small dataflow language over named integer
signals for that discipline: state operations (:meth:`Program.counter`,
:meth:`Program.delay_line`, :meth:`Program.latch`) and MLP operations
(:meth:`Program.equal`, :meth:`Program.at_least`, :meth:`Program.all_of`,
:meth:`Program.select`, :meth:`Program.emit`). Every weight is an integer, so
f = 0; :meth:`Program.required_int_bits` bounds the integer bits by interval
arithmetic. :meth:`Program.compile` schedules each operation into the lowest
layer its inputs allow; the size never depends on n. :meth:`run_python` is the
exact reference interpreter the compiled model must agree with.

Details (operations, scheduling, an example): docs/internals/build.md#rnn_program
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Mapping, Sequence, Union

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.formats import FixedFormat
from .gadgets import Builder, MarginError, Neuron, ResidualSpace, bits_for, equality_neurons, select_neurons
from .model import Model
from rnngap.constructions.machine.vocab import NUMBER_BASE, META_NAMES, SPECIAL_NAMES, Vocab, token_code


# ----------------------------------------------------------------------------
@dataclass(eq=False)
class Signal:
    """A named integer direction of the residual stream, lo <= value <= hi."""

    name: str
    lo: int
    hi: int
    stage: int
    is_flag: bool = False

    def lin(self) -> "Lin":
        return Lin({self: 1}, 0)

    def __add__(self, o): return self.lin() + o
    def __radd__(self, o): return self.lin() + o
    def __sub__(self, o): return self.lin() - o
    def __rsub__(self, o): return (-self.lin()) + o
    def __neg__(self): return -self.lin()
    def __mul__(self, k: int): return self.lin() * k
    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"Signal({self.name}, [{self.lo}, {self.hi}], stage {self.stage})"


class Lin:
    """An integer affine combination sum_k a_k s_k + c of signals."""

    def __init__(self, terms: Mapping[Signal, int], const: int = 0):
        self.terms = {s: int(a) for s, a in terms.items() if int(a) != 0}
        self.const = int(const)

    @staticmethod
    def of(x: "LinLike") -> "Lin":
        if isinstance(x, Lin):
            return x
        if isinstance(x, Signal):
            return x.lin()
        if isinstance(x, (int,)) or (hasattr(x, "__index__") and not isinstance(x, bool)):
            return Lin({}, int(x))
        raise TypeError(f"expected a Signal, Lin or int, got {type(x).__name__}")

    def __add__(self, o):
        o = Lin.of(o)
        t = dict(self.terms)
        for s, a in o.terms.items():
            t[s] = t.get(s, 0) + a
        return Lin(t, self.const + o.const)

    __radd__ = __add__

    def __neg__(self):
        return Lin({s: -a for s, a in self.terms.items()}, -self.const)

    def __sub__(self, o):
        return self + (-Lin.of(o))

    def __rsub__(self, o):
        return Lin.of(o) - self

    def __mul__(self, k: int):
        return Lin({s: a * int(k) for s, a in self.terms.items()}, self.const * int(k))

    __rmul__ = __mul__

    @property
    def lo(self) -> int:
        return self.const + sum(a * (s.lo if a > 0 else s.hi) for s, a in self.terms.items())

    @property
    def hi(self) -> int:
        return self.const + sum(a * (s.hi if a > 0 else s.lo) for s, a in self.terms.items())

    @property
    def partial_bound(self) -> int:
        """A bound on |any partial sum| of the kernel's dot product (terms, then the constant)."""
        return sum(abs(a) * max(abs(s.lo), abs(s.hi)) for s, a in self.terms.items()) + abs(self.const)

    @property
    def stage(self) -> int:
        return max((s.stage for s in self.terms), default=0)

    def combo(self, one: str) -> dict[str, int]:
        c = {s.name: a for s, a in self.terms.items()}
        if self.const:
            c[one] = c.get(one, 0) + self.const
        return c

    def value(self, env: Mapping[str, int]) -> int:
        return self.const + sum(a * env[s.name] for s, a in self.terms.items())


LinLike = Union[Signal, Lin, int]


class ProgramRangeError(MarginError, AssertionError):
    """:meth:`Program.run_python` saw a signal leave its declared interval (the
    interval bounds, hence the bits, would be wrong) or a write-once latch written
    twice. A MarginError; also an AssertionError, as the interpreter's checks were."""


@dataclass
class _Op:
    kind: str                 # counter | delay | equal | at_least | all_of | select | emit
    out: list[Signal]
    args: dict = field(default_factory=dict)
    layer: int = -1


# ----------------------------------------------------------------------------
class Program:
    """A dataflow program over integer signals; see the module docstring."""

    ONE = "one"

    def __init__(self, name: str, vocab: Vocab, claim: str = ""):
        self.name, self.vocab, self.claim = name, vocab, claim
        self.ops: list[_Op] = []
        self.signals: dict[str, Signal] = {}
        self.embedded: dict[str, tuple[int, int]] = {}   # name -> (feature kind, param)
        taus = [token_code(t) for t in range(vocab.size) if vocab.contains(t)]
        self.tau_lo, self.tau_hi = min(taus), max(taus)
        self.one = self._embed(self.ONE, K.F_ONE, 0, 1, 1, flag=True)
        self.token = self._embed("tok", K.F_TOK, 0, self.tau_lo, self.tau_hi)
        self.is_number = self._embed("is_number", K.F_IS_NUM, 0, 0, 1, flag=True)
        self._emit: _Op | None = None

    # -- signals
    def _new(self, name: str, lo: int, hi: int, stage: int, flag: bool = False) -> Signal:
        if name in self.signals:
            raise ValueError(f"{self.name}: signal {name!r} exists already")
        if lo > hi:
            raise ValueError(f"{self.name}: signal {name!r} has empty range [{lo}, {hi}]")
        s = Signal(name, int(lo), int(hi), stage, flag or (lo >= 0 and hi <= 1))
        self.signals[name] = s
        return s

    def _embed(self, name: str, kind: int, param: int, lo: int, hi: int, flag: bool = False) -> Signal:
        self.embedded[name] = (kind, param)
        return self._new(name, lo, hi, 0, flag)

    def is_token(self, token: int, name: str | None = None) -> Signal:
        """[current token == token], an embedding feature."""
        if not self.vocab.contains(int(token)):
            raise ValueError(f"{self.name}: token {token} is not in the vocabulary")
        name = name or f"is[{_tname(token)}]"
        if name in self.signals:
            return self.signals[name]
        return self._embed(name, K.F_IS_TOKEN, int(token), 0, 1, flag=True)

    def const_flag(self, value: int = 1) -> Lin:
        """The constant value (a Lin); ``const_flag(1)`` is 'always'."""
        return Lin({self.one: value}, 0)

    # -- state operations
    def counter(self, name: str, inc: LinLike, lo: int, hi: int) -> Signal:
        """c_t = c_{t-1} + inc(t), c_0 = 0; the caller declares the range [lo, hi]
        (a function of n), which :meth:`run_python` checks."""
        inc = Lin.of(inc)
        if inc.const:
            inc = inc - inc.const + self.one * inc.const
        s = self._new(name, lo, hi, self._state_stage(inc))
        self.ops.append(_Op("counter", [s], {"inc": inc}))
        return s

    def delay_line(self, name: str, source: Signal, length: int) -> list[Signal]:
        """[source(t-1), ..., source(t-length)] (0 before the sequence start)."""
        if length < 1:
            raise ValueError(f"{self.name}: delay line {name!r} needs length >= 1")
        st = self._state_stage(source.lin())
        lo, hi = min(source.lo, 0), max(source.hi, 0)
        outs = [self._new(f"{name}@-{k}", lo, hi, st) for k in range(1, length + 1)]
        self.ops.append(_Op("delay", outs, {"source": source, "name": name}))
        return outs

    def latch(self, name: str, gate: LinLike, value: LinLike) -> Signal:
        """A write-once register: r_t = r_{t-1} + [gate_t] value_t. The gate must be
        a 0/1 flag; the program promises at most one write (checked by run_python)."""
        v = Lin.of(value)
        g = self._flag_of(gate, f"{name}.gate")
        w = self.select(f"{name}.write", g, v, 0)
        r = self.counter(name, w, min(v.lo, 0), max(v.hi, 0))
        self.ops[-1].args["write_once"] = g
        return r

    @staticmethod
    def _state_stage(inp: Lin) -> int:
        st = inp.stage
        layer = (st + 1) // 2
        return 2 * layer + 1

    @staticmethod
    def _mlp_stage(inp: Lin) -> int:
        st = inp.stage
        layer = max(0, st // 2)
        return 2 * layer + 2

    # -- MLP operations
    def _flag_of(self, x: LinLike, what: str) -> Signal:
        if isinstance(x, Signal) and x.is_flag:
            return x
        lx = Lin.of(x)
        if lx.lo < 0 or lx.hi > 1:
            raise ValueError(f"{self.name}: {what} must be a 0/1 flag, has range [{lx.lo}, {lx.hi}]")
        return self.all_of(f"{what}.flag", [lx]) if not isinstance(x, Signal) else x

    def equal(self, name: str, a: LinLike, b: LinLike = 0) -> Signal:
        """[a == b] for integer a, b (three ReLUs)."""
        d = Lin.of(a) - Lin.of(b)
        s = self._new(name, 0, 1, self._mlp_stage(d), True)
        self.ops.append(_Op("equal", [s], {"d": d}))
        return s

    def at_least(self, name: str, a: LinLike, k: int) -> Signal:
        """[a >= k] for integer a (two ReLUs)."""
        d = Lin.of(a) - int(k)
        s = self._new(name, 0, 1, self._mlp_stage(d), True)
        self.ops.append(_Op("at_least", [s], {"d": d}))
        return s

    def all_of(self, name: str, pos: Sequence[LinLike], neg: Sequence[LinLike] = ()) -> Signal:
        """[all of pos are 1 and all of neg are 0] for 0/1 flags: relu(sum pos - sum neg - (P - 1))."""
        pos = [Lin.of(p) for p in pos]
        neg = [Lin.of(q) for q in neg]
        for x in pos + neg:
            if x.lo < 0 or x.hi > 1:
                raise ValueError(f"{self.name}: all_of {name!r}: input with range [{x.lo}, {x.hi}] is not a flag")
        d = sum(pos, Lin({}, 0)) - sum(neg, Lin({}, 0)) - (len(pos) - 1)
        s = self._new(name, 0, 1, self._mlp_stage(d), True)
        self.ops.append(_Op("all_of", [s], {"d": d}))
        return s

    def select(self, name: str, cond: LinLike, x: LinLike, y: LinLike = 0) -> Signal:
        """x if cond else y, cond a 0/1 flag (four ReLUs, bound max |x|, |y|)."""
        c, lx, ly = Lin.of(cond), Lin.of(x), Lin.of(y)
        if c.lo < 0 or c.hi > 1:
            raise ValueError(f"{self.name}: select {name!r}: condition is not a 0/1 flag")
        st = self._mlp_stage(c + lx + ly)
        s = self._new(name, min(lx.lo, ly.lo), max(lx.hi, ly.hi), st)
        self.ops.append(_Op("select", [s], {"c": c, "x": lx, "y": ly}))
        return s

    def emit(self, rules: Sequence[tuple[LinLike, LinLike]], name: str = "out") -> Signal:
        """The next token: rules (condition flag, value) with value a token code
        (an int, e.g. ``token_code(ENDSEARCH)``, or a signal holding one). The
        output is sum_r [cond_r] value_r; the rules must be exclusive wherever the
        output is read (checked by :meth:`run_python`)."""
        if self._emit is not None:
            raise ValueError(f"{self.name}: emit() may be called once")
        rs = [(Lin.of(c), Lin.of(v)) for c, v in rules]
        for i, (c, _) in enumerate(rs):
            if c.lo < 0 or c.hi > 1:
                raise ValueError(f"{self.name}: rule {i}: condition is not a 0/1 flag")
        st = max(self._mlp_stage(c + v) for c, v in rs)
        lo = sum(min(0, v.lo) for _, v in rs)
        hi = sum(max(0, v.hi) for _, v in rs)
        s = self._new(name, lo, hi, st)
        self._emit = _Op("emit", [s], {"rules": rs})
        self.ops.append(self._emit)
        return s

    # -- compilation
    def _layers(self) -> int:
        L = 0
        for op in self.ops:
            st = op.out[0].stage
            op.layer = (st - 1) // 2
            L = max(L, op.layer + 1)
        return L

    def required_int_bits(self) -> int:
        """Integer bits I such that every value and partial sum the kernels form fits
        (|v| < 2^I): interval arithmetic over the assembled weights, with each
        direction bounded by its signal's range (see the module docstring)."""
        return self.int_bits_of(assemble(self).spec())

    def int_bits_of(self, spec) -> int:
        """:meth:`required_int_bits` over the weights of ``spec`` (a model's
        specification with this program's directions: the assembled one, or a built
        model's, which checks/certify/program.py reads)."""
        T = max(abs(self.tau_lo), abs(self.tau_hi))
        X = {lab: max(abs(self.signals[lab].lo), abs(self.signals[lab].hi)) for lab in spec.labels}
        m = T * T                                            # tau^2 feature of the readout
        m = max([m] + list(X.values()))

        def dot(row, bounds) -> int:
            tot = 0
            for k in row.nonzero()[0]:
                w = Fraction(row[k])
                if w.denominator != 1:
                    raise MarginError(f"{self.name}: weight {w} is not an integer (programs use f = 0)")
                tot += abs(int(w)) * bounds[k]
            return tot

        xb = [X[lab] for lab in spec.labels]
        for L in spec.rnn_layers:
            hb = []
            for name in L.state_labels:
                if name in self.signals:
                    hb.append(X[name])
                else:                                        # a delay line's current-value slot
                    src = self._delay_source(name)
                    hb.append(max(abs(src.lo), abs(src.hi)))
            for r in range(L.A.shape[0]):
                m = max(m, dot(L.A[r], hb) + dot(L.B[r], xb))
            for r in range(L.C.shape[0]):
                m = max(m, xb[r] + dot(L.C[r], hb))
            hid = [dot(L.W1[k], xb) + abs(int(L.b1[k])) for k in range(L.W1.shape[0])]
            m = max([m] + hid)
            for r in range(L.W2.shape[0]):
                m = max(m, xb[r] + dot(L.W2[r], hid) + abs(int(L.b2[r])))
        if self._emit is not None:
            out = self._emit.out[0]
            V = max(abs(out.lo), abs(out.hi))
            m = max(m, 2 * T * V + T * T)                    # readout logit 2 tau_k out - tau_k^2
        return bits_for(m)

    def _delay_source(self, state_name: str) -> Signal:
        for op in self.ops:
            if op.kind == "delay" and op.args["name"] + "#0" == state_name:
                return op.args["source"]
        raise KeyError(state_name)

    def compile(self, fmt: FixedFormat | None = None) -> Model:
        """The linear RNN (kind ``linear_rnn``); default format Q(required).0."""
        need = self.required_int_bits()
        if fmt is None:
            fmt = FixedFormat(need, 0)
        elif fmt.int_bits < need:
            raise MarginError(f"{self.name}: needs {need} integer bits, {fmt.name} has {fmt.int_bits}")
        return assemble(self).build(fmt)

    # -- reference interpretation
    def run_python(self, tokens: Sequence[int]) -> list[dict]:
        """Exact interpretation: per position, {signal name: value} plus
        ``"_fired"`` (indices of rules whose condition is 1). Raises if a signal
        leaves its declared range or a write-once latch is written twice."""
        state: dict[str, list[int] | int] = {}
        writes: dict[str, int] = {}
        trace = []
        for pos, tok in enumerate(tokens):
            tok = int(tok)
            env: dict[str, int] = {}
            for name, (kind, param) in self.embedded.items():
                env[name] = _feature(kind, param, tok)
            fired: list[int] = []
            for op in self.ops:
                k = op.kind
                if k == "counter":
                    c = op.out[0]
                    v = state.get(c.name, 0) + op.args["inc"].value(env)
                    state[c.name] = v
                    env[c.name] = v
                    g = op.args.get("write_once")
                    if g is not None and env[g.name] == 1:
                        writes[c.name] = writes.get(c.name, 0) + 1
                        if writes[c.name] > 1:
                            raise ProgramRangeError(f"{self.name}: latch {c.name!r} written twice (position {pos})")
                elif k == "delay":
                    key = op.args["name"] + "#line"
                    line = state.get(key, [0] * len(op.out))
                    for s, v in zip(op.out, line):
                        env[s.name] = v
                    state[key] = [op.args["source"].lin().value(env)] + line[:-1]
                elif k == "equal":
                    env[op.out[0].name] = int(op.args["d"].value(env) == 0)
                elif k == "at_least":
                    env[op.out[0].name] = int(op.args["d"].value(env) >= 0)
                elif k == "all_of":
                    env[op.out[0].name] = int(op.args["d"].value(env) >= 1)
                elif k == "select":
                    c = op.args["c"].value(env)
                    env[op.out[0].name] = op.args["x"].value(env) if c == 1 else op.args["y"].value(env)
                elif k == "emit":
                    total = 0
                    for i, (c, v) in enumerate(op.args["rules"]):
                        if c.value(env) == 1:
                            fired.append(i)
                            total += v.value(env)
                    env[op.out[0].name] = total
                for s in op.out:
                    if not s.lo <= env[s.name] <= s.hi:
                        raise ProgramRangeError(f"{self.name}: signal {s.name} = {env[s.name]} outside its declared "
                                             f"range [{s.lo}, {s.hi}] at position {pos}")
            env["_fired"] = fired
            trace.append(env)
        return trace

    def describe(self) -> str:
        L = self._layers()
        lines = [f"program {self.name}: {L} layers"]
        for l in range(L):
            st = [o for o in self.ops if o.layer == l and o.kind in ("counter", "delay")]
            ml = [o for o in self.ops if o.layer == l and o.kind not in ("counter", "delay")]
            lines.append(f"  layer {l}: state {[s.name for o in st for s in o.out]}; "
                         f"mlp {[o.out[0].name for o in ml]}")
        return "\n".join(lines)


def _tname(t: int) -> str:
    t = int(t)
    if t >= NUMBER_BASE:
        return str(t - NUMBER_BASE)
    return SPECIAL_NAMES.get(t) or META_NAMES.get(t) or str(t)


def _feature(kind: int, param: int, tok: int) -> int:
    if kind == K.F_ONE:
        return 1
    if kind == K.F_TOK:
        return token_code(tok)
    if kind == K.F_IS_TOKEN:
        return int(tok == param)
    if kind == K.F_IS_NUM:
        return int(tok >= NUMBER_BASE)
    raise ValueError(f"feature kind {kind} is not used by programs")


def assemble(p: Program) -> Builder:
    """Lay the program out as a :class:`Builder` (layers in stage order)."""
    L = p._layers()
    space = ResidualSpace()
    for name, s in p.signals.items():
        if name in p.embedded:
            kind, param = p.embedded[name]
            space.embedded(name, kind, param)
        else:
            space.hidden(name)
    b = Builder(p.name, "linear_rnn", p.vocab, space, claim=p.claim)
    for l in range(L):
        state, A, B, C, neurons = _layer_of(p, l)
        b.rnn_layer(state, A, B, C, neurons, name=f"{p.name}.L{l}")
    if p._emit is None:
        raise ValueError(f"{p.name}: a program needs an emit() rule set")
    b.readout([(p._emit.out[0].name, K.F_TOK, 0, 2), (Program.ONE, K.F_TOK_SQ, 0, -1)])
    b.notes["program"] = p.describe()
    return b


def _layer_of(p: Program, l: int) -> tuple[list[str], dict, dict, dict, list[Neuron]]:
    """RNN layer l of the program: the state of its counters and delay lines
    (A, B, C) and the neurons of its MLP operations, in program order."""
    one = Program.ONE
    state: list[str] = []
    A: dict = {}
    B: dict = {}
    C: dict = {}
    neurons: list[Neuron] = []
    for op in p.ops:
        if op.layer != l:
            continue
        if op.kind == "counter":
            c = op.out[0].name
            state.append(c)
            A[(c, c)] = 1
            for d, a in op.args["inc"].combo(one).items():
                B[(c, d)] = B.get((c, d), 0) + a
            C[(c, c)] = 1
        elif op.kind == "delay":
            base = op.args["name"] + "#0"
            names = [base] + [s.name for s in op.out]
            state.extend(names)
            B[(base, op.args["source"].name)] = 1
            for k in range(1, len(names)):
                A[(names[k], names[k - 1])] = 1
                C[(names[k], names[k])] = 1
        else:
            neurons += _mlp_op_neurons(op, one)
    return state, A, B, C, neurons


def _mlp_op_neurons(op: _Op, one: str) -> list[Neuron]:
    """The neurons of one MLP operation (the gadgets named in the module docstring)."""
    out = op.out[0].name
    if op.kind == "equal":
        return equality_neurons(op.args["d"].combo(one), {}, out)
    if op.kind == "at_least":
        d = op.args["d"].combo(one)
        return [Neuron(d, 1, {out: 1}), Neuron(d, 0, {out: -1})]
    if op.kind == "all_of":
        return [Neuron(op.args["d"].combo(one), 0, {out: 1})]
    if op.kind == "select":
        a = op.args
        bound = max(abs(a["x"].lo), abs(a["x"].hi), abs(a["y"].lo), abs(a["y"].hi), 1)
        return select_neurons(a["c"].combo(one), a["x"].combo(one), a["y"].combo(one), out, bound)
    if op.kind == "emit":
        neurons: list[Neuron] = []
        for c, v in op.args["rules"]:
            if not v.terms:                       # a constant token code: tau [cond]
                neurons.append(Neuron(c.combo(one), 0, {out: v.const}))
            else:
                neurons += select_neurons(c.combo(one), v.combo(one), {}, out, max(abs(v.lo), abs(v.hi), 1))
        return neurons
    raise ValueError(f"unknown program operation {op.kind!r}")
