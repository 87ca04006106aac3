#!/usr/bin/env bash
# The Genesis check on a lent CUDA machine (issue 29), through the device tool. That machine has no network and
# a call carries at most 64 MiB, while Genesis with its dependencies is several hundred MB: the payload is packed
# here, split into parts, and each part travels in its own call (the machine keeps /tmp while it stays warm, so
# the calls must follow one another within its idle window).
#
#   tools/genesis_check/device.sh pack             # here: .gdev1/ .gdev2/ ... (git-ignored), each under 60 MiB
#   # then, through the device tool, one call per part (carry [".gdevK"]):
#   bash tools/genesis_check/device.sh part K      # there: keep part K in /tmp/gdev
#   # then one call per scene and side (carry [".gl", ".whl"]; a cold Quadrants build of one scene takes ~2 min):
#   for m in _interp _sizer _launch; do python3 -m cython -3 qd/$m.pyx -o qd/$m.c; done
#   bash bench/gpu_machine.sh sh 'SIDES="qd quadrants" bash tools/genesis_check/device.sh run box'   # -> $OUT/run
#   (the run folder itself, with the kernel caches, stays in /tmp/grun for later calls)
#
# .gl/ must hold, besides libvulkan1, the debs of libgl1 libglx0 libglvnd0 libopengl0 libegl1: Genesis imports
# pygel3d, whose library links libGL, and pyglet (headless, through EGL).
#
# What is packed: genesis-world 1.4.5 as the local Genesis venv has it, with its asset folder reduced to what the
# two scenes load (the Franka MJCF, the plane URDF, the textures; Genesis' code is untouched), the cp312 wheels
# of the Genesis dependencies that the scenes import, Quadrants 1.3.3's wheel, and small fallback wheels
# installed there only where the machine's Python lacks the distribution. gs-madrona (an optional renderer that
# Genesis imports inside try/except) is left out.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENVS="${GENESIS_VENVS:-/work/genesis-venvs}"
STAGE="${GENESIS_DEVICE_STAGE:-/tmp/genesis-device-stage}"
PART_MB=58
# distributions the two scenes import (found with sys.modules after a Franka run), less gs-madrona, the
# machine's own (torch, numpy, scipy, sympy, networkx, pillow) and pygltflib (no wheel: copied from the venv)
DISTS="av==18.1.0 coacd==1.0.14 dataclasses-json==0.6.7 DracoPy==2.2.0 fast_simplification==0.2.0
  freetype-py==2.5.1 frozendict==2.5.1 glfw==2.11.0 lazy-loader==0.6 libigl==2.6.3 marshmallow==3.26.2
  mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 mypy_extensions==1.2.0 OpenEXR==3.5.3 py-cpuinfo==9.0.0
  PyGEL3D==0.8.2 pyglet==2.1.19 PyOpenGL==3.1.10 rtree==1.4.1 scikit-image==0.26.0 tetgen==0.8.2 trimesh==5.2.0
  typing-inspect==0.9.0 xacro==2.1.1 z3-solver==4.15.4.0 zstandard==0.25.0 numba==0.68.1"
# installed there only when missing (what Quadrants and the scenes need that such an image usually holds)
FALLBACK="colorama dill rich markdown-it-py mdurl pygments cycler kiwisolver pyparsing python-dateutil six
  matplotlib contourpy fonttools tqdm psutil pydantic pydantic_core annotated-types typing-inspection
  typing_extensions packaging PyYAML imageio tifffile"

download() {  # download DIR SPEC...: cp312 manylinux wheels, no dependencies
  local dir=$1; shift
  local plat=() n
  for n in 1 2014 2_17 2_24 2_27 2_28 2_31 2_34 2_35; do
    case $n in 1|2014) plat+=(--platform "manylinux${n}_x86_64") ;; *) plat+=(--platform "manylinux_${n}_x86_64") ;; esac
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -d "$dir" "$@"
}

pack() {  # the payload (tree/site: Genesis and its dependencies; tree/qsite: Quadrants), then the parts
  local sp site w
  sp=$(ls -d "$VENVS"/qd/lib/python3*/site-packages) || { echo "device.sh: no Genesis venv (run setup.sh)" >&2; exit 1; }
  rm -rf "$STAGE" && mkdir -p "$STAGE/whl" "$STAGE/qwhl" "$STAGE/fallback" "$STAGE/tree/site" "$STAGE/tree/qsite"
  # shellcheck disable=SC2086
  download "$STAGE/whl" $DISTS || exit 1
  download "$STAGE/qwhl" quadrants==1.3.3 || exit 1
  for w in $FALLBACK; do download "$STAGE/fallback" "$w" || exit 1; done
  site="$STAGE/tree/site"
  for w in "$STAGE"/whl/*.whl; do unzip -q -o "$w" -d "$site"; done
  unzip -q -o "$STAGE"/qwhl/*.whl -d "$STAGE/tree/qsite"
  cp -r "$sp/pygltflib" "$sp/genesis" "$sp/genesis_world-1.4.5.dist-info" "$site/"
  find "$site/genesis" -name __pycache__ -prune -exec rm -rf {} +
  rm -rf "$site/genesis/assets/meshes"
  find "$site/genesis/assets/xml" -mindepth 1 -maxdepth 1 ! -name franka_emika_panda -exec rm -rf {} +
  find "$site/genesis/assets/urdf" -mindepth 1 -maxdepth 1 ! -name plane -exec rm -rf {} +
  tar -C "$STAGE/tree" -cf - site qsite | xz -T0 -9 > "$STAGE/payload.tar.xz" || exit 1
  split_parts
}

split_parts() {  # .gdev1/ .gdev2/ ...: the payload in pieces, the fallback wheels where they fit
  rm -rf "$ROOT"/.gdev[0-9]*
  (cd "$STAGE" && rm -f part.* && split -b "${PART_MB}M" -d payload.tar.xz part.)
  local k=1 p
  for p in "$STAGE"/part.*; do
    mkdir -p "$ROOT/.gdev$k" && mv "$p" "$ROOT/.gdev$k/"
    grep -qx "/.gdev$k/" "$ROOT/.git/info/exclude" 2>/dev/null || echo "/.gdev$k/" >> "$ROOT/.git/info/exclude"
    k=$((k + 1))
  done
  local last=$((k - 1)) fb
  fb=$(du -cm "$STAGE"/fallback/*.whl | tail -1 | cut -f1)
  if (( $(du -sm "$ROOT/.gdev$last" | cut -f1) + fb > 60 )); then
    last=$k
    mkdir -p "$ROOT/.gdev$last"
    grep -qx "/.gdev$last/" "$ROOT/.git/info/exclude" || echo "/.gdev$last/" >> "$ROOT/.git/info/exclude"
  fi
  cp "$STAGE"/fallback/*.whl "$ROOT/.gdev$last/"
  du -sh "$ROOT"/.gdev[0-9]*
}

part() {  # part K: keep what .gdevK carried
  mkdir -p /tmp/gdev && cp ".gdev$1"/* /tmp/gdev/ && ls -la /tmp/gdev
}

fake_venv() {  # fake_venv NAME PATHS: $VENVS/NAME/bin/python = this machine's python3 with PATHS after run.sh's
  mkdir -p "/tmp/gvenvs/$1/bin"
  printf '#!/bin/sh\nPYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}%s" exec python3 "$@"\n' "$2" > "/tmp/gvenvs/$1/bin/python"
  chmod +x "/tmp/gvenvs/$1/bin/python"
  touch "/tmp/gvenvs/$1/.complete"
}

unpack() {  # the parts into /tmp/gdev/{site,qsite}; the fallback wheels the machine lacks into site
  if [[ ! -d /tmp/gdev/site ]]; then
    cat /tmp/gdev/part.* | xz -d | tar -C /tmp/gdev -xf - || exit 1
    local have w name
    have=$(python3 -m pip list --format=freeze 2>/dev/null | sed 's/==.*//' | tr 'A-Z_.' 'a-z--')
    for w in /tmp/gdev/*.whl; do
      name=$(basename "$w" | sed 's/-[0-9].*//' | tr 'A-Z_.' 'a-z--')
      grep -qx "$name" <<< "$have" || python3 -m pip install -q --no-index --no-deps --no-compile \
        --target /tmp/gdev/site "$w"
    done
  fi
}

run() {  # run SCENE...: unpack, then both sides on cuda (this shell has gpu_machine.sh's set-up: qd built)
  unpack
  # the quadrants side must not see qd's tree (gpu_machine.sh puts it on PYTHONPATH): run.sh unsets it
  fake_venv quadrants /tmp/gdev/qsite:/tmp/gdev/site
  fake_venv qd "/tmp/gdev/site:/tmp/site"
  export NUMBA_CACHE_DIR=/tmp/numba PYGLET_HEADLESS=1
  # the run folder stays on the machine (its kernel caches serve later calls); what comes back is copied to $OUT
  local dir=/tmp/grun rc
  GENESIS_VENVS=/tmp/gvenvs GENESIS_RUN_DIR="$dir" GENESIS_BACKEND=cuda GENESIS_STEPS="${GENESIS_STEPS:-200}" \
    GENESIS_TIMEOUT="${GENESIS_TIMEOUT:-400}" bash "$HERE/run.sh" "$@"
  rc=$?
  mkdir -p "$OUT/run" && cp "$dir"/*.npz "$dir"/*.log "$dir"/*.txt "$OUT/run/" 2>/dev/null
  return $rc
}

probe() {  # probe SCENE: qd alone on cuda: a cold run (under py-spy where .gdevtools/py-spy was carried), then warm
  # runs profiled (scenes.py --profile) after 10 and after 200 recorded steps -> $OUT/probe
  unpack
  local py=(env "PYTHONPATH=/tmp/gdev/site:/tmp/site:$ROOT/tools/quadrants_compat/shim:$ROOT" python3)
  local out="$OUT/probe" cache=/tmp/gprobe-cache scene=$1 spy=()
  export NUMBA_CACHE_DIR=/tmp/numba PYGLET_HEADLESS=1
  mkdir -p "$out" && rm -rf "$cache"
  [[ -x "$ROOT/.gdevtools/py-spy" ]] && spy=("$ROOT/.gdevtools/py-spy" record -s -f raw -r 40 -o "$out/cold.spy" --)
  (cd /tmp && timeout 400 "${spy[@]}" "${py[@]}" "$HERE/scenes.py" "$scene" "$out/cold.npz" --cache-dir "$cache" \
     --backend cuda --steps 20 --repeats 3 > "$out/cold.log" 2>&1)
  if [[ ${#spy[@]} -gt 0 ]] && ! grep -q '^{"out"' "$out/cold.log"; then  # (py-spy refused: no ptrace there)
    rm -rf "$cache"
    (cd /tmp && timeout 400 "${py[@]}" "$HERE/scenes.py" "$scene" "$out/cold.npz" --cache-dir "$cache" \
       --backend cuda --steps 20 --repeats 3 > "$out/cold.log" 2>&1)
  fi
  local n
  for n in 10 200; do
    (cd /tmp && timeout 300 "${py[@]}" "$HERE/scenes.py" "$scene" "$out/warm$n.npz" --cache-dir "$cache" \
       --backend cuda --steps $n --repeats 5 --profile "$out/warm$n.prof" > "$out/warm$n.log" 2>&1)
  done
  grep -h '^{"out"' "$out"/*.log | cut -c1-2000
}

ktimes() {  # ktimes SCENE: per-kernel times of the timed steps (kernel_times.py) on cuda, qd then Quadrants, cold
  # caches -> $OUT/ktimes/{qd,quadrants}.json and the comparison
  unpack
  local out="$OUT/ktimes" scene=$1 side
  export NUMBA_CACHE_DIR=/tmp/numba PYGLET_HEADLESS=1
  mkdir -p "$out"
  for side in qd quadrants; do
    local path="/tmp/gdev/site:/tmp/site:$ROOT/tools/quadrants_compat/shim:$ROOT"
    [[ $side == quadrants ]] && path=/tmp/gdev/qsite:/tmp/gdev/site
    rm -rf "/tmp/kt-$side"
    (cd /tmp && timeout 420 env -u PYTHONPATH "PYTHONPATH=$path" python3 "$HERE/kernel_times.py" "$out/$side.json" \
       "$scene" "$out/$side.npz" --cache-dir "/tmp/kt-$side" --backend cuda --steps 20 --repeats 5 \
       > "$out/$side.log" 2>&1)
    grep -h '^{"out"' "$out/$side.log" | grep -o '"time_[a-z1_]*wall": [0-9.]*' | tr '\n' ' '; echo " ($side)"
  done
  python3 "$HERE/kernel_times.py" --compare "$out/quadrants.json" "$out/qd.json" | tee "$out/compare.txt"
}

cmd=${1:-}; shift || true
case $cmd in
  pack) pack ;;
  split) split_parts ;;
  part) part "$@" ;;
  unpack) unpack ;;
  run) run "$@" ;;
  probe) probe "$@" ;;
  ktimes) ktimes "$@" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
