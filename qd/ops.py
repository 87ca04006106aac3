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
    Op.BIT_NOT: _i(1, "int", "~a", nondiff=True),
    Op.LOGICAL_NOT: _i(1, "cmp", "a == 0", nondiff=True),
    Op.ABS: _i(1, "same", "|a| (ints wrap: abs(INT_MIN) == INT_MIN)"),
    Op.SGN: _i(1, "same", "-1, 0 or 1 (floats: sign of a, 0 for +-0 and NaN)", nondiff=True),
    Op.SQRT: _i(1, "float", "IEEE sqrt, correctly rounded", ulps=_EXACT),
    Op.RSQRT: _i(1, "float", "1 / sqrt(a)", ulps=_ulps(2, 2, 2, 2, 2)),
    Op.EXP: _i(1, "float", "e**a", ulps=_ulps(1, 3, 1, 2, 2)),
    Op.LOG: _i(1, "float", "natural log", ulps=_ulps(1, 4, 1, 1, 1)),
    Op.SIN: _i(1, "float", "sine (radians)", ulps=_ulps(1, 4, 1, 2, 2)),
    Op.COS: _i(1, "float", "cosine (radians)", ulps=_ulps(1, 4, 1, 2, 2)),
    Op.TAN: _i(1, "float", "tangent (radians)", ulps=_ulps(1, 4, 1, 3, 4)),
    Op.ASIN: _i(1, "float", "arcsine", ulps=_ulps(1, 3, 1, 2, 3)),
    Op.ACOS: _i(1, "float", "arccosine", ulps=_ulps(1, 3, 1, 2, 2)),
    Op.TANH: _i(1, "float", "hyperbolic tangent", ulps=_ulps(2, 3, 1, 2, 2)),
    Op.FLOOR: _i(1, "float", "round toward -inf", nondiff=True, ulps=_EXACT),
    Op.CEIL: _i(1, "float", "round toward +inf", nondiff=True, ulps=_EXACT),
    Op.ROUND: _i(1, "float", "round half to even", nondiff=True, ulps=_EXACT),
    Op.POPCNT: _i(1, "int", "number of set bits", nondiff=True),
    Op.CLZ: _i(1, "int", "leading zero bits at the operand's width", nondiff=True),
    Op.STOP_GRAD: _i(1, "same", "identity whose derivative is zero (`qd.stop_grad`)", nondiff=True,
                     ulps=_EXACT),
    Op.CAST: _i(1, "cast", "value conversion: float->int truncates toward 0 (out of range is "
                "undefined), int->int wraps, int->float rounds to nearest even", linear=True,
                ulps=_EXACT),
    Op.BIT_CAST: _i(1, "cast", "reinterpret the bits (same width)", nondiff=True),
    Op.ADD: _i(2, "same", "a + b (ints wrap)", linear=True, commutative=True, ulps=_EXACT),
    Op.SUB: _i(2, "same", "a - b (ints wrap)", linear=True, ulps=_EXACT),
    Op.MUL: _i(2, "same", "a * b (ints wrap)", commutative=True, ulps=_EXACT),
    Op.DIV: _i(2, "float", "IEEE a / b (the frontend turns int / int into default_fp)",
               ulps=_EXACT),
    Op.FLOORDIV: _i(2, "int", "floor(a / b) for ints (Python //); division by 0 gives 0",
                    nondiff=True),
    Op.MOD: _i(2, "same", "Python %: result has the divisor's sign; floats: a - b*floor(a/b); "
               "ints: x % 0 gives 0"),
    Op.POW: _i(2, "same", "a ** b (ints: repeated multiply, b < 0 gives 0 unless |a| == 1)",
               ulps=_ulps(1, 1, 1, 2, 3)),
    Op.ATAN2: _i(2, "float", "atan2(a, b)", ulps=_ulps(2, 4, 1, 2, 2)),
    Op.MIN: _i(2, "same", "min(a, b); NaN in a float operand gives the other", commutative=True),
    Op.MAX: _i(2, "same", "max(a, b); NaN in a float operand gives the other", commutative=True),
    Op.BIT_AND: _i(2, "int", "a & b", nondiff=True, commutative=True),
    Op.BIT_OR: _i(2, "int", "a | b", nondiff=True, commutative=True),
    Op.BIT_XOR: _i(2, "int", "a ^ b", nondiff=True, commutative=True),
    Op.SHL: _i(2, "int", "a << (b mod width)", nondiff=True),
    Op.SHR: _i(2, "int", "a >> (b mod width): arithmetic for signed, logical for unsigned",
               nondiff=True),
    Op.BIT_SHR: _i(2, "int", "logical shift right by (b mod width), whatever the signedness",
                   nondiff=True),
    Op.CMP_LT: _i(2, "cmp", "a < b", nondiff=True),
    Op.CMP_LE: _i(2, "cmp", "a <= b", nondiff=True),
    Op.CMP_GT: _i(2, "cmp", "a > b", nondiff=True),
    Op.CMP_GE: _i(2, "cmp", "a >= b", nondiff=True),
    Op.CMP_EQ: _i(2, "cmp", "a == b", nondiff=True, commutative=True),
    Op.CMP_NE: _i(2, "cmp", "a != b", nondiff=True, commutative=True),
    Op.SELECT: _i(3, "select", "cond ? a : b (both evaluated)", linear=True),
}

UNARY = tuple(op for op in Op if INFO[op].arity == 1)
BINARY = tuple(op for op in Op if INFO[op].arity == 2)
COMPARISONS = (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE)
# binary arithmetic by operand kind, from the type rules (the code generators' tables iterate these)
INT_BINARY = tuple(op for op in BINARY if INFO[op].rule in ("same", "int"))
FLOAT_BINARY = tuple(op for op in BINARY if INFO[op].rule in ("same", "float"))
# Ops an AtomicRMW statement may carry (the old value is returned). MUL is a CAS loop on every tier.
ATOMIC = (Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)

assert set(INFO) == set(Op), "every Op needs an OpInfo"


def by_name(name: str) -> Op:
    return Op(name)
