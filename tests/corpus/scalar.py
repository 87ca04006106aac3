"""Corpus cases over scalars: arithmetic, control flow, integer widths, f16, casts, funcs and returns."""

from __future__ import annotations

import numpy as np

import qd
from qd.base.arch import Arch

from . import Run, corpus

EXACT_FLOAT = {"fast_math": False}  # no contraction or reassociation: + - * / are bit-exact everywhere


@corpus(options=EXACT_FLOAT)
def saxpy(arch: Arch) -> Run:
    """y = a * x + y over ndarray arguments (numpy arrays; writes land in them)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(1000).astype(np.float32)
    y0 = rng.standard_normal(1000).astype(np.float32)
    a = np.float32(1.75)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    def run() -> dict:
        y = y0.copy()
        k(x, y, a)
        return {"y": y}

    return Run(run, lambda: {"y": a * x + y0})


@corpus()
def prefix_serial(arch: Arch) -> Run:
    """An inclusive prefix sum in a serialized top-level loop (i64 and f32, sequential order)."""
    rng = np.random.default_rng(2)
    xi = rng.integers(-1 << 40, 1 << 40, 300)
    xf = rng.standard_normal(300).astype(np.float32)
    ai = qd.field(qd.i64, shape=300)
    af = qd.field(qd.f32, shape=300)

    @qd.kernel
    def k():
        qd.loop_config(serialize=True)
        for i in range(1, 300):
            ai[i] = ai[i] + ai[i - 1]
            af[i] = af[i] + af[i - 1]

    def run() -> dict:
        ai.from_numpy(xi)
        af.from_numpy(xf)
        k()
        return {"int": ai.to_numpy(), "float": af.to_numpy()}

    return Run(run, lambda: {"int": np.cumsum(xi), "float": np.cumsum(xf, dtype=np.float32)})


@corpus()
def nested_break_continue(arch: Arch) -> Run:
    """Nested serial loops inside a parallel one, with `break` and `continue` at both levels."""
    out = qd.field(qd.i32, shape=40)

    @qd.kernel
    def k():
        for i in range(40):
            acc = 0
            for j in range(50):
                if j % 3 == 0:
                    continue
                if j * i > 300:
                    break
                for m in range(j):
                    if m > 4:
                        break
                    acc += m * j
                acc += 1
            out[i] = acc

    def reference() -> dict:
        want = np.zeros(40, np.int32)
        for i in range(40):
            acc = 0
            for j in range(50):
                if j % 3 == 0:
                    continue
                if j * i > 300:
                    break
                for m in range(j):
                    if m > 4:
                        break
                    acc += m * j
                acc += 1
            want[i] = acc
        return {"out": want}

    def run() -> dict:
        k()
        return {"out": out.to_numpy()}

    return Run(run, reference)


@corpus()
def while_collatz(arch: Arch) -> Run:
    """A data-dependent `while` loop: Collatz step counts (i64 arithmetic)."""
    steps = qd.field(qd.i32, shape=500)

    @qd.kernel
    def k():
        for i in range(500):
            n = qd.cast(i + 1, qd.i64)
            c = 0
            while n != 1:
                if n % 2 == 0:
                    n = n // 2
                else:
                    n = 3 * n + 1
                c += 1
            steps[i] = c

    def reference() -> dict:
        want = np.zeros(500, np.int32)
        for i in range(500):
            n, c = i + 1, 0
            while n != 1:
                n = n // 2 if n % 2 == 0 else 3 * n + 1
                c += 1
            want[i] = c
        return {"steps": want}

    def run() -> dict:
        k()
        return {"steps": steps.to_numpy()}

    return Run(run, reference)


def _xorshift64(x: int) -> int:
    m = (1 << 64) - 1
    x ^= (x << 13) & m
    x ^= x >> 7
    x ^= (x << 17) & m
    return x


@corpus()
def int_wrap(arch: Arch) -> Run:
    """Narrow and wide integers wrap at their width: i8 add, u16 mul, u64 xorshift, shifts and bit ops."""
    rng = np.random.default_rng(3)
    a8 = rng.integers(-128, 128, 256).astype(np.int8)
    b16 = rng.integers(0, 1 << 16, 256).astype(np.uint16)
    s64 = rng.integers(1, 1 << 63, 256, dtype=np.uint64) * np.uint64(2) + np.uint64(1)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i8, 1), b: qd.types.ndarray(qd.u16, 1), s: qd.types.ndarray(qd.u64, 1),
          o8: qd.types.ndarray(qd.i8, 1), o16: qd.types.ndarray(qd.u16, 1), o64: qd.types.ndarray(qd.u64, 1),
          obits: qd.types.ndarray(qd.i32, 1)):
        for i in range(a.shape[0]):
            o8[i] = a[i] + a[i] + a[i]
            o16[i] = b[i] * b[i] - b[i]
            x = s[i]
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            o64[i] = x
            v = qd.cast(a[i], qd.i32)
            obits[i] = ((v << 3) ^ (v >> 1)) & 0x5A5A | (v & -v)

    def run() -> dict:
        o8, o16 = np.zeros_like(a8), np.zeros_like(b16)
        o64, ob = np.zeros_like(s64), np.zeros(256, np.int32)
        k(a8, b16, s64, o8, o16, o64, ob)
        return {"i8": o8, "u16": o16, "u64": o64, "bits": ob}

    def reference() -> dict:
        v = a8.astype(np.int32)
        return {"i8": a8 + a8 + a8, "u16": b16 * b16 - b16,
                "u64": np.array([_xorshift64(int(s)) for s in s64], np.uint64),
                "bits": ((v << 3) ^ (v >> 1)) & 0x5A5A | (v & -v)}

    return Run(run, reference)


@corpus(options=EXACT_FLOAT)
def f16_storage(arch: Arch) -> Run:
    """f16 fields: an f16 op is computed in f32 and rounded to f16 (numpy's rule); `/` by an int literal
    divides in default_fp (f32, as Quadrants does), so the sum is f32 too; f16 -> f32 is exact."""
    rng = np.random.default_rng(4)
    x0 = (rng.standard_normal(256) * 8).astype(np.float16)
    x = qd.field(qd.f16, shape=256)
    h = qd.field(qd.f16, shape=256)
    w = qd.field(qd.f32, shape=256)

    @qd.kernel
    def k():
        for i in x:
            h[i] = x[i] * x[i] + x[i] / 3
            w[i] = qd.cast(x[i], qd.f32) * 0.5

    def run() -> dict:
        x.from_numpy(x0)
        k()
        return {"h": h.to_numpy(), "w": w.to_numpy()}

    def reference() -> dict:
        x32 = x0.astype(np.float32)
        return {"h": ((x0 * x0).astype(np.float32) + x32 / np.float32(3)).astype(np.float16),
                "w": x32 * np.float32(0.5)}

    return Run(run, reference)


@corpus()
def casts(arch: Arch) -> Run:
    """Casts between widths and kinds: float -> int truncates, int -> narrower int wraps, -> u1 is != 0."""
    rng = np.random.default_rng(5)
    f = (rng.standard_normal(128) * 100).astype(np.float32)
    big = rng.integers(-(1 << 62), 1 << 62, 128)
    d = rng.standard_normal(128) * 1e3

    @qd.kernel
    def k(f: qd.types.ndarray(qd.f32, 1), big: qd.types.ndarray(qd.i64, 1), d: qd.types.ndarray(qd.f64, 1),
          to_i: qd.types.ndarray(qd.i32, 1), to_i8: qd.types.ndarray(qd.i8, 1),
          to_u16: qd.types.ndarray(qd.u16, 1), to_f32: qd.types.ndarray(qd.f32, 1),
          to_f64: qd.types.ndarray(qd.f64, 1), to_u1: qd.types.ndarray(qd.u1, 1)):
        for i in range(f.shape[0]):
            to_i[i] = qd.cast(f[i], qd.i32)
            to_i8[i] = qd.cast(big[i], qd.i8)
            to_u16[i] = qd.cast(big[i], qd.u16)
            to_f32[i] = qd.cast(d[i], qd.f32)
            to_f64[i] = qd.cast(big[i], qd.f64)
            to_u1[i] = qd.cast(to_i[i], qd.u1)

    def run() -> dict:
        out = {"i32": np.zeros(128, np.int32), "i8": np.zeros(128, np.int8), "u16": np.zeros(128, np.uint16),
               "f32": np.zeros(128, np.float32), "f64": np.zeros(128, np.float64),
               "u1": np.zeros(128, np.bool_)}
        k(f, big, d, out["i32"], out["i8"], out["u16"], out["f32"], out["f64"], out["u1"])
        return out

    def reference() -> dict:
        i32 = f.astype(np.int32)
        return {"i32": i32, "i8": big.astype(np.int8), "u16": big.astype(np.uint16),
                "f32": d.astype(np.float32), "f64": big.astype(np.float64), "u1": i32 != 0}

    return Run(run, reference)


@corpus(options=EXACT_FLOAT)
def select_ternary(arch: Arch) -> Run:
    """`qd.select`, the conditional expression, and min/max/abs on ints and floats."""
    rng = np.random.default_rng(6)
    a = rng.integers(-50, 50, 200).astype(np.int32)
    x = rng.standard_normal(200).astype(np.float32)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), x: qd.types.ndarray(qd.f32, 1),
          oi: qd.types.ndarray(qd.i32, 1), of: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            oi[i] = qd.select(a[i] > 0, a[i] * 2, -a[i]) + (1 if a[i] % 2 == 0 else 100) + qd.max(a[i], 7)
            of[i] = qd.select(x[i] < 0.0, qd.abs(x[i]), x[i] * 2.0) + qd.min(x[i], 0.25)

    def run() -> dict:
        oi, of = np.zeros(200, np.int32), np.zeros(200, np.float32)
        k(a, x, oi, of)
        return {"int": oi, "float": of}

    def reference() -> dict:
        oi = np.where(a > 0, a * 2, -a) + np.where(a % 2 == 0, 1, 100) + np.maximum(a, 7)
        of = np.where(x < 0, np.abs(x), x * np.float32(2)) + np.minimum(x, np.float32(0.25))
        return {"int": oi.astype(np.int32), "float": of}

    return Run(run, reference)


@corpus()
def func_return(arch: Arch) -> Run:
    """`qd.func`s with return values: a gcd by `while`, a tuple return, and a func calling funcs."""
    rng = np.random.default_rng(7)
    a = rng.integers(1, 10_000, 300).astype(np.int32)
    b = rng.integers(1, 10_000, 300).astype(np.int32)

    @qd.func
    def gcd(x: qd.i32, y: qd.i32) -> qd.i32:
        while y != 0:
            x, y = y, x % y
        return x

    @qd.func
    def divmod_(x, y):
        return x // y, x % y

    @qd.func
    def lcm_and_rest(x, y):
        g = gcd(x, y)
        q, r = divmod_(x, g)
        return q * y + r

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), b: qd.types.ndarray(qd.i32, 1), g: qd.types.ndarray(qd.i32, 1),
          lcm: qd.types.ndarray(qd.i32, 1)):
        for i in range(a.shape[0]):
            g[i] = gcd(a[i], b[i])
            lcm[i] = lcm_and_rest(a[i], b[i])

    def run() -> dict:
        g, lcm = np.zeros(300, np.int32), np.zeros(300, np.int32)
        k(a, b, g, lcm)
        return {"gcd": g, "lcm": lcm}

    return Run(run, lambda: {"gcd": np.gcd(a, b), "lcm": (a // np.gcd(a, b)) * b})


@corpus()
def kernel_return(arch: Arch) -> Run:
    """Kernel return values: a scalar after a parallel reduction task, and a tuple of mixed types."""
    acc = qd.field(qd.i64, shape=())

    @qd.kernel
    def total(n: qd.i32) -> qd.i64:
        acc[None] = 0
        for i in range(n):
            acc[None] += i * i
        return acc[None]

    @qd.kernel
    def pair(a: qd.i32, x: qd.f32) -> tuple[qd.i32, qd.f32]:
        return a * 3 - 1, x * 0.5 + a

    def run() -> dict:
        p = pair(7, 3.0)
        return {"total": np.int64(total(1000)), "pair_i": np.int32(p[0]), "pair_f": np.float32(p[1])}

    return Run(run, lambda: {"total": np.int64(sum(i * i for i in range(1000))), "pair_i": np.int32(20),
                             "pair_f": np.float32(8.5)})


@corpus(tol={"f32": (4 * 2 * 2.0 ** -23, 1e-6), "f64": (4 * 2 * 2.0 ** -52, 1e-15)})
def transcendentals(arch: Arch) -> Run:
    """sqrt, exp, log, sin, cos, tanh, atan2, pow: within the op table's ulps (x4) of numpy."""
    rng = np.random.default_rng(8)
    x32 = rng.uniform(0.1, 3.0, 256).astype(np.float32)
    x64 = x32.astype(np.float64) * 1.1

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f64, 1), o32: qd.types.ndarray(qd.f32, 2),
          o64: qd.types.ndarray(qd.f64, 2)):
        for i in range(x.shape[0]):
            for o, v in qd.static(((o32, x[i]), (o64, y[i]))):
                o[i, 0] = qd.sqrt(v)
                o[i, 1] = qd.exp(v)
                o[i, 2] = qd.log(v)
                o[i, 3] = qd.sin(v)
                o[i, 4] = qd.cos(v)
                o[i, 5] = qd.tanh(v)
                o[i, 6] = qd.atan2(v, v - 1.5)
                o[i, 7] = v ** 1.5

    def ref(v: np.ndarray) -> np.ndarray:
        return np.stack([np.sqrt(v), np.exp(v), np.log(v), np.sin(v), np.cos(v), np.tanh(v),
                         np.arctan2(v, v - v.dtype.type(1.5)), v ** v.dtype.type(1.5)], axis=1)

    def run() -> dict:
        o32, o64 = np.zeros((256, 8), np.float32), np.zeros((256, 8), np.float64)
        k(x32, x64, o32, o64)
        return {"f32": o32, "f64": o64}

    return Run(run, lambda: {"f32": ref(x32), "f64": ref(x64)})
