"""`MatrixField.get_scalar_field(i)` / `(i, j)` (`qd/runtime/field_component.py`): one component of a vector or
matrix field as a scalar field, read and written from the host and from kernels, with its gradient, and placed
component by component (the structure-of-arrays layout of difftaichi's `diffmpm_benchmark.py`). Checked against
the parent field's numpy data on every tier."""

from __future__ import annotations

import numpy as np
import pytest

import qd


def test_host_reads_and_writes_go_to_the_parent(qd_program: object) -> None:
    v = qd.Vector.field(3, qd.f32, shape=4)
    v.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3))
    y = v.get_scalar_field(1)
    assert isinstance(y, qd.ScalarField) and not isinstance(y, qd.MatrixField)
    assert y is v.get_scalar_field(1)  # one view per component (a template argument keys on it)
    assert y.shape == (4,) and y.dtype == qd.f32
    np.testing.assert_array_equal(y.to_numpy(), [1, 4, 7, 10])
    y[2] = -1.5
    assert v[2][1] == -1.5 and y[2] == -1.5
    y.fill(2.0)
    y.from_numpy(np.array([9, 8, 7, 6], dtype=np.float32))
    want = np.arange(12, dtype=np.float32).reshape(4, 3)
    want[:, 1] = [9, 8, 7, 6]
    np.testing.assert_array_equal(v.to_numpy(), want)


def test_components_are_chosen_as_quadrants_does(qd_program: object) -> None:
    """Flat member i * m + j (j = 0 with one index; negative ones from the end); out of range is an IndexError, and
    a scalar field has no components."""
    m = qd.Matrix.field(2, 3, qd.i32, shape=())
    m.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert [m.get_scalar_field(i, j)[None] for i in range(2) for j in range(3)] == list(range(6))
    assert m.get_scalar_field(1)[None] == 3 and m.get_scalar_field(-1)[None] == 3  # member -3: row -1
    v = qd.Vector.field(2, qd.i32, shape=())
    v.from_numpy(np.array([4, 7], dtype=np.int32))
    assert v.get_scalar_field(0, 1)[None] == 7 and v.get_scalar_field(-1)[None] == 7
    with pytest.raises(IndexError):
        m.get_scalar_field(2, 0)
    with pytest.raises(AttributeError):
        qd.field(qd.f32, shape=2).get_scalar_field(0)


def test_kernels_read_and_write_a_component(arch: object) -> None:
    """Captured, and as a template argument: `c[i]` is element i's component of the parent's buffer; the host sees
    each kernel's writes and the kernels see the host's (the device copy on GPU tiers)."""
    n = 5
    m = qd.Matrix.field(2, 2, qd.f32, shape=n)
    c01 = m.get_scalar_field(0, 1)

    @qd.kernel
    def scale(c: qd.template(), k: qd.f32):
        for i in c:
            c[i] = c[i] * k + i

    @qd.kernel
    def copy_to_corner():
        for i in range(n):
            m[i][1, 1] = c01[i]

    base = np.arange(4 * n, dtype=np.float32).reshape(n, 2, 2)
    m.from_numpy(base)
    scale(c01, 2.0)
    want = base.copy()
    want[:, 0, 1] = base[:, 0, 1] * 2 + np.arange(n)
    np.testing.assert_array_equal(m.to_numpy(), want)
    c01[3] = 100.0  # a host write between launches
    want[3, 0, 1] = 100.0
    copy_to_corner()
    want[:, 1, 1] = want[:, 0, 1]
    np.testing.assert_array_equal(m.to_numpy(), want)
    np.testing.assert_array_equal(c01.to_numpy(), want[:, 0, 1])


def test_the_gradient_of_a_component_is_the_parents(arch: object) -> None:
    """`c.grad` is the same component of the parent's gradient, in a Tape and read from a kernel."""
    n = 4
    v = qd.Vector.field(2, qd.f64, shape=n, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x, y = v.get_scalar_field(0), v.get_scalar_field(1)
    out = qd.field(qd.f64, shape=n)
    xs = np.linspace(0.5, 1.5, n)
    v.from_numpy(np.stack([xs, 2 * xs], axis=1))

    @qd.kernel
    def energy():
        for i in x:
            loss[None] += x[i] * x[i] * y[i]

    @qd.kernel
    def read_grad():
        for i in range(n):
            out[i] = y.grad[i]

    with qd.ad.Tape(loss):
        energy()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs * (2 * xs), rtol=1e-12)
    np.testing.assert_allclose(v.grad.to_numpy()[:, 1], xs * xs, rtol=1e-12)
    read_grad()
    np.testing.assert_allclose(out.to_numpy(), xs * xs, rtol=1e-12)


def test_components_placed_one_by_one(arch: object) -> None:
    """difftaichi `diffmpm_benchmark.py`: every component of `x` placed under its own dense node, then `lazy_grad`;
    a Tape's gradient and the host update `init_v.get_scalar_field(0)[None] -= lr * grad[0]` work."""
    n = 3
    x = qd.Vector.field(2, dtype=qd.f64)
    init_v = qd.Vector.field(2, dtype=qd.f64)
    loss = qd.field(qd.f64)
    for i in range(2):
        qd.root.dense(qd.i, n).place(x.get_scalar_field(i))
    qd.root.place(init_v, loss)
    qd.root.lazy_grad()
    assert x.shape == (n,) and x.has_grad()
    x.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    init_v[None] = [0.5, -0.25]

    @qd.kernel
    def compute_loss():
        for i in range(n):
            p = x[i] + init_v[None]
            loss[None] += p[0] * p[1]

    with qd.ad.Tape(loss=loss):
        compute_loss()
    p = x.to_numpy() + np.array([0.5, -0.25])
    grad = init_v.grad[None]
    np.testing.assert_allclose([grad[0], grad[1]], [p[:, 1].sum(), p[:, 0].sum()], rtol=1e-12)
    init_v.get_scalar_field(0)[None] -= 0.1 * grad[0]
    assert init_v[None][0] == pytest.approx(0.5 - 0.1 * p[:, 1].sum())


def test_components_placed_at_different_shapes_raise(qd_program: object) -> None:
    m = qd.Matrix.field(2, 2, qd.i32)
    qd.root.dense(qd.i, 10).place(m.get_scalar_field(0, 0))
    with pytest.raises(RuntimeError, match=r"Members of the following field have different shapes"):
        qd.root.dense(qd.i, 11).place(m.get_scalar_field(0, 1))
