"""Statement lowering of the LLVM code generator: one IR block structure into one LLVM function.

`FnLowering` owns an `llvm.Function` and its builders: the entry block holds allocas and
launch-invariant values (ctx fields, buffer bases, shapes, strides, arguments), emitted on first
use (on a target without `hoist_launch_values`, all but the ctx fields are made at each use instead);
local matrices indexed at run time are arrays where `qd/codegen/local_arrays.py` plans them;
statements are emitted in order at the current position. Structured control flow becomes blocks; after a terminator (`break`, `continue`, `return`, a failed check) emission continues in
a fresh block without predecessors, which LLVM deletes. Memory, atomics, random numbers, prints
and checks follow the interpreter (`qd/_interp.pyx`, `qd/bytecode/opcodes.py`) word for word.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir as L

from qd import ir
from qd.base import abi
from qd.base.abi import CTX_FIELDS, MAX_CHECK_ARGS, MAX_NDIM
from qd.codegen import local_arrays
from qd.codegen.emitter import CodegenBase
from qd.jit.llvm_ops import I1, I8, OpCtx, const, fminmax, lower_op, mem_type, reg_type
from qd.jit.targets import F32, F64, I32, I64
from qd.ops import Op
from qd.types import dtypes as T

if TYPE_CHECKING:
    from qd.jit.llvm import ModuleGen

PTR = L.PointerType()
# The native launch context (`abi.CTX_LAYOUT`): a pointer or an i64 per field.
CTX_TYPE = L.LiteralStructType([PTR if p else I64 for p in abi.CTX_POINTERS])
_INT_RMW = {Op.ADD: "add", Op.SUB: "sub", Op.BIT_AND: "and", Op.BIT_OR: "or", Op.BIT_XOR: "xor"}


def i64c(v: int) -> L.Constant:
    return L.Constant(I64, v & 0xFFFFFFFFFFFFFFFF)


def to_bits(b: L.IRBuilder, dt: T.DataType, v: L.Value) -> L.Value:
    """Register bits (i64) of `v`: ints sign/zero-extended, f32/f16 as f32 bits, f64 bits."""
    if dt.is_float:
        if dt.bits == 64:
            return b.bitcast(v, I64)
        return b.zext(b.bitcast(v, I32), I64)
    if dt.bits == 64:
        return v
    return b.sext(v, I64) if dt.is_signed else b.zext(v, I64)


def from_bits(b: L.IRBuilder, dt: T.DataType, v: L.Value) -> L.Value:
    """The value of `dt` whose register bits are `v` (i64)."""
    if dt.is_float:
        return b.bitcast(v, F64) if dt.bits == 64 else b.bitcast(b.trunc(v, I32), F32)
    return b.trunc(v, reg_type(dt))


def mix64(b: L.IRBuilder, z: L.Value) -> L.Value:
    """The splitmix64 finalizer (`abi.mix64`)."""
    for shift, mul in abi.RNG_MIX:
        z = b.mul(b.xor(z, b.lshr(z, i64c(shift))), i64c(mul))
    return b.xor(z, b.lshr(z, i64c(abi.RNG_MIX_LAST_SHIFT)))


class FnLowering(CodegenBase):
    """Lowers statements into one function whose first parameter is the `Ctx*` (the shared skeleton:
    `qd/codegen/emitter.py`)."""

    TIER = "the LLVM code generator"

    def __init__(self, mg: ModuleGen, fn: L.Function, uses_random: bool) -> None:
        self.mg, self.k, self.fn = mg, mg.k, fn
        self.ctx = fn.args[0]
        self.eb = L.IRBuilder(fn.append_basic_block("entry"))
        self.start = fn.append_basic_block("start")
        self.b = L.IRBuilder(self.start)
        self.c = OpCtx(self.b, mg.target, mg.fast_math)
        self.vals: dict = {}
        self.wide: dict = {}  # loop variables -> their i64 induction value
        self.cache: dict = {}
        self.hoist = mg.target.hoist_launch_values
        self.loops: list[tuple[L.Block, L.Block | None]] = []
        self.tid: L.Value = i64c(0)
        self.reductions: dict = {}  # AtomicRMW -> (Reduction, accumulator alloca)
        self.on_return: Callable[[], None] = lambda: None
        self.arrays = local_arrays.Plan()  # none until `plan_local_arrays`
        self.array_allocas: dict[int, L.Value] = {}
        if uses_random:
            self.rng_ctr = self.eb.alloca(I64, name="rng_ctr")
            self.rng_key = self.eb.alloca(I64, name="rng_key")

    # ------------------------------------------------------------ entry values
    def _entry(self, key, make: Callable[[L.IRBuilder], L.Value]) -> L.Value:
        if not self.hoist and key[0] != "ctx":  # made at the use (`Target.hoist_launch_values`)
            return make(self.b)
        if key not in self.cache:
            self.cache[key] = make(self.eb)
        return self.cache[key]

    def field(self, name: str) -> L.Value:
        i = CTX_FIELDS.index(name)

        def make(eb: L.IRBuilder) -> L.Value:
            p = eb.gep(self.ctx, [L.Constant(I32, 0), L.Constant(I32, i)], inbounds=True,
                       source_etype=CTX_TYPE)
            return eb.load(p, typ=CTX_TYPE.elements[i], name=name)
        return self._entry(("ctx", name), make)

    def word(self, eb: L.IRBuilder, base: L.Value, index: int, ty: L.Type = I64) -> L.Value:
        return eb.gep(base, [i64c(index)], inbounds=True, source_etype=ty)

    def shape(self, buf: int, axis: int) -> L.Value:
        return self._entry(("shape", buf, axis), lambda eb: eb.load(
            self.word(eb, self.field("shapes"), buf * MAX_NDIM + axis), typ=I64, align=8))

    def base(self, buf: int) -> L.Value:
        decl = self.k.buffers[buf]
        if decl.kind == "shared":  # a block-shared array: the target's own (`Target.shared_base`)
            return self._entry(("buf", buf), lambda eb: self.mg.target.shared_base(
                self.fn.module, self.k, buf, mem_type(decl.dtype)))
        ty = L.PointerType(addrspace=self.mg.target.global_addrspace)
        return self._entry(("buf", buf), lambda eb: eb.load(
            self.word(eb, self.field("bufs"), buf, PTR), typ=ty, align=8, name=f"buf{buf}"))

    def index_const(self, n: int) -> L.Value:
        return i64c(n)

    def ndarray_stride(self, buf: int, axis: int) -> L.Value:
        decl = self.k.buffers[buf]

        def make(eb: L.IRBuilder) -> L.Value:
            acc: L.Value = i64c(1)
            for a in range(axis + 1, decl.total_ndim):
                d = self.shape(buf, a)
                d = eb.select(eb.icmp_signed("==", d, i64c(0)), i64c(1), d)
                acc = eb.mul(acc, d)
            return acc
        return self._entry(("stride", buf, axis), make)

    def accumulator(self, dt: T.DataType, identity: float) -> L.Value:
        """A reduction's accumulator: an entry alloca holding `identity`."""
        acc = self.eb.alloca(reg_type(dt), name="acc")
        self.b.store(const(dt, identity), acc)
        return acc

    def finish_entry(self) -> None:
        self.eb.branch(self.start)

    # ------------------------------------------------------------ values
    def const_value(self, x: ir.Const) -> L.Value:
        return const(x.dtype, x.value)

    def arg_value(self, x: ir.ArgLoad) -> L.Value:
        return self._entry(("arg", x.index, x.dtype.name), lambda eb: from_bits(
            eb, x.dtype, eb.load(self.word(eb, self.field("args"), x.index), typ=I64, align=8)))

    def shape_value(self, x: ir.ExternalShape) -> L.Value:
        sh = self.shape(x.buffer, x.axis)
        return self._entry(("eshape", x.buffer, x.axis, x.dtype.name),
                           lambda eb: sh if x.dtype.bits == 64 else eb.trunc(sh, reg_type(x.dtype)))

    def widen(self, x: ir.Value) -> L.Value:
        v = self.v(x)
        if x.dtype.bits == 64:
            return v
        return self.b.sext(v, I64) if x.dtype.is_signed else self.b.zext(v, I64)

    def dead(self) -> None:
        """Continue emitting after a terminator, in a block nothing jumps to."""
        self.b.position_at_end(self.fn.append_basic_block("dead"))

    # ------------------------------------------------------------ statements
    def lower_op(self, s: ir.OpStmt, args: list) -> L.Value:
        return lower_op(self.c, s.op, [a.dtype for a in s.args], s.dtype, args)

    # ------------------------------------------------------------ locals (and local matrices in arrays)
    def plan_local_arrays(self, *blocks: ir.Block) -> None:
        """Keeps the local matrices that `blocks` index at run time in arrays (`qd/codegen/local_arrays.py`)."""
        self.arrays = local_arrays.plan(*blocks)

    def array(self, n: int) -> L.Value:
        """Planned array `n`: one entry alloca."""
        if n not in self.array_allocas:
            dtype, length = self.arrays.arrays[n]
            self.array_allocas[n] = self.eb.alloca(L.ArrayType(reg_type(dtype), length), name=f"mat{n}")
        return self.array_allocas[n]

    def array_at(self, b: L.IRBuilder, n: int, pos: L.Value) -> L.Value:
        dtype, length = self.arrays.arrays[n]
        arr = self.array(n)
        # (llvmlite's typed pointers, which a process importing numba may switch on, type the GEP themselves)
        etype = L.ArrayType(reg_type(dtype), length) if arr.type.is_opaque else None
        return b.gep(arr, [i64c(0), pos], inbounds=True, source_etype=etype)

    def entry_at(self, place: local_arrays.Place, i: L.Value) -> L.Value:
        """The address of entry `i` (an i64 in range) of a chain lying at `place`."""
        b = self.b
        pos = i if place.stride == 1 else b.mul(i, i64c(place.stride))
        return self.array_at(b, place.array, pos if place.base == 0 else b.add(pos, i64c(place.base)))

    def s_Alloca(self, s: ir.Alloca) -> None:
        if s not in self.vals:
            slot = self.arrays.slots.get(s)
            self.vals[s] = self.eb.alloca(reg_type(s.dtype)) if slot is None else \
                self.array_at(self.eb, slot[0], i64c(slot[1]))
        self.b.store(const(s.dtype, 0), self.vals[s])

    def s_OpStmt(self, s: ir.OpStmt) -> None:
        if s in self.arrays.skip:  # inside a chain read through its array
            return
        r = self.arrays.reads.get(s)
        if r is None or s in self.vals:
            return super().s_OpStmt(s)
        b, last = self.b, i64c(r.n - 1)
        i = self.index64(r.index)
        i = b.select(b.icmp_unsigned("<", i, last), i, last)  # the chain's default: the last entry
        self.vals[s] = b.load(self.entry_at(r.place, i), typ=reg_type(s.dtype))

    def indexed_write(self, s: ir.If, w: local_arrays.Write) -> None:
        """The run of Ifs starting at `s` as one: block 0 on the entries the index names, when it is in range."""
        b = self.b
        i = self.index64(w.index)
        then, merge = (self.fn.append_basic_block(n) for n in ("at", "endat"))
        b.cbranch(b.icmp_unsigned("<", i, i64c(w.n)), then, merge)
        b.position_at_end(then)
        saved = {a: self.vals.get(a) for a in w.places}
        for a, place in w.places.items():
            self.vals[a] = self.entry_at(place, i)
        self.block(s.then)
        for a, v in saved.items():
            if v is None:
                del self.vals[a]
            else:
                self.vals[a] = v
        self.b.branch(merge)
        self.b.position_at_end(merge)

    def s_LocalLoad(self, s: ir.LocalLoad) -> None:
        self.vals[s] = self.b.load(self.vals[s.var], typ=reg_type(s.dtype))

    def s_LocalStore(self, s: ir.LocalStore) -> None:
        self.b.store(self.v(s.value), self.vals[s.var])

    def s_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        if s in self.vals:
            return
        b = self.b
        if not s.indices:
            lin: L.Value = i64c(0)
        else:
            lin = self.index64(s.indices[-1])
            for axis in range(len(s.indices) - 2, -1, -1):
                lin = b.add(b.mul(self.index64(s.indices[axis]), self.stride(s.buffer, axis)), lin)
        self.vals[s] = b.gep(self.base(s.buffer), [lin], inbounds=True, source_etype=mem_type(s.dtype))

    def s_GlobalLoad(self, s: ir.GlobalLoad) -> None:
        b, dt = self.b, s.dtype
        if s.volatile:  # a relaxed atomic load: LLVM neither hoists nor merges it
            raw = b.load_atomic(self.vals[s.ptr], "monotonic", dt.itemsize, typ=mem_type(dt))
        else:
            raw = b.load(self.vals[s.ptr], typ=mem_type(dt), align=dt.itemsize)
        self.vals[s] = self.from_mem(dt, raw)

    def from_mem(self, dt: T.DataType, raw: L.Value) -> L.Value:
        if dt is T.u1:
            return self.b.icmp_unsigned("!=", raw, L.Constant(I8, 0))
        if dt is T.f16:
            return self.mg.target.f16_from_bits(self.b, raw)
        return raw

    def to_mem(self, dt: T.DataType, v: L.Value) -> L.Value:
        if dt is T.u1:
            return self.b.zext(v, I8)
        if dt is T.f16:
            return self.mg.target.f16_to_bits(self.b, v)
        return v

    def s_GlobalStore(self, s: ir.GlobalStore) -> None:
        dt = s.ptr.dtype
        self.b.store(self.to_mem(dt, self.v(s.value)), self.vals[s.ptr], align=dt.itemsize)

    # ------------------------------------------------------------ atomics
    def s_AtomicRMW(self, s: ir.AtomicRMW) -> None:
        if s in self.reductions:
            red, acc = self.reductions[s]
            cur = self.b.load(acc, typ=reg_type(s.dtype))
            self.b.store(self.combine(red.op, s.dtype, cur, self.v(s.value)), acc)
            return
        self.vals[s] = self.atomic(s.op, s.dtype, self.vals[s.ptr], self.v(s.value))

    def s_AtomicSwap(self, s: ir.AtomicSwap) -> None:
        """Exchange (`atomicrmw xchg`, a float as its bits) or compare-and-swap (`cmpxchg`); the old value."""
        b, dt, order = self.b, s.dtype, self.mg.target.atomic_order
        ptr, v = self.vals[s.ptr], self.v(s.value)
        if s.expected is not None:
            pair = b.cmpxchg(ptr, self.v(s.expected), v, order, "monotonic")
            self.vals[s] = b.extract_value(pair, 0)
            return
        if dt.is_float:
            ity = L.IntType(8 * dt.itemsize)
            self.vals[s] = b.bitcast(b.atomic_rmw("xchg", ptr, b.bitcast(v, ity), order), reg_type(dt))
        else:
            self.vals[s] = b.atomic_rmw("xchg", ptr, v, order)

    def combine(self, op: Op, dt: T.DataType, acc: L.Value, v: L.Value) -> L.Value:
        """The accumulator update of a reduction (sub accumulates by subtraction from -0.0 / 0)."""
        if dt.is_float and op is Op.SUB:
            r = self.b.fsub(acc, v, flags=self.c.fast)
            return self.c.round_f16(r) if dt is T.f16 else r
        if op is Op.SUB:
            op = Op.ADD
        return lower_op(self.c, op, [dt, dt], dt, [acc, v])

    def atomic(self, op: Op, dt: T.DataType, ptr: L.Value, v: L.Value) -> L.Value:
        """`*ptr = op(*ptr, v)` atomically (seq_cst); returns the old value."""
        b = self.b
        if dt is T.u1 or (dt.is_float and op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)):
            from qd.errors import QuadrantsTypeError

            raise QuadrantsTypeError(f"atomic {op.value} is not supported on {dt}")
        if op is Op.MUL:  # no atomicrmw for it: a CAS loop, wrapping for ints
            return self.cas_loop(dt, ptr, lambda old: self.c.round_f16(b.fmul(old, v)) if dt is T.f16
                                 else (b.fmul if dt.is_float else b.mul)(old, v))
        if dt.is_int:
            name = _INT_RMW.get(op) or {Op.MIN: "min", Op.MAX: "max"}[op]
            if not dt.is_signed and op in (Op.MIN, Op.MAX):
                name = "u" + name
            return b.atomic_rmw(name, ptr, v, self.mg.target.atomic_order)
        flushes = dt is T.f32 and self.mg.target.f32_atomic_add_flushes and not self.c.fast
        if dt is not T.f16 and op in (Op.ADD, Op.SUB) and not flushes:
            return b.atomic_rmw("fadd" if op is Op.ADD else "fsub", ptr, v, self.mg.target.atomic_order)

        def update(old: L.Value) -> L.Value:
            if op in (Op.MIN, Op.MAX):
                r = fminmax(b, op is Op.MIN, old, v)
            else:
                r = (b.fadd if op is Op.ADD else b.fsub)(old, v)
            return self.c.round_f16(r) if dt is T.f16 else r
        return self.cas_loop(dt, ptr, update)

    def cas_loop(self, dt: T.DataType, ptr: L.Value, update: Callable[[L.Value], L.Value]) -> L.Value:
        """A compare-and-swap loop on the bits of `*ptr` (floats, f16, int mul); returns the old value."""
        b = self.b
        ity = L.IntType(8 * dt.itemsize)
        init = b.load_atomic(ptr, "monotonic", dt.itemsize, typ=ity)
        pre = b.block
        loop, done = self.fn.append_basic_block("cas"), self.fn.append_basic_block("cas_done")
        b.branch(loop)
        b.position_at_end(loop)
        bits = b.phi(ity)
        old = self.from_mem(dt, bits) if dt is T.f16 else b.bitcast(bits, reg_type(dt))
        new = update(old)
        nbits = self.to_mem(dt, new) if dt is T.f16 else b.bitcast(new, ity)
        pair = b.cmpxchg(ptr, bits, nbits, self.mg.target.atomic_order, "monotonic")
        seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
        bits.add_incoming(init, pre)
        bits.add_incoming(seen, loop)
        b.cbranch(ok, done, loop)
        b.position_at_end(done)
        return old

    # ------------------------------------------------------------ random numbers
    def rng_reset(self) -> None:
        """Start of an iteration (or a serial task): counter 0, key from (rng_base, tid)."""
        if not hasattr(self, "rng_ctr"):
            return
        b = self.b
        b.store(i64c(0), self.rng_ctr)
        key = mix64(b, b.xor(self.field("rng_base"), b.mul(self.tid, i64c(abi.RNG_TID_MIX))))
        b.store(key, self.rng_key)

    def s_Simt(self, s: ir.Simt) -> None:
        """A `qd.simt` operation: the target's lowering (`Target.simt`); a barrier has no value."""
        v = self.mg.target.simt(self.b, s, [self.v(a) for a in s.args])
        self.vals[s] = v if v is not None else L.Constant(reg_type(s.dtype), 0)

    def s_ThreadSlot(self, s: ir.ThreadSlot) -> None:
        self.vals[s] = self.field("slot")  # always i64 (the verifier checks)

    def s_RandomValue(self, s: ir.RandomValue) -> None:
        b, dt = self.b, s.dtype
        ctr = b.add(b.load(self.rng_ctr, typ=I64), i64c(1))
        b.store(ctr, self.rng_ctr)
        x = mix64(b, b.add(b.load(self.rng_key, typ=I64), b.mul(ctr, i64c(abi.RNG_GOLDEN))))
        if dt.is_float and dt.bits == 64:
            v = b.fmul(b.uitofp(b.lshr(x, i64c(abi.RAND_F64_SHIFT)), F64), L.Constant(F64, abi.RAND_F64_SCALE))
        elif dt.is_float:
            v = b.fmul(b.uitofp(b.lshr(x, i64c(abi.RAND_F32_SHIFT)), F32), L.Constant(F32, abi.RAND_F32_SCALE))
            if dt is T.f16:
                v = self.c.round_f16(v)
        elif dt is T.u1:
            v = b.icmp_unsigned("!=", x, i64c(0))
        else:
            v = b.trunc(x, reg_type(dt))
        self.vals[s] = v

    # ------------------------------------------------------------ control flow
    def s_RangeFor(self, s: ir.RangeFor) -> None:
        b = self.b
        lo, hi = self.index64(s.begin), self.index64(s.end)
        pre = b.block
        header, body, latch, exit_ = (self.fn.append_basic_block(n)
                                      for n in ("for", "for_body", "for_next", "for_end"))
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64)
        b.cbranch(b.icmp_signed("<", i, hi), body, exit_)
        b.position_at_end(body)
        self.wide[s.var] = i
        self.vals[s.var] = b.trunc(i, reg_type(s.var.dtype))
        self.loop_body(s.body, latch, exit_)
        b.branch(latch)
        b.position_at_end(latch)
        nxt = b.add(i, i64c(1))
        b.branch(header)
        i.add_incoming(lo, pre)
        i.add_incoming(nxt, latch)
        b.position_at_end(exit_)

    def s_While(self, s: ir.While) -> None:
        top, exit_ = self.fn.append_basic_block("while"), self.fn.append_basic_block("while_end")
        self.b.branch(top)
        self.b.position_at_end(top)
        self.loop_body(s.body, top, exit_)
        self.b.branch(top)
        self.b.position_at_end(exit_)

    def jump(self, target: L.Block) -> None:
        """`break` / `continue`: a branch, then emission goes on in a dead block."""
        self.b.branch(target)
        self.dead()

    def s_If(self, s: ir.If) -> None:
        if s in self.arrays.skip:  # a later If of a run written as one
            return
        w = self.arrays.writes.get(s)
        if w is not None:
            return self.indexed_write(s, w)
        b = self.b
        then, other, merge = (self.fn.append_basic_block(n) for n in ("then", "else", "endif"))
        b.cbranch(self.c.truth(self.v(s.cond)), then, other)
        for blk, bb in ((s.then, then), (s.else_, other)):
            b.position_at_end(bb)
            self.block(blk)
            b.branch(merge)
        b.position_at_end(merge)

    def s_Return(self, s: ir.Return) -> None:
        b = self.b
        for slot, x in enumerate(s.values):
            b.store(to_bits(b, x.dtype, self.v(x)), self.word(b, self.field("rets"), slot), align=8)
        self.on_return()
        b.ret(L.Constant(I32, abi.RC_RETURNED))
        self.dead()

    # ------------------------------------------------------------ prints and checks
    def s_Print(self, s: ir.Print) -> None:
        b = self.b
        values = [x for x in s.items if isinstance(x, ir.Value)]
        words = [to_bits(b, x.dtype, self.v(x)) for x in values]
        n = len(words)
        pos = b.atomic_rmw("add", self.field("printlen"), i64c(n + abi.PRINT_HEAD), "seq_cst")
        full = b.icmp_signed(">", b.add(pos, i64c(n + abi.PRINT_HEAD)), self.field("printcap"))
        with b.if_else(full) as (on_full, on_room):
            with on_full:
                b.atomic_rmw("add", self.word(b, self.field("status"), abi.STATUS_DROPPED), i64c(1), "seq_cst")
            with on_room:
                buf = self.field("printbuf")
                head = [i64c(self.mg.print_ids[s]), self.tid, i64c(n)]
                for k, w in enumerate(head + words):
                    b.store(w, b.gep(buf, [b.add(pos, i64c(k))], inbounds=True, source_etype=I64), align=8)

    def s_Check(self, s: ir.Check) -> None:
        b = self.b
        fail, ok = self.fn.append_basic_block("check_fail"), self.fn.append_basic_block("check_ok")
        b.cbranch(self.c.truth(self.v(s.cond)), ok, fail)
        b.position_at_end(fail)
        words = [to_bits(b, x.dtype, self.v(x)) for x in s.args]
        status = self.field("status")
        pair = b.cmpxchg(self.word(b, status, abi.STATUS_FLAG), i64c(0), i64c(1), "seq_cst", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            n = min(len(words), MAX_CHECK_ARGS)
            for k, w in enumerate([i64c(s.check), self.tid, i64c(n)] + words[:n]):
                b.store(w, self.word(b, status, abi.STATUS_CHECK + k), align=8)
        b.ret(L.Constant(I32, abi.RC_FAILED))
        b.position_at_end(ok)


__all__ = ["CTX_TYPE", "I1", "PTR", "FnLowering", "from_bits", "i64c", "mix64", "to_bits"]
