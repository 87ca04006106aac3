"""What the tests run of each program: its sizes, its `ti.init` options, and a driver that does what the program's
own `main` does for one training iteration (or a few frames) and returns what to compare.

`tests/test_programs.py` runs these under qd on every tier; `record_quadrants.py` runs the very same cases under
Quadrants 1.3.3 (bench's peer venv) and stores their outputs in `data/`. So this module, like the programs, uses
only the API both share, reached through the program's own `ti` (qd or Quadrants), and imports neither.

A driver calls the program's functions as its `main` / `optimize` would: the training loop for `iters` iterations
(1 or 2: an initial Tape and an update), then one more Tape at the state the loop left, as the next iteration would
run it, so that the gradients returned (`<field>.grad`) and the finite differences the test takes (`Case.loss`
runs the forward pass alone) are at the same point. Simulations without gradients start from a state drawn with
numpy (Quadrants' `ti.random` draws other numbers than qd's) after the program's own initialiser ran.
"""

from __future__ import annotations

import dataclasses
import math
import random
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import programs

Outputs = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One program at test sizes. `wrt`: (field, index prefix) pairs whose gradients the driver returns as
    `"<field>.grad"` (the sub-array at the prefix) and the test checks against central differences of `loss`."""
    name: str
    program: str
    params: dict[str, Any]
    fp: str  # "f64" / "f32": ti.init(default_fp=...), and the program's `real` where it has one
    run: Callable[[types.ModuleType], Outputs]
    loss: Callable[[types.ModuleType], float] | None = None
    wrt: tuple[tuple[str, tuple[int, ...]], ...] = ()
    has_real: bool = True  # the program declares `real = ti.f32` (difftaichi's programs)
    quadrants_init: dict[str, Any] = field(default_factory=dict)  # what Quadrants 1.3.3 needs on top


def load_case(case: Case, ti: Any) -> types.ModuleType:
    """The program of `case`, loaded fresh with its test constants, after seeding Python's and numpy's generators
    (the programs draw from both, at load time and in their loops). qd / Quadrants (`ti`) is initialised."""
    random.seed(0)
    np.random.seed(0)
    params = dict(case.params)
    if case.has_real:
        params["real"] = getattr(ti, case.fp)
    return programs.load(case.program, **params)


def _grads(m: types.ModuleType, wrt: tuple[tuple[str, tuple[int, ...]], ...]) -> Outputs:
    return {f"{name}.grad": getattr(m, name).grad.to_numpy()[prefix] for name, prefix in wrt}


# ---- difftaichi: mass_spring, rigid_body (robot controllers: optimize(), then one more Tape) ----

_CONTROLLER = (("weights1", ()), ("bias1", ()), ("weights2", ()), ("bias2", ()))


def _mass_spring(m: types.ModuleType) -> Outputs:
    m.setup_robot(*m.robots[m.robot_id]())
    losses = m.optimize(toi=True, visualize=False)
    m.clear()
    with m.ti.ad.Tape(m.loss):
        m.forward(visualize=False)
    return {"losses": losses, "loss": m.loss[None], **_grads(m, _CONTROLLER)}


def _mass_spring_loss(m: types.ModuleType) -> float:
    m.clear()
    m.forward(visualize=False)
    return m.loss[None]


def _rigid_body(m: types.ModuleType) -> Outputs:
    m.setup_robot(*m.robots[m.robot_id]())
    losses = m.optimize(toi=True, visualize=False)
    m.clear_states()
    with m.ti.ad.Tape(m.loss):
        m.forward(visualize=False)
    return {"losses": losses, "loss": m.loss[None], **_grads(m, _CONTROLLER)}


def _rigid_body_loss(m: types.ModuleType) -> float:
    m.clear_states()
    m.forward(visualize=False)
    return m.loss[None]


# ---- difftaichi: billiards ----

_BILLIARDS = (("init_x", ()), ("init_v", ()))


def _billiards(m: types.ModuleType) -> Outputs:
    losses = m.optimize()
    m.clear()
    with m.ti.ad.Tape(m.loss):
        m.forward()
    return {"losses": losses, "loss": m.loss[None], "x": m.x.to_numpy()[m.steps - 1], **_grads(m, _BILLIARDS)}


def _billiards_loss(m: types.ModuleType) -> float:
    m.clear()
    m.forward()
    return m.loss[None]


# ---- difftaichi: diffmpm (advance is grad_replaced: its gradient is advance_grad) ----

_DIFFMPM = (("weights", ()), ("bias", ()))


def _diffmpm(m: types.ModuleType) -> Outputs:
    losses = m.main()
    with m.ti.ad.Tape(m.loss):
        m.forward()
    return {"losses": losses, "loss": m.loss[None], "x": m.x.to_numpy()[m.steps - 1], **_grads(m, _DIFFMPM)}


def _diffmpm_loss(m: types.ModuleType) -> float:
    m.forward()
    return m.loss[None]


# ---- difftaichi: electric (reads x[t], v[t] in nn1(t) before advance(t) writes them) ----

_ELECTRIC = (("weight1", ()), ("bias1", ()), ("weight2", ()), ("bias2", ()))


def _electric(m: types.ModuleType) -> Outputs:
    """main() with no training iteration (its 'initial' and 'final' forward passes), then what an iteration does:
    initialize() (a new task: x[0] and the goals) and a Tape of forward(). nn1(t) then reads at x[t], v[t] the
    state the last forward pass left (for the old task), which advance(t) overwrites later in the step; the loss
    is a function of the weights with that stale state fixed (`_electric_loss` restores it before each pass)."""
    losses = m.main()
    m.initialize()
    m.stale_state = (m.x.to_numpy(), m.v.to_numpy())
    m.loss[None] = 0
    with m.ti.ad.Tape(m.loss):
        m.forward()
    return {"losses": losses, "loss": m.loss[None], **_grads(m, _ELECTRIC)}


def _electric_loss(m: types.ModuleType) -> float:
    x, v = m.stale_state
    m.x.from_numpy(x)
    m.v.from_numpy(v)
    m.loss[None] = 0
    m.forward()
    return m.loss[None]


def _accumulated_loss(m: types.ModuleType) -> float:
    """For programs whose `forward` adds into `loss` (the Tape zeroes it first)."""
    m.loss[None] = 0
    m.forward()
    return m.loss[None]


# ---- difftaichi: smoke_taichi, wave ----

def _smoke(m: types.ModuleType) -> Outputs:
    losses = m.main()
    with m.ti.ad.Tape(m.loss):
        m.forward()
    return {"losses": losses, "loss": m.loss[None], "smoke": m.smoke.to_numpy()[m.steps - 1],
            **_grads(m, (("v", (0,)),))}


def _wave(m: types.ModuleType) -> Outputs:
    losses = m.main()
    with m.ti.ad.Tape(m.loss):
        m.forward()
    return {"losses": losses, "loss": m.loss[None], "p": m.p.to_numpy()[m.steps - 1],
            **_grads(m, (("initial", ()),))}


# ---- difftaichi: volume_renderer (main's loop body, once more) ----

def _render(m: types.ModuleType) -> None:
    for view in range(m.n_views):
        m.ray_march(m.images, math.pi / m.n_views * view - math.pi / 2.0, view)
        m.compute_loss(view)


def _volume(m: types.ModuleType) -> Outputs:
    losses = m.main()
    m.clear_images()
    with m.ti.ad.Tape(m.loss):
        _render(m)
    return {"losses": losses, "loss": m.loss[None], "images": m.images.to_numpy(),
            **_grads(m, (("density", ()),))}


def _volume_loss(m: types.ModuleType) -> float:
    m.clear_images()
    m.loss[None] = 0
    _render(m)
    return m.loss[None]


# ---- Taichi: mpm88, mpm99, nbody, stable_fluid (forward simulations) ----

def _mpm88(m: types.ModuleType) -> Outputs:
    m.init()
    drawn = {"random.x": m.x.to_numpy(), "random.v": m.v.to_numpy(), "random.J": m.J.to_numpy()}
    rng = np.random.default_rng(0)
    m.x.from_numpy((rng.random((m.n_particles, 2)) * 0.4 + 0.2).astype(np.float32))
    for frame in range(m.frames):  # main() less init()
        for s in range(50):
            m.substep()
    return {**drawn, "x": m.x.to_numpy(), "v": m.v.to_numpy(), "J": m.J.to_numpy(), "C": m.C.to_numpy()}


def _mpm99(m: types.ModuleType) -> Outputs:
    m.initialize()
    drawn = {"random.x": m.x.to_numpy(), "material": m.material.to_numpy()}
    rng = np.random.default_rng(0)
    group = np.arange(m.n_particles) // m.group_size
    x = np.stack([rng.random(m.n_particles) * 0.2 + 0.3 + 0.10 * group,
                  rng.random(m.n_particles) * 0.2 + 0.05 + 0.32 * group], axis=1)
    m.x.from_numpy(x.astype(np.float32))
    for frame in range(m.frames):  # main() less initialize()
        for s in range(int(2e-3 // m.dt)):
            m.substep()
    return {**drawn, "x": m.x.to_numpy(), "v": m.v.to_numpy(), "F": m.F.to_numpy(), "C": m.C.to_numpy(),
            "Jp": m.Jp.to_numpy()}


def nbody_start(n: int, galaxy_size: float, init_vel: float) -> tuple[np.ndarray, np.ndarray]:
    """`initialize()`'s distribution, drawn with numpy: positions in a ring around (0.5, 0.5), tangential
    velocities."""
    rng = np.random.default_rng(0)
    theta = rng.random(n) * 2 * math.pi
    r = (np.sqrt(rng.random(n)) * 0.6 + 0.4) * galaxy_size
    offset = r[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    return (0.5 + offset).astype(np.float32), (np.stack([-offset[:, 1], offset[:, 0]], axis=1) * init_vel).astype(
        np.float32)


def _nbody(m: types.ModuleType) -> Outputs:
    m.initialize()
    drawn = {"random.pos": m.pos.to_numpy(), "random.vel": m.vel.to_numpy()}
    pos, vel = nbody_start(m.N, m.galaxy_size, m.init_vel)
    m.pos.from_numpy(pos)
    m.vel.from_numpy(vel)
    for frame in range(m.frames):  # main() less initialize()
        if not m.paused[None]:
            for i in range(m.substepping):
                m.compute_force()
                m.update()
    return {**drawn, "pos": m.pos.to_numpy(), "vel": m.vel.to_numpy()}


def _stable_fluid(m: types.ModuleType) -> Outputs:
    m.main()
    return {"velocity": m.velocities_pair.cur.to_numpy(), "dye": m.dyes_pair.cur.to_numpy(),
            "pressure": m.pressures_pair.cur.to_numpy(), "curl": m.velocity_curls.to_numpy()}


# Quadrants 1.3.3 refuses non-static inner loops in reverse mode without it ("Cannot use non static range in
# Backwards mode")
_ADSTACK = {"ad_stack_experimental_enabled": True}

CASES: dict[str, Case] = {c.name: c for c in [
    Case("mass_spring", "mass_spring", {"steps": 32, "max_steps": 64, "iters": 1}, "f64", _mass_spring,
         _mass_spring_loss, _CONTROLLER),
    Case("rigid_body", "rigid_body", {"steps": 48, "max_steps": 96, "iters": 1}, "f64", _rigid_body,
         _rigid_body_loss, _CONTROLLER),
    Case("billiards", "billiards", {"billiard_layers": 1, "steps": 420, "max_steps": 840, "iters": 1}, "f64",
         _billiards, _billiards_loss, _BILLIARDS, quadrants_init=_ADSTACK),
    Case("diffmpm", "diffmpm", {"n_grid": 32, "steps": 24, "max_steps": 48, "iters": 1, "vis_steps": 24}, "f64",
         _diffmpm, _diffmpm_loss, _DIFFMPM),
    Case("electric", "electric", {"steps": 48, "max_steps": 96, "seg_size": 16, "iters": 0}, "f64", _electric,
         _electric_loss, _ELECTRIC),
    Case("smoke_taichi", "smoke_taichi", {"n_grid": 32, "steps": 6, "num_iterations_gauss_seidel": 4, "iters": 2},
         "f64", _smoke, _accumulated_loss, (("v", (0,)),), quadrants_init=_ADSTACK),
    Case("smoke_taichi_cpu", "smoke_taichi_cpu", {"n_grid": 16, "steps": 6, "num_iterations_gauss_seidel": 4,
                                                  "iters": 2}, "f64", _smoke, _accumulated_loss, (("v", (0,)),),
         quadrants_init=_ADSTACK),
    Case("wave", "wave", {"n_grid": 16, "steps": 12, "max_steps": 24, "iters": 1}, "f64", _wave, _accumulated_loss,
         (("initial", ()),), quadrants_init=_ADSTACK),
    Case("volume_renderer", "volume_renderer", {"res": 16, "density_res": 8, "n_views": 2, "marching_steps": 48,
                                                "iters": 1, "learning_rate": 15 * (16 / 512) ** 2}, "f64",
         _volume, _volume_loss, (("density", ()),), quadrants_init=_ADSTACK),
    Case("mpm88", "mpm88", {"n_particles": 256, "n_grid": 32, "frames": 1}, "f32", _mpm88, has_real=False),
    Case("mpm99", "mpm99", {"n_particles": 300, "n_grid": 32, "frames": 2}, "f32", _mpm99, has_real=False),
    Case("nbody", "nbody", {"N": 64, "frames": 2}, "f32", _nbody, has_real=False),
    Case("stable_fluid", "stable_fluid", {"res": 32, "p_jacobi_iters": 20, "frames": 3, "curl_strength": 7}, "f32",
         _stable_fluid, has_real=False),
]}

# The `slow` tests' sizes: published step counts and grids where a CPU run takes seconds (diffmpm, smoke,
# stable_fluid, volume_renderer, wave: a quarter to a half of the published grid), several training iterations.
# The learning rate of volume_renderer scales with its loss, which is normalised by the image's pixel count.
_LARGE = {
    "mass_spring": {"steps": 2048 // 3, "max_steps": 4096, "iters": 3},
    "rigid_body": {"steps": 2048, "max_steps": 4096, "iters": 2},
    "billiards": {"billiard_layers": 4, "steps": 1024, "max_steps": 2048, "iters": 3},
    "diffmpm": {"n_grid": 64, "steps": 256, "max_steps": 512, "iters": 2, "vis_steps": 256},
    "electric": {"steps": 512, "max_steps": 2048, "seg_size": 256, "iters": 0},
    "smoke_taichi": {"n_grid": 64, "steps": 32, "num_iterations_gauss_seidel": 10, "iters": 3},
    "smoke_taichi_cpu": {"n_grid": 48, "steps": 32, "num_iterations_gauss_seidel": 6, "iters": 3},
    "wave": {"n_grid": 64, "steps": 128, "max_steps": 256, "iters": 3},
    "volume_renderer": {"res": 64, "density_res": 32, "n_views": 7, "marching_steps": 200, "iters": 3,
                        "learning_rate": 15 * (64 / 512) ** 2},
    "mpm88": {"n_particles": 8192, "n_grid": 128, "frames": 4},
    "mpm99": {"n_particles": 9000, "n_grid": 128, "frames": 4},
    "nbody": {"N": 1000, "frames": 2},
    "stable_fluid": {"res": 128, "p_jacobi_iters": 100, "frames": 10, "curl_strength": 7},
}

LARGE: dict[str, Case] = {f"{n}@large": dataclasses.replace(c, name=f"{n}@large", params=_LARGE[n])
                          for n, c in CASES.items()}
ALL_CASES: dict[str, Case] = {**CASES, **LARGE}
