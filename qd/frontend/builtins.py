"""Kernel builtins (`qd.sqrt`, `qd.max`, `qd.cast`, `qd.atomic_add`, `qd.random`, ...).

Each works on Python numbers (evaluated in Python, as Quadrants does: constant folding inside
kernels, plain math outside), on `Expr`s (emitting IR into the current builder) and elementwise on
matrices (anything with `_map` / `_zip`).
"""

from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _b
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.frontend.expr import Expr, is_expr  # noqa: F401  (re-exported)
from qd.ops import Op
from qd.types import dtypes
from qd.types import hooks as _hooks


def in_kernel() -> bool:
    """True while a kernel (or a func inlined into it) is being compiled."""
    return _b.current() is not None


# what each unary builtin computes, for its docstring
_UNARY_DOCS = {
    "sqrt": "the square root", "rsqrt": "1 / sqrt(x)", "sin": "the sine (radians)", "cos": "the cosine (radians)",
    "tan": "the tangent (radians)", "asin": "the arc sine, in [-pi/2, pi/2]", "acos": "the arc cosine, in [0, pi]",
    "exp": "e to the power x", "log": "the natural logarithm", "tanh": "the hyperbolic tangent",
    "floor": "the largest integer value not above x", "ceil": "the smallest integer value not below x",
    "popcnt": "the number of set bits of an integer", "clz": "the number of leading zero bits of an integer",
}


def _unary(name: str) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        return _e.unary(name, x)
    fn.__name__ = name
    fn.__qualname__ = name
    what = _UNARY_DOCS.get(name, name)
    fn.__doc__ = (f"`qd.{name}(x)`: {what}, in a kernel or func. Applied to every entry of a vector or matrix; an "
                  f"integer argument of a float function is converted to `default_fp` first. The accuracy of the "
                  f"float functions on each tier is stated in ulps (the migration page's table).")
    return fn


sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
floor = _unary("floor")
ceil = _unary("ceil")
popcnt = _unary("popcnt")
clz = _unary("clz")
neg = _unary("neg")
logical_not = _unary("logical_not")
bit_not = _unary("bit_not")


def floor_(x: Any, dtype: Any = None) -> Any:
    """`qd.floor(x, dtype=None)`: the largest integer value not above `x` (rounds toward -inf).

    In a kernel or func the result keeps the float dtype of `x` (an integer `x` is first converted to
    `default_fp`, so `qd.floor(3)` is `3.0`); with `dtype` it is then cast to it, as `qd.cast(qd.floor(x), dtype)`.
    Elementwise on vectors and matrices (`qd.floor(qd.Vector([1.5, -2.5]))` is `[1.0, -3.0]`). In Python scope a
    Python float gives a Python int (`qd.floor(-2.5)` is `-3`).

    Example: `i = qd.floor(x, qd.i32)` (a cell index from a float coordinate).
    """
    r = _e.unary("floor", x)
    return r if dtype is None else cast(r, dtype)


def ceil_(x: Any, dtype: Any = None) -> Any:
    """`qd.ceil(x, dtype=None)`: round toward +inf (elementwise on vectors and matrices), then optionally cast to
    `dtype` (`qd.ceil(x, qd.i32)`)."""
    r = _e.unary("ceil", x)
    return r if dtype is None else cast(r, dtype)


def round_(x: Any, dtype: Any = None) -> Any:
    """`qd.round(x, dtype=None)`: round to the nearest integer value, halves to even (elementwise), then
    optionally cast to `dtype`."""
    r = _e.unary("round", x)
    return r if dtype is None else cast(r, dtype)


def abs_(x: Any) -> Any:
    """`qd.abs(x)`: the absolute value of an int or float (elementwise on vectors and matrices)."""
    return _e.unary("abs", x)


def atan2(y: Any, x: Any) -> Any:
    """`qd.atan2(y, x)`: the angle of the point (x, y), in [-pi, pi] (radians); elementwise."""
    return _e.binary("atan2", y, x)


def pow_(x: Any, y: Any) -> Any:
    """`qd.pow(x, y)`: x to the power y (also `x ** y`); elementwise. A constant integer exponent is computed
    exactly by multiplications; other exponents use the tier's `pow`."""
    return _e.binary("pow", x, y)


def _fold(name: str, args: tuple) -> Any:
    """n-ary elementwise `name` ("min"/"max") of args, or of one list/tuple argument."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    if len(args) < 2:
        raise QuadrantsTypeError(f"{name} expects at least two arguments")
    r = args[0]
    for a in args[1:]:
        r = _e.binary(name, r, a)
    return r


def max_(*args: Any) -> Any:
    """`qd.max(a, b, *more)`: the largest of two or more values (also `qd.max([a, b, c])`).

    In a kernel or func the operands are promoted to a common dtype first, as for `+` (`qd.max(qd.i32(3), 2.5)`
    is the float `3.0`); vectors and matrices are compared entry by entry, and a scalar operand is broadcast
    (`qd.max(v, 0.0)` clamps every entry of `v` at zero). On Python numbers it is evaluated in Python
    (`qd.max(1, 2.5)` is `2.5`). Fewer than two values raise `qd.QuadrantsTypeError`.
    """
    return _fold("max", args)


def min_(*args: Any) -> Any:
    """`qd.min(a, b, *more)`: the smallest of two or more values (also `qd.min([a, b, c])`).

    The same rules as `qd.max`: operands promoted to a common dtype, elementwise on vectors and matrices
    with scalars broadcast, Python numbers evaluated in Python, and fewer than two values raise
    `qd.QuadrantsTypeError`. Example: `d = qd.min(d, qd.sqrt(r2))`.
    """
    return _fold("min", args)


def bit_shr(x: Any, n: Any) -> Any:
    """`qd.bit_shr(x, n)`: logical shift right of the integer `x` by `n` bits: zeros come in at the top,
    whatever the signedness of `x`, within the width of `x`'s dtype.

    `x >> n` is an arithmetic shift on signed ints (the sign bit is copied in); `qd.bit_shr` is not:
    `qd.bit_shr(qd.i8(-16), 2)` is `60` (`0xF0` shifted to `0x3C`) where `qd.i8(-16) >> 2` is `-4`. On unsigned
    ints the two are the same. Elementwise on integer vectors. Note that Python int operands (in Python scope,
    or two literals in a kernel) are shifted as 64-bit values: `qd.bit_shr(-16, 2)` is `4611686018427387900`.
    """
    return _e.binary("bit_shr", x, n)


def raw_div(a: Any, b: Any) -> Any:
    """`qd.raw_div(a, b)`: C-style division.

    For two integers the quotient is truncated toward zero, as in C: `qd.raw_div(-7, 2)` is `-3`, where
    Python's (and a kernel's) `-7 // 2` is `-4`. If either operand is a float it is true division, `a / b`
    (`qd.raw_div(-7.0, 2)` is `-3.5`). Works in kernels and funcs (operands promoted as for `/` and `//`),
    on Python numbers (evaluated in Python: a zero divisor raises `ZeroDivisionError`), and elementwise on
    vectors and matrices. In a kernel, integer division by zero does not raise; its result is unspecified.
    See `qd.raw_mod` for the matching remainder.
    """
    if _e.is_matrix(a) or _e.is_matrix(b):
        return a._zip(b, raw_div) if _e.is_matrix(a) else b._map(lambda y: raw_div(a, y))
    if not is_expr(a) and not is_expr(b):
        if isinstance(a, int) and isinstance(b, int):
            q = builtins.abs(a) // builtins.abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    ea, eb = _e.as_expr(a), _e.as_expr(b)
    if ea.dtype.is_float or eb.dtype.is_float:
        return _e.binary("truediv", ea, eb)
    q = _e.binary("floordiv", ea, eb)
    r = _e.binary("mod", ea, eb)
    # floor and trunc differ when the remainder is nonzero and the signs differ.
    fix = _e.binary("and", _e.binary("ne", r, 0), _e.binary("ne", _e.binary("lt", ea, 0), _e.binary("lt", eb, 0)))
    return _e.select(fix, _e.binary("add", q, 1), q)


def raw_mod(a: Any, b: Any) -> Any:
    """`qd.raw_mod(a, b)`: C-style remainder, `a - qd.raw_div(a, b) * b`; it has the sign of the dividend `a`.

    `qd.raw_mod(-7, 2)` is `-1` and `qd.raw_mod(7, -2)` is `1`, where Python's (and a kernel's) `%` gives `1` and
    `-1` (the sign of the divisor). With a float operand it is C's `fmod`: `qd.raw_mod(-7.5, 2.0)` is `-1.5`
    (in kernels both operands are converted to a common float dtype first). Works in kernels and funcs, on
    Python numbers (evaluated in Python: `ZeroDivisionError` for an integer zero divisor, `ValueError` from
    `math.fmod` for a float one), and elementwise on vectors and matrices. In a kernel, an integer zero divisor
    does not raise; its result is unspecified.
    """
    if _e.is_matrix(a):
        return a._zip(b, raw_mod)
    if _e.is_matrix(b):
        return b._map(lambda y: raw_mod(a, y))
    if not is_expr(a) and not is_expr(b):
        import math
        return math.fmod(a, b) if isinstance(a, float) or isinstance(b, float) else a - raw_div(a, b) * b
    ea, eb = _e.as_expr(a), _e.as_expr(b)
    if ea.dtype.is_float or eb.dtype.is_float:
        t = dtypes.promote(_e._to_float(ea).dtype, _e._to_float(eb).dtype)
        ea, eb = _e.cast_expr(ea, t), _e.cast_expr(eb, t)
        q = _e.emit(Op.DIV, (ea, eb), t)
        tq = _e.select(_e.binary("lt", q, 0), _e.unary("ceil", q), _e.unary("floor", q))
        return _e.binary("sub", ea, _e.binary("mul", tq, eb))
    return _e.binary("sub", ea, _e.binary("mul", raw_div(ea, eb), eb))


def select(cond: Any, a: Any, b: Any) -> Any:
    """`qd.select(cond, a, b)`: `a` where `cond` is nonzero, else `b`, without a branch: both are evaluated.
    Elementwise when the arguments are vectors or matrices."""
    return _e.select(cond, a, b)


def cast(x: Any, dtype: Any) -> Any:
    """`qd.cast(x, dtype)`: convert `x` (a scalar, vector or matrix) to `dtype`. Float to int truncates toward
    zero; ints narrow by keeping the low bits, as in C."""
    return _e.cast(x, dtype)


def bit_cast(x: Any, dtype: Any) -> Any:
    """`qd.bit_cast(x, dtype)`: reinterpret the bits of `x` as `dtype`, which must have the same width
    (`qd.bit_cast(f, qd.u32)` gives an f32's bit pattern); a width mismatch is a compile error."""
    return _e.bit_cast(x, dtype)


def stop_grad(x: Any) -> Any:
    """The value of `x` with its gradient stopped (`Op.STOP_GRAD`: an identity that the op table
    marks non-differentiable, so both AD modes see a constant).

    On a field or ndarray, `qd.stop_grad(x)` is a statement (Quadrants' form): every load of `x` in the
    enclosing block and its nested blocks reads a constant, so no gradient flows into `x.grad` there."""
    if isinstance(x, _v.GlobalTensor):
        _b.current().stop_grad(x.buffer)
        return None
    if _v.global_kind(x) is not None and _b.current() is not None:
        raise QuadrantsSyntaxError("qd.stop_grad(x) on a field or ndarray that this kernel does not reach "
                                   "by name: pass the field itself (qd.stop_grad(x), then read x[i])")
    if _e.is_matrix(x):
        return x._map(stop_grad)
    if isinstance(x, Expr) and x.dtype.is_float:
        return _e.emit(Op.STOP_GRAD, (x,), x.dtype)
    return x


def dtype_call(dtype: Any, value: Any) -> Any:
    """`qd.f32(x)`: a cast inside kernels, a numpy scalar conversion in Python scope."""
    dt = dtypes.to_dtype(dtype)
    if in_kernel() and dt.is_int and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dt.np_dtype)
        if not info.min <= value <= info.max:  # Quadrants refuses it: a wrapped literal is almost always a bug
            raise QuadrantsTypeError(f"qd.{dt.name}({value}): the value exceeded the range of specified dtype "
                                     f"{dt.name} [{info.min}, {info.max}]; use qd.cast(x, qd.{dt.name}) to wrap")
    if _e.is_matrix(value) or is_expr(value) or in_kernel():
        return _e.cast(value, dt)
    return _e.host_cast(value, dt)


def zero(x: Any) -> Any:
    """`qd.zero(x)`: zeros of `x`'s type and shape (a scalar for a scalar), as Quadrants' `x * 0`."""
    return x * 0


def one(x: Any) -> Any:
    """`qd.one(x)`: a one of `x`'s dtype and shape: `1` for an int, `1.0` for a float, all-ones for a vector or
    matrix. Computed as `qd.zero(x) + 1` (that is, `x * 0 + 1`), so it works in kernels, funcs and on Python
    numbers (`qd.one(2.5)` is `1.0`), and keeps `x`'s dtype (`qd.one(qd.i8(3))` is an i8).

    Example: `w = qd.one(v)` (a vector of ones shaped like `v`).
    """
    return zero(x) + 1


# ---------------------------------------------------------------- atomics

def _atomic(op: Op, name: str) -> Callable[[Any, Any], Any]:
    def fn(x: Any, y: Any) -> Any:
        if _e.is_matrix(x):
            ys = list(y.entries) if _e.is_matrix(y) else [y] * len(x.entries)
            out = [fn(a, b) for a, b in zip(x.entries, ys)]
            it = iter(out)
            return x._map(lambda _: next(it))
        if not is_expr(x) or x.ptr is None:
            raise QuadrantsSyntaxError(f"cannot use a non-writable target as the first operand of '{name}': "
                                       f"qd.{name} needs a field/ndarray element or a local variable")
        return atomic_rmw(op, x, y)
    fn.__name__ = name
    fn.__doc__ = _ATOMIC_DOC.format(name=name, what=_ATOMIC_WHAT[name])
    return fn


_ATOMIC_WHAT = {
    "atomic_add": "`x + y`", "atomic_sub": "`x - y`", "atomic_mul": "`x * y`", "atomic_min": "`min(x, y)`",
    "atomic_max": "`max(x, y)`", "atomic_and": "`x & y` (integers only)", "atomic_or": "`x | y` (integers only)",
    "atomic_xor": "`x ^ y` (integers only)",
}

_ATOMIC_DOC = """`qd.{name}(x, y)`: atomically replace `x` with {what}; returns the old value of `x`.

In a kernel or func, `x` must be a writable place: a field or ndarray element (`f[i]`, `f[None]`) or a
local variable. Concurrent updates of one element from a parallel loop are never lost. `y` is cast to
`x`'s dtype first (a float added to an i32 element is truncated toward zero). A vector or matrix `x` is
updated entry by entry (a scalar `y` is broadcast) and the old vector or matrix is returned. The augmented
assignments on field/ndarray elements (`f[i] += y`, `-=`, `*=`, `|=`, `^=`, ...) are atomic too.

Errors: a non-writable `x` (a literal, an expression, or any call from Python scope) raises
`qd.QuadrantsSyntaxError`; a bit operation (`atomic_and`/`or`/`xor`) on a float raises `qd.QuadrantsTypeError`.

Example: `old = qd.{name}(f[None], y)` (inside a kernel; `f` a 0-d field).
"""

_BIN_NAME = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.MIN: "min", Op.MAX: "max", Op.BIT_AND: "and",
             Op.BIT_OR: "or", Op.BIT_XOR: "xor"}


def atomic_rmw(op: Op, target: Expr, value: Any) -> Expr:
    """`op` applied atomically to the place `target` was loaded from; returns the old value."""
    b = _e.bld()
    ptr = target.ptr
    v = _e.cast_expr(_e.as_expr(value), target.dtype)
    if op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR) and not target.dtype.is_int:
        raise QuadrantsTypeError(f"atomic bit operation on a {target.dtype} value")
    if isinstance(ptr, ir.GlobalPtr):
        return Expr(b.emit(ir.AtomicRMW, op=op, ptr=ptr, value=v.value, dtype=target.dtype))
    if b.shared_local(ptr):  # a kernel-scope local updated by every iteration of a parallel loop
        return Expr(b.local_atomic(op, ptr, v.value))
    old = Expr(b.load(ptr))
    new = _e.binary(_BIN_NAME[op], old, v)
    b.store(ptr, new.value)
    return old


atomic_add = _atomic(Op.ADD, "atomic_add")
atomic_sub = _atomic(Op.SUB, "atomic_sub")
atomic_mul = _atomic(Op.MUL, "atomic_mul")
atomic_min = _atomic(Op.MIN, "atomic_min")
atomic_max = _atomic(Op.MAX, "atomic_max")
atomic_and = _atomic(Op.BIT_AND, "atomic_and")
atomic_or = _atomic(Op.BIT_OR, "atomic_or")
atomic_xor = _atomic(Op.BIT_XOR, "atomic_xor")


def _swap_operand(x: Any, dtype: dtypes.DataType, name: str) -> Expr:
    """An operand of `atomic_exchange`/`atomic_cas` in the target's dtype: a negative literal on an unsigned
    target wraps (`-1` is the all-ones sentinel, as Quadrants' cast makes it); other values are cast."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and dtype.is_int:
        info = np.iinfo(dtype.np_dtype)
        v = int(x) % (1 << dtype.bits) if x < 0 and not dtype.is_signed and x >= -(1 << (dtype.bits - 1)) else int(x)
        if not info.min <= v <= info.max:
            raise QuadrantsTypeError(f"qd.{name}: the literal {x} does not fit the target's dtype {dtype.name}")
        return _e.const(v, dtype)
    return _e.cast_expr(_e.as_expr(x), dtype)


def _swap_target(x: Any, name: str) -> Expr:
    if isinstance(x, _v.GlobalTensor):
        raise QuadrantsSyntaxError(f"cannot use a field or ndarray directly as the first operand of '{name}'; "
                                   f"index it first (e.g. `field[None]`)")
    if not is_expr(x) or x.ptr is None:
        raise QuadrantsSyntaxError(f"cannot use a non-writable target as the first operand of '{name}': "
                                   f"qd.{name} needs a field/ndarray element or a local variable "
                                   f"(index a field first: `f[None]`)")
    if x.dtype.bits not in (32, 64) and isinstance(x.ptr, ir.GlobalPtr):
        raise QuadrantsTypeError(f"qd.{name} on a {x.dtype.name} element: 32- and 64-bit dtypes only "
                                 f"(i32, u32, i64, u64{', f32, f64' if name == 'atomic_exchange' else ''})")
    return x


def _swap(x: Expr, value: Expr, expected: Expr | None, name: str) -> Expr:
    b = _e.bld()
    ptr = x.ptr
    if isinstance(ptr, ir.GlobalPtr):
        return Expr(b.emit(ir.AtomicSwap, ptr=ptr, value=value.value, dtype=x.dtype,
                           expected=None if expected is None else expected.value))
    if b.shared_local(ptr):
        raise QuadrantsSyntaxError(f"qd.{name} on a kernel-scope local inside a parallel loop is not supported: "
                                   f"every iteration would race on it; use a field or ndarray element")
    old = Expr(b.load(ptr))  # a thread's own local: nothing to race with
    new = value if expected is None else _e.select(_e.binary("eq", old, expected), value, old)
    b.store(ptr, new.value)
    return old


def atomic_exchange(x: Any, y: Any) -> Any:
    """`qd.atomic_exchange(x, y)`: atomically writes `y` into `x`; returns the old value of `x`. A vector or
    matrix target exchanges component by component."""
    if _e.is_matrix(x):
        ys = list(y.entries) if _e.is_matrix(y) else [y] * len(x.entries)
        if len(ys) != len(x.entries):
            raise QuadrantsTypeError(f"qd.atomic_exchange of {len(ys)} values into {len(x.entries)} components")
        it = iter([atomic_exchange(a, v) for a, v in zip(x.entries, ys)])
        return x._map(lambda _: next(it))
    x = _swap_target(x, "atomic_exchange")
    return _swap(x, _swap_operand(y, x.dtype, "atomic_exchange"), None, "atomic_exchange")


def atomic_cas(x: Any, expected: Any, desired: Any) -> Any:
    """`qd.atomic_cas(x, expected, desired)`: atomically writes `desired` into `x` if `x` equals `expected`;
    returns the old value of `x` either way (the swap happened where it equals `expected`). Integers only."""
    if _e.is_matrix(x):
        raise QuadrantsTypeError("qd.atomic_cas on a vector or matrix: compare-and-swap one component at a time "
                                 "(`qd.atomic_cas(v[None][i], expected, desired)`)")
    x = _swap_target(x, "atomic_cas")
    if not x.dtype.is_int:
        raise QuadrantsTypeError(f"qd.atomic_cas on a {x.dtype.name} element: integer dtypes only (i32, u32, i64, "
                                 f"u64); compare float bits through an integer view with qd.bit_cast")
    return _swap(x, _swap_operand(desired, x.dtype, "atomic_cas"), _swap_operand(expected, x.dtype, "atomic_cas"),
                 "atomic_cas")


def volatile_load(target: Any) -> Any:
    """`qd.volatile_load(x)`: reads the field or ndarray element `x` from memory every time it runs, never cached,
    hoisted out of a loop or merged with another read: a spin-wait on a cell other threads write sees their
    writes. A vector or matrix element is read component by component."""
    if _e.is_matrix(target):
        if not all(is_expr(c) and isinstance(c.ptr, ir.GlobalPtr) for c in target.entries):
            raise QuadrantsTypeError("qd.volatile_load of a local array: a thread's own local cannot be written "
                                     "by another thread; volatile_load reads field or ndarray elements")
        it = iter([volatile_load(c) for c in target.entries])
        return target._map(lambda _: next(it))
    if isinstance(target, _v.GlobalTensor):
        raise QuadrantsSyntaxError("cannot pass a Field directly to 'qd.volatile_load'; index it first "
                                   "(e.g. `field[None]`)")
    if not is_expr(target) or target.ptr is None:
        raise QuadrantsSyntaxError("qd.volatile_load requires an lvalue (field / ndarray subscript) as its argument")
    if not isinstance(target.ptr, ir.GlobalPtr):
        raise QuadrantsTypeError("qd.volatile_load of a local: a thread's own local cannot be written by another "
                                 "thread; volatile_load reads field or ndarray elements")
    return Expr(_e.bld().emit(ir.GlobalLoad, ptr=target.ptr, dtype=target.ptr.dtype, volatile=True))


def random(dtype: Any = float) -> Any:
    """`qd.random(dtype=float)`: floats uniform in [0, 1), ints uniform over the dtype."""
    dt = dtypes.to_dtype(dtype)
    if not in_kernel():
        import numpy as np
        if dt.is_float:
            return dt.np_dtype.type(np.random.random())
        info = np.iinfo(dt.np_dtype)
        return dt.np_dtype.type(np.random.randint(info.min, info.max, dtype=dt.np_dtype))
    return Expr(_e.bld().emit(ir.RandomValue, dtype=dt))


def randn(dt: Any = None) -> Any:
    """`qd.randn(dt=None)`: a float from the standard normal distribution (mean 0, variance 1), by Box-Muller from
    two `qd.random` draws as Quadrants does; `dt` is f32 or f64, by default the program's `default_fp`."""
    d = dtypes.to_dtype(dt) if dt is not None else _b.cfg().default_fp
    if d not in (dtypes.f32, dtypes.f64):
        raise QuadrantsTypeError(f"qd.randn(dt={d.name}): f32 or f64 only")
    if not in_kernel():
        return d.np_dtype.type(np.random.standard_normal())
    u1 = _e.binary("sub", _e.const(1.0, d), random(d))  # in (0, 1]: a finite log
    r = sqrt(_e.binary("mul", _e.const(-2.0, d), log(u1)))
    return _e.binary("mul", r, cos(_e.binary("mul", _e.const(2.0 * np.pi, d), random(d))))


def assume_in_range(val: Any, base: Any, low: int, high: int) -> Any:
    """`qd.assume_in_range(val, base, low, high)`: Quadrants' hint that `val` lies in `[base + low, base + high)`
    for its scratchpad optimisation; qd has none and returns `val` untouched."""
    return val


def cache_read_only(*args: Any) -> None:
    """`qd.cache_read_only(*fields)`: Quadrants' hint that the fields are read-only in the kernel (for its GPU
    caches); qd's code generators see that from the IR, so this is a no-op."""


# Public names: the Python builtins they shadow get an underscore inside this module.
round = round_  # noqa: A001
abs = abs_  # noqa: A001
min = min_  # noqa: A001
max = max_  # noqa: A001
pow = pow_  # noqa: A001
floor = floor_
ceil = ceil_


def check_local_index(idx: Any, extent: int, what: str = "a local matrix") -> None:
    """Debug mode (or `check_out_of_bound`): a runtime index into a local vector/matrix must lie in
    [0, extent); a violation raises QuadrantsAssertionError at run time, like a global access."""
    c = _b.cfg()
    if not isinstance(idx, Expr) or not (c.debug or c.check_out_of_bound):
        return
    bb = _b.current()
    ok = (idx >= 0) & (idx < extent)
    check = bb.add_check(ir.CheckDecl(
        kind="bounds", loc=bb.loc,
        message=f"Out of bound access: kernel[{{kernel}}] tid={{tid}}: index {{0}} is out of [0, {extent}) "
                f"for {what}"))
    bb.emit(ir.Check, cond=ok.value, check=check, args=(idx.value,))


_hooks.register(cast=dtype_call)
