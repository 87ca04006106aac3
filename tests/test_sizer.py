"""`qd._sizer`: the host-side pieces of adstack sizing built so far (the parallel max reduction)."""

from __future__ import annotations

import numpy as np
import pytest

from qd import _sizer


@pytest.mark.parametrize("threads", [0, 1, 2])
def test_reduce_max_matches_numpy(threads: int) -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(-(1 << 62), 1 << 62, 100_003, dtype=np.int64)
    assert _sizer.reduce_max_i64(values, np.iinfo(np.int64).min, threads) == values.max()


def test_reduce_max_of_nothing_is_the_initial_value() -> None:
    assert _sizer.reduce_max_i64(np.zeros(0, np.int64), 7) == 7
    assert _sizer.reduce_max_i64(np.array([3, -2], np.int64), 7) == 7
