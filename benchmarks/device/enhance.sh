#!/usr/bin/env bash
# Prompt enhancement on one H200 (issue #25): Gemma 3 12B-shaped random weights written to the RAM disk, then
# benchmarks/bench_enhance.py for ltx-jax and for transformers 4.57.1 (the version ltx-core 1.0.0 runs with),
# each in its own process on the same GPU. Wheels: .whl and .whl_ref, both carried (see time_to_video.sh).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | grep -v "already exists"
python3 -m pip install -q --no-index --no-deps --target /tmp/site_ref .whl_ref/*.whl 2>&1 | grep -v "already exists"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
GEMMA=/dev/shm/gemma
[[ -f $GEMMA/config.json ]] || timeout 200 python3 benchmarks/bench_enhance.py write "$GEMMA" | tail -1 | tee "$OUT/write.json"
timeout 300 python3 benchmarks/bench_enhance.py ltx-jax "$GEMMA" 2>"$OUT/ltx_jax.err" | tee "$OUT/ltx_jax.json"
tail -3 "$OUT/ltx_jax.err"
PYTHONPATH=/tmp/site_ref:/tmp/site:$PWD timeout 240 python3 benchmarks/bench_enhance.py transformers "$GEMMA" \
    2>"$OUT/transformers.err" | tee "$OUT/transformers.json"
tail -3 "$OUT/transformers.err"
