#!/usr/bin/env bash
# Warm two-stage time to video before and after stage 2's compile-ahead moved onto the flow's plan (2d7f6ce and
# the commits after it), on one GPU, both trees in the same machine session. Results of 2026-12-07 in
# benchmarks/results/2026-12-07/compile_ahead_plan/.
#
# Each run is a tree's own benchmarks/bench_generate.py running that tree's scripts/generate.py
# (--mesh 1 --pipeline two-stage --height 1024 --width 1536 --num-frames 121, bf16) on random-weight LTX-2.3
# files at real width (scripts/make_synthetic_checkpoint.py of $TREES/after: the checkpoint, LoRA and upsampler on
# disk, Gemma on the RAM disk), in its own process. FILES_ARGS goes to the writer: unset, all 48 DiT and 48 Gemma
# layers; "--layers 8 --gemma-layers 1" (the 2026-12-07 call) writes an 8-block DiT and a 1-layer Gemma at real
# width, so that a run takes seconds rather than a minute while it goes through the same code (loading, prompt
# encoding, stage 1, the upsampler, stage 2 compiled ahead, the decoders, mp4 writing). Each tree has its own
# compilation cache (/tmp/compile_cache_TREE): `cold` empties and fills it, `warm` reads it.
#
# The two trees, in a folder TREES names (carried with `run`, never committed):
#   mkdir -p $TREES/before && git archive 4b85b05 ltx_jax scripts benchmarks/bench_generate.py | tar -x -C $TREES/before
#   mkdir -p $TREES/after && git archive 84f6a35 ltx_jax scripts benchmarks/bench_generate.py csrc \
#       tests/torchaudio_stand_in.py | tar -x -C $TREES/after     (the writer loads tests/torchaudio_stand_in.py)
# and the wheels the image lacks, in .whl (carried): ltx-core 1.0.0 (the writer builds each model with it, on the
# meta device; its other needs, torch, torchaudio, einops, transformers, accelerate, scipy, are in the image),
# orbax-checkpoint 0.12.8 and av:
#   python3 -m pip download --no-deps -d .whl ltx-core==1.0.0
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 ... -d .whl orbax-checkpoint==0.12.8 av
#
# RUNS lists TREE:KIND pairs, run in that order (TREE: before or after; KIND: cold or warm). A warm run of a
# tree whose cache is not there (a fresh machine) runs that tree's cold run first. The files are written when
# /root/synth/manifest.json is missing, and kept while the machine stays warm between calls; the script stops
# (exit 1) when the wheels do not install or the writer leaves no manifest.json. A run that would not end
# before BUDGET_S (default 570 s from the script's start) is skipped and says so; a warm run is counted as
# WARM_S (default 125) s and a cold one as COLD_S (175) s, or as 1.2 times the longest run of its kind so far in
# this call where that is more. The script exits 2 when any run failed.
#
#   the 2026-12-07 call (a fresh machine, one call):
#     BUDGET_S=585 WARM_S=45 COLD_S=150 FILES_ARGS="--layers 8 --gemma-layers 1" \
#     RUNS="before:cold after:cold before:warm after:warm after:warm before:warm before:warm after:warm \
#           after:warm before:warm before:warm after:warm" \
#     TREES=DIR bash benchmarks/device/compile_ahead_plan.sh   (run carries .whl and DIR; timeout_s 600)
#   Estimate (H100, 2026-12-06/fp8_time_to_video, 48 blocks: warm 79 s of process wall with 30 + 3 DiT forwards of
#   1.32 / 1.94 s, cold 110 s with 92 s of compiling): with 8 blocks the forwards take about a sixth, so a warm run
#   is about 25-30 s (loading, decoding and mp4 writing do not shrink much) and a cold one about 110 s (compiling
#   dominates); wheels ~15 s, files (~20 GB) ~30 s: two cold runs and five warm pairs in ~520 s. The budget check
#   skips what does not fit. The warm pairs go ABBA (before, after, after, before, ...) so that a drift over the
#   call weighs on both trees alike.
#
# Writes under $OUT: summary.txt (each run's bench_generate.py table, then one line a run), logs.txt
# (generate.py's output and stderr of each run), files.txt (the writer's last lines), env.txt (GPU, versions).
set -uo pipefail
TREES=${TREES:?set TREES to the folder holding before/ and after/, git archives of the two revisions (see above)}
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-before:cold after:cold before:warm after:warm}
BUDGET_S=${BUDGET_S:-570}
DATA=/root/synth
T0=$(date +%s)
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    2>&1 | grep -v "already exists"
if ((PIPESTATUS[0] != 0)); then
    echo "FAILED: the wheels in .whl did not install into /tmp/site: nothing measured" | tee -a "$OUT/summary.txt"
    exit 1
fi
export PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm,temperature.gpu \
        --format=csv,noheader
    PYTHONPATH=/tmp/site python3 -c "import jax, flax, orbax.checkpoint as o, av, tokenizers; \
print('jax', jax.__version__, 'flax', flax.__version__, 'orbax', o.__version__, 'av', av.__version__, \
'tokenizers', tokenizers.__version__, jax.devices())"
    echo "before: $(cat $TREES/before/REVISION), after: $(cat $TREES/after/REVISION)"
    nproc; free -g | head -2; df -h / /dev/shm | tail -2
} >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [[ -f "$DATA/manifest.json" ]]; then
    echo "files: $DATA/manifest.json is there (kept from the call before): not written again" | tee -a "$OUT/files.txt"
else
    mkdir -p "$DATA" /dev/shm/gemma
    ln -sfn /dev/shm/gemma "$DATA/gemma-3-12b-it-qat-q4_0-unquantized"
    start=$(date +%s)
    echo "writer: make_synthetic_checkpoint.py $DATA ${FILES_ARGS:-}" > "$OUT/files.txt"
    PYTHONPATH=/tmp/site:$PWD/$TREES/after timeout 240 python3 $TREES/after/scripts/make_synthetic_checkpoint.py \
        "$DATA" ${FILES_ARGS:-} > /tmp/files-writer.log 2>&1
    rc=$?
    tr "\r" "\n" < /tmp/files-writer.log | grep -E "100%|Error|error|Traceback" | tail -20 >> "$OUT/files.txt"
    echo "files written in $(($(date +%s) - start)) s (writer exit $rc)" | tee -a "$OUT/files.txt"
    ls -la "$DATA" /dev/shm/gemma >> "$OUT/files.txt"
    du -shL "$DATA"/*.safetensors /dev/shm/gemma >> "$OUT/files.txt" 2>&1
    if [[ ! -f "$DATA/manifest.json" ]]; then
        { echo "FAILED: the writer (exit $rc) left no $DATA/manifest.json: nothing measured. Its last lines:"
          tr "\r" "\n" < /tmp/files-writer.log | tail -30; } | tee -a "$OUT/files.txt" "$OUT/summary.txt"
        exit 1
    fi
fi
n=0 failed=0
declare -A longest=([warm]=0 [cold]=0)
run_one() {  # TREE KIND
    local tree=$1 kind=$2 need=${WARM_S:-125} elapsed start took
    [[ $kind == cold ]] && need=${COLD_S:-175}
    ((longest[$kind] * 12 / 10 > need)) && need=$((longest[$kind] * 12 / 10))
    elapsed=$(($(date +%s) - T0))
    if ((elapsed + need > BUDGET_S)); then
        echo "== $tree $kind: skipped ($elapsed s gone of $BUDGET_S, about $need s needed)" | tee -a "$OUT/summary.txt"
        return
    fi
    n=$((n + 1))
    local label; label=$(printf "%02d-%s-%s" "$n" "$tree" "$kind")
    echo "== $label (at $elapsed s; $(nvidia-smi --query-gpu=temperature.gpu,clocks.sm,power.draw \
        --format=csv,noheader))" | tee -a "$OUT/summary.txt"
    mkdir -p /tmp/runs/$label
    start=$(date +%s)
    PYTHONPATH=/tmp/site:$PWD/$TREES/$tree timeout $((need + 60)) python3 $TREES/$tree/benchmarks/bench_generate.py \
        "$DATA/manifest.json" --flow two-stage --runs "$kind" --cache-dir "/tmp/compile_cache_$tree" \
        --out-dir "/tmp/runs/$label" 2>&1 | tee -a "$OUT/summary.txt"
    rc=${PIPESTATUS[0]}
    if ((rc != 0)); then
        failed=$((failed + 1))
        echo "FAILED: $label (exit $rc)" | tee -a "$OUT/summary.txt"
    fi
    took=$(($(date +%s) - start))
    ((took > longest[$kind])) && longest[$kind]=$took
    { echo "######## $label"; cat "/tmp/runs/$label/two-stage-$kind.log"; echo; } >> "$OUT/logs.txt"
    rm -rf "/tmp/runs/$label"/*.mp4
}
for pair in $RUNS; do
    tree=${pair%%:*} kind=${pair#*:}
    if [[ $kind == warm && ! -d /tmp/compile_cache_$tree ]]; then
        echo "== $tree: no compilation cache on this machine: its cold run first" | tee -a "$OUT/summary.txt"
        run_one "$tree" cold
    fi
    run_one "$tree" "$kind"
done
{
    echo
    echo "=== this call: run, process wall, generate.py's total, stage 1, stage 2, video decoding, mp4 writing"
    python3 - "$OUT/summary.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
for block in re.split(r"^== ", text, flags=re.M)[1:]:
    label = block.split()[0]
    wall = re.search(r"process wall ([\d.]+) s", block)
    if not wall:
        print(f"{label:<18} {block.splitlines()[0]}")
        continue
    get = lambda name: (re.search(rf"^\s+{name}\s+([\d.]+ s)", block, re.M) or [None, "?"])[1]
    total = get(r"total \(in the process\)")
    compiling = (re.search(r"compiling \(within the phases above\)\s+(.*)", block) or [None, "?"])[1]
    print(f"{label:<18} wall {wall[1]:>6} s  total {total:>8}  "
          f"loading {get('loading'):>7}  prompt {get('prompt encoding'):>7}  stage1 {get('stage 1 denoising'):>7}  "
          f"stage2 {get('stage 2 denoising'):>7}  vdec {get('video decoding'):>6}  mp4 {get('mp4 writing'):>6}  "
          f"compiling {compiling}")
EOF
    echo "script took $(($(date +%s) - T0)) s; $n runs, $failed failed"
} | tee -a "$OUT/summary.txt"
((failed == 0)) || exit 2
