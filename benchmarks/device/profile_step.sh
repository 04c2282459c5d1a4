#!/usr/bin/env bash
# One call on one GPU: where a DiT forward's GPU time goes, ltx-jax beside ltx-core (eager, and under
# torch.compile with PROFILE_ARGS="--torch-compile --per-sample"), with the GPU's clocks and power sampled
# every 200 ms meanwhile; then, with FLAGS=1, the same ltx-jax forward under XLA flag variants (each its own
# process: flags are read at start), compiled from XLA's defaults (--xla-defaults: DIT_COMPILER_OPTIONS
# would override XLA_FLAGS).
# Results: $OUT/profile.txt, $OUT/profile/*.json and the optimized HLO of each row and token count,
# $OUT/clocks.csv, $OUT/flags_*.txt.
#   PROFILE_ARGS="--torch-compile --per-sample" bash benchmarks/device/profile_step.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 200 > "$OUT/clocks.csv" &
sampler=$!
# shellcheck disable=SC2086  # PROFILE_ARGS is a list of flags
timeout "${PROFILE_TIMEOUT:-420}" python3 benchmarks/profile_step.py --out "$OUT/profile" ${PROFILE_ARGS:-} \
    > "$OUT/profile.txt" 2>&1
kill "$sampler"
if [[ -n "${FLAGS:-}" ]]; then
    variants=(
        "--xla_gpu_enable_command_buffer="
        "--xla_gpu_enable_triton_gemm=false"
        "--xla_gpu_enable_cublaslt=true"
    )
    for i in "${!variants[@]}"; do
        echo "XLA_FLAGS=${variants[$i]}" > "$OUT/flags_$i.txt"
        XLA_FLAGS="${variants[$i]}" timeout 100 python3 benchmarks/profile_step.py --no-torch --xla-defaults --top 8 \
            >> "$OUT/flags_$i.txt" 2>&1
    done
fi
cat "$OUT/gpu.txt"; grep -E -A9 "^== " "$OUT/profile.txt"
awk -F', ' 'NR > 1 {n++; clock += $2; power += $3} END {if (n) printf "mean SM clock %.0f MHz, power %.0f W over %d samples\n", clock / n, power / n, n}' "$OUT/clocks.csv"
