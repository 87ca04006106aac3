#!/bin/bash
# Run Quadrants' suite on qd with pytest-xdist on a machine with many cores and no network (the lent
# machine of the device tool; how RESULTS.md was measured). From the repository root, with these carried:
#   .qtests/tests/python/   Quadrants' test files (git -C MIRROR show HEAD:tests/python/<f> for suite.txt)
#   .qtests/ignore.txt      files that fail to collect on qd (xdist stops on collection errors)
#   .whlq/                  wheels missing there (pytest-xdist, execnet, pydantic, psutil, ...)
#   qd/_interp.c qd/_sizer.c  the Cython output of a local build (compiled there with gcc)
# usage: bash tools/quadrants_compat/xdist_run.sh ARCH   (writes $OUT/qd_ARCH.xml for compare.py)
set -u
ROOT=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlq/*.whl || exit 1
export PYTHONPATH=/tmp/site
PYINC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
NPINC=$(python3 -c "import numpy;print(numpy.get_include())")
EXT=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
for m in _interp _sizer; do
  [ -f qd/$m$EXT ] || gcc -shared -fPIC -O3 -fopenmp -fno-strict-aliasing -Wno-unused-function -w \
    -DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION -I$NPINC -Iqd -I$PYINC qd/$m.c -o qd/$m$EXT -lm || exit 1
done
python3 -c "import llvmlite; print('llvmlite', llvmlite.__version__)"
rm -rf /tmp/qdc && mkdir -p /tmp/qdc && cp .qtests/tests/python/*.py /tmp/qdc/ && rm -f /tmp/qdc/__init__.py /tmp/qdc/conftest.py
IGN=$(sed "s#^#--ignore=#" $ROOT/.qtests/ignore.txt)
cd /tmp/qdc
export PYTHONPATH=$ROOT/tools/quadrants_compat/shim:$ROOT:/tmp/site QD_WANTED_ARCHS=$1 QD_COMPAT_TIMEOUT=120
timeout 540 python3 -m pytest -p qd_compat_plugin -p no:cacheprovider -o addopts="" -q -rN --tb=no -n 16 \
  --continue-on-collection-errors $IGN --rootdir /tmp/qdc --junitxml=$OUT/qd_$1.xml . > $OUT/log_$1 2>&1
echo rc=$?
tail -3 $OUT/log_$1
