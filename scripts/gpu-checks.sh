#!/usr/bin/env bash
# The GPU checks of a change that touches CUDA code, in one timed pass on a machine with a GPU,
# from a built tree (docs/performance.md, "FP8 caches", says when to run it):
#   1. the `gpu` label's test binaries, run directly (CTest files hold absolute paths, so a
#      tree built elsewhere runs this way);
#   2. `kvfuzz bench` with FP8 and bf16 caches, beside a second kvfuzz build (--compare) and a
#      FlashInfer plugin (--flashinfer) in the same runs;
#   3. `kvfuzz mutants --device cuda`;
#   4. FP8 campaigns side by side (cuda, cpu-splitkv and the FlashInfer kernels), with
#      compute-sanitizer's memcheck and racecheck of the cuda kernel on FP8 cases beside them.
# --steps picks some of them (a device lent for a few minutes at a time can run the pass in
# parts). Each step's output goes to a file under --out; the summary goes to standard output. Later
# steps shrink to fit --budget (the campaigns first); a step that no longer fits is skipped and
# named. Exit status: 0 when every step that ran passed, 1 when one failed (the summary names
# it), 2 on bad usage, 77 when no GPU is usable.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu-checks.sh [--build DIR] [--compare KVFUZZ] [--flashinfer PLUGIN.so]
                             [--campaign-time S] [--mutant-budget S] [--budget S] [--out DIR]
                             [--steps LIST]

  --build DIR          the built tree (default build): DIR/cli/kvfuzz and DIR/tests/test_*
  --compare KVFUZZ     a second kvfuzz binary (another build option) benched beside the first
  --flashinfer SO      libkvf_flashinfer.so: its kernels join the benches and the campaigns
  --campaign-time S    seconds per campaign (default 300)
  --mutant-budget S    kvfuzz mutants --budget and --controls-budget (default 20)
  --budget S           the whole pass's seconds (default 1200); later steps shrink to fit
  --out DIR            where each step's output goes (default DIR/gpu-checks)
  --steps LIST         the steps to run, comma-separated, of tests, bench, mutants and
                       campaigns (default all four)
EOF
}

src=$(cd "$(dirname "$0")/.." && pwd)
build=build compare="" fi="" camp=300 mbudget=20 budget=1200 out="" steps=tests,bench,mutants,campaigns
while [ $# -gt 0 ]; do
  case "$1" in
  --build | --compare | --flashinfer | --campaign-time | --mutant-budget | --budget | --out | --steps)
    [ $# -ge 2 ] || { echo "gpu-checks: $1 needs a value" >&2; exit 2; }
    case "$1" in
    --build) build=$2 ;;
    --compare) compare=$2 ;;
    --flashinfer) fi=$2 ;;
    --campaign-time) camp=$2 ;;
    --mutant-budget) mbudget=$2 ;;
    --budget) budget=$2 ;;
    --out) out=$2 ;;
    --steps) steps=$2 ;;
    esac
    shift 2
    ;;
  -h | --help) usage; exit 0 ;;
  *) echo "gpu-checks: unknown argument \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$camp" "$mbudget" "$budget"; do
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -eq 0 ]; then
    echo "gpu-checks: \"$n\" is not a positive number of seconds" >&2
    exit 2
  fi
done
IFS=, read -ra wanted <<<"$steps"
[ ${#wanted[@]} -gt 0 ] || { echo "gpu-checks: --steps names no step" >&2; exit 2; }
for w in "${wanted[@]}"; do
  case "$w" in
  tests | bench | mutants | campaigns) ;;
  *) echo "gpu-checks: --steps: \"$w\" is not a step (tests, bench, mutants, campaigns)" >&2; exit 2 ;;
  esac
done
want() { [[ ",$steps," == *",$1,"* ]]; }
kvfuzz=$build/cli/kvfuzz
[ -x "$kvfuzz" ] || { echo "gpu-checks: $kvfuzz is not an executable (build first, or give --build)" >&2; exit 2; }
[ -z "$compare" ] || [ -x "$compare" ] || { echo "gpu-checks: --compare $compare is not an executable" >&2; exit 2; }
[ -z "$fi" ] || [ -f "$fi" ] || { echo "gpu-checks: --flashinfer $fi does not exist" >&2; exit 2; }
# The list is read whole first: grep -q stops reading at its match, and under pipefail the
# writer's broken pipe would count as "no GPU" on a machine that has one.
kernels_list=$("$kvfuzz" kernels 2>&1)
if ! grep -q '^cuda ' <<<"$kernels_list" || grep -q 'CUDA kernels unavailable' <<<"$kernels_list"; then
  echo "gpu-checks: no usable GPU (kvfuzz kernels lists no usable cuda kernel): nothing to check"
  exit 77
fi
out=${out:-$build/gpu-checks}
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
export KVF_SOURCE_DIR=$src
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((budget - $(elapsed))); }
failed=()
say() { echo "[$(elapsed) s] $*"; }

# 1. The gpu label's binaries (77: skipped with the reason).
if want tests; then
  say "gpu tests"
  for t in "$build"/tests/test_gpu_* "$build"/tests/test_cuda_host "$build"/tests/test_mma_model \
    "$build"/tests/test_fp8_widen; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    timeout 300 "$t" >"$out/$name.txt" 2>&1
    rc=$?
    case $rc in
    0) echo "  $name: passed" ;;
    77) echo "  $name: skipped: $(tail -1 "$out/$name.txt")" ;;
    *) echo "  $name: exit $rc (output in $out/$name.txt)"; failed+=("$name") ;;
    esac
  done
fi

# 2. Benches: FP8 caches at the roofline target's shapes, bf16 for reference.
if want bench; then
  fargs=()
  [ -n "$fi" ] && fargs=(--kernel "$fi:flashinfer")
  bench() { # label, kvfuzz binary, bench arguments...
    local label=$1 bin=$2
    shift 2
    echo "== $label: bench $*" >>"$out/bench.txt"
    timeout 120 "$bin" bench "$@" >>"$out/bench.txt" 2>&1 || { echo "  bench $label $*: exit $?"; bench_failed=$((bench_failed + 1)); }
  }
  say "benches (output in $out/bench.txt)"
  : >"$out/bench.txt"
  bench_failed=0
  bins=("$kvfuzz")
  [ -n "$compare" ] && bins+=("$compare")
  for bin in "${bins[@]}"; do
    label=$([ "$bin" = "$kvfuzz" ] && echo build || echo compare)
    for dt in e4m3 e5m2; do
      bench "$label" "$bin" --kv-dtype $dt --scales tensor --batch 32 --len 4096 --kernel cuda "${fargs[@]}"
      bench "$label" "$bin" --kv-dtype $dt --scales tensor --batch 128 --len 4096 --kernel cuda "${fargs[@]}"
    done
    bench "$label" "$bin" --kv-dtype e4m3 --scales token --batch 32 --len 4096 --kernel cuda
  done
  bench build "$kvfuzz" --batch 128 --len 4096 --kernel cuda "${fargs[@]}"
  grep -E '^==|^ *(cuda|.*flashinfer) ' "$out/bench.txt" | cut -c1-150
  [ $bench_failed = 0 ] || failed+=("$bench_failed bench run(s)")
fi

# 3. Mutants (twice the budget per mutant bounds it, plus the controls).
if want mutants; then
  if [ "$(left)" -gt $((mbudget * 4)) ]; then
    say "mutants (--budget $mbudget)"
    timeout $(($(left) - 10)) "$kvfuzz" mutants --device cuda --budget "$mbudget" \
      --controls-budget "$mbudget" --jobs "$(nproc)" >"$out/mutants.txt" 2>&1
    rc=$?
    tail -1 "$out/mutants.txt" | sed 's/^/  /'
    [ $rc = 0 ] || failed+=("mutants (exit $rc)")
  else
    say "mutants skipped: $(left) s left"
  fi
fi

# 4. FP8 campaigns side by side, the sanitizer beside them.
if want campaigns; then
  c=$camp
  [ "$(left)" -lt $((c + 60)) ] && c=$(($(left) - 60))
  if [ "$c" -ge 30 ]; then
    kernels=(cuda cpu-splitkv)
    [ -n "$fi" ] && kernels+=("$fi:flashinfer" "$fi:flashinfer-nosplit")
    jobs=$(($(nproc) / (${#kernels[@]} + 1)))
    [ "$jobs" -ge 1 ] || jobs=1
    say "FP8 campaigns, $c s each: ${kernels[*]}"
    pids=()
    for k in "${kernels[@]}"; do
      n=$(basename "${k//:/_}")
      "$kvfuzz" fuzz --kernel "$k" --kv-dtype fp8 --time "$c" --seed 7 --jobs "$jobs" \
        --findings "$out/findings-$n" --stats "$out/stats-$n.json" >"$out/campaign-$n.txt" 2>&1 &
      pids+=($!)
    done
    if command -v compute-sanitizer >/dev/null; then
      (timeout $((c + 30)) compute-sanitizer --tool memcheck --error-exitcode 9 "$kvfuzz" fuzz \
        --kernel cuda --kv-dtype fp8 --runs 40 --in-process --seed 5 >"$out/memcheck.txt" 2>&1
      echo "memcheck exit $?" >>"$out/memcheck.txt"
      timeout $((c + 30)) compute-sanitizer --tool racecheck --error-exitcode 9 "$kvfuzz" fuzz \
        --kernel cuda --kv-dtype fp8 --runs 20 --in-process --seed 3 >"$out/racecheck.txt" 2>&1
      echo "racecheck exit $?" >>"$out/racecheck.txt") &
      pids+=($!)
    fi
    i=0
    for p in "${pids[@]}"; do
      wait "$p"
      rc=$?
      if [ $i -lt ${#kernels[@]} ]; then
        n=$(basename "${kernels[$i]//:/_}")
        echo "  ${kernels[$i]}: exit $rc; $(grep -E 'findings:' "$out/campaign-$n.txt" | head -1 | sed 's/^ *//')"
        [ $rc = 0 ] || failed+=("campaign ${kernels[$i]} (exit $rc)")
      fi
      i=$((i + 1))
    done
    for f in memcheck racecheck; do
      [ -f "$out/$f.txt" ] || continue
      r=$(tail -1 "$out/$f.txt")
      echo "  $r"
      [ "$r" = "$f exit 0" ] || failed+=("$f")
    done
  else
    say "campaigns skipped: $(left) s left"
  fi
fi

say "done; outputs in $out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-checks: failed: ${failed[*]}"
  exit 1
fi
echo "gpu-checks: every step that ran passed"
