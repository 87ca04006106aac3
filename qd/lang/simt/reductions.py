"""`qd.simt.subgroup`'s composite operations: reductions, scans, segmented reductions and votes over the lanes of
a subgroup (Quadrants' `quadrants.lang.simt.reductions`), re-exported by `qd.simt.subgroup`.

They are Python functions run while the kernel is traced: they emit the shuffles (`qd/lang/simt/subgroup.py`) and
the arithmetic between them, so each call unrolls into `log2_size` shuffle + op steps in the calling kernel (no
barrier, no shared memory). A runtime choice between two values is a `select`, never a Python `if`.

Tiles. `<op>_tiled(value, log2_size)` splits the subgroup into tiles of `2**log2_size` consecutive lanes, each
tile working on its own; `log2_size` is a Python int in [0, log2_group_size()] (a larger one is refused while the
kernel compiles: its tiles would not fit a subgroup). The unsuffixed `<op>(value)` is the whole subgroup
(`log2_size = log2_group_size()`). Where the result lands:
- `reduce_{add,min,max}_tiled`: tile lane 0 (the tile's first lane) only; the other lanes hold partial results;
- `reduce_all_{add,min,max}_tiled`, the votes (`all_true`, `any_true`, `all_equal`: i32 0/1): every lane;
- `inclusive_<op>_tiled`: lane k of a tile holds op over the tile's lanes 0..k; `exclusive_<op>_tiled` over
  0..k-1, and the op's identity on tile lane 0 (0; 1 for mul; all bits for and; the dtype's largest value, +inf
  for floats, for min; its smallest, -inf, for max);
- `segmented_reduce_{add,min,max}_tiled(value, head, log2_size)`: lane k holds op over the lanes from its
  segment's head to k, the head being the nearest lane at or below k in its tile whose `head` is nonzero (any
  nonzero value counts), or the tile's first lane when there is none; a lane whose own `head` is set starts a
  segment. The segment's total is on its last lane.
Values: scalars of a dtype a shuffle moves (i32, u32, i64, u64, f32, f64) or vectors/matrices of them
(elementwise); and/or/xor take integers. Min/max of NaN follow the tier's min/max. Caller contract as for every
subgroup operation: all lanes of the subgroup reach the call together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.lang.simt.subgroup import ballot, invocation_id, log2_group_size, shuffle, shuffle_down, shuffle_up
from qd.types import dtypes

Op = Callable[[Any, Any], Any]


def _binary(name: str) -> Op:
    """The combining function of op `name` (`qd/frontend/expr.py`'s binary op of that name)."""
    def combine(a: Any, b: Any) -> Any:
        return _e.binary(name, a, b)
    combine.__name__ = f"_op_{name}"
    return combine


_OPS: dict[str, Op] = {name: _binary(name) for name in ("add", "mul", "min", "max", "and", "or", "xor")}
_op_add, _op_min, _op_max, _op_and, _op_or = (_OPS[k] for k in ("add", "min", "max", "and", "or"))


# ---------------------------------------------------------------- helpers

def tile_log2(log2_size: Any, what: str) -> int:
    """`log2_size` checked: a Python int whose tile fits the device's subgroup."""
    if isinstance(log2_size, (bool, np.bool_)) or not isinstance(log2_size, (int, np.integer)):
        raise QuadrantsSyntaxError(f"{what}: log2_size must be a compile-time Python int (qd.template()), got "
                                   f"{type(log2_size).__name__}")
    top = log2_group_size()
    if not 0 <= int(log2_size) <= top:
        raise QuadrantsSyntaxError(f"{what}: log2_size={int(log2_size)} asks for tiles of {1 << max(int(log2_size), 0)}"
                                   f" lanes, but a subgroup of this device has {1 << top} (log2_size must be in "
                                   f"[0, {top}]); use a smaller tile or qd.simt.subgroup.log2_group_size()")
    return int(log2_size)


def _value(value: Any) -> Any:
    return value if _e.is_matrix(value) else _e.as_expr(value)


def _dtype(value: Any) -> dtypes.DataType:
    return _v.matrix_dtype(value) if _e.is_matrix(value) else value.dtype


def _int_only(value: Any, what: str) -> None:
    if not _dtype(value).is_int:
        raise QuadrantsTypeError(f"{what} takes integer values, got {_dtype(value).name}")


def _lane_in_tile(log2_size: int) -> Any:
    return _e.binary("and", invocation_id(), (1 << log2_size) - 1)


def _tile_base(log2_size: int) -> Any:
    """The subgroup lane of this lane's tile's first lane (i32)."""
    return _e.binary("and", invocation_id(), ~((1 << log2_size) - 1))


def _truth(predicate: Any) -> Any:
    """1 where `predicate` is nonzero, else 0 (i32)."""
    return _e.cast_expr(_e.binary("ne", _e.as_expr(predicate), 0), dtypes.i32)


# ---------------------------------------------------------------- reductions

def _reduce_tiled(value: Any, op: Op, log2_size: int) -> Any:
    """op-reduction of each tile into its first lane: halving distances, each lane adding the lane `d` above."""
    v = _value(value)
    for step in range(log2_size):
        v = op(v, shuffle_down(v, 1 << (log2_size - 1 - step)))
    return v


def _reduce_all_tiled(value: Any, op: Op, log2_size: int) -> Any:
    """op-reduction of each tile onto all its lanes: a butterfly (partner `lane ^ 2**k`) stays inside the tile."""
    v = _value(value)
    lane = invocation_id()
    for step in range(log2_size):
        v = op(v, shuffle(v, _e.binary("xor", lane, 1 << step)))
    return v


def reduce_add_tiled(value: Any, log2_size: Any) -> Any:
    """Sum of each tile of `2**log2_size` lanes, valid on the tile's first lane (others: partial sums)."""
    return _reduce_tiled(value, _op_add, tile_log2(log2_size, "reduce_add_tiled"))


def reduce_min_tiled(value: Any, log2_size: Any) -> Any:
    """Minimum of each tile of `2**log2_size` lanes, valid on the tile's first lane."""
    return _reduce_tiled(value, _op_min, tile_log2(log2_size, "reduce_min_tiled"))


def reduce_max_tiled(value: Any, log2_size: Any) -> Any:
    """Maximum of each tile of `2**log2_size` lanes, valid on the tile's first lane."""
    return _reduce_tiled(value, _op_max, tile_log2(log2_size, "reduce_max_tiled"))


def reduce_all_add_tiled(value: Any, log2_size: Any) -> Any:
    """Sum of each tile of `2**log2_size` lanes, on every lane of the tile."""
    return _reduce_all_tiled(value, _op_add, tile_log2(log2_size, "reduce_all_add_tiled"))


def reduce_all_min_tiled(value: Any, log2_size: Any) -> Any:
    """Minimum of each tile of `2**log2_size` lanes, on every lane of the tile."""
    return _reduce_all_tiled(value, _op_min, tile_log2(log2_size, "reduce_all_min_tiled"))


def reduce_all_max_tiled(value: Any, log2_size: Any) -> Any:
    """Maximum of each tile of `2**log2_size` lanes, on every lane of the tile."""
    return _reduce_all_tiled(value, _op_max, tile_log2(log2_size, "reduce_all_max_tiled"))


# ---------------------------------------------------------------- scans

def _inclusive_scan_tiled(value: Any, op: Op, log2_size: int) -> Any:
    """Hillis-Steele scan: at distance `d` a lane at least `d` into its tile folds in the lane `d` below, kept on
    the left (`op(earlier, later)`), so an associative op that does not commute scans in lane order too."""
    v = _value(value)
    pos = _lane_in_tile(log2_size)
    for step in range(log2_size):
        d = 1 << step
        below = shuffle_up(v, d)
        v = _e.select(_e.binary("ge", pos, d), op(below, v), v)
    return v


def _exclusive_scan_tiled(value: Any, op: Op, identity: Any, log2_size: int) -> Any:
    """The inclusive scan of the values moved one lane up, `identity` entering at each tile's first lane."""
    v = _value(value)
    shifted = _e.select(_e.binary("eq", _lane_in_tile(log2_size), 0), identity, shuffle_up(v, 1))
    return _inclusive_scan_tiled(shifted, op, log2_size)


def _identity(value: Any, kind: str) -> Any:
    """The identity of op `kind` in `value`'s dtype (a constant, or a vector/matrix of constants)."""
    v = _value(value)
    dt = _dtype(v)
    if kind in ("add", "or", "xor"):
        x: Any = 0
    elif kind == "mul":
        x = 1
    elif kind == "and":
        x = -1 if dt.is_signed else int(np.iinfo(dt.np_dtype).max)
    elif dt.is_float:
        x = float("inf") if kind == "min" else float("-inf")
    else:
        info = np.iinfo(dt.np_dtype)
        x = int(info.max) if kind == "min" else int(info.min)
    c = _e.const(x, dt)
    return v._map(lambda _: c) if _e.is_matrix(v) else c


def _scan(kind: str, exclusive: bool) -> Callable[[Any, Any], Any]:
    name = f"{'exclusive' if exclusive else 'inclusive'}_{kind}_tiled"
    op = _OPS[kind]

    def scan(value: Any, log2_size: Any) -> Any:
        k = tile_log2(log2_size, name)
        v = _value(value)
        if kind in ("and", "or", "xor"):
            _int_only(v, name)
        if exclusive:
            return _exclusive_scan_tiled(v, op, _identity(v, kind), k)
        return _inclusive_scan_tiled(v, op, k)
    scan.__name__ = scan.__qualname__ = name
    span = "0..k-1 (the op's identity on tile lane 0)" if exclusive else "0..k"
    scan.__doc__ = f"Lane k of each tile of `2**log2_size` lanes gets `{kind}` over the tile's lanes {span}."
    return scan


inclusive_add_tiled = _scan("add", False)
inclusive_mul_tiled = _scan("mul", False)
inclusive_min_tiled = _scan("min", False)
inclusive_max_tiled = _scan("max", False)
inclusive_and_tiled = _scan("and", False)
inclusive_or_tiled = _scan("or", False)
inclusive_xor_tiled = _scan("xor", False)
exclusive_add_tiled = _scan("add", True)
exclusive_mul_tiled = _scan("mul", True)
exclusive_min_tiled = _scan("min", True)
exclusive_max_tiled = _scan("max", True)
exclusive_and_tiled = _scan("and", True)
exclusive_or_tiled = _scan("or", True)
exclusive_xor_tiled = _scan("xor", True)


# ---------------------------------------------------------------- segmented reductions

def _segment_offset(head: Any, log2_size: int) -> Any:
    """How many lanes this lane lies past its segment's head (i32; 0 on a head).

    One ballot gives every lane the subgroup's head bits; the tile's bits, with the tile's first lane set as an
    implicit head and the bits above this lane cleared, have their highest set bit at the head."""
    size = 1 << log2_size
    u64 = dtypes.u64
    heads = ballot(_truth(head))
    base = _e.cast_expr(_tile_base(log2_size), u64)
    pos = _lane_in_tile(log2_size)
    tile_bits = _e.binary("and", _e.binary("shr", heads, base), _e.const((1 << size) - 1, u64))
    tile_bits = _e.binary("or", tile_bits, _e.const(1, u64))
    upto = _e.binary("shr", _e.const((1 << 64) - 1, u64), _e.cast_expr(_e.binary("sub", 63, pos), u64))
    head_pos = _e.binary("sub", 63, _e.cast_expr(_e.unary("clz", _e.binary("and", tile_bits, upto)), dtypes.i32))
    return _e.binary("sub", pos, head_pos)


def _segmented_tiled(value: Any, head: Any, op: Op, log2_size: int) -> Any:
    """The inclusive scan where a lane folds in the lane `d` below only when that lane is in its segment."""
    v = _value(value)
    offset = _segment_offset(head, log2_size)
    for step in range(log2_size):
        d = 1 << step
        below = shuffle_up(v, d)
        v = _e.select(_e.binary("ge", offset, d), op(below, v), v)
    return v


def segmented_reduce_add_tiled(value: Any, head_flag: Any, log2_size: Any) -> Any:
    """Sum from this lane's segment head to it, in each tile of `2**log2_size` lanes (see the module docstring)."""
    return _segmented_tiled(value, head_flag, _op_add, tile_log2(log2_size, "segmented_reduce_add_tiled"))


def segmented_reduce_min_tiled(value: Any, head_flag: Any, log2_size: Any) -> Any:
    """Minimum from this lane's segment head to it, in each tile of `2**log2_size` lanes."""
    return _segmented_tiled(value, head_flag, _op_min, tile_log2(log2_size, "segmented_reduce_min_tiled"))


def segmented_reduce_max_tiled(value: Any, head_flag: Any, log2_size: Any) -> Any:
    """Maximum from this lane's segment head to it, in each tile of `2**log2_size` lanes."""
    return _segmented_tiled(value, head_flag, _op_max, tile_log2(log2_size, "segmented_reduce_max_tiled"))


# ---------------------------------------------------------------- votes

def all_true_tiled(predicate: Any, log2_size: Any) -> Any:
    """1 (i32) on every lane of a tile of `2**log2_size` lanes whose lanes all have a nonzero `predicate`, else 0."""
    return _reduce_all_tiled(_truth(predicate), _op_and, tile_log2(log2_size, "all_true_tiled"))


def any_true_tiled(predicate: Any, log2_size: Any) -> Any:
    """1 (i32) on every lane of a tile of `2**log2_size` lanes where some lane has a nonzero `predicate`, else 0."""
    return _reduce_all_tiled(_truth(predicate), _op_or, tile_log2(log2_size, "any_true_tiled"))


def all_equal_tiled(value: Any, log2_size: Any) -> Any:
    """1 (i32) on every lane of a tile of `2**log2_size` lanes whose lanes hold equal scalar `value`s (the
    dtype's `==`: NaN differs from itself, -0.0 equals 0.0), else 0."""
    k = tile_log2(log2_size, "all_equal_tiled")
    v = _e.as_expr(value)
    first = shuffle(v, _tile_base(k))
    return _reduce_all_tiled(_truth(_e.binary("eq", v, first)), _op_and, k)


# ---------------------------------------------------------------- the whole subgroup

def _whole(tiled: Callable[..., Any]) -> Callable[..., Any]:
    name = tiled.__name__.removesuffix("_tiled")

    def whole(*args: Any) -> Any:
        return tiled(*args, log2_group_size())
    whole.__name__ = whole.__qualname__ = name
    whole.__doc__ = f"`{tiled.__name__}` over the whole subgroup (`log2_size = log2_group_size()`)."
    return whole


_TILED = [reduce_add_tiled, reduce_all_add_tiled, reduce_min_tiled, reduce_max_tiled, reduce_all_min_tiled,
          reduce_all_max_tiled, segmented_reduce_add_tiled, segmented_reduce_min_tiled, segmented_reduce_max_tiled,
          inclusive_add_tiled, inclusive_mul_tiled, inclusive_min_tiled, inclusive_max_tiled, inclusive_and_tiled,
          inclusive_or_tiled, inclusive_xor_tiled, exclusive_add_tiled, exclusive_mul_tiled, exclusive_min_tiled,
          exclusive_max_tiled, exclusive_and_tiled, exclusive_or_tiled, exclusive_xor_tiled, all_true_tiled,
          any_true_tiled, all_equal_tiled]

reduce_add = _whole(reduce_add_tiled)
reduce_all_add = _whole(reduce_all_add_tiled)
reduce_min = _whole(reduce_min_tiled)
reduce_max = _whole(reduce_max_tiled)
reduce_all_min = _whole(reduce_all_min_tiled)
reduce_all_max = _whole(reduce_all_max_tiled)
segmented_reduce_add = _whole(segmented_reduce_add_tiled)
segmented_reduce_min = _whole(segmented_reduce_min_tiled)
segmented_reduce_max = _whole(segmented_reduce_max_tiled)
inclusive_add = _whole(inclusive_add_tiled)
inclusive_mul = _whole(inclusive_mul_tiled)
inclusive_min = _whole(inclusive_min_tiled)
inclusive_max = _whole(inclusive_max_tiled)
inclusive_and = _whole(inclusive_and_tiled)
inclusive_or = _whole(inclusive_or_tiled)
inclusive_xor = _whole(inclusive_xor_tiled)
exclusive_add = _whole(exclusive_add_tiled)
exclusive_mul = _whole(exclusive_mul_tiled)
exclusive_min = _whole(exclusive_min_tiled)
exclusive_max = _whole(exclusive_max_tiled)
exclusive_and = _whole(exclusive_and_tiled)
exclusive_or = _whole(exclusive_or_tiled)
exclusive_xor = _whole(exclusive_xor_tiled)
all_true = _whole(all_true_tiled)
any_true = _whole(any_true_tiled)
all_equal = _whole(all_equal_tiled)

__all__ = [f.__name__ for f in _TILED] + [f.__name__.removesuffix("_tiled") for f in _TILED]
