#!/usr/bin/env bash
# The main job: set up, judge the shipped seed cases with the CUDA kernel where a GPU is usable
# (else both CPU kernels) under the strict rule and FlashInfer-Bench's rule, and write an
# error-distribution report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
kvfuzz=build/cli/kvfuzz
out=build/main-job
mkdir -p "$out"
if "$kvfuzz" kernels | grep -q '^cuda ' && ! "$kvfuzz" kernels | grep -q 'CUDA kernels unavailable'; then
  kernels=(--kernel cuda --kernel cpu-ref)
else
  echo "main job: no usable GPU, judging the CPU kernels"
  kernels=(--kernel cpu-ref --kernel cpu-splitkv)
fi
rc=0
"$kvfuzz" replay "${kernels[@]}" --rule strict --rule fib --stats "$out/stats.json" corpus/seeds || rc=$?
"$kvfuzz" report -o "$out/report" "$out/stats.json"
if [ "$rc" -eq 1 ]; then
  echo "main job: a rule failed (fib fails every correct kernel on empty sequences; see README)"
fi
exit "$rc"
