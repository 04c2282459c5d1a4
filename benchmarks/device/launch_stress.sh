#!/usr/bin/env bash
# The abort of `generate.py --mesh 8` on checkpoint files (XLA's CPU all-reduce rendezvous: "Expected 8 threads
# to join the rendezvous, but only 7 of them arrived", exit 134), run many times at once on the device machine's
# CPU cores: the command of issue 48, on 8 simulated CPU devices, per configuration (quantization none, fp8-cast,
# fp8, and the two-stage flow), each run in its own process pinned by taskset to CORES cores.
#
# Why pinned: XLA's CPU client runs the devices' parts on a pool of max(schedulable cores, devices) threads. On
# the 2-core machine where the abort was seen that is 8 threads for 8 devices, the case the launcher
# (ltx_jax/parallel/launch.py) fixes; a process that saw all 16 cores would have 16 threads and could not show
# it. A run pinned to 1 or 2 cores has 8 again. CONTROL runs of a tree from before the launcher (d6c21e2^) show
# whether the abort happens on this machine at all: without it, clean runs of this tree would prove nothing.
#
# The trees, in a folder TREES names (carried with `run`, never committed):
#   git archive d6c21e2^ ltx_jax scripts | tar -x -C $TREES/before
#   git archive HEAD ltx_jax scripts csrc tests/torchaudio_stand_in.py | tar -x -C $TREES/after
# and the wheels the image lacks in .whl (carried; see compile_ahead_plan.sh): ltx-core 1.0.0 (the file writer
# builds each model with it), orbax-checkpoint 0.12.8, av.
#
#   TREES=DIR LANES=16 CORES=1 BUDGET_S=560 CONTROL=4 bash benchmarks/device/launch_stress.sh
#
# The first CONTROL lanes run the `before` tree (quantization none); the others run the `after` tree, lane i the
# configuration (i - CONTROL) mod the number of CONFIGS (default "none fp8-cast fp8 two-stage"), one run after
# another. A run is started only when it would end before BUDGET_S
# (RUN_S, default 150 s, or 1.2 times the lane's longest run so far). Each lane has its own compilation cache, so its
# first run compiles and the next ones load (the abort happens while programs run, not while they compile).
#
# Writes under $OUT: runs.txt (one line a run: lane, tree, configuration, exit status, seconds, whether its log
# has the rendezvous message), aborts.txt (the last lines of each run that did not exit 0), env.txt.
set -uo pipefail
TREES=${TREES:?set TREES to the folder holding before/ and after/ (see above)}
OUT=${OUT:-/tmp/out}
LANES=${LANES:-16}
CORES=${CORES:-1}
BUDGET_S=${BUDGET_S:-560}
RUN_S=${RUN_S:-150}
CONTROL=${CONTROL:-0}
read -r -a CONFIGS <<< "${CONFIGS:-none fp8-cast fp8 two-stage}"
DATA=/root/tiny
T0=$(date +%s)
ulimit -c 0  # an abort writes no core file
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    2>&1 | grep -v "already exists"
{
    date -u; nproc; free -g | head -2
    PYTHONPATH=/tmp/site python3 -c "import jax, flax; print('jax', jax.__version__, 'flax', flax.__version__)"
    echo "lanes $LANES x $CORES cores, control lanes $CONTROL, budget $BUDGET_S s"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [[ ! -f $DATA/manifest.json ]]; then
    PYTHONPATH=/tmp/site:$PWD/$TREES/after JAX_PLATFORMS=cpu timeout 200 \
        python3 "$TREES/after/scripts/make_synthetic_checkpoint.py" "$DATA" --tiny > /tmp/writer.log 2>&1
    if [[ ! -f $DATA/manifest.json ]]; then
        { echo "FAILED: the tiny files were not written:"; tail -20 /tmp/writer.log; } | tee -a "$OUT/runs.txt"
        exit 1
    fi
fi
echo "files ready at $(($(date +%s) - T0)) s" | tee -a "$OUT/env.txt"

flags_for() {  # CONFIGURATION -> the flags after the issue's command
    case $1 in
        none) ;;
        fp8-cast | fp8) echo "--quantization $1" ;;
        two-stage) echo "--pipeline two-stage --spatial-upsampler-path $DATA/ltx-2.3-spatial-upscaler-x2-1.0.safetensors \
--distilled-lora $DATA/ltx-2.3-22b-distilled-lora-384.safetensors --height 128 --width 128" ;;
    esac
}
lane() {  # LANE_INDEX
    local index=$1 tree=after i=0 longest=0 config cpus start took rc rendezvous
    config=${CONFIGS[$(((index - CONTROL) % ${#CONFIGS[@]}))]}
    ((index < CONTROL)) && tree=before config=none
    cpus=$((index * CORES))-$((index * CORES + CORES - 1))
    while true; do
        local need=$RUN_S
        ((longest * 12 / 10 > need)) && need=$((longest * 12 / 10))
        (($(date +%s) - T0 + need > BUDGET_S)) && break
        i=$((i + 1))
        local log=/tmp/lanes/$index-$i.log
        start=$(date +%s)
        # shellcheck disable=SC2046 - the flags are words
        PYTHONPATH=/tmp/site:$PWD/$TREES/$tree JAX_PLATFORMS=cpu XLA_FLAGS=--xla_force_host_platform_device_count=8 \
            timeout $((need + 60)) taskset -c "$cpus" python3 "$TREES/$tree/scripts/generate.py" --mesh 8 \
            --pipeline one-stage --checkpoint-path $DATA/ltx-2.3-22b-dev.safetensors \
            --gemma-root $DATA/gemma-3-12b-it-qat-q4_0-unquantized --height 128 --width 192 --num-frames 9 \
            --num-inference-steps 2 --output-path /tmp/lanes/out-$index-$i.mp4 --compile-cache-dir /tmp/cc-$index \
            --prompt "a fox in the snow" $(flags_for "$config") > "$log" 2>&1
        rc=$?
        took=$(($(date +%s) - start))
        ((took > longest)) && longest=$took
        rendezvous=no
        grep -q "join the rendezvous" "$log" && rendezvous=yes
        echo "lane $index cpus $cpus run $i tree $tree config $config exit $rc ${took}s rendezvous-message $rendezvous" \
            >> "$OUT/runs.txt"
        if ((rc != 0)); then
            { echo "######## lane $index run $i ($tree $config, exit $rc)"; tail -15 "$log"; } >> "$OUT/aborts.txt"
        fi
        rm -f /tmp/lanes/out-$index-$i*.mp4 core*
    done
}
mkdir -p /tmp/lanes
for ((index = 0; index < LANES; index++)); do
    lane "$index" &
done
wait
{
    echo
    echo "=== per tree and configuration: runs, exit 0, aborted with the rendezvous message, other failures"
    awk '$1 != "lane" {next}
         {key=$8" "$10; runs[key]++; if ($12==0) ok[key]++; else if ($15=="yes") rv[key]++; else other[key]++}
         END {for (k in runs) printf "%-22s runs %3d  exit-0 %3d  rendezvous %3d  other %3d\n", k, runs[k], ok[k], rv[k], other[k]}' \
        "$OUT/runs.txt" | sort
} | tee -a "$OUT/runs.txt"
