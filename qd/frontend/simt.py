"""`qd.simt` inside a kernel: thread-group operations (`ir.Simt`) and block-shared arrays (`BufferDecl` kind
'shared').

Only the GPU tiers run them: an arch without subgroups (`Arch.subgroup_size() is None`: the CPU tiers) is refused
here, while the kernel compiles, with a `QuadrantsArchError` (a ValueError, as in Quadrants) naming the operation
and the arch. The subgroup size is the device's, asked of the tier once per compile, so `group_size()` is a
compile-time int as in Quadrants. The public names live in `qd/lang/simt/`.
"""

from __future__ import annotations

import ast
import itertools
from typing import Any

from qd import ir
from qd.errors import QuadrantsArchError, QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _b
from qd.frontend import expr as _e
from qd.frontend.expr import Expr
from qd.frontend.values import GlobalTensor, element_type_shape
from qd.types import dtypes

_shared_ids = itertools.count()
# `qd.simt`'s register tiles (`qd/lang/simt/tile.py`) set this when a tile type is first used: `slicer(tensor,
# index)` gives what `a[r0:r1, c0:c1]` (a field, ndarray or SharedArray with slices, their bounds runtime values)
# stands for in a tile load, store or `qd.outer`; while None such a subscript is refused as before
tile_slicer: Any = None
# the dtypes a shuffle moves: 32- and 64-bit ints and floats (narrower values are widened by the caller)
_SHUFFLED = frozenset({"i32", "u32", "i64", "u64", "f32", "f64"})


def subgroup_size(what: str) -> int:
    """The current arch's subgroup size (a Python int); refuses an arch without subgroups."""
    arch = _b.cfg().arch
    size = arch.subgroup_size() if getattr(arch, "is_gpu", False) else None
    if size is None:
        raise QuadrantsArchError(f"{what} is not supported for arch {arch}: it needs a GPU arch whose tier has "
                                 f"thread groups (cuda, vulkan, opencl); run the kernel with qd.init(arch=qd.gpu)")
    return size


def cuda_only(what: str) -> None:
    """Refuses `what` (a CUDA warp operation) on any arch but cuda."""
    arch = _b.cfg().arch
    if getattr(arch, "name", "") != "cuda":
        raise QuadrantsArchError(f"{what} is a CUDA warp operation, not supported for arch {arch}; use the portable "
                                 f"qd.simt.subgroup operations")


def _in_kernel(what: str) -> _b.Builder:
    b = _b.current()
    if b is None:
        raise QuadrantsSyntaxError(f"{what} can only be called inside a @qd.kernel or @qd.func")
    return b


def emit(op: str, args: tuple = (), dtype: dtypes.DataType = dtypes.i32, what: str = "") -> Expr:
    """`ir.Simt(op, args)` in the kernel being built, after the arch check."""
    what = what or f"qd.simt {op}"
    b = _in_kernel(what)
    subgroup_size(what)
    vals = tuple(_e.as_expr(a).value for a in args)
    return Expr(b.emit(ir.Simt, op=op, args=vals, dtype=dtype))


def as_i32(x: Any) -> Any:
    """A lane, offset or predicate operand as i32 (u32 lanes of Quadrants' API are small)."""
    return _e.cast_expr(x, dtypes.i32)


def as_u32(x: Any) -> Any:
    return _e.cast_expr(x, dtypes.u32)


def moved(op: str, value: Any, other: Any, what: str) -> Any:
    """A shuffle-like op (`value` from another lane): elementwise over a vector or matrix."""
    if _e.is_matrix(value):
        return value._map(lambda x: moved(op, x, other, what))
    v = _e.as_expr(value)
    if v.dtype.name not in _SHUFFLED:
        raise QuadrantsTypeError(f"{what}: values of dtype {v.dtype.name} cannot be shuffled; cast to a 32- or "
                                 f"64-bit int or float first")
    return emit(op, (v, as_i32(other)), v.dtype, what)


def shared_array(shape: Any, dtype: Any) -> GlobalTensor:
    """A new block-shared array in the kernel being built (`qd.simt.block.SharedArray`)."""
    what = "qd.simt.block.SharedArray"
    b = _in_kernel(what)
    subgroup_size(what)
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape or not all(type(n) is int and n > 0 for n in shape):
        raise QuadrantsSyntaxError(f"{what} shape must be a positive integer or a tuple of positive integers, "
                                   f"but got {shape!r}")
    dt, es = element_type_shape(dtype)
    if dt is None:
        raise QuadrantsTypeError(f"{what} needs a dtype, got None")
    name = f"shared{next(_shared_ids)}"
    decl = ir.BufferDecl(kind="shared", dtype=dt, shape=tuple(shape), elem_shape=tuple(es), name=name)
    buf = b.add_buffer(("shared", name), decl, None)
    return GlobalTensor(buf, b.buffers[buf])


def has_slice(node: Any) -> bool:
    """Whether a subscript's index node holds a slice (`a[i:j]`, `a[b, i:j, k]`)."""
    return isinstance(node, ast.Slice) or (isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice)
                                                                                 for e in node.elts))


def tile_slice(t: Any, base: Any, node: Any) -> Any:
    """`base[...]` through `tile_slicer` when `base` is a field/ndarray/SharedArray, its index holds a slice and a
    tile type is in use (slice bounds may then be runtime values), else None."""
    if tile_slicer is None or not isinstance(base, GlobalTensor) or not has_slice(node):
        return None

    def one(e: Any) -> Any:
        if isinstance(e, ast.Slice):
            return slice(*(t.visit(x) if x is not None else None for x in (e.lower, e.upper, e.step)))
        return t.visit(e)
    idx = tuple(one(e) for e in node.elts) if isinstance(node, ast.Tuple) else (one(node),)
    return tile_slicer(base, idx)
