"""Reverse-mode gradients of array arguments and globals (`qd.frontend.args.grad_args`): a CPU torch tensor
that `requires_grad` gets its gradient in `tensor.grad` (made as zeros at its first launch when it has
none, as Quadrants does), `qd.types.ndarray(needs_grad=False)` turns that off, and numpy arrays have no
gradient; a qd ndarray with `needs_grad=True` read as a Python global gets one like a field. Checked
against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import qd

torch = pytest.importorskip("torch")

N = 5
XS = np.linspace(-1.0, 1.2, N)


@qd.kernel
def _poly(a: qd.types.ndarray(), p: qd.types.ndarray()):
    for i in a:
        p[0] += a[i] * a[i] * 2.0 + qd.sin(a[i])


def test_tape_with_torch_loss_and_input(arch: object) -> None:
    a = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    assert a.grad is None
    with qd.ad.Tape(loss=p):
        _poly(a, p)
    np.testing.assert_allclose(p.detach().numpy(), [np.sum(2 * XS ** 2 + np.sin(XS))], rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), 4 * XS + np.cos(XS), rtol=1e-12)
    assert p.grad.item() == 1.0


def test_kernel_grad_with_torch_tensors_accumulates(arch: object) -> None:
    @qd.kernel
    def scale(x: qd.types.ndarray(), y: qd.types.ndarray(), s: qd.f32):
        for i in x:
            y[i] = x[i] * x[i] * s

    x = torch.tensor(XS, dtype=torch.float32, requires_grad=True)
    y = torch.zeros(N, dtype=torch.float32, requires_grad=True)
    scale(x, y, 3.0)
    # The launch gave both tensors a zero gradient.
    assert torch.equal(x.grad, torch.zeros(N)) and torch.equal(y.grad, torch.zeros(N))
    for _ in range(2):  # gradients accumulate into x.grad
        y.grad.fill_(1.0)
        scale.grad(x, y, 3.0)
    np.testing.assert_allclose(x.grad.numpy(), 2 * (6 * XS), rtol=1e-6)


def test_needs_grad_false_annotation_and_no_requires_grad(arch: object) -> None:
    @qd.kernel
    def lin(x: qd.types.ndarray(needs_grad=False), w: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[0] += x[i] * w[i]

    x = torch.tensor(XS, dtype=torch.float32, requires_grad=True)
    w = torch.full((N,), 2.0, dtype=torch.float32, requires_grad=True)
    y = torch.zeros(1, dtype=torch.float32, requires_grad=True)
    lin(x, w, y)
    y.grad.fill_(1.0)
    lin.grad(x, w, y)
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(N, np.float32))
    np.testing.assert_allclose(w.grad.numpy(), XS, rtol=1e-6)
    # A tensor that does not require grad gets none, and its gradient is not computed.
    w2 = torch.full((N,), 2.0, dtype=torch.float32)
    lin.grad(x, w2, y)
    assert w2.grad is None


def test_numpy_arguments_have_no_gradient(arch: object) -> None:
    a = XS.copy()
    p = np.zeros(1)
    _poly(a, p)
    np.testing.assert_allclose(p, [np.sum(2 * XS ** 2 + np.sin(XS))], rtol=1e-12)
    _poly.grad(a, p)  # runs, with nothing to accumulate into
    np.testing.assert_array_equal(a, XS)


def test_mixed_qd_ndarray_and_torch(arch: object) -> None:
    a = qd.ndarray(qd.f64, shape=N, needs_grad=True)
    a.from_numpy(XS)
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    with qd.ad.Tape(loss=p):
        _poly(a, p)
    np.testing.assert_allclose(a.grad.to_numpy(), 4 * XS + np.cos(XS), rtol=1e-12)


def test_non_contiguous_torch_grad_raises(arch: object) -> None:
    x = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    x.grad = torch.zeros(2 * N, dtype=torch.float64)[::2]
    p = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="Non contiguous gradient tensors are not supported"):
        _poly.grad(x, p)


def test_global_ndarray_with_grad(arch: object) -> None:
    # A qd ndarray made with needs_grad=True and read by a kernel as a Python global gets its gradient
    # like a field does; so does an ndarray loss.
    a = qd.ndarray(qd.f64, shape=N, needs_grad=True)
    loss = qd.ndarray(qd.f64, shape=(), needs_grad=True)
    a.from_numpy(XS)

    @qd.kernel
    def run():
        for i in a:
            loss[None] += a[i] ** 3

    with qd.ad.Tape(loss=loss):
        run()
    np.testing.assert_allclose(loss[None], np.sum(XS ** 3), rtol=1e-12)
    np.testing.assert_allclose(a.grad.to_numpy(), 3 * XS ** 2, rtol=1e-12)


def test_needs_grad_false_annotation_on_qd_ndarray(arch: object) -> None:
    @qd.kernel
    def lin(x: qd.types.ndarray(needs_grad=False), w: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[0] += x[i] * w[i]

    x = qd.ndarray(qd.f64, shape=N, needs_grad=True)
    w = qd.ndarray(qd.f64, shape=N, needs_grad=True)
    y = qd.ndarray(qd.f64, shape=1, needs_grad=True)
    x.from_numpy(XS)
    w.fill(2.0)
    y.grad.fill(1.0)
    lin.grad(x, w, y)
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(N))
    np.testing.assert_allclose(w.grad.to_numpy(), XS, rtol=1e-12)
