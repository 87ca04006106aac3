"""Scalar dtypes, vector/matrix types, and qd's promotion and cast rules.

The IR only ever sees scalar dtypes: vectors and matrices are unrolled by the
frontend. `DataType` instances are singletons compared by identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from qd.types import hooks


@dataclass(frozen=True, eq=False)
class DataType:
    """A scalar dtype: kind is 'int', 'uint' or 'float'; u1 is a 1-bit uint."""

    name: str
    kind: str
    bits: int
    np_dtype: np.dtype
    code: int  # stable small integer, used by bytecode and serialised forms

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    def __hash__(self) -> int:
        # by the stable code: a set of dtypes iterates in one order in every process (identity equality)
        return self.code

    def to_string(self) -> str:
        """The dtype's name (`"f32"`), as Quadrants' `DataType.to_string()`."""
        return self.name

    @property
    def is_int(self) -> bool:
        return self.kind != "float"

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "float")

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    def __repr__(self) -> str:
        return self.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # qd.f32(x) is a cast, in kernels and in Python scope
        if len(args) != 1 or kwargs:
            from qd.errors import QuadrantsSyntaxError

            raise QuadrantsSyntaxError(f"A primitive type can only decorate a single expression. (qd.{self.name}"
                                       f"(x) takes one positional argument)")
        return hooks.impl.cast(self, args[0])

    def __reduce__(self):
        return (by_name, (self.name,))


u1 = DataType("u1", "uint", 1, np.dtype(np.bool_), 0)
i8 = DataType("i8", "int", 8, np.dtype(np.int8), 1)
i16 = DataType("i16", "int", 16, np.dtype(np.int16), 2)
i32 = DataType("i32", "int", 32, np.dtype(np.int32), 3)
i64 = DataType("i64", "int", 64, np.dtype(np.int64), 4)
u8 = DataType("u8", "uint", 8, np.dtype(np.uint8), 5)
u16 = DataType("u16", "uint", 16, np.dtype(np.uint16), 6)
u32 = DataType("u32", "uint", 32, np.dtype(np.uint32), 7)
u64 = DataType("u64", "uint", 64, np.dtype(np.uint64), 8)
f16 = DataType("f16", "float", 16, np.dtype(np.float16), 9)
f32 = DataType("f32", "float", 32, np.dtype(np.float32), 10)
f64 = DataType("f64", "float", 64, np.dtype(np.float64), 11)

ALL: tuple[DataType, ...] = (u1, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64)
INTS: tuple[DataType, ...] = (i8, i16, i32, i64, u8, u16, u32, u64)
FLOATS: tuple[DataType, ...] = (f16, f32, f64)
_BY_NAME = {t.name: t for t in ALL}
_BY_CODE = {t.code: t for t in ALL}
_ALIASES = {
    "float16": f16, "float32": f32, "float64": f64, "int8": i8, "int16": i16, "int32": i32,
    "int64": i64, "uint8": u8, "uint16": u16, "uint32": u32, "uint64": u64, "bool": u1,
}

# Aliases with Quadrants' long names.
float16, float32, float64 = f16, f32, f64
int8, int16, int32, int64 = i8, i16, i32, i64
uint8, uint16, uint32, uint64 = u8, u16, u32, u64
uint1 = u1


def by_name(name: str) -> DataType:
    return _BY_NAME[name]


def by_code(code: int) -> DataType:
    return _BY_CODE[code]


def to_dtype(t) -> DataType:
    """Accepts qd dtypes, numpy dtypes, torch dtypes and Python `int`/`float`/`bool`."""
    from qd.base import config

    if isinstance(t, DataType):
        return t
    if t is int:
        return config.current().default_ip
    if t is float:
        return config.current().default_fp
    if t is bool:
        return u1
    if isinstance(t, str) and t in _BY_NAME:
        return _BY_NAME[t]
    name = str(t).replace("torch.", "")
    if name in _ALIASES:
        return _ALIASES[name]
    try:
        npd = np.dtype(t)
    except TypeError:
        npd = None
    if npd is not None:
        for d in ALL:
            if d.np_dtype == npd:
                return d
    raise TypeError(f"{t!r} is not a qd dtype (expected one of {', '.join(_BY_NAME)})")


def is_signed(t) -> bool:
    """Quadrants' `qd.types.is_signed`: true for signed ints and floats."""
    return to_dtype(t).is_signed


def is_integral(t) -> bool:
    """Quadrants' `qd.types.is_integral`: true for every integer dtype, u1 included."""
    return to_dtype(t).is_int


def is_real(t) -> bool:
    """Quadrants' `qd.types.is_real`: true for floating-point dtypes."""
    return to_dtype(t).is_float


def is_tensor(t) -> bool:
    """Quadrants' `qd.types.is_tensor`: true for vector/matrix types."""
    return isinstance(t, MatrixType)


def from_numpy_dtype(npd: np.dtype) -> DataType:
    return to_dtype(npd)


def unsigned_of(t: DataType) -> DataType:
    return {i8: u8, i16: u16, i32: u32, i64: u64}.get(t, t)


def _rank(t: DataType) -> tuple:
    # Floats above ints; then wider above narrower; at equal width unsigned above signed.
    return (t.is_float, t.bits, not t.is_signed)


def promote(a: DataType, b: DataType) -> DataType:
    """Quadrants' `promoted_type`: the higher of the two by (float, bits, unsigned)."""
    return a if _rank(a) >= _rank(b) else b


# ---------------------------------------------------------------- vector / matrix types


class _DefaultUnsigned:
    """The unsigned type of `default_ip` (u32; u64 under `default_ip=qd.i64`), resolved where a type is used, as
    Quadrants' `default_up`: the element type of `qd.math.uvec2/3/4`."""

    def __repr__(self) -> str:
        return "default_up"


DEFAULT_UP = _DefaultUnsigned()


def default_up() -> DataType:
    """The unsigned type of the current `default_ip`, as wide."""
    ip = to_dtype(int)
    return next(t for t in (u8, u16, u32, u64) if t.bits == ip.bits)


@dataclass(frozen=True, eq=False)
class MatrixType:
    """`qd.types.matrix(n, m, dtype)`; a vector is a MatrixType with ndim == 1."""

    n: int
    m: int
    spec: Any  # a DataType; Python `int` / `float` / `DEFAULT_UP` (the default type when used, as in Quadrants); or None
    ndim: int = 2

    @property
    def dtype(self) -> DataType | None:
        """The element dtype; `int` / `float` / `DEFAULT_UP` resolve to the current `default_ip` / `default_fp` /
        the unsigned type of `default_ip`."""
        if self.spec is int or self.spec is float:
            return to_dtype(self.spec)
        if self.spec is DEFAULT_UP:
            return default_up()
        return self.spec

    def __eq__(self, other: object) -> bool:  # `vector(3, float) == vector(3, f32)` under default_fp f32
        if not isinstance(other, MatrixType):
            return NotImplemented
        return (self.n, self.m, self.ndim, self.dtype) == (other.n, other.m, other.ndim, other.dtype)

    def __hash__(self) -> int:
        return hash((self.n, self.m, self.ndim))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def __call__(self, *args):
        return hooks.impl.Matrix._from_type(self, args)

    def field(self, *args, **kwargs):
        return hooks.impl.Matrix._typed_field(self, *args, **kwargs)

    def ndarray(self, *args, **kwargs):
        return hooks.impl.Matrix._typed_ndarray(self, *args, **kwargs)

    def __repr__(self) -> str:
        if self.ndim == 1:
            return f"vector({self.n}, {self.dtype})"
        return f"matrix({self.n}, {self.m}, {self.dtype})"


def _elem_spec(dtype: Any) -> Any:
    return dtype if dtype is None or dtype is int or dtype is float or dtype is DEFAULT_UP else to_dtype(dtype)


def vector(n: int, dtype=None, unpacked: bool = False) -> MatrixType:
    """`qd.types.vector(n, dtype)`: the type of vectors of `n` entries of `dtype` (by default `default_fp`),
    for annotations, `qd.field(vec3, ...)` and `qd.ndarray(vec3, ...)`; calling it builds one
    (`vec3(0.0)`, `vec3(1, 2, 3)`). `unpacked=True` is for members of a `qd.dataclass`."""
    if unpacked:  # a @qd.dataclass member stored as n scalar members (qd/lang/struct.py)
        from qd.types.struct_type import UnpackedVectorType

        return UnpackedVectorType(n, 1, _elem_spec(dtype), 1)
    return MatrixType(n, 1, _elem_spec(dtype), 1)


def matrix(n: int, m: int, dtype=None) -> MatrixType:
    """`qd.types.matrix(n, m, dtype)`: the type of `n` x `m` matrices of `dtype` (by default `default_fp`), for
    annotations, fields and ndarrays; calling it builds one."""
    return MatrixType(n, m, _elem_spec(dtype), 2)


def element_shape(t) -> tuple[int, ...]:
    return t.shape if isinstance(t, MatrixType) else ()
