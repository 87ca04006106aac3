"""Forward-mode autodiff: `qd.ad.FwdMode` and the `forward` pass (`qd/ad/forward.py`), against closed
forms, finite differences, and the behaviours of Quadrants' `test_ad_basics_fwd.py`."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd import ir
from qd.ad.forward import forward
from qd.types import dtypes as T


def test_add_and_multiply_with_seed(arch: object) -> None:
    n = 5
    x = qd.field(qd.f32, shape=n)
    loss = qd.field(qd.f32, shape=n)
    qd.root.lazy_dual()
    x.from_numpy(np.arange(n, dtype=np.float32))

    @qd.kernel
    def add():
        loss[1] += 2 * x[3]

    @qd.kernel
    def mul():
        loss[2] += x[3] * x[4]

    with qd.ad.FwdMode(loss=loss, param=x, seed=[0, 0, 0, 1, 0]):
        add()
    assert loss.dual[1] == 2
    with qd.ad.FwdMode(loss=loss, param=x, seed=[0, 0, 0, 1, 1]):
        mul()
    assert loss.dual[2] == 7
    assert x.dual.to_numpy().tolist() == [0.0] * n, "the seed is cleared on exit"


def test_multiple_params_and_losses(arch: object) -> None:
    n = 5
    a, b = qd.field(float, shape=n), qd.field(float, shape=n)
    loss_1, loss_2 = qd.field(float, shape=()), qd.field(float, shape=())
    qd.root.lazy_dual()
    a.from_numpy(np.arange(n, dtype=np.float32))
    b.from_numpy(np.arange(n, dtype=np.float32))

    @qd.kernel
    def calls():
        loss_1[None] += 3 * b[1] ** 2 + 5 * a[3] ** 2
        loss_2[None] += 4 * b[2] ** 2 + 6 * a[4] ** 2

    for loss, param, want in ((loss_1, a, 30), (loss_1, b, 6), (loss_2, b, 16), (loss_2, a, 48)):
        with qd.ad.FwdMode(loss=loss, param=param, seed=[1.0] * n):
            calls()
        assert loss.dual[None] == want


def test_zero_d_default_seed_and_clearing(arch: object) -> None:
    x = qd.field(float, shape=(), needs_dual=True)
    y = qd.field(float, shape=(), needs_dual=True)
    loss = qd.field(float, shape=(), needs_dual=True)
    x[None] = 2.0

    @qd.kernel
    def k():
        y[None] = x[None] ** 2
        loss[None] += y[None]

    for _ in range(3):
        with qd.ad.FwdMode(loss=loss, param=x):
            k()
        assert y.dual[None] == 4.0 and loss.dual[None] == 4.0


def test_transcendental_loop_and_locals_match_closed_form(arch: object) -> None:
    n = 16
    x = qd.field(qd.f64, shape=n, needs_dual=True)
    y = qd.field(qd.f64, shape=n, needs_dual=True)
    xs = np.linspace(0.1, 2.0, n)
    x.from_numpy(xs)

    @qd.kernel
    def k():
        for i in x:
            acc = x[i] * 0.0  # f64, as x
            for j in range(3):
                acc += qd.sin(x[i]) * qd.exp(x[i]) / (j + 1)
            if x[i] > 1.0:
                acc = acc * qd.sqrt(x[i])
            y[i] = qd.max(acc, -1.0) + qd.atan2(x[i], 2.0)

    with qd.ad.FwdMode(loss=y, param=x, seed=[1.0] * n):
        k()
    g = (np.cos(xs) + np.sin(xs)) * np.exp(xs) * (1 + 1 / 2 + 1 / 3)
    f = np.sin(xs) * np.exp(xs) * (1 + 1 / 2 + 1 / 3)
    g = np.where(xs > 1.0, g * np.sqrt(xs) + f * 0.5 / np.sqrt(xs), g) + 2.0 / (xs ** 2 + 4.0)
    np.testing.assert_allclose(y.dual.to_numpy(), g, rtol=1e-12)
    np.testing.assert_allclose(y.to_numpy(), np.where(xs > 1.0, f * np.sqrt(xs), f) + np.arctan2(xs, 2.0),
                               rtol=1e-12)


def test_kernels_outside_the_block_run_without_duals(arch: object) -> None:
    x = qd.field(qd.f32, shape=(), needs_dual=True)
    y = qd.field(qd.f32, shape=(), needs_dual=True)
    x[None] = 3.0

    @qd.kernel
    def k():
        y[None] = x[None] * x[None]

    with qd.ad.FwdMode(loss=y, param=x):
        k()
    assert y.dual[None] == 6.0
    y.dual[None] = 0.0
    k()
    assert y[None] == 9.0 and y.dual[None] == 0.0


def test_argument_checks(qd_program: object) -> None:
    x = qd.field(float, shape=3, needs_dual=True)
    loss = qd.field(float, shape=(), needs_dual=True)
    with pytest.raises(RuntimeError, match="`seed` is not set for non 0-D field"):
        with qd.ad.FwdMode(loss=loss, param=x):
            pass
    with pytest.raises(AssertionError):
        with qd.ad.FwdMode(loss=loss, param=x, seed=[1.0, 0.0]):
            pass
    m = qd.ad.FwdMode(loss=loss, param=x, seed=[1.0, 0.0, 0.0])
    with m:
        pass
    with pytest.raises(AssertionError, match="entered only once"):
        with m:
            pass


def test_pass_appends_dual_buffers_and_mirrors_stores() -> None:
    var = ir.LoopVar(T.i32, "i")
    p = ir.GlobalPtr(buffer=0, indices=(var,), dtype=T.f32)
    v = ir.GlobalLoad(ptr=p, dtype=T.f32)
    s = ir.OpStmt(op=qd.ops.Op.SIN, args=(v,), dtype=T.f32)
    q = ir.GlobalPtr(buffer=1, indices=(var,), dtype=T.f32)
    zero, end = ir.Const(dtype=T.i32, value=0), ir.Const(dtype=T.i32, value=8)
    body = ir.Block((p, v, s, q, ir.GlobalStore(ptr=q, value=s)))
    loop = ir.RangeFor(var=var, begin=zero, end=end, body=body, parallel=True)
    bufs = (ir.BufferDecl("field", T.f32, (8,), name="x"), ir.BufferDecl("field", T.f32, (8,), name="y"))
    k = forward(ir.KernelIR("k", (), bufs, (), (), ir.Block((zero, end, loop))), [0, 1])
    assert [b.name for b in k.buffers] == ["x", "y", "x.dual", "y.dual"]
    stores = [st for st in ir.walk(k.body) if isinstance(st, ir.GlobalStore)]
    assert [st.ptr.buffer for st in stores] == [1, 3]
    assert stores[1].value.op is qd.ops.Op.MUL


def test_matches_finite_differences_through_branches(arch: object) -> None:
    n = 12
    x = qd.field(qd.f64, shape=n, needs_dual=True)
    y = qd.field(qd.f64, shape=n, needs_dual=True)
    xs = np.linspace(-1.7, 2.3, n)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            w = qd.select(v > 0.5, v ** 3, qd.tanh(v))
            if v < 0.0:
                w = qd.min(w, qd.abs(v) % 0.7) + qd.sin(v)
            else:
                w += qd.cast(v * 3.0, qd.i32)  # an integer cast stops the gradient
            y[i] = w

    def run(v: np.ndarray) -> np.ndarray:
        x.from_numpy(v)
        with qd.ad.FwdMode(loss=y, param=x, seed=[1.0] * n):
            k()
        return y.to_numpy(), y.dual.to_numpy()

    h = 1e-6
    _, dual = run(xs)
    fd = (run(xs + h)[0] - run(xs - h)[0]) / (2 * h)
    np.testing.assert_allclose(dual, fd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["max", "min", "mul"])
def test_atomic_min_max_mul_into_a_dual_field_raises(arch: object, op: str) -> None:
    """Their tangents were dropped (a zero dual, silently); refused instead, naming the line."""
    x = qd.field(qd.f32, shape=4, needs_dual=True)
    y = qd.field(qd.f32, shape=4, needs_dual=True)
    atomic = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def k():
        for i in range(4):
            atomic(y[i], x[i] * 2.0)

    x.from_numpy(np.arange(4, dtype=np.float32))
    where = r"\(at .*test_ad_forward.py:\d+\)"
    with pytest.raises(qd.QuadrantsCompilationError, match=rf"atomic_{op} into a field with a dual {where}"):
        with qd.ad.FwdMode(loss=y, param=x, seed=[1.0] * 4):
            k()
