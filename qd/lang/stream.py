"""GPU streams and events (Quadrants' `qd.Stream`, `qd.Event`, `qd.create_stream`, `qd.create_event`,
`qd.stream_parallel`, `kernel(..., qd_stream=s)`).

qd runs every launch of a program in launch order on its device's one queue, so any order streams and events allow
is kept: a kernel launched on a stream, an event recorded on one stream and waited for on another, and the blocks of
`with qd.stream_parallel():` (run one after another) give the results Quadrants' contract promises, without the
overlap Quadrants seeks on CUDA. `Stream.synchronize()` and `Event.synchronize()` wait for all launched work
(`qd.sync()`). On the host tiers (`cpu`, `interp`) handles are 0, as in Quadrants; on a GPU tier each stream and
event has a nonzero handle of its own. A launch on a stream is refused inside a `qd.ad.Tape`, for `kernel.grad`
and for a `graph=True` kernel, as in Quadrants (`qd/runtime/kernel.py`).
"""

from __future__ import annotations

import itertools
from typing import Any

_handles = itertools.count(1)


def _new_handle() -> int:
    """0 on the host tiers (launches there are synchronous), else a fresh nonzero handle."""
    from qd.base import config

    arch = config.current().arch
    return 0 if arch is None or not getattr(arch, "is_gpu", False) else next(_handles)


def _sync() -> None:
    from qd.runtime import program

    program.sync()


class _Handle:
    """What a stream and an event share: a handle (0 on the host tiers and once destroyed), `destroy`, and use as a
    context manager that destroys it on exit."""

    def __init__(self, handle: int = 0) -> None:
        self._handle = handle

    @property
    def handle(self) -> int:
        return self._handle

    def destroy(self) -> None:
        """Releases it; safe to call again."""
        self._handle = 0

    def __enter__(self) -> _Handle:  # noqa: PYI034  (typing.Self is 3.11+; qd runs on 3.10)
        return self

    def __exit__(self, *exc: object) -> bool:
        self.destroy()
        return False


class Stream(_Handle):
    """A stream of launches (`qd.create_stream()`)."""

    def synchronize(self) -> None:
        """Waits until the work launched on this stream (qd: all launched work) has finished."""
        _sync()


class Event(_Handle):
    """A point in a stream's work (`qd.create_event()`)."""

    def record(self, qd_stream: Stream | None = None) -> None:
        """Marks the work launched so far on `qd_stream` (None: the default stream). qd's one in-order queue has
        nothing to record: later launches follow it anyway."""

    def wait(self, qd_stream: Stream | None = None) -> None:
        """Makes `qd_stream` (None: the default stream) wait for this event: always so in qd's in-order queue."""

    def synchronize(self) -> None:
        """Waits until the recorded work (qd: all launched work) has finished."""
        _sync()


def create_stream() -> Stream:
    """A new stream: pass it as `kernel(..., qd_stream=s)`."""
    return Stream(_new_handle())


def create_event() -> Event:
    """A new event: `e.record(s)`, then `e.wait(s2)` or `e.synchronize()`."""
    return Event(_new_handle())


class _NoOp:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def stream_parallel() -> Any:
    """In a kernel, `with qd.stream_parallel():` blocks (all of the kernel's top-level statements) run on streams of
    their own in Quadrants; qd runs them in order (`qd/frontend/withs.py`). Outside a kernel: does nothing."""
    return _NoOp()


__all__ = ["Event", "Stream", "create_event", "create_stream", "stream_parallel"]
