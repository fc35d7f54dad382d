"""The build language: residual space, gadgets, the model and its sessions, the RNN-program compiler.

A construction is written with these: a :class:`~rnngap.constructions.build.gadgets.Builder`
over a named residual space, gadgets that add heads and neurons with their
margins, and :class:`~rnngap.constructions.build.model.Model`, which runs it.
"""
