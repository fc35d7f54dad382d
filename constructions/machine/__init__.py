"""The fixed-point machine: number formats, operations, numba kernels, executors' lanes, token codes.

Everything a model runs on and nothing a model is: docs/machine.md states the
arithmetic, docs/internals/machine.md the kernels.
"""
