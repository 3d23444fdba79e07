#!/usr/bin/env bash
# `kvfuzz report` and `kvfuzz replay --stats` on the command line: --help, one-sentence errors
# with exit 2 for bad input, a report and a merge from real replay statistics, and the precision
# attribution of a real campaign's findings (precision only; then beside a defect, unattributed
# and malformed findings).
set -u
kvfuzz=$1
src=$2
# shellcheck source=tests/script_check.sh
. "$(dirname "$0")/script_check.sh"

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

# Precision attribution (docs/reports.md): a mutant that stores its split-KV partial outputs in
# bf16 declares f32 and fails it, but every finding lies within a looser precision model, so the
# report still fails and says plainly that no defect was found.
"$kvfuzz" fuzz --kernel cpu-splitkv/mut=bf16-partials --runs 600 --seed 7 --jobs 2 \
  --findings "$tmp/attr" >"$tmp/fuzz.out" 2>&1
ls "$tmp/attr"/o-tolerance-*.json >/dev/null 2>&1 || fail "the bf16-partials mutant gave no finding: $(tail -5 "$tmp/fuzz.out")"
expect 0 "" -- "$kvfuzz" report -o "$tmp/attr-rep" "$tmp/attr"
[ -s "$tmp/err" ] && fail "report of attributed findings wrote to stderr: $(cat "$tmp/err")"
grep -Eq '^verdict: FAIL: no defect found, but the precision is below what was declared \(f32\): all [0-9]+ failing signatures? lies? within a looser precision model \(' "$tmp/out" ||
  fail "precision-only report: verdict line: $(head -1 "$tmp/out")"
grep -Eq "  cpu-splitkv/mut=bf16-partials  (strict|fa)  FAILS: [0-9]+ findings? in [0-9]+ signatures?, all within a looser precision model than declared \(.*\): no defect found under this rule, but the kernel's precision is below the declared f32$" "$tmp/out" ||
  fail "precision-only report: no rule line says no defect was found: $(cat "$tmp/out")"
grep -q "precision model judged by strict and fa (declared): f32" "$tmp/out" || fail "the report does not name the declared model"
grep -q 'data-verdict="fail" data-failure="precision"' "$tmp/attr-rep/index.html" || fail "precision-only page: banner"
grep -q '<th>attribution</th>' "$tmp/attr-rep/index.html" || fail "the findings table has no attribution column"
grep -q '>precision: within [a-z0-9+-]* (margin 0\.[0-9]*)</td>' "$tmp/attr-rep/index.html" || fail "no 'precision: within MODEL (margin M)' cell"
python3 - "$tmp/attr-rep/summary.json" <<'PY' || fail "summary.json of attributed findings"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["verdict"] == "fail" and s["failure"] == "precision", (s["verdict"], s["failure"])
files = s["findings"]["files"]
assert files and all(f["attribution"]["kind"] == "precision" and f["attribution"]["declared"] == "f32"
                     and f["attribution"]["within"] and 0 <= f["attribution"]["margin"] <= 1
                     for f in files), files
PY

# The same findings beside a defect, a report from before attribution, a null attribution and a
# malformed one (copies of a real finding under new hashes): only the precision ones leave the
# defects, and the malformed member is one warning sentence naming its file, exit 0 still.
python3 - "$tmp/attr" <<'PY'
import glob, json, os, shutil, sys
d = sys.argv[1]
src = sorted(glob.glob(d + "/o-tolerance-*.json"))[0]
base = json.load(open(src))
decl = base["attribution"]["declared"]
variants = {
    "dddddddddddd0001": {"kind": "defect", "declared": decl, "within": None, "margin": None,
                         "text": "fails %s; no precision model explains it" % decl},
    "dddddddddddd0002": "absent",
    "dddddddddddd0003": None,
    "dddddddddddd0004": {"kind": "bogus", "declared": decl},
}
for h, a in variants.items():
    j = dict(base)
    if a == "absent":
        del j["attribution"]
    else:
        j["attribution"] = a
    json.dump(j, open("%s/o-tolerance-%s.json" % (d, h), "w"), indent=2)
    shutil.copy(src[:-5] + ".kvfz", "%s/o-tolerance-%s.kvfz" % (d, h))
PY
expect 0 "" -- "$kvfuzz" report -o "$tmp/attr-rep2" "$tmp/attr"
grep -Eq '^verdict: FAIL: 4 defects \(no precision model explains 1; 3 not attributed\); [0-9]+ signatures? within a looser precision model than declared \(' "$tmp/out" ||
  fail "mixed report: verdict line: $(head -1 "$tmp/out")"
grep -Eq "FAILS: [0-9]+ findings? in [0-9]+ signatures: 4 defects \(no precision model explains 1; 3 not attributed\); [0-9]+ signatures? within a looser precision model than declared" "$tmp/out" ||
  fail "mixed report: no rule line splits defects from precision: $(cat "$tmp/out")"
grep -q "^warning: malformed finding report $tmp/attr/o-tolerance-dddddddddddd0004.json: attribution.kind is \"bogus\", not \"precision\" or \"defect\"; the finding counts as not attributed (a defect)$" "$tmp/out" ||
  fail "mixed report: no one-sentence warning for the malformed attribution: $(grep warning "$tmp/out")"
[ "$(grep -c '^warning: malformed finding report' "$tmp/out")" -eq 1 ] || fail "mixed report: more than one malformed finding reported"
page="$tmp/attr-rep2/index.html"
grep -q 'data-verdict="fail" data-failure="defect"' "$page" || fail "mixed page: banner"
[ "$(grep -c 'data-attribution="defect"' "$page")" -eq 1 ] || fail "mixed page: defect cells"
[ "$(grep -c 'data-attribution="none">defect (not attributed)</td>' "$page")" -eq 2 ] || fail "mixed page: not-attributed cells"
grep -q 'data-attribution="malformed" title="malformed finding report .*dddddddddddd0004.json' "$page" || fail "mixed page: malformed cell"
python3 - "$tmp/attr-rep2/summary.json" <<'PY' || fail "summary.json of mixed findings"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["failure"] == "defect", s["failure"]
by = {f["hash"]: f for f in s["findings"]["files"]}
assert by["dddddddddddd0001"]["attribution"]["kind"] == "defect"
assert by["dddddddddddd0002"]["attribution"] is None and by["dddddddddddd0003"]["attribution"] is None
assert by["dddddddddddd0004"]["attribution"] is None
assert "attribution.kind" in by["dddddddddddd0004"]["attribution_error"]
ba = s["findings"]["by_attribution"]
assert ba["defect"] == 1 and ba["not_attributed"] == 3, ba
PY

finish "report command line"
