"""Checks of claim T4.6-up: the constant-size Transformers of
constructions/retrieval.py solve Index, AR, c-gram retrieval and Counting with
no CoT at their declared O(log n) precision, and MQAR per position.

Records (``rnngap verify --only T4.6-up``):

* ``exhaustive``: every instance (Index: binary strings, every query; AR, c-gram
  with c = 2, 3, 4 and Counting: alphabet 3) for every n up to a profile bound;
  one record per construction, showing the n with the least precision slack;
* ``sampled``: seeded generator batches at n = 2^k;
* ``params constant``: the parameter count at every n checked is the same;
* ``below bound``: one integer bit below the bits a run used fails (overflow), and
  for Counting one fraction bit below the measured frontier fails on the fixed
  frontier sample (checks/frontier.py);
* ``mqar``: the Zoology sample (every labelled position) and seeded long sequences
  against :func:`checks.tasks.ar.mqar_reference`.

References are the plain-Python ``reference`` functions of checks.tasks.
"""
from __future__ import annotations

import time

import numpy as np

from constructions import retrieval as R
from constructions.fixedpoint import FixedFormat, PrecisionError

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
    "cgram3": (cgram, 2, 3, lambda n, a, c: R.cgram_model(n, a, c), R.CGRAM, 3),
    "cgram4": (cgram, 3, 4, lambda n, a, c: R.cgram_model(n, a, c), R.CGRAM, 3),
    "counting": (counting, 3, 2, lambda n, a, c: R.counting_model(n, a), R.COUNTING, 3),
}
EXHAUSTIVE_MAX = {"quick": {"index": 8, "ar": 6, "cgram3": 6, "cgram4": 6, "counting": 5},
                  "full": {"index": 12, "ar": 8, "cgram3": 8, "cgram4": 8, "counting": 7}}
SAMPLED = {"quick": {16: 64, 64: 32, 256: 16, 1024: 4, 4096: 1},
           "full": {16: 256, 64: 128, 256: 64, 1024: 16, 4096: 4, 16384: 1}}

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
    return {"index": 1, "ar": 2, "cgram3": 3, "cgram4": 4, "counting": 1}[key]


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


def run_model(model, tokens: np.ndarray, ref) -> tuple[int, int]:
    """(instances, failures) of ``model`` on a batch against the plain-Python reference."""
    want = np.array([ref(list(map(int, row))) for row in tokens], dtype=np.int64)
    got = model.predict_batch(tokens)
    return len(want), int((got != want).sum())


def _exhaustive(key: str, profile: str) -> tuple[Record, list[int]]:
    mod, _, c, build, decl, a = TASKS[key]
    t0 = time.perf_counter()
    inst = fails = 0
    worst = None
    params = []
    for n in range(_min_n(key), EXHAUSTIVE_MAX[profile][key] + 1):
        kw = {"alphabet": a}
        if mod is cgram:
            kw["c"] = c
        batch = mod.enumerate_all(n, **kw)
        model = build(n, a, c)
        i, fl = run_model(model, np.asarray(batch.tokens), _reference(key))
        inst, fails = inst + i, fails + fl
        r = model.resources
        slack = r.precision_bits - r.used_precision_bits
        if worst is None or slack < worst[0]:
            worst = (slack, n, r.used_precision_bits, r.precision_bits)
        params.append(r.params)
    return (Record(CLAIM, key, f"exhaustive a={a} n<={EXHAUSTIVE_MAX[profile][key]} (all n)",
                   worst[1], inst, fails, worst[2], worst[3], 0, 0, params[-1], 0,
                   round(time.perf_counter() - t0, 3),
                   note=f"least precision slack at n={worst[1]}"), params)


def _sampled(key: str, profile: str, seed: int) -> tuple[list[Record], list[int]]:
    mod, a, c, build, decl, _ = TASKS[key]
    out, params = [], []
    for n, batch in SAMPLED[profile].items():
        if key.startswith("cgram") and n >= 16384:
            batch = 1
        t0 = time.perf_counter()
        b = mod.generate(np.random.default_rng([seed, n, len(key)]), n, batch, **_kwargs(key, a))
        model = build(n, a, c)
        i, fl = run_model(model, np.asarray(b.tokens), _reference(key))
        r = model.resources
        params.append(r.params)
        out.append(Record(CLAIM, model.name, f"sampled a={a}" + (f" c={c}" if mod is cgram else ""), n, i, fl,
                          r.used_precision_bits, r.precision_bits, 0, 0, r.params, 0,
                          round(time.perf_counter() - t0, 3), note=f"{model.fmt.name}"))
    return out, params


def _below_bound(key: str, seed: int) -> list[Record]:
    """One integer bit below the used bits fails; for Counting also one fraction bit
    below the measured frontier (fixed frontier sample)."""
    mod, a, c, build, decl, _ = TASKS[key]
    n = 64
    out = []
    t0 = time.perf_counter()
    name = {"cgram3": "cgram", "cgram4": None}.get(key, key)
    if name is not None and name in FR.CONSTRUCTIONS:
        toks, answers = FR.frontier_sample(name, n)
        ref_ok = True
    else:
        b = mod.generate(np.random.default_rng([seed, 99]), n, 16, **_kwargs(key, a))
        toks, answers = np.asarray(b.tokens), np.asarray(b.answers)
        ref_ok = False
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


def _construction_records(key: str, profile: str, seed: int) -> list[Record]:
    ex, p1 = _exhaustive(key, profile)
    sam, p2 = _sampled(key, profile, seed)
    params = sorted(set(p1 + p2))
    t0 = time.perf_counter()
    const = Record(CLAIM, key, "params identical at every n checked", max(SAMPLED[profile]), len(p1) + len(p2),
                   len(params) - 1, params=params[-1], seconds=round(time.perf_counter() - t0, 3),
                   note=f"param counts seen: {params}")
    return [ex] + sam + [const] + _below_bound(key, seed)


@register(CLAIM, "Index via position match (1 layer)")
def check_index(profile: str, seed: int) -> list[Record]:
    return _construction_records("index", profile, seed)


@register(CLAIM, "AR via shift + first-occurrence match (2 layers)")
def check_ar(profile: str, seed: int) -> list[Record]:
    return _construction_records("ar", profile, seed)


@register(CLAIM, "c-gram (c = 3, 4) via c-1 shift heads + joint match (2 layers)")
def check_cgram(profile: str, seed: int) -> list[Record]:
    return _construction_records("cgram3", profile, seed) + _construction_records("cgram4", profile, seed)


@register(CLAIM, "Counting via after-query flag, fetch q, BOS counting head, readout comparison (3 layers)")
def check_counting(profile: str, seed: int) -> list[Record]:
    return _construction_records("counting", profile, seed)


@register(CLAIM, "MQAR per position (rnngap predict ar)")
def check_mqar(profile: str, seed: int) -> list[Record]:
    return _mqar(profile, seed)
