"""kernels.matvec gathers the nonzero columns of a wide, mostly zero x first;
it must equal the dense definition term for term: outputs and err (largest
|raw|, first error, saturation count), in raise and saturate mode."""
import numpy as np
import pytest

from rnngap.constructions.machine import kernels as K
from rnngap.constructions.machine.fixedpoint import fx_add, fx_mul, new_err
from rnngap.constructions.machine.formats import FixedFormat


def _dense(W, x, I, f, mode, err):
    out = np.zeros(W.shape[0], dtype=np.int64)
    for r in range(W.shape[0]):
        acc = np.int64(0)
        for c in range(W.shape[1]):
            if W[r, c] != 0 and x[c] != 0:
                acc = fx_add(acc, fx_mul(W[r, c], x[c], I, f, mode, err), I, f, mode, err)
        out[r] = acc
    return out


@pytest.mark.parametrize("mode", ["raise", "saturate"])
@pytest.mark.parametrize("seed", range(3))
def test_sparse_x_equals_dense(mode, seed):
    rng = np.random.default_rng(seed)
    branches = set()
    for _ in range(150):
        I, f = int(rng.integers(2, 14)), int(rng.integers(0, 10))
        fmt = FixedFormat(I, f, mode)
        rows, cols = int(rng.integers(1, 40)), int(rng.choice([8, 31, 32, 64, 140]))
        top = fmt.max_raw
        W = np.where(rng.random((rows, cols)) < 0.1, rng.integers(-top, top + 1, (rows, cols)), 0).astype(np.int64)
        x = np.where(rng.random(cols) < rng.choice([0.05, 0.2, 0.5]), rng.integers(-top, top + 1, cols), 0).astype(np.int64)
        sparse = cols >= K.MATVEC_SPARSE_MIN_COLS and 4 * int((x != 0).sum()) <= cols
        branches.add(sparse)
        e1, e2 = new_err(), new_err()
        out = np.zeros(rows, dtype=np.int64)
        K.matvec(W, x, *fmt.args, e1, out)
        want = _dense(W, x, *fmt.args, e2)
        assert e1.tolist() == e2.tolist()
        if e1[0] == 0:                       # no error: the outputs are defined and equal
            assert out.tolist() == want.tolist()
    assert branches == {True, False}
