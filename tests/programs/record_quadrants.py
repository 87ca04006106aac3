"""Records what Quadrants computes for each case of `cases.py`, for `tests/test_programs.py` to compare with.

Run with the python of bench's peer venv (`bench/_peers.py` builds `.venv-peers` with `pip install quadrants`;
pin 1.3.3 there), from the repository root:

    .venv-peers/bin/python tests/programs/record_quadrants.py [case ...]

It makes `import qd` mean `import quadrants` (the programs say `import qd as ti`), initialises Quadrants on the CPU
with each case's `default_fp` (and `ad_stack_experimental_enabled=True` where Quadrants 1.3.3 needs it for reverse
mode through non-static inner loops) and its default `fast_math=True`, runs the case's driver, and writes
`data/quadrants-<version>.json`: the outputs (lists of floats), the program revisions, the Quadrants version and
options. Cases not named keep their recorded values.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import quadrants

sys.modules["qd"] = quadrants

import programs
from programs import cases

MAX_VALUES = 128  # larger outputs keep every k-th value of the flattened array (k: the output's "stride")


def _values(v: object, fp: str) -> dict:
    """{"shape", "stride", "values"}: the flattened output, every `stride`-th value of it (all of it when it has at
    most MAX_VALUES), f32 results with 9 significant digits (enough to give the f32 back)."""
    a = np.asarray(v, dtype=np.float64)
    stride = max(1, -(-a.size // MAX_VALUES))
    flat = a.ravel()[::stride]
    values = [float(f"{x:.9g}") for x in flat] if fp == "f32" else [float(x) for x in flat]
    return {"shape": list(a.shape), "stride": stride, "values": values}


def record(case: cases.Case) -> dict:
    """The outputs of `case` under Quadrants on the CPU, as lists; not what Quadrants draws with `ti.random` (its
    generator is not qd's), which the drivers return as `random.*`."""
    quadrants.init(arch=quadrants.cpu, default_fp=getattr(quadrants, case.fp), log_level="warn",
                   **case.quadrants_init)
    try:
        m = cases.load_case(case, quadrants)
        out = case.run(m)
    finally:
        quadrants.reset()
    return {k: _values(v, case.fp) for k, v in out.items() if not k.startswith("random.")}


def _dumps(data: dict) -> str:
    """JSON with one line per output array."""
    head = {k: v for k, v in data.items() if k != "cases"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + [' "cases": {']
    for n, (name, case) in enumerate(data["cases"].items()):
        lines.append(f"  {json.dumps(name)}: {{")
        lines += [f"   {json.dumps(k)}: {json.dumps(case[k])}," for k in case if k != "outputs"]
        outs = list(case["outputs"].items())
        lines.append('   "outputs": {')
        lines += [f"    {json.dumps(k)}: {json.dumps(v)}" + ("," if i < len(outs) - 1 else "") for i, (k, v) in
                  enumerate(outs)]
        lines.append("   }")
        lines.append("  }" + ("," if n < len(data["cases"]) - 1 else ""))
    lines += [" }", "}"]
    return "\n".join(lines) + "\n"


def main(names: list[str]) -> None:
    version = ".".join(str(p) for p in quadrants.__version__)
    path = HERE / "data" / f"quadrants-{version}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update({
        "quadrants": version, "arch": "cpu (x64)", "fast_math": True, "python": platform.python_version(),
        "difftaichi": programs.DIFFTAICHI_REV, "taichi": programs.TAICHI_REV,
        "recorded": time.strftime("%Y-%m-%d"), "by": "tests/programs/record_quadrants.py",
    })
    data.setdefault("cases", {})
    for name in names or list(cases.CASES):  # the `slow` tests' cases (`<name>@large`) only when named
        case = cases.ALL_CASES[name]
        t0 = time.time()
        data["cases"][name] = {"params": {k: v for k, v in case.params.items()}, "fp": case.fp,
                               "init": case.quadrants_init, "outputs": record(case)}
        print(f"{name}: {time.time() - t0:.1f} s", file=sys.stderr)
    path.parent.mkdir(exist_ok=True)
    path.write_text(_dumps(data))
    json.loads(path.read_text())
    print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
