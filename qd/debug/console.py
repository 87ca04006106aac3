"""The terminal front end: pdb-like commands read from a terminal, a pipe or a list of strings.

    b [file:]line [if cond]   breakpoint (no argument: list them)     cl [n]   clear breakpoint(s)
    s / n / r / c             step (into funcs) / next / finish (return from the func) / continue
    p expr                    print an expression over locals, loop indices, `tid` and globals `x[i]`
    locals                    the selected frame's locals (and adstack depths in reverse-mode kernels)
    l [n]                     source around the current line (n lines of context)
    bt, u, d                  call stack across @qd.func frames; select the frame up / down
    thread [N]                show the current thread; follow thread N (stop at its first line)
    display [expr], undisplay show expr at every stop (no argument: list) / stop showing them
    q                         stop debugging (the program goes on undebugged)   h   this help
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Iterable, TextIO

import numpy as np

from qd.debug.frame import Frame
from qd.debug.lines import BreakpointError
from qd.debug.session import Debugger

_RESUME = {"s": "step", "step": "step", "n": "next", "next": "next", "r": "finish", "finish": "finish",
           "return": "finish", "c": "continue", "cont": "continue", "continue": "continue", "q": "quit",
           "quit": "quit", "exit": "quit"}


def fmt(value: object) -> str:
    """A value as the console shows it: arrays and numpy scalars without their type names."""
    if isinstance(value, np.ndarray):
        return np.array2string(np.asarray(value), separator=", ")
    if isinstance(value, np.generic):
        return str(value)
    if type(value) in (tuple, list):
        inner = ", ".join(fmt(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


class Console:
    """An `on_stop` callback driven by text commands (`commands`, else lines of `stdin`)."""

    prompt = "(qd-dbg) "

    def __init__(self, commands: Iterable[str] | None = None, stdin: TextIO | None = None,
                 stdout: TextIO | None = None, main_file: str | None = None) -> None:
        self.main_file = main_file  # the script `python -m qd.debug` runs: where `b LINE` points before a stop
        self.commands = list(commands) if commands is not None else None
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.echo = commands is not None or not self.stdin.isatty()
        self.displays: list[str] = []
        if commands is None and self.stdin is sys.stdin and self.stdin.isatty():
            try:
                import readline  # noqa: F401  (line editing and history at the prompt)
            except ImportError:
                pass

    # -------------------------------------------------------------- I/O
    def out(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def readline(self) -> str | None:
        if self.commands is not None:
            line = self.commands.pop(0) if self.commands else None
        else:
            if self.stdin.isatty():
                self.stdout.write(self.prompt)
                self.stdout.flush()
            raw = self.stdin.readline()
            line = raw.rstrip("\n") if raw else None
        if line is not None and self.echo:
            self.out(self.prompt + line)
        return line

    # -------------------------------------------------------------- before the program runs
    def setup(self, dbg: Debugger) -> bool:
        """Reads commands until the program should run (`c`, `s`, `n`); False to quit at once."""
        self.out("qd debugger: set breakpoints (b file:line), then c to run; s stops at the first kernel line")
        while True:
            line = self.readline()
            if line is None:
                return True
            word = line.strip().split(" ", 1)[0]
            if word in _RESUME:
                if _RESUME[word] == "quit":
                    return False
                dbg.mode = "step" if _RESUME[word] in ("step", "next") else "continue"
                return True
            self.command(dbg, None, line)

    # -------------------------------------------------------------- at a stop
    def __call__(self, dbg: Debugger, frame: Frame, reason: str) -> str:
        self.out(f"> {frame.where()}  [{reason}]")
        self.show_line(frame)
        for expr in self.displays:
            self.command(dbg, frame, f"display {expr}")
        while True:
            line = self.readline()
            if line is None:
                return "quit"
            word = line.strip().split(" ", 1)[0]
            if word in _RESUME:
                return _RESUME[word]
            self.command(dbg, frame, line)

    def show_line(self, frame: Frame) -> None:
        for text in frame.source(0):
            self.out(text)

    def command(self, dbg: Debugger, frame: Frame | None, line: str) -> None:
        word, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        handler = _COMMANDS.get(word)
        try:
            if handler is not None:
                handler(self, dbg, frame, rest)
            elif line.strip():
                _print(self, dbg, frame, line.strip())
        except BreakpointError as e:  # as pdb: "*** Blank or comment"
            self.out(f"*** {e}")
        except Exception as e:  # a command's error is shown, never fatal
            self.out(f"*** {type(e).__name__}: {e}")


# ------------------------------------------------------------------ commands


def _need(frame: Frame | None) -> Frame:
    if frame is None:
        raise RuntimeError("no kernel is running yet")
    return frame


def _break(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    if not rest:
        for bp in dbg.breakpoints:
            c.out(f"{bp} (hits {bp.hits})")
        return
    where, _, cond = rest.partition(" if ")
    where = where.strip()
    if ":" not in where:  # a bare line: the current file at a stop, the main script before (as pdb)
        if not where.lstrip("-").isdigit():
            raise BreakpointError(f"give file:line or a line number, not {where!r}")
        file = frame.here().file if frame is not None else c.main_file
        if file is None:
            raise BreakpointError("give file:line before the program runs")
        where = f"{os.path.abspath(file)}:{where}"
    bp = dbg.break_at(where, cond.strip() or None, c.main_file)
    c.out(f"{bp}" + (f" ({bp.note})" if bp.note else ""))


def _clear(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    dbg.clear(int(rest) if rest else None)
    c.out("cleared")


def _print(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    c.out(fmt(_need(frame).eval(rest)))


def _locals(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    f = _need(frame)
    for name, v in f.locals().items():
        c.out(f"{name} = {fmt(v)}")
    for label, depth in f.adstack_depths().items():
        c.out(f"[{label}] depth = {depth}")


def _list(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    for text in _need(frame).source(int(rest) if rest else 5):
        c.out(text)


def _bt(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    for text in _need(frame).backtrace():
        c.out(text)


def _move(delta: int) -> Callable[[Console, Debugger, Frame | None, str], None]:
    def move(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
        f = _need(frame)
        level = f.level + delta
        if not 0 <= level < len(f.stack()):
            raise IndexError("no such frame")
        f.level = level
        c.out(f"> {f.where()}")
        c.show_line(f)
    return move


def _thread(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    if not rest:
        f = _need(frame)
        c.out(f"thread {f.tid} of task {f.thread.task_id} (following {sorted(dbg.threads) or 'first index'})")
        return
    tid = int(rest)
    dbg.follow(tid)
    if frame is not None and tid <= frame.tid:
        c.out(f"thread {tid} already ran in this task: following it from the next range task on")
    else:
        c.out(f"following thread {tid}: stopping at its first line (continue or step to go there)")


def _display(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    if not rest:
        for expr in c.displays:
            c.out(f"display {expr}")
        return
    if rest not in c.displays:
        c.displays.append(rest)
    if frame is not None:
        try:
            value = fmt(frame.eval(rest))
        except Exception as e:  # not defined here (yet)
            value = f"<{type(e).__name__}: {e}>"
        c.out(f"display {rest}: {value}")


def _undisplay(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    c.displays = [d for d in c.displays if rest and d != rest]


def _help(c: Console, dbg: Debugger, frame: Frame | None, rest: str) -> None:
    c.out((__doc__ or "").split("\n\n", 1)[1].rstrip())


_COMMANDS: dict[str, Callable[[Console, Debugger, Frame | None, str], None]] = {
    "b": _break, "break": _break, "cl": _clear, "clear": _clear, "p": _print, "pp": _print, "print": _print,
    "locals": _locals, "info": _locals, "a": _locals, "l": _list, "list": _list, "bt": _bt, "where": _bt, "w": _bt,
    "u": _move(1), "up": _move(1), "d": _move(-1), "down": _move(-1), "thread": _thread, "h": _help, "help": _help,
    "display": _display, "undisplay": _undisplay,
}
