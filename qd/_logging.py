"""`qd._logging`: Quadrants' logging functions (`trace`, `debug`, `info`, `warn`, `error`, `critical`).

qd's own log messages call these through the module (`_logging.info(...)`), never through a name bound at
import, so a program that replaces one (`setattr(qd._logging, "warn", my_logger)`, as Genesis does to route
Quadrants' messages into its own logger) receives them; `_get_logging(level)` rebuilds the original.

Quadrants' semantics: one process-wide level (default "info"; `qd.set_logging_level`, and `qd.init` from its
`log_level`); a message at or above it is `msg.format(*args, **kwargs)`, written to stderr as
`[<L> mm/dd/yy HH:MM:SS.mmm <thread id>] [<file>:<function>@<line>] <msg>` (the caller's frame); below it,
nothing is formatted. `error` and `critical` raise `RuntimeError` with the located message after writing it
(only when effective), as Quadrants' native logger does. "off" silences every level.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
OFF = "off"
supported_log_levels: list[str] = [DEBUG, TRACE, INFO, WARN, ERROR, CRITICAL]

_RANK: dict[str, int] = {TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4, CRITICAL: 5, OFF: 6}
_SPELLINGS: dict[str, str] = {"warning": WARN, "fatal": CRITICAL}
_RAISES = (ERROR, CRITICAL)
_level: str = INFO


def _checked(level: Any) -> str:
    """`level` as stored (lower case, Quadrants' spellings); RuntimeError naming the known levels otherwise."""
    text = level.strip().lower() if isinstance(level, str) else None
    text = _SPELLINGS.get(text, text)
    if text not in _RANK:
        raise RuntimeError(f"Unknown logging level {level!r}. Levels = {', '.join(_RANK)}")
    return text


def set_logging_level(level: str) -> None:
    """Make `level` and every level above it effective (the process-wide logging level)."""
    global _level
    _level = _checked(level)


def get_logging_level() -> str:
    return _level


def is_logging_effective(level: str) -> bool:
    """`qd.is_logging_effective(level)`: whether a log message at `level` would be written under the current
    process-wide logging level (`qd.set_logging_level`, or `qd.init(log_level=...)`; default "info").

    `level` is one of "trace", "debug", "info", "warn", "error", "critical" (case-insensitive; "warning" and
    "fatal" are accepted as "warn" and "critical"). Returns True when `level` is at or above the current level,
    so under the default, `qd.is_logging_effective("warn")` is True and `qd.is_logging_effective("debug")` is
    False; under "off" every level gives False. An unknown level raises `RuntimeError` naming the known ones.

    Example: `if qd.is_logging_effective("debug"): print(expensive_summary())`.
    """
    return _RANK[_checked(level)] >= _RANK[_level]


def _where(depth: int) -> str:
    """`[file:function@line]` of the frame `depth` levels above the logger function's caller."""
    f = sys._getframe(depth + 1)
    return f"[{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}@{f.f_lineno}]"


def _stamp(level: str) -> str:
    now = time.time()
    ms = int(now * 1000) % 1000
    return f"[{level[0].upper()} {time.strftime('%m/%d/%y %H:%M:%S', time.localtime(now))}.{ms:03d} " \
           f"{threading.get_native_id()}]"


def _get_logging(level: str) -> Callable[..., None]:
    """The logger function of `level` (what `qd._logging.<level>` is until a program replaces it)."""
    level = _checked(level)

    def logger(msg: Any, *args: Any, **kwargs: Any) -> None:
        if _RANK[level] < _RANK[_level]:
            return
        located = f"{_where(1)} {str(msg).format(*args, **kwargs)}"
        sys.stderr.write(f"{_stamp(level)} {located}\n")
        sys.stderr.flush()
        if level in _RAISES:
            raise RuntimeError(located)

    logger.__name__ = logger.__qualname__ = level
    return logger


trace = _get_logging(TRACE)
debug = _get_logging(DEBUG)
info = _get_logging(INFO)
warn = _get_logging(WARN)
error = _get_logging(ERROR)
critical = _get_logging(CRITICAL)

__all__ = ["CRITICAL", "DEBUG", "ERROR", "INFO", "TRACE", "WARN", "is_logging_effective", "set_logging_level"]
