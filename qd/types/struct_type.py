"""Struct types (Quadrants' `qd.types.struct`, `@qd.dataclass`): what a struct is, not what it holds.

- `StructType`: ordered members (scalar dtypes, vector/matrix types, other struct types) and methods (the
  functions of a `@qd.dataclass` class; `@qd.func` ones are callable in kernels as `s.method(...)`).
  Calling it builds a value: in a kernel a `qd.frontend.structs.StructVal`, in Python scope a host
  `qd.Struct` (`qd/lang/struct.py`, through `qd.types.hooks`); `.field(...)` makes a struct field there too.
- `UnpackedVectorType`: `qd.types.vector(n, dt, unpacked=True)`, a layout of a `@qd.dataclass` member.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.types import dtypes, hooks
from qd.types.dtypes import DataType, MatrixType


class UnpackedVectorType(MatrixType):
    """`qd.types.vector(n, dt, unpacked=True)`: only meaningful as a `@qd.dataclass` / struct member, which it
    expands into n scalar members `_<name>0` ... (`StructType._unpacked_groups`); `s.name[k]` with a
    compile-time k is member `_<name>k`."""

    def _refuse(self, what: str) -> Any:
        raise QuadrantsSyntaxError(f"{what} of a qd.types.vector(..., unpacked=True) type: unpacked=True only "
                                   "declares the layout of a @qd.dataclass member; use a packed vector type here")

    def __call__(self, *args: Any) -> Any:
        return self._refuse("cannot build a value")

    def field(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("cannot make a field")

    def ndarray(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("cannot make an ndarray")


def _expand_unpacked(members: dict) -> tuple[dict, dict]:
    """(members with every unpacked vector member expanded into scalar ones, the groups)."""
    out: dict = {}
    groups: dict = {}
    for k, t in members.items():
        if not isinstance(t, UnpackedVectorType):
            if k in out:
                raise QuadrantsSyntaxError(f"struct member '{k}' collides with a member generated for an unpacked "
                                           "vector")
            out[k] = t
            continue
        names = tuple(f"_{k}{i}" for i in range(t.n))
        for nm in names:
            if nm in out or nm in members:
                raise QuadrantsSyntaxError(f"struct member '{nm}' collides with the members generated for the "
                                           f"unpacked vector '{k}'")
            out[nm] = t.dtype or dtypes.to_dtype(float)
        groups[k] = (t.n, t.dtype, names)
    return out, groups


def _member_type(name: str, t: Any) -> Any:
    if isinstance(t, (DataType, MatrixType, StructType)):
        return t
    if t in (int, float, bool):
        return dtypes.to_dtype(t)
    raise QuadrantsTypeError(f"struct member '{name}' has an invalid type {t!r}: expected a qd dtype, a "
                             "vector/matrix type or a struct type")


class StructType:
    """`qd.types.struct(**members)`: a struct type with the given members, in order.

    Each member type is a scalar dtype (`qd.f32`), a vector or matrix type (`qd.types.vector(3, qd.f32)`) or
    another struct type; anything else raises `qd.QuadrantsTypeError`. Calling the type builds a value, by
    keyword or by position (`P(pos=[1.0, 2.0], mass=2.0)` or `P([1.0, 2.0], 2.0)`): a struct value in a kernel
    or func (members read and written as `p.mass`), a host `qd.Struct` in Python scope. `P.field(shape=...)`
    makes a `qd.StructField`; the type also annotates kernel/func parameters and return values.

    Example: `P = qd.types.struct(pos=qd.types.vector(2, qd.f32), mass=qd.f32)`.
    """

    def __init__(self, **members: Any) -> None:
        members, self._unpacked_groups = _expand_unpacked(members)
        self.members = {k: _member_type(k, t) for k, t in members.items()}
        self.methods: dict = {}
        self.name = ""

    def keys(self) -> list[str]:
        return list(self.members)

    def same_layout(self, other: Any) -> bool:
        if not isinstance(other, StructType) or list(self.members) != list(other.members):
            return False
        for a, b in zip(self.members.values(), other.members.values()):
            if isinstance(a, StructType):
                if not a.same_layout(b):
                    return False
            elif type(a) is not type(b) or a != b:
                return False
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if hooks.impl.in_kernel():
            return hooks.impl.struct_kernel(self, args, kwargs)
        return hooks.impl.struct_host(self, args, kwargs)

    def member_values(self, args: tuple, kwargs: dict) -> dict:
        """The raw value of each member (in member order) for a constructor call `T(*args, **kwargs)`:
        positional values fill members in order, keywords by name, missing members are 0. Shared by the
        host constructor and the kernel one (`qd.frontend.structs.construct`), which convert the values."""
        if len(args) > len(self.members):
            raise QuadrantsSyntaxError(f"{self!r} takes {len(self.members)} members, got {len(args)} positional values")
        given = dict(zip(self.members, args))
        for k, v in kwargs.items():
            if k not in self.members:
                raise QuadrantsSyntaxError(f"{self!r} has no member '{k}'")
            if k in given:
                raise QuadrantsSyntaxError(f"struct member '{k}' given twice")
            given[k] = v
        return {k: given.get(k, 0) for k in self.members}

    def field(self, shape: Any = None, name: str = "", offset: Any = None, needs_grad: bool = False,
              needs_dual: bool = False, layout: Any = None, order: Any = None) -> Any:
        sf = hooks.impl.StructField(self, shape, name=name, offset=offset, needs_grad=needs_grad, needs_dual=needs_dual,
                         order=order)
        if layout is not None and getattr(layout, "name", "") == "AOS":  # stored SoA; see HostData._aos_copy
            for f in sf._leaves():
                f._aos_member = True
        return sf

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.members.items())
        return f"<qd.StructType {items}, struct_methods={self.methods}>"


# ---------------------------------------------------------------- @qd.dataclass

def dataclass(cls: type) -> StructType:
    """`@qd.dataclass`: a StructType whose members are `cls`'s annotations and whose methods are its
    functions (`@qd.func` ones callable in kernels)."""
    ann = cls.__dict__.get("__annotations__", {})
    mod = sys.modules.get(cls.__module__)
    frame = inspect.currentframe()
    caller = frame.f_back.f_locals if frame is not None and frame.f_back is not None else {}
    members = {}
    for k, t in ann.items():
        if k in cls.__dict__:
            raise QuadrantsSyntaxError("Default value in @dataclass is not supported.")
        if isinstance(t, str):
            try:
                t = eval(t, {**(vars(mod) if mod else {}), **caller})  # noqa: S307 - the user's own annotation
            except Exception as e:  # noqa: BLE001
                raise QuadrantsSyntaxError(f"cannot resolve annotation {t!r} of {cls.__name__}.{k}: {e}") from None
        members[k] = t
    methods = {k: v for k, v in cls.__dict__.items()
               if not (k.startswith("__") and k.endswith("__")) and (callable(v) or isinstance(v, (staticmethod,
                                                                                                      classmethod)))}
    st = StructType(**members)
    st.name, st.methods = cls.__name__, methods
    st.__name__ = cls.__name__
    st.__doc__ = cls.__doc__
    return st
