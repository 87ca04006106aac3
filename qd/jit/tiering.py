"""Tiering (DESIGN §7): which tier runs a launch of a kernel instance on `qd.cpu`.

`jit="auto"`: the first launch starts a background compile (compiler threads, one per compile worker process,
`qd.jit.compile_worker`: LLVM is serialised within a process)
and runs in the interpreter; every later launch runs the native code, waiting for it where it is not ready
yet (a switch that hung on the compiler's timing made two runs of one program differ where the tiers round
differently: `fast_math`, transcendentals within their ulps; Genesis' box scene did). A first launch whose
predicted work (elements bound × bytecode length) is large compiles at once instead, since the
interpreter would take longer than compiling: quickly (O1 with the loop vectorizer, machine code at O0:
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

from qd import ir
from qd.base import config, gcpause

# Interpreting above this many predicted bytecode instructions costs more than compiling (~50 ms).
WAIT_FOR_COMPILER_WORK = 4_000_000
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
    size: int | None = None  # `_predicted_work`'s instructions per element
    trips: int = 0  # the largest trip count of a range task with constant bounds

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
    with gcpause.paused():  # (module building allocates as the frontend does: `qd/base/gcpause.py`)
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


def _predicted_work(st: TierState, k: ir.KernelIR, arrays: Sequence[Any]) -> int:
    """Elements bound (or the iterations of a loop with constant bounds, such as a constant `qd.ndrange`, where
    more) × the kernel's IR statements, in the interpreter's instructions (about 2 per 3 statements); from the
    IR, so that a launch that goes native never lowers the bytecode."""
    if st.size is None:
        st.size = sum(1 for t in k.tasks for b in (t.prologue, t.body) for _ in ir.walk(b)) * 2 // 3
        st.trips = max((t.end.value - t.begin.value for t in k.tasks if t.kind == "range"
                        and isinstance(t.begin, ir.Const) and isinstance(t.end, ir.Const)), default=0)
    return max(max((getattr(a, "size", 0) for a in arrays), default=0), st.trips) * st.size


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


def native_for(st: TierState, k: ir.KernelIR, arrays: Sequence[Any]) -> Any:
    """The NativeKernel to run this launch of `k` (its tier state `st`) with, or None for the interpreter."""
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
            work = _predicted_work(st, k, arrays)
            quick_now = first and st.native is None and st.future is None \
                and WAIT_FOR_COMPILER_WORK < work <= QUICK_WORK_LIMIT
            if quick_now:
                _quick(st, k)  # this launch waits for native code: the quick kind (or the cached one)
            # the optimised code is compiled in the background, from the next launch on after a quick compile (the
            # compiler would share the cores with this launch)
            if st.future is None and not st.failed and (st.native is None or (st.native.quick and not quick_now)):
                st.future = _pool().submit(_compile, k, False, _options())
            # every launch after the first runs the optimised code, waiting for it: the tiers may round differently
            # (fast_math; transcendentals within their ulps), so which one runs a launch must not hang on the
            # compiler's timing, or two runs of one program differ
            if st.future is not None and (not first or (st.native is None and work > WAIT_FOR_COMPILER_WORK)):
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
