"""Compile the large kernels once per machine, split between worker processes.

On an empty numba cache, two workers of a parallel run would compile the same
kernels at the same time. :func:`warm` runs the kernels of one group on a tiny
real input through the checks' own entry points: the first worker compiles group
0 (``batch``: the batch and lane loops, the RNN-session feed, the readout) while
the second compiles group 1 (``session``: the witness search's states, the
attention-session feed), and numba's cache serves every later call in either
process. Nothing is checked; only the time taken is returned. On a warm cache a
group costs well under a second.

Details (why, the groups and their balance): docs/internals/machine.md#warmup
"""
from __future__ import annotations

import time

import numpy as np

from rnngap.constructions.machine import batch as BT
from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine import lanes as LN
from rnngap.constructions.machine.fixedpoint import new_err

from .retrieval import index_transformer
from .targets import random_target

GROUPS = ("batch", "session")


def warm(group: int) -> float:
    """Run the kernels of group ``group`` (0 or 1, see the module docstring) once
    on a tiny input; returns the seconds it took (mostly compiling, or loading
    from numba's cache)."""
    if group not in range(len(GROUPS)):
        raise ValueError(f"group must be one of 0..{len(GROUPS) - 1} ({', '.join(GROUPS)}), got {group!r}")
    t0 = time.perf_counter()
    m = index_transformer(4)
    tok = int(m.candidates[0])
    if group == 0:
        B, N = 2, 4
        for run, extra in ((BT.forward_batch, ()), (LN.forward_lanes, (LN.exp_table(m.fmt.frac_bits), 2))):
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
