#!/usr/bin/env bash
# The main job: set up, then judge the shipped seed cases with the CUDA kernel where a GPU is
# usable, else with both CPU kernels, under the strict rule and FlashInfer-Bench's rule.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
kvfuzz=build/cli/kvfuzz
if "$kvfuzz" kernels | grep -q '^cuda ' && ! "$kvfuzz" kernels | grep -q 'CUDA kernels unavailable'; then
  kernels=(--kernel cuda)
else
  echo "main job: no usable GPU, judging the CPU kernels"
  kernels=(--kernel cpu-ref --kernel cpu-splitkv)
fi
exec "$kvfuzz" replay "${kernels[@]}" --rule strict --rule fib corpus/seeds
