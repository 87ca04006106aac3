"""qd.Vector / qd.Matrix in Python scope against numpy: construction, operators, linear algebra,
indexing, swizzles, fields and ndarrays. Kernel-scope checks live in the last section."""

import operator

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()


def _mat(a, dt=None):
    return qd.Vector(list(a), dt=dt) if np.ndim(a) == 1 else qd.Matrix([list(r) for r in a], dt=dt)


def close(got, want, rtol=1e-6, atol=1e-9):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=rtol, atol=atol)


# ------------------------------------------------------------------ construction


def test_vector_and_matrix_shapes():
    v = qd.Vector([1, 2, 3])
    assert (v.n, v.m, v.ndim, len(v)) == (3, 1, 1, 3)
    assert v.get_shape() == (3,)
    assert isinstance(v, qd.Vector) and isinstance(v, qd.Matrix)
    m = qd.Matrix([[1, 2, 3], [4, 5, 6]])
    assert (m.n, m.m, m.ndim, len(m)) == (2, 3, 2, 2)
    assert m.entries == [1, 2, 3, 4, 5, 6]
    assert qd.Matrix([1, 2]).ndim == 1


def test_dtype_inference_and_explicit_dt():
    assert qd.Vector([1, 2]).dtype is qd.i32
    assert qd.Vector([1, 2.5]).dtype is qd.f32
    v = qd.Vector([1, 2.7], dt=qd.i32)
    assert v.dtype is qd.i32 and v.to_list() == [1, 2]
    f = qd.Vector([1, 2], dt=qd.f32)
    assert f.to_numpy().dtype == np.float32
    assert qd.Matrix([[1, 2], [3, 4]], dt=qd.f64).to_numpy().dtype == np.float64
    assert qd.Vector(np.array([1.5, 2.5], dtype=np.float32)).dtype is qd.f32


def test_construction_errors():
    with pytest.raises(QuadrantsTypeError):
        qd.Matrix([[1, 2], [3]])
    with pytest.raises(QuadrantsTypeError):
        qd.Matrix([qd.Vector([1, 2]), qd.Vector([3, 4])])
    with pytest.raises(QuadrantsTypeError):
        qd.Matrix(3)
    with pytest.raises(QuadrantsTypeError):
        qd.Vector([[1, 2], [3, 4]])


def test_typed_construction_glsl_style():
    vec3 = qd.types.vector(3, qd.f32)
    assert vec3(1, 2, 3).to_list() == [1.0, 2.0, 3.0]
    assert vec3(7).to_list() == [7.0, 7.0, 7.0]
    assert vec3([1, 2, 3]).dtype is qd.f32
    v4 = qd.math.vec4(vec3(1, 2, 3).xy, 5, 6)
    assert v4.to_list() == [1.0, 2.0, 5.0, 6.0]
    assert qd.math.ivec2(1.9, -1.9).to_list() == [1, -1]
    m = qd.math.mat2([[1, 2], [3, 4]])
    assert m.to_list() == [[1.0, 2.0], [3.0, 4.0]] and m.dtype is qd.f32
    assert qd.math.mat2(qd.Vector([1, 2]), qd.Vector([3, 4])).to_list() == [[1, 2], [3, 4]]
    assert qd.math.mat3(1).to_list() == [[1.0] * 3] * 3
    with pytest.raises(QuadrantsTypeError):
        vec3(1, 2)


def test_static_constructors():
    assert qd.Vector.zero(qd.f32, 3).to_list() == [0.0] * 3
    assert qd.Matrix.zero(qd.i32, 2, 3).to_list() == [[0, 0, 0]] * 2
    assert qd.Matrix.one(qd.f32, 2).to_list() == [1.0, 1.0]
    assert qd.Vector.unit(3, 1).to_list() == [0, 1, 0]
    assert qd.Vector.unit(3, 2, qd.f32).to_numpy().dtype == np.float32
    with pytest.raises(QuadrantsIndexError):
        qd.Vector.unit(3, 3)
    np.testing.assert_array_equal(qd.Matrix.identity(qd.f32, 3).to_numpy(), np.eye(3, dtype=np.float32))
    assert qd.Matrix.diag(2, 5).to_list() == [[5, 0], [0, 5]]
    rows = qd.Matrix.rows([qd.Vector([1, 2, 3]), [4, 5, 6]])
    assert rows.to_list() == [[1, 2, 3], [4, 5, 6]]
    assert qd.Matrix.cols([qd.Vector([1, 2, 3]), qd.Vector([4, 5, 6])]).to_list() == [[1, 4], [2, 5], [3, 6]]
    with pytest.raises(QuadrantsTypeError):
        qd.Matrix.rows([qd.Vector([1, 2]), qd.Vector([1, 2, 3])])


# ------------------------------------------------------------------ elementwise operators

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
          operator.pow, operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


@pytest.mark.parametrize("op", BINARY, ids=lambda o: o.__name__)
@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_binary_matrix_matrix_and_scalar(op, shape):
    a = RNG.uniform(0.5, 3.0, size=shape).round(2)
    b = RNG.uniform(0.5, 3.0, size=shape).round(2)
    ma, mb = _mat(a), _mat(b)
    close(op(ma, mb).to_numpy(), op(a, b))
    close(op(ma, 1.5).to_numpy(), op(a, 1.5))
    close(op(1.5, ma).to_numpy(), op(1.5, a))
    close(op(ma, b.tolist()).to_numpy(), op(a, b))
    assert op(ma, mb).get_shape() == shape


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift],
                         ids=lambda o: o.__name__)
def test_integer_bit_ops(op):
    a, b = np.array([1, 6, 12]), np.array([3, 2, 1])
    assert op(qd.Vector(a.tolist()), qd.Vector(b.tolist())).to_list() == op(a, b).tolist()
    assert op(qd.Vector(a.tolist()), 1).to_list() == op(a, 1).tolist()


def test_unary_ops():
    a = np.array([[-1.5, 2.0], [0.0, -3.25]])
    m = _mat(a)
    close((-m).to_numpy(), -a)
    close(abs(m).to_numpy(), np.abs(a))
    close((+m).to_numpy(), a)
    assert (~qd.Vector([0, 5])).to_list() == [-1, -6]


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(QuadrantsTypeError, match="shape mismatch"):
        qd.Vector([1, 2, 3]) + qd.Vector([1, 2])
    with pytest.raises(QuadrantsTypeError, match="shape mismatch"):
        qd.Vector([1, 2]) * qd.Matrix([[1, 2], [3, 4]])
    with pytest.raises(QuadrantsTypeError, match="shape mismatch"):
        qd.Matrix([[1], [2]]) + qd.Vector([1, 2])


def test_f32_arithmetic_stays_f32():
    v = qd.Vector([0.1, 0.2, 0.3], dt=qd.f32)
    a = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    for got, want in [(v * 3.0, a * np.float32(3)), (v + v, a + a), (v / 7, a / np.float32(7))]:
        assert got.to_numpy().dtype == np.float32
        np.testing.assert_array_equal(got.to_numpy(), want)
    assert v.cast(qd.f64).to_numpy().dtype == np.float64
    assert v.cast(qd.i32).to_list() == [0, 0, 0]


def test_comparison_results_and_numpy_interop():
    v = qd.Vector([1, 2, 3])
    assert (v == [1, 0, 3]).to_list() == [True, False, True]
    assert (v > 1).to_list() == [False, True, True]
    assert v != None
    np.testing.assert_array_equal(np.asarray(v), [1, 2, 3])
    assert (np.float32(2) * v).to_list() == [2, 4, 6]


# ------------------------------------------------------------------ linear algebra


@pytest.mark.parametrize("n,k,m", [(2, 2, 2), (3, 2, 4), (4, 4, 1)])
def test_matmul(n, k, m):
    a, b = RNG.standard_normal((n, k)), RNG.standard_normal((k, m))
    x = RNG.standard_normal(k)
    y = RNG.standard_normal(n)
    close((_mat(a) @ _mat(b)).to_numpy(), a @ b)
    mv = _mat(a) @ _mat(x)
    assert isinstance(mv, qd.Vector)
    close(mv.to_numpy(), a @ x)
    close((_mat(y) @ _mat(a)).to_numpy(), y @ a)
    close(_mat(x) @ _mat(x), x @ x)
    close((_mat(a) @ x.tolist()).to_numpy(), a @ x)
    with pytest.raises(QuadrantsTypeError, match="dimension mismatch"):
        _mat(a) @ _mat(np.ones(k + 1))
    with pytest.raises(QuadrantsTypeError, match="dimension mismatch"):
        _mat(np.ones(n + 1)) @ _mat(a)


def test_dot_cross_outer():
    a, b = RNG.standard_normal(3), RNG.standard_normal(3)
    close(_mat(a).dot(_mat(b)), a @ b)
    close(_mat(a).dot(b.tolist()), a @ b)
    close(_mat(a).cross(_mat(b)).to_numpy(), np.cross(a, b))
    close(_mat(a[:2]).cross(_mat(b[:2])), a[0] * b[1] - a[1] * b[0])
    close(_mat(a).outer_product(_mat(b[:2])).to_numpy(), np.outer(a, b[:2]))
    with pytest.raises(QuadrantsTypeError):
        _mat(np.ones(4)).cross(_mat(np.ones(4)))
    with pytest.raises(QuadrantsTypeError):
        _mat(a).dot(_mat(np.ones(2)))
    with pytest.raises(QuadrantsTypeError):
        qd.Matrix([[1, 2], [3, 4]]).dot(qd.Vector([1, 2]))


def test_norms():
    a = np.array([3.0, 4.0, 12.0])
    v = _mat(a)
    close(v.norm(), 13.0)
    close(v.norm_sqr(), 169.0)
    close(v.norm(eps=7.0), np.sqrt(176.0))
    close(v.norm_inv(), 1 / 13.0)
    close(v.normalized().to_numpy(), a / 13.0)
    close(v.normalized(eps=1.0).to_numpy(), a / 14.0)
    m = RNG.standard_normal((2, 3))
    close(_mat(m).norm(), np.linalg.norm(m))
    close(_mat(m).frobenius_inner(_mat(2 * m)), 2 * (m * m).sum())
    w = qd.Vector([3, 4], dt=qd.f32)
    assert isinstance(w.norm(), np.float32)


def test_transpose_trace():
    a = RNG.standard_normal((2, 3))
    close(_mat(a).transpose().to_numpy(), a.T)
    assert _mat(a).transpose().get_shape() == (3, 2)
    s = RNG.standard_normal((3, 3))
    close(_mat(s).trace(), np.trace(s))
    with pytest.raises(QuadrantsTypeError, match="cannot apply to a vector"):
        qd.Vector([1, 2]).transpose()
    with pytest.raises(QuadrantsTypeError, match="square"):
        _mat(a).trace()


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_determinant(n):
    a = RNG.standard_normal((n, n))
    close(_mat(a).determinant(), np.linalg.det(a), rtol=1e-9)
    assert qd.Matrix([[1, 2], [3, 4]]).determinant() == -2


def test_determinant_limits():
    with pytest.raises(QuadrantsTypeError, match="dimension < 5"):
        _mat(np.eye(5)).determinant()
    with pytest.raises(QuadrantsTypeError, match="square"):
        _mat(np.ones((2, 3))).determinant()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8, 12])
def test_inverse(n):
    a = RNG.standard_normal((n, n)) + n * np.eye(n) * (n > 4)
    if n > 4:
        a = a[RNG.permutation(n)]  # needs pivoting
    close(_mat(a).inverse().to_numpy(), np.linalg.inv(a), rtol=1e-7, atol=1e-9)
    with pytest.raises(QuadrantsTypeError, match="dimension < 13"):
        _mat(np.eye(13)).inverse()


def test_inverse_of_zero_leading_pivot():
    a = np.array([[0.0, 1, 2, 0, 1], [1, 0, 0, 3, 0], [2, 1, 0, 0, 1], [0, 0, 1, 1, 0], [1, 2, 0, 0, 3]])
    close(_mat(a).inverse().to_numpy(), np.linalg.inv(a), rtol=1e-9, atol=1e-12)


def test_reductions():
    a = np.array([[1.5, -2.0], [7.0, 0.0]])
    m = _mat(a)
    assert m.sum() == a.sum() and m.max() == 7.0 and m.min() == -2.0
    assert m.any() is True and m.all() is False
    assert qd.Vector([0, 0]).any() is False and qd.Vector([1, 2]).all() is True


def test_fill_cast_to_list_iter():
    v = qd.Vector([1, 2, 3], dt=qd.f32)
    v.fill(4)
    assert v.to_list() == [4.0] * 3 and v.to_numpy().dtype == np.float32
    m = qd.Matrix([[1, 2], [3, 4]])
    assert m.cast(qd.f32).to_numpy().dtype == np.float32
    assert list(m) == [[1, 2], [3, 4]]
    assert list(qd.Vector([5, 6])) == [5, 6]
    assert m.to_list() == [[1, 2], [3, 4]]
    assert repr(qd.Vector([1, 2])) == "[1 2]"
    assert str(m) == str(np.array([[1, 2], [3, 4]]))


# ------------------------------------------------------------------ indexing and swizzles


def test_indexing():
    m = qd.Matrix([[1, 2, 3], [4, 5, 6]])
    assert m[1, 2] == 6 and m[1][2] == 6 and m[-1, 0] == 4
    assert isinstance(m[0], qd.Vector) and m[0].to_list() == [1, 2, 3]
    assert m[:, 1].to_list() == [2, 5]
    assert m[0:2, 1:3].to_list() == [[2, 3], [5, 6]]
    v = qd.Vector([1, 2, 3, 4])
    assert v[2] == 3 and v[-1] == 4 and v[1:3].to_list() == [2, 3]
    with pytest.raises(QuadrantsIndexError):
        v[4]
    with pytest.raises(QuadrantsIndexError):
        m[2, 0]
    with pytest.raises(QuadrantsIndexError):
        v[0, 0]


def test_setitem():
    m = qd.Matrix([[1, 2], [3, 4]])
    m[0, 1] = 9
    m[1] = [7, 8]
    assert m.to_list() == [[1, 9], [7, 8]]
    m[:, 0] = qd.Vector([5, 6])
    assert m.to_list() == [[5, 9], [6, 8]]
    v = qd.Vector([1, 2, 3], dt=qd.i32)
    v[0] = 2.9
    assert v.to_list() == [2, 2, 3]
    with pytest.raises(QuadrantsTypeError):
        m[0] = [1, 2, 3]


def test_swizzles():
    v = qd.Vector([1, 2, 3, 4])
    assert (v.x, v.y, v.z, v.w) == (1, 2, 3, 4)
    assert (v.r, v.g, v.b, v.a, v.s, v.t, v.p, v.q) == (1, 2, 3, 4, 1, 2, 3, 4)
    assert v.xy.to_list() == [1, 2] and v.zyx.to_list() == [3, 2, 1] and v.rgba.to_list() == [1, 2, 3, 4]
    assert v.xxyy.to_list() == [1, 1, 2, 2]
    v.x = 10
    v.zw = [30, 40]
    assert v.to_list() == [10, 2, 30, 40]
    with pytest.raises(QuadrantsSyntaxError):
        _ = qd.Vector([1, 2]).z
    with pytest.raises(QuadrantsTypeError):
        v.xy = [1, 2, 3]


# ------------------------------------------------------------------ fields and ndarrays


def test_vector_and_matrix_fields():
    f = qd.Vector.field(3, qd.f32, shape=(4,))
    assert f.shape == (4,) and f.elem_shape == (3,) and f.dtype is qd.f32
    f[1] = qd.Vector([1, 2, 3])
    assert isinstance(f[1], qd.Vector) and f[1].to_list() == [1.0, 2.0, 3.0]
    assert f.to_numpy().shape == (4, 3)
    g = qd.Matrix.field(2, 3, qd.i32, shape=(2, 5))
    assert g.shape == (2, 5) and g.elem_shape == (2, 3) and g.to_numpy().shape == (2, 5, 2, 3)
    assert qd.field(qd.math.vec3, shape=2).elem_shape == (3,)
    assert qd.types.vector(2, qd.f64).field(shape=3).to_numpy().dtype == np.float64
    assert qd.types.matrix(2, 2, qd.f32).field(shape=(3,)).elem_shape == (2, 2)
    h = qd.Vector.field(2, qd.f32, shape=3, needs_grad=True)
    assert h.grad.shape == (3,) and h.grad.elem_shape == (2,)


def test_vector_and_matrix_ndarrays():
    a = qd.Vector.ndarray(3, qd.f32, shape=(5,))
    assert a.shape == (5,) and a.to_numpy().shape == (5, 3)
    b = qd.Matrix.ndarray(2, 2, qd.f64, shape=(2, 3), needs_grad=True)
    assert b.to_numpy().shape == (2, 3, 2, 2) and b.grad is not None
    c = qd.ndarray(qd.math.vec2, shape=4)
    assert c.to_numpy().shape == (4, 2) and c.to_numpy().dtype == np.float32
    d = qd.math.ivec3.ndarray(shape=2)
    assert d.to_numpy().dtype == np.int32
    c[1] = [1, 2]
    assert c[1].to_list() == [1.0, 2.0]


# ------------------------------------------------------------------ kernels

needs_kernel = pytest.mark.skipif(not hasattr(qd, "kernel"), reason="qd.kernel is not available yet")


def _rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


@needs_kernel
def test_kernel_vector_arithmetic(arch):
    n = 8
    a, b = qd.Vector.field(3, qd.f32, shape=n), qd.Vector.field(3, qd.f32, shape=n)
    out, sw = qd.Vector.field(3, qd.f32, shape=n), qd.Vector.field(3, qd.f32, shape=n)
    s = qd.field(qd.f32, shape=n)
    A, B = _rand(n, 3), _rand(n, 3, lo=0.5, hi=2.0)
    a.from_numpy(A)
    b.from_numpy(B)

    @qd.kernel
    def k():
        for i in range(n):
            u, w = a[i], b[i]
            out[i] = (u + w) * 2.0 - w / 4.0 + u.cross(w) + abs(-u) ** 2
            s[i] = u.dot(w) + u.norm() + w.norm_sqr() + u.sum() + w.max() - w.min()
            sw[i] = u.zyx + qd.math.vec3(u.xy, 1.0)

    k()
    want = (A + B) * 2 - B / 4 + np.cross(A, B) + np.abs(A) ** 2
    close(out.to_numpy(), want, rtol=1e-5, atol=1e-5)
    want_s = ((A * B).sum(1) + np.linalg.norm(A, axis=1) + (B * B).sum(1) + A.sum(1) + B.max(1) - B.min(1))
    close(s.to_numpy(), want_s, rtol=1e-5, atol=1e-5)
    close(sw.to_numpy(), A[:, ::-1] + np.concatenate([A[:, :2], np.ones((n, 1))], axis=1))


@needs_kernel
def test_kernel_matrix_linear_algebra(arch):
    n = 6
    m = qd.Matrix.field(3, 3, qd.f32, shape=n)
    v = qd.Vector.field(3, qd.f32, shape=n)
    mv, vm = qd.Vector.field(3, qd.f32, shape=n), qd.Vector.field(3, qd.f32, shape=n)
    inv, mt = qd.Matrix.field(3, 3, qd.f32, shape=n), qd.Matrix.field(3, 3, qd.f32, shape=n)
    det = qd.field(qd.f32, shape=n)
    M = _rand(n, 3, 3) + 3 * np.eye(3, dtype=np.float32)
    V = _rand(n, 3)
    m.from_numpy(M)
    v.from_numpy(V)

    @qd.kernel
    def k():
        for i in range(n):
            a = m[i]
            mv[i] = a @ v[i]
            vm[i] = v[i] @ a
            inv[i] = a.inverse()
            mt[i] = a.transpose() @ a + v[i].outer_product(v[i]) - qd.Matrix.identity(qd.f32, 3)
            det[i] = a.determinant() + a.trace()

    k()
    close(mv.to_numpy(), np.einsum("nij,nj->ni", M, V), rtol=1e-5, atol=1e-5)
    close(vm.to_numpy(), np.einsum("ni,nij->nj", V, M), rtol=1e-5, atol=1e-5)
    close(inv.to_numpy(), np.linalg.inv(M), rtol=1e-4, atol=1e-5)
    want = np.einsum("nji,njk->nik", M, M) + np.einsum("ni,nj->nij", V, V) - np.eye(3)
    close(mt.to_numpy(), want, rtol=1e-5, atol=1e-5)
    close(det.to_numpy(), np.linalg.det(M) + np.trace(M, axis1=1, axis2=2), rtol=1e-4, atol=1e-4)


@needs_kernel
def test_kernel_large_inverse_with_pivoting(arch):
    n = 5
    m = qd.Matrix.field(n, n, qd.f64, shape=2)
    out = qd.Matrix.field(n, n, qd.f64, shape=2)
    M = RNG.standard_normal((2, n, n)) + 2 * np.eye(n)
    M[1] = M[1][RNG.permutation(n)]
    m.from_numpy(M)

    @qd.kernel
    def k():
        for i in range(2):
            out[i] = m[i].inverse()

    k()
    close(out.to_numpy(), np.linalg.inv(M), rtol=1e-9, atol=1e-10)


@needs_kernel
def test_kernel_dynamic_index_and_stores(arch):
    n = 10
    r, s = qd.field(qd.i32, shape=n), qd.field(qd.i32, shape=n)
    sw = qd.Vector.field(4, qd.f32, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            v = qd.Vector([10, 20, 30, 40])
            r[i] = v[i % 4]
            w = qd.Vector([0, 0, 0, 0])
            w[i % 4] = i
            w[0] += 100
            s[i] = w.sum() + w[i % 4]
            u = qd.Vector([1.0, 2.0, 3.0, 4.0])
            u.x = 9.0
            u[3] = u.x + u.y
            sw[i] = u

    k()
    idx = np.arange(n)
    np.testing.assert_array_equal(r.to_numpy(), np.array([10, 20, 30, 40])[idx % 4])
    np.testing.assert_array_equal(s.to_numpy(), 100 + idx + idx + 100 * (idx % 4 == 0))
    np.testing.assert_array_equal(sw.to_numpy(), np.tile([9.0, 2.0, 3.0, 11.0], (n, 1)))


@needs_kernel
def test_kernel_matrix_dynamic_index_and_rows(arch):
    n = 6
    out = qd.field(qd.f32, shape=n)
    row = qd.Vector.field(3, qd.f32, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            m = qd.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
            out[i] = m[i % 2, i % 3] + m[i % 2][1]
            row[i] = m[i % 2]

    k()
    M = np.array([[1.0, 2, 3], [4, 5, 6]])
    idx = np.arange(n)
    close(out.to_numpy(), M[idx % 2, idx % 3] + M[idx % 2, 1])
    close(row.to_numpy(), M[idx % 2])


@needs_kernel
def test_kernel_ndarray_of_vectors(arch):
    n = 5
    a = qd.Vector.ndarray(3, qd.f32, shape=n)
    out = qd.ndarray(qd.math.vec3, shape=n)
    A = _rand(n, 3)
    a.from_numpy(A)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.math.vec3, ndim=1), y: qd.types.ndarray(dtype=qd.math.vec3, ndim=1)):
        for i in range(x.shape[0]):
            y[i] = x[i].normalized() * 2.0 + x[i].cast(qd.i32).cast(qd.f32)

    k(a, out)
    want = A / np.linalg.norm(A, axis=1, keepdims=True) * 2 + A.astype(np.int32)
    close(out.to_numpy(), want, rtol=1e-5, atol=1e-6)


@needs_kernel
def test_kernel_constructors_augmented_atomics_and_reductions(arch):
    f = qd.Vector.field(3, qd.f32, shape=4)
    acc = qd.Vector.field(3, qd.f32, shape=())
    m = qd.Matrix.field(2, 3, qd.f32, shape=4)
    flags = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k():
        for i in range(4):
            v = qd.Vector.zero(qd.f32, 3)
            w = qd.Vector([1.0, 2.0, 3.0])
            v += w * i
            for j in qd.static(range(3)):
                v[j] += j
            f[i] = v + qd.Vector.unit(3, 0, qd.f32) * v[i % 3]
            qd.atomic_add(acc[None], w)
            m[i] = qd.Matrix.rows([v, w])
            if (v > 4.5).any():
                flags[i] += 1
            if (v > 0.5).all():
                flags[i] += 10

    k()
    i = np.arange(4)[:, None]
    v = np.array([1.0, 2, 3]) * i + np.arange(3)
    want = v.copy()
    want[:, 0] += v[np.arange(4), np.arange(4) % 3]
    close(f.to_numpy(), want)
    close(acc.to_numpy(), [4.0, 8.0, 12.0])
    close(m.to_numpy()[:, 0], v)
    close(m.to_numpy()[:, 1], np.tile([1.0, 2, 3], (4, 1)))
    np.testing.assert_array_equal(flags.to_numpy(), (v > 4.5).any(1) + 10 * (v > 0.5).all(1))


@needs_kernel
def test_kernel_shape_errors_are_compile_errors(arch):
    f = qd.Vector.field(3, qd.f32, shape=2)

    @qd.kernel
    def add_mismatch():
        for i in range(2):
            f[i] = f[i] + qd.Vector([1.0, 2.0])

    @qd.kernel
    def det_of_vector():
        for i in range(2):
            f[i][0] = f[i].determinant()

    with pytest.raises(QuadrantsTypeError, match="shape mismatch"):
        add_mismatch()
    with pytest.raises(QuadrantsTypeError, match="square"):
        det_of_vector()
