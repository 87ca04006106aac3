"""`while qd.graph.do_while(counter):` in `@qd.kernel(graph=True)` kernels, on every tier.

Ported from Quadrants' `tests/python/test_graph_do_while.py` (each test names its source test): the loop bodies,
counters and expected values are theirs; the checks of Quadrants' CUDA-graph cache (taken there only on CUDA SM 9.0+)
become checks that qd reports no graph (it has none: the launch repeats the loop's tasks). qd's own tests follow:
do-while semantics, errors for misuse, and reverse mode refusing such a kernel.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import qd
from qd.lang import impl


def _nd(dtype: object, value: object, shape: tuple = ()) -> object:
    a = qd.ndarray(dtype, shape=shape)
    a.from_numpy(np.asarray(value, dtype=np.int32 if dtype is qd.i32 else np.float32).reshape(shape)
                 if shape == () else np.asarray(value, dtype=np.int32 if dtype is qd.i32 else np.float32))
    return a


def _i32(value: int) -> object:
    a = qd.ndarray(qd.i32, shape=())
    a.from_numpy(np.array(value, dtype=np.int32))
    return a


def _zeros(n: int, dtype: object = qd.i32) -> object:
    a = qd.ndarray(dtype, shape=(n,))
    a.from_numpy(np.zeros(n, np.int32 if dtype is qd.i32 else np.float32))
    return a


def test_counter(arch: object) -> None:
    """Quadrants: test_graph_do_while_counter (twice, 5 then 10 iterations); no CUDA graph is reported."""
    @qd.kernel(graph=True)
    def graph_loop(x: qd.types.ndarray(qd.i32, ndim=1), counter: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            for i in range(1):
                counter[()] = counter[()] - 1

    for iters in (5, 10):
        x, counter = _zeros(64), _i32(iters)
        graph_loop(x, counter)
        assert counter.to_numpy() == 0
        np.testing.assert_array_equal(x.to_numpy(), np.full(64, iters, np.int32))
    for more in (3, 1, 4):  # the same arrays again (the armed launch plan): the counter is read afresh each time
        counter.from_numpy(np.array(more, dtype=np.int32))
        graph_loop(x, counter)
        iters += more
        np.testing.assert_array_equal(x.to_numpy(), np.full(64, iters, np.int32))
    prog = impl.get_runtime().prog
    assert prog.get_graph_cache_size() == 0 and not prog.get_graph_cache_used_on_last_call()
    assert prog.get_graph_total_builds() == 0


def test_with_bounds_checks(arch: object) -> None:
    """Quadrants: test_graph_do_while_with_bounds_checks_iterates_correctly (debug=True inserts checks)."""
    qd.reset()
    qd.init(arch=arch, debug=True, check_out_of_bound=True, log_level="warn", enable_fallback=False)

    @qd.kernel(graph=True)
    def graph_loop_checked(x: qd.types.ndarray(qd.i32, ndim=1), counter: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(counter):
            for i in qd.static(range(8)):
                x[i] = x[i] + 1
            for i in range(1):
                counter[()] = counter[()] - 1

    x, counter = _zeros(8), _i32(5)
    graph_loop_checked(x, counter)
    assert counter.to_numpy() == 0
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 5, np.int32))


def test_boolean_done(arch: object) -> None:
    """Quadrants: test_graph_do_while_boolean_done (a keep-going flag the body clears)."""
    @qd.kernel(graph=True)
    def increment_until_threshold(x: qd.types.ndarray(qd.i32, ndim=1), threshold: qd.i32,
                                  keep_going: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(keep_going):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            for i in range(1):
                if x[0] >= threshold:
                    keep_going[()] = 0

    for threshold in (7, 12):
        x, keep_going = _zeros(64), _i32(1)
        increment_until_threshold(x, threshold, keep_going)
        assert keep_going.to_numpy() == 0
        np.testing.assert_array_equal(x.to_numpy(), np.full(64, threshold, np.int32))


def test_multiple_loops(arch: object) -> None:
    """Quadrants: test_graph_do_while_multiple_loops."""
    @qd.kernel(graph=True)
    def multi_loop(x: qd.types.ndarray(qd.f32, ndim=1), y: qd.types.ndarray(qd.f32, ndim=1),
                   counter: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1.0
            for i in range(y.shape[0]):
                y[i] = y[i] + 2.0
            for i in range(1):
                counter[()] = counter[()] - 1

    for iters in (10, 5):
        x, y, counter = _zeros(32, qd.f32), _zeros(32, qd.f32), _i32(iters)
        multi_loop(x, y, counter)
        assert counter.to_numpy() == 0
        np.testing.assert_allclose(x.to_numpy(), np.full(32, float(iters)))
        np.testing.assert_allclose(y.to_numpy(), np.full(32, 2.0 * iters))


@qd.kernel(graph=True)
def _step(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
    while qd.graph.do_while(c):
        for i in range(x.shape[0]):
            x[i] = x[i] + 1
        for i in range(1):
            c[()] = c[()] - 1


def test_swap_and_alternate_counter_ndarrays(arch: object) -> None:
    """Quadrants: test_graph_do_while_swap_counter_ndarray and test_graph_do_while_alternate_counter_ndarrays."""
    c1, c2 = qd.ndarray(qd.i32, shape=()), qd.ndarray(qd.i32, shape=())
    for count in (2, 3, 4):
        for c, n in ((c1, count), (c2, count + 10)):
            x = _zeros(16)
            c.from_numpy(np.array(n, np.int32))
            _step(x, c)
            assert c.to_numpy() == 0
            np.testing.assert_array_equal(x.to_numpy(), np.full(16, n, np.int32))


def test_numpy_arguments(arch: object) -> None:
    """qd: numpy arrays as the counter and the data (copied in and back like any ndarray argument)."""
    x, c = np.zeros(8, np.int32), np.array(6, np.int32)
    _step(x, c)
    assert int(c) == 0
    np.testing.assert_array_equal(x, np.full(8, 6, np.int32))


@dataclasses.dataclass
class Params:
    x: qd.types.NDArray[qd.i32, 1]
    counter: qd.types.NDArray[qd.i32, 0]


def test_dataclass_member_counter(arch: object) -> None:
    """Quadrants: test_graph_do_while_with_dataclass_member_counter."""
    @qd.kernel(graph=True)
    def step(params: Params):
        while qd.graph.do_while(params.counter):
            for i in range(params.x.shape[0]):
                params.x[i] = params.x[i] + 1
            for _ in range(1):
                params.counter[()] = params.counter[()] - 1

    params = Params(x=_zeros(4), counter=_i32(3))
    step(params)
    np.testing.assert_array_equal(params.x.to_numpy(), np.full(4, 3, np.int32))
    assert params.counter.to_numpy() == 0


def test_data_oriented_members(arch: object) -> None:
    """Quadrants: test_graph_do_while_with_data_oriented_member_counter and ..._member_nested."""
    @qd.data_oriented
    class Sim:
        def __init__(self) -> None:
            self.x = _zeros(4)
            self.outer, self.inner, self.inner_start = _i32(3), _i32(2), _i32(2)
            self.counter = _i32(3)

        @qd.kernel(graph=True)
        def nested(self):
            while qd.graph.do_while(self.outer):
                for _ in range(1):
                    self.inner[()] = self.inner_start[()]
                while qd.graph.do_while(self.inner):
                    for i in range(self.x.shape[0]):
                        self.x[i] = self.x[i] + 1
                    for _ in range(1):
                        self.inner[()] = self.inner[()] - 1
                for _ in range(1):
                    self.outer[()] = self.outer[()] - 1

        @qd.kernel(graph=True)
        def single(self):
            while qd.graph.do_while(self.counter):
                for i in range(self.x.shape[0]):
                    self.x[i] = self.x[i] + 1
                for _ in range(1):
                    self.counter[()] = self.counter[()] - 1

    sim = Sim()
    sim.nested()
    np.testing.assert_array_equal(sim.x.to_numpy(), np.full(4, 6, np.int32))
    assert sim.outer.to_numpy() == 0
    sim.single()
    np.testing.assert_array_equal(sim.x.to_numpy(), np.full(4, 9, np.int32))
    assert sim.counter.to_numpy() == 0


def nested_two() -> object:
    """Quadrants' two-level kernel: `x` gains outer x n_inner."""
    @qd.kernel(graph=True)
    def two(x: qd.types.ndarray(qd.i32, ndim=1), outer: qd.types.ndarray(qd.i32, ndim=0),
            inner: qd.types.ndarray(qd.i32, ndim=0), n_inner: qd.i32):
        while qd.graph.do_while(outer):
            for _ in range(1):
                inner[()] = n_inner
            while qd.graph.do_while(inner):
                for i in range(x.shape[0]):
                    x[i] = x[i] + 1
                for _ in range(1):
                    inner[()] = inner[()] - 1
            for _ in range(1):
                outer[()] = outer[()] - 1

    return two


def test_nested_two_and_three_levels(arch: object) -> None:
    """Quadrants: test_graph_do_while_nested_two_levels and test_graph_do_while_nested_three_levels."""
    two = nested_two()
    for n_outer, n_inner in ((3, 4), (5, 2)):
        x, outer, inner = _zeros(32), _i32(n_outer), _i32(0)
        two(x, outer, inner, n_inner)
        assert outer.to_numpy() == 0
        np.testing.assert_array_equal(x.to_numpy(), np.full(32, n_outer * n_inner, np.int32))

    @qd.kernel(graph=True)
    def three(x: qd.types.ndarray(qd.i32, ndim=1), a: qd.types.ndarray(qd.i32, ndim=0),
              b: qd.types.ndarray(qd.i32, ndim=0), c: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(a):
            for _ in range(1):
                b[()] = 3
            while qd.graph.do_while(b):
                for _ in range(1):
                    c[()] = 2
                while qd.graph.do_while(c):
                    for i in range(x.shape[0]):
                        x[i] = x[i] + 1
                    for _ in range(1):
                        c[()] = c[()] - 1
                for _ in range(1):
                    b[()] = b[()] - 1
            for _ in range(1):
                a[()] = a[()] - 1

    x, a = _zeros(16), _i32(2)
    three(x, a, _i32(0), _i32(0))
    assert a.to_numpy() == 0
    np.testing.assert_array_equal(x.to_numpy(), np.full(16, 2 * 3 * 2, np.int32))


def test_siblings_and_top_level_for_loops(arch: object) -> None:
    """Quadrants: test_graph_do_while_siblings and test_graph_do_while_mixed_with_top_level_for_loops."""
    @qd.kernel(graph=True)
    def siblings(x: qd.types.ndarray(qd.i32, ndim=1), y: qd.types.ndarray(qd.i32, ndim=1),
                 c1: qd.types.ndarray(qd.i32, ndim=0), c2: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(c1):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            for _ in range(1):
                c1[()] = c1[()] - 1
        while qd.graph.do_while(c2):
            for i in range(y.shape[0]):
                y[i] = y[i] + 2
            for _ in range(1):
                c2[()] = c2[()] - 1

    x, y = _zeros(24), _zeros(24)
    siblings(x, y, _i32(5), _i32(3))
    np.testing.assert_array_equal(x.to_numpy(), np.full(24, 5, np.int32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(24, 6, np.int32))

    @qd.kernel(graph=True)
    def mixed(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
        for i in range(x.shape[0]):
            x[i] = x[i] + 100
        while qd.graph.do_while(c):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            for _ in range(1):
                c[()] = c[()] - 1
        for i in range(x.shape[0]):
            x[i] = x[i] * 2

    x, c = _zeros(20), _i32(5)
    mixed(x, c)
    assert c.to_numpy() == 0
    np.testing.assert_array_equal(x.to_numpy(), np.full(20, (100 + 5) * 2, np.int32))


def test_nested_mixed_and_dynamic_bounds(arch: object) -> None:
    """Quadrants: test_graph_do_while_nested_mixed_with_for_loops and test_graph_do_while_nested_dynamic_bounds."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), n: qd.types.ndarray(qd.i32, ndim=0),
          outer: qd.types.ndarray(qd.i32, ndim=0), inner: qd.types.ndarray(qd.i32, ndim=0)):
        for i in range(x.shape[0]):
            x[i] = x[i] + 1000
        while qd.graph.do_while(outer):
            for _ in range(1):
                inner[()] = 3
            for i in range(x.shape[0]):
                x[i] = x[i] + 10
            while qd.graph.do_while(inner):
                for i in range(n[()]):  # a bound read from device memory
                    x[i] = x[i] + 1
                for _ in range(1):
                    inner[()] = inner[()] - 1
            for _ in range(1):
                outer[()] = outer[()] - 1

    x, outer = _zeros(32), _i32(4)
    k(x, _i32(16), outer, _i32(0))
    want = np.full(32, 1000 + 4 * 10, np.int32)
    want[:16] += 4 * 3
    np.testing.assert_array_equal(x.to_numpy(), want)
    assert outer.to_numpy() == 0


def test_bare_statements_run_at_their_level(arch: object) -> None:
    """Quadrants: test_graph_do_while_bare_top_level_statement_runs_once and
    test_graph_do_while_bare_statement_in_nested_body_runs_every_iteration."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), seen: qd.types.ndarray(qd.i32, ndim=0),
          c: qd.types.ndarray(qd.i32, ndim=0)):
        seen[()] = seen[()] + 1
        x[0] = 100
        while qd.graph.do_while(c):
            x[1] = x[1] + 1
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            c[()] = c[()] - 1

    x, seen, c = _zeros(8), _i32(0), _i32(5)
    k(x, seen, c)
    assert seen.to_numpy() == 1 and c.to_numpy() == 0
    np.testing.assert_array_equal(x.to_numpy(), [105, 10, 5, 5, 5, 5, 5, 5])


def test_funcs_at_top_level_and_in_the_body(arch: object) -> None:
    """Quadrants: test_graph_do_while_top_level_func_call_keeps_parallelism and
    test_graph_do_while_trailing_serial_func_runs_once."""
    @qd.func
    def add_one(x: qd.types.ndarray(qd.i32, ndim=1)):
        for i in range(x.shape[0]):
            x[i] = x[i] + 1

    @qd.func
    def seed(x: qd.types.ndarray(qd.i32, ndim=1), acc: qd.types.ndarray(qd.i32, ndim=0)):
        for i in range(x.shape[0]):
            x[i] = x[i] + 10
        acc[()] = acc[()] + 1

    @qd.kernel(graph=True)
    def step(x: qd.types.ndarray(qd.i32, ndim=1), acc: qd.types.ndarray(qd.i32, ndim=0),
             c: qd.types.ndarray(qd.i32, ndim=0)):
        seed(x, acc)
        add_one(x)
        while qd.graph.do_while(c):
            add_one(x)
            c[()] = c[()] - 1

    x, acc, c = _zeros(16), _i32(0), _i32(4)
    step(x, acc, c)
    assert acc.to_numpy() == 1 and c.to_numpy() == 0
    np.testing.assert_array_equal(x.to_numpy(), np.full(16, 10 + 1 + 4, np.int32))


def test_loop_config_allowed(arch: object) -> None:
    """Quadrants: test_graph_do_while_loop_config_allowed."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
        qd.loop_config(block_dim=8)
        for i in range(x.shape[0]):
            x[i] = 0
        while qd.graph.do_while(c):
            qd.loop_config(block_dim=8)
            for i in range(x.shape[0]):
                x[i] = x[i] + 1
            for _ in range(1):
                c[()] = c[()] - 1

    x = _zeros(16)
    x.from_numpy(np.full(16, 99, np.int32))
    c = _i32(4)
    k(x, c)
    np.testing.assert_array_equal(x.to_numpy(), np.full(16, 4, np.int32))


def test_body_runs_once_before_the_first_test(arch: object) -> None:
    """qd: a do-while (Quadrants' documented semantics): with the counter already 0 the body still runs once."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(c):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1

    x = _zeros(8)
    k(x, _i32(0))
    np.testing.assert_array_equal(x.to_numpy(), np.ones(8, np.int32))


def test_local_carried_across_iterations(arch: object) -> None:
    """qd: a kernel-scope local lives across the iterations and the tasks (its temp slot is zeroed once)."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
        total = 0
        while qd.graph.do_while(c):
            for i in range(x.shape[0]):
                total += i
            c[()] = c[()] - 1
        x[0] = total

    x = _zeros(8)
    k(x, _i32(3))
    assert x.to_numpy()[0] == 3 * sum(range(8))


def test_without_graph_raises() -> None:
    """Quadrants: test_graph_do_while_without_graph_raises."""
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(c):
            for i in range(x.shape[0]):
                x[i] = x[i] + 1

    with pytest.raises(qd.QuadrantsSyntaxError, match=r"requires @qd.kernel\(graph=True\)"):
        k(_zeros(4), _i32(1))
    qd.reset()


@pytest.mark.parametrize("which", ["nonexistent", "member", "field", "two_d", "float"])
def test_bad_counter_raises(which: str) -> None:
    """Quadrants: test_graph_do_while_nonexistent_arg_raises, ..._with_member_nonexistent_attribute_raises; qd: a
    field, a 1-d ndarray and a float ndarray are refused too."""
    qd.init(arch=qd.interp, log_level="warn")
    f = qd.field(qd.i32, shape=())

    @qd.data_oriented
    class Sim:
        @qd.kernel(graph=True)
        def step(self, x: qd.types.ndarray(qd.i32, ndim=1)):
            while qd.graph.do_while(self.nonexistent_counter):
                for i in range(x.shape[0]):
                    x[i] = x[i] + 1

    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(ndim=0), v: qd.types.ndarray(ndim=1),
          which: qd.template()):
        if qd.static(which == "nonexistent"):
            while qd.graph.do_while(nonexistent):  # noqa: F821
                x[0] = 1
        if qd.static(which == "field"):
            while qd.graph.do_while(f):
                x[0] = 1
        if qd.static(which == "two_d"):
            while qd.graph.do_while(v):
                x[0] = 1
        if qd.static(which == "float"):
            while qd.graph.do_while(c):
                x[0] = 1

    want = {"two_d": "0-d integer ndarray", "float": "0-d integer ndarray"}.get(
        which, "does not resolve to an ndarray kernel parameter")
    with pytest.raises(qd.QuadrantsSyntaxError, match=want):
        if which == "member":
            Sim().step(_zeros(4))
        else:
            c = _nd(qd.f32, 1.0) if which == "float" else _i32(1)
            k(_zeros(4), c, _zeros(4), which)
    qd.reset()


@pytest.mark.parametrize("where", ["for", "if", "while"])
def test_not_at_top_level_raises(where: str) -> None:
    """Quadrants: test_graph_do_while_inside_for_loop_raises; qd also refuses a runtime if or while around it."""
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), c: qd.types.ndarray(qd.i32, ndim=0), where: qd.template()):
        if qd.static(where == "for"):
            for _ in range(2):
                while qd.graph.do_while(c):
                    x[0] = 1
        if qd.static(where == "if"):  # noqa: SIM102  (a runtime if inside a compile-time one)
            if x[0] > 0:
                while qd.graph.do_while(c):
                    x[0] = 1
        if qd.static(where == "while"):
            while x[0] > 0:
                while qd.graph.do_while(c):
                    x[0] = 1

    with pytest.raises(qd.QuadrantsSyntaxError, match="kernel top level"):
        k(_zeros(4), _i32(1), where)
    qd.reset()


@pytest.mark.parametrize("mode", ["grad", "tape", "fwd"])
def test_autodiff_refuses(mode: str) -> None:
    """qd: reverse and forward mode refuse a do_while kernel, naming the loop (its trip count is device data)."""
    qd.init(arch=qd.interp, log_level="warn")
    x = qd.field(qd.f32, shape=4, needs_grad=True, needs_dual=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True, needs_dual=True)

    @qd.kernel(graph=True)
    def k(c: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(c):
            for i in range(4):
                loss[None] += x[i] * x[i]
            c[()] = c[()] - 1

    with pytest.raises(qd.QuadrantsCompilationError, match="qd.graph.do_while"):
        if mode == "grad":
            k.grad(_i32(2))
        elif mode == "tape":
            with qd.ad.Tape(loss=loss):
                k(_i32(2))
        else:
            with qd.ad.FwdMode(loss=loss, param=x, seed=[1.0, 0.0, 0.0, 0.0]):
                k(_i32(2))
    qd.reset()


def test_failed_check_stops_the_loop(arch: object) -> None:
    """A task that fails an assert inside the loop, before the counter could ever reach 0, ends the launch with
    the assert's error on every tier (the GPU tiers read the status after each run: no endless loop)."""
    import conftest

    qd.reset()
    conftest.init_arch(arch, debug=True)

    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, ndim=1), counter: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] += 1
                assert x[i] < 3, "x grew too large"

    x, counter = _zeros(8), _i32(1)
    with pytest.raises(AssertionError, match="x grew too large"):
        k(x, counter)
        qd.sync()


def test_random_in_the_loop_is_refused(arch: object) -> None:
    """qd reruns the loop's tasks with the same random stream: qd.random() there is refused, not repeated."""
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.f32, ndim=1), counter: qd.types.ndarray(qd.i32, ndim=0)):
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] += qd.random()
            for _ in range(1):
                counter[()] = counter[()] - 1

    with pytest.raises(qd.QuadrantsCompilationError, match="same random stream"):
        k(np.zeros(4, np.float32), _i32(2))
