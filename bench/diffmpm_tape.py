"""What the Tape's stale-read tracking and saved copies (`qd/runtime/ad_snapshots.py`, issue 28.2) cost on difftaichi's
diffmpm at its published size (its robot scene: 2976 particles, a 128 x 128 grid, 1024 steps, `tests/programs/diffmpm.py`): one
training iteration, `with qd.ad.Tape(loss): forward()`, against the same with the check off (the Tape records no
launches' accesses, saves nothing and checks nothing: Quadrants' behaviour).

    python bench/diffmpm_tape.py [arch] [steps] [rounds]     (default: cpu 1024 2)

Prints per mode the median wall time of the forward block, of the reverse pass and of both, the peak of Python/numpy
memory during the iteration (tracemalloc: the Tape's launch records and copies, not the fields' own storage), the
copies the Tape made, and the loss and a gradient (the two modes must agree: the check changes no value).
"""

from __future__ import annotations

import contextlib
import pathlib
import random
import statistics
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import programs

import qd
from qd.runtime import ad_custom as custom


@contextlib.contextmanager
def _check_off():
    """The Tape without its stale-read tracking: no launch records, no copies, no check at its gradient."""
    saved = (custom.Tape.launching, custom.Tape.launched, custom.Tape.host_write, custom._check_stale)
    custom.Tape.launching = custom.Tape.launched = custom.Tape.host_write = lambda self, x: None
    custom._check_stale = lambda launches: None
    try:
        yield
    finally:
        custom.Tape.launching, custom.Tape.launched, custom.Tape.host_write, custom._check_stale = saved


def _iteration(m) -> dict:
    tracemalloc.start()
    t0 = time.perf_counter()
    tape = m.ti.ad.Tape(m.loss)
    tape.eval_on_exit = False
    with tape:
        m.forward()
    t1 = time.perf_counter()
    tape.grad()
    qd.sync()
    t2 = time.perf_counter()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"forward_s": t1 - t0, "reverse_s": t2 - t1, "peak_mb": peak / 2**20, "saved": tape.saved,
            "loss": float(m.loss[None]), "grad": float(m.weights.grad.to_numpy().ravel()[0])}


def main(arch: str = "cpu", steps: int = 1024, rounds: int = 2) -> None:
    qd.init(arch=getattr(qd, arch), default_fp=qd.f32, log_level="warn", jit="eager", fast_math=False)
    random.seed(0)
    np.random.seed(0)
    m = programs.load("diffmpm", steps=steps, iters=0, real=qd.f32)
    m.main()  # the scene and its fields, no training iteration
    print(f"diffmpm on {arch}: {m.n_particles} particles, grid {m.n_grid}, {steps} steps, {rounds} rounds "
          "after a warm-up")
    for mode in ("check on", "check off"):
        with contextlib.nullcontext() if mode == "check on" else _check_off():
            _iteration(m)  # compiles
            runs = [_iteration(m) for _ in range(rounds)]
        med = {k: statistics.median(r[k] for r in runs) for k in ("forward_s", "reverse_s", "peak_mb")}
        last = runs[-1]
        print(f"  {mode:9s}: forward {med['forward_s']:.2f} s, reverse {med['reverse_s']:.2f} s, "
              f"total {med['forward_s'] + med['reverse_s']:.2f} s, peak Python memory {med['peak_mb']:.1f} MB, "
              f"copies {last['saved']}, loss {last['loss']!r}, weights.grad[0,0] {last['grad']!r}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0] if a else "cpu", int(a[1]) if len(a) > 1 else 1024, int(a[2]) if len(a) > 2 else 2)
