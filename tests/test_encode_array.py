"""FixedFormat.encode_array has a direct path for ints and dyadic Fractions; it
must give exactly what encode gives entry by entry, errors included."""
import random
from fractions import Fraction

import numpy as np
import pytest

from rnngap.constructions.machine.fixedpoint import FixedPointOverflow
from rnngap.constructions.machine.formats import FixedFormat


def _entrywise(fmt, arr, exact, what):
    out = np.empty(arr.shape, dtype=np.int64)
    for idx in np.ndindex(arr.shape):
        out[idx] = fmt.encode(arr[idx], exact=exact, what=f"{what}{list(idx)}")
    return out


def _value(rng):
    k = rng.randrange(7)
    if k == 0:
        return 0
    if k == 1:
        return rng.randrange(-50, 50)
    if k == 2:
        return Fraction(rng.randrange(-1000, 1000), 2 ** rng.randrange(0, 16))   # dyadic, maybe finer than 2^-f
    if k == 3:
        return Fraction(rng.randrange(-10, 10), rng.choice([1, 3, 5, 7]))          # off the grid unless integral
    if k == 4:
        return rng.uniform(-20, 20) if rng.random() < 0.5 else rng.randrange(-8, 8) / 4
    if k == 5:
        return np.int64(rng.randrange(-9, 9))                                       # not a Python int: the general path
    return rng.choice([-1, 1]) * 2 ** rng.randrange(0, 70)                          # out of range for most formats


@pytest.mark.parametrize("seed", range(4))
def test_encode_array_equals_encode_entrywise(seed):
    rng = random.Random(seed)
    outcomes = set()
    for _ in range(800):
        fmt = FixedFormat(rng.randrange(1, 20), rng.randrange(0, 14), rng.choice(["raise", "saturate"]))
        shape = rng.choice([(), (3,), (2, 3), (1, 2, 2)])
        arr = np.empty(shape, dtype=object)
        for idx in np.ndindex(shape):
            arr[idx] = _value(rng)
        exact = rng.random() < 0.7
        got = []
        for fn in (_entrywise, FixedFormat.encode_array):
            try:
                got.append(("ok", fn(fmt, arr, exact, "W").tolist()))
            except (ValueError, FixedPointOverflow) as e:   # the same error, naming the same entry
                got.append((type(e).__name__, str(e)))
        assert got[0] == got[1]
        outcomes.add(got[0][0])
    assert outcomes == {"ok", "ValueError", "FixedPointOverflow"}   # every path was exercised


def test_zeros_of_every_kind_encode_like_encode():
    """Entries equal to 0 are not visited by encode_array: every kind of zero the
    builders may hold gives what encode gives (raw 0), in exact and inexact mode."""
    fmt = FixedFormat(4, 3)
    zeros = np.array([0, Fraction(0), 0.0, -0.0, np.float64(0), np.int64(0), Fraction(0, 7), False],
                     dtype=object)
    for exact in (True, False):
        assert fmt.encode_array(zeros, exact=exact).tolist() == _entrywise(fmt, zeros, exact, "z").tolist()
