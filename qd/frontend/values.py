"""Compile-time values the transformer binds to names: local variables, kernel parameters, global tensors.

- `Var` / `MatrixVar`: mutable locals (one `Alloca` per scalar entry).
- `ParamRef` / `MatrixParamRef`: scalar kernel parameters never assigned to; every read emits a fresh
  `ArgLoad` (pure, so it may sit anywhere, including inside parallel loops).
- `GlobalTensor`: a field or an ndarray (argument or captured object) reached through `GlobalPtr`.
Matrices are built through `make_matrix`: a `qd.Matrix` (`qd.types.hooks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qd import ir
from qd.errors import QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend.expr import Expr
from qd.types import dtypes
from qd.types import hooks as _hooks
from qd.types.dtypes import DataType, MatrixType


@dataclass
class Var:
    alloca: ir.Alloca

    @property
    def dtype(self) -> DataType:
        return self.alloca.dtype


@dataclass
class MatrixVar:
    allocas: list
    shape: tuple


@dataclass
class ParamRef:
    index: int
    dtype: DataType


@dataclass
class MatrixParamRef:
    indices: list
    dtype: DataType
    shape: tuple


def shape_of(m: Any) -> tuple:
    return (m.n,) if m.ndim == 1 else (m.n, m.m)


def make_matrix(entries: list, shape: tuple) -> Any:
    """A qd.lang.matrix Matrix/Vector holding `entries` (flat, row-major)."""
    return _hooks.impl.Matrix._from_entries(list(entries), tuple(shape))


def matrix_dtype(m: Any) -> DataType:
    """The common dtype of a matrix value (its declared dtype, else promoted over its entries)."""
    dt = getattr(m, "dtype", None)
    if isinstance(dt, DataType):
        return dt
    out: DataType | None = None
    for e in m.entries:
        t = e.dtype if isinstance(e, Expr) else _e.literal_dtype(e)
        out = t if out is None else dtypes.promote(out, t)
    return out or _e.literal_dtype(0)


@dataclass
class StructRef:
    """A typed-dataclass kernel parameter in the body: `s.member` reads the member's binding (a leaf
    parameter, see `qd.frontend.args`) or a nested StructRef."""

    type_name: str
    members: dict

    def member(self, attr: str) -> Any:
        if attr not in self.members:
            raise QuadrantsSyntaxError(f"dataclass {self.type_name} has no member '{attr}'")
        return read(self.members[attr])


@dataclass
class LiftedObject:
    """A template object of a `@qd.data_oriented(template_primitives=False)` class (or an object reached
    through one) in a kernel body: its int/float/bool members are runtime scalar args, read from the
    argument at `path` on every launch (`Builder.lifted_arg`), not compile-time constants."""

    obj: Any
    value_index: int  # the argument (index into the leaf values of `Signature.bind`) the path starts from
    path: tuple  # guards-style steps ("a", name) from that argument to `obj`


def lifts_primitives(obj: Any) -> bool:
    return getattr(type(obj), "_qd_template_primitives", True) is False


def read(binding: Any) -> Any:
    """The value of a name's binding at this point of the program (emits loads)."""
    b = _e.bld()
    if isinstance(binding, Var):
        return Expr(b.load(binding.alloca), ptr=binding.alloca)
    if isinstance(binding, MatrixVar):
        return make_matrix([Expr(b.load(a), ptr=a) for a in binding.allocas], binding.shape)
    if isinstance(binding, ParamRef):
        return Expr(b.emit(ir.ArgLoad, index=binding.index, dtype=binding.dtype))
    if isinstance(binding, MatrixParamRef):
        return make_matrix([Expr(b.emit(ir.ArgLoad, index=i, dtype=binding.dtype)) for i in binding.indices],
                           binding.shape)
    if type(binding) in (tuple, list):
        return type(binding)(read(x) for x in binding)
    return binding


# ---------------------------------------------------------------- global tensors

class GlobalTensor:
    """A field or ndarray inside a kernel: `t[i, j]` loads, `t.shape` gives ints or ExternalShape values.

    `layout` is the buffer's physical axis order (`HostData.layout`: the canonical axis at each storage
    level, outermost first), or None. The buffer (`decl.shape`, `ExternalShape`, `GlobalPtr` indices) is
    physical; subscripts and `shape` here are canonical, permuted in `_index_values` and `shape`."""

    def __init__(self, buffer: int, decl: ir.BufferDecl, obj: Any = None, offset: tuple = (),
                 layout: tuple | None = None, clamp: bool = False) -> None:
        self.buffer = buffer
        self.decl = decl
        self.obj = obj
        self.offset = tuple(offset) if any(offset) else ()
        self.layout = tuple(layout) if layout is not None else None
        self.clamp = clamp  # `qd.types.ndarray(boundary="clamp")`: indices clamped into [0, extent - 1]

    @property
    def dtype(self) -> DataType:
        return self.decl.dtype

    @property
    def ndim(self) -> int:
        return self.decl.ndim if self.decl.kind == "ndarray" else len(self.decl.shape)

    @property
    def elem_shape(self) -> tuple:
        return self.decl.elem_shape

    @property
    def shape(self) -> tuple:
        lay = self.layout
        axes = range(self.ndim) if lay is None else [lay.index(a) for a in range(self.ndim)]  # physical axis of each
        if self.decl.kind != "ndarray":
            return tuple(self.decl.shape[p] for p in axes)
        b = _e.bld()
        return tuple(Expr(b.emit(ir.ExternalShape, buffer=self.buffer, axis=p, dtype=self.decl.axis_dtype(p)))
                     for p in axes)

    def __repr__(self) -> str:
        return f"<{self.decl.kind} {self.decl.name or self.buffer}: {self.dtype}>"

    def _index_values(self, indices: list) -> list:
        flat: list = []
        for i in indices:
            if _e.is_matrix(i):
                flat.extend(i.entries)
            elif isinstance(i, (tuple, list)):
                flat.extend(i)
            else:
                flat.append(i)
        what = "Field" if self.decl.kind == "field" else "Ndarray"
        if len(flat) != self.ndim:
            raise QuadrantsIndexError(f"{what} with dim {self.ndim} accessed with indices of dim {len(flat)}")
        out = []
        for ax, i in enumerate(flat):
            if self.offset and self.offset[ax]:
                i = _e.binary("sub", i, self.offset[ax])
            # an index is i32 (Quadrants'), i64 into an axis that may hold 2^31 elements or more
            it = self.decl.axis_dtype(ax if self.layout is None else self.layout.index(ax))
            if isinstance(i, Expr):
                if not i.dtype.is_int:
                    raise QuadrantsTypeError(f"indices of a {what.lower()} must be integers, got {i.dtype}")
                wide = it.bits == 64
                out.append(_e.cast_expr(i, it) if i.dtype.bits > 32 or i.dtype is dtypes.u1 or wide else i)
            elif _e.is_number(i) and not isinstance(i, float):
                out.append(_e.const(int(i), it))
            else:
                raise QuadrantsTypeError(f"invalid index of type {type(i).__name__} into a {what.lower()}")
        if self.clamp:
            out = [_e.binary("max", _e.binary("min", i, _e.binary("sub", n, 1)), 0) for i, n in zip(out, self.shape)]
        return out if self.layout is None else [out[a] for a in self.layout]

    def ptrs(self, indices: list) -> list:
        """One `GlobalPtr` per element entry (row-major over the element shape)."""
        idx = tuple(i.value for i in self._index_values(indices))
        b = _e.bld()
        es = self.elem_shape
        if not es:
            return [b.emit(ir.GlobalPtr, buffer=self.buffer, indices=idx, dtype=self.dtype)]
        out = []
        count = 1
        for d in es:
            count *= d
        for flat in range(count):
            sub, rem = [], flat
            for d in reversed(es):
                sub.append(rem % d)
                rem //= d
            extra = tuple(b.const(dtypes.i32, k) for k in reversed(sub))
            out.append(b.emit(ir.GlobalPtr, buffer=self.buffer, indices=idx + extra, dtype=self.dtype))
        return out

    def load(self, indices: list) -> Any:
        b = _e.bld()
        vals = [Expr(b.global_load(p), ptr=p) for p in self.ptrs(indices)]
        return vals[0] if not self.elem_shape else make_matrix(vals, self.elem_shape)


def global_kind(obj: Any) -> str | None:
    """'field' or 'ndarray' for qd runtime objects reachable from kernels, else None."""
    k = getattr(obj, "_qd_global_kind", None)
    if isinstance(k, str):
        return k
    name = type(obj).__name__
    if name in ("Field", "ScalarField", "MatrixField", "VectorField"):
        return "field"
    if name in ("Ndarray", "ScalarNdarray", "VectorNdarray", "MatrixNdarray"):
        return "ndarray"
    return None


def describe_object(obj: Any) -> tuple[DataType, tuple, tuple]:
    """(scalar dtype, shape, element shape) of a field/ndarray object."""
    dt = obj.dtype
    es: tuple = ()
    if isinstance(dt, MatrixType):
        es, dt = dt.shape, dt.dtype
    es = tuple(getattr(obj, "elem_shape", None) or getattr(obj, "element_shape", None) or es)
    shape = tuple(obj.shape)
    if not es:
        n, m = getattr(obj, "n", None), getattr(obj, "m", None)
        if isinstance(n, int):
            es = (n,) if getattr(obj, "ndim", 2) == 1 or not isinstance(m, int) else (n, m)
    return dtypes.to_dtype(dt), shape, es


class ComponentTensor(GlobalTensor):
    """`v.get_scalar_field(i)` in a kernel: the buffer of vector/matrix field `v`, its elements' component `component`
    as a scalar tensor (`qd.runtime.field_component`). `obj` is the component view (its `.grad` is the grad's)."""

    def __init__(self, parent: GlobalTensor, component: tuple, obj: Any) -> None:
        super().__init__(parent.buffer, parent.decl, obj, parent.offset or (), parent.layout)
        self.component = component

    @property
    def elem_shape(self) -> tuple:
        return ()

    def ptrs(self, indices: list) -> list:
        idx = tuple(i.value for i in self._index_values(indices))
        b = _e.bld()
        extra = tuple(b.const(dtypes.i32, k) for k in self.component)
        return [b.emit(ir.GlobalPtr, buffer=self.buffer, indices=idx + extra, dtype=self.dtype)]


def bind_global_object(obj: Any, name: str = "") -> GlobalTensor:
    """Register a field (or captured Ndarray) as a buffer of the kernel being built."""
    if getattr(type(obj), "_qd_component_view", False):
        return ComponentTensor(bind_global_object(obj._field, name), tuple(obj.component), obj)
    b = _e.bld()
    dt, shape, es = describe_object(obj)
    layout = getattr(obj, "_layout", None)
    if layout is not None:  # the buffer is the physical storage
        shape = tuple(shape[a] for a in layout)
    decl = ir.BufferDecl(kind="field", dtype=dt, shape=shape, elem_shape=es, name=name)
    buf = b.add_buffer(("obj", id(obj)), decl, obj)
    try:
        offset = tuple(getattr(obj, "offset", ()) or ())
    except Exception:  # noqa: BLE001
        offset = ()
    return GlobalTensor(buf, b.buffers[buf], obj, offset, layout)


def element_type_shape(t: Any) -> tuple[DataType | None, tuple]:
    """(scalar dtype or None, element shape) of an annotation dtype (scalar or MatrixType)."""
    if isinstance(t, MatrixType):
        return t.dtype, t.shape
    if t is None:
        return None, ()
    return dtypes.to_dtype(t), ()
