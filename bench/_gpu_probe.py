"""Where the time of a GPU launch goes (qd only; run on a lent GPU machine through bench/gpu_machine.sh probe):
the Python launch path per launch (no sync), the wait at sync, a launch-and-sync round trip, a profile of
the launch path, the device's own cost per submission, command buffer and dispatch (`submissions`), and
W1's launch, sync and device time."""

import cProfile
import os
import pstats
import statistics
import sys
import time
from typing import Any

import numpy as np

import qd


def main() -> None:
    arch = sys.argv[1] if len(sys.argv) > 1 else "vulkan"
    qd.init(arch=getattr(qd, arch), log_level="warn")

    @qd.kernel
    def tiny(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(1):
            x[i] += 1.0

    x = qd.ndarray(qd.f32, 16)
    for _ in range(300):
        tiny(x)
    qd.sync()
    loops, syncs, trips = [], [], []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(1000):
            tiny(x)
        t1 = time.perf_counter()
        qd.sync()
        t2 = time.perf_counter()
        loops.append((t1 - t0) * 1e3)
        syncs.append((t2 - t1) * 1e3)
    for _ in range(300):
        t0 = time.perf_counter()
        tiny(x)
        qd.sync()
        trips.append((time.perf_counter() - t0) * 1e6)
    print(f"1000 launches: loop {statistics.median(loops):.2f} ms, then sync {statistics.median(syncs):.2f} ms; "
          f"launch+sync round trip {statistics.median(trips):.1f} us (min {min(trips):.1f})")
    got = float(x.to_numpy()[0])
    want = 300 + 7000 + 300
    print("result", "ok" if got == want else f"WRONG {got} != {want}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3000):
        tiny(x)
    qd.sync()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    if arch == "vulkan":
        submissions(tiny, x)
    if arch == "cuda":
        cuda_floor(tiny, x)

    n = 1 << (28 - int(os.environ.get("QD_BENCH_SHIFT", "0")))
    xa, ya = qd.ndarray(qd.f32, n), qd.ndarray(qd.f32, n)
    xa.from_numpy(np.ones(n, np.float32))
    ya.fill(1.0)

    @qd.kernel
    def saxpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]
    saxpy(xa, ya, 2.0)
    qd.sync()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:  # clocks up
        saxpy(xa, ya, 2.0)
        qd.sync()
    la, sy, dv = [], [], []
    for _ in range(20):
        t0 = time.perf_counter()
        saxpy(xa, ya, 2.0)
        t1 = time.perf_counter()
        qd.sync()
        t2 = time.perf_counter()
        la.append((t1 - t0) * 1e3)
        sy.append((t2 - t1) * 1e3)
        dv.append(saxpy.stats.get("device_ms") or 0.0)
    print(f"W1: launch {statistics.median(la):.3f} ms, sync {statistics.median(sy):.3f} ms, "
          f"device {statistics.median(dv):.3f} ms")


def cuda_floor(tiny, x) -> None:
    """The CUDA driver's own cost per call (ctypes, no qd launch path): cuLaunchKernel, an event record, a small
    host-to-device copy."""
    from qd.gpu import cuda_tier
    from qd.runtime import device

    rt = device.current()
    drv = rt.backend.drv
    st = next(iter(tiny._last_ck.device.values()))
    prog = st.prog
    tiny(x)
    qd.sync()
    slot = rt.pool[st.slot_key][-1]
    key, params = cuda_tier._launch_params(slot, prog)[0]
    fn = prog.functions[0]
    ev = drv.event()

    def per(label: str, call) -> None:
        for _ in range(100):
            call()
        drv.synchronize()
        t0 = time.perf_counter()
        for _ in range(1000):
            call()
        t1 = time.perf_counter()
        drv.synchronize()
        print(f"  {label}: {(t1 - t0) * 1e3:.2f} us each (then {(time.perf_counter() - t1) * 1e3:.2f} ms sync)")
    print("CUDA driver floor (ctypes, 1000 calls):")
    per("cuLaunchKernel", lambda: drv.launch(fn, 1, 256, params))
    per("cuEventRecord", lambda: drv.record(ev))
    per("cuMemcpyHtoDAsync 200 B pinned", lambda: drv.htod(slot.twin_address, slot.host_ptr, 200))


def submissions(tiny, x) -> None:
    """The device's own cost per submission, per command buffer and per dispatch (no qd launch path)."""
    from qd.runtime import device

    rt = device.current()
    be, dev = rt.backend, rt.backend.dev
    vk = dev.vk
    st = next(iter(tiny._last_ck.device.values()))
    prog = st.prog
    tiny(x)
    qd.sync()
    slot = rt.pool[st.slot_key][-1]  # the slot of a finished launch: its context words are valid
    pipe, push = prog.pipelines[0], __import__("struct").pack("<Q", slot.address)

    def record(dispatches: int, stamps: bool) -> Any:
        cmd = dev.begin(once=False)
        pool = be._queries(prog) if stamps else None
        if pool is not None:
            vk.vkCmdResetQueryPool(cmd, pool, 0, 2)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
        for d in range(dispatches):
            if d:
                dev.barrier(cmd)
            dev.run(cmd, pipe, push, (1, 1, 1))
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
        return dev.end(cmd)

    def per(label: str, n: int, fn) -> None:
        fn()
        t0 = time.perf_counter()
        fn()
        print(f"  {label}: {(time.perf_counter() - t0) * 1e6 / n:.1f} us each")

    def back_to_back(cmd: Any, n: int = 1000, separate: bool = True) -> None:
        works = []
        for _ in range(n):
            works.append(dev.submit_recorded(cmd))
            if separate:
                dev.flush()
        for w in works:
            dev.wait(w)
    print("device costs (1000 back to back, then wait):")
    per("barrier-only command buffer, one submit each", 1000, lambda: back_to_back(record(0, False)))
    rec1 = record(1, False)
    per("one dispatch per command buffer, one submit each", 1000, lambda: back_to_back(rec1))
    per("one dispatch + timestamps, one submit each", 1000, lambda: back_to_back(record(1, True)))
    many = record(1000, False)
    per("1000 dispatches with barriers in one command buffer", 1000, lambda: dev.wait(dev.submit_recorded(many)))
    per("one dispatch per command buffer, queued (Device.submit_recorded)", 1000,
        lambda: back_to_back(rec1, separate=False))
    trips = []
    for _ in range(200):
        t0 = time.perf_counter()
        dev.wait(dev.submit_recorded(rec1))
        trips.append((time.perf_counter() - t0) * 1e6)
    print(f"  one dispatch, submit and wait: {statistics.median(trips):.1f} us (min {min(trips):.1f})")


if __name__ == "__main__":
    main()
