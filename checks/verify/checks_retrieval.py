"""Checks of claim T4.6-up: the constant-size Transformers of
constructions/models/retrieval.py solve Index, AR, c-gram retrieval and Counting with
no CoT at their declared O(log n) precision, and MQAR per position.

Records (``rnngap verify --only T4.6-up``) per construction (``index``, ``ar``,
``cgram2`` / ``cgram3`` / ``cgram4``, ``counting``) run on the hard family
(``family="reduction"``, :mod:`checks.tasks.hard`): exhaustive at small Index
bit counts m, then sampled with adversarial first occurrences up to data length
2^14. A record's ``n`` is the task's data length; the note gives m. Further
records: saturate-mode necessity, one parameter count for every n and alphabet,
easy families, Counting's format limit (int64, then two-limb storage), the
raise-mode precision frontier (a measurement, not necessity evidence), and MQAR.
References are the plain-Python ``reference`` functions of checks.tasks.

Details (each record, costs): docs/internals/verify.md#checks_retrieval
"""
from __future__ import annotations

import time

import numpy as np

from rnngap.constructions.models import retrieval as R
from rnngap.constructions.machine.fixedpoint import MAX_MAGNITUDE_BITS
from rnngap.constructions.machine.vocab import BOS, NUMBER_BASE, QUERY

from . import frontier as FR
from .necessity import Outcome, batch_runner, necessity_record
from rnngap.checks.io.shared_data import shared_file
from .registry import Record, register
from rnngap.checks.catalog.records import by_name
from rnngap.checks.tasks import ar, hard, task

CLAIM = "T4.6-up"
MQAR_SAMPLE_NAME = "mqar_sample.npz"

def _construction(name: str, a: int, build, decl, exhaustive_alphabet: int) -> tuple:
    spec = task(name)
    return spec, a, spec.c or 2, build, decl, exhaustive_alphabet


def _record(name: str, c: bool = False, **fixed):
    """The builder of the construction record ``name`` (checks/catalog/records.py), as this
    module calls it: (n, a, c, fmt) -> Model (``c`` passed through when the record takes it)."""
    return lambda n, a, cc, fmt=None: by_name(name).call(
        n, alphabet=a, fmt=fmt, **({"c": cc} if c else {}), **{k: v(fmt) for k, v in fixed.items()})


# construction key -> (task spec (checks.tasks), alphabet for sampled runs, c, builder(n, a, c, fmt), declaration,
#                      exhaustive alphabet); c is the spec's (2 where the task has none: the declarations' c)
TASKS = {
    "index": _construction("index", 2, _record("index-transformer"), R.INDEX, 2),
    "ar": _construction("ar", 4, _record("ar-transformer"), R.AR, 3),
    "cgram2": _construction("cgram(c=2)", 3, _record("cgram-transformer", c=True), R.CGRAM, 3),
    "cgram3": _construction("cgram(c=3)", 2, _record("cgram-transformer", c=True), R.CGRAM, 3),
    "cgram4": _construction("cgram(c=4)", 3, _record("cgram-transformer", c=True), R.CGRAM, 3),
    "counting": _construction("counting", 3, _record("counting-transformer", check_margins=lambda fmt: fmt is None),
                              R.COUNTING, 3),
}
EXHAUSTIVE_MAX = {"quick": {"ar": 7, "cgram2": 6, "cgram3": 7, "cgram4": 7, "counting": 6},
                  "full": {"ar": 9, "cgram2": 9, "cgram3": 9, "cgram4": 9, "counting": 9}}
"""Easy family, every instance over alphabet 3 for n up to this (Index's exhaustive
run over binary strings IS its reduction image: see :data:`REDUCTION_EXHAUSTIVE_BITS`)."""
REDUCTION_EXHAUSTIVE_BITS = {"quick": {"index": 12, "ar": 8, "cgram2": 8, "cgram3": 8, "cgram4": 7, "counting": 8},
                             "full": {"index": 18, "ar": 12, "cgram2": 11, "cgram3": 11, "cgram4": 11,
                                      "counting": 12}}
"""Every x in {0,1}^m, every i, for m = 1 .. this many Index bits."""
INDEX_CHUNK_BITS = 12
"""Exhaustive Index above m = 12 runs in chunks of 2^12 strings (times m queries)."""
REDUCTION_SAMPLED = {"quick": {2 ** k: b for k, b in zip(range(4, 15), (16, 12, 8, 8, 6, 4, 4, 2, 2, 2, 2))},
                     "full": {2 ** k: b for k, b in zip(range(4, 17),
                                                        (64, 48, 32, 24, 16, 12, 8, 6, 4, 2, 2, 2, 2))}}
"""target data length n -> rows of the sampled reduction records (rows 0 and 1 are
the adversarial ones)."""
SAMPLED = {"quick": {2 ** k: b for k, b in zip(range(4, 15), (64, 48, 32, 24, 16, 12, 4, 2, 1, 1, 1))},
           "full": {2 ** k: b for k, b in zip(range(4, 21),
                                              (256, 192, 128, 96, 64, 32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1))}}
"""Easy family: n -> batch size of the sampled records."""
SAMPLED_MAX_LOG2N = {"quick": {}, "full": {"cgram2": 16, "counting": 13}}
"""Where a construction stops before the largest n of :data:`SAMPLED`: Counting at
its int64 format limit (n <= R.COUNTING_MAX_N = 11,583; the ``format limit`` record
shows larger n are refused), cgram2 at 2^16 (``ar``, the same model, goes on to
2^20). c-gram with c = 3, 4 goes to 2^20 (one instance there takes 20-30 minutes)."""
COUNTING_BEYOND_INT64 = {"quick": (R.COUNTING_MAX_N + 16, 2 ** 16),
                         "full": (R.COUNTING_MAX_N + 16, 2 ** 16, 2 ** 18, 2 ** 20)}
"""Reduction targets where Counting's declared format needs two limbs (one row
each; pruned attention on two limbs: about 1 s at 2^16, 15 s at 2^20 here)."""
NECESSITY = {"quick": (("exhaustive", 4), ("sampled", 2 ** 8)),
             "full": (("exhaustive", 4), ("exhaustive", 6), ("sampled", 2 ** 8), ("sampled", 2 ** 10),
                      ("sampled", 2 ** 12))}
"""Where the necessity records run, on reduction instances: ("exhaustive", m) = every
x in {0,1}^m and i; ("sampled", n) = 16 sampled rows at data length about n."""
NECESSITY_KEYS = ("index", "ar", "cgram3", "cgram4", "counting")
"""cgram2 is the ar model on the same (AR = c-gram c = 2) reduction instances."""
FRONTIER_MAX_LOG2N = {"quick": 12, "full": 16}
"""The frontier rows cover n = 2^4 .. 2^K (quick stops at 2^12)."""
COUNTING_FRONTIER_NECESSITY = {"quick": (64, 1024), "full": (64, 1024, 4096)}
"""n of the Counting necessity records on the frontier sample (its closest
comparisons c = n, t = n - 1: where the fraction bits are needed; the reduction
image only asks t = 0)."""

def _min_n(key: str) -> int:
    return TASKS[key][0].min_n


def generator_kwargs(key: str, a: int) -> dict:
    """Keywords of the spec's generator (c is bound in the spec; Counting near its threshold)."""
    return {"alphabet": a, **({"threshold": "near"} if TASKS[key][0].family == "counting" else {})}


def reference_of(key: str):
    return TASKS[key][0].reference_at()


def _max_n(key: str) -> int | None:
    return R.COUNTING_MAX_N if key == "counting" else None


def _sampled_ns(key: str, profile: str) -> list[int]:
    top = SAMPLED_MAX_LOG2N[profile].get(key)
    cap = _max_n(key)
    return [n for n in SAMPLED[profile] if (top is None or n <= 2 ** top) and (cap is None or n <= cap)]


def run_model(model, tokens: np.ndarray, ref, expected: np.ndarray | None = None) -> tuple[int, int]:
    """(instances, failures) of ``model`` on a batch against the plain-Python
    reference; with ``expected`` (the reduction's answers) a row where the
    reference disagrees with it counts as a failure too."""
    want = np.array([ref(row) for row in np.asarray(tokens).tolist()], dtype=np.int64)
    got = model.predict_batch(tokens)      # (it makes a read-only batch writeable itself)
    bad = got != want
    if expected is not None:
        bad |= want != np.asarray(expected)
    return len(want), int(bad.sum())


def index_batches(n: int, chunk_bits: int = INDEX_CHUNK_BITS, chunks: tuple[int, int] | None = None):
    """Every Index instance over {0, 1}^n with every query i = 1..n, in chunks:
    token arrays (2^min(n, chunk_bits) * n, n + 3), strings in lexicographic
    order (x_1 most significant), the query varying fastest. ``chunks = (start,
    stop)``: only the chunks start..stop-1 (of 2^(n - chunk_bits))."""
    lo = min(n, chunk_bits)
    low = (np.arange(1 << lo)[:, None] >> np.arange(lo - 1, -1, -1)) & 1
    queries = np.tile(np.arange(1, n + 1), 1 << lo)
    start, stop = chunks or (0, 1 << (n - lo))
    for high in range(start, stop):
        hi = (high >> np.arange(n - lo - 1, -1, -1)) & 1
        x = np.hstack([np.broadcast_to(hi, (1 << lo, n - lo)), low])
        x = np.repeat(x, n, axis=0)
        yield np.hstack([np.full((len(x), 1), BOS), x + NUMBER_BASE, np.full((len(x), 1), QUERY),
                         (queries + NUMBER_BASE)[:, None]]).astype(np.int64)


def _reduction_params(key: str, m: int) -> tuple[int, int, int]:
    """(data length n, alphabet a, c) of the reduction instances with m Index bits."""
    spec, _, c, *_ = TASKS[key]
    return hard.data_length(spec.family, m, c), hard.alphabet(spec.family, m, c), c


def _reduction_batches(key: str, m: int, chunk_bits: int = INDEX_CHUNK_BITS,
                       chunks: tuple[int, int] | None = None):
    """(tokens, expected answers) chunks of every reduction instance with m bits
    (Index above ``chunk_bits``: in chunks of 2^chunk_bits strings, only the chunks
    ``chunks`` = (start, stop), default all)."""
    family, c = TASKS[key][0].family, TASKS[key][2]
    if key == "index" and m > chunk_bits:
        for toks in index_batches(m, chunk_bits, chunks):
            yield toks, toks[np.arange(len(toks)), toks[:, -1] - NUMBER_BASE]
        return
    yield hard.reduction_instances(family, m, c)


INDEX_RANGE_CHUNKS = 8
"""Exhaustive Index above m = INDEX_CHUNK_BITS: one part per this many chunks of
2^12 strings (the full profile's m = 18 is 8 parts of 8 chunks)."""


def _reduction_exhaustive_bits(key: str, profile: str) -> range:
    c = TASKS[key][2]
    lo = max(1, -(-_min_n(key) // max(1, hard.data_length(TASKS[key][0].family, 1, c))))
    return range(lo, REDUCTION_EXHAUSTIVE_BITS[profile][key] + 1)


def _reduction_exhaustive_parts(key: str, profile: str, chunk_bits: int = INDEX_CHUNK_BITS,
                                range_chunks: int = INDEX_RANGE_CHUNKS) -> list[tuple]:
    """Part keys ("rex", m, chunk_bits, start, stop) of the exhaustive reduction
    record: one per m (stop = 0: every instance), Index above ``chunk_bits`` split
    into ranges of ``range_chunks`` chunks of 2^chunk_bits strings (chunks
    start..stop-1)."""
    out = []
    for m in _reduction_exhaustive_bits(key, profile):
        if key == "index" and m > chunk_bits:
            total = 1 << (m - chunk_bits)
            out += [("rex", m, chunk_bits, i, min(i + range_chunks, total)) for i in range(0, total, range_chunks)]
        else:
            out.append(("rex", m, chunk_bits, 0, 0))
    return out


def _reduction_exhaustive_part(key: str, m: int, chunk_bits: int, start: int, stop: int) -> dict:
    """One range of the exhaustive reduction run at m bits: instances, failures,
    used and declared bits, params (merged by :func:`_reduction_exhaustive_record`)."""
    _, _, c, build, decl, _ = TASKS[key]
    t0 = time.perf_counter()
    n, a, _ = _reduction_params(key, m)
    model = build(n, a, c)
    if model.fmt != decl.format(n, a, c):
        raise AssertionError(f"{model.name}: built at {model.fmt.name}, declared {decl.format(n, a, c).name}")
    n_inst = fails = 0
    for toks, want in _reduction_batches(key, m, chunk_bits, (start, stop) if stop else None):
        i, fl = run_model(model, toks, reference_of(key), want)
        n_inst, fails = n_inst + i, fails + fl
    r = model.resources
    return {"m": m, "n": n, "a": a, "instances": n_inst, "failures": fails, "used": r.used_precision_bits,
            "declared": r.precision_bits, "params": r.params, "seconds": time.perf_counter() - t0}


def _reduction_exhaustive_record(key: str, profile: str, pieces: list[dict]) -> tuple[Record, list[tuple[int, int, int]]]:
    """The one exhaustive reduction record from its ranges (in part order): per m the
    instances and failures summed and the used bits the maximum (the meter of one
    model run over every range), then over m as the unsplit run: the least slack
    first met, the params of the last m."""
    inst = fails = 0
    worst = None
    seen = []
    lo, top = pieces[0]["m"], REDUCTION_EXHAUSTIVE_BITS[profile][key]
    for m in dict.fromkeys(p["m"] for p in pieces):
        mine = [p for p in pieces if p["m"] == m]
        n_inst = sum(p["instances"] for p in mine)
        if n_inst != 2 ** m * m:
            raise AssertionError(f"{key} m={m}: enumerated {n_inst} instances, want m 2^m = {2 ** m * m}")
        inst, fails = inst + n_inst, fails + sum(p["failures"] for p in mine)
        used, declared, n, a = max(p["used"] for p in mine), mine[0]["declared"], mine[0]["n"], mine[0]["a"]
        slack = declared - used
        if worst is None or slack < worst[0]:
            worst = (slack, n, used, declared)
        seen.append((n, a, mine[0]["params"]))
    n_top, a_top, _ = _reduction_params(key, top)
    return (Record(CLAIM, key, TASKS[key][0].name, n_top, inst, fails,
                   worst[2], worst[3], params=seen[-1][2], seconds=round(sum(p["seconds"] for p in pieces), 3),
                   note=f"n = data length {n_top} at m = {top} (alphabets {seen[0][1]}..{a_top}); "
                        f"least precision slack at n = {worst[1]}",
                   family="reduction", alphabet=a_top,
                   description=f"reduction image, every x and i, Index bits m = {lo}..{top}"), seen)


def _reduction_exhaustive(key: str, profile: str) -> tuple[Record, list[tuple[int, int, int]]]:
    """Every reduction instance for m up to REDUCTION_EXHAUSTIVE_BITS (the parts run here in order)."""
    return _reduction_exhaustive_record(key, profile, [_reduction_exhaustive_part(key, *p[1:])
                                                       for p in _reduction_exhaustive_parts(key, profile)])


def _reduction_sampled_targets(key: str, profile: str) -> list[tuple[int, int]]:
    """(target data length, rows) of the sampled reduction records of ``key``."""
    c, family = TASKS[key][2], TASKS[key][0].family
    targets = dict(REDUCTION_SAMPLED[profile])
    beyond = set()
    if key == "counting":           # and at the largest n whose declared format fits int64, and past it
        targets[R.COUNTING_MAX_N] = 2
        for target in COUNTING_BEYOND_INT64[profile]:
            targets[target] = 1
            beyond.add(target)
    out = []
    for target, rows in targets.items():
        n, _, _ = _reduction_params(key, hard.index_bits(family, target, c))
        if n < _min_n(key) or (target not in beyond and _max_n(key) is not None and n > _max_n(key)):
            continue
        out.append((target, rows))
    return out


def _reduction_sampled_one(key: str, target: int, rows: int, seed: int) -> tuple[list[Record], list[tuple[int, int, int]]]:
    spec, _, c, build, decl, _ = TASKS[key]
    m = hard.index_bits(spec.family, target, c)
    n, a, _ = _reduction_params(key, m)
    t0 = time.perf_counter()
    toks, want = hard.sampled_reduction_instances(np.random.default_rng([seed, target, len(key), 7]), spec.family, m,
                                                  rows, c)
    model = build(n, a, c)
    i, fl = run_model(model, toks, reference_of(key), want)
    r = model.resources
    fmt_ok = model.fmt == decl.format(n, a, c)
    return [Record(CLAIM, model.name, spec.name, n,
                   i, fl + (0 if fmt_ok else 1), r.used_precision_bits, decl.total_bits(n, a, c),
                   params=r.params, seconds=round(time.perf_counter() - t0, 3),
                   note=f"Index bits m = {m}, query i = m in rows 0, 1; {model.fmt.name}"
                        + ("" if fmt_ok else f" NOT THE DECLARED FORMAT {decl.format(n, a, c).name}"),
                   family="reduction", alphabet=a,
                   description=f"reduction image sampled, adversarial first occurrences (m = {m})")], [(n, a, r.params)]


def _reduction_sampled(key: str, profile: str, seed: int) -> tuple[list[Record], list[tuple[int, int, int]]]:
    out, seen = [], []
    for target, rows in _reduction_sampled_targets(key, profile):
        recs, s = _reduction_sampled_one(key, target, rows, seed)
        out, seen = out + recs, seen + s
    return out, seen


def _exhaustive_one(key: str, n: int) -> dict:
    """Every easy-family instance at one n (merged by :func:`_exhaustive_record`)."""
    spec, _, c, build, decl, a = TASKS[key]
    t0 = time.perf_counter()
    model = build(n, a, c)
    i, fl = run_model(model, np.asarray(spec.enumerate_all(n, alphabet=a).tokens), reference_of(key))
    r = model.resources
    return {"n": n, "instances": i, "failures": fl, "used": r.used_precision_bits, "declared": r.precision_bits,
            "params": r.params, "seconds": time.perf_counter() - t0}


def _exhaustive_record(key: str, profile: str, pieces: list[dict]) -> tuple[Record, list[tuple[int, int, int]]]:
    spec, _, c, _, _, a = TASKS[key]
    inst = fails = 0
    worst = None
    seen = []
    for p in pieces:
        inst, fails = inst + p["instances"], fails + p["failures"]
        slack = p["declared"] - p["used"]
        if worst is None or slack < worst[0]:
            worst = (slack, p["n"], p["used"], p["declared"])
        seen.append((p["n"], a, p["params"]))
    top = EXHAUSTIVE_MAX[profile][key]
    return (Record(CLAIM, key, spec.name,
                   worst[1], inst, fails, worst[2], worst[3], params=seen[-1][2],
                   seconds=round(sum(p["seconds"] for p in pieces), 3),
                   note=f"easy family; least precision slack at n={worst[1]}",
                   family="all-instances", alphabet=a,
                   description=f"every instance a={a}" + (f" c={c}" if spec.family == "cgram" else "")
                   + f" n<={top}"), seen)


def _exhaustive(key: str, profile: str) -> tuple[Record, list[tuple[int, int, int]]]:
    """Easy family: every instance over alphabet 3 (not the hard family)."""
    return _exhaustive_record(key, profile, [_exhaustive_one(key, n)
                                             for n in range(_min_n(key), EXHAUSTIVE_MAX[profile][key] + 1)])


def _sampled_one(key: str, profile: str, n: int, seed: int) -> tuple[list[Record], list[tuple[int, int, int]]]:
    """Easy family at one n: a seeded generator batch (small alphabet, random first occurrences)."""
    spec, a, c, build, decl, _ = TASKS[key]
    batch = SAMPLED[profile][n]
    t0 = time.perf_counter()
    b = spec.generate(np.random.default_rng([seed, n, len(key)]), n, batch, **generator_kwargs(key, a))
    model = build(n, a, c)
    i, fl = run_model(model, np.asarray(b.tokens), reference_of(key))
    r = model.resources
    fmt_ok = model.fmt == decl.format(n, a, c)
    return [Record(CLAIM, model.name, spec.name, n, i,
                   fl + (0 if fmt_ok else 1), r.used_precision_bits, decl.total_bits(n, a, c), 0, 0,
                   r.params, 0, round(time.perf_counter() - t0, 3),
                   note="easy family; " + model.fmt.name + ("" if fmt_ok else
                                          f" NOT THE DECLARED FORMAT {decl.format(n, a, c).name}"),
                   family="random", alphabet=a,
                   description=f"sampled a={a}" + (f" c={c}" if spec.family == "cgram" else ""))], [(n, a, r.params)]


def _sampled(key: str, profile: str, seed: int) -> tuple[list[Record], list[tuple[int, int, int]]]:
    """Easy family: seeded generator batches at every n of :data:`SAMPLED`."""
    out, seen = [], []
    for n in _sampled_ns(key, profile):
        recs, s = _sampled_one(key, profile, n, seed)
        out, seen = out + recs, seen + s
    return out, seen


PARAM_PROBE_N = (16, 1024, 2 ** 14)
"""Extra (n, alphabet) points where the models are only BUILT (not run) for the
parameter record: alphabets 1, n + 1 and 2n + 2 at each n (Counting: n capped at
its format limit, 2n + 2 only where the declared format still fits)."""


def param_probe(key: str) -> list[tuple[int, int, int]]:
    """(n, a, params) of models built at :data:`PARAM_PROBE_N` x alphabets {1, n + 1, 2n + 2}."""
    _, _, c, build, decl, _ = TASKS[key]
    out = []
    for n in PARAM_PROBE_N:
        n = max(n if _max_n(key) is None else min(n, _max_n(key)), _min_n(key))
        for a in (1, n + 1, 2 * n + 2):
            if decl.int_bits(n, a, c) + decl.frac_bits(n) > 62:
                continue
            out.append((n, a, build(n, a, c).resources.params))
    return out


def params_record(key: str, seen: list[tuple[int, int, int]]) -> Record:
    """One parameter count for every (n, alphabet) built: failures = distinct counts - 1."""
    counts = sorted({p for _, _, p in seen})
    alphabets = sorted({a for _, a, _ in seen})
    with_n1 = sum(1 for n, a, _ in seen if a >= n + 1)
    return Record(CLAIM, key, TASKS[key][0].name, max(n for n, _, _ in seen),
                  len(seen), len(counts) - 1, params=counts[-1],
                  note=f"param counts seen: {counts} over {len(seen)} models, n = {min(n for n, _, _ in seen)}.."
                       f"{max(n for n, _, _ in seen)}, alphabets {alphabets[0]}..{alphabets[-1]} "
                       f"({with_n1} of them with alphabet >= n + 1)",
                  family="reduction", alphabet=alphabets[-1],
                  description="params identical at every n and alphabet checked")


def describe_instance(row: np.ndarray) -> str:
    """A long instance shown by its head and tail (the query is at the end)."""
    toks = [int(t) for t in row]
    show = lambda ts: " ".join("[BOS]" if t == BOS else "[QUERY]" if t == QUERY else str(t - NUMBER_BASE)
                               if t >= NUMBER_BASE else f"#{t}" for t in ts)
    if len(toks) <= 24:
        return show(toks)
    return f"{show(toks[:8])} ... {show(toks[-8:])} (L = {len(toks)})"


def necessity_records(key: str, profile: str, seed: int, where=None) -> list[Record]:
    """Saturate-mode frontiers (checks/verify/necessity.py) on reduction instances at the
    points of :data:`NECESSITY` (or ``where``): integer bits re-encoded, fraction
    bits rebuilt at each f (every sharpness re-derived; Counting without its
    comparison-margin assertion, so the run decides)."""
    spec, _, c, build, decl, _ = TASKS[key]
    family = spec.family
    out = []
    for how, size in where or NECESSITY[profile]:
        if how == "exhaustive":
            m = size
            toks, want = hard.reduction_instances(family, m, c)
        else:
            m = hard.index_bits(family, size, c)
            toks, want = hard.sampled_reduction_instances(np.random.default_rng([seed, size, 11]), family, m, 16, c)
        n, a, _ = _reduction_params(key, m)
        model = build(n, a, c)
        what = f"necessity on the reduction image ({how}, m = {m})"
        if key == "counting":
            # the reduction asks only count > 0 (f = 2 suffices); the declared f is
            # sized for the closest comparisons c = n, t = n - 1, n: added at the
            # smallest and largest number of the same alphabet
            close = np.asarray([[BOS] + [NUMBER_BASE + q] * n + [QUERY, NUMBER_BASE + q, NUMBER_BASE + t]
                                for q in sorted({0, a - 1}) for t in (n - 1, n)], dtype=np.int64)
            if close.shape[1] == toks.shape[1]:
                toks = np.concatenate([toks, close])
                want = np.concatenate([want, [spec.reference(list(map(int, r))) for r in close]])
                what += f" + {len(close)} closest comparisons"
        rec = necessity_record(CLAIM, model.name, what, n,
                               task=spec.name, family="reduction", alphabet=a, declared=decl.format(n, a, c),
                               run=batch_runner(toks, want, describe_instance), instances=len(want), model=model,
                               build_frac=lambda fmt, n=n, a=a: build(n, a, c, fmt))
        rec.note = f"Index bits m = {m}, {len(want)} instances; " + rec.note
        out.append(rec)
    return out


def counting_frontier_necessity(profile: str, ns=None) -> list[Record]:
    """Counting's necessity on the fixed frontier sample (checks/verify/frontier.py: the
    closest comparisons c = n, t = n - 1 and c = t = n at alphabet 3), where its
    O(log n) fraction bits are needed."""
    spec, _, c, build, decl, _ = TASKS["counting"]
    a = FR.CONSTRUCTIONS["counting"][1]
    out = []
    for n in ns or COUNTING_FRONTIER_NECESSITY[profile]:
        toks, want = FR.frontier_sample("counting", n)
        model = build(n, a, c)
        out.append(necessity_record(CLAIM, model.name, "necessity on the closest comparisons (frontier sample)", n,
                                    task=spec.name, family="frontier-sample", alphabet=a, declared=decl.format(n, a, c),
                                    run=batch_runner(toks, want, describe_instance), instances=len(want),
                                    model=model, build_frac=lambda fmt, n=n: build(n, a, c, fmt)))
    return out


def _format_limit() -> Record:
    """Counting's declared format fits int64 at n = COUNTING_MAX_N with alphabet n + 1;
    at n + 1 (alphabet n + 2) it is built in two-limb storage at its declared format;
    past COUNTING_WIDE_MAX_N it is refused with a clear error."""
    t0 = time.perf_counter()
    lim, top = R.COUNTING_MAX_N, R.COUNTING_WIDE_MAX_N
    fits = R.COUNTING.format(lim, lim + 1)
    I2, f2 = R.COUNTING.int_bits(lim + 1, lim + 2), R.COUNTING.frac_bits(lim + 1)
    at, past = R.counting_transformer(lim, alphabet=lim + 1).fmt, R.counting_transformer(lim + 1, alphabet=lim + 2).fmt
    try:
        R.counting_transformer(top + 1, alphabet=top + 2)
        refused, how = False, "built anyway"
    except ValueError as e:
        refused, how = "beyond the two-limb executor" in str(e), str(e)[:120]
    ok = (refused and I2 + f2 > 62 and fits.int_bits + fits.frac_bits <= 62 and at == fits and not at.wide
          and past.wide and (past.int_bits, past.frac_bits) == (I2, f2))
    return Record(CLAIM, "counting", TASKS["counting"][0].name, lim + 1, 1, 0 if ok else 1,
                  seconds=max(round(time.perf_counter() - t0, 3), 0.001),
                  note=f"declared {fits.name} at n = {lim} (int64); {past.name} (I + f = {I2 + f2} > 62) at "
                       f"n = {lim + 1}; refused at n = {top + 1}: "
                       + ("as documented: " if ok else "NOT AS DOCUMENTED: ") + how,
                  family="reduction", alphabet=lim + 2,
                  description=f"format limit: int64 storage to n = {lim} at alphabet n + 1, two limbs from "
                              f"n = {lim + 1} to {top}")


def mqar_sample_records(profile: str, seed: int) -> list[Record]:
    """The Zoology MQAR sample (every labelled position); NOT CHECKED without its file."""
    t0 = time.perf_counter()
    MQAR_SAMPLE = shared_file(MQAR_SAMPLE_NAME)
    if MQAR_SAMPLE is None:
        return [Record(CLAIM, "mqar", ar.MQAR_SPEC.name, 0, 0, 0, checked=False,
                       note=f"NOT CHECKED: shared data file {MQAR_SAMPLE_NAME} not found "
                            f"(set RNNGAP_SHARED_DATA to the directory holding it)",
                       family="zoology-sample", alphabet=R.MQAR_MAX_VALUE, description="Zoology MQAR sample")]
    inst = fails = 0
    used = decl = params = 0
    for name, (X, Y) in ar.load_zoology_npz(MQAR_SAMPLE).items():
        model = R.mqar_transformer(X.shape[1])
        P = R.mqar_predict(X, model)
        mask = Y != ar.ZOOLOGY_IGNORE
        inst += int(mask.sum())
        fails += int((P[mask] != Y[mask]).sum())
        used = max(used, model.resources.used_precision_bits)
        decl = max(decl, model.resources.precision_bits)
        params = model.resources.params
    return [Record(CLAIM, "mqar", ar.MQAR_SPEC.name, 256, inst, fails, used, decl,
                   0, 0, params, 0, round(time.perf_counter() - t0, 3), note=str(MQAR_SAMPLE.name),
                   family="zoology-sample", alphabet=R.MQAR_MAX_VALUE,
                   description="Zoology MQAR sample (labelled positions)")]


def mqar_random_records(profile: str, seed: int) -> list[Record]:
    """Seeded random MQAR sequences (values < 2^16, every position); needs no data file."""
    L, batch = {"quick": (1024, 2), "full": (4096, 4)}[profile]
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, 4096])
    X = rng.integers(0, R.MQAR_MAX_VALUE, size=(batch, L))
    X[:, L // 2:] = X[:, rng.permutation(L // 2)]            # every value of the second half repeats
    X[:, 1::7] = rng.integers(0, 64, size=X[:, 1::7].shape)  # plus many small repeated values
    model = R.mqar_transformer(L)
    P = R.mqar_predict(X, model)
    want = np.array([ar.mqar_reference(list(map(int, r))) for r in X], dtype=np.int64)
    r = model.resources
    return [Record(CLAIM, model.name, ar.MQAR_SPEC.name, L, int(want.size),
                   int((P != want).sum()), r.used_precision_bits, r.precision_bits, 0, 0, r.params, 0,
                   round(time.perf_counter() - t0, 3), note=model.fmt.name, family="random",
                   alphabet=R.MQAR_MAX_VALUE, description="MQAR random, values < 2^16, every position")]


MQAR_NECESSITY_LENGTHS = {"quick": (64,), "full": (64, 512)}


def mqar_necessity_records(profile: str, seed: int) -> list[Record]:
    """Saturate-mode necessity of the MQAR model's declared bits on seeded random
    sequences (values up to 2^16 - 1 with repeats): every position's prediction
    must equal :func:`checks.tasks.ar.mqar_reference`."""
    out = []
    for L in MQAR_NECESSITY_LENGTHS[profile]:
        rng = np.random.default_rng([seed, L, 5])
        X = rng.integers(0, R.MQAR_MAX_VALUE, size=(4, L))
        X[:, L // 2:] = X[:, rng.permutation(L // 2)]
        X[:, 1::5] = rng.integers(0, 8, size=X[:, 1::5].shape)
        X[0, :4] = [R.MQAR_MAX_VALUE - 1, 0, R.MQAR_MAX_VALUE - 1, 0]
        want = np.array([ar.mqar_reference(list(map(int, r))) for r in X], dtype=np.int64)

        def run(model, X=X, want=want) -> Outcome:
            out = Outcome(int(want.size))
            try:
                P = R.mqar_predict(X, model)
            except Exception as e:   # never a wrong answer (checks/verify/necessity.py)
                out.add("raised", f"{type(e).__name__}: {str(e)[:120]}", int(want.size))
                return out
            bad = np.argwhere(P != want)
            if len(bad):
                b, t = map(int, bad[0])
                out.add("wrong", f"row {b} position {t}: value {int(X[b, t])} -> {int(P[b, t])}, "
                                 f"want {int(want[b, t])}", len(bad))
            return out

        model = R.mqar_transformer(L)
        out.append(necessity_record(CLAIM, model.name, "necessity, MQAR random (every position)", L,
                                    task=ar.MQAR_SPEC.name, family="random", alphabet=R.MQAR_MAX_VALUE, declared=R.MQAR.format(L),
                                    run=run, instances=int(want.size), model=model,
                                    build_frac=lambda fmt, L=L: R.mqar_transformer(L, fmt)))
    return out


def frontier_records(profile: str, constructions=None) -> list[Record]:
    """One record per checks/verify/frontier.py construction: n = 2^4 .. 2^K, the fitted
    slopes in the note, one failure per n where the declaration is below the
    measured frontier (or the frontier is not exact: see frontier.row_violations).
    Raise mode: a growth measurement, not necessity evidence."""
    K = FRONTIER_MAX_LOG2N[profile]
    ns = [2 ** k for k in range(4, K + 1)]
    out = []
    for name in constructions or FR.CONSTRUCTIONS:
        t0 = time.perf_counter()
        # n whose declared format outgrows int64 (the construction refuses to be
        # built there: Counting above n = 11,583) are not run; the note says so
        decl, a, c = FR.CONSTRUCTIONS[name]
        fits = [n for n in ns if decl.int_bits(n, a, c) + decl.frac_bits(n) <= MAX_MAGNITUDE_BITS]
        rows = FR.frontier_table([name], fits)
        s = FR.frontier_summary(rows, name)
        last = rows[-1]
        bad = sorted({n for n, _ in s["violations"]})
        per_n = " ".join(f"{r['n'].bit_length() - 1}:{r['f_min']}/{r['f_declared']},"
                         f"{r['I_min_at_f_declared']}/{r['I_declared']}" for r in rows)
        note = "raise mode (growth of the bits, not necessity evidence: see the necessity records); "
        note += (FR.format_slopes(s) + "; declared >= frontier at every n" if not bad else
                 FR.format_slopes(s) + f"; DECLARED BELOW THE FRONTIER at n = {bad}: {s['violations'][0][1]}")
        note += f"; log2 n: f_min/f_decl, I_min/I_decl at f_decl = {per_n}"
        if len(fits) < len(ns):
            note += (f"; n = 2^{fits[-1].bit_length()}..2^{K} not run: the declared format exceeds int64 there "
                     f"(the construction refuses those n)")
        out.append(Record(CLAIM, name, task(name).name, fits[-1],
                          s["instances"], len(bad), last["p_min"], last["p_declared"],
                          seconds=round(time.perf_counter() - t0, 3), note=note, family="frontier-sample",
                          alphabet=FR.CONSTRUCTIONS[name][1],
                          description=f"precision frontier n=2^4..2^{fits[-1].bit_length() - 1} "
                                      f"(fixed seeded sample)"))
    return out


def _construction_parts(key: str, profile: str) -> list[tuple]:
    """The part keys of one construction's records, in the order of the records:
    exhaustive reduction ranges, sampled reduction targets, necessity points,
    easy-family n (exhaustive, then sampled), the parameter probe."""
    out = _reduction_exhaustive_parts(key, profile)
    out += [("rsam", target, rows) for target, rows in _reduction_sampled_targets(key, profile)]
    if key in NECESSITY_KEYS:
        out += [("nec", how, size) for how, size in NECESSITY[profile]]
    if key != "index":       # Index's easy family over {0, 1} is its reduction image (above)
        out += [("ex", n) for n in range(_min_n(key), EXHAUSTIVE_MAX[profile][key] + 1)]
    out += [("sam", n) for n in _sampled_ns(key, profile)]
    return out + [("probe",)]


def _construction_part(key: str, profile: str, seed: int, part: tuple):
    """One part of :func:`_construction_parts`: (kind, what the kind's merge needs)."""
    kind = part[0]
    if kind == "rex":
        return kind, _reduction_exhaustive_part(key, *part[1:])
    if kind == "rsam":
        return kind, _reduction_sampled_one(key, part[1], part[2], seed)
    if kind == "nec":
        return kind, (necessity_records(key, profile, seed, where=(part[1:],)), [])
    if kind == "ex":
        return kind, _exhaustive_one(key, part[1])
    if kind == "sam":
        return kind, _sampled_one(key, profile, part[1], seed)
    if kind == "probe":
        t0 = time.perf_counter()
        return kind, (param_probe(key), time.perf_counter() - t0)
    raise ValueError(f"unknown part {part!r}")


def _construction_combine(key: str, profile: str, outputs: list) -> list[Record]:
    """The records of one construction from its parts' outputs (in part order), as
    the unsplit run wrote them: [exhaustive reduction] + sampled reduction +
    [params] + necessity + [easy exhaustive] + easy sampled."""
    by = lambda kind: [o for k, o in outputs if k == kind]
    rex, s1 = _reduction_exhaustive_record(key, profile, by("rex"))
    rsam = [r for recs, _ in by("rsam") for r in recs]
    s2 = [x for _, s in by("rsam") for x in s]
    nec = [r for recs, _ in by("nec") for r in recs]
    extra, s3 = [], []
    if by("ex"):
        ex, s3 = _exhaustive_record(key, profile, by("ex"))
        extra.append(ex)
    sam = [r for recs, _ in by("sam") for r in recs]
    s4 = [x for _, s in by("sam") for x in s]
    (probe, probe_s), = by("probe")
    t0 = time.perf_counter()
    par = params_record(key, s1 + s2 + s3 + s4 + probe)
    par.seconds = round(probe_s + time.perf_counter() - t0, 3)
    return [rex] + rsam + [par] + nec + extra + sam


def _construction_records(key: str, profile: str, seed: int) -> list[Record]:
    """Every record of one construction (its parts run here in order)."""
    return _construction_combine(key, profile, [_construction_part(key, profile, seed, p)
                                                for p in _construction_parts(key, profile)])


def _keyed_parts(keys: tuple[str, ...], extra=lambda profile: []):
    """Part keys (construction key, *part) over ``keys``, then ``extra(profile)``."""
    return lambda profile: [(key, *p) for key in keys for p in _construction_parts(key, profile)] + extra(profile)


def _keyed_cost(part: tuple) -> int:
    """A sampled part at data length n costs about n^2 (models of 2 or more layers
    attend at every position): those at large n dominate the full profile (a
    parallel engine starts them first; 0 for the others)."""
    return part[2] ** 2 // 1024 if len(part) > 2 and part[1] in ("sam", "rsam") else 0


def _keyed_part(profile: str, seed: int, part: tuple):
    return part[0], _construction_part(part[0], profile, seed, part[1:])


def _keyed_combine(keys: tuple[str, ...]):
    def combine(profile: str, seed: int, outputs: list) -> list[Record]:
        out = [r for key in keys for r in _construction_combine(key, profile, [o for k, o in outputs if k == key])]
        return out + [r for k, recs in outputs if k not in keys for r in recs]
    return combine


@register(CLAIM, "Index via position match (1 layer)", parts=_keyed_parts(("index",)),
          combine=_keyed_combine(("index",)), cost=lambda part: _keyed_cost(part) // 1024)
def check_index(profile: str, seed: int, part) -> list:
    return _keyed_part(profile, seed, part)


@register(CLAIM, "AR via shift + first-occurrence match (2 layers)", parts=_keyed_parts(("ar",)),
          combine=_keyed_combine(("ar",)), cost=_keyed_cost)
def check_ar(profile: str, seed: int, part) -> list:
    return _keyed_part(profile, seed, part)


@register(CLAIM, "c-gram (c = 2, 3, 4) via c-1 shift heads + joint match (2 layers)",
          parts=_keyed_parts(("cgram2", "cgram3", "cgram4")), combine=_keyed_combine(("cgram2", "cgram3", "cgram4")),
          cost=lambda part: _keyed_cost(part) * (2 if part[0] == "cgram3" else 3 if part[0] == "cgram4" else 1))
def check_cgram(profile: str, seed: int, part) -> list:
    return _keyed_part(profile, seed, part)


def _counting_extra_parts(profile: str) -> list[tuple]:
    return [("frontier-necessity", n) for n in COUNTING_FRONTIER_NECESSITY[profile]] + [("format-limit",)]


@register(CLAIM, "Counting via after-query flag, fetch tau(q), code-match counting head, readout comparison "
                 "(3 layers, alphabet-free)", parts=_keyed_parts(("counting",), _counting_extra_parts),
          combine=_keyed_combine(("counting",)))
def check_counting(profile: str, seed: int, part) -> list:
    if part[0] == "frontier-necessity":
        return part[0], counting_frontier_necessity(profile, ns=(part[1],))
    if part[0] == "format-limit":
        return part[0], [_format_limit()]
    return _keyed_part(profile, seed, part)


@register(CLAIM, "precision frontier (fraction and integer bits vs log2 n, raise mode; declared at or above)",
          parts=lambda profile: list(FR.CONSTRUCTIONS))
def check_frontier(profile: str, seed: int, part: str) -> list[Record]:
    return frontier_records(profile, [part])


@register(CLAIM, "MQAR per position, seeded random sequences (no data file)")
def check_mqar_random(profile: str, seed: int) -> list[Record]:
    return mqar_random_records(profile, seed) + mqar_necessity_records(profile, seed)


@register(CLAIM, "MQAR per position, Zoology sample (rnngap predict ar)")
def check_mqar_sample(profile: str, seed: int) -> list[Record]:
    return mqar_sample_records(profile, seed)
