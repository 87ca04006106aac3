"""Offloaded `KernelIR` -> PTX for NVIDIA GPUs, through the shared LLVM code generator (`qd.jit.llvm`)
with `NvptxTarget` (DESIGN §10).

`compile_ptx(k, fast_math, arch)` builds the module, links libdevice when a math function needs it
(`libdevice_path()`: `QD_LIBDEVICE`, the CUDA toolkit's `nvvm/libdevice/libdevice.10.bc`, or the
`nvidia-cuda-nvcc` wheel's copy), keeps only the task kernels external, runs LLVM's O3 pipeline for the
target (NVVMReflect resolves libdevice's `__nvvm_reflect` queries: no flush-to-zero, IEEE division and
square root, as the op table promises) and emits PTX text. `ptxas(ptx, arch)` assembles it offline with
the toolkit's `ptxas` (the CI check where no GPU is present).

A large kernel (`SPLIT_STATEMENTS`) becomes several modules, each large task alone and the small ones together
(`task_groups`), optimised side by side in the compile workers (`qd.jit.compile_worker`: llvmlite runs one LLVM call
at a time per process), and the CUDA tier makes their machine code side by side too: a cold Genesis build compiled
`kernel_detection`, 15 tasks, one after another for 23 s. The modules are built one at a time, the largest first, and
each goes on (LLVM in a worker, then the caller's `each`: the CUDA tier's driver compile) while the next is built.
`PtxKernel.modules` holds the texts, `module_of` each task's module; `ptx` joins them (`MODULE_MARK`), as the disk
cache keeps them.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from qd import ir
from qd.jit.targets import NvptxTarget

_targets: dict[str, NvptxTarget] = {}


# A kernel of at least this many statements is compiled as several modules side by side; in it a task of at least
# `ALONE_STATEMENTS` has a module of its own, and the smaller tasks share one.
SPLIT_STATEMENTS = 4000
ALONE_STATEMENTS = 1000
MODULE_MARK = "\n// qd: the next module\n"
_pool: ThreadPoolExecutor | None = None


@dataclass
class PtxKernel:
    """A kernel instance as PTX: per task its kind and kernel name, and the host tables of the launch."""

    ptx: str  # the modules' texts joined by `MODULE_MARK`
    tasks: list  # per task: (kind, kernel symbol)
    prints: list
    check_args: list
    from_cache: bool = False
    cache_key: str | None = None  # its entry in the disk cache (`discard`ed when the driver refuses the PTX)
    module_of: list = field(default_factory=list)  # per task: its module's index in `modules` (default: all 0)
    made: list | None = None  # per module: what `compile_ptx`'s `each` gave for it (None: not applied)

    @property
    def modules(self) -> list[str]:
        return self.ptx.split(MODULE_MARK)


def pool() -> ThreadPoolExecutor:
    """The threads a kernel's modules are compiled by (each waits on a compile worker or the driver)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="qd-gpu-compile")
    return _pool


def libdevice_path() -> str | None:
    """Where libdevice lies: `QD_LIBDEVICE`, the CUDA toolkit, or the `nvidia-cuda-nvcc` wheel; None if nowhere."""
    env = os.environ.get("QD_LIBDEVICE")
    if env:
        return env if os.path.exists(env) else None
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", "/usr/lib/cuda"]
    for root in filter(None, roots):
        hits = sorted(glob.glob(os.path.join(root, "nvvm", "libdevice", "libdevice*.bc")))
        if hits:
            return hits[-1]
    try:
        import nvidia.cuda_nvcc as wheel  # type: ignore[import-not-found]

        hits = sorted(glob.glob(os.path.join(os.path.dirname(wheel.__file__), "nvvm", "libdevice", "*.bc")))
        return hits[-1] if hits else None
    except ImportError:
        return None


_libdevice_bytes: bytes | None = None


def _libdevice() -> bytes:
    global _libdevice_bytes
    if _libdevice_bytes is None:
        path = libdevice_path()
        if path is None:
            raise RuntimeError("qd: this kernel calls a math function and libdevice (libdevice.10.bc) was not found; "
                               "install the CUDA toolkit or the nvidia-cuda-nvcc-cu12 wheel "
                               "(pip install \"qd-lang[cuda]\"), or set QD_LIBDEVICE=<path>")
        with open(path, "rb") as f:
            _libdevice_bytes = f.read()
    return _libdevice_bytes


def target(arch: str = "sm_90") -> NvptxTarget:
    t = _targets.get(arch)
    if t is None:
        t = _targets[arch] = NvptxTarget(arch)
    return t


def warm_up(arch: str = "sm_90") -> str:
    """Loads LLVM and runs its NVPTX pipeline once over a one-store kernel: the first real compile of the process
    then costs what later ones do (`CudaBackend` calls this in the background when the device opens). Returns
    the PTX, for the driver's compiler to be warmed with."""
    import llvmlite.binding as llvm

    from qd.jit.cpu import _lock

    with _lock:
        t = target(arch)
        mod = llvm.parse_assembly(f'target triple = "{t.triple}"\ntarget datalayout = "{t.data_layout}"\n'
                                  "define ptx_kernel void @qd_warm_up(ptr %p) {\n"
                                  "  store i32 0, ptr %p\n  ret void\n}\n")
        pb = llvm.create_pass_builder(t.target_machine(), llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        return t.target_machine().emit_assembly(mod)


def compile_ptx(k: ir.KernelIR, fast_math: bool, arch: str = "sm_90", cache_dir: str | None = None,
                each: Callable[[str], Any] | None = None, undo: Callable[[Any], None] | None = None) -> PtxKernel:
    """The PTX of offloaded kernel `k` for GPU architecture `arch` (see the module docstring); with
    `cache_dir`, from / to the on-disk cache (`qd/codegen/cache.py`'s key: IR text, target, fast_math, qd version
    and the code generator's sources; the driver keeps its own cache of the machine code it makes of PTX).

    `each` (the CUDA tier's driver module of a module's PTX) is applied to every module's PTX made here as soon as
    it is made, in the thread that made it, so that a large kernel's modules go on to the driver while others are
    still in LLVM; `PtxKernel.made` holds what it gave, per module (None on a cache hit: the caller applies it).
    Where one module fails, `undo` releases what `each` gave for the others before the error is raised."""
    from qd.codegen import cache

    generator = cache.sources_digest(os.path.dirname(__file__))  # qd/jit's sources (as the CPU tier's key)
    key = cache.key_for(k, f"ptx {arch} {generator}", fast_math) if cache_dir else None
    hit = cache.load_with(cache_dir, key, lambda raw, meta: _cached(raw, meta, key)) if key else None
    if hit is not None:
        return hit
    out = _compile(k, fast_math, arch, each, undo)
    if key:
        cache.store(cache_dir, key, out.ptx.encode(), (out.tasks, out.prints, out.check_args, out.module_of))
        out.cache_key = key
    return out


def _cached(raw: bytes, meta: tuple, key: str) -> PtxKernel:
    """The kernel of a cache entry (`cache.load_with`'s loader): an error where it is no text naming each task's
    entry point in its module (a miss that deletes it; PTX the driver then refuses is `cache.discard`ed by the CUDA
    tier)."""
    tasks, prints, check_args, module_of = meta
    ptx = raw.decode()
    tasks = [(str(kind), str(sym)) for kind, sym in tasks]
    modules = ptx.split(MODULE_MARK)
    if len(module_of) != len(tasks) or any(
            not 0 <= m < len(modules) or f".entry {sym}(" not in modules[m] for (_, sym), m in zip(tasks, module_of)):
        raise ValueError("cached PTX refused: a task's entry point is missing")
    return PtxKernel(ptx, tasks, prints, check_args, from_cache=True, cache_key=key, module_of=list(module_of))


def _sizes(k: ir.KernelIR) -> list[int]:
    return [sum(1 for _ in ir.walk(t.prologue)) + sum(1 for _ in ir.walk(t.body)) for t in k.tasks]


def task_groups(k: ir.KernelIR) -> list[list[int]]:
    """The task numbers of each module `k` is compiled as (see `SPLIT_STATEMENTS`), the largest module first (it
    is built first, and takes longest in LLVM and in the driver)."""
    sizes = _sizes(k)
    if len(sizes) < 2 or sum(sizes) < SPLIT_STATEMENTS:
        return [list(range(len(sizes)))]
    alone = [[n] for n, c in enumerate(sizes) if c >= ALONE_STATEMENTS]
    rest = [n for n, c in enumerate(sizes) if c < ALONE_STATEMENTS]
    groups = alone + [rest] if rest else alone
    return sorted(groups, key=lambda g: -sum(sizes[n] for n in g))


def _compile(k: ir.KernelIR, fast_math: bool, arch: str, each: Callable[[str], Any] | None = None,
             undo: Callable[[Any], None] | None = None) -> PtxKernel:
    """`k`'s modules, each handed to a pool thread (LLVM in a compile worker or here, then `each`) as soon as its
    LLVM IR is built (llvmlite's IR layer: Python, here, one module after another)."""
    from qd.jit.cpu import _lock
    from qd.jit.llvm import module_groups

    groups = task_groups(k)
    if len(groups) > 1:
        from qd.jit import compile_worker

        compile_worker.prestart()
    with _lock:  # (its first use makes LLVM's target machine)
        t = target(arch)
    by_task: dict = {}
    futures: list[Future] = []
    built: Any = None
    failure: BaseException | None = None
    try:
        for m, (numbers, built) in enumerate(zip(groups, module_groups(k, t, fast_math, groups))):
            kernels = [f.name for f in built.module.functions if f.calling_convention == "ptx_kernel"]
            for n, sym, ks in zip(numbers, built.tasks, kernels):
                by_task[n] = (sym.kind, ks, m)
            text = str(built.module)
            if len(groups) == 1:
                futures.append(_done(_optimise_then, text, kernels, arch, each, _optimise_here))
            else:
                futures.append(pool().submit(_optimise_then, text, kernels, arch, each, _optimise_anywhere))
    except BaseException as e:  # noqa: BLE001  raised below, once the modules already handed on are accounted for
        failure = e
    results = all_or_none(futures, lambda r: undo(r[1]) if undo is not None and r[1] is not None else None, failure)
    order = [by_task[n] for n in range(len(k.tasks))]
    return PtxKernel(MODULE_MARK.join(ptx for ptx, _ in results), [(kind, ks) for kind, ks, _ in order],
                     built.prints, built.check_args, module_of=[m for *_, m in order],
                     made=[made for _, made in results] if each is not None else None)


def _optimise_then(text: str, kernels: list[str], arch: str, each: Callable[[str], Any] | None,
                   optimise_with: Callable[[str, list[str], str], str]) -> tuple[str, Any]:
    ptx = optimise_with(text, kernels, arch)
    return ptx, (each(ptx) if each is not None else None)


def _done(fn: Callable, *args: Any) -> Future:
    """`fn(*args)` run here, as a finished future."""
    f: Future = Future()
    try:
        f.set_result(fn(*args))
    except BaseException as e:  # noqa: BLE001  handed on through the future
        f.set_exception(e)
    return f


def all_or_none(futures: list[Future], release: Callable[[Any], Any],
                failure: BaseException | None = None) -> list:
    """The results of `futures`, once every one has finished; where one failed (or `failure` is given: the caller's
    own, before it submitted them all), `release` is applied to each result that was made, and the first failure is
    raised."""
    results = []
    for f in futures:
        try:
            results.append(f.result())
        except BaseException as e:  # noqa: BLE001  raised below, once every module is accounted for
            failure = failure or e
    if failure is not None:
        for r in results:
            release(r)
        raise failure
    return results


def _optimise_anywhere(text: str, kernels: list[str], arch: str) -> str:
    """`optimise` in an idle compile worker, else here."""
    from qd.jit import compile_worker

    worker = compile_worker.take()
    if worker is not None:
        try:
            ptx = worker.compile_ptx(text, kernels, arch)
        except compile_worker.ParseError:
            ptx = None  # made again here, to raise what the in-process path raises (a RuntimeError and its message)
        finally:
            compile_worker.give_back(worker)
        if ptx is not None:
            return ptx
    return _optimise_here(text, kernels, arch)


def _optimise_here(text: str, kernels: list[str], arch: str) -> str:
    from qd.jit.cpu import _lock  # llvmlite's LLVM context is one: the CPU tier's compiler thread uses it too

    with _lock:
        return optimise(text, kernels, arch)


def optimise(text: str, kernels: list[str], arch: str) -> str:
    """PTX of module `text` (LLVM IR): libdevice linked where a math function needs it, every function but the
    entry points `kernels` internal, O3, and the integer ops ptxas miscompiles rewritten. The caller holds LLVM (a
    compile worker, or `qd.jit.cpu._lock`)."""
    import llvmlite.binding as llvm

    t = target(arch)
    mod = llvm.parse_assembly(text)
    if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
        mod.link_in(llvm.parse_bitcode(_libdevice()))
    for f in mod.functions:
        if not f.is_declaration and f.name not in kernels:
            f.linkage = "internal"
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(t.target_machine(), pto)
    pb.getModulePassManager().run(mod, pb)
    return _ptxas_safe_integer_ops(t.target_machine().emit_assembly(mod))


_INT_NEG = re.compile(r"\bneg\.s(16|32|64)\s+(%\w+),\s*(%\w+);")
_INT_ABS = re.compile(r"\babs\.s(16|32|64)\s+(%\w+),\s*(%\w+);")


def _neg(m: re.Match) -> str:
    w, d, a = m[1], m[2], m[3]
    return f"not.b{w} \t{d}, {a};\n\tadd.s{w} \t{d}, {d}, 1;"


def _abs(m: re.Match) -> str:
    w, d, a = m[1], m[2], m[3]
    return (f"{{ .reg .pred %qd_p; .reg .b{w} %qd_t; setp.lt.s{w} %qd_p, {a}, 0; not.b{w} %qd_t, {a}; "
            f"add.s{w} %qd_t, %qd_t, 1; selp.b{w} {d}, %qd_t, {a}, %qd_p; }}")


def _ptxas_safe_integer_ops(ptx: str) -> str:
    """`ptx` with its integer negations and absolute values written as ptxas does not miscompile them (the same
    wrapping values; both seen on an H200, driver 580, at every ptxas optimization level but 0, DESIGN §4):
    - `neg.sN d, a` as `not; add 1`: ptxas folds a `neg` into a three-way integer min/max (SASS `VIMNMX3`) as a
      source of its own and drops the negation (`max(acc, max(a, -a))` became `max(acc, a, a)`);
    - `abs.sN d, a` (LLVM's form of `max(a, -a)`) as a compare and select of that negation: ptxas takes `abs` to
      be non-negative, so `abs(INT_MIN) % m` became an unsigned remainder."""
    return _INT_ABS.sub(_abs, _INT_NEG.sub(_neg, ptx))


def ptxas_path() -> str | None:
    return shutil.which("ptxas") or next(iter(glob.glob("/usr/local/cuda/bin/ptxas")), None)


def ptxas(ptx: str, arch: str = "sm_90") -> None:
    """Assembles `ptx` (each module of a `PtxKernel.ptx`) with the CUDA toolkit's `ptxas` (RuntimeError with its
    messages when it refuses)."""
    for text in ptx.split(MODULE_MARK):
        _ptxas_one(text, arch)


def _ptxas_one(ptx: str, arch: str) -> None:
    exe = ptxas_path()
    if exe is None:
        raise RuntimeError("ptxas not found")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", src, "-o", os.path.join(d, "k.cubin")], check=False,
                           capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"ptxas -arch={arch} refused the PTX:\n{r.stderr[-3000:]}")


__all__ = ["PtxKernel", "compile_ptx", "libdevice_path", "optimise", "pool", "ptxas", "ptxas_path", "target",
           "task_groups", "warm_up"]
