"""Adstack behaviours that Quadrants pins (its test_adstack.py, test_ad_for.py, test_ad_for_fwd.py and the
loop parts of test_ad_ndarray.py), re-stated for qd: every loop whose reversal needs a stack has a
dynamic bound (a scalar argument, a field or ndarray read) or a constant bound above the unroll limit,
so the stacks are really exercised (DESIGN §5).

Values are checked against closed forms computed in float64 numpy, against float64 central differences
(`check_grad` from `test_adstack.py`), or, for forward mode, against reverse mode through the identity
<t, J^T c> = <J t, c>. Every test runs on every available tier."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Callable

import numpy as np
import pytest
from test_adstack import check_grad

import qd
from qd.errors import QuadrantsAssertionError
from tests.conftest import init_arch

# ------------------------------------------------------------------ 1. non-linear unary ops in dynamic loops

# name -> (d op / du as a numpy function, accumulator (step, offset), loop-carried (a, b), starting values).
# The accumulator operand x + j*step + offset crosses zero for abs/sin/cos (so the sign of the derivative
# changes from one iteration to the next) and stays inside the domain of the others; the loop-carried map
# v -> op(v)*a + b keeps v inside the domain for every trip count, and for abs/sin/cos drives it across 0.
_REAL = np.array([-0.35, 0.001, 0.15, 0.399])
_POS = np.array([0.001, 0.15, 0.26, 0.399])
_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], tuple[float, float], tuple[float, float], np.ndarray]] = {
    "sin": (np.cos, (0.3, -0.4), (1.3, -0.25), _REAL),
    "cos": (lambda u: -np.sin(u), (0.3, -0.4), (1.5, -1.2), _REAL),
    "abs": (np.sign, (0.3, -0.4), (0.9, -0.3), _REAL),
    "tanh": (lambda u: 1.0 - np.tanh(u) ** 2, (0.3, -0.4), (1.5, -0.2), _REAL),
    "exp": (np.exp, (0.3, -0.4), (0.3, -0.2), _REAL),
    "tan": (lambda u: 1.0 / np.cos(u) ** 2, (0.05, 0.0), (0.5, 0.1), _POS),
    "log": (lambda u: 1.0 / u, (0.05, 0.0), (0.1, 1.0), _POS),
    "sqrt": (lambda u: 0.5 / np.sqrt(u), (0.05, 0.0), (0.9, 0.05), _POS),
    "rsqrt": (lambda u: -0.5 * u ** -1.5, (0.05, 0.0), (0.3, 0.1), _POS),
    "asin": (lambda u: 1.0 / np.sqrt(1.0 - u * u), (0.05, 0.0), (0.5, 0.1), _POS),
    "acos": (lambda u: -1.0 / np.sqrt(1.0 - u * u), (0.05, 0.0), (0.4, -0.3), _POS),
}
_NP_OP = {"abs": np.abs, "rsqrt": lambda u: 1.0 / np.sqrt(u), "asin": np.arcsin, "acos": np.arccos}
_TRIPS = np.array([1, 3, 10], dtype=np.int32)  # per element: a single push, a few, many


def _counts(values: np.ndarray) -> Any:
    """An i32 field holding `values` (loop bounds read per element)."""
    a = qd.field(qd.i32, shape=values.shape)
    a.from_numpy(values.astype(np.int32))
    return a


def _close(got: Any, ref: Any, rtol: float) -> None:
    ref = np.asarray(ref, dtype=np.float64)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(ref)))))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", list(_UNARY))
def test_unary_op_through_a_dynamic_loop(arch: object, name: str, dtype: str) -> None:
    dt = getattr(qd, dtype)
    op = getattr(qd, name)
    dop, (step, offset), (ca, cb), starts = _UNARY[name]
    f = _NP_OP.get(name, getattr(np, name, None))
    np_dt = np.float64 if dtype == "f64" else np.float32
    rtol = 1e-10 if dtype == "f64" else 1e-4
    trips = np.repeat(_TRIPS, len(starts))
    n = len(trips)
    x = qd.field(dt, shape=n, needs_grad=True)
    acc_out = qd.field(dt, shape=n, needs_grad=True)
    car_out = qd.field(dt, shape=n, needs_grad=True)
    cnt = _counts(trips)

    @qd.kernel
    def k():
        for i in x:
            acc = x[i] * 0.0
            v = x[i]
            for j in range(cnt[i]):
                acc += op(x[i] + qd.cast(j, dt) * step + offset)  # accumulator pattern
                v = op(v) * ca + cb  # loop-carried pattern
            acc_out[i] = acc
            car_out[i] = v

    xs = np.tile(starts, len(_TRIPS)).astype(np_dt)
    x.from_numpy(xs)
    k()
    x0 = xs.astype(np.float64)
    u = [x0[i] + np.arange(trips[i]) * step + offset for i in range(n)]
    car, dcar = [], []
    for i in range(n):  # chain rule along the recurrence, in float64
        v, d = x0[i], 1.0
        for _ in range(trips[i]):
            d *= ca * dop(v)
            v = f(v) * ca + cb
        car.append(v)
        dcar.append(d)
    _close(acc_out.to_numpy(), [f(ui).sum() for ui in u], rtol)
    _close(car_out.to_numpy(), car, rtol)
    for seeded, other, ref in ((acc_out, car_out, [dop(ui).sum() for ui in u]), (car_out, acc_out, dcar)):
        seeded.grad.fill(1.0)
        other.grad.fill(0.0)
        x.grad.fill(0.0)
        k.grad()
        _close(x.grad.to_numpy().astype(np.float64), ref, rtol)


# ------------------------------------------------------------------ 2. overflow with a forced size

N = 6
XS = np.linspace(0.2, 1.1, N)
TRIPS = np.array([0, 1, 2, 3, 5, 9], dtype=np.int32)


def _fields(shape: tuple = (N,)) -> tuple[Any, Any]:
    x = qd.field(qd.f64, shape=shape, needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)
    return x, loss


def _sin_chain(x0: np.ndarray, trips: np.ndarray, scale: float = 1.1) -> tuple[np.ndarray, np.ndarray]:
    """v -> sin(v) * scale, `trips[i]` times from x0[i]: the final values and d v / d x0, in float64."""
    vs, ds = [], []
    for v, n in zip(np.asarray(x0, dtype=np.float64), trips):
        d = 1.0
        for _ in range(int(n)):
            d *= np.cos(v) * scale
            v = np.sin(v) * scale
        vs.append(v)
        ds.append(d)
    return np.array(vs), np.array(ds)


def _sin_recurrence(x: Any, loss: Any, a: Any) -> Any:
    @qd.kernel
    def sin_recurrence():
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            loss[None] += v

    return sin_recurrence


def _seeded_grad(k: Callable[[], None], x: Any, loss: Any) -> None:
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad()


def test_overflow_from_init_option_names_the_kernel_then_a_bigger_size_runs_clean(arch: Any) -> None:
    init_arch(arch, ad_stack_size=int(TRIPS.max()) - 1)
    x, loss = _fields()
    k = _sin_recurrence(x, loss, _counts(TRIPS))
    x.from_numpy(XS)
    k()  # the primal has no stacks: it runs under any size
    with pytest.raises(QuadrantsAssertionError, match=r"^Adstack overflow: kernel sin_recurrence\b") as e:
        _seeded_grad(k, x, loss)
        qd.sync()  # GPU archs raise a kernel's errors at the next sync
    msg = str(e.value)
    assert f"ad_stack_size={TRIPS.max() - 1}" in msg and f"is {TRIPS.max()}" in msg
    qd.sync()  # nothing is left pending after the raise
    qd.cfg.ad_stack_size = int(TRIPS.max())  # exactly the largest trip count is enough
    _seeded_grad(k, x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, TRIPS)[1], rtol=1e-12)


def test_overflow_from_cfg_then_exact_sizing_again(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)
    k = _sin_recurrence(x, loss, a)
    x.from_numpy(XS)
    k()
    qd.cfg.ad_stack_size = 1
    with pytest.raises(QuadrantsAssertionError, match=r"^Adstack overflow:.*\bsin_recurrence\b"):
        _seeded_grad(k, x, loss)
        qd.sync()  # GPU archs raise a kernel's errors at the next sync
    a.from_numpy(np.minimum(TRIPS, 1))  # with every trip count <= 1 the forced size fits
    _seeded_grad(k, x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, np.minimum(TRIPS, 1))[1], rtol=1e-12)
    a.from_numpy(TRIPS)
    qd.cfg.ad_stack_size = 0
    check_grad(k, k.grad, x, loss, XS)


def test_many_threads_overflowing_raise_one_exception(arch: Any) -> None:
    n = 64
    x, loss = _fields((n,))
    trips = np.full(n, 12, dtype=np.int32)
    k = _sin_recurrence(x, loss, _counts(trips))
    xs = np.linspace(0.1, 1.0, n)
    x.from_numpy(xs)
    k()
    qd.cfg.ad_stack_size = 4
    with pytest.raises(QuadrantsAssertionError) as e:
        _seeded_grad(k, x, loss)
        qd.sync()  # GPU archs raise a kernel's errors at the next sync
    msg = str(e.value)
    assert msg.startswith("Adstack overflow:") and msg.count("Adstack overflow") == 1 and "thread" in msg
    qd.sync()
    qd.cfg.ad_stack_size = 12
    _seeded_grad(k, x, loss)
    np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(xs, trips)[1], rtol=1e-12)


def test_nested_stacks_need_the_largest_trip_count_not_the_product(arch: Any) -> None:
    x, loss = _fields()

    @qd.kernel
    def nested(m: qd.i32):
        for i in x:
            v = x[i]
            for _ in range(m):
                for _ in range(m):
                    v = qd.sin(v) * 1.1
            loss[None] += v

    qd.cfg.ad_stack_size = 5  # 5 outer x 5 inner iterations: each stack holds at most 5 entries at a time
    x.from_numpy(XS)
    loss[None] = 0.0
    nested(5)
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    nested.grad(5)
    np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, np.full(N, 25))[1], rtol=1e-12)
    with pytest.raises(QuadrantsAssertionError, match="^Adstack overflow: kernel nested"):
        nested.grad(6)
        qd.sync()  # GPU archs raise a kernel's errors at the next sync


_CHILD = """
import qd
from qd.errors import QuadrantsAssertionError

qd.init(arch={arch!r}, ad_stack_size=2, log_level="warn")
x = qd.field(qd.f64, shape=8, needs_grad=True)
y = qd.field(qd.f64, shape=(), needs_grad=True)
n = qd.field(qd.i32, shape=())
n[None] = 7


@qd.kernel
def deep():
    for i in x:
        v = x[i] + 0.1
        for _ in range(n[None]):
            v = qd.sin(v) * 1.1
        y[None] += v


deep()
y.grad[None] = 1.0
try:
    deep.grad()
    qd.sync()  # GPU archs raise a kernel's errors at the next sync
except QuadrantsAssertionError as e:
    print("caught:", str(e).split(",")[0])
"""


def test_a_caught_overflow_leaves_a_clean_exit(arch: Any, tmp_path: Any) -> None:
    import pathlib

    script = tmp_path / "overflow_child.py"
    script.write_text(textwrap.dedent(_CHILD.format(arch=str(arch))))
    root = pathlib.Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "caught: Adstack overflow: kernel deep" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------ 3. sizes follow the data, per launch


def _grad_plan(k: Any) -> Any:
    """The adstack plan of `k`'s reverse-mode instance (the only compiled instance whose key says grad)."""
    plans = [v[0].adstack for key, v in k._instances.items() if "grad" in str(key)]
    assert len(plans) == 1
    return plans[0]


def test_field_bound_resized_after_host_writes_and_reused_when_unchanged(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)
    k = _sin_recurrence(x, loss, a)
    check_grad(k, k.grad, x, loss, XS)
    plan = _grad_plan(k)
    assert plan.sizes == [int(TRIPS.max())]
    runs = plan.sizing_runs
    _seeded_grad(k, x, loss)
    _seeded_grad(k, x, loss)
    assert plan.sizing_runs == runs  # nothing the size reads changed: no sizing work
    writes: list[tuple[Callable[[], None], np.ndarray]] = [
        (lambda: a.from_numpy(TRIPS + 20), TRIPS + 20),
        (lambda: a.__setitem__(2, 31), np.where(np.arange(N) == 2, 31, TRIPS + 20)),
        (lambda: a.fill(3), np.full(N, 3)),
    ]
    for write, trips in writes:  # every host write path: sized again, and the gradient is right
        write()
        x.from_numpy(XS)
        _seeded_grad(k, x, loss)
        assert plan.sizes == [int(trips.max())]
        assert plan.sizing_runs == runs + 1
        runs = plan.sizing_runs
        np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, trips)[1], rtol=1e-12)


def test_ndarray_bound_resized_after_host_writes(arch: Any) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            loss[None] += v

    a = qd.ndarray(qd.i32, shape=(N,))
    a.from_numpy(TRIPS)
    check_grad(lambda: k(a), lambda: k.grad(a), x, loss, XS)
    plan = _grad_plan(k)
    runs = plan.sizing_runs
    k.grad(a)
    assert plan.sizing_runs == runs
    for write, trips in ((lambda: a.from_numpy(TRIPS * 4), TRIPS * 4), (lambda: a.__setitem__(0, 40),
                                                                         np.r_[40, TRIPS[1:] * 4]),
                         (lambda: a.fill(2), np.full(N, 2))):
        write()
        x.grad.fill(0.0)
        loss.grad[None] = 1.0
        k.grad(a)
        assert plan.sizes == [int(trips.max())] and plan.sizing_runs == runs + 1
        runs = plan.sizing_runs
        np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, trips)[1], rtol=1e-12)
    check_grad(lambda: k(a), lambda: k.grad(a), x, loss, XS)


def test_raw_numpy_bound_is_reread_at_every_launch(arch: Any) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            loss[None] += v

    a = TRIPS.copy()
    x.from_numpy(XS)
    k(a)
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    k.grad(a)
    plan = _grad_plan(k)
    runs = plan.sizing_runs
    a *= 3  # no qd write path sees this: the array has no generation counter, so it is read again
    x.grad.fill(0.0)
    k.grad(a)
    assert plan.sizing_runs == runs + 1 and plan.sizes == [int(a.max())]
    np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, a)[1], rtol=1e-12)


def test_bound_written_by_another_kernel_between_launches(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)
    nd = qd.ndarray(qd.i32, shape=(N,))
    nd.from_numpy(TRIPS)

    @qd.kernel
    def set_counts(base: qd.i32, b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in a:
            a[i] = base + i
            b[i] = base + 2 * i

    @qd.kernel
    def k(b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = qd.sin(v) * 1.1
            for _ in range(b[i]):
                v = qd.cos(v) + v * 0.5
            loss[None] += v

    check_grad(lambda: k(nd), lambda: k.grad(nd), x, loss, XS)
    plan = _grad_plan(k)
    assert plan.sizes == [int(TRIPS.max())] * 2  # one stack per loop carrying v
    for base in (7, 1, 7):
        set_counts(base, nd)  # a kernel's writes bump the generations of the field and the ndarray
        runs = plan.sizing_runs
        check_grad(lambda: k(nd), lambda: k.grad(nd), x, loss, XS)
        assert plan.sizing_runs == runs + 1  # sized once (the first launch after the write), then reused
        assert plan.sizes == [base + N - 1, base + 2 * (N - 1)]


def test_scalar_argument_bound_resized_only_when_it_changes(arch: Any) -> None:
    x, loss = _fields()

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            v = x[i]
            for _ in range(n):
                v = qd.sin(v) * 1.1
            loss[None] += v

    x.from_numpy(XS)
    for n in (3, 3, 20, 20, 3):
        x.grad.fill(0.0)
        loss.grad[None] = 1.0
        k.grad(n)
        np.testing.assert_allclose(x.grad.to_numpy(), _sin_chain(XS, np.full(N, n))[1], rtol=1e-12)
    plan = _grad_plan(k)
    assert plan.sizes == [3] and plan.sizing_runs == 3


# ------------------------------------------------------------------ 4. loop shapes


def test_nested_dynamic_loops_carrying_one_value(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)

    @qd.kernel
    def k(m: qd.i32):
        for i in x:
            v = x[i]
            for j in range(a[i]):
                s = v * 0.5  # a local of the outer body, carried by the inner loop
                for _ in range(m):
                    v = v * 0.9 + 0.1 * qd.sin(v + s)
                    s = s * 0.8 + 0.05 * v
                v = v + 0.1 * s + 0.01 * j
            loss[None] += v * v

    check_grad(lambda: k(4), lambda: k.grad(4), x, loss, XS)
    check_grad(lambda: k(0), lambda: k.grad(0), x, loss, XS)


# Regressions: the sweep of an inner loop or `if` must see the locals it reads as they were when it ran,
# even when the enclosing body reassigns them afterwards (snapshots in qd/ad/reverse.py).


def test_inner_loop_reading_an_outer_local_that_is_updated_after_it(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)

    @qd.kernel
    def k(m: qd.i32):
        for i in x:
            v = x[i]
            for j in range(a[i]):
                s = v * 0.0
                for _ in range(m):  # reads v, does not write it
                    s = s * 0.9 + qd.sin(v + s)
                v = v * 0.8 + 0.1 * s + 0.01 * j  # v changes after the inner loop
            loss[None] += v * v

    check_grad(lambda: k(4), lambda: k.grad(4), x, loss, XS)


def test_branch_reading_a_local_that_is_updated_after_it(arch: Any) -> None:
    x, loss = _fields()

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            if x[i] > 0.0:
                loss[None] += qd.sin(v)
            v = v * 2.0
            loss[None] += v

    got = check_grad(k, k.grad, x, loss, XS)
    np.testing.assert_allclose(got, np.cos(XS) + 2.0, rtol=1e-12)


def test_sibling_loops_through_a_global_and_a_value_between_them(arch: Any) -> None:
    x = qd.field(qd.f64, shape=N, needs_grad=True)
    scratch = qd.field(qd.f64, shape=N, needs_grad=True)
    out = qd.field(qd.f64, shape=N, needs_grad=True)
    w = qd.field(qd.f64, shape=N)
    trip = _counts(TRIPS)
    w.from_numpy(np.linspace(0.5, 1.5, N))

    @qd.kernel
    def k(n: qd.i32):
        for _ in range(1):
            for i in range(n):  # the second loop reads what the first wrote: reversed in the opposite order
                scratch[i] = qd.sin(x[i])
            for i in range(n):
                out[i] = scratch[i] * w[i]

    @qd.kernel
    def between():
        for i in x:
            for _ in range(2):
                out[i] += x[i]
            t = trip[i]  # read between the two loops, used as the second loop's bound
            s = w[i]
            for _ in range(t):
                out[i] += x[i] * s

    x.from_numpy(XS)
    k(N)
    out.grad.fill(1.0)
    x.grad.fill(0.0)
    k.grad(N)
    np.testing.assert_allclose(x.grad.to_numpy(), np.cos(XS) * w.to_numpy(), rtol=1e-12)
    out.fill(0.0)
    between()
    out.grad.fill(1.0)
    x.grad.fill(0.0)
    between.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 2.0 + TRIPS * w.to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("n", [3, 5])
def test_triangular_inner_bound_is_the_enclosing_index(arch: Any, n: int) -> None:
    x, loss = _fields((n,))
    w = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def k(m: qd.i32):
        for i in x:
            for j in range(m):
                if j < i + 1:
                    s = x[i] * 0.0
                    for q in range(j):
                        s = s + x[q] * x[q]
                    w[None] += qd.cast(j, qd.f64) * x[i]
                    loss[None] += qd.sqrt(x[i] + 1.0 - s)

    xs = 0.1 * np.arange(1, n + 1)
    x.from_numpy(xs)
    loss[None] = 0.0
    w[None] = 0.0
    k(n)
    x.grad.fill(0.0)
    loss.grad[None] = 1.0
    w.grad[None] = 1.0
    k.grad(n)
    ref = np.zeros(n)
    for i in range(n):  # d/dx of sum_{j<=i} sqrt(x_i + 1 - sum_{q<j} x_q^2) + j x_i
        for j in range(i + 1):
            d = 0.5 / np.sqrt(xs[i] + 1.0 - np.sum(xs[:j] ** 2))
            ref[i] += d + j
            ref[:j] += -2.0 * xs[:j] * d
    np.testing.assert_allclose(x.grad.to_numpy(), ref, rtol=1e-12)
    w.grad[None] = 0.0
    check_grad(lambda: k(n), lambda: k.grad(n), x, loss, xs)


def test_branches_inside_a_loop_on_the_carried_value_and_on_the_index(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS + 2)

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            for j in range(a[i]):
                if j % 3 == 0:
                    v = v * qd.cos(v)
                elif v > 0.45:
                    v = qd.sqrt(v) * 0.9
                elif j % 3 == 1:
                    v = v + 0.2 * qd.exp(-v)
                else:
                    v = v * v + 0.1
            loss[None] += v

    check_grad(k, k.grad, x, loss, XS)


def test_elif_chain_inside_a_loop_routes_each_iteration(arch: Any) -> None:
    vec3 = qd.types.vector(3, qd.f64)
    m = 5
    out = qd.field(vec3, shape=(m, 2), needs_grad=True)
    const = qd.field(vec3, shape=m)
    inp = qd.field(qd.f64, shape=(4, 2), needs_grad=True)
    n = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i, b in qd.ndrange(1, 2):
            for j in range(n[None]):
                if j == 0:
                    out[j, b] = qd.Vector([inp[0, b], inp[1, b], inp[2, b]])
                elif j == 1:
                    out[j, b] = qd.Vector([inp[1, b], inp[2, b], inp[3, b]]) * 2.0
                elif j == 2:
                    out[j, b] = qd.Vector([inp[0, b], inp[2, b], inp[3, b]])
                else:
                    out[j, b] = const[j] + inp[3, b] * 0.0

    weights = np.arange(1.0, 1.0 + 3 * m * 2).reshape(m, 2, 3)
    uses = {0: (0, 1, 2), 1: (1, 2, 3), 2: (0, 2, 3)}
    for trips in (4, 2):
        n[None] = trips
        out.grad.from_numpy(weights)
        inp.grad.fill(0.0)
        k.grad()
        ref = np.zeros((4, 2))
        for j, idx in uses.items():
            if j < trips:
                for c, row in enumerate(idx):
                    ref[row] += weights[j, :, c] * (2.0 if j == 1 else 1.0)
        np.testing.assert_array_equal(inp.grad.to_numpy(), ref)


def test_loop_inside_a_runtime_guard_with_inactive_elements(arch: Any) -> None:
    m = 6
    x, loss = _fields((m,))
    active = qd.field(qd.i32, shape=())
    n = qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i in range(m):
            if i < active[None]:
                v = x[i]
                acc = v * 0.0
                for _ in range(n[None]):
                    acc = acc + v * v
                    v = v * 0.95 + 0.01
                loss[None] += acc

    xs = 1.0 + 0.1 * np.arange(m)
    x.from_numpy(xs)
    for act, trips in ((3, 4), (5, 20)):
        active[None] = act
        n[None] = trips
        x.grad.fill(0.0)
        loss.grad[None] = 1.0
        k.grad()
        v = xs.copy()
        d, ref = np.ones(m), np.zeros(m)
        for _ in range(trips):
            ref += 2 * v * d
            v, d = v * 0.95 + 0.01, d * 0.95
        ref[act:] = 0.0
        np.testing.assert_allclose(x.grad.to_numpy(), ref, rtol=1e-12)
        assert not np.any(x.grad.to_numpy()[act:])  # untouched elements get exactly 0


def test_multi_axis_ndarray_read_as_a_bound_sees_every_cell(arch: Any) -> None:
    x, loss = _fields((1,))

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                v = x[0]
                for _ in range(a[i, j]):
                    v = qd.sin(v) * 1.1
                loss[None] += v

    rows, cols = 3, 5
    a = np.zeros((rows, cols), dtype=np.int32)
    a[2, 2] = 23  # the only non-zero cell; a sizer that mixed up the strides would miss it
    a[0, 4] = 2
    xs = np.array([0.4])
    got = check_grad(lambda: k(a), lambda: k.grad(a), x, loss, xs)
    np.testing.assert_allclose(got, [_sin_chain(np.full(a.size, xs[0]), a.ravel())[1].sum()], rtol=1e-12)
    assert _grad_plan(k).sizes == [23]


def test_multi_axis_field_reads_as_bounds_of_sibling_loops(arch: Any) -> None:
    m = 4
    a = qd.field(qd.f64, shape=m, needs_grad=True)
    b = qd.field(qd.f64, shape=m, needs_grad=True)
    c = qd.field(qd.i32, shape=(m, 2))
    f = qd.field(qd.f64, shape=(m, 2), needs_grad=True)

    @qd.kernel
    def k():
        for i, q in f:
            weight = a[i] * 0.0 + 1.0
            for _ in range(c[i, q]):
                weight *= a[i]
            s = a[i] * 0.0
            for _ in range(c[i, q] * 2):
                s += weight + b[i]
            f[i, q] = s

    cs = np.add.outer(np.arange(m), np.arange(2)).astype(np.int32) * 5  # up to 20: larger than the unroll limit
    c.from_numpy(cs)
    av = np.linspace(0.9, 1.05, m)
    a.from_numpy(av)
    b.fill(1.0)
    k()
    np.testing.assert_allclose(f.to_numpy(), 2 * cs * (av[:, None] ** cs + 1.0), rtol=1e-12)
    f.grad.fill(1.0)
    k.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), np.sum(2 * cs * cs * av[:, None] ** (cs - 1), axis=1), rtol=1e-12)
    np.testing.assert_allclose(b.grad.to_numpy(), np.sum(2 * cs, axis=1), rtol=1e-12)


@pytest.mark.parametrize("shape", ["begin_end", "difference"])
def test_bound_that_is_a_difference_of_two_reads(arch: Any, shape: str) -> None:
    m = 8
    x, loss = _fields((m,))
    lo_f = qd.field(qd.i32, shape=3)
    hi_f = qd.field(qd.i32, shape=3)
    begin_end = shape == "begin_end"

    @qd.kernel
    def k(lo: qd.types.ndarray(dtype=qd.i32, ndim=1), hi: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(lo.shape[0]):
            acc = x[0] * 0.0
            for j in range(lo[i], hi[i]) if qd.static(begin_end) else range(hi[i] - lo[i]):
                q = j if qd.static(begin_end) else j + lo[i]
                acc = acc * 0.5 + qd.sin(x[q]) * qd.cast(hi[i] - lo[i], qd.f64)
            for j in range(hi_f[i] - lo_f[i]):  # a field difference too, negative for one element: no trips
                acc = acc + x[j] * x[j]
            loss[None] += acc

    lo = np.array([0, 3, 5], dtype=np.int32)
    hi = np.array([3, 4, 8], dtype=np.int32)
    lo_f.from_numpy(np.array([1, 6, 0], dtype=np.int32))
    hi_f.from_numpy(np.array([4, 2, 2], dtype=np.int32))
    xs = np.linspace(0.1, 0.8, m)
    got = check_grad(lambda: k(lo, hi), lambda: k.grad(lo, hi), x, loss, xs)
    ref = np.zeros(m)
    for i in range(3):
        ln = hi[i] - lo[i]
        for t, q in enumerate(range(lo[i], hi[i])):  # acc_final = sum_t 0.5^(ln-1-t) * ln * sin(x_q)
            ref[q] += 0.5 ** (ln - 1 - t) * ln * np.cos(xs[q])
        for j in range(max(0, int(hi_f[i] - lo_f[i]))):
            ref[j] += 2 * xs[j]
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_difference_of_reads_at_two_serial_indices_guarded_by_an_if(arch: Any) -> None:
    m = 10
    x, loss = _fields((m,))
    fld = _counts(np.full(4, 9))

    @qd.kernel
    def k(arr_a: qd.types.ndarray(dtype=qd.i32, ndim=1), arr_b: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for _ in range(1):
            acc = x[0] * 0.0
            for ia in range(arr_a.shape[0]):
                for ib in range(arr_b.shape[0]):
                    n = arr_a[ia] - arr_b[ib]  # sized by the max over both ranges of the difference
                    if n > 0:
                        for q in range(n):
                            acc = acc * 0.9 + qd.sin(x[q])
                n2 = fld[ia] - arr_a[ia]  # a field minus an ndarray
                if n2 > 0:
                    for q in range(n2):
                        acc = acc + x[q] * x[q]
            loss[None] += acc

    xs = np.linspace(0.1, 1.0, m)
    for a_vals, b_vals in (([1, 5], [4, 0]), ([5, 5, 5, 5], [4, 0]), ([0, 0, 0, 7], [1, 1])):  # lengths differ
        av, bv = np.array(a_vals, dtype=np.int32), np.array(b_vals, dtype=np.int32)
        got = check_grad(lambda: k(av, bv), lambda: k.grad(av, bv), x, loss, xs)
        steps = []  # the forward sequence of (kind, q); acc_final is linear in every step's term
        for ia in range(len(av)):
            for ib in range(len(bv)):
                steps += [("sin", q) for q in range(max(0, av[ia] - bv[ib]))]
            steps += [("sq", q) for q in range(max(0, 9 - av[ia]))]
        ref, scale = np.zeros(m), 1.0
        for kind, q in reversed(steps):
            ref[q] += scale * (np.cos(xs[q]) if kind == "sin" else 2 * xs[q])
            scale *= 0.9 if kind == "sin" else 1.0
        np.testing.assert_allclose(got, ref, rtol=1e-12)


@pytest.mark.parametrize("mode", ["element", "shape"])
def test_three_level_nest_bounded_by_reads_at_enclosing_serial_indices(arch: Any, mode: str) -> None:
    m = 8
    x, loss = _fields((m,))
    element = mode == "element"

    @qd.kernel
    def k(n: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for ie in range(n.shape[0]):
            for il in range(n[ie]) if qd.static(element) else range(n.shape[0]):
                acc = x[0] * 0.0
                for j in range(n[il]) if qd.static(element) else range(n.shape[0]):
                    acc = acc + qd.sin(x[j] + acc)
                loss[None] += acc

    nv = np.array([2, 3, 4, 1], dtype=np.int32)
    xs = np.linspace(0.1, 0.5, m)
    check_grad(lambda: k(nv), lambda: k.grad(nv), x, loss, xs)
    assert _grad_plan(k).sizes == [int(nv.max()) if element else len(nv)]


@pytest.mark.parametrize("dtype", ["i8", "i64", "u16"])
def test_bounds_of_every_integer_dtype(arch: Any, dtype: str) -> None:
    x, loss = _fields()
    a = qd.field(getattr(qd, dtype), shape=N)
    a.from_numpy(TRIPS.astype(getattr(np, dtype.replace("i", "int").replace("u", "uint"))))
    k = _sin_recurrence(x, loss, a)
    got = check_grad(k, k.grad, x, loss, XS)
    np.testing.assert_allclose(got, _sin_chain(XS, TRIPS)[1], rtol=1e-12)
    assert _grad_plan(k).sizes == [int(TRIPS.max())]


def test_segment_offsets_difference_under_ndrange(arch: Any) -> None:
    starts = np.array([0, 2, 3, 6, 6], dtype=np.int32)  # segment lengths 2, 1, 3, 0
    n_seg, total, n_env = len(starts) - 1, int(starts[-1]), 2
    st = qd.field(qd.i32, shape=n_seg + 1)
    x = qd.field(qd.f64, shape=(total, n_env), needs_grad=True)
    out = qd.field(qd.f64, shape=(n_seg, n_env), needs_grad=True)

    @qd.kernel
    def k():
        for i, e in qd.ndrange(n_seg, n_env):
            s0 = st[i]
            acc = x[0, e] * 0.0
            for j in range(st[i + 1] - s0):
                acc = acc * qd.cos(acc) + x[s0 + j, e] * x[s0 + j, e]
            out[i, e] = acc

    st.from_numpy(starts)
    xs = np.linspace(0.2, 0.9, total * n_env).reshape(total, n_env)
    x.from_numpy(xs)
    k()
    c = np.linspace(-1.0, 1.0, n_seg * n_env).reshape(n_seg, n_env)
    out.grad.from_numpy(c)
    x.grad.fill(0.0)
    k.grad()
    ref = np.zeros_like(xs)
    for i in range(n_seg):
        for e in range(n_env):
            acc, dacc = 0.0, np.zeros(total)  # forward sensitivities of acc w.r.t. x[:, e]
            for q in range(starts[i], starts[i + 1]):
                g = np.cos(acc) - acc * np.sin(acc)
                acc, dacc = acc * np.cos(acc) + xs[q, e] ** 2, dacc * g
                dacc[q] += 2 * xs[q, e]
            ref[:, e] += c[i, e] * dacc
    np.testing.assert_allclose(x.grad.to_numpy(), ref, rtol=1e-12)


def _int_carried(x: Any, loss: Any, w: Any, update_first: bool) -> Any:
    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            v = x[i]
            idx = i % 5
            flip = 0
            for _ in range(n):
                if qd.static(update_first):
                    idx = (idx * 2 + 1) % 5
                if flip == 1:  # a carried int as a condition ...
                    v = qd.sin(v * w[idx])  # ... and as an index
                else:
                    v = v * w[idx] + 0.1 * qd.cos(v)
                if qd.static(not update_first):
                    idx = (idx * 2 + 1) % 5
                flip = 1 - flip
            loss[None] += v

    return k


def test_loop_carried_ints_as_indices_and_conditions(arch: Any) -> None:
    x, loss = _fields()
    w = qd.field(qd.f64, shape=5, needs_grad=True)
    wv = np.array([0.9, 1.1, 0.7, 1.3, 0.5])
    w.from_numpy(wv)
    k = _int_carried(x, loss, w, update_first=True)
    check_grad(lambda: k(17), lambda: k.grad(17), x, loss, XS)
    check_grad(lambda: k(17), lambda: k.grad(17), w, loss, wv)


def test_loop_carried_int_index_updated_after_the_branch_that_reads_it(arch: Any) -> None:
    x, loss = _fields()
    w = qd.field(qd.f64, shape=5, needs_grad=True)
    wv = np.array([0.9, 1.1, 0.7, 1.3, 0.5])
    w.from_numpy(wv)
    k = _int_carried(x, loss, w, update_first=False)
    check_grad(lambda: k(17), lambda: k.grad(17), x, loss, XS)


def test_stashed_outer_index_reads_bounds_and_parents(arch: Any) -> None:
    m = 5
    x, loss = _fields((m,))

    @qd.kernel
    def k(link_lo: qd.types.ndarray(dtype=qd.i32, ndim=1), link_hi: qd.types.ndarray(dtype=qd.i32, ndim=1),
          j_lo: qd.types.ndarray(dtype=qd.i32, ndim=1), j_hi: qd.types.ndarray(dtype=qd.i32, ndim=1),
          parent: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for e in range(link_lo.shape[0]):
            for l_ in range(link_lo[e], link_hi[e]):
                li = qd.cast(l_, qd.i32)
                acc = x[li] * 0.5
                if parent[li] != -1:
                    acc = acc + x[parent[li]] * 0.3
                for t in range(j_hi[li] - j_lo[li]):
                    q = t + j_lo[li]
                    acc = acc + x[q] * x[q]
                loss[None] += acc

    link_lo, link_hi = np.array([0, 2], dtype=np.int32), np.array([2, 3], dtype=np.int32)
    j_lo, j_hi = np.array([0, 1, 3], dtype=np.int32), np.array([1, 3, 5], dtype=np.int32)
    parent = np.array([-1, 0, -1], dtype=np.int32)
    xs = np.linspace(0.1, 0.5, m)
    args = (link_lo, link_hi, j_lo, j_hi, parent)
    got = check_grad(lambda: k(*args), lambda: k.grad(*args), x, loss, xs)
    ref = np.zeros(m)
    for e in range(2):
        for li in range(link_lo[e], link_hi[e]):
            ref[li] += 0.5
            if parent[li] != -1:
                ref[parent[li]] += 0.3
            ref[j_lo[li]:j_hi[li]] += 2 * xs[j_lo[li]:j_hi[li]]
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_vector_carried_through_a_loop_closed_form(arch: Any) -> None:
    x = qd.field(qd.f64, shape=2, needs_grad=True)
    out = qd.field(qd.f64, shape=2, needs_grad=True)
    n = qd.field(qd.i32, shape=())
    den = qd.field(qd.f64, shape=())

    @qd.kernel
    def square():
        for i in range(2):
            q = qd.Vector([x[i], x[i] * 0.5])
            for _ in range(n[None]):
                q = qd.Vector([q[0] * q[0], q[1] + q[0] * 0.1])
            out[i] = q[1]

    @qd.kernel
    def linear():
        for i in range(2):
            q = qd.Vector([x[i], x[i] * 0.5])
            s = den[None]
            for _ in range(n[None]):
                q = qd.Vector([q[0] + q[1] * 0.1, q[1] + q[0] * 0.2]) / s
            out[i] = q[0] + q[1]

    xs = np.array([0.3, 0.7])
    x.from_numpy(xs)
    for trips in (2, 3):
        n[None] = trips
        out.grad.fill(1.0)
        x.grad.fill(0.0)
        square.grad()
        q0, dq0, dq1 = xs.copy(), np.ones(2), np.full(2, 0.5)  # forward sensitivities d q / d x
        for _ in range(trips):
            q0, dq0, dq1 = q0 * q0, 2 * q0 * dq0, dq1 + 0.1 * dq0
        np.testing.assert_allclose(x.grad.to_numpy(), dq1, rtol=1e-12)
    n[None] = 19
    den[None] = 1.25
    out.grad.fill(1.0)
    x.grad.fill(0.0)
    linear.grad()
    jac = np.linalg.matrix_power(np.array([[1.0, 0.1], [0.2, 1.0]]) / 1.25, 19) @ np.array([1.0, 0.5])
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(2, jac.sum()), rtol=1e-12)


def test_matrix_carried_through_a_loop(arch: Any) -> None:
    x, loss = _fields((N,))

    @qd.kernel
    def k(n: qd.i32):
        for i in x:
            m = qd.Matrix([[x[i], 0.1], [-0.2, 1.0 - x[i]]])
            r = qd.Matrix([[qd.cos(x[i]), qd.sin(x[i])], [-qd.sin(x[i]), qd.cos(x[i])]])
            for _ in range(n):
                m = (r @ m) * 0.9 + m.transpose() * 0.05
                m[0, 1] = qd.tanh(m[0, 1])
            loss[None] += m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0] + m.sum()

    check_grad(lambda: k(5), lambda: k.grad(5), x, loss, XS)


@qd.func
def _settle(v, n):
    for _ in range(n):
        v = v - 0.2 * (qd.exp(v) - 1.5)
    return v


@qd.func
def _damped(v, w, n):
    for j in range(n):
        v = qd.sin(v) * w + 0.01 * j
    return v


def test_func_wrapped_loops_inside_a_dynamic_loop(arch: Any) -> None:
    x, loss = _fields()
    a = _counts(TRIPS)

    @qd.kernel
    def k(m: qd.i32):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = _settle(v, m)
                v = _damped(v, 1.05, 2 * m)
            loss[None] += v

    check_grad(lambda: k(3), lambda: k.grad(3), x, loss, XS)


def test_struct_for_and_ndrange_over_an_ndarray_shape(arch: Any) -> None:
    x, loss = _fields((2, 3))
    cnt = qd.field(qd.i32, shape=(2, 3))
    cnt.from_numpy(TRIPS.reshape(2, 3))

    @qd.kernel
    def over_field():
        for i, j in x:
            loss[None] += _damped(x[i, j], 1.1, cnt[i, j] + j)

    @qd.kernel
    def over_shape(a: qd.types.ndarray(dtype=qd.i32, ndim=2)):
        for i, j in qd.ndrange(a.shape[0], a.shape[1]):
            loss[None] += _settle(x[i, j], a[i, j])

    xs = XS.reshape(2, 3)
    check_grad(over_field, over_field.grad, x, loss, xs)
    a = (TRIPS.reshape(2, 3)[::-1] * 3).copy()
    check_grad(lambda: over_shape(a), lambda: over_shape.grad(a), x, loss, xs)


# ------------------------------------------------------------------ 5. Quadrants' loop tests, with dynamic bounds


def _fwd_rev_identity(k: Callable[[], None], x: Any, y: Any, rng_seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Forward mode (J t, seeded on `x`) against reverse mode (J^T c from `y.grad`): <t, J^T c> = <J t, c>.
    Returns (J t, J^T c). `x` is 1-D; `y` any shape; both need grad and dual."""
    rng = np.random.default_rng(rng_seed)
    t = rng.standard_normal(x.shape[0])
    c = rng.standard_normal(y.shape)
    with qd.ad.FwdMode(loss=y, param=x, seed=list(t)):
        k()
    jt = y.dual.to_numpy().astype(np.float64)
    y.grad.from_numpy(c)
    x.grad.fill(0.0)
    k.grad()
    jtc = x.grad.to_numpy().astype(np.float64)
    np.testing.assert_allclose(t @ jtc, float(np.sum(jt * c)), rtol=1e-10)
    return jt, jtc


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@pytest.mark.parametrize("body", ["sum", "sum_atomic", "power"])
def test_sum_and_power_loops_reverse_and_forward(arch: Any, body: str) -> None:
    m = 10
    a = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    b = _counts(np.arange(m) * 2)  # trip counts up to 18: above the unroll limit for some elements
    p = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)

    @qd.kernel
    def k():
        for i in range(m):
            ret = a[i] * 0.0 + 1.0
            for _ in range(b[i]):
                if qd.static(body == "sum"):
                    ret = ret + a[i]
                elif qd.static(body == "sum_atomic"):
                    ret += a[i]
                else:
                    ret = ret * a[i]
            p[i] = ret

    av = np.linspace(0.8, 1.25, m)
    bv = b.to_numpy().astype(np.float64)
    a.from_numpy(av)
    k()
    want, dwant = (av * bv + 1, bv) if body != "power" else (av ** bv, bv * av ** (bv - 1))
    np.testing.assert_allclose(p.to_numpy(), want, rtol=1e-12)
    p.grad.fill(1.0)
    a.grad.fill(0.0)
    k.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), dwant, rtol=1e-12)
    with qd.ad.FwdMode(loss=p, param=a, seed=[1.0] * m):
        k()
    np.testing.assert_allclose(p.dual.to_numpy(), dwant, rtol=1e-12)
    assert not np.any(a.dual.to_numpy())  # the seed is cleared on exit
    _fwd_rev_identity(k, a, p)


def test_fibonacci_swap_reverse_and_forward(arch: Any) -> None:
    m = 20
    a = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    b = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    c = _counts(np.arange(m))
    f = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)

    @qd.kernel
    def fib():
        for i in range(m):
            p = a[i]
            q = b[i]
            for _ in range(c[i]):
                p, q = q, p + q
            f[i] = q

    a.from_numpy(np.linspace(0.1, 0.3, m))
    b.fill(1.0)
    fib()
    d_a = np.array([_fib(n) for n in range(m)], dtype=np.float64)  # q_n = F(n) a + F(n+1) b
    d_b = np.array([_fib(n + 1) for n in range(m)], dtype=np.float64)
    np.testing.assert_allclose(f.to_numpy(), d_a * a.to_numpy() + d_b, rtol=1e-12)
    f.grad.fill(1.0)
    fib.grad()
    np.testing.assert_array_equal(a.grad.to_numpy(), d_a)
    np.testing.assert_array_equal(b.grad.to_numpy(), d_b)
    for param, want in ((a, d_a), (b, d_b)):
        with qd.ad.FwdMode(loss=f, param=param, seed=[1.0] * m):
            fib()
        np.testing.assert_array_equal(f.dual.to_numpy(), want)
    _fwd_rev_identity(fib, a, f)


def test_loop_carried_int_pair_indexes_globals_reverse_and_forward(arch: Any) -> None:
    n_par, m = 5, 40
    a = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    b = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    f = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)

    @qd.kernel
    def fib(n: qd.i32):
        for _ in range(n_par):
            p = 0
            q = 1
            for _ in range(n):
                p, q = q, p + q
                b[q] += a[q] * a[q]
        for i in range(m):
            f[i] += b[i]

    hits = np.zeros(m)
    p, q = 0, 1
    for _ in range(8):
        p, q = q, p + q
        hits[q] += n_par
    av = np.linspace(0.5, 1.5, m)
    a.from_numpy(av)
    fib(8)
    np.testing.assert_allclose(b.to_numpy(), hits * av * av, rtol=1e-12)
    f.grad.fill(1.0)
    fib.grad(8)
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * hits * av, rtol=1e-12)
    b.fill(0.0)
    with qd.ad.FwdMode(loss=f, param=a, seed=[1.0] * m):
        fib(8)
    np.testing.assert_allclose(f.dual.to_numpy(), 2 * hits * av, rtol=1e-12)


def test_loop_carried_int_pointer_and_integer_weight(arch: Any) -> None:
    m = 6
    a = qd.field(qd.f64, shape=m, needs_grad=True)
    b = qd.field(qd.f64, shape=m, needs_grad=True)
    c = _counts(np.arange(m))
    s_out = qd.field(qd.f64, shape=m, needs_grad=True)
    tot = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def pointer(n: qd.i32):
        for i in range(m):
            ptr = 0
            for _ in range(n):
                b[i] += a[ptr] ** 2
                ptr += 1
        for i in range(m):
            tot[None] += b[i]

    @qd.kernel
    def weighted():
        for i in range(m):
            weight = 1
            s = a[i] * 0.0
            for _ in range(c[i]):
                s += weight * a[i] + b[i]
                weight *= 10
            s_out[i] = s

    av = np.linspace(0.5, 1.0, m)
    a.from_numpy(av)
    pointer(m - 1)
    tot.grad[None] = 1.0
    pointer.grad(m - 1)
    np.testing.assert_allclose(a.grad.to_numpy(), np.r_[2 * av[:-1] * m, 0.0], rtol=1e-12)
    a.grad.fill(0.0)
    b.grad.fill(0.0)
    s_out.grad.fill(1.0)
    weighted.grad()
    np.testing.assert_array_equal(a.grad.to_numpy(), [sum(10 ** j for j in range(n)) for n in range(m)])
    np.testing.assert_array_equal(b.grad.to_numpy(), np.arange(m))


def test_sibling_loops_second_reads_the_first(arch: Any) -> None:
    m = 6
    a = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    b = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    c = _counts(np.arange(m) * 2)
    f = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)

    @qd.kernel
    def double_for():
        for i in range(m):
            weight = a[i] * 0.0 + 1.0
            for _ in range(c[i]):
                weight *= a[i]
            s = a[i] * 0.0
            for _ in range(c[i] * 2):
                s += weight + b[i]
            f[i] = s

    av = np.linspace(0.9, 1.2, m)
    cv = np.arange(m) * 2.0
    a.from_numpy(av)
    b.fill(1.0)
    double_for()
    np.testing.assert_allclose(f.to_numpy(), 2 * cv * (av ** cv + 1.0), rtol=1e-12)
    f.grad.fill(1.0)
    double_for.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), 2 * cv * cv * av ** (cv - 1), rtol=1e-12)
    np.testing.assert_allclose(b.grad.to_numpy(), 2 * cv, rtol=1e-12)
    for param, want in ((a, 2 * cv * cv * av ** (cv - 1)), (b, 2 * cv)):
        with qd.ad.FwdMode(loss=f, param=param, seed=[1.0] * m):
            double_for()
        np.testing.assert_allclose(f.dual.to_numpy(), want, rtol=1e-12)


def test_carried_weight_through_casts(arch: Any) -> None:
    m = 6
    a = qd.field(qd.f32, shape=m, needs_grad=True, needs_dual=True)
    c = _counts(np.arange(m))
    f = qd.field(qd.f32, shape=m, needs_grad=True, needs_dual=True)
    g = qd.field(qd.f32, shape=m)

    @qd.kernel
    def complex_body():
        for i in range(m):
            weight = 2.0
            tot = 0.0
            tot_weight = 0.0
            for _ in range(c[i]):
                tot_weight += weight + 1
                tot += (weight + 1) * a[i]
                weight = weight + 1
                weight = weight * 4
                weight = qd.cast(weight, qd.f64)
                weight = qd.cast(weight, qd.f32)
            g[i] = tot_weight
            f[i] = tot

    a.fill(2.0)
    complex_body()
    ws, w = [], 2.0
    for _ in range(m):
        ws.append(w + 1)
        w = (w + 1) * 4
    want = np.array([sum(ws[:n]) for n in range(m)])
    np.testing.assert_allclose(g.to_numpy(), want, rtol=1e-6)
    f.grad.fill(1.0)
    complex_body.grad()
    np.testing.assert_allclose(a.grad.to_numpy(), want, rtol=1e-6)
    with qd.ad.FwdMode(loss=f, param=a, seed=[1.0] * m):
        complex_body()
    np.testing.assert_allclose(f.dual.to_numpy(), want, rtol=1e-6)


# Accumulations into a global from nested loops, with locals reset inside them (Quadrants' "mixed inner
# loops", "inner loops local variable", "more inner", "stacked" and "stacked mixed"); loss(x) is
# n_par * (A sin(x) + B) for counts A, B that `_shape_counts` works out, so d loss / dx = n_par A cos(x).

def _shape_counts(shape: str, n1: int, n2: int, n3: int) -> tuple[int, int]:
    return {"mixed": (1 + n1, n1), "locals": (2 * n1 * n2, n1 * n2), "more": (n1 * n2 * (n3 + 1), n1 * n2),
            "stacked": (1 + 2 * n1 * n2, 2 * n1 * n2), "stacked_mixed": (1 + 3 * n1 * n2, 3 * n1 * n2)}[shape]


def _shape_kernel(shape: str, x: Any, loss: Any, n_par: int) -> Any:
    @qd.kernel
    def k(n1: qd.i32, n2: qd.i32, n3: qd.i32):
        for _ in range(n_par):
            if qd.static(shape == "mixed"):
                loss[None] += qd.sin(x[None])
                for _ in range(n1):
                    loss[None] += qd.sin(x[None]) + 1.0
            if qd.static(shape == "locals"):
                for _ in range(n1):
                    s = x[None] * 0.0
                    t = x[None] * 0.0
                    for _ in range(n2):
                        s += qd.sin(x[None]) + 1.0
                        t += qd.sin(x[None])
                    loss[None] += s + t
            if qd.static(shape == "more"):
                for _ in range(n1):
                    s = x[None] * 0.0
                    for _ in range(n2):
                        u = x[None] * 0.0
                        s += qd.sin(x[None]) + 1.0
                        for _ in range(n3):
                            u += qd.sin(x[None])
                        loss[None] += u
                    loss[None] += s
            if qd.static(shape in ("stacked", "stacked_mixed")):
                loss[None] += qd.sin(x[None])
                if qd.static(shape == "stacked_mixed"):
                    for _ in range(n1):
                        for _ in range(n2):
                            loss[None] += qd.sin(x[None]) + 1.0
                for _ in range(n1):
                    s = x[None] * 0.0
                    for _ in range(n2):
                        s += qd.sin(x[None]) + 1.0
                    loss[None] += s
                for _ in range(n1):
                    if qd.static(shape == "stacked"):
                        s = x[None] * 0.0
                        for _ in range(n2):
                            s += qd.sin(x[None]) + 1.0
                        loss[None] += s
                    else:
                        for _ in range(n2):
                            loss[None] += qd.sin(x[None]) + 1.0

    return k


@pytest.mark.parametrize("shape", ["mixed", "locals", "more", "stacked", "stacked_mixed"])
def test_accumulations_from_nested_loops_with_local_resets(arch: Any, shape: str) -> None:
    n_par, x0 = 3, 0.3
    x = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)
    k = _shape_kernel(shape, x, loss, n_par)
    x[None] = x0
    for stack_size, dims in ((0, (3, 20, 2)), (32, (3, 20, 2)), (0, (0, 5, 1))):  # sized exactly, then forced
        qd.cfg.ad_stack_size = stack_size
        n_sin, n_one = _shape_counts(shape, *dims)
        with qd.ad.Tape(loss=loss):
            k(*dims)
        assert loss[None] == pytest.approx(n_par * (n_sin * np.sin(x0) + n_one), rel=1e-12)
        assert x.grad[None] == pytest.approx(n_par * n_sin * np.cos(x0), rel=1e-12)
        loss[None] = 0.0
        x.grad[None] = 0.0
        loss.grad[None] = 1.0
        k(*dims)
        k.grad(*dims)
        assert x.grad[None] == pytest.approx(n_par * n_sin * np.cos(x0), rel=1e-12)
        with qd.ad.FwdMode(loss=loss, param=x):
            k(*dims)
        assert loss.dual[None] == pytest.approx(n_par * n_sin * np.cos(x0), rel=1e-12)


@pytest.mark.parametrize("stack_size", [0, 1])
def test_large_constant_loops(arch: Any, stack_size: int) -> None:
    qd.cfg.ad_stack_size = stack_size  # nothing is carried: even one slot is enough
    x = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)

    @qd.kernel
    def large():
        for _ in range(3):
            for _ in range(40):
                for _ in range(25):
                    loss[None] += qd.sin(x[None]) + 1.0

    x[None] = 0.7
    with qd.ad.Tape(loss=loss):
        large()
    assert loss[None] == pytest.approx(3000 * (np.sin(0.7) + 1.0), rel=1e-12)
    assert x.grad[None] == pytest.approx(3000 * np.cos(0.7), rel=1e-12)
    with qd.ad.FwdMode(loss=loss, param=x):
        large()
    assert loss.dual[None] == pytest.approx(3000 * np.cos(0.7), rel=1e-12)


def _ib_count(shape: str, n: int) -> int:
    """How often `_ib_kernel(shape)` adds x^2 to y, for bound n (a replica of its loops)."""
    c = 0
    for _ in range(2):
        c += n  # the first inner loop of every shape
        if shape == "multiple":
            c += n
        elif shape == "mixed":
            c += n * (1 + 2) + n
        elif shape == "deeper":
            c += n * 2 + n * 2 * 2
        elif shape == "inner_mixed":
            c += n * (2 + 2 * (1 + 2)) + n * 2 * 2
    return c


def _ib_kernel(shape: str, x: Any, y: Any) -> Any:
    @qd.kernel
    def k(n: qd.i32):
        for _ in range(2):
            for _ in range(n):
                y[None] += x[None] * x[None]
            if qd.static(shape == "multiple"):
                for _ in range(n):
                    y[None] += x[None] * x[None]
            if qd.static(shape == "mixed"):
                for _ in range(n):
                    y[None] += x[None] * x[None]
                    for _ in range(2):
                        y[None] += x[None] * x[None]
                for _ in range(n):
                    y[None] += x[None] * x[None]
            if qd.static(shape == "deeper"):
                for _ in range(n):
                    for _ in range(2):
                        y[None] += x[None] * x[None]
                for _ in range(n):
                    for _ in range(2):
                        for _ in range(2):
                            y[None] += x[None] * x[None]
            if qd.static(shape == "inner_mixed"):
                for _ in range(n):
                    for _ in range(2):
                        y[None] += x[None] * x[None]
                    for _ in range(2):
                        y[None] += x[None] * x[None]
                        for _ in range(2):
                            y[None] += x[None] * x[None]
                for _ in range(n):
                    for _ in range(2):
                        for _ in range(2):
                            y[None] += x[None] * x[None]

    return k


@pytest.mark.parametrize("shape", ["multiple", "mixed", "deeper", "inner_mixed"])
def test_several_inner_loop_blocks(arch: Any, shape: str) -> None:
    x = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True, needs_dual=True)
    k = _ib_kernel(shape, x, y)
    x[None] = 1.5
    for n in (3, 17):
        cnt = _ib_count(shape, n)
        y[None] = 0.0
        with qd.ad.Tape(loss=y):
            k(n)
        assert y[None] == pytest.approx(cnt * 2.25, rel=1e-12)
        assert x.grad[None] == pytest.approx(cnt * 3.0, rel=1e-12)
        with qd.ad.FwdMode(loss=y, param=x):
            k(n)
        assert y.dual[None] == pytest.approx(cnt * 3.0, rel=1e-12)


def test_several_inner_loop_blocks_bounded_by_the_outer_index(arch: Any) -> None:
    m = 10
    x = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)
    y = qd.field(qd.f64, shape=m, needs_grad=True, needs_dual=True)

    @qd.kernel
    def k():
        for j in range(m):
            for _ in range(j):
                y[j] += qd.sin(x[j])
            for _ in range(3):
                for _ in range(j):
                    y[j] += qd.sin(x[j])
            for _ in range(3):
                for _ in range(2):
                    for _ in range(j):
                        y[j] += qd.sin(x[j])

    xs = np.linspace(0.1, 1.0, m)
    x.from_numpy(xs)
    with qd.ad.FwdMode(loss=y, param=x, seed=[1.0] * m):
        k()
    np.testing.assert_allclose(y.to_numpy(), 10 * np.arange(m) * np.sin(xs), rtol=1e-12)
    np.testing.assert_allclose(y.dual.to_numpy(), 10 * np.arange(m) * np.cos(xs), rtol=1e-12)
    y.grad.fill(1.0)
    x.grad.fill(0.0)
    k.grad()
    np.testing.assert_allclose(x.grad.to_numpy(), 10 * np.arange(m) * np.cos(xs), rtol=1e-12)
    _fwd_rev_identity(k, x, y)


def test_global_overwritten_after_a_loop_and_exp_of_a_loop_sum(arch: Any) -> None:
    m = 6
    a = qd.field(qd.f64, shape=m, needs_grad=True)
    b = _counts(np.full(m, 2))
    p = qd.field(qd.f64, shape=m, needs_grad=True)
    x = qd.field(qd.f64, shape=(2, 3), needs_grad=True)
    loss = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def ib_global_load():
        for i in range(m):
            val = a[i]
            for _ in range(b[i]):
                p[i] += qd.cast(i, qd.f64)
            p[i] = val * i

    @qd.kernel
    def exp_of_sum(cols: qd.i32):
        for i in range(2):
            s = x[i, 0] * 0.0
            for j in range(cols):
                s += x[i, j]
            loss[None] += qd.exp(s)

    a.from_numpy(np.arange(m, dtype=np.float64))
    ib_global_load()
    np.testing.assert_array_equal(p.to_numpy(), np.arange(m) ** 2)
    p.grad.fill(1.0)
    ib_global_load.grad()
    np.testing.assert_array_equal(a.grad.to_numpy(), np.arange(m))
    xs = np.array([[-0.57, 0.78, 0.3], [0.45, -0.3, 0.9]])
    got = check_grad(lambda: exp_of_sum(3), lambda: exp_of_sum.grad(3), x, loss, xs)
    np.testing.assert_allclose(got, np.repeat(np.exp(xs.sum(axis=1, keepdims=True)), 3, axis=1), rtol=1e-12)


# ndarray arguments with needs_grad: `kernel.grad(arrays...)` and the Tape (test_ad_ndarray.py's loops)

@pytest.mark.parametrize("body", ["sum", "power", "fibonacci", "int_weight", "double_for"])
def test_ndarray_arguments_through_dynamic_loops(arch: Any, body: str) -> None:
    m = 8

    @qd.kernel
    def k(a: qd.types.ndarray(), b: qd.types.ndarray(), c: qd.types.ndarray(), f: qd.types.ndarray()):
        for i in range(m):
            if qd.static(body == "fibonacci"):
                p = a[i]
                q = b[i]
                for _ in range(c[i]):
                    p, q = q, p + q
                f[i] = q
            elif qd.static(body == "int_weight"):
                weight = 1
                s = a[i] * 0.0
                for _ in range(c[i]):
                    s += weight * a[i] + b[i]
                    weight *= 2
                f[i] = s
            elif qd.static(body == "double_for"):
                weight = a[i] * 0.0 + 1.0
                for _ in range(c[i]):
                    weight *= a[i]
                s = a[i] * 0.0
                for _ in range(c[i] * 2):
                    s += weight + b[i]
                f[i] = s
            else:
                ret = a[i] * 0.0 + 1.0
                for _ in range(c[i]):
                    if qd.static(body == "sum"):
                        ret += a[i] * b[i]
                    else:
                        ret = ret * a[i]
                f[i] = ret

    a = qd.ndarray(qd.f64, shape=m, needs_grad=True)
    b = qd.ndarray(qd.f64, shape=m, needs_grad=True)
    c = qd.ndarray(qd.i32, shape=m)
    f = qd.ndarray(qd.f64, shape=m, needs_grad=True)
    av, bv, cv = np.linspace(0.8, 1.2, m), np.linspace(1.0, 0.5, m), np.arange(m) * 3  # up to 21 trips
    a.from_numpy(av)
    b.from_numpy(bv)
    c.from_numpy(cv.astype(np.int32))
    k(a, b, c, f)
    f.grad.fill(1.0)
    k.grad(a, b, c, f)
    if body == "sum":
        val, da, db = 1 + cv * av * bv, cv * bv, cv * av
    elif body == "power":
        val, da, db = av ** cv, cv * av ** (cv - 1.0), np.zeros(m)
    elif body == "fibonacci":
        fa = np.array([_fib(n) for n in cv], dtype=np.float64)
        fb = np.array([_fib(n + 1) for n in cv], dtype=np.float64)
        val, da, db = fa * av + fb * bv, fa, fb
    elif body == "int_weight":
        ws = 2.0 ** cv - 1.0
        val, da, db = ws * av + cv * bv, ws, cv.astype(np.float64)
    else:
        val, da, db = 2 * cv * (av ** cv + bv), 2 * cv * cv * av ** (cv - 1.0), 2.0 * cv
    np.testing.assert_allclose(f.to_numpy(), val, rtol=1e-12)
    np.testing.assert_allclose(a.grad.to_numpy(), da, rtol=1e-12)
    np.testing.assert_allclose(b.grad.to_numpy(), db, rtol=1e-12)


def test_ndarray_loss_under_the_tape_with_nested_loops(arch: Any) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(), arr: qd.types.ndarray(), loss: qd.types.ndarray(), n1: qd.i32, n2: qd.i32):
        for _ in arr:
            loss[0] += qd.sin(x[0])
            for _ in range(n1):
                s = x[0] * 0.0
                t = x[0] * 0.0
                for _ in range(n2):
                    s += qd.sin(x[0]) + 1.0
                    t += qd.sin(x[0])
                loss[0] += s + t

    x = qd.ndarray(qd.f64, shape=(1,), needs_grad=True)
    arr = qd.ndarray(qd.f64, shape=(4,))
    loss = qd.ndarray(qd.f64, shape=(1,), needs_grad=True)
    x[0] = 0.4
    for n1, n2 in ((3, 3), (2, 19)):
        x.grad.fill(0.0)  # the Tape clears field gradients, not those of ndarrays (as in Quadrants)
        with qd.ad.Tape(loss=loss):
            k(x, arr, loss, n1, n2)
        assert loss[0] == pytest.approx(4 * (np.sin(0.4) * (1 + 2 * n1 * n2) + n1 * n2), rel=1e-12)
        assert x.grad[0] == pytest.approx(4 * np.cos(0.4) * (1 + 2 * n1 * n2), rel=1e-12)
