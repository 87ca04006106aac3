"""The `with` statements a kernel may hold, and why any other is refused: `with qd.stream_parallel():` (Quadrants'
stream blocks: qd runs them in order, `qd/lang/stream.py`) and qd.graph's parallel regions and sections
(`qd/frontend/graph.py`). The fence (`qd/frontend/transformer.py`) and `GraphMixin.visit_With` ask `refusal`."""

from __future__ import annotations

import ast

from qd.frontend.graph import parallel_with

_NOT = "'with' statements are not supported in qd kernels and functions"
_ONES = "`with qd.stream_parallel():`, `with qd.graph.parallel_context():` and `with qd.graph.parallel():`"


def stream_call(expr: ast.expr) -> bool:
    """`expr` is a `qd.stream_parallel()` call (or `stream_parallel()`)."""
    if not isinstance(expr, ast.Call):
        return False
    f = expr.func
    return (isinstance(f, ast.Attribute) and f.attr == "stream_parallel") or (
        isinstance(f, ast.Name) and f.id == "stream_parallel")


def is_stream_block(node: ast.AST) -> bool:
    """`node` is a `with qd.stream_parallel():` block."""
    return isinstance(node, ast.With) and len(node.items) == 1 and stream_call(node.items[0].context_expr)


def refusal(node: ast.With) -> str | None:
    """Why `node` cannot be kernel code, in Quadrants' terms (None: it is one of the three qd has)."""
    if len(node.items) != 1:
        return f"{_NOT}, except with a single context manager: {_ONES}"
    item = node.items[0]
    if item.optional_vars is not None:
        return f"{_NOT} with `as`: write `with ... :` without `as NAME` ({_ONES})"
    if not isinstance(item.context_expr, ast.Call):
        return f"{_NOT}: each of {_ONES} requires a call expression (the parentheses)"
    if stream_call(item.context_expr) or parallel_with(node) is not None:
        return None
    return f"{_NOT}: qd only supports qd.stream_parallel(), qd.graph.parallel_context() and qd.graph.parallel()"
