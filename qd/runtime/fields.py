"""Fields: `qd.field(...)` and the `Field` class (numpy storage, gradients, the program's registry).

A field is declared, then placed (by `shape=` at once, or later through `qd.root.dense(...).place`);
placing allocates `arr`, zero-filled. Every float field has `.grad` and `.dual` companion fields from
the start, as in Quadrants, so `qd.root.dense(qd.i, n).place(x, x.grad)` works; a companion has
storage only once placed (`needs_grad=True`, `qd.root.lazy_grad()`, or an explicit place), which
`has_grad()` / `has_dual()` report. Integer fields have `grad` and `dual` None.
"""

from __future__ import annotations

import numbers
from typing import Any, Iterator

from qd.errors import QuadrantsRuntimeError, QuadrantsSyntaxError
from qd.runtime import program, pyquadrants
from qd.runtime._hostdata import HostData, IndexCountError, normalize_shape
from qd.runtime.snode import SNode, axes, root
from qd.types import hooks
from qd.types.dtypes import DataType, MatrixType, to_dtype
from qd.types.enums import SNodeGradType

_fields: list["Field"] = []

_ROLE_SUFFIX = {SNodeGradType.ADJOINT: ".grad", SNodeGradType.DUAL: ".dual"}


class Field(HostData):
    """A placed-or-unplaced global array of `dtype` elements of shape `elem_shape` (() for scalars)."""

    _kind = "qd.field"
    _bulk_materializes = True

    def __init__(self, dtype: Any, shape: Any = None, elem_shape: tuple[int, ...] = (), name: str = "",
                 offset: Any = None, needs_grad: bool = False, needs_dual: bool = False,
                 order: str | None = None) -> None:
        dt = to_dtype(dtype)
        if (needs_grad or needs_dual) and not dt.is_float:
            raise QuadrantsRuntimeError(f"{dt} is not supported for field with `needs_grad=True` or "
                                        "`needs_dual=True`.")
        self._init_state(dt, tuple(elem_shape), name, SNodeGradType.PRIMAL)
        self._needs_grad, self._needs_dual = bool(needs_grad), bool(needs_dual)
        if dt.is_float:
            self.grad = self._new_companion(SNodeGradType.ADJOINT)
            self.dual = self._new_companion(SNodeGradType.DUAL)
        if shape is None:
            if offset is not None:
                raise QuadrantsSyntaxError("shape cannot be None when offset is set")
            if order is not None:
                raise QuadrantsSyntaxError("shape cannot be None when order is set")
            return
        shape = normalize_shape(shape, "qd.field")
        _check_order(order, len(shape))
        node = root.dense(axes(*range(len(shape))), shape) if shape else current_root_node()
        node.place(self, offset=offset)
        if order is not None:  # storage in `order`'s axis order (as Quadrants); indices stay canonical
            self._relayout(tuple(ord(ch) - ord("i") for ch in order))

    def _init_state(self, dtype: DataType, elem_shape: tuple[int, ...], name: str,
                    role: SNodeGradType) -> None:
        self.dtype = dtype
        self.elem_shape = elem_shape
        self.name = name
        self._role = role
        self._arr = None
        self._shape: tuple[int, ...] | None = None
        self._offset_t: tuple[int, ...] = ()
        self._offset_arg: Any = None
        self._snode: SNode | None = None
        self._destroyed = False
        self._needs_grad = self._needs_dual = False
        self._primal: Field | None = None
        self.grad: Field | None = None
        self.dual: Field | None = None
        self.generation = 0
        _fields.append(self)
        pyquadrants.declared()

    def _new_companion(self, role: SNodeGradType) -> "Field":
        # Built without calling a subclass __init__; attributes a subclass adds are reached through
        # __getattr__'s delegation to the primal.
        comp = object.__new__(type(self))
        Field._init_state(comp, self.dtype, self.elem_shape, self.name + _ROLE_SUFFIX[role], role)
        comp._primal = self
        comp._layout = self._layout
        return comp

    def _relayout(self, layout: Any) -> None:
        """A field and its gradient/dual companions share one physical layout (placed or not)."""
        HostData._relayout(self, layout)
        for comp in (self.grad, self.dual):
            if comp is not None:
                HostData._relayout(comp, layout)

    def __getattr__(self, name: str) -> Any:
        primal = self.__dict__.get("_primal")
        if primal is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(primal, name)

    # ---------------------------------------------------------------- placement

    def _place(self, node: SNode, shape: tuple[int, ...], offset: Any) -> None:
        """Called by `SNode.place`: allocate zeroed storage of `shape + elem_shape`."""
        import numpy as np

        if self._destroyed:
            self._raise_no_storage()
        if self._arr is not None:
            raise QuadrantsRuntimeError(f"qd.field {self.name or ''} is already placed".replace("  ", " "))
        self._offset_t = _normalize_offset(offset, len(shape))
        self._offset_arg = offset
        self._arr = np.zeros(self._physical(tuple(shape)) + self.elem_shape, dtype=self.dtype.np_dtype)
        self._shape = tuple(shape)
        self._snode = node
        self._bump()

    def _companions_to_place(self) -> Iterator["Field"]:
        if self._needs_grad and self.grad is not None and not self.grad._placed:
            yield self.grad
        if self._needs_dual and self.dual is not None and not self.dual._placed:
            yield self.dual

    @property
    def _placed(self) -> bool:
        return self._arr is not None

    def _destroy(self) -> None:
        self._arr = None
        self._snode = None
        self._destroyed = True

    def _raise_no_storage(self) -> None:
        what = f"qd.field {self.name!r}" if self.name else "qd.field"
        if self._destroyed:
            raise QuadrantsRuntimeError(f"{what} was destroyed by qd.reset() (qd.init resets too); "
                                        "declare it again after qd.init")
        raise QuadrantsRuntimeError(
            f"Field has no allocation ({what} is not placed). Give it a shape (`qd.field(..., shape=...)`), "
            "place it (`qd.root.dense(qd.i, n).place(x)`), or for gradients use `needs_grad=True` / "
            "`needs_dual=True` or `qd.root.lazy_grad()` / `qd.root.lazy_dual()`, before using it.")

    # ---------------------------------------------------------------- queries

    @property
    def shape(self) -> tuple[int, ...]:
        if self._shape is None:
            self._raise_no_storage()
        return self._shape

    @property
    def offset(self) -> tuple[int, ...]:
        """Lowest index along each axis (all zeros unless declared with `offset=`)."""
        return self._offset_t

    def _offset(self) -> tuple[int, ...]:
        return self._offset_t

    @property
    def snode(self) -> SNode | None:
        """The place SNode (None while unplaced)."""
        return self._snode

    @property
    def _name(self) -> str:
        return self.name

    @property
    def n(self) -> int:
        if not self.elem_shape:
            raise AttributeError("a scalar field has no attribute 'n'")
        return self.elem_shape[0]

    @property
    def m(self) -> int:
        if not self.elem_shape:
            raise AttributeError("a scalar field has no attribute 'm'")
        return self.elem_shape[1] if len(self.elem_shape) == 2 else 1

    def parent(self, n: int = 1) -> SNode | None:
        return self.snode.parent(n) if self.snode is not None else None

    def has_grad(self) -> bool:
        return self.grad is not None and self.grad._placed

    def has_dual(self) -> bool:
        return self.dual is not None and self.dual._placed

    def _set_grad(self, grad: "Field") -> None:
        self.grad = grad

    def _set_dual(self, dual: "Field") -> None:
        self.dual = dual

    def _loop_range(self) -> SNode | None:
        return self._snode

    def _get_field_members(self) -> list["Field"]:
        return [self]

    def get_scalar_field(self, *indices: int) -> Any:
        """Quadrants' `MatrixField.get_scalar_field(i)` / `(i, j)`: component (i, j) of every element, as a scalar
        field that host code and kernels read and write (`qd.runtime.field_component`)."""
        from qd.runtime.field_component import component_view

        return component_view(self, indices)

    def _index_count_message(self, n: int) -> str:
        # Quadrants' wording, which its tests match on
        return f"Slicing is not supported on qd.field ({len(self.shape)}d field indexed with {n}d indices)"

    def copy_from(self, other: Any) -> None:
        if not isinstance(other, Field):
            raise TypeError("Cannot copy from a non-field object")
        if tuple(other.shape) != tuple(self.shape) or other.elem_shape != self.elem_shape:
            raise ValueError(f"qd.field shape {self.shape} does not match the source field shape "
                             f"{other.shape}")
        super().copy_from(other)

    def _shape_mismatch(self, got: tuple[int, ...]) -> ValueError:
        return ValueError(f"qd.field shape {self._full_shape()} does not match the numpy array shape "
                          f"{tuple(got)}")

    def __repr__(self) -> str:
        return super().__repr__() if self._placed else f"<qd.field {self.name!r}: not placed>"

    __str__ = HostData.__str__


def current_root_node() -> SNode:
    from qd.runtime import snode

    return snode.current_root()


def _normalize_offset(offset: Any, ndim: int) -> tuple[int, ...]:
    if offset is None:
        return (0,) * ndim
    if isinstance(offset, numbers.Integral):
        offset = (offset,)
    offset = tuple(int(o) for o in offset)
    if len(offset) != ndim:
        raise QuadrantsSyntaxError("The dimensionality of shape and offset must be the same "
                                   f"({ndim} != {len(offset)})")
    return offset


def _check_order(order: str | None, ndim: int) -> None:
    if order is None:
        return
    if len(order) != ndim:
        raise QuadrantsSyntaxError("The dimensionality of shape and order must be the same "
                                   f"({ndim} != {len(order)})")
    if len(set(order)) != ndim:
        raise QuadrantsSyntaxError("The axes in order must be different")
    for ch in order:
        if not 0 <= ord(ch) - ord("i") < ndim:
            raise QuadrantsSyntaxError(f"Invalid axis {ch}")


def field(dtype: Any, shape: Any = None, name: str = "", offset: Any = None, needs_grad: bool = False,
          needs_dual: bool = False, order: str | None = None) -> Field:
    """Declare a field: a global array of `dtype` elements that qd owns and kernels use by name.

    `qd.field(qd.f32, shape=(64, 64))` makes a 64 x 64 field of floats, zero-filled. `dtype` is a scalar
    type, or a vector/matrix type (`qd.types.vector(3, qd.f32)`; `qd.Vector.field` and `qd.Matrix.field`
    say the same). Without `shape` the field is not placed yet: place it in an SNode tree
    (`qd.root.dense(qd.ij, (64, 64)).place(f)`) before the first kernel uses it.

    Arguments:

    shape
        An int or a tuple of ints; `()` makes a 0-D field, read as `f[None]`.
    name
        Used in error messages.
    offset
        The index of the first element along each axis (default 0): indices run from `offset` to
        `offset + shape`.
    needs_grad
        Also allocate `f.grad`, a field of the same shape that reverse-mode autodiff accumulates into.
    needs_dual
        Also allocate `f.dual`, for forward mode (`qd.ad.FwdMode`).
    order
        The axis order of the layout, as in Quadrants (`"ij"`, `"ji"`, ...).

    On the host a field is read and written with `f[i]`, `f.fill(v)`, `f.to_numpy()`, `f.from_numpy(a)`,
    `f.to_torch()`/`f.from_torch(t)`. Fields live until `qd.reset()` (or the next `qd.init`); using one
    after that raises `qd.QuadrantsRuntimeError`. A wrong `dtype`, `shape` or `offset` raises at once.
    """
    kw = dict(name=name, offset=offset, needs_grad=needs_grad, needs_dual=needs_dual, order=order)
    if isinstance(dtype, MatrixType):
        return hooks.impl.Matrix._typed_field(dtype, shape, **kw)
    return Field(dtype, shape, **kw)


def all_fields() -> list[Field]:
    """Every field (and companion) declared since the last reset."""
    return list(_fields)


def _reset() -> None:
    for f in _fields:
        f._destroy()
    _fields.clear()


program.on_reset(_reset)

class _FieldKind(type):
    """`isinstance(f, qd.ScalarField)` / `qd.MatrixField`: Quadrants' field classes. qd has one `Field` class;
    these tell its fields apart by their element shape (a vector field is a MatrixField, as in Quadrants)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        if getattr(type(obj), "_qd_component_view", False):  # `get_scalar_field`'s view: a scalar field
            return not cls._matrix
        return isinstance(obj, Field) and bool(obj.elem_shape) is cls._matrix

    def __subclasscheck__(cls, sub: type) -> bool:
        return sub is cls


class ScalarField(metaclass=_FieldKind):
    """`qd.ScalarField`: the class of fields of scalars, for `isinstance` checks only.

    qd has one field class (`type(qd.field(qd.f32, 3))` is `Field`); `isinstance(f, qd.ScalarField)` is True
    for a field made by `qd.field(dtype, ...)` (a scalar per element) and False for a vector or matrix field,
    which is a `qd.MatrixField` instead. Make fields with `qd.field`, not by calling this class.
    """

    _matrix = False


class MatrixField(metaclass=_FieldKind):
    """A field of vectors or matrices, for `isinstance` checks (make them with `qd.Vector.field` / `qd.Matrix.field`)."""

    _matrix = True


__all__ = ["Field", "MatrixField", "ScalarField", "field", "IndexCountError"]


hooks.register(Field=Field)
