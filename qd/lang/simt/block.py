"""`qd.simt.block`: the threads of one GPU block (a CUDA block, a Vulkan/OpenCL workgroup).

A block's size is the parallel loop's `qd.loop_config(block_dim=n)` (else the tier's default). Thread `t` of the
loop runs in block `t // block_dim`, as thread `t % block_dim` of it, when the loop's range is a multiple of
`block_dim` (then every thread of a block runs the same iterations, so all of them reach each `sync`).
"""

from __future__ import annotations

import warnings
from typing import Any

from qd.frontend import expr as _e
from qd.frontend import simt as _s
from qd.types import dtypes


def sync() -> None:
    """Every thread of the block reaches this point, and sees the block's shared-memory writes made before it,
    before any goes on (CUDA `__syncthreads()`, SPIR-V `OpControlBarrier(Workgroup)`, OpenCL `barrier`)."""
    _s.emit("block_sync", what="qd.simt.block.sync")


def mem_fence() -> None:
    """Orders this thread's memory operations as seen by the other threads of its block (no waiting)."""
    _s.emit("block_fence", what="qd.simt.block.mem_fence")


def mem_sync() -> None:
    """Deprecated name of `mem_fence`."""
    warnings.warn("qd.simt.block.mem_sync() is deprecated; use qd.simt.block.mem_fence() instead.",
                  DeprecationWarning, stacklevel=2)
    mem_fence()


def thread_idx() -> Any:
    """This thread's index in its block, in [0, block_dim) (i32)."""
    return _s.emit("thread_idx", what="qd.simt.block.thread_idx")


def global_thread_idx() -> Any:
    """This thread's index in the whole launch (i32)."""
    return _s.emit("global_thread_idx", what="qd.simt.block.global_thread_idx")


class SharedArray:
    """`qd.simt.block.SharedArray(shape, dtype)`: an array every thread of a block shares (CUDA `__shared__`,
    Vulkan/OpenCL workgroup memory), made inside a kernel; indexed like a field. Its contents start undefined and
    live as long as the block; use `sync()` between one thread's write and another's read."""

    _is_quadrants_class = True

    def __new__(cls, shape: Any, dtype: Any) -> Any:
        return _s.shared_array(shape, dtype)


def _counted(predicate: Any) -> Any:
    """The number of the block's threads whose `predicate` is nonzero, on every thread: a shared counter every
    thread zeroes (one value, so the race is benign) and counts into with an atomic add between barriers; the last
    barrier keeps a later call's zeroing from racing with this call's reads."""
    from qd import ir
    from qd.frontend import builtins as _bi

    flag = _e.cast_expr(_e.binary("ne", _s.as_i32(predicate), 0), dtypes.i32)
    cell = SharedArray((1,), dtypes.i32)
    b = _e.bld()
    b.emit(ir.GlobalStore, ptr=cell.ptrs([0])[0], value=b.const(dtypes.i32, 0))
    sync()
    _bi.atomic_add(cell.load([0]), flag)
    sync()
    n = cell.load([0])
    sync()
    return n


def sync_count_nonzero(predicate: Any) -> Any:
    """`sync()` that also gives, on every thread, how many of the block's threads have a nonzero `predicate`."""
    return _counted(predicate)


def sync_any_nonzero(predicate: Any) -> Any:
    """`sync()` that also gives 1 on every thread when some thread's `predicate` is nonzero, else 0."""
    return _e.cast_expr(_e.binary("gt", _counted(predicate), 0), dtypes.i32)


def sync_all_nonzero(predicate: Any) -> Any:
    """`sync()` that also gives 1 on every thread when every thread's `predicate` is nonzero, else 0."""
    return _e.cast_expr(_e.binary("eq", _counted(_e.binary("eq", _s.as_i32(predicate), 0)), 0), dtypes.i32)


# the block-wide reductions and scans are written on these and on qd.simt.subgroup (a module of their own)
from qd.lang.simt import block_reductions as _block_reductions
from qd.lang.simt.block_reductions import *

__all__ = ["sync", "mem_fence", "mem_sync", "thread_idx", "global_thread_idx", "SharedArray", "sync_count_nonzero",
           "sync_any_nonzero", "sync_all_nonzero"] + list(_block_reductions.__all__)
