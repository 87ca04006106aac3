"""Complex arithmetic on 2-D vectors `(re, im)` for `qd.math` (cmul, cdiv, cexp, ...)."""

from __future__ import annotations

from typing import Any

from qd.frontend.builtins import atan2, cos, exp, log, pow, select, sin, sqrt
from qd.math.mathimpl import dot, vec2


def cmul(z1: Any, z2: Any) -> Any:
    """z1 * z2."""
    x1, y1 = z1[0], z1[1]
    x2, y2 = z2[0], z2[1]
    return vec2(x1 * x2 - y1 * y2, x1 * y2 + x2 * y1)


def cconj(z: Any) -> Any:
    """The conjugate (x, -y)."""
    return vec2(z[0], -z[1])


def cdiv(z1: Any, z2: Any) -> Any:
    """z1 / z2."""
    x1, y1 = z1[0], z1[1]
    x2, y2 = z2[0], z2[1]
    return vec2(x1 * x2 + y1 * y2, -x1 * y2 + x2 * y1) / dot(z2, z2)


def csqrt(z: Any) -> Any:
    """The square root with non-negative real part (0 for z == 0)."""
    r = sqrt(z.norm())
    a = atan2(z[1], z[0])
    return select(z.any(), r * vec2(cos(a / 2.0), sin(a / 2.0)), vec2(0.0))


def cinv(z: Any) -> Any:
    """1 / z."""
    return cconj(z) / dot(z, z)


def cpow(z: Any, n: Any) -> Any:
    """z ** n for a real exponent `n` (0 for z == 0)."""
    r2 = dot(z, z)
    a = atan2(z[1], z[0]) * n
    return select(z.any(), pow(r2, n / 2.0) * vec2(cos(a), sin(a)), vec2(0.0))


def cexp(z: Any) -> Any:
    """e ** z."""
    r = exp(z[0])
    return vec2(r * cos(z[1]), r * sin(z[1]))


def clog(z: Any) -> Any:
    """The principal logarithm (imaginary part in (-pi, pi])."""
    ang = atan2(z[1], z[0])
    r2 = dot(z, z)
    return vec2(log(r2) / 2.0, ang)


__all__ = ["cconj", "cdiv", "cexp", "cinv", "clog", "cmul", "cpow", "csqrt"]
