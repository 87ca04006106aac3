"""The launch ABI: every fact that a tier's generated code and the host launch code must agree on, in one place.

Python code imports these names; `qd/base/gen_abi.py` renders them into `qd/_abi.h` (C, for
`qd/_interp_support.h`) and `qd/_abi.pxd` (Cython, for `qd/_interp.pyx`, `qd/_launch.pyx`, `qd/_sizer.pyx`), and
a test checks that the rendered files are current. Changing a value here changes every tier at once.

- Random numbers: counter-based, splitmix64 of (key, counter); a task's key base is `rng_key(seed, launch,
  task, 0)`; a thread's key is `mix64(base ^ tid * RNG_TID_MIX)`; draw n (n = 1, 2, ...) is
  `mix64(key + n * RNG_GOLDEN)`; floats take the draw's top 24 (f32, f16) or 53 (f64) bits.
- `Ctx`: the native launch context (`CTX_LAYOUT`: field, C type; every field is 8 bytes).
- The status buffer (int64 words), the print records, a GPU launch slot's header, the run return codes.
- The serialised `SizeExpr` kinds (`qd/ad/sizing.py`), the launch plans' codes (`qd/runtime/launch_plan.py`,
  `qd/runtime/device_launch.py`), the value codes and register bits of scalar arguments.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from qd.types import dtypes as T

M64 = (1 << 64) - 1

# ---------------------------------------------------------------- random numbers (splitmix64)
RNG_GOLDEN = 0x9E3779B97F4A7C15  # the counter's step, and the seed's whitening
RNG_TID_MIX = 0xD1B54A32D192ED03  # a thread index's multiplier in its key
RNG_MIX = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB))  # mix64's (shift, multiplier) rounds
RNG_MIX_LAST_SHIFT = 31  # mix64's final xor-shift
RNG_TASK_SHIFT = 40  # a task index's place in the key base
RAND_F32_SHIFT, RAND_F32_SCALE = 40, 2.0 ** -24  # f32 (and f16) draws: (x >> 40) * 2^-24, in [0, 1)
RAND_F64_SHIFT, RAND_F64_SCALE = 11, 2.0 ** -53  # f64 draws: (x >> 11) * 2^-53, in [0, 1)


def mix64(z: int) -> int:
    """The splitmix64 finalizer over a u64 (`qd_mix64`, rendered into `qd/_abi.h` by `mix64_c`)."""
    for shift, mul in RNG_MIX:
        z = ((z ^ (z >> shift)) * mul) & M64
    return z ^ (z >> RNG_MIX_LAST_SHIFT)


def mix64_c(u64: str, suffix: str) -> str:
    """`qd_mix64` (`mix64`) as a C or OpenCL C function over the unsigned 64-bit type `u64`, literals with `suffix`."""
    rounds = " ".join(f"z = (z ^ (z >> {s})) * {m:#x}{suffix};" for s, m in RNG_MIX)
    return f"static inline {u64} qd_mix64({u64} z) {{\n  {rounds}\n  return z ^ (z >> {RNG_MIX_LAST_SHIFT});\n}}\n"


def rng_key(seed: int, launch: int, task: int, tid: int) -> int:
    """`qd_rng_key` of `qd/_abi.h`: with `tid` 0, the key base of `task` in launch `launch`."""
    return mix64(mix64(mix64((seed ^ RNG_GOLDEN) & M64) ^ launch) ^ ((task << RNG_TASK_SHIFT) & M64) ^ tid)


# ---------------------------------------------------------------- the native launch context
CTX_LAYOUT = (
    ("bufs", "char**"),
    ("shapes", "int64_t*"),  # MAX_NDIM extents per buffer
    ("operands", "const int32_t*"),
    ("rets", "uint64_t*"),
    ("status", "int64_t*"),
    ("printbuf", "int64_t*"),
    ("printlen", "int64_t*"),
    ("printcap", "int64_t"),
    ("rng_base", "uint64_t"),  # rng_key(seed, launch, task, 0)
    ("rng_key", "uint64_t"),  # the thread's key, made on the first draw of an iteration
    ("rng_ctr", "uint64_t"),
    ("tid", "int64_t"),
    ("args", "uint64_t*"),  # scalar arguments' register bits (native code; the interpreter uses templates)
    ("slot", "int64_t"),  # the worker thread running this context, in [0, nthreads) (adstack heap slices)
)
CTX_FIELDS = tuple(name for name, _ in CTX_LAYOUT)
CTX_POINTERS = tuple(ctype.endswith("*") for _, ctype in CTX_LAYOUT)  # which fields hold an address
MAX_NDIM = 8  # extents per buffer in `Ctx.shapes`

# ---------------------------------------------------------------- status buffer, print records, launch slot
STATUS_WORDS = 16
STATUS_FLAG = 0  # failure flag: the first failing thread sets it by compare-and-swap 0 -> 1
STATUS_CHECK = 1  # the failed check's id
STATUS_TID = 2  # the failing thread (loop index)
STATUS_NARGS = 3  # how many args the check recorded
STATUS_ARGS = 4  # the recorded args' register bits, MAX_CHECK_ARGS words
MAX_CHECK_ARGS = 4
STATUS_DROPPED = 8  # print records dropped because the print buffer was full
ZERO_WORD = 15  # a status word nothing writes (always 0; the Vulkan emitter ORs it into constants)
PRINT_WORDS = 1 << 16  # the print buffer's words
PRINT_HEAD = 3  # a print record: [print id, thread, n], then n values' register bits
PRINTLEN_WORD = 16  # a GPU launch slot: the status words, the print length, then the return words
HEADER_WORDS = 17
LOOP_LIMIT = -2  # the check id recorded when an invocation reaches a driver's loop limit (Vulkan)
# return codes of a run (the interpreter's and native code's): done, a check failed, the kernel returned, and
# (the host's) a Python signal handler raised during the launch
RC_DONE, RC_FAILED, RC_RETURNED, RC_INTERRUPTED = 0, 1, 2, 3

# ---------------------------------------------------------------- serialised SizeExpr (qd/ad/sizing.py)
SIZE_KINDS = ("CONST", "ARG", "LOAD", "INDEX", "SHAPE", "VAR", "ADD", "SUB", "MUL", "MAX", "MIN", "DIV", "MOD", "MOR",
              "COUNT", "GATE", "CMP", "FCMP", "FLOAD", "FCONST")
(K_CONST, K_ARG, K_LOAD, K_INDEX, K_SHAPE, K_VAR, K_ADD, K_SUB, K_MUL, K_MAX, K_MIN, K_DIV, K_MOD, K_MOR,
 K_COUNT, K_GATE, K_CMP, K_FCMP, K_FLOAD, K_FCONST) = range(len(SIZE_KINDS))
SIZE_CMPS = ("LT", "LE", "GT", "GE", "EQ", "NE")  # a Cmp / FCmp node's comparison codes, in this order
SIZE_WORDS = 5  # words per node: [kind, a, b, c, d]
SIZE_GUARD = 1 << 24  # MaxOverRange iterations one serial walk may take, all its ranges together

# ---------------------------------------------------------------- launch plans (qd/runtime/launch_plan.py)
P_TEMPLATE, P_SCALAR, P_NDARRAY = 0, 1, 2  # parameter kinds
B_ARG, B_FIELD, B_TEMP, B_ADSTACK = 0, 1, 2, 3  # buffer kinds
V_FLOAT, V_SIGNED, V_BOOL = 0x100, 0x200, 0x400  # value codes: class flags | bit width in the low byte
V_BITS = 0xFF
# a CUDA runner's context words (qd/runtime/device_launch.py): the device address of buffer a, extent b of buffer
# a, scalar argument a's register bits, the device address of status word a / of word a of the slot's twin, a
W_BUF, W_SHAPE, W_ARG, W_STATUS, W_TWIN, W_CONST = range(6)
W_KINDS = {"buf": W_BUF, "shape": W_SHAPE, "arg": W_ARG, "status": W_STATUS, "twin": W_TWIN, "const": W_CONST}
S_FIELD, S_TEMP = -1, -2  # a runner's buffer from a field, a temporary (else: the parameter it is)


def value_code(dt: T.DataType) -> int:
    """A launch plan's code for scalars and returns of `dt`: class flags | bit width."""
    if dt.is_float:
        return V_FLOAT | dt.bits
    if dt is T.u1:
        return V_BOOL | 1
    return (V_SIGNED if dt.is_signed else 0) | dt.bits


_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


def register_bits(dtype: T.DataType, value: Any) -> int:
    """The register bits (a u64) of a value of `dtype`, as every tier passes scalars: ints sign- or
    zero-extended to 64 bits, f32 and f16 as f32 bits, f64 as f64 bits."""
    if dtype.is_float:
        if dtype.bits == 64:
            return int.from_bytes(_F64.pack(float(value)), "little")
        if dtype.bits == 16:
            value = float(np.float16(value))
        return int.from_bytes(_F32.pack(float(np.float32(value))), "little")
    v = int(value)
    if dtype is T.u1:
        return 1 if v else 0
    v &= (1 << dtype.bits) - 1
    if dtype.is_signed and v >> (dtype.bits - 1):
        v -= 1 << dtype.bits
    return v & M64
