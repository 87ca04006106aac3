"""The CPU tier against its peers (issue 3): W1 saxpy, W2 Σx² into one cell, launch overhead, W4 first call.

qd runs on `qd.cpu` with `jit="eager"`: the first launch compiles (outside the timing), and every timed
launch runs machine code; a benchmark whose kernel did not run natively skips and says why (see
`_bench.ensure_native`). The peer is numba (`@njit(parallel=True)` + `prange`, in this process, from
`bench/_numba_peer.py`); without numba its benchmarks skip with the reason. The launch overhead also runs
Quadrants' (bench/_quadrants_launch.py in `.venv-peers`, bench/_peers.py) with the same argument kind, and W4
Quadrants' first call (bench/first_call.py with that venv's python).
Benchmarks of one workload share a `group`, so pytest-benchmark's table shows qd and numba side by side,
and the run ends with a summary table of medians (bench/conftest.py).

W4 runs `bench/first_call.py` in fresh processes. Its benchmark timing is the whole process (start,
imports, init, the first call); `extra_info["first_call_ms"]` is the median of what the processes
measured from the call to its result, the number to compare with the peers' W4. `bench/compare.py`
checks both.

`extra_info` has `ms` (median), `GB_per_s` for the bandwidth-bound workloads (bytes that must move:
saxpy 12 B per element, Σx² 4 B), `us_per_call` for the launch overhead, and `tier`/`compile_ms`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

import qd
from _bench import ensure_native, record, saxpy_kernel
from _peers import ensure_peer_venv, run_peer

N = 1 << 24
HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import _numba_peer as nb

    NUMBA_SKIP = None
except Exception as e:  # noqa: BLE001  any failure to import numba is a visible skip
    nb = None
    NUMBA_SKIP = f"numba is not installed in this venv ({type(e).__name__}: {e}); `bash dev.sh bench` " \
                 "installs it when a release matches qd's llvmlite"


def _need_numba():
    if nb is None:
        pytest.skip(NUMBA_SKIP)


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)


def _to_qd(a: np.ndarray):
    arr = qd.ndarray(qd.f32, shape=a.shape)
    arr.from_numpy(a)
    return arr


def _finish(benchmark, workload: str, impl: str, nbytes: int | None = None) -> None:
    med = benchmark.stats.stats.median
    benchmark.extra_info["ms"] = med * 1e3
    if nbytes:
        benchmark.extra_info["GB_per_s"] = nbytes / med / 1e9
    record(workload, impl, med * 1e3)


# ---- W1: saxpy over 2^24 f32 -------------------------------------------------------------------------




@pytest.mark.parametrize("args", ["ndarray", "numpy"])
def test_w1_saxpy_qd(benchmark, cpu_program, args):
    benchmark.group = "W1 saxpy 2^24 f32"
    xn, yn = _data()
    x, y = (_to_qd(xn), _to_qd(yn)) if args == "ndarray" else (xn, yn.copy())
    k = saxpy_kernel()
    k(x, y, 2.0)  # compiles (jit="eager") before the timing
    ensure_native(k, benchmark)
    got = y.to_numpy() if args == "ndarray" else y
    np.testing.assert_allclose(got, np.float32(2.0) * xn + yn, rtol=1e-6)
    benchmark(k, x, y, 2.0)
    _finish(benchmark, "W1 saxpy 2^24 (ms)", f"qd-{args}", 12 * N)


def test_w1_saxpy_numba(benchmark):
    _need_numba()
    benchmark.group = "W1 saxpy 2^24 f32"
    xn, yn = _data()
    y = yn.copy()
    nb.saxpy(xn, y, np.float32(2.0))  # compiles before the timing
    np.testing.assert_allclose(y, np.float32(2.0) * xn + yn, rtol=1e-6)
    benchmark(nb.saxpy, xn, y, np.float32(2.0))
    benchmark.extra_info["tier"] = "numba"
    _finish(benchmark, "W1 saxpy 2^24 (ms)", "numba", 12 * N)


def test_w1_saxpy_interleaved_with_numba(benchmark, cpu_program):
    """W1 with qd's and numba's calls alternating, for their ratio: the memory bandwidth of the shared machine
    drifts by tens of percent within minutes, and the benchmarks above time qd first and numba after. The
    timing is one qd call plus one numba call; `extra_info` has each one's median over the rounds, and the
    ratio is recorded in the summary as `qd / numba`."""
    import time

    _need_numba()
    benchmark.group = "W1 saxpy 2^24 f32, qd and numba alternating"
    xn, yn = _data()
    x, y, yb = _to_qd(xn), _to_qd(yn), yn.copy()
    k = saxpy_kernel()
    k(x, y, 2.0)
    ensure_native(k, benchmark)
    nb.saxpy(xn, yb, np.float32(2.0))
    np.testing.assert_allclose(y.to_numpy(), yb, rtol=1e-6)
    times: tuple[list, list] = ([], [])

    def step():
        t0 = time.perf_counter()
        k(x, y, 2.0)
        t1 = time.perf_counter()
        nb.saxpy(xn, yb, np.float32(2.0))
        times[0].append(t1 - t0)
        times[1].append(time.perf_counter() - t1)

    benchmark.pedantic(step, rounds=40, warmup_rounds=2)
    q, n = statistics.median(times[0][2:]) * 1e3, statistics.median(times[1][2:]) * 1e3
    benchmark.extra_info.update(qd_ms=q, numba_ms=n, ratio=q / n)
    record("W1 saxpy 2^24, alternating (ms)", "qd", q)
    record("W1 saxpy 2^24, alternating (ms)", "numba", n)


# ---- W2: s[None] += x[i]*x[i] over 2^24 f32 into a 0-D ndarray ----------------------------------------


def _sum_sq():
    @qd.kernel
    def sum_sq(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 0)):
        for i in range(x.shape[0]):
            s[None] += x[i] * x[i]

    return sum_sq


def _rel_err(got: float, x: np.ndarray) -> float:
    ref = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
    return abs(got - ref) / ref


def test_w2_sum_sq_qd(benchmark, cpu_program):
    benchmark.group = "W2 sum of squares 2^24 f32"
    xn, _ = _data()
    x, s = _to_qd(xn), qd.ndarray(qd.f32, shape=())
    k = _sum_sq()
    k(x, s)
    ensure_native(k, benchmark)
    # f32 accumulation: the error depends on the order of the adds (tree or per-thread partials: ~1e-6).
    benchmark.extra_info["rel_err"] = err = _rel_err(float(s.to_numpy()), xn)
    assert err < 0.05, f"W2 result is off by {err:.3g} (relative)"
    benchmark(k, x, s)
    _finish(benchmark, "W2 sum of squares 2^24 (ms)", "qd-ndarray", 4 * N)


def test_w2_sum_sq_numba(benchmark):
    _need_numba()
    benchmark.group = "W2 sum of squares 2^24 f32"
    xn, _ = _data()
    s = np.zeros((), np.float32)
    nb.sum_sq(xn, s)
    benchmark.extra_info["rel_err"] = err = _rel_err(float(s), xn)
    assert err < 0.05
    benchmark(nb.sum_sq, xn, s)
    benchmark.extra_info["tier"] = "numba"
    _finish(benchmark, "W2 sum of squares 2^24 (ms)", "numba", 4 * N)


# ---- launch overhead: one 1-element ndarray argument, body `x[0] += 1` ------------------------------


def _tiny():
    @qd.kernel
    def tiny(x: qd.types.ndarray(qd.f32, 1)):
        x[0] += 1

    return tiny


def _launch_info(benchmark, impl: str) -> None:
    benchmark.extra_info["us_per_call"] = benchmark.stats.stats.median * 1e6
    record("launch overhead (us)", impl, benchmark.stats.stats.median * 1e3)


@pytest.mark.parametrize("args", ["ndarray", "numpy"])
def test_launch_overhead_qd(benchmark, cpu_program, args):
    benchmark.group = "launch overhead"
    x = qd.ndarray(qd.f32, shape=(1,)) if args == "ndarray" else np.zeros(1, np.float32)
    k = _tiny()
    k(x)
    ensure_native(k, benchmark)
    benchmark(k, x)
    _launch_info(benchmark, f"qd-{args}")
    _quadrants_launch(benchmark, args)


def _quadrants_launch(benchmark, args: str) -> None:
    """Quadrants' launch overhead with the same kind of argument, in `.venv-peers` (bench/_quadrants_launch.py)."""
    res, why = run_peer("_quadrants_launch.py", [args, "7", "20000"], 300)
    if res is None:
        benchmark.extra_info["quadrants_skipped"] = why
        warnings.warn(f"launch overhead: Quadrants not run side by side: {why}", stacklevel=2)
        return
    benchmark.extra_info["quadrants_us_per_call"] = res["median_us"]
    record("launch overhead (us)", f"quadrants-{args}", res["median_us"] / 1e3)


def test_launch_overhead_numba(benchmark):
    _need_numba()
    benchmark.group = "launch overhead"
    x = np.zeros(1, np.float32)
    nb.tiny(x)
    benchmark(nb.tiny, x)
    benchmark.extra_info["tier"] = "numba"
    _launch_info(benchmark, "numba")


# ---- W4: first call of W1 in a fresh process -----------------------------------------------------------

W4_ROUNDS = 3


def _compile_qd_sources() -> None:
    """qd's `.pyc` files, as pip writes them for an installed package (numba's and Quadrants' have theirs): on a
    machine that sets PYTHONDONTWRITEBYTECODE, every process would compile qd's sources (import and init took
    340 ms instead of 180, and the background warm-up's imports met the first call)."""
    import compileall

    compileall.compile_dir(os.path.dirname(qd.__file__), quiet=1)


def _first_call(lib: str, mode: str, cache_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("QD_JIT", "NUMBA_CACHE_DIR")}
    if lib == "quadrants":
        py, why = ensure_peer_venv()
        if py is None:
            pytest.skip(f"quadrants: {why}")
    else:
        py = sys.executable
    out = subprocess.run([py, os.path.join(HERE, "first_call.py"), lib, mode, cache_dir],
                         capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"first_call.py {lib} {mode} failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if not res["ok"]:
        raise RuntimeError(f"first_call.py {lib} {mode}: wrong result")
    res["stderr"] = out.stderr.strip()[-500:]
    return res


W4_CASES = {"qd-auto-cold": ("qd", "auto", "cold"), "qd-auto-warm": ("qd", "auto", "warm"),
            "qd-interp": ("qd", "interp", "cold"), "numba-cold": ("numba", "-", "cold"),
            "numba-warm": ("numba", "-", "warm"), "quadrants-cold": ("quadrants", "-", "cold"),
            "quadrants-warm": ("quadrants", "-", "warm")}


@pytest.mark.parametrize("case", list(W4_CASES))
def test_w4_first_call(benchmark, case, tmp_path):
    lib, mode, cache = W4_CASES[case]
    if lib == "numba":
        _need_numba()
    elif lib == "qd" and qd.cpu.unavailable_reason():
        pytest.skip(f"qd.cpu: {qd.cpu.unavailable_reason()}")
    benchmark.group = "W4 first call of W1 in a fresh process"
    if lib == "qd":
        _compile_qd_sources()
    runs: list[dict] = []
    warm_dir = str(tmp_path / "warm")
    if cache == "warm":
        _first_call(lib, mode, warm_dir)  # fills the cache

    def setup():
        d = warm_dir if cache == "warm" else tempfile.mkdtemp(dir=tmp_path)
        return (d,), {}

    def one(d):
        runs.append(_first_call(lib, mode, d))

    benchmark.pedantic(one, setup=setup, rounds=W4_ROUNDS, iterations=1)
    first = [r["first_call_ms"] for r in runs]
    info = benchmark.extra_info
    info["first_call_ms"] = statistics.median(first)
    info["first_call_ms_all"] = first
    info["import_ms"] = statistics.median(r["import_ms"] for r in runs)
    info["tier"] = runs[-1]["tier"]
    if lib == "qd":
        info["compile_ms"] = runs[-1]["compile_ms"]
        info["from_cache"] = runs[-1]["from_cache"]
        if mode == "auto" and runs[-1]["tier"] != "cpu":
            pytest.skip(f"the native CPU tier did not run the first call (tier {runs[-1]['tier']}): "
                        f"{runs[-1]['stderr']}")
    record("W4 first call of W1 (ms)", case, info["first_call_ms"])
