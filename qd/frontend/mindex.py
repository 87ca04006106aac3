"""Indexing a vector or matrix value in a kernel: integers, runtime values and compile-time slices.

`m[i, :]`, `m[:, j]`, `m[a:b, j]`, `m[:2, :2]`, `v[a:b:s]` with `i`/`j` a literal, a `qd.static` loop index
or a runtime value. A key is parsed once into a `Selection` (per axis: the static positions it takes, or a
runtime index); loads gather entries (`gather`), stores get the places each runtime choice stands for
(`places`). Rules (Quadrants' where it has one):
- a slice's bounds and step are compile-time values with Python's meaning (negative bounds count from the
  end, a stop past the end stops there, a negative step reverses); an axis indexed by a slice is kept in
  the result, an axis indexed by a number is dropped (`m[i, :]` is a vector, `m[:2, :2]` a 2x2 matrix);
- a number index must lie in [0, extent) (a negative one is refused, Quadrants' rule: its meaning would
  depend on whether the index is known at compile time); a runtime index is checked in debug mode;
- `m[i]` on a matrix is row `i` (qd's, tested in tests/test_matrix.py; Quadrants refuses it and asks for
  `m[i, :]`); a vector index (`m[qd.Vector([i, j])]`, the value of a tuple conditional expression) stands
  for its entries.
This module knows nothing of AST nodes or assignment targets; the transformer wraps what it returns.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from qd.errors import QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builtins as _qb
from qd.frontend import expr as _e
from qd.frontend.expr import Expr


@dataclass(frozen=True)
class Selection:
    """What a key picks out of a value of shape `shape`.

    `axes[k]` is a list of static positions along axis k, or an `Expr` (a runtime index); `shape` is the
    result's shape (the extents of the sliced axes; () for one entry)."""

    source: tuple
    axes: tuple
    shape: tuple

    @property
    def runtime_axes(self) -> list[int]:
        return [k for k, a in enumerate(self.axes) if isinstance(a, Expr)]


def describe(shape: tuple) -> str:
    return f"a local {'vector' if len(shape) == 1 else 'matrix'} of shape {tuple(shape)}"


def keys_of(idx: Any) -> list:
    """The per-axis keys of a subscript (a vector key stands for its entries)."""
    keys = list(idx) if isinstance(idx, (tuple, list)) else [idx]
    out: list = []
    for k in keys:
        if _e.is_matrix(k):
            out.extend(k.entries)
        else:
            out.append(k)
    return out


def has_slice(idx: Any) -> bool:
    return any(isinstance(k, slice) for k in (idx if isinstance(idx, tuple) else (idx,)))


def select(shape: tuple, idx: Any, check: bool = True) -> Selection:
    """Parse `idx` against `shape`; `check=False` skips the debug-mode bound checks of runtime indices
    (elements of a `boundary="clamp"` ndarray clamp instead)."""
    keys = keys_of(idx)
    what = describe(shape)
    if len(shape) == 2 and len(keys) == 1:
        keys.append(slice(None))  # m[i] is row i (qd's; Quadrants asks for m[i, :])
    if len(keys) != len(shape):
        raise QuadrantsIndexError(f"Expected {len(shape)} indices, got {len(keys)}: {what} takes "
                                  f"{len(shape)} ind{'ex' if len(shape) == 1 else 'ices'}")
    axes: list = []
    out_shape: list = []
    for axis, (k, d) in enumerate(zip(keys, shape)):
        where = f"axis {axis} of {what}" if len(shape) > 1 else what
        if isinstance(k, slice):
            pos = _slice_positions(k, d, where)
            axes.append(pos)
            out_shape.append(len(pos))
        elif isinstance(k, Expr):
            if not k.dtype.is_int:
                raise QuadrantsTypeError(f"an index into {where} must be an integer, got {k.dtype}")
            if check:
                _qb.check_local_index(k, d, where)
            axes.append(k)
        else:
            axes.append([_static_index(k, d, where)])
    return Selection(tuple(shape), tuple(axes), tuple(out_shape))


def _slice_positions(k: slice, d: int, where: str) -> list[int]:
    for part in (k.start, k.stop, k.step):
        if part is not None and not (isinstance(part, (int, np.integer)) and not isinstance(part, bool)):
            raise QuadrantsSyntaxError(f"a slice of {where} needs integer compile-time bounds, got "
                                       f"{type(part).__name__}")
    if k.step == 0:
        raise QuadrantsSyntaxError(f"a slice of {where} has step 0")
    return list(range(d)[k])


def _static_index(k: Any, d: int, where: str) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise QuadrantsTypeError(f"an index into {where} must be an integer or a slice, got {type(k).__name__}")
    k = int(k)
    if k < 0:
        raise QuadrantsSyntaxError(f"Negative indices are not supported in Quadrants kernels: index {k} into "
                                   f"{where}; write it as {k + d} (a slice such as [{k}:] may count from the end)")
    if k >= d:
        raise QuadrantsSyntaxError(f"index {k} out of range for {where} (extent {d})")
    return k


def _strides(shape: tuple) -> list[int]:
    return [shape[1], 1] if len(shape) == 2 else [1]


def _static_choices(sel: Selection, fixed: dict) -> list[int]:
    """Flat positions of the result's entries (row-major), with runtime axes fixed at `fixed[axis]`."""
    strides = _strides(sel.source)
    per_axis = [[fixed[k]] if isinstance(a, Expr) else a for k, a in enumerate(sel.axes)]
    return [sum(p * s for p, s in zip(pos, strides)) for pos in itertools.product(*per_axis)]


def places(sel: Selection) -> tuple[Expr | None, list[list[int]]]:
    """The flat positions a store through `sel` writes: `(None, [positions])` when every index is static,
    else `(index, options)` where option `r` holds the positions written when the runtime `index` is `r`
    (`index` runs row-major over the runtime axes)."""
    rt = sel.runtime_axes
    if not rt:
        return None, [_static_choices(sel, {})]
    index: Any = 0
    for k in rt:
        index = _e.binary("add", _e.binary("mul", index, sel.source[k]), sel.axes[k])
    options = [_static_choices(sel, dict(zip(rt, combo)))
               for combo in itertools.product(*(range(sel.source[k]) for k in rt))]
    return index, options


def gather(entries: list, sel: Selection, clamp: bool = False) -> list:
    """The entries `sel` picks (row-major). A runtime index is a select chain over the entries it may pick;
    with `clamp` the flat offset of each picked entry is clamped into the value instead (an element of a
    `boundary="clamp"` ndarray, Quadrants')."""
    rt = sel.runtime_axes
    if not rt:
        return [entries[p] for p in _static_choices(sel, {})]
    if clamp:
        strides = _strides(sel.source)
        out = []
        for base in _static_choices(sel, {k: 0 for k in rt}):
            flat: Any = base
            for k in rt:
                flat = _e.binary("add", flat, _e.binary("mul", sel.axes[k], strides[k]))
            flat = _e.binary("max", _e.binary("min", flat, len(entries) - 1), 0)
            out.append(choose(flat, entries))
        return out
    index, options = places(sel)
    per_entry = zip(*options)  # for each result entry: its flat position under each runtime choice
    return [choose(index, [entries[p] for p in cands]) for cands in per_entry]


def choose(i: Expr, options: list) -> Any:
    """`options[i]` for a runtime `i`: a select chain (the last option for an index out of range)."""
    out = options[-1]
    for k in range(len(options) - 2, -1, -1):
        out = _e.select(_e.binary("eq", i, k), options[k], out)
    return out
