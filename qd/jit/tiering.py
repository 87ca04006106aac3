"""Tiering (DESIGN §7): which tier runs a launch of a kernel instance on `qd.cpu`.

`jit="auto"`: the first launch starts a background compile (compiler threads, one per compile worker process,
`qd.jit.compile_worker`: LLVM is serialised within a process)
and runs in the interpreter; every later launch runs the native code, waiting for it where it is not ready
yet (a switch that hung on the compiler's timing made two runs of one program differ where the tiers round
differently: `fast_math`, transcendentals within their ulps; Genesis' box scene did). A first launch whose
predicted work (`_predicted_work`: the instructions its loops would run, where their trip counts are known
before the launch) is large for the kernel's size compiles at once instead, since the interpreter would take
longer than compiling: quickly (O1 with the loop vectorizer, machine code at O0:
about half the time of O3; up to `QUICK_WORK_LIMIT`, above which the launch waits for the O3 code), while
the background compiler makes the optimised code that the later launches run (launch plans take the
optimised code only). `jit="eager"` compiles before the first launch; `jit="interp"` never
compiles. `QD_JIT` overrides `qd.init(jit=...)` (read by the config). A background compile takes the
options it depends on when it is asked for, never those of a later `qd.init`.
Both tiers share the program's memory. Which tier runs a launch depends on its number and predicted work only.
Launches of one instance may come from several Python threads: what a launch decides and changes in its
`TierState` it does under the state's lock (one thread compiles quick or eager code while the others wait
for it; one background compile is asked for), and a launch waiting for the background compiler waits
outside it. A launch keeps the native code it chose even if a later one replaces it (quick by optimised).

Each instance's `TierState.stats` says how many launches each tier ran, which tier ran last and how
long compilation took; `Kernel.stats` (frontend) aggregates them.
"""

from __future__ import annotations

import concurrent.futures as cf
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from qd import ir
from qd.base import config, gcpause, scoped_profiler
from qd.ops import Op

# A first launch predicted to run more bytecode instructions than this, plus `WAIT_PER_STATEMENT` per statement of
# the kernel, waits for native code: interpreting it would cost more than compiling. A small kernel compiles in
# ~50 ms; a kernel's compile time grows with its size (on 2 cores, ~0.1 ms a statement quick and 0.25 ms at O3,
# where lowering it to bytecode takes ~0.05 ms), and the interpreter runs an instruction in a few ns.
WAIT_FOR_COMPILER_WORK = 4_000_000
WAIT_PER_STATEMENT = 4_000
# Up to this much predicted work a waiting first launch runs quick code (compiled in about half the time); above
# it, the slower quick code would cost more than the compile time saved: the launch waits for the O3 code.
QUICK_WORK_LIMIT = 1 << 28

_executor: cf.ThreadPoolExecutor | None = None
_warming: cf.Future | None = None  # the process's warm-up (`prewarm`)
_executor_lock = threading.Lock()


def _pool() -> cf.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            from qd.jit import compile_worker

            # one thread per compile worker (LLVM's work is theirs); one where there are none (LLVM in-process is
            # serialised anyway)
            threads = max(1, compile_worker.count())
            _executor = cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="qd-compiler")
        return _executor


@dataclass
class TierState:
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    native: Any = None
    future: cf.Future | None = None
    failed: bool = False
    counts: dict = field(default_factory=lambda: {"launches": {"interp": 0, "cpu": 0}, "last_tier": None,
                                                  "compile_ms": None, "from_cache": None})
    plan: Any = None  # the instance's compiled launch plan (`qd/_launch.pyx`): its launches are native ones
    planned: int = 0  # the plan's launch count when the Python path last launched
    size: int | None = None  # the kernel's statements (`_predicted_work`)
    work: int | None = None  # its predicted instructions, where they do not depend on the launch's arguments

    @property
    def stats(self) -> dict:
        out = dict(self.counts, launches=dict(self.counts["launches"]))
        n = self.plan.launches if self.plan else 0
        out["launches"]["cpu"] += n
        if n > self.planned:
            out["last_tier"] = "cpu"
        return out


def _options() -> tuple:
    """What a compile depends on in the live config, taken when it is asked for (a background compile
    finishing after a `qd.init` must not read the new program's options or write its cache)."""
    from qd.codegen import cache

    cfg = config.current()
    return bool(cfg.fast_math), bool(cfg.offline_cache), cache.default_dir()


def _compile(k: ir.KernelIR, quick: bool = False, options: tuple | None = None) -> Any:
    from qd.jit.cpu import compile_native

    fast_math, use_cache, cache_dir = options or _options()
    with gcpause.paused(), scoped_profiler.phase(k.name, "codegen cpu quick" if quick else "codegen cpu"):
        # (module building allocates as the frontend does: `qd/base/gcpause.py`)
        return compile_native(k, fast_math, use_cache=use_cache, cache_dir=cache_dir, quick=quick)


def _quick(st: TierState, k: ir.KernelIR) -> None:
    """The first native code of an instance whose first launch waits for it: quick code now (about half the
    compile time), the optimised code from the background compiler later."""
    try:
        st.native = _compile(k, quick=True)
    except Exception as e:  # noqa: BLE001  a codegen failure must not stop a working program
        _failed(st, e)


def _failed(st: TierState, e: Exception) -> None:
    st.failed = True
    sys.stderr.write(f"[qd] warning: native compilation failed, staying on the interpreter: {e!r}\n")


def _record(st: TierState, tier: str) -> None:
    c = st.counts
    c["launches"][tier] += 1
    c["last_tier"] = tier
    st.planned = st.plan.launches if st.plan else 0
    if st.native is not None:
        c["compile_ms"] = st.native.compile_ms
        c["from_cache"] = st.native.from_cache


_INT_OPS = {Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
            Op.FLOORDIV: lambda a, b: a // b if b else None, Op.MIN: min, Op.MAX: max}


class _LaunchValues:
    """The integers a launch knows before it runs: constants, ndarray extents, integer scalar arguments, and
    `+ - * // min max` and integer casts of those (`used`: whether an extent or an argument was read)."""

    def __init__(self, arrays: Sequence[Any], args: Sequence[Any]) -> None:
        self.arrays, self.args, self.used = arrays, args, False

    def of(self, v: ir.Value | None) -> int | None:
        """`v`'s value, or None where it is read from memory or computed by the kernel."""
        if isinstance(v, ir.Const):
            return int(v.value) if isinstance(v.value, (int, np.integer)) else None
        if isinstance(v, ir.ExternalShape):
            self.used = True
            shape = getattr(self.arrays[v.buffer], "shape", ()) if v.buffer < len(self.arrays) else ()
            return int(shape[v.axis]) if v.axis < len(shape) else None
        if isinstance(v, ir.ArgLoad):
            self.used = True
            a = self.args[v.index] if v.index < len(self.args) else None
            return int(a) if isinstance(a, (int, np.integer)) and not isinstance(a, bool) else None
        if isinstance(v, ir.OpStmt) and not v.dtype.is_float:
            if v.op is Op.CAST and len(v.args) == 1 and not v.args[0].dtype.is_float:
                return self.of(v.args[0])
            fn = _INT_OPS.get(v.op)
            if fn is not None and len(v.args) == 2:
                a, b = self.of(v.args[0]), self.of(v.args[1])
                return fn(a, b) if a is not None and b is not None else None
        return None

    def trips(self, begin: ir.Value | None, end: ir.Value | None) -> int:
        """A loop's trip count; 1 where a bound is unknown before the launch (read from memory: counted once)."""
        lo, hi = self.of(begin), self.of(end)
        return max(hi - lo, 0) if lo is not None and hi is not None else 1


def _predicted_work(st: TierState, k: ir.KernelIR, arrays: Sequence[Any], args: Sequence[Any]) -> int:
    """The bytecode instructions (about 2 per 3 statements) the interpreter would run for this launch: every
    statement once per trip of the loops around it, range tasks included, where a loop's bounds are known before
    the launch (constants, extents, scalar arguments; `_LaunchValues`); a loop whose bounds are read from memory
    counts once (Genesis' solver loops over counts in fields: its first launches interpret). From the IR, so
    that a launch that goes native never lowers the bytecode."""
    if st.work is not None:
        return st.work
    values = _LaunchValues(arrays, args)
    size = work = 0
    for t in k.tasks:
        stack = [(t.prologue, 1), (t.body, values.trips(t.begin, t.end) if t.kind == "range" else 1)]
        while stack:  # (explicit: an `elif` chain nests as deep as it is long)
            block, times = stack.pop()
            size += len(block.stmts)
            work += times * len(block.stmts)
            for s in block.stmts:
                inner = times * values.trips(s.begin, s.end) if isinstance(s, ir.RangeFor) else times
                stack.extend((b, inner) for b in s.blocks())
    st.size = size
    work = work * 2 // 3
    if not values.used:
        st.work = work
    return work


def _waits(st: TierState, work: int) -> bool:
    """Whether a first launch of predicted `work` waits for native code (`WAIT_FOR_COMPILER_WORK`)."""
    return work > WAIT_FOR_COMPILER_WORK + WAIT_PER_STATEMENT * (st.size or 0)


def _finish(st: TierState, fut: cf.Future) -> Any:
    """The background compile's code in `st` (waiting for it, outside the state's lock); the native code now."""
    try:
        native, error = fut.result(), None
    except Exception as e:  # noqa: BLE001  a codegen failure must not stop a working program
        native, error = None, e
    with st.lock:
        if error is not None:
            if not st.failed:  # (every waiting launch sees the failure: one warning)
                _failed(st, error)
        elif st.native is None or st.native.quick:
            st.native = native
        return st.native


def interpreted(st: TierState) -> None:
    """Counts a launch the interpreter runs on a tier that never compiles (`qd.runtime.launch.InterpTier`)."""
    with st.lock:
        _record(st, "interp")


def eager(st: TierState, k: ir.KernelIR, launch: bool = False) -> Any:
    """The optimised native code of `k`, compiled now where there is none yet (None where compiling failed);
    `launch`: a launch runs it (counted)."""
    with st.lock:
        if st.native is None and not st.failed:
            try:
                st.native = _compile(k)
            except Exception as e:  # noqa: BLE001  a codegen failure must not stop a working program
                _failed(st, e)
        if launch:
            _record(st, "cpu" if st.native is not None else "interp")
        return st.native


def native_for(st: TierState, k: ir.KernelIR, arrays: Sequence[Any], args: Sequence[Any] = ()) -> Any:
    """The NativeKernel to run this launch of `k` (its tier state `st`; its buffers' `arrays`, its arguments
    `args`) with, or None for the interpreter."""
    cfg = config.current()
    mode = str(cfg.jit)
    wait = None
    with st.lock:
        if mode == "interp" or st.failed:
            _record(st, "interp")
            return None
        if st.native is None and mode == "eager":
            st.native = _compile(k)  # (the other threads launching it wait for this one's code)
        elif st.native is None or st.native.quick:
            first = not any(st.counts["launches"].values())
            work = _predicted_work(st, k, arrays, args) if first else 0  # (only a first launch's decides)
            quick_now = first and st.native is None and st.future is None \
                and _waits(st, work) and work <= QUICK_WORK_LIMIT
            if quick_now:
                _quick(st, k)  # this launch waits for native code: the quick kind (or the cached one)
            # the optimised code is compiled in the background, from the next launch on after a quick compile (the
            # compiler would share the cores with this launch)
            if st.future is None and not st.failed and (st.native is None or (st.native.quick and not quick_now)):
                st.future = _pool().submit(_compile, k, False, _options())
            # every launch after the first runs the optimised code, waiting for it: the tiers may round differently
            # (fast_math; transcendentals within their ulps), so which one runs a launch must not hang on the
            # compiler's timing, or two runs of one program differ
            if st.future is not None and (not first or (st.native is None and _waits(st, work))):
                wait = st.future
        if wait is None:
            _record(st, "cpu" if st.native is not None else "interp")
            return st.native
    native = _finish(st, wait)
    with st.lock:
        _record(st, "cpu" if native is not None else "interp")
    return native


def _warm_up() -> None:
    """Loads the compile pipeline, initialises LLVM (and runs its quick compile once) and starts the OpenMP
    threads, so the first launch of the program pays for none of it."""
    import numpy as np

    import qd.bytecode.lower  # noqa: F401
    import qd.ir_text  # noqa: F401
    import qd.jit.llvm  # noqa: F401
    import qd.passes.runner  # noqa: F401
    from qd import _sizer
    from qd.jit import cpu

    cpu.warm_up(bool(config.current().fast_math))
    _sizer.reduce_max_i64(np.zeros(64, np.int64), 0, int(config.current().cpu_max_num_threads or 1))


def prewarm() -> None:
    """Called by `qd.init` for `qd.cpu`: imports the compiler (here: `llvmlite.binding`'s import is about
    45 ms, 34 of them Python holding the interpreter lock, which a background thread would only interleave with
    the program's own Python, and a first launch right after `qd.init` would wait for), then warms it up in the
    background (LLVM's target, a quick compile, the OpenMP threads: mostly outside the interpreter lock)."""
    global _warming
    if str(config.current().jit) != "interp":
        try:
            import qd.jit.cpu  # noqa: F401
        except Exception:  # noqa: BLE001  a broken llvmlite: the first compile reports it, launches interpret
            return
        if _warming is None:  # once a process: what it warms up stays warm across `qd.init`s
            _warming = _pool().submit(_warm_up)
