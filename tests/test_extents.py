"""Extents of 2^31 or more (issue 27 item 2, DESIGN §3 "Index types"): a multi-axis loop whose product of extents
may not fit in i32 iterates an i64 flat index and still gives i32 axis indices where its bounds are i32; a loop
variable follows its bounds' promoted type (a Python int that does not fit in i32 is i64, never wrapped); an ndarray
argument with an axis of 2^31 elements or more is its own instance, whose `x.shape` and indices are i64.

The default suite checks the lowering (flat and axis index types), loops whose indices lie beyond 2^31 on every tier
(few iterations), and the shape plumbing through arrays with an empty axis (2^31 elements on one axis, no memory).
The loops of 2^31 iterations and more, and a real 2^31-element array, are `slow`."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd import _launch, ir
from qd.errors import QuadrantsTypeError
from qd.frontend.kernel import build_kernel_ir
from qd.ops import Op

BIG = 2**31 + 8  # an axis of more than 2^31 - 1 elements
SIDE = 46341  # SIDE * SIDE > 2^31 - 1 > (SIDE - 1)^2


# ------------------------------------------------------------------ the lowering

def _loop(k_ir: ir.KernelIR) -> ir.RangeFor:
    return next(s for s in k_ir.body.stmts if isinstance(s, ir.RangeFor))


def _axis_types(loop: ir.RangeFor, names: str) -> list:
    """The dtype of each loop target's value (the last statement computing it, `SrcLoc.var`)."""
    last: dict = {}
    for s in ir.walk(loop.body):
        if s.loc is not None and s.loc.var in names and not isinstance(s, ir.Alloca):
            last[s.loc.var] = s.dtype
    return [last[n] for n in names]


def _types(kernel: object, *values: object) -> tuple:
    """(flat loop variable dtype, axis dtypes of the targets i, j[, k]) of the kernel's top-level loop."""
    loop = _loop(build_kernel_ir(kernel, list(values))[0])
    names = loop.var.name.split("_")
    return loop.var.dtype, _axis_types(loop, names)


def test_a_flat_index_is_i64_only_where_the_product_of_the_extents_may_not_fit(qd_program):
    small, large = qd.field(qd.u8, shape=(100, 200)), qd.field(qd.u8, shape=(50000, 50000))  # (never allocated)

    @qd.kernel
    def nd_fits():
        for i, j in qd.ndrange(SIDE - 1, SIDE - 1):
            small[0, 0] = qd.u8(i + j)

    @qd.kernel
    def nd_wide():
        for i, j in qd.ndrange(SIDE, SIDE):
            small[0, 0] = qd.u8(i + j)

    @qd.kernel
    def field_small():
        for i, j in small:
            small[i, j] = 1

    @qd.kernel
    def field_large():
        for i, j in large:
            large[i, j] = 1

    @qd.kernel
    def nd_runtime(n: qd.i32, m: qd.i32):
        for i, j in qd.ndrange(n, m):
            small[0, 0] = qd.u8(i + j)

    @qd.kernel
    def nd_runtime_i64(n: qd.i64, m: qd.i32):
        for i, j in qd.ndrange(n, m):
            small[0, 0] = qd.u8(i + j)

    i32, i64 = qd.i32, qd.i64
    assert _types(nd_fits) == (i32, [i32, i32])
    assert _types(nd_wide) == (i64, [i32, i32])
    assert _types(field_small) == (i32, [i32, i32])
    assert _types(field_large) == (i64, [i32, i32])
    assert _types(nd_runtime, 3, 4) == (i64, [i32, i32])  # a runtime product may not fit
    assert _types(nd_runtime_i64, 3, 4) == (i64, [i64, i64])  # (Quadrants': the bounds' promoted type)


def test_a_field_axis_of_2_31_elements_is_refused_as_in_quadrants(qd_program):
    """Fields (and qd ndarrays) keep Quadrants' limit of 2^31 - 1 elements per axis, with its error; only numpy and
    torch arrays passed as ndarray arguments reach the i64 shapes of `LARGE_AXIS` instances."""
    with pytest.raises(qd.QuadrantsRuntimeError, match="below 2\\*\\*31"):
        qd.field(qd.u8, shape=(BIG, 2))


def test_ndarray_instances_by_size_class(qd_program):
    """An ndarray argument's instance knows whether its arrays have fewer than 2^31 cells (then its loops stay
    i32), 2^31 cells or more, or an axis of 2^31 elements or more (then its shape and indices are i64). Arrays
    with an empty axis have that many cells and no memory."""

    @qd.kernel
    def over_array(x: qd.types.ndarray(qd.u8, ndim=3)):
        for i, j, t in x:
            x[i, j, t] = 1

    @qd.kernel
    def over_shapes(x: qd.types.ndarray(qd.u8, ndim=3)):
        for i, j in qd.ndrange(x.shape[0], x.shape[1]):
            x[i, j, 0] = 1

    i32, i64 = qd.i32, qd.i64
    few, cells, axis = (np.zeros(s, np.uint8) for s in ((3, 4, 5), (50000, 50000, 0), (BIG, 2, 0)))
    assert _types(over_array, few) == (i32, [i32, i32, i32])
    assert _types(over_shapes, few) == (i32, [i32, i32])  # axes of one array of fewer than 2^31 cells
    assert _types(over_array, cells) == (i64, [i32, i32, i32])
    assert _types(over_shapes, cells) == (i64, [i32, i32])
    assert _types(over_array, axis) == (i64, [i64, i64, i64])
    k_ir = build_kernel_ir(over_array, [axis])[0]
    assert k_ir.buffers[0].large == ir.LARGE_AXIS
    assert {s.dtype for s in ir.walk(k_ir.body) if isinstance(s, ir.ExternalShape)} == {i64}
    assert {i.dtype for s in ir.walk(k_ir.body) if isinstance(s, ir.GlobalPtr) for i in s.indices} == {i64}


def test_one_division_per_level_unsigned(qd_program):
    x = qd.field(qd.f32, shape=(4, 5, 6))

    @qd.kernel
    def k(n: qd.i32, m: qd.i32, p: qd.i32):
        for i, j, t in qd.ndrange(n, m, p):
            x[i, j, t] = 1.0

    loop = _loop(build_kernel_ir(k, [4, 5, 6])[0])
    divs = [s for s in ir.walk(loop.body) if isinstance(s, ir.OpStmt) and s.op in (Op.FLOORDIV, Op.MOD)]
    assert [s.op for s in divs] == [Op.FLOORDIV, Op.MOD, Op.FLOORDIV, Op.MOD]  # (div, rem) of levels 0 and 1
    assert {s.dtype for s in divs} == {qd.u64}


def test_range_bounds_give_the_loop_variable_their_promoted_type(qd_program):
    out = qd.field(qd.i64, shape=())

    @qd.kernel
    def args(a: qd.i64, b: qd.i64):
        for i in range(a, b):
            out[None] = i

    @qd.kernel
    def literals():
        for i in range(2**31 - 5, 2**31 + 5):
            out[None] = i

    @qd.kernel
    def small():
        for i in range(10):
            out[None] = i

    @qd.kernel
    def too_wide():
        for i in range(-1, 2**64):
            out[None] = i

    assert _loop(build_kernel_ir(args, [0, 1])[0]).var.dtype is qd.i64
    assert _loop(build_kernel_ir(literals, [])[0]).var.dtype is qd.i64
    assert _loop(build_kernel_ir(small, [])[0]).var.dtype is qd.i32
    with pytest.raises(QuadrantsTypeError, match="does not fit in 64 bits"):
        build_kernel_ir(too_wide, [])


def test_size_class_and_its_c_twin_agree():
    cases = {(): 0, (0,): 0, (2**31 - 1,): 0, (2**31,): 2, (SIDE - 1, SIDE - 1): 0, (SIDE, SIDE): 1,
             (50000, 50000, 0): 1, (0, 2**31): 2, (BIG, 0): 2, (1, 1, 2**31 - 1): 0, (65536, 32768): 1,
             (65536, 32767): 0}
    for shape, cls in cases.items():
        assert ir.size_class(shape) == cls == _launch.size_class_of(shape), shape


def test_cuda_ptx_of_64_bit_extents_assembles(qd_program):
    """The CUDA tier's code comes from the LLVM generator (NVPTX): the i64 flat loops and i64 shapes assemble,
    and a runtime product divides in 32 bits while the flat index fits (LLVM's bypass of the 64-bit division)."""
    from qd.jit import nvptx
    from qd.runtime import launch

    if nvptx.ptxas_path() is None:
        pytest.skip("ptxas (CUDA toolkit) is not installed: the NVPTX output is not assembled")
    out = qd.field(qd.i64, shape=())

    @qd.kernel
    def constant():
        for i, j in qd.ndrange(SIDE, SIDE):
            if i == j:
                out[None] += 1

    @qd.kernel
    def runtime(n: qd.i32, m: qd.i32):
        for i, j in qd.ndrange(n, m):
            if i == j:
                out[None] += 1

    @qd.kernel
    def axis(x: qd.types.ndarray(qd.u8, ndim=2)):
        for i, j in x:
            x[i, j] = qd.u8(i + j)
        out[None] = x.shape[0]

    for kernel, values in ((constant, []), (runtime, [3, 4]), (axis, [np.zeros((BIG, 0), np.uint8)])):
        ck = launch.compile_kernel(build_kernel_ir(kernel, values)[0])
        pk = nvptx.compile_ptx(ck.ir, True)
        nvptx.ptxas(pk.ptx)
        if kernel is runtime:
            assert "div.u32" in pk.ptx and "div.u64" in pk.ptx


# ------------------------------------------------------------------ on every tier, few iterations

def test_range_with_i64_bounds_near_2_31(arch):
    a, b = 2**31 - 5, 2**31 + 5

    @qd.kernel
    def args(lo: qd.i64, hi: qd.i64, out: qd.types.ndarray(qd.i64, ndim=1)) -> qd.i64:
        s = qd.i64(0)
        for i in range(lo, hi):
            out[i - lo] = i
            s += i
        return s

    @qd.kernel
    def literals(out: qd.types.ndarray(qd.i64, ndim=1)):
        for i in range(2**31 - 5, 2**31 + 5):
            out[i - (2**31 - 5)] = i

    @qd.kernel
    def stepped(out: qd.types.ndarray(qd.i64, ndim=1)):
        for i in range(2**31 + 10, 2**31 - 10, -3):
            out[(2**31 + 10 - i) // 3] = i

    out = np.zeros(10, np.int64)
    assert args(a, b, out) == sum(range(a, b))
    assert out.tolist() == list(range(a, b))
    out[:] = 0
    literals(out)
    assert out.tolist() == list(range(a, b))
    want = list(range(2**31 + 10, 2**31 - 10, -3))
    out = np.zeros(len(want), np.int64)
    stepped(out)
    assert out.tolist() == want


def test_ndrange_axes_beyond_2_31(arch):
    lo = 2**31 - 2

    @qd.kernel
    def k(out: qd.types.ndarray(qd.i64, ndim=3)):
        for i, j in qd.ndrange((2**31 - 2, 2**31 + 1), (-3, 2)):
            out[i - (2**31 - 2), j + 3, 0] = i
            out[i - (2**31 - 2), j + 3, 1] = j

    @qd.kernel
    def literal_begins(out: qd.types.ndarray(qd.i64, ndim=3)):
        for v in qd.grouped(qd.ndrange((2**31 + 1, 2**31 + 4), 5)):
            out[v[0] - (2**31 + 1), v[1], 0] = v[0]
            out[v[0] - (2**31 + 1), v[1], 1] = v[1]

    @qd.kernel
    def permuted(base: qd.i64, out: qd.types.ndarray(qd.i64, ndim=3)):
        for i, j in qd.ndrange((base, base + 3), 5, axes=(1, 0)):
            out[i - base, j, 0] = i
            out[i - base, j, 1] = j

    ii, jj = np.meshgrid(np.arange(lo, lo + 3), np.arange(-3, 2), indexing="ij")
    out = np.zeros((3, 5, 2), np.int64)
    k(out)
    np.testing.assert_array_equal(out[..., 0], ii)
    np.testing.assert_array_equal(out[..., 1], jj)
    out[:] = 0
    literal_begins(out)
    np.testing.assert_array_equal(out[..., 0], ii - lo + 2**31 + 1)
    np.testing.assert_array_equal(out[..., 1], jj + 3)
    out[:] = 0
    permuted(2**32 + 7, out)
    np.testing.assert_array_equal(out[..., 0], ii - lo + 2**32 + 7)
    np.testing.assert_array_equal(out[..., 1], jj + 3)


def test_a_serial_ndrange_of_more_than_2_31_cells(arch):
    """The flattened i64 loop of an inner ndrange, left by `break` after a few of its cells."""

    @qd.kernel
    def k(out: qd.types.ndarray(qd.i32, ndim=1)) -> qd.i32:
        n = 0
        for _ in range(1):
            for i, j in qd.ndrange(SIDE, SIDE):
                n += 1
                if i == 1 and j == 5:
                    out[0] = i
                    out[1] = j
                    break
        return n

    out = np.zeros(2, np.int32)
    assert k(out) == SIDE + 6
    assert out.tolist() == [1, 5]


def test_an_ndarray_axis_of_2_31_elements(arch):
    """Arrays with an empty second axis: 2^31 + 8 elements on the first, no memory. `x.shape[0]` is exact, and a
    loop up to it runs; arrays of both sizes in turn take their own instances (and launch plans)."""

    @qd.kernel
    def shape(x: qd.types.ndarray(qd.u8, ndim=2)) -> qd.i64:
        return x.shape[0]

    @qd.kernel
    def positive(x: qd.types.ndarray(qd.u8, ndim=2)) -> qd.i32:
        return x.shape[0] > 0

    @qd.kernel
    def tail(x: qd.types.ndarray(qd.u8, ndim=2)) -> qd.i64:
        s = qd.i64(0)
        for i in range(x.shape[0] - 3, x.shape[0]):
            s += i
        for i, j in x:  # no cells
            s += 1
        return s

    big, few = np.zeros((BIG, 0), np.uint8), np.zeros((7, 0), np.uint8)
    for x in (big, few, big, few, big):
        n = x.shape[0]
        assert shape(x) == n
        assert positive(x) == 1
        assert tail(x) == 3 * n - 6


def test_a_bounds_check_names_an_index_beyond_2_31_whole(arch):
    """`debug=True` checks an index into an axis of 2^31 elements or more against its i64 extent."""
    from conftest import init_arch

    init_arch(arch, debug=True)

    @qd.kernel
    def past_the_end(x: qd.types.ndarray(qd.u8, ndim=2)) -> qd.i32:
        return qd.i32(x[x.shape[0], 0])

    with pytest.raises(qd.QuadrantsAssertionError, match=f"index {BIG} of axis 0 is out of \\[0, {BIG}\\)"):
        past_the_end(np.zeros((BIG, 0), np.uint8))
        qd.sync()


# ------------------------------------------------------------------ 2^31 iterations and more (slow)

def _device_refuses(e: MemoryError) -> None:
    pytest.skip(f"the device refuses a buffer of 2^31 bytes: {e}")


@pytest.mark.slow
def test_ndrange_of_more_than_2_31_cells_visits_every_cell(arch):
    @qd.kernel
    def constant() -> qd.i64:
        c = qd.i64(0)
        for i, j in qd.ndrange(SIDE, SIDE):
            if i == j:
                c += 1
            if i == SIDE - 1 and j >= SIDE - 3:
                c += qd.i64(j) * 1000000
        return c

    @qd.kernel
    def runtime(n: qd.i32) -> qd.i64:
        c = qd.i64(0)
        for i, j in qd.ndrange(n, n):
            if i == j:
                c += 1
            if i == n - 1 and j >= n - 3:
                c += qd.i64(j) * 1000000
        return c

    want = SIDE + sum(range(SIDE - 3, SIDE)) * 1000000
    assert constant() == want
    assert runtime(SIDE) == want


@pytest.mark.slow
def test_struct_for_over_a_field_of_more_than_2_31_cells(arch):
    f = qd.field(qd.u8, shape=(SIDE, SIDE))

    @qd.kernel
    def corner() -> qd.i64:
        c = qd.i64(0)
        for i, j in f:
            if i == SIDE - 1 and j >= SIDE - 3:
                c += j + f[i, j]
        return c

    try:
        f[SIDE - 1, SIDE - 1] = 7
        got = corner()
    except MemoryError as e:
        _device_refuses(e)
    assert got == sum(range(SIDE - 3, SIDE)) + 7


@pytest.mark.slow
def test_a_numpy_argument_of_more_than_2_31_elements(arch):
    x = np.zeros(BIG, np.uint8)
    for p in (5, 2**31 + 2, BIG - 1):
        x[p] = 1

    @qd.kernel
    def hits(x: qd.types.ndarray(qd.u8, ndim=1)) -> qd.i64:
        c = qd.i64(0)
        for i in x:
            if x[i] != 0:
                c += i
        return c + x.shape[0] * 1000

    try:
        got = hits(x)
    except MemoryError as e:
        _device_refuses(e)
    assert got == 5 + 2**31 + 2 + BIG - 1 + BIG * 1000
