"""A recognized `MaxOverRange` spec as a qd kernel: how GPU tiers run the max-reducer (DESIGN §5).

The CPU tiers evaluate a spec with `qd/_sizer.pyx: eval_max_parallel`. A GPU tier cannot call into
Cython, so the same spec becomes an ordinary kernel of qd's IR, compiled and launched like any other
on the launch's own tier: the closed bounds of the spec's axes are computed once, a parallel loop runs
over the product of the extents, decodes each flat index into the axis variables, evaluates the body
and folds it into `out[0]` with an atomic max. `wide=False` builds the variant for devices without
64-bit atomics: a u32 atomic max into `out[0]`, and `out[1]` set to 1 when a value does not fit in 32
bits (the host then refuses the result rather than truncating it). Reads are bounds-checked like the
serial sizer's: an index out of range fails the launch with a `QuadrantsAssertionError`.

`spec_kernel(k, code)` builds it from the reverse kernel `k` (its args and buffers, which the launch
binds exactly as for `k`) and the spec's serialised words (`qd/ad/maxreducer.py: Spec.code`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import replace

from qd import ir
from qd.ad.counting import COUNTS_KIND
from qd.base.abi import (K_ADD, K_ARG, K_CMP, K_CONST, K_DIV, K_FCMP, K_FCONST, K_FLOAD, K_GATE, K_LOAD,
                         K_MAX, K_MIN, K_MOD, K_MOR, K_MUL, K_SHAPE, K_SUB, K_VAR, SIZE_WORDS)
from qd.ops import Op
from qd.types.dtypes import f64, i32, i64, u1, u32

_BINOPS = {K_ADD: Op.ADD, K_MUL: Op.MUL, K_MAX: Op.MAX, K_MIN: Op.MIN, K_DIV: Op.FLOORDIV, K_MOD: Op.MOD}
_CMPS = [Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE]
U32_MAX = (1 << 32) - 1


class _Builder:
    def __init__(self, k: ir.KernelIR, code: Sequence[int], checks: list[ir.CheckDecl]) -> None:
        self.k, self.w, self.checks = k, code, checks
        self.vars: dict[int, ir.Value] = {}  # bound-variable slot -> its value (i64)

    def op(self, out: list, op: Op, args: tuple, dtype: object) -> ir.Value:
        return _emit(out, ir.OpStmt(op=op, args=args, dtype=dtype))

    def const(self, out: list, v: int | float, dtype: object = i64) -> ir.Value:
        return _emit(out, ir.Const(dtype=dtype, value=v))

    def to64(self, out: list, v: ir.Value) -> ir.Value:
        return v if v.dtype is i64 else self.op(out, Op.CAST, (v,), i64)

    def node(self, n: int, out: list) -> ir.Value:
        kind, a, b, c, d = self.w[n * SIZE_WORDS: (n + 1) * SIZE_WORDS]
        if kind == K_CONST:
            return self.const(out, a)
        if kind == K_FCONST:
            return self.const(out, struct.unpack("<d", struct.pack("<q", a))[0], f64)
        if kind == K_ARG:
            return self.to64(out, _emit(out, ir.ArgLoad(index=a, dtype=self.k.args[a].dtype)))
        if kind == K_SHAPE:
            return self.to64(out, _emit(out, ir.ExternalShape(buffer=a, axis=b,
                                                              dtype=self.k.buffers[a].axis_dtype(b))))
        if kind == K_VAR:
            return self.vars[a]
        if kind in (K_LOAD, K_FLOAD):
            return self.load(a, b, out, kind == K_FLOAD)
        if kind == K_SUB:  # clamped at 0, as the sizer's
            diff = self.op(out, Op.SUB, (self.node(a, out), self.node(b, out)), i64)
            return self.op(out, Op.MAX, (diff, self.const(out, 0)), i64)
        if kind in _BINOPS:
            return self.op(out, _BINOPS[kind], (self.node(a, out), self.node(b, out)), i64)
        if kind in (K_CMP, K_FCMP):
            return self.to64(out, self.op(out, _CMPS[a], (self.node(b, out), self.node(c, out)), u1))
        if kind == K_GATE:
            cond = self.op(out, Op.CMP_NE if c else Op.CMP_EQ, (self.node(a, out), self.const(out, 0)), u1)
            return self.op(out, Op.SELECT, (cond, self.node(b, out), self.const(out, 0)), i64)
        if kind == K_MOR:
            return self.serial_max(a, b, c, d, out)
        raise ValueError(f"node kind {kind} cannot appear in a max-reducer spec")

    def load(self, buffer: int, lin: int, out: list, as_float: bool) -> ir.Value:
        axes: list[tuple[int, int]] = []
        while lin >= 0:
            _, _, axis, idx, prev = self.w[lin * SIZE_WORDS: (lin + 1) * SIZE_WORDS]
            axes.append((axis, idx))
            lin = prev
        decl = self.k.buffers[buffer]
        indices = []
        for axis, idx in sorted(axes):
            v = self.node(idx, out)
            self.bounds_check(decl, buffer, axis, v, out)
            indices.append(self.op(out, Op.CAST, (v,), decl.axis_dtype(axis)))
        ptr = _emit(out, ir.GlobalPtr(buffer=buffer, indices=tuple(indices), dtype=decl.dtype))
        val = _emit(out, ir.GlobalLoad(ptr=ptr, dtype=decl.dtype))
        return self.op(out, Op.CAST, (val,), f64 if as_float else i64)

    def bounds_check(self, decl: ir.BufferDecl, buffer: int, axis: int, v: ir.Value, out: list) -> None:
        nd = decl.ndim if decl.kind == "ndarray" else len(decl.shape)
        if axis < nd and decl.kind == "ndarray":
            extent = self.to64(out, _emit(out, ir.ExternalShape(buffer=buffer, axis=axis,
                                                                dtype=decl.axis_dtype(axis))))
        else:
            extent = self.const(out, (decl.shape + decl.elem_shape)[axis])
        ok = self.op(out, Op.BIT_AND, (self.op(out, Op.CMP_GE, (v, self.const(out, 0)), u1),
                                      self.op(out, Op.CMP_LT, (v, extent), u1)), u1)
        self.checks.append(ir.CheckDecl("bounds", f"adstack sizing: index {{0}} is out of range [0, {{1}}) on axis "
                                                  f"{axis} of {decl.name or f'buffer @{buffer}'}"))
        out.append(ir.Check(cond=ok, check=len(self.checks) - 1, args=(v, extent)))

    def serial_max(self, slot: int, lo: int, hi: int, body: int, out: list) -> ir.Value:
        best = _emit(out, ir.Alloca(dtype=i64))
        out.append(ir.LocalStore(var=best, value=self.const(out, 0)))
        var = ir.LoopVar(dtype=i64, name=f"v{slot}")
        begin, end = self.node(lo, out), self.node(hi, out)
        inner: list = []
        self.vars[slot] = var
        v = self.node(body, inner)
        old = _emit(inner, ir.LocalLoad(var=best, dtype=i64))
        inner.append(ir.LocalStore(var=best, value=self.op(inner, Op.MAX, (old, v), i64)))
        out.append(ir.RangeFor(var=var, begin=begin, end=end, body=ir.Block(tuple(inner))))
        return _emit(out, ir.LocalLoad(var=best, dtype=i64))


def spec_kernel(k: ir.KernelIR, code: Sequence[int], wide: bool = True) -> ir.KernelIR:
    """The max-reducer kernel of spec `code` over the buffers and args of the reverse kernel `k`; its
    last buffer (kind `adstack_counts`, i64 or u32, 2 words: the max and the overflow flag) is the result."""
    checks: list[ir.CheckDecl] = list(k.checks)
    b = _Builder(k, code, checks)
    out_buf = len(k.buffers)
    top: list = []
    axes: list[tuple[int, ir.Value, ir.Value]] = []  # (slot, begin, extent) of the flattened chain
    n = len(code) // SIZE_WORDS - 1
    total: ir.Value = b.const(top, 1)
    while code[n * SIZE_WORDS] == K_MOR and len(axes) < 8:
        slot, lo, hi, body = code[n * SIZE_WORDS + 1: n * SIZE_WORDS + 5]
        begin = b.node(lo, top)
        ext = b.op(top, Op.MAX, (b.op(top, Op.SUB, (b.node(hi, top), begin), i64), b.const(top, 0)), i64)
        axes.append((slot, begin, ext))
        total = b.op(top, Op.MUL, (total, ext), i64)
        n = body
    idx = ir.LoopVar(dtype=i64, name="flat")
    inner: list = []
    rem: ir.Value = idx
    for slot, begin, ext in reversed(axes):  # the innermost axis varies fastest
        b.vars[slot] = b.op(inner, Op.ADD, (begin, b.op(inner, Op.MOD, (rem, ext), i64)), i64)
        rem = b.op(inner, Op.FLOORDIV, (rem, ext), i64)
    value = b.node(n, inner)
    _fold(b, value, out_buf, wide, inner)
    top.append(ir.RangeFor(var=idx, begin=b.const(top, 0), end=total, body=ir.Block(tuple(inner)), parallel=True))
    decl = ir.BufferDecl(kind=COUNTS_KIND, dtype=i64 if wide else u32, ndim=1, name="maxreducer.out")
    return replace(k, name=f"{k.name}_maxreducer", buffers=k.buffers + (decl,), checks=tuple(checks), rets=(),
                   body=ir.Block(tuple(top)), tasks=None, stacks=(), counter=None)


def _fold(b: _Builder, value: ir.Value, out_buf: int, wide: bool, out: list) -> None:
    zero = b.const(out, 0, i32)
    if wide:
        ptr = _emit(out, ir.GlobalPtr(buffer=out_buf, indices=(zero,), dtype=i64))
        out.append(ir.AtomicRMW(op=Op.MAX, ptr=ptr, value=value, dtype=i64))
        return
    fits = b.op(out, Op.CMP_LE, (value, b.const(out, U32_MAX)), u1)
    clamped = b.op(out, Op.CAST, (b.op(out, Op.MIN, (value, b.const(out, U32_MAX)), i64),), u32)
    ptr = _emit(out, ir.GlobalPtr(buffer=out_buf, indices=(zero,), dtype=u32))
    out.append(ir.AtomicRMW(op=Op.MAX, ptr=ptr, value=clamped, dtype=u32))
    over = ir.If(cond=b.op(out, Op.LOGICAL_NOT, (fits,), u1), then=ir.Block(_overflow_word(b, out_buf)))
    out.append(over)


def _overflow_word(b: _Builder, out_buf: int) -> tuple:
    stmts: list = []
    one = b.const(stmts, 1, i32)
    ptr = _emit(stmts, ir.GlobalPtr(buffer=out_buf, indices=(one,), dtype=u32))
    stmts.append(ir.GlobalStore(ptr=ptr, value=b.const(stmts, 1, u32)))
    return tuple(stmts)


def _emit(out: list, s: ir.Stmt) -> ir.Value:
    out.append(s)
    return s


__all__ = ["U32_MAX", "spec_kernel"]
