"""Every instance of a task at once: the abstract instance a certificate reasons about.

A certificate (checks/certify/run.py) proves "the model's answer equals the task's
reference on every instance, for every n" by reasoning about ONE symbolic
instance per task: the sizes as z3 integers, the token codes as an
uninterpreted function ``tau``, the segments as facts
(:meth:`Instance.token_facts`), the promise instantiated at the positions a
proof mentions (:meth:`Instance.promise_at`), and the answer as a term
(:meth:`Instance.answer`). tests/test_certify.py checks each instance against
the task's plain-Python reference on every small concrete instance.

Example (Index, ``[BOS] x_1..x_n [QUERY] i``)::

    >>> inst = IndexInstance()
    >>> inst.last, inst.answer_code(inst.last)
    (n + 3 - 1, tau(i))

Details: docs/internals/tasks.md#abstract
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from rnngap.constructions.machine.vocab import FALSE, QUERY, TRUE

try:
    import z3
except ImportError:      # certify reports the proofs as unavailable
    z3 = None

QUERY_CODE = -9
"""tau([QUERY]) (special id 9)."""
MQAR_CODES = 1 << 16
"""MQAR values are raw ints below 2^16: codes 1..2^16."""


@dataclass
class Case:
    """One case of a per-position case split (e.g. "q_t occurred before" / "it did
    not"): its fresh variables' facts and named terms (a head's target, the
    answer) valid in it."""

    name: str
    facts: list
    terms: dict = field(default_factory=dict)


class Instance(ABC):
    """The abstract instance of one task (module doc). Subclasses set the segments;
    ``n``, ``a`` are z3 integers, ``tau`` the token-code function."""

    task = ""
    description = ""

    def __init__(self):
        self.n = z3.Int("n")
        self.a = z3.Int("a")
        self.tau = z3.Function("tau", z3.IntSort(), z3.IntSort())
        self.facts: list = [self.n >= 1, self.a >= 1]
        self.params: dict = {}

    # -- to be set by a task
    @property
    @abstractmethod
    def length(self):
        """The number of positions (the prompt; the answer is read at the last)."""

    @property
    def last(self):
        return self.length - 1

    @abstractmethod
    def token_facts(self, t) -> list:
        """Facts about tau(t) for a position term t (0 <= t < length)."""

    def promise_at(self, t) -> list:
        """The task's promise instantiated at the position term t (its universally
        quantified parts); [] if it has none."""
        return []

    def readout_positions(self, t):
        """Where the answer is read (a z3 condition on t): the last position."""
        return t == self.last

    def cases(self, t) -> list[Case]:
        """The per-position case split at a readout position t (one case by default)."""
        return [Case("", [])]

    @abstractmethod
    def answer_code(self, t, case: Case | None = None):
        """tau of the reference answer at the readout position t."""

    # -- evaluation on a concrete instance (tests: the symbolic reading = the reference)
    @abstractmethod
    def concrete(self, tokens: list[int], **kw) -> dict:
        """Values of n, a and the params on a concrete instance (``tokens`` as ids)."""


def code(token: int) -> int:
    """tau of a token id (docs/conventions.md)."""
    return token - 32 + 1 if token >= 32 else -token


def _segments(inst: Instance, t, data_hi, suffix: list) -> list:
    """[BOS] at 0, data codes 1..a at 1..data_hi, then ``suffix``: (position, fact on tau)."""
    T = inst.tau(t)
    facts = [z3.Implies(t == 0, T == 0), z3.Implies(z3.And(t >= 1, t <= data_hi), z3.And(T >= 1, T <= inst.a))]
    for pos, fact in suffix:
        facts.append(z3.Implies(t == pos, fact(T)))
    return facts


class IndexInstance(Instance):
    """``[BOS] x_1..x_n [QUERY] i`` -> x_i (1 <= i <= n)."""

    task = "index"

    def __init__(self):
        super().__init__()
        self.i = z3.Int("i")
        self.params = {"i": self.i}
        self.facts += [self.i >= 1, self.i <= self.n]

    @property
    def length(self):
        return self.n + 3

    def token_facts(self, t):
        return _segments(self, t, self.n, [(self.n + 1, lambda T: T == QUERY_CODE),
                                          (self.n + 2, lambda T: T == self.i + 1)])

    def answer_code(self, t, case=None):
        return self.tau(self.i)

    def concrete(self, tokens, alphabet=None, **kw):
        n = len(tokens) - 3
        return {"n": n, "i": tokens[-1] - 32}


class GramInstance(Instance):
    """``[BOS] x_1..x_n [QUERY] g_1..g_{c-1}`` -> the token after the FIRST occurrence
    of the gram g (it occurs, first at j..j+c-2, with j + c - 2 <= n - 1). AR is c = 2."""

    def __init__(self, c: int):
        super().__init__()
        self.c = c
        self.task = "ar" if c == 2 else f"cgram(c={c})"
        self.j = z3.Int("first")
        self.g = [z3.Int(f"g{m}") for m in range(1, c)]
        self.params = {"j": self.j, **{f"g{m}": g for m, g in enumerate(self.g, 1)}}
        self.facts += [self.j >= 1, self.j + c - 2 <= self.n - 1]
        self.facts += [z3.And(g >= 1, g <= self.a) for g in self.g]
        self.facts += [self.tau(self.j + m if m else self.j) == g for m, g in enumerate(self.g)]

    @property
    def length(self):
        return self.n + self.c + 1

    def token_facts(self, t):
        return _segments(self, t, self.n, [(self.n + 1, lambda T: T == QUERY_CODE)]
                         + [(self.n + 1 + m, (lambda T, g=g: T == g)) for m, g in enumerate(self.g, 1)])

    def _occurs_at(self, k):
        return z3.And([self.tau(k + m if m else k) == g for m, g in enumerate(self.g)])

    def promise_at(self, t):
        """No full occurrence of the gram starts at a data position before j; instantiated
        at every start k = t - m a term t can be part of."""
        out = []
        for m in range(self.c - 1):
            k = t - m if m else t
            out.append(z3.Implies(z3.And(k >= 1, k < self.j), z3.Not(self._occurs_at(k))))
        return out

    def answer_code(self, t, case=None):
        return self.tau(self.j + self.c - 1)

    def concrete(self, tokens, **kw):
        c = self.c
        n = len(tokens) - c - 1
        gram = tokens[n + 2:]
        x = tokens[1:n + 1]
        j = next(k for k in range(1, n - c + 3) if x[k - 1:k - 1 + c - 1] == gram)
        return {"n": n, "j": j, **{f"g{m}": code(t) for m, t in enumerate(gram, 1)}}


class CountingInstance(Instance):
    """``[BOS] x_1..x_n [QUERY] q t`` -> number [c > t], c = #{j: x_j = q}; q a symbol
    of the alphabet, 0 <= t <= n."""

    task = "counting"

    def __init__(self):
        super().__init__()
        self.q = z3.Int("q")
        self.thr = z3.Int("thr")
        self.count = z3.Int("count")
        self.params = {"q": self.q, "t": self.thr, "count": self.count}
        self.facts += [self.q >= 1, self.q <= self.a, self.thr >= 0, self.thr <= self.n,
                       self.count >= 0, self.count <= self.n]

    @property
    def length(self):
        return self.n + 4

    def token_facts(self, t):
        return _segments(self, t, self.n, [(self.n + 1, lambda T: T == QUERY_CODE),
                                          (self.n + 2, lambda T: T == self.q),
                                          (self.n + 3, lambda T: T == self.thr + 1)])

    def is_member(self, j):
        """The keys the count head splits its weight over: [BOS] and every copy of q."""
        return z3.Or(j == 0, z3.And(j >= 1, j <= self.n, self.tau(j) == self.q))

    def member_count(self):
        """|{[BOS]} + copies of q| = count + 1 (the definition of count)."""
        return self.count + 1

    def answer_code(self, t, case=None):
        return z3.If(self.count > self.thr, code(33), code(32))

    def concrete(self, tokens, **kw):
        n = len(tokens) - 4
        q = code(tokens[n + 2])
        return {"n": n, "q": q, "t": tokens[n + 3] - 32, "count": sum(code(x) == q for x in tokens[1:n + 1])}


class MQARInstance(Instance):
    """``[BOS] r_1..r_L`` (n = L raw values below 2^16 as number tokens): at every
    position t >= 1 the answer is the token after the first earlier occurrence of
    r_t, i.e. tau at the first key p <= t with tau(p - 1) = tau(t), or [BOS]
    (tau 0, read as -1) if there is none."""

    task = "mqar"

    @property
    def length(self):
        return self.n + 1

    def token_facts(self, t):
        T = self.tau(t)
        return [z3.Implies(t == 0, T == 0), z3.Implies(z3.And(t >= 1, t <= self.n), z3.And(T >= 1, T <= MQAR_CODES))]

    def readout_positions(self, t):
        return z3.And(t >= 1, t <= self.n)

    def cases(self, t):
        p = z3.Int("p_first")
        matches = lambda k: z3.And(k >= 1, k <= t, self.tau(k - 1) == self.tau(t))
        found = Case("an earlier occurrence", [matches(p)], {"target": p, "first": p, "t": t})
        none = Case("no earlier occurrence", [], {"target": z3.IntVal(0), "first": None, "t": t})
        return [found, none]

    def promise_at_case(self, case: Case, k) -> list:
        """First-occurrence facts of the case, instantiated at the key position k."""
        t = case.terms["t"]
        hit = z3.And(k >= 1, k <= t, self.tau(k - 1) == self.tau(t))
        if case.terms["first"] is None:
            return [z3.Not(hit)]
        return [z3.Implies(z3.And(hit, k != case.terms["first"]), k > case.terms["first"])]

    def answer_code(self, t, case=None):
        return self.tau(case.terms["target"]) if case.terms["first"] is not None else z3.IntVal(0)

    def concrete(self, tokens, **kw):
        return {"n": len(tokens) - 1}


def iterate_g(x, n):
    """g(x) = tent((x + 1) mod 2n) for 0 <= x < 2n, as a z3 term (the map of
    checks/tasks/iterate.py; tent(y) = 2y if y < n else 4n - 1 - 2y)."""
    y = z3.If(x + 1 >= 2 * n, x + 1 - 2 * n, x + 1)
    return z3.If(y < n, 2 * y, 4 * n - 1 - 2 * y)


class IterateInstance(Instance):
    """ITER(n) with its chain of thought: ``[BOS] z_1..z_n [QUERY] (2n + s) a``
    (m = 2n; padding values z_j and a in 0..m-1; 0 <= s <= n^2 steps), then the
    CoT g(a), g^2(a), ..., g^s(a) and the answer [TRUE] iff g^s(a) >= n
    (checks/tasks/iterate.py).

    The readout positions are the prompt's last (a, at n + 3) and every CoT
    token's (n + 3 + k, 1 <= k <= s). The certificate proves the one-step claim:
    whatever value v the token at n + 3 + k holds (a value token, code v + 1), the
    model emits g(v) while k < s and the answer [v >= n] at k = s. With the CoT
    tokens before position t taken to be value tokens (the token facts), that is
    the induction step of "the model's CoT is the reference's and so is its
    answer": the reference writes a, g(a), ..., each a value, and the model, fed
    its own tokens, emits the reference's next token at every k."""

    task = "iterate"

    def __init__(self):
        super().__init__()
        self.steps = z3.Int("steps")
        self.a0 = z3.Int("a0")
        self.params = {"s": self.steps, "a0": self.a0}
        self.facts += [self.steps >= 0, self.steps <= self.n * self.n, self.a0 >= 0, self.a0 < 2 * self.n]

    @property
    def length(self):
        return self.n + 4 + self.steps

    def token_facts(self, t):
        n, T = self.n, self.tau(t)
        value = z3.And(T >= 1, T <= 2 * n)
        return [z3.Implies(t == 0, T == 0),
                z3.Implies(z3.And(t >= 1, t <= n), value),
                z3.Implies(t == n + 1, T == QUERY_CODE),
                z3.Implies(t == n + 2, T == 2 * n + self.steps + 1),
                z3.Implies(t == n + 3, T == self.a0 + 1),
                z3.Implies(z3.And(t >= n + 4, t <= n + 3 + self.steps), value)]

    def readout_positions(self, t):
        return z3.And(t >= self.n + 3, t <= self.n + 3 + self.steps)

    def cases(self, t):
        return [Case("a CoT step, k < s", [t < self.n + 3 + self.steps], {"answer": False}),
                Case("the answer, k = s", [t == self.n + 3 + self.steps], {"answer": True})]

    def answer_code(self, t, case=None):
        v = self.tau(t) - 1
        if case is not None and case.terms["answer"]:
            return z3.If(v >= self.n, code(TRUE), code(FALSE))
        return iterate_g(v, self.n) + 1

    def concrete(self, tokens, **kw):
        q = tokens.index(QUERY)
        n = q - 1
        return {"n": n, "s": tokens[q + 1] - 32 - 2 * n, "a0": tokens[q + 2] - 32}


INSTANCES: dict[str, Callable[[], Instance]] = {
    "index": IndexInstance,
    "ar": lambda: GramInstance(2),
    "cgram(c=3)": lambda: GramInstance(3),
    "cgram(c=4)": lambda: GramInstance(4),
    "counting": CountingInstance,
    "mqar": MQARInstance,
    "iterate": IterateInstance,
}
"""The abstract instance of each task (by its canonical name)."""

