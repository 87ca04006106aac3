"""Kernel-scope reductions next to atomics in data-dependent loops inside a parallel loop (issue 27 item 10),
on every tier against numpy.

The GPU tiers combine a reduction's per-thread accumulators over a work group (barriers, warp shuffles) at the
end of the task; each thread's own loops run a data-dependent number of times before it gets there. PoCL 3.1
miscompiled the OpenCL work group's barrier after such a loop holding a compare-and-swap loop (the `p[i, j] +=
1.0` below) and read a wild address at the launch: extents that are no power of two crashed the process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import qd


@pytest.mark.parametrize("n", [3, 5, 8, 17])
def test_issue_example(arch: Any, n: int) -> None:
    a = (np.arange(n, dtype=np.int32) * 7 + 3)
    p = qd.ndarray(qd.f32, (n, n))

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), p: qd.types.ndarray(qd.f32, 2)) -> qd.u64:
        s = qd.u64(0)
        for i, j in qd.ndrange(n, n):
            c = 0
            while c < 0:
                s |= qd.u64(0)
                c += 1
            d = 0
            while d < qd.cast(qd.cast(a[i] % n, qd.i8) % 4, qd.i32):
                p[i, j] += 1.0
                d += 1
        return s

    assert k(a, p) == 0
    want = np.repeat(((a % n).astype(np.int8) % 4).astype(np.float32)[:, None], n, axis=1)
    np.testing.assert_array_equal(p.to_numpy(), want)


def _expected(a: np.ndarray, n: int) -> tuple[int, float, int, np.ndarray]:
    bits, total, count = 0, 0.0, 0
    p = np.zeros((n, n), np.float32)
    for i in range(n):
        trips = int(a[i]) % 5
        if trips == 4:  # `continue`: this row does nothing
            continue
        for j in range(n):
            for d in range(trips):
                bits |= 1 << ((i + d) % 64)
                total += float(d + 1)
                count += 1
                p[i, j] += 0.5
    return bits, total, count, p


@pytest.mark.parametrize("n", [1, 6, 31, 100])
def test_three_reductions_and_an_atomic_in_a_data_dependent_loop(arch: Any, n: int) -> None:
    a = np.random.default_rng(n).integers(0, 1000, n).astype(np.int32)
    p = qd.ndarray(qd.f32, (n, n))
    out = qd.ndarray(qd.f32, 2)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), p: qd.types.ndarray(qd.f32, 2),
          out: qd.types.ndarray(qd.f32, 1)) -> qd.u64:
        bits = qd.u64(0)
        total = 0.0
        count = 0
        for i, j in qd.ndrange(n, n):
            trips = a[i] % 5
            if trips == 4:
                continue
            d = 0
            while d < trips:
                bits |= qd.u64(1) << qd.u64((i + d) % 64)
                total += qd.cast(d + 1, qd.f32)
                count += 1
                p[i, j] += 0.5
                d += 1
        out[0] = total
        out[1] = qd.cast(count, qd.f32)
        return bits

    bits, total, count, want = _expected(a, n)
    assert k(a, p, out) == bits
    got = out.to_numpy()
    assert got[0] == pytest.approx(total, rel=1e-6) and int(got[1]) == count
    np.testing.assert_array_equal(p.to_numpy(), want)
