"""`while qd.graph.do_while(counter):` in a `@qd.kernel(graph=True)` kernel (Quadrants' `graph_do_while`).

The loop is recognised by its spelling, as Quadrants does (`qd.graph.do_while(x)`, `graph.do_while(x)`, the
deprecated flat `qd.graph_do_while(x)`), and becomes one `ir.GraphDoWhile` statement at the kernel's top level: its
body is built at depth 0, so its `for` loops stay parallel (top-level) loops and its other statements serial ones,
each at its own loop level; `offload` turns the loop into a `TaskLoop` that the launchers repeat (a do-while: the
body runs once before the counter is first read). The counter is a 0-d integer ndarray the kernel reaches (a
parameter, a dataclass parameter's member, a `@qd.data_oriented` member); anything else, a loop that is not at the
top level (or directly in another such loop), or a kernel without `graph=True` is a `QuadrantsSyntaxError`.

`with qd.graph.parallel_context():` whose body holds only `with qd.graph.parallel():` sections (directly, or through
`qd.static` loops and ifs) declares the sections independent (Quadrants forks them into parallel graph branches on
CUDA). qd checks the structure as Quadrants does and runs the sections in order, on every tier, which gives the
results Quadrants' contract promises (the sections touch disjoint data); their tasks stay top-level loops.
"""

from __future__ import annotations

import ast

from qd import ir
from qd.errors import QuadrantsCompilationError, QuadrantsSyntaxError
from qd.frontend import values as _v
from qd.types import hooks as _hooks


def graph_call(expr: ast.expr, name: str) -> ast.Call | None:
    """`expr` when it is a call of `qd.graph.<name>` (or `graph.<name>`, or the flat `qd.graph_<name>`), else
    None."""
    if not isinstance(expr, ast.Call):
        return None
    f = expr.func
    if isinstance(f, ast.Attribute) and f.attr == name:
        v = f.value
        if (isinstance(v, ast.Attribute) and v.attr == "graph") or (isinstance(v, ast.Name) and v.id == "graph"):
            return expr
    if (isinstance(f, ast.Attribute) and f.attr == f"graph_{name}") or (
            isinstance(f, ast.Name) and f.id == f"graph_{name}"):
        return expr
    return None


def parallel_with(node: ast.AST) -> str | None:
    """"context" / "section" for a `with qd.graph.parallel_context():` / `with qd.graph.parallel():` statement, else
    None (the only `with` statements a kernel may hold: `qd/frontend/transformer.py`'s fence)."""
    if not isinstance(node, ast.With) or len(node.items) != 1:
        return None
    expr = node.items[0].context_expr
    if graph_call(expr, "parallel_context") is not None:
        return "context"
    if graph_call(expr, "parallel") is not None:
        return "section"
    return None


_ONLY_SECTIONS = ("qd.graph.parallel_context() may contain only `with qd.graph.parallel():` sections, directly or in "
                  "qd.static() loops and ifs: move other work before or after the region, or into a section")


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
    """`visit_While` hands a `qd.graph.do_while` loop here, `visit_With` a parallel region or section (the Transformer
    mixes this in)."""

    def visit_With(self, node: ast.With) -> None:
        from qd.frontend import withs

        why = withs.refusal(node)
        if why is not None:
            raise QuadrantsSyntaxError(why)
        if withs.is_stream_block(node):
            self._stream_block(node)
            return
        kind = parallel_with(node)
        call = node.items[0].context_expr
        name = "qd.graph.parallel_context()" if kind == "context" else "qd.graph.parallel()"
        if call.args or call.keywords:
            raise QuadrantsSyntaxError(f"{name} takes no arguments")
        if not getattr(self.b, "graph", False):
            raise QuadrantsSyntaxError(f"{name} requires @qd.kernel(graph=True): add graph=True to the kernel's "
                                       f"decorator")
        state = getattr(self.b, "graph_parallel", None)
        if kind == "section":
            if state != "context":
                raise QuadrantsSyntaxError("qd.graph.parallel() can only be used directly inside a "
                                           "qd.graph.parallel_context() region (in it, or in its qd.static loops and ifs)"
                                           if state is None else "qd.graph.parallel() sections cannot be nested")
            _check_section(node.body)
        elif state is not None:
            raise QuadrantsSyntaxError("qd.graph.parallel_context() regions cannot be nested")
        elif getattr(self.b, "checkpoints", False):
            raise QuadrantsSyntaxError("qd.graph.parallel_context() cannot be used in a @qd.kernel(checkpoints=True) "
                                       "kernel")
        else:
            _check_region(node.body)
        self.b.graph_parallel = kind
        try:
            self.visit_body(node.body)
        finally:
            self.b.graph_parallel = state

    def _stream_block(self, node: ast.With) -> None:
        """`with qd.stream_parallel():`: a block of the kernel's top level, run in order (Quadrants gives each block
        a stream of its own); its checks are Quadrants'."""
        from qd.frontend.withs import is_stream_block

        if node.items[0].context_expr.args or node.items[0].context_expr.keywords:
            raise QuadrantsSyntaxError("qd.stream_parallel() takes no arguments")
        if not self.ctx.is_kernel or self.b.depth != 0:
            raise QuadrantsSyntaxError("qd.stream_parallel() can only be used inside @qd.kernel, at its top level (not "
                                       "in a qd.func, a loop or an if)")
        if getattr(self.b, "graph", False):
            raise QuadrantsSyntaxError("qd.stream_parallel() is not compatible with graph=True kernels: use "
                                       "qd.graph.parallel_context() there")
        top = [s for s in self.src.node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if not all(is_stream_block(s) for s in top):
            raise QuadrantsSyntaxError("when a kernel uses qd.stream_parallel(), all top-level statements of the kernel "
                                       "must be `with qd.stream_parallel():` blocks")
        self.visit_body(node.body)

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


def _static_call(expr: ast.expr) -> bool:
    """`expr` is a `qd.static(...)` (or `static(...)`) call: unrolled or decided when the kernel compiles."""
    if not isinstance(expr, ast.Call):
        return False
    f = expr.func
    return (isinstance(f, ast.Attribute) and f.attr == "static") or (isinstance(f, ast.Name) and f.id == "static")


def _check_region(body: list) -> None:
    """A region's body: sections, through `qd.static` loops and ifs only (Quadrants' structure check)."""
    for s in body:
        if parallel_with(s) == "section":
            continue
        if isinstance(s, ast.For) and _static_call(s.iter) and not s.orelse:
            _check_region(s.body)
        elif isinstance(s, ast.If) and _static_call(s.test):
            _check_region(s.body)
            _check_region(s.orelse)
        elif not isinstance(s, ast.Pass):
            raise QuadrantsSyntaxError(_ONLY_SECTIONS)


def _check_section(body: list) -> None:
    """A section's body is straight task work: no `qd.graph.do_while` loop, region, or `qd.checkpoint` in it."""
    for node in (n for s in body for n in ast.walk(s)):
        if isinstance(node, ast.While) and do_while_call(node.test) is not None:
            raise QuadrantsSyntaxError("qd.graph.do_while() cannot appear inside a qd.graph.parallel() section: put "
                                       "the region inside the loop instead")
        if parallel_with(node) == "context":
            raise QuadrantsSyntaxError("qd.graph.parallel_context() regions cannot be nested (one inside a "
                                       "qd.graph.parallel() section)")
        if isinstance(node, ast.With) and any(isinstance(i.context_expr, ast.Call) and isinstance(
                i.context_expr.func, ast.Attribute) and i.context_expr.func.attr == "checkpoint" for i in node.items):
            raise QuadrantsSyntaxError("qd.checkpoint() cannot appear inside a qd.graph.parallel() section")
        if isinstance(node, ast.With) and parallel_with(node) is None:
            raise QuadrantsSyntaxError("'with' statements are not supported in qd kernels and functions, except "
                                       "`with qd.graph.parallel_context():` and `with qd.graph.parallel():`")
