"""Python's cyclic garbage collector paused while qd builds a kernel instance or compiles its native code
(`gcpause.paused()`, around `Kernel._build`, `tiering._compile` and a GPU tier's compile in `device_launch`).

Building an instance allocates many small objects (AST visitors, IR statements, pass results) that reference
counting frees, but their allocations still count towards the collector's thresholds, and in a large program each
full collection walks the whole heap: in Genesis' Franka scene (torch, Genesis, ~400 kernels) 12 full collections of
~0.5 s each fell inside `scene.build()` on the 2-core machine, 6.7 s of a 71 s cold build (3.6 s with both pauses),
and 1.2 s of a warm one (0.75 s). A GPU tier's code generation is the same: Genesis' `kernel_detection` built its
NVPTX modules in 9.8 s with the collector running and 7.5 s with it paused (the box scene's process, 2-core machine).
While paused, allocations go on counting; the collector runs again (the young generations first) once the last
build in progress ends. Nested or concurrent builds keep it paused until all of them end; a collector the program
had disabled stays disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
