"""qd.math in Python scope against numpy: types, constants, GLSL functions, complex helpers.
Kernel-scope checks live in the last section."""

import math

import numpy as np
import pytest

import qd
from qd import math as qm
from qd.errors import QuadrantsTypeError

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64),
                               rtol=rtol, atol=atol)


def test_types_and_constants():
    assert qm.vec3 == qd.types.vector(3, qd.f32) and qm.mat4 == qd.types.matrix(4, 4, qd.f32)
    assert qm.ivec2.dtype is qd.i32 and qm.uvec4.dtype is qd.u32 and qm.vec2.dtype is qd.f32
    assert (qm.pi, qm.e, qm.inf) == (math.pi, math.e, math.inf) and math.isnan(qm.nan)
    assert qm.vec3(1.0).to_list() == [1.0] * 3
    assert qm.vec3(qm.vec2(1, 2), 3).to_list() == [1.0, 2.0, 3.0]
    assert qm.uvec2(3, 4).to_numpy().dtype == np.uint32


def test_reexported_scalar_functions():
    for name in ["sqrt", "sin", "cos", "tan", "exp", "log", "tanh", "floor", "ceil", "asin", "acos"]:
        x = 0.3
        close(getattr(qm, name)(x), getattr(np, name.replace("asin", "arcsin").replace("acos", "arccos"))(x))
    close(qm.atan2(1.0, 2.0), np.arctan2(1.0, 2.0))
    close(qm.pow(2.0, 0.5), 2 ** 0.5)
    assert qm.max(1, 5, 3) == 5 and qm.min(4, 2) == 2
    v = qm.vec3(1, 4, 9)
    close(qm.sqrt(v).to_numpy(), [1, 2, 3])
    close(qm.max(v, 5).to_numpy(), [5, 5, 9])


@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_elementwise_glsl_functions(shape):
    x = RNG.uniform(-2, 2, size=shape)
    y = RNG.uniform(0.5, 2, size=shape)
    a = RNG.uniform(0, 1, size=shape)
    wrap = (lambda t: t.item()) if shape == () else (lambda t: qd.Matrix(t.tolist()) if t.ndim == 2
                                                      else qd.Vector(t.tolist()))
    X, Y, A = wrap(x), wrap(y), wrap(a)
    close(np.asarray(qm.mix(X, Y, A)), x * (1 - a) + y * a)
    close(np.asarray(qm.clamp(X, -0.5, 0.5)), np.clip(x, -0.5, 0.5))
    close(np.asarray(qm.step(0.0, X)), (x >= 0).astype(float))
    close(np.asarray(qm.fract(X)), x - np.floor(x))
    t = np.clip((x + 1) / 2, 0, 1)
    close(np.asarray(qm.smoothstep(-1.0, 1.0, X)), t * t * (3 - 2 * t))
    close(np.asarray(qm.sign(X)), np.sign(x))
    close(np.asarray(qm.log2(Y)), np.log2(y))
    close(np.asarray(qm.exp2(X)), np.exp2(x))
    close(np.asarray(qm.degrees(X)), np.degrees(x))
    close(np.asarray(qm.radians(X)), np.radians(x))
    close(np.asarray(qm.mod(X, Y)), x - y * np.floor(x / y))


def test_isinf_isnan():
    v = qd.Vector([math.inf, -math.inf, math.nan, 1.0])
    assert qm.isinf(v).to_list() == [True, True, False, False]
    assert qm.isnan(v).to_list() == [False, False, True, False]
    assert qm.isinf(math.inf) and not qm.isnan(1.0)
    assert qm.ffs(qm.ivec4(0, 1, 8, 12)).to_list() == [0, 1, 4, 3]


def test_vector_functions():
    a, b = RNG.standard_normal(3), RNG.standard_normal(3)
    A, B = qm.vec3(a), qm.vec3(b)
    close(qm.dot(A, B), a @ b)
    close(qm.cross(A, B).to_numpy(), np.cross(a, b))
    close(qm.length(A), np.linalg.norm(a))
    close(qm.distance(A, B), np.linalg.norm(a - b))
    close(qm.length(-3.0), 3.0)
    close(qm.normalize(A).to_numpy(), a / np.linalg.norm(a))
    n = b / np.linalg.norm(b)
    close(qm.reflect(A, qm.vec3(n)).to_numpy(), a - 2 * (a @ n) * n)
    close(qm.vdir(0.3).to_numpy(), [math.cos(0.3), math.sin(0.3)])


def _glsl_refract(i, n, eta):
    d = i @ n
    k = 1 - eta * eta * (1 - d * d)
    return np.zeros_like(i) if k < 0 else eta * i - (eta * d + np.sqrt(k)) * n


@pytest.mark.parametrize("eta", [0.5, 1.0, 1.5, 3.0])
def test_refract(eta):
    i = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    n = np.array([0.0, 1.0, 0.0])
    close(qm.refract(qm.vec3(i), qm.vec3(n), eta).to_numpy(), _glsl_refract(i, n, eta))


def test_matrix_functions():
    a = RNG.standard_normal((3, 3))
    M = qm.mat3(a)
    close(qm.determinant(M), np.linalg.det(a), rtol=1e-4)
    close(qm.inverse(M).to_numpy(), np.linalg.inv(a), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(qm.eye(3).to_numpy(), np.eye(3))
    assert qm.eye(2).dtype is qd.f32
    r = qm.rotation2d(0.4).to_numpy()
    close(r, [[math.cos(0.4), -math.sin(0.4)], [math.sin(0.4), math.cos(0.4)]])
    close(qm.translate(1, 2, 3).to_numpy()[:3, 3], [1, 2, 3])
    close(np.diag(qm.scale(1, 2, 3).to_numpy()), [1, 2, 3, 1])
    with pytest.raises(QuadrantsTypeError):
        qm.determinant(qd.Matrix(np.eye(5).tolist()))


def test_rotations_are_orthonormal():
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    R = qm.rot_by_axis(qm.vec3(axis), 0.7).to_numpy()[:3, :3]
    close(R @ R.T, np.eye(3), atol=1e-6)
    close(R.T @ axis, axis, atol=1e-6)  # the axis is fixed (Quadrants' row convention)
    E = qm.rotation3d(0.1, 0.2, 0.3).to_numpy()
    close(E[:3, :3] @ E[:3, :3].T, np.eye(3), atol=1e-6)
    close(qm.rot_yaw_pitch_roll(0.3, 0.1, 0.2).to_numpy(), E, atol=1e-7)


def test_complex_helpers():
    z1, z2 = 1.5 - 2j, -0.5 + 0.75j
    Z1, Z2 = qm.vec2(z1.real, z1.imag), qm.vec2(z2.real, z2.imag)

    def cz(v):
        return np.array(v.to_list())

    def close(got, want):
        np.testing.assert_allclose(got, [want.real, want.imag], rtol=1e-5, atol=1e-6)

    close(cz(qm.cmul(Z1, Z2)), z1 * z2)
    close(cz(qm.cdiv(Z1, Z2)), z1 / z2)
    close(cz(qm.cconj(Z1)), z1.conjugate())
    close(cz(qm.cinv(Z1)), 1 / z1)
    close(cz(qm.csqrt(Z1)), np.sqrt(z1))
    close(cz(qm.cexp(Z1)), np.exp(z1))
    close(cz(qm.clog(Z1)), np.log(z1))
    close(cz(qm.cpow(Z1, 2.5)), z1 ** 2.5)
    assert qm.csqrt(qm.vec2(0.0)).to_list() == [0.0, 0.0]
    assert qm.cpow(qm.vec2(0.0), 2.0).to_list() == [0.0, 0.0]


def test_public_names():
    for name in qm.__all__:
        assert hasattr(qm, name), name
    for name in ["cmul", "cdiv", "cexp", "clog", "csqrt", "cpow", "cinv", "cconj", "rot_by_axis", "eye"]:
        assert name in qm.__all__


# ------------------------------------------------------------------ kernels

needs_kernel = pytest.mark.skipif(not hasattr(qd, "kernel"), reason="qd.kernel is not available yet")


@needs_kernel
def test_kernel_glsl_functions(arch):
    n = 16
    x = qd.Vector.field(3, qd.f32, shape=n)
    out = qd.Vector.field(3, qd.f32, shape=(8, n))
    X = RNG.uniform(-2, 2, size=(n, 3)).astype(np.float32)
    x.from_numpy(X)

    @qd.kernel
    def k():
        for i in range(n):
            v = x[i]
            out[0, i] = qm.clamp(v, -0.5, 0.5)
            out[1, i] = qm.mix(v, qm.vec3(1.0), 0.25)
            out[2, i] = qm.smoothstep(-1.0, 1.0, v)
            out[3, i] = qm.sign(v) + qm.step(0.0, v)
            out[4, i] = qm.fract(v) + qm.mod(v, 0.75)
            out[5, i] = qm.normalize(v) * qm.length(v) + qm.distance(v, -v)
            out[6, i] = qm.reflect(v, qm.vec3(0.0, 1.0, 0.0))
            out[7, i] = qm.refract(qm.normalize(v), qm.vec3(0.0, 1.0, 0.0), 1.4)

    k()
    got = out.to_numpy()
    t = np.clip((X + 1) / 2, 0, 1)
    L = np.linalg.norm(X, axis=1, keepdims=True)
    close(got[0], np.clip(X, -0.5, 0.5))
    close(got[1], X * 0.75 + 0.25)
    close(got[2], t * t * (3 - 2 * t))
    close(got[3], np.sign(X) + (X >= 0))
    close(got[4], X - np.floor(X) + X - 0.75 * np.floor(X / 0.75), atol=1e-5)
    close(got[5], X + 2 * L, atol=1e-5)
    close(got[6], X * np.array([1, -1, 1]))
    nrm = np.array([0.0, 1.0, 0.0])
    want = np.stack([_glsl_refract(xi / np.linalg.norm(xi), nrm, 1.4) for xi in X.astype(np.float64)])
    close(got[7], want, atol=1e-5)


@needs_kernel
def test_kernel_math_scalars_and_complex(arch):
    n = 8
    s = qd.field(qd.f32, shape=(6, n))
    z = qd.Vector.field(2, qd.f32, shape=(3, n))
    flags = qd.field(qd.i32, shape=(2, n))
    vals = np.array([1.0, -2.0, np.inf, np.nan, -np.inf, 0.5, 3.0, -0.25], dtype=np.float32)
    src = qd.field(qd.f32, shape=n)
    src.from_numpy(vals)

    @qd.kernel
    def k():
        for i in range(n):
            x = qd.cast(i, qd.f32) * 0.25 - 0.8
            s[0, i] = qm.clamp(x, -0.5, 0.5)
            s[1, i] = qm.sign(x) * qm.fract(x)
            s[2, i] = qm.log2(x + 2.0) + qm.degrees(x) + qm.radians(x)
            s[3, i] = qm.rotation2d(x)[1, 0]
            s[4, i] = qm.determinant(qm.mat2([[x, 1.0], [2.0, x]]))
            s[5, i] = qm.inverse(qm.mat2([[x, 1.0], [2.0, x]]))[0, 0]
            w = qm.vec2(x, 0.5)
            z[0, i] = qm.cmul(w, qm.vec2(0.3, -1.0))
            z[1, i] = qm.cdiv(w, qm.vec2(0.3, -1.0))
            z[2, i] = qm.cexp(w)
            flags[0, i] = qm.isinf(src[i])
            flags[1, i] = qm.isnan(src[i])

    k()
    x = np.arange(n, dtype=np.float32) * 0.25 - 0.8
    got = s.to_numpy()
    close(got[0], np.clip(x, -0.5, 0.5))
    close(got[1], np.sign(x) * (x - np.floor(x)))
    close(got[2], np.log2(x + 2) + np.degrees(x) + np.radians(x), atol=1e-5)
    close(got[3], np.sin(x))
    close(got[4], x * x - 2)
    close(got[5], x / (x * x - 2), rtol=1e-4)
    w = x + 0.5j
    zz = z.to_numpy()
    for row, want in zip(zz, [w * (0.3 - 1j), w / (0.3 - 1j), np.exp(w)]):
        close(row[:, 0], want.real, atol=1e-5)
        close(row[:, 1], want.imag, atol=1e-5)
    np.testing.assert_array_equal(flags.to_numpy()[0], np.isinf(vals))
    np.testing.assert_array_equal(flags.to_numpy()[1], np.isnan(vals))
