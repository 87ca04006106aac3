"""Binding kernel arguments never writes where it must not and never takes a value it cannot keep, on every tier
(the GPU tiers copy numpy arguments in and back; the CPU tier's compiled launch plans bind them in C):

- a read-only numpy array (`flags.writeable` False, `bytes` memory) passed for an ndarray the kernel writes is
  refused, naming the parameter, the kernel's line and the fix; one the kernel only reads is accepted;
- an integer argument outside the 64-bit range of its parameter's signedness is refused (Quadrants' range);
  inside it, narrower dtypes keep the low bits, as Quadrants' C casts do;
- a numpy (or other library's) array passed for a `qd.template()` parameter is refused: its values would be
  baked into the instance and later changes never seen.
"""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsRuntimeTypeError
from qd.runtime import launch as _launch

HERE = __file__


def _line(text: str) -> int:
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@qd.kernel
def _store(x: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        x[i] = 7.0  # the store of _store


@qd.kernel
def _atomic(x: qd.types.ndarray(qd.i32, 1), n: qd.i32):
    for i in range(n):
        qd.atomic_max(x[i % x.shape[0]], i)  # the atomic of _atomic


@qd.kernel
def _copy(src: qd.types.ndarray(qd.f32, 1), dst: qd.types.ndarray(qd.f32, 1)):
    for i in range(src.shape[0]):
        dst[i] = src[i] * 2.0


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _refused(kernel_fn, args: tuple, name: str, kernel: str, line_text: str) -> None:
    with pytest.raises(QuadrantsRuntimeTypeError) as e:
        kernel_fn(*args)
    msg = str(e.value)
    assert f"Argument '{name}' of kernel {kernel}" in msg, msg
    assert f"{HERE}:{_line(line_text)}" in msg, msg
    assert f"{name}.copy()" in msg and f"np.require({name}, requirements='W')" in msg, msg


def test_read_only_array_the_kernel_writes_is_refused(arch):
    ones = np.ones(8, np.float32)
    _store(ones)  # a writeable array first: later calls of this shape may take the compiled plan
    _store(ones)
    np.testing.assert_array_equal(ones, np.full(8, 7.0, np.float32))
    plan = _store._plan
    launches = plan.launches if plan is not None else 0
    assert plan is not None or arch is not qd.cpu  # the CPU tier checks in its compiled plan too
    for _ in range(2):
        ro = _read_only(np.arange(8, dtype=np.float32))
        _refused(_store, (ro,), "x", "_store", "the store of _store")
        np.testing.assert_array_equal(ro, np.arange(8, dtype=np.float32))
        raw = bytes(np.arange(4, dtype=np.float32).tobytes())
        _refused(_store, (np.frombuffer(raw, np.float32),), "x", "_store", "the store of _store")
        assert raw == np.arange(4, dtype=np.float32).tobytes()
        strided = _read_only(np.arange(16, dtype=np.float32))[::2]  # non-contiguous: bound through a copy
        _refused(_store, (strided,), "x", "_store", "the store of _store")
        np.testing.assert_array_equal(strided, np.arange(0, 16, 2, dtype=np.float32))
    assert (plan.launches if plan is not None else 0) == launches
    qd.sync()


def test_read_only_array_an_atomic_writes_is_refused(arch):
    x = np.zeros(4, np.int32)
    _atomic(x, 10)
    qd.sync()
    np.testing.assert_array_equal(x, [8, 9, 6, 7])
    ro = _read_only(np.zeros(4, np.int32))
    _refused(_atomic, (ro, 10), "x", "_atomic", "the atomic of _atomic")
    np.testing.assert_array_equal(ro, np.zeros(4, np.int32))


def test_read_only_array_the_kernel_only_reads_is_accepted(arch):
    src = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), np.float32)
    assert not src.flags.writeable
    for _ in range(3):  # the Python path, then the plan where the tier has one
        dst = np.zeros(6, np.float32)
        _copy(src, dst)
        qd.sync()
        np.testing.assert_array_equal(dst, np.arange(6, dtype=np.float32) * 2)
    strided = _read_only(np.arange(12, dtype=np.float32))[::2]
    dst = np.zeros(6, np.float32)
    _copy(strided, dst)
    qd.sync()
    np.testing.assert_array_equal(dst, np.arange(0, 12, 2, dtype=np.float32) * 2)
    with pytest.raises(QuadrantsRuntimeTypeError, match="Argument 'dst' of kernel _copy"):
        _copy(src, _read_only(np.zeros(6, np.float32)))


def test_the_gradient_pass_counts_its_gradient_writes():
    """The reverse instance writes the gradients it is launched with: they are checked like the kernel's own
    writes (`check_writeable` over `written_args`, which holds every written ndarray launch arg)."""
    qd.init(arch=qd.interp, log_level="warn")
    try:
        @qd.kernel
        def double(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):
            for i in range(x.shape[0]):
                y[i] = x[i] * 2.0

        x = qd.ndarray(qd.f32, 4, needs_grad=True)
        y = qd.ndarray(qd.f32, 4, needs_grad=True)
        y.grad.from_numpy(np.ones(4, np.float32))
        double.grad(x, y)
        np.testing.assert_array_equal(x.grad.to_numpy(), np.full(4, 2.0, np.float32))
        ck = double._last_ck
        names = {ck.ir.args[a].name for a, _ in ck.written_args}
        assert names == {"x.grad", "y.grad"}, names
        args = [x, y, _read_only(np.zeros(4, np.float32)), y.grad]
        with pytest.raises(QuadrantsRuntimeTypeError, match="Argument 'x.grad' of kernel"):
            _launch.check_writeable(ck, args)
    finally:
        qd.reset()


# ------------------------------------------------------------------ integer ranges

_INTS = [qd.i8, qd.i16, qd.i32, qd.i64, qd.u8, qd.u16, qd.u32, qd.u64]


def _kept(v: int, dt) -> int:
    """What Quadrants' C cast keeps of `v` (in its parameter's 64-bit range) for `dt`."""
    bits = dt.bits
    u = v & ((1 << bits) - 1)
    return u - (1 << bits) if dt.is_signed and u >> (bits - 1) else u


@pytest.mark.parametrize("dt", _INTS, ids=str)
def test_integer_arguments_in_range_keep_their_low_bits(arch, dt):
    @qd.kernel
    def echo(v: dt) -> dt:
        return v

    lo, hi = (-(2 ** 63), 2 ** 63 - 1) if dt.is_signed else (0, 2 ** 64 - 1)
    for v in (0, 1, 5, 300, 70000, 2 ** 31, 2 ** 32 + 1, lo, hi, np.int64(-3) if dt.is_signed else np.uint64(hi)):
        for _ in range(2):  # the Python path, then the plan where the tier has one
            assert echo(v) == _kept(int(v), dt), (v, dt)


@pytest.mark.parametrize("dt", _INTS + [qd.u1], ids=str)
def test_integer_arguments_outside_the_64_bit_range_are_refused(arch, dt):
    @qd.kernel
    def store(out: qd.types.ndarray(qd.i64, 1), big: dt):
        out[0] = qd.cast(big, qd.i64)

    out = np.full(1, -7, np.int64)
    store(out, 1)
    store(out, 1)
    qd.sync()
    assert out[0] == 1
    bad = [2 ** 64 + 5, -(2 ** 64) - 5, 2 ** 100]
    bad += [2 ** 63, -(2 ** 63) - 1] if dt.is_signed else [-1, -(2 ** 63)]
    for v in bad:
        out[0] = -7
        with pytest.raises(QuadrantsRuntimeTypeError, match=rf"Argument 'big' \(int {v}\) is out of range"):
            store(out, v)
        qd.sync()
        assert out[0] == -7


@qd.data_oriented(template_primitives=False)
class _Lifted:
    """An int member read through `self`: a hidden scalar argument, read at every launch."""

    def __init__(self) -> None:
        self.k = 1

    @qd.kernel
    def put(self, out: qd.types.ndarray(qd.i64, 1)):
        out[0] = qd.cast(self.k, qd.i64)


def test_lifted_integer_members_outside_the_64_bit_range_are_refused(arch):
    s, out = _Lifted(), np.zeros(1, np.int64)
    s.k = 2 ** 31 + 3  # the member's i32 keeps the low bits, as an i32 argument does
    s.put(out)
    qd.sync()
    assert out[0] == _kept(2 ** 31 + 3, qd.i32)
    s.k = 2 ** 64 + 5
    with pytest.raises(QuadrantsRuntimeTypeError, match=r"\(int 18446744073709551621\) is out of range"):
        s.put(out)


def test_float_argument_too_large_for_a_float_is_refused(arch):
    @qd.kernel
    def echo(v: qd.f64) -> qd.f64:
        return v

    assert echo(2 ** 70) == float(2 ** 70)
    with pytest.raises(QuadrantsRuntimeTypeError, match="Argument 'v'"):
        echo(10 ** 400)


# ------------------------------------------------------------------ arrays as templates

@qd.kernel
def _second(x: qd.template()) -> qd.f32:
    return x[1]


def test_numpy_array_as_template_is_refused(arch):
    a = np.array([1.0, 2.0, 3.0], np.float32)
    for v in (a, (a, 1), np.zeros((), np.float32)):
        with pytest.raises(QuadrantsRuntimeTypeError, match=r"Argument 'x'.*qd.types.ndarray\(\)"):
            _second(v)


def test_torch_tensor_as_template_is_refused(arch):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    with pytest.raises(QuadrantsRuntimeTypeError, match=r"Argument 'x'.*qd.types.ndarray\(\)"):
        _second(torch.ones(3))


def test_qd_ndarray_as_template_reads_its_current_values(arch):
    nd = qd.ndarray(qd.f32, 3)
    nd.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    assert _second(nd) == 2.0
    nd.from_numpy(np.array([1.0, 9.0, 3.0], np.float32))
    assert _second(nd) == 9.0
    assert _second((4.0, 5.0)) == 5.0  # a tuple of numbers stays a compile-time value
