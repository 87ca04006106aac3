"""`qd.algorithms`: parallel_sort and PrefixSumExecutor against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import qd


@pytest.mark.parametrize("dtype", [qd.i32, qd.f32, qd.f64])
def test_parallel_sort_permutes_values_with_keys(arch: object, dtype: object) -> None:
    rng = np.random.default_rng(5)
    n = 1000
    k = (rng.random(n) * 50).astype(dtype.np_dtype)  # many equal keys
    keys = qd.field(dtype, n, offset=-7)
    vals = qd.ndarray(qd.i32, n)
    keys.from_numpy(k)
    vals.from_numpy(np.arange(n, dtype=np.int32))
    qd.algorithms.parallel_sort(keys, vals)
    order = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(keys.to_numpy(), k[order])
    np.testing.assert_array_equal(vals.to_numpy(), order)


def test_prefix_sum_and_errors(arch: object) -> None:
    a = qd.ndarray(qd.i32, 10)
    a.from_numpy(np.arange(10, dtype=np.int32))
    qd.algorithms.PrefixSumExecutor(10).run(a)
    np.testing.assert_array_equal(a.to_numpy(), np.cumsum(np.arange(10)))
    with pytest.raises(qd.QuadrantsTypeError, match="must be 1-D"):
        qd.algorithms.parallel_sort(qd.field(qd.f32, (2, 3)))
    with pytest.raises(qd.QuadrantsTypeError, match="3 keys but 4 values"):
        qd.algorithms.parallel_sort(qd.field(qd.f32, 3), qd.field(qd.f32, 4))
