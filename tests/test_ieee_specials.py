"""IEEE special values (inf, NaN, -0.0, subnormals) through `+ - * / %` next to constant zeros under `fast_math=False`,
on every tier, bit for bit against numpy (any NaN equals any NaN): issue 27 item 3, where lavapipe folded `x * 0.0`
to 0, `x / 0.0` to 0 and `x % 0.0` to x. Zeros reach the operation as literals, through locals, through an int cast
and through an unrolled loop, as a driver's constant propagation would see them, and as constants qd's own
simplify pass folds (it keeps only exact identities: `x * 1`, `x - 0.0`, `x + -0.0`). Then the SPIR-V side without a
device: the float-controls execution modes a module declares, and the hidden zeros (`qd/gpu/spirv_float.py`)."""

import os
from typing import Any

import numpy as np
import pytest

import qd
from qd.types import dtypes as T

X = [np.inf, -np.inf, np.nan, 1.0, -1.0, -0.0, 0.0, 2.5, -3.0e-39, 1.0e-45, 3.0e38]
DTYPES = {"f32": (qd.f32, np.float32), "f64": (qd.f64, np.float64), "f16": (qd.f16, np.float16)}
K = 19


def _reference(x: np.ndarray) -> np.ndarray:
    """The expressions of `_kernel` in numpy at the input's width (f16: in f32, rounded to f16 after every op)."""
    ft = np.float32 if x.dtype == np.float16 else x.dtype.type

    def r(v: Any) -> Any:
        return np.asarray(v, ft).astype(x.dtype).astype(ft)

    z, nz, one = ft(0.0), ft(-0.0), ft(1.0)
    with np.errstate(all="ignore"):
        v = x.astype(ft)
        mod0 = r(v - r(z * r(np.floor(r(v / z)))))
        cols = [v * z, v * nz, v / z, v / nz, z / v, mod0, v + z, z - v, z * v, v * z, v * z, r(r(z + r(v * z)) + v),
                r(np.inf * v), v - v, v * one, r(v * z) + z, r(nz - r(z * v)), np.full_like(v, np.nan),
                np.full_like(v, 0.0)]
        return np.stack([r(c) for c in cols], axis=1).astype(x.dtype)


def _kernel(dt: Any) -> Any:
    @qd.kernel
    def k(x: qd.types.ndarray(dtype=dt, ndim=1), out: qd.types.ndarray(dtype=dt, ndim=2)):
        for i in range(x.shape[0]):
            v = x[i]
            z = qd.cast(0.0, dt)
            zi = 0
            out[i, 0] = v * 0.0
            out[i, 1] = v * -0.0
            out[i, 2] = v / 0.0
            out[i, 3] = v / -0.0
            out[i, 4] = 0.0 / v
            out[i, 5] = v % 0.0
            out[i, 6] = v + 0.0
            out[i, 7] = 0.0 - v
            out[i, 8] = 0.0 * v
            out[i, 9] = v * z
            out[i, 10] = v * qd.cast(zi, dt)
            s = qd.cast(0.0, dt)
            for j in range(2):  # unrolled by drivers: its first round is `0.0 + v * 0.0`
                s = s + v * qd.cast(j, dt)
            out[i, 11] = s
            out[i, 12] = qd.rsqrt(z) * v
            out[i, 13] = v - v
            out[i, 14] = v * 1.0
            out[i, 15] = (v * z) + 0.0
            out[i, 16] = -0.0 - z * v
            out[i, 17] = qd.cast(qd.math.inf, dt) * 0.0  # folded by qd's simplify pass: numpy at dt's width
            out[i, 18] = qd.cast(-0.0, dt) + 0.0
    return k


def _same_bits(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    return (want.view(u) == got.view(u)) | (np.isnan(want) & np.isnan(got))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_specials_next_to_constant_zeros(arch: Any, name: str) -> None:
    qd.cfg.fast_math = False
    dt, npdt = DTYPES[name]
    with np.errstate(over="ignore"):
        x = np.array(X, npdt)
    out = np.zeros((len(X), K), npdt)
    _kernel(dt)(x, out)
    want = _reference(x)
    bad = np.argwhere(~_same_bits(want, out))
    assert not len(bad), "\n".join(f"x = {x[i]!r}, expression {k}: want {want[i, k]!r}, got {out[i, k]!r}"
                                   for i, k in bad[:12])


# ------------------------------------------------------------------ the SPIR-V side (no device)


def test_float_modes_follow_support_and_independence() -> None:
    from qd.gpu.spirv_float import INDEPENDENCE_32_BIT_ONLY, INDEPENDENCE_ALL, INDEPENDENCE_NONE, FloatControls
    from qd.gpu.spirv_float import execution_modes as modes

    def names(fc: FloatControls, used: set[int]) -> list[tuple[str, int]]:
        return [(mode.name, w) for _, mode, w in modes(fc, used)]

    full = (16, 32, 64)
    fc = FloatControls(preserve=full, denorm_preserve=full, rte=full, denorm_independence=INDEPENDENCE_ALL,
                       rounding_independence=INDEPENDENCE_ALL)
    assert names(fc, {32}) == [("SignedZeroInfNanPreserve", 32), ("DenormPreserve", 32), ("RoundingModeRTE", 32)]
    # widths a device ties together are set together (each supported) or not at all
    tied = FloatControls(preserve=(32,), denorm_preserve=(32, 64), rte=(16, 32, 64),
                         denorm_independence=INDEPENDENCE_32_BIT_ONLY, rounding_independence=INDEPENDENCE_NONE)
    assert names(tied, {32, 64}) == [("SignedZeroInfNanPreserve", 32), ("DenormPreserve", 32),
                                     ("RoundingModeRTE", 16), ("RoundingModeRTE", 32), ("RoundingModeRTE", 64)]
    assert names(FloatControls(), {32, 64}) == []


def _offloaded_ir() -> Any:
    """An offloaded kernel computing `x * 0.0` (compiled on the interpreter; its IR is the SPIR-V emitter's input)."""
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f64, 1)):
        for i in range(x.shape[0]):
            x[i] = x[i] * 0.0
            y[i] = y[i] / 0.0

    k(np.zeros(2, np.float32), np.zeros(2, np.float64))
    ir = k._last_ck.ir
    qd.reset()
    return ir


def _instructions(words: list[int]) -> list[list[int]]:
    out, i = [], 5
    while i < len(words):
        n = words[i] >> 16
        out.append(words[i:i + n])
        i += n
    return out


@pytest.mark.parametrize("fast_math", [False, True])
@pytest.mark.parametrize("hide", [False, True])
def test_modules_declare_float_controls_and_hide_zeros(fast_math: bool, hide: bool) -> None:
    from qd.gpu import spirv
    from qd.gpu.spirv_defs import ExecutionMode
    from qd.gpu.spirv_defs import Op as S
    from qd.gpu.spirv_float import FloatControls

    fc = FloatControls(preserve=(16, 32, 64), rte=(32,), rounding_independence=1)
    words = spirv.build_spirv(_offloaded_ir(), spirv.Caps(float_controls=fc, hide_zeros=hide), fast_math,
                              1024).tasks[0].words
    ins = _instructions(words)
    modes = sorted((ExecutionMode(i[2]).name, i[3]) for i in ins if i[0] & 0xFFFF == S.ExecutionMode and len(i) == 4)
    assert modes == ([] if fast_math else [("RoundingModeRTE", 32), ("SignedZeroInfNanPreserve", 32),
                                           ("SignedZeroInfNanPreserve", 64)])
    ors = sum(1 for i in ins if i[0] & 0xFFFF == S.BitwiseOr)
    assert (ors == 2) == (hide and not fast_math) and (ors == 0) == (not hide or fast_math)
    if not fast_math and os.environ.get("QD_SPIRV_VALIDATE") == "1":  # conftest: set where spirv-val is installed
        from qd.gpu.vulkan_tier import validate

        validate(words, "the float-controls test module")


def test_opacity_keeps_runtime_values_and_hides_what_a_driver_may_fold() -> None:
    from qd import ir
    from qd.gpu.spirv_float import opaque
    from qd.ops import Op

    x = ir.GlobalLoad(ptr=ir.GlobalPtr(buffer=0, indices=(), dtype=T.f32), dtype=T.f32)
    zero = ir.Const(dtype=T.f32, value=0.0)
    local = ir.LocalLoad(var=ir.Alloca(dtype=T.f32), dtype=T.f32)
    i = ir.OpStmt(op=Op.SUB, args=(ir.ArgLoad(index=0, dtype=T.i32),) * 2, dtype=T.i32)  # i - i: 0 to a compiler
    memo: dict = {}
    assert opaque(ir.OpStmt(op=Op.MUL, args=(x, zero), dtype=T.f32), None, memo)
    assert not opaque(zero, None, memo) and not opaque(local, None, memo)
    assert not opaque(ir.OpStmt(op=Op.CAST, args=(i,), dtype=T.f32), None, memo)
    assert opaque(ir.OpStmt(op=Op.CAST, args=(ir.ArgLoad(index=1, dtype=T.i32),), dtype=T.f32), None, memo)
