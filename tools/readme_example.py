"""Runs the README's first example (the block under "## A kernel") against the `qd` this interpreter imports, and
checks its result: the installed-wheel test of `tools/build_wheels.sh`, cibuildwheel and tests/test_packaging.py."""

from __future__ import annotations

import re
import runpy
import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def example() -> str:
    """The README's first Python block."""
    return re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)[1]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:  # (a file of its own: kernels are compiled from their source file)
        path = Path(tmp) / "readme_example.py"
        path.write_text(example())
        scope = runpy.run_path(str(path), run_name="__readme__")
    np, x, y = scope["np"], scope["x"], scope["y"]
    if not np.array_equal(y, 2 * x + np.arange(8, dtype=np.float32)):
        print(f"readme_example: wrong result {y}", file=sys.stderr)
        return 1
    print(scope["qd"].__file__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
