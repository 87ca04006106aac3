"""`x ** n` with an exponent known when the kernel is built (issue 31), as Quadrants simplifies it: multiplications
by squaring for integers up to 32, 1 / x ** n below zero (floats), sqrt for 0.5, x for 1, one for 0; other exponents
stay the `pow` op. Every tier runs the same multiplications, so the results are those of numpy's products bit for
bit, and the gradient is the product rule's."""

from __future__ import annotations

import numpy as np

import qd


def _kernel():
    @qd.kernel
    def powers(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 2), m: qd.types.ndarray(qd.i32, 2)):
        for i in range(x.shape[0]):
            v = x[i]
            y[i, 0] = v ** 3
            y[i, 1] = v ** -2
            y[i, 2] = v ** 0.5
            y[i, 3] = v ** 1
            y[i, 4] = v ** 0
            y[i, 5] = v ** 2.0
            y[i, 6] = v ** 7
            y[i, 7] = v ** 33  # (past the limit: the pow op)
            y[i, 8] = v ** 1.5
            k = i % 17 - 8
            m[i, 0] = k ** 5
            m[i, 1] = k ** 2
            y[i, 9] = k ** 2.0

    return powers


def test_constant_exponents_are_products_on_every_tier(arch):
    """(Over these inputs the correctly rounded powers differ from the products in a quarter to two thirds of the
    elements: the `pow` op would fail the equalities.)"""
    n = 4096
    x = np.random.default_rng(3).uniform(0.25, 4, n).astype(np.float32)
    y, m = np.zeros((n, 10), np.float32), np.zeros((n, 2), np.int32)
    _kernel()(x, y, m)
    sq = x * x
    np.testing.assert_array_equal(y[:, 0], x * sq)
    np.testing.assert_array_equal(y[:, 1], np.float32(1) / sq)
    np.testing.assert_array_equal(y[:, 2], np.sqrt(x))
    np.testing.assert_array_equal(y[:, 3], x)
    np.testing.assert_array_equal(y[:, 4], np.ones(n, np.float32))
    np.testing.assert_array_equal(y[:, 5], sq)
    np.testing.assert_array_equal(y[:, 6], (x * sq) * (sq * sq))  # 7 = 1 + 2 + 4: x * x^2, then * x^4
    np.testing.assert_allclose(y[:, 7], x.astype(np.float64) ** 33, rtol=2e-6)
    np.testing.assert_allclose(y[:, 8], x.astype(np.float64) ** 1.5, rtol=1e-6)
    k = np.arange(n, dtype=np.int32) % 17 - 8
    np.testing.assert_array_equal(m[:, 0], k ** 5)
    np.testing.assert_array_equal(m[:, 1], k * k)
    np.testing.assert_array_equal(y[:, 9], (k * k).astype(np.float32))


def test_the_gradient_of_a_constant_power(arch):
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def f():
        for i in x:
            loss[None] += x[i] ** 3 + x[i] ** -1

    xs = np.linspace(0.5, 2.0, 8).astype(np.float32)
    x.from_numpy(xs)
    with qd.ad.Tape(loss=loss):
        f()
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * xs.astype(np.float64) ** 2 - xs.astype(np.float64) ** -2,
                               rtol=2e-6)


def test_non_finite_constant_exponents_stay_the_pow_op():
    qd.init(arch=qd.interp, log_level="warn")
    y = qd.field(qd.f32, shape=3)

    @qd.kernel
    def f(v: qd.f32):
        y[0] = v ** float("inf")
        y[1] = v ** float("nan")
        y[2] = v ** -0.0

    f(0.5)
    got = y.to_numpy()
    assert got[0] == 0 and np.isnan(got[1]) and got[2] == 1
