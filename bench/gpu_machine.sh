#!/bin/bash
# Set up a lent GPU machine (no network) for qd and Quadrants, then run STEP... From the repository root, with
# these carried (git-ignored): .gl/ (libvulkan1 .deb), .whl/ (cp312 wheels: vulkan, cffi, pycparser, quadrants,
# pytest-xdist, ...), qd/_interp.c qd/_sizer.c qd/_launch.c (the Cython output of a local build, compiled here
# with gcc).
#   bash bench/gpu_machine.sh bench        # bench/_gpu_workloads.py for qd and Quadrants on vulkan -> $OUT
#                                          # (QD_BENCH_ARCH=cuda: on CUDA; the compat step too)
#   bash bench/gpu_machine.sh tests ARGS   # qd's test suite on vulkan (pytest ARGS) -> $OUT/tests.log
#   bash bench/gpu_machine.sh variants "QD_VULKAN_UNROLL=1" ...   # qd's W1 W2 LAUNCH under each environment
#   bash bench/gpu_machine.sh probe        # where the time of a launch goes
#   bash bench/gpu_machine.sh firstcall    # a new kernel's first call, cold then warm (bench/_gpu_first_call.py)
#   bash bench/gpu_machine.sh fcprofile    # qd's first call, cold then warm, profiled
#   bash bench/gpu_machine.sh sh 'CMDS'    # shell commands in this set-up; `step NAME ARGS` among them runs a step
#                                          # (several measurements in one call, set up once)
# .cuda/libdevice.10.bc (carried, git-ignored) serves the CUDA tier where the machine has no CUDA toolkit.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
# NVIDIA's OpenCL driver, registered for the OpenCL loader where the image lists only PoCL (qd.opencl picks the GPU)
NV_OPENCL=$(ldconfig -p | grep -o "/[^ ]*libnvidia-opencl.so.1" | head -1)
[ -n "$NV_OPENCL" ] && [ ! -f /etc/OpenCL/vendors/nvidia.icd ] && mkdir -p /etc/OpenCL/vendors && echo "$NV_OPENCL" > /etc/OpenCL/vendors/nvidia.icd
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$(pwd) PYTHONUNBUFFERED=1
# bytecode compiled once, outside the copied tree: first-call timings as for an installed package
export PYTHONPYCACHEPREFIX=/tmp/qd_pyc
python3 -m compileall -q qd bench /tmp/site >/dev/null 2>&1
PYINC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
NPINC=$(python3 -c "import numpy;print(numpy.get_include())")
EXT=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
for m in _interp _sizer _launch; do
  [ -f qd/$m$EXT ] || gcc -shared -fPIC -O3 -fopenmp -fno-strict-aliasing -w -DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION \
    -I$NPINC -Iqd -I$PYINC qd/$m.c -o qd/$m$EXT -lm || exit 1
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# libdevice for the CUDA tier's math: the toolkit's when the machine has one, else a carried copy (.cuda/)
[ -f .cuda/libdevice.10.bc ] && [ ! -d /usr/local/cuda/nvvm/libdevice ] && export QD_LIBDEVICE=$(pwd)/.cuda/libdevice.10.bc
python3 -c "from qd.gpu.vulkan import Device; d = Device(); print(d.name, d.features)" || echo "gpu_machine.sh: no Vulkan device here; the vulkan steps will skip"
step() {
local step=$1; shift
case $step in
  variants)  # qd alone under several environments, one argument each ("QD_VULKAN_UNROLL=1 QD_VULKAN_GROUPS=2048,8192")
    for v in "$@"; do
      echo "== $v"; env $v timeout 150 python3 bench/_gpu_workloads.py qd vulkan ${QD_WORKLOADS:-W1 W2 LAUNCH} \
        2>/dev/null | tail -1
    done ;;
  probe)  # where a launch's time goes (bench/_gpu_probe.py)
    timeout 200 python3 bench/_gpu_probe.py vulkan 2>&1 | grep -v '^$' | cut -c1-150 ;;
  qd)  # qd alone (workload names as arguments), twice: run-to-run variation
    for r in 1 2; do timeout 120 python3 bench/_gpu_workloads.py qd ${QD_BENCH_ARCH:-vulkan} "$@" 2>/dev/null | tail -1; done ;;
  bench)
    for lib in qd quadrants; do
      timeout 280 python3 bench/_gpu_workloads.py $lib ${QD_BENCH_ARCH:-vulkan} "$@" > $OUT/$lib.json 2> $OUT/$lib.log
      echo "$lib rc=$?"; tail -2 $OUT/$lib.log; cat $OUT/$lib.json
    done ;;
  compat)  # Quadrants' autodiff/adstack/BufferView files (tools/quadrants_compat/autodiff.txt, or QD_COMPAT_FILES)
           # on qd vulkan (QD_BENCH_ARCH=cuda: cuda), xdist
    rm -rf /tmp/qdc && mkdir -p /tmp/qdc
    for f in ${QD_COMPAT_FILES:-$(sed 's/#.*//' tools/quadrants_compat/autodiff.txt)}; do cp .qtests/tests/python/$f /tmp/qdc/; done
    ROOT=$(pwd); cd /tmp/qdc
    PYTHONPATH=$ROOT/tools/quadrants_compat/shim:$ROOT:/tmp/site QD_WANTED_ARCHS=${QD_BENCH_ARCH:-vulkan} QD_COMPAT_TIMEOUT=200 \
      timeout ${QD_STEP_TIMEOUT:-500} python3 -m pytest -p qd_compat_plugin -p no:cacheprovider -o addopts="" -q -rN --tb=line -n ${1:-8} ${QD_COMPAT_PYTEST:-} \
      --rootdir /tmp/qdc --junitxml=$OUT/qd_vulkan.xml . > $OUT/compat.log 2>&1
    echo "rc=$?"; grep -A40 "per-file counts" $OUT/compat.log | head -40; cd $ROOT ;;
  firstcall)  # the first call of a new kernel, cold (empty caches) then warm, qd and Quadrants on $QD_BENCH_ARCH
    for lib in qd quadrants; do
      for r in $(seq ${QD_FC_COLD:-1}); do  # cold runs (QD_FC_COLD of them), each on an empty cache
        rm -rf /tmp/fc_$lib
        CUDA_CACHE_DISABLE=1 timeout 120 python3 bench/_gpu_first_call.py $lib ${QD_BENCH_ARCH:-vulkan} /tmp/fc_$lib 2>/dev/null | tail -1
      done
      for r in $(seq ${QD_FC_WARM:-1}); do  # warm runs (QD_FC_WARM of them)
        timeout 120 python3 bench/_gpu_first_call.py $lib ${QD_BENCH_ARCH:-vulkan} /tmp/fc_$lib 2>/dev/null | tail -1
      done
    done ;;
  sh) eval "$*" ;;  # `step NAME ARGS` inside runs another step
  fcprofile)  # where qd's first call goes, cold then warm: profiles in $OUT/fc_cold.txt, $OUT/fc_warm.txt
    rm -rf /tmp/fc_p
    CUDA_CACHE_DISABLE=1 QD_PROFILE=${QD_PROFILE:-cumulative} timeout 120 python3 bench/_gpu_first_call.py qd ${QD_BENCH_ARCH:-vulkan} /tmp/fc_p 2>$OUT/fc_cold.txt | tail -1
    QD_PROFILE=${QD_PROFILE:-cumulative} timeout 120 python3 bench/_gpu_first_call.py qd ${QD_BENCH_ARCH:-vulkan} /tmp/fc_p 2>$OUT/fc_warm.txt | tail -1 ;;
  tests)  # QD_TEST_ARCHS=cuda for the CUDA tier
    QD_TEST_ARCHS=${QD_TEST_ARCHS:-vulkan} timeout ${QD_STEP_TIMEOUT:-560} python3 -m pytest -q -p no:cacheprovider --tb=line -rf \
      --junitxml=$OUT/tests.xml "$@" > $OUT/tests.log 2>&1
    echo "rc=$?"; grep -E "^FAILED|passed|failed" $OUT/tests.log | tail -25 ;;
esac
}
step "$@"
