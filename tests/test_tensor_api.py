"""The unified tensor API (`qd.tensor`, `qd.Tensor`, `qd.Backend`, `layout=`) against numpy, on every tier."""

import itertools
import pickle

import numpy as np
import pytest

import qd

BACKENDS = [qd.Backend.FIELD, qd.Backend.NDARRAY]
LAYOUTS_2D = [None, (0, 1), (1, 0)]
LAYOUTS_3D = list(itertools.permutations(range(3)))


def _physical(shape, layout):
    return tuple(shape) if layout is None else tuple(shape[a] for a in layout)


# ------------------------------------------------------------------ factory and wrapper surface


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_factory_backend_and_surface(arch, backend):
    t = qd.tensor(qd.f32, shape=(4, 5), backend=backend)
    assert isinstance(t, qd.Tensor)
    impl = t._unwrap()
    assert isinstance(impl, qd.Field if backend is qd.Backend.FIELD else qd.Ndarray)
    assert t.shape == (4, 5) and t.dtype is qd.f32 and t.layout is None
    t.fill(2.5)
    np.testing.assert_array_equal(t.to_numpy(), np.full((4, 5), 2.5, np.float32))
    t[1, 2] = 7
    assert t[1, 2] == 7.0
    other = qd.tensor(qd.f32, shape=(4, 5), backend=backend)
    other.copy_from(t)
    np.testing.assert_array_equal(other.to_numpy(), t.to_numpy())
    assert qd.wrap(impl)._unwrap() is impl


def test_default_backend_is_ndarray(arch):
    assert isinstance(qd.tensor(qd.i32, shape=3)._unwrap(), qd.Ndarray)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_vector_matrix_tensors(arch, backend):
    v = qd.Vector.tensor(3, qd.f32, shape=(4,), backend=backend)
    m = qd.Matrix.tensor(2, 2, qd.f32, shape=(3,), backend=backend)
    assert isinstance(v, qd.VectorTensor) and v.element_shape == (3,) and v.shape == (4,)
    assert isinstance(m, qd.MatrixTensor) and m.element_shape == (2, 2) and m.shape == (3,)

    @qd.kernel
    def fill(v: qd.Tensor, m: qd.Tensor):
        for i in range(4):
            v[i] = qd.Vector([i, i + 1, i + 2])
        for i in range(3):
            m[i] = qd.Matrix([[i, 1], [2, i * 3]])

    fill(v, m)
    np.testing.assert_array_equal(v.to_numpy(), np.arange(4)[:, None] + np.arange(3)[None, :])
    want = np.array([[[i, 1], [2, 3 * i]] for i in range(3)], np.float32)
    np.testing.assert_array_equal(m.to_numpy(), want)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("layout", [None, (1, 0)])
def test_pickle_round_trip(arch, backend, layout):
    a = qd.tensor(qd.f32, shape=(3, 4), backend=backend, layout=layout)
    a.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, qd.Tensor) and b.shape == (3, 4) and b.layout == layout
    np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())
    v = qd.Vector.tensor(2, qd.i32, shape=(3,), backend=backend)
    v.from_numpy(np.arange(6, dtype=np.int32).reshape(3, 2))
    w = pickle.loads(pickle.dumps(v))
    assert isinstance(w, qd.VectorTensor)
    np.testing.assert_array_equal(w.to_numpy(), v.to_numpy())


# ------------------------------------------------------------------ layouts


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("layout", LAYOUTS_2D, ids=str)
def test_layout_2d_kernel_and_host(arch, backend, layout):
    a = qd.tensor(qd.i32, shape=(3, 4), backend=backend, layout=layout)
    assert a.shape == (3, 4)
    assert a.layout == (None if layout == (0, 1) else layout)
    assert a._unwrap().arr.shape == _physical((3, 4), layout)

    @qd.kernel
    def fill(x: qd.Tensor):
        for i, j in qd.ndrange(x.shape[0], x.shape[1]):
            x[i, j] = i * 10 + j

    fill(a)
    want = np.arange(3)[:, None] * 10 + np.arange(4)[None, :]
    np.testing.assert_array_equal(a.to_numpy(), want)
    # the storage really is permuted: its transpose back to canonical order is the data
    phys = a._unwrap().arr
    np.testing.assert_array_equal(phys, want if layout in (None, (0, 1)) else want.T)
    assert a[2, 1] == 21
    a[0, 3] = -5
    want[0, 3] = -5

    @qd.kernel
    def total(x: qd.Tensor) -> qd.i32:
        s = 0
        for i, j in x:
            s += x[i, j] * (i + 1)
        return s

    assert total(a) == int((want * (np.arange(3)[:, None] + 1)).sum())


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("layout", LAYOUTS_3D, ids=str)
def test_layout_3d_kernel_and_host(arch, backend, layout):
    shape = (2, 3, 4)
    a = qd.tensor(qd.f32, shape=shape, backend=backend, layout=layout)
    assert a.shape == shape
    assert a._unwrap().arr.shape == _physical(shape, layout)
    src = np.arange(24, dtype=np.float32).reshape(shape)
    a.from_numpy(src)
    np.testing.assert_array_equal(a._unwrap().arr, src.transpose(layout))
    out = qd.tensor(qd.f32, shape=shape, backend=backend, layout=layout[::-1])

    @qd.kernel
    def scale(x: qd.Tensor, y: qd.Tensor):
        for i, j, k in qd.ndrange(*x.shape):
            y[i, j, k] = x[i, j, k] * 2 + i * 100 + j * 10 + k
            x[i, j, k] += 1

    scale(a, out)
    idx = np.indices(shape)
    np.testing.assert_array_equal(out.to_numpy(), src * 2 + idx[0] * 100 + idx[1] * 10 + idx[2])
    np.testing.assert_array_equal(a.to_numpy(), src + 1)
    assert a[1, 2, 3] == src[1, 2, 3] + 1


@pytest.mark.parametrize("layout", [(1, 0), (2, 0, 1)], ids=str)
def test_layout_numpy_and_torch_interop(arch, layout):
    torch = pytest.importorskip("torch")
    shape = (2, 3, 4)[:len(layout)]
    a = qd.tensor(qd.f32, shape=shape, layout=layout)
    src = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    a.from_torch(torch.from_numpy(src))
    t = a.to_torch()
    assert tuple(t.shape) == shape
    np.testing.assert_array_equal(t.numpy(), src)
    if not getattr(arch, "is_gpu", False):  # the host storage is the data: a canonical view sharing it
        view = a.to_numpy(copy=False)
        view[(0,) * len(shape)] = 42.0
        assert a[(0,) * len(shape)] == 42.0
    else:  # the device copy is: no CPU view shares it (tests/test_gpu_runtime.py)
        with pytest.raises(ValueError, match="device memory"):
            a.to_numpy(copy=False)
    with pytest.raises(ValueError):  # host copies take the canonical shape, never the physical one
        a.from_numpy(np.zeros(_physical(shape, layout), np.float32))


def test_layouts_compile_separate_instances(arch):
    @qd.kernel
    def fill(x: qd.Tensor):
        for i, j in qd.ndrange(2, 3):
            x[i, j] = i * 10 + j

    tensors = [qd.tensor(qd.i32, shape=(2, 3), layout=lay) for lay in (None, (1, 0), None)]
    tensors.append(qd.tensor(qd.i32, shape=(2, 3), backend=qd.Backend.FIELD))
    for t in tensors:
        fill(t)
        np.testing.assert_array_equal(t.to_numpy(), [[0, 1, 2], [10, 11, 12]])
    assert len(fill._instances) == 3  # ndarray canonical, ndarray (1, 0), the field


def test_field_order_is_a_layout(arch):
    f = qd.field(qd.i32, shape=(2, 3), order="ji")
    assert f.layout == (1, 0) and f.arr.shape == (3, 2)

    @qd.kernel
    def fill():
        for i, j in f:
            f[i, j] = i * 10 + j

    fill()
    np.testing.assert_array_equal(f.to_numpy(), [[0, 1, 2], [10, 11, 12]])


# ------------------------------------------------------------------ kernel parameters


def test_tensor_annotation_accepts_both_backends_and_bare_impls(arch):
    @qd.kernel
    def fill(x: qd.Tensor, v: qd.f32):
        for i in range(x.shape[0]):
            x[i] = v + i

    for backend in BACKENDS:
        t = qd.tensor(qd.f32, shape=(4,), backend=backend)
        fill(t, 1.0)
        np.testing.assert_array_equal(t.to_numpy(), [1, 2, 3, 4])
        fill(t._unwrap(), 2.0)
        np.testing.assert_array_equal(t.to_numpy(), [2, 3, 4, 5])


def test_wrapper_where_ndarray_or_template_expected(arch):
    @qd.kernel
    def nd(x: qd.types.ndarray()):
        for i in range(x.shape[0]):
            x[i] = i * 2

    @qd.kernel
    def tp(x: qd.template()):
        for i in x:
            x[i] += 1

    a = qd.tensor(qd.i32, shape=(3,))
    b = qd.tensor(qd.i32, shape=(3,), backend=qd.Backend.FIELD)
    nd(a)
    tp(b)
    tp(b)
    np.testing.assert_array_equal(a.to_numpy(), [0, 2, 4])
    np.testing.assert_array_equal(b.to_numpy(), [2, 2, 2])


def test_tensor_param_none_and_func(arch):
    @qd.func
    def put(x: qd.Tensor, i: qd.i32, v: qd.f32):
        x[i] = v

    @qd.kernel
    def k(x: qd.Tensor, y: qd.Tensor):
        for i in range(3):
            put(x, i, i * 1.5)
            if qd.static(y is not None):
                y[i] = x[i] * 2

    x = qd.tensor(qd.f32, shape=(3,))
    y = qd.tensor(qd.f32, shape=(3,), backend=qd.Backend.FIELD)
    k(x, None)
    np.testing.assert_array_equal(x.to_numpy(), [0, 1.5, 3])
    k(x, y)
    np.testing.assert_array_equal(y.to_numpy(), [0, 3, 6])


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@pytest.mark.parametrize("layout", [None, (1, 0)], ids=str)
def test_grad_through_tensor_argument(arch, backend, layout):
    x = qd.tensor(qd.f32, shape=(2, 3), backend=backend, layout=layout, needs_grad=True)
    loss = qd.tensor(qd.f32, shape=(), backend=qd.Backend.FIELD, needs_grad=True)
    src = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    x.from_numpy(src)
    assert x.grad.shape == (2, 3) and x.grad.layout == x.layout

    @qd.kernel
    def f(x: qd.Tensor, loss: qd.Tensor):
        for i, j in x:
            loss[None] += x[i, j] * x[i, j] * (i + 2 * j + 1)

    w = np.arange(2)[:, None] + 2 * np.arange(3)[None, :] + 1
    with qd.ad.Tape(loss=loss._unwrap()):  # Tape takes the bare field (as in Quadrants)
        f(x, loss)
    assert loss[None] == pytest.approx(float((src * src * w).sum()))
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * src * w)


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_grad_written_in_kernel_with_layout(arch, backend):
    a = qd.tensor(qd.f32, shape=(3, 2), backend=backend, layout=(1, 0), needs_grad=True)

    @qd.kernel
    def write_grad(x: qd.Tensor):
        for i, j in qd.ndrange(3, 2):
            x.grad[i, j] = i * 100.0 + j

    write_grad(a)
    np.testing.assert_array_equal(a.grad.to_numpy(), np.arange(3)[:, None] * 100 + np.arange(2)[None, :])
    assert a.grad is a.grad and a.has_grad()


def test_grad_placeholders(arch):
    f = qd.tensor(qd.f32, shape=(4,), backend=qd.Backend.FIELD)
    n = qd.tensor(qd.f32, shape=(4,))
    assert f.grad is not None and not f.has_grad()
    assert n.grad is None and not n.has_grad()


# ------------------------------------------------------------------ errors


def test_errors(arch):
    with pytest.raises(ValueError, match="not a valid qd.Backend"):
        qd.tensor(qd.f32, shape=(4,), backend=7)
    with pytest.raises(ValueError, match="layout has 3 entries"):
        qd.tensor(qd.f32, shape=(4, 5), layout=(0, 1, 2))
    with pytest.raises(ValueError, match="not a permutation"):
        qd.tensor(qd.f32, shape=(4, 5), layout=(0, 0))
    with pytest.raises(TypeError, match="layout="):
        qd.tensor(qd.f32, shape=(4, 5), order="ji")
    with pytest.raises(TypeError, match="unexpected keyword"):
        qd.tensor(qd.f32, shape=(4,), offset=(1,))
    with pytest.raises(TypeError, match="unexpected keyword"):
        qd.Vector.tensor(3, qd.f32, shape=(4,), layout=(0,))
    with pytest.raises(TypeError, match="compound"):
        qd.tensor(qd.types.vector(3, qd.f32), shape=(4,), layout=(0,))
    nd = qd.ndarray(qd.f32, (4,))
    with pytest.raises(TypeError, match="qd.wrap"):
        qd.tensor(nd, shape=(4,))
    with pytest.raises(TypeError, match="requires an Ndarray or Field"):
        qd.Tensor(qd.wrap(nd))
    with pytest.raises(qd.QuadrantsRuntimeError, match="needs_grad"):
        qd.tensor(qd.i32, shape=(4,), needs_grad=True)
    with pytest.raises(TypeError, match="cross-backend"):
        qd.tensor(qd.f32, shape=(4,), backend=qd.Backend.FIELD).copy_from(qd.wrap(nd))
