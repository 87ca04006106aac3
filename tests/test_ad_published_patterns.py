"""Patterns of published differentiable programs that the stale-read checks (`qd/ad/stale_reads.py`, the Tape's
overwrite check) must let through, each against central finite differences in float64, and the neighbouring
patterns whose replay would be wrong, which they must still refuse (issue 28).

The programs are small models of difftaichi's examples (github.com/taichi-dev/difftaichi, `examples/`): kernels
launched inside a `grad_replaced` function with scratch fields reused every step (`diffmpm.py`), a time-indexed read
inside a `qd.func` that receives the step as a parameter (`billiards.py`), scans along a serial loop indexed through
a copy of the loop variable or a per-ray base (volume rendering, NeRF-style), and the read-before-overwrite of
`electric.py`, which the Tape makes right by saving the values read before they are overwritten."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from tests.finite_diff import central

# ---------------------------------------------------------------- diffmpm.py: kernels of a grad_replaced step

P, G, STEPS, DT = 4, 8, 5, 0.05


def _mpm() -> tuple:
    """A 1-D particle-in-cell step in diffmpm's shape: `clear_grid`, `p2g(s)` (scatter to scratch grid fields),
    `grid_op()` (update the grid), `g2p(s)` (gather into step s + 1); the grid fields are reused every step."""
    x = qd.field(qd.f64, shape=(STEPS, P), needs_grad=True)
    v = qd.field(qd.f64, shape=(STEPS, P), needs_grad=True)
    grid_m = qd.field(qd.f64, shape=G, needs_grad=True)
    grid_p = qd.field(qd.f64, shape=G, needs_grad=True)
    grid_v = qd.field(qd.f64, shape=G, needs_grad=True)
    stiff = qd.field(qd.f64, shape=(), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def clear_grid():
        for i in range(G):
            grid_m[i] = 0.0
            grid_p[i] = 0.0
            grid_m.grad[i] = 0.0
            grid_p.grad[i] = 0.0
            grid_v.grad[i] = 0.0

    @qd.kernel
    def p2g(s: qd.i32):
        for p in range(P):
            base = qd.cast(x[s, p] * G, qd.i32)
            fx = x[s, p] * G - base
            grid_m[base] += 1.0 - fx
            grid_m[base + 1] += fx
            grid_p[base] += (1.0 - fx) * v[s, p]
            grid_p[base + 1] += fx * v[s, p]

    @qd.kernel
    def grid_op():
        for i in range(G):
            grid_v[i] = grid_p[i] / (grid_m[i] + 1e-3) - DT * stiff[None] * (i - G / 2)

    @qd.kernel
    def g2p(s: qd.i32):
        for p in range(P):
            base = qd.cast(x[s, p] * G, qd.i32)
            fx = x[s, p] * G - base
            nv = (1.0 - fx) * grid_v[base] + fx * grid_v[base + 1]
            v[s + 1, p] = nv
            x[s + 1, p] = x[s, p] + DT * nv

    @qd.kernel
    def compute_loss():
        for p in range(P):
            loss[None] += x[STEPS - 1, p] * x[STEPS - 1, p]

    @qd.ad.grad_replaced
    def advance(s):
        clear_grid()
        p2g(s)
        grid_op()
        g2p(s)

    @qd.ad.grad_for(advance)
    def advance_grad(s):
        clear_grid()
        p2g(s)
        grid_op()
        g2p.grad(s)
        grid_op.grad()
        p2g.grad(s)

    return x, v, stiff, loss, advance, compute_loss


X0 = np.array([0.31, 0.42, 0.55, 0.63])
V0 = np.array([0.2, -0.1, 0.05, 0.3])


def test_kernels_of_a_grad_replaced_step_reuse_scratch_fields(arch: object) -> None:
    """difftaichi `diffmpm.py`: `advance(s)` (grad_replaced) runs p2g, grid_op, g2p over grid fields every step
    overwrites. The Tape never replays those kernels' gradients (`advance_grad` does, after recomputing the grid),
    so it runs; d loss / d (v0, stiffness) match finite differences."""
    x, v, stiff, loss, advance, compute_loss = _mpm()

    def run(v0: np.ndarray, k: float, tape: bool) -> float:
        xs, vs = np.zeros((STEPS, P)), np.zeros((STEPS, P))
        xs[0], vs[0] = X0, v0
        x.from_numpy(xs)
        v.from_numpy(vs)
        stiff[None] = k
        if tape:
            with qd.ad.Tape(loss):
                for s in range(STEPS - 1):
                    advance(s)
                compute_loss()
        else:
            loss[None] = 0.0
            for s in range(STEPS - 1):
                advance(s)
            compute_loss()
        return loss[None]

    run(V0, 0.7, tape=True)
    got_v, got_k = v.grad.to_numpy()[0].copy(), stiff.grad[None]
    np.testing.assert_allclose(got_v, central(lambda a: run(a, 0.7, False), V0), rtol=1e-6, atol=1e-9)
    want_k = central(lambda a: run(V0, float(a[0]), False), np.array([0.7]))[0]
    np.testing.assert_allclose(got_k, want_k, rtol=1e-6)


def test_a_grad_replaced_launch_overwriting_a_recorded_read_gets_the_read_values(arch: object) -> None:
    """The writes of a grad_replaced function's kernels still count: a recorded kernel whose read one of them
    overwrites gets that read back from the copy the Tape saved before the overwrite (`qd.runtime.ad_snapshots`), so its
    gradient is taken at the values it read (d sum x^2 / dx = 2 x0, not 2 (x0 + 1)); x ends as the forward left it."""
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    x.from_numpy(X0)

    @qd.kernel
    def square():
        for i in range(4):
            loss[None] += x[i] * x[i]

    @qd.kernel
    def shift():
        for i in range(4):
            x[i] = x[i] + 1.0

    @qd.ad.grad_replaced
    def step():
        shift()

    @qd.ad.grad_for(step)
    def step_grad():
        pass

    with qd.ad.Tape(loss) as tape:
        square()
        step()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * X0, rtol=1e-12)
    np.testing.assert_array_equal(x.to_numpy(), X0 + 1.0)
    assert tape.saved["copies"] == 1


# ---------------------------------------------------------------- billiards.py: a step read inside a qd.func

BALLS, BSTEPS, BDT, RADIUS = 3, 40, 0.02, 0.05


def _billiards() -> tuple:
    """1-D billiards in `billiards.py`'s shape: `collide(t)` calls a `qd.func collide_pair(t, i, j)` that reads
    `x[t, i]`, `v[t, i]` and adds into `impulse[t + 1, i]`; `advance(t)` writes `x[t, i]`, `v[t, i]`."""
    x = qd.field(qd.f64, shape=(BSTEPS, BALLS), needs_grad=True)
    v = qd.field(qd.f64, shape=(BSTEPS, BALLS), needs_grad=True)
    impulse = qd.field(qd.f64, shape=(BSTEPS, BALLS), needs_grad=True)
    init_v = qd.field(qd.f64, shape=(), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.func
    def collide_pair(t, i, j):
        imp = qd.cast(0.0, qd.f64)  # not default_fp (f32)
        if i != j:
            dist = (x[t, i] + BDT * v[t, i]) - (x[t, j] + BDT * v[t, j])
            rel = v[t, i] - v[t, j]
            if qd.abs(dist) < 2 * RADIUS and dist * rel < 0:
                imp = -0.9 * rel
        impulse[t + 1, i] += imp

    @qd.kernel
    def collide(t: qd.i32):
        for i in range(BALLS):
            for j in range(BALLS):
                collide_pair(t, i, j)

    @qd.kernel
    def advance(t: qd.i32):
        for i in range(BALLS):
            v[t, i] = v[t - 1, i] + impulse[t, i]
            x[t, i] = x[t - 1, i] + BDT * v[t, i]

    @qd.kernel
    def initialize():
        v[0, 0] = init_v[None]

    @qd.kernel
    def compute_loss():
        loss[None] = (x[BSTEPS - 1, BALLS - 1] - 0.9) ** 2

    def forward() -> None:
        initialize()
        for t in range(1, BSTEPS):
            collide(t - 1)
            advance(t)
        compute_loss()

    def run(v0: float, tape: bool) -> float:
        xs = np.zeros((BSTEPS, BALLS))
        xs[0] = [0.1, 0.3, 0.42]
        x.from_numpy(xs)
        v.from_numpy(np.zeros((BSTEPS, BALLS)))
        impulse.from_numpy(np.zeros((BSTEPS, BALLS)))
        init_v[None] = v0
        if tape:
            with qd.ad.Tape(loss):
                forward()
        else:
            forward()
        return loss[None]

    return run, init_v, impulse


def test_a_step_read_inside_a_func_parameterised_by_the_step(arch: object) -> None:
    """difftaichi `billiards.py`: `collide_pair(t, i, j)` reads `x[t, i]`; `t` reaches the read as the func's
    parameter, which holds the kernel's argument, so `advance(t + 1)`'s write of `x[t + 1, i]` is another cell.
    The Tape runs; d loss / d init_v matches finite differences, through collisions."""
    run, init_v, impulse = _billiards()
    run(0.6, tape=True)
    assert np.abs(impulse.to_numpy()).max() > 0  # the balls did collide
    want = central(lambda a: run(float(a[0]), False), np.array([0.6]))[0]
    np.testing.assert_allclose(init_v.grad[None], want, rtol=1e-6)


# ---------------------------------------------------------------- electric.py: read, then overwritten by a later step

def _electric(through_func: bool) -> tuple:
    """`electric.py`'s step: `nn1(t)` reads `x[t]`, `v[t]` (directly, or through a `qd.func` given t), then
    `advance(t)` overwrites the same `x[t]`, `v[t]`: nn1's gradient would replay the read with the new value."""
    n, steps = 3, 4
    x = qd.field(qd.f64, shape=steps, needs_grad=True)
    v = qd.field(qd.f64, shape=steps, needs_grad=True)
    hidden = qd.field(qd.f64, shape=(steps, n), needs_grad=True)
    w = qd.field(qd.f64, shape=n, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    w.from_numpy(np.array([0.3, -0.2, 0.5]))
    x[0] = 0.4

    @qd.func
    def feature(t, i):
        return x[t] * w[i] + v[t]

    @qd.kernel
    def nn1(t: qd.i32):
        for i in range(n):
            if qd.static(through_func):
                hidden[t, i] = qd.tanh(feature(t, i))
            else:
                hidden[t, i] = qd.tanh(x[t] * w[i] + v[t])

    @qd.kernel
    def advance(t: qd.i32):
        for _ in range(1):
            force = qd.f64(0.0)  # f64 throughout: the test takes finite differences
            for i in qd.static(range(n)):
                force += hidden[t, i]
            v[t] = v[t - 1] + 0.1 * force
            x[t] = x[t - 1] + 0.1 * v[t]

    @qd.kernel
    def compute_loss(t: qd.i32):
        loss[None] += x[t] * x[t]

    def forward() -> None:
        for t in range(1, steps):
            nn1(t)
            advance(t)
            compute_loss(t)

    def reset() -> None:  # what a previous iteration left in x[t], v[t] is what nn1(t) reads (not zero)
        x.from_numpy(np.linspace(0.4, 0.7, steps))
        v.from_numpy(np.linspace(0.1, -0.2, steps))
        hidden.fill(0.0)

    forward.reset = reset
    return loss, forward, w


@pytest.mark.parametrize("through_func", [False, True], ids=["direct", "through-func"])
def test_a_read_the_same_step_overwrites_gets_the_true_gradient(arch: object, through_func: bool) -> None:
    """difftaichi `electric.py`: `nn1(t)` reads `x[t]` before `advance(t)` writes `x[t]`; Quadrants and Taichi
    differentiate a replay that does not match the forward pass. qd's Tape saves `x`, `v` before `advance(t)`
    overwrites them and replays nn1's gradient with the values it read, whether the read is in the kernel or in a
    `qd.func` that receives t: d loss / d w equals central finite differences of the forward pass."""
    loss, forward, w = _electric(through_func)
    w0 = w.to_numpy().copy()

    def run(wv: np.ndarray, tape: bool) -> float:
        w.from_numpy(wv)
        _reset()
        if tape:
            with qd.ad.Tape(loss):
                forward()
        else:
            loss[None] = 0.0
            forward()
        return loss[None]

    _reset = forward.reset
    run(w0, tape=True)
    got = w.grad.to_numpy()
    np.testing.assert_allclose(got, central(lambda a: run(a, False), w0), rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------- scans in one kernel: kernel.grad

R, K = 2, 3


def _scan_kernels(T: object, c: object, start: object) -> dict:
    @qd.kernel
    def copy_of_loop_var():
        for r in range(R):
            for k in range(K):
                s = k
                T[r, s + 1] = qd.sin(T[r, s]) * c[r]

    @qd.kernel
    def base_plus_loop_var():  # NeRF-style: ray r owns the samples start[r] .. start[r] + K
        for r in range(R):
            for k in range(K):
                s = start[r] + k
                T[0, s + 1] = T[0, s] * (1.0 - qd.tanh(c[r] * T[0, s]))

    @qd.kernel
    def flat_layout():  # the same samples as `base`, at r * (K + 1): K + 1 cells per ray, apart from the next ray's
        for r in range(R):
            for k in range(K):
                T[0, r * (K + 1) + k + 1] = T[0, r * (K + 1) + k] * (1.0 - qd.tanh(c[r] * T[0, r * (K + 1) + k]))

    @qd.kernel
    def inline_base():  # `base` without the local
        for r in range(R):
            for k in range(K):
                T[0, start[r] + k + 1] = T[0, start[r] + k] * (1.0 - qd.tanh(c[r] * T[0, start[r] + k]))

    return {"copy": copy_of_loop_var, "base": base_plus_loop_var, "flat": flat_layout, "inline": inline_base}


def _scan_fields(kind: str) -> tuple:
    width = K + 1 if kind == "copy" else 2 * (K + 1)
    T = qd.field(qd.f64, shape=(R, width), needs_grad=True)
    c = qd.field(qd.f64, shape=R, needs_grad=True)
    start = qd.field(qd.i32, shape=R)
    start.from_numpy(np.array([0, K + 1], dtype=np.int32))
    return T, c, start, width


def _scan_numpy(kind: str, t0: np.ndarray, c: np.ndarray) -> np.ndarray:
    t = t0.copy()
    for r in range(R):
        for k in range(K):
            if kind == "copy":
                t[r, k + 1] = np.sin(t[r, k]) * c[r]
            else:
                s = r * (K + 1) + k
                t[0, s + 1] = t[0, s] * (1.0 - np.tanh(c[r] * t[0, s]))
    return t


@pytest.mark.parametrize("kind", ["copy", "base", "inline", "flat"])
def test_a_scan_through_a_copy_of_the_loop_variable_or_a_per_ray_base(arch: object, kind: str) -> None:
    """`T[s + 1] = f(T[s])` along a serial loop with `s = k`, or `s = start[r] + k` (a base invariant in the loop,
    read from data computed from the parallel variable: each ray's own samples; written in the index or through a
    local), or `r * (K + 1) + k` (rays K + 1 cells apart). Every cell is written one iteration before it is read and never after, so `kernel.grad` after
    the forward launch runs; the gradient of the sum of the last samples matches finite differences of the numpy
    scan."""
    T, c, start, width = _scan_fields(kind)
    kern = _scan_kernels(T, c, start)[kind]
    t0 = np.zeros((R, width))
    t0[:, 0] = [0.7, 0.4]
    if kind != "copy":
        t0[0, K + 1] = 0.9
    cs = np.array([1.3, 0.8])
    last = [(r, K) for r in range(R)] if kind == "copy" else [(0, K), (0, 2 * K + 1)]

    T.from_numpy(t0)
    c.from_numpy(cs)
    kern()
    np.testing.assert_allclose(T.to_numpy(), _scan_numpy(kind, t0, cs), rtol=1e-12)
    seed = np.zeros((R, width))
    for cell in last:
        seed[cell] = 1.0
    T.grad.from_numpy(seed)
    c.grad.fill(0)
    kern.grad()

    def total(t_init: np.ndarray, cv: np.ndarray) -> float:
        out = _scan_numpy(kind, t_init, cv)
        return float(sum(out[cell] for cell in last))

    starts = [(r, 0) for r in range(R)] if kind == "copy" else [(0, 0), (0, K + 1)]
    want_t = central(lambda a: total(_with(t0, starts, a), cs), np.array([t0[s] for s in starts]))
    np.testing.assert_allclose([T.grad[s] for s in starts], want_t, rtol=1e-6)
    np.testing.assert_allclose(c.grad.to_numpy(), central(lambda a: total(t0, a), cs), rtol=1e-6)


def _with(t0: np.ndarray, cells: list, values: np.ndarray) -> np.ndarray:
    t = t0.copy()
    for cell, val in zip(cells, values):
        t[cell] = val
    return t


@pytest.mark.parametrize("shape", ["behind", "moving-base", "shared-by-iterations", "overlapping-rays"])
def test_scans_whose_replay_is_stale_are_still_refused(arch: object, shape: str) -> None:
    """Neighbours of the accepted scans that the replay would get wrong: the write runs behind the read
    (`T[s] = f(T[s + 1])`: iteration k + 1 overwrites what k read); a base that changes along the loop
    (`s = idx[k]`, idx = [1, 0]: k = 1 overwrites the cell k = 0 read); cells no parallel iteration owns (every
    r scans the same T[k]; rays K cells apart, so ray r + 1 starts from the cell ray r writes last)."""
    T = qd.field(qd.f64, shape=(R, 2 * K + 2), needs_grad=True)
    c = qd.field(qd.f64, shape=R, needs_grad=True)
    idx = qd.field(qd.i32, shape=K)
    idx.from_numpy(np.array([1, 0, 2], dtype=np.int32))
    T.from_numpy(np.full((R, 2 * K + 2), 0.5))
    c.from_numpy(np.array([1.3, 0.8]))

    @qd.kernel
    def behind():
        for r in range(R):
            for k in range(K):
                s = k
                T[r, s] = qd.sin(T[r, s + 1]) * c[r]

    @qd.kernel
    def moving_base():
        for r in range(R):
            for k in range(K):
                s = idx[k]
                T[r, s + 1] = qd.sin(T[r, s]) * c[r]

    @qd.kernel
    def shared_by_iterations():
        for r in range(R):
            for k in range(K):
                T[0, k + 1] = qd.sin(T[0, k]) * c[r]

    @qd.kernel
    def overlapping_rays():
        for r in range(R):
            for k in range(K):
                T[0, r * K + k + 1] = qd.sin(T[0, r * K + k]) * c[r]

    kern = {"behind": behind, "moving-base": moving_base, "shared-by-iterations": shared_by_iterations,
            "overlapping-rays": overlapping_rays}[shape]
    kern()
    refusal = "`T` is read here and written by the same kernel|Cross-iteration read-after-write"
    with pytest.raises(qd.QuadrantsCompilationError, match=refusal):
        kern.grad()


def test_a_parallel_loop_reading_another_iterations_cell_through_a_local_is_refused(arch: object) -> None:
    """`s = i; y[s] = y[s - 1] * x[i]` in a parallel loop: iteration i reads what iteration i - 1 writes, whatever
    the order they run in (Quadrants' cross-iteration read-after-write). The local no longer hides it."""
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=5, needs_grad=True)

    @qd.kernel
    def chain():
        for i in range(1, 5):
            s = i
            y[s] = y[s - 1] * x[i - 1]

    with pytest.raises(qd.QuadrantsCompilationError, match="Cross-iteration read-after-write|`y` is read here"):
        chain.grad()


def test_spring_scatters_through_data_indices_and_time_offset_reads_run(arch: object) -> None:
    """difftaichi mass_spring.py's `apply_spring_force(t)` (vector `atomic_add(v_inc[t + 1, a], ...)` to both
    anchors a, b read from data into locals) and wave.py's `fdtd(t)` (writes `p[t, i]`, reads `p[t - 1, i + 1]` and
    `p[t - 2, i]` through a func taking the step): seeing indices through locals refused both once; neither reads
    a cell another iteration of the same loop writes (an atomic's unused old value is no read; steps t - 1 and t
    never meet), and their gradients are checked against central differences."""
    n_s, n_o, T = 3, 3, 4
    anchor_a = qd.field(qd.i32, shape=n_s)
    anchor_b = qd.field(qd.i32, shape=n_s)
    x = qd.Vector.field(2, qd.f64, shape=(T, n_o), needs_grad=True)
    v_inc = qd.Vector.field(2, qd.f64, shape=(T, n_o), needs_grad=True)
    p = qd.field(qd.f64, shape=(T, 6), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.func
    def at(t: qd.i32, i: qd.i32) -> qd.f64:
        return p[t, i]

    @qd.kernel
    def springs(t: qd.i32):
        for i in range(n_s):
            a = anchor_a[i]
            b = anchor_b[i]
            d = x[t, a] - x[t, b]
            qd.atomic_add(v_inc[t + 1, a], -0.5 * d)
            qd.atomic_add(v_inc[t + 1, b], 0.5 * d)

    @qd.kernel
    def fdtd(t: qd.i32):
        for i in range(5):
            p[t, i] = 2.0 * at(t - 1, i) - at(t - 2, i) + 0.1 * (at(t - 1, i + 1) - at(t - 1, i))

    @qd.kernel
    def total():
        for i in range(n_o):
            loss[None] += v_inc[2, i].dot(v_inc[2, i]) + v_inc[1, i][0]
        for i in range(6):
            loss[None] += p[3, i] * p[3, i]

    anchor_a.from_numpy(np.array([0, 1, 2], np.int32))
    anchor_b.from_numpy(np.array([1, 2, 0], np.int32))
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal((T, n_o, 2))
    p0 = rng.standard_normal((T, 6))

    def run(xv: np.ndarray, pv: np.ndarray) -> float:
        x.from_numpy(xv)
        p.from_numpy(pv)
        v_inc.fill(0)
        loss[None] = 0.0
        for t in (0, 1):
            springs(t)
        for t in (2, 3):
            fdtd(t)
        total()
        return loss[None]

    run(x0, p0)
    loss.grad[None] = 1.0
    total.grad()
    for t in (3, 2):
        fdtd.grad(t)
    for t in (1, 0):
        springs.grad(t)
    gx, gp = x.grad.to_numpy(), p.grad.to_numpy()
    np.testing.assert_allclose(gx, central(lambda xv: run(xv, p0), x0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gp[:2], central(lambda pv: run(x0, pv), p0)[:2], rtol=1e-6, atol=1e-8)
