"""``rnngap predict ar --inputs X.npy --out P.npy``: per-position associative recall
(MQAR, Zoology layout) with the constant-size Transformer of
:func:`constructions.retrieval.mqar_model` (claim T4.6-up).

Input: a (batch, length) integer array (.npy), raw token values in [0, 2^16),
length 1..4096 (Zoology's key/value pairs followed by queries). Output: a
(batch, length) int64 array; P[b, t] = X[b, j+1] for the first j < t with
X[b, j] == X[b, t], else -1 (see :func:`checks.tasks.ar.mqar_reference`). Bad input
(missing file, not .npy, wrong shape or dtype, values out of range) -> one line on
stderr, exit 2.

Example::

    rnngap predict ar --inputs X.npy --out P.npy
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np


def add_arguments(parser) -> None:
    parser.add_argument("--inputs", required=True, metavar="X.npy",
                        help="(batch, length) integer array, values in [0, 65536), length <= 4096")
    parser.add_argument("--out", required=True, metavar="P.npy", help="where to write the (batch, length) int64 predictions")
    parser.add_argument("--model", default="mqar", choices=["mqar"],
                        help="the construction to run (only the T4.6-up MQAR Transformer)")
    parser.add_argument("--quiet", action="store_true", help="no summary line on stderr")


def load_inputs(path: str) -> np.ndarray:
    from .cli import UsageError
    from constructions.retrieval import validate_mqar_inputs

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"predict ar: cannot read {path}: it is a directory, not a .npy file")
    if not p.exists():
        raise UsageError(f"predict ar: cannot read {path}: no such file")
    if not p.is_file():
        raise UsageError(f"predict ar: cannot read {path}: not a regular file")
    try:
        X = np.load(p, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise UsageError(f"predict ar: {path} is not a readable .npy array ({str(e).splitlines()[0]})")
    if not isinstance(X, np.ndarray):
        raise UsageError(f"predict ar: {path} holds an archive, not a single array")
    try:
        return validate_mqar_inputs(X)
    except ValueError as e:
        raise UsageError(f"predict ar: {path}: {e}")


def run(args) -> int:
    from .cli import UsageError
    from .errors import check_output_path
    from constructions.retrieval import mqar_model, mqar_predict

    X = load_inputs(args.inputs)
    out = Path(args.out)
    check_output_path(args.out, "predict ar")
    t0 = time.perf_counter()
    model = mqar_model(X.shape[1])
    P = mqar_predict(X, model)
    try:
        with open(out, "wb") as fh:
            np.save(fh, P.astype(np.int64), allow_pickle=False)
    except OSError as e:
        raise UsageError(f"predict ar: cannot write {args.out}: {e.strerror}") from None
    if not args.quiet:
        r = model.resources
        print(f"rnngap predict ar: {X.shape[0]} x {X.shape[1]} positions, {int((P >= 0).sum())} retrievals, "
              f"{model.fmt.name} (used {r.used_precision_bits}/{r.precision_bits} bits), {r.params} params, "
              f"{time.perf_counter() - t0:.2f} s -> {args.out}", file=sys.stderr)
    return 0
