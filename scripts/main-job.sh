#!/usr/bin/env bash
# The main job: set up; judge the shipped seed cases under the strict rule and FlashInfer-Bench's
# rule; run a short fuzz campaign (KVF_MAIN_JOB_SECONDS, default 60) on the CUDA kernel where a
# GPU is usable, else on cpu-splitkv; write one error-distribution report over both.
# Exit status: the campaign's (0 no finding, 1 findings saved under build/main-job/findings).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
kvfuzz=build/cli/kvfuzz
out=build/main-job
seconds=${KVF_MAIN_JOB_SECONDS:-60}
rm -rf "$out"
mkdir -p "$out"
if "$kvfuzz" kernels | grep -q '^cuda ' && ! "$kvfuzz" kernels | grep -q 'CUDA kernels unavailable'; then
  kernel=cuda
else
  echo "main job: no usable GPU, fuzzing the CPU split-KV kernel"
  kernel=cpu-splitkv
fi
# The seed cases: fib's verdicts are shown for comparison (it fails every correct kernel on
# empty sequences, see README), so this step does not decide the exit status.
"$kvfuzz" replay --kernel "$kernel" --kernel cpu-ref --rule strict --rule fib \
  --stats "$out/seeds-stats.json" corpus/seeds || true
rc=0
"$kvfuzz" fuzz --kernel "$kernel" --time "$seconds" --seed 1 --findings "$out/findings" \
  --stats "$out/fuzz-stats.json" || rc=$?
"$kvfuzz" report -o "$out/report" --findings "$out/findings" "$out/seeds-stats.json" "$out/fuzz-stats.json"
exit "$rc"
