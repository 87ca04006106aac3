"""`MatrixField.get_scalar_field(i)` / `(i, j)`: one component of a vector or matrix field, as a scalar field.

Quadrants builds a matrix field from one scalar field per component and hands that one out. qd stores a field's
elements together, so the component is a view of its parent: host reads and writes (`c[I]`, `fill`, `to_numpy`,
`from_numpy`) go to the parent's storage at the component's element index and count as the parent's writes
(generation, device copy); in a kernel it is the parent's buffer with the component as trailing constant indices
(`qd.frontend.values.ComponentTensor`). Its `.grad` / `.dual` are the same component of the parent's.

The component is chosen as Quadrants does: flat member `i * m + j` (j = 0 when only i is given; m = 1 for a vector),
Python-style for a negative one. Placing a component of a field not placed yet (a structure-of-arrays layout,
`qd.root.dense(qd.i, n).place(v.get_scalar_field(0))`, as difftaichi's `diffmpm_benchmark.py` does) places the
parent; placing another at a different shape raises Quadrants' "Members of the following field have different
shapes" (Quadrants raises it at the first launch after).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from qd.errors import QuadrantsRuntimeError
from qd.runtime._hostdata import before_host_write, cast_scalar, import_torch, to_python

if TYPE_CHECKING:
    from qd.runtime.fields import Field
    from qd.runtime.snode import SNode


class FieldComponent:
    """One component of the elements of a vector/matrix field (`_field`; `component`: its element index)."""

    _qd_global_kind = "field"  # kernels reach it as a field (`qd.frontend.values.bind_global_object`)
    _qd_component_view = True
    _kind = "qd.field"
    elem_shape: tuple = ()

    def __init__(self, parent: Field, component: tuple[int, ...]) -> None:
        self._field = parent  # the vector/matrix field
        self.component = component

    # ---------------------------------------------------------------- what it is

    @property
    def dtype(self) -> Any:
        return self._field.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._field.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def offset(self) -> tuple[int, ...]:
        return self._field.offset

    @property
    def name(self) -> str:
        return f"{self._field.name}{list(self.component)}" if self._field.name else ""

    @property
    def snode(self) -> SNode | None:
        return self._field.snode

    @property
    def _placed(self) -> bool:
        return self._field._placed

    def parent(self, n: int = 1) -> SNode | None:
        return self._field.parent(n)

    @property
    def grad(self) -> FieldComponent | None:
        return None if self._field.grad is None else component_view(self._field.grad, self.component)

    @property
    def dual(self) -> FieldComponent | None:
        return None if self._field.dual is None else component_view(self._field.dual, self.component)

    def has_grad(self) -> bool:
        return self._field.has_grad()

    def has_dual(self) -> bool:
        return self._field.has_dual()

    @property
    def generation(self) -> int:
        return self._field.generation

    # ---------------------------------------------------------------- host data

    def _view(self) -> np.ndarray:
        """The parent's storage (canonical axes, brought up to date from the device) at this component."""
        self._field._materialize(True)  # every host access of a component, as a field's bulk operations
        return self._field._host_view()[(Ellipsis,) + self.component]

    def __getitem__(self, key: Any) -> Any:
        return to_python(self._view()[self._field._normalize_key(key)], self.dtype)

    def __setitem__(self, key: Any, value: Any) -> None:
        idx = self._field._normalize_key(key)
        before_host_write(self._field)
        self._view()[idx] = cast_scalar(value, self.dtype)
        self._field._bump()

    def fill(self, val: Any) -> None:
        before_host_write(self._field)
        self._view()[...] = cast_scalar(val, self.dtype)
        self._field._bump()

    def to_numpy(self, dtype: Any = None) -> np.ndarray:
        return np.array(self._view(), dtype=dtype, copy=True, order="C")

    def from_numpy(self, arr: Any) -> None:
        a = np.asarray(arr)
        if tuple(a.shape) != tuple(self.shape):
            raise ValueError(f"Mismatch shape: {tuple(self.shape)} expected, but {tuple(a.shape)} provided")
        before_host_write(self._field)
        np.copyto(self._view(), a, casting="unsafe")
        self._field._bump()

    def copy_from(self, other: Any) -> None:
        self.from_numpy(other.to_numpy())

    def to_torch(self, device: Any = None) -> Any:
        torch = import_torch()
        t = torch.from_numpy(self.to_numpy())
        return t if device is None else t.to(device)

    def from_torch(self, t: Any) -> None:
        self.from_numpy(t.detach().to("cpu").contiguous().numpy())

    def __iter__(self) -> Any:
        raise NotImplementedError("Struct for is only available in Quadrants scope.")

    def __repr__(self) -> str:
        return f"<qd.field component {list(self.component)} of {self._field!r}>"

    def __str__(self) -> str:
        return str(self.to_numpy()) if self._placed else repr(self)


def component_view(parent: Field, indices: tuple) -> FieldComponent:
    """`parent.get_scalar_field(*indices)`: the view of one component (the same object every time)."""
    es = tuple(parent.elem_shape)
    if not es:
        raise AttributeError("'ScalarField' object has no attribute 'get_scalar_field'")
    assert len(indices) in (1, 2), "get_scalar_field takes one or two indices"
    n, m = es[0], es[1] if len(es) == 2 else 1
    flat = int(indices[0]) * m + (int(indices[1]) if len(indices) == 2 else 0)
    if not -n * m <= flat < n * m:
        raise IndexError(f"get_scalar_field{tuple(indices)}: a field of {n}x{m} elements has {n * m} components")
    flat %= n * m
    component = (flat,) if len(es) == 1 else divmod(flat, m)
    views = parent.__dict__.setdefault("_qd_components", {})
    if component not in views:
        views[component] = FieldComponent(parent, tuple(component))
    return views[component]


def place_component(node: SNode, c: FieldComponent, offset: Any) -> None:
    """`node.place(c)`: places the parent at the node's shape the first time; later components of it must have that
    shape (each is recorded as a place node of the parent, for `lazy_grad`)."""
    parent = c._field
    if not parent._placed:
        node._place_field(parent, offset)
        return
    if tuple(node.shape) != tuple(parent.shape):
        raise QuadrantsRuntimeError(
            f"Members of the following field have different shapes [{tuple(parent.shape)}, {tuple(node.shape)}]: "
            f"component {list(c.component)} of {parent.name or 'a vector/matrix field'} is placed at another shape "
            f"than the components placed before it; place every component at the same shape")
    from qd.runtime.snode import SNode

    node.children.append(SNode("place", node, field=parent))


__all__ = ["FieldComponent", "component_view", "place_component"]
