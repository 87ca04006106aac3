"""What the Tape's saved copies cost (`qd/runtime/ad_snapshots.py`, issue 28.2): a program with many steps of a small
in-place kernel, `x[i] = sin(x[i]) * w[i]` (one field, the Tape copies x before each step), against the same program
written time-indexed, `xs[t + 1, i] = sin(xs[t, i]) * w[i]` (no copies; a field of STEPS + 1 rows).

    python bench/tape_snapshots.py [arch] [steps] [n ...]     (default: cpu 1000 1024 65536)

Prints per size: the Tape's copies and bytes, the time-indexed field's bytes, and the median wall time of one
`with qd.ad.Tape(loss):` block (forward steps, then the reverse pass) of each, after a warm-up block; the two
gradients are checked to agree first.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import qd

ROUNDS = 5


def _programs(n: int, steps: int) -> tuple:
    x = qd.field(qd.f64, shape=n, needs_grad=True)
    xs = qd.field(qd.f64, shape=(steps + 1, n), needs_grad=True)
    w = qd.field(qd.f64, shape=n, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x0 = np.linspace(0.1, 1.2, n)
    w.from_numpy(np.linspace(0.8, 1.1, n))

    @qd.kernel
    def step():
        for i in range(n):
            x[i] = qd.sin(x[i]) * w[i]

    @qd.kernel
    def total():
        for i in range(n):
            loss[None] += x[i]

    @qd.kernel
    def step_t(t: qd.i32):
        for i in range(n):
            xs[t + 1, i] = qd.sin(xs[t, i]) * w[i]

    @qd.kernel
    def total_t():
        for i in range(n):
            loss[None] += xs[steps, i]

    def in_place() -> qd.ad.Tape:
        x.from_numpy(x0)
        with qd.ad.Tape(loss) as tape:
            for _ in range(steps):
                step()
            total()
        return tape

    def time_indexed() -> qd.ad.Tape:
        with qd.ad.Tape(loss) as tape:
            for t in range(steps):
                step_t(t)
            total_t()
        return tape

    init = np.zeros((steps + 1, n))
    init[0] = x0
    xs.from_numpy(init)
    return in_place, time_indexed, x, xs, w


def _median_ms(fn: object) -> float:
    fn()
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    arch = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    sizes = [int(a) for a in sys.argv[3:]] or [1024, 65536]
    qd.init(arch=getattr(qd, arch), default_fp=qd.f64)
    print(f"arch={arch} steps={steps}")
    print(f"{'n':>8} {'copies':>7} {'copied MB':>10} {'indexed MB':>11} {'in-place ms':>12} {'indexed ms':>11}")
    for n in sizes:
        in_place, time_indexed, _, xs, w = _programs(n, steps)
        tape = in_place()
        g = w.grad.to_numpy()
        time_indexed()
        np.testing.assert_allclose(g, w.grad.to_numpy(), rtol=1e-10)
        a, b = _median_ms(in_place), _median_ms(time_indexed)
        print(f"{n:>8} {tape.saved['copies']:>7} {tape.saved['bytes'] / 2**20:>10.2f} "
              f"{xs.to_numpy().nbytes / 2**20:>11.2f} {a:>12.1f} {b:>11.1f}")


if __name__ == "__main__":
    main()
