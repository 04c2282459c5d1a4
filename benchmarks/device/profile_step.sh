#!/usr/bin/env bash
# One call on nvidia-h200: where a DiT forward's GPU time goes, ltx-jax beside ltx-core, then the
# same ltx-jax forward under XLA flag variants (each its own process: flags are read at start),
# compiled from XLA's defaults (--xla-defaults: DIT_COMPILER_OPTIONS would override XLA_FLAGS).
# Results: $OUT/profile.txt, $OUT/profile/*.json and the optimized HLO of each token count,
# $OUT/flags_*.txt.
#   bash benchmarks/device/profile_step.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/gpu.txt"
timeout 240 python3 benchmarks/profile_step.py --out "$OUT/profile" > "$OUT/profile.txt" 2>&1
FLAGS=(
    "--xla_gpu_enable_command_buffer="
    "--xla_gpu_enable_triton_gemm=false"
    "--xla_gpu_enable_cublaslt=true"
)
for i in "${!FLAGS[@]}"; do
    echo "XLA_FLAGS=${FLAGS[$i]}" > "$OUT/flags_$i.txt"
    XLA_FLAGS="${FLAGS[$i]}" timeout 100 python3 benchmarks/profile_step.py --no-torch --xla-defaults --top 8 \
        >> "$OUT/flags_$i.txt" 2>&1
done
cat "$OUT/gpu.txt"; grep -v "^ *[0-9.]* ( *[0-9]*) " "$OUT/profile.txt" | tail -40
for f in "$OUT"/flags_*.txt; do head -1 "$f"; grep -A9 "== " "$f"; done
