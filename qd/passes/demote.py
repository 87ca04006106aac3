"""Atomic demotion and owned cells in registers (the `demote_atomics` pass, after offloading).

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

Then such a cell written in a serial loop of the task lives in a local across the loop (`_Promoter`): loaded before
it, read and written as the local inside it, stored after it. Nothing else reaches the cell (it is owned), so the
loop does what it did, and the code generators see a loop without memory writes (LLVM vectorizes nbody's inner
loop then). Only where each access of the field in the loop is a plain load or store of a cell indexed by the task's
variable and constants, and the loop holds no return or check (either would end the thread before the store).
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
    """The field buffers every pointer of range task `t` reaches only at cells of the task's own: constant element
    indices, and either the same field-axis indices everywhere, indices that tell the task's variable apart
    (`_OwnIndices`), or the variable itself on one axis of every pointer (diffmpm's `F.grad[f, p]` and
    `F.grad[f + 1, p]`: iterations differ on that axis)."""
    keys: dict[int, set] = {}
    var_axes: dict[int, set] = {}  # buffer -> the axes where every pointer so far has the variable itself
    mixed: set[int] = set()
    own = _OwnIndices(t)
    for block in (t.prologue, t.body):
        for s in ir.walk(block):
            if not isinstance(s, ir.GlobalPtr) or k.buffers[s.buffer].kind != "field":
                continue
            n = len(k.buffers[s.buffer].shape)
            keys.setdefault(s.buffer, set()).add(tuple(ir.index_key(v) for v in s.indices[:n]))
            axes = {a for a, v in enumerate(s.indices[:n]) if v is t.var and t.var is not None}
            var_axes[s.buffer] = var_axes.get(s.buffer, axes) & axes
            if not own.tell_apart(s.indices[:n]) or not all(isinstance(v, ir.Const) for v in s.indices[n:]):
                mixed.add(s.buffer)
    return {b for b in keys if b not in mixed and (len(keys[b]) == 1 or var_axes[b])}


class _OwnIndices:
    """Whether a pointer's indices tell the task's variable apart (no two iterations reach the same cell): the
    variable is among them, or they are the digits the frontend unflattens it into (`for i, j in f`: `i = v // 512`,
    `j = v % 512`): knowing `d // s` and `d % s` (s a positive constant) gives d, so r where d is r through one-to-one
    steps, from the outermost digit down to the variable. Casts that do not narrow and added constants or arguments
    are looked through (each is one to one)."""

    def __init__(self, t: ir.Task) -> None:
        self.var = t.var
        self.mods: dict = {}  # dividend -> the `dividend % s` statements of the task
        for s in ir.walk(t.body):
            if isinstance(s, ir.OpStmt) and s.op is Op.MOD and s.dtype.is_int:
                self.mods.setdefault(s.args[0], []).append(s)

    def tell_apart(self, indices: tuple) -> bool:
        if self.var is None:
            return False
        digits = {_through(v) for v in indices}
        return self._known(self.var, digits, 0)

    def _known(self, r: ir.Value, digits: set, depth: int) -> bool:
        if r in digits:
            return True
        if depth > 8:
            return False
        for q in digits:  # q = d // s with d one to one in r, and d % s known: d, so r, is known
            if isinstance(q, ir.OpStmt) and q.op is Op.FLOORDIV and _through(q.args[0]) is r and _positive(q.args[1]):
                for m in self.mods.get(q.args[0], ()):
                    if _same_const(m.args[1], q.args[1]) and self._known(m, digits, depth + 1):
                        return True
        return False


def _through(v: ir.Value) -> ir.Value:
    """`v` with one-to-one integer steps taken off: a cast to an integer at least as wide, `+` a constant or an
    argument (wrapping: still one to one)."""
    while isinstance(v, ir.OpStmt) and v.dtype.is_int and v.dtype is not T.u1:
        a = v.args
        widening = v.op is Op.CAST and a[0].dtype.is_int and a[0].dtype is not T.u1 and v.dtype.bits >= a[0].dtype.bits
        shifted = v.op is Op.ADD and isinstance(a[1], (ir.Const, ir.ArgLoad))
        if widening or shifted:
            v = a[0]
        elif v.op is Op.ADD and isinstance(a[0], (ir.Const, ir.ArgLoad)):
            v = a[1]
        else:
            break
    return v


def _positive(v: ir.Value) -> bool:
    return isinstance(v, ir.Const) and v.dtype.is_int and v.value > 0


def _same_const(a: ir.Value, b: ir.Value) -> bool:
    return a is b or (isinstance(a, ir.Const) and isinstance(b, ir.Const) and a.value == b.value)


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
    body = ir.substitute(body, mapping) if mapping else t.body  # (map_block rebuilds even an unchanged block)
    promoted = _Promoter(k, t, owned).block(body)
    return t if promoted is t.body else replace(t, body=promoted)


def _cell(ptr: ir.GlobalPtr) -> tuple:
    """The cell `ptr` names: its buffer and the canonical form of its indices."""
    return (ptr.buffer, tuple(ir.index_key(v) for v in ptr.indices))


class _Promoter:
    """Owned cells written in serial loops, as locals across each outermost such loop (see the module docstring)."""

    def __init__(self, k: ir.KernelIR, t: ir.Task, owned: set[int]) -> None:
        self.k, self.t, self.owned = k, t, owned

    def block(self, blk: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        changed = False
        for s in blk.stmts:
            if isinstance(s, (ir.RangeFor, ir.While)) and not getattr(s, "parallel", False):
                cells = self.cells(s)
                if cells:
                    out.extend(self.promote(s, cells))
                    changed = True
                    continue
            kids = {name: self.block(getattr(s, name)) for name in ir.block_fields(type(s))}
            if any(kids[n] is not getattr(s, n) for n in kids):
                s = replace(s, **kids)
                changed = True
            out.append(s)
        return ir.Block(tuple(out)) if changed else blk

    def cells(self, loop: ir.Stmt) -> dict:
        """key -> a pointer of each owned cell `loop` writes that can live in a local across it ({} if none)."""
        found: dict = {}
        refused: set[int] = set()  # owned fields the loop reaches otherwise than by plain loads and stores
        stored: set[int] = set()
        for s in ir.walk(ir.Block((loop,))):
            if isinstance(s, (ir.Return, ir.Check)):
                return {}
            if isinstance(s, ir.GlobalStore):
                stored.add(s.ptr.buffer)
            plain = isinstance(s, ir.GlobalStore) or isinstance(s, ir.GlobalLoad) and not s.volatile
            for v in s.operands():
                if isinstance(v, ir.GlobalPtr) and v.buffer in self.owned and not (plain and v is s.ptr):
                    refused.add(v.buffer)
            if isinstance(s, ir.GlobalPtr) and s.buffer in self.owned:
                if all(v is self.t.var or isinstance(v, ir.Const) for v in s.indices):
                    found.setdefault(_cell(s), s)
                else:
                    refused.add(s.buffer)
        return {key: p for key, p in found.items() if key[0] in stored and key[0] not in refused}

    def promote(self, loop: ir.Stmt, cells: dict) -> list[ir.Stmt]:
        before: list[ir.Stmt] = []
        after: list[ir.Stmt] = []
        local: dict = {}
        for key, p in cells.items():
            consts = {v: ir.Const(dtype=v.dtype, value=v.value, loc=v.loc) for v in p.indices if isinstance(v, ir.Const)}
            ptr = ir.GlobalPtr(buffer=p.buffer, indices=tuple(consts.get(v, v) for v in p.indices), dtype=p.dtype,
                               loc=p.loc)
            a = ir.Alloca(dtype=p.dtype, loc=p.loc)
            first = ir.GlobalLoad(ptr=ptr, dtype=p.dtype, loc=p.loc)
            before += [*consts.values(), ptr, a, first, ir.LocalStore(var=a, value=first, loc=p.loc)]
            last = ir.LocalLoad(var=a, dtype=p.dtype, loc=p.loc)
            after += [last, ir.GlobalStore(ptr=ptr, value=last, loc=p.loc)]
            local[key] = a
        mapping: dict = {}

        def rewrite(s: ir.Stmt) -> list[ir.Stmt]:
            a = local.get(_cell(s.ptr)) if isinstance(s, (ir.GlobalLoad, ir.GlobalStore)) else None
            if a is None:
                return [s]
            if isinstance(s, ir.GlobalStore):
                return [ir.LocalStore(var=a, value=s.value, loc=s.loc)]
            mapping[s] = new = ir.LocalLoad(var=a, dtype=s.dtype, loc=s.loc)
            return [new]

        body = ir.substitute(ir.map_block(ir.Block((loop,)), rewrite), mapping)
        return before + list(body.stmts) + after


def demote_atomics(k: ir.KernelIR) -> ir.KernelIR:
    """`k` (offloaded) with the atomics of its range tasks on fields they own demoted (module docstring)."""
    if not k.tasks:
        return k
    tasks = tuple(_demote_task(k, t) if t.kind == "range" and t.var is not None else t for t in k.tasks)
    return k if all(a is b for a, b in zip(tasks, k.tasks)) else replace(k, tasks=tasks)
