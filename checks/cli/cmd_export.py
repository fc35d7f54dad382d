"""``rnngap export NAME --n N --to {safetensors,torch,transformer-lens} --out PATH``: a construction's weights written to a file.

The model the record NAME builds at size N, with its residual directions in
order, its vocabulary, its embedding (a token table and the position
formulas), its unembedding, the fixed-point format it was built for and what
``rnngap certify`` proves of it. ``safetensors`` keeps every weight as float64
and as its exact rational (``W.num`` / ``W.den``); ``torch`` writes a
TorchScript module that ``torch.jit.load`` reads with torch alone;
``transformer-lens`` a HookedTransformer's config and weights (Transformers
only; the machine's rounded softmax comes as a hook). Details:
docs/export.md.
"""
from __future__ import annotations

import argparse
import json

from rnngap.checks.export import TARGETS
from rnngap.checks.io.errors import UsageError

# Lazy imports: run() imports the exporter (the catalog, the numba kernels, and
# torch for --to torch / transformer-lens) only when the command runs, so that
# `rnngap --help` stays fast.

EXAMPLES = """examples:
  rnngap export index-transformer --n 16 --to safetensors --out index.safetensors
  rnngap export index-hybrid --n 64 --to torch --out index-hybrid.pt
  rnngap export index-transformer --n 64 --to transformer-lens --out index.tl
"""


def add_command(sub) -> None:
    p = sub.add_parser("export", help="write a construction's weights to safetensors, PyTorch or TransformerLens",
                       description=__doc__.split("\n\n", 1)[1].split("Details:")[0].strip(),
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    p.add_argument("model", help="model name (see `rnngap show --list`)")
    p.add_argument("--n", type=int, required=True, help="the size the model is built for")
    p.add_argument("--to", choices=TARGETS, required=True, help="the file format")
    p.add_argument("--out", required=True, help="the file to write (replaced whole, or left as it was)")
    p.set_defaults(func=run)


def run(args) -> int:
    from rnngap.checks.export.bundle import ExportError
    from rnngap.checks.export.write import export
    try:
        b = export(args.model, args.n, args.to, args.out)
    except ExportError as e:
        raise UsageError(str(e)) from None
    fmt = json.loads(b.metadata["format"])
    print(f"{args.model} (n={args.n}, {b.metadata['kind']}, I={fmt['int_bits']}, f={fmt['frac_bits']}) "
          f"-> {args.out} ({args.to})")
    return 0
