#!/usr/bin/env bash
# FlashInfer-Bench interop (docs/fib.md) against golden data that tests/fib_golden.py writes with
# json and struct only: the import keeps every stored tensor bit for bit, the definition name,
# the workload uuid and the random inputs' seed; a workload of the seed definition gives the
# seed preset's case shape; definitions and workloads as FIB's own serializer writes them
# (no "type" on axes and inputs) import as FIB's models read them; the export writes the
# definition, workloads, blobs, solution records and traces where FIB's validator reads them and
# as its schema and validator accept them (fib_golden.py check-fib), puts the fib verdict beside
# strict's (and says when FIB flags a workload for the wrong reason), records the error figures
# FIB's evaluator would, refuses a batch without a page-table entry, and import -> export ->
# import is identical; FP8 findings with one scale per cache go out as kvfuzz's FP8 definitions
# (FP8 bytes, F32 scales) and other quantizations are refused; every malformed input is refused
# with exit 2 and one sentence.
set -u
kvfuzz=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # absolute: one check runs from elsewhere
src=$2
mkdir -p "$3"
work=$(cd "$3" && pwd)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
refuse() { # what, expected text, args...
  local what=$1 want=$2
  shift 2
  timeout 60 "$kvfuzz" "$@" >/dev/null 2>"$work/err" # a hang shows as 124
  local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, not 2: $(head -3 "$work/err")"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$what: not one line: $(head -3 "$work/err")"
  grep -q -- "$want" "$work/err" || fail "$what: \"$want\" not in: $(cat "$work/err")"
}
rm -rf "$work"
mkdir -p "$work"
golden="python3 $src/tests/fib_golden.py"
seed_def=$src/fib/definitions/gqa_paged/gqa_paged_decode_h20_kv4_d128_ps64.json
$golden make "$work/g" "$seed_def" || { echo "FAIL: cannot write the golden data"; exit 1; }
good=$work/g/good
D=gqa_paged_decode_h4_kv2_d8_ps4
S=gqa_paged_decode_h20_kv4_d128_ps64

# ---- import ------------------------------------------------------------------------------------
"$kvfuzz" import-fib -o "$work/A" "$good" >"$work/import.out" 2>"$work/import.err" \
  || fail "import of the golden dataset: $(cat "$work/import.err")"
grep -q "5 case(s) written" "$work/import.out" || fail "import wrote: $(cat "$work/import.out")"
grep -q "skipped 1 definitions that are not gqa_paged_decode" "$work/import.err" \
  || fail "the gemm definition was not reported as skipped: $(cat "$work/import.err")"
for u in w-all-stored w-random-q w-random-qkv; do
  $golden check-kvfz "$work/A/${D}_$u.kvfz" $u || fail "imported $u differs from the golden data"
done
$golden check-kvfz "$work/A/${S}_seed-w1.kvfz" seed-w1 || fail "imported seed-w1 differs from the golden data"
$golden check-kvfz "$work/A/gqa_paged_decode_h4_kv2_d8_ps1_w-ps1.kvfz" w-ps1 || fail "imported w-ps1 differs from the golden data"
"$kvfuzz" show "$work/A/${D}_w-random-q.kvfz" >"$work/show.json" 2>&1 || fail "show: $(cat "$work/show.json")"
python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["origin"]; assert o=={"definition": "gqa_paged_decode_h4_kv2_d8_ps4", "workload_uuid": "w-random-q", "random_inputs": ["q"], "random_seed": 0}, o' \
  "$work/show.json" || fail "show does not print the origin: $(grep origin "$work/show.json")"

# The seed definition's workload has the seed preset's shape.
"$kvfuzz" gen --preset seed-h20kv4 --seed 1 -o "$work/preset.kvfz" >/dev/null || fail "gen --preset seed-h20kv4"
"$kvfuzz" show "$work/preset.kvfz" | grep -E '"(shape|batch_size|num_pages|total_tokens)"' >"$work/preset.shape"
"$kvfuzz" show "$work/A/${S}_seed-w1.kvfz" | grep -E '"(shape|batch_size|num_pages|total_tokens)"' >"$work/seed.shape"
[ "$(wc -l <"$work/seed.shape")" -eq 4 ] && cmp -s "$work/preset.shape" "$work/seed.shape" \
  || fail "the imported seed workload's shape differs from the preset's: $(diff "$work/preset.shape" "$work/seed.shape")"

# The same seed gives the same bytes; another seed other random values, recorded.
"$kvfuzz" import-fib -o "$work/A2" "$good" >/dev/null 2>&1
for f in "$work"/A/*.kvfz; do cmp -s "$f" "$work/A2/$(basename "$f")" || fail "a second import of $(basename "$f") differs"; done
"$kvfuzz" import-fib --seed 5 --definition $D -o "$work/A5" "$good" >/dev/null 2>&1 || fail "import --seed 5 --definition"
[ "$(ls "$work/A5" | wc -l)" -eq 3 ] || fail "--definition $D imported $(ls "$work/A5" | wc -l) cases, not 3"
cmp -s "$work/A/${D}_w-random-q.kvfz" "$work/A5/${D}_w-random-q.kvfz" && fail "--seed 5 drew the same random q as seed 0"
"$kvfuzz" show "$work/A5/${D}_w-random-q.kvfz" | python3 -c 'import json,sys; assert json.load(sys.stdin)["origin"]["random_seed"] == 5' || fail "the seed 5 is not recorded"
$golden check-kvfz "$work/A5/${D}_w-random-q.kvfz" w-random-q >/dev/null || fail "--seed changed stored tensors"

# A definition and a workloads file, the dataset root found from FIB's layout.
"$kvfuzz" import-fib -o "$work/F" "$good/definitions/gqa_paged/$D.json" "$good/workloads/gqa_paged/$D.jsonl" \
  >/dev/null 2>"$work/f.err" || fail "import of one definition and workloads file: $(cat "$work/f.err")"
for f in "$work"/F/*.kvfz; do cmp -s "$f" "$work/A/$(basename "$f")" || fail "file-mode import of $(basename "$f") differs"; done
(cd "$good" && "$kvfuzz" import-fib -o "$work/F2" definitions/gqa_paged/$D.json workloads/gqa_paged/$D.jsonl) \
  >/dev/null 2>"$work/f2.err" || fail "import with relative paths from the dataset root: $(cat "$work/f2.err")"

# A dataset folder whose name holds glob characters is read as itself: "ds[1]" was taken for
# "ds1" (refused, or another folder's definitions read when one by that name existed).
cp -r "$good" "$work/ds[1]"
mkdir -p "$work/ds1/definitions/gqa_paged"
cp "$good/definitions/gqa_paged/$S.json" "$work/ds1/definitions/gqa_paged/"
"$kvfuzz" import-fib -o "$work/Bracket" "$work/ds[1]" >"$work/bracket.out" 2>"$work/bracket.err" \
  || fail "import of a dataset named ds[1]: $(cat "$work/bracket.err")"
for f in "$work"/A/*.kvfz; do
  cmp -s "$f" "$work/Bracket/$(basename "$f")" || fail "the import of ds[1] differs at $(basename "$f")"
done

# ---- export and the round trip ---------------------------------------------------------------
"$kvfuzz" export-fib --kernel cpu-ref -o "$work/D2" "$work/A" >"$work/export.out" 2>&1 \
  || fail "export: $(cat "$work/export.out")"
$golden check-export "$work/D2" w-all-stored w-random-q w-random-qkv seed-w1 w-ps1 || fail "the export differs from the golden data"
grep -q "^${D}_w-random-qkv.kvfz (kernel cpu-ref): strict pass, fa pass, fib pass" "$work/export.out" \
  || fail "export does not print strict and fib verdicts: $(cat "$work/export.out")"
$golden check-fib "$work/D2" || fail "the export is not valid as FIB reads it"
[ -e "$work/D2/traces/gqa_paged" ] && fail "traces/gqa_paged/ is written: FIB's validator reads traces/<author>/<op_type>/"
python3 - "$work/D2" $D <<'PY' || fail "the traces do not name the kvfuzz solution record beside them"
import json, sys
root, d = sys.argv[1], sys.argv[2]
t = json.loads(open("%s/traces/kvfuzz/gqa_paged/%s.jsonl" % (root, d)).readline())
name = "kvfuzz-cpu-ref-h4_kv2_d8_ps4"
s = json.load(open("%s/solutions/kvfuzz/gqa_paged/%s/%s.json" % (root, d, name)))
assert t["solution"] == name == s["name"] and s["author"] == "kvfuzz" and s["definition"] == d, (t["solution"], s)
src = s["sources"][0]["content"]
assert 'KERNEL = "cpu-ref"' in src and "def run(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse):" in src, src
PY
"$kvfuzz" import-fib -o "$work/B" "$work/D2" >/dev/null 2>"$work/b.err" || fail "re-import of the export: $(cat "$work/b.err")"
for f in "$work"/A/*.kvfz; do
  cmp -s "$f" "$work/B/$(basename "$f")" || fail "import -> export -> import changed $(basename "$f")"
done

# A dataset is written whole or not at all, never into an existing one: a second export to
# D2 is refused and leaves D2 as it was; an export whose every finding is refused leaves no
# folder; no partial folder is left beside a finished one.
(cd "$work/D2" && find . -type f | sort | xargs md5sum) >"$work/d2.before"
"$kvfuzz" export-fib --kernel cpu-ref -o "$work/D2" "$work/A" >"$work/again.out" 2>"$work/again.err"
[ $? -eq 2 ] || fail "export into an existing dataset does not exit 2"
grep -q "D2 exists and is not an empty folder: export-fib writes a new dataset" "$work/again.err" &&
  [ "$(wc -l <"$work/again.err")" -eq 1 ] || fail "export into an existing dataset: $(cat "$work/again.err")"
(cd "$work/D2" && find . -type f | sort | xargs md5sum) | cmp -s - "$work/d2.before" ||
  fail "a refused export changed the existing dataset"
ls -d "$work"/*.partial-* >/dev/null 2>&1 && fail "a partial dataset folder was left behind: $(ls -d "$work"/*.partial-*)"
mkdir -p "$work/empty-out"
"$kvfuzz" export-fib --kernel cpu-ref -o "$work/empty-out" "$work/A/${D}_w-random-q.kvfz" >/dev/null 2>&1 ||
  fail "export into an empty folder fails"
[ -f "$work/empty-out/definitions/gqa_paged/$D.json" ] || fail "export into an empty folder wrote no definition"

# The fib verdict beside strict's: a truncating store fails strict but passes FIB's check; an
# lse in the wrong base fails both.
"$kvfuzz" export-fib --kernel cpu-splitkv/mut=trunc-store -o "$work/M1" "$work/A/${D}_w-random-qkv.kvfz" >"$work/m1.out" 2>&1
grep -q "strict o-tolerance, fa o-tolerance, fib pass: FIB will not see it" "$work/m1.out" || fail "trunc-store export: $(cat "$work/m1.out")"
python3 -c "import json,sys; t=json.loads(open(sys.argv[1]).readline()); e=t['evaluation']; assert e['status']=='PASSED' and e['correctness']['extra']['kvfuzz']['verdicts'][0]['pass'] is False" \
  "$work/M1/traces/kvfuzz/gqa_paged/$D.jsonl" || fail "the trunc-store trace does not record strict's failure under a FIB PASSED status"
"$kvfuzz" export-fib --kernel cpu-splitkv/mut=natural-log-lse -o "$work/M2" "$work/A/${D}_w-random-qkv.kvfz" >"$work/m2.out" 2>&1
grep -q "strict lse-tolerance, fa [a-z-]*, fib lse-tolerance: FIB reproduces it" "$work/m2.out" || fail "natural-log-lse export: $(cat "$work/m2.out")"
grep -q '"status":"INCORRECT_NUMERICAL"' "$work/M2/traces/kvfuzz/gqa_paged/$D.jsonl" || fail "the natural-log-lse trace is not INCORRECT_NUMERICAL"
for m in M1 M2; do $golden check-fib "$work/$m" >/dev/null || fail "the $m export is not valid as FIB reads it"; done
# The shipped seed definition is the one the export writes for that shape.
cmp -s "$seed_def" "$work/D2/definitions/gqa_paged/$S.json" || fail "the export's $S.json differs from $seed_def"

# A finding (a report beside it) goes out under its own name, with the kernel its report names
# and the workload it came from in the trace; one that cannot be exported (a pool of 2^31 page
# ids, past what a blob holds) is refused in one sentence while the others still go out.
mkdir -p "$work/fnd"
cp "$work/A/${D}_w-random-q.kvfz" "$work/fnd/o-tolerance-0123456789ab.kvfz"
echo '{"kernel": "cpu-splitkv"}' >"$work/fnd/o-tolerance-0123456789ab.json"
"$kvfuzz" gen --preset high-page-ids --seed 1 -o "$work/fnd/high.kvfz" >/dev/null
echo '{"kernel": "cpu-splitkv"}' >"$work/fnd/high.json"
"$kvfuzz" export-fib -o "$work/D3" "$work/fnd" >"$work/d3.out" 2>"$work/d3.err"
rc=$?
[ $rc -eq 2 ] || fail "export with an unexportable finding: exit $rc, not 2"
[ "$(wc -l <"$work/d3.err")" -eq 1 ] && grep -q "high.kvfz: the case's page pool is .* a FIB blob holds every page" "$work/d3.err" \
  || fail "the unexportable finding's sentence: $(cat "$work/d3.err")"
grep -q "o-tolerance-0123456789ab.kvfz (kernel cpu-splitkv): strict pass" "$work/d3.out" || fail "the finding's kernel: $(cat "$work/d3.out")"
python3 -c "import json,sys; t=json.loads(open(sys.argv[1]).readline()); x=t['evaluation']['correctness']['extra']['kvfuzz']; assert t['workload']['uuid']=='o-tolerance-0123456789ab' and x['origin']=={'definition': sys.argv[2], 'workload_uuid': 'w-random-q'}" \
  "$work/D3/traces/kvfuzz/gqa_paged/$D.jsonl" $D || fail "the finding's trace does not carry its name and origin"
$golden check-fib "$work/D3" >/dev/null || fail "the D3 export is not valid as FIB reads it"

# ---- what FIB's own writers leave out: "type" --------------------------------------------------
# save_json_file writes exclude_unset: AxisVar() is {}, AxisConst(value=2) {"value": 2}, and
# inputs built without "type" have none; pydantic defaults them (docs/fib.md).
T=gqa_paged_decode_h4_kv2_d8_ps2
"$kvfuzz" import-fib -o "$work/T" "$work/g/typeless" >"$work/t.out" 2>&1 || fail "import of typeless definitions and inputs: $(cat "$work/t.out")"
for u in w-typeless w-lax; do
  $golden check-kvfz "$work/T/${T}_$u.kvfz" $u >/dev/null || fail "typeless $u differs from the golden data"
done
grep -q "workload w-lax: .*random q from seed 0" "$work/t.out" || fail "an input {} is not drawn as random: $(cat "$work/t.out")"

# ---- a kernel that is a FIB solution: its own record goes into the dataset ---------------------
# The stand-in torch makes its launch fail (a crash finding, a RUNTIME_ERROR trace): what is
# checked is the record, under the solution's author and name, which the trace names.
python3 - "$work/my_decode.json" <<'PY'
import json, sys
json.dump({"name": "my_decode", "definition": "gqa_paged_decode_h4_kv2_d8_ps4", "author": "me",
           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run",
                    "destination_passing_style": True},
           "sources": [{"path": "main.py", "content": "def run(*args):\n    raise RuntimeError\n"}]},
          open(sys.argv[1], "w"))
PY
PYTHONPATH="$src/tests/python/stub_torch" "$kvfuzz" export-fib --kernel "$work/my_decode.json" -o "$work/S" \
  "$work/A/${D}_w-random-q.kvfz" >"$work/s.out" 2>&1 || fail "export with a FIB solution kernel: $(cat "$work/s.out")"
$golden check-fib "$work/S" >/dev/null || fail "the FIB solution's export is not valid as FIB reads it"
python3 - "$work/S" "$work/my_decode.json" <<'PY' || fail "the FIB solution's record is not its own"
import json, sys
root, orig = sys.argv[1], json.load(open(sys.argv[2]))
s = json.load(open(root + "/solutions/me/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps4/my_decode.json"))
assert s == orig, s
t = json.loads(open(root + "/traces/me/gqa_paged/gqa_paged_decode_h4_kv2_d8_ps4.jsonl").readline())
assert t["solution"] == "my_decode" and t["evaluation"]["status"] == "RUNTIME_ERROR", t["evaluation"]
PY

# ---- empty batches, FIB's error figures and the wrong reason -----------------------------------
# A batch whose every sequence is empty has num_kv_indices = kv_indptr[-1] = 0, which FIB's
# validator rejects: refused in one sentence. An empty sequence between non-empty ones exports;
# on it each kernel's trace holds what FIB's DefaultEvaluator records: the correct -inf lse
# stops its check with inf and inf (INCORRECT_NUMERICAL for every kernel: the wrong reason), a
# finite lse there gives abs inf and rel inf/inf = NaN, which Python's max() drops (PASSED), a
# NaN gives NaN and NaN.
"$kvfuzz" import-fib -o "$work/E" "$work/g/empty" >/dev/null 2>&1 || fail "import of the empty batches"
refuse "a batch without a page-table entry" \
  "w-all-empty.kvfz: the case has no page-table entry (every sequence is empty), and FIB's validator requires num_kv_indices, which must equal kv_indptr\[-1\], to be positive" \
  export-fib --kernel cpu-ref -o "$work/E1" "$work/E/${D}_w-all-empty.kvfz"
[ -e "$work/E1" ] && fail "a refused empty batch left a dataset"
mkdir -p "$work/ef"
for k in cpu-ref cpu-splitkv/mut=trunc-store cpu-splitkv/mut=finite-mask-sentinel cpu-splitkv/mut=merge-empty-nan; do
  n=${k##*=}
  cp "$work/E/${D}_w-empty-mid.kvfz" "$work/ef/$n.kvfz"
  echo "{\"kernel\": \"$k\"}" >"$work/ef/$n.json"
done
cp "$work/E/${D}_w-all-empty.kvfz" "$work/ef/all-empty.kvfz"
echo '{"kernel": "cpu-ref"}' >"$work/ef/all-empty.json"
"$kvfuzz" export-fib -o "$work/E2" "$work/ef" >"$work/e2.out" 2>"$work/e2.err"
[ $? -eq 2 ] || fail "an export with an empty batch among its findings does not exit 2"
grep -q "all-empty.kvfz: the case has no page-table entry" "$work/e2.err" && [ "$(wc -l <"$work/e2.err")" -eq 1 ] ||
  fail "the empty batch's sentence: $(cat "$work/e2.err")"
$golden check-fib "$work/E2" >/dev/null || fail "the export with an empty sequence is not valid as FIB reads it"
wrong="FIB flags it for the wrong reason (its check fails the -inf lse of an empty sequence, which is correct, in every kernel)"
grep -qF "cpu-ref.kvfz (kernel cpu-ref): strict pass, fa pass, fib benign: $wrong" "$work/e2.out" ||
  fail "a correct kernel on an empty sequence: $(grep cpu-ref.kvfz "$work/e2.out")"
grep -qF "trunc-store.kvfz (kernel cpu-splitkv/mut=trunc-store): strict o-tolerance, fa o-tolerance, fib benign: $wrong; the defect itself passes FIB's check" "$work/e2.out" ||
  fail "a defect FIB passes beside an empty sequence: $(grep trunc-store.kvfz "$work/e2.out")"
figures() { [ "$($golden trace "$work/E2" "$1")" = "$2" ] || fail "$1's trace records $($golden trace "$work/E2" "$1"), FIB's evaluator $2"; }
figures cpu-ref "INCORRECT_NUMERICAL Infinity Infinity"
figures trunc-store "INCORRECT_NUMERICAL Infinity Infinity"
figures merge-empty-nan "INCORRECT_NUMERICAL NaN NaN"
case "$($golden trace "$work/E2" finite-mask-sentinel)" in
  "PASSED Infinity "[0-9]*) ;; # rel: the output's, finite: the lse's NaN was dropped
  *) fail "finite-mask-sentinel's trace records $($golden trace "$work/E2" finite-mask-sentinel)" ;;
esac

# ---- FP8 caches --------------------------------------------------------------------------------
# e4m3 and e5m2 findings with one scale per cache go out as kvfuzz's FP8 definitions of their
# shape (the shipped ones for the seed shape): FP8 caches as their bytes, k_scale and v_scale as
# F32 [1], both in the blob and named by the workload; kvfuzz's solution record takes the scales.
mkdir -p "$work/fp8"
for dt in e4m3 e5m2; do
  "$kvfuzz" gen --preset tail-nan --seed 2 --k-dtype $dt --k-scale 0.375 --v-scale 3 -o "$work/fp8/$dt.kvfz" >/dev/null ||
    fail "gen --k-dtype $dt"
done
"$kvfuzz" export-fib --kernel cpu-ref -o "$work/Q" "$work/fp8" >"$work/q.out" 2>&1 || fail "export of FP8 findings: $(cat "$work/q.out")"
grep -q "^e4m3.kvfz (kernel cpu-ref): strict pass" "$work/q.out" || fail "the e4m3 finding's line: $(cat "$work/q.out")"
$golden check-fib "$work/Q" || fail "the FP8 export is not valid as FIB reads it"
for dt in e4m3 e5m2; do
  cmp -s "$src/fib/definitions/gqa_paged/${S}_fp8_$dt.json" "$work/Q/definitions/gqa_paged/${S}_fp8_$dt.json" ||
    fail "the export's ${S}_fp8_$dt.json differs from the shipped one"
done
python3 - "$work/Q" $S <<'PY' || fail "the FP8 blobs, workloads or solution records"
import json, struct, sys
root, shape = sys.argv[1], sys.argv[2]
for dt, st in (("e4m3", "F8_E4M3"), ("e5m2", "F8_E5M2")):
    d = "%s_fp8_%s" % (shape, dt)
    w = json.loads(open("%s/workloads/gqa_paged/%s.jsonl" % (root, d)).readline())["workload"]
    assert list(w["inputs"])[-3:] == ["sm_scale", "k_scale", "v_scale"], list(w["inputs"])
    b = open("%s/%s" % (root, w["inputs"]["k_scale"]["path"]), "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    h, data = json.loads(b[8:8 + n]), b[8 + n:]
    for name in ("k_cache", "v_cache"):
        assert h[name]["dtype"] == st and h[name]["shape"][1:] == [64, 4, 128], (name, h[name])
        lo, hi = h[name]["data_offsets"]
        assert hi - lo == h[name]["shape"][0] * 64 * 4 * 128, "one byte per element"
    for name, want in (("k_scale", 0.375), ("v_scale", 3.0)):
        lo, hi = h[name]["data_offsets"]
        assert h[name]["dtype"] == "F32" and h[name]["shape"] == [1] and struct.unpack("<f", data[lo:hi])[0] == want, h[name]
    s = json.load(open("%s/solutions/kvfuzz/gqa_paged/%s/kvfuzz-cpu-ref-%s.json" % (root, d, d[len("gqa_paged_decode_"):])))
    assert "sm_scale, k_scale, v_scale, output, lse):" in s["sources"][0]["content"]
PY
# Quantizations no definition covers are refused before the run, in one sentence each.
for q in "head:--k-dtype e4m3 --scales head:its scales are per KV head" \
  "token:--k-dtype e5m2 --scales token:its scales are per page slot and KV head" \
  "mixed:--k-dtype e4m3 --v-dtype e5m2:its caches differ in dtype" \
  "none:--k-dtype e4m3 --scales none:its FP8 caches have no scales"; do
  IFS=: read -r name opts why <<<"$q"
  # shellcheck disable=SC2086 # opts are words
  "$kvfuzz" gen --preset tail-nan $opts -o "$work/fp8-$name.kvfz" >/dev/null || fail "gen $opts"
  refuse "an FP8 finding with $name scales" "fp8-$name.kvfz: the case's quantization (.*) has no FlashInfer-Bench definition: $why" \
    export-fib --kernel cpu-ref -o "$work/Q-$name" "$work/fp8-$name.kvfz"
done
# Reading FP8 workloads back: FIB's own layout and bytes (the golden e4m3 and e5m2 workloads,
# their NaN, inf, -0 and subnormal bytes as their images, a random v_cache drawn as FIB draws
# it) and kvfuzz's export; export -> import -> export -> import is identical.
"$kvfuzz" import-fib -o "$work/QG" "$work/g/fp8" >/dev/null 2>"$work/qg.err" || fail "import of the golden FP8 workloads: $(cat "$work/qg.err")"
for u in w-fp8-e4m3 w-fp8-e5m2; do
  f=$(ls "$work/QG"/*_$u.kvfz)
  $golden check-kvfz "$f" $u || fail "imported $u differs from the golden FP8 bytes"
done
"$kvfuzz" import-fib -o "$work/QB" "$work/Q" >/dev/null 2>"$work/qb.err" || fail "re-import of the FP8 export: $(cat "$work/qb.err")"
"$kvfuzz" export-fib --kernel cpu-ref -o "$work/Q2" "$work/QB" >/dev/null 2>&1 || fail "export of the imported FP8 cases"
python3 - "$work/Q" "$work/Q2" $S <<'PY' || fail "export -> import -> export changed an FP8 blob's tensors"
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack_from("<Q", b)[0]
    h, data = json.loads(b[8:8 + n]), b[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
for dt in ("e4m3", "e5m2"):
    d = "%s_fp8_%s" % (sys.argv[3], dt)
    rel = "/blob/workloads/gqa_paged/%s/%s_%s.safetensors" % (d, d, dt)
    assert tensors(sys.argv[1] + rel) == tensors(sys.argv[2] + rel), dt  # the metadata gains the origin
PY
"$kvfuzz" import-fib -o "$work/QB2" "$work/Q2" >/dev/null 2>&1 || fail "re-import of the second FP8 export"
for f in "$work"/QB/*.kvfz; do cmp -s "$f" "$work/QB2/$(basename "$f")" || fail "the FP8 round trip changed $(basename "$f")"; done

# ---- malformed inputs: exit 2 and one sentence each ------------------------------------------
bad() { refuse "$1" "$2" import-fib -o "$work/bad-out" "$work/g/bad/$1/definition.json" "$work/g/bad/$1/workloads.jsonl"; }
bad lfs-pointer "is a Git LFS pointer, not the tensor data"
bad shape-mismatch "q is BF16 \[3, 4, 9\] in blob.safetensors, but the definition says bfloat16 \[3, 4, 8\]"
bad dtype-mismatch "kv_indices is I64 \[3\] in blob.safetensors, but the definition says int32"
bad random-kv-indptr "leaves kv_indptr random"
bad random-kv-indices "leaves kv_indices random"
bad random-kv-last-page-len "leaves kv_last_page_len random"
bad indptr-end "kv_indptr ends at 2 but there are 3 kv_indices"
bad last-len-zero "kv_last_page_len\[2\] is 0, outside 1..4 (the page size); FIB's reference would have clamped it"
bad last-len-past-page "kv_last_page_len\[2\] is 5, outside 1..4 (the page size); FIB's reference would have clamped it"
bad not-decode "is not paged decode"
bad unknown-dtype-definition "has the unknown dtype \"bfloat17\""
bad unknown-dtype-blob "tensor \"q\" has the unknown dtype \"BF17\""
bad offsets-overlap "overlap the tensor before it"
bad offsets-gap "leaving a gap after byte"
bad offsets-past-end "run past the"
bad header-over-100MB "over the limit of 100 MB"
bad typeless-var-axis-with-value "axis batch_size is not var (FIB reads an axis with an integer value and no type as const)"
bad typeless-const-axis-without-value "axis num_kv_heads is not const with a value in \[1, 65535\]"
bad fp8-cache-dtype "k_cache is BF16 \[6, 4, 2, 8\] in blob.safetensors, but the definition says float8_e4m3fn \[6, 4, 2, 8\]"
bad fp8-scale-shape "k_scale is F32 \[2\] in blob.safetensors, but the definition says float32 \[1\]"
bad fp8-scale-nan "workload bad's k_scale is nan; kvfuzz takes a finite, positive scale (the keys are k_scale \* k_cache)"
bad fp8-scale-negative "workload bad's v_scale is -1.5; kvfuzz takes a finite, positive scale"
bad fp8-scale-random "workload bad leaves k_scale random: FIB would draw it with randn"
bad fp8-mixed-definition "k_cache is float8_e4m3fn and its v_cache float8_e5m2; kvfuzz's FP8 definitions hold both caches in one dtype"
bad fp8-no-scales "is not paged decode as kvfuzz runs it: kvfuzz imports gqa_paged_decode definitions with float8_e4m3fn caches taking (.*, sm_scale, k_scale, v_scale)"
# A workload whose pool the memory budget refuses is refused before the pool is drawn (it was
# drawn and written, a case every other command then refused), and writes nothing; a batch
# size at the top of int64 is named, not overflowed into len_indptr's check.
python3 - "$good/workloads/gqa_paged/$D.jsonl" "$work/huge" <<'PY'
import json, os, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
os.makedirs(sys.argv[2], exist_ok=True)
big = [l for l in lines if l["workload"]["uuid"] == "w-random-qkv"][0]
big["workload"]["uuid"] = "big-pool"
big["workload"]["axes"]["num_pages"] = 1000000
open(sys.argv[2] + "/pool.jsonl", "w").write(json.dumps(big) + "\n")
wide = json.loads(json.dumps(lines[0]))
wide["workload"]["axes"].update(batch_size=2**63 - 1, len_indptr=2**63 - 1)
open(sys.argv[2] + "/batch.jsonl", "w").write(json.dumps(wide) + "\n")
PY
KVF_MAX_MEMORY_MIB=64 refuse "a random pool past the memory budget" \
  "explicit pool of 1000000 pages needs about .* past the memory budget of 64.00 MiB" import-fib --root "$good" -o "$work/huge/out" \
  "$good/definitions/gqa_paged/$D.json" "$work/huge/pool.jsonl"
[ -z "$(ls -A "$work/huge/out" 2>/dev/null)" ] || fail "the refused pool left files: $(ls "$work/huge/out")"
refuse "batch_size 2^63 - 1" "len_indptr 9223372036854775807 but batch_size 9223372036854775807" \
  import-fib --root "$good" -o "$work/huge/out" "$good/definitions/gqa_paged/$D.json" "$work/huge/batch.jsonl"
# A line that is not JSON is named once: "FILE line 1: FILE line 1 is not JSON" said it twice.
printf 'not json\n' >"$work/huge/garbage.jsonl"
refuse "a line that is not JSON" "^kvfuzz import-fib: [^ ]*garbage.jsonl line 1 is not JSON: " \
  import-fib --root "$good" -o "$work/huge/out" "$good/definitions/gqa_paged/$D.json" "$work/huge/garbage.jsonl"
refuse "no -o" "-o DIR is required" import-fib "$good"
refuse "unknown option" "unknown option \"--frobnicate\"" import-fib --frobnicate -o "$work/x" "$good"
refuse "bad seed" "--seed must be a decimal integer" import-fib --seed -3 -o "$work/x" "$good"
refuse "definition file alone" "is not a dataset folder" import-fib -o "$work/x" "$seed_def"
refuse "unknown definition" "has no definition nope" import-fib --definition nope -o "$work/x" "$good"
cp "$work/A/${D}_w-random-q.kvfz" "$work/lonely.kvfz"
refuse "finding without a report" "has no report beside it naming its kernel" export-fib -o "$work/xe" "$work/lonely.kvfz"
refuse "export without -o" "-o DIR is required" export-fib "$work/lonely.kvfz"
# The report beside a finding is read like a case file: a FIFO is refused at once (it blocked
# the export forever), a malformed one is named as such (it was taken for no report at all).
mkdir -p "$work/rep"
cp "$work/lonely.kvfz" "$work/rep/o-tolerance-fifo.kvfz"
mkfifo "$work/rep/o-tolerance-fifo.json"
refuse "finding whose report is a FIFO" "o-tolerance-fifo.json is a FIFO, not a regular file" \
  export-fib -o "$work/xe" "$work/rep/o-tolerance-fifo.kvfz"
cp "$work/lonely.kvfz" "$work/rep/o-tolerance-bad.kvfz"
echo '{"kernel": "cpu-ref",' >"$work/rep/o-tolerance-bad.json"
refuse "finding whose report is malformed" "the report .*o-tolerance-bad.json is not JSON" \
  export-fib -o "$work/xe" "$work/rep/o-tolerance-bad.kvfz"
# Every finding refused: no dataset folder, and no partial one, is left.
[ -e "$work/xe" ] && fail "refused exports left the dataset folder $work/xe"
ls -d "$work"/*.partial-* >/dev/null 2>&1 && fail "a partial dataset folder was left behind: $(ls -d "$work"/*.partial-*)"

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "FlashInfer-Bench interop: golden import and export bit for bit, round trip identical, every malformed input refused"
