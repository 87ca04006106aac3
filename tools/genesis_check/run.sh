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
# from this checkout instead of this repository), GENESIS_BASELINE (a run folder whose quadrants-<scene>-*.npz
# serve as the reference when this run has none, e.g. SIDES=qd; timings are then not side by side).
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
QD_REV="$(git -C "$QD_ROOT" rev-parse --short HEAD 2>/dev/null || cat "$QD_ROOT/.commit" 2>/dev/null || echo '?')"
SUMMARY="$RUN/summary.txt"
echo "Genesis check $(date -Iseconds): scenes ${SCENES[*]}, sides $SIDES, backend $BACKEND, $STEPS steps," \
     "qd from $QD_ROOT ($QD_REV)" | tee "$SUMMARY"

run_side() {  # run_side SIDE SCENE TEMP: one process; TEMP is cold (fresh caches) or warm (the same caches again)
  local side=$1 scene=$2 temp=$3 cache="$RUN/cache-$1-$2"
  local out="$RUN/$side-$scene-$temp" rc
  [[ $temp == cold ]] && rm -rf "$cache"
  rm -f "$out.stage"
  local env=(env -u PYTHONPATH)
  [[ $side == qd ]] && env=(env "PYTHONPATH=$ROOT/tools/quadrants_compat/shim:$QD_ROOT")
  echo "== $side $scene $temp: $(date +%T)" | tee -a "$SUMMARY"
  (cd "$RUN" && timeout "$TIMEOUT" "${env[@]}" "$VENVS/$side/bin/python" "$HERE/scenes.py" "$scene" "$out.npz" \
      --cache-dir "$cache" --steps "$STEPS" --backend "$BACKEND" > "$out.log" 2>&1)
  rc=$?
  if [[ $rc == 0 || $rc == 3 ]]; then  # 3: scenes.py failed at some stage but saved what it had
    grep '^{"out"' "$out.log" | tail -n 1 | "$VENVS/$side/bin/python" -c "
import json, sys
d = json.loads(sys.stdin.read())
print('   ', ', '.join(f'{k[5:]} {d[k]:.3f}' for k in d if k.startswith('time_')))
e = d.get('error')
if e:
    at = f\" at step {e['step']}\" if e.get('step') is not None else ''
    at += f\" of repeat {e['repeat']}\" if e.get('repeat') is not None and e['stage'] == 'timed' else ''
    print(f\"    FAILED in stage {e['stage']}{at} ({d.get('recorded_rows')} rows recorded): {e['type']}: \"
          f\"{e['message'][-400:]}\")
    open('$out.stage', 'w').write(e['stage'])" | tee -a "$SUMMARY"
  fi
  if [[ $rc != 0 ]]; then
    { echo "   FAILED (rc $rc$([[ $rc == 124 ]] && echo ": timeout ${TIMEOUT}s")); the end of $out.log:"
      grep -v "does not have effect on the struct for" "$out.log" | tail -n 12 | sed 's/^/    /'; } | tee -a "$SUMMARY"
  fi
  return $rc
}

built() {  # built SIDE SCENE: the cold run got past scene.build() (so a warm run means something)
  local stage; stage=$(cat "$RUN/$1-$2-cold.stage" 2>/dev/null || echo none)
  [[ -f "$RUN/$1-$2-cold.npz" && ! " import init scene build " =~ " $stage " ]]
}

for scene in "${SCENES[@]}"; do
  for side in $SIDES; do
    run_side "$side" "$scene" cold
    built "$side" "$scene" && run_side "$side" "$scene" warm
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
  [[ ! -f $a-warm.npz && -n ${GENESIS_BASELINE:-} ]] && a="$GENESIS_BASELINE/quadrants-$scene"
  bw="$b-warm.npz"
  [[ -f $bw ]] || bw="$b-cold.npz"  # a qd run that failed before its warm run: compare what it recorded
  if [[ -f $a-warm.npz && -f $bw ]]; then
    echo "== $scene: quadrants (A, $a-*) vs qd (B, $bw)" | tee -a "$SUMMARY"
    "$PY" "$HERE/compare.py" "$a-warm.npz" "$bw" --cold "$a-cold.npz" "$b-cold.npz" \
      2>&1 | tee "$RUN/compare-$scene.txt" | tee -a "$SUMMARY"
  fi
done
echo "run folder: $RUN" | tee -a "$SUMMARY"
