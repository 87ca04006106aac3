"""The two headless scenes of the Genesis check (issue 29), run inside either venv of setup.sh.

    python scenes.py box    OUT.npz [--cache-dir DIR] [--steps 200] [--timed-steps 100] [--backend cpu]
                            [--profile STATS]
    python scenes.py franka OUT.npz ...

`box`: a plane and a 0.2 m box dropped from 1 m with euler (10, 20, 30) degrees, dt = 0.01.
`franka`: the Franka Panda MJCF that Genesis ships (xml/franka_emika_panda/panda.xml) under PD control (a joint
target held for the first half of the run, another for the second), beside a 0.1 m box falling onto the plane.

Only Genesis' public API is used, so the same file runs on Quadrants and, through the compat shim, on qd. It
records, after `scene.build()` (row 0) and after each `scene.step()` (rows 1..steps), the rigid solver's state
of every link and dof: link positions, quaternions, linear and angular velocities, qpos, dof positions,
velocities, accelerations and forces, the joint-space mass matrix `M` (the solver's `mass_mat`, as
`solver.get_mass_mat()` reads it) with its L D L^T factors (`mass_mat_L`, `mass_mat_D_inv`), the net contact force
on each link and the number of contacts. Then, `--repeats` times, it resets the scene and times `--timed-steps`
steps of the same run without recording (every kernel compiled by then), and checks that the last repeat lands on
the recorded state.

A failure (an exception at any stage) is part of the result: the .npz still holds every row recorded before it
and the timings of the finished stages, `meta_json["error"]` says at which stage (and step) and why, and the
exit status is 3.

Timings (wall = perf_counter, cpu = process_time, seconds) go into the .npz as `time_<what>_{wall,cpu}` and are
printed as one JSON line: `import` (import genesis), `init` (gs.init), `scene` (adding the entities), `build`
(scene.build()), `step1` (the first step, which compiles the step's kernels), `recorded` (all recorded steps,
recording included), `timed` (the timed steps: the fastest repeat; `timed_median` the median one). Whether
`build` is cold or warm depends on the caches: pass `--cache-dir` to point every cache (the kernel cache of
Quadrants or qd, Genesis' asset cache, numba's, and XDG_CACHE_HOME) at DIR; an empty DIR gives a cold build, a
second process on the same DIR a warm one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

FRANKA_KP = [4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0, 100.0, 100.0]
FRANKA_KV = [450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0, 10.0, 10.0]
FRANKA_FORCE = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0, 100.0, 100.0]
FRANKA_TARGET_A = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.79, 0.04, 0.04]
FRANKA_TARGET_B = [0.8, 0.2, 0.3, -1.8, -0.3, 2.2, 0.5, 0.02, 0.02]


class Clock:
    """Wall and CPU time of named stages."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.current = ""

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        self.current = name
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        self.times[f"time_{name}_wall"] = time.perf_counter() - w
        self.times[f"time_{name}_cpu"] = time.process_time() - c
        return out


def point_caches(cache_dir: str) -> None:
    """Every cache the run touches goes under cache_dir (set before genesis / quadrants / qd are imported)."""
    root = Path(cache_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = str(root / "xdg")
    os.environ["QD_OFFLINE_CACHE_FILE_PATH"] = str(root / "kernels")
    os.environ["GS_CACHE_FILE_PATH"] = str(root / "genesis")
    os.environ["NUMBA_CACHE_DIR"] = str(root / "numba")
    os.environ["HOME"] = str(root / "home")  # qd and anything else that defaults to ~/.cache
    (root / "home").mkdir(exist_ok=True)


# the box's start height; `--box-z-ulps N` raises it by N float32 steps: how far a trajectory moves for a change at
# the scale of rounding, the yardstick a qd/Quadrants difference is read against
BOX_Z = [1.0]  # the box scene's start height (`--box-z-ulps` raises it)
FRANKA_BOX_Z = [0.5]  # the Franka scene's falling box (`--box-z-ulps` raises it too)


def build_box(gs: Any, dt: float) -> tuple[Any, Callable[[int], None]]:
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt), show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    scene.add_entity(gs.morphs.Box(size=(0.2, 0.2, 0.2), pos=(0.0, 0.0, BOX_Z[0]), euler=(10.0, 20.0, 30.0)))
    return scene, lambda step: None


def build_franka(gs: Any, dt: float) -> tuple[Any, Callable[[int], None]]:
    scene = gs.Scene(sim_options=gs.options.SimOptions(dt=dt), show_viewer=False)
    scene.add_entity(gs.morphs.Plane())
    franka = scene.add_entity(gs.morphs.MJCF(file="xml/franka_emika_panda/panda.xml"))
    scene.add_entity(gs.morphs.Box(size=(0.1, 0.1, 0.1), pos=(0.45, -0.45, FRANKA_BOX_Z[0]), euler=(0.0, 15.0, 25.0)))
    state = {"gains_set": False}

    def control(step: int) -> None:
        if not state["gains_set"]:
            franka.set_dofs_kp(np.array(FRANKA_KP))
            franka.set_dofs_kv(np.array(FRANKA_KV))
            franka.set_dofs_force_range(-np.array(FRANKA_FORCE), np.array(FRANKA_FORCE))
            state["gains_set"] = True
        if step == 0:
            franka.control_dofs_position(np.array(FRANKA_TARGET_A))
        elif step == 100:
            franka.control_dofs_position(np.array(FRANKA_TARGET_B))

    return scene, control


SCENES: dict[str, Callable[[Any, float], tuple[Any, Callable[[int], None]]]] = {
    "box": build_box, "franka": build_franka}


def to_np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.array(x, dtype=np.float64, copy=True)


def snapshot(scene: Any) -> dict[str, np.ndarray]:
    """The rigid solver's state of every link and dof, as float64 arrays."""
    s = scene.sim.rigid_solver
    out = {
        "links_pos": s.get_links_pos(),
        "links_quat": s.get_links_quat(),
        "links_vel": s.get_links_vel(),
        "links_ang": s.get_links_ang(),
        "qpos": s.get_qpos(),
        "dofs_pos": s.get_dofs_position(),
        "dofs_vel": s.get_dofs_velocity(),
        "dofs_acc": s.get_dofs_acc(),
        "dofs_force": s.get_dofs_force(),
        "mass_mat": s.get_mass_mat(),
    }
    mass_L, mass_D_inv = s.get_mass_mat(decompose=True)
    out["mass_mat_L"], out["mass_mat_D_inv"] = mass_L, mass_D_inv
    out["links_contact_force"] = np.concatenate(
        [to_np(e.get_links_net_contact_force()).reshape(-1, 3) for e in s.entities], axis=0)
    # no public getter for the contact count: the collider's state holds it (per environment)
    out["n_contacts"] = np.asarray(s.collider.collider_state.n_contacts.to_numpy()).reshape(-1)
    return {k: to_np(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scene", choices=sorted(SCENES))
    p.add_argument("out", help="the .npz to write")
    p.add_argument("--cache-dir", help="point every cache here (empty: cold build; reused: warm)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--timed-steps", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5, help="timed runs of --timed-steps steps (min and median kept)")
    p.add_argument("--dt", type=float, default=0.01)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--profile", help="after the timed runs, one more under cProfile (not timed): its stats here")
    p.add_argument("--box-z-ulps", type=int, default=0,
                   help="raise the falling box's start height by N float32 steps (both scenes)")
    a = p.parse_args(argv)
    if a.cache_dir:
        point_caches(a.cache_dir)
    clock = Clock()
    rows: list[dict[str, np.ndarray]] = []
    meta: dict[str, Any] = {
        "scene": a.scene, "steps": a.steps, "timed_steps": a.timed_steps, "repeats": a.repeats, "dt": a.dt,
        "backend": a.backend, "python": sys.version.split()[0], "cache_dir": a.cache_dir or ""}
    try:
        run_scene(a, clock, rows, meta)
    except Exception as e:  # noqa: BLE001 - any failure is the finding: kept with what was recorded before it
        meta["error"] = {"stage": clock.current, "step": meta.pop("_step", None), "repeat": meta.pop("_repeat", None),
                         "type": type(e).__name__, "message": str(e)[-2000:],
                         "traceback": traceback.format_exc()[-4000:]}
        traceback.print_exc()
    data: dict[str, Any] = {k: np.stack([r[k] for r in rows]) for k in rows[0]} if rows else {}
    data.update({k: np.float64(v) for k, v in clock.times.items()})
    data["meta_json"] = np.array(json.dumps(meta))
    np.savez_compressed(a.out, **data)
    summary = {"out": a.out, **{k: v for k, v in meta.items() if k != "error"}}
    if "error" in meta:
        summary["error"] = {k: v for k, v in meta["error"].items() if k != "traceback"}
        summary["recorded_rows"] = len(rows)
    print(json.dumps({**summary, **{k: round(v, 4) for k, v in clock.times.items()}}))
    return 3 if "error" in meta else 0


def run_scene(a: argparse.Namespace, clock: Clock, rows: list[dict[str, np.ndarray]], meta: dict[str, Any]) -> None:
    """The stages of one run, appending snapshots to rows and facts to meta as they come."""

    def _import() -> Any:
        import genesis

        return genesis

    gs = clock.run("import", _import)
    import quadrants

    version = getattr(quadrants, "__version__", "?")  # a tuple in Quadrants, a string in qd
    meta.update({"quadrants": getattr(quadrants, "__file__", "?"),
                 "quadrants_version": ".".join(map(str, version)) if isinstance(version, tuple) else str(version),
                 "genesis_version": gs.__version__})
    clock.run("init", lambda: gs.init(backend=getattr(gs, a.backend), precision="32", logging_level="warning"))
    z, fz = np.float32(1.0), np.float32(0.5)
    for _ in range(a.box_z_ulps):
        z, fz = np.nextafter(z, np.float32(2.0)), np.nextafter(fz, np.float32(2.0))
    BOX_Z[0], FRANKA_BOX_Z[0] = float(z), float(fz)
    scene, control = clock.run("scene", lambda: SCENES[a.scene](gs, a.dt))
    clock.run("build", scene.build)
    s = scene.sim.rigid_solver
    meta.update({"links": [lk.name for lk in s.links], "n_dofs": int(s.n_dofs),
                 "entities": [type(e.morph).__name__ for e in s.entities]})
    rows.append(snapshot(scene))

    def first() -> None:
        meta["_step"] = 1
        control(0)
        scene.step()
        rows.append(snapshot(scene))

    def recorded() -> None:
        for i in range(1, a.steps):
            meta["_step"] = i + 1
            control(i)
            scene.step()
            rows.append(snapshot(scene))

    clock.run("step1", first)
    clock.run("recorded", recorded)

    def timed() -> None:
        for i in range(a.timed_steps):
            meta["_step"] = i + 1
            control(i)
            scene.step()

    runs: dict[str, list[float]] = {"wall": [], "cpu": []}
    for rep in range(max(a.repeats, 1)):
        meta["_repeat"] = rep + 1
        scene.reset()
        clock.run("timed", timed)
        for kind, v in runs.items():
            v.append(clock.times.pop(f"time_timed_{kind}"))
    for kind, v in runs.items():
        clock.times[f"time_timed_{kind}"] = float(np.min(v))
        clock.times[f"time_timed_median_{kind}"] = float(np.median(v))
    if a.profile:  # the steady state alone (the first steps load and compile kernels)
        import cProfile

        scene.reset()
        with cProfile.Profile() as prof:
            timed()
        prof.dump_stats(a.profile)
    replay = snapshot(scene)
    ref = rows[min(a.timed_steps, len(rows) - 1)]
    meta.pop("_step", None)
    meta.pop("_repeat", None)
    meta["replay_max_abs_diff_at_timed_steps"] = {
        k: float(np.max(np.abs(replay[k] - ref[k]), initial=0.0)) for k in ("links_pos", "links_quat", "dofs_vel")}


if __name__ == "__main__":
    sys.exit(main())
