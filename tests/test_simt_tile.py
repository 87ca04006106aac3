"""qd.simt.Tile16x16 / Tile32x32 (`qd/lang/simt/tile.py`) against numpy: load/store through slices, identity,
rank-1 updates, Cholesky and the triangular solve (cases from Quadrants' tests/python/test_tile.py).

A tile's rows exchange values by shuffle when a subgroup holds N lanes, else through shared memory (lavapipe's
subgroups have 8 lanes: Tile16x16 and Tile32x32 take the shared path there); the tile of the subgroup's own width
(an internal `TileProxy(group_size())`) runs the shuffle path on every GPU tier. Tiers without subgroups skip
visibly, except for the test that they refuse tiles.
"""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.base import arch as _arch
from qd.lang.simt import tile as _tile

TILES = ["Tile16x16", "Tile32x32", "subgroup-wide"]


@pytest.fixture(params=TILES)
def tile_cls(arch: _arch.Arch, request: pytest.FixtureRequest) -> _tile.TileProxy:
    if arch.subgroup_size() is None:
        pytest.skip(f"tier {arch.name!r} has no subgroups: qd.simt tiles run on the GPU tiers only")
    tile = _tile.TileProxy(qd.simt.subgroup.group_size()) if request.param == "subgroup-wide" else \
        getattr(qd.simt, request.param)
    if tile.SIZE == 32 and _pocl(arch):
        pytest.skip("PoCL's OpenCL compiler crashes (a segfault) on 32x32 tile kernels: their 32-lane subgroup is "
                    "emulated with two work-group barriers per shuffle (Tile16x16 and the Vulkan tier cover 32x32)")
    return tile


def _pocl(arch: _arch.Arch) -> bool:
    if arch.name != "opencl":
        return False
    from qd.runtime import device

    return "Portable Computing Language" in str(device.runtime("opencl").backend.device.platform.name)


def _spd(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


@pytest.mark.parametrize("dt", [qd.f32, qd.f64], ids=str)
def test_zeros_eye_and_rows(tile_cls, dt) -> None:
    """zeros, eye and eye_ stored whole; `t.r[j]` is this thread's entry j (Quadrants' test_zeros, test_eye)."""
    n = tile_cls.SIZE
    out = qd.field(dt, (3, n, n))

    @qd.kernel
    def k():
        qd.loop_config(block_dim=n)
        for i in range(n):
            z = tile_cls.zeros(dtype=dt)
            e = tile_cls.eye(dtype=dt)
            w = tile_cls.zeros(dtype=dt)
            w.eye_()
            w.r[1] = 5.0
            out[0, 0:n, 0:n] = z
            out[1, 0:n, 0:n] = e
            out[2, 0:n, 0:n] = w
    k()
    got = out.to_numpy()
    want_w = np.eye(n)
    want_w[:, 1] = 5.0
    np.testing.assert_array_equal(got[0], np.zeros((n, n)))
    np.testing.assert_array_equal(got[1], np.eye(n))
    np.testing.assert_array_equal(got[2], want_w)


@pytest.mark.parametrize("r0,r1,c0,c1", [(0, 99, 0, 99), (3, 10, 2, 9), (5, 200, 4, 200)])
def test_load_store_partial_and_clamped(tile_cls, r0: int, r1: int, c0: int, c1: int) -> None:
    """Rows r0 + row below r1 and the array's rows, columns below c1, the array's columns and c0 + N; a load leaves
    the rest of the tile as it was, a store the rest of the array (Quadrants' test_load_store, test_clamp_to_array_rows,
    test_load_clamp_to_array_cols, test_store_partial_cols_untouched)."""
    n = tile_cls.SIZE
    rows, cols = n + 7, n + 5
    src = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) + 1
    a = qd.field(qd.f32, (rows, cols))
    b = qd.field(qd.f32, (rows, cols))
    a.from_numpy(src)
    b.from_numpy(np.full((rows, cols), -1, np.float32))

    @qd.kernel
    def k(r0: qd.i32, r1: qd.i32, c0: qd.i32, c1: qd.i32):
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = tile_cls.eye(dtype=qd.f32)
            t[:] = a[r0:r1, c0:c1]
            b[r0:r1, c0:c1] = t
    k(r0, r1, c0, c1)
    want = np.full((rows, cols), -1, np.float32)
    rs, cs = min(r1, rows, r0 + n), min(c1, cols, c0 + n)
    want[r0:rs, c0:cs] = src[r0:rs, c0:cs]
    np.testing.assert_array_equal(b.to_numpy(), want)


def test_3d_slices_ndarray_and_shared(tile_cls) -> None:
    """`a[b, r0:r1, c0:c1]` of an ndarray with a runtime batch, and a SharedArray round trip (Quadrants'
    test_load3d_store3d, test_slice_3d_batch; tile.md's SharedArray support)."""
    n = tile_cls.SIZE
    src = np.random.default_rng(0).standard_normal((3, n, n)).astype(np.float32)
    a = qd.ndarray(qd.f32, (3, n, n))
    a.from_numpy(src)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=3), bi: qd.i32):
        qd.loop_config(block_dim=n)
        for i in range(n):
            sh = qd.simt.block.SharedArray((n, n), qd.f32)
            t = tile_cls.zeros(dtype=qd.f32)
            t[:] = x[bi, 0:n, 0:n]
            sh[0:n, 0:n] = t
            qd.simt.block.sync()
            u = tile_cls.zeros(dtype=qd.f32)
            u[:] = sh[0:n, 0:n]
            x[0, 0:n, 0:n] = u
    k(a, 2)
    np.testing.assert_array_equal(a.to_numpy()[0], src[2])


def test_outer_updates(tile_cls) -> None:
    """t -= qd.outer(a, b) with scalars per thread, with column slices a[r0:r1, col] (zero past r1), and the
    symmetric qd.outer(v, v) (Quadrants' test_ger_sub, test_slice_ger_sub_via_outer, test_vec_proxy_ger_sub_2d)."""
    n = tile_cls.SIZE
    rng = np.random.default_rng(1)
    m0 = rng.standard_normal((n, n)).astype(np.float32)
    cols = rng.standard_normal((n, 3)).astype(np.float32)
    a, c, out = qd.field(qd.f32, (n, n)), qd.field(qd.f32, (n, 3)), qd.field(qd.f32, (n, n))
    a.from_numpy(m0)
    c.from_numpy(cols)
    half = n // 2

    @qd.kernel
    def k():
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = tile_cls.zeros(dtype=qd.f32)
            t[:] = a[0:n, 0:n]
            row = qd.simt.subgroup.invocation_id() % n if qd.static(n <= qd.simt.subgroup.group_size()) \
                else qd.simt.block.thread_idx() % n
            x = c[row, 0]
            y = c[row, 1]
            t -= qd.outer(x, y)
            t -= qd.outer(c[0:half, 2], c[0:n, 2])
            v = c[0:n, 0]
            t -= qd.outer(v, v)
            out[0:n, 0:n] = t
    k()
    c2 = cols[:, 2].copy()
    c2_half = np.where(np.arange(n) < half, c2, 0)
    want = m0 - np.outer(cols[:, 0], cols[:, 1]) - np.outer(c2_half, c2) - np.outer(cols[:, 0], cols[:, 0])
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", [qd.f32, qd.f64], ids=str)
def test_cholesky_and_solve(tile_cls, dt) -> None:
    """cholesky_ gives L (lower) with L L^T = A and leaves the strict upper triangle; solve_triangular_ gives X with
    X L^T = B (Quadrants' test_cholesky, test_trsm)."""
    n = tile_cls.SIZE
    npt = np.float32 if dt == qd.f32 else np.float64
    a_np = _spd(n, 2).astype(npt)
    b_np = np.random.default_rng(3).standard_normal((n, n)).astype(npt)
    a, b, lo, x = (qd.field(dt, (n, n)) for _ in range(4))
    a.from_numpy(a_np)
    b.from_numpy(b_np)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = tile_cls.zeros(dtype=dt)
            t[:] = a[0:n, 0:n]
            t.cholesky_(1e-9)
            lo[0:n, 0:n] = t
            rhs = tile_cls.zeros(dtype=dt)
            rhs[:] = b[0:n, 0:n]
            t.solve_triangular_(rhs)
            x[0:n, 0:n] = rhs
    k()
    got = lo.to_numpy()
    want = np.linalg.cholesky(a_np.astype(np.float64))
    tol = 2e-4 if dt == qd.f32 else 1e-10
    np.testing.assert_allclose(np.tril(got), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(np.triu(got, 1), np.triu(a_np, 1))
    want_x = np.linalg.solve(want, b_np.astype(np.float64).T).T
    np.testing.assert_allclose(x.to_numpy(), want_x, rtol=10 * tol, atol=10 * tol)


def test_cholesky_floors_pivots_per_thread(tile_cls) -> None:
    """eps is read on the pivot's own thread: a per-thread eps floors each pivot by its own value."""
    n = tile_cls.SIZE
    out = qd.field(qd.f32, (n, n))

    @qd.kernel
    def k():
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = tile_cls.zeros(dtype=qd.f32)  # a zero matrix: every pivot is its floor
            row = qd.simt.subgroup.invocation_id() % n if qd.static(n <= qd.simt.subgroup.group_size()) \
                else qd.simt.block.thread_idx() % n
            t.cholesky_(qd.cast(row + 1, qd.f32))
            out[0:n, 0:n] = t
    k()
    np.testing.assert_allclose(np.diag(out.to_numpy()), np.sqrt(np.arange(1, n + 1)), rtol=1e-6)


def test_refusals(tile_cls) -> None:
    """solve_triangular_(lower=False) and a non-float dtype are refused while the kernel compiles; qd.outer is no
    value (Quadrants' test_solve_triangular_upper_raises)."""
    n = tile_cls.SIZE

    @qd.kernel
    def upper():
        qd.loop_config(block_dim=n)
        for i in range(n):
            t = tile_cls.eye(dtype=qd.f32)
            t.solve_triangular_(t, lower=False)

    @qd.kernel
    def ints():
        qd.loop_config(block_dim=n)
        for i in range(n):
            tile_cls.zeros(dtype=qd.i32)
    with pytest.raises(qd.QuadrantsTypeError, match="only lower=True"):
        upper()
    with pytest.raises(qd.QuadrantsTypeError, match="f32 or f64"):
        ints()
    with pytest.raises(TypeError, match="is not a value"):
        _ = qd.outer(1, 2) + qd.outer(1, 2)


def test_size_constant() -> None:
    assert qd.simt.Tile16x16.SIZE == 16 and qd.simt.Tile32x32.SIZE == 32


def test_cpu_tiers_refuse_tiles(arch: _arch.Arch) -> None:
    if arch.subgroup_size() is not None:
        pytest.skip(f"tier {arch.name!r} has subgroups")

    @qd.kernel
    def k():
        for i in range(16):
            qd.simt.Tile16x16.zeros(dtype=qd.f32)
    with pytest.raises(qd.QuadrantsSyntaxError, match="needs a GPU arch with subgroups"):
        k()
