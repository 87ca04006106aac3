"""Interpreter throughput (issue 2): saxpy over 2^22 f32 and a loop-heavy kernel.

Each benchmark stores `ns_per_op` (nanoseconds per interpreted bytecode instruction, counted from
the lowered code) in `extra_info`; compare runs with `bash dev.sh bench --benchmark-compare`.
Single-thread variants measure one core; the default uses every core.
"""

from __future__ import annotations


import numpy as np
import pytest

import qd
from _bench import saxpy_kernel

N = 1 << 22




def _loop_heavy():
    @qd.kernel
    def loop_heavy(out: qd.types.ndarray(qd.f32, 1), inner: qd.i32):
        for i in range(out.shape[0]):
            acc = 0.0
            v = qd.cast(i, qd.f32) * 1e-3
            for j in range(inner):
                acc = acc * 0.5 + v
                v = v * 0.999 + 0.001
            out[i] = acc

    return loop_heavy


@pytest.mark.parametrize("threads", [1, 0], ids=["1thread", "allcores"])
def test_saxpy_2_22(benchmark, interp_program, threads):
    if threads:
        qd.cfg.cpu_max_num_threads = threads
    k = saxpy_kernel()
    x = np.random.rand(N).astype(np.float32)
    y = np.random.rand(N).astype(np.float32)
    k(x, y, 2.0)  # compile outside the timing
    benchmark(k, x, y, 2.0)
    ops = 5 * N  # 2 loads, mul, add, store per element
    benchmark.extra_info["ns_per_op"] = benchmark.stats.stats.median / ops * 1e9
    benchmark.extra_info["ops_per_s"] = ops / benchmark.stats.stats.median


@pytest.mark.parametrize("threads", [1, 0], ids=["1thread", "allcores"])
def test_loop_heavy(benchmark, interp_program, threads):
    if threads:
        qd.cfg.cpu_max_num_threads = threads
    k = _loop_heavy()
    out = np.zeros(4096, np.float32)
    inner = 1000
    k(out, inner)
    benchmark(k, out, inner)
    ops = 4 * 4096 * inner  # mul+add, mul+add per iteration; the loop test/increment adds 2 more
    benchmark.extra_info["ns_per_float_op"] = benchmark.stats.stats.median / ops * 1e9


def test_compile_small_kernel(benchmark, interp_program):
    """Source -> IR -> passes -> bytecode for a small kernel, measured on fresh definitions."""

    def compile_once():
        k = saxpy_kernel()
        x = np.zeros(4, np.float32)
        k(x, x, 1.0)

    benchmark(compile_once)
