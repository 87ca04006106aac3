"""IR text form: printing and parsing round-trip over every statement kind (incl. offloaded tasks).

Also home of the small IR builder `B` and sample kernels used by test_verify.py / test_passes.py.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import fields

import numpy as np
import pytest

from qd import ir
from qd.ir_text import IRParseError, parse_kernel, print_block, print_kernel
from qd.ops import Op
from qd.types.dtypes import f16, f32, f64, i32, i64, u1, u8

# ------------------------------------------------------------------ builder


class B:
    """Builds blocks by appending statements; `with b.for_(lo, hi) as i:` and `with b.sub() as l:`."""

    def __init__(self) -> None:
        self.stack: list[list] = [[]]

    def emit(self, s):
        self.stack[-1].append(s)
        return s

    def const(self, dt, v, **kw):
        return self.emit(ir.Const(dtype=dt, value=v, **kw))

    def arg(self, i, dt):
        return self.emit(ir.ArgLoad(index=i, dtype=dt))

    def op(self, op, dt, *args, **kw):
        return self.emit(ir.OpStmt(op=op, args=tuple(args), dtype=dt, **kw))

    def alloca(self, dt):
        return self.emit(ir.Alloca(dtype=dt))

    def load(self, var):
        return self.emit(ir.LocalLoad(var=var, dtype=var.dtype))

    def store(self, var, v):
        return self.emit(ir.LocalStore(var=var, value=v))

    def ptr(self, buf, idx, dt, **kw):
        return self.emit(ir.GlobalPtr(buffer=buf, indices=tuple(idx), dtype=dt, **kw))

    def gload(self, p):
        return self.emit(ir.GlobalLoad(ptr=p, dtype=p.dtype))

    def gstore(self, p, v, **kw):
        return self.emit(ir.GlobalStore(ptr=p, value=v, **kw))

    @contextmanager
    def sub(self):
        lst: list = []
        self.stack.append(lst)
        try:
            yield lst
        finally:
            self.stack.pop()

    @contextmanager
    def for_(self, lo, hi, parallel=False, name="", **kw):
        var = ir.LoopVar(lo.dtype, name)
        with self.sub() as body:
            yield var
        self.emit(ir.RangeFor(var=var, begin=lo, end=hi, body=ir.Block(tuple(body)), parallel=parallel,
                              **kw))

    def if_(self, cond, then: list, else_: list = ()):
        return self.emit(ir.If(cond=cond, then=ir.Block(tuple(then)), else_=ir.Block(tuple(else_))))

    def block(self) -> ir.Block:
        return ir.Block(tuple(self.stack[0]))


def kernel(body: ir.Block, *, args=(), buffers=(), rets=(), checks=(), name="k", loc=None, tasks=None):
    return ir.KernelIR(name=name, args=tuple(args), buffers=tuple(buffers), rets=tuple(rets),
                       checks=tuple(checks), body=body, tasks=tasks, loc=loc)


FIELD = ir.BufferDecl("field", f32, shape=(4, 5), name="x")
NDARR = ir.BufferDecl("ndarray", f32, ndim=1, elem_shape=(3,), arg=1, name="a")
ARGS = (ir.ArgDecl("n", "scalar", i32), ir.ArgDecl("a", "ndarray", f32, buffer=1))


def sample_kernel() -> ir.KernelIR:
    """A kernel using every statement class (valid under verify_kernel)."""
    loc = ir.SrcLoc("k.py", 3, 4, "fn")
    b = B()
    n = b.arg(0, i32)
    zero = b.const(i32, 0)
    one = b.const(f32, 1.5, loc=loc)
    acc = b.alloca(f32)
    b.store(acc, one)
    with b.for_(zero, n, parallel=True, name="i", loc=loc) as i:
        p = b.ptr(0, [i, zero], f32)
        v = b.gload(p)
        w = b.op(Op.ADD, f32, v, one)
        b.gstore(p, w, loc=ir.SrcLoc("odd file:name.py", 9, 1))
        two = b.const(i32, 2)
        q = b.ptr(1, [i, two], f32)
        b.emit(ir.AtomicRMW(op=Op.ADD, ptr=q, value=w, dtype=f32))
        r = b.emit(ir.RandomValue(dtype=f32))
        c = b.op(Op.CMP_LT, u1, r, one)
        with b.sub() as then:
            b.emit(ir.Continue())
        with b.sub() as els:
            b.emit(ir.Print(items=("r = ", r, "\n\"quoted\"")))
        b.if_(c, then, els)
    shp = b.emit(ir.ExternalShape(buffer=1, axis=0))
    with b.sub() as wbody:
        t = b.load(acc)
        big = b.const(f32, 100.0)
        stop = b.op(Op.CMP_GE, u1, t, big)
        with b.sub() as brk:
            b.emit(ir.Break())
        b.if_(stop, brk)
        t2 = b.op(Op.MUL, f32, t, b.const(f32, 2.0))
        b.store(acc, t2)
        with b.for_(zero, shp) as j:
            ok = b.op(Op.CMP_GE, u1, j, zero)
            b.emit(ir.Check(cond=ok, check=0, args=(j, shp)))
    b.emit(ir.While(body=ir.Block(tuple(wbody))))
    res = b.load(acc)
    b.emit(ir.Return(values=(res,)))
    checks = (ir.CheckDecl("assert", 'j {0} < "{1}"\n', loc),)
    return kernel(b.block(), args=ARGS, buffers=(FIELD, NDARR), rets=(f32,), checks=checks,
                  name="sample", loc=ir.SrcLoc("k.py", 1, 0))


# ------------------------------------------------------------------ structural equality


def assert_same(a, b, env=None) -> None:
    """Structural equality of IR objects: classes, fields, dtypes, bit-exact constants."""
    env = {} if env is None else env
    if isinstance(a, ir.Value) and id(a) in env:
        assert env[id(a)] is b, f"{a} maps to a different value"
        return
    assert type(a) is type(b), (a, b)
    if isinstance(a, (ir.Stmt, ir.LoopVar)):
        env[id(a)] = b
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y, env)
        return
    if isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), (a, b)
        return
    if not hasattr(a, "__dataclass_fields__"):
        assert a == b or (a is b), (a, b)
        return
    for f in fields(a):
        if f.name == "uid":
            continue
        assert_same(getattr(a, f.name), getattr(b, f.name), env)


def round_trip(k: ir.KernelIR) -> ir.KernelIR:
    text = print_kernel(k)
    k2 = parse_kernel(text)
    assert print_kernel(k2) == text
    # Body and tasks are compared separately: offload may share objects between them, the
    # parsed form never does.
    for f in fields(k):
        if f.name != "tasks":
            assert_same(getattr(k, f.name), getattr(k2, f.name))
    assert (k.tasks is None) == (k2.tasks is None)
    for t, t2 in zip(k.tasks or (), k2.tasks or ()):
        assert_same(t, t2)
    assert len(k.tasks or ()) == len(k2.tasks or ())
    return k2


# ------------------------------------------------------------------ tests


def test_round_trip_every_statement():
    k = sample_kernel()
    round_trip(k)
    text = print_kernel(k)
    kinds = ["const", "arg_load", "alloca", "local_store", "local_load", "parallel for", "global_ptr",
             "global_load", "global_store", "atomic add", "random", "if", "else", "continue", "print",
             "external_shape", "while", "break", "check", "return", "mul f32"]
    for kw in kinds:
        assert kw in text, kw


def test_text_shape():
    text = print_kernel(sample_kernel())
    assert "%0 = arg_load 0 : i32" in text
    assert "= add f32 %" in text
    assert "global_ptr @0 [%i0, %1] : f32" in text
    assert '@"odd file:name.py":9:1' in text
    assert "@k.py:3:4:fn" in text
    assert 'check #0 = assert "j {0} < \\"{1}\\"\\n"' in text
    assert 'name="i"' in text


@pytest.mark.parametrize("dt,v", [(f32, 0.1), (f32, -0.0), (f64, 1e-310), (f64, math.inf), (f64, -math.inf),
                                  (f16, 65504.0), (f64, math.nan), (f32, 3.4028234663852886e38),
                                  (i64, -(1 << 63)), (u8, 255), (u1, 1)])
def test_consts_bit_exact(dt, v):
    if dt.is_float:
        v = float(np.array(v).astype(dt.np_dtype))  # the const's own-width value
    b = B()
    c = b.const(dt, v)
    b.emit(ir.Print(items=(c,)))
    k2 = round_trip(kernel(b.block()))
    got = k2.body.stmts[0].value
    assert np.float64(got).tobytes() == np.float64(v).tobytes() if dt.is_float else got == v


def test_f32_const_printed_at_f32():
    b = B()
    c = b.const(f32, 0.1)  # a double; printed as its f32 value
    b.emit(ir.Print(items=(c,)))
    k2 = parse_kernel(print_kernel(kernel(b.block())))
    assert k2.body.stmts[0].value == float(np.float32(0.1))


def test_nan_payload_round_trips():
    import struct
    nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000001234))[0]
    b = B()
    b.emit(ir.Print(items=(b.const(f64, nan),)))
    k2 = round_trip(kernel(b.block()))
    assert struct.pack("<d", k2.body.stmts[0].value) == struct.pack("<d", nan)


def test_offloaded_round_trip():
    from qd.passes.offload import offload
    k = offload(sample_kernel())
    assert k.tasks
    text = print_kernel(k)
    assert "tasks {" in text and "task range %i" in text and "bounds %" in text and "task serial" in text
    round_trip(k)


def test_header_round_trip_odd_names():
    b = B()
    b.emit(ir.Return(values=()))
    k = kernel(b.block(), name="weird name{}", args=(ir.ArgDecl("x y", "scalar", f64),),
               buffers=(ir.BufferDecl("temp", i32, shape=(7,), name=""),
                        ir.BufferDecl("field", u8, shape=(), elem_shape=(2, 2))),
               checks=(ir.CheckDecl("bounds", "", None),), loc=ir.SrcLoc("123", 5, 6, "f g"))
    round_trip(k)


def test_print_block_and_undefined_values():
    b = B()
    outside = ir.Const(dtype=i32, value=1)
    b.op(Op.ADD, i32, outside, outside)
    text = print_block(b.block(), indent=1)
    assert text == "  %0 = add i32 %?0, %?0"
    with pytest.raises(IRParseError):
        parse_kernel("kernel k\nbody {\n  %0 = add i32 %?0, %?0\n}\n")


def test_parse_errors():
    with pytest.raises(IRParseError):
        parse_kernel("kernel k\nbody {\n  %0 = frobnicate i32\n}\n")
    with pytest.raises(IRParseError):
        parse_kernel("kernel k\nbody {\n  %0 = const i32 1\n")


def _every_value(s: ir.Stmt) -> tuple:
    out = []
    for f in fields(s):
        v = getattr(s, f.name)
        if isinstance(v, ir.Value):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, ir.Value))
    return tuple(out)


def test_operands_and_blocks_read_every_field_that_holds_one():
    """`Stmt.operands` skips the fields whose type never holds a Value and `Stmt.blocks` is specialised per
    class (both for speed): they give what a search of every field gives, for every statement kind, and a
    statement class made outside `qd.ir` gets the generic `blocks`, not its base class's."""
    seen = set()
    for s in ir.walk(sample_kernel().body):
        seen.add(type(s))
        assert s.operands() == _every_value(s), type(s).__name__
        assert s.blocks() == tuple(getattr(s, f.name) for f in fields(s) if isinstance(getattr(s, f.name), ir.Block))
    assert {ir.If, ir.RangeFor, ir.While, ir.Const, ir.LocalStore} <= seen

    from dataclasses import dataclass

    from qd.ir import Block

    @dataclass(frozen=True, eq=False, kw_only=True)
    class TwoWay(ir.If):
        third: Block = Block(())

    inner = ir.Block(())
    s = TwoWay(cond=ir.Const(dtype=u1, value=True), then=ir.Block(()), third=inner)
    assert s.blocks()[-1] is inner and len(s.blocks()) == 3
