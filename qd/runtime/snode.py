"""The SNode tree: `qd.root.dense(axes, sizes).place(fields)`, axes, lazy_grad/lazy_dual.

qd supports dense SNodes only. The tree records the layout Quadrants code declares; storage is per
field (each placed field owns one C-contiguous numpy array of the shape its path from the root
gives), so nesting and axis order change shapes but never memory layout. A placed field's SNode is
a `place` node; its `ptr` is the node itself, answering the few queries Quadrants code makes of
`x.snode.ptr`.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Iterator

from qd.errors import QuadrantsRuntimeError, SparseSNodeError
from qd.types.enums import SNodeGradType

if TYPE_CHECKING:
    from qd.runtime.fields import Field


class Axis:
    """One index axis (`qd.i` is axis 0, `qd.j` axis 1, ...)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axis) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("Axis", self.index))

    def __repr__(self) -> str:
        return f"Axis({self.index})"


def axes(*indices: int) -> list[Axis]:
    """`qd.axes(*indices)`: the list of axes with those indices, to pass to `SNode.dense`.

    `qd.axes(0, 1)` is the same as `qd.ij` (`qd.i`, `qd.j`, `qd.k`, `qd.l` are axes 0 to 3, and their
    combinations `qd.ij`, `qd.ijk`, ... are predefined). Example: `qd.root.dense(qd.axes(0, 1), (4, 3)).place(x)`
    gives `x` the shape `(4, 3)`.
    """
    return [Axis(i) for i in indices]


i, j, k, l = axes(0), axes(1), axes(2), axes(3)
ij, ik, il, jk, jl, kl = axes(0, 1), axes(0, 2), axes(0, 3), axes(1, 2), axes(1, 3), axes(2, 3)
ijk, ijl, ikl, jkl = axes(0, 1, 2), axes(0, 1, 3), axes(0, 2, 3), axes(1, 2, 3)
ijkl = axes(0, 1, 2, 3)

_SPARSE_NAMES = {
    "pointer": "Pointer", "bitmasked": "Bitmasked", "dynamic": "Dynamic", "hash": "Hash",
    "bit_struct": "BitStruct", "quant_array": "QuantArray",
}


def _sparse_error(kind: str) -> SparseSNodeError:
    # Quadrants' own wording first, so code matching on it keeps matching.
    return SparseSNodeError(f"{_SPARSE_NAMES[kind]} SNode is not supported on this backend: qd supports dense "
                            f"SNodes only; sparse SNode '{kind}' is not supported (qd's docs/unsupported.md lists "
                            "the Quadrants features qd lacks)")


class SNode:
    """`qd.SNode`: a node of the field layout tree (Quadrants' structural node), rooted at `qd.root`.

    `kind` is 'root', 'dense' or 'place'. `node.dense(axes, sizes)` adds and returns a dense child over those
    axes (`qd.ij`, `qd.axes(0, 1)`; an int size applies to every axis), and `node.place(*fields)` lays the
    fields out under it (they take the shape of the path from the root) and returns the node, so
    `qd.root.dense(qd.ij, (4, 3)).place(x, y)` makes two `(4, 3)` fields. `shape` is the node's extent along
    each axis; `parent(n=1)` walks up; `lazy_grad()` / `lazy_dual()` place the missing `.grad` / `.dual` of
    the float fields under it.

    qd supports dense SNodes only: `pointer`, `bitmasked`, `dynamic`, `hash`, `bit_struct` and `quant_array`
    raise `qd.SparseSNodeError`. A non-positive size or mismatched axes/sizes raise `qd.QuadrantsRuntimeError`.
    """

    def __init__(self, kind: str, parent: "SNode | None", axis_sizes: tuple[tuple[int, int], ...] = (),
                 field: "Field | None" = None) -> None:
        self.kind = kind
        self._parent = parent
        self.axis_sizes = axis_sizes  # ((axis index, size), ...) declared at this node
        self.field = field
        self.children: list[SNode] = []

    # ---------------------------------------------------------------- building

    def dense(self, axes_: "Axis | list[Axis]", dimensions: "int | list[int] | tuple[int, ...]") -> "SNode":
        """Add a dense child over `axes_` with the given sizes (an int applies to every axis)."""
        self._check_open()
        ax = [axes_] if isinstance(axes_, Axis) else list(axes_)
        if isinstance(dimensions, numbers.Integral):
            dimensions = [dimensions] * len(ax)
        dims = list(dimensions)
        if len(dims) != len(ax):
            raise QuadrantsRuntimeError(f"dense: {len(ax)} axes but {len(dims)} dimensions")
        if len({a.index for a in ax}) != len(ax):
            raise QuadrantsRuntimeError("dense: an axis appears twice")
        for n in dims:
            if not isinstance(n, numbers.Integral) or n <= 0:
                raise QuadrantsRuntimeError("Every dimension of a Quadrants field should be positive, "
                                            f"got {dims}")
        child = SNode("dense", self, tuple((a.index, int(n)) for a, n in zip(ax, dims)))
        self.children.append(child)
        return child

    def pointer(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("pointer")

    def bitmasked(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("bitmasked")

    def dynamic(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("dynamic")

    def hash(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("hash")

    _hash = hash

    def bit_struct(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("bit_struct")

    def quant_array(self, *args: Any, **kwargs: Any) -> "SNode":
        raise _sparse_error("quant_array")

    def place(self, *args: Any, offset: "int | tuple[int, ...] | None" = None) -> "SNode":
        """Place fields (or lists of them) under this node; returns this node, as in Quadrants."""
        from qd.runtime.fields import Field

        self._check_open()
        for arg in args:
            if isinstance(arg, (list, tuple)):
                self.place(*arg, offset=offset)
            elif isinstance(arg, Field):
                self._place_field(arg, offset)
            elif getattr(type(arg), "_qd_struct_field", False):  # a struct field: each member's field
                self.place(*arg.members.values(), offset=offset)
            elif getattr(type(arg), "_qd_component_view", False):  # `v.get_scalar_field(i)`: an SoA layout
                from qd.runtime.field_component import place_component

                place_component(self, arg, offset)
            else:
                raise ValueError(f"{arg!r} cannot be placed")
        return self

    def _place_field(self, f: "Field", offset: "int | tuple[int, ...] | None") -> None:
        node = SNode("place", self, field=f)
        self.children.append(node)
        f._place(node, self.shape, offset)
        # A field declared with needs_grad/needs_dual and no shape gets its companions placed with it
        # (Quadrants would report them unplaced at materialisation; qd has no such step).
        for comp in f._companions_to_place():
            self._place_field(comp, offset)

    def lazy_grad(self) -> None:
        """Place `.grad` for every float field placed under this node that lacks one."""
        self._lazy_companions(SNodeGradType.ADJOINT)

    def lazy_dual(self) -> None:
        """Place `.dual` for every float field placed under this node that lacks one."""
        self._lazy_companions(SNodeGradType.DUAL)

    def _lazy_companions(self, role: SNodeGradType) -> None:
        for node in list(self._place_nodes()):
            f = node.field
            if f is None or f._role is not SNodeGradType.PRIMAL:
                continue
            comp = f.grad if role is SNodeGradType.ADJOINT else f.dual
            if comp is not None and not comp._placed:
                node._parent._place_field(comp, f._offset_arg)

    def _place_nodes(self) -> Iterator["SNode"]:
        for c in self.children:
            if c.kind == "place":
                yield c
            else:
                yield from c._place_nodes()

    def _check_open(self) -> None:
        if self.kind == "place":
            raise QuadrantsRuntimeError("cannot add children to a place SNode")

    # ---------------------------------------------------------------- queries

    @property
    def ptr(self) -> "SNode":
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        """Elements from the root along each axis used on the path (axes in index order)."""
        sizes: dict[int, int] = {}
        node: SNode | None = self
        while node is not None:
            for a, n in node.axis_sizes:
                sizes[a] = sizes.get(a, 1) * n
            node = node._parent
        return tuple(sizes[a] for a in sorted(sizes))

    def parent(self, n: int = 1) -> "SNode | None":
        p: SNode | None = self
        while p is not None and n > 0:
            p = p._parent
            n -= 1
        return p

    def _path_from_root(self) -> list["SNode"]:
        path: list[SNode] = []
        node: SNode | None = self
        while node is not None:
            path.append(node)
            node = node._parent
        return path[::-1]

    def _get_children(self) -> list["SNode"]:
        return list(self.children)

    @property
    def _dtype(self) -> Any:
        return self.field.dtype if self.field is not None else None

    @property
    def _name(self) -> str:
        return self.field.name if self.field is not None else self.kind

    def name(self) -> str:
        return self._name

    def data_type(self) -> Any:
        return self._dtype

    def get_snode_grad_type(self) -> SNodeGradType:
        return self.field._role if self.field is not None else SNodeGradType.PRIMAL

    def has_adjoint(self) -> bool:
        return self.field is not None and self.field.grad is not None and self.field.grad._placed

    def has_dual(self) -> bool:
        return self.field is not None and self.field.dual is not None and self.field.dual._placed

    def has_adjoint_checkbit(self) -> bool:
        """Quadrants allocates the global-data-access-rule checkbits of every field with a placed `.grad`
        when debug is on; qd makes them per validated launch, so this reports that same condition."""
        from qd.base import config as _config

        return bool(_config.current().debug) and self.has_adjoint()

    def deactivate_all(self) -> None:
        """Dense cells are always active; nothing to do."""

    def __repr__(self) -> str:
        if self.kind == "root":
            return "qd.root"
        if self.kind == "place":
            return f"SNode(place {self._name!r})"
        return f"SNode(dense {self.shape})"


class _Root:
    """`qd.root`: a stable object forwarding to the current program's root SNode (replaced at reset)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_root, name)

    def __eq__(self, other: object) -> bool:
        return other is self or other is _root

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return "qd.root"


_root = SNode("root", None)
root = _Root()


def current_root() -> SNode:
    return _root


def _reset() -> None:
    global _root
    _root = SNode("root", None)


def _register() -> None:
    from qd.runtime import program

    program.on_reset(_reset)


_register()
