"""The CPU tier: compiles a kernel instance's LLVM module to native code and keeps it loaded.

LLVM work is serialised by one lock (llvmlite shares one LLVM context), so the O3 compiles of background
compiles go to compile workers, other processes (`qd.jit.compile_worker`), where there are; the generated
functions are called by the Cython driver (`qd._interp.Launch.run_native_*`) through C function pointers, nogil.
Object code is cached on disk (`qd/codegen/cache.py`), so a warm process loads machine code without
running LLVM's optimiser or code generator.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from qd import ir
from qd.codegen import cache
from qd.jit import objcheck, vecmath
from qd.jit.lanes import lanes_for
from qd.jit.targets import CpuTarget

_lock = threading.RLock()
_state: dict[str, Any] = {}


@dataclass
class NativeTask:
    kind: str  # 'serial' | 'range'
    fn: int  # address of qd_task / qd_body
    prologue: int  # address of qd_prologue (range tasks), else 0
    min_parallel: int
    lanes: int = 1  # SIMD lanes of the body (`qd/jit/llvm_spmd.py`)


@dataclass
class NativeKernel:
    """A kernel instance in machine code, with the tables its status/print records refer to."""

    tasks: list[NativeTask]
    prints: list
    check_args: list
    compile_ms: float
    from_cache: bool
    _keep: list = field(default_factory=list, repr=False)  # execution engines own the code
    quick: bool = False  # compiled quickly for a first launch that waits (`qd.jit.tiering`); not the O3 code
    # (cache dir, key) of the entry this code came from until it first ran (`cache.load_with(until_confirmed)`)
    unconfirmed: tuple | None = None

    def ran(self) -> None:
        """The code ran once (`qd.runtime.launch`): a crash from here on is no fault of its cache entry."""
        if self.unconfirmed is not None:
            cache.confirm(*self.unconfirmed)
            self.unconfirmed = None


class _Loaded:
    """Machine code loaded in this process (its engine owns it) with its tables, shared by every instance whose IR
    has the same cache key: a `@qd.data_oriented` object made per use instantiates an identical kernel each time,
    which must not load its code (and keep an engine) again (Quadrants' `test_memory::test_oop_memory_leak`). Kept
    while an instance uses it (`_LOADED` holds it weakly), within one program (`forget_loaded`)."""

    __slots__ = ("__weakref__", "check_args", "ee", "prints", "quick", "tasks")

    def __init__(self, ee: Any, tasks: list, prints: list, check_args: list, quick: bool) -> None:
        self.ee, self.tasks, self.prints, self.check_args, self.quick = ee, tasks, prints, check_args, quick

    def __del__(self) -> None:
        # the last instance using the code is gone, in whatever thread the collector ran: the engine is freed
        # later under `_lock` (`_bury`), never while another thread is in LLVM (that crashed the process)
        try:
            _GRAVE.append(self.ee)
        except (AttributeError, NameError, TypeError):  # (interpreter shutdown: the module is gone, and all with it)
            pass


_GRAVE: list = []  # engines of code no instance uses any more, freed by `_bury`


def _bury() -> None:
    """Frees the engines of dropped code; the caller holds `_lock`."""
    while _GRAVE:
        _GRAVE.pop()


_LOADED: weakref.WeakValueDictionary[str, _Loaded] = weakref.WeakValueDictionary()


def forget_loaded() -> None:
    """A new program (`qd.reset`, so `qd.init`) shares no code with the one before: its instances load theirs from
    the disk cache, or compile, as any program's first instances."""
    _LOADED.clear()
    with _lock:
        _bury()


def _shared(key: str | None, quick_key: str | None) -> _Loaded | None:
    """The code of `key` (or, for a quick compile, its quick code) this process has loaded and still uses."""
    for k in (key, quick_key):
        loaded = _LOADED.get(k) if k else None
        if loaded is not None:
            return loaded
    return None


def _machine() -> tuple[Any, CpuTarget]:
    with _lock:
        if "tm" not in _state:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            vecmath.table()  # libmvec loaded before any code (cached objects too) calls into it
            target = CpuTarget()
            _state["tm"], _state["target"] = target.target_machine(), target
        return _state["tm"], _state["target"]


# A kernel in qd's IR text (`qd/ir_text.py`): an elementwise multiply-add over f32 arrays, the commonest shape
# of a large first launch.
_WARM_UP_KERNEL = """kernel qd_warm_up
  arg x : ndarray f32 buffer=@0
  arg y : ndarray f32 buffer=@1
  arg a : scalar f32
  buffer @0 = ndarray f32 ndim=1 arg=0 name="x"
  buffer @1 = ndarray f32 ndim=1 arg=1 name="y"
body {
}
tasks {
  task range %i : i32 {
    prologue {
      %n = external_shape @0, 0 : i32
      %0 = const i32 0
    }
    bounds %0 .. %n
    body {
      %a = arg_load 2 : f32
      %px = global_ptr @0 [%i] : f32
      %x = global_load %px : f32
      %ax = mul f32 %a, %x
      %py = global_ptr @1 [%i] : f32
      %y = global_load %py : f32
      %r = add f32 %ax, %y
      global_store %py, %r
    }
  }
}
"""


def warm_up(fast_math: bool) -> NativeKernel:
    """Runs a quick compile (`compile_native(quick=True)`) of a small kernel once: LLVM's one-time costs of those
    passes and of selecting vector instructions (12 ms of a saxpy's first quick compile of 20) are then paid
    here, in the background at `qd.init`, not by a first launch that waits for its code (`qd.jit.tiering`)."""
    from qd.ir_parse import parse_kernel

    return compile_native(parse_kernel(_WARM_UP_KERNEL), fast_math, use_cache=False, quick=True)


def generator_digest() -> str:
    """The digest of the LLVM generator's sources (qd/jit), part of every LLVM tier's cache key."""
    return cache.sources_digest(os.path.dirname(__file__))


def target_key() -> str:
    """What the machine code depends on besides the IR: triple, CPU and its features, LLVM."""
    _tm, target = _machine()
    return "|".join((target.triple, target.cpu_name, target.features, ".".join(map(str, llvm.llvm_version_info))))


# Above this much LLVM IR text a module is optimised without the SLP vectorizer, whose time grows faster than the
# module: Genesis' collision kernel (one 5 MB function, 86k qd statements) spent 6.5 s of its 11.4 s O3 pipeline
# there, and its Franka scene steps no slower without it; its next largest kernel (1 MB) 0.5 s of 1.0.
SLP_MAX_IR_CHARS = 2_000_000


def slp_for(text: str) -> bool:
    """Whether a module of LLVM IR `text` gets the SLP vectorizer (`SLP_MAX_IR_CHARS`)."""
    return len(text) <= SLP_MAX_IR_CHARS


# The SLP vectorizer widens a tree of scalar operations where LLVM's cost model expects any gain (its threshold,
# `-slp-threshold`, is 0); here it must expect more than this. stable_fluid's `advect` (bilinear samples of a
# 2-vector field at clamped indices) became `<2 x float>` trees with 30 extracts and 12 inserts per cell, 25%
# slower than scalar code; with the margin it runs 6.8 -> 5.1 ms (Quadrants 5.0) and the published programs' other
# kernels are where they were (diffmpm's g2p 0.044 -> 0.047 ms; bench/RESULTS.md, issue 31). A process-wide LLVM
# option: set for the CPU tier's pipeline only, under the LLVM lock, and put back after it.
SLP_THRESHOLD = 8


def _optimise(mod: Any, tm: Any, level: int = 3, slp: bool = True) -> None:
    """LLVM's O`level` pipeline over `mod`; the loop vectorizer at every level (at O1 it costs about 3 ms of a
    saxpy's compile and halves its run time; reductions run 4x faster), the SLP vectorizer from O2 where `slp`
    (with `SLP_THRESHOLD`). Below O2 the loops are neither unrolled nor interleaved: 2.5 ms of a saxpy's 7.7 ms
    pipeline, with the same run time. The caller holds `_lock` (or is a compile worker)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = level >= 2 and slp
    pto.loop_unrolling = pto.loop_interleaving = level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    if pto.slp_vectorization:
        llvm.set_option("", f"-slp-threshold={SLP_THRESHOLD}")
    try:
        pb.getModulePassManager().run(mod, pb)
    finally:
        if pto.slp_vectorization:
            llvm.set_option("", "-slp-threshold=0")


def object_code(mod: Any, fast_math: bool, quick: bool = False, slp: bool = True) -> bytes:
    """Parsed, verified `mod` optimised and lowered to this machine's object code: O3 (the SLP vectorizer where
    `slp`: `slp_for`), or with `quick` the O1 pipeline and machine code at O0 (`compile_native`). What a compile
    worker runs (`qd.jit.compile_worker`)."""
    tm, target = _machine()
    with _lock:
        _optimise(mod, tm, 1 if quick else 3, slp)
        mod = vecmath.lower(mod) if fast_math else mod
        return (target.target_machine(0) if quick else tm).emit_object(mod)


def _from_worker(k: ir.KernelIR, target: CpuTarget, fast_math: bool) -> tuple[bytes | None, Any]:
    """(object code, `BuiltModule`) of `k` from an idle compile worker; (None, None) where there is none. As
    `_parsed`, a module whose SIMD-lane bodies do not parse or verify is built again with scalar bodies."""
    from qd.jit import compile_worker
    from qd.jit.llvm import build_module

    worker = compile_worker.take()
    if worker is None:
        return None, None
    try:  # (the worker goes back to the idle ones however this ends, unless it died)
        lanes_ok = True
        while True:
            built = build_module(k, target, fast_math, lanes_ok=lanes_ok)
            try:
                return worker.compile_object(str(built.module), fast_math), built
            except compile_worker.ParseError as e:
                if not lanes_ok or not any(s.lanes > 1 for s in built.tasks):
                    raise RuntimeError(str(e)) from None
            lanes_ok = False
    finally:
        compile_worker.give_back(worker)


def _engine_for(obj: bytes) -> Any:
    """An execution engine holding object code `obj`, loaded and linked (the caller holds `_lock`)."""
    _bury()
    # llvmlite's create_mcjit_compiler takes ownership of the target machine and frees it with the
    # engine: each engine gets its own machine, or freeing one engine would free the shared one.
    tm = _machine()[1].new_target_machine(None)
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
    ee.finalize_object()
    if os.environ.get("QD_PERF_MAP", "") not in ("", "0"):
        _perf_map(ee, obj)
    return ee


def _perf_map(ee: Any, obj: bytes) -> None:
    """`QD_PERF_MAP=1`: the functions of `obj`, loaded by `ee`, are appended to /tmp/perf-PID.map, where Linux
    `perf report` finds the names of JIT code (a task's symbol names its kernel: `qd_<kernel>_<digest>_...`)."""
    lines = []
    for name, size in objcheck.function_sizes(obj).items():
        address = ee.get_function_address(name)
        if address and size:
            lines.append(f"{address:x} {size:x} {name}\n")
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as f:
        f.writelines(lines)


def _parsed(k: ir.KernelIR, target: CpuTarget, fast_math: bool) -> tuple[Any, Any, bool]:
    """(LLVM's parsed and verified module, `BuiltModule`, whether it gets the SLP vectorizer) of `k`; a module
    whose bodies in SIMD lanes do not parse or verify (a lowering bug) is built again with scalar bodies, so such a
    bug costs speed, never a kernel."""
    from qd.jit.llvm import build_module

    built = build_module(k, target, fast_math)
    text = str(built.module)
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError:
        if not any(s.lanes > 1 for s in built.tasks):
            raise
        built = build_module(k, target, fast_math, lanes_ok=False)
        text = str(built.module)
        mod = llvm.parse_assembly(text)
        mod.verify()
    return mod, built, slp_for(text)


def _load_cached(obj: bytes, meta: Any, k: ir.KernelIR) -> tuple[Any, list, list, list] | None:
    """(engine, task symbols, print table, check-arg table) of a cache entry (`cache.load_with`'s loader); None
    where its code has more SIMD lanes than the adstack heap of `k` has rows for (rebuilt, kept). An entry LLVM's
    object loader must not see (`objcheck.problem`), or whose symbols do not resolve, raises: a miss that deletes
    it (issue 27 item 13)."""
    symbols, prints, check_args = meta
    if max((getattr(s, "lanes", 1) for s in symbols), default=1) > lanes_for(k):
        return None
    names = [str(n) for s in symbols for n in (s.fn, s.prologue) if n]
    why = objcheck.problem(obj, names)
    if why is not None:
        raise ValueError(f"cached object refused: {why}")
    with _lock:
        ee = _engine_for(obj)
        if not all(ee.get_function_address(n) for n in names):
            raise ValueError("cached object refused: a task's symbol does not resolve")
    return ee, list(symbols), prints, check_args


def compile_native(k: ir.KernelIR, fast_math: bool, use_cache: bool = True,
                   cache_dir: str | None = None, quick: bool = False) -> NativeKernel:
    """Offloaded `k` -> NativeKernel, from the disk cache when an entry for this IR and machine exists.
    `quick`: on a miss, the O1 pipeline with the loop vectorizer, and machine code generated at O0 (LLVM's
    fast instruction selection and register allocator: 2 ms for a saxpy where O1's take 7); about half the
    compile time of O3. Quick code is cached under its own key: a later process loads it (still `quick`, so
    tiering compiles the O3 code in the background) until the O3 code is in the cache."""
    t0 = time.perf_counter()
    _, target = _machine()
    key = cache.key_for(k, f"{target_key()}|{generator_digest()}", fast_math) if use_cache else None
    hit = cache.load_with(cache_dir, key, lambda obj, meta: _load_cached(obj, meta, k), True) if key else None
    quick_key = f"{key}-quick" if key and quick else None
    shared = _shared(key, quick_key)
    if shared is not None:
        return NativeKernel(list(shared.tasks), shared.prints, shared.check_args, (time.perf_counter() - t0) * 1e3,
                            True, [shared], shared.quick)
    from_quick = False
    if hit is None and quick_key:  # the quick code a process before this one made (no O3 code yet)
        hit = cache.load_with(cache_dir, quick_key, lambda obj, meta: _load_cached(obj, meta, k), True)
        from_quick = hit is not None
    # a miss of the O3 code: LLVM's work in a compile worker, outside this process's llvmlite lock
    worker_obj, built = _from_worker(k, target, fast_math) if hit is None and not quick else (None, None)
    with _lock:
        if hit is not None:
            ee, symbols, prints, check_args = hit
            quick = from_quick
        elif worker_obj is not None:
            _, symbols, prints, check_args = built
            ee = _engine_for(worker_obj)
            if key:
                cache.store(cache_dir, key, worker_obj, (symbols, prints, check_args))
        else:  # (in this process: no workers, or a quick compile, whose first launch is waiting for it)
            mod, (_, symbols, prints, check_args), slp = _parsed(k, target, fast_math)
            obj = object_code(mod, fast_math, quick, slp)
            ee = _engine_for(obj)
            store_key = quick_key if quick else key  # (quick code is kept for the next process too)
            if store_key:
                cache.store(cache_dir, store_key, obj, (symbols, prints, check_args))
        tasks = [NativeTask(s.kind, ee.get_function_address(s.fn),
                            ee.get_function_address(s.prologue) if s.prologue else 0,
                            2 if s.heavy else 4096, getattr(s, "lanes", 1)) for s in symbols]
        loaded = _Loaded(ee, tasks, prints, check_args, quick)
        if key:
            _LOADED[quick_key if quick else key] = loaded
    ms = (time.perf_counter() - t0) * 1e3
    unconfirmed = (cache_dir, quick_key if from_quick else key) if hit is not None else None
    return NativeKernel(list(tasks), prints, check_args, ms, hit is not None, [loaded], quick, unconfirmed)
