"""The interpreter lowering's register sharing: a local read may share its variable's register only
while no store can intervene, and a fused store must not change a value still to be read."""

from __future__ import annotations

import numpy as np
import pytest

import qd


@pytest.fixture(autouse=True)
def _program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()


def test_read_then_overwrite_keeps_old_value():
    @qd.kernel
    def k(x0: qd.i32) -> qd.i32:
        x = x0
        a = x
        x = x + 1
        return a * 100 + x

    assert k(7) == 708


def test_old_value_used_after_store_in_branch():
    @qd.kernel
    def k(x0: qd.i32, c: qd.i32) -> qd.i32:
        x = x0
        a = x
        if c > 0:
            x = 5
        return a * 10 + x

    assert k(3, 1) == 35
    assert k(3, 0) == 33


def test_loop_carried_swap_and_accumulate():
    out = np.zeros(8, np.float32)

    @qd.kernel
    def k(out: qd.types.ndarray(qd.f32, 1), n: qd.i32):
        for i in range(out.shape[0]):
            a = 1.0
            b = 0.0
            acc = 0.0
            for _ in range(n):
                t = a
                a = a + b  # reads the old a and b before either is overwritten
                b = t
                acc += t
            out[i] = acc + a * 1000.0 + i

    k(out, 10)
    a, b, acc = 1.0, 0.0, 0.0
    for _ in range(10):
        a, b, acc = a + b, a, acc + a
    np.testing.assert_array_equal(out, np.float32(acc + a * 1000.0) + np.arange(8, dtype=np.float32))


def test_local_declared_in_loop_is_zero_each_iteration():
    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        total = 0
        for j in range(n):
            v = qd.Vector([0, 0])
            if j % 2 == 0:
                v[0] = j
            total += v[0] + v[1]
        return total

    assert k(6) == 0 + 2 + 4
