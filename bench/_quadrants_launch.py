"""Quadrants' side of the CPU launch-overhead benchmark (bench/test_cpu.py), run by `.venv-peers`'s python.

    python bench/_quadrants_launch.py ARGS ROUNDS CALLS

The same kernel as qd's (`x[0] += 1` over a 1-element f32 ndarray argument), on `quadrants.cpu`, with a
Quadrants ndarray (ARGS=ndarray) or a numpy array (ARGS=numpy). Checks the count first (exit 1 when
wrong), then times ROUNDS rounds of CALLS launches each and prints one JSON line: the median and the
minimum microseconds per launch.
"""

import json
import statistics
import sys
import time

import numpy as np


import quadrants as qd


def main() -> int:
    kind, rounds, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    qd.init(arch=qd.cpu, log_level="warn")

    @qd.kernel
    def tiny(x: qd.types.ndarray(qd.f32, 1)):
        x[0] += 1

    x = qd.ndarray(qd.f32, shape=(1,)) if kind == "ndarray" else np.zeros(1, np.float32)
    for _ in range(100):
        tiny(x)
    qd.sync()
    if float(x[0] if kind == "numpy" else x.to_numpy()[0]) != 100.0:
        print("wrong count", file=sys.stderr)
        return 1
    per_call = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            tiny(x)
        per_call.append((time.perf_counter() - t) / calls * 1e6)
    qd.sync()
    print(json.dumps({"median_us": statistics.median(per_call), "min_us": min(per_call)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
