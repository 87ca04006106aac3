"""Which range tasks the CPU tier runs in SIMD lanes (`qd/jit/llvm_spmd.py` lowers them; issue 15): IR only, so
the runtime can size adstack heaps for the lanes (`AdStackPlan.lanes`) without loading the code generator.

A body runs in lanes when it has the shape lanes pay off for (`shaped`: an inner loop whose trip count differs
per element, around transcendental math: latency-bound, and out of reach of LLVM's loop vectorizer, which widens
innermost loops only) and every statement, op and dtype in it is one the lanes lower (`supported`), under
`fast_math=True` (`wanted`).
"""

from __future__ import annotations

from qd import ir
from qd.jit.vecmath import LLVM_MATH_INTRINSICS
from qd.ops import COMPARISONS, INFO, TRANSCENDENTAL, Op
from qd.types import dtypes as T

LANES = 8


class Unsupported(Exception):
    """A body the lanes do not lower after all: the module is built again with scalar bodies."""


_STMTS = (ir.Const, ir.ArgLoad, ir.ExternalShape, ir.OpStmt, ir.Alloca, ir.LocalLoad, ir.LocalStore, ir.GlobalPtr,
          ir.GlobalLoad, ir.GlobalStore, ir.AtomicRMW, ir.ThreadSlot, ir.RangeFor, ir.If, ir.Check)
_DTYPES = (T.f32, T.f64, T.i32, T.i64, T.u32, T.u64, T.u1)
# libm calls lanes make vector intrinsics (libmvec under fast math)
_MATH = tuple(op for op in TRANSCENDENTAL if INFO[op].libm in LLVM_MATH_INTRINSICS)
_FLOAT_OPS = frozenset((Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MOD, Op.MIN, Op.MAX, Op.NEG, Op.ABS, Op.SGN, Op.SQRT,
                        Op.RSQRT, Op.FLOOR, Op.CEIL, Op.ROUND, Op.LOGICAL_NOT, Op.STOP_GRAD, Op.SELECT,
                        *_MATH, *COMPARISONS))
_INT_OPS = frozenset((Op.ADD, Op.SUB, Op.MUL, Op.FLOORDIV, Op.MOD, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR,
                      Op.BIT_XOR, Op.SHL, Op.SHR, Op.BIT_SHR, Op.NEG, Op.ABS, Op.BIT_NOT, Op.LOGICAL_NOT,
                      Op.STOP_GRAD, Op.SELECT, *COMPARISONS))


def _uniform_values(t: ir.Task) -> set:
    """Values equal in every lane: the prologue's, constants, arguments, extents, and ops over those."""
    out: set = set(t.prologue.stmts)
    for s in ir.walk(t.body):
        if isinstance(s, (ir.Const, ir.ArgLoad, ir.ExternalShape)):
            out.add(s)
        elif isinstance(s, ir.OpStmt) and all(a in out or isinstance(a, (ir.Const, ir.ArgLoad, ir.ExternalShape))
                                              for a in s.args):
            out.add(s)
    return out


def _op_ok(s: ir.OpStmt) -> bool:
    if any(a.dtype not in _DTYPES for a in s.args) or s.dtype not in _DTYPES:
        return False
    if s.op is Op.CAST:
        return True
    dt = s.args[1].dtype if s.op is Op.SELECT else s.args[0].dtype
    return s.op in (_FLOAT_OPS if dt.is_float else _INT_OPS)


def supported(t: ir.Task) -> bool:
    """Whether every statement of range task `t`'s body is one the lanes lower. A plain store to one address
    for every element (`m[None] = min(m[None], v)`) keeps the body scalar: lanes would store at once where a
    thread's iterations store one after another."""
    if t.kind != "range" or t.var is None or t.var.dtype not in _DTYPES:
        return False
    uniform = _uniform_values(t)
    body_locals = {s for s in ir.walk(t.body) if isinstance(s, ir.Alloca)}
    for s in ir.walk(t.body):
        if isinstance(s, (ir.LocalLoad, ir.LocalStore)) and s.var not in body_locals:
            return False  # (a local of the prologue: one per thread, not per lane)
        if isinstance(s, ir.GlobalStore) and all(i in uniform or isinstance(i, (ir.Const, ir.ArgLoad,
                                                                                   ir.ExternalShape))
                                                 for i in s.ptr.indices):
            return False
        if not isinstance(s, _STMTS) or (isinstance(s, ir.GlobalLoad) and s.volatile):
            return False
        if isinstance(s, ir.OpStmt) and not _op_ok(s):
            return False
        dt = getattr(s, "dtype", None)
        if dt is not None and dt not in _DTYPES:
            return False
        if isinstance(s, ir.RangeFor) and s.var.dtype not in _DTYPES:
            return False
        if isinstance(s, (ir.GlobalStore, ir.LocalStore)) and s.value.dtype not in _DTYPES:
            return False
    return True


def shaped(t: ir.Task) -> bool:
    """Whether `t`'s body has the shape lanes pay off for: an inner loop whose trip count differs per element
    (a bound that is not the same in every lane), with transcendental math inside it. (Without the math they
    lose: W3's linear recurrence ran its reverse step in 21 ms in lanes, 7.8 ms scalar.)"""
    uniform = _uniform_values(t)

    def same(v: ir.Value) -> bool:
        return v in uniform or isinstance(v, (ir.Const, ir.ArgLoad, ir.ExternalShape))

    for s in ir.walk(t.body):
        if isinstance(s, ir.RangeFor) and not (same(s.begin) and same(s.end)):
            if any(isinstance(x, ir.OpStmt) and x.op in _MATH for x in ir.walk(s.body)):
                return True
    return False


def wanted(t: ir.Task, fast_math: bool) -> bool:
    return fast_math and shaped(t) and supported(t)


def lanes_for(k: ir.KernelIR) -> int:
    """Adstack heap rows per launch thread that kernel `k`'s native code may use (`AdStackPlan.lanes`)."""
    return LANES if k.tasks and any(shaped(t) and supported(t) for t in k.tasks) else 1


__all__ = ["LANES", "Unsupported", "lanes_for", "shaped", "supported", "wanted"]
