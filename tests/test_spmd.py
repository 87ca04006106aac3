"""Range bodies in SIMD lanes on the CPU tier (`qd/jit/lanes.py`, `qd/jit/llvm_spmd.py`): every kernel here has
the shape the lanes take (an inner loop with a per-element trip count around transcendental math) and is run
natively under fast math and by the interpreter on the same data; the results agree within the op table's
contract (libmvec's ulps; sums in another order). Sizes that are no multiple of the lane count, branches,
nested loops, gathers and scatters, atomics, checks and reverse mode through the adstack are covered."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError
from qd.jit import lanes

pytestmark = pytest.mark.archs("cpu")

N = 203  # no multiple of the lanes: the last chunk runs with lanes masked off


def _both(build: Callable[[], Callable[[], dict]], **init) -> tuple[dict, dict, object]:
    """(interpreter results, native results, the native kernel) of the program `build` makes and runs."""
    out = []
    for arch, jit in ((qd.interp, "interp"), (qd.cpu, "eager")):
        qd.init(arch=arch, jit=jit, offline_cache=False, log_level="warn", **init)
        run = build()
        out.append(run())
    return out[0], out[1], run


def _in_lanes(kernel: object) -> bool:
    """Whether the kernel's native code runs a body in lanes."""
    native = kernel._last_ck.tier.native
    return any(t.lanes == lanes.LANES for t in native.tasks)


def _counts() -> np.ndarray:
    return ((np.arange(N) * 7) % 13).astype(np.int32)


def _recurrence_in_place() -> Callable[[], dict]:
    """A program of the lanes' shape: `x[i]` through `n[i]` steps of a `sin` recurrence, written back."""
    x = qd.field(qd.f32, shape=N)

    @qd.kernel
    def k(n: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            v = x[i]
            for _ in range(n[i]):
                v = 0.9 * v + qd.sin(v)
            x[i] = v

    def run():
        x.from_numpy(np.linspace(-1, 1, N).astype(np.float32))
        k(_counts())
        return {"x": x.to_numpy(), "kernel": k}
    return run


def test_a_per_element_loop_with_branches_nested_loops_and_scatters() -> None:
    def build():
        x = qd.field(qd.f32, shape=N)
        y = qd.field(qd.f32, shape=(N, 3))
        hist = qd.field(qd.i32, shape=5)
        lo = qd.field(qd.f64, shape=())
        flags = qd.field(qd.u1, shape=N)

        @qd.kernel
        def k(n: qd.types.ndarray(qd.i32, 1), scale: qd.f32):
            for i in x:
                v = x[i]
                w = 0.0
                for j in range(n[i] // 2, n[i]):
                    if v > 0.2:
                        v = 0.9 * v + 0.1 * qd.sin(v) * scale
                    else:
                        v = v + 0.05 * qd.exp(-v * v)
                        for _ in range(j % 3):
                            w += qd.cos(v + j)
                y[i, n[i] % 3] = v  # a scatter
                y[i, 0] += w
                hist[n[i] % 5] += 1  # an atomic that is no reduction: lane by lane
                qd.atomic_min(lo[None], qd.cast(v, qd.f64))
                flags[i] = v > 0.5

        def run():
            x.from_numpy(np.linspace(-1, 1, N).astype(np.float32))
            lo[None] = 10.0
            k(_counts(), 1.5)
            return {"y": y.to_numpy(), "hist": hist.to_numpy(), "lo": lo.to_numpy(), "flags": flags.to_numpy(),
                    "kernel": k}
        return run

    a, b, _ = _both(build)
    assert _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["y"], a["y"], rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(b["hist"], a["hist"])
    np.testing.assert_allclose(b["lo"], a["lo"], rtol=1e-6)
    np.testing.assert_array_equal(b["flags"], a["flags"])


@pytest.mark.parametrize("threads", [1, 2])
def test_reductions_of_every_kind_combine_the_lanes(threads: int) -> None:
    def build():
        x = qd.ndarray(qd.f64, N)
        out = qd.ndarray(qd.f64, 4)
        cnt = qd.ndarray(qd.i64, 2)

        @qd.kernel
        def k(x: qd.types.ndarray(qd.f64, 1), n: qd.types.ndarray(qd.i32, 1), out: qd.types.ndarray(qd.f64, 1),
              cnt: qd.types.ndarray(qd.i64, 1)):
            for i in range(x.shape[0]):
                v = x[i]
                for _ in range(n[i]):
                    v = qd.tanh(v) + 0.1
                out[0] += v
                out[1] -= v
                qd.atomic_max(out[3], v)
                cnt[0] += n[i]
                qd.atomic_min(cnt[1], qd.cast(n[i], qd.i64) - 100)

        def run():
            x.from_numpy(np.linspace(0.0, 2.0, N))
            out.from_numpy(np.array([0.0, 0.0, -1e9, -1e9]))
            cnt.from_numpy(np.zeros(2, np.int64))
            k(x, _counts(), out, cnt)
            return {"out": out.to_numpy(), "cnt": cnt.to_numpy(), "kernel": k}
        return run

    a, b, _ = _both(build, cpu_max_num_threads=threads)
    assert _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["out"], a["out"], rtol=1e-12)
    np.testing.assert_array_equal(b["cnt"], a["cnt"])


def test_a_flattened_loop_over_runtime_extents_and_unsigned_arithmetic_run_in_lanes() -> None:
    """An ndrange over runtime extents recovers its indices in unsigned arithmetic from an i64 flat index (DESIGN
    §3); such a body, and one hashing in u32 and u64, still runs in lanes, with the interpreter's results."""
    rows, cols = 7, 29  # (rows * cols: no multiple of the lanes)

    def build():
        y = qd.ndarray(qd.f32, (rows, cols))
        h = qd.ndarray(qd.u64, (rows, cols))

        @qd.kernel
        def k(n: qd.types.ndarray(qd.i32, 1), y: qd.types.ndarray(qd.f32, 2), h: qd.types.ndarray(qd.u64, 2),
              p: qd.i32, q: qd.i32):
            for i, j in qd.ndrange(p, q):
                v = qd.cast(i, qd.f32) * 0.1 + qd.cast(j, qd.f32) * 0.01
                u = qd.cast(i * q + j, qd.u32) * qd.u32(2654435761)
                w = qd.cast(u, qd.u64) * qd.u64(0x9E3779B97F4A7C15) + qd.u64(j) // qd.u64(3)
                for _ in range(n[(i * q + j) % n.shape[0]]):
                    v = 0.9 * v + qd.sin(v)
                    w = (w ^ (w >> qd.u64(29))) % qd.u64(1000000007)
                y[i, j] = v
                h[i, j] = w + qd.cast(u % qd.u32(97), qd.u64)

        def run():
            k(_counts(), y, h, rows, cols)
            return {"y": y.to_numpy(), "h": h.to_numpy(), "kernel": k}
        return run

    a, b, _ = _both(build)
    assert _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["y"], a["y"], rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(b["h"], a["h"])


def _sin_recurrence() -> tuple:
    """(x, loss, k): `k(n)` adds to loss the recurrence v = 0.95 v + 0.1 sin(v) run n[i] times from x[i]."""
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k(n: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            v = x[i]
            for _ in range(n[i]):
                v = 0.95 * v + 0.1 * qd.sin(v)
            loss[None] += v

    return x, loss, k


def test_reverse_mode_through_the_loop_with_an_adstack_row_per_lane() -> None:
    def build():
        x, loss, k = _sin_recurrence()

        def run():
            x.from_numpy(np.linspace(0.1, 1.0, N).astype(np.float32))
            k(_counts())
            loss.grad[None] = 1.0
            k.grad(_counts())
            return {"loss": loss.to_numpy(), "grad": x.grad.to_numpy(), "kernel": k}
        return run

    a, b, _ = _both(build, ad_stack_experimental_enabled=True, cpu_max_num_threads=2)
    assert _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-5)
    np.testing.assert_allclose(b["grad"], a["grad"], rtol=1e-5, atol=1e-6)
    # the closed form: d v_{k+1} / d v_k = 0.95 + 0.1 cos(v_k)
    xs = np.linspace(0.1, 1.0, N)
    want = np.ones(N)
    for i in range(N):
        v = xs[i]
        for _ in range(_counts()[i]):
            want[i] *= 0.95 + 0.1 * np.cos(v)
            v = 0.95 * v + 0.1 * np.sin(v)
    np.testing.assert_allclose(b["grad"], want, rtol=1e-4)


def test_a_failing_check_in_a_lane_is_raised() -> None:
    qd.init(arch=qd.cpu, jit="eager", offline_cache=False, log_level="warn", ad_stack_experimental_enabled=True,
            ad_stack_size=4)
    _, loss, k = _sin_recurrence()
    k(_counts())
    loss.grad[None] = 1.0
    with pytest.raises(QuadrantsAssertionError, match="ad_stack_size=4"):
        k.grad(_counts())
        qd.sync()


def test_a_plain_store_to_one_cell_keeps_the_body_scalar() -> None:
    """`m[None] = min(m[None], v)` races between threads; one thread's iterations still run in order: lanes,
    storing at once, would keep the last lane's value."""
    def build():
        x = qd.field(qd.f32, shape=N)
        m = qd.field(qd.f32, shape=())

        @qd.kernel
        def k(n: qd.types.ndarray(qd.i32, 1)):
            for i in x:
                v = x[i]
                for _ in range(n[i]):
                    v = 0.9 * v + qd.sin(v)
                m[None] = qd.min(m[None], v)

        def run():
            x.from_numpy(np.linspace(-1, 1, N).astype(np.float32))
            m[None] = 10.0
            k(_counts())
            return {"m": m.to_numpy(), "kernel": k}
        return run

    a, b, _ = _both(build, cpu_max_num_threads=1)
    assert not _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["m"], a["m"], rtol=1e-6)


def test_without_fast_math_the_body_stays_scalar_and_equals_the_interpreter() -> None:
    a, b, _ = _both(_recurrence_in_place, fast_math=False)
    np.testing.assert_array_equal(b["x"], a["x"])
    assert not any(lanes.wanted(t, False) for t in b["kernel"]._last_ck.ir.tasks)


@pytest.mark.parametrize("how", ["raises", "invalid_ir"])
def test_a_body_the_lanes_fail_to_lower_runs_scalar(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lowering failure in the lanes (an exception, or IR LLVM refuses) costs speed, never the kernel: the
    module is built again with scalar bodies."""
    from qd.jit import llvm_spmd

    if how == "raises":
        def broken(*args, **kwargs):
            raise RuntimeError("a lowering bug")
        monkeypatch.setattr(llvm_spmd, "build_body", broken)
    else:
        monkeypatch.setattr(llvm_spmd, "_mangle", lambda t: "nosuchtype")

    a, b, _ = _both(_recurrence_in_place)
    assert not _in_lanes(b["kernel"])
    np.testing.assert_allclose(b["x"], a["x"], rtol=1e-6, atol=1e-6)


def test_cached_code_in_more_lanes_than_the_heap_has_rows_for_is_rebuilt(tmp_path, monkeypatch) -> None:
    """The adstack heap's rows per thread (`AdStackPlan.lanes`) and the native code's lanes must agree: a cache
    entry whose bodies run in more lanes than this process gives the heap rows for is a miss, never loaded."""
    from qd.jit import cpu

    monkeypatch.setattr(lanes, "shaped", lambda t: True)  # a process whose lanes cover every supported body
    monkeypatch.setattr(cpu, "lanes_for", lambda k: lanes.LANES)
    qd.init(arch=qd.cpu, jit="eager", offline_cache_file_path=str(tmp_path), log_level="warn")
    x = qd.field(qd.f32, shape=N)

    @qd.kernel
    def k():
        for i in x:
            x[i] = qd.sin(qd.cast(i, qd.f32))

    k()
    assert _in_lanes(k) and not k.stats["from_cache"]
    monkeypatch.undo()  # this process's rule: the same body stays scalar
    qd.init(arch=qd.cpu, jit="eager", offline_cache_file_path=str(tmp_path), log_level="warn")
    x = qd.field(qd.f32, shape=N)

    @qd.kernel
    def k():
        for i in x:
            x[i] = qd.sin(qd.cast(i, qd.f32))

    k()
    assert not _in_lanes(k) and not k.stats["from_cache"]
    np.testing.assert_allclose(x.to_numpy(), np.sin(np.arange(N, dtype=np.float32)), rtol=1e-6, atol=1e-6)
