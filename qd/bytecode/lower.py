"""Lowers an offloaded `KernelIR` to the interpreter's register bytecode.

Every IR value gets a register; constants, scalar arguments, ndarray shapes and strides are
*launch-invariant* registers filled on the host before the launch (the register template), so
the bytecode never spends an instruction on them. Structured control flow becomes jumps; each
instruction keeps the `SrcLoc` of its statement (the line table the debugger steps through).

Before/after, for `for i in range(n): s += x[i]` inside a thread:

    %4 = local_load %s ; %5 = global_ptr @0 [%i] ; %6 = global_load %5 ; %7 = add f32 %4, %6
    ->  MOV r4 r2 ; LD_F32 r6 @0 [r9] ; ADD_F32 r2 r4 r6      (the store into %s is fused)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from qd import ir
from qd.base.abi import register_bits
from qd.bytecode.opcodes import OPC, class_of, member_of
from qd.types import dtypes as T


@dataclass
class TaskCode:
    kind: str
    code: np.ndarray
    prologue: np.ndarray
    var: int = 0
    begin: int = 0
    end: int = 0
    locs: list = field(default_factory=list)  # SrcLoc per instruction of `code`
    # Fewest indices worth spreading over threads: bodies with inner loops are heavy enough for any.
    min_parallel: int = 4096


@dataclass
class KernelCode:
    """Everything the interpreter needs for one kernel instance."""

    nregs: int
    consts: list  # (reg, uint64 bits)
    arg_regs: list  # (reg, arg index, dtype)
    shape_regs: list  # (reg, buffer, axis)
    stride_regs: list  # (reg, buffer, axis)
    tasks: list
    operands: np.ndarray
    prints: list  # per print id: (items (str or DataType), format specs of the values)
    check_args: list  # per check id: dtypes of the recorded args
    rets: tuple


class _Emitter:
    """Accumulates one code array with its line table and patchable jumps."""

    def __init__(self) -> None:
        self.words: list[int] = []
        self.locs: list = []
        self.last_label = 0

    def emit(self, name: str, d: int = 0, a: int = 0, b: int = 0, c: int = 0, loc=None) -> int:
        self.words += (OPC[name], d, a, b, c)
        self.locs.append(loc)
        return len(self.locs) - 1

    def here(self) -> int:
        return len(self.locs)

    def label(self) -> int:
        """A jump target here: no instruction may be fused across it."""
        self.last_label = len(self.locs)
        return self.last_label

    def retarget(self, src: int, dst: int, window: int = 8) -> bool:
        """Makes the instruction that defined register `src` write `dst` instead, when it lies in
        the current basic block and no later instruction names either register (any field that
        equals them counts, so immediates only make this conservative)."""
        w = self.words
        n = len(self.locs)
        for k in range(n - 1, max(self.last_label, n - window) - 1, -1):
            if w[k * 5 + 1] == src and w[k * 5] not in _NO_RETARGET:
                later = w[k * 5 + 5:]
                if any(later[j] in (src, dst) for j in range(len(later)) if j % 5):
                    return False
                w[k * 5 + 1] = dst
                return True
            if dst in w[k * 5 + 1: k * 5 + 5] or src in w[k * 5 + 2: k * 5 + 5]:
                return False
        return False

    def patch(self, at: int, slot: int, target: int) -> None:
        self.words[at * 5 + 1 + slot] = target

    def array(self) -> np.ndarray:
        return np.array(self.words + [OPC["HALT"], 0, 0, 0, 0], dtype=np.int32)


class Lowerer:
    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.reg: dict = {}
        self.nregs = 0
        self.consts: dict = {}
        self.const_list: list = []
        self.arg_regs: list = []
        self.shape_regs: dict = {}
        self.stride_regs: dict = {}
        self.operands: list[int] = []
        self.prints: list = []
        self.check_args: list = [None] * len(k.checks)
        self.uses = _count_uses(k)
        self.out: _Emitter = _Emitter()
        self.loops: list = []
        self.aliased: set = set()  # LocalLoads that may share their Alloca's register
        self.no_zero: set = set()  # Allocas stored before any read: no zero-initialisation
        self.summaries = _Summaries()  # reads and stores inside each statement (`_aliasable_loads`)

    # ------------------------------------------------------------ registers
    def new_reg(self) -> int:
        self.nregs += 1
        return self.nregs - 1

    def const(self, dtype: T.DataType, value) -> int:
        key = (class_of(dtype), register_bits(dtype, value))
        if key not in self.consts:
            r = self.new_reg()
            self.consts[key] = r
            self.const_list.append((r, key[1]))
        return self.consts[key]

    def r(self, v: ir.Value) -> int:
        if v not in self.reg:
            if isinstance(v, ir.Const):
                self.reg[v] = self.const(v.dtype, v.value)
            elif isinstance(v, ir.ArgLoad):
                self.reg[v] = self.new_reg()
                self.arg_regs.append((self.reg[v], v.index, v.dtype))
            elif isinstance(v, ir.ExternalShape):
                self.reg[v] = self.shape_reg(v.buffer, v.axis)
            else:
                self.reg[v] = self.new_reg()
        return self.reg[v]

    def shape_reg(self, buf: int, axis: int) -> int:
        if (buf, axis) not in self.shape_regs:
            self.shape_regs[(buf, axis)] = self.new_reg()
        return self.shape_regs[(buf, axis)]

    def stride_reg(self, buf: int, axis: int) -> int:
        decl = self.k.buffers[buf]
        if decl.kind != "ndarray":
            return self.const(T.i64, _const_strides(decl)[axis])
        if (buf, axis) not in self.stride_regs:
            self.stride_regs[(buf, axis)] = self.new_reg()
        return self.stride_regs[(buf, axis)]

    # ------------------------------------------------------------ blocks
    def block(self, b: ir.Block) -> None:
        info = [self.summaries.of(s) for s in b.stmts]
        self.aliased |= _aliasable_loads(b, info)
        self.no_zero |= _stored_before_read(b, info)
        for s in b.stmts:
            getattr(self, "s_" + type(s).__name__)(s)

    def s_Const(self, s: ir.Const) -> None:
        self.r(s)

    s_ArgLoad = s_Const
    s_ExternalShape = s_Const

    def s_OpStmt(self, s: ir.OpStmt) -> None:
        from qd.bytecode.ops_lowering import lower_op

        lower_op(self, s)

    def s_Alloca(self, s: ir.Alloca) -> None:
        if s in self.no_zero:
            self.r(s)
            return
        self.out.emit("MOV", self.r(s), self.const(s.dtype, 0), loc=s.loc)

    def s_LocalLoad(self, s: ir.LocalLoad) -> None:
        if s in self.aliased:  # read the local's own register: no store can intervene
            self.reg[s] = self.r(s.var)
            return
        self.out.emit("MOV", self.r(s), self.r(s.var), loc=s.loc)

    def s_LocalStore(self, s: ir.LocalStore) -> None:
        dst, src = self.r(s.var), self.r(s.value)
        if (self.uses.get(s.value, 0) == 1 and s.value not in self.aliased and _is_computed(s.value)
                and self.out.retarget(src, dst)):
            self.reg[s.value] = dst
            return
        self.out.emit("MOV", dst, src, loc=s.loc)

    def s_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        decl = self.k.buffers[s.buffer]
        idx = [self.r(i) for i in s.indices]
        n = len(idx)
        if n == 0:
            self.reg[s] = self.const(T.i64, 0)
            return
        if n == 1 and (decl.kind != "ndarray" or decl.total_ndim == 1):
            self.reg[s] = idx[0]
            return
        acc = idx[-1]
        for axis in range(n - 2, -1, -1):
            out = self.new_reg()
            self.out.emit("MULADD_I64", out, idx[axis], self.stride_reg(s.buffer, axis), acc, loc=s.loc)
            acc = out
        self.reg[s] = acc

    def s_GlobalLoad(self, s: ir.GlobalLoad) -> None:
        self.out.emit(f"LD_{s.dtype.name.upper()}", self.r(s), s.ptr.buffer, self.r(s.ptr), loc=s.loc)

    def s_GlobalStore(self, s: ir.GlobalStore) -> None:
        self.out.emit(f"ST_{s.ptr.dtype.name.upper()}", 0, s.ptr.buffer, self.r(s.ptr), self.r(s.value),
                      loc=s.loc)

    def s_AtomicRMW(self, s: ir.AtomicRMW) -> None:
        name = f"AT_{s.op.name}_{s.dtype.name.upper()}"
        if name not in OPC:
            from qd.errors import QuadrantsTypeError

            raise QuadrantsTypeError(f"{s.loc}: atomic {s.op.value} is not supported on {s.dtype}")
        self.out.emit(name, self.r(s), s.ptr.buffer, self.r(s.ptr), self.r(s.value), loc=s.loc)

    def s_AtomicSwap(self, s: ir.AtomicSwap) -> None:
        d = self.r(s)
        if s.expected is None:
            self.out.emit(f"XCHG_{s.dtype.name.upper()}", d, s.ptr.buffer, self.r(s.ptr), self.r(s.value), loc=s.loc)
            return
        self.out.emit("MOV", d, self.r(s.value), loc=s.loc)  # CAS reads `desired` from its destination register
        self.out.emit(f"CAS_{s.dtype.name.upper()}", d, s.ptr.buffer, self.r(s.ptr), self.r(s.expected), loc=s.loc)

    def s_ThreadSlot(self, s: ir.ThreadSlot) -> None:
        self.out.emit("SLOT", self.r(s), loc=s.loc)  # always i64 (the verifier checks)

    def s_RandomValue(self, s: ir.RandomValue) -> None:
        d = self.r(s)
        if s.dtype.is_float:
            self.out.emit("RAND_F64" if s.dtype.bits == 64 else "RAND_F32", d, loc=s.loc)
            if s.dtype is T.f16:
                self.out.emit("ROUND_F16", d, d, loc=s.loc)
            return
        self.out.emit("RAND_U64", d, loc=s.loc)
        self.out.emit(f"CAST_U_{s.dtype.name.upper()}", d, d, loc=s.loc)

    def s_RangeFor(self, s: ir.RangeFor) -> None:
        var, end = self.r(s.var), self.r(s.end)
        self.out.emit("MOV", var, self.r(s.begin), loc=s.loc)
        self.out.label()
        test = self.out.emit("FOR_TEST", var, end, 0, loc=s.loc)
        self.loops.append(([], []))
        self.block(s.body)
        breaks, conts = self.loops.pop()
        nxt = self.out.emit("FOR_NEXT", var, test, loc=s.loc)
        for at in conts:
            self.out.patch(at, 1, nxt)
        end_label = self.out.label()
        for at in breaks + [test]:
            self.out.patch(at, 2 if at == test else 1, end_label)

    def s_While(self, s: ir.While) -> None:
        top = self.out.label()
        self.loops.append(([], []))
        self.block(s.body)
        breaks, conts = self.loops.pop()
        self.out.emit("JMP", 0, top, loc=s.loc)
        for at in conts:
            self.out.patch(at, 1, top)
        end_label = self.out.label()
        for at in breaks:
            self.out.patch(at, 1, end_label)

    def s_Break(self, s: ir.Break) -> None:
        self.loops[-1][0].append(self.out.emit("JMP", loc=s.loc))

    def s_Continue(self, s: ir.Continue) -> None:
        self.loops[-1][1].append(self.out.emit("JMP", loc=s.loc))

    def s_If(self, s: ir.If) -> None:
        jz = self.out.emit("JZ", 0, self.cond(s.cond), 0, loc=s.loc)
        self.block(s.then)
        if s.else_.stmts:
            jend = self.out.emit("JMP", loc=s.loc)
            self.out.patch(jz, 2, self.out.label())
            self.block(s.else_)
            self.out.patch(jend, 1, self.out.label())
        else:
            self.out.patch(jz, 2, self.out.label())

    def cond(self, v: ir.Value) -> int:
        if v.dtype.is_float:
            out = self.new_reg()
            self.out.emit(f"CMP_NE_{class_of(v.dtype)}", out, self.r(v), self.const(v.dtype, 0))
            return out
        return self.r(v)

    def s_Return(self, s: ir.Return) -> None:
        for slot, v in enumerate(s.values):
            self.out.emit("RET", self.r(v), slot, loc=s.loc)
        self.out.emit("HALT_RET", loc=s.loc)

    def operand_list(self, values) -> tuple[int, int]:
        start = len(self.operands)
        self.operands += [self.r(v) for v in values]
        return start, len(values)

    def s_Print(self, s: ir.Print) -> None:
        values = [x for x in s.items if isinstance(x, ir.Value)]
        start, n = self.operand_list(values)
        self.prints.append((tuple(x if isinstance(x, str) else x.dtype for x in s.items), s.fmts))
        self.out.emit("PRINT", 0, len(self.prints) - 1, start, n, loc=s.loc)

    def s_Check(self, s: ir.Check) -> None:
        start, n = self.operand_list(s.args)
        self.check_args[s.check] = tuple(a.dtype for a in s.args)
        self.out.emit("CHECK", self.cond(s.cond), s.check, start, n, loc=s.loc)

    # ------------------------------------------------------------ tasks
    def task(self, t: ir.Task) -> TaskCode:
        self.out = _Emitter()
        prologue = np.zeros(5, np.int32)
        var = begin = end = 0
        if t.kind == "range":
            self.block(t.prologue)
            begin, end = self.r(t.begin), self.r(t.end)
            prologue = self.out.array()
            self.out = _Emitter()
            var = self.r(t.var)
        # `continue` in a range task's body ends this iteration: a jump to the final HALT.
        self.loops.append(([], []))
        self.block(t.body)
        _, conts = self.loops.pop()
        halt = self.out.label()
        for at in conts:
            self.out.patch(at, 1, halt)
        heavy = any(isinstance(x, (ir.RangeFor, ir.While)) for x in ir.walk(t.body))
        return TaskCode(t.kind, self.out.array(), prologue, var, begin, end, self.out.locs,
                        2 if heavy else 4096)


# Opcodes whose `d` word is not a destination register.
_NO_RETARGET = {OPC[n] for n in ("RET", "CHECK", "PRINT", "JMP", "JZ", "JNZ", "FOR_TEST", "FOR_NEXT", "HALT",
                                 "HALT_RET")} | {v for k, v in OPC.items() if k.startswith(("ST_", "CAS_"))}
# (a CAS reads `desired` from its `d` register, which the MOV before it wrote: it keeps that register)


def _is_computed(v: ir.Value) -> bool:
    return isinstance(v, (ir.OpStmt, ir.GlobalLoad, ir.AtomicRMW, ir.AtomicSwap, ir.RandomValue, ir.LocalLoad))


class _Summaries:
    """Values read and Allocas stored anywhere inside a statement (nested blocks included). A compound
    statement's is made once per kernel from its statements' (every enclosing block asks for it: walking the
    nested blocks again for each made Genesis' 86k-statement collision kernel lower in 4.4 s)."""

    def __init__(self) -> None:
        self.memo: dict = {}

    def of(self, s: ir.Stmt) -> tuple[set, set]:
        got = self.memo.get(s)
        if got is not None:
            return got
        reads, stores = set(s.operands()), set()
        if isinstance(s, ir.LocalStore):
            stores.add(s.var)
        kids = s.blocks()
        for b in kids:
            for t in b.stmts:
                r, w = self.of(t)
                reads |= r
                stores |= w
        if kids:
            self.memo[s] = (reads, stores)
        return reads, stores


def _aliasable_loads(b: ir.Block, info: list) -> set:
    """LocalLoads of `b` whose value is dead before the next store to their Alloca (`info`: each statement's
    `_Summaries`).

    Such a load can read the Alloca's register directly instead of copying it. A store in the
    statement of the last use is allowed only for a plain LocalStore (one instruction, which reads
    its operands before writing)."""
    loads = {s for s in b.stmts if isinstance(s, ir.LocalLoad)}
    if not loads:
        return set()
    load_vars = {s.var for s in loads}
    last_read: dict = {}
    stored_at: dict = {}
    for j, (reads, stores) in enumerate(info):
        for v in loads & reads:
            last_read[v] = j
        for v in load_vars & stores:
            stored_at.setdefault(v, []).append(j)
    out = set()
    for i, s in enumerate(b.stmts):
        if not isinstance(s, ir.LocalLoad):
            continue
        last = last_read.get(s, i)
        at = stored_at.get(s.var, ())
        k = bisect.bisect_right(at, i)
        if k < len(at) and at[k] < last:  # a store between the load and its last use
            continue
        if last > i and s.var in info[last][1] and not isinstance(b.stmts[last], ir.LocalStore):
            continue
        out.add(s)
    return out


def _stored_before_read(b: ir.Block, info: list) -> set:
    """Allocas of `b` whose first reference after the Alloca is a plain store in `b` itself."""
    out: set = set()
    pending: set = set()  # Allocas of `b` not referenced yet
    for s, (reads, stores) in zip(b.stmts, info):
        if pending:
            if isinstance(s, ir.LocalStore) and s.var in pending and s.value is not s.var:
                out.add(s.var)
                pending.discard(s.var)
            if len(reads) + len(stores) < len(pending):
                pending.difference_update(reads, stores)
            else:
                pending = {v for v in pending if v not in reads and v not in stores}
        if isinstance(s, ir.Alloca):
            pending.add(s)
    return out


def _const_strides(decl: ir.BufferDecl) -> list[int]:
    dims = list(decl.shape) + list(decl.elem_shape)
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def _count_uses(k: ir.KernelIR) -> dict:
    uses: dict = {}
    for s in ir.walk_kernel(k):
        for v in s.operands():
            uses[v] = uses.get(v, 0) + 1
    for t in k.tasks or ():
        for v in (t.begin, t.end):
            if v is not None:
                uses[v] = uses.get(v, 0) + 2
    return uses


def lower_kernel(k: ir.KernelIR) -> KernelCode:
    """Offloaded kernel -> KernelCode."""
    assert k.tasks is not None, "lower_kernel needs an offloaded kernel"
    lw = Lowerer(k)
    tasks = [lw.task(t) for t in k.tasks]
    return KernelCode(lw.nregs, lw.const_list, lw.arg_regs, list(lw.shape_regs.items()),
                      list(lw.stride_regs.items()), tasks, np.array(lw.operands or [0], np.int32),
                      lw.prints, lw.check_args, k.rets)


__all__ = ["lower_kernel", "KernelCode", "TaskCode", "member_of"]
