"""Offloaded `KernelIR` -> PTX for NVIDIA GPUs, through the shared LLVM code generator (`qd.jit.llvm`)
with `NvptxTarget` (DESIGN §10).

`compile_ptx(k, fast_math, arch)` builds the module, links libdevice when a math function needs it
(`libdevice_path()`: `QD_LIBDEVICE`, the CUDA toolkit's `nvvm/libdevice/libdevice.10.bc`, or the
`nvidia-cuda-nvcc` wheel's copy), keeps only the task kernels external, runs LLVM's O3 pipeline for the
target (NVVMReflect resolves libdevice's `__nvvm_reflect` queries: no flush-to-zero, IEEE division and
square root, as the op table promises) and emits PTX text. `ptxas(ptx, arch)` assembles it offline with
the toolkit's `ptxas` (the CI check where no GPU is present).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from qd import ir
from qd.jit.targets import NvptxTarget

_targets: dict[str, NvptxTarget] = {}


@dataclass
class PtxKernel:
    """A kernel instance as PTX: per task its kind and kernel name, and the host tables of the launch."""

    ptx: str
    tasks: list  # per task: (kind, kernel symbol)
    prints: list
    check_args: list
    from_cache: bool = False
    cache_key: str | None = None  # its entry in the disk cache (`discard`ed when the driver refuses the PTX)


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
                               "install the CUDA toolkit or the nvidia-cuda-nvcc wheel, or set QD_LIBDEVICE=<path>")
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


def compile_ptx(k: ir.KernelIR, fast_math: bool, arch: str = "sm_90", cache_dir: str | None = None) -> PtxKernel:
    """The PTX of offloaded kernel `k` for GPU architecture `arch` (see the module docstring); with
    `cache_dir`, from / to the on-disk cache (`qd/codegen/cache.py`'s key: IR text, target, fast_math, qd version
    and the code generator's sources; the driver keeps its own cache of the machine code it makes of PTX)."""
    from qd.codegen import cache

    generator = cache.sources_digest(os.path.dirname(__file__))  # qd/jit's sources (as the CPU tier's key)
    key = cache.key_for(k, f"ptx {arch} {generator}", fast_math) if cache_dir else None
    hit = cache.load_with(cache_dir, key, lambda raw, meta: _cached(raw, meta, key)) if key else None
    if hit is not None:
        return hit
    out = _compile(k, fast_math, arch)
    if key:
        cache.store(cache_dir, key, out.ptx.encode(), (out.tasks, out.prints, out.check_args))
        out.cache_key = key
    return out


def _cached(raw: bytes, meta: tuple, key: str) -> PtxKernel:
    """The kernel of a cache entry (`cache.load_with`'s loader): an error where it is no text naming its task
    entry points (a miss that deletes it; PTX the driver then refuses is `cache.discard`ed by the CUDA tier)."""
    tasks, prints, check_args = meta
    ptx = raw.decode()
    tasks = [(str(kind), str(sym)) for kind, sym in tasks]
    if any(f".entry {sym}(" not in ptx for _, sym in tasks):
        raise ValueError("cached PTX refused: a task's entry point is missing")
    return PtxKernel(ptx, tasks, prints, check_args, from_cache=True, cache_key=key)


def _compile(k: ir.KernelIR, fast_math: bool, arch: str) -> PtxKernel:
    import llvmlite.binding as llvm

    from qd.jit.cpu import _lock  # llvmlite's LLVM context is one: the CPU tier's compiler thread uses it too
    from qd.jit.llvm import build_module

    with _lock:
        t = target(arch)
        mod_ir, symbols, prints, check_args = build_module(k, t, fast_math)
        kernels = [f.name for f in mod_ir.functions if f.calling_convention == "ptx_kernel"]
        mod = llvm.parse_assembly(str(mod_ir))
        if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
            mod.link_in(llvm.parse_bitcode(_libdevice()))
        for f in mod.functions:
            if not f.is_declaration and f.name not in kernels:
                f.linkage = "internal"
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(t.target_machine(), pto)
        pb.getModulePassManager().run(mod, pb)
        ptx = _ptxas_safe_integer_ops(t.target_machine().emit_assembly(mod))
    tasks = [(s.kind, kernels[n]) for n, s in enumerate(symbols)]
    return PtxKernel(ptx, tasks, prints, check_args)


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
    """Assembles `ptx` with the CUDA toolkit's `ptxas` (RuntimeError with its messages when it refuses)."""
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


__all__ = ["PtxKernel", "compile_ptx", "libdevice_path", "ptxas", "ptxas_path", "target", "warm_up"]
