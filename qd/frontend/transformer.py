"""Python AST -> qd IR: the dispatcher, the syntax FENCE, and the control-flow statements.

`Transformer.visit(node)` calls `visit_<NodeType>`; a node type without a visitor is unsupported
syntax. Before any of a function's body is built, `fence(src)` walks its whole AST once and rejects
constructs qd does not support (`try`, `with`, `lambda`, `class`, `global`, `yield`, `del`, ...) with
a `QuadrantsSyntaxError` that names the construct and shows `file:line:col` and the source line.
Errors raised while building a node are re-raised with that node's position (`raise ... from None`).

Expressions live in `exprs.py` (conditional expressions in `conditional.py`, vector/matrix indexing in
`mindex.py`), assignments in `assign.py`, loops in `loops.py`, calls, `print` and
`assert` in `calls.py`; this class mixes them together.
"""

from __future__ import annotations

import ast
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError
from qd.frontend import expr as _e
from qd.frontend.assign import AssignMixin
from qd.frontend.builder import Builder
from qd.frontend.calls import CallMixin
from qd.frontend.conditional import ConditionalMixin
from qd.frontend.context import FuncContext, FuncSource, position_error
from qd.frontend.exprs import ExprMixin
from qd.frontend.graph import GraphMixin, parallel_with
from qd.frontend.withs import refusal
from qd.frontend.loops import LoopMixin
from qd.types import dtypes

_FENCE: dict[type, str] = {
    ast.Try: "'try' statements", ast.With: "'with' statements", ast.AsyncWith: "'async with' statements",
    ast.Lambda: "lambda expressions", ast.ClassDef: "class definitions", ast.Global: "'global' statements",
    ast.Nonlocal: "'nonlocal' statements", ast.Yield: "'yield'", ast.YieldFrom: "'yield from'",
    ast.Await: "'await'", ast.Delete: "'del' statements", ast.Raise: "'raise' statements",
    ast.Import: "'import' statements", ast.ImportFrom: "'import' statements",
    ast.FunctionDef: "nested function definitions", ast.AsyncFunctionDef: "nested function definitions",
    ast.AsyncFor: "'async for' loops", ast.Set: "set literals", ast.SetComp: "set comprehensions",
}
if hasattr(ast, "Match"):
    _FENCE[ast.Match] = "'match' statements"
if hasattr(ast, "TryStar"):
    _FENCE[ast.TryStar] = "'try' statements"


def _fence_message(node: ast.AST, what: str, is_kernel: bool) -> str:
    """Quadrants' wording first (`Unsupported node "Raise"`, `Function definition is not allowed in 'qd.func'.`)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        where = "kernel" if is_kernel else "func"
        return f"Function definition is not allowed in 'qd.{where}'."
    verb = "are" if what.endswith("s") else "is"
    return f'Unsupported node "{type(node).__name__}": {what} {verb} not supported in qd kernels and functions'


def fence(src: FuncSource, is_kernel: bool = False) -> None:
    """Reject unsupported syntax anywhere in the function's body (run once per function). Its decorators,
    annotations and defaults are Python evaluated when it is defined, not kernel code (`@d.register(
    is_compatible=lambda ...)` above a kernel)."""
    if getattr(src, "fenced", False):
        return
    root = src.node
    # (what a qd.graph.parallel section holds is its structure check's: `qd/frontend/graph.py`)
    in_sections = {id(n) for s in ast.walk(root) if parallel_with(s) == "section" for b in s.body for n in ast.walk(b)}
    for node in (n for stmt in root.body for n in ast.walk(stmt)):
        what = _FENCE.get(type(node))
        if isinstance(node, ast.With):  # the three `with` statements a kernel may hold (`qd/frontend/withs.py`)
            why = refusal(node) if id(node) not in in_sections else None
            if why is not None:
                raise position_error(src, node, QuadrantsSyntaxError(why)) from None
            what = None
        if what is None and isinstance(node, ast.Starred) and isinstance(node.ctx, ast.Store):
            what = "starred assignment targets"
        if what is not None:
            raise position_error(src, node, QuadrantsSyntaxError(_fence_message(node, what, is_kernel))) from None
    for a in (root.args.vararg, root.args.kwarg):
        if a is not None:
            raise position_error(src, root, QuadrantsSyntaxError(
                "*args / **kwargs parameters are not supported in qd kernels and functions")) from None
    src.fenced = True  # type: ignore[attr-defined]


class Transformer(ExprMixin, ConditionalMixin, AssignMixin, LoopMixin, CallMixin, GraphMixin):
    """Builds IR for one function body (a kernel, or a func inlined at a call site)."""

    def __init__(self, b: Builder, ctx: FuncContext) -> None:
        self.b = b
        self.ctx = ctx
        self.src = ctx.src

    # -------------------------------------------------------------- dispatch
    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, "visit_" + type(node).__name__, None)
        old = self.b.loc
        self.b.loc = self.src.loc(node) if hasattr(node, "lineno") else old
        try:
            if method is None:
                raise QuadrantsSyntaxError(f'Unsupported node "{type(node).__name__}" in qd kernels')
            return method(node)
        except Exception as e:
            if getattr(e, "_qd_positioned", False):
                position_error(self.src, node, e)  # adds this call site's frame when `e` came from a func
                raise
            raise position_error(self.src, node, e) from None
        finally:
            self.b.loc = old

    def at(self, node: ast.AST, fn: Any, *args: Any) -> Any:
        """`fn(node, *args)` with `node`'s position, as `visit` would run it: for nodes a visitor walks itself
        instead of recursing (a long `a + b + c + ...` chain)."""
        old = self.b.loc
        self.b.loc = self.src.loc(node)
        try:
            return fn(node, *args)
        except Exception as e:  # re-raised with the position
            if getattr(e, "_qd_positioned", False):
                raise
            raise position_error(self.src, node, e) from None
        finally:
            self.b.loc = old

    def visit_body(self, stmts: list[ast.stmt]) -> None:
        """Statements of one block, in a new variable scope; stops after a return or a static break."""
        self.ctx.push_scope()
        try:
            for s in stmts:
                if self.ctx.returned or self._static_status():
                    break
                self.visit(s)
        finally:
            self.ctx.pop_scope()

    def _static_status(self) -> str | None:
        loops = self.ctx.loops
        return loops[-1].get("status") if loops and loops[-1]["kind"] == "static" else None

    def runtime_block(self, stmts: list[ast.stmt]) -> ir.Block:
        """Build `stmts` into a nested block (one runtime control-flow level deeper)."""
        self.b.push()
        self.b.depth += 1
        try:
            self.visit_body(stmts)
        finally:
            self.b.depth -= 1
            blk = self.b.pop()
        return blk

    # -------------------------------------------------------------- simple statements
    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_If(self, node: ast.If) -> None:
        test = self.visit(node.test)
        if _e.is_matrix(test):
            raise QuadrantsSyntaxError("the condition of an 'if' must be a scalar, not a vector/matrix")
        if not isinstance(test, _e.Expr):
            self.visit_body(node.body if test else node.orelse)
            return
        cond = self.truth(test)
        then = self.runtime_block(node.body)
        else_ = self.runtime_block(node.orelse)
        self.b.emit(ir.If, cond=cond.value, then=then, else_=else_)

    def truth(self, x: Any) -> _e.Expr:
        """A u1 Expr: `x != 0` unless `x` already is u1."""
        x = _e.as_expr(x)
        return x if x.dtype is dtypes.u1 else _e.binary("ne", x, 0)

    def visit_Break(self, node: ast.Break) -> None:
        self._jump(node, "break")

    def visit_Continue(self, node: ast.Continue) -> None:
        self._jump(node, "continue")

    def _jump(self, node: ast.AST, what: str) -> None:
        loops = self.ctx.loops
        if not loops:
            raise QuadrantsSyntaxError(f"'{what}' outside a loop")
        top = loops[-1]
        if top["kind"] == "static":
            if self.b.depth != top["depth"]:
                raise QuadrantsSyntaxError(f"You are trying to `{what}` a static `for` loop, but the `{what}` "
                                           "statement is inside a non-static `if`.")
            top["status"] = what
            return
        if top["kind"] == "parallel" and what == "break":
            raise QuadrantsSyntaxError("Cannot break in the outermost loop: 'break' is not allowed in a parallel "
                                       "(top-level) for loop of a kernel; move the loop into a serial context or "
                                       "use a flag")
        self.b.emit(ir.Break if what == "break" else ir.Continue)

    def visit_Return(self, node: ast.Return) -> None:
        if self.b.depth != self.ctx.entry_depth:
            raise QuadrantsSyntaxError("Return inside non-static if/for is not supported")
        value = self.visit(node.value) if node.value is not None else None
        if self.ctx.is_kernel:
            self.kernel_return(node, value)
        else:
            self.ctx.return_value = self.func_return_value(value)
        self.ctx.returned = True

    def visit_Assert(self, node: ast.Assert) -> None:
        self.build_assert(node)
