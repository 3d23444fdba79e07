#!/usr/bin/env bash
# Every committed corpus file, replayed through the CPU replay drivers: the decoder target
# (any file: decodes and validates, or is rejected cleanly) and the CPU kernels against the
# oracle (no size cap, so the large seed cases are judged too). Each target's seed corpus has at
# least 40 cases.
set -u
case_replay=$1
decode_replay=$2
src=$3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for t in fuzz_case fuzz_decode_cpu fuzz_decode_cuda; do
  n=$(ls "$src/corpus/$t"/*.kvfz 2>/dev/null | wc -l)
  [ "$n" -ge 40 ] || fail "corpus/$t has $n cases, fewer than 40"
done
for dir in "$src"/corpus/*/; do
  "$case_replay" "$dir" 2>"${TMPDIR:-/tmp}/kvf-replay.$$" || fail "fuzz_case_replay $dir: $(tail -20 "${TMPDIR:-/tmp}/kvf-replay.$$")"
  "$decode_replay" --max-work=0 "$dir" 2>"${TMPDIR:-/tmp}/kvf-replay.$$" || fail "fuzz_decode_cpu_replay $dir: $(grep -v '^replaying' "${TMPDIR:-/tmp}/kvf-replay.$$" | tail -40)"
  tail -1 "${TMPDIR:-/tmp}/kvf-replay.$$"
done
# The safetensors reader's own corpus (docs/fib.md) through its target's replay driver.
st_replay=$(dirname "$case_replay")/fuzz_safetensors_replay
"$st_replay" "$src/corpus/fuzz_safetensors" 2>"${TMPDIR:-/tmp}/kvf-replay.$$" \
  || fail "fuzz_safetensors_replay: $(tail -20 "${TMPDIR:-/tmp}/kvf-replay.$$")"
tail -1 "${TMPDIR:-/tmp}/kvf-replay.$$"
rm -f "${TMPDIR:-/tmp}/kvf-replay.$$"
[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "corpus replay: all files pass"
