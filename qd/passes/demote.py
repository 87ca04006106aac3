"""Atomic demotion (the `demote_atomics` pass, after offloading).

In a range task, a field whose every pointer in the task (prologue and body, nested loops included) is at the
task's own cell (the same field-axis indices, the task's variable among them; constant element indices) is reached
by no other iteration: an atomic read-modify-write of it becomes a load, the op and a store, as Quadrants demotes
atomics. Taichi's nbody accumulates `force[i] += f` in a serial inner loop, an atomic per pair before this.

Fields only (ndarray arguments may alias each other); ops whose plain form computes what the atomic does: add, sub
and mul of ints and f32/f64, and min, max, and, or, xor of ints. The result is the same on every tier (the
iteration's own sequence of updates, in program order).

Before (a range task over `i`):          After:
    %p = global_ptr @0 [%i] : f32            %p = global_ptr @0 [%i] : f32
    %o = atomic add %p, %f : f32             %o = global_load %p : f32
                                             %n = add f32 %o, %f
                                             global_store %p, %n
"""

from __future__ import annotations

from dataclasses import replace

from qd import ir
from qd.ops import Op
from qd.types import dtypes as T

_ANY = (Op.ADD, Op.SUB, Op.MUL)
_INTS_ONLY = (Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)
_FLOATS = (T.f32, T.f64)


def owned_fields(k: ir.KernelIR, t: ir.Task) -> set[int]:
    """The field buffers every pointer of range task `t` reaches only at the task's own cell."""
    seen: dict[int, tuple] = {}
    mixed: set[int] = set()
    for block in (t.prologue, t.body):
        for s in ir.walk(block):
            if not isinstance(s, ir.GlobalPtr) or k.buffers[s.buffer].kind != "field":
                continue
            n = len(k.buffers[s.buffer].shape)
            key = tuple(ir.index_key(v) for v in s.indices[:n])
            constant_elements = all(isinstance(v, ir.Const) for v in s.indices[n:])
            if t.var not in key or not constant_elements or seen.setdefault(s.buffer, key) != key:
                mixed.add(s.buffer)
    return set(seen) - mixed


def _demotable(s: ir.AtomicRMW) -> bool:
    if s.dtype.is_float:
        return s.op in _ANY and s.dtype in _FLOATS
    return s.dtype.is_int and s.dtype is not T.u1 and (s.op in _ANY or s.op in _INTS_ONLY)


def _demote_task(k: ir.KernelIR, t: ir.Task) -> ir.Task:
    owned = owned_fields(k, t)
    if not owned:
        return t
    mapping: dict = {}

    def demote(s: ir.Stmt) -> list[ir.Stmt]:
        if not (isinstance(s, ir.AtomicRMW) and s.ptr.buffer in owned and _demotable(s)):
            return [s]
        old = ir.GlobalLoad(ptr=s.ptr, dtype=s.dtype, loc=s.loc)
        new = ir.OpStmt(op=s.op, args=(old, s.value), dtype=s.dtype, loc=s.loc)
        mapping[s] = old
        return [old, new, ir.GlobalStore(ptr=s.ptr, value=new, loc=s.loc)]

    body = ir.map_block(t.body, demote)
    if not mapping:
        return t
    return replace(t, body=ir.substitute(body, mapping))


def demote_atomics(k: ir.KernelIR) -> ir.KernelIR:
    """`k` (offloaded) with the atomics of its range tasks on fields they own demoted (module docstring)."""
    if not k.tasks:
        return k
    tasks = tuple(_demote_task(k, t) if t.kind == "range" and t.var is not None else t for t in k.tasks)
    return k if all(a is b for a, b in zip(tasks, k.tasks)) else replace(k, tasks=tasks)
