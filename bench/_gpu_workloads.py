"""The GPU workloads of issue 12/13, written once against the Quadrants API so that qd and Quadrants run the very
same code on the same machine:

    python bench/_gpu_workloads.py LIB ARCH [W1 W2 W3 LAUNCH ...]     # LIB: qd | quadrants, ARCH: vulkan | cuda

W1 saxpy 2^28 f32 (ndarrays), W2 s[None] += x[i]*x[i] into a 0-D ndarray over 2^24 f32, W3 reverse mode
through a dynamic loop (`a[i] = i % 32` trips of `v = 0.95 v + 0.1`, fields) at 2^20 and 2^24 (forward and
`kernel.grad()` timed apart), LAUNCH: the cost of one launch of a one-ndarray kernel (1000 launches, then one
sync). Each result is checked against numpy first (a wrong result is reported, not timed). Every timing is
the median of ROUNDS rounds, each ended by `sync()`, after WARMUP_S seconds of warm-up rounds; prints one JSON
object (ms, or "error: ..." strings).
"""

# no `from __future__ import annotations`: kernel annotations must be evaluated where the kernel is defined

import importlib
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

ROUNDS = 10
WARMUP_S = 0.3
SHIFT = int(os.environ.get("QD_BENCH_SHIFT", "0"))  # smaller sizes for a quick run (lavapipe on 2 cores)


def _median_ms(lib: Any, fn: Callable[[], None], rounds: int = ROUNDS) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:  # the GPU's clocks come up (the first rounds run slower)
        fn()
        lib.sync()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        lib.sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def _with_device_ms(kernel: Any, ms: float) -> Any:
    """qd reports the device time of a launch (Vulkan timestamps): {"ms": wall, "device_ms": on the device}."""
    dev = getattr(kernel, "stats", {}).get("device_ms") if hasattr(kernel, "stats") else None
    return ms if dev is None else {"ms": ms, "device_ms": dev}


def w1(lib: Any, timer: Callable = _median_ms) -> Any:
    n = 1 << (28 - SHIFT)

    @lib.kernel
    def saxpy(x: lib.types.ndarray(lib.f32, 1), y: lib.types.ndarray(lib.f32, 1), a: lib.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x, y = lib.ndarray(lib.f32, n), lib.ndarray(lib.f32, n)
    xs = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    x.from_numpy(xs)
    y.fill(1.0)
    saxpy(x, y, 2.0)
    got = y.to_numpy()
    if not np.allclose(got[:: 1 << 12], 2.0 * xs[:: 1 << 12] + 1.0, rtol=1e-6):
        raise AssertionError("W1 result is wrong")
    return _with_device_ms(saxpy, timer(lib, lambda: saxpy(x, y, 2.0)))


def w2(lib: Any, timer: Callable = _median_ms) -> Any:
    n = 1 << (24 - SHIFT)

    @lib.kernel
    def sum_sq(x: lib.types.ndarray(lib.f32, 1), s: lib.types.ndarray(lib.f32, 0)):
        for i in range(x.shape[0]):
            s[None] += x[i] * x[i]

    xs = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    x, s = lib.ndarray(lib.f32, n), lib.ndarray(lib.f32, ())
    x.from_numpy(xs)
    s.fill(0.0)
    sum_sq(x, s)
    want = float(np.sum(xs.astype(np.float64) ** 2))
    got = float(s.to_numpy())
    if abs(got - want) > 1e-3 * want:
        raise AssertionError(f"W2 result {got} is off (want {want})")
    return _with_device_ms(sum_sq, timer(lib, lambda: sum_sq(x, s)))


def w3(lib: Any, n: int, timer: Callable = _median_ms) -> dict:
    x = lib.field(lib.f32, shape=n, needs_grad=True)
    loss = lib.field(lib.f32, shape=(), needs_grad=True)
    a = lib.field(lib.i32, shape=n)

    @lib.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = 0.95 * v + 0.1
            loss[None] += v

    xs = np.random.default_rng(0).uniform(-2, 2, n).astype(np.float32)
    an = (np.arange(n) % 32).astype(np.int32)
    x.from_numpy(xs)
    a.from_numpy(an)

    def fwd() -> None:
        loss[None] = 0.0
        k()

    def bwd() -> None:
        loss.grad[None] = 1.0
        x.grad.fill(0.0)
        k.grad()

    fwd()
    bwd()
    p = 0.95 ** an.astype(np.float64)
    err = float(np.max(np.abs(x.grad.to_numpy() - p)))
    if err > 1e-5:
        raise AssertionError(f"W3 gradient is off by {err}")
    return {"fwd": timer(lib, fwd), "bwd": timer(lib, bwd), "grad_err": err}


def launch(lib: Any, timer: Callable = _median_ms) -> float:
    @lib.kernel
    def tiny(x: lib.types.ndarray(lib.f32, 1)):
        for i in range(1):
            x[i] += 1.0

    x = lib.ndarray(lib.f32, 16)
    reps = 1000

    def many() -> None:
        for _ in range(reps):
            tiny(x)
    return timer(lib, many) * 1e3 / reps  # µs per launch


def main() -> int:
    name, arch = sys.argv[1], sys.argv[2]
    which = sys.argv[3:] or ["W1", "W2", "W3", "LAUNCH"]
    lib = importlib.import_module(name)
    kw = {"ad_stack_experimental_enabled": True} if name == "quadrants" else {}
    lib.init(arch=getattr(lib, arch), log_level="warn", **kw)
    out: dict = {"lib": name, "arch": arch}
    jobs: dict[str, Callable[[], Any]] = {"W1": lambda: w1(lib), "W2": lambda: w2(lib),
                                          "W3_2^20": lambda: w3(lib, 1 << (20 - SHIFT)),
                                          "W3_2^24": lambda: w3(lib, 1 << (24 - SHIFT)),
                                          "LAUNCH_us": lambda: launch(lib)}
    for key, job in jobs.items():
        if key.split("_")[0] not in which:
            continue
        try:
            out[key] = job()
        except Exception as e:  # a peer's failure is a result too (Quadrants: the false 2^24 cap)
            out[key] = f"error: {type(e).__name__}: {str(e)[:300]}"
        print(json.dumps({key: out[key]}), file=sys.stderr, flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
