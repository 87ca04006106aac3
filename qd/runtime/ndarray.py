"""Ndarrays: `qd.ndarray(dtype, shape)` and the `Ndarray` class (numpy storage passed to kernels).

Unlike fields, an ndarray is not part of the SNode tree and lives as long as Python holds it; the
program keeps weak references only, so that `qd.reset()` can invalidate the ones still alive.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from qd.errors import QuadrantsRuntimeError
from qd.runtime import program
from qd.runtime._hostdata import HostData, normalize_shape
from qd.types import hooks
from qd.types.dtypes import DataType, MatrixType, to_dtype

_ndarrays: "weakref.WeakSet[Ndarray]" = weakref.WeakSet()


class Ndarray(HostData):
    """An array of `shape` elements of `dtype` (each of shape `elem_shape`), stored in `arr`."""

    _kind = "qd.ndarray"

    def __init__(self, dtype: Any, shape: Any, needs_grad: bool = False) -> None:
        self._setup(to_dtype(dtype), normalize_shape(shape, "ndarray"), (), needs_grad)

    @classmethod
    def _from_elem(cls, dtype: Any, shape: Any, elem_shape: tuple[int, ...],
                   needs_grad: bool = False) -> "Ndarray":
        """A vector/matrix ndarray: `arr` has shape `shape + elem_shape`."""
        if cls is Ndarray and elem_shape:
            cls = VectorNdarray if len(elem_shape) == 1 else MatrixNdarray
        obj = cls.__new__(cls)
        Ndarray._setup(obj, to_dtype(dtype), normalize_shape(shape, "ndarray"), tuple(elem_shape), needs_grad)
        return obj

    def _setup(self, dtype: DataType, shape: tuple[int, ...], elem_shape: tuple[int, ...],
               needs_grad: bool) -> None:
        if needs_grad and not dtype.is_float:
            raise QuadrantsRuntimeError(f"{dtype} is not supported for ndarray with `needs_grad=True` or "
                                        "`needs_dual=True`.")
        self.dtype = dtype
        self.elem_shape = elem_shape
        self._shape = shape
        self._arr = np.zeros(shape + elem_shape, dtype=dtype.np_dtype)
        self._destroyed = False
        self.generation = 0
        self.grad: Ndarray | None = None
        if needs_grad:
            self.grad = type(self)._from_elem(dtype, shape, elem_shape, needs_grad=False)
            self.grad._is_grad = True
        _ndarrays.add(self)

    @property
    def shape(self) -> tuple[int, ...]:
        """The outer shape (element axes excluded)."""
        return self._shape

    @property
    def element_shape(self) -> tuple[int, ...]:
        return self.elem_shape

    @property
    def element_type(self) -> Any:
        """The scalar dtype, or the vector/matrix type for vector/matrix ndarrays."""
        if not self.elem_shape:
            return self.dtype
        from qd.types.dtypes import matrix, vector

        if len(self.elem_shape) == 1:
            return vector(self.elem_shape[0], self.dtype)
        return matrix(self.elem_shape[0], self.elem_shape[1], self.dtype)

    def _get_element_size(self) -> int:
        """Bytes of one element (a whole vector/matrix for vector/matrix ndarrays)."""
        return self.dtype.itemsize * int(np.prod(self.elem_shape, dtype=np.int64))

    def _get_nelement(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def has_grad(self) -> bool:
        return self.grad is not None

    def has_dual(self) -> bool:
        return False

    def _set_grad(self, grad: "Ndarray") -> None:
        self.grad = grad

    def _raise_no_storage(self) -> None:
        raise QuadrantsRuntimeError("qd.ndarray was destroyed by qd.reset() (qd.init resets too); "
                                    "create it again after qd.init")

    def _destroy(self) -> None:
        self._arr = None
        self._destroyed = True
        self.grad = None

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self._slice(key)
        return super().__getitem__(key)

    def _slice(self, key: slice) -> Any:
        """`nd[a:b]` of a 1-D ndarray: a `qd.BufferView` (zero-copy; `qd/lang/buffer_view.py`)."""
        return hooks.impl.ndarray_slice(self, key)

    def _tag_layout(self, layout: Any) -> None:
        """Declare that the storage, allocated at the physical shape, holds canonical axes in `layout` order
        (no data moves; `shape` becomes the canonical shape). The gradient is tagged alike."""
        phys = self._physical_shape
        lay = tuple(int(a) for a in layout)
        if len(lay) != len(phys):
            raise ValueError(f"layout has {len(lay)} entries but ndarray has {len(phys)} dims")
        if sorted(lay) != list(range(len(phys))):
            raise ValueError(f"layout={lay!r} is not a permutation of range({len(phys)})")
        canonical = [0] * len(phys)
        for p, a in enumerate(lay):
            canonical[a] = phys[p]
        for x in (self, self.grad):
            if x is not None:
                x._shape = tuple(canonical)
                x._layout = None if lay == tuple(range(len(lay))) else lay

    # Quadrants' attribute name for the layout; assigning it tags the storage in place (`_tag_layout`)
    _qd_layout = property(lambda self: self._layout, _tag_layout)

    def _relayout(self, layout: Any) -> None:
        """The gradient keeps the primal's physical layout (kernels index both alike)."""
        super()._relayout(layout)
        if self.grad is not None:
            self.grad._relayout(layout)

    def __deepcopy__(self, memo: Any = None) -> "Ndarray":
        out = type(self)._from_elem(self.dtype, self.shape, self.elem_shape)
        out._relayout(self._layout)
        out.copy_from(self)
        return out

    def copy_from(self, other: Any) -> None:
        if not isinstance(other, Ndarray):
            raise TypeError("Cannot copy from a non-ndarray object")
        if tuple(other.shape) != tuple(self.shape) or other.elem_shape != self.elem_shape:
            raise ValueError(f"copy_from shape mismatch: destination {tuple(self.shape)} vs source "
                             f"{tuple(other.shape)}")
        super().copy_from(other)


class VectorNdarray(Ndarray):
    """An ndarray whose elements are vectors (made by `qd.Vector.ndarray` or `qd.ndarray(vector_type, ...)`)."""

    @property
    def n(self) -> int:
        return self.elem_shape[0]


class MatrixNdarray(Ndarray):
    """An ndarray whose elements are matrices (made by `qd.Matrix.ndarray` or `qd.ndarray(matrix_type, ...)`)."""

    @property
    def n(self) -> int:
        return self.elem_shape[0]

    @property
    def m(self) -> int:
        return self.elem_shape[1]


def num_alive() -> int:
    """How many ndarrays (grads excluded) are alive in this program."""
    return sum(1 for nd in list(_ndarrays) if not nd._destroyed and not getattr(nd, "_is_grad", False))


def ndarray(dtype: Any, shape: Any, needs_grad: bool = False) -> Ndarray:
    """Make a zero-filled ndarray: an array passed to kernels as an argument.

    `qd.ndarray(qd.f32, shape=(n, 3))` makes an n x 3 array of floats; `dtype` may be a vector or matrix
    type (`qd.types.vector(3, qd.f32)`), and then each element is one vector (`qd.Vector.ndarray` and
    `qd.Matrix.ndarray` say the same). A kernel takes it through a parameter annotated
    `qd.types.ndarray(dtype, ndim)`, like a numpy array or a torch tensor; one compiled instance serves
    every ndarray of that dtype and rank whatever its shape. Unlike a field, it is not a global: a kernel
    only sees the ndarrays passed to it.

    With `needs_grad=True` it has a `.grad` ndarray of the same shape, for reverse-mode autodiff of the
    kernels it is passed to.

    On the host: `a[i, j]`, `a.fill(v)`, `a.to_numpy()`, `a.from_numpy(x)`, `a.to_torch()`, `a[lo:hi]` (a
    `qd.BufferView` of a 1-D ndarray). On a GPU tier the data lives on the device. An ndarray is destroyed by
    `qd.reset()` (and `qd.init`); using it afterwards raises `qd.QuadrantsRuntimeError`.
    """
    if isinstance(dtype, MatrixType):
        return hooks.impl.Matrix._typed_ndarray(dtype, shape, needs_grad=needs_grad)
    return Ndarray(dtype, shape, needs_grad)


def _reset() -> None:
    for nd in list(_ndarrays):
        nd._destroy()
    _ndarrays.clear()


program.on_reset(_reset)

ScalarNdarray = Ndarray

__all__ = ["Ndarray", "ScalarNdarray", "VectorNdarray", "MatrixNdarray", "ndarray"]
