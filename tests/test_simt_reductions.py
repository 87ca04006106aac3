"""qd.simt's composite operations against numpy: the subgroup reductions, scans, segmented reductions and votes
(`qd/lang/simt/reductions.py`) and the block reductions and scans (`qd/lang/simt/block_reductions.py`).

Sized by the device's subgroup (`qd.simt.subgroup.group_size()`: 32 on CUDA, 8 on lavapipe): a launch covers four
subgroups, so tiles, subgroups and blocks are checked apart. Values are small integers (floats holding them too),
so sums and products are exact in any order and compare equal. A tier without subgroups (interp, cpu) is a visible
skip, except for the test that it refuses these operations. Cases ported from Quadrants' tests/python/test_simt.py
say so.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np
import pytest

import qd
from qd.base import arch as _arch
from qd.errors import QuadrantsArchError

sg = qd.simt.subgroup
blk = qd.simt.block

_SLOW = pytest.mark.slow  # (each case compiles kernels: ~2 s apiece on PoCL; the default suite keeps i32 and f32)
DTYPES = [qd.i32, pytest.param(qd.u32, marks=_SLOW), pytest.param(qd.i64, marks=_SLOW), qd.f32,
          pytest.param(qd.f64, marks=_SLOW)]
NP_OPS: dict[str, Callable] = {"add": operator.add, "mul": operator.mul, "min": min, "max": max,
                               "and": operator.and_, "or": operator.or_, "xor": operator.xor}


@pytest.fixture
def gpu(arch: _arch.Arch) -> int:
    """A tier with subgroups; yields its subgroup size."""
    if arch.subgroup_size() is None:
        pytest.skip(f"tier {arch.name!r} has no subgroups: qd.simt runs on the GPU tiers only")
    return sg.group_size()


def _np(dt: qd.types.dtypes.DataType) -> np.dtype:
    return np.dtype(dt.np_dtype)


def _values(n: int, dt: qd.types.dtypes.DataType, seed: int = 0, lo: int = -9, hi: int = 10) -> np.ndarray:
    """Varied small integers (non-negative for unsigned dtypes), not monotone, so min/max depend on every lane."""
    rng = np.random.default_rng(seed)
    if not dt.is_signed and dt.is_int:
        lo = 0
    return rng.integers(lo, hi, n).astype(_np(dt))


def _run_lanes(fn: Callable, src: np.ndarray, dt: qd.types.dtypes.DataType, out_dt=None, extra=None) -> np.ndarray:
    """dst[i] = fn(src[i]) (or fn(src[i], extra[i])) over len(src) threads in blocks of one subgroup."""
    n = len(src)
    a = qd.field(dt, n)
    b = qd.field(out_dt or dt, n)
    h = qd.field(qd.i32, n)
    a.from_numpy(src)
    if extra is not None:
        h.from_numpy(np.asarray(extra, np.int32))

    @qd.kernel
    def k():
        qd.loop_config(block_dim=sg.group_size())
        for i in range(n):
            if qd.static(extra is None):
                b[i] = fn(a[i])
            else:
                b[i] = fn(a[i], h[i])
    k()
    return b.to_numpy()


def _tiles(x: np.ndarray, size: int) -> list[np.ndarray]:
    return [x[t:t + size] for t in range(0, len(x), size)]


def _fold(op: Callable, xs, dt) -> object:
    acc = xs[0]
    for v in xs[1:]:
        acc = op(acc, v)
    return _np(dt).type(acc)


# ---------------------------------------------------------------- reductions

@pytest.mark.parametrize("kind", ["add", "min", "max"])
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_reduce_tiled_first_lane(gpu: int, kind: str, dt) -> None:
    """`reduce_<kind>_tiled`: each tile's first lane holds the tile's reduction, for every tile size
    (Quadrants' test_subgroup_reduce_{add,min,max}_tiled)."""
    n = 4 * gpu
    src = _values(n, dt)
    for log2 in range(sg.log2_group_size() + 1):
        fn = getattr(sg, f"reduce_{kind}_tiled")
        got = _run_lanes(lambda v, log2=log2, fn=fn: fn(v, log2), src, dt)
        size = 1 << log2
        for t, tile in enumerate(_tiles(src, size)):
            assert got[t * size] == _fold(NP_OPS[kind], tile, dt), (kind, log2, t)


@pytest.mark.parametrize("kind", ["add", "min", "max"])
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_reduce_all_tiled_every_lane(gpu: int, kind: str, dt) -> None:
    """`reduce_all_<kind>_tiled`: every lane of a tile holds the tile's reduction
    (Quadrants' test_subgroup_reduce_all_{add,min,max}_tiled)."""
    n = 4 * gpu
    src = _values(n, dt, seed=1)
    for log2 in range(sg.log2_group_size() + 1):
        fn = getattr(sg, f"reduce_all_{kind}_tiled")
        got = _run_lanes(lambda v, log2=log2, fn=fn: fn(v, log2), src, dt)
        want = np.concatenate([[_fold(NP_OPS[kind], t, dt)] * len(t) for t in _tiles(src, 1 << log2)])
        np.testing.assert_array_equal(got, want.astype(_np(dt)), err_msg=f"{kind} log2_size={log2}")


@pytest.mark.parametrize("kind", ["add", "min", "max", "all_add", "all_min", "all_max"])
def test_whole_subgroup_forms(gpu: int, kind: str) -> None:
    """The unsuffixed forms are the tiled ones with log2_size = log2_group_size()."""
    src = _values(4 * gpu, qd.i32, seed=2)
    got = _run_lanes(getattr(sg, f"reduce_{kind}"), src, qd.i32)
    want = _run_lanes(lambda v: getattr(sg, f"reduce_{kind}_tiled")(v, sg.log2_group_size()), src, qd.i32)
    np.testing.assert_array_equal(got, want)


def test_reduce_vector_values(gpu: int) -> None:
    """A vector reduces entry by entry."""
    n = 2 * gpu
    a = qd.Vector.field(2, qd.f32, n)
    b = qd.Vector.field(2, qd.f32, n)
    src = np.stack([np.arange(n), -np.arange(n)], axis=1).astype(np.float32)
    a.from_numpy(src)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=sg.group_size())
        for i in range(n):
            b[i] = sg.reduce_all_add(a[i])
    k()
    got = b.to_numpy()
    for s in range(2):
        rows = slice(s * gpu, (s + 1) * gpu)
        np.testing.assert_array_equal(got[rows], np.broadcast_to(src[rows].sum(axis=0), (gpu, 2)))


# ---------------------------------------------------------------- scans

def _scan_ref(src: np.ndarray, size: int, kind: str, exclusive: bool, dt) -> np.ndarray:
    out = np.empty_like(src)
    op = NP_OPS[kind]
    ident = _identity(kind, dt)
    for t0 in range(0, len(src), size):
        acc = None
        for k in range(size):
            v = src[t0 + k]
            new = v if acc is None else op(acc, v)
            out[t0 + k] = (ident if acc is None else acc) if exclusive else new
            acc = new
    return out


def _identity(kind: str, dt) -> object:
    npt = _np(dt)
    if kind in ("add", "or", "xor"):
        return npt.type(0)
    if kind == "mul":
        return npt.type(1)
    if kind == "and":
        return npt.type(-1) if dt.is_signed else np.iinfo(npt).max
    if dt.is_float:
        return npt.type(np.inf if kind == "min" else -np.inf)
    info = np.iinfo(npt)
    return info.max if kind == "min" else info.min


def _case(kind: str, dt) -> object:
    return (kind, dt) if dt in (qd.i32, qd.f32) else pytest.param(kind, dt, marks=_SLOW)


SCAN_CASES = [_case(k, dt) for k in ("add", "mul", "min", "max") for dt in (qd.i32, qd.u32, qd.i64, qd.f32, qd.f64)] + \
             [_case(k, dt) for k in ("and", "or", "xor") for dt in (qd.i32, qd.u32, qd.i64)]


@pytest.mark.parametrize("exclusive", [False, True], ids=["inclusive", "exclusive"])
@pytest.mark.parametrize("kind,dt", SCAN_CASES, ids=lambda x: str(x))
def test_scans_tiled(gpu: int, kind: str, dt, exclusive: bool) -> None:
    """`inclusive_<op>_tiled` / `exclusive_<op>_tiled` per tile, the identity on a tile's first lane when
    exclusive (Quadrants' test_subgroup_inclusive_*/exclusive_* cases)."""
    n = 4 * gpu
    if kind == "mul":  # products of up to group_size() factors: 1, 2 and -1 keep them small and exact
        src = np.random.default_rng(3).choice([1, 1, 2, -1] if dt.is_signed or dt.is_float else [1, 1, 2],
                                              n).astype(_np(dt))
    else:
        src = _values(n, dt, seed=4, lo=-9 if kind not in ("and", "or", "xor") else -60, hi=60)
    name = f"{'exclusive' if exclusive else 'inclusive'}_{kind}"
    for log2 in range(sg.log2_group_size() + 1):
        fn = getattr(sg, name + "_tiled")
        got = _run_lanes(lambda v, log2=log2, fn=fn: fn(v, log2), src, dt)
        np.testing.assert_array_equal(got, _scan_ref(src, 1 << log2, kind, exclusive, dt),
                                      err_msg=f"{name} log2_size={log2}")
    got = _run_lanes(getattr(sg, name), src, dt)
    np.testing.assert_array_equal(got, _scan_ref(src, gpu, kind, exclusive, dt), err_msg=name)


def test_bitwise_scan_refuses_floats(gpu: int) -> None:
    x = qd.field(qd.f32, gpu)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=sg.group_size())
        for i in range(gpu):
            x[i] = sg.inclusive_or_tiled(x[i], 1)
    with pytest.raises(qd.QuadrantsTypeError, match="integer"):
        k()


# ---------------------------------------------------------------- segmented reductions

def _segmented_ref(src: np.ndarray, heads: np.ndarray, size: int, kind: str, dt) -> np.ndarray:
    """Lane i: op over the lanes from the nearest head at or below i in its tile (else the tile's first lane)."""
    out = np.empty_like(src)
    for i in range(len(src)):
        t0 = i - i % size
        h = max([t0] + [j for j in range(t0, i + 1) if heads[j]])
        out[i] = _fold(NP_OPS[kind], src[h:i + 1], dt)
    return out


def _head_pattern(n: int) -> np.ndarray:
    """Quadrants' heads {0, 3, 7, 12, 19, 25} of 32 lanes, repeated over n lanes (so some tiles start without a
    head: the tile's first lane is then the implicit head)."""
    return np.array([1 if i % 32 in {0, 3, 7, 12, 19, 25} else 0 for i in range(n)], np.int32)


@pytest.mark.parametrize("kind", ["add", "min", "max"])
@pytest.mark.parametrize("dt", [qd.i32, qd.f32, pytest.param(qd.i64, marks=_SLOW), pytest.param(qd.f64, marks=_SLOW)],
                         ids=str)
def test_segmented_reduce_tiled(gpu: int, kind: str, dt) -> None:
    """`segmented_reduce_<kind>_tiled` against the reference for every tile size
    (Quadrants' test_subgroup_segmented_reduce_{add,min,max}_tiled)."""
    n = 4 * gpu
    src = _values(n, dt, seed=5)
    heads = _head_pattern(n)
    for log2 in range(sg.log2_group_size() + 1):
        fn = getattr(sg, f"segmented_reduce_{kind}_tiled")
        got = _run_lanes(lambda v, h, log2=log2, fn=fn: fn(v, h, log2), src, dt, extra=heads)
        np.testing.assert_array_equal(got, _segmented_ref(src, heads, 1 << log2, kind, dt),
                                      err_msg=f"{kind} log2_size={log2}")


@pytest.mark.parametrize("kind", ["add", "min", "max"])
def test_segmented_reduce_no_heads_is_a_scan(gpu: int, kind: str) -> None:
    """No head anywhere: one segment per tile, the inclusive scan (Quadrants' ..._no_heads)."""
    n = 4 * gpu
    src = _values(n, qd.i32, seed=6)
    got = _run_lanes(lambda v, h: getattr(sg, f"segmented_reduce_{kind}")(v, h), src, qd.i32, extra=np.zeros(n))
    np.testing.assert_array_equal(got, _scan_ref(src, gpu, kind, False, qd.i32))


@pytest.mark.parametrize("kind", ["add", "min", "max"])
def test_segmented_reduce_every_lane_a_head(gpu: int, kind: str) -> None:
    """Every lane a head: each lane its own segment, the value itself (Quadrants' ..._every_lane_is_head)."""
    n = 4 * gpu
    src = _values(n, qd.i32, seed=7)
    got = _run_lanes(lambda v, h: getattr(sg, f"segmented_reduce_{kind}_tiled")(v, h, sg.log2_group_size()),
                     src, qd.i32, extra=np.ones(n))
    np.testing.assert_array_equal(got, src)


def test_segmented_reduce_truthy_heads(gpu: int) -> None:
    """Any nonzero head counts, negative ones too (Quadrants' ..._truthy_predicate)."""
    n = 4 * gpu
    src = np.arange(1, n + 1, dtype=np.int32)
    heads = _head_pattern(n)
    binary = _run_lanes(lambda v, h: sg.segmented_reduce_add(v, h), src, qd.i32, extra=heads)
    truthy = _run_lanes(lambda v, h: sg.segmented_reduce_add(v, h), src, qd.i32, extra=heads * -42)
    np.testing.assert_array_equal(binary, truthy)
    np.testing.assert_array_equal(binary, _segmented_ref(src, heads, gpu, "add", qd.i32))


# ---------------------------------------------------------------- votes

@pytest.mark.parametrize("vote", ["all_true", "any_true", "all_equal"])
def test_votes_tiled(gpu: int, vote: str) -> None:
    """Votes land on every lane of the tile as i32 0/1 (Quadrants' test_subgroup_{all,any}_true_tiled,
    all_equal_tiled)."""
    n = 4 * gpu
    rng = np.random.default_rng(8)
    for log2 in range(sg.log2_group_size() + 1):
        size = 1 << log2
        # tiles that are all set, all clear and mixed; values 3 and -5 are truthy too
        src = np.where(rng.random(n) < 0.5, rng.choice([3, -5, 1], n), 0).astype(np.int32)
        src[:size] = 7
        src[size:2 * size] = 0
        fn = getattr(sg, f"{vote}_tiled")
        got = _run_lanes(lambda v, log2=log2, fn=fn: fn(v, log2), src, qd.i32)
        test = {"all_true": lambda t: bool(np.all(t != 0)), "any_true": lambda t: bool(np.any(t != 0)),
                "all_equal": lambda t: bool(np.all(t == t[0]))}[vote]
        want = np.concatenate([[int(test(t))] * len(t) for t in _tiles(src, size)]).astype(np.int32)
        np.testing.assert_array_equal(got, want, err_msg=f"{vote} log2_size={log2}")


def test_all_equal_floats_compare_as_numbers(gpu: int) -> None:
    """all_equal uses the dtype's ==: -0.0 equals 0.0, NaN differs from itself."""
    n = 2 * gpu
    src = np.zeros(n, np.float32)
    src[1] = -0.0
    src[gpu:] = np.nan
    got = _run_lanes(sg.all_equal, src, qd.f32, out_dt=qd.i32)
    np.testing.assert_array_equal(got, [1] * gpu + [0] * gpu)


# ---------------------------------------------------------------- Genesis' call shapes

@qd.func
def _block_sum(value, log2_size: qd.template()):
    """genesis/utils/simt.py's qd_block_sum: the sum from the tile's first lane, on every lane."""
    total = sg.reduce_all_add_tiled(value, log2_size)
    return sg.shuffle(total, qd.u32(sg.invocation_id() >> log2_size << log2_size))


@qd.func
def _segment_sum(tid, slot, value, log2_size: qd.template()):
    """genesis/utils/simt.py's qd_segmented_sum: heads where a lane's slot differs from the lane before."""
    prev = sg.shuffle_up(slot, qd.u32(1))
    is_head = 1
    if tid > 0 and prev == slot:
        is_head = 0
    return sg.segmented_reduce_add_tiled(value, is_head, log2_size)


def test_genesis_call_shapes(gpu: int) -> None:
    """Genesis' wrappers (utils/simt.py) as @qd.func with a template log2_size, sized to this subgroup."""
    n = 4 * gpu
    log2 = sg.log2_group_size()
    src = _values(n, qd.f32, seed=9)
    slots = np.repeat(np.arange(n // 3 + 1), 3)[:n].astype(np.int32)
    a, s = qd.field(qd.f32, n), qd.field(qd.i32, n)
    tot, seg, vote = qd.field(qd.f32, n), qd.field(qd.f32, n), qd.field(qd.i32, n)
    a.from_numpy(src)
    s.from_numpy(slots)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=sg.group_size())
        for i in range(n):
            tid = sg.invocation_id()
            tot[i] = _block_sum(a[i], log2)
            seg[i] = _segment_sum(tid, s[i], a[i], log2)
            vote[i] = sg.any_true_tiled(a[i] > 5.0, log2) * 2 + sg.all_true_tiled(a[i] > -100.0, log2)
    k()
    for t0 in range(0, n, gpu):
        np.testing.assert_array_equal(tot.to_numpy()[t0:t0 + gpu], np.full(gpu, src[t0:t0 + gpu].sum()))
        assert np.all(vote.to_numpy()[t0:t0 + gpu] == 2 * int(np.any(src[t0:t0 + gpu] > 5)) + 1)
    heads = np.array([1 if i % gpu == 0 or slots[i] != slots[i - 1] else 0 for i in range(n)])
    np.testing.assert_array_equal(seg.to_numpy(), _segmented_ref(src, heads, gpu, "add", qd.f32))


# ---------------------------------------------------------------- refusals

def test_tile_larger_than_the_subgroup_is_refused(gpu: int) -> None:
    x = qd.field(qd.i32, gpu)
    too_big = sg.log2_group_size() + 1

    @qd.kernel
    def k():
        for i in range(gpu):
            x[i] = sg.reduce_add_tiled(x[i], too_big)
    with pytest.raises(qd.QuadrantsSyntaxError, match=f"log2_size={too_big}.*subgroup of this device has {gpu}"):
        k()


def test_cpu_tiers_refuse_reductions(arch: _arch.Arch) -> None:
    """Where the tier has no subgroups the kernel does not compile: QuadrantsArchError (a ValueError)."""
    if arch.subgroup_size() is not None:
        pytest.skip(f"tier {arch.name!r} has subgroups")
    x = qd.field(qd.i32, 8)

    @qd.kernel
    def k():
        for i in range(8):
            x[i] = sg.reduce_all_add_tiled(x[i], 2)
    with pytest.raises(QuadrantsArchError, match="not supported for arch"):
        k()


# ---------------------------------------------------------------- block reductions and scans

def _block_dims(size: int) -> list[int]:
    """One subgroup, a few (slots scanned by one subgroup) and more subgroups than a subgroup has lanes (slots
    folded in a loop), within 1024 threads."""
    dims = [size, 2 * size, size * size]
    if size * size * 2 <= 1024:
        dims.append(size * size * 2)
    return [d for d in dims if d <= 1024]


def _run_block(fn: Callable, src: np.ndarray, dt, block_dim: int) -> np.ndarray:
    n = len(src)
    a, b = qd.field(dt, n), qd.field(dt, n)
    a.from_numpy(src)

    @qd.kernel
    def k():
        qd.loop_config(block_dim=block_dim)
        for i in range(n):
            b[i] = fn(a[i])
    k()
    return b.to_numpy()


@pytest.mark.parametrize("kind", ["add", "min", "max"])
@pytest.mark.parametrize("dt", [qd.i32, qd.f32, pytest.param(qd.f64, marks=_SLOW)], ids=str)
def test_block_reduce(gpu: int, kind: str, dt) -> None:
    """block.reduce_<kind> on thread 0 of each block and block.reduce_all_<kind> on every thread
    (Quadrants' test_block_reduce, test_block_reduce_all)."""
    for bd in _block_dims(gpu):
        src = _values(2 * bd, dt, seed=bd)
        once = _run_block(lambda v, bd=bd: getattr(blk, f"reduce_{kind}")(v, bd, dt), src, dt, bd)
        every = _run_block(lambda v, bd=bd: getattr(blk, f"reduce_all_{kind}")(v, bd, dt), src, dt, bd)
        for b0 in range(0, len(src), bd):
            want = _fold(NP_OPS[kind], src[b0:b0 + bd], dt)
            assert once[b0] == want, (kind, bd, b0)
            np.testing.assert_array_equal(every[b0:b0 + bd], np.full(bd, want, _np(dt)), err_msg=f"{kind} {bd}")


@pytest.mark.parametrize("kind", ["add", "min", "max"])
@pytest.mark.parametrize("exclusive", [False, True], ids=["inclusive", "exclusive"])
@pytest.mark.parametrize("dt", [qd.i32, qd.f32], ids=str)
def test_block_scans(gpu: int, kind: str, exclusive: bool, dt) -> None:
    """block.inclusive_<kind> / exclusive_<kind> over whole blocks, the identity on thread 0 when exclusive
    (Quadrants' test_block_inclusive, test_block_exclusive_add, test_block_exclusive_minmax)."""
    name = f"{'exclusive' if exclusive else 'inclusive'}_{kind}"
    for bd in _block_dims(gpu):
        src = _values(2 * bd, dt, seed=bd + 1)
        got = _run_block(lambda v, bd=bd: getattr(blk, name)(v, bd, dt), src, dt, bd)
        np.testing.assert_array_equal(got, _scan_ref(src, bd, kind, exclusive, dt), err_msg=f"{name} {bd}")


@qd.func
def _bit_or(a, b):
    return a | b


def test_block_generic_op_and_identity(gpu: int) -> None:
    """block.reduce_all / inclusive_scan / exclusive_scan with a @qd.func op and an explicit identity."""
    bd = 2 * gpu
    src = (1 << (np.arange(2 * bd) % 31)).astype(np.int32)
    red = _run_block(lambda v: blk.reduce_all(v, bd, _bit_or, qd.i32), src, qd.i32, bd)
    inc = _run_block(lambda v: blk.inclusive_scan(v, bd, _bit_or, qd.i32), src, qd.i32, bd)
    exc = _run_block(lambda v: blk.exclusive_scan(v, bd, _bit_or, 0, qd.i32), src, qd.i32, bd)
    for b0 in range(0, 2 * bd, bd):
        np.testing.assert_array_equal(red[b0:b0 + bd], np.bitwise_or.reduce(src[b0:b0 + bd]))
    np.testing.assert_array_equal(inc, _scan_ref(src, bd, "or", False, qd.i32))
    np.testing.assert_array_equal(exc, _scan_ref(src, bd, "or", True, qd.i32))


def test_block_reduce_in_a_loop_reuses_its_slots(gpu: int) -> None:
    """Calls in a runtime loop reuse one call's shared slots: the barrier after the last read keeps the next
    iteration's writes from racing the reads."""
    bd = 4 * gpu
    n = 2 * bd
    src = _values(n, qd.i32, seed=10)
    a, b = qd.field(qd.i32, n), qd.field(qd.i32, n)
    a.from_numpy(src)

    @qd.kernel
    def k(rounds: qd.i32):
        qd.loop_config(block_dim=bd)
        for i in range(n):
            acc = 0
            for r in range(rounds):
                acc += blk.reduce_all_add(a[i] * (r + 1), bd, qd.i32)
            b[i] = acc
    k(5)
    for b0 in range(0, n, bd):
        np.testing.assert_array_equal(b.to_numpy()[b0:b0 + bd], np.full(bd, 15 * src[b0:b0 + bd].sum()))


def test_block_dim_must_be_a_multiple_of_the_subgroup(gpu: int) -> None:
    x = qd.field(qd.i32, 64)

    @qd.kernel
    def k():
        for i in range(64):
            x[i] = blk.reduce_add(x[i], gpu + 1, qd.i32)
    with pytest.raises(qd.QuadrantsSyntaxError, match="multiple of the subgroup size"):
        k()
