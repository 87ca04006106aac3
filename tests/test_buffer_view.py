"""`qd.BufferView` (issue 7): 1-D sub-range views of ndarrays, on the host and in kernels, on every tier.

Quadrants' own `tests/python/test_buffer_view.py` (39 tests) is the checklist; every behaviour it checks
has a test here, plus what qd adds: no stale offset/size across calls (one instance, offset and size
are launch args), views reached through templates, frozen dataclasses and captured globals, numpy
backing arrays, the exact debug messages with their callstacks, and no checks at all without debug.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import qd
from qd import BufferView
from qd.errors import QuadrantsAssertionError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError
from qd.types.annotations import BufferViewType
from tests.conftest import init_arch

N = 32


def _zeros(dtype=qd.f32, n: int = N):
    a = qd.ndarray(dtype, shape=(n,))
    a.from_numpy(np.zeros(n, dtype=a.dtype.np_dtype))
    return a


def _line_of(fn, text: str) -> int:
    """The file line of the first source line of `fn` containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


# ---------------------------------------------------------------- host API (tier-independent)

@pytest.mark.parametrize("key,offset,size", [(slice(None, 16), 0, 16), (slice(8, 24), 8, 16), (slice(None), 0, N),
                                             (slice(8, None), 8, N - 8), (slice(-8, None), N - 8, 8),
                                             (slice(20, 10), 20, 0), (slice(None, -4), 0, N - 4)])
def test_ndarray_slice(qd_program, key, offset, size):
    data = qd.ndarray(qd.f32, shape=(N,))
    view = data[key]
    assert isinstance(view, BufferView)
    assert (view.offset, view.size, view.shape) == (offset, size, (size,))
    assert view.get_ndarray() is data and view.arr is data


def test_public_names(qd_program):
    import qd.lang.buffer_view as mod

    assert qd.BufferView is BufferView is mod.BufferView
    t = BufferView[qd.f32]
    assert isinstance(t, BufferViewType) and t.dtype is qd.f32 and t.ndarray_type.ndim == 1


def test_slice_errors(qd_program):
    with pytest.raises(ValueError, match="step=1"):
        _ = qd.ndarray(qd.f32, shape=(N,))[::2]
    with pytest.raises(TypeError, match="1D"):
        _ = qd.ndarray(qd.f32, shape=(4, 4))[:2]


def test_constructor(qd_program):
    data = qd.ndarray(qd.f32, shape=(N,))
    view = BufferView(data, 4, 8)
    assert (view.offset, view.size, view.shape) == (4, 8, (8,))
    assert view.get_ndarray() is data


@pytest.mark.parametrize("offset,size", [(-1, 8), (0, -1), (16, 32), (33, 0)])
def test_constructor_out_of_range(qd_program, offset, size):
    data = qd.ndarray(qd.f32, shape=(N,))
    msg = f"BufferView out of range: offset={offset}, size={size}, ndarray length={N}"
    with pytest.raises(ValueError, match=msg):
        BufferView(data, offset, size)


def test_constructor_refusals(qd_program):
    data = qd.ndarray(qd.f32, shape=(N,))
    with pytest.raises(TypeError, match="use view.subview"):
        BufferView(data[:8], 0, 4)
    with pytest.raises(TypeError, match="needs_grad=True"):
        BufferView(qd.ndarray(qd.f32, shape=(N,), needs_grad=True), 0, 4)
    with pytest.raises(TypeError, match="needs_grad=True"):
        _ = qd.ndarray(qd.f32, shape=(N,), needs_grad=True)[:4]
    with pytest.raises(TypeError, match="1D"):
        BufferView(qd.ndarray(qd.f32, shape=(4, 4)), 0, 4)


def test_vector_and_matrix_slices(qd_program):
    v_arr = qd.Vector.ndarray(3, qd.f32, (N,))
    m_arr = qd.Matrix.ndarray(3, 3, qd.f32, (N,))
    for arr in (v_arr, m_arr):
        view = arr[:16]
        assert isinstance(view, BufferView) and (view.offset, view.size) == (0, 16)
        assert view.get_ndarray() is arr


def test_subview_and_view_slices(qd_program):
    data = qd.ndarray(qd.f32, shape=(N,))
    a = data[8:24]
    b = a.subview(4, 8)
    assert (b.offset, b.size) == (12, 8) and b.get_ndarray() is data
    c, d = a[4:12], a[4:12][:4]
    assert (c.offset, c.size, d.offset, d.size) == (12, 8, 12, 4) and d.get_ndarray() is data
    assert (a[-4:].offset, a[-4:].size) == (20, 4)
    with pytest.raises(ValueError, match="subview out of range: offset=8, size=16, parent size=16"):
        a.subview(8, 16)
    with pytest.raises(ValueError, match="subview out of range"):
        a.subview(-1, 2)
    with pytest.raises(ValueError, match="step=1"):
        _ = a[::2]
    with pytest.raises(TypeError, match="slice"):
        _ = a[0]


# ---------------------------------------------------------------- kernels

def test_annotations_write_only_the_range(arch):
    data = _zeros()

    @qd.kernel
    def typed(v: BufferView[qd.f32], x: qd.f32):
        for i in range(v.size):
            v[i] = x

    @qd.kernel
    def bare(v: BufferView, x: qd.f32):
        for i in range(v.size):
            v[i] = x

    typed(data[8:16], 7.0)
    bare(data[20:22], 3.0)
    want = np.zeros(N, np.float32)
    want[8:16], want[20:22] = 7.0, 3.0
    np.testing.assert_array_equal(data.to_numpy(), want)


def test_reads_size_shape_len(arch):
    data = qd.ndarray(qd.i32, shape=(N,))
    data.from_numpy(np.arange(N, dtype=np.int32) * 3)
    out = _zeros(qd.i32, 4)

    @qd.kernel
    def k(v: BufferView[qd.i32], o: qd.types.ndarray(qd.i32, ndim=1)):
        s = 0
        for i in range(v.size):
            s += v[i]
        o[0] = s
        o[1] = v.size
        o[2] = v.shape[0]
        o[3] = len(v)

    k(data[5:17], out)
    np.testing.assert_array_equal(out.to_numpy(), [np.arange(5, 17).sum() * 3, 12, 12, 12])


def test_no_stale_offset_or_size(arch):
    """One instance serves every view of an array: offset and size are launch arguments."""
    data = _zeros(qd.i32, 16)

    @qd.kernel
    def fill(v: BufferView[qd.i32], x: qd.i32):
        for i in range(v.size):
            v[i] = x + i

    for off, size in ((0, 3), (5, 2), (1, 9), (12, 4), (7, 0)):
        data.from_numpy(np.zeros(16, np.int32))
        fill(data[off:off + size], 10)
        want = np.zeros(16, np.int32)
        want[off:off + size] = 10 + np.arange(size)
        np.testing.assert_array_equal(data.to_numpy(), want)
    assert len(fill._instances) == 1


def test_multiple_views_and_atomics(arch):
    data = _zeros()

    @qd.kernel
    def k(a: BufferView[qd.f32], b: BufferView[qd.f32]):
        for i in range(a.size):
            a[i] = 1.0
        for i in range(b.size):
            b[i] += 2.0
            qd.atomic_add(b[0], 1.0)

    k(data[:8], data[16:24])
    want = np.zeros(N, np.float32)
    want[:8], want[16:24] = 1.0, 2.0
    want[16] += 8.0
    np.testing.assert_array_equal(data.to_numpy(), want)


def test_view_through_funcs(arch):
    data = _zeros()

    @qd.func
    def set_val(v: BufferView[qd.f32], idx: qd.i32, val: qd.f32):
        v[idx] = val

    @qd.func
    def untyped(v, idx):
        set_val(v, idx, 5.0 + v[idx])

    @qd.kernel
    def run(v: BufferView[qd.f32]):
        for i in range(v.size):
            untyped(v, i)

    run(data[8:16])
    want = np.zeros(N, np.float32)
    want[8:16] = 5.0
    np.testing.assert_array_equal(data.to_numpy(), want)


def test_func_refuses_a_non_view(arch):
    data = _zeros()

    @qd.func
    def f(v: BufferView[qd.f32]):
        v[0] = 1.0

    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, ndim=1)):
        f(a)

    with pytest.raises(QuadrantsSyntaxError, match="expects a BufferView"):
        k(data)


def test_kernel_subview_slice_and_construct(arch):
    data = _zeros(qd.i32)

    @qd.kernel
    def k(v: BufferView[qd.i32], arr: qd.types.ndarray(qd.i32, ndim=1), lo: qd.i32, hi: qd.i32):
        sub = v.subview(4, 4)  # data[12:16]
        for i in range(sub.size):
            sub[i] = 1
        s2 = v[lo:hi]  # runtime bounds: data[8 + lo : 8 + hi]
        for i in range(s2.size):
            s2[i] += 10
        tail = v[12:][:2]  # data[20:22]
        for i in range(tail.size):
            tail[i] += 100
        own = BufferView(arr, 26, 4).subview(1, 2)  # data[27:29]
        for i in range(own.size):
            own[i] = 7

    k(data[8:24], data, 1, 3)
    want = np.zeros(N, np.int32)
    want[12:16] = 1
    want[9:11] += 10
    want[20:22] += 100
    want[27:29] = 7
    np.testing.assert_array_equal(data.to_numpy(), want)


def test_vector_and_matrix_views_in_kernels(arch):
    v_arr = qd.Vector.ndarray(3, qd.f32, (N,))
    m_arr = qd.Matrix.ndarray(3, 3, qd.f32, (N,))
    out = _zeros(qd.f32, 8)

    @qd.kernel
    def k(v: BufferView, m: BufferView, o: qd.types.ndarray(qd.f32, ndim=1)):
        for i in range(v.size):
            for c in range(3):
                v[i][c] = 1.0 + c
        for i in range(m.size):
            for c in range(3):
                m[i][c, c] = 1.0
        for i in range(v.size):
            o[i] = v[i].sum()

    k(v_arr[4:12], m_arr[8:16], out)
    want_v = np.zeros((N, 3), np.float32)
    want_v[4:12] = [1.0, 2.0, 3.0]
    want_m = np.zeros((N, 3, 3), np.float32)
    want_m[8:16] = np.eye(3, dtype=np.float32)
    np.testing.assert_array_equal(v_arr.to_numpy(), want_v)
    np.testing.assert_array_equal(m_arr.to_numpy(), want_m)
    np.testing.assert_array_equal(out.to_numpy(), np.full(8, 6.0, np.float32))


def test_numpy_backing_array(arch):
    a = np.zeros(10, np.float32)

    @qd.kernel
    def k(v: BufferView[qd.f32]):
        for i in range(v.size):
            v[i] += 1.0 + i

    k(BufferView(a, 3, 4))
    want = np.zeros(10, np.float32)
    want[3:7] = 1.0 + np.arange(4)
    np.testing.assert_array_equal(a, want)


@dataclasses.dataclass(frozen=True)
class _Cfg:
    view: BufferView
    value: int


def test_views_as_compile_time_values(arch):
    """Views in templates (also inside frozen dataclasses) and captured globals: constants keyed by value."""
    data = _zeros(qd.i32, 16)
    captured = data[14:16]

    @qd.kernel
    def tk(c: qd.template()):
        for i in range(c.view.size):
            c.view[i] = c.value
        for i in range(captured.size):
            captured[i] = -1

    for off in (0, 3, 6, 3):
        data.from_numpy(np.zeros(16, np.int32))
        tk(_Cfg(data[off:off + 2], 7))
        want = np.zeros(16, np.int32)
        want[off:off + 2] = 7
        want[14:16] = -1
        np.testing.assert_array_equal(data.to_numpy(), want)
    assert len(tk._instances) == 3


def test_argument_type_errors(arch):
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32]):
        for i in range(v.size):
            v[i] = 0.0

    with pytest.raises(QuadrantsRuntimeTypeError, match="Argument v expects a BufferView, got"):
        k(data)
    with pytest.raises(QuadrantsRuntimeTypeError, match="dtype f32"):
        k(_zeros(qd.i32)[:4])


def test_explicit_step_in_kernel(arch):
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32]):
        sub = v[::2]
        sub[0] = 1.0

    with pytest.raises(QuadrantsSyntaxError, match="explicit step"):
        k(data[:16])


# ---------------------------------------------------------------- debug mode

def _debug(arch) -> None:
    init_arch(arch, debug=True)


def test_debug_out_of_range_message(arch):
    _debug(arch)
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32], bad: qd.i32):
        for i in range(4):
            if i == 2:
                v[bad + i] = 1.0

    line = _line_of(k.fn, "v[bad + i]")
    for bad, got in ((14, 16), (-3, -1)):
        with pytest.raises(QuadrantsAssertionError) as e:
            k(data[8:24], bad)
        msg = str(e.value)
        assert msg.startswith(f"BufferView Out Of Range: kernel[k] tid=2, got index {got} (offset=8, size=16).\n"
                              f"Callstack:\nk ({__file__}:{line})\n"), msg
    np.testing.assert_array_equal(data.to_numpy(), np.zeros(N, np.float32))  # the failing store was skipped
    k(data[8:24], 13)  # index 15 == size - 1: no false positive
    assert data.to_numpy()[23] == 1.0


def test_debug_callstack_through_funcs(arch):
    _debug(arch)
    data = _zeros()

    @qd.func
    def inner(v: BufferView[qd.f32], idx: qd.i32):
        v[idx] = 99.0

    @qd.func
    def writer(v: BufferView[qd.f32], idx: qd.i32):
        inner(v, idx)

    @qd.kernel
    def kern(v: BufferView[qd.f32]):
        for i in range(1):
            writer(v, v.size + i)

    with pytest.raises(QuadrantsAssertionError) as e:
        kern(data[:16])
    f = __file__
    assert str(e.value).startswith(
        "BufferView Out Of Range: kernel[kern] tid=0, got index 16 (offset=0, size=16).\nCallstack:\n"
        f"kern ({f}:{_line_of(kern.fn, 'writer(v, v.size')})\n"
        f"  writer ({f}:{_line_of(writer.fn, 'inner(v, idx)')})\n"
        f"    inner ({f}:{_line_of(inner.fn, 'v[idx] = 99.0')})"), str(e.value)


def test_debug_subview_and_construction_checks(arch):
    _debug(arch)
    data = _zeros()

    @qd.kernel
    def sub(v: BufferView[qd.f32], o: qd.i32, s: qd.i32):
        for i in range(1):
            w = v.subview(o + i, s)
            w[0] = 1.0

    @qd.kernel
    def make(arr: qd.types.ndarray(qd.f32, ndim=1), o: qd.i32):
        for i in range(1):
            w = BufferView(arr, o + i, 8)
            w[0] = 1.0

    line = _line_of(sub.fn, "v.subview(")
    for o, s in ((16, 1), (-1, 2), (4, 13)):
        with pytest.raises(QuadrantsAssertionError) as e:
            sub(data[:16], o, s)
        assert str(e.value).startswith(
            f"BufferView subview Out Of Range: kernel[sub] tid=0, subview offset={o}, subview size={s}, parent "
            f"size=16.\nCallstack:\nsub ({__file__}:{line})"), str(e.value)
    sub(data[:16], 15, 1)
    with pytest.raises(QuadrantsAssertionError,
                       match=r"BufferView construction out of range: offset=28, size=8, ndarray length=32\."):
        make(data, 28)
    make(data, 24)
    assert data.to_numpy()[15] == 1.0 and data.to_numpy()[24] == 1.0


def test_debug_slice_in_kernel_is_checked(arch):
    _debug(arch)
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32], hi: qd.i32):
        s = v[2:hi]
        s[0] = 1.0

    with pytest.raises(QuadrantsAssertionError, match="subview Out Of Range.*subview offset=2, subview size=15"):
        k(data[:16], 17)


def test_no_checks_without_debug(arch):
    """debug=False: a view subscript is `arr[offset + i]` and nothing else; out-of-view indices inside the
    backing array are not caught (as in Quadrants)."""
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32]):
        v[v.size] = 1.0
        w = v.subview(20, 2)
        w[0] = 2.0

    k(data[:16])
    assert data.to_numpy()[16] == 1.0 and data.to_numpy()[20] == 2.0
    assert k._last_ir.checks == ()


def test_view_parameter_is_ndarray_plus_two_scalars(qd_program):
    """The lowering: a view parameter is an ndarray ArgDecl and two i32 scalar ArgDecls; nothing new in the IR."""
    data = _zeros()

    @qd.kernel
    def k(v: BufferView[qd.f32], x: qd.f32):
        for i in range(v.size):
            v[i] = v[i] + x

    k(data[3:9], 1.0)
    args = [(a.name, a.kind, str(a.dtype)) for a in k._last_ir.args]
    assert args == [("v", "ndarray", "f32"), ("v.offset", "scalar", "i32"), ("v.size", "scalar", "i32"),
                    ("x", "scalar", "f32")]
    from qd.types.buffer_view_type import BufferViewType as Compat

    assert Compat is BufferViewType
