#!/usr/bin/env bash
# The ASan + UBSan build of the replay drivers, in a build of its own, replaying every committed
# corpus file; and, where clang's libFuzzer is available, the libFuzzer targets themselves:
# fuzz_case runs clean for 60 s, fuzz_safetensors for 20 s, fuzz_decode_cpu runs clean on the
# production CPU kernels for 60 s,
# and against the planted bug it aborts from an accuracy call site (nonfinite: the slot it reads
# holds the buffer host's NaN poison; or o-tolerance) starting from a case where
# the bug does not show, with an artifact that replays and minimizes.
# Without clang the sanitized replays are built with the default compiler (KVF_SANITIZE=ON) and
# the libFuzzer part is skipped with the reason.
set -u
src=$1
build=$2
kvfuzz=$3
jobs=$(nproc 2>/dev/null || echo 2)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libfuzzer=0
why="clang is not installed (scripts/setup.sh installs it with KVF_WITH_CLANG=1)"
if command -v clang >/dev/null; then
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$tmp/probe.c"
  if clang -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" 2>"$tmp/probe.err"; then
    libfuzzer=1
  else
    why="clang cannot link libFuzzer: $(head -1 "$tmp/probe.err")"
  fi
fi

if [ $libfuzzer = 1 ]; then
  config=(-DCMAKE_C_COMPILER=clang -DKVF_FUZZERS=ON)
  targets=(fuzz_case fuzz_decode_cpu fuzz_safetensors fuzz_case_replay fuzz_decode_cpu_replay
    fuzz_safetensors_replay)
else
  config=(-DKVF_SANITIZE=ON)
  targets=(fuzz_case_replay fuzz_decode_cpu_replay fuzz_safetensors_replay)
fi
echo "sanitized build in $build: ${config[*]}"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVF_CUDA=OFF "${config[@]}" >"$tmp/configure.log" 2>&1 \
  || { cat "$tmp/configure.log"; echo "FAIL: cannot configure the sanitized build"; exit 1; }
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log"; echo "FAIL: cannot build the sanitized targets"; exit 1; }
bin=$build/fuzz

# ---- ASan + UBSan replays of every committed corpus file --------------------------------------
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for dir in "$src"/corpus/*/; do
  "$bin/fuzz_case_replay" "$dir" 2>"$tmp/r.err" || fail "sanitized fuzz_case_replay $dir: $(grep -v '^replaying' "$tmp/r.err" | tail -30)"
  "$bin/fuzz_decode_cpu_replay" --max-work=0 "$dir" 2>"$tmp/r.err" \
    || fail "sanitized fuzz_decode_cpu_replay $dir: $(grep -v '^replaying' "$tmp/r.err" | tail -30)"
  tail -1 "$tmp/r.err"
done

"$bin/fuzz_safetensors_replay" "$src/corpus/fuzz_safetensors" 2>"$tmp/r.err" \
  || fail "sanitized fuzz_safetensors_replay: $(grep -v '^replaying' "$tmp/r.err" | tail -30)"
tail -1 "$tmp/r.err"

if [ $libfuzzer = 0 ]; then
  echo "SKIP: libFuzzer part: $why"
else
  # ---- libFuzzer -----------------------------------------------------------------------------
  mkdir -p "$tmp/case" "$tmp/cpu" "$tmp/planted" "$tmp/art" "$tmp/planted-art"
  cp "$src"/corpus/fuzz_case/*.kvfz "$tmp/case/"
  cp "$src"/corpus/fuzz_decode_cpu/*.kvfz "$tmp/cpu/"
  # Bounded runs of a minute each: long enough to go past the corpus, short enough for CI.
  "$bin/fuzz_case" -seed=1 -max_total_time=60 -max_len=4096 -dict="$bin/fuzz_case.dict" \
    -artifact_prefix="$tmp/art/" "$tmp/case" >"$tmp/lf.log" 2>&1 || fail "fuzz_case found a problem: $(tail -40 "$tmp/lf.log")"
  "$bin/fuzz_decode_cpu" -seed=1 -max_total_time=60 -max_len=2048 -artifact_prefix="$tmp/art/" "$tmp/cpu" \
    >"$tmp/lf.log" 2>&1 || fail "fuzz_decode_cpu failed on the production CPU kernels: $(tail -60 "$tmp/lf.log")"
  grep -E "DONE" "$tmp/lf.log"
  mkdir -p "$tmp/st"
  cp "$src"/corpus/fuzz_safetensors/* "$tmp/st/"
  "$bin/fuzz_safetensors" -seed=1 -max_total_time=20 -max_len=4096 -artifact_prefix="$tmp/art/" \
    "$tmp/st" >"$tmp/lf.log" 2>&1 || fail "fuzz_safetensors found a problem: $(tail -40 "$tmp/lf.log")"

  # The planted bug, from a case where it does not show (every last page full).
  cp "$src/corpus/fuzz_decode_cpu/59-full-last-pages.kvfz" "$tmp/planted/"
  KVF_FUZZ_KERNEL=test-planted "$bin/fuzz_decode_cpu_replay" "$tmp/planted" >/dev/null 2>&1 \
    || fail "the planted bug already shows on the starting case"
  KVF_FUZZ_KERNEL=test-planted "$bin/fuzz_decode_cpu" -seed=1 -runs=20000 -max_total_time=120 \
    -max_len=2048 -artifact_prefix="$tmp/planted-art/" "$tmp/planted" >"$tmp/lf.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] || fail "libFuzzer did not find the planted bug in 20000 runs"
  grep -qE "kvfuzz finding: (o-tolerance|nonfinite) \(kernel test-planted" "$tmp/lf.log" \
    || fail "no full report for the planted bug: $(tail -30 "$tmp/lf.log")"
  grep -qE "in kvf_found_(o_tolerance|nonfinite)" "$tmp/lf.log" || fail "the abort is not from an accuracy call site"
  grep -E "^#[0-9]+" "$tmp/lf.log" | tail -1
  # Its own folder: an artifact another target left (a failure reported above) is not this one.
  artifact=$(ls "$tmp"/planted-art/crash-* 2>/dev/null | head -1)
  if [ -z "$artifact" ]; then
    fail "no crash artifact"
  else
    KVF_FUZZ_KERNEL=test-planted "$bin/fuzz_decode_cpu_replay" --keep-going "$artifact" >/dev/null 2>"$tmp/r.err"
    [ $? -eq 1 ] || fail "the artifact does not replay as a finding"
    grep -qE "^test-planted: (o-tolerance|nonfinite) rule strict" "$tmp/r.err" || fail "the artifact replays as: $(grep '^test-planted:' "$tmp/r.err")"
    "$kvfuzz" minimize "$artifact" -o "$tmp/min.kvfz" --kernel test-planted --jobs 2 >"$tmp/min.log" 2>&1 \
      || fail "the artifact does not minimize: $(cat "$tmp/min.log")"
    grep -E "before|after" "$tmp/min.log"
  fi
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "sanitized replays$([ $libfuzzer = 1 ] && echo " and libFuzzer targets"): all checks passed"
