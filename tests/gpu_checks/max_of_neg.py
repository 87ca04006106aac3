"""Open defect of issue 27 (fuzz seed 1600014, shrunk), for the next GPU session: on an H200 (driver 580.159.04)
`kmax` gives 0 on cuda for a = [-1549719266] and [-7] (want |a|), `kmax3` gives 0 on NVIDIA OpenCL; every
kernel is right on interp, cpu, lavapipe and PoCL, and `kmax2` (a plain store) everywhere. The PTX of `kmax` looks
right (neg.s32, max.s32, warp shuffles, atom.max.s32): next, ptxas/SASS. Run: python -m tests.gpu_checks.max_of_neg cuda"""
import os
import sys

import numpy as np

import qd

arch = sys.argv[1]
qd.init(arch=getattr(qd, arch), log_level="error", fast_math=False, offline_cache=False)
OUT = os.environ.get("OUT", "/tmp")
if arch == "cuda":
    from qd.jit import nvptx
    orig = nvptx._compile
    def spy(k, fm, a):
        r = orig(k, fm, a)
        with open(os.path.join(OUT, f"{k.name}.ptx"), "w") as f:
            f.write(r.ptx)
        return r
    nvptx._compile = spy
@qd.kernel
def kmax(a: qd.types.ndarray(qd.i32, 1), oa: qd.types.ndarray(qd.i32, 1), acci: qd.types.ndarray(qd.i32, 1)) -> qd.i64:
    s2 = qd.i64(3)
    for i, i_one in qd.ndrange(a.shape[0], 1):
        qd.atomic_max(acci[2], qd.max(a[i], -a[qd.i32((a[qd.i32(qd.i32(s2) % a.shape[0])] ^ oa[i]) % a.shape[0])]))
    return s2
@qd.kernel
def kmax2(a: qd.types.ndarray(qd.i32, 1), acci: qd.types.ndarray(qd.i32, 1)):
    for i in range(a.shape[0]):
        acci[i] = qd.max(a[i], -a[i])
@qd.kernel
def kmax3(a: qd.types.ndarray(qd.i32, 1), acci: qd.types.ndarray(qd.i32, 1)):
    for i in range(a.shape[0]):
        qd.atomic_max(acci[0], qd.max(a[i], -a[i]))
for av in ([-1549719266], [5], [-7]):
    a = np.array(av, np.int32); oa = np.zeros(1, np.int32); acc = np.zeros(4, np.int32)
    kmax(a, oa, acc); qd.sync()
    b = np.zeros(1, np.int32); kmax2(a, b); c = np.zeros(1, np.int32); kmax3(a, c); qd.sync()
    print(arch, av, "kmax", acc[2], "kmax2", b[0], "kmax3", c[0], "want", abs(av[0]), flush=True)
