"""Reverse-mode autodiff through a dynamic loop (qd's adstack, DESIGN §5) against the peers' figures.

    W3:  for i in x:
             v = x[i]
             for _ in range(a[i]):
                 v = 0.95 * v + 0.1            # W3n: v = 0.95 * v + 0.1 * qd.sin(v)
             loss[None] += v

over N = 2^20 f32 elements (`x` uniform in [-2, 2), `x` and `loss` with grads) and an i32 field `a` with
`a[i] = i % 32` (the issue's 0..31 iterations, deterministic; 15.5 on average: 15.5 * 2^20 inner iterations
in all). The inner
loop's trip count is data, so the reverse kernel keeps it a loop and checkpoints `v` on an adstack
sized from `a` before the launch. Timed separately:

- `fwd`: the forward (primal) kernel on `qd.cpu`;
- `grad`: `kernel.grad()` alone (the replay that pushes `v` once per iteration, then the reverse sweep
  that pops, recomputes and accumulates `x.grad`), with `loss.grad` seeded with 1, on `qd.cpu` and on
  the interpreter (`qd.interp`).

qd runs on `qd.cpu` with `jit="eager"` (compiled before the timing; a benchmark whose kernel did not run
natively skips and says why, see `_bench.ensure_native`). Before any timing each benchmark checks its
result once: the gradient against the closed form in float64 (dv/dx is the product over the iterations
of the recurrence's derivative, `0.95` for W3 and `0.95 + 0.1 cos(v_k)` along the float64 trajectory
for W3n; relative tolerance `GRAD_TOL`) and the forward's loss against the float64 sum, so a broken
kernel cannot be timed quietly.

The reference: the peers as measured on this 2-core machine kind (`../shared/TOOLCHAIN.md`, "Peers,
measured on this 2-core machine", CPU, f32, medians, fwd + bwd):

    workload   quadrants 1.3.3   taichi 1.7.4                  warp 1.19
    W3         51 + 161 ms       57 + 74 ms (manual stack size) 62 + 70 ms
    W3n        181 + 394 ms      175 + 336 ms                  wrong gradient

That table does not say what `a[]` held, so it is indicative only; `extra_info["peer_quadrants_ms"]` (and
`peer_taichi_ms`) holds its figure of the same phase. Quadrants itself runs side by side in the same
pytest session when it can be installed: `bench/_peers.py` builds a bench-only venv `.venv-peers`
(python3.11, `pip install quadrants`, git-ignored) once, and `bench/_quadrants_w3.py` runs there as a
subprocess: the same kernels, fields and data on `quadrants.cpu` with `ad_stack_experimental_enabled=True`
and qd's thread count; it checks its gradient against the same float64 closed form, then times the forward
and `kernel.grad()` (median of `PEER_ROUNDS` after a warm-up). The qd benchmarks of W3/W3n put its medians
in `extra_info` (`quadrants_fwd_ms`, `quadrants_bwd_ms`, with `quadrants_*_min_max_ms`) and in the summary
table's `quadrants` column; when the venv cannot be built they say why in `extra_info["quadrants_skipped"]`
and in a warning, and time qd alone.

Sizing overhead: a tiny kernel (N = 64, the W3 body) timed as repeated `k.grad()` launches. With the
bound in a field, the adstack plan reuses its sizes while the field's generation counter is unchanged
(the benchmark asserts, outside the timing, that `sizing_runs` did not grow); with the bound passed as
a raw numpy int32 array (no generation counter) every launch runs the sizer again (the difference also
holds the conversion of one numpy argument, ~3 us). Each runs with one thread (`cpu_max_num_threads=1`:
host overhead only) and with all of them: a parallel loop whose body holds a loop is threaded at any
size, so there a 64-element launch also pays the threads' fork and join, which on a loaded 2-core
machine costs tens of us and varies more than the sizing does. `extra_info` has `us_per_call` and
`sizing_runs_per_launch`.

The grad benchmarks also record qd's heap: `adstack_sizes` (the plan's sizes: capacity per stack, here 31),
`heap_threads`, `heap_used_bytes` (threads x per-thread stride, summed over dtypes) and
`heap_allocated_bytes` (the heap arrays, grown on demand).

`extra_info` of the big workloads has `ms` (median), `ns_per_elem`, `ns_per_iter` (per inner
iteration), `threads`, `max_rel_err` of the gradient (or `loss_rel_err`), the tier (with `compile_ms`
on `qd.cpu`) and the peers' figures. The run ends with the summary table of medians (bench/conftest.py).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import qd
from qd.ad.adstack import META_WORDS
from _bench import ensure_native, record
from _peers import run_peer

N = 1 << 20
MAX_TRIPS = 32  # a[i] = i % MAX_TRIPS: 0..31 iterations (the W3)
ROUNDS = 40  # timed rounds per benchmark (one warm-up round first); the machine is noisy
INTERP_ROUNDS = 8  # the interpreter's reverse kernel takes 0.5-2 s a launch on 2 cores (load-dependent)
PEER_ROUNDS = 20  # Quadrants' timed rounds (bench/_quadrants_w3.py), after one warm-up
PEER_TIMEOUT_S = 300
GRAD_TOL = 1e-4  # relative, against the float64 closed form
LOSS_TOL = 1e-2  # relative; the loss is an f32 sum of 2^20 terms (error depends on the order of adds)

TINY = 64  # elements of the sizing-overhead kernel
TINY_ROUNDS, TINY_ITERS = 200, 50  # 10^4 launches per benchmark

WORKLOADS = ("W3", "W3n")
# ../shared/TOOLCHAIN.md, "Peers, measured on this 2-core machine": (fwd ms, bwd ms)
PEER_QUADRANTS_MS = {"W3": (51.0, 161.0), "W3n": (181.0, 394.0)}
PEER_TAICHI_MS = {"W3": (57.0, 74.0), "W3n": (175.0, 336.0)}


def _threads() -> int:
    return int(qd.cfg.cpu_max_num_threads or 1)


def _x_data(n: int = N, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(n, dtype=np.float32) * 4 - 2).astype(np.float32)


def _a_data(n: int = N) -> np.ndarray:
    return (np.arange(n) % MAX_TRIPS).astype(np.int32)


def _ref(work: str, xn: np.ndarray, an: np.ndarray) -> tuple[float, np.ndarray]:
    """(loss, dloss/dx) in float64: the recurrence run per element, its derivative multiplied along
    (W3's is linear: v_n = 0.95^n x + 2 (1 - 0.95^n), dv_n/dx = 0.95^n, in closed form)."""
    if work == "W3":
        p = 0.95 ** an.astype(np.float64)
        return float(np.sum(p * xn.astype(np.float64) + 2.0 * (1.0 - p))), p
    v = xn.astype(np.float64)
    d = np.ones_like(v)
    for k in range(int(an.max()) + 1):
        live = k < an
        if work == "W3":
            dv, nv = np.full_like(v, 0.95), 0.95 * v + 0.1
        else:
            dv, nv = 0.95 + 0.1 * np.cos(v), 0.95 * v + 0.1 * np.sin(v)
        d = np.where(live, d * dv, d)
        v = np.where(live, nv, v)
    return float(np.sum(v)), d


def _check(benchmark, work: str, xn: np.ndarray, an: np.ndarray, grad: np.ndarray | None = None,
           loss: float | None = None) -> None:
    ref_loss, ref_grad = _ref(work, xn, an)
    if grad is not None:
        rel = np.abs(grad.astype(np.float64) - ref_grad) / np.abs(ref_grad)
        benchmark.extra_info["max_rel_err"] = float(np.max(rel))
        np.testing.assert_allclose(grad, ref_grad, rtol=GRAD_TOL, atol=0,
                                   err_msg=f"{work}: the gradient is wrong: not timing it")
    if loss is not None:
        rel = abs(loss - ref_loss) / abs(ref_loss)
        benchmark.extra_info["loss_rel_err"] = rel
        assert rel < LOSS_TOL, f"{work}: the loss is off by {rel:.3g} (relative): not timing it"


def _time(benchmark, fn, workload: str, impl: str, rounds: int, trips: int) -> None:
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
    med = benchmark.stats.stats.median
    benchmark.extra_info["ms"] = med * 1e3
    benchmark.extra_info["ns_per_elem"] = med * 1e9 / N
    benchmark.extra_info["ns_per_iter"] = med * 1e9 / trips
    benchmark.extra_info["threads"] = _threads()
    record(workload, impl, med * 1e3)


def _peers(benchmark, work: str, phase: int) -> None:
    benchmark.extra_info["peer_quadrants_ms"] = PEER_QUADRANTS_MS[work][phase]
    benchmark.extra_info["peer_taichi_ms"] = PEER_TAICHI_MS[work][phase]


_quadrants: dict = {}  # (work, n) -> (the peer's JSON or None, why not)


def quadrants_peer(work: str, n: int = N, rounds: int = PEER_ROUNDS, timeout: float = PEER_TIMEOUT_S):
    """Quadrants' W3/W3n run once per (work, n) in this session, by `.venv-peers`: (its JSON, "") or
    (None, why not)."""
    key = (work, n)
    if key not in _quadrants:
        _quadrants[key] = run_peer("_quadrants_w3.py", [work, str(n), str(_threads()), str(rounds), str(MAX_TRIPS)],
                                   timeout)
    return _quadrants[key]


def _quadrants_info(benchmark, work: str, workload: str, phase: str, n: int = N, **kw) -> None:
    """Puts Quadrants' medians (both phases) in `extra_info` and its `phase` median in the summary table."""
    res, why = quadrants_peer(work, n, **kw)
    if res is None:
        benchmark.extra_info["quadrants_skipped"] = why
        warnings.warn(f"{workload}: Quadrants not run side by side: {why}", stacklevel=2)
        return
    for ph in ("fwd", "bwd"):
        benchmark.extra_info[f"quadrants_{ph}_ms"] = res[f"{ph}_ms"]
        benchmark.extra_info[f"quadrants_{ph}_min_max_ms"] = res[f"{ph}_min_max_ms"]
    benchmark.extra_info["quadrants_max_rel_err"] = res["max_rel_err"]
    benchmark.extra_info["quadrants_rounds"] = res["rounds"]
    record(workload, "quadrants", res[f"{phase}_ms"])


def heap_info(benchmark, plan) -> None:
    """qd's adstack heap for the last launch: sizes, threads, bytes used (threads x stride) and allocated."""
    stride: dict = {}
    heap = plan.last_heap
    for k, st in enumerate(plan.k.stacks):
        stride[np.dtype(st.dtype.np_dtype)] = int(heap.meta_words[k * META_WORDS + 2])
    benchmark.extra_info["adstack_sizes"] = [int(s) for s in plan.sizes]
    benchmark.extra_info["heap_threads"] = plan.nthreads
    benchmark.extra_info["heap_used_bytes"] = sum(plan.nthreads * s * dt.itemsize for dt, s in stride.items())
    benchmark.extra_info["heap_allocated_bytes"] = sum(int(a.nbytes) for a in heap.arrays.values())


def _setup(work: str, n: int = N):
    """Fields x, loss (with grads) and a, filled; returns (kernel, x, loss, x data, a data)."""
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    a = qd.field(qd.i32, shape=n)

    if work == "W3":
        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(a[i]):
                    v = 0.95 * v + 0.1
                loss[None] += v
    else:
        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(a[i]):
                    v = 0.95 * v + 0.1 * qd.sin(v)
                loss[None] += v

    xn, an = _x_data(n), _a_data(n)
    x.from_numpy(xn)
    a.from_numpy(an)
    return k, x, loss, xn, an


def _qd_tier(benchmark, kernel, tier: str) -> None:
    if tier == "cpu":
        ensure_native(kernel, benchmark)
    else:
        benchmark.extra_info["tier"] = got = kernel.stats["last_tier"]
        assert got == tier, f"expected the {tier} tier, {got} ran"


# ---- W3 / W3n: forward and reverse kernels ---------------------------------------------------------------


@pytest.mark.parametrize("work", WORKLOADS)
def test_adstack_fwd_qd(benchmark, cpu_program, work):
    benchmark.group = f"{work} fwd 2^20 f32"
    k, _, loss, xn, an = _setup(work)
    loss[None] = 0.0
    k()  # compiles (jit="eager") before the timing
    ensure_native(k, benchmark)
    _check(benchmark, work, xn, an, loss=float(loss[None]))
    _peers(benchmark, work, 0)
    _time(benchmark, k, f"{work} fwd 2^20 (ms)", "qd-cpu", ROUNDS, int(an.sum()))
    _quadrants_info(benchmark, work, f"{work} fwd 2^20 (ms)", "fwd")


@pytest.mark.parametrize("tier", ["cpu", "interp"])
@pytest.mark.parametrize("work", WORKLOADS)
def test_adstack_grad_qd(benchmark, request, work, tier):
    request.getfixturevalue(f"{tier}_program")
    benchmark.group = f"{work} grad 2^20 f32"
    k, x, loss, xn, an = _setup(work)
    k()
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad()  # compiles the reverse instance before the timing; `k.stats` now describes it
    _qd_tier(benchmark, k, tier)
    _check(benchmark, work, xn, an, grad=x.grad.to_numpy())
    _peers(benchmark, work, 1)
    # Timed launches keep accumulating into x.grad, as repeated `kernel.grad()` calls do.
    _time(benchmark, k.grad, f"{work} grad 2^20 (ms)", f"qd-{tier}",
          ROUNDS if tier == "cpu" else INTERP_ROUNDS, int(an.sum()))
    heap_info(benchmark, _plan(k))
    if tier == "cpu":
        _quadrants_info(benchmark, work, f"{work} grad 2^20 (ms)", "bwd")


# ---- sizing overhead: a tiny kernel, sizes cached (field bound) or re-read (numpy bound) -----------------


def _plan(kernel):
    """The adstack plan of `kernel`'s reverse instance."""
    plans = [inst[0].adstack for key, inst in kernel._instances.items() if "grad" in key]
    assert len(plans) == 1 and plans[0] is not None, f"expected one reverse instance with adstacks: {plans}"
    return plans[0]


@pytest.fixture
def cpu1_program(tmp_path):
    """`cpu_program` (bench/conftest.py) with one thread."""
    reason = qd.cpu.unavailable_reason()
    if reason:
        pytest.skip(f"qd.cpu: {reason}")
    jit = {} if os.environ.get("QD_JIT") else {"jit": "eager"}
    qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path / "qd-cache"), log_level="warn",
            cpu_max_num_threads=1, **jit)
    yield
    qd.reset()


@pytest.mark.parametrize("bound", ["field", "numpy"])
@pytest.mark.parametrize("threads", ["1-thread", "all-threads"])
def test_adstack_sizing_qd(benchmark, request, threads, bound):
    request.getfixturevalue("cpu1_program" if threads == "1-thread" else "cpu_program")
    benchmark.group = f"adstack sizing, tiny grad launch, {threads}"
    x = qd.field(qd.f32, shape=TINY, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    a = qd.field(qd.i32, shape=TINY)
    xn, an = _x_data(TINY), _a_data(TINY)
    x.from_numpy(xn)
    a.from_numpy(an)

    if bound == "field":
        @qd.kernel
        def k():
            for i in x:
                v = x[i]
                for _ in range(a[i]):
                    v = 0.95 * v + 0.1
                loss[None] += v

        args: tuple = ()
    else:
        @qd.kernel
        def k(b: qd.types.ndarray(qd.i32, 1)):
            for i in x:
                v = x[i]
                for _ in range(b[i]):
                    v = 0.95 * v + 0.1
                loss[None] += v

        args = (an,)

    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad(*args)
    ensure_native(k, benchmark)
    _check(benchmark, "W3", xn, an, grad=x.grad.to_numpy())
    plan = _plan(k)
    runs0 = plan.sizing_runs
    benchmark.pedantic(k.grad, args=args, rounds=TINY_ROUNDS, iterations=TINY_ITERS, warmup_rounds=1)
    launches = (TINY_ROUNDS + 1) * TINY_ITERS
    grown = plan.sizing_runs - runs0
    if bound == "field":
        assert grown == 0, f"the sizes were re-computed {grown} times although the bound's field did not change"
    else:
        assert grown >= TINY_ROUNDS * TINY_ITERS, f"a numpy bound must be re-sized every launch ({grown} runs)"
    benchmark.extra_info["sizing_runs_per_launch"] = grown / launches
    benchmark.extra_info["us_per_call"] = benchmark.stats.stats.median * 1e6
    benchmark.extra_info["threads"] = _threads()
    record(f"adstack sizing, tiny grad launch, {threads} (us)", f"qd-{bound}", benchmark.stats.stats.median * 1e3)
