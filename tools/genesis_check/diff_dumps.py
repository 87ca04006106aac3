"""Where two dumps of `dump_kernels.py` differ, kernel call by kernel call: `diff_dumps.py A.npz B.npz [TOL]`
prints, after each call, the arrays past TOL (default 1e-4) relative to the larger magnitude, floored at 1e-3 of the
array's largest finite value (values near zero differ by rounding)."""
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
def state(z):
    out, cur = [], {}
    tags = sorted({k.split("|")[0] for k in z.files})
    for t in tags:
        for k in z.files:
            if k.startswith(t + "|"):
                cur[k.split("|", 1)[1]] = z[k]
        out.append((t, dict(cur)))
    return out
sa, sb = state(a), state(b)
print("calls A:", [t for t, _ in sa]); print("calls B:", [t for t, _ in sb])
for (ta, da), (tb, db) in zip(sa, sb):
    bad = []
    for p in sorted(set(da) & set(db)):
        x, y = da[p], db[p]
        if x.shape != y.shape or x.dtype.kind not in "fiub":
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        same = (x == y) | (np.isnan(x) & np.isnan(y))
        fin = np.isfinite(x) & np.isfinite(y)
        scale = max(float(np.abs(np.where(fin, x, 0)).max(initial=0)), float(np.abs(np.where(fin, y, 0)).max(initial=0)))
        with np.errstate(all="ignore"):
            d = np.abs(x - y)
            rel = d / np.maximum(np.maximum(np.abs(x), np.abs(y)), max(1e-3 * scale, 1e-6))
        rel = np.where(same, 0, np.where(fin, rel, np.inf))
        if np.nanmax(rel, initial=0) > tol or np.isnan(rel).any():
            i = np.unravel_index(np.nanargmax(rel), rel.shape)
            bad.append((p, float(np.nanmax(rel)), i, float(x[i]), float(y[i])))
    print(f"{ta} / {tb}: {len(bad)} arrays differ")
    for p, r, i, x, y in bad[:25]:
        print(f"   {p} rel {r:.2e} at {i}: {x!r} vs {y!r}")
