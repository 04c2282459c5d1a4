#!/usr/bin/env bash
# One call on nvidia-h200 after an optimization: the kernel profile of the forward (ltx-jax beside
# ltx-core), attention at the SP shard shapes without the Pallas sweeps, the linear layers in both
# weight layouts, and the single-GPU GPU tests. Results under $OUT.
#   bash benchmarks/device/optimize_checks.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 200 python3 benchmarks/profile_step.py --out "$OUT/profile" > "$OUT/profile.txt" 2>&1
timeout 150 python3 benchmarks/bench_attention.py --no-pallas --tokens 6144 24576 --heads 4 32 --batch 1 4 \
    --out "$OUT/attention" > "$OUT/attention.txt" 2>&1
timeout 60 python3 benchmarks/bench_matmul_layout.py > "$OUT/matmul.txt" 2>&1
LTX_JAX_REQUIRE_GPU=1 timeout 120 python3 -m pytest -m gpu -q tests/test_gpu.py > "$OUT/gpu_tests.txt" 2>&1
grep -B1 -A8 "ms per forward" "$OUT/profile.txt"; tail -5 "$OUT/gpu_tests.txt"; cat "$OUT/matmul.txt"
grep -E "^\| [14] \| " "$OUT/attention.txt" | grep -E "cudnn|sdpa \|" | tail -40
