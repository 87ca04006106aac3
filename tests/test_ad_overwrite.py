"""Quadrants' rule for overwritten globals in reverse mode: the reverse of a store `y[I] = v` adds
`y.grad[I]` to v's adjoint and then sets `y.grad[I]` to 0, so an overwritten value gets no gradient and
only the last store into the loss counts; atomic adds leave the grad in place. Fields and ndarrays."""

from __future__ import annotations

import numpy as np

import qd


def test_last_store_into_loss_counts(arch: object) -> None:
    x = qd.field(qd.f64, shape=(), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x[None] = 1.5

    @qd.kernel
    def overwrite(c: qd.f64):
        loss[None] = c * x[None]

    with qd.ad.Tape(loss):
        overwrite(1.0)
        overwrite(2.0)
        overwrite(4.0)
    assert loss[None] == 6.0 and x.grad[None] == 4.0 and loss.grad[None] == 0.0


def test_store_chain_in_one_kernel(arch: object) -> None:
    x = qd.field(qd.f64, shape=(), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    chain = [qd.field(qd.f64, shape=(), needs_grad=True) for _ in range(3)]
    x[None] = 1.5

    @qd.kernel
    def forward_chain():
        chain[0][None] = x[None]
        chain[1][None] = chain[0][None] * 2.0
        chain[2][None] = chain[1][None] * 3.0
        loss[None] = chain[2][None] * 4.0

    with qd.ad.Tape(loss):
        forward_chain()
    assert loss[None] == 36.0 and x.grad[None] == 24.0
    assert [c.grad[None] for c in chain] == [0.0, 0.0, 0.0]


def test_atomic_add_keeps_grad_and_ndarray_store_clears(arch: object) -> None:
    n = 4
    xs = np.linspace(0.5, 2.0, n)
    x = qd.ndarray(qd.f64, shape=n, needs_grad=True)
    y = qd.ndarray(qd.f64, shape=n, needs_grad=True)
    loss = qd.ndarray(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(xs)

    @qd.kernel
    def square(x: qd.types.ndarray(), y: qd.types.ndarray()):
        for i in x:
            y[i] = x[i] * x[i]

    @qd.kernel
    def total(y: qd.types.ndarray(), loss: qd.types.ndarray()):
        for i in y:
            loss[None] += y[i]

    with qd.ad.Tape(loss):
        square(x, y)
        total(y, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs, rtol=1e-12)
    np.testing.assert_array_equal(y.grad.to_numpy(), np.zeros(n))  # consumed by square's store
    assert loss.grad[None] == 1.0  # written by atomic adds only
