#!/usr/bin/env bash
# On nvidia-h200-x4, after benchmarks/device/ffi_multiprocess.sh built the library: the full-width
# 8-block DiT forward on one GPU against SP(2) and SP(4) with each head exchange (lax.all_to_all,
# the ffi custom call, and the ffi call marked CUDA-graph compatible), at 6,144 and 24,576 video
# tokens. Results in $OUT.
#   bash benchmarks/device/four_gpu_sp_sweep.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "from ltx_jax.ffi.paths import find_library; find_library()" 2>/dev/null \
    || python3 -m ltx_jax.ffi.build > "$OUT/build.txt" 2>&1
for tokens in 6144 24576; do
    timeout 230 python3 benchmarks/sp_forward.py --mesh 2 4 --width full --layers 8 --tokens "$tokens" \
        --audio-tokens 126 --repeats 5 --backend all_to_all ffi ffi_graph > "$OUT/sp_sweep_$tokens.txt" 2>&1
    tail -7 "$OUT/sp_sweep_$tokens.txt"
done
