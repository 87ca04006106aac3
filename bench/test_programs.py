"""Kernels of published programs on the CPU tier (issue 31), from the ports in `tests/programs/`: the program's own
kernel, timed after a first launch compiled it (`jit="eager"`).

- Taichi's nbody `compute_force` (N = 3000 planets, every pair: a serial inner loop over AoS `Vector.field`s
  accumulating into the planet's own `force[i]`). Quadrants 1.3.3 took 7-13 ms on this 2-core machine (issue 31).

`extra_info` has `ms` (median) and the tier.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from _bench import ensure_native, record

import qd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import programs  # (the ports' loader: `tests/programs/__init__.py`)


def test_nbody_compute_force_qd(benchmark, cpu_program):
    benchmark.group = "nbody compute_force N=3000"
    nb = programs.load("nbody")
    nb.initialize()
    nb.compute_force()
    qd.sync()
    ensure_native(nb.compute_force, benchmark)
    f = nb.force.to_numpy()
    assert np.isfinite(f).all() and np.abs(f).max() > 0

    def step():
        nb.compute_force()
        qd.sync()

    benchmark(step)
    ms = benchmark.stats.stats.median * 1e3
    benchmark.extra_info["ms"] = ms
    record("nbody compute_force N=3000 (ms)", "qd", ms)
