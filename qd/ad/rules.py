"""The partial derivatives of every differentiable op of `qd/ops.py`, written once (DESIGN §5).

Both AD modes use this table: forward mode combines the partials with the operands' tangents
(`tangent`), reverse mode with the result's cotangent (`cotangents`). A rule never sees a mode; it
builds IR through an `Emitter` (which places each new statement in the caller's block) and returns one
*partial* per operand of the `OpStmt`:

  ZERO             symbolic zero: no contribution, and no statement is ever emitted for it
  ONE, NEG_ONE     symbolic +-1 (linear ops need no primal and no multiply)
  Gate(cond, when) 1 where `cond == when`, else exactly 0: select-like ops (SELECT, MIN, MAX) route the
                   tangent/cotangent through a SELECT, so an untaken side contributes exactly 0 even
                   when its tangent is inf or NaN (`0 * inf` would not)
  a Value          the partial as an IR value of the result dtype

Gradients stop (every partial ZERO) at ops flagged `nondiff` in the op table, at integer-typed results
(float -> int casts included) and at integer operands (int -> float casts, SELECT's condition).
Conventions at kinks: d|x|/dx = sgn(x) (0 at 0); MIN/MAX give the whole derivative to the first
operand on ties; MOD is x - y*floor(x/y), so d/dy = -floor(x/y) (floor's own derivative is 0).

Example: for `%r = f32 sin %x`, `tangent(s, (%dx,), em)` emits

    %c  = f32 cos %x
    %dr = f32 mul %c, %dx
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from qd import ir
from qd.ir_emit import BlockEmitter, Emitter  # noqa: F401  (re-exported: the passes build with them)
from qd.ops import INFO, Op
from qd.types.dtypes import DataType, u1


class _Sym:
    """A symbolic constant partial (ZERO, ONE, NEG_ONE): folded away, never emitted as a multiply."""

    def __init__(self, name: str, value: int) -> None:
        self.name, self.value = name, value

    def __repr__(self) -> str:
        return self.name


ZERO = _Sym("ZERO", 0)
ONE = _Sym("ONE", 1)
NEG_ONE = _Sym("NEG_ONE", -1)


@dataclass(frozen=True)
class Gate:
    """The partial that is 1 where `cond` (u1) equals `when`, else exactly 0."""

    cond: ir.Value
    when: bool


Partial = ir.Value | _Sym | Gate
Rule = Callable[[ir.OpStmt, Emitter], tuple[Partial, ...]]

# ------------------------------------------------------------------ the rules


def _unary(fn: Callable[[ir.OpStmt, ir.Value, DataType, Emitter], Partial]) -> Rule:
    return lambda s, em: (fn(s, s.args[0], s.dtype, em),)


def _one_minus_sq(v: ir.Value, dt: DataType, em: Emitter) -> ir.Value:
    return em.op(Op.SUB, (em.const(1.0, dt), em.op(Op.MUL, (v, v), dt)), dt)


def _recip(v: ir.Value, dt: DataType, em: Emitter) -> ir.Value:
    return em.op(Op.DIV, (em.const(1.0, dt), v), dt)


def _sqrt(s: ir.OpStmt, x: ir.Value, dt: DataType, em: Emitter) -> Partial:
    return em.op(Op.DIV, (em.const(0.5, dt), s), dt)  # 1 / (2 sqrt x)


def _rsqrt(s: ir.OpStmt, x: ir.Value, dt: DataType, em: Emitter) -> Partial:
    return em.op(Op.MUL, (em.const(-0.5, dt), em.op(Op.DIV, (s, x), dt)), dt)  # -x^(-3/2) / 2


def _tan(s: ir.OpStmt, x: ir.Value, dt: DataType, em: Emitter) -> Partial:
    return em.op(Op.ADD, (em.const(1.0, dt), em.op(Op.MUL, (s, s), dt)), dt)


def _acos(s: ir.OpStmt, x: ir.Value, dt: DataType, em: Emitter) -> Partial:
    return em.op(Op.NEG, (em.op(Op.RSQRT, (_one_minus_sq(x, dt, em),), dt),), dt)


def _div(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
    x, y = s.args
    inv = _recip(y, s.dtype, em)
    return inv, em.op(Op.NEG, (em.op(Op.MUL, (s, inv), s.dtype),), s.dtype)  # (1/y, -r/y)


def _mod(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
    x, y = s.args
    q = em.op(Op.FLOOR, (em.op(Op.DIV, (x, y), s.dtype),), s.dtype)
    return ONE, em.op(Op.NEG, (q,), s.dtype)


def _pow(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
    x, y, dt = s.args[0], s.args[1], s.dtype
    # y * x^(y-1) rather than y * r / x: finite at x == 0.
    ym1 = em.op(Op.SUB, (y, em.const(1.0, dt)), dt)
    dx = em.op(Op.MUL, (y, em.op(Op.POW, (x, ym1), dt)), dt)
    return dx, em.op(Op.MUL, (s, em.op(Op.LOG, (x,), dt)), dt)


def _atan2(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
    a, b, dt = s.args[0], s.args[1], s.dtype  # atan2(a, b) = angle of the point (b, a)
    inv = _recip(em.op(Op.ADD, (em.op(Op.MUL, (a, a), dt), em.op(Op.MUL, (b, b), dt)), dt), dt, em)
    return em.op(Op.MUL, (b, inv), dt), em.op(Op.NEG, (em.op(Op.MUL, (a, inv), dt),), dt)


def _pick(cmp: Op) -> Rule:
    """MIN/MAX: the result is the first operand where `cmp(x, y)` holds (ties go to it)."""
    def rule(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
        c = em.op(cmp, s.args, u1)
        return Gate(c, True), Gate(c, False)
    return rule


RULES: dict[Op, Rule] = {
    Op.NEG: lambda s, em: (NEG_ONE,),
    Op.ABS: _unary(lambda s, x, dt, em: em.op(Op.SGN, (x,), dt)),
    Op.SQRT: _unary(_sqrt),
    Op.RSQRT: _unary(_rsqrt),
    Op.EXP: _unary(lambda s, x, dt, em: s),
    Op.LOG: _unary(lambda s, x, dt, em: _recip(x, dt, em)),
    Op.SIN: _unary(lambda s, x, dt, em: em.op(Op.COS, (x,), dt)),
    Op.COS: _unary(lambda s, x, dt, em: em.op(Op.NEG, (em.op(Op.SIN, (x,), dt),), dt)),
    Op.TAN: _unary(_tan),
    Op.ASIN: _unary(lambda s, x, dt, em: em.op(Op.RSQRT, (_one_minus_sq(x, dt, em),), dt)),
    Op.ACOS: _unary(_acos),
    Op.TANH: _unary(lambda s, x, dt, em: _one_minus_sq(s, dt, em)),
    Op.CAST: lambda s, em: (ONE,),  # float -> float; the combiners convert the dtype
    Op.ADD: lambda s, em: (ONE, ONE),
    Op.SUB: lambda s, em: (ONE, NEG_ONE),
    Op.MUL: lambda s, em: (s.args[1], s.args[0]),
    Op.DIV: _div,
    Op.MOD: _mod,
    Op.POW: _pow,
    Op.ATAN2: _atan2,
    Op.MIN: _pick(Op.CMP_LE),
    Op.MAX: _pick(Op.CMP_GE),
    Op.SELECT: lambda s, em: (ZERO, Gate(s.args[0], True), Gate(s.args[0], False)),
}

assert not any(INFO[op].nondiff for op in RULES), "a non-differentiable op has a rule"

# ------------------------------------------------------------------ queries and combiners


def differentiable(s: ir.OpStmt) -> bool:
    """Whether gradients flow through `s` at all (a float result of an op with a rule)."""
    return s.dtype.is_float and s.op in RULES


def partials(s: ir.OpStmt, em: Emitter) -> tuple[Partial, ...]:
    """d s / d s.args[i] for every operand, ZERO where the gradient stops (see the module docstring)."""
    if not differentiable(s):
        return (ZERO,) * len(s.args)
    ps = RULES[s.op](s, em)
    return tuple(p if a.dtype.is_float else ZERO for p, a in zip(ps, s.args))


def _convert(v: ir.Value, dtype: DataType, em: Emitter) -> ir.Value:
    return v if v.dtype is dtype else em.op(Op.CAST, (v,), dtype)


def apply(p: Partial, v: ir.Value, dtype: DataType, em: Emitter) -> ir.Value | _Sym:
    """`p * v` in `dtype` (v converted first), with the symbolic partials folded."""
    if p is ZERO:
        return ZERO
    v = _convert(v, dtype, em)
    if p is ONE:
        return v
    if p is NEG_ONE:
        return em.op(Op.NEG, (v,), dtype)
    if isinstance(p, Gate):
        zero = em.const(0.0, dtype)
        return em.op(Op.SELECT, (p.cond, v, zero) if p.when else (p.cond, zero, v), dtype)
    return em.op(Op.MUL, (_convert(p, dtype, em), v), dtype)


def add(a: ir.Value | _Sym, b: ir.Value | _Sym, dtype: DataType, em: Emitter) -> ir.Value | _Sym:
    """`a + b` with ZERO folded (the sum of contributions in both modes)."""
    if a is ZERO:
        return b
    if b is ZERO:
        return a
    return em.op(Op.ADD, (a, b), dtype)


def tangent(s: ir.OpStmt, tangents: Sequence[ir.Value | _Sym], em: Emitter) -> ir.Value | _Sym:
    """Forward mode: the tangent of `s` from its operands' tangents (ZERO when none flows)."""
    if all(t is ZERO for t in tangents) or not differentiable(s):
        return ZERO
    out: ir.Value | _Sym = ZERO
    for p, t in zip(partials(s, em), tangents):
        if t is not ZERO:
            out = add(out, apply(p, t, s.dtype, em), s.dtype, em)
    return out


def cotangents(s: ir.OpStmt, ct: ir.Value, em: Emitter) -> tuple[ir.Value | _Sym, ...]:
    """Reverse mode: each operand's contribution from the cotangent `ct` of `s` (in the operand's
    dtype; ZERO where the gradient stops)."""
    return tuple(apply(p, ct, a.dtype, em) if a.dtype.is_float else ZERO
                 for p, a in zip(partials(s, em), s.args))


__all__ = ["Emitter", "BlockEmitter", "ZERO", "ONE", "NEG_ONE", "Gate", "Partial", "RULES", "differentiable",
           "partials", "apply", "add", "tangent", "cotangents"]
