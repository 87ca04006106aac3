"""The per-launch status buffer and print buffer: their layout, and turning them into exceptions,
printed lines and return values on the host (DESIGN §3, §6).

Status buffer (int64 words): [0] failure flag (the first failing thread wins by CAS), [1] check id,
[2] thread (loop index), [3] number of recorded args, [4:8] the args' raw register bits, [8] print
records dropped because the print buffer was full, [15] always 0 (`ZERO_WORD`). Print records: [print id,
thread, n, n values].
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Sequence

import numpy as np

from qd import ir
from qd.base.printf import printf_format
from qd.errors import QuadrantsAssertionError
from qd.types import dtypes as T

STATUS_WORDS = 16
PRINT_WORDS = 1 << 16
# a GPU launch slot (`qd/runtime/device_launch.py`): the status words, the print length, then the return words
PRINTLEN_WORD = 16
HEADER_WORDS = 17
# a status word nothing writes: 0 in every launch slot (the Vulkan emitter ORs it into constants a driver must not
# see as constants, `qd/gpu/spirv_float.py`)
ZERO_WORD = 15
LOOP_LIMIT = -2  # the check id recorded when an invocation reaches a driver's loop limit (Vulkan's `Caps.loop_limit`)
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


def decode(dtype: T.DataType, bits: int) -> Any:
    """A Python value from the raw register bits of a value of `dtype`."""
    bits &= 0xFFFFFFFFFFFFFFFF
    if dtype.is_float:
        if dtype.bits == 64:
            return _F64.unpack(bits.to_bytes(8, "little"))[0]
        return _F32.unpack((bits & 0xFFFFFFFF).to_bytes(4, "little"))[0]
    if dtype.is_signed and bits >> 63:
        return bits - (1 << 64)
    return bits


def decode_returns(rets: Sequence[T.DataType], words: np.ndarray) -> Any:
    vals = [decode(dt, int(words[i])) for i, dt in enumerate(rets)]
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else tuple(vals)


def format_value(dtype: T.DataType, bits: int, spec: str = "") -> str:
    """A printed kernel value (raw bits of `dtype`) formatted by `printf_format`."""
    return printf_format(decode(dtype, bits), spec, dtype.is_float)




def flush_prints(k: ir.KernelIR, prints: list, buf: np.ndarray, n: int, dropped: int) -> None:
    """Writes the launch's print records to stdout, in the order threads wrote them."""
    pos, out = 0, []
    n = min(n, len(buf))
    while pos + 3 <= n:
        pid, cnt = int(buf[pos]), int(buf[pos + 2])
        vals = iter(int(x) for x in buf[pos + 3: pos + 3 + cnt])
        items, fmts = prints[pid]
        specs = iter(fmts)
        out.append("".join(it if isinstance(it, str) else format_value(it, next(vals), next(specs, ""))
                           for it in items))
        pos += 3 + cnt
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
    if dropped:
        sys.stdout.write(f"[qd] {dropped} print records of kernel {k.name} dropped (print buffer full)\n")


def check_error(k: ir.KernelIR, check_args: list, status: np.ndarray) -> Exception:
    """The exception for the failure recorded in `status`: the check's message, file:line, thread."""
    check_id, tid, nargs = int(status[1]), int(status[2]), int(status[3])
    decl = k.checks[check_id]
    dtypes = check_args[check_id] or ()
    vals = [decode(dt, int(status[4 + i])) for i, dt in enumerate(dtypes[:nargs])]
    try:
        msg = decl.message.format(*vals, kernel=k.name, tid=tid)
    except (IndexError, KeyError, ValueError):
        msg = decl.message
    where = f"\n  at {decl.loc.file}:{decl.loc.line} (kernel {k.name}, thread {tid})" if decl.loc else ""
    return QuadrantsAssertionError(msg + where)
