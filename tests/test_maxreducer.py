"""The parallel max-reducer (`qd/ad/maxreducer.py`, `qd/_sizer.pyx: eval_max_parallel`) and the sizing
caches of `qd/runtime/adstack_heap.py`: recognized `MaxOverRange`s run in parallel at any extent,
are cached until their inputs change, and are counted by Quadrants' dispatch-count hooks."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.ad import maxreducer, sizing
from qd.lang import impl

BIG = (1 << 24) + 1


def _prog():
    return impl.get_runtime().prog


def _plan(k):
    return next(v for key, v in k._instances.items() if "grad" in key)[0].adstack


def _recurrence_kernel(x, y):
    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            v = x[i % 4]
            for _ in range(a[i]):
                v = v * 0.5 + 0.25
            y[None] += v

    return k


def _grad_reference(a: np.ndarray, x0: float = 0.1) -> np.ndarray:
    g = np.zeros(4)
    np.add.at(g, np.arange(len(a)) % 4, 0.5 ** a.astype(np.float64))
    return g


def test_recognized_shape_above_the_guard_runs_in_parallel(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    k = _recurrence_kernel(x, y)
    a = np.zeros(BIG, dtype=np.int32)
    a[[3, 10_000_000, BIG - 1]] = [2, 7, 5]
    x.from_numpy(np.full(4, 0.1))
    _prog()._reset_max_reducer_dispatch_count()
    y.grad[None] = 1.0
    k.grad(a)
    assert _prog()._get_max_reducer_dispatch_count() >= 1
    assert _plan(k).sizes == [7]
    np.testing.assert_allclose(x.grad.to_numpy(), _grad_reference(a), rtol=1e-12)


def test_dispatch_count_zero_for_constant_trip_counts(arch: object) -> None:
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(4):
            v = x[i]
            for _ in range(40):  # constant: its size is a Const, nothing to reduce
                v = v * 0.95 + 0.01
            y[None] += v

    x.from_numpy(np.full(4, 0.1, np.float32))
    _prog()._reset_max_reducer_dispatch_count()
    y.grad[None] = 1.0
    k.grad()
    assert _prog()._get_max_reducer_dispatch_count() == 0
    np.testing.assert_allclose(x.grad.to_numpy(), np.full(4, 0.95 ** 40), rtol=1e-5)


def test_dispatch_advances_on_host_and_kernel_writes_only(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    k = _recurrence_kernel(x, y)
    a = qd.ndarray(qd.i32, shape=(8,))
    a.from_numpy(np.array([2, 3, 1, 2, 0, 0, 1, 1], np.int32))

    @qd.kernel
    def bump(a: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] += 1

    x.from_numpy(np.full(4, 0.1))
    prog = _prog()
    prog._reset_max_reducer_dispatch_count()
    y.grad[None] = 1.0
    k.grad(a)
    first = prog._get_max_reducer_dispatch_count()
    assert first >= 1
    k.grad(a)  # unchanged input: cached, no dispatch, no sizing at all
    assert prog._get_max_reducer_dispatch_count() == first
    a[0] = 6  # a host write
    x.grad.fill(0.0)
    k.grad(a)
    assert prog._get_max_reducer_dispatch_count() > first and _plan(k).sizes == [6]
    np.testing.assert_allclose(x.grad.to_numpy(), _grad_reference(a.to_numpy()), rtol=1e-12)
    second = prog._get_max_reducer_dispatch_count()
    bump(a)  # a kernel write bumps the generation too
    x.grad.fill(0.0)
    k.grad(a)
    assert prog._get_max_reducer_dispatch_count() > second and _plan(k).sizes == [7]
    np.testing.assert_allclose(x.grad.to_numpy(), _grad_reference(a.to_numpy()), rtol=1e-12)


def test_field_bound_multi_axis_spec(arch: object) -> None:
    x = qd.field(qd.f64, shape=(3, 5), needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    n = qd.field(qd.i32, shape=(3, 5))
    counts = np.arange(15, dtype=np.int32).reshape(3, 5) % 7
    n.from_numpy(counts)

    @qd.kernel
    def k():
        for i, j in qd.ndrange(3, 5):
            v = x[i, j]
            for _ in range(n[i, j]):
                v = v * 0.5 + 0.25
            y[None] += v

    _prog()._reset_max_reducer_dispatch_count()
    y.grad[None] = 1.0
    k.grad()
    assert _prog()._get_max_reducer_dispatch_count() >= 1 and _plan(k).sizes == [6]
    np.testing.assert_allclose(x.grad.to_numpy(), 0.5 ** counts, rtol=1e-12)


def test_template_instantiations_keep_their_own_caches(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y1 = qd.field(qd.f64, shape=(), needs_grad=True)
    y2 = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i32, ndim=1), y: qd.template()):
        for i in range(a.shape[0]):
            v = x[i % 4]
            for _ in range(a[i]):
                v = v * 0.5 + 0.25
            y[None] += v

    a = qd.ndarray(qd.i32, shape=(4,))
    a.from_numpy(np.array([1, 2, 3, 4], np.int32))
    y1.grad[None] = 1.0
    y2.grad[None] = 1.0
    k.grad(a, y1)
    b = qd.ndarray(qd.i32, shape=(4,))
    b.from_numpy(np.array([9, 0, 0, 0], np.int32))
    k.grad(b, y2)
    plans = [v[0].adstack for key, v in k._instances.items() if "grad" in key]
    assert len(plans) == 2 and sorted(p.sizes[0] for p in plans) == [4, 9]


def test_recognizer_grammar() -> None:
    i = sizing.SizeExpr("BoundVariable", var="i")
    j = sizing.SizeExpr("BoundVariable", var="j")
    shape = sizing.SizeExpr("ExternalTensorShape", value=0)
    read_i = sizing.SizeExpr("ExternalTensorRead", (i,), value=0)
    read_j = sizing.SizeExpr("ExternalTensorRead", (j,), value=0)
    zero = sizing.const(0)
    flat = sizing.SizeExpr("MaxOverRange", (zero, shape, read_i), var="i")
    assert len(maxreducer.recognize(sizing.serialise(flat))) == 1
    multi = sizing.SizeExpr("MaxOverRange", (zero, shape, sizing.SizeExpr("MaxOverRange", (zero, sizing.const(3),
                            sizing.SizeExpr("Add", (read_i, j))), var="j")), var="i")
    assert len(maxreducer.recognize(sizing.serialise(multi))) == 1
    triangular = sizing.SizeExpr("MaxOverRange", (zero, shape, sizing.SizeExpr("MaxOverRange", (zero, read_i, read_j),
                                 var="j")), var="i")
    assert maxreducer.recognize(sizing.serialise(triangular)) == []
    assert maxreducer.recognize(sizing.serialise(sizing.const(5))) == []


@pytest.mark.parametrize("n", [0, 1, 1000, 1 << 20])
def test_parallel_evaluator_matches_the_serial_walk(n: int) -> None:
    from qd import _sizer

    rng = np.random.default_rng(n)
    arr = rng.integers(-50, 1000, size=max(n, 1)).astype(np.int64)[:n] if n else np.zeros(0, np.int64)
    i = sizing.SizeExpr("BoundVariable", var="i")
    body = sizing.SizeExpr("Sub", (sizing.SizeExpr("ExternalTensorRead", (i,), value=0), sizing.const(3)))
    e = sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.SizeExpr("ExternalTensorShape", value=0), body),
                        var="i")
    code = np.array(sizing.serialise(e), dtype=np.int64)
    args = np.zeros(1, np.int64)
    want = max(0, int(arr.max()) - 3) if n else 0
    assert _sizer.eval_max_parallel(code, [arr], args, 2) == want
    assert _sizer.eval_size(code, [arr], args) == want


@pytest.mark.parametrize("gate_dtype", ["i32", "f32"])
def test_gate_bounds_the_size_by_passing_iterations(arch: object, gate_dtype: str) -> None:
    x = qd.field(qd.f64, shape=8, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    sel = qd.field(getattr(qd, gate_dtype), shape=8)
    n = qd.field(qd.i32, shape=8)
    counts = np.array([50, 2, 3, 40, 1, 0, 4, 30], np.int32)
    on = np.array([0, 1, 1, 0, 1, 1, 1, 0])
    n.from_numpy(counts)
    sel.from_numpy(on.astype(sel.to_numpy().dtype))

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            if sel[i] > 0:
                for _ in range(n[i]):
                    v = v * 0.5 + 0.25
            y[None] += v

    _prog()._reset_max_reducer_dispatch_count()
    y.grad[None] = 1.0
    k.grad()
    assert _plan(k).sizes == [4]  # the gated-out iterations' 50, 40, 30 need no slots
    assert _prog()._get_max_reducer_dispatch_count() >= 1
    np.testing.assert_allclose(x.grad.to_numpy(), np.where(on > 0, 0.5 ** counts, 1.0), rtol=1e-12)
    sel[0] = 1  # the gate opens for a long loop: sized again
    x.grad.fill(0.0)
    k.grad()
    assert _plan(k).sizes == [50]


def test_else_branch_gate_and_ungateable_condition(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    n = qd.field(qd.i32, shape=4)
    n.from_numpy(np.array([9, 2, 7, 3], np.int32))

    @qd.kernel
    def k():
        for i in x:
            v = x[i]
            if i % 2 == 0:
                pass
            else:
                for _ in range(n[i]):  # only odd i run the loop: 2 and 3
                    v = v * 0.5 + 0.25
            if x[i] * x[i] > 100.0:  # a computed float: not evaluable before the launch, so no gate
                for _ in range(n[i]):
                    v = v * 0.5
            y[None] += v

    x.from_numpy(np.full(4, 0.5))
    y.grad[None] = 1.0
    k.grad()
    assert sorted(_plan(k).sizes) == [3, 9]
    np.testing.assert_allclose(x.grad.to_numpy(), [1.0, 0.25, 1.0, 0.125], rtol=1e-12)


# ------------------------------------------------------------------ the generated-kernel path (GPU tiers' design)


@pytest.mark.parametrize("wide", [True, False])
def test_spec_as_a_qd_kernel_matches_the_cython_reduction(arch: object, monkeypatch: pytest.MonkeyPatch,
                                                          wide: bool) -> None:
    from qd.runtime import adstack_heap

    x = qd.field(qd.f64, shape=(3, 5), needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    n = qd.ndarray(qd.i64, shape=(3, 5))
    sel = qd.field(qd.f32, shape=(3, 5))
    counts = (np.arange(15, dtype=np.int64).reshape(3, 5) * 7) % 11
    n.from_numpy(counts)
    sel.from_numpy((counts % 2).astype(np.float32))

    @qd.kernel
    def k(n: qd.types.ndarray(dtype=qd.i64, ndim=2), lo: qd.i32):
        for i, j in qd.ndrange(3, 5):
            v = x[i, j]
            if sel[i, j] > 0.5:
                for _ in range(lo, n[i, j] + lo):
                    v = v * 0.5 + 0.25
            y[None] += v

    y.grad[None] = 1.0
    k.grad(n, 2)
    cython_sizes = list(_plan(k).sizes)
    monkeypatch.setattr(adstack_heap, "MAXREDUCER_TASKS", True)
    monkeypatch.setattr(adstack_heap, "MAXREDUCER_WIDE", wide)
    n[0, 1] = 9  # a host write (to a gated-in cell): sized again, now by the generated kernel
    x.grad.fill(0.0)
    k.grad(n, 2)
    plan = _plan(k)
    # the generated kernel of this width sized the second launch (on a GPU arch the first launch's sizes came
    # from the device's own variant already: "cython_sizes" are then the device's)
    assert [key[1] for key in plan.task_kernels][-1] == wide
    gate = counts % 2 == 1  # sel was set from the first counts
    want = int(np.max(np.where(gate, n.to_numpy(), 0)))
    assert cython_sizes == [int(np.max(np.where(gate, counts, 0)))] and plan.sizes == [want]
    np.testing.assert_allclose(x.grad.to_numpy(), np.where(gate, 0.5 ** n.to_numpy(), 1.0), rtol=1e-12)


def test_32_bit_reducer_refuses_a_value_it_cannot_hold(arch: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from qd.runtime import adstack_heap

    monkeypatch.setattr(adstack_heap, "MAXREDUCER_TASKS", True)
    monkeypatch.setattr(adstack_heap, "MAXREDUCER_WIDE", False)
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)

    @qd.kernel
    def k(a: qd.types.ndarray(dtype=qd.i64, ndim=1)):
        for i in range(a.shape[0]):
            v = x[i % 4]
            for _ in range(a[i]):
                v = v * 0.5
            y[None] += v

    a = np.array([1, 2, (1 << 33) + 5, 3], dtype=np.int64)
    with pytest.raises(RuntimeError, match="does not fit the 32-bit max-reducer"):
        k.grad(a)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
@pytest.mark.parametrize("shift", [("Sub", 3), ("Add", 2), (None, 0)])
def test_plain_read_fast_path_matches_the_walk(dtype: type, shift: tuple) -> None:
    from qd import _sizer

    rng = np.random.default_rng(7)
    arr = rng.integers(0, 100, size=50_000).astype(dtype)
    i = sizing.SizeExpr("BoundVariable", var="i")
    read = sizing.SizeExpr("ExternalTensorRead", (i,), value=0)
    body = read if shift[0] is None else sizing.SizeExpr(shift[0], (read, sizing.const(shift[1])))
    for lo, hi in [(0, 50_000), (123, 40_000), (7, 7)]:
        e = sizing.SizeExpr("MaxOverRange", (sizing.const(lo), sizing.const(hi), body), var="i")
        code = np.array(sizing.serialise(e), dtype=np.int64)
        args = np.zeros(1, np.int64)
        assert _sizer.eval_max_parallel(code, [arr], args, 2) == _sizer.eval_size(code, [arr], args)
    e = sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.const(50_001), body), var="i")
    with pytest.raises(RuntimeError, match="out of range"):
        _sizer.eval_max_parallel(np.array(sizing.serialise(e), dtype=np.int64), [arr], np.zeros(1, np.int64), 2)


# ------------------------------------------------------------------ ranges nested in a spec's body


def _gated_nest(x, y, follows_i: bool):
    if follows_i:
        @qd.kernel
        def nest(sel: qd.types.ndarray(dtype=qd.i32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1), m: qd.i32):
            for i in range(sel.shape[0]):
                if sel[i] > 0:  # the gate keeps the j range out of the spec's chain of axes
                    for j in range(m):
                        v = x[j % 4]
                        for _ in range(b[j] + i % 3):
                            v = v * 0.5 + 0.25
                        y[None] += v
        return nest

    @qd.kernel
    def nest(sel: qd.types.ndarray(dtype=qd.i32, ndim=1), b: qd.types.ndarray(dtype=qd.i32, ndim=1), m: qd.i32):
        for i in range(sel.shape[0]):
            if sel[i] > 0:
                for j in range(m):
                    v = x[j % 4]
                    for _ in range(b[j]):
                        v = v * 0.5 + 0.25
                    y[None] += v
    return nest


def test_range_nested_in_a_spec_body_is_sized_and_bounded(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    k = _gated_nest(x, y, True)
    rng = np.random.default_rng(11)
    sel, b = rng.integers(0, 2, 64).astype(np.int32), rng.integers(0, 6, 8).astype(np.int32)
    y.grad[None] = 1.0
    k.grad(sel, b, 8)
    want = max(int(b[j]) + i % 3 for i in range(64) if sel[i] > 0 for j in range(8))
    assert _plan(k).sizes == [want]
    # 2^15 gated rows times a range of 2^14 that follows the row: 2^29 nested iterations, refused up front
    with pytest.raises(qd.QuadrantsRuntimeError, match="guard of nested walks") as e:
        k.grad(np.zeros(1 << 15, np.int32), np.zeros(1 << 14, np.int32), 1 << 14)
    assert "kernel nest" in str(e.value) and "ad_stack_size" in str(e.value)


def test_self_contained_range_in_a_spec_body_is_evaluated_once(arch: object) -> None:
    x = qd.field(qd.f64, shape=4, needs_grad=True)
    y = qd.field(qd.f64, shape=(), needs_grad=True)
    k = _gated_nest(x, y, False)
    sel, b = np.zeros(1 << 19, np.int32), (np.arange(1 << 10) % 5).astype(np.int32)
    sel[12345] = 1  # one row passes: the kernel itself is small, the size's nest is 2^29 if walked per row
    x.from_numpy(np.full(4, 0.1))
    y.grad[None] = 1.0
    k.grad(sel, b, 1 << 10)
    assert _plan(k).sizes == [4]
    per_j = 0.5 ** b.astype(np.float64)
    np.testing.assert_allclose(x.grad.to_numpy(), [per_j[j::4].sum() for j in range(4)], rtol=1e-12)
