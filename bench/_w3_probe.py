"""W3 2^24's reverse step in parts, per round (qd on a GPU arch): where its time goes and how it varies."""

import statistics
import sys
import time

import numpy as np

import qd

qd.init(arch=getattr(qd, sys.argv[1] if len(sys.argv) > 1 else "cuda"), log_level="warn")
n = 1 << 24
x = qd.field(qd.f32, shape=n, needs_grad=True)
loss = qd.field(qd.f32, shape=(), needs_grad=True)
a = qd.field(qd.i32, shape=n)


@qd.kernel
def k():
    for i in x:
        v = x[i]
        for _ in range(a[i]):
            v = 0.95 * v + 0.1
        loss[None] += v


x.from_numpy(np.random.default_rng(0).uniform(-2, 2, n).astype(np.float32))
a.from_numpy((np.arange(n) % 32).astype(np.int32))
loss[None] = 0.0
k()
rows = []
for r in range(12):
    qd.sync()
    t0 = time.perf_counter()
    loss.grad[None] = 1.0
    t1 = time.perf_counter()
    x.grad.fill(0.0)
    qd.sync()
    t2 = time.perf_counter()
    k.grad()
    t3 = time.perf_counter()
    qd.sync()
    t4 = time.perf_counter()
    st = k.grad.stats if hasattr(k.grad, "stats") else {}
    rows.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3, st.get("device_ms")))
for row in rows:
    print("write %.3f fill %.3f grad-launch %.3f grad-sync %.3f device %s" % row)
print("median grad launch+sync %.3f" % statistics.median(r[2] + r[3] for r in rows))
