"""What reverse mode refuses instead of giving a wrong gradient (`qd.ad.validation.check_reverse_supported`,
run by `kernel.grad` before the `reverse` pass): `qd.random()` (Quadrants' "RandStmt not supported"
RuntimeError) and atomic min/max into a field or ndarray that has a gradient."""

from __future__ import annotations

import numpy as np
import pytest

import qd

N = 4


def _fields():
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(N, dtype=np.float32))
    return x, loss


def test_random_in_reverse_mode_raises(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def work():
        loss[None] = x[1] * qd.random()

    work()  # the primal is fine (x[1] = 1)
    assert 0.0 <= loss[None] < 1.0
    with pytest.raises(RuntimeError, match="RandStmt not supported in AutoDiff for now"), qd.ad.Tape(loss):
        work()


@pytest.mark.parametrize("op", ["max", "min"])
def test_atomic_min_max_into_grad_field_raises(arch: object, op: str) -> None:
    x, loss = _fields()
    atomic = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def reduce():
        for i in x:
            atomic(loss[None], x[i])

    loss[None] = 1.5
    reduce()  # the primal still reduces
    assert loss[None] == (3.0 if op == "max" else 0.0)
    with pytest.raises(qd.QuadrantsCompilationError, match=rf"atomic_{op} into `loss`, which has a gradient, cannot be differentiated"):
        reduce.grad()


def test_atomic_max_into_field_without_grad_is_allowed(arch: object) -> None:
    # The max goes to a field with no gradient, so nothing is differentiated through it.
    x, loss = _fields()
    m = qd.field(qd.f32, shape=())

    @qd.kernel
    def work():
        for i in x:
            qd.atomic_max(m[None], x[i])
            loss[None] += 2.0 * x[i]

    m[None] = -1.0
    with qd.ad.Tape(loss):
        work()
    assert m[None] == 3.0
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 2.0, np.float32))


def test_atomic_max_into_grad_ndarray_argument_raises(arch: object) -> None:
    x = qd.ndarray(qd.f32, shape=N, needs_grad=True)
    out = qd.ndarray(qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(N, dtype=np.float32))

    @qd.kernel
    def reduce(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            qd.atomic_max(out[None], x[i])

    with pytest.raises(qd.QuadrantsCompilationError, match="atomic_max into `out`"):
        reduce.grad(x, out)
