"""`qd/ad/rules.py`: every op has a derivative rule or is marked non-differentiable, and every rule
agrees with central finite differences in float64.

Each check builds `for i: r = op(x...); dr = tangent(r, t...); ct_j = cotangents(r, c)` as IR by
hand, runs it on the interpreter (the `qd_program` fixture), and compares the partials (unit
tangents / unit cotangent) with `(f(x + h e_j) - f(x - h e_j)) / 2h`.
"""

from __future__ import annotations

import numpy as np
import pytest

from qd import ir
from qd.ad import rules
from qd.ops import INFO, Op
from qd.runtime.launch import compile_kernel, launch
from qd.types import dtypes as T

N = 16
RNG = np.random.default_rng(2024)


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_every_op_has_a_rule_or_is_nondiff(op: Op) -> None:
    has_rule = op in rules.RULES
    assert has_rule != INFO[op].nondiff, f"{op}: needs exactly one of a rule in ad/rules.py or nondiff=True"


def _kernel(op: Op, in_dts: list[T.DataType], out_dt: T.DataType) -> tuple[ir.KernelIR, int]:
    """Buffers: x_0..x_{k-1}, t_0..t_{k-1}, c (inputs); r, dr, ct_0..ct_{k-1} (outputs)."""
    k = len(in_dts)
    dts = in_dts + in_dts + [out_dt] + [out_dt, out_dt] + in_dts
    bufs = tuple(ir.BufferDecl("ndarray", dt, ndim=1, arg=j, name=f"b{j}") for j, dt in enumerate(dts))
    args = tuple(ir.ArgDecl(f"b{j}", "ndarray", b.dtype, j) for j, b in enumerate(bufs))
    var = ir.LoopVar(T.i32, "i")
    body: list[ir.Stmt] = []
    em = rules.BlockEmitter(body)

    def load(j: int) -> ir.Value:
        p = ir.GlobalPtr(buffer=j, indices=(var,), dtype=dts[j])
        ld = ir.GlobalLoad(ptr=p, dtype=dts[j])
        body.extend((p, ld))
        return ld

    def store(j: int, v: ir.Value | object) -> None:
        if v is rules.ZERO:
            v = em.const(0, dts[j])
        p = ir.GlobalPtr(buffer=j, indices=(var,), dtype=dts[j])
        body.extend((p, ir.GlobalStore(ptr=p, value=v)))

    xs = [load(j) for j in range(k)]
    ts = [load(k + j) if dts[k + j].is_float else rules.ZERO for j in range(k)]
    c = load(2 * k)
    r = em.op(op, tuple(xs), out_dt)
    store(2 * k + 1, r)
    store(2 * k + 2, rules.tangent(r, ts, em))
    for j, ct in enumerate(rules.cotangents(r, c, em)):
        store(2 * k + 3 + j, ct)
    zero, end = ir.Const(dtype=T.i32, value=0), ir.ExternalShape(buffer=0, axis=0)
    loop = ir.RangeFor(var=var, begin=zero, end=end, body=ir.Block(tuple(body)), parallel=True)
    return ir.KernelIR(f"ad_{op.value}", args, bufs, (), (), ir.Block((zero, end, loop))), len(dts)


class _Runner:
    def __init__(self, op: Op, in_dts: list[T.DataType], out_dt: T.DataType) -> None:
        k_ir, self.nbuf = _kernel(op, in_dts, out_dt)
        self.ck = compile_kernel(k_ir)
        self.in_dts, self.out_dt = in_dts, out_dt

    def __call__(self, xs: list[np.ndarray], ts: list[np.ndarray], c: np.ndarray) -> list[np.ndarray]:
        k = len(xs)
        outs = [np.zeros(N, self.out_dt.np_dtype) for _ in range(2)]
        outs += [np.zeros(N, dt.np_dtype) for dt in self.in_dts]
        launch(self.ck, [None] * self.nbuf, [*xs, *ts, c, *outs])
        return outs[:2] + outs[2:2 + k]


def _u(lo: float, hi: float) -> np.ndarray:
    return RNG.uniform(lo, hi, N)


def _signed(lo: float, hi: float) -> np.ndarray:
    return _u(lo, hi) * RNG.choice([-1.0, 1.0], N)


def _mod_inputs() -> list[np.ndarray]:
    y = _signed(0.5, 2.0)  # keep x / y away from integers, where MOD jumps
    return [y * (RNG.integers(-3, 4, N) + _u(0.2, 0.8)), y]


DOMAINS = {
    Op.NEG: lambda: [_u(-3, 3)], Op.ABS: lambda: [_signed(0.1, 3)], Op.SQRT: lambda: [_u(0.2, 4)],
    Op.RSQRT: lambda: [_u(0.2, 4)], Op.EXP: lambda: [_u(-2, 2)], Op.LOG: lambda: [_u(0.2, 4)],
    Op.SIN: lambda: [_u(-4, 4)], Op.COS: lambda: [_u(-4, 4)], Op.TAN: lambda: [_u(-1.2, 1.2)],
    Op.ASIN: lambda: [_u(-0.9, 0.9)], Op.ACOS: lambda: [_u(-0.9, 0.9)], Op.TANH: lambda: [_u(-2, 2)],
    Op.ADD: lambda: [_u(-3, 3), _u(-3, 3)], Op.SUB: lambda: [_u(-3, 3), _u(-3, 3)],
    Op.MUL: lambda: [_u(-3, 3), _u(-3, 3)], Op.DIV: lambda: [_u(-3, 3), _signed(0.3, 3)],
    Op.MOD: _mod_inputs, Op.POW: lambda: [_u(0.3, 2.5), _u(-2, 3)],
    Op.ATAN2: lambda: [_signed(0.2, 2), _signed(0.2, 2)],
    Op.MIN: lambda: [_u(-3, 3), _u(-3, 3)], Op.MAX: lambda: [_u(-3, 3), _u(-3, 3)],
}


def _fd_check(op: Op, xs: list[np.ndarray], in_dts: list[T.DataType], out_dt: T.DataType,
              h: float = 1e-6, rtol: float = 1e-6, atol: float = 1e-7) -> None:
    run = _Runner(op, in_dts, out_dt)
    k = len(xs)
    zeros = [np.zeros(N, dt.np_dtype) for dt in in_dts]
    one = np.ones(N, out_dt.np_dtype)
    for j in range(k):
        if not in_dts[j].is_float:
            continue
        unit = [np.ones(N, dt.np_dtype) if i == j else zeros[i] for i, dt in enumerate(in_dts)]
        _, dr, *_ = run(xs, unit, one)
        _, _, *cts = run(xs, zeros, one)
        plus = [x + h if i == j else x for i, x in enumerate(xs)]
        minus = [x - h if i == j else x for i, x in enumerate(xs)]
        fd = (run(plus, zeros, one)[0].astype(np.float64) - run(minus, zeros, one)[0]) / (2 * h)
        np.testing.assert_allclose(dr, fd, rtol=rtol, atol=atol, err_msg=f"{op} tangent wrt arg {j}")
        np.testing.assert_allclose(cts[j], fd, rtol=rtol, atol=atol, err_msg=f"{op} cotangent of arg {j}")


@pytest.mark.parametrize("op", list(DOMAINS), ids=lambda o: o.value)
def test_rule_matches_finite_differences(qd_program: object, op: Op) -> None:
    xs = DOMAINS[op]()
    _fd_check(op, xs, [T.f64] * len(xs), T.f64)


def test_select_routes_through_the_condition_only(qd_program: object) -> None:
    cond = RNG.integers(0, 2, N).astype(np.bool_)
    xs = [cond, _u(-3, 3), _u(-3, 3)]
    _fd_check(Op.SELECT, xs, [T.u1, T.f64, T.f64], T.f64)


def test_untaken_side_contributes_exactly_zero(qd_program: object) -> None:
    """A NaN or inf tangent on the side SELECT / MIN does not take must not leak (`0 * inf`)."""
    cond = np.array([True, False] * (N // 2))
    a, b = _u(-3, 3), _u(-3, 3)
    ta, tb = np.full(N, np.inf), np.full(N, np.nan)
    run = _Runner(Op.SELECT, [T.u1, T.f64, T.f64], T.f64)
    _, dr, *_ = run([cond, a, b], [np.zeros(N, np.bool_), ta, tb], np.ones(N))
    assert np.all(np.isinf(dr[cond])) and np.all(np.isnan(dr[~cond]))
    run = _Runner(Op.MIN, [T.f64, T.f64], T.f64)
    _, dr, *_ = run([a, b], [np.ones(N), np.full(N, np.nan)], np.ones(N))
    np.testing.assert_array_equal(dr[a < b], 1.0)


def test_float_casts_pass_gradients_and_convert(qd_program: object) -> None:
    x = _u(-3, 3)
    _fd_check(Op.CAST, [x.astype(np.float32)], [T.f32], T.f64, h=2.0 ** -8, rtol=1e-4, atol=1e-4)
    _fd_check(Op.CAST, [x], [T.f64], T.f32, h=1e-2, rtol=1e-4, atol=1e-4)


def _stmt(op: Op, in_dts: list[T.DataType], out_dt: T.DataType) -> ir.OpStmt:
    args = tuple(ir.ArgLoad(index=j, dtype=dt) for j, dt in enumerate(in_dts))
    return ir.OpStmt(op=op, args=args, dtype=out_dt)


@pytest.mark.parametrize("op, in_dts, out_dt", [
    (Op.MUL, [T.i32, T.i32], T.i32), (Op.CAST, [T.f64], T.i32), (Op.CAST, [T.i32], T.f32),
    (Op.FLOOR, [T.f64], T.f64), (Op.SGN, [T.f32], T.f32), (Op.BIT_CAST, [T.f32], T.i32),
    (Op.CMP_LT, [T.f32, T.f32], T.u1), (Op.POW, [T.i32, T.i32], T.i32),
], ids=str)
def test_gradients_stop(op: Op, in_dts: list[T.DataType], out_dt: T.DataType) -> None:
    s = _stmt(op, in_dts, out_dt)
    out: list[ir.Stmt] = []
    em = rules.BlockEmitter(out)
    assert rules.partials(s, em) == (rules.ZERO,) * len(in_dts)
    t = ir.ArgLoad(index=9, dtype=T.f32)
    assert rules.tangent(s, [t] * len(in_dts), em) is rules.ZERO
    assert rules.cotangents(s, t, em) == (rules.ZERO,) * len(in_dts)
    assert out == [], "a stopped gradient emits nothing"


def test_symbolic_zero_and_linear_ops_emit_no_multiply() -> None:
    out: list[ir.Stmt] = []
    em = rules.BlockEmitter(out)
    s = _stmt(Op.SUB, [T.f32, T.f32], T.f32)
    ta, tb = ir.ArgLoad(index=2, dtype=T.f32), ir.ArgLoad(index=3, dtype=T.f32)
    assert rules.tangent(s, [rules.ZERO, rules.ZERO], em) is rules.ZERO and out == []
    assert rules.tangent(s, [ta, rules.ZERO], em) is ta and out == []
    d = rules.tangent(s, [ta, tb], em)
    assert [x.op for x in out if isinstance(x, ir.OpStmt)] == [Op.NEG, Op.ADD] and d is out[-1]
