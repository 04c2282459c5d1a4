#!/usr/bin/env bash
# LTX-2.5's diffusion video decoder on one GPU at 1024x1536x121: ltx-jax against ltx-core 1.2.0
# (benchmarks/bench_diffusion_decode.py, whose docstring says what is measured), the same random-weight decoder
# file (class-default config), latent, noise and tiles (TILING, default auto: upstream's AUTO_TILING pick from free
# CUDA memory, resolved in the ltx-core process). Each implementation in its own process: ltx-core 1.2.0 from
# /tmp/site12 (natten is absent, so its attention must be Triton: eager SDPA on the GPU fails the run), ltx-jax
# from the tree with /tmp/site (ltx-core 1.0.0 for the file writer, orbax-checkpoint, av).
#
#   run carries .whl (ltx-core 1.0.0, orbax-checkpoint 0.12.8, av) and .whl12 (ltx_core-1.2.0-*.whl: only it is
#   installed here; see ltx25_quick_start.sh for how it is built), timeout_s 600:
#     bash benchmarks/device/diffusion_decode.sh
#   knobs (environment): TILING (auto | none | F/O,H/O,W/O), DTYPE (bfloat16), REPEATS (3), SKIP_TINY (1: no tiny
#   check), CALL_S (560: the seconds the call may take, split between the two runs); anything jax reads
#   (e.g. XLA_PYTHON_CLIENT_MEM_FRACTION=0.95: by default jax may use 75% of the card) reaches ltx-jax's process.
#
# A tiny check comes first (both implementations, bf16, the tiny decoder; seconds), so that a setup that does not
# run stops the call before the big one. Then the full size, each process limited so that both fit the call
# (a slow reference cannot eat ltx-jax's time). Writes under $OUT: summary.txt (both tables), logs.txt (each run's
# log), results/ (each run's result.json), env.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
WORK=/tmp/bench_dd
mkdir -p "$OUT/results"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 |
    grep -v "already exists"
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site12 \
    .whl12/ltx_core-*.whl 2>&1 | grep -v "already exists"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import jax, torch; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__)"
    PYTHONPATH=/tmp/site12 python3 -c "import importlib.metadata as m; print('ltx-core', m.version('ltx-core'))"
    python3 -c "import triton; print('triton', triton.__version__)"
    python3 -c "import natten" 2> /dev/null && echo "natten: present" || echo "natten: absent"
    git rev-parse HEAD 2>/dev/null || cat REVISION 2>/dev/null
    free -g | head -2; df -h /tmp | tail -1
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
BENCH=(python3 benchmarks/bench_diffusion_decode.py all --core-pythonpath /tmp/site12:/tmp/site
    --dtype "${DTYPE:-bfloat16}")
collect() {  # $1: tiny or full
    for impl in ltx-core ltx-jax; do
        { echo "== $1 $impl"; tail -c 20000 "$WORK-$1/$impl/log.txt" 2> /dev/null; } >> "$OUT/logs.txt"
        cp "$WORK-$1/$impl/result.json" "$OUT/results/$1-$impl.json" 2> /dev/null
    done
}
code=0
if [[ -z "${SKIP_TINY:-}" ]]; then  # SKIP_TINY=1: a machine where the setup ran before (budget left for the run)
    echo "== tiny check" | tee -a "$OUT/summary.txt"
    timeout 200 "${BENCH[@]}" --tiny --work "$WORK-tiny" --repeats 1 --timeout 90 2>&1 | tee -a "$OUT/summary.txt"
    code=${PIPESTATUS[0]}
    collect tiny
fi
if ((code != 0)); then
    echo "FAILED: the tiny check (exit $code): nothing measured at full size (logs.txt)" | tee -a "$OUT/summary.txt"
    exit 1
fi
# what is left of the call's 600 s, less a margin for the driver (file, comparison), split between the two runs
per=$(((${CALL_S:-560} - SECONDS - 60) / 2))
((per > 240)) && per=240
if ((per < 90)); then
    echo "FAILED: $SECONDS s gone before the full size: too little left for it" | tee -a "$OUT/summary.txt"
    exit 1
fi
# no warm decode starts past --budget s after the first one's start: imports, noise and saving take the rest
echo "== full size, $per s a process ($SECONDS s into the call)" | tee -a "$OUT/summary.txt"
timeout $((2 * per + 60)) "${BENCH[@]}" --work "$WORK-full" --tiling "${TILING:-auto}" --repeats "${REPEATS:-3}" \
    --timeout "$per" --budget $((per - 60)) 2>&1 | tee -a "$OUT/summary.txt"
code=${PIPESTATUS[0]}
collect full
echo "exit $code, $SECONDS s in all" | tee -a "$OUT/summary.txt"
exit "$code"
