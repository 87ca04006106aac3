"""The kernel profiler's launch records (`qd.init(kernel_profiler=True)`; read through `qd.profiler`).

While `cfg.kernel_profiler` is on, `Kernel._run` launches every call through `timed_launch` and builds no
compiled launch plan (`qd/runtime/launch_plan.py`), so no call bypasses it; with the option off nothing here
runs (the plans launch as before). One record per launch: the kernel's name, when it started and how long it
took in ms.

What is timed, per tier:
- `interp`, `cpu`: a launch is synchronous; the time is the tier's launch (binding the buffers, running the
  interpreter or the native code, reading the status), not the Python-side argument checks and instance lookup
  before it. On `cpu` a launch during which `qd.jit.tiering` compiles native code includes that compile.
- GPU tiers (cuda, vulkan, opencl): the device is synchronised before the launch (earlier work is not counted)
  and after it (the kernel has finished), and the time is the host's wall clock in between: the kernel's device
  time plus its enqueue and completion overhead (tens of microseconds). The tier's compile of the instance is
  done before the clock starts. A kernel error surfaces at that launch rather than at the next `qd.sync()`.

Records belong to the program: `qd.init` / `qd.reset` drop them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qd.runtime import device
from qd.runtime import program as _program


@dataclass(frozen=True)
class LaunchRecord:
    """One profiled launch: the kernel's name, its start (`time.perf_counter()`, s) and its duration in ms."""

    name: str
    start: float
    ms: float


_records: list[LaunchRecord] = []
_lock = threading.Lock()

# the suffix of a launch's name per `Kernel._run` mode (Quadrants marks its autodiff kernels the same way)
_MODE_SUFFIX = {"grad": "_reverse_grad", "fwd": "_forward_grad"}


def launch_name(fn_name: str, mode: str) -> str:
    """The name a launch is recorded under: the kernel's Python name, `_reverse_grad` appended for `kernel.grad`
    and `_forward_grad` for a launch inside `qd.ad.FwdMode` (a validating Tape's launches are the primal's)."""
    return fn_name + _MODE_SUFFIX.get(mode, "")


def timed_launch(name: str, tier: Any, ck: Any, run: Callable[[], Any]) -> Any:
    """Runs `run()` (one launch of instance `ck` on `tier`), records its time under `name` and returns its
    result. A launch that raises is not recorded."""
    rt = device.current()
    if rt is not None:  # a GPU tier: compiled and idle before the clock starts
        tier.compile(ck)
        rt.sync()
    start = time.perf_counter()
    result = run()
    if rt is not None:
        rt.sync()
    ms = (time.perf_counter() - start) * 1e3
    with _lock:
        _records.append(LaunchRecord(name, start, ms))
    return result


def records() -> list[LaunchRecord]:
    """The records so far, in launch order (a copy)."""
    with _lock:
        return list(_records)


def clear() -> None:
    with _lock:
        _records.clear()


_program.on_reset(clear)

__all__ = ["LaunchRecord", "clear", "launch_name", "records", "timed_launch"]
