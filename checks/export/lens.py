"""The Transformers as TransformerLens HookedTransformers: a config, a state dict and the machine's softmax as hooks.

An rnngap Transformer is a HookedTransformer with no layer norm, a ReLU MLP in
every block (zero neurons pad a narrower one), scores q . k with no
1/sqrt(d_head) scale, and heads padded with zero rows to one d_head. The
position features become the lookup table ``W_pos`` over the model's
positions, each entry the machine's value; tokens outside the vocabulary get
the logit bias -inf. The machine's rounded softmax (e = round(exp(s - max)),
w = round(e / sum e) on the grid 2^-f), which the constructions rely on, is no
architecture option: :func:`machine_softmax_hooks` gives the forward hooks that
replace each pattern by it. Hybrids and RNNs raise :class:`ExportError` (export
them ``--to torch``). Details: docs/export.md.
"""
from __future__ import annotations

import io
import json
from fractions import Fraction

import numpy as np
import torch

from .bundle import Bundle, ExportError, machine_feature

FORMAT = "rnngap-transformer-lens"
"""The ``format`` key of the saved dict (its other keys: config, state_dict, frac_bits, metadata)."""


def _position_table(b: Bundle, n_ctx: int) -> np.ndarray:
    """W_pos: at position t, every position feature's value as the machine computes it."""
    t = b.tensors
    f = json.loads(b.metadata["format"])["frac_bits"]
    exact = lambda name, d: Fraction(int(t[name + ".num"][d]), int(t[name + ".den"][d]))
    table = np.zeros((n_ctx, len(t["embed.kind"])), dtype=np.float64)
    for d in np.flatnonzero(t["embed.pos.kind"]):
        kind, param, coef = int(t["embed.kind"][d]), exact("embed.pos.param", d), exact("embed.pos.coef", d)
        for pos in range(n_ctx):
            table[pos, d] = machine_feature(kind, param, coef, 0, pos, f)
    return table


def config(b: Bundle) -> dict:
    """The HookedTransformerConfig's arguments (dtype as its name, e.g. "float64")."""
    if b.metadata["kind"] != "transformer":
        raise ExportError(f"transformer-lens holds Transformers only; {b.metadata['name']} is a "
                          f"{b.metadata['kind']} (its RNN layers have no place in a HookedTransformer): "
                          f"use --to torch")
    layers = json.loads(b.metadata["layers"])
    t = b.tensors
    heads = [(L["index"], h) for L in layers for h in range(len(L["heads"]))]
    d_head = max([t[f"attn.{l}.head.{h}.{w}"].shape[0] for l, h in heads for w in ("WQ", "WV")] or [1])
    d_mlp = max([L["mlp_width"] for L in layers] + [1])
    n_ctx = json.loads(b.metadata["max_positions"])
    V = t["embed.token"].shape[0]
    return {"d_model": int(t["embed.token"].shape[1]), "d_head": int(d_head), "n_layers": len(layers),
            "n_ctx": int(n_ctx), "n_heads": max([len(L["heads"]) for L in layers] + [1]), "d_mlp": int(d_mlp),
            "d_vocab": int(V), "d_vocab_out": int(V), "act_fn": "relu", "normalization_type": None,
            "positional_embedding_type": "standard", "use_attn_scale": False, "attn_only": False,
            "default_prepend_bos": False, "original_architecture": "rnngap", "model_name": b.metadata["model"],
            "dtype": "float64", "device": "cpu", "init_weights": False}


def state_dict(b: Bundle, cfg: dict) -> dict[str, torch.Tensor]:
    """The HookedTransformer's weights (float64), named as TransformerLens names them."""
    t, D, H, dh, dm = b.tensors, cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_mlp"]
    z = lambda *shape: np.zeros(shape, dtype=np.float64)
    sd = {"embed.W_E": t["embed.token"], "pos_embed.W_pos": _position_table(b, cfg["n_ctx"]),
          "unembed.W_U": t["unembed"].T.copy(),
          "unembed.b_U": np.where(t["unembed.mask"], 0.0, -np.inf)}
    for l, L in enumerate(json.loads(b.metadata["layers"])):
        W = {w: z(H, D, dh) for w in ("W_Q", "W_K", "W_V")}
        W_O = z(H, dh, D)
        for h in range(len(L["heads"])):
            head = lambda w: t[f"attn.{L['index']}.head.{h}.{w}"]
            for w, src in (("W_Q", "WQ"), ("W_K", "WK"), ("W_V", "WV")):
                W[w][h, :, :head(src).shape[0]] = head(src).T
            W_O[h, :head("WO").shape[1], :] = head("WO").T
        p = f"blocks.{l}"
        sd.update({f"{p}.attn.{w}": W[w] for w in W})
        sd.update({f"{p}.attn.W_O": W_O, f"{p}.attn.b_Q": z(H, dh), f"{p}.attn.b_K": z(H, dh),
                   f"{p}.attn.b_V": z(H, dh), f"{p}.attn.b_O": z(D)})
        W1, b1, W2, b2 = (t[f"attn.{L['index']}.mlp.{w}"] for w in ("W1", "b1", "W2", "b2"))
        W_in, b_in, W_out = z(D, dm), z(dm), z(dm, D)
        W_in[:, :W1.shape[0]], b_in[:W1.shape[0]], W_out[:W2.shape[1], :] = W1.T, b1, W2.T
        sd.update({f"{p}.mlp.W_in": W_in, f"{p}.mlp.b_in": b_in, f"{p}.mlp.W_out": W_out, f"{p}.mlp.b_out": b2})
    return {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in sd.items()}


def hooked_transformer(b: Bundle):
    """The HookedTransformer of a bundle, its weights loaded (strict: every name matched)."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    cfg = config(b)
    model = HookedTransformer(HookedTransformerConfig(**dict(cfg, dtype=getattr(torch, cfg["dtype"]))))
    own = state_dict(b, cfg)
    missing = [k for k in model.state_dict() if k not in own and not k.endswith((".mask", ".IGNORE"))]
    if missing:
        raise ExportError(f"transformer-lens: this TransformerLens expects weights rnngap does not write: "
                          f"{', '.join(missing[:4])}")
    model.load_state_dict(own, strict=False)
    return model.eval()


def machine_softmax_hooks(n_layers: int, frac_bits: int) -> list:
    """Forward hooks (for ``run_with_hooks``) that make each attention pattern the
    machine's: e = round(exp(s - max)), w = round(e / sum e), rounded half-to-even
    to the grid 2^-frac_bits (torch.round rounds half to even)."""
    scale = float(2 ** frac_bits)
    q = lambda x: torch.round(x * scale) / scale
    scores: dict = {}

    def keep(s, hook):
        scores[hook.name] = s

    def pattern(p, hook):
        s = scores.pop(hook.name.replace("hook_pattern", "hook_attn_scores"))
        e = q(torch.exp(s - s.max(dim=-1, keepdim=True).values))
        return q(e / e.sum(dim=-1, keepdim=True))

    return ([(f"blocks.{l}.attn.hook_attn_scores", keep) for l in range(n_layers)]
            + [(f"blocks.{l}.attn.hook_pattern", pattern) for l in range(n_layers)])


def to_bytes(b: Bundle) -> bytes:
    """The saved dict (``torch.load`` reads it with its default weights_only=True)."""
    model = hooked_transformer(b)
    cfg = config(b)
    saved = {"format": FORMAT, "config": cfg, "state_dict": model.state_dict(),
             "frac_bits": json.loads(b.metadata["format"])["frac_bits"], "metadata": dict(b.metadata)}
    buf = io.BytesIO()
    torch.save(saved, buf)
    return buf.getvalue()


def load(path):
    """(HookedTransformer, its machine-softmax hooks, the metadata) of a file :func:`to_bytes` wrote."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    saved = torch.load(path)
    if saved.get("format") != FORMAT:
        raise ExportError(f"{path}: not an rnngap transformer-lens export")
    cfg = saved["config"]
    model = HookedTransformer(HookedTransformerConfig(**dict(cfg, dtype=getattr(torch, cfg["dtype"]))))
    model.load_state_dict(saved["state_dict"])
    return model.eval(), machine_softmax_hooks(cfg["n_layers"], saved["frac_bits"]), saved["metadata"]
