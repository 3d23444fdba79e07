#!/usr/bin/env bash
# `kvfuzz fuzz` and `kvfuzz minimize` end to end: the planted bug is found within a bounded run,
# each finding replays to the same class and the same numbers and minimizes; a crashing and a
# hanging kernel are survived and recorded; SIGINT and SIGTERM stop cleanly with a summary and
# leave no partial files; a production kernel gives nothing; usage errors exit 2.
set -u
kvfuzz=$1
replay=$2
src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run CODE -- command...: the exit code must be CODE; output in $tmp/out, $tmp/err.
run() {
  local code=$1
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(tail -5 "$tmp/err")"
}

# Nothing temporary is left in a folder.
check_no_temp() {
  if ls -A "$1" | grep -q '^\.'; then fail "temporary files left in $1: $(ls -A "$1" | grep '^\.')"; fi
}

# Every finding is a pair, and nothing temporary is left in the folder.
check_pairs() {
  local dir=$1
  for f in "$dir"/*.kvfz; do
    [ -e "$f" ] || continue
    [ -s "${f%.kvfz}.json" ] || fail "$f has no report beside it"
  done
  for j in "$dir"/*.json; do
    [ -e "$j" ] || continue
    [ "$(basename "$j")" = stats.json ] && continue # the campaign's error statistics
    [ -s "${j%.json}.kvfz" ] || fail "$j has no case beside it"
  done
  check_no_temp "$dir"
}

# ---- usage -------------------------------------------------------------------------------
for sub in fuzz minimize; do
  run 0 -- "$kvfuzz" "$sub" --help
  grep -q "usage: kvfuzz $sub" "$tmp/out" || fail "$sub --help does not print its usage"
done
run 2 -- "$kvfuzz" fuzz --kernel nope
grep -q "unknown kernel" "$tmp/err" || fail "fuzz --kernel nope: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" fuzz --runs 0
run 2 -- "$kvfuzz" fuzz --time 1 --runs 3
grep -q "not both" "$tmp/err" || fail "fuzz --time --runs: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" fuzz --frob
run 2 -- "$kvfuzz" fuzz --rule allclose:x:1
run 2 -- "$kvfuzz" minimize
run 2 -- "$kvfuzz" minimize "$src/corpus/fuzz_decode_cpu/00-seed-shape-49-tokens.kvfz"
grep -q -- "-o OUT is required" "$tmp/err" || fail "minimize without -o: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" minimize "$src/corpus/fuzz_decode_cpu/00-seed-shape-49-tokens.kvfz" -o "$tmp/x.kvfz" --kernel cpu-splitkv
grep -q "does not fail" "$tmp/err" || fail "minimize of a passing case: $(cat "$tmp/err")"

# ---- the planted bug ---------------------------------------------------------------------
run 1 -- "$kvfuzz" fuzz --kernel test-planted --runs 300 --seed 3 --jobs 2 --findings "$tmp/f" --corpus "$tmp/c"
grep -q "cases 300" "$tmp/out" || fail "planted run summary: $(cat "$tmp/out")"
# The slot the planted bug reads holds the buffer host's NaN poison (nonfinite), or data of a
# sequence sharing the page (o-tolerance).
ls "$tmp/f"/nonfinite-*.kvfz "$tmp/f"/o-tolerance-*.kvfz 2>/dev/null | grep -q . \
  || fail "no accuracy finding for the planted bug: $(ls "$tmp/f")"
check_pairs "$tmp/f"
check_no_temp "$tmp/c"
[ "$(ls "$tmp/c" | wc -l)" -gt 0 ] || fail "the corpus did not grow"

# Replay: each finding reproduces with the same class and numbers as its report.
for f in "$tmp/f"/*.kvfz; do
  KVF_FUZZ_KERNEL=test-planted "$replay" --keep-going "$f" >/dev/null 2>"$tmp/replay"
  [ $? -eq 1 ] || fail "replay of $f did not report a finding"
  line=$(grep '^test-planted: [a-z-]* rule' "$tmp/replay" | tail -1)
  python3 - "${f%.kvfz}.json" "$line" <<'PY' || fail "replay of $f differs from its report"
import json, sys
rep = json.load(open(sys.argv[1]))
words = sys.argv[2].split()
got = dict(zip(words[4::2], words[5::2]))
cls = words[1]
assert cls == rep["class"], (cls, rep["class"])
v = [v for v in rep["verdicts"] if v["rule"] == rep["rule"]][0]
m = v["lse"] if cls == "lse-tolerance" else v["o"]
def num(x):
    return float(x)  # the report writes inf and nan as strings
for key, field in (("max_abs", "max_abs"), ("max_rel", "max_rel_fib"), ("max_ulp", "max_ulps"), ("margin", "max_margin")):
    a, b = float(got[key]), num(m[field])
    assert a == b or (a != a and b != b), (key, a, b)
PY
done

# Minimize: smaller, same class.
f=$(ls "$tmp/f"/nonfinite-*.kvfz "$tmp/f"/o-tolerance-*.kvfz 2>/dev/null | head -1)
cls=$(basename "$f" | sed 's/-[0-9a-f]*\.kvfz$//')
run 0 -- "$kvfuzz" minimize "$f" -o "$tmp/min.kvfz" --jobs 2
grep -q "before:" "$tmp/out" && grep -q "after:" "$tmp/out" || fail "minimize does not print sizes: $(cat "$tmp/out")"
grep -q "still fails: $cls" "$tmp/out" || fail "minimize lost the class $cls: $(cat "$tmp/out")"
KVF_FUZZ_KERNEL=test-planted "$replay" --keep-going "$tmp/min.kvfz" >/dev/null 2>"$tmp/replay"
grep -q "^test-planted: $cls rule" "$tmp/replay" || fail "the minimized case does not replay as $cls"

# ---- crash and hang ----------------------------------------------------------------------
run 1 -- "$kvfuzz" fuzz --kernel test-crash --runs 60 --seed 3 --jobs 2 --findings "$tmp/fc"
grep -q "cases 60" "$tmp/out" || fail "the crash run did not go on: $(cat "$tmp/out")"
ls "$tmp/fc"/crash-*.kvfz >/dev/null 2>&1 || fail "no crash finding"
grep -q '"signal": 11' "$tmp/fc"/crash-*.json || fail "the crash report lacks the signal"
check_pairs "$tmp/fc"
run 0 -- "$kvfuzz" minimize "$(ls "$tmp/fc"/crash-*.kvfz | head -1)" -o "$tmp/minc.kvfz"
grep -q "still fails: crash" "$tmp/out" || fail "a crash does not minimize: $(cat "$tmp/out")"

run 1 -- "$kvfuzz" fuzz --kernel test-hang --runs 25 --seed 5 --deadline 0.3 --jobs 2 --findings "$tmp/fh"
grep -q "cases 25" "$tmp/out" || fail "the hang run did not go on: $(cat "$tmp/out")"
ls "$tmp/fh"/hang-*.kvfz >/dev/null 2>&1 || fail "no hang finding"
check_pairs "$tmp/fh"

# ---- a production kernel -----------------------------------------------------------------
run 0 -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 150 --seed 1 --jobs 2 --findings "$tmp/fp"
[ -z "$(ls -A "$tmp/fp" | grep -v '^stats.json$')" ] || fail "cpu-splitkv produced findings: $(ls "$tmp/fp")"
[ -s "$tmp/fp/stats.json" ] || fail "the campaign wrote no statistics beside its findings"
# Every judged case reaches the statistics (the oracle threads count into shards that are
# merged at exit), under the run's one provenance record.
judged=$(sed -n 's/.*judged \([0-9]*\).*/\1/p' "$tmp/out" | head -1)
ran=$(grep -o '"ran": [0-9]*' "$tmp/fp/stats.json" | head -1 | grep -o '[0-9]*$')
[ -n "$judged" ] && [ "$ran" = "$judged" ] || fail "stats.json counts $ran runs, the campaign judged $judged"
[ "$(grep -c '"command": ' "$tmp/fp/stats.json")" = 1 ] || fail "stats.json has more than one provenance record"
grep -q "dispatcher waits: for generated cases" "$tmp/out" || fail "the summary does not say where the dispatcher waited"
run 2 -- "$kvfuzz" fuzz --stats-interval 0 --runs 1
grep -q "stats-interval must be a positive number" "$tmp/err" || fail "--stats-interval 0: $(cat "$tmp/err")"
# With a short interval the shards are drained into stats.json while the campaign runs.
"$kvfuzz" fuzz --kernel cpu-splitkv --time 6 --stats-interval 0.5 --seed 2 --jobs 2 \
  --findings "$tmp/fi" >"$tmp/si.out" 2>"$tmp/si.err" &
pid=$!
mid=""
for _ in $(seq 1 50); do
  sleep 0.1
  mid=$(grep -o '"ran": [0-9]*' "$tmp/fi/stats.json" 2>/dev/null | head -1 | grep -o '[0-9]*$')
  [ -n "$mid" ] && [ "$mid" -gt 0 ] && break
done
kill -0 $pid 2>/dev/null || fail "the short-interval campaign ended before its statistics were checked"
[ -n "$mid" ] && [ "$mid" -gt 0 ] || fail "stats.json was not rewritten during the run"
wait $pid
judged=$(sed -n 's/.*judged \([0-9]*\).*/\1/p' "$tmp/si.out" | head -1)
ran=$(grep -o '"ran": [0-9]*' "$tmp/fi/stats.json" | head -1 | grep -o '[0-9]*$')
[ -n "$judged" ] && [ "$ran" = "$judged" ] || fail "after mid-run rewrites stats.json counts $ran runs, the campaign judged $judged"

# ---- signals -----------------------------------------------------------------------------
"$kvfuzz" fuzz --kernel test-planted --time 120 --seed 9 --jobs 2 --findings "$tmp/fs" \
  --corpus "$tmp/cs" >"$tmp/sig.out" 2>"$tmp/sig.err" &
pid=$!
# Interrupt once a finding is on disk (slow builds, such as ASan, take longer to get there), so
# that the exit status says "found something" whatever the machine's speed.
for _ in $(seq 1 600); do
  ls "$tmp/fs"/nonfinite-*.kvfz "$tmp/fs"/o-tolerance-*.kvfz 2>/dev/null | grep -q . && break
  sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "fuzz after SIGINT exited $rc, expected 1"
grep -q "stopped by SIGINT" "$tmp/sig.out" || fail "no summary after SIGINT: $(cat "$tmp/sig.out")"
check_pairs "$tmp/fs"
check_no_temp "$tmp/cs"

"$kvfuzz" fuzz --kernel cpu-splitkv --time 120 --seed 4 --jobs 2 --findings "$tmp/ft" \
  --corpus "$tmp/ct" >"$tmp/sig.out" 2>"$tmp/sig.err" &
pid=$!
sleep 6
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "fuzz after SIGTERM exited $rc, expected 0"
grep -q "stopped by SIGTERM" "$tmp/sig.out" || fail "no summary after SIGTERM: $(cat "$tmp/sig.out")"
grep -Eq "kvfuzz fuzz: +[0-9]+s  cases [0-9]+ \([0-9.]+/s\)  tokens .*/s\)  findings .* worst margin strict" "$tmp/sig.err" \
  || fail "no progress line within 6 s: $(cat "$tmp/sig.err")"
check_no_temp "$tmp/ct"

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "fuzz command line: all checks passed"
