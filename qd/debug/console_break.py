"""The console's breakpoint commands (pdb's): break, tbreak, clear, disable, enable, condition, ignore.

A mixin of `qd.debug.console.Console`, which supplies `dbg` (the `Debugger`), `frame` (the stopped frame or
None before the program runs), `main_file` and `out`. Where a breakpoint may go is decided by
`qd.debug.lines` (pdb's refusals, and host code refused); its numbering and hit logic are the debugger's.
"""

from __future__ import annotations

import os

from qd.debug import lines
from qd.debug.lines import BreakpointError
from qd.debug.session import Breakpoint


class BreakCommands:
    def _split_condition(self, rest: str) -> tuple[str, str | None]:
        """`where, cond` of `12, i > 3` (pdb) or `12 if i > 3`."""
        head = rest.partition(",")[0]
        where, _, cond = rest.partition(" if ") if " if " in head else rest.partition(",")
        return where.strip(), cond.strip() or None

    def _location(self, where: str) -> str:
        """`file:line` for a `b` argument: file:line, a line of the current file (the script before the program
        runs, as pdb), or the name of a @qd.kernel / @qd.func, alone or as file:function (its first line where a
        thread stops)."""
        if ":" in where:
            path, _, name = where.rpartition(":")
            if name.strip().lstrip("-").isdigit() or not name.strip().isidentifier():
                return where
            path, line = lines.function_start(name.strip(), {}, [os.path.abspath(path.strip())])
            return f"{path}:{line}"
        if where.lstrip("-").isdigit():
            file = self.frame.here().file if self.frame is not None else self.main_file
            if file is None:
                raise BreakpointError("give file:line before the program runs")
            return f"{os.path.abspath(file)}:{where}"
        if not where.replace(".", "_").isidentifier():
            raise BreakpointError(f"give file:line, a line number or a function name, not {where!r}")
        namespace = self.frame.namespace() if self.frame is not None else {}
        files = [f for f in (self.frame.here().file if self.frame is not None else None, self.main_file) if f]
        path, line = lines.function_start(where, namespace, files)
        return f"{path}:{line}"

    def _set_break(self, arg: str, temporary: bool) -> None:
        if not arg:
            self._list_breaks()
            return
        where, cond = self._split_condition(arg)
        loc = self._location(where)
        bp = self.dbg.break_at(loc, cond, self.main_file, temporary=temporary)
        name = where.rpartition(":")[2].strip()
        if not name.lstrip("-").isdigit():
            bp.note = f"the first line of {name} where a thread stops"
        self.out(f"{bp}" + (f" ({bp.note})" if bp.note else ""))

    def do_break(self, arg: str) -> None:
        """b(reak) [ ([filename:]lineno | [filename:]function) [, condition] ]
        Set a breakpoint at a kernel line: `file:line` (a basename is enough), `line` (of the current file; of
        the script before the program runs) or the name of a @qd.kernel / @qd.func (its first line where a
        thread stops). `condition` (after a comma, or `if`) is Python over locals, `tid` and globals; it must
        be true for the breakpoint to stop (`if tid == N` also follows thread N). Refused, with the reason:
        a missing file, a line past the end (End of file), a blank or comment line (Blank or comment), host
        code outside every @qd.kernel / @qd.func, a host function. Without argument: list the breakpoints."""
        self._set_break(arg, temporary=False)

    do_b = do_break

    def do_tbreak(self, arg: str) -> None:
        """tbreak [ ([filename:]lineno | [filename:]function) [, condition] ]
        A temporary breakpoint, deleted when it first stops. Arguments as for `break`."""
        self._set_break(arg, temporary=True)

    def _list_breaks(self) -> None:
        if not self.dbg.breakpoints:
            self.out("no breakpoints")
            return
        self.out("Num Type         Disp Enb   Where")
        for bp in self.dbg.breakpoints:
            disp, enb = ("del " if bp.temporary else "keep"), ("yes" if bp.enabled else "no ")
            self.out(f"{bp.number:<3} breakpoint   {disp} {enb}   at {bp.file}:{bp.line}")
            if bp.cond:
                self.out(f"\tstop only if {bp.cond}")
            if bp.ignore:
                self.out(f"\tignore next {bp.ignore} hits")
            if bp.hits:
                self.out(f"\tbreakpoint already hit {bp.hits} time{'s' if bp.hits != 1 else ''}")

    def _numbered(self, arg: str) -> list[Breakpoint]:
        """The breakpoints numbered in `arg` (space separated); refused as a whole if one is not a breakpoint."""
        out = []
        for word in arg.split():
            if not word.isdigit():
                raise BreakpointError(f"breakpoint numbers are integers, not {word!r}")
            out.append(self.dbg.breakpoint(int(word)))
        return out

    def do_clear(self, arg: str) -> None:
        """cl(ear) [bpnumber [bpnumber ...] | filename:lineno]
        Delete the breakpoints given by number or at file:line; all of them without argument."""
        if not arg:
            gone = list(self.dbg.breakpoints)
        elif ":" in arg:
            file, _, text = arg.rpartition(":")
            gone = [bp for bp in self.dbg.breakpoints if text.strip().isdigit() and bp.line == int(text)
                    and os.path.basename(bp.file) == os.path.basename(file.strip())]
            if not gone:
                raise BreakpointError(f"there is no breakpoint at {arg}")
        else:
            gone = self._numbered(arg)
        for bp in gone:
            self.dbg.clear(bp.number)
            self.out(f"Deleted {bp}")

    do_cl = do_clear

    def do_disable(self, arg: str) -> None:
        """disable bpnumber [bpnumber ...]
        Disable the breakpoints: they neither stop nor count hits until enabled again."""
        for bp in self._numbered(arg):
            bp.enabled = False
            self.out(f"Disabled {bp}")

    def do_enable(self, arg: str) -> None:
        """enable bpnumber [bpnumber ...]
        Enable the breakpoints again."""
        for bp in self._numbered(arg):
            bp.enabled = True
            self.out(f"Enabled {bp}")

    def do_condition(self, arg: str) -> None:
        """condition bpnumber [condition]
        Set breakpoint bpnumber's condition (Python over locals, `tid` and globals); without one, the
        breakpoint becomes unconditional."""
        num, _, cond = arg.strip().partition(" ")
        bp = self._numbered(num)[0]
        self.dbg.set_condition(bp.number, cond.strip() or None)
        self.out(f"New condition set for breakpoint {bp.number}." if bp.cond
                 else f"Breakpoint {bp.number} is now unconditional.")

    def do_ignore(self, arg: str) -> None:
        """ignore bpnumber [count]
        Pass breakpoint bpnumber the next `count` times it is reached with a true condition (0: stop next time)."""
        num, _, count = arg.strip().partition(" ")
        bp = self._numbered(num)[0]
        count = count.strip() or "0"
        if not count.lstrip("-").isdigit():
            raise BreakpointError(f"the count is an integer, not {count!r}")
        bp.ignore = max(0, int(count))
        if bp.ignore:
            self.out(f"Will ignore next {bp.ignore} crossing{'s' if bp.ignore != 1 else ''} of breakpoint "
                     f"{bp.number}.")
        else:
            self.out(f"Will stop next time breakpoint {bp.number} is reached.")
