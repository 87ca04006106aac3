"""Conditional expressions `a if c else b` in kernels.

A compile-time condition picks a branch and builds only it (its value may be anything: a list of indices, a
field, None). A vector condition is refused (Quadrants': `qd.select` chooses entry by entry). A runtime
condition chooses between values (Quadrants' rules):
- scalars are promoted to a common type; vectors and matrices choose entry by entry and must have one shape;
  a scalar branch is broadcast to the other's shape;
- a tuple or list of scalars is a vector (`(i, j) if c else (j, i)`, an index into a 2-D field or matrix), a
  tuple of equal-length tuples of scalars a matrix; the entries of each take their promoted type;
- anything else (a field, a struct, a tuple of vectors) can only be chosen at compile time.
Branches of pure, cheap statements are both evaluated and joined by `select`; otherwise the branches are an
`If` storing into fresh locals, so a branch's loads and calls run only when it is taken.
"""

from __future__ import annotations

import ast
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.frontend.expr import Expr
from qd.types import dtypes
from qd.types.dtypes import DataType

_CHEAP = (ir.Const, ir.OpStmt, ir.LocalLoad, ir.ArgLoad, ir.ExternalShape, ir.GlobalPtr)
_HINT = "choose with qd.static(condition) at compile time, or assign in an `if` statement"


def _scalar_dtype(x: Any) -> DataType | None:
    if isinstance(x, Expr):
        return x.dtype
    if _e.is_number(x):
        return _e.literal_dtype(x)
    return None


def _describe(x: Any) -> str:
    if _e.is_matrix(x):
        return f"a {'vector' if x.ndim == 1 else 'matrix'} of shape {_v.shape_of(x)}"
    return f"a {type(x).__name__}"


def _sequence_value(items: Any) -> Any:
    """A tuple/list branch as a vector (scalars) or a matrix (rows of scalars), entries of one type."""
    nested = [type(r) in (tuple, list) for r in items]
    if any(nested) and not all(nested):
        raise QuadrantsTypeError(f"a branch of a conditional expression with a runtime condition is a "
                                 f"{type(items).__name__} mixing tuples and scalars: it is neither a vector nor a "
                                 f"matrix; {_HINT}")
    rows = [list(r) for r in items] if items and all(nested) else None
    flat = [x for r in rows for x in r] if rows is not None else list(items)
    for x in flat:
        if _scalar_dtype(x) is None:
            raise QuadrantsTypeError(f"a branch of a conditional expression with a runtime condition is a "
                                     f"{type(items).__name__} holding {_describe(x)}: only tuples of scalars (or "
                                     f"of equal-length tuples of scalars) are chosen at run time; {_HINT}")
    if rows is not None and len({len(r) for r in rows}) != 1:
        raise QuadrantsTypeError(f"a branch of a conditional expression with a runtime condition has rows of "
                                 f"lengths {[len(r) for r in rows]}; a matrix needs rows of one length")
    if not flat:
        return items
    dt = _scalar_dtype(flat[0])
    for x in flat[1:]:
        dt = dtypes.promote(dt, _scalar_dtype(x))
    entries = [_e.cast_expr(x, dt) for x in flat]
    return _v.make_matrix(entries, (len(rows), len(rows[0])) if rows is not None else (len(flat),))


def branch_value(x: Any) -> Any:
    """A branch's value as a runtime choice takes it: scalars and matrices as they are, sequences converted."""
    if type(x) in (tuple, list):
        return _sequence_value(x)
    if _e.is_matrix(x) or _scalar_dtype(x) is not None:
        return x
    raise QuadrantsTypeError(f"a branch of a conditional expression with a runtime condition is {_describe(x)}, "
                             f"which cannot be chosen at run time; {_HINT}")


def check_shapes(a: Any, c: Any) -> None:
    if type(a) in (tuple, list) or type(c) in (tuple, list):  # an empty tuple branch
        if not (type(a) in (tuple, list) and type(c) in (tuple, list) and len(a) == len(c) == 0):
            raise QuadrantsTypeError(f"the branches of a conditional expression have different shapes: "
                                     f"{_describe(a)} and {_describe(c)}")
        return
    if _e.is_matrix(a) and _e.is_matrix(c) and _v.shape_of(a) != _v.shape_of(c):
        raise QuadrantsTypeError(f"the branches of a conditional expression have different shapes: "
                                 f"{_v.shape_of(a)} and {_v.shape_of(c)}; both must have one shape (a scalar "
                                 f"branch is broadcast)")


def _dtype_of(x: Any) -> DataType:
    return _v.matrix_dtype(x) if _e.is_matrix(x) else _scalar_dtype(x)


class ConditionalMixin:
    def visit_IfExp(self, node: ast.IfExp) -> Any:
        test = self.visit(node.test)
        if not _e.is_expr(test) and not _e.is_matrix(test):
            return self.visit(node.body if test else node.orelse)
        if _e.is_matrix(test):
            raise QuadrantsSyntaxError(f"the condition of a conditional expression is a "
                                       f"{'vector' if test.ndim == 1 else 'matrix'}, not a scalar. Please use "
                                       f'"qd.select" instead.')
        cond = self._bool(test)
        b = self.b
        b.push()
        a = branch_value(self.visit(node.body))
        blk_a = b.pop()
        b.push()
        c = branch_value(self.visit(node.orelse))
        blk_c = b.pop()
        check_shapes(a, c)
        if type(a) in (tuple, list):  # both empty
            b.stack[-1].extend(blk_a.stmts + blk_c.stmts)
            return a
        if all(isinstance(s, _CHEAP) for blk in (blk_a, blk_c) for s in blk.stmts):
            b.stack[-1].extend(blk_a.stmts + blk_c.stmts)
            return _e.select(cond, a, c)
        return self._ifexp_branches(cond, a, blk_a, c, blk_c)

    def _ifexp_branches(self, cond: Expr, a: Any, blk_a: ir.Block, c: Any, blk_c: ir.Block) -> Any:
        """`a if cond else c` as an `If` whose branches run their own statements and store into fresh locals."""
        b = self.b
        dt = dtypes.promote(_dtype_of(a), _dtype_of(c))
        proto = a if _e.is_matrix(a) else c if _e.is_matrix(c) else None
        n = len(proto.entries) if proto is not None else 1
        ea = list(a.entries) if _e.is_matrix(a) else [a] * n
        ec = list(c.entries) if _e.is_matrix(c) else [c] * n
        vars_ = [b.alloca(dt) for _ in range(n)]
        blocks = []
        for blk, vals in ((blk_a, ea), (blk_c, ec)):
            b.push()
            b.stack[-1].extend(blk.stmts)
            b.depth += 1
            for var, v in zip(vars_, vals):
                b.store(var, _e.cast_expr(_e.as_expr(v), dt).value)
            b.depth -= 1
            blocks.append(b.pop())
        b.emit(ir.If, cond=cond.value, then=blocks[0], else_=blocks[1])
        outs = [Expr(b.load(v)) for v in vars_]
        return _v.make_matrix(outs, _v.shape_of(proto)) if proto is not None else outs[0]
