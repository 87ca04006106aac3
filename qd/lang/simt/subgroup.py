"""`qd.simt.subgroup`: the lanes of one subgroup (a CUDA warp, a Vulkan/OpenCL subgroup) working together.

The primitives here are `ir.Simt` operations each GPU tier lowers to its own instructions (CUDA `shfl.sync`,
`vote.sync`; SPIR-V `OpGroupNonUniform*`; OpenCL `sub_group_*`). Every lane of the subgroup must reach them
together (uniform control flow, all lanes active). Lane ids and offsets are small ints (Quadrants passes u32).
`group_size()` is the device's subgroup size as a Python int, fixed when the kernel compiles.
"""

from __future__ import annotations

import warnings
from typing import Any

from qd.frontend import expr as _e
from qd.frontend import simt as _s
from qd.types import dtypes


def group_size() -> int:
    """The lanes of one subgroup on the current arch's device (32 on CUDA), as a Python int."""
    return _s.subgroup_size("qd.simt.subgroup.group_size")


def log2_group_size() -> int:
    size = group_size()
    if size & (size - 1):
        raise ValueError(f"qd.simt.subgroup.log2_group_size: the subgroup size {size} is not a power of two")
    return size.bit_length() - 1


def sync() -> None:
    """Every lane of the subgroup reaches this point before any goes on."""
    _s.emit("subgroup_sync", what="qd.simt.subgroup.sync")


def mem_fence() -> None:
    """Orders this lane's memory operations as seen by the other lanes of its subgroup."""
    _s.emit("subgroup_fence", what="qd.simt.subgroup.mem_fence")


# the deprecated names warn once per process, as in Quadrants (whose tests reset these flags)
_barrier_deprecation_warned = False
_memory_barrier_deprecation_warned = False
_ballot_full_subgroup_deprecation_warned = False


def _warn_once(flag: str, text: str) -> None:
    if not globals()[flag]:
        globals()[flag] = True
        warnings.warn(text, DeprecationWarning, stacklevel=3)


def barrier() -> None:
    """Deprecated name of `sync`."""
    _warn_once("_barrier_deprecation_warned",
               "qd.simt.subgroup.barrier() is deprecated; use qd.simt.subgroup.sync() instead.")
    sync()


def memory_barrier() -> None:
    """Deprecated name of `mem_fence`."""
    _warn_once("_memory_barrier_deprecation_warned",
               "qd.simt.subgroup.memory_barrier() is deprecated; use qd.simt.subgroup.mem_fence() instead.")
    mem_fence()


def invocation_id() -> Any:
    """This lane's index in its subgroup, in [0, group_size()), an i32."""
    return _s.emit("lane", what="qd.simt.subgroup.invocation_id")


def elect() -> Any:
    """1 on lane 0 of the subgroup, 0 elsewhere (i32)."""
    return _e.cast_expr(_e.binary("eq", invocation_id(), 0), dtypes.i32)


def shuffle(value: Any, index: Any) -> Any:
    """The `value` of lane `index` (each lane may name its own)."""
    return _s.moved("shuffle", value, index, "qd.simt.subgroup.shuffle")


def shuffle_xor(value: Any, mask: Any) -> Any:
    """The `value` of lane `invocation_id() ^ mask`."""
    lane = _e.binary("xor", invocation_id(), _s.as_i32(mask))
    return shuffle(value, lane)


def shuffle_up(value: Any, offset: Any) -> Any:
    """The `value` of lane `invocation_id() - offset`; the lowest `offset` lanes get an unspecified value."""
    return _s.moved("shuffle_up", value, offset, "qd.simt.subgroup.shuffle_up")


def shuffle_down(value: Any, offset: Any) -> Any:
    """The `value` of lane `invocation_id() + offset`; the highest `offset` lanes get an unspecified value."""
    return _s.moved("shuffle_down", value, offset, "qd.simt.subgroup.shuffle_down")


def broadcast(value: Any, index: Any) -> Any:
    """The `value` of lane `index`, which must be the same on every lane."""
    return _s.moved("broadcast", value, index, "qd.simt.subgroup.broadcast")


def broadcast_first(value: Any) -> Any:
    """Lane 0's `value` on every lane."""
    return broadcast(value, 0)


def ballot(predicate: Any) -> Any:
    """The u64 mask of the subgroup's lanes whose `predicate` is nonzero (bit i: lane i)."""
    return _s.emit("ballot", (_s.as_i32(predicate),), dtypes.u64, "qd.simt.subgroup.ballot")


def ballot_full_subgroup(predicate: Any) -> Any:
    """Deprecated name of `ballot`."""
    _warn_once("_ballot_full_subgroup_deprecation_warned",
               "qd.simt.subgroup.ballot_full_subgroup() is deprecated; use qd.simt.subgroup.ballot() instead.")
    return ballot(predicate)


def ballot_first_n(predicate: Any, n: int) -> Any:
    """The u32 mask of lanes i < n (n a Python int in [1, 32]) whose `predicate` is nonzero."""
    if type(n) is not int or not 1 <= n <= 32:
        raise ValueError(f"qd.simt.subgroup.ballot_first_n: n must be a Python int in [1, 32], got {n!r}")
    p = _s.as_i32(predicate)
    if n < 32:
        below = _e.cast_expr(_e.binary("lt", invocation_id(), n), dtypes.i32)
        p = _e.binary("mul", _e.cast_expr(_e.binary("ne", p, 0), dtypes.i32), below)
    return _e.cast_expr(ballot(p), dtypes.u32)


def _lane_bit(lane_id: Any) -> Any:
    return _e.binary("shl", _e.const(1, dtypes.u32), _s.as_u32(lane_id))


def lanemask_eq(lane_id: Any) -> Any:
    """u32 with only bit `lane_id` set."""
    return _lane_bit(lane_id)


def lanemask_lt(lane_id: Any) -> Any:
    """u32 with the bits below `lane_id` set."""
    return _e.binary("sub", _lane_bit(lane_id), _e.const(1, dtypes.u32))


def lanemask_le(lane_id: Any) -> Any:
    return _e.binary("or", _lane_bit(lane_id), lanemask_lt(lane_id))


def lanemask_gt(lane_id: Any) -> Any:
    return _e.unary("bit_not", lanemask_le(lane_id))


def lanemask_ge(lane_id: Any) -> Any:
    return _e.unary("bit_not", lanemask_lt(lane_id))


# the reductions, scans, segmented reductions and votes are written on the primitives above (a module of their own)
from qd.lang.simt import reductions as _reductions
from qd.lang.simt.reductions import *

__all__ = ["group_size", "log2_group_size", "sync", "mem_fence", "barrier", "memory_barrier", "invocation_id",
           "elect", "shuffle", "shuffle_xor", "shuffle_up", "shuffle_down", "broadcast", "broadcast_first", "ballot",
           "ballot_full_subgroup", "ballot_first_n", "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_gt",
           "lanemask_ge"] + list(_reductions.__all__)
