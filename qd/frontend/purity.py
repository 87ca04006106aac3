"""The purity rule of `@qd.kernel(fastcache=True)` (also `pure=True`, `@qd.pure`): no state captured from outside.

A fastcache kernel is keyed by its source, its parameters and the config (`qd/frontend/fastcache.py`), never by
the values of the Python globals and closure variables its code (or a `qd.func` it calls) reads. So reading one
whose value the kernel bakes in is refused while it compiles: a bool, int, float or str, a field or an ndarray,
read as a bare name or as an attribute of a global object (`cfg.n`, `mod.CONST`). A `QuadrantsCompilationError`
names it and where; an UPPERCASE name, or a read inside `qd.static(...)`, only warns (`QuadrantsWarning`), as in
Quadrants' transition period. Allowed: enum members, attributes of `math` and `numpy`, attributes of qd's own
modules and classes, names starting with `_qd_`, and any read in code of qd itself. Parameters, their members
(`self.x` of a data-oriented argument) and locals are no capture.

Beyond Quadrants, every capture that the rule lets through (an UPPERCASE constant, a dtype, an enum member, a
function or class, a module's attribute) is *recorded* (`Builder.captures`: where it was read from and a text of
its value, `capture_text`), and the fastcache checks each record against the live value before it loads an entry:
a kernel never runs with a value it was not compiled for. A capture that cannot be recorded (an object without a
stable text, a closure variable of a func, a chain through a subscript) marks the build `Builder.unstable`: its
instance is not stored.
"""

from __future__ import annotations

import ast
import enum
import math
import os
import types
import warnings
from typing import Any

import numpy as np

from qd.errors import QuadrantsCompilationError, QuadrantsWarning
from qd.frontend import values as _v

_QD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _baked(value: Any) -> bool:
    """A captured value the kernel bakes in: a primitive (not an enum member), a field or an ndarray."""
    if isinstance(value, enum.Enum):
        return False
    if isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, _v.GlobalTensor) or _v.global_kind(value) is not None


def _from_qd(obj: Any) -> bool:
    mod = obj.__name__ if isinstance(obj, type(os)) else getattr(obj, "__module__", None) or type(obj).__module__
    return isinstance(mod, str) and mod.split(".")[0] in ("qd", "quadrants")


def _in_qd(file: str) -> bool:
    return os.path.abspath(file).startswith(_QD_DIR + os.sep)


def capture_text(value: Any, depth: int = 0) -> str | None:
    """A text of a captured value equal in two processes only where the value is the same for the kernel: None
    where there is none (the build is then not stored)."""
    if depth > 4:
        return None
    if value is None or isinstance(value, (bool, int, float, str, bytes, np.number, np.bool_)):
        return f"{type(value).__name__}={value!r}"
    if isinstance(value, enum.Enum):
        return f"enum:{type(value).__module__}.{type(value).__qualname__}.{value.name}={value.value!r}"
    if isinstance(value, type(os)):
        return f"module:{value.__name__}"
    dt = getattr(value, "name", None)
    if type(value).__name__ == "DataType" and type(value).__module__.startswith("qd."):
        return f"dt:{dt}"
    fn = getattr(value, "fn", None) if getattr(value, "_is_qd_func", False) or getattr(value, "_is_qd_kernel", False) \
        else value
    if isinstance(fn, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return _code_text(fn, depth)
    if isinstance(value, (tuple, list, frozenset)):
        parts = [capture_text(x, depth + 1) for x in value]
        return None if any(p is None for p in parts) else f"{type(value).__name__}(" + ",".join(parts) + ")"
    if _from_qd(value):  # qd's own objects (a type annotation, a Tile proxy, ...): fixed by qd's source digest
        return f"qd:{type(value).__module__}.{type(value).__qualname__}:{getattr(value, '__qualname__', '')}"
    return None


def _code_text(fn: Any, depth: int) -> str | None:
    """A function or class by where its code is (its file's digest is checked apart), with its closure's values."""
    if isinstance(fn, types.MethodType):
        owner = capture_text(fn.__self__, depth + 1)
        inner = _code_text(fn.__func__, depth + 1)
        return None if owner is None or inner is None else f"method:{owner}.{inner}"
    code = getattr(fn, "__code__", None)
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    text = f"code:{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}@{where}"
    cells = getattr(fn, "__closure__", None) or ()
    if cells:
        parts = []
        for c in cells:
            try:
                parts.append(capture_text(c.cell_contents, depth + 1))
            except ValueError:  # an empty cell
                parts.append("empty")
        if any(p is None for p in parts):
            return None
        text += "[" + ",".join(parts) + "]"
    return text


def _record(t: Any, where: tuple, value: Any) -> None:
    """Records a capture (`where`: how to read it again, see `revalidate`) or marks the build unstable; once per
    place (a kernel reads `qd` or `gs.qd_float` hundreds of times)."""
    if where in t.b.captures:
        return
    text = capture_text(value)
    if text is None:
        t.b.unstable = t.b.unstable or f"{where[-1]} ({type(value).__name__})"
        return
    t.b.captures[where] = text


def _scope(t: Any, name: str) -> tuple | None:
    """How a non-local `name` of the code being built is read again: ("c", name) a closure variable of the kernel
    itself, ("g", module, name) a module global; None for a func's closure variable (not recordable)."""
    ctx = t.ctx
    if name in ctx.closure:
        return ("c", name) if ctx.is_kernel else None
    return ("g", ctx.globals.get("__name__", ""), name)


def _report(t: Any, what: str, name: str, value: Any) -> None:
    msg = (f"[PURE.VIOLATION] the fastcache kernel reads {what} '{name}' ({type(value).__name__}) from outside its "
           f"parameters: a cached kernel never sees a new value of it. Pass it as a parameter (a qd.template() value, "
           f"a member of a dataclass or data-oriented argument) or make it an enum member")
    if name.upper() == name or t.b.static_depth > 0:
        warnings.warn(msg, QuadrantsWarning, stacklevel=2)
        return
    raise QuadrantsCompilationError(msg)


def check_name(t: Any, name: str, value: Any) -> None:
    """A name of the pure kernel being built resolved outside its locals (a global, closure variable or builtin)."""
    ctx = t.ctx
    if name.startswith("_qd_") or not (name in ctx.closure or name in ctx.globals) or _in_qd(ctx.src.file):
        return
    if _baked(value):
        _report(t, "the global", name, value)
    where = _scope(t, name)
    if where is None:
        t.b.unstable = t.b.unstable or f"the closure variable {name}"
        return
    _record(t, where, value)


def _root_is_global(t: Any, node: ast.expr) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and not t.ctx.find_local(node.id)[0] and not node.id.startswith("_qd_")


def _chain(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None through a subscript or call."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return names[::-1]


def check_attribute(t: Any, node: ast.Attribute, base: Any, value: Any) -> None:
    """`base.attr` (`node`) of the pure kernel being built evaluated to `value`."""
    if base is math or base is np or _from_qd(base) or not _root_is_global(t, node.value) \
            or _in_qd(t.ctx.src.file):
        return
    if _baked(value):
        _report(t, "the global attribute", node.attr, value)
    chain = _chain(node)
    where = _scope(t, chain[0]) if chain is not None else None
    if where is None:
        t.b.unstable = t.b.unstable or f"the attribute {node.attr}"
        return
    _record(t, (*where[:-1], ".".join(chain)), value)


def revalidate(captures: tuple, kernel_fn: Any) -> bool:
    """Whether every recorded capture reads the same value now (`Builder.captures`)."""
    import sys

    closure = {}
    if kernel_fn.__closure__:
        closure = {n: c for n, c in zip(kernel_fn.__code__.co_freevars, kernel_fn.__closure__)}
    for rec in captures:
        names = rec[-2].split(".")
        try:
            if rec[0] == "c":
                value = closure[names[0]].cell_contents
            else:
                value = vars(sys.modules[rec[1]])[names[0]]
            for n in names[1:]:
                value = getattr(value, n)
        except (KeyError, AttributeError, ValueError):
            return False
        if capture_text(value) != rec[-1]:
            return False
    return True


__all__ = ["capture_text", "check_attribute", "check_name", "revalidate"]
