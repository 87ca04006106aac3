"""`qd.ad.Tape`, `qd.ad.grad_replaced` / `grad_for` / `no_grad` (`qd/runtime/ad_custom.py`): recording of launches,
replay of their gradients in reverse order, Quadrants' errors, and the finite-difference `grad_check`."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import qd

N = 6
XS = np.linspace(0.2, 1.4, N)


def _two_kernels():
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    y = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)

    @qd.kernel
    def square_sin():
        for i in x:
            y[i] = x[i] ** 2 + qd.sin(x[i])

    @qd.kernel
    def reduce(a: qd.f64):
        for i in y:
            loss[None] += a * y[i] * y[i]

    return x, y, loss, square_sin, reduce


def test_tape_two_kernels_closed_form(arch: object) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()
    with qd.ad.Tape(loss=loss) as tape:
        square_sin()
        reduce(0.5)
    ys = XS ** 2 + np.sin(XS)
    np.testing.assert_allclose(loss[None], 0.5 * np.sum(ys * ys), rtol=1e-12)
    assert loss.grad[None] == 1.0
    # square_sin's reverse sweep consumed y.grad (= ys) and cleared it: y is overwritten there (Quadrants)
    np.testing.assert_array_equal(y.grad.to_numpy(), np.zeros(N))
    np.testing.assert_allclose(x.grad.to_numpy(), ys * (2 * XS + np.cos(XS)), rtol=1e-12)
    # `.calls` holds (kernel, args) in launch order.
    assert [c[0] for c in tape.calls] == [square_sin, reduce]
    assert tape.calls[0][1] == () and tape.calls[1][1] == (0.5,)
    assert tape.gradient_evaluated


def test_tape_clears_gradients_and_zeroes_loss(arch: object) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()
    ys = XS ** 2 + np.sin(XS)
    want = ys * (2 * XS + np.cos(XS))
    loss[None] = 123.0
    x.grad.fill(7.0)
    with qd.ad.Tape(loss):
        square_sin()
        reduce(0.5)
    np.testing.assert_allclose(loss[None], 0.5 * np.sum(ys * ys), rtol=1e-12)  # loss zeroed on entry
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-12)  # old grads cleared
    with qd.ad.Tape(loss, clear_gradients=False):
        square_sin()
        reduce(0.5)
    # Nothing cleared on entry: x.grad accumulates to 2*want; y.grad was consumed (and cleared) by
    # square_sin's sweep both times, as Quadrants clears the grad of an overwritten global.
    np.testing.assert_array_equal(y.grad.to_numpy(), np.zeros(N))
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * want, rtol=1e-12)


def test_tape_without_launches_outside_is_not_recording(arch: object) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()
    tape = qd.ad.Tape(loss)
    square_sin()  # before entering: not recorded
    with tape:
        reduce(1.0)
    square_sin()  # after exit: not recorded
    assert [c[0] for c in tape.calls] == [reduce]
    from qd.runtime import ad_tape as tape_mod

    assert tape_mod.active_tape() is None and tape_mod._any_active is None


def test_loss_validation_errors(arch: object) -> None:
    v = qd.field(qd.f64, shape=3, needs_grad=True)
    with pytest.raises(RuntimeError, match="must be a 0-D field"):
        with qd.ad.Tape(loss=v):
            pass
    nograd = qd.field(qd.f64, shape=())
    with pytest.raises(RuntimeError, match="Gradients of loss are not allocated"):
        with qd.ad.Tape(loss=nograd):
            pass
    nd = qd.ndarray(qd.f64, shape=2, needs_grad=True)
    with pytest.raises(RuntimeError, match="ndarray with only one element"):
        with qd.ad.Tape(loss=nd):
            pass
    nd1 = qd.ndarray(qd.f64, shape=1)
    with pytest.raises(RuntimeError, match="Gradients of loss are not allocated"):
        with qd.ad.Tape(loss=nd1):
            pass
    with pytest.raises(AssertionError, match="grad_check should be a list"):
        qd.ad.Tape(loss=nograd, grad_check=v)


def test_enter_once_evaluate_once(arch: object) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()
    tape = qd.ad.Tape(loss)
    with tape:
        reduce(1.0)
    with pytest.raises(AssertionError, match="Tape can be entered only once."):
        with tape:
            pass
    with pytest.raises(AssertionError, match="Gradients of grad can be evaluated only once."):
        tape.grad()
    with pytest.raises(AssertionError, match="Before evaluating gradients tape must be entered."):
        qd.ad.Tape(loss).grad()


def test_grad_replaced_custom_gradient(arch: object) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    y = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)

    @qd.kernel
    def mul(a: qd.f64):
        for i in x:
            y[i] = x[i] * a

    @qd.kernel
    def total():
        for i in y:
            loss[None] += y[i]

    xg, yg = x.grad, y.grad

    @qd.kernel
    def mul_grad_doubled(a: qd.f64):
        for i in x:
            xg[i] += 2.0 * a * yg[i]

    @qd.ad.grad_replaced
    def foo(a):
        mul(a)

    @qd.ad.grad_for(foo)
    def foo_grad(a):
        mul_grad_doubled(a)

    with qd.ad.Tape(loss) as tape:
        foo(3.0)
        total()
    # `foo` is one call; the kernel it launched is not recorded.
    assert [c[0] for c in tape.calls] == [foo, total]
    assert tape.calls[0][1] == (3.0,)
    np.testing.assert_allclose(loss[None], 3.0 * XS.sum(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.to_numpy(), np.ones(N))
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 6.0))  # the custom rule, not the true 3


def test_grad_for_errors(arch: object) -> None:
    @qd.kernel
    def k():
        pass

    with pytest.raises(RuntimeError, match=r"must be a \*\*python\*\* function instead of a quadrants kernel"):
        @qd.ad.grad_for(k)
        def k_grad():
            pass

    def plain():
        pass

    with pytest.raises(RuntimeError, match="Primal function `plain` must be decorated by qd.ad.grad_replaced"):
        @qd.ad.grad_for(plain)
        def plain_grad():
            pass

    @qd.ad.grad_replaced
    def f():
        pass

    @qd.ad.grad_for(f)
    def f_grad():
        pass

    with pytest.raises(RuntimeError):  # a second gradient for the same primal
        @qd.ad.grad_for(f)
        def f_grad2():
            pass


def test_no_grad(arch: object) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()

    xg = x.grad

    @qd.kernel
    def bump():
        for i in x:
            xg[i] += 100.0  # would be visible if its "gradient" ran the primal

    @qd.ad.no_grad
    def skipped():
        square_sin()

    with qd.ad.Tape(loss) as tape:
        skipped()
        reduce(0.5)
    assert [c[0] for c in tape.calls] == [skipped, reduce]
    ys = XS ** 2 + np.sin(XS)
    np.testing.assert_allclose(y.grad.to_numpy(), ys, rtol=1e-12)
    np.testing.assert_allclose(x.grad.to_numpy(), np.zeros(N))  # no gradient through `skipped`

    nb = qd.ad.no_grad(bump)  # a kernel marked no_grad: recorded, gradient a no-op
    with qd.ad.Tape(loss) as tape:
        nb()
    assert [c[0] for c in tape.calls] == [nb]
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 100.0))  # the primal ran once, no grad


def test_grad_check_passes_for_correct_kernel(arch: object, capsys: pytest.CaptureFixture) -> None:
    x, y, loss, square_sin, reduce = _two_kernels()
    with qd.ad.Tape(loss, grad_check=[x, loss]):  # the loss itself passes trivially
        square_sin()
        reduce(0.5)
    out = capsys.readouterr().out
    assert "variable 0 passes grad check" in out
    ys = XS ** 2 + np.sin(XS)
    # The fields are left as the primal pass left them.
    np.testing.assert_allclose(loss[None], 0.5 * np.sum(ys * ys), rtol=1e-12)
    np.testing.assert_allclose(x.to_numpy(), XS)


def test_grad_check_fails_for_wrong_gradient(arch: object, capsys: pytest.CaptureFixture) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(XS)

    @qd.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    xg, lg = x.grad, loss.grad

    @qd.kernel
    def wrong_grad():
        for i in x:
            xg[i] += 2.0 * lg[None]

    @qd.ad.grad_replaced
    def f():
        total()

    @qd.ad.grad_for(f)
    def f_grad():
        wrong_grad()

    with pytest.raises(AssertionError, match="Grad check failed: Not all variables pass grad check"):
        with qd.ad.Tape(loss, grad_check=[x]):
            f()


def test_grad_check_needs_f64_loss(arch: object) -> None:
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def total():
        for i in x:
            loss[None] += x[i]

    with pytest.raises(AssertionError, match="Only f64 is supported when checking grad."):
        with qd.ad.Tape(loss, grad_check=[x]):
            total()


def test_validation_warns_without_debug(arch: object) -> None:
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    with pytest.warns(Warning, match="Debug mode is disabled, autodiff valid check will not work"):
        qd.ad.Tape(loss, validation=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qd.ad.Tape(loss)


def test_tape_runs_backward_when_block_raises(arch: object) -> None:
    # As in Quadrants: leaving the block by an exception still evaluates the recorded gradients on
    # exit, then the block's exception propagates unchanged.
    x, _, loss, square_sin, reduce = _two_kernels()
    ys = XS ** 2 + np.sin(XS)

    class Stop(Exception):
        pass

    with pytest.raises(Stop), qd.ad.Tape(loss) as tape:
        square_sin()
        reduce(0.5)
        raise Stop()
    assert tape.gradient_evaluated
    np.testing.assert_allclose(x.grad.to_numpy(), ys * (2 * XS + np.cos(XS)), rtol=1e-12)
    # Only what ran before the exception is recorded and differentiated.
    with pytest.raises(Stop), qd.ad.Tape(loss):
        square_sin()
        raise Stop()
    assert loss.grad[None] == 1.0
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(N))


def test_tape_without_loss_does_not_evaluate_on_raise(arch: object) -> None:
    x, _, _, square_sin, _ = _two_kernels()
    with pytest.raises(ValueError, match="stop"), qd.ad.Tape() as tape:
        square_sin()
        raise ValueError("stop")
    assert not tape.gradient_evaluated and len(tape.calls) == 1
    np.testing.assert_array_equal(x.grad.to_numpy(), np.zeros(N))
