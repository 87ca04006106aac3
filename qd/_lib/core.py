"""`qd._lib.core`: what Quadrants' tests read from its C++ core: the enums (re-exported from `qd.types.enums`) and
`data_type_size`."""

from typing import Any

from qd.types.enums import AutodiffMode, DeviceCapability, Layout, SNodeGradType


def data_type_size(dtype: Any) -> int:
    """The bytes one element of `dtype` takes (`qd.f32` -> 4; a vector or matrix type: all its entries)."""
    from qd.types import dtypes

    if isinstance(dtype, dtypes.MatrixType):
        n = 1
        for d in dtype.shape:
            n *= d
        return n * dtype.dtype.itemsize
    return dtypes.to_dtype(dtype).itemsize


__all__ = ["AutodiffMode", "DeviceCapability", "Layout", "SNodeGradType", "data_type_size"]
