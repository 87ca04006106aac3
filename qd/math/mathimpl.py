"""GLSL-style math for `qd.math`: vector/matrix types, constants and functions.

Each function is plain Python over Python numbers, frontend `Expr`s and `qd.Matrix`es, so it works
in Python scope and inside kernels alike (called from a kernel it is inlined like a `qd.func`).
Elementwise functions broadcast scalars against matrices. Nothing branches on a runtime value:
where Quadrants writes an `if`, this module uses `select` (both sides are evaluated).
"""

from __future__ import annotations

import math
from typing import Any

from qd.frontend.builtins import (
    acos,
    asin,
    atan2,
    bit_cast,
    cast,
    ceil,
    clz,
    cos,
    exp,
    floor,
    log,
    max,
    min,
    popcnt,
    pow,
    round,
    rsqrt,
    select,
    sin,
    sqrt,
    tan,
    tanh,
)
from qd.frontend.expr import is_expr
from qd.lang.matrix import Matrix
from qd.types.dtypes import DEFAULT_UP, f32, f64, matrix, u32, u64, vector

e = math.e
"""The mathematical constant e = 2.718281..."""
pi = math.pi
"""The mathematical constant pi = 3.141592..."""
inf = math.inf
"""Positive floating-point infinity (negative: `-inf`)."""
nan = math.nan
"""A floating-point NaN."""

# float/int element types are the defaults in force where the type is used (`qd.init(default_fp=...)`),
# which is what Quadrants' tests observe (e.g. a field of `ivec2` has dtype `default_ip`).
vec2, vec3, vec4 = vector(2, float), vector(3, float), vector(4, float)
ivec2, ivec3, ivec4 = vector(2, int), vector(3, int), vector(4, int)
uvec2, uvec3, uvec4 = vector(2, DEFAULT_UP), vector(3, DEFAULT_UP), vector(4, DEFAULT_UP)  # (u64 under default_ip=i64)
mat2, mat3, mat4 = matrix(2, 2, float), matrix(3, 3, float), matrix(4, 4, float)


def _elementwise(fn: Any, x: Any) -> Any:
    return x._map(fn) if isinstance(x, Matrix) else fn(x)


def _norm(x: Any) -> Any:
    return x.norm() if isinstance(x, Matrix) else abs(x)


# ---------------------------------------------------------------- elementwise


def mix(x: Any, y: Any, a: Any) -> Any:
    """Linear interpolation `x * (1 - a) + y * a`."""
    return x * (1.0 - a) + y * a


def clamp(x: Any, xmin: Any, xmax: Any) -> Any:
    """`min(max(x, xmin), xmax)`, elementwise."""
    return min(xmax, max(xmin, x))


def step(edge: Any, x: Any) -> Any:
    """0.0 where `x < edge`, else 1.0."""
    return cast(x >= edge, float)


def fract(x: Any) -> Any:
    """The fractional part `x - floor(x)`."""
    return x - floor(x)


def smoothstep(edge0: Any, edge1: Any, x: Any) -> Any:
    """Hermite interpolation between 0 and 1 as `x` goes from `edge0` to `edge1`."""
    t = clamp((x - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def sign(x: Any) -> Any:
    """-1.0, 0.0 or 1.0 by the sign of `x`."""
    return cast(x >= 0.0, float) - cast(x <= 0.0, float)


def log2(x: Any) -> Any:
    """Base-2 logarithm."""
    return log(x) / math.log(2.0)


def exp2(x: Any) -> Any:
    """2 ** x."""
    return pow(2.0, x)


def degrees(x: Any) -> Any:
    """Radians to degrees."""
    return x * (180.0 / pi)


def radians(x: Any) -> Any:
    """Degrees to radians."""
    return x * (pi / 180.0)


def mod(x: Any, y: Any) -> Any:
    """`x - y * floor(x / y)` (GLSL mod)."""
    return x - y * floor(x / y)


def _isinf1(x: Any) -> Any:
    if not is_expr(x):
        return math.isinf(float(x))
    if not x.dtype.is_float:
        return False  # an integer is never infinite
    if x.dtype is f64:
        y = bit_cast(x, u64)
        return ((cast(y >> 32, u32) & 0x7FFFFFFF) == 0x7FF00000) & (cast(y, u32) == 0)
    y = bit_cast(cast(x, f32), u32)
    return (y & 0x7FFFFFFF) == 0x7F800000


def _isnan1(x: Any) -> Any:
    if not is_expr(x):
        return math.isnan(float(x))
    if not x.dtype.is_float:
        return False
    if x.dtype is f64:
        y = bit_cast(x, u64)
        return (cast(y >> 32, u32) & 0x7FFFFFFF) + cast(cast(y, u32) != 0, u32) > 0x7FF00000
    y = bit_cast(cast(x, f32), u32)
    return (y & 0x7FFFFFFF) > 0x7F800000


def isinf(x: Any) -> Any:
    """True (1) where `x` is +-inf, elementwise; tested on the bits, so fast math cannot fold it."""
    return _elementwise(_isinf1, x)


def isnan(x: Any) -> Any:
    """True (1) where `x` is NaN, elementwise; tested on the bits, so fast math cannot fold it."""
    return _elementwise(_isnan1, x)


def ffs(x: Any) -> Any:
    """1 + the index of the least significant set bit of an integer, 0 when `x` is 0."""
    def one(v: Any) -> Any:
        if not is_expr(v):
            v = int(v)
            return (v & -v).bit_length()
        low = popcnt((v & -v) - 1) + 1
        return select(v == 0, 0, low)
    return _elementwise(one, x)


# ---------------------------------------------------------------- vectors


def dot(x: Any, y: Any) -> Any:
    """Dot product of two vectors."""
    return x.dot(y)


def cross(x: Any, y: Any) -> Any:
    """Cross product (a scalar for 2-D vectors)."""
    return x.cross(y)


def length(x: Any) -> Any:
    """Euclidean length of a vector (|x| of a scalar)."""
    return _norm(x)


def distance(x: Any, y: Any) -> Any:
    """Distance between two points."""
    return _norm(x - y)


def normalize(v: Any) -> Any:
    """`v / |v|`."""
    return v / v.norm()


def reflect(x: Any, n: Any) -> Any:
    """Reflection of incident `x` about normal `n`: `x - 2 dot(x, n) n`."""
    k = x.dot(n)
    return x - 2.0 * k * n


def refract(x: Any, n: Any, eta: Any) -> Any:
    """Refraction of incident `x` through normal `n` with index ratio `eta` (0 on total reflection)."""
    dxn = x.dot(n)
    k = 1.0 - eta * eta * (1.0 - dxn * dxn)
    refracted = eta * x - (eta * dxn + sqrt(max(k, 0.0))) * n
    return select(k >= 0.0, refracted, refracted * 0.0)


def vdir(ang: Any) -> Any:
    """The 2-D unit vector at angle `ang`."""
    return vec2(cos(ang), sin(ang))


# ---------------------------------------------------------------- matrices


def eye(n: int) -> Matrix:
    """The n x n identity (default_fp)."""
    return Matrix.identity(float, n)


def determinant(m: Any) -> Any:
    return m.determinant()


def inverse(mat: Any) -> Any:
    return mat.inverse()


def translate(dx: Any, dy: Any, dz: Any) -> Matrix:
    """4x4 translation matrix."""
    return mat4([[1.0, 0.0, 0.0, dx], [0.0, 1.0, 0.0, dy], [0.0, 0.0, 1.0, dz], [0.0, 0.0, 0.0, 1.0]])


def scale(sx: Any, sy: Any, sz: Any) -> Matrix:
    """4x4 scale matrix."""
    return mat4([[sx, 0.0, 0.0, 0.0], [0.0, sy, 0.0, 0.0], [0.0, 0.0, sz, 0.0], [0.0, 0.0, 0.0, 1.0]])


def rotation2d(ang: Any) -> Matrix:
    """2x2 counter-clockwise rotation by `ang` radians."""
    ca, sa = cos(ang), sin(ang)
    return mat2([[ca, -sa], [sa, ca]])


def rot_by_axis(axis: Any, ang: Any) -> Matrix:
    """4x4 rotation by `ang` radians about `axis` (Quadrants' layout)."""
    c, s = cos(ang), sin(ang)
    a = normalize(axis)
    t = (1 - c) * a
    return mat4([
        [c + t[0] * a[0], t[0] * a[1] + s * a[2], t[0] * a[2] - s * a[1], 0.0],
        [t[1] * a[0] - s * a[2], c + t[1] * a[1], t[1] * a[2] + s * a[0], 0.0],
        [t[2] * a[0] + s * a[1], t[2] * a[1] - s * a[0], c + t[2] * a[2], 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ])


def rot_yaw_pitch_roll(yaw: Any, pitch: Any, roll: Any) -> Matrix:
    """4x4 rotation from Euler angles (Y first, then X, then Z), as Quadrants."""
    ch, sh, cp, sp, cb, sb = cos(yaw), sin(yaw), cos(pitch), sin(pitch), cos(roll), sin(roll)
    return mat4([
        [ch * cb + sh * sp * sb, sb * cp, -sh * cb + ch * sp * sb, 0.0],
        [-ch * sb + sh * sp * cb, cb * cp, sb * sh + ch * sp * cb, 0.0],
        [sh * cp, -sp, ch * cp, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ])


def rotation3d(ang_x: Any, ang_y: Any, ang_z: Any) -> Matrix:
    """4x4 rotation from Euler angles about X, Y, Z (Quadrants' `rot_yaw_pitch_roll(z, x, y)`)."""
    return rot_yaw_pitch_roll(ang_z, ang_x, ang_y)


__all__ = [
    "acos",
    "asin",
    "atan2",
    "ceil",
    "clamp",
    "clz",
    "cos",
    "cross",
    "degrees",
    "determinant",
    "distance",
    "dot",
    "e",
    "exp",
    "exp2",
    "eye",
    "ffs",
    "floor",
    "fract",
    "inf",
    "inverse",
    "isinf",
    "isnan",
    "ivec2",
    "ivec3",
    "ivec4",
    "length",
    "log",
    "log2",
    "mat2",
    "mat3",
    "mat4",
    "max",
    "min",
    "mix",
    "mod",
    "nan",
    "normalize",
    "pi",
    "popcnt",
    "pow",
    "radians",
    "reflect",
    "refract",
    "rot_by_axis",
    "rot_yaw_pitch_roll",
    "rotation2d",
    "rotation3d",
    "round",
    "rsqrt",
    "scale",
    "sign",
    "sin",
    "smoothstep",
    "sqrt",
    "step",
    "tan",
    "tanh",
    "translate",
    "uvec2",
    "uvec3",
    "uvec4",
    "vdir",
    "vec2",
    "vec3",
    "vec4",
]
