"""`qd.types`: dtypes, vector/matrix types and kernel parameter annotations (re-exports only)."""

from qd.types.annotations import BufferViewType, NDArray, Template, ndarray, template  # noqa: F401
from qd.types.dtypes import *  # noqa: F403
from qd.types.dtypes import (ALL, FLOATS, INTS, DataType, MatrixType, is_integral, is_real, is_signed, is_tensor,
                             matrix, promote, to_dtype, vector)
from qd.types import buffer_view_type, enums, primitive_types  # noqa: F401
from qd.types.struct_type import StructType  # noqa: F401

struct = StructType  # `qd.types.struct(a=qd.f32, b=vec3)`


def __getattr__(name: str) -> object:
    """A Quadrants `qd.types` name qd lacks (`quant`, ...) raises an error naming its feature (qd/_unsupported.py)."""
    from qd._unsupported import missing

    raise missing("qd.types", name)
