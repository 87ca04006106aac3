"""W4: the first call of W1 (saxpy over 2^24 f32) in a fresh process. Prints one JSON line.

    python bench/first_call.py qd auto|eager|interp CACHE_DIR
    python bench/first_call.py numba - CACHE_DIR
    .venv-peers/bin/python bench/first_call.py quadrants - CACHE_DIR

`first_call_ms` is the time from the call to its result (the arrays are made before); `import_ms` the
time to import the library and, for qd, `qd.init`. qd runs on `qd.cpu` with `offline_cache_file_path`
= CACHE_DIR; numba's function has `cache=True` and `NUMBA_CACHE_DIR` = CACHE_DIR,
so an empty directory is a cold start and a second process on the same directory a warm one.
(No `from __future__ import annotations` here: qd resolves a kernel's string annotations in its
module's globals, where the function-local `qd` of `run_qd` is not.)
"""

import json
import os
import sys
import time

N = 1 << 24


def run_qd(jit, cache_dir, lib="qd"):
    t0 = time.perf_counter()
    if lib == "quadrants":  # the peer, from `.venv-peers`: the same API, with its own offline cache
        import quadrants as qd

        qd.init(arch=qd.cpu, offline_cache_file_path=cache_dir, log_level="warn")
    else:
        import qd

        qd.init(arch=qd.cpu, jit=jit, offline_cache_file_path=cache_dir, log_level="warn")
    t1 = time.perf_counter()
    import numpy as np

    @qd.kernel
    def saxpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x = np.ones(N, np.float32)
    y = np.arange(N, dtype=np.float32)
    t2 = time.perf_counter()
    saxpy(x, y, 2.0)
    t3 = time.perf_counter()
    ok = bool(y[7] == 9.0 and y[N - 1] == np.float32(N - 1) + 2.0)
    if lib == "quadrants":
        return {"first_call_ms": (t3 - t2) * 1e3, "import_ms": (t1 - t0) * 1e3, "tier": "quadrants", "ok": ok}
    st = saxpy.stats
    return {"first_call_ms": (t3 - t2) * 1e3, "import_ms": (t1 - t0) * 1e3, "tier": st["last_tier"],
            "compile_ms": st["compile_ms"], "from_cache": st["from_cache"], "ok": ok}


if __name__ == "__main__" and sys.argv[1] == "numba":
    # Module level, so that numba's cache=True can locate the function (it cannot cache closures).
    os.environ["NUMBA_CACHE_DIR"] = sys.argv[3]
    _t0 = time.perf_counter()
    from numba import njit, prange

    _t1 = time.perf_counter()

    @njit(parallel=True, cache=True)
    def numba_saxpy(x, y, a):
        for i in prange(x.shape[0]):
            y[i] = a * x[i] + y[i]


def run_numba() -> dict:
    import numpy as np

    x = np.ones(N, np.float32)
    y = np.arange(N, dtype=np.float32)
    t2 = time.perf_counter()
    numba_saxpy(x, y, np.float32(2.0))
    t3 = time.perf_counter()
    ok = bool(y[7] == 9.0 and y[N - 1] == np.float32(N - 1) + 2.0)
    return {"first_call_ms": (t3 - t2) * 1e3, "import_ms": (_t1 - _t0) * 1e3, "tier": "numba", "ok": ok}


if __name__ == "__main__":
    lib, mode, cache_dir = sys.argv[1:4]
    out = run_numba() if lib == "numba" else run_qd(mode, cache_dir, lib)
    print(json.dumps(out))
