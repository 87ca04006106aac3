#!/usr/bin/env bash
# Run Quadrants' own tests against real Quadrants (the yardstick for run.sh's figures): the same file
# arguments as run.sh (@list, names, then -- and pytest arguments), Quadrants' own tests/test_utils.py and
# conftest.py, in the bench-only venv `.venv-peers` (bench/_peers.py builds it: python3.11, quadrants 1.3.3).
#
#   tools/quadrants_compat/yardstick.sh @autodiff -- --junitxml=/tmp/quadrants.xml
#
# Environment: QD_QUADRANTS_MIRROR, QD_QUADRANTS_REV (as run.sh), QD_WANTED_ARCHS (Quadrants' own
# variable; default x64, its CPU arch), PEER_PYTHON (default .venv-peers/bin/python).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MIRROR="${QD_QUADRANTS_MIRROR:-/work/.mirror/Genesis-Embodied-AI+quadrants/repo}"
REV="${QD_QUADRANTS_REV:-HEAD}"
PY="${PEER_PYTHON:-$ROOT/.venv-peers/bin/python}"
if [[ ! -x $PY ]] || ! "$PY" -c "import quadrants" 2>/dev/null; then
  echo "yardstick.sh: $PY cannot import quadrants (build .venv-peers: bash dev.sh bench, or bench/_peers.py)" >&2
  exit 2
fi

source "$HERE/_args.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/qd_quadrants_yardstick.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tests/python"
for f in tests/__init__.py tests/test_utils.py tests/pytest.ini tests/python/__init__.py tests/python/conftest.py; do
  git -C "$MIRROR" show "$REV:$f" > "$WORK/$f"
done
for f in "${files[@]}"; do
  git -C "$MIRROR" show "$REV:tests/python/$f" > "$WORK/tests/python/$f" 2>/dev/null || rm -f "$WORK/tests/python/$f"
done
# data files some tests read next to themselves
for d in expected; do
  git -C "$MIRROR" archive "$REV" "tests/python/$d" 2>/dev/null | tar -x -C "$WORK" 2>/dev/null || true
done
cd "$WORK"
export QD_WANTED_ARCHS="${QD_WANTED_ARCHS:-x64}"
set +e
"$PY" -m pytest -c tests/pytest.ini -p no:cacheprovider -q -rN --tb=no --continue-on-collection-errors \
  -o faulthandler_timeout="${QD_COMPAT_TIMEOUT:-120}" --rootdir "$WORK" ${extra[@]+"${extra[@]}"} tests/python
rc=$?
set -e
exit $rc
