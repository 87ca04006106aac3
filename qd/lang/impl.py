"""`qd.lang.impl`: the few `quadrants.lang.impl` entry points that Quadrants code and tests use.

`get_runtime()` returns the runtime object, `PyQuadrants` (`qd/runtime/pyquadrants.py`: where qd calls its
`materialize` and `clear`, which Quadrants code may replace on the class). Counters owned by other parts of qd
are plugged in with `set_hook(name, fn)`; until then they read 0. Hook names:
`max_reducer_dispatch_count`, `reset_max_reducer_dispatch_count`, `num_compiled_functions`.
`get_max_shared_memory_bytes` asks the GPU tier's backend (`DeviceBackend.max_shared_memory_bytes`).
"""

from __future__ import annotations

from typing import Any

from qd.base import config as _config
from qd.errors import QuadrantsRuntimeError, QuadrantsSyntaxError  # noqa: F401  (Quadrants' tests import the latter here)
from qd.runtime import adstack_heap as _adstack_heap
from qd.runtime.fields import field  # noqa: F401
from qd.runtime.ndarray import ndarray  # noqa: F401
from qd.runtime.program import on_reset, reset  # noqa: F401
from qd.runtime.pyquadrants import PyQuadrants, get_runtime, set_hook  # noqa: F401
from qd.runtime.snode import axes, root  # noqa: F401

set_hook("max_reducer_dispatch_count", _adstack_heap.dispatch_count)
set_hook("reset_max_reducer_dispatch_count", _adstack_heap.reset_dispatch_count)


def current_cfg() -> _config.Config:
    return _config.current()


def default_cfg() -> _config.Config:
    """A fresh config with every option at its default."""
    return _config.Config()


def get_max_shared_memory_bytes(*, is_lowerbound_ok: bool) -> int:
    """The most shared (workgroup) memory one block may use on the current arch, in bytes.

    On a GPU arch the device's own limit, exact, whatever `is_lowerbound_ok` says (cuda: the opt-in maximum per
    block, as Quadrants; vulkan: `maxComputeSharedMemorySize`; opencl: `CL_DEVICE_LOCAL_MEM_SIZE`). On cpu and interp,
    which have no shared memory, 0 when `is_lowerbound_ok`, else `QuadrantsRuntimeError` (a RuntimeError), as
    Quadrants does for an arch it cannot query."""
    from qd.runtime import device as _device

    arch = _config.current().arch
    rt = _device.current()
    if rt is not None:
        return rt.backend.max_shared_memory_bytes()
    if is_lowerbound_ok:
        return 0
    raise QuadrantsRuntimeError(f"get_max_shared_memory_bytes: the {arch.name} arch has no shared memory to query; "
                                "pass is_lowerbound_ok=True to get 0, or initialise a GPU arch (qd.init(arch=qd.gpu))")


def call_internal(name: str, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError(f"qd: internal call {name!r} is not implemented")


def __getattr__(name: str) -> Any:
    """`Kernel` (Quadrants' tests import it from here), loaded on use: qd.frontend imports qd.lang."""
    if name == "Kernel":
        from qd.runtime.kernel import Kernel

        return Kernel
    raise AttributeError(f"module 'qd.lang.impl' has no attribute {name!r}")
