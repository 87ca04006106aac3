"""The adstack's parallel max-reducer (issue 6, DESIGN §5 "Max-reducer") at scale.

(a) Cold sizing: the reverse kernel of

        for i in range(a.shape[0]):          # a: qd.ndarray(qd.i32, 2^26), small random counts (0..7)
            v = x[i % 4]
            for _ in range(a[i]):
                v = 0.95 * v + 0.1
            loss[None] += v

    sizes its stack with a recognized `MaxOverRange(i, 0, a.shape[0], a[i])`. The benchmark times
    `plan.evaluate(...)` directly (the plan and its bound arrays are captured from one real `k.grad(a)`
    launch; `owners=None` bypasses the spec cache, so each call is one parallel reduction over all
    2^26 elements, as after a host write `a[0] = ...`; the benchmark asserts that the dispatch counter
    grows by one per call). `extra_info["GB_per_s"]` is 2^26 * 4 bytes / median, next to the machine's
    memory bandwidth measured in the same test (`copy_GB_per_s`: numpy copy of a 256 MiB array, bytes
    read + written / median; `max_GB_per_s`: numpy's `a.max()` over the same 2^26 int32, single-threaded)
    and `frac_of_copy` = GB_per_s / copy_GB_per_s. On 1 thread and on all (`threads`).
(b) Warm per-launch sizing overhead with unchanged inputs, 1 thread: `plan.bind(...)` (what a launch
    runs for its adstacks: the cache-key compare, and the reuse of sizes, meta words and heaps) timed
    alone, with the arguments captured from a real launch; the benchmark asserts that the sizer did not
    run (`sizing_runs` unchanged). Target < 5 us. `extra_info["us_per_call"]`.
(c) W3 (bench/test_adstack.py) at N = 2^25, `a[i] = i % 32`: forward and `kernel.grad()` on `qd.cpu`,
    checked against the float64 closed form first, with Quadrants side by side (`.venv-peers`, see
    bench/_peers.py) when it finishes within `PEER_TIMEOUT_S`; otherwise `extra_info["quadrants_skipped"]`
    and a warning say why.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import qd
from _bench import ensure_native, record
from qd.runtime import adstack_heap
from test_adstack import _check, _plan, _setup, _threads, cpu1_program, heap_info, quadrants_peer  # noqa: F401

BIG = 1 << 26  # elements of (a)
WARM_N = 1 << 20  # elements of (b): the cached path does not depend on it
MAX_COUNT = 8  # (a), (b): a[i] uniform in 0..MAX_COUNT-1
COLD_ROUNDS = 15
BW_ROUNDS = 15
WARM_ROUNDS, WARM_ITERS = 200, 200
N25 = 1 << 25
W3_ROUNDS = 10
PEER_ROUNDS_25 = 3
PEER_TIMEOUT_S = 60


def _counts(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, MAX_COUNT, n, dtype=np.int32)


def _sizing_kernel():
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)):
        for i in range(a.shape[0]):
            v = x[i % 4]
            for _ in range(a[i]):
                v = 0.95 * v + 0.1
            loss[None] += v

    x.from_numpy(np.array([0.5, -1.0, 1.5, 0.25], dtype=np.float32))
    loss.grad[None] = 1.0
    return k


def _captured_grad(monkeypatch, k, a):
    """Launches `k.grad(a)` once, capturing what the launch handed to its adstack plan's `bind`:
    (plan, arrays, owners, args, nthreads)."""
    seen = []
    orig = adstack_heap.AdStackPlan.bind

    def spy(self, arrays, owners, args, nthreads, forced, heap=None):
        seen.append((self, arrays, owners, args, nthreads))
        return orig(self, arrays, owners, args, nthreads, forced, heap)

    monkeypatch.setattr(adstack_heap.AdStackPlan, "bind", spy)
    t = time.perf_counter()
    k.grad(a)
    first_ms = (time.perf_counter() - t) * 1e3
    monkeypatch.undo()
    assert len(seen) == 1, f"expected one adstack bind in k.grad(a), saw {len(seen)}"
    plan = seen[0][0]
    assert plan is _plan(k)
    return (*seen[0], first_ms)


def _median_s(fn, rounds: int) -> tuple[float, float, float]:
    fn()
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), min(ts), max(ts)


# ---- (a) cold sizing of a recognized MaxOverRange over 2^26 int32 ----------------------------------------


@pytest.mark.parametrize("threads", ["1-thread", "all-threads"])
def test_maxreducer_cold_qd(benchmark, request, monkeypatch, threads):
    request.getfixturevalue("cpu1_program" if threads == "1-thread" else "cpu_program")
    benchmark.group = "max-reducer cold sizing, 2^26 int32"
    an = _counts(BIG)
    a = qd.ndarray(qd.i32, BIG)
    a.from_numpy(an)
    k = _sizing_kernel()
    plan, arrays, owners, args, nthreads, first_ms = _captured_grad(monkeypatch, k, a)
    ensure_native(k, benchmark)
    want = int(an.max())
    assert plan.sizes == [want], f"sizes {plan.sizes}, expected [{want}] (max of a)"
    assert plan.first_round and all(plan.first_round.values()), "the MaxOverRange was not recognized"
    d0 = adstack_heap.dispatch_count()
    assert plan.evaluate(arrays, args) == [want]
    assert adstack_heap.dispatch_count() == d0 + 1, "plan.evaluate did not run the parallel max-reducer"

    # The machine's memory bandwidth, now (numpy, one thread).
    src = np.ones(BIG, dtype=np.float32)  # 256 MiB
    dst = np.empty_like(src)
    copy_s, copy_lo, copy_hi = _median_s(lambda: np.copyto(dst, src), BW_ROUNDS)
    max_s, _, _ = _median_s(an.max, BW_ROUNDS)
    del src, dst

    d0 = adstack_heap.dispatch_count()
    benchmark.pedantic(plan.evaluate, args=(arrays, args), rounds=COLD_ROUNDS, iterations=1, warmup_rounds=1)
    assert adstack_heap.dispatch_count() == d0 + COLD_ROUNDS + 1, "a timed evaluate skipped the reduction"
    med = benchmark.stats.stats.median
    gbs = BIG * 4 / med / 1e9
    copy_gbs = 2 * BIG * 4 / copy_s / 1e9
    benchmark.extra_info.update({
        "ms": med * 1e3, "GB_per_s": gbs, "ns_per_elem": med * 1e9 / BIG, "threads": plan.nthreads,
        "copy_GB_per_s": copy_gbs, "copy_min_max_ms": [copy_lo * 1e3, copy_hi * 1e3],
        "max_GB_per_s": BIG * 4 / max_s / 1e9, "frac_of_copy": gbs / copy_gbs,
        "first_grad_launch_ms": first_ms, "size": want,
    })
    record(f"max-reducer cold sizing 2^26, {threads} (ms)", "qd-cpu", med * 1e3)
    record(f"max-reducer cold sizing 2^26, {threads} (ms)", "numpy-copy-256MiB", copy_s * 1e3)


# ---- (b) warm per-launch sizing overhead (cached path), 1 thread -----------------------------------------


def test_maxreducer_warm_bind_qd(benchmark, cpu1_program, monkeypatch):
    benchmark.group = "adstack warm per-launch sizing, 1 thread"
    an = _counts(WARM_N)
    a = qd.ndarray(qd.i32, WARM_N)
    a.from_numpy(an)
    k = _sizing_kernel()
    plan, arrays, owners, args, nthreads, _ = _captured_grad(monkeypatch, k, a)
    ensure_native(k, benchmark)
    assert nthreads == 1 and plan.sizes == [int(an.max())]
    k.grad(a)  # a second launch: the cached path
    runs0, d0 = plan.sizing_runs, adstack_heap.dispatch_count()
    benchmark.pedantic(plan.bind, args=(arrays, owners, args, nthreads, 0), rounds=WARM_ROUNDS,
                       iterations=WARM_ITERS, warmup_rounds=1)
    assert plan.sizing_runs == runs0 and adstack_heap.dispatch_count() == d0, \
        "unchanged inputs were sized again"
    us = benchmark.stats.stats.median * 1e6
    benchmark.extra_info.update({"us_per_call": us, "threads": 1, "target_us": 5.0})
    heap_info(benchmark, plan)
    record("adstack warm plan.bind, 1 thread (us)", "qd-cpu", benchmark.stats.stats.median * 1e3)


# ---- (c) W3 at 2^25 ----------------------------------------------------------------------------------------


def _peer25(benchmark, workload: str, phase: str) -> None:
    res, why = quadrants_peer("W3", N25, rounds=PEER_ROUNDS_25, timeout=PEER_TIMEOUT_S)
    if res is None:
        benchmark.extra_info["quadrants_skipped"] = why
        warnings.warn(f"{workload}: Quadrants not run side by side: {why}", stacklevel=2)
        return
    for ph in ("fwd", "bwd"):
        benchmark.extra_info[f"quadrants_{ph}_ms"] = res[f"{ph}_ms"]
        benchmark.extra_info[f"quadrants_{ph}_min_max_ms"] = res[f"{ph}_min_max_ms"]
    benchmark.extra_info["quadrants_rounds"] = res["rounds"]
    record(workload, "quadrants", res[f"{phase}_ms"])


def _w3_25_info(benchmark, trips: int) -> None:
    med = benchmark.stats.stats.median
    benchmark.extra_info.update({"ms": med * 1e3, "ns_per_elem": med * 1e9 / N25, "ns_per_iter": med * 1e9 / trips,
                                 "threads": _threads()})


def test_w3_2p25_fwd_qd(benchmark, cpu_program):
    benchmark.group = "W3 fwd 2^25 f32"
    k, _, loss, xn, an = _setup("W3", N25)
    loss[None] = 0.0
    k()
    ensure_native(k, benchmark)
    _check(benchmark, "W3", xn, an, loss=float(loss[None]))
    benchmark.pedantic(k, rounds=W3_ROUNDS, iterations=1, warmup_rounds=1)
    _w3_25_info(benchmark, int(an.sum()))
    record("W3 fwd 2^25 (ms)", "qd-cpu", benchmark.stats.stats.median * 1e3)
    _peer25(benchmark, "W3 fwd 2^25 (ms)", "fwd")


def test_w3_2p25_grad_qd(benchmark, cpu_program):
    benchmark.group = "W3 grad 2^25 f32"
    k, x, loss, xn, an = _setup("W3", N25)
    k()
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad()
    ensure_native(k, benchmark)
    _check(benchmark, "W3", xn, an, grad=x.grad.to_numpy())
    benchmark.pedantic(k.grad, rounds=W3_ROUNDS, iterations=1, warmup_rounds=1)
    _w3_25_info(benchmark, int(an.sum()))
    heap_info(benchmark, _plan(k))
    record("W3 grad 2^25 (ms)", "qd-cpu", benchmark.stats.stats.median * 1e3)
    _peer25(benchmark, "W3 grad 2^25 (ms)", "bwd")
