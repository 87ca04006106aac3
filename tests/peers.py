"""The Python of the peer venv that has Quadrants installed (`.venv-peers`, built by bench/_peers.py), for tests
that compare qd with Quadrants itself. Looked for in $PEER_PYTHON, this checkout, then the main checkout of a git
worktree; tests skip, saying so, when there is none."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_REASON = ("no peer venv with Quadrants (set PEER_PYTHON, or build .venv-peers: bench/_peers.py): "
               "the comparison with Quadrants itself is skipped")


def _main_checkout() -> Path | None:
    """The main checkout when this one is a git worktree (its common git dir's parent), else None."""
    try:
        out = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=ROOT,
                             capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out).parent if out else None


@functools.lru_cache(maxsize=1)
def peer_python() -> Path | None:
    """The peer venv's python, if one exists that imports quadrants."""
    candidates = [os.environ.get("PEER_PYTHON"), ROOT / ".venv-peers/bin/python"]
    main = _main_checkout()
    if main is not None:
        candidates.append(main / ".venv-peers/bin/python")
    for c in candidates:
        if c and Path(c).is_file() and subprocess.run([str(c), "-c", "import quadrants"], capture_output=True,
                                                      timeout=300, check=False).returncode == 0:
            return Path(c)
    return None


def run_json(python: Path, code: str, cwd: Path | None = None) -> object:
    """Run `code` in the peer python; its last stdout line is JSON, returned decoded."""
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, check=True,
                         cwd=cwd)
    return json.loads(out.stdout.strip().splitlines()[-1])
