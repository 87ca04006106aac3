"""`qd.lang.ops`: Quadrants' module of element-wise operations (re-exports, plus `logical_not`). Each
works on numbers, on host vectors/matrices and on kernel values alike."""

from __future__ import annotations

from typing import Any

from qd.frontend.api import (abs, acos, asin, atan2, ceil, cos, exp, floor, log, max, min, pow,  # noqa: A004,F401
                             round, rsqrt, sin, sqrt, tan, tanh)
from qd.frontend import expr as _e


def logical_not(x: Any) -> Any:
    """1 where `x` is 0, else 0 (element-wise on vectors and matrices)."""
    if _e.is_matrix(x):
        return x._map(logical_not)
    if isinstance(x, _e.Expr):
        return _e.unary("logical_not", x)
    return int(not x)


__all__ = ["abs", "acos", "asin", "atan2", "ceil", "cos", "exp", "floor", "log", "logical_not", "max", "min",
           "pow", "round", "rsqrt", "sin", "sqrt", "tan", "tanh"]
