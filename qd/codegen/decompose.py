"""Ops a tier lacks, lowered from other ops once for every tier.

A tier's op table may leave an op out with a reason (its `LACKS`: op -> reason); the reason `DECOMPOSE` says
the op reaches the tier's emitter as its expansion here instead, built from ops the tier has. `expand` rewrites
a kernel's statements before emission (the kernel itself where nothing is to expand, so a tier that lacks
nothing pays one test). An expansion builds IR through the AD rules' `Emitter` and must give the op's own
result bit for bit, f16 included (only exact ops: comparisons, selects, constants), so a tier using it agrees
with the interpreter as a direct lowering does.

    %r = f32 sgn %x   ->   %p = u1 cmp_gt %x, 0.0 ; %n = u1 cmp_lt %x, 0.0
                           %m = f32 select %n, -1.0, 0.0 ; %r = f32 select %p, 1.0, %m

No tier lacks an op today (`tests/test_ops_coverage.py` lists each table's `LACKS`); the interpreter is the
reference and never does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from qd import ir
from qd.ir_emit import BlockEmitter, Emitter
from qd.ops import Op
from qd.types import dtypes as T

DECOMPOSE = "decompose"  # the reason in a tier's LACKS for an op it takes as its expansion here

Expansion = Callable[[Emitter, tuple[ir.Value, ...], T.DataType], ir.Value]


def _sgn(em: Emitter, args: tuple[ir.Value, ...], dt: T.DataType) -> ir.Value:
    """-1, 0 or 1: x > 0 ? 1 : (x < 0 ? -1 : 0) (NaN and +-0 give 0; u1 gives x)."""
    x = args[0]
    zero = em.const(0.0 if dt.is_float else 0, dt)
    neg = em.op(Op.CMP_LT, (x, zero), T.u1)
    minus = em.op(Op.SELECT, (neg, em.const(-1.0 if dt.is_float else -1, dt), zero), dt)
    return em.op(Op.SELECT, (em.op(Op.CMP_GT, (x, zero), T.u1), em.const(1.0 if dt.is_float else 1, dt), minus), dt)


def _logical_not(em: Emitter, args: tuple[ir.Value, ...], dt: T.DataType) -> ir.Value:
    """a == 0."""
    x = args[0]
    return em.op(Op.CMP_EQ, (x, em.const(0.0 if x.dtype.is_float else 0, x.dtype)), dt)


EXPANSIONS: dict[Op, Expansion] = {Op.SGN: _sgn, Op.LOGICAL_NOT: _logical_not}


def lowered_here(lacks: Mapping[Op, str]) -> frozenset[Op]:
    """The ops of a tier's `LACKS` that it takes as their expansion."""
    return frozenset(op for op, reason in lacks.items() if reason == DECOMPOSE)


def expand(k: ir.KernelIR, ops: frozenset[Op]) -> ir.KernelIR:
    """`k` with every `OpStmt` of an op in `ops` replaced by its expansion (`k` itself when it has none)."""
    if not ops or not any(isinstance(s, ir.OpStmt) and s.op in ops for s in ir.walk_kernel(k)):
        return k
    missing = ops - set(EXPANSIONS)
    if missing:
        raise KeyError(f"no expansion for {sorted(op.value for op in missing)}")
    mapping: dict = {}
    if k.tasks is None:
        return k.with_body(_block(k.body, ops, mapping))
    tasks = []
    for t in k.tasks:
        prologue, body = _block(t.prologue, ops, mapping), _block(t.body, ops, mapping)
        tasks.append(replace(t, prologue=prologue, body=body, begin=mapping.get(t.begin, t.begin),
                             end=mapping.get(t.end, t.end)))
    return replace(k, tasks=tuple(tasks))


def _block(block: ir.Block, ops: frozenset[Op], mapping: dict) -> ir.Block:
    """`block` rebuilt in order: operands renamed through `mapping`, expanded statements recorded there."""
    out: list[ir.Stmt] = []
    for s in block.stmts:
        ns = ir.remap_operands(s, mapping)
        kids = {name: _block(b, ops, mapping) for name, b in _blocks(ns)}
        if kids:
            ns = replace(ns, **kids)
        if isinstance(ns, ir.OpStmt) and ns.op in ops:
            mapping[s] = EXPANSIONS[ns.op](BlockEmitter(out, ns.loc), ns.args, ns.dtype)
            continue
        if ns is not s:
            mapping[s] = ns
        out.append(ns)
    return ir.Block(tuple(out))


def _blocks(s: ir.Stmt) -> list[tuple[str, ir.Block]]:
    return [(name, b) for name in type(s).__dataclass_fields__ if isinstance(b := getattr(s, name), ir.Block)]


__all__ = ["DECOMPOSE", "EXPANSIONS", "expand", "lowered_here"]
