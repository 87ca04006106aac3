#!/usr/bin/env bash
# The Genesis check (issue 29): both scenes on Quadrants and on qd, cold and warm, then the comparison.
# A long run (tens of minutes on 2 cores; far more while qd's build is slow): never part of the test suite.
#
#   tools/genesis_check/run.sh                 # box and franka, on quadrants and qd
#   tools/genesis_check/run.sh box             # one scene
#   SIDES=quadrants tools/genesis_check/run.sh # the Quadrants baseline only
#
# Environment: GENESIS_VENVS (venvs of setup.sh, default /work/genesis-venvs; built when missing),
# GENESIS_RUNS (where the run's folder goes, default /work/genesis-runs; the folder is $GENESIS_RUNS/<date-time>
# unless GENESIS_RUN_DIR names it), SIDES (default "quadrants qd"), GENESIS_BACKEND (default cpu),
# GENESIS_STEPS (default 200), GENESIS_TIMEOUT (seconds per scene process, default 7200), QD_ROOT (import qd
# from this checkout instead of this repository).
# Output in the run folder: <side>-<scene>-{cold,warm}.{npz,log}, compare-*.txt, summary.txt.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
QD_ROOT="${QD_ROOT:-$ROOT}"
VENVS="${GENESIS_VENVS:-/work/genesis-venvs}"
RUN="${GENESIS_RUN_DIR:-${GENESIS_RUNS:-/work/genesis-runs}/$(date +%Y%m%d-%H%M%S)}"
SIDES="${SIDES:-quadrants qd}"
BACKEND="${GENESIS_BACKEND:-cpu}"
STEPS="${GENESIS_STEPS:-200}"
TIMEOUT="${GENESIS_TIMEOUT:-7200}"
SCENES=("$@")
[[ ${#SCENES[@]} == 0 ]] && SCENES=(box franka)

case "$RUN/" in
  "$ROOT"/*) echo "run.sh: the run folder ($RUN) must lie outside the repository" >&2; exit 2 ;;
esac
if [[ ! -f "$VENVS/quadrants/.complete" || ! -f "$VENVS/qd/.complete" ]]; then
  GENESIS_VENVS="$VENVS" "$HERE/setup.sh" || exit 1
fi
mkdir -p "$RUN"
SUMMARY="$RUN/summary.txt"
echo "Genesis check $(date -Iseconds): scenes ${SCENES[*]}, sides $SIDES, backend $BACKEND, $STEPS steps," \
     "qd from $QD_ROOT ($(git -C "$QD_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'))" | tee "$SUMMARY"

run_side() {  # run_side SIDE SCENE TEMP: one process; TEMP is cold (fresh caches) or warm (the same caches again)
  local side=$1 scene=$2 temp=$3 cache="$RUN/cache-$1-$2"
  local out="$RUN/$side-$scene-$temp" rc
  [[ $temp == cold ]] && rm -rf "$cache"
  local env=(env -u PYTHONPATH)
  [[ $side == qd ]] && env=(env "PYTHONPATH=$ROOT/tools/quadrants_compat/shim:$QD_ROOT")
  echo "== $side $scene $temp: $(date +%T)" | tee -a "$SUMMARY"
  (cd "$RUN" && timeout "$TIMEOUT" "${env[@]}" "$VENVS/$side/bin/python" "$HERE/scenes.py" "$scene" "$out.npz" \
      --cache-dir "$cache" --steps "$STEPS" --backend "$BACKEND" > "$out.log" 2>&1)
  rc=$?
  if [[ $rc == 0 ]]; then
    tail -n 1 "$out.log" | "$VENVS/$side/bin/python" -c "
import json, sys
d = json.loads(sys.stdin.read())
print('   ', ', '.join(f'{k[5:]} {d[k]:.3f}' for k in d if k.startswith('time_')))" | tee -a "$SUMMARY"
  else
    { echo "   FAILED (rc $rc$([[ $rc == 124 ]] && echo ": timeout ${TIMEOUT}s")); the end of $out.log:"
      grep -v "does not have effect on the struct for" "$out.log" | tail -n 12 | sed 's/^/    /'; } | tee -a "$SUMMARY"
  fi
  return $rc
}

for scene in "${SCENES[@]}"; do
  for side in $SIDES; do
    run_side "$side" "$scene" cold && run_side "$side" "$scene" warm
  done
done

PY="$VENVS/quadrants/bin/python"
for scene in "${SCENES[@]}"; do
  for side in $SIDES; do  # determinism: a cold and a warm run of one side should agree exactly
    c="$RUN/$side-$scene-cold.npz" w="$RUN/$side-$scene-warm.npz"
    if [[ -f $c && -f $w ]]; then
      "$PY" "$HERE/compare.py" "$c" "$w" --summary-only > "$RUN/compare-$side-$scene-cold-warm.txt" 2>&1
      echo "== $scene on $side, cold run vs warm run: $(grep -h '^verdict' "$RUN/compare-$side-$scene-cold-warm.txt")" \
        | tee -a "$SUMMARY"
    fi
  done
  a="$RUN/quadrants-$scene" b="$RUN/qd-$scene"
  if [[ -f $a-warm.npz && -f $b-warm.npz ]]; then
    echo "== $scene: quadrants (A) vs qd (B)" | tee -a "$SUMMARY"
    "$PY" "$HERE/compare.py" "$a-warm.npz" "$b-warm.npz" --cold "$a-cold.npz" "$b-cold.npz" \
      2>&1 | tee "$RUN/compare-$scene.txt" | tee -a "$SUMMARY"
  fi
done
echo "run folder: $RUN" | tee -a "$SUMMARY"
