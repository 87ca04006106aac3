"""Frontend tests of vectors and matrices: fields, ndarrays, locals, params, returns, printing."""

import numpy as np
import pytest

import qd


@pytest.fixture(autouse=True)
def _qd(arch):
    """Every test runs on every tier (the `arch` fixture of conftest.py inits and resets)."""
    yield


def test_vector_field_load_store_and_elements():
    v = qd.Vector.field(3, qd.f32, shape=4)
    s = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        for i in v:
            v[i] = qd.Vector([i, i + 1, i + 2])
            v[i][1] += 10
            s[i] = v[i].x + v[i][2]

    k()
    a = v.to_numpy()
    assert a[2].tolist() == [2, 13, 4]
    assert s.to_numpy().tolist() == [2 * i + 2 for i in range(4)]


def test_local_vector_ops_swizzle_and_dynamic_index():
    out = qd.field(qd.f32, shape=6)

    @qd.kernel
    def k(j: qd.i32):
        a = qd.Vector([1.0, 2.0, 3.0])
        b = a * 2 + 1
        a[0] = 7.0
        a.y += 1
        out[0] = a[0]
        out[1] = a[1]
        out[2] = b.z
        out[3] = a[j]
        a[j] = 100.0
        out[4] = a[2]
        out[5] = a.dot(b)

    k(2)
    r = out.to_numpy()
    assert r[:5].tolist() == [7.0, 3.0, 7.0, 3.0, 100.0]
    assert r[5] == 7 * 3 + 3 * 5 + 100 * 7


def test_matrix_field_and_matmul():
    m = qd.Matrix.field(2, 2, qd.f32, shape=2)
    out = qd.Vector.field(2, qd.f32, shape=2)

    @qd.kernel
    def k():
        for i in m:
            m[i] = qd.Matrix([[1.0, 2.0], [3.0, 4.0]]) * (i + 1)
            out[i] = m[i] @ qd.Vector([1.0, 1.0])
            m[i][0, 1] = -1.0

    k()
    assert out.to_numpy().tolist() == [[3, 7], [6, 14]]
    assert m.to_numpy()[1].tolist() == [[2, -1], [6, 8]]


def test_vector_ndarray_arg_trailing_axes():
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.types.vector(3, qd.f32), ndim=1)):
        for i in a:
            a[i] = a[i] * 2.0 + qd.Vector([0.0, 1.0, 2.0])

    arr = np.ones((4, 3), np.float32)
    k(arr)
    assert arr[0].tolist() == [2.0, 3.0, 4.0]


def test_vector_param_and_return():
    @qd.kernel
    def k(v: qd.types.vector(3, qd.f32)) -> qd.types.vector(3, qd.f32):
        return v * 2

    r = k(qd.Vector([1.0, 2.0, 3.0]))
    assert list(r.entries) == [2.0, 4.0, 6.0]


def test_grouped_ndrange_and_static_grouped():
    x = qd.field(qd.i32, shape=(2, 3))
    y = qd.field(qd.i32, shape=(2, 3))

    @qd.kernel
    def k():
        for I in qd.grouped(qd.ndrange(2, 3)):
            x[I] = I[0] + 10 * I[1]
        for I in qd.static(qd.grouped(qd.ndrange(2, 3))):
            y[I] = I[0] * I[1]

    k()
    assert x.to_numpy().tolist() == [[0, 10, 20], [1, 11, 21]]
    assert y.to_numpy().tolist() == [[0, 0, 0], [0, 1, 2]]


def test_func_with_vector_args_by_value_and_template_by_ref():
    out = qd.Vector.field(2, qd.f32, shape=1)

    @qd.func
    def scale(v, s: qd.f32):
        v *= s
        return v

    @qd.func
    def bump(t: qd.template()):
        t += 1.0

    @qd.kernel
    def k():
        a = qd.Vector([1.0, 2.0])
        b = scale(a, 3.0)
        c = 0.0
        bump(c)
        out[0] = b + a * c

    k()
    assert out.to_numpy()[0].tolist() == [4.0, 8.0]


def test_print_vector(capfd):
    @qd.kernel
    def k(x: qd.i32):
        v = qd.Vector([x, x + 1])
        print("v =", v, f"x={x}")

    k(3)
    qd.sync()
    out = capfd.readouterr().out
    assert "v = [3, 4] x=3\n" in out
