"""The console's inspection commands (pdb's): p, pp, a(rgs), locals, l(ist), ll, w(here), u(p), d(own),
display, undisplay, thread.

A mixin of `qd.debug.console.Console`, which supplies `dbg`, `frame` (None before the program runs),
`displays` and `out`.
"""

from __future__ import annotations

import ast
import linecache
import pprint

import numpy as np

from qd.debug import lines
from qd.debug.frame import Frame


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


def _params(path: str, line: int) -> list[str]:
    """The parameter names of the innermost function of `path` whose `def` spans `line`."""
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except SyntaxError:
        return []
    fns = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
           and f.lineno <= line <= (f.end_lineno or f.lineno)]
    if not fns:
        return []
    a = max(fns, key=lambda f: f.lineno).args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


class ShowCommands:
    def _need(self) -> Frame:
        if self.frame is None:
            raise RuntimeError("no kernel is running yet: set breakpoints and type c (or s)")
        return self.frame

    def do_p(self, arg: str) -> None:
        """p expression
        Print the value of the expression over the selected frame: locals, loop indices, `tid`, kernel
        arguments, buffers `x[i]` (`x.grad[i]`), `adstack` and the module's Python globals."""
        self.out(fmt(self._need().eval(arg)))

    def do_pp(self, arg: str) -> None:
        """pp expression
        Pretty-print the value of the expression (whole arrays, Python containers with pprint)."""
        value = self._need().eval(arg)
        if isinstance(value, np.ndarray):
            self.out(np.array2string(value, separator=", ", threshold=value.size + 1))
        else:
            self.out(pprint.pformat(value) if not isinstance(value, np.generic) else str(value))

    def do_args(self, arg: str) -> None:
        """a(rgs)
        Print the arguments of the selected frame's function (the kernel's, or the @qd.func's)."""
        f = self._need()
        here = f.here()
        ns = f.namespace()
        for name in _params(here.file, here.line):
            self.out(f"{name} = {fmt(ns[name])}" if name in ns else f"{name} = <not kept: optimized out>")

    do_a = do_args

    def do_locals(self, arg: str) -> None:
        """locals
        Print the selected frame's locals (and the adstack depths of a reverse-mode kernel)."""
        f = self._need()
        for name, v in f.locals().items():
            self.out(f"{name} = {fmt(v)}")
        for label, depth in f.adstack_depths().items():
            self.out(f"[{label}] depth = {depth}")

    def _print_lines(self, file: str, lo: int, hi: int) -> None:
        here = self._need().here()
        breaks = {bp.line for bp in self.dbg.breakpoints if bp.matches(_Loc(file, bp.line))}
        for n in range(max(1, lo), hi + 1):
            text = linecache.getline(file, n)
            if not text:
                break
            mark = ("B" if n in breaks else " ") + ("->" if n == here.line else "  ")
            self.out(f"{n:4d}{mark} {text.rstrip()}")
            self.last_listed = n

    def do_list(self, arg: str) -> None:
        """l(ist) [first[, last] | .]
        List source: 11 lines around the current line, then (l again) the next 11; `l N` around line N;
        `l first, last` that range (a last smaller than first is a count). B marks breakpoints, -> the current line."""
        here = self._need().here()
        if arg.strip() == ".":
            self.last_listed = None
            arg = ""
        if not arg:
            lo = self.last_listed + 1 if self.last_listed else here.line - 5
            self._print_lines(here.file, lo, lo + 10)
            return
        first, _, last = arg.partition(",")
        lo = int(first)
        if last.strip():
            hi = int(last)
            self._print_lines(here.file, lo, hi if hi >= lo else lo + hi)
        else:
            self._print_lines(here.file, lo - 5, lo + 5)

    do_l = do_list

    def do_longlist(self, arg: str) -> None:
        """ll | longlist
        List the whole source of the selected frame's @qd.kernel or @qd.func."""
        here = self._need().here()
        spans = [s for s in lines.kernel_lines(here.file)[0] if s[0] <= here.line <= s[1]]
        lo, hi = max(spans) if spans else (here.line, here.line)
        self._print_lines(here.file, lo, hi)

    do_ll = do_longlist

    def do_where(self, arg: str) -> None:
        """w(here) | bt
        Print the call stack across @qd.func frames, the kernel first; > marks the selected frame."""
        for text in self._need().backtrace():
            self.out(text)

    do_w = do_bt = do_where

    def _move(self, arg: str, sign: int) -> None:
        f = self._need()
        level = f.level + sign * (int(arg) if arg.strip() else 1)
        if not 0 <= level < len(f.stack()):
            raise IndexError("Oldest frame" if sign > 0 else "Newest frame")
        f.level = level
        self.last_listed = None
        self.out(f"> {f.where()}")
        self.show_line(f)

    def do_up(self, arg: str) -> None:
        """u(p) [count]
        Select the frame `count` (default one) levels up the call stack (towards the kernel)."""
        self._move(arg, 1)

    do_u = do_up

    def do_down(self, arg: str) -> None:
        """d(own) [count]
        Select the frame `count` (default one) levels down the call stack (towards the current line)."""
        self._move(arg, -1)

    do_d = do_down

    def do_thread(self, arg: str) -> None:
        """thread [N]
        Show the current thread; with N, follow thread N of the range tasks from now on and stop at its
        first line (a thread that already ran in this task is followed from the next task on)."""
        if not arg:
            f = self._need()
            self.out(f"thread {f.tid} of task {f.thread.task_id} (following {sorted(self.dbg.threads) or 'first index'})")
            return
        tid = int(arg)
        self.dbg.follow(tid)
        if self.frame is not None and tid <= self.frame.tid:
            self.out(f"thread {tid} already ran in this task: following it from the next range task on")
        else:
            self.out(f"following thread {tid}: stopping at its first line (continue or step to go there)")

    def _value(self, expr: str) -> str:
        try:
            return fmt(self._need().eval(expr))
        except Exception as e:  # noqa: BLE001  (not defined here, yet)
            return f"<{type(e).__name__}: {e}>"

    def do_display(self, arg: str) -> None:
        """display [expression]
        Show the expression's value now and at each later stop where it has changed (with its old value).
        Without argument: list the displayed expressions."""
        if not arg:
            self.out("Currently displaying:" if self.displays else "no expressions displayed")
            for expr, value in self.displays.items():
                self.out(f"{expr}: {value}")
            return
        value = self._value(arg) if self.frame is not None else None
        self.displays[arg] = value
        if value is not None:
            self.out(f"display {arg}: {value}")

    def do_undisplay(self, arg: str) -> None:
        """undisplay [expression]
        Stop displaying the expression; all of them without argument."""
        if arg and arg not in self.displays:
            raise KeyError(f"not displaying {arg!r} (display lists them)")
        for expr in [arg] if arg else list(self.displays):
            del self.displays[expr]

    def show_displays(self) -> None:
        """At a stop: each displayed expression whose value changed, as pdb (`display e: new  [old: old]`)."""
        for expr, old in self.displays.items():
            new = self._value(expr)
            if new != old:
                self.out(f"display {expr}: {new}" + (f"  [old: {old}]" if old is not None else ""))
                self.displays[expr] = new

    def show_line(self, frame: Frame) -> None:
        for text in frame.source(0):
            self.out(text)


class _Loc:
    """A file and line to test a breakpoint's `matches` against."""

    def __init__(self, file: str, line: int) -> None:
        self.file, self.line = file, line
