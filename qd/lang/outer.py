"""`qd.outer(a, b)`: Quadrants' deferred rank-1 update, the right side of `tile -= qd.outer(a, b)`.

In Quadrants `qd.outer` is not a value: it returns a marker that only the augmented assignment of a register
tile (`qd.simt.Tile16x16` / `Tile32x32`) consumes, as `tile -= a bᵀ`. qd keeps that contract: the frontend
hands the marker to the target's `_augassign(other, op)` method (`op` the AST operator name, "Sub" for `-=`),
which any `@qd.dataclass` may define (a tile does); any other use is an error that says what to write instead.
For the outer product of two vectors as a matrix value, use `a.outer_product(b)`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from qd.errors import QuadrantsTypeError

_MISUSE = ("qd.outer(a, b) is not a value: it is only valid as the right side of an augmented assignment to a "
           "register tile (`tile -= qd.outer(a, b)`, qd.simt.Tile16x16 / Tile32x32). For the outer product of "
           "two vectors as a matrix, write `a.outer_product(b)`.")


class OuterProduct:
    """The pending update `a bᵀ`; `a` and `b` are kept as given (`b is a` for `qd.outer(v, v)`)."""

    _qd_is_deferred = True  # Quadrants' marker: the frontend binds such an object as-is, never as a value

    def __init__(self, a: Any, b: Any) -> None:
        self.a = a
        self.b = b

    def _misuse(self, *_: Any) -> NoReturn:
        raise QuadrantsTypeError(_MISUSE)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __matmul__ = __rmatmul__ = _misuse
    __truediv__ = __neg__ = __getitem__ = _misuse

    def __repr__(self) -> str:
        return "<qd.outer(a, b): a deferred rank-1 update for `tile -= qd.outer(a, b)`, not a value>"


def outer(a: Any, b: Any) -> OuterProduct:
    """The deferred rank-1 update `a bᵀ` for `tile -= qd.outer(a, b)` (see the module docstring)."""
    return OuterProduct(a, b)

