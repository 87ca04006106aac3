"""The op table: every arithmetic/logical/math op of qd's IR, with its facts in one place.

The interpreter (`qd/_interp.pyx` via `qd/bytecode/`), every backend and the derivative rules
(`qd/ad/rules.py`) are tables keyed by `Op`; `tests/test_ops_coverage.py` proves each covers every op.

Type rules (`OpInfo.rule`):
  same   result dtype = operand dtype (operands are promoted to one dtype by the frontend)
  cmp    result is u1; operands share one dtype
  float  operands and result share one float dtype (the frontend casts ints to default_fp)
  int    operands and result share one integer dtype
  cast   result dtype is the statement's own dtype (CAST converts values, BIT_CAST reinterprets bits)
  select SELECT(cond: u1, a, b): result = dtype of a and b

Classes (`OpInfo.kind`), what a tier needs to know to place an op in its own tables:
  arith           arithmetic on ints and floats (`+ - * /`, min, max, abs, ...)
  exact_math      a C math function that is correctly rounded (sqrt, floor, ceil, rint): bit-exact everywhere
  transcendental  a C math function within a few ulps (`OpInfo.ulps`); each tier calls its libm or its own
  bitwise         bits of an integer
  comparison      u1 result (comparisons, logical not)
  data            moves or reinterprets a value (casts, select, stop_grad)

`OpInfo.libm` names the C99 <math.h> function of the op's float form, in double (f32: `c_name`); the tiers read
their libm, intrinsic, libmvec, libdevice and OpenCL C names from it. None: there is none (each tier composes it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Op(enum.Enum):
    # unary
    NEG = "neg"
    BIT_NOT = "bit_not"
    LOGICAL_NOT = "logical_not"
    ABS = "abs"
    SGN = "sgn"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    TANH = "tanh"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    POPCNT = "popcnt"
    CLZ = "clz"
    STOP_GRAD = "stop_grad"
    CAST = "cast"
    BIT_CAST = "bit_cast"
    # binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FLOORDIV = "floordiv"
    MOD = "mod"
    POW = "pow"
    ATAN2 = "atan2"
    MIN = "min"
    MAX = "max"
    BIT_AND = "bit_and"
    BIT_OR = "bit_or"
    BIT_XOR = "bit_xor"
    SHL = "shl"
    SHR = "shr"
    BIT_SHR = "bit_shr"
    CMP_LT = "cmp_lt"
    CMP_LE = "cmp_le"
    CMP_GT = "cmp_gt"
    CMP_GE = "cmp_ge"
    CMP_EQ = "cmp_eq"
    CMP_NE = "cmp_ne"
    # ternary
    SELECT = "select"

    def __repr__(self) -> str:
        return f"Op.{self.name}"


@dataclass(frozen=True)
class OpInfo:
    arity: int
    rule: str
    semantics: str
    linear: bool = False  # d(op) is constant in its float operands (AD needs no stored primal)
    nondiff: bool = False  # stops gradients (integer-valued or piecewise constant)
    commutative: bool = False
    # Accuracy of float results per tier (interp, cpu, vulkan, cuda), in ulps of the result type against the
    # exact value; 0: correctly rounded there, so bit-exact against the interpreter (see `_ulps`).
    ulps: dict = field(default_factory=dict)
    kind: str = "arith"  # class (module docstring)
    libm: str | None = None  # the C function of the float form, in double (module docstring)
    libm_f32: str | None = None  # its f32 form where that is not `libm` + 'f'


KINDS = ("arith", "exact_math", "transcendental", "bitwise", "comparison", "data")


def _i(arity: int, rule: str, semantics: str, **kw) -> OpInfo:
    return OpInfo(arity, rule, semantics, **kw)


def _ulps(interp: int, cpu: int, vulkan: int, cuda: int, opencl: int) -> dict:
    """Bounds measured by `bench/ulps.py` (GPU.md §4): the largest error over 2^20 inputs per op and dtype (f32
    and f64, the op's domain there) against numpy in float64 (f32 results) or long double (f64 results), the
    larger of `fast_math=False` and `True`, rounded up. Measured 2026-11-25: interp and opencl (PoCL 3.1, SLEEF)
    on the 2-core machine, vulkan and cuda on an H200; 2026-11-26: cpu (under fast math its vectorized loops call
    glibc's libmvec, `qd/jit/vecmath.py`: up to 3.8 ulp; without, the interpreter's libm, bit for bit), and opencl
    on the H200's NVIDIA OpenCL 3.0 driver 580 (the opencl bound is the larger of the two drivers'; other OpenCL
    drivers are not measured). Vulkan computes f32 functions through f64 (qd's own implementations), so its f32
    results are correctly rounded where the device has f64; cuda's are libdevice's. `tests/test_ulps.py` checks
    them on each tier."""
    return {"interp": interp, "cpu": cpu, "vulkan": vulkan, "cuda": cuda, "opencl": opencl}


# `_EXACT` ops (`+ - * /`, sqrt, casts) are bit-identical on every tier under fast_math=False, IEEE specials
# included (inf, NaN and -0.0 through constant zeros: `x * 0.0` is NaN for x = inf). On Vulkan this needs the
# device's float controls (DESIGN §10): without `SignedZeroInfNanPreserve` an inf, NaN or -0 operand gives what the
# driver gives (qd still hides constant zeros from it), without `DenormPreserve` subnormals may flush to zero.
_EXACT = _ulps(0, 0, 0, 0, 0)

INFO: dict[Op, OpInfo] = {
    Op.NEG: _i(1, "same", "-a (ints wrap)", linear=True),
    Op.BIT_NOT: _i(1, "int", "~a", nondiff=True, kind="bitwise"),
    Op.LOGICAL_NOT: _i(1, "cmp", "a == 0", nondiff=True, kind="comparison"),
    Op.ABS: _i(1, "same", "|a| (ints wrap: abs(INT_MIN) == INT_MIN)", libm="fabs"),
    Op.SGN: _i(1, "same", "-1, 0 or 1 (floats: sign of a, 0 for +-0 and NaN)", nondiff=True),
    Op.SQRT: _i(1, "float", "IEEE sqrt, correctly rounded", ulps=_EXACT, kind="exact_math", libm="sqrt"),
    Op.RSQRT: _i(1, "float", "1 / sqrt(a)", ulps=_ulps(2, 2, 2, 2, 2)),
    Op.EXP: _i(1, "float", "e**a", ulps=_ulps(1, 3, 1, 2, 2), kind="transcendental", libm="exp"),
    Op.LOG: _i(1, "float", "natural log", ulps=_ulps(1, 4, 1, 1, 1), kind="transcendental", libm="log"),
    Op.SIN: _i(1, "float", "sine (radians)", ulps=_ulps(1, 4, 1, 2, 2), kind="transcendental", libm="sin"),
    Op.COS: _i(1, "float", "cosine (radians)", ulps=_ulps(1, 4, 1, 2, 2), kind="transcendental", libm="cos"),
    Op.TAN: _i(1, "float", "tangent (radians)", ulps=_ulps(1, 4, 1, 3, 4), kind="transcendental", libm="tan"),
    Op.ASIN: _i(1, "float", "arcsine", ulps=_ulps(1, 3, 1, 2, 3), kind="transcendental", libm="asin"),
    Op.ACOS: _i(1, "float", "arccosine", ulps=_ulps(1, 3, 1, 2, 2), kind="transcendental", libm="acos"),
    Op.TANH: _i(1, "float", "hyperbolic tangent", ulps=_ulps(2, 3, 1, 2, 2), kind="transcendental", libm="tanh"),
    Op.FLOOR: _i(1, "float", "round toward -inf", nondiff=True, ulps=_EXACT, kind="exact_math", libm="floor"),
    Op.CEIL: _i(1, "float", "round toward +inf", nondiff=True, ulps=_EXACT, kind="exact_math", libm="ceil"),
    Op.ROUND: _i(1, "float", "round half to even", nondiff=True, ulps=_EXACT, kind="exact_math", libm="rint"),
    Op.POPCNT: _i(1, "int", "number of set bits", nondiff=True, kind="bitwise"),
    Op.CLZ: _i(1, "int", "leading zero bits at the operand's width", nondiff=True, kind="bitwise"),
    Op.STOP_GRAD: _i(1, "same", "identity whose derivative is zero (`qd.stop_grad`)", nondiff=True,
                     ulps=_EXACT, kind="data"),
    Op.CAST: _i(1, "cast", "value conversion: float->int truncates toward 0 (out of range is "
                "undefined), int->int wraps, int->float rounds to nearest even", linear=True,
                ulps=_EXACT, kind="data"),
    Op.BIT_CAST: _i(1, "cast", "reinterpret the bits (same width)", nondiff=True, kind="data"),
    Op.ADD: _i(2, "same", "a + b (ints wrap)", linear=True, commutative=True, ulps=_EXACT),
    Op.SUB: _i(2, "same", "a - b (ints wrap)", linear=True, ulps=_EXACT),
    Op.MUL: _i(2, "same", "a * b (ints wrap)", commutative=True, ulps=_EXACT),
    Op.DIV: _i(2, "float", "IEEE a / b (the frontend turns int / int into default_fp)",
               ulps=_EXACT),
    Op.FLOORDIV: _i(2, "int", "floor(a / b) for ints (Python //); division by 0 gives 0",
                    nondiff=True),
    Op.MOD: _i(2, "same", "Python %: result has the divisor's sign; floats: a - b*floor(a/b); "
               "ints: x % 0 gives 0"),
    Op.POW: _i(2, "same", "a ** b (ints: repeated multiply, b < 0 gives 0 unless |a| == 1; a constant b is "
                          "simplified before this op: DESIGN §4)",
               ulps=_ulps(1, 1, 1, 2, 3), kind="transcendental", libm="pow"),
    Op.ATAN2: _i(2, "float", "atan2(a, b)", ulps=_ulps(2, 4, 1, 2, 2), kind="transcendental", libm="atan2"),
    Op.MIN: _i(2, "same", "min(a, b); NaN in a float operand gives the other", commutative=True, libm="fmin"),
    Op.MAX: _i(2, "same", "max(a, b); NaN in a float operand gives the other", commutative=True, libm="fmax"),
    Op.BIT_AND: _i(2, "int", "a & b", nondiff=True, commutative=True, kind="bitwise"),
    Op.BIT_OR: _i(2, "int", "a | b", nondiff=True, commutative=True, kind="bitwise"),
    Op.BIT_XOR: _i(2, "int", "a ^ b", nondiff=True, commutative=True, kind="bitwise"),
    Op.SHL: _i(2, "int", "a << (b mod width)", nondiff=True, kind="bitwise"),
    Op.SHR: _i(2, "int", "a >> (b mod width): arithmetic for signed, logical for unsigned",
               nondiff=True, kind="bitwise"),
    Op.BIT_SHR: _i(2, "int", "logical shift right by (b mod width), whatever the signedness",
                   nondiff=True, kind="bitwise"),
    Op.CMP_LT: _i(2, "cmp", "a < b", nondiff=True, kind="comparison"),
    Op.CMP_LE: _i(2, "cmp", "a <= b", nondiff=True, kind="comparison"),
    Op.CMP_GT: _i(2, "cmp", "a > b", nondiff=True, kind="comparison"),
    Op.CMP_GE: _i(2, "cmp", "a >= b", nondiff=True, kind="comparison"),
    Op.CMP_EQ: _i(2, "cmp", "a == b", nondiff=True, commutative=True, kind="comparison"),
    Op.CMP_NE: _i(2, "cmp", "a != b", nondiff=True, commutative=True, kind="comparison"),
    Op.SELECT: _i(3, "select", "cond ? a : b (both evaluated)", linear=True, kind="data"),
}

UNARY = tuple(op for op in Op if INFO[op].arity == 1)
BINARY = tuple(op for op in Op if INFO[op].arity == 2)
COMPARISONS = (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE)
# binary arithmetic by operand kind, from the type rules (the code generators' tables iterate these)
INT_BINARY = tuple(op for op in BINARY if INFO[op].rule in ("same", "int"))
FLOAT_BINARY = tuple(op for op in BINARY if INFO[op].rule in ("same", "float"))
# Ops an AtomicRMW statement may carry (the old value is returned). MUL is a CAS loop on every tier.
ATOMIC = (Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)

# unary ops by operand kind (float: the C math functions and rsqrt; int: bit counts and ~)
FLOAT_UNARY = tuple(op for op in UNARY if INFO[op].rule == "float")
INT_UNARY = tuple(op for op in UNARY if INFO[op].rule == "int")
# ops whose float form is a C math function (`OpInfo.libm`), and those of them computed to within a few ulps
LIBM = tuple(op for op in Op if INFO[op].libm)
TRANSCENDENTAL = tuple(op for op in Op if INFO[op].kind == "transcendental")

assert set(INFO) == set(Op), "every Op needs an OpInfo"
assert all(i.kind in KINDS for i in INFO.values()), "an OpInfo's kind is one of KINDS"
assert all(INFO[op].libm for op in Op if INFO[op].kind in ("exact_math", "transcendental")), "a math op names its libm"


def c_name(op: Op, bits: int) -> str:
    """The C <math.h> function of `op`'s float form at `bits` (32: `sinf`, 64: `sin`); f16 computes in f32."""
    info = INFO[op]
    if info.libm is None:
        raise KeyError(f"{op} has no C math function")
    return info.libm if bits == 64 else info.libm_f32 or info.libm + "f"


def by_name(name: str) -> Op:
    return Op(name)
