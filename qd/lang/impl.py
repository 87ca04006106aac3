"""`qd.lang.impl`: the few `quadrants.lang.impl` entry points that Quadrants code and tests use.

`get_runtime()` returns the runtime object, `PyQuadrants` (`qd/runtime/pyquadrants.py`: where qd calls its
`materialize` and `clear`, which Quadrants code may replace on the class). Counters owned by other parts of qd
are plugged in with `set_hook(name, fn)`; until then they read 0. Hook names:
`max_reducer_dispatch_count`, `reset_max_reducer_dispatch_count`, `num_compiled_functions`.
"""

from __future__ import annotations

from typing import Any

from qd.base import config as _config
from qd.errors import QuadrantsSyntaxError  # noqa: F401  (Quadrants' tests import it from here)
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


def call_internal(name: str, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError(f"qd: internal call {name!r} is not implemented")


def __getattr__(name: str) -> Any:
    """`Kernel` (Quadrants' tests import it from here), loaded on use: qd.frontend imports qd.lang."""
    if name == "Kernel":
        from qd.runtime.kernel import Kernel

        return Kernel
    raise AttributeError(f"module 'qd.lang.impl' has no attribute {name!r}")
