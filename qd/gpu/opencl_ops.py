"""Op rendering for the OpenCL C emitter: one C expression per `Op` and value kind.

The semantics are the interpreter's (`qd/bytecode/opcodes.py`, DESIGN §4), as in `qd/jit/llvm_ops.py` and
`qd/gpu/spirv_ops.py`: ints wrap (arithmetic through the unsigned type: signed overflow is undefined in C),
Python `//` and `%` with `x // 0 == 0` (the prelude's `qd_floordiv_*`, `qd_mod_*`), masked shift counts, the
interpreter's float min/max, f16 computed in f32 and rounded after every op. C math functions are OpenCL C's
overloads of the op table's names (`OpInfo.libm`). `TABLE` maps every op and kind ('int': u1 too, as an int 0/1;
'float') to its renderer (`tests/test_ops_coverage.py` checks it); `op_expr` dispatches; CAST and BIT_CAST are
composed per (source, destination) pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from qd.errors import QuadrantsTypeError
from qd.ops import COMPARISONS, FLOAT_BINARY, FLOAT_UNARY, INFO, INT_BINARY, INT_UNARY, Op
from qd.types import dtypes as T

# register types (f16 lives as float, u1 as int 0/1) and memory types
_REG = {T.i8: "char", T.u8: "uchar", T.i16: "short", T.u16: "ushort", T.i32: "int", T.u32: "uint", T.i64: "long",
        T.u64: "ulong", T.f16: "float", T.f32: "float", T.f64: "double", T.u1: "int"}
MEM = {**_REG, T.u1: "uchar", T.f16: "half"}
_UNSIGNED = {8: "uchar", 16: "ushort", 32: "uint", 64: "ulong"}

Render = Callable[[T.DataType, Sequence[str]], str]


def reg(dt: T.DataType) -> str:
    return _REG[dt]


def const(dt: T.DataType, value: object) -> str:
    """A C literal of `dt` (f16 and f32 constants rounded to their type first)."""
    if dt.is_float:
        import numpy as np

        v = float(np.float16(value)) if dt is T.f16 else float(np.float32(value)) if dt is T.f32 else float(value)
        suffix = "" if dt.bits == 64 else "f"
        if math.isnan(v):  # its bits, sign and payload (NAN would drop both)
            if dt.bits == 64:
                return f"as_double({np.array(v, np.float64).view(np.uint64).item():#x}UL)"
            return f"as_float({np.array(v, np.float32).view(np.uint32).item():#x}u)"
        if math.isinf(v):
            s = "-" if v < 0 else ""
            return f"({s}(double)INFINITY)" if dt.bits == 64 else f"({s}INFINITY)"
        return f"({v.hex()}{suffix})"
    bits = int(value) & ((1 << dt.bits) - 1) if dt is not T.u1 else int(bool(value))
    return f"(({reg(dt)}){bits:#x}UL)"


def to_bits(dt: T.DataType, x: str) -> str:
    """The register bits (a long) of `x`: ints extended by signedness, f32/f16 as f32 bits, f64 bits."""
    if dt.is_float:
        return f"((long)as_ulong({x}))" if dt.bits == 64 else f"((long)as_uint((float)({x})))"
    return f"((long)({x}))"


def from_bits(dt: T.DataType, w: str) -> str:
    if dt.is_float:
        return f"as_double({w})" if dt.bits == 64 else f"as_float((uint)({w}))"
    if dt is T.u1:
        return f"((int)(({w}) != 0))"
    return f"(({reg(dt)})({w}))"


def _wrap(dt: T.DataType, expr_u: str) -> str:
    return f"(({reg(dt)})({expr_u}))"


def _truth(x: str) -> str:
    return f"({x} != 0)"


def _u(dt: T.DataType) -> str:
    """The unsigned C type of int `dt`'s width (u1: uint)."""
    return _UNSIGNED[dt.bits] if dt is not T.u1 else "uint"


# ------------------------------------------------------------------ floats

_FLOAT_ARITH = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/"}


def _fminmax(is_min: bool, x: str, y: str) -> str:
    return f"((({x} {'<=' if is_min else '>='} {y}) || isnan({y})) ? {x} : {y})"


def _float_binary(op: Op) -> Render:
    def render(dt: T.DataType, xs: Sequence[str]) -> str:
        x, y = xs
        if op in _FLOAT_ARITH:
            return f"(({x}) {_FLOAT_ARITH[op]} ({y}))"
        if op is Op.MOD:  # a - b*floor(a/b), never fused (an fma changes it)
            return f"qd_fmod_{reg(dt)}({x}, {y})"
        if op in (Op.MIN, Op.MAX):
            return _fminmax(op is Op.MIN, x, y)
        return f"{INFO[op].libm}({x}, {y})"  # pow, atan2
    return render


def _float_unary(op: Op) -> Render:
    def render(dt: T.DataType, xs: Sequence[str]) -> str:
        x = xs[0]
        if op is Op.NEG:
            return f"(-({x}))"
        if op is Op.SGN:
            one = const(dt, 1.0)
            return f"(({x}) > 0 ? {one} : (({x}) < 0 ? -{one} : {const(dt, 0.0)}))"
        if op is Op.RSQRT:
            return f"({const(dt, 1.0)} / {INFO[Op.SQRT].libm}({x}))"
        return f"{INFO[op].libm}({x})"  # the op table's C math function (OpenCL C overloads it per type)
    return render


# ------------------------------------------------------------------ ints

_INT_ARITH = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.BIT_AND: "&", Op.BIT_OR: "|", Op.BIT_XOR: "^"}
_INT_HELPER = {Op.FLOORDIV: "qd_floordiv", Op.MOD: "qd_mod", Op.POW: "qd_ipow"}  # the prelude's, per type


def _int_binary(op: Op) -> Render:
    def render(dt: T.DataType, xs: Sequence[str]) -> str:
        x, y = xs
        u, t, m = _u(dt), reg(dt), dt.bits - 1
        if op in _INT_ARITH:  # through the unsigned type: wraps (signed overflow is undefined in C)
            return _wrap(dt, f"({u})({x}) {_INT_ARITH[op]} ({u})({y})")
        if op in _INT_HELPER:
            return f"{_INT_HELPER[op]}_{t}({x}, {y})"
        if op in (Op.MIN, Op.MAX):
            return f"(({x}) {'<' if op is Op.MIN else '>'} ({y}) ? ({x}) : ({y}))"
        if op is Op.SHL:
            return _wrap(dt, f"({u})({x}) << (({y}) & {m})")
        if op is Op.SHR:
            base = f"({t})({x})" if dt.is_signed else f"({u})({x})"
            return _wrap(dt, f"{base} >> (({y}) & {m})")
        return _wrap(dt, f"({u})({x}) >> (({y}) & {m})")  # BIT_SHR
    return render


def _int_unary(op: Op) -> Render:
    def render(dt: T.DataType, xs: Sequence[str]) -> str:
        x, u, t = xs[0], _u(dt), reg(dt)
        if op is Op.NEG:
            return _wrap(dt, f"qd_neg_{u}(({u})({x}))")
        if op is Op.BIT_NOT:
            return _wrap(dt, f"~({x})")
        if op is Op.ABS:  # the negation through qd_opaque (NVIDIA's compiler takes its abs of INT_MIN to be >= 0)
            if not dt.is_signed:
                return x
            return f"(({x}) < 0 ? {_wrap(dt, f'({u})0 - ({u})qd_opaque_{u}(({u})({x}))')} : ({x}))"
        if op is Op.SGN:
            return f"(({t})((({x}) > 0) - (({x}) < 0)))" if dt.is_signed else f"(({t})(({x}) != 0))"
        return _wrap(dt, f"{'popcount' if op is Op.POPCNT else 'clz'}(({u})({x}))")  # POPCNT, CLZ
    return render


# ------------------------------------------------------------------ both kinds

_CMP = {Op.CMP_LT: "<", Op.CMP_LE: "<=", Op.CMP_GT: ">", Op.CMP_GE: ">=", Op.CMP_EQ: "==", Op.CMP_NE: "!="}


def _compare(op: Op) -> Render:
    return lambda dt, xs: f"(({xs[0]}) {_CMP[op]} ({xs[1]}) ? 1 : 0)"


def _logical_not(dt: T.DataType, xs: Sequence[str]) -> str:
    return f"(({xs[0]}) == 0 ? 1 : 0)"


def _select(dt: T.DataType, xs: Sequence[str]) -> str:
    return f"({_truth(xs[0])} ? {xs[1]} : {xs[2]})"


# ------------------------------------------------------------------ the table

TABLE: dict[tuple[Op, str], Render] = {}
for _op in INT_BINARY:
    TABLE[(_op, "int")] = _int_binary(_op)
for _op in FLOAT_BINARY:
    TABLE[(_op, "float")] = _float_binary(_op)
for _op in INT_UNARY + (Op.NEG, Op.ABS, Op.SGN):
    TABLE[(_op, "int")] = _int_unary(_op)
for _op in FLOAT_UNARY + (Op.NEG, Op.ABS, Op.SGN):
    TABLE[(_op, "float")] = _float_unary(_op)
for _kind in ("int", "float"):
    for _op in COMPARISONS:
        TABLE[(_op, _kind)] = _compare(_op)
    TABLE[(Op.LOGICAL_NOT, _kind)] = _logical_not
    TABLE[(Op.SELECT, _kind)] = _select
    TABLE[(Op.STOP_GRAD, _kind)] = lambda dt, xs: xs[0]
COMPOSED = {Op.CAST: "cast", Op.BIT_CAST: "bit_cast"}
# ops this tier leaves out: op -> why (`qd.codegen.decompose.DECOMPOSE`: lowered there from other ops)
LACKS: dict[Op, str] = {}


def op_expr(op: Op, dts: list[T.DataType], out: T.DataType, xs: list[str]) -> str:
    """The C expression of `op(xs)` (operand dtypes `dts`, result `out`), the interpreter's semantics."""
    if op is Op.CAST:
        return cast(dts[0], out, xs[0])
    if op is Op.BIT_CAST:
        return bit_cast(dts[0], out, xs[0])
    dt = dts[1] if op is Op.SELECT else dts[0]
    fn = TABLE.get((op, "float" if dt.is_float else "int"))
    if fn is None:
        raise QuadrantsTypeError(f"op {op.value} is not defined on {dt}")
    v = fn(dt, xs)
    if out is T.f16 and op is not Op.SELECT and op not in COMPARISONS:
        v = f"qd_rh({v})"
    return v


# ------------------------------------------------------------------ casts

def cast(src: T.DataType, dst: T.DataType, x: str) -> str:
    """Value conversion, as `qd/jit/llvm_ops.py: cast`."""
    if src is dst or (src is T.f16 and dst is T.f32):
        return x
    if dst is T.u1:
        return f"(({x}) != 0 ? 1 : 0)"
    if dst.is_int:
        if src.is_float:
            return f"((ulong)({x}))" if dst is T.u64 else f"(({reg(dst)})(long)({x}))"
        return f"(({reg(dst)})({x}))"
    if dst is T.f16:
        if src.is_float and src.bits == 32 or src is T.f16:
            return f"qd_rh({x})"
        return f"qd_d2h((double)({x}))"
    return f"(({reg(dst)})({x}))"


def bit_cast(src: T.DataType, dst: T.DataType, x: str) -> str:
    if src.bits != dst.bits:
        raise QuadrantsTypeError(f"bit_cast needs equal widths, got {src} -> {dst}")
    if src is dst:
        return x
    if src is T.f16:  # f16 lives as float: its bits are the half it converts to (exact), NaN payloads as they are
        return f"(({reg(dst)})qd_f16_bits({x}))"
    if dst is T.f16:
        return f"qd_bits_f16((ushort)({x}))"
    if src.bits <= 16:
        return f"(({reg(dst)})({x}))"
    return f"as_{reg(dst)}({x})"


__all__ = ["COMPOSED", "LACKS", "MEM", "TABLE", "bit_cast", "cast", "const", "from_bits", "op_expr", "reg", "to_bits"]
