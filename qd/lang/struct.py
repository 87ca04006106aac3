"""Struct values and fields (Quadrants' `qd.Struct`), host side; the struct types are `qd/types/struct_type.py`.

- `Struct`: a host struct value (attribute and item access over an ordered dict of members). `qd.Struct(...)`
  without a type makes an anonymous one; `qd.Struct.field(members, shape=...)` makes a struct field.
- `StructField`: one field per member (SoA, Quadrants' default layout); `f[i]` is a `StructFieldElement`
  that reads and writes the members' fields at i; `to_numpy()` is a dict of arrays.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from qd.errors import QuadrantsTypeError
from qd.types import hooks
from qd.types.dtypes import MatrixType
from qd.types.struct_type import StructType, UnpackedVectorType, dataclass  # noqa: F401  (their host face)


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
        if hooks.impl.in_kernel():
            return hooks.impl.struct_kernel(None, args, kwargs)
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


# ---------------------------------------------------------------- struct fields

class StructField:
    """`qd.StructField`: a field of structs, made by `StructType.field(shape=...)` (e.g.
    `qd.types.struct(pos=qd.types.vector(2, qd.f32), mass=qd.f32).field(shape=4)`).

    It is stored as one field per member, all of the struct field's shape (structure of arrays): `sf.mass`
    is a scalar field, `sf.pos` a vector field, and nested structs give nested StructFields. `sf.keys()` lists
    the member names. In a kernel, `sf[i]` is a struct value (assign a whole struct with `sf[i] = p`, or one
    member with `sf[i].mass = m`); in Python scope `sf[i]` reads an element, and `sf.to_numpy()` gives a dict of
    arrays, one per member. With `needs_grad=True` only the float members get `.grad`. A missing member name
    raises `AttributeError`.
    """

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


def _struct_host(t: StructType, args: tuple, kwargs: dict) -> Struct:
    """`T(...)` in Python scope: a host `Struct` of type `t`."""
    if len(args) == 1 and not kwargs and isinstance(args[0], (dict, Struct)) \
            and sorted(args[0].keys()) == sorted(t.members):  # a whole struct value
        kwargs, args = dict(args[0].items()), ()
    raw = t.member_values(args, kwargs)
    return Struct._typed(t, {k: _host_member(k, mt, raw[k]) for k, mt in t.members.items()})


hooks.register(Struct=Struct, StructField=StructField, struct_host=_struct_host)
