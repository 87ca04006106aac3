"""Code shapes of the SPIR-V emitter (`qd/gpu/spirv.py`, `spirv_atomics.py`) on the vulkan tier: reductions that
meet per workgroup and grid-stride loops that run several indices interleaved, checked against numpy and by what
the emitted modules contain. lavapipe's loop limit turns per-workgroup reductions off (an invocation may leave
early there), so the test that runs them lifts the limit for its small launches.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import numpy as np
import pytest

import qd
from qd.base.abi import PRINT_WORDS
from qd.gpu import spirv
from qd.gpu.spirv_atomics import workgroup_reduces
from qd.gpu.spirv_defs import Op as S

pytestmark = pytest.mark.archs("vulkan")

SIZES = (1, 5, 255, 256, 257, 4099, 100003)


def _opcodes(words: list[int]) -> list[int]:
    out, i = [], 5  # after the module header
    while i < len(words):
        out.append(words[i] & 0xFFFF)
        i += words[i] >> 16
    return out


def _caps() -> spirv.Caps:
    from qd.runtime import device

    return device.current().backend.caps


def _program(kernel: Any) -> Any:
    return next(iter(kernel._last_ck.device.values())).prog


@pytest.fixture
def no_loop_limit(arch: Any) -> Iterator[Any]:
    """The vulkan backend without a driver loop limit (lavapipe's is never reached by these small launches)."""
    from qd.runtime import device

    be = device.current().backend
    saved = (be.caps, be.loop_limit)
    be.caps, be.loop_limit = dataclasses.replace(be.caps, loop_limit=0), 0
    try:
        yield be
    finally:
        qd.sync()
        be.caps, be.loop_limit = saved


@pytest.mark.parametrize("n", SIZES)
def test_reductions_meet_per_workgroup(arch: Any, no_loop_limit: Any, n: int) -> None:
    if not no_loop_limit.caps.subgroup_arith:
        pytest.skip("the device has no subgroup arithmetic")

    @qd.kernel
    def reduce(x: qd.types.ndarray(qd.f32, 1), k: qd.types.ndarray(qd.i32, 1), s: qd.types.ndarray(qd.f32, 0),
               t: qd.types.ndarray(qd.i64, 0), lo: qd.types.ndarray(qd.i32, 0), hi: qd.types.ndarray(qd.u32, 0),
               bits: qd.types.ndarray(qd.i32, 0), d: qd.types.ndarray(qd.f32, 0)):
        for i in range(x.shape[0]):
            s[None] += x[i] * x[i]
            t[None] -= qd.cast(k[i], qd.i64) * 3
            qd.atomic_min(lo[None], k[i])
            qd.atomic_max(hi[None], qd.cast(k[i] + 70000, qd.u32))
            bits[None] ^= k[i]
            d[None] -= x[i]

    rng = np.random.default_rng(n)
    xs = rng.standard_normal(n).astype(np.float32)
    ks = rng.integers(-60000, 60000, n).astype(np.int32)
    x, k = qd.ndarray(qd.f32, n), qd.ndarray(qd.i32, n)
    x.from_numpy(xs)
    k.from_numpy(ks)
    s, t, d = qd.ndarray(qd.f32, ()), qd.ndarray(qd.i64, ()), qd.ndarray(qd.f32, ())
    lo, hi, bits = qd.ndarray(qd.i32, ()), qd.ndarray(qd.u32, ()), qd.ndarray(qd.i32, ())
    lo.fill(2**31 - 1)
    reduce(x, k, s, t, lo, hi, bits, d)
    task = _program(reduce).kernel.tasks[0]
    assert task.local_size == spirv.REDUCE_LOCAL_SIZE and S.ControlBarrier in _opcodes(task.words)
    assert int(t.to_numpy()) == -3 * int(ks.astype(np.int64).sum())
    assert int(lo.to_numpy()) == int(ks.min()) and int(hi.to_numpy()) == int(ks.max()) + 70000
    assert int(bits.to_numpy()) == int(np.bitwise_xor.reduce(ks))
    want = float((xs.astype(np.float64) ** 2).sum())
    assert abs(float(s.to_numpy()) - want) <= 1e-5 * max(1.0, want)
    assert abs(float(d.to_numpy()) + float(xs.astype(np.float64).sum())) <= 1e-5 * max(1.0, float(np.abs(xs).sum()))


def test_reductions_stay_per_subgroup_where_an_invocation_may_leave(arch: Any) -> None:
    """A check (debug bound checks, asserts) or a driver loop limit can end an invocation before the barriers."""
    from qd.runtime import device

    caps = dataclasses.replace(device.current().backend.caps, loop_limit=0, subgroup_arith=True)

    def task_of(debug: bool) -> Any:
        qd.init(arch=arch, debug=debug, log_level="warn")

        @qd.kernel
        def total(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 0)):
            for i in range(x.shape[0]):
                s[None] += x[i]

        x, s = qd.ndarray(qd.f32, 300), qd.ndarray(qd.f32, ())
        x.fill(1.0)
        total(x, s)
        assert float(s.to_numpy()) == 300.0
        return total._last_ck.ir.tasks[0]

    plain, checked = task_of(False), task_of(True)
    assert workgroup_reduces(plain, caps)
    assert not workgroup_reduces(checked, caps)
    assert not workgroup_reduces(plain, dataclasses.replace(caps, loop_limit=65535))
    assert not workgroup_reduces(plain, dataclasses.replace(caps, subgroup_arith=False))
    qd.init(arch=arch, debug=False, log_level="warn")


@pytest.fixture
def bounded_grid(arch: Any) -> Iterator[Any]:
    """The vulkan backend compiling as for a GPU's bounded grid (lavapipe's gives one invocation per index)."""
    from qd.runtime import device

    be = device.current().backend
    saved = be.caps
    be.caps = dataclasses.replace(be.caps, per_index_grid=False)
    try:
        yield be
    finally:
        qd.sync()
        be.caps = saved


@pytest.mark.parametrize("n", SIZES)
def test_interleaved_iterations_match_numpy(arch: Any, bounded_grid: Any, n: int) -> None:
    """A straight-line body (branches, locals, atomics) runs `UNROLL` indices per grid-stride iteration."""
    @qd.kernel
    def body(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), h: qd.types.ndarray(qd.i32, 1),
             a: qd.f32):
        for i in range(x.shape[0]):
            v = a * x[i]
            if v > 0.5:
                v = v - 1.0
            else:
                v = v * v
            y[i] = v + y[i]
            qd.atomic_add(h[i % 7], 1)

    rng = np.random.default_rng(n)
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y, h = qd.ndarray(qd.f32, n), qd.ndarray(qd.f32, n), qd.ndarray(qd.i32, 7)
    x.from_numpy(xs)
    y.from_numpy(ys)
    body(x, y, h, 1.5)
    v = np.float32(1.5) * xs
    v = np.where(v > np.float32(0.5), v - np.float32(1.0), v * v).astype(np.float32)
    np.testing.assert_array_equal(y.to_numpy(), (v + ys).astype(np.float32))
    np.testing.assert_array_equal(h.to_numpy(), np.bincount(np.arange(n) % 7, minlength=7))
    ir = body._last_ck.ir
    emitter = spirv.FnEmitter(spirv.KernelGen(ir, _caps(), False, PRINT_WORDS), ir.tasks[0])
    assert emitter.unroll() == max(1, spirv.UNROLL)
    one = dataclasses.replace(_caps(), per_index_grid=True)  # one index per invocation: nothing to interleave
    assert spirv.FnEmitter(spirv.KernelGen(ir, one, False, PRINT_WORDS), ir.tasks[0]).unroll() == 1


def test_bodies_that_must_run_one_index_at_a_time(arch: Any) -> None:
    """Inner loops and random numbers keep one index per iteration (their state is per invocation), and so do
    bodies with transcendentals (long already)."""
    @qd.kernel
    def looped(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            for _ in range(3):
                x[i] += 1.0

    @qd.kernel
    def drawn(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            x[i] = qd.random()

    @qd.kernel
    def waved(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 0)):
        for i in range(x.shape[0]):
            s[None] += qd.sin(x[i])  # hundreds of instructions: interleaving would only grow the module

    x, s = qd.ndarray(qd.f32, 64), qd.ndarray(qd.f32, ())
    looped(x)
    drawn(x)
    assert np.all(x.to_numpy() < 1.0)
    waved(x, s)
    assert abs(float(s.to_numpy()) - float(np.sin(x.to_numpy().astype(np.float64)).sum())) < 1e-4
    for k in (looped, drawn, waved):
        ir = k._last_ck.ir
        assert spirv.FnEmitter(spirv.KernelGen(ir, _caps(), False, PRINT_WORDS), ir.tasks[0]).unroll() == 1


def test_interleaved_iterations_of_narrow_types(arch: Any, bounded_grid: Any) -> None:
    """Each interleaved index converts its own f16, u1 and i8 values (stored as half bits, bytes)."""
    n = 4099

    @qd.kernel
    def narrow(h: qd.types.ndarray(qd.f16, 1), b: qd.types.ndarray(qd.u1, 1), c: qd.types.ndarray(qd.i8, 1),
               out: qd.types.ndarray(qd.f32, 1)):
        for i in range(h.shape[0]):
            v = qd.cast(h[i], qd.f32) * 2.0
            if b[i]:
                v += qd.cast(c[i], qd.f32)
            h[i] = qd.cast(v, qd.f16)
            c[i] = c[i] + qd.cast(1, qd.i8)
            out[i] = v

    rng = np.random.default_rng(3)
    hs = rng.standard_normal(n).astype(np.float16)
    bs = rng.integers(0, 2, n).astype(np.bool_)
    cs = rng.integers(-128, 127, n).astype(np.int8)
    h, b, c, out = qd.ndarray(qd.f16, n), qd.ndarray(qd.u1, n), qd.ndarray(qd.i8, n), qd.ndarray(qd.f32, n)
    h.from_numpy(hs)
    b.from_numpy(bs)
    c.from_numpy(cs)
    narrow(h, b, c, out)
    v = hs.astype(np.float32) * np.float32(2.0) + np.where(bs, cs.astype(np.float32), np.float32(0.0))
    np.testing.assert_array_equal(out.to_numpy(), v.astype(np.float32))
    np.testing.assert_array_equal(h.to_numpy(), v.astype(np.float16))
    np.testing.assert_array_equal(c.to_numpy(), (cs.astype(np.int16) + 1).astype(np.int8))
    ir = narrow._last_ck.ir
    assert spirv.FnEmitter(spirv.KernelGen(ir, _caps(), False, PRINT_WORDS), ir.tasks[0]).unroll() == spirv.UNROLL
