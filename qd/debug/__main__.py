"""`python -m qd.debug script.py [args]`: run a script with the kernel debugger on the terminal.

Before the script starts, set breakpoints (`b file:line [if cond]`, or `b line` in the script itself) and type `c` (or `s` to stop at
the first line of the first kernel launch). A failed kernel check (bounds, assert, adstack overflow)
opens the post-mortem debugger at the failing thread and line.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback

from qd.debug.console import Console
from qd.debug.postmortem import post_mortem
from qd.debug.session import Debugger

_USAGE = "usage: python -m qd.debug script.py [args...]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        return 2
    console = Console(main_file=argv[0])
    dbg = Debugger(console)
    if not console.setup(dbg):
        return 0
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    try:
        with dbg:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    except Exception as e:
        sys.stderr.flush()
        traceback.print_exc(file=console.stdout)
        return _post_mortem(console, e)
    console.out("the program finished")
    return 0


def _post_mortem(console: Console, exc: BaseException) -> int:
    pm = Debugger(console)
    try:
        console.out("post mortem: re-running the failing thread")
        post_mortem(pm, exc)
    except ValueError as e:
        console.out(f"no post mortem: {e}")
    else:
        if not (pm.failure or "").startswith("check failed"):
            console.out(pm.failure or "")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
