"""qd demo: learning to throw, by gradient descent through a simulation with a data-dependent loop.

Each of N balls is thrown from the origin with a learnable initial velocity and must be, after its
own flight time, at its own target (where a hidden throw put it). Ball i integrates `steps[i]`
substeps (a per-ball count, read from a field: a dynamic loop), with quadratic air drag and a
headwind above a height (an `if` inside the loop).
`qd.ad.Tape` differentiates the whole flight; qd keeps every loop-carried value on an adstack sized
exactly from `steps` before the reverse launch. Plain gradient descent on the squared miss distance
brings the loss down by orders of magnitude.

Prints, per iteration: a progress bar, the loss, and the time of the forward and the backward pass.
Run it with `bash dev.sh demo` (options: --n 4096 --iters 60 --lr 0.3 --arch cpu|interp --plot PATH).
With matplotlib installed (`pip install "qd-lang[plot]"`) it also draws a few balls' throws before and after
training, with their targets, into a PNG (--plot PATH, default qd-demo-throws.png in the temp folder;
--plot "" draws nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import qd

DT = 2e-3
GRAVITY = -9.8
DRAG = 0.05
WIND = 0.8
WIND_HEIGHT = 1.0


def build(n: int):
    v0 = qd.Vector.field(2, qd.f32, shape=n, needs_grad=True)  # the parameters
    steps = qd.field(qd.i32, shape=n)  # substeps per ball: its flight time / DT
    target = qd.Vector.field(2, qd.f32, shape=n)
    final = qd.Vector.field(2, qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def fly():
        for i in range(n):
            p = qd.Vector([0.0, 0.0])
            v = v0[i]
            for _ in range(steps[i]):  # a dynamic loop: its trip count is data
                v += DT * (qd.Vector([0.0, GRAVITY]) - DRAG * v.norm() * v)
                p += DT * v
                if p[1] > WIND_HEIGHT:  # a headwind blows above this height only
                    v[0] -= DT * WIND * v[0]
            final[i] = p

    @qd.kernel
    def miss():
        for i in range(n):
            d = final[i] - target[i]
            loss[None] += d.dot(d)  # each ball's gradient depends on its own miss only

    return v0, steps, target, final, loss, fly, miss


def bar(done: int, total: int, width: int = 24) -> str:
    k = done * width // total
    return "[" + "#" * k + "." * (width - k) + f"] {done:3d}/{total}"


def trajectories(v0: np.ndarray, steps: np.ndarray) -> list[np.ndarray]:
    """Each ball's path (points of shape (steps+1, 2)), by fly()'s physics in numpy: the demo's picture only."""
    paths = []
    for v, n in zip(v0.astype(np.float64), steps):
        p, v, pts = np.zeros(2), v.copy(), [np.zeros(2)]
        for _ in range(int(n)):
            v = v + DT * (np.array([0.0, GRAVITY]) - DRAG * np.linalg.norm(v) * v)
            p = p + DT * v
            if p[1] > WIND_HEIGHT:
                v[0] -= DT * WIND * v[0]
            pts.append(p)
        paths.append(np.array(pts))
    return paths


def plot_throws(path: str, before: np.ndarray, after: np.ndarray, steps: np.ndarray, target: np.ndarray,
                balls: int = 8) -> str | None:
    """Draws `balls` throws before (dashed) and after (solid) training with their targets; returns the file
    written, or None when matplotlib is missing (the demo never needs it)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pick = np.linspace(0, len(steps) - 1, balls).astype(int)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, (b, a) in enumerate(zip(trajectories(before[pick], steps[pick]), trajectories(after[pick], steps[pick]))):
        color = f"C{k % 10}"
        ax.plot(b[:, 0], b[:, 1], "--", color=color, alpha=0.5)
        ax.plot(a[:, 0], a[:, 1], "-", color=color)
        ax.plot(*target[pick[k]], "x", color=color, markersize=9)
    ax.axhline(WIND_HEIGHT, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("height (m)")
    ax.set_title("learned throws: before training (dashed), after (solid), targets (x); headwind above dotted")
    ax.title.set_fontsize(9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.3)
    ap.add_argument("--arch", default="cpu", choices=["cpu", "interp"])
    ap.add_argument("--plot", default=os.path.join(tempfile.gettempdir(), "qd-demo-throws.png"),
                    help='PNG of the throws before and after training (needs matplotlib; "" for none)')
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch), jit="eager", log_level="warn")
    v0, steps, target, final, loss, fly, miss = build(args.n)

    rng = np.random.default_rng(0)
    flight = rng.uniform(0.3, 1.2, args.n)  # seconds in the air
    steps.from_numpy(np.round(flight / DT).astype(np.int32))
    # targets where hidden "true" throws land, so every target is reachable; then start from a guess
    v0.from_numpy(np.stack([rng.uniform(1.0, 6.0, args.n), rng.uniform(0.5, 6.0, args.n)], 1).astype(np.float32))
    fly()
    target.from_numpy(final.to_numpy())
    v0.from_numpy(np.tile(np.array([[3.0, 3.0]], np.float32), (args.n, 1)))
    before = v0.to_numpy()
    print(f"learning to throw: {args.n} balls, {int(steps.to_numpy().min())}..{int(steps.to_numpy().max())} "
          f"substeps each (data-dependent), {args.iters} gradient steps on arch={args.arch}")

    first = None
    for it in range(1, args.iters + 1):
        t0 = time.perf_counter()
        with qd.ad.Tape(loss=loss):
            fly()
            miss()
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        value = float(loss[None]) / args.n  # mean squared miss distance, m^2
        first = value if first is None else first
        v0.from_numpy(v0.to_numpy() - args.lr * v0.grad.to_numpy())
        end = "\n" if it == args.iters or it in (1, 10) or not sys.stdout.isatty() and it % 10 == 0 else "\r"
        if end == "\n" or sys.stdout.isatty():
            print(f"{bar(it, args.iters)}  loss {value:10.3e}  forward {(t1 - t0) * 1e3:7.1f} ms  "
                  f"backward {(t2 - t1) * 1e3:7.1f} ms", end=end, flush=True)
    print(f"loss {first:.3e} -> {value:.3e} ({first / max(value, 1e-30):.0f}x lower); "
          f"the first iteration includes compiling both kernels and their reverse-mode versions")
    if args.plot:
        written = plot_throws(args.plot, before, v0.to_numpy(), steps.to_numpy(), target.to_numpy())
        print(f"wrote the throws before and after training to {written}" if written else
              'to get a plot of the throws before and after training: pip install "qd-lang[plot]"')


if __name__ == "__main__":
    main()
