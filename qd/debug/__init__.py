"""`qd.debug`: step through kernel launches on the reference interpreter (docs/debugger.md).

    with qd.debug.session(commands=["b kern.py:12", "c", "p s", "c"]):   # or on_stop=callback
        my_kernel(x)
    qd.debug.run(my_kernel, x, commands=[...])      # one launch, stopped at its first line
    qd.debug.set_trace()                            # the next launch, from the terminal
    qd.debug.pm()                                   # after a failed check: the failing thread
    python -m qd.debug script.py [args]             # the terminal front end
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, TextIO

from qd.debug.console import Console
from qd.debug.frame import Frame
from qd.debug.lines import BreakpointError
from qd.debug.postmortem import last_exception, post_mortem
from qd.debug.session import Breakpoint, Debugger, Quit, Stop
from qd.debug.walker import DebugError


def session(commands: Iterable[str] | None = None, on_stop: Callable[[Debugger, Frame, str], str] | None = None,
            breakpoints: Iterable[str] = (), stdin: TextIO | None = None, stdout: TextIO | None = None,
            **kw: Any) -> Debugger:
    """A debugger for the launches made inside `with qd.debug.session(...) as dbg:`. Stops are handled by
    `on_stop`, else by a `Console` reading `commands` (or stdin). `breakpoints`: `"file:line[ if cond]"`."""
    dbg = Debugger(on_stop or Console(commands, stdin, stdout), **kw)
    for bp in breakpoints:
        where, _, cond = bp.partition(" if ")
        dbg.break_at(where.strip(), cond.strip() or None)
    return dbg


def run(kernel: Any, *args: Any, commands: Iterable[str] | None = None, **kw: Any) -> Debugger:
    """Launches `kernel(*args)` under a debugger stopped at its first line; the result is `dbg.result`."""
    kw.setdefault("stop_at_start", True)
    dbg = session(commands, **kw)
    with dbg:
        dbg.result = kernel(*args)
    return dbg


def set_trace(commands: Iterable[str] | None = None, **kw: Any) -> Debugger:
    """Debugs the next kernel launch from the terminal (or `commands`), stopped at its first line."""
    kw.setdefault("stop_at_start", True)
    dbg = session(commands, **kw)
    dbg.once = True
    dbg.attach()
    return dbg


def pm(exc: BaseException | None = None, commands: Iterable[str] | None = None, **kw: Any) -> Debugger:
    """Post-mortem: re-runs the thread whose check failed in the launch that raised `exc` (default: the
    last exception) and stops at the failing line."""
    dbg = session(commands, **kw)
    post_mortem(dbg, exc or last_exception())
    if not dbg.failure.startswith("check failed") and on_console(dbg):
        dbg.on_stop.out(dbg.failure)
    return dbg


def on_console(dbg: Debugger) -> bool:
    return isinstance(dbg.on_stop, Console)


__all__ = ["Breakpoint", "BreakpointError", "Console", "DebugError", "Debugger", "Frame", "Quit", "Stop", "pm", "run",
           "session", "set_trace"]

