"""BufferView against the raw ndarray (issue 7): what a view costs with `debug=False`.

Two workloads, each run over `BufferView` parameters and over plain ndarray parameters:

- saxpy over 2^24 f32 (`y[i] = a * x[i] + y[i]`; the views span the whole arrays, `x[:]`, `y[:]`): the
  cost of `arr[offset + i]` and of `v.size` as the loop bound, in compiled code (`qd.cpu`, `jit="eager"`)
  and in the interpreter (`qd.interp`, 2^20 elements);
- launch overhead: a 16-element kernel, so the time is the host path (argument conversion: a view is
  three launch args, the ndarray, offset and size); `view` passes views made once, `view_sliced` slices
  them in every call (`k(x[:], y[:], a)`), as code that takes views of changing ranges does.

Each benchmark checks its result once before timing. `extra_info` has `ms` (median) and the tier.
The run ends with the summary table (bench/conftest.py): compare the `view` and `ndarray` columns.
"""

from __future__ import annotations

import numpy as np
import pytest

import qd
from _bench import ensure_native, record
from qd import BufferView

N_CPU = 1 << 24
N_INTERP = 1 << 20
N_SMALL = 16


def _kernels() -> dict:
    @qd.kernel
    def saxpy_view(x: BufferView[qd.f32], y: BufferView[qd.f32], a: qd.f32):
        for i in range(x.size):
            y[i] = a * x[i] + y[i]

    @qd.kernel
    def saxpy_nd(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    return {"view": saxpy_view, "ndarray": saxpy_nd}


def _arrays(n: int) -> tuple:
    rng = np.random.default_rng(0)
    xn, yn = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    x, y = qd.ndarray(qd.f32, shape=(n,)), qd.ndarray(qd.f32, shape=(n,))
    x.from_numpy(xn)
    y.from_numpy(yn)
    return x, y, xn, yn


def _args(kind: str, x: object, y: object) -> tuple:
    return (x, y) if kind == "ndarray" else (x[:], y[:])


def _run(benchmark, kind: str, n: int, workload: str, native: bool) -> None:
    benchmark.group = workload
    k = _kernels()[kind]
    x, y, xn, yn = _arrays(n)
    k(*_args(kind, x, y), 2.0)  # compile, then check once
    np.testing.assert_allclose(y.to_numpy(), 2.0 * xn + yn, rtol=1e-6)
    tier = ensure_native(k, benchmark) if native else k.stats["last_tier"]
    benchmark.extra_info["tier"] = tier
    benchmark.pedantic(lambda: k(*_args(kind, x, y), 2.0), rounds=10, warmup_rounds=1)
    med = benchmark.stats.stats.median
    benchmark.extra_info["ms"] = med * 1e3
    record(workload, kind, med * 1e3)


@pytest.mark.parametrize("kind", ["view", "ndarray"])
def test_saxpy_cpu(benchmark, cpu_program, kind):
    _run(benchmark, kind, N_CPU, "saxpy 2^24 f32, cpu (ms)", native=True)


@pytest.mark.parametrize("kind", ["view", "ndarray"])
def test_saxpy_interp(benchmark, interp_program, kind):
    _run(benchmark, kind, N_INTERP, "saxpy 2^20 f32, interp (ms)", native=False)


@pytest.mark.parametrize("kind", ["view", "view_sliced", "ndarray"])
def test_launch_overhead_cpu(benchmark, cpu_program, kind):
    benchmark.group = "launch, 16 elements, cpu (us)"
    k = _kernels()["ndarray" if kind == "ndarray" else "view"]
    x, y, _, _ = _arrays(N_SMALL)
    args = _args(kind, x, y)
    k(*args, 2.0)
    ensure_native(k, benchmark)
    if kind == "view_sliced":
        benchmark.pedantic(lambda: k(x[:], y[:], 2.0), rounds=2000, warmup_rounds=10)
    else:
        benchmark.pedantic(lambda: k(*args, 2.0), rounds=2000, warmup_rounds=10)
    med = benchmark.stats.stats.median
    benchmark.extra_info["us_per_call"] = med * 1e6
    record("launch, 16 elements, cpu (us)", kind, med * 1e3)  # ms; the summary shows launch rows in us
