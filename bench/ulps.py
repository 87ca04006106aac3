"""The accuracy of qd's float functions on a tier, in ulps, against a higher-precision reference (GPU.md §4).

    python bench/ulps.py ARCH [N]        # ARCH: interp | cpu | vulkan | cuda | opencl; N inputs per op
                                         # and dtype (default 2^20, >= 10^6); prints one JSON object

For each op of `CASES` and each of f32 and f64, N inputs drawn from the op's domain (a fixed seed) go through a
one-line kernel, with `fast_math=False` and with `fast_math=True` (the cpu tier's vector math, glibc's libmvec,
is used under fast math only); the larger error of the two is reported. The reference is numpy in float64 for
f32 results and in the platform's long double (x87: 64-bit significand) for f64 results. The error of a result
is |result - reference| divided by the spacing of the result type at the reference (`np.spacing`); the maximum
over the inputs is reported. The op table (`qd/ops.py`, `OpInfo.ulps`) records a bound per tier from these
runs, and `tests/test_ulps.py` checks it on every tier with fewer inputs.
"""

# no `from __future__ import annotations`: kernel annotations must be evaluated where the kernel is defined

import json
import sys
from typing import Any, Callable

import numpy as np

import qd

_RNG_SEED = 20261125


def _uniform(lo: float, hi: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda g, n: g.uniform(lo, hi, n)


def _log_uniform(lo_exp: float, hi_exp: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda g, n: 10.0 ** g.uniform(lo_exp, hi_exp, n)


# op name -> (kernel expression over a and b, numpy reference over (a, b), domain of a, domain of b or None)
CASES: dict[str, tuple] = {
    "sin": (lambda a, b: qd.sin(a), lambda a, b: np.sin(a), _uniform(-1000, 1000), None),
    "cos": (lambda a, b: qd.cos(a), lambda a, b: np.cos(a), _uniform(-1000, 1000), None),
    "tan": (lambda a, b: qd.tan(a), lambda a, b: np.tan(a), _uniform(-100, 100), None),
    "asin": (lambda a, b: qd.asin(a), lambda a, b: np.arcsin(a), _uniform(-1, 1), None),
    "acos": (lambda a, b: qd.acos(a), lambda a, b: np.arccos(a), _uniform(-1, 1), None),
    "tanh": (lambda a, b: qd.tanh(a), lambda a, b: np.tanh(a), _uniform(-20, 20), None),
    "exp": (lambda a, b: qd.exp(a), lambda a, b: np.exp(a), _uniform(-80, 80), None),
    "log": (lambda a, b: qd.log(a), lambda a, b: np.log(a), _log_uniform(-30, 30), None),
    "sqrt": (lambda a, b: qd.sqrt(a), lambda a, b: np.sqrt(a), _log_uniform(-30, 30), None),
    "rsqrt": (lambda a, b: qd.rsqrt(a), lambda a, b: 1 / np.sqrt(a), _log_uniform(-30, 30), None),
    "div": (lambda a, b: a / b, lambda a, b: a / b, _uniform(-1000, 1000), _uniform(-10, 10)),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b, _log_uniform(-3, 2), _uniform(-8, 8)),
    "atan2": (lambda a, b: qd.atan2(a, b), lambda a, b: np.arctan2(a, b), _uniform(-10, 10), _uniform(-10, 10)),
}
DTYPES = {"f32": (qd.f32, np.float32, np.float64), "f64": (qd.f64, np.float64, np.longdouble)}


def inputs(op: str, np_dtype: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The N inputs of `op` (a, b) in `np_dtype`, the same on every tier and run."""
    _, _, da, db = CASES[op]
    g = np.random.default_rng(_RNG_SEED + sorted(CASES).index(op))
    a = da(g, n).astype(np_dtype)
    b = (db(g, n) if db is not None else np.zeros(n)).astype(np_dtype)
    return a, b


def ulp_errors(result: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|result - reference| in units of the result type's spacing at the reference (NaN where the reference is
    not finite in the result type)."""
    ref_rounded = reference.astype(result.dtype)
    with np.errstate(all="ignore"):
        err = np.abs(result.astype(reference.dtype) - reference) / np.spacing(np.abs(ref_rounded)).astype(
            reference.dtype)
    err[~np.isfinite(ref_rounded)] = np.nan
    return err.astype(np.float64)


def measure(op: str, dt_name: str, n: int) -> float:
    """The maximum error of `op` in ulps over its N inputs, on the current program's tier."""
    expr, ref, _, _ = CASES[op]
    qd_dt, np_dt, ref_dt = DTYPES[dt_name]
    a, b = inputs(op, np_dt, n)

    @qd.kernel
    def run(x: qd.types.ndarray(qd_dt, 1), y: qd.types.ndarray(qd_dt, 1), out: qd.types.ndarray(qd_dt, 1)):
        for i in range(x.shape[0]):
            out[i] = expr(x[i], y[i])

    xd, yd, od = (qd.ndarray(qd_dt, (n,)) for _ in range(3))
    xd.from_numpy(a)
    yd.from_numpy(b)
    run(xd, yd, od)
    got = od.to_numpy()
    with np.errstate(all="ignore"):
        want = ref(a.astype(ref_dt), b.astype(ref_dt))
    err = ulp_errors(got, want)
    bad = np.isnan(err) & np.isfinite(want.astype(np_dt))
    if bad.any():  # a NaN where the reference is finite
        return float("inf")
    return float(np.nanmax(err)) if np.isfinite(err).any() else 0.0


def main() -> int:
    arch = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    out: dict[str, Any] = {"arch": arch, "n": n}
    for fast_math in (False, True):
        qd.init(arch=getattr(qd, arch), fast_math=fast_math, log_level="warn", enable_fallback=False)
        for op in CASES:
            worst = out.setdefault(op, {})
            for dt in DTYPES:
                worst[dt] = max(worst.get(dt, 0.0), round(measure(op, dt, n), 3))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
