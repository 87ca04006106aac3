"""Reverse mode through dynamic loops: adstacks sized at every launch (`qd/ad/reverse.py`,
`qd/ad/sizing.py`, `qd/ad/adstack.py`, `qd/runtime/adstack_heap.py`, `qd/_sizer.pyx`).

Gradients are checked against central finite differences in float64 and, where the kernel allows,
against forward mode; every test runs on every available tier."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsCompilationError, QuadrantsRuntimeError

N = 6
XS = np.linspace(0.2, 1.1, N)
COUNTS = np.array([0, 1, 2, 3, 5, 9], dtype=np.int32)


def _loss_of(run: Callable[[], None], loss: Any) -> float:
    loss[None] = 0.0
    run()
    return float(loss[None])


def check_grad(run: Callable[[], None], grad: Callable[[], None], x: Any, loss: Any, xs: np.ndarray,
               rtol: float = 1e-6, h: float = 1e-6) -> np.ndarray:
    """kernel.grad's gradient of `loss` w.r.t. `x` (at `xs`) against central differences."""
    x.from_numpy(xs)
    _loss_of(run, loss)
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    grad()
    got = x.grad.to_numpy().copy()
    fd = np.zeros_like(xs)
    for e in np.ndindex(xs.shape):
        for sign in (1, -1):
            xp = xs.copy()
            xp[e] += sign * h
            x.from_numpy(xp)
            fd[e] += sign * _loss_of(run, loss) / (2 * h)
    x.from_numpy(xs)
    np.testing.assert_allclose(got, fd, rtol=rtol, atol=1e-7)
    return got


def _fields(shape: tuple = (N,)) -> tuple[Any, Any]:
    x = qd.field(qd.f64, shape=shape, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    return x, loss


def test_loop_bound_from_a_field(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = 0.95 * v + 0.1 * qd.sin(v)
            loss[None] += v * v

    got = check_grad(k, k.grad, x, loss, XS)
    ref = []
    for x0, n in zip(XS, COUNTS):  # closed form: chain rule along the recurrence
        v, d = x0, 1.0
        for _ in range(n):
            d *= 0.95 + 0.1 * np.cos(v)
            v = 0.95 * v + 0.1 * np.sin(v)
        ref.append(2 * v * d)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_bounds_from_scalar_arguments_and_begin_end(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(lo: qd.i32, hi: qd.i32):
        for i in x:
            v = x[i]
            for j in range(lo, hi):
                v = v * qd.cos(v * 0.1 * j) + 0.01 * j
            loss[None] += v

    check_grad(lambda: k(2, 7), lambda: k.grad(2, 7), x, loss, XS)
    check_grad(lambda: k(5, 3), lambda: k.grad(5, 3), x, loss, XS)  # empty range: d loss / dx = 1


def test_ndarray_argument_bounds_and_shape(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            v = x[i]
            for _ in range(a[i] + 1):
                v = qd.sqrt(v * v + 1.0)
            loss[None] += v

    a = qd.ndarray(qd.i32, shape=(N,))
    a.from_numpy(COUNTS)
    check_grad(lambda: k(a), lambda: k.grad(a), x, loss, XS)


def test_nested_loops_inner_bound_from_outer_index(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(a[i]):
                for m in range(j):
                    v = qd.sin(v) + 0.1 * m
                v = v * 1.01
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS)


def test_sibling_loops_and_if_inside_a_loop(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            w = x[i] * 0.0  # f64 (a literal 0.0 would make an f32 local, as in Quadrants)
            for j in range(a[i]):
                if v > 0.6:
                    v = v * v * 0.9
                else:
                    v = qd.exp(v) * 0.5
                w += v * j
            for _ in range(a[i] // 2):
                v = v * qd.tanh(w)
            loss[None] += v + w

    check_grad(k, k.grad, x, loss, XS)


def test_loop_inside_a_runtime_if(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            if x[i] > 0.5:
                for _ in range(a[i]):
                    v = qd.log(1.0 + v * v)
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS)


def test_loop_carried_int_used_as_an_index(arch: object) -> None:
    x, loss = _fields()
    w = qd.field(qd.f64, shape=4, needs_grad=True)
    w.from_numpy(np.array([0.9, 1.1, 0.7, 1.3]))

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            v = x[i]
            idx = i % 4
            for _ in range(n):
                v = qd.sin(v * w[idx])
                idx = (idx + 3) % 4
            loss[None] += v

    check_grad(lambda: k(7), lambda: k.grad(7), x, loss, XS)
    check_grad(lambda: k(7), lambda: k.grad(7), w, loss, np.array([0.9, 1.1, 0.7, 1.3]))


def test_vectors_carried_through_a_loop(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            p = qd.Vector([x[i], 1.0 - x[i]])
            for _ in range(n):
                p = qd.Vector([p[0] * qd.cos(p[1]), p[1] + 0.1 * p[0] * p[0]])
            loss[None] += p.norm()

    check_grad(lambda: k(5), lambda: k.grad(5), x, loss, XS)


@qd.func
def _relax(v, n):
    for _ in range(n):
        v = v - 0.1 * (v * v * v - 1.0)
    return v


def test_func_wrapped_loop_and_ndrange_outer_loop(arch: object) -> None:
    x, loss = _fields((2, 3))
    a = qd.field(qd.i32, shape=(2, 3))
    a.from_numpy(COUNTS.reshape(2, 3))

    @qd.kernel
    def k():
        for i, j in qd.ndrange(2, 3):
            loss[None] += _relax(x[i, j], a[i, j])

    check_grad(k, k.grad, x, loss, XS.reshape(2, 3))


def test_struct_for_over_a_2d_field(arch: object) -> None:
    x, loss = _fields((2, 3))
    a = qd.field(qd.i32, shape=(2, 3))
    a.from_numpy(COUNTS.reshape(2, 3)[::-1].copy())

    @qd.kernel
    def k():
        for i, j in x:
            v = x[i, j]
            for _ in range(a[i, j] + i):
                v = qd.atan2(v, 1.5) + v
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS.reshape(2, 3))


def test_reverse_agrees_with_forward_mode(arch: object) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True, needs_dual=True)
    y = qd.field(qd.f64, shape=N, needs_grad=True, needs_dual=True)
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(a[i]):
                v = v * qd.sin(v + j)
            y[i] = v

    rng = np.random.default_rng(3)
    t, c = rng.standard_normal(N), rng.standard_normal(N)
    x.from_numpy(XS)
    with qd.ad.FwdMode(loss=y, param=x, seed=list(t)):
        k()
    jt = y.dual.to_numpy()
    y.grad.from_numpy(c)
    x.grad.fill(0.0)
    k.grad()
    np.testing.assert_allclose(t @ x.grad.to_numpy(), jt @ c, rtol=1e-10)


def test_tape_and_f32(arch: object) -> None:
    x = qd.field(qd.f32, shape=N, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)
    x.from_numpy(XS.astype(np.float32))

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = 0.95 * v + 0.1 * qd.sin(v)
            loss[None] += v

    with qd.ad.Tape(loss=loss):
        k()
    ref = []
    for x0, n in zip(XS, COUNTS):
        v, d = x0, 1.0
        for _ in range(n):
            d *= 0.95 + 0.1 * np.cos(v)
            v = 0.95 * v + 0.1 * np.sin(v)
        ref.append(d)
    np.testing.assert_allclose(x.grad.to_numpy(), ref, rtol=1e-5)


# ------------------------------------------------------------------ sizing, overflow, errors


def _recurrence(x: Any, loss: Any, a: Any) -> Any:
    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            loss[None] += v

    return k


def test_sizes_follow_live_data_and_are_reused_when_unchanged(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)
    k = _recurrence(x, loss, a)
    check_grad(k, k.grad, x, loss, XS)
    inst = next(iter(v for key, v in k._instances.items() if "grad" in key))
    plan = inst[0].adstack
    runs = plan.sizing_runs
    assert plan.sizes == [int(COUNTS.max())]
    k.grad()
    assert plan.sizing_runs == runs  # nothing changed: no sizing work
    a.from_numpy(COUNTS * 3)  # a host write bumps the generation: sized again, and larger
    check_grad(k, k.grad, x, loss, XS)
    assert plan.sizes == [int(COUNTS.max()) * 3]
    assert plan.sizing_runs > runs


def test_overflow_with_a_forced_size_raises_and_resets(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)
    k = _recurrence(x, loss, a)
    x.from_numpy(XS)
    k()
    qd.cfg.ad_stack_size = 4
    with pytest.raises(QuadrantsAssertionError, match=r"^Adstack overflow: kernel k") as e:
        k.grad()
        qd.sync()  # GPU archs raise a kernel's errors at the next sync
    msg = str(e.value)
    assert "4 slots" in msg and "re-computed" in msg and f"is {COUNTS.max()}" in msg and "ad_stack_size" in msg
    qd.cfg.ad_stack_size = 0  # the flag was reset: the next launch runs cleanly
    check_grad(k, k.grad, x, loss, XS)


def test_forced_size_large_enough_matches_exact_sizing(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)
    k = _recurrence(x, loss, a)
    exact = check_grad(k, k.grad, x, loss, XS)
    qd.cfg.ad_stack_size = 64
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), exact)


def test_unboundable_loop_is_a_compile_error_naming_the_line(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(qd.cast(x[i] * 10.0, qd.i32)):
                v = qd.sin(v)
            loss[None] += v

    k()
    with pytest.raises(QuadrantsCompilationError, match="Cannot size the adstack") as e:
        k.grad()
    assert "for _ in range(qd.cast(x[i] * 10.0, qd.i32)):" in str(e.value)
    assert "ad_stack_size" in str(e.value)


def test_guard_on_serial_max_over_range(arch: object) -> None:
    x, loss = _fields((4,))

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i8, ndim=1)):
        for i in range(a.shape[0]):
            for j in range(a[i]):  # triangular: the inner size follows i, outside the parallel grammar
                v = x[j % 4]
                for _ in range(a[j]):
                    v = qd.sin(v)
                loss[None] += v

    a = np.zeros((1 << 24) + 1, dtype=np.int8)
    with pytest.raises(RuntimeError, match="exceeds the 16777216 guard"):
        k.grad(a)


def test_guard_bounds_the_whole_walk_of_a_triangular_nest(arch: object) -> None:
    """Each range of a triangular nest is far below the guard, their total is not: the sizer raises before
    walking past the guard (it would walk n^2 / 2 = 2 * 10^8 iterations), naming the kernel and the loop."""
    x, loss = _fields((4,))

    @qd.kernel
    def triangle(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            for j in range(a[i]):
                v = x[j % 4]
                for _ in range(a[j]):  # the inner stack's size: max over i, then over j < a[i], of a[j]
                    v = qd.sin(v)
                loss[None] += v

    line = triangle.fn.__code__.co_firstlineno + 5
    small = np.arange(200, dtype=np.int32) % 7  # within the guard: sized exactly
    triangle(small)
    loss.grad[None] = 1.0
    triangle.grad(small)
    plan = next(v for key, v in triangle._instances.items() if "grad" in key)[0].adstack
    assert plan.sizes == [max(int(small[j]) for i in range(200) for j in range(small[i]))]
    with pytest.raises(QuadrantsRuntimeError, match="exceeds the 16777216 guard") as e:
        triangle.grad(np.arange(20000, dtype=np.int32))
    msg = str(e.value)
    assert "kernel triangle" in msg and f"{__file__}:{line}" in msg and "ad_stack_size" in msg


def test_value_crossing_into_a_parallel_loop_is_refused(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        s = x[0] * 2.0
        for i in x:
            loss[None] += s * x[i]

    with pytest.raises(QuadrantsCompilationError, match="outside the parallel loop"):
        k.grad()


def test_parallel_cross_iteration_read_after_write_is_refused(arch: object) -> None:
    x = qd.field(qd.f32, shape=(), needs_grad=True)
    out = qd.field(qd.f32, shape=4, needs_grad=True)

    @qd.kernel
    def k():
        for i in range(4):
            if i == 0:
                out[i] = x[None]
            else:
                out[i] = out[i - 1] + x[None]

    with pytest.raises(QuadrantsCompilationError, match="Cross-iteration read-after-write"):
        k.grad()


def test_serial_cross_iteration_through_a_global_is_differentiated(arch: object) -> None:
    x = qd.field(qd.f64, shape=(), needs_grad=True)
    out = qd.field(qd.f64, shape=5, needs_grad=True)

    @qd.kernel
    def k(n: qd.i32):
        for _ in range(1):
            for i in range(n):
                if i == 0:
                    out[i] = x[None] * x[None]
                else:
                    out[i] = out[i - 1] * 0.5 + x[None]

    x[None] = 1.5
    k(5)
    out.grad[4] = 1.0
    k.grad(5)
    # out[4] = x^2/16 + x (1/8 + 1/4 + 1/2 + 1): d/dx = x/8 + 1.875
    assert x.grad[None] == pytest.approx(1.5 / 8 + 1.875, rel=1e-12)
    assert out.grad[4] == 0.0  # the overwritten cell's grad is consumed and cleared, as in Quadrants


def test_loop_index_can_be_rebound(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            i = qd.cast(i, qd.i32)  # noqa: PLW2901 - rebinding a loop index is allowed, as in Quadrants
            v = x[i]
            for _ in range(n):
                v = qd.sin(v)
            loss[None] += v

    check_grad(lambda: k(3), lambda: k.grad(3), x, loss, XS)


def test_without_adstack_every_non_static_inner_range_raises(arch: object) -> None:
    qd.cfg.ad_stack_experimental_enabled = False
    x, loss = _fields()

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(3):  # constant, but not qd.static: Quadrants refuses it too
                v = v * 0.95 + 0.01
            for _ in qd.static(range(2)):
                v = v * v
            loss[None] += v

    k()
    with pytest.raises(QuadrantsCompilationError, match="Cannot use non static range in Backwards mode"):
        k.grad()


@pytest.mark.archs("interp", "cpu", "cuda")  # (where to_torch(copy=False) shares the data)
def test_shared_torch_view_makes_the_sizer_reread_every_launch(arch: object) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed")
    del torch
    x, loss = _fields((1,))
    n = qd.ndarray(qd.i32, shape=(1,))
    n[0] = 2

    @qd.kernel
    def k(n: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(n[0]):
                v = qd.sin(v)
            loss[None] += v

    check_grad(lambda: k(n), lambda: k.grad(n), x, loss, np.array([0.4]))
    view = n.to_torch(copy=False)
    view[0] = 40  # no qd write path sees this: the sizer must not trust its cache for n any more
    check_grad(lambda: k(n), lambda: k.grad(n), x, loss, np.array([0.4]))


# ------------------------------------------------------------------ while loops (sized by a counting replay)


def _while_reference(x0: float, lim: float) -> tuple[float, float]:
    v, d = x0, 1.0
    while v < lim:
        d *= 1.5 + 0.1 * np.cos(v)
        v = v * 1.5 + 0.1 * np.sin(v)
    return v, d


def test_while_loop_gradient_and_counted_sizes(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(lim: qd.f64):
        for i in x:
            v = x[i]
            while v < lim:
                v = v * 1.5 + 0.1 * qd.sin(v)
            loss[None] += v

    got = check_grad(lambda: k(10.0), lambda: k.grad(10.0), x, loss, XS)
    np.testing.assert_allclose(got, [_while_reference(x0, 10.0)[1] for x0 in XS], rtol=1e-12)
    plan = next(v for key, v in k._instances.items() if "grad" in key)[0].adstack
    trips = max(int(np.ceil(np.log(10.0 / x0) / np.log(1.5))) for x0 in XS)
    assert plan.sizes[0] >= 1 and abs(plan.sizes[0] - trips) <= 1  # the largest run, counted
    check_grad(lambda: k(1000.0), lambda: k.grad(1000.0), x, loss, XS)  # more iterations: counted again
    assert plan.sizes[0] > trips


def test_while_inside_a_dynamic_for_with_an_if(arch: object) -> None:
    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(a[i]):
                w = v + 0.1 * j
                while w < 3.0:
                    if w > 1.0:
                        w = w * 1.3
                    else:
                        w = w + 0.7 * qd.cos(w)
                v = 0.5 * v + 0.1 * w
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS, rtol=1e-5)


def test_while_with_an_int_counter_and_forced_size_overflow(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            n = 0
            while n < 5 + i:
                v = qd.sin(v) + 0.3 * v
                n += 1
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS)
    qd.cfg.ad_stack_size = 3
    with pytest.raises(QuadrantsAssertionError, match=r"^Adstack overflow: kernel k"):
        k.grad()
        qd.sync()  # GPU archs raise a kernel's errors at the next sync


def test_while_with_break_in_its_body_is_refused(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            while v < 10.0:
                v = v * 1.5
                if v > 5.0:
                    break
            loss[None] += v

    with pytest.raises(QuadrantsCompilationError, match="only `while <condition>:` loops"):
        k.grad()


def test_sibling_components_of_one_iteration_are_not_cross_iteration(arch: object) -> None:
    x = qd.field(qd.f64, shape=(), needs_grad=True)
    out = qd.field(qd.f64, shape=(4, 2), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(4):
            out[i, 1] = x[None]
            out[i, 0] = out[i, 1] * 2.0

    x[None] = 1.0
    k()
    out.grad.from_numpy(np.array([[1.0, 0.0]] * 4))
    k.grad()
    assert x.grad[None] == pytest.approx(8.0, rel=1e-12)


def test_block_local_hint_is_accepted_and_checked(arch: object) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        qd.block_local(x)
        for i in x:
            loss[None] += x[i] * x[i]

    x.from_numpy(XS)
    k()
    assert loss[None] == pytest.approx(float(np.sum(XS * XS)), rel=1e-12)

    @qd.kernel
    def bad():
        qd.block_local(3)

    with pytest.raises(Exception, match="block_local takes fields"):
        bad()


def test_grad_accumulation_owned_and_shared_cells(arch: object) -> None:
    """`x.grad[i]` touched only by iteration i is updated without atomics; a buffer reached at two
    indices (`x[i]`, `x[i - 1]`) keeps them: both must be exact over many threads' iterations."""
    n = 1 << 16
    x = qd.field(qd.f64, shape=n, needs_grad=True)
    y = qd.field(qd.f64, shape=n, needs_grad=True)
    xs = np.random.default_rng(5).uniform(0.5, 1.5, n)
    x.from_numpy(xs)

    @qd.kernel
    def owned():
        for i in x:
            y[i] = x[i] * x[i] + qd.sin(x[i])

    @qd.kernel
    def shared():
        for i in range(1, n):
            y[i] = x[i] * x[i - 1]

    y.grad.fill(1.0)
    owned.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs + np.cos(xs), rtol=1e-14)
    x.grad.fill(0.0)
    y.grad.fill(1.0)
    shared.grad()
    want = np.zeros(n)
    want[1:] += xs[:-1]
    want[:-1] += xs[1:]
    np.testing.assert_allclose(x.grad.to_numpy(), want, rtol=1e-14)


def test_heap_layouts_give_every_slot_its_own_word(qd_program: object) -> None:
    """`AdStackPlan.meta_for`: per thread slices (CPU tiers) and interleaved rows (GPU tiers) both map every
    (thread, stack, slot) to its own heap word inside the heap; interleaved, a slot's threads are adjacent."""
    from qd.ad.adstack import META_WORDS

    x, loss = _fields()
    a = qd.field(qd.i32, shape=N)
    b = qd.field(qd.i32, shape=N)
    a.from_numpy(COUNTS)
    b.from_numpy(COUNTS[::-1].copy())

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            w = v
            for _ in range(b[i]):
                w = w * 0.5 + qd.cos(w)
            loss[None] += w

    check_grad(k, k.grad, x, loss, XS)
    plan = next(ck.adstack for key, (ck, _) in k._instances.items() if "grad" in key)
    sizes = [3, 5] + [2] * (len(plan.k.stacks) - 2)
    for rows in (0, 7):
        meta, stride = plan.meta_for(sizes, rows)
        threads = rows or 4
        seen: set = set()
        for t in range(threads):
            for s, st in enumerate(plan.k.stacks):
                cap, off, tstride, step = (int(meta[s * META_WORDS + w]) for w in range(META_WORDS))
                assert cap == sizes[s]
                for c in range(cap):
                    addr = (st.dtype, t * tstride + off + c * step)
                    assert addr not in seen and 0 <= addr[1] < threads * stride[st.dtype]
                    seen.add(addr)
        if rows:
            assert int(meta[2]) == 1 and int(meta[3]) == rows  # thread t+1 is the next word
