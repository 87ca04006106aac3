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
        return complex(*v.to_list())

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
