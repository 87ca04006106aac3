"""Host time of kernel compiles, per kernel and phase (`qd.profiler.print_scoped_profiler_info`); always on.

The compile of a kernel instance records its phases here under the kernel's IR name: `frontend` (Python source
to IR, `qd/frontend/instance.py`), `autodiff` (the forward / reverse / validation transform of a `kernel.grad`,
`qd.ad.FwdMode` or validating instance), `passes` (the pass pipeline, offloading included), and `codegen <tier>`
(native code on `cpu`, `codegen cpu quick` for the quick first code; the device program on a GPU tier). It sits
in the floor layer so that the frontend, the backends and the runtime can all record into it; a record costs two
clock reads per phase of a compile, nothing per launch. Compiles in background threads are recorded too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_totals: dict[tuple[str, str], list] = {}  # (kernel, phase) -> [count, seconds], in order of first record
_lock = threading.Lock()


@contextmanager
def phase(kernel: str, name: str) -> Iterator[None]:
    """Adds the time of the `with` body (also when it raises) to `name` of `kernel`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - start
        with _lock:
            entry = _totals.setdefault((kernel, name), [0, 0.0])
            entry[0] += 1
            entry[1] += seconds


def totals() -> dict[tuple[str, str], tuple[int, float]]:
    """(kernel, phase) -> (count, seconds) so far."""
    with _lock:
        return {key: (n, s) for key, (n, s) in _totals.items()}


def clear() -> None:
    with _lock:
        _totals.clear()


__all__ = ["clear", "phase", "totals"]
