"""The launch path: compile a kernel instance's IR for a tier, bind its buffers and run it.

Contract used by the frontend (`qd/frontend/kernel.py`):

    ck = compile_kernel(ir)                     # passes + offload + tier lowering; cache per instance
    result = launch(ck, bindings, args)         # runs it, raises recorded errors, returns rets

- `ir` is a `KernelIR` fresh from the frontend (not yet offloaded).
- `bindings[b]` for every buffer `b` of kind 'field' is the Field object bound to it (it has `.arr`,
  a C-contiguous numpy array of shape `shape + elem_shape`, and `._bump()` for the generation
  counter); entries for other buffer kinds are None.
- `args[i]` per `ir.args[i]`: kind 'scalar' a Python/numpy number; kind 'ndarray' a C-contiguous
  numpy array whose shape is (outer axes..., *elem_shape), or an object with `.arr` like that (a
  qd Ndarray: its generation counter is bumped when the kernel writes it).
- Returns None, one value, or a tuple, per `ir.rets`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from qd import _interp, ir
from qd.errors import QuadrantsRuntimeError
from qd.bytecode.lower import KernelCode, lower_kernel, register_bits
from qd.runtime import config, program
from qd.runtime.status import PRINT_WORDS, STATUS_WORDS, check_error, decode_returns, flush_prints
from qd.types import dtypes as T

_launch_ids = itertools.count()
MAX_NDIM = 8


def _reset_launch_ids() -> None:
    """Launch numbers (a key of `qd.random`) count from 0 in every program, so that a program started
    with the same `random_seed` draws the same numbers, as in Quadrants."""
    global _launch_ids
    _launch_ids = itertools.count()


program.on_reset(_reset_launch_ids)


@dataclass
class CompiledKernel:
    """A kernel instance ready to launch: its offloaded IR and its tier's code."""

    ir: ir.KernelIR
    code: KernelCode
    written: frozenset  # buffer indices the kernel may write (generation counters)
    consts: np.ndarray  # (regs, bits) of constants, applied to every register template
    scratch: Any = None  # reusable launch buffers (`_Scratch`)
    tier: Any = None  # `qd.jit.tiering.TierState`: native code, background compile, launch counts


def compile_kernel(k: ir.KernelIR) -> CompiledKernel:
    """Runs the pass pipeline on a frontend kernel and lowers it for the interpreter."""
    from qd.passes.runner import default_pipeline, run_passes

    k = run_passes(k, default_pipeline(config.current()))
    code = lower_kernel(k)
    consts = np.array(code.consts, dtype=np.uint64).reshape(-1, 2)
    return CompiledKernel(k, code, _written_buffers(k), consts)


def _written_buffers(k: ir.KernelIR) -> frozenset:
    out = set()
    for s in ir.walk_kernel(k):
        if isinstance(s, (ir.GlobalStore, ir.AtomicRMW)):
            out.add(s.ptr.buffer)
    return frozenset(out)


def _array_of(obj: Any) -> np.ndarray:
    return obj.arr if hasattr(obj, "arr") else obj


class _Scratch:
    """Per-instance launch buffers, reused by consecutive launches (allocated again when a launch
    of the same instance is already running in another thread)."""

    def __init__(self, ck: "CompiledKernel") -> None:
        code = ck.code
        self.base = np.zeros(max(1, code.nregs), dtype=np.uint64)
        if len(ck.consts):
            self.base[ck.consts[:, 0].astype(np.int64)] = ck.consts[:, 1]
        self.status = np.zeros(STATUS_WORDS, dtype=np.int64)
        self.printbuf = np.empty(PRINT_WORDS, dtype=np.int64)
        self.printlen = np.zeros(1, dtype=np.int64)
        self.rets = np.zeros(max(1, len(ck.ir.rets)), dtype=np.uint64)
        self.busy = False


def _bind(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]):
    """Buffer addresses and the shape table (elements, C order; element axes after outer axes)."""
    arrays: list[np.ndarray] = []
    for b, decl in enumerate(ck.ir.buffers):
        if decl.kind == "field":
            arr = _array_of(bindings[b])
        elif decl.kind == "ndarray":
            arr = _array_of(args[decl.arg])
        else:
            arr = np.zeros(decl.shape, dtype=decl.dtype.np_dtype)
        arrays.append(arr)
    addrs = np.array([a.__array_interface__["data"][0] for a in arrays] or [0], dtype=np.uint64)
    shapes = np.zeros(max(1, len(arrays)) * MAX_NDIM, dtype=np.int64)
    for b, a in enumerate(arrays):
        shapes[b * MAX_NDIM: b * MAX_NDIM + a.ndim] = a.shape
    return arrays, addrs, shapes


def _template(ck: CompiledKernel, base: np.ndarray, shapes: np.ndarray, args: Sequence[Any]) -> np.ndarray:
    code = ck.code
    tpl = base.copy()
    for reg, index, dtype in code.arg_regs:
        tpl[reg] = register_bits(dtype, args[index])
    for (buf, axis), reg in code.shape_regs:
        tpl[reg] = int(shapes[buf * MAX_NDIM + axis]) & 0xFFFFFFFFFFFFFFFF
    for (buf, axis), reg in code.stride_regs:
        stride = 1
        for d in shapes[buf * MAX_NDIM + axis + 1: (buf + 1) * MAX_NDIM]:
            stride *= int(d) if d else 1
        tpl[reg] = stride
    return tpl


def launch(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """Runs a compiled kernel instance on the tier `qd.jit.tiering` picks (the interpreter or native
    code: same memory, same results); raises what its checks recorded."""
    from qd.jit import tiering

    cfg = config.current()
    sc = ck.scratch if ck.scratch is not None and not ck.scratch.busy else _Scratch(ck)
    ck.scratch = sc
    sc.busy = True
    try:
        arrays, addrs, shapes = _bind(ck, bindings, args)
        native = tiering.native_for(ck, arrays)
        sc.status[:] = 0
        sc.printlen[0] = 0
        st = _interp.Launch(addrs, shapes, ck.code.operands, sc.status, sc.printbuf, sc.printlen, sc.rets,
                            int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, next(_launch_ids),
                            int(cfg.cpu_max_num_threads or 1), _native_args(ck, args) if native else None)
        if native is not None:
            rc = _run_native(native, st)
            prints, check_args = native.prints, native.check_args
        else:
            rc = _run_tasks(ck, st, _template(ck, sc.base, shapes, args))
            prints, check_args = ck.code.prints, ck.code.check_args
        _bump_written(ck, bindings, args)
        flush_prints(ck.ir, prints, sc.printbuf, int(sc.printlen[0]), int(sc.status[8]))
        if rc == 1 or sc.status[0]:
            raise check_error(ck.ir, check_args, sc.status)
        if rc < 0:
            raise QuadrantsRuntimeError(f"kernel {ck.ir.name}: interpreter hit an invalid opcode")
        return decode_returns(ck.ir.rets, sc.rets)
    finally:
        sc.busy = False


def _native_args(ck: CompiledKernel, args: Sequence[Any]) -> np.ndarray:
    out = np.zeros(max(1, len(ck.ir.args)), dtype=np.uint64)
    for i, a in enumerate(ck.ir.args):
        if a.kind == "scalar":
            out[i] = register_bits(a.dtype, args[i])
    return out


def _run_native(native: Any, st: Any) -> int:
    rc = 0
    for task_id, t in enumerate(native.tasks):
        if t.kind == "serial":
            rc = st.run_native_serial(t.fn, task_id)
        else:
            rc = st.run_native_range(t.prologue, t.fn, task_id, t.min_parallel)
        if rc != 0:
            break
    return rc


def _run_tasks(ck: CompiledKernel, st: Any, tpl: np.ndarray) -> int:
    rc = 0
    for task_id, t in enumerate(ck.code.tasks):
        if t.kind == "serial":
            rc = st.run_serial(t.code, tpl, task_id)
        else:
            rc = st.run_range(t.prologue, t.code, tpl, t.var, t.begin, t.end, task_id, t.min_parallel)
        if rc != 0:
            break
    return rc


def _bump_written(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> None:
    for b in ck.written:
        decl = ck.ir.buffers[b]
        owner = bindings[b] if decl.kind == "field" else (args[decl.arg] if decl.kind == "ndarray" else None)
        bump = getattr(owner, "_bump", None)
        if bump is not None:
            bump()


def sync() -> None:
    """Launches run synchronously on the CPU tiers: errors were raised at the launch already."""
