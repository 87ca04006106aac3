"""Exact op semantics for the debugger's walker: every op is evaluated by the reference interpreter.

A value is held as its *register bits* (qd/bytecode/opcodes.py's invariants: ints sign- or
zero-extended to 64 bits, f32 and f16 as f32 bits, f64 as f64 bits), as an unsigned Python int.
`evaluate(op, arg dtypes, dtype, bits)` runs a one-op serial kernel (`args -> op -> return`),
lowered once per (op, dtypes) and cached, so the debugger can never disagree with the interpreter
about an op. `qd.random` draws are recomputed here from the interpreter's counter-based formula.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from qd import _interp, ir
from qd.base import abi
from qd.base.abi import M64 as _M64
from qd.base.abi import mix64
from qd.bytecode.lower import KernelCode, lower_kernel
from qd.ops import Op
from qd.types import dtypes as T
from qd.types.dtypes import DataType


def canonical(dtype: DataType, bits: int) -> int:
    """`bits` normalised to the register form of `dtype` (upper bits of narrow values made exact)."""
    bits &= _M64
    if dtype.is_float:
        return bits if dtype.bits == 64 else bits & 0xFFFFFFFF
    if dtype is T.u1:
        return 1 if bits & 0xFF else 0
    w = dtype.bits
    v = bits & ((1 << w) - 1)
    if dtype.is_signed and v >> (w - 1):
        v -= 1 << w
    return v & _M64


class _Snippet:
    """One op lowered as a serial kernel, with its own interpreter launch state."""

    def __init__(self, op: Op, arg_dtypes: tuple[DataType, ...], dtype: DataType) -> None:
        loads = tuple(ir.ArgLoad(index=i, dtype=dt) for i, dt in enumerate(arg_dtypes))
        s = ir.OpStmt(op=op, args=loads, dtype=dtype)
        body = ir.Block(loads + (s, ir.Return(values=(s,))))
        k = ir.KernelIR(name="qd_debug_op", args=tuple(ir.ArgDecl(f"a{i}", "scalar", dt)
                                                       for i, dt in enumerate(arg_dtypes)),
                        buffers=(), rets=(dtype,), checks=(), body=body, tasks=(ir.Task("serial", body),))
        code: KernelCode = lower_kernel(k)
        self.code = code.tasks[0].code
        self.tpl = np.zeros(max(1, code.nregs), dtype=np.uint64)
        for reg, bits in code.consts:
            self.tpl[reg] = bits
        self.arg_regs = [(reg, index) for reg, index, _ in code.arg_regs]
        self.rets = np.zeros(1, dtype=np.uint64)
        self._keep = (np.zeros(abi.STATUS_WORDS, np.int64), np.empty(abi.PRINT_WORDS, np.int64), np.zeros(1, np.int64),
                      np.zeros(1, np.uint64))
        status, printbuf, printlen, args = self._keep
        self.launch = _interp.Launch(0, code.operands, status, printbuf, printlen, self.rets, args)
        self.launch.start([], 0, 0, 1)
        self.dtype = dtype

    def __call__(self, bits: tuple[int, ...]) -> int:
        tpl = self.tpl.copy()
        for reg, index in self.arg_regs:
            tpl[reg] = bits[index]
        self.launch.run_serial(self.code, tpl, 0)
        return canonical(self.dtype, int(self.rets[0]))


@functools.lru_cache(maxsize=None)
def _snippet(op: Op, arg_dtypes: tuple[DataType, ...], dtype: DataType) -> _Snippet:
    return _Snippet(op, arg_dtypes, dtype)


def evaluate(op: Op, arg_dtypes: tuple[DataType, ...], dtype: DataType, bits: tuple[int, ...]) -> int:
    """The register bits of `op(args)` with result `dtype`, computed by the interpreter."""
    return _snippet(op, arg_dtypes, dtype)(bits)


# ------------------------------------------------------------------ qd.random (the launch ABI, qd/base/abi.py)


class Rng:
    """The draws of one thread of one task, as `qd_rand` makes them."""

    def __init__(self, base: int, tid: int) -> None:
        self.base, self.tid, self.ctr, self.key = base, tid, 0, 0

    def next_u64(self) -> int:
        if self.ctr == 0:
            self.key = mix64(self.base ^ ((self.tid * abi.RNG_TID_MIX) & _M64))
        self.ctr += 1
        return mix64((self.key + self.ctr * abi.RNG_GOLDEN) & _M64)

    def draw(self, dtype: DataType) -> int:
        r = self.next_u64()
        if dtype.is_float and dtype.bits == 64:
            return struct.unpack("<Q", struct.pack("<d", float(r >> abi.RAND_F64_SHIFT) * abi.RAND_F64_SCALE))[0]
        if dtype.is_float:
            f = np.float32(r >> abi.RAND_F32_SHIFT) * np.float32(abi.RAND_F32_SCALE)
            if dtype is T.f16:
                f = np.float32(np.float16(f))
            return int(np.array(f, np.float32).view(np.uint32))
        return canonical(dtype, r)
