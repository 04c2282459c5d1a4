#!/usr/bin/env bash
# One device call on nvidia-h200 (one GPU), about 5 minutes: peak device memory and wall time of the
# LTX-2 19B video VAE decoder (random bf16 weights, 1024x1536x121 px) decoding tile by tile with
# generate.py's default tiles, with smaller tiles, and in one pass; ltx-core 1.0.0 decodes the smaller
# tiles on the same GPU. For docs/video_vae.md "Memory". Run from the repository root, .whl carried:
#   bash benchmarks/device/vae_memory.sh                 # CONFIG=ltx2_3 for LTX-2.3's decoder
# $OUT: vae_memory.md (the table for the doc), vae_memory.json, vae_memory_log.txt, machine.txt.
# Success: vae_memory.md has rows jax tiled_default, jax tiled_small, ltx-core tiled_small with a peak
# in GiB and output 1x3x121x1024x1536, and a jax untiled row (17.6 GiB on an H200; on a smaller
# GPU an out-of-memory error is that row's result). The script rewrites both files after every row, so a run cut short keeps its rows.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d /tmp/site/ltx_core ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/machine.txt"
python3 -c "import jax, torch; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__)" \
    >> "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
# 6 measurement processes (+ a probe), each cut at 150 s; the whole run at 380 s.
timeout -k 10 380 python3 benchmarks/bench_vae_memory.py --config "${CONFIG:-ltx2}" --timeout 150 --out "$OUT" \
    2>&1 | tee "$OUT/vae_memory_log.txt"
