"""The terminal front end: pdb's commands (on `cmd.Cmd`) read from a terminal, a pipe or a list of strings.

    b [file:]line|func [, cond]   breakpoint (no argument: list)   tbreak   cl [n...|file:line]
    disable / enable n...         condition n [cond]    ignore n [count]
    s / n / unt [line] / r / c    step (into funcs) / next / until a later line / return from the func / continue
    p / pp expr, a, locals        print an expression (locals, loop indices, `tid`, globals `x[i]`) / args / locals
    l [first[, last]], ll         source around the current line / the whole kernel or func
    w, u [n], d [n]               call stack across @qd.func frames; select the frame up / down
    thread [N]                    show the current thread; follow thread N (stop at its first line)
    display [expr], undisplay     show expr at each stop where it changed (no argument: list) / stop
    q                             stop debugging (the program goes on undebugged)
    h [cmd]                       this help, or a command's; an empty line repeats the last command
    j(ump) and retval are refused (help j, help retval say why)
"""

from __future__ import annotations

import cmd
import inspect
import sys
from collections.abc import Iterable
from typing import TextIO

from qd.debug.console_break import BreakCommands
from qd.debug.console_show import ShowCommands, fmt
from qd.debug.frame import Frame
from qd.debug.lines import BreakpointError
from qd.debug.session import Debugger

__all__ = ["Console", "fmt"]


class Console(BreakCommands, ShowCommands, cmd.Cmd):
    """An `on_stop` callback driven by pdb's text commands (`commands`, else lines of `stdin`)."""

    prompt = "(qd-dbg) "
    identchars = cmd.Cmd.identchars + "?"

    def __init__(self, commands: Iterable[str] | None = None, stdin: TextIO | None = None,
                 stdout: TextIO | None = None, main_file: str | None = None) -> None:
        cmd.Cmd.__init__(self, stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
        self.main_file = main_file  # the script `python -m qd.debug` runs: where `b LINE` points before a stop
        self.commands = list(commands) if commands is not None else None
        self.tty = commands is None and self.stdin is sys.stdin and self.stdin.isatty()
        self.echo = commands is not None or not self.stdin.isatty()
        self.displays: dict[str, str | None] = {}  # expression -> the value last shown
        self.dbg: Debugger | None = None
        self.frame: Frame | None = None
        self.last_listed: int | None = None
        self._resume: str | None = None
        if self.tty:
            self._use_readline()

    def _use_readline(self) -> None:
        try:
            import readline
        except ImportError:
            return
        readline.set_completer(self.complete)
        readline.set_completer_delims(" \t\n`~!@#$%^&*()-=+[{]}\\|;:'\",<>/?")
        readline.parse_and_bind("tab: complete")

    # -------------------------------------------------------------- I/O
    def out(self, text: str = "") -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def readline(self) -> str | None:
        if self.commands is not None:
            line = self.commands.pop(0) if self.commands else None
        elif self.tty:
            try:
                line = input(self.prompt)
            except EOFError:
                line = None
        else:
            raw = self.stdin.readline()
            line = raw.rstrip("\n") if raw else None
        if line is not None and self.echo:
            self.out(self.prompt + line)
        return line

    def _loop(self) -> str:
        """Runs commands until one resumes the program; returns how ("quit" at the end of the input)."""
        self._resume = None
        while self._resume is None:
            line = self.readline()
            if line is None:
                return "quit"
            self.onecmd(line)
        return self._resume

    def onecmd(self, line: str) -> bool:
        try:
            return bool(cmd.Cmd.onecmd(self, line))
        except BreakpointError as e:  # as pdb: "*** Blank or comment"
            self.out(f"*** {e}")
        except Exception as e:  # noqa: BLE001  (a command's error is shown, never fatal)
            self.out(f"*** {type(e).__name__}: {e}")
        return False

    def default(self, line: str) -> None:
        """A line that is no command is an expression to print (pdb runs it as a statement)."""
        self.do_p(line)

    # -------------------------------------------------------------- before the program runs
    def setup(self, dbg: Debugger) -> bool:
        """Reads commands until the program should run (`c`, `s`, `n`); False to quit at once."""
        self.dbg, self.frame = dbg, None
        self.out("qd debugger: set breakpoints (b file:line), then c to run; s stops at the first kernel line")
        how = self._loop()
        if how == "quit":
            return self._resume is None  # the end of the input runs the program; `q` does not
        dbg.mode = "step" if how in ("step", "next") else "continue"
        return True

    # -------------------------------------------------------------- at a stop
    def __call__(self, dbg: Debugger, frame: Frame, reason: str) -> str:
        self.dbg, self.frame, self.last_listed = dbg, frame, None
        self.out(f"> {frame.where()}  [{reason}]")
        self.show_line(frame)
        self.show_displays()
        try:
            return self._loop()
        finally:
            self.frame = None

    # -------------------------------------------------------------- resuming
    def _go(self, how: str) -> bool:
        self._resume = how
        return True

    def do_step(self, arg: str) -> bool:
        """s(tep)
        Run the current line, stopping at the next line run (in a called @qd.func too)."""
        return self._go("step")

    do_s = do_step

    def do_next(self, arg: str) -> bool:
        """n(ext)
        Run to the next line of the selected frame (calls run without stopping)."""
        return self._go("next")

    do_n = do_next

    def do_until(self, arg: str) -> bool:
        """unt(il) [lineno]
        Without argument: run until a line greater than the current one is reached in this frame (leaves a
        loop) or the frame returns. With lineno: run until a line greater than or equal to it is reached."""
        f = self._need()
        target = int(arg) if arg.strip() else 0
        if target and target <= f.here().line:
            raise ValueError(f'"until" line number {target} is not after the current line {f.here().line}')
        self.dbg.until_line = target
        return self._go("until")

    do_unt = do_until

    def do_return(self, arg: str) -> bool:
        """r(eturn)
        Run until the selected @qd.func returns (stop at its caller's line)."""
        self._need()
        return self._go("finish")

    do_r = do_finish = do_return

    def do_continue(self, arg: str) -> bool:
        """c(ont(inue))
        Run until a breakpoint stops (or a followed thread's first line)."""
        return self._go("continue")

    do_c = do_cont = do_continue

    def do_quit(self, arg: str) -> bool:
        """q(uit)
        Stop debugging: the program goes on, undebugged."""
        return self._go("quit")

    do_q = do_exit = do_quit

    def do_jump(self, arg: str) -> None:
        """j(ump) lineno
        Refused: a kernel runs as compiled IR in which each value is defined once, so skipping lines would
        leave values undefined and repeating them would redo atomics and stores; the launch would no longer
        compute what an undebugged launch computes. To run forward to a line use `until lineno` (or
        `tbreak lineno` then `c`)."""
        raise RuntimeError("jump is not supported in a kernel (help jump says why): use until LINE or tbreak LINE + c")

    do_j = do_jump

    def do_retval(self, arg: str) -> None:
        """retval | rv
        Refused: a @qd.func is inlined into its kernel and its return value is not kept once it returns.
        After `r` the caller's line is still running: `n` then `p` the variable the call was assigned to
        (or, inside the func, `p` the returned expression before it returns)."""
        raise RuntimeError("retval is not kept for an inlined @qd.func (help retval says what to do instead)")

    do_rv = do_retval

    # -------------------------------------------------------------- help and completion
    def do_help(self, arg: str) -> None:
        """h(elp) [command]
        Without argument: the list of commands. With one: its usage and what it does."""
        if not arg:
            self.out((__doc__ or "").split("\n\n", 1)[1].rstrip())
            return
        fn = getattr(self, "do_" + arg.strip(), None)
        if fn is None:
            raise KeyError(f"no command {arg.strip()!r} (h lists them)")
        self.out(inspect.cleandoc(fn.__doc__ or ""))

    do_h = do_help

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        """Names visible in the stopped frame (locals, loop indices, buffers, module globals), and after a dot
        the attributes of what precedes it."""
        if self.frame is None:
            return []
        ns = self.frame.namespace()
        if "." in text:
            head, _, tail = text.rpartition(".")
            try:
                obj = self.frame.eval(head)
            except Exception:  # noqa: BLE001  (nothing to complete)
                return []
            return [f"{head}.{a}" for a in dir(obj) if a.startswith(tail) and not a.startswith("_")]
        return sorted(n for n in ns if n.startswith(text) and not n.startswith("__"))

    def complete_help(self, text: str, *rest: object) -> list[str]:
        return self.completenames(text)
