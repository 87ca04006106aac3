"""The program's runtime object, Quadrants' `PyQuadrants` (`qd.lang.impl.get_runtime()`), and where qd calls
its `materialize` and `clear`.

Quadrants code replaces `PyQuadrants.materialize` / `PyQuadrants.clear` on the class (Genesis defers the fill of
its 0-d fields to the next materialization and drops the deferred fills at a reset), so qd calls them through
the runtime object, never through a function bound at import, at the points where Quadrants 1.3.3 calls them:

- `materialize()`: before compiling a kernel instance; at `qd.sync()`; before every bulk host operation on a
  field (`fill`, `to_numpy`, `from_numpy`, `copy_from`, `to_torch`, `from_torch`); and, while a field has been
  declared since the last materialization (`pending`), before a kernel call takes the Python launch path and
  before a host element access (`x[i]`) of a field or ndarray (Quadrants materializes at the first one).
  `pending` is cleared before the call, so a `materialize` that itself fills fields does not recurse.
- `clear()`: first thing in `qd.reset()` (so at every `qd.init`), before the program's state is dropped.

qd allocates a field when it is placed, so its own `materialize` has nothing to finalize: it records that the
program is materialized; its `clear` records that it is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qd import _launch
from qd.base import config as _config
from qd.types.dtypes import DataType, to_dtype

pending: bool = False  # a field was declared since the last materialization

_hooks: dict[str, Callable[..., Any]] = {}


def set_hook(name: str, fn: Callable[..., Any]) -> None:
    """Plug a counter owned by another part of qd into the runtime facade (`qd.lang.impl` names them)."""
    _hooks[name] = fn


def _call_hook(name: str, default: Any = None) -> Any:
    fn = _hooks.get(name)
    return fn() if fn is not None else default


class _DeviceCaps:
    def __init__(self, caps: dict) -> None:
        self._caps = caps

    def get(self, cap: str) -> int:
        return int(self._caps.get(cap, 0))


def _runner_of(ck: Any) -> Any:
    """The CUDA C launcher of instance `ck`'s plan, or None."""
    plan = getattr(ck, "plan", None) if ck is not None else None
    return getattr(plan, "runner", None) if plan else None


class _Prog:
    """Stands in for Quadrants' C++ Program object."""

    def config(self) -> _config.Config:
        return _config.current()

    def synchronize(self) -> None:
        """Wait for the device and raise kernel errors (no materialization: Quadrants' `prog.synchronize`)."""
        from qd.runtime import program

        program.synchronize()

    def _get_num_ndarrays(self) -> int:
        from qd.runtime.ndarray import num_alive

        return num_alive()

    def _get_max_reducer_dispatch_count(self) -> int:
        return int(_call_hook("max_reducer_dispatch_count", 0))

    def _reset_max_reducer_dispatch_count(self) -> None:
        _call_hook("reset_max_reducer_dispatch_count")

    # Quadrants' queries of the last call and of its CUDA-graph cache. qd makes CUDA graphs on `qd.cuda` only: a
    # `@qd.kernel(graph=True)` kernel launched from its plan is one graph (`qd/gpu/cuda_graphs.py`); elsewhere
    # there is never a graph to count or to have used, as in Quadrants on its non-CUDA backends.
    def get_num_offloaded_tasks_on_last_call(self) -> int:
        """The tasks (offloaded loops and serial blocks) of the kernel instance launched last (0: none yet)."""
        ck = _launch.last_launched()
        return len(ck.ir.tasks) if ck is not None and ck.ir.tasks is not None else 0

    def get_graph_cache_used_on_last_call(self) -> bool:
        """The last call was one CUDA graph launch of its whole kernel."""
        runner = _runner_of(_launch.last_launched())
        return bool(runner is not None and runner.last_graph)

    def get_graph_num_nodes_on_last_call(self) -> int:
        """The kernel nodes of the graph the last call launched: one per task (0: the last call was no graph)."""
        return self.get_num_offloaded_tasks_on_last_call() if self.get_graph_cache_used_on_last_call() else 0

    def get_graph_cache_size(self) -> int:
        """The kernel instances with a CUDA graph made, in the live kernels."""
        from qd.runtime.kernel import live_instances

        return sum(1 for ck in live_instances() if getattr(_runner_of(ck), "has_graph", False))

    def get_graph_total_builds(self) -> int:
        """The CUDA graphs of whole kernels made so far in the live kernels (made again when a grid changed)."""
        from qd.runtime.kernel import live_instances

        return sum(getattr(_runner_of(ck), "graph_builds", 0) for ck in live_instances())

    def get_device_caps(self) -> _DeviceCaps:
        """What the current GPU device offers, under Quadrants' `DeviceCapability` names (empty on the CPU)."""
        from qd.runtime import device

        rt = device.current()
        return _DeviceCaps(rt.backend.device_caps() if rt is not None else {})


class PyQuadrants:
    """Quadrants' runtime object: the program (`prog`), its default types, `materialize`, `clear`, `sync`."""

    prog = _Prog()
    compiling_callable = None
    materialized = False

    @property
    def default_fp(self) -> DataType:
        return _config.current().default_fp

    @default_fp.setter
    def default_fp(self, fp: Any) -> None:
        self.set_default_fp(fp)

    @property
    def default_ip(self) -> DataType:
        return _config.current().default_ip

    @default_ip.setter
    def default_ip(self, ip: Any) -> None:
        self.set_default_ip(ip)

    def set_default_fp(self, fp: Any) -> None:
        _config.current().default_fp = to_dtype(fp)

    def set_default_ip(self, ip: Any) -> None:
        _config.current().default_ip = to_dtype(ip)

    @property
    def _arch(self) -> Any:
        return _config.current().arch

    def materialize(self) -> None:
        """Fields are allocated when placed: nothing is left to finalize (see the module docstring)."""
        self.materialized = True

    def clear(self) -> None:
        """Called by `qd.reset()` before it drops the program's state."""
        self.materialized = False

    def sync(self) -> None:
        """Quadrants' `PyQuadrants.sync`: materialize, then wait for the device (`qd.sync()`)."""
        from qd.runtime import program

        program.sync()

    def get_num_compiled_functions(self) -> int:
        return int(_call_hook("num_compiled_functions", 0))


_runtime = PyQuadrants()


def get_runtime() -> PyQuadrants:
    return _runtime


def declared() -> None:
    """A field was declared: the next materialization point calls `materialize`."""
    global pending
    pending = True


def materialize() -> None:
    """Call the runtime object's `materialize` (patched or not)."""
    global pending
    pending = False
    _runtime.materialize()


def materialize_pending() -> None:
    """`materialize()` when a field was declared since the last one."""
    if pending:
        materialize()


def clear() -> None:
    """Call the runtime object's `clear` (patched or not); later declarations start a new pending set."""
    global pending
    pending = False
    _runtime.clear()
