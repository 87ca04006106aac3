"""`qd.simt` in the SPIR-V emitter (a mixin of `qd/gpu/spirv.py`'s `FnEmitter`): thread-group operations
(`ir.Simt`) and block-shared arrays (`BufferDecl` kind 'shared').

A shared array is one `Workgroup` array per task (entry point) that reaches it, of 32-bit words (64-bit ones for
64-bit dtypes): an element narrower than 32 bits takes a whole word (u1 as 0/1, f16 as the f32 bits of its
register value, which are exact), so every access, atomic and compare-and-swap loop works on one word and no
8/16-bit storage capability is needed. Its atomics are workgroup-scope: native ones for 32-bit ints (64-bit ones
where the device has shaderSharedInt64Atomics), compare-and-swap loops on the word for the rest. The arrays of a
task may not pass the device's `maxComputeSharedMemorySize`.

Barriers and fences order buffer (UniformMemory) and workgroup memory with acquire-release semantics:
`block_sync` is `OpControlBarrier(Workgroup, Workgroup)` (so a block also sees its writes to fields, as CUDA's
`__syncthreads`), `block_fence` / `subgroup_fence` / `grid_fence` are `OpMemoryBarrier` at workgroup / subgroup /
device scope, `subgroup_sync` is `OpControlBarrier(Subgroup, Subgroup)`. Thread ids: `LocalInvocationIndex` (the
workgroup is one-dimensional), `GlobalInvocationId.x`, `SubgroupLocalInvocationId`. Shuffles are
`OpGroupNonUniformShuffle` / `ShuffleUp` / `ShuffleDown`; `broadcast` is `OpGroupNonUniformBroadcast` for a constant
lane and a shuffle otherwise (the SPIR-V rule wants a dynamically uniform lane, which the IR cannot prove);
`ballot` is `OpGroupNonUniformBallot`'s first two words as a u64. Each subgroup capability is declared only where
an operation needs it, after checking that the device offers that operation class in compute shaders.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qd import ir
from qd.errors import QuadrantsArchError, QuadrantsCompilationError, QuadrantsTypeError
from qd.gpu import spirv_ops as so
from qd.gpu.spirv_defs import BuiltIn, Capability, MemoryAccess, MemorySemantics, Scope, StorageClass
from qd.gpu.spirv_defs import Op as S
from qd.ops import Op
from qd.types import dtypes as T

# VK_SUBGROUP_FEATURE_* bits (`VkPhysicalDeviceSubgroupProperties.supportedOperations`)
BASIC, BALLOT, SHUFFLE, RELATIVE = 0x1, 0x8, 0x10, 0x20
_CLASS = {BASIC: (Capability.GroupNonUniform, "basic"), BALLOT: (Capability.GroupNonUniformBallot, "ballot"),
          SHUFFLE: (Capability.GroupNonUniformShuffle, "shuffle"),
          RELATIVE: (Capability.GroupNonUniformShuffleRelative, "shuffle_relative")}
_ORDER = int(MemorySemantics.AcquireRelease | MemorySemantics.UniformMemory | MemorySemantics.WorkgroupMemory)


@dataclass(frozen=True)
class WgPtr:
    """A `GlobalPtr` into a shared array: a `Workgroup` pointer to the element's word."""

    ptr: int
    word: T.DataType  # u32 or u64


def word_of(dt: T.DataType) -> T.DataType:
    """The workgroup-memory word holding an element of `dt`."""
    return T.u64 if dt.bits == 64 else T.u32


def is_shared(k: ir.KernelIR, buf: int) -> bool:
    return k.buffers[buf].kind == "shared"


class SimtOps:
    """`ir.Simt` statements and shared-array accesses; the emitter's state (`m`, `op`, `ty`, `vals`, `caps`, ...)
    is `FnEmitter`'s."""

    # ------------------------------------------------------------ shared arrays
    def wg_var(self, buf: int) -> int:
        """The task's `Workgroup` array of shared buffer `buf`, declared once (its bytes checked against the
        device's limit)."""
        def make() -> int:
            decl = self.k.buffers[buf]
            word = word_of(decl.dtype)
            n = math.prod(decl.shape) * math.prod(decl.elem_shape)
            self.wg_bytes += n * word.itemsize
            self.check_shared_bytes()
            arr = self.m.array(self.ty(word), n)
            var = self.m.variable(self.m.pointer(StorageClass.Workgroup, arr), StorageClass.Workgroup)
            self.interface.append(var)
            return var
        return self._entry(("wg", buf), make)

    def check_shared_bytes(self) -> None:
        limit = self.caps.shared_bytes
        if limit and self.wg_bytes > limit:
            raise QuadrantsCompilationError(
                f"{self.where()}kernel {self.k.name}: its qd.simt.block.SharedArray arrays need {self.wg_bytes} bytes "
                f"of shared (workgroup) memory per block in task {self.index}, more than this Vulkan device's limit "
                f"of {limit} bytes (maxComputeSharedMemorySize; elements narrower than 32 bits take 4 bytes each); "
                f"use smaller shared arrays")

    def where(self, s: ir.Stmt | None = None) -> str:
        loc = (s.loc if s is not None else None) or self.k.loc
        return f"{loc.file}:{loc.line}: " if loc is not None else ""

    def wg_ptr(self, s: ir.GlobalPtr, lin: int) -> WgPtr:
        word = word_of(s.dtype)
        idx = self.op(S.UConvert, lin, t=self.u32)
        ptr = self.op(S.AccessChain, self.wg_var(s.buffer), idx, t=self.m.pointer(StorageClass.Workgroup,
                                                                                    self.ty(word)))
        return WgPtr(ptr, word)

    def to_word(self, dt: T.DataType, v: int) -> int:
        """A register value of `dt` as its workgroup word."""
        w = word_of(dt)
        if dt is T.u1:
            return so.select(self, self.u32, v, self.u32c(1), self.u32c(0))
        if dt.is_float:
            return self.op(S.Bitcast, v, t=self.ty(w))
        return v if dt.bits in (32, 64) else self.op(S.UConvert, v, t=self.u32)

    def from_word(self, dt: T.DataType, w: int) -> int:
        if dt is T.u1:
            return self.op(S.INotEqual, w, self.u32c(0), t=self.bool_t())
        if dt.is_float:
            return self.op(S.Bitcast, w, t=self.ty(dt))
        return w if dt.bits in (32, 64) else self.op(S.UConvert, w, t=self.ty(dt))

    def wg_load(self, dt: T.DataType, p: WgPtr, volatile: bool) -> int:
        access = (MemoryAccess.Volatile,) if volatile else ()
        return self.from_word(dt, self.op(S.Load, p.ptr, *access, t=self.ty(p.word)))

    def wg_store(self, dt: T.DataType, p: WgPtr, v: int) -> None:
        self.op(S.Store, p.ptr, self.to_word(dt, v))

    def wg_scope(self) -> tuple[int, int]:
        return self.u32c(Scope.Workgroup), self.u32c(0)

    def wg_word_atomics(self, dt: T.DataType, what: str) -> None:
        if dt.bits == 64:
            if not self.caps.shared_int64_atomics:
                raise QuadrantsTypeError(f"{what} on a {dt} shared array needs 64-bit workgroup atomics, which this "
                                         f"Vulkan device lacks (shaderSharedInt64Atomics)")
            self.m.capability(Capability.Int64Atomics)

    def wg_atomic(self, op: Op, dt: T.DataType, p: WgPtr, v: int) -> int:
        """`*p = op(*p, v)` atomically at workgroup scope; returns the old value."""
        if dt is T.u1 or (dt.is_float and op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)):
            raise QuadrantsTypeError(f"atomic {op.value} is not supported on {dt}")
        self.wg_word_atomics(dt, f"atomic {op.value}")
        if dt.is_int and dt.bits >= 32 and op is not Op.MUL:
            s = dt.is_signed
            code = {Op.ADD: S.AtomicIAdd, Op.SUB: S.AtomicISub, Op.BIT_AND: S.AtomicAnd, Op.BIT_OR: S.AtomicOr,
                    Op.BIT_XOR: S.AtomicXor, Op.MIN: S.AtomicSMin if s else S.AtomicUMin,
                    Op.MAX: S.AtomicSMax if s else S.AtomicUMax}[op]
            return self.op(code, p.ptr, *self.wg_scope(), v, t=self.ty(dt))
        update = self._update(op, dt, v)
        old = self.wg_cas_loop(p, lambda w: self.to_word(dt, update(self.from_word(dt, w))))
        return self.from_word(dt, old)

    def wg_swap(self, dt: T.DataType, p: WgPtr, v: int, expected: int | None) -> int:
        """`qd.atomic_exchange` / `qd.atomic_cas` on a shared element: the old value."""
        self.wg_word_atomics(dt, "qd.atomic_cas" if expected is not None else "qd.atomic_exchange")
        scope, sem = self.wg_scope()
        wt, new = self.ty(p.word), self.to_word(dt, v)
        if expected is not None:
            old = self.op(S.AtomicCompareExchange, p.ptr, scope, sem, sem, new, self.to_word(dt, expected), t=wt)
        else:
            old = self.op(S.AtomicExchange, p.ptr, scope, sem, new, t=wt)
        return self.from_word(dt, old)

    def wg_cas_loop(self, p: WgPtr, update: Callable[[int], int]) -> int:
        """A compare-and-swap loop on the word of `p`; `update(old word) -> new word`. Returns the old word."""
        scope, sem = self.wg_scope()
        return self.cas_words(p.ptr, self.ty(p.word), scope, sem, update)

    # ------------------------------------------------------------ thread-group operations
    def s_Simt(self, s: ir.Simt) -> None:
        lower = _LOWER.get(s.op)
        if lower is None:
            raise QuadrantsArchError(f"{self.where(s)}qd.simt operation {s.op} (kernel {self.k.name}) has no SPIR-V "
                                     f"lowering: the qd.simt.warp operations are CUDA-only; use qd.simt.subgroup")
        r = lower(self, s)
        if r is not None:
            self.vals[s] = r

    def needs(self, s: ir.Simt, bit: int) -> None:
        """Declares the capability of subgroup operation class `bit` after checking the device has it."""
        for b in (BASIC, bit):
            cap, name = _CLASS[b]
            if not self.caps.subgroup_ops & b:
                raise QuadrantsArchError(
                    f"{self.where(s)}qd.simt {s.op} (kernel {self.k.name}) needs the Vulkan device's {name} subgroup "
                    f"operations in compute shaders, which it lacks (VkPhysicalDeviceSubgroupProperties."
                    f"supportedOperations / supportedStages); run the kernel on another arch or device")
            self.m.capability(cap)

    def barrier(self, scope: Scope, control: bool) -> None:
        sc = self.u32c(scope)
        if control:
            self.op(S.ControlBarrier, sc, sc, self.u32c(_ORDER))
        else:
            self.op(S.MemoryBarrier, sc, self.u32c(_ORDER))

    def shuffle(self, s: ir.Simt, code: S, bit: int) -> int:
        self.needs(s, bit)
        value, lane = (self.v(a) for a in s.args)
        return self.op(code, self.u32c(Scope.Subgroup), value, lane, t=self.ty(s.dtype))

    def broadcast(self, s: ir.Simt) -> int:
        if not isinstance(s.args[1], ir.Const):
            return self.shuffle(s, S.GroupNonUniformShuffle, SHUFFLE)
        return self.shuffle(s, S.GroupNonUniformBroadcast, BALLOT)

    def ballot(self, s: ir.Simt) -> int:
        self.needs(s, BALLOT)
        pred = self.op(S.INotEqual, self.v(s.args[0]), self.u32c(0), t=self.bool_t())
        mask = self.op(S.GroupNonUniformBallot, self.u32c(Scope.Subgroup), pred, t=self.m.vector(self.u32, 4))
        lo, hi = (self.op(S.UConvert, self.op(S.CompositeExtract, mask, k, t=self.u32), t=self.u64) for k in (0, 1))
        return self.op(S.BitwiseOr, lo, self.op(S.ShiftLeftLogical, hi, self.u64c(32), t=self.u64), t=self.u64)

    def subgroup_barrier(self, s: ir.Simt, control: bool) -> None:
        self.needs(s, BASIC)
        self.barrier(Scope.Subgroup, control)


def _lane(e: Any, s: ir.Simt) -> int:
    e.needs(s, BASIC)
    return e.builtin(BuiltIn.SubgroupLocalInvocationId)


_LOWER: dict[str, Callable[[Any, ir.Simt], Any]] = {
    "block_sync": lambda e, s: e.barrier(Scope.Workgroup, True),
    "block_fence": lambda e, s: e.barrier(Scope.Workgroup, False),
    "grid_fence": lambda e, s: e.barrier(Scope.Device, False),
    "subgroup_sync": lambda e, s: e.subgroup_barrier(s, True),
    "subgroup_fence": lambda e, s: e.subgroup_barrier(s, False),
    "thread_idx": lambda e, s: e.builtin(BuiltIn.LocalInvocationIndex, subgroup=False),
    "global_thread_idx": lambda e, s: e.op(S.UConvert, e.gid(), t=e.u32),
    "lane": _lane,
    "shuffle": lambda e, s: e.shuffle(s, S.GroupNonUniformShuffle, SHUFFLE),
    "shuffle_up": lambda e, s: e.shuffle(s, S.GroupNonUniformShuffleUp, RELATIVE),
    "shuffle_down": lambda e, s: e.shuffle(s, S.GroupNonUniformShuffleDown, RELATIVE),
    "broadcast": lambda e, s: e.broadcast(s),
    "ballot": lambda e, s: e.ballot(s),
}


def uses_subgroups(t: ir.Task) -> bool:
    """Whether task `t` has a subgroup operation (its pipeline pins the subgroup size where it may vary)."""
    return any(isinstance(s, ir.Simt) and s.op not in _BLOCK_OPS for b in (t.prologue, t.body) if b is not None
               for s in ir.walk(b))


_BLOCK_OPS = frozenset({"block_sync", "block_fence", "grid_fence", "thread_idx", "global_thread_idx"})


__all__ = ["SimtOps", "WgPtr", "is_shared", "uses_subgroups", "word_of"]
