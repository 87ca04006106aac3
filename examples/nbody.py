"""qd demo: a 2-D gravitational N-body simulation (leapfrog), run on the default CPU tier.

Prints, per step, the total energy and momentum the kernels computed, how long the step took and
which tier ran the force kernel: on `qd.cpu` the first steps are interpreted while LLVM compiles
the kernels in the background, then native code takes over (same results, much faster).
Energy drifts only slightly and momentum stays constant: the integrator and the kernels are right.
Run it with `.venv/bin/python examples/nbody.py` (options: --n 512 --steps 20 --arch cpu|interp).
"""

from __future__ import annotations

import argparse
import time

import qd


def build(n: int, dt: float, eps: float):
    pos = qd.Vector.field(2, qd.f32, shape=n)
    vel = qd.Vector.field(2, qd.f32, shape=n)
    acc = qd.Vector.field(2, qd.f32, shape=n)
    mass = qd.field(qd.f32, shape=n)
    energy = qd.field(qd.f32, shape=())
    momentum = qd.Vector.field(2, qd.f32, shape=())

    @qd.kernel
    def seed():
        for i in range(n):
            r = qd.sqrt(qd.random()) * 0.5 + 0.05
            a = qd.random() * 2.0 * qd.math.pi
            pos[i] = qd.Vector([r * qd.cos(a), r * qd.sin(a)])
            speed = qd.sqrt(n * 0.25 / n / r)  # roughly circular orbits around the centre
            vel[i] = qd.Vector([-qd.sin(a), qd.cos(a)]) * speed
            mass[i] = 1.0 / n

    @qd.kernel
    def forces():
        for i in range(n):
            f = qd.Vector([0.0, 0.0])
            for j in range(n):
                d = pos[j] - pos[i]
                r2 = d.dot(d) + eps * eps
                f += mass[j] * d / (r2 * qd.sqrt(r2))
            acc[i] = f

    @qd.kernel
    def kick_drift():
        for i in range(n):
            vel[i] += 0.5 * dt * acc[i]
            pos[i] += dt * vel[i]

    @qd.kernel
    def kick():
        for i in range(n):
            vel[i] += 0.5 * dt * acc[i]

    @qd.kernel
    def measure():
        energy[None] = 0.0
        momentum[None] = qd.Vector([0.0, 0.0])
        for i in range(n):
            e = 0.5 * mass[i] * vel[i].norm_sqr()
            for j in range(n):
                if j != i:
                    d = pos[j] - pos[i]
                    e -= 0.5 * mass[i] * mass[j] / qd.sqrt(d.dot(d) + eps * eps)
            energy[None] += e
            momentum[None] += mass[i] * vel[i]

    return seed, forces, kick_drift, kick, measure, energy, momentum


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--arch", default="cpu", choices=["cpu", "interp"])
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch), random_seed=1)
    seed, forces, kick_drift, kick, measure, energy, momentum = build(args.n, dt=1e-3, eps=0.02)

    t0 = time.perf_counter()
    seed()
    forces()
    measure()
    e0 = energy[None]
    print(f"N-body: {args.n} bodies, {args.steps} leapfrog steps; set-up incl. compilation "
          f"{(time.perf_counter() - t0) * 1e3:.1f} ms; initial energy {e0:.6f}")
    for step in range(1, args.steps + 1):
        t = time.perf_counter()
        kick_drift()
        forces()
        kick()
        measure()
        ms = (time.perf_counter() - t) * 1e3
        p = momentum[None]
        print(f"step {step:3d}  energy {energy[None]: .6f}  (drift {energy[None] - e0:+.2e})  "
              f"momentum ({p[0]:+.1e}, {p[1]:+.1e})  {ms:7.1f} ms  [{forces.stats['last_tier']}]")


if __name__ == "__main__":
    main()
