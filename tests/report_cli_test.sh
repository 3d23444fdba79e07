#!/usr/bin/env bash
# `kvfuzz report` and `kvfuzz replay --stats` on the command line: --help, one-sentence errors
# with exit 2 for bad input, and a report and a merge from real replay statistics.
set -u
kvfuzz=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE PATTERN -- command...: exit code and a one-line stderr matching PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "$* exited $rc, expected $code; stderr: $(cat "$tmp/err")"
  if [ -n "$pattern" ]; then
    grep -Eq "$pattern" "$tmp/err" || fail "$*: stderr does not match /$pattern/: $(cat "$tmp/err")"
    [ "$(wc -l <"$tmp/err")" -le 1 ] || fail "$*: error is not one sentence: $(cat "$tmp/err")"
  fi
}

expect 0 "" -- "$kvfuzz" report --help
grep -q "usage: kvfuzz report" "$tmp/out" || fail "report --help does not print its usage"
grep -q -- "--stats FILE" <("$kvfuzz" replay --help) || fail "replay --help does not mention --stats"
expect 2 "no stats files" -- "$kvfuzz" report
expect 2 "unknown option" -- "$kvfuzz" report --frob
expect 2 "needs a value" -- "$kvfuzz" report -o
expect 2 "cannot read .*missing.json" -- "$kvfuzz" report "$tmp/missing.json"
mkfifo "$tmp/fifo.json"
expect 2 "fifo.json is a FIFO, not a regular file" -- timeout 20 "$kvfuzz" report "$tmp/fifo.json"
expect 2 "/dev/zero is a character device, not a regular file" -- "$kvfuzz" report /dev/zero
# Past 16 MiB a stats file is refused from its size (the parser would hold about 33 times it).
truncate -s 17M "$tmp/huge.json"
expect 2 "huge.json is 17825792 bytes, more than the 16777216 bytes allowed" -- "$kvfuzz" report "$tmp/huge.json"
printf '{"format": "kvfuzz-stats", "version": 1' >"$tmp/trunc.json"
expect 2 "malformed stats file .*trunc.json" -- "$kvfuzz" report "$tmp/trunc.json"
echo '{"format": "kvfuzz-stats", "version": 7}' >"$tmp/v7.json"
expect 2 "version 7" -- "$kvfuzz" report "$tmp/v7.json"
: >"$tmp/zero.json"
expect 2 "malformed stats file .*zero.json: invalid JSON" -- "$kvfuzz" report "$tmp/zero.json"
# Statistics written before the run judged anything: one sentence, no empty page.
printf '{"format": "kvfuzz-stats", "version": 2, "buckets_per_octave": 4, "bits_scale": 1024, "worst_n": 1, "require_overflow": false, "kernels": [], "cases": [], "groups": []}' >"$tmp/empty.json"
expect 2 "empty.json holds no judged case" -- "$kvfuzz" report -o "$tmp/rep-empty" "$tmp/empty.json"
[ -e "$tmp/rep-empty/index.html" ] && fail "a report over empty statistics wrote a page"
expect 2 "cannot write" -- "$kvfuzz" replay --kernel cpu-ref --stats "$tmp/nodir/s.json" \
  "$src/corpus/seeds/00-seed-h20kv4.kvfz"

# --stats naming a case of the run, or its report, is refused before it is written over (the
# case was replaced by statistics and replay reported 0 cases passed).
cp "$src/corpus/seeds/08-page1.kvfz" "$tmp/victim.kvfz"
echo '{"kernel": "cpu-ref"}' >"$tmp/victim.json"
cp "$tmp/victim.kvfz" "$tmp/victim.orig"
expect 2 "stats .*victim.kvfz is a case to replay" -- \
  "$kvfuzz" replay --kernel cpu-ref --stats "$tmp/victim.kvfz" "$tmp/victim.kvfz"
expect 2 "stats .*victim.json is the report of a case to replay" -- \
  "$kvfuzz" replay --kernel cpu-ref --stats "$tmp/victim.json" "$tmp/victim.kvfz"
cmp -s "$tmp/victim.kvfz" "$tmp/victim.orig" || fail "replay --stats wrote over its own case"
grep -q '"kernel": "cpu-ref"' "$tmp/victim.json" || fail "replay --stats wrote over a case's report"
rm -f "$tmp/victim.kvfz" "$tmp/victim.json" "$tmp/victim.orig"

# Real statistics: two kernels into one file, a third (a mutant) into another.
seeds=("$src/corpus/seeds/00-seed-h20kv4.kvfz" "$src/corpus/seeds/05-shared-prefix.kvfz"
       "$src/corpus/seeds/08-page1.kvfz")
"$kvfuzz" replay --kernel cpu-ref --kernel cpu-splitkv --rule strict --rule fib \
  --stats "$tmp/cpu.json" "${seeds[@]}" >"$tmp/replay.out" 2>&1 || fail "replay --stats failed: $(cat "$tmp/replay.out")"
grep -q "statistics: $tmp/cpu.json" "$tmp/replay.out" || fail "replay does not say where the statistics went"
"$kvfuzz" replay --kernel cpu-splitkv/mut=trunc-store --stats "$tmp/mut.json" "${seeds[@]}" \
  >/dev/null 2>&1
[ -s "$tmp/mut.json" ] || fail "replay of a failing mutant wrote no statistics"
expect 2 "is not a directory|cannot create" -- "$kvfuzz" report -o "$tmp/cpu.json/x" "$tmp/cpu.json"
expect 2 "cannot open findings directory" -- "$kvfuzz" report --findings "$tmp/nope" "$tmp/cpu.json"

expect 0 "" -- "$kvfuzz" report -o "$tmp/rep" cpu="$tmp/cpu.json" mutant="$tmp/mut.json"
for f in index.html summary.json errors.csv; do
  [ -s "$tmp/rep/$f" ] || fail "report did not write $f"
done
grep -q "3 series from 2 stats file(s)" "$tmp/out" || fail "terminal summary lacks the series count: $(cat "$tmp/out")"
grep -q "report: $tmp/rep/index.html" "$tmp/out" || fail "report does not print the page's path"
grep -q "cpu-splitkv/mut=trunc-store" "$tmp/out" || fail "terminal summary lacks the mutant series"
python3 - "$tmp/rep/summary.json" <<'PY' || fail "summary.json does not have the expected content"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["format"] == "kvfuzz-report-summary" and s["version"] == 1
names = [x["name"] for x in s["series"]]
assert names == ["cpu-ref", "cpu-splitkv", "cpu-splitkv/mut=trunc-store"], names
# cpu.json was judged under strict and fib, mut.json under the default set (strict, fa).
assert s["rules"] == ["strict", "fa", "fib"], s["rules"]
mut = s["series"][2]["rules"]["strict"]
assert mut["failed"] > 0 and mut["o"]["violations"] > 0, mut
PY

# Merge: the same file twice doubles every count.
expect 0 "" -- "$kvfuzz" report --quiet --merge "$tmp/twice.json" "$tmp/cpu.json" "$tmp/cpu.json"
python3 - "$tmp/cpu.json" "$tmp/twice.json" <<'PY' || fail "merging a file with itself did not double its counts"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for ga, gb in zip(a["groups"], b["groups"]):
    for out in ("o", "lse"):
        assert gb[out]["elements"] == 2 * ga[out]["elements"]
        assert gb[out]["hist"]["ulp"]["zero"] == 2 * ga[out]["hist"]["ulp"]["zero"]
assert len(b["sources"]) == 2
PY

# Counts no run reaches: a merge whose sum passes 2^63 - 1, and a file whose own counts add up
# past it, are refused in one sentence (the merge wrote negative counts, which the reader then
# refused as malformed; the sums were signed overflows).
python3 - "$tmp/cpu.json" "$tmp" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
for grp in g["groups"]:
    grp["cases"] += 6 * 2**60
    grp["passed"] += 6 * 2**60
json.dump(g, open(sys.argv[2] + "/big-counts.json", "w"))
grp = g["groups"][0]
grp["passed"] = 2**63 - 1
grp["out_of_model"] = 1
json.dump(g, open(sys.argv[2] + "/sum-past.json", "w"))
PY
expect 0 "" -- "$kvfuzz" report "$tmp/big-counts.json"
expect 2 "merging the statistics takes a count past 2\^63 - 1" -- \
  "$kvfuzz" report --quiet --merge "$tmp/big-merged.json" "$tmp/big-counts.json" "$tmp/big-counts.json"
[ -e "$tmp/big-merged.json" ] && fail "an overflowing merge wrote $tmp/big-merged.json"
expect 2 "sum-past.json: groups\[0\]: passed, out_of_model, rule_rejects_rounded and findings add up past 2\^63 - 1" -- \
  "$kvfuzz" report "$tmp/sum-past.json"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "report command line: all checks passed"
