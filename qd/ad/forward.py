"""`forward`: the forward-mode (dual) version of a kernel, built from the rules of `qd/ad/rules.py`.

Runs on the structured, pre-offload IR (the offload pass then treats the tangents like any value).
Every float value v gets a tangent dv (symbolically ZERO where nothing flows, so no IR is emitted for
it): ops use `rules.tangent`; float locals get a twin `Alloca` holding their tangent; a buffer listed in
`dual_of` gets a dual buffer (a new `BufferDecl` appended to `buffers`, bound by the caller to
`field.dual`), and its loads, stores and atomic adds are mirrored on the dual. Stores into buffers
without a dual drop the tangent. Atomic min/max on a buffer with a dual leave the dual untouched.

Before (`y[i] = sin(x[i]) * 2.0`, both fields with duals; buffers 0 = x, 1 = y):

    for %i in range(0, 8) parallel:
      %p = ptr b0[%i];  %v = f32 load %p;  %s = f32 sin %v;  %c = f32 const 2.0
      %m = f32 mul %s, %c;  %q = ptr b1[%i];  store %q, %m

After (buffers 2 = x.dual, 3 = y.dual):

    for %i in range(0, 8) parallel:
      %p = ptr b0[%i];  %dp = ptr b2[%i];  %v = f32 load %p;  %dv = f32 load %dp
      %s = f32 sin %v;  %cs = f32 cos %v;  %ds = f32 mul %cs, %dv;  %c = f32 const 2.0
      %m = f32 mul %s, %c;  %dm = f32 mul %c, %ds
      %q = ptr b1[%i];  %dq = ptr b3[%i];  store %q, %m;  store %dq, %dm
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from qd import ir
from qd.ad import rules
from qd.ad.rules import ZERO
from qd.errors import QuadrantsCompilationError
from qd.ops import Op


class _Dual:
    """The state of one rewrite: tangents of values, twin allocas, dual pointers."""

    def __init__(self, dual_of: dict[int, int]) -> None:
        self.dual_of = dual_of
        self.tan: dict[ir.Value, object] = {}
        self.twin: dict[ir.Alloca, ir.Alloca] = {}
        self.dptr: dict[ir.GlobalPtr, ir.GlobalPtr] = {}

    def t(self, v: ir.Value) -> object:
        return self.tan.get(v, ZERO)

    def block(self, b: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for s in b.stmts:
            self.stmt(s, out)
        return ir.Block(tuple(out))

    def stmt(self, s: ir.Stmt, out: list[ir.Stmt]) -> None:
        kids = {name: self.block(blk) for name, blk in _child_blocks(s)}
        out.append(replace(s, **kids) if kids else s)
        em = rules.BlockEmitter(out, s.loc)
        if isinstance(s, ir.OpStmt):
            self.tan[s] = rules.tangent(s, [self.t(a) for a in s.args], em)
        elif isinstance(s, ir.Alloca) and s.dtype.is_float:
            self.twin[s] = _emit(out, ir.Alloca(dtype=s.dtype, loc=s.loc))
        elif isinstance(s, ir.LocalLoad) and s.var in self.twin:
            self.tan[s] = _emit(out, ir.LocalLoad(var=self.twin[s.var], dtype=s.dtype, loc=s.loc))
        elif isinstance(s, ir.LocalStore) and s.var in self.twin:
            _emit(out, ir.LocalStore(var=self.twin[s.var], value=self._value(s.value, em), loc=s.loc))
        elif isinstance(s, ir.LocalAtomic) and s.var in self.twin:
            self.local_atomic(s, out, em)
        elif isinstance(s, ir.GlobalPtr) and s.buffer in self.dual_of:
            dp = ir.GlobalPtr(buffer=self.dual_of[s.buffer], indices=s.indices, dtype=s.dtype, loc=s.loc)
            self.dptr[s] = _emit(out, dp)
        elif isinstance(s, ir.GlobalLoad) and s.ptr in self.dptr:
            self.tan[s] = _emit(out, ir.GlobalLoad(ptr=self.dptr[s.ptr], dtype=s.dtype, loc=s.loc))
        elif isinstance(s, ir.GlobalStore) and s.ptr in self.dptr:
            _emit(out, ir.GlobalStore(ptr=self.dptr[s.ptr], value=self._value(s.value, em), loc=s.loc))
        elif isinstance(s, ir.AtomicRMW) and s.ptr in self.dptr and s.op in (Op.ADD, Op.SUB):
            d = ir.AtomicRMW(op=s.op, ptr=self.dptr[s.ptr], value=self._value(s.value, em), dtype=s.dtype,
                             loc=s.loc)
            self.tan[s] = _emit(out, d)  # the old dual is the old value's tangent
        elif isinstance(s, ir.AtomicRMW) and s.ptr in self.dptr and s.dtype.is_float:
            raise QuadrantsCompilationError(
                f"forward mode: atomic_{s.op.name.lower()} into a field with a dual{_at(s.loc)} has no tangent qd "
                f"can update atomically with it (its tangent would be dropped); compute the new value with "
                f"qd.max/qd.min/* and store it, or keep this field out of the FwdMode block")
        elif isinstance(s, ir.AtomicSwap) and s.ptr in self.dptr and s.expected is None:
            d = ir.AtomicSwap(ptr=self.dptr[s.ptr], value=self._value(s.value, em), dtype=s.dtype, loc=s.loc)
            self.tan[s] = _emit(out, d)  # the dual is exchanged too; its old value is the old value's tangent
        elif isinstance(s, ir.Simt) and s.op in _MOVED and s.dtype.is_float:
            self.simt(s, out)

    def simt(self, s: ir.Simt, out: list[ir.Stmt]) -> None:
        """A value moved from another lane (`shuffle`, ...): its tangent is the tangent moved the same way."""
        at = _MOVED[s.op]
        t = self.t(s.args[at])
        if t is not ZERO:
            args = s.args[:at] + (t,) + s.args[at + 1:]
            self.tan[s] = _emit(out, ir.Simt(op=s.op, args=args, dtype=s.dtype, loc=s.loc))

    def local_atomic(self, s: ir.LocalAtomic, out: list[ir.Stmt], em: rules.BlockEmitter) -> None:
        """A float kernel-scope local reduced in a parallel loop: its tangent is reduced alongside
        (`+=`/`-=` add the value's tangent; `*= v` with a constant-tangent `v` scales it by `v`)."""
        tv = self.t(s.value)
        if s.op in (Op.ADD, Op.SUB):
            op, value = s.op, self._value(s.value, em)
        elif s.op is Op.MUL and tv is ZERO:
            op, value = Op.MUL, s.value
        else:
            raise QuadrantsCompilationError(
                f"forward mode: the {s.op.value} reduction of a float local in a parallel loop{_at(s.loc)} has no "
                f"tangent qd can reduce atomically; reduce into a field with a dual instead")
        self.tan[s] = _emit(out, ir.LocalAtomic(op=op, var=self.twin[s.var], value=value, dtype=s.dtype, loc=s.loc))

    def _value(self, v: ir.Value, em: rules.BlockEmitter) -> ir.Value:
        """The tangent of `v` as a value (a zero constant where it is symbolically ZERO)."""
        t = self.t(v)
        return em.const(0.0, v.dtype) if t is ZERO else t


# the `ir.Simt` ops moving a value between lanes -> the operand that is the value
_MOVED = {"shuffle": 0, "shuffle_up": 0, "shuffle_down": 0, "broadcast": 0,
          "warp_shfl": 1, "warp_shfl_up": 1, "warp_shfl_down": 1, "warp_shfl_xor": 1}


def _at(loc: ir.SrcLoc | None) -> str:
    return f" (at {loc.file}:{loc.line})" if loc is not None else ""


def _emit(out: list[ir.Stmt], s: ir.Stmt) -> ir.Stmt:
    out.append(s)
    return s


def _child_blocks(s: ir.Stmt) -> list[tuple[str, ir.Block]]:
    return [(n, getattr(s, n)) for n in ir.block_fields(type(s))]


def forward(k: ir.KernelIR, dual_buffers: Sequence[int]) -> ir.KernelIR:
    """The forward-mode version of the pre-offload kernel `k`. Buffer `dual_buffers[j]` gets its dual
    as buffer `len(k.buffers) + j` (a 'field' decl named `<name>.dual`), to be bound to `field.dual`."""
    if k.tasks is not None:
        raise ValueError("forward() runs before the offload pass")
    dual_of = {b: len(k.buffers) + j for j, b in enumerate(dual_buffers)}
    decls = tuple(replace(k.buffers[b], name=k.buffers[b].name + ".dual") for b in dual_buffers)
    body = _Dual(dual_of).block(k.body)
    return replace(k, buffers=k.buffers + decls, body=body)


__all__ = ["forward"]
