"""`Expr`: a scalar value inside a kernel being compiled, and the typed arithmetic on it.

An `Expr` wraps an `ir.Value` (`.value`) and knows its dtype. Its operators emit `OpStmt`s into the
current builder, following Quadrants' type rules (`qd.types.dtypes.promote`): Python int literals
are `default_ip`, float literals `default_fp`, bools u1; `/` on ints gives default_fp; comparisons
give u1; shifts and `**` with an integer exponent keep the lhs type. Operations between two Python
numbers are evaluated in Python (constant folding, as Quadrants does). Operands that look like
matrices (they have `_map` / `_zip`) are handled elementwise.

`Expr.ptr` is set when the value was loaded from an addressable place (an `Alloca` or a
`GlobalPtr`); the transformer uses it for atomics and stores through subscripts.
"""

from __future__ import annotations

import linecache
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _b
from qd.ops import FLOAT_UNARY, INFO, TRANSCENDENTAL, Op
from qd.types import dtypes
from qd.types.dtypes import DataType, promote

_NUMBER = (int, float, bool, np.integer, np.floating, np.bool_)


class Expr:
    """A scalar runtime value in a kernel being compiled."""

    __slots__ = ("ptr", "value")
    __hash__ = object.__hash__

    def __init__(self, value: ir.Value, ptr: ir.Value | None = None) -> None:
        self.value = value
        self.ptr = ptr

    @property
    def dtype(self) -> DataType:
        return self.value.dtype

    def __repr__(self) -> str:
        return f"<qd Expr {self.dtype}>"

    def __bool__(self) -> bool:
        raise QuadrantsSyntaxError(
            "a runtime value (qd Expr) is used where Python needs a bool at compile time; write the "
            "condition as a runtime `if`/`while`, use `qd.select`, or wrap compile-time values in "
            "`qd.static(...)`")

    def __index__(self) -> int:
        raise QuadrantsTypeError("a runtime value cannot be used as a Python integer (e.g. in range "
                                 "of a static loop or as a list index); use qd.static values")

    def __iter__(self) -> Any:
        raise QuadrantsTypeError("a scalar runtime value is not iterable")

    # arithmetic
    def __add__(self, o: Any) -> Any: return binary("add", self, o)
    def __radd__(self, o: Any) -> Any: return binary("add", o, self)
    def __sub__(self, o: Any) -> Any: return binary("sub", self, o)
    def __rsub__(self, o: Any) -> Any: return binary("sub", o, self)
    def __mul__(self, o: Any) -> Any: return binary("mul", self, o)
    def __rmul__(self, o: Any) -> Any: return binary("mul", o, self)
    def __truediv__(self, o: Any) -> Any: return binary("truediv", self, o)
    def __rtruediv__(self, o: Any) -> Any: return binary("truediv", o, self)
    def __floordiv__(self, o: Any) -> Any: return binary("floordiv", self, o)
    def __rfloordiv__(self, o: Any) -> Any: return binary("floordiv", o, self)
    def __mod__(self, o: Any) -> Any: return binary("mod", self, o)
    def __rmod__(self, o: Any) -> Any: return binary("mod", o, self)
    def __pow__(self, o: Any) -> Any: return binary("pow", self, o)
    def __rpow__(self, o: Any) -> Any: return binary("pow", o, self)
    def __and__(self, o: Any) -> Any: return binary("and", self, o)
    def __rand__(self, o: Any) -> Any: return binary("and", o, self)
    def __or__(self, o: Any) -> Any: return binary("or", self, o)
    def __ror__(self, o: Any) -> Any: return binary("or", o, self)
    def __xor__(self, o: Any) -> Any: return binary("xor", self, o)
    def __rxor__(self, o: Any) -> Any: return binary("xor", o, self)
    def __lshift__(self, o: Any) -> Any: return binary("shl", self, o)
    def __rlshift__(self, o: Any) -> Any: return binary("shl", o, self)
    def __rshift__(self, o: Any) -> Any: return binary("shr", self, o)
    def __rrshift__(self, o: Any) -> Any: return binary("shr", o, self)
    def __lt__(self, o: Any) -> Any: return binary("lt", self, o)
    def __le__(self, o: Any) -> Any: return binary("le", self, o)
    def __gt__(self, o: Any) -> Any: return binary("gt", self, o)
    def __ge__(self, o: Any) -> Any: return binary("ge", self, o)
    def __eq__(self, o: object) -> Any: return binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: object) -> Any: return binary("ne", self, o)  # type: ignore[override]
    def __neg__(self) -> Any: return unary("neg", self)
    def __pos__(self) -> Any: return self
    def __invert__(self) -> Any: return unary("bit_not", self)
    def __abs__(self) -> Any: return unary("abs", self)


# ---------------------------------------------------------------- helpers

def is_expr(x: Any) -> bool:
    """True if `x` is a value of the kernel being compiled (a runtime expression), False for a Python value
    known at compile time."""
    return isinstance(x, Expr)


def is_number(x: Any) -> bool:
    return isinstance(x, _NUMBER)


def is_matrix(x: Any) -> bool:
    return hasattr(x, "_map") and hasattr(x, "_zip") and hasattr(x, "entries")


def literal_dtype(x: Any) -> DataType:
    """The dtype a Python/numpy scalar takes inside a kernel."""
    cfg = _b.cfg()
    if isinstance(x, (bool, np.bool_)):
        return dtypes.u1
    if isinstance(x, (int, np.integer)):
        return cfg.default_ip
    if isinstance(x, (float, np.floating)):
        return cfg.default_fp
    raise QuadrantsTypeError(f"Invalid constant scalar data type: {type(x).__name__}")


def bld() -> _b.Builder:
    b = _b.current()
    if b is None:
        raise QuadrantsSyntaxError("this operation is only available inside a qd.kernel / qd.func")
    return b


def const(value: Any, dtype: DataType | None = None) -> Expr:
    """A constant Expr of `value` (default dtype from its Python type)."""
    dt = dtype or literal_dtype(value)
    if dtype is None and dt.is_int and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        info = np.iinfo(dt.np_dtype)
        if not info.min <= int(value) <= info.max:
            raise QuadrantsTypeError(f"Integer literal {value} exceeded the range of default_ip: {dt}, please "
                                     f"specify the dtype via e.g. `qd.u64({value})`")
    return Expr(bld().const(dt, value))


def as_expr(x: Any) -> Expr:
    if isinstance(x, Expr):
        return x
    if is_number(x):
        return const(x)
    raise QuadrantsTypeError(f"cannot use a value of type {type(x).__name__} as a scalar in a kernel")


def cast_expr(x: Any, dtype: DataType) -> Expr:
    if isinstance(x, Expr):
        return x if x.dtype is dtype else Expr(bld().cast(x.value, dtype))
    return const(x, dtype) if is_number(x) else as_expr(x)


def _check_exponent(b: Any) -> None:
    """Debug mode: an integer power with a negative exponent is a runtime error (as in Quadrants)."""
    from qd import ir

    bb = bld()
    b = as_expr(b)
    ok = bb.op(Op.CMP_GE, (b.value, const(0, b.dtype).value), dtypes.u1)
    check = bb.add_check(ir.CheckDecl(kind="assert", message="Negative exponent in pow(int, int) is not "
                                      "allowed: the exponent is {0}", loc=bb.loc))
    bb.emit(ir.Check, cond=ok, check=check, args=(b.value,))


def emit(op: Op, args: tuple[Expr, ...], dtype: DataType) -> Expr:
    return Expr(bld().op(op, tuple(a.value for a in args), dtype))


# ---------------------------------------------------------------- binary ops

_PY_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
    "ne": operator.ne, "min": min, "max": max, "atan2": math.atan2,
    "bit_shr": lambda a, b: (a % (1 << 64)) >> b if a < 0 else a >> b,
}
_SAME = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "mod": Op.MOD, "min": Op.MIN, "max": Op.MAX}
_INT = {"and": Op.BIT_AND, "or": Op.BIT_OR, "xor": Op.BIT_XOR}
_SHIFT = {"shl": Op.SHL, "shr": Op.SHR, "bit_shr": Op.BIT_SHR}
_CMP = {"lt": Op.CMP_LT, "le": Op.CMP_LE, "gt": Op.CMP_GT, "ge": Op.CMP_GE, "eq": Op.CMP_EQ, "ne": Op.CMP_NE}
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
          "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=", "gt": ">",
          "ge": ">=", "eq": "==", "ne": "!=", "min": "min", "max": "max", "atan2": "atan2",
          "bit_shr": "bit_shr"}


def binary(name: str, a: Any, b: Any) -> Any:
    """`a <name> b` on Exprs, Python numbers or matrices (elementwise)."""
    if is_matrix(a):
        return a._zip(b, lambda x, y: binary(name, x, y))
    if is_matrix(b):
        return b._map(lambda y: binary(name, a, y))
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        if is_number(a) and is_number(b):
            return _PY_BINARY[name](a, b)
        return NotImplemented
    for x in (a, b):
        if not isinstance(x, Expr) and not is_number(x):
            raise QuadrantsTypeError(f"unsupported operand type for '{SYMBOL[name]}': {type(x).__name__}")
    return _expr_binary(name, a, b)


def _type_error(name: str, a: DataType, b: DataType) -> QuadrantsTypeError:
    return QuadrantsTypeError(f"unsupported operand type(s) for '{SYMBOL[name]}': '{a}' and '{b}'")


def _to_float(x: Expr) -> Expr:
    return x if x.dtype.is_float else cast_expr(x, _b.cfg().default_fp)


def _dt(x: Any) -> DataType:
    return x.dtype if isinstance(x, Expr) else literal_dtype(x)


def _expr_binary(name: str, a: Any, b: Any) -> Expr:
    """`a <name> b` where at least one side is an Expr; Python numbers become constants of the final type."""
    ta, tb = _dt(a), _dt(b)
    if name in _CMP:
        t = promote(ta, tb)
        return emit(_CMP[name], (cast_expr(a, t), cast_expr(b, t)), dtypes.u1)
    if name in _SHIFT or name in _INT:
        if not (ta.is_int and tb.is_int):
            raise _type_error(name, ta, tb)
        t = ta if name in _SHIFT else promote(ta, tb)
        a, b = cast_expr(a, t), cast_expr(b, t)
        r = emit(_SHIFT.get(name) or _INT[name], (a, b), t)
        if name == "shl" and _b.cfg().debug:
            _overflow_check("shl", a, b, r)
        return r
    if name == "truediv":
        fp = _b.cfg().default_fp
        t = promote(ta if ta.is_float else fp, tb if tb.is_float else fp)
        return emit(Op.DIV, (cast_expr(a, t), cast_expr(b, t)), t)
    if name == "atan2":
        t = dtypes.f64 if dtypes.f64 in (ta, tb) else dtypes.f32
        return emit(Op.ATAN2, (cast_expr(a, t), cast_expr(b, t)), t)
    if name == "pow" and tb.is_int:
        if ta.is_int and _b.cfg().debug:
            _check_exponent(b)
        return emit(Op.POW, (cast_expr(a, ta), cast_expr(b, ta)), ta)
    t = promote(ta, tb)
    a, b = cast_expr(a, t), cast_expr(b, t)
    if name == "floordiv":
        if t.is_float:
            return emit(Op.FLOOR, (emit(Op.DIV, (a, b), t),), t)
        return emit(Op.FLOORDIV, (a, b), t)
    if name == "pow":
        return emit(Op.POW, (a, b), t)
    if name in _SAME:
        r = emit(_SAME[name], (a, b), t)
        if name in _OVERFLOW and t.is_int and t is not dtypes.u1 and _b.cfg().debug:
            _overflow_check(name, a, b, r)
        return r
    raise QuadrantsSyntaxError(f"unknown binary operator {name}")  # pragma: no cover


_OVERFLOW = {"add": "Addition", "sub": "Subtraction", "mul": "Multiplication", "shl": "Shift left"}


def _overflow_check(name: str, a: Expr, b: Expr, r: Expr) -> None:
    """With `debug=True`, an integer `+ - * <<` that wraps prints Quadrants' warning (`<Op> overflow
    detected`, the file:line and the source line) at the end of the launch; the wrapped value is kept.
    The condition uses only ops that cannot overflow themselves."""
    t = r.dtype
    zero = const(0, t)
    if name == "add":
        bad = _lt(_bits(_bits(a, r, Op.BIT_XOR), _bits(b, r, Op.BIT_XOR), Op.BIT_AND), zero) if t.is_signed \
            else _lt(r, a)
    elif name == "sub":
        bad = _lt(_bits(_bits(a, b, Op.BIT_XOR), _bits(a, r, Op.BIT_XOR), Op.BIT_AND), zero) if t.is_signed \
            else _lt(a, b)
    elif name == "mul":  # r // a != b or r % a != 0 (a != 0), plus -1 * MIN (whose check division wraps)
        nz = emit(Op.CMP_NE, (a, zero), dtypes.u1)
        safe_a = emit(Op.SELECT, (nz, a, const(1, t)), t)
        off = emit(Op.BIT_OR, (emit(Op.CMP_NE, (emit(Op.FLOORDIV, (r, safe_a), t), b), dtypes.u1),
                                emit(Op.CMP_NE, (emit(Op.MOD, (r, safe_a), t), zero), dtypes.u1)), dtypes.u1)
        bad = emit(Op.BIT_AND, (nz, off), dtypes.u1)
        if t.is_signed:
            lo = const(-(1 << (t.bits - 1)), t)
            edge = emit(Op.BIT_AND, (emit(Op.CMP_EQ, (a, const(-1, t)), dtypes.u1),
                                     emit(Op.CMP_EQ, (b, lo), dtypes.u1)), dtypes.u1)
            bad = emit(Op.BIT_OR, (bad, edge), dtypes.u1)
    else:  # shl: shifting back does not give `a`
        bad = emit(Op.CMP_NE, (emit(Op.SHR, (r, b), t), a), dtypes.u1)
    bld = _b.current()
    loc = bld.loc
    where = f" in {loc.file}:{loc.line}:\n    {linecache.getline(loc.file, loc.line).strip()}" if loc else ""
    bld.push()
    bld.emit(ir.Print, items=(f"{_OVERFLOW[name]} overflow detected{where}",))
    bld.emit(ir.If, cond=bad.value, then=bld.pop())


def _bits(x: Expr, y: Expr, op: Op) -> Expr:
    return emit(op, (x, y), x.dtype)


def _lt(x: Expr, y: Expr) -> Expr:
    return emit(Op.CMP_LT, (x, y), dtypes.u1)


# ---------------------------------------------------------------- unary ops

_FLOAT_UNARY = {op.value: op for op in FLOAT_UNARY}  # the builtin's name is the op's (`qd.sqrt` -> Op.SQRT)
_PY_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": operator.neg, "abs": abs, "bit_not": operator.invert, "logical_not": operator.not_,
    "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x), "floor": math.floor, "ceil": math.ceil, "round": round,
    "popcnt": lambda x: bin(x & ((1 << 64) - 1) if x < 0 else x).count("1"),  # noqa: FURB161 (numpy ints too)
    # on Python numbers, a transcendental is Python's function of the op table's C name (math.sin, ...)
    **{op.value: getattr(math, INFO[op].libm) for op in TRANSCENDENTAL if INFO[op].arity == 1},
}


def unary(name: str, a: Any) -> Any:
    """`<name>(a)` on an Expr, a Python number or a matrix (elementwise)."""
    if is_matrix(a):
        return a._map(lambda x: unary(name, x))
    if not isinstance(a, Expr):
        if not is_number(a):
            raise QuadrantsTypeError(f"{name}() got a value of type {type(a).__name__}")
        if name == "clz":
            return 32 - int(a).bit_length() if a >= 0 else 0
        return _PY_UNARY[name](a)
    if name in _FLOAT_UNARY:
        a = _to_float(a)
        return emit(_FLOAT_UNARY[name], (a,), a.dtype)
    if name == "neg":
        return emit(Op.NEG, (a,), a.dtype)
    if name == "abs":
        return emit(Op.ABS, (a,), a.dtype)
    if name == "logical_not":
        if a.dtype.is_float:  # as in Quadrants: `not x` needs an integer (or u1) operand
            raise QuadrantsTypeError(f"'logical_not' takes integral inputs only, however '{a.dtype}' is provided")
        return emit(Op.LOGICAL_NOT, (a,), dtypes.u1)
    if name in ("bit_not", "popcnt", "clz"):
        if not a.dtype.is_int:
            raise QuadrantsTypeError(f"'{name}' takes integral inputs only, however '{a.dtype}' is provided")
        return emit({"bit_not": Op.BIT_NOT, "popcnt": Op.POPCNT, "clz": Op.CLZ}[name], (a,), a.dtype)
    raise QuadrantsSyntaxError(f"unknown unary operator {name}")  # pragma: no cover


def select(cond: Any, a: Any, b: Any) -> Any:
    """`cond ? a : b` with both evaluated (elementwise over matrices)."""
    for i, x in enumerate((cond, a, b)):
        if is_matrix(x):
            return _select_matrix(cond, a, b, x)
    if not any(isinstance(x, Expr) for x in (cond, a, b)):
        return a if cond else b
    c = as_expr(cond)
    if c.dtype is not dtypes.u1:
        c = binary("ne", c, 0)
    ea, eb = as_expr(a), as_expr(b)
    t = promote(ea.dtype, eb.dtype)
    return emit(Op.SELECT, (c, cast_expr(ea, t), cast_expr(eb, t)), t)


def _select_matrix(cond: Any, a: Any, b: Any, proto: Any) -> Any:
    shapes = {x.get_shape() if hasattr(x, "get_shape") else len(x.entries) for x in (cond, a, b) if is_matrix(x)}
    if len(shapes) > 1:
        raise QuadrantsTypeError(f"select: the condition and the values must have one shape (a scalar is "
                                 f"broadcast), got shapes {sorted(shapes, key=str)}")

    def entries(x: Any) -> list:
        return list(x.entries) if is_matrix(x) else [x] * len(proto.entries)
    out = [select(c, x, y) for c, x, y in zip(entries(cond), entries(a), entries(b))]
    return proto._map_entries(out) if hasattr(proto, "_map_entries") else _rebuild(proto, out)


def _rebuild(proto: Any, entries: list) -> Any:
    it = iter(entries)
    return proto._map(lambda _: next(it))


def cast(x: Any, dtype: Any) -> Any:
    """Value conversion of an Expr / number / matrix to `dtype`."""
    dt = dtypes.to_dtype(dtype)
    if is_matrix(x):
        return x._map(lambda e: cast(e, dt))
    if isinstance(x, Expr):
        return cast_expr(x, dt)
    if _b.current() is not None:
        return const(x, dt)
    return host_cast(x, dt)


def host_cast(x: Any, dt: DataType) -> Any:
    """Python-scope conversion of a number to `dt` (a numpy scalar; wraps like a kernel cast)."""
    if dt is dtypes.u1:
        return np.bool_(bool(x))
    if dt.is_float:
        return dt.np_dtype.type(x)
    return dt.np_dtype.type(_b.normalize_const(dt, int(x)))


def bit_cast(x: Any, dtype: Any) -> Any:
    """`x`'s bits read as `dtype` (same width). A numpy scalar keeps its own dtype (`np.float16` is f16)."""
    dt = dtypes.to_dtype(dtype)
    if isinstance(x, Expr):
        _same_width(x.dtype, dt, x.dtype)
        return emit(Op.BIT_CAST, (x,), dt)
    if _b.current() is not None:
        return bit_cast(const(x, x_dt) if (x_dt := _numpy_dtype(x)) else const(x), dt)
    src_dt = _host_bit_cast_source(x)
    _same_width(src_dt, dt, f"{x!r} ({src_dt})")
    return np.array(x, dtype=src_dt.np_dtype).view(dt.np_dtype)[()]


def _numpy_dtype(x: Any) -> DataType | None:
    return dtypes.to_dtype(x.dtype) if isinstance(x, np.generic) else None


def _host_bit_cast_source(x: Any) -> DataType:
    """The dtype whose bits a Python-scope `qd.bit_cast` reads: a numpy scalar's own; a Python number's
    literal dtype, where an int too large for default_ip but within its unsigned range takes that type."""
    if not isinstance(x, _NUMBER):
        raise QuadrantsTypeError(f"qd.bit_cast takes a scalar number outside a kernel, got {type(x).__name__}")
    if (np_dt := _numpy_dtype(x)) is not None:
        return np_dt
    dt = literal_dtype(x)
    if dt.is_int and dt.is_signed and isinstance(x, int) and not isinstance(x, bool):
        if not -(1 << (dt.bits - 1)) <= x < (1 << dt.bits):
            raise QuadrantsTypeError(f"qd.bit_cast: {x} does not fit in {dt.bits} bits (default_ip is {dt}); "
                                     f"pass a numpy scalar of the width you mean")
        if x >= 1 << (dt.bits - 1):
            return dtypes.to_dtype(f"u{dt.bits}")
    return dt


def _same_width(src: DataType, dst: DataType, what: Any) -> None:
    if src.bits != dst.bits:
        raise QuadrantsTypeError(f"bit_cast needs types of the same width, got {what}: {src.bits} bits, and "
                                 f"{dst}: {dst.bits} bits; bit_cast to a {src.bits}-bit type, or qd.cast to convert "
                                 f"the value")
