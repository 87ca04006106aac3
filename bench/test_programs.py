"""Kernels of published programs on the CPU tier (issue 31), side by side with Quadrants: the table of
`bench/program_kernels.py` (ports from `tests/programs/` at their published sizes), each launch timed after a first
one compiled it (`jit="eager"`), and Quadrants 1.3.3's time for the same launch in `.venv-peers`
(`bench/_quadrants_programs.py`, one process per program; skipped visibly where that venv cannot be built).

- nbody `compute_force` (N = 3000 planets, every pair: a serial inner loop over AoS `Vector.field`s accumulating
  into the planet's own `force[i]`); mpm88's `substep` (p2g, grid, g2p in one kernel); stable_fluid's kernels at
  512 x 512; diffmpm's p2g, grid_op, g2p at its robot scene and a Tape over 32 of its steps (the gradient kernels
  run there); a training iteration of mass_spring (a Tape over its 682 steps: launch-bound).

`extra_info` has `ms` (median), the tier and `quadrants_ms`.
"""

from __future__ import annotations

import warnings

import program_kernels as pk
import pytest
from _bench import record
from _peers import run_peer

import qd

_peer: dict[str, tuple[dict | None, str]] = {}


def _quadrants(program: str) -> tuple[dict | None, str]:
    if program not in _peer:
        res, why = run_peer("_quadrants_programs.py", [program, "5"], 900)
        _peer[program] = (res["ms"] if res else None, why)
    return _peer[program]


def _kernels_ran_natively(module) -> None:
    """Skips (with the reason) where a kernel of the program last ran on another tier than the native one."""
    for name in dir(module):
        stats = getattr(getattr(module, name), "stats", None)
        if isinstance(stats, dict) and stats.get("last_tier") not in (None, "cpu"):
            pytest.skip(f"{name} last ran on {stats['last_tier']}, not the native CPU tier")


@pytest.mark.parametrize("program,launch", pk.WORKLOADS, ids=[f"{p}-{n}" for p, n in pk.WORKLOADS])
def test_program_kernel_qd(benchmark, cpu_program, program: str, launch: str) -> None:
    benchmark.group = f"{program} {launch}"
    prog = pk.PROGRAMS[program]()
    fn = prog.launches[launch]

    def once():
        fn()
        qd.sync()

    once()
    _kernels_ran_natively(prog.module)
    benchmark.extra_info["tier"] = "cpu"
    benchmark(once)
    ms = benchmark.stats.stats.median * 1e3
    benchmark.extra_info["ms"] = ms
    record(pk.workload(program, launch), "qd", ms)
    peer, why = _quadrants(program)
    if peer is None:
        benchmark.extra_info["quadrants_skipped"] = why
        warnings.warn(f"{program}: Quadrants not run side by side: {why}", stacklevel=2)
        return
    benchmark.extra_info["quadrants_ms"] = peer[launch]
    record(pk.workload(program, launch), "quadrants", peer[launch])
