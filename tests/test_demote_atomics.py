"""Atomic demotion (`qd/passes/demote.py`, issue 31): an atomic update of a field that a range task reaches only at
its own cell becomes a load, the op and a store; any other atomic stays one. Results against numpy on every tier."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd import ir


def _atomics(kernel) -> int:
    return sum(isinstance(s, ir.AtomicRMW) for t in kernel._last_ck.ir.tasks for b in (t.prologue, t.body)
               for s in ir.walk(b))


def test_an_owned_accumulator_is_demoted_and_sums_right(arch):
    """Taichi's nbody force loop: `force[i] += f` in a serial inner loop (a vector field: both components)."""
    n = 96
    pos = qd.Vector.field(2, qd.f32, n)
    force = qd.Vector.field(2, qd.f32, n)
    hits = qd.field(qd.i32, n)

    @qd.kernel
    def compute():
        for i in range(n):
            p = pos[i]
            for j in range(n):
                if i != j:
                    d = p - pos[j]
                    force[i] += d / (d.norm(1e-5) ** 3)
                    hits[i] += 1
                    hits[i] = qd.max(hits[i], 0)

    rng = np.random.default_rng(5)
    p = rng.random((n, 2)).astype(np.float32)
    pos.from_numpy(p)
    compute()
    assert _atomics(compute) == 0
    d = p[:, None, :].astype(np.float64) - p[None, :, :]
    r = np.sqrt((d ** 2).sum(-1) + 1e-5)  # (norm(eps): sqrt of the squared norm + eps)
    np.fill_diagonal(r, np.inf)
    np.testing.assert_allclose(force.to_numpy(), (d / r[..., None] ** 3).sum(1), rtol=2e-4)
    np.testing.assert_array_equal(hits.to_numpy(), np.full(n, n - 1))


@pytest.mark.parametrize("case", ["neighbour", "other_index", "ndarray", "float_max"])
def test_atomics_that_other_iterations_may_reach_stay_atomic(arch, case):
    n = 64
    acc = qd.field(qd.f32, n + 1)
    nd = qd.ndarray(qd.f32, (n + 1,))

    @qd.kernel
    def neighbour():
        for i in range(n):
            acc[i] += 1.0
            acc[i + 1] += 1.0

    @qd.kernel
    def other_index():
        for i in range(n):
            for j in range(n):
                acc[i] += 1.0
            acc[0] += 0.0 * acc[n - i]

    @qd.kernel
    def on_ndarray(a: qd.types.ndarray(qd.f32, 1)):
        for i in range(n):
            a[i] += 2.0

    @qd.kernel
    def float_max():
        for i in range(n):
            qd.atomic_max(acc[i], 3.0)

    if case == "neighbour":
        neighbour()
        want = np.r_[1.0, np.full(n - 1, 2.0), 1.0]
        got, kernel = acc.to_numpy(), neighbour
    elif case == "other_index":
        other_index()
        want = np.r_[np.full(n, float(n)), 0.0]
        got, kernel = acc.to_numpy(), other_index
    elif case == "ndarray":
        on_ndarray(nd)
        want = np.r_[np.full(n, 2.0), 0.0]
        got, kernel = nd.to_numpy(), on_ndarray
    else:
        float_max()
        want = np.r_[np.full(n, 3.0), 0.0]
        got, kernel = acc.to_numpy(), float_max
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert _atomics(kernel) > 0


def test_a_struct_for_over_a_2d_or_3d_field_owns_its_cells(arch):
    """stable_fluid's `vf[i, j] -= ...` over `for i, j in vf`: the frontend unflattens the loop variable into
    `v // 512, v % 512`, digits that tell iterations apart, so the update is demoted (it was an atomic per cell,
    2.5x Quadrants' time); also in 3-D and in a range loop that unflattens by hand."""
    a = qd.Vector.field(2, qd.f32, (6, 5))
    b = qd.field(qd.f32, (3, 4, 5))
    c = qd.field(qd.i32, (7, 4))
    p = qd.field(qd.f32, (6, 5))

    @qd.kernel
    def two():
        for i, j in a:
            a[i, j] -= 0.5 * qd.Vector([p[qd.min(i + 1, 5), j] - p[i, j], p[i, qd.max(j - 1, 0)] + 1.0])

    @qd.kernel
    def three():
        for i, j, k in b:
            b[i, j, k] += i * 100.0 + j * 10.0 + k

    @qd.kernel
    def by_hand():
        for v in range(28):
            c[v // 4, v % 4] += v

    rng = np.random.default_rng(3)
    pn = rng.random((6, 5)).astype(np.float32)
    p.from_numpy(pn)
    a.fill(1.0)
    two()
    three()
    by_hand()
    assert _atomics(two) == _atomics(three) == _atomics(by_hand) == 0
    want = np.ones((6, 5, 2), np.float32)
    want[..., 0] -= np.float32(0.5) * (pn[np.minimum(np.arange(6) + 1, 5)] - pn)
    want[..., 1] -= np.float32(0.5) * (pn[:, np.maximum(np.arange(5) - 1, 0)] + np.float32(1.0))
    np.testing.assert_allclose(a.to_numpy(), want, rtol=1e-6)
    i, j, k = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(b.to_numpy(), (i * 100.0 + j * 10.0 + k).astype(np.float32))
    np.testing.assert_array_equal(c.to_numpy(), np.arange(28).reshape(7, 4))


def test_cells_of_several_time_slices_and_argument_indices_are_owned(arch):
    """diffmpm's gradients: `v.grad[f, p]` with `f` an argument loaded at each use (loads of one argument are one
    index), and `F.grad[f, p]`, `F.grad[f + 1, p]` (the variable on one axis of every pointer: iterations differ
    there) are demoted; two argument indices that are equal at run time (`a[f, i]`, `a[g, i]`, f == g) still add
    up in program order."""
    n = 16
    a = qd.field(qd.f32, (3, n))

    @qd.kernel
    def slices(f: qd.i32, g: qd.i32):
        for i in range(n):
            a[f, i] += 1.0
            a[f + 1, i] += a[f, i] * 2.0
            a[g, i] += 10.0

    slices(0, 0)
    assert _atomics(slices) == 0
    want = np.zeros((3, n), np.float32)
    want[0] = 11.0  # a[0] += 1; a[1] += 1 * 2; a[0] += 10
    want[1] = 2.0
    np.testing.assert_array_equal(a.to_numpy(), want)
    slices(1, 2)
    want[1] += 1.0
    want[2] += want[1] * 2.0 + 10.0
    np.testing.assert_array_equal(a.to_numpy(), want)


@pytest.mark.parametrize("case", ["one_digit", "digits_of_different_values", "zero_divisor"])
def test_digits_that_do_not_tell_iterations_apart_stay_atomic(arch, case):
    """A remainder alone, a quotient and a remainder of different values (`v // 4`, `(v + 1) % 4`: kept atomic
    though it happens to be one to one), and a divisor that is not a positive constant: no demotion, and the sums of
    the iterations that meet in a cell are all there."""
    c = qd.field(qd.i32, (8, 4))

    @qd.kernel
    def one_digit():
        for v in range(32):
            c[0, v % 4] += 1

    @qd.kernel
    def different():
        for v in range(32):
            c[v // 4, (v + 1) % 4] += 1

    @qd.kernel
    def zero_divisor(s: qd.i32):
        for v in range(32):
            c[v // s, v % s] += 1

    want = np.zeros((8, 4), np.int32)
    if case == "one_digit":
        one_digit()
        kernel = one_digit
        want[0] = 8
    elif case == "digits_of_different_values":
        different()
        kernel = different
        want[:] = 1
    else:
        zero_divisor(0)  # `x // 0` and `x % 0` are 0: every iteration adds to c[0, 0]
        kernel = zero_divisor
        want[0, 0] = 32
    np.testing.assert_array_equal(c.to_numpy(), want)
    assert _atomics(kernel) > 0


def _stores_in_serial_loops(kernel) -> int:
    """Global stores and atomics inside serial loops of the instance's range tasks."""
    n = 0
    for t in kernel._last_ck.ir.tasks:
        for s in ir.walk(t.body):
            if isinstance(s, (ir.RangeFor, ir.While)):
                n += sum(isinstance(x, (ir.GlobalStore, ir.AtomicRMW)) for x in ir.walk(s.body))
    return n


def test_an_owned_cell_lives_in_a_local_across_its_loop(arch):
    """nbody's `force[i]` (both components) and a counter with a `break`: no store inside the loop, the same values
    as numpy; on CPU the loop then vectorizes (4x faster nbody, bench/RESULTS.md)."""
    n = 80
    pos = qd.Vector.field(2, qd.f32, n)
    force = qd.Vector.field(2, qd.f32, n)
    count = qd.field(qd.i32, n)

    @qd.kernel
    def compute(stop: qd.i32):
        for i in range(n):
            force[i] = [1.0, -1.0]  # before the loop: the local starts from it
            p = pos[i]
            for j in range(n):
                if j == stop:
                    break
                if i != j:
                    d = p - pos[j]
                    force[i] += d * 0.5
                    count[i] += 1
            force[i] *= 2.0  # after the loop: sees the loop's last value

    rng = np.random.default_rng(11)
    p = rng.random((n, 2)).astype(np.float32)
    pos.from_numpy(p)
    stop = 50
    compute(stop)
    assert _stores_in_serial_loops(compute) == 0
    d = (p[:, None, :] - p[None, :stop, :]) * 0.5
    d[np.arange(stop), np.arange(stop)] = 0
    want = (np.array([1.0, -1.0]) + d.sum(1)) * 2.0
    np.testing.assert_allclose(force.to_numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(count.to_numpy(), [stop - (i < stop) for i in range(n)])


@pytest.mark.parametrize("case", ["volatile", "other_cell"])
def test_a_cell_reached_otherwise_stays_in_memory(arch, case):
    """A volatile read of the cell in the loop (another thread may be meant to see it), or the field reached at
    another cell (not owned): the loop keeps its stores."""
    n = 32
    acc = qd.field(qd.f32, n + 1)
    seen = qd.field(qd.f32, n)

    @qd.kernel
    def volatile():
        for i in range(n):
            for j in range(4):
                acc[i] += 1.0
                seen[i] = qd.volatile_load(acc[i])

    @qd.kernel
    def other_cell():
        for i in range(n):
            for j in range(4):
                acc[i] += 1.0
            acc[n] = 0.0

    kernel = {"volatile": volatile, "other_cell": other_cell}[case]
    kernel()
    assert _stores_in_serial_loops(kernel) >= 1
    np.testing.assert_array_equal(acc.to_numpy()[:n], np.full(n, 4.0))
