"""Reverse-mode autodiff: `kernel.grad` and the `reverse` pass (`qd/ad/reverse.py`), against closed
forms, central finite differences in float64, and forward mode through <t, J^T c> = <J t, c>."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError

N = 9
XS = np.linspace(0.3, 1.7, N)


@qd.func
def _sq(v):
    return v ** 2


@qd.func
def _sin(v):
    return qd.sin(v)


@qd.func
def _exp_x(v):
    return qd.exp(v) * v


@qd.func
def _pow(v):
    return v ** 2.5


@qd.func
def _atan2(v):
    return qd.atan2(v, 2.0)


@qd.func
def _div(v):
    return (v + 1.0) / v


@qd.func
def _select(v):
    return qd.select(v > 1.0, v * v, 3.0 * v)


@qd.func
def _minmax(v):
    return qd.max(v * v, v) + qd.min(v, 1.0)


@qd.func
def _if_else(v):
    w = v * 0.0
    if v > 1.0:
        w = qd.sqrt(v - 1.0) * 2.0  # NaN-free only where taken; the untaken side contributes 0
    else:
        w = v * 3.0
    return w


@qd.func
def _norm(v):
    return qd.Vector([v, 2.0 * v, 3.0]).norm()


@qd.func
def _stop_and_cast(v):
    return v * qd.stop_grad(v) + v * qd.cast(qd.cast(v * 10.0, qd.i32), qd.f64)


CASES: list[tuple[str, object, Callable[[np.ndarray], np.ndarray]]] = [
    ("x**2", _sq, lambda x: 2 * x),
    ("sin", _sin, np.cos),
    ("exp*x", _exp_x, lambda x: np.exp(x) * (1 + x)),
    ("pow", _pow, lambda x: 2.5 * x ** 1.5),
    ("atan2", _atan2, lambda x: 2.0 / (x ** 2 + 4.0)),
    ("div", _div, lambda x: -1.0 / x ** 2),
    ("select", _select, lambda x: np.where(x > 1.0, 2 * x, 3.0)),
    ("minmax", _minmax, lambda x: np.where(x * x >= x, 2 * x, 1.0) + np.where(x <= 1.0, 1.0, 0.0)),
    ("if_else", _if_else, lambda x: np.where(x > 1.0, 1.0 / np.sqrt(np.maximum(x - 1.0, 1e-30)), 3.0)),
    ("norm", _norm, lambda x: 5 * x / np.sqrt(5 * x ** 2 + 9)),
    ("stop_grad_cast", _stop_and_cast, lambda x: x + np.floor(x * 10.0)),
]


@pytest.mark.parametrize("name,f,df", CASES, ids=[c[0] for c in CASES])
def test_closed_forms(arch: object, name: str, f: object, df: Callable) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    y = qd.field(qd.f64, shape=N, needs_grad=True)
    x.from_numpy(XS)

    @qd.kernel
    def k():
        for i in x:
            y[i] = f(x[i])

    k()
    y.grad.from_numpy(np.ones(N))
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), df(XS), rtol=1e-12, atol=1e-12)


def test_untaken_branch_contributes_exactly_zero(arch: object) -> None:
    x = qd.field(qd.f64, shape=2, needs_grad=True)
    y = qd.field(qd.f64, shape=2, needs_grad=True)
    x.from_numpy(np.array([-1.0, 4.0]))

    @qd.kernel
    def k():
        for i in x:
            if x[i] > 0.0:
                y[i] = qd.sqrt(x[i])
            else:
                y[i] = 5.0 * x[i]

    y.grad.fill(1.0)
    k.grad()
    assert x.grad.to_numpy().tolist() == [5.0, 0.25]


def test_atomic_loss_seeds_from_loss_grad_and_accumulates(arch: object) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)

    @qd.kernel
    def k():
        for i in x:
            loss[None] += x[i] ** 2 + qd.sin(x[i])
        loss[None] -= x[0] * x[1]  # serial top-level code is reversed too

    k()
    loss.grad[None] = 1.0
    k.grad()
    want = 2 * XS + np.cos(XS)
    want[0] -= XS[1]
    want[1] -= XS[0]
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-12)
    k.grad()  # .grad is not cleared between calls
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * want, rtol=1e-12)


def _fd_kernel(x: object, y: object) -> object:
    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            acc = v * 0.0
            for j in range(3):  # a constant serial loop: unrolled
                acc += qd.sin(v * (j + 1)) / (j + 1.0)
            if acc > 0.5:
                acc = acc * qd.exp(-v) + qd.min(v, 0.9)
            elif v < 0.2:
                acc = qd.tanh(acc) * v
            y[i] = acc * x[(i + 1) % 7] + qd.select(v > 1.0, v ** 3, qd.cos(v))
    return k


def test_matches_central_finite_differences(arch: object) -> None:
    n = 7
    x = qd.field(qd.f64, shape=n, needs_grad=True)
    y = qd.field(qd.f64, shape=n, needs_grad=True)
    xs = np.linspace(-0.77, 1.93, n)  # away from the kinks
    c = np.linspace(0.5, 1.5, n)
    k = _fd_kernel(x, y)

    def value(v: np.ndarray) -> float:
        x.from_numpy(v)
        k()
        return float(y.to_numpy() @ c)

    h = 1e-6
    fd = np.array([(value(xs + h * e) - value(xs - h * e)) / (2 * h) for e in np.eye(n)])
    x.from_numpy(xs)
    k()
    y.grad.from_numpy(c)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), fd, rtol=1e-6, atol=1e-7)


def test_dot_product_identity_against_forward_mode(arch: object) -> None:
    n = 7
    x = qd.field(qd.f64, shape=n, needs_grad=True, needs_dual=True)
    y = qd.field(qd.f64, shape=n, needs_grad=True, needs_dual=True)
    rng = np.random.default_rng(3)
    xs, t, c = rng.uniform(-1, 2, n), rng.normal(size=n), rng.normal(size=n)
    k = _fd_kernel(x, y)
    x.from_numpy(xs)
    with qd.ad.FwdMode(loss=y, param=x, seed=list(t)):
        k()
    jt = y.dual.to_numpy()
    y.grad.from_numpy(c)
    k.grad()
    np.testing.assert_allclose(t @ x.grad.to_numpy(), jt @ c, rtol=1e-12)


def test_dynamic_range_raises_without_adstack(arch: object) -> None:
    qd.cfg.ad_stack_experimental_enabled = False
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=4, needs_grad=True)

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            for j in range(n):
                y[i] += x[i] * j

    k(3)
    with pytest.raises(QuadrantsCompilationError, match="Cannot use non static range in Backwards mode") as e:
        k.grad(3)
    assert "for j in range(n):" in str(e.value)


def test_fields_without_grad_get_none(arch: object) -> None:
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    w = qd.field(qd.f32, shape=4)
    y = qd.field(qd.f32, shape=4, needs_grad=True)
    x.from_numpy(np.arange(4, dtype=np.float32))
    w.from_numpy(np.full(4, 2.0, dtype=np.float32))

    @qd.kernel
    def k():
        for i in x:
            y[i] = x[i] * w[i]

    y.grad.fill(1.0)
    k.grad()
    assert x.grad.to_numpy().tolist() == [2.0] * 4


def test_vector_fields_2d_fields_static_loops_and_dynamic_parallel_bounds(arch: object) -> None:
    v = qd.Vector.field(3, qd.f64, shape=4, needs_grad=True)
    m = qd.field(qd.f64, shape=(2, 3), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def k(n: qd.i32):
        for i in range(n):  # a parallel loop's bound may be dynamic
            loss[None] += v[i].norm_sqr() + v[i].cross(qd.Vector([1.0, 0.0, 0.0])).dot(v[i])
        for i, j in m:
            loss[None] += m[i, j] ** 3
        for s in qd.static(range(2)):
            loss[None] += m[s, 0]

    vs, ms = np.arange(12.0).reshape(4, 3), np.arange(6.0).reshape(2, 3) / 3
    v.from_numpy(vs)
    m.from_numpy(ms)
    loss.grad[None] = 1.0
    k.grad(3)
    want = 2 * vs
    want[3] = 0.0
    np.testing.assert_allclose(v.grad.to_numpy(), want, rtol=1e-12)
    want = 3 * ms ** 2
    want[:, 0] += 1.0
    np.testing.assert_allclose(m.grad.to_numpy(), want, rtol=1e-12)


def test_pass_appends_grad_buffers(qd_program: object) -> None:
    from qd.ad.reverse import reverse
    from qd.frontend.kernel import build_kernel_ir

    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        for i in x:
            y[i] = qd.sin(x[i])

    k_ir, _ = build_kernel_ir(k, [])
    out = reverse(k_ir, [0, 1])
    assert [b.name for b in out.buffers[2:]] == [k_ir.buffers[0].name + ".grad", k_ir.buffers[1].name + ".grad"]


def test_ndarray_args_get_grads(arch: object) -> None:
    @qd.kernel
    def sq(x: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[i] = x[i] ** 2

    x = qd.ndarray(qd.f32, N, needs_grad=True)
    y = qd.ndarray(qd.f32, N, needs_grad=True)
    x.from_numpy(XS.astype(np.float32))
    sq(x, y)
    y.grad.fill(1)
    sq.grad(x, y)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * XS, rtol=1e-5)
    x2 = qd.ndarray(qd.f32, N, needs_grad=True)  # same instance, other ndarrays
    y2 = qd.ndarray(qd.f32, N, needs_grad=True)
    x2.from_numpy((XS + 1).astype(np.float32))
    y2.grad.fill(2)
    sq.grad(x2, y2)
    np.testing.assert_allclose(x2.grad.to_numpy(), 4 * (XS + 1), rtol=1e-5)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * XS, rtol=1e-5)


def test_ndarray_reduction_and_mixed_with_field(arch: object) -> None:
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def dot(x: qd.types.ndarray(), w: qd.types.ndarray()):
        for i in x:
            loss[None] += x[i] * w[i]

    x = qd.ndarray(qd.f32, N, needs_grad=True)
    w = qd.ndarray(qd.f32, N, needs_grad=True)
    xs, ws = XS.astype(np.float32), (2 - XS).astype(np.float32)
    x.from_numpy(xs)
    w.from_numpy(ws)
    dot(x, w)
    loss.grad[None] = 1.0
    dot.grad(x, w)
    np.testing.assert_allclose(x.grad.to_numpy(), ws, rtol=1e-6)
    np.testing.assert_allclose(w.grad.to_numpy(), xs, rtol=1e-6)

    f = qd.field(qd.f32, shape=N, needs_grad=True)
    f.from_numpy(ws)

    @qd.kernel
    def mix(x: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[i] = x[i] * f[i]

    y = qd.ndarray(qd.f32, N, needs_grad=True)
    x.grad.fill(0)
    mix(x, y)
    y.grad.fill(1)
    mix.grad(x, y)
    np.testing.assert_allclose(x.grad.to_numpy(), ws, rtol=1e-6)
    np.testing.assert_allclose(f.grad.to_numpy(), xs, rtol=1e-6)


def test_stop_grad_statement_on_a_field_is_block_scoped(arch: object) -> None:
    """`qd.stop_grad(y)` as a statement (Quadrants' form) stops every load of `y` in its block, also one
    read before the statement and ones in nested blocks; a sibling loop still differentiates `y`."""
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    y = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)
    y.from_numpy(XS[::-1].copy())

    @qd.kernel
    def k():
        for i in range(N):
            a = y[i] * 3.0
            qd.stop_grad(y)
            if x[i] > 0.0:
                loss[None] += x[i] * y[i] + a
        for i in range(N):
            loss[None] += y[i] ** 2

    with qd.ad.Tape(loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), XS[::-1], rtol=1e-12)
    np.testing.assert_allclose(y.grad.to_numpy(), 2 * XS[::-1], rtol=1e-12)
    np.testing.assert_allclose(loss[None], np.sum(XS * XS[::-1] + 3 * XS[::-1] + XS[::-1] ** 2), rtol=1e-12)


def test_stop_grad_statement_on_an_ndarray_and_in_forward_mode(arch: object) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(), y: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            qd.stop_grad(x)
            out[i] = x[i] * y[i]

    x = qd.ndarray(qd.f64, N, needs_grad=True)
    y = qd.ndarray(qd.f64, N, needs_grad=True)
    out = qd.ndarray(qd.f64, N, needs_grad=True)
    x.from_numpy(XS)
    y.from_numpy(XS + 1)
    k(x, y, out)
    out.grad.fill(1)
    k.grad(x, y, out)
    assert np.all(x.grad.to_numpy() == 0)
    np.testing.assert_allclose(y.grad.to_numpy(), XS, rtol=1e-12)

    xs = qd.field(qd.f64, shape=N, needs_dual=True)
    ys = qd.field(qd.f64, shape=N, needs_dual=True)
    loss = qd.field(qd.f64, shape=(), needs_dual=True)
    xs.from_numpy(XS)
    ys.from_numpy(XS + 1)

    @qd.kernel
    def kf():
        for i in range(N):
            qd.stop_grad(xs)
            loss[None] += xs[i] * ys[i]

    with qd.ad.FwdMode(loss=loss, param=xs, seed=[1.0] * N):
        kf()
    assert loss.dual[None] == 0.0
    with qd.ad.FwdMode(loss=loss, param=ys, seed=[1.0] * N):
        kf()
    np.testing.assert_allclose(loss.dual[None], XS.sum(), rtol=1e-12)


def test_without_adstack_a_small_inner_ndrange_unrolls_and_an_inner_range_raises(arch: object) -> None:
    """Quadrants' rule with `ad_stack_experimental_enabled=False`: a nested `range()` raises "Cannot use
    non static range", a nested `qd.ndrange` goes through (qd unrolls it: at most 16 constant iterations)."""
    qd.init(arch=arch, ad_stack_experimental_enabled=False)
    m = qd.field(qd.f64, shape=(4, 2, 2), needs_grad=True)
    n = qd.field(qd.f64, shape=(4, 2, 2), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def nd():
        for i in range(4):
            for j, k in qd.ndrange(2, 2):
                m[i, j, k] = (j + 1) * (k + 1) * n[i, j, k]
                loss[None] += m[i, j, k] * n[i, j, k]

    n.from_numpy(np.arange(16, dtype=np.float64).reshape(4, 2, 2))
    nd()
    loss.grad[None] = 1.0
    nd.grad()
    w = np.array([[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_allclose(n.grad.to_numpy(), 2 * w * n.to_numpy(), rtol=1e-12)

    @qd.kernel
    def rg():
        for i in range(4):
            for j in range(2):
                loss[None] += n[i, j, 0]

    rg()
    with pytest.raises(QuadrantsCompilationError, match="Cannot use non static range in Backwards mode"):
        rg.grad()
