"""The first call of a new kernel on a GPU arch, in a fresh process (issue 13): run twice on one cache folder,
the first process is a cold start and the second a warm one.

    python bench/_gpu_first_call.py LIB ARCH CACHE_DIR      # LIB: qd | quadrants

The kernel is W1's saxpy over 2^20 f32 ndarrays (made and filled before the clock starts). `first_call_ms` is
the time from the call to the synced result: the instance's compilation (or its load from the cache) and one
launch; `import_ms` is the import and `init`. Prints one JSON line; QD_PROFILE=cumulative (or another pstats
sort key) also prints a profile of the call to stderr; QD_PHASES=1 (qd) adds the ms of the call's phases
(frontend, passes, device program, uploads, launch) without a profiler's overhead. Set CUDA_CACHE_DISABLE=1 for
a cold run on CUDA: the driver keeps the machine code it makes of PTX in its own cache otherwise. The arrays are
filled with `from_numpy` before the clock starts, which on a GPU arch uploads them (in qd and Quadrants alike).
"""

import json
import os
import sys
import time

import numpy as np

N = 1 << 20


def _time_phases() -> dict:
    """Wraps the stages of qd's first call with timers; returns the dict they add their ms to."""
    import qd.frontend.kernel as kernel
    import qd.passes.runner as runner
    import qd.runtime.device as device
    import qd.runtime.device_launch as device_launch
    import qd.runtime.launch as launch
    from qd.runtime import tiers

    times: dict = {}

    def timed(owner, attr, label):
        fn = getattr(owner, attr)

        def run(*a, **k):
            s = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                times[label] = times.get(label, 0.0) + (time.perf_counter() - s) * 1e3
        setattr(owner, attr, run)

    timed(kernel, "build_kernel_ir", "frontend")
    timed(runner, "run_passes", "passes")
    timed(launch, "compile_kernel", "runtime_instance")
    timed(device_launch, "_state", "device_program")
    timed(device.Mirror, "to_device", "mirror_uploads")
    timed(tiers, "launch", "launch_total")
    return times


def main() -> int:
    name, arch, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    t0 = time.perf_counter()
    lib = __import__(name)
    lib.init(arch=getattr(lib, arch), offline_cache=True, offline_cache_file_path=cache_dir, log_level="warn")
    t1 = time.perf_counter()
    x, y = lib.ndarray(lib.f32, N), lib.ndarray(lib.f32, N)
    x.from_numpy(np.ones(N, np.float32))
    y.from_numpy(np.arange(N, dtype=np.float32))
    lib.sync()
    globals()["lib"] = lib  # the kernel's annotations are resolved in this module's globals

    @lib.kernel
    def saxpy(x: lib.types.ndarray(lib.f32, 1), y: lib.types.ndarray(lib.f32, 1), a: lib.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    phases = _time_phases() if name == "qd" and os.environ.get("QD_PHASES") else None
    prof = None
    if os.environ.get("QD_PROFILE"):  # where the first call's time goes (top 40 by that key)
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t2 = time.perf_counter()
    saxpy(x, y, 2.0)
    lib.sync()
    t3 = time.perf_counter()
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats(os.environ["QD_PROFILE"]).print_stats(40)
    out = y.to_numpy()
    ok = bool(out[7] == 9.0 and out[N - 1] == np.float32(N - 1) + 2.0)
    out = {"lib": name, "arch": arch, "import_ms": (t1 - t0) * 1e3, "first_call_ms": (t3 - t2) * 1e3, "ok": ok}
    if phases is not None:
        out["phases_ms"] = {k: round(v, 3) for k, v in phases.items()}
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
