"""Expression visitors: each returns a Python value (compile-time), an `Expr`, a Matrix, or a `GlobalTensor`."""

from __future__ import annotations

import ast
import dataclasses
import operator
import string
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend import mindex as _mi
from qd.frontend import purity as _purity
from qd.frontend import structs as _s
from qd.frontend import values as _v
from qd.frontend import simt as _simt
from qd.frontend.expr import Expr
from qd.frontend.views import ViewValue
from qd.types import dtypes
from qd.types.hooks import impl as _impl

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
           ast.LShift: "shl", ast.RShift: "shr"}
_PYOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
          ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
          ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.MatMult: operator.matmul}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PYCMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
          ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
          ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_SWIZZLE = {c: i for i, c in enumerate("xyzw")} | {c: i for i, c in enumerate("rgba")}


class FString:
    """An f-string with runtime parts: a sequence of str and Expr items (for print / assert)."""

    def __init__(self, items: list) -> None:
        self.items = items


class Formatted:
    """A runtime value with a Python format spec (`f"{x:.2f}"`), for print and assert messages."""

    def __init__(self, value: Any, spec: str) -> None:
        self.value = value
        self.spec = spec


def format_runtime(fmt: str, args: tuple, kwargs: dict) -> Any:
    """`fmt.format(*args, **kwargs)` in a kernel, as Quadrants does it: specs are printf conversions
    (`{:.10d}`), automatic fields count apart from numbered ones, every argument must be used. An FString
    when some argument is a runtime value, else the formatted str."""
    from qd.base.printf import printf_format

    items: list = []
    auto, top, used = 0, 0, set()
    for literal, field_name, spec, _conv in string.Formatter().parse(fmt):
        if literal:
            items.append(literal)
        if field_name is None:
            continue
        if field_name == "" or field_name.isdigit():
            i = auto if field_name == "" else int(field_name)
            auto += field_name == ""
            top = max(top, i + 1)
            v = args[i] if i < len(args) else None
        elif field_name not in kwargs:
            raise QuadrantsSyntaxError(f"Keyword '{field_name}' not found.")
        else:
            used.add(field_name)
            v = kwargs[field_name]
        if is_runtime(v):
            items.append(Formatted(v, spec or ""))
        elif v is not None:
            items.append(printf_format(v, spec, isinstance(v, float)) if spec else str(v))
    if top != len(args):
        raise QuadrantsSyntaxError(f"Expected {top} positional argument(s), but received {len(args)} instead.")
    for k in kwargs:
        if k not in used:
            raise QuadrantsSyntaxError(f"Keyword '{k}' not used.")
    return "".join(items) if all(isinstance(x, str) for x in items) else FString(items)


def is_runtime(x: Any) -> bool:
    return isinstance(x, Expr) or _e.is_matrix(x)


class ExprMixin:
    # -------------------------------------------------------------- names and constants
    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        found, binding = self.ctx.find_local(node.id)
        if found:
            return _v.read(binding)
        value = self.ctx.lookup(node.id)
        if self.b.pure:
            _purity.check_name(self, node.id, value)
        return self.wrap_global(value, node.id)

    def wrap_global(self, obj: Any, name: str = "") -> Any:
        """Fields and captured ndarrays become `GlobalTensor`s of this kernel; other objects pass through."""
        if isinstance(obj, (int, float, bool, str, type(None), Expr, _v.GlobalTensor)):
            return obj
        if type(obj) in _impl.TENSOR_TYPES:  # a `qd.Tensor` wrapper: the kernel sees its field or ndarray
            obj = obj._unwrap()
        if isinstance(obj, (_impl.StructField, _impl.Struct)):
            return _s.bind_field(self, obj, name) if isinstance(obj, _impl.StructField) else _s.from_host(obj)
        if _v.global_kind(obj) is not None:
            return _v.bind_global_object(obj, name)
        if isinstance(obj, _impl.BufferView):  # a compile-time view (template, captured global)
            from qd.frontend.views import from_host

            return from_host(obj, self.wrap_global(obj.arr, name))
        return obj

    def visit_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._elements(node.elts))

    def visit_List(self, node: ast.List) -> list:
        return self._elements(node.elts)

    def _elements(self, elts: list[ast.expr]) -> list:
        out: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.visit(e.value)
                if isinstance(v, Expr):
                    raise QuadrantsSyntaxError("cannot unpack a runtime scalar with '*'")
                out.extend(v.entries if _e.is_matrix(v) else v)
            else:
                out.append(self.visit(e))
        return out

    def visit_Dict(self, node: ast.Dict) -> dict:
        out: dict = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.visit(v))
            else:
                out[self.visit(k)] = self.visit(v)
        return out

    def visit_Slice(self, node: ast.Slice) -> slice:
        f = [self.visit(x) if x is not None else None for x in (node.lower, node.upper, node.step)]
        if any(isinstance(x, Expr) for x in f):
            raise QuadrantsSyntaxError("Quadrants does not support variables in slice now, please use constant "
                                       "instead of it: the bounds and step of a slice must be compile-time values "
                                       "(literals, qd.static loop indices, template arguments); index entries one "
                                       "by one for a runtime range")
        return slice(*f)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> Any:
        value = self.visit(node.value)
        self.assign_name(node.target.id, value)
        return self.visit_Name(ast.Name(id=node.target.id, ctx=ast.Load()))

    # -------------------------------------------------------------- attributes and subscripts
    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        value = self.attribute(base, node.attr)
        if self.b.pure:
            _purity.check_attribute(self, node, base, value)
        return value

    def attribute(self, base: Any, attr: str) -> Any:
        if isinstance(base, (_s.StructVal, _s.StructFieldRef)):
            return _s.attribute(base, attr)
        if isinstance(base, _v.StructRef):
            return base.member(attr)
        if isinstance(base, _v.LiftedObject):
            return self.lifted_member(base, attr)
        if isinstance(base, _v.GlobalTensor):
            if attr == "shape":
                return base.shape
            if attr == "dtype":
                return base.dtype
            if base.obj is not None:  # `x.grad` / `x.dual` are fields of their own: bind them too
                return self.wrap_global(getattr(base.obj, attr), f"{base.decl.name}.{attr}")
            if attr == "grad" and base.decl.kind == "ndarray" and base.decl.arg >= 0:
                # A hidden ndarray argument `<name>.grad`, which the launch binds to the argument's gradient.
                if base.decl.name.endswith(".grad"):  # parameter names have no dots: a hidden grad argument
                    raise QuadrantsSyntaxError(f"'{base.decl.name}' has no attribute 'grad' inside kernels")
                bi = self.b.hidden_arg(base.decl, attr)
                return _v.GlobalTensor(bi, self.b.buffers[bi], layout=base.layout)
            if attr == "dual":
                raise QuadrantsSyntaxError("ndarray arguments have no attribute 'dual' inside kernels "
                                           "(qd ndarrays have no dual; forward mode over ndarrays is not supported)")
            raise QuadrantsSyntaxError(f"ndarray arguments have no attribute '{attr}' inside kernels")
        if _e.is_matrix(base) and attr and all(c in _SWIZZLE for c in attr) and not hasattr(type(base), attr):
            idx = [_SWIZZLE[c] for c in attr]
            if max(idx) >= len(base.entries):
                raise QuadrantsSyntaxError(f"swizzle '{attr}' out of range for a vector of size {len(base.entries)}")
            picked = [base.entries[i] for i in idx]
            return picked[0] if len(picked) == 1 else _v.make_matrix(picked, (len(picked),))
        if isinstance(base, Expr):
            raise QuadrantsSyntaxError(f"a scalar runtime value has no attribute '{attr}'")
        return self.wrap_global(getattr(base, attr), attr)

    def lifted_member(self, base: _v.LiftedObject, attr: str) -> Any:
        """`s.attr` of a `LiftedObject`: primitives are runtime args, objects stay lifted, qd.func methods
        bind to the lifted object, fields/ndarrays and everything else as for any template object."""
        method = getattr(type(base.obj), attr, None)
        if getattr(method, "_is_qd_func", False):
            return method.__get__(base, type(base.obj))
        v = getattr(base.obj, attr)
        path = base.path + (("a", attr),)
        if type(v) in (bool, int, float):
            name = ".".join(str(k) for _, k in path)
            return Expr(self.b.lifted_arg(base.value_index, path, v, name))
        if _v.global_kind(v) is None and not isinstance(v, (str, type(None), _impl.BufferView, tuple, list, dict)) \
                and (hasattr(v, "__dict__") or dataclasses.is_dataclass(v)) and not callable(v):
            return _v.LiftedObject(v, base.value_index, path)
        return self.wrap_global(v, attr)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        if isinstance(base, ViewValue) and isinstance(node.slice, ast.Slice):
            return self.view_slice(base, node.slice)
        tiled = _simt.tile_slice(self, base, node.slice)
        if tiled is not None:
            return tiled
        idx = self.visit(node.slice)
        return self.subscript(base, idx)

    def view_slice(self, view: ViewValue, node: ast.Slice) -> ViewValue:
        """`view[a:b]` in a kernel: a subview; bounds may be runtime values, a step is refused."""
        if node.step is not None:
            raise QuadrantsSyntaxError("BufferView slice does not support an explicit step in kernels")
        lower, upper = (self.visit(x) if x is not None else None for x in (node.lower, node.upper))
        return view.slice(lower, upper)

    def index_list(self, idx: Any) -> list:
        if idx is None:
            return []
        return list(idx) if isinstance(idx, tuple) else [idx]

    def subscript(self, base: Any, idx: Any) -> Any:
        if isinstance(base, _s.UnpackedGroup):
            return base.sv.member(base.member_name(idx))
        if isinstance(base, _s.StructVal) and hasattr(base.stype, "subscript"):  # `tile[:]` (qd.simt's tiles)
            return base.stype.subscript(base, idx)
        if isinstance(base, (_v.GlobalTensor, ViewValue)):
            return base.load(self.index_list(idx))
        if _e.is_matrix(base):
            return self.matrix_index(base, idx)
        if isinstance(base, Expr):
            raise QuadrantsTypeError("a scalar runtime value cannot be indexed")
        if isinstance(idx, Expr) or (isinstance(idx, tuple) and any(isinstance(i, Expr) for i in idx)):
            raise QuadrantsSyntaxError(f"a {type(base).__name__} can only be indexed by compile-time values; "
                                       "use qd.static(...) loop indices or a qd.Vector")
        return self.wrap_global(base[idx])

    def matrix_index(self, m: Any, idx: Any) -> Any:
        """`m[idx]` of a vector/matrix value: an entry, or a vector/matrix for slices (`frontend/mindex.py`)."""
        ents = list(m.entries)
        # an element of a boundary="clamp" ndarray: its flat element offset clamps too (Quadrants')
        clamp = bool(ents) and all(isinstance(e, Expr) and isinstance(e.ptr, ir.GlobalPtr)
                                   and e.ptr.buffer in self.b.clamped for e in ents)
        sel = _mi.select(_v.shape_of(m), idx, check=not clamp)
        picked = _mi.gather(ents, sel, clamp)
        return _v.make_matrix(picked, sel.shape) if sel.shape else picked[0]

    # -------------------------------------------------------------- operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        # `a + b + c + ...` nests to the left: its spine is walked in a loop, not by recursion, so a long sum does not
        # exhaust Python's recursion limit (each inner node keeps its own position for errors)
        spine = [node]
        while isinstance(spine[-1].left, ast.BinOp):
            spine.append(spine[-1].left)
        acc = self.visit(spine[-1].left)
        for inner in reversed(spine[1:]):
            acc = self.at(inner, self._binop, acc)
        return self._binop(node, acc)

    def _binop(self, node: ast.BinOp, lhs: Any) -> Any:
        rhs = self.visit(node.right)
        if type(node.op) is ast.MatMult or not (is_runtime(lhs) or is_runtime(rhs)):
            return _PYOPS[type(node.op)](lhs, rhs)
        return _e.binary(_BINOPS[type(node.op)], lhs, rhs)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.visit(node.operand)
        op = type(node.op)
        if not is_runtime(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
                    ast.Not: operator.not_}[op](v)
        name = {ast.USub: "neg", ast.Invert: "bit_not", ast.Not: "logical_not"}.get(op)
        return v if name is None else _e.unary(name, v)

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.visit(right_node)
            if not (is_runtime(left) or is_runtime(right)):
                r = _PYCMP[type(op)](left, right)
            elif type(op) in _CMPOPS:
                r = _e.binary(_CMPOPS[type(op)], left, right)
            else:
                raise QuadrantsSyntaxError(f'"{type(op).__name__}" is only supported on compile-time values')
            result = r if result is True else self._and(result, r)
            left = right
        return result

    def _and(self, a: Any, b: Any) -> Any:
        if not is_runtime(a) and not is_runtime(b):
            return a and b
        return _e.binary("and", self._bool(a), self._bool(b))

    def _bool(self, x: Any) -> Any:
        if _e.is_matrix(x):
            return x._map(self._bool)
        if isinstance(x, Expr):
            return x if x.dtype is dtypes.u1 else _e.binary("ne", x, 0)
        return bool(x)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        acc = self.visit(node.values[0])
        for vnode in node.values[1:]:
            if not is_runtime(acc):
                if bool(acc) != is_and:  # static short-circuit
                    return acc
                acc = self.visit(vnode)
                continue
            acc = self._runtime_boolop(acc, vnode, is_and)
        return acc

    def _runtime_boolop(self, acc: Any, vnode: ast.expr, is_and: bool) -> Any:
        """`acc and/or <vnode>` with a runtime `acc`: Python's value semantics (`a and b` is `b if a else a`),
        short-circuited unless `short_circuit_operators=False` (then both sides run; u1 for matrices)."""
        from qd.frontend.builder import cfg

        if _e.is_matrix(acc) or not cfg().short_circuit_operators:
            rhs = self.visit(vnode)
            if isinstance(acc, Expr) and not _e.is_matrix(rhs) and not (acc.dtype is dtypes.u1 and _is_bool(rhs)):
                t = self._bool(acc)
                return _e.select(t, rhs, acc) if is_and else _e.select(t, acc, rhs)
            return _e.binary("and" if is_and else "or", self._bool(acc), self._bool(rhs))
        b = self.b
        first = self._bool(acc)
        cond = first if is_and else _e.unary("logical_not", first)
        outer, pos = b.stack[-1], len(b.stack[-1])
        b.push()
        b.depth += 1
        try:
            rhs = self.visit(vnode)
            by_value = not _e.is_matrix(rhs) and not (acc.dtype is dtypes.u1 and _is_bool(rhs))
            rhs = _e.as_expr(rhs if by_value else self._bool(rhs))
            res = ir.Alloca(loc=b.loc, dtype=dtypes.promote(acc.dtype, rhs.dtype) if by_value else dtypes.u1)
            b.store(res, rhs.value)
        finally:
            b.depth -= 1
            then = b.pop()
        # The result's dtype is known only now: its alloca and initial store go before the branch.
        b.push()
        b.store(res, (acc if by_value else first).value)
        outer[pos:pos] = [res, *b.pop().stmts]
        b.emit(ir.If, cond=cond.value, then=then)
        return Expr(b.load(res))

    # -------------------------------------------------------------- strings and comprehensions
    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        items: list = []
        for v in node.values:
            r = self.visit(v)
            items.extend(r.items if isinstance(r, FString) else [r])
        if all(isinstance(i, str) for i in items):
            return "".join(items)
        return FString(items)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:
        v = self.visit(node.value)
        spec = self.visit(node.format_spec) if node.format_spec is not None else ""
        if isinstance(v, (Expr,)) or _e.is_matrix(v):
            prefix = []
            return FString(prefix + [Formatted(v, spec if isinstance(spec, str) else "")])
        conv = {115: str, 114: repr, 97: ascii}.get(node.conversion, None)
        if conv is not None:
            v = conv(v)
        spec = spec if isinstance(spec, str) else ""
        if spec and isinstance(v, (int, float)) and not isinstance(v, bool):
            from qd.base.printf import printf_format

            return printf_format(v, spec, isinstance(v, float))  # printf conversions, as for runtime values
        return format(v, spec)

    def visit_ListComp(self, node: ast.ListComp) -> list:
        out: list = []
        self._comprehension(node.generators, lambda: out.append(self.visit(node.elt)))
        return out

    visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> dict:
        out: dict = {}

        def add() -> None:
            out[self.visit(node.key)] = self.visit(node.value)
        self._comprehension(node.generators, add)
        return out

    def _comprehension(self, gens: list[ast.comprehension], emit_one: Any) -> None:
        if not gens:
            emit_one()
            return
        g = gens[0]
        it = self.visit(g.iter)
        if is_runtime(it) or isinstance(it, _v.GlobalTensor):
            raise QuadrantsSyntaxError("comprehensions can only iterate over compile-time values")
        self.ctx.push_scope()
        try:
            for item in it:
                self.bind_static_target(g.target, item)
                conds = [self.visit(c) for c in g.ifs]
                if any(is_runtime(c) for c in conds):
                    raise QuadrantsSyntaxError("comprehension conditions must be compile-time values")
                if all(conds):
                    self._comprehension(gens[1:], emit_one)
        finally:
            self.ctx.pop_scope()

    def visit_Starred(self, node: ast.Starred) -> Any:
        raise QuadrantsSyntaxError("'*' unpacking is only supported in calls, lists and tuples of compile-time values")


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or isinstance(x, Expr) and x.dtype is dtypes.u1


def op_of_aug(op: ast.operator) -> str:
    return _BINOPS.get(type(op), "")


__all__ = ["ExprMixin", "FString", "is_runtime", "op_of_aug"]
