"""Integer `abs` wraps (`abs(INT_MIN) == INT_MIN`, the op table's) and stays a signed value for what uses it, on every
tier. Found by issue 27's fuzz campaign on an H200: the select form of |x| became PTX's `abs.s32`, which ptxas takes
to be non-negative, so `abs(INT_MIN) % m` turned into an unsigned remainder (3 instead of 2 for m = 5) on the CUDA
tier and, through NVIDIA's own compiler, on its OpenCL; a constant divisor or a shape divisor hid it."""

from typing import Any

import numpy as np
import pytest

import qd

A = [3, -2147483648, 7, 2147483647, 0, -6, -2147483647, -1]


def _wrap(v: int, bits: int) -> int:
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


@pytest.mark.parametrize("dtype, bits", [(qd.i32, 32), (qd.i64, 64)])
def test_abs_of_int_min_then_mod_by_a_runtime_divisor(arch: Any, dtype: Any, bits: int) -> None:
    npdt = np.int32 if bits == 32 else np.int64
    vals = [v if bits == 32 else (v << 32) + 5 * (v < 0) for v in A] + [-(1 << (bits - 1))]

    @qd.kernel
    def k(a: qd.types.ndarray(dtype, 1), o: qd.types.ndarray(dtype, 1), q: qd.types.ndarray(dtype, 1), m: dtype):
        for i in range(a.shape[0]):
            o[i] = abs(a[i]) % m
            q[i] = abs(a[i]) // m

    a = np.array(vals, npdt)
    o, q = np.zeros_like(a), np.zeros_like(a)
    k(a, o, q, 5)
    absv = [_wrap(abs(int(v)), bits) for v in vals]
    assert o.tolist() == [v % 5 for v in absv]
    assert q.tolist() == [v // 5 for v in absv]
