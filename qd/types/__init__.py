"""`qd.types`: dtypes, vector/matrix types and kernel parameter annotations (re-exports only)."""

from qd.types.annotations import NDArray, Template, ndarray, template
from qd.types.dtypes import *  # noqa: F403
from qd.types.dtypes import (ALL, FLOATS, INTS, DataType, MatrixType, is_integral, is_real, is_signed, is_tensor,
                             matrix, promote, to_dtype, vector)
from qd.types import enums, primitive_types  # noqa: F401
from qd.types.struct_type import StructType  # noqa: F401

struct = StructType  # `qd.types.struct(a=qd.f32, b=vec3)`
