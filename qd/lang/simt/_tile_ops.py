"""The work of `qd.simt`'s register tiles (`qd/lang/simt/tile.py`): how a tile's threads exchange values, and its
methods as `@qd.func`s made per tile size N and dtype (closures over both).

A thread holds row `row` of the tile in `self.r[0 .. N-1]`. Exchanges: `rows_of(values, k)` gives every thread
thread k's `values`; `column(v)` gives every thread all N threads' `v`. Both are shuffles when a subgroup holds the
N rows, else stores into a shared slot per thread of the block between two `block.sync()`s (tile.py's docstring).
"""

from __future__ import annotations

from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError
from qd.frontend import builder as _b
from qd.frontend import expr as _e
from qd.frontend.api import cast, func, select, sqrt, static, template
from qd.lang.simt import block as _block
from qd.lang.simt import subgroup as _sg
from qd.lang.simt.block_reductions import _store_if


def shuffled(n: int) -> bool:
    """Whether the N rows of a tile fit one subgroup (exchanges by shuffle), else they go through shared memory."""
    return _sg.group_size() >= n


def row(n: int) -> Any:
    """This thread's row of an N x N tile (i32)."""
    if shuffled(n):
        return _e.binary("and", _sg.invocation_id(), n - 1)
    return _e.binary("mod", _block.thread_idx(), n)


def _slots(n: int, dtype: Any) -> tuple[Any, Any]:
    """(the kernel's shared slots for tiles of this dtype: one per thread of the block, this thread's tile's first
    slot), so groups of N threads exchange apart."""
    b = _b.current()
    block_dim = b.loop_block_dim
    if not block_dim or block_dim % n:
        raise QuadrantsSyntaxError(f"Tile{n}x{n} on a device whose subgroups have {_sg.group_size()} lanes: the tile's "
                                   f"threads exchange values through shared memory, which needs the loop's "
                                   f"qd.loop_config(block_dim=...) to be a multiple of {n} (got "
                                   f"{block_dim or 'none'}); set qd.loop_config(block_dim={n})")
    cache = b.__dict__.setdefault("_tile_slots", {})
    key = (block_dim, dtype)
    if key not in cache:
        cache[key] = _block.SharedArray((block_dim,), dtype)
    group = _e.binary("mul", _e.binary("floordiv", _block.thread_idx(), n), n)
    return cache[key], group


def _lane(n: int, k: Any) -> Any:
    return _e.binary("add", _e.binary("and", _sg.invocation_id(), ~(n - 1)), k)


def rows_of(values: list, k: Any, n: int, dtype: Any) -> list:
    """`values` as thread `k` of the tile holds them (k the same on every thread), on every thread."""
    vals = [_e.cast_expr(_e.as_expr(v), dtype) for v in values]
    if shuffled(n):
        return [_sg.shuffle(v, _lane(n, k)) for v in vals]
    slots, group = _slots(n, dtype)
    mine = _e.binary("eq", row(n), k)
    for j, v in enumerate(vals):
        _store_if(mine, slots, _e.binary("add", group, j), v)
    _block.sync()
    out = [slots.load([_e.binary("add", group, j)]) for j in range(len(vals))]
    _block.sync()
    return out


def column(value: Any, n: int, dtype: Any) -> list:
    """Every thread's `value`, in row order, on every thread."""
    v = _e.cast_expr(_e.as_expr(value), dtype)
    if shuffled(n):
        return [_sg.shuffle(v, _lane(n, j)) for j in range(n)]
    slots, group = _slots(n, dtype)
    ptr = slots.ptrs([_e.binary("add", group, row(n))])[0]
    _e.bld().emit(ir.GlobalStore, ptr=ptr, value=v.value)
    _block.sync()
    out = [slots.load([_e.binary("add", group, j)]) for j in range(n)]
    _block.sync()
    return out


# ---------------------------------------------------------------- methods

def make_access(n: int, dtype: Any, store: bool) -> Any:
    """The tile's `_load` (`store=False`: the row of this lane from `arr`, cast to `dtype`) or `_store` (the row
    into `arr`), clipped to the array and to rows `[r0, r1)`, columns `[c0, c1)`."""
    @func
    def _access(self, arr: template(), has_batch: template(), batch, r0, r1, c0, c1):  # type: ignore[valid-type]
        axis = static(1 if has_batch else 0)
        i = r0 + row(n)
        if i < min(r1, arr.shape[axis]):
            stop = min(c1, arr.shape[axis + 1])
            for j in static(range(n)):
                if c0 + j < stop:
                    if static(store):
                        if static(has_batch):
                            arr[batch, i, c0 + j] = self.r[j]
                        else:
                            arr[i, c0 + j] = self.r[j]
                    elif static(has_batch):
                        self.r[j] = cast(arr[batch, i, c0 + j], dtype)
                    else:
                        self.r[j] = cast(arr[i, c0 + j], dtype)
    return _access


@func
def column_load(arr: template(), has_batch: template(), batch, r0, r1, col, dtype: template(),  # type: ignore[valid-type]
                i):
    """`arr[(batch,) r0 + i, col]` as `dtype`, 0 where row r0 + i reaches r1 or the array's rows."""
    out = cast(0, dtype)
    axis = static(1 if has_batch else 0)
    if r0 + i < min(r1, arr.shape[axis]):
        if static(has_batch):
            out = cast(arr[batch, r0 + i, col], dtype)
        else:
            out = cast(arr[r0 + i, col], dtype)
    return out


def make_eye(n: int, dtype: Any) -> Any:
    @func
    def eye_(self):
        i = row(n)
        for j in static(range(n)):
            self.r[j] = select(i == j, cast(1, dtype), cast(0, dtype))
    return eye_


def make_ger_sub(n: int, dtype: Any) -> Any:
    @func
    def _ger_sub(self, a, b):
        bs = column(b, n, dtype)
        for j in static(range(n)):
            self.r[j] = self.r[j] - a * bs[j]
    return _ger_sub


def make_cholesky(n: int, dtype: Any) -> Any:
    @func
    def cholesky_(self, eps):
        """Right-looking: pivot k on thread k, the column below it scaled, then the trailing lower triangle
        updated with column k (every thread's entry k, gathered); the strict upper triangle is never written."""
        i = row(n)
        for k in static(range(n)):
            if i == k:
                self.r[k] = sqrt(max(self.r[k], cast(eps, dtype)))
            pivot = rows_of([self.r[k]], k, n, dtype)[0]
            if i > k:
                self.r[k] = self.r[k] / pivot
            if static(k + 1 < n):
                col = column(self.r[k], n, dtype)
                if i > k:
                    for j in static(range(k + 1, n)):
                        if j <= i:
                            self.r[j] = self.r[j] - self.r[k] * col[j]
    return cholesky_


def make_trsm(n: int, dtype: Any) -> Any:
    @func
    def _trsm(self, L):
        """self := X with X L^T = self: each thread solves its row forward, entry c from thread c's row of L."""
        for c in static(range(n)):
            lrow = rows_of([L.r[j] for j in static(range(c + 1))], c, n, dtype)
            acc = self.r[c]
            for j in static(range(c)):
                acc = acc - self.r[j] * lrow[j]
            self.r[c] = acc / lrow[c]
    return _trsm
