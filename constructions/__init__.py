"""The constructions: the fixed-point machine, the build language and the hand-wired models.

Three sub-packages, each depending only on the ones before it:
``machine`` (number formats, one-word and two-limb operations, the numba kernels,
the key index, lanes, the vocabulary's codes), ``build`` (the residual space,
gadgets, the model and its sessions, the RNN-program compiler, the generation
driver) and ``models`` (every hand-wired construction, its declared bounds and
proof obligations). Importing the package first sets numba up
(:mod:`rnngap.constructions.machine.runtime`), so that every kernel is cached
where the runtime chose.
"""
from .machine import runtime  # noqa: F401  (numba's cache folder, before any kernel module)
