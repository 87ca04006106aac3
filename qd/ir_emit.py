"""Building IR statements into a block: the `Emitter` protocol (where the AD rules and the op expansions of
`qd/codegen/decompose.py` put what they build) and `BlockEmitter`, which appends to a list of statements."""

from __future__ import annotations

from typing import Protocol

from qd import ir
from qd.ops import Op
from qd.types.dtypes import DataType


class Emitter(Protocol):
    """Where rules put the statements they build (the caller's current block)."""

    def op(self, op: Op, args: tuple[ir.Value, ...], dtype: DataType) -> ir.Value: ...

    def const(self, value: float, dtype: DataType) -> ir.Value: ...


class BlockEmitter:
    """An `Emitter` appending to a list of statements, carrying one source location."""

    def __init__(self, out: list[ir.Stmt], loc: ir.SrcLoc | None = None) -> None:
        self.out = out
        self.loc = loc

    def op(self, op: Op, args: tuple[ir.Value, ...], dtype: DataType) -> ir.Value:
        s = ir.OpStmt(op=op, args=tuple(args), dtype=dtype, loc=self.loc)
        self.out.append(s)
        return s

    def const(self, value: float, dtype: DataType) -> ir.Value:
        s = ir.Const(dtype=dtype, value=value, loc=self.loc)
        self.out.append(s)
        return s
