"""`x.grad[i]` on an ndarray argument inside a kernel (Quadrants' `test_grad_tensor_in_kernel`): the
frontend declares a hidden ndarray argument `x.grad` and each launch binds it to the gradient of the
array passed as x (`qd.frontend.args.hidden_args`). Reverse mode refuses such kernels with Quadrants'
"Cannot automatically differentiate through a grad tensor". Values are checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError, QuadrantsRuntimeError

pytestmark = pytest.mark.archs("interp", "cpu")

N = 10


def test_quadrants_grad_tensor_in_kernel(arch: object) -> None:
    a = qd.ndarray(qd.f32, shape=N, needs_grad=True)
    b = qd.ndarray(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def test(x: qd.types.ndarray(), b: qd.types.ndarray()):
        for i in x:
            b[None] += x.grad[i]

    a.grad.fill(2.0)
    test(a, b)
    assert b[None] == N * 2.0

    with pytest.raises(RuntimeError, match=r"Cannot automatically differentiate through a grad tensor"):
        test.grad(a, b)


def test_read_and_write_grad_2d_against_numpy(arch: object) -> None:
    rng = np.random.default_rng(3)
    xs, gs = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    x = qd.ndarray(qd.f64, shape=(4, 6), needs_grad=True)
    y = qd.ndarray(qd.f64, shape=(4, 6))
    x.from_numpy(xs)
    x.grad.from_numpy(gs)

    @qd.kernel
    def k(x: qd.types.ndarray(), y: qd.types.ndarray(), s: qd.f64):
        for i, j in x:
            y[i, j] = x[i, j] * x.grad[i, j] + x.grad.shape[1]
            x.grad[i, j] = x.grad[i, j] * s  # grads are plain arrays here: writable too

    k(x, y, 3.0)
    np.testing.assert_allclose(y.to_numpy(), xs * gs + 6, rtol=1e-15)
    np.testing.assert_allclose(x.grad.to_numpy(), gs * 3.0, rtol=1e-15)
    np.testing.assert_array_equal(x.to_numpy(), xs)
    names = [a.name for a in k._last_ir.args]
    assert names == ["x", "y", "s", "x.grad"], "one hidden arg per (argument, attr), after the user's args"


def test_vector_elements_and_func(arch: object) -> None:
    x = qd.ndarray(qd.math.vec3, shape=N, needs_grad=True)
    gs = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
    x.grad.from_numpy(gs)
    out = qd.ndarray(qd.f32, shape=N)

    @qd.func
    def norm1(v: qd.template(), i: qd.i32) -> qd.f32:
        return v.grad[i][0] + v.grad[i][1] + v.grad[i][2]

    @qd.kernel
    def k(v: qd.types.ndarray(dtype=qd.math.vec3), out: qd.types.ndarray()):
        for i in v:
            out[i] = norm1(v, i) + v.grad[i].dot(v.grad[i])

    k(x, out)
    np.testing.assert_allclose(out.to_numpy(), gs.sum(1) + (gs * gs).sum(1), rtol=1e-6)
    assert sum(a.name == "v.grad" for a in k._last_ir.args) == 1


def test_consecutive_arrays_read_their_own_grads(arch: object) -> None:
    @qd.kernel
    def total(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            out[None] += x.grad[i] - x[i]

    arrays = []
    for s in (1.0, 5.0, -2.0):
        a = qd.ndarray(qd.f32, shape=N, needs_grad=True)
        a.fill(0.5)
        a.grad.fill(s)
        arrays.append((a, s))
    out = qd.ndarray(qd.f32, shape=())
    for a, s in arrays + arrays[::-1]:
        out.fill(0.0)
        total(a, out)
        assert out[None] == pytest.approx(N * (s - 0.5))
    assert len(total._instances) == 1, "the same instance, bound to each array's grad at launch"
    a, s = arrays[0]
    a.grad.fill(7.0)  # a host write to the grad is seen by the next launch
    out.fill(0.0)
    total(a, out)
    assert out[None] == pytest.approx(N * 6.5)


def test_arguments_without_a_grad_raise(arch: object) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            out[i] = x.grad[i]

    out = np.zeros(N, np.float32)
    with pytest.raises(QuadrantsRuntimeError, match=r"Argument 'x': the kernel reads x.grad.*a ndarray has no grad"):
        k(np.ones(N, np.float32), out)
    with pytest.raises(QuadrantsRuntimeError, match=r"Argument 'x'.*needs_grad=True"):
        k(qd.ndarray(qd.f32, shape=N), out)
    assert not out.any()

    @qd.kernel
    def off(x: qd.types.ndarray(needs_grad=False), out: qd.types.ndarray()):
        for i in x:
            out[i] = x.grad[i]

    with pytest.raises(QuadrantsRuntimeError, match=r"Argument 'x'.*needs_grad=False"):
        off(qd.ndarray(qd.f32, shape=N, needs_grad=True), out)


def test_dual_and_grad_of_grad_are_compile_errors(arch: object) -> None:
    @qd.kernel
    def dual(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            out[i] = x.dual[i]

    @qd.kernel
    def gg(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            out[i] = x.grad.grad[i]

    x, out = qd.ndarray(qd.f32, shape=N, needs_grad=True), qd.ndarray(qd.f32, shape=N)
    with pytest.raises(QuadrantsCompilationError, match=r"no attribute 'dual'"):
        dual(x, out)
    with pytest.raises(QuadrantsCompilationError, match=r"'x.grad' has no attribute 'grad'"):
        gg(x, out)


def test_reverse_mode_refuses_even_when_other_args_have_grads(arch: object) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[i] = x[i] * x.grad[i]

    x, y = qd.ndarray(qd.f32, shape=N, needs_grad=True), qd.ndarray(qd.f32, shape=N, needs_grad=True)
    x.fill(2.0)
    x.grad.fill(3.0)
    k(x, y)
    np.testing.assert_array_equal(y.to_numpy(), np.full(N, 6.0, np.float32))
    for _ in range(2):  # not cached as a success
        with pytest.raises(RuntimeError, match=r"pass the grad tensor into the kernel directly"):
            k.grad(x, y)
    k(x, y)  # the primal instance still works


def test_forward_mode_reads_grads(arch: object) -> None:
    x = qd.field(qd.f32, shape=N, needs_dual=True)
    loss = qd.field(qd.f32, shape=(), needs_dual=True)
    w = qd.ndarray(qd.f32, shape=N, needs_grad=True)
    ws = np.linspace(0.5, 2.0, N).astype(np.float32)
    w.grad.from_numpy(ws)
    x.from_numpy(np.ones(N, np.float32))

    @qd.kernel
    def k(w: qd.types.ndarray()):
        for i in x:
            loss[None] += w.grad[i] * x[i] * x[i]

    with qd.ad.FwdMode(loss=loss, param=x, seed=[1.0] * N):
        k(w)
    assert loss[None] == pytest.approx(ws.sum(), rel=1e-6)
    assert loss.dual[None] == pytest.approx(2 * ws.sum(), rel=1e-6)


def test_torch_tensor_grads(arch: object) -> None:
    torch = pytest.importorskip("torch")

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            out[i] = x[i] + 10.0 * x.grad[i]

    xs = np.linspace(-1.0, 1.0, N).astype(np.float32)
    out = np.zeros(N, np.float32)
    x = torch.tensor(xs, requires_grad=True)
    k(x, out)  # no .grad yet: made as zeros, as for a reverse-mode launch
    np.testing.assert_array_equal(out, xs)
    assert torch.equal(x.grad, torch.zeros(N))
    x.grad.fill_(0.25)
    k(x, out)
    np.testing.assert_allclose(out, xs + 2.5, rtol=1e-6)
    with pytest.raises(QuadrantsRuntimeError, match=r"Argument 'x'.*has no .grad"):
        k(torch.tensor(xs), out)
