"""The GPU tiers against Quadrants (issues 12, 13): W1 saxpy 2^28 f32, W2 Σx² into one 0-D ndarray cell over
2^24 f32, W3 reverse mode through a dynamic loop at 2^20 and 2^24, and the launch cost of a one-ndarray kernel.

The workloads are `bench/_gpu_workloads.py`, written once against the Quadrants API: here qd runs them under
pytest-benchmark on every GPU arch that opens (each round ends with `qd.sync()`); the same file runs Quadrants
on the same machine (`python bench/_gpu_workloads.py quadrants vulkan`; `bash bench/gpu_machine.sh bench` on a
lent GPU machine runs both). On lavapipe the sizes shrink by 2^6 unless `QD_BENCH_SHIFT` says otherwise.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

import qd

import _gpu_workloads as W
from _bench import record

ARCHS = [a for a in ("vulkan", "cuda", "opencl") if getattr(qd, a).unavailable_reason() is None]


@pytest.fixture(params=ARCHS or [pytest.param(None, marks=pytest.mark.skip(reason="no GPU arch opens here"))])
def gpu(request):
    qd.init(arch=getattr(qd, request.param), log_level="warn")
    from qd.runtime import device

    if "llvmpipe" in device.current().backend.device_name and "QD_BENCH_SHIFT" not in os.environ:
        W.SHIFT = 6
    yield request.param
    qd.reset()


def _timer(benchmark: Any) -> Callable:
    """A `_gpu_workloads` timer that hands the round to pytest-benchmark: median ms of rounds ended by sync."""
    def timer(lib: Any, fn: Callable[[], None]) -> float:
        def one() -> None:
            fn()
            lib.sync()
        benchmark.pedantic(one, rounds=10, warmup_rounds=1)
        return benchmark.stats.stats.median * 1e3
    return timer


def test_w1_saxpy(benchmark, gpu):
    ms = W.w1(qd, _timer(benchmark))
    record(f"W1 saxpy 2^{28 - W.SHIFT} f32 ({gpu}), ms", "qd", ms["ms"] if isinstance(ms, dict) else ms)


def test_w2_sum_sq(benchmark, gpu):
    ms = W.w2(qd, _timer(benchmark))
    record(f"W2 sum of squares 2^{24 - W.SHIFT} ({gpu}), ms", "qd", ms["ms"] if isinstance(ms, dict) else ms)


@pytest.mark.parametrize("log_n", [20, 24])
@pytest.mark.parametrize("part", ["fwd", "bwd"])
def test_w3_reverse_dynamic_loop(benchmark, gpu, log_n, part):
    times: dict = {}

    def timer(lib: Any, fn: Callable[[], None]) -> float:  # pytest-benchmark times the part asked for
        if len(times) == ("fwd", "bwd").index(part):
            times[part] = _timer(benchmark)(lib, fn)
        else:
            times[len(times)] = W._median_ms(lib, fn, rounds=1)
        return times[part] if part in times else 0.0

    r = W.w3(qd, 1 << (log_n - W.SHIFT), timer)
    record(f"W3 2^{log_n - W.SHIFT} {part} ({gpu}), ms", "qd", r[part])


def test_launch_overhead(benchmark, gpu):
    us = W.launch(qd, _timer(benchmark))
    record(f"launch of a one-ndarray kernel ({gpu})", "qd", us / 1e3)  # recorded in ms, shown in µs


def _struct_kernel(tmp: Any, n: int) -> Any:
    """A kernel reading every member of a dataclass of `n` ndarrays (Genesis passes its solver state so: hundreds
    of arrays a launch), from a generated module (qd reads a kernel's source from its file)."""
    import importlib.util

    src = ["import dataclasses", "import qd", "", "@dataclasses.dataclass", "class S:"]
    src += [f"    a{i}: qd.types.ndarray()" for i in range(n)]
    src += ["", "@qd.kernel", "def k(s: S, out: qd.types.ndarray()):", "    for i in range(out.shape[0]):",
            "        acc = 0.0"]
    src += [f"        acc += s.a{i}[i, 0]" for i in range(n)] + ["        out[i] = acc", ""]
    path = tmp / f"launch_struct_{n}.py"
    path.write_text("\n".join(src))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launch_struct_of_200_arrays(benchmark, gpu, tmp_path):
    """The Python launch path of the GPU tiers (Vulkan and OpenCL always; CUDA without its C launcher) with a
    dataclass of 200 ndarrays: the binding's context words are kept between launches that bind the same arrays."""
    import numpy as np

    n = 200
    mod = _struct_kernel(tmp_path, n)
    s = mod.S(*[qd.ndarray(qd.f32, (4, 2)) for _ in range(n)])
    for i in range(n):
        getattr(s, f"a{i}").fill(float(i))
    out = qd.ndarray(qd.f32, (4,))
    mod.k(s, out)
    np.testing.assert_allclose(out.to_numpy(), n * (n - 1) / 2)

    def hundred() -> None:
        for _ in range(100):
            mod.k(s, out)
        qd.sync()
    benchmark.pedantic(hundred, rounds=5, warmup_rounds=1)
    record(f"launch, dataclass of 200 ndarrays ({gpu}), us", "qd", benchmark.stats.stats.median * 1e4)
