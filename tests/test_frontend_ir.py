"""IR-structure tests of the frontend: what each construct lowers to (no launch needed)."""

import numpy as np
import pytest

import qd
from qd import ir
from qd.frontend.kernel import build_kernel_ir
from qd.ops import Op


@pytest.fixture(autouse=True)
def _qd():
    qd.init(arch=qd.interp)
    yield
    qd.reset()


def _stmts(k_ir, cls):
    return [s for s in ir.walk(k_ir.body) if isinstance(s, cls)]


def test_top_level_loops_parallel_inner_serial():
    x = qd.field(qd.i32, shape=(4, 5))

    @qd.kernel
    def k():
        for i, j in qd.ndrange(4, 5):
            for t in range(3):
                x[i, j] += t
        if x[0, 0] > 0:
            for i in range(2):
                x[i, 0] = 0

    k_ir, _ = build_kernel_ir(k, [])
    loops = _stmts(k_ir, ir.RangeFor)
    assert [lp.parallel for lp in loops] == [True, False, False]
    top = k_ir.body.stmts
    assert sum(isinstance(s, ir.RangeFor) for s in top) == 1  # ndrange flattened into one loop
    ops = {s.op for s in _stmts(k_ir, ir.OpStmt)}
    assert Op.FLOORDIV in ops and Op.MOD in ops
    assert _stmts(k_ir, ir.AtomicRMW)[0].op is Op.ADD


def test_loop_config_serialize():
    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k():
        qd.loop_config(serialize=True)
        for i in range(4):
            x[i] = i
        for i in range(4):
            x[i] += 1

    k_ir, _ = build_kernel_ir(k, [])
    assert [lp.parallel for lp in _stmts(k_ir, ir.RangeFor)] == [False, True]


def test_ternary_cheap_is_select_else_if():
    x = qd.field(qd.f32, shape=4)

    @qd.kernel
    def cheap(a: qd.f32) -> qd.f32:
        return a if a > 0 else -a

    @qd.kernel
    def loads(i: qd.i32) -> qd.f32:
        return x[i - 1] if i > 0 else 0.0

    c_ir, _ = build_kernel_ir(cheap, [1.0])
    assert any(s.op is Op.SELECT for s in _stmts(c_ir, ir.OpStmt)) and not _stmts(c_ir, ir.If)
    l_ir, _ = build_kernel_ir(loads, [1])
    assert _stmts(l_ir, ir.If) and _stmts(l_ir, ir.Alloca)


def test_short_circuit_and_or():
    @qd.kernel
    def k(a: qd.i32, b: qd.i32) -> qd.i32:
        return a > 0 and b > 0

    k_ir, _ = build_kernel_ir(k, [1, 1])
    assert len(_stmts(k_ir, ir.If)) == 1
    qd.init(arch=qd.interp, short_circuit_operators=False)
    k_ir, _ = build_kernel_ir(k, [1, 1])
    assert not _stmts(k_ir, ir.If)
    assert k(1, 2) == 1 and k(0, 2) == 0


def test_assert_only_in_debug():
    @qd.kernel
    def k(a: qd.i32):
        assert a > 0

    assert not _stmts(build_kernel_ir(k, [1])[0], ir.Check)
    qd.init(arch=qd.interp, debug=True)
    k_ir, _ = build_kernel_ir(k, [1])
    assert len(_stmts(k_ir, ir.Check)) == 1
    assert k_ir.checks[0].kind == "assert" and "assert a > 0" in k_ir.checks[0].message


def test_ndarray_shape_is_external_shape_and_buffers():
    f = qd.field(qd.f32, shape=(3,))

    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, 2)):
        for i in range(a.shape[0]):
            a[i, 0] = f[i % 3] + f.shape[0]

    k_ir, binds = build_kernel_ir(k, [np.zeros((2, 2), np.float32)])
    assert [b.kind for b in k_ir.buffers] == ["ndarray", "field"]
    assert k_ir.args[0].kind == "ndarray" and k_ir.args[0].buffer == 0 and k_ir.buffers[0].arg == 0
    assert binds[1] is f and binds[0] is None
    assert _stmts(k_ir, ir.ExternalShape)


def test_locals_alloca_and_srcloc():
    @qd.kernel
    def k() -> qd.i32:
        x = 1
        x += 2
        return x

    k_ir, _ = build_kernel_ir(k, [])
    allocas = _stmts(k_ir, ir.Alloca)
    assert len(allocas) == 1 and allocas[0].dtype is qd.i32
    assert allocas[0].loc.file == __file__ and allocas[0].loc.func == "k"
    assert k_ir.rets == (qd.i32,)


def test_static_for_unrolls_and_static_break():
    @qd.kernel
    def k() -> qd.i32:
        s = 0
        for i in qd.static(range(10)):
            if qd.static(i == 3):
                break
            s += i
        return s

    k_ir, _ = build_kernel_ir(k, [])
    assert not _stmts(k_ir, ir.RangeFor)
    assert k() == 0 + 1 + 2


def test_instance_cache_and_reset():
    @qd.kernel
    def k(a: qd.template()) -> qd.i32:
        return a

    assert k(1) == 1 and k(2) == 2 and k(1) == 1
    assert len(k._instances) == 2
    assert k._last_ir is not None
    qd.reset()
    assert len(k._instances) == 0
