"""``rnngap show MODEL --n N [--seed S]``: the residual-stream layout of a
construction, each head's score and copy in named directions, and what every
head attends to at the last position of a seeded example."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from rnngap.constructions.vocab import SPECIAL_NAMES, NUMBER_BASE


MAX_N = 4096
"""Largest --n of show (the catalogue's models may refuse smaller ones)."""


def add_command(sub) -> None:
    p = sub.add_parser("show", help="residual stream and attention of a construction on an example")
    p.add_argument("model", help="model name (see `rnngap show --list`)", nargs="?")
    p.add_argument("--n", type=int, default=8, help="data length the model is built for")
    p.add_argument("--seed", type=int, default=0, help="seed of the example prompt (>= 0)")
    p.add_argument("--list", action="store_true", help="list the models")
    p.set_defaults(func=run)


FEED_WORK = 2 ** 21
"""Prompt tokens per model call: about FEED_WORK attention scores per call (see
``checks/predict_istree.py``), so Ctrl-C acts between calls."""


def feed_example(model, toks, stream=None, interval: float = 1.0):
    """A session fed with ``toks`` whose attention weights at the LAST position are
    recorded (``Session.attention()``), with progress on ``stream`` (stderr) at
    most a line per ``interval`` seconds for a long prompt.

    Only the last position's weights are shown, and recording them at every
    position costs a dense softmax each (81 s for ``show istree-transformer --n 4096``), so
    the prefix is fed without recording (the same arithmetic, the sparse attend,
    tested equal in tests/test_cli.py) in chunks, and only the last token with it.
    """
    import sys
    import time
    stream = sys.stderr if stream is None else stream
    sess = model.session(capacity=len(toks), record=True)   # allocates the recording buffer
    sess.record = False          # Session.feed passes this flag to the kernel call by call
    pos, start, last = 0, time.monotonic(), None
    body = len(toks) - 1
    while pos < body:
        step = min(body - pos, max(64, FEED_WORK // max(pos, 1448)))
        sess.feed(toks[pos:pos + step])
        pos += step
        now = time.monotonic()
        if now - start >= interval and (last is None or now - last >= interval):
            last = now
            stream.write(f"show: fed {pos}/{len(toks)} prompt tokens, {now - start:.0f} s\n")
            stream.flush()
    sess.record = True
    sess.feed(toks[body:])
    return sess


def _combo(row, labels) -> str:
    terms = [f"{Fraction(v)}*{lab}" if v != 1 else lab for v, lab in zip(row, labels) if v != 0]
    return " + ".join(terms) if terms else "0"


def _tok(t: int) -> str:
    return str(t - NUMBER_BASE) if t >= NUMBER_BASE else SPECIAL_NAMES.get(t, f"<{t}>")


def run(args) -> int:
    from rnngap.constructions import kernels as K          # here, not at import: `rnngap --help` loads no kernels
    from rnngap.constructions.fixedpoint import PrecisionError

    from .catalog import by_name, names
    from .cli import UsageError

    if args.list:
        for k in names():
            e = by_name(k)
            print(f"{k:28s} {e.key.claim:9s} {e.about}  [{e.where}]")
        return 0
    if not args.model:
        raise UsageError(f"show: name a model (one of {', '.join(names())}) or use --list")
    if args.model not in names():
        raise UsageError(f"unknown model {args.model!r}; known: {', '.join(names())}")
    if args.n < 1 or args.n > MAX_N:
        raise UsageError(f"--n must be between 1 and {MAX_N} for show, got {args.n}")
    if args.seed < 0:
        raise UsageError(f"show: --seed must be >= 0, got {args.seed}")
    entry = by_name(args.model)
    # A size the construction cannot take (too short for the task, or needing more
    # bits than int64 storage holds) is refused by its builder or its example's
    # generator with ValueError (MarginError is one) or PrecisionError: bad input.
    try:
        model = entry.build(args.n).model
        toks = entry.example(args.n, np.random.default_rng(args.seed))
    except (ValueError, PrecisionError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"show {args.model}: no model for --n {args.n}: {reason}") from None
    spec = model.spec
    print(model.describe())
    print("\nresidual stream:")
    for d, lab in enumerate(spec.labels):
        kind, param, coef = spec.embedding[d]
        src = f"embedding {coef}*{K.FEATURE_NAMES[kind]}" + (f"({param})" if kind in (K.F_IS_TOKEN, K.F_TOK_INV, K.F_POS_INV) else "") \
            if kind != K.F_ZERO else "written by a layer"
        print(f"  [{d:2d}] {lab:14s} {src}")
    for l, layer in enumerate(spec.rnn_layers):
        print(f"\nRNN layer {l}: state {layer.state_labels}")
    for l, layer in enumerate(spec.attn_layers):
        print(f"\nattention layer {l}:")
        for h in layer.heads:
            terms = [f"({_combo(h.WQ[k], spec.labels)})·({_combo(h.WK[k], spec.labels)})" for k in range(h.WQ.shape[0])]
            print(f"  head {h.name}: score = " + " + ".join(terms))
            for k in range(h.WV.shape[0]):
                tgt = [spec.labels[d] for d in range(h.WO.shape[0]) if h.WO[d, k] != 0]
                print(f"    copies {_combo(h.WV[k], spec.labels)} -> {', '.join(tgt)}")
            m = spec.notes.get("margins", {}).get(h.name)
            if m:
                print(f"    margin: " + ", ".join(f"{k}={v}" for k, v in m.items()))
        if layer.W1.shape[0]:
            print(f"  MLP: {layer.W1.shape[0]} hidden neurons")
    sess = feed_example(model, toks)
    nxt = sess.next_token()
    print(f"\nexample (seed {args.seed}): {' '.join(_tok(t) for t in toks)}")
    print(f"next token: {_tok(nxt)}")
    att = sess.attention()
    for l, layer in enumerate(spec.attn_layers):
        for h, hd in enumerate(layer.heads):
            w = att[l, h]
            nz = np.nonzero(w)[0]
            desc = ", ".join(f"pos {j} ({_tok(toks[j])}): {w[j]:.4g}" for j in nz[:12])
            more = f" ... (+{len(nz) - 12})" if len(nz) > 12 else ""
            print(f"  layer {l} head {hd.name} attends at the last position to: {desc}{more}")
    print("final residual at the last position:")
    for lab, v in sess.residual().items():
        print(f"  {lab:14s} {v}")
    return 0
