"""Post-mortem debugging: re-run the thread whose check failed in a launch, stopped at the failing line.

The failed launch's frame (found in the exception's traceback) holds the compiled instance, its
buffers and its status buffer, which names the check and the thread. The thread is walked again on
copies of the buffers as they were left by the failed launch (the failing launch's other threads
have already written theirs), so a debugger session cannot change the program's data.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from qd import ir
from qd.base import abi, config
from qd.debug.session import Debugger
from qd.debug.walker import LaunchEnv, Thread
from qd.runtime import launch as L

_LAUNCH_FILES = {os.path.abspath(L.__file__), os.path.abspath(os.path.join(os.path.dirname(__file__), "runner.py"))}


def failed_launch(exc: BaseException) -> dict[str, Any]:
    """The locals of the innermost launch frame (a host tier's `_host_launch` or `debug_launch`) in `exc`'s
    traceback."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in ("_host_launch", "debug_launch") and os.path.abspath(code.co_filename) in _LAUNCH_FILES:
            found = tb.tb_frame.f_locals
        tb = tb.tb_next
    if found is None or "sc" not in found or "arrays" not in found:
        raise ValueError("the exception did not come from a kernel launch's check")
    return found


def task_of_check(k: ir.KernelIR, check: int) -> int:
    for i, t in enumerate(k.tasks):
        for s in list(ir.walk(t.prologue)) + list(ir.walk(t.body)):
            if isinstance(s, ir.Check) and s.check == check:
                return i
    raise ValueError(f"check {check} is in no task of {k.name}")


def post_mortem(dbg: Debugger, exc: BaseException) -> Thread:
    """Walks the failing thread of the launch that raised `exc` under `dbg` (which stops at the failing
    check: `Debugger.failed`); returns the walked thread."""
    loc = failed_launch(exc)
    ck, sc, args = loc["ck"], loc["sc"], list(loc["args"])
    status = np.array(sc.status)
    if not status[abi.STATUS_FLAG]:
        raise ValueError("the failed launch's status was overwritten by a later launch of the same kernel")
    check, tid = int(status[abi.STATUS_CHECK]), int(status[abi.STATUS_TID])
    arrays = [None if a is None else np.array(a, copy=True) for a in loc["arrays"]]
    cfg = config.current()
    env = LaunchEnv.make(ck.ir, arrays=arrays, args=args, status=np.zeros_like(sc.status),
                         printbuf=np.zeros_like(sc.printbuf), printlen=np.zeros(1, np.int64),
                         rets=np.zeros_like(sc.rets), seed=int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF,
                         launch_id=int(loc.get("launch_id", 0)))
    task_id = task_of_check(ck.ir, check)
    th = Thread(env, task_id, tid, dbg)
    if ck.ir.tasks[task_id].kind != "range" or not th.run_prologue():
        th.run()
    if dbg.failure is None:
        dbg.failure = "the thread did not fail again (the failed launch changed the data it reads)"
    return th


def last_exception() -> BaseException:
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None) or sys.exc_info()[1]
    if exc is None:
        raise ValueError("no exception to debug post mortem")
    return exc
