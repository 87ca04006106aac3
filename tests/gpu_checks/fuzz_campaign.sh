#!/bin/bash
# issue 27's campaign on a lent GPU machine (run from the repository root there, carrying .gl .whl and qd/*.c as
# bench/gpu_machine.sh says): random kernels over interp, cpu, cuda and opencl (NVIDIA) in 12 parallel processes with
# disjoint seeds, and random gradients (tests/test_adstack_random.py) against finite
# differences; a summary in $OUT/campaign.log
set -u
for m in _interp _sizer _launch; do [ -f qd/$m.c ] || python3 -m cython -3 qd/$m.pyx -o qd/$m.c || exit 1; done
ICD=$(find /usr /etc /opt -name "nvidia_icd*.json" 2>/dev/null | head -1); echo "vulkan icd: $ICD"; [ -n "$ICD" ] && export VK_DRIVER_FILES=$ICD
cat > /tmp/steps.sh <<'EOS'
mkdir -p /tmp/fz; T=${CAMPAIGN_S:-330}
run() { timeout $((T + 120)) python3 -m tests.fuzz --seconds $T --no-shrink --tiers ${FUZZ_TIERS:-interp,cpu,cuda,opencl} "$@" > /tmp/fz/$1_$2.log 2>&1; }
for k in 0 1 2 3 4 5 6 7 8; do run --seed $((400000 + k * 100000)) & done
for k in 9 10; do run --seed $((400000 + k * 100000)) --specials --deep-ifs 88 & done
run --seed 1600000 --threads 4 --repeat 2 &
grad() { QD_ADSTACK_RANDOM_EXAMPLES=$2 QD_TEST_ARCHS=$1 timeout $((T + 60)) python3 -m pytest -q -p no:cacheprovider \
   tests/test_adstack_random.py -k random_dynamic > /tmp/fz/grad_$1.log 2>&1; echo "grad $1 rc=$?" >> /tmp/fz/grad_$1.log; }
grad cpu ${GRAD_EXAMPLES:-500} & grad cuda ${GRAD_EXAMPLES_CUDA:-300} &
wait
for f in /tmp/fz/*.log; do echo "== $f"; grep -E "qd fuzz:|mismatch|raised|passed|failed|rc=" $f | tail -15; done > $OUT/campaign.log
cat /tmp/fz/*.log > $OUT/all.log
cat $OUT/campaign.log
EOS
bash bench/gpu_machine.sh sh 'source /tmp/steps.sh'
