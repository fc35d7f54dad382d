# %% [markdown]
# # 3. IsTree (T4.7): retrieval in disguise, with a DFS chain of thought
#
# A constant-size Transformer (claim T4.7-up, `constructions.models.istree`) decides
# whether an undirected graph is a tree by writing, as its chain of thought, the
# DFS tour from vertex 0 exactly as the paper's own data generator writes it,
# then `[EOS]` and the label. Every step of the tour is a retrieval: the next edge
# incident to the current vertex after the one it came back along, the parent of a
# vertex from its first visit, whether a neighbour was already seen. On the other
# side (T4.7-low), the Index -> IsTree gadget turns any RNN solving IsTree into a
# one-way protocol for Index, so an s-bit RNN fails once n > s.
#
# The first cell builds the model for n = 9 vertices and runs it on a random tree
# and on a near-tree (a cycle plus a second component), comparing tour and label
# with plain-Python references.

# %%
import json
import numpy as np
import networkx as nx
import matplotlib.pyplot as plt
from rnngap.constructions.models import istree as IT
from rnngap.constructions.machine.vocab import token_number, TRUE, FALSE, NUMBER_BASE
from rnngap.checks.tasks import istree as T
from rnngap.checks.io.formats import format_cot_text

N = 9
model = IT.istree_transformer(n_vertices=N)
print(model.describe())
rng = np.random.default_rng(7)
graphs = {"random tree": T.random_tree(rng, N), "near-tree": T.near_tree(rng, N)}
runs = {}
for name, g in graphs.items():
    out = IT.run(model, g.edges)
    tour = [token_number(t) for t in out.cot if t >= NUMBER_BASE]
    runs[name] = (g, tour, out)
    print(f"{name}: {format_cot_text(g.edges, out.cot)}")
    print(f"   label {'TRUE' if out.answer == TRUE else 'FALSE'} (networkx: {T.reference_label(N, g.edges)}); "
          f"tour equals the plain-Python DFS: {tour == T.dfs_tour(N, g.edges)}; CoT {out.cot_length} tokens, bound {IT.cot_bound(N)}")

# %% [markdown]
# **Figure 1.** The tree above, after six evenly spaced tokens of the model's
# tour (red: where the tour is, orange: the edges walked so far): see the tour
# go down a branch, come back along the same edges and end at vertex 0, each edge
# walked twice.

# %%
g, tour, out = runs["random tree"]
G = nx.Graph(); G.add_nodes_from(range(N)); G.add_edges_from(g.edges)
pos = nx.spring_layout(G, seed=1)
snaps = np.linspace(1, len(tour), 6).round().astype(int)
fig, axes = plt.subplots(1, 6, figsize=(16, 3.2))
for ax, k in zip(axes, snaps):
    walked = list(zip(tour[:k - 1], tour[1:k]))
    nx.draw_networkx_edges(G, pos, ax=ax, edge_color="lightgray")
    nx.draw_networkx_edges(G, pos, edgelist=walked, ax=ax, edge_color="tab:orange", width=2.5)
    nx.draw_networkx_nodes(G, pos, ax=ax, node_size=220,
                           node_color=["tab:red" if v == tour[k - 1] else ("tab:orange" if v in tour[:k] else "lightgray") for v in G])
    nx.draw_networkx_labels(G, pos, ax=ax, font_size=8)
    ax.set_title(f"after CoT token {k}: at {tour[k - 1]}", fontsize=8); ax.axis("off")
fig.suptitle("the model's DFS tour from vertex 0, step by step (red: current vertex; orange: walked)", fontsize=10)
plt.tight_layout(); plt.show()
print("tour written by the model:", tour)

# %% [markdown]
# ## How long is the chain of thought?
#
# A tree's tour walks every edge twice, so its CoT is 2(n - 1) + 1 vertices and
# `[EOS]`; on a non-tree the tour stops at the first vertex seen twice or at the
# end of the first component, so it is shorter.
#
# **Figure 2.** The longest CoT over three seeded graphs of each family, for n =
# 4..14 vertices, against the line 2n and the model's declared bound: see trees on
# (or just under) the bound and the other families below it. The cell counts the
# wrong labels.

# %%
sizes = list(range(4, 15, 2))
lens = {"random tree": [], "near-tree": [], "random graph": []}
gen = {"random tree": T.random_tree, "near-tree": T.near_tree, "random graph": T.random_graph}
rng = np.random.default_rng(11)
wrong = 0
for n_v in sizes:
    sample = {fam: [make(rng, n_v) for _ in range(3)] for fam, make in gen.items()}
    m_v = IT.istree_transformer(n_vertices=n_v, max_edges=max(len(gg.edges) for gs in sample.values() for gg in gs))
    for fam, gs in sample.items():
        best = 0
        for gg in gs:
            o = IT.run(m_v, gg.edges, n_nodes=n_v if IT.needs_count(n_v, gg.edges) else None)
            wrong += (o.answer == TRUE) != T.reference_label(n_v, gg.edges)
            best = max(best, o.cot_length)
        lens[fam].append(best)
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for fam, ls in lens.items():
    ax.plot(sizes, ls, "o-", label=f"{fam}: longest CoT of 3")
ax.plot(sizes, [2 * v for v in sizes], color="0.75", lw=5, zorder=0, label="2n")
ax.plot(sizes, [IT.cot_bound(v) for v in sizes], "k:", lw=1, label="declared CoT bound")
ax.set_xlabel("vertices n"); ax.set_ylabel("CoT tokens (tour + [EOS])")
ax.set_title("the CoT is a DFS tour: linear in n, at most about 2n", fontsize=9)
ax.legend(fontsize=8); plt.tight_layout(); plt.show()
print("wrong labels over", 3 * len(sizes) * len(gen), "graphs:", wrong)

# %% [markdown]
# ## The paper's own data
#
# Rows produced by the paper's generator (`shared/data`, found through
# `checks.io.shared_data.shared_file`), fed to the model as a user would feed them to
# `rnngap predict istree`. The cell counts the rows whose tour the model writes
# token for token, and compares the generator's label with the true tree label
# (networkx): that generator labels a graph by connectivity alone.

# %%
from rnngap.checks.io.shared_data import shared_file
from rnngap.checks.io.formats import parse_cot_text
path = shared_file("istree_official_sample.jsonl")
if path is None:
    raise FileNotFoundError("shared/data/istree_official_sample.jsonl not found: set RNNGAP_SHARED_DATA")
rows = [json.loads(l) for l in path.read_text().splitlines()]
same, table, label_wrong, built = 0, {}, 0, {}
for r in rows:
    edges, cot = parse_cot_text(r["cot_text"], r["n_nodes"])
    hidden = r["n_nodes"] > IT.model_vertex_count(edges)      # isolated top vertices: the [COUNT] header
    if r["n_nodes"] not in built:
        built[r["n_nodes"]] = IT.istree_transformer(r["n_nodes"])
    o = IT.run(built[r["n_nodes"]], edges, n_nodes=r["n_nodes"] if hidden else None)
    same += format_cot_text(edges, o.cot) == r["cot_text"]
    key = (bool(r["official_label"]), T.reference_label(r["n_nodes"], edges))
    table[key] = table.get(key, 0) + 1
    label_wrong += (o.answer == TRUE) != key[1]
print(f"{len(rows)} rows of the paper's generator: the model writes the identical tour in {same}, "
      f"and its label differs from networkx's in {label_wrong}")
for (gen_label, true_label), c in sorted(table.items()):
    print(f"   generator says {gen_label!s:5s}, networkx says {true_label!s:5s}: {c} rows")
for r in rows[:3]:
    print("  ", r["graph_type"], r["cot_text"])

# %% [markdown]
# **Figure 3.** Left: the sample rows by (generator label, true label); red bars
# are rows where they disagree. Right: one such row drawn: see a connected graph
# with a cycle, which the generator calls a tree.

# %%
disagree = [r for r in rows if bool(r["official_label"]) != T.reference_label(r["n_nodes"], parse_cot_text(r["cot_text"], r["n_nodes"])[0])]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 1.3]})
keys = sorted(table)
axes[0].bar(range(len(keys)), [table[k] for k in keys], color=["tab:green" if a == b else "tab:red" for a, b in keys])
axes[0].set_xticks(range(len(keys))); axes[0].set_xticklabels([f"gen {a}\ntrue {b}" for a, b in keys], fontsize=8)
axes[0].set_xlabel("(generator label, true label)"); axes[0].set_ylabel("rows")
axes[0].set_title("the generator labels by connectivity only", fontsize=9)
if disagree:
    r = disagree[0]
    edges = parse_cot_text(r["cot_text"], r["n_nodes"])[0]
    G = nx.Graph(); G.add_nodes_from(range(r["n_nodes"])); G.add_edges_from(edges)
    nx.draw_networkx(G, nx.spring_layout(G, seed=2), ax=axes[1], node_color="tab:red", font_size=8, node_size=200)
    axes[1].set_title(f"a row labelled {r['official_label']} by the generator: {len(edges)} edges on "
                      f"{r['n_nodes']} vertices, connected={nx.is_connected(G)}", fontsize=8)
else:
    axes[1].text(0.5, 0.5, "no row disagrees", ha="center")
axes[1].axis("off"); plt.tight_layout(); plt.show()
print(f"{len(disagree)} rows where the generator's label is not the tree label")

# %% [markdown]
# ## The lower bound: the Index -> IsTree gadget
#
# `lowerbounds.reductions.ISTREE`: Alice, holding $x \in \{0,1\}^n$, writes the
# edges $v_j - h_{x_j}$ (vertex $v_j$ hung on hub 0 or hub 1); Bob, holding $i$,
# adds a vertex $w$ joined to $v_i$ and to hub 1. The graph is a tree iff
# $x_i = 0$: with $x_i = 1$ the edges $w - v_i - h_1 - w$ close a cycle and hub
# 0's star is cut off.
#
# **Figure 4.** The gadget for one x and two queries (hubs gold, w red, Alice's
# edges blue, Bob's dashed red): see the query with $x_i = 0$ give a tree and the
# one with $x_i = 1$ a cycle plus a separate star.

# %%
from rnngap.lowerbounds import reductions as LR
x, n = (1, 0, 1, 1, 0), 5
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, i in zip(axes, (2, 3)):
    toks = LR.ISTREE.instance(x, i)
    nodes, edges = LR.parse_istree(toks.tolist())
    alice_edges = LR.parse_istree(LR.ISTREE.alice(x) + [LR.ISTREE.bob(1, n)[-1]])[1]
    G = nx.Graph(); G.add_nodes_from(range(nodes)); G.add_edges_from(edges)
    pos = nx.spring_layout(G, seed=3)
    bob = [e for e in edges if tuple(e) not in {tuple(a) for a in alice_edges}]
    nx.draw_networkx_edges(G, pos, edgelist=alice_edges, ax=ax, edge_color="tab:blue", width=2)
    nx.draw_networkx_edges(G, pos, edgelist=bob, ax=ax, edge_color="tab:red", width=2, style="dashed")
    nx.draw_networkx_nodes(G, pos, ax=ax, node_color=["gold" if v < 2 else ("tab:red" if v == nodes - 1 else "lightblue") for v in G], node_size=300)
    nx.draw_networkx_labels(G, pos, ax=ax, font_size=8)
    label = T.reference_label(nodes, edges)
    ax.set_title(f"x = {''.join(map(str, x))}, i = {i}: x_i = {x[i - 1]} -> tree: {label}", fontsize=9); ax.axis("off")
    print(f"i = {i}: edges {edges} (Bob's: {bob}); reduction expects {'TRUE' if LR.ISTREE.expected(x, i) == TRUE else 'FALSE'}, networkx says tree = {label}", end="; ")
    print(f"the IsTree Transformer answers {'TRUE' if IT.run(IT.istree_transformer(nodes), edges).answer == TRUE else 'FALSE'}")
fig.suptitle("Index -> IsTree: Alice hangs v_j on hub x_j (blue), Bob joins w to v_i and to hub 1 (red dashed): a tree iff x_i = 0", fontsize=10)
plt.tight_layout(); plt.show()

# %% [markdown]
# ## The witness
#
# An s-bit Index register behind a finite parser of the gadget's format, s chosen
# so its state has fewer bits than the exact one-way CC of the family. Two
# prefixes must share a state; the exhaustive search finds them and the query
# that tells them apart, and the IsTree Transformer is run on both graphs.
#
# **Figure 5.** The two colliding graphs: see that they differ in one edge, that
# the RNN answers both the same and that the Transformer answers both right.

# %%
from rnngap.lowerbounds import witness as W, cc
from rnngap.lowerbounds.targets_toy import CompactIndexRegister
from rnngap.constructions.models.targets import ReductionFormatParser, ParsedIndexRNN
n = 7
parser = ReductionFormatParser("istree", 2)
s = n - 1 - 2 - parser.bits
rnn = ParsedIndexRNN(CompactIndexRegister(s), parser, s)
ccr = cc.one_way_complexity(cc.reduction_split(LR.ISTREE, n, lambda toks: T.reference(toks, n_nodes=LR.istree_vertex_count(n))))
w = W.find_witness(rnn, LR.ISTREE, n, mode="exhaustive", max_cot=n)
print(f"IsTree family at n = {n}: exact one-way CC {ccr.bits} bits; RNN {rnn.name} has {rnn.state_bits} state bits")
print(f"x = {''.join(map(str, w.x))} and x' = {''.join(map(str, w.x_prime))} reach the same state; query i = {w.i}")
tf = IT.istree_transformer(LR.istree_vertex_count(n))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for ax, xx, tk, ans, exp in ((axes[0], w.x, w.tokens, w.answer, w.expected), (axes[1], w.x_prime, w.tokens_prime, w.answer_prime, w.expected_prime)):
    nodes, edges = LR.parse_istree(tk.tolist())
    G = nx.Graph(); G.add_nodes_from(range(nodes)); G.add_edges_from(edges)
    nx.draw_networkx(G, nx.spring_layout(G, seed=4), ax=ax, node_size=220, font_size=8,
                     node_color=["gold" if v < 2 else "lightblue" for v in G])
    t_ans = IT.run(tf, edges).answer
    name = lambda t: {TRUE: "TRUE", FALSE: "FALSE"}.get(t, str(t))
    ax.set_title(f"x = {''.join(map(str, xx))}, i = {w.i}: RNN {name(ans)}, Transformer {name(t_ans)}, truth {name(exp)}", fontsize=8)
    ax.axis("off")
    print(f"x = {''.join(map(str, xx))}: RNN answers {name(ans)}, the T4.7 Transformer {name(t_ans)}, expected {name(exp)}")
fig.suptitle("the fooling pair: the RNN cannot tell these graphs apart, the Transformer can", fontsize=10)
plt.tight_layout(); plt.show()
