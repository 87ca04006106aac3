"""Struct types (Quadrants' `qd.types.struct`, `@qd.dataclass`, `qd.Struct`), host side.

- `StructType`: ordered members (scalar dtypes, vector/matrix types, other struct types) and methods (the
  functions of a `@qd.dataclass` class; `@qd.func` ones are callable in kernels as `s.method(...)`).
  Calling it builds a value: in Python scope a host `Struct`, in a kernel a `qd.frontend.structs.StructVal`.
- `Struct`: a host struct value (attribute and item access over an ordered dict of members). `qd.Struct(...)`
  without a type makes an anonymous one; `qd.Struct.field(members, shape=...)` makes a struct field.
- `StructField`: one field per member (SoA, Quadrants' default layout); `f[i]` is a `StructFieldElement`
  that reads and writes the members' fields at i; `to_numpy()` is a dict of arrays.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Iterator

import numpy as np

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.types import dtypes
from qd.types.dtypes import DataType, MatrixType


def _in_kernel() -> bool:
    from qd.frontend.builder import current

    return current() is not None


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
    """`qd.types.struct(**members)`: a struct type; see the module docstring."""

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
        if _in_kernel():
            from qd.frontend import structs

            return structs.construct(self, args, kwargs)
        return Struct._typed(self, self._host_entries(args, kwargs))

    def _host_entries(self, args: tuple, kwargs: dict) -> dict:
        if len(args) == 1 and not kwargs and isinstance(args[0], (dict, Struct)) \
                and sorted(args[0].keys()) == sorted(self.members):  # a whole struct value
            kwargs, args = dict(args[0].items()), ()
        raw = self.member_values(args, kwargs)
        return {k: _host_member(k, t, raw[k]) for k, t in self.members.items()}

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
              needs_dual: bool = False, layout: Any = None, order: Any = None) -> "StructField":
        sf = StructField(self, shape, name=name, offset=offset, needs_grad=needs_grad, needs_dual=needs_dual,
                         order=order)
        if layout is not None and getattr(layout, "name", "") == "AOS":  # stored SoA; see HostData._aos_copy
            for f in sf._leaves():
                f._aos_member = True
        return sf

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.members.items())
        return f"<qd.StructType {items}, struct_methods={self.methods}>"


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool, np.number))


def _host_member(name: str, t: Any, v: Any) -> Any:
    if isinstance(t, StructType):
        if isinstance(v, Struct) or isinstance(v, dict):
            return t(dict(v.items()))
        if _is_scalar(v):
            return t(v)
        raise QuadrantsTypeError(f"struct member '{name}' needs a {t!r}, got {type(v).__name__}")
    if isinstance(t, MatrixType):
        if _is_scalar(v):
            return t(v)
        if hasattr(v, "entries"):
            v = list(v.entries)
        return t(*np.asarray(v).reshape(-1).tolist())
    if not _is_scalar(v):
        raise TypeError(f"struct member '{name}' ({t}) needs a number, got {type(v).__name__}")
    return int(v) if t.is_int else float(v) if t.is_float else v


def _plain(v: Any) -> Any:
    """A member value of an anonymous host Struct: dicts become Structs, lists vectors/matrices."""
    if isinstance(v, dict):
        return Struct(v)
    if isinstance(v, (list, tuple)):
        from qd.lang.matrix import Matrix, Vector

        a = np.asarray(v)
        return Vector(list(v)) if a.ndim == 1 else Matrix([list(r) for r in v])
    return v


class Struct:
    """A host struct value; `qd.Struct(a=1, b=...)` / `qd.Struct({"a": 1})` (a kernel value in kernels)."""

    _qd_host_struct = True

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if _in_kernel():
            from qd.frontend import structs

            return structs.construct(None, args, kwargs)
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        entries: dict = {}
        for a in args:
            if not isinstance(a, (dict, Struct)):
                raise QuadrantsTypeError(f"qd.Struct takes dicts or keyword members, got {type(a).__name__}")
            entries.update(a.items())
        entries.update(kwargs)
        object.__setattr__(self, "_entries", {k: _plain(v) for k, v in entries.items()})
        object.__setattr__(self, "_type", None)

    @classmethod
    def _typed(cls, t: StructType, entries: dict) -> "Struct":
        s = object.__new__(cls)
        object.__setattr__(s, "_entries", entries)
        object.__setattr__(s, "_type", t)
        return s

    @staticmethod
    def field(members: dict, shape: Any = None, **kwargs: Any) -> "StructField":
        return StructType(**members).field(shape, **kwargs)

    def __getattr__(self, name: str) -> Any:
        entries = self.__dict__.get("_entries", {})
        if name in entries:
            return entries[name]
        t = self.__dict__.get("_type")
        if t is not None and name in t.methods:
            return t.methods[name].__get__(self, type(self))
        raise AttributeError(f"struct has no member '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._entries:
            raise AttributeError(f"struct has no member '{name}'")
        t = self._type
        self._entries[name] = _host_member(name, t.members[name], value) if t is not None else _plain(value)

    def __getitem__(self, k: str) -> Any:
        return self._entries[k]

    def __setitem__(self, k: str, v: Any) -> None:
        setattr(self, k, v)

    def keys(self) -> list[str]:
        return list(self._entries)

    def items(self) -> list:
        return list(self._entries.items())

    def values(self) -> list:
        return list(self._entries.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def to_dict(self) -> dict:
        out = {}
        for k, v in self._entries.items():
            out[k] = v.to_dict() if isinstance(v, Struct) else v.to_numpy() if hasattr(v, "to_numpy") else v
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Struct, dict)):
            return NotImplemented
        return self.to_dict().keys() == dict(other.items()).keys() and all(
            np.array_equal(np.asarray(a.to_numpy() if hasattr(a, "to_numpy") else a),
                           np.asarray(b.to_numpy() if hasattr(b, "to_numpy") else b))
            for a, b in zip(self.values(), [dict(other.items())[k] for k in self.keys()]))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Struct({self._entries})"


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


# ---------------------------------------------------------------- struct fields

class StructField:
    """A field of structs: one field per member (SoA)."""

    _qd_struct_field = True

    def __init__(self, stype: StructType, shape: Any = None, name: str = "", offset: Any = None,
                 needs_grad: bool = False, needs_dual: bool = False, order: Any = None) -> None:
        from qd.runtime.fields import field

        self.stype = stype
        self.members: dict = {}
        for k, t in stype.members.items():
            nm = f"{name}.{k}" if name else k
            if isinstance(t, StructType):
                self.members[k] = StructField(t, shape, nm, offset, needs_grad, needs_dual, order)
            else:
                grad = needs_grad and (t.dtype if isinstance(t, MatrixType) else t).is_float
                dual = needs_dual and (t.dtype if isinstance(t, MatrixType) else t).is_float
                self.members[k] = field(t, shape=shape, name=nm, offset=offset, needs_grad=grad, needs_dual=dual,
                                        order=order)

    def __getattr__(self, name: str) -> Any:
        members = self.__dict__.get("members", {})
        if name in members:
            return members[name]
        raise AttributeError(f"struct field has no member '{name}'")

    def keys(self) -> list[str]:
        return list(self.members)

    def _leaves(self) -> list:
        out = []
        for m in self.members.values():
            out.extend(m._leaves() if isinstance(m, StructField) else [m])
        return out

    def _first(self) -> Any:
        return self._leaves()[0]

    @property
    def shape(self) -> tuple:
        return tuple(self._first().shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> StructType:
        return self.stype

    @property
    def snode(self) -> Any:
        return self._first().snode

    def parent(self, n: int = 1) -> Any:
        return self._first().parent(n)

    @property
    def grad(self) -> dict:
        return {k: m.grad for k, m in self.members.items()}

    def __getitem__(self, idx: Any) -> "StructFieldElement":
        return StructFieldElement(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        StructFieldElement(self, idx)._assign(value)

    def fill(self, v: Any) -> None:
        for m in self.members.values():
            m.fill(v)

    def to_numpy(self, **kwargs: Any) -> dict:
        return {k: m.to_numpy(**kwargs) for k, m in self.members.items()}

    def from_numpy(self, d: dict) -> None:
        for k, m in self.members.items():
            if k not in d:
                raise QuadrantsTypeError(f"from_numpy: no array for struct member '{k}'")
            m.from_numpy(d[k])

    def to_torch(self, **kwargs: Any) -> dict:
        return {k: m.to_torch(**kwargs) for k, m in self.members.items()}

    def from_torch(self, d: dict) -> None:
        for k, m in self.members.items():
            m.from_torch(d[k])

    def copy_from(self, other: "StructField") -> None:
        for k, m in self.members.items():
            m.copy_from(other.members[k])

    def __repr__(self) -> str:
        return f"<qd.StructField {self.stype!r}>"


class StructFieldElement:
    """`f[i]` of a struct field in Python scope: reads and writes the members' fields at i."""

    def __init__(self, sf: StructField, idx: Any) -> None:
        object.__setattr__(self, "_sf", sf)
        object.__setattr__(self, "_idx", idx)

    def __getattr__(self, name: str) -> Any:
        sf = self._sf
        if name in sf.members:
            m = sf.members[name]
            return StructFieldElement(m, self._idx) if isinstance(m, StructField) else m[self._idx]
        if name in sf.stype.methods:
            return sf.stype.methods[name].__get__(self, type(self))
        raise AttributeError(f"struct has no member '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        m = self._sf.members.get(name)
        if m is None:
            raise AttributeError(f"struct has no member '{name}'")
        if isinstance(m, StructField):
            StructFieldElement(m, self._idx)._assign(value)
        else:
            m[self._idx] = value

    def _assign(self, value: Any) -> None:
        if _is_scalar(value):
            for k in self._sf.members:
                setattr(self, k, value)
            return
        if not isinstance(value, (Struct, dict, StructFieldElement)):
            raise QuadrantsTypeError("Only dict or Struct can be assigned to a Struct")
        keys = list(value.keys())
        if sorted(keys) != sorted(self._sf.members):
            raise QuadrantsTypeError(f"Member mismatch between structs {list(self._sf.members)}, {keys}")
        for k in keys:
            setattr(self, k, value[k] if not isinstance(value, StructFieldElement) else getattr(value, k))

    def keys(self) -> list[str]:
        return list(self._sf.members)

    def items(self) -> list:
        return [(k, getattr(self, k)) for k in self.keys()]

    def __getitem__(self, k: str) -> Any:
        return getattr(self, k)

    def to_dict(self) -> dict:
        out = {}
        for k, v in self.items():
            out[k] = v.to_dict() if isinstance(v, StructFieldElement) else v
        return out

    def __repr__(self) -> str:
        return f"StructFieldElement({self.to_dict()})"
