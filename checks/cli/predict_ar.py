"""``rnngap predict ar --inputs X.npy --out P.npy``: per-position associative recall
(MQAR, Zoology layout) with the constant-size Transformer of
:func:`constructions.models.retrieval.mqar_transformer` (claim T4.6-up).

Details: docs/internals/commands.md#predictar.
"""
from __future__ import annotations

import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from rnngap.checks.io.errors import (
    UsageError, atomic_output, check_memory, check_outputs, excerpt, report_stream, shown, size_text,
)
from rnngap.checks.io.progress import Bar

# Lazy imports: the functions below import rnngap's heavier modules
# (constructions.models.retrieval, checks.tasks.ar)
# only when the command runs, so that `rnngap --help` stays fast.

CHUNK_WORK = 2 ** 26
"""Attention scores per model call, at most (see :func:`chunk_rows`)."""

CHUNK_POSITIONS = 2 ** 15
"""Positions per model call, at most (a position costs about 8 us even at
length 2; see :func:`chunk_rows`)."""


def chunk_rows(length: int) -> int:
    """Rows per model call: at most CHUNK_WORK / length^2 and CHUNK_POSITIONS /
    length (at least one), so each numba call is short (about a quarter of a
    second) and Python sees Ctrl-C and SIGTERM between calls."""
    return max(1, min(CHUNK_WORK // (length * length), CHUNK_POSITIONS // length))


def add_arguments(parser) -> None:
    parser.add_argument("--inputs", required=True, metavar="X.npy|X.npz",
                        help="a (batch, length) integer .npy array (values in [0, 65536), length <= 4096), or a "
                             "Zoology .npz of NAME_inputs / NAME_labels batches (labels -100 where unscored)")
    parser.add_argument("--out", metavar="P.npy|P.npz",
                        help="where to write the int64 predictions: a .npy array, or for a .npz input a .npz "
                             "with NAME_predictions per batch (default: not written)")
    parser.add_argument("--model", default="mqar", choices=["mqar"],
                        help="the construction to run (only the T4.6-up MQAR Transformer)")
    parser.add_argument("--quiet", action="store_true", help="no summary line on stderr")


MAX_DIM = 2 ** 40
"""Largest dimension a .npy header may claim (far above any array that fits)."""


def check_header(shape, dtype, path: str) -> int:
    """The bytes an array of ``shape`` and ``dtype`` (read from a .npy header)
    holds; a UsageError of one line if a dimension is not a plain integer in
    0..:data:`MAX_DIM` or the dtype holds Python objects. No message formats an
    unbounded number."""
    if dtype.hasobject:
        raise UsageError(f"predict ar: {path} holds Python objects (dtype {excerpt(str(dtype), 60)}); pickled data "
                         "is never loaded")
    if not isinstance(shape, tuple):
        raise UsageError(f"predict ar: {path}: the .npy header's shape is not a tuple")
    need = dtype.itemsize
    for k, d in enumerate(shape):
        if type(d) is not int:               # bool is an int subclass: refused too
            raise UsageError(f"predict ar: {path}: the .npy header's dimension {k} is not an integer "
                             f"({type(d).__name__})")
        if not 0 <= d <= MAX_DIM:
            raise UsageError(f"predict ar: {path}: the .npy header's dimension {k} is outside 0..2^40")
        need *= d
    return need


def _header(fh) -> tuple:
    """(shape, dtype) as the .npy header at ``fh``'s position states them (format
    1.0 or 2.0; numpy's own exceptions for anything else)."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(fh)
    else:
        raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    return shape, dtype


def read_npy_header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the .npy file at ``path``, checked against the file size.

    :class:`~checks.io.errors.UsageError` (one line naming the file) for an empty
    file, an archive (.npz), a file without the NPY magic string, an unreadable
    header, a dtype holding Python objects (pickled data, never loaded), or a
    header whose shape and dtype need more or fewer bytes than the file holds
    (truncated, or a header claiming a huge array over a few bytes): decided
    before anything is allocated.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise UsageError(f"predict ar: {path} is empty (0 bytes), not a .npy array")
        head = fh.read(6)
        fh.seek(0)
        if head.startswith(b"PK\x03\x04"):
            raise UsageError(f"predict ar: {path} is a .npz archive, not a single .npy array")
        if head != b"\x93NUMPY":
            raise UsageError(f"predict ar: {path} is not a .npy file (no NPY magic string at its start)")
        try:
            shape, dtype = _header(fh)
        except (ValueError, EOFError, SyntaxError, TypeError, OSError) as e:
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UsageError(f"predict ar: {path}: unreadable .npy header ({why})") from None
        data = size - fh.tell()
    need = check_header(shape, dtype, path)
    if need != data:
        raise UsageError(f"predict ar: {path}: the header says shape {shown(str(tuple(shape)))} of "
                         f"{shown(str(dtype))} ({size_text(need)}) but {data:,} bytes follow it "
                         "(truncated or corrupt file)")
    return tuple(int(d) for d in shape), dtype


def load_inputs(path: str) -> np.ndarray:
    from rnngap.constructions.models.retrieval import validate_mqar_inputs

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"predict ar: cannot read {path}: it is a directory, not a .npy file")
    if not p.exists():
        raise UsageError(f"predict ar: cannot read {path}: no such file")
    if not p.is_file():
        raise UsageError(f"predict ar: cannot read {path}: not a regular file")
    shape, dtype = read_npy_header(path)
    if len(shape) != 2:
        raise UsageError(f"predict ar: {path}: inputs must be a 2-D (batch, length) array, got shape "
                         f"{shown(str(shape))}")
    if dtype.kind not in "iu" or dtype.fields is not None or dtype.subdtype is not None:
        # not np.issubdtype(dtype, np.integer): timedelta64 is an integer subtype there
        raise UsageError(f"predict ar: {path}: inputs must hold integers (signed or unsigned), got dtype "
                         f"{shown(str(dtype))}")
    check_memory(holding(shape[0] * shape[1], dtype.itemsize), f"predict ar on {path} ({shape[0]:,} x {shape[1]:,})")
    try:
        X = np.load(p, allow_pickle=False)
    except Exception as e:           # numpy raises ValueError, TypeError, OverflowError, ... for odd headers
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"predict ar: {path} is not a readable .npy array ({excerpt(why, 80)})") from None
    if not isinstance(X, np.ndarray):
        raise UsageError(f"predict ar: {path} holds an archive, not a single array")
    try:
        return validate_mqar_inputs(X)
    except ValueError as e:
        raise UsageError(f"predict ar: {path}: {e}")


def holding(values: int, itemsize: int) -> int:
    """Bytes ``predict ar`` holds at once for ``values`` input values of ``itemsize``
    bytes: the array as read, its int64 copy, the int64 predictions, and one
    chunk's model work (:data:`CHUNK_WORK` int64 scores)."""
    return values * (itemsize + 16) + 8 * CHUNK_WORK


def check_npz_members(path: str) -> None:
    """Every .npy member of the .npz at ``path``: its header checked
    (:func:`check_header`) and the memory all of them need against the budget,
    before any array is read. A UsageError of one line otherwise."""
    total = 0
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                with z.open(info) as fh:
                    shape, dtype = _header(fh)
                values = check_header(shape, dtype, f"{path}: member {excerpt(info.filename, 60)}")
                total += holding(values // max(dtype.itemsize, 1), dtype.itemsize)
    except UsageError:
        raise
    except Exception as e:           # a bad archive or header: zipfile and numpy raise many kinds
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"predict ar: {path}: not a Zoology MQAR archive ({excerpt(why, 80)})") from None
    check_memory(total, f"predict ar on {path}")


def _is_npz(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def load_batches(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The Zoology batches of a .npz (:func:`checks.tasks.ar.load_zoology_npz`), each
    input validated as MQAR values; a UsageError (one line) for anything else."""
    from rnngap.checks.tasks.ar import load_zoology_npz
    from rnngap.constructions.models.retrieval import validate_mqar_inputs
    try:
        batches = load_zoology_npz(path)
    except (ValueError, OSError, EOFError, KeyError, TypeError, zipfile.BadZipFile) as e:
        raise UsageError(f"predict ar: {path}: not a Zoology MQAR archive ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
    if not batches:
        raise UsageError(f"predict ar: {path}: the archive holds no NAME_inputs / NAME_labels batch")
    out = {}
    for name, (X, Y) in batches.items():
        try:
            out[name] = (validate_mqar_inputs(X), np.asarray(Y, np.int64))
        except ValueError as e:
            raise UsageError(f"predict ar: {path}: batch {name}: {e}")
    return out


def _run_npz(args) -> int:
    from rnngap.checks.tasks.ar import ZOOLOGY_IGNORE
    from rnngap.constructions.models.retrieval import mqar_transformer, mqar_predict
    if args.out is not None and not str(args.out).endswith(".npz") and args.out not in ("-", "/dev/stdout"):
        raise UsageError(f"predict ar: {args.inputs} is a .npz archive: --out must name a .npz file, got {args.out}")
    check_npz_members(args.inputs)
    batches = load_batches(args.inputs)
    t0 = time.perf_counter()
    preds, right, labelled = {}, 0, 0
    lines = []
    for name, (X, Y) in batches.items():
        model = mqar_transformer(X.shape[1])
        rows = chunk_rows(X.shape[1])
        P = np.concatenate([mqar_predict(X[b:b + rows], model) for b in range(0, X.shape[0], rows)])
        preds[f"{name}_predictions"] = P.astype(np.int64)
        mask = Y != ZOOLOGY_IGNORE
        ok = int((P[mask] == Y[mask]).sum())
        right += ok
        labelled += int(mask.sum())
        lines.append(f"{name}: {ok} of {int(mask.sum())} labelled positions right")
    if args.out is not None:
        with atomic_output(args.out, "wb", what="predict ar") as fh:
            np.savez(fh, **preds)
    to = report_stream(args.out)
    for line in lines:
        print(line, file=to)
    acc = 100.0 * right / labelled if labelled else 100.0
    print(f"accuracy {acc:.2f}% ({right} of {labelled} labelled positions, {len(batches)} batches, "
          f"{time.perf_counter() - t0:.1f} s)" + (f" -> {args.out}" if args.out else ""), file=to)
    return 0 if right == labelled else 1


def run(args) -> int:
    from rnngap.constructions.models.retrieval import mqar_transformer, mqar_predict

    check_outputs({"--out": args.out}, {"--inputs": args.inputs}, what="predict ar")
    if _is_npz(args.inputs):
        return _run_npz(args)
    X = load_inputs(args.inputs)
    t0 = time.perf_counter()
    model = mqar_transformer(X.shape[1])
    rows = chunk_rows(X.shape[1])
    parts = []
    with Bar("predict ar", quiet=args.quiet) as tick:
        for b in range(0, X.shape[0], rows):
            tick(b, X.shape[0])
            parts.append(mqar_predict(X[b:b + rows], model))
    P = np.concatenate(parts)
    if args.out is not None:
        with atomic_output(args.out, "wb", what="predict ar") as fh:
            np.save(fh, P.astype(np.int64), allow_pickle=False)
    if not args.quiet:
        r = model.resources
        print(f"rnngap predict ar: {X.shape[0]} x {X.shape[1]} positions, {int((P >= 0).sum())} retrievals, "
              f"{model.fmt.name} (used {r.used_precision_bits}/{r.precision_bits} bits), {r.params} params, "
              f"{time.perf_counter() - t0:.2f} s" + (f" -> {args.out}" if args.out else ""), file=sys.stderr)
    return 0
