#!/usr/bin/env bash
# One call on nvidia-h200: the DiT forward (benchmarks/bench_step.py, ltx-jax against ltx-core in the
# same process) for each version of the package, one after another on the same GPU, so that every
# optimization is measured against the one before it in the same run. TREES holds directories
# that each contain an `ltx_jax` package (e.g. `git archive REV ltx_jax | tar -x -C .trees/NAME`);
# "." is the working tree. FLAGS_TREE is also run once more under XLA_FLAGS=$EXTRA_XLA_FLAGS
# (a version with DIT_COMPILER_OPTIONS compiles with those, which take precedence over XLA_FLAGS).
#   TREES=".trees/base .trees/attention_bnth ." bash benchmarks/device/optimize_step.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
TREES=${TREES:-.}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
run() {  # name tree [XLA_FLAGS]
    local name=$1 tree=$2
    local path; path=$(cd "$tree" && pwd)
    echo "== $name (ltx_jax from $path; XLA_FLAGS=${3:-})" > "$OUT/step_$name.txt"
    PYTHONPATH=/tmp/site:$path XLA_FLAGS=${3:-} timeout 150 python3 benchmarks/bench_step.py --repeats 10 \
        >> "$OUT/step_$name.txt" 2>&1
}
for tree in $TREES; do
    name=$(basename "$(cd "$tree" && pwd)")
    [ "$tree" = "." ] && name=working_tree
    run "$name" "$tree"
done
if [ -n "${EXTRA_XLA_FLAGS:-}" ]; then run "working_tree_flags" "${FLAGS_TREE:-.}" "$EXTRA_XLA_FLAGS"; fi
for f in "$OUT"/step_*.txt; do head -1 "$f"; grep -A3 "video tokens" "$f"; grep -i "error" "$f" | tail -3; done
