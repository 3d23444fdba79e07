#!/usr/bin/env bash
# scripts/gpu-checks.sh's contract where it can be checked without a GPU: usage errors exit 2
# with one sentence naming the problem, --help lists every option, and a tree whose kvfuzz
# has no usable GPU exits 77 before any step runs.
set -u
src=$1
build=$2
script=$src/scripts/gpu-checks.sh
# shellcheck source=tests/script_check.sh
. "$(dirname "$0")/script_check.sh"

expect 0 "" -- "$script" --help
for opt in --build --compare --flashinfer --campaign-time --mutant-budget --budget --out --steps; do
  grep -q -e "$opt" "$tmp/out" || fail "--help does not mention $opt"
done
expect 2 'unknown argument "--frob"' -- "$script" --frob
expect 2 '--budget needs a value' -- "$script" --build "$build" --budget
expect 2 '"0" is not a positive number' -- "$script" --build "$build" --budget 0
expect 2 '"12x" is not a positive number' -- "$script" --build "$build" --campaign-time 12x
expect 2 '"bench2" is not a step' -- "$script" --build "$build" --steps tests,bench2
expect 2 '--steps names no step' -- "$script" --build "$build" --steps ""
expect 2 'is not an executable \(build first' -- "$script" --build "$tmp/no-such-tree"
expect 2 '--compare .* is not an executable' -- "$script" --build "$build" --compare "$tmp/none"
expect 2 '--flashinfer .* does not exist' -- "$script" --build "$build" --flashinfer "$tmp/none.so"

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

# A kvfuzz whose kernel list names a usable cuda kernel early and goes on for long (the real
# list grows with the mutants): the script must see the GPU, not take the writer's broken pipe
# for its absence. Its `tests` step finds no test binaries in the fake tree and passes.
mkdir -p "$tmp/fake/cli"
cat >"$tmp/fake/cli/kvfuzz" <<'EOF2'
#!/usr/bin/env bash
[ "${1:-}" = kernels ] || exit 3
echo "kernel  dev  precision  description"
echo "cuda    cuda f32        CUDA split-KV decode"
for i in $(seq 1 20000); do echo "cpu-splitkv/mut=filler-$i  cpu  f32  a long list"; done
EOF2
chmod +x "$tmp/fake/cli/kvfuzz"
expect 0 "" -- "$script" --build "$tmp/fake" --steps tests --out "$tmp/fake-out"
grep -q 'gpu tests' "$tmp/out" || fail "with a usable cuda kernel listed, the tests step did not run"

finish "gpu-checks contract"
