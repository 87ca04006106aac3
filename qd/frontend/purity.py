"""The purity rule of `@qd.kernel(fastcache=True)` (also `pure=True`, `@qd.pure`): no state captured from outside.

A fastcache kernel is keyed by its source, its parameters and the config (`qd/frontend/fastcache.py`), never by
the values of the Python globals and closure variables its code (or a `qd.func` it calls) reads. So reading one
whose value the kernel bakes in is refused while it compiles: a bool, int, float or str, a field or an ndarray,
read as a bare name or as an attribute of a global object (`cfg.n`, `mod.CONST`). A `QuadrantsCompilationError`
names it and where; an UPPERCASE name, or a read inside `qd.static(...)`, only warns (`QuadrantsWarning`), as in
Quadrants' transition period. Allowed: enum members, attributes of `math` and `numpy`, attributes of qd's own
modules and classes, names starting with `_qd_`, and any read in code of qd itself. Parameters, their members
(`self.x` of a data-oriented argument) and locals are no capture.
"""

from __future__ import annotations

import ast
import enum
import math
import os
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
    if name.startswith("_qd_") or not (name in ctx.closure or name in ctx.globals) or not _baked(value) \
            or _in_qd(ctx.src.file):
        return
    _report(t, "the global", name, value)


def _root_is_global(t: Any, node: ast.expr) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and not t.ctx.find_local(node.id)[0] and not node.id.startswith("_qd_")


def check_attribute(t: Any, node: ast.Attribute, base: Any, value: Any) -> None:
    """`base.attr` (`node`) of the pure kernel being built evaluated to `value`."""
    if not _baked(value) or base is math or base is np or _from_qd(base) or not _root_is_global(t, node.value) \
            or _in_qd(t.ctx.src.file):
        return
    _report(t, "the global attribute", node.attr, value)


__all__ = ["check_attribute", "check_name"]
