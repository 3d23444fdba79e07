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
    case "$f" in *.min.kvfz) continue ;; esac # a finding's minimized case, under its report
    [ -s "${f%.kvfz}.json" ] || fail "$f has no report beside it"
  done
  for j in "$dir"/*.json; do
    [ -e "$j" ] || continue
    case "$(basename "$j")" in stats-*.json) continue ;; esac # each campaign's error statistics
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

# ---- lanes: several cases side by side in one worker -----------------------------------------
run 2 -- "$kvfuzz" fuzz --lanes 0 --runs 3
grep -q -- "--lanes" "$tmp/err" || fail "fuzz --lanes 0: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" fuzz --lanes 65 --runs 3
run 2 -- "$kvfuzz" fuzz --lanes 2 --in-process --runs 3
grep -q "cannot go with --in-process" "$tmp/err" || fail "fuzz --lanes --in-process: $(cat "$tmp/err")"
# A crash among cases run side by side is filed as a crash (the case crashes again alone), and the
# production kernel stays clean with four lanes.
run 1 -- "$kvfuzz" fuzz --kernel test-crash --lanes 3 --runs 40 --seed 5 --jobs 2 --findings "$tmp/fl"
grep -q "of 3 lane(s)" "$tmp/out" || fail "the lanes are not in the summary: $(cat "$tmp/out")"
grep -q "ran again one at a time" "$tmp/out" || fail "no re-run alone reported: $(cat "$tmp/out")"
ls "$tmp/fl"/crash-*.kvfz >/dev/null 2>&1 || fail "no crash finding with lanes"
check_pairs "$tmp/fl"
run 0 -- "$kvfuzz" fuzz --kernel cpu-splitkv --lanes 4 --runs 150 --seed 6 --jobs 2 --findings "$tmp/fl4"
grep -q "of 4 lane(s)" "$tmp/out" || fail "cpu-splitkv did not run 4 lanes: $(cat "$tmp/out")"
[ -z "$(ls -A "$tmp/fl4" | grep -v '^stats-.*\.json$')" ] || fail "cpu-splitkv with lanes produced findings: $(ls "$tmp/fl4")"
# States that interfere: crashes side by side only, none filed, and said so.
run 0 -- "$kvfuzz" fuzz --kernel test-overlap --lanes 2 --runs 12 --seed 7 --jobs 2 --findings "$tmp/fo"
grep -q "did not happen again alone" "$tmp/out" || fail "interfering states not reported: $(cat "$tmp/out")"
[ -z "$(ls -A "$tmp/fo" | grep -v '^stats-.*\.json$')" ] || fail "test-overlap filed findings: $(ls "$tmp/fo")"

# ---- a production kernel -----------------------------------------------------------------
run 0 -- "$kvfuzz" fuzz --kernel cpu-splitkv --runs 150 --seed 1 --jobs 2 --findings "$tmp/fp"
[ -z "$(ls -A "$tmp/fp" | grep -v '^stats-.*\.json$')" ] || fail "cpu-splitkv produced findings: $(ls "$tmp/fp")"
# One statistics file per campaign, named after its host, process and start.
[ "$(ls "$tmp/fp"/stats-*-*-*.json 2>/dev/null | wc -l)" = 1 ] || fail "the campaign did not write one stats-HOST-PID-START.json: $(ls "$tmp/fp")"
sf=$(ls "$tmp/fp"/stats-*.json | head -1)
[ -s "$sf" ] || fail "the campaign wrote no statistics beside its findings"
# Every judged case reaches the statistics (the oracle threads count into shards that are
# merged at exit), under the run's one provenance record.
judged=$(sed -n 's/.*judged \([0-9]*\).*/\1/p' "$tmp/out" | head -1)
ran=$(grep -o '"ran": [0-9]*' "$sf" | head -1 | grep -o '[0-9]*$')
[ -n "$judged" ] && [ "$ran" = "$judged" ] || fail "$sf counts $ran runs, the campaign judged $judged"
[ "$(grep -c '"command": ' "$sf")" = 1 ] || fail "$sf has more than one provenance record"
grep -q "dispatcher waits: for generated cases" "$tmp/out" || fail "the summary does not say where the dispatcher waited"
run 2 -- "$kvfuzz" fuzz --stats-interval 0 --runs 1
grep -q "stats-interval must be a positive number" "$tmp/err" || fail "--stats-interval 0: $(cat "$tmp/err")"
# With a short interval the shards are drained into the stats file while the campaign runs.
"$kvfuzz" fuzz --kernel cpu-splitkv --time 6 --stats-interval 0.5 --seed 2 --jobs 2 \
  --findings "$tmp/fi" >"$tmp/si.out" 2>"$tmp/si.err" &
pid=$!
mid=""
for _ in $(seq 1 50); do
  sleep 0.1
  mid=$(cat "$tmp/fi"/stats-*.json 2>/dev/null | grep -o '"ran": [0-9]*' | head -1 | grep -o '[0-9]*$')
  [ -n "$mid" ] && [ "$mid" -gt 0 ] && break
done
kill -0 $pid 2>/dev/null || fail "the short-interval campaign ended before its statistics were checked"
[ -n "$mid" ] && [ "$mid" -gt 0 ] || fail "the stats file was not rewritten during the run"
wait $pid
judged=$(sed -n 's/.*judged \([0-9]*\).*/\1/p' "$tmp/si.out" | head -1)
ran=$(cat "$tmp/fi"/stats-*.json | grep -o '"ran": [0-9]*' | head -1 | grep -o '[0-9]*$')
[ -n "$judged" ] && [ "$ran" = "$judged" ] || fail "after mid-run rewrites the stats file counts $ran runs, the campaign judged $judged"

# ---- statistics of several campaigns ---------------------------------------------------------
# Crashes and hangs are counted in the statistics (as the launches that gave no output).
count_of() { # FILE KEY: the first count under KEY in a stats file
  grep -o "\"$2\": [0-9]*" "$1" | head -1 | grep -o '[0-9]*$'
}
n=$(count_of "$(ls "$tmp/fc"/stats-*.json | head -1)" crash)
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "the crash campaign's statistics count $n crashes"
n=$(count_of "$(ls "$tmp/fh"/stats-*.json | head -1)" hang)
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "the hang campaign's statistics count $n hangs"
# Two campaigns on one findings folder keep a stats file each; `report` reads the folder as
# their merge.
"$kvfuzz" fuzz --kernel cpu-ref --runs 40 --seed 1 --jobs 1 --findings "$tmp/fm" >"$tmp/m1.out" 2>/dev/null &
p1=$!
"$kvfuzz" fuzz --kernel cpu-ref --runs 30 --seed 2 --jobs 1 --findings "$tmp/fm" >"$tmp/m2.out" 2>/dev/null
wait $p1
[ "$(ls "$tmp/fm"/stats-*.json | wc -l)" = 2 ] || fail "two campaigns on one folder: $(ls "$tmp/fm")"
run 0 -- "$kvfuzz" report --merge "$tmp/merged.json" "$tmp/fm"
[ "$(count_of "$tmp/merged.json" ran)" = 70 ] || fail "the merged statistics count $(count_of "$tmp/merged.json" ran) runs, not 40 + 30"
[ "$(grep -o '"command": ' "$tmp/merged.json" | wc -l)" = 2 ] || fail "the merge does not keep both campaigns' provenance"
# Temporary files a killed write left behind are removed at the start (when old enough).
mkdir -p "$tmp/fk"
touch -d '2 hours ago' "$tmp/fk/.stats-old.json.tmp.Ab12Cd"
run 0 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 5 --seed 1 --jobs 1 --findings "$tmp/fk"
[ -e "$tmp/fk/.stats-old.json.tmp.Ab12Cd" ] && fail "a stale temporary file was not removed"
grep -q "removed 1 temporary file" "$tmp/err" || fail "the removal of a stale temporary file is not said: $(cat "$tmp/err")"

# ---- options ---------------------------------------------------------------------------------
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --seed 0x10
grep -q "decimal" "$tmp/err" || fail "--seed 0x10: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --seed " 5"
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs +5
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --time inf
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --max-work 32
grep -q "leaves every case empty" "$tmp/err" || fail "--max-work 32: $(cat "$tmp/err")"
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --large-share 95
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs
grep -q -- "--runs needs a value" "$tmp/err" || fail "--runs without a value: $(cat "$tmp/err")"
# Outputs that cannot be used are refused in one sentence before anything is written: a corpus
# that is a file (it left a statistics file in the findings folder and three lines), a
# statistics path in a missing folder (it followed the banner).
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --corpus "$src/corpus/seeds/08-page1.kvfz" --findings "$tmp/fcf"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "corpus .*08-page1.kvfz is not a folder" "$tmp/err" \
  || fail "--corpus FILE: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp/fcf" 2>/dev/null)" ] || fail "--corpus FILE left files: $(ls -A "$tmp/fcf")"
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --stats "$tmp/nodir/s.json" --findings "$tmp/fsf"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "cannot write .*nodir/s.json" "$tmp/err" \
  || fail "--stats in a missing folder: $(cat "$tmp/err")"
# A statistics path with a case file's name (a corpus entry) would be overwritten: refused, and
# the case is left as it was.
mkdir -p "$tmp/cc" && cp "$src/corpus/seeds/08-page1.kvfz" "$tmp/cc/x.kvfz"
run 2 -- "$kvfuzz" fuzz --kernel cpu-ref --runs 1 --corpus "$tmp/cc" --stats "$tmp/cc/x.kvfz" --findings "$tmp/fsk"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "--stats .*x.kvfz names a case file" "$tmp/err" \
  || fail "--stats naming a case: $(cat "$tmp/err")"
cmp -s "$src/corpus/seeds/08-page1.kvfz" "$tmp/cc/x.kvfz" || fail "--stats naming a case changed the case"
# --stop-on-finding: the planted bug's first signature ends the run, long before its time.
run 1 -- "$kvfuzz" fuzz --kernel test-planted --time 120 --stop-on-finding --seed 3 --jobs 2 --findings "$tmp/ff"
grep -q "findings: [1-9][0-9]* new" "$tmp/out" || fail "--stop-on-finding: $(tail -3 "$tmp/out")"
grep -q "stopped by\|done after [0-9.]* s" "$tmp/out" || fail "--stop-on-finding summary: $(head -1 "$tmp/out")"
t=$(sed -n 's/.*done after \([0-9]*\).*/\1/p' "$tmp/out" | head -1)
[ -n "$t" ] && [ "$t" -lt 60 ] || fail "--stop-on-finding ran $t s"

# ---- cooperating campaigns -------------------------------------------------------------------
# Two campaigns on one corpus folder take in each other's new entries (--reload).
mkdir -p "$tmp/cc"
"$kvfuzz" fuzz --kernel cpu-ref --time 6 --reload 0.5 --seed 21 --jobs 1 --findings "$tmp/fc1" \
  --corpus "$tmp/cc" >"$tmp/c1.out" 2>/dev/null &
p1=$!
"$kvfuzz" fuzz --kernel cpu-ref --time 6 --reload 0.5 --seed 22 --jobs 1 --findings "$tmp/fc2" \
  --corpus "$tmp/cc" >"$tmp/c2.out" 2>/dev/null
wait $p1
for o in "$tmp/c1.out" "$tmp/c2.out"; do
  grep -q "entr[a-z]* taken in from other campaigns" "$o" || fail "a campaign took in nothing from the other: $(grep corpus "$o")"
done

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

# A signal while the campaign is still starting (here: reading a corpus folder of 30,000
# files, which takes a few tenths of a second) ends in the same orderly stop, with a summary,
# and leaves no temporary file.
mkdir -p "$tmp/cbig"
seq 1 30000 | sed 's/$/.kvfz/' | (cd "$tmp/cbig" && xargs touch)
"$kvfuzz" fuzz --kernel cpu-ref --time 60 --seed 4 --jobs 1 --findings "$tmp/fe" \
  --corpus "$tmp/cbig" >"$tmp/sig.out" 2>"$tmp/sig.err" &
pid=$!
sleep 0.1
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "fuzz after an early SIGTERM exited $rc, expected 0"
grep -q "stopped by SIGTERM" "$tmp/sig.out" || fail "no summary after an early SIGTERM: $(cat "$tmp/sig.out") $(cat "$tmp/sig.err")"
check_no_temp "$tmp/fe"

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "fuzz command line: all checks passed"
