"""Kernels used from several Python threads at once (issue 27, items 5 and 12), on every tier.

Threads that launch kernels are normal in data loaders and servers. What must hold: first calls (compiles)
from several threads neither fail nor see a half-built instance, and one instance is compiled once; forward
and reverse launches of one instance from several threads, each on its own data, give exactly what the same
launches give one at a time (reverse launches with adstacks included: every launch has heaps of its own); a
`qd.ad.Tape` or `FwdMode` sees only its own thread's launches, and entering one does not clear the gradients
another thread is computing. The interpreter's switch interval is made short so that the threads interleave
inside the frontend and the launch path, not only between calls.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsSyntaxError

THREADS = 8


@pytest.fixture(autouse=True)
def _switch_often() -> Any:
    old = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(work: Callable[[int], Any], n: int = THREADS) -> list:
    """`work(t)` for t in range(n), each in its own thread, started together; their results in order. An
    exception in a thread is raised here (the first, by thread)."""
    start = threading.Barrier(n)
    results: list = [None] * n
    errors: list = [None] * n

    def body(t: int) -> None:
        try:
            start.wait()
            results[t] = work(t)
        except BaseException as e:  # noqa: BLE001  (raised below, in the test's thread)
            errors[t] = e

    threads = [threading.Thread(target=body, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    for t, e in enumerate(errors):
        if e is not None:
            raise AssertionError(f"thread {t} raised {type(e).__name__}: {e}") from e
    return results


# ------------------------------------------------------------------ first calls (compiles)


def _affine(a: int, b: int) -> Any:
    @qd.func
    def shift(v):  # (a qd.func: its annotations would be types)
        return v + b

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        for i in range(x.shape[0]):
            x[i] = shift(x[i] * a)
            s += x[i]
        return s

    return k


def test_first_calls_of_distinct_kernels_from_threads(arch: Any) -> None:
    per_thread = 1 if arch.name == "opencl" else 3  # (PoCL builds a program in about 0.6 s)

    def work(t: int) -> None:
        kernels = [_affine(t + 2, j) for j in range(per_thread)]
        for j, k in enumerate(kernels):
            x = np.arange(16, dtype=np.int32)
            want = x * (t + 2) + j
            assert k(x) == int(want.sum())
            np.testing.assert_array_equal(x, want)

    run_threads(work)


def test_racing_first_calls_of_one_instance_compile_it_once(arch: Any) -> None:
    k = _affine(3, 1)
    compiles = []
    compile_ = k._compile

    def counted(*a: Any, **kw: Any) -> Any:
        compiles.append(threading.get_ident())
        return compile_(*a, **kw)

    k._compile = counted

    def work(t: int) -> int:
        x = np.full(8, t, np.int32)
        r = k(x)
        np.testing.assert_array_equal(x, np.full(8, 3 * t + 1))
        return r

    assert run_threads(work) == [8 * (3 * t + 1) for t in range(THREADS)]
    assert len(compiles) == 1 and len(k._instances) == 1


def test_a_compile_in_one_thread_is_not_kernel_scope_in_another(arch: Any) -> None:
    """While thread A is inside a kernel's compile (held there by a `qd.static` call), thread B compiles and
    launches other kernels, and calling a `qd.func` from B's Python scope is refused as ever (it is not inlined
    into A's kernel)."""
    inside, release = threading.Event(), threading.Event()

    def held() -> int:
        inside.set()
        assert release.wait(30)
        return 5

    @qd.kernel
    def slow(x: qd.types.ndarray(qd.i32, 1)):
        c = qd.static(held())
        for i in range(x.shape[0]):
            x[i] = c

    @qd.func
    def twice(v):
        return 2 * v

    def thread_a() -> np.ndarray:
        x = np.zeros(4, np.int32)
        slow(x)
        return x

    a = threading.Thread(target=lambda: out.append(thread_a()))
    out: list = []
    a.start()
    try:
        assert inside.wait(30)
        k = _affine(2, 1)
        for n in range(3):  # a first call (compile), then launches (a plan on the cpu tier)
            x = np.full(4, n, np.int32)
            assert k(x) == 4 * (2 * n + 1)
        with pytest.raises(QuadrantsSyntaxError, match="cannot be called from Python-scope"):
            twice(3)
    finally:
        release.set()
        a.join(60)
    np.testing.assert_array_equal(out[0], np.full(4, 5))


# ------------------------------------------------------------------ forward launches


def test_forward_launches_of_one_instance_from_threads(arch: Any) -> None:
    @qd.kernel
    def step(x: qd.types.ndarray(qd.i64, 1), y: qd.types.ndarray(qd.i64, 1), c: qd.i64) -> qd.i64:
        s = qd.i64(0)
        for i in range(x.shape[0]):
            y[i] = x[i] * c + i
            s += y[i]
        return s

    n, rounds = 300, 25
    x0 = np.arange(n, dtype=np.int64)
    step(x0, np.zeros(n, np.int64), 1)

    def work(t: int) -> None:
        x = qd.ndarray(qd.i64, n) if t % 2 else x0.copy()  # qd ndarrays and numpy arrays
        y = np.zeros(n, np.int64)
        if t % 2:
            x.from_numpy(x0)
        for r in range(rounds):
            c = t * 100 + r
            want = x0 * c + np.arange(n)
            assert step(x, y, c) == int(want.sum())
            np.testing.assert_array_equal(y, want)

    run_threads(work)


def test_prints_and_failed_checks_stay_with_their_launch(arch: Any, capfd: Any) -> None:
    """With `debug=True`, launches from several threads print and some fail a bounds check: every launch prints
    its own line once, and exactly the failing launches raise, each naming its own index."""
    from tests.conftest import init_arch

    init_arch(arch, debug=True)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1), t: qd.i32, j: qd.i32):
        print("thread", t, "wrote", x[0] + 1000 * t)
        x[j] = t

    rounds = 6

    def work(t: int) -> int:
        x = np.zeros(4, np.int32)
        failed = 0
        for r in range(rounds):
            j = 100 + 10 * t + r if (t + r) % 3 == 0 else r % 4
            try:
                k(x, t, j)
            except QuadrantsAssertionError as e:
                assert f"{j}" in str(e), str(e)
                failed += 1
            else:
                assert (t + r) % 3 != 0 and x[j] == t
        return failed

    failed = run_threads(work)
    assert failed == [sum((t + r) % 3 == 0 for r in range(rounds)) for t in range(THREADS)]
    lines = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("thread")]
    for t in range(THREADS):
        mine = [ln for ln in lines if ln.split()[1] == str(t)]
        assert len(mine) == rounds and all(ln.split()[3] in (str(1000 * t), str(1000 * t + t)) for ln in mine), mine


# ------------------------------------------------------------------ reverse launches with adstacks

N = 48


def _nd_grad_kernel() -> Any:
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f64, 1), a: qd.types.ndarray(qd.i32, 1), y: qd.types.ndarray(qd.f64, 1)):
        for i in range(x.shape[0]):
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1 + 0.1
            y[i] = v

    return k


def _reference_grad(xv: np.ndarray, av: np.ndarray) -> np.ndarray:
    """d/dx of the loop `v = sin(v) * 1.1 + 0.1` run `a` times, in float64."""
    out = np.ones_like(xv)
    for i, (v, n) in enumerate(zip(xv, av)):
        for _ in range(int(n)):
            out[i] *= np.cos(v) * 1.1
            v = np.sin(v) * 1.1 + 0.1
    return out


def _thread_data(t: int) -> tuple[np.ndarray, np.ndarray]:
    """Thread t's own inputs: its loops run up to 6 + 3t times (the stacks' sizes differ by thread)."""
    rng = np.random.default_rng(t)
    return rng.uniform(-1, 1, N), rng.integers(0, 6 + 3 * t, N).astype(np.int32)


def test_grad_launches_with_adstacks_on_own_ndarrays_from_threads(arch: Any) -> None:
    k = _nd_grad_kernel()
    rounds = 10

    def grads(t: int) -> list[np.ndarray]:
        xv, av = _thread_data(t)
        x = qd.ndarray(qd.f64, N, needs_grad=True)
        a = qd.ndarray(qd.i32, N)
        y = qd.ndarray(qd.f64, N, needs_grad=True)
        x.from_numpy(xv)
        a.from_numpy(av)
        out = []
        for _ in range(rounds):
            x.grad.fill(0.0)
            y.grad.fill(1.0)
            k(x, a, y)
            k.grad(x, a, y)
            out.append(x.grad.to_numpy())
        return out

    alone = [grads(t)[0] for t in range(THREADS)]  # the same launches, one thread at a time
    for t, g in enumerate(alone):
        np.testing.assert_allclose(g, _reference_grad(*_thread_data(t)), rtol=1e-10, atol=1e-12)
    for t, got in enumerate(run_threads(grads)):
        for g in got:
            np.testing.assert_array_equal(g, alone[t])


@pytest.mark.parametrize("loop", ["for", "while"])
def test_grad_launches_of_one_instance_on_rows_of_shared_fields_from_threads(arch: Any, loop: str) -> None:
    """One instance (fields bound at compile time, the thread's row a scalar argument): on the cpu tier its
    launch plan runs some launches while the others take the Python path; a `while` loop's stacks are sized by
    the counting kernel, whose counts the instance's launches share."""
    x = qd.field(qd.f64, shape=(THREADS, N), needs_grad=True)
    loss = qd.field(qd.f64, shape=THREADS, needs_grad=True)
    counts = qd.field(qd.i32, shape=(THREADS, N))

    @qd.kernel
    def k(t: qd.i32):
        for i in range(N):
            v = x[t, i]
            if qd.static(loop == "for"):
                for _ in range(counts[t, i]):
                    v = qd.sin(v) * 1.1 + 0.1
            else:
                j = 0
                while j < counts[t, i]:
                    v = qd.sin(v) * 1.1 + 0.1
                    j += 1
            loss[t] += v

    data = [_thread_data(t) for t in range(THREADS)]
    x.from_numpy(np.stack([d[0] for d in data]))
    counts.from_numpy(np.stack([d[1] for d in data]))
    loss.grad.fill(1.0)
    rounds = 10

    def grads(t: int) -> list[np.ndarray]:
        """x.grad's row t after every round (it accumulates: round r holds r + 1 gradients)."""
        out = []
        for _ in range(rounds):
            k(t)
            k.grad(t)
            out.append(x.grad.to_numpy()[t].copy())
        return out

    alone = [grads(t) for t in range(THREADS)]  # the same launches, one thread at a time
    for t in range(THREADS):
        np.testing.assert_allclose(alone[t][0], _reference_grad(*data[t]), rtol=1e-10, atol=1e-12)
    x.grad.fill(0.0)
    for t, got in enumerate(run_threads(grads)):
        for r in range(rounds):
            np.testing.assert_array_equal(got[r], alone[t][r])


# ------------------------------------------------------------------ Tape and FwdMode per thread


def _template_kernel() -> Any:
    @qd.kernel
    def k(x: qd.template(), a: qd.template(), loss: qd.template()):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1 + 0.1
            loss[None] += v

    return k


def test_tapes_in_threads_on_their_own_fields(arch: Any) -> None:
    """Each thread differentiates its own fields with a default Tape (which clears gradients on entry) while
    the others do the same: every gradient is the one the thread would get alone, and each Tape recorded its
    own thread's launch only."""
    k = _template_kernel()
    own = []
    for t in range(THREADS):
        xv, av = _thread_data(t)
        x = qd.field(qd.f64, shape=N, needs_grad=True)
        a = qd.field(qd.i32, shape=N)
        loss = qd.field(qd.f64, shape=(), needs_grad=True)
        x.from_numpy(xv)
        a.from_numpy(av)
        own.append((x, a, loss))
    rounds = 4

    def grads(t: int) -> list[np.ndarray]:
        x, a, loss = own[t]
        out = []
        for _ in range(rounds):
            with qd.ad.Tape(loss=loss) as tape:
                k(x, a, loss)
            assert [c[0] for c in tape.calls] == [k]
            out.append(x.grad.to_numpy())
        return out

    alone = [grads(t)[0] for t in range(THREADS)]
    for t, g in enumerate(alone):
        np.testing.assert_allclose(g, _reference_grad(*_thread_data(t)), rtol=1e-10, atol=1e-12)
    for t, got in enumerate(run_threads(grads)):
        for g in got:
            np.testing.assert_array_equal(g, alone[t])


def test_a_tape_or_fwdmode_sees_only_its_own_thread(arch: Any) -> None:
    """Thread A holds a Tape (then a FwdMode) open while thread B launches: B's launches are plain primal
    launches, recorded by no Tape, and A's Tape records A's own launch."""
    x = qd.field(qd.f64, shape=4, needs_grad=True, needs_dual=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)

    @qd.kernel
    def square_sum():
        for i in x:
            loss[None] += x[i] * x[i]

    @qd.kernel
    def inc(y: qd.types.ndarray(qd.i32, 1)):
        for i in range(y.shape[0]):
            y[i] += 1

    x.from_numpy(np.arange(4.0))
    for manager in ("tape", "fwd"):
        ctx = qd.ad.Tape(loss=loss) if manager == "tape" else qd.ad.FwdMode(loss=loss, param=x, seed=[1, 0, 0, 0])
        _while_open(ctx, square_sum, lambda: _inc_20_times(inc))
        assert not any(len(key) and key[-1] == "fwd" for key in inc._instances)
        if manager == "tape":
            assert [c[0] for c in ctx.calls] == [square_sum]
            np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4.0))
        else:
            assert loss.dual[None] == pytest.approx(0.0)  # d(sum x^2)/dx0 at x0 = 0
    assert qd.runtime.ad_tape.active_tape() is None and qd.runtime.ad_tape._any_active is None


def _inc_20_times(inc: Any) -> None:
    y = np.zeros(8, np.int32)
    for _ in range(20):
        inc(y)
    np.testing.assert_array_equal(y, np.full(8, 20))


def _while_open(ctx: Any, inside: Callable[[], Any], meanwhile: Callable[[], Any]) -> None:
    """Thread A enters `ctx`, waits there while this thread runs `meanwhile`, then runs `inside` and exits."""
    opened, done = threading.Event(), threading.Event()
    errors: list = []

    def thread_a() -> None:
        try:
            with ctx:
                opened.set()
                assert done.wait(30)
                inside()
        except BaseException as e:  # noqa: BLE001  (raised below)
            errors.append(e)

    a = threading.Thread(target=thread_a)
    a.start()
    try:
        assert opened.wait(30)
        meanwhile()
    finally:
        done.set()
        a.join(60)
    if errors:
        raise errors[0]


# ------------------------------------------------------------------ the tiered launcher (cpu: jit="auto")


@pytest.mark.archs("cpu")
def test_launches_while_the_background_compiler_runs(arch: Any) -> None:
    """`jit="auto"`: the first launches interpret while LLVM compiles in the background, from several threads;
    every launch is counted once, by the tier that ran it, and every result is exact."""
    from tests.conftest import init_arch

    init_arch(arch, jit="auto")
    k = _affine(5, -2)
    rounds = 30

    def work(t: int) -> None:
        for r in range(rounds):
            x = np.full(64, t + r, np.int32)
            assert k(x) == 64 * (5 * (t + r) - 2)

    run_threads(work)
    launches = k.stats["launches"]
    assert launches["interp"] + launches["cpu"] == THREADS * rounds
