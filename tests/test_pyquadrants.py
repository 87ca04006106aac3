"""`qd.lang.impl.PyQuadrants` (`materialize`, `clear`, called where Quadrants calls them, through the class so a
replaced method runs) and `qd.lang._template_mapper` (builtins' `__debug__`, the switch of the launch-time checks
of Quadrants ndarray arguments)."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import qd
from qd.lang import impl


class _DeferredFills:
    """Genesis' pattern (genesis/utils/array_class.py): 0-d field fills wait for the next materialization, the
    pending list is emptied before it is replayed, and a reset drops it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pending: list[tuple[Any, Any]] = []
        self.calls: list[str] = []
        materialize, clear = impl.PyQuadrants.materialize, impl.PyQuadrants.clear

        def materialize_then_fill(rt: impl.PyQuadrants) -> None:
            self.calls.append("materialize")
            materialize(rt)
            fills = self.pending.copy()
            self.pending.clear()
            for tensor, value in fills:
                tensor.fill(value)
            if fills:
                rt.prog.synchronize()

        def clear_then_drop(rt: impl.PyQuadrants) -> None:
            self.calls.append("clear")
            clear(rt)
            self.pending.clear()

        monkeypatch.setattr(impl.PyQuadrants, "materialize", materialize_then_fill)
        monkeypatch.setattr(impl.PyQuadrants, "clear", clear_then_drop)

    def scalar(self, dtype: Any, value: Any) -> Any:
        f = qd.field(dtype, shape=())
        self.pending.append((f, value))
        return f


def test_runtime_object(qd_program: object) -> None:
    rt = impl.get_runtime()
    assert isinstance(rt, impl.PyQuadrants) and rt is impl.get_runtime()
    assert callable(impl.PyQuadrants.materialize) and callable(impl.PyQuadrants.clear)
    rt.prog.synchronize()
    rt.sync()


def test_deferred_fills_reach_kernels(arch: object, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _DeferredFills(monkeypatch)
    a, b = d.scalar(qd.f32, 2.5), d.scalar(qd.i32, 7)
    assert len(d.pending) == 2

    @qd.kernel
    def k(out: qd.types.ndarray(qd.f32, 1)) -> None:
        for i in out:
            out[i] = a[None] * b[None] + i

    out = np.zeros(3, np.float32)
    k(out)
    np.testing.assert_array_equal(out, [17.5, 18.5, 19.5])
    assert not d.pending
    c = d.scalar(qd.f32, -1.0)  # declared after the kernel compiled: its next call takes the Python path

    @qd.kernel
    def g(out: qd.types.ndarray(qd.f32, 1), s: qd.template()) -> None:
        for i in out:
            out[i] = s[None]

    g(out, c)
    np.testing.assert_array_equal(out, [-1.0, -1.0, -1.0])


def test_deferred_fills_reach_host_reads(qd_program: object, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _DeferredFills(monkeypatch)
    a = d.scalar(qd.f32, 4.0)
    assert a[None] == 4.0  # a host element read materializes while a field is pending
    b = d.scalar(qd.i32, 9)
    v = qd.field(qd.f32, shape=(2, 3))
    assert v.to_numpy().sum() == 0 and b.to_numpy() == 9  # so does every bulk host operation on a field
    n = d.calls.count("materialize")
    v.fill(1.0)
    assert d.calls.count("materialize") == n + 1  # Quadrants materializes before every field fill
    qd.sync()
    assert d.calls.count("materialize") == n + 2  # and at qd.sync()


def test_compile_materializes_and_reset_clears(qd_program: object, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _DeferredFills(monkeypatch)
    x = qd.ndarray(qd.i32, 3)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)) -> None:
        for i in x:
            x[i] = i

    k(x)
    assert d.calls == ["materialize"]  # a compile materializes, as in Quadrants, even with nothing pending
    k(x)
    assert d.calls == ["materialize"]  # a launch of a compiled instance does not
    d.scalar(qd.f32, 1.0)
    qd.reset()
    assert d.calls[-1] == "clear" and not d.pending
    qd.init(arch=qd.interp, log_level="warn")
    assert d.calls[-1] == "clear"  # qd.init resets first


@pytest.fixture
def no_arg_checks() -> Iterator[None]:
    qd.lang._template_mapper.__builtins__["__debug__"] = False
    try:
        yield
    finally:
        qd.lang._template_mapper.__builtins__["__debug__"] = True


def test_template_mapper_builtins_is_the_process_builtins() -> None:
    assert qd.lang._template_mapper.__builtins__ is builtins.__dict__
    assert qd.lang._template_mapper.arg_checks()


def test_arg_checks_switched_off(arch: object, no_arg_checks: None) -> None:
    """Genesis outside debug mode: a qd.ndarray of another dtype than the annotation's is taken as it is (its
    instance is compiled for i32, as Quadrants does); numpy arrays are still checked."""

    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, 1)) -> None:
        for i in a:
            a[i] = a[i] * 3 + 1

    x = qd.ndarray(qd.i32, 4)
    x.from_numpy(np.array([1, 2, -3, 7], np.int32))
    k(x)
    k(x)
    np.testing.assert_array_equal(x.to_numpy(), [13, 22, -23, 67])
    assert x.to_numpy().dtype == np.int32
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="expected an ndarray of dtype f32"):
        k(np.zeros(4, np.int32))
    qd.lang._template_mapper.__builtins__["__debug__"] = True
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match="expected an ndarray of dtype f32, got i32"):
        k(qd.ndarray(qd.i32, 4))


def test_last_call_queries(arch: object) -> None:
    """Quadrants' `prog.get_num_offloaded_tasks_on_last_call()` and graph-cache queries (its test_graph.py reads
    them): the tasks of the instance launched last, through the Python path and through the plan alike; no graph on
    a tier that makes none (the CUDA tier's graphs: tests/test_cuda_launch.py)."""
    import numpy as np

    from qd.lang import impl

    prog = impl.get_runtime().prog

    @qd.kernel(graph=True)
    def three(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] += 1.0
        for i in x:
            x[i] *= 2.0
        x[0] = 0.0

    @qd.kernel
    def one(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = 1.0

    x = qd.ndarray(qd.f32, (8,))
    for _ in range(3):  # (the first call takes the Python path, the later ones the plan)
        three(x)
        assert prog.get_num_offloaded_tasks_on_last_call() == 3
        one(x)
        assert prog.get_num_offloaded_tasks_on_last_call() == 1
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8, np.float32))
    if qd.cfg.arch is not qd.cuda:
        assert prog.get_graph_cache_size() == 0 and not prog.get_graph_cache_used_on_last_call()
        assert prog.get_graph_num_nodes_on_last_call() == 0
