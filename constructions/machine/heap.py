"""A max-heap of (key, code) pairs in a flat int64 scratch array (entry i at
h[base + 2 i], h[base + 2 i + 1]), for the best-first searches of the pruned
attention (:mod:`constructions.machine.kernels`) and the key-value index
(:mod:`constructions.machine.keyindex`)."""
from __future__ import annotations

from numba import njit


@njit(cache=True)
def heap_push(h, base, n, key, code):
    """Push (key, code) on the max-heap of n entries stored at h[base + 2 i], h[base + 2 i + 1]; returns n + 1."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if h[base + 2 * p] >= key:
            break
        h[base + 2 * i] = h[base + 2 * p]
        h[base + 2 * i + 1] = h[base + 2 * p + 1]
        i = p
    h[base + 2 * i] = key
    h[base + 2 * i + 1] = code
    return n + 1


@njit(cache=True)
def heap_pop(h, base, n):
    """Remove the top of the max-heap of n entries (read it at h[base], h[base + 1]
    first); returns n - 1."""
    n -= 1
    key = h[base + 2 * n]
    code = h[base + 2 * n + 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and h[base + 2 * (c + 1)] > h[base + 2 * c]:
            c += 1
        if h[base + 2 * c] <= key:
            break
        h[base + 2 * i] = h[base + 2 * c]
        h[base + 2 * i + 1] = h[base + 2 * c + 1]
        i = c
    h[base + 2 * i] = key
    h[base + 2 * i + 1] = code
    return n
