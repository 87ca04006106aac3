"""What reverse mode refuses instead of giving a wrong gradient (`qd.ad.validation.check_reverse_supported`,
run by `kernel.grad` before the `reverse` pass): `qd.random()` (Quadrants' "RandStmt not supported"
RuntimeError), atomic min/max into a field or ndarray that has a gradient, and an atomic whose old value the
gradient depends on (a claimed slot: the replay would see the counter as the forward pass left it)."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from tests.finite_diff import central

N = 4


def _fields():
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(N, dtype=np.float32))
    return x, loss


def test_random_in_reverse_mode_raises(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def work():
        loss[None] = x[1] * qd.random()

    work()  # the primal is fine (x[1] = 1)
    assert 0.0 <= loss[None] < 1.0
    with pytest.raises(RuntimeError, match="RandStmt not supported in AutoDiff for now"), qd.ad.Tape(loss):
        work()


@pytest.mark.parametrize("op", ["max", "min", "mul"])
def test_atomic_min_max_mul_into_grad_field_raises(arch: object, op: str) -> None:
    x, loss = _fields()
    atomic = getattr(qd, f"atomic_{op}")

    @qd.kernel
    def reduce():
        for i in x:
            atomic(loss[None], x[i])

    loss[None] = 1.5
    reduce()  # the primal still reduces
    assert loss[None] == {"max": 3.0, "min": 0.0, "mul": 0.0}[op]
    with pytest.raises(qd.QuadrantsCompilationError,
                       match=rf"atomic_{op} into `loss`, which has a gradient, cannot be differentiated"):
        reduce.grad()


def test_atomic_max_into_field_without_grad_is_allowed(arch: object) -> None:
    # The max goes to a field with no gradient, so nothing is differentiated through it.
    x, loss = _fields()
    m = qd.field(qd.f32, shape=())

    @qd.kernel
    def work():
        for i in x:
            qd.atomic_max(m[None], x[i])
            loss[None] += 2.0 * x[i]

    m[None] = -1.0
    with qd.ad.Tape(loss):
        work()
    assert m[None] == 3.0
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(N, 2.0, np.float32))


def test_atomic_max_into_grad_ndarray_argument_raises(arch: object) -> None:
    x = qd.ndarray(qd.f32, shape=N, needs_grad=True)
    out = qd.ndarray(qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(N, dtype=np.float32))

    @qd.kernel
    def reduce(x: qd.types.ndarray(), out: qd.types.ndarray()):
        for i in x:
            qd.atomic_max(out[None], x[i])

    with pytest.raises(qd.QuadrantsCompilationError, match="atomic_max into `out`"):
        reduce.grad(x, out)


def test_a_slot_claimed_by_an_atomic_raises_in_reverse_mode(arch: object) -> None:
    """`slot = qd.atomic_add(counter, 1); out[slot] = ...`: the reverse pass replays the kernel after the forward
    one ran, where the counter holds its final value: every slot would read as the last (out of bounds) and the
    gradient would be garbage. It is refused, naming the line."""
    x, loss = _fields()
    out = qd.field(qd.f32, shape=N, needs_grad=True)
    counter = qd.field(qd.i32, shape=())

    @qd.kernel
    def emit():
        for i in range(N):
            slot = qd.atomic_add(counter[None], 1)
            out[slot] = x[i] * 2.0

    @qd.kernel
    def total():
        for i in range(N):
            loss[None] += out[i]

    emit()  # the primal is fine: every slot taken once
    assert sorted(out.to_numpy().tolist()) == [0.0, 2.0, 4.0, 6.0] and counter[None] == N
    counter[None] = 0
    with pytest.raises(qd.QuadrantsCompilationError, match=r"atomic_add returns cannot be replayed.*slot ="):
        with qd.ad.Tape(loss):
            emit()
            total()


def test_an_atomics_old_value_only_recorded_is_allowed(arch: object) -> None:
    """An old value stored (through arithmetic) into a buffer without a gradient does not reach the gradient:
    the reverse pass drops that store and differentiates the rest."""
    x, loss = _fields()
    ticket = qd.field(qd.i32, shape=N)
    counter = qd.field(qd.i32, shape=())

    @qd.kernel
    def work():
        for i in range(N):
            ticket[i] = qd.atomic_add(counter[None], 1) * 10
            loss[None] += x[i] * x[i]

    with qd.ad.Tape(loss):
        work()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0 * np.arange(N))
    assert sorted(ticket.to_numpy().tolist()) == [0, 10, 20, 30]


def _stale_fields():
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    y = qd.field(qd.f32, shape=N, needs_grad=True)
    z = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(1, N + 1, dtype=np.float32))
    y.from_numpy(np.full(N, 3.0, np.float32))
    return x, y, z, loss


def _scale_in_place(x, y, loss):
    """`y[i] *= x[i]`, then the sum of y into loss: the read of y[i] is overwritten in the same kernel."""
    @qd.kernel
    def scale():
        for i in range(N):
            y[i] *= x[i]
        for i in range(N):
            loss[None] += y[i]

    return scale


def test_a_read_overwritten_later_in_the_kernel_replays_the_saved_value(arch: object) -> None:
    """`y[i] *= x[i]`: the replay would read the product where the forward pass read 3, and x.grad would be
    3·x instead of 3. The Tape copies y before the launch and replays with it (`qd.runtime.ad_snapshots`): x.grad = 3,
    y.grad = x, and y ends as the forward pass left it. (`kernel.grad` alone: below.)"""
    x, y, _, loss = _stale_fields()

    scale = _scale_in_place(x, y, loss)

    with qd.ad.Tape(loss) as tape:
        scale()
    xs = np.arange(1, N + 1, dtype=np.float32)
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 3.0))
    np.testing.assert_allclose(y.grad.to_numpy(), xs)
    np.testing.assert_allclose(y.to_numpy(), 3.0 * xs)
    assert tape.saved == {"copies": 1, "bytes": N * 4}


def test_reads_whose_replay_is_right_are_differentiated(arch: object) -> None:
    """A read the gradient needs no value of (`y[i] = y[i] + x[i]`), and a cell stored earlier in the same
    iteration and read back (`z[i] = ...; ... z[i] * x[i]`): both replay right, so both are differentiated."""
    x, y, z, loss = _stale_fields()

    @qd.kernel
    def work():
        for i in range(N):
            y[i] = y[i] + x[i]
            z[i] = x[i] * x[i]
            loss[None] += z[i] * x[i] + y[i]

    with qd.ad.Tape(loss):
        work()
    xs = np.arange(1, N + 1, dtype=np.float32)
    np.testing.assert_allclose(x.grad.to_numpy(), 3 * xs * xs + 1, rtol=1e-6)


def test_a_cell_written_again_in_a_later_loop_replays_the_saved_value(arch: object) -> None:
    """A read, then a later loop of the same kernel overwrites it: the Tape's copy from before the launch serves
    the replay (x.grad = 3, the value read)."""
    x, y, _, loss = _stale_fields()

    @qd.kernel
    def later_loop():
        for i in range(N):
            loss[None] += y[i] * x[i]
        for i in range(N):
            y[i] = 0.0

    with qd.ad.Tape(loss):
        later_loop()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 3.0))
    np.testing.assert_allclose(y.to_numpy(), np.zeros(N))


def test_a_cell_written_again_around_its_read_raises(arch: object) -> None:
    """A serial loop writes the cell again in every iteration: no copy from before the launch gives the replay of
    an iteration what it read. Still refused."""
    x, _, z, loss = _stale_fields()

    @qd.kernel
    def serial_loop():
        for i in range(N):
            for t in range(3):
                z[0] = x[i] * t  # written again by every t: the replay of t = 0 would read t = 2's value
                loss[None] += z[0] * x[i]

    with pytest.raises(qd.QuadrantsCompilationError, match="is read here and written"), qd.ad.Tape(loss):
        serial_loop()


def test_time_steps_written_ahead_of_their_reads_are_differentiated(arch: object) -> None:
    """`x[t + 1, i] = f(x[t, i])` in a serial loop: every cell is written one step before it is read and never
    again, so the replay reads what the forward pass read; the gradient matches the chain rule."""
    T = 5
    x = qd.field(qd.f32, shape=(T + 1, N), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def sim():
        for i in range(N):
            for t in range(T):
                x[t + 1, i] = x[t, i] * 0.9 + qd.sin(x[t, i])
        for i in range(N):
            loss[None] += x[T, i]

    x0 = np.linspace(0.1, 0.7, N).astype(np.float32)
    x.from_numpy(np.vstack([x0, np.zeros((T, N), np.float32)]))
    with qd.ad.Tape(loss):
        sim()
    want, v = np.ones(N), x0.astype(np.float64)
    for _ in range(T):
        want *= 0.9 + np.cos(v)
        v = v * 0.9 + np.sin(v)
    np.testing.assert_allclose(x.grad.to_numpy()[0], want, rtol=1e-4)


def test_kernel_grad_replays_the_last_launch_with_the_values_it_saved(arch: object) -> None:
    """`kernel.grad` without the forward launch replays memory as the forward pass would see it (Quadrants' tests
    call it so). After a forward launch outside a Tape, the launch copied y (its gradient reads y as it was before
    it: `qd.runtime.ad_snapshots.LaunchCopies`) and kernel.grad replays with that copy, once: x.grad is 3 again, not the
    3·x a replay of the new y gives, and y keeps what it holds. A second kernel.grad of the same launch is refused
    (it would replay the new y), naming the Tape."""
    x, y, _, loss = _stale_fields()
    xs = np.arange(1, N + 1, dtype=np.float32)

    scale = _scale_in_place(x, y, loss)

    loss.grad[None] = 1.0
    scale.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 3.0))
    scale()
    y.fill(100.0)  # a host write between the launch and its gradient: the copy is from before the launch
    x.grad.fill(0.0)
    y.grad.fill(0.0)
    scale.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 3.0))
    np.testing.assert_allclose(y.grad.to_numpy(), xs)
    np.testing.assert_allclose(y.to_numpy(), np.full(N, 100.0))
    with pytest.raises(qd.QuadrantsCompilationError, match="(?s)`y` is read here.*once.*qd.ad.Tape"):
        scale.grad()
    y.from_numpy(np.full(N, 2.0, np.float32))
    scale()
    x.grad.fill(0.0)
    y.grad.fill(0.0)
    scale.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(N, 2.0))
    np.testing.assert_allclose(y.to_numpy(), 2.0 * xs)


def test_kernel_grad_of_an_in_place_ndarray_kernel(arch: object) -> None:
    """The same for a qd.ndarray argument with a gradient (`x[i] = x[i] * x[i]`): the gradient of the last launch
    is 2·x0 against float64 finite differences of the forward pass."""
    x0 = np.linspace(-1.5, 2.0, N).astype(np.float32)

    @qd.kernel
    def square(a: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            a[i] = a[i] * a[i]

    a = qd.ndarray(qd.f32, shape=N, needs_grad=True)
    a.from_numpy(x0)
    square(a)
    a.grad.from_numpy(np.ones(N, np.float32))
    square.grad(a)
    want = central(lambda v: float(np.sum(v.astype(np.float64) ** 2)), x0.astype(np.float64))
    np.testing.assert_allclose(a.grad.to_numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.to_numpy(), x0 * x0)


def test_kernel_grad_copies_are_per_thread(arch: object) -> None:
    """Threads that each launch a kernel and its gradient on their own fields get their own launch's copies."""
    import threading

    @qd.kernel
    def scale(y: qd.template(), x: qd.template(), loss: qd.template()):
        for i in range(N):
            y[i] *= x[i]
        for i in range(N):
            loss[None] += y[i]

    sets = [_stale_fields() for _ in range(4)]
    for k, (x, y, _, loss) in enumerate(sets):
        y.from_numpy(np.full(N, 1.0 + k, np.float32))
        loss.grad[None] = 1.0
    barrier = threading.Barrier(len(sets))
    errors = []

    def work(x, y, loss):
        try:
            barrier.wait()
            for _ in range(5):
                x.grad.fill(0.0)
                y.grad.fill(0.0)
                scale(y, x, loss)
                scale.grad(y, x, loss)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x, y, loss)) for x, y, _, loss in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    xs = np.arange(1, N + 1, dtype=np.float64)
    for k, (x, _, _, _) in enumerate(sets):  # the last launch read y = (1 + k) x^4
        np.testing.assert_allclose(x.grad.to_numpy(), (1.0 + k) * xs ** 4, rtol=1e-6)


def test_a_tape_whose_later_kernel_overwrites_a_read_is_differentiated(arch: object) -> None:
    """In-place state across the steps of a Tape: each `step`'s gradient would replay its reads of x after every
    step ran, with the last values. The Tape copies x before each step (`qd.runtime.ad_snapshots`); the gradient matches
    the chain rule."""
    x, v, _, loss = _stale_fields()

    @qd.kernel
    def step():
        for i in range(N):
            v[i] += -x[i] * x[i] * 0.1
        for i in range(N):
            x[i] += v[i] * 0.1

    @qd.kernel
    def total():
        for i in range(N):
            loss[None] += x[i]

    with qd.ad.Tape(loss):
        step()
        step()
        total()
    xv, vv, dx, dv = np.arange(1, N + 1, dtype=np.float64), np.full(N, 3.0), np.ones(N), np.zeros(N)
    for _ in range(2):
        vv, dv = vv - 0.1 * xv * xv, dv - 0.2 * xv * dx
        xv, dx = xv + 0.1 * vv, dx + 0.1 * dv
    np.testing.assert_allclose(x.grad.to_numpy(), dx, rtol=1e-5)
    np.testing.assert_allclose(x.to_numpy(), xv, rtol=1e-5)


def test_a_tape_over_time_indexed_steps_is_differentiated(arch: object) -> None:
    """`x[t + 1, i] = f(x[t, i])` with t a kernel argument: each launch writes cells no earlier launch read, so the
    Tape runs; the gradient matches the chain rule."""
    T = 3
    X = qd.field(qd.f32, shape=(T + 1, N), needs_grad=True)
    V = qd.field(qd.f32, shape=(T + 1, N), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def step(t: qd.i32):
        for i in range(N):
            V[t + 1, i] = V[t, i] - X[t, i] * X[t, i] * 0.1
            X[t + 1, i] = X[t, i] + V[t + 1, i] * 0.1

    @qd.kernel
    def total():
        for i in range(N):
            loss[None] += X[T, i]

    x0 = np.linspace(0.5, 1.0, N).astype(np.float32)
    X.from_numpy(np.vstack([x0, np.zeros((T, N), np.float32)]))
    with qd.ad.Tape(loss):
        for t in range(T):
            step(t)
        total()
    x, v, dx, dv = x0.astype(np.float64), np.zeros(N), np.ones(N), np.zeros(N)
    for _ in range(T):
        v, dv = v - 0.1 * x * x, dv - 0.2 * x * dx
        x, dx = x + 0.1 * v, dx + 0.1 * dv
    np.testing.assert_allclose(X.grad.to_numpy()[0], dx, rtol=1e-5)


def test_a_host_write_inside_a_tape_after_a_read_replays_the_saved_value(arch: object) -> None:
    """`x.from_numpy(...)` between two recorded kernels: the first kernel's gradient would replay its reads of x
    with the new values. The Tape copies x before the host write: x.grad = 2 x as read; x ends as written."""
    x, y, _, loss = _stale_fields()

    @qd.kernel
    def square():
        for i in range(N):
            y[i] = x[i] * x[i]

    @qd.kernel
    def total():
        for i in range(N):
            loss[None] += y[i]

    with qd.ad.Tape(loss):
        square()
        x.from_numpy(np.ones(N, np.float32))
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0 * np.arange(1, N + 1))
    np.testing.assert_allclose(x.to_numpy(), np.ones(N))
    with qd.ad.Tape(loss):
        square()
        total()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0 * np.ones(N))
