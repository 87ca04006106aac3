"""Kernel-scope locals updated inside parallel loops (issue 16): reductions, not races.

The corpus (`tests/corpus/locals.py`) checks the values on every tier; this file checks the rules
around them: which updates are atomic, what the IR looks like, the warning for a racy read-modify-write,
and what autodiff does with such a local (forward mode reduces the tangent; reverse mode refuses with
a message instead of dropping the gradient).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import qd
from qd import ir
from qd.errors import QuadrantsCompilationError, QuadrantsWarning
from qd.frontend.kernel import build_kernel_ir
from qd.ir_parse import parse_kernel
from qd.ir_text import print_kernel
from qd.ops import Op
from qd.passes.offload import offload

N = 20_000


def test_issue_kernel_exact_every_launch(arch) -> None:
    a = np.arange(N, dtype=np.int32) % 97

    @qd.kernel
    def total(a: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    assert {total(a) for _ in range(20)} == {int(a.sum())}


@pytest.mark.parametrize("dt", ["i32", "i64", "f32", "f64"])
def test_sub_and_mul(arch, dt: str) -> None:
    qdt = getattr(qd, dt)
    out = qd.field(qdt, shape=2)

    @qd.kernel
    def k(n: qd.i32):
        s = qdt(100)
        p = qdt(1)
        for i in range(n):
            s -= 2
            if i % 1000 == 0:
                p *= 2
        out[0] = s
        out[1] = p

    k(N)
    np.testing.assert_array_equal(out.to_numpy(), np.array([100 - 2 * N, 2 ** (N // 1000)], dtype=out.to_numpy().dtype))


def test_atomic_mul_builtin_on_field_and_local(arch) -> None:
    """`qd.atomic_mul` (Quadrants has it) on a field cell and on a kernel-scope local; ints wrap."""
    f = qd.field(qd.i32, shape=())
    out = qd.field(qd.i32, shape=())

    @qd.kernel
    def k(n: qd.i32):
        p = 1
        for i in range(n):
            qd.atomic_mul(f[None], 3)
            qd.atomic_mul(p, 3)
        out[None] = p

    f[None] = 1
    k(40)
    want = np.int32(np.uint32(pow(3, 40, 1 << 32)).view(np.int32))
    assert f[None] == want and out[None] == want


def test_ir_has_local_atomic_and_round_trips(qd_program) -> None:
    """The frontend emits `local_atomic` for the shared local only (the private one stays a plain add);
    offload turns it into an atomic on the local's temp slot; the IR text round-trips."""

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            t = 0
            t += a[i]
            s += t
        return s

    k_ir, _ = build_kernel_ir(k, [np.zeros(4, np.int32)])
    text = print_kernel(k_ir)
    assert text.count("local_atomic add") == 1, text
    assert print_kernel(parse_kernel(text)) == text
    tasks = offload(k_ir).tasks
    atomics = [s for t in tasks for s in ir.walk(t.body) if isinstance(s, ir.AtomicRMW)]
    assert len(atomics) == 1 and atomics[0].op is Op.ADD


def test_racy_read_modify_write_warns_once(qd_program) -> None:
    """`s = s + a[i]` and `if a[i] > m: m = a[i]` race, as in Quadrants; qd says so at compile time."""

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        m = 0
        flag = 0
        for i in range(a.shape[0]):
            s = s + a[i]
            if a[i] > m:
                m = a[i]
            flag = 1  # a plain store: every writer writes the same value, no warning
        return s + m + flag

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k(np.arange(8, dtype=np.int32))
    races = [w for w in got if issubclass(w.category, QuadrantsWarning) and "race" in str(w.message)]
    names = sorted(str(w.message).split("'")[1] for w in races)
    assert names == ["m", "s"], [str(w.message) for w in races]
    assert all(w.filename == __file__ for w in races)


def test_augmented_assignment_does_not_warn(qd_program) -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            s += a[i]
            qd.atomic_max(s, 0)
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadrantsWarning)
        assert k(np.arange(8, dtype=np.int32)) == 28


def test_serial_top_level_loop_is_not_atomic(qd_program) -> None:
    """A top-level loop serialised by `qd.loop_config(serialize=True)` runs in order: `s = s * 2 + 1`
    is exact and gets no warning (one thread)."""

    @qd.kernel
    def k(n: qd.i32) -> qd.i64:
        s = qd.i64(0)
        qd.loop_config(serialize=True)
        for i in range(n):
            s = s * 2 + 1
        return s

    with warnings.catch_warnings():
        warnings.simplefilter("error", QuadrantsWarning)
        assert k(20) == (1 << 20) - 1


def test_reverse_mode_refuses_reduced_local(arch) -> None:
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        s = 0.0
        for i in x:
            s += x[i] * x[i]
        loss[None] = s

    x.from_numpy(np.arange(8, dtype=np.float32))
    k()
    assert loss[None] == pytest.approx(float((np.arange(8) ** 2).sum()))
    with pytest.raises(QuadrantsCompilationError, match="reduced by the parallel loop"):
        k.grad()


def test_reverse_mode_int_counter_is_fine(arch) -> None:
    """An integer counter reduced in the loop carries no gradient: reverse mode differentiates the rest."""
    x = qd.field(qd.f32, shape=16, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    count = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        c = 0
        for i in x:
            c += 1
            loss[None] += 3.0 * x[i]
        count[None] = c

    x.from_numpy(np.ones(16, np.float32))
    with qd.ad.Tape(loss=loss):
        k()
    assert count[None] == 16
    np.testing.assert_array_equal(x.grad.to_numpy(), np.full(16, 3.0, np.float32))


def test_forward_mode_reduces_the_tangent(arch) -> None:
    x = qd.field(qd.f64, shape=64, needs_dual=True)
    out = qd.field(qd.f64, shape=(), needs_dual=True)

    @qd.kernel
    def k():
        s = qd.f64(0.0)
        for i in x:
            s += x[i] * x[i]
            s -= x[i]
        out[None] = s

    xs = np.linspace(-1, 1, 64)
    x.from_numpy(xs)
    seed = np.linspace(0.5, 2, 64)
    with qd.ad.FwdMode(loss=out, param=x, seed=list(seed)):
        k()
    assert out[None] == pytest.approx(float((xs * xs - xs).sum()))
    assert out.dual[None] == pytest.approx(float(((2 * xs - 1) * seed).sum()))
