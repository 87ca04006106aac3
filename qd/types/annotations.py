"""Kernel parameter annotations: `qd.types.ndarray(...)`, `qd.types.NDArray[...]`, `qd.template()`."""

from __future__ import annotations

from typing import Any


class Template:
    """A compile-time parameter: fields, Python values, functions. Part of the instantiation key."""

    def __init__(self, element_type: Any = object, ndim: int | None = None) -> None:
        self.element_type = element_type
        self.ndim = ndim


template = Template


class NdarrayType:
    """`qd.types.ndarray(dtype=None, ndim=None)`: a qd ndarray, numpy array or torch tensor parameter.

    `dtype` may be a scalar dtype or a vector/matrix type (then the trailing axes of a numpy array
    are the element axes); `None` accepts any dtype (one instantiation per dtype).
    """

    def __init__(self, dtype: Any = None, ndim: int | None = None, element_dim: Any = None,
                 element_shape: Any = None, field_dim: Any = None, needs_grad: bool | None = None,
                 boundary: str = "unsafe") -> None:
        if field_dim is not None:
            raise ValueError("The field_dim argument for ndarray type is already deprecated. Please use ndim instead.")
        from qd.types.dtypes import MatrixType, to_dtype

        if element_shape is not None:
            from qd.types.dtypes import matrix, vector

            dt = to_dtype(dtype) if dtype is not None else None
            dtype = vector(element_shape[0], dt) if len(element_shape) == 1 else matrix(*element_shape, dt)
        elif dtype is not None and not isinstance(dtype, MatrixType):
            dtype = to_dtype(dtype)
        self.dtype = dtype
        self.ndim = ndim
        self.needs_grad = needs_grad
        if boundary not in ("unsafe", "clamp"):
            raise ValueError(f"Invalid boundary argument: {boundary}. Valid options: 'unsafe', 'clamp'")
        self.boundary = boundary  # "clamp": every index is clamped into [0, extent - 1] (values.GlobalTensor)

    def __class_getitem__(cls, args: Any) -> "NdarrayType":
        if not isinstance(args, tuple):
            args = (args,)
        return cls(*args)

    def __repr__(self) -> str:
        return f"ndarray(dtype={self.dtype}, ndim={self.ndim})"


ndarray = NdarrayType
NDArray = NdarrayType


class BufferViewType:
    """`BufferView[dtype]`: a kernel/func parameter taking a `qd.BufferView` (a 1-D sub-range of an ndarray).

    `dtype` None (a bare `BufferView` annotation) takes the dtype of the ndarray passed. A kernel receives
    the view as its ndarray plus two i32 launch arguments, offset and size (`qd/frontend/views.py`).
    """

    def __init__(self, dtype: Any = None, boundary: str = "unsafe") -> None:
        self.ndarray_type = NdarrayType(dtype=dtype, ndim=1, boundary=boundary)
        self.dtype = self.ndarray_type.dtype

    def __repr__(self) -> str:
        return f"BufferViewType(dtype={self.dtype}, boundary={self.ndarray_type.boundary})"
