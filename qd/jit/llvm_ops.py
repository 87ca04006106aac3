"""Op lowering for the LLVM code generator: one `llvmlite.ir` sequence per `Op` and dtype class.

The semantics are the interpreter's (`qd/bytecode/opcodes.py`, `qd/_interp_support.h`), reproduced
bit for bit: ints wrap at their own width (LLVM `iN`; u1 is `i1`), f16 values live as float and are
rounded to half after every op, Python floor division and modulo with `x // 0 == 0`, masked shift
counts, C's `fmin`/`fmax` as the interpreter's build computes them (an equal pair gives the first
operand), libm for transcendentals.
`TABLE` maps every op to its lowering (the coverage test checks it); `lower_op` dispatches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from qd.jit.targets import F16, F32, F64, I64, Target
from qd.ops import COMPARISONS, FLOAT_BINARY, FLOAT_UNARY, INFO, INT_BINARY, INT_UNARY, LIBM, Op
from qd.types import dtypes as T

I1 = ir.IntType(1)
I8 = ir.IntType(8)
_FAST = ("reassoc", "contract")


def reg_type(dt: T.DataType) -> ir.Type:
    """The LLVM type of a value of `dt` (f16 lives as float, u1 as i1)."""
    if dt.is_float:
        return F64 if dt.bits == 64 else F32
    return ir.IntType(dt.bits)


def mem_type(dt: T.DataType) -> ir.Type:
    """The LLVM type of `dt` in memory (u1 is a byte, f16 the i16 bits of a half)."""
    if dt is T.u1:
        return I8
    if dt is T.f16:
        return ir.IntType(16)
    return reg_type(dt)


def const(dt: T.DataType, value: float) -> ir.Constant:
    """An LLVM constant of `dt` (f16 constants are rounded to half first)."""
    if dt.is_float:
        if dt is T.f16:
            import numpy as np

            value = float(np.float16(value))
        elif dt is T.f32:
            import numpy as np

            value = float(np.float32(value))
        return ir.Constant(reg_type(dt), float(value))
    v = int(value) & ((1 << dt.bits) - 1)
    return ir.Constant(reg_type(dt), v)


class OpCtx:
    """What an op lowering needs: the builder, the target hooks and the fast-math switch."""

    def __init__(self, b: ir.IRBuilder, target: Target, fast_math: bool) -> None:
        self.b = b
        self.target = target
        self.fast = _FAST if fast_math else ()

    def round_f16(self, x: ir.Value) -> ir.Value:
        return self.target.f32_round_f16(self.b, x)

    def truth(self, v: ir.Value) -> ir.Value:
        """An i1 that is true when `v` is non-zero (floats: `!= 0`, NaN included)."""
        if v.type == I1:
            return v
        if isinstance(v.type, ir.IntType):
            return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        return self.b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))


Lowering = Callable[[OpCtx, T.DataType, Sequence[ir.Value]], ir.Value]


# ------------------------------------------------------------------ integer helpers

def _zero(v: ir.Value) -> ir.Constant:
    return ir.Constant(v.type, 0)


def _floordiv_int(c: OpCtx, dt: T.DataType, a: ir.Value, b_: ir.Value) -> ir.Value:
    b = c.b
    zero, one = _zero(a), ir.Constant(a.type, 1)
    bz = b.icmp_unsigned("==", b_, zero)
    if not dt.is_signed:
        return b.select(bz, zero, b.udiv(a, b.select(bz, one, b_)))
    bm1 = b.icmp_signed("==", b_, ir.Constant(a.type, -1))
    safe = b.select(b.or_(bz, bm1), one, b_)
    q, r = b.sdiv(a, safe), b.srem(a, safe)
    adj = b.and_(b.icmp_unsigned("!=", r, zero), b.icmp_signed("<", b.xor(a, b_), zero))
    q = b.sub(q, b.zext(adj, a.type))
    return b.select(bz, zero, b.select(bm1, b.sub(zero, a), q))


def _mod_int(c: OpCtx, dt: T.DataType, a: ir.Value, b_: ir.Value) -> ir.Value:
    b = c.b
    zero, one = _zero(a), ir.Constant(a.type, 1)
    bz = b.icmp_unsigned("==", b_, zero)
    if not dt.is_signed:
        return b.select(bz, zero, b.urem(a, b.select(bz, one, b_)))
    bad = b.or_(bz, b.icmp_signed("==", b_, ir.Constant(a.type, -1)))
    r = b.srem(a, b.select(bad, one, b_))
    adj = b.and_(b.icmp_unsigned("!=", r, zero), b.icmp_signed("<", b.xor(r, b_), zero))
    r = b.select(adj, b.add(r, b_), r)
    return b.select(bad, zero, r)


def _ipow_fn(module: ir.Module, ty: ir.IntType, signed: bool) -> ir.Function:
    """`qd_ipow_{s|u}N(a, b)`: repeated squaring at width N; signed b < 0 follows qd_ipow_i64."""
    name = f"qd_ipow_{'s' if signed else 'u'}{ty.width}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    fn.linkage = "internal"
    a0, e0 = fn.args
    entry, loop, done, neg = (fn.append_basic_block(n) for n in ("entry", "loop", "done", "neg"))
    b = ir.IRBuilder(entry)
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    b.cbranch(b.icmp_signed("<", e0, zero) if signed else ir.Constant(I1, 0), neg, loop)
    b.position_at_end(loop)
    r = b.phi(ty)
    a = b.phi(ty)
    e = b.phi(ty)
    odd = b.trunc(e, I1)
    r2 = b.select(odd, b.mul(r, a), r)
    a2 = b.mul(a, a)
    e2 = b.lshr(e, one) if ty.width > 1 else zero  # a shift by the width would be poison
    for phi, init, nxt in ((r, one, r2), (a, a0, a2), (e, e0, e2)):
        phi.add_incoming(init, entry)
        phi.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("!=", e2, zero), loop, done)
    b.position_at_end(done)
    b.ret(r2)
    b.position_at_end(neg)
    minus1 = ir.Constant(ty, -1)
    sign = b.select(b.trunc(e0, I1), minus1, one)
    b.ret(b.select(b.icmp_signed("==", a0, one), one,
                   b.select(b.icmp_signed("==", a0, minus1), sign, zero)))
    return fn


def _pow_int(c: OpCtx, dt: T.DataType, a: ir.Value, e: ir.Value) -> ir.Value:
    fn = _ipow_fn(c.b.module, a.type, dt.is_signed)
    return c.b.call(fn, [a, e])


def _shift_count(c: OpCtx, dt: T.DataType, n: ir.Value) -> ir.Value:
    return c.b.and_(n, ir.Constant(n.type, dt.bits - 1))


def _int_binary(op: Op) -> Lowering:
    def lower(c: OpCtx, dt: T.DataType, args: Sequence[ir.Value]) -> ir.Value:
        b, (x, y) = c.b, args
        s = dt.is_signed
        table: dict[Op, Callable[[], ir.Value]] = {
            Op.ADD: lambda: b.add(x, y), Op.SUB: lambda: b.sub(x, y), Op.MUL: lambda: b.mul(x, y),
            Op.FLOORDIV: lambda: _floordiv_int(c, dt, x, y), Op.MOD: lambda: _mod_int(c, dt, x, y),
            Op.POW: lambda: _pow_int(c, dt, x, y),
            Op.MIN: lambda: b.select((b.icmp_signed if s else b.icmp_unsigned)("<", x, y), x, y),
            Op.MAX: lambda: b.select((b.icmp_signed if s else b.icmp_unsigned)(">", x, y), x, y),
            Op.BIT_AND: lambda: b.and_(x, y), Op.BIT_OR: lambda: b.or_(x, y),
            Op.BIT_XOR: lambda: b.xor(x, y),
            Op.SHL: lambda: b.shl(x, _shift_count(c, dt, y)),
            Op.SHR: lambda: (b.ashr if s else b.lshr)(x, _shift_count(c, dt, y)),
            Op.BIT_SHR: lambda: b.lshr(x, _shift_count(c, dt, y)),
        }
        return table[op]()
    return lower


# ------------------------------------------------------------------ float helpers

def fminmax(b: ir.IRBuilder, is_min: bool, x: ir.Value, y: ir.Value) -> ir.Value:
    """The interpreter's (and numpy's) fmin/fmax: `x` when it is smaller (larger) or equal, or
    when `y` is NaN, else `y`; so `fmin(+0.0, -0.0)` is `+0.0` and NaN loses to a number."""
    better = b.fcmp_ordered("<=" if is_min else ">=", x, y)
    return b.select(b.or_(better, b.fcmp_unordered("uno", y, y)), x, y)


def _float_binary(op: Op) -> Lowering:
    def lower(c: OpCtx, dt: T.DataType, args: Sequence[ir.Value]) -> ir.Value:
        b, (x, y) = c.b, args
        if op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
            fn = {Op.ADD: b.fadd, Op.SUB: b.fsub, Op.MUL: b.fmul, Op.DIV: b.fdiv}[op]
            return fn(x, y, flags=c.fast)
        if op is Op.MOD:
            q = c.target.math_call(b, "floor", [b.fdiv(x, y)])
            return b.fsub(x, b.fmul(y, q))
        if op in (Op.MIN, Op.MAX):
            return fminmax(b, op is Op.MIN, x, y)
        return c.target.math_call(b, INFO[op].libm, [x, y])  # pow, atan2
    return lower


_UNARY_MATH = {op: INFO[op].libm for op in LIBM if INFO[op].arity == 1}  # `Target.math_call` names (the op table's)


def _sign(c: OpCtx, dt: T.DataType, x: ir.Value) -> ir.Value:
    b, zero = c.b, _zero(x) if isinstance(x.type, ir.IntType) else ir.Constant(x.type, 0.0)
    if dt.is_float:
        one, m1 = ir.Constant(x.type, 1.0), ir.Constant(x.type, -1.0)
        return b.select(b.fcmp_ordered(">", x, zero), one, b.select(b.fcmp_ordered("<", x, zero), m1, zero))
    if not dt.is_signed:
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type) if x.type != I1 else x
    gt = b.zext(b.icmp_signed(">", x, zero), x.type)
    return b.sub(gt, b.zext(b.icmp_signed("<", x, zero), x.type))


def _unary(op: Op) -> Lowering:
    def lower(c: OpCtx, dt: T.DataType, args: Sequence[ir.Value]) -> ir.Value:
        b, x = c.b, args[0]
        if op is Op.SGN:
            return _sign(c, dt, x)
        if op is Op.LOGICAL_NOT:
            return b.not_(c.truth(x))
        if dt.is_float:
            if op is Op.NEG:
                return b.fneg(x)
            if op is Op.RSQRT:
                return b.fdiv(ir.Constant(x.type, 1.0), c.target.math_call(b, "sqrt", [x]))
            return c.target.math_call(b, _UNARY_MATH[op], [x])
        if op is Op.NEG:
            return b.sub(_zero(x), x)
        if op is Op.BIT_NOT:
            return b.not_(x)
        if op is Op.ABS:
            return c.target.int_abs(b, x) if dt.is_signed else x
        if op is Op.POPCNT:
            return b.call(b.module.declare_intrinsic("llvm.ctpop", [x.type]), [x])
        name = f"llvm.ctlz.i{x.type.width}"  # llvmlite declares ctlz without its i1 operand
        fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(x.type, [x.type, I1]), name)
        return b.call(fn, [x, ir.Constant(I1, 0)])
    return lower


def _compare(op: Op) -> Lowering:
    sym = {Op.CMP_LT: "<", Op.CMP_LE: "<=", Op.CMP_GT: ">", Op.CMP_GE: ">=", Op.CMP_EQ: "==",
           Op.CMP_NE: "!="}[op]

    def lower(c: OpCtx, dt: T.DataType, args: Sequence[ir.Value]) -> ir.Value:
        x, y = args
        if dt.is_float:  # C semantics: every comparison with NaN is false except !=
            return (c.b.fcmp_unordered if op is Op.CMP_NE else c.b.fcmp_ordered)(sym, x, y)
        return (c.b.icmp_signed if dt.is_signed else c.b.icmp_unsigned)(sym, x, y)
    return lower


# ------------------------------------------------------------------ casts

def cast(c: OpCtx, src: T.DataType, dst: T.DataType, x: ir.Value) -> ir.Value:
    """Value conversion per `_cast_expr` of qd/bytecode/opcodes.py."""
    b = c.b
    if src is dst or (src is T.f16 and dst is T.f32):
        return x
    if dst is T.u1:
        return c.truth(x)
    ty = reg_type(dst)
    if dst.is_int:
        if src.is_float:
            if dst is T.u64:
                return b.fptoui(x, ty)
            return b.trunc(b.fptosi(x, I64), ty) if dst.bits < 64 else b.fptosi(x, I64)
        return _resize(b, x, ty, src.is_signed and src is not T.u1)
    if dst is T.f16:
        return c.target.f64_to_f16(b, _to_float(b, src, x, F64))
    return _to_float(b, src, x, ty)


def _resize(b: ir.IRBuilder, x: ir.Value, ty: ir.IntType, signed: bool) -> ir.Value:
    if x.type.width == ty.width:
        return x
    if x.type.width > ty.width:
        return b.trunc(x, ty)
    return b.sext(x, ty) if signed else b.zext(x, ty)


def _to_float(b: ir.IRBuilder, src: T.DataType, x: ir.Value, ty: ir.Type) -> ir.Value:
    if src.is_int:
        return (b.sitofp if src.is_signed and src is not T.u1 else b.uitofp)(x, ty)
    if x.type == ty:
        return x
    return b.fpext(x, ty) if ty == F64 else b.fptrunc(x, ty)


def bit_cast(c: OpCtx, src: T.DataType, dst: T.DataType, x: ir.Value) -> ir.Value:
    """Reinterpretation at one width. f16 lives as float, so its bits are the half the float converts to
    (exact for a register f16) and back; NaNs keep sign and payload as they are (`qd_f16_to_bits`)."""
    if src.bits != dst.bits:
        from qd.errors import QuadrantsTypeError

        raise QuadrantsTypeError(f"bit_cast needs equal widths, got {src} -> {dst}")
    if src is dst:
        return x
    if src is T.f16:
        return f16_to_bits(c.b, x)
    if dst is T.f16:
        return bits_to_f16(c.b, x)
    ty = reg_type(dst)
    return x if x.type == ty else c.b.bitcast(x, ty)


def f16_to_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The i16 bits of register f16 `x` (a float): the half it converts to; a NaN keeps its sign and top 10
    payload bits without being quieted (0x200 when those are zero, so that it stays a NaN)."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    hw = b.bitcast(b.fptrunc(x, F16), i16)
    u = b.bitcast(x, i32)
    m = b.and_(b.trunc(b.lshr(u, ir.Constant(i32, 13)), i16), ir.Constant(i16, 0x3FF))
    m = b.select(b.icmp_unsigned("==", m, ir.Constant(i16, 0)), ir.Constant(i16, 0x200), m)
    sign = b.and_(b.trunc(b.lshr(u, ir.Constant(i32, 16)), i16), ir.Constant(i16, 0x8000))
    nan = b.or_(b.or_(sign, ir.Constant(i16, 0x7C00)), m)
    return b.select(b.fcmp_unordered("uno", x, x), nan, hw)


def bits_to_f16(b: ir.IRBuilder, h: ir.Value) -> ir.Value:
    """The register f16 (a float) of the i16 bits `h`: exact, a NaN's sign and payload kept as they are."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    hw = b.fpext(b.bitcast(h, F16), F32)
    is_nan = b.icmp_unsigned(">", b.and_(h, ir.Constant(i16, 0x7FFF)), ir.Constant(i16, 0x7C00))
    sign = b.shl(b.zext(b.and_(h, ir.Constant(i16, 0x8000)), i32), ir.Constant(i32, 16))
    m = b.shl(b.zext(b.and_(h, ir.Constant(i16, 0x3FF)), i32), ir.Constant(i32, 13))
    nan = b.bitcast(b.or_(b.or_(sign, ir.Constant(i32, 0x7F800000)), m), F32)
    return b.select(is_nan, nan, hw)


def _select(c: OpCtx, dt: T.DataType, args: Sequence[ir.Value]) -> ir.Value:
    return c.b.select(c.truth(args[0]), args[1], args[2])


# ------------------------------------------------------------------ the table


# (op, 'int' | 'float') -> lowering. CAST and BIT_CAST go through `cast` / `bit_cast`.
TABLE: dict[tuple[Op, str], Lowering] = {}
for _op in INT_BINARY:
    TABLE[(_op, "int")] = _int_binary(_op)
for _op in FLOAT_BINARY:
    TABLE[(_op, "float")] = _float_binary(_op)
for _op in COMPARISONS:
    TABLE[(_op, "int")] = TABLE[(_op, "float")] = _compare(_op)
for _op in (Op.NEG, Op.ABS, Op.SGN, Op.LOGICAL_NOT):
    TABLE[(_op, "int")] = TABLE[(_op, "float")] = _unary(_op)
for _op in INT_UNARY:
    TABLE[(_op, "int")] = _unary(_op)
for _op in FLOAT_UNARY:
    TABLE[(_op, "float")] = _unary(_op)
TABLE[(Op.SELECT, "int")] = TABLE[(Op.SELECT, "float")] = _select
TABLE[(Op.STOP_GRAD, "int")] = TABLE[(Op.STOP_GRAD, "float")] = lambda c, dt, args: args[0]
COMPOSED = {Op.CAST: "cast", Op.BIT_CAST: "bit_cast"}
# ops this tier leaves out: op -> why (`qd.codegen.decompose.DECOMPOSE`: lowered there from other ops)
LACKS: dict[Op, str] = {}


def lower_op(c: OpCtx, op: Op, arg_dts: Sequence[T.DataType], out: T.DataType,
             args: Sequence[ir.Value]) -> ir.Value:
    """The value of `op(args)`; `arg_dts` are the operands' dtypes, `out` the result dtype."""
    if op is Op.CAST:
        return cast(c, arg_dts[0], out, args[0])
    if op is Op.BIT_CAST:
        return bit_cast(c, arg_dts[0], out, args[0])
    dt = arg_dts[1] if op is Op.SELECT else arg_dts[0]
    fn = TABLE.get((op, "float" if dt.is_float else "int"))
    if fn is None:
        from qd.errors import QuadrantsTypeError

        raise QuadrantsTypeError(f"op {op.value} is not defined on {dt}")
    v = fn(c, dt, args)
    if out is T.f16 and op is not Op.SELECT:
        v = c.round_f16(v)
    return v


__all__ = [
    "COMPOSED",
    "F16",
    "I1",
    "I8",
    "LACKS",
    "TABLE",
    "OpCtx",
    "bit_cast",
    "cast",
    "const",
    "fminmax",
    "lower_op",
    "mem_type",
    "reg_type",
]
