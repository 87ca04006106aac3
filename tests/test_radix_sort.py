"""`qd.algorithms.sort` (Quadrants' device-wide radix sort contract: a top-level `@qd.func` over caller-owned
buffers, a device-resident count and a u32 scratch) and `sort_scratch_slots`, against numpy's stable argsort on
every tier."""

from typing import Any

import numpy as np
import pytest

import qd
from qd.algorithms import _radix_sort
from tests.conftest import init_arch

_UNSIGNED = {4: np.uint32, 8: np.uint64}


def _keys(rng: np.random.Generator, dtype: Any, n: int) -> np.ndarray:
    npd = np.dtype(dtype.np_dtype)
    if npd.kind == "f":
        a = (rng.standard_normal(n) * 1e3).astype(npd)
        tiny = np.finfo(npd).smallest_subnormal
        a[:8] = [-0.0, 0.0, np.inf, -np.inf, tiny, -tiny, np.nan, -1e-30]  # -0.0 before +0.0: numpy keeps that order
        return a
    info = np.iinfo(npd)
    a = rng.integers(info.min, info.max, size=n, dtype=npd, endpoint=True)
    a[:3] = [info.min, info.max, 0]
    a[3:40] = a[40:77]  # equal keys: the sort is stable
    return a


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(_UNSIGNED[a.dtype.itemsize])


@pytest.mark.parametrize("dtype", [qd.u32, qd.i32, qd.f32, qd.u64, qd.i64, qd.f64])
def test_sort_matches_numpy(arch: object, dtype: Any) -> None:
    """Keys ascending, values following the stable argsort; a second launch of the same instance with a smaller
    device count sorts only that prefix and leaves the rest alone."""
    width = 32 if dtype in (qd.u32, qd.i32, qd.f32) else 64
    n, depth = 1000, 2
    nd = qd.types.ndarray(dtype, ndim=1)
    u32s = qd.types.ndarray(qd.u32, ndim=1)

    @qd.kernel
    def run(keys: nd, tmp_keys: nd, values: u32s, tmp_values: u32s, scratch: u32s,
            count: qd.types.ndarray(qd.i32, ndim=0)) -> None:
        qd.algorithms.sort(keys, tmp_keys, values, tmp_values, scratch, count, dtype, True, width, depth)

    host = _keys(np.random.default_rng(7), dtype, n)
    keys, tmp = qd.ndarray(dtype, n), qd.ndarray(dtype, n)
    vals, tmp_vals = qd.ndarray(qd.u32, n), qd.ndarray(qd.u32, n)
    scratch = qd.ndarray(qd.u32, qd.algorithms.sort_scratch_slots(n, depth))
    count = qd.ndarray(qd.i32, ())
    for m in (n, 333):
        keys.from_numpy(host)
        vals.from_numpy(np.arange(n, dtype=np.uint32))
        count.fill(m)
        run(keys, tmp, vals, tmp_vals, scratch, count)
        order = np.argsort(host[:m], kind="stable")
        got_keys, got_vals = keys.to_numpy(), vals.to_numpy()
        np.testing.assert_array_equal(_bits(got_keys[:m]), _bits(host[:m][order]), err_msg=f"{dtype} n={m}")
        np.testing.assert_array_equal(got_vals[:m], order, err_msg=f"{dtype} n={m}")
        np.testing.assert_array_equal(_bits(got_keys[m:]), _bits(host[m:]))


def test_sort_fields_without_values(arch: object) -> None:
    """Genesis' BVH call: u64 fields, the keys passed again as value placeholders, a 0-d field count, the low 48 bits,
    depth 4; counts 0, 1, one tile, a tile and one."""
    cap = 700
    keys, tmp = qd.field(qd.u64, cap), qd.field(qd.u64, cap)
    scratch = qd.field(qd.u32, qd.algorithms.sort_scratch_slots(cap, 4))
    count = qd.field(qd.i32, ())

    @qd.kernel
    def run() -> None:
        qd.algorithms.sort(keys, tmp, keys, tmp, scratch, count, key_dtype=qd.u64, has_values=False, end_bit=48,
                           log256_max_n=4)

    rng = np.random.default_rng(11)
    host = (rng.integers(0, 2**40, cap, dtype=np.uint64) << np.uint64(8)) | np.arange(cap, dtype=np.uint64) % 256
    for m in (0, 1, 256, 257, cap):
        keys.from_numpy(host)
        count[None] = m
        run()
        want = np.concatenate([np.sort(host[:m]), host[m:]])
        np.testing.assert_array_equal(keys.to_numpy(), want, err_msg=f"n={m}")


def test_sort_low_bits_only_is_stable(arch: object) -> None:
    """end_bit=16 orders the keys by their low 16 bits only, keeping the input order among equal ones."""
    n = 600
    keys, tmp = qd.ndarray(qd.u32, n), qd.ndarray(qd.u32, n)
    vals, tmp_vals = qd.ndarray(qd.i32, n), qd.ndarray(qd.i32, n)
    scratch = qd.ndarray(qd.u32, qd.algorithms.sort_scratch_slots(n, 2))
    count = qd.field(qd.i32, ())

    @qd.kernel
    def run(k: qd.types.ndarray(qd.u32, 1), tk: qd.types.ndarray(qd.u32, 1), v: qd.types.ndarray(qd.i32, 1),
            tv: qd.types.ndarray(qd.i32, 1), s: qd.types.ndarray(qd.u32, 1)) -> None:
        qd.algorithms.sort(k, tk, v, tv, s, count, qd.u32, True, 16, 2)

    host = np.random.default_rng(2).integers(0, 2**32, n, dtype=np.uint32)
    host[::3] &= np.uint32(0xFFFF000F)  # many equal low halves
    keys.from_numpy(host)
    vals.from_numpy(-np.arange(n, dtype=np.int32))
    count[None] = n
    run(keys, tmp, vals, tmp_vals, scratch)
    order = np.argsort(host & np.uint32(0xFFFF), kind="stable")
    np.testing.assert_array_equal(keys.to_numpy(), host[order])
    np.testing.assert_array_equal(vals.to_numpy(), -order)


def test_sort_refuses_a_count_it_cannot_hold(arch: Any) -> None:
    """A count above the keys' length (or a scratch too small) leaves the keys as they are rather than writing out
    of bounds; with debug=True the assert says why."""
    n = 300
    host = np.arange(n, 0, -1).astype(np.int32)

    def launch() -> Any:
        keys, tmp = qd.ndarray(qd.i32, n), qd.ndarray(qd.i32, n)
        scratch = qd.ndarray(qd.u32, qd.algorithms.sort_scratch_slots(n, 2))
        count = qd.ndarray(qd.i32, ())

        @qd.kernel
        def run(k: qd.types.ndarray(qd.i32, 1), tk: qd.types.ndarray(qd.i32, 1), s: qd.types.ndarray(qd.u32, 1),
                c: qd.types.ndarray(qd.i32, 0)) -> None:
            qd.algorithms.sort(k, tk, k, tk, s, c, qd.i32, False, 32, 2)

        keys.from_numpy(host)
        count.fill(n + 1)
        run(keys, tmp, scratch, count)
        qd.sync()
        return keys

    np.testing.assert_array_equal(launch().to_numpy(), host)
    init_arch(arch, debug=True)
    with pytest.raises(qd.QuadrantsAssertionError, match="exceeds the keys' length"):
        launch()


def test_sort_scratch_slots() -> None:
    """Quadrants 1.3.3's sizes (values taken from it): the tile table plus one partial per 256 entries per level."""
    s = qd.algorithms.sort_scratch_slots
    assert [s(n, d) for n in (0, 1, 257, 65537, 10**7) for d in (1, 2, 3, 4)] == [
        1, 1, 1, 1, 256, 257, 258, 259, 512, 514, 515, 516, 65792, 66049, 66051, 66052,
        10000128, 10039191, 10039344, 10039345]
    assert [s(n) for n in (0, 1, 256, 257, 65536, 65537, 10**7)] == [1, 256, 256, 514, 65792, 66051, 10039344]
    for depth in (0, 5):
        with pytest.raises(ValueError, match="log256_max_n"):
            s(10, depth)
    assert _radix_sort._min_log256_for_n(256**2 + 1) == 3


def test_sort_compile_time_errors(qd_program: object) -> None:
    keys = qd.field(qd.u32, 8)
    scratch = qd.field(qd.u32, 256)
    count = qd.field(qd.i32, ())

    def compile_with(dtype: Any = qd.u32, end_bit: int = 32, depth: int = 1, nested: bool = False) -> None:
        @qd.kernel
        def run() -> None:
            if qd.static(nested):
                for _ in range(1):
                    qd.algorithms.sort(keys, keys, keys, keys, scratch, count, dtype, False, end_bit, depth)
            else:
                qd.algorithms.sort(keys, keys, keys, keys, scratch, count, dtype, False, end_bit, depth)

        run()

    with pytest.raises(qd.QuadrantsCompilationError, match="key_dtype i16 is not supported"):
        compile_with(dtype=qd.i16)
    for end_bit in (8, 24, 48):
        with pytest.raises(qd.QuadrantsCompilationError, match=f"end_bit={end_bit}; it must be a multiple of 16"):
            compile_with(end_bit=end_bit)
    with pytest.raises(qd.QuadrantsCompilationError, match="log256_max_n=5"):
        compile_with(depth=5)
    with pytest.raises(qd.QuadrantsCompilationError, match="requires_top_level"):
        compile_with(nested=True)
