"""Separation records: both sides of T4.6 / T4.7 on the same hard instances
(docs/theory.md §1 "Where the theorem bites"; claims T4.6-low, T4.7-low).

One record per task and n, on the image of the Index reduction with its
alphabet, puts three things side by side: the constant-size model (T4.6-up or
T4.7-up) right on EVERY instance of the family; the exact one-way CC
(``cc_bits``), computed, never assumed; and a bounded-memory RNN right on the
family up to its capacity and broken on a verified fooling pair at n, either the
``register`` RNN (collision found) or the ``compact`` register (collision forced
by pigeonhole: ``collision_forced``). :func:`require_forced` demands a forced
collision per claim and task. Beyond n = 12, :func:`streamed_separation_record`
streams the CC and the collision search (:data:`STREAMED`). Rows:
:data:`ROWS`.

Details (the three sides, failure rules, streamed records, rows):
docs/internals/verify.md#checks_separation
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from rnngap.constructions.models import istree as CI
from rnngap.constructions.models import targets as T
from rnngap.constructions.build.protocol import RNN, run_rnn
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import FALSE, NUMBER_BASE, TRUE
from rnngap.lowerbounds import cc
from rnngap.lowerbounds import reductions as R
from rnngap.lowerbounds import witness as W
from rnngap.lowerbounds.targets_toy import CompactIndexRegister

from rnngap.checks.catalog.records import retrieval_model
from .registry import Record, register
from rnngap.checks.tasks import TaskSpec, task as task_spec
from rnngap.checks.tasks import istree as task_istree
from rnngap.checks.tasks.common import describe_token
from .forcing import forced_continuations


def _tok(t: int | None) -> str:
    return "none (CoT limit)" if t is None else describe_token(int(t))

EXHAUSTIVE_MAX_N = 12
"""Largest n enumerated (n 2^n instances on each side, n 2^n CC cells)."""


@dataclass(frozen=True)
class SeparationTask:
    """One task of the separation: its claim, the parser layout of its format,
    how the constant-size model is built, and the task's spec (checks.tasks:
    reference, reduction, the alphabet the reduction writes, the data length)."""

    key: str
    claim: str
    layout: str
    builder: str | None                 # checks.catalog retrieval task of the T4.6-up entry (None: IsTree)
    spec: TaskSpec

    @property
    def reduction(self) -> R.Reduction:
        return self.spec.reduction

    @property
    def c(self) -> int:
        return self.spec.c or 2

    def alphabet(self, n: int) -> int:
        """The data alphabet the reduction writes at n."""
        return self.spec.reduction_alphabet(n)

    def data_length(self, n: int) -> int:
        """The model's n for the reduction's data at n."""
        return self.spec.data_length(n)

    def reference(self, n: int) -> Callable[[Any], int]:
        """The plain-Python task reference on this family's instances."""
        return self.spec.reduction_reference(n)


TASKS: dict[str, SeparationTask] = {
    "index": SeparationTask("index", "T4.6-low", "index", "index", task_spec("index")),
    "ar": SeparationTask("ar", "T4.6-low", "keyvalue", "ar", task_spec("ar")),
    "cgram3": SeparationTask("cgram3", "T4.6-low", "keyvalue", "cgram", task_spec("cgram(c=3)")),
    "counting": SeparationTask("counting", "T4.6-low", "counting", "counting", task_spec("counting")),
    "istree": SeparationTask("istree", "T4.7-low", "istree", None, task_spec("istree")),
}

ROWS = {"quick": {"retrieval": ((4, "register"), (6, "register"), (8, "compact"), (10, "compact")),
                  "istree": ((4, "register"), (6, "register"), (8, "compact"))},
        "full": {"retrieval": ((4, "register"), (6, "register"), (8, "register"), (8, "compact"),
                               (10, "compact"), (12, "compact")),
                 "istree": ((4, "register"), (6, "register"), (8, "register"), (7, "compact"), (8, "compact"),
                            (10, "compact"))}}
"""(n, bounded-memory RNN kind) of the separation records, per profile and task group
(the IsTree Transformer with its CoT costs ~5 s at n = 8, ~25 s at n = 10 on
the 2-core machine: n = 10 is in the full profile only)."""


# ------------------------------------------------------------------ the family


def family(task: SeparationTask, n: int) -> tuple[list[tuple[tuple[int, ...], int]], np.ndarray]:
    """Every (x, i) of the family at n (x lexicographic, x_1 most significant;
    i = 1..n) and their instances as int64 ``[n 2^n, L]`` (all of one length)."""
    if not 1 <= n <= EXHAUSTIVE_MAX_N:
        raise ValueError(f"separation family: n must be in 1..{EXHAUSTIVE_MAX_N} (exhaustive), got {n}")
    red = task.reduction
    xs = np.array(list(itertools.product((0, 1), repeat=n)), dtype=np.int64)
    prefixes = red.prefixes(xs)
    suffixes = [red.bob(i, n) for i in range(1, n + 1)]
    width = prefixes.shape[1] + len(suffixes[0])
    toks = np.empty((len(xs) * n, width), dtype=np.int64)
    for k, suf in enumerate(suffixes):
        toks[k::n, :prefixes.shape[1]] = prefixes
        toks[k::n, prefixes.shape[1]:] = suf
    cases = [(tuple(int(b) for b in x), i) for x in xs for i in range(1, n + 1)]
    return cases, toks


def data_alphabet(task: SeparationTask, toks: np.ndarray) -> int:
    """1 + the largest number written as data (every number except Index's query
    position i): the alphabet the reduction writes, measured on its tokens."""
    nums = toks[:, :-1] if task.key == "index" else toks
    nums = nums[nums >= NUMBER_BASE] - NUMBER_BASE
    return int(nums.max()) + 1


# ------------------------------------------------------------ the model's side


@dataclass
class ModelSide:
    name: str
    instances: int
    failures: int
    params: int
    bits_used: int
    bits_declared: int
    cot_max: int
    cot_bound: int
    first_failure: str
    seconds: float


def retrieval_model_side(task: SeparationTask, n: int, cases, toks: np.ndarray, alphabet: int,
                         model: Any = None) -> ModelSide:
    """The T4.6-up Transformer for data length L and the family's alphabet (or any
    ``model`` answering without CoT, e.g. a T5.6 hybrid) on every instance (one
    batched call; rows sharing Alice's prefix reuse its cache)."""
    t0 = time.perf_counter()
    if model is None:
        model = retrieval_model(task.builder, "transformer", task.data_length(n), alphabet=alphabet, c=task.c)
    preds = model.predict_batch(toks)
    ref = task.reference(n)
    fails, first = 0, ""
    for (x, i), row, got in zip(cases, toks, preds):
        want = ref(row.tolist())
        if int(got) != want or want != task.reduction.expected(x, i):
            fails += 1
            first = first or (f"x={''.join(map(str, x))} i={i}: model {int(got)}, reference {want}, "
                              f"reduction {task.reduction.expected(x, i)}")
    r = model.resources
    return ModelSide(model.name, len(cases), fails, r.params, r.used_precision_bits, r.precision_bits, 0, 0, first,
                     time.perf_counter() - t0)


def istree_model_side(task: SeparationTask, n: int, cases, toks: np.ndarray, alphabet: int) -> ModelSide:
    """The T4.7-up IsTree Transformer on N = n + 3 vertices (max id + 1 = N on
    every gadget instance: w = n + 2), teacher forced along prompt + reference
    CoT (tour, [EOS], label) in one batched call (module docstring)."""
    t0 = time.perf_counter()
    N = R.istree_vertex_count(n)
    model = CI.istree_transformer(N, n + 2)
    ref = task.reference(n)
    rows, starts = [], []
    for row in toks.tolist():
        nodes, edges = R.parse_istree(row)
        if nodes != N:
            raise ValueError(f"istree gadget instance with max id + 1 = {nodes}, expected N = {N}")
        rows.append(row + task_istree.reference_cot(N, edges))
        starts.append(len(row))
    forced = forced_continuations(model, rows, starts)
    fails, first, cot_max = 0, "", 0
    for b, ((x, i), row) in enumerate(zip(cases, toks)):
        r, s = rows[b], starts[b]
        got, want = forced[b], r[s:]
        cot_max = max(cot_max, len(want) - 1)
        label = ref(row.tolist())
        if got != want or want[-1] != label or label != task.reduction.expected(x, i):
            fails += 1
            k = next((j for j, (a, w) in enumerate(zip(got, want)) if a != w), len(want) - 1)
            first = first or (f"x={''.join(map(str, x))} i={i}: CoT token {k} predicted {got[k]}, "
                              f"reference {want[k]}; label reference {label}")
    # greedy generation (the model's own CoT fed back) on the first and the last
    # instance (x = 0^n, i = 1: a tree; x = 1^n, i = n: not one) must write the same
    for b in (0, len(rows) - 1):
        g = generate(model, rows[b][:starts[b]], answer_tokens=[TRUE, FALSE], max_cot=CI.cot_bound(N))
        if g.stopped != "answer" or g.cot + [g.answer] != rows[b][starts[b]:]:
            fails += 1
            first = first or (f"greedy generation on x={''.join(map(str, cases[b][0]))} i={cases[b][1]} wrote "
                              f"{g.cot + [g.answer]}, reference {rows[b][starts[b]:]}")
    res = model.resources
    return ModelSide(model.name, len(cases), fails, res.params, res.used_precision_bits, res.precision_bits,
                     cot_max, CI.cot_bound(N), first, time.perf_counter() - t0)


# -------------------------------------------------------------- the RNN's side


def rnn_for(task: SeparationTask, n: int, kind: str, cc_bits: int | None = None) -> tuple[Any, int]:
    """The bounded-memory RNN of a row and its capacity (module docstring):
    ``register`` c = n - 1; ``compact`` the largest s with s + 2 + parser bits <
    ``cc_bits``, the exact one-way CC computed at n (default n, Index's n bits)."""
    parser = T.ReductionFormatParser(task.layout, task.c)
    if kind == "register":
        cap = n - 1
        return T.parsed_register_target(task.layout, cap, task.c, max_number=n + 4), cap
    if kind == "compact":
        bound = n if cc_bits is None else cc_bits
        s = bound - 1 - 2 - parser.bits
        if s < 1:
            raise ValueError(f"{task.key}: no compact register with state bits < CC = {bound} at n = {n} "
                             f"(parser {parser.bits} bits + s + 2)")
        return T.ParsedIndexRNN(CompactIndexRegister(s), parser, s), s
    raise ValueError(f"unknown RNN kind {kind!r}: 'register' or 'compact'")


def rnn_correct_below(rnn: RNN, task: SeparationTask, capacity: int) -> tuple[int, int, str]:
    """Run ``rnn`` (CoT up to n' tokens) on every instance of the family at every
    n' = 1..capacity against the task reference; Alice's prefix states are
    computed once per x and shared by its n' suffixes (the RNN is deterministic).
    Returns (instances, failures, first failure)."""
    red = task.reduction
    count, fails, first = 0, 0, ""
    for m in range(1, capacity + 1):
        ref = task.reference(m)
        suffixes = [red.bob(i, m) for i in range(1, m + 1)]
        for x in itertools.product((0, 1), repeat=m):
            state = rnn.initial_state()
            for t in red.alice(x):
                state = rnn.step(state, t)
            prefix = red.alice(x)
            for i, suf in enumerate(suffixes, start=1):
                run = run_rnn(rnn, suf, red.answer_tokens, max_cot=m, state=state)
                want = ref(prefix + suf)
                count += 1
                if run.answer != want:
                    fails += 1
                    first = first or f"n'={m} x={''.join(map(str, x))} i={i}: RNN {run.answer}, reference {want}"
    return count, fails, first


def prefix_state_count(rnn: RNN, task: SeparationTask, n: int) -> int:
    """Distinct state keys after Alice's 2^n prefixes at n (lexicographic x; the
    states of shared token prefixes are reused). Fewer than 2^n means a fooling
    pair exists, whatever the declared state bits."""
    keys, prev, stack = set(), [], [rnn.initial_state()]
    for x in itertools.product((0, 1), repeat=n):
        toks = task.reduction.alice(x)
        common = 0
        while common < min(len(toks), len(prev)) and toks[common] == prev[common]:
            common += 1
        del stack[common + 1:]
        for t in toks[common:]:
            stack.append(rnn.step(stack[-1], t))
        prev = toks
        keys.add(rnn.state_key(stack[-1]))
    return len(keys)


def verify_witness(rnn: RNN, task: SeparationTask, w: W.Witness, max_cot: int) -> tuple[bool, str]:
    """Re-run every failing instance of ``w`` from s_0 through ``rnn`` (CoT up to
    ``max_cot``) and compare: the rerun answer must equal the recorded one and
    differ from the task reference, which must equal the reduction's expected
    answer. Returns (verified, why not)."""
    if not w.found or not w.wrong:
        return False, "no fooling pair found"
    ref = task.reference(w.n)
    for label in w.wrong:
        x = w.x if label == "x" else w.x_prime
        toks = task.reduction.instance(x, w.i)
        recorded = w.answer if label == "x" else w.answer_prime
        rerun = run_rnn(rnn, toks, task.reduction.answer_tokens, max_cot=max_cot)
        want = ref(toks.tolist())
        if want != task.reduction.expected(x, w.i):
            return False, f"reference {want} disagrees with the reduction's {task.reduction.expected(x, w.i)}"
        if rerun.answer != recorded:
            return False, f"re-run answer {rerun.answer} differs from the recorded {recorded}"
        if rerun.answer == want:
            return False, f"instance {label} is answered correctly ({want}) on the re-run"
    return True, ""


# ------------------------------------------------------------------ the record


def separation_record(task_key: str, n: int, rnn: RNN | None = None, capacity: int | None = None,
                      kind: str = "register", witness: W.Witness | None = None,
                      model_side: ModelSide | None = None, claim: str | None = None) -> Record:
    """The separation record of ``task_key`` at ``n`` (module docstring).

    ``rnn`` / ``capacity``: the bounded-memory side (default :func:`rnn_for`
    ``kind``); ``witness``: a fooling pair to verify instead of searching one
    (tests); ``model_side``: a precomputed model result for the same (task, n)
    (:func:`model_side`, possibly of another model); ``claim``: the record's
    claim (default the task's T4.6-low / T4.7-low).
    """
    task = TASKS[task_key]
    t0 = time.perf_counter()
    cases, toks = family(task, n)
    alphabet = data_alphabet(task, toks)
    if alphabet != task.alphabet(n):
        raise ValueError(f"{task_key}: the reduction writes alphabet {alphabet} at n = {n}, "
                         f"expected {task.alphabet(n)}")
    own_side = model_side.seconds if model_side is not None else 0.0   # run outside: add its time
    if model_side is None:
        side = istree_model_side if task.builder is None else retrieval_model_side
        model_side = side(task, n, cases, toks, alphabet)
    # exact one-way CC of the family at n
    res = cc.one_way_complexity(cc.reduction_split(task.reduction, n, task.reference(n)))
    cc_bits = res.bits if res.exact else None
    problems = []   # each is one failure of the record, beside the model's own failures
    if cc_bits is not None and cc_bits != n:
        problems.append(f"exact CC {cc_bits} bits != n = {n}: the family does not carry Index's n bits "
                        f"(the reduction is broken at this n)")
    # the bounded-memory RNN (the compact register sized from the CC just computed)
    if rnn is None:
        rnn, capacity = rnn_for(task, n, kind, cc_bits)
    capacity = int(capacity if capacity is not None else getattr(rnn, "capacity", 0) or 0)
    if capacity < 1:
        problems.append(f"capacity {capacity} < 1: nothing shows the RNN is correct anywhere")
    if capacity >= n:
        problems.append(f"capacity {capacity} >= n = {n}: the witness must lie beyond the capacity")
    below, below_fails, below_first = rnn_correct_below(rnn, task, min(capacity, n - 1)) if capacity >= 1 \
        else (0, 0, "")
    if below_fails:
        problems.append(f"RNN wrong below its capacity on {below_fails}/{below} instances ({below_first})")
    if cc_bits is None:
        problems.append(f"CC not exact ({res.method})")
    if witness is None:
        witness = W.find_witness(rnn, task.reduction, n, mode="exhaustive", max_cot=n)
    verified, why = verify_witness(rnn, task, witness, n)
    forced = None if cc_bits is None else rnn.state_bits < cc_bits
    reached = prefix_state_count(rnn, task, n)
    if witness.found:
        wnote = (f"witness x={''.join(map(str, witness.x))} x'={''.join(map(str, witness.x_prime))} i={witness.i}: "
                 f"RNN answers {_tok(witness.answer)} on both after {len(witness.cot)} CoT tokens, expected "
                 f"{_tok(witness.expected)}/{_tok(witness.expected_prime)}, wrong on {','.join(witness.wrong)}, "
                 f"{'re-run and verified' if verified else 'NOT verified: ' + why}")
    else:
        wnote = f"no witness: {witness.how}"
    how = ("forced by pigeonhole (state bits < CC)" if forced else "only found (not forced: state bits >= CC)") \
        if forced is not None else "CC not exact"
    note = (f"model {model_side.name}: {model_side.failures}/{model_side.instances} wrong (every x, i)"
            + (f" [{model_side.first_failure}]" if model_side.first_failure else "")
            + f"; CC {cc_bits} bits ({res.distinct_rows} distinct rows, {res.method})"
            + f"; RNN {getattr(rnn, 'name', type(rnn).__name__)} ({rnn.state_bits} state bits, capacity {capacity}):"
            + f" {below - below_fails}/{below} right at n' <= {capacity}; Alice's {2 ** n} prefixes reach {reached}"
            + f" distinct states; {wnote}; collision {how}"
            + (f"; FAILS: {'; '.join(problems)}" if problems else ""))
    return Record(claim or task.claim, f"{model_side.name} vs {getattr(rnn, 'name', type(rnn).__name__)}",
                  task.spec.name, n, model_side.instances,
                  model_side.failures + len(problems),
                  model_side.bits_used, model_side.bits_declared, model_side.cot_max, model_side.cot_bound,
                  model_side.params, rnn.state_bits, round(time.perf_counter() - t0 + own_side, 3), note=note,
                  kind="separation", family="reduction", alphabet=alphabet, cc_bits=cc_bits,
                  collision_forced=forced, witness_verified=verified,
                  description=f"{task_key} separation (Index reduction)")


def require_forced(records: list[Record]) -> list[Record]:
    """Per (claim, task), at least one separation record must have a collision
    FORCED by pigeonhole (``collision_forced``: state bits < the exact CC at that
    n): a group with none gets one more failure on each of its records, named in
    the note (a collision that is only found says nothing about every RNN of that
    size). Returns ``records`` (changed in place)."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if r.kind == "separation":
            groups.setdefault((r.claim, r.task), []).append(r)
    for (claim, task), recs in groups.items():
        if not any(r.collision_forced is True for r in recs):
            for r in recs:
                r.failures += 1
                r.note += (f"; FAILS: no {claim} separation record of {task} has a forced collision "
                           f"(state bits < CC at n: {[(x.n, x.state_bits, x.cc_bits) for x in recs]})")
    return records


def model_side(task_key: str, n: int, model: Any = None) -> ModelSide:
    """The constant-size model on every instance of ``task_key``'s family at n
    (``model``: another no-CoT model for a retrieval task, built by the caller for
    the family's data length and alphabet, e.g. a T5.6 hybrid)."""
    task = TASKS[task_key]
    cases, toks = family(task, n)
    if task.builder is None:
        if model is not None:
            raise ValueError("istree: only the T4.7-up Transformer (built here) runs on the gadget family")
        return istree_model_side(task, n, cases, toks, data_alphabet(task, toks))
    return retrieval_model_side(task, n, cases, toks, data_alphabet(task, toks), model)


def separation_records(keys, profile: str) -> list[Record]:
    """The rows of :data:`ROWS` for each task key (one model run per (task, n))."""
    out = []
    for key in keys:
        sides: dict[int, ModelSide] = {}
        for n, kind in ROWS[profile]["istree" if key == "istree" else "retrieval"]:
            side = sides.get(n)
            if side is None:
                side = sides[n] = model_side(key, n)
            else:   # the same run again: its time is already in the first record
                side = dataclasses.replace(side, seconds=0.0)
            out.append(separation_record(key, n, kind=kind, model_side=side))
    return require_forced(out)


def _rows(key: str, profile: str):
    return ROWS[profile]["istree" if key == "istree" else "retrieval"]


def separation_parts(keys):
    """One part per (task key, n): the rows of that n share one model run."""
    return lambda profile: [(key, n) for key in keys for n in dict.fromkeys(n for n, _ in _rows(key, profile))]


def separation_part(profile: str, part: tuple[str, int]) -> list[tuple[int, Record]]:
    """(row index, record) of the rows of :data:`ROWS` with this task key and n."""
    key, n = part
    out, side = [], None
    for k, (m, kind) in enumerate(_rows(key, profile)):
        if m != n:
            continue
        if side is None:
            side = model_side(key, n)
        else:   # the same run again: its time is already in the first record
            side = dataclasses.replace(side, seconds=0.0)
        out.append((k, separation_record(key, n, kind=kind, model_side=side)))
    return out


def separation_combine(keys):
    """The records in the order of :func:`separation_records` (per key, ROWS order)."""
    def combine(profile: str, seed: int, outputs: list) -> list[Record]:
        rows = [(keys.index(key), k, rec) for (key, _), out in zip(separation_parts(keys)(profile), outputs)
                for k, rec in out]
        return require_forced([rec for _, _, rec in sorted(rows, key=lambda t: t[:2])])
    return combine


T46_KEYS = ("index", "ar", "cgram3", "counting")


@register("T4.6-low", "separation on the Index reduction's family: Index, AR, c-gram (c = 3), Counting",
          parts=separation_parts(T46_KEYS), combine=separation_combine(T46_KEYS))
def separation_t46(profile: str, seed: int, part) -> list:
    # every instance is enumerated: nothing is random, the seed is unused
    return separation_part(profile, part)


@register("T4.7-low", "separation on the Index -> IsTree gadget family",
          parts=separation_parts(("istree",)), combine=separation_combine(("istree",)))
def separation_t47(profile: str, seed: int, part) -> list:
    return separation_part(profile, part)


# ------------------------------------------------ beyond exhaustive n: streamed (issue 27)
STREAMED = {"quick": {key: (16,) for key in ("index", "ar", "cgram3", "counting", "istree")},
            "full": {key: (16, 18, 20) for key in ("index", "ar", "cgram3", "counting", "istree")}}
"""(task key -> n) of the streamed separation records: 2^16 .. 2^20 of Alice's inputs,
beyond :data:`EXHAUSTIVE_MAX_N` (no n 2^n family, no full communication matrix)."""
STREAMED_SAMPLE = 24
"""Seeded x of the family checked on the model side (each with i = 1, n - 1, n and a
random i), beside x = 0^n, 1^n and the witness pair."""
STREAMED_BELOW_EXHAUSTIVE = 7
"""The RNN is checked on every instance at n' <= this, then on a seeded sample at
n' = its capacity."""


def streamed_cc(task: SeparationTask, n: int, batch: int = 1 << 14) -> tuple[int, int]:
    """(exact one-way CC, distinct rows) of the family at n, streamed: Alice's 2^n
    inputs in lexicographic batches, each row (``expected(x, i)``, i = 1..n, by the
    reduction's ``expected_batch``) hashed into a set of 2^n short byte strings (no
    2^n x n matrix is held). The family is total (every (x, i) valid), so the CC is
    ceil(log2 #distinct rows). ``expected_batch`` is checked against ``expected``
    entry by entry on the first batch's first 64 rows and on the last x."""
    red = task.reduction
    if red.expected_batch is None:
        raise ValueError(f"{task.key}: the reduction has no expected_batch")
    rows: set[bytes] = set()
    total = 1 << n
    for lo in range(0, total, batch):
        xs = W._bit_rows(lo, min(total, lo + batch), n)
        ans = red.expected_batch(xs)
        if lo == 0 or lo + batch >= total:
            for x, row in list(zip(xs.tolist(), ans.tolist()))[:64] + [(xs[-1].tolist(), ans[-1].tolist())]:
                want = [red.expected(x, i) for i in range(1, n + 1)]
                if row != want:
                    raise ValueError(f"{task.key}: expected_batch {row} != expected {want} at x = {x}")
        if ans.min() < 0 or ans.max() > 255:
            raise ValueError(f"{task.key}: answer tokens outside 0..255")
        packed = np.ascontiguousarray(ans.astype(np.uint8))
        rows.update(r.tobytes() for r in packed)
    return cc.bits_for(len(rows)), len(rows)


def streamed_rnn(task: SeparationTask, n: int) -> tuple[Any, int]:
    """The compact register behind the parser with at most n - 1 state bits: s =
    n - 3 - parser bits (state bits s + 2 + parser bits = n - 1)."""
    parser = T.ReductionFormatParser(task.layout, task.c)
    s = n - 3 - parser.bits
    if s < 1:
        raise ValueError(f"{task.key}: no compact register with at most n - 1 = {n - 1} state bits")
    return T.ParsedIndexRNN(CompactIndexRegister(s), parser, s), s


def rnn_sampled_below(rnn: RNN, task: SeparationTask, capacity: int, rng: np.random.Generator,
                      count: int = 64) -> tuple[int, int, str]:
    """``rnn`` on every instance at n' <= min(capacity, STREAMED_BELOW_EXHAUSTIVE) and on
    ``count`` seeded (x, i) at n' = capacity, against the task reference."""
    done, fails, first = rnn_correct_below(rnn, task, min(capacity, STREAMED_BELOW_EXHAUSTIVE))
    ref = task.reference(capacity)
    for _ in range(count):
        x = tuple(int(b) for b in rng.integers(0, 2, size=capacity))
        i = int(rng.integers(1, capacity + 1))
        toks = task.reduction.instance(x, i)
        run = run_rnn(rnn, toks, task.reduction.answer_tokens, max_cot=capacity)
        want = ref(toks.tolist())
        done += 1
        if run.answer != want:
            fails += 1
            first = first or f"n'={capacity} x={''.join(map(str, x))} i={i}: RNN {run.answer}, reference {want}"
    return done, fails, first


def streamed_separation_record(task_key: str, n: int, seed: int, sample: int = STREAMED_SAMPLE,
                               rnn: RNN | None = None, capacity: int | None = None,
                               claim: str | None = None) -> Record:
    """A separation record at n beyond exhaustive enumeration (module docstring, but):
    the witness from the streamed collision search over Alice's 2^n prefixes
    (``lowerbounds.witness.find_witness_exhaustive``: lexicographic, a dict of state
    keys, stops at the first repeat), re-run from s_0 (``witness_verified``); the exact
    CC streamed (:func:`streamed_cc`); the constant-size model on the witness pair and
    on a seeded sample of the family (x = 0^n, 1^n and ``sample`` random x, each
    with i = 1, n - 1, n and a random i); the RNN (at most n - 1 state bits) right on
    every instance at n' <= 7 and on a seeded sample at n' = its capacity."""
    task = TASKS[task_key]
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, n, 27, list(TASKS).index(task_key)])
    if rnn is None:
        rnn, capacity = streamed_rnn(task, n)
    capacity = int(capacity if capacity is not None else getattr(rnn, "capacity", 0) or 0)
    problems = []
    if not 1 <= capacity < n:
        problems.append(f"capacity {capacity} not in 1..n-1")
    cc_bits, distinct = streamed_cc(task, n)
    if cc_bits != n:
        problems.append(f"exact CC {cc_bits} bits != n = {n}")
    witness = W.find_witness(rnn, task.reduction, n, mode="exhaustive", max_cot=n)
    verified, why = verify_witness(rnn, task, witness, n)
    below, below_fails, below_first = rnn_sampled_below(rnn, task, capacity, rng) if capacity >= 1 else (0, 0, "")
    if below_fails:
        problems.append(f"RNN wrong below its capacity on {below_fails}/{below} instances ({below_first})")
    xs = [(0,) * n, (1,) * n] + [tuple(int(b) for b in rng.integers(0, 2, size=n)) for _ in range(sample)]
    cases = [(x, i) for x in xs for i in sorted({1, n - 1, n, int(rng.integers(1, n + 1))})]
    if witness.found:
        cases += [(tuple(witness.x), witness.i), (tuple(witness.x_prime), witness.i)]
    toks = np.stack([task.reduction.instance(x, i) for x, i in cases])
    alphabet = data_alphabet(task, toks)
    if alphabet != task.alphabet(n):
        problems.append(f"the sample's alphabet {alphabet} is not the reduction's {task.alphabet(n)}")
    side = (istree_model_side if task.builder is None else retrieval_model_side)(task, n, cases, toks,
                                                                                    task.alphabet(n))
    forced = rnn.state_bits < cc_bits
    wnote = (f"witness x={''.join(map(str, witness.x))} x'={''.join(map(str, witness.x_prime))} i={witness.i} "
             f"({witness.how}): RNN answers {_tok(witness.answer)} on both, wrong on {','.join(witness.wrong)}, "
             f"{'re-run and verified' if verified else 'NOT verified: ' + why}") if witness.found \
        else f"no witness: {witness.how}"
    note = (f"model {side.name}: {side.failures}/{side.instances} wrong (witness pair + seeded sample)"
            + (f" [{side.first_failure}]" if side.first_failure else "")
            + f"; CC {cc_bits} bits ({distinct} distinct rows, streamed over all 2^{n} x)"
            + f"; RNN {getattr(rnn, 'name', type(rnn).__name__)} ({rnn.state_bits} state bits, capacity {capacity}):"
            + f" {below - below_fails}/{below} right at n' <= {min(capacity, STREAMED_BELOW_EXHAUSTIVE)} (all) and "
              f"n' = {capacity} (sampled); {wnote}; collision "
            + ("forced by pigeonhole (state bits < CC)" if forced else "only found (state bits >= CC)")
            + (f"; FAILS: {'; '.join(problems)}" if problems else ""))
    return Record(claim or task.claim, f"{side.name} vs {getattr(rnn, 'name', type(rnn).__name__)}",
                  task.spec.name, n, side.instances, side.failures + len(problems), side.bits_used,
                  side.bits_declared, side.cot_max, side.cot_bound, side.params, rnn.state_bits,
                  round(time.perf_counter() - t0, 3), note=note, kind="separation",
                  family="reduction (seeded sample)", alphabet=task.alphabet(n), cc_bits=cc_bits,
                  collision_forced=forced, witness_verified=verified,
                  description=f"{task_key} separation at n = {n} (streamed collision search)")


def streamed_parts(keys):
    return lambda profile: [(key, n) for key in keys for n in STREAMED[profile].get(key, ())]


@register("T4.6-low", "separation beyond exhaustive n: streamed collision search, witness re-run",
          parts=streamed_parts(T46_KEYS), combine=lambda profile, seed, outs: require_forced([r for o in outs
                                                                                              for r in o]))
def streamed_t46(profile: str, seed: int, part) -> list:
    key, n = part
    return [streamed_separation_record(key, n, seed)]


@register("T4.7-low", "separation beyond exhaustive n: streamed collision search, witness re-run",
          parts=streamed_parts(("istree",)), combine=lambda profile, seed, outs: require_forced([r for o in outs
                                                                                                 for r in o]))
def streamed_t47(profile: str, seed: int, part) -> list:
    key, n = part
    return [streamed_separation_record(key, n, seed)]
