"""Template guards: the fields and ndarrays a kernel instance reached through its template arguments.

A `qd.template()` argument that is a plain object (a `@qd.data_oriented` instance, a mutable dataclass, a
list) is keyed by identity, and the fields and ndarrays reached through it (`self.x`) are bound into the
instance when it compiles. Reassigning such a member later (`self.x = other_ndarray`) must not leave the
instance writing to the old array, which would be a silent wrong result. So each instance records, for
every bound field/ndarray found under its template arguments, the path that reaches it (`Guard`); a
launch re-resolves the paths and, where one now leads to another object, uses (or compiles) the instance
for the objects found (`Kernel._run`).

Paths go through attributes, list/tuple items and dict entries, at most `MAX_DEPTH` steps from the
argument; fields and ndarrays are not descended into.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from qd.frontend import values as _v

MAX_DEPTH = 6
MAX_NODES = 20000


@dataclass(frozen=True)
class Guard:
    value_index: int  # which argument value (index into the leaf values of `Signature.bind`)
    path: tuple  # steps ("a", name) / ("i", index) / ("k", key)
    target: Any  # the object bound when the instance compiled


_LEAF_TYPES = (int, float, bool, complex, str, bytes, type(None), np.ndarray, np.generic, types.ModuleType,
               types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _children(o: Any) -> list[tuple[tuple, Any]]:
    if isinstance(o, _LEAF_TYPES) or _v.global_kind(o) is not None:
        return []
    if isinstance(o, (list, tuple)):
        return [(("i", k), x) for k, x in enumerate(o)]
    if isinstance(o, dict):
        return [(("k", k), x) for k, x in o.items() if isinstance(k, (str, int))]
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict):
        return [(("a", k), x) for k, x in d.items()]
    slots = getattr(type(o), "__slots__", ())
    return [(("a", k), getattr(o, k)) for k in ((slots,) if isinstance(slots, str) else slots) if hasattr(o, k)]


def find(template_values: list[tuple[int, Any]], bindings: list) -> tuple[Guard, ...]:
    """Guards for the bound fields/ndarrays (in `bindings`) found under the given (value index, value)."""
    wanted = {id(b): b for b in bindings if b is not None and _v.global_kind(b) is not None}
    if not wanted:
        return ()
    out: list[Guard] = []
    found: set[int] = set()
    seen: set[int] = set()
    frontier = [(vi, (), v) for vi, v in template_values]
    nodes = 0
    for _depth in range(MAX_DEPTH + 1):
        nxt = []
        for vi, path, o in frontier:
            if id(o) in wanted and path and id(o) not in found:
                found.add(id(o))
                out.append(Guard(vi, path, o))
                continue
            if id(o) in seen:
                continue
            seen.add(id(o))
            nodes += 1
            if nodes > MAX_NODES:
                return tuple(out)
            nxt.extend((vi, path + (step,), c) for step, c in _children(o))
        frontier = nxt
        if not frontier or len(found) == len(wanted):
            break
    return tuple(out)


def resolve(root: Any, path: tuple) -> Any:
    o = root
    for kind, k in path:
        o = getattr(o, k) if kind == "a" else o[k]
    return o


def stale(guards: tuple[Guard, ...], values: list) -> bool:
    """Whether some guarded path of this launch's arguments now reaches another object."""
    for g in guards:
        try:
            if resolve(values[g.value_index], g.path) is not g.target:
                return True
        except (AttributeError, IndexError, KeyError, TypeError):
            return True
    return False


def current(guards: tuple[Guard, ...], values: list) -> tuple:
    """The identities the guarded paths reach now (a key suffix for the instance of these objects)."""
    out = []
    for g in guards:
        try:
            out.append(id(resolve(values[g.value_index], g.path)))
        except (AttributeError, IndexError, KeyError, TypeError):
            out.append(None)
    return tuple(out)
