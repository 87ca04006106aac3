"""Passes: simplify (folding vs numpy references), dce, insert_bound_checks, offload, the runner."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from qd import ir
from qd.ir_text import parse_kernel, print_kernel
from qd.ops import Op
from qd.passes.bounds import insert_bound_checks
from qd.passes.dce import dce
from qd.passes.offload import offload
from qd.passes.runner import default_pipeline, run_passes
from qd.passes.simplify import simplify
from qd.types.dtypes import FLOATS, INTS, f16, f32, f64, i8, i32, i64, u1, u8, u32, u64
from qd.verify import IRVerifyError, verify_kernel
from test_ir_text import ARGS, FIELD, NDARR, B, kernel, sample_kernel


SARGS = (ir.ArgDecl("n", "scalar", i32),)


def fold(op: Op, dt, vals, res=None):
    """Fold `op` over constants of dtype `dt` through the simplify pass; None when not folded."""
    b = B()
    cs = [b.const(d, v) for d, v in zip(dt if isinstance(dt, tuple) else [dt] * len(vals), vals)]
    r = b.op(op, res or cs[-1].dtype, *cs)
    b.emit(ir.Print(items=(r,)))
    k = simplify(kernel(b.block()))
    verify_kernel(k)
    out = k.body.stmts[-1].items[0]
    return out.value if isinstance(out, ir.Const) else None


def ivals(dt) -> list[int]:
    info = np.iinfo(dt.np_dtype)
    vs = {int(info.min), int(info.min) + 1, -7, -3, -1, 0, 1, 2, 3, 7, 100, int(info.max)}
    return sorted(v for v in vs if info.min <= v <= info.max)


def np_ref(op: Op, dt, a: int, b: int):
    x, y = np.array(a, dtype=dt.np_dtype), np.array(b, dtype=dt.np_dtype)
    w = dt.bits
    yw = np.array(b & (w - 1), dtype=dt.np_dtype)
    with np.errstate(all="ignore"):
        r = {
            Op.ADD: lambda: x + y, Op.SUB: lambda: x - y, Op.MUL: lambda: x * y,
            Op.FLOORDIV: lambda: np.floor_divide(x, y), Op.MOD: lambda: np.remainder(x, y),
            Op.MIN: lambda: np.minimum(x, y), Op.MAX: lambda: np.maximum(x, y),
            Op.BIT_AND: lambda: x & y, Op.BIT_OR: lambda: x | y, Op.BIT_XOR: lambda: x ^ y,
            Op.SHL: lambda: np.left_shift(x, yw), Op.SHR: lambda: np.right_shift(x, yw),
            Op.BIT_SHR: lambda: np.right_shift(x.view(f"u{dt.itemsize}"),
                                               yw.view(f"u{dt.itemsize}")).view(dt.np_dtype),
            Op.CMP_LT: lambda: x < y, Op.CMP_GE: lambda: x >= y, Op.CMP_EQ: lambda: x == y,
            Op.CMP_NE: lambda: x != y,
        }[op]()
    return int(r)


INT_OPS2 = [Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR,
            Op.BIT_XOR, Op.SHL, Op.SHR, Op.BIT_SHR, Op.CMP_LT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE]


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_binary_folding_matches_numpy(dt):
    for op in INT_OPS2:
        res = u1 if op.value.startswith("cmp") else dt
        for a, b in itertools.product(ivals(dt), repeat=2):
            if op is Op.FLOORDIV and dt.is_signed and b == -1 and a == np.iinfo(dt.np_dtype).min:
                want = a  # wraps (numpy's result here is platform-defined)
            else:
                want = np_ref(op, dt, a, b)
            assert fold(op, dt, [a, b], res) == want, (op, dt, a, b)


@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_unary_folding_matches_numpy(dt):
    for a in ivals(dt):
        x = np.array(a, dtype=dt.np_dtype)
        with np.errstate(all="ignore"):
            assert fold(Op.NEG, dt, [a]) == int(np.negative(x))
            assert fold(Op.ABS, dt, [a]) == int(np.abs(x))
            assert fold(Op.BIT_NOT, dt, [a]) == int(~x)
        ux = x.view(f"u{dt.itemsize}")  # the two's complement bits (numpy counts |x| for signed)
        assert fold(Op.POPCNT, dt, [a]) == int(np.bitwise_count(ux))
        assert fold(Op.CLZ, dt, [a]) == dt.bits - int(ux).bit_length()
        assert fold(Op.SGN, dt, [a]) == int(np.sign(x))
        assert fold(Op.LOGICAL_NOT, dt, [a], u1) == int(a == 0)


def test_python_floordiv_mod_signs_and_zero():
    assert fold(Op.FLOORDIV, i32, [-7, 2]) == -4
    assert fold(Op.MOD, i32, [-7, 2]) == 1
    assert fold(Op.MOD, i32, [7, -2]) == -1
    assert fold(Op.FLOORDIV, i32, [7, 0]) == 0 and fold(Op.MOD, i32, [7, 0]) == 0
    assert fold(Op.SHL, i32, [1, 33]) == 2  # count masked by the width
    assert fold(Op.SHR, i8, [-128, 1]) == -64 and fold(Op.BIT_SHR, i8, [-128, 1]) == 64
    assert fold(Op.POW, i32, [3, 21]) == int(np.int32(3) ** np.int32(21))
    assert fold(Op.POW, i32, [-1, -3]) == -1 and fold(Op.POW, i32, [2, -1]) == 0


FVALS = [0.0, -0.0, 1.0, -1.5, 0.1, 3.0, 1e-3, 65504.0, math.inf, -math.inf, math.nan, 2.5, -2.5]


@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_folding_matches_numpy_bits(dt):
    t = dt.np_dtype.type
    vals = [float(t(v)) for v in FVALS]
    bin_ops = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide}
    un_ops = {Op.NEG: np.negative, Op.ABS: np.abs, Op.SQRT: np.sqrt, Op.FLOOR: np.floor,
              Op.CEIL: np.ceil, Op.ROUND: np.rint}
    with np.errstate(all="ignore"):
        for op, fn in bin_ops.items():
            for a, b in itertools.product(vals, repeat=2):
                got = fold(op, dt, [a, b])
                assert t(got).tobytes() == fn(t(a), t(b)).tobytes(), (op, a, b)
        for op, fn in un_ops.items():
            for a in vals:
                assert t(fold(op, dt, [a])).tobytes() == fn(t(a)).tobytes(), (op, a)
        for a, b in itertools.product(vals, repeat=2):
            assert fold(Op.CMP_LT, dt, [a, b], u1) == int(t(a) < t(b))
            assert fold(Op.CMP_NE, dt, [a, b], u1) == int(t(a) != t(b))


def test_f32_math_is_done_in_f32():
    a, b = float(np.float32(0.1)), float(np.float32(0.2))
    assert fold(Op.ADD, f32, [a, b]) == float(np.float32(a) + np.float32(b)) != a + b


def test_transcendentals_and_float_mod_not_folded():
    for op in (Op.SIN, Op.EXP, Op.LOG, Op.TANH, Op.RSQRT):
        assert fold(op, f32, [0.5]) is None
    assert fold(Op.MOD, f32, [5.0, 3.0]) is None and fold(Op.POW, f64, [2.0, 0.5]) is None


def test_cast_folding():
    assert fold(Op.CAST, f32, [-2.75], i32) == -2
    assert fold(Op.CAST, f32, [3e9], i32) is None  # out of range
    assert fold(Op.CAST, f32, [math.nan], i32) is None
    assert fold(Op.CAST, i64, [300], i8) == int(np.array(300).astype(np.int8))
    assert fold(Op.CAST, i32, [-1], u32) == 2**32 - 1
    big = 2**62 + 2**38 + 1
    assert fold(Op.CAST, i64, [big], f32) == float(np.array(big, np.int64).astype(np.float32))
    assert fold(Op.CAST, u64, [2**64 - 1], f64) == float(np.array(2**64 - 1, np.uint64).astype(np.float64))
    assert fold(Op.CAST, f64, [0.1], f16) == float(np.float16(0.1))
    assert fold(Op.CAST, i32, [5], u1) is None
    assert fold(Op.BIT_CAST, f32, [1.0], i32) == 0x3F800000


def test_identities_exact_only():
    b = B()
    x, fx = b.arg(0, i32), b.emit(ir.ArgLoad(index=1, dtype=f32))
    outs = [b.op(Op.ADD, i32, x, b.const(i32, 0)), b.op(Op.MUL, i32, b.const(i32, 1), x),
            b.op(Op.MUL, f32, fx, b.const(f32, 1.0)), b.op(Op.SUB, f32, fx, b.const(f32, 0.0)),
            b.op(Op.ADD, f32, fx, b.const(f32, 0.0)), b.op(Op.MUL, f32, fx, b.const(f32, 0.0)),
            b.op(Op.MUL, i32, x, b.const(i32, 0))]
    b.emit(ir.Print(items=tuple(outs)))
    k = simplify(kernel(b.block(), args=(ir.ArgDecl("x", "scalar", i32), ir.ArgDecl("y", "scalar", f32))))
    verify_kernel(k)
    items = k.body.stmts[-1].items
    assert items[0] is x and items[1] is x and items[2] is fx and items[3] is fx
    assert isinstance(items[4], ir.OpStmt) and isinstance(items[5], ir.OpStmt)  # not exact for floats
    assert isinstance(items[6], ir.Const) and items[6].value == 0


def test_constant_if_and_empty_range():
    b = B()
    p = b.ptr(0, [b.const(i32, 0)] * 2, f32)
    one = b.const(f32, 1.0)
    with b.sub() as then:
        b.gstore(p, one)
    with b.sub() as els:
        b.emit(ir.Print(items=("no",)))
    b.if_(b.op(Op.CMP_LT, u1, b.const(i32, 1), b.const(i32, 2)), then, els)
    with b.for_(b.const(i32, 5), b.const(i32, 5)):
        b.gstore(p, one)
    with b.for_(b.const(i32, 5), b.const(i32, 3), parallel=True):
        b.emit(ir.Print(items=("kept",)))
    k = dce(simplify(kernel(b.block(), buffers=(FIELD,))))
    verify_kernel(k)
    kinds = [type(s).__name__ for s in k.body.stmts]
    assert "If" not in kinds and kinds.count("RangeFor") == 1 and kinds.count("GlobalStore") == 1
    assert not any(isinstance(s, ir.Print) for s in k.body.stmts)


def test_dce_removes_dead_keeps_side_effects():
    b = B()
    x = b.arg(0, i32)
    b.op(Op.MUL, i32, b.op(Op.ADD, i32, x, x), x)  # dead chain
    dead = b.alloca(i32)
    b.store(dead, x)
    b.load(dead)  # unused read: the alloca is dead after it goes
    live = b.alloca(i32)
    b.store(live, x)
    p = b.ptr(0, [x, x], f32)
    b.gload(p)  # unused load: removed
    b.emit(ir.RandomValue(dtype=f32))  # side effect: kept
    b.emit(ir.AtomicRMW(op=Op.ADD, ptr=p, value=b.const(f32, 1.0), dtype=f32))
    b.emit(ir.Return(values=(b.load(live),)))
    k = dce(kernel(b.block(), args=SARGS, buffers=(FIELD,), rets=(i32,)))
    verify_kernel(k)
    kinds = [type(s).__name__ for s in k.body.stmts]
    assert kinds == ["ArgLoad", "Alloca", "LocalStore", "GlobalPtr", "RandomValue", "Const", "AtomicRMW",
                     "LocalLoad", "Return"]
    assert k.body.stmts[1] is live


def test_bound_checks():
    b = B()
    n = b.arg(0, i32)
    with b.for_(b.const(i32, 0), n, parallel=True) as i:
        b.gload(b.ptr(1, [i, b.const(i32, 2)], f32, loc=ir.SrcLoc("b.py", 4, 8)))
        b.gload(b.ptr(0, [i, b.emit(ir.ArgLoad(index=0, dtype=i32))], f32))
    k = insert_bound_checks(kernel(b.block(), args=ARGS, buffers=(FIELD, NDARR), name="kb"))
    verify_kernel(k)
    assert [c.kind for c in k.checks] == ["bounds"] * 3  # const elem index 2 < 3 needs none
    c0 = k.checks[0]
    assert c0.loc == ir.SrcLoc("b.py", 4, 8)
    assert "index {0} of axis 0 is out of [0, {1})" in c0.message
    assert "for a with shape ({1}, 3)" in c0.message
    assert "kernel[{kernel}] tid={tid}" in c0.message
    assert "for x with shape (4, 5)" in k.checks[2].message
    loop = k.body.stmts[-1]
    body = loop.body.stmts
    checks = [s for s in body if isinstance(s, ir.Check)]
    assert isinstance(checks[0].args[1], ir.ExternalShape) and checks[0].args[0] is loop.var
    assert isinstance(checks[1].args[1], ir.Const) and checks[1].args[1].value == 4
    ptr_pos = [j for j, s in enumerate(body) if isinstance(s, ir.GlobalPtr)]
    assert all(isinstance(body[j - 1], ir.Check) for j in ptr_pos)
    assert "Out of bound access" in k.checks[1].message.format(0, 4, kernel="kb", tid=3)


def _temp_slots(k):
    return {i: b for i, b in enumerate(k.buffers) if b.kind == "temp"}


def offload_kernel() -> ir.KernelIR:
    b = B()
    n = b.arg(0, i32)
    z = b.const(i32, 0)
    n2 = b.op(Op.ADD, i32, n, b.const(i32, 1))  # cheap: rematerialised
    acc = b.alloca(f32)  # shared by two tasks: temp slot
    local = b.alloca(i32)  # used by one task only: moves there
    g = b.gload(b.ptr(0, [z, z], f32))  # non-cheap, used across tasks: temp slot
    b.store(acc, g)
    with b.for_(z, n2, parallel=True) as i:
        b.store(local, i)
        b.gstore(b.ptr(0, [b.load(local), z], f32), b.op(Op.ADD, f32, b.load(acc), g))
    b.emit(ir.Print(items=("between",)))
    with b.for_(z, n, parallel=True) as j:
        b.store(acc, b.const(f32, 2.0))
    b.emit(ir.Return(values=(b.load(acc),)))
    return kernel(b.block(), args=SARGS, buffers=(FIELD,), rets=(f32,))


def test_offload_splits_and_temps():
    k0 = offload_kernel()
    acc, local = k0.body.stmts[4], k0.body.stmts[5]
    verify_kernel(k0)
    k = offload(k0)
    verify_kernel(k)
    assert [t.kind for t in k.tasks] == ["serial", "range", "serial", "range", "serial"]
    temps = _temp_slots(k)
    assert [(b.dtype, b.shape) for b in temps.values()] == [(f32, (2,))]
    assert k.body is k0.body
    t1 = k.tasks[1]
    assert t1.end in t1.prologue.stmts and isinstance(t1.end, ir.OpStmt)
    assert isinstance(t1.begin, ir.Const) and t1.begin in t1.prologue.stmts
    assert isinstance(t1.body.stmts[0], ir.Alloca) and t1.body.stmts[0] is local
    loads = [s for s in t1.prologue.stmts if isinstance(s, ir.GlobalLoad)]
    assert len(loads) == 1 and loads[0].ptr.buffer in temps  # g, loaded once
    assert not any(isinstance(s, ir.LocalLoad) and s.var is acc for s in ir.walk(t1.body))
    assert any(isinstance(s, ir.GlobalLoad) and s.ptr.buffer in temps for s in ir.walk(t1.body))
    t0 = k.tasks[0]
    stores = [s for s in t0.body.stmts if isinstance(s, ir.GlobalStore)]
    assert len(stores) == 3  # zero-init acc, acc = g, export g
    assert isinstance(stores[0].value, ir.Const) and stores[0].value.value == 0.0
    assert isinstance(k.tasks[-1].body.stmts[-1], ir.Return)
    text = print_kernel(k)
    assert print_kernel(parse_kernel(text)) == text


def test_offload_skips_empty_serial_tasks():
    b = B()
    n = b.arg(0, i32)
    z = b.const(i32, 0)
    with b.for_(z, n, parallel=True) as i:
        b.gstore(b.ptr(0, [i, i], f32), b.const(f32, 1.0))
    k = offload(kernel(b.block(), args=SARGS, buffers=(FIELD,)))
    verify_kernel(k)
    assert [t.kind for t in k.tasks] == ["range"]
    assert not _temp_slots(k)


def test_runner_verifies_and_prints(monkeypatch, capsys):
    class Cfg:
        debug = True
    passes = default_pipeline(Cfg())
    assert [p for p, _ in passes] == ["simplify", "dce", "insert_bound_checks", "lower_adstacks", "offload",
                                        "simplify", "dce", "demote_atomics"]
    assert [p for p, _ in default_pipeline(object())] == ["simplify", "dce", "lower_adstacks", "offload", "simplify",
                                                           "dce", "demote_atomics"]
    monkeypatch.setenv("QD_PRINT_AFTER", "offload,dce")
    k = run_passes(sample_kernel(), passes, verify=True)
    assert k.tasks
    err = capsys.readouterr().err
    assert "=== sample: IR after offload ===" in err and err.count("IR after dce") == 2
    assert "IR after simplify" not in err

    def breaker(k):
        return k.with_body(ir.Block((ir.Break(),)))
    monkeypatch.setenv("QD_VERIFY", "1")
    monkeypatch.delenv("QD_PRINT_AFTER")
    with pytest.raises(IRVerifyError, match="after pass 'breaker'"):
        run_passes(sample_kernel(), [("simplify", simplify), ("breaker", breaker)])


@pytest.mark.parametrize("cfg_debug", [False, True])
def test_verifier_passes_after_every_pass(cfg_debug):
    class Cfg:
        debug = cfg_debug
    for k in (sample_kernel(), offload_kernel()):
        for name, fn in default_pipeline(Cfg()):
            k = fn(k)
            verify_kernel(k)
            text = print_kernel(k)
            assert print_kernel(parse_kernel(text)) == text, name


def test_simplify_and_dce_per_task():
    b = B()
    n = b.arg(0, i32)
    z = b.const(i32, 0)
    three = b.op(Op.ADD, i32, b.const(i32, 1), b.const(i32, 2))
    with b.for_(z, n, parallel=True) as i:
        b.op(Op.MUL, i32, i, i)  # dead
        b.gstore(b.ptr(0, [i, three], f32), b.const(f32, 1.0))
    k = dce(simplify(offload(kernel(b.block(), args=SARGS, buffers=(FIELD,)))))
    verify_kernel(k)
    t = k.tasks[0]
    assert not any(isinstance(s, ir.OpStmt) for s in ir.walk(t.body))
    ptr = next(s for s in t.body.stmts if isinstance(s, ir.GlobalPtr))
    assert isinstance(ptr.indices[1], ir.Const) and ptr.indices[1].value == 3
    assert isinstance(t.begin, ir.Const) and t.begin in t.prologue.stmts


@pytest.mark.parametrize("dt", [i8, u8, i64, u64], ids=str)
def test_wrap_edges(dt):
    info = np.iinfo(dt.np_dtype)
    assert fold(Op.ADD, dt, [int(info.max), 1]) == int(info.min)
    assert fold(Op.SUB, dt, [int(info.min), 1]) == int(info.max)
    assert fold(Op.MUL, dt, [int(info.max), int(info.max)]) == int(
        np.multiply(np.array(info.max, dt.np_dtype), np.array(info.max, dt.np_dtype)))
