#!/usr/bin/env bash
# Runs "$@" only on an H200 (issue #24's goals name one; the lent kind may bring an H100): on another card it
# prints the card and exits 3 at once, so a call that did not get an H200 costs only the machine's start.
# Output goes to $OUT/NAME.txt (NAME from $RESULT, default "run"), with the card and the tree on top.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name,power.limit --format=csv,noheader | head -1)
echo "$card"
if [[ "$card" != *H200* ]]; then
    echo "not an H200: nothing run"
    exit 3
fi
out="$OUT/${RESULT:-run}.txt"
{ echo "$card"; git log --oneline -1 2>/dev/null || true; echo "\$ $*"; } > "$out"
"$@" 2>&1 | grep -v -i "dynamo\|Delay kernel\|warnings.warn\|UserWarning" | tee -a "$out"
