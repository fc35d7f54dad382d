"""``rnngap witness --task T --n N --model NAME [--bits B] [--seed S]
[--mode exhaustive|birthday] [--max-cot K] [--json PATH]``: break a bounded-memory
RNN on a concrete instance (claims T4.6-low, T4.7-low; ``lowerbounds/witness.py``).

The finder looks for two bit strings x != x' whose Alice prefixes (the task's
reduction from Index, ``lowerbounds/reductions.py``) lead the model to the same
state; a query i separating them gives two instances with different reference
answers on which the model, whatever CoT it generates (up to --max-cot tokens),
answers the same. The pair is re-verified by re-running the model; the command
prints both instances, the model's answers and CoT lengths, and the reference
answers of ``checks.tasks``.

Models (``--bits B`` sets the memory):

Details: docs/internals/commands.md#cmdwitness.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable, TextIO

from rnngap.checks.io.errors import UsageError, atomic_output, check_outputs
from rnngap.checks.io.progress import on_terminal

# Lazy imports: the functions below import rnngap's heavier modules
# (the task specs, the targets, lowerbounds.witness)
# only when the command runs, so that `rnngap --help` stays fast.

MODELS = {
    "register": ("capacity", 1, 56, 8),
    "random": ("fraction bits", 3, 40, 4),
    "toy-register": ("register bits", 1, 64, 8),
    "toy-register-cot": ("register bits", 1, 64, 8),
    "hash": ("state bits", 1, 64, 16),
}
"""name -> (meaning of --bits, min, max, default)."""

MAX_N = 4096
BIRTHDAY_WORK_CAP = 1 << 30
"""Token steps (draws x prefix tokens) the birthday search may take: about a minute
on the 2-core machine (some 15 million token steps a second). The search stops
there with no witness, and says so, rather than running for hours (2^24 draws of
4096 tokens)."""


def task_names() -> tuple[str, ...]:
    """The tasks with an Index reduction, as the CLI spells them (``cgram`` is c = 3)."""
    from rnngap.checks.tasks.hard import TASKS
    return TASKS


def add_command(sub) -> None:
    p = sub.add_parser("witness", help="find a verified failing instance of a bounded-memory RNN",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  rnngap witness --task index --n 8 --model register --bits 4\n"
                              "  rnngap witness --task istree --n 10 --model random --bits 6 --seed 1\n")
    p.add_argument("--task", required=True, help="one of index, ar, cgram, counting, istree (any name or "
                                                   "alias of a task with a reduction: cgram(c=4), 3-gram, ...)")
    p.add_argument("--n", required=True, type=int, help="Index length n of the reduction")
    p.add_argument("--model", required=True, help=f"one of {', '.join(MODELS)}")
    p.add_argument("--bits", type=int, default=None, help="the model's memory knob (see the module doc)")
    p.add_argument("--seed", type=int, default=0, help="seed (>= 0) of the birthday search and of the random model")
    p.add_argument("--mode", default=None, help="exhaustive (n <= 22) or birthday (default: exhaustive "
                                                "if n <= 22)")
    p.add_argument("--max-cot", type=int, default=None, help="CoT tokens allowed before the answer "
                                                             "(default 2n + 8)")
    p.add_argument("--json", metavar="PATH", help="also write the witness as JSON")
    p.set_defaults(func=run)


def reference_fn(task: str, n: int):
    """The plain-Python reference answer of the task's reduced instances (the task's spec)."""
    from rnngap.checks.tasks import task as task_spec
    return task_spec(task).reduction_reference(n)


def make_model(name: str, task: str, n: int, bits: int, seed: int):
    from rnngap.constructions.models import targets
    from rnngap.lowerbounds import targets_toy
    max_number = n + 4
    if name == "register":
        if task == "istree":
            return targets.IsTreeRegisterRNN(bits, max_number=max_number)
        return targets.register_target(bits, max_number=max_number)
    if name == "random":
        return targets.random_target(2, bits, seed=seed, max_number=max_number)
    if name == "toy-register":
        return targets_toy.IndexRegisterRNN(bits)
    if name == "toy-register-cot":
        return targets_toy.IndexRegisterRNN(bits, cot=True)
    if name == "hash":
        from rnngap.checks.tasks import task as task_spec
        return targets_toy.HashRNN(bits, task_spec(task).reduction.answer_tokens)
    raise ValueError(name)


class SearchProgress:
    """The birthday search's ``progress(draws, stored)`` callback
    (``lowerbounds/witness.py``) as throttled lines on ``stream`` (stderr, when
    it is a terminal), so a long search is seen advancing while stdout keeps
    only the result.

    The first call writes a line; later calls write one only if ``interval``
    seconds (of ``clock``) have passed since the last line, so at most about
    1/interval lines a second whatever the batch rate.

    >>> ticks = iter([0.0, 0.1, 0.2, 1.3])
    >>> p = SearchProgress(sys.stdout, interval=1.0, clock=lambda: next(ticks))
    >>> for draws in (4096, 8192, 12288):
    ...     p(draws, draws - 1)
    witness: birthday search: 4096 draws, 4095 state keys stored, 0.1 s
    witness: birthday search: 12288 draws, 12287 state keys stored, 1.3 s
    """

    def __init__(self, stream: TextIO, interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.stream, self.interval, self.clock = stream, interval, clock
        self.start = clock()
        self.last: float | None = None
        self.lines = 0

    def __call__(self, draws: int, stored: int) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            return
        self.last = now
        self.lines += 1
        self.stream.write(f"witness: birthday search: {draws} draws, {stored} state keys stored, "
                          f"{now - self.start:.1f} s\n")
        self.stream.flush()


def _names(tokens) -> str:
    from rnngap.constructions.machine.vocab import Vocab
    toks = [int(t) for t in tokens]
    vocab = Vocab(max([t - 32 for t in toks if t >= 32] + [0]))
    return " ".join(str(v) for v in vocab.decode(toks))


def run(args) -> int:
    from rnngap.lowerbounds import witness as W

    from rnngap.checks.tasks import task as task_spec
    task, model = str(args.task).lower(), str(args.model).lower()
    try:
        spec = task_spec(task)
    except ValueError:
        spec = None
    if spec is None or spec.reduction is None:
        raise UsageError(f"witness: unknown task {args.task!r}; known: {', '.join(task_names())}")
    if model not in MODELS:
        raise UsageError(f"witness: unknown model {args.model!r}; known: {', '.join(MODELS)}")
    if not 1 <= args.n <= MAX_N:
        raise UsageError(f"witness: --n must be in 1..{MAX_N}, got {args.n}")
    if args.seed < 0:
        raise UsageError(f"witness: --seed must be >= 0, got {args.seed}")
    what, lo, hi, default = MODELS[model]
    bits = default if args.bits is None else args.bits
    if not lo <= bits <= hi:
        raise UsageError(f"witness: --bits ({what} of {model}) must be in {lo}..{hi}, got {bits}")
    mode = args.mode or ("exhaustive" if args.n <= W.EXHAUSTIVE_MAX_N else "birthday")
    if mode not in ("exhaustive", "birthday"):
        raise UsageError(f"witness: unknown mode {args.mode!r}; use exhaustive or birthday")
    if mode == "exhaustive" and args.n > W.EXHAUSTIVE_MAX_N:
        raise UsageError(f"witness: n too large for exhaustive mode: n = {args.n} > {W.EXHAUSTIVE_MAX_N} "
                         "(use --mode birthday)")
    max_cot = 2 * args.n + 8 if args.max_cot is None else args.max_cot
    if max_cot < 0:
        raise UsageError(f"witness: --max-cot must be >= 0, got {max_cot}")
    check_outputs({"--json": args.json}, what="witness")
    red = spec.reduction
    rnn = make_model(model, spec.name, args.n, bits, args.seed)
    kw = {"max_cot": max_cot}
    capped = None
    if mode == "birthday":
        kw["seed"] = args.seed
        if on_terminal(sys.stderr):                     # nothing extra on a pipe or in a file
            kw["progress"] = SearchProgress(sys.stderr)
        per_draw = len(red.alice((0,) * args.n))
        kw["max_draws"] = max(1, min(W.default_max_draws(rnn.state_bits), BIRTHDAY_WORK_CAP // per_draw))
        if kw["max_draws"] < W.default_max_draws(rnn.state_bits):
            capped = (f"the work cap of {BIRTHDAY_WORK_CAP} token steps: {kw['max_draws']} draws of "
                      f"{per_draw} tokens")
    w = W.find_witness(rnn, red, args.n, mode=mode, **kw)
    name = getattr(rnn, "name", type(rnn).__name__)
    print(f"model {name} ({model}, --bits {bits}): {rnn.state_bits} declared state bits; task {task} via "
          f"reduction {red.name}, n = {args.n}, max CoT {max_cot}")
    print(f"search: {w.how} ({w.states_explored} prefixes, {w.seconds:.2f} s)")
    record = {"task": task, "model": model, "name": name, "bits": bits, "n": args.n, "mode": mode,
              "seed": args.seed, "state_bits": rnn.state_bits, "found": w.found, "how": w.how,
              "states_explored": w.states_explored, "seconds": w.seconds, "max_cot": max_cot,
              "max_draws": kw.get("max_draws")}
    if w.found:
        ref = reference_fn(task, args.n)
        print(f"x  = {''.join(map(str, w.x))}")
        print(f"x' = {''.join(map(str, w.x_prime))}")
        print(f"same state after Alice's prefixes; Bob's query i = {w.i} separates them (x_i = {w.x[w.i - 1]}, "
              f"x'_i = {w.x_prime[w.i - 1]})")
        runs = []
        for label, toks, ans, cot, exp in (("x", w.tokens, w.answer, w.cot, w.expected),
                                           ("x'", w.tokens_prime, w.answer_prime, w.cot_prime, w.expected_prime)):
            want = ref(toks.tolist())
            if want != exp:
                raise RuntimeError(f"reduction {red.name} disagrees with the {task} reference on {label}")
            ok = "correct" if ans == want else "WRONG"
            shown = "no answer within the CoT limit" if ans is None else _names([ans])
            print(f"instance {label}: {_names(toks)}")
            print(f"  model: {shown} after {len(cot)} CoT tokens; reference: {_names([want])}  -> {ok}")
            runs.append({"label": label, "tokens": [int(t) for t in toks], "answer": ans, "cot": cot,
                         "reference": want, "correct": ans == want})
        record.update(x=list(w.x), x_prime=list(w.x_prime), i=w.i, runs=runs, wrong=list(w.wrong))
    else:
        print("no fooling pair found: the prefixes reach distinct states (or the budget ran out)"
              + (f"; the search stopped at {capped}" if capped else ""))
    if args.json:
        with atomic_output(args.json, what="witness --json") as fh:
            json.dump(record, fh, indent=1)
    return 0 if w.found else 1
