"""Corpus cases: kernel-scope locals updated inside parallel loops (issue 16).

A local defined before a top-level (parallel) loop and updated in it by an augmented assignment
(`+= -= *= &= |= ^=`) or by `qd.atomic_*` is an atomic reduction, as in Quadrants (qd adds `*=`): the
result is exact for integers and equals the serial sum within rounding for floats. These cases pin that
on every tier, with the variants a user writes: every dtype, nested ifs, two loops updating one local,
the local read inside and after the loop, min/max through `qd.atomic_min/max`, returns and stores.
"""

from __future__ import annotations

import numpy as np

import qd
from qd.base.arch import Arch

from . import Run, corpus

N = 10_000


def _data() -> np.ndarray:
    return (np.arange(N, dtype=np.int64) * 7919) % 97


@corpus()
def local_sum_return(arch: Arch) -> Run:
    """The issue's kernel: `s = 0; for i: s += a[i]; return s` (i32), run several times."""
    a = (np.arange(N, dtype=np.int32) % 97).astype(np.int32)

    @qd.kernel
    def total(a: qd.types.ndarray(qd.i32, 1)) -> qd.i32:
        s = 0
        for i in range(a.shape[0]):
            s += a[i]
        return s

    def run() -> dict:
        return {"s": np.array([total(a) for _ in range(4)], dtype=np.int64)}

    def reference() -> dict:
        return {"s": np.full(4, int(a.sum()), dtype=np.int64)}

    return Run(run, reference)


@corpus(tol={"f32": (1e-5, 1e-3), "f64": (1e-12, 1e-9)})
def local_sum_dtypes(arch: Arch) -> Run:
    """`+=` and `-=` on i32, i64, f32 and f64 kernel-scope locals, written to a field after the loop."""
    d = _data()
    a32, a64 = d.astype(np.int32), (d * (1 << 33)).astype(np.int64)
    f32, f64 = (d / 7.0).astype(np.float32), d / 3.0
    out_i = qd.field(qd.i64, shape=2)
    out_f = qd.field(qd.f64, shape=2)

    @qd.kernel
    def k(a32: qd.types.ndarray(qd.i32, 1), a64: qd.types.ndarray(qd.i64, 1),
          f32: qd.types.ndarray(qd.f32, 1), f64: qd.types.ndarray(qd.f64, 1)):
        si = qd.i32(5)
        sl = qd.i64(0)
        sf = qd.f32(0.0)
        sd = qd.f64(1.0)
        for i in range(a32.shape[0]):
            si += a32[i]
            sl -= a64[i]
            sf += f32[i]
            sd -= f64[i]
        out_i[0] = si
        out_i[1] = sl
        out_f[0] = sf
        out_f[1] = sd

    def run() -> dict:
        k(a32, a64, f32, f64)
        oi, of = out_i.to_numpy(), out_f.to_numpy()
        return {"i32": oi[0], "i64": oi[1], "f32": np.float32(of[0]), "f64": of[1]}

    def reference() -> dict:
        return {"i32": np.int64(5 + int(a32.sum())), "i64": np.int64(-int(a64.sum())),
                "f32": np.float32(f32.astype(np.float64).sum()), "f64": np.float64(1.0 - f64.sum())}

    return Run(run, reference)


@corpus()
def local_reduce_ifs_two_loops(arch: Arch) -> Run:
    """Nested ifs, a local reduced by two loops, `*=` and the bitwise ops, read after the loops."""
    d = _data().astype(np.int32)
    out = qd.field(qd.i64, shape=6)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)):
        even = 0
        big = qd.i64(0)
        p = qd.i64(1)
        m_and = -1
        m_or = 0
        m_xor = 0
        for i in range(a.shape[0]):
            if a[i] % 2 == 0:
                even += 1
                if a[i] > 50:
                    big += a[i]
            else:
                if a[i] < 3:
                    p *= 3
            m_and &= a[i] | 0x100
            m_or |= a[i]
            m_xor ^= a[i]
        for j in range(a.shape[0]):
            if a[j] == 0:
                even -= 1000
            big += 1
        out[0] = even
        out[1] = big
        out[2] = p
        out[3] = m_and
        out[4] = m_or
        out[5] = m_xor

    def run() -> dict:
        k(d)
        return {"out": out.to_numpy()}

    def reference() -> dict:
        even = int((d % 2 == 0).sum()) - 1000 * int((d == 0).sum())
        big = int(d[(d % 2 == 0) & (d > 50)].sum()) + len(d)
        p = 3 ** int(((d % 2 == 1) & (d < 3)).sum())
        m_and = int(np.bitwise_and.reduce(d | 0x100))
        m_or = int(np.bitwise_or.reduce(d))
        m_xor = int(np.bitwise_xor.reduce(d))
        p = (p + (1 << 63)) % (1 << 64) - (1 << 63)  # i64 wraps
        return {"out": np.array([even, big, p, m_and, m_or, m_xor], dtype=np.int64)}

    return Run(run, reference)


@corpus()
def local_atomic_minmax(arch: Arch) -> Run:
    """`qd.atomic_min/max/add` on kernel-scope locals (i32 and f32), the old value of atomic_add used as a
    unique slot, and a local that is only read inside the loop."""
    d = _data().astype(np.int32)
    x = ((d - 40) / 4.0).astype(np.float32)
    out = qd.field(qd.i32, shape=3)
    outf = qd.field(qd.f32, shape=2)
    slots = qd.field(qd.i32, shape=N)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), x: qd.types.ndarray(qd.f32, 1)):
        lo = 1 << 30
        hi = -(1 << 30)
        flo = qd.f32(1e30)
        fhi = qd.f32(-1e30)
        count = 0
        offset = 3  # read-only inside the loop
        for i in range(a.shape[0]):
            qd.atomic_min(lo, a[i] + offset)
            qd.atomic_max(hi, a[i] + offset)
            qd.atomic_min(flo, x[i])
            qd.atomic_max(fhi, x[i])
            slot = qd.atomic_add(count, 1)
            slots[slot] = i
        out[0] = lo
        out[1] = hi
        out[2] = count
        outf[0] = flo
        outf[1] = fhi

    def run() -> dict:
        k(d, x)
        return {"out": out.to_numpy(), "outf": outf.to_numpy(), "slots": np.sort(slots.to_numpy())}

    def reference() -> dict:
        return {"out": np.array([d.min() + 3, d.max() + 3, N], dtype=np.int32),
                "outf": np.array([x.min(), x.max()], dtype=np.float32),
                "slots": np.arange(N, dtype=np.int32)}

    return Run(run, reference)


@corpus()
def local_reduce_struct_for_inner(arch: Arch) -> Run:
    """A struct-for over a 2-D field with a dynamic inner loop updating a kernel-scope local, and a local
    declared inside the loop that stays private to its iteration (not atomic, not shared)."""
    shape = (37, 23)
    a = qd.field(qd.i32, shape=shape)
    out = qd.field(qd.i64, shape=2)
    vals = (np.arange(np.prod(shape)).reshape(shape) * 31 % 11).astype(np.int32)

    @qd.kernel
    def k():
        total = qd.i64(0)
        inner = 0
        for i, j in a:
            t = 0  # private
            for _ in range(a[i, j]):
                t += 2
                inner += 1
            total += t * (i + j)
        out[0] = total
        out[1] = inner

    def run() -> dict:
        a.from_numpy(vals)
        k()
        return {"out": out.to_numpy()}

    def reference() -> dict:
        ii, jj = np.indices(shape)
        return {"out": np.array([int((2 * vals * (ii + jj)).sum()), int(vals.sum())], dtype=np.int64)}

    return Run(run, reference)
