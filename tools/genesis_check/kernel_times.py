"""Per-kernel wall time of a Genesis scene's timed steps, on whichever side runs it (qd through the compat shim, or
Quadrants): which kernels make one side's step slower than the other's (issue 29).

    python kernel_times.py OUT.json scenes.py-ARGS...     # e.g. OUT.json franka /tmp/x.npz --cache-dir DIR
    python kernel_times.py --compare A.json B.json         # the kernels side by side, largest difference first

Every kernel call during scenes.py's `timed` stage is timed with a synchronisation after it (so asynchronous GPU
launches are charged to their kernel), keyed by the kernel's Python name; the times add the sync's own cost.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _kernel_class() -> tuple[type, Any]:
    """The Kernel class whose `__call__` every launch goes through, and the sync function of the running side."""
    import quadrants

    if "quadrants_compat" in (quadrants.__file__ or ""):  # (the compat shim: qd runs it)
        from qd.runtime.kernel import Kernel
    else:
        from quadrants.lang.kernel_impl import Kernel
    return Kernel, quadrants.sync


def record(out: str, argv: list[str]) -> int:
    import scenes

    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    state = {"on": False, "patched": False}

    def patch() -> None:
        kernel_cls, sync = _kernel_class()
        original = kernel_cls.__call__

        def timed_call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not state["on"]:
                return original(self, *args, **kwargs)
            t = time.perf_counter()
            r = original(self, *args, **kwargs)
            sync()
            row = totals[getattr(getattr(self, "func", None) or getattr(self, "fn", None), "__name__", repr(self))]
            row[0] += 1
            row[1] += time.perf_counter() - t
            return r

        kernel_cls.__call__ = timed_call
        state["patched"] = True

    run = scenes.Clock.run

    def clock_run(self: Any, name: str, fn: Any) -> Any:
        if not state["patched"] and name == "init":
            out_ = run(self, name, fn)
            patch()
            return out_
        state["on"] = name == "timed"
        try:
            return run(self, name, fn)
        finally:
            state["on"] = False

    scenes.Clock.run = clock_run
    rc = scenes.main(argv)
    Path(out).write_text(json.dumps({k: {"calls": v[0], "seconds": v[1]} for k, v in totals.items()}, indent=1))
    return rc


def compare(a_path: str, b_path: str) -> int:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    names = sorted(set(a) | set(b), key=lambda n: -abs(b.get(n, {}).get("seconds", 0) - a.get(n, {}).get("seconds", 0)))
    print(f"{'kernel':48} {'calls A':>8} {'A ms':>9} {'calls B':>8} {'B ms':>9} {'B/A':>6}")
    for n in names:
        ca, sa = a.get(n, {}).get("calls", 0), 1e3 * a.get(n, {}).get("seconds", 0.0)
        cb, sb = b.get(n, {}).get("calls", 0), 1e3 * b.get(n, {}).get("seconds", 0.0)
        ratio = f"{sb / sa:6.2f}" if sa else "     -"
        print(f"{n[:48]:48} {ca:8d} {sa:9.2f} {cb:8d} {sb:9.2f} {ratio}")
    ta = sum(v["seconds"] for v in a.values())
    tb = sum(v["seconds"] for v in b.values())
    print(f"{'total':48} {'':8} {1e3 * ta:9.2f} {'':8} {1e3 * tb:9.2f} {tb / ta if ta else 0:6.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(record(sys.argv[1], sys.argv[2:]))
