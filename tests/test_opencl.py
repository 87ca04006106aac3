"""The OpenCL tier's own behaviours (`qd/gpu/opencl_c.py`, `qd/gpu/opencl_tier.py`; issue 14) on the OpenCL device
that opens here (PoCL in CI): a device without 64-bit atomics, simulated by the caps the backend renders for.
The rest of the tier is checked by the whole suite through the arch fixture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsTypeError

pytestmark = pytest.mark.archs("opencl")


@pytest.fixture
def no_int64_atomics(arch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend renders for a device without `cl_khr_int64_*_atomics` (the source undefines their macros)."""
    import dataclasses

    from qd.runtime import device

    backend = device.current().backend
    monkeypatch.setattr(backend, "caps", dataclasses.replace(backend.caps, int64_atomics=False))


def test_without_64_bit_atomics_checks_prints_and_reductions_still_work(no_int64_atomics: None, capfd: Any) -> None:
    qd.init(arch=qd.opencl, debug=True, log_level="warn")
    x = qd.ndarray(qd.f32, 1000)
    x.from_numpy(np.arange(1000, dtype=np.float32))
    total = qd.ndarray(qd.f32, 1)
    count = qd.ndarray(qd.i32, 1)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), total: qd.types.ndarray(qd.f32, 1), count: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            total[0] += x[i]
            if x[i] > 996.0:
                count[0] += 1
                print("big", i)

    k(x, total, count)
    qd.sync()
    assert total.to_numpy()[0] == pytest.approx(999 * 1000 / 2, rel=1e-6) and count.to_numpy()[0] == 3
    out = capfd.readouterr().out
    assert sorted(line for line in out.splitlines() if line.startswith("big")) == ["big 997", "big 998", "big 999"]

    @qd.kernel
    def bad(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i + 1] = 0.0  # the last item is out of bounds: a check recorded through the 32-bit status CAS

    with pytest.raises(QuadrantsAssertionError):
        bad(x)
        qd.sync()


def test_without_64_bit_atomics_a_64_bit_atomic_is_a_clear_error(no_int64_atomics: None) -> None:
    a = qd.ndarray(qd.i64, 4)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i64, 1)):
        for i in range(100):
            qd.atomic_max(a[i % 4], i)

    with pytest.raises(QuadrantsTypeError, match="needs 64-bit atomics, which this OpenCL device lacks"):
        k(a)


def test_without_64_bit_atomics_the_adstack_is_sized_by_the_32_bit_max_reducer(no_int64_atomics: None) -> None:
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)
    n = np.array([3, 0, 7, 1, 2, 5, 4, 6], np.int32)

    @qd.kernel
    def k(n: qd.types.ndarray(qd.i32, 1)):
        for i in range(8):
            v = x[i]
            for _ in range(n[i]):
                v = v * 0.5 + 0.25
            y[None] += v

    x.from_numpy(np.linspace(0.0, 1.0, 8, dtype=np.float32))
    y.grad[None] = 1.0
    k.grad(n)
    plan = k._last_ck.adstack
    assert plan is not None and plan.sizes == [int(n.max())]
    assert [key[1] for key in plan.task_kernels] == [False]  # the u32 variant of the device's reducer kernel
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 ** n, rtol=1e-6)


def _sources(kernel: Any) -> str:
    return "".join(st.prog.kernel.source for st in kernel._last_ck.device.values())


def _sum_and_count(arch: Any) -> Any:
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), a: qd.types.ndarray(qd.i32, 1)) -> qd.f32:
        s = 0.0
        for i in x:
            d = 0
            while d < a[i] % 3:
                x[i] += 1.0  # an atomic in a data-dependent loop
                d += 1
            s += x[i]
        return s

    return k


def test_a_cpu_device_gets_no_barrier(arch: Any) -> None:
    """PoCL 3.1 miscompiled the work group's barrier after a data-dependent loop (issue 27 item 10): on a CPU
    device a reduction ends with one atomic per work item, and no kernel has a barrier."""
    from qd.runtime import device

    backend = device.current().backend
    if not backend.blocked:
        pytest.skip(f"OpenCL device {backend.device_name} is no CPU")
    assert backend.group_reduce is False
    k = _sum_and_count(arch)
    a = np.arange(1000, dtype=np.int32)
    x = np.zeros(1000, np.float32)
    assert k(x, a) == float((a % 3).sum())
    assert "barrier(" not in _sources(k) and "atom" in _sources(k)


def test_the_group_tree_reduction(arch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local-memory tree a GPU gets (`group_reduce`), run on whatever device is here (a body without the
    loops PoCL miscompiles before a barrier)."""
    from qd.runtime import device

    monkeypatch.setattr(device.current().backend, "group_reduce", True)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), a: qd.types.ndarray(qd.i32, 1)) -> qd.f32:
        s = 0.0
        for i in x:
            s += x[i]
            qd.atomic_max(a[0], qd.cast(x[i], qd.i32))
        return s

    x = np.arange(5000, dtype=np.float32) % 7
    a = np.zeros(1, np.int32)
    assert k(x, a) == float(x.sum()) and a[0] == 6
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in _sources(k)


_OUT_OF_MEMORY_CHILD = """
import faulthandler, resource, sys
faulthandler.dump_traceback_later(90, exit=True)  # a hang: the stacks, and a failure
import qd
from qd.runtime import device

qd.init(arch=qd.opencl, log_level="warn", offline_cache=False)

@qd.kernel
def fill(x: qd.types.ndarray(qd.f32, 1)):
    for i in x:
        x[i] = i * 2.0

y = qd.ndarray(qd.f32, 100)
fill(y)

@qd.kernel
def other(x: qd.types.ndarray(qd.f32, 1)):
    for i in x:
        x[i] = qd.sin(x[i]) * 2.0 + qd.exp(x[i]) + MARGIN

vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (MARGIN << 20), resource.RLIM_INFINITY))
try:
    other(y)
    qd.sync()
except MemoryError as e:
    error = e
else:
    error = None
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
if error is None or device.current().backend.broken is None:
    print("NO DRIVER FAILURE", error)
    sys.exit(0)
print("MemoryError:", error)
fill(y)
assert list(y.to_numpy()[:3]) == [0.0, 2.0, 4.0]  # a kernel built before still runs

@qd.kernel
def third(x: qd.types.ndarray(qd.f32, 1)):
    for i in x:
        x[i] = 7.0

try:
    third(y)
except qd.errors.QuadrantsRuntimeError as e:
    assert "restart the process" in str(e)
    print("refused at once")
qd.reset()  # releases no program of the broken driver (PoCL blocked here, and at exit)
print("reset")
"""


def test_reset_and_exit_after_the_driver_threw_memory_error(arch: Any, tmp_path: Path) -> None:
    """Issue 27 item 11: PoCL's compiler out of memory (`RLIMIT_AS`) throws `std::bad_alloc` through the driver and
    leaves its compiler locked; releasing any program then blocked for ever (at `qd.reset`, at exit). The child
    must end: MemoryError, old kernels still run, a new compile refused at once, reset and exit. The memory margin
    that makes the build fail (not LLVM's own abort, nor no failure) is searched for."""
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, POCL_CACHE_DIR=str(tmp_path / "pocl"),  # PoCL's own cache must miss
               PYTHONPATH=os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    outcomes = []
    for margin in (20, 40, 80, 160):
        script = tmp_path / f"child{margin}.py"
        script.write_text(textwrap.dedent(_OUT_OF_MEMORY_CHILD).replace("MARGIN", str(margin)))
        r = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, cwd=root,
                           env=env, timeout=120)  # a hang fails here
        assert "Timeout" not in r.stderr, r.stdout + r.stderr
        outcomes.append((margin, r.returncode, (r.stdout + r.stderr)[-300:]))
        if "MemoryError:" in r.stdout:
            assert r.returncode == 0, r.stdout + r.stderr
            assert "refused at once" in r.stdout and "reset" in r.stdout, r.stdout + r.stderr
            return
    pytest.skip(f"no memory limit made the OpenCL driver's build fail with MemoryError here: {outcomes}")


def test_a_buffer_larger_than_the_device_takes_is_a_memory_error(arch: Any) -> None:
    """The driver's refusal (`INVALID_BUFFER_SIZE`, `MEM_OBJECT_ALLOCATION_FAILURE`) is a MemoryError that says what
    the device takes; the program goes on."""
    from qd.runtime import device

    backend = device.current().backend
    n = int(backend.device.max_mem_alloc_size) + 8
    if n > 8 << 30:
        pytest.skip(f"the device's largest buffer is {n} bytes: the host copy would be too large for this test")
    big = qd.ndarray(qd.u8, (n // (1 << 20) + 1, 1 << 20))  # host copy: untouched zero pages

    @qd.kernel
    def first(x: qd.types.ndarray(qd.u8, 2)):
        x[0, 0] = 1

    with pytest.raises(MemoryError, match="could not allocate a buffer of .* its largest buffer is"):
        first(big)
    small = qd.ndarray(qd.u8, (2, 4))
    first(small)
    assert small.to_numpy()[0, 0] == 1


def test_what_a_compiled_kernel_keeps_on_the_host(arch: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 27 (RSS 1.15 MB per OpenCL kernel): no 512 KB host print buffer for a launch plan on the device (its
    pages were resident in a heap PoCL's compiler had fragmented), and the C heap trimmed once per program
    PoCL built from source, not for one loaded from the binary cache."""
    from qd.gpu import opencl_tier
    from qd.runtime import launch

    sizes: list[int] = []
    make = launch._Scratch.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        make(self, *args, **kwargs)
        sizes.append(self.printbuf.size)

    trims: list[int] = []
    monkeypatch.setattr(launch._Scratch, "__init__", recording)
    monkeypatch.setattr(opencl_tier, "_trim_heap", lambda: trims.append(1))
    qd.init(arch=qd.opencl, log_level="warn", offline_cache=True, offline_cache_file_path=str(tmp_path))

    def make_kernel() -> Any:
        @qd.kernel
        def k(x: qd.types.ndarray(qd.f32, 1), c: qd.f32) -> qd.f32:
            s = 0.0
            for i in x:
                x[i] = x[i] * c + 1.0
                s += x[i]
            return s
        return k

    x = np.zeros(64, np.float32)
    k = make_kernel()
    for _ in range(4):  # the first call compiles, later ones launch through the plan
        k(x, 2.0)
    assert sizes and max(sizes) == 1 and len(trims) == 1
    qd.reset()
    qd.init(arch=qd.opencl, log_level="warn", offline_cache=True, offline_cache_file_path=str(tmp_path))
    again = make_kernel()
    again(x, 2.0)
    assert again.stats["from_cache"] and len(trims) == 1  # loaded from the binary: nothing to trim
