"""`qd.BufferView`: a zero-copy view of the 1-D sub-range `[offset, offset + size)` of an ndarray.

Python scope: made by `BufferView(arr, offset, size)`, `nd[a:b]` on a 1-D ndarray, `view[a:b]` or
`view.subview(offset, size)`; validated here with Quadrants' exception types and messages. Inside a
kernel the same constructor builds a kernel-side view (`qd.frontend.views.ViewValue`), so one name
serves both scopes, as `qd.Vector` does. Parameters annotated `BufferView[dtype]` or bare `BufferView`
take views (`qd.types.annotations.BufferViewType`).
"""

from __future__ import annotations

from typing import Any

from qd.types import hooks
from qd.types.annotations import BufferViewType


_builder: Any = None  # qd.frontend.builder, imported on first use (qd.lang loads before the frontend)


def _in_kernel() -> bool:
    global _builder
    if _builder is None:
        from qd.frontend import builder

        _builder = builder
    return _builder.current() is not None


def _check_backing(arr: Any) -> None:
    """Host checks of the array a view is made over (TypeError, as Quadrants)."""
    if isinstance(arr, BufferView):
        raise TypeError("Cannot nest BufferView(view, ...); use view.subview(offset, size) instead")
    if getattr(arr, "grad", None) is not None:
        raise TypeError("BufferView does not support ndarrays with gradients (needs_grad=True)")


class BufferView:
    """The elements `arr[offset:offset + size]` of a 1-D ndarray `arr` (scalar, vector or matrix elements).

    `view[i]` in a kernel reads and writes `arr[offset + i]`; with `debug=True` every subscript is
    checked against `[0, size)`. Offsets of subviews accumulate: all views share `arr`.
    """

    __slots__ = ("arr", "offset", "size")
    _is_quadrants_class = True

    def __new__(cls, arr: Any, offset: Any, size: Any) -> Any:
        if _in_kernel():  # a kernel-side view: offset and size are runtime values there
            from qd.frontend.views import construct

            return construct(arr, offset, size)
        return super().__new__(cls)

    def __init__(self, arr: Any, offset: Any, size: Any) -> None:
        offset, size = int(offset), int(size)
        _check_backing(arr)
        shape = getattr(arr, "shape", None)
        if shape is not None:
            if len(shape) != 1:
                raise TypeError(f"BufferView requires a 1D ndarray, got shape {tuple(shape)}")
            if offset < 0 or size < 0 or offset + size > shape[0]:
                raise ValueError(f"BufferView out of range: offset={offset}, size={size}, ndarray length={shape[0]}")
        self.arr = arr
        self.offset = offset
        self.size = size

    @classmethod
    def _checked(cls, arr: Any, offset: int, size: int) -> "BufferView":
        """A view of a range the caller has validated (slices, subviews): skips the range checks."""
        view = object.__new__(cls)
        view.arr, view.offset, view.size = arr, offset, size
        return view

    def __class_getitem__(cls, dtype: Any) -> BufferViewType:
        """`BufferView[qd.f32]` (or `BufferView[dtype, boundary]`) as a parameter annotation."""
        return BufferViewType(*dtype) if isinstance(dtype, tuple) else BufferViewType(dtype)

    @property
    def shape(self) -> tuple[int]:
        return (self.size,)

    @property
    def dtype(self) -> Any:
        return getattr(self.arr, "dtype", None)

    def get_ndarray(self) -> Any:
        """The backing ndarray."""
        return self.arr

    def subview(self, offset: Any, size: Any) -> "BufferView":
        """The view `[offset, offset + size)` of this view (offsets relative to this view's start)."""
        offset, size = int(offset), int(size)
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(f"subview out of range: offset={offset}, size={size}, parent size={self.size}")
        return BufferView._checked(self.arr, self.offset + offset, size)

    def __getitem__(self, key: Any) -> "BufferView":
        if not isinstance(key, slice):
            raise TypeError(f"BufferView host-side indexing requires a slice, got {type(key).__name__}")
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise ValueError(f"BufferView slice requires step=1, got step={step}")
        return self.subview(start, max(stop - start, 0))

    def __repr__(self) -> str:
        return f"BufferView(offset={self.offset}, size={self.size}, arr={type(self.arr).__name__})"


def slice_of(arr: Any, key: slice) -> BufferView:
    """`arr[a:b]` of a 1-D ndarray `arr` (`Ndarray.__getitem__` with a slice)."""
    if len(arr.shape) != 1:
        raise TypeError(f"ndarray slice to BufferView requires a 1D array, got shape {arr.shape}")
    start, stop, step = key.indices(arr.shape[0])
    if step != 1:
        raise ValueError(f"BufferView slice requires step=1, got step={step}")
    _check_backing(arr)
    return BufferView._checked(arr, start, max(stop - start, 0))


__all__ = ["BufferView"]


hooks.register(BufferView=BufferView, ndarray_slice=slice_of)
