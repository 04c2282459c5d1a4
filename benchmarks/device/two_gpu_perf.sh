#!/usr/bin/env bash
# One device call on nvidia-h200-x2: attention kernels at the SP shard shapes (one GPU) and the
# full-width 8-block DiT forward on one GPU vs SP(2) with each head-exchange backend. Results in $OUT.
#   bash benchmarks/device/two_gpu_perf.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m ltx_jax.ffi.build > "$OUT/build.txt" 2>&1
timeout 200 python3 benchmarks/bench_attention.py --repeats 5 > "$OUT/bench_attention.txt" 2>&1
cat "$OUT/bench_attention.txt"
for tokens in 6144 24576; do
    for backend in ${BACKENDS:-all_to_all ffi}; do
        timeout 100 python3 benchmarks/sp_forward.py --mesh 2 --width full --layers 8 --tokens "$tokens" \
            --audio-tokens 126 --repeats 5 --backend "$backend" > "$OUT/sp_${tokens}_${backend}.txt" 2>&1
        tail -3 "$OUT/sp_${tokens}_${backend}.txt"
    done
done
