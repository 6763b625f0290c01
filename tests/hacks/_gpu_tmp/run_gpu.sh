#!/bin/bash
# usage: run_gpu.sh LIST  (lines: problem_id solution_path) ; run from the repo root on the device
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(pwd)
mkdir -p /tmp/head && tar -xzf "$HERE/head.tar.gz" -C /tmp/head
export PYTHONUNBUFFERED=1
while read -r prob sol; do
  [ -z "$prob" ] && continue
  name=$(basename "$sol" .py)
  start=$(date +%s)
  line=$(cd /tmp/head && timeout 150 python3 scripts/eval_kernel.py --device cuda --cache "$OUT/cache.sqlite" --problem "$prob" --solution "$REPO/$sol" 2>>"$OUT/stderr.log" | tail -n 1)
  echo "{\"file\": \"$name\", \"problem\": \"$prob\", \"secs\": $(( $(date +%s) - start )), \"verdict\": ${line:-null}}" >> "$OUT/results.jsonl"
  echo "$name done in $(( $(date +%s) - start ))s: ${line:0:200}"
done < "$1"
