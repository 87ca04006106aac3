"""Vector math on the CPU tier (`qd/jit/vecmath.py`): under fast math, vectorized loops call glibc's libmvec, within
the op table's `cpu` ulps; without fast math, the same loops give the interpreter's libm results bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.ops import INFO, Op

pytestmark = pytest.mark.archs("cpu")


def _libmvec() -> dict:
    from qd.jit import vecmath

    table = vecmath.table()
    if not table:
        pytest.skip("this process has no glibc libmvec (vectorized math calls stay per-lane libm calls)")
    return table


def _kernel():
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f64, 1), o32: qd.types.ndarray(qd.f32, 1),
          o64: qd.types.ndarray(qd.f64, 1)):
        for i in x:
            o32[i] = qd.sin(x[i]) + qd.exp(-x[i] * x[i]) * qd.cos(x[i])
            o64[i] = qd.atan2(y[i], 2.0) + qd.pow(qd.abs(y[i]), 0.3)
    return k


def _inputs(n: int = 4099) -> tuple:
    g = np.random.default_rng(7)
    return g.uniform(-4, 4, n).astype(np.float32), g.uniform(-4, 4, n)


def _run(arch: object, fast_math: bool, jit: str = "eager") -> tuple:
    qd.init(arch=arch, fast_math=fast_math, jit=jit, offline_cache=False, log_level="warn")
    x, y = _inputs()
    o32, o64 = np.zeros_like(x), np.zeros_like(y)
    _kernel()(x, y, o32, o64)
    return o32, o64


def test_the_vectorized_loop_calls_libmvec(arch: object) -> None:
    import llvmlite.binding as llvm

    from qd.jit import cpu, vecmath
    from qd.jit.llvm import build_module

    table = _libmvec()
    qd.init(arch=arch, jit="interp", log_level="warn")
    x, y = _inputs(16)
    k = _kernel()
    k(x, y, np.zeros_like(x), np.zeros_like(y))
    tm, target = cpu._machine()
    mod_ir, *_ = build_module(k._last_ck.ir, target, True)
    mod = llvm.parse_assembly(str(mod_ir))
    cpu._optimise(mod, tm)
    text = str(vecmath.lower(mod))
    called = {s for s in table.values() if f"@{s}(" in text}
    assert {s for s in called if "sinf" in s or "cosf" in s or "expf" in s}, text
    assert not any(f"@{name}(" in text for name in table), "a mapped vector intrinsic is left"
    # nor one of a width the table lacks (LLVM splits it into a libm call per lane: on an AVX-512 host the loop was
    # widened to 16 floats while the table had only AVX2's 8, and the AD benchmark's forward ran 7x slower)
    left = sorted({m.group(0) for m in vecmath._INTRINSIC.finditer(text) if f"{m.group(0)}(" in text})
    assert not left, f"widened math calls with no libmvec variant: {left}"


def test_fast_math_results_within_the_op_tables_cpu_ulps(arch: object) -> None:
    _libmvec()
    o32, o64 = _run(arch, True)
    x, y = _inputs()
    xd = x.astype(np.float64)
    want32 = np.sin(xd) + np.exp(-xd * xd) * np.cos(xd)
    want64 = np.arctan2(y, 2.0) + np.abs(y) ** 0.3
    ulps = max(INFO[op].ulps["cpu"] for op in (Op.SIN, Op.COS, Op.EXP, Op.ATAN2, Op.POW))
    # (each term within the bound of its op at its own size, the terms at most 1 and 4 in size here)
    np.testing.assert_allclose(o32, want32, rtol=0, atol=4 * ulps * np.finfo(np.float32).eps * 4)
    np.testing.assert_allclose(o64, want64, rtol=0, atol=4 * ulps * np.finfo(np.float64).eps * 8)


def test_without_fast_math_the_loop_equals_the_interpreter_bit_for_bit(arch: object) -> None:
    o32, o64 = _run(arch, False)
    i32, i64 = _run(qd.interp, False, jit="interp")
    np.testing.assert_array_equal(o32, i32)
    np.testing.assert_array_equal(o64, i64)


def test_a_large_first_launch_runs_right_on_quickly_compiled_code(arch: object) -> None:
    """A large first launch waits for quickly compiled code (O1 with the loop vectorizer, O0 machine code)."""
    from qd.jit import tiering

    qd.init(arch=arch, jit="auto", offline_cache=False, log_level="warn")
    n = tiering.WAIT_FOR_COMPILER_WORK // 4
    x = np.linspace(-3, 3, n).astype(np.float32)
    y = np.zeros_like(x)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            y[i] = x[i] * 2.0 + 1.0

    k(x, y)
    assert k._last_ck.tier.native is not None and k._last_ck.tier.native.quick
    np.testing.assert_array_equal(y, x * np.float32(2.0) + np.float32(1.0))
