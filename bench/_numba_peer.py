"""numba versions of the CPU workloads (peers, side by side with qd). Import fails when numba is absent.

`numba` goes into qd's own .venv when a release pinned to the same llvmlite exists (numba 0.68 pins
llvmlite 0.50, as qd does); `dev.sh bench` installs it with llvmlite and numpy held at their installed
versions, so it can never move them, and leaves it out (the numba benchmarks skip) when that fails.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, fastmath=False)
def saxpy(x, y, a):
    for i in prange(x.shape[0]):
        y[i] = a * x[i] + y[i]


@njit(parallel=True)
def sum_sq(x, s):
    acc = np.float32(0.0)
    for i in prange(x.shape[0]):
        acc += x[i] * x[i]
    s[()] += acc


@njit
def tiny(x):
    x[0] += 1
