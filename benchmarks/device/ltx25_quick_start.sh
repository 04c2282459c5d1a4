#!/usr/bin/env bash
# LTX-2.5 at real size on one GPU: upstream's README quick start (`python -m ltx_pipelines.distilled` on the split
# files), translated flag for flag to `scripts/generate.py`, on random-weight files at the real shapes
# (`make_synthetic_checkpoint.py --model 2.5`: the 22B transformer, Gemma 4 12B with the projection, the conv
# video VAE, the audio VAE, the duration head, the x2 upsampler, the LoRA; about 76 GB, all in /dev/shm, which
# the disk cannot hold). Twice, each in its own process: cold (an empty compilation cache) and warm (the cache
# the cold run filled). With REFERENCE=1, ltx-pipelines 1.2.0 runs the same command on the same files before
# them (`python -m ltx_pipelines.distilled`, its own process); REFERENCE=2 also runs it again after them (it has no
# compilation cache, so the second shows what a warm page cache gives it).
#
#   run carries .whl (ltx-core 1.0.0 for the writer's builders, orbax-checkpoint 0.12.8, av; see
#   compile_ahead_plan.sh for the download commands) and, for REFERENCE=1, .whl12: ltx-core and ltx-pipelines
#   1.2.0 built from the LTX-2 repository (`pip wheel --no-deps packages/ltx-core packages/ltx-pipelines`),
#   transformers 5.14.1 (the image's 5.17 cannot build 1.2.0's Gemma 4; repacked without its model folders
#   other than auto, gemma*, gemma3n, gemma4*, siglip*, 2 MB instead of 12, to fit run's carry; its
#   tokenizers pin widened from <=0.23.0 to <0.24, since the image has 0.23.2), openimageio (cp312 manylinux) and
#   torchvision 0.26.0 (Gemma 4's processor imports it; installed only where the image lacks it; see
#   run_reference_distilled.py for its compiled operators):
#     REFERENCE=1 bash benchmarks/device/ltx25_quick_start.sh          (timeout_s 600)
#
# A tiny write comes first (seconds), so that a writer that does not run on the image stops the call before the
# big files. Writes under $OUT: summary.txt (the files' sizes and time, each run's generate.py summary and wall
# time), logs.txt (each run's stderr), env.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
DATA=/dev/shm/ltx25
CACHE=/tmp/compile_cache_ltx25
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 |
    grep -v "already exists"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import jax, transformers, torch; print('jax', jax.__version__, 'transformers', \
transformers.__version__, 'torch', torch.__version__, jax.devices())"
    git rev-parse HEAD 2>/dev/null || cat REVISION 2>/dev/null
    free -g | head -2; df -h / /dev/shm | tail -2
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if ! python3 scripts/make_synthetic_checkpoint.py /tmp/tiny25 --model 2.5 --tiny --layers 1 --gemma-layers 1 \
    > "$OUT/tiny.txt" 2>&1; then
    tail -20 "$OUT/tiny.txt"
    echo "FAILED: the writer does not run here: nothing measured" | tee -a "$OUT/summary.txt"
    exit 1
fi
start=$(date +%s)
# a machine still warm from an earlier call has them (the writer is deterministic)
[[ -f "$DATA/manifest.json" ]] || python3 scripts/make_synthetic_checkpoint.py "$DATA" --model 2.5 > "$OUT/files.txt" 2>&1 || {
    tail -20 "$OUT/files.txt"
    echo "FAILED: writing the files" | tee -a "$OUT/summary.txt"
    exit 1
}
{
    echo "files: $(($(date +%s) - start)) s"
    du -sh "$DATA"/*
} | tee -a "$OUT/summary.txt"
manifest() { python3 -c "import json; print(json.load(open('$DATA/manifest.json'))['$1'])"; }
QUICK_START=(
    --pipeline distilled --mesh 1
    --transformer-path "$(manifest distilled_transformer_path)" --text-encoder-path "$(manifest text_encoder_path)"
    --video-vae-path "$(manifest video_vae_path)" --audio-vae-path "$(manifest audio_vae_path)"
    --spatial-upsampler-path "$(manifest spatial_upsampler_path)"
    --num-frames 121 --prompt "A cow in a green pasture looks up as rain starts to fall" --output-path /tmp/quick_start.mp4
)
reference() {
    start=$(date +%s.%N)
    PYTHONPATH=/tmp/site12:/tmp/site python3 benchmarks/device/run_reference_distilled.py "${QUICK_START[@]:4}" \
        > /tmp/ref.txt 2>&1
    code=$?
    wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    echo "== reference $1: exit $code, process wall $wall s" | tee -a "$OUT/summary.txt"
    { echo "== reference $1"; tail -c 20000 /tmp/ref.txt; } >> "$OUT/logs.txt"
    ((code == 0)) || { tail -5 /tmp/ref.txt; status=2; }
    # a reference that cannot run is not worth the device time of ltx-jax's runs beside it
    [[ $1 != first || $code == 0 ]] || exit 2
}
rm -rf "$CACHE"
status=0
if [[ -n "${REFERENCE:-}" ]]; then
    wheels=(.whl12/*.whl)
    python3 -c "import torchvision" 2> /dev/null && wheels=(${wheels[@]/*torchvision*/})
    python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site12 \
        "${wheels[@]}" 2>&1 |
        grep -v "already exists"
    reference first
fi
for run in cold warm; do
    start=$(date +%s.%N)
    python3 scripts/generate.py "${QUICK_START[@]}" --compile-cache-dir "$CACHE" > /tmp/run.txt 2> /tmp/run.err
    code=$?
    wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
    {
        echo "== $run: exit $code, process wall $wall s"
        cat /tmp/run.txt
    } | tee -a "$OUT/summary.txt"
    { echo "== $run"; tail -c 20000 /tmp/run.err; } >> "$OUT/logs.txt"
    ((code == 0)) || status=2
done
[[ "${REFERENCE:-}" != 2 ]] || reference second
exit $status
