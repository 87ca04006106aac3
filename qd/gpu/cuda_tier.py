"""The CUDA tier's backend for the device runtime (`qd/runtime/device.py`, DESIGN §10): an allocator, a copy
engine and a launcher over the CUDA driver (`qd/gpu/cuda_driver.py`), and the compiler from offloaded IR to
PTX through the shared LLVM code generator (`qd/jit/nvptx.py`).

The launch slot. `qd/runtime/device_launch.py` packs a launch's words into a pinned host slot laid out as
the Vulkan tier's: 16 status words, the print length, the return words, then the context words this
backend's kernel asks for (`CudaKernel.ctx`): the native `Ctx` (14 words whose pointers point into the
slot's device copy: `("self", word)`), the buffer addresses, each buffer's extents, the scalar argument
words and each task's random key. `enqueue` copies the slot to its device twin, launches every task's
kernel with (the device address of the twin's Ctx, random key of the task), copies the header back
(status, print length, returns) and records an event; every step is on qd's one stream, so launches and
copies stay in order.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd import _logging, ir
from qd.base.abi import CTX_FIELDS, HEADER_WORDS, MAX_NDIM, PRINTLEN_WORD, S_TEMP
from qd.codegen import cache
from qd.codegen.reduce import find_reductions
from qd.gpu.backend import DeviceBackend
from qd.gpu.cuda_driver import ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, CudaError, Driver
from qd.jit import nvptx, nvptx_simt

LOCAL_SIZE = 256
RING_SLOTS = 4  # a C launcher's slots: a launch whose context words changed takes the next one
_serials = itertools.count(1)


@dataclass(frozen=True)
class Caps:
    int64_atomics: bool = True


@dataclass
class CudaTask:
    kind: str
    local_size: int
    task: ir.Task
    reduces: bool = False
    shared_bytes: int = 0  # dynamic shared memory a launch asks for (`qd.simt` arrays past 48 KiB)


@dataclass
class CudaKernel:
    """What the device runtime needs of a compiled kernel (the fields `SpirvKernel` has)."""

    tasks: list[CudaTask]
    ctx: list[tuple]  # context word keys after the header and the return words (see the module docstring)
    prints: list
    check_args: list
    nrets: int

    @property
    def slot_words(self) -> int:
        return HEADER_WORDS + self.nrets + len(self.ctx)


@dataclass
class Program:
    kernel: CudaKernel
    modules: list  # the driver's modules (a large kernel is several: `qd.jit.nvptx.task_groups`)
    functions: list
    rng_words: list[int]  # per task: the slot word holding its random key
    compile_ms: float = 0.0
    from_cache: bool = False
    serial: int = field(default_factory=lambda: next(_serials))
    events: Any = None  # (start, end) of the last launch, for `elapsed_ms`
    name: str = ""  # the kernel's (messages)


SMALL = 4096  # host buffers and twins up to this size come from an `_Arena`
_CHUNK = 1 << 20
_GRAIN = 256


class _Arena:
    """Small blocks (launch slots, their device twins, status words) carved from 1 MiB allocations and reused by
    size: a pinned allocation costs 0.1-0.3 ms, and the first launch of every new kernel needs a slot and a
    twin. `chunk()` makes one allocation: (host pointer or 0, device address)."""

    def __init__(self, chunk: Any) -> None:
        self.chunk = chunk
        self.free: dict[int, list] = {}
        self.cur: list = [0, 0, _CHUNK]  # host pointer, device address, bytes used
        self.lock = threading.Lock()

    def take(self, nbytes: int) -> tuple[int, int]:
        size = (nbytes + _GRAIN - 1) & ~(_GRAIN - 1)
        with self.lock:
            spare = self.free.get(size)
            if spare:
                return spare.pop()
            if self.cur[2] + size > _CHUNK:
                self.cur = [*self.chunk(), 0]
            host, addr, used = self.cur
            self.cur[2] += size
            return (host + used if host else 0), addr + used

    def give(self, nbytes: int, block: tuple[int, int]) -> None:
        with self.lock:
            self.free.setdefault((nbytes + _GRAIN - 1) & ~(_GRAIN - 1), []).append(block)


class Buffer:
    """Device memory, or (`host=True`) pinned host memory the device reaches through its mapping. A host
    buffer used as a launch slot gets a device twin (`twin_address`) the kernels read their context from.
    Small host buffers and twins come from the backend's arenas (`_Arena`)."""

    def __init__(self, drv: Driver, nbytes: int, host: bool, arenas: tuple | None = None) -> None:
        self.drv, self.nbytes, self.host = drv, max(4, (int(nbytes) + 3) & ~3), host
        self.serial = next(_serials)
        self._twin = 0
        self._arenas = arenas if self.nbytes <= SMALL else None  # (pinned host, device)
        if host and self._arenas:
            self.host_ptr, self.address = self._arenas[0].take(self.nbytes)
        elif host:
            self.host_ptr, self.address = drv.host_alloc(self.nbytes)
        else:
            self.host_ptr, self.address = 0, drv.alloc(self.nbytes)

    @property
    def twin_address(self) -> int:
        if not self._twin:
            self._twin = self._arenas[1].take(self.nbytes)[1] if self._arenas else self.drv.alloc(self.nbytes)
        return self._twin

    def memory_view(self) -> memoryview:
        mv = self.__dict__.get("_mv")
        if mv is None:
            mv = self._mv = memoryview((ctypes.c_ubyte * self.nbytes).from_address(self.host_ptr)).cast("B")
        return mv

    def view(self, dtype: Any, n: int, offset: int = 0) -> np.ndarray:
        return np.frombuffer(self.memory_view(), dtype=dtype, count=n, offset=offset)

    def destroy(self) -> None:
        self.__dict__.pop("_mv", None)
        arenas = self._arenas
        if self.host and arenas:
            arenas[0].give(self.nbytes, (self.host_ptr, self.address))
        elif self.host:
            self.drv.host_free(self.host_ptr)
        else:
            self.drv.free(self.address)
        if self._twin and arenas:
            arenas[1].give(self.nbytes, (0, self._twin))
        elif self._twin:
            self.drv.free(self._twin)
        self.host_ptr = self.address = self._twin = 0


def _warm_up_wanted(cfg: Any) -> bool:
    """Whether to load LLVM and run the NVPTX pipeline and the driver's compiler once in the background when the
    device opens (`nvptx.warm_up`): a cold first compile then costs ~50 ms instead of ~100-400. Only where
    kernels will likely be compiled: no disk cache, or an empty one. Where the cache holds compiled kernels,
    loading LLVM in the background only slows the first calls (its load holds the interpreter lock: measured
    on an H200, a warm first call took 26-52 ms with it and 8-12 ms without). `QD_CUDA_WARM_UP=1` / `0`
    decide instead."""
    forced = os.environ.get("QD_CUDA_WARM_UP", "")
    if forced:
        return forced != "0"
    if not cfg.offline_cache:
        return True
    where = os.path.join(str(cfg.offline_cache_file_path), "cuda")
    try:
        with os.scandir(where) as entries:
            return not any(True for _ in entries)
    except OSError:
        return True


class CudaBackend(DeviceBackend):
    name = "cuda"
    subgroup_size = 32  # a warp

    def __init__(self) -> None:
        self.drv = Driver()
        self.torch_cuda_device = self.drv.device
        self.arch = f"sm_{self.drv.cc[0]}{self.drv.cc[1]}"
        self.caps = Caps()
        self.loop_limit = 0
        self.timestamps = True  # events time every launch (`elapsed_ms`)
        self._events: list = []  # completion events, back from `wait` (every work item is waited for once)
        # grid-stride loops: enough blocks to fill the device (measured later per workload; see DESIGN §10)
        self.max_groups = self.drv.sms * 8
        self.group_limit = self.drv.sms * 32
        self._warming = False
        self.arenas = (_Arena(lambda: self.drv.host_alloc(_CHUNK)), _Arena(lambda: (0, self.drv.alloc(_CHUNK))))

    def started(self, cfg: Any) -> None:
        """A program starts on this device (`qd.init`): the compilers are warmed in the background, once, where
        its kernels will likely be compiled (`_warm_up_wanted`)."""
        if not self._warming and _warm_up_wanted(cfg):
            self._warming = True
            threading.Thread(target=self._warm_up, name="qd-cuda-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            ptx = nvptx.warm_up(self.arch)
            self.drv.unload(self.drv.load_module(ptx.encode() + b"\0"))
        except Exception:  # noqa: BLE001  only a head start: the first compile reports what is wrong
            return

    @property
    def device_name(self) -> str:
        return self.drv.name

    def device_caps(self) -> dict[str, int]:
        """Quadrants' `DeviceCapability` values (named after SPIR-V features; a CUDA device has them all)."""
        out = {"spirv_version=66304": 1, "spirv_version=66560": 1, "spirv_version=66816": 1}
        for name in ("int8", "int16", "int64", "float16", "float64", "atomic_int64", "physical_storage_buffer",
                     "subgroup_basic", "subgroup_arithmetic"):
            out[f"spirv_has_{name}"] = 1
        for kind in ("float16", "float", "float64"):
            for suffix in ("", "_add", "_minmax"):
                out[f"spirv_has_atomic_{kind}{suffix}"] = 1
        return out

    def max_shared_memory_bytes(self) -> int:
        """The opt-in maximum per block (Quadrants' `cuda_max_shared_memory_bytes` reads the same attribute)."""
        return self.drv.attribute(ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

    # ------------------------------------------------------------ memory
    def alloc(self, nbytes: int, host: bool = False) -> Buffer:
        return Buffer(self.drv, nbytes, host, self.arenas)

    def free(self, buf: Buffer) -> None:
        buf.destroy()

    def upload(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        """Host -> device at byte `offset`, complete when it returns."""
        data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        if data.nbytes:
            self.drv.htod(buf.address + offset, data.ctypes.data, data.nbytes)
            self.drv.synchronize()

    def download(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        """Device (from byte `offset`) -> host into C-contiguous `arr`, complete when it returns."""
        out = arr.reshape(-1).view(np.uint8)
        if out.nbytes:
            self.drv.dtoh(out.ctypes.data, buf.address + offset, out.nbytes)
            self.drv.synchronize()

    def fill(self, buf: Buffer, nbytes: int, pattern: int) -> Any:
        """Enqueues filling the first `nbytes` (rounded up to 4) of `buf` with the 32-bit `pattern`."""
        self.drv.memset32(buf.address, pattern & 0xFFFFFFFF, (int(nbytes) + 3) // 4)
        return self._completion()

    def synchronize(self) -> None:
        """Waits for everything enqueued on qd's stream (the C launcher's launches have no events of their own)."""
        self.drv.synchronize()

    def fence(self) -> Any:
        """A completion event for the work enqueued so far (give it back through `wait`)."""
        return self._completion()

    def _completion(self) -> Any:
        """An event recorded after the work enqueued so far (pooled: `wait` gives it back)."""
        ev = self._events.pop() if self._events else self.drv.event()
        self.drv.record(ev)
        return ev

    # ------------------------------------------------------------ code
    def compile(self, k: ir.KernelIR, fast_math: bool, print_words: int, cache_dir: str | None = None) -> Program:
        t0 = time.perf_counter()
        nvptx_simt.check_shared_bytes(k, self.max_shared_memory_bytes())
        pk = self._ptx(k, fast_math, cache_dir)
        try:
            modules = self._modules(pk, cache_dir)
        except Exception:  # the driver refuses PTX from the disk cache: deleted, and made afresh
            if not pk.from_cache:
                raise
            cache.discard(cache_dir, pk.cache_key)
            pk = self._ptx(k, fast_math, cache_dir)
            modules = self._modules(pk, cache_dir)
        functions = [self.drv.function(modules[m], sym) for (_, sym), m in zip(pk.tasks, pk.module_of)]
        ctx, rng_words = _context(k, print_words)
        tasks = [CudaTask(t.kind, t.block_dim or LOCAL_SIZE, t, reduces=_reduces(t), shared_bytes=n)
                 for t, n in zip(k.tasks, nvptx_simt.dynamic_bytes(k))]
        for fn, t in zip(functions, tasks):
            if t.shared_bytes > nvptx_simt.STATIC_SHARED_BYTES:  # past the default: the function opts in
                self.drv.allow_dynamic_shared(fn, t.shared_bytes)
        sk = CudaKernel(tasks, ctx, pk.prints, pk.check_args, len(k.rets))
        return Program(sk, modules, functions, rng_words, compile_ms=(time.perf_counter() - t0) * 1e3,
                       from_cache=pk.from_cache, name=k.name)

    def _ptx(self, k: ir.KernelIR, fast_math: bool, cache_dir: str | None) -> nvptx.PtxKernel:
        """`k`'s PTX, each module made fresh going on to the driver as soon as it is there (`compile_ptx`'s
        `each`: a large kernel's first modules are in the driver's compiler while later ones are still in LLVM)."""
        return nvptx.compile_ptx(k, fast_math, self.arch, cache_dir, each=lambda ptx: self._module(ptx, cache_dir),
                                 undo=self.drv.unload)

    def _modules(self, pk: nvptx.PtxKernel, cache_dir: str | None) -> list:
        """The driver's modules of `pk`: those `compile_ptx` already made, or (PTX from the disk cache) made side by
        side (`nvptx.pool`: the driver's compiler releases the GIL); all or none (`nvptx.all_or_none`: a module
        made before another failed is unloaded)."""
        if pk.made is not None:
            return pk.made
        texts = pk.modules
        if len(texts) == 1:
            return [self._module(texts[0], cache_dir)]
        futures = [nvptx.pool().submit(self._module, text, cache_dir) for text in texts]
        return nvptx.all_or_none(futures, self.drv.unload)

    def _module(self, ptx: str, cache_dir: str | None) -> Any:
        """The driver's module of `ptx`: from its cubin in the on-disk cache (made once, by the driver's compiler
        for this device and driver; a cubin the driver refuses is deleted and made again), or from the PTX itself
        where there is no cache."""
        text = ptx.encode() + b"\0"
        if cache_dir is None:
            return self.drv.load_module(text)
        key = hashlib.sha256(b"cubin\0%s\0%d\0%s" % (self.arch.encode(), self.drv.version, text)).hexdigest()
        module = cache.load_with(cache_dir, key, lambda cubin, _: self.drv.load_module(_sound_cubin(cubin)))
        if module is not None:
            return module
        cubin = self.drv.cubin(text)
        cache.store(cache_dir, key, cubin, None)
        return self.drv.load_module(cubin)

    def release(self, prog: Program) -> None:
        for m in prog.modules:
            self.drv.unload(m)

    # ------------------------------------------------------------ launches
    def enqueue(self, prog: Program, slot: Buffer, groups: list[int], zero: list[tuple[Buffer, int]],
                streams: list | None = None, bufs: dict | None = None, printbuf: Buffer | None = None) -> Any:
        """Enqueues one launch on qd's stream (see the module docstring). `streams`: those of device arrays used
        in place (CUDA array interface values): the launch waits for their work, and they for the launch."""
        drv = self.drv
        for s in streams or ():
            drv.wait_event(None, self._marker(s))
        for buf, nbytes in zero:
            drv.memset8(buf.address, 0, nbytes)
        sk = prog.kernel
        twin = slot.twin_address
        drv.htod(twin, slot.host_ptr, 8 * sk.slot_words)
        if prog.events is None:
            prog.events = (drv.event(timing=True), drv.event(timing=True))
        drv.record(prog.events[0])
        params = _launch_params(slot, prog)
        mv = slot.memory_view()
        for n, (fn, g, t) in enumerate(zip(prog.functions, groups, sk.tasks)):
            if g < 0:  # left out of this enqueue (a `qd.graph.do_while` launch enqueues its tasks in runs)
                continue
            key, p = params[n]
            key.value = _U64.unpack_from(mv, 8 * prog.rng_words[n])[0]
            drv.launch(fn, max(1, g), t.local_size, p, t.shared_bytes)
        drv.record(prog.events[1])
        drv.dtoh(slot.host_ptr, twin, 8 * (HEADER_WORDS + sk.nrets))
        done = self._completion()
        for s in streams or ():
            drv.wait_event(s, done)
        return done

    def runner(self, prog: Program, grids: list, buffers: list, words: list, leaves: list, regrid: Any,
               on_error: Any, rt: Any, clib: Any, loops: list, whole: bool = False) -> Any:
        """The C launcher of a program (`qd._launch.CudaRunner`; `qd/runtime/device_launch.py`'s `runner` says
        what `grids`, `buffers`, `words` and `leaves` hold; `clib`: the runtime's `qd._launch`, whose `CudaRunner`
        it makes): its ring of slots (pinned host memory, a device twin and an event each), its status words in
        mapped pinned memory, and its temporaries on the device. `whole`: launch the kernel as one CUDA graph
        where it can (`@qd.kernel(graph=True)`, `qd/gpu/cuda_graphs.py`)."""
        from qd.gpu.cuda_driver import check

        drv, sk = self.drv, prog.kernel
        keep: list = []
        ring = []
        for _ in range(RING_SLOTS):
            slot = self.alloc(8 * sk.slot_words, host=True)
            ev = drv.event()
            keep += [slot, ev]
            ring.append((slot.host_ptr, slot.twin_address, ev.value))
        status = self.alloc(8 * (HEADER_WORDS + sk.nrets), host=True)
        status.view(np.int64, HEADER_WORDS + sk.nrets)[:] = 0
        keep.append(status)
        bufs = []
        for src, written, what in buffers:
            if src == S_TEMP:
                nbytes, shape = what
                address = 0
                if nbytes:  # (a block-shared array has none: it lives on the chip)
                    temp = self.alloc(nbytes)
                    keep.append(temp)
                    address = temp.address
                what = (address, nbytes, shape)
            bufs.append((src, written, what))
        if prog.events is None:
            prog.events = (drv.event(timing=True), drv.event(timing=True))
        fnptrs = {name: ctypes.cast(getattr(drv.lib, name), ctypes.c_void_p).value
                  for name in ("cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize",
                               "cuMemsetD8Async", "cuStreamSynchronize", "cuMemcpyDtoH_v2", "cuGraphLaunch")}
        tasks = [(fn.value, t.local_size, g, t.shared_bytes) for fn, t, g in zip(prog.functions, sk.tasks, grids)]
        gslot, make_graph, make_whole = self._graphs(prog, loops, status.address, keep, whole)
        return clib.CudaRunner(rt, fnptrs, drv.stream.value, check, drv.enter, tasks, bufs, words,
                                  sk.slot_words - len(sk.ctx), leaves, regrid, ring,
                                  (status.host_ptr, status.address, HEADER_WORDS + sk.nrets),
                                  (prog.events[0].value, prog.events[1].value), on_error, keep, loops, gslot,
                                  make_graph, make_whole)

    def _graphs(self, prog: Program, loops: list, status: int, keep: list, whole: bool) -> tuple[int, Any, Any]:
        """(the device slot the graphs read, the runner's `make_graph` for its loops, its `make_whole` for the whole
        kernel), with 0 / None for what cannot be a graph here (`qd/gpu/cuda_graphs.py`)."""
        from qd.gpu import cuda_graphs

        loop_graphs = any(lp[4] for lp in loops)
        if not loop_graphs and not whole:
            return 0, None, None
        why = cuda_graphs.unavailable(self.drv, loops=bool(loops))
        if why is not None:
            _logging.debug(f"[CUDA] {prog.name}: no CUDA graphs ({why}); its tasks launch one by one and its "
                           f"qd.graph.do_while loops wait for the stream")
            return 0, None, None
        slot = self.alloc(8 * prog.kernel.slot_words)
        graphs: dict = {}
        keep += [slot, graphs]
        tasks = prog.kernel.tasks

        def task(t: int, grid: int) -> tuple:
            return (prog.functions[t].value, tasks[t].local_size, grid, tasks[t].shared_bytes)

        def remake(key: Any, items: list, ctx_addr: int, instead: str) -> int:
            old = graphs.pop(key, None)
            if old is not None:
                old.close()
            try:
                graphs[key] = cuda_graphs.KernelGraph(self.drv, self.arch, items, ctx_addr, status)
            except CudaError as e:
                _logging.warn(f"[CUDA] {prog.name}: could not make a CUDA graph; {instead}: {e}")
                return 0
            return graphs[key].exec.value

        def make_graph(lp: int, grids: list, counter: int, ctx_addr: int) -> int:
            first, end, _, nbytes, _ = loops[lp]
            items = [("loop", [task(t, g) for t, g in zip(range(first, end), grids)], counter, nbytes)]
            return remake(lp, items, ctx_addr, "its qd.graph.do_while loop waits for the stream after each iteration")

        def make_whole(grids: list, counters: list, ctx_addr: int) -> int:
            starts = {lp[0]: j for j, lp in enumerate(loops)}
            items, t = [], 0
            while t < len(tasks):
                j = starts.get(t)
                if j is None:
                    items.append(("task", *task(t, grids[t])))
                    t += 1
                else:
                    first, end, _, nbytes, _ = loops[j]
                    items.append(("loop", [task(u, grids[u]) for u in range(first, end)], counters[j], nbytes))
                    t = end
            return remake("whole", items, ctx_addr, "its tasks launch one by one")

        return slot.address, make_graph if loop_graphs else None, make_whole if whole else None

    def _marker(self, stream: int) -> Any:
        """A pooled event recorded on `stream` (another library's) now. It goes back to the pool at once: the
        caller enqueues its wait next (nothing records in between, under the runtime's lock), and a wait keeps
        the state the event had when it was enqueued."""
        ev = self._events.pop() if self._events else self.drv.event()
        self.drv.record(ev, stream)
        self._events.append(ev)
        return ev

    def elapsed_ms(self, prog: Program) -> float | None:
        if prog.events is None or not self.drv.done(prog.events[1]):
            return None
        return self.drv.elapsed_ms(*prog.events)

    def done(self, work: Any) -> bool:
        return self.drv.done(work)

    def wait(self, work: Any) -> None:
        self.drv.wait(work)
        self._events.append(work)


_U64 = struct.Struct("<Q")


def _launch_params(slot: Buffer, prog: Program) -> list:
    """Per task: (its random key's ctypes word, the kernel parameter array), kept on the slot per program."""
    cache = slot.__dict__.setdefault("params", {})
    out = cache.get(prog.serial)
    if out is None:
        ctx = ctypes.c_uint64(slot.twin_address + 8 * (HEADER_WORDS + prog.kernel.nrets))
        out = []
        for _ in prog.functions:
            key = ctypes.c_uint64(0)
            out.append((key, (ctypes.c_void_p * 2)(ctypes.addressof(ctx), ctypes.addressof(key))))
        out.append((ctx, None))  # keeps the context word alive with the arrays pointing at it
        cache[prog.serial] = out
    return out


def _reduces(t: ir.Task) -> bool:
    return t.kind == "range" and bool(find_reductions(t))


def _context(k: ir.KernelIR, print_words: int) -> tuple[list[tuple], list[int]]:
    """The context word keys of kernel `k` (see the module docstring) and each task's random-key word."""
    base = HEADER_WORDS + len(k.rets)  # slot word of the first context word
    nbuf = len(k.buffers)
    off_bufs = base + len(CTX_FIELDS)
    off_shapes = off_bufs + nbuf
    off_args = off_shapes + nbuf * MAX_NDIM
    ctx_struct = {"bufs": ("self", off_bufs), "shapes": ("self", off_shapes), "rets": ("self", HEADER_WORDS),
                  "status": ("self", 0), "printbuf": ("print",) if _prints(k) else ("const", 0),
                  "printlen": ("self", PRINTLEN_WORD), "printcap": ("const", print_words), "args": ("self", off_args)}
    keys = [ctx_struct.get(f, ("const", 0)) for f in CTX_FIELDS]
    keys += [("buf", b) if d.kind != "shared" else ("const", 0) for b, d in enumerate(k.buffers)]
    for b, d in enumerate(k.buffers):
        keys += [("shape", b, a) if a < _ndim(d) else ("const", 0) for a in range(MAX_NDIM)]
    keys += [("arg", i) if a.kind == "scalar" else ("const", 0) for i, a in enumerate(k.args)]
    rng = [base + len(keys) + n for n in range(len(k.tasks))]
    keys += [("rng", n) for n in range(len(k.tasks))]
    return keys, rng


def _prints(k: ir.KernelIR) -> bool:
    return any(isinstance(s, ir.Print) for s in ir.walk_kernel(k))


def _ndim(d: ir.BufferDecl) -> int:
    if d.kind == "ndarray":
        return d.total_ndim
    if d.kind.startswith("adstack"):
        return 1
    return len(d.shape) + len(d.elem_shape)


__all__ = ["CudaBackend", "CudaKernel", "Program"]


def _sound_cubin(data: bytes) -> bytes:
    """`data` if it is a whole 64-bit ELF file (headers, program segments and sections inside it), else ValueError:
    the driver may load a cut cubin whose missing tail it never reads until a kernel needs it (a cache entry
    truncated on disk with a digest to match)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("no 64-bit little-endian ELF file")
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    if phoff + phentsize * phnum > len(data) or shoff + shentsize * shnum > len(data):
        raise ValueError("the ELF header tables lie outside the file")
    for i in range(phnum):
        off, _vaddr, _paddr, filesz = struct.unpack_from("<QQQQ", data, phoff + phentsize * i + 8)
        if off + filesz > len(data):
            raise ValueError(f"program segment {i} lies outside the file")
    for i in range(shnum):
        typ, = struct.unpack_from("<I", data, shoff + shentsize * i + 4)
        off, size = struct.unpack_from("<QQ", data, shoff + shentsize * i + 24)
        if typ != 8 and off + size > len(data):  # SHT_NOBITS takes no bytes
            raise ValueError(f"section {i} lies outside the file")
    return data
