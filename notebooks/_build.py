"""Build and execute the worked notebooks: ``python notebooks/_build.py [NAME ...]``.

Each notebook is a list of cells below; it is written, executed top to bottom
with nbclient (importing the installed package), and saved with its outputs.
The test suite re-executes every committed notebook (tests/test_notebooks.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}


def notebook(name: str):
    def deco(fn):
        NOTEBOOKS[name] = fn()
        return fn
    return deco


def md(s: str) -> tuple[str, str]:
    return ("md", s.strip())


def code(s: str) -> tuple[str, str]:
    return ("code", s.strip())


@notebook("01_machine_and_precision")
def _nb1():
    return [
        md("""# 1. The machine: O(log n)-bit fixed point, and why it makes attention exact

Every number a construction computes is a multiple of $2^{-f}$ with $|x| < 2^I$
(theory.md §1). Additions are exact and overflow raises; multiplications,
divisions and exponentials are rounded half to even from the exact result.
This notebook shows the rules, then the consequence that drives the whole paper:
a softmax weight becomes **exactly 0** once its score is more than $(f+1)\\ln 2$
below the maximum, so a head with $O(\\log n)$ bits can retrieve exactly."""),
        code("""from fractions import Fraction
import numpy as np
import matplotlib.pyplot as plt
from constructions.fixedpoint import FixedFormat, FixedPointOverflow

fmt = FixedFormat(int_bits=4, frac_bits=3)          # Q4.3: p = 8 bits
a, b = fmt.encode(Fraction(3, 2)), fmt.encode(Fraction(5, 8))
print("3/2 * 5/8 = 15/16 ->", fmt.decode(fmt.mul(a, b)), "(15/16 is a tie between 7/8 and 1: half to even)")
print("1 / 3 ->", fmt.decode(fmt.div(fmt.encode(1), fmt.encode(3))))
print("exp(-1) ->", fmt.decode(fmt.exp(fmt.encode(-1))), "=", float(fmt.decode(fmt.exp(fmt.encode(-1)))))
try:
    fmt.add(fmt.encode(15), fmt.encode(1))
except FixedPointOverflow as e:
    print("overflow:", e)"""),
        md("""## Softmax on the grid

$M = \\max_j s_j$, $e_j = \\mathrm{round}(\\exp(s_j - M))$, $Z = \\sum_j e_j$,
$w_j = \\mathrm{round}(e_j / Z)$. With two keys whose scores differ by a gap $g$,
the runner-up's weight is exactly 0 as soon as $\\exp(-g) < 2^{-(f+1)}$."""),
        code("""gaps = np.linspace(0, 30, 301)
fig, ax = plt.subplots(figsize=(7, 3.5))
for f in (4, 8, 16, 24):
    F = FixedFormat(int_bits=8, frac_bits=f)
    ws = []
    for g in gaps:
        w, _ = F.attend([0, F.encode(-g, exact=False)], np.array([[F.encode(1)], [0]]))
        ws.append(float(F.decode(w[1])))
    ax.plot(gaps, ws, label=f"f = {f}")
    ax.axvline((f + 1) * np.log(2), color="gray", lw=0.5)
ax.set_yscale("symlog", linthresh=1e-8); ax.set_ylim(0, 1); ax.set_xlabel("score gap g"); ax.set_ylabel("runner-up weight")
ax.set_title("the runner-up weight is exactly 0 beyond g = (f+1) ln 2 (gray lines)")
ax.legend(); plt.tight_layout(); plt.show()"""),
        md("""## A gadget at its declared precision, and below it

The position-match head (the Index mechanism of claim T4.6-up) declares
$I(n) = 2\\lceil\\log_2(n+2)\\rceil + 6$ integer bits and a constant $f$. It is exact
at its declaration; one integer bit below what it actually uses, it overflows
(raise mode) or, saturating, can retrieve the wrong token (how often depends on
the sample: the table shows it)."""),
        code("""from constructions import demos
from checks.tasks import index
rng = np.random.default_rng(0)
for n in (16, 256, 4096):
    m = demos.position_match(n)
    batch = index.generate(rng, n, 200)
    got = m.predict_batch(np.asarray(batch.tokens))
    r = m.resources
    low = m.with_format(FixedFormat(r.used_int_bits - 1, m.fmt.frac_bits, "saturate"))
    bad = int((low.predict_batch(np.asarray(batch.tokens)) != np.asarray(batch.answers)).sum())
    print(f"n={n:5d} {m.fmt.name:8s} mismatches {int((got != np.asarray(batch.answers)).sum())}, "
          f"int bits used {r.used_int_bits}/{m.fmt.int_bits}; one bit fewer (saturating): {bad}/200 wrong")"""),
    ]



@notebook("02_retrieval_heads")
def _nb2():
    return [
        md("""# 2. Retrieval heads: constant-size Transformers for Index, AR, c-gram, Counting (T4.6-up)

Each construction is a fixed architecture whose weights depend on n only through
values that fit its $O(\\log n)$-bit format. Below: what the heads of the AR
construction attend to (layer 1: the previous token; layer 2: the first position
whose previous token is the query), then the measured precision frontier."""),
        code("""import numpy as np
import matplotlib.pyplot as plt
from constructions import retrieval as R
from checks.tasks import ar
from constructions.vocab import Vocab

n = 12
model = R.ar_model(n, alphabet=4)
print(model.describe())
batch = ar.generate(np.random.default_rng(3), n, 1, alphabet=4)
toks = [int(t) for t in batch.tokens[0]]
labels = [str(x) for x in Vocab(model.vocab.max_number).decode(toks)]
print("instance:", " ".join(labels), "-> answer", Vocab(model.vocab.max_number).decode([int(batch.answers[0])])[0])
sess = model.session(capacity=len(toks), record=True)
maps = []
for t, tok in enumerate(toks):
    sess.feed([tok])
    maps.append(sess.attention()[:, :, :])        # (layer, head, positions so far)
L = len(toks)
A0 = np.zeros((L, L)); A1 = np.zeros((L, L))
for t, m in enumerate(maps):
    A0[t, : t + 1] = m[0, 0, : t + 1]
    A1[t, : t + 1] = m[1, 0, : t + 1]
print("prediction:", Vocab(model.vocab.max_number).decode([sess.next_token()])[0])"""),
        code("""fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, A, title in ((axes[0], A0, "layer 1: previous-token head"), (axes[1], A1, "layer 2: first-match head")):
    ax.imshow(A, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(L)); ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_yticks(range(L)); ax.set_yticklabels(labels, fontsize=7)
    ax.set_title(title); ax.set_xlabel("key position"); ax.set_ylabel("query position")
plt.tight_layout(); plt.show()
print("layer-2 weights at the last position are exactly:", {j: float(w) for j, w in enumerate(A1[-1]) if w})"""),
        md("""## The precision frontier

For each n, the smallest fraction bits (construction rebuilt at each f) and
integer bits at which the construction is exactly right on a fixed seeded
sample, next to what it declares. Counting needs $f \\approx 2\\log_2 n$ (it tells
$1/(c+1)$ from $1/(t+3/2)$); the position-match constructions need no fraction
bits, and their $O(\\log n)$ cost is in the integer bits."""),
        code("""from checks.frontier import frontier_table, fit_slope
rows = frontier_table(["index", "counting"], [16, 32, 64, 128])
fig, ax = plt.subplots(figsize=(7, 3.8))
for name, c in (("index", "tab:blue"), ("counting", "tab:red")):
    rs = [r for r in rows if r["construction"] == name]
    x = [r["log2_n"] for r in rs]
    ax.plot(x, [r["p_declared"] for r in rs], "--", color=c, label=f"{name}: p declared")
    ax.plot(x, [r["p_min"] for r in rs], "o-", color=c, label=f"{name}: p measured")
ax.set_xlabel("log2 n"); ax.set_ylabel("total bits p"); ax.legend(); plt.tight_layout(); plt.show()
print("slopes of p_min against log2 n:", {k: round(v["slope"], 2) for k, v in fit_slope(rows, "p_min").items()})"""),
    ]


@notebook("03_lower_bounds")
def _nb3():
    return [
        md("""# 3. Lower bounds you can run (T4.6-low, T4.7-low)

A streaming model with an s-bit state, whatever CoT it writes, is a one-way
protocol with s bits: everything after Alice's prefix is a function of (state,
Bob's suffix). So the exact one-way communication complexity of a task bounds
the memory of any RNN that solves it. For Index it is exactly n."""),
        code("""from functools import partial
from lowerbounds import cc, reductions, witness, targets_toy
from checks.tasks import index, counting
from constructions.vocab import token_number

table = cc.cc_table(lambda n: cc.index_split(n, index.reference), range(1, 9))
print(cc.format_cc_table(table))"""),
        md("""Counting over a fixed binary alphabet needs only about $\\log_2(n+1)$ bits; the
linear bound comes from the reductions, which let the alphabet grow with n."""),
        code("""print(cc.format_cc_table(cc.cc_table(lambda n: cc.counting_split(n, counting.reference), range(1, 8))))
print(cc.format_cc_table(cc.cc_table(lambda n: cc.reduction_split(reductions.COUNTING, n, counting.reference), range(1, 7))))"""),
        md("""## A witness: breaking a bounded-memory RNN on a concrete input

The register RNN stores the first s bits of x and answers Index from them. It is
correct for n <= s. For n = s + 1 two prefixes collide in its state, and the
finder returns the instance it gets wrong, re-verified by running the model from
scratch. With CoT (the model shifts the register while writing tokens) it fails
all the same: the state after the prefix already decides everything."""),
        code("""s = 6
for cot in (False, True):
    rnn = targets_toy.IndexRegisterRNN(s, cot=cot)
    for n in (s, s + 1, s + 3):
        w = witness.find_witness(rnn, reductions.INDEX, n, mode="exhaustive",
                                 max_cot=2 * n if cot else 0,
                                 answer_tokens=reductions.INDEX.answer_tokens if cot else None)
        if not w.found:
            print(f"cot={cot} n={n}: no collision after every prefix ({w.states_explored} states) - correct here")
        else:
            num = token_number
            print(f"cot={cot} n={n}: x={w.x} and x'={w.x_prime} share a state; query i={w.i}: "
                  f"model says {num(w.answer)} on both, expected {num(w.expected)} / {num(w.expected_prime)}")"""),
    ]


@notebook("04_istree")
def _nb4():
    return [
        md("""# 4. IsTree: retrieval in disguise (T4.7-up)

A constant-size Transformer decides whether a graph is a tree by writing the
DFS tour from vertex 0 as its chain of thought (at most 2n tokens), exactly as
the paper's own data generator writes it, then [EOS] and the label. Each step
is a retrieval: the next edge incident to the current vertex after the one it
came back from, the parent from its first visit, whether a neighbour was seen."""),
        code("""import numpy as np
import networkx as nx
import matplotlib.pyplot as plt
from constructions import istree as IT
from checks.tasks import istree as T
from checks.formats import format_cot_text
from constructions.vocab import token_number, TRUE

rng = np.random.default_rng(7)
tree = T.random_tree(rng, 9)
near = T.near_tree(rng, 9)
model = IT.build(n_vertices=9)
print(model.describe())
runs = {}
for name, g in (("random tree", tree), ("near-tree (cycle + second component)", near)):
    out = IT.run(model, g.edges)
    tour = [token_number(t) for t in out.cot if t >= 32]
    runs[name] = (g, tour, out)
    print(f"{name}: {format_cot_text(g.edges, out.cot)}  label {'TRUE' if out.answer == TRUE else 'FALSE'} "
          f"(networkx: {T.reference_label(9, g.edges)}; reference tour equal: {tour == T.dfs_tour(9, g.edges)}; "
          f"CoT {out.cot_length} <= {IT.cot_bound(9)})")"""),
        code("""fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
for ax, (name, (g, tour, out)) in zip(axes, runs.items()):
    G = nx.Graph(); G.add_nodes_from(range(9)); G.add_edges_from(g.edges)
    pos = nx.spring_layout(G, seed=1)
    nx.draw_networkx(G, pos, ax=ax, node_color=["tab:orange" if v in tour else "lightgray" for v in G], edge_color="lightgray")
    steps = list(zip(tour, tour[1:]))
    for k, (u, v) in enumerate(steps):
        ax.annotate("", xy=pos[v], xytext=pos[u], arrowprops=dict(arrowstyle="->", color=plt.cm.viridis(k / max(1, len(steps))), lw=1.5))
    ax.set_title(f"{name}: tour of {len(tour)} tokens -> {'TRUE' if out.answer == TRUE else 'FALSE'}", fontsize=9)
    ax.axis("off")
plt.tight_layout(); plt.show()"""),
        md("""## The paper's own data

Rows produced by the paper's generator (`shared/data`), as a new user would feed
them to `rnngap predict istree`: the tours come out token for token. That
generator labels a graph by connectivity alone, so a connected graph with n
edges is a "tree" there; rnngap's label is the true one (networkx)."""),
        code("""import json
from checks.shared_data import shared_file
from checks.formats import parse_cot_text
path = shared_file("istree_official_sample.jsonl")
if path is None:
    raise FileNotFoundError("shared/data/istree_official_sample.jsonl not found: put shared/ beside the checkout "
                            "or set RNNGAP_SHARED_DATA")
rows = [json.loads(l) for l in path.read_text().splitlines()]
same = disagree = 0
for r in rows:
    edges, cot = parse_cot_text(r["cot_text"], r["n_nodes"])
    hidden = r["n_nodes"] > IT.model_vertex_count(edges)      # isolated top vertices: the [COUNT] header
    out = IT.run(IT.build(r["n_nodes"]), edges, n_nodes=r["n_nodes"] if hidden else None)
    same += format_cot_text(edges, out.cot) == r["cot_text"]
    disagree += (out.answer == TRUE) != r["official_label"]
print(f"{len(rows)} rows: tours identical in {same}; labels differ from the generator's connectivity label in {disagree} rows")"""),
    ]


@notebook("05_closing_the_gap")
def _nb5():
    return [
        md("""# 5. Closing the gap: in-context RAG and one attention layer (T5-RAG, T5.6, T5-hyb-P)

A linear RNN with O(log n) bits of state cannot solve Index (notebook 3). Give it
a retrieval primitive (a regex search over its own context) and it can; give it
one attention layer at the end instead, and it can too."""),
        code("""import numpy as np
from constructions import rag_models as RM, rag, hybrid as H
from checks.tasks import index, ar
from constructions.vocab import token_number

n = 10
c = RM.index_rag(n)
print(f"{c.name}: linear RNN, {c.params} params, state {c.state_bits} bits")
batch = index.generate(np.random.default_rng(5), n, 1)
prompt = [int(t) for t in batch.tokens[0]]
g = c.run(prompt)
print("prompt:", " ".join(rag.token_name(t) for t in prompt))
print("CoT   :", " ".join(rag.token_name(t) for t in g.cot))
print("answer:", rag.token_name(g.answer), " expected:", rag.token_name(int(batch.answers[0])),
      f" ({g.retrieved} of {g.cot_length} CoT tokens came from the oracle)")
g0 = c.run(prompt, oracle=False)
print("without the oracle:", "no answer" if g0.answer is None else rag.token_name(g0.answer), f"after {g0.cot_length} tokens")"""),
        md("""## The hybrid: linear RNN layers + exactly one attention layer, no CoT"""),
        code("""m = H.hybrid_ar(64, alphabet=4)
print(m.describe())
b = ar.generate(np.random.default_rng(2), 64, 500, alphabet=4)
pred = m.predict_batch(np.asarray(b.tokens))
print("AR at n = 64:", int((pred != np.asarray(b.answers)).sum()), "mismatches on 500 instances")"""),
        md("""## Turing machines with CoT

A compiler turns a deterministic Turing machine (an automata-lib `DTM`) into a
linear RNN + RAG: the CoT holds records of tape writes, and the symbol under the
head is retrieved by a regex for the last record of that cell."""),
        code("""from constructions import turing as TM
spec = TM.MACHINES["increment"]
tm = TM.compile_rag(spec, 6)
for word in ("1101", "111", "0"):
    g, oracle = tm.run(word)
    accepted, steps, tape = TM.automata_run(spec.build(), word)
    cells = TM.decode_records(tm.enc, word, tm.records(g.cot))
    from_cot = TM.tape_string(tm.enc, cells, len(tape)).rstrip("_")
    print(f"{word!r}: CoT {g.cot_length} tokens, {g.retrieved} retrieved; answer {rag.token_name(g.answer)}; "
          f"automata-lib accepts={accepted} in {steps} steps, final tape {tape!r}; "
          f"tape from the CoT's records: {from_cot!r}")"""),
    ]

def build(name: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(s) if kind == "md" else nbformat.v4.new_code_cell(s)
                for kind, s in NOTEBOOKS[name]]
    NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    for name in (sys.argv[1:] or list(NOTEBOOKS)):
        print("built", build(name))
