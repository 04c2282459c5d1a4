#!/usr/bin/env bash
# `ltx-jax serve` on one GPU, models loaded: time from POST /v1/videos/sync to a playable mp4, against the same
# requests through LTXPipeline (benchmarks/serve_latency.py says what is timed), on the synthetic LTX-2.5 files at
# real size (`make_synthetic_checkpoint.py --model 2.5`, about 76 GB in /dev/shm; kept on a warm machine). Each mode
# in its own process, one after the other, sharing one compilation cache (the second compiles nothing new).
#
#   run carries .whl (ltx-core 1.0.0 for the writer, orbax-checkpoint, av; see compile_ahead_plan.sh) and .whl_serve
#   (fastapi, uvicorn, python-multipart, httpx and their dependencies, cp312 wheels:
#   `pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ... fastapi uvicorn
#   python-multipart httpx`), timeout_s 600:
#     bash benchmarks/device/serve_latency.sh                      (distilled 768x512x121)
#     PIPELINE=two-stage SIZE=1536x1024x121 bash benchmarks/device/serve_latency.sh
# Writes under $OUT: summary.txt, logs.txt, latency.json, env.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
DATA=/dev/shm/ltx25
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl .whl_serve/*.whl 2>&1 | grep -v "already exists"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/compile_cache_serve
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import jax, fastapi, uvicorn; print('jax', jax.__version__, jax.devices(), 'fastapi', \
fastapi.__version__, 'uvicorn', uvicorn.__version__)"
    git rev-parse HEAD 2>/dev/null || cat REVISION 2>/dev/null
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
start=$(date +%s)
[[ -f "$DATA/manifest.json" ]] || python3 scripts/make_synthetic_checkpoint.py "$DATA" --model 2.5 > "$OUT/files.txt" 2>&1 || {
    tail -20 "$OUT/files.txt"
    echo "FAILED: writing the files" | tee -a "$OUT/summary.txt"
    exit 1
}
echo "files: $(($(date +%s) - start)) s" | tee -a "$OUT/summary.txt"
timeout 500 python3 benchmarks/serve_latency.py --manifest "$DATA/manifest.json" --pipeline "${PIPELINE:-distilled}" \
    --size "${SIZE:-768x512x121}" --repeats "${REPEATS:-3}" --out "$OUT" > /tmp/latency.txt 2> "$OUT/logs.txt"
code=$?
{
    echo "== ${PIPELINE:-distilled} ${SIZE:-768x512x121}: exit $code"
    cat /tmp/latency.txt
} | tee -a "$OUT/summary.txt"
exit $code
