"""Writing a construction's export to a file: validated first, written whole or not at all.

:func:`export` builds the record ``name`` at size n, reads it into a bundle
(checks/export/bundle.py) and writes it to ``out`` in the target's format:
``safetensors`` (the tensors, with their exact rationals, and the metadata as
the file's string metadata), ``torch`` (a TorchScript module, loadable with
``torch.jit.load`` alone; checks/export/torch_model.py) or ``transformer-lens``
(a HookedTransformer's config and state dict, Transformers only;
checks/export/lens.py). The file is written
to a temporary name beside ``out`` and renamed into place, so a failure leaves
nothing half-written. Bad input raises :class:`ExportError` with one line.
"""
from __future__ import annotations

import json
import os
import tempfile

from safetensors.numpy import load as load_bytes, save as save_bytes

from rnngap.constructions.machine.fixedpoint import PrecisionError
from rnngap.checks.catalog.records import by_name, closest, names

from . import TARGETS
from .bundle import Bundle, ExportError, bundle



def certificates_of(record) -> list[dict]:
    """What ``rnngap certify`` proves of the record: each certificate's name, claim
    and source (``built-model`` or ``declared-obligation``)."""
    return [{"name": c.name, "claim": c.claim, "source": c.source,
             "command": f"rnngap certify --only '{c.name}'"} for c in record.certificate_list()]


def build_bundle(name: str, n: int, model=None) -> Bundle:
    """The bundle of the record ``name`` built at size ``n`` (ExportError for an
    unknown name or an n its builder refuses); ``model``: that record's model,
    already built (e.g. with other parameters), instead of a build here."""
    if name not in names():
        raise ExportError(f"unknown model {name!r}; closest: {', '.join(closest(name, names()))}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ExportError(f"--n must be a positive integer, got {n!r}")
    record = by_name(name)
    try:
        model = model if model is not None else record.build(n).model
    except (ValueError, PrecisionError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ExportError(f"export {name}: no model for --n {n}: {reason}") from None
    b = bundle(model, name=name, n=n, certificate=certificates_of(record))
    b.metadata["architecture"] = record.key.architecture
    if record.key.architecture.startswith("rag"):
        b.metadata["oracle"] = ("this model generates with the in-context RAG oracle of constructions/models/rag.py "
                                "(docs/theory.md section 2); the export holds the RNN only")
    return b


def _atomic(out: str, write) -> None:
    out = os.fspath(out)
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ExportError(f"cannot write {out}: no folder {folder}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".rnngap-export-", dir=folder)
    except OSError as e:
        raise ExportError(f"cannot write {out}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)          # as open() would make it, not mkstemp's 0600
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_safetensors(b: Bundle, out) -> None:
    data = save_bytes(b.tensors, metadata=b.metadata)
    _atomic(out, lambda fh: fh.write(data))


def read_safetensors(path) -> Bundle:
    """The bundle a safetensors export holds."""
    with open(path, "rb") as fh:
        raw = fh.read()
    header_len = int.from_bytes(raw[:8], "little")
    metadata = json.loads(raw[8:8 + header_len]).get("__metadata__", {})
    return Bundle(load_bytes(raw), metadata)


def export(name: str, n: int, to: str, out, model=None) -> Bundle:
    """Write the record ``name`` built at size ``n`` (or its ``model``, built) to
    ``out`` in the target ``to``."""
    if to not in TARGETS:
        raise ExportError(f"unknown target {to!r}; targets: {', '.join(TARGETS)}")
    b = build_bundle(name, n, model)
    if to == "safetensors":
        write_safetensors(b, out)
        return b
    try:
        if to == "torch":
            from . import torch_model as target        # imports torch: the optional torch extra
        else:
            from . import lens as target               # imports torch: the optional torch extra
            target.config(b)                           # refuses a model it cannot hold, before importing it
            import transformer_lens  # noqa: F401
    except ImportError as e:
        raise ExportError(f"--to {to} needs {e.name or 'torch'}: pip install 'rnngap[torch]'") from None
    data = target.to_bytes(b)
    _atomic(out, lambda fh: fh.write(data))
    return b
