#!/usr/bin/env bash
# backend="ffi" with one process per GPU (CUDA IPC through the jax.distributed key-value store), on
# nvidia-h200-x2 (or -x4 with NPROC=4). Builds the library, runs tests/ffi_multiprocess_worker.py as
# NPROC processes (default 2; process i drives GPU i; coordinator on 127.0.0.1), then the one-process
# FFI GPU tests as a regression check. Results in $OUT; success = "ALL PASSED" from every worker and
# "0 failed" in the pytest summary. Run from the
# repository root with the wheels of .whl/ carried:
#   [NPROC=4] bash benchmarks/device/ffi_multiprocess.sh
set -uo pipefail
NPROC=${NPROC:-2}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD:$PWD/tests PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
{ nvidia-smi -L; nvidia-smi topo -m; python3 -c "import jax; print('jax', jax.__version__)"; } > "$OUT/machine.txt" 2>&1
# The library goes to the build cache, where the workers' load_library finds it (same jax and GPU).
if ! timeout 180 sh -c "python3 -m ltx_jax.ffi.build && python3 benchmarks/build_ffi_harness.py" \
    > "$OUT/build.txt" 2>&1; then
    echo "FAIL build"; tail -20 "$OUT/build.txt"; exit 1
fi
echo "PASS build"
port=$((20000 + RANDOM % 20000))
pids=()
for i in $(seq 0 $((NPROC - 1))); do
    timeout 270 python3 tests/ffi_multiprocess_worker.py "$port" "$i" "$NPROC" > "$OUT/worker$i.txt" 2>&1 &
    pids+=($!)
done
status=0
for i in $(seq 0 $((NPROC - 1))); do
    wait "${pids[$i]}"
    rc=$?
    [ "$rc" -eq 0 ] || { status=1; echo "FAIL worker $i exited with $rc (124: timed out); see worker$i.txt"; }
done
grep -h "^PASS\|^FAIL\|ALL PASSED\|^FAILED" "$OUT"/worker*.txt
for i in $(seq 0 $((NPROC - 1))); do [ "$status" -eq 0 ] || tail -30 "$OUT/worker$i.txt"; done
# One-process mode, unchanged API: harness, bit-exactness, SP, timeout (the IPC test ran just above).
LTX_JAX_REQUIRE_GPU=1 timeout 260 python3 -m pytest -q -m gpu tests/test_ffi.py -k "not two_processes" \
    -p no:cacheprovider > "$OUT/test_ffi_gpu.txt" 2>&1 || status=1
tail -3 "$OUT/test_ffi_gpu.txt"
echo "ffi_multiprocess: $([ "$status" -eq 0 ] && echo ALL PASSED || echo FAILED)"
exit "$status"
