"""Offloaded `KernelIR` -> SPIR-V compute modules, one per task: the code generator of the Vulkan tier.

Every buffer is reached through a `PhysicalStorageBuffer` pointer made from a 64-bit device address
(`OpConvertUToPtr`, accesses `Aligned`): no descriptor sets and no per-binding size cap (lavapipe caps a
storage-buffer binding at 128 MiB, qd buffers can be larger). A launch's *slot* (a small device buffer the
launcher fills, its address the one push constant) holds, in 64-bit words:

    [0:16)  status (DESIGN §6: failure flag, check id, thread, arg count, args; [8] dropped prints)
    [16]    print length (words used in the print buffer)
    [17:17+nrets)  return values (register bits)
    then the kernel's context entries, in `SpirvKernel.ctx` order: ("buf", b) base address, ("shape", b, axis)
    extent, ("arg", i) scalar argument bits, ("print",) print buffer address, ("rng", task) the task's random key base

Each task is one entry point `main`. A serial task runs on one invocation (local size 1, one workgroup). A
range task is a grid-stride loop: invocation g of G runs indices begin + g, begin + g + G, ... of [begin, end),
computing its prologue itself (it is pure); `ThreadSlot` is g, so each launched invocation owns one adstack
heap row. Qualifying atomics (`qd/codegen/reduce.py`) accumulate per invocation across its indices and are
applied once after the loop: summed over the subgroup first where the device has subgroup arithmetic, then
one atomic per subgroup. IR control flow is structured and maps to SPIR-V's selection and loop constructs
directly; a failed `Check` records the status (first failure wins by compare-and-swap) and returns.
Statement semantics follow the interpreter word for word, as the LLVM tier does (`qd/jit/llvm_fn.py`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from qd import ir
from qd.base import abi
from qd.base.abi import HEADER_WORDS, LOOP_LIMIT, MAX_CHECK_ARGS, PRINTLEN_WORD, ZERO_WORD
from qd.codegen.emitter import CodegenBase, KernelCodegen, prepare
from qd.codegen.reduce import find_reductions
from qd.codegen.tables import check_arg_table, print_table
from qd.errors import QuadrantsCompilationError, QuadrantsTypeError
from qd.gpu import spirv_ops as so
from qd.gpu.spirv_atomics import Atomics, workgroup_reduces
from qd.gpu.spirv_defs import (GLSL, AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel,
                               MemoryAccess, MemoryModel, StorageClass)
from qd.gpu.spirv_defs import Op as S
from qd.gpu.spirv_float import NO_FLOAT_CONTROLS, FloatControls, execution_modes, hides_operands, opaque
from qd.gpu.spirv_flow import Nesting
from qd.gpu.spirv_module import Function, Module
from qd.gpu.spirv_simt import SimtOps, WgPtr, is_shared
from qd.types import dtypes as T



def _tuning(name: str, default: int) -> int:
    return int(os.environ.get(name, "") or default)


# code-shape choices (measured on an H100, DESIGN §10; the environment overrides them for measurements, and they
# are part of the SPIR-V cache key): invocations per workgroup, and of a task reducing per workgroup; how many
# indices an invocation runs per iteration of the grid-stride loop where the body allows it
LOCAL_SIZE = _tuning("QD_VULKAN_LOCAL_SIZE", 128)
REDUCE_LOCAL_SIZE = _tuning("QD_VULKAN_REDUCE_LOCAL_SIZE", 256)
UNROLL = _tuning("QD_VULKAN_UNROLL", 4)
UNROLL_BUDGET = 64  # IR statements of a body that is interleaved at most
TUNING = (LOCAL_SIZE, REDUCE_LOCAL_SIZE, UNROLL)


@dataclass(frozen=True)
class Caps:
    """What the device offers that the code depends on (probed by the runtime)."""

    float64: bool = True
    int64_atomics: bool = True
    float32_atomic_add: bool = False
    float64_atomic_add: bool = False
    subgroup_arith: bool = False
    loop_limit: int = 0  # a driver that ends any invocation's loops after this many iterations in all (lavapipe)
    per_index_grid: bool = False  # range tasks that do not reduce get one invocation per index (a CPU device)
    float_controls: FloatControls = NO_FLOAT_CONTROLS  # execution modes declared under fast_math=False
    hide_zeros: bool = False  # the driver folds constant zeros whatever the float controls (`spirv_float.py`)
    max_nesting: int = 0  # nested loops and ifs the driver compiles right, 0: no limit known (`spirv_flow.py`)
    # `qd.simt` (`spirv_simt.py`): the VK_SUBGROUP_FEATURE_* bits of compute shaders, the bytes of workgroup memory
    # and the invocations of one workgroup the device allows (0: no limit known), 64-bit workgroup atomics
    subgroup_ops: int = 0
    shared_bytes: int = 0
    max_local_size: int = 0
    shared_int64_atomics: bool = False


@dataclass
class SpirvTask:
    kind: str  # 'serial' | 'range'
    words: list[int]
    local_size: int
    task: ir.Task
    reduces: bool = False  # accumulates atomics per invocation: fewer, longer-running invocations pay off


@dataclass
class SpirvKernel:
    tasks: list[SpirvTask]
    ctx: list[tuple]  # context entry keys, in slot order after the header and the return words
    prints: list
    check_args: list
    nrets: int
    uses_random: bool = False

    @property
    def slot_words(self) -> int:
        return HEADER_WORDS + self.nrets + len(self.ctx)


# statements a body may have to run several indices interleaved (`FnEmitter.unrolled_loop`)
_INTERLEAVABLE = (ir.Const, ir.ArgLoad, ir.ExternalShape, ir.OpStmt, ir.GlobalPtr, ir.GlobalLoad, ir.GlobalStore,
                  ir.AtomicRMW, ir.If, ir.Alloca, ir.LocalLoad, ir.LocalStore)


class KernelGen(KernelCodegen):
    """Kernel-wide state: the context layout shared by every task's module."""

    def __init__(self, k: ir.KernelIR, caps: Caps, fast_math: bool, print_words: int) -> None:
        super().__init__(k, fast_math, "build_spirv")
        self.caps, self.print_words = caps, print_words


def build_spirv(k: ir.KernelIR, caps: Caps, fast_math: bool, print_words: int) -> SpirvKernel:
    """The SPIR-V modules of offloaded kernel `k`, with its context layout, print table and check-arg dtypes;
    `print_words` is the capacity of the print buffer the launcher binds."""
    k = prepare(k, so.LACKS)
    kg = KernelGen(k, caps, fast_math, print_words)
    tasks = []
    for n, t in enumerate(k.tasks):
        e = FnEmitter(kg, t, n)
        tasks.append(SpirvTask(t.kind, e.build(), e.local_size, t, bool(e.reductions)))
    return assemble(k, tasks, kg.ctx_keys())


def assemble(k: ir.KernelIR, tasks: list[SpirvTask], ctx: list[tuple]) -> SpirvKernel:
    """The kernel of `tasks` (emitted now or read from the disk cache) with the tables the launcher decodes."""
    uses_random = any(isinstance(s, ir.RandomValue) for s in ir.walk_kernel(k))
    return SpirvKernel(tasks, ctx, print_table(k), check_arg_table(k), len(k.rets), uses_random)


@dataclass
class FnEmitter(SimtOps, Atomics, Nesting, CodegenBase):
    """One task as one SPIR-V module with entry point `main` (the `so.Emit` protocol for op lowerings; the shared
    skeleton: `qd/codegen/emitter.py`)."""

    TIER = "the SPIR-V code generator"

    kg: KernelGen
    task: ir.Task
    index: int = 0  # the task's number (its random key base)
    vals: dict = field(default_factory=dict)
    wide: dict = field(default_factory=dict)
    cache: dict = field(default_factory=dict)
    vars: dict = field(default_factory=dict)
    loops: list = field(default_factory=list)
    reductions: dict = field(default_factory=dict)
    depth: int = 0  # selection and loop constructs open around the code emitted now (`spirv_flow.Nesting`)

    def __post_init__(self) -> None:
        self.k, self.caps = self.kg.k, self.kg.caps
        self.fast = self.kg.fast_math
        self.hide = self.caps.hide_zeros and not self.fast
        self.opaque: dict = {}  # `spirv_float.opaque` per value
        self.wide_f32 = self.caps.float64
        # the task's accumulators (`start_reductions`); never a shared array's (its atomics meet at barriers)
        self.found = [r for r in find_reductions(self.task) if not is_shared(self.k, r.ptr.buffer)]
        self.per_group = workgroup_reduces(self.task, self.caps, self.found)  # they meet in workgroup memory
        self.local_size = self.workgroup_size()
        self.wg_bytes = 0  # workgroup memory of the task's shared arrays (`spirv_simt.SimtOps.wg_var`)
        m = self.m = Module((1, 5))
        for cap in (Capability.Shader, Capability.Int64, Capability.PhysicalStorageBufferAddresses):
            m.capability(cap)
        m.memory_model(AddressingModel.PhysicalStorageBuffer64, MemoryModel.GLSL450)
        self.glsl = m.import_ext("GLSL.std.450")
        self.u32, self.u64 = m.int(32, False), m.int(64, False)
        push = m.struct(self.u64, unique=True)
        m.decorate(push, Decoration.Block)
        m.member_decorate(push, 0, Decoration.Offset, 0)
        self.pc = m.variable(m.pointer(StorageClass.PushConstant, push), StorageClass.PushConstant)
        v3 = m.vector(self.u32, 3)
        self.gid_var = m.variable(m.pointer(StorageClass.Input, v3), StorageClass.Input)
        m.decorate(self.gid_var, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)
        self.nwg_var = m.variable(m.pointer(StorageClass.Input, v3), StorageClass.Input)
        m.decorate(self.nwg_var, Decoration.BuiltIn, BuiltIn.NumWorkgroups)
        self.interface = [self.pc, self.gid_var, self.nwg_var]  # every module-scope variable the entry point uses
        void = m.void()
        self.fn: Function = m.function(void, m.function_type(void))
        self.fn.label()
        self.start = m.id()
        self.fn.op(S.Branch, self.start)
        self.fn.label(self.start)
        self.done = False  # the current block has its terminator
        self.tid = self.u64c(0)
        self.rng: tuple[int, int] | None = None
        self.budget: int | None = None

    def workgroup_size(self) -> int:
        """Invocations per workgroup: 1 for a serial task, else the loop's `block_dim` where it has one (within the
        device's limit), else the tuned default."""
        t = self.task
        if t.kind == "serial":
            return 1
        if not t.block_dim:
            return REDUCE_LOCAL_SIZE if self.per_group else LOCAL_SIZE
        limit = self.caps.max_local_size
        if limit and t.block_dim > limit:
            where = f"{t.loc.file}:{t.loc.line}: " if t.loc is not None else ""
            raise QuadrantsCompilationError(f"{where}kernel {self.k.name}: qd.loop_config(block_dim={t.block_dim}) is "
                                            f"more than this Vulkan device's {limit} invocations per workgroup "
                                            f"(maxComputeWorkGroupInvocations / maxComputeWorkGroupSize); use a "
                                            f"block_dim of at most {limit}")
        return t.block_dim

    # ------------------------------------------------------------ the Emit protocol
    def ty(self, dt: T.DataType) -> int:
        if dt is T.u1:
            return self.bool_t()
        if dt.is_float:
            if dt.bits == 64:
                if not self.caps.float64:
                    raise QuadrantsTypeError("f64 is not supported by this Vulkan device (no shaderFloat64); use f32")
                self.m.capability(Capability.Float64)
                return self.m.float(64)
            return self.m.float(32)
        if dt.bits == 8:
            self.m.capability(Capability.Int8)
        elif dt.bits == 16:
            self.m.capability(Capability.Int16)
        return self.m.int(dt.bits, False)

    def mem_ty(self, dt: T.DataType) -> int:
        """The type of `dt` in memory: u1 is a byte, f16 the u16 bits of a half."""
        mdt = T.u8 if dt is T.u1 else (T.u16 if dt is T.f16 else dt)
        if mdt.bits == 8:
            self.m.capability(Capability.StorageBuffer8BitAccess)
        elif mdt.bits == 16:
            self.m.capability(Capability.StorageBuffer16BitAccess)
        return self.ty(mdt)

    def bool_t(self) -> int:
        return self.m.bool()

    def c(self, dt: T.DataType, value: Any) -> int:
        if dt is T.u1:
            return self.m.constant(self.bool_t(), bool(value))
        if dt.is_float and dt.bits != 64:
            import numpy as np

            value = float(np.float16(value)) if dt is T.f16 else float(np.float32(value))
        return self.m.constant(self.ty(dt), value)

    def u32c(self, value: int) -> int:
        return self.m.constant(self.u32, value)

    def u64c(self, value: int) -> int:
        return self.m.constant(self.u64, value)

    def op(self, opcode: S, *operands: Any, t: int | None = None) -> int:
        return self.fn.op(opcode, *operands, type_id=t)

    def ext(self, inst: GLSL, t: int, *args: int) -> int:
        return self.fn.op(S.ExtInst, self.glsl, inst, *args, type_id=t)

    def exact(self, rid: int, always: bool = False) -> int:
        """`rid` (a float op) may not be contracted into an fma unless fast math allows it (`always`: never)."""
        if always or not self.fast:
            self.m.decorate(rid, Decoration.NoContraction)
        return rid

    # ------------------------------------------------------------ entry values, addresses
    def _entry(self, key: Any, make) -> int:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def entry(self, opcode: S, *operands: Any, t: int | None = None) -> int:
        return self.fn.entry_op(opcode, *operands, type_id=t)

    def psb(self, pointee: int) -> int:
        return self.m.pointer(StorageClass.PhysicalStorageBuffer, pointee)

    def slot(self) -> int:
        def make() -> int:
            p = self.entry(S.AccessChain, self.pc, self.u32c(0), t=self.m.pointer(StorageClass.PushConstant, self.u64))
            return self.entry(S.Load, p, t=self.u64)
        return self._entry("slot", make)

    def slot_ptr(self, word: int, pointee: int, at_entry: bool = False) -> int:
        emit = self.entry if at_entry else self.op
        addr = emit(S.IAdd, self.slot(), self.u64c(8 * word), t=self.u64)
        return emit(S.ConvertUToPtr, addr, t=self.psb(pointee))

    def ctx_word(self, key: tuple) -> int:
        """A context entry's u64 value, loaded once at function entry."""
        def make() -> int:
            p = self.slot_ptr(self.kg.ctx_word(key), self.u64, at_entry=True)
            return self.entry(S.Load, p, MemoryAccess.Aligned, 8, t=self.u64)
        return self._entry(("ctx",) + key, make)

    def gid(self) -> int:
        def make() -> int:
            v3 = self.entry(S.Load, self.gid_var, t=self.m.vector(self.u32, 3))
            return self.entry(S.UConvert, self.entry(S.CompositeExtract, v3, 0, t=self.u32), t=self.u64)
        return self._entry("gid", make)

    def nthreads(self) -> int:
        def make() -> int:
            v3 = self.entry(S.Load, self.nwg_var, t=self.m.vector(self.u32, 3))
            n = self.entry(S.UConvert, self.entry(S.CompositeExtract, v3, 0, t=self.u32), t=self.u64)
            return self.entry(S.IMul, n, self.u64c(self.local_size), t=self.u64)
        return self._entry("nthreads", make)

    def from_bits(self, dt: T.DataType, bits: int, at_entry: bool = False) -> int:
        emit = self.entry if at_entry else self.op
        if dt is T.u1:
            return emit(S.INotEqual, bits, self.u64c(0), t=self.bool_t())
        if dt.is_float:
            if dt.bits == 64:
                return emit(S.Bitcast, bits, t=self.ty(dt))
            return emit(S.Bitcast, emit(S.UConvert, bits, t=self.u32), t=self.ty(T.f32))
        return bits if dt.bits == 64 else emit(S.UConvert, bits, t=self.ty(dt))

    def to_bits(self, dt: T.DataType, v: int) -> int:
        """Register bits (u64): ints sign/zero-extended, f32/f16 as f32 bits, f64 bits."""
        if dt is T.u1:
            return so.select(self, self.u64, v, self.u64c(1), self.u64c(0))
        if dt.is_float:
            if dt.bits == 64:
                return self.op(S.Bitcast, v, t=self.u64)
            return self.op(S.UConvert, self.op(S.Bitcast, v, t=self.u32), t=self.u64)
        if dt.bits == 64:
            return v
        return so.sext(self, dt, T.u64, v) if dt.is_signed else self.op(S.UConvert, v, t=self.u64)

    def shape(self, buf: int, axis: int) -> int:
        return self.ctx_word(("shape", buf, axis))

    def index_const(self, n: int) -> int:
        return self.u64c(n)

    def ndarray_stride(self, buf: int, axis: int) -> int:
        decl = self.k.buffers[buf]

        def make() -> int:
            acc = self.u64c(1)
            for a in range(axis + 1, decl.total_ndim):
                d = self.shape(buf, a)
                z = self.entry(S.IEqual, d, self.u64c(0), t=self.bool_t())
                d = self.entry(S.Select, z, self.u64c(1), d, t=self.u64)
                acc = self.entry(S.IMul, acc, d, t=self.u64)
            return acc
        return self._entry(("stride", buf, axis), make)

    def widen(self, x: ir.Value) -> int:
        v = self.v(x)
        if x.dtype is T.u1:
            return so.select(self, self.u64, v, self.u64c(1), self.u64c(0))
        if x.dtype.bits == 64:
            return v
        return so.sext(self, x.dtype, T.u64, v) if x.dtype.is_signed else self.op(S.UConvert, v, t=self.u64)

    def const_value(self, x: ir.Const) -> int:
        return self.c(x.dtype, x.value)

    def arg_value(self, x: ir.ArgLoad) -> int:
        return self._entry(("arg", x.index, x.dtype.name),
                           lambda: self.from_bits(x.dtype, self.ctx_word(("arg", x.index)), at_entry=True))

    def shape_value(self, x: ir.ExternalShape) -> int:
        sh = self.shape(x.buffer, x.axis)
        return self._entry(("eshape", x.buffer, x.axis, x.dtype.name),
                           lambda: sh if x.dtype.bits == 64 else self.entry(S.UConvert, sh, t=self.ty(x.dtype)))

    # ------------------------------------------------------------ blocks and control flow
    def label(self, lid: int) -> None:
        self.fn.label(lid)
        self.done = False

    def branch(self, target: int) -> None:
        if not self.done:
            self.op(S.Branch, target)
            self.done = True

    def block(self, blk: ir.Block) -> None:
        handlers, find = self._handlers, self.handler
        for s in blk.stmts:
            if self.done:  # the rest of the block follows a break, continue, return: never runs
                return
            (handlers.get(type(s)) or find(s))(self, s)

    def local_var(self, key: Any, t: int) -> int:
        if key not in self.vars:
            self.vars[key] = self.fn.local(self.m.pointer(StorageClass.Function, t))
        return self.vars[key]

    def operands(self, s: ir.OpStmt) -> list[int]:
        if self.hide and hides_operands(s.op):
            return [self.operand(a) for a in s.args]
        return [self.v(a) for a in s.args]

    def lower_op(self, s: ir.OpStmt, args: list[int]) -> int:
        return so.lower_op(self, s.op, [a.dtype for a in s.args], s.dtype, args)

    def operand(self, x: ir.Value) -> int:
        """`v(x)`, for a float operand the driver might see as a constant OR-ed with a word that is always 0
        (`Caps.hide_zeros`, `spirv_float.py`): same value, no constant to fold. Non-zero constants stay."""
        if not (self.hide and x.dtype.is_float) or opaque(x, self.task.var, self.opaque):
            return self.v(x)
        if isinstance(x, ir.Const):
            if x.value != 0:
                return self.v(x)
            return self._entry(("hidden", x.dtype.name, str(float(x.value))), lambda: self.hidden(x.dtype, self.v(x),
                                                                                               self.entry))
        return self.hidden(x.dtype, self.v(x), self.op)

    def hidden(self, dt: T.DataType, v: int, emit: Any) -> int:
        wide = dt.bits == 64
        ut = self.u64 if wide else self.u32

        def zero() -> int:
            z = self.entry(S.Load, self.slot_ptr(ZERO_WORD, self.u64, at_entry=True), MemoryAccess.Aligned, 8,
                           t=self.u64)
            return z if wide else self.entry(S.UConvert, z, t=self.u32)
        z = self._entry(("zero", wide), zero)
        return emit(S.Bitcast, emit(S.BitwiseOr, emit(S.Bitcast, v, t=ut), z, t=ut), t=self.ty(dt))

    def s_Alloca(self, s: ir.Alloca) -> None:
        self.op(S.Store, self.local_var(s, self.ty(s.dtype)), self.c(s.dtype, 0))

    def s_LocalLoad(self, s: ir.LocalLoad) -> None:
        self.vals[s] = self.op(S.Load, self.local_var(s.var, self.ty(s.dtype)), t=self.ty(s.dtype))

    def s_LocalStore(self, s: ir.LocalStore) -> None:
        self.op(S.Store, self.local_var(s.var, self.ty(s.var.dtype)), self.v(s.value))

    def s_If(self, s: ir.If) -> None:
        if self.flattens():  # deeper than the driver nests right
            self.flat_if(s)
            return
        then, other, merge = self.m.id(), self.m.id(), self.m.id()
        cond = so.truth(self, s.cond.dtype, self.v(s.cond))  # before the merge: it must precede the branch
        self.op(S.SelectionMerge, merge, 0)
        self.op(S.BranchConditional, cond, then, other)
        for blk, lid in ((s.then, then), (s.else_, other)):
            self.label(lid)
            self.enter(s)
            self.block(blk)
            self.leave()
            self.branch(merge)
        self.label(merge)

    def open_loop(self) -> tuple[int, int, int]:
        """Opens a SPIR-V loop construct: its header block (declaring merge and continue targets), then the
        first block of its body, where emission goes on. Returns (header, continue, merge) ids."""
        header, first, cont, merge = (self.m.id() for _ in range(4))
        self.branch(header)
        self.label(header)
        self.op(S.LoopMerge, merge, cont, 0)
        self.branch(first)
        self.label(first)
        return header, cont, merge

    def loop(self, counter: int, lo: int, hi: int, step: int, body, ahead: int | None = None) -> None:
        """A counted loop `for i in [lo, hi) step step` (u64 ids, signed compare) as a SPIR-V loop construct;
        `body(i)` emits one iteration; `break` and `continue` inside reach this loop's merge and continue.
        With `ahead`, an iteration runs only while `i + ahead` is in range too (it covers several indices)."""
        self.op(S.Store, counter, lo)
        header, cont, merge = self.open_loop()
        i = self.op(S.Load, counter, t=self.u64)
        last = i if ahead is None else self.op(S.IAdd, i, ahead, t=self.u64)
        body_l = self.m.id()
        self.op(S.BranchConditional, self.op(S.SLessThan, last, hi, t=self.bool_t()), body_l, merge)
        self.label(body_l)
        self.tick()
        self.loops.append((cont, merge))
        body(i)
        self.loops.pop()
        self.branch(cont)
        self.label(cont)
        cur = self.op(S.Load, counter, t=self.u64)
        self.op(S.Store, counter, self.op(S.IAdd, cur, step, t=self.u64))
        self.branch(header)
        self.label(merge)
        self.tick()  # the header's last visit (its test ends the loop) counts towards the driver's limit too:
        # lavapipe cut a nest of short inner loops at 2^15 outer iterations, silently, when only bodies counted

    def s_RangeFor(self, s: ir.RangeFor) -> None:
        counter = self.fn.local(self.m.pointer(StorageClass.Function, self.u64))

        def body(i: int) -> None:
            self.wide[s.var] = i
            dt = s.var.dtype
            self.vals[s.var] = i if dt.bits == 64 else self.op(S.UConvert, i, t=self.ty(dt))
            self.enter(s)
            self.block(s.body)
            self.leave()
        self.loop(counter, self.index64(s.begin), self.index64(s.end), self.u64c(1), body)

    def s_While(self, s: ir.While) -> None:
        header, cont, merge = self.open_loop()
        self.tick()
        self.enter(s)
        self.loop_body(s.body, cont, merge)
        self.leave()
        self.branch(cont)
        self.label(cont)
        self.branch(header)
        self.label(merge)

    def tick(self) -> None:
        """On a driver with a loop limit (lavapipe ends an invocation's loops after 65535 iterations in all,
        silently), count every loop iteration and fail with check `LOOP_LIMIT` before the driver would cut."""
        limit = self.caps.loop_limit
        if not limit:
            return
        if self.budget is None:
            self.budget = self.fn.local(self.m.pointer(StorageClass.Function, self.u32), self.u32c(0))
        n = self.op(S.IAdd, self.op(S.Load, self.budget, t=self.u32), self.u32c(1), t=self.u32)
        self.op(S.Store, self.budget, n)
        over = self.op(S.UGreaterThanEqual, n, self.u32c(limit - 64), t=self.bool_t())
        ok, fail = self.m.id(), self.m.id()
        self.op(S.SelectionMerge, ok, 0)
        self.op(S.BranchConditional, over, fail, ok)
        self.label(fail)
        self.fail(LOOP_LIMIT, [])
        self.label(ok)

    def fail(self, check: int, words: list[int]) -> None:
        """Records failure `check` with `words` in the status (the first failure wins) and returns."""
        scope, sem = self._scope()
        prev = self.op(S.AtomicCompareExchange, self.slot_ptr(abi.STATUS_FLAG, self.u32), scope, sem, sem, self.u32c(1),
                       self.u32c(0), t=self.u32)
        rec, end = self.m.id(), self.m.id()
        won = self.op(S.IEqual, prev, self.u32c(0), t=self.bool_t())
        self.op(S.SelectionMerge, end, 0)
        self.op(S.BranchConditional, won, rec, end)
        self.label(rec)
        n = min(len(words), MAX_CHECK_ARGS)
        for k, w in enumerate([self.u64c(check), self.tid, self.u64c(n)] + words[:n]):
            self.op(S.Store, self.slot_ptr(abi.STATUS_CHECK + k, self.u64), w, MemoryAccess.Aligned, 8)
        self.branch(end)
        self.label(end)
        self.op(S.Return)
        self.done = True

    def jump(self, target: int) -> None:
        """`break` / `continue`: the rest of the block is never reached."""
        self.branch(target)

    def s_Return(self, s: ir.Return) -> None:
        for k, x in enumerate(s.values):
            p = self.slot_ptr(HEADER_WORDS + k, self.u64)
            self.op(S.Store, p, self.to_bits(x.dtype, self.v(x)), MemoryAccess.Aligned, 8)
        self.op(S.Return)
        self.done = True

    # ------------------------------------------------------------ memory
    def s_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        if s in self.vals:
            return
        if not s.indices:
            lin = self.u64c(0)
        else:
            lin = self.index64(s.indices[-1])
            for axis in range(len(s.indices) - 2, -1, -1):
                lin = self.op(S.IAdd, self.op(S.IMul, self.index64(s.indices[axis]), self.stride(s.buffer, axis),
                                              t=self.u64), lin, t=self.u64)
        if is_shared(self.k, s.buffer):  # an element of a workgroup array (`spirv_simt.py`)
            self.vals[s] = self.wg_ptr(s, lin)
            return
        off = self.op(S.IMul, lin, self.u64c(s.dtype.itemsize), t=self.u64)
        self.vals[s] = self.op(S.IAdd, self.ctx_word(("buf", s.buffer)), off, t=self.u64)

    def pointer(self, addr: int, pointee: int) -> int:
        return self.op(S.ConvertUToPtr, addr, t=self.psb(pointee))

    def s_GlobalLoad(self, s: ir.GlobalLoad) -> None:
        dt = s.dtype
        if isinstance(self.vals[s.ptr], WgPtr):
            self.vals[s] = self.wg_load(dt, self.vals[s.ptr], s.volatile)
            return
        mt = self.mem_ty(dt)
        access = MemoryAccess.Aligned | (MemoryAccess.Volatile if s.volatile else 0)
        raw = self.op(S.Load, self.pointer(self.vals[s.ptr], mt), access, dt.itemsize, t=mt)
        self.vals[s] = self.from_mem(dt, raw)

    def from_mem(self, dt: T.DataType, raw: int) -> int:
        if dt is T.u1:
            return self.op(S.INotEqual, raw, self.c(T.u8, 0), t=self.bool_t())
        if dt is T.f16:
            return so.f16_bits_to_f32(self, self.op(S.UConvert, raw, t=self.u32))
        return raw

    def to_mem(self, dt: T.DataType, v: int) -> int:
        if dt is T.u1:
            return so.select(self, self.ty(T.u8), v, self.c(T.u8, 1), self.c(T.u8, 0))
        if dt is T.f16:
            return self.op(S.UConvert, so.f32_to_f16_bits(self, v), t=self.ty(T.u16))
        return v

    def s_GlobalStore(self, s: ir.GlobalStore) -> None:
        dt = s.ptr.dtype
        if isinstance(self.vals[s.ptr], WgPtr):
            self.wg_store(dt, self.vals[s.ptr], self.v(s.value))
            return
        mt = self.mem_ty(dt)
        self.op(S.Store, self.pointer(self.vals[s.ptr], mt), self.to_mem(dt, self.v(s.value)),
                MemoryAccess.Aligned, dt.itemsize)

    # ------------------------------------------------------------ random numbers, thread slots
    def mix64(self, z: int) -> int:
        u = self.u64
        for shift, mul in abi.RNG_MIX:
            z = self.op(S.IMul, self.op(S.BitwiseXor, z, self.op(S.ShiftRightLogical, z, self.u64c(shift), t=u), t=u),
                        self.u64c(mul), t=u)
        last = self.op(S.ShiftRightLogical, z, self.u64c(abi.RNG_MIX_LAST_SHIFT), t=u)
        return self.op(S.BitwiseXor, z, last, t=u)

    def rng_reset(self) -> None:
        """Start of an iteration (or a serial task): counter 0, key from (launch key base, tid)."""
        if not any(isinstance(s, ir.RandomValue) for s in ir.walk(self.task.body)):
            return
        if self.rng is None:
            self.rng = (self.fn.local(self.m.pointer(StorageClass.Function, self.u64)),
                        self.fn.local(self.m.pointer(StorageClass.Function, self.u64)))
        ctr, key = self.rng
        self.op(S.Store, ctr, self.u64c(0))
        tid_mix = self.op(S.IMul, self.tid, self.u64c(abi.RNG_TID_MIX), t=self.u64)
        mixed = self.op(S.BitwiseXor, self.ctx_word(("rng", self.index)), tid_mix, t=self.u64)
        self.op(S.Store, key, self.mix64(mixed))

    def s_RandomValue(self, s: ir.RandomValue) -> None:
        u, dt = self.u64, s.dtype
        ctr_var, key_var = self.rng
        ctr = self.op(S.IAdd, self.op(S.Load, ctr_var, t=u), self.u64c(1), t=u)
        self.op(S.Store, ctr_var, ctr)
        key = self.op(S.Load, key_var, t=u)
        x = self.mix64(self.op(S.IAdd, key, self.op(S.IMul, ctr, self.u64c(abi.RNG_GOLDEN), t=u), t=u))
        if dt.is_float and dt.bits == 64:
            top = self.op(S.ShiftRightLogical, x, self.u64c(abi.RAND_F64_SHIFT), t=u)
            f = self.op(S.ConvertUToF, top, t=self.ty(dt))
            v = self.op(S.FMul, f, self.c(dt, abi.RAND_F64_SCALE), t=self.ty(dt))
        elif dt.is_float:
            f32 = self.ty(T.f32)
            top = self.op(S.ShiftRightLogical, x, self.u64c(abi.RAND_F32_SHIFT), t=u)
            f = self.op(S.ConvertUToF, self.op(S.UConvert, top, t=self.u32), t=f32)
            v = self.op(S.FMul, f, self.c(T.f32, abi.RAND_F32_SCALE), t=f32)
            if dt is T.f16:
                v = so.round_f16(self, v)
        elif dt is T.u1:
            v = self.op(S.INotEqual, x, self.u64c(0), t=self.bool_t())
        else:
            v = x if dt.bits == 64 else self.op(S.UConvert, x, t=self.ty(dt))
        self.vals[s] = v

    def s_ThreadSlot(self, s: ir.ThreadSlot) -> None:
        self.vals[s] = self.gid() if self.task.kind == "range" else self.u64c(0)

    # ------------------------------------------------------------ prints and checks
    def s_Print(self, s: ir.Print) -> None:
        values = [x for x in s.items if isinstance(x, ir.Value)]
        words = [self.to_bits(x.dtype, self.v(x)) for x in values]
        n = len(words)
        scope, sem = self._scope()
        need = n + abi.PRINT_HEAD
        pos32 = self.op(S.AtomicIAdd, self.slot_ptr(PRINTLEN_WORD, self.u32), scope, sem, self.u32c(need), t=self.u32)
        pos = self.op(S.UConvert, pos32, t=self.u64)
        end = self.op(S.IAdd, pos, self.u64c(need), t=self.u64)
        full = self.op(S.SGreaterThan, end, self.u64c(self.kg.print_words), t=self.bool_t())
        on_full, on_room, merge = self.m.id(), self.m.id(), self.m.id()
        self.op(S.SelectionMerge, merge, 0)
        self.op(S.BranchConditional, full, on_full, on_room)
        self.label(on_full)
        self.op(S.AtomicIAdd, self.slot_ptr(abi.STATUS_DROPPED, self.u32), scope, sem, self.u32c(1), t=self.u32)
        self.branch(merge)
        self.label(on_room)
        base = self.ctx_word(("print",))
        head = [self.u64c(self.kg.print_ids[s]), self.tid, self.u64c(n)]
        for k, w in enumerate(head + words):
            a = self.op(S.IAdd, base, self.op(S.IMul, self.op(S.IAdd, pos, self.u64c(k), t=self.u64), self.u64c(8),
                                              t=self.u64), t=self.u64)
            self.op(S.Store, self.pointer(a, self.u64), w, MemoryAccess.Aligned, 8)
        self.branch(merge)
        self.label(merge)

    def s_Check(self, s: ir.Check) -> None:
        ok, fail = self.m.id(), self.m.id()
        cond = so.truth(self, s.cond.dtype, self.v(s.cond))
        self.op(S.SelectionMerge, ok, 0)
        self.op(S.BranchConditional, cond, ok, fail)
        self.label(fail)
        self.fail(s.check, [self.to_bits(a.dtype, self.v(a)) for a in s.args])
        self.label(ok)

    # ------------------------------------------------------------ tasks
    def build(self) -> list[int]:
        if self.task.kind == "serial":
            self.rng_reset()
            self.block(self.task.body)
        else:
            self.range_task()
        if not self.done:
            self.op(S.Return)
        self.fn.end()
        m = self.m
        m.entry_point(ExecutionModel.GLCompute, self.fn.id, "main", tuple(self.interface))
        m.execution_mode(self.fn.id, ExecutionMode.LocalSize, self.local_size, 1, 1)
        if not self.fast:  # IEEE specials, subnormals and rounding as on the other tiers, where the device can
            used = m.float_widths()
            for cap, mode, width in execution_modes(self.caps.float_controls, used):
                m.capability(cap)
                m.execution_mode(self.fn.id, mode, width)
        return m.words()

    def range_task(self) -> None:
        t = self.task
        self.depth = 1  # the grid-stride loop
        self.block(t.prologue)
        lo, hi = self.index64(t.begin), self.index64(t.end)
        accs = self.start_reductions()
        start = self.op(S.IAdd, lo, self.gid(), t=self.u64)
        counter = self.fn.local(self.m.pointer(StorageClass.Function, self.u64))

        def body(i: int) -> None:
            self.set_index(i)
            self.rng_reset()
            self.block(t.body)
        self.tid = self.gid()  # until an index is set (a loop-limit failure before the body names the invocation)
        k = self.unroll()
        if k > 1:
            self.unrolled_loop(counter, start, hi, self.nthreads(), k)
            start = self.op(S.Load, counter, t=self.u64)
        self.loop(counter, start, hi, self.nthreads(), body)
        self.flush_reductions(accs)

    def set_index(self, i: int) -> None:
        """The range task's loop variable is index `i` (u64) from here on."""
        t = self.task
        self.tid = i
        self.wide[t.var] = i
        dt = t.var.dtype
        self.vals[t.var] = i if dt.bits == 64 else self.op(S.UConvert, i, t=self.ty(dt))

    def unroll(self) -> int:
        """Indices per iteration of the grid-stride loop: `UNROLL` where the body is short (`UNROLL_BUDGET`
        statements, no transcendental) and every statement may run interleaved with the same statement of other
        indices (no checks, prints, random numbers, heap rows, loops or exits), else 1."""
        if UNROLL <= 1 or self.task.kind != "range" or (self.caps.per_index_grid and not self.found):
            return 1  # (an invocation that runs one index has nothing to interleave: lavapipe's W1 0.7x slower)
        body = list(ir.walk(self.task.body))
        if len(body) > UNROLL_BUDGET or any(isinstance(s, ir.OpStmt) and s.op in so.LONG_OPS for s in body):
            return 1  # a long body is not bound by its loads, and k copies of it would take drivers long to compile
        return UNROLL if all(isinstance(s, _INTERLEAVABLE) for s in body) else 1

    def unrolled_loop(self, counter: int, start: int, hi: int, step: int, k: int) -> None:
        """The grid-stride loop over indices i, i + step, ..., i + (k-1) step at once while the last is in
        range (the plain loop runs what is left from `counter`). The body is emitted statement by statement
        across the k indices, each with its own values and locals: a valid interleaving of independent
        parallel iterations, which puts the k indices' loads in flight together."""
        def lanes(i: int) -> None:
            base = (self.vals, self.wide, self.vars)
            states = []
            for c in range(k):
                self.vals, self.wide, self.vars = dict(base[0]), dict(base[1]), dict(base[2])
                ic = i if c == 0 else self.op(S.IAdd, i, self.op(S.IMul, step, self.u64c(c), t=self.u64),
                                              t=self.u64)
                self.set_index(ic)
                states.append((self.vals, self.wide, self.vars, ic))
            for s in self.task.body.stmts:
                for vals, wide, local_vars, tid in states:
                    self.vals, self.wide, self.vars, self.tid = vals, wide, local_vars, tid
                    self.stmt(s)
            self.vals, self.wide, self.vars = base
            self.tid = self.gid()
        span = self.entry(S.IMul, step, self.u64c(k - 1), t=self.u64)
        self.loop(counter, start, hi, self.entry(S.IMul, step, self.u64c(k), t=self.u64), lanes, ahead=span)


__all__ = ["LOCAL_SIZE", "Caps", "SpirvKernel", "SpirvTask", "build_spirv"]
