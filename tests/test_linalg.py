"""Small-matrix decompositions (`qd.svd`, `qd.polar_decompose`, `qd.sym_eig`, `qd.make_spd`, `qd.eig`,
`qd.solve`) in kernels on every tier, against numpy: reconstruction, orthogonality, Quadrants' sign and
ordering conventions, degenerate inputs (identity, diagonal, rank-deficient, zero), reverse-mode
gradients of the 2x2 polar decomposition against central finite differences, and shape errors."""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsTypeError
from tests.conftest import init_arch

RNG = np.random.default_rng(11)
TOL = {"f32": 2e-5, "f64": 1e-12}  # relative to the largest entry of the input


def _dt(name: str) -> tuple[object, type]:
    return (qd.f32, np.float32) if name == "f32" else (qd.f64, np.float64)


def _rotation(n: int) -> np.ndarray:
    q, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    return q if np.linalg.det(q) > 0 else -q if n % 2 else q[:, ::-1]


def _general_inputs(n: int) -> list[np.ndarray]:
    """Random (both det signs), identity, reflection, diagonal, rank-deficient, zero, clustered singular
    values, badly scaled."""
    a = RNG.standard_normal((n, n))
    neg = a.copy()
    neg[0] *= -1
    rank_def = RNG.standard_normal((n, n))
    rank_def[:, -1] = 2 * rank_def[:, 0]
    rank_one = np.outer(RNG.standard_normal(n), RNG.standard_normal(n))
    clustered = _rotation(n) @ np.diag([2.0, 2.0 + 1e-4, 0.5][:n]) @ _rotation(n).T
    unsorted = _rotation(n) @ np.diag([1.0, 5.0, 2.0][:n]) @ _rotation(n).T
    return [a, neg, np.eye(n), np.diag([1.0] * (n - 1) + [-1.0]), np.diag(np.arange(n, 0, -1.0) - 1.5),
            rank_def, rank_one, np.zeros((n, n)), clustered, unsorted, 1e-6 * a, 1e6 * neg]


def _fields(n: int, dt: object, k: int, *shapes: tuple) -> list:
    return [qd.Matrix.field(*s, dtype=dt, shape=k) if len(s) == 2 else qd.Vector.field(s[0], dtype=dt, shape=k)
            for s in shapes]


# ------------------------------------------------------------------ svd and polar decomposition


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_svd(arch: object, n: int, dtn: str) -> None:
    dt, npdt = _dt(dtn)
    inputs = np.array(_general_inputs(n), dtype=npdt)
    k = len(inputs)
    a, u, s, v = _fields(n, dt, k, (n, n), (n, n), (n, n), (n, n))

    @qd.kernel
    def run():
        for i in a:
            u[i], s[i], v[i] = qd.svd(a[i], dt)

    a.from_numpy(inputs)
    run()
    tol = TOL[dtn]
    for A, U, S, V in zip(inputs.astype(np.float64), u.to_numpy(), s.to_numpy(), v.to_numpy()):
        U, S, V = U.astype(np.float64), S.astype(np.float64), V.astype(np.float64)
        scale = max(np.abs(A).max(), np.finfo(np.float64).tiny)
        np.testing.assert_allclose(U @ S @ V.T, A, atol=tol * scale, rtol=0)
        np.testing.assert_allclose(U.T @ U, np.eye(n), atol=tol)
        np.testing.assert_allclose(V.T @ V, np.eye(n), atol=tol)
        sig = np.diag(S)
        assert np.all(S - np.diag(sig) == 0)
        assert np.all(np.diff(sig) <= tol * scale), sig  # descending
        np.testing.assert_allclose(np.abs(sig), np.linalg.svd(A, compute_uv=False), atol=tol * scale)
        if n == 3:  # det U = det V = +1, the sign of det A sits in sigma[2]
            assert np.linalg.det(U) == pytest.approx(1, abs=tol) and np.linalg.det(V) == pytest.approx(1, abs=tol)
            assert np.all(sig[:2] >= 0)
            if abs(np.linalg.det(A)) > tol * scale ** 3:
                assert np.sign(sig[2]) == np.sign(np.linalg.det(A))
        else:  # sigma >= 0 and V a rotation
            assert np.all(sig >= -tol * scale) and np.linalg.det(V) == pytest.approx(1, abs=tol)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_polar_decompose(arch: object, n: int, dtn: str) -> None:
    dt, npdt = _dt(dtn)
    inputs = np.array(_general_inputs(n), dtype=npdt)
    k = len(inputs)
    a, u, p = _fields(n, dt, k, (n, n), (n, n), (n, n))

    @qd.kernel
    def run():
        for i in a:
            u[i], p[i] = qd.polar_decompose(a[i], dt)

    a.from_numpy(inputs)
    run()
    tol = TOL[dtn]
    for A, U, P in zip(inputs.astype(np.float64), u.to_numpy(), p.to_numpy()):
        U, P = U.astype(np.float64), P.astype(np.float64)
        scale = max(np.abs(A).max(), np.finfo(np.float64).tiny)
        np.testing.assert_allclose(U @ P, A, atol=tol * scale, rtol=0)
        np.testing.assert_allclose(U.T @ U, np.eye(n), atol=tol)
        assert np.all(P == P.T)
        us, sv, vt = np.linalg.svd(A)
        if n == 2 or np.linalg.det(A) >= 0:  # P is the PSD square root of AᵀA
            np.testing.assert_allclose(P, vt.T @ np.diag(sv) @ vt, atol=10 * tol * scale)
            assert np.linalg.eigvalsh(P).min() >= -tol * scale
        if n == 3:  # Quadrants' convention: U is a rotation
            assert np.linalg.det(U) == pytest.approx(1, abs=tol)
        if not A.any():
            np.testing.assert_array_equal(U, np.eye(n))


def _polar_ref(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    us, sv, vt = np.linalg.svd(A)
    return us @ vt, vt.T @ np.diag(sv) @ vt


@pytest.mark.parametrize("n", [2, 3])
def test_polar_decompose_gradient(arch: object, n: int) -> None:
    """Reverse mode against central differences of numpy's polar factors (3x3: det A > 0, where they
    coincide with Quadrants' convention; the Jacobi sweeps are differentiated as they run)."""
    k = 6
    mats = [RNG.standard_normal((n, n)) for _ in range(k - 2)]
    if n == 2:
        mats += [np.diag([2.0, -0.5]), np.array([[0.3, -1.2], [0.8, 0.1]])]
    else:
        mats += [np.diag([2.0, 1.0, 0.5]), _rotation(3) @ np.diag([3.0, 1.0, 0.2])]
        mats = [m if np.linalg.det(m) > 0 else -m for m in mats]
    mats = np.array(mats)
    wu, wp = RNG.standard_normal((k, n, n)), RNG.standard_normal((k, n, n))
    a = qd.Matrix.field(n, n, dtype=qd.f64, shape=k, needs_grad=True)
    cu = qd.Matrix.field(n, n, dtype=qd.f64, shape=k)
    cp = qd.Matrix.field(n, n, dtype=qd.f64, shape=k)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    a.from_numpy(mats)
    cu.from_numpy(wu)
    cp.from_numpy(wp)

    @qd.kernel
    def run():
        for i in a:
            u, p = qd.polar_decompose(a[i], qd.f64)
            loss[None] += (u * cu[i]).sum() + (p * cp[i]).sum()

    with qd.ad.Tape(loss=loss):
        run()
    grad = a.grad.to_numpy()

    def value(A: np.ndarray, i: int) -> float:
        U, P = _polar_ref(A)
        return float((U * wu[i]).sum() + (P * wp[i]).sum())

    h = 1e-6
    for i, A in enumerate(mats):
        fd = np.zeros((n, n))
        for r in range(n):
            for c in range(n):
                e = np.zeros((n, n))
                e[r, c] = h
                fd[r, c] = (value(A + e, i) - value(A - e, i)) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-6, atol=1e-7)


def test_polar_decompose_2x2_gradient_of_zero_matrix_is_finite(arch: object) -> None:
    a = qd.Matrix.field(2, 2, dtype=qd.f32, shape=(), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def run():
        u, p = qd.polar_decompose(a[None])
        loss[None] += u.sum() + p.sum()

    with qd.ad.Tape(loss=loss):
        run()
    assert np.isfinite(a.grad.to_numpy()).all()
    assert loss[None] == 2.0  # U = I, P = 0


# ------------------------------------------------------------------ symmetric eigenproblems


def _sym_inputs(n: int) -> list[np.ndarray]:
    q = _rotation(n)
    m = RNG.standard_normal((n, n))
    equal_diag = np.diag(np.arange(2.0, 2.0 + n))
    equal_diag[0, 0] = equal_diag[1, 1] = 2.0
    equal_diag[0, 1] = equal_diag[1, 0] = -1.0
    return [(m + m.T) / 2, m @ m.T + 2 * np.eye(n), q @ np.diag(np.linspace(-1, 2, n)) @ q.T,
            np.diag(np.linspace(3.0, 1.0, n)), q @ np.diag([1.0] * (n // 2) + [3.0] * (n - n // 2)) @ q.T,
            np.eye(n), -2.5 * np.eye(n), np.zeros((n, n)), equal_diag, 1e5 * (m + m.T)]


@pytest.mark.parametrize("n", [2, 3, 4, 6])
@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_sym_eig(arch: object, n: int, dtn: str) -> None:
    dt, npdt = _dt(dtn)
    inputs = np.array(_sym_inputs(n), dtype=npdt)
    k = len(inputs)
    a, q = _fields(n, dt, k, (n, n), (n, n))
    w = qd.Vector.field(n, dtype=dt, shape=k)

    @qd.kernel
    def run():
        for i in a:
            w[i], q[i] = qd.sym_eig(a[i], dt)

    a.from_numpy(inputs)
    run()
    tol = TOL[dtn]
    for A, W, Q in zip(inputs.astype(np.float64), w.to_numpy(), q.to_numpy()):
        W, Q = W.astype(np.float64), Q.astype(np.float64)
        scale = max(np.abs(A).max(), 1e-300)
        np.testing.assert_allclose(W, np.linalg.eigvalsh(A), atol=tol * scale)  # ascending, like eigh
        np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=tol)
        np.testing.assert_allclose(A @ Q, Q * W, atol=2 * tol * scale)  # column i belongs to W[i]


@pytest.mark.parametrize("n", [3, 6])
def test_make_spd(arch: object, n: int) -> None:
    inputs = np.array(_sym_inputs(n))
    a, out = _fields(n, qd.f64, len(inputs), (n, n), (n, n))

    @qd.kernel
    def run():
        for i in a:
            out[i] = qd.make_spd(a[i], qd.f64)

    a.from_numpy(inputs)
    run()
    for A, S in zip(inputs, out.to_numpy()):
        lam, vec = np.linalg.eigh(A)
        want = vec @ np.diag(np.maximum(lam, 0)) @ vec.T
        np.testing.assert_allclose(S, want, atol=1e-12 * max(np.abs(A).max(), 1))
        assert np.all(S == S.T)


# ------------------------------------------------------------------ general 2x2 eigenproblem


@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_eig_2x2(arch: object, dtn: str) -> None:
    dt, npdt = _dt(dtn)
    inputs = np.array([[[1, 1], [2, 3]], [[1, -1], [1, 1]], [[0, -2], [3, 0.5]], [[2, 0], [0, 2]],
                       [[1, 1], [0, 1]], [[3, 0], [0, -1]], [[0, 0], [0, 0]], [[4, 1e-3], [0, 4.5]],
                       RNG.standard_normal((2, 2)), RNG.standard_normal((2, 2))], dtype=npdt)
    k = len(inputs)
    a, vals, vecs = _fields(2, dt, k, (2, 2), (2, 2), (4, 2))

    @qd.kernel
    def run():
        for i in a:
            vals[i], vecs[i] = qd.eig(a[i], dt)

    a.from_numpy(inputs)
    run()
    tol = TOL[dtn]
    for A, L, V in zip(inputs.astype(np.float64), vals.to_numpy(), vecs.to_numpy()):
        lam = L[:, 0].astype(np.float64) + 1j * L[:, 1]
        vec = V[0::2].astype(np.float64) + 1j * V[1::2]
        want = np.linalg.eigvals(A)
        np.testing.assert_allclose(np.sort_complex(lam), np.sort_complex(want), atol=10 * tol * max(1, np.abs(A).max()))
        if abs(want[0] - want[1]) > 1e-2:  # not a double root: the order and the eigenpairs are defined
            assert lam[0].real >= lam[1].real and lam[0].imag >= lam[1].imag
            np.testing.assert_allclose(A @ vec, vec * lam, atol=10 * tol * np.abs(A).max())
        np.testing.assert_allclose(np.linalg.norm(vec, axis=0), 1, atol=tol)
        big = np.argmax(np.abs(vec), axis=0)  # LAPACK's normalisation: the largest component is real > 0
        assert np.all(vec[big, [0, 1]].real > 0) and np.allclose(vec[big, [0, 1]].imag, 0, atol=tol)


# ------------------------------------------------------------------ linear solve


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_solve(arch: object, n: int, dtn: str) -> None:
    dt, npdt = _dt(dtn)
    mats = [RNG.standard_normal((n, n)) + 2 * np.eye(n) for _ in range(4)]
    zero_pivot = RNG.standard_normal((n, n))
    zero_pivot[0, 0] = 0.0
    mats += [zero_pivot, np.eye(n)[::-1], np.diag(np.arange(1.0, n + 1))]
    mats_np, rhs_np = np.array(mats, dtype=npdt), RNG.standard_normal((len(mats), n)).astype(npdt)
    (a,) = _fields(n, dt, len(mats), (n, n))
    b, x = _fields(n, dt, len(mats), (n,), (n,))

    @qd.kernel
    def run():
        for i in a:
            x[i] = qd.solve(a[i], b[i], dt)

    a.from_numpy(mats_np)
    b.from_numpy(rhs_np)
    run()
    want = np.linalg.solve(mats_np.astype(np.float64), rhs_np.astype(np.float64)[..., None])[..., 0]
    cond = np.linalg.cond(mats_np.astype(np.float64))[:, None]
    np.testing.assert_allclose(x.to_numpy(), want, atol=0, rtol=TOL[dtn] * cond.max())


def test_solve_singular_matrix_fails_in_debug_mode(arch: object) -> None:
    init_arch(arch, debug=True)
    a = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    b = qd.Vector.field(3, dtype=qd.f32, shape=())
    x = qd.Vector.field(3, dtype=qd.f32, shape=())

    @qd.kernel
    def run():
        x[None] = qd.solve(a[None], b[None])

    a.from_numpy(np.array([[1, 2, 3], [2, 4, 6], [0, 0, 1]], dtype=np.float32))
    with pytest.raises(QuadrantsAssertionError, match="singular"):
        run()
    a.from_numpy(np.eye(3, dtype=np.float32))
    b.from_numpy(np.array([1, 2, 3], dtype=np.float32))
    run()
    assert x.to_numpy().tolist() == [1, 2, 3]


# ------------------------------------------------------------------ Python scope, dtypes and errors


def test_python_scope_and_literal_matrices(arch: object) -> None:
    u, s, v = qd.svd(qd.Matrix([[1.0, 1.0, 3.0], [9.0, -3.0, 2.0], [-3.0, 4.0, 2.0]]), qd.f64)
    np.testing.assert_allclose(u.to_numpy() @ s.to_numpy() @ v.to_numpy().T,
                               [[1, 1, 3], [9, -3, 2], [-3, 4, 2]], atol=1e-13)
    out = qd.Vector.field(2, dtype=qd.f32, shape=())
    out_x = qd.Vector.field(2, dtype=qd.f32, shape=())

    @qd.kernel
    def run():
        w, _ = qd.sym_eig(qd.Matrix([[5, 3], [3, 2]]))  # integer entries: computed at default_fp
        out[None] = w
        out_x[None] = qd.solve(qd.Matrix([[2, 0], [0, 4]]), qd.Vector([1, 1]))

    run()
    np.testing.assert_allclose(out.to_numpy(), np.linalg.eigvalsh([[5, 3], [3, 2]]), rtol=1e-6)
    assert out_x.to_numpy().tolist() == [0.5, 0.25]


def test_f32_stays_f32_under_f64_default(arch: object, monkeypatch: pytest.MonkeyPatch,
                                         capfd: pytest.CaptureFixture) -> None:
    """With default_fp=f64, dt=f32 computes in f32 throughout: no f64 value in the kernel's IR."""
    init_arch(arch, default_fp=qd.f64)
    a = qd.Matrix.field(3, 3, dtype=qd.f32, shape=())
    a2 = qd.Matrix.field(2, 2, dtype=qd.f32, shape=())
    out = qd.field(qd.f32, shape=())

    @qd.kernel
    def run():
        u, s, v = qd.svd(a[None], qd.f32)
        r, p = qd.polar_decompose(a[None], qd.f32)
        w, q = qd.eig(a2[None], qd.f32)
        l, e = qd.sym_eig(a[None], qd.f32)
        x = qd.solve(a[None], l, qd.f32)
        u2, p2 = qd.polar_decompose(a2[None], qd.f32)
        out[None] = (u + s + v + r + p + e).sum() + (w.sum() + q.sum()) + x.sum() + (u2 + p2).sum()

    monkeypatch.setenv("QD_PRINT_AFTER", "simplify")
    capfd.readouterr()
    run()
    ir_text = capfd.readouterr().err
    assert "IR after simplify" in ir_text and "f32" in ir_text and "f64" not in ir_text


@pytest.mark.parametrize("call, msg", [
    (lambda m: qd.svd(m), "qd.svd supports 2x2 and 3x3 matrices, got 4x4"),
    (lambda m: qd.polar_decompose(m), "qd.polar_decompose supports 2x2 and 3x3 matrices, got 4x4"),
    (lambda m: qd.eig(m), "qd.eig supports 2x2 matrices, got 4x4"),
    (lambda m: qd.solve(m, qd.Vector([1.0] * 4)), "qd.solve supports 2x2 and 3x3 matrices, got 4x4"),
])
def test_unsupported_shapes(qd_program: object, call: object, msg: str) -> None:
    with pytest.raises(QuadrantsTypeError, match=msg):
        call(qd.Matrix(np.eye(4)))


def test_shape_errors_in_kernels(qd_program: object) -> None:
    a = qd.Matrix.field(7, 7, dtype=qd.f64, shape=())
    a3 = qd.Matrix.field(3, 3, dtype=qd.f64, shape=())
    b = qd.Matrix.field(2, 3, dtype=qd.f64, shape=())

    @qd.kernel
    def big():
        qd.sym_eig(a[None])

    @qd.kernel
    def rect():
        qd.svd(b[None])

    @qd.kernel
    def bad_rhs():
        qd.solve(a3[None], qd.Vector([1.0, 2.0]))

    with pytest.raises(QuadrantsTypeError, match="up to 6x6, got 7x7"):
        big()
    with pytest.raises(QuadrantsTypeError, match="got 2x3"):
        rect()
    with pytest.raises(QuadrantsTypeError, match="right-hand side"):
        bad_rhs()
    with pytest.raises(QuadrantsTypeError, match="float type"):
        qd.svd(qd.Matrix(np.eye(2)), qd.i32)


# ------------------------------------------------------------------ 2x2 SVD near the identity (issue 28.5)


def _rotations(k: int, npdt: type) -> np.ndarray:
    """`k` rotations rounded to `npdt`: the quarter turns, then random angles."""
    th = np.concatenate([np.arange(8) * np.pi / 4, np.random.default_rng(5).uniform(-np.pi, np.pi, k - 8)])
    c, s = np.cos(th), np.sin(th)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2).astype(npdt)


def _svd2_kernel(dt: object, k: int) -> tuple:
    f, uvt, r, sig = _fields(2, dt, k, (2, 2), (2, 2), (2, 2), (2,))

    @qd.kernel
    def run():
        for i in f:
            u, s, v = qd.svd(f[i], dt)
            uvt[i] = u @ v.transpose()
            r[i], _ = qd.polar_decompose(f[i], dt)
            sig[i] = qd.Vector([s[0, 0], s[1, 1]])

    return f, uvt, r, sig, run


@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_svd2_of_the_identity_and_of_rotations_gives_them_back(arch: object, dtn: str) -> None:
    """MLS-MPM's strain `F - U Vᵀ`: for F = I, U Vᵀ is I exactly and sigma (1, 1); for a rotation (rounded), U Vᵀ is
    the polar factor bit for bit and within 1 ulp of F per entry (Quadrants: 2)."""
    dt, npdt = _dt(dtn)
    k = 256
    rots = _rotations(k, npdt)
    rots[0] = np.eye(2)
    f, uvt, r, sig, run = _svd2_kernel(dt, k)
    f.from_numpy(rots)
    run()
    got, polar = uvt.to_numpy(), r.to_numpy()
    np.testing.assert_array_equal(got[0], np.eye(2))
    np.testing.assert_array_equal(sig.to_numpy()[0], [1, 1])
    np.testing.assert_array_equal(got, polar)
    ulp = np.spacing(np.maximum(np.abs(rots), np.finfo(npdt).tiny))
    assert np.all(np.abs(got.astype(np.float64) - rots) <= ulp), np.abs(got - rots).max()


@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_svd2_near_a_rotation_keeps_u_vt_the_polar_factor(arch: object, dtn: str) -> None:
    """F = R (I + S) with a symmetric S of entries 10⁻⁷ .. 10⁻⁶ (f32; 10⁻¹⁵ .. 10⁻¹⁴ in f64: a resting material's
    noise): U Vᵀ is the polar factor bit for bit (V is I or the swap, as Quadrants takes below |P01| < 1e-5), and
    the singular values are within that drop of numpy's."""
    dt, npdt = _dt(dtn)
    k = 256
    rng = np.random.default_rng(6)
    size = 1e-6 if dtn == "f32" else 1e-14
    s = rng.uniform(-size, size, (k, 2, 2))
    s = (s + s.transpose(0, 2, 1)) / 2
    f_in = (_rotations(k, np.float64) @ (np.eye(2) + s)).astype(npdt)
    f, uvt, r, sig, run = _svd2_kernel(dt, k)
    f.from_numpy(f_in)
    run()
    np.testing.assert_array_equal(uvt.to_numpy(), r.to_numpy())
    want = np.linalg.svd(f_in.astype(np.float64), compute_uv=False)
    np.testing.assert_allclose(sig.to_numpy(), want, rtol=0, atol=2 * size)


@pytest.mark.parametrize("dtn", ["f32", "f64"])
def test_svd2_singular_values_stay_accurate_away_from_the_identity(arch: object, dtn: str) -> None:
    """Where P's off-diagonal is past 1e-5 of its scale the rotation is kept: random matrices, tiny ones (10⁻⁶:
    Quadrants' absolute 1e-5 would drop their off-diagonal) and large ones give numpy's singular values to a few
    epsilons of the largest, and U Vᵀ stays orthogonal."""
    dt, npdt = _dt(dtn)
    rng = np.random.default_rng(7)
    base = rng.standard_normal((96, 2, 2))
    f_in = np.concatenate([base, 1e-6 * base, 1e4 * base]).astype(npdt)
    k = len(f_in)
    f, uvt, _, sig, run = _svd2_kernel(dt, k)
    f.from_numpy(f_in)
    run()
    want = np.linalg.svd(f_in.astype(np.float64), compute_uv=False)
    eps = np.finfo(npdt).eps
    err = np.abs(sig.to_numpy() - want) / want[:, :1]
    assert err.max() <= 8 * eps, err.max() / eps
    q = uvt.to_numpy().astype(np.float64)
    np.testing.assert_allclose(q @ q.transpose(0, 2, 1), np.broadcast_to(np.eye(2), (k, 2, 2)), atol=8 * eps)


def test_svd2_in_python_scope_gives_back_the_identity_and_a_rotation(qd_program: object) -> None:
    for a in (np.eye(2), _rotations(16, np.float64)[3]):
        u, _, v = qd.svd(qd.Matrix(a), qd.f64)
        np.testing.assert_allclose(u.to_numpy() @ v.to_numpy().T, a, rtol=0, atol=np.finfo(np.float64).eps)
