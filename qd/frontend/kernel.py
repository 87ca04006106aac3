"""`@qd.func` and what the frontend needs to compile a kernel: the Func object, inlining, a kernel's IR.

`build_kernel_ir` builds the IR of one instantiation of a `@qd.kernel` (`qd.runtime.kernel.Kernel`, which
launches: it lives in the runtime) from its leaf values; `qd.frontend.instance.instantiate` takes it through
AD and the passes. Funcs are inlined at every call site inside a kernel being compiled.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError
from qd.frontend import args as _args
from qd.frontend import builder as _bm
from qd.frontend.builder import Builder, BuildRecord
from qd.frontend.context import FuncContext, file_stamp, source_of
from qd.frontend.transformer import Transformer, fence


def build_kernel_ir(kernel: Any, values: list, hidden: list | None = None,
                    sources: set | None = None) -> tuple[ir.KernelIR, list]:
    """Build the KernelIR of one instantiation of `kernel` (a `@qd.kernel`: its `fn`, `signature` and `_stamp`);
    returns it with the per-buffer field bindings. `hidden`,
    when given, receives the builder's hidden args (`Builder.hidden_args`: `x.grad` of ndarray args); `sources`,
    the files of the funcs and Python functions a pure (fastcache) kernel's build ran (`Builder.sources`)."""
    src = source_of(kernel.fn, kernel._stamp)
    fence(src, is_kernel=True)
    sig = kernel.signature
    b = Builder(kernel.fn.__name__)
    options = getattr(kernel, "options", {})
    b.graph = bool(options.get("graph", False))
    b.checkpoints = bool(options.get("checkpoints", False))
    b.pure = bool(options.get("fastcache") or options.get("pure") or getattr(kernel.fn, "is_pure", False))
    with b.active():
        ctx = FuncContext(src, is_kernel=True, entry_depth=0, fn=kernel.fn)
        ctx.return_type = sig.return_type
        t = Transformer(b, ctx)
        b.loc = src.loc(src.node)
        _args.bind_kernel_params(t, sig, values, src.assigned)
        if sig.return_type is not None:
            from qd.frontend.calls import ret_dtypes

            b.rets = ret_dtypes(sig.return_type)
        t.visit_body(src.node.body)
        k_ir = b.finish(src.loc(src.node))
    if hidden is not None:
        hidden.extend(b.hidden_args)
    if sources is not None:
        sources.update(b.sources)
        if isinstance(sources, BuildRecord):
            sources.captures.extend((*where, text) for where, text in b.captures.items())
            sources.unstable = sources.unstable or b.unstable
    return k_ir, list(b.bound_objects)


class Func:
    """What `@qd.func` (and `@qd.real_func`) return: a function callable from kernels and funcs.

    Each call made while a kernel compiles inlines the function body into the caller (qd compiles no separate
    function calls), binding the arguments by the function's annotations, or by the caller's types where a
    parameter is bare. Attributes: `fn` (the decorated Python function), `is_real_function` (True from
    `qd.real_func`), `requires_top_level`. Used as a method (`@qd.func` in a `@qd.data_oriented` class) it
    binds `self` like a Python method.

    Errors: calling it from Python scope raises `qd.QuadrantsSyntaxError` (use `qd.pyfunc` for a function
    callable from both); one declared `requires_top_level=True` raises `qd.QuadrantsSyntaxError` when called
    inside a runtime `for`/`if`/`while`; inlining deeper than 64 levels (recursion that does not end through
    `qd.static` conditions) raises `qd.QuadrantsSyntaxError`.

    `isinstance(f, qd.Func)` tells whether `f` was made by `qd.func`.
    """

    _is_qd_func = True

    def __init__(self, fn: Callable, is_real_function: bool = False, requires_top_level: bool = False) -> None:
        self.fn = fn
        self.is_real_function = is_real_function
        # Quadrants' `qd.func(requires_top_level=True)`: its loops must stay top-level (parallel) loops
        self.requires_top_level = requires_top_level
        self._sig: _args.Signature | None = None
        self._stamp = file_stamp(fn)  # its file as it was defined (`qd.frontend.context.FuncSource`)
        functools.update_wrapper(self, fn)

    @property
    def signature(self) -> _args.Signature:
        if self._sig is None:
            self._sig = _args.Signature(self.fn, is_kernel=False)
        return self._sig

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        b = _bm.current()
        if b is None:
            raise QuadrantsSyntaxError("Quadrants functions cannot be called from Python-scope; call them from "
                                       "a @qd.kernel (or make this one a kernel)")
        if self.requires_top_level and b.depth > 0:
            raise QuadrantsSyntaxError(
                f"qd.func {self.fn.__name__} is marked requires_top_level=True but is called inside a runtime "
                f"for/if/while (directly or through other funcs): its top-level loops would become serial inner "
                f"loops. Call it at the kernel's top level (qd.static loops are fine)")
        return inline_func(self, b, args, kwargs)


def inline_func(func: Func, b: Builder, args: tuple, kwargs: dict) -> Any:
    src = source_of(func.fn, func._stamp)
    fence(src)
    if b.pure:
        b.sources.add(src.file)
    if b.func_depth > 64:
        raise QuadrantsSyntaxError(f"qd.func {func.fn.__name__} recursed more than 64 levels; recursion must end "
                                   "at compile time through qd.static conditions")
    sig = func.signature
    values = sig.bind(args, kwargs)
    ctx = FuncContext(src, is_kernel=False, entry_depth=b.depth, fn=func.fn)
    ctx.return_type = sig.return_type
    t = Transformer(b, ctx)
    old_loc, old_stack = b.loc, b.call_stack
    b.func_depth += 1
    if old_loc is not None:
        b.call_stack = old_stack + (dataclasses.replace(old_loc, stack=()),)
    try:
        b.loc = src.loc(src.node)
        _args.bind_func_params(t, sig, values)
        t.visit_body(src.node.body)
    finally:
        b.func_depth -= 1
        b.loc, b.call_stack = old_loc, old_stack
    return ctx.return_value


def func(fn: Callable | None = None, is_real_function: bool = False, requires_top_level: bool = False,
         **options: Any) -> Any:
    """Make a function callable from kernels: `@qd.func`.

    A func is inlined into each kernel (or func) that calls it, and compiled as part of that kernel; it
    cannot be called from Python (use `qd.pyfunc` for both). Its parameters may be annotated like a
    kernel's, or left bare (then they take the caller's types); scalars and vectors are passed by value,
    fields, ndarrays and views by reference. It may return a value (annotated `-> qd.f32` etc.) and contain
    several `return` statements.

    Options (accepted for Quadrants code, no change in qd):

    is_real_function
        Quadrants compiles such a func once as a real call; qd inlines it all the same (`qd.real_func`).
    requires_top_level
        Accepted; no effect.

    Errors: calling a func from Python raises `qd.QuadrantsSyntaxError` (decorate it with `qd.pyfunc` to
    call it from both).
    """
    if fn is None:
        return lambda f: Func(f, is_real_function, requires_top_level)
    return Func(fn, is_real_function, requires_top_level)


def real_func(fn: Callable) -> Func:
    """`@qd.real_func`: Quadrants' decorator for a func compiled once and called (not inlined); in qd it is the
    same as `@qd.func(is_real_function=True)`, a `qd.Func` that is inlined at every call like any other func.

    Its parameters and return value should be annotated (`def f(x: qd.f32) -> qd.f32`), as Quadrants requires
    for real functions; the result is the same as with `@qd.func`. Calling it from Python scope raises
    `qd.QuadrantsSyntaxError`.
    """
    return Func(fn, True)


def pyfunc(fn: Callable) -> Callable:
    """`@qd.pyfunc`: a function callable both from Python scope and from kernels and funcs.

    Called while a kernel compiles, it is a `qd.func` (inlined, with the func's argument rules); called from
    Python, it is the plain Python function, run on Python values. The returned object is a wrapper function
    (not a `qd.Func`).

    Example::

        @qd.pyfunc
        def sq(x):
            return x * x

        sq(3)            # 9, computed in Python
        # inside a kernel: f[i] = sq(f[i])
    """
    f = Func(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _bm.current() is not None:
            return f(*args, **kwargs)
        return fn(*args, **kwargs)
    return wrapper


def data_oriented(cls: type | None = None, *, template_primitives: bool = True) -> Any:
    """`@qd.data_oriented` (or `@qd.data_oriented(template_primitives=...)`): a class whose methods may be
    `@qd.kernel`s and `@qd.func`s. `self` is a template argument of its kernels, keyed by identity: its
    Python int/float/bool members are compile-time constants baked into the instance (as in Quadrants,
    changing one later does not recompile), while the fields and ndarrays reached through it are re-checked
    at every launch (`qd.frontend.guards`: a reassigned member is never served stale). With
    `template_primitives=False` the primitives a kernel reads through the object (nested objects included)
    are runtime scalar arguments instead, read at every launch (`values.LiftedObject`). qd's kernels and
    funcs bind as methods of any class; the decorator marks the class for the code that checks."""
    def decorate(c: type) -> type:
        c._data_oriented = True
        c._qd_template_primitives = template_primitives
        return c

    return decorate if cls is None else decorate(cls)


def is_data_oriented(obj: Any) -> bool:
    return bool(getattr(obj, "_data_oriented", False))


__all__ = ["Func", "build_kernel_ir", "data_oriented", "func", "inline_func", "is_data_oriented", "pyfunc",
           "real_func"]
