#!/usr/bin/env bash
# One device call on nvidia-h200-x2 (two NVLinked H200s): the GPU tests (incl. the FFI all-to-all),
# the embedded generation on a 2-GPU mesh with both head-exchange backends, and the all-to-all
# benchmark. Results go to $OUT. Run from the repository root with the wheels of .whl/ carried:
#   bash benchmarks/device/two_gpu_checks.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/machine.txt"
python3 -c "import jax, torch; print('jax', jax.__version__, 'torch', torch.__version__)" >> "$OUT/machine.txt"
{ python3 -m ltx_jax.ffi.build && python3 benchmarks/build_ffi_harness.py; } > "$OUT/build.txt" 2>&1
LTX_JAX_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -m gpu tests/test_gpu.py tests/test_ffi.py -p no:cacheprovider \
    > "$OUT/gpu_tests.txt" 2>&1
tail -3 "$OUT/gpu_tests.txt"
for backend in all_to_all ffi; do
    timeout 120 python3 scripts/generate.py --mesh 2 --backend "$backend" --output-path "$OUT/gen_$backend.mp4" \
        --save-latents "$OUT/latents_$backend.npz" > "$OUT/generate_$backend.txt" 2>&1
    tail -4 "$OUT/generate_$backend.txt"
done
python3 - "$OUT" <<'PY' > "$OUT/generate_backends.txt" 2>&1
import sys, numpy as np
out = sys.argv[1]
a, b = np.load(f"{out}/latents_all_to_all.npz"), np.load(f"{out}/latents_ffi.npz")
for k in a.files:
    print(k, "bit-exact" if np.array_equal(a[k], b[k]) else f"max diff {np.abs(a[k] - b[k]).max():.3e}")
PY
cat "$OUT/generate_backends.txt"
timeout 150 python3 benchmarks/bench_all2all.py > "$OUT/bench_all2all.txt" 2>&1
tail -8 "$OUT/bench_all2all.txt"
