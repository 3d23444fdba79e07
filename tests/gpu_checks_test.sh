#!/usr/bin/env bash
# scripts/gpu-checks.sh's contract where it can be checked without a GPU: usage errors exit 2
# with one sentence naming the problem, --help lists every option, and a tree whose kvfuzz
# has no usable GPU exits 77 before any step runs.
set -u
src=$1
build=$2
script=$src/scripts/gpu-checks.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE PATTERN ARGS...: exit code and a one-line stderr matching PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 2
  "$script" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "gpu-checks $* exited $rc, expected $code; stderr: $(cat "$tmp/err")"
  if [ -n "$pattern" ]; then
    grep -Eq -e "$pattern" "$tmp/err" || fail "gpu-checks $*: stderr does not match /$pattern/: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "gpu-checks $*: error is not one line: $(cat "$tmp/err")"
  fi
}

expect 0 "" --help
for opt in --build --compare --flashinfer --campaign-time --mutant-budget --budget --out --steps; do
  grep -q -e "$opt" "$tmp/out" || fail "--help does not mention $opt"
done
expect 2 'unknown argument "--frob"' --frob
expect 2 '--budget needs a value' --build "$build" --budget
expect 2 '"0" is not a positive number' --build "$build" --budget 0
expect 2 '"12x" is not a positive number' --build "$build" --campaign-time 12x
expect 2 '"bench2" is not a step' --build "$build" --steps tests,bench2
expect 2 '--steps names no step' --build "$build" --steps ""
expect 2 'is not an executable \(build first' --build "$tmp/no-such-tree"
expect 2 '--compare .* is not an executable' --build "$build" --compare "$tmp/none"
expect 2 '--flashinfer .* does not exist' --build "$build" --flashinfer "$tmp/none.so"

if "$build/cli/kvfuzz" kernels 2>&1 | grep -q 'CUDA kernels unavailable' ||
  ! "$build/cli/kvfuzz" kernels 2>&1 | grep -q '^cuda '; then
  "$script" --build "$build" --out "$tmp/out-dir" >"$tmp/out" 2>&1
  rc=$?
  [ $rc -eq 77 ] || fail "without a usable GPU gpu-checks exited $rc, expected 77: $(cat "$tmp/out")"
  grep -q 'no usable GPU' "$tmp/out" || fail "the no-GPU exit does not say why: $(cat "$tmp/out")"
  [ ! -e "$tmp/out-dir" ] || fail "without a GPU gpu-checks still created its output folder"
else
  echo "a usable GPU: the exit without one (77) is not checked here"
fi

if [ $failures -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "gpu-checks contract: all checks passed"
