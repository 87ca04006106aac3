"""The CUDA driver API through ctypes on `libcuda.so.1` (DESIGN §10, CUDA tier).

Why ctypes and not NVIDIA's `cuda-bindings`: the driver is all qd needs (PTX in, kernels out), ctypes needs
no package beyond the driver itself (which every CUDA machine has, while the bindings are a wheel pinned to a
CUDA major version), and a ctypes call costs about a microsecond where the bindings' Python wrappers cost
several: the hot path (`cuLaunchKernel`, async copies, events) is a handful of calls per launch. Every call is
checked; a failure raises `CudaError` with the driver's name and text for the code.

`Driver()` initialises the driver, picks the device (`QD_CUDA_DEVICE`, default 0), retains its primary
context (shared with torch and CuPy in the same process) and makes one stream for qd's work. The stream is a
blocking one: work on the legacy default stream (torch's and CuPy's unless a program picks another) runs
after qd's work enqueued before it, and qd's after theirs, so a tensor sharing qd's memory (`to_torch(copy=False)`)
is read and written in program order without a synchronisation of the program's own.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


CU_MEMHOSTALLOC_PORTABLE = 0x01
CU_MEMHOSTALLOC_DEVICEMAP = 0x02
CU_STREAM_DEFAULT = 0x0  # (not CU_STREAM_NON_BLOCKING: ordered with the legacy default stream)
CU_EVENT_DISABLE_TIMING = 0x2
CUDA_ERROR_NOT_READY = 600
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
CU_JIT_INPUT_PTX = 1
# cuDeviceGetAttribute
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_COMPUTE_CAPABILITY_MAJOR = 75
ATTR_COMPUTE_CAPABILITY_MINOR = 76
ATTR_MAX_THREADS_PER_MULTIPROCESSOR = 39
ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97  # what a block may opt in to (above the 48 KiB default)
FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8  # a function's dynamic shared memory ceiling (cuFuncSetAttribute)

# name -> argument types (all return CUresult, an int)
_PROTOS: dict[str, tuple] = {
    "cuInit": (c_uint,),
    "cuDeviceGetCount": (POINTER(c_int),),
    "cuDeviceGet": (POINTER(c_int), c_int),
    "cuDeviceGetName": (c_char_p, c_int, c_int),
    "cuDeviceGetAttribute": (POINTER(c_int), c_int, c_int),
    "cuDevicePrimaryCtxRetain": (POINTER(c_void_p), c_int),
    "cuCtxSetCurrent": (c_void_p,),
    "cuCtxSynchronize": (),
    "cuStreamCreate": (POINTER(c_void_p), c_uint),
    "cuStreamSynchronize": (c_void_p,),
    "cuMemAlloc_v2": (POINTER(c_uint64), c_size_t),
    "cuMemFree_v2": (c_uint64,),
    "cuMemHostAlloc": (POINTER(c_void_p), c_size_t, c_uint),
    "cuMemFreeHost": (c_void_p,),
    "cuMemHostGetDevicePointer_v2": (POINTER(c_uint64), c_void_p, c_uint),
    "cuMemcpyHtoDAsync_v2": (c_uint64, c_void_p, c_size_t, c_void_p),
    "cuMemcpyDtoHAsync_v2": (c_void_p, c_uint64, c_size_t, c_void_p),
    "cuMemcpyDtoH_v2": (c_void_p, c_uint64, c_size_t),
    "cuMemsetD8Async": (c_uint64, ctypes.c_ubyte, c_size_t, c_void_p),
    "cuMemsetD32Async": (c_uint64, c_uint, c_size_t, c_void_p),
    "cuModuleLoadDataEx": (POINTER(c_void_p), c_char_p, c_uint, c_void_p, c_void_p),
    "cuModuleUnload": (c_void_p,),
    "cuModuleGetFunction": (POINTER(c_void_p), c_void_p, c_char_p),
    "cuFuncSetAttribute": (c_void_p, c_int, c_int),
    "cuLaunchKernel": (c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p,
                       POINTER(c_void_p), c_void_p),
    "cuEventCreate": (POINTER(c_void_p), c_uint),
    "cuEventDestroy_v2": (c_void_p,),
    "cuEventRecord": (c_void_p, c_void_p),
    "cuEventQuery": (c_void_p,),
    "cuEventSynchronize": (c_void_p,),
    "cuStreamWaitEvent": (c_void_p, c_void_p, c_uint),
    "cuEventElapsedTime": (POINTER(ctypes.c_float), c_void_p, c_void_p),
    "cuLinkCreate_v2": (c_uint, c_void_p, c_void_p, POINTER(c_void_p)),
    "cuLinkAddData_v2": (c_void_p, c_int, c_void_p, c_size_t, c_char_p, c_uint, c_void_p, c_void_p),
    "cuLinkComplete": (c_void_p, POINTER(c_void_p), POINTER(c_size_t)),
    "cuLinkDestroy": (c_void_p,),
    "cuDriverGetVersion": (POINTER(c_int),),
    "cuGetErrorName": (c_int, POINTER(c_char_p)),
    "cuGetErrorString": (c_int, POINTER(c_char_p)),
}

_lib: Any = None
_load_error: str | None = None


def library() -> Any:
    """`libcuda.so.1` with the prototypes qd uses; CudaError saying why when there is no driver."""
    global _lib, _load_error
    if _lib is None and _load_error is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            _load_error = f"no CUDA driver (libcuda.so.1 could not be loaded: {e})"
        else:
            for name, args in _PROTOS.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = list(args), c_int
            _lib = lib
    if _lib is None:
        raise CudaError(_load_error)
    return _lib


def error_text(code: int) -> str:
    lib = library()
    name, text = c_char_p(), c_char_p()
    lib.cuGetErrorName(code, byref(name))
    lib.cuGetErrorString(code, byref(text))
    return f"{(name.value or b'?').decode()} ({code}): {(text.value or b'').decode()}"


def check(code: int, what: str) -> None:
    if code:
        raise CudaError(f"CUDA {what} failed: {error_text(code)}")


def _log_options() -> tuple[Any, Any, Any]:
    """(log buffer, option keys, option values) asking the driver's compiler for its error log."""
    log = ctypes.create_string_buffer(8192)
    opts = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
    vals = (c_void_p * 2)(ctypes.cast(log, c_void_p), c_void_p(8192))
    return log, opts, vals


class Driver:
    """The driver on one device: its primary context, one stream, and the calls the CUDA tier makes."""

    def __init__(self) -> None:
        lib = self.lib = library()
        check(lib.cuInit(0), "cuInit")
        n = c_int()
        check(lib.cuDeviceGetCount(byref(n)), "cuDeviceGetCount")
        index = int(os.environ.get("QD_CUDA_DEVICE", "0"))
        if n.value == 0:
            raise CudaError("the CUDA driver found no device")
        if not 0 <= index < n.value:
            raise CudaError(f"QD_CUDA_DEVICE={index}, but the CUDA driver sees {n.value} device(s)")
        dev = c_int()
        check(lib.cuDeviceGet(byref(dev), index), "cuDeviceGet")
        self.device = dev.value
        name = ctypes.create_string_buffer(256)
        check(lib.cuDeviceGetName(name, 256, self.device), "cuDeviceGetName")
        self.name = name.value.decode()
        self.cc = (self.attribute(ATTR_COMPUTE_CAPABILITY_MAJOR), self.attribute(ATTR_COMPUTE_CAPABILITY_MINOR))
        self.sms = self.attribute(ATTR_MULTIPROCESSOR_COUNT)
        version = c_int()
        check(lib.cuDriverGetVersion(byref(version)), "cuDriverGetVersion")
        self.version = version.value
        ctx = c_void_p()
        check(lib.cuDevicePrimaryCtxRetain(byref(ctx), self.device), "cuDevicePrimaryCtxRetain")
        self.ctx = ctx
        self._tls = threading.local()  # a context is current per thread: each thread makes it current once
        self.make_current()
        stream = c_void_p()
        check(lib.cuStreamCreate(byref(stream), CU_STREAM_DEFAULT), "cuStreamCreate")
        self.stream = stream

    def attribute(self, attr: int) -> int:
        v = c_int()
        check(self.lib.cuDeviceGetAttribute(byref(v), attr, self.device), "cuDeviceGetAttribute")
        return v.value

    def make_current(self) -> None:
        check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self._tls.current = True

    def enter(self) -> None:
        """Makes the context current in the calling thread (once per thread)."""
        if not getattr(self._tls, "current", False):
            self.make_current()

    # ------------------------------------------------------------ memory
    def alloc(self, nbytes: int) -> int:
        self.enter()
        p = c_uint64()
        check(self.lib.cuMemAlloc_v2(byref(p), max(1, nbytes)), f"cuMemAlloc ({nbytes} bytes)")
        return p.value

    def free(self, ptr: int) -> None:
        self.enter()
        check(self.lib.cuMemFree_v2(ptr), "cuMemFree")

    def host_alloc(self, nbytes: int) -> tuple[int, int]:
        """Pinned host memory mapped into the device's address space: (host pointer, device pointer)."""
        self.enter()
        p = c_void_p()
        check(self.lib.cuMemHostAlloc(byref(p), max(1, nbytes), CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
              f"cuMemHostAlloc ({nbytes} bytes)")
        d = c_uint64()
        check(self.lib.cuMemHostGetDevicePointer_v2(byref(d), p, 0), "cuMemHostGetDevicePointer")
        return p.value, d.value

    def host_free(self, ptr: int) -> None:
        self.enter()
        check(self.lib.cuMemFreeHost(c_void_p(ptr)), "cuMemFreeHost")

    def htod(self, dst: int, src: int, nbytes: int) -> None:
        self.enter()
        check(self.lib.cuMemcpyHtoDAsync_v2(dst, c_void_p(src), nbytes, self.stream), "cuMemcpyHtoDAsync")

    def dtoh(self, dst: int, src: int, nbytes: int) -> None:
        self.enter()
        check(self.lib.cuMemcpyDtoHAsync_v2(c_void_p(dst), src, nbytes, self.stream), "cuMemcpyDtoHAsync")

    def memset8(self, dst: int, value: int, nbytes: int) -> None:
        self.enter()
        check(self.lib.cuMemsetD8Async(dst, value, nbytes, self.stream), "cuMemsetD8Async")

    def memset32(self, dst: int, value: int, words: int) -> None:
        self.enter()
        check(self.lib.cuMemsetD32Async(dst, value, words, self.stream), "cuMemsetD32Async")

    def synchronize(self) -> None:
        self.enter()
        check(self.lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize (an earlier launch failed)")

    # ------------------------------------------------------------ modules and launches
    def load_module(self, image: bytes) -> Any:
        """A module from PTX text (NUL-terminated; the driver compiles it) or a cubin."""
        self.enter()
        mod = c_void_p()
        log, opts, vals = _log_options()
        rc = self.lib.cuModuleLoadDataEx(byref(mod), image, 2, opts, vals)
        if rc:
            raise CudaError(f"CUDA could not load a module ({error_text(rc)}): {log.value.decode(errors='replace')}")
        return mod

    def cubin(self, ptx: bytes) -> bytes:
        """The machine code of PTX text for this device (the driver's own compiler, as `load_module` runs it),
        kept by the caller so that a later process loads it without compiling."""
        self.enter()
        log, opts, vals = _log_options()
        state = c_void_p()
        check(self.lib.cuLinkCreate_v2(2, opts, vals, byref(state)), "cuLinkCreate")
        try:
            rc = self.lib.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, ptx, len(ptx), b"qd.ptx", 0, None, None)
            if rc:
                raise CudaError(f"CUDA could not compile PTX ({error_text(rc)}): "
                                f"{log.value.decode(errors='replace')}")
            out, size = c_void_p(), c_size_t()
            check(self.lib.cuLinkComplete(state, byref(out), byref(size)), "cuLinkComplete")
            return ctypes.string_at(out, size.value)  # owned by the link state: copied before it is destroyed
        finally:
            self.lib.cuLinkDestroy(state)

    def unload(self, mod: Any) -> None:
        self.enter()
        check(self.lib.cuModuleUnload(mod), "cuModuleUnload")

    def function(self, mod: Any, name: str) -> Any:
        self.enter()
        fn = c_void_p()
        check(self.lib.cuModuleGetFunction(byref(fn), mod, name.encode()), f"cuModuleGetFunction({name})")
        return fn

    def allow_dynamic_shared(self, fn: Any, nbytes: int) -> None:
        """Lets `fn`'s launches ask for `nbytes` of dynamic shared memory (needed above 48 KiB)."""
        self.enter()
        check(self.lib.cuFuncSetAttribute(fn, FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes), "cuFuncSetAttribute")

    def launch(self, fn: Any, grid: int, block: int, params: Any, shared: int = 0) -> None:
        self.enter()
        check(self.lib.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, self.stream, params, None),
              "cuLaunchKernel")

    def event(self, timing: bool = False) -> Any:
        self.enter()
        ev = c_void_p()
        check(self.lib.cuEventCreate(byref(ev), 0 if timing else CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        return ev

    def record(self, ev: Any, stream: Any = None) -> None:
        """Records `ev` on qd's stream, or on `stream` (a CUDA array interface value: 1 and 2 are the default
        streams, anything else a handle)."""
        self.enter()
        check(self.lib.cuEventRecord(ev, self.stream if stream is None else c_void_p(int(stream))), "cuEventRecord")

    def wait_event(self, stream: Any, ev: Any) -> None:
        """`stream` (None: qd's; else an array interface value) runs its later work after the work `ev` was
        recorded after (as `ev` stood when this is called)."""
        self.enter()
        check(self.lib.cuStreamWaitEvent(self.stream if stream is None else c_void_p(int(stream)), ev, 0),
              "cuStreamWaitEvent")

    def done(self, ev: Any) -> bool:
        self.enter()
        rc = self.lib.cuEventQuery(ev)
        if rc == CUDA_ERROR_NOT_READY:
            return False
        check(rc, "a launch (cuEventQuery)")
        return True

    def wait(self, ev: Any) -> None:
        self.enter()
        check(self.lib.cuEventSynchronize(ev), "a launch (cuEventSynchronize)")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        self.enter()
        ms = ctypes.c_float()
        check(self.lib.cuEventElapsedTime(byref(ms), start, end), "cuEventElapsedTime")
        return float(ms.value)


__all__ = ["CudaError", "Driver", "check", "library"]
