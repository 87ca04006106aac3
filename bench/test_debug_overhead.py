"""Overhead of the kernel debugger (`qd.debug`) on launches it does not debug.

The debugger has no hook in the launch path: attaching registers a tier wrapper with the tier table
(`qd.runtime.tiers.wrap`), detaching removes it. So a program that never attaches runs the same code whether
`qd.debug` is imported or not. Measured on a small interpreter launch (64 elements):

- `not_imported`: a fresh process that never imports `qd.debug` (timed there, median reported);
- `imported`: `qd.debug` imported, no debugger attached;
- `attached_no_breakpoint`: a debugger attached whose breakpoints are elsewhere (the launch goes
  through the wrapper's check, then runs normally: the cost of an idle `python -m qd.debug`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import qd

_TIMER = r'''
import json, sys, time
import numpy as np
import qd
mode = sys.argv[1]
qd.init(arch=qd.interp, log_level="warn")
@qd.kernel
def small(x: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        x[i] = x[i] * 0.5 + 1.0
x = np.ones(64, np.float32)
if mode != "not_imported":
    import qd.debug
if mode == "attached_no_breakpoint":
    dbg = qd.debug.session(on_stop=lambda *a: "continue")
    dbg.breakpoints.append(qd.debug.Breakpoint("elsewhere.py", 1))  # matches no kernel (set unchecked)
    dbg.attach()
for _ in range(2000):
    small(x)
runs = []
for _ in range(21):
    t = time.perf_counter()
    for _ in range(2000):
        small(x)
    runs.append((time.perf_counter() - t) / 2000)
runs.sort()
print(json.dumps({"median_us": runs[len(runs) // 2] * 1e6, "debug_imported": "qd.debug" in sys.modules}))
'''


def _small():
    @qd.kernel
    def small(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            x[i] = x[i] * 0.5 + 1.0

    return small


MODES = ("not_imported", "imported", "attached_no_breakpoint")


def test_launch_overhead_fresh_processes(benchmark, tmp_path):
    """Each mode in a fresh process (so `not_imported` really never imports qd.debug): median launch
    time in µs per mode in extra_info, and the ratios to `not_imported`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    script = tmp_path / "timer.py"
    script.write_text(_TIMER)

    def run(mode: str) -> dict:
        out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env,
                             check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def all_modes() -> dict:  # interleaved, 3 processes per mode, the fastest kept (machine noise)
        runs = [{m: run(m) for m in MODES} for _ in range(3)]
        return {m: min((r[m] for r in runs), key=lambda d: d["median_us"]) for m in MODES}

    res = benchmark.pedantic(all_modes, rounds=1, iterations=1)
    assert not res["not_imported"]["debug_imported"] and res["imported"]["debug_imported"]
    base = res["not_imported"]["median_us"]
    for m in MODES:
        benchmark.extra_info[f"{m}_us"] = round(res[m]["median_us"], 3)
        benchmark.extra_info[f"{m}_ratio"] = round(res[m]["median_us"] / base, 3)
    print("\nlaunch µs:", {m: round(res[m]["median_us"], 2) for m in MODES})


@pytest.mark.parametrize("mode", ["imported", "attached_no_breakpoint"])
def test_launch_with_debug_module(benchmark, interp_program, mode):
    import qd.debug
    from qd.runtime import tiers as _tiers

    k = _small()
    x = np.ones(64, np.float32)
    k(x)
    dbg = None
    if mode == "attached_no_breakpoint":
        dbg = qd.debug.session(on_stop=lambda *a: "continue")
        dbg.breakpoints.append(qd.debug.Breakpoint("elsewhere.py", 1))  # matches no kernel (set unchecked)
        dbg.attach()
    else:
        assert _tiers.WRAPPED is None  # no hook: the plain tier
    try:
        benchmark(k, x)
    finally:
        if dbg is not None:
            dbg.detach()
    benchmark.extra_info["launch_us"] = benchmark.stats.stats.median * 1e6


def test_attached_vs_detached_interleaved(benchmark, interp_program):
    """Blocks of 500 launches, alternately with a debugger attached (breakpoints elsewhere) and detached,
    in one process: the fastest block per mode, as µs per launch (robust to a noisy machine)."""
    import time

    import qd.debug

    k = _small()
    x = np.ones(64, np.float32)
    dbg = qd.debug.session(on_stop=lambda *a: "continue")
    dbg.breakpoints.append(qd.debug.Breakpoint("elsewhere.py", 1))  # matches no kernel (set unchecked)

    def block() -> float:
        t = time.perf_counter()
        for _ in range(500):
            k(x)
        return (time.perf_counter() - t) / 500 * 1e6

    def measure() -> dict:
        best = {"detached": float("inf"), "attached": float("inf")}
        for _ in range(30):
            best["detached"] = min(best["detached"], block())
            dbg.attach()
            try:
                best["attached"] = min(best["attached"], block())
            finally:
                dbg.detach()
        return best

    k(x)
    best = benchmark.pedantic(measure, rounds=1, iterations=1)
    benchmark.extra_info.update({f"{m}_us": round(v, 3) for m, v in best.items()})
    print("\nlaunch µs (best block):", {m: round(v, 2) for m, v in best.items()})
