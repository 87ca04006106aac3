"""Reduction analysis, shared by every tier's code generator: which atomics of a range task become chunk-local
accumulators applied with one atomic after the chunk.

An `AtomicRMW` of a range task's body qualifies when its old value is unused, its pointer's indices
are loop-invariant (constants, arguments, shapes, prologue values and pure ops over those), and every
access to its buffer in the task is such an atomic with the same op (several pointers may then share
the buffer: the updates commute, whichever of them alias at run time); a buffer reached only through
constant indices (temp slots) is judged per cell. u1 buffers never qualify.

Before (per index):  atomic_add @0[c0] += x[i]*x[i]
After  (per chunk):  acc = -0.0 ; for i in [lo, hi): acc += x[i]*x[i] ; atomic_add @0[c0] += acc
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qd import ir
from qd.ops import Op
from qd.types import dtypes as T


@dataclass
class Reduction:
    """One accumulator: every qualifying atomic with this op on this (structural) pointer."""

    op: Op
    dtype: T.DataType
    ptr: ir.GlobalPtr  # the first atomic's pointer (recomputed before the loop)
    atomics: list

    def identity(self) -> int | float:
        """The neutral start value (floats: -0.0 for add/sub, NaN for fmin/fmax)."""
        dt, op = self.dtype, self.op
        if dt.is_float:
            return -0.0 if op in (Op.ADD, Op.SUB) else math.nan
        if op is Op.BIT_AND:
            return -1
        if op is Op.MIN:
            return (1 << (dt.bits - 1)) - 1 if dt.is_signed else (1 << dt.bits) - 1
        if op is Op.MAX:
            return -(1 << (dt.bits - 1)) if dt.is_signed else 0
        return 0


_REDUCIBLE = (Op.ADD, Op.SUB, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)


def _key(v: ir.Value, prologue: set, memo: dict):
    """A structural key of a loop-invariant value, or None when `v` may vary per index."""
    if v in memo:
        return memo[v]
    if v in prologue:
        key = ("p", id(v))
    elif isinstance(v, ir.Const):
        key = ("c", v.dtype.name, repr(v.value))
    elif isinstance(v, ir.ArgLoad):
        key = ("a", v.index, v.dtype.name)
    elif isinstance(v, ir.ExternalShape):
        key = ("s", v.buffer, v.axis, v.dtype.name)
    elif isinstance(v, ir.OpStmt):
        keys = tuple(_key(a, prologue, memo) for a in v.args)
        key = None if any(k is None for k in keys) else ("o", v.op, v.dtype.name, keys)
    else:
        key = None
    memo[v] = key
    return key


def invariant_values(v: ir.Value, prologue: set) -> list[ir.Value]:
    """The body statements (OpStmts) an invariant value depends on, in definition order."""
    out: list[ir.Value] = []

    def visit(x: ir.Value) -> None:
        if x in prologue or not isinstance(x, ir.OpStmt) or x in out:
            return
        for a in x.args:
            visit(a)
        out.append(x)

    visit(v)
    return out


def find_reductions(t: ir.Task) -> list[Reduction]:
    """The accumulators of range task `t` (empty for serial tasks)."""
    if t.kind != "range":
        return []
    prologue = set(t.prologue.stmts)
    stmts = list(ir.walk(t.prologue)) + list(ir.walk(t.body))
    used = {v for s in stmts for v in s.operands()}
    by_buffer: dict[int, list] = {}
    for s in stmts:
        if isinstance(s, (ir.GlobalLoad, ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)):  # (a swap disqualifies)
            by_buffer.setdefault(s.ptr.buffer, []).append(s)
    memo: dict = {}
    out: list[Reduction] = []
    for accesses in _by_cell(by_buffer):
        first = accesses[0]
        if not all(_qualifies(s, first, used, prologue, memo) for s in accesses):
            continue
        groups: dict = {}
        for s in accesses:
            key = tuple(_key(i, prologue, memo) for i in s.ptr.indices)
            if key not in groups:
                groups[key] = Reduction(s.op, s.dtype, s.ptr, [])
                out.append(groups[key])
            groups[key].atomics.append(s)
    return out


def _by_cell(by_buffer: dict[int, list]) -> list[list]:
    """Accesses that may alias: a buffer's, split per cell when every access names its cell by constants
    (the offload pass's temp slots: one local reduced into a slot, another read from the next slot)."""
    out: list[list] = []
    for accesses in by_buffer.values():
        if all(isinstance(i, ir.Const) for s in accesses for i in s.ptr.indices):
            cells: dict = {}
            for s in accesses:
                cells.setdefault(tuple(int(i.value) for i in s.ptr.indices), []).append(s)
            out += cells.values()
        else:
            out.append(accesses)
    return out


def _qualifies(s: ir.Stmt, first: ir.Stmt, used: set, prologue: set, memo: dict) -> bool:
    if not isinstance(s, ir.AtomicRMW) or not isinstance(first, ir.AtomicRMW):
        return False
    if s.op is not first.op or s.op not in _REDUCIBLE or s in used or s.dtype is T.u1:
        return False
    if s.dtype.is_float and s.op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR):
        return False
    return all(_key(i, prologue, memo) is not None for i in s.ptr.indices)


__all__ = ["Reduction", "find_reductions", "invariant_values"]
