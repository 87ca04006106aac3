"""Compares two recordings of scenes.py: trajectories quantity by quantity, then timings.

    python compare.py A.npz B.npz [--cold A_cold.npz B_cold.npz] [--tol 1e-4] [--every 20] [--summary-only]

A is the reference (Quadrants), B the candidate (qd); any two recordings of the same scene work, e.g. a cold and
a warm run of one venv (a determinism check: every difference should be 0).

For each recorded quantity (links_pos, links_quat, ..., mass_mat, ...; shape (steps + 1, ...)), at each step t:
`abs[t]` = max over elements of |A - B|; `rel[t]` = max over elements of |A - B| / max(|A|, |B|, floor), where
floor = 1e-3 times the quantity's largest magnitude over the whole run (so an element near 0, a velocity at rest
or an off-diagonal of the mass matrix, is judged against the quantity's scale, not against its own noise).
A NaN on one side only counts as an infinite difference. Printed: per quantity, the first step where rel > tol,
with the element that differs most there (link or dof named where the recording says), the largest rel and abs
difference and their steps; then a table of abs[t] every `--every` steps (and at each first step past tol); then
the timings of B over A (wall and CPU) for each stage, the build cold from --cold's recordings.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

MAIN_COLUMNS = ("links_pos", "links_quat", "links_vel", "links_ang", "dofs_vel", "mass_mat", "links_contact_force")
STAGES = ("import", "init", "scene", "build", "step1", "recorded", "timed", "timed_median")


def load(path: str) -> tuple[dict[str, np.ndarray], dict[str, float], dict]:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files if not k.startswith(("time_", "meta_"))}
        times = {k[len("time_"):]: float(z[k]) for k in z.files if k.startswith("time_")}
        meta = json.loads(str(z["meta_json"])) if "meta_json" in z.files else {}
    return arrays, times, meta


def per_step(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(abs[t], rel[t], the element-wise relative difference) as described in the module docstring."""
    n = a.shape[0]
    a2, b2 = a.reshape(n, -1).astype(np.float64), b.reshape(n, -1).astype(np.float64)
    one_nan = np.isnan(a2) != np.isnan(b2)
    d = np.abs(a2 - b2)
    d[np.isnan(a2) & np.isnan(b2)] = 0.0
    d[one_nan] = np.inf
    mag = np.fmax(np.nan_to_num(np.abs(a2), nan=0.0, posinf=0.0), np.nan_to_num(np.abs(b2), nan=0.0, posinf=0.0))
    floor = max(1e-3 * float(mag.max(initial=0.0)), 1e-30)
    rel = d / np.maximum(mag, floor)
    if not d.shape[1]:
        return np.zeros(n), np.zeros(n), rel
    return d.max(axis=1), rel.max(axis=1), rel


def element_name(q: str, shape: tuple[int, ...], flat: int, meta: dict) -> str:
    idx = np.unravel_index(flat, shape)
    links = meta.get("links") or []
    if q.startswith("links_") and links and idx[0] < len(links):
        return f"{links[idx[0]]}[{','.join(map(str, idx[1:]))}]"
    if q.startswith(("dofs_", "mass_mat", "qpos")):
        return f"{'dof' if not q.startswith('qpos') else 'q'}[{','.join(map(str, idx))}]"
    return f"[{','.join(map(str, idx))}]"


def trajectories(a: dict, b: dict, meta: dict, tol: float, every: int, summary_only: bool) -> list[str]:
    out: list[str] = []
    common = [k for k in a if k in b]
    for k in sorted(set(a) ^ set(b)):
        out.append(f"only in {'A' if k in a else 'B'}: {k}")
    rows = []
    firsts: dict[str, int] = {}
    absd_all: dict[str, np.ndarray] = {}
    n_a = next(iter(a.values())).shape[0] if a else 0
    n_b = next(iter(b.values())).shape[0] if b else 0
    if n_a != n_b and common:
        n = min(n_a, n_b)
        out.append(f"A has {n_a} rows, B {n_b}: comparing rows 0-{n - 1}")
        a = {k: v[:n] for k, v in a.items()}
        b = {k: v[:n] for k, v in b.items()}
    for q in common:
        if a[q].shape != b[q].shape:
            rows.append((q, str(a[q].shape), f"shape differs: {a[q].shape} vs {b[q].shape}", "", "", ""))
            continue
        absd, rel, rel_elem = per_step(a[q], b[q])
        absd_all[q] = absd
        over = np.nonzero(rel > tol)[0]
        first = int(over[0]) if over.size else -1
        where = ""
        if first >= 0:
            firsts[q] = first
            where = element_name(q, a[q].shape[1:], int(np.argmax(rel_elem[first])), meta)
        ir, ia = int(np.argmax(rel)), int(np.argmax(absd))
        rows.append((q, "x".join(map(str, a[q].shape[1:])), str(first) if first >= 0 else "-", where,
                     f"{rel[ir]:.2e} @{ir}", f"{absd[ia]:.2e} @{ia}"))
    head = ("quantity", "shape", f"first rel>{tol:g}", "worst element there", "max rel @step", "max abs @step")
    out += table(head, rows)
    past = sorted(firsts, key=lambda q: (firsts[q], q))
    shapes = [r[0] for r in rows if r[2].startswith("shape differs")]
    if not past and not shapes:
        exact = all(float(v.max(initial=0.0)) == 0.0 for v in absd_all.values())
        out.append(f"verdict: all {len(rows)} quantities {'identical' if exact else f'within {tol:g}'}")
    else:
        out.append(f"verdict: {len(past) + len(shapes)} of {len(rows)} quantities past {tol:g}: "
                   + ", ".join([f"{q} (step {firsts[q]})" for q in past] + [f"{q} (shape)" for q in shapes]))
    if summary_only or not absd_all:
        return out
    cols = [c for c in MAIN_COLUMNS if c in absd_all] + [c for c in absd_all if c not in MAIN_COLUMNS]
    n = next(iter(absd_all.values())).shape[0]
    steps = sorted(set(range(0, n, max(every, 1))) | {n - 1} | set(firsts.values()))
    out.append("")
    out.append("max |A - B| per step (* marks a quantity's first step past tol)")
    trows = []
    for t in steps:
        trows.append((str(t), *[f"{absd_all[c][t]:.1e}{'*' if firsts.get(c) == t else ''}" for c in cols]))
    out += table(("step", *cols), trows)
    return out


def timings(ta: dict, tb: dict, cold: tuple[dict, dict] | None, meta: dict) -> list[str]:
    rows = []

    def add(label: str, xa: dict, xb: dict, stage: str) -> None:
        for kind in ("wall", "cpu"):
            va, vb = xa.get(f"{stage}_{kind}"), xb.get(f"{stage}_{kind}")
            if va is None or vb is None:
                continue
            rows.append((f"{label} {kind}", f"{va:.3f}", f"{vb:.3f}", f"{vb / va:.2f}x" if va > 0 else "-"))

    n = meta.get("timed_steps", "?")
    names = {"build": "build (warm)" if cold else "build", "timed": f"{n} steps (fastest)",
             "timed_median": f"{n} steps (median)",
             "recorded": f"steps 2-{meta.get('steps', '?')} recorded"}
    for st in STAGES:
        add(names.get(st, st), ta, tb, st)
    if cold:
        add("build (cold)", cold[0], cold[1], "build")
        add("step1 (cold)", cold[0], cold[1], "step1")
    return table(("stage", "A s", "B s", "B/A"), rows)


def table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]

    def fmt(r: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |"

    return [fmt(head), "|" + "|".join("-" * (x + 2) for x in w) + "|", *[fmt(r) for r in rows]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--cold", nargs=2, metavar=("A_COLD", "B_COLD"), help="cold-cache recordings, for build times")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--every", type=int, default=20)
    p.add_argument("--summary-only", action="store_true", help="no per-step table")
    args = p.parse_args(argv)
    a, ta, ma = load(args.a)
    b, tb, mb = load(args.b)
    print(f"A: {args.a} ({ma.get('quadrants', '?')})")
    print(f"B: {args.b} ({mb.get('quadrants', '?')})")
    if ma.get("scene") != mb.get("scene") or ma.get("links") != mb.get("links"):
        print(f"warning: different scenes or links: {ma.get('scene')} {ma.get('links')} vs "
              f"{mb.get('scene')} {mb.get('links')}")
    for side, m in (("A", ma), ("B", mb)):
        err = m.get("error")
        if err:
            at = f" at step {err['step']}" if err.get("step") is not None else ""
            at += f" of repeat {err['repeat']}" if err.get("repeat") is not None and err.get("stage") == "timed" else ""
            print(f"{side} FAILED in stage {err.get('stage')}{at}: {err.get('type')}: {err.get('message', '')[-300:]}")
        rep = m.get("replay_max_abs_diff_at_timed_steps")
        if rep and any(v != 0 for v in rep.values()):
            print(f"note: {side}'s timed rerun after reset differs from its recording: {rep}")
    if a and b:
        print("\n".join(trajectories(a, b, ma, args.tol, args.every, args.summary_only)))
    else:
        print(f"verdict: nothing to compare ({'A' if not a else 'B'} recorded no step)")
    cold = None
    if args.cold:
        cold = (load(args.cold[0])[1], load(args.cold[1])[1])
    print()
    print("\n".join(timings(ta, tb, cold, ma)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
