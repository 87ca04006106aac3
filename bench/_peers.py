"""Peers that cannot share qd's venv (Quadrants pins its own numpy and Python): a bench-only venv.

`ensure_peer_venv()` creates `.venv-peers` (git-ignored) once with `python3.11 -m venv` and installs
`quadrants` into it with its own pip (the configured package index, nothing else); it returns that venv's
python, or `(None, reason)` so that a benchmark can skip its peer part visibly. `run_peer(script, ...)`
runs a peer script there as a subprocess and returns the JSON it printed last.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv-peers"
PACKAGE = "quadrants"

_cached: tuple[str | None, str] | None = None


def _python() -> Path:
    return VENV / "bin" / "python"


def _has_package(py: Path) -> bool:
    return subprocess.run([str(py), "-c", f"import {PACKAGE}"], capture_output=True, timeout=120).returncode == 0


def ensure_peer_venv() -> tuple[str | None, str]:
    """(python of `.venv-peers`, "") once it imports quadrants, else (None, why not). Builds it once."""
    global _cached
    if _cached is not None:
        return _cached
    if os.environ.get("QD_BENCH_NO_PEERS"):
        _cached = (None, "QD_BENCH_NO_PEERS is set")
        return _cached
    py = _python()
    try:
        if py.exists() and _has_package(py):
            _cached = (str(py), "")
            return _cached
        base = shutil.which("python3.11")
        if base is None:
            _cached = (None, "python3.11 not found: cannot build .venv-peers for quadrants")
            return _cached
        if not py.exists():
            r = subprocess.run([base, "-m", "venv", str(VENV)], capture_output=True, text=True, timeout=300)
            if r.returncode:
                _cached = (None, f"python3.11 -m venv .venv-peers failed: {r.stderr.strip()[-300:]}")
                return _cached
        r = subprocess.run([str(py), "-m", "pip", "install", "-q", PACKAGE], capture_output=True, text=True,
                           timeout=900)
        if r.returncode or not _has_package(py):
            _cached = (None, f"pip install {PACKAGE} into .venv-peers failed: {r.stderr.strip()[-300:]}")
            return _cached
    except (OSError, subprocess.SubprocessError) as e:
        _cached = (None, f".venv-peers: {e}")
        return _cached
    _cached = (str(py), "")
    return _cached


def run_peer(script: str, args: list[str], timeout: float) -> tuple[dict | None, str]:
    """Runs bench/<script> with the peer venv's python: (its last JSON line, "") or (None, why not)."""
    py, why = ensure_peer_venv()
    if py is None:
        return None, why
    try:
        r = subprocess.run([py, str(Path(__file__).resolve().parent / script), *args], capture_output=True,
                           text=True, timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return None, f"{script} {' '.join(args)} took over {timeout:.0f} s"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        return None, f"{script} {' '.join(args)} failed (rc {r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}"
    return json.loads(lines[-1]), ""
