"""Slices of vector/matrix values and tuple-valued conditional expressions in kernels (issue 29: Genesis' forms).

`m[i, :]`, `m[:, j]`, `m[a:b, j]`, `m[:2, :2]`, `v[a:b]` on load and store, with `i`/`j` a literal, a qd.static loop
index or a runtime value, on locals, func parameters, field/ndarray elements and struct members;
`x[(b, a) if a > b else (a, b)]`. Expected values come from numpy; every kernel here gives the same numbers
on Quadrants 1.3.3 (checked by running this file there). Errors are checked on the interpreter only (the
frontend raises them before any backend runs).
"""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError
from tests.conftest import init_arch

HERE = __file__
M = np.arange(1.0, 13.0, dtype=np.float32).reshape(3, 4)  # the local matrix most kernels slice


@pytest.fixture
def _qd(arch):
    """Every behaviour test runs on every tier (the `arch` fixture of conftest.py inits and resets)."""
    yield


def _mat() -> qd.Matrix:
    return qd.Matrix(M.tolist())


@pytest.mark.usefixtures("_qd")
def test_load_rows_and_columns_static_and_runtime():
    out = qd.field(qd.f32, shape=(8, 4))

    @qd.kernel
    def k(q: qd.i32, r: qd.i32):
        m = qd.Matrix([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
        for i in qd.static(range(3)):  # forward_kinematics.py: xmat_T[i, :] with i static
            row = m[i, :]
            for j in qd.static(range(4)):
                out[i, j] = row[j]
        col = m[:, 2]  # a literal column
        for i in qd.static(range(3)):
            out[3, i] = col[i]
        rq = m[q, :]  # box_contact.py: rt[q2, :] with q2 a runtime value
        cr = m[:, r]  # diff_gjk.py: rot[:, axis_idx]
        for j in qd.static(range(4)):
            out[4, j] = rq[j]
        for i in qd.static(range(3)):
            out[5, i] = cr[i]
        out[6, 0] = m[1, :].dot(m[2, :])  # methods on the slice
        out[6, 1] = m[:, 0].norm_sqr()

    k(2, 3)
    got = out.to_numpy()
    np.testing.assert_array_equal(got[:3], M)
    np.testing.assert_array_equal(got[3, :3], M[:, 2])
    np.testing.assert_array_equal(got[4], M[2])
    np.testing.assert_array_equal(got[5, :3], M[:, 3])
    assert got[6, 0] == M[1] @ M[2]
    assert got[6, 1] == M[:, 0] @ M[:, 0]


@pytest.mark.usefixtures("_qd")
def test_load_ranges_blocks_and_steps():
    out = qd.field(qd.f32, shape=(8, 6))
    vec = np.arange(1.0, 7.0, dtype=np.float32)

    @qd.kernel
    def k():
        m = qd.Matrix([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
        v = qd.Vector([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        a = m[1:3, 0]
        b = m[:2, :2]  # geom.py: T[:3, :3]
        c = m[:3, 3]  # geom.py: T[:3, 3]
        d = m[::2, 1]
        e = v[1:4]
        f = v[::2]
        g = v[4:1:-1]
        h = m[1:, 1:]
        for i in qd.static(range(2)):
            out[0, i] = a[i]
            for j in qd.static(range(2)):
                out[1, 2 * i + j] = b[i, j]
            out[3, i] = d[i]
        for i in qd.static(range(3)):
            out[2, i] = c[i]
            out[4, i] = e[i]
            out[5, i] = f[i]
            out[6, i] = g[i]
        for i in qd.static(range(2)):
            for j in qd.static(range(3)):
                out[7, 3 * i + j] = h[i, j]
        for i in qd.static(range(2)):  # fem_solver.py: x_diff[j * 3 : j * 3 + 3] with j static
            w = v[i * 3:i * 3 + 3]
            out[6, 3 + i] = w[0] + w[1] * 10.0 + w[2] * 100.0

    k()
    got = out.to_numpy()
    np.testing.assert_array_equal(got[0, :2], M[1:3, 0])
    np.testing.assert_array_equal(got[1, :4], M[:2, :2].ravel())
    np.testing.assert_array_equal(got[2, :3], M[:3, 3])
    np.testing.assert_array_equal(got[3, :2], M[::2, 1])
    np.testing.assert_array_equal(got[4, :3], vec[1:4])
    np.testing.assert_array_equal(got[5, :3], vec[::2])
    np.testing.assert_array_equal(got[6, :3], vec[4:1:-1])
    np.testing.assert_array_equal(got[6, 3:5], [vec[0] + vec[1] * 10 + vec[2] * 100,
                                                vec[3] + vec[4] * 10 + vec[5] * 100])
    np.testing.assert_array_equal(got[7], M[1:, 1:].ravel())


@pytest.mark.usefixtures("_qd")
def test_store_rows_columns_blocks_static_and_runtime():
    out = qd.Matrix.field(3, 4, qd.f32, shape=4)

    @qd.kernel
    def k(q: qd.i32, r: qd.i32):
        s = qd.Matrix.zero(qd.f32, 3, 4)
        for i in qd.static(range(3)):
            s[i, :] = qd.Vector([1.0, 2.0, 3.0, 4.0]) * (i + 1)  # fem_solver.py: S[i, :] = ...
        s[:, 1] = qd.Vector([7.0, 8.0, 9.0])  # sap_coupler.py: tri_vertices[:, i] = ...
        out[0] = s
        t = qd.Matrix.zero(qd.f32, 3, 4)
        t[q, :] = qd.Vector([1.0, 2.0, 3.0, 4.0])  # narrowphase.py: supports_a[i_v, :] = support_a
        t[:, r] = qd.Vector([5.0, 6.0, 7.0])
        t[q, 1:3] += qd.Vector([10.0, 20.0])
        out[1] = t
        u = qd.Matrix.identity(qd.f32, 4)[:3, :]
        u[:2, :2] = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])  # geom.py: T[:3, :3] = R
        u[:2, 3] = qd.Vector([5.0, 6.0])  # T[:3, 3] = trans
        u[2, :2] = (7, 8)  # a tuple is a vector
        u[2, 2:] = 9.0  # a scalar is broadcast
        u[0, ::2] *= 10.0
        out[2] = u
        v = qd.Vector.zero(qd.f32, 12)
        for i in qd.static(range(4)):
            v[i * 3:i * 3 + 3] = qd.Vector([1.0, 2.0, 3.0]) * (i + 1)
        for i in qd.static(range(2)):
            v[i * 3:i * 3 + 3] += v[6 + i * 3:9 + i * 3]  # fem_solver.py: St_x_diff[i * 3 : i * 3 + 3] += ...
        for i in qd.static(range(3)):
            for j in qd.static(range(4)):
                out[3][i, j] = v[i * 4 + j]

    k(2, 0)
    got = out.to_numpy()
    s = np.outer([1, 2, 3], [1, 2, 3, 4]).astype(np.float32)
    s[:, 1] = [7, 8, 9]
    t = np.zeros((3, 4), np.float32)
    t[2, :] = [1, 2, 3, 4]
    t[:, 0] = [5, 6, 7]
    t[2, 1:3] += [10, 20]
    u = np.eye(4, dtype=np.float32)[:3]
    u[:2, :2] = [[1, 2], [3, 4]]
    u[:2, 3] = [5, 6]
    u[2, :2] = [7, 8]
    u[2, 2:] = 9
    u[0, ::2] *= 10
    v = np.concatenate([np.array([1, 2, 3], np.float32) * (i + 1) for i in range(4)])
    v[0:3] += v[6:9]
    v[3:6] += v[9:12]
    np.testing.assert_array_equal(got[0], s)
    np.testing.assert_array_equal(got[1], t)
    np.testing.assert_array_equal(got[2], u)
    np.testing.assert_array_equal(got[3].ravel(), v)


@pytest.mark.usefixtures("_qd")
def test_runtime_row_out_of_range_store_writes_nothing():
    """Quadrants' behaviour without debug checks: no row matches, the matrix is unchanged."""
    out = qd.field(qd.f32, shape=(2, 2))

    @qd.kernel
    def k(q: qd.i32):
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[q, :] = qd.Vector([9.0, 9.0])
        out[0, 0] = m[0, 0] + m[0, 1] + m[1, 0] + m[1, 1]

    k(5)
    assert out[0, 0] == 10.0


def test_runtime_index_with_slice_is_bound_checked_in_debug_mode(arch):
    qd.reset()
    init_arch(arch, debug=True)
    out = qd.field(qd.f32, shape=2)

    @qd.kernel
    def load(q: qd.i32):
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        out[0] = m[q, :].sum()

    @qd.kernel
    def store(q: qd.i32):
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[:, q] = qd.Vector([5.0, 6.0])
        out[1] = m[1, 1]

    load(1)
    store(1)
    assert out.to_numpy().tolist() == [7.0, 6.0]
    for fn, what in ((load, "axis 0 of a local matrix of shape (2, 2)"), (store, "axis 1 of a local matrix")):
        with pytest.raises(QuadrantsAssertionError, match=r"Out of bound access.*index 5 is out of \[0, 2\) for "
                           + what.replace("(", r"\(").replace(")", r"\)")):
            fn(5)
            qd.sync()


@pytest.mark.usefixtures("_qd")
def test_slices_in_funcs_with_runtime_and_static_parameters():
    out = qd.Matrix.field(3, 3, qd.f32, shape=2)
    pos = qd.Vector.field(3, qd.f32, shape=2)

    @qd.func
    def rotmatx(i0: int, i1: int, i2: int, matin: qd.types.matrix(3, 3, qd.f32), f0: int, f1: int, f2: int):
        matres = qd.Matrix.zero(qd.f32, 3, 3)  # contact.py: rows picked by runtime func parameters
        matres[0, :] = matin[i0, :] * f0
        matres[1, :] = matin[i1, :] * f1
        matres[2, :] = matin[i2, :] * f2
        return matres

    @qd.func
    def trans_to_T(trans, quat_r):
        t = qd.Matrix.identity(qd.f32, 4)
        t[:3, :3] = quat_r
        t[:3, 3] = trans
        return t

    @qd.func
    def transform_by_T(p, t):  # geom.py: T[:3, :3] @ pos + T[:3, 3]
        return t[:3, :3] @ p + t[:3, 3]

    @qd.kernel
    def k(a: qd.i32):
        m = qd.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        out[0] = rotmatx(2, a, 0, m, 1, -1, 2)
        t = trans_to_T(qd.Vector([1.0, 2.0, 3.0]), m)
        pos[0] = transform_by_T(qd.Vector([1.0, 0.0, -1.0]), t)
        pos[1] = t[3, :3]

    k(1)
    m = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(out.to_numpy()[0], np.stack([m[2], -m[1], 2 * m[0]]))
    np.testing.assert_array_equal(pos.to_numpy()[0], m @ [1, 0, -1] + [1, 2, 3])
    np.testing.assert_array_equal(pos.to_numpy()[1], [0, 0, 0])


@pytest.mark.usefixtures("_qd")
def test_field_element_slices_load_store_and_atomic():
    lines = qd.Vector.field(6, qd.f32, shape=(3, 2))
    mats = qd.Matrix.field(3, 3, qd.f32, shape=4)
    t0 = qd.Matrix.field(4, 4, qd.f32, shape=())
    out = qd.Vector.field(3, qd.f32, shape=3)
    init = np.arange(36, dtype=np.float32).reshape(4, 3, 3)
    mats.from_numpy(init)
    t0.from_numpy(np.arange(16, dtype=np.float32).reshape(4, 4))

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        for i in range(3):  # box_contact.py: box_lines[k, i_b][0:3] = ...
            lines[i, 0][0:3] = qd.Vector([1.0, 2.0, 3.0]) * i
            lines[i, 0][3:6] = qd.Vector([4.0, 5.0, 6.0])
        for i in range(4):  # atomic adds into a slice of one element from every thread
            lines[1, 1][1:4] += qd.Vector([1.0, 2.0, 3.0])
        mats[a][:2, :2] = qd.Matrix([[-1.0, -2.0], [-3.0, -4.0]])
        mats[a][2, :] = qd.Vector([5.0, 6.0, 7.0])
        mats[b][:, b] = qd.Vector([8.0, 9.0, 10.0])
        mats[b][a - 2, :] += qd.Vector([1.0, 1.0, 1.0])  # a runtime row of an element, augmented
        out[0] = mats[0][:, 2]
        out[1] = mats[a][b, :]
        out[2] = t0[None][:3, :3] @ qd.Vector([1.0, 1.0, 1.0]) + t0[None][:3, 3]  # mesh.py: T[None][:3, :3]

    k(3, 1)
    want = init.copy()
    want[3][:2, :2] = [[-1, -2], [-3, -4]]
    want[3][2, :] = [5, 6, 7]
    want[1][:, 1] = [8, 9, 10]
    want[1][1, :] += 1
    np.testing.assert_array_equal(mats.to_numpy(), want)
    got = lines.to_numpy()
    for i in range(3):
        np.testing.assert_array_equal(got[i, 0], [i, 2 * i, 3 * i, 4, 5, 6])
    np.testing.assert_array_equal(got[1, 1], [0, 4, 8, 12, 0, 0])
    t = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(out.to_numpy(), [want[0][:, 2], want[3][1, :], t[:3, :3].sum(1) + t[:3, 3]])


@pytest.mark.usefixtures("_qd")
def test_ndarray_and_struct_element_slices():
    sap = qd.types.struct(g=qd.types.matrix(3, 3, qd.f32), rt=qd.f32)
    info = sap.field(shape=2)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.types.matrix(2, 3, qd.f32), ndim=1), q: qd.i32):
        for i in x:
            x[i][:, 0] = x[i][:, 2] * 2.0
            x[i][q, 1:] = qd.Vector([-1.0, -2.0])
        for p in info:  # sap_coupler.py: sap_info[i_p].G[:2, :2] = ...
            info[p].rt = 2.0
            info[p].g[:2, :2] = qd.Matrix([[1.0, 2.0], [3.0, 4.0]]) * info[p].rt
            info[p].g[:2, 2] = qd.Vector([5.0, 6.0])
            info[p].g[2, :2] = qd.Vector([7.0, 8.0]) * p
            info[p].g[2, 2] = info[p].g[0, :].sum()

    arr = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    want = arr.copy()
    k(arr, 1)
    want[:, :, 0] = want[:, :, 2] * 2
    want[:, 1, 1:] = [-1, -2]
    np.testing.assert_array_equal(arr, want)
    g = info.g.to_numpy()
    for p in range(2):
        exp = np.array([[2, 4, 5], [6, 8, 6], [7 * p, 8 * p, 11]], np.float32)
        np.testing.assert_array_equal(g[p], exp)


@pytest.mark.usefixtures("_qd")
def test_tuple_conditional_expression_as_index_and_value():
    pair = qd.field(qd.i32, shape=(4, 4))
    out = qd.field(qd.f32, shape=8)
    pair.from_numpy(np.arange(16, dtype=np.int32).reshape(4, 4) * 3)

    @qd.kernel
    def k(ga: qd.i32, gb: qd.i32, pairs: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        # narrowphase.py: collision_pair_idx[(i_gb, i_ga) if i_ga > i_gb else (i_ga, i_gb)]
        out[0] = pair[(gb, ga) if ga > gb else (ga, gb)]
        out[7] = pairs[(gb, ga) if ga > gb else (ga, gb)]
        m = qd.Matrix([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        out[1] = m[(gb, 0) if ga > gb else (ga, 2)]
        i, j = (ga, gb) if ga < gb else [gb, ga]  # unpacked; a list branch too
        out[2] = i * 10 + j
        t = (gb, 1.5) if ga > gb else (ga, gb)  # entries take their promoted type
        out[3] = t[1]
        u = (pair[ga, gb], gb) if ga > gb else (gb, pair[gb, ga])  # loads run only in the branch taken
        out[4] = u[0] - u[1]
        w = ((1, 2), (3, ga)) if ga > gb else ((5, 6), (7, 8))  # rows of scalars: a matrix
        out[5] = w[1, 1] + w[0, 1]
        z = qd.Vector([ga, gb]) if ga > gb else 7  # a scalar branch is broadcast
        out[6] = z[0] + z[1]

    arr = np.arange(16, dtype=np.int32).reshape(4, 4) * 5
    for ga, gb in ((3, 1), (1, 2)):
        k(ga, gb, arr)
        lo, hi = min(ga, gb), max(ga, gb)
        p = np.arange(16).reshape(4, 4) * 3
        m = np.arange(1.0, 10.0).reshape(3, 3)
        t1 = 1.5 if ga > gb else gb
        u = (p[ga, gb], gb) if ga > gb else (gb, p[gb, ga])
        w = np.array([[1, 2], [3, ga]]) if ga > gb else np.array([[5, 6], [7, 8]])
        z = ga + gb if ga > gb else 14
        want = [p[lo, hi], m[gb, 0] if ga > gb else m[ga, 2], lo * 10 + hi, t1, u[0] - u[1], w[1, 1] + w[0, 1], z,
                arr[lo, hi]]
        np.testing.assert_array_equal(out.to_numpy(), np.array(want, np.float32))


@pytest.mark.usefixtures("_qd")
def test_vector_conditional_expression_promotes_dtypes():
    out = qd.Vector.field(2, qd.f32, shape=2)

    @qd.kernel
    def k(c: qd.i32):
        a = qd.Vector([1, 2])
        b = qd.Vector([0.5, 0.25])
        out[0] = a if c > 0 else b  # cheap branches: a select
        out[1] = (a if c > 0 else b * out[0][0]) / 4  # a load in a branch: an `if`, f32 locals, not i32

    k(0)
    np.testing.assert_array_equal(out.to_numpy(), [[0.5, 0.25], [0.5 * 0.5 / 4, 0.25 * 0.5 / 4]])
    k(1)
    np.testing.assert_array_equal(out.to_numpy(), [[1, 2], [0.25, 0.5]])


@pytest.mark.usefixtures("_qd")
def test_slice_gradients():
    x = qd.field(qd.f32, shape=6, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k(q: qd.i32):
        m = qd.Matrix([[x[0], x[1], x[2]], [x[3], x[4], x[5]]])
        r = m[q, :]
        c = m[:, 1]
        m[1 - q, 1:] = qd.Vector([2.0, 3.0]) * c[0]
        loss[None] += r.dot(r) + m[1 - q, :].sum()

    x.from_numpy(np.arange(1.0, 7.0, dtype=np.float32))
    with qd.ad.Tape(loss=loss):
        k(1)
    xs = np.arange(1.0, 7.0)
    # loss = x3^2 + x4^2 + x5^2 + x0 + 5 * x1
    np.testing.assert_allclose(x.grad.to_numpy(), [1, 5, 0, 2 * xs[3], 2 * xs[4], 2 * xs[5]])


# ------------------------------------------------------------------ errors (the frontend's, on the interpreter)

@pytest.fixture
def _interp():
    qd.init(arch=qd.interp)
    yield
    qd.reset()


def _raises(cls: type, kernel, what: str, line_text: str, *args) -> None:
    with pytest.raises(cls) as e:
        kernel(*args)
    msg = str(e.value)
    assert msg.startswith(HERE + ":"), msg
    assert line_text in msg, msg
    assert what in msg, msg


@pytest.mark.usefixtures("_interp")
def test_index_errors():
    @qd.kernel
    def neg():
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        m[-1, :] = 0.0

    @qd.kernel
    def past():
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        print(m[:, 2])

    @qd.kernel
    def runtime_bound(q: qd.i32):
        v = qd.Vector([1.0, 2.0, 3.0])
        print(v[q:q + 2])

    @qd.kernel
    def step0():
        v = qd.Vector([1.0, 2.0, 3.0])
        print(v[::0])

    @qd.kernel
    def float_index():
        v = qd.Vector([1.0, 2.0, 3.0])
        print(v[1.0])

    @qd.kernel
    def too_many():
        v = qd.Vector([1.0, 2.0, 3.0])
        print(v[0, :])

    @qd.kernel
    def float_runtime(x: qd.f32):
        m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]])
        print(m[x, :])

    _raises(QuadrantsSyntaxError, neg, "Negative indices are not supported", "m[-1, :] = 0.0")
    _raises(QuadrantsSyntaxError, past, "index 2 out of range for axis 1", "print(m[:, 2])")
    _raises(QuadrantsSyntaxError, runtime_bound, "variables in slice now", "print(v[q:q + 2])", 0)
    _raises(QuadrantsSyntaxError, step0, "step 0", "print(v[::0])")
    _raises(QuadrantsTypeError, float_index, "must be an integer or a slice", "print(v[1.0])")
    _raises(QuadrantsIndexError, too_many, "Expected 1 indices, got 2", "print(v[0, :])")
    _raises(QuadrantsTypeError, float_runtime, "must be an integer, got f32", "print(m[x, :])", 1.0)


@pytest.mark.usefixtures("_interp")
def test_store_shape_errors():
    @qd.kernel
    def short_row():
        m = qd.Matrix.zero(qd.f32, 3, 3)
        m[0, :] = qd.Vector([1.0, 2.0])

    @qd.kernel
    def flat_block():
        m = qd.Matrix.zero(qd.f32, 3, 3)
        m[:2, :2] = qd.Vector([1.0, 2.0, 3.0, 4.0])

    @qd.kernel
    def column_matrix(q: qd.i32):
        m = qd.Matrix.zero(qd.f32, 3, 3)
        m[:, q] = qd.Matrix([[1.0], [2.0], [3.0]])

    _raises(QuadrantsTypeError, short_row, "shape (2,) to a place of shape (3,)", "m[0, :] = qd.Vector([1.0, 2.0])")
    _raises(QuadrantsTypeError, flat_block, "shape (4,) to a place of shape (2, 2)", "m[:2, :2] = qd.Vector(")
    _raises(QuadrantsTypeError, column_matrix, "shape (3, 1) to a place of shape (3,)", "m[:, q] = qd.Matrix(", 0)


@pytest.mark.usefixtures("_interp")
def test_conditional_expression_errors():
    f = qd.field(qd.i32, shape=(4, 4))
    g = qd.field(qd.i32, shape=(4, 4))

    @qd.kernel
    def lengths(a: qd.i32, b: qd.i32):
        print(f[(b, a, 1) if a > b else (a, b)])

    @qd.kernel
    def shapes(a: qd.i32):
        t = qd.Matrix([[1, 2], [3, 4]]) if a > 0 else qd.Vector([1, 2, 3, 4])
        print(t)

    @qd.kernel
    def vectors(a: qd.i32):
        v = qd.Vector([1.0, 2.0])
        t = (v, v) if a > 0 else (v, v * 2.0)
        print(t[0])

    @qd.kernel
    def mixed(a: qd.i32):
        t = ((a, 1), 2) if a > 0 else ((1, a), 3)
        print(t[1])

    @qd.kernel
    def field_branch(a: qd.i32):
        print((f if a > 0 else g)[0, 0])

    @qd.kernel
    def vector_condition(a: qd.i32):  # Quadrants': entry by entry is qd.select's
        v = qd.Vector([a, -a])
        print(0.0 if v > 0 else v)

    @qd.kernel
    def select_shapes(a: qd.i32):
        print(qd.select(a > 0, qd.Vector([1.0, 2.0, 3.0]), qd.Vector([1.0, 2.0])))

    _raises(QuadrantsTypeError, lengths, "different shapes: (3,) and (2,)", "print(f[(b, a, 1) if", 1, 0)
    _raises(QuadrantsTypeError, shapes, "different shapes: (2, 2) and (4,)", "t = qd.Matrix([[1, 2]", 1)
    _raises(QuadrantsTypeError, vectors, "a tuple holding a vector of shape (2,)", "t = (v, v) if a > 0", 1)
    _raises(QuadrantsTypeError, mixed, "mixing tuples and scalars", "t = ((a, 1), 2) if", 1)
    _raises(QuadrantsTypeError, field_branch, "qd.static(condition)", "print((f if a > 0 else g)[0, 0])", 1)
    _raises(QuadrantsTypeError, select_shapes, "must have one shape", "print(qd.select(a > 0", 1)
    _raises(QuadrantsSyntaxError, vector_condition, 'Please use "qd.select" instead', "print(0.0 if v > 0", 1)
