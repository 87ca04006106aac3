"""Kernels of published programs, timed the same way on qd and on Quadrants (issue 31): the table
`bench/test_programs.py` benchmarks on qd and `bench/_quadrants_programs.py` runs in `.venv-peers` on Quadrants.

Each entry loads a port from `tests/programs/` at its published size (`programs.load`), prepares it as the program's
own driver does, and names the launches to time: one program kernel, or a few launches that make one step of the
program (a Tape over some steps of diffmpm, forward and reverse; a training iteration of mass_spring). This module
imports neither qd nor Quadrants: the caller has initialised one of them (`qd` names Quadrants there, as in
`tests/programs/record_quadrants.py`) on the CPU with `INIT` before calling `prepare`.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import programs  # (the ports' loader: `tests/programs/__init__.py`; it imports neither qd nor Quadrants)

INIT: dict[str, Any] = {}  # qd.init / quadrants.init options besides the arch (the programs pick their dtypes)


@dataclass
class Program:
    """A published program prepared for timing: `launches` maps a name to a callable that makes the timed
    launches once (the caller synchronises)."""

    module: Any
    launches: dict[str, Callable[[], Any]] = field(default_factory=dict)


def _nbody() -> Program:
    m = programs.load("nbody")
    m.initialize()
    return Program(m, {"compute_force": m.compute_force})


def _mpm88() -> Program:
    m = programs.load("mpm88")
    m.init()
    return Program(m, {"substep": m.substep})


def _diffmpm() -> Program:
    """The robot scene of `main()` (its fields and particles), not trained: each timed call is one step's kernels
    forward, or a Tape over `TAPE_STEPS` steps (forward, loss, reverse: the gradient kernels)."""
    m = programs.load("diffmpm", iters=0)
    m.main()

    def p2g():
        m.clear_grid()
        m.p2g(0)

    def tape():
        with m.ti.ad.Tape(m.loss):
            m.forward(TAPE_STEPS)

    m.clear_grid()
    m.p2g(0)
    return Program(m, {"p2g": p2g, "grid_op": m.grid_op, "g2p": lambda: m.g2p(0), f"tape {TAPE_STEPS} steps": tape})


def _mass_spring() -> Program:
    """Robot 0 of mass_spring: one training iteration (`clear`, a Tape over the published 682 steps)."""
    m = programs.load("mass_spring", iters=0)
    m.setup_robot(*m.robots[m.robot_id]())
    m.optimize(toi=True, visualize=False)  # (0 iterations: the controller's weights drawn, as `main()` does)

    def iteration():
        m.clear()
        with m.ti.ad.Tape(m.loss):
            m.forward(visualize=False)

    return Program(m, {"training iteration": iteration})


def _stable_fluid() -> Program:
    """stable_fluid at its published 512 x 512 after one scripted frame: each kernel of its step on the current
    fields (pressure_jacobi: one of the step's 500 sweeps)."""
    m = programs.load("stable_fluid")
    m.main()
    v, p = m.velocities_pair, m.pressures_pair
    return Program(m, {
        "advect": lambda: m.advect(v.cur, v.cur, v.nxt),
        "divergence": lambda: m.divergence(v.cur),
        "pressure_jacobi": lambda: m.pressure_jacobi(p.cur, p.nxt),
        "subtract_gradient": lambda: m.subtract_gradient(v.nxt, p.cur),
    })


TAPE_STEPS = 32
PROGRAMS: dict[str, Callable[[], Program]] = {
    "nbody": _nbody, "mpm88": _mpm88, "diffmpm": _diffmpm, "mass_spring": _mass_spring, "stable_fluid": _stable_fluid,
}
LAUNCHES = {"nbody": ["compute_force"], "mpm88": ["substep"],
            "stable_fluid": ["advect", "divergence", "pressure_jacobi", "subtract_gradient"],
            "diffmpm": ["p2g", "grid_op", "g2p", f"tape {TAPE_STEPS} steps"], "mass_spring": ["training iteration"]}
WORKLOADS = [(p, name) for p, names in LAUNCHES.items() for name in names]


def workload(program: str, launch: str) -> str:
    return f"{program} {launch} (ms)"


def time_launches(fn: Callable[[], Any], sync: Callable[[], Any], rounds: int, min_s: float = 0.2) -> float:
    """The median milliseconds of one call of `fn` (then `sync`) over `rounds` rounds of at least `min_s` each,
    after one call that compiles."""
    fn()
    sync()
    per: list[float] = []
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            sync()
            n += 1
            if time.perf_counter() - t0 >= min_s:
                break
        per.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(per)
