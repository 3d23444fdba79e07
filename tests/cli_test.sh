#!/usr/bin/env bash
# Command-line contract: exit codes (0 pass, 1 violation, 2 bad input/usage), one-sentence
# errors that name the problem, --help on every subcommand, and the seed corpus verdicts.
set -u
kvfuzz=$1
src=$2
# shellcheck source=tests/script_check.sh
. "$(dirname "$0")/script_check.sh"
expect_lines=2 # as this script has always allowed

for sub in replay gen show oracle kernels rules bench mutants report fuzz minimize; do
  expect 0 "" -- "$kvfuzz" "$sub" --help
  grep -q "usage: kvfuzz $sub" "$tmp/out" || fail "$sub --help does not print its usage"
done
expect 2 "unknown command" -- "$kvfuzz" frobnicate
expect 2 "unknown option" -- "$kvfuzz" replay --frob x
expect 2 "unknown kernel" -- "$kvfuzz" replay --kernel nope "$src/corpus/seeds"
expect 2 "allclose" -- "$kvfuzz" replay --rule allclose:x:1 "$src/corpus/seeds"
expect 2 "jobs" -- "$kvfuzz" replay --jobs 0 "$src/corpus/seeds"
expect 2 "no case files" -- "$kvfuzz" replay
expect 2 "cannot read" -- "$kvfuzz" replay "$tmp/missing.kvfz"
# Files that are not regular are refused at once: a FIFO is not waited on, a device not read.
mkfifo "$tmp/fifo.kvfz"
expect 2 "is a FIFO, not a regular file" -- timeout 10 "$kvfuzz" replay "$tmp/fifo.kvfz"
expect 2 "is a character device, not a regular file" -- timeout 10 "$kvfuzz" replay /dev/zero
# A findings folder that cannot take a file fails the campaign at its start, whatever --stats.
expect 2 "findings folder /proc is not writable" -- "$kvfuzz" fuzz --kernel cpu-ref --runs 5 \
  --findings /proc --stats "$tmp/s.json"
# A file larger than any case can be is refused from its size, before it is read.
truncate -s 3G "$tmp/huge.kvfz"
expect 2 "3.00 GiB; the case it holds needs at least twice that, past the memory budget" -- \
  timeout 10 "$kvfuzz" replay "$tmp/huge.kvfz"
# With the budget raised past it, the file limit itself (twice the resident limit + 64 MiB).
expect 2 "bytes, more than the" -- env KVF_MAX_MEMORY_MIB=65536 timeout 10 "$kvfuzz" replay "$tmp/huge.kvfz"
expect 2 "unknown preset" -- "$kvfuzz" gen --preset nope -o "$tmp/x.kvfz"
expect 2 "seed" -- "$kvfuzz" gen --seed -3 -o "$tmp/x.kvfz"
expect 2 "FILE is required" -- "$kvfuzz" gen
# --v-dtype alone would leave the k cache's type to a guess.
expect 2 "--v-dtype needs --k-dtype" -- "$kvfuzz" gen --v-dtype e4m3 -o "$tmp/x.kvfz"
[ ! -e "$tmp/x.kvfz" ] || fail "a refused gen wrote its file"
expect 2 "--k-scale must be a positive decimal number" -- "$kvfuzz" gen --k-dtype e4m3 --k-scale 0x1p0 -o "$tmp/x.kvfz"
expect 2 "--device must be cpu or cuda" -- "$kvfuzz" mutants --device tpu
expect 2 "positive number of seconds" -- "$kvfuzz" mutants --budget -1

# Bad case files: a bad page id, a bad last-page length, truncated bytes, garbage.
seed="$src/corpus/seeds/00-seed-h20kv4.kvfz"
"$kvfuzz" gen --preset seed-h20kv4 --expansion 1 -o "$tmp/good.kvfz" || fail "gen failed"
cmp -s "$tmp/good.kvfz" "$seed" ||
  fail "gen --preset seed-h20kv4 --seed 1 --expansion 1 differs from the shipped seed case"
# By default gen writes expansion 2: the same recipe with version byte 2 (docs/case-format.md).
"$kvfuzz" gen --preset seed-h20kv4 -o "$tmp/good2.kvfz" || fail "gen (expansion 2) failed"
python3 - "$tmp/good.kvfz" "$tmp/good2.kvfz" <<'PY' || fail "gen's default is not the version 2 file of the seed recipe"
import sys
one, two = (open(p, "rb").read() for p in sys.argv[1:3])
assert two[4] == 2 and one[4] == 1 and one[:4] + one[5:] == two[:4] + two[5:]
PY
"$kvfuzz" show "$tmp/good2.kvfz" | grep -q '"format_version": 2' || fail "show does not report version 2"
expect 2 "--expansion" -- "$kvfuzz" gen --expansion 3 -o "$tmp/x.kvfz"
# A statistics file never replaces a case file (fuzz --stats: fuzz_cli_test.sh).
cp "$tmp/good2.kvfz" "$tmp/keep.kvfz"
expect 2 "^kvfuzz replay: --stats .*keep.kvfz names a case file" -- "$kvfuzz" replay --kernel cpu-ref --stats "$tmp/keep.kvfz" "$tmp/good2.kvfz"
expect 2 "^kvfuzz report: --merge .*keep.kvfz names a case file" -- "$kvfuzz" report --merge "$tmp/keep.kvfz" "$tmp/none.json"
cmp -s "$tmp/keep.kvfz" "$tmp/good2.kvfz" || fail "a refused --stats or --merge changed the case file"
expect 2 "^kvfuzz replay: --relation-seed seeds the --relations runs" -- "$kvfuzz" replay --relation-seed 5 "$tmp/good2.kvfz"
# Flag the overrides section and append one override: kv_indices[7] = 52 (pool has 52 pages).
python3 - "$tmp" <<'PY' || fail "could not craft bad files"
import struct, sys
d = sys.argv[1]
good = bytearray(open(d + "/good.kvfz", "rb").read())
bad = bytearray(good); bad[5] |= 1
bad += struct.pack("<IBQI", 1, 1, 7, 52)
open(d + "/bad-page-id.kvfz", "wb").write(bad)
bad = bytearray(good); struct.pack_into("<H", bad, 54, 65)
open(d + "/bad-last-len.kvfz", "wb").write(bad)
open(d + "/truncated.kvfz", "wb").write(good[:40])
open(d + "/garbage.kvfz", "wb").write(b"not a case file at all")
PY
expect 2 "kv_indices\[7\] = 52 is outside the page pool" -- "$kvfuzz" replay --kernel cpu-ref "$tmp/bad-page-id.kvfz"
expect 2 "last_page_len 65 is outside \[1, page_size 64\]" -- "$kvfuzz" replay --kernel cpu-ref "$tmp/bad-last-len.kvfz"
expect 2 "ends inside" -- "$kvfuzz" replay --kernel cpu-ref "$tmp/truncated.kvfz"
expect 2 "magic" -- "$kvfuzz" show "$tmp/garbage.kvfz"
expect 2 "ends inside" -- "$kvfuzz" oracle "$tmp/truncated.kvfz"

# show and oracle speak JSON that parses.
"$kvfuzz" show --full "$seed" >"$tmp/show.json" || fail "show failed"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["shape"]["num_qo_heads"]==20 and c["batch_size"]==1 and len(c["kv_indices"])==51' "$tmp/show.json" || fail "show JSON is wrong"
"$kvfuzz" oracle --json "$seed" >"$tmp/oracle.json" || fail "oracle failed"
python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); assert len(o["rows"])==20 and len(o["rows"][0]["o"])==128' "$tmp/oracle.json" || fail "oracle JSON is wrong"
# Both oracle paths give the same correctly rounded bits (the exact values agree to ~1e-15).
"$kvfuzz" oracle --json --oracle mpfr "$seed" >"$tmp/oracle-mpfr.json" || fail "oracle --oracle mpfr failed"
python3 -c '
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
for x, y in zip(a["rows"], b["rows"]):
    assert x["lse_bits"] == y["lse_bits"] and [e[0] for e in x["o"]] == [e[0] for e in y["o"]]
    assert abs(x["lse_exact"] - y["lse_exact"]) <= 1e-12 * abs(x["lse_exact"])
' "$tmp/oracle.json" "$tmp/oracle-mpfr.json" || fail "the fast and mpfr oracle paths disagree"
expect 2 "--oracle needs fast or mpfr" -- "$kvfuzz" oracle --oracle exact "$seed"
expect 2 "--oracle must be fast or mpfr" -- "$kvfuzz" fuzz --oracle exact

# Non-finite numbers are the strings "NaN", "Infinity", "-Infinity", never bare tokens (which
# python would accept but JSON does not have): an empty sequence's lse is "-Infinity".
"$kvfuzz" oracle --json "$src/corpus/seeds/02-empty-sequences.kvfz" >"$tmp/oracle-empty.json" || fail "oracle failed"
python3 - "$tmp/oracle-empty.json" <<'PY' || fail "oracle JSON spells a non-finite number wrongly"
import json, sys
def bare(name):
    raise ValueError("bare " + name)
o = json.load(open(sys.argv[1]), parse_constant=bare)
empty = [r for r in o["rows"] if r["length"] == 0]
assert empty and all(r["lse"] == "-Infinity" and r["lse_exact"] == "-Infinity" for r in empty)
PY

# Verdicts: fib's rejections of the exact -inf lse are benign, named, and do not fail replay;
# overflow rows are out of the model; a mutant fails with its finding classes.
"$kvfuzz" replay --kernel cpu-ref --rule strict --rule fib "$src/corpus/seeds" >"$tmp/verdict" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/verdict"; fail "a correct kernel's seeds exit $rc under strict and fib"; }
# Every seed but the overflow one and the two with empty sequences passes fib.
nseeds=$(ls "$src"/corpus/seeds/*.kvfz | wc -l)
grep -q "^  cpu-ref  fib  passes $((nseeds - 3)) cases$" "$tmp/verdict" || fail "no fib verdict line for cpu-ref"
grep -q "2 cases fail only where the kernel returned the correctly rounded value: fib" "$tmp/verdict" || fail "fib's benign failures are not named"
grep -q "1 case fails only on rows out of the input model" "$tmp/verdict" || fail "the overflow seed is not counted apart"
if grep -q "9223372036854775807\|4278190080" "$tmp/verdict"; then fail "replay prints a sentinel as a ulp distance"; fi
"$kvfuzz" replay --kernel cpu-splitkv/mut=trunc-store --rule strict "$src/corpus/seeds" >"$tmp/verdict-mut" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/verdict-mut"; fail "a mutant's replay exits $rc, not 1"; }
grep -q "cpu-splitkv/mut=trunc-store  strict  FAILS: [0-9]* findings in [0-9]* class" "$tmp/verdict-mut" || fail "no failing verdict for the mutant"

# The seed corpus passes strict on both CPU kernels.
"$kvfuzz" replay --kernel cpu-ref --kernel cpu-splitkv --rule strict "$src/corpus/seeds" >"$tmp/replay" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/replay"; fail "seed corpus does not pass strict (exit $rc)"; }

# The default rules (strict, fa): the seed corpus passes on both CPU kernels; FlashInfer-style
# bf16 split partials fail on the seed workload itself.
"$kvfuzz" replay --kernel cpu-ref --kernel cpu-splitkv "$src/corpus/seeds" >"$tmp/replay-default" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$tmp/replay-default"; fail "seed corpus does not pass the default rules (exit $rc)"; }
grep -q "^  cpu-splitkv  fa  passes $((nseeds - 1)) cases$" "$tmp/replay-default" \
  || fail "replay does not judge under fa by default"
"$kvfuzz" replay --kernel cpu-splitkv/mut=bf16-partials "$seed" >"$tmp/replay-partials" 2>&1
rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/replay-partials"; fail "bf16-partials passes the default rules on the seed workload (exit $rc)"; }
"$kvfuzz" rules >"$tmp/rules" 2>&1 || fail "rules failed"
grep -q "^default set (replay, fuzz): strict fa" "$tmp/rules" || fail "rules does not name the default set"
grep -q "Blind" "$tmp/rules" || fail "rules does not state blind spots"
expect 2 "rule 'fa:1': the precision model '1' has an unknown component '1'" -- "$kvfuzz" replay --rule fa:1 "$seed"

# ---- precision models (docs/precision.md) ------------------------------------------------------
# A finding of the bf16-partials mutant (found by `kvfuzz fuzz --seed 1`), with the report
# `kvfuzz fuzz` saves beside it: under the default f32 model it fails, and attribution names
# bf16-partials as the tightest model that explains it.
mkdir -p "$tmp/prec"
pf="$tmp/prec/o-tolerance-46a7c23ea3eb.kvfz"
python3 - "$pf" <<'PY' || fail "could not write the bf16-partials finding"
import json, sys
open(sys.argv[1], "wb").write(bytes.fromhex(
    "4b56465a0200000008024000200004000100000000000000020000000000003e00000500"
    "0405010606000000480bab859bb722c401001f0001001d0001001f0002000100"))
json.dump({"kernel": "cpu-splitkv/mut=bf16-partials", "rule": "strict", "class": "o-tolerance"},
          open(sys.argv[1][:-5] + ".json", "w"))
PY
"$kvfuzz" replay "$pf" >"$tmp/prec.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "the bf16-partials finding replays with exit $rc, not 1: $(cat "$tmp/prec.out")"
grep -q "^precision model for cpu-splitkv/mut=bf16-partials: f32 (default)$" "$tmp/prec.out" ||
  fail "replay does not name the kernel's precision model: $(cat "$tmp/prec.out")"
grep -q "attribution (strict): fails f32; within bf16-partials (margin 0\.[0-9]*)[^:]*: split-KV partial outputs stored in bf16" "$tmp/prec.out" ||
  fail "replay does not attribute the finding to bf16-partials: $(cat "$tmp/prec.out")"
"$kvfuzz" replay --precision bf16-partials "$pf" >"$tmp/prec-b.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "replay --precision bf16-partials of its own finding exits $rc, not 0: $(cat "$tmp/prec-b.out")"
grep -q "^precision model for cpu-splitkv/mut=bf16-partials: bf16-partials (--precision)$" "$tmp/prec-b.out" &&
  grep -q "strict:bf16-partials  passes 1 case" "$tmp/prec-b.out" ||
  fail "replay --precision bf16-partials does not judge strict under it: $(cat "$tmp/prec-b.out")"
# A rule recorded with its model keeps it, beside the default set under f32.
python3 -c 'import json,sys; json.dump({"kernel": "cpu-splitkv/mut=bf16-partials", "rule": "strict:bf16-p"}, open(sys.argv[1], "w"))' "${pf%.kvfz}.json"
"$kvfuzz" replay "$pf" >"$tmp/prec-r.out" 2>&1
grep -q "cpu-splitkv/mut=bf16-partials  strict:bf16-p  " "$tmp/prec-r.out" && grep -q "cpu-splitkv/mut=bf16-partials  strict  FAILS" "$tmp/prec-r.out" ||
  fail "the recorded rule strict:bf16-p does not keep its model: $(cat "$tmp/prec-r.out")"
python3 -c 'import json,sys; json.dump({"kernel": "cpu-splitkv/mut=bf16-partials", "rule": "strict", "class": "o-tolerance"}, open(sys.argv[1], "w"))' "${pf%.kvfz}.json"
# Kernels declare their model; a mutant that declares bf16-p-rsum is judged under it.
"$kvfuzz" kernels >"$tmp/kernels" 2>&1 || fail "kernels failed"
grep -Eq "^cpu-splitkv/mut=bf16p-acc +cpu +bf16-p-rsum " "$tmp/kernels" || fail "kernels does not list bf16p-acc's model: $(grep bf16p-acc "$tmp/kernels")"
grep -Eq "^cpu-ref +cpu +f32 " "$tmp/kernels" || fail "kernels does not list f32 for a kernel that declares nothing"
"$kvfuzz" kernels --kernel cpu-splitkv/mut=bf16p-acc | grep -q "^    precision   bf16-p-rsum$" || fail "kernels --kernel does not show the declared model"
"$kvfuzz" replay --kernel cpu-splitkv/mut=bf16p-acc --kernel cpu-splitkv --rule strict "$seed" >"$tmp/prec-k.out" 2>&1
grep -q "^precision model for cpu-splitkv/mut=bf16p-acc: bf16-p-rsum (declared by the kernel)$" "$tmp/prec-k.out" &&
  grep -q "^precision model for cpu-splitkv: f32 (default)$" "$tmp/prec-k.out" &&
  grep -q "^  cpu-splitkv/mut=bf16p-acc  strict:bf16-p-rsum  " "$tmp/prec-k.out" && grep -q "^  cpu-splitkv  strict  passes" "$tmp/prec-k.out" ||
  fail "one kernel's declared model leaks into another's rules: $(cat "$tmp/prec-k.out")"
# minimize keeps the explanation: the minimized case is attributed as the input was.
"$kvfuzz" minimize "$pf" -o "$tmp/prec-min.kvfz" --jobs 2 >"$tmp/prec-min.out" 2>&1 || fail "minimize of the bf16-partials finding failed: $(cat "$tmp/prec-min.out")"
grep -q "^  attribution of the input: *fails f32; within bf16-partials " "$tmp/prec-min.out" &&
  grep -q "^  attribution of the minimized case: fails f32; within bf16-partials " "$tmp/prec-min.out" ||
  fail "minimize does not keep the attribution: $(cat "$tmp/prec-min.out")"
"$kvfuzz" replay --kernel cpu-splitkv/mut=bf16-partials --rule strict "$tmp/prec-min.kvfz" >"$tmp/prec-min-r.out" 2>&1
grep -q "attribution (strict): fails f32; within bf16-partials " "$tmp/prec-min-r.out" || fail "the minimized case replays with another attribution: $(cat "$tmp/prec-min-r.out")"
"$kvfuzz" minimize "$pf" -o "$tmp/prec-min2.kvfz" --precision bf16-partials >"$tmp/prec-min2.out" 2>"$tmp/err"
grep -q "does not fail as o-tolerance with kernel cpu-splitkv/mut=bf16-partials under rule strict:bf16-partials" "$tmp/err" ||
  fail "minimize --precision does not judge under the model: $(cat "$tmp/err")"
for sub in replay minimize mutants fuzz export-fib; do
  "$kvfuzz" "$sub" --help | grep -q -- "--precision MODEL" || fail "$sub --help does not document --precision"
done

finish cli
