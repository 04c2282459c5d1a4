#!/usr/bin/env bash
# One call on nvidia-h200: attention at the SP shard shapes with JAX's calls unrolled in one program
# (benchmarks/bench_attention.py, Pallas sweeps skipped). Results under $OUT.
#   bash benchmarks/device/attention_timing.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 300 python3 benchmarks/bench_attention.py --no-pallas --inner 20 --tokens 6144 24576 --heads 4 --batch 1 4 \
    --out "$OUT/shard_shapes" > "$OUT/attention_h4.txt" 2>&1
timeout 150 python3 benchmarks/bench_attention.py --no-pallas --inner 20 --tokens 6144 --heads 32 --batch 1 \
    --out "$OUT/one_gpu" > "$OUT/attention_h32.txt" 2>&1
grep -E "^\| [14] \| " "$OUT"/attention_h*.txt | grep -E "\| (cudnn|cudnn \+ key lengths|cudnn BNTH|ring cudnn \+ lse|torch sdpa|torch sdpa \+ key mask) \|"
grep -i "error" "$OUT"/attention_h*.txt | head -5
