#!/usr/bin/env bash
# Run Quadrants' own tests against qd. See README.md in this folder.
#
#   tools/quadrants_compat/run.sh                      # the files listed in foundation.txt
#   tools/quadrants_compat/run.sh test_types.py while  # chosen files (test_ prefix and .py optional)
#   tools/quadrants_compat/run.sh @autodiff            # the files listed in autodiff.txt
#   tools/quadrants_compat/run.sh test_types.py -- -k dtype -x   # after --: extra pytest arguments
#
# Environment: QD_QUADRANTS_MIRROR (the bare Quadrants git repo), QD_QUADRANTS_REV (default HEAD),
# QD_WANTED_ARCHS (e.g. cpu, or ^interp), QD_COMPAT_TIMEOUT (seconds per test, default 120),
# QD_COMPAT_JSON (write per-file counts and failing node ids there), PYTHON (default: the project venv),
# QD_ROOT (import qd from this checkout instead, e.g. an export of an older commit, for baselines).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MIRROR="${QD_QUADRANTS_MIRROR:-/work/.mirror/Genesis-Embodied-AI+quadrants/repo}"
REV="${QD_QUADRANTS_REV:-HEAD}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"

if ! git -C "$MIRROR" rev-parse --verify -q "$REV^{commit}" >/dev/null; then
  echo "run.sh: no Quadrants checkout at $MIRROR (set QD_QUADRANTS_MIRROR to a clone of" \
       "github.com/Genesis-Embodied-AI/quadrants)" >&2
  exit 2
fi

source "$HERE/_args.sh"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/qd_quadrants_compat.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
for f in "${files[@]}"; do
  if ! git -C "$MIRROR" show "$REV:tests/python/$f" > "$WORK/$f" 2>/dev/null; then
    echo "run.sh: $f is not in $MIRROR at $REV" >&2
    rm -f "$WORK/$f"
  fi
done

cd "$WORK"
export PYTHONPATH="$HERE/shim:${QD_ROOT:-$ROOT}${PYTHONPATH:+:$PYTHONPATH}"
set +e
"$PY" -m pytest -p qd_compat_plugin -p no:cacheprovider -o addopts="" -q -rN --tb=short --continue-on-collection-errors -o faulthandler_timeout="${QD_COMPAT_TIMEOUT:-120}" \
  --rootdir "$WORK" ${extra[@]+"${extra[@]}"} .
rc=$?
set -e
exit $rc
