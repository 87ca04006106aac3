"""Bounds checking (the `insert_bound_checks` pass, run when `debug` or `check_out_of_bound`).

Before every `GlobalPtr`, for each index axis, inserts a `Check` that `0 <= idx < extent`, where
`extent` is a `Const` for field axes and element axes, and an `ExternalShape` for ndarray axes.
Each check gets its own `CheckDecl(kind='bounds')` (appended to `KernelIR.checks`, located at the
pointer) whose message the runtime formats with `{kernel}`, `{tid}`, `{0}` (the index) and `{1}`
(the extent): the `Check`'s args are `(idx, extent)`. Constant indices known to be in range need
no check.

Before:                                  After:
    %1 = global_ptr @0 [%0, %c] : f32        %2 = const i32 0
                                             %3 = external_shape @0, 0 : i32
  (buffer @0: ndarray ndim=1 elem=(3,),      %4 = cmp_le u1 %2, %0
   %c = const i32 2)                         %5 = cmp_lt u1 %0, %3
                                             %6 = bit_and u1 %4, %5
                                             check %6, #0 (%0, %3)
                                             %1 = global_ptr @0 [%0, %c] : f32
"""

from __future__ import annotations

from dataclasses import replace

from qd import ir
from qd.ops import Op
from qd.types.dtypes import DataType, u1
from qd.verify import outer_ndim


def _shape_text(b: ir.BufferDecl, axis: int) -> str:
    outer = [("{1}" if a == axis else "?") if b.kind == "ndarray" else str(b.shape[a])
             for a in range(outer_ndim(b))]
    dims = outer + [str(x) for x in b.elem_shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def bound_message(b: ir.BufferDecl, axis: int) -> str:
    """The `CheckDecl` message for `axis` of buffer `b` (format fields explained above)."""
    name = (b.name or f"{b.kind} buffer").replace("{", "{{").replace("}", "}}")
    return (f"Out of bound access: kernel[{{kernel}}] tid={{tid}}: index {{0}} of axis {axis} is out "
            f"of [0, {{1}}) for {name} with shape {_shape_text(b, axis)}")


def _extent(k: ir.KernelIR, ptr: ir.GlobalPtr, axis: int, dt: DataType) -> tuple[list, ir.Value | int]:
    """Statements computing the extent of `axis` (as `dt`), or the extent itself when constant."""
    b = k.buffers[ptr.buffer]
    nd = outer_ndim(b)
    if axis >= nd:
        return [], b.elem_shape[axis - nd]
    if b.kind != "ndarray":
        return [], b.shape[axis]
    shp = ir.ExternalShape(buffer=ptr.buffer, axis=axis, dtype=b.axis_dtype(axis), loc=ptr.loc)
    if shp.dtype is dt:
        return [shp], shp
    cast = ir.OpStmt(op=Op.CAST, args=(shp,), dtype=dt, loc=ptr.loc)
    return [shp, cast], cast


class _Inserter:
    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.checks = list(k.checks)

    def axis_check(self, ptr: ir.GlobalPtr, axis: int) -> list[ir.Stmt]:
        idx, loc = ptr.indices[axis], ptr.loc
        stmts, ext = _extent(self.k, ptr, axis, idx.dtype)
        if isinstance(ext, int):
            if isinstance(idx, ir.Const) and 0 <= idx.value < ext:
                return []
            ext = ir.Const(dtype=idx.dtype, value=ext, loc=loc)
            stmts.append(ext)
        zero = ir.Const(dtype=idx.dtype, value=0, loc=loc)
        ge = ir.OpStmt(op=Op.CMP_LE, args=(zero, idx), dtype=u1, loc=loc)
        lt = ir.OpStmt(op=Op.CMP_LT, args=(idx, ext), dtype=u1, loc=loc)
        ok = ir.OpStmt(op=Op.BIT_AND, args=(ge, lt), dtype=u1, loc=loc)
        b = self.k.buffers[ptr.buffer]
        self.checks.append(ir.CheckDecl("bounds", bound_message(b, axis), loc))
        check = ir.Check(cond=ok, check=len(self.checks) - 1, args=(idx, ext), loc=loc)
        return stmts + [zero, ge, lt, ok, check]

    def __call__(self, s: ir.Stmt) -> list[ir.Stmt]:
        if not isinstance(s, ir.GlobalPtr):
            return [s]
        out: list[ir.Stmt] = []
        for axis in range(len(s.indices)):
            out.extend(self.axis_check(s, axis))
        return out + [s]


def insert_bound_checks(k: ir.KernelIR) -> ir.KernelIR:
    """`k` with a bounds `Check` before every global access (body, and tasks if offloaded)."""
    ins = _Inserter(k)
    body = ir.map_block(k.body, ins)
    tasks = k.tasks
    if tasks is not None:
        tasks = tuple(replace(t, prologue=ir.map_block(t.prologue, ins), body=ir.map_block(t.body, ins))
                      for t in tasks)
    return replace(k, body=body, tasks=tasks, checks=tuple(ins.checks))
