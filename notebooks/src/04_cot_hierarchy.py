# %% [markdown]
# # 4. The CoT hierarchy (T4.1, sim): what chain of thought buys a recurrent model
#
# **Honest label.** Theorem 4.1 separates RNNs with CoT from RNNs without it
# *under a complexity assumption* (PSPACE is not contained in P/poly). That
# separation is **conditional and is not tested anywhere here**. What the machine
# runs is the construction side and its mechanism: a constant-size linear RNN that
# performs one step of a long sequential computation per CoT token, and a
# fixed-depth CoT-free network that cannot go beyond its depth. The toy task ITER
# is *not* hard (its map is a permutation, so orbits are short); it only makes
# the mechanism visible.
#
# ITER(n): m = 2n values, a fixed map $g_n$ ("rotate by 1, then fold"), instance
# `[BOS] z_1..z_n [QUERY] (m + t) a`; the answer is whether $g_n^t(a) \ge m/2$,
# for $t \le T(n) = n^2$. The first cell checks the library's $g_n$ against a
# reference written here.
#
# **Figure 1.** Left: the map $g_n$ for n = 5. Right: the orbit of one start value
# over T steps: see that the answer depends on every application before it.

# %%
import numpy as np
import matplotlib.pyplot as plt
from rnngap.constructions.models import cot_hierarchy as CH
from rnngap.constructions.build.generate import generate
from rnngap.constructions.machine.vocab import TRUE, FALSE, NUMBER_BASE

def tent_ref(x, m, d=1):
    """The map g_n in plain Python: rotate by d, then fold (the notebook's own reference)."""
    y = (x + d) % m
    return 2 * y if y < m / 2 else 2 * m - 1 - 2 * y

def tent_ref_pow(a, t):
    """g_n applied t times (m = the number of values, set below)."""
    for _ in range(t):
        a = tent_ref(a, m)
    return a

def iter_answer(a, t, m):
    for _ in range(t):
        a = tent_ref(a, m)
    return TRUE if a >= m / 2 else FALSE

n = 5
m, T = CH.modulus(n), CH.steps(n)
xs = np.arange(m)
print(f"n = {n}: m = {m} values, up to T = n^2 = {T} steps; g_n agrees with the reference on every x:",
      all(CH.g_map(int(x), m) == tent_ref(int(x), m) for x in xs))
a0 = 3
orbit = [a0]
for _ in range(T):
    orbit.append(tent_ref(orbit[-1], m))
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].plot(xs, [tent_ref(int(x), m) for x in xs], "o-")
axes[0].set_xlabel("x"); axes[0].set_ylabel("g_n(x)"); axes[0].set_title(f"the map g_n (m = {m}): rotate by 1, then fold", fontsize=9)
axes[1].step(range(T + 1), orbit, where="mid")
axes[1].axhline(m / 2 - 0.5, color="gray", ls="--", lw=1)
axes[1].set_xlabel("step t"); axes[1].set_ylabel(f"g^t({a0})")
axes[1].set_title(f"orbit of a = {a0}: the answer is [g^t(a) >= m/2] (above the dashed line)", fontsize=9)
plt.tight_layout(); plt.show()

# %% [markdown]
# ## CoT against depth
#
# Every (a, t) of ITER(5) with seeded padding. The CoT RNN (`iterate_rnn`, state
# O(log n) bits) writes $g(a), g^2(a), \dots$ as its chain of thought and answers
# after exactly t tokens. The contrast (`unrolled_rnn(n, k)`) has no CoT: it
# applies $g_n$ min(t, k) times in k stacked MLPs and answers at once.
#
# **Figure 2.** Fraction right against the number of steps t asked for: see the
# CoT RNN at 1 for every t and each k-deep unrolling exact up to t = k (thin
# lines), then wrong on some instances beyond. The unrolling answers with
# $g^k(a)$ in place of $g^t(a)$, and $g_n$ is a permutation of a finite set: so
# at some t > k the two land in the same half for every a, and the dashed line
# returns to 1 there. Here $g_5$ has order 10, so the returns are at
# t = k + 10 and k + 20 (printed below the figure, with the t where $g^t$ and
# $g^k$ agree on every a: the same lists). At every other t > k the unrolling is
# wrong on some a. This shows only that THIS
# unrolling needs depth t, which CoT supplies one token at a time; that every
# CoT-free RNN fails on some task is the unproven assumption.

# %%
rng = np.random.default_rng(41)
cases = [(a, t, [int(v) for v in rng.integers(0, m, size=n)]) for a in range(m) for t in range(T + 1)]
toks = np.array([CH.prompt(n, a, t, pad) for a, t, pad in cases], dtype=np.int64)
want = np.array([iter_answer(a, t, m) for a, t, _ in cases])
ts = np.array([t for _, t, _ in cases])
cot_rnn = CH.iterate_rnn(n)
cot_right, cot_len_ok = np.zeros(len(cases), bool), 0
for k, (row, (a, t, _)) in enumerate(zip(toks, cases)):
    g = generate(cot_rnn, row.tolist(), answer_tokens=[TRUE, FALSE], max_cot=T)
    cot_right[k] = g.answer == want[k]
    cot_len_ok += g.cot_length == t
print(cot_rnn.describe())
print(f"CoT RNN: {int(cot_right.sum())}/{len(cases)} right, CoT length = t on {cot_len_ok}/{len(cases)}")
acc = {}
for k in (1, 2, 4):
    got = CH.unrolled_rnn(n, k).predict_batch(toks)
    acc[k] = [float((got[ts == t] == want[ts == t]).mean()) for t in range(T + 1)]
fig, ax = plt.subplots(figsize=(8, 3.8))
ax.plot(range(T + 1), [float(cot_right[ts == t].mean()) for t in range(T + 1)], "ks-", lw=2, label="linear RNN with CoT (t tokens)")
for k, ys in acc.items():
    ax.plot(range(T + 1), ys, "o--", label=f"no CoT, g unrolled k = {k} times")
    ax.axvline(k + 0.5, color="gray", lw=0.5)
ax.set_xlabel("steps t asked for"); ax.set_ylabel("fraction right (every a)")
ax.set_title("CoT: one map application per token; an unrolling is exact for t <= k, and beyond only where\n"
             "g^t and g^k agree on every start (g_n is a permutation: those t recur)", fontsize=9)
ax.legend(fontsize=8); plt.tight_layout(); plt.show()
order = next(p for p in range(1, 10 * m) if all(tent_ref_pow(a, p) == a for a in range(m)))
print(f"g_n permutes 0..{m - 1} with order {order}")
for k, ys in acc.items():
    back = [t for t in range(k + 1, T + 1) if ys[t] == 1.0]
    same = [t for t in range(k + 1, T + 1)
            if all((tent_ref_pow(a, t) >= m / 2) == (tent_ref_pow(a, k) >= m / 2) for a in range(m))]
    print(f"k = {k}: right on every t <= k: {all(y == 1.0 for y in ys[:k + 1])}; wrong somewhere beyond: "
          f"{any(y < 1.0 for y in ys[k + 1:])}; back at 1 for t = {back} "
          f"(where g^t and g^k put every a in the same half: {same})")

# %% [markdown]
# ## A Transformer reproducing an RNN, token by token (claim sim)
#
# `constructions.models.simulate` builds, for a given linear RNN, a Transformer that
# writes the RNN's state into its own CoT: one block of B tokens per RNN step
# (the S state numbers, a counter and the RNN's output token Y), each state number
# recomputed exactly (same roundings) by attending to the previous block. Here the
# RNN is the CoT RNN above at n = 2, on one instance with t = T.
#
# **Figure 3.** Lines: each of the RNN's state numbers after every token it read;
# crosses: the numbers the Transformer wrote for the same step, decoded from its
# CoT: see every cross sit on its line. The cell compares them exactly.

# %%
from rnngap.constructions.models.simulate import rnnsim_transformer, compare
n2 = 2
rnn = CH.iterate_rnn(n2)
T2 = CH.steps(n2)
sim = rnnsim_transformer(rnn, max_prompt=n2 + 4, max_rnn_cot=T2, state_int_bits=(T2 + 2 * n2 + 4).bit_length())
p = CH.prompt(n2, 1, T2, [0, 3])
msg, run, tr = compare(sim, p, [TRUE, FALSE])
print(sim.model.describe())
print(f"prompt {p}: RNN CoT {len(tr.cot)} tokens, the Transformer's CoT {len(run.cot)} tokens "
      f"(B = {sim.B} tokens per RNN step); disagreement: {msg or 'none'}")
S = np.array([[float(v) for v in st] for st in tr.states])
D = np.array([[float(v) for v in st] for st in run.states])
fig, ax = plt.subplots(figsize=(8, 3.8))
names = [lab for L in rnn.spec.rnn_layers for lab in L.state_labels]
for j in range(S.shape[1]):
    ax.plot(S[:, j], "-", color=plt.cm.tab10(j), lw=1.5, label=f"RNN state {names[j] if j < len(names) else j}")
    ax.plot(D[:, j], "x", color=plt.cm.tab10(j), ms=6)
ax.set_xlabel("RNN step (tokens read)"); ax.set_ylabel("state value")
ax.set_title("lines: the RNN's state; crosses: the state the Transformer writes into its CoT (identical)", fontsize=9)
ax.legend(fontsize=7); plt.tight_layout(); plt.show()
print("states identical at every step:", [list(a) for a in run.states] == [list(b) for b in tr.states],
      f"({len(tr.states)} steps, {S.shape[1]} state numbers)")
