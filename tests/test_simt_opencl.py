"""`qd.simt` on the OpenCL tier (`qd/gpu/opencl_simt.py`; PoCL here): block-shared arrays, barriers, thread ids,
fences and the (emulated) subgroup operations, against numpy. PoCL 3.1 has no `cl_khr_subgroups`: qd emulates a
subgroup of 32 consecutive work items through `__local` memory on every OpenCL device, so every subgroup case runs
here."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsCompilationError

pytestmark = pytest.mark.archs("opencl")

SG = 32  # the emulated subgroup (`opencl_simt.SUBGROUP`)


def _blocks(a: np.ndarray, b: int) -> np.ndarray:
    return a.reshape(-1, b)


@pytest.mark.parametrize("block", [32, 64, 128])
def test_reverse_within_a_block_and_thread_ids(arch: Any, block: int) -> None:
    n = 5 * block
    x = qd.ndarray(qd.f32, n)
    y = qd.ndarray(qd.f32, n)
    tid = qd.ndarray(qd.i32, n)
    gid = qd.ndarray(qd.i32, n)

    @qd.kernel
    def rev(x: qd.types.ndarray(), y: qd.types.ndarray(), tid: qd.types.ndarray(), gid: qd.types.ndarray()):
        qd.loop_config(block_dim=block)
        for i in range(n):
            s = qd.simt.block.SharedArray((block,), qd.f32)
            t = qd.simt.block.thread_idx()
            s[t] = x[i]
            qd.simt.block.sync()
            y[i] = s[block - 1 - t]
            tid[i] = t
            gid[i] = qd.simt.block.global_thread_idx()

    for seed in (1, 2):  # the second call through the launch plan (the shared array is never bound)
        xs = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
        x.from_numpy(xs)
        rev(x, y, tid, gid)
        np.testing.assert_array_equal(y.to_numpy(), _blocks(xs, block)[:, ::-1].ravel())
    np.testing.assert_array_equal(tid.to_numpy(), np.arange(n) % block)
    np.testing.assert_array_equal(gid.to_numpy(), np.arange(n))


def test_more_blocks_than_groups_launched(arch: Any) -> None:
    """A range of many more blocks than the grid has groups: each group runs several blocks in turn (grid-stride),
    its barriers reached by all of its work items every time."""
    from qd.runtime import device

    block = 32
    n = block * (device.current().backend.group_limit * 2 + 5)
    x = qd.field(qd.i32, n)
    y = qd.field(qd.i32, n)

    @qd.kernel
    def rotate():
        qd.loop_config(block_dim=block)
        for i in range(n):
            s = qd.simt.block.SharedArray((block,), qd.i32)
            t = qd.simt.block.thread_idx()
            s[t] = x[i]
            qd.simt.block.sync()
            v = s[(t + 1) % block]
            qd.simt.block.sync()  # (the next block's writes wait for this block's reads)
            y[i] = v + qd.simt.subgroup.shuffle(v, qd.u32(0))

    xs = np.arange(n, dtype=np.int32) * 7
    x.from_numpy(xs)
    rotate()
    b = _blocks(xs, block)
    rot = np.roll(b, -1, axis=1)
    np.testing.assert_array_equal(y.to_numpy(), (rot + rot[:, :1]).ravel())


def test_block_sum_through_shared_memory(arch: Any) -> None:
    """A tree over a shared array (a barrier per level), one sum per block; and a shared f32 atomic accumulator."""
    block, n = 64, 64 * 6
    x = qd.field(qd.i32, n)
    tree = qd.field(qd.i32, n // block)
    atom = qd.field(qd.f32, n // block)

    @qd.kernel
    def block_sums():
        qd.loop_config(block_dim=block)
        for i in range(n):
            s = qd.simt.block.SharedArray((block,), qd.i32)
            acc = qd.simt.block.SharedArray((1,), qd.f32)
            t = qd.simt.block.thread_idx()
            s[t] = x[i]
            if t == 0:
                acc[0] = 0.0
            qd.simt.block.sync()
            qd.atomic_add(acc[0], qd.cast(x[i], qd.f32))
            for k in qd.static(range(5, -1, -1)):  # 32, 16, ..., 1
                if t < (1 << k):
                    s[t] += s[t + (1 << k)]
                qd.simt.block.sync()
            if t == 0:
                tree[i // block] = s[0]
                atom[i // block] = acc[0]

    xs = np.random.default_rng(2).integers(-1000, 1000, n).astype(np.int32)
    x.from_numpy(xs)
    block_sums()
    want = _blocks(xs, block).sum(axis=1)
    np.testing.assert_array_equal(tree.to_numpy(), want)
    np.testing.assert_array_equal(atom.to_numpy(), want.astype(np.float32))  # small ints: every order exact


def test_two_dimensional_and_matrix_shared_arrays(arch: Any) -> None:
    block, n = 64, 64 * 3
    x = qd.ndarray(qd.f64, n)
    y = qd.ndarray(qd.f64, n)
    m = qd.Matrix.field(2, 3, qd.f32, n)

    @qd.kernel
    def transpose_and_matrices(x: qd.types.ndarray(), y: qd.types.ndarray()):
        qd.loop_config(block_dim=block)
        for i in range(n):
            s = qd.simt.block.SharedArray((8, 8), qd.f64)
            mats = qd.simt.block.SharedArray((block,), qd.types.matrix(2, 3, qd.f32))
            t = qd.simt.block.thread_idx()
            s[t // 8, t % 8] = x[i]
            mats[t] = qd.Matrix([[t, 1.0, 2.0], [3.0, 4.0, -t]], qd.f32)
            qd.simt.block.sync()
            y[i] = s[t % 8, t // 8]
            m[i] = mats[block - 1 - t]

    xs = np.random.default_rng(3).standard_normal(n)
    x.from_numpy(xs)
    transpose_and_matrices(x, y)
    want = np.stack([b.reshape(8, 8).T.ravel() for b in _blocks(xs, block)]).ravel()
    np.testing.assert_array_equal(y.to_numpy(), want)
    src = block - 1 - (np.arange(n) % block)
    ref = np.zeros((n, 2, 3), np.float32)
    ref[:, 0, 0], ref[:, 0, 1], ref[:, 0, 2] = src, 1, 2
    ref[:, 1, 0], ref[:, 1, 1], ref[:, 1, 2] = 3, 4, -src
    np.testing.assert_array_equal(m.to_numpy(), ref)


def test_shared_atomics_of_several_widths(arch: Any) -> None:
    """Atomics on shared arrays: i32 and i64 builtins, u8 and f16 through their word, f64 and i32 `*` by CAS."""
    block, n = 32, 32 * 4
    out = qd.field(qd.f64, (n // block, 6))

    @qd.kernel
    def atomics():
        qd.loop_config(block_dim=block)
        for i in range(n):
            a = qd.simt.block.SharedArray((1,), qd.i32)
            b = qd.simt.block.SharedArray((1,), qd.i64)
            c = qd.simt.block.SharedArray((4,), qd.u8)
            d = qd.simt.block.SharedArray((2,), qd.f16)
            e = qd.simt.block.SharedArray((1,), qd.f64)
            f = qd.simt.block.SharedArray((1,), qd.i32)
            t = qd.simt.block.thread_idx()
            if t == 0:
                a[0], b[0], e[0], f[0] = 0, 0, 0.0, 1
                for k in qd.static(range(4)):
                    c[k] = 0
                d[0], d[1] = 0.0, 0.0
            qd.simt.block.sync()
            qd.atomic_add(a[0], t)
            qd.atomic_add(b[0], qd.i64(t) << 33)
            qd.atomic_add(c[1], 1)
            qd.atomic_add(d[1], 0.5)
            qd.atomic_add(e[0], 0.25 * t)
            if t < 5:
                qd.atomic_mul(f[0], 3)
            qd.simt.block.sync()
            if t == 0:
                j = i // block
                out[j, 0], out[j, 1], out[j, 2] = a[0], qd.f64(b[0] >> 33), c[1] + 1000 * (c[0] + c[2])
                out[j, 3], out[j, 4], out[j, 5] = d[1] + 100.0 * d[0], e[0], f[0]

    atomics()
    s = block * (block - 1) // 2
    row = [s, s, block, block * 0.5, 0.25 * s, 3 ** 5]
    np.testing.assert_array_equal(out.to_numpy(), np.tile(row, (n // block, 1)))


@pytest.mark.parametrize("block", [32, 96])
def test_sync_count_any_all_nonzero(arch: Any, block: int) -> None:
    n = block * 4
    x = qd.field(qd.i32, n)
    out = qd.field(qd.i32, (n, 3))

    @qd.kernel
    def votes():
        qd.loop_config(block_dim=block)
        for i in range(n):
            p = x[i]
            out[i, 0] = qd.simt.block.sync_count_nonzero(p)
            out[i, 1] = qd.simt.block.sync_any_nonzero(p)
            out[i, 2] = qd.simt.block.sync_all_nonzero(p)

    xs = np.zeros(n, np.int32)
    xs[:block] = 1  # block 0: all
    xs[block + 3] = 7  # block 1: one
    xs[3 * block:] = np.arange(block) % 3  # block 3: two in three; block 2: none
    x.from_numpy(xs)
    votes()
    counts = _blocks(xs != 0, block).sum(axis=1)
    want = np.stack([counts, counts > 0, counts == block], axis=1).astype(np.int32)
    np.testing.assert_array_equal(out.to_numpy(), np.repeat(want, block, axis=0))


def test_fences(arch: Any) -> None:
    """Smoke: the three fences compile and run; a block publishes through global memory past a fence and a sync."""
    block, n = 64, 64 * 2
    buf = qd.field(qd.i32, n)
    out = qd.field(qd.i32, n)

    @qd.kernel
    def fenced():
        qd.loop_config(block_dim=block)
        for i in range(n):
            buf[i] = i * 3
            qd.simt.grid.mem_fence()
            qd.simt.block.mem_fence()
            qd.simt.subgroup.mem_fence()
            qd.simt.block.sync()
            t = qd.simt.block.thread_idx()
            out[i] = buf[i - t + (block - 1 - t)]

    fenced()
    want = np.stack([b[::-1] for b in _blocks(np.arange(n) * 3, block)]).ravel()
    np.testing.assert_array_equal(out.to_numpy(), want)


_SHUFFLE_DTYPES = [(qd.i32, np.int32), (qd.u32, np.uint32), (qd.i64, np.int64), (qd.u64, np.uint64),
                   (qd.f32, np.float32), (qd.f64, np.float64)]


@pytest.mark.parametrize("dt,npdt", _SHUFFLE_DTYPES, ids=[d[1].__name__ for d in _SHUFFLE_DTYPES])
def test_subgroup_moves(arch: Any, dt: Any, npdt: Any) -> None:
    """shuffle, shuffle_xor, shuffle_up, shuffle_down, broadcast against numpy over 32-lane subgroups; a lane off
    the subgroup's ends keeps its own value."""
    block, n = 64, 64 * 2
    x = qd.ndarray(dt, n)
    out = qd.ndarray(dt, (5, n))
    lane = qd.ndarray(qd.i32, n)

    @qd.kernel
    def moves(x: qd.types.ndarray(), out: qd.types.ndarray(), lane: qd.types.ndarray()):
        qd.loop_config(block_dim=block)
        for i in range(n):
            v = x[i]
            ln = qd.simt.subgroup.invocation_id()
            lane[i] = ln
            out[0, i] = qd.simt.subgroup.shuffle(v, qd.u32((ln * 7 + 3) % 32))
            out[1, i] = qd.simt.subgroup.shuffle_xor(v, 5)
            out[2, i] = qd.simt.subgroup.shuffle_up(v, 3)
            out[3, i] = qd.simt.subgroup.shuffle_down(v, 4)
            out[4, i] = qd.simt.subgroup.broadcast(v, qd.u32(9))

    rng = np.random.default_rng(4)
    xs = (rng.standard_normal(n) * 1e6).astype(npdt) if npdt().dtype.kind == "f" else \
        rng.integers(0, 2 ** 31, n).astype(npdt) * npdt(3)
    x.from_numpy(xs)
    moves(x, out, lane)
    ln = np.arange(n) % SG
    base = np.arange(n) - ln
    up = np.where(ln >= 3, np.arange(n) - 3, np.arange(n))
    down = np.where(ln + 4 < SG, np.arange(n) + 4, np.arange(n))
    want = np.stack([xs[base + (ln * 7 + 3) % SG], xs[base + (ln ^ 5)], xs[up], xs[down], xs[base + 9]])
    np.testing.assert_array_equal(lane.to_numpy(), ln)
    np.testing.assert_array_equal(out.to_numpy(), want)


def test_subgroup_size_ballot_and_partial_subgroups(arch: Any) -> None:
    """group_size() is 32; ballot's u64 mask; a block of 48 has a 16-lane second subgroup (as a partial warp),
    whose ballot has 16 bits and whose shuffles from lanes past its end read the lane's own value."""
    block, n = 48, 48 * 3
    x = qd.field(qd.i32, n)
    out = qd.field(qd.u64, n)
    shuf = qd.field(qd.i32, n)
    size = qd.field(qd.i32, ())

    @qd.kernel
    def ballots():
        qd.loop_config(block_dim=block)
        for i in range(n):
            size[None] = qd.simt.subgroup.group_size()
            out[i] = qd.simt.subgroup.ballot(x[i])
            shuf[i] = qd.simt.subgroup.shuffle(i, qd.u32(qd.simt.subgroup.invocation_id() + 8))

    xs = np.random.default_rng(5).integers(0, 2, n).astype(np.int32)
    x.from_numpy(xs)
    ballots()
    assert size[None] == SG
    lid = np.arange(n) % block
    first = np.arange(n) - lid % SG
    width = np.minimum(SG, block - (lid - lid % SG))
    want = [sum(int(xs[f + k]) << k for k in range(w)) for f, w in zip(first, width)]
    np.testing.assert_array_equal(out.to_numpy(), np.array(want, np.uint64))
    src = (lid % SG + 8) % SG  # (a lane index is taken modulo 32; one past a partial subgroup reads its own)
    np.testing.assert_array_equal(shuf.to_numpy(), np.where(src < width, first + src, np.arange(n)))


def test_subgroup_sync_and_elect(arch: Any) -> None:
    block, n = 64, 64 * 2
    out = qd.field(qd.i32, n)
    cell = qd.field(qd.i32, n // SG)

    @qd.kernel
    def elected():
        qd.loop_config(block_dim=block)
        for i in range(n):
            if qd.simt.subgroup.elect():
                cell[i // SG] = i
            qd.simt.subgroup.sync()
            out[i] = cell[i // SG]

    elected()
    np.testing.assert_array_equal(out.to_numpy(), np.arange(n) // SG * SG)


def test_default_block_size_and_several_tasks(arch: Any) -> None:
    """Without block_dim a task's block is the tier's default (256 work items); two tasks of one kernel each get
    their own block size and shared array."""
    n = 512
    y = qd.field(qd.i32, n)
    z = qd.field(qd.i32, n)

    @qd.kernel
    def two():
        for i in range(n):
            s = qd.simt.block.SharedArray((256,), qd.i32)
            s[qd.simt.block.thread_idx()] = i
            qd.simt.block.sync()
            y[i] = s[255 - qd.simt.block.thread_idx()]
        qd.loop_config(block_dim=32)
        for i in range(n):
            s = qd.simt.block.SharedArray((32,), qd.i32)
            s[qd.simt.block.thread_idx()] = i
            qd.simt.block.sync()
            z[i] = s[31 - qd.simt.block.thread_idx()]

    two()
    np.testing.assert_array_equal(y.to_numpy(), _blocks(np.arange(n), 256)[:, ::-1].ravel())
    np.testing.assert_array_equal(z.to_numpy(), _blocks(np.arange(n), 32)[:, ::-1].ravel())


def test_shared_array_bound_check_in_debug_mode(arch: Any) -> None:
    """The failing work item does not leave its group waiting at the barrier after the access (it goes on with an
    in-bounds index: PoCL had dropped the failure of one that returned early), and the launch raises."""
    qd.init(arch=qd.opencl, debug=True, log_level="warn")
    out = qd.field(qd.i32, 64)

    @qd.kernel
    def off_by_one(k: qd.i32):
        qd.loop_config(block_dim=32)
        for i in range(64):
            s = qd.simt.block.SharedArray((32,), qd.i32)
            t = qd.simt.block.thread_idx()
            s[t + k * (t // 31)] = i
            qd.simt.block.sync()
            out[i] = s[31 - t]

    off_by_one(0)
    np.testing.assert_array_equal(out.to_numpy(), _blocks(np.arange(64), 32)[:, ::-1].ravel())
    with pytest.raises(QuadrantsAssertionError,
                       match=r"index 32 of axis 0 is out of \[0, 32\) for shared\d+ with shape \(32,\)"):
        off_by_one(1)


def test_too_much_shared_memory_is_a_compile_error(arch: Any) -> None:
    from qd.runtime import device

    limit = int(device.current().backend.device.local_mem_size)
    x = qd.field(qd.f32, 64)

    @qd.kernel
    def huge():
        qd.loop_config(block_dim=32)
        for i in range(64):
            s = qd.simt.block.SharedArray((limit // 4 + 1,), qd.f32)
            s[i] = 1.0
            x[i] = s[i]

    with pytest.raises(QuadrantsCompilationError, match=rf"huge: .*needs {limit + 8} bytes.* has {limit} per block"):
        huge()
