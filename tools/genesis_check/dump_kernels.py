"""Diagnostic: every array reachable from Genesis' rigid solver after each kernel call of the first steps, for qd
(through the shim) or Quadrants; `diff_dumps.py` then finds the first kernel call after which two dumps differ.

    python dump_kernels.py qd|quadrants OUT.npz NSTEPS     (GSCENE=franka|box, GBACKEND=cuda|cpu; default franka, cuda)

GCACHE names the cache folder (default /tmp/gdump-SIDE); GSNAPSHOT=1 reads the state through `scenes.snapshot` (Genesis'
getters, zero-copy views on CUDA) after `scene.build()` and after each step, as `scenes.py` does when it records.

Only the arrays that changed since the previous snapshot are stored. It needs a kernel class whose `__call__` it
wraps (qd's `qd.runtime.kernel.Kernel`, Quadrants' `quadrants.lang.kernel.Kernel`); no host read happens between
`scene.build()` and the first step except the snapshots' own.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import scenes  # noqa: E402

side, out, nsteps = sys.argv[1], sys.argv[2], int(sys.argv[3])
scenes.point_caches(os.environ.get("GCACHE", f"/tmp/gdump-{side}"))
GETTERS = os.environ.get("GSNAPSHOT") == "1"
import genesis as gs
gs.init(backend=getattr(gs, os.environ.get("GBACKEND", "cuda")), precision="32", logging_level="warning")
scene, control = scenes.SCENES[os.environ.get("GSCENE", "franka")](gs, 0.01)
scene.build()
s = scene.sim.rigid_solver

def arrays():
    seen, found = set(), {}
    def walk(o, path, depth):
        if id(o) in seen or depth > 5 or o is None or isinstance(o, (int, float, str, bool, np.ndarray)):
            return
        seen.add(id(o))
        if hasattr(o, "to_numpy") and hasattr(o, "shape"):
            found[path] = o
            return
        d = getattr(o, "__dict__", None)
        if d is None and hasattr(o, "__dataclass_fields__"):
            d = {k: getattr(o, k) for k in o.__dataclass_fields__}
        if d is None:
            return
        for k, v in list(d.items()):
            if k.startswith("__") or callable(v) and not hasattr(v, "to_numpy"):
                continue
            walk(v, f"{path}.{k}", depth + 1)
    walk(s, "s", 0)
    return found

ARR = arrays()
print("arrays", len(ARR), flush=True)
dump = {}
calls = []
last = {}
def snap(tag):  # the arrays that changed since the last snapshot
    for p, a in ARR.items():
        try:
            v = a.to_numpy()
        except Exception:
            continue
        if v.size <= 2_000_000 and not (p in last and last[p].shape == v.shape and
                                         np.array_equal(last[p], v, equal_nan=True)):
            dump[f"{tag}|{p}"] = last[p] = v

if side == "qd":
    from qd.runtime import kernel as K
    cls, name_of = K.Kernel, lambda k: k.fn.__name__
else:
    import quadrants.lang.kernel  # noqa (the package attribute is the decorator)
    K = sys.modules["quadrants.lang.kernel"]
    cls, name_of = K.Kernel, lambda k: k.func.__name__
orig = cls.__call__
active = [False]
def hooked(self, *a, **k):
    r = orig(self, *a, **k)
    if active[0]:  # (off while snapping: Quadrants' to_numpy launches kernels of its own)
        active[0] = False
        calls.append(name_of(self))
        snap(f"{len(calls):03d}_{name_of(self)}")
        active[0] = True
    return r
cls.__call__ = hooked
if GETTERS:
    scenes.snapshot(scene)
snap("000_before")
active[0] = True
for i in range(nsteps):
    control(i)
    scene.step()
    if GETTERS:
        active[0] = False
        scenes.snapshot(scene)
        active[0] = True
active[0] = False
np.savez_compressed(out, **dump)
print("calls", calls, flush=True)
