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

* ``cot``: the model's chain of thought in the paper's text format (input, then
  the DFS tour and ``[EOS]``; :func:`checks.formats.format_cot_text`), e.g.
  ``[BOS]3-2,2-1,1-0[EOS]0,1,2,3,2,1,0[EOS]``;
* ``label``: true iff the graph on ``n_nodes`` vertices is a tree. When
  ``n_nodes`` is larger than max id + 1 the Transformer's prompt carries the
  ``[COUNT] n_nodes`` header (constructions/istree.py) and the label is still
  the model's own; the RAG construction has no count input, so for it the
  extra isolated vertices make the label false without asking the model
  (``label_from`` says which: ``"model"`` or ``"n_nodes"``);
* ``n_nodes``: the vertex count used.

The label is the true tree property (networkx.is_tree). The paper's own data
generator labels by connectivity only, so on a connected graph with n edges (one
cycle) its ``official_label`` says true and this command says false.

Malformed input (bad token, self-loop, vertex out of range, duplicate edge, bad
JSON, a missing graph field) stops with exit code 2 and one line naming the
input line and the offending character offset; a missing field names the
fields the line does have and suggests ``--field``.

Models: :data:`MODELS` maps a name to a factory ``make(max_vertices, max_edges)``
returning ``predict(prompt_tokens) -> tokens``: the generated CoT (ending with
``[EOS]``) followed by the answer token, for the vertex set {0..max id}, or
{0..N-1} for a Transformer prompt with the ``[COUNT] N`` header.
"""
from __future__ import annotations

import json
from typing import Callable

from constructions import istree as C
from constructions.generate import generate
from constructions.vocab import FALSE, TILDE, TRUE

from .formats import GraphFormatError, format_cot_text, parse_graph_text

Predictor = Callable[[list[int]], list[int]]


def transformer(max_vertices: int, max_edges: int) -> Predictor:
    """The constant-size Transformer of constructions/istree.py (claim T4.7-up),
    built for the largest graph of the file, greedy generation."""
    model = C.build(max_vertices, max_edges)

    def predict(prompt: list[int]) -> list[int]:
        g = generate(model, prompt, answer_tokens=[TRUE, FALSE], max_cot=C.cot_bound(max_vertices))
        if g.stopped != "answer":
            raise RuntimeError(f"{model.name}: no answer within {C.cot_bound(max_vertices)} CoT tokens")
        return g.cot + [g.answer]
    return predict


from constructions.rag_models import istree_rag_predictor  # noqa: E402  (linear RNN + RAG, claim T5-RAG)

MODELS: dict[str, Callable[[int, int], Predictor]] = {"transformer": transformer, "rag": istree_rag_predictor}


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
    parser.add_argument("--field", default="text", metavar="NAME",
                        help="the JSON field holding the graph (default: text); for the paper's sample rows "
                             "use cot_text or retrieval_text")
    parser.add_argument("--out", required=True, metavar="OUT.jsonl",
                        help="JSON lines with 'cot' (paper's text format), 'label' (true iff a tree on n_nodes "
                             "vertices, the model's own; --model rag: false when n_nodes > max id + 1, "
                             "the extra vertices being isolated), 'label_from', 'n_nodes'")
    parser.add_argument("--model", default="transformer", choices=sorted(MODELS),
                        help="which construction writes the CoT (default: transformer)")


def _field_error(where: str, obj, field: str) -> str:
    """The one-line message for a line whose graph field is missing or not a string."""
    if not isinstance(obj, dict):
        return f"{where}: expected a JSON object with a string field '{field}', got {type(obj).__name__}"
    if field in obj:
        return f"{where}: field '{field}' must be a string, got {type(obj[field]).__name__}"
    have = ", ".join(f"'{k}'" for k in obj) or "none"
    graphs = [k for k, v in obj.items() if isinstance(v, str) and v.startswith("[BOS]")]
    hint = (f" (holding a '[BOS]...' graph: {', '.join(repr(k) for k in graphs)}; e.g. --field {graphs[0]})"
            if graphs else "")
    return (f"{where}: no field '{field}' (fields on this line: {have}); "
            f"pass --field NAME to read the graph from another field{hint}")


def _read(path: str, field: str = "text") -> list[tuple[int, list, list[int], int, str]]:
    """(line number, edges, prompt tokens, n_nodes, separator) per instance; the
    graph is read from ``field``."""
    from .cli import UsageError
    items = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{where}: invalid JSON: {e.msg} (column {e.colno})")
            if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
                raise UsageError(_field_error(where, obj, field))
            n_nodes = obj.get("n_nodes")
            if n_nodes is not None and (isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or n_nodes < 1):
                raise UsageError(f"{where}: 'n_nodes' must be an integer >= 1, got {n_nodes!r}")
            try:
                edges, tokens = parse_graph_text(obj[field], n_nodes=n_nodes)
            except GraphFormatError as e:
                raise UsageError(f"{where}: {e}")
            seps = tokens[2::3][:len(edges)]
            sep = "~" if edges and all(t == TILDE for t in seps) else "-"
            need = C.model_vertex_count(edges)
            items.append((lineno, edges, tokens, need if n_nodes is None else n_nodes, sep))
    if not items:
        raise UsageError(f"{path}: no instances (expected JSON lines with a '{field}' field)")
    return items


def run(args) -> int:
    from .cli import UsageError
    field = getattr(args, "field", "text")
    if not field:
        raise UsageError("--field needs a non-empty field name")
    items = _read(args.inputs, field)
    max_vertices = max(n_nodes for _, _, _, n_nodes, _ in items)
    max_edges = max(len(edges) for _, edges, *_ in items)
    try:
        predict = MODELS[args.model](max_vertices, max_edges)
    except ValueError as e:          # e.g. the declared precision exceeds int64 storage
        raise UsageError(f"{args.inputs}: cannot build the {args.model} model for {max_vertices} vertices and "
                         f"{max_edges} edges: {e}")
    rows = []
    for lineno, edges, tokens, n_nodes, sep in items:
        hidden = C.needs_count(n_nodes, edges)          # isolated vertices above the largest id
        if hidden and args.model == "transformer":
            tokens = C.with_count(tokens, n_nodes)      # the model reads N from the [COUNT] header
        out = predict(tokens)
        cot, answer = out[:-1], out[-1]
        from_n = hidden and args.model != "transformer"  # the RAG construction takes no vertex count
        rows.append({"cot": format_cot_text(edges, cot, sep=sep), "label": answer == TRUE and not from_n,
                     "label_from": "n_nodes" if from_n else "model", "n_nodes": n_nodes})
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
    except OSError as e:
        raise UsageError(f"cannot write {args.out}: {e.strerror}")
    return 0
