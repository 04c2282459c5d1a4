#!/usr/bin/env bash
# One call on nvidia-h200 after the generation-API refactor (issue #19): the GPU tests (attention
# backends, SequenceParallel, FSDP), the FFI build from the package, the pipeline object called three
# times, and the SP forward at LTX-2.3 width (8 blocks) with the package before (.trees/base = 53ebd33)
# and after, one after the other on the same GPU. Results under $OUT.
# PARTS picks what runs (each fits one 10-minute call): "tests" (build, GPU tests, pipeline), "sp".
#   mkdir -p .trees/base && git archive 53ebd33 ltx_jax | tar -x -C .trees/base
#   PARTS=tests bash benchmarks/device/api_checks.sh; PARTS=sp bash benchmarks/device/api_checks.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
PARTS=${PARTS:-tests sp}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LTX_JAX_CACHE_DIR=/tmp/ltx_cache
if [[ " $PARTS " == *" tests "* ]]; then
    timeout 90 python3 -m ltx_jax.ffi.build > "$OUT/ffi_build.txt" 2>&1
    LTX_JAX_REQUIRE_GPU=1 timeout 240 python3 -m pytest -m gpu -q tests/test_gpu.py tests/test_ffi.py \
        > "$OUT/gpu_tests.txt" 2>&1
    timeout 150 python3 benchmarks/pipeline_twice.py > "$OUT/pipeline_twice.txt" 2>&1
    cat "$OUT/ffi_build.txt"; tail -4 "$OUT/gpu_tests.txt"; tr "\r" "\n" < "$OUT/pipeline_twice.txt" | grep -E "built in|^seed"
fi
[[ " $PARTS " == *" sp "* ]] || exit 0
sp="benchmarks/sp_forward.py --mesh 1 --width full --layers 8 --audio-tokens 126 --repeats 10"
for tokens in 6144 24576; do
    for tree in .trees/base .; do
        echo "== $tree, $tokens tokens" >> "$OUT/sp_forward.txt"
        PYTHONPATH=/tmp/site:$(cd "$tree" && pwd) timeout 100 python3 $sp --tokens "$tokens" >> "$OUT/sp_forward.txt" 2>&1
    done
done
grep -E "^==|forward|SP\(" "$OUT/sp_forward.txt"
