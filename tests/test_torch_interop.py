"""torch interop: `from_torch` / `to_torch` on fields and ndarrays, CPU tensors as kernel ndarray
arguments (writes land in the tensor), vector ndarrays from torch, and the torch <-> qd dtype mapping.

Skipped, with the reason, when torch is not installed (`bash dev.sh test` installs a CPU build).
"""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.base.arch import Arch

torch = pytest.importorskip("torch", reason="torch is not installed (bash dev.sh test installs a CPU build)")

DTYPES = [(torch.float16, qd.f16), (torch.float32, qd.f32), (torch.float64, qd.f64), (torch.int8, qd.i8),
          (torch.int16, qd.i16), (torch.int32, qd.i32), (torch.int64, qd.i64), (torch.uint8, qd.u8),
          (torch.uint16, qd.u16), (torch.uint32, qd.u32), (torch.uint64, qd.u64), (torch.bool, qd.u1)]


def _sample(td: "torch.dtype", shape: tuple[int, ...]) -> "torch.Tensor":
    g = torch.Generator().manual_seed(0)
    if td is torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if td.is_floating_point:
        return torch.randn(shape, generator=g).to(td)
    hi = 100 if td in (torch.int8, torch.uint8) else 30000
    lo = 0 if td in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -hi
    return torch.randint(lo, hi, shape, generator=g).to(td)


# ------------------------------------------------------------------ dtypes and host copies


@pytest.mark.parametrize("td,dt", DTYPES, ids=[str(d) for _, d in DTYPES])
def test_dtype_mapping(td: "torch.dtype", dt: qd.types.dtypes.DataType, qd_program: Arch) -> None:
    assert qd.types.dtypes.to_dtype(td) is dt
    f = qd.field(td, shape=3)
    assert f.dtype is dt
    assert f.to_torch().dtype is td
    assert qd.ndarray(td, shape=2).to_torch().dtype is td


def test_unsupported_torch_dtype_is_a_clear_error(qd_program: Arch) -> None:
    with pytest.raises(TypeError, match="bfloat16 is not a qd dtype"):
        qd.field(torch.bfloat16, shape=2)


@pytest.mark.parametrize("make", [qd.field, qd.ndarray], ids=["field", "ndarray"])
@pytest.mark.parametrize("td,dt", DTYPES, ids=[str(d) for _, d in DTYPES])
def test_roundtrip(make, td: "torch.dtype", dt: qd.types.dtypes.DataType, qd_program: Arch) -> None:
    x = make(dt, shape=(3, 5))
    t = _sample(td, (3, 5))
    g = x.generation
    x.from_torch(t)
    assert x.generation > g
    back = x.to_torch()
    assert back.dtype is td and back.shape == (3, 5) and back.device.type == "cpu"
    assert torch.equal(back, t)
    np.testing.assert_array_equal(x.to_numpy(), t.numpy())


def test_to_torch_is_a_copy_and_from_torch_casts(qd_program: Arch) -> None:
    x = qd.field(qd.f32, shape=4)
    x.from_torch(torch.arange(4, dtype=torch.float64) / 4)  # f64 -> f32
    t = x.to_torch()
    t += 100
    assert x.to_numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    y = qd.field(qd.i32, shape=4)
    y.from_torch(torch.tensor([1.9, -1.9, 2.5, 0.0]))  # float -> int truncates (C cast)
    assert y.to_numpy().tolist() == [1, -1, 2, 0]


def test_from_torch_detaches_and_accepts_views(qd_program: Arch) -> None:
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    x = qd.field(qd.f32, shape=(4, 3))
    x.from_torch(w.t())  # a non-contiguous view of a tensor that requires grad
    np.testing.assert_array_equal(x.to_numpy(), w.detach().numpy().T)
    y = qd.ndarray(qd.f32, shape=2)
    y.from_torch(w[1, 2:])  # a view at a storage offset
    assert y.to_numpy().tolist() == [6.0, 7.0]


def test_from_torch_shape_mismatch(qd_program: Arch) -> None:
    x = qd.field(qd.f32, shape=(2, 3))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        x.from_torch(torch.zeros(3, 2))
    v = qd.Vector.ndarray(3, qd.f32, shape=2)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(2,\)"):
        v.from_torch(torch.zeros(2))


def test_vector_and_matrix_from_torch(qd_program: Arch) -> None:
    v = qd.Vector.ndarray(3, qd.f32, shape=4)
    t = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    v.from_torch(t)
    assert v[1].to_list() == [3.0, 4.0, 5.0]
    assert torch.equal(v.to_torch(), t)
    m = qd.Matrix.field(2, 2, qd.i32, shape=3)
    mt = torch.arange(12, dtype=torch.int32).reshape(3, 2, 2)
    m.from_torch(mt)
    assert m[2].to_list() == [[8, 9], [10, 11]]
    assert torch.equal(m.to_torch(), mt)


def test_zero_d_field(qd_program: Arch) -> None:
    s = qd.field(qd.i64, shape=())
    s.from_torch(torch.tensor(7, dtype=torch.int64))
    assert s[None] == 7
    t = s.to_torch()
    assert t.shape == () and t.item() == 7


def test_to_torch_device_argument(qd_program: Arch) -> None:
    x = qd.field(qd.f32, shape=2)
    x.fill(3.0)
    t = x.to_torch(device="cpu")
    assert t.device.type == "cpu" and t.tolist() == [3.0, 3.0]


# ------------------------------------------------------------------ tensors as kernel arguments


def test_kernel_writes_land_in_tensor(arch: Arch) -> None:
    @qd.kernel
    def saxpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x = torch.arange(8, dtype=torch.float32)
    y = torch.ones(8)
    saxpy(x, y, 2.0)
    assert y.tolist() == [1.0 + 2.0 * i for i in range(8)]
    assert x.tolist() == list(range(8))


def test_kernel_on_tensor_views_and_requires_grad(arch: Arch) -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 2)):
        for i, j in a:
            a[i, j] = i * 10 + j

    base = torch.zeros(4, 3, dtype=torch.int32)
    k(base.t())  # non-contiguous: copied in, written back
    assert base.t().tolist() == [[i * 10 + j for j in range(4)] for i in range(3)]
    rows = torch.zeros(5, 3, dtype=torch.int32)
    k(rows[2:])  # contiguous at a storage offset: written in place
    assert rows[:2].eq(0).all() and rows[2:].tolist() == [[i * 10 + j for j in range(3)] for i in range(3)]

    @qd.kernel
    def scale(a: qd.types.ndarray(qd.f32, 1)):
        for i in a:
            a[i] *= 2.0

    w = torch.ones(3, requires_grad=True)
    scale(w)
    assert w.detach().tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("td,dt", [d for d in DTYPES if d[1] is not qd.u1], ids=[str(d) for _, d in DTYPES
                                                                                   if d is not qd.u1])
def test_kernel_tensor_dtypes(td: "torch.dtype", dt: qd.types.dtypes.DataType, arch: Arch) -> None:
    @qd.kernel
    def inc(a: qd.types.ndarray(), b: qd.types.ndarray()):
        for i in a:
            b[i] = a[i] + a[i]

    a = _sample(td, (16,))
    b = torch.zeros(16, dtype=td)
    inc(a, b)
    np.testing.assert_array_equal(b.numpy(), a.numpy() + a.numpy(), strict=True)  # torch lacks add for u16+
    assert inc._last_ir.args[0].dtype is dt


def test_kernel_tensor_dtype_mismatch_is_an_error(arch: Arch) -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, 1)):
        for i in a:
            a[i] = 1.0

    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="expected an ndarray of dtype f32, got f64"):
        k(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="expected ndim 1, got ndim 2"):
        k(torch.zeros(3, 2))


def test_kernel_vector_ndarray_from_tensor(arch: Arch) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.math.vec3, ndim=1), n: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = x[i] * 2.0 + qd.Vector([0.0, 1.0, 2.0])
            n[i] = x[i].sum()

    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    want = x * 2 + torch.tensor([0.0, 1.0, 2.0])
    n = torch.zeros(4)
    k(x, n)
    assert torch.equal(x, want)
    assert torch.equal(n, want.sum(1))
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="element shape"):
        k(torch.zeros(4, 2), n)


def test_tensor_and_qd_ndarray_share_an_instance(arch: Arch) -> None:
    @qd.kernel
    def fill(a: qd.types.ndarray(qd.i32, 1), v: qd.i32):
        for i in a:
            a[i] = v + i

    t = torch.zeros(3, dtype=torch.int32)
    nd = qd.ndarray(qd.i32, shape=3)
    fill(t, 5)
    fill(nd, 7)
    assert t.tolist() == [5, 6, 7] and nd.to_numpy().tolist() == [7, 8, 9]
    assert len(fill._instances) == 1
    nd.from_torch(t)
    assert nd.to_torch().tolist() == [5, 6, 7]


# ------------------------------------------------------------------ CUDA tensors on qd.cuda: used in place


def _cuda_tensors() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")


@pytest.mark.archs("cuda")
def test_cuda_tensor_round_trip_copies_nothing(arch: Arch) -> None:
    """torch -> qd kernel -> torch on one device: the kernel reads and writes the tensors' own memory (their
    addresses are the buffers the launch binds) and torch's stream sees the result without a sync."""
    _cuda_tensors()
    from qd.runtime import device_launch

    @qd.kernel
    def axpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in x:
            y[i] = a * x[i] + y[i]

    n = 1 << 16
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    bound: list = []
    real = device_launch._ctx_values

    def spy(st, k, lb, *rest):  # noqa: ANN001, ANN002  the device addresses the launch binds
        bound.extend(buf.address for buf in lb.bufs.values())
        return real(st, k, lb, *rest)

    device_launch._ctx_values = spy
    try:
        pointers = (x.data_ptr(), y.data_ptr())
        axpy(x, y, 2.0)
        z = y * 1  # torch's own work on its stream, ordered after the launch
    finally:
        device_launch._ctx_values = real
    assert (x.data_ptr(), y.data_ptr()) == pointers and set(pointers) <= set(bound)
    torch.testing.assert_close(z.cpu(), 2 * torch.arange(n, dtype=torch.float32) + 1)


@pytest.mark.archs("cuda")
def test_cuda_tensor_gradients_in_place(arch: Arch) -> None:
    _cuda_tensors()

    @qd.kernel
    def square(x: qd.types.ndarray(qd.f32, 1), out: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            out[i] = x[i] * x[i]

    x = torch.linspace(-1, 1, 100, device="cuda", requires_grad=True)
    out = torch.zeros(100, device="cuda", requires_grad=True)
    square(x, out)
    out.grad = torch.ones(100, device="cuda")
    square.grad(x, out)
    qd.sync()
    torch.testing.assert_close(x.grad, 2 * x.detach())


@pytest.mark.archs("cuda")
def test_to_torch_without_copy_shares_the_device_copy(arch: Arch) -> None:
    """`to_torch(copy=False)` on qd.cuda: a CUDA tensor over the ndarray's device memory. Writes from either
    side are seen by the other in program order (qd's stream is ordered with torch's default stream), host
    reads and writes stay right, and the round trip torch -> qd kernel -> torch copies nothing."""
    _cuda_tensors()
    from qd.runtime import device

    @qd.kernel
    def scale(x: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in x:
            x[i] = a * x[i] + 1.0

    n = 1 << 12
    x = qd.ndarray(qd.f32, (n,))
    x.from_numpy(np.arange(n, dtype=np.float32))
    scale(x, 2.0)
    t = x.to_torch(copy=False)
    assert t.is_cuda and t.data_ptr() == device.current().mirror_of(x).buf.address
    want = 2 * np.arange(n, dtype=np.float32) + 1
    torch.testing.assert_close(t.cpu(), torch.from_numpy(want))
    t.mul_(3)  # torch writes the device copy: the next launch and host reads see it
    want = want * 3
    for _ in range(5):
        scale(x, 0.5)
        want = np.float32(0.5) * want + 1
    torch.testing.assert_close((t + 0).cpu(), torch.from_numpy(want))  # torch reads after qd's launches
    np.testing.assert_array_equal(x.to_numpy(), want)
    x[7] = -1.0
    x.from_numpy(x.to_numpy() * 2)
    want[7] = -1.0
    want = want * 2
    torch.testing.assert_close(t.cpu(), torch.from_numpy(want))
    again = x.to_torch(copy=None)
    assert again.data_ptr() == t.data_ptr()
    assert x.to_torch().data_ptr() != t.data_ptr()  # copy=True (the default) copies


@pytest.mark.archs("cuda")
def test_to_torch_without_copy_under_a_layout(arch: Arch) -> None:
    """A tensor stored under a layout, shared with torch on qd.cuda: torch sees the canonical shape with the
    permuted strides over the device copy itself. Genesis' pattern: a torch write zeroes part of it, a kernel
    writes it, the next kernel reads it; nothing is lost and nothing stale comes back (a CPU view here once made
    every launch upload the stale host copy over the previous kernel's writes)."""
    _cuda_tensors()
    from qd.runtime import device

    a = qd.tensor(qd.f32, shape=(6, 4), layout=(1, 0))
    b = qd.tensor(qd.f32, shape=(6, 4))
    a.from_numpy(np.full((6, 4), 5.0, np.float32))

    @qd.kernel
    def write(a: qd.Tensor):
        for i, j in qd.ndrange(6, 4):
            a[i, j] += i * 10.0 + j

    @qd.kernel
    def read(a: qd.Tensor, b: qd.Tensor):
        for i, j in qd.ndrange(6, 4):
            b[i, j] = 2.0 * a[i, j]

    t = a.to_torch(copy=False)
    assert t.is_cuda and tuple(t.shape) == (6, 4) and t.stride() == (1, 6)
    assert t.data_ptr() == device.current().mirror_of(a._impl).buf.address
    t[:, 1:3] = 0.0  # torch writes the device copy
    want = np.full((6, 4), 5.0, np.float32)
    want[:, 1:3] = 0.0
    want += np.add.outer(np.arange(6) * 10.0, np.arange(4)).astype(np.float32)
    write(a)
    read(a, b)
    np.testing.assert_array_equal(a.to_numpy(), want)
    np.testing.assert_array_equal(b.to_numpy(), 2 * want)
    torch.testing.assert_close(t.cpu(), torch.from_numpy(want))


def test_to_torch_device_without_copy_on_a_cpu_arch(qd_program: Arch) -> None:
    """The data is in CPU memory: a tensor on another device needs a copy (copy=False refuses; None copies)."""
    x = qd.ndarray(qd.f32, (4,))
    x.fill(3.0)
    with pytest.raises(ValueError, match="without a copy"):
        x.to_torch(device="meta", copy=False)
    t = x.to_torch(device="meta", copy=None)
    assert t.device.type == "meta" and tuple(t.shape) == (4,)


@pytest.mark.archs("cuda")
def test_to_torch_without_copy_of_a_field(arch: Arch) -> None:
    """A field shared with torch: torch's writes are what host reads give."""
    _cuda_tensors()
    f = qd.field(qd.i32, shape=(3, 4))
    f.fill(2)
    tf = f.to_torch(copy=False)
    assert tf.shape == (3, 4) and tf.is_cuda
    tf[1, 2] = 9
    assert f[1, 2] == 9 and f.to_numpy().sum() == 2 * 11 + 9
