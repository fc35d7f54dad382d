"""The exported model as a plain torch.nn.Module (TorchScript), computing what the float twin computes.

:func:`module` turns a :class:`~checks.export.bundle.Bundle` into a scripted
``torch.nn.Module`` in a dtype of one's choice (float64 by default; float32,
bfloat16 and float16 to find where ordinary floating point breaks a
construction). It computes the float twin of the exact machine
(constructions/build/real.py): the embedding (token table plus the position
formulas), the RNN layers (h_t = A h_(t-1) + B x_t, x += C h_t, then the MLP),
the attention layers (causal softmax heads, then the MLP), and the logits
``unembed @ x`` with the tokens outside the vocabulary at -inf. Its methods:
``forward(tokens)`` (logits at every position), ``residuals(tokens)``,
``predict(tokens)`` (the argmax at the last position, ties to the smallest id,
as the machine breaks them) and ``generate(prompt, answers, max_cot)`` (greedy
CoT until an answer token). :func:`save` writes it with ``torch.jit.save`` and
the bundle's metadata as the extra file ``rnngap.json``, so loading it needs only
torch: ``torch.jit.load(path)``.
"""
from __future__ import annotations

import io
import json
from typing import List

import torch
from torch import Tensor, nn

from .bundle import Bundle

METADATA_FILE = "rnngap.json"
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Grid(nn.Module):
    """The machine's rounding: a product or quotient rounded half-to-even to the
    grid 2^-f, sums exact (constructions/machine/kernels.py, ``matvec``). With
    ``on`` False every operation is plain floating point (the float twin)."""

    def __init__(self, frac_bits: int, on: bool):
        super().__init__()
        self.scale = float(2 ** frac_bits)
        self.on = on

    def q(self, x: Tensor) -> Tensor:
        if self.on:
            return torch.round(x * self.scale) / self.scale
        return x

    def matvec(self, W: Tensor, X: Tensor) -> Tensor:
        """X (T, D) -> (T, R): row t is sum_c round(W[r, c] X[t, c])."""
        if self.on:
            return self.q(X.unsqueeze(1) * W.unsqueeze(0)).sum(-1)
        return X @ W.T


class MLP(nn.Module):
    def __init__(self, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor, grid: Grid):
        super().__init__()
        self.register_buffer("W1", W1)
        self.register_buffer("b1", b1)
        self.register_buffer("W2", W2)
        self.register_buffer("b2", b2)
        self.grid = grid

    def forward(self, x: Tensor) -> Tensor:
        hidden = torch.relu(self.grid.matvec(self.W1, x) + self.b1)
        return x + (self.grid.matvec(self.W2, hidden) + self.b2)


class RNNLayer(nn.Module):
    """h_t = A h_(t-1) + B x_t;  x_t += C h_t;  x_t += W2 relu(W1 x_t + b1) + b2."""

    def __init__(self, A: Tensor, B: Tensor, C: Tensor, mlp: MLP, grid: Grid):
        super().__init__()
        self.register_buffer("A", A)
        self.register_buffer("B", B)
        self.register_buffer("C", C)
        self.mlp = mlp
        self.grid = grid

    def forward(self, X: Tensor) -> Tensor:
        h = torch.zeros(1, self.A.shape[0], dtype=X.dtype)
        bx = self.grid.matvec(self.B, X)
        rows: List[Tensor] = []
        for t in range(X.shape[0]):
            h = self.grid.matvec(self.A, h) + bx[t:t + 1]
            rows.append(self.mlp(X[t:t + 1] + self.grid.matvec(self.C, h)))
        return torch.cat(rows)


class Head(nn.Module):
    """Causal softmax attention: e_j = round(exp(s_j - max)), w_j = round(e_j / sum e),
    out = sum_j round(w_j v_j) on the grid; the plain softmax off it."""

    def __init__(self, WQ: Tensor, WK: Tensor, WV: Tensor, WO: Tensor, grid: Grid):
        super().__init__()
        self.register_buffer("WQ", WQ)
        self.register_buffer("WK", WK)
        self.register_buffer("WV", WV)
        self.register_buffer("WO", WO)
        self.grid = grid

    def forward(self, X: Tensor) -> Tensor:
        g = self.grid
        Q, K, V = g.matvec(self.WQ, X), g.matvec(self.WK, X), g.matvec(self.WV, X)
        T = X.shape[0]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        if g.on:
            S = g.q(Q.unsqueeze(1) * K.unsqueeze(0)).sum(-1)
            S = S.masked_fill(~causal, float("-inf"))
            E = g.q(torch.exp(S - S.max(dim=1, keepdim=True).values))
            W = g.q(E / E.sum(dim=1, keepdim=True))
            O = g.q(W.unsqueeze(2) * V.unsqueeze(0)).sum(1)
        else:
            W = torch.softmax((Q @ K.T).masked_fill(~causal, float("-inf")), dim=1)
            O = W @ V
        return g.matvec(self.WO, O)


class AttentionLayer(nn.Module):
    """x += sum_h WO_h attn(WQ_h x, WK_h x, WV_h x);  x += W2 relu(W1 x + b1) + b2."""

    def __init__(self, heads: List[Head], mlp: MLP):
        super().__init__()
        self.heads = nn.ModuleList(heads)
        self.mlp = mlp

    def forward(self, X: Tensor) -> Tensor:
        out = torch.zeros_like(X)
        for head in self.heads:
            out = out + head(X)
        return self.mlp(X + out)


class ExportedModel(nn.Module):
    def __init__(self, token_table: Tensor, pos_kind: Tensor, pos_param: Tensor, pos_coef: Tensor,
                 rnn: List[RNNLayer], attention: List[AttentionLayer], readout_weight: Tensor,
                 readout_dim: Tensor, mask: Tensor, grid: Grid):
        super().__init__()
        self.register_buffer("token_table", token_table)
        self.register_buffer("pos_kind", pos_kind)
        self.register_buffer("pos_param", pos_param)
        self.register_buffer("pos_coef", pos_coef)
        self.rnn = nn.ModuleList(rnn)
        self.attention = nn.ModuleList(attention)
        self.register_buffer("readout_weight", readout_weight)
        self.register_buffer("readout_dim", readout_dim)
        self.register_buffer("mask", mask)
        self.grid = grid

    def embed(self, tokens: Tensor) -> Tensor:
        g = self.grid
        X = self.token_table[tokens]
        pos = torch.arange(tokens.shape[0], dtype=X.dtype).unsqueeze(1)
        k = self.pos_kind.unsqueeze(0)
        value = torch.where(k == 1, pos, torch.where(k == 2, pos * pos, g.q(1.0 / (pos + self.pos_param))))
        return X + torch.where(k == 0, torch.zeros_like(X), g.q(value * self.pos_coef))

    def residuals(self, tokens: Tensor) -> Tensor:
        X = self.embed(tokens)
        for layer in self.rnn:
            X = layer(X)
        for layer in self.attention:
            X = layer(X)
        return X

    def forward(self, tokens: Tensor) -> Tensor:
        """The logits at every position: logit_c = sum_i round(readout_weight[c, i] x[readout_dim[i]])."""
        X = self.residuals(tokens)[:, self.readout_dim]
        if self.grid.on:
            logits = self.grid.q(X.unsqueeze(1) * self.readout_weight.unsqueeze(0)).sum(-1)
        else:
            logits = X @ self.readout_weight.T
        return logits.masked_fill(~self.mask, float("-inf"))

    @torch.jit.export
    def predict(self, tokens: Tensor) -> int:
        return int(torch.argmax(self.forward(tokens)[-1]).item())

    @torch.jit.export
    def generate(self, prompt: List[int], answers: List[int], max_cot: int) -> List[int]:
        """The CoT and answer after ``prompt``: greedy, until an answer token or
        ``max_cot`` tokens (then the list ends without an answer)."""
        context = list(prompt)
        out: List[int] = []
        for _ in range(max_cot + 1):
            tok = self.predict(torch.tensor(context, dtype=torch.long))
            out.append(tok)
            if tok in answers:
                break
            context.append(tok)
        return out


def module(b: Bundle, dtype: str = "float64", grid: bool = True) -> torch.jit.ScriptModule:
    """The scripted module of a bundle, its floating-point buffers in ``dtype``;
    ``grid``: round as the machine does at the bundle's format (else plain floats)."""
    dt = DTYPES[dtype]
    t = {k: torch.from_numpy(v.copy()) for k, v in b.tensors.items()}
    f = lambda name: t[name].to(dt)
    g = Grid(json.loads(b.metadata["format"])["frac_bits"], grid)
    mlp = lambda p: MLP(f(p + ".W1"), f(p + ".b1"), f(p + ".W2"), f(p + ".b2"), g)
    layers = json.loads(b.metadata["layers"])
    rnn = [RNNLayer(f(f"rnn.{L['index']}.A"), f(f"rnn.{L['index']}.B"), f(f"rnn.{L['index']}.C"),
                    mlp(f"rnn.{L['index']}.mlp"), g) for L in layers if L["type"] == "rnn"]
    attention = [AttentionLayer([Head(*(f(f"attn.{L['index']}.head.{h}.{w}") for w in ("WQ", "WK", "WV", "WO")), g)
                                 for h in range(len(L["heads"]))], mlp(f"attn.{L['index']}.mlp"))
                 for L in layers if L["type"] == "attention"]
    m = ExportedModel(f("embed.token"), t["embed.pos.kind"], f("embed.pos.param"), f("embed.pos.coef"),
                      rnn, attention, f("readout.weight"), t["readout.dim"], t["unembed.mask"], g)
    return torch.jit.script(m.eval())


def save(b: Bundle, out) -> None:
    """Write the scripted float64 module and the bundle's metadata to ``out`` (a path or a binary file)."""
    torch.jit.save(module(b), out, _extra_files={METADATA_FILE: json.dumps(b.metadata)})


def load(path) -> tuple[torch.jit.ScriptModule, dict]:
    """(module, metadata) of a file :func:`save` wrote."""
    extra = {METADATA_FILE: ""}
    m = torch.jit.load(path, _extra_files=extra)
    return m, json.loads(extra[METADATA_FILE])


def to_bytes(b: Bundle) -> bytes:
    buf = io.BytesIO()
    save(b, buf)
    return buf.getvalue()
