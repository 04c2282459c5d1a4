#!/usr/bin/env bash
# One call on nvidia-h200-x4 running three single-GPU jobs side by side, one GPU each (separate
# GPUs, so their timings do not interfere): the ring kernel tests and attention benchmark (GPU 0),
# the VAE tiled-decode memory benchmark (GPU 1), and the DiT forward against ltx-core, eager and
# torch.compile (GPU 2). Results in $OUT/{attention,vae}/ and $OUT/bench_step.txt.
#   bash benchmarks/device/four_gpu_single_jobs.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/attention" "$OUT/vae"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
CUDA_VISIBLE_DEVICES=0 OUT=$OUT/attention bash benchmarks/device/attention_ring.sh > "$OUT/attention.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 OUT=$OUT/vae bash benchmarks/device/vae_memory.sh > "$OUT/vae.log" 2>&1 &
CUDA_VISIBLE_DEVICES=2 timeout 450 python3 benchmarks/bench_step.py --torch-compile --repeats 10 \
    > "$OUT/bench_step.txt" 2>&1 &
wait
tail -12 "$OUT/bench_step.txt"; tail -25 "$OUT/attention.log"; tail -12 "$OUT/vae.log"
