"""Reverse-mode autodiff over fields against its peers: an elementwise kernel with transcendentals.

    for i in x:
        y[i] = sin(x[i]) * exp(-x[i] * x[i]) + log(1 + x[i] * x[i])
        loss[None] += y[i]

over N = 2^22 f32 elements (x uniform in [-2, 2)), three ways:

- `fwd`: the forward (primal) kernel alone;
- `grad`: `kernel.grad()` alone, the reverse kernel (its replay of the forward, then the reverse sweep
  that accumulates `y.grad` and `x.grad`), with `loss.grad` seeded with 1;
- `tape`: one full step, `with qd.ad.Tape(loss=loss): fwd()` (clears the gradients, runs the forward
  kernel, seeds `loss.grad`, runs the reverse kernel).

qd runs on `qd.cpu` with `jit="eager"` (compiled before the timing; a benchmark whose kernel did not run
natively skips and says why, see `_bench.ensure_native`), and `grad` also on the interpreter
(`qd.interp`). The peers run in this process on the same data and the same number of threads as qd
(`qd.cfg.cpu_max_num_threads`): torch CPU autograd of the same expression (`fwd` under `torch.no_grad()`;
`grad` is `loss.backward(retain_graph=True)` on one recorded graph; `tape` records a fresh graph and
runs `.backward()`), and numba (`@njit(parallel=True)` + `prange`) with the derivative written by hand,
`x.grad[i] = cos(x)e - 2x sin(x)e + 2x/(1+x^2)` with `e = exp(-x^2)`: a lower bound of what a reverse
kernel can cost (one read, one write, no replay). A peer that is not installed skips with the reason.

Before any timing, each benchmark checks its result once: the gradient against the analytic derivative
(float64, `GRAD_TOL`) and the loss against the float64 sum, so a broken kernel cannot be timed quietly.
`extra_info` has `ms` (median), `ns_per_elem`, `threads`, `max_abs_err` of the gradient and the tier
(with `compile_ms` for qd). The run ends with the summary table of medians (bench/conftest.py).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import qd
from _bench import ensure_native, record

N = 1 << 22
ROUNDS = 20  # timed rounds per benchmark (one warm-up round first); the machine is noisy
INTERP_ROUNDS = 8  # the interpreter's reverse kernel takes ~0.7 s a launch on 2 cores
GRAD_TOL = 1e-5  # absolute and relative, against the float64 derivative (f32 libm: ~4e-7 seen)
LOSS_TOL = 0.05  # relative; the loss is an f32 sum of 2^22 terms (error depends on the order of adds)

FWD, GRAD, TAPE = "AD fwd 2^22 (ms)", "AD grad 2^22 (ms)", "AD tape step 2^22 (ms)"

try:
    import torch

    TORCH_SKIP = None
except Exception as e:  # noqa: BLE001  any failure to import torch is a visible skip
    torch = None
    TORCH_SKIP = f"torch is not installed in this venv ({type(e).__name__}: {e}); `bash dev.sh test` " \
                 "or `bash dev.sh bench` installs torch==2.13.0+cpu"

try:
    import numba
    from numba import njit, prange

    NUMBA_SKIP = None
except Exception as e:  # noqa: BLE001
    numba = None
    NUMBA_SKIP = f"numba is not installed in this venv ({type(e).__name__}: {e}); `bash dev.sh bench` " \
                 "installs it when a release matches qd's llvmlite"


def _threads() -> int:
    return int(qd.cfg.cpu_max_num_threads or 1)


def _x_data(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(N, dtype=np.float32) * 4 - 2).astype(np.float32)


def _ref(xn: np.ndarray) -> tuple[float, np.ndarray]:
    """(loss, dloss/dx) in float64."""
    x = xn.astype(np.float64)
    e = np.exp(-x * x)
    loss = float(np.sum(np.sin(x) * e + np.log1p(x * x)))
    return loss, np.cos(x) * e - 2 * x * np.sin(x) * e + 2 * x / (1 + x * x)


def _check(benchmark, xn: np.ndarray, grad: np.ndarray | None = None, loss: float | None = None) -> None:
    ref_loss, ref_grad = _ref(xn)
    if grad is not None:
        err = float(np.max(np.abs(grad.astype(np.float64) - ref_grad)))
        benchmark.extra_info["max_abs_err"] = err
        np.testing.assert_allclose(grad, ref_grad, rtol=GRAD_TOL, atol=GRAD_TOL,
                                   err_msg="the gradient is wrong: not timing it")
    if loss is not None:
        rel = abs(loss - ref_loss) / abs(ref_loss)
        benchmark.extra_info["loss_rel_err"] = rel
        assert rel < LOSS_TOL, f"the loss is off by {rel:.3g} (relative): not timing it"


def _time(benchmark, fn, workload: str, impl: str, rounds: int = ROUNDS) -> None:
    benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)
    med = benchmark.stats.stats.median
    benchmark.extra_info["ms"] = med * 1e3
    benchmark.extra_info["ns_per_elem"] = med * 1e9 / N
    benchmark.extra_info["threads"] = _threads()
    record(workload, impl, med * 1e3)


# ---- qd ----------------------------------------------------------------------------------------------


def _qd_setup():
    """Fields x, y, loss (all with grads), x filled; returns (fwd kernel, x, loss, x data)."""
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    y = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def fwd():
        for i in x:
            y[i] = qd.sin(x[i]) * qd.exp(-x[i] * x[i]) + qd.log(1 + x[i] * x[i])
            loss[None] += y[i]

    xn = _x_data()
    x.from_numpy(xn)
    return fwd, x, y, loss, xn


def _qd_tier(benchmark, kernel, tier: str) -> None:
    if tier == "cpu":
        ensure_native(kernel, benchmark)
    else:
        benchmark.extra_info["tier"] = got = kernel.stats["last_tier"]
        assert got == tier, f"expected the {tier} tier, {got} ran"


def test_ad_fwd_qd(benchmark, cpu_program):
    benchmark.group = "AD fwd 2^22 f32"
    fwd, _, _, loss, xn = _qd_setup()
    loss[None] = 0.0
    fwd()  # compiles (jit="eager") before the timing
    ensure_native(fwd, benchmark)
    _check(benchmark, xn, loss=float(loss[None]))
    _time(benchmark, fwd, FWD, "qd-cpu")


@pytest.mark.parametrize("tier", ["cpu", "interp"])
def test_ad_grad_qd(benchmark, request, tier):
    request.getfixturevalue(f"{tier}_program")
    benchmark.group = "AD grad 2^22 f32"
    fwd, x, y, loss, xn = _qd_setup()
    fwd()
    x.grad.fill(0.0)
    y.grad.fill(0.0)
    loss.grad[None] = 1.0
    fwd.grad()  # compiles the reverse instance before the timing; `fwd.stats` now describes it
    _qd_tier(benchmark, fwd, tier)
    _check(benchmark, xn, grad=x.grad.to_numpy())
    # Timed launches keep accumulating into x.grad and y.grad, as repeated `kernel.grad()` calls do.
    _time(benchmark, fwd.grad, GRAD, f"qd-{tier}", ROUNDS if tier == "cpu" else INTERP_ROUNDS)


def test_ad_tape_qd(benchmark, cpu_program):
    benchmark.group = "AD tape step 2^22 f32"
    fwd, x, _, loss, xn = _qd_setup()

    def step():
        with qd.ad.Tape(loss=loss):
            fwd()

    step()
    ensure_native(fwd, benchmark)  # the reverse instance, the last launch of the step
    _check(benchmark, xn, grad=x.grad.to_numpy(), loss=float(loss[None]))
    _time(benchmark, step, TAPE, "qd-cpu")


# ---- torch CPU autograd --------------------------------------------------------------------------------


@contextlib.contextmanager
def _torch_threads():
    if torch is None:
        pytest.skip(TORCH_SKIP)
    before = torch.get_num_threads()
    torch.set_num_threads(_threads())
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _torch_f(x):
    return torch.sin(x) * torch.exp(-x * x) + torch.log(1 + x * x)


def test_ad_fwd_torch(benchmark):
    with _torch_threads():
        benchmark.group = "AD fwd 2^22 f32"
        xn = _x_data()
        x = torch.from_numpy(xn.copy()).requires_grad_(True)

        def fwd():
            with torch.no_grad():
                return _torch_f(x).sum()

        _check(benchmark, xn, loss=float(fwd()))
        benchmark.extra_info["tier"] = "torch"
        _time(benchmark, fwd, FWD, "torch")


def test_ad_grad_torch(benchmark):
    with _torch_threads():
        benchmark.group = "AD grad 2^22 f32"
        xn = _x_data()
        x = torch.from_numpy(xn.copy()).requires_grad_(True)
        loss = _torch_f(x).sum()
        loss.backward(retain_graph=True)
        _check(benchmark, xn, grad=x.grad.numpy())

        def backward():  # like repeated `kernel.grad()`: accumulates into x.grad
            loss.backward(retain_graph=True)

        benchmark.extra_info["tier"] = "torch"
        _time(benchmark, backward, GRAD, "torch")


def test_ad_tape_torch(benchmark):
    with _torch_threads():
        benchmark.group = "AD tape step 2^22 f32"
        xn = _x_data()
        x = torch.from_numpy(xn.copy()).requires_grad_(True)

        def step():
            x.grad = None
            loss = _torch_f(x).sum()
            loss.backward()
            return loss

        loss = step()
        _check(benchmark, xn, grad=x.grad.numpy(), loss=float(loss.detach()))
        benchmark.extra_info["tier"] = "torch"
        _time(benchmark, step, TAPE, "torch")


# ---- numba, the derivative by hand -------------------------------------------------------------------

if numba is not None:
    @njit(parallel=True)
    def _nb_fwd(x, y, loss):
        acc = np.float32(0.0)
        for i in prange(x.shape[0]):
            xi = x[i]
            v = np.sin(xi) * np.exp(-xi * xi) + np.log(np.float32(1.0) + xi * xi)
            y[i] = v
            acc += v
        loss[()] += acc

    @njit(parallel=True)
    def _nb_grad(x, xg, lg):
        two = np.float32(2.0)
        for i in prange(x.shape[0]):
            xi = x[i]
            e = np.exp(-xi * xi)
            xg[i] += lg * (np.cos(xi) * e - two * xi * np.sin(xi) * e + two * xi / (np.float32(1.0) + xi * xi))


@contextlib.contextmanager
def _numba_threads():
    if numba is None:
        pytest.skip(NUMBA_SKIP)
    before = numba.get_num_threads()
    numba.set_num_threads(min(_threads(), numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _nb_arrays():
    xn = _x_data()
    return xn, np.zeros(N, np.float32), np.zeros(N, np.float32), np.zeros((), np.float32)


def test_ad_fwd_numba(benchmark):
    with _numba_threads():
        benchmark.group = "AD fwd 2^22 f32"
        xn, y, _, loss = _nb_arrays()
        _nb_fwd(xn, y, loss)  # compiles before the timing
        _check(benchmark, xn, loss=float(loss))
        benchmark.extra_info["tier"] = "numba"
        _time(benchmark, lambda: _nb_fwd(xn, y, loss), FWD, "numba")


def test_ad_grad_numba(benchmark):
    with _numba_threads():
        benchmark.group = "AD grad 2^22 f32"
        xn, _, xg, _ = _nb_arrays()
        lg = np.float32(1.0)
        _nb_grad(xn, xg, lg)
        _check(benchmark, xn, grad=xg)
        benchmark.extra_info["tier"] = "numba"
        _time(benchmark, lambda: _nb_grad(xn, xg, lg), GRAD, "numba")


def test_ad_tape_numba(benchmark):
    with _numba_threads():
        benchmark.group = "AD tape step 2^22 f32"
        xn, y, xg, loss = _nb_arrays()
        lg = np.float32(1.0)

        def step():  # what the Tape does: clear the gradient and the loss, forward, reverse
            xg.fill(0.0)
            loss[()] = 0.0
            _nb_fwd(xn, y, loss)
            _nb_grad(xn, xg, lg)

        step()
        _check(benchmark, xn, grad=xg, loss=float(loss))
        benchmark.extra_info["tier"] = "numba"
        _time(benchmark, step, TAPE, "numba")
