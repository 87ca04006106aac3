"""qd's own f64 transcendentals on the vulkan tier (`qd/gpu/spirv_libm.py`), through the real frontend, against
numpy float64: the error in ulps (the distance between two doubles counted through their ordered bit
patterns) over random inputs of each op's whole range, plus the C99 special values (inf, NaN, signed zeros,
overflow and underflow, the Annex F tables of pow and atan2), compared exactly, zeros by sign too.

The default suite draws ~2*10^4 inputs an op; `-m slow` draws 10^6 and prints the table that the module
docstring of spirv_libm.py records. The bound asserted is 2 ulps; a point off by more against numpy is
re-checked against mpmath (when installed), since numpy's SIMD builds allow their own float64 functions a
few ulps (numpy's cos and tan are wrong at HARD: the reference there is the correctly rounded value).
Skipped, with the reason, where the vulkan tier or the device's shaderFloat64 is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsTypeError
from tests.conftest import init_arch

BOUND = 2.0  # ulps (issue: at most 4, target 2)
F64 = qd.types.ndarray(qd.f64, 1)


@qd.kernel
def _exp(x: F64, y: F64):
    for i in x:
        y[i] = qd.exp(x[i])


@qd.kernel
def _log(x: F64, y: F64):
    for i in x:
        y[i] = qd.log(x[i])


@qd.kernel
def _sin(x: F64, y: F64):
    for i in x:
        y[i] = qd.sin(x[i])


@qd.kernel
def _cos(x: F64, y: F64):
    for i in x:
        y[i] = qd.cos(x[i])


@qd.kernel
def _tan(x: F64, y: F64):
    for i in x:
        y[i] = qd.tan(x[i])


@qd.kernel
def _asin(x: F64, y: F64):
    for i in x:
        y[i] = qd.asin(x[i])


@qd.kernel
def _acos(x: F64, y: F64):
    for i in x:
        y[i] = qd.acos(x[i])


@qd.kernel
def _tanh(x: F64, y: F64):
    for i in x:
        y[i] = qd.tanh(x[i])


@qd.kernel
def _atan2(a: F64, b: F64, y: F64):
    for i in a:
        y[i] = qd.atan2(a[i], b[i])


@qd.kernel
def _pow(a: F64, b: F64, y: F64):
    for i in a:
        y[i] = a[i] ** b[i]


@qd.kernel
def _round(x: F64, y: F64):
    for i in x:
        y[i] = qd.round(x[i])


KERNELS = {"exp": _exp, "log": _log, "sin": _sin, "cos": _cos, "tan": _tan, "asin": _asin, "acos": _acos,
           "tanh": _tanh, "atan2": _atan2, "pow": _pow}
NUMPY = {"asin": np.arcsin, "acos": np.arccos, "atan2": np.arctan2, "pow": np.power}
MPMATH = {"asin": "asin", "acos": "acos", "atan2": "atan2", "pow": "power"}
# the double nearest a multiple of pi/2 (|x mod pi/2| ~ 4.7e-19): numpy's (glibc's) cos and tan are 8 and 14
# ulps off there, so the reference is its correctly rounded value (mpmath; `test_hard_case_reference`)
HARD = 6381956970095103 * 2.0 ** 797
HARD_REF = {"sin": 1.0, "cos": -4.687165924254628e-19, "tan": -2.133485385753704e18}
# sin/cos/tan past the fast reduction (|x| >= 2^30): its edge, f32 values, the largest
HUGE = [2.0 ** 30, -(2.0 ** 30), np.nextafter(2.0 ** 30, 0), 1.6e9, 2.0 ** 31 - 1, float(np.float32(2 ** 40)),
        float(np.float32(3e38)), 1e22, -1e22, 2.0 ** 52 + 1, 2.0 ** 53 + 2, 2.0 ** 1023, HARD, -HARD,
        1.7976931348623157e308]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5,
                    5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308])


@pytest.fixture
def vulkan():
    why = qd.vulkan.unavailable_reason()
    if why is not None:
        pytest.skip(f"tier 'vulkan': {why}")
    init_arch(qd.vulkan)
    try:
        _exp(np.zeros(1), np.zeros(1))
    except QuadrantsTypeError as e:  # no shaderFloat64
        qd.reset()
        pytest.skip(str(e))
    yield
    qd.reset()


# ------------------------------------------------------------------ inputs

def _signs(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice([-1.0, 1.0], n)


def _logu(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    return _signs(rng, n) * 10.0 ** rng.uniform(lo, hi, n)


def _unary_inputs(op: str, n: int, rng: np.random.Generator) -> np.ndarray:
    h = n // 2
    if op == "exp":
        parts = [rng.uniform(-745.2, 709.8, h), _logu(rng, n - h, -20, 2.85),
                 [709.78, 709.79, -745.13, -745.14, -708.4, 1e-300]]
    elif op == "log":
        bits = rng.integers(1, 0x7FF0000000000000, h, dtype=np.int64)  # every positive finite double
        parts = [bits.view(np.float64), 1.0 + _signs(rng, n - h) * 2.0 ** -rng.uniform(1, 52, n - h)]
    elif op in ("sin", "cos", "tan"):
        q = n // 5
        near = np.round(rng.uniform(-1e6, 1e6, q)) * (np.pi / 2)  # near multiples of pi/2
        parts = [rng.uniform(-10, 10, q), _logu(rng, q, -10, 9.2), near, np.nextafter(near, np.inf),
                 _huge(rng, n - 4 * q), HUGE]
    elif op in ("asin", "acos"):
        t = n // 3
        parts = [rng.uniform(-1, 1, t), _signs(rng, t) * (1 - 10.0 ** rng.uniform(-16, 0, t)),
                 _logu(rng, n - 2 * t, -20, 0), [1.0000000000000002, -1.1]]
    else:  # tanh
        parts = [rng.uniform(-25, 25, h), _logu(rng, n - h, -20, 1.5), [22.0, -21.9, 0.5, -0.49999999999999994]]
    return np.concatenate([*map(np.asarray, parts), SPECIAL])


def _huge(rng: np.random.Generator, n: int, top: int = 1023) -> np.ndarray:
    """+-[1, 2) 2^e, e uniform in [30, top]: the Payne-Hanek range of sin/cos/tan."""
    return _signs(rng, n) * np.ldexp(1.0 + rng.random(n), rng.integers(30, top + 1, n))


def _binary_inputs(op: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    grid_a, grid_b = np.repeat(SPECIAL, len(SPECIAL)), np.tile(SPECIAL, len(SPECIAL))
    if op == "atan2":
        def draw(m: int) -> np.ndarray:
            return np.where(rng.random(m) < 0.5, _logu(rng, m, -300, 300), rng.uniform(-10, 10, m))
        return np.concatenate([draw(n), grid_a]), np.concatenate([draw(n), grid_b])
    t = n // 3
    x1 = 10.0 ** rng.uniform(-300, 300, t)
    y1 = rng.uniform(-1, 1, t) * 760 / np.abs(np.log(x1))  # results from underflow to overflow
    x2 = 1.0 + _signs(rng, t) * 2.0 ** -rng.uniform(1, 52, t)  # near 1, large exponents
    y2 = rng.uniform(-1, 1, t) * 700 / np.abs(np.log(x2))
    x3 = -(10.0 ** rng.uniform(-3, 3, n - 2 * t))  # negative base, integral exponent
    y3 = np.round(rng.uniform(-100, 100, n - 2 * t))
    edges = np.array([[2, 1024], [2, 1023.9999], [2, -1074], [2, -1075], [-2, -1075], [-2, -1073], [-2, 1023],
                      [10, 308], [10, 309], [10, -323], [10, -324], [1 + 2.0 ** -52, 2.0 ** 60],
                      [1 - 2.0 ** -53, 2.0 ** 62], [1 + 2.0 ** -52, -(2.0 ** 62)], [5e-324, 0.5], [5e-324, -0.25],
                      [1.7976931348623157e308, 0.5], [0.5, 1074], [-0.5, 1075], [1e-5, 61.5], [123.456, -146.5],
                      [7.0, 0.5]]).T
    return (np.concatenate([x1, x2, x3, edges[0], grid_a]), np.concatenate([y1, y2, y3, edges[1], grid_b]))


# ------------------------------------------------------------------ measuring

def _ordered(v: np.ndarray) -> np.ndarray:
    b = v.view(np.int64)
    return np.where(b < 0, np.int64(-(2 ** 63)) - b, b)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ulps (0 for two NaNs, inf for one); +0 and -0 count as equal."""
    og, ow = _ordered(got), _ordered(want)
    coarse = (og >> 1) - (ow >> 1)
    with np.errstate(over="ignore"):
        exact = og - ow
    d = np.where(np.abs(coarse) < 2 ** 60, np.abs(exact).astype(np.float64), np.abs(coarse) * 2.0)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    return np.where(nan_g | nan_w, np.where(nan_g & nan_w, 0.0, np.inf), d)


def reference(op: str, args: tuple[np.ndarray, ...]) -> np.ndarray:
    """numpy's float64 `op`, but HARD_REF at +-HARD."""
    with np.errstate(all="ignore"):
        want = NUMPY.get(op, getattr(np, op))(*args)
    if op in HARD_REF:
        x = args[0]
        odd = -1.0 if op != "cos" else 1.0
        want = np.where(x == HARD, HARD_REF[op], np.where(x == -HARD, odd * HARD_REF[op], want))
    return want


def _mp_ref(op: str, args: tuple[float, ...]) -> float:
    import mpmath

    with mpmath.workprec(200):
        fn: Callable = getattr(mpmath, MPMATH.get(op, op))
        return float(fn(*(mpmath.mpf(a) for a in args)))


def _recheck(op: str, args: tuple[np.ndarray, ...], got: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Errors past BOUND against numpy measured again against mpmath (finite cases), when it is installed."""
    try:
        import mpmath  # noqa: F401
    except ImportError:
        return err
    err = err.copy()
    for i in np.flatnonzero(err > BOUND)[:1000]:
        a = tuple(float(v[i]) for v in args)
        if all(math.isfinite(v) for v in a) and math.isfinite(got[i]):
            try:
                err[i] = ulps(got[i: i + 1], np.array([_mp_ref(op, a)]))[0]
            except (ValueError, ZeroDivisionError, OverflowError):
                pass
    return err


def measure(op: str, n: int, seed: int = 7) -> tuple[float, tuple[float, ...]]:
    """(max ulps, the worst input) of `op` on the device over ~n random inputs and the special values;
    asserts the special values exactly (zeros by sign)."""
    rng = np.random.default_rng(seed)
    args = _binary_inputs(op, n, rng) if op in ("atan2", "pow") else (_unary_inputs(op, n, rng),)
    got = np.zeros_like(args[0])
    KERNELS[op](*args, got)
    want = reference(op, args)
    zero = want == 0
    bad_sign = zero & (np.signbit(got) != np.signbit(want))
    assert not bad_sign.any(), f"{op}: sign of zero wrong at {[a[bad_sign][:5] for a in args]}"
    special = ~np.all([np.isfinite(a) for a in args], axis=0)
    mismatch = special & ~((got == want) | (np.isnan(got) & np.isnan(want)))
    assert not mismatch.any(), (f"{op}: special values {[a[mismatch][:8] for a in args]} gave "
                                f"{got[mismatch][:8]}, numpy {want[mismatch][:8]}")
    err = _recheck(op, args, got, ulps(got, want))
    i = int(np.argmax(err))
    return float(err[i]), tuple(float(a[i]) for a in args)


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("op", list(KERNELS))
def test_ulps(vulkan, op: str) -> None:
    worst, at = measure(op, 20_000)
    assert worst <= BOUND, f"{op}: {worst} ulps at {at}"


@pytest.mark.slow
@pytest.mark.parametrize("op", list(KERNELS))
def test_ulps_million(vulkan, op: str) -> None:
    worst, at = measure(op, 1_000_000, seed=1234)
    print(f"\n{op:6s} max {worst:g} ulp over 10^6 (worst at {at})")
    assert worst <= BOUND, f"{op}: {worst} ulps at {at}"


def test_without_fast_math() -> None:
    """fast_math=False gives the same results (libm ops are NoContraction either way)."""
    why = qd.vulkan.unavailable_reason()
    if why is not None:
        pytest.skip(f"tier 'vulkan': {why}")
    rng = np.random.default_rng(3)
    x = _unary_inputs("sin", 2000, rng)
    runs = []
    for fast in (True, False):
        init_arch(qd.vulkan, fast_math=fast)
        try:
            y = np.zeros_like(x)
            _sin(x, y)
            runs.append(y)
        except QuadrantsTypeError as e:
            pytest.skip(str(e))
        finally:
            qd.reset()
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("op", ["sin", "cos", "tan"])
def test_large_arguments(vulkan, op: str) -> None:
    """Payne-Hanek reduction: |x| from 2^30 to the largest double, within BOUND ulps of numpy (see HARD); inf
    and NaN give NaN."""
    rng = np.random.default_rng(11)
    x = np.concatenate([_huge(rng, 20_000), _huge(rng, 4000, top=127), HUGE, [np.inf, -np.inf, np.nan]])
    got = np.zeros_like(x)
    KERNELS[op](x, got)
    want = reference(op, (x,))
    err = _recheck(op, (x,), got, ulps(got, want))
    i = int(np.argmax(err))
    assert err[i] <= BOUND, f"{op}: {err[i]} ulps at {x[i]!r}: {got[i]!r}, numpy {want[i]!r}"
    assert np.isnan(got[-3:]).all()


F32 = qd.types.ndarray(qd.f32, 1)


@qd.kernel
def _trig32(x: F32, s: F32, c: F32, t: F32):
    for i in x:
        s[i] = qd.sin(x[i])
        c[i] = qd.cos(x[i])
        t[i] = qd.tan(x[i])


def test_f32_large_arguments(vulkan) -> None:
    """f32 sin/cos/tan (computed at f64) on every f32 magnitude, 2^40 included (the fuzzer's case): within 1
    f32 ulp of numpy's float64 result rounded to float32."""
    rng = np.random.default_rng(13)
    bits = rng.integers(0x4E800000, 0x7F800000, 20_000, dtype=np.int64).astype(np.uint32)  # [2^30, f32 max]
    x = np.concatenate([bits.view(np.float32), rng.uniform(-10, 10, 2000).astype(np.float32),
                        np.float32([2 ** 40, -(2 ** 40), 1e22, 3.4028235e38, 2 ** 30, 16777217.0])])
    x[: len(bits) // 2] *= -1
    out = [np.zeros_like(x) for _ in range(3)]
    _trig32(x, *out)
    x64 = x.astype(np.float64)
    for name, got in zip(("sin", "cos", "tan"), out, strict=True):
        want = getattr(np, name)(x64).astype(np.float32)
        err = np.abs(_ordered32(got) - _ordered32(want))
        i = int(np.argmax(err))
        assert err[i] <= 1, f"{name}: {err[i]} f32 ulps at {x[i]!r}: {got[i]!r}, numpy {want[i]!r}"


def _ordered32(v: np.ndarray) -> np.ndarray:
    b = v.view(np.int32).astype(np.int64)
    return np.where(b < 0, -(2 ** 31) - b, b)


def test_hard_case_reference() -> None:
    """HARD_REF is sin/cos/tan(HARD) correctly rounded."""
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workprec(400):
        assert {op: float(getattr(mpmath, op)(mpmath.mpf(HARD))) for op in HARD_REF} == HARD_REF


def test_two_over_pi_bits() -> None:
    """The 2/pi words of the Payne-Hanek reduction (Machin's formula in Python integers) against mpmath."""
    mpmath = pytest.importorskip("mpmath")
    from qd.gpu.spirv_libm import _TWO_OVER_PI_BITS

    n = len(_TWO_OVER_PI_BITS) - 1
    with mpmath.workprec(64 * n + 64):
        v = int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** (64 * n)))
    assert _TWO_OVER_PI_BITS == (0, *((v >> (64 * (n - 1 - j))) & (2 ** 64 - 1) for j in range(n)))


def test_round_f64_ties_to_even(vulkan) -> None:
    """qd.round on f64 (lavapipe's GLSL RoundEven on f64 rounds 3.5 to 3 and stops rounding at 2^24)."""
    x = np.array([0.5, 1.5, 2.5, 3.5, -3.5, -0.3, 2.0 ** 24 + 0.5, 2.0 ** 24 + 1.5, 636619772.7350813, 2.0 ** 52 + 1,
                  -(2.0 ** 40 + 0.75), 1e300, np.inf, -np.inf, np.nan, -0.0])
    y = np.zeros_like(x)
    _round(x, y)
    np.testing.assert_array_equal(y, np.round(x))
    assert np.signbit(y[5]) and np.signbit(y[-1])
