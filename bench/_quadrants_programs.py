"""Quadrants' side of `bench/test_programs.py`, run by `.venv-peers`'s python (`bench/_peers.py`):

    python bench/_quadrants_programs.py PROGRAM ROUNDS

Prepares PROGRAM of `bench/program_kernels.py` on `quadrants.cpu` (`qd` names Quadrants, as the ports import it)
and prints one JSON line: the median milliseconds of each of its timed launches.
"""

import json
import sys

import quadrants

sys.modules["qd"] = quadrants

import program_kernels as pk  # (after `qd` names Quadrants)


def main() -> int:
    name, rounds = sys.argv[1], int(sys.argv[2])
    quadrants.init(arch=quadrants.cpu, log_level="warn", **pk.INIT)
    prog = pk.PROGRAMS[name]()
    out = {launch: pk.time_launches(prog.launches[launch], quadrants.sync, rounds) for launch in pk.LAUNCHES[name]}
    print(json.dumps({"program": name, "version": quadrants.__version__, "ms": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
