"""SPMD on the CPU (issue 15): a range task's body with SIMD lanes across the parallel loop's iterations.

LLVM's loop vectorizer widens innermost loops only. A body whose inner loop runs a per-element number of times
around latency-bound math (reverse mode through `for _ in range(a[i]): v = f(sin(v))`) stays scalar: one
element's recurrence at a time, each `sinf` waiting for the last. Here such a body is written once more with
`LANES` elements in flight, as ISPC does: every value is a vector (lane l runs index i0 + l), and control flow
is a mask:

- the chunk loop runs i0 = lo, lo + LANES, ... with the lanes past `hi` masked off;
- an inner `for` whose bounds differ per lane loops while any lane is active, each lane's own condition
  joining the mask; an `if` runs each side under its part of the mask (skipped when no lane takes it);
- loads and stores are masked: contiguous (`llvm.masked.load/store`) where the index is the parallel loop's
  variable on the last axis with the other indices the same in every lane, else gathers and scatters;
- locals are vectors written under the mask; a recognized reduction accumulates per lane and the lanes are
  combined in order at the end; any other atomic runs lane by lane;
- `ThreadSlot` is `slot * LANES + lane`: each lane has its own adstack row (`AdStackPlan.lanes` sizes the
  heap for `threads * LANES` rows);
- a failed check records the first failing lane's index and arguments, and stops the body.

Math calls are LLVM's vector intrinsics, which `qd/jit/vecmath.py` maps to glibc's libmvec. Only under
`fast_math=True` (lanes change the order of a reduction's partial sums, and libmvec's results are within the
op table's ulps, not libm's bits), only for bodies of the shape above, and only with the statements, ops and
dtypes this module lowers: `qd/jit/lanes.py` decides (`wanted`); everything else keeps the scalar body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llvmlite import ir as L

from qd import ir
from qd.codegen.tables import MAX_CHECK_ARGS
from qd.jit.lanes import LANES, Unsupported
from qd.jit.llvm_fn import PTR, FnLowering, i64c, to_bits
from qd.jit.llvm_ops import I1, I8, OpCtx, const, lower_op, mem_type, reg_type
from qd.jit.targets import F32, F64, I32, I64
from qd.ops import Op
from qd.types import dtypes as T

if TYPE_CHECKING:
    from qd.jit.llvm import ModuleGen


def _vty(t: L.Type) -> L.VectorType:
    return L.VectorType(t, LANES)


def _mangle(t: L.Type) -> str:
    if isinstance(t, L.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, L.PointerType):
        return "p0"
    if t == F32:
        return "f32"
    if t == F64:
        return "f64"
    return f"i{t.width}"


class _VecOpCtx(OpCtx):
    def truth(self, v: L.Value) -> L.Value:
        t = v.type.element if isinstance(v.type, L.VectorType) else v.type
        if t == I1:
            return v
        if isinstance(t, L.IntType):
            return self.b.icmp_unsigned("!=", v, L.Constant(v.type, 0))
        return self.b.fcmp_unordered("!=", v, L.Constant(v.type, 0.0))


class SpmdLowering(FnLowering):
    """Lowers a range task's body with `LANES` lanes (statement handlers `v_*`); the prologue and the
    reductions' hoisted pointers go through the scalar handlers of `FnLowering`."""

    def __init__(self, mg: ModuleGen, fn: L.Function) -> None:
        super().__init__(mg, fn, False)
        self.vc = _VecOpCtx(self.b, mg.target, mg.fast_math)
        self.vv: dict = {}  # IR value -> its vector
        self.mask: L.Value | None = None
        self.base_index: L.Value | None = None  # i0, the first lane's index of the task variable
        self.task_var: ir.LoopVar | None = None
        self.lane_ids = L.Constant(_vty(I64), list(range(LANES)))

    # ------------------------------------------------------------ helpers
    def intrinsic(self, name: str, ret: L.Type, params: list[L.Type]) -> L.Function:
        fn = self.b.module.globals.get(name)
        if fn is None:
            fn = L.Function(self.b.module, L.FunctionType(ret, params), name)
        return fn

    def splat(self, x: L.Value) -> L.Value:
        vt = _vty(x.type)
        one = self.b.insert_element(L.Constant(vt, L.Undefined), x, L.Constant(I32, 0))
        return self.b.shuffle_vector(one, L.Constant(vt, L.Undefined), L.Constant(_vty(I32), [0] * LANES))

    def any(self, m: L.Value) -> L.Value:
        return self.b.call(self.intrinsic(f"llvm.vector.reduce.or.v{LANES}i1", I1, [m.type]), [m])

    def vec(self, x: ir.Value) -> L.Value:
        if x in self.vv:
            return self.vv[x]
        return self.splat(FnLowering.v(self, x))

    def ivec(self, x: ir.Value) -> L.Value:
        """`x` as i64 lanes (sign- or zero-extended as `index64` does)."""
        v = self.vec(x)
        if x.dtype.bits == 64:
            return v
        return (self.b.sext if x.dtype.is_signed and x.dtype is not T.u1 else self.b.zext)(v, _vty(I64))

    def where(self, new: L.Value, old: L.Value) -> L.Value:
        return self.b.select(self.mask, new, old)

    # ------------------------------------------------------------ blocks
    def block(self, blk: ir.Block) -> None:
        for s in blk.stmts:
            handler = getattr(self, "v_" + type(s).__name__, None)
            if handler is None:
                raise Unsupported(type(s).__name__)
            handler(s)

    def v_Const(self, s: ir.Stmt) -> None:
        pass

    v_ArgLoad = v_ExternalShape = v_Const

    def v_OpStmt(self, s: ir.OpStmt) -> None:
        if s in self.vals:  # hoisted (a reduction's pointer index)
            return
        args = [self.vec(a) for a in s.args]
        if s.op is Op.CAST:
            self.vv[s] = self.cast(s.args[0].dtype, s.dtype, args[0])
        else:
            self.vv[s] = lower_op(self.vc, s.op, [a.dtype for a in s.args], s.dtype, args)

    def cast(self, src: T.DataType, dst: T.DataType, x: L.Value) -> L.Value:
        b = self.b
        if src is dst:
            return x
        if dst is T.u1:
            return self.vc.truth(x)
        ty = _vty(reg_type(dst))
        if dst.is_int:
            if src.is_float:
                wide = b.fptosi(x, _vty(I64))
                return b.trunc(wide, ty) if dst.bits < 64 else wide
            sw, dw = (1 if src is T.u1 else src.bits), dst.bits
            if sw == dw:
                return x
            if sw > dw:
                return b.trunc(x, ty)
            return (b.sext if src.is_signed and src is not T.u1 else b.zext)(x, ty)
        if src.is_int:
            return (b.sitofp if src.is_signed and src is not T.u1 else b.uitofp)(x, ty)
        return b.fpext(x, ty) if dst.bits > src.bits else b.fptrunc(x, ty)

    # ------------------------------------------------------------ locals
    def v_Alloca(self, s: ir.Alloca) -> None:
        if s not in self.vals:
            self.vals[s] = self.eb.alloca(_vty(reg_type(s.dtype)))
        old = self.b.load(self.vals[s], typ=_vty(reg_type(s.dtype)))
        self.b.store(self.where(L.Constant(old.type, None), old), self.vals[s])

    def v_LocalLoad(self, s: ir.LocalLoad) -> None:
        self.vv[s] = self.b.load(self.vals[s.var], typ=_vty(reg_type(s.dtype)))

    def v_LocalStore(self, s: ir.LocalStore) -> None:
        ptr = self.vals[s.var]
        old = self.b.load(ptr, typ=_vty(reg_type(s.var.dtype)))
        self.b.store(self.where(self.vec(s.value), old), ptr)

    # ------------------------------------------------------------ memory
    def v_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        if s in self.vals or s in self.vv:  # a reduction's pointer (scalar), or lowered already
            return
        b = self.b
        idx = list(s.indices)
        last = idx[-1] if idx else None
        if last is self.task_var and all(i not in self.vv for i in idx[:-1]):
            lin = self.base_index  # contiguous: lane l at base + l
            for axis in range(len(idx) - 2, -1, -1):
                lin = b.add(b.mul(self.index64(idx[axis]), self.stride(s.buffer, axis)), lin)
            self.vv[s] = ("contiguous", b.gep(self.base(s.buffer), [lin], inbounds=True,
                                              source_etype=mem_type(s.dtype)))
            return
        if not idx:
            vlin = L.Constant(_vty(I64), None)
        else:
            vlin = self.ivec(last)
            for axis in range(len(idx) - 2, -1, -1):
                vlin = b.add(b.mul(self.ivec(idx[axis]), self.splat(self.stride(s.buffer, axis))), vlin)
        ptrs = b.gep(self.base(s.buffer), [vlin], inbounds=True, source_etype=mem_type(s.dtype))
        ptrs.type = _vty(PTR)  # (llvmlite types a vector GEP as a scalar pointer)
        self.vv[s] = ("lanes", ptrs)

    def v_GlobalLoad(self, s: ir.GlobalLoad) -> None:
        kind, ptr = self.vv[s.ptr]
        mt = _vty(mem_type(s.dtype))
        align = L.Constant(I32, s.dtype.itemsize)
        if kind == "contiguous":
            fn = self.intrinsic(f"llvm.masked.load.{_mangle(mt)}.p0", mt, [PTR, I32, self.mask.type, mt])
        else:
            fn = self.intrinsic(f"llvm.masked.gather.{_mangle(mt)}.v{LANES}p0", mt,
                                [_vty(PTR), I32, self.mask.type, mt])
        raw = self.b.call(fn, [ptr, align, self.mask, L.Constant(mt, None)])
        self.vv[s] = self.b.icmp_unsigned("!=", raw, L.Constant(mt, 0)) if s.dtype is T.u1 else raw

    def v_GlobalStore(self, s: ir.GlobalStore) -> None:
        kind, ptr = self.vv[s.ptr]
        dt = s.ptr.dtype
        v = self.vec(s.value)
        if dt is T.u1:
            v = self.b.zext(v, _vty(I8))
        mt = v.type
        align = L.Constant(I32, dt.itemsize)
        if kind == "contiguous":
            fn = self.intrinsic(f"llvm.masked.store.{_mangle(mt)}.p0", L.VoidType(), [mt, PTR, I32, self.mask.type])
        else:
            fn = self.intrinsic(f"llvm.masked.scatter.{_mangle(mt)}.v{LANES}p0", L.VoidType(),
                                [mt, _vty(PTR), I32, self.mask.type])
        self.b.call(fn, [v, ptr, align, self.mask])

    def lane_pointers(self, p: ir.GlobalPtr) -> L.Value:
        kind, ptr = self.vv[p]
        if kind == "lanes":
            return ptr
        off = self.b.mul(self.lane_ids, L.Constant(_vty(I64), p.dtype.itemsize))
        base = self.splat(self.b.ptrtoint(ptr, I64))
        return self.b.inttoptr(self.b.add(base, off), _vty(PTR))

    # ------------------------------------------------------------ atomics
    def v_AtomicRMW(self, s: ir.AtomicRMW) -> None:
        b = self.b
        if s in self.reductions:
            red, acc = self.reductions[s]
            cur = b.load(acc, typ=_vty(reg_type(s.dtype)))
            b.store(self.where(self.combine(red.op, s.dtype, cur, self.vec(s.value)), cur), acc)
            return
        # any other atomic: lane by lane, in lane order, each where its lane is active
        ptrs, vals = self.lane_pointers(s.ptr), self.vec(s.value)
        vt = _vty(reg_type(s.dtype))
        out = self.eb.alloca(vt)
        b.store(L.Constant(vt, None), out)
        for lane in range(LANES):
            li = L.Constant(I32, lane)
            with b.if_then(b.extract_element(self.mask, li)):
                old = self.atomic(s.op, s.dtype, b.extract_element(ptrs, li), b.extract_element(vals, li))
                b.store(b.insert_element(b.load(out, typ=vt), old, li), out)
        self.vv[s] = b.load(out, typ=vt)

    def accumulator(self, dt: T.DataType, identity: float) -> L.Value:
        """A reduction's accumulator per lane: an entry alloca of `LANES` values holding `identity`."""
        acc = self.eb.alloca(_vty(reg_type(dt)), name="acc")
        self.b.store(self.splat(const(dt, identity)), acc)
        return acc

    def v_ThreadSlot(self, s: ir.ThreadSlot) -> None:
        b = self.b
        self.vv[s] = b.add(self.splat(b.mul(self.field("slot"), i64c(LANES))), self.lane_ids)

    # ------------------------------------------------------------ control flow
    def v_RangeFor(self, s: ir.RangeFor) -> None:
        b = self.b
        lo, hi = self.ivec(s.begin), self.ivec(s.end)
        outer = self.mask
        pre = b.block
        header, body, exit_ = (self.fn.append_basic_block(n) for n in ("vfor", "vfor_body", "vfor_end"))
        b.branch(header)
        b.position_at_end(header)
        j = b.phi(_vty(I64))
        active = b.and_(outer, b.icmp_signed("<", j, hi))
        b.cbranch(self.any(active), body, exit_)
        b.position_at_end(body)
        self.mask = active
        self.wide[s.var] = j
        self.vv[s.var] = j if s.var.dtype.bits == 64 else b.trunc(j, _vty(reg_type(s.var.dtype)))
        self.block(s.body)
        nxt = b.add(j, L.Constant(_vty(I64), 1))
        j.add_incoming(lo, pre)
        j.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(exit_)
        self.mask = outer

    def v_If(self, s: ir.If) -> None:
        b = self.b
        cond = self.vc.truth(self.vec(s.cond))
        outer = self.mask
        for blk, m in ((s.then, b.and_(outer, cond)), (s.else_, b.and_(outer, b.not_(cond)))):
            if not blk.stmts:
                continue
            run, done = self.fn.append_basic_block("vif"), self.fn.append_basic_block("vif_end")
            b.cbranch(self.any(m), run, done)
            b.position_at_end(run)
            self.mask = m
            self.block(blk)
            b.branch(done)
            b.position_at_end(done)
        self.mask = outer

    def v_Check(self, s: ir.Check) -> None:
        """Lanes failing the check: the first one's index and arguments are recorded, and the body stops."""
        b = self.b
        fail = b.and_(self.mask, b.not_(self.vc.truth(self.vec(s.cond))))
        bad, ok = self.fn.append_basic_block("vcheck_fail"), self.fn.append_basic_block("vcheck_ok")
        b.cbranch(self.any(fail), bad, ok)
        b.position_at_end(bad)
        bits = b.bitcast(fail, L.IntType(LANES))
        lane = b.call(self.intrinsic(f"llvm.cttz.i{LANES}", L.IntType(LANES), [L.IntType(LANES), I1]),
                      [bits, L.Constant(I1, 1)])
        li = b.zext(lane, I32)
        words = [to_bits(b, x.dtype, b.extract_element(self.vec(x), li)) for x in s.args]
        status = self.field("status")
        tid = b.extract_element(self.wide[self.task_var], li)
        pair = b.cmpxchg(status, i64c(0), i64c(1), "seq_cst", "monotonic")
        with b.if_then(b.extract_value(pair, 1)):
            n = min(len(words), MAX_CHECK_ARGS)
            for k, w in enumerate([i64c(s.check), tid, i64c(n)] + words[:n]):
                b.store(w, self.word(b, status, 1 + k), align=8)
        b.ret(L.Constant(I32, 1))
        b.position_at_end(ok)


def build_body(mg: ModuleGen, n: int, t: ir.Task, name: str) -> None:
    """Function `name`, `int32 (Ctx*, lo, hi)`, running range task `t`'s indices [lo, hi) in lanes."""
    fn = mg.function(name, I32, [PTR, I64, I64])
    f = SpmdLowering(mg, fn)
    FnLowering.block(f, t.prologue)
    accs = mg.start_reductions(f, t)  # (the scalar handlers hoist the cells' pointers; `accumulator` is per lane)
    b = f.b
    pre = b.block
    header, body, exit_ = (fn.append_basic_block(x) for x in ("chunk", "lanes", "done"))
    b.branch(header)
    b.position_at_end(header)
    i0 = b.phi(I64, name="i0")
    b.cbranch(b.icmp_signed("<", i0, fn.args[2]), body, exit_)
    b.position_at_end(body)
    iv = b.add(f.splat(i0), f.lane_ids)
    f.mask = b.icmp_signed("<", iv, f.splat(fn.args[2]))
    f.base_index, f.task_var = i0, t.var
    f.wide[t.var] = iv
    f.vv[t.var] = iv if t.var.dtype.bits == 64 else b.trunc(iv, _vty(reg_type(t.var.dtype)))
    f.block(t.body)
    nxt = b.add(i0, i64c(LANES))
    i0.add_incoming(fn.args[1], pre)
    i0.add_incoming(nxt, b.block)
    b.branch(header)
    b.position_at_end(exit_)
    _flush_reductions(f, accs)
    b.ret(L.Constant(I32, 0))
    f.finish_entry()


def _flush_reductions(f: SpmdLowering, accs: list) -> None:
    """The lanes' partial results combined in lane order, then one atomic per cell."""
    b = f.b
    for red, acc, ptr in accs:
        vt = _vty(reg_type(red.dtype))
        lanes = b.load(acc, typ=vt)
        total: Any = b.extract_element(lanes, L.Constant(I32, 0))
        # (each lane's accumulator holds its partial result: a float `-=` one the negated sum, an int one the sum)
        both = Op.ADD if red.op is Op.SUB else red.op
        for lane in range(1, LANES):
            total = f.combine(both, red.dtype, total, b.extract_element(lanes, L.Constant(I32, lane)))
        op = Op.ADD if red.op is Op.SUB and red.dtype.is_float else red.op
        f.mg.target.reduce_atomic(f, op, red.dtype, ptr, total, False)


__all__ = ["SpmdLowering", "build_body"]
