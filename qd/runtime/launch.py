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
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from qd import ir
from qd.errors import QuadrantsAssertionError, QuadrantsRuntimeError
from qd.bytecode.lower import KernelCode, lower_kernel
from qd.runtime import config
from qd.types import dtypes as T

_launch_ids = itertools.count()
_PRINT_WORDS = 1 << 16
MAX_NDIM = 8


@dataclass
class CompiledKernel:
    """A kernel instance ready to launch: its offloaded IR and its tier's code."""

    ir: ir.KernelIR
    code: KernelCode
    written: frozenset  # buffer indices the kernel may write (generation counters)
    consts: np.ndarray  # (regs, bits) of constants, applied to every register template


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


def _scalar_bits(dtype: T.DataType, value: Any) -> int:
    from qd.bytecode.lower import _bits

    if dtype.is_float:
        return _bits(dtype, float(value))
    return _bits(dtype, int(value))


def _bind(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]):
    """Buffer addresses and the shape table (elements, C order; element axes after outer axes)."""
    k = ck.ir
    arrays: list[np.ndarray] = []
    for b, decl in enumerate(k.buffers):
        if decl.kind == "field":
            arr = _array_of(bindings[b])
        elif decl.kind == "ndarray":
            arr = _array_of(args[decl.arg])
        else:
            arr = np.zeros(decl.shape, dtype=decl.dtype.np_dtype)
        arrays.append(arr)
    addrs = np.array([a.ctypes.data for a in arrays] or [0], dtype=np.uint64)
    shapes = np.zeros(max(1, len(arrays)) * MAX_NDIM, dtype=np.int64)
    for b, a in enumerate(arrays):
        shapes[b * MAX_NDIM: b * MAX_NDIM + a.ndim] = a.shape
    return arrays, addrs, shapes


def _template(ck: CompiledKernel, shapes: np.ndarray, args: Sequence[Any]) -> np.ndarray:
    code = ck.code
    tpl = np.zeros(max(1, code.nregs), dtype=np.uint64)
    if len(ck.consts):
        tpl[ck.consts[:, 0].astype(np.int64)] = ck.consts[:, 1]
    for reg, index, dtype in code.arg_regs:
        tpl[reg] = _scalar_bits(dtype, args[index])
    for (buf, axis), reg in code.shape_regs:
        tpl[reg] = np.int64(shapes[buf * MAX_NDIM + axis]).view(np.uint64)
    for (buf, axis), reg in code.stride_regs:
        row = shapes[buf * MAX_NDIM: buf * MAX_NDIM + MAX_NDIM]
        stride = int(np.prod([d for d in row[axis + 1:] if d])) if axis + 1 < MAX_NDIM else 1
        tpl[reg] = np.uint64(stride)
    return tpl


def launch(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """Runs a compiled kernel instance on the interpreter; raises what its checks recorded."""
    from qd import _interp

    cfg = config.current()
    arrays, addrs, shapes = _bind(ck, bindings, args)
    tpl = _template(ck, shapes, args)
    status = np.zeros(16, dtype=np.int64)
    printbuf = np.zeros(_PRINT_WORDS, dtype=np.int64)
    printlen = np.zeros(1, dtype=np.int64)
    rets = np.zeros(max(1, len(ck.ir.rets)), dtype=np.uint64)
    st = _interp.Launch(addrs, shapes, ck.code.operands, status, printbuf, printlen, rets,
                        int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, next(_launch_ids),
                        int(getattr(cfg, "cpu_max_num_threads", 1) or 1))
    rc = 0
    for task_id, t in enumerate(ck.code.tasks):
        if t.kind == "serial":
            rc = st.run_serial(t.code, tpl, task_id)
        else:
            rc = st.run_range(t.prologue, t.code, tpl, t.var, t.begin, t.end, task_id)
        if rc != 0:
            break
    _bump_written(ck, bindings, args)
    _flush_prints(ck, printbuf, int(printlen[0]), int(status[8]))
    if rc == 1 or status[0]:
        raise _check_error(ck, status)
    if rc < 0:
        raise QuadrantsRuntimeError(f"kernel {ck.ir.name}: interpreter hit an invalid opcode")
    return _returns(ck, rets)


def _bump_written(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> None:
    for b in ck.written:
        decl = ck.ir.buffers[b]
        owner = bindings[b] if decl.kind == "field" else (args[decl.arg] if decl.kind == "ndarray" else None)
        bump = getattr(owner, "_bump", None)
        if bump is not None:
            bump()


def _decode(dtype: T.DataType, bits: int) -> Any:
    raw = np.array([bits], dtype=np.int64)
    if dtype.is_float:
        if dtype.bits == 64:
            return float(raw.view(np.float64)[0])
        return float(raw.view(np.float32)[0])
    if dtype.is_signed:
        return int(raw[0])
    return int(raw.view(np.uint64)[0])


def _returns(ck: CompiledKernel, rets: np.ndarray) -> Any:
    vals = [_decode(dt, int(rets.view(np.int64)[i])) for i, dt in enumerate(ck.ir.rets)]
    vals = [dt.np_dtype.type(v) if dt.is_float and dt.bits < 64 else v for v, dt in zip(vals, ck.ir.rets)]
    vals = [float(v) if isinstance(v, np.floating) else v for v in vals]
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else tuple(vals)


def _format_value(dtype: T.DataType, bits: int, spec: str = "") -> str:
    """Quadrants' print format: floats `%f`, ints `%d`; a spec without a type letter (`.1`) means
    `f` for floats, as in Quadrants."""
    v = _decode(dtype, bits)
    if dtype.is_float:
        if not spec or not spec[-1].isalpha() or spec[-1] in "nN":
            spec = (spec or "") + "f"
        return format(v, spec)
    if spec and spec[-1] in "eEfFgG%":
        return format(float(v), spec)
    return format(v, spec)


def _flush_prints(ck: CompiledKernel, buf: np.ndarray, n: int, dropped: int) -> None:
    pos, out = 0, []
    n = min(n, len(buf))
    while pos + 3 <= n:
        pid, _tid, cnt = int(buf[pos]), int(buf[pos + 1]), int(buf[pos + 2])
        vals = iter(int(x) for x in buf[pos + 3: pos + 3 + cnt])
        items, fmts = ck.code.prints[pid]
        specs = iter(fmts)
        parts = [it if isinstance(it, str) else _format_value(it, next(vals), next(specs, ""))
                 for it in items]
        out.append("".join(parts))
        pos += 3 + cnt
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
    if dropped:
        sys.stdout.write(f"[qd] {dropped} print records of kernel {ck.ir.name} dropped (buffer full)\n")


def _check_error(ck: CompiledKernel, status: np.ndarray) -> Exception:
    check_id, tid, nargs = int(status[1]), int(status[2]), int(status[3])
    decl = ck.ir.checks[check_id]
    dtypes = ck.code.check_args[check_id] or ()
    vals = [_decode(dt, int(status[4 + i])) for i, dt in enumerate(dtypes[:nargs])]
    try:
        msg = decl.message.format(*vals, kernel=ck.ir.name, tid=tid)
    except (IndexError, KeyError, ValueError):
        msg = decl.message
    where = f"\n  at {decl.loc.file}:{decl.loc.line} (kernel {ck.ir.name}, thread {tid})" if decl.loc else ""
    return QuadrantsAssertionError(msg + where)


def sync() -> None:
    """Launches run synchronously on the CPU tiers: errors were raised at the launch already."""
