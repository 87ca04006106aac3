"""The serial reference: helpers the reference rendering of a generated kernel calls, and `run_reference`.

A generated program is rendered twice (`generator.Program.qd_source` / `ref_source`). The reference
rendering is plain Python that runs every parallel loop serially, in index order, over numpy arrays.
What it assumes about qd (DESIGN §4), which is what the fuzzer checks:

- Integers are Python ints wrapped to their width after every op (two's complement): `w32` / `w64`.
  `//` floors and `%` takes the divisor's sign (Python); `x // 0 == 0` and `x % 0 == 0`;
  `x // -1 == -x` wrapped (so INT_MIN // -1 == INT_MIN) and `x % -1 == 0`. Shift counts are masked by the
  generator (`r & 7`), so `<<` is `w(a << s)` and `>>` is the arithmetic shift of a signed int.
  `abs(INT_MIN)` and `-INT_MIN` wrap to INT_MIN. A narrowing int cast wraps; a float -> int cast
  truncates toward zero (the generator clamps the operand to [-1000, 1000] first).
- f32 values are numpy float32 scalars and f64 values numpy float64 scalars, so every op is rounded at
  its own width (qd runs with `fast_math=False`: no contraction, no reassociation). `qd.min` /
  `qd.max` on floats are `x if (x <= y or isnan(y)) else y` / `x if (x >= y or isnan(y)) else y`
  (qd's rule, also for +-0). An int -> float cast rounds once (numpy's C cast of the int64).
- A kernel-scope local updated inside a parallel loop by `+= -= *=` or `qd.atomic_*` is an atomic
  reduction: the serial order is one valid order. The generator never reads such a local inside the loop
  that updates it, never mixes op families (add/sub, mul, min, max) on one local or one shared output cell
  within a loop, and never stores to it plainly there (`s = ...` would be a race), so every valid order
  gives the same integers and floats equal up to rounding.
- Float results that depend on the order of a float reduction (add/sub/mul through atomics) or on
  `qd.sin` (libm vs numpy, ~1 ulp) are "fuzzy": compared with a tolerance (|got - want| <= 1e-3 * the
  largest finite magnitude in the array or added/subtracted by a float reduction (`facc`: large summands
  that cancel leave another order's rounding above the result), at least 1e-3; elements whose reference
  value is not finite or is above 1e20 in magnitude are not checked). Fuzzy values never reach a comparison, a cast to int, an index
  or a trip count. Every other float is compared exactly (NaN equals NaN; -0 equals +0, because a min/max
  reduction keeps whichever zero comes first; with `GenOptions.specials` the signs of zeros must agree too,
  min/max reductions then adding 0.0 to their values), and every integer exactly.
- Float `%` is `a - b * floor(a / b)` at the operands' width (`ffmod`).
- `qd.bit_cast` reinterprets bits as numpy's `.view` does; an f32 -> f16 cast rounds to nearest even (numpy's
  `astype`). The generator gives it only exact operands and canonicalises what the op table leaves open
  (`generator.BitCast`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

F32 = np.float32
F64 = np.float64


def w32(x: int) -> int:
    return ((int(x) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def w64(x: int) -> int:
    return ((int(x) + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def fdiv(a: int, b: int, w: Any) -> int:
    return 0 if b == 0 else w(a // b)


def mod(a: int, b: int, w: Any) -> int:
    return 0 if b == 0 else w(a % b)


def fmin(x: Any, y: Any) -> Any:
    return x if (x <= y or math.isnan(y)) else y


def fmax(x: Any, y: Any) -> Any:
    return x if (x >= y or math.isnan(y)) else y


def i2f(x: int, ft: Any) -> Any:
    return ft(np.int64(x))


def f2i(x: Any, w: Any) -> int:
    return w(int(x))  # truncation toward zero; the operand is clamped to [-1000, 1000] by the generator


def fsin(x: Any, ft: Any) -> Any:
    return ft(np.sin(x))


def fsqrt(x: Any, ft: Any) -> Any:
    return ft(np.sqrt(x))


def _canonical_bits(x: Any, nan: int, view: Any) -> int:
    """The bits of float `x` as the generator's bit casts give them: NaN's canonical, zero's +0's."""
    if math.isnan(x):
        return nan
    return 0 if x == 0 else int(np.array(x).view(view))


def bitcast_f16_bits(x: Any) -> int:
    if math.isnan(x):
        return 0x7E00
    return 0 if x == 0 else int(np.array(F32(x)).astype(np.float16).view(np.int16))


def bitcast_f32_bits(x: Any) -> int:
    return _canonical_bits(F32(x), 0x7FC00000, np.int32)


def bitcast_f64_bits(x: Any) -> int:
    return _canonical_bits(F64(x), 0x7FF8000000000000, np.int64)


def bitcast_bits_f16(x: int) -> Any:
    return F32(np.array(w32(x) & 0xFBFF).astype(np.uint16).view(np.float16))


def bitcast_bits_f32(x: int) -> Any:
    x = w32(x)
    return np.array(w32((x & -2139095041) | (((x >> 23) & 15) + 119) << 23), np.int32).view(np.float32)[()]


def bitcast_bits_f64(x: int) -> Any:
    x = w64(x)
    return np.array(w64((x & -9218868437227405313) | (((x >> 52) & 15) + 1015) << 52), np.int64).view(
        np.float64)[()]


def ffmod(a: Any, b: Any) -> Any:
    """qd's float `%` (Quadrants'): `a - b * floor(a / b)`, each step rounded at the operands' width."""
    return a - b * np.floor(a / b)


_MAGNITUDE = [0.0]  # of the current reference run (`facc`)


def facc(x: Any, y: Any, sym: str) -> Any:
    """`x + y` or `x - y` of a float update (a reduction): rounded as the plain expression, recording the
    largest finite operand magnitude (another order of the reduction may differ by its rounding, which can
    exceed the result's own magnitude when large summands cancel)."""
    m = max(abs(float(x)), abs(float(y)))
    if m > _MAGNITUDE[0] and math.isfinite(m):
        _MAGNITUDE[0] = m
    return x + y if sym == "+" else x - y


NAMESPACE = {name: globals()[name] for name in
             ("F32", "F64", "w32", "w64", "fdiv", "mod", "fmin", "fmax", "i2f", "f2i", "fsin", "fsqrt", "ffmod",
              "facc", "bitcast_f16_bits", "bitcast_f32_bits", "bitcast_f64_bits", "bitcast_bits_f16",
              "bitcast_bits_f32", "bitcast_bits_f64")}
NAMESPACE["np"] = np


def compile_reference(src: str, filename: str = "<fuzz-reference>") -> Any:
    ns = dict(NAMESPACE)
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - generated code
    return ns["ref"]


def run_reference(src: str, arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], Any, float]:
    """Run the reference rendering on copies of `arrays`; returns (arrays after, return value, the largest
    magnitude a float reduction added or subtracted: fuzzy values are compared relative to it too)."""
    fn = compile_reference(src)
    out = {k: v.copy() for k, v in arrays.items()}
    _MAGNITUDE[0] = 0.0
    with np.errstate(all="ignore"):
        ret = fn(**out)
    return out, ret, _MAGNITUDE[0]
