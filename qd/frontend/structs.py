"""Struct values in kernels (`qd/lang/struct.py` is the host side).

A `StructVal` holds one binding per member, in the member order of its `StructType` (None for an anonymous
`qd.Struct(...)`): an rvalue member is an `Expr` / matrix value; a local's member is a `values.Var` /
`MatrixVar` (Allocas, made by `init_local`, so `b = a` copies); a struct field element's member is a
`PtrRef` (its GlobalPtrs, loaded at each read); a kernel parameter's member is a `ParamRef` /
`MatrixParamRef` (read-only). Nested structs are nested StructVals. `member` reads, `member_lv` gives the
assignable place (an `assign.LV`, or a nested StructVal that `store` fills member by member).
A struct field in a kernel is a `StructFieldRef`: a `GlobalTensor` standing for its first leaf member
(so struct-fors and `.shape` work as for any field) whose subscript is a StructVal of PtrRefs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.frontend.expr import Expr
from qd.types import dtypes
from qd.types import hooks as _hooks
from qd.types.dtypes import DataType, MatrixType
from qd.types.struct_type import StructType


@dataclass
class PtrRef:
    ptrs: list
    shape: tuple | None

    def read(self) -> Any:
        b = _e.bld()
        vals = [Expr(b.global_load(p), ptr=p) for p in self.ptrs]
        return vals[0] if self.shape is None else _v.make_matrix(vals, self.shape)


class SelfRef:
    """A struct passed as `self` to one of its `@qd.func` methods: bound by reference, not copied."""

    def __init__(self, sv: "StructVal") -> None:
        self.sv = sv


class StructVal:
    def __init__(self, stype: StructType | None, members: dict) -> None:
        self.stype = stype
        self.members = members

    def keys(self) -> list[str]:
        return list(self.members)

    def items(self) -> list:
        return [(k, self.member(k)) for k in self.members]

    def __getitem__(self, k: str) -> Any:
        return self.member(k)

    def member(self, attr: str) -> Any:
        if self.stype is not None and attr in self.stype._unpacked_groups:
            return UnpackedGroup(self, attr)
        if attr in self.members:
            m = self.members[attr]
            return m.read() if isinstance(m, PtrRef) else _v.read(m)
        meth = self.stype.methods.get(attr) if self.stype is not None else None
        if meth is not None:
            if getattr(meth, "_is_qd_func", False):
                return meth.__get__(SelfRef(self), None)
            return meth.__get__(self, None)
        raise QuadrantsSyntaxError(f"struct {self._name()} has no member '{attr}'")

    def __getattr__(self, attr: str) -> Any:
        """`self.x` inside a plain (non-`@qd.func`) method, which runs as Python at compile time (a tile's
        `_augassign` calls `self._ger_sub(...)`): the member or method, as in a kernel."""
        if attr.startswith("__") or attr in ("stype", "members"):
            raise AttributeError(attr)
        try:
            return self.member(attr)
        except QuadrantsSyntaxError as e:
            raise AttributeError(str(e)) from None

    def member_lv(self, attr: str) -> Any:
        from qd.frontend.assign import LV

        if self.stype is not None and attr in self.stype._unpacked_groups:
            return UnpackedGroup(self, attr)
        if attr not in self.members:
            raise QuadrantsSyntaxError(f"struct {self._name()} has no member '{attr}'")
        m = self.members[attr]
        if isinstance(m, StructVal):
            return m
        if isinstance(m, PtrRef):
            return LV(list(m.ptrs), m.shape)
        if isinstance(m, _v.Var):
            return LV([m.alloca])
        if isinstance(m, _v.MatrixVar):
            return LV(list(m.allocas), tuple(m.shape))
        if isinstance(m, (_v.ParamRef, _v.MatrixParamRef)):
            raise QuadrantsSyntaxError(f'Kernel argument "{attr}" is immutable in the kernel. If you want to '
                                       "change its value, please create a new variable.")
        raise QuadrantsSyntaxError(f"member '{attr}' of a temporary struct value is not assignable")

    def _name(self) -> str:
        return repr(self.stype.name or self.stype) if self.stype is not None else "qd.Struct"

    def __repr__(self) -> str:
        return f"<struct {self._name()} {list(self.members)}>"


class UnpackedGroup:
    """`s.r` of an unpacked vector member `r`: `s.r[k]` (k compile-time) is scalar member `_r<k>`."""

    def __init__(self, sv: StructVal, name: str) -> None:
        self.sv, self.name = sv, name

    def member_name(self, idx: Any) -> str:
        count, _, names = self.sv.stype._unpacked_groups[self.name]
        if isinstance(idx, tuple) and len(idx) == 1:
            idx = idx[0]
        if isinstance(idx, Expr) or not isinstance(idx, int):
            raise QuadrantsSyntaxError(f"unpacked vector '{self.name}' must be indexed by a python-int (a constant "
                                       "or a qd.static loop variable), not a runtime value")
        if not 0 <= idx < count:
            raise QuadrantsSyntaxError(f"index {idx} out of bounds for unpacked vector '{self.name}' of {count}")
        return names[idx]


# ---------------------------------------------------------------- values

def _value_of(v: Any) -> Any:
    """A member value as an rvalue: host Structs and dicts become StructVals, lists matrices."""
    if isinstance(v, (_hooks.impl.Struct, dict)):
        return construct(v.__dict__.get("_type") if isinstance(v, _hooks.impl.Struct) else None, (v,), {})
    if type(v) in (list, tuple):
        flat = [x for row in v for x in (row if type(row) in (list, tuple) else [row])]
        shape = (len(v),) if all(type(r) not in (list, tuple) for r in v) else (len(v), len(v[0]))
        return _v.make_matrix(flat, shape)
    if hasattr(v, "entries") and not _e.is_matrix(v):  # a host Matrix
        return _v.make_matrix(list(v.entries), _v.shape_of(v))
    return v


def _convert(name: str, t: Any, v: Any) -> Any:
    """`v` as a value of member type `t` (None: the value as given)."""
    v = _value_of(v)
    if t is None:
        return v
    if isinstance(t, StructType):
        if isinstance(v, StructVal):
            return construct(t, (v,), {})
        if isinstance(v, Expr) or _e.is_number(v):
            return construct(t, (v,), {})
        raise QuadrantsTypeError(f"struct member '{name}' needs a {t!r}, got {type(v).__name__}")
    if isinstance(v, StructVal):
        raise QuadrantsTypeError(f"struct member '{name}' ({t}) cannot hold a struct")
    if isinstance(t, MatrixType):
        n = t.n * (t.m if t.ndim == 2 else 1)
        if not _e.is_matrix(v):
            v = _v.make_matrix([v] * n, t.shape)
        if len(v.entries) != n:
            raise QuadrantsTypeError(f"struct member '{name}' needs a {t}, got shape {_v.shape_of(v)}")
        dt = t.dtype or _cfg_fp()
        return _v.make_matrix([_e.cast_expr(_e.as_expr(x), dt) for x in v.entries], t.shape)
    if _e.is_matrix(v):
        raise QuadrantsTypeError(f"struct member '{name}' ({t}) cannot hold a vector/matrix")
    return _e.cast_expr(_e.as_expr(v), t)


def _cfg_fp() -> DataType:
    from qd.frontend.builder import cfg

    return cfg().default_fp


def construct(stype: StructType | None, args: tuple, kwargs: dict) -> StructVal:
    """`T(...)` / `qd.Struct(...)` in a kernel: a struct rvalue (positional values fill the members in
    order, missing members are zero)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], (dict, _hooks.impl.Struct, StructVal)) and (
            stype is None or sorted(args[0].keys()) == sorted(stype.members)):  # a whole struct value
        src = args[0]
        kwargs, args = {k: (src.member(k) if isinstance(src, StructVal) else src[k]) for k in src.keys()}, ()
    if stype is None:
        if args:
            raise QuadrantsSyntaxError("qd.Struct takes a dict or keyword members")
        return StructVal(None, {k: _convert(k, None, v) for k, v in kwargs.items()})
    raw = stype.member_values(args, kwargs)
    out = {k: _convert(k, t, raw[k]) for k, t in stype.members.items()}
    return StructVal(stype, out)


def init_local(t: Any, value: Any, ann: Any = None, name: str = "") -> Any:
    """A fresh struct local holding a copy of `value` (a SelfRef binds its struct itself)."""
    if isinstance(value, SelfRef):
        return value.sv
    if ann is not None:
        value = construct(ann, (value,), {})
    stype = value.stype if ann is None else ann
    members = {}
    for k in value.keys():
        v = value.member(k)
        mt = stype.members[k] if stype is not None else None
        nm = f"{name}.{k}" if name else ""
        if isinstance(v, StructVal):
            members[k] = init_local(t, v, mt, nm)
        else:
            members[k] = t.init_var(v, mt, nm)
    return StructVal(stype, members)


def store(t: Any, lv: StructVal, value: Any) -> None:
    """`lv = value` for a struct place: member by member (the value's members must match)."""
    if isinstance(value, (_hooks.impl.Struct, dict)):
        value = _value_of(value)
    if not isinstance(value, StructVal):
        if isinstance(value, Expr) or _e.is_number(value):
            for k in lv.keys():
                sub = lv.member_lv(k)
                store(t, sub, value) if isinstance(sub, StructVal) else t.store(sub, value)
            return
        raise QuadrantsTypeError("Only dict or Struct can be assigned to a Struct")
    if sorted(value.keys()) != sorted(lv.keys()):
        raise QuadrantsTypeError(f"Member mismatch between structs {lv.keys()}, {value.keys()}")
    vals = {k: value.member(k) for k in value.keys()}  # read every member before writing any
    for k in lv.keys():
        sub = lv.member_lv(k)
        if isinstance(sub, StructVal):
            store(t, sub, vals[k])
        else:
            t.store(sub, vals[k])


def flatten(value: Any, stype: StructType) -> list:
    """The scalar Exprs of struct `value` as `stype` lays them out (return values)."""
    if not isinstance(value, StructVal):
        raise QuadrantsTypeError(f"expected a {stype!r} return value, got {type(value).__name__}")
    if value.stype is not None and not stype.same_layout(value.stype):
        raise QuadrantsTypeError(f"return value of type {value.stype!r} does not match the declared return type "
                                 f"{stype!r}")
    v = construct(stype, (value,), {})
    out: list = []
    for k, mt in stype.members.items():
        m = v.member(k)
        if isinstance(mt, StructType):
            out.extend(flatten(m, mt))
        elif _e.is_matrix(m):
            out.extend(_e.as_expr(x) for x in m.entries)
        else:
            out.append(_e.as_expr(m))
    return out


def leaf_dtypes(stype: StructType) -> list:
    out: list = []
    for mt in stype.members.values():
        if isinstance(mt, StructType):
            out.extend(leaf_dtypes(mt))
        elif isinstance(mt, MatrixType):
            out.extend([mt.dtype or _cfg_fp()] * (mt.n * (mt.m if mt.ndim == 2 else 1)))
        else:
            out.append(dtypes.to_dtype(mt))
    return out


def param_struct(stype: StructType, bindings: dict, path: tuple = ()) -> StructVal:
    """A struct kernel parameter: its leaves' bindings (`bindings[path]`) as a StructVal."""
    members = {}
    for k, mt in stype.members.items():
        p = path + (k,)
        members[k] = param_struct(mt, bindings, p) if isinstance(mt, StructType) else bindings[p]
    return StructVal(stype, members)


def attribute(base: Any, attr: str) -> Any:
    """`s.attr` in a kernel, for a StructVal or a StructFieldRef (`f.member` is the member's field)."""
    if isinstance(base, StructVal):
        return base.member(attr)
    if attr in base.members:
        return base.members[attr]
    if attr == "shape":
        return base.shape
    raise QuadrantsSyntaxError(f"struct field {base.sf.stype!r} has no member '{attr}'")


def from_host(s: Any) -> StructVal:
    """A host Struct captured by a kernel: a struct of constants."""
    return construct(s.__dict__.get("_type"), (s,), {})


# ---------------------------------------------------------------- struct fields

class StructFieldRef(_v.GlobalTensor):
    def __init__(self, sf: Any, members: dict, first: _v.GlobalTensor) -> None:
        super().__init__(first.buffer, first.decl, first.obj, first.offset or (), first.layout)
        self.sf = sf
        self.members = members

    def element(self, indices: list) -> StructVal:
        out = {}
        for k, m in self.members.items():
            if isinstance(m, StructFieldRef):
                out[k] = m.element(indices)
            else:
                out[k] = PtrRef(m.ptrs(indices), tuple(m.elem_shape) or None)
        return StructVal(self.sf.stype, out)

    def load(self, indices: list) -> Any:
        return self.element(indices)

    def __repr__(self) -> str:
        return f"<struct field {self.sf.stype!r}>"


def bind_field(t: Any, sf: Any, name: str = "") -> StructFieldRef:
    members = {}
    for k, m in sf.members.items():
        nm = f"{name}.{k}" if name else k
        members[k] = bind_field(t, m, nm) if isinstance(m, _hooks.impl.StructField) else t.wrap_global(m, nm)
    first = next(iter(members.values()))
    return StructFieldRef(sf, members, first)


_hooks.register(struct_kernel=construct)
