"""`qd.simt.block`'s reductions and scans over the threads of a block (Quadrants' `block.reduce`,
`block.inclusive_scan`, ...), re-exported by `qd.simt.block`.

`block_dim` is a compile-time Python int, the loop's `qd.loop_config(block_dim=...)`, a positive multiple of the
subgroup size; `op` a function of two values (a `@qd.func` or a Python function over kernel values), associative;
`dtype` the values' dtype. Every thread of the block calls them together (uniform control flow).

Two stages: each subgroup reduces (scans) its lanes with `qd.simt.subgroup`'s shuffles, one lane per subgroup
publishes the subgroup's total into a `SharedArray` of one slot per subgroup, and after a `block.sync()` every
thread combines the totals it needs: the subgroup's lanes scan the slots with shuffles when a subgroup has at least
as many lanes as the block has subgroups, else each thread folds them in a loop. A last `block.sync()` lets the next
call (or the next loop iteration) reuse the slots. A block of one subgroup needs no shared memory nor barrier.

Results: `reduce*` give the total on every thread in qd (Quadrants promises thread 0 only, so code written for
either reads thread 0), except with `block_dim == group_size()` where `reduce` is the subgroup's `reduce_*_tiled`
(thread 0 only, as in Quadrants) and `reduce_all` its `reduce_all_*_tiled`; `inclusive_*` give thread i the op over
threads 0..i, `exclusive_*` over 0..i-1 with the identity on thread 0 (`exclusive_scan` takes it: `op(identity, x)`
must be `x`).
"""

from __future__ import annotations  # noqa: I001  (subgroup before reductions, see below)

from typing import Any

from qd.errors import QuadrantsSyntaxError
from qd.frontend import expr as _e
from qd.frontend.api import func, template
from qd.lang.simt import subgroup as _sg  # before reductions: subgroup's last lines import reductions, which
from qd.lang.simt import reductions as _r  # imports subgroup's primitives
from qd.lang.simt.block import SharedArray, sync, thread_idx
from qd.types import dtypes


@func
def _store_if(cond: Any, arr: template(), i: Any, value: Any) -> None:  # type: ignore[valid-type]
    if cond:
        arr[i] = value


@func
def _fold(arr: template(), first: Any, stop: Any, op: template()):  # type: ignore[valid-type]  (no return annotation: it would be the dtype)
    """op over `arr[0] .. arr[stop - 1]` (`arr[0]` when stop <= 1), `first` being `arr[0]`."""
    acc = first
    for w in range(1, stop):
        acc = op(acc, arr[w])
    return acc


def _layout(block_dim: Any, what: str) -> tuple[int, int, int]:
    """(subgroup size, its log2, subgroups per block) for a `block_dim` checked against the device."""
    size = _sg.group_size()
    if isinstance(block_dim, bool) or not isinstance(block_dim, int) or block_dim < size or block_dim % size:
        raise QuadrantsSyntaxError(f"qd.simt.block.{what}: block_dim must be a Python int, a positive multiple of "
                                   f"the subgroup size {size} of this device, got {block_dim!r}; pass the loop's "
                                   f"qd.loop_config(block_dim=...)")
    return size, _sg.log2_group_size(), block_dim // size


def _dtype_of(value: Any, dtype: Any) -> dtypes.DataType:
    return dtypes.to_dtype(dtype) if dtype is not None else _e.as_expr(value).dtype


def _totals(total: Any, publisher: int, op: Any, dtype: Any, n_sub: int) -> tuple[Any, Any]:
    """(op over every subgroup's total, op over the totals of the subgroups before this thread's) from each
    subgroup's `total` as its lane `publisher` holds it; the second is meaningless in subgroup 0."""
    size, log2 = _sg.group_size(), _sg.log2_group_size()
    slots = SharedArray((n_sub,), dtype)
    sub = _e.binary("floordiv", thread_idx(), size)
    lane = _sg.invocation_id()
    _store_if(_e.binary("eq", lane, publisher), slots, sub, total)
    sync()
    if n_sub <= size:  # the subgroup's lanes scan the slots: lane w holds the op over slots 0..w
        own = slots.load([_e.binary("min", lane, n_sub - 1)])
        scan = _r._inclusive_scan_tiled(own, op, log2)
        everything = _sg.shuffle(scan, n_sub - 1)
        before = _sg.shuffle(scan, _e.binary("max", _e.binary("sub", sub, 1), 0))
    else:
        first = slots.load([0])
        everything = _fold(slots, first, n_sub, op)
        before = _fold(slots, first, sub, op)
    sync()
    return everything, before


def _two_stage(value: Any, op: Any, dtype: Any, what: str, block_dim: Any, scan: bool) -> tuple:
    """(this subgroup's reduction (lane 0) or inclusive scan, the block's total, the op over the subgroups before
    this thread's): the last two None for a block of one subgroup."""
    size, log2, n_sub = _layout(block_dim, what)
    v = _e.cast_expr(_e.as_expr(value), _dtype_of(value, dtype))
    if scan:
        local = _r._inclusive_scan_tiled(v, op, log2)
        publisher = size - 1
    else:
        local = _r._reduce_tiled(v, op, log2)
        publisher = 0
    if n_sub == 1:
        return local, None, None
    everything, before = _totals(local, publisher, op, v.dtype, n_sub)
    return local, everything, before


def _in_first_subgroup() -> Any:
    return _e.binary("lt", thread_idx(), _sg.group_size())


def reduce(value: Any, block_dim: Any, op: Any, dtype: Any = None) -> Any:
    """op over the block's values: on thread 0 (in qd on every thread once the block has several subgroups)."""
    local, everything, _ = _two_stage(value, op, dtype, "reduce", block_dim, scan=False)
    return local if everything is None else everything


def reduce_all(value: Any, block_dim: Any, op: Any, dtype: Any = None) -> Any:
    """op over the block's values, on every thread."""
    _, log2, n_sub = _layout(block_dim, "reduce_all")
    if n_sub == 1:
        return _r._reduce_all_tiled(_e.cast_expr(_e.as_expr(value), _dtype_of(value, dtype)), op, log2)
    return reduce(value, block_dim, op, dtype)


def inclusive_scan(value: Any, block_dim: Any, op: Any, dtype: Any = None) -> Any:
    """Thread i gets op over the values of threads 0..i of its block."""
    local, _, before = _two_stage(value, op, dtype, "inclusive_scan", block_dim, scan=True)
    if before is None:
        return local
    return _e.select(_in_first_subgroup(), local, op(before, local))


def exclusive_scan(value: Any, block_dim: Any, op: Any, identity: Any, dtype: Any = None) -> Any:
    """Thread i gets op over the values of threads 0..i-1 of its block; thread 0 gets `identity`."""
    dt = _dtype_of(value, dtype)
    local, _, before = _two_stage(value, op, dtype, "exclusive_scan", block_dim, scan=True)
    lane0 = _e.binary("eq", _sg.invocation_id(), 0)
    local = _e.select(lane0, _e.cast_expr(_e.as_expr(identity), dt), _sg.shuffle_up(local, 1))
    if before is None:
        return local
    across = _e.select(lane0, before, op(before, local))
    return _e.select(_in_first_subgroup(), local, across)


def _typed(kind: str, form: str) -> Any:
    """`<form>_<kind>(value, block_dim, dtype)`: the generic form with op `kind` (and its identity when
    exclusive)."""
    op = _r._OPS[kind]
    generic = {"reduce": reduce, "reduce_all": reduce_all, "inclusive": inclusive_scan,
               "exclusive": exclusive_scan}[form]

    def fn(value: Any, block_dim: Any, dtype: Any = None) -> Any:
        if form != "exclusive":
            return generic(value, block_dim, op, dtype)
        v = _e.cast_expr(_e.as_expr(value), _dtype_of(value, dtype))
        return exclusive_scan(v, block_dim, op, _r._identity(v, kind), dtype)
    fn.__name__ = fn.__qualname__ = f"{form}_{kind}"
    fn.__doc__ = f"`qd.simt.block.{generic.__name__}` with op `{kind}`."
    return fn


reduce_add = _typed("add", "reduce")
reduce_min = _typed("min", "reduce")
reduce_max = _typed("max", "reduce")
reduce_all_add = _typed("add", "reduce_all")
reduce_all_min = _typed("min", "reduce_all")
reduce_all_max = _typed("max", "reduce_all")
inclusive_add = _typed("add", "inclusive")
inclusive_min = _typed("min", "inclusive")
inclusive_max = _typed("max", "inclusive")
exclusive_add = _typed("add", "exclusive")
exclusive_min = _typed("min", "exclusive")
exclusive_max = _typed("max", "exclusive")

__all__ = ["exclusive_add", "exclusive_max", "exclusive_min", "exclusive_scan", "inclusive_add", "inclusive_max",
           "inclusive_min", "inclusive_scan", "reduce", "reduce_add", "reduce_all", "reduce_all_add", "reduce_all_max",
           "reduce_all_min", "reduce_max", "reduce_min"]
