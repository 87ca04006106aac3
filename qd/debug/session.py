"""The debugger: breakpoints, followed threads, stepping modes, and attaching to kernel launches.

A `Debugger` attaches by registering a tier wrapper with the tier table (`qd.runtime.tiers.wrap`): while
it is attached, every arch's tier is a `DebugTier` over it, so an undebugged program runs no debugger code at
all. A launch whose kernel has a breakpoint (or that a step or `set_trace` is waiting for) runs through
`qd.debug.runner.debug_launch`; every other launch runs on the wrapped tier. Compiled launch plans stand aside
while it is attached; launches made by a launch (counting and max-reducer kernels) skip it
(`qd.runtime.tiers.launch_inner`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from qd import ir
from qd.debug import lines
from qd.debug.frame import Frame
from qd.debug.lines import BreakpointError
from qd.debug.runner import Policy, debug_launch
from qd.debug.walker import Thread
from qd.runtime import tiers as _tiers
from qd.runtime.status import decode

_TID_EQ = re.compile(r"\btid\s*==\s*(\d+)\b")


class Quit(Exception):
    """Raised out of an `on_stop` callback to stop debugging (the launch then finishes normally)."""


@dataclass
class Breakpoint:
    file: str
    line: int
    cond: str | None = None
    hits: int = 0
    number: int = 0
    note: str = ""  # why the breakpoint is not on the line asked for (it moved to the next kernel line)
    enabled: bool = True
    temporary: bool = False  # `tbreak`: deleted at its first stop
    ignore: int = 0  # `ignore N count`: crossings (with a true condition) still to pass without stopping

    def matches(self, loc: ir.SrcLoc) -> bool:
        if loc.line != self.line:
            return False
        return not self.file or loc.file == self.file or os.path.basename(loc.file) == self.file \
            or os.path.abspath(loc.file) == os.path.abspath(self.file)

    def __str__(self) -> str:
        tail = f" if {self.cond}" if self.cond else ""
        kind = "temporary breakpoint" if self.temporary else "breakpoint"
        return f"{kind} {self.number} at {self.file}:{self.line}{tail}"


@dataclass
class Stop:
    """A recorded line event of a walked thread (the `visited` trace)."""

    file: str
    line: int
    tid: int
    task: int
    func: str
    depth: int


class Debugger(Policy):
    """Steps through kernel launches on the interpreter.

    `on_stop(dbg, frame, reason)` is called at every stop and returns one of `"step"`, `"next"`,
    `"finish"`, `"continue"`, `"quit"` (the terminal front end, `qd.debug.console`, is one such
    callback). `threads` are the indices of range tasks to follow (default: each task's first index;
    `"all"` walks every thread). `stop_at_start` stops at the first line of the first debugged launch."""

    def __init__(self, on_stop: Callable[["Debugger", Frame, str], str] | None = None,
                 threads: Iterable[int] | str | None = None, stop_at_start: bool = False,
                 kernels: Iterable[str] | None = None) -> None:
        self.on_stop = on_stop or (lambda dbg, frame, reason: "continue")
        self.breakpoints: list[Breakpoint] = []
        self.follow_all = threads == "all"
        self.threads: set[int] = set() if threads in (None, "all") else set(threads)
        self.default_first = threads is None
        self.kernels = set(kernels) if kernels else None
        self.mode = "step" if stop_at_start else "continue"
        self.mode_depth = 0
        self.mode_thread: tuple[int, int] | None = None
        self.until_line = 0  # `until`: stop at a line past this one in the frame it was given in
        self.visited: list[Stop] = []
        self.frame: Frame | None = None
        self.failure: str | None = None
        self._next_bp = 1
        self._saved: Any = None
        self._inside = False
        self._pending_thread: int | None = None
        self._lines: dict[int, tuple] = {}
        self.once = False  # detach after the next debugged launch (`set_trace`)
        self.result: Any = None

    # -------------------------------------------------------------- configuration
    def break_at(self, where: str, cond: str | None = None, main_file: str | None = None,
                 temporary: bool = False) -> Breakpoint:
        """A breakpoint at `file:line` (a basename is enough) or `line` (any file), optionally when
        `cond` (a Python expression over locals, `tid` and globals) is true. `tid == N` in the
        condition makes the debugger follow thread N. Raises `BreakpointError` where it could never
        stop (`qd/debug/lines.py`: a file not found, a line past the end, blank, a comment or host code);
        a line in a kernel without a statement of its own moves to the next kernel line (`bp.note`).
        `main_file`: where a relative file name is looked up first (the script being debugged).
        `temporary`: deleted at its first stop (pdb's `tbreak`)."""
        file, _, text = where.strip().rpartition(":")
        try:
            line = int(text)
        except ValueError:
            raise BreakpointError(f"give file:line or a line number, not {where!r}") from None
        note = ""
        if file:
            path = lines.find_file(file, main_file)
            if path is None:
                raise BreakpointError(f"'{file}' not found (looked in the current directory, the script's, sys.path "
                                      f"and the files of loaded modules)")
            line, note = lines.check(path, line)
        elif line < 1:
            raise BreakpointError(f"End of file: there is no line {line}")
        check_condition(cond)
        bp = Breakpoint(file, line, cond, number=self._next_bp, note=note, temporary=temporary)
        self._next_bp += 1
        self.breakpoints.append(bp)
        self._follow_tids(cond)
        return bp

    def _follow_tids(self, cond: str | None) -> None:
        for m in _TID_EQ.finditer(cond or ""):
            self.threads.add(int(m.group(1)))

    def breakpoint(self, number: int) -> Breakpoint:
        """The breakpoint numbered `number`; raises `BreakpointError` if there is none (deleted or never set)."""
        for bp in self.breakpoints:
            if bp.number == number:
                return bp
        raise BreakpointError(f"there is no breakpoint {number} (b lists them)")

    def set_condition(self, number: int, cond: str | None) -> Breakpoint:
        """Replaces breakpoint `number`'s condition (None: unconditional)."""
        check_condition(cond)
        bp = self.breakpoint(number)
        bp.cond = cond
        self._follow_tids(cond)
        return bp

    def clear(self, number: int | None = None) -> None:
        self.breakpoints = [b for b in self.breakpoints if number is not None and b.number != number]

    def follow(self, tid: int) -> None:
        """Follow thread `tid` of the range tasks from now on and stop at its first line."""
        self.threads.add(tid)
        self._pending_thread = tid

    # -------------------------------------------------------------- attaching
    def __enter__(self) -> "Debugger":
        self.attach()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()

    def attach(self) -> None:
        if self._saved is None:
            self._saved = self._wrap
            _tiers.wrap(self._wrap)

    def detach(self) -> None:
        if self._saved is not None:
            _tiers.unwrap(self._saved)
            self._saved = None

    def _wrap(self, tier: _tiers.Tier) -> DebugTier:
        return DebugTier(tier, self)

    def _launch(self, tier: _tiers.Tier, ck: Any, bindings: Any, args: Any) -> Any:
        if self._inside:  # a launch made while one is debugged (from an `on_stop` callback) runs normally
            return tier.launch(ck, bindings, args)
        self._inside = True
        try:
            if not self._wants(ck):
                return tier.launch(ck, bindings, args)
            return debug_launch(ck, bindings, args, self)
        finally:
            self._inside = False
            if self.once:
                self.detach()

    def _wants(self, ck: Any) -> bool:
        if self.mode == "quit" or ck.ir.tasks is None:
            return False
        if self.kernels is not None and ck.ir.name not in self.kernels:
            return False
        if self.mode != "continue" or self._pending_thread is not None or self.threads or self.follow_all:
            return True
        lines = self._lines_of(ck)
        return any((os.path.basename(b.file), b.line) in lines if b.file else b.line in {ln for _, ln in lines}
                   for b in self.breakpoints)

    def _lines_of(self, ck: Any) -> set:
        """(basename, line) of every statement of an instance and of its call sites (cached per instance)."""
        lines = self._lines.get(id(ck))
        if lines is None or lines[0] is not ck:
            locs = [loc for s in ir.walk_kernel(ck.ir) if s.loc is not None for loc in s.loc.stack + (s.loc,)]
            lines = self._lines[id(ck)] = (ck, {(os.path.basename(loc.file), loc.line) for loc in locs})
        return lines[1]

    # -------------------------------------------------------------- policy (called by the runner)
    def followed(self, task_id: int, begin: int, end: int, after: int) -> int | None:
        if self.mode == "quit":
            return None
        if self.follow_all:
            return after if after < end else None
        cands = [t for t in self.threads if max(begin, after) <= t < end]
        if self.default_first and begin >= after and begin < end:
            cands.append(begin)
        return min(cands) if cands else None

    def line(self, thread: Thread, stmt: ir.Stmt) -> None:
        loc = stmt.loc
        depth = len(loc.stack)
        self.visited.append(Stop(loc.file, loc.line, thread.tid, thread.task_id, loc.func, depth))
        reason = self._should_stop(thread, stmt, depth)
        if reason is not None:
            self._interact(Frame(thread, stmt), reason)

    def failed(self, thread: Thread, stmt: ir.Check) -> None:
        k = thread.env.kernel
        decl = k.checks[stmt.check]
        vals = [decode(a.dtype, thread.vals[a]) for a in stmt.args]
        try:
            msg = decl.message.format(*vals, kernel=k.name, tid=thread.tid)
        except (IndexError, KeyError, ValueError):
            msg = decl.message
        self.failure = f"check failed ({decl.kind}): {msg}"
        if self.mode != "quit":
            self._interact(Frame(thread, stmt), self.failure)

    def _should_stop(self, thread: Thread, stmt: ir.Stmt, depth: int) -> str | None:
        mode = self.mode
        if mode == "quit":
            return None
        if self._pending_thread is not None and thread.tid == self._pending_thread:
            self._pending_thread = None
            return f"thread {thread.tid}"
        here = (thread.task_id, thread.tid)
        if thread.resumed:  # the rest of a call's line: only `finish` stops there
            return "finish" if mode == "finish" and (here != self.mode_thread or depth < self.mode_depth) else None
        if mode == "step":
            return "step"
        if mode == "next" and (here != self.mode_thread or depth <= self.mode_depth):
            return "next"
        if mode == "finish" and (here != self.mode_thread or depth < self.mode_depth):
            return "finish"
        if mode == "until" and (here != self.mode_thread or depth < self.mode_depth
                                or (depth == self.mode_depth and stmt.loc.line > self.until_line)):
            return "until"
        return self._breakpoint_hit(thread, stmt)

    def _breakpoint_hit(self, thread: Thread, stmt: ir.Stmt) -> str | None:
        """The reason to stop at `stmt` for a breakpoint, as bdb's `effective`: an enabled breakpoint counts a hit
        whenever it is crossed; it stops when its condition is true and its ignore count is spent (a true
        condition spends one crossing). A condition that raises stops regardless of the ignore count (the reason
        names the error) and does not delete a temporary breakpoint. A temporary breakpoint is deleted when it
        stops."""
        for bp in self.breakpoints:
            if not bp.enabled or not bp.matches(stmt.loc):
                continue
            bp.hits += 1
            if bp.cond:
                try:
                    true = Frame(thread, stmt).eval(bp.cond)
                except Exception as e:  # as pdb: a condition that raises stops (and here the error is told)
                    return f"{bp} (the condition raised {type(e).__name__}: {e}; stopping as if it were true)"
                if not true:
                    continue
            if bp.ignore > 0:
                bp.ignore -= 1
                continue
            if bp.temporary:
                self.clear(bp.number)
                return f"{bp}: deleted"
            return str(bp)
        return None

    def _interact(self, frame: Frame, reason: str) -> None:
        self.frame = frame
        try:
            cmd = self.on_stop(self, frame, reason)
        except Quit:
            cmd = "quit"
        self.resume(cmd or "continue", frame)

    def resume(self, cmd: str, frame: Frame) -> None:
        """Goes on from `frame` by `cmd`: "step", "next", "finish", "continue", "quit", or "until" (to a line past
        `until_line` in this frame, or its return; set `until_line` first, 0 meaning the current line)."""
        if cmd not in ("step", "next", "finish", "continue", "quit", "until"):
            raise ValueError(f"unknown resume command {cmd!r}")
        self.mode = cmd
        self.mode_depth = len(frame.loc.stack) - frame.level
        self.mode_thread = (frame.thread.task_id, frame.tid)
        if cmd == "until":
            self.until_line = max(self.until_line - 1, frame.here().line)
        self.frame = None


def check_condition(cond: str | None) -> None:
    """Raises `BreakpointError` when `cond` is not a Python expression."""
    if cond:
        try:
            compile(cond, "<condition>", "eval")
        except SyntaxError as e:
            raise BreakpointError(f"the condition {cond!r} is not a Python expression: {e.msg}") from None


class DebugTier:
    """A tier wrapped by an attached `Debugger` (`qd.runtime.tiers.wrap`): the launches the debugger wants run
    through `debug_launch`, the others on the wrapped tier; no compiled launch plans."""

    def __init__(self, inner: _tiers.Tier, dbg: Debugger) -> None:
        self.inner, self.dbg = inner, dbg
        self.name = inner.name

    def compile(self, ck: Any) -> Any:
        return self.inner.compile(ck)

    def plan(self, ck: Any, sig: Any, values: list, bindings: Any, guards: tuple) -> Any:
        return None

    def launch(self, ck: Any, bindings: Any, args: Any) -> Any:
        return self.dbg._launch(self.inner, ck, bindings, args)


def session(on_stop: Callable[[Debugger, Frame, str], str] | None = None, **kw: Any) -> Debugger:
    """`with qd.debug.session(...) as dbg:` debugs the kernel launches made inside the block."""
    return Debugger(on_stop, **kw)
