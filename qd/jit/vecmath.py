"""Vector math for the CPU tier: glibc's libmvec behind LLVM's loop vectorizer (issue 15).

`CpuTarget.math_call` emits LLVM's math intrinsics (`llvm.sin.f32`, ...), which lower to the same libm calls as
before where they stay scalar, and which the loop vectorizer widens (`llvm.sin.v8f32`). LLVM's own back end would
split such a call back into one libm call per lane; `lower` renames it to glibc's vector variant instead
(`_ZGVdN8v_sinf`: the x86-64 vector function ABI, AVX-512 for 16 floats / 8 doubles, AVX2 for 8 / 4, SSE for 4 / 2),
whose arguments and result are the vector registers LLVM's calling convention already uses. Over 2^22 f32 inputs
`sin` went from 50 ms to 2.2 ms on 2 cores. libmvec's results are within a few ulps (up to 3.8: the op table's `cpu`
column, measured by `bench/ulps.py`), not bit-identical to the scalar libm's, so this is done under `fast_math=True`
(the default) only: with `fast_math=False` the widened calls are split per lane into the scalar libm calls, whose
results are the interpreter's bit for bit.

Only the variants this process's libmvec exports are used (checked by name), the AVX-512 and AVX2 ones only on a
host with them; anything else stays LLVM's per-lane split (on an AVX-512 host LLVM widens to 16 floats: without the
AVX-512 variants bench/test_ad.py's forward, sin, exp and log over 2^22 floats, took 22 ms instead of 3). The
mapping depends on the host, as the object code does (the CPU tier's cache key has the host CPU and its features).
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from qd.ops import INFO, TRANSCENDENTAL

# The op table's C math functions LLVM has a math intrinsic for (LLVM's own table: `llvm.sin` is the libm call where
# it stays scalar, and the loop vectorizer widens it, renamed here); another one is a plain libm call
# (`CpuTarget.math_call`) and stays out of SIMD lanes (`qd/jit/lanes.py`).
LLVM_MATH_INTRINSICS = frozenset({"sin", "cos", "tan", "asin", "acos", "tanh", "exp", "log", "pow", "atan2"})
# those C math names -> number of vector arguments (`v` or `vv` in the vector ABI name)
_ARITY = {INFO[op].libm: INFO[op].arity for op in TRANSCENDENTAL if INFO[op].libm in LLVM_MATH_INTRINSICS}
# (LLVM vector type suffix, ISA letter of the vector ABI, lanes, C suffix of the scalar function)
_SHAPES = (("v16f32", "e", 16, "f"), ("v8f32", "d", 8, "f"), ("v4f32", "b", 4, "f"), ("v8f64", "e", 8, ""),
           ("v4f64", "d", 4, ""), ("v2f64", "b", 2, ""))
_ISA_FEATURE = {"e": "avx512f", "d": "avx2"}  # the host feature a vector ABI's ISA letter needs (`b`: SSE, always)
_INTRINSIC = re.compile(r"@llvm\.(" + "|".join(_ARITY) + r")\.(v\d+f(?:32|64))\b")

_table: dict[str, str] | None = None


def _host_features() -> dict:
    import llvmlite.binding as llvm

    return dict(llvm.get_host_cpu_features())


def table() -> dict[str, str]:
    """{vector intrinsic name: libmvec symbol} usable in this process (empty without libmvec); loads libmvec
    into LLVM's symbol search the first time."""
    global _table
    if _table is not None:
        return _table
    import llvmlite.binding as llvm

    _table = {}
    try:
        lib = ctypes.CDLL("libmvec.so.1")
        llvm.load_library_permanently("libmvec.so.1")
    except OSError:
        return _table
    features = _host_features()
    for name, arity in _ARITY.items():
        for suffix, isa, lanes, c in _SHAPES:
            if isa in _ISA_FEATURE and not features.get(_ISA_FEATURE[isa], False):
                continue
            symbol = f"_ZGV{isa}N{lanes}{'v' * arity}_{name}{c}"
            if hasattr(lib, symbol):
                _table[f"llvm.{name}.{suffix}"] = symbol
    return _table


def lower(mod: Any) -> Any:
    """`mod` (an optimised `llvmlite.binding.ModuleRef`) with its vector math intrinsics calling libmvec: the same
    module when it has none, else a new one parsed from the renamed text."""
    mapping = table()
    if not mapping or not any(f.is_declaration and f.name in mapping for f in mod.functions):
        return mod
    import llvmlite.binding as llvm

    text = _INTRINSIC.sub(lambda m: "@" + mapping.get(m.group(0)[1:], m.group(0)[1:]), str(mod))
    out = llvm.parse_assembly(text)
    out.verify()
    return out
