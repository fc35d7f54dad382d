"""Claim T4.1, construction side: a constant-size linear RNN with CoT runs a long
sequential computation, one map application per CoT token, that a fixed-depth
CoT-free RNN (the k-deep unrolling below) gets wrong beyond t = k.

The paper's Theorem 4.1 separates RNNs with and without CoT assuming PSPACE is
not contained in P/poly; that separation is CONDITIONAL and never tested here.
``rnngap verify --only T4.1`` checks the mechanism on the task ITER(n): [TRUE]
iff g^t(a) >= m/2, for a fixed bijection g_n of m = 2n values and t <= n^2.
:func:`iterate_rnn` (O(log n)-bit state, f = 0) writes g(a), g^2(a), ... as its
CoT and answers after exactly t tokens; the CoT-free :func:`unrolled_rnn`
applies g at most k times and is wrong on concrete instances with t > k. ITER is
a demo, not a hard task.

Details (the claim, ITER(n), orbits, the RNN's layers):
docs/internals/models.md#cot_hierarchy
"""
from __future__ import annotations

from fractions import Fraction

import sympy as sp

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.formats import FixedFormat
from rnngap.constructions.build.gadgets import Builder, MarginError, Neuron, ResidualSpace, bits_for, require
from rnngap.constructions.build.model import Model
from rnngap.constructions.machine.vocab import BOS, FALSE, QUERY, TRUE, Vocab, number_token, token_code

N = sp.Symbol("n", positive=True, integer=True)
from . import bounds as _bounds  # noqa: E402  (the declared bounds, written once)

ROTATION = 1
"""d in g(x) = tent((x + d) mod m)."""


def modulus(n: int) -> int:
    """m(n) = 2n: the machine's values are 0..m-1 (log2(2n) bits)."""
    if n < 1:
        raise ValueError(f"ITER needs n >= 1, got {n}")
    return 2 * n


def steps(n: int) -> int:
    """T(n) = n^2 applications of g_n (the CoT length; constructions/models/bounds.py)."""
    return _bounds.iterate_steps(_bounds.INT, n)


STEPS_EXPR = _bounds.iterate_steps(_bounds.SYM, N)


from .bounds import ITERATE as DECLARED  # noqa: E402  (written once in constructions/models/bounds.py)
"""I(n) = 2 ceil(log2(n^2 + 2n + 10)) + 3, f(n) = 0 (everything is an integer)."""


def g_map(x: int, m: int, d: int = ROTATION) -> int:
    """g(x) = tent((x + d) mod m) (plain Python; the reference uses its own copy)."""
    y = (x + d) % m
    return 2 * y if y < m // 2 else 2 * m - 1 - 2 * y


def _ge_neurons(combo: dict, b: int, out: dict, gate: dict | None = None, big: int = 0) -> list[Neuron]:
    """out += [v >= b] for integer v = combo . x, as relu(v - b + 1) - relu(v - b);
    with ``gate`` (a 0/1 combo) and ``big``: the term is forced to 0 when gate = 1
    (inputs shifted down by big * gate; needs |v - b| + 1 <= big)."""
    shift = {k: -big * Fraction(c) for k, c in (gate or {}).items()}
    inp = dict(combo)
    for k, c in shift.items():
        inp[k] = inp.get(k, 0) + c
    return [Neuron(inp, 1 - b, dict(out)), Neuron(inp, -b, {k: -Fraction(c) for k, c in out.items()})]


def _relu_neuron(combo: dict, b: int, out: dict, gate: dict | None = None, big: int = 0) -> Neuron:
    """out += relu(v - b) [forced to 0 when gate = 1; needs v - b <= big]."""
    inp = dict(combo)
    for k, c in (gate or {}).items():
        inp[k] = inp.get(k, 0) - big * Fraction(c)
    return Neuron(inp, -b, dict(out))


def g_neurons(y: dict, m: int, out: str, gate: dict, big: int) -> list[Neuron]:
    """out += (1 - gate) * tent(y mod m) for integer y = x + d in [0, 2m), gate in {0,1}.

    For integer y in [0, 2m) the map is piecewise linear with slopes +-2 and unit
    jumps::

        F(y) = 2y - 4 relu(y - m/2) - [y >= m/2] + 4 relu(y - m) + [y >= m]
               - 4 relu(y - 3m/2) - [y >= 3m/2]

    (F = 2y on [0, m/2), 2m-1-2y on [m/2, m), 2y-2m on [m, 3m/2), 4m-1-2y on
    [3m/2, 2m)). Each relu/step is shifted down by big * gate (exact while
    |y| + 1 <= big)."""
    h = m // 2
    ns = [_relu_neuron(y, 0, {out: 2}, gate, big)]
    for b, slope, jump in ((h, -4, -1), (m, 4, 1), (3 * h, -4, -1)):
        ns.append(_relu_neuron(y, b, {out: slope}, gate, big))
        ns += _ge_neurons(y, b, {out: jump}, gate, big)
    return ns


def iterate_rnn(n: int, fmt: FixedFormat | None = None) -> Model:
    """The T4.1 linear RNN for ITER(n) (module docstring): it stops after t steps
    (t read from the input), CoT length exactly t.

    >>> from rnngap.constructions.build.generate import generate
    >>> g = generate(iterate_rnn(3), prompt(3, a=5, t=7), answer_tokens=[TRUE, FALSE], max_cot=9)
    >>> g.cot_length, g.answer in (TRUE, FALSE)
    (7, True)
    """
    m = modulus(n)
    T = steps(n)
    fmt = fmt or DECLARED.format(n)
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    for lab in ("cnt", "wt", "rr", "done", "val", "out"):
        s.hidden(lab)
    b = Builder(f"iterate-rnn(n={n})", "linear_rnn", Vocab(m + T), s, claim="T4.1")
    # layer 1: q counts [QUERY] (0 or 1), c counts tokens since [QUERY] inclusive:
    # c_t = c_(t-1) + q_(t-1) + [tok = QUERY] = c_(t-1) + q_t.  Its MLP reads the step
    # count off the step token: wt = relu(tau - (m + 1)) = t on the number m + t and
    # exactly 0 on every value token (tau <= m) and every special (tau <= 0).
    b.rnn_layer(["q", "c"],
                A={("q", "q"): 1, ("c", "c"): 1, ("c", "q"): 1},
                B={("q", "is_query"): 1, ("c", "is_query"): 1},
                C={("cnt", "c"): 1},
                mlp=[Neuron({"tok": 1}, -(m + 1), {"wt": 1})], name="counter")
    # layer 2: r accumulates wt, i.e. holds t once the step token is read; its MLP
    # writes done = [c - 3 >= r] (c = 3 at a, then one more per CoT token).
    stop = _ge_neurons({"cnt": 1, "rr": -1}, 3, {"done": 1})
    b.rnn_layer(["r"], A={("r", "r"): 1}, B={("r", "wt"): 1}, C={("rr", "r"): 1}, mlp=stop, name="steps")
    # layer 3: x = tau - 1, the machine value; out = gated g(x) + 1 or the answer code.
    # Margin (big-M gating): on the value range x in [0, m) the gated inputs satisfy
    # |y - b| + 1 <= 2m + 1 with y = x + d < 2m, below big; on other tokens (the
    # prompt, x >= -10) the output is unused and stays bounded.
    big = 3 * m + 16
    require(2 * m + 1 <= big, "T4.1 gating constant too small")
    y = {"val": 1, "one": ROTATION}
    not_done = {"one": 1, "done": -1}
    mlp = g_neurons(y, m, "out", gate={"done": 1}, big=big)
    mlp.append(Neuron(not_done, 0, {"out": 1}))                     # + (1 - done): code = value + 1
    # answer: done * (tau[FALSE] + [x >= m/2]) ; tau[TRUE] = tau[FALSE] + 1
    t_false, t_true = token_code(FALSE), token_code(TRUE)
    require(t_true == t_false + 1, f"T4.1 answer: tau[TRUE] = {t_true} must be tau[FALSE] + 1 = {t_false + 1}")
    mlp.append(Neuron({"done": 1}, 0, {"out": t_false}))
    mlp += _ge_neurons({"val": 1}, m // 2, {"out": 1}, gate=not_done, big=big)
    b.rnn_layer(["x"], A={}, B={("x", "tok"): 1, ("x", "one"): -1}, C={("val", "x"): 1}, mlp=mlp, name="machine")
    b.readout([("out", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    b.notes.update({"m": m, "max_steps": T, "rotation": ROTATION, "state_numbers": 4,
                    "conditional": "the T4.1 separation assumes PSPACE not in P/poly; only the construction "
                                   "and the no-CoT mechanism are checked"})
    need = int_bits_needed(n)
    require(fmt.int_bits >= need, f"iterate-rnn(n={n}): the readout logits need {need} integer bits, "
                                  f"the format has {fmt.int_bits}")
    return b.build(fmt)


def unrolled_rnn(n: int, k: int, fmt: FixedFormat | None = None) -> Model:
    """The T4.1 contrast: a CoT-free linear RNN for ITER(n) that applies g_n
    min(t, k) times, one application per stacked MLP, and answers at once.

    Right on every instance with t <= k (the easy part of ITER), wrong on some
    with t > k (it answers [g^k(a) >= m/2] there). Its size is a function of k
    only (k + 3 layers), so for a fixed k it is a constant-size RNN without CoT.

    Layers (state: q, r and x, as in :func:`iterate_rnn`, plus nothing else):

    * layer 1, state (q): q_t = q_(t-1) + [tok = QUERY]; MLP: wt = relu(tau - m - 1),
      t on the step token (number m + t, tau = m + t + 1) and 0 elsewhere;
    * layer 2, state (r): r_t = r_(t-1) + wt (= t from the step token on); MLP: the
      flags ge_j = [r - (T + 1) wt >= j], j = 1..k: [t >= j] at the value token a,
      0 at the step token itself (r - (T + 1) t < 1 there for t >= 1) and before;
    * layer 3, state (x): x_t = tau - 1 (the value a at the last position); MLP:
      v_1 = ge_1 ? g(x) : x;
    * layers 4..k + 2 (no state): v_j = ge_j ? g(v_(j-1)) : v_(j-1);
    * layer k + 3 (no state): out = tau([FALSE]) + [v_k >= m/2]; readout: the token
      whose code is nearest ``out``.

    Margin (big-M gating, exact on integers): every gated input is y - b with
    |y| <= V = m + T + 10 (the largest |tau|) and b <= 3m/2, so big = V + 2m + 16
    satisfies |y - b| + 1 <= big and a closed gate zeroes its ReLU. At the last
    position v_j is in [0, m) and y = v_j + d < 2m as :func:`g_neurons` needs.
    """
    if k < 0:
        raise ValueError(f"the unrolling depth k must be >= 0, got {k}")
    m, T = modulus(n), steps(n)
    fmt = fmt or DECLARED.format(n)
    V = m + T + 10
    big = V + 2 * m + 16
    require(V + 3 * m // 2 + 1 <= big, "T4.1 unrolled: gating constant too small")
    s = ResidualSpace()
    s.embedded("one", K.F_ONE)
    s.embedded("tok", K.F_TOK)
    s.embedded("is_query", K.F_IS_TOKEN, QUERY)
    for lab in ["wt", "rr", "val", "out"] + [f"ge{j}" for j in range(1, k + 1)] + [f"v{j}" for j in range(1, k + 1)]:
        s.hidden(lab)
    b = Builder(f"unrolled-rnn(n={n},k={k})", "linear_rnn", Vocab(m + T), s, claim="T4.1")
    b.rnn_layer(["q"], A={("q", "q"): 1}, B={("q", "is_query"): 1}, C={},
                mlp=[Neuron({"tok": 1}, -(m + 1), {"wt": 1})], name="step token")
    flags = []
    for j in range(1, k + 1):
        flags += _ge_neurons({"rr": 1, "wt": -(T + 1)}, j, {f"ge{j}": 1})
    b.rnn_layer(["r"], A={("r", "r"): 1}, B={("r", "wt"): 1}, C={("rr", "r"): 1}, mlp=flags, name="steps")
    layers, answer = _unrolled_applications(m, k, big)
    first = layers[0] if layers else answer
    b.rnn_layer(["x"], A={}, B={("x", "tok"): 1, ("x", "one"): -1}, C={("val", "x"): 1}, mlp=first, name="value")
    for j, mlp in enumerate(layers[1:] + ([answer] if layers else []), start=2):
        b.rnn_layer([], A={}, B={}, C={}, mlp=mlp, name=f"apply {j}" if j <= k else "answer")
    b.readout([("out", K.F_TOK, 0, 2), ("one", K.F_TOK_SQ, 0, -1)])
    b.notes.update({"m": m, "max_steps": T, "unrolled": k, "rotation": ROTATION,
                    "contrast": "no CoT; right for t <= k, wrong on some t > k"})
    need = int_bits_needed(n)
    if fmt.int_bits < need:
        raise MarginError(f"unrolled-rnn(n={n}): needs {need} integer bits, {fmt.name} has {fmt.int_bits}")
    return b.build(fmt)


def _unrolled_applications(m: int, k: int, big: int) -> tuple[list[list[Neuron]], list[Neuron]]:
    """The MLPs v_j = ge_j ? g(v_(j-1)) : v_(j-1), j = 1..k (v_0 = val), and the answer
    MLP out = tau([FALSE]) + [v_k >= m/2] (tau([TRUE]) = tau([FALSE]) + 1, checked)."""
    prev = "val"
    layers: list[list[Neuron]] = []
    for j in range(1, k + 1):
        # gate = 1 - ge_j: for t < j the g terms are closed and the copy relu(v - big ge_j) keeps v
        mlp = g_neurons({prev: 1, "one": ROTATION}, m, f"v{j}", gate={f"ge{j}": -1, "one": 1}, big=big)
        mlp.append(Neuron({prev: 1, f"ge{j}": -big}, 0, {f"v{j}": 1}))
        layers.append(mlp)
        prev = f"v{j}"
    t_false, t_true = token_code(FALSE), token_code(TRUE)
    require(t_true == t_false + 1, "the answer codes must be adjacent")
    return layers, [Neuron({}, 1, {"out": t_false})] + _ge_neurons({prev: 1}, m // 2, {"out": 1})


def int_bits_needed(n: int) -> int:
    """Bits of the largest magnitude, the readout logits 2 tau out - tau^2 <= 3 V^2
    (the declared bound, constructions/models/bounds.py iterate_readout_bound), plus a sign margin."""
    return bits_for(_bounds.iterate_readout_bound(_bounds.INT, n)) + 1


def prompt(n: int, a: int, t: int, padding: list[int] | None = None) -> list[int]:
    """``[BOS] z_1..z_n [QUERY] (m + t) a`` as token ids (padding defaults to zeros)."""
    m, T = modulus(n), steps(n)
    z = [0] * n if padding is None else [int(v) for v in padding]
    if len(z) != n or not all(0 <= v < m for v in z) or not 0 <= a < m or not 0 <= t <= T:
        raise ValueError(f"ITER(n={n}): padding must be {n} values in 0..{m - 1}, a in 0..{m - 1}, t in 0..{T}")
    return [BOS] + [number_token(v) for v in z] + [QUERY, number_token(m + t), number_token(a)]


def cot_bound(n: int) -> int:
    """Declared CoT bound: T(n) = n^2 (the CoT of an instance is exactly its t)."""
    return steps(n)


__all__ = ["DECLARED", "ROTATION", "STEPS_EXPR", "cot_bound", "g_map", "g_neurons", "iterate_rnn", "modulus",
           "prompt", "steps", "int_bits_needed", "unrolled_rnn"]
