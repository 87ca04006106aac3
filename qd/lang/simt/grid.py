"""`qd.simt.grid`: ordering memory across the whole device."""

from __future__ import annotations

import warnings

from qd.frontend import simt as _s


def mem_fence() -> None:
    """Every write this thread made before the fence is seen by every thread of the launch before any write it
    makes after it (CUDA `__threadfence()`, SPIR-V device-scope `OpMemoryBarrier`, OpenCL global `mem_fence`)."""
    _s.emit("grid_fence", what="qd.simt.grid.mem_fence")


def memfence() -> None:
    """Deprecated name of `mem_fence`."""
    warnings.warn("qd.simt.grid.memfence() is deprecated; use qd.simt.grid.mem_fence() instead.", DeprecationWarning,
                  stacklevel=2)
    mem_fence()


__all__ = ["mem_fence", "memfence"]
