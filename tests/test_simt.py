"""`qd.simt` primitives on the GPU tiers, against numpy: block barriers and shared arrays, thread ids, block votes,
fences, subgroup lane ids, shuffles, broadcasts and ballots; the CPU tiers' refusal; a shared array's bound checks
in debug mode; the device limits (shared memory, block size).

Several cases are ports of Quadrants' tests/python/test_simt.py and test_shared_array.py (named in each docstring),
adapted to the device's subgroup size (`qd.simt.subgroup.group_size()`: 8 on lavapipe, 32 on NVIDIA), which
Quadrants' tests take to be 32 or 64. Lanes are taken to be consecutive threads of a block (lane = thread_idx %
group_size), which `test_lane_is_thread_idx_mod_group_size` checks first.

A GPU tier runs these once it lowers `ir.Simt` (it then registers its device's subgroup size,
`qd.base.arch.set_subgroup_size`); until then its cases are skipped, naming the missing lowering.
"""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsArchError, QuadrantsAssertionError, QuadrantsCompilationError
from tests.conftest import init_arch

sg = qd.simt.subgroup
block = qd.simt.block


def _simt_arch(arch) -> int:
    """Skips a tier that has no `qd.simt` (visibly, saying why); returns its subgroup size."""
    if not arch.is_gpu:
        pytest.skip(f"arch {arch.name} has no thread groups: qd.simt is refused there (test_refused_on_cpu_tiers)")
    size = arch.subgroup_size()
    if size is None:
        pytest.skip(f"the {arch.name} tier has no lowering of ir.Simt yet (it registers no subgroup size)")
    return size


# ------------------------------------------------------------------ block: barriers and shared arrays

@pytest.mark.parametrize("bd", [32, 64, 128])
def test_block_reverse_through_shared(arch, bd):
    """Each block reverses its slice of the input through a shared array (a write, `block.sync()`, a read of
    another thread's element)."""
    _simt_arch(arch)
    n = 4 * bd

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            s = block.SharedArray((bd,), qd.i32)
            t = block.thread_idx()
            s[t] = x[i]
            block.sync()
            out[i] = s[bd - 1 - t]

    x = np.random.default_rng(1).integers(-1000, 1000, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    k(x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, bd)[:, ::-1].reshape(-1))


@pytest.mark.parametrize("dt", [qd.i32, qd.f32, qd.f64, qd.i64])
def test_block_sum_tree_in_shared(arch, dt):
    """A block sum: a halving tree in shared memory with a barrier per level (Quadrants' block reduce, by hand);
    thread 0 of each block writes its block's sum."""
    _simt_arch(arch)
    bd, blocks = 64, 5
    n = bd * blocks

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            s = block.SharedArray((bd,), dt)
            t = block.thread_idx()
            s[t] = x[i]
            block.sync()
            step = bd // 2
            while step > 0:
                if t < step:
                    s[t] += s[t + step]
                block.sync()
                step //= 2
            if t == 0:
                out[i // bd] = s[0]

    npd = dt.np_dtype
    x = ((np.arange(n) % 17 - 5) * (1.5 if dt.is_float else 1)).astype(npd)
    out = np.zeros(blocks, npd)
    k(x, out)
    np.testing.assert_allclose(out, x.reshape(blocks, bd).sum(axis=1), rtol=1e-6)


def test_shared_2d_transpose(arch):
    """A 2-D shared array: each block of 64 threads writes an 8x8 tile row-major and reads it back transposed."""
    _simt_arch(arch)
    bd, n = 64, 256

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            tile = block.SharedArray((8, 8), qd.f32)
            t = block.thread_idx()
            tile[t // 8, t % 8] = x[i]
            block.sync()
            out[i] = tile[t % 8, t // 8]

    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    k(x, out)
    np.testing.assert_array_equal(out, x.reshape(-1, 8, 8).transpose(0, 2, 1).reshape(-1))


def test_shared_matrix_dtype(arch):
    """A shared array of vec3 (Quadrants' test_shared_array_tensor_type): every component of every element is
    stored and read back by the neighbouring thread, so a wrong element stride shows."""
    _simt_arch(arch)
    bd, n = 16, 64
    y = qd.Vector.field(3, dtype=qd.f32, shape=n)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=bd)
        for i in range(n):
            t = block.thread_idx()
            s = block.SharedArray((bd,), qd.math.vec3)
            s[t] = qd.Vector([i * 1.0, i + 0.5, -i * 2.0])
            block.sync()
            y[i] = s[(t + 1) % bd]

    k()
    src = np.arange(n).reshape(-1, bd)
    src = np.roll(src, -1, axis=1).reshape(-1).astype(np.float32)
    np.testing.assert_array_equal(y.to_numpy(), np.stack([src, src + 0.5, -src * 2.0], axis=1))


@pytest.mark.parametrize("dt", [qd.i8, qd.i16, qd.i32, qd.u8, qd.u16, qd.u32, qd.i64, qd.u64, qd.f16, qd.f32,
                                qd.f64, qd.u1])
def test_shared_dtypes(arch, dt):
    """Every dtype round-trips through a shared array read by the neighbouring thread (Quadrants'
    test_shared_array_dtypes; narrow dtypes take a 32-bit word each in workgroup memory)."""
    _simt_arch(arch)
    bd, n = 32, 128
    out_dt = qd.f32 if dt in (qd.f16, qd.u1) else dt

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            t = i % bd
            s = block.SharedArray((bd,), dt)
            s[t] = qd.cast(x[i], dt)
            block.sync()
            out[i] = qd.cast(s[(t + 1) % bd], out_dt)

    neighbour = np.roll(np.arange(n).reshape(-1, bd) % bd, -1, axis=1).reshape(-1)
    if dt.is_float:
        x = (np.arange(n) % bd * 0.1523).astype(np.float32)
        want = (neighbour * 0.1523).astype(np.float16 if dt is qd.f16 else np.float32)
    else:
        x = (np.arange(n) % bd - (3 if dt.is_signed else 0)).astype(np.int32)
        want = neighbour - (3 if dt.is_signed else 0)
        if dt is qd.u1:
            want = (want != 0)
    out = np.zeros(n, out_dt.np_dtype)
    k(x, out)
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("dt", [qd.i32, qd.i8, qd.u16, qd.i64, qd.f16, qd.f32, qd.f64])
@pytest.mark.parametrize("op", ["add", "sub", "min", "max"])
def test_shared_atomics(arch, dt, op):
    """Every thread of a block applies an atomic to element 0 of a shared array, seeded with thread 0's value
    (Quadrants' test_shared_array_atomics / test_shared_array_float_atomics); every thread reads the result after a
    barrier."""
    _simt_arch(arch)
    bd, n = 32, 128
    atomic = getattr(qd, f"atomic_{op}")
    scale = 0.25 if dt.is_float else 1

    @qd.kernel
    def k(out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            t = i % bd
            s = block.SharedArray((bd,), dt)
            v = qd.cast(t * scale - (0 if dt in (qd.u16,) else 3), dt)
            if t == 0:
                s[0] = v
            block.sync()
            if t != 0:
                atomic(s[0], v)
            block.sync()
            out[i] = qd.cast(s[0], qd.f64)

    vals = np.arange(bd) * scale - (0 if dt is qd.u16 else 3)
    want = {"add": vals.sum(), "sub": vals[0] - vals[1:].sum(), "min": vals.min(), "max": vals.max()}[op]
    if dt in (qd.i8, qd.u16):
        want = np.asarray(want).astype(dt.np_dtype)  # (the wrap-around of a narrow int)
    out = np.zeros(n, np.float64)
    k(out)
    np.testing.assert_allclose(out, np.full(n, float(want)), rtol=1e-3 if dt is qd.f16 else 1e-12)


def test_shared_int_atomic_mul_and_cas(arch):
    """atomic_mul (a compare-and-swap loop) and atomic_cas / atomic_exchange on shared elements (Quadrants'
    test_shared_array_int_atomic_mul)."""
    _simt_arch(arch)
    bd, n = 4, 64

    @qd.kernel
    def k(out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            t = i % bd
            s = block.SharedArray((2,), qd.i32)
            if t == 0:
                s[0] = 1
                s[1] = -1
            block.sync()
            qd.atomic_mul(s[0], t + 1)
            qd.atomic_cas(s[1], -1, t)  # exactly one thread wins
            block.sync()
            out[i, 0] = s[0]
            out[i, 1] = s[1]
            block.sync()
            out[i, 2] = qd.atomic_exchange(s[1], 100 + t)

    out = np.zeros((n, 3), np.int32)
    k(out)
    assert (out[:, 0] == 24).all()
    won = out[:, 1].reshape(-1, bd)
    assert ((won == won[:, :1]) & (won >= 0) & (won < bd)).all()
    olds = out[:, 2].reshape(-1, bd)  # a block's exchanges chain: the cas winner's value, then all but one 100 + t
    for b in range(n // bd):
        assert len(set(olds[b])) == bd and won[b, 0] in olds[b]
        assert set(olds[b]) - {won[b, 0]} <= {100 + t for t in range(bd)}


# ------------------------------------------------------------------ thread ids, votes, fences

@pytest.mark.parametrize("bd", [32, 64, 128])
def test_thread_ids(arch, bd):
    """thread_idx is the index in the block, global_thread_idx the index among all launched threads (Quadrants'
    test_block_thread_idx_multi_block / test_block_global_thread_idx_multi_block), several blocks; the range
    starts at 8, so the loop index is 8 + global_thread_idx."""
    _simt_arch(arch)
    n = 6 * bd

    @qd.kernel
    def k(out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(8, 8 + n):
            out[i - 8, 0] = block.thread_idx()
            out[i - 8, 1] = block.global_thread_idx()

    out = np.full((n, 2), -1, np.int32)
    k(out)
    np.testing.assert_array_equal(out[:, 0], np.arange(n) % bd)
    np.testing.assert_array_equal(out[:, 1], np.arange(n))


@pytest.mark.parametrize("which", ["count", "any", "all"])
def test_block_votes(arch, which):
    """sync_count_nonzero / sync_any_nonzero / sync_all_nonzero per block of 64 (Quadrants' test_sync_*_nonzero),
    for blocks with no, some and every predicate set."""
    _simt_arch(arch)
    bd, blocks = 64, 4
    n = bd * blocks
    fn = getattr(block, f"sync_{which}_nonzero")

    @qd.kernel
    def k(p: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            out[i] = fn(p[i])

    p = np.zeros((blocks, bd), np.int32)
    p[1, [3, 17, 60]] = [1, -4, 9]
    p[2, :] = 2
    p[3, 5] = 1
    out = np.zeros(n, np.int32)
    k(p.reshape(-1), out)
    per = {"count": (p != 0).sum(axis=1), "any": (p != 0).any(axis=1), "all": (p != 0).all(axis=1)}[which]
    np.testing.assert_array_equal(out, np.repeat(per.astype(np.int32), bd))


def test_block_sync_orders_field_writes(arch):
    """Thread 0 of the block writes last (after a long loop); after block.sync() every thread reads its value from
    a field (Quadrants' test_block_sync; the barrier orders buffer memory too)."""
    _simt_arch(arch)
    n = 256
    a = qd.field(qd.u32, shape=n)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=n)
        for i in range(n):
            for j in range(n - i):
                a[i] = j
            block.sync()
            if i > 0:
                a[i] = a[0]

    k()
    np.testing.assert_array_equal(a.to_numpy(), np.full(n, n - 1))


def test_grid_fence_message_passing(arch):
    """Blocks of one thread each publish a[i] = 1, fence, then count themselves with an atomic; the last one sums
    every a[j] into a prefix sum (Quadrants' test_grid_mem_fence): its result is deterministic when the fence
    makes every earlier write visible before the count."""
    _simt_arch(arch)
    n = 1000
    a = qd.field(qd.u32, shape=n)
    counter = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        qd.loop_config(block_dim=1)
        for i in range(n):
            a[i] = 1
            qd.simt.grid.mem_fence()
            if qd.atomic_add(counter[None], 1) == n - 1:
                for j in range(1, n):
                    a[j] += a[j - 1]

    k()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(1, n + 1))


def test_block_fence_smoke_and_divergent(arch):
    """block.mem_fence() and subgroup fences/syncs compile and run, the block fence also on one thread only (it
    does not wait for the others: Quadrants' test_block_mem_fence_divergent_control_flow)."""
    _simt_arch(arch)
    n = 64
    a = qd.field(qd.i32, shape=n)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=32)
        for i in range(n):
            t = block.thread_idx()
            if t == 0:
                block.mem_fence()
            a[i] = t
            block.mem_fence()
            sg.sync()
            sg.mem_fence()
            block.sync()

    k()
    np.testing.assert_array_equal(a.to_numpy(), np.arange(n) % 32)


# ------------------------------------------------------------------ subgroups

def test_lane_is_thread_idx_mod_group_size(arch):
    """invocation_id() is thread_idx % group_size() (what the subgroup tests below assume), group_size() is the
    device's size, and elect() is 1 exactly on lane 0 (Quadrants' test_subgroup_elect)."""
    size = _simt_arch(arch)
    n = 256

    @qd.kernel
    def k(out: qd.types.ndarray()):
        qd.loop_config(block_dim=128)
        for i in range(n):
            out[i, 0] = sg.invocation_id()
            out[i, 1] = sg.group_size()
            out[i, 2] = sg.elect()

    out = np.zeros((n, 3), np.int32)
    k(out)
    assert size >= 4 and size & (size - 1) == 0
    np.testing.assert_array_equal(out[:, 0], np.arange(n) % 128 % size)
    assert (out[:, 1] == size).all()
    np.testing.assert_array_equal(out[:, 2], (np.arange(n) % size == 0).astype(np.int32))


_SHUFFLED = [qd.i32, qd.u32, qd.i64, qd.u64, qd.f32, qd.f64]


def _lanes(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per thread: its lane and the index of its subgroup's lane 0."""
    i = np.arange(n)
    return i % size, i - i % size


def _values(dt, n: int) -> np.ndarray:
    v = (np.arange(n) * 37 % 101).astype(np.float64)
    if dt.is_float:
        return (v * 0.75 - 20).astype(dt.np_dtype)
    if dt.is_signed:
        return (v - 50).astype(dt.np_dtype) * (1 << 33 if dt.bits == 64 else 1)
    return v.astype(dt.np_dtype) + dt.np_dtype.type(1 << 40 if dt.bits == 64 else 0)


@pytest.mark.parametrize("dt", _SHUFFLED)
def test_shuffles(arch, dt):
    """shuffle (to a per-lane lane), shuffle_xor, shuffle_up / shuffle_down by 1 and 2 (only the lanes whose source
    lane exists), broadcast of a constant lane and of a uniform computed lane, broadcast_first (Quadrants'
    test_subgroup_shuffle_*), in each dtype a shuffle moves."""
    size = _simt_arch(arch)
    n = 128

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray(), w: qd.i32):
        qd.loop_config(block_dim=64)
        for i in range(n):
            lane = sg.invocation_id()
            v = x[i]
            out[i, 0] = sg.shuffle(v, (lane * 3 + 1) % sg.group_size())
            out[i, 1] = sg.shuffle_xor(v, 1)
            out[i, 2] = sg.shuffle_xor(v, sg.group_size() - 1)
            out[i, 3] = sg.shuffle_up(v, 1)
            out[i, 4] = sg.shuffle_down(v, 2)
            out[i, 5] = sg.broadcast(v, 3)
            out[i, 6] = sg.broadcast(v, w)
            out[i, 7] = sg.broadcast_first(v)

    x = _values(dt, n)
    out = np.zeros((n, 8), dt.np_dtype)
    k(x, out, size - 1)
    lane, base = _lanes(n, size)
    np.testing.assert_array_equal(out[:, 0], x[base + (lane * 3 + 1) % size])
    np.testing.assert_array_equal(out[:, 1], x[base + (lane ^ 1)])
    np.testing.assert_array_equal(out[:, 2], x[base + (lane ^ (size - 1))])
    up, down = lane >= 1, lane + 2 < size
    np.testing.assert_array_equal(out[up, 3], x[np.arange(n)[up] - 1])
    np.testing.assert_array_equal(out[down, 4], x[np.arange(n)[down] + 2])
    np.testing.assert_array_equal(out[:, 5], x[base + 3])
    np.testing.assert_array_equal(out[:, 6], x[base + size - 1])
    np.testing.assert_array_equal(out[:, 7], x[base])


def test_shuffle_down_tree_sum(arch):
    """A subgroup sum by a shuffle_down tree over log2(group_size()) steps: lane 0 holds its subgroup's sum
    (Quadrants' test_subgroup_shuffle_down_reduction, over the whole subgroup)."""
    size = _simt_arch(arch)
    n = 256

    @qd.kernel
    def k(x: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=128)
        for i in range(n):
            v = x[i]
            for j in qd.static(range(sg.log2_group_size())):
                v += sg.shuffle_down(v, sg.group_size() >> (j + 1))
            out[i] = v

    x = np.arange(n, dtype=np.int64) * 3 - 100
    out = np.zeros(n, np.int64)
    k(x, out)
    np.testing.assert_array_equal(out[::size], x.reshape(-1, size).sum(axis=1))


def test_ballot_and_lanemasks(arch):
    """ballot is the u64 mask of the subgroup's lanes with a nonzero predicate (every lane sees it); ballot(0) is 0;
    ballot_first_n keeps lanes below n; lanemask_* are the closed forms (Quadrants' test_subgroup_ballot_* and
    test_subgroup_lanemask_*)."""
    size = _simt_arch(arch)
    n = 128

    @qd.kernel
    def k(p: qd.types.ndarray(), m: qd.types.ndarray(), masks: qd.types.ndarray()):
        qd.loop_config(block_dim=64)
        for i in range(n):
            lane = sg.invocation_id()
            m[i, 0] = sg.ballot(p[i])
            m[i, 1] = sg.ballot(0)
            m[i, 2] = sg.ballot(1)
            m[i, 3] = sg.ballot_first_n(p[i], 3)
            masks[i, 0] = sg.lanemask_eq(lane)
            masks[i, 1] = sg.lanemask_lt(lane)
            masks[i, 2] = sg.lanemask_le(lane)
            masks[i, 3] = sg.lanemask_gt(lane)
            masks[i, 4] = sg.lanemask_ge(lane)

    p = (np.arange(n) * 7 % 5 == 1).astype(np.int32) * np.where(np.arange(n) % 3 == 0, -2, 1)
    m = np.zeros((n, 4), np.uint64)
    masks = np.zeros((n, 5), np.uint32)
    k(p, m, masks)
    lane, base = _lanes(n, size)
    bits = [sum(1 << j for j in range(size) if p[b + j] != 0) for b in base]
    np.testing.assert_array_equal(m[:, 0], np.array(bits, np.uint64))
    assert (m[:, 1] == 0).all()
    assert (m[:, 2] == np.uint64((1 << size) - 1)).all()
    np.testing.assert_array_equal(m[:, 3], np.array(bits, np.uint64) & np.uint64(0b111))
    one = (np.uint32(1) << lane.astype(np.uint32))
    np.testing.assert_array_equal(masks[:, 0], one)
    np.testing.assert_array_equal(masks[:, 1], one - np.uint32(1))
    np.testing.assert_array_equal(masks[:, 2], one | (one - np.uint32(1)))
    np.testing.assert_array_equal(masks[:, 3], ~(one | (one - np.uint32(1))))
    np.testing.assert_array_equal(masks[:, 4], ~(one - np.uint32(1)))


def test_shuffle_vector_value(arch):
    """A vector is shuffled componentwise."""
    size = _simt_arch(arch)
    n = 32
    y = qd.Vector.field(2, dtype=qd.f32, shape=n)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=32)
        for i in range(n):
            y[i] = sg.shuffle_xor(qd.Vector([i * 1.0, -i * 2.0]), 1)

    k()
    src = (np.arange(n) ^ 1).astype(np.float32)
    assert size >= 2
    np.testing.assert_array_equal(y.to_numpy(), np.stack([src, -2 * src], axis=1))


# ------------------------------------------------------------------ refusals, checks, limits

@pytest.mark.parametrize("which", ["SharedArray", "sync", "shuffle", "invocation_id"])
def test_refused_on_cpu_tiers(arch, which):
    """The CPU tiers have no thread groups: a kernel using qd.simt fails to compile with QuadrantsArchError (a
    ValueError), naming the operation and the arch."""
    if arch.is_gpu:
        pytest.skip(f"arch {arch.name} has thread groups (the refusal is the CPU tiers')")

    @qd.kernel
    def k(x: qd.types.ndarray()):
        for i in range(4):
            if qd.static(which == "SharedArray"):
                s = block.SharedArray((4,), qd.f32)
                s[i] = 1.0
            elif qd.static(which == "sync"):
                block.sync()
            elif qd.static(which == "shuffle"):
                x[i] = sg.shuffle(x[i], 0)
            else:
                x[i] = sg.invocation_id()

    with pytest.raises(QuadrantsArchError) as e:
        k(np.zeros(4, np.int32))
    assert isinstance(e.value, ValueError)
    assert arch.name in str(e.value) and which in str(e.value)


def test_shared_bound_check_in_debug(arch):
    """With debug=True an index past a shared array's end fails the launch with the array, the index and the
    thread; without it nothing is checked (in bounds, the same kernel is right)."""
    _simt_arch(arch)
    init_arch(arch, debug=True)
    bd, n = 32, 64

    @qd.kernel
    def k(off: qd.types.ndarray(), out: qd.types.ndarray()):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            s = block.SharedArray((bd,), qd.i32)
            t = block.thread_idx()
            s[t + off[i]] = i
            block.sync()
            out[i] = s[bd - 1 - t]

    off, out = np.zeros(n, np.int32), np.zeros(n, np.int32)
    k(off, out)
    np.testing.assert_array_equal(out, np.arange(n).reshape(-1, bd)[:, ::-1].reshape(-1))
    off[40] = 30
    with pytest.raises(QuadrantsAssertionError, match=r"index 38 of axis 0 is out of \[0, 32\) for shared"):
        k(off, out)


def test_shared_memory_limit(arch):
    """Shared arrays past the device's workgroup memory fail to compile, naming the kernel, the bytes asked and the
    limit."""
    _simt_arch(arch)
    if arch.name != "vulkan":
        pytest.skip("the limit's message is the vulkan tier's")
    from qd.runtime import device

    limit = device.runtime("vulkan").backend.caps.shared_bytes
    words = limit // 4 + 1

    @qd.kernel
    def too_big(out: qd.types.ndarray()):
        qd.loop_config(block_dim=32)
        for i in range(32):
            s = block.SharedArray((words,), qd.f32)
            s[i] = 1.0
            out[i] = s[i]

    with pytest.raises(QuadrantsCompilationError, match=rf"too_big.*{4 * words} bytes.*limit of {limit} bytes"):
        too_big(np.zeros(32, np.float32))


def _with_caps(monkeypatch, **changes):
    """The vulkan backend's caps with `changes` (a smaller device than this one) for the rest of the test."""
    import dataclasses

    from qd.runtime import device

    backend = device.runtime("vulkan").backend
    monkeypatch.setattr(backend, "caps", dataclasses.replace(backend.caps, **changes))


def test_block_dim_limit(arch, monkeypatch):
    """A block_dim past the device's invocations per workgroup fails to compile, naming both (lavapipe allows the
    frontend's 1024: a device of 64 is simulated)."""
    _simt_arch(arch)
    if arch.name != "vulkan":
        pytest.skip("the limit's message is the vulkan tier's")
    _with_caps(monkeypatch, max_local_size=64)

    @qd.kernel
    def wide(out: qd.types.ndarray()):
        qd.loop_config(block_dim=128)
        for i in range(128):
            out[i] = block.thread_idx()

    with pytest.raises(QuadrantsCompilationError, match=r"wide: qd.loop_config\(block_dim=128\).*64 invocations"):
        wide(np.zeros(128, np.int32))


@pytest.mark.parametrize("op", ["shuffle_up", "ballot"])
def test_missing_subgroup_operations(arch, monkeypatch, op):
    """A device without an operation class in compute shaders (simulated: basic operations only) refuses the
    kernel, naming the operation and the class."""
    _simt_arch(arch)
    if arch.name != "vulkan":
        pytest.skip("the message is the vulkan tier's")
    _with_caps(monkeypatch, subgroup_ops=0x1)

    @qd.kernel
    def k(out: qd.types.ndarray()):
        qd.loop_config(block_dim=32)
        for i in range(32):
            if qd.static(op == "ballot"):
                out[i] = qd.cast(sg.ballot(i % 2), qd.i32)
            else:
                out[i] = sg.shuffle_up(i, 1) + sg.invocation_id()

    with pytest.raises(QuadrantsArchError, match=rf"qd.simt {op} \(kernel k\) needs the Vulkan device's "
                                                 rf"{'ballot' if op == 'ballot' else 'shuffle_relative'} subgroup"):
        k(np.zeros(32, np.int32))


def test_block_dim_in_cache_key(arch, tmp_path):
    """Kernels that differ only in block_dim, through the on-disk SPIR-V cache: each block_dim gets its own entry
    (a stale hit would give the other's thread ids), the same one hits."""
    _simt_arch(arch)
    init_arch(arch, offline_cache=True, offline_cache_file_path=str(tmp_path))
    def make(bd: int):
        @qd.kernel
        def k(out: qd.types.ndarray()):
            qd.loop_config(block_dim=bd)
            for i in range(128):
                out[i] = block.thread_idx()
        return k

    entries = []
    for bd in (16, 64, 16):
        out = np.zeros(128, np.int32)
        make(bd)(out)
        np.testing.assert_array_equal(out, np.arange(128) % bd)
        entries.append(len(list(tmp_path.rglob("*.meta"))))
    if arch.name == "vulkan":  # (one SPIR-V entry per kernel; the CUDA cache holds PTX and cubin entries)
        assert entries == [1, 2, 2]  # one entry per block_dim; the third kernel is the first one's (a hit)
    else:
        assert entries[0] < entries[1] == entries[2]


def test_subgroup_size_pinned_where_it_varies(arch, monkeypatch):
    """On a device whose subgroup size may vary per pipeline (simulated on lavapipe, whose range is the one size 8:
    `VK_EXT_subgroup_size_control` turned on as if min < max), a task using subgroup operations is compiled with the
    size its kernel was compiled against, and full subgroups where its block is a multiple of it; other tasks are
    not pinned."""
    size = _simt_arch(arch)
    if arch.name != "vulkan":
        pytest.skip("VK_EXT_subgroup_size_control is the vulkan tier's")
    from qd.base.abi import PRINT_WORDS
    from qd.gpu import vulkan, vulkan_tier

    @qd.kernel
    def k(x: qd.types.ndarray()):
        qd.loop_config(block_dim=2 * size)
        for i in range(8 * size):
            x[i] = sg.shuffle_xor(i, 1)
        qd.loop_config(block_dim=size // 2)
        for i in range(8 * size):
            x[i] += sg.invocation_id()
        for i in range(8 * size):
            x[i] += 1

    x = np.zeros(8 * size, np.int32)
    k(x)
    lane = np.arange(8 * size) % (size // 2) % size
    np.testing.assert_array_equal(x, (np.arange(8 * size) ^ 1) + lane + 1)
    plain = vulkan.Device._subgroups

    def varying(self, physical, sub, exts):
        return {**plain(self, physical, sub, exts), "control": True, "full": True, "max_subgroups": 64}
    monkeypatch.setattr(vulkan.Device, "_subgroups", varying)
    be = vulkan_tier.VulkanBackend()
    made = []
    make = be.dev.pipeline
    monkeypatch.setattr(be.dev, "pipeline", lambda *a, **kw: made.append(kw) or make(*a, **kw))
    try:
        be.release(be.compile(k._last_ck.ir, False, PRINT_WORDS))
    finally:
        be.dev.close()
    assert made == [{"push_bytes": 8, "subgroup_size": size, "full_subgroups": True},
                    {"push_bytes": 8, "subgroup_size": size, "full_subgroups": False}, {"push_bytes": 8}]


def test_deprecated_subgroup_names_warn_once(monkeypatch):
    """`subgroup.barrier()`, `memory_barrier()` and `ballot_full_subgroup()` forward to their new names and warn
    once per process, as Quadrants (its test_subgroup_*_deprecation_warn_once reset the same flags)."""
    import warnings as _w

    from qd.lang.simt import subgroup as sg

    calls = []
    monkeypatch.setattr(sg, "sync", lambda: calls.append("sync"))
    monkeypatch.setattr(sg, "mem_fence", lambda: calls.append("fence"))
    monkeypatch.setattr(sg, "ballot", lambda p: calls.append("ballot") or p)
    for flag in ("_barrier_deprecation_warned", "_memory_barrier_deprecation_warned",
                 "_ballot_full_subgroup_deprecation_warned"):
        monkeypatch.setattr(sg, flag, False)
    with _w.catch_warnings(record=True) as records:
        _w.simplefilter("always", DeprecationWarning)
        for _ in range(3):
            sg.barrier()
            sg.memory_barrier()
            assert sg.ballot_full_subgroup(7) == 7
    msgs = [str(r.message) for r in records if issubclass(r.category, DeprecationWarning)]
    assert len(msgs) == 3 and "subgroup.sync()" in msgs[0] and "mem_fence()" in msgs[1] and "ballot()" in msgs[2]
    assert calls == ["sync", "fence", "ballot"] * 3


def test_data_type_size():
    """`qd._lib.core.data_type_size` (Quadrants' tests size shared arrays with it)."""
    import numpy as np

    from qd._lib.core import data_type_size

    for dt in (qd.i8, qd.u16, qd.f32, qd.i64, qd.f64):
        assert data_type_size(dt) == np.dtype(dt.np_dtype).itemsize
    assert data_type_size(qd.types.matrix(2, 3, qd.f32)) == 24
