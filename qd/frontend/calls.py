"""Calls inside kernels (Python builtins mapped to qd ops, qd.func inlining), `print`, `assert`, returns."""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _bm
from qd.frontend import builtins as _qb
from qd.frontend import expr as _e
from qd.types import dtypes as _dt
from qd.frontend import values as _v
from qd.frontend import structs as _s
from qd.frontend.expr import Expr
from qd.frontend.ranges import static as _static
from qd.frontend.views import ViewValue
from qd.types import dtypes
from qd.types.dtypes import MatrixType

_MATH_BUILTINS = {builtins.abs: _qb.abs_, builtins.min: _qb.min_, builtins.max: _qb.max_,
                  builtins.pow: _qb.pow_, builtins.round: _qb.round_}


def _runtime(x: Any) -> bool:
    return isinstance(x, Expr) or _e.is_matrix(x)


def _names_only(node: ast.expr) -> bool:
    """Whether `node` is an attribute chain on a name (`s.links.x`, `self.x`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


class CallMixin:
    def visit_Call(self, node: ast.Call) -> Any:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "fill" and len(node.args) == 1 \
                and not node.keywords and self._fill_in_place(node.func.value, node.args[0]):
            return None
        fn = self.visit(node.func)
        static = fn is _static
        self.b.static_depth += static
        try:
            args = self._elements(node.args)  # positional args unpack `*` like list elements do
            kwargs: dict = {}
            for k in node.keywords:
                v = self.visit(k.value)
                if k.arg is None:
                    if not isinstance(v, dict):
                        raise QuadrantsSyntaxError("'**' unpacking needs a compile-time dict")
                    kwargs.update(v)
                else:
                    kwargs[k.arg] = v
        finally:
            self.b.static_depth -= static
        return self.call(fn, args, kwargs)

    def _fill_in_place(self, target: ast.expr, value_node: ast.expr) -> bool:
        """`m.fill(v)` on a local matrix variable or a field/ndarray element stores into it (Quadrants
        fills in place); False when `target` is no assignable matrix, to call `fill` normally."""
        from qd.frontend.assign import LV

        if isinstance(target, ast.Attribute) and isinstance(target.value, (ast.Name, ast.Subscript, ast.Attribute)):
            base = self.lvalue(target.value)  # `s.member.fill(v)` on a struct local or struct field element
            if not isinstance(base, _s.StructVal) or target.attr not in base.members:
                return False
        elif isinstance(target, ast.Subscript):
            # only elements of fields/ndarrays among subscripts, however reached: `x[i]`, a qd.func's template or
            # ndarray parameter `f[i]`, `s.links.x[i, b]` (a struct or dataclass argument's member: Genesis),
            # `self.x[i]`; a local matrix's `m[i]` is a row value
            if isinstance(target.value, ast.Name):
                base = self.ctx.lookup(target.value.id)
            elif _names_only(target.value):  # `a.b.c` (visited twice below: reading names has no side effects)
                base = self.visit(target.value)
            else:
                return False
            if not isinstance(base, _v.GlobalTensor) and _v.global_kind(base) is None:
                return False
        elif not isinstance(target, ast.Name):
            return False
        lv = self.lvalue(target)
        if not isinstance(lv, LV) or lv.shape is None:
            return False
        value = self.visit(value_node)
        if _e.is_matrix(value):
            raise QuadrantsTypeError("fill() takes a scalar")
        self.store(lv, _v.make_matrix([value] * len(lv.refs), tuple(lv.shape)))
        return True

    def call(self, fn: Any, args: list, kwargs: dict) -> Any:
        if fn is builtins.print:
            return self.emit_print(args, kwargs)
        if getattr(fn, "__name__", "") == "format" and isinstance(getattr(fn, "__self__", None), str):
            from qd.frontend.exprs import format_runtime

            return format_runtime(fn.__self__, tuple(args), kwargs)
        if getattr(fn, "_is_qd_kernel", False):  # a `qd.runtime.kernel.Kernel` (or a bound one)
            raise QuadrantsSyntaxError("Kernels cannot call other kernels; decorate the callee with @qd.func")
        any_rt = any(_runtime(a) for a in args) or any(_runtime(v) for v in kwargs.values())
        if fn in _MATH_BUILTINS and any_rt:
            return _MATH_BUILTINS[fn](*args, **kwargs)
        if fn in (builtins.int, builtins.float) and args and _runtime(args[0]):
            cfg = _bm.cfg()
            return _e.cast(args[0], cfg.default_ip if fn is builtins.int else cfg.default_fp)
        if fn is builtins.bool and args and isinstance(args[0], Expr):
            return self.truth(args[0])
        if fn is builtins.len and args:
            return self._len(args[0])
        if fn in (builtins.all, builtins.any) and len(args) == 1 and _e.is_matrix(args[0]):
            return args[0].all() if fn is builtins.all else args[0].any()  # as Quadrants: elementwise truth
        if fn is builtins.range and any_rt:
            raise QuadrantsSyntaxError("range() with runtime bounds is only supported as a for-loop iterable")
        if self.b.pure:  # a Python function run while compiling: its file is part of the fastcache entry
            code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
            if code is not None:
                self.b.sources.add(code.co_filename)
        return fn(*args, **kwargs)

    def _len(self, x: Any) -> Any:
        if isinstance(x, _v.GlobalTensor):
            return x.shape[0]
        if isinstance(x, ViewValue):
            return x.size
        if _e.is_matrix(x):
            return _v.shape_of(x)[0]
        if isinstance(x, Expr):
            raise QuadrantsTypeError("len() of a scalar runtime value")
        return len(x)

    # -------------------------------------------------------------- print
    def emit_print(self, args: list, kwargs: dict) -> None:
        sep = kwargs.get("sep", " ")
        end = kwargs.get("end", "\n")
        items: list = []
        for i, a in enumerate(args):
            if i:
                items.append(sep)
            items.extend(self.print_items(a))
        if end not in ("\n", ""):
            items.append(end.rstrip("\n"))
        merged: list = []
        fmts: list[str] = []
        for it in items:
            if isinstance(it, str) and merged and isinstance(merged[-1], str):
                merged[-1] += it
            elif isinstance(it, tuple):
                merged.append(it[0])
                fmts.append(it[1])
            elif not (isinstance(it, str) and it == ""):
                merged.append(it)
        self.b.emit(ir.Print, items=tuple(merged), fmts=tuple(fmts) if any(fmts) else ())

    def print_items(self, a: Any, spec: str = "") -> list:
        """Print items of `a`: strings and (value, format spec) pairs."""
        from qd.frontend.exprs import Formatted, FString

        if isinstance(a, Expr):
            check_print_spec(spec, a.dtype)
            return [(a.value, spec)]
        if isinstance(a, Formatted):
            return self.print_items(a.value, a.spec)
        if isinstance(a, FString):
            out: list = []
            for x in a.items:
                out.extend(self.print_items(x) if not isinstance(x, str) else [x])
            return out
        if _e.is_matrix(a):
            shape = _v.shape_of(a)
            ents = list(a.entries)
            rows = [ents] if len(shape) == 1 else [ents[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])]
            out = ["["] if len(shape) == 2 else []
            for r, row in enumerate(rows):
                out.append("[")
                for k, e in enumerate(row):
                    if k:
                        out.append(", ")
                    out.extend(self.print_items(e, spec))
                out.append("]" if r == len(rows) - 1 else "], ")
            return out + (["]"] if len(shape) == 2 else [])
        return [format(a, spec)]

    # -------------------------------------------------------------- assert
    def build_assert(self, node: ast.Assert) -> None:
        test = self.visit(node.test)
        if not _bm.cfg().debug:
            return
        if not _runtime(test):
            if test:
                return
            test = _e.const(0, _dt.u1)  # a constant failure still fails at run time, as in Quadrants
        msg, args = self._assert_message(node)
        check = self.b.add_check(ir.CheckDecl(kind="assert", message=msg, loc=self.src.loc(node)))
        cond = self.truth(test) if isinstance(test, Expr) else test
        self.b.emit(ir.Check, cond=cond.value, check=check, args=tuple(a.value for a in args))

    def _assert_message(self, node: ast.Assert) -> tuple[str, list]:
        if node.msg is None:
            line = self.src.line(node.lineno).strip()
            return _esc(f"Assertion failed: {line}"), []
        if isinstance(node.msg, ast.BinOp) and isinstance(node.msg.op, ast.Mod) and \
                isinstance(node.msg.left, ast.Constant) and isinstance(node.msg.left.value, str):
            vals = self.visit(node.msg.right)
            vals = list(vals) if isinstance(vals, tuple) else [vals]
            return self._format_items(re.split(r"(%[-+ #0]*\d*(?:\.\d+)?[diouxXeEfFgGs])", node.msg.left.value),
                                      vals)
        m = self.visit(node.msg)
        from qd.frontend.exprs import FString

        if isinstance(m, FString):
            from qd.frontend.exprs import Formatted

            out, args = "", []
            for it in m.items:
                spec = ""
                if isinstance(it, Formatted):
                    it, spec = it.value, it.spec
                if isinstance(it, Expr):
                    out += "{%d%s}" % (len(args), ":" + spec if spec else "")
                    args.append(it)
                elif _e.is_matrix(it):
                    raise QuadrantsSyntaxError("assert messages may format scalars only")
                else:
                    out += _esc(str(it))
            return out, args
        if _runtime(m):
            raise QuadrantsSyntaxError("assert info must be constant or formatted string")
        return _esc(str(m)), []

    def _format_items(self, parts: list[str], vals: list) -> tuple[str, list]:
        out, args, k = "", [], 0
        for i, p in enumerate(parts):
            if i % 2 == 0:
                out += _esc(p)
                continue
            v = vals[k] if k < len(vals) else ""
            k += 1
            if isinstance(v, Expr):
                out += "{%d}" % len(args)
                args.append(v)
            else:
                out += _esc(p % (v,))
        return out, args

    # -------------------------------------------------------------- returns
    def kernel_return(self, node: ast.Return, value: Any) -> None:
        rt = self.ctx.return_type
        if value is None:
            if rt is not None:
                raise QuadrantsSyntaxError("Kernel has a return type but does not have a return statement")
            self.b.emit(ir.Return, values=())
            return
        if rt is None:
            raise QuadrantsSyntaxError("A kernel with a return value must be annotated with a return type, "
                                       "e.g. def func() -> qd.f32")
        vals = flatten_return(value, rt)
        dts = ret_dtypes(rt)
        if len(vals) != len(dts):
            raise QuadrantsTypeError(f"the kernel returns {len(vals)} values but its annotation declares {len(dts)}")
        self.b.emit(ir.Return, values=tuple(_e.cast_expr(v, d).value for v, d in zip(vals, dts)))

    def func_return_value(self, value: Any) -> Any:
        rt = self.ctx.return_type
        if rt is None or value is None:
            return value
        return coerce(value, rt)


def check_print_spec(spec: str, dt: Any) -> None:
    """Quadrants' compile-time check of a printf conversion against the value's dtype."""
    conv = spec[-1:] if spec else ""
    if not conv or conv not in "csdioxXufFeEaAgGnp":
        return
    if conv in "csnp":
        raise QuadrantsTypeError(f"conversion '{conv}' is not supported.")
    ok = (dt.is_float if conv in "fFeEaAgG" else
          dt.is_int and dt.is_signed if conv in "di" else dt.is_int and not dt.is_signed)
    if not ok:
        raise QuadrantsTypeError(f"'{spec}' doesn't match '{dt}'.")


def _esc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def ret_dtypes(rt: Any) -> tuple:
    """Flat scalar dtypes of a return annotation (scalar, vector/matrix type, or tuple of them)."""
    if isinstance(rt, (tuple, list)):
        return tuple(d for r in rt for d in ret_dtypes(r))
    if isinstance(rt, _s.StructType):
        return tuple(_s.leaf_dtypes(rt))
    if isinstance(rt, MatrixType):
        n = rt.n * (rt.m if rt.ndim == 2 else 1)
        return (rt.dtype or _bm.cfg().default_fp,) * n
    return (dtypes.to_dtype(rt),)


def coerce(value: Any, rt: Any) -> Any:
    """`value` cast to the annotation `rt` (scalars, matrices, tuples)."""
    if isinstance(rt, (tuple, list)):
        if not isinstance(value, (tuple, list)) or len(value) != len(rt):
            raise QuadrantsTypeError(f"return value does not match the declared return type {rt}")
        return tuple(coerce(v, r) for v, r in zip(value, rt))
    if isinstance(rt, _s.StructType):
        _s.flatten(value, rt)  # checks the value against the type
        return _s.construct(rt, (value,), {})
    if isinstance(rt, MatrixType):
        if not _e.is_matrix(value):
            raise QuadrantsTypeError(f"expected a {rt} return value, got {type(value).__name__}")
        if tuple(_v.shape_of(value)) != tuple(rt.shape):
            raise QuadrantsTypeError(f"Return matrix shape mismatch, expecting {rt.shape}, got {_v.shape_of(value)}")
        return _e.cast(value, rt.dtype) if rt.dtype is not None else value
    if _e.is_matrix(value):
        raise QuadrantsTypeError(f"expected a scalar {rt} return value, got a vector/matrix")
    return _e.cast_expr(_e.as_expr(value), dtypes.to_dtype(rt))


def flatten_return(value: Any, rt: Any) -> list:
    v = coerce(value, rt)
    out: list = []

    def walk(x: Any) -> None:
        if isinstance(x, _s.StructVal):
            out.extend(_s.flatten(x, x.stype))
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        elif _e.is_matrix(x):
            out.extend(_e.as_expr(e) for e in x.entries)
        else:
            out.append(_e.as_expr(x))
    walk(v)
    return out
