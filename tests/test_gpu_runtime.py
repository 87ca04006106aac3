"""The device runtime of the GPU tiers (`qd/runtime/device.py`, `device_launch.py`; GPU.md §1-3) on every GPU arch
that opens here (lavapipe in CI): mirrors synced lazily, asynchronous launches whose errors and prints come back at
sync and are never lost, device-side fills and element access, raw numpy arguments, and the driver quirks the
SPIR-V emitter works around. Results are checked against numpy or the interpreter's semantics.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsRuntimeError

GPU = ("vulkan", "cuda", "opencl")
pytestmark = pytest.mark.archs(*GPU)


def _runtime() -> Any:
    from qd.runtime import device

    return device.current()


def test_launch_is_asynchronous_and_host_reads_sync(arch: Any) -> None:
    n = 1 << 12
    x = qd.ndarray(qd.f32, n)
    x.from_numpy(np.arange(n, dtype=np.float32))

    @qd.kernel
    def twice(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = 2 * x[i] + 1

    twice(x)
    twice(x)
    assert len(_runtime().pending) >= 1 and x._mirror.device_dirty  # enqueued, nothing read back yet
    want = (np.arange(n, dtype=np.float32) * 2 + 1) * 2 + 1
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert not _runtime().pending and not x._mirror.device_dirty
    x.from_numpy(np.zeros(n, np.float32))  # a host write is uploaded before the next launch
    twice(x)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(n, np.float32))


def _deep_kernel() -> tuple[Any, Any]:
    """A kernel whose reverse pass pushes `n` values per thread on an adstack (over fields x, y with grads):
    with `ad_stack_size=2` forced, its grad overflows for n > 2. Returns (kernel, y)."""
    x = qd.field(qd.f64, shape=8, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def deep(n: qd.i32):
        for i in x:
            v = x[i] + 0.1
            for _ in range(n):
                v = qd.sin(v) * 1.1
            y[None] += v

    return deep, y


def test_error_is_raised_at_sync_once_then_cleared(arch: Any) -> None:
    qd.init(arch=arch, debug=False, ad_stack_size=2, log_level="warn")
    deep, y = _deep_kernel()
    deep(7)
    y.grad[None] = 1.0
    deep.grad(7)  # overflows: ad_stack_size=2 forces 2 slots for 7 trips
    with pytest.raises(QuadrantsAssertionError, match="^Adstack overflow: kernel deep"):
        qd.sync()
    qd.sync()  # the flag was cleared: nothing more to raise
    deep.grad(2)
    qd.sync()


def test_debug_checks_raise_at_the_launch(arch: Any) -> None:
    qd.init(arch=arch, debug=True, log_level="warn")
    x = qd.ndarray(qd.f32, 4)

    @qd.kernel
    def oob(x: qd.types.ndarray(qd.f32, 1), n: qd.i32):
        for i in range(n):
            x[i] = 1.0

    oob(x, 4)
    with pytest.raises(QuadrantsAssertionError, match="index 4 of axis 0 is out of"):
        oob(x, 5)
    oob(x, 4)  # cleared
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))


def test_pending_error_at_exit_is_reported(arch: Any, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(f"""
        import qd
        qd.init(arch={arch.name!r}, ad_stack_size=1, log_level="warn")
        x = qd.field(qd.f32, shape=4, needs_grad=True)
        y = qd.field(qd.f32, shape=(), needs_grad=True)

        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(3 + i):
                    v = qd.sin(v)
                y[None] += v

        y.grad[None] = 1.0
        k.grad()   # overflows; the program ends without qd.sync()
    """))
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root, timeout=120)
    assert "a kernel error was pending at exit" in r.stderr and "Adstack overflow" in r.stderr, r.stderr


def test_fill_and_elements_stay_on_the_device(arch: Any) -> None:
    f = qd.field(qd.f32, shape=(3, 4))
    g = qd.field(qd.u8, shape=7)
    v = qd.Vector.field(3, qd.f64, shape=5)

    @qd.kernel
    def k():
        for i, j in f:
            f[i, j] += i * 10 + j
        for i in g:
            g[i] += 1  # an 8-bit atomic: a CAS loop on its 32-bit word
        for i in v:
            v[i] += [i, 1, 2]

    k()
    assert f[2, 3] == 23.0 and g[6] == 1 and list(v[4]) == [4.0, 1.0, 2.0]  # element reads from the device
    f[1, 1] = 100.0  # an element write goes to the device alone
    g.fill(5)
    v.fill(0.5)
    k()
    want_f = np.add.outer(np.arange(3) * 10, np.arange(4)).astype(np.float32) * 2
    want_f[1, 1] = 111.0
    np.testing.assert_array_equal(f.to_numpy(), want_f)
    np.testing.assert_array_equal(g.to_numpy(), np.full(7, 6, np.uint8))
    np.testing.assert_array_equal(v.to_numpy(), np.stack([np.arange(5) + 0.5, np.full(5, 1.5), np.full(5, 2.5)], 1))


def test_a_device_fill_is_what_host_reads_give(arch: Any) -> None:
    """A fill on a GPU arch writes the device copy alone (no host pass over the data): host reads after it, and
    element writes after it, still see the filled values."""
    f = qd.field(qd.i32, shape=(1000,))
    f.from_numpy(np.arange(1000, dtype=np.int32))
    f.fill(7)
    f[3] = 1
    want = np.full(1000, 7, np.int32)
    want[3] = 1
    np.testing.assert_array_equal(f.to_numpy(), want)
    f.fill(2)
    assert f[999] == 2 and f[3] == 2
    np.testing.assert_array_equal(f.to_numpy(), np.full(1000, 2, np.int32))

    @qd.kernel
    def inc():
        for i in f:
            f[i] += i

    inc()  # the device copy is newer; a whole-array write replaces it without downloading it first
    f.from_numpy(np.full(1000, -1, np.int32))
    np.testing.assert_array_equal(f.to_numpy(), np.full(1000, -1, np.int32))
    g = qd.field(qd.f64, shape=(64,))

    @qd.kernel
    def inc_g():
        for i in g:
            g[i] += i

    inc_g()
    g.fill(1.5)  # 8 bytes that are no repeated 32-bit word: written on the host, uploaded at the next launch
    inc_g()
    np.testing.assert_array_equal(g.to_numpy(), 1.5 + np.arange(64))


def test_from_numpy_uploads_at_once_and_a_first_fill_transfers_nothing(arch: Any) -> None:
    """`from_numpy` on a GPU arch uploads then (the first launch after it transfers nothing); a `fill` of an array
    with no device copy yet makes one and fills it on the device. Host and kernel reads see the written values."""
    x = qd.ndarray(qd.f32, 4096)
    x.from_numpy(np.arange(4096, dtype=np.float32))
    m = x._mirror
    assert m is not None and not m.host_dirty and not m.device_dirty
    f = qd.field(qd.i32, shape=300)
    f.fill(9)
    assert f._mirror is not None and not f._mirror.host_dirty and f._mirror.device_dirty

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = x[i] * 2.0 + f[i % 300]

    k(x)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(4096, dtype=np.float32) * 2 + 9)
    np.testing.assert_array_equal(f.to_numpy(), np.full(300, 9, np.int32))
    x.from_numpy(np.ones(4096, np.float32))  # replaces the newer device copy, uploaded again at once
    k(x)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4096, 11, np.float32))


@pytest.mark.parametrize("layout", [None, (1, 0)], ids=["canonical", "layout10"])
def test_host_copies_asked_without_copy_never_hide_kernel_writes(arch: Any, layout: Any) -> None:
    """On a GPU arch the device copy is the data, so a CPU view of the host storage cannot follow it. copy=False
    refuses (as Quadrants does); copy=None copies, and the kernels' writes after it are neither lost nor
    overwritten by the host copy (the first form of Genesis' CUDA departure: a CPU view of a field under a layout
    made every launch upload the stale host copy over what the previous kernel wrote)."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    a = qd.tensor(qd.f32, shape=(3, 5), layout=layout)
    b = qd.tensor(qd.f32, shape=(3, 5))

    @qd.kernel
    def write(a: qd.Tensor):
        for i, j in qd.ndrange(3, 5):
            a[i, j] = i * 10.0 + j

    @qd.kernel
    def read(a: qd.Tensor, b: qd.Tensor):
        for i, j in qd.ndrange(3, 5):
            b[i, j] = 2.0 * a[i, j]

    with pytest.raises(ValueError, match="device memory"):
        a.to_numpy(copy=False)
    if arch.name != "cuda":  # (qd.cuda shares the device copy instead: tests/test_torch_interop.py)
        with pytest.raises(ValueError, match="device memory"):
            a.to_torch(copy=False)
    with pytest.raises(ValueError, match="device memory"):
        a.to_torch(device="cpu", copy=False)
    snap = a.to_numpy(copy=None)
    tsnap = a.to_torch(device="cpu", copy=None)
    snap[...] = 7.0  # a copy: neither write reaches the data
    tsnap.fill_(7.0)
    want = np.add.outer(np.arange(3) * 10.0, np.arange(5)).astype(np.float32)
    write(a)
    read(a, b)
    np.testing.assert_array_equal(a.to_numpy(), want)
    np.testing.assert_array_equal(b.to_numpy(), 2 * want)
    np.testing.assert_array_equal(snap, np.full((3, 5), 7.0, np.float32))


def test_raw_numpy_arguments_are_copied_back_only_when_written(arch: Any) -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.f64, 1), b: qd.types.ndarray(qd.i32, 1)):
        for i in a:
            a[i] = qd.sqrt(qd.f64(b[i]))

    a = np.zeros(9)
    b = np.arange(9, dtype=np.int32)
    k(a, b)
    np.testing.assert_array_equal(a, np.sqrt(np.arange(9.0)))
    np.testing.assert_array_equal(b, np.arange(9))


def test_prints_arrive_at_sync_in_order(arch: Any, capfd: Any) -> None:
    @qd.kernel
    def p(n: qd.i32):
        for i in range(n):
            print("GPU_PRINT", i, i * 0.5)

    p(3)
    qd.sync()
    lines = sorted(ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("GPU_PRINT"))
    assert lines == ["GPU_PRINT 0 0.000000", "GPU_PRINT 1 0.500000", "GPU_PRINT 2 1.000000"]


def test_sign_extension_then_compare(arch: Any) -> None:
    """llvmpipe miscompiled comparisons of an OpSConvert 32 -> 64 result (`i64(c) > 7` true for c = 3): the
    emitter sign-extends explicitly. Found by the differential fuzzer (seed 352)."""
    @qd.kernel
    def k(c: qd.types.ndarray(qd.i32, 1), o: qd.types.ndarray(qd.i32, 2)):
        for i in range(c.shape[0]):
            o[i, 0] = qd.i64(c[i]) > 7
            o[i, 1] = qd.i64(c[i]) < 7
            o[i, 2] = qd.max(qd.i64(c[i]), qd.i64(7)) == 7

    for vals in ([-9, -9], [-9, 3], [3, 3], [-9, 8]):
        c = np.array(vals, np.int32)
        o = np.zeros((2, 3), np.int32)
        k(c, o)
        want = np.stack([c > 7, c < 7, np.maximum(c, 7) == 7], 1).astype(np.int32)
        np.testing.assert_array_equal(o, want)


def test_driver_loop_limit_is_a_loud_error(arch: Any) -> None:
    """lavapipe ends an invocation's loops after 65535 iterations in all, silently; qd raises instead. On a
    device without the limit the loop simply runs to the end."""
    loss = qd.field(qd.f32, shape=())

    @qd.kernel
    def t(n: qd.i32):
        for i in range(2):
            for j in range(n):
                loss[None] += 1.0

    limit = _runtime().backend.loop_limit if hasattr(_runtime().backend, "loop_limit") else 0
    t(1000)
    assert loss[None] == 2000.0
    if not limit:
        t(100000)
        assert loss[None] == 202000.0
        return
    with pytest.raises(QuadrantsRuntimeError, match="loop limit"):
        t(limit + 10)
        qd.sync()


def test_driver_loop_limit_counts_nested_loop_exits(arch: Any) -> None:
    """lavapipe's limit counts every loop header visit, so an inner loop that runs 0 times still costs one:
    a nest of 40000 outer iterations over empty inner loops was cut at 32768, silently. qd counts the same
    visits and raises; a device without the limit gives the whole sum."""
    @qd.kernel
    def nest(b: qd.types.ndarray(qd.i32, 1), m: qd.i32) -> qd.i32:
        s = 0
        for i in range(1):
            for j in range(m):
                for _ in range(b[j]):
                    s += 1
                s += 1000
        return s

    limit = _runtime().backend.loop_limit if hasattr(_runtime().backend, "loop_limit") else 0
    small = np.full(1000, 1, np.int32)
    assert nest(small, 1000) == 1000 * 1001
    m = 40000
    if not limit:
        assert nest(np.zeros(m, np.int32), m) == m * 1000
        return
    with pytest.raises(QuadrantsRuntimeError, match="loop limit"):
        nest(np.zeros(m, np.int32), m)


def test_stats_report_device_time(arch: Any) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] += 1.0

    x = qd.ndarray(qd.f32, 1024)
    k(x)
    qd.sync()
    s = k.stats
    assert s["last_tier"] == arch.name and s["launches"][arch.name] == 1
    if getattr(_runtime().backend, "timestamps", False):  # a device with timestamps must report a time
        assert s["device_ms"] is not None and s["device_ms"] >= 0.0
    else:
        assert s["device_ms"] is None


def test_debugger_walks_a_gpu_program_on_its_host_copies(arch: Any) -> None:
    """A debugged launch on a GPU arch runs on the interpreter over the buffers' host copies (synced from the
    device first, marked newer after), so the program continues on the device with the debugged results."""
    x = qd.ndarray(qd.f32, 6)
    x.from_numpy(np.arange(6, dtype=np.float32))

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            s = x[i] * 2.0
            x[i] = s + 1.0

    k(x)  # on the device: x = 2 x + 1
    stops: list = []

    def on_stop(dbg: Any, frame: Any, reason: str) -> str:
        stops.append((frame.tid, dict(frame.locals())))
        return "continue"

    qd.debug.run(k, x, threads=[3], on_stop=on_stop)
    assert stops and stops[0][0] == 3
    k(x)  # on the device again, from the debugged launch's results
    want = np.arange(6, dtype=np.float32)
    for _ in range(3):
        want = want * 2 + 1
    np.testing.assert_array_equal(x.to_numpy(), want)


def test_device_code_comes_from_the_disk_cache_the_second_time(arch: Any, tmp_path: Path) -> None:
    """The offline cache of each GPU tier: SPIR-V (vulkan), PTX and cubin (cuda), the driver's program binary
    (opencl)."""
    src = """
def make():
    import qd

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in x:
            x[i] = qd.sin(x[i]) * a
    return k
"""
    mod = tmp_path / "cached_kernel.py"
    mod.write_text(src)
    sys.path.insert(0, str(tmp_path))
    try:
        import cached_kernel

        results = []
        for _ in range(2):
            qd.init(arch=arch, offline_cache_file_path=str(tmp_path / "cache"), log_level="warn")
            k = cached_kernel.make()
            x = np.linspace(-1, 1, 100).astype(np.float32)
            k(x, 2.0)
            results.append((x, k.stats["from_cache"]))
        assert [r[1] for r in results] == [False, True]
        np.testing.assert_array_equal(results[0][0], results[1][0])
        np.testing.assert_allclose(results[0][0], (np.sin(np.linspace(-1, 1, 100).astype(np.float32)) * 2), rtol=1e-6)
        # a corrupt entry reads as a miss: rebuilt, never an error
        for f in (tmp_path / "cache" / arch.name).iterdir():
            if f.suffix == ".o":
                f.write_bytes(f.read_bytes()[:-7])
        qd.init(arch=arch, offline_cache_file_path=str(tmp_path / "cache"), log_level="warn")
        k = cached_kernel.make()
        x = np.linspace(-1, 1, 100).astype(np.float32)
        k(x, 2.0)
        assert not k.stats["from_cache"]
        np.testing.assert_array_equal(x, results[0][0])
    finally:
        sys.path.remove(str(tmp_path))


def test_device_caps_under_quadrants_names(arch: Any) -> None:
    """Quadrants' tests ask `prog.get_device_caps().get(qd._lib.core.DeviceCapability.X)` before GPU-only items."""
    caps = qd.lang.impl.get_runtime().prog.get_device_caps()
    cap = qd._lib.core.DeviceCapability
    assert caps.get(cap.spirv_has_int64) == 1 and caps.get(cap.spirv_has_atomic_float_add) == 1
    assert caps.get(cap.spirv_has_physical_storage_buffer) == 1
    assert caps.get("no such capability") == 0


def test_launches_from_several_threads(arch: Any) -> None:
    """Python threads launching kernels on one GPU arch at once: every launch lands, none is lost or doubled."""
    import threading

    n = 256
    acc = qd.ndarray(qd.i32, n)
    acc.fill(0)

    @qd.kernel
    def bump(a: qd.types.ndarray(qd.i32, 1), k: qd.i32):
        for i in a:
            a[i] += k

    errors: list = []

    def worker(k: int) -> None:
        try:
            for _ in range(20):
                bump(acc, k)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    np.testing.assert_array_equal(acc.to_numpy(), np.full(n, 20 * (1 + 2 + 3 + 4), np.int32))


def test_a_burst_of_launches_is_queued_and_submitted_together(arch: Any) -> None:
    """Launches made while the device runs earlier work wait in the queue and go out together: fewer
    submissions than launches, every launch runs once and in order, a host transfer keeps its place."""
    dev = getattr(_runtime().backend, "dev", None)
    if dev is None or not hasattr(dev, "submissions"):
        pytest.skip(f"{arch.name} has no submission queue")
    big = qd.ndarray(qd.f32, 1)
    x = qd.ndarray(qd.i32, 4)

    @qd.kernel
    def slow(a: qd.types.ndarray(qd.f32, 1)):
        for _ in range(1):  # one invocation, a long dependent chain: milliseconds on any device
            v = a[0]
            for j in range(60000):  # under llvmpipe's loop limit
                v = qd.sin(v + qd.exp(-v * v)) + qd.log(1.0 + v * v)
            a[0] = v

    @qd.kernel
    def step(x: qd.types.ndarray(qd.i32, 1), k: qd.i32):
        for i in range(1):
            x[0] = x[0] * 3 + k  # the order of the launches shows in the result

    slow(big)
    step(x, 0)  # both compiled before the burst (a driver's compile would outlast the slow kernel)
    x.fill(0)
    qd.sync()
    before = dev.submissions
    slow(big)
    for k in range(40):
        step(x, k)
    x[1] = 7  # an element write: a transfer behind the queued launches
    for k in range(40, 60):
        step(x, k)
    got = x.to_numpy()
    want = 0
    for k in range(60):
        want = (want * 3 + k) & 0xFFFFFFFF
    assert int(got[0]) == np.int32(np.uint32(want)) and int(got[1]) == 7
    assert dev.submissions - before < 62  # 61 launches and the element write, some of them together


def test_an_error_in_a_queued_launch_is_raised_at_sync(arch: Any) -> None:
    """A failure among launches queued behind running work comes back (at a later launch or at sync) once; every
    launch made ran."""
    qd.init(arch=arch, debug=False, ad_stack_size=2, log_level="warn")
    a = qd.ndarray(qd.f32, 1 << 21)
    deep, y = _deep_kernel()
    c = qd.ndarray(qd.i32, 1)

    @qd.kernel
    def slow(a: qd.types.ndarray(qd.f32, 1)):
        for i in a:
            a[i] = qd.cos(a[i]) * 0.5

    @qd.kernel
    def count(c: qd.types.ndarray(qd.i32, 1)):
        for i in range(1):
            c[0] += 1

    deep(2)
    y.grad[None] = 1.0
    qd.sync()
    made = 0
    slow(a)
    with pytest.raises(QuadrantsAssertionError, match="^Adstack overflow: kernel deep"):  # at a later launch or sync
        for n in (1, 2, 7, 2, 1, 1, 1, 1):  # 7 trips overflow the 2 forced slots
            count(c)
            made += 1
            deep.grad(n)
        qd.sync()
    qd.sync()  # raised once, then cleared
    assert 3 <= made and int(c.to_numpy()[0]) == made  # every launch made ran, once


def test_random_numbers_match_the_interpreter_across_launches(arch: Any) -> None:
    """Every launch takes one launch id on every tier (with or without random numbers), so a program draws the
    same numbers on a GPU arch as on the interpreter."""
    def run(on: Any) -> np.ndarray:
        qd.init(arch=on, random_seed=7, log_level="warn")
        x = qd.ndarray(qd.f32, 300)

        @qd.kernel
        def plain(x: qd.types.ndarray(qd.f32, 1)):
            for i in x:
                x[i] += 1.0

        @qd.kernel
        def drawn(x: qd.types.ndarray(qd.f32, 1)):
            for i in x:
                x[i] += qd.random()

        plain(x)
        drawn(x)
        plain(x)
        drawn(x)
        return x.to_numpy()

    np.testing.assert_array_equal(run(arch), run(qd.interp))
    qd.init(arch=arch, log_level="warn")


def test_a_refused_submission_is_an_error_from_then_on(arch: Any) -> None:
    """A device that refuses a submission (lost) raises at that launch and at every later launch or wait:
    launches that never ran are not read back as finished."""
    dev = getattr(_runtime().backend, "dev", None)
    if dev is None or not hasattr(dev, "lost"):
        pytest.skip(f"{arch.name} has no submission queue")
    x = qd.ndarray(qd.f32, 4)

    @qd.kernel
    def bump(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] += 1.0

    bump(x)
    qd.sync()
    real = dev.vk

    class Lib:
        def __getattr__(self, name: str) -> Any:
            if name == "vkQueueSubmit":
                return lambda *a: -4  # VK_ERROR_DEVICE_LOST
            return getattr(real.lib, name)

    class Vk:
        lib = Lib()

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    dev.vk = Vk()
    try:
        with pytest.raises(RuntimeError, match="refused a submission"):
            bump(x)
        with pytest.raises(RuntimeError, match="refused a submission"):
            bump(x)  # every later launch too
        qd.sync()  # nothing is pending: both errors were raised at their launches
    finally:
        dev.vk, dev.lost = real, ""
        _runtime().pending.clear()
        dev._queued = None
    np.testing.assert_array_equal(x.to_numpy(), np.ones(4, np.float32))  # the refused launch never ran


class _FakeBackend:
    """The device runtime's bookkeeping without a device: launches are positive ints, never done until waited
    for; fences negative ints, done at once. Waiting for None (a work already waited for) fails as the CUDA
    driver does (an invalid handle)."""

    def __init__(self) -> None:
        self.waited: list = []
        self.freed: list = []
        self.fences = 0
        self.on_free: Any = None

    def wait(self, work: Any) -> None:
        assert work is not None, "waited for a launch that was already waited for"
        self.waited.append(work)

    def done(self, work: Any) -> bool:
        return work < 0

    def fence(self) -> int:
        self.fences += 1
        return -self.fences

    def free(self, buf: Any) -> None:
        self.freed.append(buf)
        if self.on_free is not None:
            hook, self.on_free = self.on_free, None
            hook()

    def synchronize(self) -> None:
        pass


def test_runtime_waits_each_launch_once_past_the_pending_bound() -> None:
    from qd.runtime.device import MAX_PENDING, DeviceRuntime, Record

    rt = DeviceRuntime(_FakeBackend())
    rt.submit(Record(1, lambda: None))
    rt.pending[0].work = None  # waited for already (by a poll that could not read it yet)
    for w in range(2, MAX_PENDING + 12):
        rt.submit(Record(w, lambda: None))
    waited = rt.backend.waited
    assert waited == list(range(2, 2 + len(waited))) and len(waited) == 11
    rt.sync()
    assert sorted(rt.backend.waited) == list(range(2, MAX_PENDING + 12))


def test_buffers_freed_behind_runner_launches_once_each() -> None:
    """A buffer dropped while C-launcher launches are in flight is freed after the work enqueued before it, once,
    even when freeing one collects another mirror (which frees its buffer from inside the first free)."""
    from qd.runtime.device import DeviceRuntime

    be = _FakeBackend()
    rt = DeviceRuntime(be)
    rt.runners.append(type("R", (), {"collect": lambda self: None})())
    be.on_free = lambda: rt.free_later("c")  # the first free collects another mirror
    rt.free_later("a")
    rt.free_later("b")  # frees "a" (its fence is done), which drops "c"
    rt.sync()
    assert sorted(be.freed) == ["a", "b", "c"] and len(be.waited) == len(set(be.waited)) == 3
    assert not rt.dead_after and not rt.runners


@dataclasses.dataclass
class _Pair:
    a: qd.types.ndarray(qd.f32, 1)
    b: qd.types.ndarray(qd.f32, 1)


def test_context_words_follow_a_changed_binding(arch: Any) -> None:
    """The context words of a binding are kept between launches that bind the same buffers (`_ctx_values`): a
    launch with another array of another length, a host write, or another scalar must still be seen."""

    @qd.kernel
    def total(p: _Pair, scale: qd.f32, out: qd.types.ndarray(qd.f32, 1)):
        for i in range(1):
            acc = 0.0
            for j in range(p.a.shape[0]):
                acc += p.a[j]
            for j in range(p.b.shape[0]):
                acc += 10.0 * p.b[j]
            out[0] = acc * scale

    def arr(values: list[float]) -> Any:
        x = qd.ndarray(qd.f32, len(values))
        x.from_numpy(np.array(values, np.float32))
        return x

    out = qd.ndarray(qd.f32, 1)
    a, b = arr([1, 2]), arr([3])
    expect = []
    calls = [(_Pair(a, b), 1.0), (_Pair(a, b), 2.0), (_Pair(arr([5, 6, 7]), b), 1.0), (_Pair(a, arr([4, 4])), 1.0)]
    for p, scale in calls:
        total(p, scale, out)
        expect.append((p.a.to_numpy().sum() + 10 * p.b.to_numpy().sum()) * scale)
        assert out.to_numpy()[0] == pytest.approx(expect[-1]), (len(expect), out.to_numpy(), expect)
    a[1] = 20.0  # a host write between two launches of the same binding
    total(_Pair(a, b), 1.0, out)
    assert out.to_numpy()[0] == pytest.approx(1 + 20 + 30)
