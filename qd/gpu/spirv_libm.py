"""f64 transcendentals for the SPIR-V tier: GLSL.std.450 has no 64-bit Exp/Log/Sin/Cos/Tan/Asin/Acos/Tanh/
Atan2/Pow, so these emit their own straight-line code (no loops, no tables in memory) through the `Emit`
protocol of `qd/gpu/spirv_ops.py`, using only IEEE f64 add/sub/mul/div, Sqrt, Floor, FAbs and
u64 bit manipulation.

Method (fdlibm-style, coefficients fitted for this file: Chebyshev interpolation with mpmath at 400 bits,
degree chosen so the fit error is far below 2^-53, then rounded to double; log uses its Taylor series):

- exp: x = k ln2 + r with ln2 in two parts (the first of 42 bits, so k*ln2_hi is exact), |r| <= ln2/2,
  e^r = 1 + r + r^2 Q(r) (degree 10), the `1 + r` kept as a double-double; 2^k applied as two exact
  powers of two so subnormal results are rounded once and overflow gives inf.
- log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), m = c (1 + ...) with c = j/16 the nearest sixteenth (log c
  from a 13-entry select chain, two parts each), log(m/c) = 2 atanh(s), s = (m-c)/(m+c) as a
  double-double; the result is a double-double good to ~2^-68 relative (log rounds it once).
- pow: |x|**y = exp(y * log|x|) with that double-double log, an exact product (Veltkamp/Dekker) and exp
  of a double-double argument; C99 special cases come from `spirv_ops.pow_float`.
- sin/cos/tan: for |x| < 2^30, x = k pi/2 + r with pi/2 in four parts (three of 23 bits, so k*P_i is exact
  for |k| < 2^30, and error-free sums: r is a double-double good to ~2^-90 absolute). From 2^30 to the
  largest double, Payne-Hanek: x = m 2^(e-52) with m the 53-bit significand; the 192 bits of 2/pi from bit
  e - 53 on (2/pi derived here from Machin's formula in Python integers, 19 words of 64 bits, picked by the
  exponent through a select chain and shifted) times m, kept mod 2^192 in 32-bit limbs through u64 products,
  is x 2/pi mod 4 in fixed point with 190 fraction bits, exact to 2^-137; the nearest quadrant and the
  signed fraction (a double-double from the six limbs, times pi/2 in double-double) follow. The double
  nearest a multiple of pi/2 leaves |r| ~ 2^-61, so r is still good to ~2^-76 relative. Both reductions
  are emitted and the result selected by |x| >= 2^30. Then minimax sin/cos kernels on |r| <= pi/4 (degree
  6 in r^2); tan divides the two double-double kernels with one correction step. < 1 ulp for every finite
  x; inf and NaN give NaN.
- asin/acos: |x| <= 1/2: asin x = x + x^3 P(x^2) (degree 12); beyond, asin x = pi/2 - 2 asin(sqrt((1-x)/2))
  with the square root split as hi (21 bits) + exact correction (fdlibm's scheme).
- tanh: |x| < 1/2: x + x^3 T(x^2) (degree 10); else 1 - 2/(e^{2|x|} + 1) with e^{2|x|} and the quotient
  as double-doubles; |x| >= 22 gives +-1.
- atan2: t = min/max of |y|, |x| (scaled by a power of two when huge or tiny), atan t = atan c +
  atan((t-c)/(1+ct)) for c in {0, 1/2, 1} (the reduced quotient computed from the operands directly, with
  its rounding error carried), polynomial of degree 11 in u^2; octant folded with double-double pi/2, pi.

Every float op here is NoContraction, even under fast math: the error-free transforms (two-sum, Dekker's
product) are wrong once an implementation fuses or reassociates them (GLSL Fma is not used: Vulkan does not
require it fused, and lavapipe's is not). Rounding to an integer is the 2^52 trick, not GLSL RoundEven, which
is wrong on f64 on lavapipe (`f64_round_even` serves `round` on f64 too). The figures assume the device's f64
add/sub/mul/div/sqrt are correctly rounded (IEEE; true of lavapipe); one whose division or square root is
not would add about an ulp.

Measured on lavapipe (`pytest tests/test_spirv_libm.py -m slow -s`): max ulps against numpy float64 over
10^6 random inputs per op plus the special values (the distance between the two doubles, counted through
their ordered bit patterns; every special value matches numpy exactly, zeros by sign), and the max error
against the exact value (mpmath at 200 bits) over 10^5 of the same inputs:

    op      numpy   exact   inputs
    exp     1       0.60    uniform [-745.2, 709.8]; +-10^[-20, 2.85] log-uniform (subnormal results included)
    log     1       0.50    random bit patterns: every positive finite double, subnormals included; 1 +- 2^-[1, 52]
    sin     1       0.69    uniform [-10, 10]; +-10^[-10, 9.2] log-uniform; round(U(-1e6, 1e6)) pi/2 and the
                            next double up (the reduction's cancellation cases); +-[1, 2) 2^[30, 1023] (the
                            Payne-Hanek range; alone, exact: sin 0.69, cos 0.68, tan 0.76); the double nearest
                            a multiple of pi/2, 6381956970095103 2^797 (numpy, like glibc, is 8 ulps off in cos
                            and 14 in tan there: counted against the exact value)
    cos     1       0.72    as sin
    tan     1       0.78    as sin
    asin    1       0.76    uniform [-1, 1]; +-(1 - 10^[-16, 0]); +-10^[-20, 0]
    acos    1       0.87    as asin
    tanh    1       0.61    uniform [-25, 25]; +-10^[-20, 1.5]
    atan2   1       0.61    y and x independently: half +-10^[-300, 300] log-uniform, half uniform [-10, 10]
    pow     1       0.64    x 10^[-300, 300], y uniform with |y ln x| <= 760 (underflow to overflow); x = 1 +-
                            2^-[1, 52] with |y ln x| <= 700; x = -10^[-3, 3] with integral y in [-100, 100];
                            edge cases (2^+-1074.., 10^+-308.., (1 + 2^-52)^(2^60))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qd.gpu.spirv_defs import GLSL
from qd.gpu.spirv_defs import Op as S
from qd.types import dtypes as T

if TYPE_CHECKING:
    from qd.gpu.spirv_ops import Emit

Val = int | float  # an id (int) or a constant (a Python float)

# ------------------------------------------------------------------ constants

_INV_LN2 = 1.4426950408889634
_LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")  # 42 bits: k * _LN2_HI is exact for |k| < 2^11
_LN2_LO = 5.497923018708371e-14
_TWO_OVER_PI = 0.6366197723675814
_PIO2_1 = float.fromhex("0x1.921fb40000000p+0")  # pi/2 in parts of 23, 23, 23 and 53 bits
_PIO2_2 = float.fromhex("0x1.4442d00000000p-24")
_PIO2_3 = float.fromhex("0x1.8469880000000p-48")
_PIO2_4 = float.fromhex("0x1.8cc51701b839ap-72")
_PIO2 = (1.5707963267948966, 6.123233995736766e-17)  # (hi, lo)
_PIO2_SPLIT = (1.5707963407039642, -1.3909067675399456e-08)  # _PIO2[0] as `_D.split` makes it (26 + 27 bits)
_PI = (3.141592653589793, 1.2246467991473532e-16)
_PIO4 = (0.7853981633974483, 3.061616997868383e-17)
_ATAN_HALF = (0.4636476090008061, 2.2698777452961687e-17)
_SQRT2 = 1.4142135623730951
_SIGN = 1 << 63
_M32 = (1 << 32) - 1
_DBL_MAX = 1.7976931348623157e308


def _atan_inv(k: int, one: int) -> int:
    """atan(1/k) * one (Taylor series in Python integers, each term truncated)."""
    total, term, n, sign = 0, one // k, 1, 1
    while term:
        total += sign * (term // n)
        term, n, sign = term // (k * k), n + 2, -sign
    return total


def _two_over_pi_words(n: int) -> tuple[int, ...]:
    """(0, W_0, ..., W_{n-1}): W_j = bits 64j + 1 .. 64j + 64 of 2/pi (2/pi = sum b_i 2^-i), pi from Machin's
    formula pi = 16 atan(1/5) - 4 atan(1/239) in Python integers with 128 guard bits (its truncation error is
    a few hundred units of 2^-(64n + 128): far from moving a bit of the first 64n)."""
    bits, guard = 64 * n, 128
    one = 1 << (bits + guard)
    pi = 16 * _atan_inv(5, one) - 4 * _atan_inv(239, one)
    v = (2 << (2 * bits + guard)) // pi  # floor(2/pi * 2^bits)
    return (0, *((v >> (bits - 64 * (j + 1))) & ((1 << 64) - 1) for j in range(n)))


# 2/pi to bit 1216: enough for the 192-bit window of the largest exponent (`_pio2_window`); entry 0 is the
# zero word ahead of the binary point
_TWO_OVER_PI_BITS = _two_over_pi_words(19)
_LOG_C = {  # log(j/16) as (hi, lo)
    11: (-0.3746934494414107, 3.9243112288632396e-18), 12: (-0.2876820724517809, -2.607160616442564e-17),
    13: (-0.2076393647782445, -1.2053243216686129e-17), 14: (-0.13353139262452263, 3.664457663660085e-18),
    15: (-0.06453852113757118, 6.470486661692933e-18), 16: (0.0, 0.0),
    17: (0.06062462181643484, 2.6424025938726934e-18), 18: (0.11778303565638346, -1.1971685747593677e-18),
    19: (0.17185025692665923, -6.0224538210113705e-18), 20: (0.22314355131420976, -9.091270597324799e-18),
    21: (0.27193371548364176, 7.83319637697442e-19), 22: (0.3184537311185346, 2.7114779367326236e-17),
    23: (0.3629054936893685, -2.1492361455310972e-17),
}
# 2 atanh(s) = 2s + s z (2/3 + 2z/5 + ...), z = s^2 <= 5e-4: Taylor; the terms after 2 s^11/11 are < 2^-69 of it
_LOG_T = tuple(2.0 / (2 * n + 1) for n in range(1, 6))
# (e^r - 1 - r) / r^2 on |r| <= 0.3467
_EXP = (0.5, 0.1666666666666667, 0.04166666666666667, 0.00833333333332612, 0.0013888888888883737,
        0.00019841269874873975, 2.480158732558584e-05, 2.755725533255441e-06, 2.7557273594799413e-07,
        2.510524515390137e-08, 2.0914707069612355e-09)
# (sin r - r) / r^3 and (cos r - 1 + r^2/2) / r^4 as polynomials in z = r^2 <= (pi/4 + 1e-6)^2
_SIN = (-0.16666666666666666, 0.008333333333333331, -0.00019841269841265065, 2.755731921933912e-06,
        -2.505210623243116e-08, 1.6058531616384064e-10, -7.586696964319367e-13)
_COS = (0.041666666666666664, -0.0013888888888888887, 2.4801587301584645e-05, -2.75573192214028e-07,
        2.08767557910713e-09, -1.1470460886163255e-11, 4.745871816762601e-14)
# (asin s - s) / s^3 in z = s^2 <= 1/4
_ASIN = (0.16666666666666669, 0.07499999999998433, 0.04464285714635543, 0.030381944138531247,
         0.02237217294214989, 0.017352392720869973, 0.013971212973552933, 0.011479177415184906,
         0.01032281435018578, 0.005457506718640358, 0.01740087944269402, -0.014851887071247204,
         0.028757851367421566)
# (atan u - u) / u^3 in z = u^2 <= (7/16)^2
_ATAN = (-0.3333333333333333, 0.1999999999999941, -0.142857142855668, 0.11111111096644503, -0.090909083555788,
         0.07692285554272867, -0.06666241913438962, 0.05876946354532801, -0.052166790646221324,
         0.0449225653509531, -0.03312807068636511, 0.01477312147884621)
# (tanh x - x) / x^3 in z = x^2 <= 1/4
_TANH = (-0.3333333333333333, 0.1333333333333323, -0.05396825396808975, 0.02186948852586729,
         -0.008863235198650529, 0.003592121796812508, -0.0014557608125362826, 0.000589466733977733,
         -0.0002363536144296633, 8.819574648678565e-05, -2.295325707538434e-05)


# ------------------------------------------------------------------ f64 arithmetic on ids

class _D:
    """f64 arithmetic on SPIR-V ids; a Python `float` operand is a constant, an `int` an id."""

    def __init__(self, e: Emit) -> None:
        self.e, self.t, self.u, self.bt = e, e.ty(T.f64), e.ty(T.u64), e.bool_t()

    def v(self, a: Val) -> int:
        return self.e.c(T.f64, a) if isinstance(a, float) else a

    def _nc(self, rid: int) -> int:
        """NoContraction whatever the kernel's fast_math (which only licenses it for the user's own ops)."""
        return self.e.exact(rid, True)

    def _f(self, code: S, a: Val, b: Val) -> int:
        return self._nc(self.e.op(code, self.v(a), self.v(b), t=self.t))

    def add(self, a: Val, b: Val) -> int:
        return self._f(S.FAdd, a, b)

    def sub(self, a: Val, b: Val) -> int:
        return self._f(S.FSub, a, b)

    def mul(self, a: Val, b: Val) -> int:
        return self._f(S.FMul, a, b)

    def div(self, a: Val, b: Val) -> int:
        return self._f(S.FDiv, a, b)

    def neg(self, a: int) -> int:
        return self.e.op(S.FNegate, a, t=self.t)

    def ext(self, inst: GLSL, a: int) -> int:
        return self.e.ext(inst, self.t, a)

    def sel(self, c: int, a: Val, b: Val) -> int:
        return self.e.op(S.Select, c, self.v(a), self.v(b), t=self.t)

    def sel_u(self, c: int, a: int, b: int) -> int:
        return self.e.op(S.Select, c, a, b, t=self.u)

    def cmp(self, code: S, a: Val, b: Val) -> int:
        return self.e.op(code, self.v(a), self.v(b), t=self.bt)

    def lt(self, a: Val, b: Val) -> int:
        return self.cmp(S.FOrdLessThan, a, b)

    def gt(self, a: Val, b: Val) -> int:
        return self.cmp(S.FOrdGreaterThan, a, b)

    def eq(self, a: Val, b: Val) -> int:
        return self.cmp(S.FOrdEqual, a, b)

    def isnan(self, a: int) -> int:
        return self.e.op(S.IsNan, a, t=self.bt)

    def isinf(self, a: int) -> int:
        return self.e.op(S.IsInf, a, t=self.bt)

    def lor(self, a: int, b: int) -> int:
        return self.e.op(S.LogicalOr, a, b, t=self.bt)

    def lne(self, a: int, b: int) -> int:
        return self.e.op(S.LogicalNotEqual, a, b, t=self.bt)

    def clamp(self, a: int, lo: float, hi: float) -> int:
        """`a` limited to [lo, hi]; NaN stays NaN."""
        return self.sel(self.lt(a, lo), lo, self.sel(self.gt(a, hi), hi, a))

    def horner(self, x: int, cs: tuple[float, ...]) -> int:
        """cs[0] + x cs[1] + x^2 cs[2] + ..."""
        p = self.v(cs[-1])
        for c in reversed(cs[:-1]):
            p = self.add(self.mul(p, x), c)
        return p

    # ------------------------------------------------ error-free transforms
    def two_sum(self, a: Val, b: Val) -> tuple[int, int]:
        """(s, err) with s = fl(a + b) and s + err == a + b exactly."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def fast_two_sum(self, a: Val, b: Val) -> tuple[int, int]:
        """two_sum for |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def split(self, a: int) -> tuple[int, int]:
        """Veltkamp: a == hi + lo, each of at most 26 significant bits (|a| < 2^995)."""
        c = self.mul(134217729.0, a)
        hi = self.sub(c, self.sub(c, a))
        return hi, self.sub(a, hi)

    def two_prod(self, a: int, b: int, bs: tuple[int, int] | None = None) -> tuple[int, int]:
        """(p, err) with p = fl(a b) and p + err == a b (Dekker); `bs` is b's split when already made."""
        p = self.mul(a, b)
        ah, al = self.split(a)
        bh, bl = bs or self.split(b)
        err = self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl))
        err = self.add(self.add(err, self.mul(al, bh)), self.mul(al, bl))
        return p, err

    # ------------------------------------------------ bits
    def bits(self, a: int) -> int:
        return self.e.op(S.Bitcast, a, t=self.u)

    def fbits(self, b: int) -> int:
        return self.e.op(S.Bitcast, b, t=self.t)

    def uc(self, value: int) -> int:
        return self.e.c(T.u64, value)

    def iop(self, code: S, a: int, b: int) -> int:
        return self.e.op(code, a, b, t=self.u)

    def to_int(self, a: int) -> int:
        """An integral f64 as i64 (in the u64 type)."""
        return self.e.op(S.ConvertFToS, a, t=self.u)

    def rint(self, a: int) -> int:
        """a rounded to the nearest integer, ties to even (GLSL RoundEven on f64 is wrong on lavapipe: it
        rounds 3.5 to 3 and not at all from 2^24); -0 and the sign of a kept; inf and NaN pass."""
        ab = self.ext(GLSL.FAbs, a)
        r = self.copysign(self.sub(self.add(ab, 2.0 ** 52), 2.0 ** 52), a)
        return self.sel(self.lt(ab, 2.0 ** 52), r, a)

    def pow2(self, n: int) -> int:
        """2^n as f64 for an i64 `n` in [-1022, 1023]."""
        return self.fbits(self.iop(S.ShiftLeftLogical, self.iop(S.IAdd, n, self.uc(1023)), self.uc(52)))

    def scale(self, a: int, k: int) -> int:
        """a * 2^k for an integral f64 `k` in [-2044, 2044], rounded once (two exact powers of two)."""
        ki = self.to_int(k)
        k1 = self.iop(S.ShiftRightArithmetic, ki, self.uc(1))
        return self.mul(self.mul(a, self.pow2(k1)), self.pow2(self.iop(S.ISub, ki, k1)))

    def copysign(self, a: int, s: int) -> int:
        mag = self.iop(S.BitwiseAnd, self.bits(a), self.uc(~_SIGN))
        return self.fbits(self.iop(S.BitwiseOr, mag, self.iop(S.BitwiseAnd, self.bits(s), self.uc(_SIGN))))

    def signbit(self, a: int) -> int:
        return self.e.op(S.INotEqual, self.iop(S.BitwiseAnd, self.bits(a), self.uc(_SIGN)), self.uc(0), t=self.bt)


# ------------------------------------------------------------------ exp, log, pow

def _exp_core(d: _D, xh: int, xl: Val) -> tuple[int, int, int]:
    """(a, b, k) with e^(xh + xl) ~ (a + b) 2^k, a + b in [0.7, 1.42], k an integral f64; |xh| <= 1500,
    |xl| <= ulp(xh)."""
    k = d.rint(d.mul(xh, _INV_LN2))
    rh = d.sub(xh, d.mul(k, _LN2_HI))  # exact
    rl = d.sub(xl, d.mul(k, _LN2_LO))
    s2 = d.mul(d.mul(rh, rh), d.horner(rh, _EXP))  # e^rh = 1 + rh + s2
    t = d.add(s2, d.mul(rl, d.add(1.0, d.add(rh, s2))))  # + rl e^rh
    a, b = d.fast_two_sum(1.0, rh)
    return a, d.add(b, t), k


def f64_round_even(e: Emit, x: int) -> int:
    """x rounded to the nearest integer, ties to even (for `round` on f64: see `_D.rint`)."""
    return _D(e).rint(x)


def f64_exp(e: Emit, x: int) -> int:
    """e^x: < 1 ulp; overflow gives inf (x > 709.78), underflow rounds through the subnormals to 0."""
    d = _D(e)
    a, b, k = _exp_core(d, d.clamp(x, -746.0, 710.0), 0.0)
    r = d.scale(d.add(a, b), k)
    return d.sel(d.isnan(x), x, r)


def _log_c(d: _D, j: int) -> tuple[int, int]:
    """(hi, lo) of log(j/16) for the integral f64 `j` in [11, 23]: a select chain."""
    hi, lo = d.v(_LOG_C[11][0]), d.v(_LOG_C[11][1])
    for n in range(12, 24):
        hit = d.eq(j, float(n))
        hi, lo = d.sel(hit, _LOG_C[n][0], hi), d.sel(hit, _LOG_C[n][1], lo)
    return hi, lo


def _log_dd(d: _D, x: int) -> tuple[int, int]:
    """(hi, lo) with hi + lo = log x to ~2^-68 relative, for finite x > 0 (subnormals included)."""
    sub = d.lt(x, 2.0 ** -1022)
    hx = d.bits(d.sel(sub, d.mul(x, 2.0 ** 54), x))
    m = d.fbits(d.iop(S.BitwiseOr, d.iop(S.BitwiseAnd, hx, d.uc((1 << 52) - 1)), d.uc(1023 << 52)))
    k = d.e.op(S.ConvertSToF, d.iop(S.ShiftRightLogical, hx, d.uc(52)), t=d.t)
    big = d.cmp(S.FOrdGreaterThanEqual, m, _SQRT2)
    m = d.sel(big, d.mul(m, 0.5), m)
    k = d.add(d.sub(k, d.sel(sub, 1023.0 + 54.0, 1023.0)), d.sel(big, 1.0, 0.0))
    j = d.rint(d.mul(m, 16.0))
    c = d.mul(j, 0.0625)
    f = d.sub(m, c)  # exact
    dh, dl = d.two_sum(m, c)
    sh = d.div(f, dh)  # s = f / (m + c) as sh + sl
    ph, pl = d.two_prod(sh, dh)
    sl = d.div(d.sub(d.sub(d.sub(f, ph), pl), d.mul(sh, dl)), dh)
    z = d.mul(sh, sh)
    tail = d.add(d.mul(d.mul(sh, z), d.horner(z, _LOG_T)), d.mul(sl, 2.0))  # log(m/c) = 2 sh + tail
    ch, cl = _log_c(d, j)
    s1, e1 = d.two_sum(d.mul(k, _LN2_HI), ch)  # k * _LN2_HI is exact
    s2, e2 = d.two_sum(s1, d.mul(sh, 2.0))
    lo = d.add(d.add(e1, e2), d.add(d.add(d.mul(k, _LN2_LO), cl), tail))
    return d.fast_two_sum(s2, lo)


def f64_log(e: Emit, x: int) -> int:
    """Natural log: < 1 ulp; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf."""
    d = _D(e)
    hi, lo = _log_dd(d, x)
    r = d.add(hi, lo)
    r = d.sel(d.eq(x, 0.0), float("-inf"), r)
    r = d.sel(d.lt(x, 0.0), float("nan"), r)
    r = d.sel(d.eq(x, float("inf")), x, r)
    return d.sel(d.isnan(x), x, r)


def f64_pow_abs(e: Emit, ax: int, y: int) -> int:
    """ax**y for ax >= 0 or NaN (the core under `spirv_ops.pow_float`): exp(y log ax) in double-double.
    ax == 1 gives 1 (whatever y), ax == inf gives inf / 0 by the sign of y, a NaN operand NaN."""
    d = _D(e)
    lh, ll = _log_dd(d, ax)
    yc = d.clamp(y, -2.0 ** 63, 2.0 ** 63)  # beyond, y log ax is past +-1024 for every ax != 1
    ph, pl = d.two_prod(yc, lh)
    ph, pl = d.fast_two_sum(ph, d.add(pl, d.mul(yc, ll)))
    far = d.gt(d.ext(GLSL.FAbs, ph), 1400.0)  # saturates either way; pl would be large there
    a, b, k = _exp_core(d, d.clamp(ph, -1400.0, 1400.0), d.sel(far, 0.0, pl))
    r = d.scale(d.add(a, b), k)
    r = d.sel(d.eq(ax, float("inf")), d.sel(d.gt(y, 0.0), float("inf"), 0.0), r)
    r = d.sel(d.eq(ax, 0.0), d.sel(d.gt(y, 0.0), 0.0, float("inf")), r)
    r = d.sel(d.lor(d.isnan(ax), d.isnan(y)), float("nan"), r)
    return d.sel(d.eq(ax, 1.0), 1.0, r)


def f64_pow(e: Emit, x: int, y: int) -> int:
    """C's pow(x, y) (C99 Annex F special cases, negative x with integral y) on f64."""
    from qd.gpu.spirv_ops import pow_float

    return pow_float(e, T.f64, x, y, lambda ax, yy: f64_pow_abs(e, ax, yy))


# ------------------------------------------------------------------ sin, cos, tan

def _reduce_pio2(d: _D, x: int) -> tuple[int, int, int]:
    """(h, l, q): x = k pi/2 + h + l, |h + l| <= pi/4 (+ 2^-23), q = k mod 4 as f64 in {0, 1, 2, 3}, for
    |x| < 2^30 (exact up to the rounding of k * _PIO2_4: |k| < 2^30); `_reduce_big` serves the rest."""
    k = d.rint(d.mul(x, _TWO_OVER_PI))
    r1 = d.sub(x, d.mul(k, _PIO2_1))  # exact (Sterbenz, k * _PIO2_1 exact)
    a, ea = d.two_sum(r1, d.neg(d.mul(k, _PIO2_2)))
    b, eb = d.two_sum(a, d.neg(d.mul(k, _PIO2_3)))
    h, lo = d.two_sum(b, d.sub(d.add(ea, eb), d.mul(k, _PIO2_4)))
    q = d.sub(k, d.mul(d.ext(GLSL.Floor, d.mul(k, 0.25)), 4.0))
    return h, lo, q


def _pio2_window(d: _D, ax: int) -> tuple[int, list[int]]:
    """(m, f) for 2^30 <= ax <= DBL_MAX (or NaN: garbage, no UB) with ax = m 2^(e-52), m the 53-bit
    significand: f = bits b_{e-53} .. b_{e+138} of 2/pi (a 192-bit integer) as six u64 holding 32 bits each,
    least significant first. Then x 2/pi = 4 n + m f / 2^190 + (< 2^-137) for an integer n."""
    u = d.u
    hx = d.bits(ax)
    m = d.iop(S.BitwiseOr, d.iop(S.BitwiseAnd, hx, d.uc((1 << 52) - 1)), d.uc(1 << 52))
    a = d.iop(S.ISub, d.iop(S.ShiftRightLogical, hx, d.uc(52)), d.uc(1023 + 54 - 64))  # e - 54 + 64 in [40, 1034]
    j, sh = d.iop(S.ShiftRightLogical, a, d.uc(6)), d.iop(S.BitwiseAnd, a, d.uc(63))
    w = [d.uc(_TWO_OVER_PI_BITS[i]) for i in range(4)]  # the words j .. j + 3 (j in [0, 16]): a select chain
    for v in range(1, 17):
        hit = d.e.op(S.IEqual, j, d.uc(v), t=d.bt)
        w = [d.e.op(S.Select, hit, d.uc(_TWO_OVER_PI_BITS[v + i]), wi, t=u) for i, wi in enumerate(w)]
    rsh = d.iop(S.ISub, d.uc(63), sh)  # (next >> 1) >> (63 - sh): no shift by 64 when sh == 0
    f: list[int] = []
    for i in (2, 1, 0):
        nxt = d.iop(S.ShiftRightLogical, d.iop(S.ShiftRightLogical, w[i + 1], d.uc(1)), rsh)
        limb = d.iop(S.BitwiseOr, d.iop(S.ShiftLeftLogical, w[i], sh), nxt)
        f += [d.iop(S.BitwiseAnd, limb, d.uc(_M32)), d.iop(S.ShiftRightLogical, limb, d.uc(32))]
    return m, f


def _mul_low192(d: _D, m: int, f: list[int]) -> list[int]:
    """The low 192 bits of m f (m < 2^53, f six 32-bit limbs) as six 32-bit limbs, least significant first:
    32x32 -> 64-bit products in u64 (m's high half has 21 bits, so mh f_j + the carries fit)."""
    mask = d.uc(_M32)
    ml, mh = d.iop(S.BitwiseAnd, m, mask), d.iop(S.ShiftRightLogical, m, d.uc(32))
    p0 = [d.iop(S.IMul, ml, fj) for fj in f]
    out: list[int] = []
    carry = d.uc(0)
    for k in range(6):
        acc = d.iop(S.IAdd, d.iop(S.BitwiseAnd, p0[k], mask), carry)
        if k:  # hi(ml f_{k-1}) + mh f_{k-1}, both of weight 2^(32k)
            acc = d.iop(S.IAdd, acc, d.iop(S.ShiftRightLogical, p0[k - 1], d.uc(32)))
            acc = d.iop(S.IAdd, acc, d.iop(S.IMul, mh, f[k - 1]))
        out.append(d.iop(S.BitwiseAnd, acc, mask))
        carry = d.iop(S.ShiftRightLogical, acc, d.uc(32))
    return out


def _reduce_big(d: _D, x: int) -> tuple[int, int, int]:
    """`_reduce_pio2`'s (h, l, q) for 2^30 <= |x| <= DBL_MAX (Payne-Hanek): x 2/pi mod 4 in fixed point with
    190 fraction bits, exact to 2^-137; the double nearest a multiple of pi/2 leaves |h| ~ 2^-61, so h + l is
    good to 2^-76 relative at worst. Garbage (finite or NaN) for smaller |x|, inf and NaN."""
    ax = d.clamp(d.ext(GLSL.FAbs, x), 2.0 ** 30, _DBL_MAX)
    y = _mul_low192(d, *_pio2_window(d, ax))  # x 2/pi mod 4 = y / 2^190
    half_bit = d.iop(S.BitwiseAnd, y[5], d.uc(1 << 29))
    half = d.e.op(S.INotEqual, half_bit, d.uc(0), t=d.bt)
    q = d.iop(S.IAdd, d.iop(S.ShiftRightLogical, y[5], d.uc(30)),  # the nearest k mod 4 (4 masked below)
              d.iop(S.ShiftRightLogical, half_bit, d.uc(29)))
    # fraction >= 1/2: its distance to 1 is the complement (one's: 2^-190 short, negligible), sign flipped
    flip = d.e.op(S.Select, half, d.uc(_M32), d.uc(0), t=d.u)
    y = [d.iop(S.BitwiseXor, yk, flip) for yk in y[:5]] + [
        d.iop(S.BitwiseAnd, d.iop(S.BitwiseXor, y[5], flip), d.uc((1 << 30) - 1))]
    terms = [d.mul(d.e.op(S.ConvertUToF, yk, t=d.t), 2.0 ** (32 * k - 190)) for k, yk in enumerate(y)]
    g, gl = terms[5], d.v(0.0)
    for t in reversed(terms[:5]):  # all >= 0: no cancellation
        g, err = d.two_sum(g, t)
        gl = d.add(gl, err)
    g, gl = d.fast_two_sum(g, gl)  # the fraction g + gl in [0, 1/2], times pi/2:
    ph, pe = d.two_prod(g, d.v(_PIO2[0]), (d.v(_PIO2_SPLIT[0]), d.v(_PIO2_SPLIT[1])))
    h, lo = d.fast_two_sum(ph, d.add(pe, d.add(d.mul(g, _PIO2[1]), d.mul(gl, _PIO2[0]))))
    neg = d.lne(half, d.signbit(x))
    h, lo = d.sel(neg, d.neg(h), h), d.sel(neg, d.neg(lo), lo)
    q = d.sel_u(d.signbit(x), d.iop(S.ISub, d.uc(4), q), q)
    return h, lo, d.e.op(S.ConvertUToF, d.iop(S.BitwiseAnd, q, d.uc(3)), t=d.t)


def _sincos_dd(d: _D, h: int, lo: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """sin and cos of h + lo (|h| <= pi/4, |lo| <= ulp(h)) as normalised double-doubles."""
    zh, zl = d.two_prod(h, h)
    s_tail = d.add(d.mul(d.mul(h, zh), d.horner(zh, _SIN)), d.mul(lo, d.sub(1.0, d.mul(0.5, zh))))
    hz = d.mul(0.5, zh)
    w = d.sub(1.0, hz)
    corr = d.sub(d.sub(d.sub(1.0, w), hz), d.mul(0.5, zl))  # (1 - w) - hz: w's rounding error, exact
    c_tail = d.add(corr, d.sub(d.mul(d.mul(zh, zh), d.horner(zh, _COS)), d.mul(h, lo)))
    return d.fast_two_sum(h, s_tail), d.fast_two_sum(w, c_tail)


def _quadrant(d: _D, q: int, s: int, c: int) -> int:
    """sin(k pi/2 + r) from s = sin r, c = cos r and q = k mod 4."""
    odd = d.lor(d.eq(q, 1.0), d.eq(q, 3.0))
    v = d.sel(odd, c, s)
    return d.sel(d.cmp(S.FOrdGreaterThanEqual, q, 2.0), d.neg(v), v)


def _trig(e: Emit, x: int, which: str) -> int:
    d = _D(e)
    big = d.cmp(S.FOrdGreaterThanEqual, d.ext(GLSL.FAbs, x), 2.0 ** 30)  # inf too (inf and NaN give NaN below)
    h, lo, q = (d.sel(big, b, s) for b, s in zip(_reduce_big(d, x), _reduce_pio2(d, x), strict=True))
    (sh, sl), (ch, cl) = _sincos_dd(d, h, lo)
    if which == "tan":
        odd = d.lor(d.eq(q, 1.0), d.eq(q, 3.0))
        nh, nl = d.sel(odd, d.neg(ch), sh), d.sel(odd, d.neg(cl), sl)
        r = _dd_div(d, nh, nl, d.sel(odd, sh, ch), d.sel(odd, sl, cl))
    else:
        s, c = d.add(sh, sl), d.add(ch, cl)
        r = _quadrant(d, d.sel(d.eq(q, 3.0), 0.0, d.add(q, 1.0)) if which == "cos" else q, s, c)
    if which != "cos":  # sin x = tan x = x (correctly rounded) for |x| < 2^-27; keeps -0
        r = d.sel(d.lt(d.ext(GLSL.FAbs, x), 2.0 ** -27), x, r)
    return d.sel(d.lor(d.isnan(x), d.isinf(x)), float("nan"), r)


def _dd_div(d: _D, nh: int, nl: int, dh: int, dl: int) -> int:
    """(nh + nl) / (dh + dl), both normalised double-doubles: one Newton correction of nh / dh."""
    q1 = d.div(nh, dh)
    p, pe = d.two_prod(q1, dh)
    rem = d.sub(d.add(d.sub(d.sub(nh, p), pe), nl), d.mul(q1, dl))  # nh - p is exact
    return d.add(q1, d.div(rem, dh))


def f64_sin(e: Emit, x: int) -> int:
    """sin x: < 1 ulp for every finite x (Payne-Hanek from |x| >= 2^30); inf and NaN give NaN."""
    return _trig(e, x, "sin")


def f64_cos(e: Emit, x: int) -> int:
    """cos x: < 1 ulp for every finite x (Payne-Hanek from |x| >= 2^30); inf and NaN give NaN."""
    return _trig(e, x, "cos")


def f64_tan(e: Emit, x: int) -> int:
    """tan x = sin/cos in double-double: < 1 ulp for every finite x; inf and NaN give NaN."""
    return _trig(e, x, "tan")


# ------------------------------------------------------------------ asin, acos

def _asin_far(d: _D, ax: int) -> tuple[int, int, int, int]:
    """For 1/2 < ax <= 1: (s, df, c, pz) with z = (1 - ax)/2, s = sqrt z, s ~ df + c (df: s to 21 bits, so
    df^2 and z - df^2 are exact), pz = s z P(z): asin(s) = s + pz."""
    z = d.mul(d.sub(1.0, ax), 0.5)  # exact
    s = d.ext(GLSL.Sqrt, d.sel(d.lt(z, 0.0), 0.0, z))
    df = d.fbits(d.iop(S.BitwiseAnd, d.bits(s), d.uc(0xFFFFFFFF00000000)))
    den = d.add(s, df)
    c = d.div(d.sub(z, d.mul(df, df)), d.sel(d.eq(den, 0.0), 1.0, den))
    return s, df, c, d.mul(d.mul(s, z), d.horner(z, _ASIN))


def _asin_near(d: _D, x: int) -> int:
    """x^3 P(x^2): asin x = x + this for |x| <= 1/2."""
    z = d.mul(x, x)
    return d.mul(d.mul(x, z), d.horner(z, _ASIN))


def _domain(d: _D, x: int, ax: int, r: int) -> int:
    """NaN for |x| > 1 and NaN x, else r."""
    return d.sel(d.lor(d.gt(ax, 1.0), d.isnan(x)), float("nan"), r)


def f64_asin(e: Emit, x: int) -> int:
    """asin x: < 1 ulp; NaN outside [-1, 1]."""
    d = _D(e)
    ax = d.ext(GLSL.FAbs, x)
    near = d.add(x, _asin_near(d, x))
    _, df, c, pz = _asin_far(d, ax)
    # pi/2 - 2 (df + c + pz), grouped as fdlibm does: pio4_hi - 2 df is exact
    p = d.sub(d.mul(2.0, pz), d.sub(_PIO2[1], d.mul(2.0, c)))
    far = d.sub(_PIO4[0], d.sub(p, d.sub(_PIO4[0], d.mul(2.0, df))))
    return _domain(d, x, ax, d.sel(d.gt(ax, 0.5), d.copysign(far, x), near))


def f64_acos(e: Emit, x: int) -> int:
    """acos x: < 1 ulp; NaN outside [-1, 1]."""
    d = _D(e)
    ax = d.ext(GLSL.FAbs, x)
    near = d.sub(_PIO2[0], d.sub(x, d.sub(_PIO2[1], _asin_near(d, x))))
    s, df, c, pz = _asin_far(d, ax)
    pos = d.mul(2.0, d.add(df, d.add(c, pz)))  # 2 asin(sqrt((1 - x)/2))
    neg = d.sub(_PI[0], d.mul(2.0, d.add(s, d.sub(pz, _PIO2[1]))))  # pi - 2 asin(sqrt((1 + x)/2))
    r = d.sel(d.gt(x, 0.5), pos, d.sel(d.lt(x, -0.5), neg, near))
    return _domain(d, x, ax, r)


# ------------------------------------------------------------------ tanh

def f64_tanh(e: Emit, x: int) -> int:
    """tanh x: < 1 ulp; +-1 from |x| >= 22 (and +-inf), -0 for -0."""
    d = _D(e)
    ax = d.ext(GLSL.FAbs, x)
    z = d.mul(x, x)
    near = d.add(x, d.mul(d.mul(x, z), d.horner(z, _TANH)))
    a, b, k = _exp_core(d, d.mul(2.0, d.clamp(ax, 0.0, 22.0)), 0.0)  # e^{2|x|} = (a + b) 2^k, k <= 64
    p2 = d.pow2(d.to_int(k))
    eh, el = d.fast_two_sum(d.mul(a, p2), d.mul(b, p2))
    dh, dl = d.fast_two_sum(eh, 1.0)
    dl = d.add(dl, el)
    q1 = d.div(2.0, dh)  # 2 / (e^{2|x|} + 1) = q1 + ql
    p, pe = d.two_prod(q1, dh)
    ql = d.div(d.sub(d.sub(d.sub(2.0, p), pe), d.mul(q1, dl)), dh)
    one, err = d.fast_two_sum(1.0, d.neg(q1))
    far = d.add(one, d.sub(err, ql))
    r = d.sel(d.lt(ax, 0.5), near, d.copysign(far, x))
    return d.sel(d.lor(d.isnan(x), d.lt(ax, 2.0 ** -27)), x, r)  # tanh x = x (rounded) there; keeps -0


# ------------------------------------------------------------------ atan2

def _atan_dd(d: _D, mn: int, mx: int) -> tuple[int, int, int, int]:
    """atan(mn / mx) = ch + cl + u + rest for 0 <= mn <= mx, 2^-900 <= mx <= 2^901 (or mn = 0, mx = 1)."""
    t = d.div(mn, mx)
    mid, hi = d.cmp(S.FOrdGreaterThanEqual, t, 7 / 16), d.cmp(S.FOrdGreaterThanEqual, t, 11 / 16)
    c = d.sel(hi, 1.0, d.sel(mid, 0.5, 0.0))
    num = d.sub(mn, d.mul(c, mx))  # exact (Sterbenz): u = (t - c) / (1 + c t)
    den, denl = d.two_sum(mx, d.mul(c, mn))
    u = d.div(num, den)
    p, pe = d.two_prod(u, den)
    ul = d.div(d.sub(d.sub(d.sub(num, p), pe), d.mul(u, denl)), den)  # u's rounding error
    z = d.mul(u, u)
    rest = d.add(d.mul(d.mul(u, z), d.horner(z, _ATAN)), d.mul(ul, d.sub(1.0, z)))
    ch = d.sel(hi, _PIO4[0], d.sel(mid, _ATAN_HALF[0], 0.0))
    cl = d.sel(hi, _PIO4[1], d.sel(mid, _ATAN_HALF[1], 0.0))
    return ch, cl, u, rest


def f64_atan2(e: Emit, y: int, x: int) -> int:
    """C's atan2(y, x) (C99 Annex F at zeros and infinities, -0 counting as negative): < 1 ulp."""
    d = _D(e)
    ax, ay = d.ext(GLSL.FAbs, x), d.ext(GLSL.FAbs, y)
    both_inf = d.e.op(S.LogicalAnd, d.isinf(ax), d.isinf(ay), t=d.bt)
    ax, ay = d.sel(both_inf, 1.0, ax), d.sel(both_inf, 1.0, ay)
    swap = d.gt(ay, ax)
    mx, mn = d.sel(swap, ay, ax), d.sel(swap, ax, ay)
    f = d.sel(d.gt(mx, 2.0 ** 900), 2.0 ** -200, d.sel(d.lt(mx, 2.0 ** -900), 2.0 ** 200, 1.0))
    mx_inf = d.isinf(mx)
    mn = d.sel(mx_inf, 0.0, d.mul(mn, f))
    mx = d.sel(d.lor(mx_inf, d.eq(mx, 0.0)), 1.0, d.mul(mx, f))
    ch, cl, u, rest = _atan_dd(d, mn, mx)
    # |result| = base +- atan: atan; pi/2 - atan (swap); pi - atan (x < 0); pi/2 + atan (both)
    xneg = d.signbit(x)
    flip = d.lne(swap, xneg)
    bh = d.sel(swap, _PIO2[0], d.sel(xneg, _PI[0], 0.0))
    bl = d.sel(swap, _PIO2[1], d.sel(xneg, _PI[1], 0.0))
    s1, e1 = d.two_sum(bh, d.sel(flip, d.neg(ch), ch))
    s2, e2 = d.two_sum(s1, d.sel(flip, d.neg(u), u))
    tail = d.add(cl, rest)
    lo = d.add(d.add(e1, e2), d.add(bl, d.sel(flip, d.neg(tail), tail)))
    r = d.copysign(d.add(s2, lo), y)
    return d.sel(d.lor(d.isnan(x), d.isnan(y)), float("nan"), r)
