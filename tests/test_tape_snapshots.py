"""A `qd.ad.Tape` keeps the values its reverse pass needs (`qd/runtime/ad_snapshots.py`, issue 28.2): where a later taped
launch or a host write overwrites what an earlier taped kernel's gradient reads, or a kernel overwrites a buffer it
read first, the Tape saves a copy before the overwrite and replays the gradient with it. Each program below was
refused before; its gradients now equal central finite differences (float64) and the gradients of the same program
written without in-place updates (time-indexed fields). The forward pass's final values are left in place, and the
cases a copy cannot make right are still refused."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from tests.finite_diff import central

N, STEPS = 4, 5
X0 = np.array([0.31, 0.52, 0.77, 1.13])
W0 = np.array([0.9, 1.1, 1.25, 0.8])


def _tensor(kind: str, shape: object) -> object:
    if kind == "field":
        return qd.field(qd.f64, shape=shape, needs_grad=True)
    return qd.ndarray(qd.f64, shape=shape, needs_grad=True)


# ---------------------------------------------------------------- in-place state across steps, one buffer

def _step_kernels(kind: str) -> tuple:
    """(step, total, step_t, total_t): the in-place program and its time-indexed twin, over fields (template
    arguments) or ndarray arguments."""
    if kind == "field":
        @qd.kernel
        def step(x: qd.template(), w: qd.template()):
            for i in range(N):
                x[i] = qd.sin(x[i]) * w[i]

        @qd.kernel
        def total(x: qd.template(), loss: qd.template()):
            for i in range(N):
                loss[None] += x[i] * x[i]

        @qd.kernel
        def step_t(xs: qd.template(), w: qd.template(), t: qd.i32):
            for i in range(N):
                xs[t + 1, i] = qd.sin(xs[t, i]) * w[i]

        @qd.kernel
        def total_t(xs: qd.template(), loss: qd.template()):
            for i in range(N):
                loss[None] += xs[STEPS, i] * xs[STEPS, i]
    else:
        @qd.kernel
        def step(x: qd.types.ndarray(), w: qd.types.ndarray()):
            for i in range(N):
                x[i] = qd.sin(x[i]) * w[i]

        @qd.kernel
        def total(x: qd.types.ndarray(), loss: qd.types.ndarray()):
            for i in range(N):
                loss[None] += x[i] * x[i]

        @qd.kernel
        def step_t(xs: qd.types.ndarray(), w: qd.types.ndarray(), t: qd.i32):
            for i in range(N):
                xs[t + 1, i] = qd.sin(xs[t, i]) * w[i]

        @qd.kernel
        def total_t(xs: qd.types.ndarray(), loss: qd.types.ndarray()):
            for i in range(N):
                loss[None] += xs[STEPS, i] * xs[STEPS, i]
    return step, total, step_t, total_t


@pytest.mark.parametrize("kind", ["field", "ndarray"])
def test_in_place_state_across_steps(arch: object, kind: str) -> None:
    """`x[i] = sin(x[i]) * w[i]` launched STEPS times on one buffer: each step's gradient needs x as it was before
    that step; the Tape saves x before each launch (STEPS copies) and leaves the final x in place."""
    x, w = _tensor(kind, N), _tensor(kind, N)
    loss = _tensor(kind, ())
    step, total, step_t, total_t = _step_kernels(kind)

    def run(x0: np.ndarray, w0: np.ndarray, tape: bool) -> float:
        x.from_numpy(x0)
        w.from_numpy(w0)
        if tape:
            with qd.ad.Tape(loss) as t:
                for _ in range(STEPS):
                    step(x, w)
                total(x, loss)
            assert t.saved == {"copies": STEPS, "bytes": STEPS * N * 8}
        else:
            loss.fill(0.0)
            for _ in range(STEPS):
                step(x, w)
            total(x, loss)
        return float(loss.to_numpy())

    run(X0, W0, tape=True)
    gx, gw, final = x.grad.to_numpy(), w.grad.to_numpy(), x.to_numpy()
    run(X0, W0, tape=False)
    np.testing.assert_array_equal(final, x.to_numpy())  # the Tape put back the forward's final values
    np.testing.assert_allclose(gx, central(lambda a: run(a, W0, False), X0), rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(gw, central(lambda a: run(X0, a, False), W0), rtol=1e-6, atol=1e-10)

    # the same program with each step's state in its own row: the gradients agree to rounding, and nothing is copied
    xs, ws = _tensor(kind, (STEPS + 1, N)), _tensor(kind, N)
    loss2 = _tensor(kind, ())
    init = np.zeros((STEPS + 1, N))
    init[0] = X0
    xs.from_numpy(init)
    ws.from_numpy(W0)
    with qd.ad.Tape(loss2) as t:
        for s in range(STEPS):
            step_t(xs, ws, s)
        total_t(xs, loss2)
    assert t.saved == {"copies": 0, "bytes": 0}
    np.testing.assert_allclose(gx, xs.grad.to_numpy()[0], rtol=1e-12)
    np.testing.assert_allclose(gw, ws.grad.to_numpy(), rtol=1e-12)


def test_in_place_update_of_a_vector_field(arch: object) -> None:
    """A vector field updated in place (`p[i] = p[i] * s[i] + sin(p[i])` over components): the whole field is
    copied before each step."""
    p = qd.Vector.field(2, qd.f64, shape=N, needs_grad=True)
    s = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    p0 = np.stack([X0, X0[::-1]], axis=1)

    @qd.kernel
    def step():
        for i in range(N):
            p[i] = p[i] * s[i] + qd.sin(p[i])

    @qd.kernel
    def total():
        for i in range(N):
            loss[None] += p[i].dot(p[i])

    def run(s0: np.ndarray, tape: bool) -> float:
        p.from_numpy(p0)
        s.from_numpy(s0)
        if tape:
            with qd.ad.Tape(loss):
                for _ in range(3):
                    step()
                total()
        else:
            loss[None] = 0.0
            for _ in range(3):
                step()
            total()
        return loss[None]

    run(W0 * 0.5, tape=True)
    np.testing.assert_allclose(s.grad.to_numpy(), central(lambda a: run(a, False), W0 * 0.5), rtol=1e-6)


# ---------------------------------------------------------------- host writes inside the Tape

@pytest.mark.parametrize("write", ["from_numpy", "fill", "element"])
def test_a_host_write_between_two_taped_kernels(arch: object, write: str) -> None:
    """`energy` reads y, the host overwrites y (from_numpy, fill, or an element store), `energy` reads it again:
    the first launch's gradient is taken at the values it read. Against finite differences, and against the same
    program reading two separate fields."""
    y, w = qd.field(qd.f64, shape=N, needs_grad=True), qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    y2 = np.linspace(-0.4, 0.6, N)

    @qd.kernel
    def energy(y: qd.template()):
        for i in range(N):
            loss[None] += qd.sin(y[i] * w[i])

    def overwrite() -> None:
        if write == "from_numpy":
            y.from_numpy(y2)
        elif write == "fill":
            y.fill(0.25)
        else:
            y[2] = 0.5

    def run(w0: np.ndarray, tape: bool) -> float:
        y.from_numpy(X0)
        w.from_numpy(w0)
        if tape:
            with qd.ad.Tape(loss) as t:
                energy(y)
                overwrite()
                energy(y)
            assert t.saved["copies"] == 1
        else:
            loss[None] = 0.0
            energy(y)
            overwrite()
            energy(y)
        return loss[None]

    run(W0, tape=True)
    got = w.grad.to_numpy()
    np.testing.assert_allclose(got, central(lambda a: run(a, False), W0), rtol=1e-6, atol=1e-10)

    # the same with the second values in a field of their own
    y_b = qd.field(qd.f64, shape=N, needs_grad=True)
    y.from_numpy(X0)
    overwrite()
    y_b.from_numpy(y.to_numpy())
    y.from_numpy(X0)
    w.from_numpy(W0)
    with qd.ad.Tape(loss):
        energy(y)
        energy(y_b)
    np.testing.assert_allclose(got, w.grad.to_numpy(), rtol=1e-12)


# ---------------------------------------------------------------- read, then overwritten by a later kernel

def test_read_before_a_later_kernel_overwrites_it(arch: object) -> None:
    """difftaichi `electric.py`'s shape: `feature(t)` reads state[t] before `advance(t)` overwrites state[t]; with
    the values the first read saw kept in another field (`seen`), the same program has no overwrite. Both give the
    same gradients, and they match finite differences."""
    steps = 4
    state = qd.field(qd.f64, shape=steps, needs_grad=True)
    seen = qd.field(qd.f64, shape=steps, needs_grad=True)
    h = qd.field(qd.f64, shape=steps, needs_grad=True)
    w = qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    s0 = np.linspace(0.2, 0.8, steps)

    @qd.kernel
    def feature(src: qd.template(), t: qd.i32):
        for i in range(N):
            h[t] += qd.tanh(src[t] * w[i])

    @qd.kernel
    def advance(t: qd.i32):
        for _ in range(1):
            state[t] = state[t - 1] * 0.9 + h[t] * state[t - 1]

    @qd.kernel
    def measure(t: qd.i32):
        loss[None] += state[t] * state[t]

    def run(w0: np.ndarray, separate: bool, tape: bool) -> float:
        state.from_numpy(s0)
        seen.from_numpy(s0)
        h.fill(0.0)
        w.from_numpy(w0)
        loss[None] = 0.0

        def forward() -> None:
            for t in range(1, steps):
                feature(seen if separate else state, t)
                advance(t)
                measure(t)
        if tape:
            with qd.ad.Tape(loss):
                forward()
        else:
            forward()
        return loss[None]

    run(W0, separate=False, tape=True)
    got = w.grad.to_numpy()
    run(W0, separate=True, tape=True)
    np.testing.assert_allclose(got, w.grad.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(got, central(lambda a: run(a, False, False), W0), rtol=1e-6)


# ---------------------------------------------------------------- what a copy cannot make right

def test_an_in_place_update_inside_a_serial_loop_is_still_refused(arch: object) -> None:
    """The steps inside one kernel (`for t: x[i] = sin(x[i]) * w[i]`): each iteration reads what the one before
    wrote, which no copy from before the launch gives back. Refused with the line and what to change."""
    x, w = qd.field(qd.f64, shape=N, needs_grad=True), qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(X0)
    w.from_numpy(W0)

    @qd.kernel
    def steps():
        for i in range(N):
            for _ in range(STEPS):
                x[i] = qd.sin(x[i]) * w[i]
            loss[None] += x[i]

    with pytest.raises(qd.QuadrantsCompilationError, match=r"`x` is read here .*time-indexed.*x\[i\] = qd.sin"), \
            qd.ad.Tape(loss):
        steps()


def test_a_kernel_reading_what_it_wrote_and_what_it_overwrites_is_still_refused(arch: object) -> None:
    """A kernel that reads y[i] before overwriting it and, later, the value it wrote: neither the copy from before
    the launch nor the values after it serve both reads. Still refused."""
    y, w = qd.field(qd.f64, shape=N, needs_grad=True), qd.field(qd.f64, shape=N, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    y.from_numpy(X0)
    w.from_numpy(W0)

    @qd.kernel
    def mixed():
        for i in range(N):
            a = qd.sin(y[i]) * w[i]
            y[i] = a
            loss[None] += qd.cos(y[i]) * w[i]

    with pytest.raises(qd.QuadrantsCompilationError, match=r"`y` is read here"), qd.ad.Tape(loss):
        mixed()
