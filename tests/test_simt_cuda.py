"""`qd.simt` on the cuda tier (`qd/jit/nvptx_simt.py`), against numpy: blocks of `qd.loop_config(block_dim=...)`
threads with shared arrays and barriers, the warp as the subgroup (32 lanes), and CUDA's masked warp operations
(`qd.simt.warp`, cuda only). Ported in spirit from Quadrants' tests/python/test_simt.py and test_shared_array.py
(the warp shuffles, votes and matches; the shared-array block reversal and sums). Runs on the device machine
(CI has no GPU: a visible skip there); tests/test_nvptx_simt.py assembles the same operations without one."""


import numpy as np
import pytest

import qd

pytestmark = pytest.mark.archs("cuda")
FULL = 0xFFFFFFFF


def test_thread_ids_and_block_sizes(arch) -> None:
    for bd in (32, 64, 128, 256):
        n = 4 * bd

        @qd.kernel
        def ids(t: qd.types.ndarray(qd.i32, ndim=1), g: qd.types.ndarray(qd.i32, ndim=1),
                lane: qd.types.ndarray(qd.i32, ndim=1)):
            qd.loop_config(block_dim=bd)  # noqa: B023  (compiled and run in this iteration)
            for i in range(n):  # noqa: B023
                t[i] = qd.simt.block.thread_idx()
                g[i] = qd.simt.block.global_thread_idx()
                lane[i] = qd.simt.subgroup.invocation_id()

        t, g, lane = (np.zeros(n, np.int32) for _ in range(3))
        ids(t, g, lane)
        i = np.arange(n)
        np.testing.assert_array_equal(t, i % bd)
        np.testing.assert_array_equal(lane, i % 32)
        assert sorted(g) == list(range(n))  # (the grid-stride loop may give a thread several indices)


def test_shared_reverse_and_block_sum(arch) -> None:
    bd, nblocks = 128, 8
    x = np.random.default_rng(1).standard_normal(bd * nblocks).astype(np.float32)

    @qd.kernel
    def rev(x: qd.types.ndarray(qd.f32, ndim=1), y: qd.types.ndarray(qd.f32, ndim=1),
            s: qd.types.ndarray(qd.f32, ndim=1)):
        qd.loop_config(block_dim=bd)
        for i in range(x.shape[0]):
            sh = qd.simt.block.SharedArray((bd,), qd.f32)
            t = qd.simt.block.thread_idx()
            sh[t] = x[i]
            qd.simt.block.sync()
            y[i] = sh[bd - 1 - t]
            stride = bd // 2
            while stride > 0:
                qd.simt.block.sync()
                if t < stride:
                    sh[t] += sh[t + stride]
                stride //= 2
            qd.simt.block.sync()
            if t == 0:
                s[i // bd] = sh[0]

    y, s = np.zeros_like(x), np.zeros(nblocks, np.float32)
    rev(x, y, s)
    np.testing.assert_array_equal(y, x.reshape(nblocks, bd)[:, ::-1].reshape(-1))
    np.testing.assert_allclose(s, x.reshape(nblocks, bd).sum(1), rtol=1e-5, atol=1e-5)


def test_shared_2d_and_matrix_dtype(arch) -> None:
    bd = 64

    @qd.kernel
    def k(out: qd.types.ndarray(qd.f32, ndim=1), v: qd.types.ndarray(qd.f32, ndim=1)):
        qd.loop_config(block_dim=bd)
        for i in range(2 * bd):
            a = qd.simt.block.SharedArray((bd, 3), qd.f32)
            m = qd.simt.block.SharedArray((bd,), qd.types.vector(3, qd.f32))
            t = qd.simt.block.thread_idx()
            for c in qd.static(range(3)):
                a[t, c] = i * 3.0 + c
            m[t] = qd.Vector([i, 2.0 * i, 3.0 * i])
            qd.simt.block.sync()
            o = (t + 1) % bd
            out[i] = a[o, 0] + a[o, 1] + a[o, 2]
            v[i] = m[o].sum()

    out, v = np.zeros(2 * bd, np.float32), np.zeros(2 * bd, np.float32)
    k(out, v)
    i = np.arange(2 * bd)
    partner = (i // bd) * bd + (i % bd + 1) % bd
    np.testing.assert_array_equal(out, 9.0 * partner + 3.0)
    np.testing.assert_array_equal(v, 6.0 * partner)


def test_sync_counts(arch) -> None:
    bd = 128
    x = (np.random.default_rng(2).random(bd * 4) < 0.3).astype(np.int32)
    x[bd:2 * bd] = 1
    x[2 * bd:3 * bd] = 0

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=1),
          a: qd.types.ndarray(qd.i32, ndim=1), o: qd.types.ndarray(qd.i32, ndim=1)):
        qd.loop_config(block_dim=bd)
        for i in range(x.shape[0]):
            c[i] = qd.simt.block.sync_count_nonzero(x[i])
            a[i] = qd.simt.block.sync_all_nonzero(x[i])
            o[i] = qd.simt.block.sync_any_nonzero(x[i])

    c, a, o = (np.zeros_like(x) for _ in range(3))
    k(x, c, a, o)
    per = x.reshape(4, bd)
    np.testing.assert_array_equal(c, np.repeat(per.sum(1), bd))
    np.testing.assert_array_equal(a, np.repeat(per.all(1), bd))
    np.testing.assert_array_equal(o, np.repeat(per.any(1), bd))


@pytest.mark.parametrize("dtype", [qd.i32, qd.u32, qd.i64, qd.f32, qd.f64])
def test_subgroup_moves(arch, dtype) -> None:
    n = 128
    npd = np.dtype(dtype.np_dtype)
    x = (np.arange(n) * 7 + 3).astype(npd)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype, ndim=1), sh: qd.types.ndarray(dtype, ndim=1), up: qd.types.ndarray(dtype, ndim=1),
          dn: qd.types.ndarray(dtype, ndim=1), xr: qd.types.ndarray(dtype, ndim=1),
          bc: qd.types.ndarray(dtype, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(n):
            lane = qd.simt.subgroup.invocation_id()
            sh[i] = qd.simt.subgroup.shuffle(x[i], (lane + 5) % 32)
            up[i] = qd.simt.subgroup.shuffle_up(x[i], 3)
            dn[i] = qd.simt.subgroup.shuffle_down(x[i], 2)
            xr[i] = qd.simt.subgroup.shuffle_xor(x[i], 6)
            bc[i] = qd.simt.subgroup.broadcast(x[i], 7)

    outs = [np.zeros_like(x) for _ in range(5)]
    k(x, *outs)
    i = np.arange(n)
    base, lane = (i // 32) * 32, i % 32
    np.testing.assert_array_equal(outs[0], x[base + (lane + 5) % 32])
    np.testing.assert_array_equal(outs[1][lane >= 3], x[i - 3][lane >= 3])
    np.testing.assert_array_equal(outs[2][lane < 30], x[i + 2 - 32 * (lane >= 30)][lane < 30])
    np.testing.assert_array_equal(outs[3], x[base + (lane ^ 6)])
    np.testing.assert_array_equal(outs[4], x[base + 7])


def test_ballot_elect_lanemasks(arch) -> None:
    n = 64
    p = (np.arange(n) % 3 == 0).astype(np.int32)

    @qd.kernel
    def k(p: qd.types.ndarray(qd.i32, ndim=1), b: qd.types.ndarray(qd.u64, ndim=1), e: qd.types.ndarray(qd.i32, ndim=1),
          lt: qd.types.ndarray(qd.u32, ndim=1), f: qd.types.ndarray(qd.u32, ndim=1)):
        for i in range(n):
            b[i] = qd.simt.subgroup.ballot(p[i])
            e[i] = qd.simt.subgroup.elect()
            lt[i] = qd.simt.subgroup.lanemask_lt(qd.simt.subgroup.invocation_id())
            f[i] = qd.simt.subgroup.ballot_first_n(p[i], 8)

    b, e = np.zeros(n, np.uint64), np.zeros(n, np.int32)
    lt, f = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    k(p, b, e, lt, f)
    lane = np.arange(n) % 32
    mask = sum(1 << j for j in range(32) if j % 3 == 0)  # warps start at multiples of 32: lanes j with (32w + j) % 3 == 0
    masks = [sum(1 << j for j in range(32) if (32 * w + j) % 3 == 0) for w in range(2)]
    np.testing.assert_array_equal(b, np.repeat(np.array(masks, np.uint64), 32))
    assert mask == masks[0]
    np.testing.assert_array_equal(e, (lane == 0).astype(np.int32))
    np.testing.assert_array_equal(lt, ((1 << lane) - 1).astype(np.uint32))
    np.testing.assert_array_equal(f, np.repeat(np.array([m & 0xFF for m in masks], np.uint32), 32))


def test_warp_operations(arch) -> None:
    """Quadrants' `qd.simt.warp` (cuda only): masked shuffles, votes, ballot, matches, active mask, sync."""
    n = 64
    a = (np.arange(n) // 4).astype(np.int32)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, ndim=1), o: qd.types.ndarray(qd.i32, ndim=2), m: qd.types.ndarray(qd.u32, ndim=2),
          f: qd.types.ndarray(qd.f32, ndim=1)):
        for i in range(n):
            v = a[i]
            o[i, 0] = qd.simt.warp.shfl_sync_i32(FULL, v, 5)
            o[i, 1] = qd.simt.warp.shfl_xor_i32(FULL, v, 4)
            o[i, 2] = qd.simt.warp.shfl_up_i32(FULL, v, 4)
            o[i, 3] = qd.simt.warp.shfl_down_i32(FULL, v, 4)
            o[i, 4] = qd.simt.warp.all_nonzero(FULL, v)
            o[i, 5] = qd.simt.warp.any_nonzero(FULL, v // 15)
            o[i, 6] = qd.simt.warp.unique(FULL, v < 100)
            f[i] = qd.simt.warp.shfl_down_f32(FULL, qd.cast(v, qd.f32) * 0.5, 1)
            m[i, 0] = qd.simt.warp.ballot(v % 2)
            m[i, 1] = qd.simt.warp.match_any(FULL, v)
            m[i, 2] = qd.simt.warp.match_all(FULL, v // 8)  # v // 8 == i // 32: one value per warp
            m[i, 4] = qd.simt.warp.match_all(FULL, v)
            m[i, 3] = qd.simt.warp.active_mask()
            qd.simt.warp.sync(FULL)

    o, m, f = np.zeros((n, 7), np.int32), np.zeros((n, 5), np.uint32), np.zeros(n, np.float32)
    k(a, o, m, f)
    i = np.arange(n)
    base, lane = (i // 32) * 32, i % 32
    np.testing.assert_array_equal(o[:, 0], a[base + 5])
    np.testing.assert_array_equal(o[:, 1], a[base + (lane ^ 4)])
    np.testing.assert_array_equal(o[lane >= 4, 2], a[i - 4][lane >= 4])
    np.testing.assert_array_equal(o[lane < 28, 3], a[np.minimum(i + 4, n - 1)][lane < 28])
    np.testing.assert_array_equal(o[:, 4], np.repeat([0, 1], 32))  # warp 0 holds a zero
    np.testing.assert_array_equal(o[:, 5], np.repeat([0, 1], 32))  # only warp 1 reaches v = 15
    np.testing.assert_array_equal(o[:, 6], 1)
    np.testing.assert_array_equal(f[lane < 31], (a[np.minimum(i + 1, n - 1)] * 0.5)[lane < 31])
    odd = [sum(1 << j for j in range(32) if a[32 * w + j] % 2) for w in range(2)]
    np.testing.assert_array_equal(m[:, 0], np.repeat(np.array(odd, np.uint32), 32))
    np.testing.assert_array_equal(m[:, 1], (0xF << (4 * (lane // 4))).astype(np.uint32))
    np.testing.assert_array_equal(m[:, 2], np.uint32(FULL))
    np.testing.assert_array_equal(m[:, 4], 0)  # v differs within every warp
    np.testing.assert_array_equal(m[:, 3], np.uint32(FULL))


def test_grid_fence_message_passing(arch) -> None:
    """Thread 0 of block 1 writes a value, fences, raises a flag; thread 0 of block 0 spins on the flag (a volatile
    load through an atomic), then reads the value: with `grid.mem_fence` it sees it."""
    data = qd.ndarray(qd.i32, shape=(2,))

    @qd.kernel
    def k(d: qd.types.ndarray(qd.i32, ndim=1)):
        qd.loop_config(block_dim=32)
        for i in range(64):
            if i == 32:
                d[0] = 42
                qd.simt.grid.mem_fence()
                qd.atomic_add(d[1], 1)
            if i == 0:
                while qd.atomic_add(d[1], 0) == 0:
                    pass
                qd.simt.grid.mem_fence()
                d[0] = d[0] + 1

    k(data)
    np.testing.assert_array_equal(data.to_numpy(), [43, 1])


def test_reverse_mode_refuses_simt(arch) -> None:
    x = qd.field(qd.f32, shape=64, needs_grad=True)
    y = qd.field(qd.f32, shape=64, needs_grad=True)

    @qd.kernel
    def k():
        for i in range(64):
            y[i] = qd.simt.subgroup.shuffle(x[i], 0)

    k()
    with pytest.raises(qd.QuadrantsCompilationError, match="cannot be differentiated"):
        k.grad()


def test_shared_array_needs_a_kernel(arch) -> None:
    with pytest.raises(qd.QuadrantsSyntaxError, match="only be called inside"):
        qd.simt.block.SharedArray((4,), qd.f32)


def test_shared_arrays_past_48_kib(arch) -> None:
    """Quadrants' test_large_shared_array in spirit: a block's shared arrays past the 48 KiB of static shared
    memory (dynamic shared memory, the function opted in), as large as `get_max_shared_memory_bytes` allows (Genesis
    sizes its tiles so); run three times: the first launch on the Python path, the later ones through the C
    launcher of the launch plan."""
    bd = 256
    limit = qd.lang.impl.get_max_shared_memory_bytes(is_lowerbound_ok=True)
    cols = min(limit // (4 * bd), 200) - 1  # f32 rows of `cols` per thread: past 48 KiB, under the device's limit
    assert 4 * bd * cols > 48 * 1024

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, ndim=1), out: qd.types.ndarray(qd.f32, ndim=1)):
        qd.loop_config(block_dim=bd)
        for i in range(x.shape[0]):
            sh = qd.simt.block.SharedArray((bd, cols), qd.f32)
            t = qd.simt.block.thread_idx()
            for c in range(cols):
                sh[t, c] = x[i] + c
            qd.simt.block.sync()
            o = bd - 1 - t
            acc = 0.0
            for c in range(cols):
                acc += sh[o, c]
            out[i] = acc

    xs = np.arange(2 * bd, dtype=np.float32)
    x, out = qd.ndarray(qd.f32, shape=(2 * bd,)), qd.ndarray(qd.f32, shape=(2 * bd,))
    x.from_numpy(xs)
    partner = (np.arange(2 * bd) // bd) * bd + (bd - 1 - np.arange(2 * bd) % bd)
    for _ in range(3):
        out.fill(0)
        k(x, out)
        np.testing.assert_allclose(out.to_numpy(), cols * xs[partner] + cols * (cols - 1) / 2, rtol=1e-5)
