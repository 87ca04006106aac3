"""The device backend protocol: what the device runtime (`qd/runtime/device.py`, `device_launch.py`) asks of a GPU
tier's backend (`qd/gpu/vulkan_tier.py`, `cuda_tier.py`, `opencl_tier.py`).

Every backend subclasses `DeviceBackend`: the fourteen methods below without a body are required (the three
backends implement them all); the optional ones have their default here, so the runtime calls them
unconditionally (no `getattr` probes, no tests of a backend's name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from qd import ir


class DeviceBackend:
    """A GPU tier's device: memory, copies, compiled programs, launches and their completion."""

    name: str = ""  # the arch name; also the offline cache's subfolder
    caps: Any = None  # what the device offers the code generator (`spirv.Caps`, `opencl_tier.Caps`, ...)
    max_groups: int = 1  # workgroups that fill the device (grid-stride tasks, reductions, adstack rows)
    group_limit: int = 1  # workgroups of the other range tasks
    reduce_groups: int | None = None  # workgroups of a reducing task where fewer than `max_groups` contend less
    loop_limit: int = 0  # loop iterations a driver allows an invocation (0: none)
    timestamps: bool = False  # launches are timed on the device (`elapsed_ms`)
    # the lanes of one subgroup (warp) kernels compile against (`qd.simt`), or None where the tier lowers no
    # `qd.simt` operation
    subgroup_size: int | None = None
    # the C launcher factory of launch plans, or None where launches take the Python path:
    # runner(prog, grids, buffers, words, leaves, regrid, on_error, rt, clib, loops, whole) (see
    # `device_launch.runner`; `clib` is the runtime's `qd._launch`, passed down: the launcher class and the source
    # codes live there; `loops`: (first task, end task, counter buffer, counter bytes, may be a CUDA graph) per
    # `qd.graph.do_while` loop; `whole`: the kernel may launch as one graph)
    runner: Callable[..., Any] | None = None
    # the CUDA device ordinal of this backend's memory where torch can wrap it (`__cuda_array_interface__`)
    torch_cuda_device: int | None = None

    # ------------------------------------------------------------ required
    @property
    def device_name(self) -> str:
        raise NotImplementedError

    def device_caps(self) -> dict[str, int]:
        """Quadrants' `DeviceCapability` values of this device."""
        raise NotImplementedError

    def max_shared_memory_bytes(self) -> int:
        """The most shared (workgroup-local) memory one block may use, in bytes, as the driver reports it."""
        raise NotImplementedError

    def alloc(self, nbytes: int, host: bool = False) -> Any:
        raise NotImplementedError

    def free(self, buf: Any) -> None:
        raise NotImplementedError

    def upload(self, buf: Any, arr: np.ndarray, offset: int = 0) -> None:
        raise NotImplementedError

    def download(self, buf: Any, arr: np.ndarray, offset: int = 0) -> None:
        raise NotImplementedError

    def fill(self, buf: Any, nbytes: int, pattern: int) -> Any:
        """Enqueues filling `nbytes` of `buf` with a 32-bit pattern; returns its work."""
        raise NotImplementedError

    def compile(self, k: ir.KernelIR, fast_math: bool, print_words: int, cache_dir: str | None = None) -> Any:
        raise NotImplementedError

    def release(self, prog: Any) -> None:
        raise NotImplementedError

    def enqueue(self, prog: Any, slot: Any, groups: list[int], zero: list[tuple[Any, int]],
                streams: list | None = None, bufs: dict | None = None, printbuf: Any = None) -> Any:
        """Enqueues one launch; returns its work. A negative `groups[t]` leaves task t out (a `qd.graph.do_while`
        launch enqueues its tasks in runs, `qd/runtime/device_launch.py`); Vulkan skips every task of no groups. `streams`: of device arrays used in place (CUDA); `bufs`: the
        launch's device buffers by buffer index and `printbuf` (a backend whose kernels take them as arguments)."""
        raise NotImplementedError

    def elapsed_ms(self, prog: Any) -> float | None:
        raise NotImplementedError

    def done(self, work: Any) -> bool:
        raise NotImplementedError

    def wait(self, work: Any) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ optional
    def started(self, cfg: Any) -> None:
        """`qd.init` started a program on this device (a backend may warm its compilers)."""

    def synchronize(self) -> None:
        """Waits for work enqueued without a record (the C launcher's); nothing where there is none."""

    def fence(self) -> Any:
        """A work handle done once everything enqueued so far is (used where the C launcher enqueues)."""
        return None


__all__ = ["DeviceBackend"]
