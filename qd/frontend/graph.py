"""`while qd.graph.do_while(counter):` in a `@qd.kernel(graph=True)` kernel (Quadrants' `graph_do_while`).

The loop is recognised by its spelling, as Quadrants does (`qd.graph.do_while(x)`, `graph.do_while(x)`, the
deprecated flat `qd.graph_do_while(x)`), and becomes one `ir.GraphDoWhile` statement at the kernel's top level: its
body is built at depth 0, so its `for` loops stay parallel (top-level) loops and its other statements serial ones,
each at its own loop level; `offload` turns the loop into a `TaskLoop` that the launchers repeat (a do-while: the
body runs once before the counter is first read). The counter is a 0-d integer ndarray the kernel reaches (a
parameter, a dataclass parameter's member, a `@qd.data_oriented` member); anything else, a loop that is not at the
top level (or directly in another such loop), or a kernel without `graph=True` is a `QuadrantsSyntaxError`.
"""

from __future__ import annotations

import ast

from qd import ir
from qd.errors import QuadrantsCompilationError, QuadrantsSyntaxError
from qd.frontend import values as _v
from qd.types import hooks as _hooks


def do_while_call(test: ast.expr) -> ast.Call | None:
    """`test` when it is a `qd.graph.do_while(...)` call in any of Quadrants' spellings, else None."""
    if not isinstance(test, ast.Call):
        return None
    f = test.func
    if isinstance(f, ast.Attribute) and f.attr == "do_while":
        v = f.value
        if (isinstance(v, ast.Attribute) and v.attr == "graph") or (isinstance(v, ast.Name) and v.id == "graph"):
            return test
    if (isinstance(f, ast.Attribute) and f.attr == "graph_do_while") or (
            isinstance(f, ast.Name) and f.id == "graph_do_while"):
        return test
    return None


class GraphMixin:
    """`visit_While` hands a `qd.graph.do_while` loop here (the Transformer mixes this in)."""

    def graph_do_while(self, node: ast.While, call: ast.Call) -> None:
        b = self.b
        if not getattr(b, "graph", False):
            raise QuadrantsSyntaxError("qd.graph.do_while() requires @qd.kernel(graph=True): add graph=True to the "
                                       "kernel's decorator")
        if b.depth != 0:
            raise QuadrantsSyntaxError(
                "qd.graph.do_while() must be at the kernel top level or directly nested inside another "
                "qd.graph.do_while(); it cannot appear inside a for-loop, a while-loop or a runtime if")
        cond = self._do_while_counter(call)
        b.push()
        try:
            self.visit_body(node.body)
        finally:
            blk = b.pop()
        rand = next((s for s in ir.walk(blk) if isinstance(s, ir.RandomValue)), None)
        if rand is not None:  # each iteration would draw the same numbers again: refused, not silently repeated
            at = f" ({rand.loc.file}:{rand.loc.line})" if rand.loc is not None else ""
            raise QuadrantsCompilationError(
                f"qd.random() inside a qd.graph.do_while() loop{at}: qd runs the loop's tasks again with the same "
                f"random stream, so every iteration would draw the same numbers; draw them in a kernel launched "
                f"from a Python loop, or pass per-iteration noise in an ndarray")
        b.emit(ir.GraphDoWhile, cond=cond, body=blk)

    def _do_while_counter(self, call: ast.Call) -> int:
        """The buffer of the loop's counter: a 0-d integer ndarray the kernel reaches."""
        text = ast.unparse(call.args[0]) if call.args else ""
        if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], (ast.Name, ast.Attribute)):
            raise QuadrantsSyntaxError(f"qd.graph.do_while() takes one argument, a kernel parameter (or a member of "
                                       f"one) holding a 0-d qd.i32 ndarray; got `{ast.unparse(call)}`")
        try:
            t = self.visit(call.args[0])
        except QuadrantsCompilationError:
            t = None
        # an ndarray parameter is an "ndarray" buffer; one reached through a template (`self.counter`) is bound
        # into the instance like a field: its object tells them apart
        is_field = t.decl.kind != "ndarray" and (t.obj is None or isinstance(t.obj, _hooks.impl.Field)) \
            if isinstance(t, _v.GlobalTensor) else True
        if is_field:
            raise QuadrantsSyntaxError(
                f"qd.graph.do_while({text}): `{text}` does not resolve to an ndarray kernel parameter; pass a 0-d "
                "qd.i32 ndarray (a parameter annotated qd.types.ndarray(qd.i32, ndim=0), a dataclass parameter's "
                "member or a @qd.data_oriented member), not a field or a value")
        if t.decl.ndim != 0 or not t.decl.dtype.is_int:
            raise QuadrantsSyntaxError(
                f"qd.graph.do_while({text}): the counter must be a 0-d integer ndarray (qd.i32, ndim=0), got "
                f"{t.decl.ndim}-d {t.decl.dtype}")
        return t.buffer
