"""Compile the large kernels once per machine, split between worker processes.

On an empty numba cache every worker process of a parallel run compiles the
kernels its first parts call. Two workers starting together compile the same
ones at the same time (each ~10-20 s on this kind of machine), so half of that
work is wasted. :func:`warm` runs the kernels of one group on a tiny input: the
first worker compiles group 0 while the second compiles group 1, numba writes
each to its cache folder, and every later call in either process loads it from
there (numba looks in the cache before compiling a signature it has not seen).

The inputs are tiny real calls through the same entry points the checks use
(so the compiled signatures are the ones they need); nothing here is checked
and nothing is returned but the time taken. On a warm cache a group costs the
cache loads its processes would do anyway (well under a second).

Groups (by what the kernels link: :func:`kernels.forward_loop` is linked into
:func:`lanes._lanes`, so both are in group 0, ``forward_loop`` first; the rest
split so that the two take about as long: measured on an empty cache on
2026-11-27, about 54 s and 60 s of compiling):

* 0, ``batch``: :func:`kernels.forward_loop` (``Model.predict_batch`` row by
  row), then :func:`lanes._lanes` (a block of rows at a time), then
  :func:`kernels.feed_rnn_sparse` and :func:`kernels.readout_flat` (sessions of
  attention-free models: the compiled RNN programs; every session's readout);
* 1, ``session``: :func:`targets._sparse_final_states` (the witness search's
  linear-RNN states) and :func:`kernels.feed_flat` (sessions with attention:
  CoT).
"""
from __future__ import annotations

import time

import numpy as np

GROUPS = ("batch", "session")


def warm(group: int) -> float:
    """Run the kernels of group ``group`` (0 or 1, see the module docstring) once
    on a tiny input; returns the seconds it took (mostly compiling, or loading
    from numba's cache)."""
    from . import kernels as K
    from . import lanes as LN
    from .fixedpoint import new_err
    from .retrieval import index_transformer
    from .targets import random_target
    if group not in range(len(GROUPS)):
        raise ValueError(f"group must be one of 0..{len(GROUPS) - 1} ({', '.join(GROUPS)}), got {group!r}")
    t0 = time.perf_counter()
    m = index_transformer(4)
    tok = int(m.candidates[0])
    if group == 0:
        B, N = 2, 4
        for run, extra in ((K.forward_batch, ()), (LN.forward_lanes, (LN.exp_table(m.fmt.frac_bits), 2))):
            tokens = np.full((B, N), tok, dtype=np.int64)
            lengths = np.full(B, N, dtype=np.int64)
            preds = np.full((B, N), -1, dtype=np.int64)
            run(tokens, lengths, True, False, K.READOUT_TABLE, *m.fmt.args, new_err(),
                np.full(2, -1, dtype=np.int64), m.weights, preds, *extra)
        r = random_target(2, 4, seed=0).model       # attention-free: its sessions run feed_rnn_sparse
        if r.rnn_sparse is None:
            raise AssertionError("the warm-up's RNN target has no sparse form")
        s = r.session(capacity=4)
        s.feed([int(r.candidates[0])] * 2)
        s.next_token()
    else:
        target = random_target(2, 4, seed=0)
        target.batch_states(np.full((2, 2), int(target.model.candidates[0]), dtype=np.int64))
        s = m.session(capacity=4)
        s.feed([tok, tok])
    return time.perf_counter() - t0
