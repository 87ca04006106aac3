"""`qd.simt.Tile16x16` / `qd.simt.Tile32x32`: an N x N matrix held in registers by N threads, one row each
(Quadrants' register tiles, docs/source/user_guide/tile.md), loaded once from the package on first use.

In a kernel (`qd.loop_config(block_dim=N)`, N = `TileNxN.SIZE`):
- `t = TileNxN.zeros(dtype=qd.f32)` / `TileNxN.eye(dtype=...)` (dtype defaults to `default_fp`); `t.eye_()`;
  a tile is a `@qd.dataclass` whose member `r` (an unpacked vector: `t.r[j]`, j compile-time) is this thread's row;
- `t[:] = a[r0:r1, c0:c1]` / `a[r0:r1, c0:c1] = t` (also `a[b, r0:r1, c0:c1]`) load/store between the tile and a
  field, ndarray or `SharedArray`: row `r0 + row` on each thread (none where it reaches r1 or the array's rows),
  columns c0 .. min(c1, the array's columns, c0 + N) - 1; a load leaves the rest of the tile as it was;
- `t -= qd.outer(a, b)`: t[i, j] -= a_i * b_j, with a_i, b_i the values thread i passes (a scalar, or `a[r0:r1,
  col]`: each thread's `a[r0 + row, col]`, 0 past r1);
- `t.cholesky_(eps)`: the lower triangle becomes L with L L^T = t (pivot k floored at eps as `sqrt(max(., eps))`,
  eps read on thread k, so it may differ per thread); the strict upper triangle keeps its values;
- `L.solve_triangular_(B)`: B becomes X with X L^T = B (L lower triangular, nonzero diagonal; `lower=True` only).

A thread's row is its subgroup lane modulo N. Threads exchange values with `qd.simt.subgroup.shuffle` when a
subgroup has at least N lanes (CUDA's 32: Tile16x16 and Tile32x32); on a device with narrower subgroups (lavapipe's
8) the exchange goes through a `SharedArray` slot per row between two `block.sync()`s, the row being the thread's
block index modulo N, which needs the loop's `qd.loop_config(block_dim=...)` to be a multiple of N. Every thread
of the block calls the tile operations together (uniform control flow). The CPU tiers refuse tiles
(`QuadrantsSyntaxError`).
"""

from __future__ import annotations

from typing import Any

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _b
from qd.frontend import expr as _e
from qd.frontend import simt as _fs
from qd.lang.outer import OuterProduct
from qd.lang.simt import _tile_ops as ops
from qd.types import dtypes
from qd.types.struct_type import dataclass

# ---------------------------------------------------------------- proxies

class _Slice:
    """`a[r0:r1, c0:c1]` / `a[b, r0:r1, c0:c1]` (a tile's load source or store target) or `a[r0:r1, col]` /
    `a[b, r0:r1, col]` (a column for `qd.outer`) of a field, ndarray or SharedArray."""

    def __init__(self, arr: Any, idx: tuple) -> None:
        kinds = [isinstance(i, slice) for i in idx]
        if kinds not in ([True, True], [False, True, True], [True, False], [False, True, False]):
            raise QuadrantsSyntaxError("a tile slice is a[r0:r1, c0:c1], a[b, r0:r1, c0:c1], a[r0:r1, col] or "
                                       "a[b, r0:r1, col]")
        for i in idx:
            if isinstance(i, slice) and (i.start is None or i.stop is None or i.step is not None):
                raise QuadrantsSyntaxError("a tile slice needs both its start and stop, and no step (a[0:N, 0:N])")
        self.arr = arr
        self.batch = idx[0] if len(idx) == 3 else None
        rest = idx[1:] if len(idx) == 3 else idx
        self.rows = rest[0]
        self.cols = rest[1]  # a slice, or the column of a vector slice

    def qd_assign(self, tile: Any) -> None:
        info = getattr(getattr(tile, "stype", None), "qd_tile", None)
        if info is None or not isinstance(self.cols, slice):
            raise QuadrantsTypeError("a[r0:r1, c0:c1] can only be assigned a qd.simt tile")
        tile.member("_store")(self.arr, self.batch is not None, _batch(self), self.rows.start, self.rows.stop,
                              self.cols.start, self.cols.stop)

    def _refuse(self, *_: Any) -> Any:
        raise QuadrantsTypeError("a tile slice a[r0:r1, ...] is not a value: use it in `tile[:] = a[...]`, "
                                 "`a[...] = tile` or `qd.outer(...)`")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = _refuse


class _Whole:
    """`tile[:]`: the target of a load `tile[:] = a[r0:r1, c0:c1]`."""

    def __init__(self, tile: Any) -> None:
        self.tile = tile

    def qd_assign(self, src: Any) -> None:
        if not isinstance(src, _Slice) or not isinstance(src.cols, slice):
            raise QuadrantsTypeError(f"tile[:] can only be assigned a slice a[r0:r1, c0:c1], got {type(src).__name__}")
        self.tile.member("_load")(src.arr, src.batch is not None, _batch(src), src.rows.start, src.rows.stop,
                                  src.cols.start, src.cols.stop)


def _vec_value(v: Any, n: int, dtype: Any) -> Any:
    """A thread's entry of an outer-product vector: a scalar, or its row of a column slice (0 past the rows)."""
    if isinstance(v, _Slice):
        if isinstance(v.cols, slice):
            raise QuadrantsTypeError("qd.outer takes a column a[r0:r1, col], not a block a[r0:r1, c0:c1]")
        return ops.column_load(v.arr, v.batch is not None, _batch(v), v.rows.start, v.rows.stop, v.cols, dtype,
                               ops.row(n))
    if _e.is_matrix(v) or not (isinstance(v, _e.Expr) or _e.is_number(v)):
        raise QuadrantsTypeError(f"qd.outer takes each thread's scalar (or a column a[r0:r1, col]), got "
                                 f"{type(v).__name__}")
    return _e.cast_expr(_e.as_expr(v), dtype)


def _batch(s: _Slice) -> Any:
    return 0 if s.batch is None else s.batch


def _slicer(arr: Any, idx: tuple) -> Any:
    return _Slice(arr, idx)


# ---------------------------------------------------------------- the tile types

_TYPES: dict = {}


def _tile_type(n: int, dtype: Any) -> Any:
    key = (n, dtype)
    if key not in _TYPES:
        _TYPES[key] = _make(n, dtype)
        _fs.tile_slicer = _slicer
    return _TYPES[key]


def _make(n: int, dtype: Any) -> Any:
    """The `@qd.dataclass` of an N x N tile of `dtype`: member `r` (this thread's row), the methods of `_tile_ops`."""
    row_type = dtypes.vector(n, dtype, unpacked=True)

    class Tile:
        r: row_type  # type: ignore[valid-type]

        _load = ops.make_access(n, dtype, store=False)
        _store = ops.make_access(n, dtype, store=True)
        eye_ = ops.make_eye(n, dtype)
        _ger_sub = ops.make_ger_sub(n, dtype)
        cholesky_ = ops.make_cholesky(n, dtype)
        _trsm = ops.make_trsm(n, dtype)

        def _augassign(self: Any, other: Any, op: str) -> None:
            """`tile -= qd.outer(a, b)` (`qd.lang.outer`'s deferred update): the rank-1 update of the values the
            tile's threads hold (per-thread scalars or column slices)."""
            if op != "Sub" or not isinstance(other, OuterProduct):
                raise QuadrantsTypeError(f"Tile{n}x{n} takes only `tile -= qd.outer(a, b)` as an augmented assignment")
            a = _vec_value(other.a, n, dtype)
            b = a if other.b is other.a else _vec_value(other.b, n, dtype)
            self.member("_ger_sub")(a, b)

        def solve_triangular_(self: Any, B: Any, lower: bool = True) -> None:
            """B := X with X self^T = B (self lower triangular, nonzero diagonal)."""
            if not lower:
                raise QuadrantsTypeError(f"Tile{n}x{n}.solve_triangular_: only lower=True is supported")
            B.member("_trsm")(self)

    Tile.__name__ = Tile.__qualname__ = f"Tile{n}x{n}"
    st = dataclass(Tile)
    st.qd_tile = (n, dtype)
    st.subscript = _subscript
    return st


def _subscript(tile: Any, idx: Any) -> Any:
    if idx != slice(None):
        raise QuadrantsSyntaxError("a tile is only subscripted as tile[:] (the target of a load)")
    return _Whole(tile)


class TileProxy:
    """`qd.simt.Tile16x16` / `qd.simt.Tile32x32`: `SIZE`, and `zeros(dtype=...)` / `eye(dtype=...)` in a kernel."""

    def __init__(self, n: int) -> None:
        self.SIZE = n

    def _type(self, dtype: Any) -> Any:
        what = f"qd.simt.Tile{self.SIZE}x{self.SIZE}"
        if _b.current() is None:
            raise QuadrantsSyntaxError(f"{what} tiles are made inside a @qd.kernel or @qd.func")
        arch = _b.cfg().arch
        if not getattr(arch, "is_gpu", False) or arch.subgroup_size() is None:
            raise QuadrantsSyntaxError(f"{what} needs a GPU arch with subgroups (cuda, vulkan, opencl); the current "
                                       f"arch is {arch}")
        dt = dtypes.to_dtype(dtype) if dtype is not None else _b.cfg().default_fp
        if not dt.is_float:
            raise QuadrantsTypeError(f"{what} holds f32 or f64 values, got {dt}")
        return _tile_type(self.SIZE, dt)

    def zeros(self, *, dtype: Any = None) -> Any:
        return self._type(dtype)()

    def eye(self, *, dtype: Any = None) -> Any:
        st = self._type(dtype)
        i = ops.row(self.SIZE)
        one, zero = _e.const(1, st.qd_tile[1]), _e.const(0, st.qd_tile[1])
        return st(*[_e.select(_e.binary("eq", i, j), one, zero) for j in range(self.SIZE)])

    def __repr__(self) -> str:
        return f"qd.simt.Tile{self.SIZE}x{self.SIZE}"


Tile16x16 = TileProxy(16)
Tile32x32 = TileProxy(32)

__all__ = ["Tile16x16", "Tile32x32"]
