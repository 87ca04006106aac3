"""The print and check-argument tables every tier returns with its code: a launch decodes the print buffer
and a failed check's recorded values with them."""

from __future__ import annotations

from qd import ir
from qd.base.abi import MAX_CHECK_ARGS  # values a failed check records (the launch ABI's status words)


def print_table(k: ir.KernelIR) -> list:
    """Per print id, in `ir.walk_kernel` order (the interpreter lowering's order too): (items: str or DataType,
    format specs)."""
    return [(tuple(x if isinstance(x, str) else x.dtype for x in s.items), s.fmts)
            for s in ir.walk_kernel(k) if isinstance(s, ir.Print)]


def print_ids(k: ir.KernelIR) -> dict[ir.Print, int]:
    """Each `Print` statement's id: its index in `print_table(k)`."""
    return {s: i for i, s in enumerate(s for s in ir.walk_kernel(k) if isinstance(s, ir.Print))}


def check_arg_table(k: ir.KernelIR) -> list:
    """Per check id, the dtypes of the values it records (None: no such Check)."""
    out: list = [None] * len(k.checks)
    for s in ir.walk_kernel(k):
        if isinstance(s, ir.Check):
            out[s.check] = tuple(a.dtype for a in s.args)
    return out


__all__ = ["MAX_CHECK_ARGS", "check_arg_table", "print_ids", "print_table"]
