"""``rnngap show MODEL --n N [--seed S] [--codes] [--full]``: a construction laid out
for a reader, layer by layer: the residual stream's embedded directions, each
attention layer with its heads (score and copies in named directions, margins,
and what the head attends to at the last position of a seeded example), each
MLP and RNN layer summarised (its gadgets, what it reads and writes), and the
readout with the answer.

Every line fits in :data:`WIDTH` columns: long linear combinations are wrapped
at term boundaries (a direction's name is never cut) and, unless ``--full``,
cut after a few lines with ``+ K more terms``. Tokens are printed the way the
vocabulary names them (constructions/machine/vocab.py: ``[EOS]``, ``-``, a number
token as its number); ``--codes`` adds each token's code tau (number k: k + 1,
special id s: -s), the value the construction computes with, in brackets."""
from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction

import numpy as np

from rnngap.constructions.machine.vocab import COUNT, COUNT_NAME, META_NAMES, NUMBER_BASE, SPECIAL_NAMES
from rnngap.checks.io.errors import UsageError
from rnngap.checks.io.progress import on_terminal

# Lazy imports: the functions below import rnngap's heavier modules
# (the catalog, the numba kernels)
# only when the command runs, so that `rnngap --help` stays fast.


MAX_N = 4096
"""Largest --n of show (the catalogue's models may refuse smaller ones)."""

WIDTH = 100
"""Columns of every line show prints."""

SHORT_LINES = 3
"""Lines a linear combination (or a list of names) takes at most without --full."""

PROMPT_LINES = 6
"""Lines of the example prompt at most without --full (its start and its end)."""

TOP_POSITIONS = 4
"""Positions shown per head at the last position (the largest weights)."""

EXAMPLES = """examples:
  rnngap show index-transformer --n 4          # a one-head Transformer: score, copy, answer
  rnngap show istree-transformer --codes       # with each token's code tau in brackets
  rnngap show --list                           # the models
"""


def add_command(sub) -> None:
    p = sub.add_parser("show", help="residual stream and attention of a construction on an example",
                       description="A construction laid out layer by layer (embedding, RNN layers, attention\n"
                                   "layers with their heads, MLPs, readout), with what each head attends to\n"
                                   "at the last position of a seeded example prompt. Tokens are printed as\n"
                                   "the vocabulary names them ([EOS], -, a number as its value); lines fit\n"
                                   f"in {WIDTH} columns.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    p.add_argument("model", help="model name (see `rnngap show --list`)", nargs="?")
    p.add_argument("--n", type=int, default=8, help=f"data length the model is built for (1..{MAX_N}; default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the example prompt (>= 0; default 0)")
    p.add_argument("--codes", action="store_true",
                   help="also print each token's code tau in brackets (number k: k + 1, special id s: -s)")
    p.add_argument("--full", action="store_true",
                   help="print every term, name and prompt token (default: long ones cut with '+ K more')")
    p.add_argument("--list", action="store_true", help="list the models (name, claim, what it is, where)")
    p.set_defaults(func=run)


FEED_WORK = 2 ** 21
"""Prompt tokens per model call: about FEED_WORK attention scores per call (see
``checks/cli/predict_istree.py``), so Ctrl-C acts between calls."""


def feed_example(model, toks, stream=None, interval: float = 1.0):
    """A session fed with ``toks`` whose attention weights at the LAST position are
    recorded (``Session.attention()``), with progress on ``stream`` (stderr when
    it is a terminal) at most a line per ``interval`` seconds for a long prompt.

    Only the last position's weights are shown, and recording them at every
    position costs a dense softmax each (81 s for ``show istree-transformer --n 4096``), so
    the prefix is fed without recording (the same arithmetic, the sparse attend,
    tested equal in tests/test_cli.py) in chunks, and only the last token with it.
    """
    if stream is None and on_terminal(sys.stderr):            # nothing extra on a pipe or in a file
        stream = sys.stderr
    sess = model.session(capacity=len(toks), record=True)   # allocates the recording buffer
    sess.record = False          # Session.feed passes this flag to the kernel call by call
    pos, start, last = 0, time.monotonic(), None
    body = len(toks) - 1
    while pos < body:
        step = min(body - pos, max(64, FEED_WORK // max(pos, 1448)))
        sess.feed(toks[pos:pos + step])
        pos += step
        now = time.monotonic()
        if stream is not None and now - start >= interval and (last is None or now - last >= interval):
            last = now
            stream.write(f"show: fed {pos}/{len(toks)} prompt tokens, {now - start:.0f} s\n")
            stream.flush()
    sess.record = True
    sess.feed(toks[body:])
    return sess


# ---------------------------------------------------------------- tokens

def token_name(t: int) -> str:
    """A token id as the vocabulary names it: a number token as its number,
    a special by its name (``[EOS]``, ``-``), an unnamed id as ``<id>``."""
    t = int(t)
    if t >= NUMBER_BASE:
        return str(t - NUMBER_BASE)
    if t == COUNT:
        return COUNT_NAME
    return SPECIAL_NAMES.get(t, META_NAMES.get(t, f"<{t}>"))


def token_code(t: int) -> int:
    """tau of a token id (constructions/machine/vocab.py: number k: k + 1, special s: -s)."""
    t = int(t)
    return t - NUMBER_BASE + 1 if t >= NUMBER_BASE else -t


def is_named(t: int) -> bool:
    t = int(t)
    return t >= NUMBER_BASE or t == COUNT or t in SPECIAL_NAMES or t in META_NAMES


class Tokens:
    """How tokens are printed: by name, with ``[code]`` behind ``--codes``."""

    def __init__(self, codes: bool):
        self.codes = codes

    def __call__(self, t: int) -> str:
        return f"{token_name(t)}[{token_code(t)}]" if self.codes else token_name(t)

    def of_code(self, value) -> str | None:
        """The token whose code is ``value`` (an exact number), or None if no named token has it."""
        v = Fraction(value)
        if v.denominator != 1:
            return None
        c = int(v)
        t = c - 1 + NUMBER_BASE if c >= 1 else -c
        return self(t) if is_named(t) else None


# ---------------------------------------------------------------- layout

def cols(s: str) -> int:
    """The width of a line as ``awk '{print length($0)}'`` counts it in any locale:
    UTF-8 bytes (the score's '·' counts 2), never less than the columns it takes."""
    return len(s.encode("utf-8"))


def pack(head: str, items: list[str], *, sep: str = " + ", indent: int | None = None,
         max_lines: int | None = None, more: str = "more terms", width: int = WIDTH) -> list[str]:
    """``head`` then ``items`` joined by ``sep``, wrapped at ``width`` columns.

    A line breaks only between items (or, inside an item too long for a line of
    its own, at its spaces): no name is cut. A continuation line starts at
    column ``indent`` (default: under the first item) with the separator's sign
    (``+ ``) for a sum, or the line before ends with it (``,``) for a list.
    With ``max_lines``, the items that fit in as many lines are kept and the
    rest counted: ``+ K more terms``."""
    if not items:
        return [head.rstrip()]
    indent = len(head) if indent is None else indent
    lead = sep.strip() not in (",", ";")          # a sum: the sign begins the next line

    def lay(its: list[str]) -> list[str]:
        lines, cur = [], head
        cont = " " * indent
        tail = "" if lead else sep.rstrip()          # what a line of a list ends with before a break
        for i, it in enumerate(its):
            joiner = "" if i == 0 else sep
            end = tail if i < len(its) - 1 else ""
            if cols(cur + joiner + it + end) <= width:
                cur += joiner + it
                continue
            if i > 0:                                # break before this item
                lines.append((cur + tail).rstrip())
                cur = cont + (sep.lstrip() if lead else "")
            if cols(cur + it + end) <= width:
                cur += it
                continue
            # an item longer than a line of its own: broken at its spaces, never inside a name
            words = []
            for w in it.split(" "):                  # a sign stays with its term: '- 6*x'
                if words and words[-1] in ("+", "-"):
                    words[-1] += " " + w
                else:
                    words.append(w)
            for j, w in enumerate(words):
                piece = w if j == 0 else " " + w
                last = j == len(words) - 1
                if j > 0 and cols(cur + piece + (end if last else "")) > width:
                    lines.append(cur.rstrip())
                    cur = cont + "  " + w
                else:
                    cur += piece
        lines.append(cur.rstrip())
        return lines

    lines = lay(items)
    if max_lines is None or len(lines) <= max_lines:
        return lines
    # the most items that fit in max_lines lines together with the count of the rest
    # (more items never take fewer lines: a binary search)
    def cut(kept: int) -> list[str]:
        return lay(items[:kept] + [f"{len(items) - kept} {more}"])

    lo, hi = 0, len(items) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(cut(mid)) <= max_lines:
            lo = mid
        else:
            hi = mid - 1
    return cut(lo)


def table(cells: list[str], indent: int = 2, gap: int = 2, width: int = WIDTH) -> list[str]:
    """``cells`` in as many aligned columns as fit in ``width``, row by row."""
    if not cells:
        return []
    w = max(cols(c) for c in cells) + gap
    per = max(1, (width - indent + gap) // w)
    return [(" " * indent + "".join(c + " " * (w - cols(c)) for c in cells[r:r + per])).rstrip()
            for r in range(0, len(cells), per)]


def _num(v) -> str:
    return str(Fraction(v))


def combo_terms(row, labels) -> list[str]:
    """The terms of sum_d row[d] labels[d], signs attached: ['3*one', '-pos', 'tok']."""
    out = []
    for v, lab in zip(row, labels):
        if v == 0:
            continue
        v = Fraction(v)
        out.append(lab if v == 1 else f"-{lab}" if v == -1 else f"{_num(v)}*{lab}")
    return out


def combo(row, labels) -> str:
    """sum_d row[d] labels[d] on one line ('3*one - pos + tok'), or '0'."""
    terms = combo_terms(row, labels)
    if not terms:
        return "0"
    s = terms[0]
    for t in terms[1:]:
        s += f" - {t[1:]}" if t.startswith("-") else f" + {t}"
    return s


def _written(spec) -> tuple[dict, set]:
    """For each direction, the names of what writes it (heads, MLPs, RNN layers),
    and the directions that hold a token's code (tau), shown as tokens: ``tok``
    (the embedding's 1*tau), the readout's x[d] when it is 2 tau x[d] - tau^2 x[one]
    (the answer's code), and every direction written only by heads copying one
    such direction, or by an RNN state that shifts one along (``tok@-k``), with
    coefficient 1. Any other direction's value is printed as a number."""
    from rnngap.constructions.machine import kernels as K
    writers: dict[int, list] = {}
    head_copy: dict[int, list] = {}
    for l, L in enumerate(spec.rnn_layers):
        for d in range(L.C.shape[0]):
            if any(v != 0 for v in L.C[d]) or any(v != 0 for v in L.W2[d]) or L.b2[d] != 0:
                writers.setdefault(d, []).append(f"RNN layer {l}")
    for l, L in enumerate(spec.attn_layers):
        for h in L.heads:
            for d in range(h.WO.shape[0]):
                ks = [k for k in range(h.WO.shape[1]) if h.WO[d, k] != 0]
                if ks:
                    writers.setdefault(d, []).append(f"head {h.name}")
                    head_copy.setdefault(d, []).append((h, ks))
        for d in range(L.W2.shape[0]):
            if any(v != 0 for v in L.W2[d]) or L.b2[d] != 0:
                writers.setdefault(d, []).append(f"MLP {l}")
    code = {d for d, (kind, _, coef) in enumerate(spec.embedding) if kind == K.F_TOK and coef == 1}
    # the readout's nearest-code form 2 tau x[d] - tau^2 x[one]: x[d] is the answer's code
    lin = [(d, c) for d, kind, _, c in spec.readout if kind == K.F_TOK]
    sq = [(spec.labels[d], c) for d, kind, _, c in spec.readout if kind == K.F_TOK_SQ]
    if len(lin) == 1 and lin[0][1] == 2 and sq == [("one", -1)] and len(spec.readout) == 2:
        code.add(lin[0][0])
    for L in spec.rnn_layers:        # a state number shifting a code along (tok@-k), read out as it is
        S = L.A.shape[0]
        state: set[int] = set()
        grew = True
        while grew:
            grew = False
            for s in range(S):
                if s in state:
                    continue
                a = [j for j in range(S) if L.A[s, j] != 0]
                b = [d for d in range(L.B.shape[1]) if L.B[s, d] != 0]
                if (not a and len(b) == 1 and b[0] in code and L.B[s, b[0]] == 1) or \
                        (not b and len(a) == 1 and a[0] in state and L.A[s, a[0]] == 1):
                    state.add(s)
                    grew = True
        for d in range(L.C.shape[0]):
            src = [j for j in range(S) if L.C[d, j] != 0]
            if len(src) == 1 and src[0] in state and L.C[d, src[0]] == 1 and len(writers.get(d, ())) == 1 \
                    and not any(v != 0 for v in L.W2[d]) and L.b2[d] == 0:
                code.add(d)
    changed = True
    while changed:
        changed = False
        for d, copies in head_copy.items():
            if d in code or len(writers[d]) != len(copies):      # an MLP or RNN writes it too
                continue
            ok = True
            for h, ks in copies:
                for k in ks:
                    src = [s for s in range(h.WV.shape[1]) if h.WV[k, s] != 0]
                    ok &= h.WO[d, k] == 1 and len(src) == 1 and src[0] in code and h.WV[k, src[0]] == 1
                ok &= len(ks) == 1
            if ok:
                code.add(d)
                changed = True
    return writers, code


def _feature(kind: int, param, tokens: Tokens) -> str:
    from rnngap.constructions.machine import kernels as K
    name = K.FEATURE_NAMES[kind]
    if kind == K.F_IS_TOKEN:
        return f"is_token({tokens(param)})"
    if kind in (K.F_TOK_INV, K.F_POS_INV):
        return name.replace("c", _num(param))
    return name


def _gadgets(groups) -> str:
    """'8 max (16 neurons), 4 unlabelled neurons' from an MLP's per-neuron intents."""
    by: dict[str, list] = {}
    plain = 0
    for g in groups:
        if g is None:
            plain += 1
            continue
        name = getattr(g, "gadget", str(g))
        lst = by.setdefault(name, [])
        if not any(x is g for x in lst):
            lst.append(g)
    counts = {name: sum(1 for g in groups if g is not None and getattr(g, "gadget", str(g)) == name) for name in by}
    parts = [f"{len(lst)} {name} ({counts[name]} neurons)" if len(lst) > 1 or counts[name] > 1 else f"1 {name}"
             for name, lst in by.items()]
    if plain:
        parts.append(f"{plain} unlabelled neuron{'s' if plain != 1 else ''}")
    return ", ".join(parts)


# ---------------------------------------------------------------- the command

def run(args) -> int:
    from rnngap.checks.catalog.records import by_name, names
    from rnngap.constructions.machine.fixedpoint import PrecisionError

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
    sess = feed_example(model, toks)
    nxt = sess.next_token()
    for line in render(model, toks, sess, nxt, seed=args.seed, codes=getattr(args, "codes", False),
                       full=getattr(args, "full", False)):
        print(line)
    return 0


def render(model, toks, sess, nxt: int, seed: int = 0, codes: bool = False, full: bool = False) -> list[str]:
    """The lines of ``show``: every one at most :data:`WIDTH` columns."""
    from rnngap.constructions.machine import kernels as K
    spec = model.spec
    labels = spec.labels
    tokens = Tokens(codes)
    short = None if full else SHORT_LINES
    _, code_dims = _written(spec)
    out: list[str] = []
    add = out.extend

    # header: the model's one-line description, wrapped at its commas
    add(pack("", [p.strip() for p in model.describe().split(", ")], sep=", ", indent=4))

    # the example and its answer
    out.append("")
    names = [tokens(t) for t in toks]
    out.append(f"example (seed {seed}): {len(toks)} tokens, positions 0..{len(toks) - 1}")
    add(_prompt_lines(names, full))
    out.append(f"next token: {tokens(nxt)}")

    # the embedding
    D = len(labels)
    embedded = [d for d, (kind, _, _) in enumerate(spec.embedding) if kind != K.F_ZERO]
    out.append("")
    out.append(f"residual stream: {D} directions, {len(embedded)} embedded, {D - len(embedded)} written by the layers")
    out.append("")
    out.append("embedding")
    cells = []
    for d in embedded:
        kind, param, coef = spec.embedding[d]
        f = _feature(kind, param, tokens)
        cells.append(f"[{d}] {labels[d]} = {f if coef == 1 else f'{_num(coef)}*{f}'}")
    add(table(cells))

    # the layers, in the order they run: RNN layers, then attention layers
    add(_layer_lines(spec, sess, toks, tokens, short, full))

    # the readout
    out.append("")
    out.append("readout")
    add(_readout_lines(spec, sess, nxt, tokens, code_dims))

    # the final residual
    add(_residual_lines(sess, tokens, code_dims, short, full))
    return out


def _layer_lines(spec, sess, toks, tokens, short, full: bool) -> list[str]:
    """``show``'s lines of every layer, in the order they run: the RNN layers,
    then the attention layers (each head's score, copies, margins and where it
    attends on the example)."""
    labels = spec.labels
    out: list[str] = []
    add = out.extend
    att = sess.attention() if spec.attn_layers else None
    for l, L in enumerate(spec.rnn_layers):
        S, M = L.A.shape[0], L.W1.shape[0]
        out.append("")
        out.append(f"RNN layer {l}: " + (f"state of {S} number{'s' if S != 1 else ''}" if S else "no state")
                   + (f", MLP of {_neurons(M)}" if M else ", no MLP"))
        if S:
            add(pack("  state: ", list(L.state_labels) or [f"h{s}" for s in range(S)], sep=", ",
                     max_lines=short, more="more"))
            reads = [labels[d] for d in range(L.B.shape[1]) if any(v != 0 for v in L.B[:, d])]
            add(pack("  reads: ", reads, sep=", ", max_lines=short, more="more"))
            wr = [labels[d] for d in range(L.C.shape[0]) if any(v != 0 for v in L.C[d])]
            add(pack("  writes: ", wr, sep=", ", max_lines=short, more="more"))
        if M:
            add(_mlp_lines(L, labels, short))
    for l, L in enumerate(spec.attn_layers):
        H, M = len(L.heads), L.W1.shape[0]
        out.append("")
        out.append(f"attention layer {l}: " + (f"{H} head{'s' if H != 1 else ''}" if H else "no heads")
                   + (f", MLP of {_neurons(M)}" if M else ", no MLP"))
        for h_i, h in enumerate(L.heads):
            gadget = h.intent[0] if h.intent else ""
            out.append(f"  head {h.name}" + (f" ({gadget})" if gadget else ""))
            terms = []
            for k in range(h.WQ.shape[0]):
                q, kk = combo(h.WQ[k], labels), combo(h.WK[k], labels)
                if q != "0" and kk != "0":
                    terms.append(f"({q})·({kk})")
            add(pack("    score = ", terms or ["0"], indent=len("    score = ") - 2, max_lines=short))
            copies = []
            for k in range(h.WV.shape[0]):
                tgt = [labels[d] for d in range(h.WO.shape[0]) if h.WO[d, k] != 0]
                if tgt:
                    copies.append(f"{combo(h.WV[k], labels)} -> {', '.join(tgt)}")
            if copies:
                add(pack("    copies ", copies, sep="; ", max_lines=short, more="more copies"))
            m = spec.notes.get("margins", {}).get(h.name)
            if m:
                add(pack("    margin: ", [f"{k}={v}" for k, v in m.items()], sep=", "))
            add(_attends(att[l, h_i], toks, tokens, full))
        if M:
            add(_mlp_lines(L, labels, short))
    return out


def _residual_lines(sess, tokens, code_dims, short, full: bool) -> list[str]:
    """``show``'s lines of the final residual at the last position: codes as
    tokens, the other nonzero values as numbers."""
    out: list[str] = []
    add = out.extend
    D = len(sess.model.spec.labels)
    res = sess.residual()
    out.append("")
    zero = sum(1 for d, v in enumerate(res.values()) if v == 0 and d not in code_dims)
    out.append("final residual at the last position"
               + (f" ({zero} of {D} directions are 0, not shown)" if zero else ""))
    tok_cells, num_cells = [], []
    for d, (lab, v) in enumerate(res.items()):
        if v == 0 and not (d in code_dims):
            continue
        if d in code_dims and tokens.of_code(v) is not None:
            tok_cells.append(f"{lab}: {tokens.of_code(v)}")
        elif v != 0:
            num_cells.append(f"{lab}: {_num(v)}")
    if tok_cells:
        add(pack("  as tokens (a token's code): ", tok_cells, sep=", ", indent=4,
                 max_lines=short, more="more"))
    if num_cells:
        add(pack("  values: ", num_cells, sep=", ", indent=4, max_lines=None if full else 2 * SHORT_LINES,
                 more="more (--full shows them)"))
    return out


def _prompt_lines(names: list[str], full: bool) -> list[str]:
    """The prompt, each line led by the position of its first token."""
    pw = len(str(len(names) - 1))
    lines, start, cur = [], 0, []
    room = WIDTH - (2 + pw + 2)
    width = 0
    for i, nm in enumerate(names):
        if cur and width + 1 + len(nm) > room:
            lines.append((start, cur))
            start, cur, width = i, [], 0
        width += (1 if cur else 0) + len(nm)
        cur.append(nm)
    if cur:
        lines.append((start, cur))
    text = [f"  {s:>{pw}}  {' '.join(c)}" for s, c in lines]
    if full or len(text) <= PROMPT_LINES:
        return text
    head, tail = PROMPT_LINES - 2, 1
    skipped_from, skipped_to = lines[head][0], lines[-tail][0] - 1
    return text[:head] + [f"  {'':>{pw}}  ... positions {skipped_from}..{skipped_to} not shown (--full shows them)"] \
        + text[-tail:]


def _attends(w, toks, tokens: Tokens, full: bool) -> list[str]:
    """What a head attends to at the last position: the largest weights first."""
    nz = np.nonzero(w)[0]
    order = sorted(nz.tolist(), key=lambda j: (-w[j], j))
    shown = order if full else order[:TOP_POSITIONS]
    cells = [f"pos {j} ({tokens(toks[j])}): {w[j]:.4g}" for j in shown]
    rest = len(order) - len(shown)
    if rest:
        cells.append(f"{rest} more positions (weight {sum(w[j] for j in order[len(shown):]):.4g})")
    if not cells:
        cells = ["nothing (every weight 0)"]
    return pack("    attends at the last position to: ", cells, sep=", ", indent=6)


def _neurons(m: int) -> str:
    return f"{m} hidden neuron{'s' if m != 1 else ''}"


def _mlp_lines(L, labels, short) -> list[str]:
    """An MLP: its neurons by gadget, what they read and what they write."""
    out = [f"  MLP: {_neurons(L.W1.shape[0])}"]
    g = _gadgets(list(L.groups)) if any(x is not None for x in L.groups) else ""
    if g:
        out.extend(pack("    gadgets: ", g.split(", "), sep=", ", max_lines=short, more="more"))
    reads = [labels[d] for d in range(L.W1.shape[1]) if any(v != 0 for v in L.W1[:, d])]
    writes = [labels[d] for d in range(L.W2.shape[0]) if any(v != 0 for v in L.W2[d]) or L.b2[d] != 0]
    out.extend(pack("    reads: ", reads, sep=", ", max_lines=short, more="more"))
    out.extend(pack("    writes: ", writes, sep=", ", max_lines=short, more="more"))
    return out


def _readout_lines(spec, sess, nxt: int, tokens: Tokens, code_dims: set) -> list[str]:
    """The readout's score, and the answer at the last position as a token."""
    from rnngap.constructions.machine import kernels as K
    labels = spec.labels
    res = sess.residual()
    feat = {K.F_TOK: "tau", K.F_TOK_SQ: "tau^2", K.F_ONE: "1"}
    terms = []
    for d, kind, param, coef in spec.readout:
        f = feat.get(kind) or _feature(kind, param, tokens)
        c = Fraction(coef)
        terms.append(("" if c == 1 else "-" if c == -1 else f"{_num(c)}*") + f"{f}*{labels[d]}")
    score = terms[0] + "".join(f" - {t[1:]}" if t.startswith("-") else f" + {t}" for t in terms[1:])
    out = pack("  next token = the token t with the largest ", [f"{score} (tau: t's code)"], sep=" ", indent=4)
    # the nearest-code form 2 tau x - tau^2 one: the answer is the token whose code is nearest x
    one = labels.index("one") if "one" in labels else -1
    lin = [(d, Fraction(c)) for d, kind, _, c in spec.readout if kind == K.F_TOK]
    sq = [(d, Fraction(c)) for d, kind, _, c in spec.readout if kind == K.F_TOK_SQ]
    if lin and sq == [(one, Fraction(-1))] and len(lin) + 1 == len(spec.readout):
        target = sum(c / 2 * res[labels[d]] for d, c in lin)
        what = " + ".join(labels[d] if c == 2 else f"{_num(c / 2)}*{labels[d]}" for d, c in lin)
        as_tok = tokens.of_code(target)
        line = f"  at the last position {what} = {_num(target)}"
        line += f", the code of {as_tok}" if as_tok is not None else ""
        out.extend(pack("", [line, f"-> next token {tokens(nxt)}"], sep=" ", indent=4))
    else:
        vals = [f"{labels[d]} = {_num(res[labels[d]])}" for d in dict.fromkeys(d for d, *_ in spec.readout)]
        vals[-1] += f" -> next token {tokens(nxt)}"
        out.extend(pack("  at the last position ", vals, sep=", ", indent=4))
    return out
