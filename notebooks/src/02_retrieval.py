# %% [markdown]
# # 2. Retrieval (T4.6): constant-size Transformers for Index, AR, c-gram and Counting, and why no small RNN can follow
#
# Each construction of claim T4.6-up is a fixed architecture (a handful of named
# residual directions, one to three attention layers, one or two heads each)
# whose weights depend on n only through values that fit its $O(\log n)$-bit
# format. This notebook walks the argument of Theorem 4.6 on the machine:
#
# 1. the four constructions, direction by direction and head by head;
# 2. one instance traced layer by layer: what each head attends to;
# 3. bits used and declared, the measured precision frontier, and the slack of
#    the necessity records (declared minus frontier bits, tight or not), against n;
# 4. the lower bound: the exact one-way communication complexity of the Index
#    reduction family, and a concrete fooling pair against a register RNN;
# 5. the separation on that same family: the Transformer against s-bit RNNs.
#
# The first cell tabulates, for n = 16, every residual direction of each model
# and, for every head, the directions its query, key and value read (the nonzero
# columns of its matrices).

# %%
import numpy as np
import matplotlib.pyplot as plt
from IPython.display import Markdown, display
from rnngap.constructions.models import retrieval as R
from rnngap.constructions.models.rag import token_name
from rnngap.checks.tasks import index, ar, cgram, counting, hard

n = 16
models = {"Index": R.index_transformer(n, alphabet=2), "AR": R.ar_transformer(n, alphabet=4), "c-gram (c=3)": R.cgram_transformer(n, alphabet=2, c=3),
          "Counting": R.counting_transformer(n, alphabet=3)}

def reads(s, W):
    return ", ".join(s.labels[d] for d in np.flatnonzero(np.any(W != 0, axis=0)))

table = ["| model | format, size | residual directions | attention heads (layer: name, query reads / key reads / value reads) |",
         "|---|---|---|---|"]
for name, m in models.items():
    s, r = m.spec, m.resources
    heads = "<br>".join(f"{l + 1}: **{h.name or k}**, q [{reads(s, h.WQ)}] / k [{reads(s, h.WK)}] / v [{reads(s, h.WV)}]"
                        for l, layer in enumerate(s.attn_layers) for k, h in enumerate(layer.heads))
    table.append(f"| {name} | {m.fmt.name} (p = {r.precision_bits}), {r.params} params, {len(s.attn_layers)} layers "
                 f"| {', '.join(s.labels)} | {heads} |")
display(Markdown("\n".join(table)))

# %% [markdown]
# ## One instance, layer by layer
#
# AR: `[BOS] x_1 .. x_n [QUERY] q`, answer the token after the first occurrence of
# q. Layer 1 copies the previous token into `prev_1` (a position-match head);
# layer 2 finds the first position whose `prev_1` is the query token.
#
# **Figure 1.** Attention weights of every head of the AR Transformer at every
# query position of one instance (row = query position, column = key position):
# see each row put all its weight on one key, the previous position in layer 1,
# the first match of the query in layer 2. The cell prints the exact weights of
# the last row and the residual stream there.

# %%
def trace(model, toks):
    """Feed one instance token by token; attention (layer, head, key) at every query position."""
    sess = model.session(capacity=len(toks), record=True)
    L = len(toks)
    La, H = len(model.spec.attn_layers), max(len(l.heads) for l in model.spec.attn_layers)
    A = np.zeros((La, H, L, L))
    for t, tok in enumerate(toks):
        sess.feed([tok])
        A[:, :, t, : t + 1] = sess.attention()[:, :, : t + 1]
    return A, sess

model = R.ar_transformer(12, alphabet=4)
batch = ar.generate(np.random.default_rng(3), 12, 1, alphabet=4)
toks = [int(t) for t in batch.tokens[0]]
labels = [token_name(t) for t in toks]
A, sess = trace(model, toks)
pred = sess.next_token()
heads = [(l, h, hd.name or f"head {h}") for l, layer in enumerate(model.spec.attn_layers) for h, hd in enumerate(layer.heads)]
fig, axes = plt.subplots(1, len(heads), figsize=(5 * len(heads), 4.6))
for ax, (l, h, name) in zip(np.atleast_1d(axes), heads):
    ax.imshow(A[l, h], cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(toks))); ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(toks))); ax.set_yticklabels(labels, fontsize=7)
    ax.set_title(f"layer {l + 1}: {name}", fontsize=9); ax.set_xlabel("key position"); ax.set_ylabel("query position")
fig.suptitle("AR, one instance: every query row puts all its weight on one key (exact one-hot)", fontsize=10)
plt.tight_layout(); plt.show()
print("instance:", " ".join(labels), "| prediction", token_name(pred), "| reference", token_name(ar.reference(toks)))
last = {l: {j: float(w) for j, w in enumerate(A[l, 0, -1]) if w} for l in range(A.shape[0])}
print("weights at the last position, per layer (head 0):", last)
res = sess.residual()
print("residual at the last position (nonzero directions):", {k: str(v) for k, v in res.items() if v})

# %% [markdown]
# ## Bits against n
#
# Each model is built for n, run on 40 seeded random instances of its task, and
# its resources report the precision the run used (the largest integer part any
# value reached, plus f + 1) next to the declared $p(n) = I(n) + f(n) + 1$.
#
# **Figure 2.** Declared (dashed) and used (solid) precision bits against n on a
# log scale: see straight lines, i.e. $O(\log n)$ bits, the used ones below the
# declared ones. AR and c-gram have nearly the same bits, so each construction is
# drawn a little apart in n, with its own marker, and every line stays visible.
# Counting is steeper because it needs $f \approx 2\log_2 n$ to tell $1/(c+1)$
# from $1/(t + 3/2)$. The certified range of each declaration (`rnngap certify`)
# is not drawn here.

# %%
builders = {"Index": (lambda n: R.index_transformer(n, alphabet=2), lambda rng, n: index.generate(rng, n, 40, alphabet=2)),
            "AR": (lambda n: R.ar_transformer(n, alphabet=4), lambda rng, n: ar.generate(rng, n, 40, alphabet=4)),
            "c-gram": (lambda n: R.cgram_transformer(n, alphabet=2, c=3), lambda rng, n: cgram.generate(rng, n, 40, alphabet=2, c=3)),
            "Counting": (lambda n: R.counting_transformer(n, alphabet=3), lambda rng, n: counting.generate(rng, n, 40, alphabet=3))}
ns = [8, 32, 128, 512]
rows = {}
for name, (build, gen) in builders.items():
    rows[name] = []
    for n in ns:
        m = build(n)
        b = gen(np.random.default_rng(n), n)
        got = m.predict_batch(np.asarray(b.tokens))
        r = m.resources
        rows[name].append((n, r.used_precision_bits, r.precision_bits, int((got != np.asarray(b.answers)).sum())))
fig, ax = plt.subplots(figsize=(7.5, 4))
markers = "osD^"
for k, (name, rs) in enumerate(rows.items()):
    c = plt.cm.tab10(k)
    shift = 2 ** (0.07 * (k - 1.5))     # each construction drawn slightly apart in n: equal lines stay visible
    xs = [r[0] * shift for r in rs]
    ax.plot(xs, [r[2] for r in rs], "--", color=c, label=f"{name}: declared p")
    ax.plot(xs, [r[1] for r in rs], markers[k] + "-", color=c, mfc="none", label=f"{name}: used on the sample")
ax.set_xscale("log", base=2); ax.set_xlabel("n (log scale; each construction shifted a little in n)")
ax.set_ylabel("precision bits p = I + f + 1")
ax.set_title("bits grow like log n: used (solid) stays below declared (dashed); AR and c-gram nearly coincide",
             fontsize=9)
ax.legend(fontsize=7, ncol=2); plt.tight_layout(); plt.show()
for name, rs in rows.items():
    print(f"{name:9s}", "  ".join(f"n={n}: used {u}/{d} bits, {w} wrong of 40" for n, u, d, w in rs))

# %% [markdown]
# **Figure 3.** The measured precision frontier (`checks.verify.frontier`: the smallest
# fraction bits at which the rebuilt construction is exact on a fixed seeded
# sample, then the smallest integer bits at that f) against n, log scale, with
# the declaration dashed: see the frontier grow by a constant number of bits per
# doubling of n, never above the declaration.

# %%
from rnngap.checks.verify.frontier import frontier_table, fit_slope
ft = frontier_table(["index", "ar", "cgram", "counting"], [16, 64, 256])
fig, ax = plt.subplots(figsize=(7.5, 4))
for k, name in enumerate(["index", "ar", "cgram", "counting"]):
    rs = [r for r in ft if r["construction"] == name]
    c = plt.cm.tab10(k)
    xs = [r["n"] * 2 ** (0.07 * (k - 1.5)) for r in rs]
    ax.plot(xs, [r["p_declared"] for r in rs], "--", color=c, label=f"{name}: p declared")
    ax.plot(xs, [r["p_min"] for r in rs], "osD^"[k] + "-", color=c, mfc="none", label=f"{name}: p at the frontier")
ax.set_xscale("log", base=2); ax.set_xlabel("n (log scale; each construction shifted a little in n)")
ax.set_ylabel("total bits p")
ax.set_title("measured precision frontier (smallest exact f, then I) vs declaration", fontsize=9)
ax.legend(fontsize=7, ncol=2); plt.tight_layout(); plt.show()
print("slope of the frontier p_min per doubling of n:", {k: round(v["slope"], 2) for k, v in fit_slope(ft, "p_min").items()})

# %% [markdown]
# **Figure 4.** Slack of the necessity records (`checks.verify.necessity`, saturate mode,
# on the reduction image, Counting with its closest comparisons c = n, t = n - 1, n
# added): declared minus frontier bits, integer (solid) and fraction (dashed),
# against n. A scan is *tight* when one bit below its frontier some instance's
# final answer is wrong; a frontier at f = 0 is the floor (no fewer bits exist),
# counted as neither. See every integer scan tight with a slack that does not
# grow with n, and Counting's fraction scan tight with slack 2; Index, AR and
# c-gram never need a fraction bit (their weights are exactly 0/1): their f
# frontier is the floor and their fraction slack is the one declared bit.

# %%
from rnngap.checks.verify import checks_retrieval as CR
where = (("exhaustive", 4), ("sampled", 64), ("sampled", 256))
nec = {key: [CR.necessity_records(key, "quick", 0, where=(w,))[0] for w in where]
       for key in ("index", "ar", "cgram3", "counting")}
fig, ax = plt.subplots(figsize=(7.5, 3.8))
for k, (key, recs) in enumerate(nec.items()):
    c = plt.cm.tab10(k)
    ax.plot([r.n for r in recs], [r.int_slack for r in recs], "o-", color=c, label=f"{key}: integer slack")
    ax.plot([r.n for r in recs], [r.frac_slack for r in recs], "s--", color=c, label=f"{key}: fraction slack")
ax.set_xscale("log", base=2); ax.set_xlabel("data length n (log scale)"); ax.set_ylabel("declared minus frontier bits")
ax.set_title("slack of the T4.6-up necessity records on the reduction image (saturate mode)", fontsize=9)
ax.legend(fontsize=7, ncol=2); plt.tight_layout(); plt.show()
scans = {"tight (wrong final answer one bit below)": 0, "not tight": 0, "floor (f = 0 or I = 1)": 0}
for key, recs in nec.items():
    for r in recs:
        print(f"{key:9s} n={r.n:4d}: I frontier {r.frontier_int_bits} (slack {r.int_slack}, tight {r.int_tight}), "
              f"f frontier {r.frontier_frac_bits} (slack {r.frac_slack}, tight {r.frac_tight})")
        for t in (r.int_tight, r.frac_tight):
            scans["floor (f = 0 or I = 1)" if t is None else "tight (wrong final answer one bit below)" if t
                  else "not tight"] += 1
print("scans:", scans)

# %% [markdown]
# ## The lower bound: one-way communication complexity
#
# An RNN with an s-bit state that solves a task on instances `alice(x) + bob(i)`
# is a one-way protocol with s bits: Bob's answer is a function of the state
# after Alice's prefix. `lowerbounds.reductions` maps Index ($x \in \{0,1\}^n$,
# query $i$) into each task; `lowerbounds.cc` computes the exact one-way
# complexity of the resulting family (the number of distinct rows of the full
# communication matrix, under the task's plain-Python reference).
#
# **Figure 5.** Exact one-way CC of each reduction family against n: see all four
# lie on the line n (the markers overlap), so any RNN solving these families
# needs at least n bits of state.

# %%
from functools import partial
from rnngap.lowerbounds import cc, reductions as LR, witness as W
from rnngap.lowerbounds.targets_toy import CompactIndexRegister
from rnngap.constructions.models.targets import ReductionFormatParser, ParsedIndexRNN

families = {"Index": (LR.INDEX, index.reference), "AR": (LR.AR, ar.reference),
            "c-gram (c=3)": (LR.cgram_reduction(3), partial(cgram.reference, c=3)),
            "Counting": (LR.COUNTING, counting.reference)}
cc_ns = list(range(1, 9))
ccs = {name: cc.cc_table(lambda n, red=red, ref=ref: cc.reduction_split(red, n, ref), cc_ns)
       for name, (red, ref) in families.items()}
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for k, (name, res) in enumerate(ccs.items()):
    ax.plot(cc_ns, [r.bits for r in res], "o-", ms=8 - 1.5 * k, label=name)
ax.plot(cc_ns, cc_ns, "k:", lw=1, label="n")
ax.set_xlabel("Index bits n of the reduction family"); ax.set_ylabel("exact one-way CC (bits)")
ax.set_title("each reduction family needs exactly n bits from Alice to Bob", fontsize=9)
ax.legend(); plt.tight_layout(); plt.show()
for name, res in ccs.items():
    print(f"{name:13s} CC bits", [r.bits for r in res], "| exact:", all(r.exact for r in res),
          "| distinct rows at n = 8:", res[-1].distinct_rows)

# %% [markdown]
# ## A witness against a register RNN
#
# The bounded-memory side: an s-bit Index register (`CompactIndexRegister`, s + 2
# state bits) behind a finite parser of the AR reduction's format, with s the
# largest for which its state bits stay below the CC. Two prefixes must then
# share a state (pigeonhole); `lowerbounds.witness` finds such a pair by
# exhaustive search and the query on which the two answers must differ. The
# constant-size Transformer is run on the same two instances.

# %%
n = 8
parser = ReductionFormatParser("keyvalue", 2)
s = n - 1 - 2 - parser.bits          # the largest register whose state (s + 2 + parser bits) is < n = CC
rnn = ParsedIndexRNN(CompactIndexRegister(s), parser, s)
w = W.find_witness(rnn, LR.AR, n, mode="exhaustive")
print(f"RNN {rnn.name}: {rnn.state_bits} state bits < CC = {ccs['AR'][n - 1].bits} bits at n = {n}")
print(f"x  = {''.join(map(str, w.x))}\nx' = {''.join(map(str, w.x_prime))}  share a state after Alice's prefix; query i = {w.i}")
print("instance x :", " ".join(token_name(t) for t in w.tokens), "-> RNN", token_name(w.answer), "expected", token_name(w.expected))
print("instance x':", " ".join(token_name(t) for t in w.tokens_prime), "-> RNN", token_name(w.answer_prime),
      "expected", token_name(w.expected_prime))
tf = R.ar_transformer(2 * n, alphabet=n + 2)
print("the constant-size AR Transformer on both:", [token_name(tf.predict(list(t))) for t in (w.tokens, w.tokens_prime)])

# %% [markdown]
# ## The separation on the reduction family
#
# **Figure 6.** Fraction of ALL instances of the AR reduction family (every x,
# every i) answered right, against n: the constant-size AR Transformer
# (O(log n)-bit format, rebuilt for each n) and register RNNs with a fixed
# number of state bits. See the Transformer stay at 1 while each RNN drops once
# n exceeds its register size s (queries beyond s are guessed).

# %%
from rnngap.constructions.build.protocol import run_rnn
sep_ns = list(range(2, 11))
tf_acc, rnn_acc = [], {s: [] for s in (2, 4, 6)}
for n in sep_ns:
    toks, want = hard.reduction_instances("ar", n)      # every x in {0,1}^n, every i (fastest)
    tf_acc.append(float((R.ar_transformer(2 * n, alphabet=n + 2).predict_batch(toks) == want).mean()))
    plen = len(LR.AR.alice([0] * n))
    for s in rnn_acc:
        r = ParsedIndexRNN(CompactIndexRegister(s), ReductionFormatParser("keyvalue", 2), s)
        right = 0
        for k in range(0, len(toks), n):                 # one Alice prefix, its n queries
            state = r.initial_state()
            for t in toks[k, :plen]:
                state = r.step(state, int(t))
            for row, wnt in zip(toks[k:k + n], want[k:k + n]):
                right += int(run_rnn(r, row[plen:].tolist(), LR.AR.answer_tokens, state=state).answer == wnt)
        rnn_acc[s].append(float(right / len(toks)))
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(sep_ns, tf_acc, "ks-", lw=2, label="constant-size AR Transformer (O(log n) bits)")
for s, acc in rnn_acc.items():
    ax.plot(sep_ns, acc, "o--", label=f"register RNN, {s + 2 + ReductionFormatParser('keyvalue', 2).bits} state bits (s = {s})")
ax.set_xlabel("Index bits n (AR family: 2n data tokens, alphabet n + 2)"); ax.set_ylabel("fraction answered right (all instances)")
ax.set_ylim(0.45, 1.03)
ax.set_title("same family: the Transformer stays exact, each fixed-state RNN falls off past n = s", fontsize=9)
ax.legend(fontsize=7); plt.tight_layout(); plt.show()
print("Transformer:", [round(a, 3) for a in tf_acc])
for s, acc in rnn_acc.items():
    print(f"RNN s = {s}:", [round(a, 3) for a in acc])

# %% [markdown]
# ## Into PyTorch: where ordinary floating point breaks the Index Transformer
#
# `rnngap export` writes a construction as a PyTorch module that emulates the
# machine's rounding (docs/export.md). In float64 it gives the machine's answers;
# in a narrower dtype the rounding grid and the exponential lose bits, and in
# float64 with a plain softmax (what TransformerLens computes without the
# machine-softmax hook) the tiny weights of non-matching positions survive.
#
# **Figure 7.** Fraction of 64 seeded instances of the Index reduction's family
# (adversarial samples, checks/tasks/hard.py) answered as the exact machine
# answers, against the Index bits m, for the exported Index Transformer in four
# floating-point modes. See float32 stay exact, bfloat16 fall off from m = 16
# and float16 at m = 64, and the plain softmax answer part of the instances
# wrong from the smallest m.
# `python -m benchmarks` searches the first failing m of every construction
# (docs/benchmarks.md).

# %%
import torch
from rnngap.checks.export.bundle import bundle
from rnngap.checks.export.conformance import reduction_model
from rnngap.checks.export.torch_model import module

ms = [2, 4, 8, 16, 32, 64]
modes = {"float32": ("float32", True), "bfloat16": ("bfloat16", True), "float16": ("float16", True),
         "float64, plain softmax": ("float64", False)}
agree = {k: [] for k in modes}
for m in ms:
    model, family, c, n = reduction_model("index-transformer", m)
    toks, _ = hard.sampled_reduction_instances(np.random.default_rng(0), family, m, 64, c)
    exact = model.predict_batch(toks)
    b = bundle(model, name="index-transformer", n=n)
    for k, (dtype, grid) in modes.items():
        tm = module(b, dtype, grid)
        got = np.array([tm.predict(torch.from_numpy(np.ascontiguousarray(r))) for r in toks])
        agree[k].append(float((got == exact).mean()))
fig, ax = plt.subplots(figsize=(7, 3.6))
for (k, acc), style in zip(agree.items(), ("ks-", "o--", "^--", "x:")):
    ax.plot(ms, acc, style, label=k)
ax.set_xscale("log", base=2)
ax.set_xlabel("Index bits m (data length n = m)"); ax.set_ylabel("fraction agreeing with the exact machine")
ax.set_ylim(-0.03, 1.05)
ax.set_title("the exported Index Transformer: exact in float32, broken by narrower floats or a plain softmax",
             fontsize=9)
ax.legend(fontsize=7); plt.tight_layout(); plt.show()
for k, acc in agree.items():
    print(f"{k:24s}", [round(a, 3) for a in acc])
