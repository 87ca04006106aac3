"""Op lowering for the SPIR-V emitter: one instruction sequence per `Op` and dtype class.

The semantics are the interpreter's (`qd/bytecode/opcodes.py`, DESIGN §4), as in `qd/jit/llvm_ops.py`:
ints wrap at their width (one SPIR-V int type per width, signedness carried by the instruction), Python
floor division and modulo with `x // 0 == 0`, masked shift counts, the interpreter's float min/max (an equal
pair or a NaN `y` gives `x`), f16 computed in f32 and rounded to half after every op (in integer
arithmetic, exact), C's `pow` and `atan2` at their special values. Vulkan restricts `OpBitCount` and
`FindUMsb` to 32 bits: wider and narrower operands are split or widened. Transcendentals are GLSL.std.450's
(f32); f64 ones have no GLSL form and come from qd's own straight-line implementations (`spirv_libm.py`).
`TABLE` maps every op to its lowering (`tests/test_ops_coverage.py` checks it); `lower_op` dispatches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from qd.errors import QuadrantsTypeError
from qd.gpu import spirv_libm as libm
from qd.gpu.spirv_defs import GLSL, Decoration
from qd.gpu.spirv_defs import Op as S
from qd.ops import COMPARISONS, FLOAT_BINARY, FLOAT_UNARY, INFO, INT_BINARY, INT_UNARY, TRANSCENDENTAL, UNARY, Op
from qd.types import dtypes as T


class Emit(Protocol):
    """What an op lowering needs from the emitter (`qd/gpu/spirv.py`'s `FnEmitter`)."""

    fast: bool
    wide_f32: bool  # f32 transcendentals through the f64 implementations (the device has f64)

    def ty(self, dt: T.DataType) -> int: ...
    def bool_t(self) -> int: ...
    def c(self, dt: T.DataType, value: Any) -> int: ...
    def op(self, opcode: S, *operands: Any, t: int | None = None) -> int: ...
    def ext(self, inst: GLSL, t: int, *args: int) -> int: ...
    def u32c(self, value: int) -> int: ...
    def exact(self, rid: int, always: bool = False) -> int: ...


Lowering = Callable[[Emit, T.DataType, Sequence[int]], int]


def truth(e: Emit, dt: T.DataType, v: int) -> int:
    """A bool that is true when `v` (of `dt`) is non-zero (floats: `!= 0`, NaN included)."""
    if dt is T.u1:
        return v
    if dt.is_float:
        return e.op(S.FUnordNotEqual, v, e.c(dt, 0.0), t=e.bool_t())
    return e.op(S.INotEqual, v, e.c(dt, 0), t=e.bool_t())


def select(e: Emit, t: int, cond: int, a: int, b: int) -> int:
    return e.op(S.Select, cond, a, b, t=t)


def _u1_as(e: Emit, v: int, dt: T.DataType) -> int:
    """A bool as 0/1 of int dtype `dt`."""
    return select(e, e.ty(dt), v, e.c(dt, 1), e.c(dt, 0))


# ------------------------------------------------------------------ f16: f32 values rounded to half

def round_f16(e: Emit, x: int) -> int:
    """`x` (f32) rounded to the nearest f16 value, ties to even, returned as f32 (exact integer arithmetic)."""
    return f16_bits_to_f32(e, f32_to_f16_bits(e, x))


def f32_to_f16_bits(e: Emit, x: int, quiet: bool = True) -> int:
    """The f16 bits (in a u32) nearest to f32 `x`, ties to even; overflow gives inf. A NaN keeps its sign and
    the top 10 bits of its payload; `quiet` sets the quiet bit (a store, as x86's conversion does), else it is
    set only where the kept bits are zero (bit_cast: a signaling NaN from a half stays signaling)."""
    u = e.ty(T.u32)
    k = e.u32c
    b = e.op(S.Bitcast, x, t=u)
    sign = e.op(S.BitwiseAnd, e.op(S.ShiftRightLogical, b, k(16), t=u), k(0x8000), t=u)
    a = e.op(S.BitwiseAnd, b, k(0x7FFFFFFF), t=u)
    bt = e.bool_t()
    # normal range: rebias the exponent and round the 13 dropped bits to nearest even
    odd = e.op(S.BitwiseAnd, e.op(S.ShiftRightLogical, a, k(13), t=u), k(1), t=u)
    normal = e.op(S.ShiftRightLogical, e.op(S.IAdd, e.op(S.IAdd, a, k(0xFFF), t=u), odd, t=u), k(13), t=u)
    normal = e.op(S.ISub, normal, k((127 - 15) << 10), t=u)
    # subnormal range: let the FPU round (x + 0.5 in f32 puts the f16 subnormal in the low mantissa bits)
    af = e.op(S.Bitcast, a, t=e.ty(T.f32))
    sub = e.op(S.ISub, e.op(S.Bitcast, e.op(S.FAdd, af, e.c(T.f32, 0.5), t=e.ty(T.f32)), t=u), k(0x3F000000), t=u)
    r = select(e, u, e.op(S.ULessThan, a, k(0x38800000), t=bt), sub, normal)
    r = select(e, u, e.op(S.UGreaterThanEqual, a, k(0x477FF000), t=bt), k(0x7C00), r)  # rounds to inf
    payload = e.op(S.BitwiseAnd, e.op(S.ShiftRightLogical, a, k(13), t=u), k(0x3FF), t=u)
    if not quiet:
        payload = select(e, u, e.op(S.IEqual, payload, k(0), t=bt), k(0x200), payload)
    nan = e.op(S.BitwiseOr, payload, k(0x7E00 if quiet else 0x7C00), t=u)
    r = select(e, u, e.op(S.UGreaterThan, a, k(0x7F800000), t=bt), nan, r)
    return e.op(S.BitwiseOr, r, sign, t=u)


def f16_bits_to_f32(e: Emit, h: int, quiet: bool = True) -> int:
    """The f32 value of f16 bits `h` (a u32 holding 16 bits); exact. A NaN keeps sign and payload; `quiet` sets
    its quiet bit (a load, as x86's conversion does), else a signaling NaN stays signaling (bit_cast)."""
    u, f = e.ty(T.u32), e.ty(T.f32)
    k = e.u32c
    bt = e.bool_t()
    sign = e.op(S.ShiftLeftLogical, e.op(S.BitwiseAnd, h, k(0x8000), t=u), k(16), t=u)
    em = e.op(S.BitwiseAnd, h, k(0x7FFF), t=u)
    normal = e.op(S.IAdd, e.op(S.ShiftLeftLogical, em, k(13), t=u), k((127 - 15) << 23), t=u)
    infnan = e.op(S.BitwiseOr, e.op(S.ShiftLeftLogical, em, k(13), t=u), k(0x7F800000), t=u)
    if quiet:
        infnan = select(e, u, e.op(S.UGreaterThan, em, k(0x7C00), t=bt),
                        e.op(S.BitwiseOr, infnan, k(0x00400000), t=u), infnan)
    # subnormal (and zero): mantissa * 2^-24, exact in f32
    subf = e.op(S.FMul, e.op(S.ConvertUToF, em, t=f), e.c(T.f32, 2.0 ** -24), t=f)
    r = select(e, u, e.op(S.UGreaterThanEqual, em, k(0x7C00), t=bt), infnan, normal)
    r = select(e, u, e.op(S.ULessThan, em, k(0x0400), t=bt), e.op(S.Bitcast, subf, t=u), r)
    return e.op(S.Bitcast, e.op(S.BitwiseOr, r, sign, t=u), t=f)


# ------------------------------------------------------------------ integers

def _sdivrem(e: Emit, dt: T.DataType, a: int, b: int) -> tuple[int, int]:
    """C's truncated signed quotient and remainder (b != 0, not -1), through unsigned division of the
    magnitudes: NVIDIA's Vulkan driver divides as if unsigned when `OpSDiv`/`OpSRem` get qd's signedness-0 int
    types (i32 `-7 % 3` gave garbage, `-43 // 2` was off by one), and this form is exact on every device."""
    t, bt = e.ty(dt), e.bool_t()
    zero = e.c(dt, 0)
    an, bn = e.op(S.SLessThan, a, zero, t=bt), e.op(S.SLessThan, b, zero, t=bt)
    ua = select(e, t, an, e.op(S.SNegate, a, t=t), a)  # INT_MIN stays 2^(w-1): right as unsigned
    ub = select(e, t, bn, e.op(S.SNegate, b, t=t), b)
    uq, ur = e.op(S.UDiv, ua, ub, t=t), e.op(S.UMod, ua, ub, t=t)
    q = select(e, t, e.op(S.LogicalNotEqual, an, bn, t=bt), e.op(S.SNegate, uq, t=t), uq)
    return q, select(e, t, an, e.op(S.SNegate, ur, t=t), ur)


def _floordiv_int(e: Emit, dt: T.DataType, a: int, b: int) -> int:
    t, bt = e.ty(dt), e.bool_t()
    zero, one = e.c(dt, 0), e.c(dt, 1)
    bz = e.op(S.IEqual, b, zero, t=bt)
    if not dt.is_signed:
        return select(e, t, bz, zero, e.op(S.UDiv, a, select(e, t, bz, one, b), t=t))
    bm1 = e.op(S.IEqual, b, e.c(dt, -1), t=bt)
    safe = select(e, t, e.op(S.LogicalOr, bz, bm1, t=bt), one, b)
    q, r = _sdivrem(e, dt, a, safe)
    adj = e.op(S.LogicalAnd, e.op(S.INotEqual, r, zero, t=bt),
               e.op(S.SLessThan, e.op(S.BitwiseXor, a, b, t=t), zero, t=bt), t=bt)
    q = e.op(S.ISub, q, _u1_as(e, adj, dt), t=t)
    return select(e, t, bz, zero, select(e, t, bm1, e.op(S.SNegate, a, t=t), q))


def _mod_int(e: Emit, dt: T.DataType, a: int, b: int) -> int:
    t, bt = e.ty(dt), e.bool_t()
    zero, one = e.c(dt, 0), e.c(dt, 1)
    bz = e.op(S.IEqual, b, zero, t=bt)
    if not dt.is_signed:
        return select(e, t, bz, zero, e.op(S.UMod, a, select(e, t, bz, one, b), t=t))
    bad = e.op(S.LogicalOr, bz, e.op(S.IEqual, b, e.c(dt, -1), t=bt), t=bt)
    r = _sdivrem(e, dt, a, select(e, t, bad, one, b))[1]
    adj = e.op(S.LogicalAnd, e.op(S.INotEqual, r, zero, t=bt),
               e.op(S.SLessThan, e.op(S.BitwiseXor, r, b, t=t), zero, t=bt), t=bt)
    r = select(e, t, adj, e.op(S.IAdd, r, b, t=t), r)
    return select(e, t, bad, zero, r)


def _pow_int(e: Emit, dt: T.DataType, a: int, b: int) -> int:
    """Repeated squaring unrolled over the exponent's bits (no loop: at most `bits` steps, each a select);
    a negative signed exponent gives 0 unless |a| == 1 (qd_ipow_i64)."""
    t, bt = e.ty(dt), e.bool_t()
    one, zero = e.c(dt, 1), e.c(dt, 0)
    r, base, ex = one, a, b
    for _ in range(dt.bits):
        odd = e.op(S.INotEqual, e.op(S.BitwiseAnd, ex, one, t=t), zero, t=bt)
        r = select(e, t, odd, e.op(S.IMul, r, base, t=t), r)
        base = e.op(S.IMul, base, base, t=t)
        ex = e.op(S.ShiftRightLogical, ex, one, t=t)
    if not dt.is_signed:
        return r
    minus1 = e.c(dt, -1)
    odd = e.op(S.INotEqual, e.op(S.BitwiseAnd, b, one, t=t), zero, t=bt)
    neg = select(e, t, e.op(S.IEqual, a, one, t=bt), one,
                 select(e, t, e.op(S.IEqual, a, minus1, t=bt), select(e, t, odd, minus1, one), zero))
    return select(e, t, e.op(S.SLessThan, b, zero, t=bt), neg, r)


def _shift_count(e: Emit, dt: T.DataType, n: int) -> int:
    return e.op(S.BitwiseAnd, n, e.c(dt, dt.bits - 1), t=e.ty(dt))


def _int_binary(op: Op) -> Lowering:
    simple = {Op.ADD: S.IAdd, Op.SUB: S.ISub, Op.MUL: S.IMul, Op.BIT_AND: S.BitwiseAnd,
              Op.BIT_OR: S.BitwiseOr, Op.BIT_XOR: S.BitwiseXor}

    def lower(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
        x, y = args
        t, s = e.ty(dt), dt.is_signed
        if op in simple:
            return e.op(simple[op], x, y, t=t)
        if op is Op.FLOORDIV:
            return _floordiv_int(e, dt, x, y)
        if op is Op.MOD:
            return _mod_int(e, dt, x, y)
        if op is Op.POW:
            return _pow_int(e, dt, x, y)
        if op in (Op.MIN, Op.MAX):
            cmp = (S.SLessThan if s else S.ULessThan) if op is Op.MIN else (S.SGreaterThan if s else S.UGreaterThan)
            return select(e, t, e.op(cmp, x, y, t=e.bool_t()), x, y)
        n = _shift_count(e, dt, y)
        if op is Op.SHL:
            return e.op(S.ShiftLeftLogical, x, n, t=t)
        if op is Op.SHR and s:
            return e.op(S.ShiftRightArithmetic, x, n, t=t)
        return e.op(S.ShiftRightLogical, x, n, t=t)  # SHR unsigned, BIT_SHR
    return lower


def _bool_binary(op: Op) -> Lowering:
    """Ops on u1 operands: computed on 0/1 bytes, then `!= 0` (u1 wraps at one bit)."""
    def lower(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
        x, y = (_u1_as(e, a, T.u8) for a in args)
        r = _int_binary(op)(e, T.u8, [x, y])
        r = e.op(S.BitwiseAnd, r, e.c(T.u8, 1), t=e.ty(T.u8))
        return e.op(S.INotEqual, r, e.c(T.u8, 0), t=e.bool_t())
    return lower


def _popcount32(e: Emit, x: int) -> int:
    return e.op(S.BitCount, x, t=e.ty(T.u32))


def _clz32(e: Emit, x: int) -> int:
    u, bt = e.ty(T.u32), e.bool_t()
    msb = e.ext(GLSL.FindUMsb, u, x)  # -1 (all ones) for 0
    return select(e, u, e.op(S.IEqual, x, e.u32c(0), t=bt), e.u32c(32), e.op(S.ISub, e.u32c(31), msb, t=u))


def _split64(e: Emit, x: int) -> tuple[int, int]:
    u = e.ty(T.u32)
    return (e.op(S.UConvert, x, t=u),
            e.op(S.UConvert, e.op(S.ShiftRightLogical, x, e.c(T.u64, 32), t=e.ty(T.u64)), t=u))


def _bitcount(e: Emit, dt: T.DataType, x: int, clz: bool) -> int:
    """POPCNT / CLZ at `dt`'s width, through Vulkan's 32-bit-only instructions; result of `dt`."""
    u = e.ty(T.u32)
    if dt.bits == 64:
        lo, hi = _split64(e, x)
        if clz:
            r = select(e, u, e.op(S.IEqual, hi, e.u32c(0), t=e.bool_t()),
                       e.op(S.IAdd, e.u32c(32), _clz32(e, lo), t=u), _clz32(e, hi))
        else:
            r = e.op(S.IAdd, _popcount32(e, lo), _popcount32(e, hi), t=u)
        return e.op(S.UConvert, r, t=e.ty(dt))
    w = x if dt.bits == 32 else e.op(S.UConvert, x, t=u)
    r = _clz32(e, w) if clz else _popcount32(e, w)
    if clz and dt.bits < 32:
        r = e.op(S.ISub, r, e.u32c(32 - dt.bits), t=u)
    return r if dt.bits == 32 else e.op(S.UConvert, r, t=e.ty(dt))


# ------------------------------------------------------------------ floats

def fminmax(e: Emit, dt: T.DataType, is_min: bool, x: int, y: int) -> int:
    """The interpreter's fmin/fmax: `x` when it is smaller (larger) or equal, or when `y` is NaN."""
    bt = e.bool_t()
    better = e.op(S.FOrdLessThanEqual if is_min else S.FOrdGreaterThanEqual, x, y, t=bt)
    return select(e, e.ty(dt), e.op(S.LogicalOr, better, e.op(S.IsNan, y, t=bt), t=bt), x, y)


def _is_integer(e: Emit, dt: T.DataType, y: int) -> int:
    return e.op(S.FOrdEqual, e.ext(GLSL.Floor, e.ty(dt), y), y, t=e.bool_t())


def pow_float(e: Emit, dt: T.DataType, x: int, y: int, core: Callable[[int, int], int]) -> int:
    """C's pow (C99 Annex F) around `core(ax, y)`, which gives |x|**y for ax = |x| > 0 (GLSL `Pow`, defined
    for x > 0 only, or qd's own f64 one): the sign of an odd integral y for x < 0, NaN for a non-integral y
    there (but not for x = -inf: +inf or +0), x == 0 per C, a NaN operand gives NaN, except that x == 1,
    y == 0 and (-1) ** +-inf give 1."""
    t, bt = e.ty(dt), e.bool_t()
    ax = e.ext(GLSL.FAbs, t, x)
    r = core(ax, y)
    half = e.op(S.FMul, y, e.c(dt, 0.5), t=t)
    odd = e.op(S.LogicalAnd, _is_integer(e, dt, y), e.op(S.LogicalNot, _is_integer(e, dt, half), t=bt), t=bt)
    neg = e.op(S.FOrdLessThan, x, e.c(dt, 0.0), t=bt)
    signed = select(e, t, odd, e.op(S.FNegate, r, t=t), r)
    domain = e.op(S.LogicalOr, _is_integer(e, dt, y), e.op(S.IsInf, x, t=bt), t=bt)
    r = select(e, t, neg, select(e, t, domain, signed, e.c(dt, float("nan"))), r)
    # x == +-0: y > 0 gives +-0 (sign for odd y), y < 0 gives +-inf
    zx = e.op(S.FOrdEqual, x, e.c(dt, 0.0), t=bt)
    ypos = e.op(S.FOrdGreaterThan, y, e.c(dt, 0.0), t=bt)
    zero_r = select(e, t, ypos, e.c(dt, 0.0), e.c(dt, float("inf")))
    zero_r = select(e, t, e.op(S.LogicalAnd, odd, e.op(S.FOrdLessThan, e.op(S.FDiv, e.c(dt, 1.0), x, t=t),
                                                      e.c(dt, 0.0), t=bt), t=bt),
                    e.op(S.FNegate, zero_r, t=t), zero_r)
    r = select(e, t, zx, zero_r, r)
    r = select(e, t, e.op(S.LogicalOr, e.op(S.IsNan, x, t=bt), e.op(S.IsNan, y, t=bt), t=bt), e.c(dt, float("nan")), r)
    one = e.op(S.LogicalOr, e.op(S.FOrdEqual, x, e.c(dt, 1.0), t=bt),  # also (-1) ** +-inf
               e.op(S.LogicalAnd, e.op(S.FOrdEqual, ax, e.c(dt, 1.0), t=bt), e.op(S.IsInf, y, t=bt), t=bt), t=bt)
    r = select(e, t, one, e.c(dt, 1.0), r)
    return select(e, t, e.op(S.FOrdEqual, y, e.c(dt, 0.0), t=bt), e.c(dt, 1.0), r)


def _atan2(e: Emit, dt: T.DataType, y: int, x: int) -> int:
    """C's atan2 through GLSL `Atan2` (undefined at 0/0): atan2(+-0, x) is +-0 for x >= +0, +-pi for x <= -0."""
    import math

    t, bt = e.ty(dt), e.bool_t()
    r = e.ext(GLSL.Atan2, t, y, x)
    yz = e.op(S.FOrdEqual, y, e.c(dt, 0.0), t=bt)
    xneg = e.op(S.FOrdLessThan, e.op(S.FDiv, e.c(dt, 1.0), x, t=t), e.c(dt, 0.0), t=bt)  # -0 counts as negative
    pi = select(e, t, e.op(S.FOrdLessThan, e.op(S.FDiv, e.c(dt, 1.0), y, t=t), e.c(dt, 0.0), t=bt),
                e.c(dt, -math.pi), e.c(dt, math.pi))
    return select(e, t, yz, select(e, t, xneg, pi, y), r)


# GLSL.std.450's instruction for an op-table C function (`OpInfo.libm`) is its capitalised name, but for these
_GLSL_NAMES = {"rint": "RoundEven", "fabs": "FAbs"}


def _glsl_name(op: Op) -> str:
    name = INFO[op].libm or ""
    return _GLSL_NAMES.get(name, name.capitalize())


_GLSL_UNARY = {op: GLSL[_glsl_name(op)] for op in UNARY if INFO[op].libm and _glsl_name(op) in GLSL.__members__}
# GLSL.std.450 has f64 forms of Sqrt, Floor, Ceil, RoundEven and FAbs only; the others on f64 are qd's own
# (qd/gpu/spirv_libm.py: `f64_<C name>`), and so is RoundEven (lavapipe's f64 one rounds 3.5 to 3, and not at all
# from 2^24)
_F64_LIBM = {**{op: getattr(libm, f"f64_{INFO[op].libm}") for op in TRANSCENDENTAL
                if op in UNARY and hasattr(libm, f"f64_{INFO[op].libm}")},
             Op.ROUND: libm.f64_round_even}
# ops that lower to a long straight-line function (hundreds of instructions each)
LONG_OPS = frozenset(set(_F64_LIBM) - {Op.ROUND} | {Op.POW, Op.ATAN2})


def _float_binary(op: Op) -> Lowering:
    arith = {Op.ADD: S.FAdd, Op.SUB: S.FSub, Op.MUL: S.FMul, Op.DIV: S.FDiv}

    def lower(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
        x, y = args
        t = e.ty(dt)
        if op is Op.DIV:  # IEEE division on every tier (NVIDIA's f32 OpFDiv: 2.04 ulp over 2^20 inputs)
            return div_rn(e, dt, x, y)
        if op in arith:
            return e.exact(e.op(arith[op], x, y, t=t))
        if op is Op.MOD:  # a - b*floor(a/b) with correctly rounded steps, never fused (an fma changes it)
            q = e.ext(GLSL.Floor, t, div_rn(e, dt, x, y))
            return e.exact(e.op(S.FSub, x, e.exact(e.op(S.FMul, y, q, t=t), True), t=t), True)
        if op in (Op.MIN, Op.MAX):
            return fminmax(e, dt, op is Op.MIN, x, y)
        if dt.bits != 64 and e.wide_f32:
            return _narrow(e, lower(e, T.f64, [_widen(e, x), _widen(e, y)]))
        if op is Op.POW:
            core = ((lambda ax, yy: libm.f64_pow_abs(e, ax, yy)) if dt.bits == 64
                    else (lambda ax, yy: e.ext(GLSL.Pow, t, ax, yy)))
            return pow_float(e, dt, x, y, core)
        return libm.f64_atan2(e, x, y) if dt.bits == 64 else _atan2(e, dt, x, y)  # atan2(x=y, y=x)
    return lower


def div_rn(e: Emit, dt: T.DataType, x: int, y: int) -> int:
    """x / y correctly rounded: f32 through f64 (exact: 53 >= 2*24 + 2) where the device has f64, as Vulkan
    lets f32 `OpFDiv` be 2.5 ulp off (NVIDIA's is); f64 `OpFDiv` as it is."""
    if dt.bits != 64 and e.wide_f32:
        return _narrow(e, e.exact(e.op(S.FDiv, _widen(e, x), _widen(e, y), t=e.ty(T.f64)), True))
    return e.exact(e.op(S.FDiv, x, y, t=e.ty(dt)), True)


def sqrt_rn(e: Emit, dt: T.DataType, x: int) -> int:
    """sqrt correctly rounded: f32 through f64 (exact, as `div_rn`) where the device has f64; NVIDIA's f32
    Vulkan sqrt is 1 ulp off for 1 in 6 inputs."""
    if dt.bits != 64 and e.wide_f32:
        return _narrow(e, e.ext(GLSL.Sqrt, e.ty(T.f64), _widen(e, x)))
    return e.ext(GLSL.Sqrt, e.ty(dt), x)


def _widen(e: Emit, x: int) -> int:
    return e.op(S.FConvert, x, t=e.ty(T.f64))


def _narrow(e: Emit, x: int) -> int:
    """f64 -> f32, correctly rounded: an f32 transcendental computed at f64 (qd's implementations are within
    1 f64 ulp) is then within 1 f32 ulp; the GLSL.std.450 f32 ones are far looser on some drivers (lavapipe:
    asin 3826 ulp, tanh 27579, log 4164 over 10^6 inputs)."""
    return e.op(S.FConvert, x, t=e.ty(T.f32))


def _sign(e: Emit, dt: T.DataType, x: int) -> int:
    t, bt = e.ty(dt), e.bool_t()
    if dt.is_float:
        return select(e, t, e.op(S.FOrdGreaterThan, x, e.c(dt, 0.0), t=bt), e.c(dt, 1.0),
                      select(e, t, e.op(S.FOrdLessThan, x, e.c(dt, 0.0), t=bt), e.c(dt, -1.0), e.c(dt, 0.0)))
    if not dt.is_signed:
        return select(e, t, e.op(S.INotEqual, x, e.c(dt, 0), t=bt), e.c(dt, 1), e.c(dt, 0))
    return select(e, t, e.op(S.SGreaterThan, x, e.c(dt, 0), t=bt), e.c(dt, 1),
                  select(e, t, e.op(S.SLessThan, x, e.c(dt, 0), t=bt), e.c(dt, -1), e.c(dt, 0)))


def _unary(op: Op) -> Lowering:
    def lower(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
        x = args[0]
        t = e.ty(dt)
        if op is Op.SGN:
            return _sign(e, dt, x) if dt is not T.u1 else x
        if op is Op.LOGICAL_NOT:
            return e.op(S.LogicalNot, truth(e, dt, x), t=e.bool_t())
        if dt is T.u1:  # NEG, ABS of a bool: the value itself (wraps at one bit); BIT_NOT flips it
            return e.op(S.LogicalNot, x, t=t) if op is Op.BIT_NOT else x
        if dt.is_float:
            if op is Op.NEG:
                return e.op(S.FNegate, x, t=t)
            if op is Op.RSQRT:
                return e.exact(e.op(S.FDiv, e.c(dt, 1.0), sqrt_rn(e, dt, x), t=t))
            if op is Op.SQRT:
                return sqrt_rn(e, dt, x)
            if dt.bits == 64 and op in _F64_LIBM:
                return _F64_LIBM[op](e, x)
            if op in _F64_LIBM and op is not Op.ROUND and e.wide_f32:
                return _narrow(e, _F64_LIBM[op](e, _widen(e, x)))
            return e.ext(_GLSL_UNARY[op], t, x)
        if op is Op.NEG:
            return e.op(S.SNegate, x, t=t)
        if op is Op.BIT_NOT:
            return e.op(S.Not, x, t=t)
        if op is Op.ABS:
            if not dt.is_signed:
                return x
            return select(e, t, e.op(S.SLessThan, x, e.c(dt, 0), t=e.bool_t()), e.op(S.SNegate, x, t=t), x)
        return _bitcount(e, dt, x, clz=op is Op.CLZ)
    return lower


def _compare(op: Op) -> Lowering:
    names = {Op.CMP_LT: "LessThan", Op.CMP_LE: "LessThanEqual", Op.CMP_GT: "GreaterThan",
             Op.CMP_GE: "GreaterThanEqual"}

    def lower(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
        x, y = args
        bt = e.bool_t()
        if dt is T.u1:
            if op in (Op.CMP_EQ, Op.CMP_NE):
                return e.op(S.LogicalEqual if op is Op.CMP_EQ else S.LogicalNotEqual, x, y, t=bt)
            dt, x, y = T.u8, _u1_as(e, x, T.u8), _u1_as(e, y, T.u8)
        if dt.is_float:  # C semantics: every comparison with NaN is false except !=
            code = {Op.CMP_EQ: S.FOrdEqual, Op.CMP_NE: S.FUnordNotEqual}.get(op) or getattr(S, "FOrd" + names[op])
        elif op in (Op.CMP_EQ, Op.CMP_NE):
            code = S.IEqual if op is Op.CMP_EQ else S.INotEqual
        else:
            code = getattr(S, ("S" if dt.is_signed else "U") + names[op])
        return e.op(code, x, y, t=bt)
    return lower


# ------------------------------------------------------------------ casts

def cast(e: Emit, src: T.DataType, dst: T.DataType, x: int) -> int:
    """Value conversion per `_cast_expr` of qd/bytecode/opcodes.py."""
    if src is dst or (src is T.f16 and dst is T.f32):
        return x
    if dst is T.u1:
        return truth(e, src, x)
    t = e.ty(dst)
    if src is T.u1:
        if dst.is_float:
            return select(e, t, x, e.c(dst, 1.0), e.c(dst, 0.0))
        return _u1_as(e, x, dst)
    if dst.is_int:
        if src.is_float:
            if dst is T.u64:
                return e.op(S.ConvertFToU, x, t=t)
            wide = e.op(S.ConvertFToS, x, t=e.ty(T.i64))
            return wide if dst.bits == 64 else e.op(S.UConvert, wide, t=t)
        if src.bits == dst.bits:
            return x
        if src.bits > dst.bits:
            return e.op(S.UConvert, x, t=t)
        return sext(e, src, dst, x) if src.is_signed else e.op(S.UConvert, x, t=t)
    if dst is T.f16:
        return round_f16(e, _to_float(e, src, x, T.f32 if src.bits <= 32 and src.is_float else T.f64, to_f16=True))
    return _to_float(e, src, x, dst)


def sext(e: Emit, src: T.DataType, dst: T.DataType, x: int) -> int:
    """Sign extension of int `x` from `src` to the wider `dst`, as zero extension then `(v ^ m) - m` with m the
    source's sign bit: llvmpipe (Mesa 22.3) miscompiles comparisons of an `OpSConvert` 32 -> 64 result
    (`i64(c) > 7` true for c = 3), which the fuzzer found; this form is exact everywhere and costs two ops."""
    t = e.ty(dst)
    m = e.c(dst, 1 << (src.bits - 1))
    return e.op(S.ISub, e.op(S.BitwiseXor, e.op(S.UConvert, x, t=t), m, t=t), m, t=t)


def _to_float(e: Emit, src: T.DataType, x: int, dst: T.DataType, to_f16: bool = False) -> int:
    """`x` as float `dst`. For an f16 target the value is first made f32 exactly where it can be (ints are
    rounded once through f64, the interpreter's double rounding: f64 -> f32 -> f16 is not exact, so a wide
    value goes f64 -> f16 by rounding to odd in f32 first)."""
    if src.is_int:
        if to_f16:
            d = e.op(S.ConvertSToF if src.is_signed else S.ConvertUToF, x, t=e.ty(T.f64))
            return _f64_to_f32_odd(e, d)
        return e.op(S.ConvertSToF if src.is_signed else S.ConvertUToF, x, t=e.ty(dst))
    if to_f16 and src is T.f64:
        return _f64_to_f32_odd(e, x)
    if to_f16 or src.bits == dst.bits or (src is T.f16 and dst is T.f32):
        return x
    return e.op(S.FConvert, x, t=e.ty(dst))


def _f64_to_f32_odd(e: Emit, d: int) -> int:
    """f64 -> f32 rounding to odd (truncate, then set the low bit when inexact): a following f32 -> f16
    rounding is then the correctly rounded f64 -> f16 (the LLVM tier's `f64_to_f16`)."""
    f, u, bt = e.ty(T.f32), e.ty(T.u32), e.bool_t()
    r = e.op(S.FConvert, d, t=f)  # nearest
    back = e.op(S.FConvert, r, t=e.ty(T.f64))
    # step toward d's side when rounding went away from zero, then make the result odd if inexact
    away = e.op(S.FOrdGreaterThan, e.ext(GLSL.FAbs, e.ty(T.f64), back), e.ext(GLSL.FAbs, e.ty(T.f64), d), t=bt)
    bits = e.op(S.Bitcast, r, t=u)
    bits = select(e, u, away, e.op(S.ISub, bits, e.u32c(1), t=u), bits)
    inexact = e.op(S.FUnordNotEqual, back, d, t=bt)
    finite = e.op(S.LogicalNot, e.op(S.IsInf, r, t=bt), t=bt)
    odd = e.op(S.BitwiseOr, bits, e.u32c(1), t=u)
    bits = select(e, u, e.op(S.LogicalAnd, inexact, finite, t=bt), odd, e.op(S.Bitcast, r, t=u))
    return e.op(S.Bitcast, bits, t=f)


def bit_cast(e: Emit, src: T.DataType, dst: T.DataType, x: int) -> int:
    if src.bits != dst.bits:
        raise QuadrantsTypeError(f"bit_cast needs equal widths, got {src} -> {dst}")
    if src is dst or (src.is_int and dst.is_int):
        return x
    if src is T.f16:  # f16 lives as f32: its bits are the half it converts to (exact), NaN payloads as they are
        return e.op(S.UConvert, f32_to_f16_bits(e, x, quiet=False), t=e.ty(dst))
    if dst is T.f16:
        return f16_bits_to_f32(e, e.op(S.UConvert, x, t=e.ty(T.u32)), quiet=False)
    return e.op(S.Bitcast, x, t=e.ty(dst))


def _select(e: Emit, dt: T.DataType, args: Sequence[int]) -> int:
    return select(e, e.ty(dt), args[0], args[1], args[2])


# ------------------------------------------------------------------ the table


TABLE: dict[tuple[Op, str], Lowering] = {}
for _op in INT_BINARY:
    TABLE[(_op, "int")] = _int_binary(_op)
    TABLE[(_op, "bool")] = _bool_binary(_op)
for _op in FLOAT_BINARY:
    TABLE[(_op, "float")] = _float_binary(_op)
for _op in COMPARISONS:
    TABLE[(_op, "int")] = TABLE[(_op, "float")] = TABLE[(_op, "bool")] = _compare(_op)
for _op in (Op.NEG, Op.ABS, Op.SGN, Op.LOGICAL_NOT):
    TABLE[(_op, "int")] = TABLE[(_op, "float")] = TABLE[(_op, "bool")] = _unary(_op)
for _op in INT_UNARY:
    TABLE[(_op, "int")] = _unary(_op)
TABLE[(Op.BIT_NOT, "bool")] = _unary(Op.BIT_NOT)
for _op in FLOAT_UNARY:  # a C math function needs GLSL's f32 form, and qd's own f64 one if it is transcendental
    if not INFO[_op].libm or _op in _GLSL_UNARY and (_op not in TRANSCENDENTAL or _op in _F64_LIBM):
        TABLE[(_op, "float")] = _unary(_op)
for _cls in ("int", "float", "bool"):
    TABLE[(Op.SELECT, _cls)] = _select
    TABLE[(Op.STOP_GRAD, _cls)] = lambda e, dt, args: args[0]
COMPOSED = {Op.CAST: "cast", Op.BIT_CAST: "bit_cast"}
# ops this tier leaves out: op -> why (`qd.codegen.decompose.DECOMPOSE`: lowered there from other ops)
LACKS: dict[Op, str] = {}


def _cls(dt: T.DataType) -> str:
    return "bool" if dt is T.u1 else ("float" if dt.is_float else "int")


def lower_op(e: Emit, op: Op, arg_dts: Sequence[T.DataType], out: T.DataType, args: Sequence[int]) -> int:
    """The id of `op(args)`; `arg_dts` are the operands' dtypes, `out` the result dtype."""
    if op is Op.CAST:
        return cast(e, arg_dts[0], out, args[0])
    if op is Op.BIT_CAST:
        return bit_cast(e, arg_dts[0], out, args[0])
    dt = arg_dts[1] if op is Op.SELECT else arg_dts[0]
    fn = TABLE.get((op, _cls(dt)))
    if fn is None:
        raise QuadrantsTypeError(f"op {op.value} is not defined on {dt}")
    v = fn(e, dt, args)
    if out is T.f16 and op not in (Op.SELECT, Op.STOP_GRAD):
        v = round_f16(e, v)
    return v


__all__ = ["COMPOSED", "LACKS", "TABLE", "Decoration", "Emit", "bit_cast", "cast", "f16_bits_to_f32",
           "f32_to_f16_bits", "fminmax", "lower_op", "pow_float", "round_f16", "select", "truth"]
