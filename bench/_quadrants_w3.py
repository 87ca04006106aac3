"""Quadrants' side of W3/W3n (bench/test_adstack.py, bench/test_maxreducer.py), run by `.venv-peers`'s python.

    python bench/_quadrants_w3.py WORK N THREADS ROUNDS MAX_TRIPS

The same kernels, fields and data as qd's benchmark (`x` uniform in [-2, 2) from numpy's default_rng(0),
`a[i] = i % MAX_TRIPS`), on `quadrants.cpu` with `ad_stack_experimental_enabled=True` and qd's thread
count. Checks the gradient of `x` against the float64 closed form first (exit 1 when wrong), then times
the forward and `kernel.grad()` (one warm-up round, then ROUNDS rounds, each ended by `qd.sync()`) and
prints one JSON line: medians and spreads in ms, the max relative error, compile (first call) times.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def ref(work: str, xn: np.ndarray, an: np.ndarray) -> tuple[float, np.ndarray]:
    """As bench/test_adstack.py's `_ref` (W3 in closed form)."""
    if work == "W3":
        p = 0.95 ** an.astype(np.float64)
        return float(np.sum(p * xn.astype(np.float64) + 2.0 * (1.0 - p))), p
    v = xn.astype(np.float64)
    d = np.ones_like(v)
    for k in range(int(an.max()) + 1):
        live = k < an
        if work == "W3":
            dv, nv = np.full_like(v, 0.95), 0.95 * v + 0.1
        else:
            dv, nv = 0.95 + 0.1 * np.cos(v), 0.95 * v + 0.1 * np.sin(v)
        d = np.where(live, d * dv, d)
        v = np.where(live, nv, v)
    return float(np.sum(v)), d


def main() -> int:
    work, n, threads, rounds, max_trips = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
        int(sys.argv[5])
    import quadrants as qd

    qd.init(arch=qd.cpu, ad_stack_experimental_enabled=True, cpu_max_num_threads=threads, log_level="warn")
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    a = qd.field(qd.i32, shape=n)

    if work == "W3":
        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(a[i]):
                    v = 0.95 * v + 0.1
                loss[None] += v
    else:
        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(a[i]):
                    v = 0.95 * v + 0.1 * qd.sin(v)
                loss[None] += v

    rng = np.random.default_rng(0)
    xn = (rng.random(n, dtype=np.float32) * 4 - 2).astype(np.float32)
    an = (np.arange(n) % max_trips).astype(np.int32)
    x.from_numpy(xn)
    a.from_numpy(an)

    t0 = time.perf_counter()
    loss[None] = 0.0
    k()
    qd.sync()
    fwd_first = time.perf_counter() - t0
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    t0 = time.perf_counter()
    k.grad()
    qd.sync()
    bwd_first = time.perf_counter() - t0
    grad = x.grad.to_numpy()
    _, ref_grad = ref(work, xn, an)
    rel = np.abs(grad.astype(np.float64) - ref_grad) / np.abs(ref_grad)
    if not np.all(rel <= 1e-4):
        print(f"quadrants {work}: wrong gradient (max rel err {float(np.max(rel)):.3g})", file=sys.stderr)
        return 1

    def timed(fn) -> list[float]:
        out = []
        for r in range(rounds + 1):
            t = time.perf_counter()
            fn()
            qd.sync()
            if r:
                out.append((time.perf_counter() - t) * 1e3)
        return out

    fwd = timed(k)
    bwd = timed(k.grad)
    print(json.dumps({
        "work": work, "n": n, "threads": threads, "rounds": rounds, "version": qd.__version__,
        "fwd_ms": float(np.median(fwd)), "bwd_ms": float(np.median(bwd)),
        "fwd_min_max_ms": [min(fwd), max(fwd)], "bwd_min_max_ms": [min(bwd), max(bwd)],
        "fwd_first_ms": fwd_first * 1e3, "bwd_first_ms": bwd_first * 1e3, "max_rel_err": float(np.max(rel)),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
