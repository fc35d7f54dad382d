# %% [markdown]
# # 5. Closing the gap: in-context retrieval and one attention layer (T5-RAG, T5.6, T5-hyb-P)
#
# Notebook 2 showed that no RNN with fewer than n bits of state solves the Index
# family. Section 5 of the paper closes the gap in two ways: give a linear RNN
# with $O(\log n)$ bits a retrieval primitive (a regular-expression search over
# its own context, the RAG oracle of docs/theory.md §2), or append **one** attention
# layer to it (the hybrid). Both solve the retrieval tasks; with a chain of
# thought both also run IsTree and, more generally, Turing machines.
#
# The first cell runs the RAG constructions for Index, AR and Counting on one
# seeded instance each: the CoT, the answer, and every query the oracle ran.

# %%
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from rnngap.constructions.models import rag_models as RM, rag, hybrid as H
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import TRUE, FALSE
from rnngap.checks.tasks import index, ar, counting

import re

def in_tokens(pattern: str) -> str:
    """The oracle's regex over its text units (<n3>, <s7>) written with token names."""
    out = pattern.replace(r"(?:<[ns]\d+>)", "·").replace(r"<[ns]\d+>", "·").replace(r"<n\d+>", "#")
    out = re.sub(r"<n(\d+)>", lambda m: m.group(1), out)
    return re.sub(r"<s(\d+)>", lambda m: rag.token_name(int(m.group(1))), out)

n = 8
cases = {"Index": (RM.index_rag(n), index.generate(np.random.default_rng(5), n, 1, alphabet=2), index.reference),
         "AR": (RM.ar_rag(n, alphabet=4), ar.generate(np.random.default_rng(5), n, 1, alphabet=4), ar.reference),
         "Counting": (RM.counting_rag(n, alphabet=3), counting.generate(np.random.default_rng(5), n, 1, alphabet=3), counting.reference)}
traces = {}
for name, (c, batch, ref) in cases.items():
    prompt = [int(t) for t in batch.tokens[0]]
    oracle = c.oracle()
    g = c.run(prompt, oracle=oracle)
    traces[name] = (prompt + list(g.cot), len(prompt), oracle.log)
    g0 = c.run(prompt, oracle=False)
    print(f"== {name}: {c.name}, a linear RNN with {c.params} params and a {c.state_bits}-bit state")
    print("   prompt:", " ".join(rag.token_name(t) for t in prompt))
    print("   CoT   :", " ".join(rag.token_name(t) for t in g.cot))
    print(f"   answer {rag.token_name(g.answer)}, reference {rag.token_name(ref(prompt))}; {g.retrieved} of "
          f"{g.cot_length} CoT tokens came from the oracle; without the oracle: "
          f"{'no answer' if g0.answer is None else rag.token_name(g0.answer)} after {g0.cot_length} tokens "
          f"({'right' if g0.answer == ref(prompt) else 'not the answer'})")
    for k, res in enumerate(oracle.log):
        print(f"   query {k + 1}: regex {in_tokens(res.pattern)} (the oracle's text: {res.pattern}) -> "
              f"{res.status} at context position {res.at}, "
              f"returns {[rag.token_name(t) for t in res.tokens]}")

# %% [markdown]
# **Figure 1.** For each search, the regular expression the oracle runs (above
# the row), written with the model's token names (a number as its value, `·` any
# one token, `#` any number), and the prompt it searched, token by token, with
# the captured match highlighted in orange: see the match land on the data token
# that the task's answer is, which the RNN then copies out.

# %%
rows = [(name, k, res, ctx, plen) for name, (ctx, plen, log) in traces.items() for k, res in enumerate(log)]
width = max(plen for _, _, _, _, plen in rows)
fig, axes = plt.subplots(len(rows), 1, figsize=(11, 1.3 * len(rows) + 0.8), squeeze=False)
for ax, (name, k, res, ctx, plen) in zip(axes[:, 0], rows):
    for p in range(plen):
        hit = res.at is not None and res.at <= p < res.at + len(res.tokens)
        ax.add_patch(Rectangle((p, 0), 0.95, 1, color="tab:orange" if hit else "whitesmoke"))
        ax.text(p + 0.47, 0.5, rag.token_name(ctx[p]), ha="center", va="center", fontsize=7)
    ax.set_xlim(0, width); ax.set_ylim(0, 1); ax.set_yticks([])
    ax.set_ylabel(f"{name}\nquery {k + 1}", rotation=0, ha="right", va="center", fontsize=8)
    ax.set_title(f"regex {in_tokens(res.pattern)}  ->  {res.status}", fontsize=7, loc="left")
axes[-1, 0].set_xlabel("prompt position, the model's tokens (orange: the captured match the oracle returns)")
plt.tight_layout(); plt.show()

# %% [markdown]
# ## The hybrid: linear RNN layers and exactly one attention layer, no CoT
#
# `constructions.models.hybrid.ar_hybrid`: a linear RNN layer computes a counter and the
# previous token (a recurrence, no attention); the single attention layer then
# finds the first position whose previous token is the query. The cell lists what
# that layer's head reads (the residual directions with nonzero columns in its
# query, key and value matrices).
#
# **Figure 2.** The attention weights of the hybrid's only head at every query
# position of one instance: see the last row (the query) put all its weight on
# the token after the first occurrence of the queried token, and the model answer
# with it; then 300 seeded instances at n = 64.

# %%
nh = 12
hm = H.ar_hybrid(nh, alphabet=4)
print(hm.describe())
spec = hm.spec
layer = spec.attn_layers[0]
for k, h in enumerate(layer.heads):
    read = lambda Wm: ", ".join(spec.labels[d] for d in np.flatnonzero(np.any(Wm != 0, axis=0)))
    print(f"the one attention layer, head {h.name or k}: query reads [{read(h.WQ)}], key reads [{read(h.WK)}], "
          f"value reads [{read(h.WV)}]")
b = ar.generate(np.random.default_rng(2), nh, 1, alphabet=4)
toks = [int(t) for t in b.tokens[0]]
sess = hm.session(capacity=len(toks), record=True)
A = np.zeros((len(layer.heads), len(toks), len(toks)))
for t, tok in enumerate(toks):
    sess.feed([tok])
    A[:, t, : t + 1] = sess.attention()[0, :, : t + 1]
labels = [rag.token_name(t) for t in toks]
fig, axes = plt.subplots(1, len(layer.heads), figsize=(5.5 * len(layer.heads), 4.6), squeeze=False)
for ax, k in zip(axes[0], range(len(layer.heads))):
    ax.imshow(A[k], cmap="Purples", vmin=0, vmax=1)
    ax.set_xticks(range(len(toks))); ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(toks))); ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("key position"); ax.set_ylabel("query position")
    ax.set_title(f"hybrid AR, its only attention head ({layer.heads[k].name or k})", fontsize=9)
plt.tight_layout(); plt.show()
print("instance:", " ".join(labels), "| hybrid predicts", rag.token_name(sess.next_token()), "| reference", rag.token_name(ar.reference(toks)))
bb = ar.generate(np.random.default_rng(2), 64, 300, alphabet=4)
print("AR at n = 64:", int((H.ar_hybrid(64, alphabet=4).predict_batch(np.asarray(bb.tokens)) != np.asarray(bb.answers)).sum()),
      "mismatches on 300 seeded instances")

# %% [markdown]
# ## IsTree with one attention layer: a union-find chain of thought
#
# The IsTree hybrid (`istree_hybrid`) writes a union-find run as its CoT (each
# find writes the path to the root; union by size keeps paths at most
# $\log_2 N$ long), so its CoT has $O(N \log N)$ tokens instead of the DFS tour's
# $2N$: the price of having a single attention layer.
#
# Two families of trees: seeded random trees, and "deep-core" trees built so
# that many finds walk a path of length $\log_2 N$ (a core merged pairwise by its
# deepest vertices, every other vertex hung on the deepest one).
#
# **Figure 3.** Left: CoT length against N on log-log axes (filled: the model's
# own CoT, N <= 32, compared token for token with the plain-Python union-find
# reference; hollow: the reference alone for larger N), with $N \log_2 N$ and the
# declared bound: see every point under the bound. Right: the same lengths per
# vertex against $\log_2 N$: see the deep-core trees keep rising with $\log_2 N$
# (each hung vertex's find walks the core's depth, so the increase per doubling
# tends to about half a token: $\Theta(N \log N)$ in total), while random trees
# level off near a constant per vertex.

# %%
from rnngap.constructions.models import istree as IT
from rnngap.checks.tasks import istree as T
from rnngap.checks.tasks.istree_unionfind import unionfind_cot

def deep_core_tree(N):
    """A tree whose union-find CoT is long: a core of 2^k vertices merged pairwise by
    their deepest vertices (union by size keeps depth k = log2 of the core), then every
    other vertex hung on the core's deepest vertex, so each of those finds walks k edges."""
    k = (N // 2).bit_length() - 1
    groups, deep, edges = [[v] for v in range(2 ** k)], list(range(2 ** k)), []
    while len(groups) > 1:
        edges += [(deep[a], deep[a + 1]) for a in range(0, len(groups), 2)]
        groups = [groups[a] + groups[a + 1] for a in range(0, len(groups), 2)]
        deep = deep[::2]        # on a tie the u-side root goes under: its deepest vertex is one deeper
    return edges + [(deep[0], v) for v in range(2 ** k, N)]

rng = np.random.default_rng(13)
families = {"random tree": lambda N: T.random_tree(rng, N).edges, "deep-core tree": deep_core_tree}
run_N, ref_N = [4, 8, 16, 32], [64, 128, 256]
lengths = {fam: {} for fam in families}
agree = runs = 0
for N in run_N + ref_N:
    model = H.istree_hybrid(N) if N in run_N else None
    for fam, make in families.items():
        edges = make(N)
        ref_cot, ref_ans = unionfind_cot(N, edges)
        if model is not None:
            out = generate(model, IT.prompt_tokens(edges), answer_tokens=[TRUE, FALSE], max_cot=H.istree_cot_bound(N))
            runs += 1
            agree += out.cot == ref_cot and out.answer == ref_ans == TRUE and T.reference_label(N, edges)
            lengths[fam][N] = out.cot_length
        else:
            lengths[fam][N] = len(ref_cot)
allN = run_N + ref_N
fig, axes = plt.subplots(1, 2, figsize=(12, 3.9))
for fam, mk in (("random tree", "o"), ("deep-core tree", "s")):
    for ax, div in ((axes[0], False), (axes[1], True)):
        for Ns_, fill, how in ((run_N, None, "model, run"), (ref_N, "none", "reference, not run")):
            ys = [lengths[fam][N] / (N if div else 1) for N in Ns_]
            xs = [np.log2(N) for N in Ns_] if div else Ns_
            ax.plot(xs, ys, mk, mfc=fill, color="tab:blue" if fam == "random tree" else "tab:red", label=f"{fam} ({how})")
axes[0].plot(allN, [N * np.log2(N) for N in allN], "--", color="gray", label="N log2 N")
axes[0].plot(allN, [H.istree_cot_bound(N) for N in allN], ":", color="k", label="declared bound")
axes[0].set_xscale("log", base=2); axes[0].set_yscale("log", base=2)
axes[0].set_xlabel("vertices N (log scale)"); axes[0].set_ylabel("CoT tokens (log scale)")
axes[0].set_title("CoT length against N, within the declared bound", fontsize=9)
axes[1].plot(np.log2(allN), [H.istree_cot_bound(N) / N for N in allN], ":", color="k", label="declared bound / N")
axes[1].set_xlabel("log2 N"); axes[1].set_ylabel("CoT tokens per vertex")
axes[1].set_title("per vertex: deep-core trees keep rising with log N, random trees level off", fontsize=9)
for ax in axes:
    ax.legend(fontsize=7)
plt.tight_layout(); plt.show()
print(f"model CoT equal to the reference, answer TRUE, and a tree by networkx on {agree}/{runs} runs")
for fam in families:
    per = [lengths[fam][N] / N for N in allN]
    print(f"{fam:15s} CoT", {N: lengths[fam][N] for N in allN})
    print(f"{'':15s} per vertex", [round(v, 2) for v in per], "| increase per doubling:", [round(b - a, 2) for a, b in zip(per, per[1:])])

# %% [markdown]
# ## A Turing machine with CoT and RAG, beside automata-lib
#
# `constructions.models.turing.tm_rag` turns an automata-lib `DTM` (here
# little-endian binary increment) into a linear RNN + RAG: the CoT holds one
# record `~ cell action` per step, and the symbol under the head is retrieved by
# a regex for the last record of that cell (or the input symbol).
#
# **Figure 4.** The tape at every step: left from automata-lib's own
# configurations, right replayed from the records in the model's CoT: see the
# two grids agree cell by cell.

# %%
from rnngap.constructions.models import turing as TM
spec = TM.MACHINES["increment"]
tm = TM.tm_rag(spec, 6)
word = "11101"
g, orc = tm.run(word)
accepted, steps, tape = TM.automata_run(spec.build(), word)
recs = tm.records(g.cot)
cells = TM.decode_records(tm.enc, word, recs)
print(f"{spec.name} on {word!r} (little-endian binary): RAG model CoT {g.cot_length} tokens, {g.retrieved} retrieved, "
      f"answer {rag.token_name(g.answer)}; automata-lib: accepted={accepted} in {steps} steps, final tape {tape!r}")
print("tape from the CoT's records:", TM.tape_string(tm.enc, cells, len(tape) - 1), "| records (cell, action):", recs)
# side by side: the tape after each step, from automata-lib's configurations and from the model's records
confs = list(spec.build().read_input_stepwise(word))
width = max(len(cf.tape.tape) for cf in confs)
syms = sorted({ch for cf in confs for ch in cf.tape.tape} | set(tm.enc.symbols))
code = {s: k for k, s in enumerate(syms)}
grid_a = np.full((len(confs), width), code[tm.enc.symbols[tm.enc.blank]])
for r, cf in enumerate(confs):
    for k, ch in enumerate(cf.tape.tape):
        grid_a[r, k] = code[ch]
grid_m = np.full((len(recs) + 1, width), code[tm.enc.symbols[tm.enc.blank]])
for r in range(len(recs) + 1):
    tp = TM.decode_records(tm.enc, word, recs[:r])
    for k in range(width):
        grid_m[r, k] = code[tm.enc.symbols[tp.get(k, tm.enc.blank)]]
fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
for ax, grid, title in ((axes[0], grid_a, "automata-lib DTM configurations"), (axes[1], grid_m, "replayed from the model's CoT records")):
    ax.imshow(grid, cmap="Pastel1", vmin=0, vmax=8, aspect="auto")
    for (r, k), v in np.ndenumerate(grid):
        ax.text(k, r, syms[v], ha="center", va="center", fontsize=8)
    ax.set_xticks(range(grid.shape[1])); ax.set_yticks(range(grid.shape[0]))
    ax.set_xlabel("tape cell"); ax.set_ylabel("step"); ax.set_title(title, fontsize=9)
fig.suptitle(f"{spec.name} on {word!r}: the same tape, step by step", fontsize=10)
plt.tight_layout(); plt.show()
print("tapes equal at every step:", grid_a.shape == grid_m.shape and bool((grid_a == grid_m).all()))
