"""The counting replay: sizes the adstacks of `while` loops in reverse mode (DESIGN §5).

A `while` loop's trip count is unknown until it runs, so no `SizeExpr` over the data can bound it.
Before the reverse launch, qd runs this *counting kernel*: the forward kernel's replay (global stores,
prints and checks dropped, atomics turned into loads, exactly what the reverse kernel's own replays
compute from the same data) in which every `while` loop that has adstacks counts its iterations and,
after the loop, raises `counts[w]` to that count with an atomic max. The counts are what the stacks
need: a stack is drained before its loop runs again, so the largest single run is its size. The
sizer reads them as `Counted(w)` nodes. The cost is one forward pass without stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from qd import ir
from qd.ops import Op
from qd.types.dtypes import i64

COUNTS_KIND = "adstack_counts"


class _Counter:
    def __init__(self, whiles: Sequence[ir.While], counts: int) -> None:
        self.whiles = list(whiles)
        self.counts = counts  # buffer index of the counts buffer
        self.sub: dict = {}

    def block(self, b: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for s in b.stmts:
            self.stmt(s, out)
        return ir.Block(tuple(out))

    def stmt(self, s: ir.Stmt, out: list[ir.Stmt]) -> None:
        if isinstance(s, (ir.GlobalStore, ir.Print, ir.Check)):
            return
        if isinstance(s, (ir.AtomicRMW, ir.AtomicSwap)):
            new = ir.GlobalLoad(ptr=self.sub[s.ptr], dtype=s.dtype, loc=s.loc)
        elif isinstance(s, ir.While) and s in self.whiles:
            self.counted_while(s, out)
            return
        else:
            new = ir.remap_operands(s, self.sub)
            if isinstance(s, ir.RangeFor):  # a fresh variable for the copy of the loop (uses follow `sub`)
                nv = self.sub[s.var] = ir.LoopVar(dtype=s.var.dtype, name=s.var.name)
                new = replace(new, var=nv)
            kids = {n: self.block(getattr(s, n)) for n in ir.block_fields(type(s))}
            new = replace(new, **kids) if (kids or new is s) else new
        self.sub[s] = new
        out.append(new)

    def counted_while(self, s: ir.While, out: list[ir.Stmt]) -> None:
        loc = s.loc
        cnt = _emit(out, ir.Alloca(dtype=i64, loc=loc))
        out.append(ir.LocalStore(var=cnt, value=_emit(out, ir.Const(dtype=i64, value=0, loc=loc)), loc=loc))
        body = list(self.block(s.body).stmts)  # the condition check breaks before the increment
        old = _emit(body, ir.LocalLoad(var=cnt, dtype=i64, loc=loc))
        one = _emit(body, ir.Const(dtype=i64, value=1, loc=loc))
        body.append(ir.LocalStore(var=cnt, value=_emit(body, ir.OpStmt(op=Op.ADD, args=(old, one), dtype=i64,
                                                                        loc=loc)), loc=loc))
        out.append(ir.While(body=ir.Block(tuple(body)), loc=loc))
        idx = _emit(out, ir.Const(dtype=i64, value=self.whiles.index(s), loc=loc))
        ptr = _emit(out, ir.GlobalPtr(buffer=self.counts, indices=(idx,), dtype=i64, loc=loc))
        n = _emit(out, ir.LocalLoad(var=cnt, dtype=i64, loc=loc))
        out.append(ir.AtomicRMW(op=Op.MAX, ptr=ptr, value=n, dtype=i64, loc=loc))


def counting_kernel(k: ir.KernelIR, body: ir.Block, whiles: Sequence[ir.While]) -> ir.KernelIR:
    """The counting kernel of the pre-offload kernel `k` whose (unrolled) body is `body`: same
    arguments and buffers, plus the counts buffer (kind `adstack_counts`, i64, one word per loop in
    `whiles`), which it is the caller's job to zero before the launch."""
    decl = ir.BufferDecl(kind=COUNTS_KIND, dtype=i64, ndim=1, name="adstack.counts")
    c = _Counter(whiles, len(k.buffers))
    return replace(k, name=f"{k.name}_adstack_count", buffers=k.buffers + (decl,), body=c.block(body), stacks=(),
                   counter=None)


def _emit(out: list[ir.Stmt], s: ir.Stmt) -> ir.Value:
    out.append(s)
    return s


__all__ = ["COUNTS_KIND", "counting_kernel"]
