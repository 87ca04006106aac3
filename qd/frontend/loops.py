"""Loops: `range`, `qd.ndrange`, struct-for over fields/ndarrays, `qd.grouped`, `qd.static` unrolling, `while`.

A runtime `for` at kernel top level (builder depth 0, also through inlined funcs) is a parallel
`RangeFor`; every other loop is serial. Multi-axis loops (ndrange, struct-for over a 2-D field, grouped)
are flattened into ONE `RangeFor` over the product of the extents; the axis indices are recovered at the
top of the body (so `break` in a serial ndrange leaves the whole nest, as in Python).

Index types (DESIGN §3): a loop variable has its bounds' promoted type (a Python int bound: i32, or i64
when it does not fit); the flat index of a multi-axis loop is i32 where the product of the extents is
known to fit (constant extents, a struct-for over a field or over an ndarray of fewer than 2^31 cells),
else i64; the axis indices have the bounds' promoted type whatever the flat index's (i32 for i32 bounds).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import math
import warnings
from typing import Any, Callable, Sequence

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.frontend.expr import Expr
from qd.frontend.graph import do_while_call
from qd.frontend.ranges import grouped, ndrange, static
from qd.ops import Op
from qd.types import dtypes
from qd.types.dtypes import DataType


def _bound_dtype(x: Any) -> DataType:
    """The type a loop bound or extent gives its loop variable: an Expr's own (u1 and narrow ints: i32); a Python
    int's i32 where it fits, else i64 (Quadrants refuses such a literal; qd never wraps it)."""
    if isinstance(x, Expr):
        t = x.dtype
    elif -2**31 <= int(x) <= ir.I32_MAX:
        t = dtypes.i32
    elif -2**63 <= int(x) < 2**63:
        t = dtypes.i64
    else:
        raise QuadrantsTypeError(f"the loop bound {int(x)} does not fit in 64 bits")
    return dtypes.i32 if t is dtypes.u1 or t.bits < 32 else t


def _loop_dtype(*bounds: Any) -> DataType:
    """The promoted type of loop bounds (`_bound_dtype`)."""
    t = _bound_dtype(bounds[0])
    for b in bounds[1:]:
        t = dtypes.promote(t, _bound_dtype(b))
    return dtypes.i32 if t is dtypes.u1 or t.bits < 32 else t


UNROLL_REFUSED = 256  # a static loop of more than this many times unrolling_limit iterations is refused
_UNROLL_WARNINGS: dict = {}  # file -> warnings' registry: one warning per loop, however often it is compiled


def _cfg() -> Any:
    from qd.frontend.builder import cfg

    return cfg()


def _static_count(iterable: Any) -> int | None:
    """How many iterations a static loop over `iterable` unrolls, where known before unrolling it."""
    if isinstance(iterable, grouped):
        iterable = iterable.target
    if isinstance(iterable, ndrange):
        n = 1
        for b, e in iterable.bounds:
            if not (isinstance(b, int) and isinstance(e, int)):
                return None
            n *= max(0, e - b)
        return n
    try:
        return len(iterable)
    except OverflowError:  # a range past 2**63
        return 1 << 63
    except TypeError:
        return None


def _check_unroll(count: int | None, limit: int) -> None:
    """Refuses a static loop of `count` iterations past `UNROLL_REFUSED * limit` (the visitor adds file:line)."""
    if count is not None and count > UNROLL_REFUSED * limit:
        raise QuadrantsSyntaxError(
            f"this qd.static loop unrolls {count} iterations, more than {UNROLL_REFUSED} x unrolling_limit "
            f"({UNROLL_REFUSED * limit}): compiling every iteration would take minutes. Use a runtime loop (drop "
            f"qd.static), or raise qd.init(unrolling_limit=...) (0: no limit) if you need it unrolled")


class LoopMixin:
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise QuadrantsSyntaxError("'else' clause for 'for' not supported in Quadrants kernels")
        it = node.iter
        while isinstance(it, ast.IfExp):  # `range(n) if qd.static(c) else qd.static(range(m))`
            cond = self.visit(it.test)
            if isinstance(cond, Expr) or _e.is_matrix(cond):
                raise QuadrantsSyntaxError("a conditional for-loop iterable needs a compile-time condition "
                                           "(qd.static(...))")
            it = it.body if cond else it.orelse
        if isinstance(it, ast.Call) and not it.keywords:
            fn = self.visit(it.func)
            if fn is static:
                if len(it.args) != 1:
                    raise QuadrantsSyntaxError("qd.static(...) in a for loop takes one iterable")
                return self._static_for(node, self.visit(it.args[0]))
            if fn is builtins.range:
                return self._range_for(node, [self.visit(a) for a in it.args])
            iterable = self.visit(it)
        else:
            iterable = self.visit(it)
        if isinstance(iterable, ndrange):
            return self._ndrange_for(node, iterable, grouped_=False)
        if isinstance(iterable, grouped):
            tgt = iterable.target
            tgt = self.wrap_global(tgt)
            if isinstance(tgt, ndrange):
                return self._ndrange_for(node, tgt, grouped_=True)
            if isinstance(tgt, _v.GlobalTensor):
                return self._struct_for(node, tgt, grouped_=True)
            raise QuadrantsSyntaxError("qd.grouped() takes a field, an ndarray or a qd.ndrange")
        if isinstance(iterable, _v.GlobalTensor):
            return self._struct_for(node, iterable, grouped_=False)
        if isinstance(iterable, range):
            return self._range_for(node, [iterable.start, iterable.stop, iterable.step])
        raise QuadrantsSyntaxError(f"cannot iterate over a {type(iterable).__name__} in a kernel loop; "
                                   "use range(), qd.ndrange(), a field/ndarray, or qd.static(...) to unroll")

    # -------------------------------------------------------------- static (unrolled) loops
    def _static_for(self, node: ast.For, iterable: Any) -> None:
        if isinstance(iterable, (Expr, _v.GlobalTensor)):
            raise QuadrantsSyntaxError("qd.static(...) loops need a compile-time iterable")
        limit = max(0, int(_cfg().unrolling_limit or 0))
        if limit:
            _check_unroll(_static_count(iterable), limit)
        if isinstance(iterable, grouped) and isinstance(iterable.target, ndrange):
            iterable = list(iterable)
        elif _e.is_matrix(iterable):
            iterable = list(iterable.entries)
        frame = {"kind": "static", "depth": self.b.depth, "status": None}
        self.ctx.loops.append(frame)
        try:
            for k, item in enumerate(iterable):
                if limit and k >= limit:  # (0: no limit)
                    if k == limit:
                        self._warn_unroll(node, limit)
                    _check_unroll(k + 1, limit)  # an iterable of unknown length
                frame["status"] = None
                self.ctx.push_scope()
                try:
                    self.bind_static_target(node.target, item)
                    self.visit_body(node.body)
                finally:
                    self.ctx.pop_scope()
                if frame["status"] == "break" or self.ctx.returned:
                    break
        finally:
            self.ctx.loops.pop()

    def _warn_unroll(self, node: ast.For, limit: int) -> None:
        """Quadrants' warning (a SyntaxWarning at the loop's line) when a static loop unrolls past `limit`."""
        warnings.warn_explicit(
            f"this qd.static loop unrolls more than {limit} iterations (unrolling_limit): each one is compiled, so "
            f"compiling may take long. A runtime loop (without qd.static) compiles once; qd.init(unrolling_limit=0) "
            f"silences this.", SyntaxWarning, self.src.file, getattr(node, "lineno", self.src.start),
            registry=_UNROLL_WARNINGS.setdefault(self.src.file, {}))

    # -------------------------------------------------------------- range
    def _range_for(self, node: ast.For, args: list) -> None:
        if not 1 <= len(args) <= 3:
            raise QuadrantsSyntaxError(f"Range should have 1 to 3 arguments, found {len(args)}")
        if not isinstance(node.target, ast.Name):
            raise QuadrantsSyntaxError("a range loop takes one loop variable")
        begin, end = (0, args[0]) if len(args) == 1 else (args[0], args[1])
        step = args[2] if len(args) == 3 else 1
        for v in (begin, end, step):
            if isinstance(v, float) or (isinstance(v, Expr) and not v.dtype.is_int) or _e.is_matrix(v):
                raise QuadrantsTypeError("range() bounds must be integers")
        if isinstance(step, Expr) or not isinstance(step, int):
            raise QuadrantsSyntaxError("range() step must be a compile-time integer constant")
        if step == 0:
            raise QuadrantsSyntaxError("range() step must not be zero")
        name = node.target.id
        if step == 1:
            return self._emit_loop(node, begin, end, name, lambda i: self.ctx.bind(name, i))
        t = _loop_dtype(begin, end)
        begin, end = (_e.cast_expr(v, t) if isinstance(v, Expr) else v for v in (begin, end))
        span = _e.binary("sub", end, begin) if step > 0 else _e.binary("sub", begin, end)
        count = _e.binary("floordiv", _e.binary("add", span, abs(step) - 1), abs(step))
        count = _e.binary("max", count, 0)

        def bind(k: Expr) -> None:
            self.ctx.bind(name, _e.binary("add", _e.cast_expr(begin, t), _e.binary("mul", _e.cast_expr(k, t), step)))
        self._emit_loop(node, 0, count, name, bind)

    def _emit_loop(self, node: ast.For, begin: Any, end: Any, name: str, bind: Callable[[Expr], None],
                   body: list[ast.stmt] | None = None, from_range: bool = True) -> None:
        b = self.b
        t = _loop_dtype(begin, end)
        eb, ee = _e.cast_expr(begin, t), _e.cast_expr(end, t)
        parallel = b.depth == 0 and not b.next_loop_serial
        block_dim = b.next_block_dim if parallel else 0
        b.next_loop_serial, b.next_block_dim = False, 0
        var = ir.LoopVar(t, name)
        frame = {"kind": "parallel" if parallel else "serial", "depth": b.depth + 1}
        self.ctx.loops.append(frame)
        b.loops.append(frame["kind"])
        b.push()
        b.depth += 1
        self.ctx.push_scope()
        outer_block_dim = b.loop_block_dim
        if parallel:
            b.loop_block_dim = block_dim
        try:
            bind(Expr(var))
            self.visit_body(node.body if body is None else body)
        finally:
            b.loop_block_dim = outer_block_dim
            self.ctx.pop_scope()
            b.depth -= 1
            blk = b.pop()
            b.loops.pop()
            self.ctx.loops.pop()
        b.emit(ir.RangeFor, var=var, begin=eb.value, end=ee.value, body=blk, parallel=parallel,
               from_range=from_range, block_dim=block_dim)

    # -------------------------------------------------------------- ndrange / struct-for / grouped
    def _targets(self, node: ast.For) -> list[str]:
        t = node.target
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise QuadrantsSyntaxError("loop targets must be plain names")
        return [e.id for e in elts]

    def _ndrange_for(self, node: ast.For, nd: ndrange, grouped_: bool) -> None:
        begins = [b for b, _ in nd.bounds]
        extents = self._small_shapes(nd.bounds)
        fits = extents is not None
        if extents is None:
            extents = [_e.binary("max", _e.binary("sub", e, b), 0) for b, e in nd.bounds]
        self._multi_loop(node, begins, extents, grouped_, "Ndrange", getattr(nd, "axes", None), fits)

    def _small_shapes(self, bounds: list) -> list | None:
        """The ends of ndrange `bounds` when every begin is 0 and the ends are distinct axes of one ndarray of
        fewer than 2^31 cells (`x.shape[0], x.shape[1]`: never negative, their product fits in i32), else None."""
        ends = [e for _, e in bounds]
        if not all(type(b) is int and b == 0 for b, _ in bounds) or \
                not all(isinstance(e, Expr) and isinstance(e.value, ir.ExternalShape) for e in ends):
            return None
        bufs = {e.value.buffer for e in ends}
        axes = {e.value.axis for e in ends}
        if len(bufs) != 1 or len(axes) != len(ends) or self.b.buffers[bufs.pop()].large != ir.SMALL:
            return None
        return ends

    def _struct_for(self, node: ast.For, t: _v.GlobalTensor, grouped_: bool) -> None:
        extents = list(t.shape)
        begins = list(t.offset) if t.offset else [0] * len(extents)
        fits = t.decl.kind != "ndarray" or t.decl.large == ir.SMALL
        self._multi_loop(node, begins, extents, grouped_, "Struct", fits=fits)

    def _multi_loop(self, node: ast.For, begins: list, extents: list, grouped_: bool, what: str,
                    axes: tuple | None = None, fits: bool = False) -> None:
        """A loop over the product of `extents` (axis d from `begins[d]`); `fits`: the product is known to fit in
        i32 (else a runtime product is computed and iterated in i64)."""
        names = self._targets(node)
        nd = len(extents)
        if grouped_:
            if len(names) != 1:
                raise QuadrantsSyntaxError(f"Group for should have 1 loop target, found {len(names)}")
        elif len(names) != nd:
            raise QuadrantsSyntaxError(f"{what} for loop with number of the loop variables not equal to the dimension "
                                       f"of the {what.lower()} is not supported ({len(names)} loop variable(s), "
                                       f"{nd} dimension(s))")
        # every axis index's type (Quadrants': the bounds' promoted type; a constant end counts too)
        axis_t = _loop_dtype(*begins, *extents, *(b + e for b, e in zip(begins, extents)
                                                 if not isinstance(b, Expr) and not isinstance(e, Expr)))

        def bind(k: Expr) -> None:
            idx = self._unflatten(k, begins, extents, axis_t, [] if grouped_ else names, axes)
            if grouped_:
                self.ctx.bind(names[0], _v.make_matrix(idx, (nd,)))
            else:
                for n, v in zip(names, idx):
                    self.ctx.bind(n, v)

        if nd == 1:
            def bind_1(i: Expr) -> None:
                if grouped_:
                    self.ctx.bind(names[0], _v.make_matrix([i], (1,)))
                else:
                    self.ctx.bind(names[0], i)

            begin = begins[0]
            end = _e.binary("add", begin, extents[0])
            self._emit_loop(node, begin, end, names[0], bind_1, from_range=False)
            return
        if all(not isinstance(e, Expr) for e in extents):
            total: Any = math.prod(int(e) for e in extents)  # i32 where it fits, else i64 (`_emit_loop`)
        else:
            flat_t = axis_t if fits else dtypes.promote(dtypes.i64, axis_t)
            total = 1
            for e in extents:
                total = _e.binary("mul", total, _e.cast_expr(e, flat_t) if isinstance(e, Expr) else e)
        self._emit_loop(node, 0, total, "_".join(names), bind, from_range=False)

    def _unflatten(self, k: Expr, begins: list, extents: list, t: DataType, names: Sequence[str] = (),
                   axes: tuple | None = None) -> list:
        """The indices (of type `t`) of flat index `k` (axis `axes[p]` at nesting level p, outermost first;
        default the axes in order): one division and remainder per level but the innermost, `q = r // stride`
        then `r = r % stride`, unsigned at `k`'s width (every value is non-negative: plain unsigned divisions, where
        signed floor divisions need sign fixes on every tier; LLVM makes one `div` of the pair). `names` (the loop
        targets) are recorded for the debugger on the statements computing them (`SrcLoc.var`)."""
        order = tuple(axes) if axes is not None else tuple(range(len(extents)))
        ft = dtypes.unsigned_of(k.dtype)

        def mul(a: Any, b: Any) -> Any:
            if not isinstance(a, Expr) and not isinstance(b, Expr):
                return a * b
            return _e.emit(Op.MUL, (_e.cast_expr(a, ft), _e.cast_expr(b, ft)), ft)

        stride: Any = 1
        strides: list = [None] * len(extents)
        for a in reversed(order[1:]):
            strides[a] = stride
            stride = mul(stride, extents[a])
        strides[order[0]] = stride
        out: list = [None] * len(extents)
        r, above = _e.cast_expr(k, ft), None
        for level, a in enumerate(order):
            loc = self.b.loc
            named = loc is not None and a < len(names)
            with self.b.at(dataclasses.replace(loc, var=names[a]) if named else None):
                if above is not None:  # what the levels above leave
                    r = _e.emit(Op.MOD, (r, above), ft)
                q = r
                if level < len(order) - 1:
                    above = _e.cast_expr(strides[a], ft)
                    q = _e.emit(Op.FLOORDIV, (r, above), ft)
                v = _e.cast_expr(q, t)
                b0 = begins[a]
                out[a] = _e.binary("add", v, b0) if not (isinstance(b0, int) and b0 == 0) else v
        return out

    # -------------------------------------------------------------- while
    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise QuadrantsSyntaxError("'else' clause for 'while' not supported in Quadrants kernels")
        call = do_while_call(node.test)
        if call is not None:
            self.graph_do_while(node, call)  # `qd/frontend/graph.py`
            return
        b = self.b
        frame = {"kind": "serial", "depth": b.depth + 1}
        self.ctx.loops.append(frame)
        b.loops.append("serial")
        b.push()
        b.depth += 1
        try:
            test = self.visit(node.test)
            if _e.is_matrix(test):
                raise QuadrantsSyntaxError("the condition of a 'while' must be a scalar")
            if isinstance(test, Expr):
                stop = _e.unary("logical_not", self.truth(test))
                b.push()
                b.emit(ir.Break)
                b.emit(ir.If, cond=stop.value, then=b.pop())
            elif not test:
                b.emit(ir.Break)
            self.visit_body(node.body)
        finally:
            b.depth -= 1
            blk = b.pop()
            b.loops.pop()
            self.ctx.loops.pop()
        b.emit(ir.While, body=blk)
