"""`lower_adstacks`: adstack statements become plain IR over a per-launch heap (DESIGN §5).

Runs before the offload pass on a kernel whose `stacks` the reverse pass filled. Appends one buffer
`adstack.meta` (kind `adstack_meta`, i64: per stack `[capacity, offset, stride, step]`, written by the
launch from the sizer's results) and one heap per element dtype (kind `adstack`, 1-D). Slot `c` of stack `k`
of thread `t` is at `t * stride + offset + c * step`: the CPU tiers give each thread a contiguous slice
(`stride` = the slots a thread needs, `step` 1), the GPU tiers interleave the threads (`stride` 1, `step` =
the heap's rows, `offset` scaled by them), so a warp's pushes and pops touch adjacent words. A stack is
`capacity` slots long. Every push checks the capacity first: an overflow records check `adstack overflow`
(kind `adstack`, args: the count and the capacity) in the status buffer and stops the thread, so no
write goes past the slice, on every tier, with or without `debug`.

    adstack_alloc #0                 %cnt = alloca i64 ; %base = slot * meta[2] + meta[1] ; %cap = meta[0]
    adstack_push #0, %v              %c = load %cnt ; check %c < %cap ; heap[%base + %c * meta[3]] = %v ;
                                     %cnt = %c + 1
    %t = adstack_load_top #0 : f32   %t = heap[%base + (%cnt - 1) * meta[3]]
    adstack_pop #0                   %cnt = %cnt - 1
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qd import ir
from qd.ops import Op
from qd.types.dtypes import DataType, i64, u1

META_WORDS = 4  # per stack: capacity, offset, the stride between threads, the step between slots

OVERFLOW_KIND = "adstack"


@dataclass
class _Stack:
    count: ir.Alloca
    base: ir.Value
    cap: ir.Value
    step: ir.Value
    heap: int


class _Lowering:
    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.meta = len(k.buffers)
        dts: list[DataType] = []
        for st in k.stacks:
            if st.dtype not in dts:
                dts.append(st.dtype)
        self.heap_of = {dt: self.meta + 1 + j for j, dt in enumerate(dts)}
        meta = ir.BufferDecl(kind="adstack_meta", dtype=i64, ndim=1, name="adstack.meta")
        self.buffers = k.buffers + (meta,) + tuple(
            ir.BufferDecl(kind="adstack", dtype=dt, ndim=1, name=f"adstack.{dt}") for dt in dts)
        self.checks = list(k.checks)
        self.check_of: dict[int, int] = {}
        self.live: dict[int, _Stack] = {}
        self.renamed: dict = {}  # AdStackLoadTop -> the GlobalLoad replacing it

    def block(self, b: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for s in b.stmts:
            fn = getattr(self, "s_" + type(s).__name__, None)
            if fn is not None:
                fn(s, out)
                continue
            kids = {n: self.block(getattr(s, n)) for n in ir.block_fields(type(s))}
            out.append(replace(s, **kids) if kids else s)
        return ir.Block(tuple(out))

    def meta_word(self, k: int, w: int, out: list[ir.Stmt], loc: ir.SrcLoc | None) -> ir.Value:
        idx = _emit(out, ir.Const(dtype=i64, value=k * META_WORDS + w, loc=loc))
        ptr = _emit(out, ir.GlobalPtr(buffer=self.meta, indices=(idx,), dtype=i64, loc=loc))
        return _emit(out, ir.GlobalLoad(ptr=ptr, dtype=i64, loc=loc))

    def s_AdStackAlloc(self, s: ir.AdStackAlloc, out: list[ir.Stmt]) -> None:
        loc = s.loc
        cap, off, stride, step = (self.meta_word(s.stack, w, out, loc) for w in range(META_WORDS))
        slot = _emit(out, ir.ThreadSlot(dtype=i64, loc=loc))
        base = _emit(out, ir.OpStmt(op=Op.ADD, args=(_emit(out, ir.OpStmt(op=Op.MUL, args=(slot, stride), dtype=i64,
                                                                          loc=loc)), off), dtype=i64, loc=loc))
        count = _emit(out, ir.Alloca(dtype=i64, loc=loc))
        out.append(ir.LocalStore(var=count, value=_emit(out, ir.Const(dtype=i64, value=0, loc=loc)), loc=loc))
        self.live[s.stack] = _Stack(count, base, cap, step, self.heap_of[self.k.stacks[s.stack].dtype])

    def slot_ptr(self, st: _Stack, c: ir.Value, out: list[ir.Stmt], loc: ir.SrcLoc | None, dt: DataType) -> ir.Value:
        scaled = _emit(out, ir.OpStmt(op=Op.MUL, args=(c, st.step), dtype=i64, loc=loc))
        at = _emit(out, ir.OpStmt(op=Op.ADD, args=(st.base, scaled), dtype=i64, loc=loc))
        return _emit(out, ir.GlobalPtr(buffer=st.heap, indices=(at,), dtype=dt, loc=loc))

    def s_AdStackPush(self, s: ir.AdStackPush, out: list[ir.Stmt]) -> None:
        st, loc = self.live[s.stack], s.loc
        c = _emit(out, ir.LocalLoad(var=st.count, dtype=i64, loc=loc))
        ok = _emit(out, ir.OpStmt(op=Op.CMP_LT, args=(c, st.cap), dtype=u1, loc=loc))
        out.append(ir.Check(cond=ok, check=self.overflow_check(s.stack), args=(c, st.cap), loc=loc))
        out.append(ir.GlobalStore(ptr=self.slot_ptr(st, c, out, loc, s.value.dtype), value=s.value, loc=loc))
        one = _emit(out, ir.Const(dtype=i64, value=1, loc=loc))
        out.append(ir.LocalStore(var=st.count, value=_emit(out, ir.OpStmt(op=Op.ADD, args=(c, one), dtype=i64,
                                                                           loc=loc)), loc=loc))

    def top(self, st: _Stack, out: list[ir.Stmt], loc: ir.SrcLoc | None) -> ir.Value:
        c = _emit(out, ir.LocalLoad(var=st.count, dtype=i64, loc=loc))
        one = _emit(out, ir.Const(dtype=i64, value=1, loc=loc))
        return _emit(out, ir.OpStmt(op=Op.SUB, args=(c, one), dtype=i64, loc=loc))

    def s_AdStackLoadTop(self, s: ir.AdStackLoadTop, out: list[ir.Stmt]) -> None:
        st = self.live[s.stack]
        ptr = self.slot_ptr(st, self.top(st, out, s.loc), out, s.loc, s.dtype)
        load = _emit(out, ir.GlobalLoad(ptr=ptr, dtype=s.dtype, loc=s.loc))
        self.renamed[s] = load

    def s_AdStackPop(self, s: ir.AdStackPop, out: list[ir.Stmt]) -> None:
        st = self.live[s.stack]
        out.append(ir.LocalStore(var=st.count, value=self.top(st, out, s.loc), loc=s.loc))

    def overflow_check(self, k: int) -> int:
        if k not in self.check_of:
            self.check_of[k] = len(self.checks)
            decl = self.k.stacks[k]
            self.checks.append(ir.CheckDecl(OVERFLOW_KIND, f"adstack {k} ({decl.name})", decl.loc))
        return self.check_of[k]


def lower_adstacks(k: ir.KernelIR) -> ir.KernelIR:
    """The kernel with its adstack statements lowered (see the module docstring); a kernel without
    stacks is returned unchanged."""
    if not k.stacks:
        return k
    low = _Lowering(k)
    body = ir.substitute(low.block(k.body), low.renamed)
    return replace(k, buffers=low.buffers, checks=tuple(low.checks), body=body)


def _emit(out: list[ir.Stmt], s: ir.Stmt) -> ir.Value:
    out.append(s)
    return s


__all__ = ["lower_adstacks", "META_WORDS", "OVERFLOW_KIND"]
