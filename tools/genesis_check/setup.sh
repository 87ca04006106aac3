#!/usr/bin/env bash
# Builds the two scratch venvs of the Genesis check, outside the repository (see README.md here):
#
#   $GENESIS_VENVS/quadrants   genesis-world==1.4.5 with all its dependencies, its pinned quadrants==1.3.3 included
#   $GENESIS_VENVS/qd          genesis-world==1.4.5 and the same dependencies except quadrants, plus qd's own
#                              requirements; `import quadrants` is qd through tools/quadrants_compat/shim
#                              (run.sh / with_venv.sh put the shim and the repository root on PYTHONPATH)
#
# Both get torch==2.13.0 (Genesis imports torch but does not declare it); pip's configured sources hold a CPU
# build of that release, which keeps the CUDA wheels (gigabytes) out. Only PyPI packages, through pip.
# The qd venv is installed under the quadrants venv's `pip freeze` as constraints, so the two differ only by
# quadrants vs qd (and whatever qd's own requirements force). Re-running skips a venv that is complete; pass
# --force to rebuild both.
#
# Environment: GENESIS_VENVS (default /work/genesis-venvs), PYTHON311 (default python3.11),
# GENESIS_VERSION (default 1.4.5), TORCH_SPEC (default torch==2.13.0).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENVS="${GENESIS_VENVS:-/work/genesis-venvs}"
PY="${PYTHON311:-python3.11}"
GENESIS="genesis-world==${GENESIS_VERSION:-1.4.5}"
TORCH="${TORCH_SPEC:-torch==2.13.0}"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

case "$VENVS/" in
  "$ROOT"/*) echo "setup.sh: GENESIS_VENVS ($VENVS) must lie outside the repository ($ROOT)" >&2; exit 2 ;;
esac
mkdir -p "$VENVS"
log() { echo "setup.sh: $*" >&2; }

new_venv() {  # new_venv DIR: a fresh venv with a current pip
  rm -rf "$1"
  "$PY" -m venv "$1"
  "$1/bin/python" -m pip install -q -U pip setuptools wheel
}

# ---- (a) quadrants: genesis-world as published, with its pinned quadrants ----
QV="$VENVS/quadrants"
if [[ $FORCE == 1 || ! -f "$QV/.complete" ]]; then
  log "building $QV ($TORCH, $GENESIS with its dependencies)"
  new_venv "$QV"
  "$QV/bin/pip" install -q "$TORCH"
  "$QV/bin/pip" install -q "$GENESIS"
  "$QV/bin/python" -c "import torch, quadrants, genesis; print('quadrants', quadrants.__version__, 'torch', torch.__version__)"
  "$QV/bin/pip" freeze > "$VENVS/quadrants.freeze.txt"
  touch "$QV/.complete"
else
  log "$QV is complete (pass --force to rebuild)"
fi

# ---- (b) qd: genesis-world without quadrants, plus qd's requirements ----
XV="$VENVS/qd"
if [[ $FORCE == 1 || ! -f "$XV/.complete" ]]; then
  log "building $XV ($TORCH, $GENESIS --no-deps, its requirements minus quadrants, qd's requirements)"
  new_venv "$XV"
  "$XV/bin/pip" install -q "$TORCH"
  "$XV/bin/pip" install -q --no-deps "$GENESIS"
  reqs="$VENVS/qd.requirements.txt"
  # genesis-world's own requirements (markers evaluated here, no extras) minus quadrants, then qd's
  # [project] dependencies and its build requirements (cython, to build qd's extension modules in place)
  "$XV/bin/python" - "$ROOT/pyproject.toml" > "$reqs" <<'EOF'
import sys, tomllib
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement

out = []
for line in requires("genesis-world") or []:
    r = Requirement(line)
    if r.name.lower() == "quadrants":
        continue
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    out.append(str(r))
with open(sys.argv[1], "rb") as f:
    proj = tomllib.load(f)
out += proj["project"]["dependencies"]
out += [r for r in proj["build-system"]["requires"] if r.split(">")[0].split("=")[0] not in ("setuptools", "wheel")]
print("\n".join(out))
EOF
  cons="$VENVS/qd.constraints.txt"
  grep -viE '^(quadrants|genesis-world|torch)==' "$VENVS/quadrants.freeze.txt" > "$cons" || true
  if ! "$XV/bin/pip" install -q -r "$reqs" -c "$cons"; then
    log "notice: qd's requirements do not fit the quadrants venv's versions; installing them unconstrained"
    "$XV/bin/pip" install -q -r "$reqs"
  fi
  if "$XV/bin/pip" show quadrants >/dev/null 2>&1; then
    log "error: quadrants got installed into $XV; removing it"
    "$XV/bin/pip" uninstall -y -q quadrants
  fi
  "$XV/bin/pip" freeze > "$VENVS/qd.freeze.txt"
  touch "$XV/.complete"
else
  log "$XV is complete (pass --force to rebuild)"
fi

# qd's Cython extension modules live in the repository (built in place, git-ignored); build them with this
# venv's python when `import qd` fails there (a fresh clone), as dev.sh does for .venv.
if ! (cd "$ROOT" && "$XV/bin/python" -c "import qd" 2>/dev/null); then
  log "building qd's extension modules in place with $XV/bin/python"
  (cd "$ROOT" && "$XV/bin/python" setup.py -q build_ext --inplace)
fi
(cd /tmp && PYTHONPATH="$ROOT/tools/quadrants_compat/shim:$ROOT" "$XV/bin/python" -c \
  "import quadrants, qd, sys; assert quadrants.__spec__.origin.startswith('$ROOT'), quadrants.__file__; \
print('qd venv: import quadrants ->', quadrants.__file__)")
log "done: $QV, $XV"
