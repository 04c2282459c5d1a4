#!/usr/bin/env bash
# One device call on nvidia-h200 (one H200, < 7 minutes; carry .whl): the ring's cuDNN block kernel
# (issue #11) in the GPU tests, then the attention benchmark (issue #9) with its ring, Pallas and
# batch-4 rows. Results in $OUT: gpu_ring_tests.txt, bench_attention.txt, bench_attention.json.
#   bash benchmarks/device/attention_ring.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -d /tmp/site/ltx_core ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/machine.txt"
python3 -c "import jax, torch; print('jax', jax.__version__, 'torch', torch.__version__)" >> "$OUT/machine.txt"
LTX_JAX_REQUIRE_GPU=1 timeout 140 python3 -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -rA \
    -k "cudnn_block_attention_matches_xla or ring_cudnn_on_all_gpus" > "$OUT/gpu_ring_tests.txt" 2>&1
tail -3 "$OUT/gpu_ring_tests.txt"
timeout 250 python3 benchmarks/bench_attention.py --out "$OUT" > "$OUT/bench_attention.txt" 2>&1
tail -80 "$OUT/bench_attention.txt"
