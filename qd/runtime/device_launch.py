"""The launch path of the GPU tiers: bind a compiled kernel instance's buffers on the device, fill its slot,
enqueue it and return (DESIGN §6, GPU.md §1-3).

- Fields and ndarrays are bound through their mirrors (`qd/runtime/device.py`); a raw numpy array (or a
  torch CPU tensor) passed for an ndarray parameter, a counting kernel's output and the adstack meta words go
  through per-launch scratch buffers, copied in before, and back after when the kernel may write them (such
  a launch, one with return values, and every launch with `debug=True` (its checks raise at the launch, as
  in Quadrants) wait for their own completion).
- Offload temps are per-launch scratch, zero-filled on the device.
- Grid: a serial task is one invocation; a range task gets ceil(n / local size) workgroups, at most the
  backend's `group_limit` (`max_groups` for an adstack task, `reduce_groups` where the backend has it else
  `max_groups` for a reducing one; the grid-stride loop covers the rest),
  when its bounds are known on the host (constants, scalar arguments, shapes and integer ops over them), else
  `max_groups`; remembered per set of the values its bounds read.
- The slot (status, print length, returns, context words) is packed in one call; after completion two words
  (failure flag, print length) are read unless the kernel prints or returns.
- Adstack heaps: one row per launched invocation of the widest range task; sized exactly from live data
  (recognized `MaxOverRange`s by the generated reducer kernel on the device, the rest by the serial walk over
  host copies); above `HEAP_BUDGET` bytes the grid shrinks instead of failing. Heaps stay per kernel instance
  on the device and grow on demand.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from qd import _launch as _clib
from qd import ir
from qd.ad.adstack import OVERFLOW_KIND
from qd.ad.counting import COUNTS_KIND
from qd.base import abi, config, gcpause, scoped_profiler
from qd.base.abi import M64 as _M64
from qd.base.abi import register_bits
from qd.errors import QuadrantsRuntimeError
from qd.ops import Op
from qd.runtime import device
from qd.runtime import launch as _launch
from qd.runtime import launch_plan as _launch_plan
from qd.runtime.device import DeviceRuntime, Record
from qd.runtime.device_array import DeviceArray
from qd.runtime.status import check_error, decode_returns, flush_prints

HEAP_BUDGET = 1 << 30


def rng_base(seed: int, launch: int, task: int) -> int:
    """The key base of `task` (`abi.rng_key(seed, launch, task, 0)`): every tier draws the same numbers."""
    return abi.rng_key(seed, launch, task, 0)


class _State:
    """Per (kernel instance, device): the program, and the adstack heaps on the device."""

    def __init__(self, rt: DeviceRuntime, ck: Any, fast_math: bool) -> None:
        cfg = config.current()
        cache = (os.path.join(str(cfg.offline_cache_file_path), rt.backend.name) if cfg.offline_cache else None)
        # (the code generator allocates as the frontend does: `qd/base/gcpause.py`)
        with gcpause.paused(), scoped_profiler.phase(ck.ir.name, f"codegen {rt.backend.name}"):
            self.prog = rt.backend.compile(ck.ir, fast_math, abi.PRINT_WORDS, cache)
        self.heaps: dict[int, Any] = {}  # buffer index -> device heap
        self.launches = 0
        self.rt = rt
        sk = self.prog.kernel
        self.slot_key = ("slot", sk.slot_words)
        self.zeros = (0,) * (sk.slot_words - len(sk.ctx))  # status, print length, return values
        self.slot_format = struct.Struct(f"<{sk.slot_words}Q")
        self.ctx = [(_CTX_KINDS[key[0]], key[1] if len(key) > 1 else 0, key[2] if len(key) > 2 else 0)
                    for key in sk.ctx]
        # per task: the scalar arguments and shapes its bounds read, and the grid for each set of their values
        self.bound_leaves = [_leaves(t.task) if t.kind == "range" else None for t in sk.tasks]
        self.leafy = any(self.bound_leaves)  # False: one grid for every launch
        self.grids: dict[tuple, list[int]] = {}
        # per buffer: (index, its declaration, the kernel writes it, where its owner comes from: _FROM_*)
        self.sources = [(b, d, b in ck.written, _FROM_FIELD if d.kind == "field" else _FROM_ARG if d.kind == "ndarray"
                         else _UNBOUND if d.kind == "shared" else _FROM_NONE) for b, d in enumerate(ck.ir.buffers)]
        self.runner: Any = None  # the C launcher (`runner`): None before it is asked for, False where there is none
        # the context words by what they depend on (`_ctx_values`): the binding's (buffer addresses and shapes,
        # kept between launches that bind the same buffers) and each launch's own (arguments, random key, slot)
        self.ctx_bufs = [(i, a) for i, (kind, a, _) in enumerate(self.ctx) if kind == _BUF]
        self.ctx_shapes = [(i, a, b) for i, (kind, a, b) in enumerate(self.ctx) if kind == _SHAPE]
        self.ctx_per_launch = [(i, kind, a) for i, (kind, a, _) in enumerate(self.ctx)
                               if kind in (_ARG, _PRINT, _RNG, _SELF)]
        self.ctx_template = [a & _M64 if kind == _CONST else 0 for kind, a, _ in self.ctx]
        self.ctx_key: Any = None  # the binding the cached words were made for
        self.ctx_cached: list[int] = []
        ck.tier_stats = self.stats  # `kernel.stats` of this instance (qd/frontend/kernel.py)

    def stats(self) -> dict:
        arch = config.current().arch.name
        launches = self.launches + (self.runner.launches if self.runner else 0)
        return {"launches": {arch: launches}, "last_tier": arch, "compile_ms": self.prog.compile_ms,
                "from_cache": self.prog.from_cache, "device_ms": self.rt.backend.elapsed_ms(self.prog)}


# _UNBOUND: a `qd.simt.block.SharedArray` (each task declares its own workgroup array): no owner, no device buffer
_FROM_FIELD, _FROM_ARG, _FROM_NONE, _UNBOUND = range(4)


def _state(rt: DeviceRuntime, ck: Any) -> _State:
    cfg = config.current()
    key = (id(rt), bool(cfg.fast_math))
    if ck.device is None:
        ck.device = {}
    st = ck.device.get(key)
    if st is None:
        st = ck.device[key] = _State(rt, ck, bool(cfg.fast_math))
    return st


def launch(rt: DeviceRuntime, ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """Enqueues kernel instance `ck`; returns its return values (waiting for them) or None at once. Launches
    from several Python threads are serialised (one device queue, one list of pending records)."""
    if ck.written_args:  # a read-only numpy array the kernel writes: refused before anything is copied in
        _launch.check_writeable(ck, args)
    with rt.lock:
        return _launch_locked(rt, ck, bindings, args)


class DeviceTier:
    """The tier of a GPU arch (`qd.runtime.tiers.Tier`): launches enqueued on its device's runtime (over the
    arch's `qd.gpu.backend.DeviceBackend`), plans that check calls in C and launch through the backend's C
    launcher where it has one."""

    def __init__(self, name: str) -> None:
        self.name = name

    def compile(self, ck: Any) -> Any:
        rt = device.runtime(self.name)
        with rt.lock:
            return _state(rt, ck).prog

    def plan(self, ck: Any, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
        return _launch_plan.arm_device(ck, sig, values, bindings, guards, device.runtime(self.name))

    def launch(self, ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
        return launch(device.runtime(self.name), ck, bindings, args)


def tier_of(arch: Any) -> DeviceTier:
    """The device tier of GPU arch `arch` (`qd.runtime.tiers.base_tier` asks)."""
    return DeviceTier(arch.name)


POLL_EVERY = 8  # launches in flight before a launch reads the finished ones (recycling their slots)


def _launch_locked(rt: DeviceRuntime, ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    cfg = config.current()
    if len(rt.pending) >= POLL_EVERY:  # each poll reads fences: every launch doing it cost ~2 us of a 15 us launch
        rt.poll()
    plan = ck.adstack
    if plan is not None and plan.counter is not None and not cfg.ad_stack_size:
        _launch._count_while_loops(plan, bindings, args)
    st = ck.device.get((id(rt), bool(cfg.fast_math))) if ck.device else None
    if st is None:
        st = _state(rt, ck)
    sk = st.prog.kernel
    lb = _Binding(rt)
    owners = []
    for b, decl, written, src in st.sources:
        owner = bindings[b] if src == _FROM_FIELD else args[decl.arg] if src == _FROM_ARG else None
        owners.append(owner)
        if src == _UNBOUND:  # (its extents are constants; a tier may still read them among its context words)
            lb.shapes[b] = tuple(decl.shape) + tuple(decl.elem_shape)
            continue
        if owner is not None and hasattr(owner, "_mirror"):  # a field or qd ndarray: its device copy
            m = owner._mirror
            arr = owner._arr
            if m is None or m.host_dirty or owner.escaped or m.rt is not rt or m.nbytes != arr.nbytes:
                m = rt.mirror_of(owner)  # (made, or brought up to date)
            lb.bufs[b] = m.buf
            lb.shapes[b] = arr.shape
        elif isinstance(owner, DeviceArray):  # another library's device array: used in place
            lb.bufs[b] = owner
            lb.shapes[b] = owner.shape
            if owner.stream is not None:
                lb.streams.append(owner.stream)
        else:
            lb.bind(b, decl, owner, ck, written)
    groups = st.grids.get(()) if not st.leafy else None
    if groups is None:
        groups = _grid_of(rt, st, args, lb.shapes)
    if plan is not None:  # a heap row per invocation: a bounded grid, each invocation runs several indices
        groups = [min(g, rt.backend.max_groups) for g in groups]
        groups = _bind_adstack(rt, st, ck, lb, owners, args, groups, sk)
    free = rt.pool.get(st.slot_key)
    slot = free.pop() if free else rt.backend.alloc(8 * sk.slot_words, host=True)
    lb.release.append((st.slot_key, slot))
    printbuf = None
    if sk.prints:
        printbuf = rt.take(("print",), lambda: rt.backend.alloc(8 * abi.PRINT_WORDS, host=True))
        lb.release.append((("print",), printbuf))
    launch_id = _clib.next_launch_id()  # every launch takes one, on every tier: the same random numbers
    ctx = _ctx_values(st, ck.ir, lb, args, printbuf, int(cfg.random_seed) & _M64, launch_id, slot)
    st.slot_format.pack_into(slot.memory_view(), 0, *st.zeros, *ctx)
    if ck.ir.task_loops:
        work = _enqueue_runs(rt, st, ck.ir, slot, groups, lb, printbuf)
    else:
        work = rt.backend.enqueue(st.prog, slot, groups, lb.zero, lb.streams, lb.bufs, printbuf)
    for b in ck.written:
        owner = owners[b]
        if getattr(owner, "_mirror", None) is not None:
            owner._bump_device()
    out: list = []
    st.launches += 1
    rec = Record(work, lambda: _finish(ck, sk, slot, printbuf, lb, out, owners, args), lb.release)
    rt.submit(rec)
    if lb.copy_back or ck.ir.rets or cfg.debug:  # debug: checks raise at the launch (Quadrants, Taichi)
        rt.sync()
        return out[0] if out else None
    return None


def _enqueue_runs(rt: DeviceRuntime, st: _State, k: ir.KernelIR, slot: Any, groups: list[int], lb: _Binding,
                  printbuf: Any) -> Any:
    """A launch with `qd.graph.do_while` loops (`KernelIR.task_loops`): its tasks enqueued in runs, the tasks of a
    run in order; after a loop's last task the device is waited for and the loop's counter read back to decide
    whether its tasks run again (`ir.task_order`). One slot, one binding: temporaries are zeroed by the first run
    only, so values crossing tasks survive the iterations. Returns the last run's work."""
    if len(groups) != len(k.tasks):
        raise QuadrantsRuntimeError(f"kernel {k.name}: the device program has {len(groups)} tasks where the IR has "
                                    f"{len(k.tasks)}: its qd.graph.do_while loops cannot be followed")
    run: list[int] = []
    state: dict[str, Any] = {"work": None, "zero": lb.zero}

    def flush() -> None:
        if run:
            chosen = set(run)  # a negative group count leaves a task out of an enqueue (`DeviceBackend.enqueue`)
            mask = [g if t in chosen else -1 for t, g in enumerate(groups)]
            state["work"] = rt.backend.enqueue(st.prog, slot, mask, state["zero"], lb.streams, lb.bufs, printbuf)
            state["zero"] = []
            run.clear()

    def counter(b: int) -> int:
        flush()
        if state["work"] is not None:
            rt.backend.wait(state["work"])
        if _FLAG_AND_PRINTS.unpack_from(slot.memory_view())[0]:  # a check failed: no more runs (`_finish` raises)
            raise _Stopped
        out = np.zeros(1, k.buffers[b].dtype.np_dtype)
        rt.backend.download(lb.bufs[b], out)
        return int(out[0])

    try:
        for t in ir.task_order(len(groups), k.task_loops, counter):
            run.append(t)  # noqa: PERF402  (not a copy: `counter` empties `run` as the order advances)
    except _Stopped:
        return state["work"]
    flush()
    return state["work"]


class _Stopped(Exception):
    """A task of a `qd.graph.do_while` launch failed a check: the loop stops there (its error is raised after)."""


def runner(rt: DeviceRuntime, ck: Any, bindings: Sequence[Any], params: list[int]) -> Any:
    """The C launcher (`qd._launch.CudaRunner`) of instance `ck` for its launch plan under the live config, or
    None where its launches need this module's path: a backend without one (Vulkan), `debug`, adstacks,
    counting kernels, prints, return values, and buffers other than fields, ndarray parameters and temporaries.
    (`qd.graph.do_while` loops are the launcher's too: it reads their counters between runs of tasks.)
    `params`: the plan's parameter of each launch argument. Made once per program (`_State.runner`)."""
    cfg = config.current()
    make = rt.backend.runner
    if make is None or cfg.debug or ck.adstack is not None or ck.counts is not None or ck.ir.rets:
        return None
    with rt.lock:  # (the instance's device state is made and changed under the runtime's lock)
        st = _state(rt, ck)
        if st.runner is None:
            st.runner = _make_runner(rt, st, ck, bindings, params, make) or False
        return st.runner or None


def _make_runner(rt: DeviceRuntime, st: _State, ck: Any, bindings: Sequence[Any], params: list[int], make: Any) -> Any:
    sk = st.prog.kernel
    if sk.prints:
        return None
    buffers: list = []
    for b, decl, written, src in st.sources:
        if src == _FROM_FIELD:
            if not hasattr(bindings[b], "_mirror"):
                return None
            buffers.append((abi.S_FIELD, int(written), bindings[b]))
        elif src == _FROM_ARG:
            buffers.append((params[decl.arg], int(written), None))
        elif decl.kind in ("temp", "shared"):  # a block-shared array lives on the chip: a temporary of no bytes
            nbytes = int(np.prod(decl.shape, dtype=np.int64)) * decl.dtype.itemsize if decl.kind == "temp" else 0
            buffers.append((abi.S_TEMP, 0, (nbytes, tuple(decl.shape))))
        else:
            return None
    header = abi.HEADER_WORDS + sk.nrets
    w = abi.W_KINDS
    words = []
    for kind, a, b in st.ctx:
        if kind in (_BUF, _SHAPE, _ARG):
            words.append((w["buf" if kind == _BUF else "shape" if kind == _SHAPE else "arg"], a, b))
        elif kind == _SELF:  # the header (status, print length) is the runner's own; the rest the slot's twin
            words.append((w["status"] if a < header else w["twin"], a, 0))
        elif kind in (_CONST, _RNG):  # (the random key is a kernel parameter; its word is not read)
            words.append((w["const"], a if kind == _CONST else 0, 0))
        else:
            return None
    leaves = [(0, x[1], 0) if x[0] == "arg" else (1, x[1], x[2])
              for x in dict.fromkeys(x for lv in st.bound_leaves if lv for x in lv)]
    grids = [1] * len(sk.tasks) if leaves else _grid_of(rt, st, [], {})

    def regrid(launch_args: list, shapes: dict) -> list[int]:
        return _grid_of(rt, st, launch_args, shapes)

    def on_error(status: np.ndarray) -> BaseException:
        return check_error(ck.ir, sk.check_args, status)
    loops = [(lp.first, lp.end, lp.cond, ck.ir.buffers[lp.cond].dtype.itemsize, _graphable(ck.ir, lp))
             for lp in ck.ir.task_loops]
    if loops and len(sk.tasks) != len(ck.ir.tasks):  # (the loops index the IR's tasks; `_enqueue_runs` refuses)
        return None
    return make(st.prog, grids, buffers, words, leaves, regrid, on_error, rt, _clib, loops, whole=_whole(ck.ir, loops))


def _whole(k: ir.KernelIR, loops: list) -> bool:
    """Whether a `@qd.kernel(graph=True)` kernel may launch as one CUDA graph (`qd/gpu/cuda_graphs.py`): every loop
    may be a graph, and no task draws `qd.random` (a graph replays the random key it was made with)."""
    return k.graph and all(lp[4] for lp in loops) and not any(isinstance(s, ir.RandomValue) for s in ir.walk_kernel(k))


def _graphable(k: ir.KernelIR, lp: ir.TaskLoop) -> bool:
    """Whether a `qd.graph.do_while` loop may run as a CUDA graph (`qd/gpu/cuda_graphs.py`): no other loop nests
    in it or around it."""
    return not any(o is not lp and o.first < lp.end and lp.first < o.end for o in k.task_loops)


class _Binding:
    """The device buffer, physical shape and copies of every buffer of one launch."""

    def __init__(self, rt: DeviceRuntime) -> None:
        self.rt = rt
        self.bufs: dict[int, Any] = {}
        self.shapes: dict[int, tuple] = {}
        self.release: list = []
        self.zero: list = []
        self.copy_back: list = []  # (host array, device buffer)
        self.streams: list = []  # the streams of device arrays used in place (their producers work there)

    def bind(self, b: int, decl: ir.BufferDecl, owner: Any, ck: Any, written: bool) -> None:
        """Buffer `b` of a launch, other than a field or qd ndarray (bound by `_launch_locked` itself)."""
        if owner is not None:
            self.raw(b, _launch._array_of(owner), written)
        elif decl.kind == COUNTS_KIND:
            self.raw(b, ck.counts, True)
        elif decl.kind.startswith("adstack"):
            if ck.adstack is None:  # a kernel generated from a reverse kernel keeps the buffers, has no stacks
                self.raw(b, np.zeros(1, decl.dtype.np_dtype), False)
        else:
            nbytes = int(np.prod(decl.shape, dtype=np.int64)) * decl.dtype.itemsize
            key, buf = self.rt.scratch(nbytes)
            self.release.append((key, buf))
            self.zero.append((buf, nbytes))
            self.bufs[b] = buf
            self.shapes[b] = tuple(decl.shape)

    def raw(self, b: int, arr: np.ndarray, written: bool) -> None:
        if not arr.flags.c_contiguous:
            raise ValueError("qd: an array passed to a kernel on a GPU arch must be C-contiguous")
        key, buf = self.rt.scratch(arr.nbytes)
        self.release.append((key, buf))
        self.rt.backend.upload(buf, arr)
        self.bufs[b] = buf
        self.shapes[b] = arr.shape
        if written:
            self.copy_back.append((arr, buf))


_FLAG_AND_PRINTS = struct.Struct(f"<q{8 * (abi.PRINTLEN_WORD - 1)}xq")  # status word 0 and the print length
_BUF, _SHAPE, _ARG, _PRINT, _RNG, _SELF, _CONST = range(7)
# "self": the device address of a word of the slot's device copy (CUDA: the native Ctx points into it);
# "const": a fixed value
_CTX_KINDS = {"buf": _BUF, "shape": _SHAPE, "arg": _ARG, "print": _PRINT, "rng": _RNG, "self": _SELF,
              "const": _CONST}


def _ctx_values(st: _State, k: ir.KernelIR, lb: _Binding, args: Sequence[Any], printbuf: Any, seed: int,
                launch_id: int, slot: Any) -> list[int]:
    """The launch's context words (the kernel's `ctx` keys, decoded once into `st.ctx`), as u64 ints. The words
    of the binding (addresses, shapes) are made again only when a launch binds other buffers or shapes than the
    last one: a kernel over hundreds of arrays (Genesis' solver state) binds the same ones at every step."""
    bufs, shapes = lb.bufs, lb.shapes
    # (the addresses themselves, not the buffers: a kept key holds no memory alive)
    key = (tuple([bufs[a].address for _, a in st.ctx_bufs]), tuple([shapes[a] for _, a, _ in st.ctx_shapes]))
    if key != st.ctx_key:
        out = list(st.ctx_template)
        for (i, _), address in zip(st.ctx_bufs, key[0]):
            out[i] = address
        for (i, _, d), shape in zip(st.ctx_shapes, key[1]):
            out[i] = int(shape[d]) & _M64 if d < len(shape) else 0
        st.ctx_key, st.ctx_cached = key, out
    out = list(st.ctx_cached)
    for i, kind, a in st.ctx_per_launch:
        if kind == _ARG:
            out[i] = register_bits(k.args[a].dtype, args[a]) & _M64
        elif kind == _RNG:
            out[i] = rng_base(seed, launch_id, a)
        elif kind == _SELF:
            out[i] = slot.twin_address + 8 * a
        else:  # _PRINT
            out[i] = printbuf.address
    return out


def _finish(ck: Any, sk: Any, slot: Any, printbuf: Any, lb: _Binding, out: list, owners: list,
            args: Sequence[Any]) -> BaseException | None:
    """After the launch completed: copies back, prints, return values; the error its checks recorded."""
    for arr, buf in lb.copy_back:
        lb.rt.backend.download(buf, arr)
    mem = slot.memory_view()
    failed, plen = _FLAG_AND_PRINTS.unpack_from(mem)
    if not (failed or plen or ck.ir.rets or printbuf is not None):  # the common case: two words read
        return None
    words = np.array(mem[:8 * (abi.HEADER_WORDS + len(ck.ir.rets))]).view(np.int64)
    status = words[:abi.STATUS_WORDS]
    plen = int(words[abi.PRINTLEN_WORD])
    if printbuf is not None and (plen or status[abi.STATUS_DROPPED]):
        flush_prints(ck.ir, sk.prints, printbuf.view(np.int64, abi.PRINT_WORDS), plen, int(status[abi.STATUS_DROPPED]))
    if status[abi.STATUS_FLAG]:
        check, tid = int(status[abi.STATUS_CHECK]), int(status[abi.STATUS_TID])
        if check == abi.LOOP_LIMIT:
            return _loop_limit_error(ck, lb.rt.backend.loop_limit, tid)
        decl = ck.ir.checks[check]
        if decl.kind == OVERFLOW_KIND and ck.adstack is not None:
            forced = int(config.current().ad_stack_size or 0)
            arrays = [getattr(o, "arr", o) for o in owners]
            count, cap = int(status[abi.STATUS_ARGS]), int(status[abi.STATUS_ARGS + 1])
            return ck.adstack.overflow_error(decl, count, cap, tid, forced, arrays, args)
        return check_error(ck.ir, sk.check_args, status)
    if ck.ir.rets:
        rets = words[abi.HEADER_WORDS:abi.HEADER_WORDS + len(ck.ir.rets)]
        out.append(decode_returns(ck.ir.rets, rets.view(np.uint64)))
    return None


def _loop_limit_error(ck: Any, limit: int, tid: int) -> QuadrantsRuntimeError:
    where = f" (kernel at {ck.ir.loc.file}:{ck.ir.loc.line})" if ck.ir.loc else ""
    return QuadrantsRuntimeError(
        f"kernel {ck.ir.name}: thread {tid} reached the Vulkan driver's loop limit ({limit} loop iterations per "
        f"invocation, all loops together; llvmpipe/lavapipe ends loops there without an error, so qd stops the "
        f"launch instead of returning a wrong result). Run this kernel on a GPU or on qd.cpu, or split its long "
        f"loops over parallel iterations{where}.")


# ------------------------------------------------------------------ grid

_HOST_OPS = {Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
             Op.MIN: min, Op.MAX: max,
             Op.FLOORDIV: lambda a, b: a // b if b else 0, Op.MOD: lambda a, b: a % b if b else 0}


def _host_value(v: ir.Value, args: Sequence[Any], shapes: dict, memo: dict) -> int | None:
    """An integer value of a task prologue computed on the host, or None when it needs the device."""
    if v in memo:
        return memo[v]
    r: int | None = None
    if isinstance(v, ir.Const) and v.dtype.is_int:
        r = int(v.value)
    elif isinstance(v, ir.ArgLoad) and v.dtype.is_int:
        r = int(args[v.index])
    elif isinstance(v, ir.ExternalShape):
        r = int(shapes[v.buffer][v.axis]) if v.buffer in shapes else None
    elif isinstance(v, ir.OpStmt) and v.dtype.is_int:
        xs = [_host_value(a, args, shapes, memo) for a in v.args]
        if all(x is not None for x in xs) and all(a.dtype.is_int for a in v.args):
            if v.op is Op.CAST:
                r = xs[0]
            elif v.op in _HOST_OPS:
                r = _HOST_OPS[v.op](*xs)
            if r is not None:
                bits = v.dtype.bits
                r &= (1 << bits) - 1
                if v.dtype.is_signed and r >> (bits - 1):
                    r -= 1 << bits
    memo[v] = r
    return r


def _leaves(t: ir.Task) -> tuple:
    """What range task `t`'s bounds read that may change between launches: ("arg", i) and ("shape", b, axis)."""
    out: list = []

    def visit(v: ir.Value) -> None:
        if isinstance(v, ir.ArgLoad):
            out.append(("arg", v.index))
        elif isinstance(v, ir.ExternalShape):
            out.append(("shape", v.buffer, v.axis))
        elif isinstance(v, ir.OpStmt):
            for a in v.args:
                visit(a)
    visit(t.begin)
    visit(t.end)
    return tuple(dict.fromkeys(out))


def _grid_of(rt: DeviceRuntime, st: _State, args: Sequence[Any], shapes: dict) -> list[int]:
    """Workgroups of every task, remembered per set of values its bounds read (`_State.bound_leaves`)."""
    key = tuple(tuple(args[x[1]] if x[0] == "arg" else shapes.get(x[1], (None,) * (x[2] + 1))[x[2]] for x in lv)
                for lv in st.bound_leaves if lv)
    g = st.grids.get(key)
    if g is None:
        g = [1 if t.kind == "serial" else _grid(rt, t, args, shapes) for t in st.prog.kernel.tasks]
        if len(st.grids) > 64:
            st.grids.clear()
        st.grids[key] = g
    return g


def _grid(rt: DeviceRuntime, st: Any, args: Sequence[Any], shapes: dict) -> int:
    memo: dict = {}
    t = st.task
    lo, hi = _host_value(t.begin, args, shapes, memo), _host_value(t.end, args, shapes, memo)
    b = rt.backend
    if lo is None or hi is None:
        return b.max_groups
    want = -(-(hi - lo) // st.local_size)
    # (a backend whose float atomics are compare-and-swap loops bounds a reducing task's groups lower: one
    # atomic per group meets the others at the one cell)
    g = min((b.reduce_groups or b.max_groups) if st.reduces else b.group_limit, want)
    if b.loop_limit:  # leave most of a driver's loop budget to the body's own loops
        g = max(g, min(want, b.group_limit, -(-want // (b.loop_limit // 16))))
    return max(1, g)


# ------------------------------------------------------------------ adstack

def _bind_adstack(rt: DeviceRuntime, st: _State, ck: Any, lb: _Binding, owners: list, args: Sequence[Any],
                  groups: list[int], sk: Any) -> list[int]:
    """Sizes the stacks from live data, lays out one heap row per launched invocation (fewer invocations
    when the heap would pass `HEAP_BUDGET`), the rows interleaved (an invocation's slots are `widest` words
    apart: a subgroup's pushes and pops are adjacent), binds the meta words and the heaps; returns the grid."""
    plan = ck.adstack
    forced = int(config.current().ad_stack_size or 0)
    from qd.runtime import adstack_heap

    # recognized specs run on the device (the reducer task): 64-bit atomic max where the device has it (and
    # QD_MAXREDUCER is not task32), else the u32 one with its overflow word
    plan.device, plan.wide = True, rt.backend.caps.int64_atomics and adstack_heap.MAXREDUCER_WIDE
    sizes = plan.sizes_for(owners, list(owners), args, forced)
    meta, stride = plan.meta_for(sizes)
    per_thread = sum(n * dt.itemsize for dt, n in stride.items())
    widest = max(g * t.local_size for g, t in zip(groups, sk.tasks))
    if per_thread * widest > HEAP_BUDGET:
        groups = [g if t.kind == "serial" else min(g, max(1, HEAP_BUDGET // (per_thread * t.local_size)))
                  for g, t in zip(groups, sk.tasks)]
        widest = max(g * t.local_size for g, t in zip(groups, sk.tasks))
    meta, _ = plan.meta_for(sizes, rows=widest)
    lb.raw(plan.meta, meta, False)
    for dt, b in plan.heap_of.items():
        need = max(1, widest * stride.get(dt, 0)) * dt.itemsize
        heap = st.heaps.get(b)
        if heap is None or heap.nbytes < need:
            if heap is not None:
                rt.free_later(heap)
            heap = st.heaps[b] = rt.backend.alloc(max(need, 2 * (heap.nbytes if heap is not None else 0)))
        lb.bufs[b] = heap
        lb.shapes[b] = (heap.nbytes // dt.itemsize,)
    return groups


__all__ = ["DeviceTier", "launch", "rng_base", "tier_of"]
