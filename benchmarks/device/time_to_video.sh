#!/usr/bin/env bash
# Time to video at production size on one H200 (issue #20), in calls that each fit 10 minutes, one right
# after the other on the same machine (the files stay on it between calls). PARTS picks what runs:
#   files      random-weight LTX-2.3 files (scripts/make_synthetic_checkpoint.py, all 48 DiT and Gemma layers):
#              the checkpoint, LoRA and upsampler on disk, the Gemma directory on the RAM disk
#              (FILES_ARGS are passed on, e.g. "--gemma-layers 1" where no step runs Gemma)
#   compile    benchmarks/bench_compile.py: the 48-block DiT compiled whole against block programs (no files)
#   blockcompile  bench_compile.py --modes blocks --shapes stage1 (the guided step's first call and forward),
#              .trees/before's ltx_jax and this tree's alternately, twice each, one process each (no files)
#   load       benchmarks/bench_load.py: ltx-core's SingleGPUModelBuilder and load_checkpoint after, LOAD_REPEATS (2) each
#   loadsweep  load_checkpoint with 8, 16 and 32 tensors in flight (placement.LOAD_THREADS), once each
#   loadbase   load_checkpoint before this work (.trees/base), once
#   loadconverted  convert_checkpoint.py to the RAM disk (timed), then load_checkpoint of that directory twice
#   loadpairs  ltx-core's loader once, then load_checkpoint of .trees/before and of this tree alternately, twice each
#   loadparts  benchmarks/bench_load_parts.py: 24 GB of the DiT read, put, read+put, put from a memory map, placed as
#              load_checkpoint places it, with and without its transposes (16 and 32 threads)
#   loadlora   load_checkpoint and load_lora (the distilled LoRA) of .trees/before and of this tree, twice each
#   loadfp8    load_checkpoint with quantization="fp8" of .trees/before and of this tree, once each: time and peak
#              device memory (quantized as the weights load, 2026-12-05)
#   step       benchmarks/bench_step.py: 8 blocks at 6,144 and 24,576 tokens against ltx-core eager and under
#              torch.compile, and one timestep per sample against one per token (no files)
#   restoreparts  benchmarks/bench_restore_parts.py: 8 GB of parts on the RAM disk, 256 MB and 1 GB parts, restored
#              onto the host and the device against reading their files and putting host arrays (no files)
#   abstract   benchmarks/bench_abstract.py: a DiT load's fixed steps (abstract model, key table, set_params),
#              ltx_jax of .trees/before and of this tree alternately, twice each (no files, no GPU)
#   fp8forward benchmarks/bench_fp8_cast.py: 8 blocks at 24,576 tokens, bf16 / fp8-cast / fp8 (no files)
#   fp8attention  benchmarks/probe_fp8_attention.py: cuDNN's fp8 attention against bf16 at 6,144 and 24,576 tokens,
#              and where its error comes from (no files)
#   fp8table   benchmarks/bench_fp8_cast.py --torch-compile at TOKENS (default 24576): every row of issue #24's
#              table, 8 blocks, with peak memory and the 10-step quality loop (no files)
#   cold, warm, reference   benchmarks/bench_generate.py two-stage 1024x1536x121: generate.py with an empty
#              compilation cache, again with the filled one, and ltx-pipelines 1.0.0
#   reference2 ltx-pipelines again: its second run on a machine was 10.7 s faster than its first (2026-12-03)
#   cold80, cold60   the cold run in 74 GiB (XLA_PYTHON_CLIENT_MEM_FRACTION=0.53 of the H200's 140 GiB: the
#              goal's 75 GiB) and in 59 GiB (0.42: what JAX takes of an 80 GB card by default, 75%), each its
#              own empty cache
#   coldbefore, warmbefore   the cold and warm runs of the tree before a change (its own compilation cache):
#              git archive REV ltx_jax scripts benchmarks/bench_generate.py | tar -x -C .trees/before (carried)
#   fp8cold, fp8warm   two-stage 1024x1536x121 with --quantization $QUANT (fp8-cast unless set; fp8), cold and
#              warm (a cache of its own per QUANT)
#   timeline   bench_generate.py --timeline: generate.py two-stage 1024x1536x121 under generate_timeline.py, cold
#              then warm (a cache of its own); phase tables in timeline.txt, reports in timeline-{cold,warm}.txt
#   distilled  the distilled flow at 768x512x121 (sglang's published size), the same three runs (the synthetic
#              checkpoint stands in for the distilled one: the same tensors)
#   mkdir -p .trees/base && git archive 135e3e1 ltx_jax | tar -x -C .trees/base; wheels in .whl (ltx-core,
#   ltx-pipelines, orbax-checkpoint 0.12.8, av) and .whl_ref (transformers 4.57.1, huggingface-hub 0.36.0,
#   tokenizers 0.22.1), both carried
#   PARTS=files bash benchmarks/device/time_to_video.sh   (then load, loadbase, cold, warm, reference)
set -uo pipefail
OUT=${OUT:-/tmp/out}
PARTS=${PARTS:-files load}
DATA=/root/synth
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | grep -v "already exists"
# ltx-core 1.0.0 builds Gemma's vision tower as transformers 4.x names it: the reference runs with these
python3 -m pip install -q --no-index --no-deps --target /tmp/site_ref .whl_ref/*.whl 2>&1 | grep -v "already exists"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LTX_JAX_CACHE_DIR=/tmp/ltx_cache
if [[ " $PARTS " == *" files "* && -f "$DATA/manifest.json" ]]; then
    echo "files: $DATA/manifest.json is there (a machine kept from the call before): not written again"
elif [[ " $PARTS " == *" files "* ]]; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    df -h / /dev/shm | tail -2; free -g | head -2; nproc
    mkdir -p "$DATA" /dev/shm/gemma
    ln -sfn /dev/shm/gemma "$DATA/gemma-3-12b-it-qat-q4_0-unquantized"
    start=$(date +%s)
    timeout 240 python3 scripts/make_synthetic_checkpoint.py "$DATA" ${FILES_ARGS:-} > "$OUT/files.txt" 2>&1; rc=$?
    echo "files written in $(($(date +%s) - start)) s (exit $rc)"
    tr "\r" "\n" < "$OUT/files.txt" | grep -E "100%|Error|error" | tail -12
    ls -la "$DATA" /dev/shm/gemma; df -h / /dev/shm | tail -2
fi
checkpoint="$DATA/ltx-2.3-22b-dev.safetensors"
if [[ " $PARTS " == *" compile "* ]]; then
    timeout 420 python3 benchmarks/bench_compile.py --repeats 3 --rounds 2 2>&1 | tee "$OUT/compile.txt"
fi
if [[ " $PARTS " == *" blockcompile "* ]]; then
    for round in 1 2; do
        for tree in .trees/before .; do
            echo "== round $round, ltx_jax of $tree" | tee -a "$OUT/blockcompile.txt"
            PYTHONPATH=/tmp/site:$PWD/$tree timeout 200 python3 benchmarks/bench_compile.py --modes blocks \
                --shapes stage1 --rounds 3 --repeats 5 2>&1 | tee -a "$OUT/blockcompile.txt"
        done
    done
fi
if [[ " $PARTS " == *" load "* ]]; then
    timeout 300 python3 benchmarks/bench_load.py "$checkpoint" --trees . --repeats "${LOAD_REPEATS:-2}" 2>&1 | tee "$OUT/load.txt"
fi
if [[ " $PARTS " == *" loadsweep "* ]]; then  # ltx-jax's loader with 8, 16 and 32 tensors in flight, once each
    timeout 200 python3 benchmarks/bench_load.py "$checkpoint" --no-torch --repeats 1 --load-threads 8 16 32 2>&1 \
        | tee "$OUT/loadsweep.txt"
fi
if [[ " $PARTS " == *" loadparts "* ]]; then
    timeout 300 python3 benchmarks/bench_load_parts.py "$checkpoint" --gigabytes 24 --threads 16 32 --repeats 2 2>&1 \
        | tee "$OUT/loadparts.txt"
fi
if [[ " $PARTS " == *" loadpairs "* ]]; then
    timeout 300 python3 benchmarks/bench_load.py "$checkpoint" --trees .trees/before . .trees/before . --repeats 1 2>&1 \
        | tee "$OUT/loadpairs.txt"
fi
if [[ " $PARTS " == *" loadconverted "* ]]; then
    start=$(date +%s)
    timeout 240 python3 scripts/convert_checkpoint.py "$checkpoint" /dev/shm/converted 2>&1 | tr "\r" "\n" \
        | grep -v "^\s*$" | tail -2 | tee "$OUT/loadconverted.txt"
    echo "converted in $(($(date +%s) - start)) s" | tee -a "$OUT/loadconverted.txt"
    timeout 200 python3 benchmarks/bench_load.py /dev/shm/converted --no-torch --repeats 2 2>&1 \
        | tee -a "$OUT/loadconverted.txt"
    rm -rf /dev/shm/converted /dev/shm/.converted.partial-*
fi
if [[ " $PARTS " == *" loadfp8 "* ]]; then
    timeout 300 python3 benchmarks/bench_load.py "$checkpoint" --trees .trees/before . --repeats 1 --no-torch \
        --quantization fp8 2>&1 | tee "$OUT/loadfp8.txt"
fi
if [[ " $PARTS " == *" step "* ]]; then
    timeout 300 python3 benchmarks/bench_step.py --layers 8 --tokens 6144 24576 --repeats 10 --torch-compile \
        --compare-per-sample-timesteps 3 2>&1 | tee "$OUT/step.txt"
fi
if [[ " $PARTS " == *" restoreparts "* ]]; then
    timeout 400 python3 benchmarks/bench_restore_parts.py /dev/shm/parts --gigabytes 8 --part-mb 256 1024 \
        --threads 8 16 32 --repeats 2 2>&1 | tee "$OUT/restoreparts.txt"
fi
if [[ " $PARTS " == *" abstract "* ]]; then
    for round in 1 2; do
        for tree in .trees/before .; do
            PYTHONPATH=/tmp/site:$PWD/$tree timeout 100 python3 benchmarks/bench_abstract.py --repeats 5 2>&1 \
                | tee -a "$OUT/abstract.txt"
        done
    done
fi
if [[ " $PARTS " == *" fp8forward "* ]]; then
    timeout 420 python3 benchmarks/bench_fp8_cast.py --layers 8 --tokens 24576 --repeats 10 --steps 10 2>&1 \
        | tee "$OUT/fp8forward.txt"
fi
if [[ " $PARTS " == *" fp8attention "* ]]; then
    timeout 150 python3 benchmarks/probe_fp8_attention.py --tokens 6144 24576 --repeats 20 2>&1 \
        | tee "$OUT/fp8attention.txt"
fi
if [[ " $PARTS " == *" fp8table "* ]]; then  # the second compile of each program (its memory plan) hits this cache
    JAX_COMPILATION_CACHE_DIR=/tmp/jax_cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 timeout 420 \
        python3 benchmarks/bench_fp8_cast.py --layers 8 --tokens ${TOKENS:-24576} --repeats 10 --steps 10 \
        --torch-compile 2>&1 | grep -v "Delay kernel timed out" | tee "$OUT/fp8table-${TOKENS:-24576}.txt"
fi
if [[ " $PARTS " == *" loadbase "* ]]; then  # the loader before this work, once
    timeout 140 python3 benchmarks/bench_load.py "$checkpoint" --trees .trees/base --repeats 1 --no-torch 2>&1 \
        | tee -a "$OUT/load.txt"
fi
if [[ " $PARTS " == *" loadlora "* ]]; then
    timeout 300 python3 benchmarks/bench_load.py "$checkpoint" --trees .trees/before . --repeats 2 --no-torch \
        --lora "$DATA/ltx-2.3-22b-distilled-lora-384.safetensors" 2>&1 | tee "$OUT/loadlora.txt"
fi
for run in cold warm reference reference2 cold80 cold60; do
    [[ " $PARTS " == *" $run "* ]] || continue
    site=/tmp/site; [[ $run == reference* ]] && site=/tmp/site_ref:/tmp/site
    runs=${run%2} cache=/tmp/compile_cache fraction=  # none: JAX's default share of the GPU
    [[ $run == cold?0 ]] && runs=cold cache=/tmp/compile_cache_$run fraction=0.53
    [[ $run == cold60 ]] && fraction=0.42
    mkdir -p "$OUT/$run"
    env ${fraction:+XLA_PYTHON_CLIENT_MEM_FRACTION=$fraction} PYTHONPATH=$site:$PWD timeout 560 python3 \
        benchmarks/bench_generate.py "$DATA/manifest.json" --flow two-stage --runs "$runs" --cache-dir "$cache" --out-dir "$OUT/$run" 2>&1 \
        | tee "$OUT/generate-$run.txt"
    mv "$OUT/$run/two-stage-$runs.log" "$OUT/two-stage-$run.log"
    rm -rf "${OUT:?}/$run"
done
for run in coldbefore warmbefore; do  # the tree before a change (.trees/before, carried), its own cache
    [[ " $PARTS " == *" $run "* ]] || continue
    mkdir -p "$OUT/$run"  # its own folder: its log has the name of the cold and warm runs' logs
    PYTHONPATH=/tmp/site:$PWD/.trees/before timeout 560 python3 .trees/before/benchmarks/bench_generate.py \
        "$DATA/manifest.json" --flow two-stage --runs "${run%before}" --cache-dir /tmp/compile_cache_before \
        --out-dir "$OUT/$run" 2>&1 | tee "$OUT/generate-$run.txt"
    mv "$OUT/$run/two-stage-${run%before}.log" "$OUT/two-stage-$run.log"
    rm -rf "${OUT:?}/$run"
done
if [[ " $PARTS " == *" timeline "* ]]; then
    timeout 560 python3 benchmarks/bench_generate.py "$DATA/manifest.json" --flow two-stage --runs cold warm \
        --timeline --cache-dir /tmp/compile_cache_timeline --out-dir "$OUT/timeline" 2>&1 | tee "$OUT/timeline.txt"
    for run in cold warm; do
        python3 benchmarks/generate_timeline.py --report "$OUT/timeline/two-stage-$run.timeline.json" \
            > "$OUT/timeline-$run.txt"
        mv "$OUT/timeline/two-stage-$run.log" "$OUT/timeline-$run.log"
    done
    rm -rf "${OUT:?}/timeline"
fi
for run in fp8cold fp8warm; do
    [[ " $PARTS " == *" $run "* ]] || continue
    quant=${QUANT:-fp8-cast}
    PYTHONPATH=/tmp/site:$PWD timeout 560 python3 benchmarks/bench_generate.py "$DATA/manifest.json" --flow two-stage \
        --runs "${run#fp8}" --quantization "$quant" --cache-dir "/tmp/compile_cache_$quant" --out-dir "$OUT" 2>&1 \
        | tee "$OUT/generate-$run-$quant.txt"
    rm -f "$OUT"/*.mp4
done
if [[ " $PARTS " == *" distilled "* ]]; then
    PYTHONPATH=/tmp/site_ref:/tmp/site:$PWD timeout 200 python3 benchmarks/bench_generate.py "$DATA/manifest.json" \
        --flow distilled --height 512 --width 768 --runs reference --out-dir "$OUT" 2>&1 | tee "$OUT/distilled.txt"
    timeout 380 python3 benchmarks/bench_generate.py "$DATA/manifest.json" --flow distilled --height 512 --width 768 \
        --runs cold warm --cache-dir /tmp/compile_cache_distilled --out-dir "$OUT" 2>&1 | tee -a "$OUT/distilled.txt"
    rm -f "$OUT"/*.mp4
fi
