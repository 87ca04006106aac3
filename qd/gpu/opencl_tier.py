"""The OpenCL tier's backend for the device runtime (`qd/runtime/device.py`, GPU.md; issue 14): an allocator, a
copy engine and a launcher over `pyopencl`, and the compiler from offloaded IR to OpenCL C
(`qd/gpu/opencl_c.py`).

Device: `QD_OPENCL_DEVICE` (an index into all devices of all platforms, or a substring of a device or platform
name), else the first GPU, else the first device. One context and one in-order queue (profiling on:
`kernel.stats["device_ms"]`). Programs are built with `-cl-fp32-correctly-rounded-divide-sqrt` (IEEE `/` and
sqrt on every tier); their binaries are kept in qd's offline cache (per source, options, device and driver).

A launch: the slot (status, print length, returns, context words; a host array with a device copy) is
copied in, temporaries are zero-filled, each task's kernel runs with (slot, its random key, the print buffer,
every buffer but `qd.simt` shared arrays) over groups of the task's local size, and the header (and the print buffer, where the kernel prints) is copied back; the last
copy's event is the launch's completion. Everything is on the one in-order queue.

A driver call that fails with anything but an OpenCL error status (`cl.Error`) threw through the driver: PoCL's
compiler, out of memory under a memory limit, throws `std::bad_alloc` through its C code and leaves its compiler
lock held, after which building a program or releasing one blocks forever (also at `qd.reset` and at exit).
The backend is then *broken*: every program it made is kept (never released), and a later compile raises at
once instead of blocking; kernels already built still launch.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd import ir
from qd.base.abi import HEADER_WORDS
from qd.codegen import cache
from qd.errors import QuadrantsCompilationError
from qd.gpu import opencl_c, opencl_simt
from qd.gpu.backend import DeviceBackend

LOCAL_SIZE = 256
BUILD_OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)  # IEEE `/` and sqrt on every tier (see opencl_c)
_serials = itertools.count(1)


@dataclass(frozen=True)
class Caps:
    int64_atomics: bool = True
    float64: bool = True


@dataclass
class Program:
    kernel: opencl_c.CLKernel
    program: Any
    kernels: list
    rng_words: list[int]
    compile_ms: float = 0.0
    from_cache: bool = False
    serial: int = field(default_factory=lambda: next(_serials))
    events: Any = None  # (first, last) kernel events of the last launch (`elapsed_ms`)
    # (cache dir, key) of the binary this program came from until its first launch was enqueued (PoCL compiles
    # the binary's kernels there): `cache.load_with(until_confirmed=True)`
    unconfirmed: tuple | None = None
    built: bool = False  # built from the source and not launched yet (`_trim_heap` after its first launch)


def _where(t: ir.Task, k: ir.KernelIR) -> str:
    loc = t.loc or k.loc
    return f"{loc.file}:{loc.line}: " if loc is not None else ""


class CompilerRefused(RuntimeError):
    """The driver's compiler refused a program (an OpenCL status: a bug in the generated source)."""


_kept: list = []  # driver objects never to be released (a broken driver blocks in their release)


def _keep_forever(obj: Any) -> None:
    """`obj` is never freed, not even at interpreter exit (its finaliser would call into a broken driver)."""
    _kept.append(obj)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim  # glibc
    except (AttributeError, OSError):
        return None


_malloc_trim_fn = _malloc_trim()


def _trim_heap() -> None:
    """Gives the free pages of the C heap back to the system (glibc's `malloc_trim`; elsewhere nothing). PoCL's
    compiler frees most of what a build allocates, but the pages stayed resident: 0.23 MB per kernel of 0.25
    (issue 27). Once per program built from source (2.5 ms with a 280 MB heap, of a 250-600 ms build)."""
    if _malloc_trim_fn is not None:
        _malloc_trim_fn(0)


class Buffer:
    """Device memory; with `host=True` also a host array (launch slots, print buffers) copied explicitly."""

    def __init__(self, cl: Any, ctx: Any, nbytes: int, host: bool) -> None:
        self.nbytes = max(8, (int(nbytes) + 7) & ~7)
        self.host = host
        self.address = 0  # (OpenCL 1.2 buffers have no device address: the launch passes them as arguments)
        self.dev = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, self.nbytes)
        self.arr = np.zeros(self.nbytes, np.uint8) if host else None

    def memory_view(self) -> memoryview:
        return memoryview(self.arr)

    def view(self, dtype: Any, n: int, offset: int = 0) -> np.ndarray:
        return np.frombuffer(self.arr, dtype=dtype, count=n, offset=offset)


def _choose_device(cl: Any) -> Any:
    devices = [d for p in cl.get_platforms() for d in p.get_devices()]
    if not devices:
        raise RuntimeError("no OpenCL device (install an OpenCL driver, e.g. PoCL: apt-get install pocl-opencl-icd)")
    want = os.environ.get("QD_OPENCL_DEVICE", "").strip()
    if want:
        if want.isdigit():
            if int(want) >= len(devices):
                raise RuntimeError(f"QD_OPENCL_DEVICE={want}, but there are {len(devices)} OpenCL devices")
            return devices[int(want)]
        hits = [d for d in devices if want.lower() in f"{d.platform.name} {d.name}".lower()]
        if not hits:
            raise RuntimeError(f"QD_OPENCL_DEVICE={want!r} names none of the OpenCL devices "
                               f"{[d.name for d in devices]}")
        return hits[0]
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


class OpenCLBackend(DeviceBackend):
    name = "opencl"

    def __init__(self) -> None:
        try:
            import pyopencl as cl
        except ImportError as e:
            raise RuntimeError(f"pyopencl is not installed ({e}; pip install \"qd-lang[opencl]\", and an OpenCL "
                               f"driver such as PoCL: apt-get install pocl-opencl-icd)") from None

        self.cl = cl
        self.device = _choose_device(cl)
        self.ctx = cl.Context([self.device])
        self._platform = str(self.device.platform.name).strip()  # (no driver call once it is broken)
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        ext = self.device.extensions
        self.caps = Caps(int64_atomics="cl_khr_int64_extended_atomics" in ext, float64="cl_khr_fp64" in ext)
        self.loop_limit = 0
        self.timestamps = True
        units = max(1, int(self.device.max_compute_units))
        self.max_groups = units * 8
        # a CPU device (PoCL) runs each work item's loop on one core: range tasks there give each item a
        # contiguous block of indices (`opencl_c.build(blocked=True)`), where grid-stride iterations would
        # stride by the grid through memory (W1 2^24 on 2 cores: 220 ms)
        self.blocked = bool(self.device.type & cl.device_type.CPU)
        self.group_limit = units * 64
        # a reducing task ends with one compare-and-swap loop per group on the one cell (OpenCL 1.2 has no float
        # atomics): on a GPU fewer, longer groups contend less (W2 2^24 on the H200's OpenCL: 0.37 ms of device
        # time at 8 groups per compute unit, 0.16 at 4, 0.098 at 2, 0.095 at 1)
        self.reduce_groups = self.max_groups if self.blocked else units * 2
        self.broken: str | None = None  # why the driver can no longer build or release programs (`_driver_threw`)
        # every program made, by serial (kept for ever once the driver is broken)
        self._programs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        # the group's local-memory tree (barriers) only on a GPU: on a CPU device the work items of a group run
        # in turn on one core (the tree gains nothing), and PoCL 3.1 miscompiles a barrier after a data-dependent
        # loop holding a compare-and-swap loop (a wild read; issue 27 item 10)
        self.group_reduce = not self.blocked
        self._dummy = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, 8)

    @property
    def device_name(self) -> str:
        return str(self.device.name).strip()

    @property
    def subgroup_size(self) -> int:
        """`qd.simt.subgroup.group_size()` here: the emulated subgroup's lanes (`qd/gpu/opencl_simt.py`), the same
        on every device and kernel."""
        return opencl_simt.SUBGROUP

    def device_caps(self) -> dict[str, int]:
        """Quadrants' `DeviceCapability` values (named after SPIR-V features): what this tier supports here
        (float atomics through compare-and-swap loops)."""
        out = {"spirv_version=66304": 1, "spirv_version=66560": 1, "spirv_version=66816": 1}
        have = {"int8": 1, "int16": 1, "int64": 1, "float16": 1, "float64": int(self.caps.float64),
                "atomic_int64": int(self.caps.int64_atomics), "physical_storage_buffer": 1, "subgroup_basic": 0,
                "subgroup_arithmetic": 0}
        out.update({f"spirv_has_{k}": v for k, v in have.items()})
        for kind in ("float", "float64"):
            for suffix in ("", "_add", "_minmax"):
                out[f"spirv_has_atomic_{kind}{suffix}"] = int(kind == "float" or self.caps.float64)
        return out

    def max_shared_memory_bytes(self) -> int:
        """`CL_DEVICE_LOCAL_MEM_SIZE`: the local memory a work-group may use."""
        return int(self.device.local_mem_size)

    # ------------------------------------------------------------ memory
    def alloc(self, nbytes: int, host: bool = False) -> Buffer:
        try:
            return Buffer(self.cl, self.ctx, nbytes, host)
        except self.cl.Error as e:
            raise MemoryError(f"qd: OpenCL device {self.device_name} could not allocate a buffer of {int(nbytes)} "
                              f"bytes ({e}; its largest buffer is {int(self.device.max_mem_alloc_size)} bytes, its "
                              f"memory {int(self.device.global_mem_size)}): use smaller fields or ndarrays") from None

    def free(self, buf: Buffer) -> None:
        buf.dev.release()

    def upload(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        if data.nbytes:
            self.cl.enqueue_copy(self.queue, buf.dev, data, dst_offset=offset, is_blocking=True)

    def download(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        out = arr.reshape(-1).view(np.uint8)
        if out.nbytes:
            self.cl.enqueue_copy(self.queue, out, buf.dev, src_offset=offset, is_blocking=True)

    def fill(self, buf: Buffer, nbytes: int, pattern: int) -> Any:
        words = (int(nbytes) + 3) // 4
        return self.cl.enqueue_fill_buffer(self.queue, buf.dev, np.uint32(pattern & 0xFFFFFFFF), 0, 4 * words)

    # ------------------------------------------------------------ code
    def compile(self, k: ir.KernelIR, fast_math: bool, print_words: int, cache_dir: str | None = None) -> Program:
        t0 = time.perf_counter()
        ck = opencl_c.build(k, fast_math, print_words, LOCAL_SIZE, self.blocked, self.caps.int64_atomics,
                            self.group_reduce)
        if ck.uses_fp64 and not self.caps.float64:
            from qd.errors import QuadrantsTypeError

            raise QuadrantsTypeError(f"kernel {k.name} uses f64, which OpenCL device {self.device_name} lacks "
                                     f"(no cl_khr_fp64)")
        self._check_groups(k, ck)
        if self.broken is not None:
            from qd.errors import QuadrantsRuntimeError

            raise QuadrantsRuntimeError(f"qd: cannot compile kernel {k.name} on OpenCL: {self.broken}")
        try:
            program, unconfirmed = self._program(k.name, ck.source, cache_dir)
            kernels = [getattr(program, t.name) for t in ck.tasks]
            self._check_kernel_groups(k, ck, kernels)
        except (self.cl.Error, CompilerRefused):
            raise
        except QuadrantsCompilationError:
            raise
        except Exception as e:  # noqa: BLE001  thrown through the driver: see the module docstring
            raise self._driver_threw(e, f"building kernel {k.name}") from None
        base = HEADER_WORDS + ck.nrets + len(ck.ctx)
        ck.ctx = list(ck.ctx) + [("rng", n) for n in range(len(ck.tasks))]
        return Program(ck, program, kernels, [base + n for n in range(len(ck.tasks))],
                       compile_ms=(time.perf_counter() - t0) * 1e3, from_cache=unconfirmed is not None,
                       unconfirmed=unconfirmed, built=unconfirmed is None)

    def _check_groups(self, k: ir.KernelIR, ck: opencl_c.CLKernel) -> None:
        """Each task's group fits the device: its local size (`qd.loop_config(block_dim=...)`) and its `__local`
        memory (shared arrays, subgroup scratch, reduction trees), else a `QuadrantsCompilationError`."""
        limit, most = int(self.device.local_mem_size), int(self.device.max_work_group_size)
        for t in ck.tasks:
            if t.local_bytes > limit:
                raise QuadrantsCompilationError(
                    f"{_where(t.task, k)}kernel {k.name}: a block of {t.local_size} threads needs {t.local_bytes} "
                    f"bytes of shared (OpenCL __local) memory, but OpenCL device {self.device_name} has {limit} per "
                    f"block: use smaller qd.simt.block.SharedArray's")
            if t.local_size > most:
                raise QuadrantsCompilationError(
                    f"{_where(t.task, k)}kernel {k.name}: block_dim={t.local_size}, but OpenCL device "
                    f"{self.device_name} runs at most {most} work items per group: use a smaller "
                    f"qd.loop_config(block_dim=...)")

    def _check_kernel_groups(self, k: ir.KernelIR, ck: opencl_c.CLKernel, kernels: list) -> None:
        """A task's explicit block size is no more than its compiled kernel's limit (registers, local memory)."""
        info = self.cl.kernel_work_group_info.WORK_GROUP_SIZE
        for t, kern in zip(ck.tasks, kernels):
            if t.task.block_dim and t.local_size > int(kern.get_work_group_info(info, self.device)):
                most = int(kern.get_work_group_info(info, self.device))
                raise QuadrantsCompilationError(
                    f"{_where(t.task, k)}kernel {k.name}: block_dim={t.local_size}, but its compiled OpenCL kernel "
                    f"runs at most {most} work items per group on {self.device_name}: use "
                    f"qd.loop_config(block_dim={most}) or less")

    def _driver_threw(self, e: BaseException, what: str) -> BaseException:
        """The driver threw `e` (no OpenCL status) while `what`: it is broken from now on (the module docstring);
        every program it made is kept for ever. Returns the error to raise (a MemoryError stays one)."""
        if self.broken is None:
            self.broken = (f"the OpenCL driver ({self._platform}) failed with "
                           f"{type(e).__name__}: {e} while {what}; it cannot build or release programs in this process "
                           f"any more (PoCL leaves its compiler locked): restart the process to compile new kernels; "
                           f"the kernels built before still run")
            for program in list(self._programs.values()):
                _keep_forever(program)
        return (MemoryError if isinstance(e, MemoryError) else RuntimeError)(f"qd: {self.broken}")

    def _new_program(self, *args: Any) -> Any:
        """`cl.Program(*args)`, recorded (`_driver_threw` keeps it for ever once the driver is broken)."""
        program = self.cl.Program(*args)
        self._programs[next(_serials)] = program
        return program

    def _program(self, name: str, source: str, cache_dir: str | None) -> tuple[Any, tuple | None]:
        """The built program of OpenCL C `source`, and where its binary came from the on-disk cache, (cache dir,
        key) (the entry is on probation until the first launch: `cache.load_with`). The cache (`cache_dir`, qd's
        offline cache) holds the driver's binary per source, options, device and driver: PoCL takes 0.6-0.7 s
        to build even a source it has built before, and 2-3 ms to load its binary. A binary the driver refuses
        is deleted and built again from the source; one that crashed a process (PoCL's loader asserts on a
        damaged binary) is deleted by the next."""
        opts = BUILD_OPTIONS
        key = None
        if cache_dir is not None:
            d = self.device
            ident = "\0".join([source, " ".join(opts), d.platform.name, d.platform.version, d.name, d.version,
                               d.driver_version])
            key = hashlib.sha256(ident.encode()).hexdigest()
            hit = cache.load_with(cache_dir, key, lambda binary, _: self._new_program(self.ctx, [d], [binary]).build(
                options=list(opts)), until_confirmed=True, refusals=(self.cl.Error,))
            if hit is not None:
                return hit, (cache_dir, key)
        try:
            program = self._new_program(self.ctx, source).build(options=list(opts))
        except self.cl.RuntimeError as e:
            raise CompilerRefused(f"qd: the OpenCL compiler refused kernel {name}: {e}") from None
        if key is not None:
            binary = program.get_info(self.cl.program_info.BINARIES)[0]
            if binary:
                cache.store(cache_dir, key, bytes(binary), None)
        return program, None

    def release(self, prog: Program) -> None:
        pass

    # ------------------------------------------------------------ launches
    def enqueue(self, prog: Program, slot: Buffer, groups: list[int], zero: list[tuple[Buffer, int]],
                streams: list | None = None, bufs: dict | None = None, printbuf: Buffer | None = None) -> Any:
        try:
            return self._enqueue(prog, slot, groups, zero, bufs, printbuf)
        except self.cl.Error:
            raise
        except Exception as e:  # noqa: BLE001  thrown through the driver (PoCL compiles at a first launch)
            raise self._driver_threw(e, "launching a kernel") from None

    def _enqueue(self, prog: Program, slot: Buffer, groups: list[int], zero: list[tuple[Buffer, int]],
                 bufs: dict | None, printbuf: Buffer | None) -> Any:
        cl, q, ck = self.cl, self.queue, prog.kernel
        nslot = 8 * ck.slot_words
        cl.enqueue_copy(q, slot.dev, slot.arr[:nslot], is_blocking=False)
        for buf, nbytes in zero:
            cl.enqueue_fill_buffer(q, buf.dev, np.uint8(0), 0, (int(nbytes) + 7) & ~7)
        words = slot.view(np.uint64, ck.slot_words)
        pbuf = printbuf.dev if printbuf is not None else self._dummy
        args = [bufs[b].dev for b in ck.bound]  # (shared arrays are the groups' own: not bound)
        first = last = None
        for n, (kern, t, g) in enumerate(zip(prog.kernels, ck.tasks, groups)):
            if g < 0:  # left out of this enqueue (a `qd.graph.do_while` launch enqueues its tasks in runs)
                continue
            kern.set_args(slot.dev, np.uint64(words[prog.rng_words[n]]), pbuf, *args)
            local = t.local_size
            ev = cl.enqueue_nd_range_kernel(q, kern, (max(1, g) * local,), (local,))
            first = first or ev
            last = ev
        prog.events = (first, last)
        if prog.unconfirmed is not None:  # the cached binary's kernels compiled and were enqueued: it is sound
            cache.confirm(*prog.unconfirmed)
            prog.unconfirmed = None
        if prog.built:  # the driver compiled the program, then its kernels (PoCL: at their first enqueue)
            prog.built = False
            _trim_heap()
        done = cl.enqueue_copy(q, slot.arr[:8 * (HEADER_WORDS + ck.nrets)], slot.dev, is_blocking=False)
        if printbuf is not None:
            done = cl.enqueue_copy(q, printbuf.arr, printbuf.dev, is_blocking=False)
        return done

    def elapsed_ms(self, prog: Program) -> float | None:
        if prog.events is None or not self.done(prog.events[1]):
            return None
        first, last = prog.events
        return (last.profile.end - first.profile.start) * 1e-6

    def done(self, work: Any) -> bool:
        return work.command_execution_status == self.cl.command_execution_status.COMPLETE

    def wait(self, work: Any) -> None:
        work.wait()


__all__ = ["OpenCLBackend", "Program"]
