"""Checks of claim T4.6-up: the constant-size Transformers of
constructions/retrieval.py solve Index, AR, c-gram retrieval and Counting with
no CoT at their declared O(log n) precision, and MQAR per position.

Records (``rnngap verify --only T4.6-up``), per construction: ``index``, ``ar``
(``ar_model``, the AR task), ``cgram2`` / ``cgram3`` / ``cgram4`` (``cgram_model``
with c = 2, 3, 4 on the c-gram task; c = 2 is the same model as ``ar``, checked
against the c-gram generator and reference) and ``counting``:

* ``exhaustive``: every instance (Index: binary strings, every query; AR, c-gram
  and Counting: alphabet 3) for every n up to a profile bound (:data:`EXHAUSTIVE_MAX`:
  quick Index n <= 12, the others n <= 7; full 18 and 9); one record per
  construction, showing the n with the least precision slack;
* ``sampled``: seeded generator batches at every n = 2^k (:data:`SAMPLED`: quick
  k = 4..14 for every construction; full k = 4..20 for Index, AR and c-gram with
  c = 3, 4, 4..17 for Counting, 4..16 for cgram2: see :data:`SAMPLED_MAX_LOG2N`
  and the costs below);
* ``params constant``: the parameter count at every n checked is the same;
* ``below bound``: one integer bit below the bits a run used fails (overflow), and
  for Counting one fraction bit below the measured frontier fails on the fixed
  frontier sample (checks/frontier.py);
* ``format limit`` (Counting): its declared p(n) ~ 3 log2 n passes int64 storage
  (I + f <= 62) beyond n = 2^17, so counting_model refuses n = 2^18 with a clear
  error; the record checks that it does. Counting is therefore sampled to 2^17 in
  the full profile, not 2^20;
* ``precision frontier``: for every construction of checks/frontier.py and n = 2^4
  .. 2^K (:data:`FRONTIER_MAX_LOG2N`: quick K = 12, full K = 16), the fewest fraction
  bits exactly correct on the fixed seeded sample and the integer frontier at the
  declared f, with the least-squares slopes against log2 n in the note; the record
  fails if the declared bits are below the frontier at some n;
* ``mqar``: the Zoology sample (every labelled position) and seeded long sequences
  against :func:`checks.tasks.ar.mqar_reference`.

Cost (one instance on the shared 2-core machine, kernels of commit 89ae307): a
2-layer model attends at every position, O(n^2) per instance: AR about 0.5 s at
2^14, 3.4 s at 2^16, 46 s at 2^18, 2 min at 2^19, 10 min at 2^20; c = 3 4 min at
2^19 and 22 min at 2^20, c = 4 7 min at 2^19 (about 30 min expected at 2^20; the
full profile runs both to 2^20, one instance each); ``cgram2`` is the same model as ``ar``
(sampled to 2^20 there) and stops at 2^16. Counting's scores take the 128-bit
product path (its format is wide): about 7 s at 2^14, 2 min at 2^16, 8 min at
2^17. Index (one layer, O(n)) is about 1 s at 2^18. Quick samples every
construction to 2^14 with one instance at the largest sizes (T4.6-up quick:
about 45 s, of which the frontier records 25 s and Counting at 2^13, 2^14 9 s);
full takes about two hours (sampled ~90 min with c-gram at 2^20; frontier ~30 min, of which Counting 23
min, 14 at 2^16; exhaustive ~2 min, Index to n = 18 1.8 min).

References are the plain-Python ``reference`` functions of checks.tasks.
"""
from __future__ import annotations

import time

import numpy as np

from constructions import retrieval as R
from constructions.fixedpoint import FixedFormat, PrecisionError
from constructions.vocab import BOS, NUMBER_BASE, QUERY

from . import frontier as FR
from .checks_declarations import FUNCTIONS
from .declarations import declare
from .shared_data import shared_file
from .registry import Record, register
from .tasks import ar, cgram, counting, index

CLAIM = "T4.6-up"
MQAR_SAMPLE_NAME = "mqar_sample.npz"

# construction key -> (task module, alphabet for sampled runs, c, builder, declaration, exhaustive alphabet)
TASKS = {
    "index": (index, 2, 2, lambda n, a, c: R.index_model(n, a), R.INDEX, 2),
    "ar": (ar, 4, 2, lambda n, a, c: R.ar_model(n, a), R.AR, 3),
    "cgram2": (cgram, 3, 2, lambda n, a, c: R.cgram_model(n, a, c), R.CGRAM, 3),
    "cgram3": (cgram, 2, 3, lambda n, a, c: R.cgram_model(n, a, c), R.CGRAM, 3),
    "cgram4": (cgram, 3, 4, lambda n, a, c: R.cgram_model(n, a, c), R.CGRAM, 3),
    "counting": (counting, 3, 2, lambda n, a, c: R.counting_model(n, a), R.COUNTING, 3),
}
FRONTIER_NAME = {"index": "index", "ar": "ar", "cgram3": "cgram", "cgram4": "cgram4", "counting": "counting"}
"""The checks/frontier.py construction with the same model, alphabet and c (cgram2 has none)."""
EXHAUSTIVE_MAX = {"quick": {"index": 12, "ar": 7, "cgram2": 7, "cgram3": 7, "cgram4": 7, "counting": 7},
                  "full": {"index": 18, "ar": 9, "cgram2": 9, "cgram3": 9, "cgram4": 9, "counting": 9}}
INDEX_CHUNK_BITS = 12
"""Exhaustive Index above n = 12 runs in chunks of 2^12 strings (times n queries)."""
SAMPLED = {"quick": {2 ** k: b for k, b in zip(range(4, 15), (64, 48, 32, 24, 16, 12, 4, 2, 1, 1, 1))},
           "full": {2 ** k: b for k, b in zip(range(4, 21),
                                              (256, 192, 128, 96, 64, 32, 16, 8, 4, 2, 1, 1, 1, 1, 1, 1, 1))}}
"""n -> batch size of the sampled records."""
SAMPLED_MAX_LOG2N = {"quick": {}, "full": {"cgram2": 16, "counting": 17}}
"""Where a construction stops before the largest n of :data:`SAMPLED`: Counting at
its int64 format limit (the ``format limit`` record shows 2^18 is refused), cgram2
at 2^16 (``ar``, the same model, goes on to 2^20). c-gram with c = 3, 4 goes to
2^20 (one instance there takes 20-30 minutes)."""
COUNTING_FORMAT_LIMIT = 2 ** 17
"""The largest n whose declared Counting format fits int64 storage (I + f <= 62)."""
FRONTIER_MAX_LOG2N = {"quick": 12, "full": 16}
"""The frontier records cover n = 2^4 .. 2^K (quick stops at 2^12, where Counting's
row takes 15 s; its rows at 2^13..2^16 take 0.6, 2.5, 4 and 14 minutes)."""

# the sympy declarations (symbol n only: alphabet and c fixed at the checked values)
for _key, (_, _a, _c, _, _decl, _) in TASKS.items():
    _sub = {R.A: _a, R.C: _c}
    declare(CLAIM, f"retrieval.{_key}", "int_bits", _decl.int_expr.subs(_sub), "log")
    declare(CLAIM, f"retrieval.{_key}", "frac_bits", _decl.frac_expr, "constant" if _key != "counting" else "log")
declare(CLAIM, "retrieval.mqar", "int_bits", R.MQAR.int_expr, "log")
# register the Python functions so the declarations check compares them with sympy
for _key, (_, _a, _c, _, _decl, _) in TASKS.items():
    FUNCTIONS[(f"retrieval.{_key}", "int_bits")] = (lambda d, a, c: (lambda n: d.int_bits(n, a, c)))(_decl, _a, _c)
    FUNCTIONS[(f"retrieval.{_key}", "frac_bits")] = _decl.frac_bits
FUNCTIONS[("retrieval.mqar", "int_bits")] = lambda n: R.MQAR.int_bits(n)


def _min_n(key: str) -> int:
    return {"index": 1, "ar": 2, "cgram2": 2, "cgram3": 3, "cgram4": 4, "counting": 1}[key]


def _kwargs(key: str, a: int) -> dict:
    mod, _, c, *_ = TASKS[key]
    kw = {"alphabet": a}
    if mod is cgram:
        kw["c"] = c
    if mod is counting:
        kw["threshold"] = "near"
    return kw


def _reference(key: str):
    mod, _, c, *_ = TASKS[key]
    return (lambda t: cgram.reference(t, c=c)) if mod is cgram else mod.reference


def _sampled_ns(key: str, profile: str) -> list[int]:
    top = SAMPLED_MAX_LOG2N[profile].get(key)
    return [n for n in SAMPLED[profile] if top is None or n <= 2 ** top]


def run_model(model, tokens: np.ndarray, ref) -> tuple[int, int]:
    """(instances, failures) of ``model`` on a batch against the plain-Python reference."""
    want = np.array([ref(list(map(int, row))) for row in tokens], dtype=np.int64)
    got = model.predict_batch(tokens)
    return len(want), int((got != want).sum())


def index_batches(n: int, chunk_bits: int = INDEX_CHUNK_BITS):
    """Every Index instance over {0, 1}^n with every query i = 1..n, in chunks:
    token arrays (2^min(n, chunk_bits) * n, n + 3), strings in lexicographic
    order (x_1 most significant), the query varying fastest."""
    lo = min(n, chunk_bits)
    low = (np.arange(1 << lo)[:, None] >> np.arange(lo - 1, -1, -1)) & 1
    queries = np.tile(np.arange(1, n + 1), 1 << lo)
    for high in range(1 << (n - lo)):
        hi = (high >> np.arange(n - lo - 1, -1, -1)) & 1
        x = np.hstack([np.broadcast_to(hi, (1 << lo, n - lo)), low])
        x = np.repeat(x, n, axis=0)
        yield np.hstack([np.full((len(x), 1), BOS), x + NUMBER_BASE, np.full((len(x), 1), QUERY),
                         (queries + NUMBER_BASE)[:, None]]).astype(np.int64)


def _exhaustive_batches(key: str, n: int):
    mod, _, c, _, _, a = TASKS[key]
    if key == "index" and n > INDEX_CHUNK_BITS:
        yield from index_batches(n)
        return
    kw = {"alphabet": a}
    if mod is cgram:
        kw["c"] = c
    yield np.asarray(mod.enumerate_all(n, **kw).tokens)


def _exhaustive(key: str, profile: str) -> tuple[Record, list[int]]:
    mod, _, c, build, decl, a = TASKS[key]
    t0 = time.perf_counter()
    inst = fails = 0
    worst = None
    params = []
    top = EXHAUSTIVE_MAX[profile][key]
    for n in range(_min_n(key), top + 1):
        model = build(n, a, c)
        if model.fmt != decl.format(n, a, c):
            raise AssertionError(f"{model.name}: built at {model.fmt.name}, declared {decl.format(n, a, c).name}")
        n_inst = 0
        for toks in _exhaustive_batches(key, n):
            i, fl = run_model(model, toks, _reference(key))
            n_inst, fails = n_inst + i, fails + fl
        if key == "index" and n_inst != 2 ** n * n:
            raise AssertionError(f"index n={n}: enumerated {n_inst} instances, want 2^n n = {2 ** n * n}")
        inst += n_inst
        r = model.resources
        slack = r.precision_bits - r.used_precision_bits
        if worst is None or slack < worst[0]:
            worst = (slack, n, r.used_precision_bits, r.precision_bits)
        params.append(r.params)
    return (Record(CLAIM, key, f"exhaustive a={a}" + (f" c={c}" if mod is cgram else "") + f" n<={top} (all n)",
                   worst[1], inst, fails, worst[2], worst[3], 0, 0, params[-1], 0,
                   round(time.perf_counter() - t0, 3),
                   note=f"least precision slack at n={worst[1]}"), params)


def _sampled(key: str, profile: str, seed: int) -> tuple[list[Record], list[int]]:
    mod, a, c, build, decl, _ = TASKS[key]
    out, params = [], []
    for n in _sampled_ns(key, profile):
        batch = SAMPLED[profile][n]
        t0 = time.perf_counter()
        b = mod.generate(np.random.default_rng([seed, n, len(key)]), n, batch, **_kwargs(key, a))
        model = build(n, a, c)
        i, fl = run_model(model, np.asarray(b.tokens), _reference(key))
        r = model.resources
        params.append(r.params)
        fmt_ok = model.fmt == decl.format(n, a, c)
        out.append(Record(CLAIM, model.name, f"sampled a={a}" + (f" c={c}" if mod is cgram else ""), n, i,
                          fl + (0 if fmt_ok else 1), r.used_precision_bits, decl.total_bits(n, a, c), 0, 0,
                          r.params, 0, round(time.perf_counter() - t0, 3),
                          note=model.fmt.name + ("" if fmt_ok else
                                                 f" NOT THE DECLARED FORMAT {decl.format(n, a, c).name}")))
    return out, params


def _below_bound(key: str, seed: int) -> list[Record]:
    """One integer bit below the used bits fails; for Counting also one fraction bit
    below the measured frontier (fixed frontier sample)."""
    mod, a, c, build, decl, _ = TASKS[key]
    n = 64
    out = []
    t0 = time.perf_counter()
    name = FRONTIER_NAME.get(key)
    if name is not None:
        toks, answers = FR.frontier_sample(name, n)
    else:
        b = mod.generate(np.random.default_rng([seed, 99]), n, 16, **_kwargs(key, a))
        toks, answers = np.asarray(b.tokens), np.asarray(b.answers)
    model = build(n, a, c)
    got = model.predict_batch(toks)
    assert (got == answers).all(), f"{key}: incorrect at the declared format on the below-bound sample"
    u = model.resources.used_int_bits
    low = FixedFormat(u - 1, model.fmt.frac_bits)
    try:
        bad = int((model.with_format(low).predict_batch(toks) != answers).sum())
        failed, how = bad > 0, f"{bad} wrong answers"
    except (PrecisionError, ValueError) as e:
        failed, how = True, f"raised: {str(e)[:100]}"
    out.append(Record(CLAIM, model.name, f"one integer bit below used ({low.name})", n, len(answers),
                      0 if failed else 1, seconds=round(time.perf_counter() - t0, 3),
                      note=("fails as it must: " if failed else "DID NOT FAIL below bound: ") + how))
    if key == "counting":
        t0 = time.perf_counter()
        row = FR.frontier_row("counting", n)
        ok = row["f_min"] is not None and row["f_min"] > 0 and row["fails_below_f_min"]
        out.append(Record(CLAIM, model.name, f"one fraction bit below the frontier (f = {row['f_min']} - 1)", n,
                          row["instances"], 0 if ok else 1, seconds=round(time.perf_counter() - t0, 3),
                          note=("fails as it must: " if ok else "DID NOT FAIL: ") + str(row["below_f_min_how"])
                          + f"; f_min = {row['f_min']}, declared f = {row['f_declared']}"))
    return out


def _format_limit() -> Record:
    """Counting's declared format fits int64 at n = 2^17 and is refused at 2^18."""
    t0 = time.perf_counter()
    lim = COUNTING_FORMAT_LIMIT
    fits = R.COUNTING.format(lim, 3)
    I2, f2 = R.COUNTING.int_bits(2 * lim, 3), R.COUNTING.frac_bits(2 * lim)
    try:
        R.counting_model(2 * lim, 3)
        refused, how = False, "built anyway"
    except ValueError as e:
        refused, how = "exceeds 62" in str(e), str(e)[:90]
    ok = refused and I2 + f2 > 62 and fits.int_bits + fits.frac_bits <= 62
    return Record(CLAIM, "counting", f"format limit: declared format fits int64 to n = 2^17, refused at 2^18",
                  2 * lim, 1, 0 if ok else 1, seconds=round(time.perf_counter() - t0, 3),
                  note=f"declared {fits.name} at 2^17; Q{I2}.{f2} (I + f = {I2 + f2} > 62) at 2^18: "
                       + ("refused as documented: " if ok else "NOT AS DOCUMENTED: ") + how)


def _mqar(profile: str, seed: int) -> list[Record]:
    out = []
    t0 = time.perf_counter()
    MQAR_SAMPLE = shared_file(MQAR_SAMPLE_NAME)
    if MQAR_SAMPLE is None:
        return [Record(CLAIM, "mqar", "Zoology MQAR sample", 0, 0, 0, checked=False,
                       note=f"NOT CHECKED: shared data file {MQAR_SAMPLE_NAME} not found "
                            f"(set RNNGAP_SHARED_DATA to the directory holding it)")]
    inst = fails = 0
    used = decl = params = 0
    for name, (X, Y) in ar.load_zoology_npz(MQAR_SAMPLE).items():
        model = R.mqar_model(X.shape[1])
        P = R.mqar_predict(X, model)
        mask = Y != ar.ZOOLOGY_IGNORE
        inst += int(mask.sum())
        fails += int((P[mask] != Y[mask]).sum())
        used = max(used, model.resources.used_precision_bits)
        decl = max(decl, model.resources.precision_bits)
        params = model.resources.params
    out.append(Record(CLAIM, "mqar", "Zoology MQAR sample (labelled positions)", 256, inst, fails, used, decl,
                      0, 0, params, 0, round(time.perf_counter() - t0, 3), note=str(MQAR_SAMPLE.name)))
    L, batch = {"quick": (1024, 2), "full": (4096, 4)}[profile]
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, 4096])
    X = rng.integers(0, R.MQAR_MAX_VALUE, size=(batch, L))
    X[:, L // 2:] = X[:, rng.permutation(L // 2)]            # every value of the second half repeats
    X[:, 1::7] = rng.integers(0, 64, size=X[:, 1::7].shape)  # plus many small repeated values
    model = R.mqar_model(L)
    P = R.mqar_predict(X, model)
    want = np.array([ar.mqar_reference(list(map(int, r))) for r in X], dtype=np.int64)
    r = model.resources
    out.append(Record(CLAIM, model.name, "MQAR random, values < 2^16, every position", L, int(want.size),
                      int((P != want).sum()), r.used_precision_bits, r.precision_bits, 0, 0, r.params, 0,
                      round(time.perf_counter() - t0, 3), note=model.fmt.name))
    return out


def frontier_records(profile: str, constructions=None) -> list[Record]:
    """One record per checks/frontier.py construction: n = 2^4 .. 2^K, the fitted
    slopes in the note, one failure per n where the declaration is below the
    measured frontier (or the frontier is not exact: see frontier.row_violations)."""
    K = FRONTIER_MAX_LOG2N[profile]
    ns = [2 ** k for k in range(4, K + 1)]
    out = []
    for name in constructions or FR.CONSTRUCTIONS:
        t0 = time.perf_counter()
        rows = FR.frontier_table([name], ns)
        s = FR.frontier_summary(rows, name)
        last = rows[-1]
        bad = sorted({n for n, _ in s["violations"]})
        per_n = " ".join(f"{r['n'].bit_length() - 1}:{r['f_min']}/{r['f_declared']},"
                         f"{r['I_min_at_f_declared']}/{r['I_declared']}" for r in rows)
        note = (FR.format_slopes(s) + "; declared >= frontier at every n" if not bad else
                FR.format_slopes(s) + f"; DECLARED BELOW THE FRONTIER at n = {bad}: {s['violations'][0][1]}")
        note += f"; log2 n: f_min/f_decl, I_min/I_decl at f_decl = {per_n}"
        out.append(Record(CLAIM, name, f"precision frontier n=2^4..2^{K} (fixed seeded sample)", ns[-1],
                          s["instances"], len(bad), last["p_min"], last["p_declared"],
                          seconds=round(time.perf_counter() - t0, 3), note=note))
    return out


def _construction_records(key: str, profile: str, seed: int) -> list[Record]:
    ex, p1 = _exhaustive(key, profile)
    sam, p2 = _sampled(key, profile, seed)
    params = sorted(set(p1 + p2))
    t0 = time.perf_counter()
    const = Record(CLAIM, key, "params identical at every n checked", max(_sampled_ns(key, profile)),
                   len(p1) + len(p2), len(params) - 1, params=params[-1], seconds=round(time.perf_counter() - t0, 3),
                   note=f"param counts seen: {params}")
    return [ex] + sam + [const] + _below_bound(key, seed)


@register(CLAIM, "Index via position match (1 layer)")
def check_index(profile: str, seed: int) -> list[Record]:
    return _construction_records("index", profile, seed)


@register(CLAIM, "AR via shift + first-occurrence match (2 layers)")
def check_ar(profile: str, seed: int) -> list[Record]:
    return _construction_records("ar", profile, seed)


@register(CLAIM, "c-gram (c = 2, 3, 4) via c-1 shift heads + joint match (2 layers)")
def check_cgram(profile: str, seed: int) -> list[Record]:
    return [r for key in ("cgram2", "cgram3", "cgram4") for r in _construction_records(key, profile, seed)]


@register(CLAIM, "Counting via after-query flag, fetch q, BOS counting head, readout comparison (3 layers)")
def check_counting(profile: str, seed: int) -> list[Record]:
    return _construction_records("counting", profile, seed) + [_format_limit()]


@register(CLAIM, "precision frontier (fraction and integer bits vs log2 n; declared at or above)")
def check_frontier(profile: str, seed: int) -> list[Record]:
    return frontier_records(profile)


@register(CLAIM, "MQAR per position (rnngap predict ar)")
def check_mqar(profile: str, seed: int) -> list[Record]:
    return _mqar(profile, seed)
