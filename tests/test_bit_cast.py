"""`qd.bit_cast` reinterprets bits on every tier and on the host, checked against numpy's `.view`.

f16 lives as f32 in registers on every tier, so its bit_cast is a conversion to and from the half, never the
f32's bits (issue 27: `bit_cast(f16(1.0), i16)` gave 1). The contract (DESIGN §4): a bit_cast between f16 and a
16-bit int is exact for every one of the 65536 patterns, NaN sign and payload included, a signaling NaN too;
f16 memory stores and loads keep a NaN's sign and payload and quiet it (x86's conversions, which interp and cpu
use). f32 and f64 pairs are plain reinterpretations and pin the rest of the class."""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsTypeError

ALL16 = np.arange(1 << 16, dtype=np.uint16)
SIGNALING = ((ALL16 & 0x7C00) == 0x7C00) & ((ALL16 & 0x3FF) != 0) & ((ALL16 & 0x200) == 0)
NAMED16 = {"1.0": 0x3C00, "-0.0": 0x8000, "0.0": 0x0000, "-1.0": 0xBC00, "inf": 0x7C00, "-inf": 0xFC00,
           "nan": 0x7E00, "-nan": 0xFE00, "nan payload": 0x7E01, "nan all ones": 0x7FFF,
           "min subnormal": 0x0001, "max subnormal": 0x03FF, "-min subnormal": 0x8001, "min normal": 0x0400,
           "max": 0x7BFF, "-max": 0xFBFF}
INT16 = {"i16": (qd.i16, np.int16), "u16": (qd.u16, np.uint16)}


def _wide_patterns(bits: int) -> np.ndarray:
    """Bit patterns of a `bits`-wide float: zeros, ones, infinities, quiet and signaling NaNs with payloads,
    subnormals, extremes, then random patterns (every exponent)."""
    u = np.uint32 if bits == 32 else np.uint64
    man = 23 if bits == 32 else 52
    exp = (1 << (bits - 1)) - (1 << man)  # all-ones exponent field
    sign = 1 << (bits - 1)
    one = 0x3F800000 if bits == 32 else 0x3FF0000000000000
    named = [0, sign, one, one | sign, exp, exp | sign, exp | (1 << (man - 1)), exp | sign | (1 << (man - 1)),
             exp | (1 << (man - 1)) | 5, exp | 1, exp | sign | 7, (1 << bits) - 1, 1, (1 << man) - 1,
             sign | 1, exp - 1, (exp - 1) | sign]
    rng = np.random.default_rng(bits)
    rand = rng.integers(0, np.iinfo(u).max, 2000, dtype=u, endpoint=True)
    return np.concatenate([np.array(named, dtype=u), rand])


@pytest.fixture
def _on(arch):
    yield arch


# ---------------------------------------------------------------- f16 <-> 16-bit ints, in kernels

@pytest.mark.parametrize("name", list(INT16))
def test_f16_to_int16_gives_the_half_bits(_on, name: str) -> None:
    dt, npdt = INT16[name]

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f16, 1), y: qd.types.ndarray(dt, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.bit_cast(x[i], dt)

    x = ALL16[~SIGNALING].view(np.float16)  # every half a load keeps as it is
    y = np.zeros(len(x), npdt)
    k(x, y)
    np.testing.assert_array_equal(y, x.view(npdt))


@pytest.mark.parametrize("name", list(INT16))
def test_int16_to_f16_gives_the_half(_on, name: str) -> None:
    dt, npdt = INT16[name]

    @qd.kernel
    def k(x: qd.types.ndarray(dt, 1), y: qd.types.ndarray(qd.f16, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.bit_cast(x[i], qd.f16)

    x = ALL16[~SIGNALING].view(npdt)  # every pattern a store keeps as it is
    y = np.zeros(len(x), np.float16)
    k(x, y)
    np.testing.assert_array_equal(y.view(npdt), x)


def test_issue_example_one_is_15360(_on) -> None:
    @qd.kernel
    def to_bits(x: qd.types.ndarray(qd.f16, 1), y: qd.types.ndarray(qd.i16, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.bit_cast(x[i], qd.i16)

    @qd.kernel
    def to_half(y: qd.types.ndarray(qd.i16, 1), x: qd.types.ndarray(qd.f16, 1)):
        for i in range(y.shape[0]):
            x[i] = qd.bit_cast(y[i], qd.f16)

    want = np.array(list(NAMED16.values()), np.uint16)
    bits = np.zeros(len(want), np.int16)
    to_bits(want.view(np.float16), bits)
    assert dict(zip(NAMED16, bits.view(np.uint16).tolist())) == NAMED16
    assert int(bits[0]) == 15360
    back = np.zeros(len(want), np.float16)
    to_half(want.view(np.int16), back)
    assert back[0] == 1.0 and np.signbit(back[1]) and back[1] == 0.0
    np.testing.assert_array_equal(back.view(np.uint16), want)


def test_f16_round_trip_is_exact_for_every_pattern(_on) -> None:
    """int16 -> f16 -> int16 in registers: all 65536 patterns, signaling NaNs included; u16 <-> i16 through f16."""
    @qd.kernel
    def k(x: qd.types.ndarray(qd.i16, 1), y: qd.types.ndarray(qd.i16, 1), z: qd.types.ndarray(qd.u16, 1)):
        for i in range(x.shape[0]):
            h = qd.bit_cast(x[i], qd.f16)
            y[i] = qd.bit_cast(h, qd.i16)
            z[i] = qd.bit_cast(qd.bit_cast(qd.bit_cast(h, qd.u16), qd.f16), qd.u16)

    x = ALL16.view(np.int16)
    y, z = np.zeros_like(x), np.zeros(len(x), np.uint16)
    k(x, y, z)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, ALL16)


def test_f16_to_f16_is_the_identity(_on) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(qd.i16, 1), y: qd.types.ndarray(qd.i16, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.bit_cast(qd.bit_cast(qd.bit_cast(x[i], qd.f16), qd.f16), qd.i16)

    x = ALL16.view(np.int16)
    y = np.zeros_like(x)
    k(x, y)
    np.testing.assert_array_equal(y, x)


def test_signaling_f16_nan_is_quieted_by_memory_not_by_bit_cast(_on) -> None:
    """A load or store of f16 keeps a signaling NaN's sign and payload and sets the quiet bit, on every tier
    alike; bit_cast between registers does not."""
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f16, 1), y: qd.types.ndarray(qd.i16, 1), z: qd.types.ndarray(qd.f16, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.bit_cast(x[i], qd.i16)  # through a load
            z[i] = qd.bit_cast(qd.bit_cast(x[i], qd.i16) ^ qd.i16(0x200), qd.f16)  # a signaling NaN, stored

    s = ALL16[SIGNALING]
    x = (s | 0x200).view(np.float16)  # quiet NaNs: x ^ 0x200 is the signaling one
    y, z = np.zeros(len(s), np.int16), np.zeros(len(s), np.float16)
    k(x, y, z)
    np.testing.assert_array_equal(y.view(np.uint16), s | 0x200)
    np.testing.assert_array_equal(z.view(np.uint16), s | 0x200)
    x2 = s.view(np.float16)
    k(x2, y, z)
    np.testing.assert_array_equal(y.view(np.uint16), s | 0x200)


def test_f16_scalar_argument_and_return(_on) -> None:
    @qd.kernel
    def bits(x: qd.f16) -> qd.i16:
        return qd.bit_cast(x, qd.i16)

    @qd.kernel
    def half(x: qd.u16) -> qd.f16:
        return qd.bit_cast(x, qd.f16)

    for v in (1.0, -0.0, 65504.0, 2.0 ** -24, float("inf"), -2.5):
        assert int(bits(v)) == int(np.float16(v).view(np.int16)), v
    for b in (0x3C00, 0x8000, 0x7BFF, 0x0001, 0xFC00, 0xC100):
        got = np.float16(half(b))
        assert got.view(np.uint16) == b, hex(b)


def test_constant_bit_casts_fold_to_the_same_bits(_on) -> None:
    """bit_casts of constants are folded by qd/passes/simplify.py; the constants must reach memory with the
    same bits as the runtime path (quiet NaN payloads and signs included)."""
    pats = [0x3C00, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7E01, 0x7FFF, 0x0001, 0x03FF, 0x7BFF]

    @qd.kernel
    def k(sel: qd.types.ndarray(qd.i32, 1), h: qd.types.ndarray(qd.f16, 1), b: qd.types.ndarray(qd.u16, 1),
          r: qd.types.ndarray(qd.u16, 1)):
        for i in range(sel.shape[0]):
            for j in qd.static(range(len(pats))):
                if sel[i] == j:
                    c = qd.bit_cast(qd.u16(pats[j]), qd.f16)  # folded
                    h[i] = c
                    b[i] = qd.bit_cast(c, qd.u16)  # folded twice
                    r[i] = qd.bit_cast(qd.select(sel[i] >= 0, c, qd.f16(0.0)), qd.u16)  # a constant half at run time

    n = len(pats)
    h, b, r = np.zeros(n, np.float16), np.zeros(n, np.uint16), np.zeros(n, np.uint16)
    k(np.arange(n, dtype=np.int32), h, b, r)
    want = np.array(pats, np.uint16)
    np.testing.assert_array_equal(h.view(np.uint16), want)
    np.testing.assert_array_equal(b, want)
    np.testing.assert_array_equal(r, want)


# ---------------------------------------------------------------- f32 and f64 pairs, in kernels

WIDE = [(qd.f32, np.float32, qd.i32, np.int32), (qd.f32, np.float32, qd.u32, np.uint32),
        (qd.f64, np.float64, qd.i64, np.int64), (qd.f64, np.float64, qd.u64, np.uint64)]


@pytest.mark.parametrize("fdt,fnp,idt,inp", WIDE, ids=[f"{w[0].name}-{w[2].name}" for w in WIDE])
def test_wide_float_bit_casts_match_numpy_view(_on, fdt, fnp, idt, inp) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(fdt, 1), xi: qd.types.ndarray(idt, 1), to_int: qd.types.ndarray(idt, 1),
          to_float: qd.types.ndarray(fdt, 1), back: qd.types.ndarray(idt, 1)):
        for i in range(x.shape[0]):
            to_int[i] = qd.bit_cast(x[i], idt)
            to_float[i] = qd.bit_cast(xi[i], fdt)
            back[i] = qd.bit_cast(qd.bit_cast(xi[i], fdt), idt)

    pats = _wide_patterns(fdt.bits)
    x, xi = pats.view(fnp), pats.view(inp)
    to_int, to_float, back = np.zeros(len(x), inp), np.zeros(len(x), fnp), np.zeros(len(x), inp)
    k(x, xi, to_int, to_float, back)
    np.testing.assert_array_equal(to_int, xi)
    np.testing.assert_array_equal(to_float.view(inp), xi)
    np.testing.assert_array_equal(back, xi)


def test_wide_nan_constants_keep_sign_and_payload(_on) -> None:
    """A folded bit_cast gives a NaN constant; every tier emits its bits (OpenCL C wrote `NAN`: +, no payload)."""
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), z: qd.types.ndarray(qd.f64, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.select(x[i] > 0, qd.bit_cast(qd.u32(0xFFC00123), qd.f32), x[i])
            z[i] = qd.select(x[i] > 0, qd.bit_cast(qd.u64(0xFFF8000000000123), qd.f64), 0.0)

    y, z = np.zeros(1, np.float32), np.zeros(1, np.float64)
    k(np.ones(1, np.float32), y, z)
    assert y.view(np.uint32)[0] == 0xFFC00123 and z.view(np.uint64)[0] == 0xFFF8000000000123


def test_kernel_bit_cast_between_widths_is_a_type_error(_on) -> None:
    @qd.kernel
    def k(x: qd.f16) -> qd.i32:
        return qd.bit_cast(x, qd.i32)

    with pytest.raises(QuadrantsTypeError, match=r"(?s)test_bit_cast\.py:\d+.*same width.*f16: 16 bits.*i32: 32 bits"):
        k(1.0)


# ---------------------------------------------------------------- on the host

HOST = [qd.i8, qd.u8, qd.i16, qd.u16, qd.f16, qd.i32, qd.u32, qd.f32, qd.i64, qd.u64, qd.f64]
HOST_PAIRS = [(a, b) for a in HOST for b in HOST if a.bits == b.bits]


def _host_values(dt) -> np.ndarray:
    """Named and spread bit patterns of `dt` (NaN payloads and signaling NaNs among the floats')."""
    if dt is qd.f16:
        return np.concatenate([np.array(list(NAMED16.values()), np.uint16), ALL16[::97]]).view(np.float16)
    if dt.is_float:
        return _wide_patterns(dt.bits)[:200].view(dt.np_dtype)
    info = np.iinfo(dt.np_dtype)
    return np.array([0, 1, -1 if dt.is_signed else 2, info.min, info.max, info.max // 3], dt.np_dtype)


@pytest.mark.parametrize("src,dst", HOST_PAIRS, ids=[f"{a.name}-{b.name}" for a, b in HOST_PAIRS])
def test_host_bit_cast_is_numpy_view(qd_program, src, dst) -> None:
    for v in _host_values(src):
        got = qd.bit_cast(v, dst)  # a numpy scalar keeps its own dtype
        want = np.array(v).view(dst.np_dtype)[()]
        assert isinstance(got, np.generic) and got.dtype == dst.np_dtype
        assert np.array(got).view(f"u{dst.bits // 8}") == np.array(want).view(f"u{dst.bits // 8}"), (v, got)


def test_host_issue_example(qd_program) -> None:
    assert qd.bit_cast(np.float16(1.0), qd.i16) == 15360
    assert qd.bit_cast(np.int16(15360), qd.f16) == 1.0
    assert qd.bit_cast(np.float16(-0.0), qd.u16) == 0x8000
    assert qd.bit_cast(np.uint16(0x7C01), qd.f16).view(np.uint16) == 0x7C01  # a signaling NaN, untouched


def test_host_python_numbers_take_their_literal_dtype(qd_program) -> None:
    assert qd.bit_cast(1.0, qd.i32) == 0x3F800000  # default_fp is f32
    assert qd.bit_cast(7, qd.f32).view(np.int32) == 7  # default_ip is i32
    assert qd.bit_cast(0xFFFFFFFF, qd.i32) == -1  # within the width's unsigned range: the same bits
    assert qd.bit_cast(-1, qd.u32) == 0xFFFFFFFF


@pytest.mark.parametrize("value,dst", [(np.float16(1.0), qd.i32), (np.float32(1.0), qd.i16), (1.0, qd.i16),
                                       (np.int64(3), qd.f32), (1, qd.f64), (np.uint8(1), qd.f16)],
                         ids=lambda v: getattr(v, "name", repr(v)))
def test_host_bit_cast_between_widths_is_a_type_error(qd_program, value, dst) -> None:
    with pytest.raises(QuadrantsTypeError, match=r"same width.*\d+ bits.*\d+ bits.*qd\.cast"):
        qd.bit_cast(value, dst)


def test_host_bit_cast_refuses_what_has_no_width(qd_program) -> None:
    with pytest.raises(QuadrantsTypeError, match="does not fit in 32 bits"):
        qd.bit_cast(1 << 40, qd.f32)
    with pytest.raises(QuadrantsTypeError, match="scalar number"):
        qd.bit_cast("1", qd.i32)


# ---------------------------------------------------------------- the CUDA tier's code, without a GPU

def test_nvptx_bit_casts_assemble(qd_program) -> None:
    """The f16 and wide bit_casts lower to PTX that `ptxas -arch=sm_90` accepts (no CUDA driver is needed)."""
    from qd.jit import nvptx

    if nvptx.ptxas_path() is None:
        pytest.skip("ptxas (CUDA toolkit) is not installed: the NVPTX output is not assembled")

    @qd.kernel
    def k(h: qd.types.ndarray(qd.f16, 1), s: qd.types.ndarray(qd.i16, 1), u: qd.types.ndarray(qd.u16, 1),
          f: qd.types.ndarray(qd.f32, 1), d: qd.types.ndarray(qd.f64, 1)):
        for i in range(h.shape[0]):
            s[i] = qd.bit_cast(h[i], qd.i16)
            u[i] = qd.bit_cast(h[i], qd.u16)
            h[i] = qd.bit_cast(s[i], qd.f16) + qd.bit_cast(u[i], qd.f16)
            f[i] = qd.bit_cast(qd.bit_cast(f[i], qd.u32), qd.f32)
            d[i] = qd.bit_cast(qd.bit_cast(d[i], qd.i64), qd.f64)

    n = 4
    k(np.ones(n, np.float16), np.zeros(n, np.int16), np.zeros(n, np.uint16), np.zeros(n, np.float32),
      np.zeros(n, np.float64))
    (ck, _), = k._instances.values()
    for fast_math in (True, False):
        pk = nvptx.compile_ptx(ck.ir, fast_math)
        assert "cvt.rn.f16.f32" in pk.ptx and "cvt.f32.f16" in pk.ptx  # the half conversions, not the f32 bits
        nvptx.ptxas(pk.ptx)
