"""`qd.algorithms` host-side primitives, called from Python scope.

`parallel_sort(keys, values=None)` sorts a 1-D field or ndarray of keys in ascending order and applies
the same permutation to `values` (Quadrants' contract). It runs on the host copy through numpy's stable
sort, which is exact for every dtype and fast on the CPU tiers; the device tiers will replace it with a
device sort under the same contract. `PrefixSumExecutor(length).run(arr)` is the inclusive prefix sum in
place (Quadrants' class of that name).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qd.errors import QuadrantsTypeError
from qd.frontend import values as _v


def _host(x: Any, what: str) -> np.ndarray:
    if _v.global_kind(x) is None or not hasattr(x, "to_numpy"):
        raise QuadrantsTypeError(f"qd.algorithms: {what} must be a qd.field or qd.ndarray, got {type(x).__name__}")
    a = x.to_numpy()
    if a.ndim != 1:
        raise QuadrantsTypeError(f"qd.algorithms: {what} must be 1-D, got shape {a.shape}")
    return a


def parallel_sort(keys: Any, values: Any = None) -> None:
    """`qd.algorithms.parallel_sort(keys, values=None)`: sort the 1-D field or ndarray `keys` in place, ascending,
    and apply the same permutation to `values` (a 1-D field or ndarray of the same length), if given.

    Called from Python scope (not in a kernel). The sort is stable (equal keys keep their order, and so do
    their values) and NaN keys go last. It currently runs on a host copy through numpy's sort. Returns None.
    A `keys` or `values` that is not a field or ndarray, or is not 1-D, and a length mismatch raise
    `qd.QuadrantsTypeError`.

    Example: `qd.algorithms.parallel_sort(cell_ids, particle_ids)`.
    """
    k = _host(keys, "keys")
    order = np.argsort(k, kind="stable")
    keys.from_numpy(k[order])
    if values is not None:
        v = _host(values, "values")
        if len(v) != len(k):
            raise QuadrantsTypeError(f"qd.algorithms.parallel_sort: {len(k)} keys but {len(v)} values")
        values.from_numpy(v[order])


class PrefixSumExecutor:
    """Inclusive prefix sum of a 1-D i32/f32 field or ndarray of `length` elements, in place."""

    def __init__(self, length: int) -> None:
        self.length = int(length)

    def run(self, arr: Any) -> None:
        a = _host(arr, "the array")
        if len(a) != self.length:
            raise QuadrantsTypeError(f"PrefixSumExecutor({self.length}).run: the array has {len(a)} elements")
        arr.from_numpy(np.cumsum(a, dtype=a.dtype))


__all__ = ["PrefixSumExecutor", "parallel_sort"]
