#!/usr/bin/env bash
# One short device call on nvidia-h200-x4: full-width 8-block forward, one GPU against SP(4), written
# to $OUT as each run finishes (a run cut off by the time limit leaves the earlier ones).
#   bash benchmarks/device/four_gpu_sp.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/orbax*.whl .whl/tqdm*.whl 2>/dev/null
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for run in "24576 all_to_all" "6144 all_to_all" "24576 ffi"; do
    set -- $run
    [ "$2" = ffi ] && python3 -m ltx_jax.ffi.build > "$OUT/build.txt" 2>&1
    timeout 80 python3 benchmarks/sp_forward.py --mesh 4 --width full --layers 8 --tokens "$1" --audio-tokens 126 \
        --repeats 3 --backend "$2" > "$OUT/sp4_$1_$2.txt" 2>&1
    tail -2 "$OUT/sp4_$1_$2.txt"
done
