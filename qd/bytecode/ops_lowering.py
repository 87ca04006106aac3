"""Lowers one `OpStmt` to interpreter instructions, per the op's dtype class.

Most ops are one instruction `<OP>_<class>`. Narrow integers (i8, i16, u8, u16, u1) compute in the
32-bit class and are truncated afterwards; their shift counts, and the operands of logical shifts,
popcount and clz, are masked to the narrow width first. f16 computes in f32 and is rounded to f16.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qd import ir
from qd.bytecode.opcodes import class_of
from qd.ops import Op
from qd.types import dtypes as T

if TYPE_CHECKING:
    from qd.bytecode.lower import Lowerer

_NARROW_TRUNC = {T.i8: "TRUNC_I8", T.i16: "TRUNC_I16", T.u8: "TRUNC_U8", T.u16: "TRUNC_U16",
                 T.u1: "TRUNC_U1"}


def _cast_src(dt: T.DataType) -> str:
    if dt.is_float:
        return "F64" if dt.bits == 64 else "F32"
    return "I" if dt.is_signed else "U"


def _narrow(dt: T.DataType) -> bool:
    return dt.is_int and dt.bits < 32


def lower_op(lw: "Lowerer", s: ir.OpStmt) -> None:
    d = lw.r(s)
    args = [lw.r(a) for a in s.args]
    src_dt = s.args[0].dtype
    if s.op is Op.SELECT:
        lw.out.emit("SELECT", d, lw.cond(s.args[0]), args[1], args[2], loc=s.loc)
        return
    if s.op is Op.CAST:
        _cast(lw, s, d, args[0], src_dt)
        return
    if s.op is Op.STOP_GRAD:  # an identity for execution; only AD treats it specially
        lw.out.emit("MOV", d, args[0], loc=s.loc)
        return
    if s.op is Op.BIT_CAST:
        _bit_cast(lw, s, d, args[0], src_dt)
        return
    cls = class_of(src_dt)
    if _narrow(src_dt) and s.op in (Op.SHL, Op.SHR, Op.BIT_SHR, Op.POPCNT, Op.CLZ):
        _narrow_bits_op(lw, s, d, args, src_dt)
        return
    lw.out.emit(f"{s.op.name}_{cls}", d, *args, loc=s.loc)
    _fix_width(lw, s, d)


def _fix_width(lw: "Lowerer", s: ir.OpStmt, d: int) -> None:
    dt = s.dtype
    if dt in _NARROW_TRUNC and s.op not in _CMP_LIKE:
        lw.out.emit(_NARROW_TRUNC[dt], d, d, loc=s.loc)
    elif dt is T.f16:
        lw.out.emit("ROUND_F16", d, d, loc=s.loc)


_CMP_LIKE = {Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE, Op.LOGICAL_NOT}


def _narrow_bits_op(lw: "Lowerer", s: ir.OpStmt, d: int, args: list[int], dt: T.DataType) -> None:
    """Shifts/popcnt/clz of i8/i16/u8/u16/u1: mask to the width, compute in 32 bits, truncate.

    The constants are small non-negative numbers, whose register bits are the same in every int
    class, so they are made as i64 constants."""
    w = dt.bits
    cls = class_of(dt)
    mask = lw.const(T.i64, (1 << w) - 1)
    if s.op in (Op.SHL, Op.SHR, Op.BIT_SHR):
        cnt = lw.new_reg()
        lw.out.emit(f"BIT_AND_{cls}", cnt, args[1], lw.const(T.i64, w - 1), loc=s.loc)
        src = args[0]
        if s.op is Op.BIT_SHR and dt.is_signed:
            src = lw.new_reg()
            lw.out.emit("BIT_AND_I32", src, args[0], mask, loc=s.loc)
        lw.out.emit(f"{'SHR' if s.op is Op.BIT_SHR else s.op.name}_{cls}", d, src, cnt, loc=s.loc)
        lw.out.emit(_NARROW_TRUNC[dt], d, d, loc=s.loc)
        return
    masked = lw.new_reg()
    lw.out.emit(f"BIT_AND_{cls}", masked, args[0], mask, loc=s.loc)
    if s.op is Op.POPCNT:
        lw.out.emit(f"POPCNT_{cls}", d, masked, loc=s.loc)
        return
    lw.out.emit(f"CLZ_{cls}", d, masked, loc=s.loc)
    lw.out.emit(f"SUB_{cls}", d, d, lw.const(T.i64, 32 - w), loc=s.loc)


def _cast(lw: "Lowerer", s: ir.OpStmt, d: int, a: int, src: T.DataType) -> None:
    dst = s.dtype
    if src is dst or (src is T.f16 and dst is T.f32):
        lw.out.emit("MOV", d, a, loc=s.loc)
        return
    lw.out.emit(f"CAST_{_cast_src(src)}_{dst.name.upper()}", d, a, loc=s.loc)


def _bit_cast(lw: "Lowerer", s: ir.OpStmt, d: int, a: int, src: T.DataType) -> None:
    dst = s.dtype
    if src.bits != dst.bits:
        from qd.errors import QuadrantsTypeError

        raise QuadrantsTypeError(f"{s.loc}: bit_cast needs equal widths, got {src} -> {dst}")
    if src is dst:
        lw.out.emit("MOV", d, a, loc=s.loc)
    elif src is T.f16:  # f16 lives as f32: its 16 bits come from converting back, not from the f32's bits
        lw.out.emit("BITCAST_F16_TO_I16" if dst.is_signed else "BITCAST_F16_TO_U16", d, a, loc=s.loc)
    elif dst is T.f16:
        lw.out.emit("BITCAST_16_TO_F16", d, a, loc=s.loc)
    elif src.bits == 64:
        lw.out.emit("BITCAST_64", d, a, loc=s.loc)
    elif dst is T.f32:
        lw.out.emit("BITCAST_32_TO_F32", d, a, loc=s.loc)
    elif src is T.f32:
        lw.out.emit("BITCAST_F32_TO_I32" if dst.is_signed else "BITCAST_F32_TO_U32", d, a, loc=s.loc)
    else:  # int <-> int of one width: a wrapping value cast
        lw.out.emit(f"CAST_{_cast_src(src)}_{dst.name.upper()}", d, a, loc=s.loc)
