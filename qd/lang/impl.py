"""`qd.lang.impl`: the few `quadrants.lang.impl` entry points that Quadrants code and tests use.

`get_runtime()` returns a small facade over qd's runtime. Counters owned by other parts of qd are
plugged in with `set_hook(name, fn)`; until then they read 0. Hook names:
`max_reducer_dispatch_count`, `reset_max_reducer_dispatch_count`, `num_compiled_functions`.
"""

from __future__ import annotations

from typing import Any, Callable

from qd.errors import QuadrantsSyntaxError  # noqa: F401  (Quadrants' tests import it from here)
from qd.runtime import adstack_heap as _adstack_heap
from qd.runtime import config as _config
from qd.runtime import program as _program
from qd.runtime.fields import field  # noqa: F401
from qd.runtime.ndarray import ndarray  # noqa: F401
from qd.runtime.program import on_reset, reset  # noqa: F401
from qd.runtime.snode import axes, root  # noqa: F401
from qd.types.dtypes import DataType, to_dtype

_hooks: dict[str, Callable[..., Any]] = {}


def set_hook(name: str, fn: Callable[..., Any]) -> None:
    """Plug a counter owned by another part of qd into the runtime facade (see the module docstring)."""
    _hooks[name] = fn


def _call_hook(name: str, default: Any = None) -> Any:
    fn = _hooks.get(name)
    return fn() if fn is not None else default


set_hook("max_reducer_dispatch_count", _adstack_heap.dispatch_count)
set_hook("reset_max_reducer_dispatch_count", _adstack_heap.reset_dispatch_count)


class _Prog:
    """Stands in for Quadrants' C++ Program object."""

    def config(self) -> _config.Config:
        return _config.current()

    def synchronize(self) -> None:
        _program.sync()

    def _get_num_ndarrays(self) -> int:
        from qd.runtime.ndarray import num_alive

        return num_alive()

    def _get_max_reducer_dispatch_count(self) -> int:
        return int(_call_hook("max_reducer_dispatch_count", 0))

    def _reset_max_reducer_dispatch_count(self) -> None:
        _call_hook("reset_max_reducer_dispatch_count")

    def get_device_caps(self) -> "_DeviceCaps":
        """What the current GPU device offers, under Quadrants' `DeviceCapability` names (empty on the CPU)."""
        from qd.runtime import device

        rt = device.current()
        caps = getattr(rt.backend, "device_caps", None) if rt is not None else None
        return _DeviceCaps(caps() if caps is not None else {})


class _DeviceCaps:
    def __init__(self, caps: dict) -> None:
        self._caps = caps

    def get(self, cap: str) -> int:
        return int(self._caps.get(cap, 0))


class _Runtime:
    """Stands in for Quadrants' `PyQuadrants` runtime object."""

    prog = _Prog()
    compiling_callable = None

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
        """Fields are allocated when placed; nothing is left to materialise."""

    def sync(self) -> None:
        _program.sync()

    def get_num_compiled_functions(self) -> int:
        return int(_call_hook("num_compiled_functions", 0))


_runtime = _Runtime()


def get_runtime() -> _Runtime:
    return _runtime


def current_cfg() -> _config.Config:
    return _config.current()


def default_cfg() -> _config.Config:
    """A fresh config with every option at its default."""
    return _config.Config()


def call_internal(name: str, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError(f"qd: internal call {name!r} is not implemented")


def __getattr__(name: str) -> Any:
    """`Kernel` (Quadrants' tests import it from here), loaded on use: qd.frontend imports qd.lang."""
    if name == "Kernel":
        from qd.frontend.kernel import Kernel

        return Kernel
    raise AttributeError(f"module 'qd.lang.impl' has no attribute {name!r}")
