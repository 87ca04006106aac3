"""Corpus cases over data: atomics, stencils, struct-fors, ndrange, templates, vectors, ndarrays, random."""

from __future__ import annotations

import numpy as np

import qd
from qd.base.arch import Arch

from . import Run, corpus, init
from .scalar import EXACT_FLOAT


@corpus(tol={"fsum": (1e-3, 1e-3)})
def atomic_sum(arch: Arch) -> Run:
    """Reductions into one cell through `+=` (atomic): i64 and f32 sums, a histogram, and
    `qd.atomic_add` returning the old value (every thread gets a distinct slot)."""
    n = 4096
    rng = np.random.default_rng(11)
    a = rng.integers(-1 << 30, 1 << 30, n)
    x = rng.random(n).astype(np.float32)
    si, sf = qd.field(qd.i64, shape=()), qd.field(qd.f32, shape=())
    hist, counter = qd.field(qd.i32, shape=16), qd.field(qd.i32, shape=())
    slots = qd.field(qd.i32, shape=n)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i64, 1), x: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            si[None] += a[i]
            sf[None] += x[i]
            hist[a[i] & 15] += 1
            old = qd.atomic_add(counter[None], 1)
            slots[old] = i

    def run() -> dict:
        k(a, x)
        return {"isum": np.int64(si[None]), "fsum": np.float32(sf[None]), "hist": hist.to_numpy(),
                "slots": np.sort(slots.to_numpy())}

    def reference() -> dict:
        return {"isum": a.sum(), "fsum": np.float32(x.astype(np.float64).sum()),
                "hist": np.bincount(a & 15, minlength=16).astype(np.int32),
                "slots": np.arange(n, dtype=np.int32)}

    return Run(run, reference)


@corpus(options=EXACT_FLOAT)
def stencil_2d(arch: Arch) -> Run:
    """Three Jacobi steps of a 5-point stencil over 2-D fields, ping-ponging through template arguments."""
    shape = (33, 20)
    rng = np.random.default_rng(12)
    u0 = rng.standard_normal(shape).astype(np.float32)
    u, v = qd.field(qd.f32, shape=shape), qd.field(qd.f32, shape=shape)

    @qd.kernel
    def step(src: qd.template(), dst: qd.template()):
        for i, j in qd.ndrange((1, shape[0] - 1), (1, shape[1] - 1)):
            dst[i, j] = (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1]) * 0.25 - src[i, j]

    def run() -> dict:
        u.from_numpy(u0)
        v.from_numpy(u0)
        step(u, v)
        step(v, u)
        step(u, v)
        return {"v": v.to_numpy()}

    def reference() -> dict:
        a, b = u0.copy(), u0.copy()
        for src, dst in ((a, b), (b, a), (a, b)):
            total = src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
            dst[1:-1, 1:-1] = total * np.float32(0.25) - src[1:-1, 1:-1]
        return {"v": b}

    return Run(run, reference)


@corpus()
def struct_for_2d(arch: Arch) -> Run:
    """Struct-fors over a 2-D field, by indices and through `qd.grouped`."""
    f, g = qd.field(qd.i32, shape=(7, 13)), qd.field(qd.i64, shape=(7, 13))

    @qd.kernel
    def k():
        for i, j in f:
            f[i, j] = i * 1000 + j * 3 - (i ^ j)
        for I in qd.grouped(g):
            g[I] = I[0] * I[1] + f[I] * 2

    def run() -> dict:
        k()
        return {"f": f.to_numpy(), "g": g.to_numpy()}

    def reference() -> dict:
        i, j = np.meshgrid(np.arange(7), np.arange(13), indexing="ij")
        fv = (i * 1000 + j * 3 - (i ^ j)).astype(np.int32)
        return {"f": fv, "g": (i * j + fv * 2).astype(np.int64)}

    return Run(run, reference)


@corpus()
def ndrange_3d(arch: Arch) -> Run:
    """`qd.ndrange` with (begin, end) pairs, a negative begin, and a counter through atomics."""
    out, cnt = qd.field(qd.i32, shape=(4, 3, 4)), qd.field(qd.i32, shape=())

    @qd.kernel
    def k():
        for i, j, m in qd.ndrange((2, 6), 3, (-2, 2)):
            out[i - 2, j, m + 2] = i * 100 + j * 10 + m
            cnt[None] += 1

    def run() -> dict:
        k()
        return {"out": out.to_numpy(), "count": np.int32(cnt[None])}

    def reference() -> dict:
        i, j, m = np.meshgrid(np.arange(2, 6), np.arange(3), np.arange(-2, 2), indexing="ij")
        return {"out": (i * 100 + j * 10 + m).astype(np.int32), "count": np.int32(48)}

    return Run(run, reference)


@corpus(options=EXACT_FLOAT)
def template_field(arch: Arch) -> Run:
    """One template kernel instantiated per field (dtype and rank differ) and per constant."""
    fi, ff = qd.field(qd.i32, shape=6), qd.field(qd.f32, shape=(3, 4))

    @qd.kernel
    def scale(x: qd.template(), s: qd.template()):
        for I in qd.grouped(x):
            x[I] = x[I] * s + I[0]

    def run() -> dict:
        fi.fill(2)
        ff.fill(1.5)
        scale(fi, 3)
        scale(ff, 2.5)
        scale(ff, 0.5)
        return {"i": fi.to_numpy(), "f": ff.to_numpy()}

    def reference() -> dict:
        r = np.arange(3, dtype=np.float32)[:, None]
        f = np.full((3, 4), 1.5, np.float32)
        f = (f * np.float32(2.5) + r) * np.float32(0.5) + r
        return {"i": (2 * 3 + np.arange(6)).astype(np.int32), "f": f}

    return Run(run, reference)


@corpus(tol={"cross": (1e-5, 1e-6), "norm": (1e-6, 1e-6), "mv": (1e-5, 1e-6), "mmt": (1e-5, 1e-6)})
def vector_matrix(arch: Arch) -> Run:
    """Vector and matrix fields: cross product, norm, matrix-vector and matrix-matrix products."""
    n = 64
    rng = np.random.default_rng(13)
    A, B = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32)
    M = rng.standard_normal((n, 3, 3)).astype(np.float32)
    a, b = qd.Vector.field(3, qd.f32, shape=n), qd.Vector.field(3, qd.f32, shape=n)
    m, mmt = qd.Matrix.field(3, 3, qd.f32, shape=n), qd.Matrix.field(3, 3, qd.f32, shape=n)
    cross, mv = qd.Vector.field(3, qd.f32, shape=n), qd.Vector.field(3, qd.f32, shape=n)
    norm = qd.field(qd.f32, shape=n)

    @qd.kernel
    def k():
        for i in range(n):
            cross[i] = a[i].cross(b[i])
            norm[i] = a[i].norm()
            mv[i] = m[i] @ a[i]
            mmt[i] = m[i] @ m[i].transpose()

    def run() -> dict:
        a.from_numpy(A)
        b.from_numpy(B)
        m.from_numpy(M)
        k()
        return {"cross": cross.to_numpy(), "norm": norm.to_numpy(), "mv": mv.to_numpy(),
                "mmt": mmt.to_numpy()}

    def reference() -> dict:
        return {"cross": np.cross(A, B), "norm": np.linalg.norm(A, axis=1),
                "mv": np.einsum("nij,nj->ni", M, A), "mmt": M @ M.transpose(0, 2, 1)}

    return Run(run, reference)


@corpus(options=EXACT_FLOAT)
def ndarray_vec3(arch: Arch) -> Run:
    """ndarrays of vec3: a `qd.Vector.ndarray` and a numpy (n, 3) array as arguments."""
    n = 50
    rng = np.random.default_rng(14)
    X = rng.standard_normal((n, 3)).astype(np.float32)
    src = qd.Vector.ndarray(3, qd.f32, shape=n)

    @qd.kernel
    def k(x: qd.types.ndarray(dtype=qd.math.vec3, ndim=1), y: qd.types.ndarray(dtype=qd.math.vec3, ndim=1),
          d: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            y[i] = x[i] * 2.0 + qd.Vector([1.0, 2.0, 3.0])
            d[i] = x[i][0] * x[i][0] + x[i][1] * x[i][1] + x[i][2] * x[i][2]

    def run() -> dict:
        src.from_numpy(X)
        y, d = np.zeros((n, 3), np.float32), np.zeros(n, np.float32)
        k(src, y, d)
        return {"y": y, "d": d}

    def reference() -> dict:
        d = X[:, 0] * X[:, 0] + X[:, 1] * X[:, 1] + X[:, 2] * X[:, 2]
        return {"y": X * np.float32(2) + np.array([1, 2, 3], np.float32), "d": d}

    return Run(run, reference)


@corpus()
def atomic_min_max(arch: Arch) -> Run:
    """`qd.atomic_min` / `qd.atomic_max` on i32, i64 and f32 cells, into one cell and into buckets."""
    n = 2000
    rng = np.random.default_rng(15)
    a = rng.integers(-10**9, 10**9, n).astype(np.int32)
    x = rng.standard_normal(n).astype(np.float32)
    mn, mx = qd.field(qd.i32, shape=()), qd.field(qd.i32, shape=())
    fmn, fmx = qd.field(qd.f32, shape=()), qd.field(qd.f32, shape=())
    bucket_max, bucket_min = qd.field(qd.f32, shape=8), qd.field(qd.i64, shape=8)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), x: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            qd.atomic_min(mn[None], a[i])
            qd.atomic_max(mx[None], a[i])
            qd.atomic_min(fmn[None], x[i])
            qd.atomic_max(fmx[None], x[i])
            qd.atomic_max(bucket_max[a[i] % 8], x[i])
            qd.atomic_min(bucket_min[a[i] % 8], qd.cast(a[i], qd.i64) * 3)

    def run() -> dict:
        mn[None], mx[None] = 2**31 - 1, -2**31
        fmn[None], fmx[None] = np.inf, -np.inf
        bucket_max.fill(-np.inf)
        bucket_min.fill(2**62)
        k(a, x)
        return {"min": np.int32(mn[None]), "max": np.int32(mx[None]), "fmin": np.float32(fmn[None]),
                "fmax": np.float32(fmx[None]), "bucket_max": bucket_max.to_numpy(),
                "bucket_min": bucket_min.to_numpy()}

    def reference() -> dict:
        b = a % 8
        return {"min": a.min(), "max": a.max(), "fmin": x.min(), "fmax": x.max(),
                "bucket_max": np.array([x[b == j].max() for j in range(8)], np.float32),
                "bucket_min": np.array([a[b == j].astype(np.int64).min() * 3 for j in range(8)], np.int64)}

    return Run(run, reference)


RANDOM_N = 1 << 16


def _draws(arch: Arch, seed: int, launches: int) -> list[dict[str, np.ndarray]]:
    """Start a program with `random_seed=seed` and launch a kernel of f32 and i32 draws `launches` times."""
    init(arch, random_seed=seed)
    f, i = qd.field(qd.f32, shape=RANDOM_N), qd.field(qd.i32, shape=RANDOM_N)

    @qd.kernel
    def draw():
        for j in range(RANDOM_N):
            f[j] = qd.random()
            i[j] = qd.random(qd.i32)

    out = []
    for _ in range(launches):
        draw()
        out.append({"f": f.to_numpy(), "i": i.to_numpy()})
    return out


@corpus(tol={"mean": (0, 0.01), "var": (0, 0.005), "imean": (0, 0.02)})
def random_stats(arch: Arch) -> Run:
    """`qd.random`: uniform statistics with a fixed seed; two launches differ; the same seed repeats its
    draws; another seed differs. The raw draws are compared across tiers (DESIGN §4: same numbers)."""

    def run() -> dict:
        first, second = _draws(arch, 7, 2)
        (again,) = _draws(arch, 7, 1)
        (other,) = _draws(arch, 8, 1)
        f, i = first["f"], first["i"].astype(np.float64) / 2**31
        return {"mean": f.mean(dtype=np.float64), "var": f.var(dtype=np.float64), "imean": i.mean(),
                "in_range": bool((f >= 0).all() and (f < 1).all()),
                "launches_differ": bool((first["f"] != second["f"]).mean() > 0.99),
                "same_seed_same": bool((first["f"] == again["f"]).all() and (first["i"] == again["i"]).all()),
                "seeds_differ": bool((first["f"] != other["f"]).mean() > 0.99),
                "draws_f": first["f"], "draws_i": first["i"]}

    return Run(run, lambda: {"mean": 0.5, "var": 1 / 12, "imean": 0.0, "in_range": True,
                             "launches_differ": True, "same_seed_same": True, "seeds_differ": True})
