"""Fields, ndarrays and the SNode tree against numpy: shapes, dtypes, copies, indexing, generations."""

import numpy as np
import pytest

import qd
from qd.types.dtypes import ALL

DTYPES = list(ALL)


@pytest.fixture(autouse=True)
def program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()


def _sample(dtype, shape):
    rng = np.random.default_rng(0)
    if dtype.bits == 1:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.np_dtype)
    info = np.iinfo(dtype.np_dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype.np_dtype, endpoint=True)


# ------------------------------------------------------------------ shapes and dtypes


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), 8, (6, 12), (2, 3, 4)])
def test_field_shape_dtype_storage(dtype, shape):
    x = qd.field(dtype, shape)
    want = shape if isinstance(shape, tuple) else (shape,)
    assert x.shape == want
    assert x.ndim == len(want)
    assert x.dtype is dtype
    assert x.elem_shape == ()
    assert x.arr.shape == want
    assert x.arr.dtype == dtype.np_dtype
    assert x.arr.flags.c_contiguous
    assert not x.arr.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_numpy(dtype):
    x = qd.field(dtype, (5, 7))
    a = _sample(dtype, (5, 7))
    x.from_numpy(a)
    b = x.to_numpy()
    assert b.dtype == dtype.np_dtype
    np.testing.assert_array_equal(a, b)
    b[0, 0] = 1  # a copy, not a view
    assert x.to_numpy()[0, 0] == a[0, 0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ndarray_roundtrip(dtype):
    x = qd.ndarray(dtype, (4, 3))
    a = _sample(dtype, (4, 3))
    x.from_numpy(a)
    np.testing.assert_array_equal(x.to_numpy(), a)
    y = qd.ndarray(dtype, (4, 3))
    y.copy_from(x)
    np.testing.assert_array_equal(y.to_numpy(), a)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_and_getitem(dtype):
    x = qd.field(dtype, 4)
    x.fill(1)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, dtype=dtype.np_dtype))
    assert x[2] == 1
    assert type(x[2]) in (int, float)


def test_from_numpy_casts_and_checks_shape():
    x = qd.field(qd.i32, (2, 3))
    x.from_numpy(np.full((2, 3), 2.7))
    assert (x.to_numpy() == 2).all()
    with pytest.raises(ValueError):
        x.from_numpy(np.zeros((3, 2)))
    with pytest.raises(ValueError):
        x.from_numpy(np.zeros(6))
    with pytest.raises(TypeError):
        x.from_numpy([[1, 2, 3], [4, 5, 6]])


def test_to_numpy_dtype():
    x = qd.field(qd.f32, 3)
    x.fill(1.5)
    out = x.to_numpy(dtype=np.float64)
    assert out.dtype == np.float64 and (out == 1.5).all()


def test_copy_from():
    x = qd.field(qd.f32, (2, 3))
    y = qd.field(qd.i32, (2, 3))
    y.fill(3)
    x.copy_from(y)
    assert (x.to_numpy() == 3).all()
    with pytest.raises(ValueError):
        x.copy_from(qd.field(qd.f32, (3, 2)))
    with pytest.raises(TypeError):
        x.copy_from(np.zeros((2, 3)))


def test_zero_d_field():
    x = qd.field(qd.f64, shape=())
    x[None] = 2.5
    assert x[None] == 2.5
    assert x[()] == 2.5
    assert x.to_numpy().shape == ()


def test_int_writes_wrap_and_u64():
    x = qd.field(qd.u64, shape=())
    x[None] = 2**64 - 1
    assert x[None] == 2**64 - 1
    y = qd.field(qd.i8, 2)
    y[0] = 200
    y[1] = -129
    assert y[0] == -56 and y[1] == 127
    z = qd.field(qd.i32, 1)
    z[0] = 3.9
    assert z[0] == 3


# ------------------------------------------------------------------ indexing


def test_index_bounds_and_types():
    x = qd.field(qd.i32, (2, 3))
    x[1, 2] = 7
    assert x[1, 2] == 7
    assert x[np.int32(1), np.int64(2)] == 7
    assert x[[1, 2]] == 7
    with pytest.raises(IndexError):
        x[2, 0]
    with pytest.raises(IndexError):
        x[-1, 0]
    with pytest.raises(IndexError):
        x[0, -1] = 1
    with pytest.raises(AssertionError, match="Slicing is not supported on qd.field"):
        x[0]
    with pytest.raises(TypeError, match="Detected illegal element of type"):
        x[0, :]


def test_offset_indexing():
    x = qd.field(qd.i32, shape=(4,), offset=(-2,))
    assert x.offset == (-2,)
    x[-2] = 5
    assert x.arr[0] == 5
    with pytest.raises(IndexError):
        x[2]
    x.from_numpy(np.arange(4, dtype=np.int32))
    assert x[1] == 3


def test_ndarray_index_count():
    a = qd.ndarray(qd.f32, (2, 2))
    with pytest.raises(IndexError):
        a[0]


def test_vector_field_elements():
    x = qd.Field(qd.f32, (4,), elem_shape=(3,))
    assert x.shape == (4,) and x.elem_shape == (3,) and x.arr.shape == (4, 3)
    assert x.n == 3 and x.m == 1
    x[1] = [1, 2, 3]
    np.testing.assert_array_equal(np.asarray(x.to_numpy()[1]), [1, 2, 3])
    v = x[1]
    assert [float(v[t]) for t in range(3)] == [1.0, 2.0, 3.0]
    x.fill(2)
    assert (x.to_numpy() == 2).all()
    with pytest.raises(ValueError):
        x[0] = [1, 2]
    m = qd.Field(qd.i32, 2, elem_shape=(2, 3))
    assert m.n == 2 and m.m == 3 and m.arr.shape == (2, 2, 3)
    nd = qd.Ndarray._from_elem(qd.f32, 5, (2,), needs_grad=True)
    assert nd.shape == (5,) and nd.arr.shape == (5, 2) and nd.grad.arr.shape == (5, 2)


def test_field_of_vector_type():
    x = qd.field(qd.types.vector(3, qd.f64), shape=(2,))
    assert x.dtype is qd.f64 and x.shape == (2,) and x.arr.shape == (2, 3)


def test_python_iteration_is_rejected():
    x = qd.field(qd.i32, 3)
    with pytest.raises(NotImplementedError, match="Struct for is only available"):
        for _ in x:
            pass


# ------------------------------------------------------------------ generation counters


def test_generation_bumps_on_every_write_path():
    for make in (lambda: qd.field(qd.f32, 3), lambda: qd.ndarray(qd.f32, 3)):
        x = make()
        other = make()
        writes = [
            lambda: x.fill(1.0),
            lambda: x.from_numpy(np.zeros(3, np.float32)),
            lambda: x.__setitem__(0, 2.0),
            lambda: x.copy_from(other),
        ]
        for w in writes:
            g = x.generation
            w()
            assert x.generation > g
        g = x.generation
        x.to_numpy()
        x[0]
        assert x.generation == g


def test_generation_bumps_from_torch():
    torch = pytest.importorskip("torch")
    x = qd.field(qd.f32, 3)
    g = x.generation
    x.from_torch(torch.ones(3))
    assert x.generation > g
    assert (x.to_torch() == 1).all()


# ------------------------------------------------------------------ SNodes


def test_dense_placement():
    x, y = qd.field(qd.f32), qd.field(qd.i32)
    with pytest.raises(qd.QuadrantsRuntimeError, match="not placed"):
        x.fill(1)
    with pytest.raises(qd.QuadrantsRuntimeError):
        x.shape
    qd.root.dense(qd.ij, (4, 5)).place(x, y)
    assert x.shape == (4, 5) and y.shape == (4, 5)
    assert x.snode.parent().shape == (4, 5)
    assert x.parent(2) == qd.root


def test_nested_dense():
    x = qd.field(qd.f32)
    qd.root.dense(qd.i, 4).dense(qd.j, 5).place(x)
    assert x.shape == (4, 5) and x.arr.shape == (4, 5)
    y = qd.field(qd.f32)
    qd.root.dense(qd.i, 4).dense(qd.i, 2).place(y)
    assert y.shape == (8,)
    z = qd.field(qd.f32)
    qd.root.dense(qd.j, 8).dense(qd.i, 16).place(z)
    assert z.shape == (16, 8)
    w = qd.field(qd.f32)
    qd.root.dense(qd.ij, 3).place(w)
    assert w.shape == (3, 3)


def test_root_place_zero_d_and_double_place():
    x = qd.field(qd.i32)
    qd.root.place(x)
    assert x.shape == ()
    x[None] = 3
    assert x[None] == 3
    with pytest.raises(qd.QuadrantsRuntimeError, match="already placed"):
        qd.root.dense(qd.i, 2).place(x)


def test_lazy_grad_and_dual():
    x, n = qd.field(qd.f32), qd.field(qd.i32)
    qd.root.dense(qd.i, 6).place(x, n)
    assert x.grad is not None and not x.has_grad() and n.grad is None
    qd.root.lazy_grad()
    assert x.has_grad() and x.grad.shape == (6,) and x.grad.dtype is qd.f32
    assert not x.has_dual()
    qd.root.lazy_dual()
    assert x.has_dual() and x.dual.shape == (6,)
    x.grad[1] = 2.0
    assert x.grad[1] == 2.0 and x[1] == 0.0


def test_needs_grad_and_snode_grad_type():
    SG = qd.types.enums.SNodeGradType
    x = qd.field(qd.f32, 4, needs_grad=True, needs_dual=True)
    assert x.has_grad() and x.has_dual()
    assert x.snode.ptr.get_snode_grad_type() == SG.PRIMAL
    assert x.grad.snode.ptr.get_snode_grad_type() == SG.ADJOINT
    assert x.dual.snode.ptr.get_snode_grad_type() == SG.DUAL
    assert x.snode.ptr.has_adjoint_checkbit() is False
    y = qd.field(qd.f64, needs_grad=True)
    qd.root.dense(qd.i, 3).place(y)
    assert y.grad.shape == (3,)
    with pytest.raises(RuntimeError, match="is not supported for field with `needs_grad=True`"):
        qd.field(qd.i32, 2, needs_grad=True)


def test_explicit_grad_place():
    x = qd.field(qd.f32)
    qd.root.dense(qd.i, 2).place(x, x.grad)
    assert x.has_grad() and x.grad.shape == (2,)


@pytest.mark.parametrize("kind", ["pointer", "bitmasked", "dynamic", "hash", "bit_struct", "quant_array"])
def test_sparse_snodes_rejected(kind):
    with pytest.raises(qd.QuadrantsRuntimeError, match=f"sparse SNode '{kind}' is not supported"):
        getattr(qd.root, kind)(qd.i, 10)
    with pytest.raises(qd.QuadrantsRuntimeError, match="dense SNodes only"):
        getattr(qd.root.dense(qd.i, 4), kind)(qd.j, 10)


def test_bad_shapes():
    with pytest.raises(qd.QuadrantsRuntimeError, match="should be positive"):
        qd.field(qd.f32, shape=0)
    with pytest.raises(qd.QuadrantsRuntimeError):
        qd.ndarray(qd.f32, (2, -1))


# ------------------------------------------------------------------ reset and printing


def test_reset_destroys_fields_and_ndarrays():
    x = qd.field(qd.f32, 3)
    a = qd.ndarray(qd.f32, 3)
    qd.reset()
    with pytest.raises(qd.QuadrantsRuntimeError, match="destroyed"):
        x[0]
    with pytest.raises(qd.QuadrantsRuntimeError, match="destroyed"):
        a.to_numpy()
    qd.init(arch=qd.interp, log_level="warn")
    y = qd.field(qd.f32)
    qd.root.dense(qd.i, 2).place(y)  # the new root is usable
    assert y.shape == (2,)


def test_str_repr_like_numpy():
    x = qd.field(qd.i32, 3)
    x.from_numpy(np.array([1, 2, 3], np.int32))
    assert str(x) == str(np.array([1, 2, 3]))
    assert "1, 2, 3" in repr(x)


def test_torch_absent_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("no torch")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    x = qd.field(qd.f32, 2)
    with pytest.raises(ImportError, match="need PyTorch"):
        x.to_torch()


def test_to_numpy_copy_and_keep_dims(qd_program: object) -> None:
    """Quadrants' to_numpy: copy=False shares the storage (and refuses a dtype change), an n x 1 matrix
    field comes back as (n,) unless keep_dims, a vector field as (n, 1) with keep_dims; from_numpy takes
    either form back."""
    f = qd.field(qd.f32, shape=4)
    v = f.to_numpy(copy=False)
    v[2] = 7.0
    assert f[2] == 7.0
    with pytest.raises(ValueError, match="without a copy"):
        f.to_numpy(dtype=np.float64, copy=False)
    m = qd.Matrix.field(3, 1, qd.f32, shape=2)
    m.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert m.to_numpy().shape == (2, 3) and m.to_numpy(keep_dims=True).shape == (2, 3, 1)
    np.testing.assert_array_equal(m.to_numpy(True)[..., 0], np.arange(6).reshape(2, 3))
    vec = qd.Vector.field(3, qd.f32, shape=2)
    assert vec.to_numpy().shape == (2, 3) and vec.to_numpy(keep_dims=True).shape == (2, 3, 1)
    nd = qd.Matrix.ndarray(3, 1, qd.f32, shape=2)
    assert nd.to_numpy().shape == (2, 3, 1)  # ndarrays keep the element shape


def test_host_out_of_bounds_is_index_and_assertion_error(qd_program: object) -> None:
    """Host `x[i]` out of range raises in every mode; the error is an IndexError (numpy's) and an
    AssertionError (what Quadrants raises in debug mode)."""
    x = qd.field(qd.f32, shape=3)
    for k in (3, -1):
        with pytest.raises(IndexError, match=f"index {k} is out of bounds"):
            x[k] = 1.0
        with pytest.raises(AssertionError):
            _ = x[k]


def test_scalar_and_matrix_field_classes_tell_fields_apart() -> None:
    """Quadrants' `isinstance(f, qd.MatrixField)` / `qd.ScalarField` (qd has one Field class underneath)."""
    s = qd.field(qd.f32, shape=2)
    v = qd.Vector.field(3, qd.f32, shape=2)
    m = qd.Matrix.field(2, 2, qd.f32, shape=1)
    assert [isinstance(f, qd.MatrixField) for f in (s, v, m)] == [False, True, True]
    assert [isinstance(f, qd.ScalarField) for f in (s, v, m)] == [True, False, False]
    assert all(isinstance(f, qd.Field) for f in (s, v, m)) and not isinstance(np.zeros(2), qd.ScalarField)
