"""A debugged launch: a host tier's launch (`qd.runtime.launch`) with the followed threads walked in Python.

Same compiled instance, same buffers, same register template, same status/print/return buffers.
Serial tasks are walked. A range task runs its unfollowed indices in the interpreter
(`Launch.run_range_window`, in index order, one thread) and walks each followed index in between,
so the memory effects happen in the order of a one-thread run and results equal an undebugged
launch (float atomics aside, whose order is unspecified anyway).
"""

from __future__ import annotations

from typing import Any, Sequence

from qd import _launch as _clib
from qd.base import config
from qd.debug.walker import LaunchEnv, Thread, Tracer
from qd.runtime import launch as L


class Policy(Tracer):
    """What the debugger decides per launch: which threads of a range task to walk."""

    def followed(self, task_id: int, begin: int, end: int, after: int) -> int | None:
        """The smallest followed index in [max(begin, after), end), or None."""
        ...


def debug_launch(ck: L.CompiledKernel, bindings: Sequence[Any], args: Sequence[Any], policy: Policy) -> Any:
    """Runs one launch of `ck` with `policy` walking the threads it follows; returns like `launch`."""
    cfg = config.current()
    sc = L._Scratch(ck)
    nthreads, owners, arrays = L.prepare(ck, bindings, args, sc.heap)
    seed, launch_id = int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, _clib.next_launch_id()
    st = sc.launch
    st.start(arrays, seed, launch_id, nthreads)
    tpl = L._template(ck, sc, args)
    env = LaunchEnv.make(ck.ir, arrays=arrays, args=list(args), status=sc.status, printbuf=sc.printbuf,
                         printlen=sc.printlen, rets=sc.rets, seed=seed, launch_id=launch_id)
    rc = _run_tasks(ck, st, tpl, env, policy, L.task_order(ck.ir, len(ck.code.tasks), arrays))
    return L.finish(ck, sc, rc, owners, arrays, args, ck.code.prints, ck.code.check_args)


def _run_tasks(ck: L.CompiledKernel, st: Any, tpl: Any, env: LaunchEnv, policy: Policy, order: Any) -> int:
    """The tasks in launch order (`qd.graph.do_while` loops repeat theirs: `launch.task_order`)."""
    rc = 0
    for task_id in order:
        t = ck.code.tasks[task_id]
        if t.kind == "serial":
            rc = Thread(env, task_id, 0, policy).run()
        else:
            rc = _run_range(st, tpl, t, task_id, env, policy)
        if rc != 0:
            break
    return rc


def _run_range(st: Any, tpl: Any, t: Any, task_id: int, env: LaunchEnv, policy: Policy) -> int:
    args = (t.prologue, t.code, tpl, t.var, t.begin, t.end, task_id)
    rc, begin, end = st.run_range_window(*args, 0, 0)  # the prologue alone: [begin, end)
    cur = begin
    while rc == 0 and cur < end:
        nxt = policy.followed(task_id, begin, end, cur)
        stop = end if nxt is None else nxt
        if stop > cur:
            rc = st.run_range_window(*args, cur, stop)[0]
        if rc != 0 or nxt is None:
            break
        th = Thread(env, task_id, nxt, policy)
        rc = th.run_prologue() or th.run()
        rc = 1 if rc == 1 else 0  # `return` is serial-only; a finished thread goes on
        cur = nxt + 1
    return rc
