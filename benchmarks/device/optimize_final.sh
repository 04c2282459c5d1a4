#!/usr/bin/env bash
# One call on nvidia-h200: DIT_COMPILER_OPTIONS against XLA's defaults in one process, alternating
# (benchmarks/bench_step.py --compare-xla-defaults), then ncu on the cuDNN attention kernel as JAX and
# torch call it (benchmarks/probe_cudnn_attention.py). Results under $OUT.
#   bash benchmarks/device/optimize_final.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 300 python3 benchmarks/bench_step.py --repeats 10 --compare-xla-defaults 3 > "$OUT/bench_step_options.txt" 2>&1
for heads in 4 32; do
    timeout 100 ncu --clock-control none --kernel-name regex:sdpa --section LaunchStats --section SpeedOfLight \
        --section Occupancy python3 benchmarks/probe_cudnn_attention.py --heads "$heads" > "$OUT/ncu_h$heads.txt" 2>&1
done
cat "$OUT/bench_step_options.txt" | grep -v Warning
for f in "$OUT"/ncu_h*.txt; do echo "== $f"; grep -E "sdpa|Duration|Grid Size|Block Size|Registers Per|Shared Memory Config|Dynamic Shared|Memory Throughput|Compute \(SM\)|Achieved Occupancy|Waves Per SM|SM Frequency|DRAM Throughput" "$f" | head -60; done
