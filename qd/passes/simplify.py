"""Constant folding and exact algebraic identities (the `simplify` pass).

Folding follows qd's semantics exactly (docs/DESIGN.md §4): ints wrap at their width, `//` and `%`
are Python's (with `x // 0 == x % 0 == 0`), shift counts are masked by the width, f32/f16 math is
done at its own width through numpy scalars, comparisons give u1 0/1. Only ops that are bit-exact
on every tier are folded (no transcendentals, no float `%`/`**`). Identities are applied only where
they are exact: `x + 0`, `x * 0` only for ints; for floats `x * 1`, `x / 1`, `x - 0.0`, `x + -0.0`.
An `If` on a constant is replaced by its taken branch; a serial `RangeFor` over a constant empty
range is removed. Offloaded kernels are simplified task by task.

Before:                                  After:
    %0 = const i32 7                         %0 = const i32 7
    %1 = const i32 -2                        %1 = const i32 -2
    %2 = floordiv i32 %0, %1                 %5 = const i32 -4
    %3 = arg_load 0 : i32                    %3 = arg_load 0 : i32
    %4 = const i32 0                         %4 = const i32 0
    %6 = add i32 %3, %4                      global_store %p, %3
    global_store %p, %6
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from qd import ir
from qd.ops import COMPARISONS, Op
from qd.types.dtypes import DataType, u1

# ------------------------------------------------------------------ shared rewriting helper





# ------------------------------------------------------------------ integer folding


def wrap(v: int, dt: DataType) -> int:
    """`v` wrapped (two's complement) to the width of integer dtype `dt`."""
    m = 1 << dt.bits
    v &= m - 1
    return v - m if dt.is_signed and v >= m >> 1 else v


def _ipow(a: int, b: int, w: int) -> int:
    if b >= 0:
        return pow(a, b, 1 << w)
    if a == 1:
        return 1
    if a == -1:
        return 1 if b % 2 == 0 else -1
    return 0


_INT2 = {
    Op.ADD: lambda a, b, w: a + b,
    Op.SUB: lambda a, b, w: a - b,
    Op.MUL: lambda a, b, w: a * b,
    Op.FLOORDIV: lambda a, b, w: a // b if b else 0,
    Op.MOD: lambda a, b, w: a % b if b else 0,
    Op.POW: _ipow,
    Op.MIN: lambda a, b, w: min(a, b),
    Op.MAX: lambda a, b, w: max(a, b),
    Op.BIT_AND: lambda a, b, w: a & b,
    Op.BIT_OR: lambda a, b, w: a | b,
    Op.BIT_XOR: lambda a, b, w: a ^ b,
    Op.SHL: lambda a, b, w: a << (b & (w - 1)),
    Op.SHR: lambda a, b, w: a >> (b & (w - 1)),
    Op.BIT_SHR: lambda a, b, w: (a & ((1 << w) - 1)) >> (b & (w - 1)),
}

_INT1 = {
    Op.NEG: lambda a, w: -a,
    Op.BIT_NOT: lambda a, w: ~a,
    Op.ABS: lambda a, w: abs(a),
    Op.SGN: lambda a, w: (a > 0) - (a < 0),
    Op.POPCNT: lambda a, w: bin(a & ((1 << w) - 1)).count("1"),
    Op.CLZ: lambda a, w: w - (a & ((1 << w) - 1)).bit_length(),
}

_U1_OPS = (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)

_CMP = {
    Op.CMP_LT: lambda a, b: a < b, Op.CMP_LE: lambda a, b: a <= b, Op.CMP_GT: lambda a, b: a > b,
    Op.CMP_GE: lambda a, b: a >= b, Op.CMP_EQ: lambda a, b: a == b, Op.CMP_NE: lambda a, b: a != b,
}


def _fold_int(op: Op, dt: DataType, vals: list[int]) -> int | None:
    if dt is u1 and op not in _U1_OPS:
        return None
    if len(vals) == 1 and op in _INT1:
        return wrap(_INT1[op](vals[0], dt.bits), dt)
    if len(vals) == 2 and op in _INT2:
        return wrap(_INT2[op](vals[0], vals[1], dt.bits), dt)
    return None


# ------------------------------------------------------------------ float folding


def _fsgn(a: np.floating) -> np.floating:
    return type(a)(1.0 if a > 0 else -1.0 if a < 0 else 0.0)


_FLT1 = {Op.NEG: np.negative, Op.ABS: np.abs, Op.SQRT: np.sqrt, Op.FLOOR: np.floor,
         Op.CEIL: np.ceil, Op.ROUND: np.rint, Op.SGN: _fsgn}
_FLT2 = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
         Op.MIN: np.fmin, Op.MAX: np.fmax}


def _fold_float(op: Op, dt: DataType, vals: list[float]) -> float | None:
    xs = [dt.np_dtype.type(v) for v in vals]
    if op in (Op.MIN, Op.MAX) and xs[0] == 0 and xs[1] == 0 \
            and np.signbit(xs[0]) != np.signbit(xs[1]):
        return None  # min(+0, -0): tiers may differ
    fn = (_FLT1 if len(xs) == 1 else _FLT2).get(op)
    if fn is None:
        return None
    with np.errstate(all="ignore"):
        r = fn(*xs)
    return float(dt.np_dtype.type(r))


# ------------------------------------------------------------------ casts


def fold_cast(src: DataType, dst: DataType, v: int | float) -> int | float | None:
    """CAST of constant `v`: float->int truncates (None if NaN/out of range), int->int wraps,
    to float rounds through numpy; casts to u1 are not folded (only u1 -> u1)."""
    if dst is u1:
        return v if src is u1 else None
    if src.is_float and dst.is_int:
        if not math.isfinite(v):
            return None
        t = math.trunc(v)
        lo, hi = (-(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1) if dst.is_signed \
            else (0, (1 << dst.bits) - 1)
        return t if lo <= t <= hi else None
    if src.is_int and dst.is_int:
        return wrap(int(v), dst)
    with np.errstate(all="ignore"):
        return float(np.array(v, dtype=src.np_dtype).astype(dst.np_dtype))


def fold_bit_cast(src: DataType, dst: DataType, v: int | float) -> int | float | None:
    if src.bits != dst.bits or u1 in (src, dst):
        return None
    return np.array(v, dtype=src.np_dtype).view(dst.np_dtype).item()


def fold_op(op: Op, dtype: DataType, args: list[ir.Const]) -> int | float | None:
    """The value of `op` over constant `args` with result `dtype`, or None when not folded."""
    src = args[0].dtype
    vals = [a.value for a in args]
    if op is Op.CAST:
        return fold_cast(src, dtype, vals[0])
    if op is Op.BIT_CAST:
        return fold_bit_cast(src, dtype, vals[0])
    if op in COMPARISONS:
        if src.is_float:
            xs = [src.np_dtype.type(v) for v in vals]
            return int(bool(_CMP[op](*xs)))
        return int(_CMP[op](int(vals[0]), int(vals[1])))
    if op is Op.LOGICAL_NOT:
        return int(vals[0] == 0)
    if op is Op.SELECT:
        return vals[1] if vals[0] else vals[2]
    if dtype.is_float:
        return _fold_float(op, dtype, [float(v) for v in vals])
    return _fold_int(op, dtype, [int(v) for v in vals])


# ------------------------------------------------------------------ identities


def _is(v: ir.Value, x: float) -> bool:
    return isinstance(v, ir.Const) and v.value == x


def _is_neg_zero(v: ir.Value) -> bool:
    return isinstance(v, ir.Const) and v.value == 0 and math.copysign(1.0, float(v.value)) < 0


def _int_identity(s: ir.OpStmt) -> ir.Value | int | None:
    """x+0, 0+x, x-0, x*1, 1*x, x|0, x^0, x&~0, x<<0, x>>0, x//1, x*0 -> 0 (ints only)."""
    a, b = s.args
    ones = wrap(-1, s.dtype)
    op = s.op
    if op in (Op.ADD, Op.BIT_OR, Op.BIT_XOR) and _is(a, 0):
        return b
    if op in (Op.ADD, Op.SUB, Op.BIT_OR, Op.BIT_XOR, Op.SHL, Op.SHR, Op.BIT_SHR) and _is(b, 0):
        return a
    if op is Op.MUL and _is(a, 1) or op is Op.BIT_AND and _is(a, ones):
        return b
    if op in (Op.MUL, Op.FLOORDIV) and _is(b, 1) or op is Op.BIT_AND and _is(b, ones):
        return a
    if op in (Op.MUL, Op.BIT_AND) and (_is(a, 0) or _is(b, 0)):
        return 0
    return None


def _float_identity(s: ir.OpStmt) -> ir.Value | None:
    """x*1, 1*x, x/1, x-(+0.0), x+(-0.0), (-0.0)+x: exact for every x (incl. -0.0, inf, NaN)."""
    a, b = s.args
    if s.op is Op.MUL and _is(b, 1.0) or s.op is Op.DIV and _is(b, 1.0):
        return a
    if s.op is Op.MUL and _is(a, 1.0):
        return b
    if s.op is Op.SUB and _is(b, 0.0) and not _is_neg_zero(b):
        return a
    if s.op is Op.ADD and _is_neg_zero(b):
        return a
    if s.op is Op.ADD and _is_neg_zero(a):
        return b
    return None


def identity(s: ir.OpStmt) -> ir.Value | int | None:
    """An existing value equal to `s`, or an int constant for it, or None."""
    if s.op is Op.CAST and s.args[0].dtype is s.dtype:
        return s.args[0]
    if s.op is Op.SELECT:
        c, a, b = s.args
        if a is b:
            return a
        return (a if c.value else b) if isinstance(c, ir.Const) else None
    if len(s.args) != 2 or s.args[0].dtype is not s.dtype:
        return None
    return _float_identity(s) if s.dtype.is_float else _int_identity(s)


# ------------------------------------------------------------------ constant powers

MAX_EXPANDED_POWER = 32


def constant_power(s: ir.OpStmt) -> tuple[list[ir.Stmt], ir.Value] | None:
    """`x ** n` for a constant exponent, as Quadrants' algebraic simplification does: 1 -> x, 0 -> 1, 0.5 ->
    sqrt(x), an integer 2..`MAX_EXPANDED_POWER` -> multiplications by squaring (x ** 3 = x * (x * x)), a negative
    one of a float -> 1 / x ** -n: (the new statements, the value replacing `s`), or None for any other exponent
    (the `pow` op stays). Every tier then runs the same multiplications (nbody's `(1.0 / r) ** 3` was a libm
    call per pair, ~10x the products)."""
    if s.op is not Op.POW or not isinstance(s.args[1], ir.Const) or s.args[0].dtype is not s.dtype:
        return None
    x, t, n = s.args[0], s.dtype, float(s.args[1].value)
    if n == 1:
        return [], x
    if n == 0:
        one = ir.Const(dtype=t, value=1.0 if t.is_float else 1, loc=s.loc)
        return [one], one
    if n == 0.5 and t.is_float:
        root = ir.OpStmt(op=Op.SQRT, args=(x,), dtype=t, loc=s.loc)
        return [root], root
    if not (n.is_integer() and abs(n) <= MAX_EXPANDED_POWER) or (n < 0 and not t.is_float):
        return None
    out: list[ir.Stmt] = []

    def mul(a: ir.Value, b: ir.Value) -> ir.Value:
        out.append(ir.OpStmt(op=Op.MUL, args=(a, b), dtype=t, loc=s.loc))
        return out[-1]

    exp, power, result, bit = int(abs(n)), x, None, 1
    while True:
        if exp & bit:
            result = power if result is None else mul(result, power)
        bit <<= 1
        if bit > exp:
            break
        power = mul(power, power)
    if n < 0:
        one = ir.Const(dtype=t, value=1.0, loc=s.loc)
        out += [one, ir.OpStmt(op=Op.DIV, args=(one, result), dtype=t, loc=s.loc)]
        result = out[-1]
    return out, result


# ------------------------------------------------------------------ the pass


def _simplify_op(s: ir.OpStmt, m: dict) -> list[ir.Stmt]:
    if s.args and all(isinstance(a, ir.Const) for a in s.args):
        v = fold_op(s.op, s.dtype, list(s.args))
        if v is not None:
            c = ir.Const(dtype=s.dtype, value=v, loc=s.loc)
            m[s] = c
            return [c]
    power = constant_power(s)
    if power is not None:
        m[s] = power[1]
        return power[0]
    r = identity(s)
    if r is None:
        return [s]
    if isinstance(r, int):
        r = ir.Const(dtype=s.dtype, value=r, loc=s.loc)
        m[s] = r
        return [r]
    m[s] = r
    return []


def _simplify_control(s: ir.Stmt, m: dict) -> list[ir.Stmt]:
    if isinstance(s, ir.If) and isinstance(s.cond, ir.Const):
        return list(simplify_block(s.then if s.cond.value else s.else_, m).stmts)
    if isinstance(s, ir.RangeFor) and not s.parallel and isinstance(s.begin, ir.Const) \
            and isinstance(s.end, ir.Const) and s.end.value <= s.begin.value:
        return []
    kids = {n: simplify_block(getattr(s, n), m) for n in ir.block_fields(type(s))}
    return [replace(s, **kids)]


def simplify_block(block: ir.Block, m: dict) -> ir.Block:
    """Simplify `block`; `m` maps replaced values to their replacements (and is extended)."""
    out: list[ir.Stmt] = []
    for s in block.stmts:
        ns = ir.remap_operands(s, m)
        if ns is not s:
            m[s] = ns
        if ns.blocks():
            out.extend(_simplify_control(ns, m))
        elif isinstance(ns, ir.OpStmt):
            out.extend(_simplify_op(ns, m))
        else:
            out.append(ns)
        if ns is not s and ns in m:
            m[s] = m[ns]
    return ir.Block(tuple(out))


def _simplify_task(t: ir.Task) -> ir.Task:
    m: dict = {}
    prologue = simplify_block(t.prologue, m)
    body = simplify_block(t.body, m)
    return replace(t, prologue=prologue, body=body, begin=m.get(t.begin, t.begin),
                   end=m.get(t.end, t.end))


def simplify(k: ir.KernelIR) -> ir.KernelIR:
    """Fold constants and exact identities, and expand constant powers (`constant_power`), in `k`'s body, or in
    each task once offloaded."""
    if k.tasks is None:
        return k.with_body(simplify_block(k.body, {}))
    return replace(k, tasks=tuple(_simplify_task(t) for t in k.tasks))
