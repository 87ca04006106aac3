"""Issue 27's NVIDIA defect (ptxas folds a `neg` into a three-way integer min/max, VIMNMX3, and drops it): random
integer min/max/neg/abs expressions and min/max reductions on ARCH against numpy. REWRITE applies a further rewrite of
every integer negation on top of qd's own (cuda: the PTX text; opencl: the OpenCL C's `qd_neg_*`), OPT a CUDA JIT
optimization level. On an H200 (driver 580), before qd wrote negations as not/add, `none`, `sub` and `mul` each gave
1-2 wrong values in 240 and `notadd` none; OPT 1-3 gave the same as `none` (OPT 0 fixed the shrunk seed).
Run from the repository root on a GPU machine: K=40 python3 -m tests.gpu_checks.minmax_neg_fuzz cuda none"""
import ctypes
import os
import pathlib
import re
import sys
import tempfile

import numpy as np

import qd

arch, rw = sys.argv[1], sys.argv[2]
opt = int(sys.argv[3]) if len(sys.argv) > 3 else -1
qd.init(arch=getattr(qd, arch), log_level="error", fast_math=False, offline_cache=False)
NEG = re.compile(r"neg\.s(16|32|64)\s+(%\w+),\s*(%\w+);")
def rewrite(ptx):
    if rw == "sub":
        return NEG.sub(lambda m: f"sub.s{m[1]} {m[2]}, 0, {m[3]};", ptx)
    if rw == "notadd":
        return NEG.sub(lambda m: f"not.b{m[1]} {m[2]}, {m[3]}; add.s{m[1]} {m[2]}, {m[2]}, 1;", ptx)
    if rw == "mul":
        return NEG.sub(lambda m: f"mul.lo.s{m[1]} {m[2]}, {m[3]}, -1;", ptx)
    return ptx
if arch == "cuda":
    from qd.gpu import cuda_driver as cd
    from qd.gpu import cuda_tier
    def module(self, ptx, cache_dir):
        text = rewrite(ptx).encode() + b"\0"
        self.drv.enter()
        mod = ctypes.c_void_p()
        n = 1 if opt >= 0 else 0
        opts = (ctypes.c_int * 1)(7); vals = (ctypes.c_void_p * 1)(ctypes.c_void_p(max(opt, 0)))
        cd.check(self.drv.lib.cuModuleLoadDataEx(ctypes.byref(mod), text, n, opts, vals), "load")
        return mod
    cuda_tier.CudaBackend._module = module
if arch == "opencl" and rw != "none":
    from qd.gpu import opencl_tier
    orig = opencl_tier.OpenCLBackend._program
    ASM = {"sub": "sub.s{w} %0, 0, %1;", "notadd": "not.b{w} %0, %1; add.s{w} %0, %0, 1;", "mul": "mul.lo.s{w} %0, %1, -1;"}
    HELP = "".join(
        f'static inline {t} qd_ng_{t}({t} x) {{ {t} y; asm("{ASM[rw].format(w=w)}" : "={c}"(y) : "{c}"(x)); return y; }}\n'
        for t, w, c in (("int", 32, "r"), ("long", 64, "l")))
    PAT = re.compile(r"\(\((int|long)\)\(\(u(?:int|long)\)0 - \(u(?:int|long)\)\((\w+)\)\)\)")
    def program(self, name, source, cache_dir):
        i = source.index("static inline int qd_isnan_bits")
        source = source[:i] + HELP + PAT.sub(lambda m: f"qd_ng_{m[1]}({m[2]})", source[i:])
        return orig(self, name, source, None)
    opencl_tier.OpenCLBackend._program = program
rng = np.random.default_rng(int(os.environ.get("SEED", "7")))
def expr(d, T):
    if d == 0 or rng.random() < 0.15:
        r = rng.random()
        return rng.choice(["a[i]", "b[i]", "c[i]"]) if r < 0.85 else f"{T}({int(rng.integers(-5, 5))})"
    k = rng.choice(["max", "min", "neg", "neg", "abs", "add", "sub"])
    if k == "neg": return f"(-{expr(d - 1, T)})"
    if k == "abs": return f"qd.abs({expr(d - 1, T)})"
    if k == "add": return f"({expr(d - 1, T)} + {expr(d - 1, T)})"
    if k == "sub": return f"({expr(d - 1, T)} - {expr(d - 1, T)})"
    return f"qd.{k}({expr(d - 1, T)}, {expr(d - 1, T)})"
def npexpr(s):
    return (s.replace("qd.max", "np.maximum").replace("qd.min", "np.minimum").replace("qd.abs", "np.abs")
            .replace("qd.i32", "np.int32").replace("qd.i64", "np.int64"))
bad = total = 0
for kk in range(int(os.environ.get("K", "12"))):
    T = "qd.i32" if kk % 3 else "qd.i64"
    nt = np.int32 if kk % 3 else np.int64
    es = [expr(3, T) for _ in range(16)]
    red = [expr(2, T) for _ in range(4)]
    body = "\n".join(f"        o[i, {j}] = {e}" for j, e in enumerate(es))
    body += "\n" + "\n".join(f"        qd.atomic_{'max' if j % 2 == 0 else 'min'}(r[{j}], {e})" for j, e in enumerate(red))
    src = (f"import qd\nA = qd.types.ndarray({T}, 1)\n@qd.kernel\ndef k(a: A, b: A, c: A, o: qd.types.ndarray({T}, 2), r: A):\n"
           f"    for i in range(a.shape[0]):\n{body}\n")
    fn = os.path.join(tempfile.gettempdir(), f"minmax_neg_fuzz_{os.getpid()}_{kk}.py")  # qd reads kernels' sources
    pathlib.Path(fn).write_text(src)
    ns = {}
    exec(compile(src, fn, "exec"), ns)  # noqa: S102
    n = 77
    with np.errstate(over="ignore"):
        a, b, c = (rng.integers(-1000, 1000, n).astype(nt) for _ in range(3))
        o = np.zeros((n, 16), nt); r = np.array([0, 0, 0, 0], nt)
        ns["k"](a, b, c, o, r); qd.sync()
        env = {"np": np, "a": a, "b": b, "c": c, "i": slice(None)}
        for j, e in enumerate(es):
            want = np.broadcast_to(eval(npexpr(e), env), (n,)).astype(nt)
            total += 1
            if not np.array_equal(o[:, j], want):
                bad += 1; print("MISMATCH", T, e, "got", o[:4, j], "want", want[:4])
        for j, e in enumerate(red):
            v = np.broadcast_to(eval(npexpr(e), env), (n,)).astype(nt)
            want = max(0, v.max()) if j % 2 == 0 else min(0, v.min())
            total += 1
            if r[j] != want:
                bad += 1; print("MISMATCH-RED", T, j, e, "got", r[j], "want", want)
print(f"RESULT {arch} {rw} opt={opt}: {bad} bad of {total}", flush=True)
