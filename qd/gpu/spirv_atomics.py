"""Atomics and reductions of the SPIR-V emitter (a mixin of `qd/gpu/spirv.py`'s `FnEmitter`).

Device-scope atomics on `PhysicalStorageBuffer` addresses: native int ops (64-bit with Int64Atomics), native
f32/f64 add where `VK_EXT_shader_atomic_float` offers it, compare-and-swap loops for the rest (float min/max/mul,
int mul), and 8/16-bit atomics as CAS loops on their aligned 32-bit word. Qualifying atomics of a range task
(`qd/codegen/reduce.py`) accumulate per invocation and are applied after the grid-stride loop: summed over the
subgroup where the device has subgroup arithmetic and the op regroups exactly, then one atomic per subgroup, or,
where no invocation of the task can leave early (`workgroup_reduces`), over the workgroup through workgroup memory
and one atomic per workgroup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qd import ir
from qd.codegen.reduce import find_reductions
from qd.errors import QuadrantsTypeError
from qd.gpu import spirv_ops as so
from qd.gpu.spirv_defs import BuiltIn, Capability, Decoration, GroupOperation, MemorySemantics, Scope, StorageClass
from qd.gpu.spirv_defs import Op as S
from qd.ops import Op
from qd.types import dtypes as T


@dataclass
class _Reduction:
    red: Any  # qd.codegen.reduce.Reduction
    acc: int  # Function variable
    addr: int  # u64 address id, computed before the loop


class Atomics:
    """Atomic statements, CAS loops and reductions; the emitter's state (`m`, `op`, `ty`, `vals`, ...) is
    `FnEmitter`'s."""

    def s_AtomicRMW(self, s: ir.AtomicRMW) -> None:
        if s in self.reductions:
            r = self.reductions[s]
            cur = self.op(S.Load, r.acc, t=self.ty(s.dtype))
            self.op(S.Store, r.acc, self.combine(r.red.op, s.dtype, cur, self.operand(s.value)))
            return
        ptr = self.vals[s.ptr]
        if not isinstance(ptr, int):  # a shared array's element (`spirv_simt.WgPtr`)
            self.vals[s] = self.wg_atomic(s.op, s.dtype, ptr, self.operand(s.value))
            return
        self.vals[s] = self.atomic(s.op, s.dtype, ptr, self.operand(s.value))

    def s_AtomicSwap(self, s: ir.AtomicSwap) -> None:
        """`OpAtomicExchange` (a float exchanges its bits) or `OpAtomicCompareExchange` at device scope."""
        dt = s.dtype
        if not isinstance(self.vals[s.ptr], int):  # a shared array's element (`spirv_simt.WgPtr`)
            expected = self.v(s.expected) if s.expected is not None else None
            self.vals[s] = self.wg_swap(dt, self.vals[s.ptr], self.v(s.value), expected)
            return
        if dt.bits == 64:
            if not self.caps.int64_atomics:
                raise QuadrantsTypeError(f"qd.atomic_{'cas' if s.expected is not None else 'exchange'} on {dt} "
                                         f"needs 64-bit atomics, which this Vulkan device lacks "
                                         f"(shaderBufferInt64Atomics)")
            self.m.capability(Capability.Int64Atomics)
        v = self.v(s.value)
        if dt is T.f64:  # lavapipe's LLVM cannot select the exchange of a computed double's bits: a CAS loop
            self.vals[s] = self.cas_loop(dt, self.vals[s.ptr], lambda old: v)
            return
        scope, sem = self._scope()
        ity = self.ty(T.u32) if dt.is_float else self.ty(dt)
        ptr = self.pointer(self.vals[s.ptr], ity)
        if s.expected is not None:
            old = self.op(S.AtomicCompareExchange, ptr, scope, sem, sem, v, self.v(s.expected), t=ity)
        elif dt.is_float:
            bits = self.op(S.AtomicExchange, ptr, scope, sem, self.op(S.Bitcast, v, t=ity), t=ity)
            old = self.op(S.Bitcast, bits, t=self.ty(dt))
        else:
            old = self.op(S.AtomicExchange, ptr, scope, sem, v, t=ity)
        self.vals[s] = old

    def combine(self, op: Op, dt: T.DataType, acc: int, v: int) -> int:
        """The accumulator update of a reduction (sub accumulates by subtraction from -0.0 / by addition)."""
        if dt.is_float and op is Op.SUB:
            return so.lower_op(self, Op.SUB, [dt, dt], dt, [acc, v])
        return so.lower_op(self, Op.ADD if op is Op.SUB else op, [dt, dt], dt, [acc, v])

    def _scope(self) -> tuple[int, int]:
        return self.u32c(Scope.Device), self.u32c(0)

    def atomic(self, op: Op, dt: T.DataType, addr: int, v: int) -> int:
        """`*addr = op(*addr, v)` atomically at device scope; returns the old value."""
        if dt is T.u1 or (dt.is_float and op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)):
            raise QuadrantsTypeError(f"atomic {op.value} is not supported on {dt}")
        if dt.bits < 32:
            return self.narrow_atomic(op, dt, addr, v)
        if dt.bits == 64:
            if not self.caps.int64_atomics:
                raise QuadrantsTypeError(f"atomic {op.value} on {dt} needs 64-bit atomics, which this Vulkan device "
                                         f"lacks (shaderBufferInt64Atomics)")
            self.m.capability(Capability.Int64Atomics)
        scope, sem = self._scope()
        t = self.ty(dt)
        if dt.is_int and op is not Op.MUL:
            s = dt.is_signed
            code = {Op.ADD: S.AtomicIAdd, Op.SUB: S.AtomicISub, Op.BIT_AND: S.AtomicAnd, Op.BIT_OR: S.AtomicOr,
                    Op.BIT_XOR: S.AtomicXor, Op.MIN: S.AtomicSMin if s else S.AtomicUMin,
                    Op.MAX: S.AtomicSMax if s else S.AtomicUMax}[op]
            return self.op(code, self.pointer(addr, t), scope, sem, v, t=t)
        native = self.caps.float64_atomic_add if dt.bits == 64 else self.caps.float32_atomic_add
        if dt.is_float and op in (Op.ADD, Op.SUB) and native:
            self.m.extension("SPV_EXT_shader_atomic_float_add")
            self.m.capability(Capability.AtomicFloat64AddEXT if dt.bits == 64 else Capability.AtomicFloat32AddEXT)
            x = v if op is Op.ADD else self.op(S.FNegate, v, t=t)
            return self.op(S.AtomicFAddEXT, self.pointer(addr, t), scope, sem, x, t=t)
        return self.cas_loop(dt, addr, self._update(op, dt, v))

    def _update(self, op: Op, dt: T.DataType, v: int):
        def update(old: int) -> int:
            if dt.is_float and op in (Op.MIN, Op.MAX):
                return so.fminmax(self, dt, op is Op.MIN, old, v)
            return so.lower_op(self, op, [dt, dt], dt, [old, v])
        return update

    def narrow_atomic(self, op: Op, dt: T.DataType, addr: int, v: int) -> int:
        """An 8- or 16-bit atomic (Vulkan has none): a CAS loop on the aligned 32-bit word holding it, the
        other bytes kept. Returns the old value."""
        u = self.u32
        shift = self.op(S.UConvert, self.op(S.IMul, self.op(S.BitwiseAnd, addr, self.u64c(3), t=self.u64),
                                             self.u64c(8), t=self.u64), t=u)
        word = self.op(S.BitwiseAnd, addr, self.u64c(~3 & 0xFFFFFFFFFFFFFFFF), t=self.u64)
        mask = self.op(S.ShiftLeftLogical, self.u32c((1 << dt.bits) - 1), shift, t=u)
        mt = self.mem_ty(dt)
        update = self._update(op, dt, v)
        out: list[int] = []

        def on_word(old_word: int) -> int:
            raw = self.op(S.UConvert, self.op(S.ShiftRightLogical, old_word, shift, t=u), t=mt)
            old = self.from_mem(dt, raw)
            new = self.op(S.UConvert, self.to_mem(dt, update(old)), t=u)
            out.append(old)
            kept = self.op(S.BitwiseAnd, old_word, self.op(S.Not, mask, t=u), t=u)
            return self.op(S.BitwiseOr, kept, self.op(S.ShiftLeftLogical, new, shift, t=u), t=u)
        self.cas_loop(T.u32, word, on_word)
        return out[0]

    def cas_loop(self, dt: T.DataType, addr: int, update) -> int:
        """A compare-and-swap loop on the bits of `*addr` (a do-while loop construct); returns the old value."""
        ity = self.ty(T.u64 if dt.bits == 64 else T.u32)
        t = self.ty(dt)
        scope, sem = self._scope()

        def on_bits(bits: int) -> int:
            old = bits if dt.is_int else self.op(S.Bitcast, bits, t=t)
            out.append(old)
            new = update(old)
            return new if dt.is_int else self.op(S.Bitcast, new, t=ity)
        out: list[int] = []
        self.cas_words(self.pointer(addr, ity), ity, scope, sem, on_bits)
        return out[0]

    def cas_words(self, ptr: int, wt: int, scope: int, sem: int, update) -> int:
        """The compare-and-swap loop on the word at `ptr` (type `wt`, atomics of `scope`/`sem`; buffer or workgroup
        memory): `update(old word) -> new word`, emitted once in the loop body. Returns the old word."""
        seen_var = self.fn.local(self.m.pointer(StorageClass.Function, wt))
        done_var = self.fn.local(self.m.pointer(StorageClass.Function, self.bool_t()))
        self.op(S.Store, seen_var, self.op(S.AtomicLoad, ptr, scope, sem, t=wt))
        header, cont, merge = self.open_loop()
        self.tick()  # a driver's loop limit counts these iterations too
        bits = self.op(S.Load, seen_var, t=wt)
        seen = self.op(S.AtomicCompareExchange, ptr, scope, sem, sem, update(bits), bits, t=wt)
        self.op(S.Store, seen_var, seen)
        self.op(S.Store, done_var, self.op(S.IEqual, seen, bits, t=self.bool_t()))
        self.branch(cont)
        self.label(cont)
        self.op(S.BranchConditional, self.op(S.Load, done_var, t=self.bool_t()), merge, header)
        self.done = True
        self.label(merge)
        return bits

    def start_reductions(self) -> list[_Reduction]:
        prologue = set(self.task.prologue.stmts)
        out = []
        for red in self.found:
            if red.dtype.bits < 32:
                continue  # a narrow atomic is a CAS loop on its word: no accumulator
            addr = self.hoist_cell(red, prologue)
            acc = self.fn.local(self.m.pointer(StorageClass.Function, self.ty(red.dtype)))
            self.op(S.Store, acc, self.c(red.dtype, red.identity()))
            r = _Reduction(red, acc, addr)
            for a in red.atomics:
                self.reductions[a] = r
                self.vals[a.ptr] = r.addr
            out.append(r)
        return out

    def flush_reductions(self, accs: list[_Reduction]) -> None:
        for r in accs:
            red, dt = r.red, r.red.dtype
            total = self.op(S.Load, r.acc, t=self.ty(dt))
            op = Op.ADD if red.op is Op.SUB and dt.is_float else red.op
            group = self.subgroup_reduce(red.op, dt, total)
            if group is None:
                self.atomic(op, dt, r.addr, total)
            elif self.per_group:
                self.workgroup_flush(r, op, group)
            else:
                self.when(self.elect(), lambda: self.atomic(op, dt, r.addr, group))

    def workgroup_flush(self, r: _Reduction, op: Op, group: int) -> None:
        """One atomic per workgroup: the subgroups' sums meet in workgroup memory and subgroup 0 sums them.
        Only in a task none of whose invocations leaves early (`workgroup_reduces`): the barriers are reached
        by the whole workgroup, after the grid-stride loop."""
        red, dt = r.red, r.red.dtype
        t = self.ty(dt)
        shared = self.shared_array(t)
        sid = self.builtin(BuiltIn.SubgroupId)
        self.when(self.elect(), lambda: self.op(S.Store, self.shared_ptr(shared, t, sid), group))
        self.workgroup_barrier()

        def first_subgroup() -> None:
            acc = self.fn.local(self.m.pointer(StorageClass.Function, t))
            self.op(S.Store, acc, self.c(dt, red.identity()))
            lane = self.op(S.UConvert, self.builtin(BuiltIn.SubgroupLocalInvocationId), t=self.u64)
            count = self.op(S.UConvert, self.builtin(BuiltIn.NumSubgroups), t=self.u64)
            size = self.op(S.UConvert, self.builtin(BuiltIn.SubgroupSize), t=self.u64)

            def add(j: int) -> None:
                part = self.op(S.Load, self.shared_ptr(shared, t, j), t=t)
                cur = self.op(S.Load, acc, t=t)
                self.op(S.Store, acc, so.lower_op(self, _REGROUP.get(red.op, red.op), [dt, dt], dt, [cur, part]))
            self.loop(self.fn.local(self.m.pointer(StorageClass.Function, self.u64)), lane, count, size, add)
            total = self.subgroup_reduce(red.op, dt, self.op(S.Load, acc, t=t))
            self.when(self.elect(), lambda: self.atomic(op, dt, r.addr, total))
        self.when(self.op(S.IEqual, sid, self.u32c(0), t=self.bool_t()), first_subgroup)
        self.workgroup_barrier()  # the next reduction reuses the array

    def shared_array(self, t: int) -> int:
        """The task's workgroup array of `t`, one element per invocation (enough for any subgroup size)."""
        def make() -> int:
            arr = self.m.array(t, self.local_size)
            var = self.m.variable(self.m.pointer(StorageClass.Workgroup, arr), StorageClass.Workgroup)
            self.interface.append(var)
            return var
        return self._entry(("shared", t), make)

    def shared_ptr(self, shared: int, t: int, index: int) -> int:
        return self.op(S.AccessChain, shared, index, t=self.m.pointer(StorageClass.Workgroup, t))

    def builtin(self, which: BuiltIn, subgroup: bool = True) -> int:
        """The u32 value of a built-in (loaded where it is used); `subgroup`: a subgroup one (GroupNonUniform)."""
        def make() -> int:
            if subgroup:
                self.m.capability(Capability.GroupNonUniform)
            var = self.m.variable(self.m.pointer(StorageClass.Input, self.u32), StorageClass.Input)
            self.m.decorate(var, Decoration.BuiltIn, which)
            self.interface.append(var)
            return var
        return self.op(S.Load, self._entry(("builtin", which), make), t=self.u32)

    def workgroup_barrier(self) -> None:
        sem = MemorySemantics.AcquireRelease | MemorySemantics.WorkgroupMemory
        wg = self.u32c(Scope.Workgroup)
        self.op(S.ControlBarrier, wg, wg, self.u32c(int(sem)))

    def elect(self) -> int:
        self.m.capability(Capability.GroupNonUniform)
        return self.op(S.GroupNonUniformElect, self.u32c(Scope.Subgroup), t=self.bool_t())

    def when(self, cond: int, emit: Any) -> None:
        """`if cond: emit()` as a selection construct."""
        then, merge = self.m.id(), self.m.id()
        self.op(S.SelectionMerge, merge, 0)
        self.op(S.BranchConditional, cond, then, merge)
        self.label(then)
        emit()
        self.branch(merge)
        self.label(merge)

    def subgroup_reduce(self, op: Op, dt: T.DataType, v: int) -> int | None:
        """The subgroup-wide reduction of per-invocation accumulators, where the device has subgroup
        arithmetic and the op is exact to regroup (int ops; float add/sub, which a reduction may reassociate)."""
        code = group_opcode(op, dt) if self.caps.subgroup_arith else None
        if code is None:
            return None
        self.m.capability(Capability.GroupNonUniform)
        self.m.capability(Capability.GroupNonUniformArithmetic)
        return self.op(code, self.u32c(Scope.Subgroup), GroupOperation.Reduce, v, t=self.ty(dt))


# partial accumulators combine by addition (a sub reduction accumulates the subtrahends: by addition for ints,
# by subtraction from -0.0 for floats)
_REGROUP = {Op.SUB: Op.ADD}


def group_opcode(op: Op, dt: T.DataType) -> S | None:
    """The subgroup reduction of reduction `op` over `dt`, where regrouping it is exact (int ops) or allowed
    (float add/sub, which a reduction may reassociate); None otherwise."""
    if dt.is_float:
        return S.GroupNonUniformFAdd if op in (Op.ADD, Op.SUB) else None
    s = dt.is_signed
    return {Op.ADD: S.GroupNonUniformIAdd, Op.SUB: S.GroupNonUniformIAdd,
            Op.MIN: S.GroupNonUniformSMin if s else S.GroupNonUniformUMin,
            Op.MAX: S.GroupNonUniformSMax if s else S.GroupNonUniformUMax,
            Op.BIT_AND: S.GroupNonUniformBitwiseAnd, Op.BIT_OR: S.GroupNonUniformBitwiseOr,
            Op.BIT_XOR: S.GroupNonUniformBitwiseXor}.get(op)


def workgroup_reduces(task: ir.Task, caps: Any, found: list | None = None) -> bool:
    """Whether range task `task` reduces per workgroup (workgroup memory, barriers, one atomic per workgroup):
    it has a reduction the subgroup can regroup (`found`: its `find_reductions`, when known), and none of its
    invocations can leave before the barriers (no check, no driver loop limit)."""
    if task.kind != "range" or not caps.subgroup_arith or caps.loop_limit:
        return False
    if any(isinstance(s, (ir.Check, ir.Return)) for b in (task.prologue, task.body) for s in ir.walk(b)):
        return False
    found = find_reductions(task) if found is None else found
    return any(r.dtype.bits >= 32 and group_opcode(r.op, r.dtype) is not None for r in found)


__all__ = ["Atomics"]
