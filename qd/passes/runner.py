"""The pass runner: runs a named list of passes, verifying and printing the IR between them.

`QD_VERIFY=1` (or `verify=True`) runs `verify_kernel` on the input and after every pass, naming the
pass that broke an invariant. `QD_PRINT_AFTER=simplify,offload` (or `all`) prints the IR text to
stderr after the named passes, under a `=== <kernel>: IR after <pass> ===` header.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from qd import ir
from qd.ir_text import print_kernel
from qd.ad.adstack import lower_adstacks
from qd.passes.bounds import insert_bound_checks
from qd.passes.dce import dce
from qd.passes.demote import demote_atomics
from qd.passes.offload import offload
from qd.passes.simplify import simplify
from qd.verify import IRVerifyError, verify_kernel

Pass = Callable[[ir.KernelIR], ir.KernelIR]


def _print_after() -> set[str]:
    return {p.strip() for p in os.environ.get("QD_PRINT_AFTER", "").split(",") if p.strip()}


def _verify(k: ir.KernelIR, after: str) -> None:
    try:
        verify_kernel(k)
    except IRVerifyError as e:
        raise IRVerifyError(f"after {after}: {e}") from e


def run_passes(k: ir.KernelIR, passes: list[tuple[str, Pass]], verify: bool | None = None) -> ir.KernelIR:
    """Run `passes` (name, fn) in order on `k` and return the result (see the module docstring)."""
    if verify is None:
        verify = os.environ.get("QD_VERIFY", "") not in ("", "0")
    show = _print_after()
    if verify:
        _verify(k, "the input (no pass run yet)")
    for name, fn in passes:
        k = fn(k)
        if name in show or "all" in show:
            sys.stderr.write(f"=== {k.name}: IR after {name} ===\n{print_kernel(k)}")
            sys.stderr.flush()
        if verify:
            _verify(k, f"pass {name!r}")
    return k


def default_pipeline(config: object) -> list[tuple[str, Pass]]:
    """simplify, dce, [insert_bound_checks if debug/check_out_of_bound], lower_adstacks, offload,
    simplify, dce (the last two run per task), demote_atomics."""
    passes: list[tuple[str, Pass]] = [("simplify", simplify), ("dce", dce)]
    if getattr(config, "debug", False) or getattr(config, "check_out_of_bound", False):
        passes.append(("insert_bound_checks", insert_bound_checks))
    passes += [("lower_adstacks", lower_adstacks), ("offload", offload), ("simplify", simplify), ("dce", dce),
               ("demote_atomics", demote_atomics)]
    return passes
