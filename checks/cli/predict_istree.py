"""``rnngap predict istree --inputs FILE.jsonl --out OUT.jsonl [--field NAME] [--model transformer]``.

Input: JSON lines, one object per line (blank lines are skipped), with

* ``text`` (or the field named by ``--field``): an IsTree instance in the
  paper's textual format (``[BOS]3-2,2-1,1-0[EOS]``, ``~`` also accepted
  between endpoints); only the graph before the first ``[EOS]`` is used, so a
  full paper string (input + CoT) can be passed as is. The paper's sample rows
  (``shared/data/istree_official_sample.jsonl``) carry the graph in
  ``cot_text`` and ``retrieval_text``: ``--field cot_text`` reads them
  unchanged (their ``n_nodes`` field is used too);
* ``n_nodes`` (optional): the vertex count. The text cannot show isolated
  vertices above the largest id; the default is max id + 1 (1 without edges).

Output: one JSON object per input object, in order:

Details: docs/internals/commands.md#predictistree.
"""
from __future__ import annotations

import json
import math
from typing import Callable

import numpy as np

from rnngap.constructions.machine.vocab import FALSE, TRUE

from rnngap.checks.io.formats import (
    EOS_TEXT, MAX_NUMBER_DIGITS, GraphFormatError, format_cot_text, format_graph_text,
    parse_graph_text,
)
from rnngap.checks.io import errors
from rnngap.checks.io.errors import (
    EXCERPT, UsageError, atomic_output, check_memory, check_outputs, excerpt, open_input, report_stream, shown,
    text_arg,
)
from rnngap.checks.io.progress import Bar

# Lazy imports: the functions below import the IsTree models (rnngap.constructions.models) only when
# the command runs, so that `rnngap --help` stays fast.

Predictor = Callable[[list[int]], list[int]]


FEED_WORK = 2 ** 21
"""Prompt tokens per model call while feeding: a chunk of s tokens at position p
costs about s * (p + s) attention scores, kept near FEED_WORK (s = FEED_WORK /
max(p, sqrt(FEED_WORK)), at least 64), so that each numba call takes well under
a second and Ctrl-C is seen between calls (one call over a 5,000-vertex prompt,
15,000 tokens, took 4.5 to 14 s)."""


def greedy_chunked(model, prompt: list[int], answers: frozenset, max_cot: int) -> list[int]:
    """Greedy generation as :func:`constructions.build.generate.generate` (the CoT, then
    the first answer token), with the prompt fed in chunks (:data:`FEED_WORK`);
    RuntimeError if no answer comes within ``max_cot`` CoT tokens."""
    prompt = [int(t) for t in model.validate_tokens(list(prompt), "prompt")]
    from rnngap.constructions.build.generate import GROW_FROM     # here: `rnngap --help` loads no kernels
    sess = model.session(capacity=len(prompt) + min(max_cot, GROW_FROM) + 1)   # grows when needed
    pos = 0
    while pos < len(prompt):
        step = max(64, FEED_WORK // max(pos, math.isqrt(FEED_WORK)))
        sess.feed(prompt[pos:pos + step])
        pos += step
    cot: list[int] = []
    while True:
        tok = sess.next_token()
        if tok in answers:
            return cot + [tok]
        if len(cot) >= max_cot:
            raise RuntimeError(f"{model.name}: no answer within {max_cot} CoT tokens")
        cot.append(tok)
        sess.feed([tok])


def transformer(max_vertices: int, max_edges: int) -> Predictor:
    """The constant-size Transformer of constructions/models/istree.py (claim T4.7-up),
    built for the largest graph of the file, greedy generation
    (:func:`greedy_chunked`: the same tokens as ``generate``)."""
    from rnngap.constructions.models import istree as C
    model = C.istree_transformer(max_vertices, max_edges)
    answers = frozenset((TRUE, FALSE))

    def predict(prompt: list[int]) -> list[int]:
        return greedy_chunked(model, prompt, answers, C.cot_bound(max_vertices))
    predict.positions = lambda prompt_length: prompt_length + C.cot_bound(max_vertices) + 1
    predict.memory = lambda positions: session_bytes(model, positions)
    return predict


def session_bytes(model, positions: int) -> int:
    """Bytes a session of ``model`` holds at ``positions`` positions, at most: the
    arrays' bytes per position (measured on two small sessions) times the
    positions, doubled (a growing session copies its buffers)."""
    def held(sess) -> int:
        return sum(v.nbytes for v in vars(sess).values() if isinstance(v, np.ndarray))
    small, big = model.session(capacity=1024), model.session(capacity=2048)
    per = (held(big) - held(small)) / max(1, big.capacity - small.capacity)
    return int(2 * per * positions) + held(small)


def rag(max_vertices: int, max_edges: int) -> Predictor:
    """The linear RNN + RAG of constructions/models/rag_models.py (claim T5-RAG)."""
    from rnngap.constructions.models.rag_models import istree_rag_predictor
    return istree_rag_predictor(max_vertices, max_edges)


MODELS: dict[str, Callable[[int, int], Predictor]] = {"transformer": transformer, "rag": rag}
"""The models by name; each imports its construction (and numba's kernels) only
when it is built, so that ``rnngap --help`` compiles and caches nothing."""


def add_arguments(parser) -> None:
    parser.description = (
        "Run an IsTree construction on graphs in the paper's text format. The label is the true tree "
        "property (networkx.is_tree); the paper's own generator labels by connectivity only, so a "
        "connected graph with n edges is 'true' there and false here. With n_nodes > max id + 1 the "
        "Transformer reads n_nodes from a [COUNT] header and labels the graph itself (the rag model: false, "
        "the extra vertices being isolated).")
    parser.add_argument("--inputs", required=True, metavar="FILE.jsonl",
                        help="JSON lines with 'text' (or the --field NAME; the paper's format, only the graph "
                             "before the first [EOS] is used) and optional 'n_nodes' (default max vertex id + 1)")
    parser.add_argument("--field", default="text", metavar="NAME", type=text_arg,
                        help="the JSON field holding the graph (default: text); for the paper's sample rows "
                             "use cot_text or retrieval_text")
    parser.add_argument("--labels", default="is_tree", metavar="NAME", type=text_arg,
                        help="the JSON field holding the expected label, true or false (default: is_tree, the "
                             "paper's sample rows' true tree property); where every row has it, the accuracy is "
                             "printed and any mismatch exits 1; --labels '' ignores labels")
    parser.add_argument("--out", metavar="OUT.jsonl",
                        help="JSON lines with 'cot' (paper's text format), 'label' (true iff a tree on n_nodes "
                             "vertices, the model's own; --model rag: false when n_nodes > max id + 1, "
                             "the extra vertices being isolated), 'label_from', 'n_nodes' (default: not written)")
    parser.add_argument("--model", default="transformer", choices=sorted(MODELS),
                        help="which construction writes the CoT (default: transformer)")


def _field_error(where: str, obj, field: str) -> str:
    """The one-line message for a line whose graph field is missing or not a string."""
    if not isinstance(obj, dict):
        return f"{where}: expected a JSON object with a string field '{field}', got {type(obj).__name__}"
    if field in obj:
        return f"{where}: field {excerpt(field)} must be a string, got {type(obj[field]).__name__}"
    have = ", ".join(f"'{k}'" for k in list(obj)[:8]) or "none"
    if len(have) > 2 * EXCERPT or len(obj) > 8:
        have = f"{have[:2 * EXCERPT]}... ({len(obj):,} fields)"
    graphs = [k for k, v in obj.items() if isinstance(v, str) and v.startswith("[BOS]")]
    listed = ", ".join(repr(k) for k in graphs[:8])
    hint = (f" (holding a '[BOS]...' graph: {listed[:2 * EXCERPT]}{'...' if len(listed) > 2 * EXCERPT else ''}; "
            f"e.g. --field {shown(graphs[0])})"
            if graphs else "")
    return (f"{where}: no field {excerpt(field)} (fields on this line: {have}); "
            f"pass --field NAME to read the graph from another field{hint}")


RAG_MAX_VERTICES = 2 ** 22
"""Largest vertex count (max id + 1) for ``--model rag``: its builder tabulates
one entry per vertex id (about 1.3 s at 2^20), so a single huge id (up to 18
digits are read) would take hours; refused up front, with the cap in the
message. (The transformer refuses far smaller graphs by its int64 precision.)"""

MAX_LINE_BYTES = 16 * 2 ** 20
"""Longest input line read (16 MiB; a graph the model can take is far shorter)."""

READ_COST = 64
"""Bytes of memory per input byte while the rows are held (measured: a 16 MiB
line of edges holds about 0.9 GB as tokens and edge lists)."""

MAX_JSON_DEPTH = 32
"""Deepest JSON nesting accepted on a line (the rows are flat objects)."""

class _NumberTooLong(ValueError):
    pass


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    """json's ``object_pairs_hook``: a key given twice is an error (json would keep
    the last silently)."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(f"the key {_short(k)} is given twice")
        out[k] = v
    return out


def _bounded_int(digits: str) -> int:
    """json's ``parse_int``: refuse a number longer than
    :data:`rnngap.checks.io.formats.MAX_NUMBER_DIGITS` before ``int()`` sees it."""
    if len(digits.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _NumberTooLong(f"a number with {len(digits.lstrip('-'))} digits (at most {MAX_NUMBER_DIGITS}: "
                             "vertex counts are int64)")
    return int(digits)


def _json_depth(line: str) -> int:
    """Largest nesting depth of brackets outside JSON strings, in linear time
    (numpy; a regex over the strings backtracks quadratically on an unclosed
    string of escaped quotes). A quote is escaped iff an odd run of
    backslashes precedes it; a bracket is inside a string iff an odd number
    of unescaped quotes precede it.

    >>> _json_depth('{"a": [1, "[[[", {"b": "\\\\"}]}')
    3
    """
    a = np.frombuffer(line.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    if not a.size:
        return 0
    idx = np.arange(a.size, dtype=np.int64)
    last_plain = np.maximum.accumulate(np.where(a != ord("\\"), idx, -1))   # last non-backslash at or before i
    run = np.zeros(a.size, dtype=np.int64)                                  # backslashes right before i
    run[1:] = idx[1:] - 1 - last_plain[:-1]
    quote = (a == ord('"')) & (run % 2 == 0)
    outside = np.cumsum(quote) % 2 == 0          # at a bracket (never a quote) the parity of the quotes before it
    step = (np.isin(a, (ord("["), ord("{"))).astype(np.int64) - np.isin(a, (ord("]"), ord("}")))) * outside
    return int(np.cumsum(step).max(initial=0))


def _lines(path: str):
    """(line number, text) of the non-blank lines of a UTF-8 file; UsageError
    naming the file and line for a line over :data:`MAX_LINE_BYTES` or bytes
    that are not UTF-8."""
    stream_bytes = errors.STREAM_BYTES           # read at each call, as open_input does
    fh, cap = open_input(path, "predict istree")
    if cap != stream_bytes:                      # a regular file: its size, known up front
        check_memory(READ_COST * cap, f"predict istree reading {path} ({cap:,} bytes)")
    seen = 0
    with fh:
        lineno = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            seen += len(raw)
            if len(raw) > MAX_LINE_BYTES:
                raise UsageError(f"{path}, line {lineno}: line longer than {MAX_LINE_BYTES:,} bytes")
            if cap == stream_bytes and seen > cap:
                raise UsageError(f"{path}: more than {stream_bytes:,} bytes from a stream (a pipe or FIFO); "
                                 "write the graphs to a file")
            if cap == stream_bytes:
                check_memory(READ_COST * seen, f"predict istree reading {path} ({seen:,} bytes so far)")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UsageError(f"{path}, line {lineno}: not UTF-8 (byte 0x{raw[e.start]:02x} at byte "
                                 f"{e.start + 1} of the line); inputs must be UTF-8 JSON lines") from None
            if line.strip():
                yield lineno, line


def _read(path: str, field: str = "text", labels: str = "") -> list[tuple[int, list, list[int], int, str, object]]:
    """(line number, edges, prompt tokens, n_nodes, graph text as written, expected
    label or None) per instance; the graph is read from ``field``, the label (a
    JSON true / false) from ``labels`` where the row has it."""
    from rnngap.constructions.models import istree as C

    items = []
    for lineno, line in _lines(path):
        where = f"{path}, line {lineno}"
        depth = _json_depth(line)
        if depth > MAX_JSON_DEPTH:
            raise UsageError(f"{where}: JSON nested {depth} deep (at most {MAX_JSON_DEPTH})")
        try:
            obj = json.loads(line, parse_int=_bounded_int, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as e:
            raise UsageError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from None
        except _DuplicateKey as e:
            raise UsageError(f"{where}: invalid JSON: {e}") from None
        except (_NumberTooLong, RecursionError, ValueError) as e:
            raise UsageError(f"{where}: invalid JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
                from None
        if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
            raise UsageError(_field_error(where, obj, field))
        n_nodes = obj.get("n_nodes")
        if n_nodes is not None and (isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or n_nodes < 1):
            raise UsageError(f"{where}: 'n_nodes' must be an integer >= 1, got {_short(n_nodes)}")
        text = obj[field]
        try:
            edges, tokens = parse_graph_text(text, n_nodes=n_nodes)
        except GraphFormatError as e:
            raise UsageError(f"{where}: {e}") from None
        graph_text = text[:text.index(EOS_TEXT) + len(EOS_TEXT)]
        need = C.model_vertex_count(edges)
        label = obj.get(labels) if labels else None
        if label is not None and not isinstance(label, bool):
            raise UsageError(f"{where}: the label field {labels!r} must be true or false, got {_short(label)}")
        items.append((lineno, edges, tokens, need if n_nodes is None else n_nodes, graph_text, label))
    if not items:
        raise UsageError(f"{path}: no instances (expected JSON lines with a '{field}' field)")
    return items


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _with_input_text(graph_text: str, edges, cot: list[int]) -> str:
    """The output text: the input graph exactly as written (its separators,
    mixed ``2~1,1-0`` included) followed by the CoT in the paper's format."""
    full = format_cot_text(edges, cot)
    canonical = format_graph_text(edges)
    if not full.startswith(canonical):          # format_cot_text writes the graph first
        raise RuntimeError("format_cot_text did not start with the graph text")
    return graph_text + full[len(canonical):]


def _predict_row(item, predict, model: str) -> dict:
    """The output row of one input row, the model run on it."""
    from rnngap.constructions.models import istree as C
    lineno, edges, tokens, n_nodes, graph_text, expected = item
    hidden = C.needs_count(n_nodes, edges)          # isolated vertices above the largest id
    if hidden and model == "transformer":
        tokens = C.with_count(tokens, n_nodes)      # the model reads N from the [COUNT] header
    out = predict(tokens)
    cot, answer = out[:-1], out[-1]
    from_n = hidden and model != "transformer"      # the RAG construction takes no vertex count
    return {"cot": _with_input_text(graph_text, edges, cot), "label": answer == TRUE and not from_n,
            "label_from": "n_nodes" if from_n else "model", "n_nodes": n_nodes}


def run(args) -> int:
    field = getattr(args, "field", "text")
    if not field:
        raise UsageError("--field needs a non-empty field name")
    check_outputs({"--out": args.out}, {"--inputs": args.inputs}, what="predict istree")
    labels = getattr(args, "labels", "is_tree") or ""
    items = _read(args.inputs, field, labels)
    max_vertices = max(item[3] for item in items)
    max_edges = max(len(edges) for _, edges, *_ in items)
    if args.model == "rag" and max_vertices > RAG_MAX_VERTICES:
        raise UsageError(f"{args.inputs}: the rag model takes at most {RAG_MAX_VERTICES:,} vertices (max id + 1), "
                         f"got {max_vertices:,}")
    try:
        predict = MODELS[args.model](max_vertices, max_edges)
    except ValueError as e:          # e.g. the declared precision exceeds int64 storage
        raise UsageError(f"{args.inputs}: cannot build the {args.model} model for {max_vertices} vertices and "
                         f"{max_edges} edges: {e}")
    if hasattr(predict, "memory"):
        longest = max(len(item[2]) + 2 for item in items)          # + the [COUNT] header a row may need
        check_memory(predict.memory(predict.positions(longest)),
                     f"predict istree --model {args.model} on {max_vertices:,} vertices")
    rows = []
    with Bar("predict istree") as tick:
        for done, item in enumerate(items):
            tick(done, len(items))
            rows.append(_predict_row(item, predict, args.model))
    mismatches = [item[0] for r, item in zip(rows, items) if item[5] is not None and r["label"] != item[5]]
    wrong = len(mismatches)
    right = sum(item[5] is not None for item in items) - wrong
    first_wrong = mismatches[0] if mismatches else None
    if args.out is not None:
        with atomic_output(args.out, what="predict istree") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    trees = sum(r["label"] for r in rows)
    line = f"{len(rows)} graphs, {trees} trees"
    if all(item[5] is not None for item in items) and labels:
        line += (f"; accuracy against {labels!r} {100.0 * right / len(rows):.2f}% ({right} of {len(rows)})"
                 + (f", the first mismatch at line {first_wrong}" if wrong else ""))
    elif labels and any(item[5] is not None for item in items):
        line += f"; {labels!r} is missing from some rows: no accuracy"
    print(line + (f" -> {args.out}" if args.out else ""), file=report_stream(args.out))
    return 1 if wrong and all(item[5] is not None for item in items) else 0
