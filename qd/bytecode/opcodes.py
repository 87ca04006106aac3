"""The interpreter's opcode table: every bytecode instruction and the Cython statement that runs it.

One table drives both sides: `qd/bytecode/lower.py` looks opcodes up by name, and
`qd/bytecode/gen_ops.py` renders the dispatch chain `qd/_interp_ops.pxi` from it (Cython turns the
`if op == N` chain into a C switch). Instructions are 5 int32 words: `op d a b c`.

Register file: a `Reg` union per value (`i` int64, `u` uint64, `f` float, `d` double, `i32`/`u32`
views of the low word). Invariants: a signed int of any width is kept sign-extended in `i`, an
unsigned one zero-extended in `u`; f32 (and f16, which computes in f32 and is rounded to f16 after
every op) lives in `f`, f64 in `d`. Narrow ints compute in the 32-bit class and are truncated by a
`TRUNC_*` instruction, which is exact because +, -, *, bit ops and shifts only depend on low bits.
"""

from __future__ import annotations

from qd.base import abi
from qd.ops import ATOMIC, BINARY, FLOAT_UNARY, INFO, Op, c_name
from qd.types import dtypes as T

# Arithmetic classes: which union member holds the value and how it computes.
CLASSES = ("I32", "I64", "U32", "U64", "F32", "F64")
FIELD = {"I32": "i", "I64": "i", "U32": "u", "U64": "u", "F32": "f", "F64": "d"}


def class_of(dt: T.DataType) -> str:
    if dt.is_float:
        return "F64" if dt.bits == 64 else "F32"
    if dt.bits == 64:
        return "I64" if dt.is_signed else "U64"
    return "I32" if dt.is_signed else "U32"


def member_of(dt: T.DataType) -> str:
    return FIELD[class_of(dt)]


_C = {"I32": "int32_t", "I64": "int64_t", "U32": "uint32_t", "U64": "uint64_t", "F32": "float", "F64": "double"}
_UC = {"I32": "uint32_t", "I64": "uint64_t", "U32": "uint32_t", "U64": "uint64_t"}
_SIGNED_FROM_UNSIGNED = {"I32": "int32_t", "I64": "int64_t", "U32": "uint32_t", "U64": "uint64_t"}
_BITS = {"I32": 31, "I64": 63, "U32": 31, "U64": 63}


def _wrap(cls: str, expr: str) -> str:
    """Integer expression computed in the unsigned type of `cls`, narrowed back to `cls`."""
    return f"<{_SIGNED_FROM_UNSIGNED[cls]}>({expr})"


def _int_binary(op: Op, cls: str) -> str | None:
    f, u = FIELD[cls], _UC[cls]
    a, b = f"R[a].{f}", f"R[b].{f}"
    ua, ub = f"<{u}>{a}", f"<{u}>{b}"
    m = _BITS[cls]
    signed = cls.startswith("I")
    wide = "i64" if signed else "u64"
    table = {
        Op.ADD: _wrap(cls, f"{ua} + {ub}"),
        Op.SUB: _wrap(cls, f"{ua} - {ub}"),
        Op.MUL: _wrap(cls, f"{ua} * {ub}"),
        Op.FLOORDIV: _wrap(cls, f"qd_floordiv_{wide}({a}, {b})"),
        Op.MOD: _wrap(cls, f"qd_mod_{wide}({a}, {b})"),
        Op.POW: _wrap(cls, f"qd_ipow_{wide}({a}, {b})"),
        Op.MIN: f"{a} if {a} < {b} else {b}",
        Op.MAX: f"{a} if {a} > {b} else {b}",
        Op.BIT_AND: f"{a} & {b}",
        Op.BIT_OR: f"{a} | {b}",
        Op.BIT_XOR: f"{a} ^ {b}",
        Op.SHL: _wrap(cls, f"{ua} << ({b} & {m})"),
        Op.SHR: f"{a} >> ({b} & {m})",
        Op.BIT_SHR: _wrap(cls, f"<{u}>{a} >> ({b} & {m})") if signed else f"{a} >> ({b} & {m})",
    }
    return table.get(op)


_FMATH = tuple(op for op in FLOAT_UNARY if INFO[op].libm)  # one <math.h> call each (the op table's name)


def _float_binary(op: Op, cls: str) -> str | None:
    f = FIELD[cls]
    s = "f" if cls == "F32" else ""
    a, b = f"R[a].{f}", f"R[b].{f}"
    if INFO[op].libm:  # pow, atan2, fmin, fmax
        return f"{c_name(op, 32 if s else 64)}({a}, {b})"
    table = {
        Op.ADD: f"{a} + {b}", Op.SUB: f"{a} - {b}", Op.MUL: f"{a} * {b}", Op.DIV: f"{a} / {b}",
        Op.MOD: f"qd_fmod{s}({a}, {b})",
    }
    return table.get(op)


def _unary(op: Op, cls: str) -> str | None:
    f = FIELD[cls]
    a = f"R[a].{f}"
    if cls in ("F32", "F64"):
        bits = 32 if cls == "F32" else 64
        one = "<float>1.0" if bits == 32 else "1.0"
        table = {Op.NEG: f"-{a}", Op.ABS: f"{c_name(Op.ABS, bits)}({a})",
                 Op.RSQRT: f"{one} / {c_name(Op.SQRT, bits)}({a})", Op.SGN: f"<{_C[cls]}>(({a} > 0) - ({a} < 0))"}
        if op in _FMATH:
            return f"{c_name(op, bits)}({a})"
        return table.get(op)
    u = _UC[cls]
    table = {
        Op.NEG: _wrap(cls, f"<{u}>0 - <{u}>{a}"),
        Op.BIT_NOT: _wrap(cls, f"~<{u}>{a}"),
        Op.ABS: _wrap(cls, f"(<{u}>0 - <{u}>{a}) if {a} < 0 else <{u}>{a}") if cls[0] == "I" else a,
        Op.SGN: f"({a} > 0) - ({a} < 0)" if cls[0] == "I" else f"{a} != 0",
        Op.POPCNT: f"__builtin_popcountll(<{u}>{a})",
        Op.CLZ: f"qd_clz{32 if cls.endswith('32') else 64}(<{u}>{a})",
    }
    return table.get(op)


def _cmp_expr(op: Op, f: str) -> str:
    sym = {Op.CMP_LT: "<", Op.CMP_LE: "<=", Op.CMP_GT: ">", Op.CMP_GE: ">=", Op.CMP_EQ: "==",
           Op.CMP_NE: "!="}[op]
    return f"R[a].{f} {sym} R[b].{f}"


def _build() -> list[tuple[str, str]]:
    """(name, Cython body) for every opcode, in opcode order."""
    ops: list[tuple[str, str]] = [
        ("HALT", "return RC_DONE"),
        ("MOV", "R[d] = R[a]"),
        ("JMP", "pc = a * 5"),
        ("JZ", "if R[a].i == 0:\n    pc = b * 5"),
        ("JNZ", "if R[a].i != 0:\n    pc = b * 5"),
        # serial range loop: test `var < end` (i64 compare) else jump to b; increment and jump back
        ("FOR_TEST", "if R[d].i >= R[a].i:\n    pc = b * 5"),
        ("FOR_NEXT", "R[d].i += 1\npc = a * 5"),
        ("SELECT", "R[d] = R[b] if R[a].i != 0 else R[c]"),
        ("MULADD_I64", "R[d].i = R[a].i * R[b].i + R[c].i"),
        ("TRUNC_I8", "R[d].i = <int8_t>R[a].i"),
        ("TRUNC_I16", "R[d].i = <int16_t>R[a].i"),
        ("TRUNC_U8", "R[d].u = <uint8_t>R[a].u"),
        ("TRUNC_U16", "R[d].u = <uint16_t>R[a].u"),
        ("TRUNC_U1", "R[d].u = R[a].u & 1"),
        ("ROUND_F16", "R[d].f = qd_round_f16(R[a].f)"),
        ("RET", "ctx.rets[a] = R[d].u"),
        ("HALT_RET", "return RC_RETURNED"),
        ("CHECK", "if R[d].i == 0:\n    qd_fail(ctx, a, &ctx.operands[b], c, R)\n    return RC_FAILED"),
        ("PRINT", "qd_print(ctx, a, &ctx.operands[b], c, R)"),
        ("RAND_U64", "R[d].u = qd_rand(ctx)"),
        ("RAND_F32", f"R[d].f = <float>(qd_rand(ctx) >> RAND_F32_SHIFT) * <float>{abi.RAND_F32_SCALE:.17g}"),
        ("RAND_F64", f"R[d].d = <double>(qd_rand(ctx) >> RAND_F64_SHIFT) * {abi.RAND_F64_SCALE:.17g}"),
        ("SHAPE", "R[d].i = ctx.shapes[a * MAX_NDIM + b]"),
        ("SLOT", "R[d].i = ctx.slot"),
    ]
    for cls in CLASSES:
        for op in Op:
            if op in (Op.CAST, Op.BIT_CAST, Op.SELECT, Op.STOP_GRAD) or op in _CMP:
                continue
            arity = 2 if op in _BIN else 1
            if arity == 2:
                expr = _float_binary(op, cls) if cls[0] == "F" else _int_binary(op, cls)
            else:
                expr = _unary(op, cls)
            if op == Op.LOGICAL_NOT:
                expr = f"R[a].{FIELD[cls]} == 0"
                ops.append((f"{op.name}_{cls}", f"R[d].i = {expr}"))
                continue
            if expr is not None:
                dst = "i" if op in (Op.POPCNT, Op.CLZ, Op.SGN) and cls[0] == "U" else FIELD[cls]
                ops.append((f"{op.name}_{cls}", f"R[d].{dst} = {expr}"))
        for op in _CMP:
            ops.append((f"{op.name}_{cls}", f"R[d].i = {_cmp_expr(op, FIELD[cls])}"))
    ops += _casts() + _memory()
    return ops


_BIN = set(BINARY)
_CMP = (Op.CMP_LT, Op.CMP_LE, Op.CMP_GT, Op.CMP_GE, Op.CMP_EQ, Op.CMP_NE)

_SRC = {"I": "R[a].i", "U": "R[a].u", "F32": "R[a].f", "F64": "R[a].d"}


def _cast_expr(src: str, dt: T.DataType) -> str:
    v = _SRC[src]
    if dt is T.u1:
        return f"{v} != 0"
    if dt.is_int:
        c = f"{'' if dt.is_signed else 'u'}int{dt.bits}_t"
        if src.startswith("F") and not (dt.bits == 64 and not dt.is_signed):
            return f"<{c}><int64_t>{v}"
        return f"<{c}>{v}"
    if dt is T.f16:
        return f"qd_round_f16_d(<double>{v})"
    return f"<{'float' if dt is T.f32 else 'double'}>{v}"


def _casts() -> list[tuple[str, str]]:
    out = []
    for src in ("I", "U", "F32", "F64"):
        for dt in T.ALL:
            out.append((f"CAST_{src}_{dt.name.upper()}", f"R[d].{member_of(dt)} = {_cast_expr(src, dt)}"))
    out += [
        ("BITCAST_32_TO_F32", "R[d].u = 0\nR[d].u32 = <uint32_t>R[a].u"),
        ("BITCAST_F32_TO_I32", "R[d].i = R[a].i32"),
        ("BITCAST_F32_TO_U32", "R[d].u = R[a].u32"),
        ("BITCAST_64", "R[d] = R[a]"),
        ("BITCAST_F16_TO_I16", "R[d].i = <int16_t>qd_f16_to_bits(R[a].f)"),
        ("BITCAST_F16_TO_U16", "R[d].u = qd_f16_to_bits(R[a].f)"),
        ("BITCAST_16_TO_F16", "R[d].u = 0\nR[d].f = qd_bits_to_f16(<uint16_t>R[a].u)"),
    ]
    return out


_CTYPE = {"u1": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
          "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "f16": "uint16_t",
          "f32": "float", "f64": "double"}


def _memory() -> list[tuple[str, str]]:
    """Loads `LD_<dt> d <- buf a [idx b]`, stores `ST_<dt> buf a [idx b] <- c`, atomics
    `AT_<OP>_<dt> d <- buf a [idx b] op= c`."""
    out = []
    for dt in T.ALL:
        n, c, m = dt.name, _CTYPE[dt.name], member_of(dt)
        ptr = f"(<{c}*>ctx.bufs[a])[R[b].i]"
        load = {"f16": f"qd_h2f({ptr})", "u1": f"{ptr} != 0"}.get(n, ptr)
        out.append((f"LD_{n.upper()}", f"R[d].{m} = {load}"))
        store = {"f16": "qd_f2h(R[c].f)", "u1": "R[c].u != 0"}.get(n, f"<{c}>R[c].{m}")
        out.append((f"ST_{n.upper()}", f"{ptr} = {store}"))
        if dt is T.u1:
            continue
        for op in ATOMIC:
            if dt.is_float and op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR):
                continue
            fn = f"qd_atomic_{op.name.lower()}_{n}"
            out.append((f"AT_{op.name}_{n.upper()}",
                        f"R[d].{m} = {fn}(&{ptr}, R[c].{m})"))
        if n in SWAP_DTYPES:
            out.append((f"XCHG_{n.upper()}", f"R[d].{m} = qd_atomic_xchg_{n}(&{ptr}, R[c].{m})"))
        if n in CAS_DTYPES:  # d holds `desired` on entry (the lowering moves it there), the old value after
            out.append((f"CAS_{n.upper()}", f"R[d].{m} = qd_atomic_cas_{n}(&{ptr}, R[c].{m}, R[d].{m})"))
    return out


# `ir.AtomicSwap`'s dtypes: exchange `XCHG_<dt> d <- buf a [idx b] = c`, compare-and-swap
# `CAS_<dt> d <- buf a [idx b] (== c ? d)`.
SWAP_DTYPES = ("i32", "u32", "i64", "u64", "f32", "f64")
CAS_DTYPES = ("i32", "u32", "i64", "u64")


TABLE: list[tuple[str, str]] = _build()
OPC: dict[str, int] = {name: i for i, (name, _) in enumerate(TABLE)}
NAMES: list[str] = [name for name, _ in TABLE]
