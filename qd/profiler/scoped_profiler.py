"""`qd.profiler`'s scoped profiler: where the host time of kernel compiles went, per kernel and phase.

Always on, as Quadrants'. Quadrants prints its C++ scopes (passes by name, LLVM emission) as a tree per thread;
qd prints one block per kernel (its Python name; its `kernel.grad` and other instances count under it) with the
phases `qd/base/scoped_profiler.py` records: frontend, autodiff, passes, codegen per tier; each
with its total, share of the kernel's total and `[count x mean]` (one count per instance compiled).
"""

from __future__ import annotations

from qd.base import scoped_profiler as _scoped


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:10.3f} ms"


def scoped_table(totals: dict[tuple[str, str], tuple[int, float]]) -> str:
    """The printed form of `totals` ((kernel, phase) -> (count, seconds)), kernels in order of first compile."""
    kernels: dict[str, list[tuple[str, int, float]]] = {}
    for (kernel, phase), (count, seconds) in totals.items():
        kernels.setdefault(kernel, []).append((phase, count, seconds))
    rule = "=" * 72
    lines = [rule, "Scoped profiler: host time of kernel compiles, per kernel and phase", rule]
    for kernel, phases in kernels.items():
        total = sum(s for _, _, s in phases)
        lines.append(f"{kernel:<38}{_ms(total)}")
        for phase, count, seconds in phases:
            share = 100.0 * seconds / total if total > 0 else 0.0
            lines.append(f"    {phase:<34}{_ms(seconds)} {share:6.2f}%  [{count} x {seconds * 1e3 / count:.3f} ms]")
    grand = sum(s for _, s in totals.values())
    lines += [rule, f"{'total (' + str(len(kernels)) + ' kernels)':<38}{_ms(grand)}", rule]
    return "\n".join(lines)


def print_scoped_profiler_info() -> None:
    """Prints the host time spent compiling each kernel, by phase (frontend, autodiff, passes, codegen)."""
    print(scoped_table(_scoped.totals()))


def clear_scoped_profiler_info() -> None:
    """`qd.profiler.clear_scoped_profiler_info()`: drop the kernel compile times recorded so far, so the next
    `print_scoped_profiler_info()` shows only compiles after this call. The scoped profiler is always on; this
    does not turn it off."""
    _scoped.clear()


__all__ = ["clear_scoped_profiler_info", "print_scoped_profiler_info"]
