"""Every op of the op table, on every dtype its type rule admits, run on every tier (the `arch`
fixture: the program is initialised on the tier before the IR is compiled) through the full pipeline
(IR -> passes -> tier code) and compared with a numpy reference of DESIGN §4.

Integer and exact float ops must match bit for bit; transcendentals within the op table's ulps.
"""

from __future__ import annotations

import numpy as np
import pytest

from qd import ir
from qd.ops import INFO, Op
from conftest import tier_key
from qd.base.arch import Arch
from qd.runtime.launch import compile_kernel, launch
from qd.types import dtypes as T

N = 257
RNG = np.random.default_rng(1234)


def _int_inputs(dt: T.DataType, small: bool = False) -> np.ndarray:
    info = np.iinfo(dt.np_dtype)
    if small:
        return RNG.integers(-5 if dt.is_signed else 0, 6, N).astype(dt.np_dtype)
    edge = [0, 1, info.max, info.min, info.max - 1, info.min + 1]
    edge += [-1, -2, -7] if dt.is_signed else [7, 2]
    vals = RNG.integers(info.min, info.max, N - len(edge), dtype=dt.np_dtype, endpoint=True)
    return np.concatenate([np.array(edge, dtype=dt.np_dtype), vals])


def _float_inputs(dt: T.DataType, positive: bool = False, unit: bool = False) -> np.ndarray:
    if unit:
        return RNG.uniform(-1, 1, N).astype(dt.np_dtype)
    v = RNG.standard_normal(N) * np.exp(RNG.uniform(-3, 3, N))
    v[:6] = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5]
    return (np.abs(v) if positive else v).astype(dt.np_dtype)


def _inputs(op: Op, dt: T.DataType, slot: int) -> np.ndarray:
    if dt is T.u1:
        return RNG.integers(0, 2, N).astype(np.bool_)
    if dt.is_int:
        if op in (Op.SHL, Op.SHR, Op.BIT_SHR) and slot == 1:
            return RNG.integers(0, 2 * dt.bits, N).astype(dt.np_dtype)
        if op is Op.POW:
            return (RNG.integers(-2, 7, N) if slot == 1 and dt.is_signed else _int_inputs(dt, True)).astype(dt.np_dtype)
        return _int_inputs(dt)
    positive = op in (Op.SQRT, Op.RSQRT, Op.LOG) or (op is Op.POW and slot == 0)
    return _float_inputs(dt, positive=positive, unit=op in (Op.ASIN, Op.ACOS))


def _run_op(op: Op, dt: T.DataType, out_dt: T.DataType, inputs: list[np.ndarray]) -> np.ndarray:
    """Builds `for i in range(n): out[i] = op(in0[i], in1[i], ...)` as IR and launches it."""
    n_in = len(inputs)
    bufs = tuple(ir.BufferDecl("ndarray", x_dt, ndim=1, arg=j, name=f"a{j}")
                 for j, x_dt in enumerate([T.from_numpy_dtype(x.dtype) for x in inputs] + [out_dt]))
    args = tuple(ir.ArgDecl(f"a{j}", "ndarray", b.dtype, j) for j, b in enumerate(bufs))
    var = ir.LoopVar(T.i32, "i")
    stmts: list[ir.Stmt] = []
    vals = []
    for j in range(n_in):
        p = ir.GlobalPtr(buffer=j, indices=(var,), dtype=bufs[j].dtype)
        ld = ir.GlobalLoad(ptr=p, dtype=bufs[j].dtype)
        stmts += [p, ld]
        vals.append(ld)
    res = ir.OpStmt(op=op, args=tuple(vals), dtype=out_dt)
    po = ir.GlobalPtr(buffer=n_in, indices=(var,), dtype=out_dt)
    stmts += [res, po, ir.GlobalStore(ptr=po, value=res)]
    zero, end = ir.Const(dtype=T.i32, value=0), ir.ExternalShape(buffer=0, axis=0)
    loop = ir.RangeFor(var=var, begin=zero, end=end, body=ir.Block(tuple(stmts)), parallel=True)
    k = ir.KernelIR(f"op_{op.value}", args, bufs, (), (), ir.Block((zero, end, loop)))
    out = np.zeros(N, dtype=out_dt.np_dtype)
    launch(compile_kernel(k), [None] * len(bufs), [*inputs, out])
    return out


def _wrap_ref(dt: T.DataType, fn):
    with np.errstate(all="ignore"):
        return fn()


def _py_floordiv(a: int, b: int) -> int:
    return 0 if b == 0 else a // b


def _py_mod(a: int, b: int) -> int:
    return 0 if b == 0 else a % b


def _py_ipow(a: int, b: int) -> int:
    if b < 0:
        return 1 if a == 1 else ((-1 if b & 1 else 1) if a == -1 else 0)
    return a ** b


def _elementwise_int(dt: T.DataType, fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    mask = (1 << dt.bits) - 1
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        v = fn(int(x), int(y)) & mask
        if dt.is_signed and v >> (dt.bits - 1):
            v -= 1 << dt.bits
        out.append(v)
    return np.array(out, dtype=dt.np_dtype)


def _unsigned_view(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _reference(op: Op, dt: T.DataType, xs: list[np.ndarray]) -> np.ndarray:  # noqa: C901
    a = xs[0]
    b = xs[1] if len(xs) > 1 else None
    bits = dt.bits
    with np.errstate(all="ignore"):
        if op in (Op.ADD, Op.SUB, Op.MUL):
            return {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply}[op](a, b)
        if op is Op.DIV:
            return a / b
        if op is Op.FLOORDIV:
            return _elementwise_int(dt, _py_floordiv, a, b)
        if op is Op.MOD:
            if dt.is_float:  # one op: f16 computes in f32 and rounds once
                w = a.astype(np.float32) if dt is T.f16 else a
                v = b.astype(w.dtype)
                return (w - v * np.floor(w / v)).astype(dt.np_dtype)
            return _elementwise_int(dt, _py_mod, a, b)
        if op is Op.POW:
            if dt.is_float:
                return np.power(a, b)
            return _elementwise_int(dt, _py_ipow, a, b)
        if op is Op.MIN:
            return np.fmin(a, b) if dt.is_float else np.minimum(a, b)
        if op is Op.MAX:
            return np.fmax(a, b) if dt.is_float else np.maximum(a, b)
        if op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR):
            return {Op.BIT_AND: np.bitwise_and, Op.BIT_OR: np.bitwise_or, Op.BIT_XOR: np.bitwise_xor}[op](a, b)
        if op in (Op.SHL, Op.SHR, Op.BIT_SHR):
            cnt = (b.astype(np.int64) & (bits - 1)).astype(a.dtype)
            if op is Op.SHL:
                return np.left_shift(a, cnt)
            if op is Op.SHR:
                return np.right_shift(a, cnt)
            return np.right_shift(_unsigned_view(a), cnt.astype(_unsigned_view(a).dtype)).view(a.dtype)
        cmp = {Op.CMP_LT: np.less, Op.CMP_LE: np.less_equal, Op.CMP_GT: np.greater,
               Op.CMP_GE: np.greater_equal, Op.CMP_EQ: np.equal, Op.CMP_NE: np.not_equal}
        if op in cmp:
            return cmp[op](a, b)
        if op is Op.ATAN2:
            return np.arctan2(a, b)
        if op is Op.SELECT:
            return np.where(xs[0], xs[1], xs[2])
        return _unary_reference(op, dt, a)


def _unary_reference(op: Op, dt: T.DataType, a: np.ndarray) -> np.ndarray:
    simple = {Op.NEG: np.negative, Op.ABS: np.abs, Op.SQRT: np.sqrt, Op.EXP: np.exp, Op.LOG: np.log,
              Op.SIN: np.sin, Op.COS: np.cos, Op.TAN: np.tan, Op.ASIN: np.arcsin, Op.ACOS: np.arccos,
              Op.TANH: np.tanh, Op.FLOOR: np.floor, Op.CEIL: np.ceil, Op.ROUND: np.rint,
              Op.BIT_NOT: np.invert, Op.SGN: np.sign}
    if op in simple:
        return simple[op](a)
    if op is Op.STOP_GRAD:
        return a.copy()
    if op is Op.RSQRT:
        return (np.ones_like(a) / np.sqrt(a)).astype(a.dtype)
    if op is Op.LOGICAL_NOT:
        return a == 0
    u = _unsigned_view(a)
    if op is Op.POPCNT:
        return np.array([bin(int(x)).count("1") for x in u], dtype=a.dtype)
    if op is Op.CLZ:
        return np.array([dt.bits - int(x).bit_length() for x in u], dtype=a.dtype)
    raise AssertionError(op)


def _dtypes_for(op: Op) -> list[T.DataType]:
    rule = INFO[op].rule
    if rule == "float":
        return list(T.FLOATS)
    if rule == "int":
        return list(T.INTS)
    if op in (Op.SGN, Op.NEG, Op.ABS) or op is Op.POW or op is Op.MOD:
        return [d for d in T.ALL if d is not T.u1]
    return [d for d in T.ALL if d is not T.u1] + ([T.u1] if rule == "cmp" else [])


CASES = [(op, dt) for op in Op if op not in (Op.CAST, Op.BIT_CAST) for dt in _dtypes_for(op)]


@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o.value}-{d.name}" for o, d in CASES])
def test_op_matches_numpy(op: Op, dt: T.DataType, arch: Arch) -> None:
    info = INFO[op]
    if op is Op.SELECT:
        xs = [RNG.integers(0, 2, N).astype(np.bool_), _inputs(op, dt, 1), _inputs(op, dt, 2)]
    else:
        xs = [_inputs(op, dt, j) for j in range(info.arity)]
    out_dt = T.u1 if info.rule == "cmp" else dt
    got = _run_op(op, dt, out_dt, xs)
    want = np.asarray(_reference(op, dt, xs)).astype(out_dt.np_dtype)
    ulps = info.ulps.get(tier_key(arch), 0)
    if dt.is_float and (ulps or op is Op.POW):
        np.testing.assert_allclose(got, want, rtol=4 * ulps * np.finfo(dt.np_dtype).eps + 1e-7 if dt.bits > 16
                                   else 2e-3, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


CAST_CASES = [(s, d) for s in T.ALL for d in T.ALL if s is not d]


@pytest.mark.parametrize("src,dst", CAST_CASES, ids=[f"{s.name}-{d.name}" for s, d in CAST_CASES])
def test_cast_matches_numpy(src: T.DataType, dst: T.DataType, arch: Arch) -> None:
    if src is T.u1:
        a = RNG.integers(0, 2, N).astype(np.bool_)
    elif src.is_int:
        a = _int_inputs(src)
    else:
        a = _float_inputs(src)
        if dst.is_int:  # out-of-range float -> int is undefined: keep inputs representable
            lo, hi = (0, 100) if not dst.is_signed else (-100, 100)
            a = np.clip(a * 10, lo, hi).astype(src.np_dtype)
    got = _run_op(Op.CAST, src, dst, [a])
    with np.errstate(all="ignore"):
        want = (a != 0) if dst is T.u1 else a.astype(dst.np_dtype)
    np.testing.assert_array_equal(got, want)
