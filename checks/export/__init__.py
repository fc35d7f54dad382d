"""``rnngap export``: a built model written where people work (safetensors, PyTorch, TransformerLens), exactly.

``bundle`` reads a built model into named tensors (float64 and exact rationals)
and metadata; ``write`` writes a bundle to a target file atomically;
``torch_model`` is the PyTorch module of a bundle and ``lens`` its
TransformerLens HookedTransformer (both need the ``torch`` extra);
``conformance`` runs an export beside the exact machine and searches where a
float dtype first breaks it.
"""

TARGETS = ("safetensors", "torch", "transformer-lens")
"""The file formats ``rnngap export --to`` writes (checks/export/write.py)."""
